//! A world's solid geometry as triangles: what a navigation-mesh builder or
//! a viewer starts from. Brush faces (each side's polygon, cut by the
//! brush's other sides; bevel sides, which only touch the brush, are left
//! out) and patch facets as the collision model has them, per model, with
//! each triangle's contents, surface flags and the brush or patch it came
//! from. [`glb`] and [`obj`] write the files.

pub mod glb;
pub mod obj;
pub mod polygons;

use crate::map::Map;
use crate::math::{DVec3, Winding};
use crate::world::World;

/// Corners of one brush or patch closer than this (units) are one vertex:
/// the polygons of two faces meeting at a corner are cut separately (a
/// point within the compiler's plane epsilon of a plane is not cut), so
/// their copies of the corner differ by up to about that epsilon; round
/// brushes have corners a tenth of a unit apart. An eighth of a unit is
/// the skin every trace keeps off a surface: nothing finer shows in an
/// answer.
pub const WELD: f64 = 0.125;

/// What a triangle came from, as the `source` of a [`Mesh`]: `b >= 0` is
/// brush `b` of the map file, `-1 - s` a patch, map-file surface `s`.
pub type Source = i32;

/// The source of a patch triangle: map-file surface `surface`.
pub fn patch_source(surface: u32) -> Source {
    -1 - surface.min(i32::MAX as u32) as i32
}

/// One model's triangles: `vertices` are `x,y,z` (f32, world units),
/// `triangles` three vertex indices each (front face counter-clockwise seen
/// from outside the solid), and per triangle its contents, surface flags
/// and [`Source`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mesh {
    pub vertices: Vec<f32>,
    pub triangles: Vec<u32>,
    pub contents: Vec<u32>,
    pub surface_flags: Vec<u32>,
    pub source: Vec<Source>,
}

impl Mesh {
    pub fn triangle_count(&self) -> usize {
        self.contents.len()
    }

    pub fn vertex_count(&self) -> usize {
        self.vertices.len() / 3
    }

    /// Triangle `t`'s corners.
    pub fn corners(&self, t: usize) -> [[f32; 3]; 3] {
        let v = |k: usize| {
            let i = self.triangles[3 * t + k] as usize * 3;
            [self.vertices[i], self.vertices[i + 1], self.vertices[i + 2]]
        };
        [v(0), v(1), v(2)]
    }

    /// Adds one convex polygon as a fan, its vertices welded to those of
    /// the same piece (`first_vertex` on), facing along `normal`.
    fn add_polygon(
        &mut self,
        polygon: &Winding,
        normal: DVec3,
        first_vertex: usize,
        tags: (u32, u32, Source),
    ) {
        let mut corners: Vec<u32> = Vec::with_capacity(polygon.points.len());
        for p in &polygon.points {
            let v = self.weld(*p, first_vertex);
            if corners.last() != Some(&v) && corners.first() != Some(&v) {
                corners.push(v);
            }
        }
        if corners.len() < 3 {
            return;
        }
        let point = |v: u32| {
            let i = v as usize * 3;
            DVec3::new(
                self.vertices[i] as f64,
                self.vertices[i + 1] as f64,
                self.vertices[i + 2] as f64,
            )
        };
        // Wound as the plane faces: counter-clockwise from the front.
        let turn = polygon_normal(&corners.iter().map(|&v| point(v)).collect::<Vec<_>>());
        if turn.dot(normal) < 0.0 {
            corners.reverse();
        }
        for k in 1..corners.len() - 1 {
            self.triangles
                .extend_from_slice(&[corners[0], corners[k], corners[k + 1]]);
            self.contents.push(tags.0);
            self.surface_flags.push(tags.1);
            self.source.push(tags.2);
        }
    }

    /// Whether the triangles from `first_triangle` on form closed surfaces:
    /// every edge met once in each direction.
    fn closed_from(&self, first_triangle: usize) -> bool {
        let mut uses: std::collections::HashMap<(u32, u32), u32> = Default::default();
        for t in self.triangles[3 * first_triangle..].chunks_exact(3) {
            for k in 0..3 {
                *uses.entry((t[k], t[(k + 1) % 3])).or_default() += 1;
            }
        }
        !uses.is_empty()
            && uses
                .iter()
                .all(|(&(a, b), &n)| n == 1 && uses.get(&(b, a)) == Some(&1))
    }

    /// Replaces the triangles from `first_triangle` on (one piece, its
    /// vertices from `first_vertex` on) with the convex hull of that
    /// piece's vertices, wound outward, each triangle tagged by `tag` of
    /// its outward normal. The vertices stay as they are.
    fn replace_with_hull(
        &mut self,
        first_vertex: usize,
        first_triangle: usize,
        tag: impl Fn(DVec3) -> (u32, u32, Source),
    ) {
        let points: Vec<Vec<f64>> = self.vertices[3 * first_vertex..]
            .chunks_exact(3)
            .map(|p| p.iter().map(|&c| c as f64).collect())
            .collect();
        let Ok(hull) = chull::ConvexHullWrapper::try_new(&points, None) else {
            return; // flat or too few corners: keep the faces as they were
        };
        let (hull_points, indices) = hull.vertices_indices();
        let at = |v: &[f64]| DVec3::new(v[0], v[1], v[2]);
        let centre = points.iter().map(|p| at(p)).sum::<DVec3>() / points.len() as f64;
        // The hull's vertices are some of the piece's: map them back.
        let index_of = |p: &[f64]| {
            points
                .iter()
                .position(|q| q.as_slice() == p)
                .map(|i| (first_vertex + i) as u32)
        };
        let mut triangles = Vec::with_capacity(indices.len());
        for t in indices.chunks_exact(3) {
            let corners = [&hull_points[t[0]], &hull_points[t[1]], &hull_points[t[2]]];
            let (Some(a), Some(b), Some(c)) = (
                index_of(corners[0]),
                index_of(corners[1]),
                index_of(corners[2]),
            ) else {
                return;
            };
            let [pa, pb, pc] = corners.map(|p| at(p));
            let normal = (pb - pa).cross(pc - pa);
            let outward = normal.dot(pa - centre) >= 0.0;
            let tri = if outward { [a, b, c] } else { [a, c, b] };
            let normal = if outward { normal } else { -normal };
            triangles.push((tri, tag(normal.normalize_or_zero())));
        }
        self.triangles.truncate(3 * first_triangle);
        self.contents.truncate(first_triangle);
        self.surface_flags.truncate(first_triangle);
        self.source.truncate(first_triangle);
        for (tri, (contents, flags, source)) in triangles {
            self.triangles.extend_from_slice(&tri);
            self.contents.push(contents);
            self.surface_flags.push(flags);
            self.source.push(source);
        }
    }

    /// The index of a vertex at `p` among those from `first` on, added when
    /// none is within [`WELD`].
    fn weld(&mut self, p: DVec3, first: usize) -> u32 {
        let q = p.as_vec3().to_array();
        let close = (first..self.vertex_count()).find(|&v| {
            let o = &self.vertices[3 * v..3 * v + 3];
            let d = DVec3::new(
                (o[0] - q[0]) as f64,
                (o[1] - q[1]) as f64,
                (o[2] - q[2]) as f64,
            );
            d.length_squared() <= WELD * WELD
        });
        match close {
            Some(v) => v as u32,
            None => {
                self.vertices.extend_from_slice(&q);
                (self.vertex_count() - 1) as u32
            }
        }
    }
}

/// Newell's normal of a polygon (its length is twice the area).
fn polygon_normal(points: &[DVec3]) -> DVec3 {
    let mut n = DVec3::ZERO;
    for (i, a) in points.iter().enumerate() {
        let b = points[(i + 1) % points.len()];
        n += a.cross(b);
    }
    n
}

/// All contents: the default mask.
pub const ALL_CONTENTS: u32 = u32::MAX;

/// The triangles of `world` (one model) whose contents meet `mask`: its
/// brushes' faces, then its patches' facets.
pub fn world_mesh(world: &World, mask: u32) -> Mesh {
    let mut mesh = Mesh::default();
    for brush in world.brushes.iter().filter(|b| b.contents & mask != 0) {
        let sides = &world.brush_sides[brush.first_side as usize..][..brush.num_sides as usize];
        let planes: Vec<(DVec3, f64)> = sides
            .iter()
            .map(|s| world.planes[s.plane as usize].to_f64())
            .collect();
        let first = mesh.vertex_count();
        let source = brush.source_index.min(i32::MAX as u32) as i32;
        let centre = (DVec3::from_array(brush.mins.map(f64::from))
            + DVec3::from_array(brush.maxs.map(f64::from)))
            * 0.5;
        let first_triangle = mesh.triangle_count();
        let faces = closed_faces(&planes, centre);
        for (side, polygon) in &faces {
            let tags = (brush.contents, sides[*side].surface_flags, source);
            mesh.add_polygon(polygon, planes[*side].0, first, tags);
        }
        if !mesh.closed_from(first_triangle) {
            // Round brushes whose corners lie within the weld distance of
            // faces they only graze: their welded corners' convex hull is
            // closed by construction (exact predicates), each triangle
            // tagged as the side it faces most.
            let tag = |normal: DVec3| {
                let side = faces
                    .iter()
                    .map(|(side, _)| *side)
                    .max_by(|&a, &b| planes[a].0.dot(normal).total_cmp(&planes[b].0.dot(normal)))
                    .unwrap_or(0);
                (brush.contents, sides[side].surface_flags, source)
            };
            mesh.replace_with_hull(first, first_triangle, tag);
        }
    }
    for patch in world.patches.iter().filter(|p| p.contents & mask != 0) {
        let tags = (
            patch.contents,
            patch.surface_flags,
            patch_source(patch.source_surface),
        );
        let bounds = patch_box(patch.mins, patch.maxs);
        let facets = patch.first_facet as usize..(patch.first_facet + patch.num_facets) as usize;
        let first = mesh.vertex_count();
        for f in facets {
            let mut polygon = polygons::facet_polygon(world, f);
            // A facet missing a border is open on that side; the patch's
            // bounds hold every facet the collision model can meet.
            if !bounds
                .iter()
                .all(|&(n, d)| polygon.clip_back(n, d, crate::margins::PLANE_SIDE_EPSILON))
            {
                continue;
            }
            if polygons::area(&polygon) <= MIN_FACE_AREA {
                continue;
            }
            let plane = world.patch_planes[world.facets[f].surface_plane as usize].plane;
            let normal = DVec3::new(plane[0] as f64, plane[1] as f64, plane[2] as f64);
            mesh.add_polygon(&polygon, normal, first, tags);
        }
    }
    mesh
}

/// Faces smaller than this (square units) once welded are not faces: a
/// bevel side touches its brush along an edge or at a corner only.
pub const MIN_FACE_AREA: f64 = 1e-3;

/// The visible faces of a brush with sides `planes`, each side's polygon
/// made of the brush's corners (welded) that lie on its plane, in
/// counter-clockwise order seen from outside: two faces sharing an edge
/// then share every corner along it, so the surface is closed. Sides
/// with no area left (bevels) are left out.
fn closed_faces(planes: &[(DVec3, f64)], centre: DVec3) -> Vec<(usize, Winding)> {
    let faces = polygons::brush_faces(planes, centre);
    let mut corners: Vec<DVec3> = Vec::new();
    for p in faces.iter().flat_map(|(_, w)| &w.points) {
        if !corners
            .iter()
            .any(|q| q.distance_squared(*p) <= WELD * WELD)
        {
            corners.push(*p);
        }
    }
    faces
        .into_iter()
        .map(|(side, _)| {
            let (n, d) = planes[side];
            let on: Vec<DVec3> = corners
                .iter()
                .copied()
                .filter(|v| (n.dot(*v) - d).abs() <= WELD)
                .collect();
            (side, around(on, n))
        })
        .filter(|(_, w)| wide(w))
        .collect()
}

/// Whether a polygon is a face: not thinner than [`WELD`] (its corners
/// are then welded to its neighbours', which meet without it) and not
/// smaller than [`MIN_FACE_AREA`].
fn wide(w: &Winding) -> bool {
    let n = w.points.len();
    let perimeter: f64 = (0..n)
        .map(|i| w.points[i].distance(w.points[(i + 1) % n]))
        .sum();
    let area = polygons::area(w);
    area > MIN_FACE_AREA && 2.0 * area > WELD * perimeter
}

/// `points` (on a plane with normal `n`) in counter-clockwise order seen
/// from the front, around their centroid.
fn around(points: Vec<DVec3>, n: DVec3) -> Winding {
    if points.is_empty() {
        return Winding::default();
    }
    let centre = points.iter().sum::<DVec3>() / points.len() as f64;
    let u = n.any_orthonormal_vector();
    let w = n.cross(u);
    let mut keyed: Vec<(f64, DVec3)> = points
        .into_iter()
        .map(|p| ((p - centre).dot(w).atan2((p - centre).dot(u)), p))
        .collect();
    keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
    Winding {
        points: keyed.into_iter().map(|(_, p)| p).collect(),
    }
}

/// The six planes (normals out) of the box `mins..maxs`.
fn patch_box(mins: [f32; 3], maxs: [f32; 3]) -> [(DVec3, f64); 6] {
    let mut planes = [(DVec3::ZERO, 0.0); 6];
    for k in 0..3 {
        let mut n = DVec3::ZERO;
        n[k] = 1.0;
        planes[2 * k] = (n, maxs[k] as f64);
        planes[2 * k + 1] = (-n, -(mins[k] as f64));
    }
    planes
}

/// One model's mesh: `model` 0 is the world, `k` inline model `*k` (in its
/// own coordinates, as a scene places it).
#[derive(Debug, Clone, PartialEq)]
pub struct ModelMesh {
    pub model: usize,
    pub mesh: Mesh,
}

/// Why no geometry was made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GeometryError {
    #[error("no model {model}: the world has models 0 to {last}")]
    NoSuchModel { model: usize, last: usize },
}

/// The meshes of `map`'s models (all, or only `model`), contents meeting
/// `mask`.
pub fn map_meshes(
    map: &Map,
    mask: u32,
    model: Option<usize>,
) -> Result<Vec<ModelMesh>, GeometryError> {
    let last = map.models().len();
    let models: Vec<usize> = match model {
        Some(m) if m > last => return Err(GeometryError::NoSuchModel { model: m, last }),
        Some(m) => vec![m],
        None => (0..=last).collect(),
    };
    Ok(models
        .into_iter()
        .map(|m| {
            let world = match m {
                0 => map.world(),
                k => map.models()[k - 1].world(),
            };
            ModelMesh {
                model: m,
                mesh: world_mesh(&world, mask),
            }
        })
        .collect())
}
