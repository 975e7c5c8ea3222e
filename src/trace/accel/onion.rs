//! The hull walk's copy of the tree, derived from a validated world with
//! onion hulls when it is loaded (not part of the file format): per hull, one
//! 32-byte record per node with its plane inline and, per child, the OR of
//! the contents of everything that hull's leaves below list, so a hull trace
//! skips subtrees that are free for its hull and mask (Golodetz's solidity
//! bits, widened to contents so masks still apply).

use crate::world::World;
use bytemuck::{Pod, Zeroable};

#[repr(C, align(32))]
#[derive(Debug, Clone, Copy, Pod, Zeroable, PartialEq)]
pub struct OnionNode {
    pub normal: [f32; 3],
    pub dist: f32,
    /// As [`crate::world::Node::children`].
    pub children: [i32; 2],
    /// OR of the contents of the brushes and patches the hull's leaves list
    /// under each child (0: free for this hull whatever the mask).
    pub contents_below: [u32; 2],
}
const _: () = assert!(std::mem::size_of::<OnionNode>() == 32);

/// The derived onion trees of one world: `nodes[hull * node_count + node]`.
#[derive(Debug, Clone, Default)]
pub struct OnionTrees {
    pub nodes: Vec<OnionNode>,
}

impl OnionTrees {
    /// Whether this was derived from `world` (one tree per hull, not empty).
    pub fn matches(&self, world: &World) -> bool {
        !self.nodes.is_empty() && self.nodes.len() == world.nodes.len() * world.info.hulls.len()
    }

    /// Hull `hull`'s tree.
    #[inline(always)]
    pub fn tree(&self, hull: usize, node_count: usize) -> &[OnionNode] {
        &self.nodes[hull * node_count..][..node_count]
    }
}

/// Builds the hull trees of a validated world (children after parents, so
/// one backward pass sums the subtrees). Empty without hulls.
pub fn build(world: &World) -> OnionTrees {
    let hulls = world.info.hulls.len();
    if hulls == 0 || world.hull_leaves.len() != world.leaves.len() * hulls {
        return OnionTrees::default();
    }
    let mut nodes = Vec::with_capacity(world.nodes.len() * hulls);
    for hull in 0..hulls {
        let leaf_contents = |leaf: usize| -> u32 {
            let r = world.hull_leaf(leaf, hull);
            let patches =
                &world.hull_leaf_patches[r.first_patch as usize..][..r.num_patches as usize];
            patches.iter().fold(r.contents, |acc, &p| {
                acc | world.patches[p as usize].contents
            })
        };
        let start = nodes.len();
        nodes.extend(world.nodes.iter().map(|n| {
            let p = &world.planes[n.plane as usize];
            OnionNode {
                normal: p.normal,
                dist: p.dist,
                children: n.children,
                contents_below: [0; 2],
            }
        }));
        let tree = &mut nodes[start..];
        for i in (0..tree.len()).rev() {
            for side in 0..2 {
                let child = tree[i].children[side];
                tree[i].contents_below[side] = if child >= 0 {
                    let c = &tree[child as usize];
                    c.contents_below[0] | c.contents_below[1]
                } else {
                    leaf_contents((-1 - child) as usize)
                };
            }
        }
    }
    OnionTrees { nodes }
}
