//! Prometheus metrics: one registry, explicit histogram buckets.

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};
use std::sync::Mutex;

/// Latency buckets in seconds: 50 µs to 5 s.
const LATENCY_BUCKETS: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0,
];
/// Batch-size buckets in queries.
const BATCH_BUCKETS: &[f64] = &[
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0,
];

#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub requests: IntCounterVec,
    pub queries: IntCounterVec,
    pub request_errors: IntCounterVec,
    pub latency: HistogramVec,
    pub batch_size: HistogramVec,
    /// Mirrors the world registry at each scrape ([`Metrics::render`]).
    world_version: IntGaugeVec,
    /// Mirrors the registry's failure tallies at each scrape, so every
    /// failed load counts whichever path loaded it (start-up, directory,
    /// upload) and only names the registry accepted become labels.
    load_failures: IntCounterVec,
    pub in_flight: IntGauge,
    /// Connections open now, both listeners together.
    pub connections_open: IntGauge,
    /// Connections closed at once because the server held its maximum.
    pub connections_refused: IntCounterVec,
    /// Failed accepts (out of descriptors or memory, …), by transport.
    pub accept_errors: IntCounterVec,
    /// Held while the mirrored series are rebuilt and encoded, so that no
    /// scrape sees them half rebuilt (a counter dipping to 0 would read as
    /// a reset).
    scrape: Mutex<()>,
}

impl Metrics {
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "bspq_requests_total",
                "Requests by world, kind and transport",
            ),
            &["world", "kind", "transport"],
        )?;
        let queries = IntCounterVec::new(
            Opts::new(
                "bspq_queries_total",
                "Queries answered by world, kind and transport",
            ),
            &["world", "kind", "transport"],
        )?;
        let request_errors = IntCounterVec::new(
            Opts::new(
                "bspq_request_errors_total",
                "Rejected requests by error code and transport",
            ),
            &["code", "transport"],
        )?;
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "bspq_request_duration_seconds",
                "Request latency in seconds",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["kind", "transport"],
        )?;
        let batch_size = HistogramVec::new(
            HistogramOpts::new("bspq_batch_size", "Queries per request")
                .buckets(BATCH_BUCKETS.to_vec()),
            &["kind", "transport"],
        )?;
        let world_version = IntGaugeVec::new(
            Opts::new("bspq_world_version", "Version of each loaded world"),
            &["world"],
        )?;
        let load_failures = IntCounterVec::new(
            Opts::new("bspq_world_load_failures_total", "Failed world loads"),
            &["world"],
        )?;
        let in_flight = IntGauge::new("bspq_requests_in_flight", "Requests being answered")?;
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(queries.clone()))?;
        registry.register(Box::new(request_errors.clone()))?;
        registry.register(Box::new(latency.clone()))?;
        registry.register(Box::new(batch_size.clone()))?;
        registry.register(Box::new(world_version.clone()))?;
        registry.register(Box::new(load_failures.clone()))?;
        registry.register(Box::new(in_flight.clone()))?;
        let connections_open =
            IntGauge::new("bspq_connections_open", "Connections open, HTTP and gRPC")?;
        let connections_refused = IntCounterVec::new(
            Opts::new(
                "bspq_connections_refused_total",
                "Connections refused because --max-connections were open",
            ),
            &["transport"],
        )?;
        let accept_errors = IntCounterVec::new(
            Opts::new(
                "bspq_accept_errors_total",
                "Failed accepts (the listener backs off after each)",
            ),
            &["transport"],
        )?;
        registry.register(Box::new(connections_open.clone()))?;
        registry.register(Box::new(connections_refused.clone()))?;
        registry.register(Box::new(accept_errors.clone()))?;
        Ok(Self {
            registry,
            requests,
            queries,
            request_errors,
            latency,
            batch_size,
            world_version,
            load_failures,
            in_flight,
            connections_open,
            connections_refused,
            accept_errors,
            scrape: Mutex::new(()),
        })
    }

    /// Counts an answered request of `kind` (trace, contents, admin, …).
    pub fn count_request(&self, world: &str, kind: &str, transport: &str) {
        self.requests
            .with_label_values(&[world, kind, transport])
            .inc();
    }

    /// Counts an answered batch of `queries` queries.
    pub fn count_batch(&self, world: &str, kind: &str, transport: &str, queries: usize) {
        self.count_request(world, kind, transport);
        self.queries
            .with_label_values(&[world, kind, transport])
            .inc_by(queries as u64);
        self.batch_size
            .with_label_values(&[kind, transport])
            .observe(queries as f64);
    }

    /// Counts a rejected request by its error code.
    pub fn count_error(&self, code: &str, transport: &str) {
        self.request_errors
            .with_label_values(&[code, transport])
            .inc();
    }

    /// The Prometheus text exposition of every metric, the per-world series
    /// taken from `worlds` now (so an unloaded world leaves the version
    /// gauge instead of showing its last version for ever).
    pub fn render(&self, worlds: &crate::registry::Registry) -> String {
        let _scrape = self.scrape.lock().unwrap_or_else(|p| p.into_inner());
        self.world_version.reset();
        for name in worlds.names() {
            if let Some(current) = worlds.get(&name) {
                self.world_version
                    .with_label_values(&[&name])
                    .set(current.version as i64);
            }
        }
        self.load_failures.reset();
        for (name, failed) in worlds.failed_loads() {
            self.load_failures
                .with_label_values(&[&name])
                .inc_by(failed);
        }
        let mut out = Vec::new();
        let _ = prometheus::TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }
}
