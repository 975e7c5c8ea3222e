//! Walking the tree: which leaves can the swept box touch, nearest first.

use super::brush::{box_in_brush, trace_through_brush};
use super::patch::{position_test_patch, trace_through_patch};
use super::work::{Scratch, TraceWork};
use crate::math::{Vec3, TREE_WALK_SLACK};
use crate::world::{Brush, KernelTree, Leaf, Patch, World};
use glam::Vec3A;

/// What one trace's walk did, counted when asked for (`trace_with_stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalkStats {
    /// Tree nodes whose plane the walk tested.
    pub nodes: u32,
    /// Leaves the walk reached.
    pub leaves: u32,
    /// Of those, leaves listing at least one brush or patch.
    pub full_leaves: u32,
    /// Brushes clipped (or position-tested) exactly.
    pub brushes: u32,
    /// Patches clipped (or position-tested) exactly.
    pub patches: u32,
    /// Of the nodes, those left at once: nothing below near the swept box.
    pub culled: u32,
    /// Nodes of the kernel's bounding-volume hierarchy the fast trace tested
    /// (four children each).
    pub bvh_nodes: u32,
    /// 1 when the fast trace left the answer to the BSP walk (it depended
    /// on the visit order), else 0.
    pub fallbacks: u32,
}

/// Counting hooks of the walk: `()` counts nothing and compiles away.
pub(crate) trait Probe {
    fn node(&mut self) {}
    fn leaf(&mut self, _leaf: &Leaf) {}
    fn brush(&mut self) {}
    fn patch(&mut self) {}
    fn culled(&mut self) {}
    fn bvh_node(&mut self) {}
    fn fallback(&mut self) {}
}

impl Probe for () {}

impl Probe for WalkStats {
    #[inline(always)]
    fn node(&mut self) {
        self.nodes += 1;
    }
    #[inline(always)]
    fn leaf(&mut self, leaf: &Leaf) {
        self.leaves += 1;
        self.full_leaves += (leaf.num_brushes + leaf.num_patches > 0) as u32;
    }
    #[inline(always)]
    fn brush(&mut self) {
        self.brushes += 1;
    }
    #[inline(always)]
    fn patch(&mut self) {
        self.patches += 1;
    }
    #[inline(always)]
    fn culled(&mut self) {
        self.culled += 1;
    }
    #[inline(always)]
    fn bvh_node(&mut self) {
        self.bvh_nodes += 1;
    }
    #[inline(always)]
    fn fallback(&mut self) {
        self.fallbacks += 1;
    }
}

/// A piece of the move still to walk: `child` between fractions `f1..f2`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Segment {
    child: i32,
    f1: f32,
    f2: f32,
    p1: Vec3A,
    p2: Vec3A,
}

/// One node as the walk reads it: plane, children, and what lies below each child.
struct NodeView {
    normal: Vec3A,
    dist: f32,
    children: [i32; 2],
    /// OR of the contents below each child (all ones when unknown).
    below: [u32; 2],
    /// Bounds of everything below (see `world::kernel`); only read when
    /// [`Nodes::BOUNDED`].
    mins: Vec3A,
    maxs: Vec3A,
}

/// Where the walk reads nodes from. Both sources give the same planes and
/// children, so the walk does the same arithmetic in the same order.
trait Nodes {
    /// Whether nodes carry bounds and brushes cull boxes.
    const BOUNDED: bool;
    fn get(&self, index: i32) -> NodeView;
    /// Whether brush `b` can be touched by a move within `bounds`.
    fn may_touch_brush(&self, b: usize, bounds: &[Vec3A; 2]) -> bool;
}

/// The reference: `nodes` and `planes` of the file, nothing known below.
struct FileNodes<'a, 'w>(&'a World<'w>);

impl Nodes for FileNodes<'_, '_> {
    const BOUNDED: bool = false;

    #[inline(always)]
    fn may_touch_brush(&self, _b: usize, _bounds: &[Vec3A; 2]) -> bool {
        true
    }

    #[inline(always)]
    fn get(&self, index: i32) -> NodeView {
        let node = &self.0.nodes[index as usize];
        let plane = &self.0.planes[node.plane as usize];
        NodeView {
            normal: Vec3A::from(plane.normal()),
            dist: plane.dist,
            children: node.children,
            below: [u32::MAX; 2],
            mins: Vec3A::NEG_INFINITY,
            maxs: Vec3A::INFINITY,
        }
    }
}

/// The kernel nodes: plane inline, contents below each child, bounds.
struct PackedNodes<'w>(&'w KernelTree);

impl Nodes for PackedNodes<'_> {
    const BOUNDED: bool = true;

    #[inline(always)]
    fn may_touch_brush(&self, b: usize, bounds: &[Vec3A; 2]) -> bool {
        let [lo, hi] = self.0.brush_bounds[b];
        overlaps(bounds, Vec3A::from_array(lo), Vec3A::from_array(hi))
    }

    #[inline(always)]
    fn get(&self, index: i32) -> NodeView {
        let node = &self.0.nodes[index as usize];
        NodeView {
            normal: Vec3A::from_vec4(node.plane),
            dist: node.plane.w,
            children: node.children,
            below: node.contents_below,
            mins: node.mins,
            maxs: node.maxs,
        }
    }
}

/// Traces the whole move through the tree from the root, nearest side first,
/// with an explicit stack of the far sides still to visit.
pub(crate) fn trace_tree<P: Probe>(
    world: &World,
    w: &mut TraceWork,
    scratch: &mut Scratch,
    probe: &mut P,
) {
    let kernel = world.kernel;
    if kernel.matches(world) {
        let below = kernel.nodes[0].contents_below;
        if (below[0] | below[1]) & w.mask == 0 {
            // Nothing anywhere in the mask.
            return;
        }
        walk_from(world, &PackedNodes(kernel), w, scratch, probe);
    } else {
        walk_from(world, &FileNodes(world), w, scratch, probe);
    }
}

fn walk_from<P: Probe, N: Nodes>(
    world: &World,
    nodes: &N,
    w: &mut TraceWork,
    scratch: &mut Scratch,
    probe: &mut P,
) {
    let mut stack = std::mem::take(&mut scratch.segment_stack);
    stack.clear();
    stack.push(Segment {
        child: world.root(),
        f1: 0.0,
        f2: 1.0,
        p1: w.start,
        p2: w.end,
    });
    // Rays and boxes get their own copy of the walk: a ray's plane reach
    // is a constant.
    if w.is_point {
        while let Some(seg) = stack.pop() {
            walk_segment::<P, N, true>(world, nodes, w, scratch, seg, &mut stack, probe);
            if w.stop_at_any_hit && w.result.fraction < 1.0 {
                break;
            }
        }
    } else {
        while let Some(seg) = stack.pop() {
            walk_segment::<P, N, false>(world, nodes, w, scratch, seg, &mut stack, probe);
            if w.stop_at_any_hit && w.result.fraction < 1.0 {
                break;
            }
        }
    }
    scratch.segment_stack = stack;
}

/// Descends from `seg.child` along the near side, pushing far sides. Children
/// with nothing in the mask below them are not entered: they hold nothing
/// the trace could touch, so the answer is the same without them.
#[inline]
fn walk_segment<P: Probe, N: Nodes, const RAY: bool>(
    world: &World,
    nodes: &N,
    w: &mut TraceWork,
    scratch: &mut Scratch,
    seg: Segment,
    stack: &mut Vec<Segment>,
    probe: &mut P,
) {
    let Segment {
        mut child,
        f1: p1f,
        mut f2,
        p1,
        mut p2,
    } = seg;
    // Something nearer than this whole segment was already hit.
    if w.result.fraction <= p1f {
        return;
    }
    let extents = w.extents;
    let bounds = w.bounds;
    let mask = w.mask;
    while child >= 0 {
        probe.node();
        let node = nodes.get(child);
        // Nothing below lies near enough to the swept box to be touched.
        if N::BOUNDED && !overlaps(&bounds, node.mins, node.maxs) {
            probe.culled();
            return;
        }
        let normal = node.normal;
        // A full dot product gives the same bits as reading one component
        // of an axial plane, without the branch.
        let t1 = normal.dot(p1) - node.dist;
        let t2 = normal.dot(p2) - node.dist;
        // How far the box reaches along the normal, plus the slack. For an
        // axial plane |n|·e is exactly the one extent, so no branch on the axis.
        let reach = if RAY {
            TREE_WALK_SLACK
        } else {
            normal.abs().dot(extents) + TREE_WALK_SLACK
        };
        if t1 >= reach && t2 >= reach {
            if node.below[0] & mask == 0 {
                return;
            }
            child = node.children[0];
            continue;
        }
        if t1 < -reach && t2 < -reach {
            if node.below[1] & mask == 0 {
                return;
            }
            child = node.children[1];
            continue;
        }
        // The segment straddles the (thickened) plane: near side now, far side later.
        let (near, frac_near_end, frac_far_start) = if t1 < t2 {
            let inv = 1.0 / (t1 - t2);
            (1usize, (t1 - reach) * inv, (t1 + reach) * inv)
        } else if t1 > t2 {
            let inv = 1.0 / (t1 - t2);
            (0usize, (t1 + reach) * inv, (t1 - reach) * inv)
        } else {
            (0usize, 1.0, 0.0)
        };
        if node.below[near ^ 1] & mask != 0 {
            let frac2 = frac_far_start.clamp(0.0, 1.0);
            stack.push(Segment {
                child: node.children[near ^ 1],
                f1: p1f + (f2 - p1f) * frac2,
                f2,
                p1: p1 + (p2 - p1) * frac2,
                p2,
            });
        }
        if node.below[near] & mask == 0 {
            return;
        }
        let frac = frac_near_end.clamp(0.0, 1.0);
        f2 = p1f + (f2 - p1f) * frac;
        p2 = p1 + (p2 - p1) * frac;
        child = node.children[near];
    }
    trace_leaf(
        world,
        nodes,
        w,
        scratch,
        &world.leaves[(-1 - child) as usize],
        probe,
    );
}

/// Whether the box `b` overlaps `lo..=hi`.
#[inline(always)]
fn overlaps(b: &[Vec3A; 2], lo: Vec3A, hi: Vec3A) -> bool {
    (b[0].cmple(hi) & b[1].cmpge(lo)).all()
}

fn trace_leaf<P: Probe, N: Nodes>(
    world: &World,
    nodes: &N,
    w: &mut TraceWork,
    scratch: &mut Scratch,
    leaf: &Leaf,
    probe: &mut P,
) {
    probe.leaf(leaf);
    let bounds = w.bounds;
    for (index, _) in new_brushes(world, scratch, leaf, w.mask) {
        if !nodes.may_touch_brush(index, &bounds) {
            continue;
        }
        probe.brush();
        trace_through_brush(world, index, w);
        // Like the reference, stop at a contact at the very start.
        if w.result.allsolid || w.result.fraction == 0.0 {
            return;
        }
        if w.stop_at_any_hit && w.result.fraction < 1.0 {
            return;
        }
    }
    for patch in new_patches(world, scratch, leaf, w.mask) {
        probe.patch();
        trace_through_patch(world, patch, w);
        if w.result.allsolid || (w.stop_at_any_hit && w.result.fraction < 1.0) {
            return;
        }
    }
}

/// The brushes of `leaf` this query meets for the first time whose contents
/// meet `mask`, with their indices, in leaf order (the reference's
/// tie-breaking order).
fn new_brushes<'w, 's>(
    world: &World<'w>,
    scratch: &'s mut Scratch,
    leaf: &Leaf,
    mask: u32,
) -> impl Iterator<Item = (usize, &'w Brush)> + use<'w, 's> {
    let brushes = world.brushes;
    let first = leaf.first_brush as usize;
    world.leaf_brushes[first..first + leaf.num_brushes as usize]
        .iter()
        .filter(move |&&b| scratch.first_visit_brush(b as usize))
        .map(move |&b| (b as usize, &brushes[b as usize]))
        .filter(move |(_, b)| b.contents & mask != 0)
}

/// As [`new_brushes`], for patches.
fn new_patches<'w, 's>(
    world: &World<'w>,
    scratch: &'s mut Scratch,
    leaf: &Leaf,
    mask: u32,
) -> impl Iterator<Item = &'w Patch> + use<'w, 's> {
    let patches = world.patches;
    let first = leaf.first_patch as usize;
    world.leaf_patches[first..first + leaf.num_patches as usize]
        .iter()
        .filter(move |&&p| scratch.first_visit_patch(p as usize))
        .map(move |&p| &patches[p as usize])
        .filter(move |p| p.contents & mask != 0)
}

/// Records that the box starts (and stays) inside something with `contents`.
fn set_inside(w: &mut TraceWork, contents: u32) {
    w.result.startsolid = true;
    w.result.allsolid = true;
    w.result.fraction = 0.0;
    w.result.contents = contents;
}

/// A trace whose start equals its end: is the box inside anything?
pub(crate) fn position_test<P: Probe>(
    world: &World,
    w: &mut TraceWork,
    scratch: &mut Scratch,
    probe: &mut P,
) {
    let lo = Vec3::from(w.start - w.extents - TREE_WALK_SLACK);
    let hi = Vec3::from(w.start + w.extents + TREE_WALK_SLACK);
    scratch.leaf_stack.clear();
    collect_box_leaves(world, world.root(), lo, hi, &mut scratch.leaf_stack, probe);
    let leaves = std::mem::take(&mut scratch.leaf_stack);
    for &leaf_index in &leaves {
        test_in_leaf(world, w, scratch, &world.leaves[leaf_index as usize], probe);
        if w.result.allsolid {
            break;
        }
    }
    scratch.leaf_stack = leaves;
}

/// The leaves whose cells overlap the box `lo..hi`, in tree order (front first).
fn collect_box_leaves<P: Probe>(
    world: &World,
    mut child: i32,
    lo: Vec3,
    hi: Vec3,
    out: &mut Vec<u32>,
    probe: &mut P,
) {
    loop {
        if child < 0 {
            out.push((-1 - child) as u32);
            return;
        }
        probe.node();
        let node = &world.nodes[child as usize];
        let plane = &world.planes[node.plane as usize];
        let n = plane.normal();
        // Distance range of the box's corners from the plane.
        let centre = (lo + hi) * 0.5;
        let half = (hi - lo) * 0.5;
        let d = plane.distance(centre);
        let r = n.abs().dot(half);
        if d - r >= 0.0 {
            child = node.children[0];
        } else if d + r < 0.0 {
            child = node.children[1];
        } else {
            collect_box_leaves(world, node.children[0], lo, hi, out, probe);
            child = node.children[1];
        }
    }
}

fn test_in_leaf<P: Probe>(
    world: &World,
    w: &mut TraceWork,
    scratch: &mut Scratch,
    leaf: &Leaf,
    probe: &mut P,
) {
    probe.leaf(leaf);
    for (_, brush) in new_brushes(world, scratch, leaf, w.mask) {
        probe.brush();
        if box_in_brush(world, brush, w) {
            set_inside(w, brush.contents);
            return;
        }
    }
    for patch in new_patches(world, scratch, leaf, w.mask) {
        probe.patch();
        if position_test_patch(world, patch, w) {
            set_inside(w, patch.contents);
            return;
        }
    }
}
