//! Building trace queries and shapes: the constructors refuse what the
//! kernel cannot answer, and a convex hull's support (climbed or scanned)
//! matches the shape it stands for.

use bspq::math::Vec3;
use bspq::trace::shape::{MAX_CONVEX_POINTS, MAX_SHAPE_SIZE};
use bspq::trace::{ConvexHull, InvalidShape, InvalidTrace, Shape, TraceQuery, MAX_COORDINATE};
use std::sync::Arc;

const PLAYER: (Vec3, Vec3) = (Vec3::new(-15.0, -15.0, -24.0), Vec3::new(15.0, 15.0, 32.0));

#[test]
fn constructors_refuse_what_the_kernel_cannot_answer() {
    let far = Vec3::new(0.0, MAX_COORDINATE * 2.0, 0.0);
    for (bad, field) in [
        (TraceQuery::ray(Vec3::NAN, Vec3::ZERO, 1), "start"),
        (TraceQuery::ray(Vec3::ZERO, Vec3::INFINITY, 1), "end"),
        (TraceQuery::ray(far, Vec3::ZERO, 1), "start"),
        (
            TraceQuery::boxed(Vec3::ZERO, Vec3::ZERO, Vec3::NAN, PLAYER.1, 1),
            "mins",
        ),
        (
            TraceQuery::boxed(Vec3::ZERO, Vec3::ZERO, PLAYER.0, far, 1),
            "maxs",
        ),
    ] {
        assert_eq!(bad, Err(InvalidTrace::BadCoordinate { field }));
    }
    assert_eq!(
        TraceQuery::boxed(Vec3::ZERO, Vec3::X, PLAYER.1, PLAYER.0, 1),
        Err(InvalidTrace::MinsAboveMaxs)
    );
    let edge = Vec3::splat(MAX_COORDINATE);
    assert!(TraceQuery::boxed(-edge, edge, PLAYER.0, PLAYER.1, 1).is_ok());
}

#[test]
fn shapes_are_checked_when_put_in_a_query() {
    let bad = [
        Shape::Sphere { radius: 0.0 },
        Shape::Sphere { radius: f32::NAN },
        Shape::Capsule {
            radius: 8.0,
            half_height: -1.0,
        },
        Shape::Cylinder {
            radius: 8.0,
            half_height: 1.0e6,
        },
    ];
    for shape in bad {
        let q = TraceQuery::shaped(Vec3::ZERO, Vec3::X, shape.clone(), 1);
        assert!(matches!(q, Err(InvalidTrace::BadShape(_))), "{shape:?}");
    }
    let flat = Shape::Cylinder {
        radius: 8.0,
        half_height: 0.0,
    };
    let q = TraceQuery::shaped(Vec3::ZERO, Vec3::X, flat, 1).unwrap();
    assert_eq!(
        (q.mins(), q.maxs()),
        (Vec3::new(-8.0, -8.0, 0.0), Vec3::new(8.0, 8.0, 0.0))
    );
}

#[test]
fn a_moved_query_keeps_its_shape_and_checks_its_points() {
    let q = TraceQuery::boxed(Vec3::ZERO, Vec3::X, PLAYER.0, PLAYER.1, 1).unwrap();
    let moved = q.moved(Vec3::Y, Vec3::Z, 3).unwrap();
    assert_eq!(
        (moved.start(), moved.end(), moved.mask()),
        (Vec3::Y, Vec3::Z, 3)
    );
    assert_eq!((moved.mins(), moved.maxs()), PLAYER);
    assert_eq!(
        q.moved(Vec3::ZERO, Vec3::NAN, 1),
        Err(InvalidTrace::BadCoordinate { field: "end" })
    );
}

#[test]
fn exact_mode_needs_its_feature() {
    let q = TraceQuery::ray(Vec3::ZERO, Vec3::X, 1).unwrap();
    assert_eq!(q.clone().with_exact(true).is_ok(), cfg!(feature = "exact"));
    assert!(!q.with_exact(false).unwrap().exact());
}

#[test]
#[cfg(feature = "exact")]
fn convex_hulls_take_one_to_the_most_finite_points() {
    assert_eq!(ConvexHull::new(&[]), Err(InvalidShape::ConvexPointCount(0)));
    let many = vec![Vec3::ONE; MAX_CONVEX_POINTS + 1];
    assert_eq!(
        ConvexHull::new(&many),
        Err(InvalidShape::ConvexPointCount(MAX_CONVEX_POINTS + 1))
    );
    for bad in [Vec3::NAN, Vec3::splat(MAX_SHAPE_SIZE * 2.0)] {
        assert_eq!(
            ConvexHull::new(&[Vec3::ZERO, bad]),
            Err(InvalidShape::ConvexPoint)
        );
    }
    let point = ConvexHull::new(&[Vec3::new(1.0, 2.0, 3.0)]).unwrap();
    assert_eq!(
        Shape::Convex(Arc::new(point)).bounds().0,
        Vec3::new(1.0, 2.0, 3.0)
    );
}

/// The support of a sampled surface never exceeds the closed form, and
/// comes within the sampling error of it.
#[test]
fn closed_form_supports_match_sampled_surfaces() {
    let shapes = [
        Shape::Sphere { radius: 16.0 },
        Shape::Capsule {
            radius: 15.0,
            half_height: 12.0,
        },
        Shape::Cylinder {
            radius: 15.0,
            half_height: 28.0,
        },
    ];
    let mut samples = Vec::new();
    for i in 0..=24 {
        for j in 0..48 {
            let (theta, phi) = (
                std::f32::consts::PI * i as f32 / 24.0,
                std::f32::consts::TAU * j as f32 / 48.0,
            );
            samples.push(Vec3::new(
                theta.sin() * phi.cos(),
                theta.sin() * phi.sin(),
                theta.cos(),
            ));
        }
    }
    for shape in &shapes {
        // Points on the shape's surface.
        let surface: Vec<Vec3> = samples
            .iter()
            .map(|d| match shape {
                Shape::Sphere { radius } => *d * *radius,
                Shape::Capsule {
                    radius,
                    half_height,
                } => *d * *radius + Vec3::Z * half_height.copysign(d.z),
                Shape::Cylinder {
                    radius,
                    half_height,
                } => {
                    let xy = Vec3::new(d.x, d.y, 0.0).normalize_or_zero() * *radius;
                    xy + Vec3::Z * half_height.copysign(d.z)
                }
                Shape::Convex(_) => unreachable!(),
            })
            .collect();
        for n in &samples {
            let sampled = surface
                .iter()
                .fold(f32::NEG_INFINITY, |m, p| m.max(p.dot(*n)));
            let closed = shape.support(*n);
            assert!(sampled <= closed + 1e-3, "{shape:?} {n}");
            assert!(
                sampled >= closed - 1.5,
                "{shape:?} {n}: {sampled} vs {closed}"
            );
        }
    }
}

/// Climbing the hull's edges finds the same support as scanning every
/// vertex, for hulls of many sizes and directions all round.
#[test]
fn climbing_finds_the_scanned_support() {
    let mut seed = 0x2545_f491_u32;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        seed as f32 / u32::MAX as f32 * 2.0 - 1.0
    };
    for count in [4, 13, 20, 40, 64] {
        let points: Vec<Vec3> = (0..count)
            .map(|_| Vec3::new(next() * 30.0, next() * 20.0 + 5.0, next() * 40.0))
            .collect();
        let hull = ConvexHull::new(&points).unwrap();
        let scanned = hull.scanned();
        assert!(!scanned.climbs());
        for _ in 0..2000 {
            let n = Vec3::new(next(), next(), next()).normalize_or_zero();
            if n == Vec3::ZERO {
                continue;
            }
            let (a, b) = (hull.support(n), scanned.support(n));
            assert!((a - b).abs() <= 1e-4, "{count} points, {n}: {a} vs {b}");
        }
        for n in [Vec3::X, -Vec3::X, Vec3::Y, -Vec3::Y, Vec3::Z, -Vec3::Z] {
            assert_eq!(hull.support(n), scanned.support(n));
        }
    }
}

#[test]
fn convex_hull_drops_interior_points_and_centres() {
    let mut pts = Vec::new();
    for bits in 0..8 {
        pts.push(Vec3::new(
            if bits & 1 != 0 { 10.0 } else { -6.0 },
            if bits & 2 != 0 { 4.0 } else { -4.0 },
            if bits & 4 != 0 { 30.0 } else { -20.0 },
        ));
    }
    pts.push(Vec3::new(0.0, 0.0, 0.0));
    let hull = ConvexHull::new(&pts).unwrap();
    assert_eq!(hull.points().len(), 8);
    let shape = Shape::Convex(Arc::new(hull));
    assert_eq!(shape.centre(), Vec3::new(2.0, 0.0, 5.0));
    assert_eq!(
        shape.bounds(),
        (Vec3::new(-6.0, -4.0, -20.0), Vec3::new(10.0, 4.0, 30.0))
    );
}
