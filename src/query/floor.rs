//! Floor grids: a box (or any shape a trace takes: a swept shape or an
//! onion hull) dropped onto the floor at every point of a grid over a
//! rectangle of the map, what a navigation builder samples. Per cell: the
//! height the shape comes to rest at, the plane it rests on, whether a player
//! can stand there (the movement module's rule), the contents and surface
//! flags met, whether Quake 3's standing and crouching player boxes fit
//! there, and the step to each neighbour. Every drop is one trace of the
//! shape; the grid is answered in bands of rows, each band one batch on all
//! cores.

use super::{QueryError, ShapeLine};
use crate::math::Vec3;
use crate::movement::MIN_WALK_NORMAL;
use crate::trace::checked_point;
use crate::trace::{
    run_batch, trace_hull, trace_queries, BatchOptions, HullError, HullQuery, InvalidTrace, Kernel,
    TraceQuery, TraceResult,
};
use serde::{Deserialize, Serialize};

/// Quake 3's player box standing (`mins`, `maxs`)...
pub const PLAYER_MINS: [f32; 3] = [-15.0, -15.0, -24.0];
pub const PLAYER_MAXS: [f32; 3] = [15.0, 15.0, 32.0];
/// ... and crouching (the top comes down to 16).
pub const CROUCH_MAXS: [f32; 3] = [15.0, 15.0, 16.0];

/// Most cells one grid may have (1024 × 1024).
pub const MAX_FLOOR_CELLS: usize = 1 << 20;
/// Cells answered per band (a band is whole rows: at least one row).
pub const BAND_CELLS: usize = 16_384;

/// A floor grid request.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FloorRequest {
    /// The rectangle's corner with the smallest x and y ...
    pub from: [f32; 2],
    /// ... and the opposite one: cells at `from + k·spacing` up to `to`.
    pub to: [f32; 2],
    /// Grid spacing (units).
    pub spacing: f32,
    /// The height the shape is dropped from (its origin's z)...
    pub top: f32,
    /// ... and the lowest it may fall to (default: the world's bottom).
    #[serde(default)]
    pub bottom: Option<f32>,
    /// The dropped box (default: the standing player's) ...
    #[serde(default)]
    pub mins: Option<[f32; 3]>,
    #[serde(default)]
    pub maxs: Option<[f32; 3]>,
    /// ... or a swept shape (with `exact`, as a trace line takes them) ...
    #[serde(default)]
    pub shape: Option<ShapeLine>,
    #[serde(default)]
    pub exact: Option<bool>,
    /// ... or an onion hull of the world, by name.
    #[serde(default)]
    pub hull: Option<String>,
    /// Contents the shape stops on (default: `MASK_PLAYERSOLID`).
    #[serde(default)]
    pub mask: Option<u32>,
}

/// Why a grid is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FloorError {
    #[error("the grid has {cells} cells; the limit is {limit}")]
    TooLarge { cells: usize, limit: usize },
    #[error("`spacing` must be a finite number above 0, got {0}")]
    BadSpacing(f32),
    #[error("`to` must not be below `from` on either axis")]
    Inverted,
    #[error("`bottom` must be below `top`")]
    BottomAboveTop,
    #[error("{0}")]
    Trace(#[from] InvalidTrace),
    /// The dropped shape, refused as a trace line's would be.
    #[error("{0}")]
    Shape(QueryError),
}

/// A hull the world does not have (or a move it refuses), as a grid's error.
fn hull_error(e: HullError) -> FloorError {
    match e {
        HullError::Invalid(invalid) => FloorError::Trace(invalid),
        unknown @ HullError::UnknownHull { .. } => {
            FloorError::Shape(QueryError::UnknownHull(unknown.to_string()))
        }
    }
}

/// A checked grid: its size and the traces it makes.
#[derive(Debug, Clone)]
pub struct FloorGrid {
    pub columns: usize,
    pub rows: usize,
    from: [f32; 2],
    spacing: f32,
    top: f32,
    bottom: f32,
    /// The drop from `from` (for a hull, the same move of its box) ...
    drop: TraceQuery,
    /// ... made with this onion hull of the world.
    hull: Option<String>,
    stand: TraceQuery,
    crouch: TraceQuery,
    /// The dropped shape's bottom (its lowest point, `mins` z): a player's
    /// feet go there.
    feet: f32,
}

/// One band of rows `first_row..first_row + rows` (cells row by row,
/// x fastest). `floor` is the shape origin's height at rest (`None`: it fell
/// to `bottom` without meeting anything, or started in solid);
/// `steps` per cell are the floor height differences to the neighbours
/// east (+x), north (+y), west and south (`None` where one has no floor or
/// is outside the grid).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FloorBand {
    pub first_row: usize,
    pub rows: usize,
    pub floor: Vec<Option<f32>>,
    pub normal: Vec<[f32; 3]>,
    pub walkable: Vec<bool>,
    pub startsolid: Vec<bool>,
    pub contents: Vec<u32>,
    pub surface_flags: Vec<u32>,
    pub stand: Vec<bool>,
    pub crouch: Vec<bool>,
    pub steps: Vec<[Option<f32>; 4]>,
}

impl FloorRequest {
    /// Checks the request against `world` (whose bounds give the default
    /// bottom).
    pub fn check(&self, world: &Kernel) -> Result<FloorGrid, FloorError> {
        if !(self.spacing.is_finite() && self.spacing > 0.0) {
            return Err(FloorError::BadSpacing(self.spacing));
        }
        if self.to[0] < self.from[0] || self.to[1] < self.from[1] {
            return Err(FloorError::Inverted);
        }
        let count =
            |axis: usize| ((self.to[axis] - self.from[axis]) / self.spacing).floor() as f64 + 1.0;
        let (columns, rows) = (count(0), count(1));
        let cells = columns * rows;
        if !cells.is_finite() || cells > MAX_FLOOR_CELLS as f64 {
            return Err(FloorError::TooLarge {
                cells: if cells.is_finite() {
                    cells as usize
                } else {
                    usize::MAX
                },
                limit: MAX_FLOOR_CELLS,
            });
        }
        let bottom = self.bottom.unwrap_or(world.mins[2] - 1.0);
        if bottom >= self.top {
            return Err(FloorError::BottomAboveTop);
        }
        let mask = self.mask.unwrap_or(crate::contents::MASK_PLAYERSOLID);
        // Every cell lies between the corners: checking them checks all.
        checked_point("to", Vec3::new(self.to[0], self.to[1], self.top))?;
        let at = Vec3::new(self.from[0], self.from[1], self.top);
        let low = Vec3::new(self.from[0], self.from[1], bottom);
        let drop = self.dropped(world, at, low, mask)?;
        let feet = drop.mins().z;
        Ok(FloorGrid {
            columns: columns as usize,
            rows: rows as usize,
            from: self.from,
            spacing: self.spacing,
            top: self.top,
            bottom,
            drop,
            hull: self.hull.clone(),
            stand: TraceQuery::boxed(
                at,
                at,
                Vec3::from_array(PLAYER_MINS),
                Vec3::from_array(PLAYER_MAXS),
                mask,
            )?,
            crouch: TraceQuery::boxed(
                at,
                at,
                Vec3::from_array(PLAYER_MINS),
                Vec3::from_array(CROUCH_MAXS),
                mask,
            )?,
            feet,
        })
    }

    /// The drop from `at` to `low`, of the shape the request names as a
    /// trace line names it: `hull`, or `shape` (`exact`), or the box.
    fn dropped(
        &self,
        world: &Kernel,
        at: Vec3,
        low: Vec3,
        mask: u32,
    ) -> Result<TraceQuery, FloorError> {
        let boxed = self.mins.is_some() || self.maxs.is_some();
        let shape = |e: QueryError| FloorError::Shape(e);
        if let Some(name) = &self.hull {
            if boxed || self.shape.is_some() || self.exact.is_some() {
                return Err(shape(QueryError::HullWithShape));
            }
            let hull = HullQuery::new(world, name, at, low, mask).map_err(hull_error)?;
            return Ok(hull.query().clone());
        }
        let exact = self.exact.unwrap_or(false);
        if let Some(line) = &self.shape {
            if boxed {
                return Err(shape(QueryError::ShapeWithBox));
            }
            let invalid = |e: InvalidTrace| shape(QueryError::Invalid(e));
            return TraceQuery::shaped(at, low, line.validate().map_err(invalid)?, mask)
                .and_then(|q| q.with_exact(exact))
                .map_err(invalid);
        }
        let mins = Vec3::from_array(self.mins.unwrap_or(PLAYER_MINS));
        let maxs = Vec3::from_array(self.maxs.unwrap_or(PLAYER_MAXS));
        TraceQuery::boxed(at, low, mins, maxs, mask)?
            .with_exact(exact)
            .map_err(|e| shape(QueryError::Invalid(e)))
    }
}

impl FloorGrid {
    pub fn cells(&self) -> usize {
        self.columns * self.rows
    }

    /// The (x, y) of cell `(column, row)`.
    pub fn point(&self, column: usize, row: usize) -> [f32; 2] {
        [
            self.from[0] + column as f32 * self.spacing,
            self.from[1] + row as f32 * self.spacing,
        ]
    }

    /// The onion hull every drop is made with, if any (see
    /// [`FloorGrid::drop_query`]).
    pub fn hull(&self) -> Option<&str> {
        self.hull.as_deref()
    }

    /// The drop at cell `(column, row)`: the shape from `top` to `bottom`
    /// (for a hull, the same move of its box: [`FloorGrid::hull`] names the
    /// hull it is traced with).
    pub fn drop_query(&self, column: usize, row: usize) -> Result<TraceQuery, InvalidTrace> {
        let [x, y] = self.point(column, row);
        self.drop.moved(
            Vec3::new(x, y, self.top),
            Vec3::new(x, y, self.bottom),
            self.drop.mask(),
        )
    }

    /// Where a player's origin goes when their feet stand where the
    /// dropped shape's bottom rests (the shape's origin at `rest`).
    pub fn player_origin(&self, x: f32, y: f32, rest: f32) -> Vec3 {
        Vec3::new(x, y, rest + self.feet - PLAYER_MINS[2])
    }

    /// How many rows a band holds.
    pub fn band_rows(&self) -> usize {
        (BAND_CELLS / self.columns.max(1)).max(1)
    }

    /// The floor heights of rows `first..first + count` (clamped to the
    /// grid), and their drops' answers.
    fn drops(
        &self,
        world: &Kernel,
        first: usize,
        count: usize,
        options: &BatchOptions,
    ) -> Result<Vec<TraceResult>, FloorError> {
        let mut queries = Vec::with_capacity(count * self.columns);
        for row in first..(first + count).min(self.rows) {
            for column in 0..self.columns {
                queries.push(self.drop_query(column, row)?);
            }
        }
        let Some(name) = &self.hull else {
            return Ok(trace_queries(world, &queries, options));
        };
        let hulls = queries
            .iter()
            .map(|q| HullQuery::new(world, name, q.start(), q.end(), q.mask()).map_err(hull_error))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(run_batch(hulls.len(), options, |i, scratch| {
            trace_hull(world, &hulls[i], scratch)
        }))
    }

    /// Answers rows `first_row..` (one band, see [`FloorGrid::band_rows`]).
    pub fn band(
        &self,
        world: &Kernel,
        first_row: usize,
        options: &BatchOptions,
    ) -> Result<FloorBand, FloorError> {
        let rows = self.band_rows().min(self.rows.saturating_sub(first_row));
        // One row either side as well, for the steps across the band's edges.
        let above = first_row.saturating_sub(1);
        let drops = self.drops(world, above, rows + 2, options)?;
        let width = self.columns;
        let offset = (first_row - above) * width;
        let height = |r: &TraceResult| (!r.startsolid && r.fraction < 1.0).then_some(r.endpos.z);
        let rows_held = drops.len() / width.max(1);
        let at = |column: isize, row: isize| -> Option<f32> {
            // `row` counted from the band's first row.
            let local = row + (first_row - above) as isize;
            if column < 0 || column >= width as isize || local < 0 || local >= rows_held as isize {
                return None;
            }
            let grid_row = first_row as isize + row;
            if grid_row < 0 || grid_row >= self.rows as isize {
                return None;
            }
            height(&drops[local as usize * width + column as usize])
        };
        let cells = rows * width;
        let mut band = FloorBand {
            first_row,
            rows,
            floor: Vec::with_capacity(cells),
            normal: Vec::with_capacity(cells),
            walkable: Vec::with_capacity(cells),
            startsolid: Vec::with_capacity(cells),
            contents: Vec::with_capacity(cells),
            surface_flags: Vec::with_capacity(cells),
            stand: Vec::with_capacity(cells),
            crouch: Vec::with_capacity(cells),
            steps: Vec::with_capacity(cells),
        };
        let mut fits = Vec::with_capacity(2 * cells);
        for (k, r) in drops[offset..offset + cells].iter().enumerate() {
            let (column, row) = ((k % width) as isize, (k / width) as isize);
            let floor = height(r);
            band.floor.push(floor);
            band.normal.push(r.normal.to_array());
            band.walkable
                .push(floor.is_some() && r.normal.z >= MIN_WALK_NORMAL);
            band.startsolid.push(r.startsolid);
            band.contents.push(r.contents);
            band.surface_flags.push(r.surface_flags);
            let step = |c: isize, w: isize| Some(at(c, w)? - floor?);
            band.steps.push([
                step(column + 1, row),
                step(column, row + 1),
                step(column - 1, row),
                step(column, row - 1),
            ]);
            if let Some(z) = floor {
                let [x, y] = self.point(column as usize, first_row + row as usize);
                let origin = self.player_origin(x, y, z);
                fits.push(self.stand.moved(origin, origin, self.stand.mask())?);
                fits.push(self.crouch.moved(origin, origin, self.crouch.mask())?);
            }
        }
        let fitted = trace_queries(world, &fits, options);
        let mut next = fitted.chunks_exact(2);
        for floor in &band.floor {
            let (stand, crouch) = match floor.and_then(|_| next.next()) {
                Some(pair) => (!pair[0].startsolid, !pair[1].startsolid),
                None => (false, false),
            };
            band.stand.push(stand);
            band.crouch.push(crouch);
        }
        Ok(band)
    }
}

/// The first line of a floor answer.
#[derive(Serialize)]
struct Header<'a> {
    world: &'a str,
    version: u64,
    /// The content that answers (as `GET /v1/worlds/{name}` reports it).
    source_hash: String,
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

/// Why a floor answer stopped.
#[derive(Debug, thiserror::Error)]
pub enum FloorStreamError {
    #[error("{0}")]
    Grid(#[from] FloorError),
    #[error("encoding a floor line: {0}")]
    Encode(#[from] serde_json::Error),
}

impl FloorGrid {
    /// The grid's bands in order, each handed to `send` as it is made with
    /// the cells answered so far. Stops early when `send` returns false
    /// (the reader went away): no band is made after that.
    pub fn each_band(
        &self,
        world: &Kernel,
        options: &BatchOptions,
        mut send: impl FnMut(&FloorBand, usize) -> bool,
    ) -> Result<(), FloorError> {
        let mut row = 0;
        while row < self.rows {
            let band = self.band(world, row, options)?;
            row += band.rows;
            if !send(&band, row * self.columns) {
                break;
            }
        }
        Ok(())
    }

    /// The answer's NDJSON lines (each ends in a newline), handed to `send`
    /// one at a time as they are made with the cells each holds: a header
    /// naming `world` and `version`, then one line per band. Stops early
    /// when `send` returns false (the reader went away).
    pub fn stream(
        &self,
        world: &Kernel,
        (name, version): (&str, u64),
        options: &BatchOptions,
        mut send: impl FnMut(Vec<u8>, usize) -> bool,
    ) -> Result<(), FloorStreamError> {
        let header = Header {
            world: name,
            version,
            source_hash: format!("{:016x}", world.info.source_hash),
            columns: self.columns,
            rows: self.rows,
            cells: self.cells(),
        };
        if !send(line(&header)?, 0) {
            return Ok(());
        }
        let total = self.cells();
        let mut encoded = Ok(());
        self.each_band(world, options, |band, done| {
            match line(&BandLine { done, total, band }) {
                Ok(bytes) => send(bytes, band.floor.len()),
                Err(e) => {
                    encoded = Err(e);
                    false
                }
            }
        })?;
        Ok(encoded?)
    }
}

fn line(value: &impl Serialize) -> Result<Vec<u8>, serde_json::Error> {
    let mut bytes = serde_json::to_vec(value)?;
    bytes.push(b'\n');
    Ok(bytes)
}
