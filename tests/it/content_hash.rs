//! Every answer names the content that answered (`source_hash`), over
//! both transports: the same on every replica serving the same map, whatever
//! its version number there, and different for a different map. Two real
//! servers on loopback ports, real clients.

use crate::common;
use crate::common::server::http_agent;

use common::server::{TestServer, TOKEN};

use bspq::compile::CompileOptions;
use bspq::map::compile_source;
use bspq::proto::v1 as pb;
use bspq::service::Limits;
use bspq::world::format;

fn json(resp: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> serde_json::Value {
    let mut resp = resp.expect("request completes");
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().expect("body");
    assert_eq!(status, 200, "{text}");
    serde_json::from_str(&text).expect("JSON")
}

fn map_bytes(map: &str) -> Vec<u8> {
    std::fs::read(common::map_path(map)).expect("map")
}

/// The expectation, computed here: xxh3-64 of the map's bytes, 16 hex digits.
fn hash_of(map: &str) -> String {
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&map_bytes(map)))
}

/// Uploads over HTTP; returns the answer's version and content hash.
fn upload(server: &TestServer, name: &str, bytes: &[u8]) -> (u64, String) {
    let answer = json(
        http_agent()
            .put(&format!("{}/v1/worlds/{name}", server.base))
            .header("Authorization", &format!("Bearer {TOKEN}"))
            .send(bytes),
    );
    assert_eq!(answer["world"], name, "{answer}");
    (
        answer["version"].as_u64().expect("version"),
        answer["source_hash"]
            .as_str()
            .expect("source_hash")
            .to_owned(),
    )
}

/// Uploads over gRPC (`Admin.LoadWorld`); returns what it answers.
fn upload_grpc(
    server: &TestServer,
    rt: &tokio::runtime::Runtime,
    name: &str,
    bytes: &[u8],
) -> (u64, String) {
    rt.block_on(async {
        let mut admin = pb::admin_client::AdminClient::new(server.channel().await)
            .max_encoding_message_size(usize::MAX);
        let mut request = tonic::Request::new(pb::LoadWorldRequest {
            name: name.into(),
            data: bytes.to_vec(),
        });
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {TOKEN}").parse().expect("ascii"),
        );
        let answer = admin
            .load_world(request)
            .await
            .expect("LoadWorld")
            .into_inner();
        assert_eq!(answer.world, name);
        (answer.version, answer.source_hash)
    })
}

/// The version and content hash every kind of answer for `name` reports,
/// asserting they all agree: HTTP's world description, trace (POST and
/// GET) and contents; gRPC's GetWorld, Trace, TraceStream, PointContents and
/// GetEntities.
fn reported(server: &TestServer, rt: &tokio::runtime::Runtime, name: &str) -> (u64, String) {
    let base = &server.base;
    let described = json(http_agent().get(&format!("{base}/v1/worlds/{name}")).call());
    let version = described["version"].as_u64().expect("version");
    let hash = described["source_hash"]
        .as_str()
        .expect("source_hash")
        .to_owned();
    let mut http = vec![
        json(
            http_agent()
                .post(&format!("{base}/v1/worlds/{name}/trace"))
                .send(r#"{"queries":[{"start":[0,0,64],"end":[0,0,-512]},{"point":[0,0,0]}]}"#),
        ),
        json(
            http_agent()
                .get(&format!(
                    "{base}/v1/worlds/{name}/trace?start=0,0,64&end=0,0,-512"
                ))
                .call(),
        ),
        json(
            http_agent()
                .post(&format!("{base}/v1/worlds/{name}/contents"))
                .send(r#"{"points":[[0,0,0]]}"#),
        ),
    ];
    for answer in http.drain(..) {
        assert_eq!(answer["world"], name, "{answer}");
        assert_eq!(answer["version"], version, "{answer}");
        assert_eq!(answer["source_hash"], hash.as_str(), "{answer}");
    }
    let grpc: Vec<(String, u64, String)> = rt.block_on(async {
        let mut client = server.collision().await;
        let world = client
            .get_world(pb::GetWorldRequest { name: name.into() })
            .await
            .expect("GetWorld")
            .into_inner();
        let request = pb::TraceRequest {
            world: name.into(),
            starts: vec![0.0, 0.0, 64.0],
            ends: vec![0.0, 0.0, -512.0],
            ..Default::default()
        };
        let traced = client
            .trace(request.clone())
            .await
            .expect("Trace")
            .into_inner();
        let mut stream = client
            .trace_stream(tokio_stream::iter([request]))
            .await
            .expect("TraceStream")
            .into_inner();
        let streamed = stream
            .message()
            .await
            .expect("TraceStream answer")
            .expect("one answer");
        let contents = client
            .point_contents(pb::PointContentsRequest {
                world: name.into(),
                points: vec![0.0; 3],
            })
            .await
            .expect("PointContents")
            .into_inner();
        let entities = client
            .get_entities(pb::GetEntitiesRequest { name: name.into() })
            .await
            .expect("GetEntities")
            .into_inner();
        vec![
            (world.name, world.version, world.source_hash),
            (traced.world, traced.version, traced.source_hash),
            (streamed.world, streamed.version, streamed.source_hash),
            (contents.world, contents.version, contents.source_hash),
            (entities.world, entities.version, entities.source_hash),
        ]
    });
    for answer in grpc {
        assert_eq!(answer, (name.to_owned(), version, hash.clone()));
    }
    (version, hash)
}

#[test]
fn every_answer_names_its_content_the_same_on_every_replica() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let q3dm6ish = hash_of("q3dm6ish");
    // Replica A serves the map compiled ahead of time (the world file
    // carries its source's hash) ...
    let compiled = format::write(
        &compile_source(
            &map_bytes("q3dm6ish"),
            "q3dm6ish",
            &CompileOptions::default(),
        )
        .expect("compiles"),
    );
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("arena.bspq"), compiled).expect("write world");
    let a = TestServer::start(Some(dir.path().to_owned()), Limits::default());
    // ... replica B the source, uploaded twice: another version number,
    // the same content.
    let b = TestServer::start(None, Limits::default());
    // The upload's own answer names what it loaded.
    assert_eq!(
        upload(&b, "arena", &map_bytes("q3dm6ish")),
        (1, q3dm6ish.clone())
    );
    assert_eq!(
        upload_grpc(&b, &rt, "arena", &map_bytes("q3dm6ish")),
        (2, q3dm6ish.clone())
    );
    assert_eq!(reported(&a, &rt, "arena"), (1, q3dm6ish.clone()));
    assert_eq!(reported(&b, &rt, "arena"), (2, q3dm6ish.clone()));
    // The bundled world is the same map under another name.
    assert_eq!(reported(&b, &rt, "q3dm6ish"), (1, q3dm6ish.clone()));
    // Other content under the same name: another hash.
    assert_eq!(
        upload(&b, "arena", &map_bytes("oa_ctf2")),
        (3, hash_of("oa_ctf2"))
    );
    let other = reported(&b, &rt, "arena");
    assert_eq!(other, (3, hash_of("oa_ctf2")));
    assert_ne!(other.1, q3dm6ish);
}
