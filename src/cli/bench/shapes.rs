//! The shape part of `bspq bench`: the file's box queries re-used as a
//! sphere, capsule, cylinder and convex pyramid of the same size (as
//! `bspq accuracy` builds them), each timed plane-shifted, exact, and with
//! parry3d's `cast_shapes` of the same shape against the mesh.

use super::parry::{Baseline, ParryQuery};
use super::{measure, qps, ratio, Measured};
use bspq::accuracy::{shape_query, KINDS};
use bspq::math::Vec3;
use bspq::trace::Kernel as World;
use bspq::trace::{trace, ConvexHull, Scratch, Shape, TraceQuery};
use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

/// Target of the issue, single thread: plane-shifted sphere and capsule
/// sweeps at least this many times parry3d's.
pub const SHAPE_TARGET: f64 = 10.0;

/// The kinds the target applies to.
const TARGET_KINDS: [&str; 2] = ["sphere", "capsule"];

/// One shape kind's timings.
pub struct ShapeRow {
    pub kind: String,
    pub queries: usize,
    pub shifted: Measured,
    /// Exact mode, on the first `exact_queries` of them.
    pub exact: Measured,
    pub exact_queries: usize,
    pub parry: Option<Measured>,
}

impl ShapeRow {
    pub fn target(&self) -> Option<f64> {
        TARGET_KINDS
            .contains(&self.kind.as_str())
            .then_some(SHAPE_TARGET)
    }

    /// Plane-shifted over parry3d, wall clock.
    pub fn ratio(&self) -> Option<f64> {
        let p = self.parry.as_ref()?;
        Some(ratio(self.shifted.wall.median, p.wall.median))
    }

    /// Plane-shifted over parry3d, per CPU second.
    pub fn ratio_cpu(&self) -> Option<f64> {
        let p = self.parry.as_ref()?.cpu.as_ref()?;
        Some(ratio(self.shifted.cpu.as_ref()?.median, p.median))
    }

    pub fn report(&self) -> String {
        let cpu = |m: &Measured| m.cpu.as_ref().map_or(m.wall.median, |c| c.median);
        let parry = self
            .parry
            .as_ref()
            .map_or("-".to_owned(), |p| qps(p.wall.median));
        let ratio = match (self.ratio(), self.ratio_cpu()) {
            (Some(r), c) => {
                let goal = self.target().map_or(String::new(), |t| {
                    format!(
                        " (target >= {t}x: {})",
                        if r >= t { "met" } else { "NOT met" }
                    )
                });
                let by_cpu = c.map_or(String::new(), |c| format!(", by CPU time {c:.2}x"));
                format!("; {r:.2}x parry3d{goal}{by_cpu}")
            }
            _ => String::new(),
        };
        format!(
            "{:<10} {} plane-shifted (per CPU second {}), {} exact (on {}), {} parry3d{ratio}",
            self.kind,
            qps(self.shifted.wall.median),
            qps(cpu(&self.shifted)),
            qps(self.exact.wall.median),
            self.exact_queries,
            parry,
        )
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "queries": self.queries,
            "bspq_qps": self.shifted.wall.median,
            "bspq": super::stats_json(&self.shifted),
            "exact_qps": self.exact.wall.median,
            "exact": super::stats_json(&self.exact),
            "exact_queries": self.exact_queries,
            "parry_qps": self.parry.as_ref().map(|p| p.wall.median),
            "parry": self.parry.as_ref().map(super::stats_json),
            "ratio": self.ratio(),
            "ratio_cpu": self.ratio_cpu(),
            "target_ratio": self.target(),
        })
    }
}

fn trace_all(world: &World, queries: &[TraceQuery], scratch: &mut Scratch) {
    for q in queries {
        black_box(trace(world, black_box(q), scratch));
    }
}

/// Vertices of the many-vertex hull rows: points spread over the ellipsoid
/// inside each box (a Fibonacci lattice), so the support is found by
/// climbing the hull's edges rather than by scanning.
const HULL_POINTS: usize = 48;

/// The box query as a convex hull of [`HULL_POINTS`] points inside the box,
/// one hull per box size (a caller keeps its shapes); `scanned` drops the
/// edges, so the support scans every vertex.
fn hull_query(
    q: &TraceQuery,
    scanned: bool,
    hulls: &mut HashMap<[u32; 6], Arc<ConvexHull>>,
) -> Option<TraceQuery> {
    let (lo, hi) = (q.mins().to_array(), q.maxs().to_array());
    let key = [lo[0], lo[1], lo[2], hi[0], hi[1], hi[2]].map(f32::to_bits);
    let hull = match hulls.entry(key) {
        std::collections::hash_map::Entry::Occupied(seen) => seen.into_mut(),
        std::collections::hash_map::Entry::Vacant(slot) => {
            let (centre, half) = ((q.mins() + q.maxs()) * 0.5, (q.maxs() - q.mins()) * 0.5);
            let golden = std::f32::consts::PI * (3.0 - 5f32.sqrt());
            let points: Vec<Vec3> = (0..HULL_POINTS)
                .map(|i| {
                    let z = 1.0 - 2.0 * (i as f32 + 0.5) / HULL_POINTS as f32;
                    let r = (1.0 - z * z).sqrt();
                    let a = golden * i as f32;
                    centre + Vec3::new(r * a.cos(), r * a.sin(), z) * half
                })
                .collect();
            let hull = ConvexHull::new(&points).ok()?;
            slot.insert(Arc::new(if scanned { hull.scanned() } else { hull }))
        }
    };
    TraceQuery::shaped(q.start(), q.end(), Shape::Convex(hull.clone()), q.mask()).ok()
}

/// Times every shape kind on the box queries `boxes`.
pub fn run(
    world: &World,
    boxes: &[TraceQuery],
    baseline: Option<&Baseline>,
    exact_limit: usize,
    runs: usize,
    min_run: Duration,
    progress: &super::Progress,
) -> Vec<ShapeRow> {
    let mut scratch = Scratch::new();
    let mut rows = Vec::new();
    let mut hulls = HashMap::new();
    let hull_kinds = [("hull48", false), ("hull48-scan", true)];
    let kinds = KINDS
        .iter()
        .map(|k| (k.to_string(), None))
        .chain(hull_kinds.map(|(k, scanned)| (k.to_string(), Some(scanned))));
    for (kind, hull) in kinds {
        let shifted: Vec<TraceQuery> = boxes
            .iter()
            .filter_map(|q| match hull {
                None => shape_query(&kind, q, false),
                Some(scanned) => hull_query(q, scanned, &mut hulls),
            })
            .collect();
        if shifted.is_empty() {
            continue;
        }
        progress.stage(format!("timing {kind} sweeps"));
        let exact: Vec<TraceQuery> = shifted
            .iter()
            .take(exact_limit)
            .filter_map(|q| q.clone().with_exact(true).ok())
            .collect();
        let shifted_stats = measure(shifted.len(), runs, min_run, || {
            trace_all(world, &shifted, &mut scratch)
        });
        let exact_stats = measure(exact.len(), runs, min_run, || {
            trace_all(world, &exact, &mut scratch)
        });
        let parry = baseline.map(|b| {
            let queries: Vec<ParryQuery> = shifted.iter().map(ParryQuery::new).collect();
            measure(queries.len(), runs, min_run, || {
                for q in &queries {
                    black_box(b.query(black_box(q)));
                }
            })
        });
        rows.push(ShapeRow {
            kind,
            queries: shifted.len(),
            shifted: shifted_stats,
            exact: exact_stats,
            exact_queries: exact.len(),
            parry,
        });
    }
    rows
}
