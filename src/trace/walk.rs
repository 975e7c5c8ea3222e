//! The BSP walk: which leaves can the swept shape touch, nearest first.
//!
//! One descent serves every tree and every shape: the move's pieces go down
//! the near side of each node plane, thickened by how far the shape reaches
//! across it, and the far side is pushed for later; each leaf reached goes
//! to a [`Visitor`] (the full trace, the tie search, the hull trace, the
//! exact sweep's candidate list). Ties are decided by the order leaves
//! come in, so the walk that answers as the reference does reads the
//! source's own tree ([`SourceNodes`]); the others read the compiled tree
//! ([`PackedNodes`]) or an onion hull's ([`HullNodes`]).

use super::accel::Accel;
use super::accel::Below;
use super::fast::{Clipped, Clipper, Contact};
use super::work::{Scratch, TraceResult};
use super::Kernel;
use crate::margins::{SOURCE_FAR_REACH, TREE_WALK_SLACK};
use crate::math::Vec3;
use crate::world::{Leaf, Node, Plane, SourceTree};
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
    /// Nodes of the kernel's bounding-volume hierarchy the fast trace tested.
    pub bvh_nodes: u32,
    /// 1 when the fast trace left the answer to the BSP walk (it depended
    /// on the visit order), else 0.
    pub fallbacks: u32,
    /// 1 when any-hit stopped where the move passes through a brush's solid
    /// core, without clipping it (see [`super::accel::cores`]), else 0.
    pub core_stops: u32,
    /// 1 when the nearest contacts tied and the first of them in the
    /// walk's order was found without the whole walk ([`first_tied_contact`]),
    /// else 0.
    pub ties: u32,
}

/// Counting hooks: `()` counts nothing and compiles away.
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
    fn node(&mut self) {
        self.nodes += 1;
    }
    fn leaf(&mut self, leaf: &Leaf) {
        self.leaves += 1;
        self.full_leaves += (leaf.num_brushes + leaf.num_patches > 0) as u32;
    }
    fn brush(&mut self) {
        self.brushes += 1;
    }
    fn patch(&mut self) {
        self.patches += 1;
    }
    fn culled(&mut self) {
        self.culled += 1;
    }
    fn bvh_node(&mut self) {
        self.bvh_nodes += 1;
    }
    fn core_stop(&mut self) {
        self.core_stops += 1;
    }
    fn fallback(&mut self) {
        self.fallbacks += 1;
    }
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

/// One node as the walk reads it.
pub(crate) struct NodeView {
    normal: Vec3A,
    dist: f32,
    /// 0/1/2 for a +X/+Y/+Z plane, 3 otherwise (read by the source's tree).
    axis: u32,
    children: [i32; 2],
    /// OR of the contents below each child.
    below: [u32; 2],
    /// Bounds of everything below (read when [`Nodes::BOUNDED`]).
    mins: Vec3A,
    maxs: Vec3A,
}

/// Where the walk reads nodes from.
pub(crate) trait Nodes {
    /// Whether nodes carry the bounds of what lies below them.
    const BOUNDED: bool;
    /// The source's own tree, crossed as the reference crosses it: a shape
    /// reaches across a plane that is not axial by [`SOURCE_FAR_REACH`].
    const SOURCE: bool;
    fn get(&self, index: i32) -> NodeView;
}

/// The source's tree, in the reference's order; what lies below each node
/// lets the walk skip subtrees nothing near the move lies in (leaving out
/// leaves with nothing the move can touch changes neither the order of the
/// rest nor any answer).
pub(crate) struct SourceNodes<'w> {
    nodes: &'w [Node],
    planes: &'w [Plane],
    below: &'w [Below],
}

impl<'w> SourceNodes<'w> {
    pub fn new(world: &Kernel<'w>) -> Self {
        SourceNodes {
            nodes: world.source.nodes,
            planes: world.planes,
            below: &world.accel.source_below,
        }
    }
}

impl Nodes for SourceNodes<'_> {
    const BOUNDED: bool = true;
    const SOURCE: bool = true;

    #[inline(always)]
    fn get(&self, index: i32) -> NodeView {
        let node = &self.nodes[index as usize];
        let plane = &self.planes[node.plane as usize];
        let below = &self.below[index as usize];
        NodeView {
            normal: Vec3A::from(plane.normal()),
            dist: plane.dist,
            axis: plane.axis,
            children: node.children,
            below: below.contents,
            mins: below.mins,
            maxs: below.maxs,
        }
    }
}

/// The compiled tree's kernel nodes: plane inline, contents below each
/// child, bounds.
pub(crate) struct PackedNodes<'w>(pub &'w Accel);

impl Nodes for PackedNodes<'_> {
    const BOUNDED: bool = true;
    const SOURCE: bool = false;

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

/// One onion hull's tree: contents below each child for that hull.
pub(crate) struct HullNodes<'w>(pub &'w [super::accel::onion::OnionNode]);

impl Nodes for HullNodes<'_> {
    const BOUNDED: bool = false;
    const SOURCE: bool = false;

    #[inline(always)]
    fn get(&self, index: i32) -> NodeView {
        let n = &self.0[index as usize];
        NodeView {
            normal: Vec3A::from_array(n.normal),
            dist: n.dist,
            axis: 3,
            children: n.children,
            below: n.contents_below,
            mins: Vec3A::NEG_INFINITY,
            maxs: Vec3A::INFINITY,
        }
    }
}

/// How far the moving shape reaches across a plane with this normal.
pub(crate) trait Reach {
    /// A point (a ray, or an onion hull's centre): reaches nowhere.
    const POINT: bool;
    fn reach(&self, normal: Vec3A) -> f32;
}

/// A ray.
pub(crate) struct PointReach;

impl Reach for PointReach {
    const POINT: bool = true;
    #[inline(always)]
    fn reach(&self, _normal: Vec3A) -> f32 {
        0.0
    }
}

/// A box of these half-sizes: its support distance `|n|·e` (an axial
/// plane's is exactly the one extent).
pub(crate) struct BoxReach(pub Vec3A);

impl Reach for BoxReach {
    const POINT: bool = false;
    #[inline(always)]
    fn reach(&self, normal: Vec3A) -> f32 {
        normal.abs().dot(self.0)
    }
}

/// What the walk does with what it reaches.
pub(crate) trait Visitor {
    /// Whether a piece of the move starting at fraction `f1` can still
    /// change the answer.
    fn wanted(&self, f1: f32) -> bool;
    /// Leaf `leaf` (a child reference) is reached by the piece of the move
    /// from `f1` on; true stops the walk.
    fn leaf(&mut self, leaf: i32, f1: f32) -> bool;
    fn node(&mut self) {}
    fn culled(&mut self) {}
}

/// The move as the walk sees it: its ends, swept bounds and mask.
pub(crate) struct Move {
    pub start: Vec3A,
    pub end: Vec3A,
    pub bounds: [Vec3A; 2],
    pub mask: u32,
}

/// Walks the move through the tree from `root`, nearest side first, with a
/// stack of the far sides still to visit. Children with nothing in the mask
/// below them are not entered, nor subtrees whose bounds the swept shape
/// misses: they hold nothing the move could touch.
pub(crate) fn walk<N: Nodes, R: Reach, V: Visitor>(
    nodes: &N,
    root: i32,
    m: &Move,
    reach: &R,
    stack: &mut Vec<Segment>,
    visitor: &mut V,
) {
    stack.clear();
    stack.push(Segment {
        child: root,
        f1: 0.0,
        f2: 1.0,
        p1: m.start,
        p2: m.end,
    });
    while let Some(seg) = stack.pop() {
        if !visitor.wanted(seg.f1) {
            continue;
        }
        if let Some(leaf) = descend(nodes, m, reach, seg, stack, visitor) {
            if visitor.leaf(leaf, seg.f1) {
                break;
            }
        }
    }
}

/// Descends from `seg.child` along the near side, pushing far sides, to the
/// leaf it reaches, if any.
#[inline(always)]
fn descend<N: Nodes, R: Reach, V: Visitor>(
    nodes: &N,
    m: &Move,
    reach: &R,
    seg: Segment,
    stack: &mut Vec<Segment>,
    visitor: &mut V,
) -> Option<i32> {
    let Segment {
        mut child,
        f1,
        mut f2,
        p1,
        mut p2,
    } = seg;
    while child >= 0 {
        visitor.node();
        let node = nodes.get(child);
        if N::BOUNDED && !overlaps(&m.bounds, node.mins, node.maxs) {
            visitor.culled();
            return None;
        }
        let normal = node.normal;
        // A full dot product gives the same bits as reading one component
        // of an axial plane, without the branch.
        let t1 = normal.dot(p1) - node.dist;
        let t2 = normal.dot(p2) - node.dist;
        let offset = if N::SOURCE && node.axis >= 3 {
            if R::POINT {
                0.0
            } else {
                SOURCE_FAR_REACH
            }
        } else {
            reach.reach(normal)
        };
        let reach = offset + TREE_WALK_SLACK;
        if t1 >= reach && t2 >= reach {
            if node.below[0] & m.mask == 0 {
                return None;
            }
            child = node.children[0];
            continue;
        }
        if t1 < -reach && t2 < -reach {
            if node.below[1] & m.mask == 0 {
                return None;
            }
            child = node.children[1];
            continue;
        }
        // The piece straddles the (thickened) plane: near side now, far side later.
        let (near, frac_near_end, frac_far_start) = straddle(t1, t2, reach);
        if node.below[near ^ 1] & m.mask != 0 {
            let frac2 = frac_far_start.clamp(0.0, 1.0);
            stack.push(Segment {
                child: node.children[near ^ 1],
                f1: f1 + (f2 - f1) * frac2,
                f2,
                p1: p1 + (p2 - p1) * frac2,
                p2,
            });
        }
        if node.below[near] & m.mask == 0 {
            return None;
        }
        let frac = frac_near_end.clamp(0.0, 1.0);
        f2 = f1 + (f2 - f1) * frac;
        p2 = p1 + (p2 - p1) * frac;
        child = node.children[near];
    }
    Some(child)
}

/// How a segment whose ends lie `t1` and `t2` from a plane crosses the plane
/// thickened by `reach` on each side: the child its start is on (0 front, 1
/// back), the fraction where it leaves that child's side of the thick plane,
/// and the fraction where it enters the other child's (unclamped). A segment
/// parallel to the plane stays on the front side whole.
#[inline(always)]
fn straddle(t1: f32, t2: f32, reach: f32) -> (usize, f32, f32) {
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
pub(crate) fn overlaps(b: &[Vec3A; 2], lo: Vec3A, hi: Vec3A) -> bool {
    (b[0].cmple(hi) & b[1].cmpge(lo)).all()
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
    pub fn ordering(world: &Kernel<'w>) -> Self {
        if world.source.is_present() {
            Self::source(&world.source)
        } else {
            Self::compiled(world)
        }
    }

    /// The tree [`walk_move`] walks.
    pub fn walked(world: &Kernel<'w>, ordered: bool) -> Self {
        if ordered {
            Self::ordering(world)
        } else {
            Self::compiled(world)
        }
    }

    /// The compiled tree's.
    pub fn compiled(world: &Kernel<'w>) -> Self {
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

/// Walks `m` through the tree that decides the visit order (the compiled
/// tree when `ordered` is false or the world lacks the source's), handing
/// each leaf to `visitor`.
pub(crate) fn walk_move<R: Reach, V: Visitor>(
    world: &Kernel,
    m: &Move,
    reach: &R,
    ordered: bool,
    stack: &mut Vec<Segment>,
    visitor: &mut V,
) {
    if ordered && world.source.is_present() {
        let nodes = SourceNodes::new(world);
        walk(&nodes, world.source.root(), m, reach, stack, visitor);
    } else {
        // (A world of one leaf has no nodes: its leaf is the whole world.)
        let below = world.accel.nodes.first().map(|n| n.contents_below);
        if below.is_none_or(|b| (b[0] | b[1]) & m.mask != 0) {
            walk(
                &PackedNodes(world.accel),
                world.root(),
                m,
                reach,
                stack,
                visitor,
            );
        }
    }
}

/// Runs `f` with the scratch's segment stack taken out of it, so that a
/// visitor can hold the rest.
pub(crate) fn with_stack<T>(
    scratch: &mut Scratch,
    f: impl FnOnce(&mut Vec<Segment>, &mut Scratch) -> T,
) -> T {
    let mut stack = std::mem::take(&mut scratch.segment_stack);
    let out = f(&mut stack, scratch);
    scratch.segment_stack = stack;
    out
}

/// The full trace of `c`'s move through the tree that decides the visit
/// order (`scratch` begun for this query).
pub(crate) fn trace_tree<C: Clipper, P: Probe>(
    world: &Kernel,
    c: &C,
    scratch: &mut Scratch,
    probe: &mut P,
) -> TraceResult {
    with_stack(scratch, |stack, scratch| {
        let mut leaves = TraceLeaves {
            world,
            lists: Lists::walked(world, true),
            clipper: c,
            scratch,
            probe,
            result: TraceResult::default(),
        };
        c.walk_leaves(world, true, stack, &mut leaves);
        leaves.result
    })
}

/// The full trace's leaves: every new brush and patch in the mask clipped
/// in leaf order (brushes, then patches), a later contact replacing an
/// earlier one only when strictly nearer, as the reference keeps them.
struct TraceLeaves<'a, 'w, C, P> {
    world: &'a Kernel<'w>,
    lists: Lists<'w>,
    clipper: &'a C,
    scratch: &'a mut Scratch,
    probe: &'a mut P,
    result: TraceResult,
}

impl<C: Clipper, P: Probe> Visitor for TraceLeaves<'_, '_, C, P> {
    fn wanted(&self, f1: f32) -> bool {
        // Something nearer than this whole piece was already hit.
        f1 < self.result.fraction
    }

    fn leaf(&mut self, leaf: i32, _f1: f32) -> bool {
        let (world, lists, c) = (self.world, self.lists, self.clipper);
        let leaf = lists.leaf(leaf);
        self.probe.leaf(leaf);
        let any_hit = c.any_hit();
        let bounds = c.bounds();
        let result = &mut self.result;
        for &b in lists.brushes(leaf) {
            let b = b as usize;
            if !new_in_mask(
                self.scratch.first_visit_brush(b),
                world.brushes[b].contents,
                c,
            ) || !may_touch_brush(world, b, &bounds)
            {
                continue;
            }
            self.probe.brush();
            match c.brush(world, b) {
                Clipped::Miss => {}
                Clipped::Inside { gets_out } => {
                    // No contact is reported for a start inside, only solidity.
                    result.startsolid = true;
                    if !gets_out {
                        result.allsolid = true;
                        result.fraction = 0.0;
                        result.contents = world.brushes[b].contents;
                    }
                }
                Clipped::Enter { frac, contact } => {
                    if frac < result.fraction {
                        result.fraction = frac;
                        set_contact(result, &contact);
                    }
                }
            }
            // Like the reference, stop at a contact at the very start.
            if result.allsolid || result.fraction == 0.0 || (any_hit && result.fraction < 1.0) {
                return true;
            }
        }
        for &p in lists.patches(leaf) {
            let p = p as usize;
            if !new_in_mask(
                self.scratch.first_visit_patch(p),
                world.patches[p].contents,
                c,
            ) {
                continue;
            }
            self.probe.patch();
            clip_patch(world, c, p, result);
            if any_hit && result.fraction < 1.0 {
                return true;
            }
        }
        false
    }

    fn node(&mut self) {
        self.probe.node();
    }

    fn culled(&mut self) {
        self.probe.culled();
    }
}

/// Whether a brush or patch met `first` time with `contents` is in the
/// clipper's mask.
#[inline(always)]
fn new_in_mask<C: Clipper>(first: bool, contents: u32, c: &C) -> bool {
    first && contents & c.mask() != 0
}

fn set_contact(result: &mut TraceResult, contact: &Contact) {
    result.normal = contact.normal;
    result.dist = contact.dist;
    result.surface_flags = contact.surface_flags;
    result.contents = contact.contents;
}

/// Folds patch `p`'s facet hits into `result` as the reference does: a
/// facet replaces the contact so far when strictly nearer (a ray's, when it
/// crosses the surface no later than it); a patch that wins gives its
/// contents and flags.
pub(crate) fn clip_patch<C: Clipper>(world: &Kernel, c: &C, p: usize, result: &mut TraceResult) {
    let patch = &world.patches[p];
    let before = result.fraction;
    let reach_back = c.patch_hits_reach_back();
    let first = patch.first_facet as usize;
    for facet in first..first + patch.num_facets as usize {
        let Some(hit) = c.facet(world, p, facet, 1.0) else {
            continue;
        };
        let accepted = if reach_back {
            hit.window <= result.fraction
        } else {
            hit.frac < result.fraction
        };
        if accepted {
            result.fraction = hit.frac;
            result.normal = hit.contact.normal;
            result.dist = hit.contact.dist;
        }
    }
    if result.fraction < before {
        result.contents = patch.contents;
        result.surface_flags = patch.surface_flags;
    }
}

/// Whether brush `b` may be touched by a move within `bounds`: the walk
/// does not clip a brush whose cull box the swept box misses, which
/// changes no answer (see [`super::accel`]) and on the source's
/// tree, which a box crosses by 2 048 units at every slanted plane, skips
/// most of the brushes the leaves reached list.
#[inline(always)]
pub(crate) fn may_touch_brush(world: &Kernel, b: usize, bounds: &[Vec3A; 2]) -> bool {
    let [lo, hi] = world.accel.brush_bounds[b];
    overlaps(bounds, Vec3A::from(lo), Vec3A::from(hi))
}

/// The contact the full walk reports among the tied nearest ones at `frac`
/// (above 0, starting inside nothing: [`super::fast::Outcome::Tied`]),
/// without the rest of the walk; `None`: the walk must decide.
///
/// The walk keeps the first of equal contacts and skips pieces starting at
/// or past its nearest contact. Walked here without that skipping, each
/// primitive clipped on its own in the walk's order, the first found at
/// `frac` in a piece starting before `frac` is the walk's (it reaches that
/// piece and meets nothing at `frac` earlier). One found first in a later
/// piece, or for a ray any patch within reach, leaves it to the walk.
pub(crate) fn first_tied_contact<C: Clipper>(
    world: &Kernel,
    c: &C,
    scratch: &mut Scratch,
    frac: f32,
) -> Option<Contact> {
    scratch.begin(world);
    with_stack(scratch, |stack, scratch| {
        let mut tie = TieLeaves {
            world,
            lists: Lists::walked(world, true),
            clipper: c,
            scratch,
            frac,
            first: None,
        };
        c.walk_leaves(world, true, stack, &mut tie);
        tie.first
    })
}

/// [`first_tied_contact`]'s visitor.
struct TieLeaves<'a, 'w, C> {
    world: &'a Kernel<'w>,
    lists: Lists<'w>,
    clipper: &'a C,
    scratch: &'a mut Scratch,
    frac: f32,
    first: Option<Contact>,
}

impl<C: Clipper> Visitor for TieLeaves<'_, '_, C> {
    fn wanted(&self, f1: f32) -> bool {
        // (As the full walk skips pieces before it found anything.)
        f1 < 1.0
    }

    fn leaf(&mut self, leaf: i32, start: f32) -> bool {
        let (world, lists, c, frac) = (self.world, self.lists, self.clipper, self.frac);
        let leaf = lists.leaf(leaf);
        let bounds = c.bounds();
        for &b in lists.brushes(leaf) {
            let b = b as usize;
            if !new_in_mask(
                self.scratch.first_visit_brush(b),
                world.brushes[b].contents,
                c,
            ) || !may_touch_brush(world, b, &bounds)
            {
                continue;
            }
            match c.brush(world, b) {
                Clipped::Miss => {}
                Clipped::Enter { frac: at, .. } if at > frac => {}
                Clipped::Enter { frac: at, contact } => {
                    // (Nearer than the nearest, or inside: not a tie after all.)
                    self.first = (at == frac && start < frac).then_some(contact);
                    return true;
                }
                Clipped::Inside { .. } => return true,
            }
        }
        for &p in lists.patches(leaf) {
            let p = p as usize;
            let patch = &world.patches[p];
            if !new_in_mask(self.scratch.first_visit_patch(p), patch.contents, c) {
                continue;
            }
            if c.patch_hits_reach_back() {
                if super::patch::patch_in_reach(world, p, &bounds) {
                    return true;
                }
                continue;
            }
            // The patch's nearest facet hit, the first of equal ones.
            let first = patch.first_facet as usize;
            let nearest = (first..first + patch.num_facets as usize)
                .filter_map(|facet| c.facet(world, p, facet, 1.0))
                .reduce(|best, hit| if hit.frac < best.frac { hit } else { best });
            if let Some(hit) = nearest.filter(|hit| hit.frac <= frac) {
                self.first = (hit.frac == frac && start < frac).then_some(hit.contact);
                return true;
            }
        }
        false
    }
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
    pub fn new(world: &Kernel<'a>, lo: Vec3, hi: Vec3) -> Self {
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

/// A move whose start equals its end: is the shape inside anything in the
/// mask? The leaves its box (grown by the walk's slack) overlaps are
/// searched in the order that decides ties, each leaf's brushes then its
/// patches; `inside` hears of each brush (`Some(b)`) or patch (`None`)
/// found to hold the shape, with its contents, and returns true to stop.
pub(crate) fn position_test<C: Clipper, P: Probe>(
    world: &Kernel,
    c: &C,
    scratch: &mut Scratch,
    probe: &mut P,
    mut inside: impl FnMut(Option<usize>, u32) -> bool,
) {
    let (start, _, half) = c.segment();
    let lo = Vec3::from(start - half - TREE_WALK_SLACK);
    let hi = Vec3::from(start + half + TREE_WALK_SLACK);
    let lists = Lists::ordering(world);
    let mut leaves = std::mem::take(&mut scratch.leaf_stack);
    leaves.clear();
    BoxLeaves::new(world, lo, hi).collect(lists.root, &mut leaves, probe);
    'leaves: for &leaf in &leaves {
        let leaf = &lists.leaves[leaf as usize];
        probe.leaf(leaf);
        for &b in lists.brushes(leaf) {
            let b = b as usize;
            let contents = world.brushes[b].contents;
            if !new_in_mask(scratch.first_visit_brush(b), contents, c) {
                continue;
            }
            probe.brush();
            if c.holds_start_brush(world, b) && inside(Some(b), contents) {
                break 'leaves;
            }
        }
        for &p in lists.patches(leaf) {
            let p = p as usize;
            let contents = world.patches[p].contents;
            if !new_in_mask(scratch.first_visit_patch(p), contents, c) {
                continue;
            }
            probe.patch();
            if c.holds_start_patch(world, p) && inside(None, contents) {
                break 'leaves;
            }
        }
    }
    scratch.leaf_stack = leaves;
}
