//! Clipping a moving box against one convex brush, with the reference's
//! epsilon rules (stop 1/8 unit short; "touching" counts within 1/8 unit).

use super::work::TraceWork;
use crate::math::SURFACE_CLIP_EPSILON;
use crate::world::{Brush, World};
use glam::{Vec3A, Vec4};

/// What clipping a move against one brush found, before it is compared
/// with the best contact so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum BrushClip {
    /// The move never touches the brush.
    Miss,
    /// The move starts inside; `gets_out`: it ends outside.
    Inside { gets_out: bool },
    /// The move enters through side `side` (index within the brush) at
    /// `frac` (may be below 0: the caller clamps), before it leaves.
    Enter { frac: f32, side: usize },
}

/// Clips the trace against `brush`, updating the result when it is hit
/// strictly nearer than anything found before (the reference keeps the first
/// of two equal contacts in its traversal order).
#[inline]
pub(crate) fn trace_through_brush(world: &World, brush: &Brush, w: &mut TraceWork) {
    match clip_brush(world, brush, w) {
        BrushClip::Miss => {}
        BrushClip::Inside { gets_out } => {
            // The start is inside: no contact is reported, only solidity.
            w.result.startsolid = true;
            if !gets_out {
                w.result.allsolid = true;
                w.result.fraction = 0.0;
                w.result.contents = brush.contents;
            }
        }
        BrushClip::Enter { frac, side } => {
            if frac < w.result.fraction {
                record_contact(world, brush, side, frac, w);
            }
        }
    }
}

/// Makes side `side` of `brush`, entered at `frac`, the trace's contact.
#[inline]
pub(crate) fn record_contact(
    world: &World,
    brush: &Brush,
    side: usize,
    frac: f32,
    w: &mut TraceWork,
) {
    let side = &world.brush_sides[brush.first_side as usize + side];
    let plane = &world.planes[side.plane as usize];
    w.result.fraction = frac.max(0.0);
    w.result.normal = plane.normal();
    w.result.dist = plane.dist;
    w.result.surface_flags = side.surface_flags;
    w.result.contents = brush.contents;
}

/// Clips the trace's move against `brush` on its own (nothing found before
/// is read).
#[inline]
pub(crate) fn clip_brush(world: &World, brush: &Brush, w: &TraceWork) -> BrushClip {
    if brush.num_sides == 0 {
        return BrushClip::Miss;
    }
    let first = brush.first_side as usize;
    let count = brush.num_sides as usize;
    let packed = &world.kernel.side_planes;
    // The kernel's copy of the side planes (one load per side) when the
    // world has one, else the file's sides and planes: the same numbers.
    if packed.len() == world.brush_sides.len() {
        let planes = &packed[first..first + count];
        if w.is_point {
            clip::<true>(count, w, |k| planes[k])
        } else {
            clip::<false>(count, w, |k| planes[k])
        }
    } else {
        let sides = &world.brush_sides[first..first + count];
        let plane = |k: usize| {
            let p = &world.planes[sides[k].plane as usize];
            Vec4::new(p.normal[0], p.normal[1], p.normal[2], p.dist)
        };
        if w.is_point {
            clip::<true>(count, w, plane)
        } else {
            clip::<false>(count, w, plane)
        }
    }
}

/// The clip itself over `count` sides, reading side `k`'s plane (normal,
/// dist) from `plane`. `RAY`: the box is a point, so the planes are not
/// shifted (shifting by a zero offset changes at most the sign of a zero
/// distance, which no test below can see).
#[inline(always)]
fn clip<const RAY: bool>(count: usize, w: &TraceWork, plane: impl Fn(usize) -> Vec4) -> BrushClip {
    let mut enter_frac: f32 = -1.0;
    let mut leave_frac: f32 = 1.0;
    let mut clip: Option<usize> = None;
    let mut starts_out = false;
    let mut gets_out = false;
    let start = Vec3A::from(w.start);
    let end = Vec3A::from(w.end);
    let lower = Vec3A::from(w.lower);
    let upper = Vec3A::from(w.extents);
    for k in 0..count {
        let p = plane(k);
        let normal = Vec3A::from_vec4(p);
        // Shift the plane out by the box's support distance along its normal:
        // the corner furthest along the negative normal.
        let dist = if RAY {
            p.w
        } else {
            p.w - Vec3A::select(normal.cmplt(Vec3A::ZERO), upper, lower).dot(normal)
        };
        let d1 = start.dot(normal) - dist;
        let d2 = end.dot(normal) - dist;
        if d2 > 0.0 {
            gets_out = true;
        }
        if d1 > 0.0 {
            starts_out = true;
        }
        // Completely in front of this face (or ending at most 1/8 unit inside
        // its "touch" zone while moving away): the brush cannot be hit.
        if d1 > 0.0 && (d2 as f64 >= SURFACE_CLIP_EPSILON || d2 >= d1) {
            return BrushClip::Miss;
        }
        if d1 <= 0.0 && d2 <= 0.0 {
            continue;
        }
        let denom = (d1 - d2) as f64;
        if d1 > d2 {
            // Entering this half-space.
            let mut f = ((d1 as f64 - SURFACE_CLIP_EPSILON) / denom) as f32;
            if f < 0.0 {
                f = 0.0;
            }
            if f > enter_frac {
                enter_frac = f;
                clip = Some(k);
            }
        } else {
            let mut f = ((d1 as f64 + SURFACE_CLIP_EPSILON) / denom) as f32;
            if f > 1.0 {
                f = 1.0;
            }
            if f < leave_frac {
                leave_frac = f;
            }
        }
    }
    if !starts_out {
        return BrushClip::Inside { gets_out };
    }
    match clip {
        Some(side) if enter_frac < leave_frac && enter_frac > -1.0 => BrushClip::Enter {
            frac: enter_frac,
            side,
        },
        _ => BrushClip::Miss,
    }
}

/// Whether the box at the trace's start overlaps `brush` (closed: touching counts).
#[inline]
pub(crate) fn box_in_brush(world: &World, brush: &Brush, w: &TraceWork) -> bool {
    if brush.num_sides == 0 {
        return false;
    }
    let first = brush.first_side as usize;
    world.brush_sides[first..first + brush.num_sides as usize]
        .iter()
        .all(|side| {
            let plane = &world.planes[side.plane as usize];
            let normal = plane.normal();
            let dist = plane.dist - w.offset(plane.sign_bits).dot(normal);
            w.start.dot(normal) - dist <= 0.0
        })
}
