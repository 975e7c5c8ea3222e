//! The fast trace's hierarchies (`bspq::trace::accel::bvh`) on the committed maps:
//! the tree over brushes and patches that boxes and shapes search holds
//! exactly what the brushes' and the patches' trees hold (rays search
//! those two; larger boxes a tree with some patches whole), and in every tree each child lies inside its parent's lane
//! and carries only contents its parent's lane has.

use crate::common;

use bspq::trace::accel::bvh::{BvhNode, EMPTY_SLOT, INDEX, PATCH, PRIMITIVE, RAY_FACET};
use common::{load_world, MAPS};
use std::collections::BTreeSet;

/// The primitives `nodes` reach, checking on the way down that each lane
/// lies inside its parent's and its contents are within the parent's.
fn primitives(map: &str, nodes: &[BvhNode]) -> BTreeSet<u32> {
    let mut found = BTreeSet::new();
    if nodes.is_empty() {
        return found;
    }
    let unbounded = ([f32::NEG_INFINITY; 3], [f32::INFINITY; 3], u32::MAX);
    let mut stack = vec![(0u32, unbounded)];
    while let Some((index, (parent_lo, parent_hi, parent_contents))) = stack.pop() {
        let node = &nodes[index as usize];
        for slot in 0..4 {
            let child = node.children[slot];
            if child == EMPTY_SLOT {
                assert_eq!(node.contents[slot], 0, "{map}: an empty lane with contents");
                continue;
            }
            let lo = [0, 1, 2].map(|k| node.min[k][slot]);
            let hi = [0, 1, 2].map(|k| node.max[k][slot]);
            for k in 0..3 {
                assert!(
                    parent_lo[k] <= lo[k] && hi[k] <= parent_hi[k],
                    "{map}: node {index} lane {slot} leaves its parent's bounds"
                );
            }
            assert_eq!(node.contents[slot] & !parent_contents, 0, "{map}");
            if child & PRIMITIVE != 0 {
                found.insert(child);
            } else {
                assert!(child > index, "{map}: children come after their parents");
                stack.push((child, (lo, hi, node.contents[slot])));
            }
        }
    }
    found
}

#[test]
fn the_tree_over_both_holds_what_the_two_trees_hold() {
    let mut with_patches = 0;
    for map in MAPS {
        for curves in [true, false] {
            let loaded = load_world(map, curves);
            let world = loaded.view();
            let bvh = &world.accel.bvh;
            let brushes = primitives(map, &bvh.brushes);
            let patches = primitives(map, &bvh.patches);
            let combined = primitives(map, &bvh.combined);
            assert!(!brushes.is_empty(), "{map}");
            assert!(brushes.is_disjoint(&patches), "{map}");
            // Boxes up to `SMALL_BOX_HALF` meet each facet on its own (a
            // facet the rays' tree bounds by its polygon, the boxes' tree
            // bounds by a box's reach: the same reference)...
            let both: BTreeSet<u32> = brushes.union(&patches).copied().collect();
            assert_eq!(combined, both, "{map} (curves {curves})");
            assert_eq!(bvh.combined_cores.len(), bvh.combined.len(), "{map}");
            // ... larger boxes such a facet's whole patch.
            let loose = |&c: &u32| c & RAY_FACET == RAY_FACET;
            if patches.iter().any(loose) {
                let whole: BTreeSet<u32> = both
                    .iter()
                    .map(|&c| match loose(&c) {
                        true => PRIMITIVE | PATCH | bvh.facet_patch[(c & INDEX) as usize],
                        false => c,
                    })
                    .collect();
                assert_eq!(primitives(map, &bvh.combined_whole), whole, "{map}");
                let cores = bvh.combined_whole_cores.len();
                assert_eq!(cores, bvh.combined_whole.len(), "{map}");
            } else {
                assert!(bvh.combined_whole.is_empty(), "{map}");
            }
            with_patches += usize::from(!patches.is_empty());
            if patches.is_empty() {
                // Without patches the brushes' tree serves both.
                assert_eq!(bvh.combined, bvh.brushes, "{map}");
            }
        }
    }
    assert!(with_patches > 0, "no committed map has patches to combine");
}
