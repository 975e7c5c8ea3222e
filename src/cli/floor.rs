//! `bspq floor`: a floor grid over a world, as the HTTP route answers it
//! (NDJSON on stdout: a header, then one line per band of rows).

use super::WorldArgs;
use anyhow::Context;
use bspq::query::floor::FloorRequest;
use bspq::trace::BatchOptions;
use clap::Args;
use std::io::Write;
use std::process::ExitCode;

#[derive(Args)]
pub struct FloorArgs {
    /// World: a compiled world file, a Quake 3 .bsp, or ARCHIVE.pk3:maps/NAME.bsp.
    #[arg(value_name = "WORLD")]
    world: String,
    /// The grid, as the HTTP route's body: '{"from":[x,y],"to":[x,y],"spacing":S,"top":Z,…}'.
    #[arg(value_name = "GRID")]
    grid: String,
    /// Leave patch (curve) collision out.
    #[arg(long)]
    no_curves: bool,
}

pub fn run(args: FloorArgs) -> anyhow::Result<ExitCode> {
    let request: FloorRequest =
        serde_json::from_str(&args.grid).context("the grid is not a floor grid request")?;
    let map = WorldArgs::with_default_bevels(&args.world, args.no_curves).open()?;
    let world = map.view();
    let grid = request.check(&world)?;
    let name = bspq::map::WorldSpec::parse(&args.world).name();
    let mut out = super::answers_out();
    let mut failed = None;
    // Version 0: a file read by the command, not a version the server numbered.
    grid.stream(
        &world,
        (&name, 0),
        &BatchOptions::default(),
        |line, _| match out.write_all(&line) {
            Ok(()) => true,
            Err(e) => {
                failed = Some(e);
                false
            }
        },
    )?;
    if let Some(e) = failed {
        return Err(e.into());
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
