//! The solid-leaf BSP builder.
//!
//! Brushes are cut into fragments by splitting planes chosen from their own
//! faces until every fragment in a cell has used up its faces; such a cell is
//! then filled by each remaining fragment (a solid leaf, carrying the OR of
//! their contents and the list of brushes for exact clipping), or by nothing
//! (an empty leaf). Patches are filed into every leaf their bounds touch.

use super::brushes::BrushInput;
use super::fragment::{self, Planes};
use super::patch::PatchInput;
use super::CompileError;
use crate::margins::TREE_WALK_SLACK;
use crate::math::{dvec, DVec3};
use crate::source::q3bsp;
use crate::world::{self, WorldData};
use std::collections::{HashMap, HashSet};

/// Deepest tree we build; deeper means a degenerate or hostile map.
pub const MAX_DEPTH: usize = 2048;
/// Splitting planes scored per node (a deterministic sample when there are more).
const MAX_CANDIDATES: usize = 48;

pub struct BuildStats {
    pub bevels_added: usize,
}

/// Maps every plane to one orientation of its pair, so opposite faces on the
/// same plane split as one.
struct PlaneCanon {
    /// For each world plane: (canonical plane, whether this plane is its flip).
    canon: Vec<(u32, bool)>,
    /// For each canonical plane, its flipped twin.
    flip: HashMap<u32, u32>,
}

impl PlaneCanon {
    fn new(world: &mut WorldData, source: &[q3bsp::BspPlane]) -> Self {
        // Only the source's planes come in pairs; planes added by the
        // compiler (bevels) are never splitters and need no twin.
        let n = source.len().min(world.planes.len());
        let paired = n.is_multiple_of(2)
            && (0..n / 2).all(|k| {
                let (a, b) = (&source[2 * k], &source[2 * k + 1]);
                a.normal == -b.normal && a.dist == -b.dist
            });
        if paired {
            // Quake 3 files store planes in pairs, the even one facing positive.
            let canon = (0..n).map(|i| ((i & !1) as u32, i & 1 == 1)).collect();
            let flip = (0..n / 2)
                .map(|k| ((2 * k) as u32, (2 * k + 1) as u32))
                .collect();
            return Self { canon, flip };
        }
        // Otherwise deduplicate by quantised value, facing the first non-zero
        // normal component positive, adding flipped planes where missing.
        let key = |normal: [f32; 3], dist: f32| {
            let q = |v: f32, s: f32| (v * s).round() as i64;
            (
                q(normal[0], 1e5),
                q(normal[1], 1e5),
                q(normal[2], 1e5),
                q(dist, 1e2),
            )
        };
        let mut by_key: HashMap<(i64, i64, i64, i64), u32> = HashMap::new();
        for (i, p) in world.planes.iter().enumerate() {
            by_key.entry(key(p.normal, p.dist)).or_insert(i as u32);
        }
        let mut canon = Vec::with_capacity(n);
        let mut flip = HashMap::new();
        for i in 0..n {
            let p = world.planes[i];
            let positive = p
                .normal
                .iter()
                .find(|c| c.abs() > 1e-6)
                .is_none_or(|&c| c > 0.0);
            let flipped_normal = [-p.normal[0], -p.normal[1], -p.normal[2]];
            let twin = match by_key.get(&key(flipped_normal, -p.dist)) {
                Some(&t) => t,
                None => {
                    let t = world.planes.len() as u32;
                    world.planes.push(world::Plane::new(
                        crate::math::Vec3::from_array(flipped_normal),
                        -p.dist,
                    ));
                    by_key.insert(key(flipped_normal, -p.dist), t);
                    t
                }
            };
            let own = by_key[&key(p.normal, p.dist)];
            let (c, other) = if positive { (own, twin) } else { (twin, own) };
            canon.push((c, !positive));
            flip.insert(c, other);
        }
        Self { canon, flip }
    }

    fn of(&self, plane: u32) -> (u32, bool) {
        self.canon
            .get(plane as usize)
            .copied()
            .unwrap_or((plane, false))
    }
}

/// A fragment of a brush (its index); each face records its world plane,
/// whose normal points out of the fragment.
type Fragment = fragment::Fragment<u32, u32>;

struct Builder<'a> {
    world: &'a mut WorldData,
    canon: PlaneCanon,
    leaf_brushes: Vec<Vec<u32>>,
}

pub fn build(
    world: &mut WorldData,
    brushes: &[BrushInput],
    patches: &[PatchInput],
    source_planes: &[q3bsp::BspPlane],
    source_node_planes: &[u32],
) -> Result<BuildStats, CompileError> {
    let canon = PlaneCanon::new(world, source_planes);
    let source_splitters: HashSet<u32> =
        source_node_planes.iter().map(|&p| canon.of(p).0).collect();
    let fragments: Vec<Fragment> = brushes
        .iter()
        .filter(|b| b.faces.len() >= 4)
        .map(|b| Fragment {
            owner: b.index,
            faces: b
                .faces
                .iter()
                .map(|f| fragment::Face {
                    plane: f.plane,
                    canon: canon.of(f.plane).0,
                    winding: f.winding.clone(),
                    candidate: true,
                })
                .collect(),
        })
        .collect();
    let mut builder = Builder {
        world,
        canon,
        leaf_brushes: Vec::new(),
    };
    world_reset_tree(builder.world);
    // Nodes are created in pre-order, so the root is node 0 (or leaf 0 when
    // nothing needed splitting), which is what `World::root` expects.
    builder.build_node(fragments, 0)?;
    // Flatten leaf brush lists.
    let Builder {
        world,
        leaf_brushes,
        canon,
    } = builder;
    if !source_splitters.is_empty() {
        for node in world.nodes.iter_mut() {
            if !source_splitters.contains(&canon.of(node.plane).0) {
                node.flags |= world::NODE_CLOSED_PLANE;
            }
        }
    }
    for (leaf, list) in world.leaves.iter_mut().zip(&leaf_brushes) {
        leaf.first_brush = world.leaf_brushes.len() as u32;
        leaf.num_brushes = list.len() as u32;
        world.leaf_brushes.extend_from_slice(list);
    }
    file_patches(world, patches);
    Ok(BuildStats { bevels_added: 0 })
}

fn world_reset_tree(world: &mut WorldData) {
    world.nodes.clear();
    world.leaves.clear();
    world.leaf_brushes.clear();
    world.leaf_patches.clear();
}

impl Builder<'_> {
    fn build_node(&mut self, fragments: Vec<Fragment>, depth: usize) -> Result<i32, CompileError> {
        if depth > MAX_DEPTH {
            return Err(CompileError::TooDeep(MAX_DEPTH));
        }
        let Some(split) = fragment::choose_split(self, &fragments, MAX_CANDIDATES) else {
            return Ok(self.make_leaf(&fragments));
        };
        let node_index = self.world.nodes.len();
        self.world.nodes.push(world::Node {
            plane: split,
            children: [0, 0],
            flags: 0,
        });
        let (front, back) = fragment::partition(self, fragments, split);
        let front_child = self.build_node(front, depth + 1)?;
        let back_child = self.build_node(back, depth + 1)?;
        self.world.nodes[node_index].children = [front_child, back_child];
        Ok(node_index as i32)
    }

    fn make_leaf(&mut self, fragments: &[Fragment]) -> i32 {
        let mut brushes: Vec<u32> = fragments.iter().map(|f| f.owner).collect();
        // Brushes are numbered in the source's leaf order: the reference keeps
        // the first of two equal contacts.
        brushes.sort_unstable();
        brushes.dedup();
        let contents = brushes
            .iter()
            .fold(0, |acc, &b| acc | self.world.brushes[b as usize].contents);
        let index = self.world.leaves.len();
        self.world.leaves.push(world::Leaf {
            contents,
            first_brush: 0,
            num_brushes: 0,
            first_patch: 0,
            num_patches: 0,
        });
        self.leaf_brushes.push(brushes);
        -1 - index as i32
    }

    fn plane_f64(&self, plane: u32) -> (DVec3, f64) {
        let p = &self.world.planes[plane as usize];
        (dvec(p.normal()), p.dist as f64)
    }
}

impl Planes for Builder<'_> {
    type Owner = u32;
    type FacePlane = u32;

    fn plane(&self, canon: u32) -> (DVec3, f64) {
        self.plane_f64(canon)
    }

    fn is_axial(&self, canon: u32) -> bool {
        self.world.planes[canon as usize].axis < 3
    }

    fn face_plane(&self, plane: &u32) -> (DVec3, f64) {
        self.plane_f64(*plane)
    }

    fn faces_along(&self, plane: &u32, canon: u32) -> bool {
        *plane == canon
    }

    /// The front half's cap lies on the canonical plane's flipped twin.
    fn cap_planes(&self, canon: u32) -> [u32; 2] {
        let flipped = self.canon.flip.get(&canon).copied().unwrap_or(canon);
        [flipped, canon]
    }
}

/// Files each patch into every leaf its bounds (grown by the walk slack) touch.
fn file_patches(world: &mut WorldData, patches: &[PatchInput]) {
    let mut per_leaf: Vec<Vec<u32>> = vec![Vec::new(); world.leaves.len()];
    let mut stack = Vec::new();
    for p in patches {
        let grow = crate::math::Vec3::splat(TREE_WALK_SLACK);
        let lo = crate::math::Vec3::from_array(world.patches[p.index as usize].mins) - grow;
        let hi = crate::math::Vec3::from_array(world.patches[p.index as usize].maxs) + grow;
        let centre = (lo + hi) * 0.5;
        let half = (hi - lo) * 0.5;
        stack.clear();
        stack.push(world.root());
        while let Some(child) = stack.pop() {
            if child < 0 {
                per_leaf[(-1 - child) as usize].push(p.index);
                continue;
            }
            let node = world.nodes[child as usize];
            let plane = &world.planes[node.plane as usize];
            let dist = plane.distance(centre);
            let reach = plane.normal().abs().dot(half);
            if dist + reach >= 0.0 {
                stack.push(node.children[0]);
            }
            if dist - reach < 0.0 {
                stack.push(node.children[1]);
            }
        }
    }
    for (leaf, list) in world.leaves.iter_mut().zip(per_leaf.iter_mut()) {
        list.sort_unstable();
        list.dedup();
        leaf.first_patch = world.leaf_patches.len() as u32;
        leaf.num_patches = list.len() as u32;
        world.leaf_patches.extend_from_slice(list);
    }
}
