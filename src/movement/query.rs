//! Movement queries, checked when built: every value finite and within the
//! limits below, so that no frame can leave the kernel's coordinate range.

use super::body::Body;
use super::predict::StopEvents;
use super::Motion;
use crate::math::Vec3;
use crate::trace::InvalidTrace;
use thiserror::Error;

/// Largest origin coordinate a move may start from. Half the kernel's
/// range: a frame's travel (at most [`MAX_SPEED`] plus what gravity adds in
/// [`MAX_FRAMETIME`], plus a step) keeps every trace inside it.
pub const MAX_MOVE_ORIGIN: f32 = 524_288.0;
/// Largest speed (length of the velocity), units per second.
pub const MAX_SPEED: f32 = 100_000.0;
/// Longest frame, seconds.
pub const MAX_FRAMETIME: f32 = 1.0;
/// Largest gravity, units per second squared.
pub const MAX_GRAVITY: u32 = 100_000;
/// Most ticks a prediction runs.
pub const MAX_TICKS: u32 = 1000;

/// Why a movement query was refused; [`MovementError::code`] is stable.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum MovementError {
    /// What the kernel refuses of the box (`mins`, `maxs`).
    #[error(transparent)]
    Invalid(#[from] InvalidTrace),
    #[error("`origin` has a non-finite or out-of-range value (limit ±{MAX_MOVE_ORIGIN})")]
    BadOrigin,
    #[error("`velocity` must be finite, at most {MAX_SPEED} units/s long")]
    BadVelocity,
    #[error("`frametime` must be a number of seconds from 0 to {MAX_FRAMETIME}")]
    BadFrametime,
    #[error("`gravity` must be a whole number of units/s² from 0 to {MAX_GRAVITY}")]
    BadGravity,
    #[error("`ground` must be a unit normal (finite, length 1 within 0.01)")]
    BadGroundNormal,
    #[error("`ticks` must be from 1 to {MAX_TICKS}")]
    BadTicks,
    #[error("{0}")]
    BadStop(String),
    #[error("{0}")]
    UnknownHull(String),
}

impl MovementError {
    /// The stable, machine-readable code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            MovementError::Invalid(InvalidTrace::MinsAboveMaxs) => "mins_above_maxs",
            MovementError::Invalid(_) | MovementError::BadOrigin => "bad_coordinate",
            MovementError::BadVelocity => "bad_velocity",
            MovementError::BadFrametime => "bad_frametime",
            MovementError::BadGravity => "bad_gravity",
            MovementError::BadGroundNormal => "bad_ground_normal",
            MovementError::BadTicks => "bad_ticks",
            MovementError::BadStop(_) => "bad_stop",
            MovementError::UnknownHull(_) => "unknown_hull",
        }
    }
}

fn checked_origin(origin: Vec3) -> Result<Vec3, MovementError> {
    if origin.is_finite() && origin.abs().max_element() <= MAX_MOVE_ORIGIN {
        Ok(origin)
    } else {
        Err(MovementError::BadOrigin)
    }
}

fn checked_motion(motion: Motion) -> Result<Motion, MovementError> {
    let velocity = motion.velocity;
    if !velocity.is_finite() || super::vector::length(velocity) > MAX_SPEED {
        return Err(MovementError::BadVelocity);
    }
    Ok(Motion {
        origin: checked_origin(motion.origin)?,
        velocity,
    })
}

fn checked_frametime(frametime: f32) -> Result<f32, MovementError> {
    if (0.0..=MAX_FRAMETIME).contains(&frametime) {
        Ok(frametime)
    } else {
        Err(MovementError::BadFrametime)
    }
}

fn checked_gravity(gravity: u32) -> Result<u32, MovementError> {
    if gravity <= MAX_GRAVITY {
        Ok(gravity)
    } else {
        Err(MovementError::BadGravity)
    }
}

/// The ground probe: `body` traced from `origin` a quarter unit down.
#[derive(Debug, Clone, PartialEq)]
pub struct GroundQuery {
    origin: Vec3,
    body: Body,
}

impl GroundQuery {
    pub fn new(origin: Vec3, body: Body) -> Result<Self, MovementError> {
        Ok(Self {
            origin: checked_origin(origin)?,
            body,
        })
    }

    pub fn origin(&self) -> Vec3 {
        self.origin
    }

    pub fn body(&self) -> &Body {
        &self.body
    }
}

/// One frame of movement: the slide move (`step` false) or the step-slide
/// move (`step` true), from `motion` for `frametime` seconds, with
/// `gravity` (0: none) and the plane the body stands on (`ground`, none in
/// the air).
#[derive(Debug, Clone, PartialEq)]
pub struct SlideQuery {
    pub(super) motion: Motion,
    pub(super) frametime: f32,
    pub(super) gravity: u32,
    pub(super) ground: Option<Vec3>,
    pub(super) step: bool,
    pub(super) body: Body,
}

impl SlideQuery {
    /// A step-slide move on no ground without gravity; the `with_*`
    /// methods set the rest.
    pub fn new(motion: Motion, frametime: f32, body: Body) -> Result<Self, MovementError> {
        Ok(Self {
            motion: checked_motion(motion)?,
            frametime: checked_frametime(frametime)?,
            gravity: 0,
            ground: None,
            step: true,
            body,
        })
    }

    /// Gravity in units/s² (0 to [`MAX_GRAVITY`]; 0: none).
    pub fn with_gravity(self, gravity: u32) -> Result<Self, MovementError> {
        Ok(Self {
            gravity: checked_gravity(gravity)?,
            ..self
        })
    }

    /// The plane the body stands on (a unit normal), or none.
    pub fn with_ground(self, ground: Option<Vec3>) -> Result<Self, MovementError> {
        if let Some(normal) = ground {
            let length = super::vector::length(normal);
            if !normal.is_finite() || !(0.99..=1.01).contains(&length) {
                return Err(MovementError::BadGroundNormal);
            }
        }
        Ok(Self { ground, ..self })
    }

    /// The step-slide move (true, the default) or the plain slide move.
    pub fn with_step(self, step: bool) -> Self {
        Self { step, ..self }
    }

    pub fn motion(&self) -> Motion {
        self.motion
    }

    pub fn frametime(&self) -> f32 {
        self.frametime
    }

    pub fn gravity(&self) -> u32 {
        self.gravity
    }

    pub fn ground(&self) -> Option<Vec3> {
        self.ground
    }

    pub fn step(&self) -> bool {
        self.step
    }

    pub fn body(&self) -> &Body {
        &self.body
    }
}

/// Ticks of movement from `motion`, `frametime` seconds each, with
/// `gravity`, until one of `stops` happens or `ticks` have run.
#[derive(Debug, Clone, PartialEq)]
pub struct PredictQuery {
    pub(super) motion: Motion,
    pub(super) frametime: f32,
    pub(super) gravity: u32,
    pub(super) body: Body,
    pub(super) ticks: u32,
    pub(super) stops: StopEvents,
    pub(super) record_path: bool,
}

impl PredictQuery {
    /// `ticks` (1 to [`MAX_TICKS`]) of movement without gravity, stopping
    /// only at the tick limit; the `with_*` methods set the rest.
    pub fn new(
        motion: Motion,
        frametime: f32,
        body: Body,
        ticks: u32,
    ) -> Result<Self, MovementError> {
        if !(1..=MAX_TICKS).contains(&ticks) {
            return Err(MovementError::BadTicks);
        }
        Ok(Self {
            motion: checked_motion(motion)?,
            frametime: checked_frametime(frametime)?,
            gravity: 0,
            body,
            ticks,
            stops: StopEvents::default(),
            record_path: false,
        })
    }

    pub fn with_gravity(self, gravity: u32) -> Result<Self, MovementError> {
        Ok(Self {
            gravity: checked_gravity(gravity)?,
            ..self
        })
    }

    /// The events that end the prediction early.
    pub fn with_stops(self, stops: StopEvents) -> Result<Self, MovementError> {
        Ok(Self {
            stops: stops.checked()?,
            ..self
        })
    }

    /// Whether the answer lists the origin after every tick.
    pub fn with_path(self, record_path: bool) -> Self {
        Self {
            record_path,
            ..self
        }
    }

    pub fn motion(&self) -> Motion {
        self.motion
    }

    pub fn frametime(&self) -> f32 {
        self.frametime
    }

    pub fn gravity(&self) -> u32 {
        self.gravity
    }

    pub fn body(&self) -> &Body {
        &self.body
    }

    pub fn ticks(&self) -> u32 {
        self.ticks
    }

    pub fn stops(&self) -> &StopEvents {
        &self.stops
    }

    /// Whether the answer lists the origin after every tick.
    pub fn record_path(&self) -> bool {
        self.record_path
    }

    /// The same prediction from another state (the next tick's, when a
    /// prediction is chained): `None` when that state is out of range.
    pub fn from_motion(&self, motion: Motion) -> Option<Self> {
        Some(Self {
            motion: checked_motion(motion).ok()?,
            ..self.clone()
        })
    }

    /// The same prediction for another number of ticks.
    pub fn with_ticks(&self, ticks: u32) -> Result<Self, MovementError> {
        Self::new(self.motion, self.frametime, self.body.clone(), ticks).map(|fresh| Self {
            ticks: fresh.ticks,
            ..self.clone()
        })
    }
}
