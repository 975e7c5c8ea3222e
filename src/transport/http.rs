//! HTTP/JSON transport (axum): thin handlers over [`Service`]. Every error
//! response, whichever layer or handler produced it, is the JSON error body
//! with the status of the one error table, and is counted by its code.

use crate::metrics::Metrics;
use crate::query::{EntityLine, QueryError, QueryLine};
use crate::service::{Service, ServiceError};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, FromRequestParts, Path, RawQuery, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::{from_fn, from_fn_with_state, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio_stream::StreamExt;

mod bots;
mod floor;
mod geometry;

const TRANSPORT: &str = "http";

/// What every handler shares.
#[derive(Debug, Clone)]
pub struct HttpState {
    pub service: Arc<Service>,
    pub metrics: Arc<Metrics>,
    /// Set when shutdown starts: readiness turns false.
    pub draining: Arc<AtomicBool>,
}

/// The router with every route.
pub fn router(state: HttpState) -> Router {
    // Queries may send `max_body_bytes`, world uploads `max_upload_bytes`
    // (one limit over all routes let a trace body grow to the upload size).
    let limits = &state.service.limits;
    let (body_max, upload_max) = (limits.max_body_bytes, limits.max_upload_bytes);
    // A body whose announced length is over the limit is refused before it
    // is read (the limits above count what is read, for bodies sent without
    // a length).
    let query_length = from_fn(move |req, next| refuse_announced_oversize(body_max, req, next));
    let upload_length = from_fn(move |req, next| refuse_announced_oversize(upload_max, req, next));
    // Inside the length check: a query body is admitted before it is read.
    let admit = from_fn_with_state(state.clone(), admit_body);
    // Outermost on admin routes: the token is checked before any body
    // limit or read (route layers added later run first).
    let admin = from_fn_with_state(state.clone(), require_admin);
    let upload = put(put_world)
        .route_layer(DefaultBodyLimit::max(upload_max))
        .route_layer(upload_length)
        .route_layer(admin.clone());
    let unload = delete(delete_world).route_layer(admin);
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/v1/worlds", get(list_worlds))
        .route(
            "/v1/worlds/{name}",
            get(get_world).merge(upload).merge(unload),
        )
        .route("/v1/worlds/{name}/entities", get(get_entities))
        .route("/v1/worlds/{name}/geometry", get(geometry::get_geometry))
        .route("/v1/worlds/{name}/floor", post(floor::post_floor))
        .route(
            "/v1/worlds/{name}/trace",
            get(trace_get)
                .post(trace_post)
                .route_layer(admit.clone())
                .route_layer(query_length.clone()),
        )
        .route(
            "/v1/worlds/{name}/contents",
            post(contents_post)
                .route_layer(admit)
                .route_layer(query_length),
        )
        .merge(super::ui::routes())
        .merge(super::recent::routes())
        .merge(bots::routes(body_max))
        .fallback(no_such_route)
        .method_not_allowed_fallback(method_not_allowed)
        // Every other route's (the upload route's own layer, inside, wins).
        .layer(DefaultBodyLimit::max(body_max))
        .layer(from_fn_with_state(Arc::clone(&state.metrics), count_errors))
        .with_state(state)
}

/// An error as the JSON error body with its status.
pub(super) struct ApiError(pub(super) ServiceError);

/// The code of an error response, for [`count_errors`].
#[derive(Debug, Clone, Copy)]
struct ErrorCode(&'static str);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, _) = self.0.statuses();
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, Json(self.0.to_json())).into_response();
        response.extensions_mut().insert(ErrorCode(self.0.code()));
        response
    }
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        ApiError(e)
    }
}

/// Counts every error response by its code (errors of middleware and
/// extractors as well as of handlers).
async fn count_errors(State(metrics): State<Arc<Metrics>>, req: Request, next: Next) -> Response {
    let response = next.run(req).await;
    if let Some(ErrorCode(code)) = response.extensions().get::<ErrorCode>() {
        metrics.count_error(code, TRANSPORT);
    }
    response
}

async fn no_such_route(uri: axum::http::Uri) -> ApiError {
    ApiError(ServiceError::NoSuchRoute(uri.path().to_owned()))
}

/// A known route, another method (axum adds the `Allow` header).
async fn method_not_allowed(method: Method) -> ApiError {
    ApiError(ServiceError::MethodNotAllowed(method.to_string()))
}

/// The `{name}` of a world route, as sent (the service validates it); a
/// path that does not decode is a malformed request.
pub(super) struct WorldName(pub(super) String);

impl<S: Send + Sync> FromRequestParts<S> for WorldName {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(name)| WorldName(name))
            .map_err(|e| ApiError(ServiceError::Malformed(e.body_text())))
    }
}

/// Admin routes: refused (401/403) on the request head alone, so an
/// unauthorised upload is never buffered.
async fn require_admin(State(state): State<HttpState>, req: Request, next: Next) -> Response {
    let authorization = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match state.service.check_admin(authorization) {
        Ok(()) => next.run(req).await,
        Err(e) => {
            discard_body(req, state.service.limits.max_body_bytes);
            ApiError(e).into_response()
        }
    }
}

/// Reads and drops, in the background, up to `limit` bytes of the body of a
/// request refused on its head, so that a client that sends its body
/// without waiting for an answer reads the refusal rather than a broken
/// pipe. Nothing is kept. A longer body is cut off (the connection is then
/// closed), and one the client waits to send (`Expect: 100-continue`) is
/// not asked for.
fn discard_body(req: Request, limit: usize) {
    let headers = req.headers();
    if headers.contains_key(header::EXPECT)
        || announced_length(headers).is_some_and(|length| length > limit as u64)
    {
        return;
    }
    let mut body = req.into_body().into_data_stream();
    tokio::spawn(async move {
        let mut read = 0;
        while let Some(Ok(chunk)) = body.next().await {
            read += chunk.len();
            if read > limit {
                break;
            }
        }
    });
}

async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({"status": "ok"}))
}

async fn readyz(State(state): State<HttpState>) -> Response {
    let draining = state.draining.load(Ordering::SeqCst);
    let loaded = state.service.registry.any_loaded();
    let body = serde_json::json!({"ready": loaded && !draining, "worlds_loaded": loaded, "draining": draining});
    let status = if loaded && !draining {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

async fn metrics(State(state): State<HttpState>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(&state.service.registry),
    )
        .into_response()
}

/// `GET /v1/worlds`: serialized straight from the descriptions, as
/// `GET /v1/worlds/{name}` is. (Through `json!` the f32 bounds were widened
/// to f64 first, so the list said 1.100000023841858 where the single
/// world said 1.1.)
#[derive(serde::Serialize)]
struct WorldList {
    worlds: Vec<crate::service::WorldDescription>,
}

async fn list_worlds(State(state): State<HttpState>) -> Json<WorldList> {
    Json(WorldList {
        worlds: state.service.describe_all(),
    })
}

async fn get_world(
    State(state): State<HttpState>,
    WorldName(name): WorldName,
) -> Result<Response, ApiError> {
    Ok(Json(state.service.describe(&name)?).into_response())
}

/// `GET /v1/worlds/{name}/entities`: the serving version's entities, a
/// JSON list of objects with their keys in file order (of a key given twice
/// in one entity, the first value).
async fn get_entities(
    State(state): State<HttpState>,
    WorldName(name): WorldName,
) -> Result<Response, ApiError> {
    let version = state.service.world(&name)?;
    Ok(Json(version.world.entities()).into_response())
}

/// Runs service work: a batch of `queries` small enough on this task,
/// anything else (`None`: not a batch) on the blocking pool.
async fn run_work<T: Send + 'static>(
    state: &HttpState,
    kind: &'static str,
    queries: Option<usize>,
    work: impl FnOnce(&Service) -> Result<T, ServiceError> + Send + 'static,
) -> Result<T, ServiceError> {
    super::run_work(
        &state.service,
        &state.metrics,
        (kind, TRANSPORT),
        queries,
        work,
    )
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TraceBody {
    /// The scene of the queries (until a scene line among them replaces it).
    #[serde(default)]
    entities: Option<Vec<EntityLine>>,
    queries: Vec<QueryLine>,
}

/// Answers 413 at once, naming `limit`, when the request's
/// `Content-Length` is over it: the client learns before it sends the body
/// (a client that sends `Expect: 100-continue`, as curl does for large
/// bodies, sends none), and the server reads none of it.
async fn refuse_announced_oversize(limit: usize, req: Request, next: Next) -> Response {
    match announced_length(req.headers()) {
        Some(length) if length > limit as u64 => {
            ApiError(ServiceError::TooLarge(limit)).into_response()
        }
        _ => next.run(req).await,
    }
}

/// Query routes: the body is admitted against the server's byte budget on
/// the request head, before any of it is read, and stays counted until the
/// answer has been sent (see [`super::body_admission`]); past the budget,
/// `429 overloaded` at once.
async fn admit_body(State(state): State<HttpState>, req: Request, next: Next) -> Response {
    let limit = state.service.limits.max_body_bytes;
    let Some(bytes) = super::body_admission::announced_body_bytes(req.headers(), limit) else {
        return next.run(req).await;
    };
    match state.service.body_admission.admit(bytes) {
        Ok(admitted) => super::body_admission::hold_until_sent(next.run(req).await, admitted),
        Err(e) => {
            discard_body(req, limit);
            ApiError(e).into_response()
        }
    }
}

/// The body length a request announces (`Content-Length`).
fn announced_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

/// The request body, or the error for it: `limit` is the route's body
/// limit, reported when the body exceeds it.
fn body_bytes(body: Result<Bytes, BytesRejection>, limit: usize) -> Result<Bytes, ServiceError> {
    body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ServiceError::TooLarge(limit)
        } else {
            ServiceError::Malformed(e.body_text())
        }
    })
}

/// Whether a JSON value parses as a `T` (one query of a batch).
type ParsesAs = fn(&serde_json::Value) -> Result<(), serde_json::Error>;

fn parses_as<T: DeserializeOwned>(value: &serde_json::Value) -> Result<(), serde_json::Error> {
    T::deserialize(value).map(drop)
}

/// Parses a batch body whose `fields` (in order) are arrays of queries.
fn parse_batch<T: DeserializeOwned>(
    bytes: &[u8],
    fields: &[(&str, ParsesAs)],
) -> Result<T, ServiceError> {
    serde_json::from_slice(bytes).map_err(|error| batch_parse_error(bytes, &error, fields))
}

/// Why a batch body did not parse: the first query of `fields` that does
/// not parse on its own, with its index, or else the body as a
/// whole. The body is parsed again only on this error path.
fn batch_parse_error(
    bytes: &[u8],
    error: &serde_json::Error,
    fields: &[(&str, ParsesAs)],
) -> ServiceError {
    let whole = || ServiceError::Malformed(format!("invalid JSON body: {error}"));
    let Ok(serde_json::Value::Object(body)) = serde_json::from_slice(bytes) else {
        return whole();
    };
    let mut index = 0;
    for (field, parses) in fields {
        let Some(queries) = body.get(*field).and_then(|v| v.as_array()) else {
            continue;
        };
        for query in queries {
            if let Err(e) = parses(query) {
                return ServiceError::BadQuery {
                    index,
                    error: QueryError::Malformed(e.to_string()),
                };
            }
            index += 1;
        }
    }
    whole()
}

async fn answer_batch(
    state: HttpState,
    name: String,
    kind: &'static str,
    queries: Vec<QueryLine>,
) -> Result<Response, ApiError> {
    let count = queries.len();
    let answer = run_work(&state, kind, Some(count), move |s| s.trace(&name, &queries)).await?;
    state
        .metrics
        .count_batch(&answer.world, kind, TRANSPORT, count);
    Ok(Json(answer).into_response())
}

async fn trace_post(
    State(state): State<HttpState>,
    WorldName(name): WorldName,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body_bytes(body, state.service.limits.max_body_bytes)?;
    let body: TraceBody = parse_batch(&body, &[("queries", parses_as::<QueryLine>)])?;
    let count = body.queries.len();
    let answer = run_work(&state, "trace", Some(count), move |s| {
        s.trace_in_scene(&name, body.entities.as_deref(), &body.queries)
    })
    .await?;
    state
        .metrics
        .count_batch(&answer.world, "trace", TRANSPORT, count);
    Ok(Json(answer).into_response())
}

/// `GET …/trace?start=x,y,z&end=x,y,z[&mins=…&maxs=…&mask=…&hull=NAME&any=true]`:
/// one query from a URL.
async fn trace_get(
    State(state): State<HttpState>,
    WorldName(name): WorldName,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let line = query_from_url(raw.as_deref().unwrap_or(""))?;
    answer_batch(state, name, "trace", vec![line]).await
}

fn query_from_url(raw: &str) -> Result<QueryLine, ServiceError> {
    let mut line = QueryLine::default();
    let vec3 = |key: &str, v: &str| -> Result<[f64; 3], ServiceError> {
        let parts: Vec<&str> = v.split(',').collect();
        let bad =
            || ServiceError::Malformed(format!("`{key}` must be three numbers x,y,z, got {v:?}"));
        let [x, y, z] = parts[..] else {
            return Err(bad());
        };
        let n = |s: &str| s.trim().parse::<f64>().map_err(|_| bad());
        Ok([n(x)?, n(y)?, n(z)?])
    };
    let mut given = HashSet::new();
    for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
        // A repeat would silently override: say so instead.
        if !given.insert(key.clone()) {
            return Err(ServiceError::Malformed(format!(
                "parameter `{key}` is given more than once"
            )));
        }
        let (key, value): (&str, String) = (&key, value.into_owned());
        match key {
            "start" => line.start = Some(vec3(key, &value)?),
            "end" => line.end = Some(vec3(key, &value)?),
            "mins" => line.mins = Some(vec3(key, &value)?),
            "maxs" => line.maxs = Some(vec3(key, &value)?),
            "point" => line.point = Some(vec3(key, &value)?),
            "hull" => line.hull = Some(value),
            "any" => {
                let any = value.parse::<bool>().map_err(|_| {
                    ServiceError::Malformed(format!("`any` must be true or false, got {value:?}"))
                })?;
                line.any = Some(any);
            }
            "mask" => {
                let mask = parse_mask(&value).ok_or_else(|| {
                    ServiceError::Malformed(format!("`mask` must be an integer, got {value:?}"))
                })?;
                line.mask = Some(mask);
            }
            other => {
                return Err(ServiceError::Malformed(format!(
                    "unknown parameter `{other}`"
                )))
            }
        }
    }
    Ok(line)
}

pub(super) fn parse_mask(v: &str) -> Option<u32> {
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ContentsBody {
    #[serde(default)]
    points: Vec<[f64; 3]>,
    #[serde(default)]
    queries: Vec<QueryLine>,
}

async fn contents_post(
    State(state): State<HttpState>,
    WorldName(name): WorldName,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body_bytes(body, state.service.limits.max_body_bytes)?;
    let body: ContentsBody = parse_batch(
        &body,
        &[
            ("points", parses_as::<[f64; 3]>),
            ("queries", parses_as::<QueryLine>),
        ],
    )?;
    let mut lines: Vec<QueryLine> = body
        .points
        .iter()
        .map(|p| QueryLine {
            point: Some(*p),
            ..Default::default()
        })
        .collect();
    for (i, q) in body.queries.into_iter().enumerate() {
        if q.point.is_none() {
            return Err(ServiceError::BadQuery {
                index: lines.len() + i,
                error: crate::query::QueryError::Missing("point"),
            }
            .into());
        }
        lines.push(q);
    }
    answer_batch(state, name, "contents", lines).await
}

/// `PUT /v1/worlds/{name}` (behind [`require_admin`]).
async fn put_world(
    State(state): State<HttpState>,
    WorldName(name): WorldName,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let bytes = body_bytes(body, state.service.limits.max_upload_bytes)?;
    let world = name.clone();
    let loaded = run_work(&state, "admin", None, move |s| s.upload(&name, &bytes)).await?;
    state.metrics.count_request(&world, "admin", TRANSPORT);
    Ok(Json(serde_json::json!({
        "world": world,
        "version": loaded.version,
        "source_hash": loaded.source_hash,
    }))
    .into_response())
}

/// `DELETE /v1/worlds/{name}` (behind [`require_admin`]).
async fn delete_world(
    State(state): State<HttpState>,
    WorldName(name): WorldName,
) -> Result<Response, ApiError> {
    let world = name.clone();
    // Off the reactor: an unload waits for a load of the same name to end.
    run_work(&state, "admin", None, move |s| s.unload(&name)).await?;
    state.metrics.count_request(&world, "admin", TRANSPORT);
    Ok(Json(serde_json::json!({"world": world, "unloaded": true})).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_queries() {
        let q = query_from_url("start=1,2,3&end=4,5,6&mins=-1,-1,-1&maxs=1,1,1&mask=0x2010001")
            .expect("parses");
        assert_eq!(q.start, Some([1.0, 2.0, 3.0]));
        assert_eq!(q.mask, Some(0x2010001));
        assert!(query_from_url("start=1,2").is_err());
        assert!(query_from_url("start=1,2,x").is_err());
        assert!(query_from_url("bogus=1").is_err());
        assert!(query_from_url("mask=abc").is_err());
        let q = query_from_url("start=1,2,3&end=4,5,6&hull=stand&any=true").expect("parses");
        assert_eq!(q.hull.as_deref(), Some("stand"));
        assert_eq!(q.any, Some(true));
        assert!(query_from_url("any=yes").is_err());
        let q = query_from_url("start=1%2C2%2C3&end=4,5,6&hull=s%74and").expect("decoded");
        assert_eq!(q.start, Some([1.0, 2.0, 3.0]));
        assert_eq!(q.hull.as_deref(), Some("stand"));
        assert!(query_from_url("start=1,2,3&start=4,5,6").is_err());
    }
}
