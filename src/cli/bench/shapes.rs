//! The shape part of `bspq bench`: the file's box queries re-used as a
//! sphere, capsule, cylinder and convex pyramid of the same size (as
//! `bspq accuracy` builds them), each timed plane-shifted, exact, and with
//! parry3d's `cast_shapes` of the same shape against the mesh.

use super::parry::{Baseline, ParryQuery};
use super::{measure, qps, ratio, Measured};
use bspq::accuracy::{shape_query, KINDS};
use bspq::trace::{trace, Scratch, TraceQuery};
use bspq::world::World;
use std::hint::black_box;
use std::time::Duration;

/// Target of the issue, single thread: plane-shifted sphere and capsule
/// sweeps at least this many times parry3d's.
pub const SHAPE_TARGET: f64 = 10.0;

/// The kinds the target applies to.
const TARGET_KINDS: [&str; 2] = ["sphere", "capsule"];

/// One shape kind's timings.
pub struct ShapeRow {
    pub kind: &'static str,
    pub queries: usize,
    pub shifted: Measured,
    /// Exact mode, on the first `exact_queries` of them.
    pub exact: Measured,
    pub exact_queries: usize,
    pub parry: Option<Measured>,
}

impl ShapeRow {
    pub fn target(&self) -> Option<f64> {
        TARGET_KINDS.contains(&self.kind).then_some(SHAPE_TARGET)
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

/// Times every shape kind on the box queries `boxes`.
pub fn run(
    world: &World,
    boxes: &[TraceQuery],
    baseline: Option<&Baseline>,
    exact_limit: usize,
    runs: usize,
    min_run: Duration,
) -> Vec<ShapeRow> {
    let mut scratch = Scratch::new();
    let mut rows = Vec::new();
    for kind in KINDS {
        let shifted: Vec<TraceQuery> = boxes
            .iter()
            .filter_map(|q| shape_query(kind, q, false))
            .collect();
        if shifted.is_empty() {
            continue;
        }
        let exact: Vec<TraceQuery> = boxes
            .iter()
            .filter_map(|q| shape_query(kind, q, true))
            .take(exact_limit)
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
