//! Subcommands, one file each.

mod accuracy;
mod bench;
mod compile;
mod conformance;
mod inspect;
mod load;
mod serve;
mod trace;

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
    /// Generate load against a running server and print throughput and latency percentiles.
    Load(load::LoadArgs),
    /// Compile a Quake 3 map into a compiled world file.
    Compile(compile::CompileArgs),
    /// Print what a world holds: counts, bounds, compile time.
    Inspect(inspect::InspectArgs),
    /// Compare answers with reference answers and print match rates.
    Conformance(conformance::ConformanceArgs),
    /// Measure kernel throughput on a query file, side by side with parry3d.
    Bench(bench::BenchArgs),
    /// Measure shape sweeps (plane-shifted and exact) against the exact reference.
    Accuracy(accuracy::AccuracyArgs),
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
}

impl WorldArgs {
    pub fn open(&self) -> anyhow::Result<bspq::world::load::LoadedWorld> {
        use anyhow::Context;
        let spec = bspq::world::load::WorldSpec::parse(&self.world);
        let options = bspq::compile::CompileOptions {
            curves: !self.no_curves,
            ..Default::default()
        };
        bspq::world::load::open_world(&spec, &options)
            .with_context(|| format!("cannot open world {}", self.world))
    }
}

pub fn run() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Trace(args) => trace::run(args),
        Command::Serve(args) => serve::run_serve(args),
        Command::Compile(args) => compile::run(args),
        Command::Load(args) => load::run(args),
        Command::Inspect(args) => inspect::run(args),
        Command::Conformance(args) => conformance::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Accuracy(args) => accuracy::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("bspq: {err:#}");
            ExitCode::FAILURE
        }
    }
}
