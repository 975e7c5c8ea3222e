//! Scenes in the line format: a line `{"entities":[…]}` sets the entities
//! the following lines are traced with, and queries name the entity making
//! the move with `"pass"`.

use super::{Answer, HitAnswer, PointAnswer, Query, QueryError, QueryLine, Request, TraceAnswer};
use crate::map::Map;
use crate::math::Vec3;
use crate::scene::{
    Entity, EntityShape, PlacedScene, Scene, SceneError, ENTITY_NONE, MAX_ENTITY_ID,
};
use crate::trace::Scratch;
use serde::{Deserialize, Serialize};

/// One entity as written: an inline model `{"id":N,"model":"*K",…}` or a box
/// `{"id":N,"box":{"mins":[…],"maxs":[…]},…}`, with `origin` (default 0),
/// `angles` (pitch, yaw, roll in degrees; models only, default 0),
/// `contents` (default 1 for models, BODY for boxes) and `owner` (default
/// none).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EntityLine {
    pub id: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, rename = "box", skip_serializing_if = "Option::is_none")]
    pub bbox: Option<BoxLine>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<[f64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub angles: Option<[f64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contents: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BoxLine {
    pub mins: [f64; 3],
    pub maxs: [f64; 3],
}

/// The answer to a scene line: how many entities the scene now has.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SceneAnswer {
    pub entities: usize,
}

fn point(v: [f64; 3]) -> Vec3 {
    Vec3::new(v[0] as f32, v[1] as f32, v[2] as f32)
}

/// An id as the scene takes it; values that do not fit are kept out of
/// range so that the scene names them.
fn id(v: i64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

impl EntityLine {
    /// The entity this line describes (checked with the rest of the scene
    /// by [`scene_of`]).
    fn entity(&self, index: usize) -> Result<Entity, SceneError> {
        let malformed = |reason: String| SceneError::Malformed { index, reason };
        let shape = match (&self.model, &self.bbox) {
            (Some(name), None) => {
                let number = name
                    .strip_prefix('*')
                    .and_then(|n| n.parse::<usize>().ok())
                    .filter(|&n| n >= 1)
                    .ok_or_else(|| {
                        malformed(format!(
                            "`model` {name:?} is not an inline model name (\"*1\", \"*2\", …)"
                        ))
                    })?;
                EntityShape::Model(number)
            }
            (None, Some(b)) => EntityShape::Box {
                mins: point(b.mins),
                maxs: point(b.maxs),
            },
            _ => return Err(malformed("an entity takes `model` or `box`".into())),
        };
        let contents = self
            .contents
            .unwrap_or_else(|| Entity::default_contents(&shape));
        let angles = match shape {
            // Boxes never rotate: their angles are accepted and ignored.
            EntityShape::Box { .. } => Vec3::ZERO,
            EntityShape::Model(_) => self.angles.map_or(Vec3::ZERO, point),
        };
        Ok(Entity {
            id: id(self.id),
            shape,
            origin: self.origin.map_or(Vec3::ZERO, point),
            angles,
            contents,
            owner: self.owner.map_or(ENTITY_NONE, id),
        })
    }
}

/// The scene a list of entity lines describes.
pub fn scene_of(lines: &[EntityLine]) -> Result<Scene, SceneError> {
    let entities = lines
        .iter()
        .enumerate()
        .map(|(index, line)| line.entity(index))
        .collect::<Result<Vec<_>, _>>()?;
    Scene::new(entities)
}

/// A query's `pass`: the entity making the move (default none).
pub fn pass_of(pass: Option<i64>) -> Result<u32, QueryError> {
    match pass {
        None => Ok(ENTITY_NONE),
        Some(p) if (0..=i64::from(ENTITY_NONE)).contains(&p) => Ok(p as u32),
        Some(p) => Err(QueryError::Malformed(format!(
            "`pass` {p} is not an entity id (0 to {MAX_ENTITY_ID}, 1022 the world, 1023 none)"
        ))),
    }
}

/// Answers one request through `world` and `scene`; trace answers name the
/// entity that gave them.
pub fn answer_in_scene(
    world: &Map,
    scene: &PlacedScene,
    scratch: &mut Scratch,
    request: &Request,
    pass: u32,
) -> Answer {
    let traced = |(r, entity): (crate::trace::TraceResult, u32)| {
        Answer::Trace(TraceAnswer {
            entity: Some(entity),
            ..TraceAnswer::from(&r)
        })
    };
    match request {
        Request::Query(Query::Trace(q)) => traced(scene.trace(q, pass, scratch)),
        Request::Query(Query::Point(p)) => Answer::Point(PointAnswer {
            contents: scene.point_contents(*p, pass),
        }),
        Request::AnyHit(q) => Answer::Hit(HitAnswer {
            hit: scene.any_hit(q, pass, scratch),
        }),
        Request::Movement(m) => {
            super::answer_movement(&crate::movement::InScene { scene, pass }, scratch, m)
        }
        Request::Bots(b) => Answer::Bots(crate::bots::answer_in_scene(
            scene,
            b,
            &crate::trace::BatchOptions::single_thread(),
        )),
        Request::Hull { query, any } => {
            let through_world = crate::trace::trace_hull(&world.view(), query, scratch);
            let found = scene.trace_after(through_world, query.query(), pass, scratch);
            if *any {
                Answer::Hit(HitAnswer {
                    hit: found.0.fraction < 1.0,
                })
            } else {
                traced(found)
            }
        }
    }
}

/// Answers `requests` (each with its `pass`) through `world` and `scene`,
/// in order, on the threads `options` allows.
pub fn answer_all_in_scene(
    world: &Map,
    scene: &PlacedScene,
    requests: &[(Request, u32)],
    options: &crate::trace::BatchOptions,
) -> Vec<Answer> {
    crate::trace::run_batch(requests.len(), options, |i, scratch| match &requests[i] {
        // A matrix is a batch of its own, on the batch's threads.
        (Request::Bots(b), _) => Answer::Bots(crate::bots::answer_in_scene(scene, b, options)),
        (request, pass) => answer_in_scene(world, scene, scratch, request, *pass),
    })
}

/// Answers query lines in order as a stream in which `{"entities":[…]}`
/// lines set the scene of the lines after them (a line that fails leaves
/// the scene as it was). Runs of queries between scene lines are answered
/// as batches; without a scene, exactly as [`super::answer_all`] does.
pub struct SceneStream<'m> {
    map: &'m Map,
    scene: Option<PlacedScene<'m>>,
}

impl<'m> SceneStream<'m> {
    pub fn new(map: &'m Map) -> Self {
        Self { map, scene: None }
    }

    /// A stream that starts with `scene` (placed in the same map).
    pub fn with_scene(map: &'m Map, scene: PlacedScene<'m>) -> Self {
        Self {
            map,
            scene: Some(scene),
        }
    }

    /// One line checked: a query with its `pass`, or a scene placed in the
    /// stream's map.
    pub fn checked(&self, line: &QueryLine) -> Result<Checked<'m>, QueryError> {
        match line.scene() {
            Some(scene) => PlacedScene::new(self.map, &scene?)
                .map(|placed| Checked::Scene(Box::new(placed)))
                .map_err(QueryError::Scene),
            None => Ok(Checked::Query(
                line.request_in(&self.map.view())?,
                line.pass()?,
            )),
        }
    }

    /// Every line checked; the index and error of the first bad one.
    pub fn check(&self, lines: &[QueryLine]) -> Result<Vec<Checked<'m>>, (usize, QueryError)> {
        lines
            .iter()
            .enumerate()
            .map(|(index, line)| self.checked(line).map_err(|error| (index, error)))
            .collect()
    }

    /// The answers to `lines`, one per line, in order.
    pub fn answer(
        &mut self,
        lines: Vec<Result<QueryLine, QueryError>>,
        options: &crate::trace::BatchOptions,
    ) -> Vec<Result<Answer, QueryError>> {
        let checked = lines
            .into_iter()
            .map(|line| line.and_then(|line| self.checked(&line)))
            .collect();
        self.answer_checked(checked, options)
    }

    /// [`SceneStream::answer`] for lines already checked.
    pub fn answer_checked(
        &mut self,
        lines: Vec<Result<Checked<'m>, QueryError>>,
        options: &crate::trace::BatchOptions,
    ) -> Vec<Result<Answer, QueryError>> {
        let mut out = Vec::with_capacity(lines.len());
        let mut run: Vec<Result<(Request, u32), QueryError>> = Vec::new();
        for line in lines {
            match line {
                Ok(Checked::Scene(placed)) => {
                    self.flush(&mut run, options, &mut out);
                    out.push(Ok(Answer::Scene(SceneAnswer {
                        entities: placed.len(),
                    })));
                    self.scene = Some(*placed);
                }
                Ok(Checked::Query(request, pass)) => run.push(Ok((request, pass))),
                Err(e) => run.push(Err(e)),
            }
        }
        self.flush(&mut run, options, &mut out);
        out
    }

    /// Answers the queries gathered since the last scene line.
    fn flush(
        &self,
        run: &mut Vec<Result<(Request, u32), QueryError>>,
        options: &crate::trace::BatchOptions,
        out: &mut Vec<Result<Answer, QueryError>>,
    ) {
        let valid: Vec<(Request, u32)> = run.iter().filter_map(|r| r.clone().ok()).collect();
        let answers = match &self.scene {
            Some(placed) => answer_all_in_scene(self.map, placed, &valid, options),
            None => {
                let requests: Vec<Request> = valid.into_iter().map(|(r, _)| r).collect();
                super::answer_all(&self.map.view(), &requests, options)
            }
        };
        let mut answers = answers.into_iter();
        for r in run.drain(..) {
            out.push(r.and_then(|_| {
                answers.next().ok_or_else(|| {
                    QueryError::Malformed("the batch gave fewer answers than queries".into())
                })
            }));
        }
    }
}

/// A line of a scene stream, checked.
#[derive(Debug)]
pub enum Checked<'m> {
    Query(Request, u32),
    /// Boxed: a placed scene holds its world's kernel (a few hundred bytes).
    Scene(Box<PlacedScene<'m>>),
}

impl From<SceneError> for QueryError {
    fn from(error: SceneError) -> Self {
        QueryError::Scene(error)
    }
}
