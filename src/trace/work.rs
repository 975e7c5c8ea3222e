//! Per-query set-up, computed once, and the result being built.

use super::shape::Shape;
use super::Kernel;
use crate::math::Vec3;
use glam::Vec3A;

/// One trace: move a box (`mins`..`maxs` around the traced point; both zero
/// for a ray) from `start` to `end`, colliding with contents in `mask`; or,
/// when `shape` is set, that shape (then `mins`/`maxs` are its bounds).
/// Coordinates must be finite and `mins` must not exceed `maxs` on any axis
/// ([`crate::query`] rejects other queries): for an inverted box the fast
/// paths and the walk may answer differently.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceQuery {
    pub start: Vec3,
    pub end: Vec3,
    pub mins: Vec3,
    pub maxs: Vec3,
    pub mask: u32,
    /// A sphere, capsule, cylinder or convex shape instead of the box.
    pub shape: Option<Shape>,
    /// Refine a shape's plane-shifted contact into the exact one (with the
    /// `exact` feature; without it the plane-shifted answer is given).
    pub exact: bool,
}

impl TraceQuery {
    pub fn ray(start: Vec3, end: Vec3, mask: u32) -> Self {
        Self {
            start,
            end,
            mins: Vec3::ZERO,
            maxs: Vec3::ZERO,
            mask,
            shape: None,
            exact: false,
        }
    }

    /// A box sweep.
    pub fn boxed(start: Vec3, end: Vec3, mins: Vec3, maxs: Vec3, mask: u32) -> Self {
        Self {
            mins,
            maxs,
            ..Self::ray(start, end, mask)
        }
    }

    /// A sweep of `shape` (its bounds fill `mins`/`maxs`).
    pub fn shaped(start: Vec3, end: Vec3, shape: Shape, mask: u32) -> Self {
        let (mins, maxs) = shape.bounds();
        Self {
            mins,
            maxs,
            shape: Some(shape),
            ..Self::ray(start, end, mask)
        }
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
        // Make the box symmetric around the traced point, as the reference
        // does. In SIMD lanes: the same per-component f32 arithmetic, in a
        // third of the instructions (this runs once per query).
        let (mins, maxs) = (Vec3A::from(q.mins), Vec3A::from(q.maxs));
        let offset = (mins + maxs) * 0.5;
        let size0 = mins - offset;
        let size1 = maxs - offset;
        let start = Vec3A::from(q.start) + offset;
        let end = Vec3A::from(q.end) + offset;
        let is_point = (size0.cmpeq(Vec3A::ZERO) & size1.cmpeq(Vec3A::ZERO)).all();
        let bounds = [start.min(end) + size0, start.max(end) + size1];
        Self {
            start,
            end,
            extents: size1,
            lower: size0,
            bounds,
            is_point,
            mask: q.mask,
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
