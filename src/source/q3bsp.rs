//! Reader for Quake 3 `IBSP` version 46 files.
//!
//! One function per lump, read in dependency order. Every count comes from the
//! lump length (so allocations are bounded by the file size) and every index is
//! checked against the lump it points into before anything is built from it.

use super::SourceError;
use glam::Vec3;

const MAGIC: &[u8; 4] = b"IBSP";
const VERSION: i32 = 46;
const LUMP_COUNT: usize = 17;
const HEADER_LEN: usize = 8 + LUMP_COUNT * 8;

/// Lump numbers of the IBSP v46 directory.
mod lump {
    pub const ENTITIES: usize = 0;
    pub const SHADERS: usize = 1;
    pub const PLANES: usize = 2;
    pub const NODES: usize = 3;
    pub const LEAFS: usize = 4;
    pub const LEAF_SURFACES: usize = 5;
    pub const LEAF_BRUSHES: usize = 6;
    pub const MODELS: usize = 7;
    pub const BRUSHES: usize = 8;
    pub const BRUSH_SIDES: usize = 9;
    pub const DRAW_VERTS: usize = 10;
    pub const SURFACES: usize = 13;
    pub const VISIBILITY: usize = 16;
}

/// Surface type of a patch (a grid of biquadratic Bézier control points).
const SURFACE_TYPE_PATCH: i32 = 2;
/// Patch grids larger than this are rejected (the reference caps them at 129 too).
pub const MAX_PATCH_SIDE: usize = 129;
/// Largest deviation from unit length accepted in a plane normal (stricter
/// than the compiled world's validation, which allows 1e-3).
const MAX_NORMAL_ERROR: f32 = 1e-4;

#[derive(Debug, Clone)]
pub struct Shader {
    pub name: String,
    pub surface_flags: u32,
    pub content_flags: u32,
}

#[derive(Debug, Clone, Copy)]
pub struct BspPlane {
    pub normal: Vec3,
    pub dist: f32,
}

#[derive(Debug, Clone, Copy)]
pub struct Node {
    pub plane: u32,
    /// Child index: `>= 0` a node, `< 0` a leaf `-(child + 1)`.
    pub children: [i32; 2],
}

#[derive(Debug, Clone, Copy)]
pub struct Leaf {
    pub cluster: i32,
    /// The leaf's area (-1: none, as in solid); read as the file has it,
    /// checked where it is used.
    pub area: i32,
    pub first_leaf_surface: u32,
    pub num_leaf_surfaces: u32,
    pub first_leaf_brush: u32,
    pub num_leaf_brushes: u32,
}

#[derive(Debug, Clone, Copy)]
pub struct Model {
    pub mins: Vec3,
    pub maxs: Vec3,
    pub first_surface: u32,
    pub num_surfaces: u32,
    pub first_brush: u32,
    pub num_brushes: u32,
}

#[derive(Debug, Clone, Copy)]
pub struct Brush {
    pub first_side: u32,
    pub num_sides: u32,
    pub shader: u32,
}

#[derive(Debug, Clone, Copy)]
pub struct BrushSide {
    pub plane: u32,
    /// `None` when the file names no shader for this side.
    pub shader: Option<u32>,
}

/// A patch surface: its shader and its grid of control points (row-major, `width` per row).
#[derive(Debug, Clone)]
pub struct Patch {
    pub surface_index: u32,
    pub shader: u32,
    pub width: usize,
    pub height: usize,
    pub points: Vec<Vec3>,
}

/// The parts of an IBSP file that collision needs, all indices validated.
#[derive(Debug, Clone)]
pub struct Q3Bsp {
    /// The entity lump's text: its bytes up to the first NUL, checked to
    /// parse ([`super::entities`]).
    pub entities: Vec<u8>,
    pub shaders: Vec<Shader>,
    pub planes: Vec<BspPlane>,
    pub nodes: Vec<Node>,
    pub leafs: Vec<Leaf>,
    pub leaf_brushes: Vec<u32>,
    pub leaf_surfaces: Vec<u32>,
    pub models: Vec<Model>,
    pub brushes: Vec<Brush>,
    pub brush_sides: Vec<BrushSide>,
    /// Patch surfaces of every model, in surface order (a model's are those
    /// in its surface range).
    pub patches: Vec<Patch>,
    /// The visibility lump as the file has it (cluster count, row length,
    /// rows; empty when the map has no visibility data), checked where it
    /// is used ([`crate::compile::visibility`]).
    pub visibility: Vec<u8>,
}

/// True when the bytes start like an IBSP file (any version).
pub fn looks_like_ibsp(bytes: &[u8]) -> bool {
    bytes.len() >= 4 && &bytes[..4] == MAGIC
}

struct Lumps<'a> {
    bytes: &'a [u8],
    dir: [(usize, usize); LUMP_COUNT],
}

impl<'a> Lumps<'a> {
    fn parse(bytes: &'a [u8]) -> Result<Self, SourceError> {
        if bytes.len() < HEADER_LEN {
            return Err(SourceError::Truncated {
                what: "IBSP header",
                needed: HEADER_LEN,
                available: bytes.len(),
            });
        }
        if !looks_like_ibsp(bytes) {
            return Err(SourceError::BadMagic);
        }
        let version = read_i32(bytes, 4);
        if version != VERSION {
            return Err(SourceError::UnsupportedVersion(version));
        }
        let mut dir = [(0usize, 0usize); LUMP_COUNT];
        for (i, entry) in dir.iter_mut().enumerate() {
            let ofs = read_i32(bytes, 8 + i * 8);
            let len = read_i32(bytes, 12 + i * 8);
            let (Ok(ofs), Ok(len)) = (usize::try_from(ofs), usize::try_from(len)) else {
                return Err(SourceError::BadLump {
                    lump: i,
                    reason: format!("negative offset {ofs} or length {len}"),
                });
            };
            match ofs.checked_add(len) {
                Some(end) if end <= bytes.len() => *entry = (ofs, len),
                _ => {
                    return Err(SourceError::BadLump {
                        lump: i,
                        reason: format!(
                            "offset {ofs} + length {len} runs past the end of the file ({} bytes)",
                            bytes.len()
                        ),
                    })
                }
            }
        }
        Ok(Self { bytes, dir })
    }

    /// The records of a lump, each `size` bytes. A length that is not a whole
    /// number of records is an error (the reference rejects it too).
    fn records(
        &self,
        lump: usize,
        size: usize,
    ) -> Result<impl Iterator<Item = &'a [u8]>, SourceError> {
        let (ofs, len) = self.dir[lump];
        if len % size != 0 {
            return Err(SourceError::BadLump {
                lump,
                reason: format!("length {len} is not a multiple of the record size {size}"),
            });
        }
        Ok(self.bytes[ofs..ofs + len].chunks_exact(size))
    }

    fn raw(&self, lump: usize) -> &'a [u8] {
        let (ofs, len) = self.dir[lump];
        &self.bytes[ofs..ofs + len]
    }
}

fn read_i32(b: &[u8], at: usize) -> i32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&b[at..at + 4]);
    i32::from_le_bytes(word)
}

fn read_f32(b: &[u8], at: usize) -> f32 {
    f32::from_bits(read_i32(b, at) as u32)
}

fn read_vec3(b: &[u8], at: usize) -> Vec3 {
    Vec3::new(read_f32(b, at), read_f32(b, at + 4), read_f32(b, at + 8))
}

/// Checks `index` against `count` and returns it as `u32`.
fn index(what: &'static str, value: i32, count: usize) -> Result<u32, SourceError> {
    match usize::try_from(value) {
        Ok(v) if v < count => Ok(v as u32),
        _ => Err(SourceError::BadIndex {
            what,
            index: value as i64,
            count,
        }),
    }
}

/// Checks that `first..first+num` lies within `count`.
fn range(
    what: &'static str,
    first: i32,
    num: i32,
    count: usize,
) -> Result<(u32, u32), SourceError> {
    let ok = first >= 0 && num >= 0 && (first as i64 + num as i64) <= count as i64;
    if ok {
        Ok((first as u32, num as u32))
    } else {
        Err(SourceError::BadRange {
            what,
            first: first as i64,
            num: num as i64,
            count,
        })
    }
}

fn finite(what: &'static str, index: usize, values: &[f32]) -> Result<(), SourceError> {
    if values.iter().all(|v| v.is_finite()) {
        Ok(())
    } else {
        Err(SourceError::NonFinite { what, index })
    }
}

impl Q3Bsp {
    /// Parses and validates an IBSP v46 file held in memory.
    pub fn parse(bytes: &[u8]) -> Result<Self, SourceError> {
        let lumps = Lumps::parse(bytes)?;
        let entities = load_entities(&lumps)?;
        let shaders = load_shaders(&lumps)?;
        let planes = load_planes(&lumps)?;
        let brush_sides = load_brush_sides(&lumps, planes.len(), shaders.len())?;
        let brushes = load_brushes(&lumps, brush_sides.len(), shaders.len())?;
        let leaf_brushes =
            load_index_lump(&lumps, lump::LEAF_BRUSHES, "leaf brush", brushes.len())?;
        let surface_count = lumps.raw(lump::SURFACES).len() / SURFACE_SIZE;
        let leaf_surfaces =
            load_index_lump(&lumps, lump::LEAF_SURFACES, "leaf surface", surface_count)?;
        let leafs = load_leafs(&lumps, leaf_brushes.len(), leaf_surfaces.len())?;
        let nodes = load_nodes(&lumps, planes.len(), leafs.len())?;
        let models = load_models(&lumps, surface_count, brushes.len())?;
        if models.is_empty() {
            return Err(SourceError::NoWorldModel);
        }
        let patches = load_patches(&lumps, shaders.len())?;
        let visibility = lumps.raw(lump::VISIBILITY).to_vec();
        Ok(Self {
            entities,
            shaders,
            planes,
            nodes,
            leafs,
            leaf_brushes,
            leaf_surfaces,
            models,
            brushes,
            brush_sides,
            patches,
            visibility,
        })
    }

    /// Model 0: the static world.
    pub fn world_model(&self) -> &Model {
        // `parse` refuses files without a model 0.
        &self.models[0]
    }

    /// The patch surfaces of `model`, in surface order.
    pub fn patches_of<'a>(&'a self, model: &Model) -> impl Iterator<Item = &'a Patch> + 'a {
        let surfaces = model.first_surface..model.first_surface + model.num_surfaces;
        self.patches
            .iter()
            .filter(move |p| surfaces.contains(&p.surface_index))
    }

    /// The cluster of the leaf of the map's own tree that holds `p`: at
    /// least 0 inside the level (where the map compiler's flood fill
    /// reached), -1 in solid and in the void around a sealed map. `None`
    /// when the tree is empty or loops (a damaged file).
    pub fn cluster_at(&self, p: Vec3) -> Option<i32> {
        let mut child = 0i32;
        // A sound tree reaches a leaf in fewer steps than it has nodes.
        for _ in 0..=self.nodes.len() {
            if child < 0 {
                let leaf = usize::try_from(-(i64::from(child) + 1)).ok()?;
                return self.leafs.get(leaf).map(|l| l.cluster);
            }
            let node = self.nodes.get(usize::try_from(child).ok()?)?;
            let plane = self.planes.get(node.plane as usize)?;
            // The reference's side test: on the plane counts as in front.
            let front = p.dot(plane.normal) - plane.dist >= 0.0;
            child = node.children[usize::from(!front)];
        }
        None
    }
}

/// The entity text, refused here when it does not parse: the game would
/// not spawn the map either, and a map is refused before it is compiled.
fn load_entities(lumps: &Lumps) -> Result<Vec<u8>, SourceError> {
    let text = super::entities::text(lumps.raw(lump::ENTITIES));
    super::entities::parse(text)?;
    Ok(text.to_vec())
}

const SHADER_SIZE: usize = 72;

fn load_shaders(lumps: &Lumps) -> Result<Vec<Shader>, SourceError> {
    Ok(lumps
        .records(lump::SHADERS, SHADER_SIZE)?
        .map(|r| {
            let name_bytes = r[..64].split(|&b| b == 0).next().unwrap_or(&[]);
            Shader {
                name: String::from_utf8_lossy(name_bytes).into_owned(),
                surface_flags: read_i32(r, 64) as u32,
                content_flags: read_i32(r, 68) as u32,
            }
        })
        .collect())
}

fn load_planes(lumps: &Lumps) -> Result<Vec<BspPlane>, SourceError> {
    lumps
        .records(lump::PLANES, 16)?
        .enumerate()
        .map(|(i, r)| {
            let normal = read_vec3(r, 0);
            let dist = read_f32(r, 12);
            finite("plane", i, &[normal.x, normal.y, normal.z, dist])?;
            // Compilers write unit normals (within 1e-7); anything else would
            // compile into a world that the loader's validation rejects.
            if (normal.length() - 1.0).abs() > MAX_NORMAL_ERROR {
                return Err(SourceError::BadLump {
                    lump: lump::PLANES,
                    reason: format!("plane {i} normal {normal} is not unit length"),
                });
            }
            Ok(BspPlane { normal, dist })
        })
        .collect()
}

fn load_brush_sides(
    lumps: &Lumps,
    planes: usize,
    shaders: usize,
) -> Result<Vec<BrushSide>, SourceError> {
    lumps
        .records(lump::BRUSH_SIDES, 8)?
        .map(|r| {
            let plane = index("brush side plane", read_i32(r, 0), planes)?;
            let shader_num = read_i32(r, 4);
            // The reference tolerates sides without a valid shader (no surface flags).
            let shader = usize::try_from(shader_num)
                .ok()
                .filter(|&s| s < shaders)
                .map(|s| s as u32);
            Ok(BrushSide { plane, shader })
        })
        .collect()
}

fn load_brushes(lumps: &Lumps, sides: usize, shaders: usize) -> Result<Vec<Brush>, SourceError> {
    lumps
        .records(lump::BRUSHES, 12)?
        .map(|r| {
            let (first_side, num_sides) =
                range("brush sides", read_i32(r, 0), read_i32(r, 4), sides)?;
            let shader = index("brush shader", read_i32(r, 8), shaders)?;
            Ok(Brush {
                first_side,
                num_sides,
                shader,
            })
        })
        .collect()
}

fn load_index_lump(
    lumps: &Lumps,
    lump: usize,
    what: &'static str,
    count: usize,
) -> Result<Vec<u32>, SourceError> {
    lumps
        .records(lump, 4)?
        .map(|r| index(what, read_i32(r, 0), count))
        .collect()
}

fn load_leafs(
    lumps: &Lumps,
    leaf_brushes: usize,
    leaf_surfaces: usize,
) -> Result<Vec<Leaf>, SourceError> {
    lumps
        .records(lump::LEAFS, 48)?
        .map(|r| {
            let (first_leaf_surface, num_leaf_surfaces) = range(
                "leaf surfaces",
                read_i32(r, 32),
                read_i32(r, 36),
                leaf_surfaces,
            )?;
            let (first_leaf_brush, num_leaf_brushes) = range(
                "leaf brushes",
                read_i32(r, 40),
                read_i32(r, 44),
                leaf_brushes,
            )?;
            Ok(Leaf {
                cluster: read_i32(r, 0),
                area: read_i32(r, 4),
                first_leaf_surface,
                num_leaf_surfaces,
                first_leaf_brush,
                num_leaf_brushes,
            })
        })
        .collect()
}

fn load_nodes(lumps: &Lumps, planes: usize, leafs: usize) -> Result<Vec<Node>, SourceError> {
    let node_count = lumps.raw(lump::NODES).len() / 36;
    lumps
        .records(lump::NODES, 36)?
        .map(|r| {
            let plane = index("node plane", read_i32(r, 0), planes)?;
            let mut children = [0i32; 2];
            for (k, child) in children.iter_mut().enumerate() {
                let c = read_i32(r, 4 + 4 * k);
                if c >= 0 {
                    index("node child", c, node_count)?;
                } else {
                    index("node leaf", -(c as i64 + 1) as i32, leafs)?;
                }
                *child = c;
            }
            Ok(Node { plane, children })
        })
        .collect()
}

fn load_models(lumps: &Lumps, surfaces: usize, brushes: usize) -> Result<Vec<Model>, SourceError> {
    lumps
        .records(lump::MODELS, 40)?
        .enumerate()
        .map(|(i, r)| {
            let mins = read_vec3(r, 0);
            let maxs = read_vec3(r, 12);
            finite(
                "model bounds",
                i,
                &[mins.x, mins.y, mins.z, maxs.x, maxs.y, maxs.z],
            )?;
            let (first_surface, num_surfaces) =
                range("model surfaces", read_i32(r, 24), read_i32(r, 28), surfaces)?;
            let (first_brush, num_brushes) =
                range("model brushes", read_i32(r, 32), read_i32(r, 36), brushes)?;
            Ok(Model {
                mins,
                maxs,
                first_surface,
                num_surfaces,
                first_brush,
                num_brushes,
            })
        })
        .collect()
}

const SURFACE_SIZE: usize = 104;
const DRAW_VERT_SIZE: usize = 44;

fn load_patches(lumps: &Lumps, shaders: usize) -> Result<Vec<Patch>, SourceError> {
    let verts = lumps.raw(lump::DRAW_VERTS);
    if !verts.len().is_multiple_of(DRAW_VERT_SIZE) {
        return Err(SourceError::BadLump {
            lump: lump::DRAW_VERTS,
            reason: format!(
                "length {} is not a multiple of {DRAW_VERT_SIZE}",
                verts.len()
            ),
        });
    }
    let vert_count = verts.len() / DRAW_VERT_SIZE;
    let surfaces: Vec<&[u8]> = lumps.records(lump::SURFACES, SURFACE_SIZE)?.collect();
    let mut patches = Vec::new();
    for (surface_index, r) in surfaces.iter().enumerate() {
        if read_i32(r, 8) != SURFACE_TYPE_PATCH {
            continue;
        }
        let surface_index = surface_index as u32;
        let shader = index("patch shader", read_i32(r, 0), shaders)?;
        let (first_vert, num_verts) = range(
            "patch vertices",
            read_i32(r, 12),
            read_i32(r, 16),
            vert_count,
        )?;
        let width = read_i32(r, 96);
        let height = read_i32(r, 100);
        let sides_ok = |n: i32| n >= 3 && n as usize <= MAX_PATCH_SIDE && n % 2 == 1;
        if !sides_ok(width)
            || !sides_ok(height)
            || (width as i64 * height as i64) != num_verts as i64
        {
            return Err(SourceError::BadPatch {
                surface: surface_index,
                reason: format!("grid {width}x{height} with {num_verts} vertices"),
            });
        }
        let points = (0..num_verts as usize)
            .map(|k| {
                let at = (first_vert as usize + k) * DRAW_VERT_SIZE;
                let p = read_vec3(verts, at);
                finite("patch vertex", first_vert as usize + k, &[p.x, p.y, p.z]).map(|_| p)
            })
            .collect::<Result<Vec<_>, _>>()?;
        patches.push(Patch {
            surface_index,
            shader,
            width: width as usize,
            height: height as usize,
            points,
        });
    }
    Ok(patches)
}
