//! The parry3d baseline of `bspq bench`: a triangle mesh of the world's solid
//! brushes, queried with parry's own ray cast and shape cast.
//!
//! This is measuring tooling, not library code: it only has to ask parry for
//! the same answer the kernel gives (the first contact along the segment and
//! its normal), no more and no less.

use anyhow::{anyhow, bail};
use bspq::contents::CONTENTS_SOLID;
use bspq::margins::PLANE_SIDE_EPSILON;
use bspq::math::{DVec3, Winding};
use bspq::trace::Kernel as World;
use bspq::trace::{Shape, TraceQuery};
use parry3d::math::{Pose, Vector};
use parry3d::query::{cast_shapes, Ray, RayCast, ShapeCastOptions};
use parry3d::shape::{Ball, Capsule, ConvexPolyhedron, Cuboid, Cylinder, SharedShape, TriMesh};
use std::collections::HashMap;
use std::hint::black_box;

/// Polygons with less area than this (square units) are dropped: they come
/// from bevel sides, which touch the brush along an edge or a corner only.
const MIN_FACE_AREA: f64 = 1e-3;

/// Corners closer than 1/this (units, per axis) become one mesh vertex, so
/// that faces computed separately share exact edges.
const WELD_STEPS_PER_UNIT: f32 = 1024.0;

/// The static mesh every baseline query runs against.
pub struct Baseline {
    pub mesh: TriMesh,
    pub brushes: usize,
    pub facets: usize,
    pub triangles: usize,
    pub vertices: usize,
}

/// One query in parry's terms, converted before timing starts (shapes,
/// convex hulls included, are built here, as a physics engine keeps them).
#[derive(Clone)]
pub enum ParryQuery {
    /// A ray from `origin` along `dir`; the segment ends at time 1.
    Ray(Ray),
    /// A box centred at `pose`, moving by `motion` (the segment ends at time 1).
    Box {
        pose: Pose,
        motion: Vector,
        shape: Cuboid,
    },
    /// A sphere, capsule, cylinder or convex hull posed at its centre
    /// (axis along z), moving by `motion`.
    Shape {
        pose: Pose,
        motion: Vector,
        shape: SharedShape,
    },
}

/// The first contact, as a fraction of the segment (`None`: no contact).
pub type Hit = Option<f32>;

fn v(x: f32, y: f32, z: f32) -> Vector {
    Vector::new(x, y, z)
}

fn from_glam(p: bspq::math::Vec3) -> Vector {
    v(p.x, p.y, p.z)
}

impl ParryQuery {
    pub fn new(q: &TraceQuery) -> ParryQuery {
        let motion = from_glam(q.end() - q.start());
        if let Some(shape) = &q.shape() {
            if let Some(query) = Self::shaped(q, shape) {
                return query;
            }
        }
        let centre = q.start() + (q.mins() + q.maxs()) * 0.5;
        if q.mins() == q.maxs() {
            ParryQuery::Ray(Ray::new(from_glam(centre), motion))
        } else {
            let half = (q.maxs() - q.mins()) * 0.5;
            ParryQuery::Box {
                pose: Pose::from_translation(from_glam(centre)),
                motion,
                shape: Cuboid::new(from_glam(half)),
            }
        }
    }
}

impl ParryQuery {
    /// The same shape in parry's terms (`None` for a convex point set parry
    /// cannot build a hull of).
    fn shaped(q: &TraceQuery, shape: &Shape) -> Option<ParryQuery> {
        let centre = from_glam(q.start() + shape.centre());
        let motion = from_glam(q.end() - q.start());
        let at = Pose::from_translation(centre);
        let (pose, shape) = match shape {
            Shape::Sphere { radius } => (at, SharedShape::new(Ball::new(*radius))),
            Shape::Capsule {
                radius,
                half_height,
            } => (at, SharedShape::new(Capsule::new_z(*half_height, *radius))),
            // parry's cylinder runs along y: a quarter turn about x puts it along z.
            Shape::Cylinder {
                radius,
                half_height,
            } => (
                Pose::new(centre, v(std::f32::consts::FRAC_PI_2, 0.0, 0.0)),
                SharedShape::new(Cylinder::new(*half_height, *radius)),
            ),
            Shape::Convex(hull) => {
                let points: Vec<Vector> = hull.points().iter().map(|p| from_glam(*p)).collect();
                (
                    at,
                    SharedShape::new(ConvexPolyhedron::from_convex_hull(&points)?),
                )
            }
        };
        Some(ParryQuery::Shape {
            pose,
            motion,
            shape,
        })
    }
}

impl Baseline {
    /// Builds the mesh of every brush whose contents include `CONTENTS_SOLID`.
    pub fn build(world: &World) -> anyhow::Result<Baseline> {
        let mut vertices: Vec<Vector> = Vec::new();
        let mut welded: HashMap<[i64; 3], u32> = HashMap::new();
        let mut indices: Vec<[u32; 3]> = Vec::new();
        let mut brushes = 0usize;
        let mut vertex_index = |p: DVec3| -> u32 {
            let q = [p.x as f32, p.y as f32, p.z as f32];
            let key = q.map(|c| (c * WELD_STEPS_PER_UNIT).round() as i64);
            *welded.entry(key).or_insert_with(|| {
                vertices.push(v(q[0], q[1], q[2]));
                (vertices.len() - 1) as u32
            })
        };
        for brush in world.brushes {
            if brush.contents & CONTENTS_SOLID == 0 {
                continue;
            }
            let first = brush.first_side as usize;
            let Some(sides) = world
                .brush_sides
                .get(first..first + brush.num_sides as usize)
            else {
                bail!("brush sides out of range");
            };
            let planes: Vec<(DVec3, f64)> = sides
                .iter()
                .map(|s| {
                    world
                        .planes
                        .get(s.plane as usize)
                        .map(|p| {
                            let n = p.normal;
                            (
                                DVec3::new(n[0] as f64, n[1] as f64, n[2] as f64),
                                p.dist as f64,
                            )
                        })
                        .ok_or_else(|| anyhow!("brush side plane out of range"))
                })
                .collect::<anyhow::Result<_>>()?;
            let mut any = false;
            for (i, &(normal, dist)) in planes.iter().enumerate() {
                let Some(winding) = face(&planes, i, normal, dist) else {
                    continue;
                };
                any = true;
                // The base winding runs clockwise seen from outside; emit the
                // fan the other way round so triangle normals point out.
                let ids: Vec<u32> = winding.points.iter().map(|&p| vertex_index(p)).collect();
                for k in 1..ids.len().saturating_sub(1) {
                    let tri = [ids[0], ids[k + 1], ids[k]];
                    if tri[0] != tri[1] && tri[1] != tri[2] && tri[0] != tri[2] {
                        indices.push(tri);
                    }
                }
            }
            brushes += any as usize;
        }
        // Patch facets (present when the world was opened with curves): the
        // surface plane's polygon inside the facet's border planes.
        let mut facets = 0usize;
        for patch in world.patches {
            if patch.contents & CONTENTS_SOLID == 0 {
                continue;
            }
            let first = patch.first_facet as usize;
            let Some(list) = world.facets.get(first..first + patch.num_facets as usize) else {
                bail!("patch facets out of range");
            };
            for facet in list {
                let Some(winding) = facet_polygon(world, facet) else {
                    continue;
                };
                facets += 1;
                let ids: Vec<u32> = winding.points.iter().map(|&p| vertex_index(p)).collect();
                for k in 1..ids.len().saturating_sub(1) {
                    let tri = [ids[0], ids[k + 1], ids[k]];
                    if tri[0] != tri[1] && tri[1] != tri[2] && tri[0] != tri[2] {
                        indices.push(tri);
                    }
                }
            }
        }
        if indices.is_empty() {
            bail!("the world has no solid brush faces to build a parry3d mesh from");
        }
        let (n_vertices, n_triangles) = (vertices.len(), indices.len());
        let mesh = TriMesh::new(vertices, indices)
            .map_err(|e| anyhow!("cannot build the parry3d mesh: {e}"))?;
        Ok(Baseline {
            mesh,
            brushes,
            facets,
            triangles: n_triangles,
            vertices: n_vertices,
        })
    }

    /// Answers one query: the time of impact along the segment, with the
    /// normal computed (and discarded through `black_box`) as the kernel does.
    #[inline]
    pub fn query(&self, q: &ParryQuery) -> Hit {
        match q {
            ParryQuery::Ray(ray) => {
                let hit = self
                    .mesh
                    .cast_ray_and_get_normal(&Pose::IDENTITY, ray, 1.0, true);
                black_box(hit.map(|h| h.normal));
                hit.map(|h| h.time_of_impact)
            }
            ParryQuery::Box {
                pose,
                motion,
                shape,
            } => {
                let hit = cast_shapes(
                    pose,
                    *motion,
                    shape,
                    &Pose::IDENTITY,
                    Vector::ZERO,
                    &self.mesh,
                    ShapeCastOptions::with_max_time_of_impact(1.0),
                )
                .ok()
                .flatten();
                black_box(hit.map(|h| h.normal1));
                hit.map(|h| h.time_of_impact)
            }
            ParryQuery::Shape {
                pose,
                motion,
                shape,
            } => {
                let hit = cast_shapes(
                    pose,
                    *motion,
                    shape.as_ref(),
                    &Pose::IDENTITY,
                    Vector::ZERO,
                    &self.mesh,
                    ShapeCastOptions::with_max_time_of_impact(1.0),
                )
                .ok()
                .flatten();
                black_box(hit.map(|h| h.normal1));
                hit.map(|h| h.time_of_impact)
            }
        }
    }
}

/// The polygon of side `i`: a huge square on its plane cut by every other side.
fn face(planes: &[(DVec3, f64)], i: usize, normal: DVec3, dist: f64) -> Option<Winding> {
    let mut winding = Winding::base_for_plane(normal, dist);
    for (j, &(other, other_dist)) in planes.iter().enumerate() {
        if i == j {
            continue;
        }
        if other == normal && other_dist == dist {
            // The same plane twice: keep only the first.
            if j < i {
                return None;
            }
            continue;
        }
        if !winding.clip_back(other, other_dist, PLANE_SIDE_EPSILON) {
            return None;
        }
    }
    (area(&winding) > MIN_FACE_AREA).then_some(winding)
}

fn patch_plane(world: &World, index: u32) -> Option<(DVec3, f64)> {
    let p = world.patch_planes.get(index as usize)?.plane;
    Some((
        DVec3::new(p[0] as f64, p[1] as f64, p[2] as f64),
        p[3] as f64,
    ))
}

/// A facet's polygon: a huge square on its surface plane cut by its borders
/// (flipped when inward). Borders parallel to the surface (the back face
/// that gives the facet its thickness) do not bound the polygon.
fn facet_polygon(world: &World, facet: &bspq::world::Facet) -> Option<Winding> {
    let (normal, dist) = patch_plane(world, facet.surface_plane)?;
    let mut winding = Winding::base_for_plane(normal, dist);
    let first = facet.first_border as usize;
    let borders = world
        .facet_borders
        .get(first..first + facet.num_borders as usize)?;
    for b in borders {
        let (mut n, mut d) = patch_plane(world, b.plane)?;
        if b.inward != 0 {
            (n, d) = (-n, -d);
        }
        if n.dot(normal).abs() > 1.0 - 1e-6 {
            continue;
        }
        if !winding.clip_back(n, d, PLANE_SIDE_EPSILON) {
            return None;
        }
    }
    (area(&winding) > MIN_FACE_AREA).then_some(winding)
}

fn area(w: &Winding) -> f64 {
    let mut total = DVec3::ZERO;
    for i in 1..w.points.len().saturating_sub(1) {
        total += (w.points[i] - w.points[0]).cross(w.points[i + 1] - w.points[0]);
    }
    total.length() * 0.5
}
