//! A ray or box moved against a world of one brush: the answer [`trace`]
//! gives, without the world's search around the brush. A scene's entities
//! are such worlds (a box entity is one brush; most inline models, doors
//! and platforms, are one brush), and setting up the search for each
//! entity a move meets cost more than the clip.
//!
//! The same numbers as the world's path: the move is set up as any trace's
//! ([`TraceWork`]), the brush clipped by the clip the fast search uses (its
//! axial box record or its side lanes, copied from the world's kernel),
//! a position test made with the walk's brush test, and each side reports
//! what the world's side reports. With one brush no visit order can change
//! the answer, so the walk (which the fast search defers to for order)
//! answers the same.
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
        let mut result = TraceResult::default();
        if self.contents & mask == 0 {
            return result;
        }
        let w = TraceWork::of_move(start, end, mins, maxs, mask);
        if w.is_position_test() {
            if box_in_planes(self.planes.iter(), &w) {
                result.set_inside(self.contents);
            }
            return result;
        }
        let clip = match &self.axial {
            Some(axial) => clip_axial(axial, &w),
            None => clip_side_lanes(&self.lanes, &w),
        };
        match clip {
            BrushClip::Miss => {}
            BrushClip::Inside { gets_out } => {
                result.startsolid = true;
                if !gets_out {
                    result.set_inside(self.contents);
                }
            }
            BrushClip::Enter { frac, side } => {
                if let Some(contact) = self.sides.get(side) {
                    result = contact.at(frac.max(0.0));
                }
            }
        }
        result
    }
}
