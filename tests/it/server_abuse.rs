//! The server under a hostile or careless client: more calls than a
//! connection may run, oversized names and heads, bodies the HTTP client
//! must read whole. Each test runs a real server on loopback ports with a
//! real client; counts and durations are bounded.

use crate::common;

use common::server::TestServer;

use bspq::proto::v1 as pb;
use bspq::server::ServerOptions;
use bspq::service::Limits;
use bspq::transport::grpc::GrpcOptions;
use std::time::Duration;
use tonic::Code;

/// `n` rays across the bundled world's floor, as one packed request.
fn rays(n: usize) -> pb::TraceRequest {
    let (mut starts, mut ends) = (Vec::with_capacity(3 * n), Vec::with_capacity(3 * n));
    for i in 0..n {
        let x = (i % 512) as f32 - 256.0;
        starts.extend([x, 0.0, 64.0]);
        ends.extend([x, 0.0, -512.0]);
    }
    pb::TraceRequest {
        world: "q3dm6ish".into(),
        starts,
        ends,
        ..Default::default()
    }
}

fn server_with_grpc_concurrency(concurrency: usize) -> TestServer {
    let options = ServerOptions {
        grpc: GrpcOptions {
            concurrency_per_connection: concurrency,
            ..Default::default()
        },
        ..Default::default()
    };
    TestServer::start_with(options, Limits::default())
}

/// Many more large unary calls than the per-connection limit, all on one
/// channel: each either finishes or is refused at once, none waits out its
/// deadline. (The calls over the limit used to hold their bodies unread,
/// which filled the connection's HTTP/2 window so that the running calls
/// could not read theirs either.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn excess_large_unary_calls_on_one_connection_finish() {
    let server = server_with_grpc_concurrency(2);
    let client = server.collision().await;
    let request = rays(65_536);
    let expected = client
        .clone()
        .trace(request.clone())
        .await
        .expect("one call alone")
        .into_inner();
    let calls = (0..12).map(|_| {
        let mut client = client.clone();
        let mut request = tonic::Request::new(request.clone());
        request.set_timeout(Duration::from_secs(20));
        tokio::spawn(async move { client.trace(request).await })
    });
    let mut finished = 0;
    for call in futures_util::future::join_all(calls).await {
        match call.expect("task") {
            Ok(answer) => {
                assert_eq!(answer.into_inner().fractions, expected.fractions);
                finished += 1;
            }
            Err(status) => assert_eq!(
                status.code(),
                Code::ResourceExhausted,
                "a call over the limit is refused at once or finishes: {status:?}"
            ),
        }
    }
    assert!(finished >= 2, "only {finished} of 12 calls finished");
}

/// `--grpc-concurrency` counts streams: one connection runs at most that
/// many `TraceStream`s at once, the others wait for one to end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_concurrency_bounds_open_streams_per_connection() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let server = server_with_grpc_concurrency(3);
    let client = server.collision().await;
    // One call first: a client learns the limit from the server's first
    // HTTP/2 settings, and streams it opens before reading them may be
    // refused (UNAVAILABLE, safe to retry) instead of waiting.
    client.clone().trace(rays(1)).await.expect("a first call");
    let answered = Arc::new(AtomicUsize::new(0));
    // More streams than the limit, each sending one batch and then keeping
    // its request side (and so the stream) open.
    let mut senders = Vec::new();
    let mut calls = Vec::new();
    for _ in 0..6 {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tx.send(rays(1)).await.expect("queued");
        senders.push(tx);
        let mut client = client.clone();
        let answered = Arc::clone(&answered);
        calls.push(tokio::spawn(async move {
            let mut answers = client
                .trace_stream(tokio_stream::wrappers::ReceiverStream::new(rx))
                .await?
                .into_inner();
            let first = answers.message().await?;
            answered.fetch_add(1, Ordering::SeqCst);
            // Read on until the server ends the stream.
            while answers.message().await?.is_some() {}
            Ok::<_, tonic::Status>(first)
        }));
    }
    // Time for every stream to be answered if the server took it.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        answered.load(Ordering::SeqCst),
        3,
        "streams served at once on one connection"
    );
    // Ending the served streams lets the waiting ones through.
    drop(senders);
    for call in calls {
        let first = tokio::time::timeout(Duration::from_secs(20), call)
            .await
            .expect("every stream is served once others end")
            .expect("task")
            .expect("stream served");
        assert_eq!(first.expect("an answer").fractions.len(), 1);
    }
    assert_eq!(answered.load(Ordering::SeqCst), 6);
}
