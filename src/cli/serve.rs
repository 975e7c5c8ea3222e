//! `bspq serve`: load worlds and answer queries over gRPC and HTTP/JSON.

use anyhow::Context;
use bspq::compile::CompileOptions;
use bspq::config::Settings;
use bspq::metrics::Metrics;
use bspq::registry::Registry;
use bspq::server::{load_initial_worlds, run};
use bspq::service::Service;
use std::process::ExitCode;
use std::sync::Arc;

pub use bspq::config::ServeArgs;

fn init_logging(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("BSPQ_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        // A log line that cannot be written (stderr closed: the collector
        // went away) is dropped. With this on, the subscriber reported the
        // failure with `eprintln!`, which panics when stderr is gone.
        .log_internal_errors(false);
    if json {
        let _ = builder.json().try_init();
    } else {
        let _ = builder.try_init();
    }
}

pub fn run_serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let settings = args.settings()?;
    if args.print_config {
        print!("{}", args.to_toml());
        return Ok(ExitCode::SUCCESS);
    }
    init_logging(settings.json_logs);
    if let Some(path) = &args.config {
        tracing::info!(config = %path.display(), "configuration file read");
    }
    let Settings {
        server: options,
        limits,
        admin_token,
        curves,
        http_addr,
        grpc_addr,
        record_queries,
        ..
    } = settings;
    let registry = Arc::new(Registry::new(CompileOptions {
        curves,
        ..Default::default()
    }));
    load_initial_worlds(&registry, &options)?;
    let service =
        Arc::new(Service::new(registry, limits, admin_token).with_recording(record_queries));
    let metrics = Arc::new(Metrics::new().context("cannot set up metrics")?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start runtime")?;
    runtime.block_on(async move {
        // Before anything listens: a SIGTERM that arrives as soon as the
        // first request is answered must drain, not kill, the process.
        let shutdown = shutdown_signal()?;
        let http = tokio::net::TcpListener::bind(&http_addr)
            .await
            .with_context(|| format!("cannot listen on {http_addr}"))?;
        tracing::info!(addr = %http.local_addr()?, "HTTP listening");
        let grpc = tokio::net::TcpListener::bind(&grpc_addr)
            .await
            .with_context(|| format!("cannot listen on {grpc_addr}"))?;
        tracing::info!(addr = %grpc.local_addr()?, "gRPC listening");
        run(service, metrics, options, http, Some(grpc), shutdown).await
    })?;
    tracing::info!("stopped");
    Ok(ExitCode::SUCCESS)
}

/// A future that resolves on SIGINT or SIGTERM, with both handlers
/// installed when this returns (a `tokio::signal` stream registers when it
/// is created; `ctrl_c()` only when first polled, which left the default
/// action, termination, in place until the server's shutdown task first
/// ran). Must be called inside the runtime.
#[cfg(unix)]
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()> + Send + 'static> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    Ok(async move {
        tokio::select! { _ = terminate.recv() => {}, _ = interrupt.recv() => {} }
    })
}

/// A future that resolves on Ctrl-C.
#[cfg(not(unix))]
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()> + Send + 'static> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}
