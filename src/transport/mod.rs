//! Network front ends over the transport-free [`crate::service::Service`].

pub mod http;
pub mod grpc;
