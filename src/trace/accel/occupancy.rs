//! Where a world is empty: a coarse grid marking every cell some brush's or
//! facet's cull box reaches, as a summed-volume table, so that asking
//! whether a box of cells is empty is eight loads and some adds, no branch.
//! A move whose swept box reaches no marked cell touches nothing. A single
//! query asks one box ([`Occupancy::is_clear`]); a batch asks four at a
//! time in one pass ([`Occupancy::are_clear`]).
//!
//! Exactness: a cell index is `(v - origin) * scale` truncated, the same
//! monotonic function for boxes marked and asked, so overlapping boxes
//! share a cell; indices are clamped to the grid, whose border cells
//! nothing marks. The table counts modulo 2^16 (half the memory of `u32`),
//! so a box of 65 536 cells or more is never reported empty.

use super::bvh::{Bvh, BvhNode, EMPTY_SLOT, PRIMITIVE, WIDTH};
use glam::{BVec4A, Vec3A, Vec4};

/// The smallest cell edge (units): about a player's width, so a player-sized
/// box moving through open space reaches few cells.
const MIN_CELL: f32 = 32.0;
/// The most table entries (2 bytes each): cells grow (doubling) until the
/// table fits ...
const MAX_ENTRIES: usize = 1 << 20;
/// ... and no more than this many per box marked, so that a world of few
/// primitives spread far apart (a damaged file, say) holds a grid in
/// proportion to what it holds ...
const ENTRIES_PER_BOX: usize = 512;
/// ... though never fewer than this many.
const MIN_ENTRIES: usize = 1 << 16;
/// A box of this many cells or more is never reported empty (see the module
/// notes).
const MAX_CELLS_ASKED: u32 = 1 << 16;

/// The occupancy grid of one world (empty: never reports a box empty).
#[derive(Debug, Clone, PartialEq)]
pub struct Occupancy {
    /// Per axis, in every lane: the lower corner of cell 0 ...
    origin: [Vec4; 3],
    /// ... the last cell's index, as a float (for clamping) ...
    last: [Vec4; 3],
    /// ... and entries per step in `table`.
    stride: [Vec4; 3],
    /// Cells per unit: the reciprocal of the (power of two) cell edge.
    scale: Vec4,
    /// The same per-axis constants for one box, axis `k` in lane `k` (the
    /// fourth lane 0): one lane per axis, as [`Occupancy::is_clear`] reads
    /// them.
    origin_xyz: Vec4,
    last_xyz: Vec4,
    stride_y: u32,
    stride_z: u32,
    /// `(cells.x + 1) * (cells.y + 1) * (cells.z + 1)` entries: entry
    /// `(x, y, z)` counts (mod 2^16) the marked cells below it on all
    /// three axes.
    table: Vec<u16>,
    /// Cells per axis and the cell edge, for reports.
    cells: [u32; 3],
    cell_size: f32,
    /// Whether single moves ask the grid before their search, chosen once
    /// per world when it loads; batches always ask.
    pub single: SingleAsks,
}

/// Whether single moves ask the grid before their search, per operation
/// (`[0]` the full trace, `[1]` any-hit), and what that was chosen from
/// ([`crate::trace::sieve::choose`]), per kind of move (`[0]` rays, `[1]`
/// box moves).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SingleAsks {
    pub asks: [bool; 2],
    /// Per kind, the share of a sample of moves the grid cleared ...
    pub cleared: [f32; 2],
    /// ... and per operation and kind, the hierarchy nodes the search
    /// would have visited for those moves, per move of the sample.
    pub nodes_saved: [[f32; 2]; 2],
}

impl Default for Occupancy {
    fn default() -> Self {
        Occupancy::EMPTY
    }
}

impl Occupancy {
    pub const EMPTY: Occupancy = Occupancy {
        origin: [Vec4::ZERO; 3],
        last: [Vec4::ZERO; 3],
        stride: [Vec4::ZERO; 3],
        scale: Vec4::ZERO,
        origin_xyz: Vec4::ZERO,
        last_xyz: Vec4::ZERO,
        stride_y: 0,
        stride_z: 0,
        table: Vec::new(),
        cells: [0; 3],
        cell_size: 0.0,
        single: SingleAsks {
            asks: [false; 2],
            cleared: [0.0; 2],
            nodes_saved: [[0.0; 2]; 2],
        },
    };

    /// The grid of everything `bvh` holds: the bounds of every primitive
    /// (or piece of one) in its leaves. Empty when some primitive has no
    /// bounds (it may be touched anywhere) or there is nothing at all.
    pub fn build(bvh: &Bvh) -> Occupancy {
        if !bvh.unbounded.is_empty() {
            return Occupancy::EMPTY;
        }
        let mut boxes = Vec::new();
        for nodes in [
            &bvh.brushes,
            &bvh.patches,
            &bvh.combined,
            &bvh.combined_whole,
        ] {
            leaf_bounds(nodes, &mut boxes);
        }
        Occupancy::of_boxes(&boxes)
    }

    /// The grid marking every cell these boxes (`[min, max]`) reach into.
    pub fn of_boxes(boxes: &[[Vec3A; 2]]) -> Occupancy {
        // A box that is not finite or not ordered (a damaged world's) has
        // no cells to mark that the search would agree with: no grid.
        let sound = |&[a, b]: &[Vec3A; 2]| a.is_finite() && b.is_finite() && a.cmple(b).all();
        if !boxes.iter().all(sound) {
            return Occupancy::EMPTY;
        }
        let Some((lo, hi)) = boxes
            .iter()
            .map(|&[a, b]| (a, b))
            .reduce(|(a, b), (c, d)| (a.min(c), b.max(d)))
        else {
            return Occupancy::EMPTY;
        };
        let max_entries = boxes
            .len()
            .saturating_mul(ENTRIES_PER_BOX)
            .clamp(MIN_ENTRIES, MAX_ENTRIES);
        let mut cell_size = MIN_CELL;
        // Doubling from 32 units, the table fits long before the cell
        // outgrows any finite f32 extent; the limit only bounds the loop.
        for _ in 0..128 {
            if let Some(grid) = Occupancy::sized(boxes, lo, hi, cell_size, max_entries) {
                return grid;
            }
            cell_size *= 2.0;
        }
        Occupancy::EMPTY
    }

    /// The grid with cells of this edge, if its table fits.
    fn sized(
        boxes: &[[Vec3A; 2]],
        lo: Vec3A,
        hi: Vec3A,
        cell_size: f32,
        max_entries: usize,
    ) -> Option<Occupancy> {
        // One border cell below everything; the one above comes from `+ 2`.
        let origin = lo - cell_size;
        let scale = Vec3A::splat(1.0 / cell_size);
        let top = ((hi - origin) * scale).floor();
        if !top.is_finite() || top.max_element() > 1e6 {
            return None;
        }
        let cells = top.as_uvec3() + 2;
        let entries = (cells + 1).to_array().map(|n| n as usize);
        let size = entries[0]
            .checked_mul(entries[1])
            .and_then(|v| v.checked_mul(entries[2]))?;
        if size > max_entries {
            return None;
        }
        let last = (cells - 1).as_vec3a();
        let stride = [1, entries[0], entries[0] * entries[1]];
        let mut grid = Occupancy {
            origin: [0, 1, 2].map(|k| Vec4::splat(origin[k])),
            last: [0, 1, 2].map(|k| Vec4::splat(last[k])),
            stride: stride.map(|n| Vec4::splat(n as f32)),
            scale: Vec4::splat(scale.x),
            origin_xyz: origin.extend(0.0),
            last_xyz: last.extend(0.0),
            stride_y: stride[1] as u32,
            stride_z: stride[2] as u32,
            table: vec![0; size],
            cells: cells.to_array(),
            cell_size,
            single: SingleAsks {
                asks: [true; 2],
                cleared: [1.0; 2],
                nodes_saved: [[f32::INFINITY; 2]; 2],
            },
        };
        // Each box adds ±1 at its block's eight corners in a difference
        // array whose prefix sums count the boxes reaching each cell
        // (filling blocks would take minutes on a damaged world of huge
        // brushes). Under 2^16 boxes the table's own 16 bits serve as that
        // array; else a 32-bit one does, for a moment.
        let [cx, cy, cz] = cells.to_array().map(|n| n as usize);
        let at = |x: usize, y: usize, z: usize| x + y * stride[1] + z * stride[2];
        if boxes.len() < usize::from(u16::MAX) {
            let mut reach = std::mem::take(&mut grid.table);
            grid.count_reach(boxes, &mut reach, 1, u16::wrapping_add, u16::wrapping_sub);
            // Each cell's mark to its entry, one further on each axis: from
            // the top down, so a count is read before its slot is written.
            for z in (0..cz).rev() {
                for y in (0..cy).rev() {
                    for x in (0..cx).rev() {
                        reach[at(x + 1, y + 1, z + 1)] = u16::from(reach[at(x, y, z)] != 0);
                    }
                }
            }
            // The entries below the first cell on some axis count nothing.
            for z in 0..=cz {
                for y in 0..=cy {
                    for x in 0..=cx {
                        if x == 0 || y == 0 || z == 0 {
                            reach[at(x, y, z)] = 0;
                        }
                    }
                }
            }
            grid.table = reach;
        } else {
            let mut reach = vec![0i32; grid.table.len()];
            grid.count_reach(boxes, &mut reach, 1, i32::wrapping_add, i32::wrapping_sub);
            for z in 0..cz {
                for y in 0..cy {
                    for x in 0..cx {
                        grid.table[at(x + 1, y + 1, z + 1)] = u16::from(reach[at(x, y, z)] != 0);
                    }
                }
            }
        }
        // Then the sums along each axis in turn (wrapping: counts mod 2^16)
        // leave entry (x, y, z) counting the marked cells below it.
        prefix_sums(&mut grid.table, entries, u16::wrapping_add);
        Some(grid)
    }

    /// Per cell (in `reach`, laid out as the table but in cell
    /// coordinates), how many of `boxes` reach it, counted with `add` and
    /// `sub` (wrapping).
    fn count_reach<T: Copy>(
        &self,
        boxes: &[[Vec3A; 2]],
        reach: &mut [T],
        one: T,
        add: impl Fn(T, T) -> T,
        sub: impl Fn(T, T) -> T,
    ) {
        let stride = self.stride.map(|s| s.x as usize);
        for &[a, b] in boxes {
            let cell = |v: Vec3A, k: usize| self.cells_along(Vec4::splat(v[k]), k).x as usize;
            // A box's block is `first..=last`; its end, one past, is at most
            // `cells` along each axis, inside the array.
            let first = [cell(a, 0), cell(a, 1), cell(a, 2)];
            let end = [cell(b, 0) + 1, cell(b, 1) + 1, cell(b, 2) + 1];
            for corner in 0..8u32 {
                let pick = |k: usize| {
                    if corner >> k & 1 == 0 {
                        first[k]
                    } else {
                        end[k]
                    }
                };
                let at = pick(0) + pick(1) * stride[1] + pick(2) * stride[2];
                reach[at] = if corner.count_ones().is_multiple_of(2) {
                    add(reach[at], one)
                } else {
                    sub(reach[at], one)
                };
            }
        }
        let dims = [0, 1, 2].map(|k| self.cells[k] as usize + 1);
        prefix_sums(reach, dims, add);
    }

    /// Whether the box `lo`..`hi` surely reaches no marked cell (false when
    /// the grid is empty, the box is not finite or not ordered, or it spans
    /// too many cells to tell): [`Occupancy::are_clear`]'s answer for one
    /// box, its three axes in three lanes of one vector (the same
    /// arithmetic per axis, in a quarter of the instructions).
    #[inline(always)]
    pub fn is_clear(&self, lo: Vec3A, hi: Vec3A) -> bool {
        if self.table.is_empty() {
            return false;
        }
        // The fourth lanes are whatever they are: `sound` leaves them out,
        // they end up in cell 0 (`max` takes 0 over a NaN), and their stride
        // is 0.
        let (lo, hi) = (as_lanes(lo), as_lanes(hi));
        let extent = hi - lo;
        let sound =
            (extent.cmpge(Vec4::ZERO) & extent.cmplt(Vec4::INFINITY)).bitmask() & 0b111 == 0b111;
        // Each axis's cell as `cells_along` finds it, in integers from here:
        // the branch on the answer resolves sooner than with the offsets
        // summed in float lanes (a mispredicted one costs what was done
        // meanwhile).
        let cells = |v: Vec4| {
            truncate_lanes(clamp_lanes(
                (v - self.origin_xyz) * self.scale,
                self.last_xyz,
            ))
        };
        let ([x0, y0, z0, _], [x1, y1, z1, _]) = (cells(lo), cells(hi));
        // (Whole numbers: below the limit exactly when the float product
        // of the four-box test is. Wrapping: a box that is not `sound` may
        // end before it starts.)
        let span = [
            x1.wrapping_sub(x0),
            y1.wrapping_sub(y0),
            z1.wrapping_sub(z0),
        ]
        .map(|n| u64::from(n) + 1);
        let small =
            span[0].wrapping_mul(span[1]).wrapping_mul(span[2]) < u64::from(MAX_CELLS_ASKED);
        let [sy, sz] = [self.stride_y, self.stride_z];
        let (ax, ay, az) = (x0, y0 * sy, z0 * sz);
        let (bx, by, bz) = (x1 + 1, (y1 + 1) * sy, (z1 + 1) * sz);
        let plus = [bx + by + bz, ax + ay + bz, ax + by + az, bx + ay + az];
        let minus = [ax + by + bz, bx + ay + bz, bx + by + az, ax + ay + az];
        let count = self
            .at(plus[0])
            .wrapping_add(self.at(plus[1]))
            .wrapping_add(self.at(plus[2]))
            .wrapping_add(self.at(plus[3]))
            .wrapping_sub(self.at(minus[0]))
            .wrapping_sub(self.at(minus[1]))
            .wrapping_sub(self.at(minus[2]))
            .wrapping_sub(self.at(minus[3]));
        sound & small & (count == 0)
    }

    /// [`Occupancy::is_clear`] for four boxes at once, box `k` in lane `k`
    /// of `lo` and `hi` (per axis): a bitmask of the clear ones. In lanes,
    /// a box's set-up takes a quarter of the instructions.
    #[inline(always)]
    pub fn are_clear(&self, lo: [Vec4; 3], hi: [Vec4; 3]) -> u32 {
        if self.table.is_empty() {
            return 0;
        }
        let mut sound = BVec4A::splat(true);
        let mut span = Vec4::ONE;
        let (mut a, mut b) = ([Vec4::ZERO; 3], [Vec4::ZERO; 3]);
        for k in 0..3 {
            // Finite and ordered: the extent is finite (an infinite or NaN
            // bound makes it infinite or NaN) and not negative.
            let extent = hi[k] - lo[k];
            sound &= extent.cmpge(Vec4::ZERO) & extent.cmplt(Vec4::INFINITY);
            let (first, past) = (self.cells_along(lo[k], k), self.cells_along(hi[k], k) + 1.0);
            span *= past - first;
            // Cell counts and table offsets are whole numbers below 2^24:
            // exact in f32, so the offsets are added in lanes too.
            a[k] = first * self.stride[k];
            b[k] = past * self.stride[k];
        }
        let small = span.cmplt(Vec4::splat(MAX_CELLS_ASKED as f32));
        let corner = |x: Vec4, y: Vec4, z: Vec4| truncate_lanes(x + y + z);
        let [ax, ay, az] = a;
        let [bx, by, bz] = b;
        let plus = [
            corner(bx, by, bz),
            corner(ax, ay, bz),
            corner(ax, by, az),
            corner(bx, ay, az),
        ];
        let minus = [
            corner(ax, by, bz),
            corner(bx, ay, bz),
            corner(bx, by, az),
            corner(ax, ay, az),
        ];
        let mut clear = 0;
        for lane in 0..4 {
            let count = self
                .at(plus[0][lane])
                .wrapping_add(self.at(plus[1][lane]))
                .wrapping_add(self.at(plus[2][lane]))
                .wrapping_add(self.at(plus[3][lane]))
                .wrapping_sub(self.at(minus[0][lane]))
                .wrapping_sub(self.at(minus[1][lane]))
                .wrapping_sub(self.at(minus[2][lane]))
                .wrapping_sub(self.at(minus[3][lane]));
            clear |= u32::from(count == 0) << lane;
        }
        (sound & small).bitmask() & clear
    }

    /// Per lane, the cell along `axis` holding `v` (its index, a whole
    /// number), clamped to the grid (a NaN lane becomes cell 0).
    #[inline(always)]
    fn cells_along(&self, v: Vec4, axis: usize) -> Vec4 {
        whole_lanes(clamp_lanes(
            (v - self.origin[axis]) * self.scale,
            self.last[axis],
        ))
    }

    /// Table entry `at`, an offset of a corner of cells from
    /// [`Occupancy::cells_along`].
    #[inline(always)]
    fn at(&self, at: u32) -> u16 {
        debug_assert!((at as usize) < self.table.len());
        // SAFETY: `cells_along` (and `is_clear`, alike) clamps each axis's
        // index to `0..cells` ([`clamp_lanes`] maps a NaN lane to 0 by
        // definition, not by a library's unspecified choice), and a corner is at most
        // one past it, so the offset is at most `cells.x + cells.y * row +
        // cells.z * slab`, the table's last entry. Checked, the eight
        // loads' compares and branches were a fifth of the first pass's
        // instructions.
        unsafe { *self.table.get_unchecked(at as usize) }
    }

    /// Cells per axis (zeros when empty).
    pub fn cells(&self) -> [u32; 3] {
        self.cells
    }

    /// The cell edge in units (0 when empty).
    pub fn cell_size(&self) -> f32 {
        self.cell_size
    }

    /// The table's size in bytes.
    pub fn bytes(&self) -> usize {
        std::mem::size_of_val(self.table.as_slice())
    }
}

/// Replaces each entry of a 3D array (`dims`, x fastest) by the sum of
/// those at or below it on all three axes, with `add`: along x within each
/// row, then each row plus the one before it, then each plane plus the one
/// before it (the last two over contiguous runs, which vectorize).
fn prefix_sums<T: Copy>(values: &mut [T], dims: [usize; 3], add: impl Fn(T, T) -> T) {
    let [nx, ny, _] = dims;
    let add_run = |to: &mut [T], from: &[T]| {
        for (t, &f) in to.iter_mut().zip(from) {
            *t = add(*t, f);
        }
    };
    for row in values.chunks_exact_mut(nx) {
        for x in 1..nx {
            row[x] = add(row[x], row[x - 1]);
        }
    }
    for plane in values.chunks_exact_mut(nx * ny) {
        for y in 1..ny {
            let (below, from_y) = plane.split_at_mut(y * nx);
            add_run(&mut from_y[..nx], &below[(y - 1) * nx..]);
        }
    }
    let plane = nx * ny;
    for z in 1..values.len() / plane.max(1) {
        let (below, from_z) = values.split_at_mut(z * plane);
        add_run(&mut from_z[..plane], &below[(z - 1) * plane..]);
    }
}

/// Each lane of `v` clamped to `0..=hi` (`hi` finite and at least 0); a
/// NaN lane becomes 0. On x86_64, `MAXPS` returns its second operand when
/// either is NaN (Intel's definition of the instruction), so `max(v, 0)`
/// holds no NaN and the `MINPS` after it compares numbers.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn clamp_lanes(v: Vec4, hi: Vec4) -> Vec4 {
    use std::arch::x86_64::{_mm_max_ps, _mm_min_ps, _mm_setzero_ps};
    // SAFETY: value-only SSE intrinsics (every x86_64 processor has SSE2).
    Vec4::from(unsafe { _mm_min_ps(_mm_max_ps(v.into(), _mm_setzero_ps()), hi.into()) })
}

/// Each lane of `v` clamped to `0..=hi`; a NaN lane becomes 0 (a lane that
/// is not at least 0, NaN included, is replaced by 0 before the minimum).
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn clamp_lanes(v: Vec4, hi: Vec4) -> Vec4 {
    Vec4::select(v.cmpge(Vec4::ZERO), v, Vec4::ZERO).min(hi)
}

/// `v` (lanes at least 0, below 2^24) rounded toward zero.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn whole_lanes(v: Vec4) -> Vec4 {
    use std::arch::x86_64::{_mm_cvtepi32_ps, _mm_cvttps_epi32};
    // SAFETY: value-only SSE2 intrinsics (every x86_64 processor has SSE2).
    // glam's `trunc` also handles lanes beyond 2^31, at twice the cost.
    Vec4::from(unsafe { _mm_cvtepi32_ps(_mm_cvttps_epi32(v.into())) })
}

/// `v` (lanes at least 0, below 2^24) rounded toward zero.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn whole_lanes(v: Vec4) -> Vec4 {
    v.trunc()
}

/// The lanes of `v` (whole numbers, at least 0, below 2^24) as integers
/// (unsigned: an offset widens to `usize` by zero extension, for free).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn truncate_lanes(v: Vec4) -> [u32; 4] {
    // One conversion for all lanes; `as` per lane adds range and NaN
    // fix-ups to each.
    // SAFETY: the intrinsic takes and returns values (no pointers) and needs
    // only SSE2, which every x86_64 processor has.
    bytemuck::cast(unsafe { std::arch::x86_64::_mm_cvttps_epi32(v.into()) })
}

/// The lanes of `v` (whole numbers, at least 0, below 2^24) as integers
/// (unsigned: an offset widens to `usize` by zero extension, for free).
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn truncate_lanes(v: Vec4) -> [u32; 4] {
    v.to_array().map(|x| x as u32)
}

/// `v`'s lanes as they are, the fourth unspecified (no shuffle to clear it).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn as_lanes(v: Vec3A) -> Vec4 {
    Vec4::from(std::arch::x86_64::__m128::from(v))
}

/// See the x86_64 version (here the fourth lane is 0).
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn as_lanes(v: Vec3A) -> Vec4 {
    v.extend(0.0)
}

/// Appends the bounds of every primitive lane of `nodes`.
fn leaf_bounds(nodes: &[BvhNode], out: &mut Vec<[Vec3A; 2]>) {
    for node in nodes {
        for lane in 0..WIDTH {
            let child = node.children[lane];
            if child == EMPTY_SLOT || child & PRIMITIVE == 0 {
                continue;
            }
            let min = Vec3A::new(node.min[0][lane], node.min[1][lane], node.min[2][lane]);
            let max = Vec3A::new(node.max[0][lane], node.max[1][lane], node.max[2][lane]);
            out.push([min, max]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastrand::Rng;

    fn random_box(rng: &mut Rng, extent: f32, size: f32) -> [Vec3A; 2] {
        let mut v = || (rng.f32() * 2.0 - 1.0) * extent;
        let a = Vec3A::new(v(), v(), v());
        let mut s = || rng.f32() * size;
        let b = a + Vec3A::new(s(), s(), s());
        [a, b]
    }

    /// `count` random boxes of up to `size` within 2000 units of the
    /// origin, and their grid.
    fn random_grid(rng: &mut Rng, count: usize, size: f32) -> (Vec<[Vec3A; 2]>, Occupancy) {
        let boxes: Vec<[Vec3A; 2]> = (0..count).map(|_| random_box(rng, 2000.0, size)).collect();
        let grid = Occupancy::of_boxes(&boxes);
        (boxes, grid)
    }

    /// The table counts exactly the cells some box reaches (against marking
    /// each box's cells one by one), and many world-sized boxes load fast.
    #[test]
    fn marks_exactly_the_cells_the_boxes_reach() {
        let mut rng = Rng::with_seed(0x5EED_0CC0_7A11_0001);
        let (boxes, grid) = random_grid(&mut rng, 300, 400.0);
        let [cx, cy, cz] = grid.cells().map(|n| n as usize);
        let mut marked = vec![false; cx * cy * cz];
        for &[a, b] in &boxes {
            let cell = |v: Vec3A, k: usize| grid.cells_along(Vec4::splat(v[k]), k).x as usize;
            for z in cell(a, 2)..=cell(b, 2) {
                for y in cell(a, 1)..=cell(b, 1) {
                    for x in cell(a, 0)..=cell(b, 0) {
                        marked[x + y * cx + z * cx * cy] = true;
                    }
                }
            }
        }
        for z in 0..cz {
            for y in 0..cy {
                for x in 0..cx {
                    let corner = |dx, dy, dz| {
                        let at = Vec4::new(
                            (x + dx) as f32 * grid.stride[0].x
                                + (y + dy) as f32 * grid.stride[1].x
                                + (z + dz) as f32 * grid.stride[2].x,
                            0.0,
                            0.0,
                            0.0,
                        );
                        grid.at(truncate_lanes(at)[0])
                    };
                    let count = corner(1, 1, 1)
                        .wrapping_sub(corner(0, 1, 1))
                        .wrapping_sub(corner(1, 0, 1))
                        .wrapping_sub(corner(1, 1, 0))
                        .wrapping_add(corner(0, 0, 1))
                        .wrapping_add(corner(0, 1, 0))
                        .wrapping_add(corner(1, 0, 0))
                        .wrapping_sub(corner(0, 0, 0));
                    assert_eq!(
                        count == 1,
                        marked[x + y * cx + z * cx * cy],
                        "cell {x} {y} {z}"
                    );
                }
            }
        }
        let huge = vec![[Vec3A::splat(-4000.0), Vec3A::splat(4000.0)]; 100_000];
        let grid = Occupancy::of_boxes(&huge);
        assert!(!grid.is_clear(Vec3A::ZERO, Vec3A::ONE));
        assert!(grid.is_clear(Vec3A::splat(5000.0), Vec3A::splat(5001.0)));
    }

    /// What cannot be told is never reported clear.
    #[test]
    fn unordered_infinite_and_huge_boxes_are_not_clear() {
        let grid = Occupancy::of_boxes(&[[Vec3A::ZERO, Vec3A::splat(10.0)]]);
        let far = Vec3A::splat(1000.0);
        assert!(grid.is_clear(far, far + 5.0));
        assert!(!grid.is_clear(far + 5.0, far));
        assert!(!grid.is_clear(far, Vec3A::new(f32::INFINITY, 1000.0, 1000.0)));
        assert!(!grid.is_clear(Vec3A::splat(f32::NAN), far));
        assert!(!Occupancy::EMPTY.is_clear(far, far + 5.0));
        assert!(Occupancy::of_boxes(&[]).table.is_empty());
        let unit = [Vec3A::ZERO, Vec3A::ONE];
        for bad in [
            [Vec3A::ONE, Vec3A::ZERO],
            [Vec3A::ZERO, Vec3A::splat(f32::NAN)],
            [Vec3A::splat(f32::NEG_INFINITY), Vec3A::ZERO],
        ] {
            assert!(
                Occupancy::of_boxes(&[unit, bad]).table.is_empty(),
                "{bad:?}"
            );
        }
        // Cells of the smallest edge: a box of 2^16 cells or more is not
        // clear even where nothing is.
        // (Enough boxes for a table of 32-unit cells.)
        let mut boxes = vec![[Vec3A::ZERO, Vec3A::splat(10.0)]; 600];
        boxes.push([Vec3A::splat(2000.0), Vec3A::splat(2010.0)]);
        let big = Occupancy::of_boxes(&boxes);
        assert_eq!(big.cell_size(), MIN_CELL);
        let wide = [Vec3A::splat(100.0), Vec3A::splat(1900.0)];
        let cells = ((wide[1] - wide[0]) / MIN_CELL).ceil();
        assert!(cells.x * cells.y * cells.z >= MAX_CELLS_ASKED as f32);
        assert!(!big.is_clear(wide[0], wide[1]));
    }

    /// A world too large for the table at the smallest cells gets larger
    /// ones, within the size limit.
    #[test]
    fn large_worlds_get_larger_cells() {
        let grid = Occupancy::of_boxes(&[
            [Vec3A::splat(-60000.0), Vec3A::splat(-59990.0)],
            [Vec3A::splat(60000.0), Vec3A::splat(60010.0)],
        ]);
        assert!(grid.cell_size() > MIN_CELL);
        assert!(
            grid.table.len() <= MIN_ENTRIES,
            "two boxes, the smallest table"
        );
        assert!(grid.is_clear(Vec3A::ZERO, Vec3A::splat(100.0)));
        assert!(!grid.is_clear(Vec3A::splat(60005.0), Vec3A::splat(60006.0)));
    }

    fn overlaps(a: &[Vec3A; 2], b: &[Vec3A; 2]) -> bool {
        a[0].cmple(b[1]).all() && b[0].cmple(a[1]).all()
    }

    /// A box reported clear overlaps no marked box (brute force), and most
    /// boxes far from everything are reported clear.
    #[test]
    fn clear_boxes_overlap_nothing() {
        let mut rng = Rng::with_seed(0x9E37_79B9_7F4A_7C15);
        for round in 0..20 {
            let count = 1 + round * 10;
            let boxes: Vec<[Vec3A; 2]> = (0..count)
                .map(|_| random_box(&mut rng, 3000.0, 200.0))
                .collect();
            let grid = Occupancy::of_boxes(&boxes);
            assert!(grid.bytes() > 0);
            let mut far_clear = 0;
            for _ in 0..2000 {
                let asked = random_box(&mut rng, 4000.0, 300.0);
                let hit = boxes.iter().any(|b| overlaps(b, &asked));
                if grid.is_clear(asked[0], asked[1]) {
                    assert!(!hit, "{asked:?} reported clear but overlaps a box");
                }
                let shifted = [asked[0] + 1e5, asked[1] + 1e5];
                far_clear += usize::from(grid.is_clear(shifted[0], shifted[1]));
            }
            assert_eq!(far_clear, 2000, "boxes outside the grid are clear");
        }
    }

    /// The one-box test and the four-box test give the same answer for
    /// every box: near and far, touching, inverted, not finite, huge.
    #[test]
    fn one_box_and_four_boxes_agree() {
        let mut rng = Rng::with_seed(0x0B0E_5A1D_F00D_0004);
        let (boxes, grid) = random_grid(&mut rng, 200, 150.0);
        let mut asked: Vec<[Vec3A; 2]> = (0..4000)
            .map(|i| random_box(&mut rng, 2500.0, [1.0, 60.0, 400.0, 3000.0][i % 4]))
            .collect();
        // Boxes ending exactly on a marked box's faces, and broken ones.
        asked.extend(boxes.iter().map(|&[_, b]| [b, b + 10.0]));
        asked.extend(boxes.iter().map(|&[a, _]| [a - 10.0, a]));
        asked.extend([
            [Vec3A::splat(10.0), Vec3A::splat(5.0)],
            [Vec3A::splat(f32::NAN), Vec3A::ONE],
            [Vec3A::ZERO, Vec3A::splat(f32::INFINITY)],
            [Vec3A::splat(-1e30), Vec3A::splat(1e30)],
            [Vec3A::splat(1e30), Vec3A::splat(1e30)],
        ]);
        let mut clear = 0;
        for four in asked.chunks(4) {
            let lane = |k: usize, axis: usize, end: usize| four[k.min(four.len() - 1)][end][axis];
            let lanes = |end: usize| {
                [0, 1, 2].map(|axis| {
                    Vec4::new(
                        lane(0, axis, end),
                        lane(1, axis, end),
                        lane(2, axis, end),
                        lane(3, axis, end),
                    )
                })
            };
            let together = grid.are_clear(lanes(0), lanes(1));
            for (k, [lo, hi]) in four.iter().enumerate() {
                let alone = grid.is_clear(*lo, *hi);
                assert_eq!(alone, together >> k & 1 != 0, "{lo:?}..{hi:?}");
                clear += usize::from(alone);
            }
        }
        assert!(clear > asked.len() / 10, "{clear} of {} clear", asked.len());
    }

    /// Boxes that share only a face or a corner with a marked box overlap
    /// it, and are reported as such.
    #[test]
    fn touching_boxes_are_not_clear() {
        let marked: [Vec3A; 2] = [Vec3A::new(10.0, 20.0, 30.0), Vec3A::new(64.0, 96.0, 128.0)];
        let grid = Occupancy::of_boxes(&[marked]);
        let above = [Vec3A::new(64.0, 96.0, 128.0), Vec3A::splat(500.0)];
        let below = [Vec3A::splat(-500.0), Vec3A::new(10.0, 20.0, 30.0)];
        assert!(!grid.is_clear(above[0], above[1]));
        assert!(!grid.is_clear(below[0], below[1]));
        let far = [Vec3A::new(200.0, 0.0, 0.0), Vec3A::splat(500.0)];
        assert!(grid.is_clear(far[0], far[1]));
    }
}
