//! The kernel's copy of the tree, derived from the validated nodes and
//! planes when a world is loaded: one 32-byte record per node with its plane
//! inline (no second dependent load per step) and, per child, the OR of the
//! contents of every brush and patch below it, so a walk skips subtrees that
//! hold nothing in its mask. It is not part of the file format.

use super::World;
use bytemuck::{Pod, Zeroable};

#[repr(C, align(32))]
#[derive(Debug, Clone, Copy, Pod, Zeroable, PartialEq)]
pub struct KernelNode {
    /// The node plane's normal and distance, copied from `planes[node.plane]`.
    pub normal: [f32; 3],
    pub dist: f32,
    /// As [`super::Node::children`].
    pub children: [i32; 2],
    /// OR of the contents of the brushes and patches listed in the leaves
    /// under each child (0: nothing below can be hit by any mask).
    pub contents_below: [u32; 2],
}
const _: () = assert!(std::mem::size_of::<KernelNode>() == 32);

/// The kernel nodes of a validated world (children after parents, as
/// validation guarantees, so one backward pass sums the subtrees).
pub fn build(world: &World) -> Vec<KernelNode> {
    let leaf_contents = |leaf: usize| -> u32 {
        let l = &world.leaves[leaf];
        let brushes = &world.leaf_brushes[l.first_brush as usize..][..l.num_brushes as usize];
        let patches = &world.leaf_patches[l.first_patch as usize..][..l.num_patches as usize];
        brushes
            .iter()
            .map(|&b| world.brushes[b as usize].contents)
            .chain(patches.iter().map(|&p| world.patches[p as usize].contents))
            .fold(0, |a, c| a | c)
    };
    let mut out: Vec<KernelNode> = world
        .nodes
        .iter()
        .map(|n| {
            let p = &world.planes[n.plane as usize];
            KernelNode {
                normal: p.normal,
                dist: p.dist,
                children: n.children,
                contents_below: [0; 2],
            }
        })
        .collect();
    for i in (0..out.len()).rev() {
        for side in 0..2 {
            let child = out[i].children[side];
            out[i].contents_below[side] = if child >= 0 {
                let c = &out[child as usize];
                c.contents_below[0] | c.contents_below[1]
            } else {
                leaf_contents((-1 - child) as usize)
            };
        }
    }
    out
}
