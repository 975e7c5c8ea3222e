//! Refining a patch's control grid into a grid of points on the curve: a
//! column of approximating control points is replaced by points on the
//! curve where the curve bends away from its chord, or dropped where it does
//! not; duplicate columns go; then the same for rows.

use super::{MAX_GRID_SIDE, SUBDIVIDE_DISTANCE};
use crate::margins::{PATCH_POINT_EPSILON, PATCH_WRAP_EPSILON};
use crate::math::Vec3;

/// A grid of points stored by columns: `columns[i][j]` is column `i` (along
/// the width), row `j`. Every column has `height()` points.
#[derive(Debug, Clone)]
pub(super) struct Grid {
    columns: Vec<Vec<Vec3>>,
    /// The first and last columns coincide (the surface closes on itself).
    pub wrap_width: bool,
    pub wrap_height: bool,
}

impl Grid {
    /// The control grid (`points` row-major, `width` per row) refined to
    /// points on the curve. `None` when the sizes disagree or the refined
    /// grid would exceed [`MAX_GRID_SIDE`] points along a side.
    pub fn refined(width: usize, height: usize, points: &[Vec3]) -> Option<Grid> {
        if width < 3 || height < 3 || width > MAX_GRID_SIDE || height > MAX_GRID_SIDE {
            return None;
        }
        if width.checked_mul(height)? != points.len() {
            return None;
        }
        let columns = (0..width)
            .map(|i| (0..height).map(|j| points[j * width + i]).collect())
            .collect();
        let mut grid = Grid {
            columns,
            wrap_width: false,
            wrap_height: false,
        };
        grid.wrap_width = grid.first_and_last_columns_meet();
        grid.subdivide_columns()?;
        grid.remove_degenerate_columns();
        grid.transpose();
        grid.wrap_width = grid.first_and_last_columns_meet();
        grid.subdivide_columns()?;
        grid.remove_degenerate_columns();
        Some(grid)
    }

    pub fn width(&self) -> usize {
        self.columns.len()
    }

    pub fn height(&self) -> usize {
        self.columns.first().map_or(0, Vec::len)
    }

    /// Point at column `i`, row `j` (callers stay inside the grid).
    pub fn point(&self, i: usize, j: usize) -> Vec3 {
        self.columns[i][j]
    }

    pub fn bounds(&self) -> (Vec3, Vec3) {
        let mut lo = Vec3::splat(f32::INFINITY);
        let mut hi = Vec3::splat(f32::NEG_INFINITY);
        for p in self.columns.iter().flatten() {
            lo = lo.min(*p);
            hi = hi.max(*p);
        }
        (lo, hi)
    }

    fn first_and_last_columns_meet(&self) -> bool {
        let (Some(first), Some(last)) = (self.columns.first(), self.columns.last()) else {
            return false;
        };
        first
            .iter()
            .zip(last)
            .all(|(a, b)| within(*a, *b, PATCH_WRAP_EPSILON))
    }

    /// Walks the curve segments (interpolating column `i`, approximating
    /// `i + 1`, interpolating `i + 2`): a segment that is straight enough in
    /// every row loses its approximating column; otherwise it is split in two
    /// at its midpoint and the first half is examined again.
    fn subdivide_columns(&mut self) -> Option<()> {
        let mut i = 0;
        while i + 2 < self.columns.len() {
            let (a, b, c) = (&self.columns[i], &self.columns[i + 1], &self.columns[i + 2]);
            let bends = a
                .iter()
                .zip(b)
                .zip(c)
                .any(|((a, b), c)| needs_subdivision(*a, *b, *c));
            if !bends {
                self.columns.remove(i + 1);
                i += 1;
                continue;
            }
            if self.columns.len() + 2 > MAX_GRID_SIDE {
                return None;
            }
            let mut left = Vec::with_capacity(a.len());
            let mut middle = Vec::with_capacity(a.len());
            let mut right = Vec::with_capacity(a.len());
            for ((a, b), c) in a.iter().zip(b).zip(c) {
                let l = (*a + *b) * 0.5;
                let r = (*b + *c) * 0.5;
                left.push(l);
                middle.push((l + r) * 0.5);
                right.push(r);
            }
            self.columns[i + 1] = left;
            self.columns.insert(i + 2, middle);
            self.columns.insert(i + 3, right);
        }
        Some(())
    }

    /// Drops every column that repeats its left neighbour.
    fn remove_degenerate_columns(&mut self) {
        let mut i = 0;
        while i + 1 < self.columns.len() {
            let same = self.columns[i]
                .iter()
                .zip(&self.columns[i + 1])
                .all(|(a, b)| within(*a, *b, PATCH_POINT_EPSILON));
            if same {
                self.columns.remove(i + 1);
            } else {
                i += 1;
            }
        }
    }

    fn transpose(&mut self) {
        let height = self.height();
        let rows = (0..height)
            .map(|j| self.columns.iter().map(|c| c[j]).collect())
            .collect();
        self.columns = rows;
        std::mem::swap(&mut self.wrap_width, &mut self.wrap_height);
    }
}

/// Every component of `a - b` (in f32) within `epsilon`.
fn within(a: Vec3, b: Vec3, epsilon: f64) -> bool {
    (0..3).all(|k| ((a[k] - b[k]) as f64).abs() <= epsilon)
}

/// Whether the quadratic curve through `a`, `b`, `c` (control points) bends
/// far enough from the straight line `a`–`c` to need more points.
fn needs_subdivision(a: Vec3, b: Vec3, c: Vec3) -> bool {
    let mut delta = Vec3::ZERO;
    for k in 0..3 {
        let linear = (a[k] + c[k]) * 0.5;
        // The reference forms the curve midpoint in double precision.
        let curve = ((0.5 * (a[k] + b[k]) as f64 + 0.5 * (b[k] + c[k]) as f64) * 0.5) as f32;
        delta[k] = curve - linear;
    }
    delta.length() >= SUBDIVIDE_DISTANCE
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(width: usize, height: usize) -> Vec<Vec3> {
        (0..height)
            .flat_map(|j| (0..width).map(move |i| Vec3::new(i as f32 * 32.0, j as f32 * 32.0, 0.0)))
            .collect()
    }

    #[test]
    fn flat_grid_keeps_only_interpolating_points() {
        // Columns then rows lose their approximating points; the grid ends
        // up transposed (width runs along the control rows).
        let g = Grid::refined(5, 3, &flat(5, 3)).expect("grid");
        assert_eq!((g.width(), g.height()), (2, 3));
        assert_eq!(g.point(1, 2), Vec3::new(128.0, 64.0, 0.0));
        assert_eq!(g.point(0, 1), Vec3::new(64.0, 0.0, 0.0));
        assert!(!g.wrap_width && !g.wrap_height);
    }

    #[test]
    fn bent_grid_is_subdivided() {
        // A quarter-ish arch along the width: the middle column bulges by 64.
        let mut pts = flat(3, 3);
        for j in 0..3 {
            pts[j * 3 + 1].z = 128.0;
        }
        let g = Grid::refined(3, 3, &pts).expect("grid");
        // Transposed: the bent direction is now the height.
        assert!(g.height() > 3, "height {}", g.height());
        assert_eq!(g.width(), 2);
        // The middle point lies on the curve: half of the control bulge.
        let mid = g.height() / 2;
        assert_eq!(g.point(0, mid).z, 64.0);
    }

    #[test]
    fn closed_grids_wrap_and_runaway_curves_are_rejected() {
        // A ring: the first and last columns coincide.
        let ring = [
            (64.0, 0.0),
            (64.0, 64.0),
            (0.0, 64.0),
            (-64.0, 64.0),
            (-64.0, 0.0),
            (-64.0, -64.0),
            (0.0, -64.0),
            (64.0, -64.0),
            (64.0, 0.0),
        ];
        let pts: Vec<Vec3> = (0..3)
            .flat_map(|j| {
                ring.iter()
                    .map(move |&(x, y)| Vec3::new(x, y, j as f32 * 32.0))
            })
            .collect();
        let g = Grid::refined(9, 3, &pts).expect("grid");
        assert!(g.wrap_height && !g.wrap_width);
        // A bulge so large that the grid would pass 129 points.
        let mut pts = flat(3, 3);
        pts[1].z = 1.0e7;
        assert!(Grid::refined(3, 3, &pts).is_none());
        // Every point the same: one point left.
        let g = Grid::refined(3, 3, &[Vec3::ONE; 9]).expect("grid");
        assert_eq!((g.width(), g.height()), (1, 1));
    }

    #[test]
    fn mismatched_sizes_are_rejected() {
        assert!(Grid::refined(3, 3, &flat(3, 2)).is_none());
        assert!(Grid::refined(1, 3, &flat(1, 3)).is_none());
    }
}
