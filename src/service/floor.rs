//! Floor grids as a service call: the request checked against one pinned
//! world version, then answered band by band (see [`crate::query::floor`]),
//! each band a line of NDJSON with the progress so far.

use super::{Service, ServiceError};
use crate::query::floor::{FloorError, FloorGrid, FloorRequest, MAX_FLOOR_CELLS};
use crate::registry::WorldVersion;
use crate::trace::BatchOptions;
use std::sync::Arc;

/// A checked grid and the world version that answers it.
pub struct FloorJob {
    pub version: Arc<WorldVersion>,
    pub grid: FloorGrid,
}

impl Service {
    /// Checks a floor grid request against world `name`'s serving version.
    pub fn floor_job(&self, name: &str, request: &FloorRequest) -> Result<FloorJob, ServiceError> {
        let version = self.world(name)?;
        let grid = request.check(&version.world.view()).map_err(|e| match e {
            FloorError::TooLarge { cells, .. } => ServiceError::GridTooLarge {
                cells,
                limit: MAX_FLOOR_CELLS,
            },
            other => ServiceError::Malformed(other.to_string()),
        })?;
        Ok(FloorJob { version, grid })
    }
}

impl FloorJob {
    /// The answer's lines, handed to `send` as they are made (see
    /// [`FloorGrid::stream`]).
    pub fn run(&self, send: impl FnMut(Vec<u8>) -> bool) -> Result<(), ServiceError> {
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
}
