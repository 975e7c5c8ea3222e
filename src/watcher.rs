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
//! The watcher reports when it is armed (its OS watch registered, or known
//! to be unavailable): from then on no change is missed, so the server
//! starts answering, and so reports ready, only after that.
//!
//! A half-written file is never served: loading validates the whole file (the
//! checksum of a compiled world, every lump of a source) and a failed load
//! keeps the old version; the writer's next event triggers another scan.

use crate::registry::{valid_world_name, Registry};
use notify::{EventKind, RecursiveMode, Watcher};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// After an event, the directory must be quiet this long before it is
/// scanned, so a burst (many files, or the several steps of a symlink swap)
/// costs one scan.
pub const SETTLE: Duration = Duration::from_millis(10);

use crate::registry::{file_identity as fingerprint, FileIdentity as Fingerprint};

/// A worlds directory as one scan saw it (or the part of it that is new,
/// see [`DirState::changed`]).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct DirListing {
    /// World files, one per name (the file stem), by name.
    pub worlds: Vec<(String, PathBuf)>,
    /// Names claimed by more than one file (`dup.bsp` and `dup.bspq`), with
    /// those files: none of them is loaded, since either could be meant.
    pub clashes: Vec<(String, Vec<PathBuf>)>,
    /// Files skipped because their stem is not a valid world name.
    pub invalid_names: Vec<PathBuf>,
}

/// Lists the world files of `dir`: regular files (or symlinks to them),
/// hidden and temporary files skipped.
pub fn list_worlds_dir(dir: &Path) -> std::io::Result<DirListing> {
    let mut by_name: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    let mut listing = DirListing::default();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let hidden = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if hidden || !path.is_file() {
            continue;
        }
        match path.file_stem().map(|s| s.to_string_lossy().into_owned()) {
            Some(stem) if valid_world_name(&stem) => by_name.entry(stem).or_default().push(path),
            _ => listing.invalid_names.push(path),
        }
    }
    for (name, mut paths) in by_name {
        if paths.len() == 1 {
            listing.worlds.extend(paths.pop().map(|path| (name, path)));
        } else {
            paths.sort();
            listing.clashes.push((name, paths));
        }
    }
    listing.invalid_names.sort();
    Ok(listing)
}

/// Reports what a scan cannot load: a clash as a failed load of its name
/// (the serving version stays; status, metrics and watchers show it), an
/// invalid name as a warning.
fn report_skipped(registry: &Registry, listing: &DirListing) {
    for (name, paths) in &listing.clashes {
        let files: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        registry.report_failed_load(
            name,
            format!(
                "{} files claim the world name {name:?} ({}): none is loaded until all but one are removed",
                paths.len(),
                files.join(", ")
            ),
        );
    }
    for path in &listing.invalid_names {
        tracing::warn!(file = %path.display(), "not a world: the file name (less its extension) must match [A-Za-z0-9_.-]{{1,64}}");
    }
}

/// Loads every world file in `dir` (blocking), reporting clashes and
/// invalid names; returns the listing.
pub fn load_dir(registry: &Registry, dir: &Path) -> std::io::Result<DirListing> {
    let listing = list_worlds_dir(dir)?;
    report_skipped(registry, &listing);
    for (name, path) in &listing.worlds {
        // A failure is recorded (and logged) by the registry.
        let _ = registry.load_path(name, path);
    }
    Ok(listing)
}

/// What the scans so far have loaded and reported.
#[derive(Debug, Default)]
pub struct DirState {
    /// Each world file as last loaded (or tried).
    seen: HashMap<String, Fingerprint>,
    /// Name clashes reported, with their files.
    clashes: HashMap<String, Vec<PathBuf>>,
    /// Files with an invalid name reported.
    invalid_names: HashSet<PathBuf>,
}

impl DirState {
    /// The directory as it is now, as if loaded and reported (which
    /// [`load_dir`] did at start-up).
    pub fn snapshot(dir: &Path) -> Self {
        let mut state = Self::default();
        state.news(list_worlds_dir(dir).unwrap_or_default());
        state
    }

    /// What is new in `dir` since the last call: world files new or
    /// changed, clashes and invalid names not yet reported. The state is
    /// updated as if they were loaded and reported.
    pub fn changed(&mut self, dir: &Path) -> DirListing {
        list_worlds_dir(dir)
            .map(|listing| self.news(listing))
            .unwrap_or_default()
    }

    fn news(&mut self, listing: DirListing) -> DirListing {
        let mut news = DirListing::default();
        let mut clashes = HashMap::new();
        for (name, paths) in listing.clashes {
            // Forgotten, so that whichever file remains when the clash ends
            // is loaded then.
            self.seen.remove(&name);
            if self.clashes.get(&name) != Some(&paths) {
                news.clashes.push((name.clone(), paths.clone()));
            }
            clashes.insert(name, paths);
        }
        self.clashes = clashes;
        for (name, path) in listing.worlds {
            let Some(fp) = fingerprint(&path) else {
                continue;
            };
            if self.seen.get(&name) != Some(&fp) {
                self.seen.insert(name.clone(), fp);
                news.worlds.push((name, path));
            }
        }
        news.invalid_names = listing
            .invalid_names
            .iter()
            .filter(|path| !self.invalid_names.contains(*path))
            .cloned()
            .collect();
        self.invalid_names = listing.invalid_names.into_iter().collect();
        news
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

/// How an armed watcher follows the directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Armed {
    /// File-system events trigger a scan; the periodic rescan backs them up.
    Events,
    /// No OS watcher could start: the periodic rescan alone sees changes.
    RescanOnly,
}

/// Loads what changed in `dir` since `state`, off the reactor, and
/// reports what cannot be loaded.
async fn reload_changed(registry: &Arc<Registry>, dir: &Path, state: &mut DirState) {
    let news = state.changed(dir);
    let registry = Arc::clone(registry);
    // Loading and validating is CPU work, and recording a clash waits for a
    // load of the same name (an upload) to end: keep both off the reactor.
    // A failure is recorded (and logged) by the registry.
    let _ = tokio::task::spawn_blocking(move || {
        report_skipped(&registry, &news);
        for (name, path) in &news.worlds {
            // An upload the server wrote here is loaded already.
            if !registry.wrote(name, path) {
                let _ = registry.load_path(name, path);
            }
        }
    })
    .await;
}

/// Watches `dir` until the task is dropped: reloads new and replaced world
/// files when file-system events settle and every `rescan` in any case.
/// `state` is the directory as the initial load saw it. `armed` is sent how
/// changes are followed as soon as the OS watch is registered (or failed):
/// a change made after that is never missed.
pub async fn watch_dir(
    registry: Arc<Registry>,
    dir: PathBuf,
    rescan: Duration,
    mut state: DirState,
    armed: oneshot::Sender<Armed>,
) {
    let (tx, mut wake) = mpsc::channel::<()>(1);
    // Kept alive for as long as the loop runs; dropping it stops the events.
    let watcher = start_fs_watcher(&dir, tx);
    let mode = if watcher.is_some() {
        tracing::info!(dir = %dir.display(), rescan_seconds = rescan.as_secs_f64(), "watching the worlds directory");
        Armed::Events
    } else {
        Armed::RescanOnly
    };
    // Nobody waiting is fine: the watch goes on.
    let _ = armed.send(mode);
    // Whatever changed between the initial load and the watch starting.
    reload_changed(&registry, &dir, &mut state).await;
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
        reload_changed(&registry, &dir, &mut state).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clashes_and_invalid_names_are_news_once() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = |name: &str| dir.path().join(name);
        for name in ["a.bsp", "a.bspq", "b c.bsp", "d.bspq", ".e.bspq.tmp"] {
            std::fs::write(path(name), name).expect("write");
        }
        let mut state = DirState::default();
        let news = state.changed(dir.path());
        assert_eq!(news.worlds, [("d".to_owned(), path("d.bspq"))]);
        assert_eq!(
            news.clashes,
            [("a".to_owned(), vec![path("a.bsp"), path("a.bspq")])]
        );
        assert_eq!(news.invalid_names, [path("b c.bsp")]);
        assert_eq!(state.changed(dir.path()), DirListing::default());

        // The clash ends: the remaining file is new, once.
        std::fs::remove_file(path("a.bspq")).expect("remove");
        let news = state.changed(dir.path());
        assert_eq!(news.worlds, [("a".to_owned(), path("a.bsp"))]);
        assert!(news.clashes.is_empty() && news.invalid_names.is_empty());
        assert_eq!(state.changed(dir.path()), DirListing::default());
    }

    /// The armed signal means what it says: a file renamed in right after
    /// it is loaded with the periodic rescan an hour away.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn once_armed_a_new_file_is_loaded_without_a_rescan() {
        let dir = tempfile::tempdir().expect("temp dir");
        let registry = Arc::new(Registry::new(crate::compile::CompileOptions::default()));
        let (armed_tx, armed_rx) = oneshot::channel();
        let watch = tokio::spawn(watch_dir(
            Arc::clone(&registry),
            dir.path().to_owned(),
            Duration::from_secs(3600),
            DirState::default(),
            armed_tx,
        ));
        if armed_rx.await.expect("the watcher reports") == Armed::RescanOnly {
            // E.g. out of inotify instances: the warning says so.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "skipped once_armed_a_new_file_is_loaded_without_a_rescan: no OS file watcher here"
            );
            return;
        }
        let map = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/maps/q3dm6ish.bsp");
        let tmp = dir.path().join(".arena.bsp.tmp");
        std::fs::copy(&map, &tmp).expect("copy");
        std::fs::rename(&tmp, dir.path().join("arena.bsp")).expect("rename");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while registry.get("arena").is_none() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "not loaded within 10 s of the rename"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        watch.abort();
    }
}
