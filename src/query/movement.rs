//! Movement in the line format: `{"ground":{…}}`, `{"slide":{…}}` and
//! `{"predict":{…}}` lines, checked into [`crate::movement`] queries, and
//! their answers.

use super::{QueryError, TraceAnswer};
use crate::contents::MASK_PLAYERSOLID;
use crate::math::Vec3;
use crate::movement::{
    self, Body, Collider, Ground, GroundQuery, Motion, Moved, MovementError, PredictQuery,
    Prediction, SlideQuery, StopEvents,
};
use crate::trace::{Kernel, Scratch};
use serde::{Deserialize, Serialize};

/// The speed below which a prediction waiting for `blocked` stops, when
/// the line does not say (units/s).
pub const DEFAULT_BLOCKED_SPEED: f64 = 1.0;

/// `{"ground":{…}}`: the box (`mins`/`maxs`, or a registered `hull`)
/// traced from `origin` a quarter unit down.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GroundLine {
    pub origin: [f64; 3],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mins: Option<[f64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maxs: Option<[f64; 3]>,
    /// A registered onion hull instead of `mins`/`maxs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hull: Option<String>,
    /// Default MASK_PLAYERSOLID: what a player collides with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask: Option<u32>,
    /// The mover's own entity (with a scene).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass: Option<i64>,
}

/// `{"slide":{…}}`: one frame of the step-slide (or, `"step":false`, the
/// plain slide) move.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SlideLine {
    pub origin: [f64; 3],
    pub velocity: [f64; 3],
    pub frametime: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gravity: Option<i64>,
    /// The normal of the plane stood on; absent in the air.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ground: Option<[f64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mins: Option<[f64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maxs: Option<[f64; 3]>,
    /// A registered onion hull instead of `mins`/`maxs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hull: Option<String>,
    /// Default MASK_PLAYERSOLID: what a player collides with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask: Option<u32>,
    /// The mover's own entity (with a scene).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass: Option<i64>,
}

/// `{"predict":{…}}`: up to `ticks` frames, stopping at the first event of
/// `until`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PredictLine {
    pub origin: [f64; 3],
    pub velocity: [f64; 3],
    pub frametime: f64,
    pub ticks: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gravity: Option<i64>,
    /// Event names: `landed`, `left_ground`, `blocked`, `contents`, `fell`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Vec<String>>,
    /// `blocked`: the horizontal speed it waits to fall below.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_speed: Option<f64>,
    /// `contents`: the content flags the box waits to overlap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contents: Option<u32>,
    /// `fell`: the drop below the start it waits for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fall: Option<f64>,
    /// `true`: the answer lists the origin after every tick.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mins: Option<[f64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maxs: Option<[f64; 3]>,
    /// A registered onion hull instead of `mins`/`maxs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hull: Option<String>,
    /// Default MASK_PLAYERSOLID: what a player collides with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask: Option<u32>,
    /// The mover's own entity (with a scene).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass: Option<i64>,
}

/// A checked movement line.
#[derive(Debug, Clone, PartialEq)]
pub enum MovementQuery {
    Ground(GroundQuery),
    Slide(SlideQuery),
    Predict(PredictQuery),
}

fn point(v: [f64; 3]) -> Vec3 {
    Vec3::new(v[0] as f32, v[1] as f32, v[2] as f32)
}

/// The body a movement line describes (`mins`/`maxs` or `hull`, and
/// `mask`), its hull looked up in `world` (without a world, a hull line is
/// refused as trace lines are). The three lines repeat these fields rather
/// than share them through serde's `flatten`, which would let unknown
/// fields through.
fn body_of(
    mins: Option<[f64; 3]>,
    maxs: Option<[f64; 3]>,
    hull: Option<&str>,
    mask: Option<u32>,
    world: Option<&Kernel>,
) -> Result<Body, QueryError> {
    let mask = mask.unwrap_or(MASK_PLAYERSOLID);
    if let Some(name) = hull {
        if mins.is_some() || maxs.is_some() {
            return Err(QueryError::HullWithShape);
        }
        let Some(world) = world else {
            return Err(QueryError::UnknownHull(format!(
                "hull {name:?}: hull moves are answered against a loaded world only"
            )));
        };
        return Ok(Body::hull(world, name, mask)?);
    }
    let mins = mins.ok_or(QueryError::Missing("mins"))?;
    let maxs = maxs.ok_or(QueryError::Missing("maxs"))?;
    Ok(Body::boxed(point(mins), point(maxs), mask)?)
}

fn motion(origin: [f64; 3], velocity: [f64; 3]) -> Motion {
    Motion {
        origin: point(origin),
        velocity: point(velocity),
    }
}

fn gravity(g: Option<i64>) -> Result<u32, MovementError> {
    u32::try_from(g.unwrap_or(0)).map_err(|_| MovementError::BadGravity)
}

impl GroundLine {
    pub fn query(&self, world: Option<&Kernel>) -> Result<MovementQuery, QueryError> {
        let body = body_of(self.mins, self.maxs, self.hull.as_deref(), self.mask, world)?;
        Ok(MovementQuery::Ground(GroundQuery::new(
            point(self.origin),
            body,
        )?))
    }
}

impl SlideLine {
    pub fn query(&self, world: Option<&Kernel>) -> Result<MovementQuery, QueryError> {
        let body = body_of(self.mins, self.maxs, self.hull.as_deref(), self.mask, world)?;
        let query = SlideQuery::new(
            motion(self.origin, self.velocity),
            self.frametime as f32,
            body,
        )?
        .with_gravity(gravity(self.gravity)?)?
        .with_ground(self.ground.map(point))?
        .with_step(self.step.unwrap_or(true));
        Ok(MovementQuery::Slide(query))
    }
}

impl PredictLine {
    pub fn query(&self, world: Option<&Kernel>) -> Result<MovementQuery, QueryError> {
        let body = body_of(self.mins, self.maxs, self.hull.as_deref(), self.mask, world)?;
        let ticks = u32::try_from(self.ticks).map_err(|_| MovementError::BadTicks)?;
        let query = PredictQuery::new(
            motion(self.origin, self.velocity),
            self.frametime as f32,
            body,
            ticks,
        )?
        .with_gravity(gravity(self.gravity)?)?
        .with_stops(self.stops()?)?
        .with_path(self.path.unwrap_or(false));
        Ok(MovementQuery::Predict(query))
    }

    /// The events of `until`, each with its parameter; a parameter whose
    /// event is not awaited is refused rather than ignored.
    fn stops(&self) -> Result<StopEvents, MovementError> {
        let bad = |m: String| MovementError::BadStop(m);
        let mut stops = StopEvents::default();
        for name in self.until.iter().flatten() {
            match name.as_str() {
                "landed" => stops.landed = true,
                "left_ground" => stops.left_ground = true,
                "blocked" => {
                    let speed = self.blocked_speed.unwrap_or(DEFAULT_BLOCKED_SPEED);
                    stops.blocked_below = Some(speed as f32);
                }
                "contents" => {
                    let mask = self.contents.ok_or_else(|| {
                        bad("`until` \"contents\" needs `contents` (the flags to wait for)".into())
                    })?;
                    stops.contents = Some(mask);
                }
                "fell" => {
                    let fall = self.fall.ok_or_else(|| {
                        bad("`until` \"fell\" needs `fall` (the drop in units)".into())
                    })?;
                    stops.fell = Some(fall as f32);
                }
                other => {
                    return Err(bad(format!(
                        "`until`: unknown event {other:?} (landed, left_ground, blocked, contents, fell)"
                    )))
                }
            }
        }
        let unused = |field: &str, event: &str| {
            bad(format!(
                "`{field}` is given but `until` does not hold {event:?}"
            ))
        };
        if self.blocked_speed.is_some() && stops.blocked_below.is_none() {
            return Err(unused("blocked_speed", "blocked"));
        }
        if self.contents.is_some() && stops.contents.is_none() {
            return Err(unused("contents", "contents"));
        }
        if self.fall.is_some() && stops.fell.is_none() {
            return Err(unused("fall", "fell"));
        }
        Ok(stops)
    }
}

/// The answer to a `ground` line: the trace's fields and `walkable`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GroundAnswer {
    #[serde(flatten)]
    pub trace: TraceAnswer,
    pub walkable: bool,
}

/// The answer to a `slide` line.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SlideAnswer {
    pub origin: [f32; 3],
    pub velocity: [f32; 3],
    /// The plain slide move only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked: Option<bool>,
    pub stepped: f32,
    pub ground: GroundAnswer,
}

/// The answer to a `predict` line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PredictAnswer {
    /// What stopped it: an event of `until`, `ticks` (the limit) or
    /// `out_of_range`.
    pub event: String,
    /// Ticks run (the event happened in the last).
    pub tick: u32,
    pub origin: [f32; 3],
    pub velocity: [f32; 3],
    pub on_ground: bool,
    pub ground: GroundAnswer,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<Vec<[f32; 3]>>,
}

impl GroundAnswer {
    fn of(probe: &Ground, in_scene: bool) -> Self {
        Self {
            trace: TraceAnswer {
                entity: in_scene.then_some(probe.entity),
                ..TraceAnswer::from(&probe.trace)
            },
            walkable: probe.walkable,
        }
    }
}

impl SlideAnswer {
    fn of(moved: &Moved, in_scene: bool) -> Self {
        Self {
            origin: moved.motion.origin.to_array(),
            velocity: moved.motion.velocity.to_array(),
            blocked: moved.blocked,
            stepped: moved.stepped,
            ground: GroundAnswer::of(&moved.ground, in_scene),
        }
    }
}

impl PredictAnswer {
    fn of(p: &Prediction, record_path: bool, in_scene: bool) -> Self {
        Self {
            event: p.event.name().to_owned(),
            tick: p.tick,
            origin: p.motion.origin.to_array(),
            velocity: p.motion.velocity.to_array(),
            on_ground: p.on_ground,
            ground: GroundAnswer::of(&p.ground, in_scene),
            path: record_path.then(|| p.path.iter().map(|o| o.to_array()).collect()),
        }
    }
}

/// Answers a movement query through `collider`.
pub fn answer_movement(
    collider: &impl Collider,
    scratch: &mut Scratch,
    query: &MovementQuery,
) -> super::Answer {
    let in_scene = collider.has_scene();
    match query {
        MovementQuery::Ground(q) => super::Answer::Ground(GroundAnswer::of(
            &movement::ground(collider, q.body(), q.origin(), scratch),
            in_scene,
        )),
        MovementQuery::Slide(q) => super::Answer::Slide(SlideAnswer::of(
            &movement::slide(collider, q, scratch),
            in_scene,
        )),
        MovementQuery::Predict(q) => super::Answer::Predict(Box::new(PredictAnswer::of(
            &movement::predict(collider, q, scratch),
            q.record_path(),
            in_scene,
        ))),
    }
}
