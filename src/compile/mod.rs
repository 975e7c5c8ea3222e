//! From world sources to the compiled [`World`](crate::world::World): brushes and patch collision
//! geometry in, a solid-leaf BSP over them out.

pub mod bevels;
mod brushes;
mod fragment;
pub mod onion;
pub mod patch;
pub mod source_tree;
mod tree;

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

/// Compiles the static world (model 0) of a Quake 3 map.
pub fn compile_q3(
    bsp: &Q3Bsp,
    name: &str,
    options: &CompileOptions,
) -> Result<WorldData, CompileError> {
    let started = Instant::now();
    let mut world = WorldData::default();
    let mut bevels_added = 0;
    let input = brushes::collect(bsp, &mut world, &mut bevels_added)?;
    let patches = if options.curves {
        patch::collect(bsp, &mut world)
    } else {
        Vec::new()
    };
    let source_splitters: Vec<u32> = bsp.nodes.iter().map(|n| n.plane).collect();
    let stats = tree::build(&mut world, &input, &patches, &bsp.planes, &source_splitters)?;
    let onion_started = Instant::now();
    let onion_stats = onion::build(&mut world, &options.hulls, options.hull_node_budget)?;
    let onion = (!options.hulls.is_empty()).then(|| crate::world::OnionInfo {
        nodes_added: onion_stats.nodes_added,
        leaves_added: onion_stats.leaves_added,
        seconds: onion_started.elapsed().as_secs_f64(),
    });
    let model = bsp.world_model();
    world.mins = model.mins.to_array();
    world.maxs = model.maxs.to_array();
    world.info = WorldInfo {
        source_name: name.to_owned(),
        source_hash: 0,
        compiler_version: COMPILER_VERSION.to_owned(),
        hulls: options.hulls.clone(),
        curves: options.curves,
        source_brushes: model.num_brushes as usize,
        source_brush_sides: input.iter().map(|b| b.sides.len()).sum(),
        source_patches: if options.curves {
            world.patches.len()
        } else {
            0
        },
        source_planes: bsp.planes.len(),
        compile_seconds: started.elapsed().as_secs_f64(),
        bevels_added: bevels_added + stats.bevels_added,
        onion,
    };
    let (ranges, shape_bevels, _) = bevels::build(&world.view(), &options.shape_bevels);
    world.shape_bevel_ranges = ranges;
    world.shape_bevels = shape_bevels;
    source_tree::collect(bsp, &mut world);
    world.entities = bsp.entities.clone();
    world.info.compile_seconds = started.elapsed().as_secs_f64();
    Ok(world)
}
