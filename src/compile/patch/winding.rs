//! Convex polygons in f32, as the reference's patch code uses them: a facet's
//! polygon is a huge square on its surface plane chopped by its borders. Its
//! bounds become the axial bevels, so the arithmetic follows the reference.

use super::planes::{dot, normalize};
use super::{MAX_MAP_BOUNDS, MAX_WINDING_POINTS};
use crate::math::Vec3;

#[derive(Debug, Clone, PartialEq)]
pub(super) struct FacetWinding {
    pub points: Vec<Vec3>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Front,
    Back,
    On,
}

impl FacetWinding {
    /// A square of half-size [`MAX_MAP_BOUNDS`] on the plane `normal · p = dist`.
    pub fn base_for_plane(normal: Vec3, dist: f32) -> Option<FacetWinding> {
        // The major axis (first of equals) decides the square's orientation.
        let mut best = -MAX_MAP_BOUNDS;
        let mut axis = None;
        for k in 0..3 {
            let v = normal[k].abs();
            if v > best {
                best = v;
                axis = Some(k);
            }
        }
        let mut up = match axis? {
            0 | 1 => Vec3::Z,
            _ => Vec3::X,
        };
        let v = dot(up, normal);
        up += normal * -v;
        normalize(&mut up);
        let origin = normal * dist;
        let right = up.cross(normal) * MAX_MAP_BOUNDS;
        let up = up * MAX_MAP_BOUNDS;
        Some(FacetWinding {
            points: vec![
                (origin - right) + up,
                (origin + right) + up,
                (origin + right) - up,
                (origin - right) - up,
            ],
        })
    }

    /// Keeps the part in front of `normal · p = dist` (points within
    /// `epsilon` count as on it). `None` when no point is in front, or the
    /// polygon grows beyond [`MAX_WINDING_POINTS`].
    pub fn chop(self, normal: Vec3, dist: f32, epsilon: f32) -> Option<FacetWinding> {
        let n = self.points.len();
        let dists: Vec<f32> = self.points.iter().map(|p| dot(*p, normal) - dist).collect();
        let sides: Vec<Side> = dists
            .iter()
            .map(|&d| {
                if d > epsilon {
                    Side::Front
                } else if d < -epsilon {
                    Side::Back
                } else {
                    Side::On
                }
            })
            .collect();
        if !sides.contains(&Side::Front) {
            return None;
        }
        if !sides.contains(&Side::Back) {
            return Some(self);
        }
        let mut out = Vec::with_capacity(n + 4);
        for i in 0..n {
            let p = self.points[i];
            match sides[i] {
                Side::On => {
                    out.push(p);
                    continue;
                }
                Side::Front => out.push(p),
                Side::Back => {}
            }
            let j = (i + 1) % n;
            if sides[j] == Side::On || sides[j] == sides[i] {
                continue;
            }
            let q = self.points[j];
            let t = dists[i] / (dists[i] - dists[j]);
            let mut mid = Vec3::ZERO;
            for k in 0..3 {
                // Axial planes keep their coordinate exact.
                mid[k] = if normal[k] == 1.0 {
                    dist
                } else if normal[k] == -1.0 {
                    -dist
                } else {
                    p[k] + t * (q[k] - p[k])
                };
            }
            out.push(mid);
        }
        (out.len() <= MAX_WINDING_POINTS).then_some(FacetWinding { points: out })
    }

    /// Bounds, starting from the reference's ±[`MAX_MAP_BOUNDS`] box.
    pub fn bounds(&self) -> (Vec3, Vec3) {
        let mut lo = Vec3::splat(MAX_MAP_BOUNDS);
        let mut hi = Vec3::splat(-MAX_MAP_BOUNDS);
        for p in &self.points {
            for k in 0..3 {
                if p[k] < lo[k] {
                    lo[k] = p[k];
                }
                if p[k] > hi[k] {
                    hi[k] = p[k];
                }
            }
        }
        (lo, hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_square_is_on_its_plane_and_chops() {
        let w = FacetWinding::base_for_plane(Vec3::Z, 8.0).expect("winding");
        assert!(w.points.iter().all(|p| p.z == 8.0));
        let w = w.chop(-Vec3::X, -16.0, 0.1).expect("front part");
        let w = w.chop(Vec3::X, -16.0, 0.1).expect("front part");
        let (lo, hi) = w.bounds();
        assert_eq!((lo.x, hi.x), (-16.0, 16.0));
        assert!(w.chop(Vec3::Z, 8.0, 0.1).is_none());
    }
}
