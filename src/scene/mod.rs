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
mod broadphase;
#[cfg(test)]
mod lone_brush_tests;
mod rotation;

pub use rotation::Rotation;

use crate::contents::CONTENTS_BODY;
use crate::map::{LoadError, Map};
use crate::margins::ENTITY_STOP_MARGIN;
use crate::math::Vec3;
#[cfg(target_arch = "x86_64")]
use crate::trace::accel::bvh::Avx2;
use crate::trace::{
    checked_point, BoxSweep, InvalidTrace, Kernel, LoneAxial, LoneBrush, LoneClip, Scratch,
    TraceQuery, TraceResult,
};
use broadphase::{Broadphase, Candidates};
use glam::Vec3A;
use std::ops::ControlFlow;
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
/// found, its rotation and bounds computed, the bounds indexed
/// ([`broadphase`]) so that a query reads only the entities near it.
#[derive(Debug)]
pub struct PlacedScene<'m> {
    /// The world the scene is placed in.
    world: Kernel<'m>,
    entities: Vec<Placed<'m>>,
    /// What a box's or ray's move reads of each entity, in scene order
    /// ([`Hot`]).
    hot: Vec<Hot>,
    broadphase: Broadphase,
    /// Where the processor has AVX2: the entity loop is compiled for it too
    /// ([`Avx2`]).
    #[cfg(target_arch = "x86_64")]
    avx2: Option<Avx2>,
    /// Entity `id`'s owner at `id` ([`ENTITY_NONE`] for none, or no such
    /// entity): a query's `pass` is looked up once per trace.
    owners: Vec<u32>,
}

#[derive(Debug)]
struct Placed<'m> {
    id: u32,
    owner: u32,
    contents: u32,
    origin: Vec3A,
    target: Target<'m>,
    /// The target's one brush, when it has one only (a box; most models):
    /// rays and boxes are clipped against it directly.
    lone: Option<LoneBrush>,
    /// Into the model's frame (models with angles only).
    rotation: Option<Rotation>,
    /// World-frame bounds, grown by one unit.
    absmin: Vec3A,
    absmax: Vec3A,
}

#[derive(Debug)]
enum Target<'m> {
    /// Boxed: a kernel is a few hundred bytes, and entities are scanned.
    Model(Box<Kernel<'m>>),
    /// The box's world of one brush.
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
        let bounds: Vec<(Vec3, Vec3)> = entities
            .iter()
            .map(|e| (e.absmin.into(), e.absmax.into()))
            .collect();
        let ids = entities
            .iter()
            .map(|e| e.id as usize + 1)
            .max()
            .unwrap_or(0);
        let mut owners = vec![ENTITY_NONE; ids];
        for e in &entities {
            if let Some(owner) = owners.get_mut(e.id as usize) {
                *owner = e.owner;
            }
        }
        Ok(Self {
            owners,
            hot: entities.iter().map(Hot::of).collect(),
            world: map.view(),
            broadphase: Broadphase::new(&bounds),
            #[cfg(target_arch = "x86_64")]
            avx2: Avx2::detect(),
            entities,
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

    /// Calls `visit` with each entity whose grown bounds meet `lo..hi`, in
    /// scene order, until it breaks.
    #[inline(always)]
    fn meeting<B>(
        &self,
        lo: Vec3,
        hi: Vec3,
        mut visit: impl FnMut(&Placed<'m>) -> ControlFlow<B>,
    ) -> ControlFlow<B> {
        self.broadphase
            .meeting(lo, hi, |i| match self.entities.get(i) {
                Some(e) => visit(e),
                None => ControlFlow::Continue(()),
            })
    }

    /// The owner of entity `id` ([`ENTITY_NONE`] when it has none or is not
    /// in the scene).
    fn owner_of(&self, id: u32) -> u32 {
        self.owners.get(id as usize).copied().unwrap_or(ENTITY_NONE)
    }

    /// Traces `query` through the world and the scene; `pass` is the entity
    /// making the move ([`ENTITY_NONE`] for none). Returns the answer and
    /// the entity that gave it. (Inline: a caller tracing many queries
    /// keeps the world's answer where it is, with no frame around it.)
    #[inline]
    pub fn trace(
        &self,
        query: &TraceQuery,
        pass: u32,
        scratch: &mut Scratch,
    ) -> (TraceResult, u32) {
        let answer = crate::trace::trace(&self.world, query, scratch);
        self.entities_after(answer, query, pass, scratch)
    }

    /// [`PlacedScene::trace`] given the world's answer to `query` (a hull
    /// trace gives it through the world's onion tree; entities then see the
    /// hull's box).
    pub fn trace_after(
        &self,
        answer: TraceResult,
        query: &TraceQuery,
        pass: u32,
        scratch: &mut Scratch,
    ) -> (TraceResult, u32) {
        self.entities_after(answer, query, pass, scratch)
    }

    /// The world's `answer` combined with the entities':
    /// [`PlacedScene::trace_after`]. (The answer is moved into a place of
    /// its own only when an entity may change it: a move that meets none
    /// returns the world's answer as it was written.)
    #[inline(always)]
    fn entities_after(
        &self,
        answer: TraceResult,
        query: &TraceQuery,
        pass: u32,
        scratch: &mut Scratch,
    ) -> (TraceResult, u32) {
        let entity = if answer.fraction < 1.0 {
            ENTITY_WORLD
        } else {
            ENTITY_NONE
        };
        if answer.fraction == 0.0 {
            return (answer, entity);
        }
        let (lo, hi) = move_bounds(query);
        // Most moves meet no entity: they pay this look-up only.
        match self.broadphase.candidates(lo, hi) {
            None => (answer, entity),
            Some(Candidates::Small(bits)) => {
                let mut found = (answer, entity);
                self.clip_entities(bits, (lo, hi), &mut found, query, pass, scratch);
                found
            }
            Some(Candidates::Large) => {
                let mut found = (answer, entity);
                self.clip_entities_large((lo, hi), &mut found, query, pass, scratch);
                found
            }
        }
    }

    /// The entities of `candidates` (bit `i`: entity `i`, a small scene's
    /// [`Candidates`]) whose bounds meet the move's, combined in scene order
    /// into `found` (the answer so far and the entity that gave it). (Kept
    /// out of line: most moves meet no entity, and the caller then stays
    /// small.)
    #[inline(never)]
    fn clip_entities(
        &self,
        candidates: u128,
        bounds: (Vec3A, Vec3A),
        found: &mut (TraceResult, u32),
        query: &TraceQuery,
        pass: u32,
        scratch: &mut Scratch,
    ) {
        #[cfg(target_arch = "x86_64")]
        if let Some(avx2) = self.avx2 {
            return clip_entities_avx2(avx2, self, candidates, bounds, found, query, pass, scratch);
        }
        self.clip_entities_in(candidates, bounds, found, query, pass, scratch)
    }

    /// [`PlacedScene::clip_entities`], compiled for the processor at hand.
    #[inline(always)]
    fn clip_entities_in(
        &self,
        candidates: u128,
        (lo, hi): (Vec3A, Vec3A),
        found: &mut (TraceResult, u32),
        query: &TraceQuery,
        pass: u32,
        scratch: &mut Scratch,
    ) {
        // The move is set up at the first candidate that meets it: some
        // moves' candidates from the slabs all miss it.
        let mut rest = candidates;
        let mut next = || {
            let i = (rest != 0).then(|| rest.trailing_zeros() as usize);
            rest &= rest.wrapping_sub(1);
            i
        };
        // (Nor do those whose only candidates the rules leave out: a
        // player's moves meet the player's own box.)
        let pass_owner = self.owner_of(pass);
        let first = loop {
            let Some(i) = next() else {
                return;
            };
            if self.hot.get(i).is_some_and(|h| {
                h.meets(lo, hi)
                    && !skipped(h.id, h.owner, h.contents, query.mask(), pass, pass_owner)
            }) {
                break i;
            }
        };
        let mv = Move::new(query, pass, pass_owner, found.0.fraction, (lo, hi));
        if query.shape.is_some() {
            // A shape: every entity's answer in full.
            let mut i = first;
            loop {
                if let (Some(e), Some(h)) = (self.entities.get(i), self.hot.get(i)) {
                    if h.meets(lo, hi) && clip_entity(e, found, &mv, scratch).is_break() {
                        return;
                    }
                }
                let Some(after) = next() else {
                    return;
                };
                i = after;
            }
        }
        let mut i = first;
        loop {
            // The unturned one-brush axial entities met by a box or a ray
            // (the players, most movers), without a call in the loop (all
            // vector registers are the callee's to use): their answers are
            // kept as the clips that gave them and written out at the end.
            let mut state = Combined::of(&found.0);
            let slow = loop {
                let Some(h) = self.hot.get(i) else {
                    break None;
                };
                match fast_clip(h, &mv) {
                    Some(Step::Clipped(clip)) => {
                        if state.combine(i, clip) {
                            break None;
                        }
                    }
                    Some(Step::Skipped) => {}
                    None => break Some(i),
                }
                match next() {
                    Some(after) => i = after,
                    None => break None,
                }
            };
            state.write(self, found, query);
            let Some(slow) = slow else {
                return;
            };
            // Any other entity, or a move that does not move in one's
            // frame: its answer in full, combined into what is written.
            if let (Some(e), Some(h)) = (self.entities.get(slow), self.hot.get(slow)) {
                if h.meets(lo, hi) && clip_full(e, found, mv, scratch).is_break() {
                    return;
                }
            }
            let Some(after) = next() else {
                return;
            };
            i = after;
        }
    }

    /// [`PlacedScene::clip_entities`] in a large scene.
    #[inline(never)]
    fn clip_entities_large(
        &self,
        (lo, hi): (Vec3A, Vec3A),
        found: &mut (TraceResult, u32),
        query: &TraceQuery,
        pass: u32,
        scratch: &mut Scratch,
    ) {
        let mv = Move::new(query, pass, self.owner_of(pass), found.0.fraction, (lo, hi));
        let _ = self.meeting(lo.into(), hi.into(), |e| {
            clip_entity(e, found, &mv, scratch)
        });
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
        let (lo, hi) = move_bounds(query);
        let pass_owner = self.owner_of(pass);
        self.meeting(lo.into(), hi.into(), |e| {
            if !e.skipped(query.mask(), pass, pass_owner) && e.trace(query, scratch).fraction < 1.0
            {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .is_break()
    }

    /// The contents at `p`: the world's OR, for every entity whose bounds
    /// hold `p` except `pass`, the contents of its model there (moved and
    /// rotated), or BODY inside a box (its faces count as inside). Masks,
    /// owners and the entities' own `contents` play no part.
    pub fn point_contents(&self, p: Vec3, pass: u32) -> u32 {
        let mut contents = crate::trace::point_contents(&self.world, p);
        let _ = self.meeting(p, p, |e| {
            if e.id != pass {
                let mut local = p - Vec3::from(e.origin);
                if let Some(r) = &e.rotation {
                    local = r.apply(local);
                }
                contents |= e
                    .target
                    .with_kernel(|k| crate::trace::point_contents(k, local));
            }
            ControlFlow::<()>::Continue(())
        });
        contents
    }
}

/// A move's set-up shared by every entity it meets.
#[derive(Clone, Copy)]
struct Move<'q> {
    query: &'q TraceQuery,
    pass: u32,
    /// `pass`'s owner.
    pass_owner: u32,
    /// [`stop_bounds`] of the world's answer.
    stop: (Vec3A, Vec3A),
    /// The move's start and end moved by the box's centre: a box is made
    /// symmetric about it before it is moved into an entity's frame.
    start: Vec3A,
    end: Vec3A,
    /// The symmetric box, for one-brush entities.
    sweep: BoxSweep,
}

impl<'q> Move<'q> {
    /// `query` made by `pass` (owned by `pass_owner`), which the world
    /// stops at `fraction`; `bounds` are the whole move's ([`move_bounds`]).
    #[inline(always)]
    fn new(
        query: &'q TraceQuery,
        pass: u32,
        pass_owner: u32,
        fraction: f32,
        bounds: (Vec3A, Vec3A),
    ) -> Self {
        let centre = (query.mins + query.maxs) * 0.5;
        Move {
            query,
            pass,
            pass_owner,
            stop: stop_bounds(query, fraction, bounds),
            start: (query.start + centre).into(),
            end: (query.end + centre).into(),
            sweep: BoxSweep::new(query.mins - centre, query.maxs - centre, query.mask),
        }
    }
}

/// [`PlacedScene::clip_entities`] compiled for AVX2 and BMI1, which the
/// kernel's proof ([`Avx2`]) vouches for. It answers as the baseline build
/// does, operation for operation (Rust never fuses a multiply-add unasked),
/// in fewer instructions: the three-operand forms spare the register copies
/// and spills of the loop's many vectors.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn clip_entities_avx2(
    _proof: Avx2,
    scene: &PlacedScene,
    candidates: u128,
    bounds: (Vec3A, Vec3A),
    found: &mut (TraceResult, u32),
    query: &TraceQuery,
    pass: u32,
    scratch: &mut Scratch,
) {
    #[target_feature(enable = "avx2,bmi1")]
    unsafe fn with_avx2(
        scene: &PlacedScene,
        candidates: u128,
        bounds: (Vec3A, Vec3A),
        found: &mut (TraceResult, u32),
        query: &TraceQuery,
        pass: u32,
        scratch: &mut Scratch,
    ) {
        scene.clip_entities_in(candidates, bounds, found, query, pass, scratch)
    }
    // SAFETY: an `Avx2` exists only where `Avx2::detect` found AVX2 and
    // BMI1 among the features it checks, which `with_avx2` is compiled for.
    unsafe { with_avx2(scene, candidates, bounds, found, query, pass, scratch) }
}

/// What a box's or ray's move reads of an entity, in three adjacent cache
/// lines: its bounds and the pass and contents rules' fields, and, for an
/// unturned entity of one axial brush, what its clip reads. (The entity's
/// own record spans six lines; a move that met an entity read most of them.)
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Hot {
    /// World-frame bounds, grown by one unit ([`Placed`]).
    absmin: Vec3A,
    absmax: Vec3A,
    origin: Vec3A,
    id: u32,
    owner: u32,
    contents: u32,
    /// The lone brush's contents where `axial` is set, else 0 (read
    /// first, on the bounds' line: an entity traced in full).
    brush_contents: u32,
    /// The lone brush as an axial box, for an unturned entity whose only
    /// brush is one; `None` for any other entity, traced in full.
    axial: Option<LoneAxial>,
}

impl Hot {
    fn of(e: &Placed) -> Self {
        let axial = match (&e.lone, &e.rotation) {
            (Some(brush), None) => brush.axial().copied(),
            _ => None,
        };
        Hot {
            absmin: e.absmin,
            absmax: e.absmax,
            origin: e.origin,
            id: e.id,
            owner: e.owner,
            contents: e.contents,
            brush_contents: match (&e.lone, &axial) {
                (Some(brush), Some(_)) => brush.contents(),
                _ => 0,
            },
            axial,
        }
    }

    /// Whether the bounds meet `lo..hi` (touching counts).
    #[inline(always)]
    fn meets(&self, lo: Vec3A, hi: Vec3A) -> bool {
        !(self.absmin.cmpgt(hi) | self.absmax.cmplt(lo)).any()
    }
}

/// What [`fast_clip`] did with an entity.
enum Step {
    /// The rules or the bounds left it out, or its brush is not in the
    /// mask (a miss, which changes nothing).
    Skipped,
    Clipped(LoneClip),
}

/// [`clip_entity`] of an unturned one-axial-brush entity `h` met by a box
/// or a ray (not a shape), whose clip is returned rather than combined;
/// `None` for any other entity, a move that does not move in the entity's
/// frame (a position test) or one whose fractions are not exact in `f32`
/// ([`LoneAxial::clip_exact`]), which are traced in full. The same
/// tests and numbers: the move's bounds are not tested apart, as the
/// bounds where the world stopped it lie within them.
#[inline(always)]
fn fast_clip(h: &Hot, mv: &Move) -> Option<Step> {
    // (A brush without contents is never met: traced in full, it changes
    // nothing either.)
    if h.brush_contents == 0 {
        return None;
    }
    let (stop_lo, stop_hi) = mv.stop;
    let mask = mv.sweep.mask();
    if !h.meets(stop_lo, stop_hi)
        || skipped(h.id, h.owner, h.contents, mask, mv.pass, mv.pass_owner)
        || h.brush_contents & mask == 0
    {
        return Some(Step::Skipped);
    }
    let axial = h.axial.as_ref()?;
    // [`LoneBrush::clip`]'s points: the move's centre in the entity's frame,
    // then moved by the symmetric box's offset.
    let offset = mv.sweep.offset();
    let start = (mv.start - h.origin) + offset;
    let end = (mv.end - h.origin) + offset;
    if start.cmpeq(end).all() {
        return None;
    }
    // (A fraction the clip would take in `f64`: the entity is traced in
    // full.)
    axial.clip_exact(&mv.sweep, start, end).map(Step::Clipped)
}

/// The answer so far as [`combine`] leaves it, for the entities of
/// [`fast_clip`]: the fraction and solid flags, and the entity whose clip
/// replaced the answer last, written out once at the end.
struct Combined {
    fraction: f32,
    startsolid: bool,
    allsolid: bool,
    /// The entity's index and clip, or `None` for the answer as it was.
    winner: Option<(usize, LoneClip)>,
}

impl Combined {
    #[inline(always)]
    fn of(answer: &TraceResult) -> Self {
        Combined {
            fraction: answer.fraction,
            startsolid: answer.startsolid,
            allsolid: answer.allsolid,
            winner: None,
        }
    }

    /// [`combine`] of entity `index`'s `clip`; whether the answer is now
    /// all-solid (no later entity can change it).
    #[inline(always)]
    fn combine(&mut self, index: usize, clip: LoneClip) -> bool {
        let fraction = clip.fraction();
        let (startsolid, allsolid) = clip.solid();
        if allsolid {
            self.allsolid = true;
        } else if startsolid {
            self.startsolid = true;
        }
        if fraction < self.fraction {
            // The clip's answer has the clip's flags, and keeps an earlier
            // `startsolid`; `allsolid` was false before it.
            self.fraction = fraction;
            self.startsolid |= startsolid;
            self.winner = Some((index, clip));
        }
        self.allsolid
    }

    /// Writes the answer into `found`: the winner's in full (as
    /// [`clip_entity`] writes it), the flags.
    #[inline(always)]
    fn write(&self, scene: &PlacedScene, found: &mut (TraceResult, u32), q: &TraceQuery) {
        if let Some((index, clip)) = self.winner {
            if let Some(e) = scene.entities.get(index) {
                if let Some(brush) = &e.lone {
                    found.0 = e.finish(brush.result(clip), q);
                    found.1 = e.id;
                }
            }
        }
        found.0.startsolid = self.startsolid;
        found.0.allsolid = self.allsolid;
    }
}

/// One entity the move meets, combined into `found` (the answer so far and
/// the entity that gave it).
#[inline(always)]
fn clip_entity(
    e: &Placed,
    found: &mut (TraceResult, u32),
    mv: &Move,
    scratch: &mut Scratch,
) -> ControlFlow<()> {
    if found.0.allsolid {
        return ControlFlow::Break(());
    }
    let q = mv.query;
    if e.skipped(q.mask(), mv.pass, mv.pass_owner) {
        return ControlFlow::Continue(());
    }
    // An entity the move only meets past where the world stopped it can
    // neither stop it sooner nor hold its start. (Not for turned models:
    // their box is turned with the move, so it may reach beyond the
    // world-frame box.)
    let (stop_lo, stop_hi) = mv.stop;
    if e.rotation.is_none() && (e.absmin.cmpgt(stop_hi) | e.absmax.cmplt(stop_lo)).any() {
        return ControlFlow::Continue(());
    }
    match (&e.lone, &q.shape, &e.rotation) {
        // Most entities a move meets (players, most movers): one brush,
        // not turned, met by a box; its answer is written out only when
        // it is taken. ([`Placed::local_move`] of the box's centre, the
        // same numbers.)
        (Some(brush), None, None) => {
            let clip = brush.clip(&mv.sweep, mv.start - e.origin, mv.end - e.origin);
            let (startsolid, allsolid) = clip.solid();
            combine(found, e.id, clip.fraction(), startsolid, allsolid, || {
                e.finish(brush.result(clip), q)
            });
        }
        _ => clip_other(e, found, q, scratch),
    }
    ControlFlow::Continue(())
}

/// [`clip_entity`] out of the loop over the entities a box or a ray meets.
/// (The move by value: its copy is made here, not before that loop.)
#[inline(never)]
fn clip_full(
    e: &Placed,
    found: &mut (TraceResult, u32),
    mv: Move,
    scratch: &mut Scratch,
) -> ControlFlow<()> {
    clip_entity(e, found, &mv, scratch)
}

/// [`clip_entity`] of any other entity or query: its answer in full.
#[inline(never)]
fn clip_other(e: &Placed, found: &mut (TraceResult, u32), q: &TraceQuery, scratch: &mut Scratch) {
    let r = e.trace(q, scratch);
    combine(found, e.id, r.fraction, r.startsolid, r.allsolid, || r);
}

/// The answer so far and the entity that gave it (`found`) combined with
/// entity `id`'s answer, of which `fraction`, `startsolid` and `allsolid`
/// are given and the rest is written by `answer` if it is taken.
#[inline(always)]
fn combine(
    (answer, entity): &mut (TraceResult, u32),
    id: u32,
    fraction: f32,
    startsolid: bool,
    allsolid: bool,
    full: impl FnOnce() -> TraceResult,
) {
    if allsolid {
        answer.allsolid = true;
    } else if startsolid {
        answer.startsolid = true;
    }
    if fraction < answer.fraction {
        let startsolid = answer.startsolid;
        *answer = full();
        answer.startsolid |= startsolid;
        *entity = id;
    }
}

impl Placed<'_> {
    /// The pass, owner and contents rules.
    fn skipped(&self, mask: u32, pass: u32, pass_owner: u32) -> bool {
        skipped(self.id, self.owner, self.contents, mask, pass, pass_owner)
    }

    /// The query through this entity alone, answered in world coordinates.
    fn trace(&self, q: &TraceQuery, scratch: &mut Scratch) -> TraceResult {
        let r = match (&self.lone, &q.shape) {
            (Some(brush), None) => {
                let (start, end, offset) = self.local_move(q, (q.mins + q.maxs) * 0.5);
                brush.trace_box(start, end, q.mins - offset, q.maxs - offset, q.mask)
            }
            _ => {
                let local = self.local_query(q);
                self.target
                    .with_kernel(|k| crate::trace::trace(k, &local, scratch))
            }
        };
        self.finish(r, q)
    }

    /// An answer in the entity's frame (no `endpos`) turned back into the
    /// world's, its `endpos` along `q`'s move.
    #[inline(always)]
    fn finish(&self, mut r: TraceResult, q: &TraceQuery) -> TraceResult {
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
        let (start, end, offset) = self.local_move(q, offset);
        TraceQuery {
            start,
            end,
            mins: q.mins - offset,
            maxs: q.maxs - offset,
            ..q.clone()
        }
    }

    /// The start and end of `q`'s traced point moved by `offset` (the box's
    /// centre), in the entity's frame; and `offset`.
    #[inline(always)]
    fn local_move(&self, q: &TraceQuery, offset: Vec3) -> (Vec3, Vec3, Vec3) {
        let origin = Vec3::from(self.origin);
        let mut start = (q.start + offset) - origin;
        let mut end = (q.end + offset) - origin;
        if let Some(r) = &self.rotation {
            start = r.apply(start);
            end = r.apply(end);
        }
        (start, end, offset)
    }
}

/// The pass, owner and contents rules: whether entity `id` (owned by
/// `owner`, of `contents`) is left out of a move colliding with `mask` made
/// by `pass` (owned by `pass_owner`).
#[inline(always)]
fn skipped(id: u32, owner: u32, contents: u32, mask: u32, pass: u32, pass_owner: u32) -> bool {
    if pass != ENTITY_NONE
        && (id == pass || owner == pass || (pass_owner != ENTITY_NONE && owner == pass_owner))
    {
        return true;
    }
    contents & mask == 0
}

/// Bounds of what the move sweeps until `fraction` of the way (where the
/// world stops it), grown by [`ENTITY_STOP_MARGIN`] beyond the one unit of
/// [`move_bounds`], within [`move_bounds`] (`lo..hi`).
#[inline(always)]
fn stop_bounds(q: &TraceQuery, fraction: f32, (lo, hi): (Vec3A, Vec3A)) -> (Vec3A, Vec3A) {
    // (Both computed and one selected: whether the world stopped the move
    // is as likely as not, and a branch on it was mispredicted as often.)
    let (start, end) = (Vec3A::from(q.start), Vec3A::from(q.end));
    let stop = start + fraction * (end - start);
    let grow = Vec3A::splat(1.0 + ENTITY_STOP_MARGIN);
    let whole = Vec3A::splat(fraction).cmpge(Vec3A::ONE);
    (
        Vec3A::select(
            whole,
            lo,
            (start.min(stop) + Vec3A::from(q.mins) - grow).max(lo),
        ),
        Vec3A::select(
            whole,
            hi,
            (start.max(stop) + Vec3A::from(q.maxs) + grow).min(hi),
        ),
    )
}

/// Bounds of everything the move sweeps, grown by one unit.
#[inline(always)]
fn move_bounds(q: &TraceQuery) -> (Vec3A, Vec3A) {
    let (start, end) = (Vec3A::from(q.start), Vec3A::from(q.end));
    let grow = Vec3A::ONE;
    (
        start.min(end) + Vec3A::from(q.mins) - grow,
        start.max(end) + Vec3A::from(q.maxs) + grow,
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
    let lone = target.with_kernel(LoneBrush::of);
    Ok(Placed {
        lone,
        id: e.id,
        owner: e.owner,
        contents: e.contents,
        origin: origin.into(),
        target,
        rotation,
        absmin: (origin + mins - Vec3::ONE).into(),
        absmax: (origin + maxs + Vec3::ONE).into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The owners table answers as a scan of the entities: every id, with
    /// ids missing from the scene, owners and none.
    #[test]
    fn the_owner_of_an_id_is_the_scans() {
        let world = boxes::box_model(Vec3::splat(-8.0), Vec3::splat(8.0)).unwrap();
        let mut rng = fastrand::Rng::with_seed(0x0e1e);
        for count in [0, 1, 5, 64, 300] {
            let mut ids: Vec<u32> = (0..=MAX_ENTITY_ID).collect();
            rng.shuffle(&mut ids);
            let entities: Vec<Entity> = ids[..count]
                .iter()
                .map(|&id| Entity {
                    id,
                    shape: EntityShape::Box {
                        mins: Vec3::splat(-1.0),
                        maxs: Vec3::splat(1.0),
                    },
                    origin: Vec3::ZERO,
                    angles: Vec3::ZERO,
                    contents: CONTENTS_BODY,
                    owner: if rng.bool() {
                        ENTITY_NONE
                    } else {
                        rng.u32(..=MAX_ENTITY_ID)
                    },
                })
                .collect();
            let scene = Scene::new(entities.clone()).unwrap();
            let placed = PlacedScene::new(&world, &scene).unwrap();
            for id in (0..=ENTITY_NONE).chain([u32::MAX]) {
                let scan = entities
                    .iter()
                    .find(|e| e.id == id)
                    .map_or(ENTITY_NONE, |e| e.owner);
                assert_eq!(placed.owner_of(id), scan, "{count} entities, id {id}");
            }
        }
    }
}
