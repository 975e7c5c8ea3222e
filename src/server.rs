//! Running the server: listeners, the worlds-directory watcher, and graceful
//! shutdown. Listeners and the shutdown signal are passed in, so tests bind
//! port 0 and stop the server with a channel.

use crate::metrics::Metrics;
use crate::registry::{world_files, Registry};
use crate::service::Service;
use crate::transport::http::{router, HttpState};
use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// A Quake 3 map shipped inside the binary, served when no world is given
/// (OpenArena's q3dm6ish, GPL-2+, see tests/data/maps/LICENSE.md).
pub const BUNDLED_WORLD: &[u8] = include_bytes!("../tests/data/maps/q3dm6ish.bsp");
pub const BUNDLED_WORLD_NAME: &str = "q3dm6ish";

/// What a running server needs.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Worlds directory to load and watch (`None`: only the bundled world).
    pub worlds_dir: Option<PathBuf>,
    /// How often the directory is rescanned for new or replaced files.
    pub rescan_interval: Duration,
    /// How long in-flight requests may take to finish after shutdown starts.
    pub drain_timeout: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            worlds_dir: None,
            rescan_interval: Duration::from_secs(2),
            drain_timeout: Duration::from_secs(10),
        }
    }
}

/// Loads the initial worlds: the directory's, or the bundled one when the
/// directory is absent or empty.
pub fn load_initial_worlds(registry: &Registry, options: &ServerOptions) -> anyhow::Result<()> {
    let mut loaded_any = false;
    if let Some(dir) = &options.worlds_dir {
        if dir.is_dir() {
            for (name, error) in registry.load_dir(dir)? {
                tracing::error!(world = %name, %error, "cannot load world");
            }
            loaded_any = registry.any_loaded() || !world_files(dir)?.is_empty();
        } else {
            tracing::warn!(dir = %dir.display(), "worlds directory does not exist");
        }
    }
    if !loaded_any {
        tracing::info!(
            world = BUNDLED_WORLD_NAME,
            "no worlds given: serving the bundled world"
        );
        registry.load_bytes(BUNDLED_WORLD_NAME, BUNDLED_WORLD, "bundled")?;
    }
    Ok(())
}

/// A file's identity: replaced files (atomic rename) change inode or mtime.
fn fingerprint(path: &Path) -> Option<(u64, SystemTime, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()?, m.ino()))
}

/// Rescans `dir` every `interval`, loading new and replaced files off the
/// request path. Runs until the task is dropped.
pub async fn watch_dir(registry: Arc<Registry>, dir: PathBuf, interval: Duration) {
    let mut seen: HashMap<String, (u64, SystemTime, u64)> = HashMap::new();
    if let Ok(files) = world_files(&dir) {
        for (name, path) in files {
            if let Some(fp) = fingerprint(&path) {
                seen.insert(name, fp);
            }
        }
    }
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let Ok(files) = world_files(&dir) else {
            continue;
        };
        for (name, path) in files {
            let Some(fp) = fingerprint(&path) else {
                continue;
            };
            if seen.get(&name) == Some(&fp) {
                continue;
            }
            seen.insert(name.clone(), fp);
            let registry = Arc::clone(&registry);
            // Loading and validating is CPU work: keep it off the reactor.
            let _ = tokio::task::spawn_blocking(move || registry.load_path(&name, &path)).await;
        }
    }
}

/// Serves HTTP on `http` until `shutdown` resolves, then drains.
pub async fn run(
    service: Arc<Service>,
    metrics: Arc<Metrics>,
    options: ServerOptions,
    http: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let draining = Arc::new(AtomicBool::new(false));
    let state = HttpState {
        service: Arc::clone(&service),
        metrics,
        draining: Arc::clone(&draining),
    };
    let watcher = options
        .worlds_dir
        .clone()
        .filter(|d| d.is_dir())
        .map(|dir| {
            tokio::spawn(watch_dir(
                Arc::clone(&service.registry),
                dir,
                options.rescan_interval,
            ))
        });
    let app = router(state);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let drain_flag = Arc::clone(&draining);
    tokio::spawn(async move {
        shutdown.await;
        drain_flag.store(true, Ordering::SeqCst);
        tracing::info!("shutting down: draining in-flight requests");
        let _ = stop_tx.send(true);
    });
    let mut stop_for_server = stop_rx.clone();
    let server = axum::serve(http, app).with_graceful_shutdown(async move {
        let _ = stop_for_server.wait_for(|s| *s).await;
    });
    let mut stop_for_timeout = stop_rx;
    let drain_timeout = options.drain_timeout;
    tokio::select! {
        result = server => result?,
        _ = async move {
            let _ = stop_for_timeout.wait_for(|s| *s).await;
            tokio::time::sleep(drain_timeout).await;
        } => tracing::warn!("drain timeout reached; exiting with requests still running"),
    }
    if let Some(w) = watcher {
        w.abort();
    }
    Ok(())
}
