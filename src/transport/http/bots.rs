//! The bot routes: `POST /v1/worlds/{name}/sight`, `…/pvs` and `…/walk`,
//! thin handlers over the service's bot calls.

use super::{
    body_bytes, parse_batch, parses_as, refuse_announced_oversize, run_work, ApiError, HttpState,
    WorldName, TRANSPORT,
};
use crate::bots::pvs::{PointLeaf, PortalInfo};
use crate::bots::{PvsLine, SightLine, WalkAnswer, WalkLine};
use crate::query::EntityLine;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::middleware::from_fn;
use axum::response::{IntoResponse, Response};
use axum::routing::{post, MethodRouter};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

/// The bot routes; bodies announced over `body_max` bytes are refused
/// unread, as on the query routes.
pub(super) fn routes(body_max: usize) -> Router<HttpState> {
    let route = |r: MethodRouter<HttpState>| {
        r.route_layer(from_fn(move |req, next| {
            refuse_announced_oversize(body_max, req, next)
        }))
    };
    Router::new()
        .route("/v1/worlds/{name}/sight", route(post(sight_post)))
        .route("/v1/worlds/{name}/pvs", route(post(pvs_post)))
        .route("/v1/worlds/{name}/walk", route(post(walk_post)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SightBody {
    eyes: Vec<[f64; 3]>,
    #[serde(default)]
    targets: Option<Vec<[f64; 3]>>,
    #[serde(default)]
    mask: Option<u32>,
    #[serde(default)]
    entities: Option<Vec<EntityLine>>,
}

#[derive(Serialize)]
struct SightReply {
    world: String,
    version: u64,
    source_hash: String,
    visible: Vec<String>,
}

async fn sight_post(
    State(state): State<HttpState>,
    WorldName(name): WorldName,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body_bytes(body, state.service.limits.max_body_bytes)?;
    let body: SightBody = parse_batch(&body, &[])?;
    let sight = SightLine {
        eyes: body.eyes,
        targets: body.targets,
        mask: body.mask,
    };
    let pairs = sight.pairs();
    let answer = run_work(&state, "sight", Some(pairs), move |s| {
        s.sight(&name, &sight, body.entities.as_deref())
    })
    .await?;
    state
        .metrics
        .count_batch(&answer.world, "sight", TRANSPORT, pairs);
    Ok(Json(SightReply {
        world: answer.world,
        version: answer.version,
        source_hash: answer.source_hash,
        visible: answer.answer.rows(),
    })
    .into_response())
}

#[derive(Serialize)]
struct PvsReply {
    world: String,
    version: u64,
    source_hash: String,
    points: Vec<PointLeaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    targets: Option<Vec<PointLeaf>>,
    visible: Vec<String>,
    vised: bool,
    areas: usize,
    portals: Vec<PortalInfo>,
}

async fn pvs_post(
    State(state): State<HttpState>,
    WorldName(name): WorldName,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body_bytes(body, state.service.limits.max_body_bytes)?;
    let line: PvsLine = parse_batch(&body, &[])?;
    let pairs = line.pairs();
    let answer = run_work(&state, "pvs", Some(pairs), move |s| s.pvs(&name, &line)).await?;
    state
        .metrics
        .count_batch(&answer.world, "pvs", TRANSPORT, pairs);
    let pvs = answer.answer;
    Ok(Json(PvsReply {
        world: answer.world,
        version: answer.version,
        source_hash: answer.source_hash,
        visible: pvs.matrix.rows(),
        points: pvs.points,
        targets: pvs.targets,
        vised: pvs.vised,
        areas: pvs.areas,
        portals: pvs.portals,
    })
    .into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WalkBody {
    walks: Vec<WalkLine>,
    #[serde(default)]
    entities: Option<Vec<EntityLine>>,
}

#[derive(Serialize)]
struct WalkReply {
    world: String,
    version: u64,
    source_hash: String,
    results: Vec<WalkAnswer>,
}

async fn walk_post(
    State(state): State<HttpState>,
    WorldName(name): WorldName,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body_bytes(body, state.service.limits.max_body_bytes)?;
    let body: WalkBody = parse_batch(&body, &[("walks", parses_as::<WalkLine>)])?;
    let count = body.walks.len();
    // A walk is up to a thousand moves: never answered on the reactor.
    let answer = run_work(&state, "walk", None, move |s| {
        s.walks(&name, &body.walks, body.entities.as_deref())
    })
    .await?;
    state
        .metrics
        .count_batch(&answer.world, "walk", TRANSPORT, count);
    Ok(Json(WalkReply {
        world: answer.world,
        version: answer.version,
        source_hash: answer.source_hash,
        results: answer.answer,
    })
    .into_response())
}
