//! The step-slide move: a slide move, and when that is blocked, the same
//! slide from a step higher, put back down.

use super::body::{Body, Collider};
use super::slide::{slide_motion, Frame};
use super::vector::clip_velocity;
use super::{Motion, MIN_WALK_NORMAL, STEP_HEIGHT};
use crate::math::Vec3;
use crate::trace::Scratch;

/// How a step-slide move went: the rise of the step path (final z less
/// start z) when it was taken, else 0.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct Stepped {
    pub height: f32,
}

/// Moves `motion` one frame, climbing steps up to [`STEP_HEIGHT`]:
///
/// 1. the slide move; if it was not blocked, that is the move;
/// 2. still moving up (after the slide) with no walkable ground within a
///    step below the start: no stepping (a jump does not climb ledges);
/// 3. the box is raised from the start as far as it goes, up to a step
///    (not at all if stuck there: the slide's result stands); the slide
///    move is made again from there with the starting velocity;
/// 4. then lowered by as much as it was raised, and its velocity clipped
///    to the plane it lands on. This is the move, whether or not it got
///    further than the first slide.
pub(super) fn step_motion(
    collider: &impl Collider,
    body: &Body,
    scratch: &mut Scratch,
    motion: &mut Motion,
    frame: Frame,
) -> Stepped {
    let start = *motion;
    if !slide_motion(collider, body, scratch, motion, frame).blocked {
        return Stepped::default();
    }
    let below = Vec3::new(start.origin.x, start.origin.y, start.origin.z - STEP_HEIGHT);
    let (under, _) = collider.sweep(body, start.origin, below, scratch);
    if motion.velocity.z > 0.0 && (under.fraction == 1.0 || under.normal.z < MIN_WALK_NORMAL) {
        return Stepped::default();
    }
    let above = Vec3::new(start.origin.x, start.origin.y, start.origin.z + STEP_HEIGHT);
    let (raised, _) = collider.sweep(body, start.origin, above, scratch);
    if raised.allsolid {
        return Stepped::default();
    }
    let rise = raised.endpos.z - start.origin.z;
    *motion = Motion {
        origin: raised.endpos,
        velocity: start.velocity,
    };
    slide_motion(collider, body, scratch, motion, frame);
    let lowered = Vec3::new(motion.origin.x, motion.origin.y, motion.origin.z - rise);
    let (landed, _) = collider.sweep(body, motion.origin, lowered, scratch);
    if !landed.allsolid {
        motion.origin = landed.endpos;
    }
    if landed.fraction < 1.0 {
        motion.velocity = clip_velocity(motion.velocity, landed.normal);
    }
    Stepped {
        height: motion.origin.z - start.origin.z,
    }
}
