//! The HTTP listener: accepts connections and serves the router on each
//! (HTTP/1.1; gRPC, on its own port, is the HTTP/2 transport), with read
//! timeouts, until shutdown, then drains.
//!
//! `axum::serve` gives hyper no timer, so a client that connected and sent
//! nothing, or half a request head, or stopped in the middle of a body, held
//! its connection and task for ever. Here a request head must arrive within
//! the read timeout of the connection opening or of the previous answer (so
//! keep-alive connections idle that long are closed too), and a body may
//! not pause for longer than it between reads. (HTTP/1.1 only: serving
//! HTTP/2 as well means sniffing each connection's first bytes first, with
//! no timer running.)

use super::accept::next_connection;
use super::head_errors::HeadErrorBodies;
use crate::metrics::Metrics;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tower_http::timeout::RequestBodyTimeoutLayer;

/// Serves `app` on `listener` until `stop` resolves, then stops accepting and
/// waits for the open connections to finish their requests (the caller
/// bounds that wait).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    metrics: Arc<Metrics>,
    read_timeout: Duration,
    stop: impl Future<Output = ()>,
) {
    let app = app.layer(RequestBodyTimeoutLayer::new(read_timeout));
    let mut builder = Builder::new(TokioExecutor::new()).http1_only();
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(read_timeout);
    let graceful = GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        let stream = tokio::select! {
            stream = next_connection(&listener) => stream,
            () = &mut stop => break,
        };
        let service = TowerToHyperService::new(app.clone());
        let connection = builder
            .serve_connection(
                TokioIo::new(HeadErrorBodies::new(stream, Arc::clone(&metrics))),
                service,
            )
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "HTTP connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
