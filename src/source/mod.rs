//! World sources: Quake 3 BSP files, optionally inside `.pk3` (zip) archives.

pub mod entities;
pub mod pk3;
pub mod q3bsp;

pub use q3bsp::Q3Bsp;

use thiserror::Error;

/// Why a world source could not be read.
#[derive(Debug, Error)]
pub enum SourceError {
    #[error("file is truncated: {what} needs {needed} bytes, {available} available")]
    Truncated {
        what: &'static str,
        needed: usize,
        available: usize,
    },
    #[error("not an IBSP file (bad magic)")]
    BadMagic,
    #[error("unsupported IBSP version {0} (only 46, Quake 3, is supported)")]
    UnsupportedVersion(i32),
    #[error("lump {lump} is invalid: {reason}")]
    BadLump { lump: usize, reason: String },
    #[error("{what} index {index} is out of range (count {count})")]
    BadIndex {
        what: &'static str,
        index: i64,
        count: usize,
    },
    #[error("{what} range {first}+{num} is out of range (count {count})")]
    BadRange {
        what: &'static str,
        first: i64,
        num: i64,
        count: usize,
    },
    #[error("{what} {index} has a non-finite value")]
    NonFinite { what: &'static str, index: usize },
    #[error("the file has no model 0 (static world)")]
    NoWorldModel,
    #[error("patch surface {surface} is invalid: {reason}")]
    BadPatch { surface: u32, reason: String },
    // (The message holds the cause's; it is not also the `source()`, so a
    // chain printed in full says it once.)
    #[error("entity lump: {0}")]
    Entities(entities::EntityError),
    #[error("pk3 archive: {0}")]
    Archive(String),
    #[error("pk3 archive has no member {0:?}")]
    NoSuchMember(String),
    #[error("pk3 member {name:?} is larger than the limit of {limit} bytes")]
    MemberTooLarge { name: String, limit: u64 },
    #[error(
        "pk3 member {name:?} inflates to more than {ratio} times its {compressed} compressed bytes"
    )]
    InflatesTooFar {
        name: String,
        compressed: u64,
        ratio: u64,
    },
}

impl From<entities::EntityError> for SourceError {
    fn from(error: entities::EntityError) -> Self {
        SourceError::Entities(error)
    }
}
