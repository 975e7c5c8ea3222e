//! gRPC transport (tonic): thin adapters over [`Service`]. Packed trace
//! arrays go to the core as one [`PackedTraces`] batch (validated by the
//! same rules as HTTP's lines, answered without a line per query); errors
//! map through [`ServiceError::statuses`], with the JSON error body of the error table (docs/protocol.md)
//! as the status message.

use crate::metrics::Metrics;
use crate::proto::v1 as pb;
use crate::query::{
    Answer, BoxLine, EntityLine, GroundAnswer, GroundLine, PredictLine, QueryLine, ShapeLine,
    SlideLine,
};
use crate::registry::WorldEvent;
use crate::service::{
    triples, xyz, PackedAnswer, PackedResults, PackedTraces, Service, ServiceError,
    WorldDescription,
};
use axum::response::IntoResponse;
use pb::admin_server::{Admin, AdminServer};
use pb::collision_server::{Collision, CollisionServer};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::Stream;
use tonic::codegen::{http, BoxFuture, Service as TowerService};
use tonic::server::NamedService;
use tonic::service::interceptor::InterceptedService;
use tonic::{Code, Request, Response, Status, Streaming};

pub mod bots;
mod floor;

const TRANSPORT: &str = "grpc";

/// Connection-level settings of the gRPC server.
#[derive(Debug, Clone)]
pub struct GrpcOptions {
    /// Calls (HTTP/2 streams: unary calls, open `TraceStream`s and health
    /// watches alike) open at once on one connection; a client holds its
    /// further calls until one ends.
    pub concurrency_per_connection: usize,
    /// HTTP/2 keepalive ping interval and how long to wait for the ack.
    pub keepalive_interval: Duration,
    pub keepalive_timeout: Duration,
    /// Connections are closed (GOAWAY, then a grace period) after this age,
    /// so clients rebalance; `None` keeps them open.
    pub max_connection_age: Option<Duration>,
    /// A connection whose client has not sent the HTTP/2 preface this long
    /// after connecting is closed.
    pub preface_timeout: Duration,
}

impl Default for GrpcOptions {
    fn default() -> Self {
        Self {
            concurrency_per_connection: 64,
            keepalive_interval: Duration::from_secs(30),
            keepalive_timeout: Duration::from_secs(10),
            max_connection_age: Some(Duration::from_secs(3600)),
            preface_timeout: Duration::from_secs(60),
        }
    }
}

/// What every handler shares.
#[derive(Debug, Clone)]
pub struct GrpcState {
    pub service: Arc<Service>,
    pub metrics: Arc<Metrics>,
    /// Turns true when shutdown starts: open streams end.
    pub stop: watch::Receiver<bool>,
}

/// A [`ServiceError`] as a gRPC status: the code from the one table, the
/// JSON error body as the message.
pub fn status(e: &ServiceError) -> Status {
    let (_, code) = e.statuses();
    Status::new(Code::from(code), e.to_json().to_string())
}

fn malformed(message: String) -> ServiceError {
    ServiceError::Malformed(message)
}

fn vec3(v: &Option<pb::Vec3>) -> [f64; 3] {
    v.as_ref()
        .map_or([0.0; 3], |v| [v.x as f64, v.y as f64, v.z as f64])
}

/// A trace request as the core's packed batch (validated by the core).
pub fn packed(req: &pb::TraceRequest) -> Result<PackedTraces<'_>, ServiceError> {
    let (mins, maxs) = match &req.shape {
        Some(shape) => (Some(vec3(&shape.mins)), Some(vec3(&shape.maxs))),
        None => (None, None),
    };
    let shapes = req
        .shapes
        .iter()
        .map(query_shape)
        .collect::<Result<Vec<_>, _>>()?;
    let mut movement = move_lines(req, &shapes)?;
    for (i, prediction) in req.predictions.iter().enumerate() {
        movement.push(prediction_line(req, &shapes, i, prediction)?);
    }
    Ok(PackedTraces {
        starts: &req.starts,
        ends: &req.ends,
        template: QueryLine {
            mins,
            maxs,
            mask: req.mask,
            any: req.any_hit.then_some(true),
            shape: req.swept.as_ref().map(swept_shape).transpose()?,
            exact: req.exact.then_some(true),
            hull: req.hull.clone(),
            pass: req.pass.map(i64::from),
            ..QueryLine::default()
        },
        masks: &req.masks,
        passes: &req.passes,
        shapes,
        shape_index: &req.shape_index,
        any_hits: &req.any_hits,
        points: &req.points,
        point_passes: &req.point_passes,
        movement,
        scene: if req.upsert.is_empty() && req.remove.is_empty() {
            req.scene.as_ref().map(scene_lines)
        } else {
            Some(scene_lines(&apply_changes(req.scene.clone(), req)))
        },
    })
}

/// The box of a move or prediction (`what`): entry `k` of the shape table
/// as `mins`/`maxs` or a hull name (a ray gives neither, which the line
/// check refuses as a missing `mins`).
type MoveBox = (Option<[f64; 3]>, Option<[f64; 3]>, Option<String>);

fn move_box(shapes: &[QueryLine], k: u32, what: &str) -> Result<MoveBox, ServiceError> {
    let shape = shapes.get(k as usize).ok_or_else(|| {
        malformed(format!(
            "{what}: `shape_index` {k} is past the {} entries of `shapes`",
            shapes.len()
        ))
    })?;
    if shape.shape.is_some() || shape.exact.is_some() {
        return Err(malformed(format!(
            "{what}: `shape_index` {k} names a swept shape or `exact`; moves take a box or a hull"
        )));
    }
    Ok((shape.mins, shape.maxs, shape.hull.clone()))
}

/// A tick's `moves` columns as `ground` and `slide` lines.
fn move_lines(
    req: &pb::TraceRequest,
    shapes: &[QueryLine],
) -> Result<Vec<QueryLine>, ServiceError> {
    let Some(moves) = &req.moves else {
        return Ok(Vec::new());
    };
    let n = moves.kinds.len();
    let column = |field: &str, len: usize, per_move: usize, required: bool| {
        if len == n * per_move || (len == 0 && !required) {
            Ok(())
        } else {
            Err(malformed(format!(
                "`moves.{field}` holds {len} values for {n} moves ({}{per_move} per move)",
                if required { "" } else { "send none or " }
            )))
        }
    };
    column("origins", moves.origins.len(), 3, true)?;
    column("shape_index", moves.shape_index.len(), 1, true)?;
    column("velocities", moves.velocities.len(), 3, false)?;
    column("grounds", moves.grounds.len(), 3, false)?;
    column("frametimes", moves.frametimes.len(), 1, false)?;
    column("gravities", moves.gravities.len(), 1, false)?;
    column("steps", moves.steps.len(), 1, false)?;
    column("masks", moves.masks.len(), 1, false)?;
    column("passes", moves.passes.len(), 1, false)?;
    let triple = |values: &[f32], i: usize| (!values.is_empty()).then(|| xyz(values, i));
    (0..n)
        .map(|i| {
            let (mins, maxs, hull) = move_box(shapes, moves.shape_index[i], &format!("move {i}"))?;
            let origin = xyz(&moves.origins, i);
            let mask = moves.masks.get(i).copied();
            let pass = moves.passes.get(i).copied().or(req.pass).map(i64::from);
            let kind = moves.kinds[i];
            if kind == pb::MoveKind::Ground as i32 {
                return Ok(QueryLine {
                    ground: Some(GroundLine {
                        origin,
                        mins,
                        maxs,
                        hull,
                        mask,
                        pass,
                    }),
                    ..QueryLine::default()
                });
            }
            if kind != pb::MoveKind::Slide as i32 {
                return Err(malformed(format!("move {i}: unknown kind {kind}")));
            }
            Ok(QueryLine {
                slide: Some(SlideLine {
                    origin,
                    velocity: triple(&moves.velocities, i).unwrap_or_default(),
                    frametime: moves.frametimes.get(i).map_or(0.0, |&t| t as f64),
                    gravity: moves.gravities.get(i).map(|&g| g.into()),
                    ground: triple(&moves.grounds, i).filter(|g| *g != [0.0; 3]),
                    step: Some(moves.steps.get(i).copied().unwrap_or(true)),
                    mins,
                    maxs,
                    hull,
                    mask,
                    pass,
                }),
                ..QueryLine::default()
            })
        })
        .collect()
}

/// Prediction `i` of a tick as a `predict` line.
fn prediction_line(
    req: &pb::TraceRequest,
    shapes: &[QueryLine],
    i: usize,
    p: &pb::Prediction,
) -> Result<QueryLine, ServiceError> {
    let (mins, maxs, hull) = move_box(shapes, p.shape_index, &format!("prediction {i}"))?;
    Ok(QueryLine {
        predict: Some(PredictLine {
            origin: vec3(&p.origin),
            velocity: vec3(&p.velocity),
            frametime: p.frametime.into(),
            ticks: p.ticks.into(),
            gravity: Some(p.gravity.into()),
            until: (!p.until.is_empty()).then(|| p.until.clone()),
            blocked_speed: p.blocked_speed.map(f64::from),
            contents: p.contents,
            fall: p.fall.map(f64::from),
            path: p.path.then_some(true),
            mins,
            maxs,
            hull,
            mask: p.mask,
            pass: p.pass.or(req.pass).map(i64::from),
        }),
        ..QueryLine::default()
    })
}

/// A tick's shape table entry as the shape fields of a line.
fn query_shape(shape: &pb::QueryShape) -> Result<QueryLine, ServiceError> {
    use pb::query_shape::Kind;
    let mut line = QueryLine {
        exact: shape.exact.then_some(true),
        ..QueryLine::default()
    };
    match &shape.kind {
        None => {}
        Some(Kind::Box(b)) => {
            line.mins = Some(vec3(&b.mins));
            line.maxs = Some(vec3(&b.maxs));
        }
        Some(Kind::Hull(name)) => line.hull = Some(name.clone()),
        Some(Kind::Swept(s)) => line.shape = Some(swept_shape(s)?),
    }
    Ok(line)
}

/// `scene` (none: empty) with a message's `upsert` and `remove` applied.
fn apply_changes(scene: Option<pb::Scene>, req: &pb::TraceRequest) -> pb::Scene {
    let mut scene = scene.unwrap_or_default();
    for e in &req.upsert {
        match scene.entities.iter_mut().find(|s| s.id == e.id) {
            Some(slot) => *slot = e.clone(),
            None => scene.entities.push(e.clone()),
        }
    }
    scene.entities.retain(|e| !req.remove.contains(&e.id));
    scene
}

/// A scene message as the line format's entities (checked with them).
fn scene_lines(scene: &pb::Scene) -> Vec<EntityLine> {
    scene
        .entities
        .iter()
        .map(|e| EntityLine {
            id: e.id.into(),
            model: match &e.shape {
                Some(pb::scene_entity::Shape::Model(name)) => Some(name.clone()),
                _ => None,
            },
            bbox: match &e.shape {
                Some(pb::scene_entity::Shape::Box(b)) => Some(BoxLine {
                    mins: vec3(&b.mins),
                    maxs: vec3(&b.maxs),
                }),
                _ => None,
            },
            origin: Some(vec3(&e.origin)),
            angles: Some(vec3(&e.angles)),
            contents: e.contents,
            owner: e.owner.map(i64::from),
        })
        .collect()
}

/// A packed trace batch as the equivalent query lines (what HTTP would be
/// sent; the answers are the same).
pub fn trace_lines(req: &pb::TraceRequest, limit: usize) -> Result<Vec<QueryLine>, ServiceError> {
    let batch = packed(req)?;
    let n = batch.count()?;
    if n > limit {
        return Err(ServiceError::TooManyQueries { count: n, limit });
    }
    batch.lines()
}

/// A batch's swept shape as the line form (validated later by the core).
pub fn swept_shape(s: &pb::SweptShape) -> Result<ShapeLine, ServiceError> {
    use pb::swept_shape::Kind;
    let f = |v: f32| v as f64;
    Ok(match &s.kind {
        None => return Err(malformed("`swept` names no shape".into())),
        Some(Kind::Sphere(s)) => ShapeLine::Sphere {
            radius: f(s.radius),
        },
        Some(Kind::Capsule(c)) => ShapeLine::Capsule {
            radius: f(c.radius),
            half_height: f(c.half_height),
        },
        Some(Kind::Cylinder(c)) => ShapeLine::Cylinder {
            radius: f(c.radius),
            half_height: f(c.half_height),
        },
        Some(Kind::Convex(c)) => {
            let n = triples("swept.convex.points", &c.points)?;
            ShapeLine::Convex {
                points: (0..n).map(|i| xyz(&c.points, i)).collect(),
            }
        }
    })
}

/// The wire form of a line's shape.
pub fn swept_message(s: &ShapeLine) -> pb::SweptShape {
    use pb::swept_shape::Kind;
    let f = |v: f64| v as f32;
    let kind = match s {
        ShapeLine::Sphere { radius } => Kind::Sphere(pb::Sphere { radius: f(*radius) }),
        ShapeLine::Capsule {
            radius,
            half_height,
        } => Kind::Capsule(pb::Capsule {
            radius: f(*radius),
            half_height: f(*half_height),
        }),
        ShapeLine::Cylinder {
            radius,
            half_height,
        } => Kind::Cylinder(pb::Cylinder {
            radius: f(*radius),
            half_height: f(*half_height),
        }),
        ShapeLine::Convex { points } => Kind::Convex(pb::Convex {
            points: points.iter().flatten().map(|c| f(*c)).collect(),
        }),
    };
    pb::SweptShape { kind: Some(kind) }
}

/// Packed points.
pub fn points(req: &pb::PointContentsRequest, limit: usize) -> Result<Vec<[f64; 3]>, ServiceError> {
    let n = triples("points", &req.points)?;
    if n > limit {
        return Err(ServiceError::TooManyQueries { count: n, limit });
    }
    Ok((0..n).map(|i| xyz(&req.points, i)).collect())
}

/// Answers as packed arrays.
pub fn trace_response(answer: PackedAnswer, sequence: u64) -> pb::TraceResponse {
    let mut r = pb::TraceResponse {
        world: answer.world,
        version: answer.version,
        source_hash: answer.source_hash,
        sequence,
        ..Default::default()
    };
    r.entities = answer.entities;
    r.point_contents = answer.point_contents;
    movement_answers(&answer.movement, &mut r);
    let (t, hit_only) = match answer.results {
        PackedResults::Hits(hits) => {
            r.hits = hits;
            return r;
        }
        PackedResults::Traces(t) => (t, Vec::new()),
        PackedResults::Mixed {
            traces,
            hits,
            hit_only,
        } => {
            r.hits = hits;
            (traces, hit_only)
        }
    };
    r.endpos = t.endpos.iter().flat_map(|v| v.to_array()).collect();
    r.normals = t.normals.iter().flat_map(|v| v.to_array()).collect();
    let flag = |on: bool, flag: pb::TraceFlag| if on { flag as u32 } else { 0 };
    r.flags = (0..t.len())
        .map(|i| {
            flag(t.startsolid[i], pb::TraceFlag::Startsolid)
                | flag(t.allsolid[i], pb::TraceFlag::Allsolid)
                | flag(hit_only.get(i) == Some(&true), pb::TraceFlag::HitOnly)
        })
        .collect();
    r.fractions = t.fractions;
    r.dists = t.dists;
    r.contents = t.contents;
    r.surface_flags = t.surface_flags;
    r
}

fn trace_flags(startsolid: bool, allsolid: bool) -> u32 {
    let flag = |on: bool, flag: pb::TraceFlag| if on { flag as u32 } else { 0 };
    flag(startsolid, pb::TraceFlag::Startsolid) | flag(allsolid, pb::TraceFlag::Allsolid)
}

/// A ground probe's answer as its message.
fn ground_probe(g: &GroundAnswer) -> pb::GroundProbe {
    let t = &g.trace;
    pb::GroundProbe {
        fraction: t.fraction,
        endpos: pb_vec3(t.endpos),
        normal: pb_vec3(t.normal),
        dist: t.dist,
        flags: trace_flags(t.startsolid, t.allsolid),
        contents: t.contents,
        surface_flags: t.surface_flags,
        entity: t.entity,
        walkable: g.walkable,
    }
}

/// Movement answers into a response: ground probes and slide moves packed
/// in `moves`, predictions one message each.
fn movement_answers(answers: &[Answer], r: &mut pb::TraceResponse) {
    let mut moves = pb::MoveAnswers::default();
    let probe = |m: &mut pb::MoveAnswers, g: &GroundAnswer| {
        let t = &g.trace;
        m.fractions.push(t.fraction);
        m.endpos.extend(t.endpos);
        m.normals.extend(t.normal);
        m.dists.push(t.dist);
        m.flags.push(trace_flags(t.startsolid, t.allsolid));
        m.contents.push(t.contents);
        m.surface_flags.push(t.surface_flags);
        m.entities.extend(t.entity);
        m.walkable.push(g.walkable);
    };
    for answer in answers {
        match answer {
            Answer::Ground(g) => {
                moves.origins.extend([0.0; 3]);
                moves.velocities.extend([0.0; 3]);
                moves.blocked.push(false);
                moves.stepped.push(0.0);
                probe(&mut moves, g);
            }
            Answer::Slide(s) => {
                moves.origins.extend(s.origin);
                moves.velocities.extend(s.velocity);
                moves.blocked.push(s.blocked == Some(true));
                moves.stepped.push(s.stepped);
                probe(&mut moves, &s.ground);
            }
            Answer::Predict(p) => r.predictions.push(pb::PredictionAnswer {
                event: p.event.clone(),
                tick: p.tick,
                origin: pb_vec3(p.origin),
                velocity: pb_vec3(p.velocity),
                on_ground: p.on_ground,
                ground: Some(ground_probe(&p.ground)),
                path: p.path.iter().flatten().flatten().copied().collect(),
            }),
            Answer::Trace(_)
            | Answer::Point(_)
            | Answer::Hit(_)
            | Answer::Scene(_)
            | Answer::Bots(_) => {}
        }
    }
    if !moves.walkable.is_empty() {
        r.moves = Some(moves);
    }
}

fn pb_vec3(v: [f32; 3]) -> Option<pb::Vec3> {
    Some(pb::Vec3 {
        x: v[0],
        y: v[1],
        z: v[2],
    })
}

pub fn world_info(d: WorldDescription) -> pb::WorldInfo {
    pb::WorldInfo {
        name: d.name,
        version: d.version,
        source: d.source.unwrap_or_default(),
        loaded_at: d.loaded_at.unwrap_or_default(),
        bounds: d.bounds.map(|b| pb::Box {
            mins: pb_vec3(b.mins),
            maxs: pb_vec3(b.maxs),
        }),
        curves: d.curves.unwrap_or(false),
        hulls: d.hulls,
        status: d.status.to_owned(),
        last_error: d.last_error.unwrap_or_default(),
        failed_loads: d.failed_loads,
        source_name: d.source_name.unwrap_or_default(),
        source_hash: d.source_hash.unwrap_or_default(),
        counts: d.counts.map(|c| pb::WorldCounts {
            brushes: c.brushes as u64,
            patches: c.patches as u64,
            nodes: c.nodes as u64,
            leaves: c.leaves as u64,
            bytes: c.bytes as u64,
        }),
        models: d
            .models
            .into_iter()
            .map(|m| pb::InlineModel {
                index: m.index as u32,
                bounds: Some(pb::Box {
                    mins: pb_vec3(m.bounds.mins),
                    maxs: pb_vec3(m.bounds.maxs),
                }),
                brushes: m.brushes as u64,
                patches: m.patches as u64,
            })
            .collect(),
    }
}

fn event(e: WorldEvent) -> pb::WorldVersionEvent {
    pb::WorldVersionEvent {
        name: e.name,
        version: e.version,
        error: e.error.unwrap_or_default(),
    }
}

impl GrpcState {
    /// Runs service work (`queries` of it: a small batch on this task,
    /// anything else on the blocking pool); errors become counted statuses.
    async fn run_work<T: Send + 'static>(
        &self,
        kind: &'static str,
        queries: Option<usize>,
        work: impl FnOnce(&Service) -> Result<T, ServiceError> + Send + 'static,
    ) -> Result<T, Status> {
        super::run_work(
            &self.service,
            &self.metrics,
            (kind, TRANSPORT),
            queries,
            work,
        )
        .await
        .map_err(|e| self.rejected(&e))
    }

    fn rejected(&self, e: &ServiceError) -> Status {
        self.metrics.count_error(e.code(), TRANSPORT);
        status(e)
    }

    /// tonic's own refusal of a message over the decode limit (OUT_OF_RANGE,
    /// plain text) as the error table's `too_large`; other statuses as they
    /// are. No handler answers OUT_OF_RANGE, so the code alone tells it.
    fn table_status(&self, status: Status, limit: usize) -> Status {
        if status.code() == Code::OutOfRange {
            self.rejected(&ServiceError::TooLarge(limit))
        } else {
            status
        }
    }

    async fn trace_batch(&self, req: pb::TraceRequest) -> Result<pb::TraceResponse, Status> {
        let world = req.world.clone();
        let sequence = req.sequence;
        // A prediction weighs its ticks (each a slide move): a long one is
        // not answered on the reactor.
        let moves = req.moves.as_ref().map_or(0, |m| m.kinds.len());
        let prediction_ticks = req
            .predictions
            .iter()
            .fold(0usize, |sum, p| sum.saturating_add(p.ticks.max(1) as usize));
        let queries = ((req.starts.len() + req.points.len()) / 3)
            .saturating_add(moves)
            .saturating_add(prediction_ticks);
        let answer = self
            .run_work("trace", Some(queries), move |s| {
                s.trace_packed(&req.world, &packed(&req)?)
            })
            .await?;
        let count = answer.results.len() + answer.point_contents.len() + answer.movement.len();
        self.metrics.count_batch(&world, "trace", TRANSPORT, count);
        Ok(trace_response(answer, sequence))
    }

    /// The admin interceptor: checks the `authorization` metadata before
    /// tonic decodes (so reads) the message, so an unauthorised upload
    /// costs nothing and is refused before any size limit applies.
    fn require_admin(&self, req: Request<()>) -> Result<Request<()>, Status> {
        let authorization = req
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        self.service
            .check_admin(authorization)
            .map_err(|e| self.rejected(&e))?;
        Ok(req)
    }
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// An open `TraceStream`: its messages still to come and the scene it
/// keeps (the state lives in the stream, not the server).
struct StreamState {
    inbound: Streaming<pb::TraceRequest>,
    state: GrpcState,
    stop: watch::Receiver<bool>,
    scene: Option<pb::Scene>,
}

impl StreamState {
    /// The answer to the next message, in order; `None` once the client
    /// has ended the stream. New messages are not taken once shutdown
    /// starts: that ends the stream with UNAVAILABLE, not OK, since the
    /// client's batches were not all answered (and clients retry
    /// UNAVAILABLE).
    async fn next_answer(&mut self) -> Option<Result<pb::TraceResponse, Status>> {
        let limit = self.state.service.limits.max_body_bytes;
        let next = tokio::select! {
            biased;
            _ = self.stop.wait_for(|s| *s) => Err(self.state.rejected(&ServiceError::ShuttingDown)),
            next = self.inbound.message() => next.map_err(|e| self.state.table_status(e, limit)),
        };
        let mut batch = match next {
            Ok(Some(batch)) => batch,
            Ok(None) => return None,
            Err(status) => return Some(Err(status)),
        };
        match &batch.scene {
            Some(own) if own.entities.is_empty() => self.scene = None,
            Some(own) => self.scene = Some(own.clone()),
            None => {}
        }
        if !batch.upsert.is_empty() || !batch.remove.is_empty() {
            self.scene = Some(apply_changes(self.scene.take(), &batch));
            batch.upsert.clear();
            batch.remove.clear();
        }
        batch.scene = self.scene.clone();
        Some(self.state.trace_batch(batch).await)
    }
}

/// The `Collision` service.
#[derive(Debug, Clone)]
pub struct GrpcCollision(pub GrpcState);

#[tonic::async_trait]
impl Collision for GrpcCollision {
    async fn sight(
        &self,
        request: Request<pb::SightRequest>,
    ) -> Result<Response<pb::SightResponse>, Status> {
        self.0.sight(request.into_inner()).await.map(Response::new)
    }

    async fn pvs(
        &self,
        request: Request<pb::PvsRequest>,
    ) -> Result<Response<pb::PvsResponse>, Status> {
        self.0.pvs(request.into_inner()).await.map(Response::new)
    }

    async fn walk(
        &self,
        request: Request<pb::WalkRequest>,
    ) -> Result<Response<pb::WalkResponse>, Status> {
        self.0.walk(request.into_inner()).await.map(Response::new)
    }

    type FloorStream = BoxStream<pb::FloorChunk>;

    async fn floor(
        &self,
        request: Request<pb::FloorRequest>,
    ) -> Result<Response<Self::FloorStream>, Status> {
        self.0.floor(request.into_inner()).map(Response::new)
    }

    async fn trace(
        &self,
        request: Request<pb::TraceRequest>,
    ) -> Result<Response<pb::TraceResponse>, Status> {
        self.0
            .trace_batch(request.into_inner())
            .await
            .map(Response::new)
    }

    type TraceStreamStream = BoxStream<pb::TraceResponse>;

    async fn trace_stream(
        &self,
        request: Request<Streaming<pb::TraceRequest>>,
    ) -> Result<Response<Self::TraceStreamStream>, Status> {
        // Each message is read and answered as the answer stream is polled,
        // in the call's own task: no task of its own and no channel between,
        // so a tick crosses no thread the call does not already.
        let open = StreamState {
            inbound: request.into_inner(),
            state: self.0.clone(),
            stop: self.0.stop.clone(),
            scene: None,
        };
        let answers = futures_util::stream::unfold(Some(open), |open| async move {
            let mut open = open?;
            let answer = open.next_answer().await?;
            // A failed batch ends the stream after its error.
            let keep = answer.is_ok().then_some(open);
            Some((answer, keep))
        });
        Ok(Response::new(Box::pin(answers)))
    }

    async fn point_contents(
        &self,
        request: Request<pb::PointContentsRequest>,
    ) -> Result<Response<pb::PointContentsResponse>, Status> {
        let state = &self.0;
        let req = request.into_inner();
        let pts = points(&req, state.service.limits.max_queries_per_request)
            .map_err(|e| state.rejected(&e))?;
        let count = pts.len();
        let name = req.world.clone();
        let answer = state
            .run_work("contents", Some(count), move |s| s.contents(&name, &pts))
            .await?;
        state
            .metrics
            .count_batch(&answer.world, "contents", TRANSPORT, count);
        let contents = answer
            .results
            .iter()
            .map(|a| match a {
                Answer::Point(p) => p.contents,
                Answer::Trace(t) => t.contents,
                // Never asked for here: contents requests hold only points.
                Answer::Hit(_)
                | Answer::Scene(_)
                | Answer::Ground(_)
                | Answer::Slide(_)
                | Answer::Predict(_)
                | Answer::Bots(_) => 0,
            })
            .collect();
        Ok(Response::new(pb::PointContentsResponse {
            world: answer.world,
            version: answer.version,
            source_hash: answer.source_hash,
            contents,
        }))
    }

    async fn list_worlds(
        &self,
        _request: Request<pb::ListWorldsRequest>,
    ) -> Result<Response<pb::ListWorldsResponse>, Status> {
        let worlds = self
            .0
            .service
            .describe_all()
            .into_iter()
            .map(world_info)
            .collect();
        Ok(Response::new(pb::ListWorldsResponse { worlds }))
    }

    async fn get_world(
        &self,
        request: Request<pb::GetWorldRequest>,
    ) -> Result<Response<pb::WorldInfo>, Status> {
        let d = self
            .0
            .service
            .describe(&request.get_ref().name)
            .map_err(|e| self.0.rejected(&e))?;
        Ok(Response::new(world_info(d)))
    }

    async fn get_entities(
        &self,
        request: Request<pb::GetEntitiesRequest>,
    ) -> Result<Response<pb::GetEntitiesResponse>, Status> {
        let version = self
            .0
            .service
            .world(&request.get_ref().name)
            .map_err(|e| self.0.rejected(&e))?;
        let entities = version
            .world
            .entities()
            .iter()
            .map(|e| pb::Entity {
                pairs: e
                    .pairs
                    .iter()
                    .map(|(key, value)| pb::EntityPair {
                        key: key.clone(),
                        value: value.clone(),
                    })
                    .collect(),
            })
            .collect();
        Ok(Response::new(pb::GetEntitiesResponse {
            world: version.name.clone(),
            version: version.version,
            source_hash: version.source_hash.clone(),
            entities,
        }))
    }

    type WatchWorldsStream = BoxStream<pb::WorldVersionEvent>;

    async fn watch_worlds(
        &self,
        _request: Request<pb::WatchWorldsRequest>,
    ) -> Result<Response<Self::WatchWorldsStream>, Status> {
        let service = Arc::clone(&self.0.service);
        // Subscribe before the snapshot so no change falls in between.
        let mut events = service.registry.subscribe();
        let mut stop = self.0.stop.clone();
        let (tx, rx) = mpsc::channel(64);
        let snapshot = move |service: &Service| -> Vec<pb::WorldVersionEvent> {
            service
                .describe_all()
                .into_iter()
                .map(|d| pb::WorldVersionEvent {
                    name: d.name,
                    version: d.version,
                    error: d.last_error.unwrap_or_default(),
                })
                .collect()
        };
        tokio::spawn(async move {
            for e in snapshot(&service) {
                if tx.send(Ok(e)).await.is_err() {
                    return;
                }
            }
            loop {
                let batch = tokio::select! {
                    biased;
                    _ = stop.wait_for(|s| *s) => return,
                    _ = tx.closed() => return,
                    received = events.recv() => match received {
                        Ok(e) => vec![event(e)],
                        // Missed changes: send every current version again.
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => snapshot(&service),
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                    },
                };
                for e in batch {
                    if tx.send(Ok(e)).await.is_err() {
                        return;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

/// The token-protected `Admin` service (served behind
/// [`GrpcState::require_admin`]).
#[derive(Debug, Clone)]
pub struct GrpcAdmin(pub GrpcState);

#[tonic::async_trait]
impl Admin for GrpcAdmin {
    async fn load_world(
        &self,
        request: Request<pb::LoadWorldRequest>,
    ) -> Result<Response<pb::LoadWorldResponse>, Status> {
        let state = &self.0;
        let req = request.into_inner();
        let world = req.name.clone();
        let (name, data) = (req.name, req.data);
        let loaded = state
            .run_work("admin", None, move |s| s.upload(&name, &data))
            .await?;
        state.metrics.count_request(&world, "admin", TRANSPORT);
        Ok(Response::new(pb::LoadWorldResponse {
            world,
            version: loaded.version,
            source_hash: loaded.source_hash,
        }))
    }

    async fn unload_world(
        &self,
        request: Request<pb::UnloadWorldRequest>,
    ) -> Result<Response<pb::UnloadWorldResponse>, Status> {
        let state = &self.0;
        let name = request.into_inner().name;
        let world = name.clone();
        // Off the reactor: an unload waits for a load of the same name to end.
        state
            .run_work("admin", None, move |s| s.unload(&world))
            .await?;
        state.metrics.count_request(&name, "admin", TRANSPORT);
        Ok(Response::new(pb::UnloadWorldResponse {
            world: name,
            unloaded: true,
        }))
    }
}

/// A gRPC service whose refusals of oversized messages follow the error
/// table (see [`GrpcState::table_status`]): tonic answers those itself,
/// before any handler runs, so the rewrite happens around the service.
#[derive(Clone)]
struct TableSizeStatus<S> {
    inner: S,
    state: GrpcState,
    /// The limit the refusal names.
    limit: usize,
}

impl<S, B> TowerService<http::Request<tonic::body::Body>> for TableSizeStatus<S>
where
    S: TowerService<
        http::Request<tonic::body::Body>,
        Response = http::Response<B>,
        Error = Infallible,
    >,
    S::Future: Send + 'static,
    http::Response<B>: IntoResponse,
{
    type Response = axum::response::Response;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let (state, limit) = (self.state.clone(), self.limit);
        let answer = self.inner.call(request);
        Box::pin(async move {
            let response = answer.await?;
            // A refusal before the handler is a status in the headers.
            Ok(match Status::from_header_map(response.headers()) {
                Some(status) if status.code() == Code::OutOfRange => state
                    .table_status(status, limit)
                    .into_http::<axum::body::Body>(),
                _ => response.into_response(),
            })
        })
    }
}

impl<S: NamedService> NamedService for TableSizeStatus<S> {
    const NAME: &'static str = S::NAME;
}

/// The service name health checking reports for the collision service.
pub const COLLISION_SERVICE: &str = "bspq.v1.Collision";

/// Serves gRPC on `listener` until `stop` turns true (then drains).
pub async fn serve(
    state: GrpcState,
    options: GrpcOptions,
    health: tonic_health::pb::health_server::HealthServer<
        impl tonic_health::pb::health_server::Health,
    >,
    listener: tokio::net::TcpListener,
    connections: super::connections::ConnectionLimit,
) -> anyhow::Result<()> {
    let limits = &state.service.limits;
    let decode = limits.max_body_bytes;
    // A trace answer is ~13 numbers per query: room for a full batch.
    let encode = limits
        .max_body_bytes
        .max(limits.max_queries_per_request.saturating_mul(64) + 4096);
    let upload = limits.max_upload_bytes.saturating_add(4096);
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(crate::proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(crate::proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;
    let collision = super::body_admission::AdmitMessages {
        inner: TableSizeStatus {
            inner: CollisionServer::new(GrpcCollision(state.clone()))
                .max_decoding_message_size(decode)
                .max_encoding_message_size(encode),
            state: state.clone(),
            limit: decode,
        },
        service: Arc::clone(&state.service),
    };
    let admin_state = state.clone();
    let admin = TableSizeStatus {
        inner: InterceptedService::new(
            AdminServer::new(GrpcAdmin(state.clone()))
                .max_decoding_message_size(upload)
                .max_encoding_message_size(encode),
            move |request| admin_state.require_admin(request),
        ),
        state: state.clone(),
        limit: limits.max_upload_bytes,
    };
    // The limit is HTTP/2's own (SETTINGS_MAX_CONCURRENT_STREAMS), so a
    // client holds calls past it until a stream ends. A limit inside the
    // server (tonic's per-connection concurrency limit) took the streams
    // and held their bodies unread: a few large calls over it filled the
    // connection's flow-control window, so the running calls could not read
    // their own bodies and every call waited out its deadline. It also
    // counted a streaming call only until its answer stream opened.
    let streams = u32::try_from(options.concurrency_per_connection.max(1)).unwrap_or(u32::MAX);
    let mut builder = tonic::transport::Server::builder()
        .max_concurrent_streams(streams)
        .http2_keepalive_interval(Some(options.keepalive_interval))
        .http2_keepalive_timeout(Some(options.keepalive_timeout));
    if let Some(age) = options.max_connection_age {
        builder = builder.max_connection_age(age);
    }
    let mut stop = state.stop.clone();
    builder
        .add_service(health)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(collision)
        .add_service(admin)
        .serve_with_incoming_shutdown(
            super::accept::with_http2_preface(
                listener,
                options.preface_timeout,
                connections,
                Arc::clone(&state.metrics),
            ),
            async move {
                let _ = stop.wait_for(|s| *s).await;
            },
        )
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_arrays() {
        let req = pb::TraceRequest {
            world: "w".into(),
            starts: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            ends: vec![0.0; 6],
            shape: Some(pb::Box {
                mins: pb_vec3([-1.0; 3]),
                maxs: pb_vec3([1.0; 3]),
            }),
            mask: Some(7),
            masks: vec![],
            sequence: 0,
            swept: None,
            exact: false,
            any_hit: false,
            hull: None,
            ..Default::default()
        };
        let lines = trace_lines(&req, 10).expect("valid");
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1].start, Some([4.0, 5.0, 6.0]));
        assert_eq!(lines[1].mins, Some([-1.0; 3]));
        assert_eq!(lines[0].mask, Some(7));
        let bad = |f: &dyn Fn(&mut pb::TraceRequest)| {
            let mut r = req.clone();
            f(&mut r);
            trace_lines(&r, 10).expect_err("rejected").statuses().1
        };
        use crate::service::grpc_code::*;
        assert_eq!(
            bad(&|r| r.starts.pop().map(drop).unwrap_or(())),
            INVALID_ARGUMENT
        );
        assert_eq!(bad(&|r| r.ends.truncate(3)), INVALID_ARGUMENT);
        assert_eq!(bad(&|r| r.masks = vec![1]), INVALID_ARGUMENT);
        assert!(trace_lines(&req, 1).is_err());
        let ok = {
            let mut r = req.clone();
            r.masks = vec![1, 2];
            trace_lines(&r, 10).expect("valid")
        };
        assert_eq!(ok[1].mask, Some(2));
    }
}
