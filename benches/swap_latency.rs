//! Hot-swap latency: from a world file renamed into the watched directory to
//! the server answering a trace with the new version. Self-contained: the
//! committed maps are compiled into a temporary worlds directory and the real
//! server runs in process on a loopback port, its periodic rescan set to an
//! hour so only the directory watcher can notice the change.
//!
//! `cargo bench --bench swap_latency` (`BSPQ_SWAP_ROUNDS`, default 40;
//! `BSPQ_SWAP_SOURCES=1` swaps `.bsp` sources, compiled on load, instead).

use bspq::compile::CompileOptions;
use bspq::map::compile_source;
use bspq::metrics::Metrics;
use bspq::registry::Registry;
use bspq::server::{load_initial_worlds, run, ServerOptions};
use bspq::service::{Limits, Service};
use bspq::world::format;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MAPS: [&str; 3] = ["oa_ctf2", "q3dm6ish", "aggressor"];

fn map_path(map: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/maps/{map}.bsp"))
}

/// The world files swapped in turn, and the extension they are served under.
fn world_files(sources: bool) -> anyhow::Result<(Vec<Vec<u8>>, &'static str)> {
    let mut files = Vec::new();
    for map in MAPS {
        let source = std::fs::read(map_path(map))?;
        files.push(if sources {
            source
        } else {
            format::write(&compile_source(&source, map, &CompileOptions::default())?)
        });
    }
    Ok((files, if sources { "bsp" } else { "bspq" }))
}

/// Starts the server on a runtime thread; returns its HTTP address.
fn start_server(dir: &Path) -> anyhow::Result<std::net::SocketAddr> {
    let options = ServerOptions {
        worlds_dir: Some(dir.to_owned()),
        rescan_interval: Duration::from_secs(3600),
        ..Default::default()
    };
    let registry = Arc::new(Registry::new(CompileOptions::default()));
    load_initial_worlds(&registry, &options)?;
    let service = Arc::new(Service::new(registry, Limits::default(), None));
    let metrics = Arc::new(Metrics::new()?);
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || -> anyhow::Result<()> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        rt.block_on(async move {
            let http = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            addr_tx.send(http.local_addr()?)?;
            run(
                service,
                metrics,
                options,
                http,
                None,
                std::future::pending(),
            )
            .await
        })
    });
    Ok(addr_rx.recv_timeout(Duration::from_secs(30))?)
}

fn main() -> anyhow::Result<()> {
    let rounds: usize = std::env::var("BSPQ_SWAP_ROUNDS").map_or(Ok(40), |r| r.parse())?;
    let sources = std::env::var("BSPQ_SWAP_SOURCES").is_ok_and(|v| v == "1");
    let (files, ext) = world_files(sources)?;
    let dir = tempfile::tempdir()?;
    let target = dir.path().join(format!("swaptest.{ext}"));
    std::fs::write(&target, &files[0])?;
    let addr = start_server(dir.path())?;
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let probe = format!("http://{addr}/v1/worlds/swaptest/trace?start=0,0,0&end=0,0,-64");
    let version = || -> Option<u64> {
        let mut response = agent.get(&probe).call().ok()?;
        let body: serde_json::Value =
            serde_json::from_str(&response.body_mut().read_to_string().ok()?).ok()?;
        body["version"].as_u64()
    };
    let mut latencies = Vec::with_capacity(rounds);
    for round in 1..=rounds {
        let before = version().unwrap_or(0);
        let tmp = dir.path().join(format!(".swaptest.{round}.tmp"));
        std::fs::write(&tmp, &files[round % files.len()])?;
        let renamed = Instant::now();
        std::fs::rename(&tmp, &target)?;
        while version().is_none_or(|v| v <= before) {
            anyhow::ensure!(
                renamed.elapsed() < Duration::from_secs(30),
                "round {round}: no new version 30 s after the rename"
            );
        }
        latencies.push(renamed.elapsed());
        // Let the watcher's settle window pass so rounds do not merge.
        std::thread::sleep(Duration::from_millis(50));
    }
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    println!(
        "{rounds} swaps of {} .{ext} files: rename → new version answering: p50 {:.1} ms, p90 {:.1} ms, max {:.1} ms",
        MAPS.len(),
        at(0.5).as_secs_f64() * 1e3,
        at(0.9).as_secs_f64() * 1e3,
        at(1.0).as_secs_f64() * 1e3
    );
    Ok(())
}
