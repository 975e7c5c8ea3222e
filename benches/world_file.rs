//! Compile and load times of world files.
//!
//! Uses the committed maps by default; set `BSPQ_BENCH_MAPS=DIR` to time every
//! `.bsp` in another folder (e.g. a game's map folder).

use bspq::compile::CompileOptions;
use bspq::map::{compile_source, open_compiled_file, Map};
use bspq::world::format;
use criterion::{BatchSize, Criterion};
use std::path::PathBuf;
use std::time::Duration;

fn maps() -> Vec<PathBuf> {
    let dir = std::env::var_os("BSPQ_BENCH_MAPS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/maps"));
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    out.retain(|p| p.extension().is_some_and(|e| e == "bsp"));
    out.sort();
    out
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(20)
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(300))
        .configure_from_args();
    let scratch_dir = std::env::temp_dir().join(format!("bspq-bench-{}", std::process::id()));
    if std::fs::create_dir_all(&scratch_dir).is_err() {
        eprintln!("world_file bench: cannot create {}", scratch_dir.display());
        return;
    }
    for path in maps() {
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Ok(source) = std::fs::read(&path) else {
            continue;
        };
        let options = CompileOptions::default();
        let Ok(data) = compile_source(&source, &name, &options) else {
            eprintln!("world_file bench: {name} does not compile");
            continue;
        };
        let file = format::write(&data);
        let file_path = scratch_dir.join(format!("{name}.bspq"));
        if std::fs::write(&file_path, &file).is_err() {
            continue;
        }
        eprintln!(
            "{name}: source {} bytes, compiled file {} bytes",
            source.len(),
            file.len()
        );
        c.bench_function(&format!("compile/{name}"), |b| {
            b.iter(|| compile_source(&source, &name, &options).map(|d| d.nodes.len()))
        });
        c.bench_function(&format!("load_validate_bytes/{name}"), |b| {
            b.iter_batched(
                || (),
                |_| Map::from_compiled_bytes(&file).map(|w| w.view().nodes.len()),
                BatchSize::SmallInput,
            )
        });
        c.bench_function(&format!("open_file/{name}"), |b| {
            b.iter(|| open_compiled_file(&file_path).map(|w| w.map(|w| w.view().nodes.len())))
        });
    }
    let _ = std::fs::remove_dir_all(&scratch_dir);
    c.final_summary();
}
