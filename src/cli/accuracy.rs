//! `bspq accuracy`: plane-shifted and exact-mode shape sweeps against the
//! exact reference (every brush swept by GJK), on box queries re-used as
//! spheres, capsules, cylinders and pyramids of the same size.

use super::WorldArgs;
use anyhow::Context;
use bspq::accuracy::{compare, shape_query, ErrorStats, KINDS};
use bspq::conformance::read_lines;
use bspq::query::{Query, QueryLine};
use bspq::trace::{reference_trace, trace, Scratch, TraceQuery};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Args)]
pub struct AccuracyArgs {
    #[command(flatten)]
    world: WorldArgs,
    /// Query lines (.jsonl or .jsonl.gz); box traces are re-used, the rest skipped.
    #[arg(long)]
    queries: PathBuf,
    /// Use at most this many box queries.
    #[arg(long, default_value_t = 2000)]
    limit: usize,
    /// Print up to this many exact-mode answers more than 0.01 units off (and
    /// plane-shifted misses where the reference hits).
    #[arg(long, default_value_t = 0)]
    show: usize,
}

pub fn run(args: AccuracyArgs) -> anyhow::Result<ExitCode> {
    let loaded = args.world.open()?;
    let world = loaded.view();
    let lines = read_lines(&args.queries)
        .with_context(|| format!("cannot read {}", args.queries.display()))?;
    let boxes: Vec<TraceQuery> = lines
        .iter()
        .filter_map(|l| match QueryLine::parse(l).and_then(|q| q.validate()) {
            Ok(Query::Trace(q)) if q.shape.is_none() && q.mins != q.maxs => Some(q),
            _ => None,
        })
        .take(args.limit)
        .collect();
    anyhow::ensure!(
        !boxes.is_empty(),
        "{} holds no box query",
        args.queries.display()
    );
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{} box queries from {} ({} brushes{})",
        boxes.len(),
        args.queries.display(),
        world.brushes.len(),
        if world.patches.is_empty() {
            String::new()
        } else {
            format!(
                "; {} patches are not in the reference: use --no-curves",
                world.patches.len()
            )
        }
    )?;
    writeln!(
        out,
        "{:9} {:13} {:>6} {:>6} {:>9} {:>9} {:>9} {:>6} {:>6} {:>6} {:>6} {:>12}",
        "shape",
        "mode",
        "n",
        "hits",
        "mean",
        "p99",
        "max",
        ">0.01",
        "f.hit",
        "f.miss",
        "solid",
        "queries/s"
    )?;
    let mut scratch = Scratch::new();
    for kind in KINDS {
        for (mode, exact) in [("plane-shifted", false), ("exact", true)] {
            let queries: Vec<TraceQuery> = boxes
                .iter()
                .filter_map(|q| shape_query(kind, q, exact))
                .collect();
            let timer = Instant::now();
            for q in &queries {
                std::hint::black_box(trace(&world, q, &mut scratch));
            }
            let rate = queries.len() as f64 / timer.elapsed().as_secs_f64().max(1e-9);
            let pairs = compare(&world, &queries);
            // Exact answers off by more than 0.01; plane-shifted misses of exact hits.
            let off = |g: &bspq::trace::TraceResult, w: &bspq::trace::TraceResult| {
                if exact {
                    g.endpos.distance(w.endpos) > 0.01
                } else {
                    g.fraction == 1.0 && w.fraction < 1.0
                }
            };
            {
                for ((got, want), q) in pairs
                    .iter()
                    .zip(&queries)
                    .filter(|((g, w), _)| off(g, w))
                    .take(args.show)
                {
                    let line = QueryLine {
                        start: Some(q.start.to_array().map(f64::from)),
                        end: Some(q.end.to_array().map(f64::from)),
                        mask: Some(q.mask),
                        shape: q.shape.as_ref().map(bspq::query::ShapeLine::from_shape),
                        exact: Some(exact),
                        ..Default::default()
                    };
                    writeln!(
                        out,
                        "  off: {}\n    got  {got:?}\n    want {want:?}",
                        serde_json::to_string(&line)?
                    )?;
                }
            }
            let s = ErrorStats::from_pairs(&pairs);
            writeln!(
                out,
                "{kind:9} {mode:13} {:>6} {:>6} {:>9.4} {:>9.4} {:>9.4} {:>6} {:>6} {:>6} {:>6} {:>12.0}",
                s.queries,
                s.reference_hits,
                s.mean,
                s.p99,
                s.max,
                s.beyond_tolerance,
                s.false_hits,
                s.false_misses,
                s.startsolid_differs,
                rate
            )?;
        }
        let queries: Vec<TraceQuery> = boxes
            .iter()
            .filter_map(|q| shape_query(kind, q, false))
            .collect();
        let timer = Instant::now();
        for q in &queries {
            if let Some(shape) = &q.shape {
                std::hint::black_box(reference_trace(&world, q, shape));
            }
        }
        let rate = queries.len() as f64 / timer.elapsed().as_secs_f64().max(1e-9);
        writeln!(
            out,
            "{kind:9} {:13} {:>6} {:>79.0}",
            "reference",
            queries.len(),
            rate
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
