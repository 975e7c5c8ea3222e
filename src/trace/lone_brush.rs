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
    axial_record, box_in_planes, clip_axial, clip_side_lanes, side_lanes, BrushClip,
};
use super::fast::{brush_contact, Contact};
use super::work::{TraceResult, TraceWork};
use super::Kernel;
use crate::math::Vec3;
use crate::world::Plane;
use glam::Vec3A;

/// The one brush of a world, taken out of it.
#[derive(Debug, Clone)]
pub(crate) struct LoneBrush {
    /// How the move is clipped: the axial box record, or else the sides'
    /// planes in lanes.
    axial: Option<AxialBrush>,
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
            axial: axial_record(world, 0).copied(),
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
            Some(axial) => clip_axial(axial, &sweep.work(start, end)),
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
