//! Prediction: a body's movement tick after tick, each tick one ground probe
//! and one step-slide move, until something the caller waits for happens.

use super::body::{Body, Collider};
use super::ground::{ground, Ground};
use super::query::{MovementError, PredictQuery, MAX_MOVE_ORIGIN, MAX_SPEED};
use super::slide::Frame;
use super::step::step_motion;
use super::vector::{clip_velocity, dot, length, normalized, scaled};
use super::Motion;
use crate::math::Vec3;
use crate::trace::Scratch;

/// A body moving up and away from the plane under it faster than this
/// (units/s) has left it (a jump), though the probe still touches it.
const LEAVING_GROUND_SPEED: f32 = 10.0;

/// The events that end a prediction before its tick limit. Each tick's
/// events are looked for in the order of the fields.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StopEvents {
    /// From the air onto walkable ground.
    pub landed: bool,
    /// From walkable ground into the air (walked off a ledge, or jumped).
    pub left_ground: bool,
    /// The horizontal speed fell below this many units/s.
    pub blocked_below: Option<f32>,
    /// The box overlaps something whose contents meet this mask (water,
    /// lava, a trigger).
    pub contents: Option<u32>,
    /// The origin is more than this many units below where it started.
    pub fell: Option<f32>,
}

impl StopEvents {
    /// Checks the thresholds: speeds from 0 to [`MAX_SPEED`], distances from
    /// 0 to twice [`MAX_MOVE_ORIGIN`], a contents mask that is not 0.
    pub fn checked(self) -> Result<Self, MovementError> {
        if let Some(speed) = self.blocked_below {
            if !(0.0..=MAX_SPEED).contains(&speed) {
                return Err(MovementError::BadStop(format!(
                    "`blocked_speed` must be from 0 to {MAX_SPEED} units/s"
                )));
            }
        }
        if let Some(distance) = self.fell {
            if !(0.0..=2.0 * MAX_MOVE_ORIGIN).contains(&distance) {
                return Err(MovementError::BadStop(format!(
                    "`fall` must be from 0 to {} units",
                    2.0 * MAX_MOVE_ORIGIN
                )));
            }
        }
        if self.contents == Some(0) {
            return Err(MovementError::BadStop(
                "`contents` must name at least one content flag".into(),
            ));
        }
        Ok(self)
    }
}

/// Why a prediction stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Landed,
    LeftGround,
    Blocked,
    Contents,
    Fell,
    /// The body left the range a move may start from, or got faster than a
    /// move may be: it cannot be moved further.
    OutOfRange,
    /// The tick limit.
    Ticks,
}

impl Event {
    /// The event's name in query lines and answers.
    pub fn name(self) -> &'static str {
        match self {
            Event::Landed => "landed",
            Event::LeftGround => "left_ground",
            Event::Blocked => "blocked",
            Event::Contents => "contents",
            Event::Fell => "fell",
            Event::OutOfRange => "out_of_range",
            Event::Ticks => "ticks",
        }
    }
}

/// How a prediction ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    pub event: Event,
    /// Ticks run, the last being the one the event happened in.
    pub tick: u32,
    pub motion: Motion,
    /// The ground probe where the body ended.
    pub ground: Ground,
    /// Whether the body ended standing (see [`standing_on`]).
    pub on_ground: bool,
    /// The origin after each tick (when the query asked for it).
    pub path: Vec<Vec3>,
}

/// The plane a body stands on: walkable ground it is not moving up and away
/// from.
pub(crate) fn standing_on(probe: &Ground, velocity: Vec3) -> Option<Vec3> {
    let normal = probe.plane()?;
    let leaving = velocity.z > 0.0 && dot(velocity, normal) > LEAVING_GROUND_SPEED;
    (!leaving).then_some(normal)
}

/// `velocity` turned along `plane` with its speed kept (walking up or down
/// a slope goes as fast as on the flat).
pub(crate) fn along_ground(velocity: Vec3, plane: Vec3) -> Vec3 {
    let speed = length(velocity);
    scaled(normalized(clip_velocity(velocity, plane)), speed)
}

/// Runs `query`: each tick, standing on walkable ground (and not moving up
/// away from it), the velocity is turned along the ground keeping its speed
/// and the body step-slides without gravity along that plane; otherwise it
/// step-slides under gravity with no ground. After the tick the ground is
/// probed where it ended, and the requested events are looked for.
pub fn predict(
    collider: &impl Collider,
    query: &PredictQuery,
    scratch: &mut Scratch,
) -> Prediction {
    let body = &query.body;
    let stops = &query.stops;
    let contents_body = stops.contents.map(|mask| body.with_mask(mask));
    let start_z = query.motion.origin.z;
    let mut motion = query.motion;
    let mut probe = ground(collider, body, motion.origin, scratch);
    let mut path = Vec::new();
    let mut tick = 0;
    loop {
        tick += 1;
        let was_standing = standing_on(&probe, motion.velocity);
        let frame = match was_standing {
            Some(plane) => {
                motion.velocity = along_ground(motion.velocity, plane);
                Frame {
                    time: query.frametime,
                    gravity: 0,
                    ground: Some(plane),
                }
            }
            None => Frame {
                time: query.frametime,
                gravity: query.gravity,
                ground: None,
            },
        };
        step_motion(collider, body, scratch, &mut motion, frame);
        probe = ground(collider, body, motion.origin, scratch);
        if query.record_path {
            path.push(motion.origin);
        }
        let standing = standing_on(&probe, motion.velocity).is_some();
        let horizontal_speed = length(Vec3::new(motion.velocity.x, motion.velocity.y, 0.0));
        let event = if stops.landed && was_standing.is_none() && standing {
            Some(Event::Landed)
        } else if stops.left_ground && was_standing.is_some() && !standing {
            Some(Event::LeftGround)
        } else if stops.blocked_below.is_some_and(|s| horizontal_speed < s) {
            Some(Event::Blocked)
        } else if contents_body.as_ref().is_some_and(|b| {
            let (inside, _) = collider.sweep(b, motion.origin, motion.origin, scratch);
            inside.startsolid
        }) {
            Some(Event::Contents)
        } else if stops.fell.is_some_and(|d| start_z - motion.origin.z > d) {
            Some(Event::Fell)
        } else if query.from_motion(motion).is_none() {
            Some(Event::OutOfRange)
        } else if tick >= query.ticks {
            Some(Event::Ticks)
        } else {
            None
        };
        if let Some(event) = event {
            return Prediction {
                event,
                tick,
                motion,
                ground: probe,
                on_ground: standing,
                path,
            };
        }
    }
}

impl Body {
    /// The same box colliding with `mask` instead.
    fn with_mask(&self, mask: u32) -> Body {
        let mut body = self.clone();
        body.set_mask(mask);
        body
    }
}
