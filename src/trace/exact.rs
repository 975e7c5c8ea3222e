//! Exact swept shapes: the shape cast against each brush's convex polyhedron
//! (GJK on the Minkowski difference, by parry3d), with no plane shifting.
//!
//! Two users: `exact: true` queries refine the plane-shifted sweep's candidate
//! brushes ([`trace_exact`]), and [`reference_trace`] answers by brute force
//! over every brush, the expectation tests and the accuracy report measure
//! against. Both back off from the contact as the reference kernel does: the
//! shape stops [`SURFACE_CLIP_EPSILON`] short along the contact normal.

use super::shape::Shape;
use super::sweep::with_support;
use super::work::{Scratch, TraceQuery, TraceResult};
use super::Kernel;
use crate::margins::{
    CONTACT_TOLERANCE, CUT_MARGIN, REFINE_SPAN, SURFACE_CLIP_EPSILON, VERTEX_WELD,
};
use crate::math::{dvec, DVec3, Vec3, Winding};
use crate::world::Brush;
use parry3d::math::{Pose, Vector};
use parry3d::query::details::cast_shapes_support_map_support_map;
use parry3d::query::details::distance_support_map_support_map;
use parry3d::query::details::intersection_test_support_map_support_map;
use parry3d::query::{ShapeCastHit, ShapeCastOptions};
use parry3d::shape::{Ball, Capsule, Cylinder, SupportMap};

fn pv(v: Vec3) -> Vector {
    Vector::new(v.x, v.y, v.z)
}

fn gv(v: Vector) -> Vec3 {
    Vec3::new(v.x, v.y, v.z)
}

/// The corners of a brush's convex polyhedron (each side's face, clipped by
/// every other side), in f64 world coordinates.
pub fn brush_vertices(world: &Kernel, brush: &Brush) -> Vec<DVec3> {
    polyhedron_vertices(&brush_planes(world, brush))
}

fn brush_planes(world: &Kernel, brush: &Brush) -> Vec<(DVec3, f64)> {
    let first = brush.first_side as usize;
    world.brush_sides[first..first + brush.num_sides as usize]
        .iter()
        .map(|s| world.planes[s.plane as usize].to_f64())
        .collect()
}

/// The corners of the intersection of the half-spaces `n·x <= d`.
fn polyhedron_vertices(planes: &[(DVec3, f64)]) -> Vec<DVec3> {
    let mut out: Vec<DVec3> = Vec::new();
    for (i, &(n, d)) in planes.iter().enumerate() {
        let mut w = Winding::base_for_plane(n, d);
        let kept = planes
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .all(|(_, &(m, e))| w.clip_back(m, e, 0.0));
        if !kept {
            continue;
        }
        for p in w.points {
            if !out
                .iter()
                .any(|q| q.distance_squared(p) < VERTEX_WELD * VERTEX_WELD)
            {
                out.push(p);
            }
        }
    }
    out
}

/// The part of `brush` inside the box `lo..hi`, as points relative to
/// `origin` (`None` when nothing is left). GJK in f32 loses precision on
/// polytopes thousands of units across; cut to the region a sweep can reach,
/// they stay small.
fn local_cloud(
    world: &Kernel,
    brush: &Brush,
    lo: DVec3,
    hi: DVec3,
    origin: DVec3,
) -> Option<Cloud> {
    let bmin = dvec(Vec3::from_array(brush.mins));
    let bmax = dvec(Vec3::from_array(brush.maxs));
    if bmin.cmpgt(hi).any() || bmax.cmplt(lo).any() {
        return None;
    }
    let mut planes = brush_planes(world, brush);
    for k in 0..3 {
        let mut n = DVec3::ZERO;
        n[k] = 1.0;
        planes.push((n, hi[k]));
        planes.push((-n, -lo[k]));
    }
    let points = polyhedron_vertices(&planes);
    if points.is_empty() {
        return None;
    }
    Some(Cloud(
        points
            .into_iter()
            .map(|p| {
                let r = p - origin;
                Vector::new(r.x as f32, r.y as f32, r.z as f32)
            })
            .collect(),
    ))
}

/// A point set as a parry support map (its convex hull, without building it).
struct Cloud(Vec<Vector>);

impl SupportMap for Cloud {
    fn local_support_point(&self, dir: Vector) -> Vector {
        let mut best = self.0.first().copied().unwrap_or(Vector::ZERO);
        let mut best_dot = best.dot(dir);
        for p in &self.0[1..] {
            let d = p.dot(dir);
            if d > best_dot {
                best_dot = d;
                best = *p;
            }
        }
        best
    }
}

/// A cylinder along z (parry's is along y).
struct CylinderZ(Cylinder);

impl SupportMap for CylinderZ {
    fn local_support_point(&self, dir: Vector) -> Vector {
        // Local (x, y, z) = world (x, z, -y); back again.
        let p = self
            .0
            .local_support_point(Vector::new(dir.x, dir.z, -dir.y));
        Vector::new(p.x, -p.z, p.y)
    }
}

/// The query shape as a parry support map centred at the origin.
enum ParryShape {
    Ball(Ball),
    Capsule(Capsule),
    Cylinder(CylinderZ),
    Convex(Cloud),
}

impl ParryShape {
    fn new(shape: &Shape) -> ParryShape {
        match shape {
            Shape::Sphere { radius } => ParryShape::Ball(Ball::new(*radius)),
            Shape::Capsule {
                radius,
                half_height,
            } => ParryShape::Capsule(Capsule::new_z(*half_height, *radius)),
            Shape::Cylinder {
                radius,
                half_height,
            } => ParryShape::Cylinder(CylinderZ(Cylinder::new(*half_height, *radius))),
            Shape::Convex(hull) => {
                ParryShape::Convex(Cloud(hull.points().iter().map(|p| pv(*p)).collect()))
            }
        }
    }

    fn support_map(&self) -> &dyn SupportMap {
        match self {
            ParryShape::Ball(s) => s,
            ParryShape::Capsule(s) => s,
            ParryShape::Cylinder(s) => s,
            ParryShape::Convex(s) => s,
        }
    }
}

/// What one brush does to one exact sweep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BrushOutcome {
    Miss,
    /// The shape overlaps the brush at the start; `allsolid` when at the end too.
    Inside {
        allsolid: bool,
    },
    /// First contact at `toi` (0..1 of the move), with the brush's outward
    /// normal there and the contact point on the brush (world coordinates).
    Hit {
        toi: f32,
        normal: Vec3,
        point: Vec3,
    },
}

/// Sweeps `shape` (half-size `half`, centred at `start`, moving by `motion`)
/// exactly against `brush`.
pub fn sweep_brush(
    world: &Kernel,
    brush: &Brush,
    shape: &dyn SupportMap,
    half: Vec3,
    start: Vec3,
    motion: Vec3,
) -> BrushOutcome {
    let reach = dvec(half) + DVec3::splat(CUT_MARGIN);
    let around = |at: Vec3| {
        let at = dvec(at);
        local_cloud(world, brush, at - reach, at + reach, at)
    };
    let overlaps = |at: Vec3| {
        around(at).is_some_and(|cloud| {
            intersection_test_support_map_support_map(&Pose::IDENTITY, shape, &cloud)
        })
    };
    if overlaps(start) {
        return BrushOutcome::Inside {
            allsolid: overlaps(start + motion),
        };
    }
    let Some((toi, _, _)) = cast_segment(world, brush, shape, reach, start, motion) else {
        return BrushOutcome::Miss;
    };
    // GJK's tolerance grows with the distances involved: sweep again over a
    // short span around the contact, with the brush cut close around it.
    let length = motion.length();
    let (t0, t1) = (
        (toi - REFINE_SPAN / length).max(0.0),
        (toi + REFINE_SPAN / length).min(1.0),
    );
    let from = start + motion * t0;
    let (toi, normal, point) =
        match cast_segment(world, brush, shape, reach, from, motion * (t1 - t0)) {
            Some((t, normal, point)) => (t0 + t * (t1 - t0), normal, point),
            None => cast_segment(world, brush, shape, reach, start, motion).unwrap_or_default(),
        };
    // GJK's ray cast can report a contact that is not there on thin or
    // grazing pieces; a contact is kept only when the shape, put where it
    // says, does touch the brush.
    let touching = around(start + motion * toi).is_some_and(|cloud| {
        distance_support_map_support_map(&Pose::IDENTITY, shape, &cloud) <= CONTACT_TOLERANCE
    });
    if touching {
        BrushOutcome::Hit { toi, normal, point }
    } else {
        BrushOutcome::Miss
    }
}

/// One GJK cast over a segment, with the brush cut to the swept box: time of
/// impact, the brush's outward normal and the contact point (world).
fn cast_segment(
    world: &Kernel,
    brush: &Brush,
    shape: &dyn SupportMap,
    reach: DVec3,
    start: Vec3,
    motion: Vec3,
) -> Option<(f32, Vec3, Vec3)> {
    let (a, b) = (dvec(start), dvec(start + motion));
    let cloud = local_cloud(world, brush, a.min(b) - reach, a.max(b) + reach, a)?;
    let options = ShapeCastOptions {
        max_time_of_impact: 1.0,
        stop_at_penetration: true,
        ..ShapeCastOptions::default()
    };
    let hit: ShapeCastHit =
        cast_shapes_support_map_support_map(&Pose::IDENTITY, -pv(motion), shape, &cloud, options)?;
    (hit.time_of_impact <= 1.0).then(|| {
        (
            hit.time_of_impact,
            -gv(hit.normal1).normalize_or_zero(),
            gv(hit.witness2) + start,
        )
    })
}

/// The fraction reported for a contact at `toi`: backed off so that the shape
/// stops [`SURFACE_CLIP_EPSILON`] short of the contact along its normal.
pub fn backed_off(toi: f32, motion: Vec3, normal: Vec3) -> f32 {
    let closing = -(motion.dot(normal)) as f64;
    if closing <= 0.0 {
        return toi;
    }
    ((toi as f64 - SURFACE_CLIP_EPSILON / closing) as f32).max(0.0)
}

/// Folds one brush's outcome into a trace result, as the reference kernel
/// folds brush clips: the strictly nearest contact wins; starting inside
/// marks startsolid; staying inside ends the trace all-solid.
fn fold(
    world: &Kernel,
    brush: &Brush,
    outcome: BrushOutcome,
    motion: Vec3,
    result: &mut TraceResult,
) {
    match outcome {
        BrushOutcome::Miss => {}
        BrushOutcome::Inside { allsolid } => {
            result.startsolid = true;
            if allsolid {
                result.allsolid = true;
                result.fraction = 0.0;
                result.contents = brush.contents;
            }
        }
        BrushOutcome::Hit { toi, normal, point } => {
            let fraction = backed_off(toi, motion, normal);
            if fraction < result.fraction {
                result.fraction = fraction;
                result.normal = normal;
                result.dist = normal.dot(point);
                result.surface_flags = facing_side(world, brush, normal);
                result.contents = brush.contents;
            }
        }
    }
}

/// The surface flags of the brush side facing most along `normal`.
fn facing_side(world: &Kernel, brush: &Brush, normal: Vec3) -> u32 {
    let first = brush.first_side as usize;
    world.brush_sides[first..first + brush.num_sides as usize]
        .iter()
        .map(|s| {
            (
                world.planes[s.plane as usize].normal().dot(normal),
                s.surface_flags,
            )
        })
        .fold((f32::NEG_INFINITY, 0), |a, b| if b.0 > a.0 { b } else { a })
        .1
}

/// An `exact: true` trace: the plane-shifted sweep lists the brushes the shape
/// could touch (its shifted planes bound the exact Minkowski sum, so no brush
/// the exact sweep touches is left out); each is then swept exactly. Patches
/// keep their plane-shifted contacts (their facets are not closed solids).
pub(crate) fn trace_exact(
    world: &Kernel,
    q: &TraceQuery,
    shape: &Shape,
    scratch: &mut Scratch,
) -> TraceResult {
    let (patch_result, mut candidates) =
        with_support(q, shape, |sweep| sweep.candidates(world, scratch));
    // In brush order, as the reference folds them: equal contacts and
    // all-solid brushes resolve the same way.
    candidates.sort_unstable();
    let start = q.start + shape.centre();
    let motion = q.end - q.start;
    let parry_shape = ParryShape::new(shape);
    let half = shape.half_extents();
    let mut result = TraceResult::default();
    for b in candidates {
        let brush = &world.brushes[b as usize];
        let outcome = sweep_brush(world, brush, parry_shape.support_map(), half, start, motion);
        fold(world, brush, outcome, motion, &mut result);
        if result.allsolid {
            break;
        }
    }
    if !result.allsolid {
        result.startsolid |= patch_result.startsolid;
        if patch_result.allsolid || patch_result.fraction < result.fraction {
            let startsolid = result.startsolid;
            result = patch_result;
            result.startsolid |= startsolid;
        }
    }
    result.ended(q)
}

/// Brute-force exact answers: every brush in the mask swept on its own
/// (no tree, no plane shifting); the nearest contact wins. Brushes only:
/// patches are left out.
pub fn reference_trace(world: &Kernel, q: &TraceQuery, shape: &Shape) -> TraceResult {
    let start = q.start + shape.centre();
    let motion = q.end - q.start;
    let parry_shape = ParryShape::new(shape);
    let half = shape.half_extents();
    let mut result = TraceResult::default();
    for brush in world.brushes {
        if brush.contents & q.mask == 0 {
            continue;
        }
        let outcome = sweep_brush(world, brush, parry_shape.support_map(), half, start, motion);
        fold(world, brush, outcome, motion, &mut result);
        if result.allsolid {
            break;
        }
    }
    result.ended(q)
}
