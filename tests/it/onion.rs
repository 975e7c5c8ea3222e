//! Onion hulls on the committed maps: every oracle box query of a registered
//! size, traced as that hull through the onion tree, gives the plane-shifted
//! box sweep's answer bit for bit (curves on and off); rays, boxes and point
//! contents are unchanged by compiling hulls; hull worlds round-trip through
//! the file format; the query line names hulls.

use crate::common;

use bspq::compile::CompileOptions;
use bspq::map::{compile_source, Map};
use bspq::math::Vec3;
use bspq::query::{Query, QueryLine};
use bspq::trace::Kernel as World;
use bspq::trace::{
    point_contents, trace, trace_hull, trace_hull_with_stats, HullQuery, Scratch, TraceQuery,
    TraceResult,
};
use bspq::world::format;
use bspq::world::HullSpec;

/// The box sizes of the oracle's box queries that occur more than a few
/// times on every committed map: Quake 3's standing and crouching player.
fn hulls() -> Vec<HullSpec> {
    vec![
        HullSpec {
            name: "stand".into(),
            mins: [-15.0, -15.0, -24.0],
            maxs: [15.0, 15.0, 32.0],
        },
        HullSpec {
            name: "crouch".into(),
            mins: [-15.0, -15.0, -24.0],
            maxs: [15.0, 15.0, 16.0],
        },
    ]
}

fn compile(map: &str, curves: bool, hulls: Vec<HullSpec>) -> Map {
    let source = std::fs::read(common::map_path(map)).unwrap();
    let data = compile_source(
        &source,
        map,
        &CompileOptions {
            curves,
            hulls,
            ..CompileOptions::default()
        },
    )
    .unwrap();
    Map::from_data(data).unwrap()
}

/// Every trace query of the committed box and edge-case sets.
fn trace_queries(map: &str) -> Vec<TraceQuery> {
    let mut out = Vec::new();
    for set in ["boxes", "extras"] {
        for line in common::load_set(map, set, true).queries {
            if let Query::Trace(q) = common::parse_query(&line) {
                if q.shape().is_none() {
                    out.push(q);
                }
            }
        }
    }
    out
}

/// Bitwise equality of two answers (so that -0.0 and 0.0, or NaNs, differ).
fn same_bits(a: &TraceResult, b: &TraceResult) -> bool {
    let bits = |r: &TraceResult| {
        (
            r.fraction.to_bits(),
            r.endpos.to_array().map(f32::to_bits),
            r.normal.to_array().map(f32::to_bits),
            r.dist.to_bits(),
            r.startsolid,
            r.allsolid,
            r.contents,
            r.surface_flags,
        )
    };
    bits(a) == bits(b)
}

/// The hull named for a query's box, if its size is registered.
fn hull_of(world: &World, q: &TraceQuery) -> Option<String> {
    world
        .info
        .hulls
        .iter()
        .find(|h| Vec3::from_array(h.mins) == q.mins() && Vec3::from_array(h.maxs) == q.maxs())
        .map(|h| h.name.clone())
}

#[test]
fn hull_traces_equal_box_sweeps_on_every_oracle_query_of_their_size() {
    for map in common::MAPS {
        for curves in [true, false] {
            let loaded = compile(map, curves, hulls());
            let world = loaded.view();
            let mut scratch = Scratch::new();
            let (mut ties, mut checked, mut fell_back, mut nodes_hull, mut nodes_box) =
                (0, 0, 0, 0u64, 0u64);
            let mut failures = Vec::new();
            for q in trace_queries(map) {
                let Some(name) = hull_of(&world, &q) else {
                    continue;
                };
                let hq = HullQuery::new(&world, &name, q.start(), q.end(), q.mask()).unwrap();
                let want = trace(&world, &q, &mut scratch);
                let (got, stats) = trace_hull_with_stats(&world, &hq, &mut scratch);
                let (_, box_stats) = bspq::trace::trace_with_stats(&world, &q, &mut scratch);
                checked += 1;
                fell_back += stats.box_fallback as usize;
                ties += stats.tie as usize;
                nodes_hull += stats.nodes as u64;
                nodes_box += box_stats.nodes as u64;
                if !same_bits(&got, &want) {
                    failures.push(format!(
                        "{name} {:?} -> {:?} mask {:#x}\n  hull {got:?}\n  box  {want:?}",
                        q.start(),
                        q.end(),
                        q.mask()
                    ));
                }
            }
            eprintln!(
                "{map} curves {curves}: {checked} hull queries, {fell_back} answered by the box \
                 sweep ({ties} ties), nodes {nodes_hull} (hull) vs {nodes_box} (box)"
            );
            assert!(
                checked > 1000,
                "{map}: only {checked} queries of a hull size"
            );
            assert!(
                failures.is_empty(),
                "{map} curves {curves}: {} of {checked} differ:\n{}",
                failures.len(),
                failures[..failures.len().min(5)].join("\n")
            );
        }
    }
}

/// Compiling hulls leaves every other answer as it was: each oracle ray,
/// box and edge case traced (and each point's contents) on a world with
/// hulls equals, bit for bit, the same on the world without; and a world
/// compiled without hulls has no hull sections at all.
#[test]
fn rays_boxes_and_points_are_unchanged_by_hulls() {
    for map in common::MAPS {
        let plain = compile(map, true, Vec::new());
        let onion = compile(map, true, hulls());
        let (a, b) = (plain.view(), onion.view());
        assert!(
            a.nodes.len() < b.nodes.len(),
            "{map}: the tree was not refined"
        );
        let layout = format::parse_layout(&plain.to_file_bytes(), true).unwrap();
        assert!(layout
            .sections
            .iter()
            .all(|s| !format::HULL_SECTIONS.contains(&s.kind)));
        let mut scratch = Scratch::new();
        let mut compared = 0;
        for set in ["rays", "boxes", "extras", "points"] {
            for line in common::load_set(map, set, true).queries {
                match common::parse_query(&line) {
                    Query::Trace(q) => {
                        let want = trace(&a, &q, &mut scratch);
                        let got = trace(&b, &q, &mut scratch);
                        assert!(same_bits(&got, &want), "{map} {line}:\n{got:?}\n{want:?}");
                    }
                    Query::Point(p) => {
                        assert_eq!(point_contents(&b, p), point_contents(&a, p), "{map} {line}");
                    }
                }
                compared += 1;
            }
        }
        assert!(compared > 5000);
    }
}

/// A hull world survives the file format: it loads from its bytes, writes
/// the same bytes back, keeps its hulls and answers hull traces as before.
#[test]
fn hull_worlds_round_trip_through_the_file_format() {
    let built = compile("q3dm6ish", true, hulls());
    let bytes = built.to_file_bytes();
    let loaded = Map::from_compiled_bytes(&bytes).unwrap();
    assert_eq!(loaded.to_file_bytes(), bytes);
    let (a, b) = (built.view(), loaded.view());
    assert_eq!(b.info.hulls, hulls());
    assert!(b.info.onion.as_ref().is_some_and(|o| o.nodes_added > 0));
    assert_eq!(a.hull_leaves, b.hull_leaves);
    assert_eq!(a.leaf_hull_solid, b.leaf_hull_solid);
    let mut scratch = Scratch::new();
    for q in trace_queries("q3dm6ish") {
        let Some(name) = hull_of(&a, &q) else {
            continue;
        };
        let hq = HullQuery::new(&a, &name, q.start(), q.end(), q.mask()).unwrap();
        let want = trace_hull(&a, &hq, &mut scratch);
        let got = trace_hull(&b, &hq, &mut scratch);
        assert!(same_bits(&got, &want));
    }
}

/// Leaves' solidity bits say whether a point there is inside some brush
/// expanded by the hull: a box centred on a leaf's interior point starts
/// solid exactly when the bit is set (Golodetz's classification, checked by
/// the box kernel's position test).
#[test]
fn solidity_bits_agree_with_box_position_tests() {
    let loaded = compile("oa_ctf2", false, hulls());
    let world = loaded.view();
    let mut scratch = Scratch::new();
    let (mut solid, mut checked) = (0, 0);
    // Sample points on a grid; each lies in one leaf (found by descending).
    let (lo, hi) = (Vec3::from_array(world.mins), Vec3::from_array(world.maxs));
    for i in 0..40 {
        for j in 0..40 {
            for k in 0..20 {
                let t = Vec3::new(i as f32 + 0.37, j as f32 + 0.61, k as f32 + 0.23)
                    / Vec3::new(40.0, 40.0, 20.0);
                let p = lo + (hi - lo) * t;
                let mut child = world.root();
                while child >= 0 {
                    let node = &world.nodes[child as usize];
                    let d = world.planes[node.plane as usize].distance(p);
                    // Stay clear of cell boundaries, where "inside" is a tie.
                    if d.abs() < 0.5 {
                        child = i32::MIN;
                        break;
                    }
                    child = node.children[(d < 0.0) as usize];
                }
                if child == i32::MIN {
                    continue;
                }
                let leaf = (-1 - child) as usize;
                for (h, spec) in world.info.hulls.iter().enumerate() {
                    // The onion tree holds the box's centre: place the box there.
                    let (mins, maxs) = (Vec3::from_array(spec.mins), Vec3::from_array(spec.maxs));
                    let at = p - (mins + maxs) * 0.5;
                    let q = TraceQuery::boxed(at, at, mins, maxs, u32::MAX).unwrap();
                    let inside = trace(&world, &q, &mut scratch).startsolid;
                    let bit = world.leaf_hull_solid[leaf] >> h & 1 == 1;
                    assert_eq!(bit, inside, "{p} hull {h} leaf {leaf}");
                    solid += bit as usize;
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 10_000 && solid > 1000, "{checked} {solid}");
}

/// Query lines name hulls: answered against the world like the library
/// call; unknown names and hulls mixed with boxes or shapes are errors.
#[test]
fn query_lines_name_hulls() {
    let loaded = compile("oa_ctf2", true, hulls());
    let world = loaded.view();
    let mut scratch = Scratch::new();
    let line = r#"{"start":[251.14063,1075.0625,129.82813],"end":[251.14063,1075.0625,-315.40625],"hull":"stand","mask":33619969}"#;
    let parsed = QueryLine::parse(line).unwrap();
    let request = parsed.request_in(&world).unwrap();
    let answer = bspq::query::answer_request(&world, &mut scratch, &request);
    let q = TraceQuery::boxed(
        Vec3::new(251.14063, 1075.0625, 129.82813),
        Vec3::new(251.14063, 1075.0625, -315.40625),
        Vec3::new(-15.0, -15.0, -24.0),
        Vec3::new(15.0, 15.0, 32.0),
        33619969,
    )
    .unwrap();
    let want = trace(&world, &q, &mut scratch);
    assert!(want.fraction < 1.0);
    assert_eq!(
        answer,
        bspq::query::Answer::Trace(bspq::query::TraceAnswer::from(&want))
    );
    let any = QueryLine::parse(&line.replace('}', r#","any":true}"#))
        .unwrap()
        .request_in(&world)
        .unwrap();
    assert_eq!(
        bspq::query::answer_request(&world, &mut scratch, &any),
        bspq::query::Answer::Hit(bspq::query::HitAnswer { hit: true })
    );
    let code = |l: &str| {
        QueryLine::parse(l)
            .unwrap()
            .request_in(&world)
            .unwrap_err()
            .code()
    };
    assert_eq!(
        code(r#"{"start":[0,0,0],"end":[1,1,1],"hull":"prone"}"#),
        "unknown_hull"
    );
    assert_eq!(
        code(r#"{"start":[0,0,0],"end":[1,1,1],"hull":"stand","mins":[-1,-1,-1]}"#),
        "mixed_query"
    );
    assert_eq!(
        code(r#"{"start":[0,0,0],"end":[1,1,1],"hull":"stand","shape":{"sphere":{"radius":4}}}"#),
        "mixed_query"
    );
    // A world without hulls knows none.
    let plain = compile("oa_ctf2", true, Vec::new());
    let err = QueryLine::parse(line)
        .unwrap()
        .request_in(&plain.view())
        .unwrap_err();
    assert_eq!(err.code(), "unknown_hull");
    // Without a world, a hull line cannot be answered.
    assert_eq!(parsed.request().unwrap_err().code(), "unknown_hull");
}

/// The hull node budget: a compile whose hulls need more nodes than it
/// allows fails with `HullBudget` (a clear error, not minutes of work and a
/// huge file); the nodes a compile within budget adds fit that budget
/// exactly; `bspq compile` reports the failure once, with exit status 1.
#[test]
fn hulls_beyond_the_node_budget_are_a_clear_error() {
    let source = std::fs::read(common::map_path("q3dm6ish")).unwrap();
    let with_budget = |budget: usize| {
        compile_source(
            &source,
            "q3dm6ish",
            &CompileOptions {
                hulls: hulls(),
                hull_node_budget: budget,
                ..CompileOptions::default()
            },
        )
    };
    let built = with_budget(bspq::compile::DEFAULT_HULL_NODE_BUDGET).unwrap();
    let needed = built.info.onion.as_ref().unwrap().nodes_added;
    assert!(needed > 0);
    assert!(with_budget(needed).is_ok(), "exactly enough is enough");
    let err = with_budget(needed - 1).unwrap_err();
    assert!(
        matches!(
            err,
            bspq::map::LoadError::Compile(bspq::compile::CompileError::HullBudget(b))
                if b == needed - 1
        ),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bspq"))
        .arg("compile")
        .arg(common::map_path("q3dm6ish"))
        .arg("-o")
        .arg(dir.path().join("w.bspq"))
        .args([
            "--hull",
            "stand=-15,-15,-24,15,15,32",
            "--max-hull-nodes",
            "100",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.matches("hull node budget").count(), 1, "{stderr}");
    assert!(stderr.contains("budget of 100 tree nodes"), "{stderr}");
    assert!(
        stderr.contains("--max-hull-nodes"),
        "the flag is named: {stderr}"
    );
    assert!(!dir.path().join("w.bspq").exists(), "nothing written");
}
