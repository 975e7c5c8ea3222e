//! The compiled world file: answers through a compiled file are bit-identical
//! to answers from the source map; files round-trip; loading is immune to the
//! file changing afterwards; the CLI writes atomically and inspects files.

use crate::common;

use bspq::compile::CompileOptions;
use bspq::map::{compile_source, open_world, Map, WorldSpec};
use bspq::query::answer;
use bspq::trace::Scratch;
use bspq::world::format;
use std::process::Command;

fn compiled_bytes(map: &str, curves: bool) -> Vec<u8> {
    let source = std::fs::read(common::map_path(map)).expect("committed map");
    let options = CompileOptions {
        curves,
        ..Default::default()
    };
    let data = compile_source(&source, map, &options).expect("compiles");
    format::write(&data)
}

#[test]
fn compiled_file_answers_bit_identically_to_the_source() {
    for map in common::MAPS {
        for curves in [true, false] {
            let from_source = common::load_world(map, curves);
            let from_file = Map::from_compiled_bytes(&compiled_bytes(map, curves)).expect("loads");
            let (a, b) = (from_source.view(), from_file.view());
            let (mut s1, mut s2) = (Scratch::new(), Scratch::new());
            let mut n = 0;
            for set in common::SETS {
                for line in common::load_set(map, set, curves).queries {
                    let q = common::parse_query(&line);
                    // Compare the serialised answers: every bit of every float.
                    assert_eq!(
                        answer(&a, &mut s1, &q).to_json(),
                        answer(&b, &mut s2, &q).to_json(),
                        "{map} curves {curves} {set}: {line}"
                    );
                    n += 1;
                }
            }
            assert!(n > 9000, "{map}: only {n} queries compared");
        }
    }
}

#[test]
fn a_file_round_trips_and_records_its_origin() {
    let bytes = compiled_bytes("oa_ctf2", true);
    let loaded = Map::from_compiled_bytes(&bytes).expect("loads");
    assert_eq!(
        loaded.to_file_bytes(),
        bytes,
        "re-serialising gives the same bytes"
    );
    let info = loaded.view().info;
    assert_eq!(info.source_name, "oa_ctf2");
    assert!(info.curves);
    let source = std::fs::read(common::map_path("oa_ctf2")).expect("map");
    assert_eq!(info.source_hash, xxhash_rust::xxh3::xxh3_64(&source));
    let layout = loaded.file_layout().expect("a file layout");
    assert_eq!(layout.version, format::FORMAT_VERSION);
    // Compiled with the default shape bevels and from a source with a tree:
    // both optional sections, the source tree's and the visibility's too.
    assert_eq!(
        layout.sections.len(),
        format::ALL_SECTIONS.len()
            + format::OPTIONAL_SECTIONS.len()
            + format::SOURCE_TREE_SECTIONS.len()
            + format::VISIBILITY_SECTIONS.len()
    );
    let (world, built) = (
        loaded.view(),
        bspq::map::compile_source(&source, "oa_ctf2", &CompileOptions::default())
            .expect("compiles"),
    );
    assert_eq!(world.source.nodes, &built.source_nodes[..]);
    assert_eq!(world.source.leaves, &built.source_leaves[..]);
    assert_eq!(world.source.leaf_brushes, &built.source_leaf_brushes[..]);
    assert_eq!(world.source.leaf_patches, &built.source_leaf_patches[..]);
    assert!(!world.source.leaf_patches.is_empty(), "oa_ctf2 has patches");
    assert_eq!(world.source.leaf_vis, &built.source_leaf_vis[..]);
    assert_eq!(world.source.visibility, &built.visibility[..]);
    assert_eq!(world.source.area_portals, &built.area_portals[..]);
    assert_eq!(world.source.leaf_vis.len(), world.source.leaves.len());
}

#[test]
fn a_loaded_world_survives_its_file_being_truncated() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("q3dm6ish.bspq");
    std::fs::write(&path, compiled_bytes("q3dm6ish", true)).expect("write");
    let loaded = open_world(
        &WorldSpec::parse(path.to_str().expect("utf-8")),
        &CompileOptions::default(),
    )
    .expect("opens the compiled file");
    assert!(
        loaded.file_layout().is_some(),
        "detected as a compiled file by content"
    );
    assert!(!loaded.is_mapped(), "small files are copied, not mapped");
    let query = common::parse_query(
        r#"{"start":[0,0,1000],"end":[0,0,-1000],"mins":[-15,-15,-24],"maxs":[15,15,32]}"#,
    );
    let mut scratch = Scratch::new();
    let before = answer(&loaded.view(), &mut scratch, &query);
    std::fs::File::create(&path)
        .expect("truncate")
        .set_len(0)
        .expect("truncate");
    let after = answer(&loaded.view(), &mut scratch, &query);
    assert_eq!(before, after);
}

#[test]
fn the_extension_does_not_matter() {
    let dir = tempfile::tempdir().expect("temp dir");
    let compiled = dir.path().join("looks_like.bsp");
    std::fs::write(&compiled, compiled_bytes("q3dm6ish", false)).expect("write");
    let bsp = dir.path().join("looks_like.bspq");
    std::fs::copy(common::map_path("q3dm6ish"), &bsp).expect("copy");
    let options = CompileOptions {
        curves: false,
        ..Default::default()
    };
    let a = open_world(
        &WorldSpec::parse(compiled.to_str().expect("utf-8")),
        &options,
    )
    .expect("compiled");
    let b = open_world(&WorldSpec::parse(bsp.to_str().expect("utf-8")), &options).expect("bsp");
    assert!(a.file_layout().is_some());
    assert!(b.file_layout().is_none());
    assert_eq!(a.view().nodes.len(), b.view().nodes.len());
}

#[test]
fn cli_compile_writes_atomically_and_inspect_reports_the_layout() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("aggressor.bspq");
    let bin = env!("CARGO_BIN_EXE_bspq");
    let status = Command::new(bin)
        .args([
            "compile",
            common::map_path("aggressor").to_str().expect("utf-8"),
            "-o",
        ])
        .arg(&out)
        .args(["--hull", "player=-15,-15,-24,15,15,32"])
        .status()
        .expect("runs");
    assert!(status.success());
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        vec!["aggressor.bspq".to_owned()],
        "no temporary files are left behind"
    );

    let inspect = Command::new(bin)
        .args(["inspect", "--world"])
        .arg(&out)
        .output()
        .expect("runs");
    assert!(inspect.status.success());
    let text = String::from_utf8_lossy(&inspect.stdout);
    for needle in [
        "version 2",
        "entities         ",
        "(xxh3-64) ok",
        "planes",
        "leaf_brushes",
        "hulls            player=",
        "bounds",
        "inline models    4",
        "  *4    bounds [352.0, -80.0, -56.0] .. [416.0, -64.0, 44.0]  1 brushes, 0 patches",
    ] {
        assert!(
            text.contains(needle),
            "inspect output lacks {needle:?}:\n{text}"
        );
    }

    // A damaged file: inspect says so and fails; trace refuses it with a clear error.
    let mut bytes = std::fs::read(&out).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&out, &bytes).expect("write");
    let inspect = Command::new(bin)
        .args(["inspect", "--world"])
        .arg(&out)
        .output()
        .expect("runs");
    assert!(!inspect.status.success());
    assert!(String::from_utf8_lossy(&inspect.stdout).contains("MISMATCH"));
    let trace = Command::new(bin)
        .args(["trace", "--world"])
        .arg(&out)
        .output()
        .expect("runs");
    assert!(!trace.status.success());
    assert!(String::from_utf8_lossy(&trace.stderr).contains("checksum mismatch"));
}

#[test]
fn bad_hull_arguments_are_rejected() {
    let bin = env!("CARGO_BIN_EXE_bspq");
    for bad in [
        "player",
        "player=1,2,3",
        "bad name=0,0,0,1,1,1",
        "p=1,0,0,0,1,1",
        "p=nan,0,0,1,1,1",
    ] {
        let out = Command::new(bin)
            .args([
                "compile",
                common::map_path("q3dm6ish").to_str().expect("utf-8"),
                "-o",
                "/nonexistent/x",
                "--hull",
                bad,
            ])
            .output()
            .expect("runs");
        assert!(!out.status.success(), "--hull {bad} accepted");
    }
}

/// The names in `dir`, sorted.
fn file_names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A `--hull` name given twice is rejected as the other `--hull` errors
/// are, when the arguments are parsed: nothing is written, and OUT keeps
/// what it held (it used to be replaced, then the read-back failed).
#[test]
fn a_hull_name_given_twice_is_rejected_before_anything_is_written() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("world.bspq");
    std::fs::write(&out, b"what OUT held").expect("write");
    let run = Command::new(env!("CARGO_BIN_EXE_bspq"))
        .arg("compile")
        .arg(common::map_path("q3dm6ish"))
        .arg("-o")
        .arg(&out)
        .args(["--hull", "a=0,0,0,1,1,1", "--hull", "a=0,0,0,2,2,2"])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("\"a\" is given twice"), "{stderr}");
    assert_eq!(std::fs::read(&out).expect("read"), b"what OUT held");
    assert_eq!(file_names(dir.path()), ["world.bspq"]);
}

/// `bspq compile` loads the written file back before it renames it over
/// OUT: bytes that do not load never take the place of a good world file,
/// and no temporary file is left behind.
#[test]
fn a_written_file_that_does_not_load_back_never_replaces_out() {
    use bspq::map::{open_compiled_file, write_atomically_checked};
    let load_back = |written: &std::path::Path| -> anyhow::Result<()> {
        open_compiled_file(written)?.ok_or_else(|| anyhow::anyhow!("not a world file"))?;
        Ok(())
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("world.bspq");
    let good = compiled_bytes("q3dm6ish", true);
    std::fs::write(&out, &good).expect("write");

    let mut damaged = compiled_bytes("aggressor", true);
    let last = damaged.len() - 1;
    damaged[last] ^= 0xff;
    let err = write_atomically_checked(&out, &damaged, load_back).expect_err("does not load");
    assert!(format!("{err:#}").contains("checksum mismatch"), "{err:#}");
    assert!(
        std::fs::read(&out).expect("read") == good,
        "OUT was replaced"
    );
    assert_eq!(file_names(dir.path()), ["world.bspq"]);

    let other = compiled_bytes("aggressor", true);
    write_atomically_checked(&out, &other, load_back).expect("loads back");
    assert!(
        std::fs::read(&out).expect("read") == other,
        "OUT was not replaced"
    );
    assert_eq!(file_names(dir.path()), ["world.bspq"]);
}
