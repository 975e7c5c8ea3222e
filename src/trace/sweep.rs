//! Sweeping a sphere, capsule, cylinder or convex shape by plane shifting:
//! every plane the walk and the clipping read is pushed out by the shape's
//! support distance along it, and the shape's centre is traced as a point.
//!
//! This is the box kernel ([`super::tree`], [`super::brush`], [`super::patch`])
//! with the box's corner offsets replaced by a [`Support`] function, compiled
//! once per shape kind. Boxes and rays never come here: their path stays
//! specialised.

use super::brush::{clip_planes, clip_pushed, BrushClip};
use super::fast::{self, Clipped, Clipper, Contact, FacetContact, Found, Outcome};
use super::patch::{
    self, dot, enter_facet_planes, entry_plane, facet_entry, facet_lanes, patch_in_reach,
};
use super::shape::{Capsule, Cylinder, Hull, Shape, Sphere, Support};
use super::tree::{BoxLeaves, Lists, SOURCE_FAR_REACH};
use super::work::{Scratch, TraceQuery, TraceResult};
use crate::math::{Vec3, TREE_WALK_SLACK};
use crate::world::{Brush, Facet, Leaf, Patch, World};
use glam::{Vec3A, Vec4};

/// One shape trace's set-up and result.
pub(crate) struct ShapeWork<S> {
    /// Start and end of the shape's centre. In SIMD lanes, as the fast
    /// trace reads them: one 16-byte store and load each (read back as
    /// lanes, 12-byte fields stored in pieces stalled the load).
    pub start: Vec3A,
    pub end: Vec3A,
    pub shape: S,
    /// Half-size of the shape's bounding box.
    pub half: Vec3A,
    /// Swept bounds of the shape.
    pub bounds: [Vec3; 2],
    pub mask: u32,
    pub result: TraceResult,
    /// When set, brushes are not clipped into `result` but listed: the ones
    /// the plane-shifted shape touches, the only ones the exact sweep can
    /// touch (the shifted planes bound the Minkowski sum).
    pub collect: Option<Vec<u32>>,
    /// Any-hit: the fast trace stops at the first contact.
    pub stop_at_any_hit: bool,
}

impl<S: Support> ShapeWork<S> {
    fn new(q: &TraceQuery, centre: Vec3, half: Vec3, shape: S, collect: bool) -> Self {
        // The same f32 operations per component as in `Vec3`.
        let start = Vec3A::from(q.start) + Vec3A::from(centre);
        let end = Vec3A::from(q.end) + Vec3A::from(centre);
        let half = Vec3A::from(half);
        // In SIMD lanes: glam's `Vec3::min`/`max` branch per component, and
        // which end is lower is a coin toss to a branch predictor.
        Self {
            start,
            end,
            shape,
            half,
            bounds: [
                (start.min(end) - half).into(),
                (start.max(end) + half).into(),
            ],
            mask: q.mask,
            result: TraceResult::default(),
            collect: collect.then(Vec::new),
            stop_at_any_hit: false,
        }
    }
}

/// Runs `f` with the shape's [`Support`] type (one compiled sweep per kind).
pub(crate) fn with_support<R>(
    q: &TraceQuery,
    shape: &Shape,
    collect: bool,
    f: impl FnOnce(&mut dyn ShapeSweep) -> R,
) -> R {
    let (centre, half) = (shape.centre(), shape.half_extents());
    match shape {
        Shape::Sphere { radius } => f(&mut ShapeWork::new(
            q,
            centre,
            half,
            Sphere(*radius),
            collect,
        )),
        Shape::Capsule {
            radius,
            half_height,
        } => f(&mut ShapeWork::new(
            q,
            centre,
            half,
            Capsule::new(*radius, *half_height),
            collect,
        )),
        Shape::Cylinder {
            radius,
            half_height,
        } => f(&mut ShapeWork::new(
            q,
            centre,
            half,
            Cylinder::new(*radius, *half_height),
            collect,
        )),
        Shape::Convex(hull) => f(&mut ShapeWork::new(q, centre, half, Hull(hull), collect)),
    }
}

/// The sweep of one shape kind, behind one dynamic call per query. Each
/// call builds its answer inside (the fast trace's answer handed back
/// through the call was copied with wide loads of what had just been stored
/// in narrow pieces: three stalled loads a query).
pub(crate) trait ShapeSweep {
    /// The answer to `q` (whose shape this is).
    fn trace(&mut self, world: &World, scratch: &mut Scratch, q: &TraceQuery) -> TraceResult;
    /// Whether the shape touches anything in the mask: the fast trace stops
    /// at the first contact.
    fn any_hit(&mut self, world: &World, scratch: &mut Scratch) -> bool;
    /// Collecting (see [`ShapeWork::collect`]): the answer with only the
    /// patches clipped (no `endpos`), and the brushes listed.
    fn candidates(&mut self, world: &World, scratch: &mut Scratch) -> (TraceResult, Vec<u32>);
}

impl<S: Support> ShapeWork<S> {
    /// Moves take the fast trace first; the tree walk answers position
    /// tests, candidate lists for exact mode, and what the fast trace
    /// leaves undecided. The fast trace's answer is returned as found, the
    /// walk's left in the result.
    #[inline(always)]
    fn run(&mut self, world: &World, scratch: &mut Scratch) -> Option<Found> {
        let moves = !self.start.cmpeq(self.end).all();
        if moves && self.collect.is_none() && world.kernel.matches(world) {
            match fast::search(world, &world.kernel.bvh, self, scratch, &mut ()) {
                Outcome::Answered(found) => return Some(found),
                Outcome::Hit => {
                    self.result.fraction = 0.0;
                    return None;
                }
                Outcome::Undecided | Outcome::Tied(_) => {}
            }
        }
        scratch.begin(world);
        if !moves {
            position_test(world, self, scratch);
        } else {
            trace_tree(world, self, scratch);
        }
        None
    }
}

impl<S: Support> ShapeSweep for ShapeWork<S> {
    fn trace(&mut self, world: &World, scratch: &mut Scratch, q: &TraceQuery) -> TraceResult {
        match self.run(world, scratch) {
            Some(found) => found.result(q),
            None => self.result.ended(q),
        }
    }

    fn any_hit(&mut self, world: &World, scratch: &mut Scratch) -> bool {
        self.stop_at_any_hit = true;
        match self.run(world, scratch) {
            Some(found) => found.fraction() < 1.0,
            None => self.result.fraction < 1.0,
        }
    }

    fn candidates(&mut self, world: &World, scratch: &mut Scratch) -> (TraceResult, Vec<u32>) {
        // Collecting, the sweep takes the walk: its answer is in the result.
        let found = self.run(world, scratch);
        debug_assert!(found.is_none());
        (self.result, self.collect.take().unwrap_or_default())
    }
}

/// The plane-shifted answer for a query with a shape.
pub(crate) fn trace_shape(
    world: &World,
    q: &TraceQuery,
    shape: &Shape,
    scratch: &mut Scratch,
) -> TraceResult {
    with_support(q, shape, false, |sweep| sweep.trace(world, scratch, q))
}

/// Whether the plane-shifted sweep of `shape` touches anything in the
/// mask: exactly `fraction < 1` of [`trace_shape`], found faster by the fast
/// trace stopping at the first contact (what it leaves undecided takes the
/// full walk).
pub(crate) fn any_hit_shape(
    world: &World,
    q: &TraceQuery,
    shape: &Shape,
    scratch: &mut Scratch,
) -> bool {
    with_support(q, shape, false, |sweep| sweep.any_hit(world, scratch))
}

/// A piece of the move still to walk: `child` between fractions `f1..f2`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Segment {
    child: i32,
    f1: f32,
    f2: f32,
    p1: Vec3,
    p2: Vec3,
}

/// One node as the walk reads it.
struct NodeView {
    normal: Vec3,
    dist: f32,
    /// 0/1/2 for a +X/+Y/+Z plane, 3 otherwise (only the source's tree
    /// reads it).
    axis: u32,
    children: [i32; 2],
    /// OR of the contents below each child (all ones when unknown).
    below: [u32; 2],
    /// Bounds of everything below (infinite when unknown).
    mins: Vec3,
    maxs: Vec3,
}

/// Which tree the walk reads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Walked {
    /// The source's tree, in the order box sweeps visit it (see
    /// `tree::PlainNodes`): the tree that decides ties.
    Source,
    /// The kernel's packed nodes (contents below each child and bounds, so
    /// whole subtrees are skipped).
    Packed,
    /// The compiled tree as the file has it.
    File,
}

impl Walked {
    /// The tree to walk: the source's when the order matters and the world
    /// has it, else the compiled one.
    fn of(world: &World, ordered: bool) -> Self {
        if ordered && world.source.is_present() {
            Walked::Source
        } else if world.kernel.matches(world) {
            Walked::Packed
        } else {
            Walked::File
        }
    }
}

#[inline(always)]
fn node_view(world: &World, walked: Walked, index: i32) -> NodeView {
    let plane_view = |node: &crate::world::Node| {
        let plane = &world.planes[node.plane as usize];
        NodeView {
            normal: plane.normal(),
            dist: plane.dist,
            axis: plane.axis,
            children: node.children,
            below: [u32::MAX; 2],
            mins: Vec3::NEG_INFINITY,
            maxs: Vec3::INFINITY,
        }
    };
    match walked {
        Walked::Packed => {
            let node = &world.kernel.nodes[index as usize];
            NodeView {
                normal: node.plane.truncate(),
                dist: node.plane.w,
                axis: 3,
                children: node.children,
                below: node.contents_below,
                mins: node.mins.into(),
                maxs: node.maxs.into(),
            }
        }
        Walked::Source => plane_view(&world.source.nodes[index as usize]),
        Walked::File => plane_view(&world.nodes[index as usize]),
    }
}

/// Whether the box `b` overlaps `lo..=hi`.
#[inline(always)]
fn overlaps(b: &[Vec3; 2], lo: Vec3, hi: Vec3) -> bool {
    b[0].cmple(hi).all() && b[1].cmpge(lo).all()
}

/// Walks the move through the tree, nearest side first.
///
/// Skipping by the kernel's bounds gives the same answers as walking
/// everything (see `world::kernel`): a brush's axial sides, shifted by the
/// shape's support along the axis, move out by at most the shape's half-size
/// on that axis, which the swept bounds already include; a brush the swept
/// bounds stay a margin away from is rejected by its clip before it writes
/// anything.
fn trace_tree<S: Support>(world: &World, w: &mut ShapeWork<S>, scratch: &mut Scratch) {
    // Exact mode's candidate list does not depend on the order: the
    // compiled tree, with its bounds, finds it faster.
    let walked = Walked::of(world, w.collect.is_none());
    if walked == Walked::Packed {
        let below = world.kernel.nodes[0].contents_below;
        if (below[0] | below[1]) & w.mask == 0 {
            return;
        }
    }
    let lists = if walked == Walked::Source {
        Lists::source(&world.source)
    } else {
        Lists::compiled(world)
    };
    let mut stack = std::mem::take(&mut scratch.shape_stack);
    stack.clear();
    stack.push(Segment {
        child: lists.root,
        f1: 0.0,
        f2: 1.0,
        p1: w.start.into(),
        p2: w.end.into(),
    });
    while let Some(seg) = stack.pop() {
        walk_segment(world, walked, lists, w, scratch, seg, &mut stack);
        if w.result.allsolid || (w.result.fraction == 0.0 && w.collect.is_none()) {
            break;
        }
    }
    scratch.shape_stack = stack;
}

/// Descends from `seg.child` along the near side, pushing far sides (as the
/// box walk does, with the shape's reach along each node normal; in the
/// source's tree, as box sweeps walk it, with a fixed reach across planes
/// that are not axial).
fn walk_segment<S: Support>(
    world: &World,
    walked: Walked,
    lists: Lists,
    w: &mut ShapeWork<S>,
    scratch: &mut Scratch,
    seg: Segment,
    stack: &mut Vec<Segment>,
) {
    let Segment {
        mut child,
        f1: p1f,
        mut f2,
        p1,
        mut p2,
    } = seg;
    if w.result.fraction <= p1f {
        return;
    }
    let mask = w.mask;
    let packed = walked == Walked::Packed;
    while child >= 0 {
        let node = node_view(world, walked, child);
        if packed && !overlaps(&w.bounds, node.mins, node.maxs) {
            return;
        }
        let normal = node.normal;
        let t1 = normal.dot(p1) - node.dist;
        let t2 = normal.dot(p2) - node.dist;
        let offset = if walked == Walked::Source && node.axis >= 3 {
            SOURCE_FAR_REACH
        } else {
            w.shape.reach(normal)
        };
        let reach = offset + TREE_WALK_SLACK;
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
        let (near, frac_near_end, frac_far_start) = super::tree::straddle(t1, t2, reach);
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
    // Brushes are culled by their boxes on any tree the kernel was built
    // for (the source's tree has no bounds of its own to cull nodes by).
    let cull = packed || world.kernel.matches(world);
    trace_leaf(world, cull, lists, w, scratch, lists.leaf(child));
}

fn trace_leaf<S: Support>(
    world: &World,
    cull: bool,
    lists: Lists,
    w: &mut ShapeWork<S>,
    scratch: &mut Scratch,
    leaf: &Leaf,
) {
    for &b in lists.brushes(leaf) {
        let brush = &world.brushes[b as usize];
        if !scratch.first_visit_brush(b as usize) || brush.contents & w.mask == 0 {
            continue;
        }
        if cull {
            let [lo, hi] = world.kernel.brush_bounds[b as usize];
            if !overlaps(&w.bounds, Vec3::from_array(lo), Vec3::from_array(hi)) {
                continue;
            }
        }
        if let Some(list) = &mut w.collect {
            // Does the plane-shifted shape come near it at all?
            if touches_brush(world, b as usize, &w.shape, w.start.into(), w.end.into()) {
                list.push(b);
            }
            continue;
        }
        let mut clip = ShapeClip {
            start: w.start.into(),
            end: w.end.into(),
            result: w.result,
        };
        clip_brush(world, b as usize, &w.shape, &mut clip);
        w.result = clip.result;
        if w.result.allsolid || w.result.fraction == 0.0 {
            return;
        }
    }
    for &p in lists.patches(leaf) {
        let patch = &world.patches[p as usize];
        if !scratch.first_visit_patch(p as usize) || patch.contents & w.mask == 0 {
            continue;
        }
        trace_through_patch(world, patch, w);
        if w.result.allsolid {
            return;
        }
    }
}

/// A segment and the result clipping builds up.
pub(crate) struct ShapeClip {
    pub start: Vec3,
    pub end: Vec3,
    pub result: TraceResult,
}

/// The planes a shape sweep clips against for brush `b`: its sides, then its
/// shape bevels (if the world has them), as `(normal, dist, surface flags)`.
#[inline(always)]
fn shape_planes<'w>(
    world: &World<'w>,
    b: usize,
    brush: &'w Brush,
) -> impl Iterator<Item = (Vec3, f32, u32)> + use<'w> {
    let planes = world.planes;
    let first = brush.first_side as usize;
    world.brush_sides[first..first + brush.num_sides as usize]
        .iter()
        .map(move |side| {
            let plane = &planes[side.plane as usize];
            (plane.normal(), plane.dist, side.surface_flags)
        })
        .chain(world.shape_bevels_of(b).iter().map(|bevel| {
            (
                Vec3::from_array(bevel.normal),
                bevel.dist,
                bevel.surface_flags,
            )
        }))
}

/// Clips the shape's centre against brush `b` with every side (and shape
/// bevel) pushed out by the shape's support, with the reference's epsilon
/// rules (see [`super::brush::trace_through_brush`], which this mirrors).
/// Sides come before bevels, so on a tie the side is reported.
pub(crate) fn clip_brush<S: Support>(world: &World, b: usize, shape: &S, w: &mut ShapeClip) {
    match clip_brush_alone(world, b, shape, w.start, w.end) {
        Clipped::Miss => {}
        Clipped::Inside { gets_out } => {
            w.result.startsolid = true;
            if !gets_out {
                w.result.allsolid = true;
                w.result.fraction = 0.0;
                w.result.contents = world.brushes[b].contents;
            }
        }
        Clipped::Enter { frac, contact } => {
            if frac < w.result.fraction {
                w.result.fraction = frac;
                w.result.normal = contact.normal;
                w.result.dist = contact.dist;
                w.result.surface_flags = contact.surface_flags;
                w.result.contents = contact.contents;
            }
        }
    }
}

/// [`clip_brush`] on its own: what brush `b` does to the move, whatever was
/// found before. The brush module's clip, with its 1/8-unit rules, over the
/// brush's sides and then its shape bevels, each pushed out by the shape.
#[inline]
fn clip_brush_alone<S: Support>(
    world: &World,
    b: usize,
    shape: &S,
    start: Vec3,
    end: Vec3,
) -> Clipped {
    let brush = &world.brushes[b];
    if brush.num_sides == 0 {
        return Clipped::Miss;
    }
    let kernel = &world.kernel;
    let sides = brush.num_sides as usize;
    let bevels = world.shape_bevels_of(b);
    let clip = match kernel.brush_lanes.get(b) {
        // The kernel's copy of the sides and then the bevels, four to a
        // record: the same numbers, with no branch per plane.
        Some(&first) => {
            let (side_records, bevel_records) = (sides.div_ceil(4), bevels.len().div_ceil(4));
            let records = &kernel.side_lanes[first as usize..][..side_records + bevel_records];
            let (side_lanes, bevel_lanes) = records.split_at(side_records);
            let shift = |n: &[Vec4; 3]| shape.shift_lanes(n);
            clip_pushed(
                side_lanes,
                bevel_lanes,
                sides,
                start.into(),
                end.into(),
                shift,
            )
        }
        None => {
            let pushed = shape_planes(world, b, brush)
                .map(|(normal, dist, _)| (Vec3A::from(normal), dist + shape.shift(normal)));
            clip_planes(start.into(), end.into(), pushed)
        }
    };
    match clip {
        BrushClip::Miss => Clipped::Miss,
        BrushClip::Inside { gets_out } => Clipped::Inside { gets_out },
        BrushClip::Enter { frac, side } => {
            let (normal, dist, surface_flags) = match side.checked_sub(sides) {
                None => {
                    let side = &world.brush_sides[brush.first_side as usize + side];
                    let plane = &world.planes[side.plane as usize];
                    (plane.normal(), plane.dist, side.surface_flags)
                }
                Some(k) => {
                    let bevel = &bevels[k];
                    (
                        Vec3::from_array(bevel.normal),
                        bevel.dist,
                        bevel.surface_flags,
                    )
                }
            };
            Clipped::Enter {
                frac: frac.max(0.0),
                contact: Contact {
                    normal,
                    dist,
                    surface_flags,
                    contents: brush.contents,
                },
            }
        }
    }
}

/// How far out (units) the candidate test grows the shifted brush: more than
/// the distance at which the exact sweep counts a contact.
const CANDIDATE_MARGIN: f32 = 0.1;

/// Whether the segment `start..end` meets brush `b` with every plane pushed
/// out by the shape's support plus [`CANDIDATE_MARGIN`]: plain geometry,
/// without the clip's 1/8-unit rules (which let a box or a shifted shape
/// through a corner it overlaps by less than 1/8 unit while moving out of
/// it, where the exact shape does touch). The shifted planes bound the
/// exact swept shape, so the exact sweep touches no brush this rejects.
fn touches_brush<S: Support>(world: &World, b: usize, shape: &S, start: Vec3, end: Vec3) -> bool {
    let brush = &world.brushes[b];
    if brush.num_sides == 0 {
        return false;
    }
    let (mut enter, mut leave) = (0.0f32, 1.0f32);
    for (normal, dist, _) in shape_planes(world, b, brush) {
        let dist = dist + shape.shift(normal) + CANDIDATE_MARGIN;
        let d1 = start.dot(normal) - dist;
        let d2 = end.dot(normal) - dist;
        if d1 > 0.0 && d2 > 0.0 {
            return false;
        }
        if d1 > 0.0 {
            enter = enter.max(d1 / (d1 - d2));
        } else if d2 > 0.0 {
            leave = leave.min(d1 / (d1 - d2));
        }
        if enter > leave {
            return false;
        }
    }
    true
}

/// Whether the shape at `at` overlaps brush `b` after plane shifting (closed).
pub(crate) fn shape_in_brush<S: Support>(world: &World, b: usize, shape: &S, at: Vec3) -> bool {
    if world.brushes[b].num_sides == 0 {
        return false;
    }
    shape_planes(world, b, &world.brushes[b])
        .all(|(normal, dist, _)| at.dot(normal) - (dist + shape.shift(normal)) <= 0.0)
}

fn trace_through_patch<S: Support>(world: &World, patch: &Patch, w: &mut ShapeWork<S>) {
    if !patch_in_reach(patch, &w.bounds) {
        return;
    }
    let before = w.result.fraction;
    let first = patch.first_facet as usize;
    for facet in first..first + patch.num_facets as usize {
        if let Some((frac, n, d)) = facet_hit(world, facet, &w.shape, w.start.into(), w.end.into())
        {
            if frac < w.result.fraction {
                w.result.fraction = frac;
                w.result.normal = n;
                w.result.dist = d;
            }
        }
    }
    if w.result.fraction < before {
        w.result.contents = patch.contents;
        w.result.surface_flags = patch.surface_flags;
    }
}

/// The facet's planes as the shape sees them: the surface plane first, then
/// each border (flipped when inward), each pushed out by the shape's support.
fn shifted_facet_planes<'a, S: Support>(
    world: &'a World,
    facet: &'a Facet,
    shape: &'a S,
) -> ((Vec3, f32), impl Iterator<Item = (Vec3, f32)> + 'a) {
    let surface = &world.patch_planes[facet.surface_plane as usize];
    let n = patch::normal(surface);
    let surface_plane = (n, surface.plane[3] + shape.shift(n));
    let first = facet.first_border as usize;
    let borders = world.facet_borders[first..first + facet.num_borders as usize]
        .iter()
        .map(move |b| {
            let p = &world.patch_planes[b.plane as usize];
            let (n, d) = if b.inward != 0 {
                (-patch::normal(p), -p.plane[3])
            } else {
                (patch::normal(p), p.plane[3])
            };
            (n, d + shape.shift(n))
        });
    (surface_plane, borders)
}

/// Where the move hits facet `facet` (fraction, plane normal and
/// distance), on its own: from the kernel's lanes when the world has them
/// (the brush clip's crossings, with no branch per plane), else plane by
/// plane (the same numbers).
fn facet_hit<S: Support>(
    world: &World,
    facet: usize,
    shape: &S,
    start: Vec3,
    end: Vec3,
) -> Option<(f32, Vec3, f32)> {
    let records = facet_lanes(world, facet);
    let facet = &world.facets[facet];
    let Some((records, _)) = records else {
        return facet_hit_planes(world, facet, shape, start, end);
    };
    // (A shape's push depends on the plane's normal only, so an inward
    // border, flipped, needs no mark.)
    let count = 1 + facet.num_borders as usize;
    let shift = |n: &[Vec4; 3]| shape.shift_lanes(n);
    let clip = clip_pushed(records, &[], count, start.into(), end.into(), shift);
    let (frac, plane) = facet_entry(clip, facet)?;
    let (surface, borders) = shifted_facet_planes(world, facet, shape);
    let (normal, dist) = entry_plane(plane, surface, borders)?;
    Some((frac, normal, dist))
}

/// [`facet_hit`] plane by plane.
fn facet_hit_planes<S: Support>(
    world: &World,
    facet: &Facet,
    shape: &S,
    start: Vec3,
    end: Vec3,
) -> Option<(f32, Vec3, f32)> {
    let (surface, borders) = shifted_facet_planes(world, facet, shape);
    enter_facet_planes(surface, borders, facet.num_borders as usize, start, end)
}

/// The fast trace's view of a shape sweep (see [`super::fast`]).
impl<S: Support> Clipper for ShapeWork<S> {
    fn segment(&self) -> (Vec3A, Vec3A, Vec3A) {
        (self.start, self.end, self.half)
    }

    fn mask(&self) -> u32 {
        self.mask
    }

    fn any_hit(&self) -> bool {
        self.stop_at_any_hit
    }

    fn patch_hits_reach_back(&self) -> bool {
        false
    }

    #[inline(always)]
    fn facet(
        &self,
        world: &World,
        patch: usize,
        facet: usize,
        _limit: f32,
    ) -> Option<FacetContact> {
        let patch = &world.patches[patch];
        if !patch_in_reach(patch, &self.bounds) {
            return None;
        }
        let (frac, normal, dist) = facet_hit(
            world,
            facet,
            &self.shape,
            self.start.into(),
            self.end.into(),
        )?;
        Some(FacetContact::new(patch, frac, frac, normal, dist))
    }

    #[inline(always)]
    fn brush(&self, world: &World, index: usize) -> Clipped {
        clip_brush_alone(
            world,
            index,
            &self.shape,
            self.start.into(),
            self.end.into(),
        )
    }
}

fn shape_in_patch<S: Support>(world: &World, patch: &Patch, shape: &S, at: Vec3) -> bool {
    let first = patch.first_facet as usize;
    world.facets[first..first + patch.num_facets as usize]
        .iter()
        .any(|facet| {
            let (surface, mut borders) = shifted_facet_planes(world, facet, shape);
            dot(at, surface.0) - surface.1 <= 0.0 && borders.all(|(n, d)| dot(at, n) - d <= 0.0)
        })
}

/// A shape trace whose start equals its end: is the shape inside anything?
fn position_test<S: Support>(world: &World, w: &mut ShapeWork<S>, scratch: &mut Scratch) {
    let lo = (w.start - w.half - Vec3A::splat(TREE_WALK_SLACK)).into();
    let hi = (w.start + w.half + Vec3A::splat(TREE_WALK_SLACK)).into();
    let lists = Lists::ordering(world);
    let mut leaves = Vec::new();
    BoxLeaves::new(world, lo, hi).collect(lists.root, &mut leaves, &mut ());
    for leaf_index in leaves {
        let leaf = &lists.leaves[leaf_index as usize];
        for &b in lists.brushes(leaf) {
            let brush = &world.brushes[b as usize];
            if !scratch.first_visit_brush(b as usize) || brush.contents & w.mask == 0 {
                continue;
            }
            if shape_in_brush(world, b as usize, &w.shape, w.start.into()) {
                if let Some(list) = &mut w.collect {
                    list.push(b);
                    continue;
                }
                set_inside(&mut w.result, brush.contents);
                return;
            }
        }
        for &p in lists.patches(leaf) {
            let patch = &world.patches[p as usize];
            if !scratch.first_visit_patch(p as usize) || patch.contents & w.mask == 0 {
                continue;
            }
            if shape_in_patch(world, patch, &w.shape, w.start.into()) {
                set_inside(&mut w.result, patch.contents);
                return;
            }
        }
    }
}

fn set_inside(result: &mut TraceResult, contents: u32) {
    result.startsolid = true;
    result.allsolid = true;
    result.fraction = 0.0;
    result.contents = contents;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::patch::tests::{curved_world, with_facet_lanes, Cases};

    /// A facet clip from the kernel's lanes and plane by plane.
    fn both_ways<S: Support>(
        world: &World,
        facet: usize,
        shape: &S,
        start: Vec3,
        end: Vec3,
    ) -> [Option<(f32, Vec3, f32)>; 2] {
        [
            facet_hit(world, facet, shape, start, end),
            facet_hit_planes(world, &world.facets[facet], shape, start, end),
        ]
    }

    /// A shape's facet clip in the kernel's lanes answers as the plane loop
    /// does, bit for bit: spheres, capsules and cylinders crossing, grazing,
    /// starting inside and missing the facets of curved patches.
    #[test]
    fn facet_lane_clip_equals_the_plane_loop() {
        let data = with_facet_lanes(&curved_world());
        let world = data.view();
        let mut cases = Cases::new(0x3c6e_f372_fe94_f82b);
        let bits = |hit: Option<(f32, Vec3, f32)>| {
            hit.map(|(f, n, d)| [f, n.x, n.y, n.z, d].map(f32::to_bits))
        };
        for case in 0..30_000 {
            let facet = case % world.facets.len();
            let (start, end) = cases.random_move(case);
            let (radius, half_height) = (cases.range(0.5, 24.0), cases.range(0.0, 30.0));
            let [lanes, planes] = match case % 3 {
                0 => both_ways(&world, facet, &Sphere(radius), start, end),
                1 => both_ways(
                    &world,
                    facet,
                    &Capsule::new(radius, half_height),
                    start,
                    end,
                ),
                _ => both_ways(
                    &world,
                    facet,
                    &Cylinder::new(radius, half_height),
                    start,
                    end,
                ),
            };
            assert_eq!(
                bits(lanes),
                bits(planes),
                "case {case}: facet {facet} {start} {end} {radius} {half_height}"
            );
            cases.tally(planes.is_some());
        }
        cases.assert_both_common();
    }
}
