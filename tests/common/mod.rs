//! Helpers shared by the integration tests: the committed maps and oracle
//! subsets under `tests/data/` (never `/work/shared`).
#![allow(dead_code)]

pub mod browser;
pub mod python;
pub mod server;

use bspq::compile::CompileOptions;
use bspq::conformance::read_lines;
use bspq::map::{open_world, Map, WorldSpec};
use bspq::query::{Query, QueryLine};
use bspq::trace::TraceResult;
use std::path::PathBuf;

/// The committed maps (`tests/data/maps/NAME.bsp`).
pub const MAPS: [&str; 3] = ["oa_ctf2", "q3dm6ish", "aggressor"];
/// The query sets of an oracle folder.
pub const SETS: [&str; 4] = ["rays", "boxes", "points", "extras"];

pub fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

pub fn map_path(map: &str) -> PathBuf {
    data_dir().join("maps").join(format!("{map}.bsp"))
}

pub fn oracle_dir(map: &str) -> PathBuf {
    data_dir().join("oracle").join(map)
}

pub fn load_world(map: &str, curves: bool) -> Map {
    let spec = WorldSpec::parse(map_path(map).to_str().expect("utf-8 path"));
    open_world(
        &spec,
        &CompileOptions {
            curves,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("cannot open {map} (curves {curves}): {e}"))
}

/// Says why `test` (or a part of it) did not run. Written to the process's
/// standard error itself: the harness keeps `println!`/`eprintln!` of a
/// passing test to itself, and a skip must show in every run's log.
pub fn skip(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipped: {test}: {why}");
}

/// Runs the `bspq` binary with `args`, which must succeed, and returns
/// its standard output.
pub fn bspq_stdout<I, S>(args: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bspq"))
        .args(args)
        .output()
        .expect("bspq runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// Runs the `bspq` binary with `args`, `input` written to its standard
/// input, and returns how it ended (status, stdout, stderr).
pub fn bspq_with_input<I, S>(args: I, input: &[u8]) -> std::process::Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let (out, written) = bspq_reading(args, input);
    written.expect("input written");
    out
}

/// [`bspq_with_input`] for a run that may stop reading early: how it ended,
/// and whether all of `input` was written.
pub fn bspq_reading<I, S>(args: I, input: &[u8]) -> (std::process::Output, std::io::Result<()>)
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_bspq"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bspq runs");
    // Written from a thread: a large answer could fill stdout's pipe
    // before all of stdin is read.
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().expect("bspq ends");
    (out, writer.join().expect("writer"))
}

/// Answer lines (JSON, one a line), parsed.
pub fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).expect("JSON answer lines"))
        .collect()
}

/// `bspq trace --world` on committed map `map` with `input` (query lines):
/// its answer lines, parsed.
pub fn trace_lines(map: &str, input: &str) -> Vec<serde_json::Value> {
    let map = map_path(map);
    let out = bspq_with_input(
        [
            std::ffi::OsStr::new("trace"),
            "--world".as_ref(),
            map.as_os_str(),
        ],
        input.as_bytes(),
    );
    json_lines(&String::from_utf8(out.stdout).expect("utf-8 answers"))
}

/// Parses and validates one query line (test data is trusted to be valid).
pub fn parse_query(line: &str) -> Query {
    QueryLine::parse(line)
        .and_then(|q| q.validate())
        .unwrap_or_else(|e| panic!("bad query line {line}: {e}"))
}

/// One query set of a committed oracle subset.
pub struct OracleSet {
    pub map: String,
    pub set: String,
    pub curves: bool,
    pub queries: Vec<String>,
    pub expected: Vec<String>,
    /// The kind of each query (same length as `queries`).
    pub kinds: Vec<String>,
}

fn read(path: PathBuf) -> Vec<String> {
    read_lines(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Reads a set of the committed subset: queries, the answers for `curves`
/// (points have one answer file) and the kinds.
pub fn load_set(map: &str, set: &str, curves: bool) -> OracleSet {
    let dir = oracle_dir(map);
    let queries = read(dir.join(format!("{set}.jsonl.gz")));
    let expected_name = if set == "points" || curves {
        format!("{set}.expected.jsonl.gz")
    } else {
        format!("{set}.nocurves.expected.jsonl.gz")
    };
    let expected = read(dir.join(expected_name));
    assert_eq!(
        queries.len(),
        expected.len(),
        "{map}/{set}: query and answer counts differ"
    );
    let kinds = match set {
        "extras" | "scene" | "moves" => read(dir.join(format!("{set}.kinds.txt.gz"))),
        "rays" | "boxes" => {
            // kinds.txt: "# rays", one kind per ray, "# boxes", one per box.
            let mut section = String::new();
            read(dir.join("kinds.txt.gz"))
                .into_iter()
                .filter(|line| {
                    if let Some(name) = line.strip_prefix('#') {
                        section = name.trim().to_owned();
                        false
                    } else {
                        section == set
                    }
                })
                .collect()
        }
        _ => vec![set.to_owned(); queries.len()],
    };
    assert_eq!(
        kinds.len(),
        queries.len(),
        "{map}/{set}: kinds and query counts differ"
    );
    OracleSet {
        map: map.to_owned(),
        set: set.to_owned(),
        curves,
        queries,
        expected,
        kinds,
    }
}

/// Deterministic pseudo-random numbers for generated cases: fastrand's
/// seeded generator (the one the CLI uses), under the names the tests call.
pub struct Rng(fastrand::Rng);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(fastrand::Rng::with_seed(seed))
    }

    pub fn next(&mut self) -> u64 {
        self.0.u64(..)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        self.0.usize(..n.max(1))
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f32 {
        self.0.f32()
    }

    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        self.0.shuffle(v);
    }
}

/// Every field of a trace's answer as bits, so that -0.0 and 0.0 (or two
/// NaNs) are told apart.
pub fn result_bits(r: &TraceResult) -> [u32; 12] {
    [
        r.fraction.to_bits(),
        r.endpos.x.to_bits(),
        r.endpos.y.to_bits(),
        r.endpos.z.to_bits(),
        r.normal.x.to_bits(),
        r.normal.y.to_bits(),
        r.normal.z.to_bits(),
        r.dist.to_bits(),
        r.startsolid as u32,
        r.allsolid as u32,
        r.contents,
        r.surface_flags,
    ]
}

/// A pk3 (zip) holding `members` (name, bytes), deflated.
pub fn pk3_of(members: &[(&str, &[u8])]) -> Vec<u8> {
    use std::io::Write;
    use zip::write::SimpleFileOptions;
    let deflated =
        SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, bytes) in members {
        zip.start_file(*name, deflated).expect("zip member");
        zip.write_all(bytes).expect("zip write");
    }
    zip.finish().expect("zip").into_inner()
}

/// A few rays, boxes and position tests, and point contents, through a
/// (possibly strange) world, from `rng`: they must not panic, and every
/// fraction lies in 0..=1.
pub fn exercise(world: &bspq::trace::Kernel, rng: &mut Rng, queries: usize) {
    use bspq::math::Vec3;
    let lo = Vec3::from_array(world.mins);
    let hi = Vec3::from_array(world.maxs);
    let (lo, hi) = if (lo.is_finite() && hi.is_finite()) && lo.cmple(hi).all() {
        (lo.max(Vec3::splat(-65536.0)), hi.min(Vec3::splat(65536.0)))
    } else {
        (Vec3::splat(-1024.0), Vec3::splat(1024.0))
    };
    let point = |rng: &mut Rng| lo + (hi - lo) * Vec3::new(rng.unit(), rng.unit(), rng.unit());
    let mut scratch = bspq::trace::Scratch::new();
    for k in 0..queries {
        let start = point(rng);
        let end = if k % 4 == 3 { start } else { point(rng) };
        let (mins, maxs) = if k % 2 == 0 {
            (Vec3::ZERO, Vec3::ZERO)
        } else {
            (Vec3::new(-15.0, -15.0, -24.0), Vec3::new(15.0, 15.0, 32.0))
        };
        let q = bspq::TraceQuery::boxed(start, end, mins, maxs, u32::MAX).unwrap();
        let r = bspq::trace::trace(world, &q, &mut scratch);
        assert!((0.0..=1.0).contains(&r.fraction), "fraction {}", r.fraction);
        bspq::trace::point_contents(world, start);
    }
}
