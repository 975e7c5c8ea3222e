//! Opening a world from any source, told apart by content.

use crate::compile::{compile_q3, CompileError, CompileOptions};
use crate::source::{pk3, q3bsp, Q3Bsp, SourceError};
use crate::world::World;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Largest world source file we read into memory.
pub const MAX_SOURCE_BYTES: u64 = 512 * 1024 * 1024;

#[derive(Debug, Error)]
pub enum LoadError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is larger than the limit of {limit} bytes")]
    TooLarge { path: PathBuf, limit: u64 },
    #[error("{0}")]
    Source(#[from] SourceError),
    #[error("{0}")]
    Compile(#[from] CompileError),
    #[error("{path} is a pk3 archive: name a member, e.g. {path}:{example}")]
    NeedMember { path: PathBuf, example: String },
    #[error("unrecognised world file (not IBSP, not a zip archive)")]
    UnknownFormat,
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

fn read_limited(path: &Path) -> Result<Vec<u8>, LoadError> {
    let io = |source| LoadError::Io {
        path: path.to_owned(),
        source,
    };
    let len = std::fs::metadata(path).map_err(io)?.len();
    if len > MAX_SOURCE_BYTES {
        return Err(LoadError::TooLarge {
            path: path.to_owned(),
            limit: MAX_SOURCE_BYTES,
        });
    }
    std::fs::read(path).map_err(io)
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
    Ok(bytes)
}

/// Builds a world from the bytes of a source, detected by content.
pub fn world_from_bytes(
    bytes: &[u8],
    name: &str,
    options: &CompileOptions,
) -> Result<World, LoadError> {
    if q3bsp::looks_like_ibsp(bytes) {
        let bsp = Q3Bsp::parse(bytes)?;
        return Ok(compile_q3(&bsp, name, options)?);
    }
    Err(LoadError::UnknownFormat)
}

/// Opens the world a spec names.
pub fn open_world(spec: &WorldSpec, options: &CompileOptions) -> Result<World, LoadError> {
    let bytes = read_source(spec)?;
    world_from_bytes(&bytes, &spec.name(), options)
}
