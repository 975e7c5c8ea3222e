//! The planes a slide move has met this frame, and how the velocity is
//! turned to run along them.

use super::vector::{clip_velocity, cross, dot, normalized, scaled};
use super::MAX_CLIP_PLANES;
use crate::math::Vec3;

/// A velocity "enters" a plane when its component into the plane is below
/// this (units/s): a velocity already leaving it, or running along it, is
/// left alone.
const ENTERS_BELOW: f32 = 0.1;
/// Two hit normals closer than this (cosine) are the same plane hit again.
const SAME_PLANE: f32 = 0.99;

/// The planes the frame's velocity must not turn back into: the ground,
/// the velocity's own starting direction, then each plane hit.
#[derive(Debug, Clone)]
pub(super) struct ClipPlanes {
    normals: [Vec3; MAX_CLIP_PLANES],
    len: usize,
}

/// What the planes make of the velocity after a hit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Turn {
    /// Run along the planes with these velocities (now, and at the end of
    /// the frame under gravity).
    Along { velocity: Vec3, end_velocity: Vec3 },
    /// No plane is entered: keep going as before.
    Unchanged,
    /// Three planes box the velocity in: stop dead.
    Stop,
}

impl ClipPlanes {
    /// The ground plane (when standing) and the velocity's direction.
    pub(super) fn new(ground: Option<Vec3>, velocity: Vec3) -> Self {
        let mut planes = Self {
            normals: [Vec3::ZERO; MAX_CLIP_PLANES],
            len: 0,
        };
        if let Some(normal) = ground {
            planes.push(normal);
        }
        planes.push(normalized(velocity));
        planes
    }

    fn push(&mut self, normal: Vec3) {
        self.normals[self.len] = normal;
        self.len += 1;
    }

    pub(super) fn is_full(&self) -> bool {
        self.len >= MAX_CLIP_PLANES
    }

    /// Whether `normal` is one of the planes already met.
    pub(super) fn has_met(&self, normal: Vec3) -> bool {
        self.planes().iter().any(|&p| dot(normal, p) > SAME_PLANE)
    }

    fn planes(&self) -> &[Vec3] {
        &self.normals[..self.len]
    }

    /// Adds a plane just hit (the caller checks [`Self::is_full`] first)
    /// and turns the velocity along the planes: the first plane it enters
    /// clips it; if the clipped velocity enters a second, it runs along the
    /// crease of the two instead, unless it already leaves the first; a
    /// third plane entered along a crease stops it. `end_velocity` (where
    /// gravity leaves the velocity at the end of the frame) is turned the
    /// same way.
    pub(super) fn hit(&mut self, normal: Vec3, velocity: Vec3, end_velocity: Vec3) -> Turn {
        self.push(normal);
        let planes = self.planes();
        for (i, &first) in planes.iter().enumerate() {
            if dot(velocity, first) >= ENTERS_BELOW {
                continue;
            }
            let mut clipped = clip_velocity(velocity, first);
            let mut end_clipped = clip_velocity(end_velocity, first);
            for (j, &second) in planes.iter().enumerate() {
                if j == i || dot(clipped, second) >= ENTERS_BELOW {
                    continue;
                }
                clipped = clip_velocity(clipped, second);
                end_clipped = clip_velocity(end_clipped, second);
                if dot(clipped, first) >= 0.0 {
                    continue;
                }
                let crease = normalized(cross(first, second));
                clipped = scaled(crease, dot(crease, velocity));
                end_clipped = scaled(crease, dot(crease, end_velocity));
                let boxed_in = planes
                    .iter()
                    .enumerate()
                    .any(|(k, &third)| k != i && k != j && dot(clipped, third) < ENTERS_BELOW);
                if boxed_in {
                    return Turn::Stop;
                }
            }
            return Turn::Along {
                velocity: clipped,
                end_velocity: end_clipped,
            };
        }
        Turn::Unchanged
    }
}
