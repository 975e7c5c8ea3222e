//! Solid cores (`bspq::trace::accel::cores`), on the committed maps: each brush's
//! core clears every side of its brush by the margin (checked here in f64,
//! independently of the builder's own check), each node's cores lie inside
//! their children's bounds, and any-hit, which stops at a core, still
//! answers exactly `fraction < 1` of the BSP walk's full trace for moves
//! aimed through, past and along the cores from just outside their brushes.
//! And on single brushes: a box's core is the box less the margin, a thin
//! slab has none, a wedge's clears its slope.

use crate::common;

use bspq::contents::{CONTENTS_SOLID, MASK_PLAYERSOLID, MASK_SHOT};
use bspq::margins::CORE_MARGIN;
use bspq::trace::accel::cores::{brush_core, core_clears};
use bspq::trace::Kernel as World;
use bspq::trace::{any_hit_with_stats, trace, Scratch, TraceQuery};
use common::{load_world, Rng, MAPS};
use glam::Vec3;

/// Brush `b`'s sides as (normal, distance) in f64.
fn sides(world: &World, b: usize) -> Vec<([f64; 3], f64)> {
    let brush = &world.brushes[b];
    world.brush_sides[brush.first_side as usize..][..brush.num_sides as usize]
        .iter()
        .map(|s| {
            let p = &world.planes[s.plane as usize];
            (p.normal.map(f64::from), f64::from(p.dist))
        })
        .collect()
}

#[test]
fn every_core_clears_its_brush_by_the_margin() {
    for map in MAPS {
        let loaded = load_world(map, true);
        let world = loaded.view();
        let (mut solid, mut cored) = (0, 0);
        for (b, brush) in world.brushes.iter().enumerate() {
            if brush.contents & CONTENTS_SOLID == 0 {
                continue;
            }
            solid += 1;
            let sides = sides(&world, b);
            let planes: Vec<[f32; 4]> = sides
                .iter()
                .map(|(n, d)| [n[0] as f32, n[1] as f32, n[2] as f32, *d as f32])
                .collect();
            let Some([lo, hi]) = brush_core(&planes, [brush.mins, brush.maxs]) else {
                continue;
            };
            cored += 1;
            // All eight corners, every side.
            for corner in 0..8 {
                let p: [f64; 3] = std::array::from_fn(|k| {
                    f64::from(if corner >> k & 1 == 0 { lo[k] } else { hi[k] })
                });
                for &(n, d) in &sides {
                    let dist = n[0] * p[0] + n[1] * p[1] + n[2] * p[2] - d;
                    assert!(
                        dist <= -f64::from(CORE_MARGIN),
                        "{map}: brush {b}'s core {lo:?}..{hi:?} is {dist} from a side"
                    );
                }
            }
        }
        // Most solid brushes of a real map are thick enough for one.
        assert!(
            cored * 2 > solid,
            "{map}: only {cored} of {solid} solid brushes have a core"
        );
    }
}

#[test]
fn node_cores_lie_inside_their_children() {
    for map in MAPS {
        let loaded = load_world(map, true);
        let world = loaded.view();
        let bvh = &world.accel.bvh;
        assert_eq!(bvh.brush_cores.len(), bvh.brushes.len(), "{map}");
        assert_eq!(bvh.combined_cores.len(), bvh.combined.len(), "{map}");
        let mut lanes = 0;
        assert_eq!(bvh.combined_whole_cores.len(), bvh.combined_whole.len());
        // The brushes' tree (any-hit rays) and the ones over brushes and
        // patches (any-hit boxes).
        let brushes = bvh.brushes.iter().zip(&bvh.brush_cores);
        let combined = bvh.combined.iter().zip(&bvh.combined_cores);
        let whole = bvh.combined_whole.iter().zip(&bvh.combined_whole_cores);
        for (node, cores) in brushes.chain(combined).chain(whole) {
            for slot in 0..4 {
                if cores.contents[slot] == 0 {
                    continue;
                }
                lanes += 1;
                assert_ne!(cores.contents[slot] & node.contents[slot], 0, "{map}");
                for axis in 0..3 {
                    let (lo, hi) = (cores.min[axis][slot], cores.max[axis][slot]);
                    assert!(lo <= hi, "{map}: empty core");
                    assert!(node.min[axis][slot] <= lo && hi <= node.max[axis][slot]);
                    assert!(cores.owner_min[axis][slot] <= lo && hi <= cores.owner_max[axis][slot]);
                }
            }
        }
        assert!(lanes > 200, "{map}: only {lanes} lanes have a core");
    }
}

#[test]
fn any_hit_through_cores_is_a_full_trace_below_one() {
    let mut rng = Rng::new(0x5eed_c0de);
    for map in MAPS {
        let loaded = load_world(map, true);
        let world = loaded.view();
        let reference = world.reference();
        let bvh = &world.accel.bvh;
        let mut scratch = Scratch::new();
        let (mut moves, mut hits, mut stops) = (0, 0, 0);
        for cores in bvh.brush_cores.iter().step_by(3) {
            for slot in 0..4 {
                if cores.contents[slot] == 0 {
                    continue;
                }
                let lane = |v: &[glam::Vec4; 3]| Vec3::new(v[0][slot], v[1][slot], v[2][slot]);
                let (core_lo, core_hi) = (lane(&cores.min), lane(&cores.max));
                let (owner_lo, owner_hi) = (lane(&cores.owner_min), lane(&cores.owner_max));
                for i in 0..12 {
                    let half = match i % 3 {
                        0 => Vec3::ZERO,
                        1 => Vec3::new(15.0, 15.0, 28.0),
                        _ => Vec3::new(4.0, 4.0, 4.0),
                    };
                    // A start just outside the owner's cull box grown by the
                    // box (or, one move in four, just inside it), beyond
                    // one face.
                    let axis = (rng.unit() * 3.0) as usize % 3;
                    let mut start = core_lo + (core_hi - core_lo) * random_vec(&mut rng);
                    let off = if i % 4 == 0 { -0.5 } else { rng.unit() * 4.0 };
                    start[axis] = if rng.unit() < 0.5 {
                        owner_hi[axis] + half[axis] + off
                    } else {
                        owner_lo[axis] - half[axis] - off
                    };
                    // An end in the core grown by the box, or near one of
                    // its corners, inside or out by up to 2 units, or
                    // through to the far side.
                    let grown_lo = core_lo - half;
                    let grown_hi = core_hi + half;
                    let end = match i % 4 {
                        0 | 1 => grown_lo + (grown_hi - grown_lo) * random_vec(&mut rng),
                        2 => {
                            let corner = Vec3::select(
                                glam::BVec3::new(
                                    rng.unit() < 0.5,
                                    rng.unit() < 0.5,
                                    rng.unit() < 0.5,
                                ),
                                grown_lo,
                                grown_hi,
                            );
                            corner + (random_vec(&mut rng) - 0.5) * 4.0
                        }
                        _ => start + (grown_lo + grown_hi - start * 2.0) * 1.5,
                    };
                    let mask = if i % 2 == 0 {
                        MASK_SHOT
                    } else {
                        MASK_PLAYERSOLID
                    };
                    let q = TraceQuery::boxed(start, end, -half, half, mask).unwrap();
                    let want = trace(&reference, &q, &mut scratch).fraction < 1.0;
                    let (got, stats) = any_hit_with_stats(&world, &q, &mut scratch);
                    assert_eq!(got, want, "{map}: {q:?}");
                    moves += 1;
                    hits += want as usize;
                    stops += stats.core_stops as usize;
                }
            }
        }
        // The shortcut is taken, and not always.
        assert!(
            stops > moves / 4,
            "{map}: {stops} core stops in {moves} moves"
        );
        assert!(hits < moves, "{map}: every move hit");
    }
}

fn random_vec(rng: &mut Rng) -> Vec3 {
    Vec3::new(rng.unit(), rng.unit(), rng.unit())
}

/// The six axial sides of the box `[0, 0, 0]..size`.
fn box_planes(size: [f32; 3]) -> Vec<[f32; 4]> {
    (0..3)
        .flat_map(|axis| {
            let mut up = [0.0; 4];
            up[axis] = 1.0;
            up[3] = size[axis];
            let mut down = [0.0; 4];
            down[axis] = -1.0;
            [up, down]
        })
        .collect()
}

/// An axial box brush's core is the box less the margin on every side.
#[test]
fn box_brush_core_is_the_box_less_the_margin() {
    let planes = box_planes([64.0, 32.0, 8.0]);
    let core = brush_core(&planes, [[0.0; 3], [64.0, 32.0, 8.0]]).expect("a core");
    for (got, want) in core.iter().flatten().zip([1.0, 1.0, 1.0, 63.0, 31.0, 7.0]) {
        assert!((got - want).abs() < 1e-3, "{core:?}");
    }
    assert!(core_clears(&planes, core));
}

/// A brush thinner than twice the margin has none.
#[test]
fn thin_brush_has_no_core() {
    let planes = box_planes([64.0, 64.0, 1.5]);
    assert_eq!(brush_core(&planes, [[0.0; 3], [64.0, 64.0, 1.5]]), None);
}

/// A wedge (a ramp under a sloped top): the core clears the slope.
#[test]
fn wedge_core_clears_the_slope() {
    let s = std::f32::consts::FRAC_1_SQRT_2;
    let planes = [
        [1.0, 0.0, 0.0, 128.0],
        [-1.0, 0.0, 0.0, 0.0],
        [0.0, 1.0, 0.0, 64.0],
        [0.0, -1.0, 0.0, 0.0],
        [0.0, 0.0, -1.0, 0.0],
        // z <= 128 - x
        [s, 0.0, s, 128.0 * s],
    ];
    let core = brush_core(&planes, [[0.0; 3], [128.0, 64.0, 128.0]]).expect("a core");
    assert!(core_clears(&planes, core));
    let [lo, hi] = core;
    assert!((hi[0] - lo[0]) * (hi[2] - lo[2]) > 1000.0, "{core:?}");
}
