//! Walk tests: can a player walk (or jump) from A to B? The player is
//! moved tick after tick as a prediction moves it (one step-slide move and
//! one ground probe a tick, [`crate::movement::slide`]), its velocity aimed
//! at B before every tick it stands on walkable ground, until it stands
//! within reach of B or something stops it.

use super::BotsError;
use crate::contents::MASK_PLAYERSOLID;
use crate::math::Vec3;
use crate::movement::{self, Body, Collider, Motion, MovementError, SlideQuery, MAX_TICKS};
use crate::trace::Scratch;
use serde::{Deserialize, Serialize};

/// A player's box (Quake 3's standing player).
pub const PLAYER_MINS: [f64; 3] = [-15.0, -15.0, -24.0];
pub const PLAYER_MAXS: [f64; 3] = [15.0, 15.0, 32.0];
/// Quake 3's running speed (units/s), gravity (units/s²) and jump speed.
const RUN_SPEED: f64 = 320.0;
const GRAVITY: i64 = 800;
const JUMP_VELOCITY: f32 = 270.0;
/// Defaults of the rest: a 20 Hz tick, ten seconds, and B reached within
/// 16 units horizontally and a step's height vertically.
const FRAMETIME: f64 = 0.05;
const TICKS: i64 = 200;
const RADIUS: f64 = 16.0;
const HEIGHT: f64 = 18.0;
/// Ticks without getting a unit closer to B (in seconds) before the walk is
/// `stuck`, and how far below both ends it may drop before it `fell`.
const STUCK_SECONDS: f32 = 1.0;
const FALL: f64 = 128.0;
/// A standing player slower than this (units/s) after a tick is `blocked`.
const BLOCKED_SPEED: f32 = 1.0;

/// A walk as written: `{"from":[…],"to":[…]}` and optional settings.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WalkLine {
    pub from: [f64; 3],
    pub to: [f64; 3],
    /// Jump on the first tick (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jump: Option<bool>,
    /// Horizontal speed in units/s (default 320).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mins: Option<[f64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maxs: Option<[f64; 3]>,
    /// Default MASK_PLAYERSOLID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frametime: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gravity: Option<i64>,
    /// Most ticks (default 200, at most 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticks: Option<i64>,
    /// B is reached within this many units horizontally (default 16) ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub radius: Option<f64>,
    /// ... and this many vertically (default 18), standing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<f64>,
    /// The walk `fell` this far below both ends (default 128).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fall: Option<f64>,
    /// The walker's own entity (with a scene).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass: Option<i64>,
}

/// A checked walk.
#[derive(Debug, Clone, PartialEq)]
pub struct Walk {
    from: Vec3,
    to: Vec3,
    jump: bool,
    speed: f32,
    body: Body,
    frametime: f32,
    gravity: u32,
    ticks: u32,
    radius: f32,
    height: f32,
    fall: f32,
    pass: u32,
}

fn v(p: [f64; 3]) -> Vec3 {
    Vec3::new(p[0] as f32, p[1] as f32, p[2] as f32)
}

/// A distance setting: finite, 0 or more, at most `max`.
fn distance(
    field: &'static str,
    value: Option<f64>,
    default: f64,
    max: f64,
) -> Result<f32, BotsError> {
    let value = value.unwrap_or(default);
    if value.is_finite() && (0.0..=max).contains(&value) {
        Ok(value as f32)
    } else {
        Err(BotsError::BadSetting {
            field,
            rule: format!("a number from 0 to {max}"),
        })
    }
}

impl WalkLine {
    pub fn check(&self) -> Result<Walk, BotsError> {
        let movement = |e: MovementError| BotsError::Movement(e);
        let body = Body::boxed(
            v(self.mins.unwrap_or(PLAYER_MINS)),
            v(self.maxs.unwrap_or(PLAYER_MAXS)),
            self.mask.unwrap_or(MASK_PLAYERSOLID),
        )
        .map_err(movement)?;
        let ticks = self.ticks.unwrap_or(TICKS);
        let ticks = u32::try_from(ticks)
            .ok()
            .filter(|t| (1..=MAX_TICKS).contains(t))
            .ok_or(BotsError::Movement(MovementError::BadTicks))?;
        let gravity = u32::try_from(self.gravity.unwrap_or(GRAVITY))
            .map_err(|_| BotsError::Movement(MovementError::BadGravity))?;
        let pass = crate::query::pass_of(self.pass).map_err(|_| BotsError::BadSetting {
            field: "pass",
            rule: "an entity id (0 to 1021, 1022 the world, 1023 none)".into(),
        })?;
        let walk = Walk {
            from: v(self.from),
            to: v(self.to),
            jump: self.jump.unwrap_or(false),
            speed: distance(
                "speed",
                self.speed,
                RUN_SPEED,
                f64::from(movement::MAX_SPEED) / 2.0,
            )?,
            body,
            frametime: self.frametime.unwrap_or(FRAMETIME) as f32,
            gravity,
            ticks,
            radius: distance("radius", self.radius, RADIUS, 65_536.0)?,
            height: distance("height", self.height, HEIGHT, 65_536.0)?,
            fall: distance("fall", self.fall, FALL, 65_536.0)?,
            pass,
        };
        // The first tick's move, checked as a slide line is (origin,
        // frametime, gravity); `to` as a point.
        SlideQuery::new(
            Motion {
                origin: walk.from,
                velocity: Vec3::ZERO,
            },
            walk.frametime,
            walk.body.clone(),
        )
        .and_then(|q| q.with_gravity(walk.gravity))
        .map_err(movement)?;
        SlideQuery::new(
            Motion {
                origin: walk.to,
                velocity: Vec3::ZERO,
            },
            walk.frametime,
            walk.body.clone(),
        )
        .map_err(movement)?;
        Ok(walk)
    }
}

impl Walk {
    /// The walker's own entity.
    pub fn pass(&self) -> u32 {
        self.pass
    }
}

/// Why a walk ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// Standing within reach of B.
    Reached,
    /// Standing, and slower than 1 unit/s after a tick (a wall).
    Blocked,
    /// More than `fall` below both ends.
    Fell,
    /// No unit closer to B for a second.
    Stuck,
    /// The box is in solid where it starts.
    StartSolid,
    /// The tick limit.
    Timeout,
    /// Out of the range a move may start from.
    OutOfRange,
}

/// How a walk ended.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WalkAnswer {
    pub reached: bool,
    pub reason: Stop,
    /// Ticks run.
    pub ticks: u32,
    /// Where it ended.
    pub origin: [f32; 3],
    /// The horizontal distance left to B.
    pub distance: f32,
}

fn horizontal(v: Vec3) -> Vec3 {
    Vec3::new(v.x, v.y, 0.0)
}

/// The velocity for a tick standing on `plane`: at `speed` straight at B's
/// column (no faster than reaches it this tick), turned along the plane
/// with its speed kept, as a prediction turns it.
fn aimed(from: Vec3, to: Vec3, speed: f32, frametime: f32) -> Vec3 {
    let towards = horizontal(to - from);
    let left = towards.length();
    if left == 0.0 {
        return Vec3::ZERO;
    }
    let speed = if frametime > 0.0 {
        speed.min(left / frametime)
    } else {
        speed
    };
    towards * (speed / left)
}

/// The walk through `collider`: each tick, standing on walkable ground, the
/// velocity is aimed at B (a jump on the first tick when asked) and the
/// player step-slides along the ground without gravity; in the air it
/// keeps its velocity under gravity. Every tick is one
/// [`movement::slide`] (step-slide) with the ground probe it ends with.
pub fn walk(collider: &impl Collider, w: &Walk, scratch: &mut Scratch) -> WalkAnswer {
    let mut motion = Motion {
        origin: w.from,
        velocity: Vec3::ZERO,
    };
    let mut probe = movement::ground(collider, &w.body, motion.origin, scratch);
    let answer = |stop: Stop, ticks: u32, origin: Vec3| WalkAnswer {
        reached: stop == Stop::Reached,
        reason: stop,
        ticks,
        origin: origin.to_array(),
        distance: horizontal(w.to - origin).length(),
    };
    if probe.trace.startsolid {
        return answer(Stop::StartSolid, 0, motion.origin);
    }
    let floor = w.from.z.min(w.to.z) - w.fall;
    let stuck_ticks = if w.frametime > 0.0 {
        (STUCK_SECONDS / w.frametime).ceil() as u32
    } else {
        w.ticks
    };
    let (mut best, mut best_tick) = (horizontal(w.to - w.from).length(), 0);
    for tick in 1..=w.ticks {
        let standing = movement::standing_on(&probe, motion.velocity);
        let query = match standing {
            Some(plane) => {
                let mut velocity = aimed(motion.origin, w.to, w.speed, w.frametime);
                let jump = w.jump && tick == 1;
                if !jump {
                    velocity = movement::along_ground(velocity, plane);
                }
                if jump {
                    velocity.z = JUMP_VELOCITY;
                }
                let moved = Motion {
                    origin: motion.origin,
                    velocity,
                };
                // (A jump leaves the ground: gravity, no plane.)
                SlideQuery::new(moved, w.frametime, w.body.clone()).and_then(|q| {
                    if jump {
                        q.with_gravity(w.gravity)
                    } else {
                        q.with_ground(Some(plane))
                    }
                })
            }
            None => SlideQuery::new(motion, w.frametime, w.body.clone())
                .and_then(|q| q.with_gravity(w.gravity)),
        };
        let Ok(query) = query else {
            return answer(Stop::OutOfRange, tick - 1, motion.origin);
        };
        let moved = movement::slide(collider, &query, scratch);
        motion = moved.motion;
        probe = moved.ground;
        let on_ground = movement::standing_on(&probe, motion.velocity).is_some();
        let left = horizontal(w.to - motion.origin).length();
        if on_ground && left <= w.radius && (motion.origin.z - w.to.z).abs() <= w.height {
            return answer(Stop::Reached, tick, motion.origin);
        }
        if motion.origin.z < floor {
            return answer(Stop::Fell, tick, motion.origin);
        }
        if on_ground && standing.is_some() && horizontal(motion.velocity).length() < BLOCKED_SPEED {
            return answer(Stop::Blocked, tick, motion.origin);
        }
        if left < best - 1.0 {
            (best, best_tick) = (left, tick);
        } else if tick - best_tick >= stuck_ticks {
            return answer(Stop::Stuck, tick, motion.origin);
        }
    }
    answer(Stop::Timeout, w.ticks, motion.origin)
}
