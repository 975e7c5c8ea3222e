//! Inputs the fuzzers (fuzz/) found, kept in `tests/data/fuzz-regressions/`:
//! each must give an error or a valid world, never a panic, and a source that
//! compiles must give a world that passes the loader's validation.

use crate::common;

use bspq::compile::CompileOptions;
use bspq::map::{compile_source, world_from_bytes, Map};
use bspq::math::Vec3;
use bspq::source::{q3bsp, Q3Bsp};
use bspq::trace::{point_contents, trace, Scratch, TraceQuery};
use std::panic::{catch_unwind, AssertUnwindSafe};

fn regressions() -> Vec<(String, Vec<u8>)> {
    let dir = common::data_dir().join("fuzz-regressions");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e != "md"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect()
}

#[test]
fn fuzz_findings_are_errors_or_valid_worlds() {
    let files = regressions();
    assert!(!files.is_empty());
    for (name, bytes) in files {
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            for curves in [true, false] {
                let options = CompileOptions {
                    curves,
                    ..Default::default()
                };
                if q3bsp::looks_like_ibsp(&bytes) {
                    if let Ok(data) = compile_source(&bytes, "fuzz", &options) {
                        if let Err(e) = Map::from_data(data) {
                            panic!("compiles to a world that fails validation: {e}");
                        }
                    }
                }
                if let Ok(world) = world_from_bytes(&bytes, "fuzz", &options) {
                    let world = world.view();
                    let mut scratch = Scratch::new();
                    for k in 0..8 {
                        let a = Vec3::new(k as f32 * 64.0 - 256.0, 16.0, 8.0);
                        let b = Vec3::new(-a.x, -a.y, 40.0);
                        let half = Vec3::splat(8.0 * (k % 2) as f32);
                        let q = TraceQuery::boxed(a, b, -half, half, u32::MAX).unwrap();
                        trace(&world, &q, &mut scratch);
                        point_contents(&world, a);
                    }
                }
            }
        }));
        assert!(outcome.is_ok(), "{name} panicked");
    }
}

#[test]
fn a_plane_normal_that_is_not_unit_length_is_a_source_error() {
    let (_, bytes) = regressions()
        .into_iter()
        .find(|(n, _)| n == "q3bsp-non-unit-plane-normal.bsp")
        .unwrap();
    let err = Q3Bsp::parse(&bytes).unwrap_err().to_string();
    assert!(err.contains("not unit length"), "{err}");
}
