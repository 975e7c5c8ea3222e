//! Floor grids as a service call: the request checked against one pinned
//! world version, then answered band by band (see [`crate::query::floor`]),
//! each band a line of NDJSON with the progress so far.

use super::{Service, ServiceError};
use crate::query::floor::{FloorBand, FloorError, FloorGrid, FloorRequest, MAX_FLOOR_CELLS};
use crate::registry::WorldVersion;
use crate::trace::BatchOptions;
use serde::Serialize;
use std::sync::Arc;

/// A checked grid and the world version that answers it.
pub struct FloorJob {
    pub version: Arc<WorldVersion>,
    pub grid: FloorGrid,
}

/// The first line of a floor answer.
#[derive(Serialize)]
struct Header<'a> {
    world: &'a str,
    version: u64,
    columns: usize,
    rows: usize,
    cells: usize,
}

/// A band's line: the band and the cells answered so far.
#[derive(Serialize)]
struct BandLine<'a> {
    done: usize,
    total: usize,
    #[serde(flatten)]
    band: &'a FloorBand,
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
    /// The answer's lines (each ends in a newline), handed to `send` one at
    /// a time as they are made: the header, then one line per band. Stops
    /// early when `send` returns false (the client went away).
    pub fn run(&self, mut send: impl FnMut(Vec<u8>) -> bool) -> Result<(), ServiceError> {
        let grid = &self.grid;
        let header = Header {
            world: &self.version.name,
            version: self.version.version,
            columns: grid.columns,
            rows: grid.rows,
            cells: grid.cells(),
        };
        if !send(line(&header)?) {
            return Ok(());
        }
        let world = self.version.world.view();
        let options = BatchOptions::default();
        let mut row = 0;
        while row < grid.rows {
            let band = grid
                .band(&world, row, &options)
                .map_err(|e| ServiceError::Malformed(e.to_string()))?;
            row += band.rows;
            let done = row * grid.columns;
            if !send(line(&BandLine {
                done,
                total: grid.cells(),
                band: &band,
            })?) {
                return Ok(());
            }
        }
        Ok(())
    }
}

fn line(value: &impl Serialize) -> Result<Vec<u8>, ServiceError> {
    let mut bytes = serde_json::to_vec(value)
        .map_err(|e| ServiceError::Internal(format!("encoding a floor line: {e}")))?;
    bytes.push(b'\n');
    Ok(bytes)
}
