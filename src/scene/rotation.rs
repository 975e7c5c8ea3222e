//! Rotations of inline models by Quake 3's Euler angles (pitch, yaw, roll in
//! degrees), in the reference's float arithmetic: a move is rotated into the
//! model's frame by the rows forward, left and up, and a hit normal is
//! rotated back by the transpose.

use crate::math::Vec3;

/// The three rows that take a world-frame vector into a model's frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rotation {
    rows: [Vec3; 3],
}

impl Rotation {
    /// The rotation for `angles` (pitch, yaw, roll, degrees); `None` when all
    /// three are zero, as the reference then does not rotate at all.
    pub fn of(angles: Vec3) -> Option<Rotation> {
        if angles == Vec3::ZERO {
            return None;
        }
        let (forward, right, up) = angle_vectors(angles);
        Some(Rotation {
            rows: [forward, -right, up],
        })
    }

    /// `v` in the rotated frame: its dot product with each row.
    pub fn apply(&self, v: Vec3) -> Vec3 {
        Vec3::new(
            self.rows[0].dot(v),
            self.rows[1].dot(v),
            self.rows[2].dot(v),
        )
    }

    /// `v` back out of the rotated frame: by the transposed rows.
    pub fn unapply(&self, v: Vec3) -> Vec3 {
        let [a, b, c] = self.rows;
        Vec3::new(
            Vec3::new(a.x, b.x, c.x).dot(v),
            Vec3::new(a.y, b.y, c.y).dot(v),
            Vec3::new(a.z, b.z, c.z).dot(v),
        )
    }
}

/// Forward, right and up for Euler angles in degrees. As the reference
/// keeps them: the angle in radians rounded to `f32`, each sine and cosine
/// taken in `f64` and rounded to `f32`, the products in `f32`.
fn angle_vectors(angles: Vec3) -> (Vec3, Vec3, Vec3) {
    let sin_cos = |degrees: f32| {
        let radians = (f64::from(degrees) * (std::f64::consts::PI * 2.0 / 360.0)) as f32;
        let radians = f64::from(radians);
        (radians.sin() as f32, radians.cos() as f32)
    };
    let (sp, cp) = sin_cos(angles.x);
    let (sy, cy) = sin_cos(angles.y);
    let (sr, cr) = sin_cos(angles.z);
    let forward = Vec3::new(cp * cy, cp * sy, -sp);
    let right = Vec3::new(-sr * sp * cy + cr * sy, -sr * sp * sy - cr * cy, -sr * cp);
    let up = Vec3::new(cr * sp * cy + sr * sy, cr * sp * sy - sr * cy, cr * cp);
    (forward, right, up)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Vec3, b: Vec3) -> bool {
        (a - b).abs().max_element() < 1e-6
    }

    #[test]
    fn a_yaw_turns_about_z_into_the_models_frame() {
        let quarter = Rotation::of(Vec3::new(0.0, 90.0, 0.0)).unwrap();
        // A model yawed 90° has its +x along the world's +y.
        assert!(close(quarter.apply(Vec3::Y), Vec3::X));
        assert!(close(quarter.apply(Vec3::X), -Vec3::Y));
        assert!(close(quarter.apply(Vec3::Z), Vec3::Z));
    }

    #[test]
    fn unapply_undoes_apply() {
        for angles in [
            Vec3::new(30.0, 0.0, 0.0),
            Vec3::new(0.0, -75.0, 0.0),
            Vec3::new(-23.375, -100.015625, -27.1875),
        ] {
            let r = Rotation::of(angles).unwrap();
            let v = Vec3::new(0.3, -0.5, 0.8);
            assert!(close(r.unapply(r.apply(v)), v), "{angles}");
        }
    }

    #[test]
    fn rows_are_orthonormal() {
        let r = Rotation::of(Vec3::new(-10.0, 59.0625, 33.0)).unwrap();
        for (i, a) in r.rows.iter().enumerate() {
            assert!((a.length() - 1.0).abs() < 1e-6);
            for b in &r.rows[i + 1..] {
                assert!(a.dot(*b).abs() < 1e-6);
            }
        }
    }

    #[test]
    fn zero_angles_do_not_rotate() {
        assert_eq!(Rotation::of(Vec3::ZERO), None);
    }
}
