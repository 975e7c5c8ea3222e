//! The fast trace of moves (rays, boxes and plane-shifted shapes): find the
//! primitives near the move in the hierarchy ([`super::accel::bvh`]), clip
//! each on its own, keep the nearest contact and the runner-up.
//!
//! The walk's visit order decides only three cases: contacts at the same
//! fraction (the first found wins), a contact at fraction 0 or a brush the
//! whole move lies inside (the walk stops there), and a ray's patch hit,
//! which replaces an earlier contact it crosses no later than 1/8 unit past
//! (its window). Otherwise the nearest contact wins in every order when its
//! window ends before any other contact (ties reporting the same plane,
//! flags and contents count as one), and the search answers; else it says
//! [`Outcome::Undecided`] and the caller asks the walk. No candidate is
//! missed: no contact lies before the move enters its primitive's cull box
//! grown by the shape, so subtrees entered past the window hold none.

use super::accel::bvh::{Bvh, BvhNode, FACET, INDEX, PATCH, PRIMITIVE, WIDE, WIDTH};
use super::accel::cores::CoreLanes;
use super::brush::{box_in_brush, clip_brush, BrushClip};
use super::patch::{facet_hit, patch_in_reach, position_test_patch};
use super::walk::{walk_move, BoxReach, Move, PointReach, Probe, Segment, Visitor};
use super::work::{Scratch, TraceQuery, TraceResult, TraceWork};
use super::Kernel;
use crate::contents::CONTENTS_SOLID;
use crate::math::{splat_axes, Vec3};
use crate::world::Patch;
#[cfg(not(target_arch = "x86_64"))]
use glam::UVec4;
use glam::{BVec4A, Vec3A, Vec4};

/// What the fast trace could tell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Outcome {
    /// The answer, the same in every visit order.
    Answered(Found),
    /// Any-hit: something in the mask is touched.
    Hit,
    /// The answer depends on the visit order: ask the BSP walk.
    Undecided,
    /// As `Undecided`, for this one reason only: the nearest contacts, at
    /// this fraction (above 0), tie and report different planes, flags or
    /// contents, and the move starts inside nothing. The walk's answer is
    /// then the first of them it meets ([`super::walk::first_tied_contact`]).
    Tied(f32),
}

/// A contact's report: the plane hit and what it belongs to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Contact {
    pub normal: Vec3,
    pub dist: f32,
    pub surface_flags: u32,
    pub contents: u32,
}

impl Contact {
    /// A move's answer stopping at this contact at `frac` (no `endpos`).
    pub fn at(&self, frac: f32) -> TraceResult {
        TraceResult {
            fraction: frac,
            normal: self.normal,
            dist: self.dist,
            surface_flags: self.surface_flags,
            contents: self.contents,
            ..TraceResult::default()
        }
    }

    /// The same answer fields, bit for bit.
    #[inline(always)]
    fn same_report(&self, other: &Contact) -> bool {
        self.normal.to_array().map(f32::to_bits) == other.normal.to_array().map(f32::to_bits)
            && self.dist.to_bits() == other.dist.to_bits()
            && self.surface_flags == other.surface_flags
            && self.contents == other.contents
    }
}

/// What one brush does to the move, clipped on its own.
pub(crate) enum Clipped {
    Miss,
    /// The move starts inside; `gets_out`: it ends outside.
    Inside {
        gets_out: bool,
    },
    /// The move enters at `frac` (at least 0) through `contact`'s plane.
    Enter {
        frac: f32,
        contact: Contact,
    },
}

/// A patch facet's hit: the fraction, the end of its window (see the module
/// notes; `frac` but for rays) and the plane.
pub(crate) struct FacetContact {
    pub frac: f32,
    pub window: f32,
    pub contact: Contact,
}

impl FacetContact {
    /// A hit on a facet of `patch` through the plane `normal`, `dist`.
    pub fn new(patch: &Patch, frac: f32, window: f32, normal: Vec3, dist: f32) -> Self {
        FacetContact {
            frac,
            window,
            contact: Contact {
                normal,
                dist,
                surface_flags: patch.surface_flags,
                contents: patch.contents,
            },
        }
    }
}

/// One kind of move (a box or ray, or a swept shape) as the fast trace sees
/// it: where it goes and how it clips one brush or patch on its own.
pub(crate) trait Clipper {
    /// Start and end of the traced centre, and the half-size of the box
    /// around it that bounds the moving shape.
    fn segment(&self) -> (Vec3A, Vec3A, Vec3A);
    /// Swept bounds: every position of the moving shape lies inside.
    fn bounds(&self) -> [Vec3A; 2];
    fn mask(&self) -> u32;
    fn any_hit(&self) -> bool;
    /// Whether any-hit may stop where the move passes through a brush's
    /// solid core (see [`super::accel::cores`]): for a ray or box, whose
    /// half-size grows the core exactly as the clip shifts the brush's
    /// sides; not for shapes, whose bounding box is larger than they are.
    fn stops_at_solid_cores(&self) -> bool {
        false
    }
    /// Whether a patch hit found later can replace a nearer contact (rays:
    /// see the module notes); then the patch tree is searched to the end
    /// of the move.
    fn patch_hits_reach_back(&self) -> bool;
    fn brush(&self, world: &Kernel, index: usize) -> Clipped;
    /// The hit on facet `facet` of patch `patch`, if any; one that stops
    /// past `limit` may be left out (it cannot change the answer).
    fn facet(&self, world: &Kernel, patch: usize, facet: usize, limit: f32)
        -> Option<FacetContact>;
    /// Whether the shape at the move's start overlaps brush `b`, and
    /// patch `p` (closed: touching counts).
    fn holds_start_brush(&self, world: &Kernel, b: usize) -> bool;
    fn holds_start_patch(&self, world: &Kernel, p: usize) -> bool;
    /// Walks the move through the tree that decides the visit order (or,
    /// not `ordered`, the compiled tree), with the shape's reach across
    /// node planes, handing each leaf to `visitor`.
    fn walk_leaves<V: Visitor>(
        &self,
        world: &Kernel,
        ordered: bool,
        stack: &mut Vec<Segment>,
        visitor: &mut V,
    );
    /// Calls `offer` with each facet hit of patch `index` (a patch kept
    /// whole in the tree), in facet order.
    fn patch(
        &self,
        world: &Kernel,
        index: usize,
        mut offer: impl FnMut(FacetContact) -> Result<(), Stop>,
    ) -> Result<(), Stop> {
        let patch = &world.patches[index];
        let first = patch.first_facet as usize;
        for facet in first..first + patch.num_facets as usize {
            if let Some(hit) = self.facet(world, index, facet, 1.0) {
                offer(hit)?;
            }
        }
        Ok(())
    }
}

/// What the search found, when every order gives the same answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Found {
    /// The nearest contact and its fraction.
    contact: Option<(f32, Contact)>,
    startsolid: bool,
    /// The contents of the brushes the whole move lies inside, if any.
    allsolid: Option<u32>,
}

impl Found {
    /// A move's `contact` at `frac`, starting inside nothing.
    pub fn contact(frac: f32, contact: Contact) -> Self {
        Found {
            contact: Some((frac, contact)),
            startsolid: false,
            allsolid: None,
        }
    }

    /// The answer to `query`.
    #[inline(always)]
    pub fn result(&self, query: &TraceQuery) -> TraceResult {
        let mut result = TraceResult {
            startsolid: self.startsolid,
            ..TraceResult::default()
        };
        if let Some(contents) = self.allsolid {
            result.allsolid = true;
            result.fraction = 0.0;
            result.contents = contents;
        } else if let Some((frac, c)) = self.contact {
            result.fraction = frac;
            result.normal = c.normal;
            result.dist = c.dist;
            result.surface_flags = c.surface_flags;
            result.contents = c.contents;
        }
        result.ended(query)
    }

    /// The answer's fraction, as [`Found::result`] gives it.
    pub fn fraction(&self) -> f32 {
        match (self.allsolid, self.contact) {
            (Some(_), _) => 0.0,
            (None, Some((frac, _))) => frac,
            (None, None) => 1.0,
        }
    }
}

pub(super) struct Search {
    /// The nearest contact's fraction (1: none yet) ...
    frac: f32,
    /// ... the end of its window (where a later-found ray patch hit would
    /// still replace it; `frac` for everything else) ...
    window: f32,
    contact: Option<Contact>,
    /// ... and the nearest fraction of any other contact.
    runner_up: f32,
    startsolid: bool,
    allsolid: Option<u32>,
}

/// Why the search stopped before the end.
pub(crate) enum Stop {
    Undecided,
    Hit,
}

impl Search {
    /// Nothing found yet.
    pub(super) fn new() -> Self {
        Search {
            frac: 1.0,
            window: 1.0,
            contact: None,
            runner_up: 1.0,
            startsolid: false,
            allsolid: None,
        }
    }

    /// The search's answer once it ran to the end, or why it stopped.
    pub(super) fn outcome(&self, stop: Result<(), Stop>) -> Outcome {
        match stop {
            Err(Stop::Undecided) => Outcome::Undecided,
            Err(Stop::Hit) => Outcome::Hit,
            Ok(()) if !self.decided() => {
                if self.tied() {
                    Outcome::Tied(self.frac)
                } else {
                    Outcome::Undecided
                }
            }
            Ok(()) => Outcome::Answered(Found {
                contact: self.contact.map(|c| (self.frac, c)),
                startsolid: self.startsolid,
                allsolid: self.allsolid,
            }),
        }
    }

    /// Takes a contact at `frac` with its window ending at `window`.
    #[inline(always)]
    fn offer(&mut self, frac: f32, window: f32, contact: Contact) -> Result<(), Stop> {
        if self.allsolid.is_some() {
            // Whether the walk met this contact before the all-solid brush
            // (its plane stays in the answer) depends on the order.
            return Err(Stop::Undecided);
        }
        if frac < self.frac {
            if window > self.window {
                // Its window reaches past where the search stopped looking.
                return Err(Stop::Undecided);
            }
            self.runner_up = self.runner_up.min(self.frac);
            self.frac = frac;
            self.window = window;
            self.contact = Some(contact);
        } else if !self.is_twin(frac, window, &contact) {
            self.runner_up = self.runner_up.min(frac);
        }
        Ok(())
    }

    /// Whether a contact ties with the nearest one, with the same window and
    /// the same plane, flags and contents (a floor of several brushes, two
    /// copies of one patch): whichever the walk meets first, the answer is
    /// the same.
    #[inline(always)]
    fn is_twin(&self, frac: f32, window: f32, contact: &Contact) -> bool {
        frac == self.frac
            && window == self.window
            && self.contact.is_some_and(|c| c.same_report(contact))
    }

    /// Takes a brush the whole move lies inside, with these contents.
    #[inline(always)]
    fn all_solid(&mut self, contents: u32) -> Result<(), Stop> {
        // The walk stops at the first such brush: its contents are the
        // answer's, and so is whatever contact it met before.
        if self.frac < 1.0 || self.allsolid.is_some_and(|c| c != contents) {
            return Err(Stop::Undecided);
        }
        self.allsolid = Some(contents);
        self.startsolid = true;
        Ok(())
    }

    /// Whether the order matters only because the nearest contacts tie
    /// (see [`Outcome::Tied`]).
    fn tied(&self) -> bool {
        self.contact.is_some()
            && self.frac > 0.0
            && self.window == self.frac
            && self.runner_up == self.frac
            && !self.startsolid
            && self.allsolid.is_none()
    }

    /// Whether every visit order gives the same answer.
    fn decided(&self) -> bool {
        if self.contact.is_none() {
            // No contact: at most starts or lies inside, the same in any order.
            return true;
        }
        // The nearest contact wins in any order when its window ends before
        // every other contact; at fraction 0 the walk stops there, so
        // whether it met a brush the move starts inside would depend on
        // the order.
        self.window < self.runner_up && !(self.frac == 0.0 && self.startsolid)
    }
}

/// The per-query constants of the slab test, one splat per axis: a child's
/// bounds grown by the box are entered at `(min - low) * inv` and
/// `(max - high) * inv`.
pub(super) struct Ray {
    pub low: [Vec4; 3],
    pub high: [Vec4; 3],
    pub inv: [Vec4; 3],
}

impl Ray {
    #[inline(always)]
    pub(super) fn new(start: Vec3A, end: Vec3A, half: Vec3A) -> Self {
        let dir = end - start;
        // A zero component never crosses a slab: a huge finite reciprocal
        // keeps (bound - origin) * inv free of 0 * inf. In SIMD lanes (this
        // runs once per query): the same f32 operations per component.
        let reciprocal = Vec3A::ONE / dir;
        let inv = Vec3A::select(
            reciprocal.is_finite_mask(),
            reciprocal,
            Vec3A::splat(1e30).copysign(dir),
        );
        let (low, high) = (start + half, start - half);
        Ray {
            low: splat_axes(low),
            high: splat_axes(high),
            inv: splat_axes(inv),
        }
    }

    /// Per lane, the fraction where the move enters the child's grown
    /// bounds, and a bitmask of the children it enters no later than `limit`.
    #[inline(always)]
    pub(super) fn enter(&self, node: &BvhNode, limit: f32) -> (Vec4, u32) {
        let mut near = Vec4::ZERO;
        let mut far = Vec4::splat(limit);
        for k in 0..3 {
            let a = (node.min[k] - self.low[k]) * self.inv[k];
            let b = (node.max[k] - self.high[k]) * self.inv[k];
            near = near.max(a.min(b));
            far = far.min(a.max(b));
        }
        (near, near.cmple(far).bitmask())
    }

    /// A bitmask of the lanes whose solid core, grown by the box, the move
    /// passes through from a start outside the core's brush (outside its
    /// cull box grown by the box; a lane without a core has an unbounded
    /// one): for a mask with solid in it, a contact before the end of the
    /// move for each (see [`super::accel::cores`]).
    #[inline(always)]
    pub(super) fn core_hits(&self, lanes: &CoreLanes) -> u32 {
        let mut near = Vec4::ZERO;
        let mut far = Vec4::ONE;
        let mut outside = BVec4A::FALSE;
        for k in 0..3 {
            let a = (lanes.min[k] - self.low[k]) * self.inv[k];
            let b = (lanes.max[k] - self.high[k]) * self.inv[k];
            near = near.max(a.min(b));
            far = far.min(a.max(b));
            outside |=
                self.low[k].cmplt(lanes.owner_min[k]) | self.high[k].cmpgt(lanes.owner_max[k]);
        }
        (near.cmple(far) & outside).bitmask()
    }
}

/// Searches the kernel's hierarchy for what the move (not a position test)
/// touches.
#[inline(always)]
pub(crate) fn search<C: Clipper, P: Probe>(
    world: &Kernel,
    bvh: &Bvh,
    clipper: &C,
    scratch: &mut Scratch,
    probe: &mut P,
) -> Outcome {
    // A function each: the full trace's code is then laid out as it is
    // without any-hit's walk beside it (inlined together, the full trace
    // ran 5-10 % slower on rays for the same instructions).
    if clipper.any_hit() {
        search_as::<C, P, true>(world, bvh, clipper, scratch, probe)
    } else {
        search_as::<C, P, false>(world, bvh, clipper, scratch, probe)
    }
}

/// [`search`] for a full trace or (`ANY_HIT`) an any-hit search.
#[inline(never)]
fn search_as<C: Clipper, P: Probe, const ANY_HIT: bool>(
    world: &Kernel,
    bvh: &Bvh,
    clipper: &C,
    scratch: &mut Scratch,
    probe: &mut P,
) -> Outcome {
    let mut search = Search::new();
    let stack = search_stack(&mut scratch.bvh_stack, bvh);
    let stop = run::<C, P, ANY_HIT>(world, bvh, clipper, &mut search, stack, probe);
    search.outcome(stop)
}

/// The search proper: the unbounded primitives, then the tree over brushes
/// and patches, or for rays the brushes' tree and the patches' (searched to
/// the end of the move), nearest child first.
#[inline(always)]
fn run<C: Clipper, P: Probe, const ANY_HIT: bool>(
    world: &Kernel,
    bvh: &Bvh,
    clipper: &C,
    search: &mut Search,
    stack: &mut [Entry],
    probe: &mut P,
) -> Result<(), Stop> {
    for &reference in &bvh.unbounded {
        primitive_unmasked(world, bvh, reference, clipper, search, probe)?;
    }
    let (start, end, half) = clipper.segment();
    let ray = Ray::new(start, end, half);
    let all_patches = clipper.patch_hits_reach_back();
    // A ray starting on a facet's border plane may meet the facet far
    // outside its bounds. A full trace leaves it to the walk at once;
    // any-hit only when it finds nothing (what else it finds, the walk
    // finds too, so its answer stands).
    let on_border = || all_patches && world.accel.border_starts.may_hold(start);
    if !ANY_HIT && on_border() {
        return Err(Stop::Undecided);
    }
    let mut s = Searching {
        world,
        bvh,
        clipper,
        search,
        stack,
        probe,
    };
    // The full trace searches the eight-wide trees where they were built
    // (any-hit keeps the four-wide ones: their solid cores stop it sooner,
    // and it measured no faster eight wide).
    #[cfg(target_arch = "x86_64")]
    if let (false, Some(avx2)) = (ANY_HIT, bvh.wide.avx2()) {
        return avx2.search(&mut s, &ray, all_patches);
    }
    // Every core belongs to a solid brush: the mask decides for all.
    let stops = ANY_HIT && clipper.stops_at_solid_cores() && clipper.mask() & CONTENTS_SOLID != 0;
    let four = Four {
        ray,
        mask: clipper.mask(),
    };
    if !all_patches {
        // Brushes and patches alike: one tree, one root.
        let (nodes, cores) = bvh.combined_for(half);
        let cores = if stops { cores } else { &[] };
        return s.tree::<_, ANY_HIT>(&four, nodes, cores, false);
    }
    let cores = if stops { &bvh.brush_cores[..] } else { &[] };
    s.tree::<_, ANY_HIT>(&four, &bvh.brushes, cores, false)?;
    s.tree::<_, ANY_HIT>(&four, &bvh.patches, &[], true)?;
    if ANY_HIT && on_border() {
        return Err(Stop::Undecided);
    }
    Ok(())
}

/// The stack for a search of `bvh`, in the scratch's `stack`: the tree's
/// `stack_depth` plus one node's children (any-hit, taking two nodes at a
/// time: twice that). Indexed with a local top, which stays in a register
/// (a Vec's length would be written back on every push).
pub(super) fn search_stack<'a>(stack: &'a mut Vec<Entry>, bvh: &Bvh) -> &'a mut [Entry] {
    let len = (2 * bvh.stack_depth + 4 * WIDTH).max(bvh.wide.stack_depth + 2 * WIDE);
    if stack.len() < len {
        stack.resize(len, Entry::NONE);
    }
    stack
}

/// A node width as the search sees it: the move's slab test against a
/// node's children, four with SSE ([`Four`]) or eight with AVX2.
pub(super) trait Lanes {
    type Node;
    /// Per lane, where the move enters the child.
    type Near: Copy;
    /// Where the move enters each child, and a bitmask of the children it
    /// enters no later than `limit` whose contents meet the mask.
    fn enter(&self, node: &Self::Node, limit: f32) -> (Self::Near, u32);
    fn child(node: &Self::Node, lane: usize) -> u32;
    /// Pushes the children of the `hits` lanes (two or more) but the
    /// nearest, nearest on top, and returns the nearest's child: the one to
    /// visit now. Pruning by the window works best when the nearest contact
    /// is found first.
    fn push_nearest_last(
        node: &Self::Node,
        near: Self::Near,
        hits: u32,
        stack: &mut [Entry],
        top: &mut usize,
    ) -> u32;
    /// Whether the move passes through a solid core of node `node`'s
    /// children (`cores` not empty; see [`super::accel::cores`]).
    fn core_hit(&self, cores: &[CoreLanes], node: u32) -> bool;
}

/// The four-wide trees' lanes.
pub(super) struct Four {
    ray: Ray,
    mask: u32,
}

impl Lanes for Four {
    type Node = BvhNode;
    type Near = Vec4;

    #[inline(always)]
    fn enter(&self, node: &BvhNode, limit: f32) -> (Vec4, u32) {
        let (near, hits) = self.ray.enter(node, limit);
        (near, hits & lanes_in_mask(&node.contents, self.mask))
    }

    #[inline(always)]
    fn child(node: &BvhNode, lane: usize) -> u32 {
        node.children[lane]
    }

    #[inline(always)]
    fn push_nearest_last(
        node: &BvhNode,
        near: Vec4,
        hits: u32,
        stack: &mut [Entry],
        top: &mut usize,
    ) -> u32 {
        // Ordered with a sorting network on the packed entries (no
        // data-dependent branches: the order of children is a coin toss to
        // a branch predictor).
        let entered = hits.count_ones() as usize;
        push_nearest_last(Entry::lanes(node, near, hits), entered, stack, top)
    }

    #[inline(always)]
    fn core_hit(&self, cores: &[CoreLanes], node: u32) -> bool {
        self.ray.core_hits(&cores[node as usize]) != 0
    }
}

/// What every tree search of one move shares.
pub(super) struct Searching<'a, 'w, C, P> {
    pub world: &'a Kernel<'w>,
    pub bvh: &'a Bvh,
    pub clipper: &'a C,
    pub search: &'a mut Search,
    pub stack: &'a mut [Entry],
    pub probe: &'a mut P,
}

impl<C: Clipper, P: Probe> Searching<'_, '_, C, P> {
    /// Searches one tree from its root; `to_the_end`: to the end of the
    /// move, not only to the end of the nearest contact's window.
    ///
    /// A full trace visits the nearest child entered at once and pushes the
    /// others nearest on top. Any-hit (`ANY_HIT`) pushes them in any order,
    /// stops at a solid core of `cores`, and tests the top two entries in
    /// one step when both are nodes (their chains of dependent loads
    /// overlap; a move touching nothing visits every node either way).
    #[inline(always)]
    pub fn tree<L: Lanes, const ANY_HIT: bool>(
        &mut self,
        lanes: &L,
        nodes: &[L::Node],
        cores: &[CoreLanes],
        to_the_end: bool,
    ) -> Result<(), Stop> {
        if nodes.is_empty() {
            return Ok(());
        }
        let limit = |search: &Search| {
            if ANY_HIT || to_the_end {
                1.0
            } else {
                search.window
            }
        };
        // One any-hit node step: its entered children, or the hit at a core
        // (which lies inside its child's bounds: only a child entered can
        // have one the move passes through).
        let step = |reference: u32, probe: &mut P| {
            probe.bvh_node();
            let node = &nodes[reference as usize];
            let hits = lanes.enter(node, 1.0).1;
            if hits != 0 && !cores.is_empty() && lanes.core_hit(cores, reference) {
                probe.core_stop();
                return Err(Stop::Hit);
            }
            Ok((node, hits))
        };
        let push = |stack: &mut [Entry], top: &mut usize, node: &L::Node, mut hits: u32| {
            while hits != 0 {
                let slot = hits.trailing_zeros() as usize;
                hits &= hits - 1;
                stack[*top] = Entry::entered(L::child(node, slot), 0.0);
                *top += 1;
            }
        };
        // A step of two nodes pops two entries and pushes up to eight, so it
        // is taken only up to this height: it then leaves the stack below
        // `len - stack_depth - WIDTH`, and walking one node at a time from
        // any entry adds at most `stack_depth` entries above it and one
        // node's children, so the stack never overflows.
        let pair_height = self
            .stack
            .len()
            .saturating_sub(self.bvh.stack_depth + 3 * WIDTH);
        let (world, bvh, clipper) = (self.world, self.bvh, self.clipper);
        let stack = &mut *self.stack;
        let mut current = 0;
        let mut top = 0;
        'visit: loop {
            if current & PRIMITIVE != 0 {
                primitive(world, bvh, current, clipper, self.search, self.probe)?;
            } else if ANY_HIT {
                if top > 0 && top <= pair_height && stack[top - 1].child() & PRIMITIVE == 0 {
                    top -= 1;
                    let other = stack[top].child();
                    let (first, first_hits) = step(current, self.probe)?;
                    let (second, second_hits) = step(other, self.probe)?;
                    push(stack, &mut top, second, second_hits);
                    push(stack, &mut top, first, first_hits);
                } else {
                    let (node, hits) = step(current, self.probe)?;
                    push(stack, &mut top, node, hits);
                }
            } else {
                self.probe.bvh_node();
                let node = &nodes[current as usize];
                let (near, hits) = lanes.enter(node, limit(self.search));
                if hits != 0 && hits & (hits - 1) == 0 {
                    current = L::child(node, hits.trailing_zeros() as usize);
                    continue 'visit;
                }
                if hits != 0 {
                    current = L::push_nearest_last(node, near, hits, stack, &mut top);
                    continue 'visit;
                }
            }
            if ANY_HIT {
                if top == 0 {
                    return Ok(());
                }
                top -= 1;
                current = stack[top].child();
                continue 'visit;
            }
            match pop_within(stack, &mut top, limit(self.search)) {
                Some(next) => current = next,
                None => return Ok(()),
            }
        }
    }
}

/// Orders four entries (`entered` of them entered, the rest
/// [`Entry::NONE`]), pushes all entered but the nearest, nearest on top,
/// and returns the nearest's child: the one to visit now.
#[inline(always)]
pub(super) fn push_nearest_last(
    lanes: [Entry; 4],
    entered: usize,
    stack: &mut [Entry],
    top: &mut usize,
) -> u32 {
    let [a, b, c, d] = sort4_descending(lanes);
    // The entries not entered sort first (`NONE` is the largest), the
    // nearest last. Write the three slots before the nearest from the
    // first entered on (the slots past the ones pushed are free) and move
    // the top past the pushed.
    let sorted = [a, b, c, d, d, d, d];
    let first = 4 - entered;
    stack[*top..*top + 3].copy_from_slice(&sorted[first..first + 3]);
    *top += entered - 1;
    d.child()
}

/// Pops the next entry still within reach (entered no later than `limit`:
/// the window may have shrunk since it was pushed), or `None` when the
/// stack is empty.
#[inline(always)]
pub(super) fn pop_within(stack: &[Entry], top: &mut usize, limit: f32) -> Option<u32> {
    while *top > 0 {
        *top -= 1;
        let entry = stack[*top];
        if entry.near() <= limit {
            return Some(entry.child());
        }
    }
    None
}

/// A stack entry of the fast trace packed in 64 bits: the fraction where
/// the move enters the child's bounds in the high half (a non-negative f32,
/// whose bits order as the values do) and the child reference in the low
/// half, so entries order by entry fraction as plain integers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Entry(u64);

impl Entry {
    /// A lane not entered: after every entry in the order.
    pub const NONE: Entry = Entry(u64::MAX);

    /// Child `child` entered at fraction `near` (at least 0, but maybe
    /// -0.0: the sign bit is cleared).
    #[inline(always)]
    pub fn entered(child: u32, near: f32) -> Entry {
        Entry(u64::from(near.to_bits() & 0x7FFF_FFFF) << 32 | u64::from(child))
    }

    /// The entries of a node's four children, `NONE` for lanes not in `hits`.
    #[inline(always)]
    fn lanes(node: &BvhNode, near: Vec4, hits: u32) -> [Entry; WIDTH] {
        let near = near.to_array();
        std::array::from_fn(|k| {
            // All ones for a lane not entered, else zeros: a select without
            // a branch.
            let unless_entered = u64::from((hits >> k) & 1).wrapping_sub(1);
            Entry(Self::entered(node.children[k], near[k]).0 | unless_entered)
        })
    }

    /// The entry packed in `bits` (child low, entry fraction high).
    #[inline(always)]
    pub fn from_bits(bits: u64) -> Entry {
        Entry(bits)
    }

    #[inline(always)]
    pub fn child(self) -> u32 {
        self.0 as u32
    }

    #[inline(always)]
    pub fn near(self) -> f32 {
        f32::from_bits((self.0 >> 32) as u32)
    }
}

/// Sorts four entries, largest first, with a five-comparator network of
/// minimums and maximums (conditional moves, not branches).
#[inline(always)]
fn sort4_descending([a, b, c, d]: [Entry; 4]) -> [Entry; 4] {
    let (a, b) = (a.max(b), a.min(b));
    let (c, d) = (c.max(d), c.min(d));
    let (a, c) = (a.max(c), a.min(c));
    let (b, d) = (b.max(d), b.min(d));
    let (b, c) = (b.max(c), b.min(c));
    [a, b, c, d]
}

/// A bitmask of the lanes whose contents meet `mask`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn lanes_in_mask(contents: &[u32; WIDTH], mask: u32) -> u32 {
    // One vector AND, compare and move-mask (SSE2, always present on
    // x86_64); the portable form below compiled to four scalar tests.
    use std::arch::x86_64::{
        _mm_and_si128, _mm_castsi128_ps, _mm_cmpeq_epi32, _mm_movemask_ps, _mm_set1_epi32,
        _mm_set_epi32, _mm_setzero_si128,
    };
    let [a, b, c, d] = contents.map(|x| x as i32);
    // SAFETY: these intrinsics take and return values (no pointers) and need
    // only SSE2, which every x86_64 processor has.
    let unmet = unsafe {
        let met = _mm_and_si128(_mm_set_epi32(d, c, b, a), _mm_set1_epi32(mask as i32));
        _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(met, _mm_setzero_si128())))
    };
    !(unmet as u32) & 0xF
}

/// A bitmask of the lanes whose contents meet `mask`.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub(super) fn lanes_in_mask(contents: &[u32; WIDTH], mask: u32) -> u32 {
    (UVec4::from_array(*contents) & UVec4::splat(mask))
        .cmpne(UVec4::ZERO)
        .bitmask()
}

/// The contents of primitive `reference`.
fn primitive_contents(world: &Kernel, bvh: &Bvh, reference: u32) -> u32 {
    let index = (reference & INDEX) as usize;
    if reference & (PATCH | FACET) == 0 {
        world.brushes[index].contents
    } else if reference & FACET != 0 {
        world.patches[bvh.facet_patch[index] as usize].contents
    } else {
        world.patches[index].contents
    }
}

/// [`primitive`] for a primitive whose contents were not yet tested
/// against the mask (no node's lanes filtered it).
#[inline(never)]
pub(super) fn primitive_unmasked<C: Clipper, P: Probe>(
    world: &Kernel,
    bvh: &Bvh,
    reference: u32,
    clipper: &C,
    search: &mut Search,
    probe: &mut P,
) -> Result<(), Stop> {
    if primitive_contents(world, bvh, reference) & clipper.mask() == 0 {
        return Ok(());
    }
    primitive(world, bvh, reference, clipper, search, probe)
}

/// Clips one primitive whose contents meet the mask (its lane was tested)
/// and offers what it finds. Not inlined: its invariants, hoisted into the
/// node loop, crowded the loop's registers.
#[inline(never)]
pub(super) fn primitive<C: Clipper, P: Probe>(
    world: &Kernel,
    bvh: &Bvh,
    reference: u32,
    clipper: &C,
    search: &mut Search,
    probe: &mut P,
) -> Result<(), Stop> {
    let index = (reference & INDEX) as usize;
    let any_hit = clipper.any_hit();
    // Near a piece of a primitive outside the leaves listing it
    // (`accel::listing`) the reference may not meet it: the walk decides.
    let unlisted = &world.accel.unlisted;
    let box_at = |frac: f32| {
        let (start, end, half) = clipper.segment();
        let centre = start + (end - start) * frac;
        (centre - half, centre + half)
    };
    // A facet's: a ray meets the facet where it crosses its surface
    // (`window`), inside the borders, and stops 1/8 unit short of the
    // plane (`frac`), which along a grazing ray can lie units back: both.
    let facet_box = |hit: &FacetContact| {
        let (lo, hi) = box_at(hit.frac);
        if hit.window == hit.frac {
            return (lo, hi);
        }
        let (met_lo, met_hi) = box_at(hit.window);
        (lo.min(met_lo), hi.max(met_hi))
    };
    if reference & (PATCH | FACET) == 0 {
        probe.brush();
        let clipped = clipper.brush(world, index);
        let at = match clipped {
            Clipped::Miss => return Ok(()),
            Clipped::Inside { .. } => 0.0,
            Clipped::Enter { frac, .. } => frac,
        };
        if unlisted.brush_near(index, || box_at(at)) {
            return Err(Stop::Undecided);
        }
        match clipped {
            Clipped::Miss => Ok(()),
            Clipped::Inside { gets_out: true } => {
                search.startsolid = true;
                Ok(())
            }
            Clipped::Inside { gets_out: false } if any_hit => Err(Stop::Hit),
            Clipped::Inside { gets_out: false } => search.all_solid(world.brushes[index].contents),
            Clipped::Enter { .. } if any_hit => Err(Stop::Hit),
            Clipped::Enter { frac, contact } => search.offer(frac, frac, contact),
        }
    } else if reference & FACET != 0 {
        let patch = bvh.facet_patch[index] as usize;
        probe.patch();
        let Some(hit) = clipper.facet(world, patch, index, search.window) else {
            return Ok(());
        };
        // A ray's facet bounded by its polygon: near the unlisted pieces of
        // any facet of its patch the walk decides, as for the whole patch.
        let near = if reference & PATCH != 0 {
            unlisted.patch_near(patch, || facet_box(&hit))
        } else {
            unlisted.facet_near(index, || facet_box(&hit))
        };
        if near {
            Err(Stop::Undecided)
        } else if any_hit {
            Err(Stop::Hit)
        } else {
            search.offer(hit.frac, hit.window, hit.contact)
        }
    } else {
        probe.patch();
        clipper.patch(world, index, |hit| {
            if unlisted.patch_near(index, || facet_box(&hit)) {
                return Err(Stop::Undecided);
            }
            if any_hit {
                return Err(Stop::Hit);
            }
            search.offer(hit.frac, hit.window, hit.contact)
        })
    }
}

/// Rays and boxes.
impl Clipper for TraceWork {
    fn segment(&self) -> (Vec3A, Vec3A, Vec3A) {
        (self.start, self.end, self.extents)
    }

    fn bounds(&self) -> [Vec3A; 2] {
        self.bounds
    }

    fn holds_start_brush(&self, world: &Kernel, b: usize) -> bool {
        box_in_brush(world, &world.brushes[b], self)
    }

    fn holds_start_patch(&self, world: &Kernel, p: usize) -> bool {
        position_test_patch(world, &world.patches[p], self)
    }

    fn walk_leaves<V: Visitor>(
        &self,
        world: &Kernel,
        ordered: bool,
        stack: &mut Vec<Segment>,
        visitor: &mut V,
    ) {
        let m = Move {
            start: self.start,
            end: self.end,
            bounds: self.bounds,
            mask: self.mask,
        };
        // A ray's reach is a constant: its own copy of the descent.
        if self.is_point {
            walk_move(world, &m, &PointReach, ordered, stack, visitor);
        } else {
            walk_move(world, &m, &BoxReach(self.extents), ordered, stack, visitor);
        }
    }

    fn mask(&self) -> u32 {
        self.mask
    }

    fn any_hit(&self) -> bool {
        self.stop_at_any_hit
    }

    fn stops_at_solid_cores(&self) -> bool {
        self.stop_at_any_hit
    }

    fn patch_hits_reach_back(&self) -> bool {
        self.is_point
    }

    #[inline(always)]
    fn facet(
        &self,
        world: &Kernel,
        patch: usize,
        facet: usize,
        limit: f32,
    ) -> Option<FacetContact> {
        if !patch_in_reach(world, patch, &self.bounds) {
            return None;
        }
        let hit = facet_hit(world, facet, self, limit)?;
        Some(FacetContact::new(
            &world.patches[patch],
            hit.frac,
            hit.at,
            hit.normal,
            hit.dist,
        ))
    }

    #[inline(always)]
    fn brush(&self, world: &Kernel, index: usize) -> Clipped {
        match clip_brush(world, index, self) {
            BrushClip::Miss => Clipped::Miss,
            BrushClip::Inside { gets_out } => Clipped::Inside { gets_out },
            BrushClip::Enter { frac, side } => Clipped::Enter {
                frac: frac.max(0.0),
                contact: brush_contact(world, index, side),
            },
        }
    }
}

/// What a contact with side `side` of brush `index` reports.
#[inline(always)]
pub(super) fn brush_contact(world: &Kernel, index: usize, side: usize) -> Contact {
    let brush = &world.brushes[index];
    let side = &world.brush_sides[brush.first_side as usize + side];
    let plane = &world.planes[side.plane as usize];
    Contact {
        normal: plane.normal(),
        dist: plane.dist,
        surface_flags: side.surface_flags,
        contents: brush.contents,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packed entries order as (entry fraction, child) do, `-0.0` as `0.0`,
    /// and the network sorts any four of them (lanes not entered first).
    #[test]
    fn entries_sort_by_entry_fraction() {
        let fractions = [0.0f32, -0.0, 1e-30, 0.125, 0.5, 0.5000001, 1.0];
        let children = [0u32, 3, PRIMITIVE | 7, PRIMITIVE | FACET | 2];
        let mut entries = Vec::new();
        for &near in &fractions {
            for &child in &children {
                entries.push((near.max(0.0), child, Entry::entered(child, near)));
            }
        }
        for (a_near, a_child, a) in &entries {
            assert_eq!(a.near(), *a_near);
            assert_eq!(a.child(), *a_child);
            for (b_near, b_child, b) in &entries {
                let expected = a_near
                    .partial_cmp(b_near)
                    .map(|o| o.then(a_child.cmp(b_child)));
                assert_eq!(
                    Some(a.cmp(b)),
                    expected,
                    "{a_near} {a_child} vs {b_near} {b_child}"
                );
            }
            assert!(*a < Entry::NONE);
        }
        // Every choice of four (with repeats) and every set of lanes entered.
        let mut rng = fastrand::Rng::with_seed(0x9e37_79b9_7f4a_7c15);
        for _ in 0..20_000 {
            let mut pick = || entries[rng.usize(..entries.len())].2;
            let lanes = [pick(), pick(), pick(), pick()];
            let hits = rng.u32(..) & 0xF;
            let keys: [Entry; 4] = std::array::from_fn(|k| {
                if hits & (1 << k) != 0 {
                    lanes[k]
                } else {
                    Entry::NONE
                }
            });
            // The node loop builds the same keys from a node's lanes.
            let node = BvhNode {
                min: [Vec4::ZERO; 3],
                max: [Vec4::ZERO; 3],
                children: lanes.map(Entry::child),
                contents: [1; WIDTH],
            };
            let near = Vec4::from_array(lanes.map(Entry::near));
            assert_eq!(Entry::lanes(&node, near, hits), keys);
            let mut expected = keys;
            expected.sort_by(|a, b| b.cmp(a));
            assert_eq!(sort4_descending(keys), expected);
        }
    }
}
