//! The compiled world file: layout, writer and structural parser. The
//! format, field by field, is in `docs/world-file.md`: a 64-byte header
//! (magic, version, flags, length, xxh3-64 checksum), a section table, and
//! 16-byte-aligned sections of `#[repr(C)]` records the loader casts in
//! place; inline models are whole world files nested in their section.

use super::{
    AreaPortal, BevelRange, Brush, BrushSide, Facet, FacetBorder, HullLeaf, Leaf, LeafVis, Node,
    Patch, PatchPlane, Plane, ShapeBevel, World, WorldData, WorldInfo,
};
use crate::source::entities::{self, Entity, EntityError};
use bytemuck::Pod;
use std::ops::Range;
use thiserror::Error;

pub const MAGIC: &[u8; 8] = b"BSPQWRLD";
pub const FORMAT_VERSION: u32 = 2;
pub const HEADER_LEN: usize = 64;
pub const SECTION_ENTRY_LEN: usize = 32;
pub const SECTION_ALIGN: usize = 16;
pub const MAX_SECTIONS: usize = 64;
/// Largest metadata section accepted (JSON).
pub const MAX_META_BYTES: u64 = 1 << 20;
pub const FLAG_CURVES: u32 = 1;
/// The optional shape-bevel sections are present.
pub const FLAG_SHAPE_BEVELS: u32 = 2;
/// The optional source-tree sections are present.
pub const FLAG_SOURCE_TREE: u32 = 4;
/// The optional visibility sections are present.
pub const FLAG_VISIBILITY: u32 = 8;

/// Declares [`SectionKind`] from one table: each kind's number in the
/// file, its name in messages, and its record type.
macro_rules! section_kinds {
    ($($kind:ident = $number:literal, $name:literal, $record:ty;)*) => {
        /// The kinds of section, with their numbers in the file.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[repr(u32)]
        pub enum SectionKind {
            $($kind = $number,)*
        }

        impl SectionKind {
            pub fn from_u32(v: u32) -> Option<Self> {
                [$(SectionKind::$kind),*].into_iter().find(|k| *k as u32 == v)
            }

            pub fn name(self) -> &'static str {
                match self {
                    $(SectionKind::$kind => $name,)*
                }
            }

            /// The size of one record of this kind.
            pub fn record_size(self) -> usize {
                match self {
                    $(SectionKind::$kind => std::mem::size_of::<$record>(),)*
                }
            }
        }
    };
}

section_kinds! {
    Meta = 1, "meta", u8;
    Planes = 2, "planes", Plane;
    Brushes = 3, "brushes", Brush;
    BrushSides = 4, "brush_sides", BrushSide;
    Nodes = 5, "nodes", Node;
    Leaves = 6, "leaves", Leaf;
    LeafBrushes = 7, "leaf_brushes", u32;
    LeafPatches = 8, "leaf_patches", u32;
    Patches = 9, "patches", Patch;
    PatchPlanes = 10, "patch_planes", PatchPlane;
    Facets = 11, "facets", Facet;
    FacetBorders = 12, "facet_borders", FacetBorder;
    LeafHullSolid = 13, "leaf_hull_solid", u32;
    HullLeaves = 14, "hull_leaves", HullLeaf;
    HullLeafBrushes = 15, "hull_leaf_brushes", u32;
    HullLeafPatches = 16, "hull_leaf_patches", u32;
    Entities = 17, "entities", u8;
    Models = 18, "models", u8;
    ShapeBevelRanges = 32, "shape_bevel_ranges", BevelRange;
    ShapeBevels = 33, "shape_bevels", ShapeBevel;
    SourceNodes = 34, "source_nodes", Node;
    SourceLeaves = 35, "source_leaves", Leaf;
    SourceLeafBrushes = 36, "source_leaf_brushes", u32;
    SourceLeafPatches = 37, "source_leaf_patches", u32;
    SourceLeafVis = 38, "source_leaf_vis", LeafVis;
    Visibility = 39, "visibility", u8;
    AreaPortals = 40, "area_portals", AreaPortal;
}

/// The sections every file has.
pub const ALL_SECTIONS: [SectionKind; 14] = [
    SectionKind::Meta,
    SectionKind::Planes,
    SectionKind::Brushes,
    SectionKind::BrushSides,
    SectionKind::Nodes,
    SectionKind::Leaves,
    SectionKind::LeafBrushes,
    SectionKind::LeafPatches,
    SectionKind::Patches,
    SectionKind::PatchPlanes,
    SectionKind::Facets,
    SectionKind::FacetBorders,
    SectionKind::Entities,
    SectionKind::Models,
];

/// The onion-hull sections: present (all four) exactly when the world
/// registers hulls.
pub const HULL_SECTIONS: [SectionKind; 4] = [
    SectionKind::LeafHullSolid,
    SectionKind::HullLeaves,
    SectionKind::HullLeafBrushes,
    SectionKind::HullLeafPatches,
];
/// Sections a file may leave out.
pub const OPTIONAL_SECTIONS: [SectionKind; 2] =
    [SectionKind::ShapeBevelRanges, SectionKind::ShapeBevels];
/// The visibility sections: all three present, or none.
pub const VISIBILITY_SECTIONS: [SectionKind; 3] = [
    SectionKind::SourceLeafVis,
    SectionKind::Visibility,
    SectionKind::AreaPortals,
];
/// The source-tree sections: all four present, or none.
pub const SOURCE_TREE_SECTIONS: [SectionKind; 4] = [
    SectionKind::SourceNodes,
    SectionKind::SourceLeaves,
    SectionKind::SourceLeafBrushes,
    SectionKind::SourceLeafPatches,
];

/// The metadata section.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FileMeta {
    pub info: WorldInfo,
    pub mins: [f32; 3],
    pub maxs: [f32; 3],
}

/// Why a compiled world file was rejected.
#[derive(Debug, Error, PartialEq)]
pub enum FormatError {
    #[error("file is too short ({0} bytes) for a compiled world header")]
    TooShort(usize),
    #[error("not a compiled bspq world (bad magic)")]
    BadMagic,
    #[error(
        "unsupported compiled world format version {0} (this build reads {FORMAT_VERSION}: compile the map again with `bspq compile`)"
    )]
    UnsupportedVersion(u32),
    #[error("header: {0}")]
    BadHeader(String),
    #[error("checksum mismatch: header says {expected:#018x}, content hashes to {actual:#018x}")]
    Checksum { expected: u64, actual: u64 },
    #[error("section {index}: {reason}")]
    BadSection { index: usize, reason: String },
    #[error("section {0} is missing")]
    MissingSection(&'static str),
    #[error("metadata: {0}")]
    BadMeta(String),
    #[error("invalid world: {0}")]
    Invalid(String),
    #[error("invalid onion hulls: {0}")]
    InvalidHulls(String),
    #[error("entities section: {0}")]
    Entities(EntityError),
    #[error("models section: {0}")]
    Models(String),
    #[error("inline model *{model}: table entry: {reason}")]
    ModelEntry { model: usize, reason: String },
    #[error("inline model *{model}: {error}")]
    Model {
        model: usize,
        error: Box<FormatError>,
    },
    #[error("inline model *{model} has {count} models of its own (models do not nest)")]
    NestedModels { model: usize, count: usize },
}

/// Where one section lies in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct SectionEntry {
    pub kind: SectionKind,
    pub offset: usize,
    pub count: usize,
    pub byte_len: usize,
}

/// The parsed header and section table (structure only, nothing cast yet).
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    pub version: u32,
    pub flags: u32,
    pub file_len: usize,
    pub checksum: u64,
    pub sections: Vec<SectionEntry>,
}

impl Layout {
    pub fn range(&self, kind: SectionKind) -> Range<usize> {
        self.sections
            .iter()
            .find(|s| s.kind == kind)
            .map_or(0..0, |s| s.offset..s.offset + s.byte_len)
    }
}

/// The checksum of a file's content (everything after the header).
pub fn content_checksum(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes.get(HEADER_LEN..).unwrap_or(&[]))
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// True when the bytes start like a compiled world.
pub fn looks_like_world_file(bytes: &[u8]) -> bool {
    bytes.len() >= MAGIC.len() && &bytes[..MAGIC.len()] == MAGIC
}

/// Parses the header and section table and checks every section's bounds,
/// alignment and record size. With `verify_checksum`, the content hash too.
pub fn parse_layout(bytes: &[u8], verify_checksum: bool) -> Result<Layout, FormatError> {
    if bytes.len() < HEADER_LEN {
        return Err(FormatError::TooShort(bytes.len()));
    }
    if !looks_like_world_file(bytes) {
        return Err(FormatError::BadMagic);
    }
    let version = u32_at(bytes, 8);
    if version != FORMAT_VERSION {
        return Err(FormatError::UnsupportedVersion(version));
    }
    let header_len = u32_at(bytes, 12) as usize;
    if header_len != HEADER_LEN {
        return Err(FormatError::BadHeader(format!(
            "header length {header_len}, expected {HEADER_LEN}"
        )));
    }
    let section_count = u32_at(bytes, 16) as usize;
    if section_count > MAX_SECTIONS {
        return Err(FormatError::BadHeader(format!(
            "{section_count} sections (limit {MAX_SECTIONS})"
        )));
    }
    let flags = u32_at(bytes, 20);
    let file_len = u64_at(bytes, 24);
    if file_len != bytes.len() as u64 {
        return Err(FormatError::BadHeader(format!(
            "header says {file_len} bytes but the file has {} (truncated or padded)",
            bytes.len()
        )));
    }
    let checksum = u64_at(bytes, 32);
    if verify_checksum {
        let actual = content_checksum(bytes);
        if actual != checksum {
            return Err(FormatError::Checksum {
                expected: checksum,
                actual,
            });
        }
    }
    let table_end = HEADER_LEN + section_count * SECTION_ENTRY_LEN;
    if table_end > bytes.len() {
        return Err(FormatError::BadHeader(
            "section table runs past the end of the file".into(),
        ));
    }
    let mut sections: Vec<SectionEntry> = Vec::with_capacity(section_count);
    for index in 0..section_count {
        let at = HEADER_LEN + index * SECTION_ENTRY_LEN;
        let bad = |reason: String| FormatError::BadSection { index, reason };
        let kind_number = u32_at(bytes, at);
        let kind = SectionKind::from_u32(kind_number)
            .ok_or_else(|| bad(format!("unknown kind {kind_number}")))?;
        if sections.iter().any(|s| s.kind == kind) {
            return Err(bad(format!("{} appears twice", kind.name())));
        }
        let record_size = u32_at(bytes, at + 4) as usize;
        if record_size != kind.record_size() {
            return Err(bad(format!(
                "{} records are {record_size} bytes, expected {}",
                kind.name(),
                kind.record_size()
            )));
        }
        let offset = u64_at(bytes, at + 8);
        let count = u64_at(bytes, at + 16);
        let byte_len = count.checked_mul(record_size as u64);
        let end = byte_len.and_then(|l| l.checked_add(offset));
        let (Some(byte_len), Some(end)) = (byte_len, end) else {
            return Err(bad(format!("{} size overflows", kind.name())));
        };
        if offset < table_end as u64 || end > bytes.len() as u64 {
            return Err(bad(format!(
                "{} lies outside the file ({offset}..{end})",
                kind.name()
            )));
        }
        if !(offset as usize).is_multiple_of(SECTION_ALIGN) {
            return Err(bad(format!(
                "{} offset {offset} is not {SECTION_ALIGN}-aligned",
                kind.name()
            )));
        }
        if kind == SectionKind::Meta && byte_len > MAX_META_BYTES {
            return Err(bad(format!(
                "metadata of {byte_len} bytes exceeds {MAX_META_BYTES}"
            )));
        }
        sections.push(SectionEntry {
            kind,
            offset: offset as usize,
            count: count as usize,
            byte_len: byte_len as usize,
        });
    }
    for kind in ALL_SECTIONS {
        if !sections.iter().any(|s| s.kind == kind) {
            return Err(FormatError::MissingSection(kind.name()));
        }
    }
    let hull_sections = HULL_SECTIONS
        .iter()
        .filter(|k| sections.iter().any(|s| s.kind == **k))
        .count();
    if hull_sections != 0 && hull_sections != HULL_SECTIONS.len() {
        let missing = HULL_SECTIONS
            .iter()
            .find(|k| !sections.iter().any(|s| s.kind == **k))
            .map_or("hull sections", |k| k.name());
        return Err(FormatError::MissingSection(missing));
    }
    for (flag, kinds, what) in [
        (FLAG_SHAPE_BEVELS, &OPTIONAL_SECTIONS[..], "shape-bevel"),
        (FLAG_SOURCE_TREE, &SOURCE_TREE_SECTIONS[..], "source-tree"),
        (FLAG_VISIBILITY, &VISIBILITY_SECTIONS[..], "visibility"),
    ] {
        let flagged = flags & flag != 0;
        for &kind in kinds {
            let present = sections.iter().any(|s| s.kind == kind);
            if present != flagged {
                return Err(if present {
                    FormatError::BadHeader(format!(
                        "section {} is present but the {what} flag is not set",
                        kind.name()
                    ))
                } else {
                    FormatError::MissingSection(kind.name())
                });
            }
        }
    }
    Ok(Layout {
        version,
        flags,
        file_len: bytes.len(),
        checksum,
        sections,
    })
}

/// Reads the metadata section of a parsed file.
pub fn read_meta(bytes: &[u8], layout: &Layout) -> Result<FileMeta, FormatError> {
    let raw = &bytes[layout.range(SectionKind::Meta)];
    serde_json::from_slice(raw).map_err(|e| FormatError::BadMeta(e.to_string()))
}

/// Reads the entities section of a parsed file.
pub fn read_entities(bytes: &[u8], layout: &Layout) -> Result<Vec<Entity>, FormatError> {
    entities::parse(&bytes[layout.range(SectionKind::Entities)]).map_err(FormatError::Entities)
}

/// Bytes before the first model in a models section holding `count`: the
/// count and the table.
fn model_table_len(count: usize) -> usize {
    8 + 16 * count
}

fn align16(n: usize) -> usize {
    n.div_ceil(SECTION_ALIGN) * SECTION_ALIGN
}

/// Where the inline models of a parsed file lie: model `*k`'s nested file
/// is `bytes[ranges[k - 1]]` (absolute offsets). Checks the table as
/// `docs/world-file.md` lays it out (the count against the section's length, every
/// entry's alignment, order, bounds and length, the zero padding, the
/// section ending with the last model); the nested files themselves are
/// checked by loading them.
pub fn model_ranges(bytes: &[u8], layout: &Layout) -> Result<Vec<Range<usize>>, FormatError> {
    let section = layout.range(SectionKind::Models);
    let base = section.start;
    let body = &bytes[section];
    let len = body.len();
    if len < 8 {
        return Err(FormatError::Models(format!(
            "{len} bytes, too short for the model count (8 bytes)"
        )));
    }
    let count = u64_at(body, 0);
    let room = ((len - 8) / 16) as u64;
    if count > room {
        return Err(FormatError::Models(format!(
            "{count} models claimed, but its {len} bytes hold at most {room} table entries"
        )));
    }
    let count = count as usize;
    let mut ranges = Vec::with_capacity(count);
    let mut end = model_table_len(count);
    for index in 0..count {
        let model = index + 1;
        let bad = |reason: String| FormatError::ModelEntry { model, reason };
        let before = if index == 0 {
            "the table".to_owned()
        } else {
            format!("model *{index}")
        };
        let at = 8 + 16 * index;
        let (offset, length) = (u64_at(body, at), u64_at(body, at + 8));
        if !offset.is_multiple_of(SECTION_ALIGN as u64) {
            return Err(bad(format!(
                "offset {offset} is not {SECTION_ALIGN}-aligned"
            )));
        }
        if length < HEADER_LEN as u64 {
            return Err(bad(format!(
                "length {length} is shorter than a world file's header ({HEADER_LEN})"
            )));
        }
        let stop = match offset.checked_add(length) {
            Some(stop) if stop <= len as u64 => stop as usize,
            _ => {
                return Err(bad(format!(
                    "{offset} + {length} runs past the section's end ({len})"
                )))
            }
        };
        let offset = offset as usize;
        if offset < end {
            return Err(bad(format!(
                "offset {offset} overlaps {before}, which ends at {end}"
            )));
        }
        let expected = align16(end);
        if offset != expected {
            return Err(bad(format!(
                "offset {offset} leaves a gap after {before} (expected {expected})"
            )));
        }
        if body[end..offset].iter().any(|&b| b != 0) {
            return Err(bad(format!(
                "the padding before it ({end}..{offset}) is not zero"
            )));
        }
        let stated = u64_at(body, offset + 24);
        if stated != length {
            return Err(bad(format!(
                "length {length}, but the model's header says {stated} bytes"
            )));
        }
        ranges.push(base + offset..base + stop);
        end = stop;
    }
    if end != len {
        return Err(FormatError::Models(format!(
            "{} bytes follow the last model (the section is {len} bytes, its content {end})",
            len - end
        )));
    }
    Ok(ranges)
}

/// Casts one section in place. `bytes` must be at least 4-byte aligned (the
/// loader's buffers are), and the layout was checked by [`parse_layout`].
pub fn section<'a, T: Pod>(
    bytes: &'a [u8],
    layout: &Layout,
    kind: SectionKind,
) -> Result<&'a [T], FormatError> {
    bytemuck::try_cast_slice(&bytes[layout.range(kind)]).map_err(|e| {
        FormatError::Invalid(format!(
            "section {} cannot be read in place: {e}",
            kind.name()
        ))
    })
}

/// A [`World`] over the bytes of a compiled file, after [`super::validate`].
pub fn view<'a>(
    bytes: &'a [u8],
    layout: &Layout,
    meta: &'a FileMeta,
) -> Result<World<'a>, FormatError> {
    Ok(World {
        info: &meta.info,
        planes: section(bytes, layout, SectionKind::Planes)?,
        brushes: section(bytes, layout, SectionKind::Brushes)?,
        brush_sides: section(bytes, layout, SectionKind::BrushSides)?,
        nodes: section(bytes, layout, SectionKind::Nodes)?,
        leaves: section(bytes, layout, SectionKind::Leaves)?,
        leaf_brushes: section(bytes, layout, SectionKind::LeafBrushes)?,
        leaf_patches: section(bytes, layout, SectionKind::LeafPatches)?,
        patches: section(bytes, layout, SectionKind::Patches)?,
        patch_planes: section(bytes, layout, SectionKind::PatchPlanes)?,
        facets: section(bytes, layout, SectionKind::Facets)?,
        facet_borders: section(bytes, layout, SectionKind::FacetBorders)?,
        leaf_hull_solid: section(bytes, layout, SectionKind::LeafHullSolid)?,
        hull_leaves: section(bytes, layout, SectionKind::HullLeaves)?,
        hull_leaf_brushes: section(bytes, layout, SectionKind::HullLeafBrushes)?,
        hull_leaf_patches: section(bytes, layout, SectionKind::HullLeafPatches)?,
        mins: meta.mins,
        maxs: meta.maxs,
        // Optional: an absent section is an empty range.
        shape_bevel_ranges: section(bytes, layout, SectionKind::ShapeBevelRanges)?,
        shape_bevels: section(bytes, layout, SectionKind::ShapeBevels)?,
        source: super::SourceTree {
            nodes: section(bytes, layout, SectionKind::SourceNodes)?,
            leaves: section(bytes, layout, SectionKind::SourceLeaves)?,
            leaf_brushes: section(bytes, layout, SectionKind::SourceLeafBrushes)?,
            leaf_patches: section(bytes, layout, SectionKind::SourceLeafPatches)?,
            leaf_vis: section(bytes, layout, SectionKind::SourceLeafVis)?,
            visibility: &bytes[layout.range(SectionKind::Visibility)],
            area_portals: section(bytes, layout, SectionKind::AreaPortals)?,
        },
    })
}

/// Serialises a world into the file format, its inline models (and theirs:
/// the loader refuses models that have models) nested in it.
pub fn write(world: &WorldData) -> Vec<u8> {
    let models: Vec<Vec<u8>> = world.models.iter().map(write).collect();
    write_with_models(world, &models)
}

/// A section's kind, record count and bytes, for the writer.
fn records<T: Pod>(kind: SectionKind, records: &[T]) -> (SectionKind, usize, &[u8]) {
    (kind, records.len(), bytemuck::cast_slice(records))
}

/// The models section for the nested files `models` (each a whole world
/// file): the count, the table, then the files at 16-byte boundaries.
fn models_section(models: &[Vec<u8>]) -> Vec<u8> {
    let mut out = vec![0u8; model_table_len(models.len())];
    out[..8].copy_from_slice(&(models.len() as u64).to_le_bytes());
    for (index, model) in models.iter().enumerate() {
        out.resize(align16(out.len()), 0);
        let at = 8 + 16 * index;
        let offset = out.len() as u64;
        out[at..at + 8].copy_from_slice(&offset.to_le_bytes());
        out[at + 8..at + 16].copy_from_slice(&(model.len() as u64).to_le_bytes());
        out.extend_from_slice(model);
    }
    out
}

/// Serialises `world` with `models` as its inline models, already
/// serialised (each one file, as [`write()`] writes a model): the one writer
/// behind [`write()`] and a loaded world's re-serialisation, whose models
/// are no longer in its [`WorldData`]. `world.models` is not read.
pub fn write_with_models(world: &WorldData, models: &[Vec<u8>]) -> Vec<u8> {
    let meta = FileMeta {
        info: world.info.clone(),
        mins: world.mins,
        maxs: world.maxs,
    };
    // Serialising plain data cannot fail.
    let meta_json = serde_json::to_vec(&meta).unwrap_or_default();
    let models_body = models_section(models);
    let mut bodies: Vec<(SectionKind, usize, &[u8])> = vec![
        records(SectionKind::Meta, &meta_json),
        records(SectionKind::Planes, &world.planes),
        records(SectionKind::Brushes, &world.brushes),
        records(SectionKind::BrushSides, &world.brush_sides),
        records(SectionKind::Nodes, &world.nodes),
        records(SectionKind::Leaves, &world.leaves),
        records(SectionKind::LeafBrushes, &world.leaf_brushes),
        records(SectionKind::LeafPatches, &world.leaf_patches),
        records(SectionKind::Patches, &world.patches),
        records(SectionKind::PatchPlanes, &world.patch_planes),
        records(SectionKind::Facets, &world.facets),
        records(SectionKind::FacetBorders, &world.facet_borders),
        records(SectionKind::Entities, &world.entities),
        records(SectionKind::Models, &models_body),
    ];
    // Worlds without hulls have no hull sections.
    if !world.info.hulls.is_empty() {
        bodies.extend([
            records(SectionKind::LeafHullSolid, &world.leaf_hull_solid),
            records(SectionKind::HullLeaves, &world.hull_leaves),
            records(SectionKind::HullLeafBrushes, &world.hull_leaf_brushes),
            records(SectionKind::HullLeafPatches, &world.hull_leaf_patches),
        ]);
    }
    if !world.shape_bevel_ranges.is_empty() {
        bodies.extend([
            records(SectionKind::ShapeBevelRanges, &world.shape_bevel_ranges),
            records(SectionKind::ShapeBevels, &world.shape_bevels),
        ]);
    }
    // Written before the source tree's, which some tools expect last.
    if !world.source_leaf_vis.is_empty() {
        bodies.extend([
            records(SectionKind::SourceLeafVis, &world.source_leaf_vis),
            records(SectionKind::Visibility, &world.visibility),
            records(SectionKind::AreaPortals, &world.area_portals),
        ]);
    }
    if !world.source_leaves.is_empty() {
        bodies.extend([
            records(SectionKind::SourceNodes, &world.source_nodes),
            records(SectionKind::SourceLeaves, &world.source_leaves),
            records(SectionKind::SourceLeafBrushes, &world.source_leaf_brushes),
            records(SectionKind::SourceLeafPatches, &world.source_leaf_patches),
        ]);
    }
    let align = align16;
    let mut out = vec![0u8; align(HEADER_LEN + bodies.len() * SECTION_ENTRY_LEN)];
    for (index, (kind, count, body)) in bodies.iter().enumerate() {
        let offset = out.len();
        out.extend_from_slice(body);
        out.resize(align(out.len()), 0);
        let at = HEADER_LEN + index * SECTION_ENTRY_LEN;
        out[at..at + 4].copy_from_slice(&(*kind as u32).to_le_bytes());
        out[at + 4..at + 8].copy_from_slice(&(kind.record_size() as u32).to_le_bytes());
        out[at + 8..at + 16].copy_from_slice(&(offset as u64).to_le_bytes());
        out[at + 16..at + 24].copy_from_slice(&(*count as u64).to_le_bytes());
    }
    out[..8].copy_from_slice(MAGIC);
    out[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    out[12..16].copy_from_slice(&(HEADER_LEN as u32).to_le_bytes());
    out[16..20].copy_from_slice(&(bodies.len() as u32).to_le_bytes());
    let mut flags = if world.info.curves { FLAG_CURVES } else { 0 };
    if !world.shape_bevel_ranges.is_empty() {
        flags |= FLAG_SHAPE_BEVELS;
    }
    if !world.source_leaves.is_empty() {
        flags |= FLAG_SOURCE_TREE;
    }
    if !world.source_leaf_vis.is_empty() {
        flags |= FLAG_VISIBILITY;
    }
    out[20..24].copy_from_slice(&flags.to_le_bytes());
    let len = out.len() as u64;
    out[24..32].copy_from_slice(&len.to_le_bytes());
    seal(&mut out);
    out
}

/// Recomputes and stores the checksum (for tools and tests that edit files).
pub fn seal(bytes: &mut [u8]) {
    if bytes.len() >= HEADER_LEN {
        let sum = content_checksum(bytes);
        bytes[32..40].copy_from_slice(&sum.to_le_bytes());
    }
}
