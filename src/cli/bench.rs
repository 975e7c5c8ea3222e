//! `bspq bench`: kernel throughput on a query file, side by side with parry3d
//! on the same queries in the same process.

mod hull;
mod mesh_obj;
mod moves;
mod parry;
mod scene;
mod shapes;

use super::WorldArgs;
use anyhow::{bail, Context};
use bspq::conformance::read_query_lines;
use bspq::query::{Query, QueryLine};
use bspq::trace::sieve::Sieve;
use bspq::trace::Kernel as World;
use bspq::trace::{
    any_hit, any_hit_queries, any_hit_with_stats, point_contents, trace, trace_queries,
    trace_with_stats, BatchOptions, Scratch, TraceQuery, WalkStats,
};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use parry::{Baseline, ParryQuery};
use std::hint::black_box;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Target ratios of the issue, single thread: kernel qps over parry3d qps.
const RAY_TARGET: f64 = 4.0;
const BOX_TARGET: f64 = 10.0;

/// Two first contacts agree when they are this close along the segment (units):
/// the kernel stops `SURFACE_CLIP_EPSILON` short of a surface, parry does not.
const AGREE_UNITS: f32 = 1.0;

#[derive(Args)]
pub struct BenchArgs {
    #[command(flatten)]
    world: WorldArgs,
    /// Query file: JSON lines, plain or gzipped.
    #[arg(long)]
    queries: PathBuf,
    /// Timed runs per engine; the median is reported.
    #[arg(long, default_value_t = 5, value_parser = super::count_up_to::<1000>)]
    runs: usize,
    /// Shortest time of one run (ms): the query file is replayed until it is reached.
    #[arg(long, default_value_t = 200)]
    min_run_ms: u64,
    /// Also run the batch kernel on this many threads (each batch split
    /// into this many pieces).
    #[arg(long, default_value_t = 1, value_parser = super::count_up_to::<{ super::MAX_THREADS }>)]
    threads: usize,
    /// Queries per call of the batch kernel.
    #[arg(long, default_value_t = 1024, value_parser = super::count_up_to::<{ super::MAX_BATCH }>)]
    batch: usize,
    /// Print one JSON object on stdout (the human summary goes to stderr).
    #[arg(long)]
    json: bool,
    /// Skip the parry3d baseline.
    #[arg(long)]
    no_parry: bool,
    /// Skip the shape sweeps (box queries re-used as spheres, capsules,
    /// cylinders and pyramids).
    #[arg(long)]
    no_shapes: bool,
    /// Exact-mode shape sweeps are timed on at most this many queries per kind.
    #[arg(long, default_value_t = 2000)]
    exact_limit: usize,
    /// Also count, per trace, the nodes, leaves and brushes the walk visits
    /// (an untimed extra pass).
    #[arg(long)]
    stats: bool,
    /// Also run the file's box queries of this registered onion hull's size
    /// as hull traces, side by side with the box sweep (repeatable).
    #[arg(long = "hull")]
    hulls: Vec<String>,
    /// Also trace the file's box queries through the world and this scene
    /// (a file holding one `{"entities":[…]}` line), side by side with the
    /// world alone.
    #[arg(long, value_name = "FILE")]
    scene: Option<PathBuf>,
    /// Also run the `{"slide":…}` lines of FILE (without FILE: of the
    /// query file) as movement frames, side by side with each move's own
    /// first sweep as a box sweep: moves per second, sweeps per second,
    /// traces per move and what a move costs over its traces.
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    moves: Option<Option<PathBuf>>,
    /// Also write the parry3d baseline's mesh (the solid brushes' faces and
    /// patch facets, as triangles) to FILE as Wavefront OBJ, for measuring
    /// an engine outside the process on the same triangles.
    #[arg(long, value_name = "FILE")]
    mesh_obj: Option<PathBuf>,
}

/// Mean and 99th percentile of one walk counter over the traces.
fn counter_summary(values: &mut [u32]) -> (f64, u32) {
    if values.is_empty() {
        return (0.0, 0);
    }
    let mean = values.iter().map(|&v| v as f64).sum::<f64>() / values.len() as f64;
    values.sort_unstable();
    let p99 = values[((values.len() - 1) as f64 * 0.99).round() as usize];
    (mean, p99)
}

/// One walk counter summarised: name, mean, p99.
type Counter = (&'static str, f64, u32);

/// Walk counters over `traces` (full traces, or any-hit).
fn walk_stats(world: &World, traces: &[TraceQuery], any_hit: bool) -> Vec<Counter> {
    let mut scratch = Scratch::new();
    let all: Vec<WalkStats> = traces
        .iter()
        .map(|q| {
            if any_hit {
                any_hit_with_stats(world, q, &mut scratch).1
            } else {
                trace_with_stats(world, q, &mut scratch).1
            }
        })
        .collect();
    type Field = (&'static str, fn(&WalkStats) -> u32);
    let fields: [Field; 10] = [
        ("nodes", |s| s.nodes),
        ("culled", |s| s.culled),
        ("leaves", |s| s.leaves),
        ("full_leaves", |s| s.full_leaves),
        ("brushes", |s| s.brushes),
        ("patches", |s| s.patches),
        ("bvh_nodes", |s| s.bvh_nodes),
        ("fallbacks", |s| s.fallbacks),
        ("ties", |s| s.ties),
        ("core_stops", |s| s.core_stops),
    ];
    fields
        .iter()
        .map(|&(name, get)| {
            let mut v: Vec<u32> = all.iter().map(get).collect();
            let (mean, p99) = counter_summary(&mut v);
            (name, mean, p99)
        })
        .collect()
}

/// Queries per second over several runs.
#[derive(Debug, Clone, Copy)]
struct Stats {
    median: f64,
    min: f64,
    max: f64,
    /// How many passes over the query set one run made.
    passes: usize,
}

impl Stats {
    fn from_runs(mut qps: Vec<f64>, passes: usize) -> Stats {
        qps.sort_by(f64::total_cmp);
        let n = qps.len();
        let median = if n == 0 {
            0.0
        } else if n % 2 == 1 {
            qps[n / 2]
        } else {
            (qps[n / 2 - 1] + qps[n / 2]) * 0.5
        };
        Stats {
            median,
            min: qps.first().copied().unwrap_or(0.0),
            max: qps.last().copied().unwrap_or(0.0),
            passes,
        }
    }
}

/// Nanoseconds this thread has run on a CPU (Linux schedstat), so that a
/// busy machine does not pass for a slow kernel.
fn thread_cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Wall-clock throughput, and CPU-time throughput where the OS reports it.
struct Measured {
    wall: Stats,
    cpu: Option<Stats>,
}

/// Times `pass` (one pass over `count` queries): a warm-up pass sizes the
/// runs so each lasts at least `min_run`, then `runs` runs are timed.
fn measure(count: usize, runs: usize, min_run: Duration, mut pass: impl FnMut()) -> Measured {
    if count == 0 {
        return Measured {
            wall: Stats::from_runs(Vec::new(), 0),
            cpu: None,
        };
    }
    let t = Instant::now();
    pass();
    let once = t.elapsed().max(Duration::from_nanos(1));
    let passes = (min_run.as_secs_f64() / once.as_secs_f64()).ceil().max(1.0) as usize;
    let mut wall = Vec::with_capacity(runs);
    let mut cpu = Vec::with_capacity(runs);
    for _ in 0..runs {
        let cpu0 = thread_cpu_ns();
        let t = Instant::now();
        for _ in 0..passes {
            pass();
        }
        let elapsed = t.elapsed().as_secs_f64();
        let done = (count * passes) as f64;
        wall.push(done / elapsed);
        if let (Some(a), Some(b)) = (cpu0, thread_cpu_ns()) {
            if b > a {
                cpu.push(done / ((b - a) as f64 * 1e-9));
            }
        }
    }
    let cpu = (cpu.len() == runs).then(|| Stats::from_runs(cpu, passes));
    Measured {
        wall: Stats::from_runs(wall, passes),
        cpu,
    }
}

fn trace_pass(world: &World, queries: &[TraceQuery], scratch: &mut Scratch) {
    for q in queries {
        black_box(trace(world, black_box(q), scratch));
    }
}

/// The batch kernel over `queries` in batches of `batch`, each batch split
/// across `threads` threads, and the same on one thread (wall-clock
/// throughput of each). The runs alternate, so that both see the same
/// machine and the speed-up is taken side by side.
fn measure_threads(
    world: &World,
    queries: &[TraceQuery],
    batch: usize,
    threads: usize,
    runs: usize,
    passes: usize,
) -> (Stats, Stats) {
    let run = |threads: usize| {
        let options = BatchOptions {
            threads,
            min_per_thread: 1,
        };
        let t = Instant::now();
        for _ in 0..passes {
            for chunk in queries.chunks(batch) {
                black_box(trace_queries(world, black_box(chunk), &options));
            }
        }
        (queries.len() * passes) as f64 / t.elapsed().as_secs_f64()
    };
    // Warm-up: the pool's threads start and their scratch grows.
    run(threads);
    run(1);
    let (many, one): (Vec<f64>, Vec<f64>) = (0..runs).map(|_| (run(threads), run(1))).unzip();
    (
        Stats::from_runs(many, passes),
        Stats::from_runs(one, passes),
    )
}

/// The CPU model from /proc/cpuinfo, when there is one.
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name") || l.starts_with("Model"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned())
}

fn qps(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.3} M/s", x / 1e6)
    } else {
        format!("{:.1} k/s", x / 1e3)
    }
}

fn stats_line(name: &str, m: &Measured) -> String {
    let s = &m.wall;
    let cpu = m.cpu.as_ref().map_or(String::new(), |c| {
        format!("; per CPU second {}", qps(c.median))
    });
    format!(
        "{name:<10} {} median (min {}, max {}; {} passes per run{cpu})",
        qps(s.median),
        qps(s.min),
        qps(s.max),
        s.passes
    )
}

fn stats_json(m: &Measured) -> serde_json::Value {
    let s = &m.wall;
    serde_json::json!({
        "median": s.median,
        "min": s.min,
        "max": s.max,
        "passes": s.passes,
        "cpu_median": m.cpu.map(|c| c.median),
    })
}

/// What the parry3d side produced.
struct ParryRun {
    stats: Measured,
    baseline: Baseline,
    build_seconds: f64,
    /// Queries on which both engines report the same first contact.
    agree: usize,
}

fn run_parry(
    world: &World,
    traces: &[TraceQuery],
    runs: usize,
    min_run: Duration,
) -> anyhow::Result<ParryRun> {
    let t = Instant::now();
    let baseline = Baseline::build(world).context("parry3d baseline (try --no-parry)")?;
    let build_seconds = t.elapsed().as_secs_f64();
    let queries: Vec<ParryQuery> = traces.iter().map(ParryQuery::new).collect();
    let stats = measure(queries.len(), runs, min_run, || {
        for q in &queries {
            black_box(baseline.query(black_box(q)));
        }
    });
    // Not timed: a check that the mesh stands for the same world.
    let mut scratch = Scratch::new();
    let mut agree = 0usize;
    for (q, pq) in traces.iter().zip(&queries) {
        let r = trace(world, q, &mut scratch);
        let ours = (r.fraction < 1.0 || r.startsolid).then_some(r.fraction);
        let theirs = baseline.query(pq).filter(|&t| t <= 1.0);
        let len = (q.end() - q.start()).length();
        agree += match (ours, theirs) {
            (None, None) => true,
            (Some(a), Some(b)) => (a - b).abs() * len <= AGREE_UNITS,
            _ => false,
        } as usize;
    }
    Ok(ParryRun {
        stats,
        baseline,
        build_seconds,
        agree,
    })
}

/// What is being timed, as a spinner on standard error when that is a
/// terminal (a run takes many seconds and prints only at the end); nothing
/// otherwise, so logs and `--json` output stay as they were.
pub(crate) struct Progress(Option<ProgressBar>);

impl Progress {
    fn new() -> Self {
        Progress(std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new_spinner();
            if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} {elapsed}") {
                bar.set_style(style);
            }
            bar.enable_steady_tick(Duration::from_millis(100));
            bar
        }))
    }

    /// Says what runs next.
    pub(crate) fn stage(&self, what: impl Into<std::borrow::Cow<'static, str>>) {
        if let Some(bar) = &self.0 {
            bar.set_message(what);
        }
    }

    /// A line on standard error, with the spinner out of its way.
    fn eprintln(&self, line: &str) {
        match &self.0 {
            Some(bar) => bar.suspend(|| eprintln!("{line}")),
            None => eprintln!("{line}"),
        }
    }
}

impl Drop for Progress {
    /// Gone before the report (or an error) is printed.
    fn drop(&mut self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    a / b.max(f64::MIN_POSITIVE)
}

pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let progress = Progress::new();
    progress.stage("loading the world");
    let load_start = Instant::now();
    let loaded = args.world.open()?;
    let world = loaded.view();
    let load_seconds = load_start.elapsed().as_secs_f64();
    let lines = read_query_lines(&args.queries)
        .with_context(|| format!("cannot read queries from {}", args.queries.display()))?;

    let mut traces = Vec::new();
    let mut points = Vec::new();
    let mut rejected = 0usize;
    let moves_path = args
        .moves
        .as_ref()
        .map(|file| file.clone().unwrap_or_else(|| args.queries.clone()));
    for (index, line) in lines.into_iter().enumerate() {
        let parsed = line.and_then(|line| QueryLine::parse(&line));
        // Movement lines are the movement run's (`--moves`), not refused.
        if moves_path.is_some() && parsed.as_ref().is_ok_and(|l| l.is_movement()) {
            continue;
        }
        match parsed.and_then(|line| line.validate()) {
            Ok(Query::Trace(q)) => traces.push(q),
            Ok(Query::Point(p)) => points.push(p),
            Err(err) => {
                rejected += 1;
                if rejected <= 5 {
                    progress.eprintln(&format!(
                        "bspq: {}:{}: {err}",
                        args.queries.display(),
                        index + 1
                    ));
                }
            }
        }
    }
    if traces.is_empty() && points.is_empty() && moves_path.is_none() {
        bail!("{} holds no valid query", args.queries.display());
    }
    let rays = traces.iter().filter(|q| q.mins() == q.maxs()).count();
    let boxes = traces.len() - rays;
    let min_run = Duration::from_millis(args.min_run_ms);
    if let Some(path) = &args.mesh_obj {
        progress.stage("writing the baseline mesh");
        let baseline = Baseline::build(&world).context("the baseline mesh for --mesh-obj")?;
        mesh_obj::write(&baseline, path)?;
    }

    let mut scratch = Scratch::new();
    progress.stage("timing single traces");
    let bspq = measure(traces.len(), args.runs, min_run, || {
        trace_pass(&world, &traces, &mut scratch)
    });
    // The same single path over the four-wide trees, where the eight-wide
    // ones were built (AVX2): what the eight-wide search gains, side by side.
    let four_kernel = world
        .accel
        .bvh
        .wide
        .present()
        .then(|| world.accel.without_wide_trees());
    let bspq_four_wide = four_kernel
        .as_ref()
        .filter(|_| !traces.is_empty())
        .map(|kernel| {
            progress.stage("timing single traces, four-wide trees");
            let four = World {
                accel: kernel,
                ..world
            };
            measure(traces.len(), args.runs, min_run, || {
                trace_pass(&four, &traces, &mut scratch)
            })
        });
    progress.stage("timing points");
    let bspq_points = measure(points.len(), args.runs, min_run, || {
        for p in &points {
            black_box(point_contents(&world, black_box(*p)));
        }
    });
    let single = BatchOptions::single_thread();
    progress.stage("timing batches");
    let bspq_batch = measure(traces.len(), args.runs, min_run, || {
        for chunk in traces.chunks(args.batch) {
            black_box(trace_queries(&world, black_box(chunk), &single));
        }
    });
    // The share of queries the batch's first pass answers without a search.
    let sieve = Sieve::new(&world);
    let sifted = traces.iter().filter(|q| sieve.touches_nothing(q)).count();
    let sifted_share = sifted as f64 / traces.len().max(1) as f64;
    progress.stage("timing any-hit");
    let bspq_anyhit = measure(traces.len(), args.runs, min_run, || {
        for q in &traces {
            black_box(any_hit(&world, black_box(q), &mut scratch));
        }
    });
    // Any-hit batches, with the same first pass.
    progress.stage("timing any-hit batches");
    let bspq_anyhit_batch = measure(traces.len(), args.runs, min_run, || {
        for chunk in traces.chunks(args.batch) {
            black_box(any_hit_queries(&world, black_box(chunk), &single));
        }
    });
    let (threaded, one_thread) = if args.threads > 1 && !traces.is_empty() {
        progress.stage(format!("timing batches on {} threads", args.threads));
        let (many, one) = measure_threads(
            &world,
            &traces,
            args.batch,
            args.threads,
            args.runs,
            bspq_batch.wall.passes,
        );
        (Some(many), Some(one))
    } else {
        (None, None)
    };
    let parry = if args.no_parry || traces.is_empty() {
        None
    } else {
        progress.stage("building and timing the parry3d baseline");
        Some(run_parry(&world, &traces, args.runs, min_run)?)
    };

    let hull_runs = args
        .hulls
        .iter()
        .map(|name| {
            progress.stage(format!("timing hull {name}"));
            hull::run(&world, name, &traces, args.runs, min_run)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let box_list: Vec<TraceQuery> = traces
        .iter()
        .filter(|q| q.mins() != q.maxs() && q.shape().is_none())
        .cloned()
        .collect();
    let scene_run = match &args.scene {
        Some(path) => {
            progress.stage("timing the scene");
            Some(scene::run(&loaded, path, &box_list, args.runs, min_run)?)
        }
        None => None,
    };
    let moves_run = match &moves_path {
        Some(path) => Some(moves::run(&world, path, args.runs, min_run, &progress)?),
        None => None,
    };
    let shape_rows = if args.no_shapes {
        Vec::new()
    } else {
        shapes::run(
            &world,
            &box_list,
            parry.as_ref().map(|p| &p.baseline),
            args.exact_limit,
            args.runs,
            min_run,
            &progress,
        )
    };

    if args.stats {
        progress.stage("counting walk steps");
    }
    let counters = (args.stats && !traces.is_empty()).then(|| walk_stats(&world, &traces, false));
    let ray_list: Vec<TraceQuery> = traces
        .iter()
        .filter(|q| q.mins() == q.maxs())
        .cloned()
        .collect();
    let kind_counters: Vec<(&str, Vec<Counter>)> = if args.stats {
        [
            ("rays", &ray_list, false),
            ("boxes", &box_list, false),
            ("anyhit", &traces, true),
        ]
        .into_iter()
        .filter(|(_, list, _)| !list.is_empty())
        .map(|(name, list, any)| (name, walk_stats(&world, list, any)))
        // The rays through the reference walk alone (the BSP tree, no fast
        // search): what a tree walk costs on this map, beside the fast trace.
        .chain((!ray_list.is_empty()).then(|| {
            (
                "reference_rays",
                walk_stats(&world.reference(), &ray_list, false),
            )
        }))
        .collect()
    } else {
        Vec::new()
    };

    let cpu = cpu_model();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let wall_ratio = parry
        .as_ref()
        .map(|p| ratio(bspq.wall.median, p.stats.wall.median));
    let cpu_ratio = parry.as_ref().and_then(|p| {
        Some(ratio(
            bspq.cpu.as_ref()?.median,
            p.stats.cpu.as_ref()?.median,
        ))
    });
    let target = match (rays, boxes) {
        (0, 0) => None,
        (_, 0) => Some(RAY_TARGET),
        (0, _) => Some(BOX_TARGET),
        _ => None,
    };

    let mut report = vec![
        format!(
            "world      {} ({} curves, loaded in {load_seconds:.2} s)",
            args.world.world,
            if world.info.curves { "with" } else { "no" }
        ),
        format!(
            "queries    {} traces ({rays} rays, {boxes} boxes), {} points, {rejected} rejected lines, from {}",
            traces.len(),
            points.len(),
            args.queries.display()
        ),
        format!(
            "cpu        {cpu}, {cores} cores; {} runs of at least {} ms each",
            args.runs, args.min_run_ms
        ),
    ];
    if !traces.is_empty() {
        report.push(stats_line("bspq", &bspq));
        if let Some(four) = &bspq_four_wide {
            report.push(format!(
                "{} (the single path over the four-wide trees; eight-wide {:.2}x)",
                stats_line("4-wide", four),
                ratio(bspq.wall.median, four.wall.median)
            ));
        }
        report.push(format!(
            "{} ({:.0} % answered by the first pass)",
            stats_line(&format!("batch {}", args.batch), &bspq_batch),
            100.0 * sifted_share
        ));
        report.push(stats_line("any-hit", &bspq_anyhit));
        report.push(stats_line("any batch", &bspq_anyhit_batch));
    }
    if let (Some(t), Some(one)) = (&threaded, &one_thread) {
        report.push(format!(
            "{:<10} {} median (min {}, max {}; batches of {} on {} threads, {:.2}x one thread's {})",
            format!("bspq x{}", args.threads),
            qps(t.median),
            qps(t.min),
            qps(t.max),
            args.batch,
            args.threads,
            ratio(t.median, one.median),
            qps(one.median),
        ));
    }
    if !points.is_empty() {
        report.push(stats_line("points", &bspq_points));
    }
    for h in &hull_runs {
        report.extend(h.report());
    }
    if let Some(s) = &scene_run {
        report.extend(s.report());
    }
    if let Some(m) = &moves_run {
        report.extend(m.report());
    }
    if let Some(p) = &parry {
        report.push(stats_line("parry3d", &p.stats));
        report.push(format!(
            "mesh       {} triangles, {} vertices from {} solid brushes and {} patch facets, built in {:.2} s; same first contact as bspq on {:.1}% of queries",
            p.baseline.triangles,
            p.baseline.vertices,
            p.baseline.brushes,
            p.baseline.facets,
            p.build_seconds,
            100.0 * p.agree as f64 / traces.len() as f64
        ));
    }
    if let Some(r) = wall_ratio {
        let goal = target.map_or(String::new(), |t| {
            format!(
                " (target >= {t}x: {})",
                if r >= t { "met" } else { "NOT met" }
            )
        });
        let by_cpu = cpu_ratio.map_or(String::new(), |c| format!("; by CPU time {c:.2}x"));
        report.push(format!("ratio      {r:.2}x bspq / parry3d{goal}{by_cpu}"));
    }
    for row in &shape_rows {
        report.push(row.report());
    }
    if let Some(c) = &counters {
        let parts: Vec<String> = c
            .iter()
            .map(|(name, mean, p99)| format!("{name} {mean:.2} (p99 {p99})"))
            .collect();
        report.push(format!("walk       per trace: {}", parts.join(", ")));
    }
    for (kind, c) in &kind_counters {
        let parts: Vec<String> = c
            .iter()
            .map(|(name, mean, p99)| format!("{name} {mean:.2} (p99 {p99})"))
            .collect();
        report.push(format!("walk {kind:<6} {}", parts.join(", ")));
    }
    drop(progress);
    for line in &report {
        if args.json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    }

    if args.json {
        let has_traces = !traces.is_empty();
        let out = serde_json::json!({
            "world": args.world.world,
            "curves": world.info.curves,
            "queries_file": args.queries.display().to_string(),
            "queries": traces.len(),
            "rays": rays,
            "boxes": boxes,
            "points": points.len(),
            "rejected": rejected,
            "runs": args.runs,
            "bspq_qps": has_traces.then_some(bspq.wall.median),
            "bspq": has_traces.then(|| stats_json(&bspq)),
            "bspq_point_qps": (!points.is_empty()).then_some(bspq_points.wall.median),
            "bspq_hull_qps": hull_runs.first().map(|h| h.hulls.wall.median),
            "bspq_hull_box_qps": hull_runs.first().map(|h| h.boxes.wall.median),
            "hulls": hull_runs.iter().map(|h| h.json()).collect::<Vec<_>>(),
            "parry_qps": parry.as_ref().map(|p| p.stats.wall.median),
            "parry": parry.as_ref().map(|p| stats_json(&p.stats)),
            "parry_agree": parry.as_ref().map(|p| p.agree as f64 / traces.len() as f64),
            "parry_mesh": parry.as_ref().map(|p| serde_json::json!({
                "triangles": p.baseline.triangles,
                "vertices": p.baseline.vertices,
                "brushes": p.baseline.brushes,
                "facets": p.baseline.facets,
                "build_seconds": p.build_seconds,
            })),
            "ratio": wall_ratio,
            "ratio_cpu": cpu_ratio,
            "target_ratio": target,
            "threads": args.threads,
            "bspq_threads_qps": threaded.map(|t| t.median),
            "bspq_threads_one_qps": one_thread.map(|t| t.median),
            "threads_speedup": threaded.zip(one_thread).map(|(t, one)| ratio(t.median, one.median)),
            "batch": args.batch,
            "bspq_batch_qps": has_traces.then_some(bspq_batch.wall.median),
            "bspq_batch": has_traces.then(|| stats_json(&bspq_batch)),
            "batch_sifted": has_traces.then_some(sifted_share),
            "bspq_anyhit_qps": has_traces.then_some(bspq_anyhit.wall.median),
            "bspq_anyhit": has_traces.then(|| stats_json(&bspq_anyhit)),
            "anyhit_over_full": has_traces.then(|| ratio(bspq_anyhit.wall.median, bspq.wall.median)),
            "cpu": cpu,
            "cores": cores,
            "shapes": (!shape_rows.is_empty()).then(|| shape_rows
                .iter()
                .map(|r| (r.kind.clone(), r.json()))
                .collect::<serde_json::Map<_, _>>()),
            "walk": counters.as_ref().map(|c| c
                .iter()
                .map(|(name, mean, p99)| (name.to_string(), serde_json::json!({"mean": mean, "p99": p99})))
                .collect::<serde_json::Map<_, _>>()),
            "walk_by_kind": (!kind_counters.is_empty()).then(|| kind_counters
                .iter()
                .map(|(kind, c)| (kind.to_string(), c
                    .iter()
                    .map(|(name, mean, p99)| (name.to_string(), serde_json::json!({"mean": mean, "p99": p99})))
                    .collect::<serde_json::Map<_, _>>().into()))
                .collect::<serde_json::Map<_, serde_json::Value>>()),
        });
        let mut out = out;
        if let Some(map) = out.as_object_mut() {
            map.insert(
                "bspq_four_wide_qps".into(),
                bspq_four_wide.as_ref().map(|m| m.wall.median).into(),
            );
            map.insert(
                "bspq_four_wide".into(),
                bspq_four_wide.as_ref().map(stats_json).into(),
            );
            map.insert("scene".into(), scene_run.as_ref().map(|s| s.json()).into());
            map.insert(
                "movement".into(),
                moves_run.as_ref().map(|m| m.json()).into(),
            );
            // Flat names for scripts.
            map.insert(
                "bspq_moves_qps".into(),
                moves_run.as_ref().map(|m| m.moved.wall.median).into(),
            );
            map.insert(
                "bspq_move_sweeps_qps".into(),
                moves_run.as_ref().map(|m| m.sweeps.wall.median).into(),
            );
            map.insert(
                "traces_per_move".into(),
                moves_run.as_ref().map(|m| m.traces_per_move).into(),
            );
            map.insert(
                "move_overhead".into(),
                moves_run.as_ref().map(|m| m.overhead()).into(),
            );
            map.insert(
                "eight_over_four_wide".into(),
                bspq_four_wide
                    .as_ref()
                    .map(|m| ratio(bspq.wall.median, m.wall.median))
                    .into(),
            );
            map.insert(
                "bspq_anyhit_batch_qps".into(),
                has_traces.then_some(bspq_anyhit_batch.wall.median).into(),
            );
            map.insert(
                "bspq_anyhit_batch".into(),
                has_traces.then(|| stats_json(&bspq_anyhit_batch)).into(),
            );
            map.insert(
                "anyhit_batch_over_batch".into(),
                has_traces
                    .then(|| ratio(bspq_anyhit_batch.wall.median, bspq_batch.wall.median))
                    .into(),
            );
            // Flat names for scripts: bspq_sphere_qps, exact_sphere_qps, parry_sphere_qps, ...
            for r in &shape_rows {
                map.insert(format!("bspq_{}_qps", r.kind), r.shifted.wall.median.into());
                map.insert(format!("exact_{}_qps", r.kind), r.exact.wall.median.into());
                map.insert(
                    format!("parry_{}_qps", r.kind),
                    r.parry.as_ref().map(|p| p.wall.median).into(),
                );
                map.insert(format!("{}_ratio", r.kind), r.ratio().into());
            }
        }
        println!("{out}");
    }
    Ok(ExitCode::SUCCESS)
}
