//! `bspq check`: the fast paths against the walk over the source's tree, on
//! random moves through one world, before that world goes to production.
//!
//! The walk over the map's own tree is what the conformance tests hold to
//! the reference answers; the fast trace, any-hit and batches must give
//! its answers bit for bit. The conformance data covers the maps it was
//! made on; this command covers any map. The same moves as spheres,
//! capsules, cylinders and convex hulls hold the plane-shifted fast trace
//! to the shape walk the same way.

use super::WorldArgs;
use anyhow::{bail, Context};
use bspq::accuracy::{shape_query, KINDS};
use bspq::conformance::read_query_lines;
use bspq::query::{Query, QueryLine, ShapeLine};
use bspq::trace::Kernel as World;
use bspq::trace::{
    any_hit, any_hit_queries, point_contents, trace, trace_queries, BatchOptions, Scratch,
    TraceQuery, TraceResult,
};
use clap::Args;
use glam::Vec3;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args)]
pub struct CheckArgs {
    #[command(flatten)]
    world: WorldArgs,
    /// Random moves to trace (rays and boxes of several sizes and masks).
    #[arg(long, default_value_t = 20_000, value_parser = super::count_up_to::<MAX_MOVES>)]
    moves: usize,
    /// Seed of the moves (the same seed gives the same moves).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Check the moves of this query file (JSON lines, plain or gzipped;
    /// points and bad lines are skipped) instead of random ones.
    #[arg(long, conflicts_with_all = ["moves", "seed"])]
    queries: Option<PathBuf>,
}

/// Most random moves: a million hold about 330 MB (and take seconds).
const MAX_MOVES: usize = 1_000_000;

/// Box sizes: a ray, Quake 3's standing and crouching player, a small
/// projectile, an uneven box.
const BOXES: [([f32; 3], [f32; 3]); 5] = [
    ([0.0; 3], [0.0; 3]),
    ([-15.0, -15.0, -24.0], [15.0, 15.0, 32.0]),
    ([-15.0, -15.0, -24.0], [15.0, 15.0, 16.0]),
    ([-4.0; 3], [4.0; 3]),
    ([-1.0, -2.0, -3.0], [5.0, 2.0, 1.0]),
];

/// Masks: solid, player solid, shot, water and lava, everything.
const MASKS: [u32; 5] = [1, 0x0201_0001, 0x0600_0001, 0x38, u32::MAX];

pub fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let loaded = args.world.open()?;
    let world = loaded.view();
    let moves = match &args.queries {
        Some(path) => file_moves(path)?,
        None => random_moves(&world, &mut fastrand::Rng::with_seed(args.seed), args.moves)?,
    };
    let mut failed = compare(&world, "", &moves);
    // The same boxes as spheres, capsules, cylinders and convex hulls:
    // plane-shifted sweeps take the same fast search and the walk too.
    let shapes: Vec<TraceQuery> = moves
        .iter()
        .enumerate()
        .filter_map(|(i, q)| shape_query(KINDS[i % KINDS.len()], q, false))
        .collect();
    failed |= compare(&world, "shapes: ", &shapes);
    let (brushes, facets) = world.accel.unlisted.counts();
    println!(
        "unlisted pieces                      {brushes} brushes, {facets} facets (contacts near them take the walk)"
    );
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Traces `moves` through the walk and every fast path, prints a line per
/// path (`label` first) and the first difference; true when any differ.
fn compare(world: &World, label: &str, moves: &[TraceQuery]) -> bool {
    let walk = world.reference();
    let mut scratch = Scratch::new();
    let expected: Vec<TraceResult> = moves
        .iter()
        .map(|q| trace(&walk, q, &mut scratch))
        .collect();
    let touching = expected.iter().filter(|r| r.fraction < 1.0).count();
    println!(
        "{:<37}{} ({:.0} % touch something)",
        format!("{label}moves"),
        moves.len(),
        100.0 * touching as f64 / moves.len().max(1) as f64
    );
    let mut failed = false;
    let mut report = |what: &str, wrong: Vec<usize>, got: &dyn Fn(usize) -> String| {
        println!(
            "{:<36} {} of {} differ",
            format!("{label}{what}"),
            wrong.len(),
            moves.len()
        );
        if let Some(&i) = wrong.first() {
            failed = true;
            println!("  first: {}", query_line(&moves[i]));
            println!("  walk:  {:?}", expected[i]);
            println!("  got:   {}", got(i));
        }
    };
    let fast: Vec<TraceResult> = moves
        .iter()
        .map(|q| trace(world, q, &mut scratch))
        .collect();
    report("fast trace vs walk", differing(&fast, &expected), &|i| {
        format!("{:?}", fast[i])
    });
    // Where the full trace searches the eight-wide trees (AVX2), the
    // four-wide search that other processors take, too.
    if world.accel.bvh.wide.present() {
        let kernel = world.accel.without_wide_trees();
        let four = World {
            accel: &kernel,
            ..*world
        };
        let narrow: Vec<TraceResult> = moves
            .iter()
            .map(|q| trace(&four, q, &mut scratch))
            .collect();
        report(
            "fast trace 4-wide vs walk",
            differing(&narrow, &expected),
            &|i| format!("{:?}", narrow[i]),
        );
    }
    let hits: Vec<bool> = moves
        .iter()
        .map(|q| any_hit(world, q, &mut scratch))
        .collect();
    let wrong = (0..moves.len())
        .filter(|&i| hits[i] != (expected[i].fraction < 1.0))
        .collect();
    report("any-hit vs walk", wrong, &|i| format!("hit: {}", hits[i]));
    let hits = any_hit_queries(world, moves, &BatchOptions::single_thread());
    let wrong = (0..moves.len())
        .filter(|&i| hits[i] != (expected[i].fraction < 1.0))
        .collect();
    report("any-hit batch vs walk", wrong, &|i| {
        format!("hit: {}", hits[i])
    });
    for (name, options) in [
        ("batch, 1 thread", BatchOptions::single_thread()),
        (
            "batch, 2 threads",
            BatchOptions {
                threads: 2,
                min_per_thread: 64,
            },
        ),
    ] {
        let batch = trace_queries(world, moves, &options);
        report(
            &format!("{name} vs walk"),
            differing(&batch, &expected),
            &|i| format!("{:?}", batch[i]),
        );
    }
    failed
}

/// Indices whose answers differ in any bit.
fn differing(got: &[TraceResult], expected: &[TraceResult]) -> Vec<usize> {
    let bits = |r: &TraceResult| {
        (
            [r.fraction, r.dist].map(f32::to_bits),
            r.endpos.to_array().map(f32::to_bits),
            r.normal.to_array().map(f32::to_bits),
            (r.startsolid, r.allsolid, r.contents, r.surface_flags),
        )
    };
    (0..got.len())
        .filter(|&i| bits(&got[i]) != bits(&expected[i]))
        .collect()
}

/// The moves (rays, boxes and shapes, not points) of a query file.
fn file_moves(path: &Path) -> anyhow::Result<Vec<TraceQuery>> {
    let lines = read_query_lines(path)
        .with_context(|| format!("cannot read queries from {}", path.display()))?;
    let moves: Vec<TraceQuery> = lines
        .into_iter()
        .filter_map(
            |line| match line.and_then(|line| QueryLine::parse(&line)?.validate()) {
                Ok(Query::Trace(q)) => Some(q),
                _ => None,
            },
        )
        .collect();
    if moves.is_empty() {
        bail!("{} holds no valid move", path.display());
    }
    Ok(moves)
}

/// The move as a query line for `bspq trace`.
pub(super) fn query_line(q: &TraceQuery) -> String {
    let v = |v: Vec3| v.to_array().map(f64::from);
    let line = QueryLine {
        start: Some(v(q.start())),
        end: Some(v(q.end())),
        mins: Some(v(q.mins())),
        maxs: Some(v(q.maxs())),
        mask: Some(q.mask()),
        shape: q.shape().map(ShapeLine::from_shape),
        ..Default::default()
    };
    // Serialising plain numbers cannot fail.
    serde_json::to_string(&line).unwrap_or_default()
}

/// Moves from points in the world's bounds on the 1/8-unit grid (most in
/// empty space), straight down, along an axis, level or any way, from 1
/// to 4 000 units long, and slides along the planes some of them hit.
fn random_moves(
    world: &World,
    rng: &mut fastrand::Rng,
    count: usize,
) -> anyhow::Result<Vec<TraceQuery>> {
    let (lo, hi) = (Vec3::from(world.mins), Vec3::from(world.maxs));
    let snap = |v: Vec3| (v * 8.0).round() / 8.0;
    let point =
        |rng: &mut fastrand::Rng| snap(lo + (hi - lo) * Vec3::new(rng.f32(), rng.f32(), rng.f32()));
    let mut empty = Vec::new();
    for _ in 0..count.min(50_000) * 2 {
        let p = point(rng);
        if point_contents(world, p) & 1 == 0 {
            empty.push(p);
        }
    }
    let mut moves = Vec::with_capacity(count);
    while moves.len() < count {
        let start = if !empty.is_empty() && rng.f32() < 0.85 {
            empty[rng.usize(..empty.len())]
        } else {
            point(rng)
        };
        let length = [
            1.0 + 63.0 * rng.f32(),
            64.0 + 448.0 * rng.f32(),
            512.0 + 3488.0 * rng.f32(),
        ][rng.usize(..3)];
        let dir = match rng.usize(..4) {
            0 => Vec3::NEG_Z,
            1 => [Vec3::X, Vec3::Y, Vec3::Z, Vec3::NEG_X, Vec3::NEG_Y][rng.usize(..5)],
            2 => Vec3::new(rng.f32() - 0.5, rng.f32() - 0.5, 0.0).normalize_or(Vec3::X),
            _ => Vec3::new(rng.f32() - 0.5, rng.f32() - 0.5, rng.f32() - 0.5).normalize_or(Vec3::Z),
        };
        let end = snap(start + dir * length);
        let (mins, maxs) = BOXES[rng.usize(..BOXES.len())];
        let mask = MASKS[rng.usize(..MASKS.len())];
        let q = TraceQuery::boxed(start, end, Vec3::from(mins), Vec3::from(maxs), mask)?;
        // Every fourth move that hits something also slides along the plane.
        let slide = moves.len() % 4 == 0 && moves.len() + 1 < count;
        moves.push(q.clone());
        if slide {
            let r = trace(world, &q, &mut Scratch::new());
            if r.fraction > 0.0 && r.fraction < 1.0 && !r.startsolid {
                let rest = q.end() - r.endpos;
                let along = rest - r.normal * rest.dot(r.normal);
                moves.push(q.moved(r.endpos, snap(r.endpos + along), q.mask())?);
            }
        }
    }
    Ok(moves)
}
