//! The source's own tree, kept beside ours (see [`world::SourceTree`]): the
//! answers that depend on the order in which the reference visits leaves
//! walk it.

use crate::source::Q3Bsp;
use crate::world::validate::{self, TreeKind};
use crate::world::{self, WorldData};

/// Copies the source's nodes and leaves into `world`, each leaf's brushes and
/// patches translated to world indices in the source's order (brushes of
/// other models and surfaces that are not collision patches are left out).
/// Call after the brushes and patches are in `world`. Returns whether the
/// tree was kept: a source tree that is not a proper tree (see
/// [`validate::check_tree`]) is left out, and those answers then come from
/// the compiled tree.
pub fn collect(bsp: &Q3Bsp, world: &mut WorldData) -> bool {
    clear(world);
    let brush_by_source = index_by(world.brushes.iter().map(|b| b.source_index));
    let patch_by_surface = index_by(world.patches.iter().map(|p| p.source_surface));
    let nodes: Vec<world::Node> = bsp
        .nodes
        .iter()
        .map(|n| world::Node {
            // The world's planes begin with the source's, in its order.
            plane: n.plane,
            children: n.children,
            flags: 0,
        })
        .collect();
    let mut leaves = Vec::with_capacity(bsp.leafs.len());
    let (mut brushes, mut patches) = (Vec::new(), Vec::new());
    for leaf in &bsp.leafs {
        let first_brush = brushes.len() as u32;
        let listed =
            &bsp.leaf_brushes[leaf.first_leaf_brush as usize..][..leaf.num_leaf_brushes as usize];
        brushes.extend(listed.iter().filter_map(|&b| lookup(&brush_by_source, b)));
        let first_patch = patches.len() as u32;
        let listed = &bsp.leaf_surfaces[leaf.first_leaf_surface as usize..]
            [..leaf.num_leaf_surfaces as usize];
        patches.extend(listed.iter().filter_map(|&s| lookup(&patch_by_surface, s)));
        leaves.push(world::Leaf {
            contents: 0,
            first_brush,
            num_brushes: brushes.len() as u32 - first_brush,
            first_patch,
            num_patches: patches.len() as u32 - first_patch,
        });
    }
    if validate::check_tree(TreeKind::Source, &nodes, &leaves, world.planes.len()).is_err() {
        return false;
    }
    world.source_nodes = nodes;
    world.source_leaves = leaves;
    world.source_leaf_brushes = brushes;
    world.source_leaf_patches = patches;
    true
}

/// The source tree of an inline model: the reference traces one as a single
/// leaf listing its brushes, then its patches, in the model's order (which is
/// `world`'s order for an inline model).
pub fn single_leaf(world: &mut WorldData) {
    world.source_nodes.clear();
    world.source_leaves = vec![world::Leaf {
        contents: 0,
        first_brush: 0,
        num_brushes: world.brushes.len() as u32,
        first_patch: 0,
        num_patches: world.patches.len() as u32,
    }];
    world.source_leaf_brushes = (0..world.brushes.len() as u32).collect();
    world.source_leaf_patches = (0..world.patches.len() as u32).collect();
}

/// Leaves `world` without a source tree.
pub fn clear(world: &mut WorldData) {
    world.source_nodes.clear();
    world.source_leaves.clear();
    world.source_leaf_brushes.clear();
    world.source_leaf_patches.clear();
    world.source_leaf_vis.clear();
    world.visibility.clear();
    world.area_portals.clear();
}

/// For each source index, the world index holding it (`u32::MAX`: none).
fn index_by(sources: impl Iterator<Item = u32>) -> Vec<u32> {
    let mut by_source = Vec::new();
    for (index, source) in sources.enumerate() {
        let source = source as usize;
        if by_source.len() <= source {
            by_source.resize(source + 1, u32::MAX);
        }
        by_source[source] = index as u32;
    }
    by_source
}

fn lookup(by_source: &[u32], source: u32) -> Option<u32> {
    by_source
        .get(source as usize)
        .copied()
        .filter(|&i| i != u32::MAX)
}
