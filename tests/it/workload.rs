//! `bspq workload`: query lines for any world in the conformance data's
//! style, checked against that data and against the world itself.

use crate::common;

use bspq::contents::{
    CONTENTS_PLAYERCLIP, CONTENTS_SOLID, MASK_PLAYERSOLID, MASK_SHOT, MASK_SOLID,
};
use bspq::query::Query;
use bspq::source::q3bsp::Q3Bsp;
use bspq::trace::{point_contents, trace, Scratch, TraceQuery};
use glam::Vec3;
use std::process::Command;

fn workload(map: &str, kind: &str, count: usize, seed: u64) -> Vec<TraceQuery> {
    let text = common::bspq_stdout([
        "workload".into(),
        format!("--kind={kind}"),
        format!("--count={count}"),
        format!("--seed={seed}"),
        format!("--world={}", common::map_path(map).display()),
    ]);
    text.lines()
        .map(|line| match common::parse_query(line) {
            Query::Trace(q) => q,
            other => panic!("not a move: {other:?}"),
        })
        .collect()
}

fn source(map: &str) -> Q3Bsp {
    let bytes = std::fs::read(common::map_path(map)).expect("committed map");
    Q3Bsp::parse(&bytes).expect("a sound map")
}

/// The leaf clusters tell inside from outside as the conformance data's
/// generator did: every start of its rays and boxes lies in a cluster, and
/// points beyond the map's bounds do not.
#[test]
fn the_conformance_data_starts_inside_clusters() {
    for map in common::MAPS {
        let bsp = source(map);
        for set in ["rays", "boxes"] {
            for line in &common::load_set(map, set, true).queries {
                let Query::Trace(q) = common::parse_query(line) else {
                    panic!("{map}/{set}: not a move: {line}");
                };
                let cluster = bsp.cluster_at(q.start());
                assert!(cluster.is_some_and(|c| c >= 0), "{map}/{set}: {line}");
            }
        }
        let far = Vec3::splat(1.0e5);
        assert_eq!(bsp.cluster_at(far), Some(-1), "{map}");
        assert_eq!(bsp.cluster_at(-far), Some(-1), "{map}");
    }
}

/// Rays: as many as asked, every start empty and inside the level, half
/// short moves (16–256 units), masks solid and shot; the same seed gives
/// the same lines, another seed others.
#[test]
fn rays_start_empty_inside_the_level() {
    let map = "q3dm6ish";
    let loaded = common::load_world(map, true);
    let world = loaded.view();
    let bsp = source(map);
    let rays = workload(map, "rays", 400, 7);
    assert_eq!(rays.len(), 400);
    for (i, q) in rays.iter().enumerate() {
        assert_eq!((q.mins(), q.maxs()), (Vec3::ZERO, Vec3::ZERO), "ray {i}");
        assert!([MASK_SOLID, MASK_SHOT].contains(&q.mask()), "ray {i}");
        let contents = point_contents(&world, q.start());
        assert_eq!(
            contents & (CONTENTS_SOLID | CONTENTS_PLAYERCLIP),
            0,
            "ray {i}"
        );
        assert!(bsp.cluster_at(q.start()).is_some_and(|c| c >= 0), "ray {i}");
        if i.is_multiple_of(2) {
            // Within 16-256 units, give or take the 1/32-unit grid.
            let length = (q.end() - q.start()).length();
            assert!((15.9..=256.1).contains(&length), "ray {i}: {length}");
        }
    }
    let again = workload(map, "rays", 400, 7);
    assert!(rays
        .iter()
        .zip(&again)
        .all(|(a, b)| a.start() == b.start() && a.end() == b.end()));
    let other = workload(map, "rays", 400, 8);
    assert!(rays.iter().zip(&other).any(|(a, b)| a.start() != b.start()));
}

/// Boxes: player boxes with the player-solid mask and small boxes with the
/// solid mask, from starts where they fit (on these maps every one does).
#[test]
fn boxes_start_where_they_fit() {
    let map = "aggressor";
    let loaded = common::load_world(map, true);
    let world = loaded.view();
    let boxes = workload(map, "boxes", 400, 3);
    assert_eq!(boxes.len(), 400);
    let mut scratch = Scratch::new();
    let mut players = 0;
    for (i, q) in boxes.iter().enumerate() {
        assert!(q.mins().cmple(q.maxs()).all(), "box {i}");
        if q.mask() == MASK_PLAYERSOLID {
            assert_eq!(q.mins(), Vec3::new(-15.0, -15.0, -24.0), "box {i}");
            players += 1;
        } else {
            assert_eq!(q.mask(), MASK_SOLID, "box {i}");
        }
        let stand = TraceQuery::boxed(q.start(), q.start(), q.mins(), q.maxs(), q.mask()).unwrap();
        assert!(!trace(&world, &stand, &mut scratch).startsolid, "box {i}");
    }
    // About 70 % players.
    assert!(
        (200..=360).contains(&players),
        "{players} player boxes of 400"
    );
}

#[test]
fn a_zero_count_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_bspq"))
        .args(["workload", "--kind", "rays", "--count", "0", "--world"])
        .arg(common::map_path("oa_ctf2"))
        .output()
        .expect("bspq runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--count"));
}

/// A tick of player movement: the scene line (every player a box, every
/// mover at home), then one step-slide per player in turn, each naming its
/// player as `pass`; every line is answered, and players standing on
/// walkable ground run along it.
#[test]
fn moves_are_one_step_slide_per_player_in_a_scene() {
    let players = 8;
    let text = common::bspq_stdout([
        "workload".into(),
        "--kind=moves".into(),
        format!("--players={players}"),
        "--count=32".into(),
        format!("--world={}", common::map_path("q3dm6ish").display()),
    ]);
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .collect();
    let scene = lines[0]["entities"].as_array().expect("a scene line first");
    let boxes = scene.iter().filter(|e| e.get("box").is_some()).count();
    assert_eq!(boxes, players);
    assert_eq!(lines.len(), 33);
    for (i, line) in lines[1..].iter().enumerate() {
        let slide = &line["slide"];
        assert_eq!(slide["pass"], i % players, "{line}");
        match slide.get("ground") {
            Some(n) => {
                assert!(n[2].as_f64().expect("normal") >= 0.7, "{line}");
                assert!(slide.get("gravity").is_none(), "{line}");
            }
            None => assert_eq!(slide["gravity"], 800, "{line}"),
        }
    }
    let mut trace = Command::new(env!("CARGO_BIN_EXE_bspq"))
        .args(["trace", "--world"])
        .arg(common::map_path("q3dm6ish"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("bspq runs");
    use std::io::Write;
    trace
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("lines sent");
    let out = trace.wait_with_output().expect("bspq trace ends");
    assert!(out.status.success());
    let answers: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON answers"))
        .collect();
    assert_eq!(answers.len(), 33, "one answer per line");
    let mut ran = 0;
    for (line, answer) in lines[1..].iter().zip(&answers[1..]) {
        assert!(answer.get("error").is_none(), "{line} → {answer}");
        let moved = answer["origin"] != line["slide"]["origin"];
        if line["slide"].get("ground").is_some() && moved {
            ran += 1;
        }
    }
    let grounded = lines[1..]
        .iter()
        .filter(|l| l["slide"].get("ground").is_some())
        .count();
    assert!(
        grounded > 0 && ran * 2 > grounded,
        "{ran} of {grounded} ran"
    );
}
