//! bspq: collision queries against compiled BSP worlds.
//!
//! Data path: [`source`] (Quake 3 BSP, pk3) → [`compile`] (solid-leaf BSP with
//! brush and patch references) → [`world`] (the immutable world) → [`trace`]
//! (the query kernel). The kernel knows nothing of I/O or networking.
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
pub mod map;
pub mod margins;
pub mod math;
#[cfg(feature = "server")]
pub mod metrics;
#[cfg(feature = "server")]
pub mod proto;
pub mod query;
#[cfg(feature = "server")]
pub mod registry;
#[cfg(feature = "server")]
pub mod server;
#[cfg(feature = "server")]
pub mod service;
pub mod source;
pub mod trace;
#[cfg(feature = "server")]
pub mod transport;
#[cfg(feature = "server")]
pub mod watcher;
pub mod world;
