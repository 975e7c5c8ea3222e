//! The plane list of one patch collide. Planes are `[nx, ny, nz, dist]` in
//! f32 and are shared: a new plane that matches an existing one (within the
//! reference's epsilons) reuses it, so which planes exist, and their exact
//! values, depend on the order of the requests, as in the reference.

use super::MAX_PATCH_PLANES;
use crate::margins::{PATCH_DIST_EPSILON, PATCH_NORMAL_EPSILON, PATCH_PLANE_TRI_EPSILON};
use crate::math::Vec3;

pub(super) type PlaneEq = [f32; 4];

/// The plane list is full: the patch is too complex to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TooManyPlanes;

/// Where a point lies relative to a plane, with [`PATCH_PLANE_TRI_EPSILON`] thickness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    Front,
    Back,
    On,
}

#[derive(Debug, Clone, Default)]
pub(super) struct PlaneList {
    pub planes: Vec<PlaneEq>,
}

pub(super) fn normal(p: &PlaneEq) -> Vec3 {
    Vec3::new(p[0], p[1], p[2])
}

/// `a · b` summed left to right in f32, as the reference does.
pub(super) fn dot(a: Vec3, b: Vec3) -> f32 {
    a.x * b.x + a.y * b.y + a.z * b.z
}

/// Normalises `v` in place the reference's way (multiply by the rounded
/// reciprocal of the length) and returns the length (0 leaves `v` as is).
pub(super) fn normalize(v: &mut Vec3) -> f32 {
    let len = dot(*v, *v).sqrt();
    if len != 0.0 {
        let inv = 1.0 / len;
        *v *= inv;
    }
    len
}

/// Bit `k` set when normal component `k` is negative.
pub(super) fn sign_bits(p: &PlaneEq) -> u32 {
    (0..3).filter(|&k| p[k] < 0.0).map(|k| 1u32 << k).sum()
}

pub(super) fn flipped(p: &PlaneEq) -> PlaneEq {
    [-p[0], -p[1], -p[2], -p[3]]
}

/// The plane through `a`, `b`, `c` facing the side from which they run
/// clockwise; `None` when they are collinear.
pub(super) fn plane_from_points(a: Vec3, b: Vec3, c: Vec3) -> Option<PlaneEq> {
    let d1 = b - a;
    let d2 = c - a;
    let mut n = d2.cross(d1);
    if normalize(&mut n) == 0.0 {
        return None;
    }
    Some([n.x, n.y, n.z, dot(a, n)])
}

/// `Some(flipped)` when `q` equals `p` or its opposite within the epsilons.
pub(super) fn plane_equal(p: &PlaneEq, q: &PlaneEq) -> Option<bool> {
    let close = |q: &PlaneEq| {
        (0..3).all(|k| ((p[k] - q[k]) as f64).abs() < PATCH_NORMAL_EPSILON)
            && ((p[3] - q[3]) as f64).abs() < PATCH_DIST_EPSILON
    };
    if close(q) {
        Some(false)
    } else if close(&flipped(q)) {
        Some(true)
    } else {
        None
    }
}

/// Signed distance of `p` from `plane` (f32).
pub(super) fn distance(plane: &PlaneEq, p: Vec3) -> f32 {
    dot(p, normal(plane)) - plane[3]
}

impl PlaneList {
    pub fn get(&self, index: usize) -> PlaneEq {
        self.planes[index]
    }

    fn push(&mut self, plane: PlaneEq) -> Result<usize, TooManyPlanes> {
        if self.planes.len() >= MAX_PATCH_PLANES {
            return Err(TooManyPlanes);
        }
        self.planes.push(plane);
        Ok(self.planes.len() - 1)
    }

    /// The plane of triangle `p1 p2 p3`: an existing plane facing the same
    /// way that passes within [`PATCH_PLANE_TRI_EPSILON`] of all three points, or a
    /// new one. `Ok(None)` for a degenerate triangle.
    pub fn triangle_plane(
        &mut self,
        p1: Vec3,
        p2: Vec3,
        p3: Vec3,
    ) -> Result<Option<usize>, TooManyPlanes> {
        let Some(plane) = plane_from_points(p1, p2, p3) else {
            return Ok(None);
        };
        let near = |q: &PlaneEq, p: Vec3| (distance(q, p) as f64).abs() <= PATCH_PLANE_TRI_EPSILON;
        let found = self.planes.iter().position(|q| {
            dot(normal(&plane), normal(q)) >= 0.0 && near(q, p1) && near(q, p2) && near(q, p3)
        });
        match found {
            Some(i) => Ok(Some(i)),
            None => self.push(plane).map(Some),
        }
    }

    /// An existing plane equal to `plane` or to its opposite (`flipped` tells
    /// which), or `plane` added.
    pub fn find(&mut self, plane: &PlaneEq) -> Result<(usize, bool), TooManyPlanes> {
        for (i, q) in self.planes.iter().enumerate() {
            if let Some(flip) = plane_equal(q, plane) {
                return Ok((i, flip));
            }
        }
        self.push(*plane).map(|i| (i, false))
    }

    /// Side of `p` relative to plane `index`; a missing plane has everything on it.
    pub fn side(&self, p: Vec3, index: Option<usize>) -> Side {
        let Some(index) = index else {
            return Side::On;
        };
        let d = distance(&self.planes[index], p) as f64;
        if d > PATCH_PLANE_TRI_EPSILON {
            Side::Front
        } else if d < -PATCH_PLANE_TRI_EPSILON {
            Side::Back
        } else {
            Side::On
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triangle_plane_faces_up_for_clockwise_from_above() {
        let mut list = PlaneList::default();
        let a = Vec3::new(0.0, 0.0, 8.0);
        let b = Vec3::new(32.0, 0.0, 8.0);
        let c = Vec3::new(32.0, 32.0, 8.0);
        let i = list.triangle_plane(a, b, c).unwrap().unwrap();
        assert_eq!(list.get(i), [0.0, 0.0, -1.0, -8.0]);
        // The other triangle of the square reuses it.
        let j = list
            .triangle_plane(c, Vec3::new(0.0, 32.0, 8.0), a)
            .unwrap();
        assert_eq!(j, Some(i));
        assert_eq!(list.triangle_plane(a, a, b).unwrap(), None);
    }

    #[test]
    fn find_matches_opposites() {
        let mut list = PlaneList::default();
        let p = [1.0, 0.0, 0.0, 5.0];
        assert_eq!(list.find(&p).unwrap(), (0, false));
        assert_eq!(list.find(&flipped(&p)).unwrap(), (0, true));
        assert_eq!(list.find(&[1.0, 0.0, 0.0, 5.01]).unwrap(), (0, false));
        assert_eq!(list.find(&[1.0, 0.0, 0.0, 5.05]).unwrap(), (1, false));
    }
}
