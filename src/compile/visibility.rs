//! What potentially-visible-set queries need, kept beside the source's tree
//! (see [`crate::world::vis`]): each source leaf's cluster and area, the
//! map's visibility rows, and its area portals, found as the game links a
//! mover into the world.

use crate::source::{entities, Q3Bsp};
use crate::world::{vis, AreaPortal, LeafVis, SourceTree, WorldData};
use glam::Vec3;

/// The game links an entity into at most this many leaves; the areas it
/// joins are read from those.
const MAX_LINKED_LEAVES: usize = 128;

/// How far a mover's link box reaches past its model's bounds: one unit
/// the collision model adds to every inline model's bounds, one more the
/// game adds when it links an entity.
const LINK_SPREAD: f32 = 2.0;

/// Copies `bsp`'s leaf clusters and areas, its visibility rows (without
/// bytes after them) and its area portals into `world`, whose source tree
/// [`super::source_tree::collect`] has kept. Returns whether they were
/// kept: data that does not fit the tree (a cluster past the rows, an
/// area past the leaves, rows shorter than their header says) is left
/// out, and the world then answers no potentially-visible-set query.
pub fn collect(bsp: &Q3Bsp, world: &mut WorldData) -> bool {
    world.source_leaf_vis.clear();
    world.visibility.clear();
    world.area_portals.clear();
    if world.source_leaves.len() != bsp.leafs.len() {
        return false;
    }
    let leaf_vis: Vec<LeafVis> = bsp
        .leafs
        .iter()
        .map(|l| LeafVis {
            cluster: l.cluster,
            area: l.area,
        })
        .collect();
    let visibility = match vis::Rows::parse(&bsp.visibility, true) {
        Ok(rows) => bsp.visibility[..rows.map_or(0, |r| r.bytes_len())].to_vec(),
        Err(_) => return false,
    };
    let area_portals = portals(bsp);
    let tree = SourceTree {
        leaves: &world.source_leaves,
        leaf_vis: &leaf_vis,
        visibility: &visibility,
        area_portals: &area_portals,
        ..SourceTree::default()
    };
    if vis::check(&tree).is_err() {
        return false;
    }
    world.source_leaf_vis = leaf_vis;
    world.visibility = visibility;
    world.area_portals = area_portals;
    true
}

/// The game's movers: the entity classes whose use opens and closes the
/// area portal they stand in.
const MOVERS: [&str; 8] = [
    "func_door",
    "func_plat",
    "func_button",
    "func_static",
    "func_rotating",
    "func_bobbing",
    "func_pendulum",
    "func_train",
];

/// The movers ([`MOVERS`] with an inline model) whose link box touches
/// leaves of two areas, in entity order. The box is the
/// model's bounds moved by the entity's `origin` and spread by
/// [`LINK_SPREAD`]; its leaves are the first [`MAX_LINKED_LEAVES`] the
/// tree gives, front children first; the first area met is one side, the
/// last other area met the other.
fn portals(bsp: &Q3Bsp) -> Vec<AreaPortal> {
    let Ok(entities) = entities::parse(&bsp.entities) else {
        return Vec::new();
    };
    let mut portals = Vec::new();
    for (index, entity) in entities.iter().enumerate() {
        if !entity.classname().is_some_and(|c| MOVERS.contains(&c)) {
            continue;
        }
        let Some(model) = entity
            .get("model")
            .and_then(|m| m.strip_prefix('*'))
            .and_then(|k| k.parse::<usize>().ok())
            .filter(|&k| k > 0)
        else {
            continue;
        };
        let Some(bounds) = bsp.models.get(model) else {
            continue;
        };
        let origin = entity.get("origin").map_or(Vec3::ZERO, parse_vector);
        let mins = bounds.mins + origin - Vec3::splat(LINK_SPREAD);
        let maxs = bounds.maxs + origin + Vec3::splat(LINK_SPREAD);
        let mut areas: [i32; 2] = [-1, -1];
        for leaf in box_leaves(bsp, mins, maxs) {
            let area = bsp.leafs[leaf].area;
            if area == -1 {
                continue;
            }
            if areas[0] == -1 {
                areas[0] = area;
            } else if area != areas[0] {
                areas[1] = area;
            }
        }
        if areas[1] != -1 {
            portals.push(AreaPortal {
                areas,
                entity: index as u32,
                model: model as u32,
            });
        }
    }
    portals
}

/// Up to three numbers separated by spaces, as the game reads a vector key
/// (missing or unreadable ones are 0).
fn parse_vector(text: &str) -> Vec3 {
    let mut v = [0.0f32; 3];
    for (slot, word) in v.iter_mut().zip(text.split_ascii_whitespace()) {
        match word.parse::<f32>() {
            Ok(x) if x.is_finite() => *slot = x,
            _ => break,
        }
    }
    Vec3::from_array(v)
}

/// The leaves of `bsp`'s tree the box touches, front children first, at
/// most [`MAX_LINKED_LEAVES`].
fn box_leaves(bsp: &Q3Bsp, mins: Vec3, maxs: Vec3) -> Vec<usize> {
    let mut leaves = Vec::new();
    let mut stack = vec![0i32];
    if bsp.nodes.is_empty() {
        stack = vec![-1];
    }
    while let Some(mut child) = stack.pop() {
        // The tree was checked to be a tree before this runs.
        while child >= 0 {
            let node = &bsp.nodes[child as usize];
            let plane = &bsp.planes[node.plane as usize];
            match box_side(plane.normal, plane.dist, mins, maxs) {
                1 => child = node.children[0],
                2 => child = node.children[1],
                _ => {
                    stack.push(node.children[1]);
                    child = node.children[0];
                }
            }
        }
        leaves.push((-1 - child) as usize);
        if leaves.len() == MAX_LINKED_LEAVES {
            break;
        }
    }
    leaves
}

/// Which sides of the plane the box reaches: 1 front, 2 back, 3 both, with
/// the reference's rules at equality (an axial plane at the box's low face
/// is front only, at its high face back only; otherwise the far corner on
/// the plane counts as front).
fn box_side(normal: Vec3, dist: f32, mins: Vec3, maxs: Vec3) -> u8 {
    let n = normal.to_array();
    if let Some(axis) = (0..3).find(|&k| n[k] == 1.0) {
        if dist <= mins[axis] {
            return 1;
        }
        if dist >= maxs[axis] {
            return 2;
        }
        return 3;
    }
    let corner = |positive: bool| {
        let c = |k: usize| match (n[k] < 0.0) == positive {
            true => mins[k],
            false => maxs[k],
        };
        n[0] * c(0) + n[1] * c(1) + n[2] * c(2)
    };
    let (far, near) = (corner(true), corner(false));
    let mut sides = 0;
    if far >= dist {
        sides = 1;
    }
    if near < dist {
        sides |= 2;
    }
    sides
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn box_sides() {
        let (mins, maxs) = (Vec3::splat(-1.0), Vec3::splat(1.0));
        assert_eq!(box_side(Vec3::X, -1.0, mins, maxs), 1);
        assert_eq!(box_side(Vec3::X, 1.0, mins, maxs), 2);
        assert_eq!(box_side(Vec3::X, 0.0, mins, maxs), 3);
        // -X is not axial for the reference: a face on the plane is front.
        assert_eq!(box_side(-Vec3::X, 1.0, mins, maxs), 3);
        assert_eq!(box_side(-Vec3::X, -1.0, mins, maxs), 1);
        let d = Vec3::new(1.0, 1.0, 0.0).normalize();
        assert_eq!(box_side(d, 5.0, mins, maxs), 2);
        assert_eq!(box_side(d, -5.0, mins, maxs), 1);
    }

    #[test]
    fn vectors() {
        assert_eq!(parse_vector("1 -2.5 3"), Vec3::new(1.0, -2.5, 3.0));
        assert_eq!(parse_vector("7"), Vec3::new(7.0, 0.0, 0.0));
        assert_eq!(parse_vector("1 x 3"), Vec3::new(1.0, 0.0, 0.0));
    }
}
