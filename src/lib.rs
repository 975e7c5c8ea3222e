//! bspq answers collision queries against Quake 3 worlds as Quake 3's own
//! collision code does: ray traces, box sweeps (and spheres, capsules,
//! cylinders, convex shapes and registered box hulls), line of sight and
//! point contents, one at a time or in batches on all cores.
//!
//! Start with [`Map`]: open a world, then ask it.
//!
//! ```
//! use bspq::{Map, TraceQuery, Vec3, MASK_SOLID};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/maps/q3dm6ish.bsp");
//! let map = Map::open(path)?; // a .bsp, ARCHIVE.pk3:maps/NAME.bsp or a compiled world
//! // Constructors refuse non-finite coordinates and inverted boxes.
//! let shot = TraceQuery::ray(Vec3::new(-600.0, -50.0, 50.0), Vec3::new(-600.0, -50.0, -500.0), MASK_SOLID)?;
//! let hit = map.trace(&shot);
//! println!("stopped at {} ({:.3} of the way), normal {}", hit.endpos, hit.fraction, hit.normal);
//! let contents = map.point_contents(hit.endpos);
//! # assert_eq!(contents, 0);
//! # Ok(())
//! # }
//! ```
//!
//! The data path, module by module: [`source`] (Quake 3 BSP, pk3) →
//! [`compile`] (solid-leaf BSP with brush and patch references, bevels,
//! onion hulls) → [`world`] (the validated file data, [`world::format`]
//! for the compiled world file) → [`map`] (loading any source, compiling on
//! load) → [`trace`] (the query kernel and, in [`trace::accel`], the trees
//! and grids it derives at load) → [`scene`] (entities traced with the
//! world) → [`movement`] (players moved as Quake 3 moves them, on top of
//! the traces). [`margins`] holds every margin and
//! epsilon. With the default `server` feature the crate also holds the
//! service (registry with hot swap, gRPC and HTTP transports); without it
//! (`default-features = false`) it builds without tokio, tonic or axum.
//! The `exact` feature (default) adds exact sweeps of rounded and convex
//! shapes by parry3d.
//!
//! Module overviews link to the private modules they are built from; the
//! links resolve in `cargo doc --document-private-items`.
#![allow(rustdoc::private_intra_doc_links)]

#[cfg(feature = "exact")]
pub mod accuracy;
pub mod compile;
#[cfg(feature = "server")]
pub mod config;
pub mod conformance;
pub mod contents;
pub mod geometry;
pub mod map;
pub mod margins;
pub mod math;
#[cfg(feature = "server")]
pub mod metrics;
pub mod movement;
#[cfg(feature = "server")]
pub mod proto;
pub mod query;
#[cfg(feature = "server")]
pub mod registry;
pub mod scene;
#[cfg(feature = "server")]
pub mod server;
#[cfg(feature = "server")]
pub mod service;
pub mod source;
pub mod trace;
#[cfg(feature = "server")]
pub mod transport;
#[cfg(feature = "server")]
pub mod uploads;
#[cfg(feature = "server")]
pub mod watcher;
pub mod world;

pub use contents::{MASK_OPAQUE, MASK_PLAYERSOLID, MASK_SHOT, MASK_SOLID, MASK_WATER};
pub use map::{LoadError, Map};
pub use math::Vec3;
pub use trace::{InvalidTrace, Shape, TraceQuery, TraceResult};
