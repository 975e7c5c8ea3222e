//! Which queries surely touch nothing, before any search.
//!
//! A ray or box move whose swept box reaches no occupied cell of the
//! world's grid ([`super::accel::occupancy`]) enters no primitive's bounds,
//! so the search would find nothing: its answer is the end of the move,
//! fraction 1, nothing else set, exactly what the search returns for it
//! (and `false` from [`super::any_hit`]). A single query asks before its
//! search ([`Sieve::touches_nothing`]) where the grid clears enough of the
//! moves to pay for the question ([`SieveTally`]); a batch asks this of all
//! its queries in one pass without a branch per query, then searches only
//! the rest (see [`super::batch`]).

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

/// Whether a single full trace asks the grid before its search, learned per
/// [`super::Scratch`] and per kind of move (rays, boxes) from the moves it
/// asked about. The question costs about 110 instructions where the grid's
/// table stays in the cache, and on larger grids its eight loads' cache
/// misses besides, about as much as the search of a move that touches
/// nothing: measured on 19 maps, asking first was 6-45 % faster where it
/// cleared over 60 % of the moves and 5-35 % slower where it cleared half
/// or fewer of them on a grid over [`CACHED_GRID_BYTES`], and on smaller
/// grids it paid from about a third. So it is asked while it clears at
/// least the `off` share of a window of moves ([`Shares`]), and taken up
/// again once a window clears the `on` share (the gap keeps a map near the
/// line from switching back and forth on chance); while it is not asked, one move in
/// [`SAMPLE_EVERY`] still asks, so that a change of workload turns it back
/// on. Which moves ask then is drawn at random: every eighth move of a
/// workload that alternates kinds of moves (long and short rays, say) would
/// ask about one kind only. Either way the answer is the search's.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SieveTally {
    asked: u16,
    cleared: u16,
    off: bool,
    /// A xorshift generator's state (never 0) drawing the moves that ask
    /// while off.
    draw: u32,
}

impl Default for SieveTally {
    fn default() -> Self {
        SieveTally {
            asked: 0,
            cleared: 0,
            off: false,
            draw: 0x9E37_79B9,
        }
    }
}

/// Moves per judgement: long enough that a map clearing 60 % of its moves
/// (standard deviation 3 % over a window) never falls below half by chance.
const WINDOW: u16 = 256;
/// Grids up to this size stay in the cache beside the trees (the largest
/// ones fill a megabyte or two).
pub(crate) const CACHED_GRID_BYTES: usize = 256 << 10;

/// Below `off` cleared moves of a window the grid is no longer asked about
/// every move, and from `on` it is again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shares {
    pub off: u16,
    pub on: u16,
}

impl Shares {
    /// For a grid whose table holds `bytes`: a half and 55 % of a window,
    /// a quarter and 30 % on a grid that stays in the cache.
    pub(crate) fn of_grid(bytes: usize) -> Shares {
        if bytes <= CACHED_GRID_BYTES {
            Shares {
                off: WINDOW / 4,
                on: WINDOW * 30 / 100,
            }
        } else {
            Shares {
                off: WINDOW / 2,
                on: WINDOW * 55 / 100,
            }
        }
    }
}
/// While off, one move in this many asks.
const SAMPLE_EVERY: u32 = 8;

impl SieveTally {
    /// Whether this move asks the grid.
    #[inline(always)]
    pub(crate) fn asks(&mut self) -> bool {
        if !self.off {
            return true;
        }
        let mut x = self.draw;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.draw = x;
        x < u32::MAX / SAMPLE_EVERY
    }

    /// Counts the grid's answer about a move that asked, on a grid of
    /// these shares.
    #[inline(always)]
    pub(crate) fn record(&mut self, clear: bool, shares: impl FnOnce() -> Shares) {
        self.asked += 1;
        self.cleared += u16::from(clear);
        if self.asked == WINDOW {
            let shares = shares();
            let share = if self.off { shares.on } else { shares.off };
            self.off = self.cleared < share;
            self.asked = 0;
            self.cleared = 0;
        }
    }
}

/// The answer to a query that touches nothing: [`super::trace`]'s.
#[inline(always)]
pub fn missed(query: &TraceQuery) -> TraceResult {
    TraceResult::default().ended(query)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Asks `count` moves of `tally`, the grid clearing those `clears`
    /// picks (by the ask's number); how many asked.
    fn ask(tally: &mut SieveTally, count: usize, clears: impl Fn(usize) -> bool) -> usize {
        let mut asked = 0;
        for _ in 0..count {
            if tally.asks() {
                tally.record(clears(asked), || LARGE);
                asked += 1;
            }
        }
        asked
    }

    /// A large grid's shares.
    const LARGE: Shares = Shares {
        off: WINDOW / 2,
        on: WINDOW * 55 / 100,
    };

    /// Every move asks while the grid clears its `off` share of them; one
    /// in `SAMPLE_EVERY` once it clears fewer; every move again once the
    /// sampled ones are cleared its `on` share of a window. A grid that
    /// stays in the cache asks at lower shares.
    #[test]
    fn the_grid_is_asked_where_it_clears_enough() {
        assert_eq!(Shares::of_grid(CACHED_GRID_BYTES + 2), LARGE);
        let cached = Shares::of_grid(CACHED_GRID_BYTES);
        assert!(cached.off < LARGE.off && cached.on < LARGE.on && cached.off < cached.on);
        let window = usize::from(WINDOW);
        let (off, on) = (usize::from(LARGE.off), usize::from(LARGE.on));
        let mut tally = SieveTally::default();
        assert_eq!(
            ask(&mut tally, 4 * window, |k| k % window < off),
            4 * window
        );
        // One window clearing one move too few turns it off.
        assert_eq!(ask(&mut tally, window, |k| k % window < off - 1), window);
        // While off, about one move in eight asks (drawn at random); a
        // window of them clearing one move short of the share leaves it
        // off, one clearing the share turns it back on.
        let asked = ask(&mut tally, 80 * window, |_| false);
        let sample = SAMPLE_EVERY as usize;
        assert!(
            asked.abs_diff(80 * window / sample) < 80 * window / sample / 10,
            "{asked}"
        );
        let fresh = SieveTally {
            off: true,
            asked: 0,
            cleared: 0,
            ..tally
        };
        let mut short = fresh;
        let mut enough = fresh;
        for k in 0..window {
            short.record(k < on - 1, || LARGE);
            enough.record(k < on, || LARGE);
        }
        assert!(short.off && !enough.off);
        assert_eq!(ask(&mut enough, window, |_| true), window);
    }
}
