//! `bspq trace`: JSON query lines in, answer lines out.

use super::WorldArgs;
use bspq::query::{answer, error_json, QueryLine};
use bspq::trace::Scratch;
use clap::Args;
use std::io::{BufRead, BufWriter, Write};
use std::process::ExitCode;

#[derive(Args)]
pub struct TraceArgs {
    #[command(flatten)]
    world: WorldArgs,
}

pub fn run(args: TraceArgs) -> anyhow::Result<ExitCode> {
    let loaded = args.world.open()?;
    let world = loaded.view();
    let mut scratch = Scratch::new();
    let stdin = std::io::stdin().lock();
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut failed = 0usize;
    for (index, line) in stdin.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        match QueryLine::parse(&line).and_then(|q| q.validate()) {
            Ok(query) => writeln!(out, "{}", answer(&world, &mut scratch, &query).to_json())?,
            Err(err) => {
                failed += 1;
                eprintln!("bspq: line {}: {err}", index + 1);
                writeln!(out, "{}", error_json(&err, index))?;
            }
        }
    }
    out.flush()?;
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
