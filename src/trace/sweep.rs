//! Sweeping a sphere, capsule, cylinder or convex shape by plane shifting:
//! every plane the walk and the clipping read is pushed out by the shape's
//! support distance along it, and the shape's centre is traced as a point.
//!
//! This is the box kernel (the fast search, the walk, [`super::brush`],
//! [`super::patch`]) with the box's corner offsets replaced by a
//! [`Support`] function, compiled once per shape kind. Boxes and rays never
//! come here: their path stays specialised.

use super::brush::{clip_pushed, BrushClip};
use super::fast::{self, Clipped, Clipper, Contact, FacetContact, Found, Outcome};
use super::patch::{self, dot, entry_plane, facet_entry, facet_lanes, patch_in_reach};
use super::shape::{Capsule, Cylinder, Hull, Shape, Sphere, Support};
#[cfg(feature = "exact")]
use super::walk::Lists;
use super::walk::{self, walk_move, Move, Reach, Segment, Visitor};
use super::work::{Scratch, TraceQuery, TraceResult};
use super::Kernel;
#[cfg(feature = "exact")]
use crate::margins::CANDIDATE_MARGIN;
use crate::math::Vec3;
use crate::world::{Brush, Facet};
use glam::{Vec3A, Vec4};

/// One shape trace's set-up.
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
    pub bounds: [Vec3A; 2],
    pub mask: u32,
    /// Any-hit: the fast trace stops at the first contact.
    pub stop_at_any_hit: bool,
}

impl<S: Support> ShapeWork<S> {
    fn new(q: &TraceQuery, centre: Vec3, half: Vec3, shape: S) -> Self {
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
            bounds: [start.min(end) - half, start.max(end) + half],
            mask: q.mask,
            stop_at_any_hit: false,
        }
    }
}

/// Runs `f` with the shape's [`Support`] type (one compiled sweep per kind).
pub(crate) fn with_support<R>(
    q: &TraceQuery,
    shape: &Shape,
    f: impl FnOnce(&mut dyn ShapeSweep) -> R,
) -> R {
    let (centre, half) = (shape.centre(), shape.half_extents());
    match shape {
        Shape::Sphere { radius } => f(&mut ShapeWork::new(q, centre, half, Sphere(*radius))),
        Shape::Capsule {
            radius,
            half_height,
        } => f(&mut ShapeWork::new(
            q,
            centre,
            half,
            Capsule::new(*radius, *half_height),
        )),
        Shape::Cylinder {
            radius,
            half_height,
        } => f(&mut ShapeWork::new(
            q,
            centre,
            half,
            Cylinder::new(*radius, *half_height),
        )),
        Shape::Convex(hull) => f(&mut ShapeWork::new(q, centre, half, Hull(hull))),
    }
}

/// The sweep of one shape kind, behind one dynamic call per query. Each
/// call builds its answer inside (the fast trace's answer handed back
/// through the call was copied with wide loads of what had just been stored
/// in narrow pieces: three stalled loads a query).
pub(crate) trait ShapeSweep {
    /// The answer to `q` (whose shape this is).
    fn trace(&mut self, world: &Kernel, scratch: &mut Scratch, q: &TraceQuery) -> TraceResult;
    /// Whether the shape touches anything in the mask: the fast trace stops
    /// at the first contact.
    fn any_hit(&mut self, world: &Kernel, scratch: &mut Scratch) -> bool;
    #[cfg(feature = "exact")]
    /// For the exact sweep: the answer with only the patches clipped (no
    /// `endpos`), and the brushes the plane-shifted shape touches, the only
    /// ones the exact sweep can touch (the shifted planes bound the
    /// Minkowski sum).
    fn candidates(&mut self, world: &Kernel, scratch: &mut Scratch) -> (TraceResult, Vec<u32>);
}

impl<S: Support> ShapeWork<S> {
    /// Moves take the fast trace first; the tree walk answers position
    /// tests and what the fast trace leaves undecided. The fast trace's
    /// answer is returned as found, the walk's as a result.
    #[inline(always)]
    fn run(&self, world: &Kernel, scratch: &mut Scratch) -> Result<Found, TraceResult> {
        let moves = !self.start.cmpeq(self.end).all();
        if moves && !world.walk_only {
            match fast::search(world, &world.accel.bvh, self, scratch, &mut ()) {
                Outcome::Answered(found) => return Ok(found),
                Outcome::Hit => {
                    return Err(TraceResult {
                        fraction: 0.0,
                        ..TraceResult::default()
                    })
                }
                Outcome::Undecided | Outcome::Tied(_) => {}
            }
        }
        scratch.begin(world);
        if moves {
            return Err(walk::trace_tree(world, self, scratch, &mut ()));
        }
        let mut result = TraceResult::default();
        walk::position_test(world, self, scratch, &mut (), |_, contents| {
            result.set_inside(contents);
            true
        });
        Err(result)
    }
}

impl<S: Support> ShapeSweep for ShapeWork<S> {
    fn trace(&mut self, world: &Kernel, scratch: &mut Scratch, q: &TraceQuery) -> TraceResult {
        match self.run(world, scratch) {
            Ok(found) => found.result(q),
            Err(result) => result.ended(q),
        }
    }

    fn any_hit(&mut self, world: &Kernel, scratch: &mut Scratch) -> bool {
        self.stop_at_any_hit = true;
        match self.run(world, scratch) {
            Ok(found) => found.fraction() < 1.0,
            Err(result) => result.fraction < 1.0,
        }
    }

    #[cfg(feature = "exact")]
    fn candidates(&mut self, world: &Kernel, scratch: &mut Scratch) -> (TraceResult, Vec<u32>) {
        scratch.begin(world);
        let mut listed = Vec::new();
        let mut result = TraceResult::default();
        if self.start.cmpeq(self.end).all() {
            walk::position_test(world, &*self, scratch, &mut (), |brush, contents| {
                match brush {
                    Some(b) => listed.push(b as u32),
                    None => result.set_inside(contents),
                }
                brush.is_none()
            });
            return (result, listed);
        }
        // The list does not depend on the order: the compiled tree, with
        // its bounds, finds it faster.
        walk::with_stack(scratch, |stack, scratch| {
            let mut leaves = Candidates {
                world,
                lists: Lists::walked(world, false),
                work: &*self,
                scratch,
                listed: &mut listed,
                result: &mut result,
            };
            self.walk_leaves(world, false, stack, &mut leaves);
        });
        (result, listed)
    }
}

/// The plane-shifted answer for a query with a shape.
pub(crate) fn trace_shape(
    world: &Kernel,
    q: &TraceQuery,
    shape: &Shape,
    scratch: &mut Scratch,
) -> TraceResult {
    with_support(q, shape, |sweep| sweep.trace(world, scratch, q))
}

/// Whether the plane-shifted sweep of `shape` touches anything in the
/// mask: exactly `fraction < 1` of [`trace_shape`], found faster by the fast
/// trace stopping at the first contact (what it leaves undecided takes the
/// full walk).
pub(crate) fn any_hit_shape(
    world: &Kernel,
    q: &TraceQuery,
    shape: &Shape,
    scratch: &mut Scratch,
) -> bool {
    with_support(q, shape, |sweep| sweep.any_hit(world, scratch))
}

/// A shape's reach across a plane: its support distance along the normal.
struct ShapeReach<'a, S>(&'a S);

impl<S: Support> Reach for ShapeReach<'_, S> {
    const POINT: bool = false;
    #[inline(always)]
    fn reach(&self, normal: Vec3A) -> f32 {
        self.0.reach(normal.into())
    }
}

#[cfg(feature = "exact")]
/// The exact sweep's candidates: the brushes of the leaves reached that
/// the plane-shifted shape comes near, and the patches clipped (the exact
/// sweep takes patch contacts from the plane-shifted sweep).
struct Candidates<'a, 'w, S> {
    world: &'a Kernel<'w>,
    lists: Lists<'w>,
    work: &'a ShapeWork<S>,
    scratch: &'a mut Scratch,
    listed: &'a mut Vec<u32>,
    result: &'a mut TraceResult,
}

#[cfg(feature = "exact")]
impl<S: Support> Visitor for Candidates<'_, '_, S> {
    fn wanted(&self, f1: f32) -> bool {
        f1 < self.result.fraction
    }

    fn leaf(&mut self, leaf: i32, _f1: f32) -> bool {
        let (world, lists, w) = (self.world, self.lists, self.work);
        let leaf = lists.leaf(leaf);
        for &b in lists.brushes(leaf) {
            let brush = &world.brushes[b as usize];
            if !self.scratch.first_visit_brush(b as usize)
                || brush.contents & w.mask == 0
                || !walk::may_touch_brush(world, b as usize, &w.bounds)
            {
                continue;
            }
            // Does the plane-shifted shape come near it at all?
            if touches_brush(world, b as usize, &w.shape, w.start.into(), w.end.into()) {
                self.listed.push(b);
            }
        }
        for &p in lists.patches(leaf) {
            let p = p as usize;
            if self.scratch.first_visit_patch(p) && world.patches[p].contents & w.mask != 0 {
                walk::clip_patch(world, w, p, self.result);
            }
        }
        self.result.allsolid
    }
}

/// The planes a shape sweep clips against for brush `b`: its sides, then its
/// shape bevels (if the world has them), as `(normal, dist, surface flags)`.
#[inline(always)]
fn shape_planes<'w>(
    world: &Kernel<'w>,
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

/// What brush `b` does to the move on its own: the brush module's clip,
/// with its 1/8-unit rules, over the brush's sides and then its shape
/// bevels, each pushed out by the shape (sides first, so on a tie the side
/// is reported).
#[inline]
fn clip_brush<S: Support>(
    world: &Kernel,
    b: usize,
    shape: &S,
    start: Vec3A,
    end: Vec3A,
) -> Clipped {
    let brush = &world.brushes[b];
    if brush.num_sides == 0 {
        return Clipped::Miss;
    }
    let kernel = &world.accel;
    let sides = brush.num_sides as usize;
    let bevels = world.shape_bevels_of(b);
    // The kernel's copy of the sides and then the bevels, four to a record.
    let first = kernel.brush_lanes[b] as usize;
    let (side_records, bevel_records) = (sides.div_ceil(4), bevels.len().div_ceil(4));
    let records = &kernel.side_lanes[first..][..side_records + bevel_records];
    let (side_lanes, bevel_lanes) = records.split_at(side_records);
    let shift = |n: &[Vec4; 3]| shape.shift_lanes(n);
    let clip = clip_pushed(side_lanes, bevel_lanes, sides, start, end, shift);
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

#[cfg(feature = "exact")]
/// Whether the segment `start..end` meets brush `b` with every plane pushed
/// out by the shape's support plus [`CANDIDATE_MARGIN`]: plain geometry,
/// without the clip's 1/8-unit rules (which let a box or a shifted shape
/// through a corner it overlaps by less than 1/8 unit while moving out of
/// it, where the exact shape does touch). The shifted planes bound the
/// exact swept shape, so the exact sweep touches no brush this rejects.
fn touches_brush<S: Support>(world: &Kernel, b: usize, shape: &S, start: Vec3, end: Vec3) -> bool {
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
pub(crate) fn shape_in_brush<S: Support>(world: &Kernel, b: usize, shape: &S, at: Vec3) -> bool {
    if world.brushes[b].num_sides == 0 {
        return false;
    }
    shape_planes(world, b, &world.brushes[b])
        .all(|(normal, dist, _)| at.dot(normal) - (dist + shape.shift(normal)) <= 0.0)
}

/// The facet's planes as the shape sees them: the surface plane first, then
/// each border (flipped when inward), each pushed out by the shape's support.
fn shifted_facet_planes<'a, S: Support>(
    world: &'a Kernel,
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
/// distance), on its own, with the brush clip's crossings over the
/// kernel's lanes.
fn facet_hit<S: Support>(
    world: &Kernel,
    facet: usize,
    shape: &S,
    start: Vec3,
    end: Vec3,
) -> Option<(f32, Vec3, f32)> {
    let (records, _) = facet_lanes(world, facet);
    let facet = &world.facets[facet];
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

/// The fast trace's view of a shape sweep (see [`super::fast`]).
impl<S: Support> Clipper for ShapeWork<S> {
    fn segment(&self) -> (Vec3A, Vec3A, Vec3A) {
        (self.start, self.end, self.half)
    }

    fn bounds(&self) -> [Vec3A; 2] {
        self.bounds
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

    fn holds_start_brush(&self, world: &Kernel, b: usize) -> bool {
        shape_in_brush(world, b, &self.shape, self.start.into())
    }

    fn holds_start_patch(&self, world: &Kernel, p: usize) -> bool {
        let patch = &world.patches[p];
        let first = patch.first_facet as usize;
        let at = Vec3::from(self.start);
        world.facets[first..first + patch.num_facets as usize]
            .iter()
            .any(|facet| {
                let (surface, mut borders) = shifted_facet_planes(world, facet, &self.shape);
                dot(at, surface.0) - surface.1 <= 0.0 && borders.all(|(n, d)| dot(at, n) - d <= 0.0)
            })
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
        walk_move(world, &m, &ShapeReach(&self.shape), ordered, stack, visitor);
    }

    #[inline(always)]
    fn facet(
        &self,
        world: &Kernel,
        patch: usize,
        facet: usize,
        _limit: f32,
    ) -> Option<FacetContact> {
        if !patch_in_reach(world, patch, &self.bounds) {
            return None;
        }
        let patch = &world.patches[patch];
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
    fn brush(&self, world: &Kernel, index: usize) -> Clipped {
        clip_brush(world, index, &self.shape, self.start, self.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::patch::tests::{curved_world, hit_bits, reference_facet_hit, Cases};

    /// A facet clip from the kernel's lanes and the reference's, plane by
    /// plane.
    fn both_ways<S: Support>(
        world: &Kernel,
        facet: usize,
        shape: &S,
        start: Vec3,
        end: Vec3,
    ) -> [Option<(f32, Vec3, f32)>; 2] {
        [facet_hit(world, facet, shape, start, end), {
            let (surface, borders) = shifted_facet_planes(world, &world.facets[facet], shape);
            reference_facet_hit(&world.facets[facet], surface, borders, start, end)
        }]
    }

    /// A shape's facet clip in the kernel's lanes answers as the
    /// reference's plane loop does, bit for bit: spheres, capsules and
    /// cylinders crossing, grazing, starting inside and missing the facets
    /// of curved patches.
    #[test]
    fn facet_lane_clip_equals_the_reference() {
        let data = curved_world();
        let world = data.view();
        let mut cases = Cases::new(0x3c6e_f372_fe94_f82b);
        let bits = hit_bits;
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
