//! `bspq conformance`: match rates against reference answers.

use super::WorldArgs;
use anyhow::Context;
use bspq::conformance::{mismatch, read_lines};
use bspq::query::{answer, Answer, QueryLine};
use bspq::trace::Scratch;
use clap::Args;
use std::collections::BTreeMap;
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
    /// Query sets to run (default: rays, boxes, points, extras).
    #[arg(long, value_delimiter = ',')]
    sets: Vec<String>,
    /// How many mismatches to print per set.
    #[arg(long, default_value_t = 5)]
    show: usize,
    /// Exit non-zero unless every answer matches.
    #[arg(long)]
    strict: bool,
}

fn find(dir: &Path, stem: &str) -> Option<PathBuf> {
    [format!("{stem}.gz"), stem.to_owned()]
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.exists())
}

pub fn run(args: ConformanceArgs) -> anyhow::Result<ExitCode> {
    let loaded = args.world.open()?;
    let world = loaded.view();
    let sets = if args.sets.is_empty() {
        vec![
            "rays".into(),
            "boxes".into(),
            "points".into(),
            "extras".into(),
        ]
    } else {
        args.sets.clone()
    };
    let curves_tag = if args.world.no_curves {
        ".nocurves"
    } else {
        ""
    };
    let mut scratch = Scratch::new();
    let mut all_ok = true;
    let mut out = super::report_out();
    for set in &sets {
        let Some(queries_path) = find(&args.oracle, &format!("{set}.jsonl")) else {
            continue;
        };
        let expected_stem = if set == "points" {
            format!("{set}.expected.jsonl")
        } else {
            format!("{set}{curves_tag}.expected.jsonl")
        };
        let expected_path = find(&args.oracle, &expected_stem)
            .with_context(|| format!("no {expected_stem} in {}", args.oracle.display()))?;
        let kinds_name = if set == "extras" {
            "extras.kinds.txt"
        } else {
            "kinds.txt"
        };
        let kinds: Vec<String> = find(&args.oracle, kinds_name)
            .map(|p| read_lines(&p))
            .transpose()?
            .unwrap_or_default()
            .into_iter()
            .filter(|k| !k.starts_with('#'))
            .collect();
        // kinds.txt covers rays then boxes, in order.
        let kind_offset = if set == "boxes" {
            count_lines(&args.oracle, "rays.jsonl")?
        } else {
            0
        };
        let queries = read_lines(&queries_path)?;
        let expected = read_lines(&expected_path)?;
        anyhow::ensure!(
            queries.len() == expected.len(),
            "{set}: {} queries but {} answers",
            queries.len(),
            expected.len()
        );
        let mut failures: BTreeMap<String, usize> = BTreeMap::new();
        let mut shown = 0;
        let mut matched = 0;
        for (i, (q, e)) in queries.iter().zip(&expected).enumerate() {
            let query = QueryLine::parse(q)
                .and_then(|l| l.validate())
                .with_context(|| format!("{set} line {}", i + 1))?;
            let exp: Answer =
                serde_json::from_str(e).with_context(|| format!("{set} answer {}", i + 1))?;
            let got = answer(&world, &mut scratch, &query);
            match mismatch(&exp, &got) {
                None => matched += 1,
                Some(why) => {
                    let kind = kinds
                        .get(kind_offset + i)
                        .cloned()
                        .unwrap_or_else(|| set.clone());
                    *failures.entry(kind.clone()).or_default() += 1;
                    if shown < args.show {
                        shown += 1;
                        writeln!(
                            out,
                            "  {set}#{} [{kind}] {why}\n    query    {q}\n    expected {e}\n    got      {}", i + 1, got.to_json())?;
                        // Every brush the trace touches, clipped alone: shows ties at a glance.
                        if let bspq::query::Query::Trace(t) = &query {
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

fn count_lines(dir: &Path, stem: &str) -> anyhow::Result<usize> {
    Ok(find(dir, stem)
        .map(|p| read_lines(&p))
        .transpose()?
        .map_or(0, |l| l.len()))
}
