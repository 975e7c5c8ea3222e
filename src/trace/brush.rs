//! Clipping a moving box against one convex brush, with the reference's
//! epsilon rules (stop 1/8 unit short; "touching" counts within 1/8 unit).

use super::accel::{AxialBrush, SideLanes};
use super::work::TraceWork;
use super::Kernel;
use crate::margins::SURFACE_CLIP_EPSILON;
use crate::math::splat_axes;
use crate::world::{Brush, Plane};
use glam::{BVec4A, Vec3A, Vec4};
use std::hint::select_unpredictable;

/// What clipping a move against one brush found, before it is compared
/// with the best contact so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum BrushClip {
    /// The move never touches the brush.
    Miss,
    /// The move starts inside; `gets_out`: it ends outside.
    Inside { gets_out: bool },
    /// The move enters through side `side` (index within the brush) at
    /// `frac` (may be below 0: the caller clamps), before it leaves.
    Enter { frac: f32, side: usize },
}

/// Clips the trace's move against brush `index` on its own (nothing found
/// before is read).
#[inline]
pub(crate) fn clip_brush(world: &Kernel, index: usize, w: &TraceWork) -> BrushClip {
    if world.brushes[index].num_sides == 0 {
        return BrushClip::Miss;
    }
    if let Some(axial) = axial_record(world, index) {
        return clip_axial(axial, w);
    }
    clip_side_lanes(side_lanes(world, index), w)
}

/// Brush `index`'s axial box record, if it is one.
#[inline(always)]
pub(crate) fn axial_record<'w>(world: &Kernel<'w>, index: usize) -> Option<&'w AxialBrush> {
    let kernel = world.accel;
    let &axial = kernel.brush_axial.get(index)?;
    kernel.axial_brushes.get(axial as usize)
}

/// The kernel's copy of brush `index`'s side planes, in lanes.
#[inline(always)]
pub(crate) fn side_lanes<'w>(world: &Kernel<'w>, index: usize) -> &'w [SideLanes] {
    let kernel = world.accel;
    let count = world.brushes[index].num_sides as usize;
    let first = kernel.brush_lanes[index] as usize;
    &kernel.side_lanes[first..][..count.div_ceil(4)]
}

/// Clips the move against a brush that is not an axial box, by its sides'
/// planes in lanes.
#[inline(always)]
pub(crate) fn clip_side_lanes(lanes: &[SideLanes], w: &TraceWork) -> BrushClip {
    if w.is_point {
        clip_lanes::<true>(lanes, w)
    } else {
        clip_lanes::<false>(lanes, w)
    }
}

/// [`clip_lanes`] for an axial box brush: the same numbers, bit for bit.
/// For a normal `±e_k` the shifted distance `dist - corner·n` is
/// `dist - lower_k` or `dist + upper_k`, and `start·n` is `±start_k`
/// (the zero terms add only signed zeros, which no test and no fraction
/// below can see); every side is met at once, three per vector.
#[inline(always)]
pub(crate) fn clip_axial(brush: &AxialBrush, w: &TraceWork) -> BrushClip {
    const _: () = assert!(SURFACE_CLIP_EPSILON == 0.125);
    let epsilon = Vec3A::splat(SURFACE_CLIP_EPSILON as f32);
    let pos = brush.pos - w.lower;
    let neg = brush.neg + w.extents;
    let d1 = [w.start - pos, -w.start - neg];
    let d2 = [w.end - pos, -w.end - neg];
    let front1 = [d1[0].cmpgt(Vec3A::ZERO), d1[1].cmpgt(Vec3A::ZERO)];
    let away = |h: usize| front1[h] & (d2[h].cmpge(epsilon) | d2[h].cmpge(d1[h]));
    if (away(0) | away(1)).any() {
        return BrushClip::Miss;
    }
    if !(front1[0] | front1[1]).any() {
        let gets_out = (d2[0].cmpgt(Vec3A::ZERO) | d2[1].cmpgt(Vec3A::ZERO)).any();
        return BrushClip::Inside { gets_out };
    }
    let mut largest = f32::NEG_INFINITY;
    let mut leave = 1.0f32;
    let mut enter = [Vec3A::ZERO; 2];
    for h in 0..2 {
        let crossing = !(d1[h].cmple(Vec3A::ZERO) & d2[h].cmple(Vec3A::ZERO));
        let enters = d1[h].cmpgt(d2[h]);
        let (entering, leaving) = (enters & crossing, !enters & crossing);
        let e = Vec3A::select(enters, -epsilon, epsilon).to_array();
        let denom = (d1[h] - d2[h]).to_array();
        let a = d1[h].to_array();
        let f: [f32; 3] = std::array::from_fn(|k| epsilon_fraction(a[k], e[k], denom[k]));
        let f = Vec3A::from_array(f);
        let clamped = Vec3A::select(f.cmplt(Vec3A::ZERO), Vec3A::ZERO, f);
        enter[h] = Vec3A::select(entering, clamped, Vec3A::NEG_INFINITY);
        largest = largest.max(enter[h].max_element());
        // (Clamped above at 1 by the minimum with the start value.)
        leave = leave.min(Vec3A::select(leaving, f, Vec3A::INFINITY).min_element());
    }
    if largest == f32::NEG_INFINITY || largest >= leave {
        // No side entered, or the move leaves before it is in (neither is
        // NaN: no lane crossed divides by zero).
        return BrushClip::Miss;
    }
    // The first side (in brush order) of the largest fraction.
    let at = |h: usize, sides: Vec3A| {
        Vec3A::select(
            enter[h].cmpeq(Vec3A::splat(largest)),
            sides,
            Vec3A::splat(f32::INFINITY),
        )
        .min_element()
    };
    let side = at(0, brush.pos_side).min(at(1, brush.neg_side));
    BrushClip::Enter {
        frac: largest,
        side: side as usize,
    }
}

/// Where a move whose distance to a plane goes from `d1` by `denom` (start
/// minus end) comes within `epsilon` of it (±1/8: entering or leaving),
/// computed in f64 as the reference computes it (`x - e` is `x + -e` in
/// IEEE arithmetic, and ±1/8 widens exactly).
#[inline(always)]
pub(super) fn epsilon_fraction(d1: f32, epsilon: f32, denom: f32) -> f32 {
    ((d1 as f64 + epsilon as f64) / denom as f64) as f32
}

/// [`Crossings::clip`] before any side was entered.
const NO_SIDE: u32 = u32::MAX;

/// What the sides met so far say: the latest entry and earliest exit
/// (with the reference's 1/8-unit rules) and where the move starts and ends.
pub(super) struct Crossings {
    enter_frac: f32,
    leave_frac: f32,
    /// The side entered last (the contact), or [`NO_SIDE`]. (An index
    /// rather than an `Option` so that taking a new side is a select: see
    /// [`Crossings::cross_lanes`].)
    clip: u32,
    starts_out: bool,
    gets_out: bool,
}

impl Crossings {
    pub(super) fn new() -> Self {
        Crossings {
            enter_frac: -1.0,
            leave_frac: 1.0,
            clip: NO_SIDE,
            starts_out: false,
            gets_out: false,
        }
    }

    /// Sides `first..first + 4` in lanes, with distances `d1` at the start
    /// and `d2` at the end of the move: false when the move cannot touch the
    /// brush. A side the move starts in front of (or ends at most 1/8 unit
    /// inside its "touch" zone while moving away from) rules the brush out;
    /// one it crosses is entered (`d1 > d2`) or left.
    #[inline(always)]
    pub(super) fn meet_lanes(&mut self, first: usize, d1: Vec4, d2: Vec4) -> bool {
        // (d as f64 >= SURFACE_CLIP_EPSILON) == (d >= SURFACE_CLIP_EPSILON as f32):
        // the epsilon is 1/8, exact in f32, and widening is exact.
        const _: () = assert!(SURFACE_CLIP_EPSILON == 0.125);
        let epsilon = Vec4::splat(SURFACE_CLIP_EPSILON as f32);
        let front1 = d1.cmpgt(Vec4::ZERO);
        let front2 = d2.cmpgt(Vec4::ZERO);
        self.gets_out |= front2.any();
        self.starts_out |= front1.any();
        if (front1 & (d2.cmpge(epsilon) | d2.cmpge(d1))).any() {
            return false;
        }
        let behind = d1.cmple(Vec4::ZERO) & d2.cmple(Vec4::ZERO);
        if behind.bitmask() != 0xF {
            self.cross_lanes(first, d1, d2, !behind);
        }
        true
    }

    /// The sides `first..first + 4` in lanes, those in `crossing` crossed:
    /// entered where `d1 > d2`, 1/8 unit before the plane (clamped at 0; the
    /// latest entry wins, the first of equal ones), left 1/8 unit past it
    /// (clamped at 1; the earliest exit wins). No branch per side (two
    /// mispredictions a brush); masks stay vectors (bitmasks back to lanes
    /// cost a fifth of a clip).
    #[inline(always)]
    fn cross_lanes(&mut self, first: usize, d1: Vec4, d2: Vec4, crossing: BVec4A) {
        let enters = d1.cmpgt(d2);
        let entering = enters & crossing;
        let leaving = !enters & crossing;
        // Each lane's fraction ([`epsilon_fraction`]); lanes not crossed
        // may divide by zero, and are masked out below.
        let epsilon = Vec4::select(
            enters,
            Vec4::splat(-SURFACE_CLIP_EPSILON as f32),
            Vec4::splat(SURFACE_CLIP_EPSILON as f32),
        )
        .to_array();
        let denom = (d1 - d2).to_array();
        let d1 = d1.to_array();
        let fractions: [f32; 4] =
            std::array::from_fn(|k| epsilon_fraction(d1[k], epsilon[k], denom[k]));
        let fractions = Vec4::from_array(fractions);
        // Entering: clamped below at 0; the first side (in order) of the
        // largest fraction wins, when it beats the entry so far.
        let enter = Vec4::select(fractions.cmplt(Vec4::ZERO), Vec4::ZERO, fractions);
        let enter = Vec4::select(entering, enter, Vec4::NEG_INFINITY);
        let largest = enter.max_element();
        let at_largest = (enter.cmpeq(Vec4::splat(largest)) & entering).bitmask();
        let lane = (at_largest.trailing_zeros() & 3) as usize;
        // (The lane's own value: a zero keeps the sign of the first one.)
        let value = enter.to_array()[lane].to_bits();
        // Written as `if`, both fields were updated under one branch,
        // mispredicted on about a third of the brushes a ray clips. (An f32
        // select still compiled to a branch around the store; the bits'
        // select is a conditional move.)
        let beats = largest > self.enter_frac;
        self.enter_frac = f32::from_bits(select_unpredictable(
            beats,
            value,
            self.enter_frac.to_bits(),
        ));
        self.clip = select_unpredictable(beats, (first + lane) as u32, self.clip);
        // Leaving: clamped above at 1; the smallest wins, the first of equal
        // ones (a strict comparison, lane by lane in order).
        let leave = Vec4::select(fractions.cmpgt(Vec4::ONE), Vec4::ONE, fractions);
        let leave = Vec4::select(leaving, leave, Vec4::INFINITY).to_array();
        for f in leave {
            self.leave_frac = if f < self.leave_frac {
                f
            } else {
                self.leave_frac
            };
        }
    }

    /// The clip once every side was met and none ruled the brush out.
    pub(super) fn finish(self) -> BrushClip {
        if !self.starts_out {
            return BrushClip::Inside {
                gets_out: self.gets_out,
            };
        }
        if self.clip != NO_SIDE && self.enter_frac < self.leave_frac && self.enter_frac > -1.0 {
            BrushClip::Enter {
                frac: self.enter_frac,
                side: self.clip as usize,
            }
        } else {
            BrushClip::Miss
        }
    }
}

/// The box's (`RAY`: the point's) clip against a brush's sides, four at a
/// time, each plane pushed out by the box's corner furthest along its
/// negative normal, with the reference's f32 and f64 operations per lane
/// (a loop over the sides mispredicted about 7 branches a clip).
#[inline(always)]
fn clip_lanes<const RAY: bool>(lanes: &[SideLanes], w: &TraceWork) -> BrushClip {
    let lower = splat_axes(w.lower);
    let upper = splat_axes(w.extents);
    let mut clip = Crossings::new();
    let met = cross_records(lanes, 0, w.start, w.end, &mut clip, |n, plane_dist| {
        if RAY {
            plane_dist
        } else {
            let corner: [Vec4; 3] =
                std::array::from_fn(|k| Vec4::select(n[k].cmplt(Vec4::ZERO), upper[k], lower[k]));
            plane_dist - lane_dot(&corner, n)
        }
    });
    if met {
        clip.finish()
    } else {
        BrushClip::Miss
    }
}

/// A shape's clip against a brush, with the box clip's rules: the brush's
/// `sides` sides from `side_lanes`, then its bevels from `bevel_lanes`
/// (numbered from `sides` on, so on a tie a side is reported before a
/// bevel), each plane pushed out by `shift` (of four normals in lanes). The
/// numbers are those of the scalar loop over the same planes, bit for bit
/// (see [`clip_lanes`]).
#[inline(always)]
pub(crate) fn clip_pushed(
    side_lanes: &[SideLanes],
    bevel_lanes: &[SideLanes],
    sides: usize,
    start: Vec3A,
    end: Vec3A,
    shift: impl Fn(&[Vec4; 3]) -> Vec4,
) -> BrushClip {
    let mut clip = Crossings::new();
    let pushed = |n: &[Vec4; 3], plane_dist: Vec4| plane_dist + shift(n);
    if cross_records(side_lanes, 0, start, end, &mut clip, pushed)
        && cross_records(bevel_lanes, sides, start, end, &mut clip, pushed)
    {
        clip.finish()
    } else {
        BrushClip::Miss
    }
}

/// `v · n` per lane, summed as `Vec3A::dot` does: `(x + y) + z`.
#[inline(always)]
pub(super) fn lane_dot(v: &[Vec4; 3], n: &[Vec4; 3]) -> Vec4 {
    v[0] * n[0] + v[1] * n[1] + v[2] * n[2]
}

/// Meets the sides in `lanes` (record `k` holds sides `first + 4k..` to
/// `first + 4k + 4`), each plane's distance as `shifted(normals,
/// distances)` gives it: false when the move cannot touch the brush.
#[inline(always)]
fn cross_records(
    lanes: &[SideLanes],
    first: usize,
    start: Vec3A,
    end: Vec3A,
    clip: &mut Crossings,
    shifted: impl Fn(&[Vec4; 3], Vec4) -> Vec4,
) -> bool {
    let start = splat_axes(start);
    let end = splat_axes(end);
    for (chunk, sides) in lanes.iter().enumerate() {
        // Lanes past the last side hold 0·x <= -1: never crossed or left
        // (whatever a shape's shift of a zero normal, it is not negative).
        let n = [sides.x, sides.y, sides.z];
        let dist = shifted(&n, sides.dist);
        let d1 = lane_dot(&start, &n) - dist;
        let d2 = lane_dot(&end, &n) - dist;
        if !clip.meet_lanes(first + chunk * 4, d1, d2) {
            return false;
        }
    }
    true
}

/// Whether the box at the trace's start overlaps `brush` (closed: touching counts).
#[inline]
pub(crate) fn box_in_brush(world: &Kernel, brush: &Brush, w: &TraceWork) -> bool {
    if brush.num_sides == 0 {
        return false;
    }
    let first = brush.first_side as usize;
    let sides = &world.brush_sides[first..first + brush.num_sides as usize];
    box_in_planes(
        sides.iter().map(|side| &world.planes[side.plane as usize]),
        w,
    )
}

/// Whether the box at the trace's start is behind (or on) every plane of
/// `planes`, each pushed out by the box's corner furthest along its
/// negative normal.
#[inline(always)]
pub(crate) fn box_in_planes<'p>(
    mut planes: impl Iterator<Item = &'p Plane>,
    w: &TraceWork,
) -> bool {
    planes.all(|plane| {
        let normal = Vec3A::from(plane.normal());
        let dist = plane.dist - w.offset(plane.sign_bits).dot(normal);
        w.start.dot(normal) - dist <= 0.0
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::math::Vec3;
    use crate::trace::shape::{Capsule, Cylinder, Sphere, Support};
    use crate::trace::work::TraceQuery;

    /// The tests' generator: the same cases on every run.
    struct Rng(fastrand::Rng);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0.u64(..)
        }

        /// Uniform in `lo..hi`, on a 1/64 grid half the time (exact ties
        /// and distances of exactly 1/8 unit, as map coordinates give).
        fn range(&mut self, lo: f32, hi: f32) -> f32 {
            let v = lo + (hi - lo) * self.0.f32();
            if self.next() & 1 == 0 {
                (v * 64.0).round() / 64.0
            } else {
                v
            }
        }
    }

    /// The reference's clip, plane by plane, over planes already pushed out
    /// for the moving shape: the independent expectation the lane clips
    /// are held to.
    pub(crate) fn reference_clip(
        start: Vec3A,
        end: Vec3A,
        planes: impl Iterator<Item = (Vec3A, f32)>,
    ) -> BrushClip {
        let eps = SURFACE_CLIP_EPSILON;
        let (mut enter, mut leave, mut clip) = (-1.0f32, 1.0f32, None);
        let (mut starts_out, mut gets_out) = (false, false);
        for (k, (n, dist)) in planes.enumerate() {
            let (d1, d2) = (start.dot(n) - dist, end.dot(n) - dist);
            gets_out |= d2 > 0.0;
            starts_out |= d1 > 0.0;
            if d1 > 0.0 && (d2 as f64 >= eps || d2 >= d1) {
                return BrushClip::Miss;
            }
            if d1 <= 0.0 && d2 <= 0.0 {
                continue;
            }
            let denom = (d1 - d2) as f64;
            if d1 > d2 {
                let f = ((d1 as f64 - eps) / denom) as f32;
                let f = if f < 0.0 { 0.0 } else { f };
                if f > enter {
                    (enter, clip) = (f, Some(k));
                }
            } else {
                let f = ((d1 as f64 + eps) / denom) as f32;
                leave = leave.min(if f > 1.0 { 1.0 } else { f });
            }
        }
        match clip {
            _ if !starts_out => BrushClip::Inside { gets_out },
            Some(side) if enter < leave && enter > -1.0 => BrushClip::Enter { frac: enter, side },
            _ => BrushClip::Miss,
        }
    }

    /// [`reference_clip`] of a box (or ray) against `planes`, each pushed
    /// out by the box's corner furthest along its negative normal.
    fn reference_box_clip(planes: &[Vec4], w: &TraceWork) -> BrushClip {
        let pushed = planes.iter().map(|p| {
            let n = Vec3A::from_vec4(*p);
            let corner = Vec3A::select(n.cmplt(Vec3A::ZERO), w.extents, w.lower);
            (n, if w.is_point { p.w } else { p.w - corner.dot(n) })
        });
        reference_clip(w.start, w.end, pushed)
    }

    /// The planes four to a record, as the kernel stores a brush's sides.
    fn records(planes: &[Vec4]) -> Vec<SideLanes> {
        let as_arrays: Vec<[f32; 4]> = planes.iter().map(|p| p.to_array()).collect();
        SideLanes::records(&as_arrays).collect()
    }

    /// An outcome as bits: kind, then its fields.
    fn bits(clip: BrushClip) -> (u32, u32, u32) {
        match clip {
            BrushClip::Miss => (0, 0, 0),
            BrushClip::Inside { gets_out } => (1, gets_out as u32, 0),
            BrushClip::Enter { frac, side } => (2, frac.to_bits(), side as u32),
        }
    }

    /// Case `case`: a brush's planes (an axial box's sides, some left out,
    /// plus slanted cuts, sometimes a side repeated), a move's start and end,
    /// and a box's half-size (zero for a ray on even cases).
    fn random_case(rng: &mut Rng, case: usize) -> (Vec<Vec4>, Vec3, Vec3, Vec3) {
        let mut planes = Vec::new();
        for k in 0..3 {
            let mut n = [0.0; 3];
            n[k] = 1.0;
            planes.push(Vec4::new(n[0], n[1], n[2], rng.range(8.0, 64.0)));
            n[k] = -1.0;
            planes.push(Vec4::new(n[0], n[1], n[2], rng.range(8.0, 64.0)));
        }
        planes.truncate(1 + case % 6);
        for _ in 0..case % 8 {
            let n = Vec3::new(
                rng.range(-1.0, 1.0),
                rng.range(-1.0, 1.0),
                rng.range(-1.0, 1.0),
            )
            .normalize_or(Vec3::X);
            planes.push(Vec4::new(n.x, n.y, n.z, rng.range(4.0, 80.0)));
        }
        if case.is_multiple_of(7) {
            // A side repeated further on: equal fractions, where the
            // first side must win.
            let k = (rng.next() % planes.len() as u64) as usize;
            planes.push(planes[k]);
        }
        let point = |rng: &mut Rng| {
            Vec3::new(
                rng.range(-96.0, 96.0),
                rng.range(-96.0, 96.0),
                rng.range(-96.0, 96.0),
            )
        };
        let start = point(rng);
        let end = if case.is_multiple_of(5) {
            // Along an axis, ending near a face.
            let mut e = start;
            e[case % 3] = rng.range(-72.0, 72.0);
            e
        } else {
            point(rng)
        };
        let half = if case.is_multiple_of(2) {
            Vec3::ZERO
        } else {
            Vec3::new(
                rng.range(0.0, 24.0),
                rng.range(0.0, 24.0),
                rng.range(0.0, 40.0),
            )
        };
        (planes, start, end, half)
    }

    /// The lane clip answers as the reference's plane loop does, bit for
    /// bit, for rays and boxes grazing, crossing, starting inside and
    /// missing brushes of 1 to 13 sides (every remainder of four).
    #[test]
    fn lane_clip_equals_the_reference_clip() {
        let mut rng = Rng(fastrand::Rng::with_seed(0x9e37_79b9_7f4a_7c15));
        let mut kinds = [0usize; 4];
        for case in 0..40_000 {
            let (planes, start, end, half) = random_case(&mut rng, case);
            let w = TraceWork::new(&TraceQuery::boxed(start, end, -half, half, 1).unwrap());
            let side_lanes = records(&planes);
            let lanes = if w.is_point {
                clip_lanes::<true>(&side_lanes, &w)
            } else {
                clip_lanes::<false>(&side_lanes, &w)
            };
            let scalar = reference_box_clip(&planes, &w);
            assert_eq!(
                bits(lanes),
                bits(scalar),
                "case {case}: {planes:?} {start} {end} {half}"
            );
            kinds[bits(scalar).0 as usize] += 1;
        }
        // Every outcome is well represented.
        assert!(kinds.iter().take(3).all(|&n| n > 1_000), "{kinds:?}");
    }

    /// An axial box's six sides in a random order (`[x, y, z, dist]`), its
    /// faces on a 1/64 grid or anywhere, sometimes thin as a sheet.
    fn random_axial_box(rng: &mut Rng) -> Vec<[f32; 4]> {
        let mut sides = Vec::new();
        for k in 0..3 {
            let low = rng.range(-64.0, 32.0);
            let high = if rng.next().is_multiple_of(8) {
                low + rng.range(0.0, 0.25)
            } else {
                low + rng.range(1.0, 64.0)
            };
            let mut n = [0.0f32; 3];
            n[k] = 1.0;
            sides.push([n[0], n[1], n[2], high]);
            n[k] = -1.0;
            sides.push([n[0], n[1], n[2], -low]);
        }
        for i in (1..sides.len()).rev() {
            sides.swap(i, (rng.next() % (i as u64 + 1)) as usize);
        }
        sides
    }

    /// A move whose centre meets two sides of `sides` (of different axes)
    /// at the same distances at its start and at its end, so that both are
    /// entered at the same fraction: on the 1/64 grid every number here is
    /// exact. The third coordinate is `free`'s.
    fn tie_move(rng: &mut Rng, sides: &[[f32; 4]], half: Vec3, free: Vec3) -> (Vec3, Vec3) {
        let a = (rng.next() % 6) as usize;
        let b = loop {
            let b = (rng.next() % 6) as usize;
            if (0..3).all(|k| sides[a][k] == 0.0 || sides[b][k] == 0.0) {
                break b;
            }
        };
        let (d1, d2) = (
            (rng.next() % 512) as f32 / 8.0,
            -((rng.next() % 64) as f32) / 8.0,
        );
        let (mut start, mut end) = (free, free + Vec3::new(1.0, 2.0, 3.0));
        for side in [sides[a], sides[b]] {
            let k = (0..3).find(|&k| side[k] != 0.0).unwrap_or(0);
            // The side's plane pushed out by the box: `dist + half[k]`.
            let at = |d: f32| side[k] * (d + side[3] + half[k]);
            start[k] = at(d1);
            end[k] = at(d2);
        }
        (start, end)
    }

    /// The axial box clip answers as the reference's loop over the brush's six
    /// sides does, bit for bit (fraction, side, inside and getting out), for
    /// rays, symmetric and lopsided boxes crossing, grazing, sliding along
    /// faces, starting inside, missing, and entering two sides at once
    /// (where the first in the brush's order must win), whatever that order.
    #[test]
    fn axial_clip_equals_the_reference_clip() {
        let mut rng = Rng(fastrand::Rng::with_seed(0x51_7cc1_b727_220a));
        let mut kinds = [0usize; 3];
        let mut ties = 0;
        for case in 0..80_000 {
            let sides = random_axial_box(&mut rng);
            let axial = AxialBrush::of(&sides).expect("six axial sides, one each way");
            let (_, start, end, half) = random_case(&mut rng, case);
            let (start, end) = match case % 8 {
                // Starting or ending on a face, or 1/8 or 1/16 unit off it.
                0..=3 => {
                    let side = sides[(rng.next() % 6) as usize];
                    let normal = Vec3::new(side[0], side[1], side[2]);
                    let off = [0.0, 0.125, -0.125, 0.0625][(rng.next() % 4) as usize];
                    let on_face = |p: Vec3| {
                        p + normal * (side[3] + half.dot(normal.abs()) + off - p.dot(normal))
                    };
                    if case % 2 == 0 {
                        (on_face(start), end)
                    } else {
                        (start, on_face(end))
                    }
                }
                4 | 5 => {
                    let half = half.map(|h| (h * 8.0).round() / 8.0);
                    let free = start.map(|c| (c * 8.0).round() / 8.0);
                    let (start, end) = tie_move(&mut rng, &sides, half, free);
                    let q = TraceQuery::boxed(start, end, -half, half, 1).unwrap();
                    let w = TraceWork::new(&q);
                    let planes: Vec<Vec4> = sides.iter().map(|&p| Vec4::from_array(p)).collect();
                    let scalar = reference_box_clip(&planes, &w);
                    assert_eq!(bits(clip_axial(&axial, &w)), bits(scalar), "tie {case}");
                    ties += matches!(scalar, BrushClip::Enter { .. }) as usize;
                    continue;
                }
                _ => (start, end),
            };
            // A third of the boxes lopsided (the box is made symmetric about
            // a shifted centre, with rounding).
            let (mins, maxs) = if case % 3 == 0 {
                let shift = Vec3::new(rng.range(-9.0, 9.0), rng.range(-9.0, 9.0), 4.3);
                (shift - half, shift + half * 1.37)
            } else {
                (-half, half)
            };
            let w = TraceWork::new(&TraceQuery::boxed(start, end, mins, maxs, 1).unwrap());
            let planes: Vec<Vec4> = sides.iter().map(|&p| Vec4::from_array(p)).collect();
            let scalar = reference_box_clip(&planes, &w);
            assert_eq!(
                bits(clip_axial(&axial, &w)),
                bits(scalar),
                "case {case}: {sides:?} {start} {end} {mins} {maxs}"
            );
            kinds[bits(scalar).0 as usize] += 1;
        }
        assert!(kinds.iter().all(|&n| n > 500), "{kinds:?}");
        assert!(ties > 1_000, "{ties} ties entered");
    }

    /// Only six axial sides, one facing each way, make an axial box.
    #[test]
    fn axial_boxes_are_told_apart() {
        let cube = |d: f32| -> Vec<[f32; 4]> {
            (0..6)
                .map(|s| {
                    let mut p = [0.0, 0.0, 0.0, d];
                    p[s / 2] = if s % 2 == 0 { 1.0 } else { -1.0 };
                    p
                })
                .collect()
        };
        let axial = AxialBrush::of(&cube(8.0)).expect("a cube");
        assert_eq!(axial.pos, Vec3A::splat(8.0));
        assert_eq!(axial.pos_side, Vec3A::new(0.0, 2.0, 4.0));
        assert_eq!(axial.neg_side, Vec3A::new(1.0, 3.0, 5.0));
        let mut twice = cube(8.0);
        twice[1] = twice[0];
        assert!(AxialBrush::of(&twice).is_none(), "+x twice, no -x");
        let mut slanted = cube(8.0);
        slanted[2] = [0.6, 0.8, 0.0, 8.0];
        assert!(AxialBrush::of(&slanted).is_none());
        let mut seven = cube(8.0);
        seven.push([0.0, 0.0, 1.0, 9.0]);
        assert!(AxialBrush::of(&seven).is_none());
        assert!(AxialBrush::of(&cube(8.0)[..5]).is_none());
    }

    /// A shape's clip two ways: its first `sides` planes as sides and the
    /// rest as bevels, in lanes ([`clip_pushed`]), and the reference's loop
    /// over all of them, each pushed out by the shape's shift.
    fn shape_clips<S: Support>(
        shape: &S,
        planes: &[Vec4],
        sides: usize,
        start: Vec3,
        end: Vec3,
    ) -> (BrushClip, BrushClip) {
        let normal = |p: &Vec4| Vec3::new(p.x, p.y, p.z);
        let (side_lanes, bevel_lanes) = (records(&planes[..sides]), records(&planes[sides..]));
        let shift = |n: &[Vec4; 3]| shape.shift_lanes(n);
        let lanes = clip_pushed(
            &side_lanes,
            &bevel_lanes,
            sides,
            start.into(),
            end.into(),
            shift,
        );
        let pushed = planes
            .iter()
            .map(|p| (Vec3A::from(normal(p)), p.w + shape.shift(normal(p))));
        (lanes, reference_clip(start.into(), end.into(), pushed))
    }

    /// A shape's lane clip answers as the reference's loop over the same
    /// pushed-out planes does, bit for bit: spheres, capsules and cylinders
    /// (whose shifts are computed in lanes), sides and bevels split anywhere.
    #[test]
    fn shape_lane_clip_equals_the_reference_clip() {
        let mut rng = Rng(fastrand::Rng::with_seed(0x2545_f491_4f6c_dd1d));
        let mut kinds = [0usize; 3];
        for case in 0..30_000 {
            let (planes, start, end, half) = random_case(&mut rng, case);
            let sides = planes.len().saturating_sub(case / 3 % 4);
            let (lanes, scalar) = match case % 3 {
                0 => shape_clips(&Sphere(half.x), &planes, sides, start, end),
                1 => shape_clips(&Capsule::new(half.x, half.z), &planes, sides, start, end),
                _ => shape_clips(&Cylinder::new(half.x, half.z), &planes, sides, start, end),
            };
            assert_eq!(
                bits(lanes),
                bits(scalar),
                "case {case}: {planes:?} {sides} {start} {end} {half}"
            );
            kinds[bits(scalar).0 as usize] += 1;
        }
        assert!(kinds.iter().all(|&n| n > 1_000), "{kinds:?}");
    }
}
