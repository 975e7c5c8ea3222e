//! HTTP/JSON transport (axum): thin handlers over [`Service`].

use crate::metrics::Metrics;
use crate::query::QueryLine;
use crate::service::{Service, ServiceError};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::Request;
use axum::extract::{DefaultBodyLimit, Path, RawQuery, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{from_fn, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const TRANSPORT: &str = "http";

/// What every handler shares.
#[derive(Debug, Clone)]
pub struct HttpState {
    pub service: Arc<Service>,
    pub metrics: Arc<Metrics>,
    /// Set when shutdown starts: readiness turns false.
    pub draining: Arc<AtomicBool>,
}

/// The router with every route of SPEC §5.
pub fn router(state: HttpState) -> Router {
    // Queries may send `max_body_bytes`, world uploads `max_upload_bytes`
    // (one limit over all routes let a trace body grow to the upload size).
    let limits = &state.service.limits;
    let (body_max, upload_max) = (limits.max_body_bytes, limits.max_upload_bytes);
    let upload_limit = DefaultBodyLimit::max(upload_max);
    // A body whose announced length is over the limit is refused before it
    // is read (the limits above count what is read, for bodies sent without
    // a length).
    let query_length = from_fn(move |req, next| refuse_announced_oversize(body_max, req, next));
    let upload_length = from_fn(move |req, next| refuse_announced_oversize(upload_max, req, next));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/v1/worlds", get(list_worlds))
        .route(
            "/v1/worlds/{name}",
            get(get_world)
                .put(put_world)
                .delete(delete_world)
                .layer(upload_limit)
                .layer(upload_length),
        )
        .route(
            "/v1/worlds/{name}/trace",
            get(trace_get).post(trace_post).layer(query_length.clone()),
        )
        .route(
            "/v1/worlds/{name}/contents",
            axum::routing::post(contents_post).layer(query_length),
        )
        .fallback(not_found)
        // Every other route's (the upload route's own layer, inside, wins).
        .layer(DefaultBodyLimit::max(limits.max_body_bytes))
        .with_state(state)
}

/// An error as SPEC §5's JSON body with its status.
struct ApiError(ServiceError);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, _) = self.0.statuses();
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, Json(self.0.to_json())).into_response()
    }
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        ApiError(e)
    }
}

async fn not_found() -> ApiError {
    ApiError(ServiceError::Malformed(
        "no such route (see GET /v1/worlds)".into(),
    ))
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

async fn list_worlds(State(state): State<HttpState>) -> Json<serde_json::Value> {
    Json(serde_json::json!({ "worlds": state.service.describe_all() }))
}

async fn get_world(
    State(state): State<HttpState>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    Ok(Json(state.service.describe(&name)?).into_response())
}

/// Runs CPU-heavy work off the reactor, counting rejections in the metrics.
async fn run_blocking<T: Send + 'static>(
    state: &HttpState,
    kind: &'static str,
    work: impl FnOnce(&Service) -> Result<T, ServiceError> + Send + 'static,
) -> Result<T, ServiceError> {
    let result = super::run_blocking(&state.service, &state.metrics, kind, TRANSPORT, work).await;
    if let Err(e) = &result {
        state
            .metrics
            .request_errors
            .with_label_values(&[e.code(), TRANSPORT])
            .inc();
    }
    result
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TraceBody {
    queries: Vec<QueryLine>,
}

/// Answers 413 at once, naming `limit`, when the request's
/// `Content-Length` is over it: the client learns before it sends the body
/// (a client that sends `Expect: 100-continue`, as curl does for large
/// bodies, sends none), and the server reads none of it.
async fn refuse_announced_oversize(limit: usize, req: Request, next: Next) -> Response {
    let announced = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    match announced {
        Some(length) if length > limit as u64 => {
            ApiError(ServiceError::TooLarge(limit)).into_response()
        }
        _ => next.run(req).await,
    }
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

fn parse_json<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, ServiceError> {
    serde_json::from_slice(bytes)
        .map_err(|e| ServiceError::Malformed(format!("invalid JSON body: {e}")))
}

async fn answer_batch(
    state: HttpState,
    name: String,
    kind: &'static str,
    queries: Vec<QueryLine>,
) -> Result<Response, ApiError> {
    let count = queries.len();
    let world = name.clone();
    let answer = run_blocking(&state, kind, move |s| s.trace(&name, &queries)).await?;
    state
        .metrics
        .requests
        .with_label_values(&[&world, kind, TRANSPORT])
        .inc();
    state
        .metrics
        .queries
        .with_label_values(&[&world, kind, TRANSPORT])
        .inc_by(count as u64);
    state
        .metrics
        .batch_size
        .with_label_values(&[kind, TRANSPORT])
        .observe(count as f64);
    Ok(Json(answer).into_response())
}

async fn trace_post(
    State(state): State<HttpState>,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body_bytes(body, state.service.limits.max_body_bytes)?;
    let body: TraceBody = parse_json(&body)?;
    answer_batch(state, name, "trace", body.queries).await
}

/// `GET …/trace?start=x,y,z&end=x,y,z[&mins=…&maxs=…&mask=…&hull=NAME&any=true]`:
/// one query from a URL.
async fn trace_get(
    State(state): State<HttpState>,
    Path(name): Path<String>,
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
    for pair in raw.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = value.replace("%2C", ",").replace("%2c", ",");
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

fn parse_mask(v: &str) -> Option<u32> {
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
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body_bytes(body, state.service.limits.max_body_bytes)?;
    let body: ContentsBody = parse_json(&body)?;
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

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

async fn put_world(
    State(state): State<HttpState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    state.service.check_admin(bearer(&headers))?;
    let bytes = body_bytes(body, state.service.limits.max_upload_bytes)?;
    let world = name.clone();
    let version = run_blocking(&state, "admin", move |s| s.upload(&name, &bytes)).await?;
    Ok(Json(serde_json::json!({"world": world, "version": version})).into_response())
}

async fn delete_world(
    State(state): State<HttpState>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    state.service.check_admin(bearer(&headers))?;
    state.service.unload(&name)?;
    Ok(Json(serde_json::json!({"world": name, "unloaded": true})).into_response())
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
    }
}
