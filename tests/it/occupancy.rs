//! The occupancy grid (`bspq::trace::accel::occupancy`) on random boxes:
//! a box it reports clear overlaps no marked box, and its one-box and
//! four-box tests agree.

use bspq::trace::accel::occupancy::Occupancy;
use fastrand::Rng;
use glam::{Vec3A, Vec4};

fn random_box(rng: &mut Rng, extent: f32, size: f32) -> [Vec3A; 2] {
    let mut v = || (rng.f32() * 2.0 - 1.0) * extent;
    let a = Vec3A::new(v(), v(), v());
    let mut s = || rng.f32() * size;
    let b = a + Vec3A::new(s(), s(), s());
    [a, b]
}

/// `count` random boxes of up to `size` within 2000 units of the
/// origin, and their grid.
fn random_grid(rng: &mut Rng, count: usize, size: f32) -> (Vec<[Vec3A; 2]>, Occupancy) {
    let boxes: Vec<[Vec3A; 2]> = (0..count).map(|_| random_box(rng, 2000.0, size)).collect();
    let grid = Occupancy::of_boxes(&boxes);
    (boxes, grid)
}

fn overlaps(a: &[Vec3A; 2], b: &[Vec3A; 2]) -> bool {
    a[0].cmple(b[1]).all() && b[0].cmple(a[1]).all()
}

/// A box reported clear overlaps no marked box (brute force), and most
/// boxes far from everything are reported clear.
#[test]
fn clear_boxes_overlap_nothing() {
    let mut rng = Rng::with_seed(0x9E37_79B9_7F4A_7C15);
    for round in 0..20 {
        let count = 1 + round * 10;
        let boxes: Vec<[Vec3A; 2]> = (0..count)
            .map(|_| random_box(&mut rng, 3000.0, 200.0))
            .collect();
        let grid = Occupancy::of_boxes(&boxes);
        assert!(grid.bytes() > 0);
        let mut far_clear = 0;
        for _ in 0..2000 {
            let asked = random_box(&mut rng, 4000.0, 300.0);
            let hit = boxes.iter().any(|b| overlaps(b, &asked));
            if grid.is_clear(asked[0], asked[1]) {
                assert!(!hit, "{asked:?} reported clear but overlaps a box");
            }
            let shifted = [asked[0] + 1e5, asked[1] + 1e5];
            far_clear += usize::from(grid.is_clear(shifted[0], shifted[1]));
        }
        assert_eq!(far_clear, 2000, "boxes outside the grid are clear");
    }
}

/// The one-box test and the four-box test give the same answer for
/// every box: near and far, touching, inverted, not finite, huge.
#[test]
fn one_box_and_four_boxes_agree() {
    let mut rng = Rng::with_seed(0x0B0E_5A1D_F00D_0004);
    let (boxes, grid) = random_grid(&mut rng, 200, 150.0);
    let mut asked: Vec<[Vec3A; 2]> = (0..4000)
        .map(|i| random_box(&mut rng, 2500.0, [1.0, 60.0, 400.0, 3000.0][i % 4]))
        .collect();
    // Boxes ending exactly on a marked box's faces, and broken ones.
    asked.extend(boxes.iter().map(|&[_, b]| [b, b + 10.0]));
    asked.extend(boxes.iter().map(|&[a, _]| [a - 10.0, a]));
    asked.extend([
        [Vec3A::splat(10.0), Vec3A::splat(5.0)],
        [Vec3A::splat(f32::NAN), Vec3A::ONE],
        [Vec3A::ZERO, Vec3A::splat(f32::INFINITY)],
        [Vec3A::splat(-1e30), Vec3A::splat(1e30)],
        [Vec3A::splat(1e30), Vec3A::splat(1e30)],
    ]);
    let mut clear = 0;
    for four in asked.chunks(4) {
        let lane = |k: usize, axis: usize, end: usize| four[k.min(four.len() - 1)][end][axis];
        let lanes = |end: usize| {
            [0, 1, 2].map(|axis| {
                Vec4::new(
                    lane(0, axis, end),
                    lane(1, axis, end),
                    lane(2, axis, end),
                    lane(3, axis, end),
                )
            })
        };
        let together = grid.are_clear(lanes(0), lanes(1));
        for (k, [lo, hi]) in four.iter().enumerate() {
            let alone = grid.is_clear(*lo, *hi);
            assert_eq!(alone, together >> k & 1 != 0, "{lo:?}..{hi:?}");
            clear += usize::from(alone);
        }
    }
    assert!(clear > asked.len() / 10, "{clear} of {} clear", asked.len());
}

/// Boxes that share only a face or a corner with a marked box overlap
/// it, and are reported as such.
#[test]
fn touching_boxes_are_not_clear() {
    let marked: [Vec3A; 2] = [Vec3A::new(10.0, 20.0, 30.0), Vec3A::new(64.0, 96.0, 128.0)];
    let grid = Occupancy::of_boxes(&[marked]);
    let above = [Vec3A::new(64.0, 96.0, 128.0), Vec3A::splat(500.0)];
    let below = [Vec3A::splat(-500.0), Vec3A::new(10.0, 20.0, 30.0)];
    assert!(!grid.is_clear(above[0], above[1]));
    assert!(!grid.is_clear(below[0], below[1]));
    let far = [Vec3A::new(200.0, 0.0, 0.0), Vec3A::splat(500.0)];
    assert!(grid.is_clear(far[0], far[1]));
}
