//! The kernel's candidate finder: a four-wide bounding-volume hierarchy over
//! the world's brushes and patches, derived when a world is loaded (not part
//! of the file format).
//!
//! The BSP walk answers in the reference's order, which only matters when
//! two contacts tie; the fast trace (`trace::fast`) finds the brushes and
//! patches near a move with this tree instead, clips each on its own, and
//! hands the rare order-dependent answers back to the BSP walk.
//!
//! Each node holds the bounds of its (up to) four children as structure of
//! arrays, so one node step tests a moving box against four boxes in four
//! lanes. A child is another node or one primitive: a brush, a patch facet,
//! or a whole patch. Primitive bounds are cull boxes (see
//! [`super::kernel`]): the box a brush's or facet's axial planes enclose,
//! grown by [`CULL_MARGIN`], so a move that stays outside them cannot touch
//! the primitive (the clip rejects it on an axial plane). A patch with a
//! facet that lacks one of the six axial planes stays one primitive with
//! the patch's bounds, which the patch clip itself checks first; brushes
//! without all six axial sides have no box and are tested by every trace.
//!
//! Brushes and patches get a tree each: a ray's patch hit can replace a
//! contact found earlier (see `trace::fast`), so rays search the patch tree
//! to the end of the move, whatever the brushes already hit.

use super::cores::CoreLanes;
use super::kernel::CULL_MARGIN;
use super::listing::Unlisted;
use super::World;
use glam::Vec4;

/// Children per node: one SSE lane each.
pub const WIDTH: usize = 4;

/// A child reference: a node index, or (top bit set) a primitive.
pub const PRIMITIVE: u32 = 1 << 31;
/// Set with [`PRIMITIVE`]: the primitive is a whole patch, not a brush.
pub const PATCH: u32 = 1 << 30;
/// Set with [`PRIMITIVE`]: the primitive is one patch facet.
pub const FACET: u32 = 1 << 29;
/// The index bits of a primitive reference.
pub const INDEX: u32 = FACET - 1;
/// An unused child slot (its contents are 0, so no mask selects it).
pub const EMPTY_SLOT: u32 = u32::MAX;

/// One node: child bounds as lanes (`min[axis]` holds that axis's lower
/// bound of children 0..4), child references and the OR of the contents
/// below each child.
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BvhNode {
    pub min: [Vec4; 3],
    pub max: [Vec4; 3],
    pub children: [u32; WIDTH],
    pub contents: [u32; WIDTH],
}
const _: () = assert!(std::mem::size_of::<BvhNode>() == 128);

/// The trees of one world (each empty when it has nothing with bounds).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Bvh {
    /// The brushes' tree: root first, children after their parents.
    pub brushes: Vec<BvhNode>,
    /// Per node of the brushes' tree, its children's solid cores (empty
    /// when no brush has one; see [`super::cores`]).
    pub brush_cores: Vec<CoreLanes>,
    /// The patches' tree (facets, and patches kept whole).
    pub patches: Vec<BvhNode>,
    /// Primitives without bounds (child references), tested by every trace.
    pub unbounded: Vec<u32>,
    /// Per facet, the patch it belongs to.
    pub facet_patch: Vec<u32>,
    /// The most entries a search's stack can hold at once in either tree.
    pub stack_depth: usize,
}

impl Bvh {
    pub const EMPTY: Bvh = Bvh {
        brushes: Vec::new(),
        brush_cores: Vec::new(),
        patches: Vec::new(),
        unbounded: Vec::new(),
        facet_patch: Vec::new(),
        stack_depth: 0,
    };
}

/// A primitive as the builder sees it.
#[derive(Debug, Clone, Copy)]
struct Item {
    reference: u32,
    contents: u32,
    lo: [f32; 3],
    hi: [f32; 3],
}

impl Item {
    fn centre(&self, axis: usize) -> f32 {
        (self.lo[axis] + self.hi[axis]) * 0.5
    }
}

/// Builds the trees over `world`'s brushes (with their cull boxes from
/// `brush_bounds`) and patches. Primitives with no contents are left out:
/// no mask selects them.
pub fn build(world: &World, brush_bounds: &[[[f32; 3]; 2]], unlisted: &Unlisted) -> Bvh {
    let mut brush_items = Vec::with_capacity(world.brushes.len());
    let mut unbounded = Vec::new();
    for (i, (brush, bounds)) in world.brushes.iter().zip(brush_bounds).enumerate() {
        if brush.contents == 0 {
            continue;
        }
        let reference = PRIMITIVE | i as u32;
        if bounds.iter().flatten().all(|v| v.is_finite()) {
            brush_items.push(Item {
                reference,
                contents: brush.contents,
                lo: bounds[0],
                hi: bounds[1],
            });
        } else {
            unbounded.push(reference);
        }
    }
    let mut patch_items = Vec::new();
    let mut facet_patch = vec![0u32; world.facets.len()];
    for (i, patch) in world.patches.iter().enumerate() {
        let first = patch.first_facet as usize;
        let facets = first..first + patch.num_facets as usize;
        for f in facets.clone() {
            facet_patch[f] = i as u32;
        }
        if patch.contents == 0 {
            continue;
        }
        let boxes: Option<Vec<[[f32; 3]; 2]>> = facets
            .clone()
            .map(|f| facet_cull_bounds(world, f))
            .collect();
        match boxes {
            Some(boxes) => {
                for (f, [lo, hi]) in facets.zip(boxes) {
                    patch_items.push(Item {
                        reference: PRIMITIVE | FACET | f as u32,
                        contents: patch.contents,
                        lo,
                        hi,
                    });
                }
            }
            None => {
                let reference = PRIMITIVE | PATCH | i as u32;
                let lo = patch.mins.map(|v| grow_down(v - CULL_MARGIN));
                let hi = patch.maxs.map(|v| grow_up(v + CULL_MARGIN));
                if lo.iter().chain(&hi).all(|v| v.is_finite()) {
                    patch_items.push(Item {
                        reference,
                        contents: patch.contents,
                        lo,
                        hi,
                    });
                } else {
                    unbounded.push(reference);
                }
            }
        }
    }
    let tree = |items: &mut Vec<Item>| {
        let mut nodes = Vec::new();
        if !items.is_empty() {
            build_node(items, &mut nodes);
        }
        nodes
    };
    let brushes = tree(&mut brush_items);
    let patches = tree(&mut patch_items);
    let brush_cores = super::cores::build(world, &brushes, brush_bounds, unlisted);
    let stack_depth = stack_depth(&brushes).max(stack_depth(&patches));
    Bvh {
        brushes,
        brush_cores,
        patches,
        unbounded,
        facet_patch,
        stack_depth,
    }
}

/// The most entries a nearest-first search of `nodes` holds on its stack:
/// a node's children replace it, so along a path the stack grows by at most
/// the number of children less one per node.
fn stack_depth(nodes: &[BvhNode]) -> usize {
    if nodes.is_empty() {
        return 0;
    }
    // Children come after their parents: one backward pass.
    let mut need = vec![1usize; nodes.len()];
    for i in (0..nodes.len()).rev() {
        let children = &nodes[i].children;
        let used = children.iter().filter(|&&c| c != EMPTY_SLOT).count();
        let deepest = children
            .iter()
            .filter(|&&c| c != EMPTY_SLOT && c & PRIMITIVE == 0)
            .map(|&c| need[c as usize])
            .max()
            .unwrap_or(1);
        need[i] = used.saturating_sub(1) + deepest.max(1);
    }
    need[0]
}

/// The box facet `f`'s axial planes (surface and borders, each facing away
/// from the facet) enclose, grown by the margin; `None` when one of the six
/// is missing.
fn facet_cull_bounds(world: &World, f: usize) -> Option<[[f32; 3]; 2]> {
    let facet = &world.facets[f];
    let surface = world.patch_planes[facet.surface_plane as usize].plane;
    let borders = &world.facet_borders[facet.first_border as usize..][..facet.num_borders as usize];
    let planes = std::iter::once(surface).chain(borders.iter().map(|b| {
        let p = world.patch_planes[b.plane as usize].plane;
        if b.inward != 0 {
            p.map(|v| -v)
        } else {
            p
        }
    }));
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
    if lo.iter().chain(&hi).any(|v| !v.is_finite()) {
        return None;
    }
    Some([
        lo.map(|v| grow_down(v - CULL_MARGIN)),
        hi.map(|v| grow_up(v + CULL_MARGIN)),
    ])
}

/// One ulp or so outward, so rounding never shrinks a cull box.
fn grow_up(v: f32) -> f32 {
    v + v.abs() * f32::EPSILON + f32::MIN_POSITIVE
}

fn grow_down(v: f32) -> f32 {
    -grow_up(-v)
}

/// Appends the node over `items` (and its subtree) and returns its index.
fn build_node(items: &mut [Item], nodes: &mut Vec<BvhNode>) -> u32 {
    let index = nodes.len() as u32;
    nodes.push(BvhNode {
        min: [Vec4::INFINITY; 3],
        max: [Vec4::NEG_INFINITY; 3],
        children: [EMPTY_SLOT; WIDTH],
        contents: [0; WIDTH],
    });
    // Up to four groups: the items themselves when few, else SAH splits,
    // each of the group with the largest surface (the one a move is most
    // likely to enter), as collapsing a binary SAH tree would.
    let mut groups: Vec<&mut [Item]> = Vec::with_capacity(WIDTH);
    if items.len() <= WIDTH {
        groups.extend(items.chunks_mut(1));
    } else {
        groups.push(items);
        while groups.len() < WIDTH {
            let largest = groups
                .iter()
                .enumerate()
                .filter(|(_, g)| g.len() > 1)
                .map(|(i, g)| {
                    let (lo, hi, _) = summary(g);
                    (i, half_area(lo, hi))
                })
                .max_by(|a, b| a.1.total_cmp(&b.1));
            let Some((i, _)) = largest else { break };
            let group = groups.swap_remove(i);
            let (a, b) = split(group);
            groups.push(a);
            groups.push(b);
        }
    }
    for (slot, group) in groups.into_iter().enumerate() {
        let (lo, hi, contents) = summary(group);
        let child = if group.len() == 1 {
            group[0].reference
        } else {
            build_node(group, nodes)
        };
        let node = &mut nodes[index as usize];
        for axis in 0..3 {
            node.min[axis][slot] = lo[axis];
            node.max[axis][slot] = hi[axis];
        }
        node.children[slot] = child;
        node.contents[slot] = contents;
    }
    index
}

fn summary(items: &[Item]) -> ([f32; 3], [f32; 3], u32) {
    let mut lo = [f32::INFINITY; 3];
    let mut hi = [f32::NEG_INFINITY; 3];
    let mut contents = 0;
    for item in items {
        for axis in 0..3 {
            lo[axis] = lo[axis].min(item.lo[axis]);
            hi[axis] = hi[axis].max(item.hi[axis]);
        }
        contents |= item.contents;
    }
    (lo, hi, contents)
}

fn half_area(lo: [f32; 3], hi: [f32; 3]) -> f64 {
    let d = [0, 1, 2].map(|k| (hi[k] - lo[k]).max(0.0) as f64);
    d[0] * d[1] + d[1] * d[2] + d[2] * d[0]
}

const BINS: usize = 16;

/// Splits `items` (at least two) in two by the surface-area heuristic over
/// centroid bins on each axis; a median split when the centroids coincide.
/// (An exact sweep over every boundary was measured too: fewer nodes per
/// query on some maps, more on others.)
fn split(items: &mut [Item]) -> (&mut [Item], &mut [Item]) {
    let mut best: Option<(f64, usize, f32)> = None;
    for axis in 0..3 {
        let (lo, hi) = items
            .iter()
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), it| {
                let c = it.centre(axis);
                (l.min(c), h.max(c))
            });
        if hi <= lo {
            continue;
        }
        let scale = BINS as f32 / (hi - lo);
        let bin_of = |it: &Item| (((it.centre(axis) - lo) * scale) as usize).min(BINS - 1);
        let mut bins = [([f32::INFINITY; 3], [f32::NEG_INFINITY; 3], 0usize); BINS];
        for it in items.iter() {
            let b = &mut bins[bin_of(it)];
            for k in 0..3 {
                b.0[k] = b.0[k].min(it.lo[k]);
                b.1[k] = b.1[k].max(it.hi[k]);
            }
            b.2 += 1;
        }
        // Sweep from the right, then from the left, costing each boundary.
        let mut right = vec![(0.0f64, 0usize); BINS];
        let (mut rlo, mut rhi, mut rn) = ([f32::INFINITY; 3], [f32::NEG_INFINITY; 3], 0);
        for i in (1..BINS).rev() {
            for k in 0..3 {
                rlo[k] = rlo[k].min(bins[i].0[k]);
                rhi[k] = rhi[k].max(bins[i].1[k]);
            }
            rn += bins[i].2;
            right[i] = (half_area(rlo, rhi), rn);
        }
        let (mut llo, mut lhi, mut ln) = ([f32::INFINITY; 3], [f32::NEG_INFINITY; 3], 0);
        for i in 0..BINS - 1 {
            for k in 0..3 {
                llo[k] = llo[k].min(bins[i].0[k]);
                lhi[k] = lhi[k].max(bins[i].1[k]);
            }
            ln += bins[i].2;
            let (ra, rn) = right[i + 1];
            if ln == 0 || rn == 0 {
                continue;
            }
            let cost = half_area(llo, lhi) * ln as f64 + ra * rn as f64;
            if best.is_none_or(|(c, _, _)| cost < c) {
                best = Some((cost, axis, lo + (i + 1) as f32 / scale));
            }
        }
    }
    let mid = match best {
        Some((_, axis, at)) => partition(items, |it| it.centre(axis) < at),
        None => 0,
    };
    // Degenerate partitions (all on one side) fall back to halves.
    let mid = if mid == 0 || mid == items.len() {
        items.len() / 2
    } else {
        mid
    };
    items.split_at_mut(mid)
}

/// Moves the items for which `left` holds to the front; returns their count.
fn partition(items: &mut [Item], left: impl Fn(&Item) -> bool) -> usize {
    let mut mid = 0;
    for i in 0..items.len() {
        if left(&items[i]) {
            items.swap(i, mid);
            mid += 1;
        }
    }
    mid
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(i: u32, at: f32) -> Item {
        Item {
            reference: PRIMITIVE | i,
            contents: 1 << (i % 5),
            lo: [at, 0.0, 0.0],
            hi: [at + 1.0, 1.0, 1.0],
        }
    }

    /// Every primitive appears exactly once, below bounds that contain its
    /// own, with its contents in every ancestor's summary.
    #[test]
    fn tree_holds_each_primitive_once_inside_its_ancestors() {
        for n in [1usize, 2, 3, 4, 5, 17, 100, 1000] {
            let mut items: Vec<Item> = (0..n as u32)
                .map(|i| item(i, (i * 7 % 13) as f32))
                .collect();
            let originals = items.clone();
            let mut nodes = Vec::new();
            build_node(&mut items, &mut nodes);
            let mut seen = vec![0; n];
            let mut stack = vec![(0u32, [f32::NEG_INFINITY; 3], [f32::INFINITY; 3], u32::MAX)];
            while let Some((index, plo, phi, pc)) = stack.pop() {
                let node = &nodes[index as usize];
                for slot in 0..WIDTH {
                    let child = node.children[slot];
                    if child == EMPTY_SLOT {
                        assert_eq!(node.contents[slot], 0);
                        continue;
                    }
                    let lo = [0, 1, 2].map(|k| node.min[k][slot]);
                    let hi = [0, 1, 2].map(|k| node.max[k][slot]);
                    for k in 0..3 {
                        assert!(plo[k] <= lo[k] && hi[k] <= phi[k]);
                    }
                    assert_eq!(node.contents[slot] & !pc, 0);
                    if child & PRIMITIVE != 0 {
                        let i = (child & !PRIMITIVE) as usize;
                        seen[i] += 1;
                        assert_eq!((lo, hi), (originals[i].lo, originals[i].hi));
                        assert_eq!(node.contents[slot], originals[i].contents);
                    } else {
                        assert!(child > index);
                        stack.push((child, lo, hi, node.contents[slot]));
                    }
                }
            }
            assert!(seen.iter().all(|&s| s == 1), "{n}: {seen:?}");
        }
    }
}
