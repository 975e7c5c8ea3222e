//! Scenes: the entities a game server traces besides the static world, and
//! traces through the world and them together as Quake 3's server does.
//!
//! An entity is an inline model of the map (`*K`: a door, a platform),
//! moved to `origin` and rotated by `angles`, or a box (a player, a corpse,
//! a missile), moved and never rotated. A trace ([`PlacedScene::trace`])
//! answers as the reference's server-side trace:
//!
//! 1. the world is traced; the answer's entity is [`ENTITY_WORLD`] when it
//!    stops the move, else [`ENTITY_NONE`]; when it stops it at once
//!    (fraction 0) that is the answer;
//! 2. then each entity in scene order whose bounds (grown by one unit) meet
//!    the move's (grown likewise), over the whole move: the loop ends once
//!    the answer is all-solid; it skips the query's `pass` entity, the
//!    entities `pass` owns and those with the same owner as `pass`, and
//!    entities whose contents miss the mask;
//! 3. an entity's answer that is all-solid marks the answer all-solid, one
//!    that starts solid marks it start-solid (the rest of the answer stays);
//!    one that stops the move strictly earlier replaces the answer (keeping
//!    an earlier `startsolid`) and names the entity. Ties go to the earlier
//!    entity. So an answer can be all-solid without starting solid: a move
//!    stopped at once by one entity while inside another.
//!
//! A rotated model is traced by rotating the move into the model's frame,
//! where the swept box stays axis-aligned: the reference's approximation (a
//! box is not rotated with the model, so a door turned 45° is met by the box
//! as if the box had turned -45° with respect to it). The hit normal is
//! rotated back, `endpos` is taken along the world-frame move, and `dist` is
//! the model frame's.

mod boxes;
mod rotation;

pub use rotation::Rotation;

use crate::contents::CONTENTS_BODY;
use crate::map::{LoadError, Map};
use crate::math::Vec3;
use crate::trace::{checked_point, InvalidTrace, Kernel, Scratch, TraceQuery, TraceResult};
use glam::Vec4;
use std::sync::Arc;
use thiserror::Error;

/// The `entity` of an answer the world stopped.
pub const ENTITY_WORLD: u32 = 1022;
/// The `entity` of an answer nothing stopped; as a `pass`, no entity.
pub const ENTITY_NONE: u32 = 1023;
/// Highest id an entity may have.
pub const MAX_ENTITY_ID: u32 = 1021;
/// Most entities in a scene (every id once).
pub const MAX_ENTITIES: usize = MAX_ENTITY_ID as usize + 1;

/// What an entity is made of.
#[derive(Debug, Clone, PartialEq)]
pub enum EntityShape {
    /// Inline model `*K` of the map (K ≥ 1), moved and rotated.
    Model(usize),
    /// A box around the origin (`mins ≤ maxs`), never rotated.
    Box { mins: Vec3, maxs: Vec3 },
}

/// One entity of a scene as a client gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entity {
    /// 0…[`MAX_ENTITY_ID`], once per scene.
    pub id: u32,
    pub shape: EntityShape,
    pub origin: Vec3,
    /// Pitch, yaw, roll in degrees; boxes ignore them.
    pub angles: Vec3,
    /// Which masks meet it (a trace skips the entity when `contents & mask`
    /// is 0). A box's brush is BODY whatever this says.
    pub contents: u32,
    /// The entity that owns it (a missile's shooter), or [`ENTITY_NONE`].
    pub owner: u32,
}

impl Entity {
    /// The default contents: SOLID for models, BODY for boxes.
    pub fn default_contents(shape: &EntityShape) -> u32 {
        match shape {
            EntityShape::Model(_) => crate::contents::CONTENTS_SOLID,
            EntityShape::Box { .. } => CONTENTS_BODY,
        }
    }
}

/// Why a scene was refused; `index` is the entity's position in the scene.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SceneError {
    #[error("entity {index}: id {id} is out of range (0 to {MAX_ENTITY_ID})")]
    IdOutOfRange { index: usize, id: u32 },
    #[error("entity {index}: id {id} is already used by entity {first}")]
    RepeatedId { index: usize, id: u32, first: usize },
    #[error("entity {index}: the map has no model *{model} (it has *1 to *{count})")]
    UnknownModel {
        index: usize,
        model: usize,
        count: usize,
    },
    #[error("entity {index}: {error}")]
    Invalid { index: usize, error: InvalidTrace },
    #[error("entity {index}: `owner` {owner} is not an entity id (0 to {MAX_ENTITY_ID}) or {ENTITY_NONE}")]
    BadOwner { index: usize, owner: u32 },
    #[error("more than {MAX_ENTITIES} entities")]
    TooMany,
    #[error("entity {index}: {reason}")]
    Malformed { index: usize, reason: String },
    #[error("entity {index}: its box model could not be built: {error}")]
    BoxModel { index: usize, error: String },
}

/// Entities checked on their own (ids in range and distinct, owners valid,
/// coordinates finite, boxes ordered); [`PlacedScene::new`] then checks them
/// against a map.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scene {
    entities: Vec<Entity>,
}

impl Scene {
    pub fn new(entities: Vec<Entity>) -> Result<Self, SceneError> {
        if entities.len() > MAX_ENTITIES {
            return Err(SceneError::TooMany);
        }
        let mut first_of = vec![usize::MAX; MAX_ENTITIES];
        for (index, e) in entities.iter().enumerate() {
            if e.id > MAX_ENTITY_ID {
                return Err(SceneError::IdOutOfRange { index, id: e.id });
            }
            let seen = &mut first_of[e.id as usize];
            if *seen != usize::MAX {
                return Err(SceneError::RepeatedId {
                    index,
                    id: e.id,
                    first: *seen,
                });
            }
            *seen = index;
            if e.owner > MAX_ENTITY_ID && e.owner != ENTITY_NONE {
                return Err(SceneError::BadOwner {
                    index,
                    owner: e.owner,
                });
            }
            let invalid = |error| SceneError::Invalid { index, error };
            checked_point("origin", e.origin).map_err(invalid)?;
            checked_point("angles", e.angles).map_err(invalid)?;
            if let EntityShape::Box { mins, maxs } = &e.shape {
                checked_point("mins", *mins).map_err(invalid)?;
                checked_point("maxs", *maxs).map_err(invalid)?;
                if mins.cmpgt(*maxs).any() {
                    return Err(invalid(InvalidTrace::MinsAboveMaxs));
                }
            }
        }
        Ok(Self { entities })
    }

    pub fn entities(&self) -> &[Entity] {
        &self.entities
    }

    pub fn len(&self) -> usize {
        self.entities.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }
}

/// A scene placed in one map and ready to trace: each entity's model
/// found, its rotation and bounds computed. The bounds are also kept four to
/// a record in SIMD lanes, so a query meets them four at a time and reads
/// only the entities it touches.
#[derive(Debug)]
pub struct PlacedScene<'m> {
    /// The world the scene is placed in.
    world: Kernel<'m>,
    entities: Vec<Placed<'m>>,
    /// Grown bounds, lane `k` of record `r` entity `4r + k`; padding lanes
    /// are empty (`lo` +∞, `hi` -∞) and meet nothing.
    lanes: Vec<BoundsLanes>,
}

#[derive(Debug, Clone, Copy)]
struct BoundsLanes {
    lo: [Vec4; 3],
    hi: [Vec4; 3],
}

impl BoundsLanes {
    fn of(entities: &[Placed]) -> Self {
        let lane = |f: &dyn Fn(&Placed) -> f32, empty: f32| {
            Vec4::from_array(std::array::from_fn(|k| entities.get(k).map_or(empty, f)))
        };
        let axis = |a: usize| {
            (
                lane(&|e: &Placed| e.absmin[a], f32::INFINITY),
                lane(&|e: &Placed| e.absmax[a], f32::NEG_INFINITY),
            )
        };
        let [(lx, hx), (ly, hy), (lz, hz)] = [axis(0), axis(1), axis(2)];
        BoundsLanes {
            lo: [lx, ly, lz],
            hi: [hx, hy, hz],
        }
    }

    /// Bit `k`: lane `k`'s bounds meet `lo..hi`.
    #[inline(always)]
    fn meeting(&self, lo: Vec3, hi: Vec3) -> u32 {
        let apart = self.lo[0].cmpgt(Vec4::splat(hi.x))
            | self.lo[1].cmpgt(Vec4::splat(hi.y))
            | self.lo[2].cmpgt(Vec4::splat(hi.z))
            | self.hi[0].cmplt(Vec4::splat(lo.x))
            | self.hi[1].cmplt(Vec4::splat(lo.y))
            | self.hi[2].cmplt(Vec4::splat(lo.z));
        !apart.bitmask() & 0xf
    }
}

#[derive(Debug)]
struct Placed<'m> {
    id: u32,
    owner: u32,
    contents: u32,
    origin: Vec3,
    target: Target<'m>,
    /// Into the model's frame (models with angles only).
    rotation: Option<Rotation>,
    /// World-frame bounds, grown by one unit.
    absmin: Vec3,
    absmax: Vec3,
}

#[derive(Debug)]
enum Target<'m> {
    /// Boxed: a kernel is a few hundred bytes, and entities are scanned.
    Model(Box<Kernel<'m>>),
    Box(Arc<Map>),
}

impl Target<'_> {
    fn with_kernel<R>(&self, f: impl FnOnce(&Kernel) -> R) -> R {
        match self {
            Target::Model(kernel) => f(kernel),
            Target::Box(map) => f(&map.view()),
        }
    }
}

impl<'m> PlacedScene<'m> {
    /// Places `scene` in `map` (its models must exist there).
    pub fn new(map: &'m Map, scene: &Scene) -> Result<Self, SceneError> {
        let entities: Vec<Placed> = scene
            .entities
            .iter()
            .enumerate()
            .map(|(index, e)| place(map, index, e))
            .collect::<Result<_, _>>()?;
        let lanes = entities.chunks(4).map(BoundsLanes::of).collect();
        Ok(Self {
            world: map.view(),
            entities,
            lanes,
        })
    }

    pub fn len(&self) -> usize {
        self.entities.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// The world the scene is placed in.
    pub fn world(&self) -> &Kernel<'m> {
        &self.world
    }

    /// The entities whose grown bounds meet `lo..hi`, in scene order.
    fn meeting(&self, lo: Vec3, hi: Vec3) -> impl Iterator<Item = &Placed<'m>> + '_ {
        self.lanes.iter().enumerate().flat_map(move |(r, lanes)| {
            let mut bits = lanes.meeting(lo, hi);
            std::iter::from_fn(move || {
                (bits != 0).then(|| {
                    let k = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    &self.entities[4 * r + k]
                })
            })
        })
    }

    /// The owner of entity `id` ([`ENTITY_NONE`] when it has none or is not
    /// in the scene).
    fn owner_of(&self, id: u32) -> u32 {
        if id == ENTITY_NONE {
            return ENTITY_NONE;
        }
        self.entities
            .iter()
            .find(|e| e.id == id)
            .map_or(ENTITY_NONE, |e| e.owner)
    }

    /// Traces `query` through the world and the scene; `pass` is the entity
    /// making the move ([`ENTITY_NONE`] for none). Returns the answer and
    /// the entity that gave it.
    pub fn trace(
        &self,
        query: &TraceQuery,
        pass: u32,
        scratch: &mut Scratch,
    ) -> (TraceResult, u32) {
        let answer = crate::trace::trace(&self.world, query, scratch);
        self.trace_after(answer, query, pass, scratch)
    }

    /// [`PlacedScene::trace`] given the world's answer to `query` (a hull
    /// trace gives it through the world's onion tree; entities then see the
    /// hull's box).
    pub fn trace_after(
        &self,
        mut answer: TraceResult,
        query: &TraceQuery,
        pass: u32,
        scratch: &mut Scratch,
    ) -> (TraceResult, u32) {
        let mut entity = if answer.fraction < 1.0 {
            ENTITY_WORLD
        } else {
            ENTITY_NONE
        };
        if answer.fraction == 0.0 {
            return (answer, entity);
        }
        let (boxmin, boxmax) = move_bounds(query);
        let pass_owner = self.owner_of(pass);
        for e in self.meeting(boxmin, boxmax) {
            if answer.allsolid {
                break;
            }
            if e.skipped(query.mask(), pass, pass_owner) {
                continue;
            }
            let found = e.trace(query, scratch);
            if found.allsolid {
                answer.allsolid = true;
            } else if found.startsolid {
                answer.startsolid = true;
            }
            if found.fraction < answer.fraction {
                let startsolid = answer.startsolid;
                answer = found;
                answer.startsolid |= startsolid;
                entity = e.id;
            }
        }
        (answer, entity)
    }

    /// Whether the trace touches anything in its mask, world or entity:
    /// exactly whether [`PlacedScene::trace`]'s fraction is below 1.
    pub fn any_hit(&self, query: &TraceQuery, pass: u32, scratch: &mut Scratch) -> bool {
        // The answer's fraction falls below 1 exactly when the world's or
        // one traced entity's does (all-solid comes with fraction 0); an
        // entity that only starts solid does not lower it.
        if crate::trace::any_hit(&self.world, query, scratch) {
            return true;
        }
        let (boxmin, boxmax) = move_bounds(query);
        let pass_owner = self.owner_of(pass);
        self.meeting(boxmin, boxmax).any(|e| {
            !e.skipped(query.mask(), pass, pass_owner) && e.trace(query, scratch).fraction < 1.0
        })
    }

    /// The contents at `p`: the world's OR, for every entity whose bounds
    /// hold `p` except `pass`, the contents of its model there (moved and
    /// rotated), or BODY inside a box (its faces count as inside). Masks,
    /// owners and the entities' own `contents` play no part.
    pub fn point_contents(&self, p: Vec3, pass: u32) -> u32 {
        let mut contents = crate::trace::point_contents(&self.world, p);
        for e in self.meeting(p, p) {
            if e.id == pass {
                continue;
            }
            let mut local = p - e.origin;
            if let Some(r) = &e.rotation {
                local = r.apply(local);
            }
            contents |= e
                .target
                .with_kernel(|k| crate::trace::point_contents(k, local));
        }
        contents
    }
}

impl Placed<'_> {
    /// The pass, owner and contents rules.
    fn skipped(&self, mask: u32, pass: u32, pass_owner: u32) -> bool {
        if pass != ENTITY_NONE
            && (self.id == pass
                || self.owner == pass
                || (pass_owner != ENTITY_NONE && self.owner == pass_owner))
        {
            return true;
        }
        self.contents & mask == 0
    }

    /// The query through this entity alone, answered in world coordinates.
    fn trace(&self, q: &TraceQuery, scratch: &mut Scratch) -> TraceResult {
        let local = self.local_query(q);
        let mut r = self
            .target
            .with_kernel(|k| crate::trace::trace(k, &local, scratch));
        if let (Some(rotation), true) = (&self.rotation, r.fraction != 1.0) {
            r.normal = rotation.unapply(r.normal);
        }
        r.endpos = q.start + r.fraction * (q.end - q.start);
        r
    }

    /// The move in the entity's frame: a box made symmetric about the traced
    /// point (as the reference does before it moves and rotates the move, so
    /// the kernel's own centring then changes nothing), moved by `-origin`,
    /// rotated. A shape keeps its bounds (its centre is its own).
    fn local_query(&self, q: &TraceQuery) -> TraceQuery {
        let offset = if q.shape.is_some() {
            Vec3::ZERO
        } else {
            (q.mins + q.maxs) * 0.5
        };
        let mut start = (q.start + offset) - self.origin;
        let mut end = (q.end + offset) - self.origin;
        if let Some(r) = &self.rotation {
            start = r.apply(start);
            end = r.apply(end);
        }
        TraceQuery {
            start,
            end,
            mins: q.mins - offset,
            maxs: q.maxs - offset,
            ..q.clone()
        }
    }
}

/// Bounds of everything the move sweeps, grown by one unit.
fn move_bounds(q: &TraceQuery) -> (Vec3, Vec3) {
    let grow = Vec3::ONE;
    (
        q.start.min(q.end) + q.mins - grow,
        q.start.max(q.end) + q.maxs + grow,
    )
}

/// Places one entity of a checked [`Scene`].
fn place<'m>(map: &'m Map, index: usize, e: &Entity) -> Result<Placed<'m>, SceneError> {
    let (origin, angles) = (e.origin, e.angles);
    let (target, rotation, mins, maxs) = match &e.shape {
        EntityShape::Model(model) => {
            let found = map.model(*model).ok_or(SceneError::UnknownModel {
                index,
                model: *model,
                count: map.models().len(),
            })?;
            let (lo, hi) = found.bounds();
            let rotation = Rotation::of(angles);
            let (mins, maxs) = if rotation.is_some() {
                // Any turn stays within the radius of the bounds' corners.
                let corner = lo.abs().max(hi.abs());
                let radius = Vec3::splat(corner.length());
                (-radius, radius)
            } else {
                (lo, hi)
            };
            (Target::Model(Box::new(found.view())), rotation, mins, maxs)
        }
        EntityShape::Box { mins, maxs } => {
            let (mins, maxs) = (*mins, *maxs);
            let model =
                boxes::box_model(mins, maxs).map_err(|error: LoadError| SceneError::BoxModel {
                    index,
                    error: error.to_string(),
                })?;
            (Target::Box(model), None, mins, maxs)
        }
    };
    Ok(Placed {
        id: e.id,
        owner: e.owner,
        contents: e.contents,
        origin,
        target,
        rotation,
        absmin: origin + mins - Vec3::ONE,
        absmax: origin + maxs + Vec3::ONE,
    })
}
