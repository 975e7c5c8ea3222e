//! Query shapes other than boxes, and their support distances: how far each
//! reaches along a plane normal. That one number is all plane shifting needs
//! (Melax 2000): a node or brush plane is pushed out by it, and the shape is
//! then traced as a point.

use crate::math::Vec3;
use glam::Vec4;
use std::sync::Arc;
use thiserror::Error;

/// Most points a convex shape may be given as.
pub const MAX_CONVEX_POINTS: usize = 64;

/// Largest radius, half-height or convex point coordinate (a shape larger
/// than a whole Quake 3 world is a mistake).
pub const MAX_SHAPE_SIZE: f32 = 65_536.0;

/// Why a shape was rejected.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum InvalidShape {
    #[error("`{field}` must be finite, {} and at most {MAX_SHAPE_SIZE}, not {value}",
        if *.zero_ok { "zero or positive" } else { "positive" })]
    Size {
        field: &'static str,
        value: f32,
        zero_ok: bool,
    },
    #[error("a convex shape takes 1 to {MAX_CONVEX_POINTS} points, not {0}")]
    ConvexPointCount(usize),
    #[error("convex points must be finite and within ±{MAX_SHAPE_SIZE}")]
    ConvexPoint,
    #[error("convex shapes need bspq built with the `exact` feature")]
    ConvexUnavailable,
}

/// A swept shape other than a box or ray (those are `mins`/`maxs`). Rounded
/// shapes are centred on the traced point; their axis is z. Sizes are checked
/// when the shape is put in a query ([`crate::trace::TraceQuery::shaped`]); a
/// convex hull is checked when it is built ([`ConvexHull::new`]).
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
/// bounding box (so that it is traced like a centred box), with what makes
/// its support distance fast: the hull's edges (for hill climbing) and the
/// extreme vertex along each axis (where a climb starts).
#[derive(Debug, Clone, PartialEq)]
pub struct ConvexHull {
    /// Hull vertices relative to `centre` (points inside the hull dropped).
    points: Vec<Vec3>,
    /// Centre of the bounding box, relative to the traced point.
    centre: Vec3,
    /// Half-size of the bounding box.
    half: Vec3,
    /// `neighbours[start[i]..start[i + 1]]`: the vertices sharing an edge
    /// with vertex `i`. Empty when the hull is flat or degenerate (then the
    /// support is a scan over every point).
    start: Vec<u16>,
    neighbours: Vec<u8>,
    /// Index of the vertex furthest along +x, -x, +y, -y, +z, -z.
    extreme: [u8; 6],
    /// The support along +x, -x, +y, -y, +z, -z: brush sides are mostly
    /// axial, and there the scan's answer is this, to the bit.
    axial: [f32; 6],
}

/// Hulls with at most this many vertices are scanned whole: a climb's
/// bookkeeping costs more than a handful of dot products.
const SCAN_MAX: usize = 12;

/// The vertices and edges of the convex hull of `points`, or the points
/// whole and no edges when the set is flat or degenerate, or has more
/// vertices than [`MAX_CONVEX_POINTS`] (its support is still the maximum
/// over the points).
#[cfg(feature = "exact")]
fn hull_of(points: Vec<Vec3>) -> (Vec<Vec3>, Vec<[u32; 2]>) {
    let hull = parry3d::shape::ConvexPolyhedron::from_convex_hull(
        &points
            .iter()
            .map(|p| parry3d::math::Vector::new(p.x, p.y, p.z))
            .collect::<Vec<_>>(),
    );
    match hull {
        Some(h) if !h.points().is_empty() && h.points().len() <= MAX_CONVEX_POINTS => (
            h.points()
                .iter()
                .map(|p| Vec3::new(p.x, p.y, p.z))
                .collect(),
            h.edges().iter().map(|e| e.vertices).collect(),
        ),
        _ => (points, Vec::new()),
    }
}

/// Without the `exact` feature there is no hull builder, and
/// [`ConvexHull::new`] refuses before asking for one: a support taken over
/// interior points too may differ in the last bit.
#[cfg(not(feature = "exact"))]
fn hull_of(points: Vec<Vec3>) -> (Vec<Vec3>, Vec<[u32; 2]>) {
    (points, Vec::new())
}

impl ConvexHull {
    /// The hull of 1 to [`MAX_CONVEX_POINTS`] finite `points` within
    /// ±[`MAX_SHAPE_SIZE`] (relative to the traced point). Interior points are
    /// dropped when the hull is solid; flat or degenerate sets are kept whole,
    /// since their support is still the maximum over the points. Needs the
    /// `exact` feature (the hull builder).
    pub fn new(points: &[Vec3]) -> Result<ConvexHull, InvalidShape> {
        if !cfg!(feature = "exact") {
            return Err(InvalidShape::ConvexUnavailable);
        }
        if points.is_empty() || points.len() > MAX_CONVEX_POINTS {
            return Err(InvalidShape::ConvexPointCount(points.len()));
        }
        let within = |p: &Vec3| p.is_finite() && p.abs().max_element() <= MAX_SHAPE_SIZE;
        if !points.iter().all(within) {
            return Err(InvalidShape::ConvexPoint);
        }
        let lo = points
            .iter()
            .fold(Vec3::splat(f32::INFINITY), |a, p| a.min(*p));
        let hi = points
            .iter()
            .fold(Vec3::splat(f32::NEG_INFINITY), |a, p| a.max(*p));
        let centre = (lo + hi) * 0.5;
        let local: Vec<Vec3> = points.iter().map(|p| *p - centre).collect();
        let (points, edges) = hull_of(local);
        Ok(Self::with_edges(points, centre, &edges))
    }

    /// The hull's vertices, relative to the centre of its bounding box.
    pub fn points(&self) -> &[Vec3] {
        &self.points
    }

    fn with_edges(points: Vec<Vec3>, centre: Vec3, edges: &[[u32; 2]]) -> ConvexHull {
        let n = points.len();
        let mut lists: Vec<Vec<u8>> = vec![Vec::new(); n];
        for &[a, b] in edges {
            let (a, b) = (a as usize, b as usize);
            if a < n && b < n && a != b {
                lists[a].push(b as u8);
                lists[b].push(a as u8);
            }
        }
        // A climb needs every vertex reachable; otherwise scan.
        let connected = !edges.is_empty() && lists.iter().all(|l| !l.is_empty());
        let (mut start, mut neighbours) = (Vec::new(), Vec::new());
        if connected {
            start.push(0);
            for l in &mut lists {
                l.sort_unstable();
                l.dedup();
                neighbours.extend_from_slice(l);
                start.push(neighbours.len() as u16);
            }
        }
        let furthest = |dir: Vec3| -> u8 {
            let mut best = 0;
            for (i, p) in points.iter().enumerate() {
                if p.dot(dir) > points[best].dot(dir) {
                    best = i;
                }
            }
            best as u8
        };
        let extreme = [
            furthest(Vec3::X),
            furthest(-Vec3::X),
            furthest(Vec3::Y),
            furthest(-Vec3::Y),
            furthest(Vec3::Z),
            furthest(-Vec3::Z),
        ];
        let half = points.iter().fold(Vec3::ZERO, |a, p| a.max(p.abs()));
        let axial =
            [Vec3::X, -Vec3::X, Vec3::Y, -Vec3::Y, Vec3::Z, -Vec3::Z].map(|n| scan(&points, n));
        ConvexHull {
            axial,
            points,
            centre,
            half,
            start,
            neighbours,
            extreme,
        }
    }

    /// The same hull without its edges: the support is then always a scan
    /// over every vertex (the benchmark's comparison for hill climbing).
    pub fn scanned(&self) -> ConvexHull {
        ConvexHull {
            start: Vec::new(),
            neighbours: Vec::new(),
            ..self.clone()
        }
    }

    /// Whether the support is found by climbing the hull's edges.
    pub fn climbs(&self) -> bool {
        !self.start.is_empty() && self.points.len() > SCAN_MAX
    }

    /// `max n·p` over the vertices.
    #[inline]
    pub fn support(&self, n: Vec3) -> f32 {
        // An axial normal: ±1 on one axis, exactly 0 on the others.
        let zero = n.cmpeq(Vec3::ZERO);
        if zero.bitmask().count_ones() == 2 {
            let axis = if !zero.test(0) {
                (n.x < 0.0) as usize
            } else if !zero.test(1) {
                2 + (n.y < 0.0) as usize
            } else {
                4 + (n.z < 0.0) as usize
            };
            if n.abs().max_element() == 1.0 {
                return self.axial[axis];
            }
        }
        if self.climbs() {
            self.climb(n)
        } else {
            scan(&self.points, n)
        }
    }

    /// Hill climbing from the extreme vertex of `n`'s largest component: on
    /// a convex polytope's edge graph a vertex no neighbour improves on is
    /// the maximum (the simplex method's argument).
    fn climb(&self, n: Vec3) -> f32 {
        let a = n.abs();
        let axis = if a.x >= a.y && a.x >= a.z {
            (n.x < 0.0) as usize
        } else if a.y >= a.z {
            2 + (n.y < 0.0) as usize
        } else {
            4 + (n.z < 0.0) as usize
        };
        let mut at = self.extreme[axis] as usize;
        let mut best = self.points[at].dot(n);
        // Each step strictly improves, so the climb ends; the bound only
        // guards against a malformed adjacency.
        for _ in 0..self.points.len() {
            let mut next = at;
            let (from, to) = (self.start[at] as usize, self.start[at + 1] as usize);
            for &j in &self.neighbours[from..to] {
                let d = self.points[j as usize].dot(n);
                if d > best {
                    best = d;
                    next = j as usize;
                }
            }
            if next == at {
                break;
            }
            at = next;
        }
        best
    }
}

/// `max n·p` over `points`.
#[inline(always)]
fn scan(points: &[Vec3], n: Vec3) -> f32 {
    points
        .iter()
        .fold(f32::NEG_INFINITY, |m, p| m.max(p.dot(n)))
}

impl Shape {
    /// Checks radii and half-heights: finite, at most [`MAX_SHAPE_SIZE`], a
    /// radius positive, a half-height zero or positive.
    pub fn validate(&self) -> Result<(), InvalidShape> {
        let size = |field, value: f32, zero_ok| {
            let ok = value.is_finite()
                && value <= MAX_SHAPE_SIZE
                && (value > 0.0 || (zero_ok && value == 0.0));
            if ok {
                Ok(())
            } else {
                Err(InvalidShape::Size {
                    field,
                    value,
                    zero_ok,
                })
            }
        };
        match self {
            Shape::Sphere { radius } => size("radius", *radius, false),
            Shape::Capsule {
                radius,
                half_height,
            }
            | Shape::Cylinder {
                radius,
                half_height,
            } => {
                size("radius", *radius, false)?;
                size("half_height", *half_height, true)
            }
            // Checked when built.
            Shape::Convex(_) => Ok(()),
        }
    }

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
            Shape::Convex(hull) => hull.half,
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
            Shape::Convex(hull) => hull.support(n),
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
    /// [`Support::shift`] of four normals in lanes (`n[axis]` holds that
    /// axis's component of each), the same numbers lane by lane. Lanes with
    /// a zero normal (a brush's padding) get 0.
    #[inline(always)]
    fn shift_lanes(&self, n: &[Vec4; 3]) -> Vec4 {
        let [x, y, z] = n.map(|v| v.to_array());
        Vec4::from_array(std::array::from_fn(|k| {
            let normal = Vec3::new(x[k], y[k], z[k]);
            if normal == Vec3::ZERO {
                0.0
            } else {
                self.shift(normal)
            }
        }))
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
    #[inline(always)]
    fn shift_lanes(&self, _n: &[Vec4; 3]) -> Vec4 {
        Vec4::splat(self.0)
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
    #[inline(always)]
    fn shift_lanes(&self, n: &[Vec4; 3]) -> Vec4 {
        // support(-n): |-z| is |z|.
        Vec4::splat(self.radius) + Vec4::splat(self.half_height) * n[2].abs()
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
    #[inline(always)]
    fn shift_lanes(&self, n: &[Vec4; 3]) -> Vec4 {
        // support(-n): the squares and |-z| are those of n.
        let across = Vec4::from_array((n[0] * n[0] + n[1] * n[1]).to_array().map(f32::sqrt));
        Vec4::splat(self.radius) * across + Vec4::splat(self.half_height) * n[2].abs()
    }
}

/// A convex hull: the support by [`ConvexHull::support`]. How far it reaches
/// across a node plane is bounded by its bounding box (exact for the axial
/// planes most nodes have; larger is only a wider walk, never another answer,
/// since the clipping reads exact supports).
pub(crate) struct Hull<'a>(pub &'a ConvexHull);

impl Support for Hull<'_> {
    #[inline(always)]
    fn support(&self, n: Vec3) -> f32 {
        self.0.support(n)
    }
    #[inline(always)]
    fn reach(&self, n: Vec3) -> f32 {
        n.abs().dot(self.0.half)
    }
}
