//! What bot AIs and navigation builders ask in bulk, each as one call: a
//! sight matrix (line of sight from many eyes to many targets), PVS and
//! areas (Quake 3's `inPVS`), and walk tests (can a player get from A to B).
//! Built on the query kernel, scenes and movement; no I/O.

pub mod pvs;
#[cfg(feature = "server")]
pub mod service;
pub mod sight;
pub mod walk;

use crate::scene::PlacedScene;
use crate::trace::{BatchOptions, InvalidTrace, Kernel};
use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use walk::{walk, Stop, Walk, WalkAnswer, WalkLine};

pub use pvs::{pvs, PortalRef, Pvs, PvsAnswer, PvsLine};
pub use sight::{
    sight_matrix, sight_matrix_in_scene, Sight, SightLine, SightMatrix, MAX_SIGHT_PAIRS,
};

/// Why a bot request was refused; `code` is stable and machine-readable.
#[derive(Debug, Clone, Error, PartialEq)]
pub enum BotsError {
    #[error("{pairs} eye-target pairs in one request; the limit is {limit}")]
    TooManyPairs { pairs: usize, limit: usize },
    /// A point of the request (`field`, numbered from 0 in its list).
    #[error("`{field}` {index}: {error}")]
    BadPoint {
        field: &'static str,
        index: usize,
        error: InvalidTrace,
    },
    #[error(transparent)]
    Movement(crate::movement::MovementError),
    #[error("`{field}` must be {rule}")]
    BadSetting { field: &'static str, rule: String },
    #[error("a bot line (`sight`, `pvs`, `walk`) takes no other field")]
    WithQuery,
    #[error("bot lines (`sight`, `pvs`, `walk`) are answered as requests (`QueryLine::request`), not by plain trace validation")]
    NotATrace,
    #[error("this world has no leaf clusters and areas (its compiled file predates them, or the map's visibility data does not fit its tree): compile the map again with `bspq compile`, or load the .bsp")]
    NoVisibility,
}

impl BotsError {
    pub fn code(&self) -> &'static str {
        match self {
            BotsError::TooManyPairs { .. } => "too_many_pairs",
            BotsError::BadPoint {
                error: InvalidTrace::MinsAboveMaxs,
                ..
            } => "mins_above_maxs",
            BotsError::BadPoint { .. } => "bad_coordinate",
            BotsError::Movement(e) => e.code(),
            BotsError::BadSetting { .. } => "bad_setting",
            BotsError::WithQuery => "mixed_query",
            BotsError::NotATrace => "bots_unsupported",
            BotsError::NoVisibility => "no_visibility",
        }
    }
}

/// A checked bot line.
#[derive(Debug, Clone, PartialEq)]
pub enum BotRequest {
    Sight(Sight),
    Pvs(Pvs),
    Walk(Walk),
}

/// The answer to a bot line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum BotAnswer {
    Sight(SightAnswer),
    Pvs(PvsLineAnswer),
    Walk(WalkAnswer),
    Refused(Refusal),
}

/// A PVS line's answer: where each point (and target) lies, the matrix
/// (one string per point, one character per target), the map's areas and
/// portals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PvsLineAnswer {
    pub points: Vec<pvs::PointLeaf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<Vec<pvs::PointLeaf>>,
    pub visible: Vec<String>,
    pub vised: bool,
    pub areas: usize,
    pub portals: Vec<pvs::PortalInfo>,
}

impl From<PvsAnswer> for PvsLineAnswer {
    fn from(a: PvsAnswer) -> Self {
        PvsLineAnswer {
            visible: a.matrix.rows(),
            points: a.points,
            targets: a.targets,
            vised: a.vised,
            areas: a.areas,
            portals: a.portals,
        }
    }
}

/// A bot line the world could not answer (a line checked without the
/// world: checked with it, such a line is refused before it is answered).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Refusal {
    pub error: RefusalBody,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefusalBody {
    pub code: String,
    pub message: String,
}

fn pvs_answer(world: &Kernel, request: &Pvs) -> BotAnswer {
    match pvs(&world.world, request) {
        Ok(answer) => BotAnswer::Pvs(answer.into()),
        Err(e) => BotAnswer::Refused(Refusal {
            error: RefusalBody {
                code: e.code().to_owned(),
                message: e.to_string(),
            },
        }),
    }
}

/// A sight line's answer: one string per eye, one character per target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SightAnswer {
    pub visible: Vec<String>,
}

/// Answers a bot line through `world`, on `options`' threads.
pub fn answer(world: &Kernel, request: &BotRequest, options: &BatchOptions) -> BotAnswer {
    match request {
        BotRequest::Sight(s) => BotAnswer::Sight(SightAnswer {
            visible: sight_matrix(world, s, options).rows(),
        }),
        BotRequest::Pvs(p) => pvs_answer(world, p),
        BotRequest::Walk(w) => BotAnswer::Walk(crate::trace::with_scratch(|scratch| {
            walk(world, w, scratch)
        })),
    }
}

/// Answers a bot line through the world and `scene`.
pub fn answer_in_scene(
    scene: &PlacedScene,
    request: &BotRequest,
    options: &BatchOptions,
) -> BotAnswer {
    match request {
        BotRequest::Sight(s) => BotAnswer::Sight(SightAnswer {
            visible: sight_matrix_in_scene(scene, s, options).rows(),
        }),
        // Potential visibility is the map's alone: no entity changes it.
        BotRequest::Pvs(p) => pvs_answer(scene.world(), p),
        BotRequest::Walk(w) => {
            let collider = crate::movement::InScene {
                scene,
                pass: w.pass(),
            };
            BotAnswer::Walk(crate::trace::with_scratch(|scratch| {
                walk(&collider, w, scratch)
            }))
        }
    }
}

/// N·M for N rows against `targets` columns (`None`: the rows themselves).
pub(crate) fn matrix_pairs(rows: usize, targets: Option<usize>) -> usize {
    rows.saturating_mul(targets.unwrap_or(rows))
}

/// Checks a matrix request's points (each one a ray takes, reported by
/// field and index) and its size (at most [`MAX_SIGHT_PAIRS`] pairs).
pub(crate) fn check_matrix(
    (rows_field, rows): (&'static str, &[crate::math::Vec3]),
    targets: Option<&[crate::math::Vec3]>,
) -> Result<(), BotsError> {
    for (field, list) in [(rows_field, Some(rows)), ("targets", targets)] {
        for (index, &p) in list.into_iter().flatten().enumerate() {
            crate::trace::checked_point(field, p).map_err(|error| BotsError::BadPoint {
                field,
                index,
                error,
            })?;
        }
    }
    let pairs = matrix_pairs(rows.len(), targets.map(<[_]>::len));
    if pairs > MAX_SIGHT_PAIRS {
        return Err(BotsError::TooManyPairs {
            pairs,
            limit: MAX_SIGHT_PAIRS,
        });
    }
    Ok(())
}

/// The points of `field` as the kernel takes them (each checked there).
pub(crate) fn points(
    field: &'static str,
    points: &[[f64; 3]],
) -> Result<Vec<crate::math::Vec3>, BotsError> {
    points
        .iter()
        .enumerate()
        .map(|(index, &p)| {
            crate::query::vec(field, p).map_err(|error| BotsError::BadPoint {
                field,
                index,
                error,
            })
        })
        .collect()
}
