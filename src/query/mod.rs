//! The JSON line format of queries and answers (docs/protocol.md), shared by the
//! CLI and the transports, with one validation path.

use crate::math::Vec3;
use crate::trace::sieve::{missed, Sieve};
use crate::trace::{
    ConvexHull, HullError, HullQuery, InvalidTrace, Shape, TraceQuery, TraceResult,
};
use serde::{Deserialize, Serialize};

pub mod floor;
mod movement;
mod scene;
use crate::movement::MovementError;
use crate::scene::{Scene, SceneError};
pub use movement::{
    answer_movement, GroundAnswer, GroundLine, MovementQuery, PredictAnswer, PredictLine,
    SlideAnswer, SlideLine, DEFAULT_BLOCKED_SPEED,
};
pub use scene::{
    answer_all_in_scene, answer_in_scene, pass_of, scene_of, BoxLine, Checked, EntityLine,
    SceneAnswer, SceneStream,
};
use thiserror::Error;

pub use crate::trace::shape::{MAX_CONVEX_POINTS, MAX_SHAPE_SIZE};
pub use crate::trace::MAX_COORDINATE;

/// A query's swept shape as written: `{"sphere":{"radius":16}}` and so on.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ShapeLine {
    Sphere { radius: f64 },
    Capsule { radius: f64, half_height: f64 },
    Cylinder { radius: f64, half_height: f64 },
    Convex { points: Vec<[f64; 3]> },
}

/// One query line as written by users.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct QueryLine {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<[f64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<[f64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mins: Option<[f64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maxs: Option<[f64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub point: Option<[f64; 3]>,
    /// `true`: an any-hit trace (line of sight), answered `{"hit":bool}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub any: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<ShapeLine>,
    /// Exact answers for rounded and convex shapes (rays and boxes always are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact: Option<bool>,
    /// The name of an onion hull registered in the world (a box of its size,
    /// traced through the onion tree).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hull: Option<String>,
    /// The entity making the move (with a scene): it, the entities it owns
    /// and those with its owner are not collided with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass: Option<i64>,
    /// A scene line: the entities the following lines are traced with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entities: Option<Vec<EntityLine>>,
    /// A ground probe (a movement line takes no other field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ground: Option<GroundLine>,
    /// One frame of the slide or step-slide move.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slide: Option<SlideLine>,
    /// Frames of movement until an event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predict: Option<PredictLine>,
    /// A sight matrix (a bot line takes no other field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sight: Option<crate::bots::SightLine>,
    /// A PVS request (a bot line takes no other field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pvs: Option<crate::bots::PvsLine>,
    /// A walk test (a bot line takes no other field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub walk: Option<crate::bots::WalkLine>,
}

/// A validated query.
#[derive(Debug, Clone, PartialEq)]
pub enum Query {
    Trace(TraceQuery),
    Point(Vec3),
}

/// A validated line: a query and how to answer it.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Answered in full ([`answer`]).
    Query(Query),
    /// `"any":true`: only whether the trace touches anything in its mask.
    AnyHit(TraceQuery),
    /// A hull trace whose hull was found in the world that answers it
    /// (`any`: only whether it hits).
    Hull { query: HullQuery, any: bool },
    /// A ground probe, slide move or prediction.
    Movement(MovementQuery),
    /// A sight matrix, PVS or walk test ([`crate::bots`]).
    Bots(crate::bots::BotRequest),
}

impl From<Query> for Request {
    fn from(q: Query) -> Self {
        Request::Query(q)
    }
}

/// Why a query was rejected; `code` is stable and machine-readable.
#[derive(Debug, Clone, Error, PartialEq)]
pub enum QueryError {
    #[error("{0}")]
    Malformed(String),
    #[error("missing field `{0}`")]
    Missing(&'static str),
    /// What the kernel's constructors refuse (coordinates, box, shape).
    #[error(transparent)]
    Invalid(#[from] InvalidTrace),
    #[error("a point query takes only `point` (point contents has no `mask`, `any` or shape)")]
    PointWithTrace,
    #[error("a query takes `mins`/`maxs` or `shape`, not both")]
    ShapeWithBox,
    #[error("a `hull` query takes no `mins`/`maxs`, `shape` or `exact` (the hull is the box)")]
    HullWithShape,
    #[error("{0}")]
    UnknownHull(String),
    #[error(transparent)]
    Scene(SceneError),
    #[error("an `entities` line takes no other field")]
    SceneWithQuery,
    #[error("`entities` lines are answered where scenes are kept (`bspq trace`, HTTP bodies)")]
    SceneUnsupported,
    #[error(transparent)]
    Movement(#[from] MovementError),
    #[error("a movement line (`ground`, `slide`, `predict`) takes no other field")]
    MovementWithQuery,
    #[error("movement lines (`ground`, `slide`, `predict`) are answered as requests (`QueryLine::request`), not by plain trace validation")]
    MovementUnsupported,
    #[error(transparent)]
    Bots(#[from] crate::bots::BotsError),
}

impl QueryError {
    pub fn code(&self) -> &'static str {
        match self {
            QueryError::Malformed(_) => "malformed_query",
            QueryError::Missing(_) => "missing_field",
            QueryError::Invalid(InvalidTrace::BadCoordinate { .. }) => "bad_coordinate",
            QueryError::Invalid(InvalidTrace::MinsAboveMaxs) => "mins_above_maxs",
            QueryError::Invalid(InvalidTrace::BadShape(_) | InvalidTrace::ExactUnavailable) => {
                "bad_shape"
            }
            QueryError::PointWithTrace => "mixed_query",
            QueryError::ShapeWithBox => "mixed_query",
            QueryError::HullWithShape => "mixed_query",
            QueryError::UnknownHull(_) => "unknown_hull",
            QueryError::Scene(e) => scene_error_code(e),
            QueryError::SceneWithQuery => "mixed_query",
            QueryError::SceneUnsupported => "scene_unsupported",
            QueryError::Movement(e) => e.code(),
            QueryError::MovementWithQuery => "mixed_query",
            QueryError::MovementUnsupported => "movement_unsupported",
            QueryError::Bots(e) => e.code(),
        }
    }
}

/// A point as the kernel takes it (checked there, named by `field`).
pub(crate) fn vec(field: &'static str, v: [f64; 3]) -> Result<Vec3, InvalidTrace> {
    crate::trace::checked_point(field, Vec3::new(v[0] as f32, v[1] as f32, v[2] as f32))
}

impl QueryLine {
    /// Parses one JSON line.
    pub fn parse(line: &str) -> Result<QueryLine, QueryError> {
        serde_json::from_str(line).map_err(|e| QueryError::Malformed(e.to_string()))
    }

    /// Checks the line and turns it into the query it describes (how to
    /// answer it, `any`, is read by [`QueryLine::request`]).
    pub fn validate(&self) -> Result<Query, QueryError> {
        self.validate_with(&mut LastShape::default())
    }

    /// [`QueryLine::validate`], reusing `last`'s shape when this line's is
    /// the same (see [`requests`]).
    fn validate_with(&self, last: &mut LastShape) -> Result<Query, QueryError> {
        if self.entities.is_some() {
            return Err(QueryError::SceneUnsupported);
        }
        if self.is_movement() {
            return Err(QueryError::MovementUnsupported);
        }
        if self.is_bot() {
            return Err(crate::bots::BotsError::NotATrace.into());
        }
        if let Some(p) = self.point {
            // A mask would be silently ignored: point contents is every
            // content flag at the point.
            if self.start.is_some()
                || self.end.is_some()
                || self.mask.is_some()
                || self.mins.is_some()
                || self.maxs.is_some()
                || self.any.is_some()
                || self.shape.is_some()
                || self.exact.is_some()
                || self.hull.is_some()
            {
                return Err(QueryError::PointWithTrace);
            }
            return Ok(Query::Point(vec("point", p)?));
        }
        let start = vec("start", self.start.ok_or(QueryError::Missing("start"))?)?;
        let end = vec("end", self.end.ok_or(QueryError::Missing("end"))?)?;
        let mins = vec("mins", self.mins.unwrap_or_default())?;
        let maxs = vec("maxs", self.maxs.unwrap_or_default())?;
        let mask = self.mask.unwrap_or(crate::contents::MASK_SOLID);
        let boxed = TraceQuery::boxed(start, end, mins, maxs, mask)?;
        if let Some(name) = &self.hull {
            if self.mins.is_some()
                || self.maxs.is_some()
                || self.shape.is_some()
                || self.exact.is_some()
            {
                return Err(QueryError::HullWithShape);
            }
            return Err(QueryError::UnknownHull(format!(
                "hull {name:?}: hull traces are answered against a loaded world only"
            )));
        }
        let exact = self.exact.unwrap_or(false);
        let boxed = boxed.with_exact(exact)?;
        let Some(line) = &self.shape else {
            return Ok(Query::Trace(boxed));
        };
        if self.mins.is_some() || self.maxs.is_some() {
            return Err(QueryError::ShapeWithBox);
        }
        let shaped = TraceQuery::shaped(start, end, last.validate(line)?, mask)?;
        Ok(Query::Trace(shaped.with_exact(exact)?))
    }

    /// Checks the line and says what to answer: the query in full, or
    /// (`"any":true`) only whether the trace hits anything.
    /// Hull lines need the world: this rejects them (see [`Self::request_in`]).
    pub fn request(&self) -> Result<Request, QueryError> {
        self.request_with(&mut LastShape::default())
    }

    fn request_with(&self, last: &mut LastShape) -> Result<Request, QueryError> {
        if let Some(bot) = self.bot() {
            return bot.map(Request::Bots);
        }
        if let Some(movement) = self.movement(None) {
            return movement.map(Request::Movement);
        }
        Ok(match (self.validate_with(last)?, self.any) {
            (Query::Trace(q), Some(true)) => Request::AnyHit(q),
            (q, _) => Request::Query(q),
        })
    }

    /// [`Self::request`] for answering against `world`: hull names are looked
    /// up in it (an unknown hull is an error of this line).
    pub fn request_in(&self, world: &crate::trace::Kernel) -> Result<Request, QueryError> {
        if let Some(bot) = self.bot() {
            if let Ok(crate::bots::BotRequest::Pvs(p)) = &bot {
                crate::bots::pvs::check_in(&world.world, p)?;
            }
            return bot.map(Request::Bots);
        }
        if let Some(movement) = self.movement(Some(world)) {
            return movement.map(Request::Movement);
        }
        let Some(name) = &self.hull else {
            return self.request();
        };
        // Everything but the name, checked as for any line.
        let unnamed = QueryLine {
            hull: None,
            ..self.clone()
        };
        if self.mins.is_some()
            || self.maxs.is_some()
            || self.shape.is_some()
            || self.exact.is_some()
        {
            return Err(QueryError::HullWithShape);
        }
        let Query::Trace(q) = unnamed.validate()? else {
            return Err(QueryError::PointWithTrace);
        };
        let query = HullQuery::new(world, name, q.start, q.end, q.mask).map_err(|e| match e {
            HullError::Invalid(invalid) => QueryError::Invalid(invalid),
            unknown @ HullError::UnknownHull { .. } => QueryError::UnknownHull(unknown.to_string()),
        })?;
        Ok(Request::Hull {
            query,
            any: self.any == Some(true),
        })
    }
}

impl QueryLine {
    /// For a scene line `{"entities":[…]}`, the scene it sets.
    pub fn scene(&self) -> Option<Result<Scene, QueryError>> {
        let entities = self.entities.as_ref()?;
        let alone = QueryLine {
            entities: None,
            ..QueryLine::default()
        } == QueryLine {
            entities: None,
            ..self.clone()
        };
        Some(if alone {
            scene_of(entities).map_err(QueryError::Scene)
        } else {
            Err(QueryError::SceneWithQuery)
        })
    }

    /// The entity making the move ([`crate::scene::ENTITY_NONE`] if none);
    /// a movement line names it inside its object.
    pub fn pass(&self) -> Result<u32, QueryError> {
        let inner = match (&self.ground, &self.slide, &self.predict) {
            (Some(g), _, _) => g.pass,
            (_, Some(s), _) => s.pass,
            (_, _, Some(p)) => p.pass,
            _ => self.pass,
        };
        pass_of(inner)
    }

    /// Whether this is a bot line (`sight`, `pvs`, `walk`).
    pub fn is_bot(&self) -> bool {
        self.sight.is_some() || self.pvs.is_some() || self.walk.is_some()
    }

    /// For a bot line, what it asks (checked); it holds its one object and
    /// nothing else.
    pub fn bot(&self) -> Option<Result<crate::bots::BotRequest, QueryError>> {
        use crate::bots::BotRequest;
        if !self.is_bot() {
            return None;
        }
        let alone = QueryLine {
            sight: self.sight.clone(),
            pvs: self.pvs.clone(),
            walk: self.walk.clone(),
            ..QueryLine::default()
        } == *self;
        Some(
            match (&self.sight, &self.pvs, &self.walk) {
                (Some(sight), None, None) if alone => sight.check().map(BotRequest::Sight),
                (None, Some(pvs), None) if alone => pvs.check().map(BotRequest::Pvs),
                (None, None, Some(walk)) if alone => walk.check().map(BotRequest::Walk),
                _ => Err(crate::bots::BotsError::WithQuery),
            }
            .map_err(QueryError::from),
        )
    }

    /// Whether this is a movement line (`ground`, `slide` or `predict`).
    pub fn is_movement(&self) -> bool {
        self.ground.is_some() || self.slide.is_some() || self.predict.is_some()
    }

    /// For a movement line, the movement it asks for (hulls looked up in
    /// `world`; without one, a hull is refused). A movement line holds one
    /// movement object and nothing else.
    pub fn movement(
        &self,
        world: Option<&crate::trace::Kernel>,
    ) -> Option<Result<MovementQuery, QueryError>> {
        if !self.is_movement() {
            return None;
        }
        let alone = QueryLine {
            ground: self.ground.clone(),
            slide: self.slide.clone(),
            predict: self.predict.clone(),
            ..QueryLine::default()
        } == *self;
        let objects = [
            self.ground.is_some(),
            self.slide.is_some(),
            self.predict.is_some(),
        ];
        if !alone || objects.iter().filter(|&&o| o).count() > 1 {
            return Some(Err(QueryError::MovementWithQuery));
        }
        Some(match (&self.ground, &self.slide, &self.predict) {
            (Some(g), _, _) => g.query(world),
            (_, Some(s), _) => s.query(world),
            (_, _, Some(p)) => p.query(world),
            _ => Err(QueryError::MovementWithQuery),
        })
    }
}

/// The stable code of a refused scene.
fn scene_error_code(e: &SceneError) -> &'static str {
    match e {
        SceneError::IdOutOfRange { .. } | SceneError::RepeatedId { .. } => "bad_entity_id",
        SceneError::BadOwner { .. } => "bad_entity_id",
        SceneError::UnknownModel { .. } => "unknown_model",
        SceneError::Invalid {
            error: InvalidTrace::MinsAboveMaxs,
            ..
        } => "mins_above_maxs",
        SceneError::Invalid { .. } => "bad_coordinate",
        SceneError::TooMany => "too_many_entities",
        SceneError::Malformed { .. } | SceneError::BoxModel { .. } => "malformed_entity",
    }
}

/// The last shape a batch validated: a line with the same shape line shares
/// it (for a convex shape, the hull is built once, not once per query).
#[derive(Default)]
struct LastShape(Option<(ShapeLine, Shape)>);

impl LastShape {
    fn validate(&mut self, line: &ShapeLine) -> Result<Shape, QueryError> {
        if let Some((seen, shape)) = &self.0 {
            if same_bits(seen, line) {
                return Ok(shape.clone());
            }
        }
        let shape = line.validate()?;
        self.0 = Some((line.clone(), shape.clone()));
        Ok(shape)
    }
}

/// Whether two shape lines are the same to the bit (so that sharing a shape
/// never changes an answer, not even the sign of a zero).
fn same_bits(a: &ShapeLine, b: &ShapeLine) -> bool {
    let eq = |x: &f64, y: &f64| x.to_bits() == y.to_bits();
    match (a, b) {
        (ShapeLine::Sphere { radius: r1 }, ShapeLine::Sphere { radius: r2 }) => eq(r1, r2),
        (
            ShapeLine::Capsule {
                radius: r1,
                half_height: h1,
            },
            ShapeLine::Capsule {
                radius: r2,
                half_height: h2,
            },
        )
        | (
            ShapeLine::Cylinder {
                radius: r1,
                half_height: h1,
            },
            ShapeLine::Cylinder {
                radius: r2,
                half_height: h2,
            },
        ) => eq(r1, r2) && eq(h1, h2),
        (ShapeLine::Convex { points: p1 }, ShapeLine::Convex { points: p2 }) => {
            p1.len() == p2.len()
                && p1
                    .iter()
                    .flatten()
                    .zip(p2.iter().flatten())
                    .all(|(x, y)| eq(x, y))
        }
        _ => false,
    }
}

/// Checks a batch of lines (see [`QueryLine::request`]); runs of lines with
/// the same shape share one validated shape, so a batch sent with one convex
/// shape (a gRPC `TraceRequest.swept`) builds its hull once. On error, the
/// index of the first bad line.
pub fn requests(lines: &[QueryLine]) -> Result<Vec<Request>, (usize, QueryError)> {
    let mut last = LastShape::default();
    lines
        .iter()
        .enumerate()
        .map(|(index, line)| line.request_with(&mut last).map_err(|e| (index, e)))
        .collect()
}

/// [`requests`] for one world, which also resolves `"hull"` names, of
/// traces and of movement lines ([`QueryLine::request_in`]).
pub fn requests_in(
    lines: &[QueryLine],
    world: &crate::trace::Kernel,
) -> Result<Vec<Request>, (usize, QueryError)> {
    let mut last = LastShape::default();
    lines
        .iter()
        .enumerate()
        .map(|(index, line)| {
            // (A movement line's hull is inside its object.)
            if line.hull.is_some() || line.is_movement() || line.pvs.is_some() {
                line.request_in(world)
            } else {
                line.request_with(&mut last)
            }
            .map_err(|e| (index, e))
        })
        .collect()
}

impl ShapeLine {
    /// Builds the kernel's shape (sizes are checked when it is put in a
    /// query, a convex hull's points when it is built).
    pub fn validate(&self) -> Result<Shape, InvalidTrace> {
        let f = |v: f64| v as f32;
        Ok(match self {
            ShapeLine::Sphere { radius } => Shape::Sphere { radius: f(*radius) },
            ShapeLine::Capsule {
                radius,
                half_height,
            } => Shape::Capsule {
                radius: f(*radius),
                half_height: f(*half_height),
            },
            ShapeLine::Cylinder {
                radius,
                half_height,
            } => Shape::Cylinder {
                radius: f(*radius),
                half_height: f(*half_height),
            },
            ShapeLine::Convex { points } => {
                let points: Vec<Vec3> = points.iter().map(|p| Vec3::from_array(p.map(f))).collect();
                Shape::Convex(std::sync::Arc::new(ConvexHull::new(&points)?))
            }
        })
    }

    /// The line form of a kernel shape (a convex shape by its hull's points).
    pub fn from_shape(shape: &Shape) -> ShapeLine {
        let f = |v: f32| v as f64;
        match shape {
            Shape::Sphere { radius } => ShapeLine::Sphere { radius: f(*radius) },
            Shape::Capsule {
                radius,
                half_height,
            } => ShapeLine::Capsule {
                radius: f(*radius),
                half_height: f(*half_height),
            },
            Shape::Cylinder {
                radius,
                half_height,
            } => ShapeLine::Cylinder {
                radius: f(*radius),
                half_height: f(*half_height),
            },
            Shape::Convex(hull) => ShapeLine::Convex {
                points: hull
                    .points()
                    .iter()
                    .map(|p| (*p + shape.centre()).to_array().map(f))
                    .collect(),
            },
        }
    }
}

/// An answer line. (Untagged: a ground answer is a trace answer with
/// `walkable`, so it is tried first.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Answer {
    Ground(GroundAnswer),
    Slide(SlideAnswer),
    Predict(Box<PredictAnswer>),
    Trace(TraceAnswer),
    Point(PointAnswer),
    Hit(HitAnswer),
    Scene(SceneAnswer),
    Bots(crate::bots::BotAnswer),
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TraceAnswer {
    pub fraction: f32,
    pub endpos: [f32; 3],
    pub normal: [f32; 3],
    pub dist: f32,
    pub startsolid: bool,
    pub allsolid: bool,
    pub contents: u32,
    pub surface_flags: u32,
    /// With a scene: the entity that stopped the move (1022 the world, 1023
    /// nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PointAnswer {
    pub contents: u32,
}

/// The answer to an any-hit trace: `hit` is exactly `fraction < 1` of the
/// full trace of the same line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HitAnswer {
    pub hit: bool,
}

impl From<&TraceResult> for TraceAnswer {
    fn from(r: &TraceResult) -> Self {
        TraceAnswer {
            fraction: r.fraction,
            endpos: r.endpos.to_array(),
            normal: r.normal.to_array(),
            dist: r.dist,
            startsolid: r.startsolid,
            allsolid: r.allsolid,
            contents: r.contents,
            surface_flags: r.surface_flags,
            entity: None,
        }
    }
}

impl Answer {
    pub fn to_json(&self) -> String {
        // Serialising plain numbers and bools cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Answers one validated query.
pub fn answer(
    world: &crate::trace::Kernel,
    scratch: &mut crate::trace::Scratch,
    query: &Query,
) -> Answer {
    match query {
        Query::Trace(q) => {
            Answer::Trace(TraceAnswer::from(&crate::trace::trace(world, q, scratch)))
        }
        Query::Point(p) => Answer::Point(PointAnswer {
            contents: crate::trace::point_contents(world, *p),
        }),
    }
}

/// Answers one validated line.
pub fn answer_request(
    world: &crate::trace::Kernel,
    scratch: &mut crate::trace::Scratch,
    request: &Request,
) -> Answer {
    match request {
        Request::Query(q) => answer(world, scratch, q),
        Request::AnyHit(q) => Answer::Hit(HitAnswer {
            hit: crate::trace::any_hit(world, q, scratch),
        }),
        Request::Movement(m) => answer_movement(world, scratch, m),
        Request::Bots(b) => Answer::Bots(crate::bots::answer(
            world,
            b,
            &crate::trace::BatchOptions::single_thread(),
        )),
        Request::Hull { query, any } => {
            let r = crate::trace::trace_hull(world, query, scratch);
            if *any {
                Answer::Hit(HitAnswer {
                    hit: r.fraction < 1.0,
                })
            } else {
                Answer::Trace(TraceAnswer::from(&r))
            }
        }
    }
}

/// Answers validated lines in order through the batch runner (large lists
/// are split across threads, and traces that surely touch nothing are
/// answered by its first pass); each answer is the one [`answer_request`]
/// gives.
pub fn answer_all(
    world: &crate::trace::Kernel,
    requests: &[Request],
    options: &crate::trace::BatchOptions,
) -> Vec<Answer> {
    let sieve = Sieve::new(world);
    // Points and hulls are not for the first pass: in their lanes it sees
    // a position test, which it never answers.
    let idle = TraceQuery::IDLE;
    let trace_of = |i: usize| match &requests[i] {
        Request::Query(Query::Trace(q)) | Request::AnyHit(q) => q,
        _ => &idle,
    };
    crate::trace::run_batch_sifted(
        requests.len(),
        options,
        |[a, b, c, d]| sieve.touch_nothing([trace_of(a), trace_of(b), trace_of(c), trace_of(d)]),
        |i| match &requests[i] {
            Request::Query(Query::Trace(q)) => Answer::Trace(TraceAnswer::from(&missed(q))),
            Request::AnyHit(_) => Answer::Hit(HitAnswer { hit: false }),
            // (Never sifted out; answered in full all the same.)
            other => answer_request(world, &mut crate::trace::Scratch::new(), other),
        },
        |i, scratch| match &requests[i] {
            // A matrix is a batch of its own, on the batch's threads.
            Request::Bots(b) => Answer::Bots(crate::bots::answer(world, b, options)),
            other => answer_request(world, scratch, other),
        },
    )
}

/// The JSON error line written in place of an answer to a bad query line.
pub fn error_json(err: &QueryError, line_index: usize) -> String {
    error_line(err.code(), &err.to_string(), line_index)
}

/// [`error_json`] from an error's code and message (as a server sends them).
pub fn error_line(code: &str, message: &str, line_index: usize) -> String {
    serde_json::json!({"error": {"code": code, "message": message, "query_index": line_index}})
        .to_string()
}

/// The lines of query text in `reader` (ended by `\n` or `\r\n`, as
/// [`std::io::BufRead::lines`] ends them). A line that is not UTF-8 is a
/// [`QueryError::Malformed`] of its own rather than an error that ends the
/// input, so it is reported as any other bad line is.
pub fn query_lines<R: std::io::BufRead>(
    reader: R,
) -> impl Iterator<Item = std::io::Result<Result<String, QueryError>>> {
    reader.split(b'\n').map(|line| {
        line.map(|mut bytes| {
            if bytes.last() == Some(&b'\r') {
                bytes.pop();
            }
            String::from_utf8(bytes)
                .map_err(|_| QueryError::Malformed("the line is not valid UTF-8".into()))
        })
    })
}
