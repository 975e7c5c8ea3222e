//! The world's brushes: sides, contents, surface flags and face polygons.

use super::CompileError;
use crate::margins::PLANE_SIDE_EPSILON;
use crate::math::{dvec, DVec3, Winding};
use crate::source::q3bsp::BspPlane;
use crate::source::Q3Bsp;
use crate::world::{self, WorldData};
use std::collections::HashMap;

/// Most brushes and sides a world may have (indices are stored as u32 and
/// the builder's memory grows with them).
pub const MAX_BRUSHES: usize = 1 << 20;
pub const MAX_SIDES_PER_BRUSH: usize = 4096;

/// A face of a brush: its plane (a source plane index, normal pointing out of
/// the brush) and its polygon. Sides whose polygon is empty (bevels) have none.
#[derive(Debug, Clone)]
pub struct Face {
    pub plane: u32,
    pub winding: Winding,
}

/// A brush as the tree builder sees it.
#[derive(Debug, Clone)]
pub struct BrushInput {
    /// Index into `World::brushes`.
    pub index: u32,
    pub sides: Vec<u32>,
    pub faces: Vec<Face>,
}

/// The brushes of one model as [`collect`] copied them, with the planes
/// they were given in (the source's planes as the world numbers them).
pub struct Collected {
    pub brushes: Vec<BrushInput>,
    pub planes: Vec<BspPlane>,
}

/// Copies the brushes of model `model` into `world` with the planes they
/// use, and computes each brush's face polygons.
///
/// Model 0 takes every source plane, in the source's order (its source tree
/// names planes by index), and numbers its brushes in the source's leaf
/// order (see [`source_leaf_order`]), so a lower index wins a tie. An inline
/// model is a single leaf listing its brushes in the model's order, so they
/// keep that order; it takes only the plane pairs its sides use, which keeps
/// a small model small.
pub fn collect(
    bsp: &Q3Bsp,
    model: usize,
    world: &mut WorldData,
    bevels_added: &mut usize,
) -> Result<Collected, CompileError> {
    let source = &bsp.models[model];
    if source.num_brushes as usize > MAX_BRUSHES {
        return Err(CompileError::TooLarge(MAX_BRUSHES));
    }
    let range = source.first_brush..source.first_brush + source.num_brushes;
    let mut order: Vec<u32> = range.clone().collect();
    let (planes, world_plane) = if model == 0 {
        let rank = source_leaf_order(bsp);
        order.sort_by_key(|&b| rank[(b - source.first_brush) as usize]);
        (bsp.planes.clone(), None)
    } else {
        let (planes, remap) = used_plane_pairs(bsp, range);
        (planes, Some(remap))
    };
    world.planes = planes
        .iter()
        .map(|p| world::Plane::new(p.normal, p.dist))
        .collect();
    let mut inputs = Vec::with_capacity(order.len());
    for source_index in order {
        let brush = &bsp.brushes[source_index as usize];
        if brush.num_sides as usize > MAX_SIDES_PER_BRUSH {
            return Err(CompileError::TooLarge(MAX_SIDES_PER_BRUSH));
        }
        let first_side = world.brush_sides.len() as u32;
        let mut sides = Vec::with_capacity(brush.num_sides as usize);
        for s in brush.first_side..brush.first_side + brush.num_sides {
            let side = &bsp.brush_sides[s as usize];
            let surface_flags = side
                .shader
                .map_or(0, |sh| bsp.shaders[sh as usize].surface_flags);
            let plane = world_plane
                .as_ref()
                .map_or(side.plane, |remap| remap[&side.plane]);
            world.brush_sides.push(world::BrushSide {
                plane,
                surface_flags,
            });
            sides.push(plane);
        }
        let faces = brush_faces(&planes, &sides);
        let (mins, maxs) = faces_bounds(&faces);
        let bevels = add_axial_bevels(world, &sides, &faces);
        *bevels_added += bevels;
        let index = world.brushes.len() as u32;
        world.brushes.push(world::Brush {
            first_side,
            num_sides: brush.num_sides + bevels as u32,
            contents: bsp.shaders[brush.shader as usize].content_flags,
            source_index,
            mins,
            maxs,
        });
        inputs.push(BrushInput {
            index,
            sides,
            faces,
        });
    }
    Ok(Collected {
        brushes: inputs,
        planes,
    })
}

/// The plane pairs (a plane and its flip, as the source stores them: even
/// index first) that the sides of brushes `range` use, in order of first
/// use, and where each used source plane lands in that list.
fn used_plane_pairs(
    bsp: &Q3Bsp,
    range: std::ops::Range<u32>,
) -> (Vec<BspPlane>, HashMap<u32, u32>) {
    let mut planes = Vec::new();
    let mut remap = HashMap::new();
    for brush in &bsp.brushes[range.start as usize..range.end as usize] {
        for s in brush.first_side..brush.first_side + brush.num_sides {
            let source = bsp.brush_sides[s as usize].plane;
            if remap.contains_key(&source) {
                continue;
            }
            let pair = source & !1;
            let first = planes.len() as u32;
            for (k, p) in [pair, pair | 1].into_iter().enumerate() {
                // The last plane of an odd count has no twin.
                if let Some(plane) = bsp.planes.get(p as usize) {
                    remap.insert(p, first + k as u32);
                    planes.push(*plane);
                }
            }
        }
    }
    (planes, remap)
}

/// Adds the axis-aligned planes that bound a brush when its sides lack them
/// (Quake 3 compilers always emit them; other sources may not). Without them
/// a box swept past a sharp edge would be caught by the edge's extended
/// planes far from the brush. Returns how many sides were added.
fn add_axial_bevels(world: &mut WorldData, sides: &[u32], faces: &[Face]) -> usize {
    if faces.is_empty() {
        return 0;
    }
    let (lo, hi) = faces.iter().fold(
        (DVec3::splat(f64::INFINITY), DVec3::splat(f64::NEG_INFINITY)),
        |(lo, hi), f| {
            let (a, b) = f.winding.bounds();
            (lo.min(a), hi.max(b))
        },
    );
    let mut added = 0;
    for axis in 0..3 {
        for positive in [false, true] {
            let mut normal = [0.0f32; 3];
            normal[axis] = if positive { 1.0 } else { -1.0 };
            let present = sides
                .iter()
                .any(|&p| world.planes[p as usize].normal == normal);
            if present {
                continue;
            }
            // Round outward so the bevel never cuts into the brush.
            let dist = if positive {
                (hi[axis] as f32).ceil()
            } else {
                -(lo[axis] as f32).floor()
            };
            world.planes.push(world::Plane::new(
                crate::math::Vec3::from_array(normal),
                dist,
            ));
            world.brush_sides.push(world::BrushSide {
                plane: (world.planes.len() - 1) as u32,
                surface_flags: 0,
            });
            added += 1;
        }
    }
    added
}

/// The polygon of each side: a huge square on the side's plane cut by every
/// other side. Sides that end up empty (bevels, duplicates) are left out.
fn brush_faces(planes: &[BspPlane], sides: &[u32]) -> Vec<Face> {
    let mut faces = Vec::new();
    for (i, &plane_index) in sides.iter().enumerate() {
        let plane = &planes[plane_index as usize];
        let mut winding = Winding::base_for_plane(dvec(plane.normal), plane.dist as f64);
        let mut alive = true;
        for (j, &other_index) in sides.iter().enumerate() {
            if i == j {
                continue;
            }
            if other_index == plane_index {
                // The same plane twice: keep only the first of them.
                if j < i {
                    alive = false;
                    break;
                }
                continue;
            }
            let other = &planes[other_index as usize];
            let (on_normal, on_dist) = (dvec(other.normal), other.dist as f64);
            let coplanar = winding
                .points
                .iter()
                .all(|p| (p.dot(on_normal) - on_dist).abs() <= PLANE_SIDE_EPSILON);
            if coplanar && on_normal.dot(dvec(plane.normal)) > 0.0 {
                // A nearly identical side: like an exact duplicate, keep the first.
                if j < i {
                    alive = false;
                    break;
                }
                continue;
            }
            if !winding.clip_back(on_normal, on_dist, PLANE_SIDE_EPSILON) {
                alive = false;
                break;
            }
        }
        if alive && winding_area(&winding) > 1e-3 {
            faces.push(Face {
                plane: plane_index,
                winding,
            });
        }
    }
    faces
}

fn winding_area(w: &Winding) -> f64 {
    let mut total = DVec3::ZERO;
    for i in 1..w.points.len().saturating_sub(1) {
        total += (w.points[i] - w.points[0]).cross(w.points[i + 1] - w.points[0]);
    }
    total.length() * 0.5
}

fn faces_bounds(faces: &[Face]) -> ([f32; 3], [f32; 3]) {
    let mut lo = DVec3::splat(f64::INFINITY);
    let mut hi = DVec3::splat(f64::NEG_INFINITY);
    for f in faces {
        let (a, b) = f.winding.bounds();
        lo = lo.min(a);
        hi = hi.max(b);
    }
    if faces.is_empty() {
        return ([0.0; 3], [0.0; 3]);
    }
    let down = |v: f64| (v as f32).next_down_compat();
    let up = |v: f64| (v as f32).next_up_compat();
    (
        [down(lo.x), down(lo.y), down(lo.z)],
        [up(hi.x), up(hi.y), up(hi.z)],
    )
}

/// Rounding helpers so stored bounds always contain the exact ones.
trait NextFloat {
    fn next_down_compat(self) -> f32;
    fn next_up_compat(self) -> f32;
}

impl NextFloat for f32 {
    fn next_down_compat(self) -> f32 {
        self - self.abs() * f32::EPSILON - f32::MIN_POSITIVE
    }
    fn next_up_compat(self) -> f32 {
        self + self.abs() * f32::EPSILON + f32::MIN_POSITIVE
    }
}

/// A rank for each world brush that follows the order in which the source's
/// own leaves list them. The reference tests a leaf's brushes in that order
/// and keeps the first of two equal contacts, so our leaves list brushes by
/// this rank to settle ties the same way. Orders that contradict each other
/// across leaves are broken by source index.
pub fn source_leaf_order(bsp: &Q3Bsp) -> Vec<u32> {
    use std::cmp::Reverse;
    use std::collections::{BinaryHeap, HashSet};
    let model = bsp.world_model();
    let first = model.first_brush as usize;
    let count = model.num_brushes as usize;
    let world_index = |b: u32| (b as usize).checked_sub(first).filter(|&i| i < count);
    let mut edges: HashSet<(usize, usize)> = HashSet::new();
    for leaf in &bsp.leafs {
        let start = leaf.first_leaf_brush as usize;
        let list = &bsp.leaf_brushes[start..start + leaf.num_leaf_brushes as usize];
        for pair in list.windows(2) {
            if let (Some(a), Some(b)) = (world_index(pair[0]), world_index(pair[1])) {
                if a != b {
                    edges.insert((a, b));
                }
            }
        }
    }
    let mut successors: Vec<Vec<usize>> = vec![Vec::new(); count];
    let mut in_degree = vec![0usize; count];
    for &(a, b) in &edges {
        successors[a].push(b);
        in_degree[b] += 1;
    }
    let mut ready: BinaryHeap<Reverse<usize>> = (0..count)
        .filter(|&i| in_degree[i] == 0)
        .map(Reverse)
        .collect();
    let mut rank = vec![u32::MAX; count];
    let mut next_rank = 0u32;
    let mut fallback = 0usize;
    while (next_rank as usize) < count {
        let node = match ready.pop() {
            Some(Reverse(n)) if rank[n] == u32::MAX => n,
            Some(_) => continue,
            None => {
                // A cycle: take the lowest unranked brush regardless.
                while rank[fallback] != u32::MAX {
                    fallback += 1;
                }
                fallback
            }
        };
        rank[node] = next_rank;
        next_rank += 1;
        for &s in &successors[node] {
            in_degree[s] = in_degree[s].saturating_sub(1);
            if in_degree[s] == 0 && rank[s] == u32::MAX {
                ready.push(Reverse(s));
            }
        }
    }
    rank
}
