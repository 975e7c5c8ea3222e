//! The server end to end over HTTP: a real server on a free loopback port,
//! a real HTTP client. Request counts and durations are bounded.

use crate::common;
use crate::common::server::http_agent;

use common::server::{connect_slowly_read, read_until_closed, BinaryServer, TestServer, TOKEN};

use bspq::compile::CompileOptions;
use bspq::map::compile_source;
use bspq::query::{answer, Answer};
use bspq::registry::WorldVersion;
use bspq::server::ServerOptions;
use bspq::service::Limits;
use bspq::trace::Scratch;
use bspq::world::format;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// (status, parsed JSON body)
fn call(req: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> (u16, serde_json::Value) {
    let mut resp = req.expect("request completes");
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
    )
}

fn get(base: &str, path: &str) -> (u16, serde_json::Value) {
    call(http_agent().get(&format!("{base}{path}")).call())
}

fn post(base: &str, path: &str, body: &str) -> (u16, serde_json::Value) {
    call(
        http_agent()
            .post(&format!("{base}{path}"))
            .header("Content-Type", "application/json")
            .send(body),
    )
}

/// The error answer of the HTTP API: this status and code, a message, and
/// the failing query's index when one failed.
fn expect_error(
    status: u16,
    body: &serde_json::Value,
    want_status: u16,
    code: &str,
    index: Option<u64>,
) {
    assert_eq!(status, want_status, "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .is_some_and(|m| !m.is_empty()));
    assert_eq!(body["error"]["query_index"].as_u64(), index, "{body}");
}

fn worlds_dir_with(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, bytes) in files {
        std::fs::write(dir.path().join(name), bytes).expect("write world");
    }
    dir
}

fn compiled(map: &str) -> Vec<u8> {
    let source = std::fs::read(common::map_path(map)).expect("map");
    format::write(&compile_source(&source, map, &CompileOptions::default()).expect("compiles"))
}

fn replace_atomically(dir: &Path, name: &str, bytes: &[u8]) {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, bytes).expect("write");
    std::fs::rename(&tmp, dir.join(name)).expect("rename");
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn answers_match_the_offline_kernel() {
    let dir = worlds_dir_with(&[("arena.bspq", &compiled("q3dm6ish"))]);
    let server = TestServer::start(Some(dir.path().to_owned()), Limits::default());
    let local = common::load_world("q3dm6ish", true);
    let mut scratch = Scratch::new();
    for set in common::SETS {
        let lines = common::load_set("q3dm6ish", set, true).queries;
        let queries: Vec<serde_json::Value> = lines
            .iter()
            .map(|l| serde_json::from_str(l).expect("query json"))
            .collect();
        let body = serde_json::json!({ "queries": queries }).to_string();
        let (status, reply) = post(&server.base, "/v1/worlds/arena/trace", &body);
        assert_eq!(status, 200, "{reply}");
        assert_eq!(reply["world"], "arena");
        assert_eq!(reply["version"], 1);
        let results = reply["results"].as_array().expect("results");
        assert_eq!(results.len(), lines.len());
        for (line, got) in lines.iter().zip(results) {
            let want = answer(&local.view(), &mut scratch, &common::parse_query(line));
            let got: Answer = serde_json::from_value(got.clone()).expect("answer");
            assert_eq!(got, want, "{set}: {line}");
        }
    }
}

#[test]
fn every_route_and_error_path() {
    let limits = Limits {
        max_queries_per_request: 8,
        ..Limits::default()
    };
    let mut server = TestServer::start(None, limits);
    let base = server.base.clone();
    // No worlds directory: the bundled world serves.
    assert_eq!(get(&base, "/healthz").0, 200);
    assert_eq!(get(&base, "/readyz").0, 200);
    let (status, worlds) = get(&base, "/v1/worlds");
    assert_eq!(status, 200);
    assert_eq!(worlds["worlds"][0]["name"], "q3dm6ish");
    let (status, w) = get(&base, "/v1/worlds/q3dm6ish");
    assert_eq!(status, 200);
    for key in [
        "name",
        "version",
        "source",
        "loaded_at",
        "bounds",
        "curves",
        "hulls",
        "status",
        "last_error",
    ] {
        assert!(w.get(key).is_some(), "world description lacks {key}: {w}");
    }
    let (status, one) = get(&base, "/v1/worlds/q3dm6ish/trace?start=0,0,200&end=0,0,-2000&mins=-15,-15,-24&maxs=15,15,32&mask=0x2010001");
    assert_eq!(status, 200, "{one}");
    assert!(one["results"][0]["fraction"].as_f64().expect("fraction") < 1.0);
    let (status, contents) = post(
        &base,
        "/v1/worlds/q3dm6ish/contents",
        r#"{"points":[[0,0,0],[0,0,-100000]]}"#,
    );
    assert_eq!(status, 200, "{contents}");
    assert_eq!(contents["results"].as_array().map(Vec::len), Some(2));

    let trace = "/v1/worlds/q3dm6ish/trace";
    let (s, b) = post(
        &base,
        trace,
        r#"{"queries":[{"start":[0,0,0],"end":[1,1,1]},{"start":[0,0,1e30],"end":[0,0,0]}]}"#,
    );
    expect_error(s, &b, 400, "bad_coordinate", Some(1));
    let (s, b) = post(
        &base,
        trace,
        r#"{"queries":[{"start":[0,0,0],"end":[1,1,1],"mins":[1,0,0],"maxs":[0,0,0]}]}"#,
    );
    expect_error(s, &b, 400, "mins_above_maxs", Some(0));
    let (s, b) = post(&base, "/v1/worlds/nope/trace", r#"{"queries":[]}"#);
    expect_error(s, &b, 404, "unknown_world", None);
    let many =
        serde_json::json!({"queries": vec![serde_json::json!({"start":[0,0,0],"end":[1,1,1]}); 9]});
    let (s, b) = post(&base, trace, &many.to_string());
    // The first query past the limit is the first bad one.
    expect_error(s, &b, 400, "too_many_queries", Some(8));
    let (s, b) = post(&base, trace, "{not json");
    expect_error(s, &b, 400, "malformed_request", None);
    let (s, b) = get(&base, "/v1/worlds/q3dm6ish/trace?start=1,2&end=0,0,0");
    expect_error(s, &b, 400, "malformed_request", None);
    let (s, b) = get(&base, "/v1/worlds/bad%20name");
    expect_error(s, &b, 400, "bad_world_name", None);

    // Admin: upload and unload need the token.
    let map = std::fs::read(common::map_path("aggressor")).expect("map");
    let put = |token: Option<&str>, body: &[u8]| {
        let mut req = http_agent().put(&format!("{base}/v1/worlds/uploaded"));
        if let Some(t) = token {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        call(req.send(body))
    };
    let (s, b) = put(None, &map);
    expect_error(s, &b, 401, "unauthenticated", None);
    let (s, b) = put(Some("wrong"), &map);
    expect_error(s, &b, 401, "unauthenticated", None);
    let (s, b) = put(Some(TOKEN), &map);
    assert_eq!((s, b["version"].as_u64()), (200, Some(1)), "{b}");
    let (s, b) = put(Some(TOKEN), b"not a world");
    expect_error(s, &b, 400, "load_failed", None);
    let (_, w) = get(&base, "/v1/worlds/uploaded");
    assert_eq!(
        w["version"], 1,
        "a failed upload keeps the old version serving"
    );
    assert!(w["last_error"].as_str().is_some_and(|e| !e.is_empty()));
    let version_series = "bspq_world_version{world=\"uploaded\"} 1";
    let text = scrape(&base);
    assert!(text.contains(version_series), "{text}");
    let (s, b) = call(
        http_agent()
            .delete(&format!("{base}/v1/worlds/uploaded"))
            .call(),
    );
    expect_error(s, &b, 401, "unauthenticated", None);
    let (s, _) = call(
        http_agent()
            .delete(&format!("{base}/v1/worlds/uploaded"))
            .header("Authorization", &format!("Bearer {TOKEN}"))
            .call(),
    );
    assert_eq!(s, 200);
    assert_eq!(get(&base, "/v1/worlds/uploaded").0, 404);

    let text = scrape(&base);
    assert!(
        !text.contains("bspq_world_version{world=\"uploaded\"}"),
        "an unloaded world leaves the version gauge"
    );
    for name in [
        "bspq_requests_total",
        "bspq_request_duration_seconds_bucket",
        "bspq_world_version",
        "bspq_batch_size_bucket",
        "bspq_requests_in_flight",
    ] {
        assert!(text.contains(name), "metrics lack {name}");
    }
    server.stop().expect("clean stop");
}

#[test]
fn hot_swap_under_load_never_fails_or_tears() {
    let maps = [
        ("q3dm6ish", compiled("q3dm6ish")),
        ("aggressor", compiled("aggressor")),
    ];
    let dir = worlds_dir_with(&[("arena.bspq", &maps[0].1)]);
    let server = TestServer::start(Some(dir.path().to_owned()), Limits::default());
    // A fixed batch and each map's answers to it.
    let lines: Vec<String> = common::load_set("q3dm6ish", "rays", true)
        .queries
        .into_iter()
        .take(64)
        .collect();
    let expected: Vec<Vec<Answer>> = maps
        .iter()
        .map(|(name, _)| {
            let world = common::load_world(name, true);
            let mut scratch = Scratch::new();
            lines
                .iter()
                .map(|l| answer(&world.view(), &mut scratch, &common::parse_query(l)))
                .collect()
        })
        .collect();
    let body = format!("{{\"queries\":[{}]}}", lines.join(","));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..2)
        .map(|_| {
            let (base, body, expected, stop) = (
                server.base.clone(),
                body.clone(),
                expected.clone(),
                Arc::clone(&stop),
            );
            std::thread::spawn(move || {
                let mut last_version = 0u64;
                let mut seen: Vec<(u64, usize)> = Vec::new();
                let mut requests = 0;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) && requests < 20_000 {
                    let (status, reply) = post(&base, "/v1/worlds/arena/trace", &body);
                    assert_eq!(status, 200, "request failed during a swap: {reply}");
                    let version = reply["version"].as_u64().expect("version");
                    assert!(
                        version >= last_version,
                        "version went back from {last_version} to {version}"
                    );
                    last_version = version;
                    let got: Vec<Answer> =
                        serde_json::from_value(reply["results"].clone()).expect("answers");
                    let map = expected
                        .iter()
                        .position(|e| *e == got)
                        .expect("answers are exactly one map's, never a mix");
                    seen.push((version, map));
                    requests += 1;
                }
                seen
            })
        })
        .collect();
    let mut versions: Vec<Weak<WorldVersion>> = Vec::new();
    for swap in 1..=50 {
        let (_, bytes) = &maps[swap % 2];
        replace_atomically(dir.path(), "arena.bspq", bytes);
        wait_for("the swap", || {
            server
                .registry
                .get("arena")
                .is_some_and(|v| v.version == swap as u64 + 1)
        });
        if let Some(v) = server.registry.get("arena") {
            versions.push(Arc::downgrade(&v));
        }
    }
    // A corrupt replacement leaves the previous version serving.
    let before = server.registry.get("arena").expect("serving").version;
    replace_atomically(dir.path(), "arena.bspq", b"BSPQWRLD corrupt");
    wait_for("the failed load", || {
        server
            .registry
            .slot("arena")
            .and_then(|s| s.status().last_error)
            .is_some()
    });
    assert_eq!(
        server.registry.get("arena").expect("still serving").version,
        before
    );
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut total = 0;
    for c in clients {
        let seen = c.join().expect("client thread");
        total += seen.len();
        // One version always answers with one map.
        for (v, m) in &seen {
            assert!(
                seen.iter().all(|(v2, m2)| v2 != v || m2 == m),
                "version {v} answered with two maps"
            );
        }
    }
    assert!(total > 50, "only {total} requests ran during the swaps");
    let live = versions.iter().filter(|w| w.upgrade().is_some()).count();
    assert_eq!(live, 1, "old versions are freed once their readers finish");
}

#[test]
fn shutdown_drains_requests_in_flight() {
    let mut server = TestServer::start(None, Limits::default());
    let base = server.base.clone();
    let queries = vec![
        serde_json::json!({"start":[-600,-600,400],"end":[600,600,-400],"mins":[-15,-15,-24],"maxs":[15,15,32]});
        60_000
    ];
    let body = serde_json::json!({ "queries": queries }).to_string();
    let inflight = std::thread::spawn(move || post(&base, "/v1/worlds/q3dm6ish/trace", &body));
    // Stop only once the request is received and being answered (a fixed
    // sleep raced the upload of the 60 000-query body).
    let started = Instant::now();
    while server.metrics.in_flight.get() == 0 && !inflight.is_finished() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the request never started"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    server.stop().expect("clean stop");
    let (status, reply) = inflight.join().expect("client");
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["results"].as_array().map(Vec::len), Some(60_000));
}

#[test]
fn the_binary_serves_the_bundled_world_and_exits_cleanly_on_sigterm() {
    let server = BinaryServer::start(&["--worlds", "/nonexistent-bspq-worlds"]);
    serves_the_bundled_world_then_drains(server);
}

/// `server` (started without worlds) lists the bundled one, then SIGTERM
/// drains it and it exits 0.
fn serves_the_bundled_world_then_drains(mut server: BinaryServer) {
    let (status, worlds) = get(&server.http_url(), "/v1/worlds");
    assert_eq!(status, 200);
    assert_eq!(worlds["worlds"][0]["source"], "bundled");
    let exit = server.terminate();
    assert!(exit.success(), "exit status {exit}");
}

/// The signal handlers are in place before the ports open: a SIGTERM sent
/// the moment the server logs that it listens drains and exits (it used to
/// kill the process, when it came before the shutdown task first ran).
#[test]
fn sigterm_the_moment_it_listens_exits_cleanly() {
    for _ in 0..3 {
        let mut server = BinaryServer::start(&["--worlds", "/nonexistent-bspq-worlds"]);
        let exit = server.terminate();
        assert!(exit.success(), "exit status {exit}");
    }
}

/// With nobody reading its log any more, the server keeps answering and
/// still exits cleanly (log lines it cannot write are dropped, not a panic).
#[test]
fn a_closed_log_pipe_neither_stops_nor_crashes_the_server() {
    let server = BinaryServer::start_then_close_log(&["--worlds", "/nonexistent-bspq-worlds"]);
    // Shutting down logs (to the closed pipe) on the way out.
    serves_the_bundled_world_then_drains(server);
}

/// A client that sends nothing, stops halfway through a request head, or
/// pauses in the middle of a body, loses its connection once the read
/// timeout has passed (it used to hold it for ever); prompt clients are
/// served meanwhile.
#[test]
fn stalled_http_clients_are_cut_off_after_the_read_timeout() {
    use std::io::Write;
    let server = BinaryServer::start_with_read_timeout_of_a_second();
    let connect = || connect_slowly_read(&server.http);
    let started = Instant::now();
    let mut silent = connect();
    let mut half_head = connect();
    half_head
        .write_all(b"GET /v1/worlds HTTP/1.1\r\nHost: bspq\r\n")
        .expect("writes");
    let mut half_body = connect();
    half_body
        .write_all(
            b"POST /v1/worlds/q3dm6ish/trace HTTP/1.1\r\nHost: bspq\r\n\
              Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"que",
        )
        .expect("writes");
    let (status, _) = get(&server.http_url(), "/v1/worlds");
    assert_eq!(status, 200, "a prompt client is served meanwhile");
    for (what, stream) in [
        ("nothing sent", &mut silent),
        ("half a head", &mut half_head),
        ("half a body", &mut half_body),
    ] {
        let received = read_until_closed(stream)
            .unwrap_or_else(|| panic!("{what}: still open after {:?}", started.elapsed()));
        let text = String::from_utf8_lossy(&received);
        assert!(!text.starts_with("HTTP/1.1 200"), "{what}: answered {text}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "cut off after {:?}",
        started.elapsed()
    );
}

/// Sends only the head of a request announcing a `length`-byte body, with
/// the admin token, and reads the answer: (status, parsed JSON body).
fn announce(base: &str, method: &str, path: &str, length: usize) -> (u16, serde_json::Value) {
    let authorization = format!("Bearer {TOKEN}");
    announce_as(base, method, path, length, Some(&authorization))
}

/// [`announce`] with this `Authorization` header (or none).
fn announce_as(
    base: &str,
    method: &str,
    path: &str,
    length: usize,
    authorization: Option<&str>,
) -> (u16, serde_json::Value) {
    let addr = base.trim_start_matches("http://");
    let mut stream = connect_slowly_read(addr);
    let authorization = authorization
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{authorization}\
         Content-Type: application/json\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"
    );
    std::io::Write::write_all(&mut stream, head.as_bytes()).expect("head sent");
    let reply = read_until_closed(&mut stream).expect("an answer before the read timeout");
    let reply = String::from_utf8_lossy(&reply);
    let status = reply
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = reply.split("\r\n\r\n").nth(1).unwrap_or_default();
    (status, serde_json::from_str(body).unwrap_or_default())
}

/// Query routes take bodies up to `max_body_bytes`, uploads up to
/// `max_upload_bytes` (one limit over every route let a trace body grow to
/// the upload size), and a body over the limit is told which limit: at
/// once when its length is announced (before the client sends it), and
/// when it is read past the limit when it is not (chunked).
#[test]
fn body_limits_are_per_route_and_named() {
    let limits = Limits {
        max_body_bytes: 4096,
        max_upload_bytes: 1 << 20,
        ..Limits::default()
    };
    let server = TestServer::start(None, limits);
    let base = server.base.clone();
    let named = |b: &serde_json::Value, limit: usize| {
        let message = b["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(&limit.to_string()), "{b}");
    };
    for route in ["trace", "contents"] {
        let path = format!("/v1/worlds/q3dm6ish/{route}");
        let (s, b) = announce(&base, "POST", &path, 4097);
        expect_error(s, &b, 413, "too_large", None);
        named(&b, 4096);
        // The same body sent in chunks, without a length: refused once read.
        let query = r#"{"start":[0,0,0],"end":[1,1,1]},"#.repeat(200);
        let body = format!(r#"{{"queries":[{}]}}"#, query.trim_end_matches(','));
        assert!(body.len() > 4096);
        let (s, b) = call(
            http_agent()
                .post(&format!("{base}{path}"))
                .header("Content-Type", "application/json")
                .send(ureq::SendBody::from_reader(&mut body.as_bytes())),
        );
        expect_error(s, &b, 413, "too_large", None);
        named(&b, 4096);
    }
    // Within the upload limit: read, then refused as no world, not as too large.
    let (s, b) = call(
        http_agent()
            .put(&format!("{base}/v1/worlds/uploaded"))
            .header("Authorization", &format!("Bearer {TOKEN}"))
            .send(&vec![7u8; 64 << 10]),
    );
    expect_error(s, &b, 400, "load_failed", None);
    let (s, b) = announce(&base, "PUT", "/v1/worlds/uploaded", 2 << 20);
    expect_error(s, &b, 413, "too_large", None);
    named(&b, 1 << 20);
}

/// Admin routes check the token on the request head: an upload without a
/// valid one is refused before any of its body is sent or read (the
/// server once buffered 150 MB before answering 401), and before the size
/// limit (401/403 come before 413). The scheme is matched in any case.
#[test]
fn admin_uploads_are_refused_before_their_body_is_read() {
    let limits = Limits {
        max_upload_bytes: 1 << 20,
        ..Limits::default()
    };
    let server = TestServer::start(None, limits.clone());
    let base = server.base.clone();
    let huge = 150 << 20;
    for authorization in [None, Some("Bearer wrong"), Some("Basic dGVzdA==")] {
        let (s, b) = announce_as(&base, "PUT", "/v1/worlds/x", huge, authorization);
        expect_error(s, &b, 401, "unauthenticated", None);
    }
    // With the token, the size limit applies.
    let (s, b) = announce(&base, "PUT", "/v1/worlds/x", huge);
    expect_error(s, &b, 413, "too_large", None);
    let map = std::fs::read(common::map_path("aggressor")).expect("map");
    for (scheme, version) in [("bearer", 1), ("BEARER", 2)] {
        let (s, b) = call(
            http_agent()
                .put(&format!("{base}/v1/worlds/uploaded"))
                .header("Authorization", &format!("{scheme} {TOKEN}"))
                .send(&map),
        );
        assert_eq!((s, b["version"].as_u64()), (200, Some(version)), "{b}");
    }
    let (s, b) = call(
        http_agent()
            .delete(&format!("{base}/v1/worlds/uploaded"))
            .call(),
    );
    expect_error(s, &b, 401, "unauthenticated", None);

    // Admin off: 403 whatever is sent, before the size limit too.
    let off = TestServer::start_with_admin_token(ServerOptions::default(), limits, None);
    let authorization = format!("Bearer {TOKEN}");
    for authorization in [None, Some(authorization.as_str())] {
        let (s, b) = announce_as(&off.base, "PUT", "/v1/worlds/x", huge, authorization);
        expect_error(s, &b, 403, "admin_disabled", None);
        let (s, b) = announce_as(&off.base, "DELETE", "/v1/worlds/q3dm6ish", 0, authorization);
        expect_error(s, &b, 403, "admin_disabled", None);
    }
}

/// A world's version is a per-world counter that only increases: after an
/// unload, the next load of the name continues it (it restarted at 1).
#[test]
fn a_world_version_keeps_increasing_across_unloads() {
    let server = TestServer::start(None, Limits::default());
    let base = server.base.clone();
    let map = std::fs::read(common::map_path("aggressor")).expect("map");
    let admin = |req: ureq::RequestBuilder<ureq::typestate::WithBody>| {
        call(
            req.header("Authorization", &format!("Bearer {TOKEN}"))
                .send(&map),
        )
    };
    let url = format!("{base}/v1/worlds/wv");
    assert_eq!(admin(http_agent().put(&url)).1["version"], 1);
    let (s, _) = call(
        http_agent()
            .delete(&url)
            .header("Authorization", &format!("Bearer {TOKEN}"))
            .call(),
    );
    assert_eq!(s, 200);
    let (s, b) = get(&base, "/v1/worlds/wv");
    expect_error(s, &b, 404, "unknown_world", None);
    let (s, worlds) = get(&base, "/v1/worlds");
    assert_eq!(
        (s, worlds["worlds"].as_array().map(Vec::len)),
        (200, Some(1))
    );
    assert_eq!(admin(http_agent().put(&url)).1["version"], 2);
    assert_eq!(get(&base, "/v1/worlds/wv").1["version"], 2);
    let text = scrape(&base);
    assert!(
        text.contains("bspq_world_version{world=\"wv\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("bspq_requests_total{kind=\"admin\",transport=\"http\",world=\"wv\"} 3"),
        "{text}"
    );
}

/// An uploaded archive's map inflates to at most `max_upload_bytes`, as if
/// sent as is: a small pk3 holding a huge member is refused (it used to
/// inflate to 512 MiB whatever the upload limit), one within it loads.
#[test]
fn an_uploaded_archive_inflates_within_the_upload_limit() {
    let limit = 1 << 20;
    let server = TestServer::start(
        None,
        Limits {
            max_upload_bytes: limit,
            ..Limits::default()
        },
    );
    let map = std::fs::read(common::map_path("q3dm6ish")).expect("map");
    assert!(map.len() < limit, "the plain map fits the limit");
    let padded = [map.as_slice(), &vec![0; limit]].concat();
    let upload = |name: &str, member: &[u8]| {
        let archive = common::pk3_of(&[("maps/arena.bsp", member)]);
        assert!(archive.len() < limit, "the archive itself fits");
        call(
            http_agent()
                .put(&format!("{}/v1/worlds/{name}", server.base))
                .header("Authorization", &format!("Bearer {TOKEN}"))
                .send(&archive),
        )
    };
    let (s, b) = upload("big", &padded);
    expect_error(s, &b, 400, "load_failed", None);
    let message = b["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(&limit.to_string()), "{message}");
    let (s, b) = upload("fits", &map);
    assert_eq!((s, &b["version"]), (200, &serde_json::json!(1)), "{b}");
}

/// The Prometheus text of `GET /metrics`.
fn scrape(base: &str) -> String {
    let (s, metrics) = get(base, "/metrics");
    assert_eq!(s, 200);
    metrics.as_str().unwrap_or_default().to_owned()
}

/// Sends `method` to a route that does not take it: 405, the JSON error
/// body, and the `Allow` header listing the methods it takes.
fn expect_method_not_allowed(base: &str, method: &str, path: &str) -> String {
    let req = ureq::http::Request::builder()
        .method(method)
        .uri(format!("{base}{path}"))
        .body(())
        .expect("request");
    let mut resp = http_agent().run(req).expect("request completes");
    let allow = resp
        .headers()
        .get("allow")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let status = resp.status().as_u16();
    let body: serde_json::Value =
        serde_json::from_str(&resp.body_mut().read_to_string().expect("body")).expect("JSON body");
    expect_error(status, &body, 405, "method_not_allowed", None);
    allow
}

/// Every error response has the API's JSON error body and the right status, and
/// is counted in `bspq_request_errors_total` by its code, wherever it was
/// raised (authorisation, size limits, JSON parsing, routing, the core).
#[test]
fn every_error_is_a_counted_json_body() {
    let limits = Limits {
        max_queries_per_request: 2,
        max_body_bytes: 4096,
        ..Limits::default()
    };
    let server = TestServer::start(None, limits);
    let base = server.base.clone();
    // Routing.
    assert_eq!(
        expect_method_not_allowed(&base, "POST", "/v1/worlds"),
        "GET,HEAD"
    );
    let allow = expect_method_not_allowed(&base, "PATCH", "/v1/worlds/q3dm6ish");
    for method in ["GET", "PUT", "DELETE"] {
        assert!(allow.contains(method), "{allow}");
    }
    let allow = expect_method_not_allowed(&base, "PUT", "/v1/worlds/q3dm6ish/trace");
    assert!(allow.contains("POST") && !allow.contains("PUT"), "{allow}");
    let mut counted = BTreeMap::from([("method_not_allowed", 3)]);
    let mut expect = |(s, b): (u16, serde_json::Value), status, code, index| {
        expect_error(s, &b, status, code, index);
        *counted.entry(code).or_default() += 1;
        b["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    for path in ["/v1/worlds/", "/v1/nope", "/ui/nope.js"] {
        expect(get(&base, path), 404, "not_found", None);
    }

    // Bodies and batches.
    let trace = "/v1/worlds/q3dm6ish/trace";
    expect(
        post(&base, trace, "{not json"),
        400,
        "malformed_request",
        None,
    );
    let message = expect(
        post(
            &base,
            trace,
            r#"{"queries":[{"start":[0,0,0],"end":[0,0,-1000]},{"start":[0,0,0],"end":[0,0]}]}"#,
        ),
        400,
        "malformed_query",
        Some(1),
    );
    assert!(message.starts_with("query 1:"), "{message}");
    expect(
        post(
            &base,
            "/v1/worlds/q3dm6ish/contents",
            r#"{"points":[[0,0,0]],"queries":[{"point":[0,0,0]},{"point":[1]}]}"#,
        ),
        400,
        "malformed_query",
        Some(2),
    );
    let ray = r#"{"start":[0,0,0],"end":[0,0,-1000]}"#;
    expect(
        post(
            &base,
            trace,
            &format!(r#"{{"queries":[{ray},{ray},{ray}]}}"#),
        ),
        400,
        "too_many_queries",
        Some(2),
    );
    expect(announce(&base, "POST", trace, 4097), 413, "too_large", None);
    expect(
        post(&base, "/v1/worlds/nope/trace", r#"{"queries":[]}"#),
        404,
        "unknown_world",
        None,
    );

    // URL queries: percent-decoded, a repeated parameter refused.
    let message = expect(
        get(
            &base,
            &format!("{trace}?start=0%2C0%2C0&end=0,0,-100&hull=s%74and"),
        ),
        400,
        "unknown_hull",
        Some(0),
    );
    assert!(message.contains("\"stand\""), "{message}");
    let message = expect(
        get(
            &base,
            &format!("{trace}?start=0,0,0&end=0,0,-100&end=0,0,-5"),
        ),
        400,
        "malformed_request",
        None,
    );
    assert!(message.contains("`end`"), "{message}");

    // World names: rejected ones never reach a metric label.
    let message = expect(get(&base, "/v1/worlds/%2E%2E"), 400, "bad_world_name", None);
    assert!(message.contains("reserved"), "{message}");
    expect(
        announce_as(&base, "PUT", "/v1/worlds/x", 1 << 20, None),
        401,
        "unauthenticated",
        None,
    );
    let long = "x".repeat(65);
    for name in ["..%2Fx", long.as_str()] {
        let (s, b) = call(
            http_agent()
                .put(&format!("{base}/v1/worlds/{name}"))
                .header("Authorization", &format!("Bearer {TOKEN}"))
                .send("not a world"),
        );
        expect((s, b), 400, "bad_world_name", None);
    }
    let (s, b) = call(
        http_agent()
            .put(&format!("{base}/v1/worlds/fine"))
            .header("Authorization", &format!("Bearer {TOKEN}"))
            .send("not a world"),
    );
    expect((s, b), 400, "load_failed", None);

    let text = scrape(&base);
    for (code, n) in &counted {
        let series = format!("bspq_request_errors_total{{code=\"{code}\",transport=\"http\"}} {n}");
        assert!(text.contains(&series), "{series} missing:\n{text}");
    }
    let failures: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("bspq_world_load_failures_total{"))
        .collect();
    assert_eq!(
        failures,
        ["bspq_world_load_failures_total{world=\"fine\"} 1"],
        "only a valid name's failed load is a series"
    );
}

/// `GET /v1/worlds` lists each world exactly as `GET /v1/worlds/{name}`
/// describes it, bounds in the same (shortest f32) digits: the list used
/// to widen them to f64 first (-800.0002441406250 against -800.00024 for
/// the bundled world's bounds).
#[test]
fn the_world_list_and_a_world_give_the_same_bounds() {
    let server = TestServer::start(None, Limits::default());
    let text = |path: &str| {
        let mut resp = http_agent()
            .get(&format!("{}{path}", server.base))
            .call()
            .expect("request completes");
        assert_eq!(resp.status().as_u16(), 200, "{path}");
        resp.body_mut().read_to_string().expect("body")
    };
    let (list, one) = (text("/v1/worlds"), text("/v1/worlds/q3dm6ish"));
    // The description's bounds as sent, and the same text in the list.
    let start = one.find("\"bounds\":{").expect("bounds");
    let bounds = &one[start..=start + one[start..].find('}').expect("bounds end")];
    assert!(list.contains(bounds), "{bounds} in {list}");
    let list: serde_json::Value = serde_json::from_str(&list).expect("JSON");
    let one: serde_json::Value = serde_json::from_str(&one).expect("JSON");
    assert_eq!(list["worlds"].as_array().map(Vec::len), Some(1), "{list}");
    assert_eq!(list["worlds"][0], one);
}

/// Scenes over HTTP: scene lines among the queries, or a body's own
/// `entities`, answer as the reference's server-side trace.
#[test]
fn scenes_in_bodies_match_the_reference() {
    let map = std::fs::read(common::map_path("q3dm6ish")).expect("map");
    let dir = worlds_dir_with(&[("arena.bsp", &map)]);
    let server = TestServer::start(Some(dir.path().to_owned()), Limits::default());
    let data = common::load_set("q3dm6ish", "scene", true);
    let check = |results: &[serde_json::Value], expected: &[String]| {
        assert_eq!(results.len(), expected.len());
        for (i, (got, want)) in results.iter().zip(expected).enumerate() {
            let got: Answer = serde_json::from_value(got.clone()).expect("answer");
            let want: Answer = serde_json::from_str(want).expect("expected");
            let why = bspq::conformance::mismatch(&want, &got);
            assert!(why.is_none(), "line {}: {why:?}", i + 1);
        }
    };
    // Scene lines among the queries.
    let queries: Vec<serde_json::Value> = data
        .queries
        .iter()
        .map(|l| serde_json::from_str(l).expect("query json"))
        .collect();
    let body = serde_json::json!({ "queries": queries }).to_string();
    let (status, reply) = post(&server.base, "/v1/worlds/arena/trace", &body);
    assert_eq!(status, 200, "{reply}");
    check(
        reply["results"].as_array().expect("results"),
        &data.expected,
    );
    // The first scene as the body's own, with the queries up to the next.
    let next = queries[1..]
        .iter()
        .position(|q| q.get("entities").is_some())
        .map_or(queries.len(), |k| k + 1);
    let body = serde_json::json!({
        "entities": queries[0]["entities"],
        "queries": queries[1..next],
    })
    .to_string();
    let (status, reply) = post(&server.base, "/v1/worlds/arena/trace", &body);
    assert_eq!(status, 200, "{reply}");
    check(
        reply["results"].as_array().expect("results"),
        &data.expected[1..next],
    );
    // The world lists its inline models as the map's models lump has them.
    let bsp = bspq::source::Q3Bsp::parse(&map).expect("map parses");
    let (status, world) = get(&server.base, "/v1/worlds/arena");
    assert_eq!(status, 200, "{world}");
    let models = world["models"].as_array().expect("models");
    assert_eq!(models.len(), bsp.models.len() - 1);
    for (k, m) in models.iter().enumerate() {
        let source = &bsp.models[k + 1];
        assert_eq!(m["index"], k + 1);
        assert_eq!(m["brushes"], source.num_brushes);
        let min_z = m["bounds"]["mins"][2].as_f64().map(|z| z as f32);
        assert_eq!(min_z, Some(source.mins.z));
    }
    // A bad entity in the body's scene, and in a scene line.
    let body = r#"{"entities":[{"id":4,"model":"*999"}],"queries":[{"point":[0,0,0]}]}"#;
    let (status, reply) = post(&server.base, "/v1/worlds/arena/trace", body);
    assert_eq!(status, 400, "{reply}");
    assert_eq!(reply["error"]["code"], "unknown_model", "{reply}");
    assert!(reply["error"].get("query_index").is_none(), "{reply}");
    let body = r#"{"queries":[{"point":[0,0,0]},{"entities":[{"id":4000,"model":"*1"}]}]}"#;
    let (status, reply) = post(&server.base, "/v1/worlds/arena/trace", body);
    assert_eq!(status, 400, "{reply}");
    assert_eq!(reply["error"]["code"], "bad_entity_id", "{reply}");
    assert_eq!(reply["error"]["query_index"], 1, "{reply}");
}
