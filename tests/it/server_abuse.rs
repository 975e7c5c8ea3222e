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

/// An error quotes at most a bounded part of a bad name: a megabyte name
/// over gRPC is `INVALID_ARGUMENT` with a short message (a megabyte status
/// message used to pass the client's header limit and turn into another
/// error), and a 60 KB name over HTTP a short JSON body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_quote_a_bounded_part_of_a_bad_name() {
    let server = TestServer::start(None, Limits::default());
    let mut client = server.collision().await;
    let mut request = rays(1);
    request.world = "n".repeat(1 << 20);
    let status = client.trace(request).await.expect_err("a bad name");
    assert_eq!(
        status.code(),
        Code::InvalidArgument,
        "{:.200}",
        status.message()
    );
    assert!(
        status.message().len() < 2048,
        "{} bytes",
        status.message().len()
    );
    let body: serde_json::Value = serde_json::from_str(status.message()).expect("JSON body");
    assert_eq!(body["error"]["code"], "bad_world_name");

    let base = server.base.clone();
    let (status, body) = tokio::task::spawn_blocking(move || {
        let name = "n".repeat(60_000);
        http_call("GET", &format!("{base}/v1/worlds/{name}"))
    })
    .await
    .expect("task");
    assert_eq!(status, 400);
    assert!(body.len() < 2048, "{} bytes", body.len());
    let body: serde_json::Value = serde_json::from_str(&body).expect("JSON body");
    assert_eq!(body["error"]["code"], "bad_world_name");
}

/// `method url` with ureq: the status and the body, whatever the status.
fn http_call(method: &str, url: &str) -> (u16, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(20)))
        .build()
        .into();
    let request = ureq::http::Request::builder()
        .method(method)
        .uri(url)
        .body(())
        .expect("a request");
    let mut response = agent.run(request).expect("an answer");
    let text = response.body_mut().read_to_string().expect("a body");
    (response.status().as_u16(), text)
}

/// Sends `raw` on a new connection and reads the whole answer (the server
/// closes the connection after refusing a head).
fn raw_exchange(addr: std::net::SocketAddr, raw: &[u8]) -> (u16, String, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("connects");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    // The server may answer and close before it has read all of `raw`.
    let _ = stream.write_all(raw);
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    (status, head.to_owned(), body.to_owned())
}

/// Request heads the HTTP parser refuses still get the JSON error body of
/// the error table (they used to get an empty body).
#[test]
fn refused_request_heads_get_the_json_error_body() {
    let server = TestServer::start(None, Limits::default());
    let long_path = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(100_000));
    let big_header = format!(
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "b".repeat(1 << 20)
    );
    let cases: [(&[u8], u16, &str); 5] = [
        (big_header.as_bytes(), 431, "headers_too_large"),
        (long_path.as_bytes(), 414, "uri_too_long"),
        (
            b"GET /v1/worlds/\xff HTTP/1.1\r\nHost: x\r\n\r\n",
            400,
            "malformed_request",
        ),
        (
            b"GET /v1/worlds?x=\xff HTTP/1.1\r\nHost: x\r\n\r\n",
            400,
            "malformed_request",
        ),
        (b"\x01\x02garbage\r\n\r\n", 400, "malformed_request"),
    ];
    for (raw, want_status, want_code) in cases {
        let (status, head, body) = raw_exchange(server.http, raw);
        assert_eq!(status, want_status, "{head}");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: application/json"),
            "{head}"
        );
        let body: serde_json::Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{want_status}: not JSON ({e}): {body:?}"));
        assert_eq!(body["error"]["code"], want_code);
    }
    // Refused heads are counted like other errors.
    let metrics = http_call("GET", &format!("{}/metrics", server.base)).1;
    assert!(metrics.contains("code=\"headers_too_large\""), "{metrics}");
}

/// `bspq load --transport http` reads answers of any size the server
/// gives: a full batch of 65 536 traces answers about 13 MiB of JSON, past
/// the HTTP client's default limit of 10 MiB.
#[test]
fn load_over_http_reads_answers_over_ten_mebibytes() {
    let server = common::server::BinaryServer::start(&["--worlds", "/nonexistent-bspq-worlds"]);
    let queries = common::oracle_dir("q3dm6ish").join("rays.jsonl.gz");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bspq"))
        .args(["load", "--transport", "http", "--url", &server.http_url()])
        .args(["--world", "q3dm6ish", "--queries"])
        .arg(&queries)
        .args(["--batch", "65536", "--concurrency", "1"])
        .args(["--duration", "30", "--max-requests", "2", "--json"])
        .output()
        .expect("bspq load runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_str(stdout.lines().last().expect("a summary line")).expect("JSON");
    assert_eq!(summary["errors"], 0, "{stdout}");
    assert_eq!(summary["requests"], 2);
}

fn server_with(options: ServerOptions, limits: Limits) -> TestServer {
    TestServer::start_with(options, limits)
}

/// Past `--max-connections` a new connection is answered 503 with the JSON
/// error body and closed, and counted; once one closes, clients are served
/// again.
#[test]
fn connections_past_the_limit_are_refused_at_once() {
    use std::io::Read;
    let server = server_with(
        ServerOptions {
            max_connections: 2,
            ..Default::default()
        },
        Limits::default(),
    );
    let open_connections = |n: i64| {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while server.metrics.connections_open.get() != n {
            assert!(std::time::Instant::now() < deadline, "never {n} open");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    // The start-up health check's connection closes first.
    open_connections(0);
    let idle: Vec<std::net::TcpStream> = (0..2)
        .map(|_| std::net::TcpStream::connect(server.http).expect("connects"))
        .collect();
    // The idle two hold both slots.
    open_connections(2);
    let (status, head, body) =
        raw_exchange(server.http, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(status, 503, "{head}");
    let body: serde_json::Value = serde_json::from_str(&body).expect("JSON body");
    assert_eq!(body["error"]["code"], "too_many_connections");
    // A gRPC connection over the limit is closed before any answer.
    let mut grpc = std::net::TcpStream::connect(server.grpc).expect("connects");
    grpc.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut buf = [0u8; 16];
    assert!(matches!(grpc.read(&mut buf), Ok(0) | Err(_)), "closed");
    drop(idle);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (status, _, _) = raw_exchange(
            server.http,
            b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        if status == 200 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still refused");
        std::thread::sleep(Duration::from_millis(50));
    }
    let metrics = http_call("GET", &format!("{}/metrics", server.base)).1;
    for refused in [
        "bspq_connections_refused_total{transport=\"http\"}",
        "bspq_connections_refused_total{transport=\"grpc\"}",
    ] {
        let line = metrics
            .lines()
            .find(|l| l.starts_with(refused))
            .unwrap_or_else(|| panic!("no {refused} in {metrics}"));
        assert_ne!(line.split(' ').nth(1), Some("0"), "{line}");
    }
}

/// A body dripped slowly enough never to pause past the read timeout
/// still has to arrive whole within the body timeout.
#[test]
fn a_dripped_body_meets_the_whole_body_deadline() {
    use std::io::{Read, Write};
    let server = server_with(
        ServerOptions {
            http_body_timeout: Duration::from_secs(1),
            ..Default::default()
        },
        Limits::default(),
    );
    let mut stream = std::net::TcpStream::connect(server.http).expect("connects");
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    stream
        .write_all(
            b"POST /v1/worlds/q3dm6ish/trace HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{",
        )
        .expect("head");
    let started = std::time::Instant::now();
    let mut answer = Vec::new();
    // One byte every 200 ms: never a pause near the read timeout (60 s).
    while started.elapsed() < Duration::from_secs(15) {
        let _ = stream.write_all(b" ");
        let mut buf = [0u8; 4096];
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
        if answer.windows(4).any(|w| w == b"\r\n\r\n") && answer.ends_with(b"}") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "answered after {:?}",
        started.elapsed()
    );
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("did not arrive within"), "{answer}");
}

/// A modest soak: for a few seconds, clients on both transports send good
/// batches, large batches past a small query budget, bad names, garbage
/// heads and idle connections at once. Every answer is a good answer or a
/// refusal from the error table (never a hang or another error), good
/// batches keep being answered, and the server ends with nothing held.
/// Operators run the long form with `bspq load --duration` (see
/// docs/security.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_mixed_abuse_for_a_few_seconds() {
    let server = server_with(
        ServerOptions {
            max_connections: 64,
            ..Default::default()
        },
        Limits {
            max_queries_in_flight: 40_000,
            ..Limits::default()
        },
    );
    let until = std::time::Instant::now() + Duration::from_secs(4);
    let client = server.collision().await;
    let expected_small = client
        .clone()
        .trace(rays(64))
        .await
        .expect("small")
        .into_inner();
    let mut tasks = Vec::new();
    // gRPC: small ticks and large batches on one channel.
    for k in 0..4 {
        let mut client = client.clone();
        let expected = expected_small.fractions.clone();
        tasks.push(tokio::spawn(async move {
            let (mut ok, mut refused) = (0u32, 0u32);
            while std::time::Instant::now() < until {
                let request = if k % 2 == 0 { rays(64) } else { rays(30_000) };
                let mut request = tonic::Request::new(request);
                request.set_timeout(Duration::from_secs(20));
                match client.trace(request).await {
                    Ok(answer) => {
                        let answer = answer.into_inner();
                        if k % 2 == 0 {
                            assert_eq!(answer.fractions, expected);
                        }
                        ok += 1;
                    }
                    Err(status) => {
                        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
                        let body: serde_json::Value =
                            serde_json::from_str(status.message()).expect("JSON body");
                        assert_eq!(body["error"]["code"], "overloaded");
                        refused += 1;
                    }
                }
            }
            (ok, refused)
        }));
    }
    // HTTP: bad names, garbage heads and idle connections.
    let base = server.base.clone();
    let addr = server.http;
    let abuse = tokio::task::spawn_blocking(move || {
        let mut idle = Vec::new();
        let mut rounds = 0u32;
        while std::time::Instant::now() < until {
            let (status, body) =
                http_call("GET", &format!("{base}/v1/worlds/{}", "x".repeat(5_000)));
            assert_eq!(status, 400, "{body}");
            assert!(body.len() < 2048);
            let (status, _, _) = raw_exchange(addr, b"\xff\xfe garbage\r\n\r\n");
            assert_eq!(status, 400);
            if idle.len() < 8 {
                idle.push(std::net::TcpStream::connect(addr).expect("connects"));
            }
            rounds += 1;
        }
        rounds
    });
    let mut small_ok = 0;
    for (k, task) in tasks.into_iter().enumerate() {
        let (ok, _refused) = task.await.expect("client task");
        if k % 2 == 0 {
            small_ok += ok;
        }
    }
    assert!(abuse.await.expect("abuse task") > 0);
    assert!(small_ok > 0, "small batches were answered");
    // Nothing is held once the clients are done.
    let held = server.metrics.in_flight.get();
    assert_eq!(held, 0, "requests still in flight");
    let healthz = http_call("GET", &format!("{}/healthz", server.base));
    assert_eq!(healthz.0, 200);
}

/// `PUT /v1/worlds/NAME` with the admin token; the status and JSON body.
fn upload(base: &str, name: &str, bytes: &[u8]) -> (u16, serde_json::Value) {
    let agent = crate::common::server::http_agent();
    let mut response = agent
        .put(&format!("{base}/v1/worlds/{name}"))
        .header(
            "Authorization",
            &format!("Bearer {}", common::server::TOKEN),
        )
        .send(bytes)
        .expect("an answer");
    let text = response.body_mut().read_to_string().expect("a body");
    (
        response.status().as_u16(),
        serde_json::from_str(&text).expect("JSON"),
    )
}

/// With a worlds directory, an upload is written through to it (and not
/// loaded a second time by the watcher), so it survives a restart; and a
/// name's versions go on increasing across the restart.
#[test]
fn uploads_survive_a_restart_and_versions_keep_increasing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let map = std::fs::read(common::map_path("q3dm6ish")).expect("map");
    let pk3 = common::pk3_of(&[("maps/up.bsp", &map)]);
    let version_of = |server: &TestServer| {
        let (status, body) = http_call("GET", &format!("{}/v1/worlds/up", server.base));
        assert_eq!(status, 200, "{body}");
        let body: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        body["version"].as_u64().expect("a version")
    };
    {
        let server = TestServer::start(Some(dir.path().to_owned()), Limits::default());
        let (status, body) = upload(&server.base, "up", &map);
        assert_eq!(
            (status, &body["version"]),
            (200, &serde_json::json!(1)),
            "{body}"
        );
        assert_eq!(
            std::fs::read(dir.path().join("up.bsp")).expect("written through"),
            map
        );
        // Replaced by an archive of the same map: one file of the name.
        let (status, body) = upload(&server.base, "up", &pk3);
        assert_eq!(
            (status, &body["version"]),
            (200, &serde_json::json!(2)),
            "{body}"
        );
        assert!(!dir.path().join("up.bsp").exists());
        assert!(dir.path().join("up.pk3").exists());
        // The watcher (rescanning every 20 ms) does not load it again.
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(version_of(&server), 2);
    }
    let server = TestServer::start(Some(dir.path().to_owned()), Limits::default());
    assert_eq!(
        version_of(&server),
        3,
        "the upload serves after the restart"
    );
}
