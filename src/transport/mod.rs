//! Network front ends over the transport-free [`crate::service::Service`].

pub mod grpc;
pub mod http;
