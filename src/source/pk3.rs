//! `.pk3` archives (zip files): extracting one member with a bounded size.

use super::SourceError;
use std::io::{Cursor, Read};

/// Largest member we will inflate; a hostile archive cannot make us allocate more.
pub const MAX_MEMBER_BYTES: u64 = 512 * 1024 * 1024;

/// True when the bytes start like a zip archive.
pub fn looks_like_zip(bytes: &[u8]) -> bool {
    bytes.len() >= 4 && &bytes[..4] == b"PK\x03\x04"
}

/// The names of the `.bsp` members of an archive (`maps/NAME.bsp`).
pub fn bsp_members(archive: &[u8]) -> Result<Vec<String>, SourceError> {
    let zip = zip::ZipArchive::new(Cursor::new(archive))
        .map_err(|e| SourceError::Archive(e.to_string()))?;
    Ok(zip
        .file_names()
        .filter(|n| n.to_ascii_lowercase().ends_with(".bsp"))
        .map(str::to_owned)
        .collect())
}

/// Reads member `name` (exact match first, then case-insensitive, as Quake's
/// file system is) out of an archive held in memory.
pub fn read_member(archive: &[u8], name: &str) -> Result<Vec<u8>, SourceError> {
    read_member_limited(archive, name, MAX_MEMBER_BYTES)
}

/// As [`read_member`], with an explicit size limit.
pub fn read_member_limited(archive: &[u8], name: &str, limit: u64) -> Result<Vec<u8>, SourceError> {
    let mut zip = zip::ZipArchive::new(Cursor::new(archive))
        .map_err(|e| SourceError::Archive(e.to_string()))?;
    let wanted = name.trim_start_matches('/');
    let found = zip
        .file_names()
        .find(|n| *n == wanted)
        .or_else(|| zip.file_names().find(|n| n.eq_ignore_ascii_case(wanted)))
        .map(str::to_owned)
        .ok_or_else(|| SourceError::NoSuchMember(name.to_owned()))?;
    let member = zip
        .by_name(&found)
        .map_err(|e| SourceError::Archive(e.to_string()))?;
    if member.size() > limit {
        return Err(SourceError::MemberTooLarge { name: found, limit });
    }
    // The declared sizes may lie: reserve no more than a few times what the
    // archive could hold (a 4 KiB file claiming 512 MiB reserved all of it),
    // and cap what we actually inflate as well.
    let plausible = member
        .compressed_size()
        .min(archive.len() as u64)
        .saturating_mul(4);
    let mut out = Vec::with_capacity(member.size().min(plausible) as usize);
    let read = member
        .take(limit + 1)
        .read_to_end(&mut out)
        .map_err(|e| SourceError::Archive(e.to_string()))?;
    if read as u64 > limit {
        return Err(SourceError::MemberTooLarge { name: found, limit });
    }
    Ok(out)
}
