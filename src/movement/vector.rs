//! Vector arithmetic as the game performs it: `f32`, each component on its
//! own, sums left to right. glam's own operations may vectorise or reorder
//! a dot product; the movement's thresholds (0.1, 0.99, 0.7) and its many
//! chained frames are where a last bit can tip a decision, so the movement
//! uses these.

use crate::math::Vec3;

#[inline]
pub(super) fn dot(a: Vec3, b: Vec3) -> f32 {
    a.x * b.x + a.y * b.y + a.z * b.z
}

#[inline]
pub(super) fn cross(a: Vec3, b: Vec3) -> Vec3 {
    Vec3::new(
        a.y * b.z - a.z * b.y,
        a.z * b.x - a.x * b.z,
        a.x * b.y - a.y * b.x,
    )
}

/// `v` scaled to unit length; zero stays zero.
#[inline]
pub(super) fn normalized(v: Vec3) -> Vec3 {
    let length = dot(v, v).sqrt();
    if length == 0.0 {
        return Vec3::ZERO;
    }
    let inverse = 1.0 / length;
    Vec3::new(v.x * inverse, v.y * inverse, v.z * inverse)
}

/// `v`'s length.
#[inline]
pub(super) fn length(v: Vec3) -> f32 {
    dot(v, v).sqrt()
}

/// `origin + scale · v`, component by component.
#[inline]
pub(super) fn advanced(origin: Vec3, scale: f32, v: Vec3) -> Vec3 {
    Vec3::new(
        origin.x + scale * v.x,
        origin.y + scale * v.y,
        origin.z + scale * v.z,
    )
}

/// `v · scale`, component by component.
#[inline]
pub(super) fn scaled(v: Vec3, scale: f32) -> Vec3 {
    Vec3::new(v.x * scale, v.y * scale, v.z * scale)
}

/// `velocity` with its component into `normal` removed, and pushed out by
/// [`super::OVERCLIP`]: a little more when it goes into the plane, a
/// little less when it already leaves it.
#[inline]
pub(super) fn clip_velocity(velocity: Vec3, normal: Vec3) -> Vec3 {
    let mut into = dot(velocity, normal);
    if into < 0.0 {
        into *= super::OVERCLIP;
    } else {
        into /= super::OVERCLIP;
    }
    Vec3::new(
        velocity.x - normal.x * into,
        velocity.y - normal.y * into,
        velocity.z - normal.z * into,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clipped_velocity_leaves_the_plane_a_little() {
        let v = clip_velocity(Vec3::new(100.0, 0.0, -50.0), Vec3::Z);
        assert_eq!(v.x, 100.0);
        assert!(v.z > 0.0 && v.z < 0.1, "{v}");
    }

    #[test]
    fn zero_normalises_to_zero() {
        assert_eq!(normalized(Vec3::ZERO), Vec3::ZERO);
        assert_eq!(
            normalized(Vec3::new(0.0, 3.0, 4.0)),
            Vec3::new(0.0, 0.6, 0.8)
        );
    }
}
