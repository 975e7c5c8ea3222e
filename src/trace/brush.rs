//! Clipping a moving box against one convex brush, with the reference's
//! epsilon rules (stop 1/8 unit short; "touching" counts within 1/8 unit).

use super::work::TraceWork;
use crate::math::SURFACE_CLIP_EPSILON;
use crate::world::{Brush, World};

/// Clips the trace against `brush`, updating the result when it is hit
/// strictly nearer than anything found before (the reference keeps the first
/// of two equal contacts in its traversal order).
#[inline]
pub(crate) fn trace_through_brush(world: &World, brush: &Brush, w: &mut TraceWork) {
    if brush.num_sides == 0 {
        return;
    }
    let mut enter_frac: f32 = -1.0;
    let mut leave_frac: f32 = 1.0;
    let mut clip: Option<usize> = None;
    let mut starts_out = false;
    let mut gets_out = false;
    let first = brush.first_side as usize;
    for (k, side) in world.brush_sides[first..first + brush.num_sides as usize]
        .iter()
        .enumerate()
    {
        let plane = &world.planes[side.plane as usize];
        let normal = plane.normal();
        // Shift the plane out by the box's support distance along its normal.
        let dist = plane.dist - w.offsets[plane.sign_bits as usize].dot(normal);
        let d1 = w.start.dot(normal) - dist;
        let d2 = w.end.dot(normal) - dist;
        if d2 > 0.0 {
            gets_out = true;
        }
        if d1 > 0.0 {
            starts_out = true;
        }
        // Completely in front of this face (or ending at most 1/8 unit inside
        // its "touch" zone while moving away): the brush cannot be hit.
        if d1 > 0.0 && (d2 as f64 >= SURFACE_CLIP_EPSILON || d2 >= d1) {
            return;
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
                clip = Some(first + k);
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
        // The start is inside: no contact is reported, only solidity.
        w.result.startsolid = true;
        if !gets_out {
            w.result.allsolid = true;
            w.result.fraction = 0.0;
            w.result.contents = brush.contents;
        }
        return;
    }
    if enter_frac < leave_frac && enter_frac > -1.0 && enter_frac < w.result.fraction {
        if let Some(side_index) = clip {
            let side = &world.brush_sides[side_index];
            let plane = &world.planes[side.plane as usize];
            w.result.fraction = enter_frac.max(0.0);
            w.result.normal = plane.normal();
            w.result.dist = plane.dist;
            w.result.surface_flags = side.surface_flags;
            w.result.contents = brush.contents;
        }
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
            let dist = plane.dist - w.offsets[plane.sign_bits as usize].dot(normal);
            w.start.dot(normal) - dist <= 0.0
        })
}
