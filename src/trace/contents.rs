//! Point contents: the contents of the leaf cell holding the point.

use super::walk::Lists;
use super::Kernel;
use crate::math::Vec3;
use crate::world::NODE_CLOSED_PLANE;

/// The OR of the content flags of everything at `p` (a point on a brush's
/// face is inside the brush).
pub fn point_contents(world: &Kernel, p: Vec3) -> u32 {
    if world.source.is_present() {
        source_contents(world, p)
    } else {
        contents_below(world, world.root(), p)
    }
}

/// From the compiled tree: the leaf's contents. A point exactly on a node
/// plane belongs to the plane's front side, as in the reference, unless the
/// plane is a detail face (then it belongs to both sides).
fn contents_below(world: &Kernel, mut child: i32, p: Vec3) -> u32 {
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

/// From the source's tree, as the reference answers: the one leaf holding
/// the point (a point on a plane lies in front of it), and of the brushes
/// it lists, those the point is in.
fn source_contents(world: &Kernel, p: Vec3) -> u32 {
    let tree = Lists::source(&world.source);
    let mut child = tree.root;
    while child >= 0 {
        let node = &world.source.nodes[child as usize];
        let d = world.planes[node.plane as usize].distance(p);
        child = node.children[(d < 0.0) as usize];
    }
    tree.brushes(tree.leaf(child))
        .iter()
        .map(|&b| &world.brushes[b as usize])
        .filter(|brush| {
            world.brush_sides[brush.first_side as usize..][..brush.num_sides as usize]
                .iter()
                .all(|side| world.planes[side.plane as usize].distance(p) <= 0.0)
        })
        .fold(0, |contents, brush| contents | brush.contents)
}
