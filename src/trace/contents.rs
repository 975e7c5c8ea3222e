//! Point contents: the contents of the leaf cell holding the point.

use crate::math::Vec3;
use crate::world::{World, NODE_CLOSED_PLANE};

/// The OR of the content flags of everything at `p`. A point exactly on a
/// node plane belongs to the plane's front side, as in the reference, unless
/// the plane is a detail face (then it belongs to both sides).
pub fn point_contents(world: &World, p: Vec3) -> u32 {
    contents_below(world, world.root(), p)
}

fn contents_below(world: &World, mut child: i32, p: Vec3) -> u32 {
    let mut contents = 0;
    while child >= 0 {
        let node = &world.nodes[child as usize];
        let d = world.planes[node.plane as usize].distance(p);
        if d == 0.0 && node.flags & NODE_CLOSED_PLANE != 0 {
            contents |= contents_below(world, node.children[1], p);
        }
        child = node.children[(d < 0.0) as usize];
    }
    contents | world.leaves[(-1 - child) as usize].contents
}
