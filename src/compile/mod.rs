//! From world sources to the compiled [`World`](crate::world::World): brushes and patch collision
//! geometry in, a solid-leaf BSP over them out.

pub mod bevels;
mod brushes;
mod fragment;
pub mod onion;
pub mod patch;
pub mod source_tree;
mod tree;
pub mod visibility;

use crate::source::Q3Bsp;
use crate::world::{WorldData, WorldInfo};
use std::time::Instant;
use thiserror::Error;

/// Recorded in every compiled world.
pub const COMPILER_VERSION: &str = concat!("bspq ", env!("CARGO_PKG_VERSION"));

/// Options that change what is compiled.
#[derive(Debug, Clone)]
pub struct CompileOptions {
    /// Include patch (curve) collision, as the reference does by default.
    pub curves: bool,
    /// Box sizes to compile into the tree as onion hulls ([`onion`]).
    pub hulls: Vec<crate::world::HullSpec>,
    /// Extra planes for shape sweeps only (boxes and rays never read them).
    pub shape_bevels: bevels::BevelOptions,
    /// The most tree nodes the onion hulls may add (a world file grows by
    /// about 100 bytes per node), and with it the splitting work (time) of
    /// their compile: a map too detailed for its hulls fails with
    /// [`CompileError::HullBudget`] instead of compiling for many minutes
    /// into a file of hundreds of megabytes.
    pub hull_node_budget: usize,
}

/// The default [`CompileOptions::hull_node_budget`]: about 100 MB of world
/// file and 15 s of compile on one core. With two player-sized hulls, 98 of
/// the 113 OpenArena map files fit (up to 104 MB, 13.7 s); the others, which
/// took minutes and wrote 200-660 MB, fail within 20 s.
pub const DEFAULT_HULL_NODE_BUDGET: usize = 1_000_000;

impl Default for CompileOptions {
    fn default() -> Self {
        Self {
            curves: true,
            hulls: Vec::new(),
            shape_bevels: bevels::BevelOptions::default(),
            hull_node_budget: DEFAULT_HULL_NODE_BUDGET,
        }
    }
}

#[derive(Debug, Error)]
pub enum CompileError {
    #[error("the tree is deeper than {0} levels; the map is degenerate")]
    TooDeep(usize),
    #[error("the world has more than {0} elements of one kind")]
    TooLarge(usize),
    #[error("more than {0} onion hulls")]
    TooManyHulls(usize),
    #[error(
        "the onion hulls outgrew the compile's hull node budget of {0} tree nodes \
         (or the splitting work it allows): this map is too detailed for onion \
         hulls at that budget (plane shifting, the default, traces every box \
         size without them)"
    )]
    HullBudget(usize),
}

/// Compiles a Quake 3 map: the static world (model 0) and, in
/// [`WorldData::models`], each of its inline models (`*1`…`*N`: doors,
/// platforms, triggers), every one the same way.
pub fn compile_q3(
    bsp: &Q3Bsp,
    name: &str,
    options: &CompileOptions,
) -> Result<WorldData, CompileError> {
    let started = Instant::now();
    let mut world = compile_model(bsp, 0, name, options)?;
    world.models = (1..bsp.models.len())
        .map(|model| compile_model(bsp, model, name, options))
        .collect::<Result<_, _>>()?;
    world.info.compile_seconds = started.elapsed().as_secs_f64();
    Ok(world)
}

/// Compiles model `model` of `bsp` into a world of its own.
fn compile_model(
    bsp: &Q3Bsp,
    model: usize,
    name: &str,
    options: &CompileOptions,
) -> Result<WorldData, CompileError> {
    let started = Instant::now();
    let mut world = WorldData::default();
    let mut bevels_added = 0;
    let collected = brushes::collect(bsp, model, &mut world, &mut bevels_added)?;
    let source = &bsp.models[model];
    let patches = if options.curves {
        patch::collect(bsp, source, &mut world)
    } else {
        Vec::new()
    };
    // Model 0's tree prefers the source tree's splitting planes; an inline
    // model has no tree of its own in the source.
    let source_splitters: Vec<u32> = if model == 0 {
        bsp.nodes.iter().map(|n| n.plane).collect()
    } else {
        Vec::new()
    };
    let input = &collected.brushes;
    let stats = tree::build(
        &mut world,
        input,
        &patches,
        &collected.planes,
        &source_splitters,
    )?;
    let onion_started = Instant::now();
    let onion_stats = onion::build(&mut world, &options.hulls, options.hull_node_budget)?;
    let onion = (!options.hulls.is_empty()).then(|| crate::world::OnionInfo {
        nodes_added: onion_stats.nodes_added,
        leaves_added: onion_stats.leaves_added,
        seconds: onion_started.elapsed().as_secs_f64(),
    });
    world.mins = source.mins.to_array();
    world.maxs = source.maxs.to_array();
    world.info = WorldInfo {
        source_name: name.to_owned(),
        source_hash: 0,
        compiler_version: COMPILER_VERSION.to_owned(),
        hulls: options.hulls.clone(),
        curves: options.curves,
        source_brushes: source.num_brushes as usize,
        source_brush_sides: input.iter().map(|b| b.sides.len()).sum(),
        source_patches: if options.curves {
            world.patches.len()
        } else {
            0
        },
        source_planes: collected.planes.len(),
        compile_seconds: started.elapsed().as_secs_f64(),
        bevels_added: bevels_added + stats.bevels_added,
        onion,
    };
    let (ranges, shape_bevels, _) = bevels::build(&world.view(), &options.shape_bevels);
    world.shape_bevel_ranges = ranges;
    world.shape_bevels = shape_bevels;
    if model == 0 {
        if source_tree::collect(bsp, &mut world) {
            visibility::collect(bsp, &mut world);
        }
        world.entities = bsp.entities.clone();
    } else {
        source_tree::single_leaf(&mut world);
    }
    world.info.compile_seconds = started.elapsed().as_secs_f64();
    Ok(world)
}
