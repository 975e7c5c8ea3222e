//! `bspq inspect`: what a world holds, and for compiled files how they are laid out.

use super::{BevelArgs, WorldArgs};
use anyhow::Context;
use bspq::trace::accel::bvh::{
    EMPTY_SLOT, LOOSE_FACET, PATCH, PRIMITIVE, RAY_FACET, SMALL_BOX_HALF,
};
use bspq::world::format;
use clap::Args;
use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

/// The world is named as other commands name it (`--world FILE`) or, as
/// the command line documents it, alone (`bspq inspect FILE`).
#[derive(Args)]
#[command(group(clap::ArgGroup::new("named").required(true).args(["file", "world"])))]
pub struct InspectArgs {
    /// World: a compiled world file, a Quake 3 .bsp, or ARCHIVE.pk3:maps/NAME.bsp (as --world).
    #[arg(value_name = "FILE")]
    file: Option<String>,
    /// World: a compiled world file, a Quake 3 .bsp, or ARCHIVE.pk3:maps/NAME.bsp (told apart by content).
    #[arg(long)]
    world: Option<String>,
    /// Leave patch (curve) collision out.
    #[arg(long)]
    no_curves: bool,
    #[command(flatten)]
    bevels: BevelArgs,
    /// Print only the map's entities: a JSON list of objects, one per
    /// entity, keys in file order (of a key given twice, the first value),
    /// as the server's GET /v1/worlds/NAME/entities answers.
    #[arg(long)]
    entities: bool,
}

pub fn run(args: InspectArgs) -> anyhow::Result<ExitCode> {
    let world_args = WorldArgs {
        world: args.file.or(args.world).unwrap_or_default(),
        no_curves: args.no_curves,
        bevels: args.bevels,
    };
    if args.entities {
        return print_entities(&world_args);
    }
    let spec = bspq::map::WorldSpec::parse(&world_args.world);
    let mut checksum_ok = true;
    if spec.member.is_none() {
        if let Ok(bytes) = bspq::map::read_limited(&spec.path) {
            if format::looks_like_world_file(&bytes) {
                checksum_ok = print_layout(&bytes);
            }
        }
    }
    let started = Instant::now();
    let loaded = world_args.open()?;
    let load_ms = started.elapsed().as_secs_f64() * 1000.0;
    let world = loaded.view();
    let info = world.info;
    let solid_leaves = world.leaves.iter().filter(|l| l.contents != 0).count();
    println!("world            {}", info.source_name);
    println!("source hash      {:016x}", info.source_hash);
    println!("compiler         {}", info.compiler_version);
    println!(
        "curves           {}",
        if info.curves { "on" } else { "off" }
    );
    let hulls: Vec<String> = info
        .hulls
        .iter()
        .map(|h| format!("{}={:?}..{:?}", h.name, h.mins, h.maxs))
        .collect();
    println!(
        "hulls            {}",
        if hulls.is_empty() {
            "none".to_owned()
        } else {
            hulls.join(" ")
        }
    );
    if let Some(onion) = &info.onion {
        let solid: Vec<String> = (0..info.hulls.len())
            .map(|h| {
                let n = world
                    .leaf_hull_solid
                    .iter()
                    .filter(|b| *b >> h & 1 == 1)
                    .count();
                format!("{n} solid for {}", info.hulls[h].name)
            })
            .collect();
        println!(
            "onion            +{} nodes, +{} leaves ({}), compile time {}",
            onion.nodes_added,
            onion.leaves_added,
            solid.join(", "),
            duration_ms(onion.seconds)
        );
    }
    println!("bounds           {:?} .. {:?}", world.mins, world.maxs);
    let entities = loaded.entities();
    println!(
        "entities         {} ({} key/value pairs; --entities prints them)",
        entities.len(),
        entities.iter().map(|e| e.pairs.len()).sum::<usize>()
    );
    print_models(&loaded);
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
    println!(
        "brushes          {} ({} sides)",
        world.brushes.len(),
        world.brush_sides.len()
    );
    println!("tree nodes       {}", world.nodes.len());
    println!(
        "leaves           {} ({} solid)",
        world.leaves.len(),
        solid_leaves
    );
    println!("leaf brush refs  {}", world.leaf_brushes.len());
    println!("leaf patch refs  {}", world.leaf_patches.len());
    let source = &world.source;
    if source.is_present() {
        println!(
            "source tree      {} nodes, {} leaves, {} brush refs, {} patch refs (visit order)",
            source.nodes.len(),
            source.leaves.len(),
            source.leaf_brushes.len(),
            source.leaf_patches.len()
        );
    } else {
        println!("source tree      none (order-dependent answers use the compiled tree)");
    }
    if source.leaf_vis.is_empty() {
        println!("visibility       none (PVS queries are refused: compile the map again)");
    } else {
        let rows = bspq::world::vis::Rows::parse(source.visibility, false)
            .ok()
            .flatten();
        println!(
            "visibility       {}, {} areas, {} area portals",
            rows.map_or(
                "no visibility data (every cluster sees every other)".to_owned(),
                |r| { format!("{} clusters", r.clusters()) }
            ),
            bspq::world::vis::area_count(source.leaf_vis),
            source.area_portals.len()
        );
    }
    println!(
        "patch facets     {} ({} planes)",
        world.facets.len(),
        world.patch_planes.len()
    );
    let bvh = &world.accel.bvh;
    // Primitives of kind `kind` (bits `PATCH | FACET`) in `nodes`.
    let count = |nodes: &[bspq::trace::accel::bvh::BvhNode], kind: u32| {
        // (A set: a spatial split may hold a primitive twice.)
        nodes
            .iter()
            .flat_map(|n| n.children.iter())
            .filter(|&&c| c != EMPTY_SLOT && c & PRIMITIVE != 0 && c & RAY_FACET == kind)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    };
    // (Without patches the tree over both is the brushes' tree; without
    // patches kept whole the small boxes' tree serves every size.)
    let (whole_small, whole_large) = if bvh.patches.is_empty() {
        (0, 0)
    } else if bvh.combined_whole.is_empty() {
        let whole = count(&bvh.combined, PATCH);
        (whole, whole)
    } else {
        (
            count(&bvh.combined, PATCH),
            count(&bvh.combined_whole, PATCH),
        )
    };
    println!(
        "fast trace BVH   {} brush nodes, {} patch nodes, {} nodes over both ({} in the one for boxes of half-size over {SMALL_BOX_HALF}), {} unbounded",
        bvh.brushes.len(),
        bvh.patches.len(),
        bvh.combined.len(),
        if bvh.combined_whole.is_empty() {
            bvh.combined.len()
        } else {
            bvh.combined_whole.len()
        },
        bvh.unbounded.len()
    );
    println!(
        "patches whole    {whole_small} for boxes of half-size up to {SMALL_BOX_HALF} ({} facets bounded by a box's reach), {whole_large} for larger boxes (rays: {} facets bounded by their polygon)",
        count(&bvh.combined, LOOSE_FACET),
        count(&bvh.patches, RAY_FACET),
    );
    let wide = &bvh.wide;
    if wide.present() {
        println!(
            "eight-wide BVH   {} brush nodes, {} patch nodes, {} nodes over both, {} for large boxes (the full trace's search, AVX2)",
            wide.brushes.len(),
            wide.patches.len(),
            wide.combined.len(),
            wide.combined_whole.len(),
        );
    } else {
        println!(
            "eight-wide BVH   none (no AVX2 here: the full trace searches the four-wide trees)"
        );
    }
    println!(
        "axial boxes      {} of {} brushes (clipped from their six distances)",
        world.accel.axial_brushes.len(),
        world.brushes.len()
    );
    let occupancy = &world.accel.occupancy;
    if occupancy.bytes() == 0 {
        println!("occupancy grid   none (an unbounded brush, or nothing to mark): batches search every query");
    } else {
        let [x, y, z] = occupancy.cells();
        println!(
            "occupancy grid   {x} x {y} x {z} cells of {} units, {} bytes (a batch answers moves that reach no marked cell at once)",
            occupancy.cell_size(),
            occupancy.bytes()
        );
        let single = occupancy.single;
        let asks = |op: usize| {
            if single.asks[op] {
                "ask it"
            } else {
                "search at once"
            }
        };
        println!(
            "single moves     full traces {}, any-hit {} (it clears {:.0} % of sample rays and {:.0} % of boxes; their searches would visit {:.2} and {:.2} hierarchy nodes a move, any-hit {:.2} and {:.2})",
            asks(0),
            asks(1),
            single.cleared[0] * 100.0,
            single.cleared[1] * 100.0,
            single.nodes_saved[0][0],
            single.nodes_saved[0][1],
            single.nodes_saved[1][0],
            single.nodes_saved[1][1],
        );
    }
    let (brushes, facets) = world.accel.unlisted.counts();
    println!(
        "unlisted         {brushes} brushes, {facets} facets reach where the source's tree does not list them"
    );
    println!("bevels added     {}", info.bevels_added);
    println!("compile time     {}", duration_ms(info.compile_seconds));
    let how = match loaded.file_layout() {
        Some(_) if loaded.is_mapped() => "mapped compiled file, validated",
        Some(_) => "copied compiled file, validated",
        None => "compiled from source, validated",
    };
    println!("load time        {load_ms:.2} ms ({how})");
    println!("data bytes       {}", loaded.data_bytes());
    Ok(if checksum_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Prints the inline models, one line each: number, bounds, brushes and
/// patches.
fn print_models(loaded: &bspq::Map) {
    let models = loaded.models();
    println!("inline models    {}", models.len());
    for (index, model) in models.iter().enumerate() {
        let world = model.world();
        println!(
            "  *{:<4} bounds {:?} .. {:?}  {} brushes, {} patches",
            index + 1,
            world.mins,
            world.maxs,
            world.brushes.len(),
            world.patches.len()
        );
    }
}

/// Prints the world's entities as JSON (loading it as every command does,
/// so a world whose entities do not parse is refused here too).
fn print_entities(world_args: &WorldArgs) -> anyhow::Result<ExitCode> {
    let loaded = world_args.open()?;
    let mut out = super::report_out();
    serde_json::to_writer_pretty(&mut out, loaded.entities())
        .context("cannot write the entities")?;
    writeln!(out).context("cannot write the entities")?;
    Ok(ExitCode::SUCCESS)
}

/// Prints the header and section table; returns whether the checksum holds.
fn print_layout(bytes: &[u8]) -> bool {
    match format::parse_layout(bytes, false) {
        Ok(layout) => {
            let actual = format::content_checksum(bytes);
            let ok = actual == layout.checksum;
            println!(
                "format           bspq compiled world, version {}",
                layout.version
            );
            println!("file bytes       {}", layout.file_len);
            println!(
                "checksum         {:016x} (xxh3-64) {}",
                layout.checksum,
                if ok {
                    "ok".to_owned()
                } else {
                    format!("MISMATCH: content hashes to {actual:016x}")
                }
            );
            println!("sections");
            for s in &layout.sections {
                println!(
                    "  {:14} offset {:>9}  {:>8} records  {:>9} bytes",
                    s.kind.name(),
                    s.offset,
                    s.count,
                    s.byte_len
                );
            }
            ok
        }
        Err(e) => {
            println!("format           bspq compiled world, unreadable: {e}");
            false
        }
    }
}

/// A recorded duration, or why there is none: `bspq compile --reproducible`
/// writes zero (no real compile takes no time).
fn duration_ms(seconds: f64) -> String {
    if seconds == 0.0 {
        "not recorded (compiled with --reproducible)".to_owned()
    } else {
        format!("{:.1} ms", seconds * 1000.0)
    }
}
