//! The full trace's eight-wide search (AVX2) against the four-wide one: the
//! same answers, bit for bit, on every committed oracle query, on the box
//! queries swept as shapes, and on random rays and boxes (up to and past
//! the largest box the tree over single facets serves), single and in
//! batches. On a processor without AVX2 there are no eight-wide trees, and
//! the test checks only that.

use crate::common;

use bspq::query::Query;
use bspq::trace::accel::bvh::{Avx2, SMALL_BOX_HALF};
use bspq::trace::Kernel as World;
use bspq::trace::{trace, trace_queries, BatchOptions, Scratch, Shape, TraceQuery};
use common::{load_set, load_world, parse_query, result_bits, Rng, MAPS};
use glam::Vec3;

/// The oracle's trace queries, the boxes among them again as spheres and
/// capsules, and random moves over the world's bounds.
fn queries(map: &str, world: &World, rng: &mut Rng) -> Vec<TraceQuery> {
    let mut out: Vec<TraceQuery> = ["rays", "boxes", "extras"]
        .iter()
        .flat_map(|set| load_set(map, set, true).queries)
        .filter_map(|line| match parse_query(&line) {
            Query::Trace(q) => Some(q),
            Query::Point(_) => None,
        })
        .collect();
    let shapes: Vec<TraceQuery> = out
        .iter()
        .filter(|q| q.mins() != q.maxs())
        .take(2000)
        .enumerate()
        .map(|(i, q)| {
            let shape = if i % 2 == 0 {
                Shape::Sphere { radius: 12.0 }
            } else {
                Shape::Capsule {
                    radius: 15.0,
                    half_height: 16.0,
                }
            };
            TraceQuery::shaped(q.start(), q.end(), shape, q.mask()).unwrap()
        })
        .collect();
    out.extend(shapes);
    let (lo, hi) = (Vec3::from(world.mins), Vec3::from(world.maxs));
    let halves = [
        Vec3::ZERO,
        Vec3::new(15.0, 15.0, 28.0),
        Vec3::new(4.0, 9.0, 2.0),
        Vec3::splat(SMALL_BOX_HALF + 16.0),
    ];
    for i in 0..6000 {
        let start = lo + (hi - lo) * Vec3::new(rng.unit(), rng.unit(), rng.unit());
        let dir = Vec3::new(rng.unit() - 0.5, rng.unit() - 0.5, rng.unit() - 0.5)
            .normalize_or(Vec3::NEG_Z);
        let length = [16.0, 256.0, 2048.0][i % 3];
        let half = halves[i / 3 % halves.len()];
        let mask = [1, 0x0201_0001, 0x0600_0001][i % 3];
        out.push(TraceQuery::boxed(start, start + dir * length, -half, half, mask).unwrap());
    }
    out
}

fn check_map(map: &str, curves: bool) {
    let loaded = load_world(map, curves);
    let world = loaded.view();
    assert_eq!(world.accel.bvh.wide.present(), Avx2::detect().is_some());
    if Avx2::detect().is_none() {
        common::skip(
            &format!("eight_wide_answers_as_four_wide on {map} (curves {curves})"),
            "no AVX2 here: the full trace takes the four-wide search only",
        );
        return;
    }
    let four_kernel = world.accel.without_wide_trees();
    let four = World {
        accel: &four_kernel,
        ..world
    };
    assert!(!four.accel.bvh.wide.present());
    let mut rng = Rng::new(0x8_1de ^ curves as u64);
    let queries = queries(map, &world, &mut rng);
    let mut scratch = Scratch::new();
    for (i, q) in queries.iter().enumerate() {
        assert_eq!(
            result_bits(&trace(&world, q, &mut scratch)),
            result_bits(&trace(&four, q, &mut scratch)),
            "{map} (curves {curves}): query {i} {q:?}"
        );
    }
    let options = BatchOptions::single_thread();
    let wide = trace_queries(&world, &queries, &options);
    let narrow = trace_queries(&four, &queries, &options);
    assert_eq!(wide.len(), queries.len());
    for (i, (a, b)) in wide.iter().zip(&narrow).enumerate() {
        assert_eq!(
            result_bits(a),
            result_bits(b),
            "{map} (curves {curves}): batch query {i} {:?}",
            queries[i]
        );
    }
}

#[test]
fn eight_wide_answers_as_four_wide() {
    for map in MAPS {
        for curves in [true, false] {
            check_map(map, curves);
        }
    }
}
