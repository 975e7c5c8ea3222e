//! How far plane-shifted (and exact-mode) shape sweeps are from the exact
//! reference: the measurement behind `bspq accuracy` and the shape tests.
//!
//! Shapes are derived from box queries (as the benchmarks re-use the oracle's
//! box queries): a sphere of the box's half-width, a capsule and a cylinder of
//! its half-width and half-height, and a pyramid (the box's bottom face and the
//! centre of its top), each centred where the box is.

use crate::math::Vec3;
use crate::trace::Kernel as World;
use crate::trace::{reference_trace, trace, Scratch, Shape, TraceQuery, TraceResult};
use std::sync::Arc;

/// The shape kinds measured, in report order.
pub const KINDS: [&str; 4] = ["sphere", "capsule", "cylinder", "convex"];

/// The shape of kind `kind` (one of [`KINDS`]) that stands in for the box
/// `mins..maxs`, and where its centre lies relative to the traced point.
pub fn shape_like_box(kind: &str, mins: Vec3, maxs: Vec3) -> Option<(Shape, Vec3)> {
    let centre = (mins + maxs) * 0.5;
    let half = (maxs - mins) * 0.5;
    let across = half.x.min(half.y);
    if across <= 0.0 {
        return None;
    }
    let shape = match kind {
        "sphere" => Shape::Sphere { radius: across },
        "capsule" => Shape::Capsule {
            radius: across,
            half_height: (half.z - across).max(0.0),
        },
        "cylinder" => Shape::Cylinder {
            radius: across,
            half_height: half.z,
        },
        "convex" => {
            let mut points: Vec<Vec3> = (0..4)
                .map(|i| {
                    Vec3::new(
                        if i & 1 != 0 { half.x } else { -half.x },
                        if i & 2 != 0 { half.y } else { -half.y },
                        -half.z,
                    )
                })
                .collect();
            points.push(Vec3::new(0.0, 0.0, half.z));
            Shape::Convex(Arc::new(crate::trace::ConvexHull::new(&points).ok()?))
        }
        _ => return None,
    };
    Some((shape, centre))
}

/// The shape query of kind `kind` made from a box query (`None` for rays,
/// and where the shape cannot be built).
pub fn shape_query(kind: &str, q: &TraceQuery, exact: bool) -> Option<TraceQuery> {
    let (shape, centre) = shape_like_box(kind, q.mins, q.maxs)?;
    let s = TraceQuery::shaped(q.start + centre, q.end + centre, shape, q.mask).ok()?;
    s.with_exact(exact).ok()
}

/// Error distribution of one mode against the reference.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ErrorStats {
    pub queries: usize,
    /// Queries the reference says hit something (fraction < 1).
    pub reference_hits: usize,
    /// Distances between end positions (units), over all queries.
    pub mean: f64,
    pub p99: f64,
    pub max: f64,
    /// A hit where the reference has none, and the other way round.
    pub false_hits: usize,
    pub false_misses: usize,
    /// `startsolid` differs.
    pub startsolid_differs: usize,
    /// End positions more than [`TOLERANCE`] apart.
    pub beyond_tolerance: usize,
}

/// What "the same answer" allows between exact answers (units of endpos).
pub const TOLERANCE: f64 = 0.01;

impl ErrorStats {
    pub fn from_pairs(pairs: &[(TraceResult, TraceResult)]) -> ErrorStats {
        let mut distances: Vec<f64> = pairs
            .iter()
            .map(|(got, want)| got.endpos.distance(want.endpos) as f64)
            .collect();
        distances.sort_by(f64::total_cmp);
        let n = distances.len();
        let at = |q: f64| {
            if n == 0 {
                0.0
            } else {
                distances[((n as f64 * q).ceil() as usize).clamp(1, n) - 1]
            }
        };
        ErrorStats {
            beyond_tolerance: distances.iter().filter(|d| **d > TOLERANCE).count(),
            queries: n,
            reference_hits: pairs.iter().filter(|(_, w)| w.fraction < 1.0).count(),
            mean: distances.iter().sum::<f64>() / n.max(1) as f64,
            p99: at(0.99),
            max: at(1.0),
            false_hits: pairs
                .iter()
                .filter(|(g, w)| g.fraction < 1.0 && w.fraction == 1.0)
                .count(),
            false_misses: pairs
                .iter()
                .filter(|(g, w)| g.fraction == 1.0 && w.fraction < 1.0)
                .count(),
            startsolid_differs: pairs
                .iter()
                .filter(|(g, w)| g.startsolid != w.startsolid)
                .count(),
        }
    }
}

/// Answers each shape query with the kernel and with the reference: `(got, want)` pairs.
pub fn compare(world: &World, queries: &[TraceQuery]) -> Vec<(TraceResult, TraceResult)> {
    let mut scratch = Scratch::new();
    queries
        .iter()
        .filter_map(|q| {
            let shape = q.shape.as_ref()?;
            Some((
                trace(world, q, &mut scratch),
                reference_trace(world, q, shape),
            ))
        })
        .collect()
}
