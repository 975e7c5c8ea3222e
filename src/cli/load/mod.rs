//! `bspq load`: a load generator for a running server over HTTP, gRPC unary
//! calls or one gRPC stream per client, printing throughput and latency
//! percentiles, from each request's scheduled time and from the moment it
//! was sent. Bounded by `--duration` and `--max-requests`; `--sweep` finds
//! the maximum rate and measures at 10, 50 and 90 % of it.

mod grpc;
mod http;

use anyhow::Context;
use bspq::conformance::read_lines;
use bspq::query::{EntityLine, QueryLine};
use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
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
    /// Query lines (.jsonl or .jsonl.gz: traces of any shape, any-hit and
    /// points), sent in file order and round-robin, `--batch` to a request.
    #[arg(long)]
    queries: PathBuf,
    /// A scene (a file holding one `{"entities":[…]}` line) every request is
    /// traced with: sent in each HTTP body and unary call, and once per
    /// stream (the stream keeps it).
    #[arg(long, value_name = "FILE")]
    scene: Option<PathBuf>,
    /// Queries per request. A gRPC request is one tick message: a shape
    /// table with an entry per query, the points after the traces.
    #[arg(long, default_value_t = 64, value_parser = super::count_up_to::<{ super::MAX_BATCH }>)]
    batch: usize,
    /// Concurrent clients (one connection and one thread each).
    #[arg(long, default_value_t = 4, value_parser = super::count_up_to::<{ super::MAX_THREADS }>)]
    concurrency: usize,
    /// Seconds to run (each run, with `--sweep`).
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Target requests per second over all clients. Open loop: each request
    /// has a scheduled time and its latency counts from then, so queueing
    /// behind a slow answer shows in the percentiles (latency from the
    /// moment it was actually sent is reported too). Default: as fast as
    /// each client can go (closed loop).
    #[arg(long, conflicts_with = "sweep")]
    rate: Option<f64>,
    /// Find the maximum rate (a closed-loop run), then run open loop at
    /// 10 %, 50 % and 90 % of it, reporting each.
    #[arg(long)]
    sweep: bool,
    /// Stop after this many requests in total (per run).
    #[arg(long, default_value_t = 10_000_000)]
    max_requests: u64,
    /// How requests reach the server.
    #[arg(long, value_enum, default_value_t = Transport::Http)]
    transport: Transport,
    /// Print one JSON object as the last line.
    #[arg(long)]
    json: bool,
}

/// What every client of a run shares: when to stop and how many requests
/// are left to send.
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
    fn new(rate: Option<f64>, clients: usize, requests: u64) -> Self {
        Self {
            rate,
            clients,
            stop: AtomicBool::new(false),
            requests_left: AtomicU64::new(requests),
            fatal: Mutex::new(None),
        }
    }

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

    /// Waits for the next request's scheduled time and returns it (unpaced:
    /// now). The client's thread sleeps: the OS wakes it within tens of
    /// microseconds, where tokio's timer would round up to whole
    /// milliseconds and add up to one to every paced latency.
    fn wait(&mut self) -> Instant {
        let Some(interval) = self.interval else {
            return Instant::now();
        };
        let slot = self.next;
        self.next += interval;
        std::thread::sleep(slot.saturating_duration_since(Instant::now()));
        slot
    }
}

/// One client's record: the latencies of every answered request, and the errors.
#[derive(Default)]
pub(crate) struct Tally {
    /// Seconds from each request's scheduled time to its answer.
    from_schedule: Vec<f64>,
    /// Seconds from the moment each request was sent to its answer.
    from_send: Vec<f64>,
    errors: u64,
    first_error: Option<String>,
}

impl Tally {
    /// Records an answer to a request scheduled at `scheduled` and sent at `sent`.
    fn record(&mut self, scheduled: Instant, sent: Instant, outcome: Result<(), String>) {
        match outcome {
            Ok(()) => {
                let now = Instant::now();
                self.from_schedule.push((now - scheduled).as_secs_f64());
                self.from_send.push((now - sent).as_secs_f64());
            }
            Err(e) => {
                self.errors += 1;
                self.first_error.get_or_insert(e);
            }
        }
    }

    fn merge(&mut self, other: Tally) {
        self.from_schedule.extend(other.from_schedule);
        self.from_send.extend(other.from_send);
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }
}

/// Runs `client(k)` for `clients` clients on their own threads until the
/// deadline (or until every client's budget ends), and merges their tallies.
fn run_clients(
    clients: usize,
    budget: &Budget,
    duration: Duration,
    client: impl Fn(usize) -> Tally + Sync,
) -> anyhow::Result<Tally> {
    std::thread::scope(|scope| {
        let (finished_tx, finished_rx) = std::sync::mpsc::channel::<()>();
        let workers: Vec<_> = (0..clients)
            .map(|k| {
                let finished = finished_tx.clone();
                let client = &client;
                scope.spawn(move || {
                    let tally = client(k);
                    let _ = finished.send(());
                    tally
                })
            })
            .collect();
        let deadline = Instant::now() + duration;
        for _ in 0..clients {
            let left = deadline.saturating_duration_since(Instant::now());
            if finished_rx.recv_timeout(left).is_err() {
                break;
            }
        }
        budget.stop.store(true, Ordering::Relaxed);
        let mut total = Tally::default();
        for worker in workers {
            let tally = worker
                .join()
                .map_err(|_| anyhow::anyhow!("a load client panicked"))?;
            total.merge(tally);
        }
        Ok(total)
    })
}

/// The requests of one transport, built before the clock starts.
enum Plan {
    Http(http::Plan),
    Grpc(grpc::Plan),
}

impl Plan {
    fn run(&self, args: &LoadArgs, rate: Option<f64>) -> anyhow::Result<Run> {
        let budget = Budget::new(rate, args.concurrency, args.max_requests);
        let duration = Duration::from_secs_f64(args.duration);
        let started = Instant::now();
        let tally = match self {
            Plan::Http(plan) => plan.run(args.concurrency, &budget, duration)?,
            Plan::Grpc(plan) => plan.run(args.concurrency, &budget, duration)?,
        };
        if let Some(reason) = budget.fatal() {
            anyhow::bail!("{reason}");
        }
        Ok(Run::of(tally, rate, started.elapsed().as_secs_f64()))
    }

    fn queries_per_request(&self) -> f64 {
        match self {
            Plan::Http(_) => f64::NAN,
            Plan::Grpc(plan) => plan.mean_batch(),
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
        .with_context(|| format!("cannot read {}", args.queries.display()))?;
    anyhow::ensure!(
        !lines.is_empty(),
        "no queries in {}",
        args.queries.display()
    );
    let (leading_scene, queries) = checked_lines(&lines)?;
    let scene = match args.scene.as_deref() {
        Some(path) => Some(read_scene(path)?),
        None => leading_scene,
    };
    let url = args
        .url
        .clone()
        .unwrap_or_else(|| args.transport.default_url().to_owned());
    let plan = match args.transport {
        Transport::Http => Plan::Http(http::Plan::new(
            &url,
            &args.world,
            &queries,
            scene.as_deref(),
            args.batch,
        )?),
        Transport::GrpcUnary | Transport::GrpcStream => Plan::Grpc(grpc::Plan::new(
            &url,
            &args.world,
            &queries,
            scene.as_deref(),
            args.batch,
            args.transport == Transport::GrpcStream,
        )?),
    };
    let queries_per_request = match plan.queries_per_request() {
        q if q.is_nan() => args.batch as f64,
        q => q,
    };
    let runs = if args.sweep {
        let max = plan.run(&args, None)?;
        let max_rate = max.requests as f64 / max.seconds;
        let mut runs = vec![max];
        for share in [0.1, 0.5, 0.9] {
            runs.push(plan.run(&args, Some(share * max_rate))?);
        }
        runs
    } else {
        vec![plan.run(&args, args.rate)?]
    };
    let entities = scene.as_ref().map_or(0, Vec::len);
    report(&args, &runs, queries_per_request, entities);
    Ok(if runs.iter().all(|r| r.errors == 0) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Every line parsed (whether it makes sense is the server's to say: a
/// hull only it knows), and the scene of a first line `{"entities":[…]}`
/// (as `bspq workload --kind ticks` writes); a scene line anywhere else is
/// refused.
fn checked_lines(lines: &[String]) -> anyhow::Result<(Option<Vec<EntityLine>>, Vec<QueryLine>)> {
    let mut scene = None;
    let mut queries = Vec::with_capacity(lines.len());
    for (index, line) in lines.iter().enumerate() {
        let query = QueryLine::parse(line).with_context(|| format!("query line {}", index + 1))?;
        match query.scene() {
            Some(checked) if index == 0 => {
                checked.with_context(|| format!("the scene on query line {}", index + 1))?;
                scene = query.entities;
            }
            Some(_) => anyhow::bail!(
                "query line {} is a scene: only the first line may be one (or give it with --scene)",
                index + 1
            ),
            None => queries.push(query),
        }
    }
    anyhow::ensure!(!queries.is_empty(), "no queries to send");
    Ok((scene, queries))
}

/// The entities of a scene file: one `{"entities":[…]}` line.
fn read_scene(path: &Path) -> anyhow::Result<Vec<EntityLine>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the scene {}", path.display()))?;
    let line = QueryLine::parse(text.trim())
        .with_context(|| format!("{} is not a scene line", path.display()))?;
    match line.scene() {
        Some(scene) => {
            scene.with_context(|| format!("the scene {}", path.display()))?;
            Ok(line.entities.unwrap_or_default())
        }
        None => anyhow::bail!("{} holds no {{\"entities\":[…]}} line", path.display()),
    }
}

/// The message of the server's JSON error body (`{"error":{"message":…}}`,
/// as both transports carry it), or the text as it is.
fn error_message(text: &str) -> String {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| text.trim().to_owned())
}

/// One run's outcome.
struct Run {
    rate: Option<f64>,
    requests: u64,
    errors: u64,
    first_error: Option<String>,
    seconds: f64,
    /// Sorted latencies in seconds.
    from_schedule: Vec<f64>,
    from_send: Vec<f64>,
}

impl Run {
    fn of(mut tally: Tally, rate: Option<f64>, seconds: f64) -> Self {
        tally.from_schedule.sort_by(f64::total_cmp);
        tally.from_send.sort_by(f64::total_cmp);
        Run {
            rate,
            requests: tally.from_schedule.len() as u64,
            errors: tally.errors,
            first_error: tally.first_error,
            seconds,
            from_schedule: tally.from_schedule,
            from_send: tally.from_send,
        }
    }

    /// The `p` quantile of sorted latencies, in milliseconds.
    fn ms(sorted: &[f64], p: f64) -> f64 {
        let last = sorted.len().saturating_sub(1);
        sorted
            .get(((sorted.len() as f64 * p) as usize).min(last))
            .copied()
            .unwrap_or(0.0)
            * 1000.0
    }

    fn print(&self, queries_per_request: f64) {
        let rate = self.requests as f64 / self.seconds;
        println!(
            "rate {}: {} ok, {} failed in {:.2} s: {rate:.0} requests/s, {:.0} queries/s",
            self.rate
                .map_or("unlimited".to_owned(), |r| format!("{r:.0} requests/s")),
            self.requests,
            self.errors,
            self.seconds,
            rate * queries_per_request
        );
        for (what, sorted) in [("schedule", &self.from_schedule), ("send", &self.from_send)] {
            println!(
                "  latency ms from {what:<8}: p50 {:.3}  p90 {:.3}  p99 {:.3}  max {:.3}",
                Self::ms(sorted, 0.50),
                Self::ms(sorted, 0.90),
                Self::ms(sorted, 0.99),
                Self::ms(sorted, 1.0),
            );
        }
        if let Some(e) = &self.first_error {
            println!("  first error: {e}");
        }
    }

    fn json(&self, queries_per_request: f64) -> serde_json::Value {
        let (s, t) = (&self.from_schedule, &self.from_send);
        serde_json::json!({
            "rate": self.rate,
            "requests": self.requests, "errors": self.errors, "seconds": self.seconds,
            "requests_per_second": self.requests as f64 / self.seconds,
            "queries_per_second": self.requests as f64 * queries_per_request / self.seconds,
            "p50_ms": Self::ms(s, 0.50), "p90_ms": Self::ms(s, 0.90),
            "p99_ms": Self::ms(s, 0.99), "max_ms": Self::ms(s, 1.0),
            "sent_p50_ms": Self::ms(t, 0.50), "sent_p90_ms": Self::ms(t, 0.90),
            "sent_p99_ms": Self::ms(t, 0.99), "sent_max_ms": Self::ms(t, 1.0),
        })
    }
}

fn report(args: &LoadArgs, runs: &[Run], queries_per_request: f64, entities: usize) {
    let transport = args
        .transport
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default();
    println!(
        "transport {transport}  world {}  batch {} ({queries_per_request:.1} queries a request)  concurrency {}  scene of {entities} entities",
        args.world,
        args.batch,
        args.concurrency,
    );
    for run in runs {
        run.print(queries_per_request);
    }
    if args.json {
        // The last run's figures at the top level; with --sweep every run in `runs`.
        let mut summary = runs
            .last()
            .map(|r| r.json(queries_per_request))
            .unwrap_or_default();
        summary["transport"] = transport.into();
        summary["batch"] = args.batch.into();
        summary["concurrency"] = args.concurrency.into();
        summary["queries_per_request"] = queries_per_request.into();
        summary["entities"] = entities.into();
        if args.sweep {
            summary["runs"] = runs.iter().map(|r| r.json(queries_per_request)).collect();
        }
        println!("{summary}");
    }
}
