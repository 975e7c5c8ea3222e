//! The transport-free core of the server: limits, validation, running
//! batches, describing worlds, and the one table that maps every error to an
//! HTTP status and a gRPC code. Transports convert wire types and call this.

use crate::math::Vec3;
use crate::query::{
    answer_all, scene_of, Answer, EntityLine, Query, QueryError, QueryLine, Request, SceneStream,
};
use crate::registry::{valid_world_name, Registry, WorldVersion};
use crate::scene::{PlacedScene, ENTITY_NONE};
use crate::trace::{
    any_hit_queries, trace_queries, BatchOptions, BatchResults, TraceQuery, TraceResult,
};
use serde::Serialize;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

pub mod floor;
pub mod geometry;
use subtle::ConstantTimeEq;
use thiserror::Error;

/// Request limits, configurable, with safe defaults.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_queries_per_request: usize,
    pub max_body_bytes: usize,
    pub max_upload_bytes: usize,
    /// Queries held at once over all requests (admission control).
    pub max_queries_in_flight: usize,
    /// Bytes of query request bodies (HTTP bodies, gRPC `Trace` and
    /// `PointContents` messages) held at once, from their head until their
    /// answer is sent: admitted before a body is read.
    pub max_body_bytes_in_flight: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_queries_per_request: 65_536,
            max_body_bytes: 32 << 20,
            max_upload_bytes: 256 << 20,
            max_queries_in_flight: 1 << 19,
            max_body_bytes_in_flight: 64 << 20,
        }
    }
}

/// Every error a request can meet.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ServiceError {
    #[error("no world named {0:?}")]
    UnknownWorld(String),
    /// A name that is not serving because its loads failed (GET
    /// /v1/worlds/NAME shows it as failed): 404 too, saying why.
    #[error("world {name:?} is not serving: its last load failed: {error}")]
    NotServing { name: String, error: String },
    #[error("invalid world name {0:?}: {rule}", rule = world_name_rule(.0))]
    BadWorldName(String),
    #[error("query {index}: {error}")]
    BadQuery { index: usize, error: QueryError },
    /// The request's own scene (not a scene line among its queries).
    #[error("scene: {0}")]
    BadScene(QueryError),
    #[error("{count} queries in one request; the limit is {limit}")]
    TooManyQueries { count: usize, limit: usize },
    #[error("{0}")]
    Malformed(String),
    #[error("a valid admin token is required")]
    Unauthenticated,
    #[error("admin routes are disabled (no admin token configured)")]
    AdminDisabled,
    #[error("the world did not load: {0}")]
    LoadFailed(String),
    #[error("request body exceeds the limit of {0} bytes")]
    TooLarge(usize),
    /// Admission control: the queries held by the server would pass its
    /// budget.
    #[error("the server holds its budget of {budget} queries; this batch of {queries} is refused: retry later or on another replica")]
    Overloaded { queries: usize, budget: usize },
    /// Admission control before a body is read: the request bodies held
    /// by the server would pass its byte budget.
    #[error("the server holds its budget of {budget} bytes of request bodies; this body of {bytes} bytes is refused: retry later or on another replica")]
    BodiesOverloaded { bytes: usize, budget: usize },
    #[error("the server holds its maximum of open connections; retry later or on another replica")]
    TooManyConnections,
    #[error("internal error: {0}")]
    Internal(String),
    #[error("no route {0:?} (see GET /v1/worlds)")]
    NoSuchRoute(String),
    #[error("method {0} is not allowed here (the Allow header lists those that are)")]
    MethodNotAllowed(String),
    #[error("the server is shutting down; retry on another replica or after a restart")]
    ShuttingDown,
    /// A bot request (sight matrix, walk test) that cannot be answered.
    #[error(transparent)]
    Bots(crate::bots::BotsError),
    /// A request head the HTTP parser refused (the router never saw it).
    #[error("the request line or a header is not valid HTTP/1.1 (paths and queries are percent-encoded ASCII)")]
    BadRequestHead,
    #[error("the request path and query are longer than the server reads")]
    UriTooLong,
    #[error("the request head (request line and headers) is larger than the server reads")]
    HeadersTooLarge,
    #[error("the geometry has {triangles} triangles; the limit is {limit} (ask for one model or a narrower mask)")]
    GeometryTooLarge { triangles: usize, limit: usize },
    #[error("the floor grid has {cells} cells; the limit is {limit} (a coarser spacing or a smaller rectangle)")]
    GridTooLarge { cells: usize, limit: usize },
    /// A floor grid's dropped shape, refused as a trace line's would be.
    #[error("floor grid: {0}")]
    BadGrid(QueryError),
}

/// The longest error message sent to a client, in bytes (before the
/// marker saying how much was cut).
pub const MAX_ERROR_MESSAGE_BYTES: usize = 512;

/// `message` cut to [`MAX_ERROR_MESSAGE_BYTES`] on a character boundary,
/// saying how many bytes were left out.
fn capped_message(mut message: String) -> String {
    if message.len() <= MAX_ERROR_MESSAGE_BYTES {
        return message;
    }
    let mut end = MAX_ERROR_MESSAGE_BYTES;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    let cut = message.len() - end;
    message.truncate(end);
    message.push_str(&format!("… ({cut} more bytes)"));
    message
}

/// Why a rejected world name is invalid.
fn world_name_rule(name: &str) -> &'static str {
    if name == "." || name == ".." {
        "`.` and `..` are reserved"
    } else {
        "names match [A-Za-z0-9_.-]{1,64}"
    }
}

/// gRPC status codes (numbers from the gRPC specification).
pub mod grpc_code {
    pub const INVALID_ARGUMENT: i32 = 3;
    pub const NOT_FOUND: i32 = 5;
    pub const PERMISSION_DENIED: i32 = 7;
    pub const RESOURCE_EXHAUSTED: i32 = 8;
    pub const FAILED_PRECONDITION: i32 = 9;
    pub const UNIMPLEMENTED: i32 = 12;
    pub const INTERNAL: i32 = 13;
    pub const UNAVAILABLE: i32 = 14;
    pub const UNAUTHENTICATED: i32 = 16;
}

impl ServiceError {
    /// Stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            ServiceError::UnknownWorld(_) | ServiceError::NotServing { .. } => "unknown_world",
            ServiceError::BadWorldName(_) => "bad_world_name",
            ServiceError::BadQuery { error, .. }
            | ServiceError::BadScene(error)
            | ServiceError::BadGrid(error) => error.code(),
            ServiceError::TooManyQueries { .. } => "too_many_queries",
            ServiceError::Malformed(_) => "malformed_request",
            ServiceError::Unauthenticated => "unauthenticated",
            ServiceError::AdminDisabled => "admin_disabled",
            ServiceError::LoadFailed(_) => "load_failed",
            ServiceError::TooLarge(_) => "too_large",
            ServiceError::Overloaded { .. } | ServiceError::BodiesOverloaded { .. } => "overloaded",
            ServiceError::TooManyConnections => "too_many_connections",
            ServiceError::Internal(_) => "internal",
            ServiceError::NoSuchRoute(_) => "not_found",
            ServiceError::MethodNotAllowed(_) => "method_not_allowed",
            ServiceError::ShuttingDown => "unavailable",
            ServiceError::Bots(e) => e.code(),
            ServiceError::BadRequestHead => "malformed_request",
            ServiceError::UriTooLong => "uri_too_long",
            ServiceError::HeadersTooLarge => "headers_too_large",
            ServiceError::GeometryTooLarge { .. } => "geometry_too_large",
            ServiceError::GridTooLarge { .. } => "grid_too_large",
        }
    }

    /// (HTTP status, gRPC code): the one mapping every transport uses.
    pub fn statuses(&self) -> (u16, i32) {
        use grpc_code::*;
        match self {
            ServiceError::UnknownWorld(_) | ServiceError::NotServing { .. } => (404, NOT_FOUND),
            ServiceError::Bots(crate::bots::BotsError::NoVisibility) => (409, FAILED_PRECONDITION),
            ServiceError::BadWorldName(_)
            | ServiceError::BadQuery { .. }
            | ServiceError::BadScene(_)
            | ServiceError::TooManyQueries { .. }
            | ServiceError::Malformed(_)
            | ServiceError::LoadFailed(_)
            | ServiceError::GridTooLarge { .. }
            | ServiceError::BadGrid(_)
            | ServiceError::Bots(_) => (400, INVALID_ARGUMENT),
            ServiceError::Unauthenticated => (401, UNAUTHENTICATED),
            ServiceError::AdminDisabled => (403, PERMISSION_DENIED),
            ServiceError::TooLarge(_) => (413, RESOURCE_EXHAUSTED),
            ServiceError::Overloaded { .. } | ServiceError::BodiesOverloaded { .. } => {
                (429, RESOURCE_EXHAUSTED)
            }
            ServiceError::TooManyConnections => (503, UNAVAILABLE),
            ServiceError::Internal(_) => (500, INTERNAL),
            ServiceError::NoSuchRoute(_) => (404, UNIMPLEMENTED),
            ServiceError::MethodNotAllowed(_) => (405, UNIMPLEMENTED),
            ServiceError::ShuttingDown => (503, UNAVAILABLE),
            ServiceError::BadRequestHead => (400, INVALID_ARGUMENT),
            ServiceError::UriTooLong => (414, RESOURCE_EXHAUSTED),
            ServiceError::HeadersTooLarge => (431, RESOURCE_EXHAUSTED),
            ServiceError::GeometryTooLarge { .. } => (413, RESOURCE_EXHAUSTED),
        }
    }

    /// The first bad query: for too many queries, the first past the limit.
    pub fn query_index(&self) -> Option<usize> {
        match self {
            ServiceError::BadQuery { index, .. } => Some(*index),
            ServiceError::TooManyQueries { limit, .. } => Some(*limit),
            _ => None,
        }
    }

    /// The JSON error body: `{"error":{"code","message","query_index"}}`.
    /// The message is cut to [`MAX_ERROR_MESSAGE_BYTES`]: it quotes what the
    /// client sent (a name, a path, a field), and a megabyte name must not
    /// come back as a megabyte answer (nor push a gRPC status message past
    /// the client's header limit, which turns the error into another one).
    pub fn to_json(&self) -> serde_json::Value {
        let message = capped_message(self.to_string());
        let mut error = serde_json::json!({"code": self.code(), "message": message});
        if let Some(i) = self.query_index() {
            error["query_index"] = i.into();
        }
        serde_json::json!({ "error": error })
    }
}

/// Answers to one batch, naming the world version that answered and the
/// content it was built from (`source_hash`, as `GET /v1/worlds/{name}`
/// reports it: the same on every replica for the same map).
#[derive(Debug, Clone, Serialize)]
pub struct BatchAnswer {
    pub world: String,
    pub version: u64,
    pub source_hash: String,
    pub results: Vec<Answer>,
}

/// A trace batch in packed form, as the gRPC messages carry it: `x,y,z` per
/// query in `starts` and `ends`, one box or shape, mask, `exact` and `any`
/// for the whole batch (`template`; its `start`, `end` and `point` are
/// ignored), optionally a mask and a pass per query. A tick mixes more in
/// one batch: a shape per query from a small table, any-hit per query, and
/// points answered after the traces. Checked by the same rules as query
/// lines, in the same order, so a bad query gets the same error and index
/// either way ([`PackedTraces::lines`] gives those lines: the traces, then
/// the points, then the movement lines).
#[derive(Debug, Clone, Default)]
pub struct PackedTraces<'a> {
    pub starts: &'a [f32],
    pub ends: &'a [f32],
    pub template: QueryLine,
    pub masks: &'a [u32],
    /// Per-query `pass` (empty: the template's for all).
    pub passes: &'a [u32],
    /// The scene the batch is traced with.
    pub scene: Option<Vec<EntityLine>>,
    /// A tick's shape table: lines holding only shape fields (`mins` and
    /// `maxs`, `shape`, `exact`, `hull`; none: a ray) ...
    pub shapes: Vec<QueryLine>,
    /// ... and each query's entry in it (empty: the template's shape for
    /// all; else one per query, and the template holds no shape).
    pub shape_index: &'a [u32],
    /// Per-query any-hit (empty: the template's `any` for all).
    pub any_hits: &'a [bool],
    /// Points (`x,y,z` each) whose contents are answered after the traces.
    pub points: &'a [f32],
    /// Per-point `pass` (empty: the template's for all).
    pub point_passes: &'a [u32],
    /// Movement lines (`ground`, `slide`, `predict`) answered after the
    /// points, their shapes already taken from the table.
    pub movement: Vec<QueryLine>,
}

/// Answers to a packed batch: full traces, whether each hits (`any`), or
/// both for a tick with any-hit per query.
#[derive(Debug, Clone, PartialEq)]
pub enum PackedResults {
    Traces(BatchResults),
    Hits(Vec<bool>),
    /// Every query's entry in both: a full trace's hit is its `fraction <
    /// 1`; an any-hit query (`hit_only`) has a zero trace entry.
    Mixed {
        traces: BatchResults,
        hits: Vec<bool>,
        hit_only: Vec<bool>,
    },
}

impl PackedResults {
    /// Number of traces answered.
    pub fn len(&self) -> usize {
        match self {
            PackedResults::Traces(t) => t.len(),
            PackedResults::Hits(h) | PackedResults::Mixed { hits: h, .. } => h.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Answers to a packed batch, naming the world version that answered.
#[derive(Debug, Clone, PartialEq)]
pub struct PackedAnswer {
    pub world: String,
    pub version: u64,
    pub source_hash: String,
    pub results: PackedResults,
    /// With a scene: per query, the entity that gave the answer
    /// ([`ENTITY_NONE`] for an any-hit query of a tick).
    pub entities: Vec<u32>,
    /// The contents at each of the batch's points.
    pub point_contents: Vec<u32>,
    /// The answers to the batch's movement lines, in order.
    pub movement: Vec<Answer>,
}

/// The trace entry of an any-hit query in a tick's mixed answers.
const HIT_ONLY_ENTRY: TraceResult = TraceResult {
    fraction: 0.0,
    endpos: Vec3::ZERO,
    normal: Vec3::ZERO,
    dist: 0.0,
    startsolid: false,
    allsolid: false,
    contents: 0,
    surface_flags: 0,
};

impl PackedAnswer {
    /// The answers of [`PackedTraces::lines`] packed: `mixed` when the
    /// batch asked any-hit per query, `in_scene` when it had a scene.
    fn of_lines(answer: BatchAnswer, mixed: bool, in_scene: bool) -> Self {
        let mut traces = BatchResults::default();
        let (mut hits, mut hit_only) = (Vec::new(), Vec::new());
        let (mut entities, mut point_contents, mut movement) = (Vec::new(), Vec::new(), Vec::new());
        for a in &answer.results {
            match a {
                Answer::Trace(t) => {
                    entities.extend(t.entity);
                    traces.push(&TraceResult {
                        fraction: t.fraction,
                        endpos: Vec3::from_array(t.endpos),
                        normal: Vec3::from_array(t.normal),
                        dist: t.dist,
                        startsolid: t.startsolid,
                        allsolid: t.allsolid,
                        contents: t.contents,
                        surface_flags: t.surface_flags,
                    });
                    hits.push(t.fraction < 1.0);
                    hit_only.push(false);
                }
                Answer::Hit(h) => {
                    if in_scene {
                        entities.push(ENTITY_NONE);
                    }
                    traces.push(&HIT_ONLY_ENTRY);
                    hits.push(h.hit);
                    hit_only.push(true);
                }
                Answer::Point(p) => point_contents.push(p.contents),
                Answer::Ground(_) | Answer::Slide(_) | Answer::Predict(_) => {
                    movement.push(a.clone())
                }
                // Packed batches carry no scene or bot lines.
                Answer::Scene(_) | Answer::Bots(_) => {}
            }
        }
        let results = if mixed {
            PackedResults::Mixed {
                traces,
                hits,
                hit_only,
            }
        } else if !hit_only.is_empty() && hit_only.iter().all(|&h| h) {
            PackedResults::Hits(hits)
        } else {
            PackedResults::Traces(traces)
        };
        PackedAnswer {
            world: answer.world,
            version: answer.version,
            source_hash: answer.source_hash,
            results,
            entities,
            point_contents,
            movement,
        }
    }
}

impl PackedTraces<'_> {
    /// Number of queries (traces, points and movement lines), once the
    /// array lengths are checked.
    pub fn count(&self) -> Result<usize, ServiceError> {
        Ok(self.trace_count()? + self.point_count()? + self.movement.len())
    }

    /// Whether the batch uses a tick's per-query shapes, any-hit, points or
    /// movement.
    pub fn is_tick(&self) -> bool {
        !self.shape_index.is_empty()
            || !self.any_hits.is_empty()
            || !self.points.is_empty()
            || !self.movement.is_empty()
    }

    fn trace_count(&self) -> Result<usize, ServiceError> {
        let n = triples("starts", self.starts)?;
        let ends = triples("ends", self.ends)?;
        if n != ends {
            return Err(ServiceError::Malformed(format!(
                "`starts` holds {n} queries but `ends` holds {ends}"
            )));
        }
        let per_query = |field: &str, len: usize| {
            if len != 0 && len != n {
                return Err(ServiceError::Malformed(format!(
                    "`{field}` holds {len} values for {n} queries (send none or one per query)"
                )));
            }
            Ok(())
        };
        per_query("masks", self.masks.len())?;
        per_query("passes", self.passes.len())?;
        per_query("shape_index", self.shape_index.len())?;
        per_query("any_hits", self.any_hits.len())?;
        // (Movement lines may use the table when the traces do not.)
        if self.shape_index.is_empty() && !self.shapes.is_empty() && self.movement.is_empty() {
            return Err(ServiceError::Malformed(
                "`shapes` without `shape_index` (one entry per query)".into(),
            ));
        }
        if !self.shape_index.is_empty() {
            let t = &self.template;
            if t.mins.is_some()
                || t.maxs.is_some()
                || t.shape.is_some()
                || t.exact.is_some()
                || t.hull.is_some()
            {
                return Err(ServiceError::Malformed(
                    "`shape_index` with a batch shape (`shape`, `swept`, `hull` or `exact`): send one or the other".into(),
                ));
            }
            if let Some((query, &k)) = self
                .shape_index
                .iter()
                .enumerate()
                .find(|(_, &k)| k as usize >= self.shapes.len())
            {
                return Err(ServiceError::Malformed(format!(
                    "query {query}: `shape_index` {k} is past the {} entries of `shapes`",
                    self.shapes.len()
                )));
            }
        }
        Ok(n)
    }

    fn point_count(&self) -> Result<usize, ServiceError> {
        let n = triples("points", self.points)?;
        if !self.point_passes.is_empty() && self.point_passes.len() != n {
            return Err(ServiceError::Malformed(format!(
                "`point_passes` holds {} values for {n} points (send none or one per point)",
                self.point_passes.len()
            )));
        }
        Ok(n)
    }

    /// Query `i` as a line (after [`PackedTraces::count`]).
    fn line(&self, i: usize) -> QueryLine {
        let template = match self.shape_index.get(i) {
            Some(&k) => {
                let shape = &self.shapes[k as usize];
                QueryLine {
                    mins: shape.mins,
                    maxs: shape.maxs,
                    shape: shape.shape.clone(),
                    exact: shape.exact,
                    hull: shape.hull.clone(),
                    ..self.template.clone()
                }
            }
            None => self.template.clone(),
        };
        QueryLine {
            start: Some(xyz(self.starts, i)),
            end: Some(xyz(self.ends, i)),
            point: None,
            mask: self.masks.get(i).copied().or(self.template.mask),
            pass: self.passes.get(i).map(|&p| p.into()).or(self.template.pass),
            any: match self.any_hits.get(i) {
                Some(&any) => any.then_some(true),
                None => self.template.any,
            },
            ..template
        }
    }

    /// Point `j` as a line.
    fn point_line(&self, j: usize) -> QueryLine {
        QueryLine {
            point: Some(xyz(self.points, j)),
            pass: self
                .point_passes
                .get(j)
                .map(|&p| p.into())
                .or(self.template.pass),
            ..QueryLine::default()
        }
    }

    /// The batch as query lines (the form HTTP takes; answers are the
    /// same): the traces, then the points, then the movement lines.
    pub fn lines(&self) -> Result<Vec<QueryLine>, ServiceError> {
        let (traces, points) = (self.trace_count()?, self.point_count()?);
        Ok((0..traces)
            .map(|i| self.line(i))
            .chain((0..points).map(|j| self.point_line(j)))
            .chain(self.movement.iter().cloned())
            .collect())
    }

    /// Validates every query: the first in full as a line, the rest only
    /// where they differ from it (start, end, mask), so a shape is checked
    /// and built once per batch. Not for ticks.
    fn queries(&self, n: usize) -> Result<Vec<TraceQuery>, ServiceError> {
        let bad = |index: usize| move |error: QueryError| ServiceError::BadQuery { index, error };
        if n == 0 {
            return Ok(Vec::new());
        }
        let first = match self.line(0).validate().map_err(bad(0))? {
            Query::Trace(q) => q,
            Query::Point(_) => {
                return Err(ServiceError::Malformed(
                    "a packed trace batch holds traces only".into(),
                ))
            }
        };
        let mut queries = Vec::with_capacity(n);
        for i in 0..n {
            let moved = |start, end| {
                let mask = self.masks.get(i).copied().or(self.template.mask);
                first.moved(start, end, mask.unwrap_or(crate::contents::MASK_SOLID))
            };
            let start = crate::query::vec("start", xyz(self.starts, i));
            let end = crate::query::vec("end", xyz(self.ends, i));
            let query = start
                .and_then(|start| moved(start, end?))
                .map_err(QueryError::from);
            queries.push(query.map_err(bad(i))?);
        }
        Ok(queries)
    }
}

/// Number of xyz triples in a packed array.
pub fn triples(field: &str, values: &[f32]) -> Result<usize, ServiceError> {
    if !values.len().is_multiple_of(3) {
        return Err(ServiceError::Malformed(format!(
            "`{field}` holds {} floats, not a multiple of 3 (x,y,z per query)",
            values.len()
        )));
    }
    Ok(values.len() / 3)
}

/// Triple `i` of a packed array (after [`triples`]).
pub fn xyz(values: &[f32], i: usize) -> [f64; 3] {
    [
        values[3 * i] as f64,
        values[3 * i + 1] as f64,
        values[3 * i + 2] as f64,
    ]
}

/// What `GET /v1/worlds/{name}` shows.
#[derive(Debug, Clone, Serialize)]
pub struct WorldDescription {
    pub name: String,
    pub version: u64,
    pub source: Option<String>,
    pub loaded_at: Option<String>,
    pub bounds: Option<Bounds>,
    pub curves: Option<bool>,
    pub hulls: Vec<String>,
    pub status: &'static str,
    pub last_error: Option<String>,
    pub failed_loads: u64,
    pub source_name: Option<String>,
    pub source_hash: Option<String>,
    pub counts: Option<Counts>,
    /// The inline models `*1`…`*N` of the serving version.
    pub models: Vec<ModelDescription>,
}

/// One inline model of a world, as a scene names it (`"*index"`).
#[derive(Debug, Clone, Serialize)]
pub struct ModelDescription {
    pub index: usize,
    pub bounds: Bounds,
    pub brushes: usize,
    pub patches: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Bounds {
    pub mins: [f32; 3],
    pub maxs: [f32; 3],
}

#[derive(Debug, Clone, Serialize)]
pub struct Counts {
    pub brushes: usize,
    pub patches: usize,
    pub nodes: usize,
    pub leaves: usize,
    pub bytes: usize,
}

/// The core shared by every transport.
/// What an upload answers: the version the world now serves as and the
/// content hash every later answer from it carries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Uploaded {
    pub version: u64,
    pub source_hash: String,
}

#[derive(Debug)]
pub struct Service {
    pub registry: Arc<Registry>,
    pub limits: Limits,
    /// How query batches are run (threads, smallest share of a thread).
    pub batch: BatchOptions,
    admin_token: Option<String>,
    /// Held while an upload is inflated, compiled and validated: one at a
    /// time, so that their memory (up to a few times `max_upload_bytes`
    /// each) does not add up over uploads sent at once.
    upload_gate: std::sync::Mutex<()>,
    /// The queries held at once, against `limits.max_queries_in_flight`.
    pub admission: Arc<crate::transport::admission::Admission>,
    /// The query request bodies held at once, against
    /// `limits.max_body_bytes_in_flight`.
    pub body_admission: Arc<crate::transport::admission::Admission>,
    /// The worlds directory uploads are written to (unset: uploads live in
    /// memory only).
    uploads_dir: std::sync::OnceLock<std::path::PathBuf>,
    /// The recent traces of each world (off unless
    /// [`Service::with_recording`]).
    pub recorder: crate::recording::Recorder,
}

impl Service {
    pub fn new(registry: Arc<Registry>, limits: Limits, admin_token: Option<String>) -> Self {
        let admin_token = admin_token.filter(|t| !t.is_empty());
        Self {
            registry,
            batch: BatchOptions::default(),
            admin_token,
            upload_gate: std::sync::Mutex::new(()),
            admission: crate::transport::admission::Admission::new(limits.max_queries_in_flight),
            body_admission: crate::transport::admission::Admission::for_body_bytes(
                limits.max_body_bytes_in_flight,
            ),
            uploads_dir: std::sync::OnceLock::new(),
            limits,
            recorder: crate::recording::Recorder::default(),
        }
    }

    /// Records the last `queries` traces of each world (0: off).
    pub fn with_recording(mut self, queries: usize) -> Self {
        self.recorder = crate::recording::Recorder::new(queries);
        self
    }

    /// The current version of a world, or the error to return.
    pub fn world(&self, name: &str) -> Result<Arc<WorldVersion>, ServiceError> {
        if !valid_world_name(name) {
            return Err(ServiceError::BadWorldName(name.to_owned()));
        }
        self.registry.get(name).ok_or_else(|| {
            match self.registry.slot(name).and_then(|s| s.status().last_error) {
                Some(error) => ServiceError::NotServing {
                    name: name.to_owned(),
                    error,
                },
                None => ServiceError::UnknownWorld(name.to_owned()),
            }
        })
    }

    /// Validates a whole batch first (a bad query rejects the request), then
    /// answers it on the calling thread against one pinned world version.
    pub fn trace(&self, world: &str, lines: &[QueryLine]) -> Result<BatchAnswer, ServiceError> {
        self.trace_in_scene(world, None, lines)
    }

    /// [`Service::trace`] with a scene: `entities` (when given) is the scene
    /// of the first lines, and `{"entities":[…]}` lines replace it for the
    /// lines after them. Trace answers then name the entity that gave them.
    pub fn trace_in_scene(
        &self,
        world: &str,
        entities: Option<&[EntityLine]>,
        lines: &[QueryLine],
    ) -> Result<BatchAnswer, ServiceError> {
        let version = self.world(world)?;
        self.check_count(lines.len())?;
        let answer = if entities.is_some() || lines.iter().any(|l| l.entities.is_some()) {
            self.run_scene(&version, entities, lines)?
        } else {
            let world_view = version.world.view();
            let queries = crate::query::requests_in(lines, &world_view)
                .map_err(|(index, error)| ServiceError::BadQuery { index, error })?;
            self.run(&version, &queries)
        };
        self.recorder
            .record(world, version.version, entities, lines, &answer.results);
        Ok(answer)
    }

    /// Answers a packed batch through the batch kernel, with no line or
    /// answer object per query: the same answers as [`Service::trace`] on
    /// [`PackedTraces::lines`].
    pub fn trace_packed(
        &self,
        world: &str,
        batch: &PackedTraces,
    ) -> Result<PackedAnswer, ServiceError> {
        let n = batch.count()?;
        self.check_count(n)?;
        // Scenes, ticks and hull names (resolved per world) take the line
        // path.
        if batch.scene.is_some() || batch.is_tick() || batch.template.hull.is_some() {
            let answer = self.trace_in_scene(world, batch.scene.as_deref(), &batch.lines()?)?;
            return Ok(PackedAnswer::of_lines(
                answer,
                !batch.any_hits.is_empty(),
                batch.scene.is_some(),
            ));
        }
        let version = self.world(world)?;
        let queries = batch.queries(n)?;
        let view = version.world.view();
        let results = if batch.template.any == Some(true) {
            PackedResults::Hits(any_hit_queries(&view, &queries, &self.batch))
        } else {
            let mut out = BatchResults::default();
            for r in trace_queries(&view, &queries, &self.batch) {
                out.push(&r);
            }
            PackedResults::Traces(out)
        };
        if self.recorder.is_on() {
            // (`batch.count()` above checked the arrays `line` reads.)
            self.record_packed(&version, batch, &results);
        }
        Ok(PackedAnswer {
            world: version.name.clone(),
            version: version.version,
            source_hash: version.source_hash.clone(),
            results,
            entities: Vec::new(),
            point_contents: Vec::new(),
            movement: Vec::new(),
        })
    }

    /// Records a packed batch answered without query lines.
    fn record_packed(&self, version: &WorldVersion, batch: &PackedTraces, results: &PackedResults) {
        // Only the batch's last `capacity` traces can stay: only they are
        // made into lines.
        let n = results.len();
        let tail = n - n.min(self.recorder.capacity())..n;
        let answers: Vec<Answer> = match results {
            PackedResults::Hits(hits) => hits[tail.clone()]
                .iter()
                .map(|&hit| Answer::Hit(crate::query::HitAnswer { hit }))
                .collect(),
            PackedResults::Traces(traces) => tail
                .clone()
                .filter_map(|i| traces.get(i))
                .map(|r| Answer::Trace((&r).into()))
                .collect(),
            // (Ticks take the line path.)
            PackedResults::Mixed { .. } => return,
        };
        let lines: Vec<QueryLine> = tail.clone().map(|i| batch.line(i)).collect();
        self.recorder.count_unkept(&version.name, tail.start as u64);
        self.recorder
            .record(&version.name, version.version, None, &lines, &answers);
    }

    /// Point contents for a list of points.
    pub fn contents(&self, world: &str, points: &[[f64; 3]]) -> Result<BatchAnswer, ServiceError> {
        let lines: Vec<QueryLine> = points
            .iter()
            .map(|p| QueryLine {
                point: Some(*p),
                ..Default::default()
            })
            .collect();
        self.trace(world, &lines)
    }

    fn check_count(&self, count: usize) -> Result<(), ServiceError> {
        let limit = self.limits.max_queries_per_request;
        if count > limit {
            return Err(ServiceError::TooManyQueries { count, limit });
        }
        Ok(())
    }

    /// Checks every line (and the body's scene), then answers them as a
    /// scene stream against one pinned world version.
    fn run_scene(
        &self,
        version: &WorldVersion,
        entities: Option<&[EntityLine]>,
        lines: &[QueryLine],
    ) -> Result<BatchAnswer, ServiceError> {
        let map = &version.world;
        let mut stream = match entities {
            None => SceneStream::new(map),
            Some(entities) => {
                // The body's scene: its errors name the entity, not a query.
                let placed = scene_of(entities)
                    .and_then(|scene| PlacedScene::new(map, &scene))
                    .map_err(|e| ServiceError::BadScene(QueryError::Scene(e)))?;
                SceneStream::with_scene(map, placed)
            }
        };
        let checked = stream
            .check(lines)
            .map_err(|(index, error)| ServiceError::BadQuery { index, error })?;
        let results = stream
            .answer_checked(checked.into_iter().map(Ok).collect(), &self.batch)
            .into_iter()
            .enumerate()
            .map(|(index, answer)| answer.map_err(|error| ServiceError::BadQuery { index, error }))
            .collect::<Result<_, _>>()?;
        Ok(BatchAnswer {
            world: version.name.clone(),
            version: version.version,
            source_hash: version.source_hash.clone(),
            results,
        })
    }

    /// Runs validated queries against one version through the batch
    /// runner: large batches are split across cores, answers stay in order.
    pub fn run(&self, version: &WorldVersion, queries: &[Request]) -> BatchAnswer {
        let world = version.world.view();
        let results = answer_all(&world, queries, &self.batch);
        BatchAnswer {
            world: version.name.clone(),
            version: version.version,
            source_hash: version.source_hash.clone(),
            results,
        }
    }

    /// Checks an `Authorization` header (HTTP) or metadata value (gRPC):
    /// `Bearer TOKEN`, the scheme in any case (RFC 7235), the token
    /// compared in constant time. Cheap, so transports call it before
    /// reading a request body.
    pub fn check_admin(&self, authorization: Option<&str>) -> Result<(), ServiceError> {
        let Some(expected) = &self.admin_token else {
            return Err(ServiceError::AdminDisabled);
        };
        let Some(presented) = authorization.and_then(bearer_token) else {
            return Err(ServiceError::Unauthenticated);
        };
        // The time taken tells nothing of the bytes (only whether the
        // lengths differ, which `subtle` does not hide).
        if bool::from(expected.as_bytes().ct_eq(presented.as_bytes())) {
            Ok(())
        } else {
            Err(ServiceError::Unauthenticated)
        }
    }

    /// Loads an uploaded world (blocking: call off the reactor) and returns
    /// the version it now serves as, with its content hash.
    pub fn upload(&self, name: &str, bytes: &[u8]) -> Result<Uploaded, ServiceError> {
        if !valid_world_name(name) {
            return Err(ServiceError::BadWorldName(name.to_owned()));
        }
        if bytes.len() > self.limits.max_upload_bytes {
            return Err(ServiceError::TooLarge(self.limits.max_upload_bytes));
        }
        // (A poisoned gate only means an earlier load panicked; the gate
        // guards no data.)
        let _one_at_a_time = self
            .upload_gate
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // An archive's map may inflate to the upload limit, as if sent as
        // is, and no further than any map member.
        let inflate_limit =
            (self.limits.max_upload_bytes as u64).min(crate::source::pk3::MAX_MEMBER_BYTES);
        let loaded = self
            .registry
            .load_bytes_within(name, bytes, "upload", inflate_limit)
            .map_err(|e| ServiceError::LoadFailed(e.to_string()))?;
        let version = loaded.version;
        if let Some(dir) = self.uploads_dir.get() {
            crate::uploads::keep(&self.registry, dir, name, bytes).map_err(|error| {
                ServiceError::Internal(format!(
                    "world {name:?} serves as version {version} but could not be written to the worlds directory (it will not survive a restart): {error}"
                ))
            })?;
        }
        Ok(Uploaded {
            version,
            source_hash: loaded.source_hash.clone(),
        })
    }

    /// Writes uploads through to `dir` (the worlds directory) from now on,
    /// so they survive a restart. Without it they live in memory only.
    pub fn keep_uploads_in(&self, dir: std::path::PathBuf) {
        let _ = self.uploads_dir.set(dir);
    }

    pub fn unload(&self, name: &str) -> Result<(), ServiceError> {
        if !valid_world_name(name) {
            return Err(ServiceError::BadWorldName(name.to_owned()));
        }
        if self.registry.unload(name) {
            self.recorder.forget(name);
            Ok(())
        } else {
            Err(ServiceError::UnknownWorld(name.to_owned()))
        }
    }

    pub fn describe(&self, name: &str) -> Result<WorldDescription, ServiceError> {
        if !valid_world_name(name) {
            return Err(ServiceError::BadWorldName(name.to_owned()));
        }
        let slot = self
            .registry
            .slot(name)
            .ok_or_else(|| ServiceError::UnknownWorld(name.to_owned()))?;
        let status = slot.status();
        let current = slot.current();
        let mut d = WorldDescription {
            name: name.to_owned(),
            version: 0,
            source: None,
            loaded_at: None,
            bounds: None,
            curves: None,
            hulls: Vec::new(),
            status: if current.is_some() {
                "serving"
            } else {
                "failed"
            },
            last_error: status.last_error,
            failed_loads: status.failed_loads,
            source_name: None,
            source_hash: None,
            counts: None,
            models: Vec::new(),
        };
        if let Some(v) = current {
            let w = v.world.view();
            d.version = v.version;
            d.source = Some(v.source.clone());
            d.loaded_at = Some(rfc3339(v.loaded_at));
            d.bounds = Some(Bounds {
                mins: w.mins,
                maxs: w.maxs,
            });
            d.curves = Some(w.info.curves);
            d.hulls = w.info.hulls.iter().map(|h| h.name.clone()).collect();
            d.source_name = Some(w.info.source_name.clone());
            d.source_hash = Some(v.source_hash.clone());
            d.counts = Some(Counts {
                brushes: w.brushes.len(),
                patches: w.patches.len(),
                nodes: w.nodes.len(),
                leaves: w.leaves.len(),
                bytes: v.world.data_bytes(),
            });
            d.models = v
                .world
                .models()
                .iter()
                .enumerate()
                .map(|(k, model)| {
                    let m = model.world();
                    ModelDescription {
                        index: k + 1,
                        bounds: Bounds {
                            mins: m.mins,
                            maxs: m.maxs,
                        },
                        brushes: m.info.source_brushes,
                        patches: m.patches.len(),
                    }
                })
                .collect();
        }
        Ok(d)
    }

    pub fn describe_all(&self) -> Vec<WorldDescription> {
        self.registry
            .names()
            .iter()
            .filter_map(|n| self.describe(n).ok())
            .collect()
    }
}

/// The token of a `Bearer TOKEN` credential, the scheme matched in any case.
fn bearer_token(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start_matches(' '))
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC, milliseconds).
pub fn rfc3339(t: SystemTime) -> String {
    // humantime formats 1970 to 9999 and panics outside: a clock set that
    // far wrong shows as the nearest end instead.
    let last = UNIX_EPOCH + std::time::Duration::from_millis(253_402_300_799_999);
    humantime::format_rfc3339_millis(t.clamp(UNIX_EPOCH, last)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_millis(951_782_400_123)),
            "2000-02-29T00:00:00.123Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(1_795_219_200)),
            "2026-11-21T00:00:00.000Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH - Duration::from_secs(1)),
            "1970-01-01T00:00:00.000Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(300_000_000_000)),
            "9999-12-31T23:59:59.999Z"
        );
    }

    #[test]
    fn error_messages_quote_at_most_the_cap() {
        let long = ServiceError::BadWorldName("é".repeat(100_000));
        let message = long.to_json()["error"]["message"]
            .as_str()
            .expect("a message")
            .to_owned();
        let full = long.to_string();
        let kept = message.split("… (").next().expect("the kept part");
        assert!(kept.len() <= MAX_ERROR_MESSAGE_BYTES);
        assert!(full.starts_with(kept));
        assert!(message.ends_with(&format!("({} more bytes)", full.len() - kept.len())));
        let short = ServiceError::UnknownWorld("q3dm6ish".into());
        assert_eq!(short.to_json()["error"]["message"], short.to_string());
    }

    #[test]
    fn admin_tokens() {
        let registry = Arc::new(Registry::default());
        let off = Service::new(Arc::clone(&registry), Limits::default(), None);
        assert_eq!(
            off.check_admin(Some("Bearer x")),
            Err(ServiceError::AdminDisabled)
        );
        let on = Service::new(registry, Limits::default(), Some("s3cret".into()));
        for good in ["Bearer s3cret", "bearer s3cret", "BEARER  s3cret"] {
            assert_eq!(on.check_admin(Some(good)), Ok(()), "{good}");
        }
        for bad in [
            None,
            Some(""),
            Some("s3cret"),
            Some("Bearer "),
            Some("Bearer s3cre"),
            Some("Bearer s3cret!"),
            Some("Bearer S3cret"),
            Some("Basic s3cret"),
            Some("Bearers3cret"),
        ] {
            assert_eq!(
                on.check_admin(bad),
                Err(ServiceError::Unauthenticated),
                "{bad:?}"
            );
        }
    }
}
