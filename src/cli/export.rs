//! `bspq export`: a world's solid geometry as a `.glb`, `.obj` or `.json`
//! file, the format taken from the output's extension.

use super::WorldArgs;
use anyhow::Context;
use bspq::geometry::{self, map_meshes};
use bspq::service::geometry::{encode, GeometryFormat, MAX_GEOMETRY_TRIANGLES};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Args)]
pub struct ExportArgs {
    /// World: a compiled world file, a Quake 3 .bsp, or ARCHIVE.pk3:maps/NAME.bsp.
    #[arg(value_name = "WORLD")]
    world: String,
    /// Only brushes and patches whose contents meet this mask (decimal or 0x hex; default: all).
    #[arg(long, value_parser = parse_mask)]
    mask: Option<u32>,
    /// Only this model (0: the world, K: inline model *K; default: all).
    #[arg(long)]
    model: Option<usize>,
    /// Output file: FILE.glb (binary glTF), FILE.obj (Wavefront OBJ) or FILE.json (the HTTP route's JSON).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: PathBuf,
    /// Leave patch (curve) collision out.
    #[arg(long)]
    no_curves: bool,
}

fn parse_mask(text: &str) -> Result<u32, String> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| format!("a contents mask (decimal or 0x hex), got {text:?}"))
}

pub fn run(args: ExportArgs) -> anyhow::Result<ExitCode> {
    let extension = args
        .output
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("");
    let format = GeometryFormat::parse(extension).with_context(|| {
        format!(
            "cannot tell the format of {}: name it FILE.glb, FILE.obj or FILE.json",
            args.output.display()
        )
    })?;
    let map = WorldArgs::with_default_bevels(&args.world, args.no_curves).open()?;
    let started = Instant::now();
    let mask = args.mask.unwrap_or(geometry::ALL_CONTENTS);
    let meshes = map_meshes(&map, mask, args.model)?;
    let triangles: usize = meshes.iter().map(|m| m.mesh.triangle_count()).sum();
    let vertices: usize = meshes.iter().map(|m| m.mesh.vertex_count()).sum();
    if triangles > MAX_GEOMETRY_TRIANGLES {
        anyhow::bail!("{triangles} triangles: more than the {MAX_GEOMETRY_TRIANGLES} an export may hold (ask for one --model or a narrower --mask)");
    }
    let name = bspq::map::WorldSpec::parse(&args.world).name();
    // Version 0: a file read by the command, not a version the server numbered.
    let source_hash = format!("{:016x}", map.view().info.source_hash);
    let bytes = encode((&name, 0, &source_hash), mask, &meshes, format)?;
    bspq::map::write_atomically(&args.output, &bytes)
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    println!(
        "wrote {}: {} models, {triangles} triangles, {vertices} vertices, {} bytes in {:.1} ms",
        args.output.display(),
        meshes.len(),
        bytes.len(),
        started.elapsed().as_secs_f64() * 1000.0
    );
    Ok(ExitCode::SUCCESS)
}
