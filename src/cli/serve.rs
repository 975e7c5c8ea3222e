//! `bspq serve`: load worlds and answer queries over gRPC and HTTP/JSON.

use anyhow::Context;
use bspq::compile::CompileOptions;
use bspq::metrics::Metrics;
use bspq::registry::Registry;
use bspq::server::{load_initial_worlds, run, ServerOptions};
use bspq::service::{Limits, Service};
use bspq::transport::grpc::GrpcOptions;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Args)]
pub struct ServeArgs {
    /// Worlds directory: every world file in it is served under its file stem.
    /// Without it (or when it is empty), a bundled world is served.
    #[arg(long, env = "BSPQ_WORLDS")]
    worlds: Option<PathBuf>,
    /// HTTP/JSON listen address.
    #[arg(long, env = "BSPQ_HTTP_ADDR", default_value = "127.0.0.1:8080")]
    http_addr: String,
    /// gRPC listen address.
    #[arg(long, env = "BSPQ_GRPC_ADDR", default_value = "127.0.0.1:50051")]
    grpc_addr: String,
    /// Most gRPC requests (streams) served at once on one connection.
    #[arg(long, env = "BSPQ_GRPC_CONCURRENCY", default_value_t = 64)]
    grpc_concurrency: usize,
    /// Seconds between HTTP/2 keepalive pings on gRPC connections.
    #[arg(long, env = "BSPQ_GRPC_KEEPALIVE_SECONDS", default_value_t = 30.0)]
    grpc_keepalive_seconds: f64,
    /// Seconds to wait for a keepalive ping's ack before closing the connection.
    #[arg(
        long,
        env = "BSPQ_GRPC_KEEPALIVE_TIMEOUT_SECONDS",
        default_value_t = 10.0
    )]
    grpc_keepalive_timeout_seconds: f64,
    /// Seconds after which a gRPC connection is closed gracefully so clients
    /// rebalance (0: never).
    #[arg(
        long,
        env = "BSPQ_GRPC_MAX_CONNECTION_AGE_SECONDS",
        default_value_t = 3600.0
    )]
    grpc_max_connection_age_seconds: f64,
    /// Bearer token for admin routes (upload, unload); admin is off without it.
    #[arg(long, env = "BSPQ_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// Leave patch (curve) collision out of worlds compiled from sources.
    #[arg(long, env = "BSPQ_NO_CURVES")]
    no_curves: bool,
    /// Most queries accepted in one request.
    #[arg(long, env = "BSPQ_MAX_QUERIES", default_value_t = 65_536)]
    max_queries: usize,
    /// Largest request body in bytes.
    #[arg(long, env = "BSPQ_MAX_BODY_BYTES", default_value_t = 32 << 20)]
    max_body_bytes: usize,
    /// Largest world upload in bytes.
    #[arg(long, env = "BSPQ_MAX_UPLOAD_BYTES", default_value_t = 256 << 20)]
    max_upload_bytes: usize,
    /// Seconds between rescans of the worlds directory.
    #[arg(long, env = "BSPQ_RESCAN_SECONDS", default_value_t = 2.0)]
    rescan_seconds: f64,
    /// Seconds in-flight requests get to finish after SIGINT/SIGTERM.
    #[arg(long, env = "BSPQ_DRAIN_SECONDS", default_value_t = 10.0)]
    drain_seconds: f64,
    /// Log format.
    #[arg(long, env = "BSPQ_LOG_FORMAT", value_parser = ["text", "json"], default_value = "text")]
    log_format: String,
}

fn seconds(name: &str, v: f64) -> anyhow::Result<Duration> {
    anyhow::ensure!(
        v.is_finite() && v > 0.0 && v < 86_400.0,
        "--{name} must be between 0 and 86400 seconds"
    );
    Ok(Duration::from_secs_f64(v))
}

fn init_logging(format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("BSPQ_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    if format == "json" {
        let _ = builder.json().try_init();
    } else {
        let _ = builder.try_init();
    }
}

pub fn run_serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    init_logging(&args.log_format);
    let options = ServerOptions {
        worlds_dir: args.worlds.clone(),
        rescan_interval: seconds("rescan-seconds", args.rescan_seconds)?,
        drain_timeout: seconds("drain-seconds", args.drain_seconds)?,
        grpc: GrpcOptions {
            concurrency_per_connection: args.grpc_concurrency.max(1),
            keepalive_interval: seconds("grpc-keepalive-seconds", args.grpc_keepalive_seconds)?,
            keepalive_timeout: seconds(
                "grpc-keepalive-timeout-seconds",
                args.grpc_keepalive_timeout_seconds,
            )?,
            max_connection_age: if args.grpc_max_connection_age_seconds == 0.0 {
                None
            } else {
                Some(seconds(
                    "grpc-max-connection-age-seconds",
                    args.grpc_max_connection_age_seconds,
                )?)
            },
        },
    };
    let limits = Limits {
        max_queries_per_request: args.max_queries.max(1),
        max_body_bytes: args.max_body_bytes.max(1024),
        max_upload_bytes: args.max_upload_bytes.max(1024),
    };
    let registry = Arc::new(Registry::new(CompileOptions {
        curves: !args.no_curves,
        ..Default::default()
    }));
    load_initial_worlds(&registry, &options)?;
    let service = Arc::new(Service::new(registry, limits, args.admin_token.clone()));
    let metrics = Arc::new(Metrics::new().context("cannot set up metrics")?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start runtime")?;
    runtime.block_on(async move {
        let http = tokio::net::TcpListener::bind(&args.http_addr)
            .await
            .with_context(|| format!("cannot listen on {}", args.http_addr))?;
        tracing::info!(addr = %http.local_addr()?, "HTTP listening");
        let grpc = tokio::net::TcpListener::bind(&args.grpc_addr)
            .await
            .with_context(|| format!("cannot listen on {}", args.grpc_addr))?;
        tracing::info!(addr = %grpc.local_addr()?, "gRPC listening");
        run(
            service,
            metrics,
            options,
            http,
            Some(grpc),
            shutdown_signal(),
        )
        .await
    })?;
    tracing::info!("stopped");
    Ok(ExitCode::SUCCESS)
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}
