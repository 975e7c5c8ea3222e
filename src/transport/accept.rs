//! Accepting TCP connections on the two ports: what a failed accept does,
//! and (gRPC) holding a connection back until its client has sent the
//! HTTP/2 preface.
//!
//! The gRPC server's HTTP/2 keepalive pings only connections past their
//! handshake, so a client that connected and sent nothing, or part of the
//! preface, held its connection and a task for ever.

use super::connections::{ConnectionLimit, Counted};
use crate::metrics::Metrics;
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio_stream::wrappers::ReceiverStream;

/// Length of the client preface every HTTP/2 connection (so every gRPC
/// one) opens with.
const HTTP2_PREFACE_LEN: usize = 24;

/// The next connection on `listener`, with TCP_NODELAY set (without it a
/// small answer waits for the client's delayed ACK, ~40 ms per unary gRPC
/// call on Linux). A failed accept is retried: at once for a connection
/// the client already gave up, else after a pause that doubles from 10 ms
/// to a second while accepts keep failing (out of descriptors or memory),
/// so that the loop does not spin while they are short. Each failure is
/// counted on `transport`.
pub(crate) async fn next_connection(
    listener: &TcpListener,
    metrics: &Metrics,
    transport: &str,
) -> TcpStream {
    use io::ErrorKind;
    let mut pause = MIN_ACCEPT_PAUSE;
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                return stream;
            }
            Err(error)
                if matches!(
                    error.kind(),
                    ErrorKind::ConnectionAborted
                        | ErrorKind::ConnectionReset
                        | ErrorKind::ConnectionRefused
                ) => {}
            Err(error) => {
                metrics.accept_errors.with_label_values(&[transport]).inc();
                tracing::warn!(%error, transport, pause_ms = pause.as_millis() as u64, "cannot accept a connection; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_ACCEPT_PAUSE);
            }
        }
    }
}

/// The pauses after failed accepts: the first, and the longest.
const MIN_ACCEPT_PAUSE: Duration = Duration::from_millis(10);
const MAX_ACCEPT_PAUSE: Duration = Duration::from_secs(1);

/// The connections accepted on `listener` whose clients sent the HTTP/2
/// preface within `deadline`; the others are closed, and so are those
/// accepted while `limit` has no free slot. Each connection waits on its
/// own, so a silent client delays nobody. Accepting stops once the stream
/// is dropped.
pub(crate) fn with_http2_preface(
    listener: TcpListener,
    deadline: Duration,
    limit: ConnectionLimit,
    metrics: Arc<Metrics>,
) -> ReceiverStream<io::Result<Counted<TcpStream>>> {
    let (ready, incoming) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                stream = next_connection(&listener, &metrics, "grpc") => stream,
                () = ready.closed() => return,
            };
            // Over the limit: closed at once (dropped).
            let Ok(stream) = limit.admit(stream, "grpc") else {
                continue;
            };
            let ready = ready.clone();
            tokio::spawn(async move {
                let sent = tokio::time::timeout(deadline, preface_sent(stream.get_ref())).await;
                if sent == Ok(true) {
                    let _ = ready.send(Ok(stream)).await;
                }
            });
        }
    });
    ReceiverStream::new(incoming)
}

/// Waits until the client has sent at least the preface's length (false:
/// it closed the connection first). Peeks, so the server still reads it.
async fn preface_sent(stream: &TcpStream) -> bool {
    let mut first = [0u8; HTTP2_PREFACE_LEN];
    loop {
        match stream.peek(&mut first).await {
            Ok(0) | Err(_) => return false,
            Ok(n) if n >= HTTP2_PREFACE_LEN => return true,
            // Part of it: the rest is usually a packet away.
            Ok(_) => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}
