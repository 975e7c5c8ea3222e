//! Hot-swap latency of a running `bspq serve`: time from a world file being
//! renamed into the worlds directory to the server answering a trace with
//! the new version.
//!
//! ```sh
//! bspq serve --worlds /tmp/worlds &
//! cargo run --release --example swap_latency -- \
//!     http://127.0.0.1:8080 /tmp/worlds A.bspq B.bspq [ROUNDS]
//! ```
//!
//! Each round writes the next file (alternating A and B) to a hidden
//! temporary name in the directory, renames it to `swaptest.<ext of A>`, and
//! polls `GET /v1/worlds/swaptest/trace` (one ray) on one keep-alive
//! connection until the answer names a newer version. Prints p50/p90/max.

use std::path::PathBuf;
use std::time::{Duration, Instant};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    anyhow::ensure!(
        args.len() >= 4,
        "usage: swap_latency URL WORLDS_DIR FILE_A FILE_B [ROUNDS]"
    );
    let (url, dir) = (args[0].trim_end_matches('/'), PathBuf::from(&args[1]));
    let files = [std::fs::read(&args[2])?, std::fs::read(&args[3])?];
    let rounds: usize = args.get(4).map_or(Ok(50), |r| r.parse())?;
    let ext = PathBuf::from(&args[2])
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    let target = dir.join(format!("swaptest{ext}"));
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let probe = format!("{url}/v1/worlds/swaptest/trace?start=0,0,0&end=0,0,-64");
    let version = || -> Option<u64> {
        let mut resp = agent.get(&probe).call().ok()?;
        if resp.status() != 200 {
            return None;
        }
        let body: serde_json::Value =
            serde_json::from_str(&resp.body_mut().read_to_string().ok()?).ok()?;
        body["version"].as_u64()
    };
    let mut latencies = Vec::with_capacity(rounds);
    for round in 0..=rounds {
        let before = version().unwrap_or(0);
        let tmp = dir.join(format!(".swaptest.{round}.tmp"));
        std::fs::write(&tmp, &files[round % 2])?;
        let renamed = Instant::now();
        std::fs::rename(&tmp, &target)?;
        loop {
            if version().is_some_and(|v| v > before) {
                break;
            }
            anyhow::ensure!(
                renamed.elapsed() < Duration::from_secs(30),
                "round {round}: no new version after 30 s"
            );
        }
        // Round 0 only creates the world.
        if round > 0 {
            latencies.push(renamed.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::remove_file(&target)?;
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    println!(
        "{rounds} swaps: rename → new version answering p50 {:.2} ms, p90 {:.2} ms, max {:.2} ms",
        at(0.5).as_secs_f64() * 1e3,
        at(0.9).as_secs_f64() * 1e3,
        at(1.0).as_secs_f64() * 1e3
    );
    Ok(())
}
