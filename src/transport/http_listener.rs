//! The HTTP listener: accepts connections and serves the router on each
//! (HTTP/1.1; gRPC, on its own port, is the HTTP/2 transport), with read
//! timeouts, until shutdown, then drains.
//!
//! `axum::serve` gives hyper no timer, so a client that connected and sent
//! nothing, or half a request head, or stopped in the middle of a body, held
//! its connection and task for ever. Here a request head must arrive within
//! the read timeout of the connection opening or of the previous answer (so
//! keep-alive connections idle that long are closed too), a body may not
//! pause for longer than it between reads, and a whole body must arrive
//! within the body timeout. (HTTP/1.1 only: serving HTTP/2 as well means
//! sniffing each connection's first bytes first, with no timer running.)
//! A connection accepted while the connection limit is reached is answered
//! 503 and closed.

use super::accept::next_connection;
use super::body_deadline::with_body_deadline;
use super::connections::ConnectionLimit;
use super::head_errors::HeadErrorBodies;
use crate::metrics::Metrics;
use crate::service::ServiceError;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tower_http::timeout::RequestBodyTimeoutLayer;

/// The listener's timeouts.
#[derive(Debug, Clone, Copy)]
pub struct HttpTimeouts {
    /// A request head's arrival, and each pause within a body.
    pub read: Duration,
    /// A whole request body's arrival.
    pub body: Duration,
}

/// Serves `app` on `listener` until `stop` resolves, then stops accepting and
/// waits for the open connections to finish their requests (the caller
/// bounds that wait).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    metrics: Arc<Metrics>,
    limit: ConnectionLimit,
    timeouts: HttpTimeouts,
    stop: impl Future<Output = ()>,
) {
    let body_timeout = timeouts.body;
    let app = app
        .layer(RequestBodyTimeoutLayer::new(timeouts.read))
        .layer(axum::middleware::map_request(move |request| async move {
            with_body_deadline(request, body_timeout)
        }));
    let mut builder = Builder::new(TokioExecutor::new()).http1_only();
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(timeouts.read);
    let graceful = GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        let stream = tokio::select! {
            stream = next_connection(&listener, &metrics, "http") => stream,
            () = &mut stop => break,
        };
        let stream = match limit.admit(stream, "http") {
            Ok(stream) => stream,
            Err(stream) => {
                tokio::spawn(refuse(stream));
                continue;
            }
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

/// Answers a connection over the limit `503` with the JSON error body,
/// without reading its request, and closes it (within a second: a client
/// that does not read gets nothing).
async fn refuse(mut stream: TcpStream) {
    let error = ServiceError::TooManyConnections;
    let body = error.to_json().to_string();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\nretry-after: 1\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(answer.as_bytes()).await;
        let _ = stream.shutdown().await;
    })
    .await;
}
