//! Floor grids as a service call: the request checked against one pinned
//! world version, then answered band by band (see [`crate::query::floor`]):
//! as NDJSON lines with the progress so far (HTTP), or as the bands
//! themselves (gRPC packs them).

use super::{Service, ServiceError};
use crate::query::floor::{FloorBand, FloorError, FloorGrid, FloorRequest, MAX_FLOOR_CELLS};
use crate::registry::WorldVersion;
use crate::trace::BatchOptions;
use std::sync::Arc;

/// A checked grid and the world version that answers it.
pub struct FloorJob {
    pub version: Arc<WorldVersion>,
    pub grid: FloorGrid,
}

fn refused(e: FloorError) -> ServiceError {
    match e {
        FloorError::TooLarge { cells, .. } => ServiceError::GridTooLarge {
            cells,
            limit: MAX_FLOOR_CELLS,
        },
        FloorError::Shape(e) => ServiceError::BadGrid(e),
        other => ServiceError::Malformed(other.to_string()),
    }
}

impl Service {
    /// Checks a floor grid request against world `name`'s serving version.
    pub fn floor_job(&self, name: &str, request: &FloorRequest) -> Result<FloorJob, ServiceError> {
        let version = self.world(name)?;
        let grid = request.check(&version.world.view()).map_err(refused)?;
        Ok(FloorJob { version, grid })
    }
}

impl FloorJob {
    /// Traces a band holds at once: its drops (and the rows either side)
    /// and two fits per cell. What a transport admits for the job.
    pub fn held_traces(&self) -> usize {
        let grid = &self.grid;
        (grid.band_rows() + 2).min(grid.rows + 2) * grid.columns * 3
    }

    /// The answer's lines, handed to `send` as they are made with the cells
    /// each holds (see [`FloorGrid::stream`]).
    pub fn run(&self, send: impl FnMut(Vec<u8>, usize) -> bool) -> Result<(), ServiceError> {
        let version = &self.version;
        self.grid
            .stream(
                &version.world.view(),
                (&version.name, version.version),
                &BatchOptions::default(),
                send,
            )
            .map_err(|e| ServiceError::Internal(e.to_string()))
    }

    /// The bands in order, handed to `send` as they are made with the cells
    /// answered so far (see [`FloorGrid::each_band`]).
    pub fn bands(&self, send: impl FnMut(&FloorBand, usize) -> bool) -> Result<(), ServiceError> {
        self.grid
            .each_band(&self.version.world.view(), &BatchOptions::default(), send)
            .map_err(|e| ServiceError::Internal(e.to_string()))
    }
}
