//! Point contents: the contents of the leaf cell holding the point.

use crate::math::Vec3;
use crate::world::World;

/// The OR of the content flags of everything at `p`. A point exactly on a
/// node plane belongs to the plane's front side, as in the reference.
pub fn point_contents(world: &World, p: Vec3) -> u32 {
    let mut child = world.root();
    while child >= 0 {
        let node = &world.nodes[child as usize];
        let d = world.planes[node.plane as usize].distance(p);
        child = node.children[(d < 0.0) as usize];
    }
    world.leaves[(-1 - child) as usize].contents
}
