//! Query shapes other than boxes, and their support distances: how far each
//! reaches along a plane normal. That one number is all plane shifting needs
//! (Melax 2000): a node or brush plane is pushed out by it, and the shape is
//! then traced as a point.

use crate::math::Vec3;
use std::sync::Arc;

/// Most points a convex shape may be given as.
pub const MAX_CONVEX_POINTS: usize = 64;

/// A swept shape other than a box or ray (those are `mins`/`maxs`). Rounded
/// shapes are centred on the traced point; their axis is z.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    Sphere {
        radius: f32,
    },
    /// A segment of `2·half_height` along z, grown by `radius`.
    Capsule {
        radius: f32,
        half_height: f32,
    },
    /// A disc of `radius` extruded `±half_height` along z.
    Cylinder {
        radius: f32,
        half_height: f32,
    },
    /// The convex hull of points given relative to the traced point.
    Convex(Arc<ConvexHull>),
}

/// A convex shape's extreme points, kept relative to the centre of its
/// bounding box (so that it is traced like a centred box).
#[derive(Debug, Clone, PartialEq)]
pub struct ConvexHull {
    /// Hull vertices relative to `centre` (points inside the hull dropped).
    pub points: Vec<Vec3>,
    /// Centre of the bounding box, relative to the traced point.
    pub centre: Vec3,
}

impl ConvexHull {
    /// The hull of `points` (relative to the traced point). Interior points are
    /// dropped when the hull is solid; flat or degenerate sets are kept whole,
    /// since their support is still the maximum over the points.
    pub fn new(points: &[Vec3]) -> ConvexHull {
        let lo = points
            .iter()
            .fold(Vec3::splat(f32::INFINITY), |a, p| a.min(*p));
        let hi = points
            .iter()
            .fold(Vec3::splat(f32::NEG_INFINITY), |a, p| a.max(*p));
        let centre = if points.is_empty() {
            Vec3::ZERO
        } else {
            (lo + hi) * 0.5
        };
        let local: Vec<Vec3> = points.iter().map(|p| *p - centre).collect();
        let hull = parry3d::shape::ConvexPolyhedron::from_convex_hull(
            &local
                .iter()
                .map(|p| parry3d::math::Vector::new(p.x, p.y, p.z))
                .collect::<Vec<_>>(),
        );
        let points = match hull {
            Some(h) if !h.points().is_empty() => h
                .points()
                .iter()
                .map(|p| Vec3::new(p.x, p.y, p.z))
                .collect(),
            _ => local,
        };
        ConvexHull { points, centre }
    }
}

impl Shape {
    /// Half-size of the shape's bounding box (it is symmetric about the centre).
    pub fn half_extents(&self) -> Vec3 {
        match self {
            Shape::Sphere { radius } => Vec3::splat(*radius),
            Shape::Capsule {
                radius,
                half_height,
            } => Vec3::new(*radius, *radius, radius + half_height),
            Shape::Cylinder {
                radius,
                half_height,
            } => Vec3::new(*radius, *radius, *half_height),
            Shape::Convex(hull) => hull.points.iter().fold(Vec3::ZERO, |a, p| a.max(p.abs())),
        }
    }

    /// Offset of the shape's centre from the traced point.
    pub fn centre(&self) -> Vec3 {
        match self {
            Shape::Convex(hull) => hull.centre,
            _ => Vec3::ZERO,
        }
    }

    /// The bounding box relative to the traced point, as `(mins, maxs)`.
    pub fn bounds(&self) -> (Vec3, Vec3) {
        let (c, h) = (self.centre(), self.half_extents());
        (c - h, c + h)
    }

    /// Support distance: `max n·p` over the shape's points `p` (relative to
    /// its centre). Generic code uses the [`Support`] types instead.
    pub fn support(&self, n: Vec3) -> f32 {
        match self {
            Shape::Sphere { radius } => Sphere(*radius).support(n),
            Shape::Capsule {
                radius,
                half_height,
            } => Capsule::new(*radius, *half_height).support(n),
            Shape::Cylinder {
                radius,
                half_height,
            } => Cylinder::new(*radius, *half_height).support(n),
            Shape::Convex(hull) => Points(&hull.points).support(n),
        }
    }

    /// A short name of the kind, for reports.
    pub fn kind(&self) -> &'static str {
        match self {
            Shape::Sphere { .. } => "sphere",
            Shape::Capsule { .. } => "capsule",
            Shape::Cylinder { .. } => "cylinder",
            Shape::Convex(_) => "convex",
        }
    }
}

/// A shape's support function, one type per kind so that the sweep is
/// compiled once per kind with the support inlined.
pub(crate) trait Support {
    /// `max n·p` over the shape, for a unit `n`.
    fn support(&self, n: Vec3) -> f32;
    /// How far the shape reaches on either side of a plane through its centre.
    #[inline(always)]
    fn reach(&self, n: Vec3) -> f32 {
        self.support(n).max(self.support(-n))
    }
    /// How far a plane `n·x = d` moves out when the shape is swept against
    /// the solid behind it: the plane of the Minkowski sum is `n·x = d + shift`.
    #[inline(always)]
    fn shift(&self, n: Vec3) -> f32 {
        self.support(-n)
    }
}

pub(crate) struct Sphere(pub f32);

impl Support for Sphere {
    #[inline(always)]
    fn support(&self, _n: Vec3) -> f32 {
        self.0
    }
    #[inline(always)]
    fn reach(&self, _n: Vec3) -> f32 {
        self.0
    }
}

pub(crate) struct Capsule {
    radius: f32,
    half_height: f32,
}

impl Capsule {
    pub fn new(radius: f32, half_height: f32) -> Self {
        Self {
            radius,
            half_height,
        }
    }
}

impl Support for Capsule {
    #[inline(always)]
    fn support(&self, n: Vec3) -> f32 {
        self.radius + self.half_height * n.z.abs()
    }
    #[inline(always)]
    fn reach(&self, n: Vec3) -> f32 {
        self.support(n)
    }
}

pub(crate) struct Cylinder {
    radius: f32,
    half_height: f32,
}

impl Cylinder {
    pub fn new(radius: f32, half_height: f32) -> Self {
        Self {
            radius,
            half_height,
        }
    }
}

impl Support for Cylinder {
    #[inline(always)]
    fn support(&self, n: Vec3) -> f32 {
        self.radius * (n.x * n.x + n.y * n.y).sqrt() + self.half_height * n.z.abs()
    }
    #[inline(always)]
    fn reach(&self, n: Vec3) -> f32 {
        self.support(n)
    }
}

/// A convex hull by its vertices: the support is a maximum over them (at most
/// [`MAX_CONVEX_POINTS`], usually a handful once interior points are dropped).
pub(crate) struct Points<'a>(pub &'a [Vec3]);

impl Support for Points<'_> {
    #[inline(always)]
    fn support(&self, n: Vec3) -> f32 {
        self.0
            .iter()
            .fold(f32::NEG_INFINITY, |m, p| m.max(p.dot(n)))
    }
    #[inline(always)]
    fn reach(&self, n: Vec3) -> f32 {
        self.0.iter().fold(0.0f32, |m, p| m.max(p.dot(n).abs()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The support of a sampled surface never exceeds the closed form, and
    /// comes within the sampling error of it.
    #[test]
    fn closed_form_supports_match_sampled_surfaces() {
        let shapes = [
            Shape::Sphere { radius: 16.0 },
            Shape::Capsule {
                radius: 15.0,
                half_height: 12.0,
            },
            Shape::Cylinder {
                radius: 15.0,
                half_height: 28.0,
            },
        ];
        let mut samples = Vec::new();
        for i in 0..=24 {
            for j in 0..48 {
                let (theta, phi) = (
                    std::f32::consts::PI * i as f32 / 24.0,
                    std::f32::consts::TAU * j as f32 / 48.0,
                );
                samples.push(Vec3::new(
                    theta.sin() * phi.cos(),
                    theta.sin() * phi.sin(),
                    theta.cos(),
                ));
            }
        }
        for shape in &shapes {
            // Points on the shape's surface.
            let surface: Vec<Vec3> = samples
                .iter()
                .map(|d| match shape {
                    Shape::Sphere { radius } => *d * *radius,
                    Shape::Capsule {
                        radius,
                        half_height,
                    } => *d * *radius + Vec3::Z * half_height.copysign(d.z),
                    Shape::Cylinder {
                        radius,
                        half_height,
                    } => {
                        let xy = Vec3::new(d.x, d.y, 0.0).normalize_or_zero() * *radius;
                        xy + Vec3::Z * half_height.copysign(d.z)
                    }
                    Shape::Convex(_) => unreachable!(),
                })
                .collect();
            for n in &samples {
                let sampled = Points(&surface).support(*n);
                let closed = shape.support(*n);
                assert!(sampled <= closed + 1e-3, "{shape:?} {n}");
                assert!(
                    sampled >= closed - 1.5,
                    "{shape:?} {n}: {sampled} vs {closed}"
                );
            }
        }
    }

    #[test]
    fn convex_hull_drops_interior_points_and_centres() {
        let mut pts = Vec::new();
        for bits in 0..8 {
            pts.push(Vec3::new(
                if bits & 1 != 0 { 10.0 } else { -6.0 },
                if bits & 2 != 0 { 4.0 } else { -4.0 },
                if bits & 4 != 0 { 30.0 } else { -20.0 },
            ));
        }
        pts.push(Vec3::new(0.0, 0.0, 0.0));
        let hull = ConvexHull::new(&pts);
        assert_eq!(hull.points.len(), 8);
        assert_eq!(hull.centre, Vec3::new(2.0, 0.0, 5.0));
        let shape = Shape::Convex(Arc::new(hull));
        assert_eq!(
            shape.bounds(),
            (Vec3::new(-6.0, -4.0, -20.0), Vec3::new(10.0, 4.0, 30.0))
        );
    }
}
