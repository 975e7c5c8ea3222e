//! Network front ends over the transport-free [`crate::service::Service`].

pub(crate) mod accept;
pub mod admission;
pub(crate) mod body_admission;
pub(crate) mod body_deadline;
pub mod connections;
pub mod grpc;
pub(crate) mod head_errors;
pub mod http;
pub mod http_listener;
mod recent;
mod ui;

use crate::metrics::Metrics;
use crate::service::{Service, ServiceError};
use std::sync::Arc;
use std::time::Instant;

/// Batches of at most this many queries are answered on the task that
/// received them: a 64-query tick takes a fraction of a millisecond, less
/// than the hand-off to the blocking pool and back adds to its latency on
/// a busy machine. Larger batches go to the blocking pool, so the reactor
/// threads never stall on one.
pub(crate) const INLINE_QUERIES: usize = 128;

/// Runs service work, counting it in the in-flight gauge and the latency
/// histogram: a batch of `queries` is first admitted against the server's
/// budget (see [`admission`]); a small one runs on the calling task, else
/// (and work that is not a batch, `None`) on the blocking pool (never on
/// the reactor).
pub(crate) async fn run_work<T: Send + 'static>(
    service: &Arc<Service>,
    metrics: &Metrics,
    (kind, transport): (&'static str, &'static str),
    queries: Option<usize>,
    work: impl FnOnce(&Service) -> Result<T, ServiceError> + Send + 'static,
) -> Result<T, ServiceError> {
    let inline = queries.is_some_and(|n| n <= INLINE_QUERIES);
    let _admitted = queries.map(|n| service.admission.admit(n)).transpose()?;
    let started = Instant::now();
    metrics.in_flight.inc();
    let result = if inline {
        work(service)
    } else {
        let service = Arc::clone(service);
        tokio::task::spawn_blocking(move || work(&service))
            .await
            .unwrap_or_else(|e| Err(ServiceError::Internal(format!("worker failed: {e}"))))
    };
    metrics.in_flight.dec();
    metrics
        .latency
        .with_label_values(&[kind, transport])
        .observe(started.elapsed().as_secs_f64());
    result
}
