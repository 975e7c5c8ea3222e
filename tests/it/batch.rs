//! The batch path and any-hit against the scalar reference, on every
//! committed oracle query file: bit-identical answers whatever the batch
//! size, order and thread count; any-hit equals `fraction < 1`.

use crate::common;

use bspq::query::{
    answer_all, answer_request, Answer, HitAnswer, Query, QueryError, QueryLine, Request,
};
use bspq::trace::sieve::{missed, Sieve};
use bspq::trace::Kernel as World;
use bspq::trace::{
    any_hit, any_hit_batch, trace, trace_batch, trace_queries, trace_with_stats, BatchError,
    BatchOptions, BatchResults, Scratch, TraceBatch, TraceQuery, TraceResult,
};
use common::{load_set, load_world, parse_query, result_bits, Rng, MAPS};

/// Every trace query of the committed oracle files of `map` (rays, boxes, extras).
fn traces(map: &str) -> Vec<TraceQuery> {
    ["rays", "boxes", "extras"]
        .iter()
        .flat_map(|set| load_set(map, set, true).queries)
        .filter_map(|line| match parse_query(&line) {
            Query::Trace(q) => Some(q),
            Query::Point(_) => None,
        })
        .collect()
}

/// The reference: one query at a time, the BSP walk over the tree that
/// decides the visit order (no fast search, no first pass).
fn reference(world: &World, queries: &[TraceQuery]) -> Vec<TraceResult> {
    let world = world.reference();
    let mut scratch = Scratch::new();
    queries
        .iter()
        .map(|q| trace(&world, q, &mut scratch))
        .collect()
}

fn check_map(map: &str, curves: bool) {
    let loaded = load_world(map, curves);
    let world = loaded.view();
    let queries = traces(map);
    let expected = reference(&world, &queries);

    // The fast single-query path.
    let mut scratch = Scratch::new();
    for (i, q) in queries.iter().enumerate() {
        assert_eq!(
            result_bits(&trace(&world, q, &mut scratch)),
            result_bits(&expected[i]),
            "{map}: query {i} {q:?}"
        );
    }

    // Without the source's tree, the compiled tree answers the
    // order-dependent cases: its kernel nodes and its file nodes alike, and
    // the fast trace as they do.
    let compiled = world.without_source_tree();
    let compiled_file = compiled.reference();
    for (i, q) in queries.iter().enumerate() {
        let want = trace(&compiled_file, q, &mut scratch);
        assert_eq!(
            result_bits(&trace(&compiled, q, &mut scratch)),
            result_bits(&want),
            "{map}: query {i} without the source tree {q:?}"
        );
    }

    // Batches of several sizes, shuffled, on one and two threads.
    let mut rng = Rng::new(0xba7c_4000 ^ curves as u64);
    for threads in [1, 2] {
        for size in [1, 7, 64, 1000, queries.len()] {
            let mut order: Vec<usize> = (0..queries.len()).collect();
            rng.shuffle(&mut order);
            let options = BatchOptions {
                threads,
                min_per_thread: 16,
            };
            for chunk in order.chunks(size) {
                let batch: Vec<TraceQuery> = chunk.iter().map(|&i| queries[i].clone()).collect();
                let got = trace_queries(&world, &batch, &options);
                assert_eq!(got.len(), batch.len());
                for (r, &i) in got.iter().zip(chunk) {
                    assert_eq!(
                        result_bits(r),
                        result_bits(&expected[i]),
                        "{map}: query {i} in a batch of {size} on {threads} threads"
                    );
                }
            }
        }
    }

    // Structure-of-arrays batches: one per shape, with per-query masks.
    let mut shapes: Vec<([u32; 6], Vec<usize>)> = Vec::new();
    for (i, q) in queries.iter().enumerate() {
        let key: [u32; 6] = std::array::from_fn(|k| {
            if k < 3 {
                q.mins()[k].to_bits()
            } else {
                q.maxs()[k - 3].to_bits()
            }
        });
        match shapes.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(i),
            None => shapes.push((key, vec![i])),
        }
    }
    let mut out = BatchResults::default();
    let mut hits = Vec::new();
    for (_, members) in &shapes {
        let starts: Vec<_> = members.iter().map(|&i| queries[i].start()).collect();
        let ends: Vec<_> = members.iter().map(|&i| queries[i].end()).collect();
        let masks: Vec<_> = members.iter().map(|&i| queries[i].mask()).collect();
        let first = &queries[members[0]];
        let batch = TraceBatch::boxes(&starts, &ends, first.mins(), first.maxs(), 0)
            .and_then(|batch| batch.with_masks(&masks))
            .unwrap();
        for threads in [1, 2] {
            let options = BatchOptions {
                threads,
                min_per_thread: 8,
            };
            trace_batch(&world, &batch, &options, &mut out);
            any_hit_batch(&world, &batch, &options, &mut hits);
            assert_eq!(out.len(), members.len());
            assert_eq!(hits.len(), members.len());
            for (k, &i) in members.iter().enumerate() {
                let r = out.get(k).expect("one answer per query");
                assert_eq!(
                    result_bits(&r),
                    result_bits(&expected[i]),
                    "{map}: SoA query {i} on {threads} threads"
                );
                assert_eq!(
                    hits[k],
                    expected[i].fraction < 1.0,
                    "{map}: any-hit of query {i}"
                );
            }
        }
    }

    // Any-hit, one at a time, on both walks: exactly `fraction < 1`.
    for (i, q) in queries.iter().enumerate() {
        let want = expected[i].fraction < 1.0;
        assert_eq!(any_hit(&world, q, &mut scratch), want, "{map}: any-hit {i}");
        assert_eq!(
            any_hit(&world.reference(), q, &mut scratch),
            want,
            "{map}: reference any-hit {i}"
        );
    }
}

/// Ties between nearest contacts that report different planes, flags or
/// contents are told apart without the whole walk, as the walk tells them
/// apart: on every committed map's oracle moves, each query answered that
/// way gives the reference walk's answer bit for bit, and there are such
/// queries to check.
#[test]
fn tied_contacts_are_told_apart_as_the_walk_does() {
    let mut ties = 0;
    for map in MAPS {
        for curves in [true, false] {
            let loaded = load_world(map, curves);
            let world = loaded.view();
            let queries = traces(map);
            let expected = reference(&world, &queries);
            let mut scratch = Scratch::new();
            for (q, expected) in queries.iter().zip(&expected) {
                let (got, stats) = trace_with_stats(&world, q, &mut scratch);
                if stats.ties > 0 {
                    ties += 1;
                    assert_eq!(result_bits(&got), result_bits(expected), "{map}: {q:?}");
                }
            }
        }
    }
    assert!(ties >= 10, "only {ties} tied queries on the committed maps");
}

#[test]
fn oa_ctf2_batches_match_the_scalar_path() {
    check_map("oa_ctf2", true);
    check_map("oa_ctf2", false);
}

#[test]
fn q3dm6ish_batches_match_the_scalar_path() {
    check_map("q3dm6ish", true);
    check_map("q3dm6ish", false);
}

#[test]
fn aggressor_batches_match_the_scalar_path() {
    check_map("aggressor", true);
    check_map("aggressor", false);
}

/// Every ray of the committed files, turned into an any-hit line, against the
/// reference's own answers: `hit` is `fraction < 1` of the expected answer.
/// The batch's first pass: every query it finds touching nothing gets
/// exactly the answer the single path gives (bit for bit, curves on and
/// off), and on the committed maps it finds a real share of them, including
/// moves that touch nothing by less than a grid cell's width, so that the
/// batch tests above go through both of its branches.
#[test]
fn the_first_pass_only_sifts_out_moves_that_touch_nothing() {
    for map in MAPS {
        for curves in [true, false] {
            let loaded = load_world(map, curves);
            let world = loaded.view();
            let sieve = Sieve::new(&world);
            let queries = traces(map);
            let mut scratch = Scratch::new();
            let mut sifted = 0;
            let mut missed_by_the_sieve = 0;
            for (i, q) in queries.iter().enumerate() {
                let single = trace(&world, q, &mut scratch);
                if sieve.touches_nothing(q) {
                    sifted += 1;
                    assert_eq!(
                        result_bits(&missed(q)),
                        result_bits(&single),
                        "{map}: query {i} {q:?}"
                    );
                    assert!(!any_hit(&world, q, &mut scratch), "{map}: query {i}");
                } else if single.fraction == 1.0 && !single.startsolid {
                    missed_by_the_sieve += 1;
                }
            }
            let share = sifted as f64 / queries.len() as f64;
            assert!(
                share > 0.05,
                "{map}: only {sifted} of {} sifted",
                queries.len()
            );
            // Conservative, not useless: it finds a fair share of the moves
            // that touch nothing.
            assert!(
                sifted > missed_by_the_sieve / 10,
                "{map}: {sifted} / {missed_by_the_sieve}"
            );
        }
    }
}

#[test]
fn any_hit_lines_agree_with_the_oracle() {
    for map in MAPS {
        let loaded = load_world(map, true);
        let world = loaded.view();
        for set in ["rays", "boxes", "extras"] {
            let oracle = load_set(map, set, true);
            let mut queries = Vec::new();
            let mut want = Vec::new();
            for (line, expected) in oracle.queries.iter().zip(&oracle.expected) {
                let mut q = QueryLine::parse(line).expect("oracle line");
                if q.point.is_some() {
                    continue;
                }
                q.any = Some(true);
                queries.push(q.request().expect("oracle line"));
                let e: serde_json::Value = serde_json::from_str(expected).expect("oracle answer");
                want.push(e["fraction"].as_f64().expect("fraction") < 1.0);
            }
            let answers = answer_all(&world, &queries, &BatchOptions::with_threads(2));
            let mut same = 0;
            for (a, w) in answers.iter().zip(&want) {
                let Answer::Hit(HitAnswer { hit }) = a else {
                    panic!("{map}/{set}: an any-hit line answered {a:?}");
                };
                same += (hit == w) as usize;
            }
            // The full traces match the oracle (tests/conformance.rs).
            assert!(
                want.len() == same,
                "{map}/{set}: any-hit differs from the oracle on {} of {}",
                want.len() - same,
                want.len()
            );
        }
    }
}

#[test]
fn mixed_batches_answer_in_order() {
    let loaded = load_world("q3dm6ish", true);
    let world = loaded.view();
    let mut queries: Vec<Request> = Vec::new();
    for set in ["points", "rays", "boxes", "extras"] {
        queries.extend(
            load_set("q3dm6ish", set, true)
                .queries
                .iter()
                .map(|l| Request::from(parse_query(l))),
        );
    }
    let mut rng = Rng::new(7);
    rng.shuffle(&mut queries);
    // Every third trace asks any-hit instead.
    for (i, q) in queries.iter_mut().enumerate() {
        if let (0, Request::Query(Query::Trace(t))) = (i % 3, &*q) {
            *q = Request::AnyHit(t.clone());
        }
    }
    let mut scratch = Scratch::new();
    let one_by_one: Vec<Answer> = queries
        .iter()
        .map(|q| answer_request(&world, &mut scratch, q))
        .collect();
    for threads in [1, 2] {
        let options = BatchOptions {
            threads,
            min_per_thread: 100,
        };
        assert_eq!(answer_all(&world, &queries, &options), one_by_one);
    }
}

#[test]
fn any_lines_parse_and_answer_hit() {
    let line = r#"{"start":[0,0,0],"end":[0,0,-100000],"any":true}"#;
    let q = QueryLine::parse(line).unwrap().request().unwrap();
    assert!(matches!(q, Request::AnyHit(_)));
    let no = r#"{"start":[0,0,0],"end":[1,0,0],"any":false}"#;
    let q = QueryLine::parse(no).unwrap().request().unwrap();
    assert!(matches!(q, Request::Query(Query::Trace(_))));
    for bad in [
        r#"{"point":[0,0,0],"any":true}"#,
        r#"{"point":[0,0,0],"mask":1}"#,
    ] {
        assert_eq!(
            QueryLine::parse(bad).unwrap().validate(),
            Err(QueryError::PointWithTrace),
            "{bad}"
        );
    }
    assert_eq!(
        Answer::Hit(HitAnswer { hit: true }).to_json(),
        r#"{"hit":true}"#
    );
}

#[test]
fn inconsistent_or_invalid_batches_are_refused() {
    use bspq::trace::InvalidTrace;
    let starts = [bspq::math::Vec3::ZERO; 3];
    let ends = [bspq::math::Vec3::ONE; 2];
    assert_eq!(
        TraceBatch::rays(&starts, &ends, 1).unwrap_err(),
        BatchError::Ends { starts: 3, ends: 2 }
    );
    let masks = [1u32; 2];
    let rays = TraceBatch::rays(&starts, &starts, 1).unwrap();
    assert_eq!(
        rays.with_masks(&masks).unwrap_err(),
        BatchError::Masks {
            queries: 3,
            masks: 2
        }
    );
    let mut far = starts;
    far[2].y = f32::NAN;
    assert_eq!(
        TraceBatch::rays(&starts, &far, 1).unwrap_err(),
        BatchError::Invalid {
            index: 2,
            error: InvalidTrace::BadCoordinate { field: "end" }
        }
    );
    let (mins, maxs) = (bspq::math::Vec3::ONE, bspq::math::Vec3::ZERO);
    assert_eq!(
        TraceBatch::boxes(&starts, &starts, mins, maxs, 1).unwrap_err(),
        BatchError::Invalid {
            index: 0,
            error: InvalidTrace::MinsAboveMaxs
        }
    );
}

/// Moves that graze brushes (parallel to a face of a brush's box, from half
/// a unit inside to three units outside): where skipping by bounds could go
/// wrong, the kernel must still answer as the reference walk does.
#[test]
fn grazing_moves_match_the_reference_walk() {
    use bspq::math::Vec3;
    for map in MAPS {
        let loaded = load_world(map, true);
        let world = loaded.view();
        let reference = world.reference();
        let mut rng = Rng::new(0x96a2_e000 + map.len() as u64);
        let mut unit = move || rng.unit();
        let mut scratch = Scratch::new();
        let mut hits = 0;
        let mut moves = Vec::new();
        for i in 0..20_000 {
            let b = &world.brushes[(unit() * world.brushes.len() as f32) as usize];
            let (mins, maxs) = (Vec3::from_array(b.mins), Vec3::from_array(b.maxs));
            let axis = (unit() * 3.0) as usize % 3;
            let ext = if i % 2 == 0 {
                Vec3::ZERO
            } else {
                Vec3::new(unit() * 16.0, unit() * 16.0, unit() * 32.0)
            };
            let off = unit() * 3.5 - 0.5;
            let mut start = mins - Vec3::splat(4.0)
                + (maxs - mins + Vec3::splat(8.0)) * Vec3::new(unit(), unit(), unit());
            start[axis] = if unit() < 0.5 {
                maxs[axis] + ext[axis] + off
            } else {
                mins[axis] - ext[axis] - off
            };
            let mut delta = (Vec3::new(unit(), unit(), unit()) - 0.5) * 128.0;
            delta[axis] = (unit() - 0.5) * 0.5;
            let q = TraceQuery::boxed(
                start,
                start + delta,
                -ext,
                ext,
                if i % 3 == 0 { u32::MAX } else { 1 },
            )
            .unwrap();
            let want = trace(&reference, &q, &mut scratch);
            let got = trace(&world, &q, &mut scratch);
            assert_eq!(
                result_bits(&got),
                result_bits(&want),
                "{map}: grazing move {i} {q:?}"
            );
            assert_eq!(
                any_hit(&world, &q, &mut scratch),
                want.fraction < 1.0,
                "{map}: grazing any-hit {i}"
            );
            hits += (want.fraction < 1.0) as usize;
            moves.push((q, want));
        }
        // The moves do touch brushes often: the test is not vacuous.
        assert!(hits > 2_000, "{map}: only {hits} grazing moves hit");
        assert_batch_answers_as_alone(map, &world, &moves);
    }
}

/// In one batch (moves grazing the same brush one after another), each of
/// `moves` gets the answer it has alone.
fn assert_batch_answers_as_alone(
    map: &str,
    world: &bspq::trace::Kernel,
    moves: &[(TraceQuery, bspq::trace::TraceResult)],
) {
    let queries: Vec<TraceQuery> = moves.iter().map(|(q, _)| q.clone()).collect();
    let got = trace_queries(world, &queries, &BatchOptions::single_thread());
    for (i, ((q, want), r)) in moves.iter().zip(&got).enumerate() {
        assert_eq!(
            result_bits(r),
            result_bits(want),
            "{map}: move {i} in a batch {q:?}"
        );
    }
}

/// Moves that cross or skim patches (rays, whose patch hits replace earlier
/// contacts within a window, and boxes) and swept spheres and capsules that
/// graze brushes: the fast trace must answer as the reference walk does,
/// including where it has to hand the query back to the walk.
#[test]
fn moves_near_patches_and_shape_grazes_match_the_reference_walk() {
    use bspq::math::Vec3;
    use bspq::trace::Shape;
    for map in MAPS {
        let loaded = load_world(map, true);
        let world = loaded.view();
        let reference = world.reference();
        let mut rng = Rng::new(0x51ce_0000 + map.len() as u64);
        let mut unit = move || rng.unit();
        let mut scratch = Scratch::new();
        let mut hits = 0;
        let mut moves = Vec::new();
        let count = 12_000;
        for i in 0..count {
            let (lo, hi) = if !world.patches.is_empty() && i % 2 == 0 {
                let p = &world.patches[(unit() * world.patches.len() as f32) as usize];
                (Vec3::from_array(p.mins), Vec3::from_array(p.maxs))
            } else {
                let b = &world.brushes[(unit() * world.brushes.len() as f32) as usize];
                (Vec3::from_array(b.mins), Vec3::from_array(b.maxs))
            };
            let pick = |u: Vec3| lo - Vec3::splat(8.0) + (hi - lo + Vec3::splat(16.0)) * u;
            let start = pick(Vec3::new(unit(), unit(), unit()));
            let mut end = pick(Vec3::new(unit(), unit(), unit()));
            if i % 5 == 0 {
                // Nearly parallel to an axis plane: skims surfaces.
                let axis = (unit() * 3.0) as usize % 3;
                end[axis] = start[axis] + (unit() - 0.5) * 0.25;
            }
            let mask = if i % 3 == 0 { u32::MAX } else { 1 };
            let q = match i % 4 {
                0 => TraceQuery::ray(start, end, mask).unwrap(),
                1 => TraceQuery::boxed(
                    start,
                    end,
                    Vec3::splat(-15.0),
                    Vec3::new(15.0, 15.0, 32.0),
                    mask,
                )
                .unwrap(),
                2 => TraceQuery::shaped(
                    start,
                    end,
                    Shape::Sphere {
                        radius: 4.0 + unit() * 20.0,
                    },
                    mask,
                )
                .unwrap(),
                _ => TraceQuery::shaped(
                    start,
                    end,
                    Shape::Capsule {
                        radius: 4.0 + unit() * 12.0,
                        half_height: unit() * 24.0,
                    },
                    mask,
                )
                .unwrap(),
            };
            let want = trace(&reference, &q, &mut scratch);
            let got = trace(&world, &q, &mut scratch);
            assert_eq!(
                result_bits(&got),
                result_bits(&want),
                "{map}: move {i} {q:?}"
            );
            assert_eq!(
                any_hit(&world, &q, &mut scratch),
                want.fraction < 1.0,
                "{map}: any-hit {i}"
            );
            hits += (want.fraction < 1.0) as usize;
            moves.push((q, want));
        }
        assert!(hits > count / 4, "{map}: only {hits} moves hit");
        assert_batch_answers_as_alone(map, &world, &moves);
    }
}

/// The service's packed path (what gRPC uses: no line per query) gives the
/// line path's answers (what HTTP uses) on every committed oracle trace,
/// as boxes, shapes and any-hit batches, and rejects a bad query with the
/// same error and index.
#[test]
fn packed_batches_answer_as_lines_do() {
    use bspq::query::ShapeLine;
    use bspq::registry::Registry;
    use bspq::service::{Limits, PackedResults, PackedTraces, Service, ServiceError};
    use std::sync::Arc;
    let registry = Arc::new(Registry::default());
    for map in MAPS {
        registry
            .load_path(map, &common::map_path(map))
            .expect("committed map loads");
    }
    let service = Service::new(registry, Limits::default(), None);
    for map in MAPS {
        let queries = traces(map);
        // Group by box and mask as a client would batch them.
        let mut groups: std::collections::BTreeMap<(String, u32), Vec<&TraceQuery>> =
            Default::default();
        for q in &queries {
            groups
                .entry((format!("{:?}{:?}", q.mins(), q.maxs()), q.mask()))
                .or_default()
                .push(q);
        }
        for (i, group) in groups.values().enumerate() {
            let flat = |f: fn(&TraceQuery) -> [f32; 3]| -> Vec<f32> {
                group.iter().flat_map(|q| f(q)).collect()
            };
            let (starts, ends) = (flat(|q| q.start().to_array()), flat(|q| q.end().to_array()));
            let f64s = |v: bspq::math::Vec3| v.to_array().map(f64::from);
            let shapes = [
                None,
                Some(ShapeLine::Sphere { radius: 9.5 }),
                Some(ShapeLine::Convex {
                    points: vec![[0.0, 0.0, 8.0], [6.0, 0.0, -4.0], [-6.0, 5.0, -4.0]],
                }),
            ];
            // Every box group as itself; a few groups also as shapes.
            for shape in shapes.iter().take(if i % 7 == 0 { 3 } else { 1 }) {
                let mut full: Vec<Answer> = Vec::new();
                for any in [None, Some(true)] {
                    let template = QueryLine {
                        mins: shape.is_none().then(|| f64s(group[0].mins())),
                        maxs: shape.is_none().then(|| f64s(group[0].maxs())),
                        mask: Some(group[0].mask()),
                        shape: shape.clone(),
                        any,
                        ..QueryLine::default()
                    };
                    let batch = PackedTraces {
                        starts: &starts,
                        ends: &ends,
                        template,
                        masks: &[],
                        ..PackedTraces::default()
                    };
                    let want = service
                        .trace(map, &batch.lines().expect("well formed"))
                        .expect("valid lines");
                    let got = service.trace_packed(map, &batch).expect("valid batch");
                    assert_eq!((&got.world, got.version), (&want.world, want.version));
                    let got: Vec<Answer> = match got.results {
                        PackedResults::Hits(h) => h
                            .into_iter()
                            .map(|hit| Answer::Hit(HitAnswer { hit }))
                            .collect(),
                        PackedResults::Traces(t) => (0..t.len())
                            .map(|k| Answer::Trace((&t.get(k).expect("in range")).into()))
                            .collect(),
                        PackedResults::Mixed { .. } => unreachable!("no per-query any-hit"),
                    };
                    assert_eq!(got, want.results, "{map}: group {i} {shape:?} any={any:?}");
                    if any.is_none() {
                        full = got;
                    } else {
                        // Any-hit is `fraction < 1` of the full trace, shapes included.
                        let hits: Vec<Answer> = full
                            .iter()
                            .map(|a| match a {
                                Answer::Trace(t) => Answer::Hit(HitAnswer {
                                    hit: t.fraction < 1.0,
                                }),
                                other => other.clone(),
                            })
                            .collect();
                        assert_eq!(got, hits, "{map}: group {i} {shape:?} any-hit");
                    }
                }
            }
        }
        // A bad coordinate in query 3, and a bad shape, are reported as lines are.
        let mut starts = vec![0.0f32; 15];
        starts[10] = f32::NAN;
        let ends = vec![1.0f32; 15];
        let masks = [1, 2, 3, 4, 5];
        for shape in [None, Some(ShapeLine::Sphere { radius: -1.0 })] {
            let batch = PackedTraces {
                starts: &starts,
                ends: &ends,
                template: QueryLine {
                    shape,
                    ..QueryLine::default()
                },
                masks: &masks,
                ..PackedTraces::default()
            };
            let want = service.trace(map, &batch.lines().expect("well formed"));
            let got = service.trace_packed(map, &batch);
            assert!(matches!(want, Err(ServiceError::BadQuery { .. })));
            assert_eq!(got.map(|a| a.version), want.map(|a| a.version));
        }
    }
}

/// One scratch moving between two worlds with as many brushes but not as
/// many patches (a map with and without curves) answers every position test
/// as a fresh scratch does. (It once started its count over while keeping
/// the brushes' marks, and skipped brushes it had not tested.)
#[test]
fn a_scratch_moving_between_worlds_answers_as_a_fresh_one() {
    use bspq::math::Vec3;
    let with_curves = load_world("oa_ctf2", true);
    let without = load_world("oa_ctf2", false);
    let (a, b) = (with_curves.view(), without.view());
    assert_eq!(a.brushes.len(), b.brushes.len());
    assert_ne!(a.patches.len(), b.patches.len());
    let mut rng = Rng::new(0x5c7a_7c40);
    let mut unit = move || rng.unit();
    let half = Vec3::new(15.0, 15.0, 24.0);
    let mut shared = Scratch::new();
    let mut solid = 0;
    for round in 0..500 {
        // Positions near brushes, so many tests are inside one; the same
        // few in one world, then in the other (they meet the same brushes).
        let queries: Vec<TraceQuery> = (0..6)
            .map(|_| {
                let brush = &a.brushes[(unit() * a.brushes.len() as f32) as usize];
                let (lo, hi) = (Vec3::from_array(brush.mins), Vec3::from_array(brush.maxs));
                let p = lo - half + (hi - lo + half * 2.0) * Vec3::new(unit(), unit(), unit());
                TraceQuery::boxed(p, p, -half, half, u32::MAX).unwrap()
            })
            .collect();
        for world in [&a, &b] {
            for (i, q) in queries.iter().enumerate() {
                let want = trace(world, q, &mut Scratch::new());
                assert_eq!(
                    result_bits(&trace(world, q, &mut shared)),
                    result_bits(&want),
                    "round {round}, position test {i} {q:?}"
                );
                solid += want.startsolid as usize;
            }
        }
    }
    assert!(solid > 1_000, "only {solid} positions in solid");
}
