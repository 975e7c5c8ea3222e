//! Per-query set-up, computed once, and the result being built.

use super::shape::{InvalidShape, Shape};
use super::Kernel;
use crate::math::Vec3;
use glam::Vec3A;
use thiserror::Error;

/// Coordinates and box sizes beyond this magnitude are rejected (Quake 3
/// worlds live within ±65536; this leaves room for moves in the void).
pub const MAX_COORDINATE: f32 = 1_048_576.0;

/// Why a trace could not be built; the field is named as in a query line.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum InvalidTrace {
    #[error("`{field}` has a non-finite or out-of-range value (limit ±{MAX_COORDINATE})")]
    BadCoordinate { field: &'static str },
    #[error("`mins` must not exceed `maxs` on any axis")]
    MinsAboveMaxs,
    #[error("`shape`: {0}")]
    BadShape(#[from] InvalidShape),
    #[error("`shape`: exact mode needs bspq built with the `exact` feature")]
    ExactUnavailable,
}

/// `v` when every component is finite and within ±[`MAX_COORDINATE`].
pub fn checked_point(field: &'static str, v: Vec3) -> Result<Vec3, InvalidTrace> {
    if v.is_finite() && v.abs().max_element() <= MAX_COORDINATE {
        Ok(v)
    } else {
        Err(InvalidTrace::BadCoordinate { field })
    }
}

/// One trace: move a box (`mins`..`maxs` around the traced point; both zero
/// for a ray) from `start` to `end`, colliding with contents in `mask`; or a
/// [`Shape`] (then `mins`/`maxs` are its bounds). The constructors check what
/// every path relies on: finite coordinates within ±[`MAX_COORDINATE`],
/// `mins ≤ maxs` on every axis, and a valid shape.
///
/// ```
/// use bspq::{TraceQuery, Vec3, MASK_SOLID};
///
/// let box_move = TraceQuery::boxed(
///     Vec3::ZERO,
///     Vec3::new(64.0, 0.0, 0.0),
///     Vec3::new(-15.0, -15.0, -24.0),
///     Vec3::new(15.0, 15.0, 32.0),
///     MASK_SOLID,
/// )?;
/// assert_eq!(box_move.maxs(), Vec3::new(15.0, 15.0, 32.0));
/// assert!(TraceQuery::ray(Vec3::NAN, Vec3::ZERO, MASK_SOLID).is_err());
/// # Ok::<(), bspq::InvalidTrace>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct TraceQuery {
    pub(crate) start: Vec3,
    pub(crate) end: Vec3,
    pub(crate) mins: Vec3,
    pub(crate) maxs: Vec3,
    pub(crate) mask: u32,
    pub(crate) shape: Option<Shape>,
    pub(crate) exact: bool,
}

impl TraceQuery {
    /// A ray of length zero at the origin that collides with nothing (a
    /// placeholder in a lane with no trace).
    pub(crate) const IDLE: TraceQuery = TraceQuery {
        start: Vec3::ZERO,
        end: Vec3::ZERO,
        mins: Vec3::ZERO,
        maxs: Vec3::ZERO,
        mask: 0,
        shape: None,
        exact: false,
    };

    /// A ray: a point moved from `start` to `end`.
    pub fn ray(start: Vec3, end: Vec3, mask: u32) -> Result<Self, InvalidTrace> {
        Ok(Self {
            start: checked_point("start", start)?,
            end: checked_point("end", end)?,
            mins: Vec3::ZERO,
            maxs: Vec3::ZERO,
            mask,
            shape: None,
            exact: false,
        })
    }

    /// A box sweep: the box `mins..maxs` around the traced point.
    pub fn boxed(
        start: Vec3,
        end: Vec3,
        mins: Vec3,
        maxs: Vec3,
        mask: u32,
    ) -> Result<Self, InvalidTrace> {
        let (mins, maxs) = (checked_point("mins", mins)?, checked_point("maxs", maxs)?);
        if mins.cmpgt(maxs).any() {
            return Err(InvalidTrace::MinsAboveMaxs);
        }
        Ok(Self {
            mins,
            maxs,
            ..Self::ray(start, end, mask)?
        })
    }

    /// A sweep of `shape` (its bounds fill `mins`/`maxs`).
    pub fn shaped(start: Vec3, end: Vec3, shape: Shape, mask: u32) -> Result<Self, InvalidTrace> {
        shape.validate()?;
        let (mins, maxs) = shape.bounds();
        Ok(Self {
            mins,
            maxs,
            shape: Some(shape),
            ..Self::ray(start, end, mask)?
        })
    }

    /// The same sweep between other points, with another mask (a batch of
    /// moves of one shape builds it once).
    pub fn moved(&self, start: Vec3, end: Vec3, mask: u32) -> Result<Self, InvalidTrace> {
        Ok(Self {
            start: checked_point("start", start)?,
            end: checked_point("end", end)?,
            mask,
            ..self.clone()
        })
    }

    /// Asks for a shape's exact contact instead of the plane-shifted one
    /// (rays and boxes are always exact). Needs the `exact` feature.
    pub fn with_exact(self, exact: bool) -> Result<Self, InvalidTrace> {
        if exact && !cfg!(feature = "exact") {
            return Err(InvalidTrace::ExactUnavailable);
        }
        Ok(Self { exact, ..self })
    }

    pub fn start(&self) -> Vec3 {
        self.start
    }

    pub fn end(&self) -> Vec3 {
        self.end
    }

    /// The box's lower corner relative to the traced point (a shape's bounds).
    pub fn mins(&self) -> Vec3 {
        self.mins
    }

    pub fn maxs(&self) -> Vec3 {
        self.maxs
    }

    /// The contents the trace collides with.
    pub fn mask(&self) -> u32 {
        self.mask
    }

    pub fn shape(&self) -> Option<&Shape> {
        self.shape.as_ref()
    }

    pub fn exact(&self) -> bool {
        self.exact
    }
}

/// The answer to a trace: where the move stops and what it hit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceResult {
    pub fraction: f32,
    pub endpos: Vec3,
    pub normal: Vec3,
    pub dist: f32,
    pub startsolid: bool,
    pub allsolid: bool,
    pub contents: u32,
    pub surface_flags: u32,
}

impl Default for TraceResult {
    fn default() -> Self {
        Self {
            fraction: 1.0,
            endpos: Vec3::ZERO,
            normal: Vec3::ZERO,
            dist: 0.0,
            startsolid: false,
            allsolid: false,
            contents: 0,
            surface_flags: 0,
        }
    }
}

/// Everything below the entry point reads only this.
#[derive(Debug)]
pub(crate) struct TraceWork {
    /// Start and end of the box's centre (the query's points moved by the
    /// box's centre offset). In SIMD lanes, as everything read per plane:
    /// one load each.
    pub start: Vec3A,
    pub end: Vec3A,
    /// Half-size of the (now symmetric) box.
    pub extents: Vec3A,
    /// The box's lower corner relative to its centre (`-extents` but for
    /// rounding); see [`TraceWork::offset`].
    pub lower: Vec3A,
    /// Swept bounds of the box: every position of the shape along the move
    /// lies inside (the walk skips what lies further than a margin outside).
    pub bounds: [Vec3A; 2],
    pub is_point: bool,
    pub mask: u32,
    /// Any-hit query: stop at the first contact (the answer is then only
    /// whether `fraction < 1`).
    pub stop_at_any_hit: bool,
    pub result: TraceResult,
}

impl TraceWork {
    pub fn new(q: &TraceQuery) -> Self {
        Self::of_move(q.start, q.end, q.mins, q.maxs, q.mask)
    }

    /// The box `mins..maxs` (both zero for a ray) moved from `start` to
    /// `end`, colliding with `mask`: [`TraceWork::new`] of a query without
    /// a shape.
    #[inline(always)]
    pub fn of_move(start: Vec3, end: Vec3, mins: Vec3, maxs: Vec3, mask: u32) -> Self {
        // Make the box symmetric around the traced point, as the reference
        // does. In SIMD lanes: the same per-component f32 arithmetic, in a
        // third of the instructions (this runs once per query).
        let (mins, maxs) = (Vec3A::from(mins), Vec3A::from(maxs));
        let offset = (mins + maxs) * 0.5;
        let size0 = mins - offset;
        let size1 = maxs - offset;
        let start = Vec3A::from(start) + offset;
        let end = Vec3A::from(end) + offset;
        let is_point = (size0.cmpeq(Vec3A::ZERO) & size1.cmpeq(Vec3A::ZERO)).all();
        let bounds = [start.min(end) + size0, start.max(end) + size1];
        Self {
            start,
            end,
            extents: size1,
            lower: size0,
            bounds,
            is_point,
            mask,
            stop_at_any_hit: false,
            result: TraceResult::default(),
        }
    }

    /// The box corner furthest along the negative of a normal with these
    /// sign bits (bit i: component i is negative).
    #[inline(always)]
    pub fn offset(&self, sign_bits: u32) -> Vec3A {
        Vec3A::new(
            if sign_bits & 1 != 0 {
                self.extents.x
            } else {
                self.lower.x
            },
            if sign_bits & 2 != 0 {
                self.extents.y
            } else {
                self.lower.y
            },
            if sign_bits & 4 != 0 {
                self.extents.z
            } else {
                self.lower.z
            },
        )
    }

    pub fn is_position_test(&self) -> bool {
        self.start.cmpeq(self.end).all()
    }

    /// The answer, its end position from the caller's own start and end.
    pub fn finish(self, q: &TraceQuery) -> TraceResult {
        self.result.ended(q)
    }
}

impl TraceResult {
    /// Records that the shape starts (and stays) inside something with
    /// `contents`.
    pub(crate) fn set_inside(&mut self, contents: u32) {
        self.startsolid = true;
        self.allsolid = true;
        self.fraction = 0.0;
        self.contents = contents;
    }

    /// This answer with `endpos` set where `q` stops at its fraction, from
    /// the caller's own start and end.
    #[inline(always)]
    pub(crate) fn ended(mut self, q: &TraceQuery) -> Self {
        self.endpos = if self.fraction == 1.0 {
            q.end
        } else {
            // In SIMD lanes: the same f32 operations per component.
            let start = Vec3A::from(q.start);
            (start + (Vec3A::from(q.end) - start) * self.fraction).into()
        };
        self
    }
}

/// Per-thread scratch space: which brushes and patches a query has already
/// tested. Stamps avoid clearing arrays between queries.
#[derive(Debug, Default)]
pub struct Scratch {
    stamp: u32,
    brush_stamps: Vec<u32>,
    patch_stamps: Vec<u32>,
    pub(crate) leaf_stack: Vec<u32>,
    pub(crate) segment_stack: Vec<super::walk::Segment>,
    /// The fast trace's stack, as long as the deepest search needs.
    pub(crate) bvh_stack: Vec<super::fast::Entry>,
    /// A batch piece's queries whose answers its first pass knows, and
    /// (from the back) the rest.
    pub(crate) batch_lists: Vec<u32>,
}

impl Scratch {
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn begin(&mut self, world: &Kernel) {
        // A world of another size: both marks start over together. (Starting
        // the count over while one array kept its marks made old marks equal
        // new counts: a scratch moving between two worlds with as many
        // brushes but not as many patches, the same map with and without
        // curves, skipped brushes it had not tested.)
        if self.brush_stamps.len() != world.brushes.len()
            || self.patch_stamps.len() != world.patches.len()
        {
            self.brush_stamps = vec![0; world.brushes.len()];
            self.patch_stamps = vec![0; world.patches.len()];
            self.stamp = 0;
        }
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.brush_stamps.fill(0);
            self.patch_stamps.fill(0);
            self.stamp = 1;
        }
    }

    /// Marks brush `b` tested; false when it already was during this query.
    #[inline(always)]
    pub(crate) fn first_visit_brush(&mut self, b: usize) -> bool {
        let seen = self.brush_stamps[b] == self.stamp;
        self.brush_stamps[b] = self.stamp;
        !seen
    }

    #[inline(always)]
    pub(crate) fn first_visit_patch(&mut self, p: usize) -> bool {
        let seen = self.patch_stamps[p] == self.stamp;
        self.patch_stamps[p] = self.stamp;
        !seen
    }
}
