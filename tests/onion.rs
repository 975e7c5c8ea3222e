//! Onion hulls on the committed maps: every oracle box query of a registered
//! size, traced as that hull through the onion tree, gives the plane-shifted
//! box sweep's answer bit for bit (curves on and off); rays, boxes and point
//! contents are unchanged by compiling hulls; hull worlds round-trip through
//! the file format; the query line names hulls.

mod common;

use bspq::compile::CompileOptions;
use bspq::math::Vec3;
use bspq::query::{Query, QueryLine};
use bspq::trace::{
    point_contents, trace, trace_hull, trace_hull_with_stats, HullQuery, Scratch, TraceQuery,
    TraceResult,
};
use bspq::world::format;
use bspq::world::load::{compile_source, LoadedWorld};
use bspq::world::{HullSpec, World};

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

fn compile(map: &str, curves: bool, hulls: Vec<HullSpec>) -> LoadedWorld {
    let source = std::fs::read(common::map_path(map)).unwrap();
    let data = compile_source(&source, map, &CompileOptions { curves, hulls }).unwrap();
    LoadedWorld::from_data(data).unwrap()
}

/// Every trace query of the committed box and edge-case sets.
fn trace_queries(map: &str) -> Vec<TraceQuery> {
    let mut out = Vec::new();
    for set in ["boxes", "extras"] {
        for line in common::load_set(map, set, true).queries {
            if let Query::Trace(q) = common::parse_query(&line) {
                if q.shape.is_none() {
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
        .find(|h| Vec3::from_array(h.mins) == q.mins && Vec3::from_array(h.maxs) == q.maxs)
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
                let hq = HullQuery::new(&world, &name, q.start, q.end, q.mask).unwrap();
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
                        q.start, q.end, q.mask
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
