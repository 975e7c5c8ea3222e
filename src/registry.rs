//! Worlds by name, each an atomically swappable immutable version.
//!
//! A request clones the `Arc` of the current version once and keeps it to the
//! end, so a swap never tears a request; the old version is freed when its
//! last reader drops it. Loading happens before the swap and off the request
//! path; a failed load leaves the old version serving and records the error.

use crate::compile::CompileOptions;
use crate::map::{open_world, world_from_bytes_within, LoadError, Map, WorldSpec};
use arc_swap::ArcSwapOption;
use dashmap::DashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// World names: `[A-Za-z0-9_.-]{1,64}`, and not `.` or `..`.
pub fn valid_world_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// One loaded version of a world.
#[derive(Debug)]
pub struct WorldVersion {
    pub name: String,
    /// Per-world counter, starting at 1, increased by every successful load
    /// (an unload does not reset it: a name's versions only increase).
    pub version: u64,
    pub world: Map,
    /// The source map's xxh3-64 hash as 16 hex digits, formatted once at
    /// load: every answer carries it, so a client can tell which content
    /// answered whatever the version number (versions are per replica).
    pub source_hash: String,
    /// Where it came from: a path, `upload`, or `bundled`.
    pub source: String,
    pub loaded_at: SystemTime,
}

/// Load status of a world name.
#[derive(Debug, Clone, Default)]
pub struct SlotStatus {
    pub last_error: Option<String>,
    pub failed_loads: u64,
}

/// A world name's current version and status. Kept after an unload (with
/// no version and no error it is not listed), so the name's version counter
/// and failure tally carry on when it is loaded again.
#[derive(Debug, Default)]
pub struct WorldSlot {
    current: ArcSwapOption<WorldVersion>,
    next_version: AtomicU64,
    status: Mutex<SlotStatus>,
    /// Serialises loads of this name so versions increase in swap order.
    load_lock: Mutex<()>,
}

impl WorldSlot {
    pub fn current(&self) -> Option<Arc<WorldVersion>> {
        self.current.load_full()
    }

    pub fn status(&self) -> SlotStatus {
        self.status.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Whether the name is listed: serving, or with a failure to show.
    fn is_listed(&self) -> bool {
        self.current().is_some() || self.status().last_error.is_some()
    }
}

/// A change of a world's version, for watchers.
#[derive(Debug, Clone, PartialEq)]
pub struct WorldEvent {
    pub name: String,
    /// 0 when the world was unloaded.
    pub version: u64,
    pub error: Option<String>,
}

/// All worlds by name.
#[derive(Debug)]
pub struct Registry {
    slots: DashMap<String, Arc<WorldSlot>>,
    options: CompileOptions,
    events: tokio::sync::broadcast::Sender<WorldEvent>,
    /// Where each name's last version is kept across restarts, if anywhere.
    versions: Mutex<Option<VersionFile>>,
    /// World files the server wrote itself (uploads kept in the worlds
    /// directory) with their identity, by name: already loaded, so the
    /// watcher does not load them again.
    written: Mutex<std::collections::HashMap<String, FileIdentity>>,
}

/// A file's identity: a replaced file (rename, or a new symlink target)
/// changes its size, mtime or inode.
pub type FileIdentity = (u64, SystemTime, u64);

/// The identity of the file at `path` (following symlinks).
pub fn file_identity(path: &Path) -> Option<FileIdentity> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()?, m.ino()))
}

/// The last version of every name, kept in a file (beside the worlds) so
/// that a name's versions keep increasing across restarts: a version never
/// names two contents on one replica.
#[derive(Debug)]
struct VersionFile {
    path: std::path::PathBuf,
    last: std::collections::BTreeMap<String, u64>,
}

impl VersionFile {
    /// Records `version` of `name`, replacing the file by rename so that a
    /// crash leaves the old file or the new one, never half of one.
    fn record(&mut self, name: &str, version: u64) -> std::io::Result<()> {
        self.last.insert(name.to_owned(), version);
        let text = serde_json::to_string(&self.last).map_err(std::io::Error::other)?;
        let tmp = self.path.with_extension("tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, &self.path)
    }
}

/// Name of the version file in a worlds directory (hidden: never a world).
pub const VERSION_FILE: &str = ".bspq-versions.json";

impl Default for Registry {
    fn default() -> Self {
        Self::new(CompileOptions::default())
    }
}

impl Registry {
    pub fn new(options: CompileOptions) -> Self {
        let (events, _) = tokio::sync::broadcast::channel(256);
        Self {
            slots: DashMap::new(),
            options,
            events,
            versions: Mutex::new(None),
            written: Mutex::new(Default::default()),
        }
    }

    /// Notes that the server itself wrote `name`'s world file, whose
    /// identity is `id`, and loaded it.
    pub fn mark_written(&self, name: &str, id: FileIdentity) {
        let mut written = self.written.lock().unwrap_or_else(|p| p.into_inner());
        written.insert(name.to_owned(), id);
    }

    /// Whether `path` is the file the server wrote for `name` (so it is
    /// loaded already).
    pub fn wrote(&self, name: &str, path: &Path) -> bool {
        let written = self.written.lock().unwrap_or_else(|p| p.into_inner());
        written
            .get(name)
            .is_some_and(|id| file_identity(path) == Some(*id))
    }

    /// Keeps every name's last version in `path` from now on, continuing
    /// from the versions already there: call before the first load.
    pub fn keep_versions_in(&self, path: &Path) -> std::io::Result<()> {
        let last = match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(std::io::Error::other)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Default::default(),
            Err(e) => return Err(e),
        };
        let mut versions = self.versions.lock().unwrap_or_else(|p| p.into_inner());
        *versions = Some(VersionFile {
            path: path.to_owned(),
            last,
        });
        Ok(())
    }

    /// The next version of `name` (whose slot's load lock is held), kept in
    /// the version file before it serves.
    fn next_version(&self, name: &str, slot: &WorldSlot) -> u64 {
        let mut versions = self.versions.lock().unwrap_or_else(|p| p.into_inner());
        let kept = versions
            .as_ref()
            .and_then(|v| v.last.get(name).copied())
            .unwrap_or(0);
        let version = slot
            .next_version
            .load(Ordering::SeqCst)
            .max(kept)
            .saturating_add(1);
        slot.next_version.store(version, Ordering::SeqCst);
        if let Some(file) = versions.as_mut() {
            if let Err(error) = file.record(name, version) {
                tracing::warn!(%error, path = %file.path.display(), world = name, version, "cannot keep the version: after a restart it may be given again");
            }
        }
        version
    }

    /// The current version of `name`.
    pub fn get(&self, name: &str) -> Option<Arc<WorldVersion>> {
        self.slots.get(name).and_then(|s| s.current())
    }

    /// The slot of `name`, if the name is serving or failed to load since
    /// it was last unloaded.
    pub fn slot(&self, name: &str) -> Option<Arc<WorldSlot>> {
        self.slots
            .get(name)
            .filter(|s| s.is_listed())
            .map(|s| Arc::clone(&s))
    }

    /// Listed names (see [`Registry::slot`]) in order.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .slots
            .iter()
            .filter(|e| e.is_listed())
            .map(|e| e.key().clone())
            .collect();
        names.sort();
        names
    }

    /// Failed loads of every name ever seen, unloaded ones included (so a
    /// counter built from this never goes down).
    pub fn failed_loads(&self) -> Vec<(String, u64)> {
        self.slots
            .iter()
            .map(|e| (e.key().clone(), e.status().failed_loads))
            .filter(|(_, failed)| *failed > 0)
            .collect()
    }

    /// Whether at least one world is serving.
    pub fn any_loaded(&self) -> bool {
        self.slots.iter().any(|s| s.current().is_some())
    }

    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<WorldEvent> {
        self.events.subscribe()
    }

    fn slot_or_new(&self, name: &str) -> Arc<WorldSlot> {
        Arc::clone(&self.slots.entry(name.to_owned()).or_default())
    }

    /// Installs a loaded world as the next version of `name`, and returns
    /// it (not whatever serves by the time the caller looks: a file change
    /// may load another version just after).
    fn install(
        &self,
        name: &str,
        source: String,
        load: Result<Map, LoadError>,
    ) -> Result<Arc<WorldVersion>, LoadError> {
        let slot = self.slot_or_new(name);
        let _serial = slot.load_lock.lock().unwrap_or_else(|p| p.into_inner());
        match load {
            Ok(world) => {
                let version = self.next_version(name, &slot);
                let new = WorldVersion {
                    name: name.to_owned(),
                    version,
                    source_hash: format!("{:016x}", world.view().info.source_hash),
                    world,
                    source,
                    loaded_at: SystemTime::now(),
                };
                let new = Arc::new(new);
                slot.current.store(Some(Arc::clone(&new)));
                if let Ok(mut status) = slot.status.lock() {
                    status.last_error = None;
                }
                tracing::info!(world = name, version, "world loaded");
                let _ = self.events.send(WorldEvent {
                    name: name.to_owned(),
                    version,
                    error: None,
                });
                Ok(new)
            }
            Err(err) => {
                self.record_failure(name, &slot, err.to_string());
                Err(err)
            }
        }
    }

    /// Records that `name` could not be loaded, for `reason` (say, two files
    /// claim the name), as a failed load: the serving version, if any, stays.
    pub fn report_failed_load(&self, name: &str, reason: String) {
        let slot = self.slot_or_new(name);
        let _serial = slot.load_lock.lock().unwrap_or_else(|p| p.into_inner());
        self.record_failure(name, &slot, reason);
    }

    /// Shows a failed load in the status, the log and to watchers.
    fn record_failure(&self, name: &str, slot: &WorldSlot, message: String) {
        if let Ok(mut status) = slot.status.lock() {
            status.last_error = Some(message.clone());
            status.failed_loads += 1;
        }
        let serving = slot.current().map_or(0, |v| v.version);
        tracing::warn!(world = name, error = %message, serving_version = serving, "world load failed");
        let _ = self.events.send(WorldEvent {
            name: name.to_owned(),
            version: serving,
            error: Some(message),
        });
    }

    /// Loads (or reloads) `name` from a file: blocking, call off the reactor.
    pub fn load_path(&self, name: &str, path: &Path) -> Result<u64, LoadError> {
        let spec = WorldSpec {
            path: path.to_owned(),
            member: None,
        };
        let load = open_world(&spec, &self.options);
        self.install(name, path.display().to_string(), load)
            .map(|v| v.version)
    }

    /// Loads (or reloads) `name` from bytes of any supported kind (an upload).
    pub fn load_bytes(&self, name: &str, bytes: &[u8], source: &str) -> Result<u64, LoadError> {
        self.load_bytes_within(name, bytes, source, crate::source::pk3::MAX_MEMBER_BYTES)
            .map(|v| v.version)
    }

    /// [`Registry::load_bytes`], an archive's map inflated to at most
    /// `max_member_bytes`.
    pub fn load_bytes_within(
        &self,
        name: &str,
        bytes: &[u8],
        source: &str,
        max_member_bytes: u64,
    ) -> Result<Arc<WorldVersion>, LoadError> {
        let load = world_from_bytes_within(bytes, name, &self.options, max_member_bytes);
        self.install(name, source.to_owned(), load)
    }

    /// Unloads `name` (and clears its last error, so it is no longer
    /// listed); returns whether it was loaded. The slot stays, so the next
    /// load of the name continues its version counter.
    pub fn unload(&self, name: &str) -> bool {
        let Some(slot) = self.slots.get(name).map(|s| Arc::clone(&s)) else {
            return false;
        };
        let _serial = slot.load_lock.lock().unwrap_or_else(|p| p.into_inner());
        if let Ok(mut status) = slot.status.lock() {
            status.last_error = None;
        }
        let removed = slot.current.swap(None).is_some();
        if removed {
            tracing::info!(world = name, "world unloaded");
            let _ = self.events.send(WorldEvent {
                name: name.to_owned(),
                version: 0,
                error: None,
            });
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn world_names() {
        for ok in ["q3dm6", "oa_ctf2", "a.b-c_d", &"x".repeat(64)] {
            assert!(valid_world_name(ok), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "a b", "../x", &"x".repeat(65), "é"] {
            assert!(!valid_world_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_failed_load_keeps_the_old_version() {
        let registry = Registry::default();
        let map = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/maps/q3dm6ish.bsp");
        assert_eq!(registry.load_path("w", &map).ok(), Some(1));
        let pinned = registry.get("w").expect("loaded");
        assert!(registry.load_bytes("w", b"garbage", "upload").is_err());
        let now = registry.get("w").expect("still loaded");
        assert_eq!(now.version, 1);
        assert!(Arc::ptr_eq(&pinned, &now));
        assert!(registry
            .slot("w")
            .and_then(|s| s.status().last_error)
            .is_some());
        let bytes = std::fs::read(&map).expect("map");
        assert_eq!(registry.load_bytes("w", &bytes, "upload").ok(), Some(2));
        assert_eq!(
            pinned.version, 1,
            "a pinned version is unaffected by the swap"
        );
        assert!(registry.unload("w"));
        assert!(registry.get("w").is_none());
        assert!(
            registry.slot("w").is_none(),
            "an unloaded world is not listed"
        );
        assert_eq!(
            registry.load_bytes("w", &bytes, "upload").ok(),
            Some(3),
            "versions carry on after an unload"
        );
    }

    #[test]
    fn versions_carry_on_across_restarts_with_a_version_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join(VERSION_FILE);
        let bytes = std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/maps/q3dm6ish.bsp"),
        )
        .expect("map");
        let first = Registry::default();
        first.keep_versions_in(&file).expect("no file yet");
        assert_eq!(first.load_bytes("w", &bytes, "upload").ok(), Some(1));
        assert_eq!(first.load_bytes("w", &bytes, "upload").ok(), Some(2));
        assert_eq!(first.load_bytes("v", &bytes, "upload").ok(), Some(1));
        drop(first);
        // A restart: the next versions follow the last ones given.
        let second = Registry::default();
        second.keep_versions_in(&file).expect("reads the file");
        assert_eq!(second.load_bytes("w", &bytes, "upload").ok(), Some(3));
        assert_eq!(second.load_bytes("v", &bytes, "upload").ok(), Some(2));
        assert_eq!(second.load_bytes("new", &bytes, "upload").ok(), Some(1));
        // Without the file, versions start again at 1.
        let memory_only = Registry::default();
        assert_eq!(memory_only.load_bytes("w", &bytes, "upload").ok(), Some(1));
    }
}
