//! Running the server: listeners, the worlds-directory watcher, and graceful
//! shutdown. Listeners and the shutdown signal are passed in, so tests bind
//! port 0 and stop the server with a channel.

use crate::metrics::Metrics;
use crate::registry::Registry;
use crate::service::Service;
use crate::transport::connections::ConnectionLimit;
use crate::transport::grpc::{self, GrpcOptions, GrpcState, COLLISION_SERVICE};
use crate::transport::http::{router, HttpState};
use crate::transport::http_listener::{self, HttpTimeouts};
use crate::watcher::{load_dir, watch_dir, DirState};
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tonic_health::ServingStatus;

/// A Quake 3 map shipped inside the binary, served when no world is given
/// (OpenArena's q3dm6ish, GPL-2+, see tests/data/maps/LICENSE.md).
pub const BUNDLED_WORLD: &[u8] = include_bytes!("../tests/data/maps/q3dm6ish.bsp");
pub const BUNDLED_WORLD_NAME: &str = "q3dm6ish";

/// What a running server needs.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Worlds directory to load and watch (`None`: only the bundled world).
    pub worlds_dir: Option<PathBuf>,
    /// How often the directory is rescanned for new or replaced files (a
    /// fallback: file-system events trigger a scan at once).
    pub rescan_interval: Duration,
    /// How long in-flight requests may take to finish after shutdown starts.
    pub drain_timeout: Duration,
    /// How long an HTTP request head may take to arrive (and a keep-alive
    /// connection may stay idle), and the longest pause within a body.
    pub http_read_timeout: Duration,
    /// How long a whole HTTP request body may take to arrive.
    pub http_body_timeout: Duration,
    /// Connections open at once, HTTP and gRPC together.
    pub max_connections: usize,
    /// gRPC connection settings.
    pub grpc: GrpcOptions,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            worlds_dir: None,
            rescan_interval: Duration::from_secs(2),
            drain_timeout: Duration::from_secs(10),
            http_read_timeout: Duration::from_secs(60),
            http_body_timeout: Duration::from_secs(300),
            max_connections: 512,
            grpc: GrpcOptions::default(),
        }
    }
}

/// Loads the initial worlds: the directory's, or the bundled one when the
/// directory is absent or empty.
pub fn load_initial_worlds(registry: &Registry, options: &ServerOptions) -> anyhow::Result<()> {
    let mut loaded_any = false;
    if let Some(dir) = &options.worlds_dir {
        if dir.exists() && !dir.is_dir() {
            // A file where the folder should be is a mistake in the
            // configuration, not "no worlds": serving the bundled world
            // would answer for a map nobody asked for.
            anyhow::bail!("the worlds directory {} is not a directory", dir.display());
        }
        if dir.is_dir() {
            // Versions continue from the last run's (a read-only directory
            // keeps them in memory only, with a warning at each load).
            if let Err(error) = registry.keep_versions_in(&dir.join(crate::registry::VERSION_FILE))
            {
                tracing::warn!(%error, dir = %dir.display(), "cannot read the version file: versions start again at 1");
            }
            // Failures are logged and recorded by the registry.
            let listing = load_dir(registry, dir)?;
            loaded_any =
                registry.any_loaded() || !listing.worlds.is_empty() || !listing.clashes.is_empty();
        } else {
            tracing::warn!(dir = %dir.display(), "worlds directory does not exist: it is not watched (create it, then restart, to serve its worlds)");
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

/// Sets the health status of the whole server and of the collision service.
async fn set_health(reporter: &tonic_health::server::HealthReporter, status: ServingStatus) {
    reporter.set_service_status("", status).await;
    reporter.set_service_status(COLLISION_SERVICE, status).await;
}

fn health_of(service: &Service) -> ServingStatus {
    if service.registry.any_loaded() {
        ServingStatus::Serving
    } else {
        ServingStatus::NotServing
    }
}

/// Serves HTTP on `http` (and gRPC on `grpc` when given) until `shutdown`
/// resolves, then drains both. With a worlds directory, the listeners
/// answer only once its watcher is armed (see [`crate::watcher`]).
pub async fn run(
    service: Arc<Service>,
    metrics: Arc<Metrics>,
    options: ServerOptions,
    http: tokio::net::TcpListener,
    grpc: Option<tokio::net::TcpListener>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let draining = Arc::new(AtomicBool::new(false));
    let state = HttpState {
        service: Arc::clone(&service),
        metrics: Arc::clone(&metrics),
        draining: Arc::clone(&draining),
    };
    let watcher = match options.worlds_dir.clone().filter(|d| d.is_dir()) {
        Some(dir) => {
            service.keep_uploads_in(dir.clone());
            let state = DirState::snapshot(&dir);
            let (armed_tx, armed_rx) = tokio::sync::oneshot::channel();
            let task = tokio::spawn(watch_dir(
                Arc::clone(&service.registry),
                dir,
                options.rescan_interval,
                state,
                armed_tx,
            ));
            // Answer nothing (readiness included) before the watcher is
            // armed, so a file replaced once the server reports ready is
            // never left to the next rescan. Arming is a system call or
            // two; a watcher task that died unarmed does not hold it up.
            let _ = armed_rx.await;
            Some(task)
        }
        None => None,
    };
    let app = router(state);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);

    // gRPC health: SERVING while a world is loaded, NOT_SERVING otherwise
    // and from the moment shutdown starts.
    let (reporter, health_service) = tonic_health::server::health_reporter();
    set_health(&reporter, health_of(&service)).await;
    let health_watch = {
        let reporter = reporter.clone();
        let service = Arc::clone(&service);
        let draining = Arc::clone(&draining);
        let mut events = service.registry.subscribe();
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        if draining.load(Ordering::SeqCst) {
                            return;
                        }
                        set_health(&reporter, health_of(&service)).await;
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        })
    };

    let drain_flag = Arc::clone(&draining);
    let shutdown_reporter = reporter.clone();
    let shutdown_health_watch = health_watch.abort_handle();
    tokio::spawn(async move {
        shutdown.await;
        drain_flag.store(true, Ordering::SeqCst);
        tracing::info!("shutting down: draining in-flight requests");
        shutdown_health_watch.abort();
        set_health(&shutdown_reporter, ServingStatus::NotServing).await;
        // Ends open health Watch streams (after they deliver NOT_SERVING) so
        // they do not hold the drain open.
        let mut reporter = shutdown_reporter;
        reporter.clear_service_status("").await;
        reporter.clear_service_status(COLLISION_SERVICE).await;
        let _ = stop_tx.send(true);
    });
    let mut stop_for_server = stop_rx.clone();
    let http_metrics = Arc::clone(&metrics);
    let limit = ConnectionLimit::new(options.max_connections, Arc::clone(&metrics));
    let http_limit = limit.clone();
    let timeouts = HttpTimeouts {
        read: options.http_read_timeout,
        body: options.http_body_timeout,
    };
    let http_server = async move {
        http_listener::serve(http, app, http_metrics, http_limit, timeouts, async move {
            let _ = stop_for_server.wait_for(|s| *s).await;
        })
        .await;
        anyhow::Ok(())
    };
    let grpc_server = async {
        match grpc {
            Some(listener) => {
                let state = GrpcState {
                    service: Arc::clone(&service),
                    metrics: Arc::clone(&metrics),
                    stop: stop_rx.clone(),
                };
                grpc::serve(state, options.grpc.clone(), health_service, listener, limit).await
            }
            None => Ok(()),
        }
    };
    let mut stop_for_timeout = stop_rx.clone();
    let drain_timeout = options.drain_timeout;
    tokio::select! {
        result = async { tokio::try_join!(http_server, grpc_server) } => { result?; }
        _ = async move {
            let _ = stop_for_timeout.wait_for(|s| *s).await;
            tokio::time::sleep(drain_timeout).await;
        } => tracing::warn!("drain timeout reached; exiting with requests still running"),
    }
    health_watch.abort();
    if let Some(w) = watcher {
        w.abort();
    }
    Ok(())
}
