//! [`Map`]: a world ready to query, opened from any source (a Quake 3
//! `.bsp`, a map inside a `.pk3`, or a compiled world file, told apart by
//! content; Quake 3 maps are compiled on load), with the kernel's trees
//! and grids built from it.

use crate::compile::{compile_q3, CompileError, CompileOptions};
use crate::math::Vec3;
use crate::source::entities::{self, Entity};
use crate::source::{pk3, q3bsp, Q3Bsp, SourceError};
use crate::trace::accel::{self, Accel};
use crate::trace::{self, BatchOptions, Kernel, TraceQuery, TraceResult};
use crate::world::format::{self, FileMeta, FormatError, Layout};
use crate::world::validate::validate;
use crate::world::{World, WorldData, WorldInfo};
use bytemuck::Zeroable;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use thiserror::Error;

/// Largest world source file we read into memory.
pub const MAX_SOURCE_BYTES: u64 = 512 * 1024 * 1024;

// Each message holds its cause's text, so no variant also reports the cause
// as its `source()`: a chain printed in full (`{:#}`) would say it twice.
#[derive(Debug, Error)]
pub enum LoadError {
    #[error("cannot read {path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path} is larger than the limit of {limit} bytes")]
    TooLarge { path: PathBuf, limit: u64 },
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Compile(#[from] CompileError),
    #[error("{path} is a pk3 archive: name a member, e.g. {path}:{example}")]
    NeedMember { path: PathBuf, example: String },
    #[error(
        "unrecognised world file (not a compiled bspq world, not IBSP, not a pk3 with one map)"
    )]
    UnknownFormat,
    #[error("compiled world: {0}")]
    Format(FormatError),
    #[error("{path} is not a .pk3 archive, so it has no member {member}")]
    NotAnArchive { path: PathBuf, member: String },
    #[error("inline model *{model}: {error}")]
    InlineModel { model: usize, error: Box<LoadError> },
}

impl LoadError {
    /// Whether the message names the file it is about, so that a caller
    /// adding context need not name it again.
    pub fn names_file(&self) -> bool {
        matches!(
            self,
            LoadError::Io { .. }
                | LoadError::TooLarge { .. }
                | LoadError::NeedMember { .. }
                | LoadError::NotAnArchive { .. }
        )
    }
}

impl From<FormatError> for LoadError {
    fn from(error: FormatError) -> Self {
        LoadError::Format(error)
    }
}

/// A world spec: `FILE` or `ARCHIVE.pk3:maps/NAME.bsp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorldSpec {
    pub path: PathBuf,
    pub member: Option<String>,
}

impl WorldSpec {
    /// Parses `FILE` or `ARCHIVE:MEMBER`. The split happens at the last `:`
    /// whose left part names an existing file, so paths with colons still work.
    pub fn parse(spec: &str) -> WorldSpec {
        if !Path::new(spec).exists() {
            if let Some((archive, member)) = spec.rsplit_once(':') {
                if !archive.is_empty() && !member.is_empty() && Path::new(archive).is_file() {
                    return WorldSpec {
                        path: archive.into(),
                        member: Some(member.to_owned()),
                    };
                }
            }
        }
        WorldSpec {
            path: spec.into(),
            member: None,
        }
    }

    /// The world's name: the file stem of the map.
    pub fn name(&self) -> String {
        let file = match &self.member {
            Some(m) => Path::new(m)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned()),
            None => self
                .path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned()),
        };
        file.unwrap_or_else(|| "world".to_owned())
    }
}

/// Reads a whole file of at most [`MAX_SOURCE_BYTES`]. The limit holds
/// while reading, not only by the size the file system reports: a device
/// or a pipe (`/dev/zero`) reports none.
pub fn read_limited(path: &Path) -> Result<Vec<u8>, LoadError> {
    use std::io::Read;
    let io = |error| LoadError::Io {
        path: path.to_owned(),
        error,
    };
    let too_large = || LoadError::TooLarge {
        path: path.to_owned(),
        limit: MAX_SOURCE_BYTES,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let reported = file.metadata().map_err(io)?.len();
    if reported > MAX_SOURCE_BYTES {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(reported as usize);
    file.take(MAX_SOURCE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_SOURCE_BYTES {
        return Err(too_large());
    }
    Ok(bytes)
}

/// Reads the bytes of the map a spec names (extracting a pk3 member if asked).
pub fn read_source(spec: &WorldSpec) -> Result<Vec<u8>, LoadError> {
    let bytes = read_limited(&spec.path)?;
    if pk3::looks_like_zip(&bytes) {
        let member = match &spec.member {
            Some(m) => m.clone(),
            None => {
                let members = pk3::bsp_members(&bytes)?;
                match members.as_slice() {
                    [only] => only.clone(),
                    _ => {
                        return Err(LoadError::NeedMember {
                            path: spec.path.clone(),
                            example: members
                                .first()
                                .cloned()
                                .unwrap_or_else(|| "maps/NAME.bsp".into()),
                        })
                    }
                }
            }
        };
        return Ok(pk3::read_member(&bytes, &member)?);
    }
    if let Some(member) = &spec.member {
        return Err(LoadError::NotAnArchive {
            path: spec.path.clone(),
            member: member.clone(),
        });
    }
    Ok(bytes)
}

/// Compiled world files up to this size are copied into memory rather than
/// mapped, so that nobody truncating the file later can fault a reader.
/// Larger ones are mapped read-only: replace them by atomic rename (as
/// `bspq compile` and the server do), never by rewriting in place.
pub const COPY_BELOW_BYTES: u64 = 64 * 1024 * 1024;

/// Bytes kept at an 8-byte alignment, so plain records can be cast in place.
pub struct AlignedBytes {
    words: Vec<u64>,
    len: usize,
}

impl AlignedBytes {
    pub fn from_slice(bytes: &[u8]) -> Self {
        let mut words = vec![0u64; bytes.len().div_ceil(8)];
        bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..bytes.len()].copy_from_slice(bytes);
        Self {
            words,
            len: bytes.len(),
        }
    }

    fn read_file(file: &mut std::fs::File, len: usize) -> std::io::Result<Self> {
        use std::io::Read;
        let mut words = vec![0u64; len.div_ceil(8)];
        file.read_exact(&mut bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..len])?;
        Ok(Self { words, len })
    }

    pub fn as_slice(&self) -> &[u8] {
        &bytemuck::cast_slice::<u64, u8>(&self.words)[..self.len]
    }
}

/// Where a loaded world's arrays live. One per loaded world, so the
/// variants' size difference (a few hundred bytes) costs nothing.
#[allow(clippy::large_enum_variant)]
enum Storage {
    /// Compiled just now from a source.
    Built(Box<WorldData>),
    /// A compiled world file, copied or mapped: the world is the nested
    /// file at `range` (the whole file, or one of its inline models, which
    /// share their parent's bytes).
    File {
        bytes: Arc<FileBytes>,
        range: Range<usize>,
        layout: Layout,
        // Boxed, as the built world is, to keep the two variants small.
        meta: Box<FileMeta>,
    },
}

enum FileBytes {
    Copied(AlignedBytes),
    Mapped(memmap2::Mmap),
}

impl FileBytes {
    fn as_slice(&self) -> &[u8] {
        match self {
            FileBytes::Copied(b) => b.as_slice(),
            FileBytes::Mapped(m) => m,
        }
    }
}

impl Storage {
    /// A compiled world's own file bytes (a model's nested file).
    fn file_bytes(&self) -> Option<&[u8]> {
        match self {
            Storage::File { bytes, range, .. } => bytes.as_slice().get(range.clone()),
            Storage::Built(_) => None,
        }
    }
}

/// A world ready to query: its data (compiled on load, or a compiled world
/// file held in memory or mapped) and the kernel's trees and grids built
/// from it. Immutable and `Sync`: share one behind an `Arc` among threads.
///
/// ```
/// use bspq::{Map, TraceQuery, Vec3, MASK_PLAYERSOLID};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/maps/q3dm6ish.bsp");
/// let map = Map::open(path)?;
/// // A standing player dropped onto the floor stops 1/8 unit above it.
/// let drop = TraceQuery::boxed(
///     Vec3::new(-600.0, -50.0, 50.0),
///     Vec3::new(-600.0, -50.0, -500.0),
///     Vec3::new(-15.0, -15.0, -24.0),
///     Vec3::new(15.0, 15.0, 32.0),
///     MASK_PLAYERSOLID,
/// )?;
/// let hit = map.trace(&drop);
/// assert!(hit.fraction < 1.0 && hit.normal == Vec3::Z);
/// assert_eq!(hit.endpos.z, -199.875);
/// // Line of sight: whether anything solid is in the way.
/// let sight = TraceQuery::ray(Vec3::new(-600.0, -50.0, 50.0), Vec3::new(-600.0, -50.0, -500.0), 1)?;
/// assert!(map.any_hit(&sight));
/// # Ok(())
/// # }
/// ```
pub struct Map {
    storage: Storage,
    accel: Accel,
    /// Inline models `*1`…`*N`, each a world of its own.
    models: Vec<Map>,
    /// The entity lump, parsed once when the world is loaded (which is
    /// also how a compiled file's entities section is validated).
    entities: Vec<Entity>,
    /// [`Map::data_bytes`] of a world built in memory, serialised once on
    /// first ask (world listings ask on every call).
    built_bytes: std::sync::OnceLock<usize>,
}

impl std::fmt::Debug for Map {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Map")
            .field("source", &self.view().info.source_name)
            .finish()
    }
}

impl Map {
    /// Opens the world at `path`: a Quake 3 `.bsp` (compiled with the
    /// default [`CompileOptions`], curves on), `ARCHIVE.pk3:maps/NAME.bsp`,
    /// or a compiled world file (validated, then held in memory or
    /// mapped), told apart by content.
    pub fn open(path: impl AsRef<Path>) -> Result<Map, LoadError> {
        Self::open_with(path, &CompileOptions::default())
    }

    /// [`Map::open`], compiling Quake 3 maps with `options`.
    pub fn open_with(path: impl AsRef<Path>, options: &CompileOptions) -> Result<Map, LoadError> {
        let spec = WorldSpec::parse(&path.as_ref().to_string_lossy());
        open_world(&spec, options)
    }

    /// A world from the bytes of a Quake 3 `.bsp`, a `.pk3` holding one
    /// map, or a compiled world file; `name` names a compiled map.
    pub fn from_bytes(bytes: &[u8], name: &str) -> Result<Map, LoadError> {
        world_from_bytes(bytes, name, &CompileOptions::default())
    }

    /// Where the world came from and how it was compiled.
    pub fn info(&self) -> &WorldInfo {
        match &self.storage {
            Storage::Built(data) => &data.info,
            Storage::File { meta, .. } => &meta.info,
        }
    }

    /// The map's entities, in file order (see [`crate::source::entities`]).
    pub fn entities(&self) -> &[Entity] {
        &self.entities
    }

    /// The world's bounds (`mins`, `maxs`).
    pub fn bounds(&self) -> (Vec3, Vec3) {
        let world = self.world();
        (Vec3::from_array(world.mins), Vec3::from_array(world.maxs))
    }

    /// The first contact of `query`'s move (see [`TraceResult`]).
    pub fn trace(&self, query: &TraceQuery) -> TraceResult {
        trace::with_scratch(|scratch| trace::trace(&self.view(), query, scratch))
    }

    /// Whether `query`'s move touches anything in its mask: exactly
    /// `fraction < 1` of [`Map::trace`], found sooner.
    pub fn any_hit(&self, query: &TraceQuery) -> bool {
        trace::with_scratch(|scratch| trace::any_hit(&self.view(), query, scratch))
    }

    /// The OR of the content flags at `point` (a point on a brush's face is
    /// inside the brush).
    pub fn point_contents(&self, point: Vec3) -> u32 {
        trace::point_contents(&self.view(), point)
    }

    /// The answers to `queries`, in order, on all cores: each bit for bit
    /// [`Map::trace`]'s.
    pub fn trace_batch(&self, queries: &[TraceQuery]) -> Vec<TraceResult> {
        trace::trace_queries(&self.view(), queries, &BatchOptions::default())
    }

    /// The map's inline models `*1`…`*N` (doors, platforms, triggers), in
    /// order, each in its own local coordinates; none in a model.
    pub fn models(&self) -> &[Map] {
        &self.models
    }

    /// Inline model `*number` (1…N); `None` for 0, the world itself, and
    /// past the last.
    pub fn model(&self, number: usize) -> Option<&Map> {
        self.models.get(number.checked_sub(1)?)
    }

    /// The world as the kernel reads it.
    pub fn view(&self) -> Kernel<'_> {
        Kernel::new(self.world(), &self.accel)
    }

    /// The world's own arrays (as the file has them).
    pub fn world(&self) -> World<'_> {
        match &self.storage {
            Storage::Built(data) => data.view(),
            // Loading validated every section, so the casts succeed.
            Storage::File { layout, meta, .. } => match self.storage.file_bytes() {
                Some(bytes) => {
                    format::view(bytes, layout, meta).unwrap_or_else(|_| EMPTY_DATA.view())
                }
                None => EMPTY_DATA.view(),
            },
        }
    }

    /// The file's layout, when the world came from a compiled world file.
    pub fn file_layout(&self) -> Option<&Layout> {
        match &self.storage {
            Storage::File { layout, .. } => Some(layout),
            Storage::Built(_) => None,
        }
    }

    /// Whether the compiled file is mapped rather than copied (a model of
    /// a compiled file: whether its parent's is).
    pub fn is_mapped(&self) -> bool {
        match &self.storage {
            Storage::File { bytes, .. } => matches!(**bytes, FileBytes::Mapped(_)),
            Storage::Built(_) => false,
        }
    }

    /// Bytes of world data held, its inline models' included: the size
    /// of its compiled file (a model's: its nested file's).
    pub fn data_bytes(&self) -> usize {
        match self.storage.file_bytes() {
            Some(bytes) => bytes.len(),
            None => *self.built_bytes.get_or_init(|| self.to_file_bytes().len()),
        }
    }

    /// Serialises the world, with its inline models, into the compiled
    /// file format (a world loaded from a file: its bytes as they were).
    pub fn to_file_bytes(&self) -> Vec<u8> {
        match &self.storage {
            Storage::Built(d) => {
                let models: Vec<Vec<u8>> = self.models.iter().map(Map::to_file_bytes).collect();
                format::write_with_models(d, &models)
            }
            Storage::File { .. } => self.storage.file_bytes().unwrap_or_default().to_vec(),
        }
    }

    /// A world compiled in memory, with its inline models (each validated
    /// like a loaded file).
    pub fn from_data(mut data: WorldData) -> Result<Self, LoadError> {
        validate(&data.view())?;
        let models = std::mem::take(&mut data.models)
            .into_iter()
            .enumerate()
            .map(|(k, model)| {
                Self::from_data(model).map_err(|error| LoadError::InlineModel {
                    model: k + 1,
                    error: Box::new(error),
                })
            })
            .collect::<Result<_, _>>()?;
        let entities = entities::parse(&data.entities).map_err(FormatError::Entities)?;
        let accel = accel::build(&data.view());
        Ok(Self {
            storage: Storage::Built(Box::new(data)),
            accel,
            models,
            entities,
            built_bytes: std::sync::OnceLock::new(),
        })
    }

    /// Loads the compiled world file `bytes` holds, with its inline models
    /// sharing those bytes.
    fn from_file_bytes(bytes: FileBytes) -> Result<Self, LoadError> {
        let bytes = Arc::new(bytes);
        let whole = 0..bytes.as_slice().len();
        Ok(Self::from_file_range(&bytes, whole, None)?)
    }

    /// The world whose file is `bytes[range]`: the whole file, or (with
    /// `model: Some(k)`) inline model `*k`'s nested file, which must have
    /// no models of its own.
    fn from_file_range(
        bytes: &Arc<FileBytes>,
        range: Range<usize>,
        model: Option<usize>,
    ) -> Result<Self, FormatError> {
        let raw = bytes.as_slice().get(range.clone()).ok_or_else(|| {
            FormatError::Invalid(format!(
                "bytes {range:?} lie outside the file's {}",
                bytes.as_slice().len()
            ))
        })?;
        let layout = format::parse_layout(raw, true)?;
        let meta = format::read_meta(raw, &layout)?;
        let world = format::view(raw, &layout, &meta)?;
        validate(&world)?;
        let entities = format::read_entities(raw, &layout)?;
        let ranges = format::model_ranges(raw, &layout)?;
        let models = match model {
            Some(model) if !ranges.is_empty() => {
                return Err(FormatError::NestedModels {
                    model,
                    count: ranges.len(),
                })
            }
            Some(_) => Vec::new(),
            None => ranges
                .into_iter()
                .enumerate()
                .map(|(index, inner)| {
                    let model = index + 1;
                    let at = range.start + inner.start..range.start + inner.end;
                    Self::from_file_range(bytes, at, Some(model)).map_err(|error| match error {
                        nested @ FormatError::NestedModels { .. } => nested,
                        error => FormatError::Model {
                            model,
                            error: Box::new(error),
                        },
                    })
                })
                .collect::<Result<_, _>>()?,
        };
        let accel = accel::build(&world);
        Ok(Self {
            storage: Storage::File {
                bytes: Arc::clone(bytes),
                range,
                layout,
                meta: Box::new(meta),
            },
            accel,
            models,
            entities,
            built_bytes: std::sync::OnceLock::new(),
        })
    }

    /// Loads a compiled world file held in memory (copied into an aligned buffer).
    pub fn from_compiled_bytes(bytes: &[u8]) -> Result<Self, LoadError> {
        Self::from_file_bytes(FileBytes::Copied(AlignedBytes::from_slice(bytes)))
    }
}

static EMPTY_DATA: std::sync::LazyLock<WorldData> = std::sync::LazyLock::new(|| WorldData {
    leaves: vec![crate::world::Leaf::zeroed()],
    ..WorldData::default()
});

/// Builds a world from the bytes of a source, detected by content: a
/// compiled world file, a Quake 3 BSP, or a pk3 archive with one map.
pub fn world_from_bytes(
    bytes: &[u8],
    name: &str,
    options: &CompileOptions,
) -> Result<Map, LoadError> {
    world_from_bytes_within(bytes, name, options, pk3::MAX_MEMBER_BYTES)
}

/// [`world_from_bytes`], a pk3 member inflated to at most
/// `max_member_bytes` (a small archive can hold a huge member: an upload
/// is held to its own limit, not only to the file cap).
pub fn world_from_bytes_within(
    bytes: &[u8],
    name: &str,
    options: &CompileOptions,
    max_member_bytes: u64,
) -> Result<Map, LoadError> {
    if format::looks_like_world_file(bytes) {
        return Map::from_compiled_bytes(bytes);
    }
    if q3bsp::looks_like_ibsp(bytes) {
        return Map::from_data(compile_source(bytes, name, options)?);
    }
    if pk3::looks_like_zip(bytes) {
        let members = pk3::bsp_members(bytes)?;
        let [member] = members.as_slice() else {
            return Err(LoadError::UnknownFormat);
        };
        let inner = pk3::read_member_limited(bytes, member, max_member_bytes)?;
        return world_from_bytes_within(&inner, name, options, max_member_bytes);
    }
    Err(LoadError::UnknownFormat)
}

/// Compiles a Quake 3 BSP held in memory.
pub fn compile_source(
    bytes: &[u8],
    name: &str,
    options: &CompileOptions,
) -> Result<WorldData, LoadError> {
    let bsp = Q3Bsp::parse(bytes)?;
    let mut data = compile_q3(&bsp, name, options)?;
    data.info.source_hash = xxhash_rust::xxh3::xxh3_64(bytes);
    Ok(data)
}

/// Opens the world a spec names: compiled world files are loaded (copied or
/// mapped, then validated), sources are compiled.
pub fn open_world(spec: &WorldSpec, options: &CompileOptions) -> Result<Map, LoadError> {
    if spec.member.is_none() {
        if let Some(world) = open_compiled_file(&spec.path)? {
            return Ok(world);
        }
    }
    let bytes = read_source(spec)?;
    world_from_bytes(&bytes, &spec.name(), options)
}

/// Loads `path` if it is a compiled world file (`None` if it is something
/// else): copied when smaller than [`COPY_BELOW_BYTES`], mapped otherwise.
pub fn open_compiled_file(path: &Path) -> Result<Option<Map>, LoadError> {
    open_compiled_file_with(path, COPY_BELOW_BYTES)
}

/// [`open_compiled_file`], copying files smaller than `copy_below` bytes
/// and mapping the others (0: map every file; for tests and tools that
/// compare the two).
pub fn open_compiled_file_with(path: &Path, copy_below: u64) -> Result<Option<Map>, LoadError> {
    use std::io::Read;
    let io = |error| LoadError::Io {
        path: path.to_owned(),
        error,
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut magic = [0u8; 8];
    let got = file.read(&mut magic).map_err(io)?;
    if !format::looks_like_world_file(&magic[..got]) {
        return Ok(None);
    }
    let len = file.metadata().map_err(io)?.len();
    if len > MAX_SOURCE_BYTES {
        return Err(LoadError::TooLarge {
            path: path.to_owned(),
            limit: MAX_SOURCE_BYTES,
        });
    }
    let bytes = if len < copy_below {
        let mut file = std::fs::File::open(path).map_err(io)?;
        FileBytes::Copied(AlignedBytes::read_file(&mut file, len as usize).map_err(io)?)
    } else {
        // SAFETY: the mapping is read-only and private to this process; the
        // documented policy is that world files are replaced by rename, never
        // modified in place, so the mapped pages do not change under us.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
        FileBytes::Mapped(map)
    };
    Map::from_file_bytes(bytes).map(Some)
}

/// Writes `bytes` to `path` atomically: a temporary file in the same folder,
/// flushed to disk, then renamed over the target.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomically_checked(path, bytes, |_| Ok(()))
}

/// [`write_atomically`], running `check` on the flushed temporary file
/// before the rename: a file that fails it is removed and never replaces
/// what `path` held.
pub fn write_atomically_checked<E: From<std::io::Error>>(
    path: &Path,
    bytes: &[u8],
    check: impl FnOnce(&Path) -> Result<(), E>,
) -> Result<(), E> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "world".into());
    let tmp = dir.join(format!(".{file_name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        check(&tmp)?;
        std::fs::rename(&tmp, path)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
