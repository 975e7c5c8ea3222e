//! The bot calls over gRPC: packed wire arrays to the service's bot calls
//! and back.

use super::{scene_lines, GrpcState, TRANSPORT};
use crate::bots::SightLine;
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
}
