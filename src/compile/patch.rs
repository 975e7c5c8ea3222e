//! Patch (curve) collision geometry.

use crate::source::Q3Bsp;
use crate::world::World;

/// A patch as the tree builder sees it: its index in `World::patches`.
#[derive(Debug, Clone, Copy)]
pub struct PatchInput {
    pub index: u32,
}

/// Builds the collision facets of every world patch into `world`.
pub fn collect(_bsp: &Q3Bsp, _world: &mut World) -> Vec<PatchInput> {
    Vec::new()
}
