//! Subcommands, one file each.

mod accuracy;
mod address;
mod bench;
mod check;
mod compile;
mod conformance;
mod export;
mod floor;
mod health;
mod inspect;
mod load;
mod serve;
mod tick;
mod trace;
mod workload;

use clap::{Args, Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "bspq",
    version,
    about = "Collision queries against compiled BSP worlds"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Answer JSON query lines from stdin, one answer line per query on stdout.
    Trace(trace::TraceArgs),
    /// Serve worlds over gRPC and HTTP/JSON until SIGINT/SIGTERM.
    Serve(serve::ServeArgs),
    /// Probe a running server's health (for container and Kubernetes probes): exit 0 when healthy.
    Health(health::HealthArgs),
    /// Generate load against a running server and print throughput and latency percentiles.
    Load(load::LoadArgs),
    /// Compile a Quake 3 map into a compiled world file.
    Compile(compile::CompileArgs),
    /// Print what a world holds: counts, bounds, compile time.
    Inspect(inspect::InspectArgs),
    /// Check the fast trace, any-hit and batches against the walk over the map's own tree, on random moves.
    Check(check::CheckArgs),
    /// Compare answers with reference answers and print match rates.
    Conformance(conformance::ConformanceArgs),
    /// Measure kernel throughput on a query file, side by side with parry3d.
    Bench(bench::BenchArgs),
    /// Measure shape sweeps (plane-shifted and exact) against the exact reference.
    Accuracy(accuracy::AccuracyArgs),
    /// Write ray or box query lines for any world, like the conformance data's.
    Workload(workload::WorkloadArgs),
    /// Write a world's solid geometry (triangles with contents and surface flags) as .glb, .obj or .json.
    Export(export::ExportArgs),
    /// Drop a box onto the floor at every point of a grid: NDJSON, as POST /v1/worlds/NAME/floor answers.
    Floor(floor::FloorArgs),
}

/// How to open a world: shared by every subcommand that takes one.
#[derive(Args, Clone)]
pub struct WorldArgs {
    /// World: a compiled world file, a Quake 3 .bsp, or ARCHIVE.pk3:maps/NAME.bsp (told apart by content).
    #[arg(long)]
    pub world: String,
    /// Leave patch (curve) collision out.
    #[arg(long)]
    pub no_curves: bool,
    #[command(flatten)]
    pub bevels: BevelArgs,
}

/// Shape bevels: extra planes only sphere, capsule, cylinder and convex
/// sweeps read (boxes and rays never do).
#[derive(clap::Args, Clone)]
pub struct BevelArgs {
    /// Edge bevels where brush sides turn by more than this many degrees.
    #[arg(long, value_name = "DEGREES", default_value_t = bspq::compile::bevels::DEFAULT_EDGE_ANGLE,
          value_parser = parse_bevel_angle)]
    pub edge_bevels: f32,
    /// No edge bevels.
    #[arg(long)]
    pub no_edge_bevels: bool,
    /// No level cap bevels atop brushes without a nearly level top.
    #[arg(long)]
    pub no_cap_bevels: bool,
}

fn parse_bevel_angle(text: &str) -> Result<f32, String> {
    let v: f32 = text.parse().map_err(|e| format!("{e}"))?;
    if (1.0..=179.0).contains(&v) {
        Ok(v)
    } else {
        Err("an angle from 1 to 179 degrees".into())
    }
}

/// Most queries a command answers, sends or times in one batch.
pub const MAX_BATCH: usize = 1 << 20;
/// Most threads (or clients) a command starts.
pub const MAX_THREADS: usize = 1024;

/// A count from 1 to `MAX`, for flags whose value sizes memory or
/// threads: a larger one would only exhaust them.
pub fn count_up_to<const MAX: usize>(text: &str) -> Result<usize, String> {
    let count: usize = text.parse().map_err(|e| format!("{e}"))?;
    if (1..=MAX).contains(&count) {
        Ok(count)
    } else {
        Err(format!("a count from 1 to {MAX}"))
    }
}

impl BevelArgs {
    pub fn options(&self) -> bspq::compile::bevels::BevelOptions {
        bspq::compile::bevels::BevelOptions {
            edge_angle: (!self.no_edge_bevels).then_some(self.edge_bevels),
            caps: !self.no_cap_bevels,
        }
    }
}

impl WorldArgs {
    /// Opens the world. A compiled world file keeps the curves setting it
    /// was compiled with: `--no-curves` on one compiled with curves is an
    /// error rather than ignored, so that no command answers (or compares
    /// answers) for a setting it does not have.
    pub fn open(&self) -> anyhow::Result<bspq::map::Map> {
        let spec = bspq::map::WorldSpec::parse(&self.world);
        let options = bspq::compile::CompileOptions {
            curves: !self.no_curves,
            shape_bevels: self.bevels.options(),
            ..Default::default()
        };
        let loaded = bspq::map::open_world(&spec, &options)
            .map_err(|err| load_error(err, || format!("cannot open world {}", self.world)))?;
        if self.no_curves && loaded.view().info.curves {
            anyhow::bail!(
                "{} is a world file compiled with curves: --no-curves applies to maps \
                 (compile it again with `bspq compile --no-curves`)",
                self.world
            );
        }
        Ok(loaded)
    }
}

/// A world's load error, with `context` first unless the error already
/// names the file.
pub(crate) fn load_error(
    err: bspq::map::LoadError,
    context: impl FnOnce() -> String,
) -> anyhow::Error {
    if err.names_file() {
        err.into()
    } else {
        anyhow::Error::new(err).context(context())
    }
}

/// An error and its causes, each said once: a transport error's cause
/// often repeats the words of the error it causes ("tcp connect error:
/// tcp connect error: Connection refused").
pub(crate) fn causes_once(err: &dyn std::error::Error) -> String {
    let mut said: Vec<String> = Vec::new();
    let mut next = Some(err);
    while let Some(err) = next {
        let text = err.to_string();
        // A cause that begins with what was just said replaces it.
        if said
            .last()
            .is_some_and(|last| text.starts_with(last.as_str()))
        {
            said.pop();
        }
        if !said.iter().any(|s| s.contains(&text)) {
            said.push(text);
        }
        next = err.source();
    }
    said.join(": ")
}

/// Parses the command line; for `serve --config FILE` (or `BSPQ_CONFIG`),
/// parses again with the file's values as defaults (flags and environment
/// still win).
fn parse() -> anyhow::Result<Cli> {
    use clap::{CommandFactory, FromArgMatches};
    let mut command = Cli::command();
    let first = command.clone().get_matches();
    let config = match first.subcommand() {
        Some(("serve", serve)) => serve.get_one::<std::path::PathBuf>("config").cloned(),
        _ => None,
    };
    let matches = match (config, command.find_subcommand("serve").cloned()) {
        (Some(path), Some(serve)) => {
            let serve = bspq::config::apply_file(serve, &path)?;
            command = command.mut_subcommand("serve", move |_| serve);
            command.get_matches()
        }
        _ => first,
    };
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // Checks across several values of a flag, reported as clap reports a bad value.
    if let Command::Compile(args) = &cli.command {
        if let Err(message) = args.check_hull_names() {
            let mut root = Cli::command();
            root.build();
            let mut compile = root.find_subcommand("compile").cloned().unwrap_or(root);
            compile
                .error(clap::error::ErrorKind::ValueValidation, message)
                .exit();
        }
    }
    Ok(cli)
}

pub fn run() -> ExitCode {
    let cli = match parse() {
        Ok(cli) => cli,
        Err(err) => {
            eprintln!("bspq: {err:#}");
            return ExitCode::from(2);
        }
    };
    if !matches!(cli.command, Command::Serve(_)) {
        end_quietly_on_closed_stdout();
    }
    let result = match cli.command {
        Command::Trace(args) => trace::run(args),
        Command::Serve(args) => serve::run_serve(args),
        Command::Compile(args) => compile::run(args),
        Command::Load(args) => load::run(args),
        Command::Health(args) => health::run(args),
        Command::Inspect(args) => inspect::run(args),
        Command::Check(args) => check::run(args),
        Command::Conformance(args) => conformance::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Accuracy(args) => accuracy::run(args),
        Command::Workload(args) => workload::run(args),
        Command::Export(args) => export::run(args),
        Command::Floor(args) => floor::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("bspq: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Standard output for a command's report, a line at a time. A reader that
/// went away (`bspq conformance … | head`) ends the command quietly with
/// status 141, as a closed pipe does other tools: the `writeln!` would
/// otherwise return the error, and the command print it.
pub(crate) fn report_out() -> impl std::io::Write {
    ClosedQuietly(std::io::stdout().lock())
}

/// [`report_out`] for many answer lines: block-buffered.
pub(crate) fn answers_out() -> impl std::io::Write {
    ClosedQuietly(std::io::BufWriter::new(std::io::stdout().lock()))
}

/// The status a shell gives a process a closed pipe stopped (128 + SIGPIPE).
const CLOSED_PIPE_STATUS: i32 = 141;

/// A writer that ends the process on a broken pipe (see [`report_out`]).
struct ClosedQuietly<W>(W);

impl<W: std::io::Write> ClosedQuietly<W> {
    fn quietly<T>(result: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(err) = &result {
            if err.kind() == std::io::ErrorKind::BrokenPipe {
                std::process::exit(CLOSED_PIPE_STATUS);
            }
        }
        result
    }
}

impl<W: std::io::Write> std::io::Write for ClosedQuietly<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Self::quietly(self.0.write(buf))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Self::quietly(self.0.flush())
    }
}

/// A report piped into a reader that stops early (`bspq inspect … | head`)
/// ends the command quietly, with [`CLOSED_PIPE_STATUS`], as other
/// command-line tools do,
/// instead of printing a panic: `println!` panics when stdout is gone.
/// Not for `serve`, whose stdout is its log.
fn end_quietly_on_closed_stdout() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(CLOSED_PIPE_STATUS);
        }
        report(info);
    }));
}
