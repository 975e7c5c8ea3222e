//! Uploads written through to the worlds directory, so that an uploaded
//! world survives a restart: the file is written under a hidden temporary
//! name, synced, and renamed over the world's file (a crash leaves the old
//! file or the new one, never half of one), then the directory is synced.
//! The registry notes the file as loaded, so the watcher does not load it
//! again.

use crate::registry::{file_identity, Registry};
use std::io::Write;
use std::path::Path;

/// The extension a world file of these bytes gets (the server tells kinds
/// apart by content; the extension only helps people).
fn extension(bytes: &[u8]) -> &'static str {
    if crate::source::pk3::looks_like_zip(bytes) {
        "pk3"
    } else if bytes.starts_with(b"IBSP") {
        "bsp"
    } else {
        "bspq"
    }
}

/// Writes `bytes`, already loaded as world `name`, to `dir` as its world
/// file. Other files of the name (`name.bsp` when this is `name.pk3`) are
/// removed first, since two files of one name are a clash that loads
/// neither.
pub fn keep(registry: &Registry, dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let ext = extension(bytes);
    let target = dir.join(format!("{name}.{ext}"));
    let tmp = dir.join(format!(".{name}.{ext}.upload"));
    {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let same_name = path.file_stem().is_some_and(|s| s == name);
        let hidden = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if same_name && !hidden && path != target && path.is_file() {
            std::fs::remove_file(&path)?;
        }
    }
    // Noted before the rename, so a scan never sees the file unnoted (a
    // rename keeps the size, mtime and inode).
    if let Some(id) = file_identity(&tmp) {
        registry.mark_written(name, id);
    }
    std::fs::rename(&tmp, &target)?;
    std::fs::File::open(dir)?.sync_all()
}
