//! Network front ends over the transport-free [`crate::service::Service`].

pub(crate) mod accept;
pub mod grpc;
pub mod http;
pub mod http_listener;

use crate::metrics::Metrics;
use crate::service::{Service, ServiceError};
use std::sync::Arc;
use std::time::Instant;

/// Runs CPU-heavy service work on the blocking pool (never on the reactor),
/// counting it in the in-flight gauge and the latency histogram.
pub(crate) async fn run_blocking<T: Send + 'static>(
    service: &Arc<Service>,
    metrics: &Metrics,
    kind: &'static str,
    transport: &'static str,
    work: impl FnOnce(&Service) -> Result<T, ServiceError> + Send + 'static,
) -> Result<T, ServiceError> {
    let started = Instant::now();
    metrics.in_flight.inc();
    let service = Arc::clone(service);
    let result = tokio::task::spawn_blocking(move || work(&service))
        .await
        .unwrap_or_else(|e| Err(ServiceError::Internal(format!("worker failed: {e}"))));
    metrics.in_flight.dec();
    metrics
        .latency
        .with_label_values(&[kind, transport])
        .observe(started.elapsed().as_secs_f64());
    result
}
