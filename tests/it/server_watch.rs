//! The worlds-directory watcher end to end: a real server on a free loopback
//! port whose periodic rescan is set to an hour, so every reload seen here
//! was triggered by a file-system event. Covers an atomic rename, the
//! Kubernetes ConfigMap/Secret volume layout (world files are symlinks into
//! `..data`, itself a symlink swapped by rename), a file written in place
//! slowly (never served half-written), and bursts.

use crate::common;

use bspq::compile::CompileOptions;
use bspq::map::compile_source;
use bspq::query::{answer, Answer};
use bspq::server::ServerOptions;
use bspq::service::Limits;
use bspq::trace::Scratch;
use bspq::world::format;
use std::io::Write;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The shared test server with the rescan set to an hour, plus waiting helpers.
struct TestServer(common::server::TestServer);

impl std::ops::Deref for TestServer {
    type Target = common::server::TestServer;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl TestServer {
    fn start(worlds_dir: PathBuf) -> TestServer {
        let options = ServerOptions {
            worlds_dir: Some(worlds_dir),
            // Only file-system events can trigger a reload within a test.
            rescan_interval: Duration::from_secs(3600),
            drain_timeout: Duration::from_secs(10),
            ..Default::default()
        };
        // Returns once the server answers, which it does only once the
        // watcher is armed: no change made after this is missed.
        TestServer(common::server::TestServer::start_with(
            options,
            Limits::default(),
        ))
    }

    fn version(&self, world: &str) -> u64 {
        self.registry.get(world).map_or(0, |v| v.version)
    }

    /// Waits until `world` reaches `version` (at most 10 s) and says how long it took.
    fn wait_version(&self, world: &str, version: u64) -> Duration {
        let started = Instant::now();
        while self.version(world) < version {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{world} stayed at version {} (wanted {version}) without a rescan",
                self.version(world)
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        started.elapsed()
    }

    /// The server's answers to `body` for `world` over HTTP, and their version.
    fn trace(&self, world: &str, body: &str) -> (u64, Vec<Answer>) {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        let mut resp = agent
            .post(&format!("{}/v1/worlds/{world}/trace", self.base))
            .header("Content-Type", "application/json")
            .send(body)
            .expect("request completes");
        assert_eq!(resp.status().as_u16(), 200);
        let reply: serde_json::Value =
            serde_json::from_str(&resp.body_mut().read_to_string().expect("body")).expect("json");
        let version = reply["version"].as_u64().expect("version");
        let answers = serde_json::from_value(reply["results"].clone()).expect("answers");
        (version, answers)
    }
}

fn compiled(map: &str) -> Vec<u8> {
    let source = std::fs::read(common::map_path(map)).expect("map");
    format::write(&compile_source(&source, map, &CompileOptions::default()).expect("compiles"))
}

/// A fixed batch of rays and each map's offline answers to it, so a server
/// answer tells which map is serving.
struct Probe {
    body: String,
    expected: Vec<(&'static str, Vec<Answer>)>,
}

impl Probe {
    fn new(maps: &[&'static str]) -> Probe {
        let lines: Vec<String> = common::load_set("q3dm6ish", "rays", true)
            .queries
            .into_iter()
            .take(64)
            .collect();
        let expected = maps
            .iter()
            .map(|map| {
                let world = common::load_world(map, true);
                let mut scratch = Scratch::new();
                let answers = lines
                    .iter()
                    .map(|l| answer(&world.view(), &mut scratch, &common::parse_query(l)))
                    .collect();
                (*map, answers)
            })
            .collect::<Vec<_>>();
        assert_ne!(
            expected[0].1, expected[1].1,
            "the probe tells the maps apart"
        );
        Probe {
            body: format!("{{\"queries\":[{}]}}", lines.join(",")),
            expected,
        }
    }

    /// Which map `world` is serving, and at which version.
    fn serving(&self, server: &TestServer, world: &str) -> (u64, &'static str) {
        let (version, got) = server.trace(world, &self.body);
        let map = self
            .expected
            .iter()
            .find(|(_, want)| *want == got)
            .map(|(map, _)| *map)
            .expect("the answers are one of the maps'");
        (version, map)
    }
}

#[test]
fn an_atomic_rename_is_served_without_waiting_for_a_rescan() {
    let probe = Probe::new(&["q3dm6ish", "aggressor"]);
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("arena.bspq"), compiled("q3dm6ish")).expect("write");
    let server = TestServer::start(dir.path().to_owned());
    assert_eq!(probe.serving(&server, "arena"), (1, "q3dm6ish"));
    let tmp = dir.path().join(".arena.bspq.tmp");
    std::fs::write(&tmp, compiled("aggressor")).expect("write");
    std::fs::rename(&tmp, dir.path().join("arena.bspq")).expect("rename");
    let took = server.wait_version("arena", 2);
    eprintln!("rename → version 2 in {took:?}");
    assert_eq!(probe.serving(&server, "arena"), (2, "aggressor"));
    // A new file is a new world.
    let tmp = dir.path().join(".extra.bspq.tmp");
    std::fs::write(&tmp, compiled("q3dm6ish")).expect("write");
    std::fs::rename(&tmp, dir.path().join("extra.bspq")).expect("rename");
    server.wait_version("extra", 1);
    assert_eq!(probe.serving(&server, "extra"), (1, "q3dm6ish"));
    assert_eq!(server.registry.names(), ["arena", "extra"]);
}

/// What the kubelet does to a ConfigMap/Secret volume: the data lives in a
/// timestamped hidden directory, `..data` points at it, and each key is a
/// symlink through `..data`. An update writes a new timestamped directory,
/// points a new symlink at it and renames that over `..data`.
struct ConfigMapVolume {
    dir: PathBuf,
    generation: u32,
}

impl ConfigMapVolume {
    fn create(dir: &Path, files: &[(&str, &[u8])]) -> ConfigMapVolume {
        let mut volume = ConfigMapVolume {
            dir: dir.to_owned(),
            generation: 0,
        };
        let data = volume.write_generation(files);
        symlink(&data, dir.join("..data")).expect("..data");
        for (name, _) in files {
            symlink(Path::new("..data").join(name), dir.join(name)).expect("key symlink");
        }
        volume
    }

    /// Writes `..2026_11_22_generation.N/` and returns its name.
    fn write_generation(&mut self, files: &[(&str, &[u8])]) -> String {
        self.generation += 1;
        let name = format!("..2026_11_22_01_00_00.{}", self.generation);
        let data = self.dir.join(&name);
        std::fs::create_dir(&data).expect("data dir");
        for (file, bytes) in files {
            std::fs::write(data.join(file), bytes).expect("write key");
        }
        name
    }

    fn update(&mut self, files: &[(&str, &[u8])]) {
        let old = std::fs::read_link(self.dir.join("..data")).expect("..data link");
        let data = self.write_generation(files);
        let tmp = self.dir.join("..data_tmp");
        symlink(&data, &tmp).expect("..data_tmp");
        std::fs::rename(&tmp, self.dir.join("..data")).expect("swap ..data");
        std::fs::remove_dir_all(self.dir.join(old)).expect("old generation");
    }
}

#[test]
fn a_kubernetes_configmap_volume_swap_reloads_every_world_once() {
    let probe = Probe::new(&["q3dm6ish", "aggressor"]);
    let (q3dm6ish, aggressor) = (compiled("q3dm6ish"), compiled("aggressor"));
    let dir = tempfile::tempdir().expect("temp dir");
    let mut volume = ConfigMapVolume::create(
        dir.path(),
        &[("arena.bspq", &q3dm6ish), ("duel.bspq", &aggressor)],
    );
    let server = TestServer::start(dir.path().to_owned());
    // Hidden entries (`..data`, `..2026_…`) are not worlds.
    assert_eq!(server.registry.names(), ["arena", "duel"]);
    assert_eq!(probe.serving(&server, "arena"), (1, "q3dm6ish"));
    assert_eq!(probe.serving(&server, "duel"), (1, "aggressor"));

    volume.update(&[("arena.bspq", &aggressor), ("duel.bspq", &q3dm6ish)]);
    let took = server.wait_version("arena", 2);
    server.wait_version("duel", 2);
    eprintln!("..data swap → version 2 in {took:?}");
    assert_eq!(probe.serving(&server, "arena"), (2, "aggressor"));
    assert_eq!(probe.serving(&server, "duel"), (2, "q3dm6ish"));

    // A second swap works the same way (the watch survives the first).
    volume.update(&[("arena.bspq", &q3dm6ish), ("duel.bspq", &q3dm6ish)]);
    server.wait_version("arena", 3);
    assert_eq!(probe.serving(&server, "arena"), (3, "q3dm6ish"));
    // duel's contents are the same bytes but a new file: reloading it is
    // harmless; what matters is that nothing is left behind or served twice.
    // (A window for a second reload to show, not a wait for the first.)
    std::thread::sleep(Duration::from_millis(200));
    assert!(server.version("duel") <= 3);
    assert_eq!(server.registry.names(), ["arena", "duel"]);
}

#[test]
fn a_file_written_in_place_is_never_served_half_written() {
    let probe = Probe::new(&["q3dm6ish", "aggressor"]);
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("arena.bspq");
    std::fs::write(&path, compiled("q3dm6ish")).expect("write");
    let server = TestServer::start(dir.path().to_owned());
    let failures = || {
        server
            .registry
            .slot("arena")
            .map_or(0, |slot| slot.status().failed_loads)
    };
    // The wrong way to replace a file: truncate and write it slowly.
    let bytes = compiled("aggressor");
    let mut file = std::fs::File::create(&path).expect("truncate");
    file.write_all(&bytes[..bytes.len() / 2])
        .expect("first half");
    file.flush().expect("flush");
    let started = Instant::now();
    while failures() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the half-written file was not noticed"
        );
        // Meanwhile the old version keeps answering.
        assert_eq!(probe.serving(&server, "arena"), (1, "q3dm6ish"));
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(probe.serving(&server, "arena"), (1, "q3dm6ish"));
    let status = server.registry.slot("arena").expect("slot").status();
    assert!(status.last_error.is_some(), "the failure is visible");
    file.write_all(&bytes[bytes.len() / 2..])
        .expect("second half");
    drop(file);
    server.wait_version("arena", 2);
    assert_eq!(probe.serving(&server, "arena"), (2, "aggressor"));
    let status = server.registry.slot("arena").expect("slot").status();
    assert!(status.last_error.is_none(), "a good load clears the error");
}

#[test]
fn a_burst_of_replacements_settles_on_the_last_file() {
    let probe = Probe::new(&["q3dm6ish", "aggressor"]);
    let maps = [compiled("q3dm6ish"), compiled("aggressor")];
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("arena.bspq"), &maps[0]).expect("write");
    let server = TestServer::start(dir.path().to_owned());
    for i in 0..20 {
        let tmp = dir.path().join(format!(".arena.{i}.tmp"));
        std::fs::write(&tmp, &maps[(i + 1) % 2]).expect("write");
        std::fs::rename(&tmp, dir.path().join("arena.bspq")).expect("rename");
    }
    // The last rename (i = 19) put q3dm6ish back: wait until a new version
    // serves it.
    let started = Instant::now();
    loop {
        let (version, map) = probe.serving(&server, "arena");
        if version > 1 && map == "q3dm6ish" {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "burst not settled"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // Settling coalesces the burst (how much depends on the machine's speed;
    // never more loads than renames). A window for late extra loads to show.
    std::thread::sleep(Duration::from_millis(100));
    let loads = server.version("arena") - 1;
    eprintln!("20 renames → {loads} loads");
    assert!((1..=20).contains(&loads));
}

/// The load-failure series of a `/metrics` scrape over HTTP.
fn load_failure_series(server: &TestServer) -> Vec<String> {
    let mut resp = ureq::get(&format!("{}/metrics", server.base))
        .call()
        .expect("scrape");
    let text = resp.body_mut().read_to_string().expect("metrics text");
    text.lines()
        .filter(|l| l.starts_with("bspq_world_load_failures_total{"))
        .map(str::to_owned)
        .collect()
}

/// Two files with one stem (`arena.bspq`, `arena.bsp`) once made the world
/// reload at every scan, alternating between them. A clash is now a failed
/// load the operator sees once (log, status, metric, watchers): the serving
/// version stays until all but one file are removed, which reloads once.
#[test]
fn two_files_claiming_one_name_are_reported_once_not_flipped() {
    let probe = Probe::new(&["q3dm6ish", "aggressor"]);
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("arena.bspq"), compiled("q3dm6ish")).expect("write");
    // Rescanned every 20 ms: a flip would show within the waits below.
    let server = common::server::TestServer::start(Some(dir.path().to_owned()), Limits::default());
    let server = TestServer(server);
    assert_eq!(probe.serving(&server, "arena"), (1, "q3dm6ish"));
    let status = || server.registry.slot("arena").expect("listed").status();

    let source = std::fs::read(common::map_path("aggressor")).expect("map");
    std::fs::write(dir.path().join(".arena.bsp.tmp"), &source).expect("write");
    std::fs::rename(
        dir.path().join(".arena.bsp.tmp"),
        dir.path().join("arena.bsp"),
    )
    .expect("rename");
    // An invalid name is skipped (and logged once), never a world.
    std::fs::write(dir.path().join("bad name.bsp"), &source).expect("write");
    let started = Instant::now();
    while status().last_error.is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the clash was not reported"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // A window of some 15 rescans, in which a second report would show.
    std::thread::sleep(Duration::from_millis(300));
    let clash = status();
    let error = clash.last_error.unwrap_or_default();
    assert!(
        error.contains("arena.bsp,") && error.contains("arena.bspq"),
        "names both files: {error}"
    );
    assert_eq!(clash.failed_loads, 1, "reported once, not at every scan");
    assert_eq!(probe.serving(&server, "arena"), (1, "q3dm6ish"));
    assert_eq!(server.registry.names(), ["arena"]);
    assert_eq!(
        load_failure_series(&server),
        ["bspq_world_load_failures_total{world=\"arena\"} 1"]
    );

    std::fs::remove_file(dir.path().join("arena.bspq")).expect("remove");
    server.wait_version("arena", 2);
    // Again a window, in which a flip back would show.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        probe.serving(&server, "arena"),
        (2, "aggressor"),
        "one reload"
    );
    assert!(status().last_error.is_none(), "the clash is over");
}

/// A world that fails to load at start-up is counted like any later
/// failure (it was not: metrics began after the initial load).
#[test]
fn a_world_failing_at_start_up_is_counted() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("arena.bspq"), compiled("q3dm6ish")).expect("write");
    std::fs::write(dir.path().join("broken.bspq"), b"not a world").expect("write");
    let server = TestServer::start(dir.path().to_owned());
    assert_eq!(
        load_failure_series(&server),
        ["bspq_world_load_failures_total{world=\"broken\"} 1"]
    );
    let broken = server.registry.slot("broken").expect("listed").status();
    assert!(broken.last_error.is_some());
    // A trace on it is a 404 that says why, not only "no world named".
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    let mut resp = agent
        .post(&format!("{}/v1/worlds/broken/trace", server.base))
        .header("Content-Type", "application/json")
        .send(r#"{"queries":[{"start":[0,0,0],"end":[0,0,-64]}]}"#)
        .expect("request completes");
    assert_eq!(resp.status().as_u16(), 404);
    let body: serde_json::Value =
        serde_json::from_str(&resp.body_mut().read_to_string().expect("body")).expect("json");
    assert_eq!(body["error"]["code"], "unknown_world");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("not serving: its last load failed"),
        "{message}"
    );
}
