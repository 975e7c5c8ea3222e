//! The bot calls over gRPC: packed wire arrays to the service's bot calls
//! and back (and the conversions a client needs to send JSON walks).

use super::{scene_lines, vec3, GrpcState, TRANSPORT};
use crate::bots::pvs::{PointLeaf, PortalRef};
use crate::bots::walk::{PLAYER_MAXS, PLAYER_MINS};
use crate::bots::{PvsLine, SightLine, Stop, WalkAnswer, WalkLine};
use crate::proto::v1 as pb;
use crate::service::{triples, xyz, ServiceError};
use tonic::Status;

/// Packed `x,y,z` triples as points.
fn point_list(field: &str, values: &[f32]) -> Result<Vec<[f64; 3]>, ServiceError> {
    let n = triples(field, values)?;
    Ok((0..n).map(|i| xyz(values, i)).collect())
}

impl GrpcState {
    pub(super) async fn sight(&self, req: pb::SightRequest) -> Result<pb::SightResponse, Status> {
        let line = (|| {
            let eyes = point_list("eyes", &req.eyes)?;
            let targets = point_list("targets", &req.targets)?;
            Ok(SightLine {
                eyes,
                targets: (!targets.is_empty()).then_some(targets),
                mask: req.mask,
            })
        })()
        .map_err(|e: ServiceError| self.rejected(&e))?;
        let entities = req.scene.as_ref().map(scene_lines);
        let pairs = line.pairs();
        let name = req.world;
        let answer = self
            .run_work("sight", Some(pairs), move |s| {
                s.sight(&name, &line, entities.as_deref())
            })
            .await?;
        self.metrics
            .count_batch(&answer.world, "sight", TRANSPORT, pairs);
        let matrix = answer.answer;
        Ok(pb::SightResponse {
            world: answer.world,
            version: answer.version,
            eyes: matrix.eyes as u32,
            targets: matrix.targets as u32,
            visible: matrix.packed(),
            source_hash: answer.source_hash,
        })
    }

    pub(super) async fn pvs(&self, req: pb::PvsRequest) -> Result<pb::PvsResponse, Status> {
        let line = (|| {
            let points = point_list("points", &req.points)?;
            let targets = point_list("targets", &req.targets)?;
            if !req.closed_area_pairs.len().is_multiple_of(2) {
                return Err(ServiceError::Malformed(format!(
                    "`closed_area_pairs` holds {} numbers, not whole pairs",
                    req.closed_area_pairs.len()
                )));
            }
            let closed: Vec<PortalRef> = (req.closed_portals.iter().copied())
                .map(PortalRef::Index)
                .chain(
                    req.closed_area_pairs
                        .chunks_exact(2)
                        .map(|p| PortalRef::Areas([p[0], p[1]])),
                )
                .collect();
            Ok(PvsLine {
                points,
                targets: (!targets.is_empty()).then_some(targets),
                closed_portals: (!closed.is_empty()).then_some(closed),
            })
        })()
        .map_err(|e: ServiceError| self.rejected(&e))?;
        let pairs = line.pairs();
        let name = req.world;
        let answer = self
            .run_work("pvs", Some(pairs), move |s| s.pvs(&name, &line))
            .await?;
        self.metrics
            .count_batch(&answer.world, "pvs", TRANSPORT, pairs);
        let pvs = answer.answer;
        let leaf = |p: PointLeaf| pb::PointLeaf {
            leaf: p.leaf,
            cluster: p.cluster,
            area: p.area,
        };
        Ok(pb::PvsResponse {
            world: answer.world,
            version: answer.version,
            source_hash: answer.source_hash,
            visible: pvs.matrix.packed(),
            points: pvs.points.into_iter().map(leaf).collect(),
            targets: pvs
                .targets
                .unwrap_or_default()
                .into_iter()
                .map(leaf)
                .collect(),
            vised: pvs.vised,
            areas: pvs.areas as u32,
            portals: pvs
                .portals
                .into_iter()
                .map(|p| pb::AreaPortal {
                    index: p.index,
                    area_a: p.areas[0],
                    area_b: p.areas[1],
                    entity: p.entity,
                    model: p.model,
                })
                .collect(),
        })
    }

    pub(super) async fn walk(&self, req: pb::WalkRequest) -> Result<pb::WalkResponse, Status> {
        let lines: Vec<WalkLine> = req.walks.iter().map(walk_line).collect();
        let entities = req.scene.as_ref().map(scene_lines);
        let count = lines.len();
        let name = req.world;
        // A walk is up to a thousand moves: never answered on the reactor.
        let answer = self
            .run_work("walk", None, move |s| {
                s.walks(&name, &lines, entities.as_deref())
            })
            .await?;
        self.metrics
            .count_batch(&answer.world, "walk", TRANSPORT, count);
        let walks = &answer.answer;
        Ok(pb::WalkResponse {
            reached: walks.iter().map(|w| w.reached).collect(),
            reasons: walks
                .iter()
                .map(|w| stop_message(w.reason) as i32)
                .collect(),
            ticks: walks.iter().map(|w| w.ticks).collect(),
            origins: walks.iter().flat_map(|w| w.origin).collect(),
            distances: walks.iter().map(|w| w.distance).collect(),
            world: answer.world,
            version: answer.version,
            source_hash: answer.source_hash,
        })
    }
}

/// A walk message as the JSON walk it stands for (checked by the core).
pub fn walk_line(w: &pb::Walk) -> WalkLine {
    let (mins, maxs) = match &w.r#box {
        Some(b) => (Some(vec3(&b.mins)), Some(vec3(&b.maxs))),
        None => (None, None),
    };
    WalkLine {
        from: vec3(&w.from),
        to: vec3(&w.to),
        jump: w.jump.then_some(true),
        speed: w.speed,
        mins,
        maxs,
        mask: w.mask,
        frametime: w.frametime,
        gravity: w.gravity,
        ticks: w.ticks,
        radius: w.radius,
        height: w.height,
        fall: w.fall,
        pass: w.pass,
    }
}

/// The walk message of a JSON walk (what a client sends for it). Points
/// travel as floats: the walk is run in floats, so nothing is lost.
pub fn walk_message(line: &WalkLine) -> pb::Walk {
    let v = |p: [f64; 3]| pb::Vec3 {
        x: p[0] as f32,
        y: p[1] as f32,
        z: p[2] as f32,
    };
    // A box with one side given takes the player's other side, as the line does.
    let r#box = (line.mins.is_some() || line.maxs.is_some()).then(|| pb::Box {
        mins: Some(v(line.mins.unwrap_or(PLAYER_MINS))),
        maxs: Some(v(line.maxs.unwrap_or(PLAYER_MAXS))),
    });
    pb::Walk {
        from: Some(v(line.from)),
        to: Some(v(line.to)),
        jump: line.jump.unwrap_or(false),
        speed: line.speed,
        r#box,
        mask: line.mask,
        frametime: line.frametime,
        gravity: line.gravity,
        ticks: line.ticks,
        radius: line.radius,
        height: line.height,
        fall: line.fall,
        pass: line.pass,
    }
}

/// Why a walk ended, on the wire.
pub fn stop_message(stop: Stop) -> pb::WalkStop {
    match stop {
        Stop::Reached => pb::WalkStop::Reached,
        Stop::Blocked => pb::WalkStop::Blocked,
        Stop::Fell => pb::WalkStop::Fell,
        Stop::Stuck => pb::WalkStop::Stuck,
        Stop::StartSolid => pb::WalkStop::StartSolid,
        Stop::Timeout => pb::WalkStop::Timeout,
        Stop::OutOfRange => pb::WalkStop::OutOfRange,
    }
}

/// [`stop_message`] read back (`None` for a value this build does not know).
pub fn stop_of(stop: pb::WalkStop) -> Option<Stop> {
    Some(match stop {
        pb::WalkStop::Unspecified => return None,
        pb::WalkStop::Reached => Stop::Reached,
        pb::WalkStop::Blocked => Stop::Blocked,
        pb::WalkStop::Fell => Stop::Fell,
        pb::WalkStop::Stuck => Stop::Stuck,
        pb::WalkStop::StartSolid => Stop::StartSolid,
        pb::WalkStop::Timeout => Stop::Timeout,
        pb::WalkStop::OutOfRange => Stop::OutOfRange,
    })
}

/// The walks' answers read back from a response, in walk order (`None`
/// when its columns do not hold one answer per walk).
pub fn walk_answers(r: &pb::WalkResponse) -> Option<Vec<WalkAnswer>> {
    let n = r.reached.len();
    if r.reasons.len() != n
        || r.ticks.len() != n
        || r.origins.len() != 3 * n
        || r.distances.len() != n
    {
        return None;
    }
    (0..n)
        .map(|i| {
            Some(WalkAnswer {
                reached: r.reached[i],
                reason: stop_of(pb::WalkStop::try_from(r.reasons[i]).ok()?)?,
                ticks: r.ticks[i],
                origin: [r.origins[3 * i], r.origins[3 * i + 1], r.origins[3 * i + 2]],
                distance: r.distances[i],
            })
        })
        .collect()
}

/// A PVS line as the message that asks it (for clients sending JSON
/// lines): points packed, portals split into indices and area pairs.
pub fn pvs_message(world: &str, line: &PvsLine) -> pb::PvsRequest {
    let packed =
        |points: &[[f64; 3]]| -> Vec<f32> { points.iter().flatten().map(|&c| c as f32).collect() };
    let closed = line.closed_portals.as_deref().unwrap_or_default();
    pb::PvsRequest {
        world: world.to_owned(),
        points: packed(&line.points),
        targets: line.targets.as_deref().map_or_else(Vec::new, packed),
        closed_portals: (closed.iter())
            .filter_map(|r| match r {
                PortalRef::Index(i) => Some(*i),
                PortalRef::Areas(_) => None,
            })
            .collect(),
        closed_area_pairs: (closed.iter())
            .filter_map(|r| match r {
                PortalRef::Areas(pair) => Some(*pair),
                PortalRef::Index(_) => None,
            })
            .flatten()
            .collect(),
    }
}

/// A PVS reply as the JSON answer line gives it (`targets` listed when
/// the line named them); `None` when its matrix does not hold points ×
/// targets bits.
pub fn pvs_answer(r: &pb::PvsResponse, with_targets: bool) -> Option<crate::bots::PvsLineAnswer> {
    let leaf = |p: &pb::PointLeaf| PointLeaf {
        leaf: p.leaf,
        cluster: p.cluster,
        area: p.area,
    };
    let columns = if with_targets {
        r.targets.len()
    } else {
        r.points.len()
    };
    let matrix = crate::bots::SightMatrix::from_packed(r.points.len(), columns, &r.visible)?;
    Some(crate::bots::PvsLineAnswer {
        points: r.points.iter().map(leaf).collect(),
        targets: with_targets.then(|| r.targets.iter().map(leaf).collect()),
        visible: matrix.rows(),
        vised: r.vised,
        areas: r.areas as usize,
        portals: (r.portals.iter())
            .map(|p| crate::bots::pvs::PortalInfo {
                index: p.index,
                areas: [p.area_a, p.area_b],
                entity: p.entity,
                model: p.model.clone(),
            })
            .collect(),
    })
}
