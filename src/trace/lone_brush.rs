//! A ray or box moved against a world of one brush: the answer [`trace`]
//! gives, without the world's search around the brush. A scene's entities
//! are such worlds (a box entity is one brush; most inline models, doors
//! and platforms, are one brush), and setting up the search for each
//! entity a move meets cost more than the clip.
//!
//! The same numbers as the world's path: the move is set up as any trace's
//! ([`TraceWork`]; its box's part once for every entity a move meets,
//! [`BoxSweep`]), the brush clipped by the clip the fast search uses (its
//! axial box record or its side lanes, copied from the world's kernel),
//! a position test made with the walk's brush test, and each side reports
//! what the world's side reports. With one brush no visit order can change
//! the answer, so the walk (which the fast search defers to for order)
//! answers the same. The clip's answer is written out only when asked
//! ([`LoneClip`]): a scene asks only for the entity that stops the move.
//!
//! [`trace`]: super::trace

use super::accel::{AxialBrush, SideLanes};
use super::brush::{
    axial_record, box_in_planes, clip_side_lanes, epsilon_fraction, side_lanes, BrushClip,
};
use super::fast::{brush_contact, Contact};
use super::work::{TraceResult, TraceWork};
use super::Kernel;
use crate::margins::SURFACE_CLIP_EPSILON;
use crate::math::Vec3;
use crate::world::Plane;
use glam::{BVec3A, Vec3A};

/// The one brush of a world, taken out of it.
#[derive(Debug, Clone)]
pub(crate) struct LoneBrush {
    /// How the move is clipped: as an axial box, or else by the sides'
    /// planes in lanes.
    axial: Option<LoneAxial>,
    lanes: Box<[SideLanes]>,
    /// The sides' planes, for a position test.
    planes: Box<[Plane]>,
    /// What the move reports when it stops on each side, in side order.
    sides: Box<[Contact]>,
    contents: u32,
}

impl LoneBrush {
    /// The brush of `world` when it is its only one (no other brush and no
    /// patch) and has sides.
    pub(crate) fn of(world: &Kernel) -> Option<Self> {
        let ([brush], []) = (world.brushes, world.patches) else {
            return None;
        };
        if brush.num_sides == 0 {
            return None;
        }
        let sides = &world.brush_sides[brush.first_side as usize..][..brush.num_sides as usize];
        Some(LoneBrush {
            axial: axial_record(world, 0).map(LoneAxial::new),
            lanes: side_lanes(world, 0).into(),
            planes: sides
                .iter()
                .map(|side| world.planes[side.plane as usize])
                .collect(),
            sides: (0..sides.len())
                .map(|side| brush_contact(world, 0, side))
                .collect(),
            contents: brush.contents,
        })
    }

    /// What [`super::trace`] answers in the brush's world for the box
    /// `mins..maxs` (both zero for a ray) moved from `start` to `end`,
    /// colliding with `mask`, but for `endpos`, which is left to the caller
    /// (a scene takes it along the world-frame move).
    #[inline]
    pub(crate) fn trace_box(
        &self,
        start: Vec3,
        end: Vec3,
        mins: Vec3,
        maxs: Vec3,
        mask: u32,
    ) -> TraceResult {
        self.result(self.clip(&BoxSweep::new(mins, maxs, mask), start.into(), end.into()))
    }

    /// What the box of `sweep` moved from `start` to `end` does to the
    /// brush, before an answer is written: a scene writes one only for the
    /// entity that stops the move first.
    #[inline(always)]
    pub(crate) fn clip(&self, sweep: &BoxSweep, start: Vec3A, end: Vec3A) -> LoneClip {
        if self.contents & sweep.mask == 0 {
            return LoneClip::Miss;
        }
        // (The box's centre moved; the out-of-line clips take the
        // points so, not a `TraceWork` built here for them to read.)
        let (start, end) = (start + sweep.offset, end + sweep.offset);
        if start.cmpeq(end).all() {
            return self.position_test(sweep, start, end);
        }
        let clip = match &self.axial {
            Some(axial) => return axial.clip(sweep, start, end),
            None => self.clip_slanted(sweep, start, end),
        };
        match clip {
            BrushClip::Miss => LoneClip::Miss,
            BrushClip::Inside { gets_out } => LoneClip::Inside { gets_out },
            BrushClip::Enter { frac, side } if side < self.sides.len() => LoneClip::Enter {
                frac: frac.max(0.0),
                side,
            },
            BrushClip::Enter { .. } => LoneClip::Miss,
        }
    }

    /// [`LoneBrush::clip`] of a move that does not move. (Out of line, as
    /// [`LoneBrush::clip_slanted`]: the axial clip is what most moves take,
    /// and it keeps its registers.)
    #[inline(never)]
    fn position_test(&self, sweep: &BoxSweep, start: Vec3A, end: Vec3A) -> LoneClip {
        if box_in_planes(self.planes.iter(), &sweep.work(start, end)) {
            LoneClip::Inside { gets_out: false }
        } else {
            LoneClip::Miss
        }
    }

    /// The clip of a brush that is not an axial box.
    #[inline(never)]
    fn clip_slanted(&self, sweep: &BoxSweep, start: Vec3A, end: Vec3A) -> BrushClip {
        clip_side_lanes(&self.lanes, &sweep.work(start, end))
    }

    /// The brush as an axial box, when it is one.
    pub(crate) fn axial(&self) -> Option<&LoneAxial> {
        self.axial.as_ref()
    }

    /// The brush's contents.
    pub(crate) fn contents(&self) -> u32 {
        self.contents
    }

    /// The answer of a [`LoneBrush::clip`] (no `endpos`), as
    /// [`LoneBrush::trace_box`] gives it.
    pub(crate) fn result(&self, clip: LoneClip) -> TraceResult {
        let mut result = TraceResult::default();
        match clip {
            LoneClip::Miss => {}
            LoneClip::Inside { gets_out } => {
                result.startsolid = true;
                if !gets_out {
                    result.set_inside(self.contents);
                }
            }
            LoneClip::Enter { frac, side } => {
                if let Some(contact) = self.sides.get(side) {
                    result = contact.at(frac);
                }
            }
        }
        result
    }
}

/// An axial box brush as a lone brush clips it: the world's record's
/// faces and, for each set of lanes that a move enters latest, the first of
/// their sides in brush order. (A scene keeps a copy beside each entity's
/// bounds, so that a move reads one entity from a few adjacent lines: the
/// faces first, on the line after the bounds.)
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub(crate) struct LoneAxial {
    /// The record's `pos` and `neg` ([`AxialBrush`]).
    pos: Vec3A,
    neg: Vec3A,
    /// At `mask` (bit `k < 3`: side `+e_k`, lane `k` of `pos_side`; bit
    /// `3 + k`: side `-e_k`, lane `k` of `neg_side`), the least side index
    /// of those set.
    first_side: [u8; 64],
}

impl LoneAxial {
    fn new(record: &AxialBrush) -> Self {
        let sides = [record.pos_side.to_array(), record.neg_side.to_array()];
        let first_side = std::array::from_fn(|mask| {
            (0..6)
                .filter(|bit| mask & (1 << bit) != 0)
                .map(|bit| sides[bit / 3][bit % 3] as u8)
                .min()
                .unwrap_or(0)
        });
        LoneAxial {
            pos: record.pos,
            neg: record.neg,
            first_side,
        }
    }

    /// [`LoneBrush::clip`] of the brush, the box of `sweep` moved from
    /// `start` to `end` (moved by the box's centre, not equal): the world's
    /// axial clip (`clip_axial`), the same numbers in the same lanes, with
    /// fewer steps after them. The latest entry and the earliest exit are
    /// taken over both halves' lanes at once (maximum and minimum are
    /// exact, and no lane in play is NaN: an entered side has `d1 > d2`,
    /// a left one `d1 <= 0 < d2`, so no denominator is 0); the side is the
    /// first in brush order among the lanes equal to the latest entry, by
    /// table rather than a minimum of floats turned into an index. Only a
    /// zero's sign could differ between the two orders of the maximum, and
    /// equality and comparison do not see it; the fraction returned is
    /// `max(frac, 0)` as [`LoneBrush::clip`] returns any other. The tests
    /// hold this clip to the world's on random moves, bit for bit.
    #[inline(always)]
    pub(crate) fn clip(&self, sweep: &BoxSweep, start: Vec3A, end: Vec3A) -> LoneClip {
        // (The closure always gives the fractions, so there is always a
        // clip.)
        self.clip_with(sweep, start, end, |d1, e, denom| {
            Some(wide_fractions(d1, e, denom))
        })
        .unwrap_or(LoneClip::Miss)
    }

    /// [`LoneAxial::clip`], or `None` when a fraction would be taken in
    /// `f64` (a sum `d1 ± 1/8` that `f32` does not hold exactly): a scene's
    /// loop over the entities a move meets then traces that entity in
    /// full, so that the loop makes no call.
    #[inline(always)]
    pub(crate) fn clip_exact(
        &self,
        sweep: &BoxSweep,
        start: Vec3A,
        end: Vec3A,
    ) -> Option<LoneClip> {
        self.clip_with(sweep, start, end, |_, _, _| None)
    }

    /// [`LoneAxial::clip`], the fractions of a move whose sums are not
    /// exact in `f32` given by `wide` (from `d1`, `e`, `denom`), or none.
    #[inline(always)]
    fn clip_with(
        &self,
        sweep: &BoxSweep,
        start: Vec3A,
        end: Vec3A,
        wide: impl FnOnce([Vec3A; 2], [Vec3A; 2], [Vec3A; 2]) -> Option<[Vec3A; 2]>,
    ) -> Option<LoneClip> {
        const _: () = assert!(SURFACE_CLIP_EPSILON == 0.125);
        let epsilon = Vec3A::splat(SURFACE_CLIP_EPSILON as f32);
        let pos = self.pos - sweep.lower;
        let neg = self.neg + sweep.extents;
        let d1 = [start - pos, -start - neg];
        let d2 = [end - pos, -end - neg];
        let front1 = [d1[0].cmpgt(Vec3A::ZERO), d1[1].cmpgt(Vec3A::ZERO)];
        let away = |h: usize| front1[h] & (d2[h].cmpge(epsilon) | d2[h].cmpge(d1[h]));
        if (away(0) | away(1)).any() {
            return Some(LoneClip::Miss);
        }
        if !(front1[0] | front1[1]).any() {
            let gets_out = (d2[0].cmpgt(Vec3A::ZERO) | d2[1].cmpgt(Vec3A::ZERO)).any();
            return Some(LoneClip::Inside { gets_out });
        }
        let crossing: [BVec3A; 2] =
            std::array::from_fn(|h| !(d1[h].cmple(Vec3A::ZERO) & d2[h].cmple(Vec3A::ZERO)));
        let enters = [d1[0].cmpgt(d2[0]), d1[1].cmpgt(d2[1])];
        let e = [
            Vec3A::select(enters[0], -epsilon, epsilon),
            Vec3A::select(enters[1], -epsilon, epsilon),
        ];
        let denom = [d1[0] - d2[0], d1[1] - d2[1]];
        // The fractions in `f32` where `d1 ± 1/8` is exact in `f32` (as
        // it is for moves on a map's grid): the quotient of two floats,
        // rounded to `f64` and then to `f32`, is the quotient rounded to
        // `f32` (53 ≥ 2 · 24 + 2 bits), so the lanes are the reference's
        // `f64` fractions. A sum `s = d1 + e` is exact exactly when both
        // `s - d1 == e` and `s - e == d1` (the difference from the larger
        // term is exact, so it equals the other only if nothing was
        // rounded away). Otherwise the `f64` quotients, lane by lane.
        let sum = [d1[0] + e[0], d1[1] + e[1]];
        let exact = |h: usize| (sum[h] - d1[h]).cmpeq(e[h]) & (sum[h] - e[h]).cmpeq(d1[h]);
        let inexact = (crossing[0] & !exact(0)) | (crossing[1] & !exact(1));
        let f = if inexact.any() {
            wide(d1, e, denom)?
        } else {
            [sum[0] / denom[0], sum[1] / denom[1]]
        };
        let mut enter = [Vec3A::ZERO; 2];
        let mut leave = [Vec3A::ZERO; 2];
        for h in 0..2 {
            let clamped = Vec3A::select(f[h].cmplt(Vec3A::ZERO), Vec3A::ZERO, f[h]);
            enter[h] = Vec3A::select(enters[h] & crossing[h], clamped, Vec3A::NEG_INFINITY);
            leave[h] = Vec3A::select(!enters[h] & crossing[h], f[h], Vec3A::INFINITY);
        }
        let largest = enter[0].max(enter[1]).max_element();
        let leave = leave[0].min(leave[1]).min_element().min(1.0);
        if largest == f32::NEG_INFINITY || largest >= leave {
            return Some(LoneClip::Miss);
        }
        let at = |h: usize| enter[h].cmpeq(Vec3A::splat(largest)).bitmask() as usize & 7;
        Some(LoneClip::Enter {
            frac: largest.max(0.0),
            side: self.first_side[at(0) | at(1) << 3] as usize,
        })
    }
}

/// The fractions `(d1 + e) / denom` of both halves' lanes in `f64`, as the
/// reference computes them ([`epsilon_fraction`]).
#[cold]
#[inline(never)]
fn wide_fractions(d1: [Vec3A; 2], e: [Vec3A; 2], denom: [Vec3A; 2]) -> [Vec3A; 2] {
    std::array::from_fn(|h| {
        let (a, e, denom) = (d1[h].to_array(), e[h].to_array(), denom[h].to_array());
        Vec3A::from_array(std::array::from_fn(|k| {
            epsilon_fraction(a[k], e[k], denom[k])
        }))
    })
}

/// A query's box as every one-brush clip of its move takes it, set up once
/// for all the entities the move meets: made symmetric about its centre as
/// [`TraceWork`] makes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BoxSweep {
    /// The box's centre, which the move's points are moved by.
    offset: Vec3A,
    lower: Vec3A,
    extents: Vec3A,
    is_point: bool,
    mask: u32,
}

impl BoxSweep {
    /// The box `mins..maxs` (both zero for a ray) colliding with `mask`.
    #[inline(always)]
    pub(crate) fn new(mins: Vec3, maxs: Vec3, mask: u32) -> Self {
        let (mins, maxs) = (Vec3A::from(mins), Vec3A::from(maxs));
        let offset = (mins + maxs) * 0.5;
        let lower = mins - offset;
        let extents = maxs - offset;
        BoxSweep {
            offset,
            lower,
            extents,
            is_point: (lower.cmpeq(Vec3A::ZERO) & extents.cmpeq(Vec3A::ZERO)).all(),
            mask,
        }
    }

    /// The box's centre, which the move's points are moved by.
    #[inline(always)]
    pub(crate) fn offset(&self) -> Vec3A {
        self.offset
    }

    /// The mask the box collides with.
    #[inline(always)]
    pub(crate) fn mask(&self) -> u32 {
        self.mask
    }

    /// [`TraceWork::of_move`] of this box from `start` to `end` (the
    /// points already moved by the box's centre, `offset`): the same
    /// numbers.
    #[inline(always)]
    fn work(&self, start: Vec3A, end: Vec3A) -> TraceWork {
        TraceWork {
            start,
            end,
            extents: self.extents,
            lower: self.lower,
            bounds: [start.min(end) + self.lower, start.max(end) + self.extents],
            is_point: self.is_point,
            mask: self.mask,
            stop_at_any_hit: false,
            result: TraceResult::default(),
        }
    }
}

/// What a move does to a lone brush (see [`LoneBrush::clip`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum LoneClip {
    /// Untouched, or not in the mask: fraction 1.
    Miss,
    /// Starts inside; `gets_out`: ends outside (fraction 1), else all-solid
    /// (fraction 0).
    Inside { gets_out: bool },
    /// Stopped at `frac` (at least 0) by side `side`.
    Enter { frac: f32, side: usize },
}

impl LoneClip {
    /// The answer's fraction.
    #[inline(always)]
    pub(crate) fn fraction(&self) -> f32 {
        match *self {
            LoneClip::Miss | LoneClip::Inside { gets_out: true } => 1.0,
            LoneClip::Inside { gets_out: false } => 0.0,
            LoneClip::Enter { frac, .. } => frac,
        }
    }

    /// The answer's `startsolid` and `allsolid`.
    #[inline(always)]
    pub(crate) fn solid(&self) -> (bool, bool) {
        match *self {
            LoneClip::Inside { gets_out } => (true, !gets_out),
            _ => (false, false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::brush::clip_axial;
    use super::*;

    /// What the world's axial clip answers, as [`LoneBrush::clip`] turned it
    /// into a [`LoneClip`] before the lone brush had its own.
    fn world_clip(record: &AxialBrush, sweep: &BoxSweep, start: Vec3A, end: Vec3A) -> LoneClip {
        match clip_axial(record, &sweep.work(start, end)) {
            BrushClip::Miss => LoneClip::Miss,
            BrushClip::Inside { gets_out } => LoneClip::Inside { gets_out },
            BrushClip::Enter { frac, side } => LoneClip::Enter {
                frac: frac.max(0.0),
                side,
            },
        }
    }

    /// Uniform in `-s/2..s/2`, on a 1/8 grid half the time (faces and
    /// moves meet exactly, as map coordinates do).
    fn coord(rng: &mut fastrand::Rng, s: f32) -> f32 {
        let v = (rng.f32() - 0.5) * s;
        if rng.bool() {
            (v * 8.0).round() / 8.0
        } else {
            v
        }
    }

    fn bits(clip: LoneClip) -> (u32, u32, usize) {
        match clip {
            LoneClip::Miss => (0, 0, 0),
            LoneClip::Inside { gets_out } => (1, gets_out as u32, 0),
            LoneClip::Enter { frac, side } => (2, frac.to_bits(), side),
        }
    }

    /// The lone brush's axial clip answers as the world's, bit for bit:
    /// boxes with their sides in every order, rays and boxes (lopsided ones
    /// made symmetric with rounding), moves crossing, grazing and missing,
    /// from and to faces (on them, 1/8 and 1/16 unit off), starting inside,
    /// entering two or three sides at the same fraction (where the first
    /// side in brush order wins), at map scale and near the coordinate
    /// limit.
    #[test]
    fn the_lone_axial_clip_is_the_worlds() {
        let mut rng = fastrand::Rng::with_seed(0x10e_a61a);
        let mut kinds = [0usize; 3];
        let mut ties = 0;
        let (mut exact, mut inexact) = (0, 0);
        for case in 0..200_000 {
            let scale = match case % 10 {
                0 => 500_000.0,
                5 => 0.05,
                _ => 300.0,
            };
            // Near the origin, every length 1/1024 as long: distances so
            // small that `d1 ± 1/8` is not always exact in `f32`.
            let unit = if case % 10 == 5 { 1.0 / 1024.0 } else { 1.0 };
            let centre = Vec3::new(
                coord(&mut rng, scale),
                coord(&mut rng, scale),
                coord(&mut rng, scale),
            );
            let half = Vec3::new(
                coord(&mut rng, 128.0).abs(),
                coord(&mut rng, 128.0).abs(),
                coord(&mut rng, 128.0).abs(),
            ) * unit;
            let (lo, hi) = (centre - half, centre + half);
            let mut order = [0, 1, 2, 3, 4, 5];
            rng.shuffle(&mut order);
            let planes: Vec<[f32; 4]> = order
                .iter()
                .map(|&s| {
                    let mut p = [0.0; 4];
                    let axis = s / 2;
                    if s % 2 == 0 {
                        p[axis] = 1.0;
                        p[3] = hi[axis];
                    } else {
                        p[axis] = -1.0;
                        p[3] = -lo[axis];
                    }
                    p
                })
                .collect();
            let record = AxialBrush::of(&planes).expect("an axial box");
            let lone = LoneAxial::new(&record);
            let (mins, maxs) = match case % 4 {
                0 => (Vec3::ZERO, Vec3::ZERO),
                1 => (Vec3::new(-15.0, -15.0, -24.0), Vec3::new(15.0, 15.0, 32.0)),
                _ => {
                    let a = Vec3::new(
                        coord(&mut rng, 40.0),
                        coord(&mut rng, 40.0),
                        coord(&mut rng, 40.0),
                    );
                    let b = Vec3::new(
                        coord(&mut rng, 40.0),
                        coord(&mut rng, 40.0),
                        coord(&mut rng, 40.0),
                    );
                    (a.min(b), a.max(b))
                }
            };
            let (mins, maxs) = (mins * unit, maxs * unit);
            let sweep = BoxSweep::new(mins, maxs, 1);
            let reach = half + Vec3::splat(48.0 * unit);
            let near = |rng: &mut fastrand::Rng| {
                centre + Vec3::new(coord(rng, 2.0), coord(rng, 2.0), coord(rng, 2.0)) * reach
            };
            let (mut start, mut end) = (near(&mut rng), near(&mut rng));
            match case % 6 {
                0 | 1 => {
                    // From or to a face of the box grown by the sweep's box.
                    let axis = rng.usize(..3);
                    // (Off the grid by less than 1/4 unit a third of the
                    // time: a distance `d1` so small that `d1 ± 1/8` is not
                    // exact in `f32`.)
                    let off = match rng.usize(..3) {
                        0 => rng.f32() * 0.5 - 0.25,
                        _ => [0.0, 0.125, -0.125, 0.0625, -0.0625][rng.usize(..5)],
                    };
                    let face = if rng.bool() {
                        hi[axis] - mins[axis] + off
                    } else {
                        lo[axis] - maxs[axis] - off
                    };
                    if case % 6 == 0 {
                        start[axis] = face;
                    } else {
                        end[axis] = face;
                    }
                }
                2 => {
                    // Diagonally onto an edge or a corner: the same
                    // distances to two or three faces at both ends.
                    let (d1, d2) = (rng.u32(1..400) as f32 / 8.0, rng.u32(0..64) as f32 / 8.0);
                    let axes = if rng.bool() { 2 } else { 3 };
                    for axis in 0..axes {
                        let up = rng.bool();
                        let face = |d: f32| {
                            if up {
                                hi[axis] - mins[axis] + d
                            } else {
                                lo[axis] - maxs[axis] - d
                            }
                        };
                        start[axis] = face(d1);
                        end[axis] = face(-d2);
                    }
                }
                _ => {}
            }
            let (start, end) = (Vec3A::from(start), Vec3A::from(end));
            let (start, end) = (start + sweep.offset, end + sweep.offset);
            if start.cmpeq(end).all() {
                continue;
            }
            let world = world_clip(&record, &sweep, start, end);
            assert_eq!(
                bits(lone.clip(&sweep, start, end)),
                bits(world),
                "case {case}: {planes:?} {mins} {maxs} {start} {end}"
            );
            // The scene loop's clip answers the same, or leaves the move
            // to `clip` (a fraction's sum not exact in `f32`).
            match lone.clip_exact(&sweep, start, end) {
                Some(clip) => {
                    assert_eq!(bits(clip), bits(world), "case {case}: exact");
                    exact += 1;
                }
                None => inexact += 1,
            }
            kinds[bits(world).0 as usize] += 1;
            if let (2, LoneClip::Enter { frac, .. }) = (case % 6, world) {
                let entered = |h: usize| {
                    let d1 = [
                        start - (record.pos - sweep.lower),
                        -start - (record.neg + sweep.extents),
                    ];
                    (d1[h].cmpgt(Vec3A::ZERO).bitmask() & 7).count_ones()
                };
                ties += (frac > 0.0 && entered(0) + entered(1) >= 2) as usize;
            }
        }
        assert!(kinds.iter().all(|&n| n > 5_000), "{kinds:?}");
        assert!(ties > 1_000, "{ties} moves entering at an edge or a corner");
        assert!(
            exact > 50_000 && inexact > 5_000,
            "{exact} exact, {inexact} not"
        );
    }
}
