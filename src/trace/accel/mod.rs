//! What the kernel derives from a validated world at load (not in the
//! file): one 64-byte record per node with its plane inline, each child's
//! OR of contents below it and bounds of everything below it (a walk skips
//! subtrees with nothing in its mask or out of reach); per brush, the box
//! its axial sides enclose; and per brush and patch facet, its planes four
//! to a record in SIMD lanes, so a clip meets four planes at a time.
//!
//! Skipping by bounds is exact: a brush with all six axial sides rejects,
//! on its first such side, any box more than [`CULL_MARGIN`] outside it
//! (before the clip writes anything); other brushes, and patches, get
//! unbounded boxes.

pub mod border_starts;
pub mod bvh;
pub mod cores;
pub mod listing;
pub mod occupancy;
pub mod onion;

use crate::margins::{CULL_MARGIN, PATCH_CULL_MARGIN};
use crate::world::{Brush, Leaf, World};
use border_starts::BorderStarts;
use bvh::Bvh;
use glam::{Vec3A, Vec4};
use listing::Unlisted;
use occupancy::Occupancy;
use onion::OnionTrees;

/// SIMD-width fields first, so a step loads the plane and the bounds with
/// one aligned 16-byte load each (one cache line per node).
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KernelNode {
    /// The node plane: normal in `xyz`, distance in `w`, copied from
    /// `planes[node.plane]`.
    pub plane: Vec4,
    /// Bounds of the cull boxes of everything below this node, grown by
    /// [`CULL_MARGIN`] (infinite when anything below is unbounded).
    pub mins: Vec3A,
    pub maxs: Vec3A,
    /// As [`crate::world::Node::children`].
    pub children: [i32; 2],
    /// OR of the contents of the brushes and patches listed in the leaves
    /// under each child (0: nothing below can be hit by any mask).
    pub contents_below: [u32; 2],
}
const _: () = assert!(std::mem::size_of::<KernelNode>() == 64);

/// Four brush sides' planes in SIMD lanes: lane `k` holds side `k`'s
/// normal (`x`, `y`, `z`) and distance. A brush whose side count is not a
/// multiple of four fills its last record with [`SideLanes::PADDING`].
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SideLanes {
    pub x: Vec4,
    pub y: Vec4,
    pub z: Vec4,
    pub dist: Vec4,
}
const _: () = assert!(std::mem::size_of::<SideLanes>() == 64);

impl SideLanes {
    /// The plane of an unused lane, `0·p <= -1`: every point is behind it,
    /// by 1 unit whatever a box's shift, so no move crosses or leaves it.
    pub const PADDING: [f32; 4] = [0.0, 0.0, 0.0, 1.0];

    /// Planes (`[x, y, z, dist]`) four to a record, the last one padded.
    pub(crate) fn records(planes: &[[f32; 4]]) -> impl Iterator<Item = SideLanes> + '_ {
        planes.chunks(4).map(SideLanes::new)
    }

    /// Lanes of up to four planes (`[x, y, z, dist]`), padded.
    fn new(planes: &[[f32; 4]]) -> Self {
        let plane = |k: usize| planes.get(k).copied().unwrap_or(Self::PADDING);
        let p = [plane(0), plane(1), plane(2), plane(3)];
        let lane = |c: usize| Vec4::new(p[0][c], p[1][c], p[2][c], p[3][c]);
        SideLanes {
            x: lane(0),
            y: lane(1),
            z: lane(2),
            dist: lane(3),
        }
    }
}

/// A brush of six axial sides, one facing each way (a box: most brushes
/// of most maps), for the box clip's shortcut (`trace::brush`):
/// lane `k` of `pos` is the distance of the side whose normal is `+e_k`,
/// of `neg` the side whose normal is `-e_k`; `pos_side` and `neg_side`
/// hold those sides' indices within the brush (as `f32`, exact).
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AxialBrush {
    pub pos: Vec3A,
    pub neg: Vec3A,
    pub pos_side: Vec3A,
    pub neg_side: Vec3A,
}
const _: () = assert!(std::mem::size_of::<AxialBrush>() == 64);

impl AxialBrush {
    /// The record of a brush with these side planes (`[x, y, z, dist]`, in
    /// side order), if it is an axial box: six sides, each normal a unit
    /// axis exactly, each of the six directions once.
    pub(crate) fn of(planes: &[[f32; 4]]) -> Option<Self> {
        if planes.len() != 6 {
            return None;
        }
        let mut pos = [None; 3];
        let mut neg = [None; 3];
        for (side, p) in planes.iter().enumerate() {
            let axis = (0..3).find(|&k| p[k].abs() == 1.0)?;
            if (0..3).any(|k| k != axis && p[k] != 0.0) {
                return None;
            }
            let slot = if p[axis] > 0.0 {
                &mut pos[axis]
            } else {
                &mut neg[axis]
            };
            if slot.replace((p[3], side as f32)).is_some() {
                return None;
            }
        }
        let lanes = |v: [Option<(f32, f32)>; 3], pick: fn((f32, f32)) -> f32| {
            Some(Vec3A::new(pick(v[0]?), pick(v[1]?), pick(v[2]?)))
        };
        Some(AxialBrush {
            pos: lanes(pos, |x| x.0)?,
            neg: lanes(neg, |x| x.0)?,
            pos_side: lanes(pos, |x| x.1)?,
            neg_side: lanes(neg, |x| x.1)?,
        })
    }
}

/// What the kernel derives from one world when it is loaded (not part of
/// the file format): its trees, lanes and grids.
#[derive(Debug, Clone, Default)]
pub struct Accel {
    /// One per node of the world, same indices (a child whose subtree's
    /// leaves all carry the same record points straight at one of them).
    pub nodes: Vec<KernelNode>,
    /// Per brush: its axial box grown by [`CULL_MARGIN`] as `[mins, maxs]`
    /// (infinite when the brush lacks an axial side).
    pub brush_bounds: Vec<[[f32; 3]; 2]>,
    /// The brushes' side planes, four to a record, each brush's sides in
    /// order from its own first record (see [`SideLanes`]), then its shape
    /// bevels' planes (the shape clip's) from the next record on ...
    pub side_lanes: Vec<SideLanes>,
    /// ... which this holds, per brush.
    pub brush_lanes: Vec<u32>,
    /// The axial boxes among the brushes ...
    pub axial_brushes: Vec<AxialBrush>,
    /// ... and which one each brush is (`u32::MAX`: not one).
    pub brush_axial: Vec<u32>,
    /// The patch facets' planes, four to a record: each facet's surface
    /// plane, then its borders (inward ones flipped), from its own first
    /// record ...
    pub facet_lanes: Vec<SideLanes>,
    /// ... which this holds, per facet (see [`FacetLanes`]).
    pub facets: Vec<FacetLanes>,
    /// Per patch, the bounds a move's swept box must reach for the patch
    /// to be clipped (see [`patch_reach`]).
    pub patch_reach: Vec<[Vec3A; 2]>,
    /// The brushes and patches in a four-wide bounding-volume hierarchy, for
    /// the fast trace ([`bvh`]).
    pub bvh: Bvh,
    /// The brushes and facets the source's tree does not list everywhere
    /// they reach: the fast trace leaves contacts with them to the walk
    /// ([`listing`]).
    pub unlisted: Unlisted,
    /// Where a ray starting on a facet's border plane may meet the facet
    /// outside its bounds: such rays take the walk ([`border_starts`]).
    pub border_starts: BorderStarts,
    /// Which cells of a coarse grid anything reaches into: the batch
    /// kernel answers the moves that reach none without a search
    /// ([`occupancy`]).
    pub occupancy: Occupancy,
    /// Per node of the source's tree (empty when the world has none): what
    /// lies below it, so that the walk that decides the visit order skips
    /// the subtrees nothing near the move lies in, as the packed walk does.
    pub source_below: Vec<Below>,
    /// The onion hulls' trees (empty without hulls).
    pub onion: OnionTrees,
}

/// What lies below a node: the bounds of the cull boxes of everything
/// listed in the leaves under it (grown by [`CULL_MARGIN`]; a patch's
/// bounds by [`PATCH_CULL_MARGIN`]; infinite when anything is unbounded),
/// and per child the OR of their contents.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Below {
    pub mins: Vec3A,
    pub maxs: Vec3A,
    pub contents: [u32; 2],
}

/// Where a facet's planes start in [`Accel::facet_lanes`], and which of
/// them are inward borders (bit `k`: plane `k`, the surface plane being
/// plane 0), which a box pushes out by its support along the border's own,
/// unflipped normal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FacetLanes {
    pub first: u32,
    pub inward: u32,
}

// The surface plane and each border need an `inward` bit.
const _: () = assert!(crate::world::MAX_FACET_BORDERS < u32::BITS as usize);

impl Accel {
    /// This tree without its eight-wide trees: the full trace then takes
    /// the four-wide search, as on processors without AVX2 (for tests and
    /// benchmarks comparing the two).
    pub fn without_wide_trees(&self) -> Accel {
        let mut four = self.clone();
        four.bvh.wide = Default::default();
        four
    }

    /// Rebuilds the brushes' lanes for `world`: the world this tree was
    /// built from, with other shape bevels. The lanes hold each brush's
    /// bevels after its sides, so a tree kept across a change of bevels
    /// would clip shapes against the old ones (or past their end).
    pub fn set_shape_bevels(&mut self, world: &World) {
        (self.side_lanes, self.brush_lanes) = side_lanes(world);
    }
}

const UNBOUNDED: [[f32; 3]; 2] = [[f32::NEG_INFINITY; 3], [f32::INFINITY; 3]];

/// The box a brush's axial sides enclose, grown by the margin (rounded
/// outward), or unbounded.
fn brush_cull_bounds(world: &World, brush: &Brush) -> [[f32; 3]; 2] {
    let sides = &world.brush_sides[brush.first_side as usize..][..brush.num_sides as usize];
    let planes = sides.iter().map(|side| {
        let p = &world.planes[side.plane as usize];
        [p.normal[0], p.normal[1], p.normal[2], p.dist]
    });
    let margin = CULL_MARGIN as f64;
    axial_box(planes).map_or(UNBOUNDED, |[lo, hi]| {
        [
            lo.map(|v| next_down((v as f64 - margin) as f32)),
            hi.map(|v| next_up((v as f64 + margin) as f32)),
        ]
    })
}

/// The box the axial planes among `planes` (`[normal, dist]`, facing out)
/// enclose, or `None` when one of the six is missing.
pub(crate) fn axial_box(planes: impl Iterator<Item = [f32; 4]>) -> Option<[[f32; 3]; 2]> {
    let mut lo = [f32::NEG_INFINITY; 3];
    let mut hi = [f32::INFINITY; 3];
    for p in planes {
        for axis in 0..3 {
            if (0..3).any(|k| k != axis && p[k] != 0.0) {
                continue;
            }
            if p[axis] == 1.0 {
                hi[axis] = hi[axis].min(p[3]);
            } else if p[axis] == -1.0 {
                lo[axis] = lo[axis].max(-p[3]);
            }
        }
    }
    lo.iter()
        .chain(&hi)
        .all(|v| v.is_finite())
        .then_some([lo, hi])
}

pub(crate) fn next_up(v: f32) -> f32 {
    if v.is_finite() {
        v + v.abs() * f32::EPSILON + f32::MIN_POSITIVE
    } else {
        v
    }
}

pub(crate) fn next_down(v: f32) -> f32 {
    -next_up(-v)
}

/// Builds the kernel tree of a validated world (children after parents, as
/// validation guarantees, so one backward pass sums the subtrees).
pub fn build(world: &World) -> Accel {
    let brush_bounds: Vec<[[f32; 3]; 2]> = world
        .brushes
        .iter()
        .map(|b| brush_cull_bounds(world, b))
        .collect();
    // Contents and bounds of a leaf's brushes and patches.
    let leaf_summary = |leaf: usize| {
        let listed = (world.leaf_brushes, world.leaf_patches);
        leaf_summary(world, &brush_bounds, &world.leaves[leaf], listed, None)
    };
    let mut nodes: Vec<KernelNode> = world
        .nodes
        .iter()
        .map(|n| {
            let p = &world.planes[n.plane as usize];
            KernelNode {
                plane: Vec4::new(p.normal[0], p.normal[1], p.normal[2], p.dist),
                mins: Vec3A::INFINITY,
                maxs: Vec3A::NEG_INFINITY,
                children: n.children,
                contents_below: [0; 2],
            }
        })
        .collect();
    // A subtree whose leaves all carry one record (an onion hull's
    // refinement of one leaf, or empty cells only) lists the same brushes
    // and patches in the same order as that one leaf, so the walk meets it
    // as the leaf: rays and boxes walk a world with hulls as they walk the
    // world without them.
    let leaf_record = |child: i32| world.leaves[(-1 - child) as usize];
    let mut uniform: Vec<Option<i32>> = vec![None; nodes.len()];
    for i in (0..nodes.len()).rev() {
        let mut bounds = [[f32::INFINITY; 3], [f32::NEG_INFINITY; 3]];
        for side in 0..2 {
            let child = nodes[i].children[side];
            let (contents, child_bounds) = if child >= 0 {
                let c = &nodes[child as usize];
                (
                    c.contents_below[0] | c.contents_below[1],
                    [c.mins.to_array(), c.maxs.to_array()],
                )
            } else {
                leaf_summary((-1 - child) as usize)
            };
            nodes[i].contents_below[side] = contents;
            bounds = union(bounds, child_bounds);
        }
        nodes[i].mins = Vec3A::from_array(bounds[0]);
        nodes[i].maxs = Vec3A::from_array(bounds[1]);
        let as_leaf = nodes[i]
            .children
            .map(|c| if c < 0 { Some(c) } else { uniform[c as usize] });
        for (child, leaf) in nodes[i].children.iter_mut().zip(as_leaf) {
            if let Some(leaf) = leaf {
                *child = leaf;
            }
        }
        uniform[i] = match as_leaf {
            [Some(a), Some(b)] if leaf_record(a) == leaf_record(b) => Some(a),
            _ => None,
        };
    }
    let (side_lanes, brush_lanes) = side_lanes(world);
    let mut axial_brushes = Vec::new();
    let brush_axial = world
        .brushes
        .iter()
        .map(|brush| match AxialBrush::of(&brush_planes(world, brush)) {
            // (Past `u32::MAX - 1` records, brushes keep the side clip.)
            Some(a) => u32::try_from(axial_brushes.len()).map_or(u32::MAX, |at| {
                axial_brushes.push(a);
                at
            }),
            None => u32::MAX,
        })
        .collect();
    let (facet_lanes, facets) = facet_lanes(world);
    let patch_reach = world.patches.iter().map(patch_reach).collect();
    let unlisted = listing::find(world);
    let bvh = bvh::build(world, &brush_bounds, &unlisted);
    let occupancy = Occupancy::build(&bvh);
    let source_below = source_below(world, &brush_bounds);
    let mut accel = Accel {
        nodes,
        brush_bounds,
        side_lanes,
        brush_lanes,
        axial_brushes,
        brush_axial,
        facet_lanes,
        facets,
        patch_reach,
        bvh,
        unlisted,
        border_starts: BorderStarts::build(world),
        occupancy,
        source_below,
        onion: onion::build(world),
    };
    // Whether single moves ask the grid: chosen from sample moves, which
    // need the rest built.
    accel.occupancy.single =
        crate::trace::sieve::choose(&crate::trace::Kernel::new(*world, &accel));
    accel
}

/// The bounds of `patch` that a move's swept box reaches exactly when the
/// reference's test passes, each bound within the clip epsilon in `f64`
/// (`max >= min - epsilon` and `min <= max + epsilon` per axis): those
/// bounds rounded inward to `f32`, so the test takes two `f32` compares in
/// lanes. An `f32` is at least a value exactly when it is at least the
/// smallest `f32` not below it (and alike at most); a NaN bound stays NaN
/// and fails either way.
fn patch_reach(patch: &crate::world::Patch) -> [Vec3A; 2] {
    let at_least = |v: f64| {
        let near = v as f32;
        if (near as f64) < v {
            near.next_up()
        } else {
            near
        }
    };
    let at_most = |v: f64| {
        let near = v as f32;
        if (near as f64) > v {
            near.next_down()
        } else {
            near
        }
    };
    let eps = crate::margins::SURFACE_CLIP_EPSILON;
    [
        Vec3A::from_array(patch.mins.map(|v| at_least(v as f64 - eps))),
        Vec3A::from_array(patch.maxs.map(|v| at_most(v as f64 + eps))),
    ]
}

/// The OR of the contents of what `leaf` lists (in `listed`: the tree's
/// leaf brush and leaf patch lists) and the union of their cull boxes: a
/// patch unbounded, or, with `patch_margin`, its bounds grown by that.
/// The lists were validated with the tree.
fn leaf_summary(
    world: &World,
    brush_bounds: &[[[f32; 3]; 2]],
    leaf: &Leaf,
    (leaf_brushes, leaf_patches): (&[u32], &[u32]),
    patch_margin: Option<f32>,
) -> (u32, [[f32; 3]; 2]) {
    let brushes = &leaf_brushes[leaf.first_brush as usize..][..leaf.num_brushes as usize];
    let patches = &leaf_patches[leaf.first_patch as usize..][..leaf.num_patches as usize];
    let mut contents = 0;
    let mut bounds = [[f32::INFINITY; 3], [f32::NEG_INFINITY; 3]];
    for &b in brushes {
        contents |= world.brushes[b as usize].contents;
        bounds = union(bounds, brush_bounds[b as usize]);
    }
    for &p in patches {
        let patch = &world.patches[p as usize];
        contents |= patch.contents;
        bounds = match patch_margin {
            Some(by) => union(
                bounds,
                [patch.mins.map(|v| v - by), patch.maxs.map(|v| v + by)],
            ),
            None => UNBOUNDED,
        };
    }
    (contents, bounds)
}

/// [`Accel::source_below`]: one backward pass over the source's nodes
/// (validation puts every child after its parent).
fn source_below(world: &World, brush_bounds: &[[[f32; 3]; 2]]) -> Vec<Below> {
    let tree = &world.source;
    if !tree.is_present() {
        return Vec::new();
    }
    let leaf_summary = |leaf: usize| {
        let listed = (tree.leaf_brushes, tree.leaf_patches);
        let margin = Some(PATCH_CULL_MARGIN);
        leaf_summary(world, brush_bounds, &tree.leaves[leaf], listed, margin)
    };
    let mut below = vec![
        Below {
            mins: Vec3A::INFINITY,
            maxs: Vec3A::NEG_INFINITY,
            contents: [0; 2],
        };
        tree.nodes.len()
    ];
    for i in (0..tree.nodes.len()).rev() {
        let mut bounds = [[f32::INFINITY; 3], [f32::NEG_INFINITY; 3]];
        for side in 0..2 {
            let child = tree.nodes[i].children[side];
            let (contents, child_bounds) = match usize::try_from(child) {
                Ok(c) => below.get(c).map_or((u32::MAX, UNBOUNDED), |b| {
                    (
                        b.contents[0] | b.contents[1],
                        [b.mins.to_array(), b.maxs.to_array()],
                    )
                }),
                Err(_) => leaf_summary((-1 - i64::from(child)) as usize),
            };
            below[i].contents[side] = contents;
            bounds = union(bounds, child_bounds);
        }
        below[i].mins = Vec3A::from_array(bounds[0]);
        below[i].maxs = Vec3A::from_array(bounds[1]);
    }
    below
}

/// Every facet's planes in lanes (surface, then borders, inward ones
/// flipped), as the box and shape clips meet them.
pub(crate) fn facet_lanes(world: &World) -> (Vec<SideLanes>, Vec<FacetLanes>) {
    let mut lanes = Vec::new();
    let mut facets = Vec::with_capacity(world.facets.len());
    let plane = |index: u32, flip: bool| {
        let p = world.patch_planes[index as usize].plane;
        if flip {
            p.map(|v| -v)
        } else {
            p
        }
    };
    for facet in world.facets {
        let borders =
            &world.facet_borders[facet.first_border as usize..][..facet.num_borders as usize];
        // (Fewer than 2^32 records: a world file of at most 512 MB holds
        // under 2^26 facets of at most seven records each.)
        let first = lanes.len() as u32;
        let planes: Vec<[f32; 4]> = std::iter::once(plane(facet.surface_plane, false))
            .chain(borders.iter().map(|b| plane(b.plane, b.inward != 0)))
            .collect();
        let inward = borders
            .iter()
            .enumerate()
            .filter(|(_, b)| b.inward != 0)
            .fold(0u32, |bits, (k, _)| bits | 1 << (k + 1));
        lanes.extend(SideLanes::records(&planes));
        facets.push(FacetLanes { first, inward });
    }
    (lanes, facets)
}

/// Every brush's side planes in lanes, followed by its shape bevels' (from
/// a record of their own), and each brush's first record (none
/// at all if the records outnumber a `u32`: then the kernel is not used).
fn side_lanes(world: &World) -> (Vec<SideLanes>, Vec<u32>) {
    let mut lanes = Vec::new();
    let mut first = Vec::with_capacity(world.brushes.len());
    for (b, brush) in world.brushes.iter().enumerate() {
        let Ok(at) = u32::try_from(lanes.len()) else {
            return (Vec::new(), Vec::new());
        };
        first.push(at);
        lanes.extend(SideLanes::records(&brush_planes(world, brush)));
        let bevels: Vec<[f32; 4]> = world
            .shape_bevels_of(b)
            .iter()
            .map(|bevel| {
                let [x, y, z] = bevel.normal;
                [x, y, z, bevel.dist]
            })
            .collect();
        lanes.extend(SideLanes::records(&bevels));
    }
    (lanes, first)
}

/// A brush's side planes as `[x, y, z, dist]`, in side order.
pub(crate) fn brush_planes(world: &World, brush: &Brush) -> Vec<[f32; 4]> {
    world.brush_sides[brush.first_side as usize..][..brush.num_sides as usize]
        .iter()
        .map(|side| {
            let p = &world.planes[side.plane as usize];
            [p.normal[0], p.normal[1], p.normal[2], p.dist]
        })
        .collect()
}

/// The box around two boxes (`[mins, maxs]`).
pub(crate) fn union(a: [[f32; 3]; 2], b: [[f32; 3]; 2]) -> [[f32; 3]; 2] {
    [
        std::array::from_fn(|i| a[0][i].min(b[0][i])),
        std::array::from_fn(|i| a[1][i].max(b[1][i])),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A patch's reach bounds in `f32` admit exactly the values the
    /// reference's `f64` test admits, also where the grown bound falls
    /// between two `f32` (large or finely fractional bounds).
    #[test]
    fn patch_reach_rounds_inward_exactly() {
        let bounds = [
            0.0f32,
            -1.0,
            0.1,
            -0.3,
            1000.0625,
            3.0e7,
            -3.0e7,
            16_777_217.0,
            1.0e-30,
            8.0e6,
        ];
        let mut patch: crate::world::Patch = bytemuck::Zeroable::zeroed();
        for &b in &bounds {
            patch.mins = [b; 3];
            patch.maxs = [b; 3];
            let [min, max] = patch_reach(&patch);
            let eps = crate::margins::SURFACE_CLIP_EPSILON;
            for grown in [b as f64 - eps, b as f64 + eps] {
                let mut x = grown as f32;
                for _ in 0..3 {
                    x = x.next_down();
                }
                for _ in 0..7 {
                    assert_eq!(x >= min.x, x as f64 >= b as f64 - eps, "{b}: {x} over min");
                    assert_eq!(x <= max.x, x as f64 <= b as f64 + eps, "{b}: {x} under max");
                    x = x.next_up();
                }
            }
        }
    }
}
