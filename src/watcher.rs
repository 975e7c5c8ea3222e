//! Watching the worlds directory: file-system events (inotify and friends,
//! through `notify`) trigger a scan as soon as a burst of changes settles,
//! and a periodic rescan catches anything the events missed (a network file
//! system, an overflowed event queue, a watcher that could not start).
//!
//! A scan compares each world file's identity (size, mtime, inode, following
//! symlinks) with the last one seen and reloads what changed. Following
//! symlinks is what makes Kubernetes ConfigMap/Secret volumes work: there
//! `map.bsp -> ..data/map.bsp` and an update atomically renames a new `..data`
//! symlink over the old one, so no world file itself changes name, but its
//! target is a new inode. Hidden entries (`..data`, `..2026_…`, `.tmp` files)
//! are never worlds.
//!
//! A half-written file is never served: loading validates the whole file (the
//! checksum of a compiled world, every lump of a source) and a failed load
//! keeps the old version; the writer's next event triggers another scan.

use crate::metrics::Metrics;
use crate::registry::{world_files, Registry};
use notify::{EventKind, RecursiveMode, Watcher};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::mpsc;

/// After an event, the directory must be quiet this long before it is
/// scanned, so a burst (many files, or the several steps of a symlink swap)
/// costs one scan.
pub const SETTLE: Duration = Duration::from_millis(10);

/// A file's identity: a replaced file (rename, or a new symlink target)
/// changes inode, size or mtime.
type Fingerprint = (u64, SystemTime, u64);

fn fingerprint(path: &Path) -> Option<Fingerprint> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()?, m.ino()))
}

/// What the last scan saw.
#[derive(Debug, Default)]
pub struct DirState {
    seen: HashMap<String, Fingerprint>,
}

impl DirState {
    /// The directory as it is now (after its initial load).
    pub fn snapshot(dir: &Path) -> Self {
        let mut state = Self::default();
        for (name, path) in world_files(dir).unwrap_or_default() {
            if let Some(fp) = fingerprint(&path) {
                state.seen.insert(name, fp);
            }
        }
        state
    }

    /// The world files that are new or changed since the last call, with the
    /// state updated as if they were loaded.
    pub fn changed(&mut self, dir: &Path) -> Vec<(String, PathBuf)> {
        let Ok(files) = world_files(dir) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (name, path) in files {
            let Some(fp) = fingerprint(&path) else {
                continue;
            };
            if self.seen.get(&name) != Some(&fp) {
                self.seen.insert(name.clone(), fp);
                out.push((name, path));
            }
        }
        out
    }
}

/// Whether an event can mean a world file appeared or changed (reads of the
/// directory, including our own loads, do not).
fn is_change(kind: &EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode};
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

/// Starts an OS watcher on `dir` that sends a wake-up on `tx` for each change
/// (coalesced: one pending wake-up is enough). `None` when the platform or a
/// limit (e.g. inotify watches) refuses: the periodic rescan still runs.
fn start_fs_watcher(dir: &Path, tx: mpsc::Sender<()>) -> Option<notify::RecommendedWatcher> {
    let handler = move |event: notify::Result<notify::Event>| match event {
        Ok(event) if !is_change(&event.kind) => {}
        // An error (e.g. queue overflow) may hide a change: scan.
        _ => {
            let _ = tx.try_send(());
        }
    };
    let started = notify::recommended_watcher(handler)
        .and_then(|mut w| w.watch(dir, RecursiveMode::NonRecursive).map(|_| w));
    match started {
        Ok(watcher) => Some(watcher),
        Err(error) => {
            tracing::warn!(dir = %dir.display(), %error, "cannot watch the worlds directory; relying on the periodic rescan");
            None
        }
    }
}

/// Loads what changed in `dir` since `state`, off the reactor.
async fn reload_changed(
    registry: &Arc<Registry>,
    metrics: &Arc<Metrics>,
    dir: &Path,
    state: &mut DirState,
) {
    for (name, path) in state.changed(dir) {
        let registry = Arc::clone(registry);
        let world = name.clone();
        // Loading and validating is CPU work: keep it off the reactor.
        let loaded = tokio::task::spawn_blocking(move || registry.load_path(&world, &path)).await;
        if !matches!(loaded, Ok(Ok(_))) {
            metrics.load_failures.with_label_values(&[&name]).inc();
        }
    }
}

/// Watches `dir` until the task is dropped: reloads new and replaced world
/// files when file-system events settle and every `rescan` in any case.
/// `state` is the directory as the initial load saw it.
pub async fn watch_dir(
    registry: Arc<Registry>,
    metrics: Arc<Metrics>,
    dir: PathBuf,
    rescan: Duration,
    mut state: DirState,
) {
    let (tx, mut wake) = mpsc::channel::<()>(1);
    // Kept alive for as long as the loop runs; dropping it stops the events.
    let _watcher = start_fs_watcher(&dir, tx);
    // Whatever changed between the initial load and the watch starting.
    reload_changed(&registry, &metrics, &dir, &mut state).await;
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + rescan, rescan);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            Some(()) = wake.recv() => {
                // Let the burst settle: wait until no event for SETTLE.
                while let Ok(Some(())) = tokio::time::timeout(SETTLE, wake.recv()).await {}
            }
        }
        reload_changed(&registry, &metrics, &dir, &mut state).await;
    }
}
