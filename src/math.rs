//! Vectors and the compiler's polygons (windings); every epsilon is in
//! [`crate::margins`].

pub use glam::Vec3;
use glam::{BVec4A, Vec3A, Vec4};

/// Half the size of the box the compiler starts from: everything of interest
/// lies inside it (Quake's maps are bounded by ±65536).
pub const WORLD_HALF_EXTENT: f64 = 131072.0;

/// A 3-vector in `f64`, used by the compiler where robustness matters more than speed.
pub type DVec3 = glam::DVec3;

/// A convex polygon (compiler-side, f64).
#[derive(Debug, Clone, Default)]
pub struct Winding {
    pub points: Vec<DVec3>,
}

/// Which side of a plane something lies on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Front,
    Back,
    On,
    Cross,
}

impl Winding {
    /// A huge square lying on the plane `normal · p = dist`.
    pub fn base_for_plane(normal: DVec3, dist: f64) -> Winding {
        // Pick the major axis, then build two in-plane axes from it.
        let ax = normal.abs();
        let up = if ax.z >= ax.x && ax.z >= ax.y {
            DVec3::X
        } else {
            DVec3::Z
        };
        let up = (up - normal * up.dot(normal)).normalize();
        let right = up.cross(normal);
        let origin = normal * dist;
        let up = up * WORLD_HALF_EXTENT * 4.0;
        let right = right * WORLD_HALF_EXTENT * 4.0;
        Winding {
            points: vec![
                origin - right + up,
                origin + right + up,
                origin + right - up,
                origin - right - up,
            ],
        }
    }

    pub fn is_empty(&self) -> bool {
        self.points.len() < 3
    }

    /// Keeps the part behind `normal · p = dist` (within `epsilon`), returning
    /// `false` when nothing is left.
    pub fn clip_back(&mut self, normal: DVec3, dist: f64, epsilon: f64) -> bool {
        let (_, back) = self.split(normal, dist, epsilon);
        *self = back;
        !self.is_empty()
    }

    /// Splits into the parts in front of and behind the plane. Points within
    /// `epsilon` of the plane go to both sides.
    pub fn split(&self, normal: DVec3, dist: f64, epsilon: f64) -> (Winding, Winding) {
        let dists: Vec<f64> = self.points.iter().map(|p| p.dot(normal) - dist).collect();
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
        let any_front = sides.contains(&Side::Front);
        let any_back = sides.contains(&Side::Back);
        if !any_front && !any_back {
            // Coplanar: belongs to the side the polygon faces; callers decide.
            return (Winding::default(), Winding::default());
        }
        if !any_front {
            return (Winding::default(), self.clone());
        }
        if !any_back {
            return (self.clone(), Winding::default());
        }
        let mut front = Vec::with_capacity(self.points.len() + 2);
        let mut back = Vec::with_capacity(self.points.len() + 2);
        let n = self.points.len();
        for i in 0..n {
            let p = self.points[i];
            match sides[i] {
                Side::On => {
                    front.push(p);
                    back.push(p);
                    continue;
                }
                Side::Front => front.push(p),
                Side::Back => back.push(p),
                Side::Cross => {}
            }
            let j = (i + 1) % n;
            if sides[j] == Side::On || sides[j] == sides[i] {
                continue;
            }
            let t = dists[i] / (dists[i] - dists[j]);
            let q = self.points[j];
            // Snap exact axis-aligned components so axial splits stay exact.
            let mut mid = p + (q - p) * t;
            for k in 0..3 {
                if normal[k] == 1.0 {
                    mid[k] = dist;
                } else if normal[k] == -1.0 {
                    mid[k] = -dist;
                }
            }
            front.push(mid);
            back.push(mid);
        }
        (Winding { points: front }, Winding { points: back })
    }

    pub fn bounds(&self) -> (DVec3, DVec3) {
        let mut lo = DVec3::splat(f64::INFINITY);
        let mut hi = DVec3::splat(f64::NEG_INFINITY);
        for p in &self.points {
            lo = lo.min(*p);
            hi = hi.max(*p);
        }
        (lo, hi)
    }
}

/// Converts an f32 vector to f64.
pub fn dvec(v: Vec3) -> DVec3 {
    DVec3::new(v.x as f64, v.y as f64, v.z as f64)
}

/// Each component of `v` in all four lanes of its own vector (the per-axis
/// constants of a four-lane test).
#[inline(always)]
pub fn splat_axes(v: Vec3A) -> [Vec4; 3] {
    [Vec4::splat(v.x), Vec4::splat(v.y), Vec4::splat(v.z)]
}

/// The lanes whose bit is set in `bits` (bit `i`: lane `i`), as a mask.
#[inline(always)]
pub fn lanes_of(bits: u32) -> BVec4A {
    BVec4A::new(bits & 1 != 0, bits & 2 != 0, bits & 4 != 0, bits & 8 != 0)
}

/// A direction drawn uniformly over the unit sphere (by rejection from the
/// cube, so the same generator state gives the same direction everywhere:
/// the sampled moves of a world's grid choice and `bspq workload`'s files).
pub fn random_direction(rng: &mut fastrand::Rng) -> Vec3 {
    loop {
        let v = Vec3::new(rng.f32(), rng.f32(), rng.f32()) * 2.0 - Vec3::ONE;
        let length = v.length();
        if length > 1e-3 && length <= 1.0 {
            return v / length;
        }
    }
}
