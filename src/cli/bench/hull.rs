//! `bspq bench --hull NAME`: the file's box queries of the hull's size, as
//! plane-shifted box sweeps and as hull traces through the onion tree, side
//! by side, with the nodes each walk visits.

use super::{counter_summary, measure, stats_line, Measured};
use anyhow::{bail, Result};
use bspq::math::Vec3;
use bspq::trace::Kernel as World;
use bspq::trace::{
    trace, trace_hull, trace_hull_with_stats, trace_with_stats, HullQuery, Scratch, TraceQuery,
};
use std::hint::black_box;
use std::time::Duration;

/// Both engines on the same queries.
pub struct HullRun {
    pub name: String,
    pub queries: usize,
    pub boxes: Measured,
    pub hulls: Measured,
    /// (mean, p99) nodes per query: box sweep, hull walk (box sweep nodes
    /// added for queries the hull path hands to it).
    pub box_nodes: (f64, u32),
    pub hull_nodes: (f64, u32),
    /// Share of queries answered by the box sweep (order-dependent cases).
    pub fallback_share: f64,
}

pub fn run(
    world: &World,
    name: &str,
    traces: &[TraceQuery],
    runs: usize,
    min_run: Duration,
) -> Result<HullRun> {
    let Some(spec) = world.info.hulls.iter().find(|h| h.name == name) else {
        bail!(
            "the world has no onion hull named {name:?} (compile it with --hull {name}=mins,maxs)"
        );
    };
    let (mins, maxs) = (Vec3::from_array(spec.mins), Vec3::from_array(spec.maxs));
    let boxes: Vec<TraceQuery> = traces
        .iter()
        .filter(|q| q.shape().is_none() && q.mins() == mins && q.maxs() == maxs)
        .cloned()
        .collect();
    if boxes.is_empty() {
        bail!("the query file holds no box of hull {name:?}'s size ({mins} .. {maxs})");
    }
    let hulls: Vec<HullQuery> = boxes
        .iter()
        .map(|q| HullQuery::new(world, name, q.start(), q.end(), q.mask()))
        .collect::<Result<_, _>>()?;
    let mut scratch = Scratch::new();
    let box_measured = measure(boxes.len(), runs, min_run, || {
        for q in &boxes {
            black_box(trace(world, black_box(q), &mut scratch));
        }
    });
    let hull_measured = measure(hulls.len(), runs, min_run, || {
        for q in &hulls {
            black_box(trace_hull(world, black_box(q), &mut scratch));
        }
    });
    let mut box_nodes = Vec::with_capacity(boxes.len());
    let mut hull_nodes = Vec::with_capacity(boxes.len());
    let mut fallbacks = 0usize;
    for (b, h) in boxes.iter().zip(&hulls) {
        let (_, bs) = trace_with_stats(world, b, &mut scratch);
        let (_, hs) = trace_hull_with_stats(world, h, &mut scratch);
        box_nodes.push(bs.nodes);
        hull_nodes.push(hs.nodes + if hs.box_fallback { bs.nodes } else { 0 });
        fallbacks += hs.box_fallback as usize;
    }
    Ok(HullRun {
        name: name.to_owned(),
        queries: boxes.len(),
        boxes: box_measured,
        hulls: hull_measured,
        box_nodes: counter_summary(&mut box_nodes),
        hull_nodes: counter_summary(&mut hull_nodes),
        fallback_share: fallbacks as f64 / boxes.len() as f64,
    })
}

impl HullRun {
    pub fn report(&self) -> Vec<String> {
        vec![
            stats_line(&format!("box {}", self.name), &self.boxes),
            stats_line(&format!("hull {}", self.name), &self.hulls),
            format!(
                "hull       {} queries of hull {:?}: {:.2}x the box sweep; nodes per query {:.1} (p99 {}) hull vs {:.1} (p99 {}) box; {:.1}% answered by the box sweep (order-dependent)",
                self.queries,
                self.name,
                self.hulls.wall.median / self.boxes.wall.median,
                self.hull_nodes.0,
                self.hull_nodes.1,
                self.box_nodes.0,
                self.box_nodes.1,
                100.0 * self.fallback_share,
            ),
        ]
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name,
            "queries": self.queries,
            "bspq_box_qps": self.boxes.wall.median,
            "bspq_hull_qps": self.hulls.wall.median,
            "box": super::stats_json(&self.boxes),
            "hull": super::stats_json(&self.hulls),
            "hull_over_box": self.hulls.wall.median / self.boxes.wall.median,
            "box_nodes": {"mean": self.box_nodes.0, "p99": self.box_nodes.1},
            "hull_nodes": {"mean": self.hull_nodes.0, "p99": self.hull_nodes.1},
            "fallback_share": self.fallback_share,
        })
    }
}
