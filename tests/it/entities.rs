//! The map's entities end to end: kept through the compiled world file,
//! refused there when damaged, and served alike by HTTP, gRPC and
//! `bspq inspect --entities`, checked against the map's own lumps read
//! here independently of bspq's readers.

use crate::common;

use bspq::compile::CompileOptions;
use bspq::map::{compile_source, LoadError, Map};
use bspq::proto::v1 as pb;
use bspq::service::Limits;
use bspq::source::entities::{Entity, EntityError};
use bspq::world::format::{self, FormatError, SectionKind};
use common::server::TestServer;
use tonic::Code;

/// Lump `index` of an IBSP file, straight from its directory.
fn lump(bsp: &[u8], index: usize) -> &[u8] {
    let word = |at: usize| i32::from_le_bytes(bsp[at..at + 4].try_into().unwrap()) as usize;
    let (offset, len) = (word(8 + 8 * index), word(12 + 8 * index));
    &bsp[offset..offset + len]
}

/// The number of models in the map's models lump (40-byte records).
fn model_count(bsp: &[u8]) -> usize {
    lump(bsp, 7).len() / 40
}

/// The entity lump's text, up to its NUL.
fn entity_text(bsp: &[u8]) -> &[u8] {
    let raw = lump(bsp, 0);
    &raw[..raw.iter().position(|&b| b == 0).unwrap_or(raw.len())]
}

fn compiled(map: &str) -> Vec<u8> {
    let source = std::fs::read(common::map_path(map)).unwrap();
    format::write(&compile_source(&source, map, &CompileOptions::default()).unwrap())
}

#[test]
fn the_world_file_keeps_the_entities() {
    for map in common::MAPS {
        let source = std::fs::read(common::map_path(map)).unwrap();
        let from_map = common::load_world(map, true);
        let bytes = compiled(map);
        let from_file = Map::from_compiled_bytes(&bytes).unwrap();
        assert!(!from_map.entities().is_empty(), "{map}");
        assert_eq!(from_map.entities(), from_file.entities(), "{map}");
        // The section holds the lump's text byte for byte.
        let layout = format::parse_layout(&bytes, true).unwrap();
        assert_eq!(
            &bytes[layout.range(SectionKind::Entities)],
            entity_text(&source),
            "{map}"
        );
        // The maps write one `{` line per entity.
        let text = String::from_utf8_lossy(entity_text(&source)).into_owned();
        let opening_lines = text.lines().filter(|l| l.trim() == "{").count();
        assert_eq!(from_file.entities().len(), opening_lines, "{map}");
        assert_eq!(from_file.entities()[0].classname(), Some("worldspawn"));
        // Written again, the same file.
        assert_eq!(from_file.to_file_bytes(), bytes, "{map}");
    }
    // And from inside a pk3.
    let dir = tempfile::tempdir().unwrap();
    let source = std::fs::read(common::map_path("aggressor")).unwrap();
    let archive = dir.path().join("maps.pk3");
    std::fs::write(
        &archive,
        common::pk3_of(&[("maps/aggressor.bsp", source.as_slice())]),
    )
    .unwrap();
    let from_pk3 = Map::open(format!("{}:maps/aggressor.bsp", archive.display())).unwrap();
    assert_eq!(
        from_pk3.entities(),
        common::load_world("aggressor", true).entities()
    );
}

/// oa_ctf2's compiled file with its entities section replaced by `text`
/// (the file rebuilt, so any length fits), loaded.
fn with_entity_text(text: &[u8]) -> Result<Map, LoadError> {
    let source = std::fs::read(common::map_path("oa_ctf2")).unwrap();
    let mut data = compile_source(&source, "oa_ctf2", &CompileOptions::default()).unwrap();
    data.entities = text.to_vec();
    Map::from_compiled_bytes(&format::write(&data))
}

#[test]
fn a_damaged_entities_section_is_a_typed_error() {
    let bytes = compiled("oa_ctf2");
    let section = format::parse_layout(&bytes, true)
        .unwrap()
        .sections
        .into_iter()
        .find(|s| s.kind == SectionKind::Entities)
        .unwrap();
    let table_entry = 64
        + 32 * {
            let layout = format::parse_layout(&bytes, true).unwrap();
            layout
                .sections
                .iter()
                .position(|s| s.kind == SectionKind::Entities)
                .unwrap()
        };
    let load = |mutate: &dyn Fn(&mut Vec<u8>)| {
        let mut b = bytes.clone();
        mutate(&mut b);
        format::seal(&mut b);
        Map::from_compiled_bytes(&b)
    };
    let entities_error = |result: Result<Map, LoadError>| match result {
        Err(LoadError::Format(FormatError::Entities(e))) => e,
        Err(other) => panic!("expected an entities error, got {other}"),
        Ok(_) => panic!("expected an entities error, got a world"),
    };
    // The first `{` made a quote: a string that runs to the next quote,
    // then a word where `{` belongs.
    let e = entities_error(load(&|b| b[section.offset] = b'"'));
    assert!(
        matches!(e, EntityError::ExpectedOpen { offset: 0, .. }),
        "{e}"
    );
    // The section cut short by its count: the last entity loses its `}`
    // (the text ends `"target_location"\n}\n`), or the last value its quote.
    let cut = |by: usize| {
        move |b: &mut Vec<u8>| {
            let count = (section.count - by) as u64;
            b[table_entry + 16..table_entry + 24].copy_from_slice(&count.to_le_bytes());
        }
    };
    let e = entities_error(load(&cut(2)));
    assert!(
        matches!(e, EntityError::UnexpectedEnd { offset, .. } if offset == section.count - 2),
        "{e}"
    );
    let e = entities_error(load(&cut(4)));
    assert!(
        matches!(e, EntityError::UnterminatedString { offset } if offset == section.count - 20),
        "{e}"
    );
    // The section left out of the table: a missing section, not a world
    // without entities.
    let sections = format::parse_layout(&bytes, true).unwrap().sections.len();
    let err = load(&|b| {
        let end = 64 + 32 * sections;
        b.copy_within(table_entry + 32..end, table_entry);
        b[end - 32..end].fill(0);
        b[16..20].copy_from_slice(&(sections as u32 - 1).to_le_bytes());
    })
    .err()
    .unwrap();
    assert!(
        matches!(
            err,
            LoadError::Format(FormatError::MissingSection("entities"))
        ),
        "{err}"
    );
    // Texts that do not parse, each at its offset; the message names the section.
    for (text, offset) in [
        (&b"{ \"classname\" }"[..], 14),
        (b"{ \"a\" \"b", 6),
        (b"{ } }", 4),
    ] {
        let err = with_entity_text(text).err().unwrap();
        assert!(
            err.to_string()
                .starts_with(&format!("compiled world: entities section: byte {offset}:")),
            "{err}"
        );
        assert_eq!(entities_error(Err(err)).offset(), offset);
    }
    // No entities at all (a map whose lump is empty) is a world.
    assert!(with_entity_text(b"").unwrap().entities().is_empty());
    // The NUL that ends a lump's text may be kept: it ends it here too.
    let world = with_entity_text(b"{ \"classname\" \"worldspawn\" }\0junk").unwrap();
    assert_eq!(world.entities().len(), 1);
}

/// A map whose entity lump does not parse is refused before it compiles,
/// naming the offset, by the library and the command line alike.
#[test]
fn a_map_with_a_broken_entity_lump_is_refused() {
    let mut source = std::fs::read(common::map_path("q3dm6ish")).unwrap();
    let word = |b: &[u8], at: usize| i32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let offset = word(&source, 8) as usize;
    // The first `}` (closing worldspawn) made a key: its value is then `{`.
    let close = offset + lump(&source, 0).iter().position(|&b| b == b'}').unwrap();
    source[close] = b'k';
    let err = Map::from_bytes(&source, "broken").err().unwrap();
    let LoadError::Source(bspq::source::SourceError::Entities(e)) = &err else {
        panic!("expected an entity lump error, got {err}");
    };
    assert!(
        matches!(e, EntityError::MissingValue { key, found: "`{`", .. } if key == "k"),
        "{e}"
    );
    assert_eq!(e.offset(), close - offset + 2);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.bsp");
    std::fs::write(&path, &source).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bspq"))
        .args(["inspect", "--entities", "--world"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("entity lump: byte {}:", e.offset())),
        "{stderr}"
    );
}

/// `(status, body)` of a GET.
fn http_get(url: &str) -> (u16, String) {
    let agent = crate::common::server::http_agent();
    let mut response = agent.get(url).call().expect("request completes");
    let status = response.status().as_u16();
    (status, response.body_mut().read_to_string().expect("body"))
}

/// gRPC's pairs as entities.
fn from_grpc(entities: &[pb::Entity]) -> Vec<Entity> {
    entities
        .iter()
        .map(|e| Entity {
            pairs: e
                .pairs
                .iter()
                .map(|p| (p.key.clone(), p.value.clone()))
                .collect(),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_grpc_and_the_cli_serve_the_same_entities() {
    // One world from a map, one from a compiled file.
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(common::map_path("oa_ctf2"), dir.path().join("oa_ctf2.bsp")).unwrap();
    std::fs::write(dir.path().join("aggressor.bspq"), compiled("aggressor")).unwrap();
    let server = TestServer::start(Some(dir.path().to_owned()), Limits::default());
    let mut client = server.collision().await;
    for (name, file, map) in [
        ("oa_ctf2", "oa_ctf2.bsp", "oa_ctf2"),
        ("aggressor", "aggressor.bspq", "aggressor"),
    ] {
        let base = server.base.clone();
        let url = format!("{base}/v1/worlds/{name}/entities");
        let (status, http) = tokio::task::spawn_blocking(move || http_get(&url))
            .await
            .unwrap();
        assert_eq!(status, 200, "{http}");
        let grpc = client
            .get_entities(pb::GetEntitiesRequest { name: name.into() })
            .await
            .expect("GetEntities")
            .into_inner();
        assert_eq!((grpc.world.as_str(), grpc.version), (name, 1));
        let entities = from_grpc(&grpc.entities);
        // The same entities, keys in the same order: HTTP's body is gRPC's
        // pairs in the object form.
        assert_eq!(http, serde_json::to_string(&entities).unwrap(), "{name}");
        let path = dir.path().join(file);
        let cli = common::bspq_stdout(["inspect", "--entities", "--world", path.to_str().unwrap()]);
        assert_eq!(
            cli,
            format!("{}\n", serde_json::to_string_pretty(&entities).unwrap()),
            "{name}"
        );

        // Against the map's own lumps, read here.
        let source = std::fs::read(common::map_path(map)).unwrap();
        let text = String::from_utf8_lossy(entity_text(&source)).into_owned();
        assert_eq!(
            entities.len(),
            text.lines().filter(|l| l.trim() == "{").count()
        );
        let first_key = text
            .lines()
            .nth(1)
            .and_then(|l| l.split('"').nth(1))
            .unwrap();
        assert!(
            http.starts_with(&format!("[{{\"{first_key}\":")),
            "keys in file order: {}",
            &http[..80]
        );
        let list: Vec<serde_json::Map<String, serde_json::Value>> =
            serde_json::from_str(&http).unwrap();
        assert_eq!(list[0]["classname"], "worldspawn", "{name}");
        let models = model_count(&source);
        let mut named = 0;
        for object in &list {
            let Some(model) = object.get("model").and_then(|m| m.as_str()) else {
                continue;
            };
            let Some(k) = model.strip_prefix('*') else {
                continue; // a model file, not an inline model
            };
            let k: usize = k.parse().unwrap_or_else(|_| panic!("model {model:?}"));
            assert!(
                (1..models).contains(&k),
                "{name}: model {model} of {models} models"
            );
            named += 1;
        }
        assert!(named > 0, "{name} names inline models");
    }

    // An unknown world: the error table's 404 and NOT_FOUND.
    let url = format!("{}/v1/worlds/nonesuch/entities", server.base);
    let (status, body) = tokio::task::spawn_blocking(move || http_get(&url))
        .await
        .unwrap();
    assert_eq!(status, 404, "{body}");
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["code"], "unknown_world");
    let e = client
        .get_entities(pb::GetEntitiesRequest {
            name: "nonesuch".into(),
        })
        .await
        .expect_err("unknown world");
    assert_eq!(e.code(), Code::NotFound);
    let body: serde_json::Value = serde_json::from_str(e.message()).unwrap();
    assert_eq!(body["error"]["code"], "unknown_world");
}
