//! `bspq conformance`: match rates against reference answers.

use super::WorldArgs;
use anyhow::Context;
use bspq::conformance::{mismatch, movement_mismatch, read_lines, ExpectedMove};
use bspq::query::{answer, Answer, QueryError, QueryLine, SceneStream};
use bspq::trace::{BatchOptions, Scratch};
use clap::Args;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args)]
pub struct ConformanceArgs {
    #[command(flatten)]
    world: WorldArgs,
    /// Oracle folder holding NAME.jsonl[.gz] and NAME[.nocurves].expected.jsonl[.gz].
    #[arg(long)]
    oracle: PathBuf,
    /// Query sets to run (default: those of rays, boxes, points, extras, scene, moves the folder holds).
    #[arg(long, value_delimiter = ',')]
    sets: Vec<String>,
    /// How many mismatches to print per set.
    #[arg(long, default_value_t = 5)]
    show: usize,
    /// Exit non-zero unless every answer matches.
    #[arg(long)]
    strict: bool,
}

/// The query sets of an oracle folder, run when `--sets` is not given.
const DEFAULT_SETS: [&str; 6] = ["rays", "boxes", "points", "extras", "scene", "moves"];

/// Sets whose lines are a stream (scene lines set the scene of the lines
/// after them; movement lines are requests, not plain traces).
const STREAMED_SETS: [&str; 2] = ["scene", "moves"];

fn find(dir: &Path, stem: &str) -> Option<PathBuf> {
    [format!("{stem}.gz"), stem.to_owned()]
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.exists())
}

fn read(path: &Path) -> anyhow::Result<Vec<String>> {
    read_lines(path).with_context(|| format!("cannot read {}", path.display()))
}

/// Each line's kind, by set: `kinds.txt` holds a `# rays` and a `# boxes`
/// section, `extras.kinds.txt` the extras' kinds (points have none).
fn read_kinds(oracle: &Path) -> anyhow::Result<HashMap<String, Vec<String>>> {
    let mut kinds: HashMap<String, Vec<String>> = HashMap::new();
    if let Some(path) = find(oracle, "kinds.txt") {
        let mut section = String::new();
        for line in read(&path)? {
            match line.strip_prefix('#') {
                Some(name) => section = name.trim().to_owned(),
                None => kinds.entry(section.clone()).or_default().push(line),
            }
        }
    }
    for set in ["extras", "scene", "moves"] {
        if let Some(path) = find(oracle, &format!("{set}.kinds.txt")) {
            kinds.insert(set.into(), read(&path)?);
        }
    }
    Ok(kinds)
}

pub fn run(args: ConformanceArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.oracle.is_dir(),
        "the oracle folder {} does not exist or is not a folder",
        args.oracle.display()
    );
    let loaded = args.world.open()?;
    let world = loaded.view();
    // A set named with --sets must be there; of the default sets, those there are run.
    let named = !args.sets.is_empty();
    let wanted: Vec<String> = if named {
        args.sets.clone()
    } else {
        DEFAULT_SETS.map(String::from).to_vec()
    };
    let mut sets = Vec::new();
    for set in wanted {
        match find(&args.oracle, &format!("{set}.jsonl")) {
            Some(path) => sets.push((set, path)),
            None if named => anyhow::bail!(
                "no {set}.jsonl or {set}.jsonl.gz in {}",
                args.oracle.display()
            ),
            None => {}
        }
    }
    anyhow::ensure!(
        !sets.is_empty(),
        "{} holds none of {} (.jsonl or .jsonl.gz)",
        args.oracle.display(),
        DEFAULT_SETS.join(", ")
    );
    // The answers for the curves setting the world has (a compiled world
    // file carries its own).
    let curves_tag = if world.info.curves { "" } else { ".nocurves" };
    let kinds = read_kinds(&args.oracle)?;
    let mut scratch = Scratch::new();
    let mut all_ok = true;
    let mut out = super::report_out();
    for (set, queries_path) in &sets {
        let expected_stem = if set == "points" {
            format!("{set}.expected.jsonl")
        } else {
            format!("{set}{curves_tag}.expected.jsonl")
        };
        let Some(expected_path) = find(&args.oracle, &expected_stem) else {
            // The reference's movement answers may exist for curves on only.
            if set == "moves" && !named {
                writeln!(out, "{set:7} skipped: no {expected_stem} in the folder")?;
                continue;
            }
            anyhow::bail!("no {expected_stem} in {}", args.oracle.display());
        };
        let kinds = kinds.get(set.as_str()).map_or(&[][..], Vec::as_slice);
        let queries = read(queries_path)?;
        let expected = read(&expected_path)?;
        anyhow::ensure!(
            queries.len() == expected.len(),
            "{set}: {} queries but {} answers",
            queries.len(),
            expected.len()
        );
        let mut failures: BTreeMap<String, usize> = BTreeMap::new();
        let mut shown = 0;
        let mut matched = 0;
        // Scene sets are a stream: `{"entities":[…]}` lines set the scene
        // of the queries after them.
        let mut stream = SceneStream::new(&loaded);
        let streamed: Vec<Result<Answer, QueryError>> = if STREAMED_SETS.contains(&set.as_str()) {
            let lines = queries.iter().map(|q| QueryLine::parse(q)).collect();
            stream.answer(lines, &BatchOptions::with_threads(1))
        } else {
            Vec::new()
        };
        for (i, (q, e)) in queries.iter().zip(&expected).enumerate() {
            let parse_error = || format!("{set} answer {}", i + 1);
            let exp: Expected = if set == "moves" {
                Expected::Move(serde_json::from_str(e).with_context(parse_error)?)
            } else {
                Expected::Answer(serde_json::from_str(e).with_context(parse_error)?)
            };
            let (query, got) = match streamed.get(i) {
                Some(got) => (None, got.clone()),
                None => {
                    let query = QueryLine::parse(q).and_then(|l| l.validate());
                    let got = match &query {
                        Ok(query) => Ok(answer(&world, &mut scratch, query)),
                        Err(e) => Err(e.clone()),
                    };
                    (query.ok(), got)
                }
            };
            let got = got.with_context(|| format!("{set} line {}", i + 1))?;
            match exp.mismatch(&got) {
                None => matched += 1,
                Some(why) => {
                    let kind = kinds.get(i).unwrap_or(set).clone();
                    *failures.entry(kind.clone()).or_default() += 1;
                    if shown < args.show {
                        shown += 1;
                        writeln!(
                            out,
                            "  {set}#{} [{kind}] {why}\n    query    {q}\n    expected {e}\n    got      {}", i + 1, got.to_json())?;
                        // Every brush the trace touches, clipped alone: shows ties at a glance.
                        if let Some(bspq::query::Query::Trace(t)) = &query {
                            for c in bspq::trace::brush_contacts(&world, t) {
                                let r = &c.result;
                                writeln!(
                                    out,
                                    "    contact  brush {} (source {}): fraction {} startsolid {} allsolid {} contents {:#x} surface_flags {:#x} normal {:?}",
                                    c.brush, c.source_index, r.fraction, r.startsolid, r.allsolid, r.contents, r.surface_flags, r.normal.to_array()
                                )?;
                            }
                        }
                    }
                }
            }
        }
        let total = queries.len();
        writeln!(
            out,
            "{set:7} {matched}/{total} matched ({:.3}%){}",
            100.0 * matched as f64 / total.max(1) as f64,
            if failures.is_empty() {
                String::new()
            } else {
                format!("  mismatches by kind: {failures:?}")
            }
        )?;
        all_ok &= matched == total;
    }
    Ok(if all_ok || !args.strict {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// A reference answer: of a trace or point, or of a movement line.
enum Expected {
    Answer(Answer),
    Move(ExpectedMove),
}

impl Expected {
    fn mismatch(&self, got: &Answer) -> Option<String> {
        match self {
            Expected::Answer(e) => mismatch(e, got),
            Expected::Move(e) => movement_mismatch(e, got),
        }
    }
}
