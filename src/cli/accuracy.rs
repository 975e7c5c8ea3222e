//! `bspq accuracy`: plane-shifted and exact-mode shape sweeps against the
//! exact reference (every brush swept by GJK), on box queries re-used as
//! spheres, capsules, cylinders and pyramids of the same size.

use super::WorldArgs;
use anyhow::Context;
use bspq::accuracy::{compare, shape_query, ErrorStats, KINDS};
use bspq::compile::bevels::{self, BevelOptions};
use bspq::conformance::read_query_lines;
use bspq::query::{Query, QueryLine};
use bspq::trace::Kernel as World;
use bspq::trace::{reference_trace, trace, Scratch, TraceQuery, TraceResult};
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
    /// Skip the table of plane-shifted error per shape-bevel setting.
    #[arg(long)]
    no_bevel_table: bool,
}

/// The shape-bevel settings the bevel table compares.
fn bevel_variants() -> Vec<(String, BevelOptions)> {
    let mut out = vec![
        ("none".to_owned(), BevelOptions::none()),
        (
            "caps".to_owned(),
            BevelOptions {
                edge_angle: None,
                caps: true,
            },
        ),
    ];
    for angle in [60.0, 45.0, 30.0, 20.0] {
        out.push((
            format!("edges {angle}"),
            BevelOptions {
                edge_angle: Some(angle),
                caps: false,
            },
        ));
    }
    for angle in [45.0, 30.0] {
        out.push((
            format!("edges {angle}+caps"),
            BevelOptions {
                edge_angle: Some(angle),
                caps: true,
            },
        ));
    }
    out
}

/// Queries per second of plane-shifted traces (repeated to at least 100 ms).
fn shifted_rate(world: &World, queries: &[TraceQuery], scratch: &mut Scratch) -> f64 {
    let timer = Instant::now();
    let mut done = 0usize;
    while done == 0 || timer.elapsed().as_secs_f64() < 0.1 {
        for q in queries {
            std::hint::black_box(trace(world, q, scratch));
        }
        done += queries.len();
    }
    done as f64 / timer.elapsed().as_secs_f64().max(1e-9)
}

/// Plane-shifted error against the reference with each bevel setting.
/// Each setting gets its own world: its bevels, and the kernel's lanes of
/// them (the loaded world's lanes hold the loaded bevels).
fn bevel_table(out: &mut impl Write, world: &World, boxes: &[TraceQuery]) -> anyhow::Result<()> {
    writeln!(
        out,
        "\nplane-shifted error by shape-bevel setting ({} brushes, {} brush sides)",
        world.brushes.len(),
        world.brush_sides.len()
    )?;
    writeln!(
        out,
        "{:9} {:16} {:>6} {:>5} {:>9} {:>9} {:>9} {:>6} {:>6} {:>6} {:>12}",
        "shape",
        "bevels",
        "planes",
        "caps",
        "mean",
        "p99",
        "max",
        "f.hit",
        "f.miss",
        "solid",
        "queries/s"
    )?;
    // Per shape kind: its queries and the reference's answers.
    let kinds: Vec<(Vec<TraceQuery>, Vec<TraceResult>)> = KINDS
        .iter()
        .map(|&kind| {
            let queries: Vec<TraceQuery> = boxes
                .iter()
                .filter_map(|q| shape_query(kind, q, false))
                .collect();
            let reference = queries
                .iter()
                .filter_map(|q| Some(reference_trace(world, q, q.shape()?)))
                .collect();
            (queries, reference)
        })
        .collect();
    // Rows are printed by kind, but measured by setting: one kernel at a time.
    let variants = bevel_variants();
    let mut rows = vec![vec![String::new(); variants.len()]; KINDS.len()];
    let mut kernel = world.accel.clone();
    let mut scratch = Scratch::new();
    for (v, (name, options)) in variants.iter().enumerate() {
        let (ranges, bevels, counts) = bevels::build(world, options);
        let bevelled = bspq::world::World {
            shape_bevel_ranges: &ranges,
            shape_bevels: &bevels,
            ..world.world
        };
        kernel.set_shape_bevels(&bevelled);
        let variant = World::new(bevelled, &kernel);
        for (k, (kind, (queries, reference))) in KINDS.iter().zip(&kinds).enumerate() {
            let pairs: Vec<(TraceResult, TraceResult)> = queries
                .iter()
                .zip(reference)
                .map(|(q, want)| (trace(&variant, q, &mut scratch), *want))
                .collect();
            let s = ErrorStats::from_pairs(&pairs);
            let rate = shifted_rate(&variant, queries, &mut scratch);
            rows[k][v] = format!(
                "{kind:9} {name:16} {:>6} {:>5} {:>9.4} {:>9.4} {:>9.4} {:>6} {:>6} {:>6} {:>12.0}",
                counts.edge + counts.caps,
                counts.caps,
                s.mean,
                s.p99,
                s.max,
                s.false_hits,
                s.false_misses,
                s.startsolid_differs,
                rate
            );
        }
    }
    for row in rows.iter().flatten() {
        writeln!(out, "{row}")?;
    }
    Ok(())
}

pub fn run(args: AccuracyArgs) -> anyhow::Result<ExitCode> {
    let loaded = args.world.open()?;
    let world = loaded.view();
    let lines = read_query_lines(&args.queries)
        .with_context(|| format!("cannot read {}", args.queries.display()))?;
    let boxes: Vec<TraceQuery> = lines
        .into_iter()
        .filter_map(|l| match l.and_then(|l| QueryLine::parse(&l)?.validate()) {
            Ok(Query::Trace(q)) if q.shape().is_none() && q.mins() != q.maxs() => Some(q),
            _ => None,
        })
        .take(args.limit)
        .collect();
    anyhow::ensure!(
        !boxes.is_empty(),
        "{} holds no box query",
        args.queries.display()
    );
    let mut out = super::report_out();
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
                        start: Some(q.start().to_array().map(f64::from)),
                        end: Some(q.end().to_array().map(f64::from)),
                        mask: Some(q.mask()),
                        shape: q.shape().map(bspq::query::ShapeLine::from_shape),
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
            if let Some(shape) = &q.shape() {
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
    if !args.no_bevel_table {
        bevel_table(&mut out, &world, &boxes)?;
    }
    Ok(ExitCode::SUCCESS)
}
