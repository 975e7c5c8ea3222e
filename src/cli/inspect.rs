//! `bspq inspect`: what a world holds.

use super::WorldArgs;
use clap::Args;
use std::process::ExitCode;

#[derive(Args)]
pub struct InspectArgs {
    #[command(flatten)]
    world: WorldArgs,
}

pub fn run(args: InspectArgs) -> anyhow::Result<ExitCode> {
    let world = args.world.open()?;
    let info = &world.info;
    let solid_leaves = world.leaves.iter().filter(|l| l.contents != 0).count();
    println!("world            {}", info.source_name);
    println!(
        "curves           {}",
        if info.curves { "on" } else { "off" }
    );
    println!("bounds           {:?} .. {:?}", world.mins, world.maxs);
    println!(
        "source brushes   {} ({} sides)",
        info.source_brushes, info.source_brush_sides
    );
    println!("source patches   {}", info.source_patches);
    println!(
        "planes           {} ({} in source)",
        world.planes.len(),
        info.source_planes
    );
    println!("tree nodes       {}", world.nodes.len());
    println!(
        "leaves           {} ({} solid)",
        world.leaves.len(),
        solid_leaves
    );
    println!("leaf brush refs  {}", world.leaf_brushes.len());
    println!("leaf patch refs  {}", world.leaf_patches.len());
    println!("patch facets     {}", world.facets.len());
    println!("bevels added     {}", info.bevels_added);
    println!("compile time     {:.1} ms", info.compile_seconds * 1000.0);
    Ok(ExitCode::SUCCESS)
}
