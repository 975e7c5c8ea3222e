//! Which queries surely touch nothing, before any search.
//!
//! A ray or box move whose swept box reaches no occupied cell of the
//! world's grid ([`super::accel::occupancy`]) enters no primitive's bounds,
//! so the search would find nothing: its answer is the end of the move,
//! fraction 1, nothing else set, exactly what the search returns for it
//! (and `false` from [`super::any_hit`]). A single query asks before its
//! search ([`Sieve::touches_nothing`]); a batch asks this of all its queries
//! in one pass without a branch per query, then searches only the rest
//! (see [`super::batch`]).

use super::accel::border_starts::BorderStarts;
use super::accel::occupancy::Occupancy;
use super::work::{TraceQuery, TraceResult};
use super::Kernel;
use crate::math::Vec3;
use glam::{BVec4A, Vec3A, Vec4};

/// The grid of a world without one: nothing is known clear.
static NO_OCCUPANCY: Occupancy = Occupancy::EMPTY;

/// The first pass's view of one world.
#[derive(Debug, Clone, Copy)]
pub struct Sieve<'w> {
    occupancy: &'w Occupancy,
    border_starts: &'w BorderStarts,
}

impl<'w> Sieve<'w> {
    /// The sieve of `world` (one that passes every query through when the
    /// world answers with the walk alone).
    pub fn new(world: &'w Kernel) -> Self {
        let kernel = &world.accel;
        Sieve {
            occupancy: if !world.walk_only {
                &kernel.occupancy
            } else {
                &NO_OCCUPANCY
            },
            border_starts: &kernel.border_starts,
        }
    }

    /// Whether `query` surely touches nothing: a move of a ray or box (not
    /// a shape, not a position test) whose swept box reaches no occupied
    /// cell. Its answer is then [`missed`]. The single path's test in front
    /// of its search: the query's three axes in the lanes of one vector
    /// (about 110 instructions, where a miss through the hierarchy takes
    /// several hundred); the same answer as [`Sieve::touch_nothing`].
    #[inline(always)]
    pub fn touches_nothing(&self, query: &TraceQuery) -> bool {
        let (start, end) = (Vec3A::from(query.start), Vec3A::from(query.end));
        let (mins, maxs) = (Vec3A::from(query.mins), Vec3A::from(query.maxs));
        let (lo, hi) = (start.min(end) + mins, start.max(end) + maxs);
        start.cmpne(end).any()
            && query.shape.is_none()
            && self.occupancy.is_clear(lo, hi)
            // As in `moves_touch_nothing`: a ray starting on a facet's
            // border plane may meet the facet outside its bounds. (Asked
            // after the grid: the rays it does not clear never ask.)
            && (mins.cmpne(maxs).any() || !self.border_starts.may_hold(start + (mins + maxs) * 0.5))
    }

    /// [`Sieve::touches_nothing`] for four queries at once: a bitmask of
    /// those that surely touch nothing (bit `k`: `queries[k]`).
    #[inline(always)]
    pub fn touch_nothing(&self, queries: [&TraceQuery; 4]) -> u32 {
        let [a, b, c, d] = queries;
        let moves = Moves::of([
            [a.start, a.end, a.mins, a.maxs],
            [b.start, b.end, b.mins, b.maxs],
            [c.start, c.end, c.mins, c.maxs],
            [d.start, d.end, d.mins, d.maxs],
        ]);
        let boxes = u32::from(a.shape.is_none())
            | u32::from(b.shape.is_none()) << 1
            | u32::from(c.shape.is_none()) << 2
            | u32::from(d.shape.is_none()) << 3;
        self.moves_touch_nothing(&moves) & boxes
    }

    /// [`Sieve::touch_nothing`] for four moves of boxes (or rays).
    #[inline(always)]
    pub fn moves_touch_nothing(&self, moves: &Moves) -> u32 {
        let Moves {
            start,
            end,
            mins,
            maxs,
        } = moves;
        let mut lo = [Vec4::ZERO; 3];
        let mut hi = [Vec4::ZERO; 3];
        let mut moving = BVec4A::splat(false);
        let mut ray = BVec4A::splat(true);
        for k in 0..3 {
            lo[k] = start[k].min(end[k]) + mins[k];
            hi[k] = start[k].max(end[k]) + maxs[k];
            moving |= start[k].cmpne(end[k]);
            ray &= mins[k].cmpeq(maxs[k]);
        }
        let clear = self.occupancy.are_clear(lo, hi) & moving.bitmask();
        let rays = clear & ray.bitmask();
        if rays == 0 {
            return clear;
        }
        // A ray starting on a facet's border plane may meet the facet
        // outside its bounds (the search sends those to the walk). Asked of
        // the clear rays only: asking every lane without a branch cost
        // 30-40 instructions per ray more on maps with patches, and
        // callgrind's simulated mispredictions did not rise.
        let mut on_border = 0;
        let mut asked = rays;
        while asked != 0 {
            let lane = asked.trailing_zeros() as usize;
            asked &= asked - 1;
            let centre = |k: usize| start[k][lane] + (mins[k][lane] + maxs[k][lane]) * 0.5;
            let centre = Vec3A::new(centre(0), centre(1), centre(2));
            on_border |= u32::from(self.border_starts.may_hold(centre)) << lane;
        }
        clear & !(rays & on_border)
    }
}

/// Four moves in lanes: per axis, the starts, ends and the boxes' corners.
#[derive(Debug, Clone, Copy)]
pub struct Moves {
    pub start: [Vec4; 3],
    pub end: [Vec4; 3],
    pub mins: [Vec4; 3],
    pub maxs: [Vec4; 3],
}

impl Moves {
    /// Four moves given as `[start, end, mins, maxs]` each.
    #[inline(always)]
    pub fn of([a, b, c, d]: [[Vec3; 4]; 4]) -> Moves {
        // Written out: `array::map` here compiled to out-of-line copies.
        let lanes = |field: usize| {
            let (a, b, c, d) = (a[field], b[field], c[field], d[field]);
            [
                Vec4::new(a.x, b.x, c.x, d.x),
                Vec4::new(a.y, b.y, c.y, d.y),
                Vec4::new(a.z, b.z, c.z, d.z),
            ]
        };
        Moves {
            start: lanes(0),
            end: lanes(1),
            mins: lanes(2),
            maxs: lanes(3),
        }
    }
}

/// The answer to a query that touches nothing: [`super::trace`]'s.
#[inline(always)]
pub fn missed(query: &TraceQuery) -> TraceResult {
    TraceResult::default().ended(query)
}
