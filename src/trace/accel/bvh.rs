//! The kernel's candidate finder: a four-wide bounding-volume hierarchy over
//! the world's brushes and patches, derived at load (not in the file). The
//! fast trace (`trace::fast`) finds the primitives near a move with it.
//!
//! Each node holds its four children's bounds in lanes. A child is a node
//! or a primitive (a brush, a patch facet, or a whole patch) bounded by its
//! cull box (its axial planes' box grown by [`CULL_MARGIN`]: a move outside
//! it cannot touch the primitive). A facet without all six axial planes is
//! bounded by its polygon for rays and by [`facet_reach_bounds`] for boxes
//! up to [`SMALL_BOX_HALF`]; larger boxes see its whole patch. Brushes
//! without six axial sides are tested by every trace.
//!
//! Rays get a tree each for brushes and patches, since a ray's patch hit
//! can replace an earlier contact and the patch tree is searched to the end
//! of the move; other moves search one tree over both (a fifth fewer nodes
//! reached on maps with curves). The brushes' tree may cut a brush's box at
//! a split plane (SBVH spatial splits; a second clip of the same brush ties
//! and changes nothing); it is built both ways and the one a fixed sample
//! of moves reaches fewer nodes of is kept.

use super::cores::CoreLanes;
use super::listing::Unlisted;
use super::{axial_box, next_down, next_up};
use crate::margins::{CULL_MARGIN, FACET_REACH_SLACK};
use crate::world::World;
use glam::Vec4;

/// Children per node: one SSE lane each.
pub const WIDTH: usize = 4;

/// A child reference: a node index, or (top bit set) a primitive.
pub const PRIMITIVE: u32 = 1 << 31;
/// Set with [`PRIMITIVE`]: the primitive is a whole patch, not a brush.
pub const PATCH: u32 = 1 << 30;
/// Set with [`PRIMITIVE`]: the primitive is one patch facet.
pub const FACET: u32 = 1 << 29;
/// In the rays' patch tree, a facet lacking one of the six axial planes
/// (real maps' facets often have a nearly axial border in its place),
/// bounded by its polygon: [`FACET`] and [`PATCH`] set. A ray's facet hit
/// lies on the polygon (a ray starting on a border plane aside, which the
/// walk takes), so the polygon bounds it; a box's shifted planes may reach
/// past it, so the boxes' tree keeps such a facet's patch whole.
pub const RAY_FACET: u32 = FACET | PATCH;
/// In the boxes' tree, such a facet bounded by how far a box of at most
/// [`SMALL_BOX_HALF`] per axis can meet it (see [`facet_reach_bounds`]);
/// near unlisted pieces its patch's decide, as for the whole patch.
pub const LOOSE_FACET: u32 = RAY_FACET;
/// The largest half-size per axis, each way, of the boxes and shapes the
/// tree over brushes and single facets serves ([`Bvh::combined`]); larger
/// ones search [`Bvh::combined_whole`]. Player boxes are 15 × 15 × 28.
pub const SMALL_BOX_HALF: f32 = 64.0;
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

/// Children per node of the eight-wide trees: one AVX lane each.
pub const WIDE: usize = 8;

/// A node of the eight-wide trees ([`WideTrees`]): the layout of
/// [`BvhNode`] with eight lanes a row, each row one AVX vector.
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WideNode {
    pub min: [[f32; WIDE]; 3],
    pub max: [[f32; WIDE]; 3],
    pub children: [u32; WIDE],
    pub contents: [u32; WIDE],
}
const _: () = assert!(std::mem::size_of::<WideNode>() == 256);

/// What the builder needs of a node, four or eight wide.
trait TreeNode: Copy {
    const WIDTH: usize;
    fn empty() -> Self;
    fn set(&mut self, slot: usize, lo: [f32; 3], hi: [f32; 3], child: u32, contents: u32);
    fn children(&self) -> &[u32];
    /// Child `slot`'s bounds, reference and contents.
    #[cfg(test)]
    fn lane(&self, slot: usize) -> ([f32; 3], [f32; 3], u32, u32);
}

/// [`TreeNode`] for a node type with `min`/`max` rows indexed by slot:
/// the two differ only in their width and how a row is filled.
macro_rules! tree_node {
    ($node:ty, $width:expr, $low:expr, $high:expr) => {
        impl TreeNode for $node {
            const WIDTH: usize = $width;
            fn empty() -> Self {
                Self {
                    min: [$low; 3],
                    max: [$high; 3],
                    children: [EMPTY_SLOT; $width],
                    contents: [0; $width],
                }
            }
            fn set(&mut self, slot: usize, lo: [f32; 3], hi: [f32; 3], child: u32, contents: u32) {
                for axis in 0..3 {
                    self.min[axis][slot] = lo[axis];
                    self.max[axis][slot] = hi[axis];
                }
                self.children[slot] = child;
                self.contents[slot] = contents;
            }
            fn children(&self) -> &[u32] {
                &self.children
            }
            #[cfg(test)]
            fn lane(&self, slot: usize) -> ([f32; 3], [f32; 3], u32, u32) {
                (
                    [0, 1, 2].map(|k| self.min[k][slot]),
                    [0, 1, 2].map(|k| self.max[k][slot]),
                    self.children[slot],
                    self.contents[slot],
                )
            }
        }
    };
}

tree_node!(BvhNode, WIDTH, Vec4::INFINITY, Vec4::NEG_INFINITY);
tree_node!(
    WideNode,
    WIDE,
    [f32::INFINITY; WIDE],
    [f32::NEG_INFINITY; WIDE]
);

/// Proof that this processor has the instructions the eight-wide search is
/// compiled for (AVX2, BMI1, BMI2, POPCNT, LZCNT): only [`Avx2::detect`]
/// makes one, and the eight-wide trees are searched only with one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Avx2(());

impl Avx2 {
    /// The proof, where the processor has the features.
    pub fn detect() -> Option<Avx2> {
        #[cfg(target_arch = "x86_64")]
        {
            let all = std::is_x86_feature_detected!("avx2")
                && std::is_x86_feature_detected!("bmi1")
                && std::is_x86_feature_detected!("bmi2")
                && std::is_x86_feature_detected!("popcnt")
                && std::is_x86_feature_detected!("lzcnt");
            all.then_some(Avx2(()))
        }
        #[cfg(not(target_arch = "x86_64"))]
        None
    }
}

/// The same trees eight wide, for the full trace's search on processors
/// with AVX2 (built only there; empty elsewhere).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WideTrees {
    /// Where the trees were built: the processor runs their search.
    avx2: Option<Avx2>,
    pub brushes: Vec<WideNode>,
    pub patches: Vec<WideNode>,
    pub combined: Vec<WideNode>,
    pub combined_whole: Vec<WideNode>,
    /// The most entries a search's stack can hold at once in any of them.
    pub stack_depth: usize,
}

impl WideTrees {
    /// Whether the trees were built (the processor has AVX2).
    pub fn present(&self) -> bool {
        self.avx2.is_some() && (!self.brushes.is_empty() || !self.combined.is_empty())
    }

    /// The proof that the trees can be searched here, when they were built.
    #[inline(always)]
    pub fn avx2(&self) -> Option<Avx2> {
        self.avx2.filter(|_| self.present())
    }

    /// The tree over brushes and patches for a box or shape of half-size
    /// `half` (see [`Bvh::combined_for`]).
    #[inline(always)]
    pub fn combined_for(&self, half: glam::Vec3A) -> &[WideNode] {
        if self.combined_whole.is_empty() || half.cmple(glam::Vec3A::splat(SMALL_BOX_HALF)).all() {
            &self.combined
        } else {
            &self.combined_whole
        }
    }
}

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
    /// One tree over both, for searches that treat brushes and patches
    /// alike (every move but a full ray trace) with a box or shape of at
    /// most [`SMALL_BOX_HALF`] per axis: a move then tests one root, not
    /// two. Facets lacking an axial plane are bounded for such boxes.
    pub combined: Vec<BvhNode>,
    /// Per node of the combined tree, its children's solid cores.
    pub combined_cores: Vec<CoreLanes>,
    /// The same over patches kept whole where a facet lacks an axial
    /// plane, for larger boxes and shapes; empty when no patch is kept
    /// whole (`combined` then serves every size).
    pub combined_whole: Vec<BvhNode>,
    /// Per node of `combined_whole`, its children's solid cores.
    pub combined_whole_cores: Vec<CoreLanes>,
    /// Primitives without bounds (child references), tested by every trace.
    pub unbounded: Vec<u32>,
    /// Per facet, the patch it belongs to.
    pub facet_patch: Vec<u32>,
    /// The most entries a search's stack can hold at once in either tree.
    pub stack_depth: usize,
    /// The brush, patch and combined trees eight wide.
    pub wide: WideTrees,
}

impl Bvh {
    /// The tree over brushes and patches for a box or shape of half-size
    /// `half` (per axis).
    #[inline(always)]
    pub fn combined_for(&self, half: glam::Vec3A) -> (&[BvhNode], &[CoreLanes]) {
        if self.combined_whole.is_empty() || half.cmple(glam::Vec3A::splat(SMALL_BOX_HALF)).all() {
            (&self.combined, &self.combined_cores)
        } else {
            (&self.combined_whole, &self.combined_whole_cores)
        }
    }

    pub const EMPTY: Bvh = Bvh {
        brushes: Vec::new(),
        brush_cores: Vec::new(),
        patches: Vec::new(),
        combined: Vec::new(),
        combined_cores: Vec::new(),
        combined_whole: Vec::new(),
        combined_whole_cores: Vec::new(),
        unbounded: Vec::new(),
        facet_patch: Vec::new(),
        stack_depth: 0,
        wide: WideTrees {
            avx2: None,
            brushes: Vec::new(),
            patches: Vec::new(),
            combined: Vec::new(),
            combined_whole: Vec::new(),
            stack_depth: 0,
        },
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
    let mut brush_items: Vec<Item> = Vec::with_capacity(world.brushes.len());
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
    // Boxes' items: each facet bounded where it can be, else its patch.
    let mut patch_items = Vec::new();
    let mut reach_budget = REACH_BUDGET;
    // The same, with a patch whole where a facet lacks an axial plane.
    let mut whole_patch_items = Vec::new();
    let mut ray_patch_items = Vec::new();
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
                    let item = Item {
                        reference: PRIMITIVE | FACET | f as u32,
                        contents: patch.contents,
                        lo,
                        hi,
                    };
                    patch_items.push(item);
                    whole_patch_items.push(item);
                    ray_patch_items.push(item);
                }
            }
            None => {
                let reference = PRIMITIVE | PATCH | i as u32;
                let lo = patch.mins.map(|v| next_down(v - CULL_MARGIN));
                let hi = patch.maxs.map(|v| next_up(v + CULL_MARGIN));
                if !lo.iter().chain(&hi).all(|v| v.is_finite()) {
                    unbounded.push(reference);
                    continue;
                }
                let whole = Item {
                    reference,
                    contents: patch.contents,
                    lo,
                    hi,
                };
                whole_patch_items.push(whole);
                // Each facet on its own, by its axial planes or, lacking
                // one, (rays) its polygon or (boxes) how far a box can meet
                // it; the first two within the patch's bounds, which the
                // facet clip checks first.
                let within = |reference: u32, [flo, fhi]: [[f32; 3]; 2]| Item {
                    reference,
                    contents: patch.contents,
                    lo: std::array::from_fn(|k| flo[k].max(lo[k])),
                    hi: std::array::from_fn(|k| fhi[k].min(hi[k])),
                };
                let mut box_items = Some(Vec::with_capacity(facets.len()));
                for f in facets {
                    let reference = PRIMITIVE | FACET | f as u32;
                    match facet_cull_bounds(world, f) {
                        Some(bounds) => {
                            ray_patch_items.push(within(reference, bounds));
                            if let Some(items) = &mut box_items {
                                items.push(within(reference, bounds));
                            }
                        }
                        None => {
                            let polygon = facet_polygon_bounds(world, f);
                            ray_patch_items.push(within(PRIMITIVE | RAY_FACET | f as u32, polygon));
                            if let Some(items) = &mut box_items {
                                // (Not within the patch's bounds: the
                                // reference meets the patch when the
                                // move's bounds reach the patch's, and a
                                // box can then meet such a facet short
                                // of them.)
                                match facet_reach_bounds(world, f, &mut reach_budget) {
                                    Some([lo, hi]) => items.push(Item {
                                        reference: PRIMITIVE | LOOSE_FACET | f as u32,
                                        contents: patch.contents,
                                        lo,
                                        hi,
                                    }),
                                    None => box_items = None,
                                }
                            }
                        }
                    }
                }
                match box_items {
                    Some(items) => patch_items.extend(items),
                    None => patch_items.push(whole),
                }
            }
        }
    }
    // Spatial splits shorten some maps' searches by a fifth and lengthen
    // others' (the surface-area cost assumes moves from outside the world):
    // both trees are built and the one sample moves visit less is kept,
    // with the split budget it was built with (the eight-wide tree over the
    // same items takes the same).
    let best_tree = |items: &[Item]| -> (Vec<BvhNode>, usize) {
        let copies = items.len() / SPLIT_COPIES_PER;
        if copies == 0 {
            return (tree(items.to_vec(), 0), 0);
        }
        let object = tree(items.to_vec(), 0);
        let spatial = tree(items.to_vec(), copies);
        let moves = sample_moves(&object);
        if visits(&spatial, &moves) < visits(&object, &moves) {
            (spatial, copies)
        } else {
            (object, 0)
        }
    };
    let with_brushes = |patches: &[Item]| -> Option<Vec<Item>> {
        (!patches.is_empty()).then(|| brush_items.iter().chain(patches).copied().collect())
    };
    let combined_items = with_brushes(&patch_items);
    let whole_items = with_brushes(&whole_patch_items).filter(|_| {
        let reference = |item: &Item| item.reference;
        !patch_items
            .iter()
            .map(reference)
            .eq(whole_patch_items.iter().map(reference))
    });
    let avx2 = Avx2::detect();
    let wide = avx2.is_some();
    let (brushes, brush_copies) = best_tree(&brush_items);
    let mut wide_trees = WideTrees {
        avx2,
        ..WideTrees::default()
    };
    if wide {
        wide_trees.brushes = tree(brush_items, brush_copies);
        wide_trees.patches = tree(ray_patch_items.clone(), 0);
    }
    // (Spatial splits did not change the patch trees' searches.)
    let patches = tree(ray_patch_items, 0);
    let brush_cores = super::cores::build(world, &brushes, brush_bounds, unlisted);
    let (combined, combined_cores) = match combined_items {
        Some(items) => {
            let (combined, copies) = best_tree(&items);
            let cores = super::cores::build(world, &combined, brush_bounds, unlisted);
            if wide {
                wide_trees.combined = tree(items, copies);
            }
            (combined, cores)
        }
        // Without patches the brushes' tree serves both.
        None => {
            wide_trees.combined = wide_trees.brushes.clone();
            (brushes.clone(), brush_cores.clone())
        }
    };
    let (combined_whole, combined_whole_cores) = match whole_items {
        // (Few moves search it: built once, without judging spatial splits.)
        Some(items) => {
            if wide {
                wide_trees.combined_whole = tree(items.clone(), 0);
            }
            let whole = tree(items, 0);
            let cores = super::cores::build(world, &whole, brush_bounds, unlisted);
            (whole, cores)
        }
        None => (Vec::new(), Vec::new()),
    };
    let stack_depth = stack_depth(&brushes)
        .max(stack_depth(&patches))
        .max(stack_depth(&combined))
        .max(stack_depth(&combined_whole));
    wide_trees.stack_depth = self::stack_depth(&wide_trees.brushes)
        .max(self::stack_depth(&wide_trees.patches))
        .max(self::stack_depth(&wide_trees.combined))
        .max(self::stack_depth(&wide_trees.combined_whole));
    Bvh {
        brushes,
        brush_cores,
        patches,
        combined,
        combined_cores,
        combined_whole,
        combined_whole_cores,
        unbounded,
        facet_patch,
        stack_depth,
        wide: wide_trees,
    }
}

/// The tree over `items`, spatial splits adding up to `copies` pieces.
fn tree<N: TreeNode>(items: Vec<Item>, copies: usize) -> Vec<N> {
    let mut nodes = Vec::new();
    if !items.is_empty() {
        build_node(items, &mut nodes, &mut { copies });
    }
    nodes
}

/// A move for judging a tree: start, end and the half-size of its box.
type SampleMove = ([f32; 3], [f32; 3], [f32; 3]);

/// Moves spread over the bounds of `nodes`' root, the same for every tree of
/// one world: rays and player-sized boxes from anywhere, down, along an
/// axis, level or any way, 1 to 4 000 units long (as `bspq check` makes).
fn sample_moves(nodes: &[BvhNode]) -> Vec<SampleMove> {
    const MOVES: usize = 4096;
    let Some(root) = nodes.first() else {
        return Vec::new();
    };
    let lo = [0, 1, 2].map(|k| root.min[k].min_element());
    let hi = [0, 1, 2].map(|k| root.max[k].max_element());
    let mut rng = fastrand::Rng::with_seed(0x5EED_B7A1);
    (0..MOVES)
        .map(|i| {
            let start = [0, 1, 2].map(|k| lo[k] + (hi[k] - lo[k]) * rng.f32());
            let dir = match i % 4 {
                0 => [0.0, 0.0, -1.0],
                1 => {
                    let mut d = [0.0; 3];
                    d[i / 4 % 3] = if rng.f32() < 0.5 { -1.0 } else { 1.0 };
                    d
                }
                2 => [rng.f32() - 0.5, rng.f32() - 0.5, 0.0],
                _ => [rng.f32() - 0.5, rng.f32() - 0.5, rng.f32() - 0.5],
            };
            let norm = dir.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-6);
            let length = [
                1.0 + 63.0 * rng.f32(),
                64.0 + 448.0 * rng.f32(),
                512.0 + 3488.0 * rng.f32(),
            ][i / 2 % 3];
            let end = [0, 1, 2].map(|k| start[k] + dir[k] / norm * length);
            let half = if i % 2 == 0 {
                [0.0; 3]
            } else {
                [15.0, 15.0, 28.0]
            };
            (start, end, half)
        })
        .collect()
}

/// At most this many node steps judge a tree (real maps take under 100 000;
/// a hostile file cannot make the loader count for long).
const VISIT_BUDGET: usize = 4_000_000;

/// How many nodes of `nodes` the `moves` reach in all (every node whose
/// bounds a move's swept box enters: the search's work on a move that
/// touches nothing), up to [`VISIT_BUDGET`].
fn visits(nodes: &[BvhNode], moves: &[SampleMove]) -> usize {
    let mut count = 0;
    let mut stack = Vec::new();
    for (start, end, half) in moves {
        if count >= VISIT_BUDGET {
            return VISIT_BUDGET;
        }
        let inv = [0, 1, 2].map(|k| {
            let d = end[k] - start[k];
            if d == 0.0 {
                1e30
            } else {
                1.0 / d
            }
        });
        stack.push(0u32);
        while let Some(index) = stack.pop() {
            count += 1;
            let node = &nodes[index as usize];
            for (slot, &child) in node.children.iter().enumerate() {
                if child == EMPTY_SLOT || child & PRIMITIVE != 0 {
                    continue;
                }
                let (mut near, mut far) = (0.0f32, 1.0f32);
                for k in 0..3 {
                    let a = (node.min[k][slot] - half[k] - start[k]) * inv[k];
                    let b = (node.max[k][slot] + half[k] - start[k]) * inv[k];
                    near = near.max(a.min(b));
                    far = far.min(a.max(b));
                }
                if near <= far {
                    stack.push(child);
                }
            }
        }
    }
    count
}

/// The most entries a nearest-first search of `nodes` holds on its stack:
/// a node's children replace it, so along a path the stack grows by at most
/// the number of children less one per node.
fn stack_depth<N: TreeNode>(nodes: &[N]) -> usize {
    if nodes.is_empty() {
        return 0;
    }
    // Children come after their parents: one backward pass.
    let mut need = vec![1usize; nodes.len()];
    for i in (0..nodes.len()).rev() {
        let children = nodes[i].children();
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

/// The bounds of facet `f`'s polygon (its surface plane cut by its
/// borders), grown by the margin; infinite where the borders leave it open.
fn facet_polygon_bounds(world: &World, f: usize) -> [[f32; 3]; 2] {
    let polygon = crate::geometry::polygons::facet_polygon_without(world, f, None);
    let mut lo = [f32::INFINITY; 3];
    let mut hi = [f32::NEG_INFINITY; 3];
    for p in &polygon.points {
        for k in 0..3 {
            // (Rounded outward to f32.)
            lo[k] = lo[k].min(next_down(p[k] as f32));
            hi[k] = hi[k].max(next_up(p[k] as f32));
        }
    }
    if polygon.points.is_empty() {
        return [[f32::NEG_INFINITY; 3], [f32::INFINITY; 3]];
    }
    [
        lo.map(|v| next_down(v - CULL_MARGIN)),
        hi.map(|v| next_up(v + CULL_MARGIN)),
    ]
}

/// Facets with more planes than this keep their patch whole (real ones have
/// under twenty; bounding one costs the square of its planes).
const REACH_MAX_PLANES: usize = 40;
/// Polygons cut (a facet's planes squared) the bounding of facets may spend
/// on one world: real maps take under 100 000 (am_mckinleyish2, 348 such
/// facets: about 50 000); past it, a hostile file's facets keep their
/// patches whole instead of a load that takes minutes.
const REACH_BUDGET: u64 = 2_000_000;

/// Bounds for facet `f` that serve every box up to [`SMALL_BOX_HALF`]:
/// grown by a box's half-size, they hold every centre where the facet clip
/// finds the box meeting the facet, with the margin; `None` when the
/// facet's planes leave that region open.
///
/// A box of half-size `h` meets the facet only where its centre `x` lies
/// within 1/8 unit of every plane pushed out by the box, `n·x <= d +
/// |n|·h` (the facet's planes carry no axial one to bound it directly,
/// see [`facet_cull_bounds`]). That region `R(h)` grows with `h`. The
/// largest `x_k` over it is a linear program whose dual gives, for any
/// multipliers `y >= 0` with `Σ y_i n_i = e_k`, the bound `Σ y_i (d_i +
/// |n_i|·h)`; its slope in `h` is `Σ y_i |n_i| >= e_k` component by
/// component. Taking the optimum `y` at `h = H` ([`SMALL_BOX_HALF`] each
/// way), for every `h <= H`: `max x_k <= max_{R(H)} x_k - (H_k - h_k)`. So
/// the bound stored is `max_{R(H)} x_k - H_k`, found from the vertices of
/// `R(H)`, and the search adds `h_k` as for any primitive.
fn facet_reach_bounds(world: &World, f: usize, budget: &mut u64) -> Option<[[f32; 3]; 2]> {
    let facet = &world.facets[f];
    let planes = facet.num_borders as usize + 1;
    let cuts = (planes * planes) as u64;
    if planes > REACH_MAX_PLANES || cuts > *budget {
        return None;
    }
    *budget -= cuts;
    let half = glam::DVec3::splat(SMALL_BOX_HALF as f64);
    let planes: Vec<(glam::DVec3, f64)> = facet_planes(world, f)
        .map(|[x, y, z, d]| {
            let n = glam::DVec3::new(x as f64, y as f64, z as f64);
            (n, d as f64 + n.abs().dot(half) + FACET_REACH_SLACK)
        })
        .collect();
    let mut lo = glam::DVec3::INFINITY;
    let mut hi = glam::DVec3::NEG_INFINITY;
    for face in crate::geometry::polygons::polyhedron(&planes) {
        for p in face.points {
            lo = lo.min(p);
            hi = hi.max(p);
        }
    }
    // Open on some side (the faces reach out to the huge base polygons),
    // or numerically empty.
    let open = crate::math::WORLD_HALF_EXTENT;
    if lo.cmpgt(hi).any()
        || !(lo.cmpge(glam::DVec3::splat(-open)).all() && hi.cmple(glam::DVec3::splat(open)).all())
    {
        return None;
    }
    let (lo, hi) = (lo + half, hi - half);
    Some([
        lo.to_array().map(|v| next_down(v as f32 - CULL_MARGIN)),
        hi.to_array().map(|v| next_up(v as f32 + CULL_MARGIN)),
    ])
}

/// Facet `f`'s planes, each facing away from the facet: its surface plane,
/// then its borders (flipped where they face inward).
fn facet_planes<'w>(world: &World<'w>, f: usize) -> impl Iterator<Item = [f32; 4]> + 'w {
    let facet = &world.facets[f];
    let (patch_planes, facet_borders) = (world.patch_planes, world.facet_borders);
    let surface = patch_planes[facet.surface_plane as usize].plane;
    let borders = &facet_borders[facet.first_border as usize..][..facet.num_borders as usize];
    std::iter::once(surface).chain(borders.iter().map(move |b| {
        let p = patch_planes[b.plane as usize].plane;
        if b.inward != 0 {
            p.map(|v| -v)
        } else {
            p
        }
    }))
}

/// The box facet `f`'s axial planes (surface and borders, each facing away
/// from the facet) enclose, grown by the margin; `None` when one of the six
/// is missing.
fn facet_cull_bounds(world: &World, f: usize) -> Option<[[f32; 3]; 2]> {
    let [lo, hi] = axial_box(facet_planes(world, f))?;
    Some([
        lo.map(|v| next_down(v - CULL_MARGIN)),
        hi.map(|v| next_up(v + CULL_MARGIN)),
    ])
}

/// Appends the node over `items` (and its subtree) and returns its index.
/// `copies`: how many more pieces spatial splits may add.
fn build_node<N: TreeNode>(items: Vec<Item>, nodes: &mut Vec<N>, copies: &mut usize) -> u32 {
    let index = nodes.len() as u32;
    nodes.push(N::empty());
    // Up to WIDTH groups: the items themselves when few, else SAH splits,
    // each of the group with the largest surface (the one a move is most
    // likely to enter), as collapsing a binary SAH tree would.
    let mut groups: Vec<Vec<Item>> = Vec::with_capacity(N::WIDTH);
    if items.len() <= N::WIDTH {
        groups.extend(items.into_iter().map(|item| vec![item]));
    } else {
        groups.push(items);
        while groups.len() < N::WIDTH {
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
            let (a, b) = split(group, copies);
            groups.push(a);
            groups.push(b);
        }
    }
    for (slot, group) in groups.into_iter().enumerate() {
        let (lo, hi, contents) = summary(&group);
        let child = if group.len() == 1 {
            group[0].reference
        } else {
            build_node(group, nodes, copies)
        };
        nodes[index as usize].set(slot, lo, hi, child, contents);
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

/// One piece of spatial split budget per this many primitives.
const SPLIT_COPIES_PER: usize = 2;

/// Splits `items` (at least two) in two by the surface-area heuristic: the
/// cheaper of the best split of the items by their centroids (over bins on
/// each axis; a median split when the centroids coincide) and the best
/// spatial split, which cuts the boxes that straddle a plane in two, one
/// piece on each side, while `copies` lasts (a primitive then sits under
/// two children, each holding the part of its box on its side: a move that
/// can touch the primitive enters one of the two).
fn split(mut items: Vec<Item>, copies: &mut usize) -> (Vec<Item>, Vec<Item>) {
    let object = object_split(&items);
    let spatial = if *copies > 0 {
        spatial_split(&items)
    } else {
        None
    };
    let spatial = spatial
        .filter(|s| s.straddling <= *copies && object.is_none_or(|(cost, ..)| s.cost < cost));
    if let Some(s) = spatial {
        *copies -= s.straddling;
        let mut left = Vec::with_capacity(items.len());
        let mut right = Vec::with_capacity(items.len());
        for item in items {
            let axis = s.axis;
            if item.hi[axis] <= s.at {
                left.push(item);
            } else if item.lo[axis] >= s.at {
                right.push(item);
            } else {
                let mut l = item;
                l.hi[axis] = s.at;
                let mut r = item;
                r.lo[axis] = s.at;
                left.push(l);
                right.push(r);
            }
        }
        return (left, right);
    }
    let mid = match object {
        Some((_, axis, at)) => partition(&mut items, |it| it.centre(axis) < at),
        None => 0,
    };
    // Degenerate partitions (all on one side) fall back to halves.
    let mid = if mid == 0 || mid == items.len() {
        items.len() / 2
    } else {
        mid
    };
    let right = items.split_off(mid);
    (items, right)
}

/// The best centroid split: cost, axis and position.
fn object_split(items: &[Item]) -> Option<(f64, usize, f32)> {
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
        let counts = bins.map(|b| (b.2, b.2));
        if let Some((cost, i)) = cheapest_boundary(&bins, &counts) {
            if best.is_none_or(|(c, ..)| cost < c) {
                best = Some((cost, axis, lo + i as f32 / scale));
            }
        }
    }
    best
}

/// A spatial split: its cost, the plane `axis = at`, and how many boxes
/// straddle it.
struct SpatialSplit {
    cost: f64,
    axis: usize,
    at: f32,
    straddling: usize,
}

/// The best spatial split over bins of the items' bounds on each axis: each
/// box clipped into every bin it reaches, counted in its first bin for the
/// left side and its last for the right.
fn spatial_split(items: &[Item]) -> Option<SpatialSplit> {
    let (lo, hi, _) = summary(items);
    let mut best: Option<SpatialSplit> = None;
    for axis in 0..3 {
        if hi[axis] <= lo[axis] {
            continue;
        }
        let plane = |i: usize| lo[axis] + (hi[axis] - lo[axis]) * (i as f32 / BINS as f32);
        // The bin holding `v`: the last whose lower plane is at or below it.
        let bin_of = |v: f32| (1..BINS).rev().find(|&i| plane(i) <= v).unwrap_or(0);
        let mut bins = [([f32::INFINITY; 3], [f32::NEG_INFINITY; 3], 0usize); BINS];
        // (entries, exits) per bin.
        let mut counts = [(0usize, 0usize); BINS];
        for it in items {
            let first = bin_of(it.lo[axis]);
            // A box ending on a bin's lower plane does not reach into it.
            let last = (first..BINS)
                .rev()
                .find(|&i| i == first || plane(i) < it.hi[axis])
                .unwrap_or(first);
            counts[first].0 += 1;
            counts[last].1 += 1;
            for (i, b) in bins.iter_mut().enumerate().take(last + 1).skip(first) {
                for k in 0..3 {
                    let (mut l, mut h) = (it.lo[k], it.hi[k]);
                    if k == axis {
                        l = l.max(plane(i));
                        h = if i + 1 < BINS { h.min(plane(i + 1)) } else { h };
                    }
                    b.0[k] = b.0[k].min(l);
                    b.1[k] = b.1[k].max(h);
                }
            }
        }
        let Some((cost, i)) = cheapest_boundary(&bins, &counts) else {
            continue;
        };
        if best.as_ref().is_none_or(|b| cost < b.cost) {
            let at = plane(i);
            // Boxes wholly on the left, and those the plane cuts.
            let (left, straddling) = items.iter().fold((0, 0), |(l, s), it| {
                (
                    l + usize::from(it.hi[axis] <= at),
                    s + usize::from(it.lo[axis] < at && at < it.hi[axis]),
                )
            });
            if left == 0 || left + straddling == items.len() {
                // Every piece would go to both sides or to one.
                continue;
            }
            best = Some(SpatialSplit {
                cost,
                axis,
                at,
                straddling,
            });
        }
    }
    best
}

/// The boundary between bins `i - 1` and `i` with the lowest surface-area
/// cost, counting each bin's first count on the left and second on the
/// right; none when every boundary leaves a side empty.
fn cheapest_boundary(
    bins: &[([f32; 3], [f32; 3], usize); BINS],
    counts: &[(usize, usize); BINS],
) -> Option<(f64, usize)> {
    // Sweep from the right, then from the left, costing each boundary.
    let mut right = [(0.0f64, 0usize); BINS];
    let (mut rlo, mut rhi, mut rn) = ([f32::INFINITY; 3], [f32::NEG_INFINITY; 3], 0);
    for i in (1..BINS).rev() {
        for k in 0..3 {
            rlo[k] = rlo[k].min(bins[i].0[k]);
            rhi[k] = rhi[k].max(bins[i].1[k]);
        }
        rn += counts[i].1;
        right[i] = (half_area(rlo, rhi), rn);
    }
    let mut best: Option<(f64, usize)> = None;
    let (mut llo, mut lhi, mut ln) = ([f32::INFINITY; 3], [f32::NEG_INFINITY; 3], 0);
    for i in 0..BINS - 1 {
        for k in 0..3 {
            llo[k] = llo[k].min(bins[i].0[k]);
            lhi[k] = lhi[k].max(bins[i].1[k]);
        }
        ln += counts[i].0;
        let (ra, rn) = right[i + 1];
        if ln == 0 || rn == 0 {
            continue;
        }
        let cost = half_area(llo, lhi) * ln as f64 + ra * rn as f64;
        if best.is_none_or(|(c, _)| cost < c) {
            best = Some((cost, i + 1));
        }
    }
    best
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

    /// A facet's reach for boxes up to `SMALL_BOX_HALF` holds its polygon
    /// (a box of half-size 0 meets the facet there); for these facets,
    /// which have all six axial planes, the region a box meets is the
    /// polygon's bounds grown by the box (and the slack), so the reach,
    /// less the largest box, is the polygon's bounds and the slack. With
    /// no budget left, it is not found.
    #[test]
    fn a_facets_reach_lies_between_its_polygon_and_the_largest_box_around_it() {
        let data = crate::trace::patch::tests::curved_world();
        let world = data.view();
        let slack = FACET_REACH_SLACK as f32 + 0.01;
        let mut budget = REACH_BUDGET;
        assert!(!world.facets.is_empty());
        for f in 0..world.facets.len() {
            let [plo, phi] = facet_polygon_bounds(&world, f);
            let [lo, hi] = facet_reach_bounds(&world, f, &mut budget).expect("closed");
            for k in 0..3 {
                // (Both carry the cull margin.)
                let (below, above) = (plo[k] - lo[k], hi[k] - phi[k]);
                assert!(below >= 0.0 && above >= 0.0, "facet {f}: {lo:?}..{hi:?}");
                assert!(
                    below <= slack && above <= slack,
                    "facet {f}: {lo:?}..{hi:?}"
                );
            }
            assert_eq!(facet_reach_bounds(&world, f, &mut 0), None);
        }
    }

    /// Every primitive appears exactly once, below bounds that contain its
    /// own, with its contents in every ancestor's summary, four and eight
    /// wide.
    #[test]
    fn tree_holds_each_primitive_once_inside_its_ancestors() {
        holds_each_primitive_once::<BvhNode>();
        holds_each_primitive_once::<WideNode>();
    }

    fn holds_each_primitive_once<N: TreeNode>() {
        for n in [1usize, 2, 3, 4, 5, 8, 9, 17, 100, 1000] {
            let items: Vec<Item> = (0..n as u32)
                .map(|i| item(i, (i * 7 % 13) as f32))
                .collect();
            let originals = items.clone();
            let mut nodes: Vec<N> = Vec::new();
            build_node(items, &mut nodes, &mut 0);
            let mut seen = vec![0; n];
            let mut stack = vec![(0u32, [f32::NEG_INFINITY; 3], [f32::INFINITY; 3], u32::MAX)];
            while let Some((index, plo, phi, pc)) = stack.pop() {
                let node = &nodes[index as usize];
                for slot in 0..N::WIDTH {
                    let (lo, hi, child, contents) = node.lane(slot);
                    if child == EMPTY_SLOT {
                        assert_eq!(contents, 0);
                        continue;
                    }
                    for k in 0..3 {
                        assert!(plo[k] <= lo[k] && hi[k] <= phi[k]);
                    }
                    assert_eq!(contents & !pc, 0);
                    if child & PRIMITIVE != 0 {
                        let i = (child & !PRIMITIVE) as usize;
                        seen[i] += 1;
                        assert_eq!((lo, hi), (originals[i].lo, originals[i].hi));
                        assert_eq!(contents, originals[i].contents);
                    } else {
                        assert!(child > index);
                        stack.push((child, lo, hi, contents));
                    }
                }
            }
            assert!(seen.iter().all(|&s| s == 1), "{n}: {seen:?}");
        }
    }

    /// Each primitive's box, and each piece a spatial split cut from it.
    fn pieces(nodes: &[BvhNode]) -> Vec<(u32, [f32; 3], [f32; 3])> {
        let mut out = Vec::new();
        for node in nodes {
            for slot in 0..WIDTH {
                let child = node.children[slot];
                if child != EMPTY_SLOT && child & PRIMITIVE != 0 {
                    let lo = [0, 1, 2].map(|k| node.min[k][slot]);
                    let hi = [0, 1, 2].map(|k| node.max[k][slot]);
                    out.push((child & !PRIMITIVE, lo, hi));
                }
            }
        }
        out
    }

    /// With spatial splits, a primitive may sit under several children, but
    /// its pieces lie inside its box and cover all of it: no move that can
    /// touch it misses every piece.
    #[test]
    fn spatial_splits_cover_each_primitive() {
        // Long bars across a field of small boxes: splits cut the bars.
        let mut rng = fastrand::Rng::with_seed(0x1234_5678);
        let items: Vec<Item> = (0..300u32)
            .map(|i| {
                let at = [0, 1, 2].map(|_| rng.f32() * 1000.0);
                let size = if i % 3 == 0 {
                    [1000.0, 8.0, 8.0]
                } else {
                    [16.0, 16.0, 16.0]
                };
                Item {
                    reference: PRIMITIVE | i,
                    contents: 1,
                    lo: at,
                    hi: [0, 1, 2].map(|k| at[k] + size[k]),
                }
            })
            .collect();
        let mut nodes = Vec::new();
        let mut copies = items.len();
        build_node(items.clone(), &mut nodes, &mut copies);
        let pieces = pieces(&nodes);
        assert!(pieces.len() > items.len(), "some boxes were cut");
        for item in &items {
            let own: Vec<_> = pieces
                .iter()
                .filter(|p| p.0 == item.reference & !PRIMITIVE)
                .collect();
            assert!(!own.is_empty());
            for (_, lo, hi) in &own {
                assert!((0..3).all(|k| item.lo[k] <= lo[k] && hi[k] <= item.hi[k]));
            }
            for _ in 0..200 {
                let p = [0, 1, 2].map(|k| item.lo[k] + (item.hi[k] - item.lo[k]) * rng.f32());
                assert!(
                    own.iter()
                        .any(|(_, lo, hi)| (0..3).all(|k| lo[k] <= p[k] && p[k] <= hi[k])),
                    "{p:?} of {item:?} is in no piece"
                );
            }
        }
        assert!(copies < items.len(), "the budget was drawn on");
    }

    /// The sample moves' count of nodes reached tells a tree that holds
    /// everything in one flat node from one that splits a far-apart set.
    #[test]
    fn visits_count_the_nodes_moves_reach() {
        let items: Vec<Item> = (0..64u32).map(|i| item(i, i as f32 * 100.0)).collect();
        let mut nodes = Vec::new();
        build_node(items, &mut nodes, &mut 0);
        let far = vec![([-500.0, 0.5, 0.5], [-400.0, 0.5, 0.5], [0.0; 3])];
        assert_eq!(visits(&nodes, &far), 1, "only the root");
        let across = vec![([-50.0, 0.5, 0.5], [7000.0, 0.5, 0.5], [0.0; 3])];
        assert_eq!(visits(&nodes, &across), nodes.len(), "every node");
        assert_eq!(sample_moves(&nodes).len(), 4096);
    }
}
