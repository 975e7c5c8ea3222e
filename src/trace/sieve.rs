//! Which queries surely touch nothing, before any search: a ray or box move
//! whose swept box reaches no occupied cell of the world's grid
//! ([`super::accel::occupancy`]) enters no primitive's bounds, so its answer
//! is the search's for it: fraction 1, nothing else set. A single query
//! asks before its search ([`Sieve::touches_nothing`]); a batch asks for all
//! its queries in one branch-free pass ([`super::batch`]).
//!
//! Asking costs a single query about a hundred instructions (and cache
//! misses on a large grid), so whether single queries ask at all is chosen
//! once per world at load ([`choose`]) from the grid's size and a sample of
//! moves; a query that does not ask gets an empty grid ([`Sieve::single`]).

use super::accel::border_starts::BorderStarts;
use super::accel::occupancy::{Occupancy, SingleAsks};
use super::walk::WalkStats;
use super::work::{Scratch, TraceQuery, TraceResult};
use super::Kernel;
use crate::contents::{CONTENTS_PLAYERCLIP, CONTENTS_SOLID, MASK_PLAYERSOLID, MASK_SOLID};
use crate::math::{random_direction, Vec3};
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
        Self::asking(world, !world.walk_only)
    }

    /// The sieve of `world` for one query at a time, of the full trace
    /// (`ANY_HIT` false) or any-hit: one that clears nothing where the
    /// world's choice has such queries search at once ([`choose`]), so
    /// that the question ends at its first test.
    #[inline(always)]
    pub fn single<const ANY_HIT: bool>(world: &'w Kernel) -> Self {
        let asks = world.accel.occupancy.single.asks[usize::from(ANY_HIT)];
        Self::asking(world, !world.walk_only && asks)
    }

    /// The sieve of `world` with its grid, or (not `asks`) an empty one.
    #[inline(always)]
    fn asking(world: &'w Kernel, asks: bool) -> Self {
        let kernel = &world.accel;
        Sieve {
            occupancy: if asks {
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

/// The rule [`choose`] applies (measured over 35 maps; see the benchmark
/// log). Single queries ask the grid when, for the sample's rays or boxes,
/// it has at most [`CACHED_GRID`] bytes (in cache) and clears at least
/// [`CACHED_ASKS_FROM`] of them; or at most [`LARGE_GRID`] bytes and clears
/// at least [`ASKS_FROM`], or spares searches of at least
/// [`NODES_SAVED_FROM`] nodes per sampled move; or is larger and spares at
/// least [`LARGE_NODES_SAVED_FROM`].
const CACHED_GRID: usize = 256 << 10;
const CACHED_ASKS_FROM: f32 = 0.05;
const LARGE_GRID: usize = 1280 << 10;
const ASKS_FROM: f32 = 0.55;
const NODES_SAVED_FROM: f32 = 1.8;
const LARGE_NODES_SAVED_FROM: f32 = 2.5;
/// Start points sampled inside the level, and random points tried for
/// each, at most.
const SAMPLE_STARTS: usize = 512;
const TRIES_PER_START: usize = 64;
const TRIES_WITHOUT_CLUSTERS: usize = 4;
/// Moves sampled per kind.
const SAMPLE_MOVES: usize = 1024;

/// Whether single rays and box moves should ask `world`'s grid before
/// their search, for the full trace and any-hit ([`SingleAsks`]), by the
/// rule at [`CACHED_GRID`] on a fixed sample of moves from empty points
/// inside the level (as `bspq workload` makes them: short rays and sight
/// lines; player boxes walking and dropping, small boxes). Without a grid
/// nothing asks; without a start point found, everything asks.
pub fn choose(world: &Kernel) -> SingleAsks {
    let sieve = Sieve::new(world);
    if sieve.occupancy.bytes() == 0 {
        return SingleAsks {
            asks: [false; 2],
            cleared: [0.0; 2],
            nodes_saved: [[0.0; 2]; 2],
        };
    }
    let mut rng = fastrand::Rng::with_seed(0x5EED_6A1D_0000_0045);
    let starts = inside_points(world, &mut rng);
    if starts.is_empty() {
        return sieve.occupancy.single;
    }
    let pick = |rng: &mut fastrand::Rng| starts[rng.usize(..starts.len())];
    let mut scratch = Scratch::new();
    // Per kind: the share cleared, and the search's nodes for those moves,
    // full trace and any-hit, per move asked.
    let mut tally =
        |moves: &mut dyn FnMut(&mut fastrand::Rng, &mut Scratch) -> Option<TraceQuery>,
         rng: &mut fastrand::Rng| {
            let (mut asked, mut clear, mut full, mut any) = (0usize, 0usize, 0u64, 0u64);
            for _ in 0..SAMPLE_MOVES {
                let Some(query) = moves(rng, &mut scratch) else {
                    continue;
                };
                asked += 1;
                if sieve.touches_nothing(&query) {
                    clear += 1;
                    let mut stats = WalkStats::default();
                    super::trace_probed::<_, false>(world, &query, &mut scratch, &mut stats);
                    full += u64::from(stats.bvh_nodes);
                    let mut stats = WalkStats::default();
                    super::any_hit_probed::<_, false>(world, &query, &mut scratch, &mut stats);
                    any += u64::from(stats.bvh_nodes);
                }
            }
            let per = |n: u64| n as f32 / asked.max(1) as f32;
            (per(clear as u64), [per(full), per(any)])
        };
    let mut i = 0usize;
    let rays = tally(
        &mut |rng, _| {
            i += 1;
            let start = pick(rng);
            let end = if i.is_multiple_of(2) {
                start + random_direction(rng) * (16.0 + 240.0 * rng.f32())
            } else {
                pick(rng)
            };
            TraceQuery::ray(start, end, MASK_SOLID).ok()
        },
        &mut rng,
    );
    let boxes = tally(
        &mut |rng, scratch| {
            let roll = rng.f32();
            let (mins, maxs) = if roll < 0.70 {
                let top = if rng.f32() < 0.25 { 16.0 } else { 32.0 };
                (Vec3::new(-15.0, -15.0, -24.0), Vec3::new(15.0, 15.0, top))
            } else {
                let half = 1.0 + 31.0 * rng.f32();
                (Vec3::splat(-half), Vec3::splat(half))
            };
            // A box starts where it fits, as a player stands.
            let mut start = pick(rng);
            for _ in 0..4 {
                let stand = TraceQuery::boxed(start, start, mins, maxs, MASK_PLAYERSOLID).ok()?;
                if !super::trace(world, &stand, scratch).startsolid {
                    break;
                }
                start = pick(rng);
            }
            let end = if roll < 0.53 {
                let angle = rng.f32() * std::f32::consts::TAU;
                let length = 384.0 * rng.f32() * rng.f32();
                let z = (rng.f32() - 0.5) * 128.0;
                start + Vec3::new(angle.cos() * length, angle.sin() * length, z)
            } else if roll < 0.70 {
                start - Vec3::Z * (16.0 + 984.0 * rng.f32())
            } else {
                start + random_direction(rng) * (400.0 * rng.f32())
            };
            TraceQuery::boxed(start, end, mins, maxs, MASK_PLAYERSOLID).ok()
        },
        &mut rng,
    );
    let cleared = [rays.0, boxes.0];
    let nodes_saved = [[rays.1[0], boxes.1[0]], [rays.1[1], boxes.1[1]]];
    let bytes = sieve.occupancy.bytes();
    let asks = nodes_saved.map(|op| {
        (0..2).any(|kind| {
            if bytes <= CACHED_GRID {
                cleared[kind] >= CACHED_ASKS_FROM
            } else if bytes <= LARGE_GRID {
                cleared[kind] >= ASKS_FROM || op[kind] >= NODES_SAVED_FROM
            } else {
                op[kind] >= LARGE_NODES_SAVED_FROM
            }
        })
    });
    SingleAsks {
        asks,
        cleared,
        nodes_saved,
    }
}

/// Up to [`SAMPLE_STARTS`] empty points (no solid, no player clip) inside
/// the level, tried uniformly over the world's bounds: in a leaf of the
/// source's tree with a cluster where the world has clusters, else where
/// all six axis-aligned sight lines meet something (the void around a
/// sealed map fails one of them).
fn inside_points(world: &Kernel, rng: &mut fastrand::Rng) -> Vec<Vec3> {
    let (lo, hi) = (Vec3::from(world.mins), Vec3::from(world.maxs));
    if !(lo.is_finite() && hi.is_finite()) {
        return Vec::new();
    }
    let reach = (hi - lo).length().max(1.0) * 2.0;
    let mut scratch = Scratch::new();
    let leaf_vis = world.source.leaf_vis;
    let mut inside = |p: Vec3| {
        if !leaf_vis.is_empty() {
            return crate::world::vis::leaf_at(&world.world, p)
                .and_then(|leaf| leaf_vis.get(leaf))
                .is_some_and(|vis| vis.cluster >= 0);
        }
        [Vec3::X, Vec3::Y, Vec3::Z, -Vec3::X, -Vec3::Y, -Vec3::Z]
            .iter()
            .all(|&dir| {
                TraceQuery::ray(p, p + dir * reach, MASK_SOLID)
                    .is_ok_and(|sight| super::trace(world, &sight, &mut scratch).fraction < 1.0)
            })
    };
    // Without clusters each try may take six traces: fewer tries (an
    // inline model, whose grid is small, took 11 ms with as many).
    let tries = if leaf_vis.is_empty() {
        SAMPLE_STARTS * TRIES_WITHOUT_CLUSTERS
    } else {
        SAMPLE_STARTS * TRIES_PER_START
    };
    let mut points = Vec::new();
    for _ in 0..tries {
        if points.len() == SAMPLE_STARTS {
            break;
        }
        let p = lo + (hi - lo) * Vec3::new(rng.f32(), rng.f32(), rng.f32());
        let empty = super::point_contents(world, p) & (CONTENTS_SOLID | CONTENTS_PLAYERCLIP) == 0;
        if empty && inside(p) {
            points.push(p);
        }
    }
    points
}
