//! Kernel micro-benchmarks: rays, box sweeps and point contents on the
//! committed test maps, with queries from a seeded generator (no data files
//! besides the maps).
//!
//! `cargo bench --bench kernel` (add `-- rays` etc. to filter).

use bspq::compile::CompileOptions;
use bspq::contents::{MASK_PLAYERSOLID, MASK_SOLID};
use bspq::map::{open_world, WorldSpec};
use bspq::math::Vec3;
use bspq::trace::Kernel as World;
use bspq::trace::{
    any_hit, any_hit_batch, point_contents, trace, trace_batch, BatchOptions, BatchResults,
    Scratch, TraceBatch, TraceQuery,
};
use criterion::{Criterion, Throughput};
use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

const MAPS: [&str; 2] = ["q3dm6ish", "oa_ctf2"];
/// Queries per set; one criterion iteration runs the whole set.
const COUNT: usize = 2048;
const SEED: u64 = 0x5eed_b5b0_2024_0001;
const PLAYER_MINS: Vec3 = Vec3::new(-15.0, -15.0, -24.0);
const PLAYER_MAXS: Vec3 = Vec3::new(15.0, 15.0, 32.0);

/// The bench's query sets, the same on every run and machine (fastrand's
/// seeded generator, as the CLI's workloads use).
struct Rng(fastrand::Rng);

impl Rng {
    fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.0.f32()
    }

    fn point_in(&mut self, lo: Vec3, hi: Vec3) -> Vec3 {
        Vec3::new(
            self.range(lo.x, hi.x),
            self.range(lo.y, hi.y),
            self.range(lo.z, hi.z),
        )
    }

    /// A uniformly distributed unit vector.
    fn direction(&mut self) -> Vec3 {
        loop {
            let v = Vec3::new(
                self.range(-1.0, 1.0),
                self.range(-1.0, 1.0),
                self.range(-1.0, 1.0),
            );
            let l = v.length_squared();
            if l > 1e-4 && l <= 1.0 {
                return v / l.sqrt();
            }
        }
    }
}

fn bounds(world: &World) -> (Vec3, Vec3) {
    (Vec3::from_array(world.mins), Vec3::from_array(world.maxs))
}

/// Traces from open space (rejection-sampled, so most traces do real work)
/// in a random direction over 16..1024 units (boxes: 8..512).
fn traces(world: &World, rng: &mut Rng, mins: Vec3, maxs: Vec3, mask: u32) -> Vec<TraceQuery> {
    let (lo, hi) = bounds(world);
    let max_len = if mins == maxs { 1024.0 } else { 512.0 };
    let mut scratch = Scratch::new();
    let mut out = Vec::with_capacity(COUNT);
    let mut tries = 0usize;
    while out.len() < COUNT && tries < COUNT * 1000 {
        tries += 1;
        let start = rng.point_in(lo, hi);
        let Ok(probe) = TraceQuery::boxed(start, start, mins, maxs, mask) else {
            continue;
        };
        if trace(world, &probe, &mut scratch).startsolid {
            continue;
        }
        let len = rng.range(max_len / 64.0, max_len);
        if let Ok(moved) = probe.moved(start, start + rng.direction() * len, mask) {
            out.push(moved);
        }
    }
    out
}

fn points(world: &World, rng: &mut Rng) -> Vec<Vec3> {
    let (lo, hi) = bounds(world);
    (0..COUNT).map(|_| rng.point_in(lo, hi)).collect()
}

fn bench_map(c: &mut Criterion, name: &str, world: &World) {
    let mut rng = Rng(fastrand::Rng::with_seed(SEED));
    let rays = traces(world, &mut rng, Vec3::ZERO, Vec3::ZERO, MASK_SOLID);
    let boxes = traces(world, &mut rng, PLAYER_MINS, PLAYER_MAXS, MASK_PLAYERSOLID);
    let pts = points(world, &mut rng);

    let mut group = c.benchmark_group(name);
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let mut scratch = Scratch::new();
    for (kind, set) in [("rays", &rays), ("boxes", &boxes)] {
        if set.is_empty() {
            continue;
        }
        group.throughput(Throughput::Elements(set.len() as u64));
        group.bench_function(kind, |b| {
            b.iter(|| {
                for q in set.iter() {
                    black_box(trace(world, black_box(q), &mut scratch));
                }
            })
        });
    }
    // The reference walk (the file's nodes and planes, no kernel tree).
    let reference = world.reference();
    if !rays.is_empty() {
        group.throughput(Throughput::Elements(rays.len() as u64));
        group.bench_function("rays_reference_walk", |b| {
            b.iter(|| {
                for q in rays.iter() {
                    black_box(trace(&reference, black_box(q), &mut scratch));
                }
            })
        });
        group.bench_function("rays_any_hit", |b| {
            b.iter(|| {
                for q in rays.iter() {
                    black_box(any_hit(world, black_box(q), &mut scratch));
                }
            })
        });
        let starts: Vec<Vec3> = rays.iter().map(|q| q.start()).collect();
        let ends: Vec<Vec3> = rays.iter().map(|q| q.end()).collect();
        let batch = TraceBatch::rays(&starts, &ends, MASK_SOLID).unwrap();
        let mut out = BatchResults::default();
        let mut hits = Vec::new();
        for threads in [1, 2] {
            let options = BatchOptions::with_threads(threads);
            group.bench_function(format!("rays_batch_{threads}_threads"), |b| {
                b.iter(|| trace_batch(world, &batch, &options, &mut out))
            });
            group.bench_function(format!("rays_any_hit_batch_{threads}_threads"), |b| {
                b.iter(|| any_hit_batch(world, &batch, &options, &mut hits))
            });
        }
    }
    group.throughput(Throughput::Elements(pts.len() as u64));
    group.bench_function("points", |b| {
        b.iter(|| {
            for p in &pts {
                black_box(point_contents(world, black_box(*p)));
            }
        })
    });
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/maps");
    for name in MAPS {
        let path = dir.join(format!("{name}.bsp"));
        let spec = WorldSpec::parse(&path.to_string_lossy());
        match open_world(&spec, &CompileOptions::default()) {
            Ok(world) => bench_map(&mut c, name, &world.view()),
            Err(err) => eprintln!("kernel bench: skipping {}: {err}", path.display()),
        }
    }
    c.final_summary();
}
