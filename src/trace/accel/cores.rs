//! Solid cores: per brush, an axis-aligned box at least [`CORE_MARGIN`]
//! inside each of its sides, and per node of the brush hierarchy
//! ([`super::bvh`]) one per child (the largest of a solid brush below),
//! derived at load. Any-hit stops at one without clipping: a move starting
//! outside a brush's cull box (grown by the box) that passes through its
//! core (grown alike) has every shifted side at least the margin beyond
//! that point, so the clip enters before it and leaves after it, a contact
//! before the end of the move: the full trace's fraction is below 1 too.

use super::bvh::{BvhNode, EMPTY_SLOT, FACET, INDEX, PATCH, PRIMITIVE, WIDTH};
use super::listing::Unlisted;
use super::{brush_planes, next_down, next_up};
use crate::contents::CONTENTS_SOLID;
use crate::margins::CORE_MARGIN;
use crate::world::World;
use glam::Vec4;

/// The cores of a node's four children in lanes (`min[axis]` holds that
/// axis's lower core bound of children 0..4), the cull boxes of the brushes
/// they belong to (unbounded for a child without a core: no start is
/// outside it), and those brushes' contents, which all have
/// [`CONTENTS_SOLID`] (0: the child has no core).
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CoreLanes {
    pub min: [Vec4; 3],
    pub max: [Vec4; 3],
    pub owner_min: [Vec4; 3],
    pub owner_max: [Vec4; 3],
    pub contents: [u32; WIDTH],
}

/// One brush's core, with the brush's cull box and contents.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Core {
    bounds: [[f32; 3]; 2],
    owner: [[f32; 3]; 2],
    contents: u32,
}

impl Core {
    /// This core cut down to child `slot`'s bounds in `node` (still at
    /// least the margin inside the brush), if anything is left.
    fn within(self, node: &BvhNode, slot: usize) -> Option<Core> {
        let lo = std::array::from_fn(|k| self.bounds[0][k].max(node.min[k][slot]));
        let hi: [f32; 3] = std::array::from_fn(|k| self.bounds[1][k].min(node.max[k][slot]));
        (0..3).all(|k| lo[k] <= hi[k]).then_some(Core {
            bounds: [lo, hi],
            ..self
        })
    }

    /// What a move is likely to cross: the core's surface.
    fn half_area(&self) -> f32 {
        let [lo, hi] = self.bounds;
        let d: [f32; 3] = std::array::from_fn(|k| hi[k] - lo[k]);
        d[0] * d[1] + d[1] * d[2] + d[2] * d[0]
    }
}

/// The cores of `nodes`' children (same indices as `nodes`); empty when no
/// solid brush has a core. `brush_bounds`: each brush's cull box.
pub fn build(
    world: &World,
    nodes: &[BvhNode],
    brush_bounds: &[[[f32; 3]; 2]],
    unlisted: &Unlisted,
) -> Vec<CoreLanes> {
    let brush_cores: Vec<Option<Core>> = world
        .brushes
        .iter()
        .zip(brush_bounds)
        .enumerate()
        .map(|(b, (brush, &owner))| {
            // A brush the source's tree does not list everywhere may be
            // passed through by the reference: no core.
            if brush.contents & CONTENTS_SOLID == 0 || unlisted.brush(b) {
                return None;
            }
            brush_core(&brush_planes(world, brush), [brush.mins, brush.maxs]).map(|bounds| Core {
                bounds,
                owner,
                contents: brush.contents,
            })
        })
        .collect();
    if brush_cores.iter().all(Option::is_none) {
        return Vec::new();
    }
    let mut lanes = vec![
        CoreLanes {
            min: [Vec4::ZERO; 3],
            max: [Vec4::ZERO; 3],
            owner_min: [Vec4::NEG_INFINITY; 3],
            owner_max: [Vec4::INFINITY; 3],
            contents: [0; WIDTH],
        };
        nodes.len()
    ];
    // The largest core below each node; children come after their parents.
    let mut largest: Vec<Option<Core>> = vec![None; nodes.len()];
    for i in (0..nodes.len()).rev() {
        for (slot, &child) in nodes[i].children.iter().enumerate() {
            let core = if child == EMPTY_SLOT || child & (PATCH | FACET) != 0 {
                None
            } else if child & PRIMITIVE != 0 {
                // The part inside this lane's bounds: a spatial split may
                // have left only a piece of the brush's box here (see
                // `bvh`), and a core stays inside its child's bounds.
                brush_cores
                    .get((child & INDEX) as usize)
                    .copied()
                    .flatten()
                    .and_then(|core| core.within(&nodes[i], slot))
            } else {
                largest.get(child as usize).copied().flatten()
            };
            let Some(core) = core else { continue };
            let lane = &mut lanes[i];
            for axis in 0..3 {
                lane.min[axis][slot] = core.bounds[0][axis];
                lane.max[axis][slot] = core.bounds[1][axis];
                lane.owner_min[axis][slot] = core.owner[0][axis];
                lane.owner_max[axis][slot] = core.owner[1][axis];
            }
            lane.contents[slot] = core.contents;
            if largest[i].is_none_or(|l| core.half_area() > l.half_area()) {
                largest[i] = Some(core);
            }
        }
    }
    lanes
}

/// A box at least [`CORE_MARGIN`] behind every plane of `planes` (the
/// brush's sides), found within the brush's bounds `[mins, maxs]`, or
/// `None` when the brush is too thin (or malformed) for one.
///
/// From each of 27 centres spread over the bounds, the box reaching to
/// within the margin of the nearer bound on each axis is shrunk about its
/// centre until every plane clears it by the margin; the largest wins. The
/// winner is then checked corner by corner in f64, so rounding never lets
/// a core touch its margin.
pub fn brush_core(planes: &[[f32; 4]], [mins, maxs]: [[f32; 3]; 2]) -> Option<[[f32; 3]; 2]> {
    if planes.is_empty() || mins.iter().chain(&maxs).any(|v| !v.is_finite()) {
        return None;
    }
    let margin = f64::from(CORE_MARGIN);
    let lo = mins.map(f64::from);
    let hi = maxs.map(f64::from);
    let steps = [0.25, 0.5, 0.75];
    let mut best: Option<([f64; 3], [f64; 3], f64)> = None;
    for fx in steps {
        for fy in steps {
            for fz in steps {
                let t = [fx, fy, fz];
                let centre: [f64; 3] = std::array::from_fn(|k| lo[k] + (hi[k] - lo[k]) * t[k]);
                let reach: [f64; 3] =
                    std::array::from_fn(|k| (centre[k] - lo[k]).min(hi[k] - centre[k]) - margin);
                if reach.iter().any(|&r| r <= 0.0) {
                    continue;
                }
                // The largest scale of `reach` that every plane clears.
                let mut scale: f64 = 1.0;
                for p in planes {
                    let n = [p[0], p[1], p[2]].map(f64::from);
                    let room = f64::from(p[3]) - margin - dot(n, centre);
                    let support: f64 = (0..3).map(|k| n[k].abs() * reach[k]).sum();
                    if room <= 0.0 {
                        scale = 0.0;
                        break;
                    }
                    if support > 0.0 {
                        scale = scale.min(room / support);
                    }
                }
                if scale <= 0.0 {
                    continue;
                }
                let half = reach.map(|r| r * scale);
                let area = half[0] * half[1] + half[1] * half[2] + half[2] * half[0];
                if best.is_none_or(|(_, _, a)| area > a) {
                    best = Some((centre, half, area));
                }
            }
        }
    }
    let (centre, half, _) = best?;
    // Rounded inward to f32, then verified.
    let core = [
        std::array::from_fn(|k| next_up((centre[k] - half[k]) as f32)),
        std::array::from_fn(|k| next_down((centre[k] + half[k]) as f32)),
    ];
    core_clears(planes, core).then_some(core)
}

/// Whether every corner of `core` lies at least [`CORE_MARGIN`] behind
/// every plane (in f64) and the box is not empty.
pub fn core_clears(planes: &[[f32; 4]], [lo, hi]: [[f32; 3]; 2]) -> bool {
    if (0..3).any(|k| lo[k] > hi[k]) {
        return false;
    }
    planes.iter().all(|p| {
        let n = [p[0], p[1], p[2]].map(f64::from);
        // The corner farthest along the normal.
        let corner: [f64; 3] =
            std::array::from_fn(|k| f64::from(if n[k] > 0.0 { hi[k] } else { lo[k] }));
        dot(n, corner) <= f64::from(p[3]) - f64::from(CORE_MARGIN)
    })
}

fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}
