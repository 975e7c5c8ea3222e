//! The moving box and what it collides with.

use super::query::MovementError;
use crate::math::Vec3;
use crate::scene::{PlacedScene, ENTITY_NONE, ENTITY_WORLD};
use crate::trace::{
    checked_point, trace_hull, HullError, HullQuery, InvalidTrace, Kernel, Scratch, TraceQuery,
    TraceResult,
};

/// The box that moves (`mins..maxs` around its origin) and the contents it
/// collides with. A box made from a registered onion hull is traced
/// through the hull's tree (the same answers, bit for bit, as the box
/// sweep's, found faster).
#[derive(Debug, Clone, PartialEq)]
pub struct Body {
    mins: Vec3,
    maxs: Vec3,
    mask: u32,
    /// The world's hull of this size, when the body was made from one.
    hull: Option<usize>,
}

impl Body {
    /// A box: coordinates finite and within the kernel's range, `mins ≤
    /// maxs` on every axis.
    pub fn boxed(mins: Vec3, maxs: Vec3, mask: u32) -> Result<Self, MovementError> {
        let mins = checked_point("mins", mins)?;
        let maxs = checked_point("maxs", maxs)?;
        if mins.cmpgt(maxs).any() {
            return Err(InvalidTrace::MinsAboveMaxs.into());
        }
        Ok(Self {
            mins,
            maxs,
            mask,
            hull: None,
        })
    }

    /// The box of the onion hull `name` registered in `world` (traced
    /// through its tree when the body moves in that world).
    pub fn hull(world: &Kernel, name: &str, mask: u32) -> Result<Self, MovementError> {
        let probe =
            HullQuery::new(world, name, Vec3::ZERO, Vec3::ZERO, mask).map_err(|e| match e {
                HullError::Invalid(invalid) => MovementError::Invalid(invalid),
                unknown @ HullError::UnknownHull { .. } => {
                    MovementError::UnknownHull(unknown.to_string())
                }
            })?;
        let sweep = probe.query();
        Ok(Self {
            mins: sweep.mins(),
            maxs: sweep.maxs(),
            mask,
            hull: Some(probe.hull()),
        })
    }

    pub fn mins(&self) -> Vec3 {
        self.mins
    }

    pub fn maxs(&self) -> Vec3 {
        self.maxs
    }

    /// The contents the body collides with.
    pub fn mask(&self) -> u32 {
        self.mask
    }

    pub(super) fn set_mask(&mut self, mask: u32) {
        self.mask = mask;
    }

    /// The index of the onion hull the body was made from, if any.
    pub fn hull_index(&self) -> Option<usize> {
        self.hull
    }

    /// The box swept from `start` to `end`. The movement's queries keep
    /// their points within [`super::MAX_MOVE_ORIGIN`] plus one frame's
    /// travel, inside the kernel's coordinate range, so the sweep is built
    /// without a second check.
    pub(super) fn sweep(&self, start: Vec3, end: Vec3) -> TraceQuery {
        TraceQuery {
            start,
            end,
            mins: self.mins,
            maxs: self.maxs,
            mask: self.mask,
            shape: None,
            exact: false,
        }
    }

    /// The body's hull in `world`: the hull it was made from, when `world`
    /// registers a hull of the same size at that index (a body made from
    /// another world's hull is swept as its box, which gives the same
    /// answer).
    fn hull_in(&self, world: &Kernel) -> Option<usize> {
        let hull = self.hull?;
        let spec = world.info.hulls.get(hull)?;
        (spec.mins == self.mins.to_array() && spec.maxs == self.maxs.to_array()).then_some(hull)
    }

    /// The box swept from `start` to `end` through `world`, through the
    /// body's hull there if it has one ([`Body::hull_in`]).
    fn trace_world(
        &self,
        world: &Kernel,
        start: Vec3,
        end: Vec3,
        scratch: &mut Scratch,
    ) -> (TraceQuery, TraceResult) {
        let sweep = self.sweep(start, end);
        let result = match self.hull_in(world) {
            Some(hull) => {
                let query = HullQuery {
                    hull,
                    query: sweep.clone(),
                };
                trace_hull(world, &query, scratch)
            }
            None => crate::trace::trace(world, &sweep, scratch),
        };
        (sweep, result)
    }
}

/// What a moving body collides with.
pub trait Collider {
    /// Sweeps `body` from `start` to `end`; the answer and the entity that
    /// gave it ([`ENTITY_WORLD`], an entity's id, or [`ENTITY_NONE`] when
    /// nothing stopped the move).
    fn sweep(
        &self,
        body: &Body,
        start: Vec3,
        end: Vec3,
        scratch: &mut Scratch,
    ) -> (TraceResult, u32);

    /// Whether this collider has a scene (answers then name entities).
    fn has_scene(&self) -> bool {
        false
    }
}

/// The static world alone.
impl Collider for Kernel<'_> {
    fn sweep(
        &self,
        body: &Body,
        start: Vec3,
        end: Vec3,
        scratch: &mut Scratch,
    ) -> (TraceResult, u32) {
        let (_, result) = body.trace_world(self, start, end, scratch);
        let entity = if result.fraction < 1.0 {
            ENTITY_WORLD
        } else {
            ENTITY_NONE
        };
        (result, entity)
    }
}

/// The world and a scene's entities, as the server traces them; `pass` is
/// the mover's own entity (and the rules that come with it: what it owns
/// and what shares its owner are passed over too).
#[derive(Debug, Clone, Copy)]
pub struct InScene<'s, 'm> {
    pub scene: &'s PlacedScene<'m>,
    pub pass: u32,
}

impl Collider for InScene<'_, '_> {
    fn sweep(
        &self,
        body: &Body,
        start: Vec3,
        end: Vec3,
        scratch: &mut Scratch,
    ) -> (TraceResult, u32) {
        let (sweep, through_world) = body.trace_world(self.scene.world(), start, end, scratch);
        self.scene
            .trace_after(through_world, &sweep, self.pass, scratch)
    }

    fn has_scene(&self) -> bool {
        true
    }
}
