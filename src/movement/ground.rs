//! The ground probe: what the body stands on.

use super::body::{Body, Collider};
use super::{GROUND_PROBE_DEPTH, MIN_WALK_NORMAL};
use crate::math::Vec3;
use crate::trace::{Scratch, TraceResult};

/// What lies just under a body.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ground {
    /// The box traced [`GROUND_PROBE_DEPTH`] down from the origin.
    pub trace: TraceResult,
    /// The entity that answered (see [`Collider::sweep`]).
    pub entity: u32,
    /// It hit a plane a player can stand on (normal z ≥ [`MIN_WALK_NORMAL`]).
    pub walkable: bool,
}

impl Ground {
    /// The plane stood on, when walkable.
    pub fn plane(&self) -> Option<Vec3> {
        self.walkable.then_some(self.trace.normal)
    }
}

/// Probes the ground under `body` at `origin`.
pub fn ground(
    collider: &impl Collider,
    body: &Body,
    origin: Vec3,
    scratch: &mut Scratch,
) -> Ground {
    let below = Vec3::new(origin.x, origin.y, origin.z - GROUND_PROBE_DEPTH);
    let (trace, entity) = collider.sweep(body, origin, below, scratch);
    Ground {
        trace,
        entity,
        walkable: trace.fraction < 1.0 && trace.normal.z >= MIN_WALK_NORMAL,
    }
}
