//! Shapes on the committed maps: exact mode against the brute-force exact
//! reference, plane shifting against both, a convex box against the box
//! kernel, the query-line and gRPC forms of shapes, and sweeps against one
//! cube brush held to closed forms.

use crate::common;

use bspq::accuracy::{compare, shape_query, ErrorStats, KINDS};
use bspq::margins::SURFACE_CLIP_EPSILON;
use bspq::math::Vec3;
use bspq::proto::v1 as pb;
use bspq::query::{Query, QueryError, QueryLine, ShapeLine};
use bspq::trace::{reference_trace, trace, ConvexHull, Scratch, Shape, TraceQuery, TraceResult};
use bspq::world::{Brush, BrushSide, Leaf, Plane, WorldData};
use bspq::Map;
use std::sync::Arc;

/// The oracle's box queries of a committed map.
fn box_queries(map: &str) -> Vec<TraceQuery> {
    common::load_set(map, "boxes", false)
        .queries
        .iter()
        .filter_map(|l| match common::parse_query(l) {
            Query::Trace(q) if q.mins() != q.maxs() => Some(q),
            _ => None,
        })
        .collect()
}

fn describe(q: &TraceQuery, got: &TraceResult, want: &TraceResult) -> String {
    format!(
        "{:?} {:?} -> {:?}\n  got  {got:?}\n  want {want:?}",
        q.shape(),
        q.start(),
        q.end()
    )
}

/// `exact: true` answers within 0.01 units of the reference (every brush
/// swept on its own, no tree), for every shape kind on every committed map.
/// The reference covers brushes only, so the maps are compiled without curves.
#[test]
fn exact_mode_matches_the_reference_on_every_map() {
    for map in common::MAPS {
        let loaded = common::load_world(map, false);
        let world = loaded.view();
        let boxes = box_queries(map);
        for kind in KINDS {
            let queries: Vec<TraceQuery> = boxes
                .iter()
                .filter_map(|q| shape_query(kind, q, true))
                .collect();
            assert!(queries.len() > 1000, "{map} {kind}: {}", queries.len());
            let pairs = compare(&world, &queries);
            let mut hits = 0;
            for (q, (got, want)) in queries.iter().zip(&pairs) {
                let ok = got.endpos.distance(want.endpos) <= 0.01
                    && got.startsolid == want.startsolid
                    && got.allsolid == want.allsolid
                    && (got.fraction < 1.0) == (want.fraction < 1.0)
                    && got.contents == want.contents;
                assert!(ok, "{map} {kind}: {}", describe(q, got, want));
                hits += (want.fraction < 1.0) as usize;
            }
            // The sets are not trivial: many of the moves hit something.
            assert!(hits > 100, "{map} {kind}: only {hits} hits");
        }
    }
}

/// Plane shifting bounds the exact swept shape from outside: it never misses
/// what the exact sweep hits, and never stops further along than it (beyond
/// the difference the 1/8-unit back-off along two different normals makes).
#[test]
fn plane_shifting_is_conservative() {
    for map in common::MAPS {
        let loaded = common::load_world(map, false);
        let world = loaded.view();
        let boxes = box_queries(map);
        for kind in KINDS {
            let queries: Vec<TraceQuery> = boxes
                .iter()
                .filter_map(|q| shape_query(kind, q, false))
                .collect();
            let pairs = compare(&world, &queries);
            let stats = ErrorStats::from_pairs(&pairs);
            // A miss of an exact hit only where the grown shape already
            // starts inside the brush it would hit (so it reports startsolid).
            for (q, (got, want)) in queries.iter().zip(&pairs) {
                if got.fraction == 1.0 && want.fraction < 1.0 {
                    assert!(got.startsolid, "{map} {kind}: {}", describe(q, got, want));
                }
            }
            assert!(
                stats.false_misses * 100 <= stats.queries,
                "{map} {kind}: {stats:?}"
            );
            for (q, (got, want)) in queries.iter().zip(&pairs) {
                let why = || format!("{map} {kind}: {}", describe(q, got, want));
                assert!(!want.startsolid || got.startsolid, "{}", why());
                let moved = q.end() - q.start();
                let closing = -moved.normalize_or_zero().dot(want.normal);
                if !got.startsolid && want.fraction < 1.0 && closing > 0.1 {
                    // Both stop 1/8 unit short along their own normal.
                    let slack = 0.125 / closing + 0.01;
                    assert!(
                        got.fraction * moved.length() <= want.fraction * moved.length() + slack,
                        "{}",
                        why()
                    );
                }
            }
        }
    }
}

/// A convex shape given as a box's eight corners is that box: the shape
/// sweep answers every oracle box query as the box kernel does, curves on
/// and off (the box kernel matches the oracle; the shape path shares none of
/// its code).
#[test]
fn a_convex_box_is_the_box() {
    for map in common::MAPS {
        for curves in [true, false] {
            let loaded = common::load_world(map, curves);
            let world = loaded.view();
            let mut scratch = Scratch::new();
            for q in box_queries(map) {
                let corners: Vec<Vec3> = (0..8)
                    .map(|bits| {
                        Vec3::new(
                            if bits & 1 != 0 {
                                q.maxs().x
                            } else {
                                q.mins().x
                            },
                            if bits & 2 != 0 {
                                q.maxs().y
                            } else {
                                q.mins().y
                            },
                            if bits & 4 != 0 {
                                q.maxs().z
                            } else {
                                q.mins().z
                            },
                        )
                    })
                    .collect();
                let shape = Shape::Convex(Arc::new(ConvexHull::new(&corners).unwrap()));
                let convex = TraceQuery::shaped(q.start(), q.end(), shape, q.mask()).unwrap();
                let want = trace(&world, &q, &mut scratch);
                let got = trace(&world, &convex, &mut scratch);
                let same = got.endpos.distance(want.endpos) <= 1e-3
                    && (got.fraction - want.fraction).abs() <= 1e-5
                    && got.normal.distance(want.normal) <= 1e-4
                    && (
                        got.startsolid,
                        got.allsolid,
                        got.contents,
                        got.surface_flags,
                    ) == (
                        want.startsolid,
                        want.allsolid,
                        want.contents,
                        want.surface_flags,
                    );
                assert!(
                    same,
                    "{map} curves {curves}: {}",
                    describe(&convex, &got, &want)
                );
            }
        }
    }
}

/// Answers do not depend on what the scratch space saw before.
#[test]
fn shape_answers_are_deterministic() {
    let loaded = common::load_world("q3dm6ish", true);
    let world = loaded.view();
    let boxes = box_queries("q3dm6ish");
    for kind in KINDS {
        for exact in [false, true] {
            let queries: Vec<TraceQuery> = boxes
                .iter()
                .take(300)
                .filter_map(|q| shape_query(kind, q, exact))
                .collect();
            let mut shared = Scratch::new();
            let first: Vec<TraceResult> = queries
                .iter()
                .map(|q| trace(&world, q, &mut shared))
                .collect();
            for (q, a) in queries.iter().zip(&first).rev() {
                let b = trace(&world, q, &mut Scratch::new());
                assert_eq!(a.fraction.to_bits(), b.fraction.to_bits(), "{kind} {q:?}");
                assert_eq!(a.endpos, b.endpos);
                assert_eq!(a.normal, b.normal);
                assert_eq!(
                    (a.startsolid, a.allsolid, a.contents),
                    (b.startsolid, b.allsolid, b.contents)
                );
            }
        }
    }
}

fn validate(json: &str) -> Result<Query, QueryError> {
    QueryLine::parse(json).and_then(|l| l.validate())
}

#[test]
fn shape_lines_are_validated() {
    let ok = [
        r#"{"start":[0,0,0],"end":[1,0,0],"shape":{"sphere":{"radius":16}}}"#,
        r#"{"start":[0,0,0],"end":[1,0,0],"shape":{"capsule":{"radius":15,"half_height":0}},"exact":true}"#,
        r#"{"start":[0,0,0],"end":[1,0,0],"shape":{"cylinder":{"radius":15,"half_height":24}}}"#,
        r#"{"start":[0,0,0],"end":[1,0,0],"shape":{"convex":{"points":[[0,0,0],[1,0,0],[0,1,0],[0,0,1]]}}}"#,
    ];
    for line in ok {
        let Ok(Query::Trace(q)) = validate(line) else {
            panic!("{line} rejected");
        };
        let shape = q.shape().expect("a shape");
        assert_eq!((q.mins(), q.maxs()), shape.bounds(), "{line}");
    }
    let too_many = format!(
        r#"{{"start":[0,0,0],"end":[1,0,0],"shape":{{"convex":{{"points":{:?}}}}}}}"#,
        vec![[1.0, 2.0, 3.0]; 65]
    );
    let bad = [
        (
            r#"{"start":[0,0,0],"end":[1,0,0],"shape":{"sphere":{"radius":0}}}"#,
            "bad_shape",
        ),
        (
            r#"{"start":[0,0,0],"end":[1,0,0],"shape":{"sphere":{"radius":-3}}}"#,
            "bad_shape",
        ),
        (
            r#"{"start":[0,0,0],"end":[1,0,0],"shape":{"sphere":{"radius":1e9}}}"#,
            "bad_shape",
        ),
        (
            r#"{"start":[0,0,0],"end":[1,0,0],"shape":{"capsule":{"radius":4,"half_height":-1}}}"#,
            "bad_shape",
        ),
        (
            r#"{"start":[0,0,0],"end":[1,0,0],"shape":{"convex":{"points":[]}}}"#,
            "bad_shape",
        ),
        (too_many.as_str(), "bad_shape"),
        (
            r#"{"start":[0,0,0],"end":[1,0,0],"shape":{"cone":{"radius":4}}}"#,
            "malformed_query",
        ),
        (
            r#"{"start":[0,0,0],"end":[1,0,0],"shape":{"sphere":{"radius":4,"height":2}}}"#,
            "malformed_query",
        ),
        (
            r#"{"start":[0,0,0],"end":[1,0,0],"mins":[-1,-1,-1],"maxs":[1,1,1],"shape":{"sphere":{"radius":4}}}"#,
            "mixed_query",
        ),
        (
            r#"{"point":[0,0,0],"shape":{"sphere":{"radius":4}}}"#,
            "mixed_query",
        ),
    ];
    for (line, code) in bad {
        match validate(line) {
            Err(e) => assert_eq!(e.code(), code, "{line}: {e}"),
            Ok(q) => panic!("{line} accepted as {q:?}"),
        }
    }
}

#[test]
fn grpc_swept_shapes_become_query_lines() {
    let shapes = [
        ShapeLine::Sphere { radius: 16.0 },
        ShapeLine::Capsule {
            radius: 15.0,
            half_height: 12.0,
        },
        ShapeLine::Cylinder {
            radius: 15.0,
            half_height: 28.0,
        },
        ShapeLine::Convex {
            points: vec![
                [0.0, 0.0, 0.0],
                [8.0, 0.0, 0.0],
                [0.0, 8.0, 0.0],
                [0.0, 0.0, 8.0],
            ],
        },
    ];
    for shape in shapes {
        let req = pb::TraceRequest {
            world: "w".into(),
            starts: vec![0.0, 0.0, 0.0, 1.0, 2.0, 3.0],
            ends: vec![4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
            swept: Some(bspq::transport::grpc::swept_message(&shape)),
            exact: true,
            ..Default::default()
        };
        let lines = bspq::transport::grpc::trace_lines(&req, 100).expect("valid batch");
        assert_eq!(lines.len(), 2);
        for line in &lines {
            assert_eq!(line.shape.as_ref(), Some(&shape));
            assert_eq!(line.exact, Some(true));
            assert!(
                matches!(line.validate(), Ok(Query::Trace(q)) if q.shape().is_some() && q.exact())
            );
        }
    }
    // A box and a swept shape at once is one query with both: rejected by the core.
    let req = pb::TraceRequest {
        starts: vec![0.0; 3],
        ends: vec![1.0; 3],
        shape: Some(pb::Box {
            mins: Some(pb::Vec3 {
                x: -1.0,
                y: -1.0,
                z: -1.0,
            }),
            maxs: Some(pb::Vec3 {
                x: 1.0,
                y: 1.0,
                z: 1.0,
            }),
        }),
        swept: Some(bspq::transport::grpc::swept_message(&ShapeLine::Sphere {
            radius: 2.0,
        })),
        ..Default::default()
    };
    let lines = bspq::transport::grpc::trace_lines(&req, 100).expect("converts");
    assert_eq!(
        lines[0].validate().map_err(|e| e.code()),
        Err("mixed_query")
    );
    let empty = pb::TraceRequest {
        starts: vec![0.0; 3],
        ends: vec![1.0; 3],
        swept: Some(pb::SweptShape { kind: None }),
        ..Default::default()
    };
    assert!(bspq::transport::grpc::trace_lines(&empty, 100).is_err());
}

/// A batch sent with one convex shape (as a gRPC `swept` batch is) builds
/// its hull once: every query shares it. A different shape gets its own.
#[test]
fn a_batch_builds_one_hull_per_shape() {
    let shape = ShapeLine::Convex {
        points: vec![
            [0.0, 0.0, 0.0],
            [8.0, 0.0, 0.0],
            [0.0, 8.0, 0.0],
            [0.0, 0.0, 8.0],
        ],
    };
    let req = pb::TraceRequest {
        world: "w".into(),
        starts: vec![0.0; 3 * 50],
        ends: vec![1.0; 3 * 50],
        swept: Some(bspq::transport::grpc::swept_message(&shape)),
        ..Default::default()
    };
    let mut lines = bspq::transport::grpc::trace_lines(&req, 100).expect("valid batch");
    let mut other = lines[0].clone();
    other.shape = Some(ShapeLine::Convex {
        points: vec![[0.0, 0.0, 0.0], [-0.0, 8.0, 0.0], [0.0, 0.0, 8.0]],
    });
    lines.push(other);
    let requests = bspq::query::requests(&lines).expect("valid");
    let hulls: Vec<Arc<ConvexHull>> = requests
        .iter()
        .map(|r| match r {
            bspq::query::Request::Query(Query::Trace(q)) => match q.shape() {
                Some(Shape::Convex(h)) => h.clone(),
                other => panic!("not a convex shape: {other:?}"),
            },
            other => panic!("not a convex trace: {other:?}"),
        })
        .collect();
    assert!(hulls[1..50].iter().all(|h| Arc::ptr_eq(h, &hulls[0])));
    assert!(!Arc::ptr_eq(&hulls[50], &hulls[0]));
    // Shared or not, the hull is the one each line describes on its own.
    for (line, hull) in lines.iter().zip(&hulls) {
        let Ok(Query::Trace(q)) = line.validate() else {
            panic!("invalid line");
        };
        assert_eq!(q.shape(), Some(&Shape::Convex(hull.clone())));
    }
}

/// Shape bevels are for shapes only: with or without them, every oracle ray
/// and box query gets the same bits (they match Quake 3, which has no such
/// planes), curves on and off.
#[test]
fn shape_bevels_change_no_ray_or_box_answer() {
    for map in common::MAPS {
        for curves in [true, false] {
            let loaded = common::load_world(map, curves);
            let world = loaded.view();
            assert!(!world.shape_bevels.is_empty(), "{map}: default bevels");
            let bare = bspq::trace::Kernel {
                world: bspq::world::World {
                    shape_bevel_ranges: &[],
                    shape_bevels: &[],
                    ..world.world
                },
                ..world
            };
            let mut scratch = Scratch::new();
            for set in ["rays", "boxes"] {
                for line in &common::load_set(map, set, curves).queries {
                    let Query::Trace(q) = common::parse_query(line) else {
                        continue;
                    };
                    let a = trace(&world, &q, &mut scratch);
                    let b = trace(&bare, &q, &mut scratch);
                    assert_eq!(format!("{a:?}"), format!("{b:?}"), "{map} {set}: {q:?}");
                }
            }
        }
    }
}

/// Every bevel supports its brush: no corner of the brush lies outside it,
/// and some corner lies on it (the solid is unchanged).
#[test]
fn shape_bevels_touch_but_never_cut_their_brush() {
    for map in common::MAPS {
        let loaded = common::load_world(map, false);
        let world = loaded.view();
        for (b, brush) in world.brushes.iter().enumerate() {
            let corners = bspq::trace::exact::brush_vertices(&world, brush);
            for bevel in world.shape_bevels_of(b) {
                let n = Vec3::from_array(bevel.normal).as_dvec3();
                let top = corners
                    .iter()
                    .map(|c| c.dot(n))
                    .fold(f64::NEG_INFINITY, f64::max);
                let d = bevel.dist as f64;
                assert!(
                    top <= d + 1e-3 && top >= d - 0.05,
                    "{map} brush {b}: bevel {bevel:?}, corners reach {top}"
                );
            }
        }
    }
}

/// Bevels make plane shifting closer to the exact sweep: the mean and p99
/// error with the default bevels are below those without, for every rounded
/// kind, and exact mode stays exact either way.
#[test]
fn shape_bevels_reduce_plane_shifting_error() {
    let loaded = common::load_world("q3dm6ish", false);
    let world = loaded.view();
    let bare = bspq::trace::Kernel {
        world: bspq::world::World {
            shape_bevel_ranges: &[],
            shape_bevels: &[],
            ..world.world
        },
        ..world
    };
    let boxes = box_queries("q3dm6ish");
    for kind in ["sphere", "capsule", "cylinder"] {
        let queries: Vec<TraceQuery> = boxes
            .iter()
            .filter_map(|q| shape_query(kind, q, false))
            .collect();
        let with = ErrorStats::from_pairs(&compare(&world, &queries));
        let without = ErrorStats::from_pairs(&compare(&bare, &queries));
        assert!(with.mean < without.mean, "{kind}: {with:?} vs {without:?}");
        assert!(with.p99 <= without.p99, "{kind}: {with:?} vs {without:?}");
        assert!(with.false_hits <= without.false_hits, "{kind}");
    }
}

/// A world file without the bevel sections loads and answers shapes as a
/// world compiled without bevels; bevel sections that do not fit the world
/// are typed errors, not panics.
#[test]
fn worlds_without_bevel_sections_load_and_bad_ones_are_rejected() {
    use bspq::compile::bevels::BevelOptions;
    use bspq::compile::CompileOptions;
    use bspq::map::{compile_source, Map};
    use bspq::world::format;
    let source = std::fs::read(common::map_path("q3dm6ish")).expect("map");
    let compile = |shape_bevels| {
        compile_source(
            &source,
            "q3dm6ish",
            &CompileOptions {
                curves: false,
                shape_bevels,
                ..Default::default()
            },
        )
        .expect("compiles")
    };
    let bare = compile(BevelOptions::none());
    let bare_file = format::write(&bare);
    let layout = format::parse_layout(&bare_file, true).expect("layout");
    assert_eq!(
        layout.sections.len(),
        format::ALL_SECTIONS.len()
            + format::SOURCE_TREE_SECTIONS.len()
            + format::VISIBILITY_SECTIONS.len()
    );
    assert!(!layout
        .sections
        .iter()
        .any(|s| format::OPTIONAL_SECTIONS.contains(&s.kind)));
    let loaded = Map::from_compiled_bytes(&bare_file).expect("loads");
    assert!(loaded.view().shape_bevels.is_empty());

    let mut bevelled = compile(BevelOptions::default());
    assert!(!bevelled.shape_bevels.is_empty());
    let from_file = Map::from_compiled_bytes(&format::write(&bevelled)).expect("loads");
    assert_eq!(from_file.view().shape_bevels, &bevelled.shape_bevels[..]);
    // The file without bevel sections answers as the same world compiled
    // in memory without bevels.
    let in_memory = Map::from_data(bare).expect("loads");
    let mut scratch = Scratch::new();
    for q in box_queries("q3dm6ish").iter().take(500) {
        let q = shape_query("sphere", q, false).expect("a sphere");
        let a = trace(&loaded.view(), &q, &mut scratch);
        let b = trace(&in_memory.view(), &q, &mut scratch);
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
    }

    let last = bevelled.shape_bevel_ranges.len() - 1;
    bevelled.shape_bevel_ranges[last].count += 1_000_000;
    let err = Map::from_compiled_bytes(&format::write(&bevelled)).expect_err("bad range");
    assert!(err.to_string().contains("shape bevels"), "{err}");
    bevelled.shape_bevel_ranges[last].count -= 1_000_000;
    bevelled.shape_bevels[0].normal = [2.0, 0.0, 0.0];
    let err = Map::from_compiled_bytes(&format::write(&bevelled)).expect_err("bad normal");
    assert!(err.to_string().contains("unit"), "{err}");
    bevelled.shape_bevel_ranges.pop();
    bevelled.shape_bevels[0].normal = [1.0, 0.0, 0.0];
    let err = Map::from_compiled_bytes(&format::write(&bevelled)).expect_err("bad count");
    assert!(err.to_string().contains("per brush"), "{err}");
}

/// Any-hit of every shape kind (plane-shifted, and exact) is exactly
/// `fraction < 1` of the full sweep, on every committed map with curves.
#[test]
fn any_hit_of_a_shape_is_a_full_sweep_below_one() {
    use bspq::trace::any_hit;
    for map in common::MAPS {
        let loaded = common::load_world(map, true);
        let world = loaded.view();
        let mut scratch = Scratch::new();
        let (mut hits, mut total) = (0, 0);
        for (i, q) in box_queries(map).iter().enumerate() {
            for kind in KINDS {
                let exact = i % 50 == 0;
                let Some(q) = shape_query(kind, q, exact) else {
                    continue;
                };
                let full = trace(&world, &q, &mut scratch).fraction < 1.0;
                assert_eq!(
                    any_hit(&world, &q, &mut scratch),
                    full,
                    "{map} {kind} (exact {exact}) {:?} -> {:?}",
                    q.start(),
                    q.end()
                );
                hits += full as usize;
                total += 1;
            }
        }
        assert!(hits * 10 > total, "{map}: only {hits} of {total} hit");
    }
}

/// One axial cube brush, -32..32 on every axis, in a world of one leaf.
fn cube_world() -> Map {
    let mut w = WorldData::default();
    for (axis, sign) in [
        (0, 1.0),
        (0, -1.0),
        (1, 1.0),
        (1, -1.0),
        (2, 1.0),
        (2, -1.0),
    ] {
        let mut n = Vec3::ZERO;
        n[axis] = sign;
        w.planes.push(Plane::new(n, 32.0));
        w.brush_sides.push(BrushSide {
            plane: w.planes.len() as u32 - 1,
            surface_flags: axis as u32,
        });
    }
    w.brushes.push(Brush {
        first_side: 0,
        num_sides: 6,
        contents: 1,
        source_index: 0,
        mins: [-32.0; 3],
        maxs: [32.0; 3],
    });
    w.leaves.push(Leaf {
        contents: 1,
        first_brush: 0,
        num_brushes: 1,
        first_patch: 0,
        num_patches: 0,
    });
    w.leaf_brushes.push(0);
    Map::from_data(w).expect("a valid world")
}

#[test]
fn cube_has_eight_corners() {
    let map = cube_world();
    let world = map.view();
    let v = bspq::trace::exact::brush_vertices(&world, &world.brushes[0]);
    assert_eq!(v.len(), 8);
    assert!(v.iter().all(|p| p.abs() == bspq::math::DVec3::splat(32.0)));
}

/// A sphere sweeping onto a face, an edge and a corner stops where the
/// closed forms say (the corner: |c - corner| = r).
#[test]
fn sphere_contacts_match_closed_forms() {
    let map = cube_world();
    let world = map.view();
    let r = 16.0f32;
    let sphere = Shape::Sphere { radius: r };
    // Face: centre moves along -x toward x = 32 + r.
    let q = TraceQuery::shaped(
        Vec3::new(100.0, 0.0, 0.0),
        Vec3::new(0.0, 0.0, 0.0),
        sphere.clone(),
        1,
    )
    .unwrap();
    let got = reference_trace(&world, &q, &sphere);
    let toi = (100.0 - 48.0) / 100.0;
    let want = toi - SURFACE_CLIP_EPSILON as f32 / 100.0;
    assert!(
        (got.fraction - want).abs() < 1e-4,
        "{} vs {want}",
        got.fraction
    );
    assert!(got.normal.dot(Vec3::X) > 0.9999);
    assert_eq!(got.surface_flags, 0);
    // Corner: moving along the diagonal toward (32,32,32).
    let d = Vec3::splat(1.0).normalize();
    let start = Vec3::splat(32.0) + d * 100.0;
    let q = TraceQuery::shaped(start, Vec3::splat(32.0), sphere.clone(), 1).unwrap();
    let got = reference_trace(&world, &q, &sphere);
    let want = (100.0 - r) / 100.0 - SURFACE_CLIP_EPSILON as f32 / 100.0;
    assert!(
        (got.fraction - want).abs() < 1e-4,
        "{} vs {want}",
        got.fraction
    );
    assert!(got.normal.dot(d) > 0.999);
    // Plane shifting stops earlier there: it meets the shifted corner of the bevel-less cube.
    let mut scratch = Scratch::new();
    let shifted = trace(&world, &q, &mut scratch);
    assert!(shifted.fraction < got.fraction - 0.1);
}

/// A sphere that grazes the cube's top edge, 0.06 units deep, while
/// rising out of the plane-shifted top: the clip's 1/8-unit rule lets
/// the shifted sphere through, the exact sphere touches. Exact mode must
/// still list the brush and find the contact the reference finds.
#[test]
fn shallow_grazes_are_exact_contacts() {
    let map = cube_world();
    let world = map.view();
    let sphere = Shape::Sphere { radius: 16.0 };
    let shifted_query = TraceQuery::shaped(
        Vec3::new(-100.0, 0.0, 47.9),
        Vec3::new(100.0, 0.0, 48.02),
        sphere.clone(),
        1,
    )
    .unwrap();
    let q = shifted_query.clone().with_exact(true).unwrap();
    let want = reference_trace(&world, &q, &sphere);
    assert!(want.fraction < 0.4, "{want:?}");
    let mut scratch = Scratch::new();
    let shifted = trace(&world, &shifted_query, &mut scratch);
    assert_eq!(shifted.fraction, 1.0, "the shifted clip lets it through");
    let got = trace(&world, &q, &mut scratch);
    assert!(
        got.endpos.distance(want.endpos) <= 0.01,
        "{got:?} vs {want:?}"
    );
}

#[test]
fn starting_inside_is_startsolid_and_staying_is_allsolid() {
    let map = cube_world();
    let world = map.view();
    let capsule = Shape::Capsule {
        radius: 8.0,
        half_height: 16.0,
    };
    let q = TraceQuery::shaped(
        Vec3::new(0.0, 0.0, 50.0),
        Vec3::new(0.0, 0.0, 200.0),
        capsule.clone(),
        1,
    )
    .unwrap();
    let got = reference_trace(&world, &q, &capsule);
    assert!(got.startsolid && !got.allsolid && got.fraction == 1.0);
    let q = TraceQuery::shaped(
        Vec3::new(0.0, 0.0, 50.0),
        Vec3::new(0.0, 0.0, 10.0),
        capsule.clone(),
        1,
    )
    .unwrap();
    let got = reference_trace(&world, &q, &capsule);
    assert!(got.startsolid && got.allsolid && got.fraction == 0.0);
}
