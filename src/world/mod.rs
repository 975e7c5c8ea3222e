//! The immutable compiled world: flat arrays of plain records, indices between
//! them validated once, read by the kernel without further checks. What
//! the kernel derives from them when a world is loaded (its trees and
//! grids) lives beside the kernel, in [`crate::trace::accel`].

pub mod bevels;
pub mod format;
pub mod validate;
pub mod vis;

use crate::math::Vec3;
pub use bevels::{BevelRange, ShapeBevel};
use bytemuck::{Pod, Zeroable};

/// A plane with its axis and sign bits precomputed for the kernel.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable, PartialEq)]
pub struct Plane {
    pub normal: [f32; 3],
    pub dist: f32,
    /// 0/1/2 for +X/+Y/+Z, 3 otherwise.
    pub axis: u32,
    pub sign_bits: u32,
}
const _: () = assert!(std::mem::size_of::<Plane>() == 24);

impl Plane {
    pub fn new(normal: Vec3, dist: f32) -> Self {
        // (As the reference marks them: a component of exactly 1, first of
        // x, y, z.)
        let axis = (0..3).find(|&k| normal[k] == 1.0).unwrap_or(3) as u32;
        let sign_bits = (normal.x < 0.0) as u32
            | ((normal.y < 0.0) as u32) << 1
            | ((normal.z < 0.0) as u32) << 2;
        Plane {
            normal: normal.to_array(),
            dist,
            axis,
            sign_bits,
        }
    }

    #[inline(always)]
    pub fn normal(&self) -> Vec3 {
        Vec3::from_array(self.normal)
    }

    /// Normal and distance widened to f64 (exactly), for geometry built
    /// from the planes.
    pub fn to_f64(&self) -> (crate::math::DVec3, f64) {
        (crate::math::dvec(self.normal()), f64::from(self.dist))
    }

    /// Signed distance of `p` from the plane, computed as the reference does
    /// (axial planes read one component).
    #[inline(always)]
    pub fn distance(&self, p: Vec3) -> f32 {
        if self.axis < 3 {
            p[self.axis as usize] - self.dist
        } else {
            self.normal().dot(p) - self.dist
        }
    }
}

/// A convex brush: the intersection of the back half-spaces of its sides.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable, PartialEq)]
pub struct Brush {
    pub first_side: u32,
    pub num_sides: u32,
    pub contents: u32,
    /// Index of the brush in the source file (reported by tools, keeps ties in source order).
    pub source_index: u32,
    pub mins: [f32; 3],
    pub maxs: [f32; 3],
}
const _: () = assert!(std::mem::size_of::<Brush>() == 40);

#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable, PartialEq)]
pub struct BrushSide {
    pub plane: u32,
    pub surface_flags: u32,
}

/// A tree node. A child `c >= 0` is a node, `c < 0` is leaf `-1 - c`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable, PartialEq)]
pub struct Node {
    pub plane: u32,
    pub children: [i32; 2],
    /// `NODE_*` bits.
    pub flags: u32,
}
const _: () = assert!(std::mem::size_of::<Node>() == 16);

/// The node's plane is not a splitting plane of the source's own tree (it is
/// the face of a detail brush): a point exactly on it lies in the brushes on
/// both sides, as it does in the reference, whose leaf there lists them all.
pub const NODE_CLOSED_PLANE: u32 = 1;

/// A leaf cell of the solid-leaf tree.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable, PartialEq)]
pub struct Leaf {
    /// OR of the contents of the brushes that fill this cell (0: empty cell).
    pub contents: u32,
    pub first_brush: u32,
    pub num_brushes: u32,
    pub first_patch: u32,
    pub num_patches: u32,
}

/// What potentially-visible-set queries read of one leaf of the source's
/// tree: its cluster (a row and a column of the visibility data) and its
/// area; -1 for none (a leaf in solid, or in the void around the map).
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable, PartialEq, Eq)]
pub struct LeafVis {
    pub cluster: i32,
    pub area: i32,
}
const _: () = assert!(std::mem::size_of::<LeafVis>() == 8);

/// An area portal: a mover (a door) whose bounds join two areas, so that
/// the areas are connected while it is open (see [`vis`]).
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable, PartialEq, Eq)]
pub struct AreaPortal {
    pub areas: [i32; 2],
    /// The entity's index in the map's entity lump.
    pub entity: u32,
    /// Its inline model `*model`.
    pub model: u32,
}
const _: () = assert!(std::mem::size_of::<AreaPortal>() == 16);

/// One patch surface's collision geometry: facets over a shared plane list.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable, PartialEq)]
pub struct Patch {
    pub contents: u32,
    pub surface_flags: u32,
    pub first_facet: u32,
    pub num_facets: u32,
    /// Range in `patch_planes` used by this patch's facets (indices in facets are absolute).
    pub first_plane: u32,
    pub num_planes: u32,
    /// Bounds of the refined grid grown by one unit: they hold every facet.
    pub mins: [f32; 3],
    pub maxs: [f32; 3],
    pub source_surface: u32,
}

/// A patch plane stored as the reference stores it: normal and dist, plus sign bits.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable, PartialEq)]
pub struct PatchPlane {
    pub plane: [f32; 4],
    pub sign_bits: u32,
}

/// A facet: a surface plane and border planes enclosing a convex piece of a patch.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable, PartialEq)]
pub struct Facet {
    /// Absolute index into `patch_planes`.
    pub surface_plane: u32,
    pub first_border: u32,
    pub num_borders: u32,
}

/// Most borders a facet has (Quake 3's limit): the four edges of its
/// triangle or quad, six axial bevels and sixteen edge bevels.
pub const MAX_FACET_BORDERS: usize = 4 + 6 + 16;

/// A facet border: a plane and whether it faces inward (is used flipped). The
/// last border of a facet is the back of its surface plane, which is never hit.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable, PartialEq)]
pub struct FacetBorder {
    /// Absolute index into `patch_planes`.
    pub plane: u32,
    pub inward: u32,
    /// The border is a neighbour's plane equal to the facet's own (kept for
    /// tools; traces do not read it, as the reference does not).
    pub no_adjust: u32,
}

/// Most onion hulls a world may register (one bit each in [`World::leaf_hull_solid`]).
pub const MAX_HULLS: usize = 32;

/// One leaf as one onion hull sees it (record `leaf * hulls + hull` of
/// [`World::hull_leaves`]): the brushes whose configuration-space obstacle for
/// that hull (the brush with every side pushed out by the hull box's support
/// distance, as the box sweep clips it) contains the whole leaf cell, and the
/// patches whose bounds grown by the hull box reach the cell.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable, PartialEq)]
pub struct HullLeaf {
    /// OR of the contents of the listed brushes (0: the cell is free for this hull).
    pub contents: u32,
    /// Range in [`World::hull_leaf_brushes`].
    pub first_brush: u32,
    pub num_brushes: u32,
    /// Range in [`World::hull_leaf_patches`].
    pub first_patch: u32,
    pub num_patches: u32,
}

/// A registered box size for onion-BSP hulls, compiled into the world's tree
/// (see `compile::onion`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HullSpec {
    pub name: String,
    pub mins: [f32; 3],
    pub maxs: [f32; 3],
}

/// Facts about how the world was made, for `inspect` and the service.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WorldInfo {
    pub source_name: String,
    /// xxh3-64 of the source file's bytes (the .bsp, or the pk3 member).
    pub source_hash: u64,
    pub compiler_version: String,
    pub curves: bool,
    pub hulls: Vec<HullSpec>,
    pub source_brushes: usize,
    pub source_brush_sides: usize,
    pub source_patches: usize,
    pub source_planes: usize,
    pub compile_seconds: f64,
    pub bevels_added: usize,
    /// What compiling the onion hulls added (absent without hulls, so such
    /// worlds' metadata is as before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub onion: Option<OnionInfo>,
}

/// What compiling the onion hulls added to the tree, and how long it took.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OnionInfo {
    pub nodes_added: usize,
    pub leaves_added: usize,
    pub seconds: f64,
}

/// A world as the compiler builds it: owned arrays.
#[derive(Debug, Clone, Default)]
pub struct WorldData {
    pub info: WorldInfo,
    /// The source map's entity lump: its text up to the first NUL, as the
    /// map holds it ([`crate::source::entities`] parses it). The kernel
    /// never reads it, so [`World`] does not carry it.
    pub entities: Vec<u8>,
    pub planes: Vec<Plane>,
    pub brushes: Vec<Brush>,
    pub brush_sides: Vec<BrushSide>,
    pub nodes: Vec<Node>,
    pub leaves: Vec<Leaf>,
    pub leaf_brushes: Vec<u32>,
    pub leaf_patches: Vec<u32>,
    pub patches: Vec<Patch>,
    pub patch_planes: Vec<PatchPlane>,
    pub facets: Vec<Facet>,
    pub facet_borders: Vec<FacetBorder>,
    /// Onion hulls (empty when `info.hulls` is): per leaf, a bitset of the
    /// hulls for which the cell is solid (bit h: inside some brush expanded by
    /// hull h) ...
    pub leaf_hull_solid: Vec<u32>,
    /// ... `leaves × hulls` records, leaf-major ...
    pub hull_leaves: Vec<HullLeaf>,
    /// ... and the brush and patch lists they index.
    pub hull_leaf_brushes: Vec<u32>,
    pub hull_leaf_patches: Vec<u32>,
    pub mins: [f32; 3],
    pub maxs: [f32; 3],
    /// Extra planes per brush that only shape sweeps read ([`bevels`]);
    /// both empty when the world has none.
    pub shape_bevel_ranges: Vec<BevelRange>,
    pub shape_bevels: Vec<ShapeBevel>,
    /// The source's own tree, all four empty when the world has none (see
    /// [`SourceTree`]).
    pub source_nodes: Vec<Node>,
    pub source_leaves: Vec<Leaf>,
    pub source_leaf_brushes: Vec<u32>,
    pub source_leaf_patches: Vec<u32>,
    /// Per source leaf, its cluster and area (empty: the world has no
    /// potentially-visible-set data), and the map's visibility data (see
    /// [`SourceTree::visibility`]).
    pub source_leaf_vis: Vec<LeafVis>,
    pub visibility: Vec<u8>,
    pub area_portals: Vec<AreaPortal>,
    /// The map's inline models `*1`…`*N` (doors, platforms, triggers), each
    /// a world of its own in the model's local coordinates (a scene places
    /// them); empty in a model.
    pub models: Vec<WorldData>,
}

impl WorldData {
    /// Borrows the arrays as the kernel reads them.
    pub fn view(&self) -> World<'_> {
        World {
            info: &self.info,
            planes: &self.planes,
            brushes: &self.brushes,
            brush_sides: &self.brush_sides,
            nodes: &self.nodes,
            leaves: &self.leaves,
            leaf_brushes: &self.leaf_brushes,
            leaf_patches: &self.leaf_patches,
            patches: &self.patches,
            patch_planes: &self.patch_planes,
            facets: &self.facets,
            facet_borders: &self.facet_borders,
            leaf_hull_solid: &self.leaf_hull_solid,
            hull_leaves: &self.hull_leaves,
            hull_leaf_brushes: &self.hull_leaf_brushes,
            hull_leaf_patches: &self.hull_leaf_patches,
            mins: self.mins,
            maxs: self.maxs,
            shape_bevel_ranges: &self.shape_bevel_ranges,
            shape_bevels: &self.shape_bevels,
            source: SourceTree {
                nodes: &self.source_nodes,
                leaves: &self.source_leaves,
                leaf_brushes: &self.source_leaf_brushes,
                leaf_patches: &self.source_leaf_patches,
                leaf_vis: &self.source_leaf_vis,
                visibility: &self.visibility,
                area_portals: &self.area_portals,
            },
        }
    }

    /// The tree's root as a child reference (a single leaf when there are no nodes).
    pub fn root(&self) -> i32 {
        self.view().root()
    }
}

/// The world the kernel reads: plain-data arrays (owned by a [`WorldData`] or
/// cast in place from a compiled world file), every index valid.
#[derive(Debug, Clone, Copy)]
pub struct World<'a> {
    pub info: &'a WorldInfo,
    pub planes: &'a [Plane],
    pub brushes: &'a [Brush],
    pub brush_sides: &'a [BrushSide],
    pub nodes: &'a [Node],
    pub leaves: &'a [Leaf],
    pub leaf_brushes: &'a [u32],
    pub leaf_patches: &'a [u32],
    pub patches: &'a [Patch],
    pub patch_planes: &'a [PatchPlane],
    pub facets: &'a [Facet],
    pub facet_borders: &'a [FacetBorder],
    /// Onion hulls: see [`WorldData::leaf_hull_solid`] and the fields after it.
    pub leaf_hull_solid: &'a [u32],
    pub hull_leaves: &'a [HullLeaf],
    pub hull_leaf_brushes: &'a [u32],
    pub hull_leaf_patches: &'a [u32],
    pub mins: [f32; 3],
    pub maxs: [f32; 3],
    /// Per brush, its range in `shape_bevels` (empty: no shape bevels).
    pub shape_bevel_ranges: &'a [BevelRange],
    pub shape_bevels: &'a [ShapeBevel],
    /// The source's own tree, or an empty one.
    pub source: SourceTree<'a>,
}

/// The tree of the map the world was compiled from, as the source file has
/// it: its nodes (planes are indices into [`World::planes`], which begin
/// with the source's planes), its leaves, and each leaf's brushes and
/// patches in the source's order (world indices; a leaf's `contents` is 0).
///
/// The reference keeps the first of equal contacts and stops at one at the
/// very start, so those answers depend on its own tree's visit order and
/// walk this tree; all others are the same in any tree. Nodes come before
/// their children (checked at load), so a walk ends.
#[derive(Debug, Clone, Copy, Default)]
pub struct SourceTree<'a> {
    pub nodes: &'a [Node],
    pub leaves: &'a [Leaf],
    pub leaf_brushes: &'a [u32],
    pub leaf_patches: &'a [u32],
    /// Per leaf, its cluster and area; empty when the world was compiled
    /// without them (then it answers no potentially-visible-set query).
    pub leaf_vis: &'a [LeafVis],
    /// The map's visibility data as its file has it: cluster count (i32),
    /// row length in bytes (i32), then one row per cluster, bit `c` of row
    /// `r` set when cluster `c` is potentially visible from cluster `r`.
    /// Empty when the map has none (every cluster sees every other).
    pub visibility: &'a [u8],
    /// The map's area portals, in entity order.
    pub area_portals: &'a [AreaPortal],
}

impl SourceTree<'_> {
    /// Whether the world carries the source's tree.
    #[inline(always)]
    pub fn is_present(&self) -> bool {
        !self.leaves.is_empty()
    }

    /// The root as a child reference.
    pub fn root(&self) -> i32 {
        if self.nodes.is_empty() {
            -1
        } else {
            0
        }
    }
}

impl<'a> World<'a> {
    /// The shape bevels of brush `b` (none when the world has no such section).
    #[inline(always)]
    pub fn shape_bevels_of(&self, b: usize) -> &'a [ShapeBevel] {
        match self.shape_bevel_ranges.get(b) {
            Some(r) => &self.shape_bevels[r.first as usize..][..r.count as usize],
            None => &[],
        }
    }

    /// This world without the source's tree: answers that depend on the
    /// order in which leaves are visited come from the compiled tree (for
    /// tests and tools comparing the two).
    pub fn without_source_tree(&self) -> Self {
        World {
            source: SourceTree::default(),
            ..*self
        }
    }

    /// The index of the onion hull registered as `name`, if any.
    pub fn hull_index(&self, name: &str) -> Option<usize> {
        self.info.hulls.iter().position(|h| h.name == name)
    }

    /// What onion hull `hull` knows about leaf `leaf` (both in range).
    #[inline(always)]
    pub fn hull_leaf(&self, leaf: usize, hull: usize) -> &HullLeaf {
        &self.hull_leaves[leaf * self.info.hulls.len() + hull]
    }

    /// The tree's root as a child reference (a single leaf when there are no nodes).
    pub fn root(&self) -> i32 {
        if self.nodes.is_empty() {
            -1
        } else {
            0
        }
    }
}

// The file format casts these records in place: their sizes and alignment are part of it.
const _: () = {
    use std::mem::{align_of, size_of};
    assert!(size_of::<BrushSide>() == 8);
    assert!(size_of::<Leaf>() == 20);
    assert!(size_of::<Patch>() == 52);
    assert!(size_of::<PatchPlane>() == 20);
    assert!(size_of::<Facet>() == 12);
    assert!(size_of::<HullLeaf>() == 20 && align_of::<HullLeaf>() == 4);
    assert!(size_of::<FacetBorder>() == 12);
    assert!(align_of::<Plane>() == 4 && align_of::<Brush>() == 4 && align_of::<Node>() == 4);
    assert!(align_of::<Leaf>() == 4 && align_of::<Patch>() == 4 && align_of::<FacetBorder>() == 4);
};
