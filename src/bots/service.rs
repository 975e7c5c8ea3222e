//! The bot calls as the service answers them: checked against one pinned
//! world version, with the request's scene, on the service's threads.

use super::pvs::{pvs, PvsAnswer, PvsLine};
use super::sight::{sight_matrix, sight_matrix_in_scene, SightLine, SightMatrix};
use super::walk::{walk, Walk, WalkAnswer, WalkLine};
use crate::query::{scene_of, EntityLine, QueryError};
use crate::registry::WorldVersion;
use crate::scene::PlacedScene;
use crate::service::{Service, ServiceError};

/// An answer and the world version that gave it.
#[derive(Debug, Clone, PartialEq)]
pub struct Answered<T> {
    pub world: String,
    pub version: u64,
    /// The content that answered (as `GET /v1/worlds/{name}` reports it).
    pub source_hash: String,
    pub answer: T,
}

fn answered<T>(version: &WorldVersion, answer: T) -> Answered<T> {
    Answered {
        world: version.name.clone(),
        version: version.version,
        source_hash: version.source_hash.clone(),
        answer,
    }
}

/// The request's scene placed in `version`'s map (its errors name the
/// entity).
fn placed<'m>(
    version: &'m WorldVersion,
    entities: &[EntityLine],
) -> Result<PlacedScene<'m>, ServiceError> {
    scene_of(entities)
        .and_then(|scene| PlacedScene::new(&version.world, &scene))
        .map_err(|e| ServiceError::BadScene(QueryError::Scene(e)))
}

impl Service {
    /// A sight matrix through `world` (and the scene `entities`, when
    /// given): the answers of the N·M any-hit rays, split over the
    /// service's threads.
    pub fn sight(
        &self,
        world: &str,
        line: &SightLine,
        entities: Option<&[EntityLine]>,
    ) -> Result<Answered<SightMatrix>, ServiceError> {
        let version = self.world(world)?;
        let sight = line.check().map_err(ServiceError::Bots)?;
        let matrix = match entities {
            None => sight_matrix(&version.world.view(), &sight, &self.batch),
            Some(entities) => {
                sight_matrix_in_scene(&placed(&version, entities)?, &sight, &self.batch)
            }
        };
        Ok(answered(&version, matrix))
    }

    /// Potential visibility in `world`: where each point lies, and which
    /// targets each point may see (see [`super::pvs`](mod@super::pvs)).
    pub fn pvs(&self, world: &str, line: &PvsLine) -> Result<Answered<PvsAnswer>, ServiceError> {
        let version = self.world(world)?;
        let request = line.check().map_err(ServiceError::Bots)?;
        let answer = pvs(&version.world.world(), &request).map_err(ServiceError::Bots)?;
        Ok(answered(&version, answer))
    }

    /// Walk tests through `world` (and the scene `entities`), every walk
    /// checked before any is run; walks are split over the service's
    /// threads.
    pub fn walks(
        &self,
        world: &str,
        lines: &[WalkLine],
        entities: Option<&[EntityLine]>,
    ) -> Result<Answered<Vec<WalkAnswer>>, ServiceError> {
        let version = self.world(world)?;
        let limit = self.limits.max_queries_per_request;
        if lines.len() > limit {
            return Err(ServiceError::TooManyQueries {
                count: lines.len(),
                limit,
            });
        }
        let walks = lines
            .iter()
            .enumerate()
            .map(|(index, line)| {
                line.check().map_err(|e| ServiceError::BadQuery {
                    index,
                    error: QueryError::Bots(e),
                })
            })
            .collect::<Result<Vec<Walk>, _>>()?;
        let answers = match entities {
            None => {
                let world = version.world.view();
                crate::trace::run_batch(walks.len(), &self.batch, |i, scratch| {
                    walk(&world, &walks[i], scratch)
                })
            }
            Some(entities) => {
                let scene = placed(&version, entities)?;
                crate::trace::run_batch(walks.len(), &self.batch, |i, scratch| {
                    let collider = crate::movement::InScene {
                        scene: &scene,
                        pass: walks[i].pass(),
                    };
                    walk(&collider, &walks[i], scratch)
                })
            }
        };
        Ok(answered(&version, answers))
    }
}
