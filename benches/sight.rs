//! A 256 × 256 sight matrix side by side with the same 65 536 any-hit rays
//! asked one by one, in one run, the contenders alternated round by round
//! (the machine is shared: compare the ratios). Eyes are points in the open
//! of each committed map, seeded.
//!
//! `cargo bench --bench sight` (`-- ROUNDS` to change the 7 rounds).

use bspq::bots::{sight_matrix, Sight};
use bspq::compile::CompileOptions;
use bspq::map::{open_world, Map, WorldSpec};
use bspq::math::Vec3;
use bspq::trace::{any_hit, BatchOptions, Scratch, TraceQuery};
use bspq::MASK_SOLID;
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

const MAPS: [&str; 3] = ["q3dm6ish", "oa_ctf2", "aggressor"];
const EYES: usize = 256;
const SEED: u64 = 0x5eed_0043;

/// Points in the open (rejection-sampled in the map's bounds).
fn eyes(map: &Map) -> Vec<Vec3> {
    let mut rng = fastrand::Rng::with_seed(SEED);
    let (lo, hi) = map.bounds();
    let mut out = Vec::with_capacity(EYES);
    while out.len() < EYES {
        let p = lo + (hi - lo) * Vec3::new(rng.f32(), rng.f32(), rng.f32());
        if map.point_contents(p) & MASK_SOLID == 0 {
            out.push(p);
        }
    }
    out
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(7);
    let cores = BatchOptions::default().threads;
    println!(
        "sight matrix {EYES}×{EYES} vs {} single any-hit rays; {rounds} rounds, medians; {cores} cores",
        EYES * EYES
    );
    for name in MAPS {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/maps/{name}.bsp"));
        let map = open_world(
            &WorldSpec::parse(path.to_str().expect("utf-8 path")),
            &CompileOptions::default(),
        )
        .expect("committed map");
        let world = map.view();
        let eyes = eyes(&map);
        let sight = Sight::new(eyes.clone(), None, MASK_SOLID).expect("valid");
        let mut scratch = Scratch::new();
        let singles = |scratch: &mut Scratch| {
            let mut seen = 0usize;
            for &eye in &eyes {
                for &target in &eyes {
                    let ray = TraceQuery::ray(eye, target, MASK_SOLID).expect("valid");
                    seen += usize::from(!any_hit(&world, black_box(&ray), scratch));
                }
            }
            seen
        };
        let one = BatchOptions::single_thread();
        let all = BatchOptions::default();
        let mut times = [Vec::new(), Vec::new(), Vec::new()];
        let mut visible = [0usize; 3];
        for _ in 0..rounds {
            let t = Instant::now();
            visible[0] = singles(&mut scratch);
            times[0].push(t.elapsed());
            for (k, options) in [(1, &one), (2, &all)] {
                let t = Instant::now();
                let m = sight_matrix(&world, black_box(&sight), options);
                times[k].push(t.elapsed());
                visible[k] = m.visible.iter().filter(|v| **v).count();
            }
        }
        assert!(visible.iter().all(|&v| v == visible[0]), "{visible:?}");
        let [single, matrix_one, matrix_all] = times.map(median);
        let rate = |d: Duration| (EYES * EYES) as f64 / d.as_secs_f64() / 1e6;
        println!(
            "{name:>10}: single rays {:>7.1} ms ({:.2} M/s) | matrix 1 thread {:>7.1} ms ({:.2} M/s, ×{:.2}) | matrix {cores} threads {:>7.1} ms ({:.2} M/s, ×{:.2}) | {} of {} pairs visible",
            single.as_secs_f64() * 1e3,
            rate(single),
            matrix_one.as_secs_f64() * 1e3,
            rate(matrix_one),
            single.as_secs_f64() / matrix_one.as_secs_f64(),
            matrix_all.as_secs_f64() * 1e3,
            rate(matrix_all),
            single.as_secs_f64() / matrix_all.as_secs_f64(),
            visible[0],
            EYES * EYES
        );
    }
}
