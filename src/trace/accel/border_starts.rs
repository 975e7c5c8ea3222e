//! Where a ray meets a patch facet outside the facet: a ray starting
//! exactly on a facet's border plane crosses it at fraction 0, which the
//! border test (`trace::patch`, like the reference's) counts as never, so
//! the ray meets the facet wherever the surface plane crosses it, far
//! outside the bounds the fast trace searches by. Such rays go to the walk.
//! On an axial border that takes one coordinate equal to the plane's (which
//! 1/8-unit grids of starts hit), so this set holds every facet's axial
//! border coordinates (in their own orientation), each with its axis.

use crate::geometry::polygons::facet_polygon_without;
use crate::margins::PLANE_SIDE_EPSILON;
use crate::math::DVec3;
use crate::world::World;
use glam::Vec3A;

/// A set of coordinates on their axes (a start is on an axial plane only
/// when its coordinate on the plane's axis is the plane's). Every ray asks
/// it three times, and nearly every answer is no: a blocked Bloom filter
/// (two bits of one 64-bit word per coordinate and axis, 4 KiB) answers
/// nearly all of those without a branch, a binary search the rest.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BorderStarts {
    /// A member's two bits set in its word; none when the set is empty. A
    /// fixed size: the filter's word index needs no bounds check.
    filter: Option<Box<[u64; FILTER_WORDS]>>,
    /// Per axis, the coordinates' bits, sorted.
    values: [Vec<u32>; 3],
}

/// Words in the filter: with the few hundred coordinates of a map with
/// many patches, about one start coordinate in a hundred gets past it.
const FILTER_WORDS: usize = 512;
const _: () = assert!(FILTER_WORDS.is_power_of_two());

impl BorderStarts {
    pub const NONE: BorderStarts = BorderStarts {
        filter: None,
        values: [Vec::new(), Vec::new(), Vec::new()],
    };

    /// The coordinates of `world`'s facets' axial border planes that matter:
    /// those that alone bound an edge of their facet (without them the
    /// facet would reach further; a border that only touches a corner, or
    /// shares its edge with another border, bounds nothing the others do
    /// not).
    pub fn build(world: &World) -> BorderStarts {
        let mut values = Vec::new();
        for (f, facet) in world.facets.iter().enumerate() {
            let borders =
                &world.facet_borders[facet.first_border as usize..][..facet.num_borders as usize];
            let polygon = facet_polygon_without(world, f, None);
            let points = &polygon.points;
            let [sx, sy, sz, _] = world
                .patch_planes
                .get(facet.surface_plane as usize)
                .map_or([0.0; 4], |p| p.plane.map(f64::from));
            let surface = DVec3::new(sx, sy, sz);
            for (i, &p) in points.iter().enumerate() {
                let q = points[(i + 1) % points.len()];
                let mut sole = None;
                let mut supports = 0;
                for border in borders {
                    let Some(plane) = world.patch_planes.get(border.plane as usize) else {
                        continue;
                    };
                    let [x, y, z, dist] = plane.plane.map(f64::from);
                    let n = DVec3::new(x, y, z);
                    // (The surface plane's back holds every edge.)
                    if n.dot(surface).abs() > 1.0 - 1e-5 {
                        continue;
                    }
                    if (p.dot(n) - dist).abs() <= PLANE_SIDE_EPSILON
                        && (q.dot(n) - dist).abs() <= PLANE_SIDE_EPSILON
                    {
                        supports += 1;
                        sole = Some((border, plane.plane));
                    }
                }
                let Some((border, [x, y, z, dist])) = sole.filter(|_| supports == 1) else {
                    continue;
                };
                // An inward border is used flipped: a ray starting on it is
                // outside the facet on that side, as the test finds.
                let n = [x, y, z];
                let Some(axis) = (0..3).find(|&a| n[a].abs() == 1.0) else {
                    continue;
                };
                if border.inward != 0 || !dist.is_finite() {
                    continue;
                }
                // `n · start - dist == 0` with `n = ±e`: start = ±dist.
                let v = dist * n[axis];
                values.push((axis, v));
                if v == 0.0 {
                    values.push((axis, -v));
                }
            }
        }
        BorderStarts::of(values)
    }

    /// The set of these coordinates, each on its axis.
    fn of(members: Vec<(usize, f32)>) -> BorderStarts {
        if members.is_empty() {
            return BorderStarts::NONE;
        }
        let mut filter = Box::new([0; FILTER_WORDS]);
        let mut values: [Vec<u32>; 3] = Default::default();
        for (axis, v) in members {
            let (word, bits) = filter_bits(axis, v);
            filter[word] |= bits;
            values[axis].push(v.to_bits());
        }
        for list in &mut values {
            list.sort_unstable();
            list.dedup();
        }
        BorderStarts {
            filter: Some(filter),
            values,
        }
    }

    #[inline(always)]
    fn holds(&self, axis: usize, v: f32) -> bool {
        self.values[axis].binary_search(&v.to_bits()).is_ok()
    }

    /// Whether a ray starting at `start` may start on a facet's border plane.
    #[inline(always)]
    pub fn may_hold(&self, start: Vec3A) -> bool {
        let Some(filter) = &self.filter else {
            return false;
        };
        let passes = |axis: usize, v: f32| {
            let (word, bits) = filter_bits(axis, v);
            filter[word] & bits == bits
        };
        // Non-short-circuiting: three loads and one branch.
        let suspect = passes(0, start.x) | passes(1, start.y) | passes(2, start.z);
        suspect && (self.holds(0, start.x) || self.holds(1, start.y) || self.holds(2, start.z))
    }
}

/// Odd multipliers, one an axis: each axis hashes its coordinates its own
/// way (at no cost: the multiplier is a constant in each of the three
/// calls).
const HASH: [u64; 3] = [
    0x9E37_79B9_7F4A_7C15,
    0xC2B2_AE3D_27D4_EB4F,
    0x1656_67B1_9E37_79F9,
];

/// Coordinate `v` on axis `axis`: its word in the filter (below
/// [`FILTER_WORDS`]: the hash's top bits) and its two bits there.
#[inline(always)]
fn filter_bits(axis: usize, v: f32) -> (usize, u64) {
    let h = u64::from(v.to_bits()).wrapping_mul(HASH[axis]);
    let word = (h >> (64 - FILTER_WORDS.trailing_zeros())) as usize;
    (word, 1 << (h & 63) | 1 << ((h >> 6) & 63))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `may_hold` says yes exactly when a coordinate is in the set on its
    /// axis: the filter lets every member through (no false negatives,
    /// whatever word and bits a member hashes to) and the sorted list turns
    /// away the rest, the same value on another axis included.
    #[test]
    fn may_hold_exactly_the_starts_with_a_member_coordinate() {
        let mut rng = fastrand::Rng::with_seed(0xb0de);
        // Coordinates as maps have them: whole and eighth units, and zeros.
        let coordinate = |rng: &mut fastrand::Rng| {
            let v = ((rng.f32() - 0.5) * 8192.0 * 8.0).round() / 8.0;
            if rng.f32() < 0.05 {
                0.0
            } else {
                v
            }
        };
        for members in [1, 7, 300, 2_000] {
            let values: Vec<(usize, f32)> = (0..members)
                .map(|_| (rng.usize(..3), coordinate(&mut rng)))
                .collect();
            let set = BorderStarts::of(values.clone());
            let member = |start: Vec3A| {
                values
                    .iter()
                    .any(|&(a, m)| m.to_bits() == start[a].to_bits())
            };
            for &(axis, v) in &values {
                let mut start = Vec3A::splat(0.5);
                start[axis] = v;
                assert!(set.may_hold(start), "{v} on axis {axis}");
                // The same value on the other axes: only if a member there.
                for other in [(axis + 1) % 3, (axis + 2) % 3] {
                    let mut start = Vec3A::splat(0.5);
                    start[other] = v;
                    assert_eq!(set.may_hold(start), member(start), "{start}");
                }
            }
            for _ in 0..20_000 {
                let start = Vec3A::new(
                    coordinate(&mut rng),
                    coordinate(&mut rng),
                    coordinate(&mut rng),
                );
                assert_eq!(set.may_hold(start), member(start), "{start}");
            }
        }
        assert!(!BorderStarts::NONE.may_hold(Vec3A::ZERO));
    }
}
