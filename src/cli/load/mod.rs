//! `bspq load`: a load generator for a running server over HTTP, gRPC unary
//! calls or one gRPC stream per client, printing throughput and latency
//! percentiles. Bounded by `--duration` and `--max-requests`.

mod grpc;
mod http;

use anyhow::Context;
use bspq::conformance::read_lines;
use clap::{Args, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Longest wait for one answer before it counts as an error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Transport {
    /// `POST /v1/worlds/{name}/trace` with JSON bodies.
    Http,
    /// `Collision/Trace` unary calls.
    GrpcUnary,
    /// `Collision/TraceStream`: one stream per client, one batch in flight
    /// (a game server's tick loop).
    GrpcStream,
}

impl Transport {
    fn default_url(self) -> &'static str {
        match self {
            Transport::Http => "http://127.0.0.1:8080",
            Transport::GrpcUnary | Transport::GrpcStream => "http://127.0.0.1:50051",
        }
    }
}

#[derive(Args)]
pub struct LoadArgs {
    /// Server address, HOST:PORT or http://HOST:PORT (default 127.0.0.1:8080
    /// for HTTP, 127.0.0.1:50051 for gRPC).
    #[arg(long, value_name = "ADDR", value_parser = super::address::server_url)]
    url: Option<String>,
    /// World name on the server.
    #[arg(long)]
    world: String,
    /// Query lines (.jsonl or .jsonl.gz) sent round-robin; point lines are skipped.
    #[arg(long)]
    queries: PathBuf,
    /// Queries per request. gRPC batches share one box, so queries are grouped by box first.
    #[arg(long, default_value_t = 64, value_parser = super::count_up_to::<{ super::MAX_BATCH }>)]
    batch: usize,
    /// Concurrent clients (one connection each).
    #[arg(long, default_value_t = 4, value_parser = super::count_up_to::<{ super::MAX_THREADS }>)]
    concurrency: usize,
    /// Seconds to run.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Target requests per second over all clients. Open loop: each request
    /// has a scheduled time and its latency counts from then, so queueing
    /// behind a slow answer shows in the percentiles. Default: as fast as
    /// each client can go (closed loop).
    #[arg(long)]
    rate: Option<f64>,
    /// Stop after this many requests in total.
    #[arg(long, default_value_t = 10_000_000)]
    max_requests: u64,
    /// How requests reach the server.
    #[arg(long, value_enum, default_value_t = Transport::Http)]
    transport: Transport,
    /// Print one JSON object as the last line.
    #[arg(long)]
    json: bool,
}

/// What every client shares: when to stop and how many requests are left to send.
pub(crate) struct Budget {
    rate: Option<f64>,
    clients: usize,
    stop: AtomicBool,
    requests_left: AtomicU64,
    /// Why the run was cut short: an answer that every later request would
    /// get too (no such world), so that it is reported once, not counted.
    fatal: Mutex<Option<String>>,
}

impl Budget {
    /// Stops every client; the first reason given is the one reported.
    fn abort(&self, reason: String) {
        self.stop.store(true, Ordering::Relaxed);
        let mut fatal = self.fatal.lock().unwrap_or_else(|p| p.into_inner());
        fatal.get_or_insert(reason);
    }

    fn fatal(&self) -> Option<String> {
        self.fatal.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    fn pacer(&self, client: usize) -> Pacer {
        Pacer::new(self.rate, self.clients, client)
    }

    /// Takes one request from the budget; false once the time or the requests are used up.
    fn claim(&self) -> bool {
        !self.stop.load(Ordering::Relaxed)
            && self
                .requests_left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
    }
}

/// When each of a client's requests is due: evenly spaced at the client's
/// share of `--rate`, clients staggered; `None` without a rate.
pub(crate) struct Pacer {
    next: Instant,
    interval: Option<Duration>,
}

impl Pacer {
    fn new(rate: Option<f64>, clients: usize, client: usize) -> Self {
        let interval = rate.map(|r| Duration::from_secs_f64(clients as f64 / r));
        let offset = interval.map_or(Duration::ZERO, |i| {
            i.mul_f64(client as f64 / clients as f64)
        });
        Self {
            next: Instant::now() + offset,
            interval,
        }
    }

    /// The scheduled time of the next request (`None`: send now).
    fn next_slot(&mut self) -> Option<Instant> {
        let interval = self.interval?;
        let slot = self.next;
        self.next += interval;
        Some(slot)
    }
}

/// One client's record: the latency of every answered request and the errors.
#[derive(Default)]
pub(crate) struct Tally {
    latencies: Vec<f64>,
    errors: u64,
    first_error: Option<String>,
}

impl Tally {
    fn record(&mut self, started: Instant, outcome: Result<(), String>) {
        match outcome {
            Ok(()) => self.latencies.push(started.elapsed().as_secs_f64()),
            Err(e) => {
                self.errors += 1;
                self.first_error.get_or_insert(e);
            }
        }
    }

    fn merge(&mut self, other: Tally) {
        self.latencies.extend(other.latencies);
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }
}

pub fn run(args: LoadArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.duration.is_finite() && args.duration > 0.0,
        "--duration must be positive"
    );
    anyhow::ensure!(
        args.rate.is_none_or(|r| r.is_finite() && r > 0.0),
        "--rate must be positive"
    );
    let lines: Vec<String> = read_lines(&args.queries)
        .with_context(|| format!("cannot read {}", args.queries.display()))?
        .into_iter()
        .filter(|l| !l.contains("\"point\""))
        .collect();
    anyhow::ensure!(
        !lines.is_empty(),
        "no trace queries in {}",
        args.queries.display()
    );
    let url = args
        .url
        .clone()
        .unwrap_or_else(|| args.transport.default_url().to_owned());
    let budget = Arc::new(Budget {
        rate: args.rate,
        clients: args.concurrency,
        stop: AtomicBool::new(false),
        requests_left: AtomicU64::new(args.max_requests),
        fatal: Mutex::new(None),
    });
    let duration = Duration::from_secs_f64(args.duration);
    let started = Instant::now();
    let (mut tally, queries_per_request) = match args.transport {
        Transport::Http => {
            let plan = http::Plan::new(&url, &args.world, &lines, args.batch)?;
            (
                plan.run(args.concurrency, &budget, duration)?,
                args.batch as f64,
            )
        }
        Transport::GrpcUnary | Transport::GrpcStream => {
            let plan = Arc::new(grpc::Plan::new(&url, &args.world, &lines, args.batch)?);
            let mean = plan.mean_batch();
            let stream = args.transport == Transport::GrpcStream;
            (
                plan.run(args.concurrency, stream, Arc::clone(&budget), duration)?,
                mean,
            )
        }
    };
    if let Some(reason) = budget.fatal() {
        anyhow::bail!("{reason}");
    }
    let elapsed = started.elapsed().as_secs_f64();
    report(&args, &mut tally, elapsed, queries_per_request);
    Ok(if tally.errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The message of the server's JSON error body (`{"error":{"message":…}}`,
/// as both transports carry it), or the text as it is.
fn error_message(text: &str) -> String {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| text.trim().to_owned())
}

fn report(args: &LoadArgs, tally: &mut Tally, elapsed: f64, queries_per_request: f64) {
    let latencies = &mut tally.latencies;
    latencies.sort_by(f64::total_cmp);
    let ms = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
            * 1000.0
    };
    let max_ms = latencies.last().copied().unwrap_or(0.0) * 1000.0;
    let requests = latencies.len() as u64;
    let qps = requests as f64 * queries_per_request / elapsed;
    let transport = args
        .transport
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default();
    println!(
        "transport {transport}  world {}  batch {}  concurrency {}  rate {}",
        args.world,
        args.batch,
        args.concurrency,
        args.rate
            .map_or("unlimited".to_owned(), |r| format!("{r} requests/s"))
    );
    println!(
        "requests {requests} ok, {} failed in {elapsed:.2} s: {:.0} requests/s, {qps:.0} queries/s",
        tally.errors,
        requests as f64 / elapsed
    );
    println!(
        "latency ms: p50 {:.3}  p90 {:.3}  p99 {:.3}  max {max_ms:.3}",
        ms(0.50),
        ms(0.90),
        ms(0.99),
    );
    if let Some(e) = &tally.first_error {
        println!("first error: {e}");
    }
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "transport": transport, "batch": args.batch, "concurrency": args.concurrency,
                "rate": args.rate,
                "requests": requests, "errors": tally.errors, "seconds": elapsed,
                "queries_per_second": qps, "queries_per_request": queries_per_request,
                "p50_ms": ms(0.50), "p90_ms": ms(0.90), "p99_ms": ms(0.99), "max_ms": max_ms,
            })
        );
    }
}
