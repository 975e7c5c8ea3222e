//! The server end to end over gRPC: a real server on free loopback ports, a
//! tonic client, an independent Python grpcio client, and `bspq trace
//! --server` with the real binary. Request counts and durations are bounded.

use crate::common;

use common::server::{connect_slowly_read, read_until_closed, BinaryServer, TestServer, TOKEN};

use bspq::proto::v1 as pb;
use bspq::query::{answer, Answer, PointAnswer, Query, TraceAnswer};
use bspq::server::ServerOptions;
use bspq::service::Limits;
use bspq::trace::Scratch;
use pb::admin_client::AdminClient;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;
use tonic::Code;

fn v3(v: [f32; 3]) -> Option<pb::Vec3> {
    Some(pb::Vec3 {
        x: v[0],
        y: v[1],
        z: v[2],
    })
}

fn ray_request(world: &str, pairs: &[([f32; 3], [f32; 3])]) -> pb::TraceRequest {
    pb::TraceRequest {
        world: world.into(),
        starts: pairs.iter().flat_map(|p| p.0).collect(),
        ends: pairs.iter().flat_map(|p| p.1).collect(),
        ..Default::default()
    }
}

/// The answers of a packed response.
fn unpack(r: &pb::TraceResponse) -> Vec<Answer> {
    let v = |a: &[f32], i: usize| [a[3 * i], a[3 * i + 1], a[3 * i + 2]];
    (0..r.fractions.len())
        .map(|i| {
            Answer::Trace(TraceAnswer {
                fraction: r.fractions[i],
                endpos: v(&r.endpos, i),
                normal: v(&r.normals, i),
                dist: r.dists[i],
                startsolid: r.flags[i] & 1 != 0,
                allsolid: r.flags[i] & 2 != 0,
                contents: r.contents[i],
                surface_flags: r.surface_flags[i],
                entity: None,
            })
        })
        .collect()
}

/// The JSON error body carried in a status message.
fn error_body(status: &tonic::Status) -> serde_json::Value {
    serde_json::from_str(status.message()).expect("status message is the JSON error body")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_match_the_offline_kernel() {
    let server = TestServer::start(None, Limits::default());
    let mut client = server.collision().await;
    let local = common::load_world("q3dm6ish", true);
    let mut scratch = Scratch::new();
    let mut compared = 0;
    for set in common::SETS {
        let lines = common::load_set("q3dm6ish", set, true).queries;
        let queries: Vec<Query> = lines.iter().map(|l| common::parse_query(l)).collect();
        // Traces grouped by box (the batch shape), per-query masks; points apart.
        let mut groups: BTreeMap<[u32; 6], (Vec<usize>, pb::TraceRequest)> = BTreeMap::new();
        let mut points = (Vec::new(), Vec::new());
        for (i, q) in queries.iter().enumerate() {
            match q {
                Query::Point(p) => {
                    points.0.push(i);
                    points.1.extend_from_slice(&p.to_array());
                }
                Query::Trace(t) => {
                    let key: Vec<u32> = [t.mins().to_array(), t.maxs().to_array()]
                        .concat()
                        .iter()
                        .map(|f| f.to_bits())
                        .collect();
                    let key: [u32; 6] = key.try_into().expect("six");
                    let (idx, req) = groups.entry(key).or_insert_with(|| {
                        (
                            Vec::new(),
                            pb::TraceRequest {
                                world: "q3dm6ish".into(),
                                shape: Some(pb::Box {
                                    mins: v3(t.mins().to_array()),
                                    maxs: v3(t.maxs().to_array()),
                                }),
                                ..Default::default()
                            },
                        )
                    });
                    idx.push(i);
                    req.starts.extend_from_slice(&t.start().to_array());
                    req.ends.extend_from_slice(&t.end().to_array());
                    req.masks.push(t.mask());
                }
            }
        }
        for (idx, req) in groups.into_values() {
            // Line of sight: `hits` only, each equal to the full trace's fraction < 1.
            let sight = client
                .trace(pb::TraceRequest {
                    any_hit: true,
                    ..req.clone()
                })
                .await
                .expect("any-hit trace")
                .into_inner();
            assert!(sight.fractions.is_empty() && sight.flags.is_empty());
            assert_eq!(sight.hits.len(), idx.len());
            for (i, hit) in idx.iter().zip(&sight.hits) {
                let Query::Trace(t) = &queries[*i] else {
                    unreachable!("grouped traces")
                };
                let full = bspq::trace::trace(&local.view(), t, &mut scratch);
                assert_eq!(*hit, full.fraction < 1.0, "{set}: {}", lines[*i]);
            }
            let r = client.trace(req).await.expect("trace").into_inner();
            assert_eq!((r.world.as_str(), r.version), ("q3dm6ish", 1));
            assert!(r.hits.is_empty());
            let got = unpack(&r);
            assert_eq!(got.len(), idx.len());
            for (i, got) in idx.iter().zip(got) {
                let want = answer(&local.view(), &mut scratch, &queries[*i]);
                assert_eq!(got, want, "{set}: {}", lines[*i]);
                compared += 1;
            }
        }
        if !points.0.is_empty() {
            let r = client
                .point_contents(pb::PointContentsRequest {
                    world: "q3dm6ish".into(),
                    points: points.1,
                })
                .await
                .expect("contents")
                .into_inner();
            assert_eq!(r.contents.len(), points.0.len());
            for (i, contents) in points.0.iter().zip(r.contents) {
                let want = answer(&local.view(), &mut scratch, &queries[*i]);
                assert_eq!(Answer::Point(PointAnswer { contents }), want);
                compared += 1;
            }
        }
    }
    assert!(compared > 1000, "only {compared} answers compared");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_stream_answers_batches_in_order() {
    let server = TestServer::start(None, Limits::default());
    let mut client = server.collision().await;
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let mut responses = client
        .trace_stream(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .expect("stream opens")
        .into_inner();
    // Batches of different sizes, so a reordering would show.
    let batches: Vec<pb::TraceRequest> = (0..8u64)
        .map(|tick| {
            let n = 1 + (tick as usize * 37) % 200;
            let pairs: Vec<([f32; 3], [f32; 3])> = (0..n)
                .map(|i| {
                    let a = (i as f32 + tick as f32) * 0.1;
                    ([0.0, 0.0, 0.0], [600.0 * a.cos(), 600.0 * a.sin(), -300.0])
                })
                .collect();
            pb::TraceRequest {
                sequence: 100 + tick,
                ..ray_request("q3dm6ish", &pairs)
            }
        })
        .collect();
    for b in &batches {
        tx.send(b.clone()).await.expect("send");
    }
    drop(tx);
    let mut got = Vec::new();
    while let Some(r) = responses.message().await.expect("stream message") {
        got.push(r);
    }
    assert_eq!(got.len(), batches.len());
    for (b, r) in batches.iter().zip(&got) {
        assert_eq!(r.sequence, b.sequence);
        assert_eq!(r.fractions.len(), b.starts.len() / 3);
        let unary = client.trace(b.clone()).await.expect("unary").into_inner();
        assert_eq!(unpack(r), unpack(&unary));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_statuses() {
    let server = TestServer::start(
        None,
        Limits {
            max_queries_per_request: 10,
            ..Limits::default()
        },
    );
    let mut client = server.collision().await;
    let ok = ([0.0, 0.0, 0.0], [0.0, 0.0, -100.0]);

    // Bad coordinates: INVALID_ARGUMENT naming the query index.
    let mut req = ray_request("q3dm6ish", &[ok, ok, ok]);
    req.ends[7] = f32::NAN;
    let e = client.trace(req).await.expect_err("rejected");
    assert_eq!(e.code(), Code::InvalidArgument);
    let body = error_body(&e);
    assert_eq!(body["error"]["query_index"], 2, "{body}");
    assert_eq!(body["error"]["code"], "bad_coordinate");
    assert!(e.message().contains("query 2"), "{}", e.message());

    let mut req = ray_request("q3dm6ish", &[ok]);
    req.starts[0] = 2.0e7;
    let e = client.trace(req).await.expect_err("rejected");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(error_body(&e)["error"]["query_index"], 0);

    // mins above maxs.
    let mut req = ray_request("q3dm6ish", &[ok]);
    req.shape = Some(pb::Box {
        mins: v3([1.0; 3]),
        maxs: v3([-1.0; 3]),
    });
    let e = client.trace(req).await.expect_err("rejected");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(error_body(&e)["error"]["code"], "mins_above_maxs");

    // Mismatched packed arrays.
    for mangle in [
        (|r: &mut pb::TraceRequest| r.ends.truncate(3)) as fn(&mut pb::TraceRequest),
        |r| {
            r.starts.pop();
        },
        |r| r.masks = vec![1],
    ] {
        let mut req = ray_request("q3dm6ish", &[ok, ok]);
        mangle(&mut req);
        let e = client.trace(req).await.expect_err("rejected");
        assert_eq!(e.code(), Code::InvalidArgument, "{}", e.message());
        assert_eq!(error_body(&e)["error"]["code"], "malformed_request");
    }
    let e = client
        .point_contents(pb::PointContentsRequest {
            world: "q3dm6ish".into(),
            points: vec![0.0; 4],
        })
        .await
        .expect_err("rejected");
    assert_eq!(e.code(), Code::InvalidArgument);

    // Too many queries.
    let e = client
        .trace(ray_request("q3dm6ish", &[ok; 11]))
        .await
        .expect_err("rejected");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(error_body(&e)["error"]["code"], "too_many_queries");

    // Unknown world, bad world name.
    let e = client
        .trace(ray_request("nope", &[ok]))
        .await
        .expect_err("rejected");
    assert_eq!(e.code(), Code::NotFound);
    assert_eq!(error_body(&e)["error"]["code"], "unknown_world");
    let e = client
        .get_world(pb::GetWorldRequest {
            name: "nope".into(),
        })
        .await
        .expect_err("rejected");
    assert_eq!(e.code(), Code::NotFound);
    let e = client
        .trace(ray_request("../etc", &[ok]))
        .await
        .expect_err("rejected");
    assert_eq!(e.code(), Code::InvalidArgument);

    // Admin without a valid token.
    let mut admin = AdminClient::new(server.channel().await);
    let unload = |token: Option<&str>| {
        let mut r = tonic::Request::new(pb::UnloadWorldRequest {
            name: "q3dm6ish".into(),
        });
        if let Some(t) = token {
            r.metadata_mut()
                .insert("authorization", t.parse().expect("ascii"));
        }
        r
    };
    for token in [None, Some("Bearer wrong"), Some(TOKEN)] {
        let e = admin
            .unload_world(unload(token))
            .await
            .expect_err("rejected");
        assert_eq!(e.code(), Code::Unauthenticated, "{token:?}");
        assert_eq!(error_body(&e)["error"]["code"], "unauthenticated");
    }
    // The world is still there.
    let w = client
        .get_world(pb::GetWorldRequest {
            name: "q3dm6ish".into(),
        })
        .await
        .expect("described")
        .into_inner();
    assert_eq!((w.version, w.status.as_str()), (1, "serving"));
    assert!(w.counts.is_some_and(|c| c.brushes > 0));
    assert!(w.bounds.is_some());
    assert_eq!(w.source, "bundled");
    assert_eq!(w.source_hash.len(), 16);
    let bearer = format!("Bearer {TOKEN}");
    let r = admin
        .unload_world(unload(Some(&bearer)))
        .await
        .expect("unloaded");
    assert!(r.into_inner().unloaded);
    let e = client
        .trace(ray_request("q3dm6ish", &[ok]))
        .await
        .expect_err("gone");
    assert_eq!(e.code(), Code::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_worlds_sees_an_admin_upload() {
    let server = TestServer::start(None, Limits::default());
    let mut client = server.collision().await;
    let mut events = client
        .watch_worlds(pb::WatchWorldsRequest {})
        .await
        .expect("watch")
        .into_inner();
    let first = events.message().await.expect("event").expect("open");
    assert_eq!((first.name.as_str(), first.version), ("q3dm6ish", 1));

    let bytes = std::fs::read(common::map_path("q3dm6ish")).expect("map");
    let mut admin = AdminClient::new(server.channel().await);
    let mut req = tonic::Request::new(pb::LoadWorldRequest {
        name: "q3dm6ish".into(),
        data: bytes,
    });
    req.metadata_mut().insert(
        "authorization",
        format!("Bearer {TOKEN}").parse().expect("ascii"),
    );
    let loaded = admin.load_world(req).await.expect("uploaded").into_inner();
    assert_eq!(loaded.version, 2);
    let next = tokio::time::timeout(Duration::from_secs(10), events.message())
        .await
        .expect("event in time")
        .expect("event")
        .expect("open");
    assert_eq!((next.name.as_str(), next.version), ("q3dm6ish", 2));
    assert!(next.error.is_empty());

    // A corrupt upload: rejected, the old version keeps serving, watchers see the error.
    let mut req = tonic::Request::new(pb::LoadWorldRequest {
        name: "q3dm6ish".into(),
        data: b"not a world".to_vec(),
    });
    req.metadata_mut().insert(
        "authorization",
        format!("Bearer {TOKEN}").parse().expect("ascii"),
    );
    let e = admin.load_world(req).await.expect_err("corrupt");
    assert_eq!(e.code(), Code::InvalidArgument);
    let failed = events.message().await.expect("event").expect("open");
    assert_eq!(failed.version, 2);
    assert!(!failed.error.is_empty());
    let r = client
        .trace(ray_request(
            "q3dm6ish",
            &[([0.0, 0.0, 0.0], [0.0, 0.0, -1000.0])],
        ))
        .await
        .expect("still serving")
        .into_inner();
    assert_eq!(r.version, 2);

    // An unload, then a load of the same name: versions carry on (they
    // restarted at 1).
    let mut req = tonic::Request::new(pb::UnloadWorldRequest {
        name: "q3dm6ish".into(),
    });
    req.metadata_mut().insert(
        "authorization",
        format!("Bearer {TOKEN}").parse().expect("ascii"),
    );
    admin.unload_world(req).await.expect("unloaded");
    let unloaded = events.message().await.expect("event").expect("open");
    assert_eq!((unloaded.name.as_str(), unloaded.version), ("q3dm6ish", 0));
    let bytes = std::fs::read(common::map_path("q3dm6ish")).expect("map");
    let req = admin_request(
        pb::LoadWorldRequest {
            name: "q3dm6ish".into(),
            data: bytes,
        },
        Some(&format!("Bearer {TOKEN}")),
    );
    assert_eq!(
        admin
            .load_world(req)
            .await
            .expect("loaded")
            .into_inner()
            .version,
        3
    );
    let reloaded = events.message().await.expect("event").expect("open");
    assert_eq!((reloaded.name.as_str(), reloaded.version), ("q3dm6ish", 3));
}

/// An admin request carrying this `authorization` metadata (or none).
fn admin_request<T>(message: T, authorization: Option<&str>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(value) = authorization {
        request
            .metadata_mut()
            .insert("authorization", value.parse().expect("ascii"));
    }
    request
}

/// The admin token is checked (by an interceptor) before tonic decodes, so
/// reads, the message: an unauthorised upload is refused without being
/// read, before the size limit (it was read in full, then refused), and
/// with admin off PERMISSION_DENIED. The scheme is matched in any case.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_calls_are_refused_before_their_message_is_read() {
    let limits = Limits {
        max_upload_bytes: 1 << 20,
        ..Limits::default()
    };
    let server = TestServer::start(None, limits.clone());
    let mut admin = AdminClient::new(server.channel().await).max_encoding_message_size(usize::MAX);
    let oversized = || pb::LoadWorldRequest {
        name: "x".into(),
        data: vec![0; 4 << 20],
    };
    for authorization in [None, Some("Bearer wrong")] {
        let e = admin
            .load_world(admin_request(oversized(), authorization))
            .await
            .expect_err("refused");
        assert_eq!(
            e.code(),
            Code::Unauthenticated,
            "{authorization:?}: {}",
            e.message()
        );
        assert_eq!(error_body(&e)["error"]["code"], "unauthenticated");
    }
    // With the token the size limit applies, as the error table says.
    let bearer = format!("bearer {TOKEN}");
    let e = admin
        .load_world(admin_request(oversized(), Some(&bearer)))
        .await
        .expect_err("too large");
    assert_eq!(e.code(), Code::ResourceExhausted, "{}", e.message());
    assert_eq!(error_body(&e)["error"]["code"], "too_large");
    assert!(
        e.message().contains(&(1 << 20).to_string()),
        "{}",
        e.message()
    );
    let map = std::fs::read(common::map_path("aggressor")).expect("map");
    let request = pb::LoadWorldRequest {
        name: "uploaded".into(),
        data: map,
    };
    let loaded = admin
        .load_world(admin_request(request, Some(&bearer)))
        .await
        .expect("uploaded");
    assert_eq!(loaded.into_inner().version, 1);

    let off = TestServer::start_with_admin_token(ServerOptions::default(), limits, None);
    let mut admin = AdminClient::new(off.channel().await).max_encoding_message_size(usize::MAX);
    for authorization in [None, Some(bearer.as_str())] {
        let e = admin
            .load_world(admin_request(oversized(), authorization))
            .await
            .expect_err("admin off");
        assert_eq!(e.code(), Code::PermissionDenied, "{}", e.message());
        assert_eq!(error_body(&e)["error"]["code"], "admin_disabled");
    }
}

/// A message over `max_body_bytes` is refused as the error table says
/// (RESOURCE_EXHAUSTED, `too_large`, the JSON body naming the limit), not
/// with tonic's own OUT_OF_RANGE and plain text: unary, and mid-stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_messages_follow_the_error_table() {
    let server = TestServer::start(
        None,
        Limits {
            max_body_bytes: 1024,
            ..Limits::default()
        },
    );
    let mut client = server.collision().await;
    let pairs = vec![([0.0, 0.0, 0.0], [0.0, 0.0, -100.0]); 100];
    let too_large = |e: &tonic::Status| {
        assert_eq!(e.code(), Code::ResourceExhausted, "{}", e.message());
        assert_eq!(error_body(e)["error"]["code"], "too_large");
        assert!(e.message().contains("1024"), "{}", e.message());
    };
    let e = client
        .trace(ray_request("q3dm6ish", &pairs))
        .await
        .expect_err("too large");
    too_large(&e);

    let (tx, rx) = tokio::sync::mpsc::channel(2);
    let mut responses = client
        .trace_stream(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .expect("stream opens")
        .into_inner();
    tx.send(ray_request("q3dm6ish", &pairs[..2]))
        .await
        .expect("send");
    let small = responses.message().await.expect("answer").expect("open");
    assert_eq!(small.fractions.len(), 2);
    tx.send(ray_request("q3dm6ish", &pairs))
        .await
        .expect("send");
    let e = responses.message().await.expect_err("too large");
    too_large(&e);
    let metrics = ureq::get(&format!("{}/metrics", server.base))
        .call()
        .expect("scrape")
        .body_mut()
        .read_to_string()
        .expect("text");
    assert!(
        metrics.contains("bspq_request_errors_total{code=\"too_large\",transport=\"grpc\"} 2"),
        "{metrics}"
    );
}

/// Shutdown ends an open `TraceStream` whose client is still sending with
/// UNAVAILABLE (which clients retry, see the README), not OK.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_open_trace_streams_with_unavailable() {
    let mut server = TestServer::start(None, Limits::default());
    let mut client = server.collision().await;
    let (tx, rx) = tokio::sync::mpsc::channel(2);
    let mut responses = client
        .trace_stream(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .expect("stream opens")
        .into_inner();
    let ok = ([0.0, 0.0, 0.0], [0.0, 0.0, -100.0]);
    tx.send(ray_request("q3dm6ish", &[ok])).await.expect("send");
    responses.message().await.expect("answer").expect("open");
    server.begin_stop();
    let e = tokio::time::timeout(Duration::from_secs(10), responses.message())
        .await
        .expect("ends in time")
        .expect_err("ends with a status");
    assert_eq!(e.code(), Code::Unavailable, "{}", e.message());
    assert_eq!(error_body(&e)["error"]["code"], "unavailable");
    drop(tx);
    let stopped = tokio::task::spawn_blocking(move || server.stop())
        .await
        .expect("join");
    stopped.expect("clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_serving_then_not_serving_during_shutdown() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::HealthCheckRequest;
    let mut server = TestServer::start(None, Limits::default());
    let mut health = HealthClient::new(server.channel().await);
    for service in ["", "bspq.v1.Collision"] {
        let r = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .expect("check")
            .into_inner();
        assert_eq!(r.status, ServingStatus::Serving as i32, "{service:?}");
    }
    let mut watch = health
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .expect("watch")
        .into_inner();
    let first = watch.message().await.expect("status").expect("open");
    assert_eq!(first.status, ServingStatus::Serving as i32);
    server.begin_stop();
    let next = tokio::time::timeout(Duration::from_secs(10), watch.message())
        .await
        .expect("status in time")
        .expect("status")
        .expect("open");
    assert_eq!(next.status, ServingStatus::NotServing as i32);
    let stopped = tokio::task::spawn_blocking(move || server.stop())
        .await
        .expect("join");
    stopped.expect("clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflection_lists_the_services() {
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    let server = TestServer::start(None, Limits::default());
    let mut client = ServerReflectionClient::new(server.channel().await);
    let req = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut stream = client
        .server_reflection_info(tokio_stream::iter([req]))
        .await
        .expect("reflection")
        .into_inner();
    let r = stream.message().await.expect("answer").expect("open");
    let Some(MessageResponse::ListServicesResponse(list)) = r.message_response else {
        panic!("unexpected reflection answer {r:?}");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for want in [
        "bspq.v1.Collision",
        "bspq.v1.Admin",
        "grpc.health.v1.Health",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
}

/// An independent client: Python grpcio stubs generated from `proto/` now.
#[test]
fn python_grpcio_client_traces_and_checks_health() {
    use common::python::{self, Needs};
    if !python::python3_available() {
        common::skip(
            "python_grpcio_client_traces_and_checks_health",
            "python3 is not installed",
        );
        return;
    }
    let python = python::ensure(
        "grpcio",
        Needs::Modules(&["grpc", "grpc_tools", "grpc_health"]),
        &["grpcio", "grpcio-tools", "grpcio-health-checking"],
    )
    .unwrap_or_else(|e| panic!("the Python gRPC client: {e}"));
    let server = TestServer::start(None, Limits::default());
    let out = tempfile::tempdir().expect("temp dir");
    let proto_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("proto");
    let gen = python
        .python()
        .args(["-m", "grpc_tools.protoc", "-I"])
        .arg(&proto_dir)
        .arg(format!("--python_out={}", out.path().display()))
        .arg(format!("--grpc_python_out={}", out.path().display()))
        .arg(proto_dir.join("bspq/v1/bspq.proto"))
        .output()
        .expect("runs python3");
    assert!(
        gen.status.success(),
        "python3 -m grpc_tools.protoc failed: {}",
        String::from_utf8_lossy(&gen.stderr)
    );
    let script = r#"
import json, sys, grpc
from bspq.v1 import bspq_pb2 as pb, bspq_pb2_grpc as rpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
channel = grpc.insecure_channel(sys.argv[1])
stub = rpc.CollisionStub(channel)
r = stub.Trace(pb.TraceRequest(world="q3dm6ish", starts=[0, 0, 0, 0, 0, 0], ends=[0, 0, -1000, 0, 0, 1000],
                               shape=pb.Box(mins=pb.Vec3(x=-15, y=-15, z=-24), maxs=pb.Vec3(x=15, y=15, z=32))))
try:
    stub.Trace(pb.TraceRequest(world="q3dm6ish", starts=[0, 0, 0, 0, 0, 0], ends=[0, 0, 1, 0, 0, float("inf")]))
    bad = None
except grpc.RpcError as e:
    bad = {"code": e.code().name, "body": json.loads(e.details())}
h = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""))
print(json.dumps({"world": r.world, "version": r.version, "fractions": list(r.fractions),
                  "endpos": list(r.endpos), "flags": list(r.flags), "bad": bad,
                  "health": health_pb2.HealthCheckResponse.ServingStatus.Name(h.status)}))
"#;
    let run = python
        .python_with(&[out.path()])
        .arg("-c")
        .arg(script)
        .arg(server.grpc.to_string())
        .output()
        .expect("runs python3");
    assert!(
        run.status.success(),
        "python client failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let got: serde_json::Value = serde_json::from_slice(&run.stdout).expect("python prints JSON");
    assert_eq!(got["world"], "q3dm6ish");
    assert_eq!(got["version"], 1);
    assert_eq!(got["health"], "SERVING");
    assert_eq!(got["bad"]["code"], "INVALID_ARGUMENT");
    assert_eq!(got["bad"]["body"]["error"]["query_index"], 1);
    // Same answers as the kernel in process.
    let local = common::load_world("q3dm6ish", true);
    let mut scratch = Scratch::new();
    for (i, end) in [-1000.0, 1000.0].into_iter().enumerate() {
        let q = common::parse_query(&format!(
            r#"{{"start":[0,0,0],"end":[0,0,{end}],"mins":[-15,-15,-24],"maxs":[15,15,32]}}"#
        ));
        let Answer::Trace(want) = answer(&local.view(), &mut scratch, &q) else {
            panic!("trace answer");
        };
        assert_eq!(got["fractions"][i].as_f64(), Some(want.fraction as f64));
        assert_eq!(
            got["endpos"][3 * i + 2].as_f64(),
            Some(want.endpos[2] as f64)
        );
    }
    let _ = server.http;
}

/// `bspq trace --server` against `bspq serve`, both the real binary: the
/// output equals offline `bspq trace` byte for byte.
/// Movement lines for the CLI comparison: predictions (one with its path,
/// stop events with parameters), a plain slide and a ground probe.
const MOVEMENT_LINES: &str = concat!(
    r#"{"predict":{"origin":[0,0,40],"velocity":[120,200,0],"frametime":0.05,"ticks":40,"gravity":800,"until":["landed","blocked","fell"],"fall":64,"path":true,"mins":[-15,-15,-24],"maxs":[15,15,32]}}"#,
    "\n",
    r#"{"predict":{"origin":[64,-32,40],"velocity":[-300,0,270],"frametime":0.05,"ticks":20,"gravity":800,"until":["contents","left_ground"],"contents":1,"mins":[-15,-15,-24],"maxs":[15,15,32],"mask":1}}"#,
    "\n",
    r#"{"slide":{"origin":[0,0,40],"velocity":[200,50,-10],"frametime":0.05,"gravity":800,"step":false,"mins":[-15,-15,-24],"maxs":[15,15,32]}}"#,
    "\n",
    r#"{"ground":{"origin":[0,0,40],"mins":[-15,-15,-24],"maxs":[15,15,32],"mask":1}}"#,
    "\n",
);

#[test]
fn trace_cli_over_grpc_equals_offline() {
    use std::io::Write;
    let bin = env!("CARGO_BIN_EXE_bspq");
    let mut server = BinaryServer::start(&["--worlds", "/nonexistent-bspq-worlds"]);

    let mut input = String::new();
    for set in common::SETS {
        for line in common::load_set("q3dm6ish", set, true).queries {
            input.push_str(&line);
            input.push('\n');
        }
    }
    // Movement: the reference moves (ground probes and slide moves), and
    // predictions, with and without their paths.
    for line in common::load_set("q3dm6ish", "moves", true).queries {
        input.push_str(&line);
        input.push('\n');
    }
    input.push_str(MOVEMENT_LINES);
    input.push_str("{\"start\":[0,0,0],\"end\":[1e30,0,0]}\n\nnot json\n");
    input.push_str("{\"point\":[1,2,3]}\n");
    // Scenes: the reference scenes (their lines mix boxes, rays, any-hit,
    // passes and points), a scene naming a model the map lacks and one
    // with an id twice (both refused, the last good scene stays), an empty
    // one, and a hull the world does not have.
    for line in common::load_set("q3dm6ish", "scene", true).queries {
        input.push_str(&line);
        input.push('\n');
    }
    input.push_str("{\"entities\":[{\"id\":1,\"model\":\"*999\"}]}\n");
    input.push_str("{\"start\":[0,0,0],\"end\":[64,0,0],\"hull\":\"nope\"}\n");
    input.push_str("{\"entities\":[{\"id\":1,\"box\":{\"mins\":[-8,-8,-8],\"maxs\":[8,8,8]}},{\"id\":1,\"model\":\"*1\"}]}\n");
    input.push_str("{\"start\":[0,0,0],\"end\":[64,0,0],\"any\":true,\"pass\":3}\n");
    // A scene with movement lines among its traces, and bad movement lines.
    input.push_str("{\"entities\":[{\"id\":5,\"box\":{\"mins\":[-16,-16,-24],\"maxs\":[16,16,32]},\"origin\":[0,0,0]},{\"id\":6,\"model\":\"*1\"}]}\n");
    input.push_str(MOVEMENT_LINES);
    input.push_str(
        "{\"ground\":{\"origin\":[0,0,0],\"mins\":[-15,-15,-24],\"maxs\":[15,15,32],\"pass\":5}}\n",
    );
    input.push_str("{\"slide\":{\"origin\":[0,0,0],\"velocity\":[0,0,0],\"frametime\":2,\"mins\":[-15,-15,-24],\"maxs\":[15,15,32]}}\n");
    input.push_str("{\"ground\":{\"origin\":[0,0,0],\"hull\":\"nope\"}}\n");
    input.push_str("{\"predict\":{\"origin\":[0,0,0],\"velocity\":[0,0,0],\"frametime\":0.05,\"ticks\":5,\"mins\":[-15,-15,-24],\"maxs\":[15,15,32],\"until\":[\"soon\"]}}\n");
    input.push_str("{\"entities\":[]}\n{\"start\":[0,0,0],\"end\":[64,0,0]}\n");
    let trace = |args: &[&str]| {
        let mut c = std::process::Command::new(bin)
            .arg("trace")
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("trace runs");
        let mut stdin = c.stdin.take().expect("stdin");
        let data = input.clone();
        // A run that fails early (unknown world) stops reading: ignore EPIPE.
        let writer = std::thread::spawn(move || stdin.write_all(data.as_bytes()));
        let out = c.wait_with_output().expect("trace output");
        let _ = writer.join().expect("writer");
        out
    };
    let map = common::map_path("q3dm6ish");
    let offline = trace(&["--world", map.to_str().expect("utf-8")]);
    let server_url = server.grpc_url();
    let remote = trace(&[
        "--server",
        &server_url,
        "--world",
        "q3dm6ish",
        "--batch",
        "500",
    ]);
    let (a, b) = (
        String::from_utf8_lossy(&offline.stdout),
        String::from_utf8_lossy(&remote.stdout),
    );
    assert!(
        a.lines().count() > 1000,
        "offline: {}",
        String::from_utf8_lossy(&offline.stderr)
    );
    assert_eq!(
        a.lines().count(),
        b.lines().count(),
        "remote: {}",
        String::from_utf8_lossy(&remote.stderr)
    );
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        assert_eq!(x, y, "line {i}");
    }
    assert_eq!(offline.status.code(), Some(1), "bad lines fail the run");
    assert_eq!(remote.status.code(), offline.status.code());

    // An unknown world is an error naming it.
    let unknown = trace(&["--server", &server_url, "--world", "nope"]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("NotFound"));

    let exit = server.terminate();
    assert!(exit.success(), "exit status {exit}");
}

/// `bspq load` drives the real binary over each transport: every request
/// answered, the request budget respected, a JSON summary last.
#[test]
fn load_generator_speaks_every_transport() {
    let server = BinaryServer::start(&["--worlds", "/nonexistent-bspq-worlds"]);
    let queries = common::oracle_dir("q3dm6ish").join("boxes.jsonl.gz");
    // (Paced at 1000 requests/s on one transport, as fast as possible on the others.)
    for (transport, url, rate) in [
        ("http", server.http_url(), None),
        ("grpc-unary", server.grpc_url(), Some("1000")),
        ("grpc-stream", server.grpc_url(), None),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_bspq"))
            .args(["load", "--transport", transport, "--url", &url])
            .args(rate.map(|r| ["--rate", r]).into_iter().flatten())
            .args(["--world", "q3dm6ish", "--queries"])
            .arg(&queries)
            .args(["--batch", "50", "--concurrency", "2"])
            .args(["--duration", "20", "--max-requests", "30", "--json"])
            .output()
            .expect("bspq load runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{transport}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let summary: serde_json::Value =
            serde_json::from_str(stdout.lines().last().expect("a summary line")).expect("JSON");
        assert_eq!(summary["transport"], transport);
        assert_eq!(summary["errors"], 0, "{transport}");
        assert_eq!(
            summary["requests"], 30,
            "{transport}: budget of 30 requests"
        );
        assert!(summary["p99_ms"].as_f64().expect("p99") > 0.0);
        assert!(summary["queries_per_second"].as_f64().expect("qps") > 0.0);
    }
}

/// A gRPC client that connects and sends nothing, or only part of the
/// HTTP/2 preface, is disconnected once the read timeout has passed (the
/// server's keepalive pings only start after the handshake, so it used to
/// hold the connection for ever); other clients are served meanwhile.
#[test]
fn silent_grpc_connections_are_closed_after_the_read_timeout() {
    use std::io::Write;
    let server = BinaryServer::start_with_read_timeout_of_a_second();
    let connect = || connect_slowly_read(&server.grpc);
    let started = std::time::Instant::now();
    let mut silent = connect();
    let mut half_preface = connect();
    half_preface
        .write_all(b"PRI * HTTP/2.0\r\n")
        .expect("writes");
    let health = std::process::Command::new(env!("CARGO_BIN_EXE_bspq"))
        .args(["health", "--grpc", &server.grpc])
        .output()
        .expect("bspq health runs");
    assert!(
        health.status.success(),
        "a prompt client is served meanwhile: {}",
        String::from_utf8_lossy(&health.stdout)
    );
    for (what, stream) in [
        ("nothing sent", &mut silent),
        ("half a preface", &mut half_preface),
    ] {
        assert!(
            read_until_closed(stream).is_some(),
            "{what}: still open after {:?}",
            started.elapsed()
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "closed after {:?}",
        started.elapsed()
    );
}

/// A scene line's entities as a gRPC scene.
fn pb_scene(line: &serde_json::Value) -> pb::Scene {
    let v =
        |x: &serde_json::Value| v3(std::array::from_fn(|k| x[k].as_f64().unwrap_or(0.0) as f32));
    pb::Scene {
        entities: line["entities"]
            .as_array()
            .expect("entities")
            .iter()
            .map(|e| pb::SceneEntity {
                id: e["id"].as_u64().expect("id") as u32,
                shape: Some(match e.get("model") {
                    Some(m) => pb::scene_entity::Shape::Model(m.as_str().expect("model").into()),
                    None => pb::scene_entity::Shape::Box(pb::Box {
                        mins: v(&e["box"]["mins"]),
                        maxs: v(&e["box"]["maxs"]),
                    }),
                }),
                origin: v(&e["origin"]),
                angles: v(&e["angles"]),
                contents: e.get("contents").and_then(|c| c.as_u64()).map(|c| c as u32),
                owner: e.get("owner").and_then(|o| o.as_u64()).map(|o| o as u32),
            })
            .collect(),
    }
}

/// The committed scene subset over gRPC: each scene block's traces grouped
/// by box, with per-query masks and passes, unary and on one stream (where
/// only a block's first message carries its scene), match the reference.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenes_over_grpc_match_the_reference() {
    let server = TestServer::start(None, Limits::default());
    let mut client = server.collision().await;
    let data = common::load_set("q3dm6ish", "scene", true);
    let lines: Vec<serde_json::Value> = data
        .queries
        .iter()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    // (request, the expected answer lines of its queries)
    let mut requests: Vec<(pb::TraceRequest, Vec<String>)> = Vec::new();
    let mut scene = None;
    let mut groups: BTreeMap<String, (pb::TraceRequest, Vec<String>)> = BTreeMap::new();
    let mut flush = |groups: &mut BTreeMap<String, (pb::TraceRequest, Vec<String>)>| {
        requests.extend(std::mem::take(groups).into_values());
    };
    for (line, expected) in lines.iter().zip(&data.expected) {
        if line.get("entities").is_some() {
            flush(&mut groups);
            scene = Some(pb_scene(line));
            continue;
        }
        if line.get("point").is_some() || line.get("any").is_some() {
            continue;
        }
        let key = format!("{}{}", line["mins"], line["maxs"]);
        let f = |x: &serde_json::Value| -> [f32; 3] {
            std::array::from_fn(|k| x[k].as_f64().expect("coordinate") as f32)
        };
        let (req, want) = groups.entry(key).or_insert_with(|| {
            let shape = (line["mins"] != line["maxs"]).then(|| pb::Box {
                mins: v3(f(&line["mins"])),
                maxs: v3(f(&line["maxs"])),
            });
            (
                pb::TraceRequest {
                    world: "q3dm6ish".into(),
                    shape,
                    scene: scene.clone(),
                    ..Default::default()
                },
                Vec::new(),
            )
        });
        req.starts.extend(f(&line["start"]));
        req.ends.extend(f(&line["end"]));
        req.masks.push(line["mask"].as_u64().expect("mask") as u32);
        req.passes
            .push(line.get("pass").and_then(|p| p.as_u64()).unwrap_or(1023) as u32);
        want.push(expected.clone());
    }
    flush(&mut groups);
    assert!(requests.len() > 40, "{} requests", requests.len());
    let check = |r: &pb::TraceResponse, want: &[String]| {
        assert_eq!(r.entities.len(), want.len());
        for (i, (got, want)) in unpack(r).into_iter().zip(want).enumerate() {
            let Answer::Trace(t) = got else {
                unreachable!()
            };
            let got = Answer::Trace(TraceAnswer {
                entity: Some(r.entities[i]),
                ..t
            });
            let want: Answer = serde_json::from_str(want).expect("expected");
            let why = bspq::conformance::mismatch(&want, &got);
            assert!(why.is_none(), "{why:?}: {want:?}");
        }
    };
    for (req, want) in &requests {
        let r = client.trace(req.clone()).await.expect("unary").into_inner();
        check(&r, want);
    }
    // One stream: a message without a scene is traced with the last one.
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    let mut responses = client
        .trace_stream(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .expect("stream opens")
        .into_inner();
    let sent = requests.clone();
    tokio::spawn(async move {
        let mut last = None;
        for (mut req, _) in sent {
            if req.scene == last {
                req.scene = None;
            } else {
                last = req.scene.clone();
            }
            if tx.send(req).await.is_err() {
                break;
            }
        }
    });
    for (_, want) in &requests {
        let r = responses
            .message()
            .await
            .expect("message")
            .expect("an answer");
        check(&r, want);
    }
}

/// On a stream, `upsert` and `remove` change the stream's scene by id: the
/// answers are those of the whole changed scene sent as is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streams_scene_changes_by_id() {
    let server = TestServer::start(None, Limits::default());
    let mut client = server.collision().await;
    let player = |id: u32, y: f32| pb::SceneEntity {
        id,
        shape: Some(pb::scene_entity::Shape::Box(pb::Box {
            mins: v3([-15.0, -15.0, -24.0]),
            maxs: v3([15.0, 15.0, 32.0]),
        })),
        origin: v3([-600.0, y, -199.875]),
        ..Default::default()
    };
    // Shots from above at y = 40 and y = 120.
    let shots = |scene: Option<pb::Scene>| pb::TraceRequest {
        scene,
        mask: Some(0x600_0001),
        ..ray_request(
            "q3dm6ish",
            &[
                ([-600.0, 40.0, 50.0], [-600.0, 40.0, -500.0]),
                ([-600.0, 120.0, 50.0], [-600.0, 120.0, -500.0]),
            ],
        )
    };
    let first = pb::Scene {
        entities: vec![player(1, 40.0), player(2, 300.0)],
    };
    let messages = vec![
        shots(Some(first.clone())),
        // Player 2 moves under the second shot; player 1 leaves.
        pb::TraceRequest {
            upsert: vec![player(2, 120.0)],
            remove: vec![1],
            ..shots(None)
        },
        // A new player 3 under the first shot.
        pb::TraceRequest {
            upsert: vec![player(3, 40.0)],
            ..shots(None)
        },
    ];
    let wholes = [
        first,
        pb::Scene {
            entities: vec![player(2, 120.0)],
        },
        pb::Scene {
            entities: vec![player(2, 120.0), player(3, 40.0)],
        },
    ];
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    for m in &messages {
        tx.send(m.clone()).await.expect("send");
    }
    drop(tx);
    let mut responses = client
        .trace_stream(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .expect("stream opens")
        .into_inner();
    let mut entities = Vec::new();
    for whole in wholes {
        let r = responses.message().await.expect("message").expect("answer");
        let want = client
            .trace(shots(Some(whole)))
            .await
            .expect("unary")
            .into_inner();
        assert_eq!(unpack(&r), unpack(&want));
        assert_eq!(r.entities, want.entities);
        entities.push(r.entities);
    }
    assert_eq!(entities, [vec![1, 1022], vec![1022, 2], vec![3, 2]]);
}

/// A whole tick in one message: each reference scene with all its lines
/// (boxes of several sizes and rays through the shape table, per-query
/// masks and passes, points with their passes) and every trace once more
/// as an any-hit query, in one request. Traces match the reference, each
/// any-hit equals its trace's `fraction < 1`, points match.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_in_one_message_matches_the_reference() {
    let server = TestServer::start(None, Limits::default());
    let mut client = server.collision().await;
    let data = common::load_set("q3dm6ish", "scene", true);
    let f = |x: &serde_json::Value| -> [f32; 3] {
        std::array::from_fn(|k| x[k].as_f64().expect("coordinate") as f32)
    };
    // (request, expected answers of its traces, of its points)
    let mut ticks: Vec<(pb::TraceRequest, Vec<Answer>, Vec<Answer>)> = Vec::new();
    for (line, expected) in data.queries.iter().zip(&data.expected) {
        let line: serde_json::Value = serde_json::from_str(line).expect("json");
        let expected: Answer = serde_json::from_str(expected).expect("answer");
        if line.get("entities").is_some() {
            let tick = pb::TraceRequest {
                world: "q3dm6ish".into(),
                scene: Some(pb_scene(&line)),
                ..Default::default()
            };
            ticks.push((tick, Vec::new(), Vec::new()));
            continue;
        }
        let Some((tick, traces, points)) = ticks.last_mut() else {
            panic!("a query before the first scene");
        };
        let pass = line.get("pass").and_then(|p| p.as_u64()).unwrap_or(1023) as u32;
        if let Some(p) = line.get("point") {
            tick.points.extend(f(p));
            tick.point_passes.push(pass);
            points.push(expected);
            continue;
        }
        let kind = (line["mins"] != line["maxs"]).then(|| {
            pb::query_shape::Kind::Box(pb::Box {
                mins: v3(f(&line["mins"])),
                maxs: v3(f(&line["maxs"])),
            })
        });
        let shape = pb::QueryShape { kind, exact: false };
        let index = match tick.shapes.iter().position(|s| *s == shape) {
            Some(i) => i,
            None => {
                tick.shapes.push(shape);
                tick.shapes.len() - 1
            }
        };
        tick.shape_index.push(index as u32);
        tick.starts.extend(f(&line["start"]));
        tick.ends.extend(f(&line["end"]));
        tick.masks.push(line["mask"].as_u64().expect("mask") as u32);
        tick.passes.push(pass);
        traces.push(expected);
    }
    // Every trace again as an any-hit query.
    for (tick, _, _) in &mut ticks {
        let n = tick.masks.len();
        tick.any_hits = [vec![false; n], vec![true; n]].concat();
        tick.shape_index = tick.shape_index.repeat(2);
        tick.starts = tick.starts.repeat(2);
        tick.ends = tick.ends.repeat(2);
        tick.masks = tick.masks.repeat(2);
        tick.passes = tick.passes.repeat(2);
    }
    assert!(ticks.len() >= 10, "{} scenes", ticks.len());
    assert!(ticks
        .iter()
        .any(|(t, _, p)| t.shapes.len() > 1 && !p.is_empty()));
    for (tick, traces, points) in ticks {
        let r = client.trace(tick).await.expect("tick").into_inner();
        let n = traces.len();
        assert_eq!(r.fractions.len(), 2 * n);
        assert_eq!((r.hits.len(), r.entities.len()), (2 * n, 2 * n));
        for (i, (got, want)) in unpack(&r).into_iter().zip(&traces).enumerate() {
            let Answer::Trace(t) = got else {
                unreachable!()
            };
            let got = Answer::Trace(TraceAnswer {
                entity: Some(r.entities[i]),
                ..t
            });
            let why = bspq::conformance::mismatch(want, &got);
            assert!(why.is_none(), "{why:?}: {want:?}");
            assert_eq!(r.flags[i] & 4, 0, "a full trace is not hit-only");
            assert_eq!(r.hits[i], t.fraction < 1.0);
            // Its any-hit twin.
            let (k, hit) = (n + i, r.hits[n + i]);
            assert_eq!(hit, t.fraction < 1.0, "any-hit twin of {want:?}");
            assert_eq!(r.flags[k], pb::TraceFlag::HitOnly as u32);
            assert_eq!((r.fractions[k], r.entities[k]), (0.0, 1023));
        }
        let got: Vec<Answer> = r
            .point_contents
            .iter()
            .map(|&contents| Answer::Point(PointAnswer { contents }))
            .collect();
        assert_eq!(got, points);
    }
}

/// A tick's malformed shape table is refused with the error table's code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_ticks_are_refused() {
    let server = TestServer::start(None, Limits::default());
    let mut client = server.collision().await;
    let two = ray_request(
        "q3dm6ish",
        &[([0.0; 3], [64.0, 0.0, 0.0]), ([0.0; 3], [0.0, 64.0, 0.0])],
    );
    let boxed = pb::QueryShape {
        kind: Some(pb::query_shape::Kind::Box(pb::Box {
            mins: v3([-8.0; 3]),
            maxs: v3([8.0; 3]),
        })),
        exact: false,
    };
    let bad = [
        // An index past the table.
        pb::TraceRequest {
            shapes: vec![boxed.clone()],
            shape_index: vec![0, 1],
            ..two.clone()
        },
        // One index for two queries.
        pb::TraceRequest {
            shapes: vec![boxed.clone()],
            shape_index: vec![0],
            ..two.clone()
        },
        // A table and a batch shape.
        pb::TraceRequest {
            shapes: vec![boxed.clone()],
            shape_index: vec![0, 0],
            shape: Some(pb::Box::default()),
            ..two.clone()
        },
        // A table nobody indexes.
        pb::TraceRequest {
            shapes: vec![boxed.clone()],
            ..two.clone()
        },
        // Points not in threes; passes not one per point.
        pb::TraceRequest {
            points: vec![1.0, 2.0],
            ..two.clone()
        },
        pb::TraceRequest {
            points: vec![1.0, 2.0, 3.0],
            point_passes: vec![1, 2],
            ..two.clone()
        },
        pb::TraceRequest {
            any_hits: vec![true],
            ..two.clone()
        },
    ];
    for request in bad {
        let status = client.trace(request.clone()).await.expect_err("refused");
        assert_eq!(status.code(), Code::InvalidArgument, "{request:?}");
        assert_eq!(error_body(&status)["error"]["code"], "malformed_request");
    }
    // A bad shape in the table names the first query using it.
    let status = client
        .trace(pb::TraceRequest {
            shapes: vec![
                pb::QueryShape::default(),
                pb::QueryShape {
                    kind: Some(pb::query_shape::Kind::Hull("nope".into())),
                    exact: false,
                },
            ],
            shape_index: vec![0, 1],
            ..two.clone()
        })
        .await
        .expect_err("unknown hull");
    let body = error_body(&status);
    assert_eq!(body["error"]["code"], "unknown_hull");
    assert_eq!(body["error"]["query_index"], 1);
}

/// `bspq workload --kind ticks` writes a scene line and mixed tick queries;
/// `bspq load --sweep` sends them as tick messages with that scene on every
/// transport: a closed-loop run, then runs at 10, 50 and 90 % of its rate,
/// every answer complete (the load generator checks each array's length).
#[test]
fn load_sweeps_mixed_ticks_with_a_scene() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ticks = dir.path().join("ticks.jsonl");
    let map = common::map_path("q3dm6ish");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bspq"))
        .args([
            "workload",
            "--kind",
            "ticks",
            "--players",
            "20",
            "--count",
            "640",
        ])
        .arg("--world")
        .arg(&map)
        .output()
        .expect("workload runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&ticks, &out.stdout).expect("write");
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    // 20 players and the map's 9 movers, then 640 queries, each naming its player.
    assert_eq!(lines[0]["entities"].as_array().map(Vec::len), Some(29));
    assert_eq!(lines.len(), 641);
    assert!(lines[1..].iter().all(|l| l["pass"].as_u64() < Some(20)));
    for kind in ["point", "any"] {
        assert!(lines.iter().any(|l| l.get(kind).is_some()), "{kind}");
    }

    let server = BinaryServer::start(&["--worlds", "/nonexistent-bspq-worlds"]);
    for (transport, url) in [
        ("http", server.http_url()),
        ("grpc-unary", server.grpc_url()),
        ("grpc-stream", server.grpc_url()),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_bspq"))
            .args(["load", "--transport", transport, "--url", &url])
            .args(["--world", "q3dm6ish", "--queries"])
            .arg(&ticks)
            .args(["--batch", "64", "--concurrency", "1", "--sweep"])
            .args(["--duration", "0.5", "--max-requests", "200", "--json"])
            .output()
            .expect("bspq load runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{transport}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let summary: serde_json::Value =
            serde_json::from_str(stdout.lines().last().expect("a summary line")).expect("JSON");
        assert_eq!(summary["entities"], 29, "{transport}");
        let runs = summary["runs"].as_array().expect("runs");
        assert_eq!(runs.len(), 4, "{transport}");
        let max = runs[0]["requests_per_second"].as_f64().expect("rate");
        for (run, share) in runs[1..].iter().zip([0.1, 0.5, 0.9]) {
            assert_eq!(run["errors"], 0, "{transport}: {run}");
            let rate = run["rate"].as_f64().expect("a paced run");
            assert!(
                (rate - share * max).abs() < 1e-6 * max,
                "{transport}: {run}"
            );
            // Latency from the schedule includes the time from sending.
            let (scheduled, sent) = (run["p50_ms"].as_f64(), run["sent_p50_ms"].as_f64());
            assert!(scheduled >= sent, "{transport}: {run}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_mixing_traces_points_and_moves_answers_as_the_library() {
    use bspq::query::{answer_all, requests_in, QueryLine};
    let server = TestServer::start(None, Limits::default());
    let mut client = server.collision().await;
    let local = common::load_world("q3dm6ish", true);

    // Slide moves of the reference set: their states start every move.
    let slides: Vec<serde_json::Value> = common::load_set("q3dm6ish", "moves", true)
        .queries
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json")["slide"].clone())
        .filter(|s| s.is_object())
        .take(3)
        .collect();
    assert_eq!(slides.len(), 3);
    let xyz = |v: &serde_json::Value| -> [f32; 3] {
        let a: [f64; 3] = serde_json::from_value(v.clone()).expect("xyz");
        a.map(|c| c as f32)
    };
    let (mins, maxs) = ([-15.0f32, -15.0, -24.0], [15.0f32, 15.0, 32.0]);
    let player = pb::QueryShape {
        kind: Some(pb::query_shape::Kind::Box(pb::Box {
            mins: v3(mins),
            maxs: v3(maxs),
        })),
        exact: false,
    };
    let ray = pb::QueryShape::default();
    let origin = |k: usize| xyz(&slides[k]["origin"]);
    let velocity = |k: usize| xyz(&slides[k]["velocity"]);
    let request = pb::TraceRequest {
        world: "q3dm6ish".into(),
        shapes: vec![ray, player],
        starts: [origin(0), origin(1)].concat(),
        ends: [[0.0; 3], origin(2)].concat(),
        shape_index: vec![0, 1],
        masks: vec![1, 0x2010001],
        points: [origin(0), [0.0; 3]].concat(),
        moves: Some(pb::Moves {
            kinds: vec![
                pb::MoveKind::Ground as i32,
                pb::MoveKind::Slide as i32,
                pb::MoveKind::Slide as i32,
            ],
            origins: [origin(0), origin(1), origin(2)].concat(),
            velocities: [[0.0; 3], velocity(1), velocity(2)].concat(),
            frametimes: vec![0.0, 0.05, 0.05],
            gravities: vec![0, 800, 800],
            grounds: [[0.0; 3], [0.0, 0.0, 1.0], [0.0; 3]].concat(),
            steps: vec![true, true, false],
            shape_index: vec![1, 1, 1],
            ..Default::default()
        }),
        predictions: vec![
            pb::Prediction {
                origin: v3(origin(0)),
                velocity: v3([100.0, 200.0, 0.0]),
                frametime: 0.05,
                ticks: 30,
                gravity: 800,
                until: vec!["landed".into(), "blocked".into()],
                path: true,
                shape_index: 1,
                ..Default::default()
            },
            pb::Prediction {
                origin: v3(origin(1)),
                velocity: v3([-150.0, 0.0, 270.0]),
                frametime: 0.05,
                ticks: 10,
                gravity: 800,
                shape_index: 1,
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let lines: Vec<QueryLine> = [
        serde_json::json!({"start": origin(0), "end": [0, 0, 0], "mask": 1}),
        serde_json::json!({"start": origin(1), "end": origin(2), "mins": mins, "maxs": maxs, "mask": 0x2010001}),
        serde_json::json!({"point": origin(0)}),
        serde_json::json!({"point": [0, 0, 0]}),
        serde_json::json!({"ground": {"origin": origin(0), "mins": mins, "maxs": maxs}}),
        serde_json::json!({"slide": {"origin": origin(1), "velocity": velocity(1), "frametime": 0.05f32,
            "gravity": 800, "ground": [0, 0, 1], "mins": mins, "maxs": maxs}}),
        serde_json::json!({"slide": {"origin": origin(2), "velocity": velocity(2), "frametime": 0.05f32,
            "gravity": 800, "step": false, "mins": mins, "maxs": maxs}}),
        serde_json::json!({"predict": {"origin": origin(0), "velocity": [100, 200, 0], "frametime": 0.05f32,
            "ticks": 30, "gravity": 800, "until": ["landed", "blocked"], "path": true, "mins": mins, "maxs": maxs}}),
        serde_json::json!({"predict": {"origin": origin(1), "velocity": [-150, 0, 270], "frametime": 0.05f32,
            "ticks": 10, "gravity": 800, "mins": mins, "maxs": maxs}}),
    ]
    .into_iter()
    .map(|v| serde_json::from_value(v).expect("line"))
    .collect();
    let requests = requests_in(&lines, &local.view()).expect("valid lines");
    let want = answer_all(&local.view(), &requests, &Default::default());

    let r = client
        .trace(request.clone())
        .await
        .expect("tick")
        .into_inner();
    let traces = unpack(&r);
    assert_eq!(traces, want[..2]);
    let points: Vec<Answer> = r
        .point_contents
        .iter()
        .map(|&contents| Answer::Point(PointAnswer { contents }))
        .collect();
    assert_eq!(points, want[2..4]);
    let m = r.moves.as_ref().expect("move answers");
    let v = |a: &[f32], i: usize| [a[3 * i], a[3 * i + 1], a[3 * i + 2]];
    let probe = |i: usize| bspq::query::GroundAnswer {
        trace: TraceAnswer {
            fraction: m.fractions[i],
            endpos: v(&m.endpos, i),
            normal: v(&m.normals, i),
            dist: m.dists[i],
            startsolid: m.flags[i] & 1 != 0,
            allsolid: m.flags[i] & 2 != 0,
            contents: m.contents[i],
            surface_flags: m.surface_flags[i],
            entity: None,
        },
        walkable: m.walkable[i],
    };
    assert_eq!(Answer::Ground(probe(0)), want[4]);
    for (i, step) in [(1, true), (2, false)] {
        let got = Answer::Slide(bspq::query::SlideAnswer {
            origin: v(&m.origins, i),
            velocity: v(&m.velocities, i),
            blocked: (!step).then_some(m.blocked[i]),
            stepped: m.stepped[i],
            ground: probe(i),
        });
        assert_eq!(got, want[4 + i], "move {i}");
    }
    assert_eq!(r.predictions.len(), 2);
    for (j, p) in r.predictions.iter().enumerate() {
        let Answer::Predict(expected) = &want[7 + j] else {
            panic!("a prediction's answer: {:?}", want[7 + j]);
        };
        let g = p.ground.as_ref().expect("ground probe");
        let at = |v: &Option<pb::Vec3>| v.as_ref().map(|v| [v.x, v.y, v.z]);
        assert_eq!(p.event, expected.event);
        assert_eq!(p.tick, expected.tick);
        assert_eq!(at(&p.origin), Some(expected.origin));
        assert_eq!(at(&p.velocity), Some(expected.velocity));
        assert_eq!(p.on_ground, expected.on_ground);
        assert_eq!(g.fraction, expected.ground.trace.fraction);
        assert_eq!(at(&g.endpos), Some(expected.ground.trace.endpos));
        assert_eq!(g.walkable, expected.ground.walkable);
        let path: Vec<f32> = expected.path.iter().flatten().flatten().copied().collect();
        assert_eq!(p.path, path);
    }
    assert!(!r.predictions[0].path.is_empty());

    // A bad move is named by its index among all the tick's queries:
    // traces, then points, then moves, then predictions.
    let mut bad = request.clone();
    bad.predictions[1].ticks = 0;
    let e = client.trace(bad).await.expect_err("rejected");
    assert_eq!(e.code(), Code::InvalidArgument);
    let body = error_body(&e);
    assert_eq!(body["error"]["code"], "bad_ticks");
    assert_eq!(body["error"]["query_index"], 8);
    let mut bad = request.clone();
    if let Some(moves) = bad.moves.as_mut() {
        moves.gravities[2] = 1_000_000;
    }
    let e = client.trace(bad).await.expect_err("rejected");
    let body = error_body(&e);
    assert_eq!(body["error"]["code"], "bad_gravity");
    assert_eq!(body["error"]["query_index"], 6);
    // A move's box must come from the table, and be a box or a hull.
    let mut bad = request.clone();
    if let Some(moves) = bad.moves.as_mut() {
        moves.shape_index[0] = 5;
    }
    let e = client.trace(bad).await.expect_err("rejected");
    assert_eq!(error_body(&e)["error"]["code"], "malformed_request");
    let mut bad = request;
    if let Some(moves) = bad.moves.as_mut() {
        moves.steps.pop();
    }
    let e = client.trace(bad).await.expect_err("rejected");
    assert_eq!(error_body(&e)["error"]["code"], "malformed_request");
}
