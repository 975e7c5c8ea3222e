//! Walking the tree: which leaves can the swept box touch, nearest first.

use super::brush::{box_in_brush, clip_brush, trace_through_brush, BrushClip};
use super::fast::{brush_contact, Contact};
use super::patch::{box_patch_hit, patch_in_reach, position_test_patch, trace_through_patch};
use super::work::{Scratch, TraceWork};
use crate::math::{Vec3, TREE_WALK_SLACK};
use crate::world::kernel::Below;
use crate::world::{Brush, KernelTree, Leaf, Node, Patch, Plane, SourceTree, World};
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
    /// 1 when any-hit stopped where the move passes through a brush's solid
    /// core, without clipping it (see [`crate::world::cores`]), else 0.
    pub core_stops: u32,
    /// 1 when the nearest contacts tied and the first of them in the
    /// walk's order was found without the whole walk
    /// ([`first_tied_contact`]), else 0.
    pub ties: u32,
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
    fn core_stop(&mut self) {}
    fn tie(&mut self) {}
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
    fn core_stop(&mut self) {
        self.core_stops += 1;
    }
    #[inline(always)]
    fn fallback(&mut self) {
        self.fallbacks += 1;
    }
    #[inline(always)]
    fn tie(&mut self) {
        self.ties += 1;
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
    /// 0/1/2 for a +X/+Y/+Z plane, 3 otherwise; only read by trees whose
    /// [`Nodes::offset`] needs it.
    axis: u32,
    children: [i32; 2],
    /// OR of the contents below each child (all ones when unknown).
    below: [u32; 2],
    /// Bounds of everything below (see `world::kernel`); only read when
    /// [`Nodes::BOUNDED`].
    mins: Vec3A,
    maxs: Vec3A,
}

/// A tree's leaves and what they list.
#[derive(Clone, Copy)]
pub(crate) struct Lists<'w> {
    pub root: i32,
    pub leaves: &'w [Leaf],
    pub leaf_brushes: &'w [u32],
    pub leaf_patches: &'w [u32],
}

impl<'w> Lists<'w> {
    /// The tree that decides the visit order: the source's when the world
    /// has it, else the compiled one.
    pub fn ordering(world: &World<'w>) -> Self {
        if world.source.is_present() {
            Self::source(&world.source)
        } else {
            Self::compiled(world)
        }
    }

    /// The compiled tree's.
    pub fn compiled(world: &World<'w>) -> Self {
        Lists {
            root: world.root(),
            leaves: world.leaves,
            leaf_brushes: world.leaf_brushes,
            leaf_patches: world.leaf_patches,
        }
    }

    /// The source's tree's.
    pub fn source(tree: &SourceTree<'w>) -> Self {
        Lists {
            root: tree.root(),
            leaves: tree.leaves,
            leaf_brushes: tree.leaf_brushes,
            leaf_patches: tree.leaf_patches,
        }
    }

    #[inline(always)]
    pub fn leaf(&self, child: i32) -> &'w Leaf {
        &self.leaves[(-1 - child) as usize]
    }

    /// The brushes leaf `leaf` lists, in order.
    #[inline(always)]
    pub fn brushes(&self, leaf: &Leaf) -> &'w [u32] {
        &self.leaf_brushes[leaf.first_brush as usize..][..leaf.num_brushes as usize]
    }

    /// The patches leaf `leaf` lists, in order.
    #[inline(always)]
    pub fn patches(&self, leaf: &Leaf) -> &'w [u32] {
        &self.leaf_patches[leaf.first_patch as usize..][..leaf.num_patches as usize]
    }
}

/// Where the walk reads nodes from. The compiled tree's two sources give
/// the same planes and children, so the walk does the same arithmetic in the
/// same order; the source's tree is walked as the reference walks it.
trait Nodes {
    /// Whether nodes carry bounds.
    const BOUNDED: bool;
    fn get(&self, index: i32) -> NodeView;

    /// How far the box reaches across `node`'s plane: the walk enters a
    /// side while the box's centre lies within this (plus one unit of
    /// slack) of it. Exact: `|n|·e` (an axial plane's is exactly the one
    /// extent, so no branch on the axis).
    #[inline(always)]
    fn offset<const RAY: bool>(_node: &NodeView, extents: Vec3A, normal: Vec3A) -> f32 {
        support_reach::<RAY>(extents, normal)
    }
}

/// The box's support distance along `normal`: `|n|·e` (0 for a ray).
#[inline(always)]
fn support_reach<const RAY: bool>(extents: Vec3A, normal: Vec3A) -> f32 {
    if RAY {
        0.0
    } else {
        normal.abs().dot(extents)
    }
}

/// A tree read from its records: `nodes` and `planes`, nothing known below.
/// `SOURCE` false: the compiled tree as the file has it. `SOURCE` true: the
/// source's own tree, walked in the reference's order: nearest side first,
/// a box reaching across an axial plane by its extent along the axis and
/// across any other plane by a fixed [`SOURCE_FAR_REACH`] units (rays: not
/// at all), plus the walk's slack. Which leaves it visits, and in what
/// order, decide the first of two equal contacts. The pieces on either side
/// are cut as in the compiled tree, with the slack: every contact the fast
/// trace finds lies in a leaf this walk visits, so the two disagree only on
/// which of two equal contacts comes first.
struct PlainNodes<'w, const SOURCE: bool> {
    nodes: &'w [Node],
    planes: &'w [Plane],
    /// What lies below each node (empty when unknown): the walk skips a
    /// subtree nothing near the move lies in, or nothing in the mask, as
    /// the packed walk does. Leaving out leaves with nothing the move can
    /// touch changes neither the order of the rest nor any answer.
    below: &'w [Below],
}

/// How far a box reaches across a plane that is not axial, as the
/// reference lets it (a bound, not the support distance: it visits more
/// leaves than it must, which only adds leaves to the order). The six
/// development maps' answers agree with this and with the exact support
/// distance alike: there, ties are decided by which leaves list which
/// brushes, not by the reach.
pub(crate) const SOURCE_FAR_REACH: f32 = 2048.0;

impl<const SOURCE: bool> Nodes for PlainNodes<'_, SOURCE> {
    const BOUNDED: bool = SOURCE;

    #[inline(always)]
    fn get(&self, index: i32) -> NodeView {
        let node = &self.nodes[index as usize];
        let plane = &self.planes[node.plane as usize];
        let (below, mins, maxs) = match self.below.get(index as usize) {
            Some(b) => (b.contents, b.mins, b.maxs),
            None => ([u32::MAX; 2], Vec3A::NEG_INFINITY, Vec3A::INFINITY),
        };
        NodeView {
            normal: Vec3A::from(plane.normal()),
            dist: plane.dist,
            axis: plane.axis,
            children: node.children,
            below,
            mins,
            maxs,
        }
    }

    #[inline(always)]
    fn offset<const RAY: bool>(node: &NodeView, extents: Vec3A, normal: Vec3A) -> f32 {
        if !SOURCE {
            return support_reach::<RAY>(extents, normal);
        }
        if node.axis < 3 {
            extents[node.axis as usize]
        } else if RAY {
            0.0
        } else {
            SOURCE_FAR_REACH
        }
    }
}

/// The kernel nodes: plane inline, contents below each child, bounds.
struct PackedNodes<'w>(&'w KernelTree);

impl Nodes for PackedNodes<'_> {
    const BOUNDED: bool = true;

    #[inline(always)]
    fn get(&self, index: i32) -> NodeView {
        let node = &self.0.nodes[index as usize];
        NodeView {
            normal: Vec3A::from_vec4(node.plane),
            dist: node.plane.w,
            axis: 3,
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
    let cull = brush_cull(world);
    walk_tree(
        world,
        w,
        scratch,
        probe,
        |lists, w, scratch, leaf, _, probe| {
            trace_leaf(world, cull, lists, w, scratch, leaf, probe);
            w.stop_at_any_hit && w.result.fraction < 1.0
        },
    );
}

/// The first brush or patch the walk ([`trace_tree`]) meets among those
/// the move touches first, at `frac` (above 0, starting inside nothing: see
/// [`super::fast::Outcome::Tied`]), and what that contact reports: the
/// walk's answer, without the rest of the walk. `w` is the move, its result
/// not yet written; `None` when this cannot tell, and the walk must decide.
///
/// The walk keeps the first of equal contacts (a later one must be strictly
/// nearer), and it skips a piece of the move that starts at or past its
/// nearest contact so far, which is never nearer than `frac`. Walked here
/// without that skipping, and every new brush and patch clipped on its own
/// (in the walk's order: a leaf's brushes, then its patches), the leaves
/// come in the walk's order with more of them; the first primitive found at
/// `frac` in a piece starting before `frac` is the one: the walk reaches
/// that piece (nothing it met before is as near as `frac`), and meets
/// nothing at `frac` before it (it would have come first here too). One
/// found at `frac` first in a piece starting at `frac` or later leaves it
/// to the walk, and so, for a ray, does any patch within reach (a ray's
/// patch hit may replace a nearer contact).
pub(crate) fn first_tied_contact(
    world: &World,
    w: &mut TraceWork,
    scratch: &mut Scratch,
    frac: f32,
) -> Option<Contact> {
    let cull = brush_cull(world);
    let mut first = None;
    walk_tree(
        world,
        w,
        scratch,
        &mut (),
        |lists, w, scratch, leaf, start, _| {
            for (index, _) in new_brushes(world, lists, scratch, leaf, w.mask) {
                if !may_touch_brush(cull, index, &w.bounds) {
                    continue;
                }
                match clip_brush(world, index, w) {
                    BrushClip::Miss => {}
                    BrushClip::Enter { frac: at, .. } if at > frac => {}
                    BrushClip::Enter { frac: at, side } => {
                        // (Nearer than the nearest, or inside: not a tie after all.)
                        first =
                            (at == frac && start < frac).then(|| brush_contact(world, index, side));
                        return true;
                    }
                    BrushClip::Inside { .. } => return true,
                }
            }
            let bounds = w.bounds;
            for patch in new_patches(world, lists, scratch, leaf, w.mask) {
                if w.is_point {
                    if patch_in_reach(patch, &bounds) {
                        return true;
                    }
                    continue;
                }
                match box_patch_hit(world, patch, w) {
                    Some(hit) if hit.frac <= frac => {
                        first = (hit.frac == frac && start < frac).then_some(Contact {
                            normal: hit.normal,
                            dist: hit.dist,
                            surface_flags: patch.surface_flags,
                            contents: patch.contents,
                        });
                        return true;
                    }
                    _ => {}
                }
            }
            false
        },
    );
    first
}

/// The brushes' cull boxes when the world has the kernel's tree (else
/// none): the walk does not clip a brush whose box the move's swept box
/// misses. That changes no answer (see [`crate::world::kernel`]), and on
/// the source's tree, which a box crosses by 2 048 units at every slanted
/// plane, it skips most of the brushes the leaves reached list.
fn brush_cull<'w>(world: &World<'w>) -> &'w [[[f32; 3]; 2]] {
    if world.kernel.matches(world) {
        &world.kernel.brush_bounds
    } else {
        &[]
    }
}

/// Whether brush `b` may be touched by a move within `bounds` (see
/// [`brush_cull`]).
#[inline(always)]
fn may_touch_brush(cull: &[[[f32; 3]; 2]], b: usize, bounds: &[Vec3A; 2]) -> bool {
    cull.get(b)
        .is_none_or(|&[lo, hi]| overlaps(bounds, Vec3A::from(lo), Vec3A::from(hi)))
}

/// Walks the move through the tree that decides the visit order (see
/// [`trace_tree`]), handing each leaf reached to `visit` with the fraction
/// where its piece of the move starts; `visit` returns true to stop.
fn walk_tree<P: Probe>(
    world: &World,
    w: &mut TraceWork,
    scratch: &mut Scratch,
    probe: &mut P,
    visit: impl FnMut(Lists, &mut TraceWork, &mut Scratch, &Leaf, f32, &mut P) -> bool,
) {
    let kernel = world.kernel;
    let known = kernel.matches(world);
    if world.source.is_present() {
        let nodes = PlainNodes::<true> {
            nodes: world.source.nodes,
            planes: world.planes,
            below: if known { &kernel.source_below } else { &[] },
        };
        let lists = Lists::source(&world.source);
        walk_from(&nodes, lists, w, scratch, probe, visit);
    } else if known {
        let below = kernel.nodes[0].contents_below;
        if (below[0] | below[1]) & w.mask == 0 {
            // Nothing anywhere in the mask.
            return;
        }
        let lists = Lists::compiled(world);
        walk_from(&PackedNodes(kernel), lists, w, scratch, probe, visit);
    } else {
        let lists = Lists::compiled(world);
        let nodes = PlainNodes::<false> {
            nodes: world.nodes,
            planes: world.planes,
            below: &[],
        };
        walk_from(&nodes, lists, w, scratch, probe, visit);
    }
}

fn walk_from<P: Probe, N: Nodes>(
    nodes: &N,
    lists: Lists,
    w: &mut TraceWork,
    scratch: &mut Scratch,
    probe: &mut P,
    mut visit: impl FnMut(Lists, &mut TraceWork, &mut Scratch, &Leaf, f32, &mut P) -> bool,
) {
    let mut stack = std::mem::take(&mut scratch.segment_stack);
    stack.clear();
    stack.push(Segment {
        child: lists.root,
        f1: 0.0,
        f2: 1.0,
        p1: w.start,
        p2: w.end,
    });
    // Rays and boxes get their own copy of the descent: a ray's plane
    // reach is a constant.
    while let Some(seg) = stack.pop() {
        let reached = if w.is_point {
            descend::<P, N, true>(nodes, w, seg, &mut stack, probe)
        } else {
            descend::<P, N, false>(nodes, w, seg, &mut stack, probe)
        };
        if let Some((leaf, p1f)) = reached {
            if visit(lists, w, scratch, lists.leaf(leaf), p1f, probe) {
                break;
            }
        }
    }
    scratch.segment_stack = stack;
}

/// Descends from `seg.child` along the near side, pushing far sides, to the
/// leaf it reaches (and the fraction where the piece of the move in it
/// starts), if any. Children with nothing in the mask below them are not
/// entered: they hold nothing the trace could touch, so the answer is the
/// same without them.
#[inline]
fn descend<P: Probe, N: Nodes, const RAY: bool>(
    nodes: &N,
    w: &TraceWork,
    seg: Segment,
    stack: &mut Vec<Segment>,
    probe: &mut P,
) -> Option<(i32, f32)> {
    let Segment {
        mut child,
        f1: p1f,
        mut f2,
        p1,
        mut p2,
    } = seg;
    // Something nearer than this whole segment was already hit.
    if w.result.fraction <= p1f {
        return None;
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
            return None;
        }
        let normal = node.normal;
        // A full dot product gives the same bits as reading one component
        // of an axial plane, without the branch.
        let t1 = normal.dot(p1) - node.dist;
        let t2 = normal.dot(p2) - node.dist;
        // How far the box reaches along the normal, plus the slack.
        let reach = N::offset::<RAY>(&node, extents, normal) + TREE_WALK_SLACK;
        if t1 >= reach && t2 >= reach {
            if node.below[0] & mask == 0 {
                return None;
            }
            child = node.children[0];
            continue;
        }
        if t1 < -reach && t2 < -reach {
            if node.below[1] & mask == 0 {
                return None;
            }
            child = node.children[1];
            continue;
        }
        // The segment straddles the (thickened) plane: near side now, far side later.
        let (near, frac_near_end, frac_far_start) = straddle(t1, t2, reach);
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
            return None;
        }
        let frac = frac_near_end.clamp(0.0, 1.0);
        f2 = p1f + (f2 - p1f) * frac;
        p2 = p1 + (p2 - p1) * frac;
        child = node.children[near];
    }
    Some((child, p1f))
}

/// How a segment whose ends lie `t1` and `t2` from a plane crosses the plane
/// thickened by `reach` on each side: the child its start is on (0 front, 1
/// back), the fraction where it leaves that child's side of the thick plane,
/// and the fraction where it enters the other child's (unclamped). A segment
/// parallel to the plane stays on the front side whole.
#[inline(always)]
pub(super) fn straddle(t1: f32, t2: f32, reach: f32) -> (usize, f32, f32) {
    if t1 < t2 {
        let inv = 1.0 / (t1 - t2);
        (1, (t1 - reach) * inv, (t1 + reach) * inv)
    } else if t1 > t2 {
        let inv = 1.0 / (t1 - t2);
        (0, (t1 + reach) * inv, (t1 - reach) * inv)
    } else {
        (0, 1.0, 0.0)
    }
}

/// Whether the box `b` overlaps `lo..=hi`.
#[inline(always)]
fn overlaps(b: &[Vec3A; 2], lo: Vec3A, hi: Vec3A) -> bool {
    (b[0].cmple(hi) & b[1].cmpge(lo)).all()
}

fn trace_leaf<P: Probe>(
    world: &World,
    cull: &[[[f32; 3]; 2]],
    lists: Lists,
    w: &mut TraceWork,
    scratch: &mut Scratch,
    leaf: &Leaf,
    probe: &mut P,
) {
    probe.leaf(leaf);
    let bounds = w.bounds;
    for (index, _) in new_brushes(world, lists, scratch, leaf, w.mask) {
        if !may_touch_brush(cull, index, &bounds) {
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
    for patch in new_patches(world, lists, scratch, leaf, w.mask) {
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
    lists: Lists<'w>,
    scratch: &'s mut Scratch,
    leaf: &Leaf,
    mask: u32,
) -> impl Iterator<Item = (usize, &'w Brush)> + use<'w, 's> {
    let brushes = world.brushes;
    lists
        .brushes(leaf)
        .iter()
        .filter(move |&&b| scratch.first_visit_brush(b as usize))
        .map(move |&b| (b as usize, &brushes[b as usize]))
        .filter(move |(_, b)| b.contents & mask != 0)
}

/// As [`new_brushes`], for patches.
fn new_patches<'w, 's>(
    world: &World<'w>,
    lists: Lists<'w>,
    scratch: &'s mut Scratch,
    leaf: &Leaf,
    mask: u32,
) -> impl Iterator<Item = &'w Patch> + use<'w, 's> {
    let patches = world.patches;
    lists
        .patches(leaf)
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
    let lists = Lists::ordering(world);
    BoxLeaves::new(world, lo, hi).collect(lists.root, &mut scratch.leaf_stack, probe);
    let leaves = std::mem::take(&mut scratch.leaf_stack);
    for &leaf_index in &leaves {
        let leaf = &lists.leaves[leaf_index as usize];
        test_in_leaf(world, lists, w, scratch, leaf, probe);
        if w.result.allsolid {
            break;
        }
    }
    scratch.leaf_stack = leaves;
}

/// The leaves of a tree whose cells overlap the box `lo..hi`.
pub(crate) struct BoxLeaves<'a> {
    nodes: &'a [Node],
    planes: &'a [Plane],
    lo: Vec3,
    hi: Vec3,
    /// The source's tree: sides decided as the reference decides them.
    source: bool,
}

impl<'a> BoxLeaves<'a> {
    /// Over the tree that decides the visit order (see [`Lists::ordering`]).
    pub fn new(world: &World<'a>, lo: Vec3, hi: Vec3) -> Self {
        let source = world.source.is_present();
        BoxLeaves {
            nodes: if source {
                world.source.nodes
            } else {
                world.nodes
            },
            planes: world.planes,
            lo,
            hi,
            source,
        }
    }

    /// The leaves below `child`, in tree order (front first).
    pub fn collect<P: Probe>(&self, mut child: i32, out: &mut Vec<u32>, probe: &mut P) {
        loop {
            if child < 0 {
                out.push((-1 - child) as u32);
                return;
            }
            probe.node();
            let node = &self.nodes[child as usize];
            let plane = &self.planes[node.plane as usize];
            let (front, back) = if self.source {
                self.source_sides(plane)
            } else {
                self.sides(plane)
            };
            if front && !back {
                child = node.children[0];
            } else if back && !front {
                child = node.children[1];
            } else {
                self.collect(node.children[0], out, probe);
                child = node.children[1];
            }
        }
    }

    /// Whether the box reaches the front of `plane` (a corner on it counts)
    /// and its back, from the distance range of its corners.
    fn sides(&self, plane: &Plane) -> (bool, bool) {
        let centre = (self.lo + self.hi) * 0.5;
        let half = (self.hi - self.lo) * 0.5;
        let d = plane.distance(centre);
        let r = plane.normal().abs().dot(half);
        (d + r >= 0.0, d - r < 0.0)
    }

    /// [`Self::sides`] as the reference decides them: an axial plane
    /// compares the box's extent on its axis (a box whose top lies on the
    /// plane is behind it only), another plane the box's two corners
    /// furthest along and against its normal.
    fn source_sides(&self, plane: &Plane) -> (bool, bool) {
        let (lo, hi) = (self.lo, self.hi);
        if plane.axis < 3 {
            let k = plane.axis as usize;
            let front_only = plane.dist <= lo[k];
            let back_only = !front_only && plane.dist >= hi[k];
            return (!back_only, !front_only);
        }
        let n = plane.normal();
        let along = n.cmpge(Vec3::ZERO);
        let (far, near) = (Vec3::select(along, hi, lo), Vec3::select(along, lo, hi));
        (n.dot(far) >= plane.dist, n.dot(near) < plane.dist)
    }
}

fn test_in_leaf<P: Probe>(
    world: &World,
    lists: Lists,
    w: &mut TraceWork,
    scratch: &mut Scratch,
    leaf: &Leaf,
    probe: &mut P,
) {
    probe.leaf(leaf);
    for (_, brush) in new_brushes(world, lists, scratch, leaf, w.mask) {
        probe.brush();
        if box_in_brush(world, brush, w) {
            set_inside(w, brush.contents);
            return;
        }
    }
    for patch in new_patches(world, lists, scratch, leaf, w.mask) {
        probe.patch();
        if position_test_patch(world, patch, w) {
            set_inside(w, patch.contents);
            return;
        }
    }
}
