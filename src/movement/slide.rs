//! The slide move: one frame of travel, turned along every plane it meets.

use super::body::{Body, Collider};
use super::planes::{ClipPlanes, Turn};
use super::vector::{advanced, clip_velocity};
use super::{Motion, MAX_BUMPS};
use crate::math::Vec3;
use crate::trace::Scratch;

/// What one frame of a move does besides where it ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Slid {
    /// The move did not get where its velocity pointed in one trace (it
    /// hit something, or started stuck).
    pub blocked: bool,
}

/// The frame a slide move covers.
#[derive(Debug, Clone, Copy)]
pub(super) struct Frame {
    pub time: f32,
    pub gravity: u32,
    pub ground: Option<Vec3>,
}

/// Moves `motion` for one frame, sliding along what it hits:
///
/// - under gravity, the frame moves at the average of the velocity at its
///   start and its end (the end velocity is the start's less gravity ×
///   time), clipped to the ground plane when standing; the motion leaves
///   with the end velocity (turned as the frame's velocity was);
/// - up to [`MAX_BUMPS`] traces: each goes as far as the velocity takes it
///   in the time left; a hit uses up that fraction of the time and turns
///   the velocity along the planes met ([`ClipPlanes`]); a plane met again
///   nudges the velocity one unit out along it instead;
/// - a body stuck in solid for the whole trace keeps its place and loses
///   its vertical speed; more planes than [`super::MAX_CLIP_PLANES`], or
///   three planes boxing it in, stop it dead.
pub(super) fn slide_motion(
    collider: &impl Collider,
    body: &Body,
    scratch: &mut Scratch,
    motion: &mut Motion,
    frame: Frame,
) -> Slid {
    let blocked = Slid { blocked: true };
    let mut end_velocity = motion.velocity;
    if frame.gravity > 0 {
        end_velocity.z -= frame.gravity as f32 * frame.time;
        motion.velocity.z = (motion.velocity.z + end_velocity.z) * 0.5;
        if let Some(ground) = frame.ground {
            motion.velocity = clip_velocity(motion.velocity, ground);
        }
    }
    let mut planes = ClipPlanes::new(frame.ground, motion.velocity);
    let mut time_left = frame.time;
    let mut bumps = 0;
    while bumps < MAX_BUMPS {
        let end = advanced(motion.origin, time_left, motion.velocity);
        let (hit, _) = collider.sweep(body, motion.origin, end, scratch);
        if hit.allsolid {
            // Stuck: no falling speed builds up, sideways speed stays.
            motion.velocity.z = 0.0;
            return blocked;
        }
        if hit.fraction > 0.0 {
            motion.origin = hit.endpos;
        }
        if hit.fraction == 1.0 {
            break;
        }
        bumps += 1;
        time_left -= time_left * hit.fraction;
        if planes.is_full() {
            motion.velocity = Vec3::ZERO;
            return blocked;
        }
        if planes.has_met(hit.normal) {
            // The same plane again (a non-axial plane's rounding): push
            // out along it.
            motion.velocity += hit.normal;
            continue;
        }
        match planes.hit(hit.normal, motion.velocity, end_velocity) {
            Turn::Along {
                velocity,
                end_velocity: end,
            } => {
                motion.velocity = velocity;
                end_velocity = end;
            }
            Turn::Unchanged => {}
            Turn::Stop => {
                motion.velocity = Vec3::ZERO;
                return blocked;
            }
        }
    }
    if frame.gravity > 0 {
        motion.velocity = end_velocity;
    }
    Slid {
        blocked: bumps != 0,
    }
}

impl super::SlideQuery {
    pub(super) fn frame(&self) -> Frame {
        Frame {
            time: self.frametime,
            gravity: self.gravity,
            ground: self.ground,
        }
    }
}
