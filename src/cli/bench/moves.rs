//! `bspq bench --moves [FILE]`: the file's `{"slide":…}` lines run as
//! movement frames (step-slide moves, and the plain slide moves the file
//! asks for) through the world, side by side with box sweeps of the same
//! boxes: each move's own first sweep, the body swept from its origin along
//! its velocity for the frame. Runs alternate, and the move's cost over a
//! sweep's is the median of the runs' ratios.
//!
//! An untimed pass records the traces each move makes (through a collider
//! that records and passes each sweep on to the world), so that the timed
//! moves run on the world itself, without a counter; the recorded traces
//! are timed too, replayed as box sweeps, which splits a move's cost into
//! its traces' and the movement's own.

use super::{qps, ratio, stats_line, Measured, Progress, Stats, World};
use anyhow::{bail, Context, Result};
use bspq::conformance::read_query_lines;
use bspq::math::Vec3;
use bspq::movement::{self, Body, Collider, SlideQuery};
use bspq::query::{MovementQuery, QueryLine};
use bspq::trace::{trace, Scratch, TraceQuery, TraceResult};
use std::cell::RefCell;
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

pub struct MovesRun {
    pub file: String,
    /// Slide lines timed, and how many of them are step-slide moves.
    pub moves: usize,
    pub step_moves: usize,
    /// Other lines of the file (ground probes, predictions) and refused ones.
    pub skipped: usize,
    pub moved: Measured,
    pub sweeps: Measured,
    /// The traces the moves made, recorded and replayed as box sweeps.
    pub replayed: Measured,
    /// Mean traces one move makes, its ground probe at the end included.
    pub traces_per_move: f64,
    /// Median over the runs of one move's time over one sweep's time.
    pub move_over_sweep: f64,
    /// The same over one of the moves' own traces, replayed.
    pub move_over_trace: f64,
}

/// The world, recording the sweeps it is asked for.
struct Recording<'w, 'a> {
    world: &'w World<'a>,
    traces: RefCell<Vec<TraceQuery>>,
}

impl Collider for Recording<'_, '_> {
    fn sweep(
        &self,
        body: &Body,
        start: Vec3,
        end: Vec3,
        scratch: &mut Scratch,
    ) -> (TraceResult, u32) {
        if let Ok(q) = TraceQuery::boxed(start, end, body.mins(), body.maxs(), body.mask()) {
            self.traces.borrow_mut().push(q);
        }
        self.world.sweep(body, start, end, scratch)
    }
}

/// The slide lines of `path` as checked queries; the count of other lines.
fn read_moves(world: &World, path: &Path) -> Result<(Vec<SlideQuery>, usize)> {
    let lines = read_query_lines(path)
        .with_context(|| format!("cannot read moves from {}", path.display()))?;
    let mut moves = Vec::new();
    let mut skipped = 0usize;
    for line in lines {
        let query = line
            .ok()
            .and_then(|text| QueryLine::parse(&text).ok())
            .and_then(|line| line.movement(Some(world)))
            .and_then(|query| query.ok());
        match query {
            Some(MovementQuery::Slide(q)) => moves.push(q),
            _ => skipped += 1,
        }
    }
    Ok((moves, skipped))
}

/// A move's first sweep: its body from its origin along its velocity for
/// the frame. `None` when the end leaves the kernel's range.
fn first_sweep(q: &SlideQuery) -> Option<TraceQuery> {
    let motion = q.motion();
    let end = motion.origin + motion.velocity * q.frametime();
    let body = q.body();
    TraceQuery::boxed(motion.origin, end, body.mins(), body.maxs(), body.mask()).ok()
}

pub fn run(
    world: &World,
    path: &Path,
    runs: usize,
    min_run: Duration,
    progress: &Progress,
) -> Result<MovesRun> {
    progress.stage("reading the moves");
    let (moves, skipped) = read_moves(world, path)?;
    if moves.is_empty() {
        bail!("{} holds no valid {{\"slide\":…}} line", path.display());
    }
    let sweeps: Vec<TraceQuery> = moves.iter().filter_map(first_sweep).collect();
    let step_moves = moves.iter().filter(|q| q.step()).count();

    progress.stage("recording the traces of each move");
    let mut scratch = Scratch::new();
    let recording = Recording {
        world,
        traces: RefCell::new(Vec::new()),
    };
    for q in &moves {
        movement::slide(&recording, q, &mut scratch);
    }
    let traces = recording.traces.into_inner();
    let traces_per_move = traces.len() as f64 / moves.len() as f64;

    progress.stage("timing moves and sweeps");
    let mut move_pass = |scratch: &mut Scratch| {
        for q in &moves {
            black_box(movement::slide(world, black_box(q), scratch));
        }
    };
    let sweep_pass = |list: &[TraceQuery], scratch: &mut Scratch| {
        for q in list {
            black_box(trace(world, black_box(q), scratch));
        }
    };
    let mut first_pass = |scratch: &mut Scratch| sweep_pass(&sweeps, scratch);
    let mut trace_pass = |scratch: &mut Scratch| sweep_pass(&traces, scratch);
    let once = |pass: &mut dyn FnMut(&mut Scratch), scratch: &mut Scratch| {
        let t = Instant::now();
        pass(scratch);
        t.elapsed().max(Duration::from_nanos(1))
    };
    let move_once = once(&mut move_pass, &mut scratch);
    let sweep_once = once(&mut first_pass, &mut scratch);
    let trace_once = once(&mut trace_pass, &mut scratch);
    let passes_for =
        |one: Duration| (min_run.as_secs_f64() / one.as_secs_f64()).ceil().max(1.0) as usize;
    let (move_passes, sweep_passes, trace_passes) = (
        passes_for(move_once),
        passes_for(sweep_once),
        passes_for(trace_once),
    );
    let (mut move_qps, mut sweep_qps, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let (mut trace_qps, mut trace_ratios) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let mut timed = |pass: &mut dyn FnMut(&mut Scratch), passes: usize, count: usize| {
            let t = Instant::now();
            for _ in 0..passes {
                pass(&mut scratch);
            }
            (count * passes) as f64 / t.elapsed().as_secs_f64()
        };
        let m = timed(&mut move_pass, move_passes, moves.len());
        let s = timed(&mut first_pass, sweep_passes, sweeps.len());
        let t = timed(&mut trace_pass, trace_passes, traces.len());
        move_qps.push(m);
        sweep_qps.push(s);
        trace_qps.push(t);
        ratios.push(ratio(s, m));
        trace_ratios.push(ratio(t, m));
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    Ok(MovesRun {
        file: path.display().to_string(),
        moves: moves.len(),
        step_moves,
        skipped,
        moved: Measured {
            wall: Stats::from_runs(move_qps, move_passes),
            cpu: None,
        },
        sweeps: Measured {
            wall: Stats::from_runs(sweep_qps, sweep_passes),
            cpu: None,
        },
        replayed: Measured {
            wall: Stats::from_runs(trace_qps, trace_passes),
            cpu: None,
        },
        traces_per_move,
        move_over_sweep: median(ratios),
        move_over_trace: median(trace_ratios),
    })
}

impl MovesRun {
    /// A move's time over the time of as many sweeps as it traces: what
    /// the movement adds to its traces (1: nothing).
    pub fn overhead(&self) -> f64 {
        self.move_over_sweep / self.traces_per_move.max(f64::MIN_POSITIVE)
    }

    /// A move's time over the time of its own traces replayed: what the
    /// movement's own work adds to them (1: nothing).
    pub fn trace_overhead(&self) -> f64 {
        self.move_over_trace / self.traces_per_move.max(f64::MIN_POSITIVE)
    }

    pub fn report(&self) -> Vec<String> {
        vec![
            stats_line("moves", &self.moved),
            stats_line("move sweep", &self.sweeps),
            stats_line("move trace", &self.replayed),
            format!(
                "movement   {} moves ({} step-slide, {} other lines skipped) from {}: {:.2} traces per move, a move {:.2}x a sweep's time, overhead {:.2} (move time / traces per move x sweep time; {} moves, {} sweeps); over its own traces replayed {:.2}",

                self.moves,
                self.step_moves,
                self.skipped,
                self.file,
                self.traces_per_move,
                self.move_over_sweep,
                self.overhead(),
                qps(self.moved.wall.median),
                qps(self.sweeps.wall.median),
                self.trace_overhead(),
            ),
        ]
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "file": self.file,
            "moves": self.moves,
            "step_moves": self.step_moves,
            "skipped": self.skipped,
            "moves_qps": self.moved.wall.median,
            "sweeps_qps": self.sweeps.wall.median,
            "traces_per_move": self.traces_per_move,
            "move_over_sweep": self.move_over_sweep,
            "overhead": self.overhead(),
            "traces_qps": self.replayed.wall.median,
            "move_over_trace": self.move_over_trace,
            "trace_overhead": self.trace_overhead(),
        })
    }
}
