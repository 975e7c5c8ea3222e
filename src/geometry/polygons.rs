//! The polygons of a world's solid pieces: a brush's faces (each side's
//! plane cut by the others) and a patch facet's polygon (its surface plane
//! inside its borders). The load-time searches of `trace::accel` and the
//! geometry export read the same polygons.

use crate::margins::PLANE_SIDE_EPSILON;
use crate::math::{DVec3, Winding};
use crate::world::World;

/// The faces of the convex polyhedron behind every one of `planes`.
pub fn polyhedron(planes: &[(DVec3, f64)]) -> Vec<Winding> {
    planes
        .iter()
        .enumerate()
        .filter_map(|(i, &(n, d))| side_polygon(planes, i, n, d))
        .collect()
}

/// Side `i`'s plane cut by every other one of `planes` (`None`: nothing left).
fn side_polygon(planes: &[(DVec3, f64)], i: usize, n: DVec3, d: f64) -> Option<Winding> {
    let mut w = Winding::base_for_plane(n, d);
    for (j, &(m, e)) in planes.iter().enumerate() {
        if i != j && (!w.clip_back(m, e, PLANE_SIDE_EPSILON)) {
            return None;
        }
    }
    Some(w)
}

/// A side within this (units) of an earlier side's plane near the brush,
/// facing the same way, is that side again (maps repeat sides, a rounding
/// apart).
pub const SAME_PLANE: f64 = 0.05;

/// The polygons of the sides of a brush with sides `planes` (normals
/// pointing out) around `centre` (the middle of its bounds), each with the
/// index of its side: every side that something of the brush touches. The
/// second of two sides on one plane is left out, and does not cut the
/// others: the two would cut each other's polygons into slivers. A bevel
/// side touches the brush along an edge or at a corner only: its polygon
/// has (nearly) no area.
pub fn brush_faces(planes: &[(DVec3, f64)], centre: DVec3) -> Vec<(usize, Winding)> {
    let mut kept: Vec<usize> = Vec::with_capacity(planes.len());
    for (i, &(n, d)) in planes.iter().enumerate() {
        // The point of side i's plane nearest the centre.
        let on = centre - n * (n.dot(centre) - d);
        let repeated = kept.iter().any(|&j| {
            let (m, e) = planes[j];
            m.dot(n) > 1.0 - 1e-4 && (m.dot(on) - e).abs() <= SAME_PLANE
        });
        if !repeated {
            kept.push(i);
        }
    }
    let distinct: Vec<(DVec3, f64)> = kept.iter().map(|&i| planes[i]).collect();
    kept.iter()
        .enumerate()
        .filter_map(|(k, &i)| {
            let (n, d) = distinct[k];
            side_polygon(&distinct, k, n, d).map(|w| (i, w))
        })
        .collect()
}

/// The area of a planar polygon.
pub fn area(w: &Winding) -> f64 {
    let mut total = DVec3::ZERO;
    for i in 1..w.points.len().saturating_sub(1) {
        total += (w.points[i] - w.points[0]).cross(w.points[i + 1] - w.points[0]);
    }
    total.length() * 0.5
}

/// The polygon of facet `f`: its surface plane inside its borders (a
/// facet lacking one keeps the huge base polygon on that side, which then
/// reaches leaves that do not list it).
pub fn facet_polygon(world: &World, f: usize) -> Winding {
    facet_polygon_without(world, f, None)
}

/// [`facet_polygon`], leaving out border number `skip` (counted from the
/// facet's first border) when given.
pub fn facet_polygon_without(world: &World, f: usize, skip: Option<usize>) -> Winding {
    let facet = &world.facets[f];
    let as_f64 = |p: [f32; 4]| {
        (
            DVec3::new(p[0] as f64, p[1] as f64, p[2] as f64),
            p[3] as f64,
        )
    };
    let (normal, dist) = as_f64(world.patch_planes[facet.surface_plane as usize].plane);
    let mut polygon = Winding::base_for_plane(normal, dist);
    let borders = &world.facet_borders[facet.first_border as usize..][..facet.num_borders as usize];
    for (k, border) in borders.iter().enumerate() {
        if skip == Some(k) {
            continue;
        }
        let (mut n, mut d) = as_f64(world.patch_planes[border.plane as usize].plane);
        if border.inward != 0 {
            (n, d) = (-n, -d);
        }
        // The surface plane's own back (the last border) holds the whole
        // polygon: nothing to cut (its normal, rounded to f32, is a unit
        // vector only to about 1e-7).
        if n.dot(normal).abs() > 1.0 - 1e-5 {
            continue;
        }
        if !polygon.clip_back(n, d, PLANE_SIDE_EPSILON) {
            // Numerically empty: nothing of it can be met.
            return Winding::default();
        }
    }
    polygon
}
