//! Player movement as Quake 3 moves a player: the ground probe, the slide
//! move (velocity clipped along every plane touched, up to four bumps a
//! frame), the step-slide move (the same, and when that is blocked, the
//! same again from up to 18 units higher, set back down), and a prediction
//! that chains them tick after tick until something happens. No I/O and no
//! tokio: the movement is a composition of the kernel's box traces.
//!
//! Every trace a move makes goes through a [`Collider`]: the world alone
//! ([`crate::trace::Kernel`]) or the world and a scene ([`InScene`]: doors,
//! platforms and other players, with the mover's own entity passed over).
//!
//! - [`ground`]: the box traced a quarter unit down; walkable when it hits a
//!   plane whose normal z is at least [`MIN_WALK_NORMAL`].
//! - [`slide`]: one frame of movement, the slide or the step-slide move
//!   ([`SlideQuery`]).
//! - [`predict`]: many frames ([`PredictQuery`]), stopping at the first
//!   requested [`Event`].
//!
//! ```
//! use bspq::movement::{self, Body, Motion, SlideQuery};
//! use bspq::{Map, Vec3, MASK_PLAYERSOLID};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/maps/q3dm6ish.bsp");
//! let map = Map::open(path)?;
//! let world = map.view();
//! let player = Body::boxed(Vec3::new(-15.0, -15.0, -24.0), Vec3::new(15.0, 15.0, 32.0), MASK_PLAYERSOLID)?;
//! let mut scratch = bspq::trace::Scratch::new();
//! // A player at the foot of a staircase, walking into its first step.
//! let origin = Vec3::new(592.0, -60.0, -39.875);
//! let standing = movement::ground(&world, &player, origin, &mut scratch);
//! assert!(standing.walkable);
//! let walk = Motion { origin, velocity: Vec3::new(320.0, 0.0, 0.0) };
//! let frame = SlideQuery::new(walk, 0.05, player)?.with_ground(standing.plane())?;
//! let moved = movement::slide(&world, &frame, &mut scratch);
//! assert_eq!(moved.stepped, 16.0); // up one step
//! assert_eq!(moved.motion.origin, Vec3::new(608.0, -60.0, -23.875));
//! # Ok(())
//! # }
//! ```
//!
//! Arithmetic is `f32` throughout, in the order the game performs it, so
//! that answers agree with the game's to the last few bits (docs/movement.md
//! says what each step does and why).
//!
//! The modules: [`body`] (the moving box and the colliders), [`query`]
//! (checked queries and their limits), [`vector`] (the game's vector
//! arithmetic), [`planes`] (clipping velocity against the planes touched),
//! [`mod@slide`], [`step`], [`mod@ground`], [`mod@predict`].

mod body;
mod ground;
mod planes;
mod predict;
mod query;
mod slide;
mod step;
mod vector;

pub use body::{Body, Collider, InScene};
pub use ground::{ground, Ground};
pub(crate) use predict::{along_ground, standing_on};
pub use predict::{predict, Event, Prediction, StopEvents};
pub use query::{
    GroundQuery, MovementError, PredictQuery, SlideQuery, MAX_FRAMETIME, MAX_GRAVITY,
    MAX_MOVE_ORIGIN, MAX_SPEED, MAX_TICKS,
};

/// How high a step the step-slide move climbs, in units.
pub const STEP_HEIGHT: f32 = 18.0;
/// How far below the box the ground probe looks, in units.
pub const GROUND_PROBE_DEPTH: f32 = 0.25;
/// The smallest normal z of a plane a player can stand on.
pub const MIN_WALK_NORMAL: f32 = 0.7;
/// Traces one slide move may make before it gives up on the frame.
pub const MAX_BUMPS: usize = 4;
/// Planes one slide move remembers (the ground, the velocity's direction
/// and the planes hit); one more stops the player dead.
pub const MAX_CLIP_PLANES: usize = 5;
/// Velocity clipped against a plane is pushed this much further out of it
/// than parallel, so the next trace does not start on the plane.
pub const OVERCLIP: f32 = 1.001;

/// Where a move is and how fast it goes.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Motion {
    pub origin: crate::math::Vec3,
    /// Units per second.
    pub velocity: crate::math::Vec3,
}

/// Where one frame of movement ended, and what it did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Moved {
    pub motion: Motion,
    /// The plain slide move only: it did not get where its velocity pointed
    /// in one trace.
    pub blocked: Option<bool>,
    /// The step-slide move only: the rise of the step path (final z less
    /// start z) when it was taken, else 0.
    pub stepped: f32,
    /// The ground probe from where the move ended.
    pub ground: Ground,
}

/// One frame of `query`: its step-slide or plain slide move through
/// `collider`, and the ground probe where it ends.
pub fn slide(
    collider: &impl Collider,
    query: &SlideQuery,
    scratch: &mut crate::trace::Scratch,
) -> Moved {
    let mut motion = query.motion;
    let frame = query.frame();
    let (blocked, stepped) = if query.step {
        let stepped = step::step_motion(collider, &query.body, scratch, &mut motion, frame);
        (None, stepped.height)
    } else {
        let slid = slide::slide_motion(collider, &query.body, scratch, &mut motion, frame);
        (Some(slid.blocked), 0.0)
    };
    Moved {
        motion,
        blocked,
        stepped,
        ground: ground(collider, &query.body, motion.origin, scratch),
    }
}
