//! The bot calls over gRPC: packed wire arrays to the service's bot calls
//! and back.

use super::{scene_lines, GrpcState, TRANSPORT};
use crate::bots::pvs::{PointLeaf, PortalRef};
use crate::bots::{PvsLine, SightLine};
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
        let pairs = line
            .eyes
            .len()
            .saturating_mul(line.targets.as_ref().map_or(line.eyes.len(), Vec::len));
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
        let pairs = line
            .points
            .len()
            .saturating_mul(line.targets.as_ref().map_or(line.points.len(), Vec::len));
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
}
