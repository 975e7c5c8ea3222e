//! Which entities a move's bounds meet, in scene order.
//!
//! The entities' bounds are kept four to a record in SIMD lanes and met
//! four at a time. A coarse grid over the scene says which records have an
//! entity in each cell, so a query tests only the records listed in the
//! cells its bounds cover (a scene of a hundred entities is some thirty
//! records, and testing them all cost a move more than the world's trace).
//! The grid only narrows the records: the lane test decides, so the answer
//! is the full scan's.

use crate::math::Vec3;
use glam::{Vec3A, Vec4};
use std::ops::ControlFlow;

/// Most records a scene has ([`super::MAX_ENTITIES`] four to a record), as
/// bits of `u64` words.
const RECORD_WORDS: usize = (super::MAX_ENTITIES.div_ceil(4)).div_ceil(64);

/// Most cells along an axis.
const MAX_CELLS_PER_AXIS: f32 = 16.0;

/// Cells' smallest edge: a player's box and its move span a few cells.
const MIN_CELL_EDGE: f32 = 32.0;

/// Queries covering more cells than this test every record (a long move:
/// gathering the cells would cost more than the records).
const MAX_QUERY_CELLS: usize = 32;

#[derive(Debug)]
pub(super) struct Broadphase {
    /// Lane `k` of record `r` is entity `4r + k`; padding lanes are empty
    /// (`lo` +∞, `hi` -∞) and meet nothing.
    records: Vec<BoundsLanes>,
    grid: Grid,
}

impl Broadphase {
    /// For entities with these bounds (`lo ≤ hi`, finite), in scene order.
    pub(super) fn new(bounds: &[(Vec3, Vec3)]) -> Self {
        Broadphase {
            records: bounds.chunks(4).map(BoundsLanes::of).collect(),
            grid: Grid::new(bounds),
        }
    }

    /// The records that may hold an entity meeting `lo..hi`.
    #[inline(always)]
    pub(super) fn near(&self, lo: Vec3, hi: Vec3) -> Near {
        Near(self.grid.records_near(lo, hi, self.records.len()))
    }

    /// Calls `visit` with the index of each entity whose bounds meet
    /// `lo..hi` (touching counts), in scene order, until it breaks; `near`
    /// is [`Broadphase::near`] of the same bounds.
    #[inline(always)]
    pub(super) fn meeting<B>(
        &self,
        near: &Near,
        lo: Vec3,
        hi: Vec3,
        mut visit: impl FnMut(usize) -> ControlFlow<B>,
    ) -> ControlFlow<B> {
        for (word, &records) in near.0.iter().enumerate() {
            let mut records = records;
            while records != 0 {
                let record = 64 * word + records.trailing_zeros() as usize;
                records &= records - 1;
                let Some(lanes) = self.records.get(record) else {
                    break;
                };
                let mut entities = lanes.meeting(lo, hi);
                while entities != 0 {
                    visit(4 * record + entities.trailing_zeros() as usize)?;
                    entities &= entities - 1;
                }
            }
        }
        ControlFlow::Continue(())
    }
}

/// Records near a query, as bits.
pub(super) struct Near([u64; RECORD_WORDS]);

impl Near {
    /// No entity can meet the query.
    #[inline(always)]
    pub(super) fn is_empty(&self) -> bool {
        self.0.iter().fold(0, |any, word| any | word) == 0
    }
}

#[derive(Debug, Clone, Copy)]
struct BoundsLanes {
    lo: [Vec4; 3],
    hi: [Vec4; 3],
}

impl BoundsLanes {
    fn of(bounds: &[(Vec3, Vec3)]) -> Self {
        let lane = |axis: usize, hi: bool| {
            let empty = if hi { f32::NEG_INFINITY } else { f32::INFINITY };
            Vec4::from_array(std::array::from_fn(|k| {
                bounds
                    .get(k)
                    .map_or(empty, |(l, h)| if hi { h[axis] } else { l[axis] })
            }))
        };
        BoundsLanes {
            lo: std::array::from_fn(|axis| lane(axis, false)),
            hi: std::array::from_fn(|axis| lane(axis, true)),
        }
    }

    /// Bit `k`: lane `k`'s bounds meet `lo..hi`.
    #[inline(always)]
    fn meeting(&self, lo: Vec3, hi: Vec3) -> u32 {
        let apart = self.lo[0].cmpgt(Vec4::splat(hi.x))
            | self.lo[1].cmpgt(Vec4::splat(hi.y))
            | self.lo[2].cmpgt(Vec4::splat(hi.z))
            | self.hi[0].cmplt(Vec4::splat(lo.x))
            | self.hi[1].cmplt(Vec4::splat(lo.y))
            | self.hi[2].cmplt(Vec4::splat(lo.z));
        !apart.bitmask() & 0xf
    }
}

/// A grid of cells over the entities' bounds, each holding the bits of the
/// records with an entity whose bounds reach into it. A point's cell is
/// `(p - origin) · scale` clamped to the grid and truncated, per axis: a
/// non-decreasing function of `p`, so two ranges that meet have a point in
/// common and share its cell, and every entity a query meets is in a cell
/// it covers.
#[derive(Debug, Default)]
struct Grid {
    origin: Vec3A,
    scale: Vec3A,
    /// The last cell's index along each axis.
    last: Vec3A,
    /// Cells along x, and x times y.
    row: usize,
    layer: usize,
    /// Words per cell (the records' bits).
    words: usize,
    /// Cell `(x, y, z)` from word `(z · layer + y · row + x) · words`.
    cells: Vec<u64>,
}

impl Grid {
    fn new(bounds: &[(Vec3, Vec3)]) -> Self {
        let Some(first) = bounds.first() else {
            return Grid::default();
        };
        let (lo, hi) = bounds
            .iter()
            .fold(*first, |(lo, hi), (l, h)| (lo.min(*l), hi.max(*h)));
        let extent = (hi - lo).max(Vec3::splat(MIN_CELL_EDGE));
        let edge = (extent.max_element() / MAX_CELLS_PER_AXIS).max(MIN_CELL_EDGE);
        let counts = (extent / edge)
            .ceil()
            .clamp(Vec3::ONE, Vec3::splat(MAX_CELLS_PER_AXIS));
        let [nx, ny, nz] = counts.to_array().map(|n| n as usize);
        let words = bounds.len().div_ceil(4).div_ceil(64);
        let mut grid = Grid {
            origin: lo.into(),
            scale: (counts / extent).into(),
            last: (counts - Vec3::ONE).into(),
            row: nx,
            layer: nx * ny,
            words,
            cells: vec![0; nx * ny * nz * words],
        };
        for (i, (l, h)) in bounds.iter().enumerate() {
            let (word, bit) = (i / 4 / 64, 1u64 << (i / 4 % 64));
            let rows: Vec<(usize, usize)> = grid.rows_covered(*l, *h).collect();
            for (first, last) in rows {
                for cell in first..=last {
                    grid.cells[cell * words + word] |= bit;
                }
            }
        }
        grid
    }

    /// The cell holding `p`, clamped to the grid. (Clamped first, to
    /// `0..=last`, truncating is flooring.)
    #[inline(always)]
    fn cell_of(&self, p: Vec3) -> [usize; 3] {
        let cell = ((Vec3A::from(p) - self.origin) * self.scale)
            .max(Vec3A::ZERO)
            .min(self.last);
        [cell.x as u32, cell.y as u32, cell.z as u32].map(|c| c as usize)
    }

    /// The cells `lo..hi` covers: per row of cells along x, its first and
    /// last cell. (Rows rather than cells: the cells of a row are one
    /// slice.)
    #[inline(always)]
    fn rows_covered(&self, lo: Vec3, hi: Vec3) -> impl Iterator<Item = (usize, usize)> + '_ {
        let (from, to) = (self.cell_of(lo), self.cell_of(hi));
        (from[2]..to[2] + 1).flat_map(move |z| {
            (from[1]..to[1] + 1).map(move |y| {
                let row = z * self.layer + y * self.row;
                (row + from[0], row + to[0])
            })
        })
    }

    /// The records (of `count`) with an entity in a cell `lo..hi` covers:
    /// every record when the range covers many cells.
    #[inline(always)]
    fn records_near(&self, lo: Vec3, hi: Vec3, count: usize) -> [u64; RECORD_WORDS] {
        let mut found = [0u64; RECORD_WORDS];
        if self.cells.is_empty() {
            return found;
        }
        let (from, to) = (self.cell_of(lo), self.cell_of(hi));
        let covered = (to[0] + 1 - from[0]) * (to[1] + 1 - from[1]) * (to[2] + 1 - from[2]);
        if covered > MAX_QUERY_CELLS {
            for (w, word) in found.iter_mut().enumerate() {
                let below = count.saturating_sub(64 * w).min(64);
                *word = u64::MAX.checked_shr(64 - below as u32).unwrap_or(0);
            }
            return found;
        }
        for z in from[2]..to[2] + 1 {
            for y in from[1]..to[1] + 1 {
                let row = z * self.layer + y * self.row;
                let cells =
                    &self.cells[(row + from[0]) * self.words..(row + to[0] + 1) * self.words];
                if self.words == 1 {
                    // (Most scenes: at most 256 entities.)
                    found[0] |= cells.iter().fold(0, |all, cell| all | cell);
                } else {
                    for cell in cells.chunks_exact(self.words) {
                        for (found, word) in found.iter_mut().zip(cell) {
                            *found |= word;
                        }
                    }
                }
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every query's entities are the full scan's, in scene order: entities
    /// of all sizes, spread or clustered, and queries inside, outside,
    /// touching and spanning the grid.
    #[test]
    fn the_grid_finds_what_the_full_scan_finds() {
        let mut rng = fastrand::Rng::with_seed(0x005e_ed0f_9a1d);
        let point = |rng: &mut fastrand::Rng, scale: f32| {
            Vec3::new(rng.f32() - 0.5, rng.f32() - 0.5, rng.f32() - 0.5) * scale
        };
        let mut met = 0;
        for case in 0..400 {
            let count = [1, 3, 4, 5, 64, 70, 257, 1022][case % 8];
            let spread = [64.0, 1000.0, 8000.0][case % 3];
            let bounds: Vec<(Vec3, Vec3)> = (0..count)
                .map(|_| {
                    let centre = point(&mut rng, spread);
                    let half = point(&mut rng, if case % 5 == 0 { 600.0 } else { 60.0 }).abs();
                    // On a 1/8 grid half the time: faces shared with queries.
                    let snap = |v: Vec3| (v * 8.0).round() / 8.0;
                    (snap(centre - half), snap(centre + half))
                })
                .collect();
            let broadphase = Broadphase::new(&bounds);
            for _ in 0..200 {
                let (lo, hi) = if rng.bool() {
                    let (l, h) = bounds[rng.usize(..count)];
                    // Touching an entity's face, corner or edge.
                    let p = Vec3::new(
                        if rng.bool() { l.x } else { h.x },
                        if rng.bool() { l.y } else { h.y },
                        if rng.bool() { l.z } else { h.z },
                    );
                    (p - point(&mut rng, 40.0).abs(), p)
                } else {
                    let c = point(&mut rng, spread * 1.5);
                    let far = if rng.bool() { 30.0 } else { 3000.0 };
                    let half = point(&mut rng, far).abs();
                    (c - half, c + half)
                };
                let scan: Vec<usize> = (0..count)
                    .filter(|&i| {
                        let (l, h) = bounds[i];
                        !(l.cmpgt(hi).any() || h.cmplt(lo).any())
                    })
                    .collect();
                let mut found = Vec::new();
                let near = broadphase.near(lo, hi);
                let _ = broadphase.meeting(&near, lo, hi, |i| {
                    found.push(i);
                    ControlFlow::<()>::Continue(())
                });
                assert_eq!(found, scan, "case {case}: {lo} {hi}");
                met += scan.len();
            }
        }
        assert!(met > 10_000, "{met}");
    }

    #[test]
    fn an_empty_scene_meets_nothing() {
        let broadphase = Broadphase::new(&[]);
        let far = Vec3::splat(1e6);
        let near = broadphase.near(-far, far);
        assert!(near.is_empty());
        let met = broadphase.meeting(&near, -far, far, |_| ControlFlow::Break(()));
        assert_eq!(met, ControlFlow::Continue(()));
    }
}
