//! The direct clip of a one-brush entity ([`LoneBrush`]) against the
//! world's own trace of that one-brush world, fast path and reference walk:
//! the same answer, bit for bit, on random moves.

use super::boxes::box_model;
use crate::contents::{CONTENTS_BODY, CONTENTS_SOLID, MASK_PLAYERSOLID};
use crate::map::Map;
use crate::math::Vec3;
use crate::trace::{trace, Kernel, LoneBrush, Scratch, TraceQuery, TraceResult};

/// A result as bits (`endpos` left out: a scene sets it itself).
fn bits(r: &TraceResult) -> [u32; 12] {
    let [nx, ny, nz] = r.normal.to_array().map(f32::to_bits);
    [
        r.fraction.to_bits(),
        nx,
        ny,
        nz,
        r.dist.to_bits(),
        r.startsolid as u32,
        r.allsolid as u32,
        r.contents,
        r.surface_flags,
        0,
        0,
        0,
    ]
}

struct Moves {
    rng: fastrand::Rng,
}

impl Moves {
    /// Uniform in `lo..hi`, on a 1/8 grid half the time (faces and moves
    /// meet exactly, as map coordinates do).
    fn range(&mut self, lo: f32, hi: f32) -> f32 {
        let v = lo + (hi - lo) * self.rng.f32();
        if self.rng.bool() {
            (v * 8.0).round() / 8.0
        } else {
            v
        }
    }

    fn point(&mut self, lo: Vec3, hi: Vec3) -> Vec3 {
        Vec3::new(
            self.range(lo.x, hi.x),
            self.range(lo.y, hi.y),
            self.range(lo.z, hi.z),
        )
    }

    /// Case `case` near a brush within `lo..hi`: a ray or a box (symmetric
    /// or not), moving anywhere, along an axis, from or to a face (on it,
    /// 1/8 or 1/16 unit off), or not at all (a position test).
    fn query(&mut self, case: usize, lo: Vec3, hi: Vec3) -> TraceQuery {
        let margin = Vec3::splat(48.0);
        let (mins, maxs) = match case % 4 {
            0 => (Vec3::ZERO, Vec3::ZERO),
            1 => (Vec3::new(-15.0, -15.0, -24.0), Vec3::new(15.0, 15.0, 32.0)),
            _ => {
                let a = self.point(Vec3::splat(-20.0), Vec3::ZERO);
                let b = self.point(Vec3::ZERO, Vec3::splat(20.0));
                (a, b)
            }
        };
        let mut start = self.point(lo - margin, hi + margin);
        let mut end = self.point(lo - margin, hi + margin);
        match case % 7 {
            0 => end = start,
            1 => {
                end = start;
                let axis = self.rng.usize(..3);
                end[axis] = self.range(lo[axis] - 48.0, hi[axis] + 48.0);
            }
            2 | 3 => {
                // On a face of the brush's bounds, pushed out by the box.
                let axis = self.rng.usize(..3);
                let off = [0.0, 0.125, -0.125, 0.0625, -0.0625][self.rng.usize(..5)];
                let face = if self.rng.bool() {
                    hi[axis] - mins[axis] + off
                } else {
                    lo[axis] - maxs[axis] - off
                };
                if case % 7 == 2 {
                    start[axis] = face;
                    if self.rng.bool() {
                        // Sliding along the face.
                        end[axis] = face;
                    }
                } else {
                    end[axis] = face;
                }
            }
            _ => {}
        }
        let mask = match case % 11 {
            0 => CONTENTS_SOLID,
            1 => 0,
            _ => MASK_PLAYERSOLID,
        };
        TraceQuery::boxed(start, end, mins, maxs, mask).unwrap()
    }
}

/// `cases` random moves near `world`'s brush answered three ways.
fn check(world: &Kernel, cases: usize, seed: u64) -> [usize; 3] {
    let lone = LoneBrush::of(world).expect("a world of one brush");
    let (lo, hi) = (Vec3::from(world.mins), Vec3::from(world.maxs));
    let mut moves = Moves {
        rng: fastrand::Rng::with_seed(seed),
    };
    let mut scratch = Scratch::new();
    let mut kinds = [0; 3];
    for case in 0..cases {
        let q = moves.query(case, lo, hi);
        let direct = lone.trace_box(q.start(), q.end(), q.mins(), q.maxs(), q.mask());
        let fast = trace(world, &q, &mut scratch);
        let walk = trace(&world.reference(), &q, &mut scratch);
        assert_eq!(bits(&direct), bits(&fast), "case {case}: {q:?}");
        assert_eq!(bits(&direct), bits(&walk), "case {case}: {q:?}");
        kinds[if direct.startsolid {
            0
        } else if direct.fraction < 1.0 {
            1
        } else {
            2
        }] += 1;
    }
    kinds
}

/// Boxes of every kind a scene makes: a player, lopsided, flat, a line and
/// a point (a missile).
#[test]
fn a_box_entitys_clip_is_its_worlds_trace() {
    let boxes = [
        (Vec3::new(-15.0, -15.0, -24.0), Vec3::new(15.0, 15.0, 32.0)),
        (Vec3::new(-3.5, 2.0, -40.25), Vec3::new(17.0, 9.125, 0.0)),
        (Vec3::new(-16.0, -16.0, 0.0), Vec3::new(16.0, 16.0, 0.0)),
        (Vec3::new(0.0, 0.0, -8.0), Vec3::new(0.0, 0.0, 8.0)),
        (Vec3::ZERO, Vec3::ZERO),
    ];
    for (i, (mins, maxs)) in boxes.into_iter().enumerate() {
        let map = box_model(mins, maxs).unwrap();
        let kinds = check(&map.view(), 20_000, 0xb0c5 + i as u64);
        assert!(kinds.iter().all(|&n| n > 200), "{mins} {maxs}: {kinds:?}");
        assert_eq!(map.view().brushes[0].contents, CONTENTS_BODY);
    }
}

/// The bundled map's inline models of one brush, axial boxes and slanted
/// ones (its doors and jump pads).
#[test]
fn a_one_brush_models_clip_is_its_worlds_trace() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/maps/q3dm6ish.bsp");
    let map = Map::open(path).unwrap();
    let mut seen = [0; 2];
    for (i, model) in map.models().iter().enumerate() {
        let world = model.view();
        if LoneBrush::of(&world).is_none() {
            continue;
        }
        let axial = world.accel.brush_axial.first() != Some(&u32::MAX);
        seen[axial as usize] += 1;
        let kinds = check(&world, 10_000, 0x30de1 + i as u64);
        assert!(kinds.iter().all(|&n| n > 100), "*{}: {kinds:?}", i + 1);
    }
    assert!(seen.iter().all(|&n| n >= 2), "slanted, axial: {seen:?}");
}
