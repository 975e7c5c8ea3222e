//! `bspq compile`: a Quake 3 map (or pk3 member) in, a compiled world file out.

use anyhow::Context;
use bspq::compile::{CompileError, CompileOptions};
use bspq::map::{
    compile_source, open_compiled_file, read_source, write_atomically_checked, LoadError, WorldSpec,
};
use bspq::world::HullSpec;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct CompileArgs {
    /// Source map: a Quake 3 .bsp, or ARCHIVE.pk3:maps/NAME.bsp.
    input: String,
    /// Where to write the compiled world (written to a temporary name, then renamed).
    #[arg(short, long)]
    output: PathBuf,
    /// Leave patch (curve) collision out.
    #[arg(long)]
    no_curves: bool,
    /// Register a box size as an onion hull: NAME=minx,miny,minz,maxx,maxy,maxz (repeatable).
    #[arg(long = "hull", value_parser = parse_hull)]
    hulls: Vec<HullSpec>,
    /// The most tree nodes the onion hulls may add (about 100 bytes of world
    /// file each); a map that needs more fails with a clear error.
    #[arg(long, value_name = "N", default_value_t = bspq::compile::DEFAULT_HULL_NODE_BUDGET)]
    max_hull_nodes: usize,
    #[command(flatten)]
    bevels: super::BevelArgs,
    /// Leave the compile timings out of the file, so that compiling the same
    /// map with the same options and bspq version gives the same bytes.
    #[arg(long)]
    reproducible: bool,
    /// Print only errors.
    #[arg(short, long)]
    quiet: bool,
}

fn parse_hull(text: &str) -> Result<HullSpec, String> {
    let (name, numbers) = text
        .split_once('=')
        .ok_or("expected NAME=minx,miny,minz,maxx,maxy,maxz")?;
    let valid_name = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if !valid_name {
        return Err(format!(
            "hull name {name:?} must match [A-Za-z0-9_.-]{{1,64}}"
        ));
    }
    let values: Vec<f32> = numbers
        .split(',')
        .map(|v| v.trim().parse::<f32>().map_err(|e| format!("{v:?}: {e}")))
        .collect::<Result<_, _>>()?;
    let [x0, y0, z0, x1, y1, z1] = values[..] else {
        return Err(format!("expected 6 numbers, got {}", values.len()));
    };
    if values.iter().any(|v| !v.is_finite() || v.abs() > 65536.0) {
        return Err("hull sizes must be finite and within ±65536".into());
    }
    if x0 > x1 || y0 > y1 || z0 > z1 {
        return Err("hull mins must not exceed maxs".into());
    }
    Ok(HullSpec {
        name: name.to_owned(),
        mins: [x0, y0, z0],
        maxs: [x1, y1, z1],
    })
}

impl CompileArgs {
    /// What one `--hull` value cannot tell: each name is registered once.
    pub fn check_hull_names(&self) -> Result<(), String> {
        for (i, hull) in self.hulls.iter().enumerate() {
            if self.hulls[..i].iter().any(|h| h.name == hull.name) {
                return Err(format!("--hull name {:?} is given twice", hull.name));
            }
        }
        Ok(())
    }
}

/// A spinner on a terminal, nothing otherwise.
struct Progress {
    bar: Option<ProgressBar>,
    stages: Vec<(&'static str, Duration)>,
    stage_started: Instant,
}

impl Progress {
    fn new(show: bool) -> Self {
        let bar = show.then(|| {
            let bar = ProgressBar::new_spinner();
            if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} {elapsed}") {
                bar.set_style(style);
            }
            bar.enable_steady_tick(Duration::from_millis(80));
            bar
        });
        Self {
            bar,
            stages: Vec::new(),
            stage_started: Instant::now(),
        }
    }

    fn stage<T>(&mut self, name: &'static str, work: impl FnOnce() -> T) -> T {
        if let Some(bar) = &self.bar {
            bar.set_message(name);
        }
        self.stage_started = Instant::now();
        let out = work();
        self.stages.push((name, self.stage_started.elapsed()));
        out
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

pub fn run(args: CompileArgs) -> anyhow::Result<ExitCode> {
    let show = !args.quiet && std::io::stderr().is_terminal();
    let mut progress = Progress::new(show);
    let spec = WorldSpec::parse(&args.input);
    let options = CompileOptions {
        curves: !args.no_curves,
        hulls: args.hulls.clone(),
        shape_bevels: args.bevels.options(),
        hull_node_budget: args.max_hull_nodes,
    };
    let bytes = progress
        .stage("read", || read_source(&spec))
        .map_err(|err| super::load_error(err, || format!("cannot read {}", args.input)))?;
    let mut data = progress
        .stage("compile", || compile_source(&bytes, &spec.name(), &options))
        .map_err(|err| match err {
            LoadError::Compile(CompileError::HullBudget(_)) => anyhow::anyhow!(
                "{err}; raise --max-hull-nodes to allow more, or compile without --hull"
            ),
            err => err.into(),
        })
        .with_context(|| format!("cannot compile {}", args.input))?;
    if args.reproducible {
        // The timings (the world's and its inline models') are the only
        // bytes two compiles of one map differ in.
        for info in std::iter::once(&mut data.info)
            .chain(data.models.iter_mut().map(|model| &mut model.info))
        {
            info.compile_seconds = 0.0;
            if let Some(onion) = &mut info.onion {
                onion.seconds = 0.0;
            }
        }
    }
    let file = progress.stage("serialise", || bspq::world::format::write(&data));
    // What was written is read back and loaded before it replaces OUT: a
    // file that does not load never takes the place of one that did.
    let written = progress.stage("write and verify", || {
        write_atomically_checked(&args.output, &file, |written| -> anyhow::Result<()> {
            match open_compiled_file(written) {
                Ok(Some(_)) => Ok(()),
                Ok(None) => anyhow::bail!("the written file does not load back as a world file"),
                Err(err) => {
                    Err(anyhow::Error::new(err).context("the written file does not load back"))
                }
            }
        })
    });
    progress.finish();
    written.with_context(|| format!("cannot write {}", args.output.display()))?;
    if show {
        let w = data.view();
        println!("compiled {} -> {}", args.input, args.output.display());
        println!(
            "  brushes {}  sides {}  patches {}  facets {}  nodes {}  leaves {}  bevels added {}",
            w.brushes.len(),
            w.brush_sides.len(),
            w.patches.len(),
            w.facets.len(),
            w.nodes.len(),
            w.leaves.len(),
            w.info.bevels_added
        );
        println!(
            "  shape bevels {} (only shape sweeps read them)",
            w.shape_bevels.len()
        );
        println!(
            "  source {} bytes -> world file {} bytes",
            bytes.len(),
            file.len()
        );
        let stages: Vec<String> = progress
            .stages
            .iter()
            .map(|(n, d)| format!("{n} {:.1} ms", d.as_secs_f64() * 1000.0))
            .collect();
        println!("  {}", stages.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}
