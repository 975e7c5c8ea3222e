//! `.pk3` archives (zip files): extracting one member with a bounded size.

use super::SourceError;
use std::io::{Cursor, Read};

/// Largest member we will inflate; a hostile archive cannot make us allocate
/// more. The largest Quake 3 maps are tens of megabytes.
pub const MAX_MEMBER_BYTES: u64 = 128 * 1024 * 1024;

/// Most a member may inflate per compressed byte. Maps deflate about 4:1;
/// a member that hides its size (or lies about it) and inflates past this
/// is refused as it inflates, not once it reaches the size limit.
pub const MAX_INFLATE_RATIO: u64 = 32;

/// Members inflating to less than this are not held to the ratio.
const RATIO_FREE_BYTES: u64 = 1 << 20;

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
    let compressed = member.compressed_size();
    let by_ratio = compressed
        .saturating_mul(MAX_INFLATE_RATIO)
        .max(RATIO_FREE_BYTES);
    let read = member
        .take(limit.min(by_ratio) + 1)
        .read_to_end(&mut out)
        .map_err(|e| SourceError::Archive(e.to_string()))?;
    if read as u64 > limit {
        return Err(SourceError::MemberTooLarge { name: found, limit });
    }
    if read as u64 > by_ratio {
        return Err(SourceError::InflatesTooFar {
            name: found,
            compressed,
            ratio: MAX_INFLATE_RATIO,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn pk3_of(name: &str, member: &[u8]) -> Vec<u8> {
        let deflated = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
        zip.start_file(name, deflated).expect("zip member");
        zip.write_all(member).expect("zip write");
        zip.finish().expect("zip").into_inner()
    }

    #[test]
    fn a_member_inflating_past_the_ratio_is_refused() {
        // 8 MiB of zeros deflate to a few kilobytes: well past 32:1, and
        // well within the size limit.
        let bomb = pk3_of("maps/bomb.bsp", &vec![0; 8 << 20]);
        assert!(bomb.len() < (8 << 20) / 100);
        match read_member_limited(&bomb, "maps/bomb.bsp", MAX_MEMBER_BYTES) {
            Err(SourceError::InflatesTooFar { ratio, .. }) => assert_eq!(ratio, MAX_INFLATE_RATIO),
            other => panic!("expected InflatesTooFar, got {other:?}"),
        }
        // A member that barely compresses inflates whole, and one under a
        // megabyte is not held to the ratio.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let noise: Vec<u8> = (0..(2 << 20))
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        let plain = pk3_of("maps/noise.bsp", &noise);
        assert_eq!(
            read_member_limited(&plain, "maps/noise.bsp", MAX_MEMBER_BYTES).expect("inflates"),
            noise
        );
        let small = pk3_of("maps/small.bsp", &vec![0; 512 << 10]);
        assert_eq!(
            read_member_limited(&small, "maps/small.bsp", MAX_MEMBER_BYTES)
                .expect("inflates")
                .len(),
            512 << 10
        );
    }
}
