//! Onion hulls (Golodetz, "Onion BSPs", Overload 118, after van Waveren's
//! Quake III bot work): the configuration spaces of a few registered box
//! sizes compiled into the world's one tree.
//!
//! For hull `h`, brush `b`'s obstacle is the brush with every side (bevels
//! included) pushed out by the hull box's support distance along its normal,
//! in exactly the arithmetic the box sweep clips with (`trace::brush`). The
//! compiled tree is refined under each of its leaves by the faces of the
//! obstacles that reach the leaf, until every new leaf cell is wholly inside
//! or wholly outside each obstacle: the obstacles in a cell are the fragments
//! left there once all their faces have split the path (a fragment whose
//! faces all bound the cell fills it). Each new leaf records, per hull, the
//! brushes whose obstacle holds it (its solidity bit is whether there is
//! one), and the patches whose bounds grown by the hull box reach it.
//!
//! Every new leaf keeps its parent leaf's ordinary record (contents, brush
//! and patch ranges), so ray and box sweeps see the same brushes in the same
//! order and answer exactly as before; only their walk gets deeper.

use super::fragment::{self, Planes};
use super::CompileError;
use crate::margins::{HULL_PATCH_MARGIN, PLANE_SIDE_EPSILON};
use crate::math::{dvec, DVec3, Vec3, Winding};
use crate::world::{self, HullLeaf, HullSpec, WorldData};
use std::collections::HashMap;

/// Deepest tree we build (as the main builder).
const MAX_DEPTH: usize = super::tree::MAX_DEPTH;
/// Splitting planes scored per node (a deterministic sample when there are more).
const MAX_CANDIDATES: usize = 32;
/// The splitting work the hull budget allows per node of it: faces of the
/// fragments reaching a leaf being refined, summed over the leaves refined
/// (what the compile's time follows). Real maps measured 60-400 per node
/// added: a map whose obstacles crowd a few cells fails in seconds rather
/// than building its first nodes for minutes.
const WORK_PER_BUDGET_NODE: u64 = 100;

/// The box sweep's view of a box: its centre offset and the corner offsets
/// by sign bits, computed as `trace::work::TraceWork` does.
pub fn hull_offsets(h: &HullSpec) -> (Vec3, [Vec3; 8]) {
    let (mins, maxs) = (Vec3::from_array(h.mins), Vec3::from_array(h.maxs));
    let offset = (mins + maxs) * 0.5;
    let size0 = mins - offset;
    let size1 = maxs - offset;
    let mut offsets = [Vec3::ZERO; 8];
    for (bits, corner) in offsets.iter_mut().enumerate() {
        *corner = Vec3::new(
            if bits & 1 != 0 { size1.x } else { size0.x },
            if bits & 2 != 0 { size1.y } else { size0.y },
            if bits & 4 != 0 { size1.z } else { size0.z },
        );
    }
    (size1, offsets)
}

/// What the refinement added.
#[derive(Debug, Clone, Copy, Default)]
pub struct OnionStats {
    pub nodes_added: usize,
    pub leaves_added: usize,
}

/// Splitting planes by value, each kept in one orientation (first non-zero
/// normal component positive) and given a world plane when first used.
#[derive(Default)]
struct PlaneSet {
    ids: HashMap<([u32; 3], u32), u32>,
    planes: Vec<(Vec3, f32)>,
    world_index: Vec<Option<u32>>,
}

impl PlaneSet {
    /// The canonical id of the plane `n·x = d` and whether `(n, d)` is its flip.
    fn id(&mut self, n: Vec3, d: f32) -> (u32, bool) {
        // `+ 0.0` turns -0.0 into 0.0, so both spell one key.
        let n = n + Vec3::ZERO;
        let d = d + 0.0;
        let positive = n
            .to_array()
            .iter()
            .find(|c| **c != 0.0)
            .is_none_or(|c| *c > 0.0);
        let (cn, cd) = if positive { (n, d) } else { (-n, -d) };
        let (cn, cd) = (cn + Vec3::ZERO, cd + 0.0);
        let key = (cn.to_array().map(f32::to_bits), cd.to_bits());
        let next = self.planes.len() as u32;
        let id = *self.ids.entry(key).or_insert(next);
        if id == next {
            self.planes.push((cn, cd));
            self.world_index.push(None);
        }
        (id, !positive)
    }

    fn f64(&self, id: u32) -> (DVec3, f64) {
        let (n, d) = self.planes[id as usize];
        (dvec(n), d as f64)
    }

    fn is_axial(&self, id: u32) -> bool {
        let n = self.planes[id as usize].0;
        n.to_array().iter().filter(|c| **c != 0.0).count() == 1
    }

    /// The world plane of canonical plane `id`, added on first use.
    fn world_plane(&mut self, world: &mut WorldData, id: u32) -> u32 {
        if let Some(w) = self.world_index[id as usize] {
            return w;
        }
        let (n, d) = self.planes[id as usize];
        let w = world.planes.len() as u32;
        world.planes.push(world::Plane::new(n, d));
        self.world_index[id as usize] = Some(w);
        w
    }
}

/// What an obstacle fragment belongs to.
#[derive(Clone, Copy)]
struct Owner {
    hull: u32,
    brush: u32,
}

/// A fragment of a brush's obstacle for a hull; each face records its
/// outward plane in f64 (obstacle planes are not world planes).
type Fragment = fragment::Fragment<Owner, (DVec3, f64)>;

/// The obstacle of `brush` for a hull: its sides pushed out, with their polygons.
fn obstacle(
    world: &WorldData,
    planes: &mut PlaneSet,
    brush: &world::Brush,
    hull: u32,
    brush_index: u32,
    offsets: &[Vec3; 8],
) -> Option<Fragment> {
    let sides = &world.brush_sides[brush.first_side as usize..][..brush.num_sides as usize];
    // The shifted planes, computed as the box clip computes them.
    let shifted: Vec<(Vec3, f32)> = sides
        .iter()
        .map(|s| {
            let p = &world.planes[s.plane as usize];
            let normal = p.normal();
            (normal, p.dist - offsets[p.sign_bits as usize].dot(normal))
        })
        .collect();
    let mut faces = Vec::new();
    for (i, &(n, d)) in shifted.iter().enumerate() {
        let (normal, dist) = (dvec(n), d as f64);
        let mut winding = Winding::base_for_plane(normal, dist);
        let mut alive = true;
        for (j, &(on, od)) in shifted.iter().enumerate() {
            if i == j {
                continue;
            }
            let (other_n, other_d) = (dvec(on), od as f64);
            let coplanar = winding
                .points
                .iter()
                .all(|p| (p.dot(other_n) - other_d).abs() <= PLANE_SIDE_EPSILON);
            if coplanar && other_n.dot(normal) > 0.0 {
                // The same face twice: keep the first.
                if j < i {
                    alive = false;
                    break;
                }
                continue;
            }
            if !winding.clip_back(other_n, other_d, PLANE_SIDE_EPSILON) {
                alive = false;
                break;
            }
        }
        if alive && winding_area(&winding) > 1e-3 {
            let (canon, _) = planes.id(n, d);
            faces.push(fragment::Face {
                canon,
                plane: (normal, dist),
                winding,
                candidate: true,
            });
        }
    }
    (faces.len() >= 4).then_some(Fragment {
        owner: Owner {
            hull,
            brush: brush_index,
        },
        faces,
    })
}

fn winding_area(w: &Winding) -> f64 {
    let mut total = DVec3::ZERO;
    for i in 1..w.points.len().saturating_sub(1) {
        total += (w.points[i] - w.points[0]).cross(w.points[i + 1] - w.points[0]);
    }
    total.length() * 0.5
}

struct Refiner<'a> {
    world: &'a mut WorldData,
    planes: PlaneSet,
    hulls: usize,
    base_nodes: Vec<world::Node>,
    base_leaves: Vec<world::Leaf>,
    nodes: Vec<world::Node>,
    leaves: Vec<world::Leaf>,
    /// Per new leaf and hull (leaf-major): the brushes whose obstacle holds the cell.
    hull_brushes: Vec<Vec<u32>>,
    /// The most nodes the refined tree may hold: the base tree's and the
    /// budget's ...
    node_limit: usize,
    /// ... and the most splitting work (see [`WORK_PER_BUDGET_NODE`]).
    work_limit: u64,
    work: u64,
    budget: usize,
}

/// Refines `world`'s tree by the obstacles of `hulls` and fills its hull
/// records (see the module documentation), adding at most `budget` nodes
/// with at most [`WORK_PER_BUDGET_NODE`] times that much splitting work.
/// The world's tree must be built.
pub fn build(
    world: &mut WorldData,
    hulls: &[HullSpec],
    budget: usize,
) -> Result<OnionStats, CompileError> {
    if hulls.is_empty() {
        return Ok(OnionStats::default());
    }
    if hulls.len() > world::MAX_HULLS {
        return Err(CompileError::TooManyHulls(world::MAX_HULLS));
    }
    let mut planes = PlaneSet::default();
    let mut fragments = Vec::new();
    for (h, spec) in hulls.iter().enumerate() {
        let (_, offsets) = hull_offsets(spec);
        for (b, brush) in world.brushes.iter().enumerate() {
            // A brush without contents is never hit, whatever the mask.
            if brush.contents == 0 {
                continue;
            }
            if let Some(f) = obstacle(world, &mut planes, brush, h as u32, b as u32, &offsets) {
                fragments.push(f);
            }
        }
    }
    let root = world.root();
    let base_nodes = std::mem::take(&mut world.nodes);
    let base_leaves = std::mem::take(&mut world.leaves);
    let (old_nodes, old_leaves) = (base_nodes.len(), base_leaves.len());
    let mut refiner = Refiner {
        world,
        planes,
        hulls: hulls.len(),
        base_nodes,
        base_leaves,
        nodes: Vec::new(),
        leaves: Vec::new(),
        hull_brushes: Vec::new(),
        node_limit: old_nodes.saturating_add(budget),
        work_limit: (budget as u64).saturating_mul(WORK_PER_BUDGET_NODE),
        work: 0,
        budget,
    };
    refiner.rebuild(root, fragments, 0)?;
    let Refiner {
        world,
        nodes,
        leaves,
        hull_brushes,
        ..
    } = refiner;
    world.nodes = nodes;
    world.leaves = leaves;
    let hull_patches = file_hull_patches(world, hulls);
    world.hull_leaves.clear();
    world.hull_leaf_brushes.clear();
    world.hull_leaf_patches.clear();
    world.leaf_hull_solid = vec![0; world.leaves.len()];
    for (record, (brushes, patches)) in hull_brushes.iter().zip(&hull_patches).enumerate() {
        let (leaf, h) = (record / hulls.len(), record % hulls.len());
        let contents = brushes
            .iter()
            .fold(0, |acc, &b| acc | world.brushes[b as usize].contents);
        if !brushes.is_empty() {
            world.leaf_hull_solid[leaf] |= 1 << h;
        }
        world.hull_leaves.push(HullLeaf {
            contents,
            first_brush: world.hull_leaf_brushes.len() as u32,
            num_brushes: brushes.len() as u32,
            first_patch: world.hull_leaf_patches.len() as u32,
            num_patches: patches.len() as u32,
        });
        world.hull_leaf_brushes.extend_from_slice(brushes);
        world.hull_leaf_patches.extend_from_slice(patches);
    }
    Ok(OnionStats {
        nodes_added: world.nodes.len() - old_nodes,
        leaves_added: world.leaves.len() - old_leaves,
    })
}

impl Refiner<'_> {
    /// Copies the compiled tree below `child`, carrying the fragments down,
    /// and refines each of its leaves.
    fn rebuild(
        &mut self,
        child: i32,
        fragments: Vec<Fragment>,
        depth: usize,
    ) -> Result<i32, CompileError> {
        if depth > MAX_DEPTH {
            return Err(CompileError::TooDeep(MAX_DEPTH));
        }
        if child < 0 {
            return self.refine_leaf((-1 - child) as usize, fragments, depth);
        }
        let node = self.base_nodes[child as usize];
        let index = self.push_node(node)?;
        let plane = self.world.planes[node.plane as usize];
        let (canon, flipped) = self.planes.id(plane.normal(), plane.dist);
        let (mut front, mut back) = fragment::partition(self, fragments, canon);
        if flipped {
            // The node's front is the canonical plane's back.
            std::mem::swap(&mut front, &mut back);
        }
        let c0 = self.rebuild(node.children[0], front, depth + 1)?;
        let c1 = self.rebuild(node.children[1], back, depth + 1)?;
        self.nodes[index].children = [c0, c1];
        Ok(index as i32)
    }

    /// Splits the cell of base leaf `leaf` by the fragments' faces until none
    /// is left to use.
    fn refine_leaf(
        &mut self,
        leaf: usize,
        fragments: Vec<Fragment>,
        depth: usize,
    ) -> Result<i32, CompileError> {
        if depth > MAX_DEPTH {
            return Err(CompileError::TooDeep(MAX_DEPTH));
        }
        self.work += fragments.iter().map(|f| f.faces.len() as u64).sum::<u64>();
        if self.work > self.work_limit {
            return Err(CompileError::HullBudget(self.budget));
        }
        let Some(split) = fragment::choose_split(self, &fragments, MAX_CANDIDATES) else {
            return Ok(self.make_leaf(leaf, &fragments));
        };
        let plane = self.planes.world_plane(self.world, split);
        let index = self.push_node(world::Node {
            plane,
            children: [0, 0],
            flags: 0,
        })?;
        let (front, back) = fragment::partition(self, fragments, split);
        let c0 = self.refine_leaf(leaf, front, depth + 1)?;
        let c1 = self.refine_leaf(leaf, back, depth + 1)?;
        self.nodes[index].children = [c0, c1];
        Ok(index as i32)
    }

    /// Appends `node`, within the budget: its index.
    fn push_node(&mut self, node: world::Node) -> Result<usize, CompileError> {
        if self.nodes.len() >= self.node_limit {
            return Err(CompileError::HullBudget(self.budget));
        }
        self.nodes.push(node);
        Ok(self.nodes.len() - 1)
    }

    fn make_leaf(&mut self, base_leaf: usize, fragments: &[Fragment]) -> i32 {
        let index = self.leaves.len();
        self.leaves.push(self.base_leaves[base_leaf]);
        for h in 0..self.hulls as u32 {
            let mut brushes: Vec<u32> = fragments
                .iter()
                .filter(|f| f.owner.hull == h)
                .map(|f| f.owner.brush)
                .collect();
            brushes.sort_unstable();
            brushes.dedup();
            self.hull_brushes.push(brushes);
        }
        -1 - index as i32
    }
}

impl Planes for Refiner<'_> {
    type Owner = Owner;
    type FacePlane = (DVec3, f64);

    fn plane(&self, canon: u32) -> (DVec3, f64) {
        self.planes.f64(canon)
    }

    fn is_axial(&self, canon: u32) -> bool {
        self.planes.is_axial(canon)
    }

    fn face_plane(&self, plane: &(DVec3, f64)) -> (DVec3, f64) {
        *plane
    }

    fn faces_along(&self, plane: &(DVec3, f64), canon: u32) -> bool {
        plane.0.dot(self.planes.f64(canon).0) > 0.0
    }

    fn cap_planes(&self, canon: u32) -> [(DVec3, f64); 2] {
        let (n, d) = self.planes.f64(canon);
        [(-n, -d), (n, d)]
    }
}

/// Per new leaf and hull (leaf-major): the patches whose bounds, grown by the
/// hull box and [`HULL_PATCH_MARGIN`], reach the leaf cell (the box's centre can
/// only touch a patch from there).
fn file_hull_patches(world: &WorldData, hulls: &[HullSpec]) -> Vec<Vec<u32>> {
    let mut lists: Vec<Vec<u32>> = vec![Vec::new(); world.leaves.len() * hulls.len()];
    let mut stack = Vec::new();
    for (h, spec) in hulls.iter().enumerate() {
        let (extents, _) = hull_offsets(spec);
        let grow = extents + Vec3::splat(HULL_PATCH_MARGIN);
        for (p, patch) in world.patches.iter().enumerate() {
            let lo = Vec3::from_array(patch.mins) - grow;
            let hi = Vec3::from_array(patch.maxs) + grow;
            let centre = (lo + hi) * 0.5;
            let half = (hi - lo) * 0.5;
            stack.clear();
            stack.push(world.root());
            while let Some(child) = stack.pop() {
                if child < 0 {
                    lists[(-1 - child) as usize * hulls.len() + h].push(p as u32);
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
    }
    for list in &mut lists {
        list.sort_unstable();
    }
    lists
}
