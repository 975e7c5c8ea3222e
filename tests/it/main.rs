//! The integration tests, as one crate: each former `tests/*.rs` file is a
//! module here, so the suite links one test binary instead of one per file
//! (linking dominated the build). `tests/world_file_alloc.rs` stays a crate
//! of its own: it installs a global allocator that caps allocations, which
//! would apply to every test of a shared binary.

#[path = "../common/mod.rs"]
mod common;

mod batch;
mod body_budget;
mod bots;
mod cli;
mod conformance;
mod content_hash;
mod cores;
mod debug_page;
mod deploy;
mod entities;
mod features;
mod floor;
mod fuzz_regressions;
mod geometry;
mod hierarchy;
mod listing;
mod mesh_obj;
mod movement;
mod onion;
mod patch_order;
mod properties;
mod pvs;
mod robustness;
mod scene;
mod server_abuse;
mod server_config;
mod server_grpc;
mod server_http;
mod server_watch;
mod shapes;
mod single_grid;
mod trace_query;
mod wide;
mod workload;
mod world_file;
mod world_file_models;
mod world_file_mutation;
