//! End to end: the real `bspq trace` binary, query lines on stdin, one answer
//! line per query on stdout, answers equal to the library's.

use crate::common;

use bspq::query::{answer, Answer};
use bspq::trace::accel::bvh::Avx2;
use bspq::trace::Scratch;
use std::io::Write;
use std::process::{Command, Output, Stdio};

fn run_trace(args: &[&str], stdin: &str) -> Output {
    trace_bytes(args, stdin.as_bytes())
}

/// A mix of rays, boxes, points and edge cases from the committed oracle subset.
fn sample_queries() -> Vec<String> {
    let mut lines = Vec::new();
    for set in common::SETS {
        let data = common::load_set("q3dm6ish", set, true);
        lines.extend(data.queries.iter().step_by(97).take(8).cloned());
    }
    // A position test and a ray with the default mask.
    lines
        .push(r#"{"start":[0,0,64],"end":[0,0,64],"mins":[-15,-15,-24],"maxs":[15,15,32]}"#.into());
    lines.push(r#"{"start":[-100,-100,100],"end":[300,200,-50]}"#.into());
    lines
}

fn stdout_lines(out: &Output) -> Vec<String> {
    String::from_utf8(out.stdout.clone())
        .expect("utf-8 output")
        .lines()
        .map(str::to_owned)
        .collect()
}

fn check_answers(curves: bool) {
    let map = common::map_path("q3dm6ish");
    let mut args = vec!["--world", map.to_str().unwrap()];
    if !curves {
        args.push("--no-curves");
    }
    let queries = sample_queries();
    let out = run_trace(&args, &(queries.join("\n") + "\n"));
    assert!(
        out.status.success(),
        "bspq trace failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), queries.len(), "one answer line per query");
    let loaded = common::load_world("q3dm6ish", curves);
    let world = loaded.view();
    let mut scratch = Scratch::new();
    for (q, line) in queries.iter().zip(&lines) {
        let got: Answer = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("answer line does not parse ({e}): {line}"));
        let expected = answer(&world, &mut scratch, &common::parse_query(q));
        assert_eq!(got, expected, "query {q}");
    }
}

#[test]
fn trace_answers_match_the_library() {
    check_answers(true);
}

#[test]
fn trace_answers_match_the_library_without_curves() {
    check_answers(false);
}

#[test]
fn bad_lines_give_error_objects_and_exit_status_1() {
    let map = common::map_path("q3dm6ish");
    let good = r#"{"start":[0,0,64],"end":[64,0,64]}"#;
    let input = [
        good,
        "{not json",
        good,
        r#"{"start":[0,0,0]}"#,
        r#"{"start":[0,0,0],"end":[1,1,1],"mins":[1,0,0],"maxs":[0,0,0]}"#,
        "",
        r#"{"point":[0,0,0]}"#,
    ]
    .join("\n")
        + "\n";
    let out = run_trace(&["--world", map.to_str().unwrap()], &input);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a bad line makes the exit status 1"
    );
    let lines = stdout_lines(&out);
    // Blank lines are skipped; every other line gets exactly one line back.
    assert_eq!(lines.len(), 6, "{lines:#?}");
    let json: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for (i, expected_index, code) in [
        (1, 1, "malformed_query"),
        (3, 3, "missing_field"),
        (4, 4, "mins_above_maxs"),
    ] {
        let err = &json[i]["error"];
        assert!(
            err.is_object(),
            "line {i} is not an error object: {}",
            lines[i]
        );
        assert_eq!(err["code"], code, "{}", lines[i]);
        assert_eq!(err["query_index"], expected_index, "{}", lines[i]);
        assert!(
            err["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{}",
            lines[i]
        );
    }
    // The good lines around the bad ones are still answered, in order.
    for i in [0, 2] {
        let a: Answer = serde_json::from_str(&lines[i]).expect("an answer");
        assert!(matches!(a, Answer::Trace(_)), "{}", lines[i]);
    }
    assert!(matches!(
        serde_json::from_str::<Answer>(&lines[5]),
        Ok(Answer::Point(_))
    ));
    assert!(!out.stderr.is_empty(), "errors are also reported on stderr");
}

#[test]
fn a_missing_world_is_an_error() {
    let out = run_trace(&["--world", "/nonexistent/dir/nomap.bsp"], "");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("nomap.bsp"),
        "the error names the file: {stderr}"
    );
    // The cause once: an error's message and its source are not both printed.
    assert_eq!(stderr.matches("os error").count(), 1, "{stderr}");
}

/// `bspq check` on each committed map: the fast paths agree with the walk
/// on its random moves (rays and boxes, and the boxes as shapes), and it
/// says so with exit status 0.
#[test]
fn check_finds_the_fast_paths_equal_to_the_walk() {
    for map in common::MAPS {
        let out = Command::new(env!("CARGO_BIN_EXE_bspq"))
            .args(["check", "--moves", "5000", "--world"])
            .arg(common::map_path(map))
            .output()
            .expect("bspq runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{map}: {text}");
        assert!(text.starts_with("moves  "), "{map}: {text}");
        assert!(text.contains(" 5000 ("), "{map}: {text}");
        // Rays and boxes, then the same boxes as shapes: five paths each,
        // six where the full trace also has the four-wide search to check
        // (AVX2: see `world::bvh::WideTrees`).
        let paths = if Avx2::detect().is_some() { 6 } else { 5 };
        let differ: Vec<&str> = text.lines().filter(|l| l.contains(" differ")).collect();
        assert_eq!(differ.len(), 2 * paths, "{map}: {text}");
        for line in &differ[..paths] {
            assert!(line.contains(" 0 of 5000 differ"), "{map}: {line}");
        }
        for line in &differ[paths..] {
            assert!(line.starts_with("shapes: "), "{map}: {line}");
            assert!(line.contains(" 0 of "), "{map}: {line}");
        }
    }
}

#[test]
fn check_rejects_zero_moves() {
    let out = Command::new(env!("CARGO_BIN_EXE_bspq"))
        .args(["check", "--moves", "0", "--world"])
        .arg(common::map_path("oa_ctf2"))
        .output()
        .expect("bspq runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--moves"));
}

/// Runs `bspq ARGS --world oa_ctf2` with its stdout closed before it
/// writes anything, feeding it `input` (it may be gone before it reads it
/// all: that is the point).
fn with_stdout_closed(args: &[&str], input: &str) -> (Output, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bspq"))
        .args(args)
        .arg("--world")
        .arg(common::map_path("oa_ctf2"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bspq runs");
    drop(child.stdout.take());
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input.as_bytes());
    }
    let out = child.wait_with_output().expect("bspq ends");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stderr)
}

/// A report whose reader stops early ends quietly: no panic message when
/// stdout is a closed pipe (`bspq inspect … | head`).
#[test]
fn a_closed_stdout_ends_a_report_quietly() {
    let (out, stderr) = with_stdout_closed(&["inspect"], "");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        out.status.success() || out.status.code() == Some(141),
        "{:?} {stderr}",
        out.status
    );
}

/// Answer lines piped into a reader that stops early end quietly too:
/// `bspq trace` returns the write's error, which it used to print.
#[test]
fn a_closed_stdout_ends_trace_answers_quietly() {
    let lines = "{\"start\":[0,0,0],\"end\":[64,0,0]}\n".repeat(2_000);
    let (out, stderr) = with_stdout_closed(&["trace"], &lines);
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(141), "{stderr}");
}

/// `bspq bench --json` runs every engine on the query file and reports
/// them on its last line, parry3d side by side; parry3d, an independent
/// engine on a triangle mesh of the same brushes, finds the same first
/// contact on nearly every ray (the rest differ by the reference's 1/8-unit
/// rules, which a mesh does not have).
#[test]
fn bench_reports_every_engine_side_by_side() {
    let queries = common::oracle_dir("q3dm6ish").join("rays.jsonl.gz");
    let map = common::map_path("q3dm6ish");
    let text = common::bspq_stdout([
        "bench".as_ref(),
        "--json".as_ref(),
        "--no-shapes".as_ref(),
        "--runs=1".as_ref(),
        "--min-run-ms=1".as_ref(),
        "--batch=64".as_ref(),
        "--threads=2".as_ref(),
        "--world".as_ref(),
        map.as_os_str(),
        "--queries".as_ref(),
        queries.as_os_str(),
    ]);
    let last = text.lines().last().expect("a JSON line");
    let report: serde_json::Value = serde_json::from_str(last).expect("JSON");
    let lines = common::load_set("q3dm6ish", "rays", true).queries.len();
    assert_eq!(report["queries"], lines, "{report}");
    assert_eq!(report["rays"], lines, "{report}");
    assert_eq!(report["threads"], 2, "{report}");
    for rate in [
        "bspq_qps",
        "parry_qps",
        "bspq_batch_qps",
        "bspq_anyhit_qps",
        "bspq_anyhit_batch_qps",
        "bspq_threads_qps",
        "bspq_threads_one_qps",
    ] {
        let value = report[rate].as_f64().unwrap_or(0.0);
        assert!(value > 0.0, "{rate}: {report}");
    }
    let ratio = report["ratio"].as_f64().unwrap_or(0.0);
    let expected =
        report["bspq_qps"].as_f64().unwrap_or(0.0) / report["parry_qps"].as_f64().unwrap_or(1.0);
    assert!((ratio - expected).abs() <= 1e-9 * expected, "{report}");
    let agree = report["parry_agree"].as_f64().unwrap_or(0.0);
    assert!(agree > 0.95, "parry3d agrees on {agree}: {report}");
}

/// `bspq bench --moves` runs the query file's slide lines as movement
/// frames side by side with their first sweeps, and reports moves and
/// sweeps per second, the traces a move makes (at least its first sweep and
/// the ground probe where it ends) and what a move costs over its traces
/// (priced as its first sweep, and as its own traces replayed).
#[test]
fn bench_times_moves_beside_their_sweeps() {
    let queries = common::oracle_dir("q3dm6ish").join("moves.jsonl.gz");
    let map = common::map_path("q3dm6ish");
    let text = common::bspq_stdout([
        "bench".as_ref(),
        "--json".as_ref(),
        "--no-parry".as_ref(),
        "--no-shapes".as_ref(),
        "--runs=1".as_ref(),
        "--min-run-ms=1".as_ref(),
        "--moves".as_ref(),
        "--world".as_ref(),
        map.as_os_str(),
        "--queries".as_ref(),
        queries.as_os_str(),
    ]);
    let last = text.lines().last().expect("a JSON line");
    let report: serde_json::Value = serde_json::from_str(last).expect("JSON");
    // The movement lines are the movement run's, not refused queries.
    assert_eq!(report["rejected"], 0, "{report}");
    let movement = &report["movement"];
    let moves = movement["moves"].as_u64().unwrap_or(0);
    let step_moves = movement["step_moves"].as_u64().unwrap_or(u64::MAX);
    assert!(moves > 0 && step_moves <= moves, "{report}");
    assert!(movement["skipped"].as_u64().unwrap_or(0) > 0, "{report}");
    for rate in [
        "moves_qps",
        "sweeps_qps",
        "traces_qps",
        "move_over_sweep",
        "move_over_trace",
        "overhead",
        "trace_overhead",
    ] {
        let value = movement[rate].as_f64().unwrap_or(0.0);
        assert!(value > 0.0, "{rate}: {report}");
    }
    let per_move = movement["traces_per_move"].as_f64().unwrap_or(0.0);
    assert!(per_move >= 2.0, "{report}");
    let overhead = movement["overhead"].as_f64().unwrap_or(0.0);
    let expected = movement["move_over_sweep"].as_f64().unwrap_or(0.0) / per_move;
    assert!((overhead - expected).abs() <= 1e-9 * expected, "{report}");
    assert_eq!(report["bspq_moves_qps"], movement["moves_qps"], "{report}");
    assert_eq!(
        report["traces_per_move"], movement["traces_per_move"],
        "{report}"
    );
    assert_eq!(report["move_overhead"], movement["overhead"], "{report}");
}

/// `bspq compile --reproducible`: two compiles of one map (with a hull, so
/// the onion's timing is left out too) write the same bytes, and `inspect`
/// says the timings were not recorded.
#[test]
fn reproducible_compiles_write_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let compile = |name: &str| {
        let out = dir.path().join(name);
        let status = Command::new(env!("CARGO_BIN_EXE_bspq"))
            .arg("compile")
            .arg(common::map_path("q3dm6ish"))
            .arg("-o")
            .arg(&out)
            .args([
                "--quiet",
                "--reproducible",
                "--hull",
                "stand=-15,-15,-24,15,15,32",
            ])
            .status()
            .expect("bspq runs");
        assert!(status.success());
        std::fs::read(&out).unwrap()
    };
    let (first, second) = (compile("a.bspq"), compile("b.bspq"));
    assert!(first == second, "the two compiles differ");
    let out = Command::new(env!("CARGO_BIN_EXE_bspq"))
        .args(["inspect", "--world"])
        .arg(dir.path().join("a.bspq"))
        .output()
        .expect("bspq runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert_eq!(text.matches("not recorded").count(), 2, "{text}");
}

/// Runs `bspq ARGS` (stdin empty) and returns what it did.
fn bspq<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_bspq"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("bspq runs")
}

fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The rows of `bspq accuracy`'s output for `kind`: (the row's label, its
/// mean, p99 and max error and its false hits, false misses and differing
/// starts). A main-table row ends with `>0.01` before the counts, a bevel
/// row does not; both end with the rate.
fn accuracy_rows(text: &str, kind: &str) -> Vec<(String, Vec<String>)> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{kind} ")))
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let main = fields[1] == "plane-shifted" || fields[1] == "exact";
            let numbers = fields.len().checked_sub(if main { 8 } else { 7 })?;
            let mut errors: Vec<String> = fields[numbers..fields.len() - 1]
                .iter()
                .map(|s| s.to_string())
                .collect();
            if main {
                errors.remove(3); // >0.01
            }
            let label = if main {
                fields[1].to_owned()
            } else {
                // The bevel setting ("edges 30") before its plane and cap counts.
                fields[1..numbers - 2].join(" ")
            };
            Some((label, errors))
        })
        .collect()
}

/// `bspq accuracy`'s bevel table measures each setting with the kernel's
/// lanes of that setting's bevels: it used to keep the loaded world's
/// (45°) lanes, which panicked (index out of bounds in the shape sweep)
/// or gave wrong errors for other angles. Each row now equals the main
/// table of a world loaded with that setting.
#[test]
fn accuracy_bevel_rows_equal_a_world_loaded_with_those_bevels() {
    let queries = common::oracle_dir("q3dm6ish").join("boxes.jsonl.gz");
    let run = |bevels: &[&str]| {
        let map = common::map_path("q3dm6ish");
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "accuracy".as_ref(),
            "--world".as_ref(),
            map.as_os_str(),
            "--no-curves".as_ref(),
            "--queries".as_ref(),
            queries.as_os_str(),
            "--limit".as_ref(),
            "300".as_ref(),
        ];
        args.extend(bevels.iter().map(std::ffi::OsStr::new));
        let out = bspq(&args);
        assert!(out.status.success(), "{}", stderr_of(&out));
        String::from_utf8(out.stdout).expect("utf-8")
    };
    let table = run(&[]);
    let thirty = run(&["--edge-bevels", "30", "--no-cap-bevels", "--no-bevel-table"]);
    for kind in ["sphere", "capsule", "cylinder", "convex"] {
        let rows = accuracy_rows(&table, kind);
        let row = |label: &str| {
            rows.iter()
                .find(|(l, _)| l == label)
                .map(|(_, e)| e.clone())
                .unwrap_or_else(|| panic!("no {kind} {label} row in:\n{table}"))
        };
        let loaded_with = |text: &str| {
            accuracy_rows(text, kind)
                .into_iter()
                .find(|(l, _)| l == "plane-shifted")
                .map(|(_, e)| e)
                .unwrap_or_else(|| panic!("no {kind} plane-shifted row in:\n{text}"))
        };
        assert_eq!(row("edges 30"), loaded_with(&thirty), "{kind}");
        // The default bevels are the loaded world's own.
        assert_eq!(row("edges 45+caps"), loaded_with(&table), "{kind}");
    }
    // oa_ctf2 panicked at another line of the shape sweep.
    let map = common::map_path("oa_ctf2");
    let queries = common::oracle_dir("oa_ctf2").join("boxes.jsonl.gz");
    let out = bspq([
        "accuracy".as_ref(),
        "--world".as_ref(),
        map.as_os_str(),
        "--no-curves".as_ref(),
        "--queries".as_ref(),
        queries.as_os_str(),
        "--limit".as_ref(),
        "100".as_ref(),
    ]);
    assert!(out.status.success(), "{}", stderr_of(&out));
}

/// `conformance` without the files it is asked to run is an error naming
/// what is missing (it used to print nothing and exit 0, even with --strict).
#[test]
fn conformance_without_its_query_files_is_an_error() {
    let map = common::map_path("q3dm6ish");
    let oracle = common::oracle_dir("q3dm6ish");
    let empty = tempfile::tempdir().expect("temp dir");
    let rays_file = oracle.join("rays.jsonl.gz");
    let cases: [(&std::path::Path, &[&str], &str); 4] = [
        (
            "/nonexistent-oracle".as_ref(),
            &[],
            "/nonexistent-oracle does not exist",
        ),
        (&rays_file, &[], "is not a folder"),
        (
            empty.path(),
            &[],
            "holds none of rays, boxes, points, extras",
        ),
        (
            &oracle,
            &["--sets", "rays,foo"],
            "no foo.jsonl or foo.jsonl.gz in",
        ),
    ];
    for (dir, sets, message) in cases {
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "conformance".as_ref(),
            "--strict".as_ref(),
            "--world".as_ref(),
            map.as_os_str(),
            "--oracle".as_ref(),
            dir.as_os_str(),
        ];
        args.extend(sets.iter().map(std::ffi::OsStr::new));
        let out = bspq(&args);
        assert_eq!(out.status.code(), Some(1), "{dir:?} {sets:?}");
        assert!(stderr_of(&out).contains(message), "{}", stderr_of(&out));
    }
}

/// Writes `lines` gzipped to `path`.
fn write_gz(path: &std::path::Path, lines: &[String]) {
    use flate2::write::GzEncoder;
    let mut gz = GzEncoder::new(
        std::fs::File::create(path).expect("create"),
        flate2::Compression::fast(),
    );
    for line in lines {
        writeln!(gz, "{line}").expect("write");
    }
    gz.finish().expect("gzip");
}

/// `conformance` labels a mismatch with its line's kind from its own
/// section of `kinds.txt` (`# rays`, then `# boxes`; points have
/// none): point mismatches used to be labelled with ray kinds, and box
/// mismatches too when the folder held no rays file.
#[test]
fn conformance_labels_mismatches_with_their_own_kinds() {
    let source = common::oracle_dir("q3dm6ish");
    let dir = tempfile::tempdir().expect("temp dir");
    // Boxes and points, no rays; each set's first answer made wrong.
    for set in ["boxes", "points"] {
        let data = common::load_set("q3dm6ish", set, true);
        write_gz(&dir.path().join(format!("{set}.jsonl.gz")), &data.queries);
        let mut expected = data.expected.clone();
        let mut wrong: serde_json::Value = serde_json::from_str(&expected[0]).expect("JSON");
        wrong["contents"] = 0x4000_0000.into();
        expected[0] = wrong.to_string();
        write_gz(
            &dir.path().join(format!("{set}.expected.jsonl.gz")),
            &expected,
        );
    }
    std::fs::copy(source.join("kinds.txt.gz"), dir.path().join("kinds.txt.gz")).expect("copy");
    let first_box_kind = common::load_set("q3dm6ish", "boxes", true).kinds[0].clone();
    assert!(!["long", "short"].contains(&first_box_kind.as_str()));
    let out = bspq([
        "conformance".as_ref(),
        "--world".as_ref(),
        common::map_path("q3dm6ish").as_os_str(),
        "--oracle".as_ref(),
        dir.path().as_os_str(),
        "--show".as_ref(),
        "0".as_ref(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", stderr_of(&out));
    assert!(
        text.contains(&format!(
            "boxes   1999/2000 matched (99.950%)  mismatches by kind: {{\"{first_box_kind}\": 1}}"
        )),
        "{text}"
    );
    assert!(
        text.contains("points  1999/2000 matched (99.950%)  mismatches by kind: {\"points\": 1}"),
        "{text}"
    );
}

/// Compiles `map` into `dir/NAME` with `options`; returns the path.
fn compile_into(dir: &std::path::Path, map: &str, name: &str, options: &[&str]) -> String {
    let out = dir.join(name);
    let run = bspq(
        [
            "compile".as_ref(),
            common::map_path(map).as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
            "--quiet".as_ref(),
        ]
        .into_iter()
        .chain(options.iter().map(std::ffi::OsStr::new)),
    );
    assert!(run.status.success(), "{}", stderr_of(&run));
    out.to_str().expect("utf-8 path").to_owned()
}

/// A compiled world file carries its curves setting: `conformance` compares
/// with the answers of that setting and `bench` reports it, whatever the
/// flag; `--no-curves` on a world compiled with curves is an error, not
/// silently ignored.
#[test]
fn commands_use_the_curves_setting_a_compiled_world_records() {
    let dir = tempfile::tempdir().expect("temp dir");
    let no_curves = compile_into(dir.path(), "oa_ctf2", "ctf_nc.bspq", &["--no-curves"]);
    let with_curves = compile_into(dir.path(), "oa_ctf2", "ctf.bspq", &[]);
    let oracle = common::oracle_dir("oa_ctf2");
    let conformance = |world: &str, extra: &[&str]| {
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "conformance".as_ref(),
            "--world".as_ref(),
            world.as_ref(),
            "--oracle".as_ref(),
            oracle.as_os_str(),
            "--sets".as_ref(),
            "rays,boxes".as_ref(),
            "--strict".as_ref(),
        ];
        args.extend(extra.iter().map(std::ffi::OsStr::new));
        bspq(&args)
    };
    // oa_ctf2 has patches: against the curves-on answers this world fails.
    for world in [&no_curves, &with_curves] {
        let out = conformance(world, &[]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{world}: {text}{}", stderr_of(&out));
        assert_eq!(text.matches("2000/2000 matched").count(), 2, "{text}");
    }
    let out = conformance(&with_curves, &["--no-curves"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("compiled with curves"),
        "{}",
        stderr_of(&out)
    );
    assert!(out.stdout.is_empty());

    let queries = oracle.join("rays.jsonl.gz");
    let text = common::bspq_stdout([
        "bench".as_ref(),
        "--json".as_ref(),
        "--no-shapes".as_ref(),
        "--no-parry".as_ref(),
        "--runs=1".as_ref(),
        "--min-run-ms=1".as_ref(),
        "--world".as_ref(),
        no_curves.as_ref(),
        "--queries".as_ref(),
        queries.as_os_str(),
    ]);
    let report: serde_json::Value =
        serde_json::from_str(text.lines().last().expect("a JSON line")).expect("JSON");
    assert_eq!(report["curves"], false, "{report}");
}

/// `bspq workload` into a reader that stops early (`| head -1`) ends
/// quietly, as `trace` does: it used to print `Broken pipe` and exit 1.
#[test]
fn a_closed_stdout_ends_workload_quietly() {
    let (out, stderr) = with_stdout_closed(&["workload", "--kind", "rays"], "");
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
    assert_eq!(out.status.code(), Some(141), "{stderr}");
}

/// Runs `bspq trace ARGS` on `input` (bytes); stdout and stderr. (A run
/// that stops early stops reading: what was not written is ignored.)
fn trace_bytes(args: &[&str], input: &[u8]) -> Output {
    common::bspq_reading(std::iter::once("trace").chain(args.iter().copied()), input).0
}

/// `bspq trace --server` prints what offline `trace` prints, byte for
/// byte on stdout and stderr, with the same exit status, also when the
/// server rejects queries: a line naming a hull the world does not have
/// gets offline's error line (its input line number as `query_index`), and
/// the other lines of its batch are answered (the whole batch used to get
/// nothing, and the error the index within the request).
#[test]
fn trace_over_grpc_gives_offline_lines_when_the_server_rejects_some() {
    let dir = tempfile::tempdir().expect("temp dir");
    let world = compile_into(
        dir.path(),
        "q3dm6ish",
        "q3h.bspq",
        &["--hull", "stand=-15,-15,-24,15,15,32"],
    );
    let mut input = Vec::new();
    for (i, query) in common::load_set("q3dm6ish", "boxes", true)
        .queries
        .iter()
        .take(200)
        .enumerate()
    {
        let q: serde_json::Value = serde_json::from_str(query).expect("JSON");
        let (start, end) = (&q["start"], &q["end"]);
        if i % 7 == 0 {
            let hull = if i % 2 == 0 { "crouch" } else { "stand" };
            let line = serde_json::json!({"start": start, "end": end, "hull": hull});
            writeln!(input, "{line}").expect("write");
        }
        if i % 11 == 0 {
            writeln!(input, "{}", serde_json::json!({"point": start})).expect("write");
        }
        if i % 13 == 0 {
            let line = serde_json::json!({"start": start, "end": end, "any": true});
            writeln!(input, "{line}").expect("write");
        }
        if i % 50 == 0 {
            input.extend_from_slice(b"{not json\n\n\xff\xfe\n");
        }
        writeln!(input, "{query}").expect("write");
    }
    let mut server =
        common::server::BinaryServer::start(&["--worlds", dir.path().to_str().expect("utf-8")]);
    let url = server.grpc_url();
    for batch in ["1024", "7"] {
        let offline = trace_bytes(&["--world", &world, "--batch", batch], &input);
        let remote = trace_bytes(
            &["--server", &url, "--world", "q3h", "--batch", batch],
            &input,
        );
        let text = String::from_utf8_lossy(&offline.stdout);
        assert!(text.contains("\"code\":\"unknown_hull\""), "{text}");
        assert!(text.lines().count() > 200, "{text}");
        assert!(
            offline.stdout == remote.stdout,
            "batch {batch}:\n{text}\n---\n{}",
            String::from_utf8_lossy(&remote.stdout)
        );
        assert_eq!(stderr_of(&offline), stderr_of(&remote), "batch {batch}");
        assert_eq!(offline.status.code(), Some(1));
        assert_eq!(remote.status.code(), Some(1));
    }
    assert!(server.terminate().success());

    // A server that is not there: the cause of the failure, said once.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", closed.local_addr().expect("address"));
    drop(closed);
    let out = trace_bytes(&["--server", &url, "--world", "q3h"], b"");
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot connect to {url}: ")),
        "{stderr}"
    );
    assert_eq!(stderr.matches("connect error").count(), 1, "{stderr}");
}

/// A line that is not UTF-8 is a bad line like any other: `trace` answers
/// the lines around it and writes an error line in its place (it used to
/// stop at it and print nothing), and `check --queries` skips it.
#[test]
fn a_line_that_is_not_utf8_is_one_bad_line() {
    let map = common::map_path("q3dm6ish");
    let input = b"{\"point\":[0,0,0]}\n\xff\xfe\n{\"start\":[0,0,64],\"end\":[64,0,64]}\r\n";
    let out = common::bspq_with_input(
        [
            std::ffi::OsStr::new("trace"),
            "--world".as_ref(),
            map.as_os_str(),
        ],
        input,
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert!(matches!(
        serde_json::from_str::<Answer>(&lines[0]),
        Ok(Answer::Point(_))
    ));
    let error: serde_json::Value = serde_json::from_str(&lines[1]).expect("JSON");
    assert_eq!(error["error"]["code"], "malformed_query", "{}", lines[1]);
    assert_eq!(error["error"]["query_index"], 1, "{}", lines[1]);
    assert!(matches!(
        serde_json::from_str::<Answer>(&lines[2]),
        Ok(Answer::Trace(_))
    ));
    assert!(stderr_of(&out).contains("line 2: the line is not valid UTF-8"));

    let dir = tempfile::tempdir().expect("temp dir");
    let queries = dir.path().join("queries.jsonl");
    std::fs::write(&queries, input).expect("write");
    let out = bspq([
        "check".as_ref(),
        "--world".as_ref(),
        map.as_os_str(),
        "--queries".as_ref(),
        queries.as_os_str(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", stderr_of(&out));
    assert!(
        text.starts_with("moves                                1 ("),
        "{text}"
    );
}

/// Sizes that would only exhaust memory are refused when the arguments are
/// parsed, with the range allowed: they used to abort on the allocation
/// (status 134) or panic on a capacity overflow.
#[test]
fn huge_counts_are_refused_with_their_range() {
    let map = common::map_path("q3dm6ish");
    let map = map.to_str().expect("utf-8");
    for (args, range) in [
        (
            vec!["trace", "--world", map, "--batch", "1000000000000"],
            "from 1 to 1048576",
        ),
        (
            vec!["trace", "--world", map, "--batch", "18446744073709551615"],
            "from 1 to 1048576",
        ),
        (
            vec!["trace", "--world", map, "--threads", "0"],
            "from 1 to 1024",
        ),
        (
            vec!["check", "--world", map, "--moves", "1000000000000"],
            "from 1 to 1000000",
        ),
        (
            vec![
                "bench",
                "--world",
                map,
                "--queries",
                map,
                "--runs",
                "1000000000000",
            ],
            "from 1 to 1000",
        ),
    ] {
        let out = bspq(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr_of(&out));
        assert!(stderr_of(&out).contains(range), "{}", stderr_of(&out));
    }
}

/// A `:member` after a file that is not a .pk3 archive is an error (it
/// used to be ignored and the file opened as a whole).
#[test]
fn a_member_of_a_file_that_is_no_archive_is_an_error() {
    let world = format!(
        "{}:maps/x.bsp",
        common::map_path("oa_ctf2").to_str().expect("utf-8")
    );
    let out = bspq(["inspect", "--world", &world]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out)
            .contains("oa_ctf2.bsp is not a .pk3 archive, so it has no member maps/x.bsp"),
        "{}",
        stderr_of(&out)
    );
}

/// A world that is not a regular file is held to the size limit as it is
/// read: `/dev/zero` used to be read without end.
#[test]
fn a_world_read_from_a_device_is_held_to_the_size_limit() {
    if !std::path::Path::new("/dev/zero").exists() {
        common::skip(
            "a_world_read_from_a_device_is_held_to_the_size_limit",
            "this system has no /dev/zero",
        );
        return;
    }
    let out = bspq(["inspect", "--world", "/dev/zero"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("/dev/zero is larger than the limit of 536870912 bytes"),
        "{}",
        stderr_of(&out)
    );
}

/// `bspq inspect FILE` prints what `--world FILE` prints.
#[test]
fn inspect_takes_the_world_alone_or_with_world() {
    let dir = tempfile::tempdir().expect("temp dir");
    let world = compile_into(dir.path(), "q3dm6ish", "q3.bspq", &["--reproducible"]);
    let alone = bspq(["inspect", &world]);
    let flagged = bspq(["inspect", "--world", &world]);
    assert!(alone.status.success(), "{}", stderr_of(&alone));
    let text = |out: &Output| {
        // Everything but the load time.
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.contains(" ms"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(text(&alone).contains("world            q3dm6ish"));
    assert_eq!(text(&alone), text(&flagged));
    let both = bspq(["inspect", &world, "--world", &world]);
    assert_eq!(both.status.code(), Some(2));
    let neither = bspq(["inspect"]);
    assert_eq!(neither.status.code(), Some(2));
}

/// `bspq compile` names the file it cannot read once (it used to say
/// "cannot read X: cannot read X: …").
#[test]
fn compile_names_a_missing_source_once() {
    let out = bspq([
        "compile",
        "/nonexistent/nomap.bsp",
        "-o",
        "/nonexistent/x.bspq",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = stderr_of(&out);
    assert_eq!(
        stderr.matches("/nonexistent/nomap.bsp").count(),
        1,
        "{stderr}"
    );
}

/// `bspq load` over HTTP checks what it can before the clock starts, as the
/// gRPC transports do: an address that is none (a usage error, status 2),
/// a server that is not there and a line that is not a query each stop it
/// with one message (it used to count millions of failed requests and print
/// their latencies).
#[test]
fn load_over_http_refuses_a_bad_url_a_missing_server_and_bad_lines() {
    let dir = tempfile::tempdir().expect("temp dir");
    let good = dir.path().join("good.jsonl");
    std::fs::write(&good, "{\"start\":[0,0,0],\"end\":[0,0,-64]}\n").expect("write");
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"start\":[0,0,0],\"end\":[0,0,-64]}\n{\"start\":[0,0\n",
    )
    .expect("write");
    // A port nobody listens on: bound, then released.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let http = format!("http://{closed}");
    let bare = closed.to_string();
    for (url, queries, needle, status) in [
        ("ftp://127.0.0.1:21", &good, "give HOST:PORT", 2),
        (bare.as_str(), &good, "cannot connect to", 1),
        (http.as_str(), &good, "cannot connect to", 1),
        (http.as_str(), &bad, "query line 2", 1),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_bspq"))
            .args([
                "load",
                "--world",
                "w",
                "--duration",
                "1",
                "--url",
                url,
                "--queries",
            ])
            .arg(queries)
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(status), "{url}: {stderr}");
        assert_eq!(stderr.matches(needle).count(), 1, "{url}: {stderr}");
        assert!(out.stdout.is_empty(), "{url}: no report");
    }
}

/// A query file of one ray, for the commands that send queries to a server.
fn one_ray_file(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("ray.jsonl");
    std::fs::write(&path, "{\"start\":[0,0,0],\"end\":[0,0,-64]}\n").expect("write");
    path
}

/// Every subcommand that talks to a server takes its address as HOST:PORT
/// or http://HOST:PORT (`trace --server` and `load --url` used to refuse
/// the bare address `health --grpc` takes), and refuses anything else as
/// a usage error naming the forms, before it connects.
#[test]
fn server_addresses_are_host_port_or_a_url_everywhere() {
    let dir = tempfile::tempdir().expect("temp dir");
    let queries = one_ray_file(dir.path());
    let server = common::server::BinaryServer::start(&["--worlds", "/nonexistent-bspq-worlds"]);
    let (http_url, grpc_url) = (server.http_url(), server.grpc_url());
    let input = b"{\"point\":[0,0,0]}\n{\"start\":[0,0,0],\"end\":[0,0,-64]}\n";
    let map = common::map_path("q3dm6ish");
    let offline = trace_bytes(&["--world", map.to_str().expect("utf-8")], input);
    assert!(offline.status.success(), "{}", stderr_of(&offline));
    for address in [server.grpc.as_str(), grpc_url.as_str()] {
        let remote = trace_bytes(&["--server", address, "--world", "q3dm6ish"], input);
        assert!(remote.status.success(), "{address}: {}", stderr_of(&remote));
        assert_eq!(remote.stdout, offline.stdout, "{address}");

        let health = bspq(["health", "--grpc", address]);
        assert!(health.status.success(), "{address}: {}", stderr_of(&health));
    }
    for (transport, addresses) in [
        ("http", [server.http.as_str(), http_url.as_str()]),
        ("grpc-unary", [server.grpc.as_str(), grpc_url.as_str()]),
        ("grpc-stream", [server.grpc.as_str(), grpc_url.as_str()]),
    ] {
        for address in addresses {
            let out = Command::new(env!("CARGO_BIN_EXE_bspq"))
                .args(["load", "--transport", transport, "--url", address])
                .args(["--world", "q3dm6ish", "--concurrency", "1"])
                .args(["--duration", "20", "--max-requests", "3", "--json"])
                .arg("--queries")
                .arg(&queries)
                .output()
                .expect("bspq load runs");
            let what = format!("{transport} {address}: {}", stderr_of(&out));
            assert!(out.status.success(), "{what}");
            let stdout = String::from_utf8_lossy(&out.stdout);
            let summary: serde_json::Value =
                serde_json::from_str(stdout.lines().last().expect("a summary")).expect("JSON");
            assert_eq!(summary["requests"], 3, "{what}{summary}");
            assert_eq!(summary["errors"], 0, "{what}{summary}");
        }
    }
    let queries = queries.to_str().expect("utf-8");
    for args in [
        vec!["trace", "--world", "q3dm6ish", "--server", "127.0.0.1"],
        vec![
            "trace",
            "--world",
            "q3dm6ish",
            "--server",
            "ftp://127.0.0.1:1",
        ],
        vec!["health", "--grpc", "http://127.0.0.1:1/v1"],
        vec![
            "load",
            "--world",
            "w",
            "--queries",
            queries,
            "--url",
            "h:port",
        ],
    ] {
        let out = bspq(&args);
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(
            stderr.matches("give HOST:PORT").count(),
            1,
            "{args:?}: {stderr}"
        );
    }
}

/// `bspq load` against a world the server does not have stops at the first
/// 404 (HTTP) or NOT_FOUND (gRPC) with the server's reason once and status
/// 1, on every transport: it used to fail every request for `--duration`.
#[test]
fn load_stops_at_the_first_unknown_world_answer() {
    let dir = tempfile::tempdir().expect("temp dir");
    let queries = one_ray_file(dir.path());
    let server = common::server::BinaryServer::start(&["--worlds", "/nonexistent-bspq-worlds"]);
    for (transport, address) in [
        ("http", &server.http),
        ("grpc-unary", &server.grpc),
        ("grpc-stream", &server.grpc),
    ] {
        let started = std::time::Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_bspq"))
            .args(["load", "--transport", transport, "--url", address])
            .args(["--world", "nope", "--concurrency", "2"])
            .args(["--duration", "60", "--max-requests", "100000", "--json"])
            .arg("--queries")
            .arg(&queries)
            .output()
            .expect("bspq load runs");
        let elapsed = started.elapsed();
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{transport}: {stderr}");
        assert!(
            elapsed < std::time::Duration::from_secs(20),
            "{transport}: ran {elapsed:?}"
        );
        assert_eq!(
            stderr.matches("no world named \"nope\"").count(),
            1,
            "{transport}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{transport}: no report");
    }
}

/// `bspq bench` shows what it is timing on standard error when that is a
/// terminal (here `script`'s pseudo-terminal), and nothing when it is not;
/// standard output holds the JSON object alone either way.
#[test]
fn bench_shows_progress_on_a_terminal_only() {
    let dir = tempfile::tempdir().expect("temp dir");
    let queries = one_ray_file(dir.path());
    let bench = format!(
        "'{}' bench --json --no-parry --no-shapes --runs=1 --min-run-ms=300 --world '{}' --queries '{}'",
        env!("CARGO_BIN_EXE_bspq"),
        common::map_path("q3dm6ish").display(),
        queries.display()
    );
    let json_alone = |stdout: &[u8]| {
        let text = String::from_utf8_lossy(stdout).into_owned();
        assert_eq!(text.lines().count(), 1, "{text}");
        let report: serde_json::Value = serde_json::from_str(&text).expect("JSON alone");
        assert_eq!(report["queries"], 1, "{report}");
    };

    let piped = Command::new("sh")
        .args(["-c", &bench])
        .stdin(Stdio::null())
        .output()
        .expect("sh runs");
    assert!(piped.status.success(), "{}", stderr_of(&piped));
    json_alone(&piped.stdout);
    let stderr = stderr_of(&piped);
    assert!(!stderr.contains("timing"), "{stderr}");
    assert!(
        !stderr.contains('\r') && !stderr.contains('\x1b'),
        "{stderr:?}"
    );

    // Standard error on script's terminal, standard output to a file.
    let stdout_file = dir.path().join("stdout.json");
    let on_terminal = Command::new("script")
        .args(["-q", "-e", "-c"])
        .arg(format!("{bench} > '{}'", stdout_file.display()))
        .arg("/dev/null")
        .stdin(Stdio::null())
        .output()
        .expect("script (util-linux) runs");
    let terminal = String::from_utf8_lossy(&on_terminal.stdout);
    assert!(on_terminal.status.success(), "{terminal}");
    assert!(terminal.contains("timing single traces"), "{terminal:?}");
    json_alone(&std::fs::read(&stdout_file).expect("stdout file"));
}

/// A server that is not there: `health --grpc` and `load` over gRPC say
/// why once (health used to print only "transport error", load
/// "tcp connect error" twice), with status 1.
#[test]
fn connect_errors_name_their_cause_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let queries = one_ray_file(dir.path());
    // A port nobody listens on: bound, then released.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .to_string();
    let health = bspq(["health", "--grpc", &closed, "--timeout", "5"]);
    let said = String::from_utf8_lossy(&health.stdout);
    assert_eq!(health.status.code(), Some(1), "{said}");
    assert_eq!(said.matches("Connection refused").count(), 1, "{said}");
    for transport in ["grpc-unary", "grpc-stream"] {
        let out = Command::new(env!("CARGO_BIN_EXE_bspq"))
            .args(["load", "--transport", transport, "--url", &closed])
            .args(["--world", "w", "--duration", "5", "--queries"])
            .arg(&queries)
            .output()
            .expect("bspq load runs");
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert_eq!(stderr.matches("connect error").count(), 1, "{stderr}");
        assert_eq!(stderr.matches("Connection refused").count(), 1, "{stderr}");
        assert!(out.stdout.is_empty(), "{transport}: no report");
    }
}
