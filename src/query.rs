//! The JSON line format of queries and answers (SPEC §3–§4), shared by the
//! CLI and the transports, with one validation path.

use crate::math::Vec3;
use crate::trace::{TraceQuery, TraceResult};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Coordinates and box sizes beyond this magnitude are rejected (Quake 3
/// worlds live within ±65536; this leaves room for moves in the void).
pub const MAX_COORDINATE: f32 = 1_048_576.0;

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
}

/// A validated query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Query {
    Trace(TraceQuery),
    Point(Vec3),
}

/// A validated line: a query and how to answer it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Request {
    /// Answered in full ([`answer`]).
    Query(Query),
    /// `"any":true`: only whether the trace touches anything in its mask.
    AnyHit(TraceQuery),
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
    #[error("`{field}` has a non-finite or out-of-range value (limit ±{MAX_COORDINATE})")]
    BadCoordinate { field: &'static str },
    #[error("`mins` must not exceed `maxs` on any axis")]
    MinsAboveMaxs,
    #[error("a point query takes only `point` (and no `any`)")]
    PointWithTrace,
}

impl QueryError {
    pub fn code(&self) -> &'static str {
        match self {
            QueryError::Malformed(_) => "malformed_query",
            QueryError::Missing(_) => "missing_field",
            QueryError::BadCoordinate { .. } => "bad_coordinate",
            QueryError::MinsAboveMaxs => "mins_above_maxs",
            QueryError::PointWithTrace => "mixed_query",
        }
    }
}

fn vec(field: &'static str, v: [f64; 3]) -> Result<Vec3, QueryError> {
    let ok = v
        .iter()
        .all(|c| c.is_finite() && c.abs() <= MAX_COORDINATE as f64);
    if ok {
        Ok(Vec3::new(v[0] as f32, v[1] as f32, v[2] as f32))
    } else {
        Err(QueryError::BadCoordinate { field })
    }
}

impl QueryLine {
    /// Parses one JSON line.
    pub fn parse(line: &str) -> Result<QueryLine, QueryError> {
        serde_json::from_str(line).map_err(|e| QueryError::Malformed(e.to_string()))
    }

    /// Checks the line and turns it into the query it describes (how to
    /// answer it, `any`, is read by [`QueryLine::request`]).
    pub fn validate(&self) -> Result<Query, QueryError> {
        if let Some(p) = self.point {
            if self.start.is_some()
                || self.end.is_some()
                || self.mins.is_some()
                || self.maxs.is_some()
                || self.any.is_some()
            {
                return Err(QueryError::PointWithTrace);
            }
            return Ok(Query::Point(vec("point", p)?));
        }
        let start = vec("start", self.start.ok_or(QueryError::Missing("start"))?)?;
        let end = vec("end", self.end.ok_or(QueryError::Missing("end"))?)?;
        let mins = vec("mins", self.mins.unwrap_or_default())?;
        let maxs = vec("maxs", self.maxs.unwrap_or_default())?;
        if mins.cmpgt(maxs).any() {
            return Err(QueryError::MinsAboveMaxs);
        }
        let mask = self.mask.unwrap_or(crate::contents::MASK_SOLID);
        Ok(Query::Trace(TraceQuery {
            start,
            end,
            mins,
            maxs,
            mask,
        }))
    }

    /// Checks the line and says what to answer: the query in full, or
    /// (`"any":true`) only whether the trace hits anything.
    pub fn request(&self) -> Result<Request, QueryError> {
        Ok(match (self.validate()?, self.any) {
            (Query::Trace(q), Some(true)) => Request::AnyHit(q),
            (q, _) => Request::Query(q),
        })
    }
}

/// An answer line.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Answer {
    Trace(TraceAnswer),
    Point(PointAnswer),
    Hit(HitAnswer),
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
    world: &crate::world::World,
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
    world: &crate::world::World,
    scratch: &mut crate::trace::Scratch,
    request: &Request,
) -> Answer {
    match request {
        Request::Query(q) => answer(world, scratch, q),
        Request::AnyHit(q) => Answer::Hit(HitAnswer {
            hit: crate::trace::any_hit(world, q, scratch),
        }),
    }
}

/// Answers validated lines in order through the batch runner (large lists
/// are split across threads); each answer is the one [`answer_request`] gives.
pub fn answer_all(
    world: &crate::world::World,
    requests: &[Request],
    options: &crate::trace::BatchOptions,
) -> Vec<Answer> {
    crate::trace::run_batch(requests.len(), options, |i, scratch| {
        answer_request(world, scratch, &requests[i])
    })
}

/// The JSON error line written in place of an answer to a bad query line.
pub fn error_json(err: &QueryError, line_index: usize) -> String {
    serde_json::json!({"error": {"code": err.code(), "message": err.to_string(), "query_index": line_index}})
        .to_string()
}
