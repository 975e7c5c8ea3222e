//! Building shape bevels (see [`crate::world::bevels`]): Melax's two kinds.
//!
//! - **Edge bevels**: where two sides of a brush meet at an edge whose
//!   normals turn by more than the threshold angle, planes through the edge
//!   with normals spread evenly between the two, so that no two neighbouring
//!   planes around the edge differ by more than the threshold. A rounded
//!   shape's error at an edge whose normals differ by θ is
//!   `r·(1/cos(θ/2) − 1)`; with bevels every θ is at most the threshold.
//! - **Cap bevels**: a level plane on top of every brush not already capped by
//!   a nearly level side, so that a shape standing on a slope's peak or a
//!   ridge rests at the right height.
//!
//! Each bevel is a supporting plane of its brush: its distance is the
//! maximum over the brush's corners (rounded outward), so the solid is
//! unchanged.

use crate::margins::BEVEL_WELD;
use crate::math::{dvec, DVec3, Winding};
use crate::world::{BevelRange, Brush, ShapeBevel, World};

/// Which bevels to build.
#[derive(Debug, Clone, PartialEq)]
pub struct BevelOptions {
    /// Edge bevels where sides turn by more than this many degrees (`None`: none).
    pub edge_angle: Option<f32>,
    /// A level plane atop brushes without a nearly level top side.
    pub caps: bool,
}

/// The default, chosen by `bspq accuracy` on the six shared maps (README).
pub const DEFAULT_EDGE_ANGLE: f32 = 45.0;

impl Default for BevelOptions {
    fn default() -> Self {
        Self {
            edge_angle: Some(DEFAULT_EDGE_ANGLE),
            caps: true,
        }
    }
}

impl BevelOptions {
    /// No shape bevels at all.
    pub fn none() -> Self {
        Self {
            edge_angle: None,
            caps: false,
        }
    }

    pub fn any(&self) -> bool {
        self.edge_angle.is_some() || self.caps
    }
}

/// What was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BevelCounts {
    pub edge: usize,
    pub caps: usize,
}

/// A side counts as a level top when its normal's z is at least this (8°).
const LEVEL_MIN_Z: f64 = 0.99;

/// A new bevel this close in direction to an existing plane adds nothing.
const SAME_DIRECTION: f64 = 0.9999;

/// Edges shorter than this (units) are left alone.
const MIN_EDGE: f64 = 0.1;

/// The shape bevels of every brush of `world` (its own bevels, if any, are
/// ignored): one range per brush, or nothing when `options` asks for none.
pub fn build(
    world: &World,
    options: &BevelOptions,
) -> (Vec<BevelRange>, Vec<ShapeBevel>, BevelCounts) {
    let mut counts = BevelCounts::default();
    if !options.any() {
        return (Vec::new(), Vec::new(), counts);
    }
    let mut ranges = Vec::with_capacity(world.brushes.len());
    let mut bevels = Vec::new();
    for brush in world.brushes {
        let first = bevels.len() as u32;
        brush_bevels(world, brush, options, &mut bevels, &mut counts);
        ranges.push(BevelRange {
            first,
            count: bevels.len() as u32 - first,
        });
    }
    (ranges, bevels, counts)
}

struct Side {
    normal: DVec3,
    flags: u32,
    corners: Vec<DVec3>,
}

fn brush_bevels(
    world: &World,
    brush: &Brush,
    options: &BevelOptions,
    out: &mut Vec<ShapeBevel>,
    counts: &mut BevelCounts,
) {
    let first = brush.first_side as usize;
    let planes: Vec<(DVec3, f64, u32)> = world.brush_sides[first..first + brush.num_sides as usize]
        .iter()
        .map(|s| {
            let p = &world.planes[s.plane as usize];
            (dvec(p.normal()), p.dist as f64, s.surface_flags)
        })
        .collect();
    // Each side's polygon: its plane cut by every other side.
    let sides: Vec<Side> = planes
        .iter()
        .enumerate()
        .map(|(i, &(normal, dist, flags))| {
            let mut w = Winding::base_for_plane(normal, dist);
            let kept = planes.iter().enumerate().all(|(j, &(m, e, _))| {
                j == i || (m == normal && e == dist) || w.clip_back(m, e, 0.0)
            });
            Side {
                normal,
                flags,
                corners: if kept { w.points } else { Vec::new() },
            }
        })
        .collect();
    let corners: Vec<DVec3> = sides
        .iter()
        .flat_map(|s| s.corners.iter().copied())
        .collect();
    if corners.is_empty() {
        return;
    }
    let mut normals: Vec<DVec3> = planes.iter().map(|p| p.0).collect();
    let add = |n: DVec3, flags: u32, normals: &mut Vec<DVec3>, out: &mut Vec<ShapeBevel>| -> bool {
        let n = n.normalize();
        if !n.is_finite() || normals.iter().any(|m| m.dot(n) > SAME_DIRECTION) {
            return false;
        }
        let d = corners
            .iter()
            .map(|c| c.dot(n))
            .fold(f64::NEG_INFINITY, f64::max);
        normals.push(n);
        out.push(ShapeBevel {
            normal: [n.x as f32, n.y as f32, n.z as f32],
            dist: round_up(d),
            surface_flags: flags,
        });
        true
    };
    if let Some(degrees) = options.edge_angle {
        let limit = (degrees as f64).to_radians().max(1e-3);
        for i in 0..sides.len() {
            for j in i + 1..sides.len() {
                let (a, b) = (&sides[i], &sides[j]);
                if !share_edge(&a.corners, &b.corners) {
                    continue;
                }
                let angle = a.normal.dot(b.normal).clamp(-1.0, 1.0).acos();
                if angle <= limit + 1e-9 || angle >= std::f64::consts::PI - 1e-6 {
                    continue;
                }
                let steps = (angle / limit).ceil() as usize;
                for m in 1..steps {
                    let t = m as f64 / steps as f64;
                    // Spherical interpolation: evenly spread directions.
                    let n = (a.normal * ((1.0 - t) * angle).sin() + b.normal * (t * angle).sin())
                        / angle.sin();
                    let flags = if t <= 0.5 { a.flags } else { b.flags };
                    counts.edge += add(n, flags, &mut normals, out) as usize;
                }
            }
        }
    }
    if options.caps && !normals.iter().any(|n| n.z >= LEVEL_MIN_Z) {
        let top = sides
            .iter()
            .max_by(|a, b| a.normal.z.total_cmp(&b.normal.z))
            .map_or(0, |s| s.flags);
        counts.caps += add(DVec3::Z, top, &mut normals, out) as usize;
    }
}

/// Whether two polygons share an edge: at least two corners a useful
/// distance apart in common.
fn share_edge(a: &[DVec3], b: &[DVec3]) -> bool {
    let shared: Vec<DVec3> = a
        .iter()
        .copied()
        .filter(|p| {
            b.iter()
                .any(|q| q.distance_squared(*p) < BEVEL_WELD * BEVEL_WELD)
        })
        .collect();
    shared.iter().any(|p| {
        shared
            .iter()
            .any(|q| q.distance_squared(*p) >= MIN_EDGE * MIN_EDGE)
    })
}

/// The nearest f32 at or above `d`, so that the plane holds the whole brush.
fn round_up(d: f64) -> f32 {
    let f = d as f32;
    if (f as f64) < d {
        f.next_up()
    } else {
        f
    }
}
