//! `Collision.Floor`: a floor grid streamed as `FloorChunk`s, one per band
//! of rows with the progress so far, made by the same job as the HTTP
//! route's. The grid is checked before the stream starts, so a bad request
//! gets its status at once; the bands are made on the blocking pool, one
//! band's traces counted against the server's in-flight budget until the
//! end. A client that cancels the call stops the work: no band is made
//! after its stream is dropped.

use super::{swept_shape, vec3, BoxStream, GrpcState, TRANSPORT};
use crate::proto::v1 as pb;
use crate::query::floor::{FloorBand, FloorRequest};
use crate::service::floor::FloorJob;
use crate::service::ServiceError;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

/// Bands made ahead of a slow reader.
const BANDS_AHEAD: usize = 2;

/// The request as the HTTP route's body (checked by the core).
fn floor_request(req: &pb::FloorRequest) -> Result<FloorRequest, ServiceError> {
    let f32s = |v: [f64; 3]| v.map(|c| c as f32);
    let (mins, maxs) = match &req.r#box {
        Some(b) => (Some(f32s(vec3(&b.mins))), Some(f32s(vec3(&b.maxs)))),
        None => (None, None),
    };
    Ok(FloorRequest {
        from: [req.from_x, req.from_y],
        to: [req.to_x, req.to_y],
        spacing: req.spacing,
        top: req.top,
        bottom: req.bottom,
        mins,
        maxs,
        shape: req.swept.as_ref().map(swept_shape).transpose()?,
        exact: req.exact.then_some(true),
        hull: (!req.hull.is_empty()).then(|| req.hull.clone()),
        mask: req.mask,
    })
}

/// One band as a chunk, its columns packed per cell.
fn chunk(job: &FloorJob, band: &FloorBand, done: usize) -> pb::FloorChunk {
    let flag = |on: bool, flag: pb::FloorFlag| if on { flag as u32 } else { 0 };
    let steps = [
        pb::FloorFlag::StepEast,
        pb::FloorFlag::StepNorth,
        pb::FloorFlag::StepWest,
        pb::FloorFlag::StepSouth,
    ];
    let flags = (0..band.floor.len()).map(|k| {
        let known = (0..4).fold(0, |bits, d| {
            bits | flag(band.steps[k][d].is_some(), steps[d])
        });
        known
            | flag(band.floor[k].is_some(), pb::FloorFlag::Floor)
            | flag(band.walkable[k], pb::FloorFlag::Walkable)
            | flag(band.startsolid[k], pb::FloorFlag::Startsolid)
            | flag(band.stand[k], pb::FloorFlag::Stand)
            | flag(band.crouch[k], pb::FloorFlag::Crouch)
    });
    let version = &job.version;
    pb::FloorChunk {
        world: version.name.clone(),
        version: version.version,
        source_hash: version.source_hash.clone(),
        columns: job.grid.columns as u32,
        rows: job.grid.rows as u32,
        done: done as u64,
        total: job.grid.cells() as u64,
        first_row: band.first_row as u32,
        band_rows: band.rows as u32,
        floors: band.floor.iter().map(|f| f.unwrap_or(0.0)).collect(),
        normals: band.normal.iter().flatten().copied().collect(),
        flags: flags.collect(),
        contents: band.contents.clone(),
        surface_flags: band.surface_flags.clone(),
        steps: band
            .steps
            .iter()
            .flatten()
            .map(|s| s.unwrap_or(0.0))
            .collect(),
    }
}

impl GrpcState {
    pub(super) fn floor(&self, req: pb::FloorRequest) -> Result<BoxStream<pb::FloorChunk>, Status> {
        let job = floor_request(&req)
            .and_then(|request| self.service.floor_job(&req.world, &request))
            .map_err(|e| self.rejected(&e))?;
        let admitted = self
            .service
            .admission
            .admit(job.held_traces())
            .map_err(|e| self.rejected(&e))?;
        self.metrics
            .count_request(&job.version.name, "floor", TRANSPORT);
        // Cells count as queries as their bands are made.
        let cells =
            self.metrics
                .queries
                .with_label_values(&[&job.version.name, "floor", TRANSPORT]);
        let (sender, receiver) = tokio::sync::mpsc::channel(BANDS_AHEAD);
        let state = self.clone();
        tokio::task::spawn_blocking(move || {
            let _admitted = admitted;
            let result = job.bands(|band, done| {
                cells.inc_by(band.floor.len() as u64);
                sender.blocking_send(Ok(chunk(&job, band, done))).is_ok()
            });
            if let Err(e) = result {
                let _ = sender.blocking_send(Err(state.rejected(&e)));
            }
        });
        Ok(Box::pin(ReceiverStream::new(receiver)))
    }
}
