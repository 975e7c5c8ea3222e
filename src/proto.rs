//! Code generated from `proto/bspq/v1/bspq.proto` at build time.
#![allow(clippy::all, missing_docs)]

pub mod v1 {
    tonic::include_proto!("bspq.v1");
}

/// The encoded file descriptor set of `proto/`, served by reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/bspq_descriptor.bin"));
