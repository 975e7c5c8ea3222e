//! `bspq load`: a load generator for a running server, printing throughput
//! and latency percentiles. Bounded by `--duration` and `--max-requests`.

use anyhow::Context;
use bspq::conformance::read_lines;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct LoadArgs {
    /// Server base URL (HTTP transport).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// World name on the server.
    #[arg(long)]
    world: String,
    /// Query lines (.jsonl or .jsonl.gz) sent round-robin; point lines are skipped.
    #[arg(long)]
    queries: PathBuf,
    /// Queries per request.
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// Concurrent clients (one connection each).
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Seconds to run.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Stop after this many requests in total.
    #[arg(long, default_value_t = 10_000_000)]
    max_requests: u64,
    /// Transport: `http` (gRPC modes come with the gRPC transport).
    #[arg(long, default_value = "http", value_parser = ["http"])]
    transport: String,
    /// Print one JSON object as the last line.
    #[arg(long)]
    json: bool,
}

struct WorkerReport {
    latencies: Vec<f64>,
    errors: u64,
    first_error: Option<String>,
}

pub fn run(args: LoadArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.batch >= 1 && args.concurrency >= 1,
        "--batch and --concurrency must be at least 1"
    );
    anyhow::ensure!(
        args.duration.is_finite() && args.duration > 0.0,
        "--duration must be positive"
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
    // Pre-build request bodies so the client spends its time on the wire.
    let bodies: Arc<Vec<String>> = Arc::new(
        (0..lines.len().div_ceil(args.batch).max(1))
            .map(|b| {
                let batch: Vec<&str> = (0..args.batch)
                    .map(|k| lines[(b * args.batch + k) % lines.len()].as_str())
                    .collect();
                format!("{{\"queries\":[{}]}}", batch.join(","))
            })
            .collect(),
    );
    let url = format!(
        "{}/v1/worlds/{}/trace",
        args.url.trim_end_matches('/'),
        args.world
    );
    let stop = Arc::new(AtomicBool::new(false));
    let per_worker = args.max_requests.div_ceil(args.concurrency as u64);
    let started = Instant::now();
    let workers: Vec<_> = (0..args.concurrency)
        .map(|w| {
            let (url, bodies, stop) = (url.clone(), Arc::clone(&bodies), Arc::clone(&stop));
            std::thread::spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .timeout_global(Some(Duration::from_secs(30)))
                    .build()
                    .into();
                let mut report = WorkerReport {
                    latencies: Vec::new(),
                    errors: 0,
                    first_error: None,
                };
                let mut i = w;
                while !stop.load(Ordering::Relaxed)
                    && (report.latencies.len() as u64 + report.errors) < per_worker
                {
                    let body = &bodies[i % bodies.len()];
                    i += 1;
                    let t0 = Instant::now();
                    let outcome = agent
                        .post(&url)
                        .header("Content-Type", "application/json")
                        .send(body.as_str())
                        .map_err(|e| e.to_string())
                        .and_then(|mut r| {
                            let status = r.status().as_u16();
                            let text = r.body_mut().read_to_string().map_err(|e| e.to_string())?;
                            if status == 200 {
                                Ok(())
                            } else {
                                Err(format!("HTTP {status}: {text}"))
                            }
                        });
                    match outcome {
                        Ok(()) => report.latencies.push(t0.elapsed().as_secs_f64()),
                        Err(e) => {
                            report.errors += 1;
                            report.first_error.get_or_insert(e);
                        }
                    }
                }
                report
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(args.duration));
    stop.store(true, Ordering::Relaxed);
    let mut latencies = Vec::new();
    let (mut errors, mut first_error) = (0u64, None);
    for w in workers {
        let r = w
            .join()
            .map_err(|_| anyhow::anyhow!("a load worker panicked"))?;
        latencies.extend(r.latencies);
        errors += r.errors;
        first_error = first_error.or(r.first_error);
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
            * 1000.0
    };
    let requests = latencies.len() as u64;
    let qps = (requests * args.batch as u64) as f64 / elapsed;
    println!(
        "transport {}  world {}  batch {}  concurrency {}",
        args.transport, args.world, args.batch, args.concurrency
    );
    println!("requests {requests} ok, {errors} failed in {elapsed:.2} s: {:.0} requests/s, {qps:.0} queries/s", requests as f64 / elapsed);
    println!(
        "latency ms: p50 {:.3}  p90 {:.3}  p99 {:.3}  max {:.3}",
        pct(0.50),
        pct(0.90),
        pct(0.99),
        latencies.last().copied().unwrap_or(0.0) * 1000.0
    );
    if let Some(e) = &first_error {
        println!("first error: {e}");
    }
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "transport": args.transport, "batch": args.batch, "concurrency": args.concurrency,
                "requests": requests, "errors": errors, "seconds": elapsed, "queries_per_second": qps,
                "p50_ms": pct(0.50), "p90_ms": pct(0.90), "p99_ms": pct(0.99),
                "max_ms": latencies.last().copied().unwrap_or(0.0) * 1000.0,
            })
        );
    }
    Ok(if errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
