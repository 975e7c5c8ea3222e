//! Property tests of the trace kernel on the committed maps: invariants that
//! must hold for any query, checked on random queries within (and a little
//! beyond) each map's bounds. The seed is fixed, so runs are reproducible;
//! `PROPTEST_CASES=N` runs more cases, `PROPTEST_RNG_SEED=S` another seed.
//!
//! Brush-only invariants (a, b, d) run with curves off: patches are thin
//! two-sided surfaces with the reference's own rules (a moving trace never
//! starts solid because of a patch, so it can end "inside" one while a
//! position test there is solid), and for them `dist` is the plane expanded by
//! the box. Invariant (c), determinism of the scratch space, runs curves on.

use crate::common;

use bspq::contents::{MASK_PLAYERSOLID, MASK_SHOT, MASK_SOLID};
use bspq::math::Vec3;
use bspq::query::{answer, Answer, Query};
use bspq::trace::Kernel as World;
use bspq::trace::{point_contents, trace, Scratch, TraceQuery, TraceResult};
use proptest::array::uniform3;
use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use std::sync::LazyLock;

/// The 1/8-unit surface clip epsilon of Quake 3.
const CLIP_EPSILON: f32 = 0.125;
/// Slack for float rounding of positions and plane distances (world
/// coordinates are below ~8192, where f32 steps are under 1e-3).
const ROUNDING: f32 = 0.01;

static WORLDS_NO_CURVES: LazyLock<Vec<bspq::map::Map>> = LazyLock::new(|| {
    common::MAPS
        .iter()
        .map(|m| common::load_world(m, false))
        .collect()
});
static WORLDS_CURVES: LazyLock<Vec<bspq::map::Map>> = LazyLock::new(|| {
    common::MAPS
        .iter()
        .map(|m| common::load_world(m, true))
        .collect()
});

/// A fixed seed and `cases` cases, unless `PROPTEST_CASES` / `PROPTEST_RNG_SEED`
/// say otherwise (to search harder: `PROPTEST_CASES=200000`).
fn config(cases: u32) -> ProptestConfig {
    let defaults = ProptestConfig::default();
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    ProptestConfig {
        cases: env("PROPTEST_CASES").map_or(cases, |n| n as u32),
        failure_persistence: None,
        rng_seed: match env("PROPTEST_RNG_SEED") {
            Some(_) => defaults.rng_seed,
            None => RngSeed::Fixed(0x6273_7071),
        },
        max_shrink_iters: 4096,
        ..defaults
    }
}

/// The shape of a generated query.
#[derive(Debug, Clone, Copy)]
enum Shape {
    Ray,
    Player,
    Crouch,
    /// A small box, not necessarily symmetric: `mins <= 0 <= maxs`.
    Small([f32; 3], [f32; 3]),
}

impl Shape {
    fn bounds(self) -> (Vec3, Vec3) {
        match self {
            Shape::Ray => (Vec3::ZERO, Vec3::ZERO),
            Shape::Player => (Vec3::new(-15.0, -15.0, -24.0), Vec3::new(15.0, 15.0, 32.0)),
            Shape::Crouch => (Vec3::new(-15.0, -15.0, -24.0), Vec3::new(15.0, 15.0, 16.0)),
            Shape::Small(lo, hi) => (Vec3::from_array(lo), Vec3::from_array(hi)),
        }
    }
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        2 => Just(Shape::Ray),
        2 => Just(Shape::Player),
        1 => Just(Shape::Crouch),
        2 => (uniform3(-24.0f32..=0.0), uniform3(0.0f32..=24.0)).prop_map(|(lo, hi)| Shape::Small(lo, hi)),
    ]
}

fn mask() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(MASK_SOLID),
        Just(MASK_PLAYERSOLID),
        Just(MASK_SHOT),
        Just(u32::MAX)
    ]
}

/// How the end point is chosen.
#[derive(Debug, Clone, Copy)]
enum Motion {
    /// Anywhere in the bounds (long moves).
    Far([f32; 3]),
    /// A short move in a random direction.
    Short([f32; 3], f32),
    /// A move along one axis.
    Axial(usize, f32),
}

fn motion() -> impl Strategy<Value = Motion> {
    prop_oneof![
        uniform3(0.0f32..1.0).prop_map(Motion::Far),
        (uniform3(-1.0f32..1.0), 1.0f32..256.0).prop_map(|(d, l)| Motion::Short(d, l)),
        (0usize..3, -256.0f32..256.0).prop_map(|(a, l)| Motion::Axial(a, l)),
    ]
}

/// A generated trace, placed in a world by [`Move::query`].
#[derive(Debug, Clone, Copy)]
struct Move {
    map: usize,
    start: [f32; 3],
    motion: Motion,
    shape: Shape,
    mask: u32,
}

fn moving() -> impl Strategy<Value = Move> {
    (
        0..common::MAPS.len(),
        uniform3(0.0f32..1.0),
        motion(),
        shape(),
        mask(),
    )
        .prop_map(|(map, start, motion, shape, mask)| Move {
            map,
            start,
            motion,
            shape,
            mask,
        })
}

/// A point of the world's bounds grown by 32 units (so some moves are in the void).
fn place(world: &World, unit: [f32; 3]) -> Vec3 {
    let lo = Vec3::from_array(world.mins) - Vec3::splat(32.0);
    let hi = Vec3::from_array(world.maxs) + Vec3::splat(32.0);
    lo + (hi - lo) * Vec3::from_array(unit)
}

impl Move {
    fn query(&self, world: &World) -> TraceQuery {
        let start = place(world, self.start);
        let end = match self.motion {
            Motion::Far(u) => place(world, u),
            Motion::Short(d, len) => {
                let d = Vec3::from_array(d);
                let dir = if d.length() > 1e-3 {
                    d.normalize()
                } else {
                    Vec3::X
                };
                start + dir * len
            }
            Motion::Axial(axis, len) => {
                let mut end = start;
                end[axis] += len;
                end
            }
        };
        let (mins, maxs) = self.shape.bounds();
        TraceQuery::boxed(start, end, mins, maxs, self.mask).unwrap()
    }
}

fn position_test(q: &TraceQuery, at: Vec3, scratch: &mut Scratch, world: &World) -> TraceResult {
    let test = q.moved(at, at, q.mask()).unwrap();
    trace(world, &test, scratch)
}

/// Signed distance between the box of `q` placed at `at` and the plane
/// `normal·x = dist`: the plane shifted out by the box's support, as the
/// reference clips (positive: the box is in front of the plane).
fn box_plane_distance(q: &TraceQuery, at: Vec3, normal: Vec3, dist: f32) -> f32 {
    let corner = Vec3::new(
        if normal.x < 0.0 {
            q.maxs().x
        } else {
            q.mins().x
        },
        if normal.y < 0.0 {
            q.maxs().y
        } else {
            q.mins().y
        },
        if normal.z < 0.0 {
            q.maxs().z
        } else {
            q.mins().z
        },
    );
    normal.dot(at + corner) - dist
}

fn describe(q: &TraceQuery, r: &TraceResult) -> String {
    format!(
        "query start {:?} end {:?} mins {:?} maxs {:?} mask {:#x}\n  result {r:?}",
        q.start().to_array(),
        q.end().to_array(),
        q.mins().to_array(),
        q.maxs().to_array(),
        q.mask()
    )
}

proptest! {
    #![proptest_config(config(20_000))]

    /// (a) A trace never moves a box into solid. If the box is clear at the
    /// start (a position test, start = end, of the same box and mask), it is
    /// clear at `endpos`: the 1/8-unit back-off puts `endpos` 1/8 unit in
    /// front of the plane hit (or leaves it at the start when the start was
    /// already within 1/8 of it), a brush whose inside the move would reach is
    /// entered, so hit, earlier, and a position test counts touching (distance
    /// 0) as inside, which the back-off keeps clear of.
    ///
    /// `startsolid` agrees with the position test at the start whenever the
    /// trace moved (fraction > 0). At fraction 0 it need not: like the
    /// reference (`CM_TraceThroughLeaf` returns as soon as the fraction is 0,
    /// `CM_TraceThroughTree` skips everything beyond), the trace stops at the
    /// first brush touched at the start and never tests a brush the start box
    /// overlaps, if that one comes later in traversal order. (Found by this
    /// test on aggressor: a player box 3.6 units inside brush 502 and 0.1 unit
    /// from a face of brush 284 reports fraction 0, startsolid false.)
    #[test]
    fn a_trace_never_moves_into_solid(m in moving()) {
        let world = &WORLDS_NO_CURVES[m.map].view();
        let name = common::MAPS[m.map];
        let q = m.query(world);
        let mut scratch = Scratch::new();
        let r = trace(world, &q, &mut scratch);
        prop_assert!(r.fraction >= 0.0 && r.fraction <= 1.0, "{name}: fraction out of range\n  {}", describe(&q, &r));
        let at_start = position_test(&q, q.start(), &mut scratch, world);
        if r.fraction > 0.0 {
            prop_assert_eq!(r.startsolid, at_start.startsolid,
                "{}: startsolid disagrees with a position test at the start\n  {}\n  position test {:?}", name, describe(&q, &r), at_start);
        }
        if at_start.startsolid {
            return Ok(());
        }
        prop_assert!(!r.startsolid, "{name}: startsolid, but the start is clear\n  {}", describe(&q, &r));
        let at_end = position_test(&q, r.endpos, &mut scratch, world);
        prop_assert!(
            !at_end.startsolid,
            "{name}: the trace ends inside solid\n  {}\n  position test at endpos: {at_end:?}",
            describe(&q, &r)
        );
    }

    /// (b) Splitting a trace. Let S→E end at P = endpos with fraction f, from
    /// a clear start (see (a)). What holds, with the back-off:
    /// - a hit reports a plane facing the move, and the box at P is 1/8 unit in
    ///   front of it (or at most 1/8 when f = 0: the start was in the touch zone);
    /// - S→P reaches P (up to rounding: P is exactly on the 1/8 boundary of
    ///   the plane hit, so the sub-trace may report a "hit" at fraction ≈ 1,
    ///   but its endpos stays within 0.25 of P);
    /// - P→E makes no progress: it stops within 0.25 of P (when E is more than
    ///   1/8 + rounding beyond P this means it hits), on a plane facing the move
    ///   that touches the box at P (distance ≤ 1/8; at a corner it may be a
    ///   different face of the same contact, so the normal is not compared);
    /// - when S→E misses, both halves S→M and M→E of a split miss. (Not a
    ///   theorem: a brush is hit when the move's entry into the 1/8 zone of
    ///   its faces comes before its exit 1/8 beyond the faces it leaves, and a
    ///   sub-trace that ends before reaching a face it would leave ignores that
    ///   face; so a move grazing an edge within 1/8 unit, split inside that
    ///   1/8 window, can hit in S→M only. Not seen in 10^6 random cases.)
    ///
    /// What does *not* hold exactly: surface flags and contents of P→E may
    /// differ from the whole's at ties (two faces touched at once), as the
    /// first found in traversal order wins and the traversal of P→E differs.
    #[test]
    fn b_split_trace_agrees(m in moving(), split in 0.05f32..0.95) {
        let world = &WORLDS_NO_CURVES[m.map].view();
        let name = common::MAPS[m.map];
        let q = m.query(world);
        let mut scratch = Scratch::new();
        let whole = trace(world, &q, &mut scratch);
        if q.start() == q.end() || position_test(&q, q.start(), &mut scratch, world).startsolid {
            return Ok(());
        }
        let dir = q.end() - q.start();
        let p = whole.endpos;
        if whole.fraction < 1.0 {
            let n = whole.normal;
            prop_assert!((n.length() - 1.0).abs() < 1e-3, "{name}: hit without a unit normal\n  {}", describe(&q, &whole));
            prop_assert!(n.dot(dir) < 0.0, "{name}: the plane hit does not face the move\n  {}", describe(&q, &whole));
            let d = box_plane_distance(&q, p, n, whole.dist);
            if whole.fraction > 0.0 {
                prop_assert!((d - CLIP_EPSILON).abs() <= ROUNDING,
                    "{name}: endpos is {d} (not 1/8) in front of the plane hit\n  {}", describe(&q, &whole));
            } else {
                prop_assert!(d <= CLIP_EPSILON + ROUNDING,
                    "{name}: fraction 0 but the start is {d} in front of the plane hit\n  {}", describe(&q, &whole));
            }

            let first_q = q.moved(q.start(), p, q.mask()).unwrap();
            let first = trace(world, &first_q, &mut scratch);
            prop_assert!(!first.startsolid, "{name}: S→P starts solid\n  whole {}\n  S→P {first:?}", describe(&q, &whole));
            prop_assert!(first.endpos.distance(p) <= 0.25,
                "{name}: S→P stops {} short of P\n  whole {}\n  S→P {first:?}", first.endpos.distance(p), describe(&q, &whole));

            let second_q = q.moved(p, q.end(), q.mask()).unwrap();
            let second = trace(world, &second_q, &mut scratch);
            prop_assert!(!second.startsolid, "{name}: P→E starts solid\n  whole {}\n  P→E {second:?}", describe(&q, &whole));
            prop_assert!(second.endpos.distance(p) <= 0.25,
                "{name}: P→E moves {} beyond P\n  whole {}\n  P→E {second:?}", second.endpos.distance(p), describe(&q, &whole));
            if second.fraction < 1.0 && p != q.end() {
                prop_assert!(second.normal.dot(dir) < 0.0,
                    "{name}: P→E hits a plane not facing the move\n  whole {}\n  P→E {second:?}", describe(&q, &whole));
                let d2 = box_plane_distance(&q, p, second.normal, second.dist);
                prop_assert!(d2 <= CLIP_EPSILON + ROUNDING,
                    "{name}: P→E hits a plane {d2} away from P\n  whole {}\n  P→E {second:?}", describe(&q, &whole));
            }
        } else {
            let mid = q.start() + dir * split;
            let first = trace(world, &q.moved(q.start(), mid, q.mask()).unwrap(), &mut scratch);
            let second = trace(world, &q.moved(mid, q.end(), q.mask()).unwrap(), &mut scratch);
            prop_assert!(first.fraction == 1.0 && !first.startsolid,
                "{name}: the whole misses but S→M hits\n  whole {}\n  S→M {first:?}", describe(&q, &whole));
            prop_assert!(second.fraction == 1.0 && !second.startsolid,
                "{name}: the whole misses but M→E hits\n  whole {}\n  M→E {second:?}", describe(&q, &whole));
        }
    }
}

/// A query of any kind, for the determinism test.
#[derive(Debug, Clone, Copy)]
enum AnyQuery {
    Trace(Move),
    Position(Move),
    Point(usize, [f32; 3]),
}

fn any_query() -> impl Strategy<Value = AnyQuery> {
    prop_oneof![
        4 => moving().prop_map(AnyQuery::Trace),
        1 => moving().prop_map(AnyQuery::Position),
        1 => (0..common::MAPS.len(), uniform3(0.0f32..1.0)).prop_map(|(m, p)| AnyQuery::Point(m, p)),
    ]
}

impl AnyQuery {
    fn map(&self) -> usize {
        match self {
            AnyQuery::Trace(m) | AnyQuery::Position(m) => m.map,
            AnyQuery::Point(map, _) => *map,
        }
    }

    fn build(&self, world: &World) -> Query {
        match self {
            AnyQuery::Trace(m) => Query::Trace(m.query(world)),
            AnyQuery::Position(m) => {
                let q = m.query(world);
                Query::Trace(q.moved(q.start(), q.start(), q.mask()).unwrap())
            }
            AnyQuery::Point(_, p) => Query::Point(place(world, *p)),
        }
    }
}

/// Every bit of an answer (so -0.0 vs 0.0 or NaN payloads would differ too).
fn bits(a: &Answer) -> Vec<u32> {
    match a {
        Answer::Point(p) => vec![p.contents],
        Answer::Hit(h) => vec![h.hit as u32],
        Answer::Scene(s) => vec![s.entities as u32],
        // (Never asked for here; movement answers are compared elsewhere.)
        Answer::Ground(_) | Answer::Slide(_) | Answer::Predict(_) | Answer::Bots(_) => {
            vec![u32::MAX]
        }
        Answer::Trace(t) => {
            let mut v = vec![t.fraction.to_bits(), t.dist.to_bits()];
            v.extend(t.endpos.iter().chain(&t.normal).map(|x| x.to_bits()));
            v.extend([
                t.startsolid as u32,
                t.allsolid as u32,
                t.contents,
                t.surface_flags,
            ]);
            v
        }
    }
}

proptest! {
    #![proptest_config(config(500))]

    /// (c) Answers do not depend on what the scratch space saw before: each
    /// query answered alone (fresh `Scratch`) equals its answer in a shuffled
    /// sequence sharing one `Scratch` across queries and across worlds
    /// (curves on, so patches are included).
    #[test]
    fn c_scratch_sharing_is_invisible(
        batch in proptest::collection::vec(any_query(), 1..60).prop_shuffle(),
        order_seed in any::<u64>(),
    ) {
        let worlds = &*WORLDS_CURVES;
        let alone: Vec<Vec<u32>> = batch
            .iter()
            .map(|a| {
                let world = &worlds[a.map()].view();
                bits(&answer(world, &mut Scratch::new(), &a.build(world)))
            })
            .collect();
        // Visit in another order (a seeded permutation), sharing one scratch.
        let mut order: Vec<usize> = (0..batch.len()).collect();
        fastrand::Rng::with_seed(order_seed).shuffle(&mut order);
        let mut shared = Scratch::new();
        for pass in 0..2 {
            for &i in &order {
                let world = &worlds[batch[i].map()].view();
                let got = bits(&answer(world, &mut shared, &batch[i].build(world)));
                prop_assert_eq!(&got, &alone[i], "pass {}, query {:?}", pass, batch[i]);
            }
        }
    }
}

/// The OR of the contents of the brushes containing `p` by brute force over
/// the world's brush list (independent of the tree), or `None` when `p` lies
/// within `margin` of the boundary of some brush.
fn brute_force_contents(world: &World, p: Vec3, margin: f32) -> Option<u32> {
    let mut contents = 0;
    for brush in world.brushes {
        let (lo, hi) = (Vec3::from_array(brush.mins), Vec3::from_array(brush.maxs));
        if p.cmplt(lo - Vec3::splat(1.0)).any() || p.cmpgt(hi + Vec3::splat(1.0)).any() {
            continue;
        }
        let first = brush.first_side as usize;
        let outside = world.brush_sides[first..first + brush.num_sides as usize]
            .iter()
            .map(|side| world.planes[side.plane as usize].distance(p))
            .fold(f32::MIN, f32::max);
        if outside.abs() <= margin {
            return None;
        }
        if outside < 0.0 {
            contents |= brush.contents;
        }
    }
    Some(contents)
}

/// Whether some brush with exactly `contents` has every face within `reach`
/// of `p` (`p` is inside the brush grown by `reach`).
fn near_brush_with(world: &World, p: Vec3, contents: u32, reach: f32) -> bool {
    world
        .brushes
        .iter()
        .filter(|b| b.contents == contents)
        .any(|brush| {
            let first = brush.first_side as usize;
            world.brush_sides[first..first + brush.num_sides as usize]
                .iter()
                .all(|side| world.planes[side.plane as usize].distance(p) <= reach)
        })
}

/// A point unlikely to lie exactly on a face: the committed maps' axial faces
/// are at integer coordinates, avoided by a fractional part in [0.32, 0.37).
fn off_grid_point(world: &World, unit: [f32; 3], frac: [f32; 3]) -> Vec3 {
    let p = place(world, unit).floor();
    p + Vec3::from_array(frac)
}

proptest! {
    #![proptest_config(config(20_000))]

    /// (d) Point contents agree with the brushes and with the tracer:
    /// - away from faces (no face of a nearby brush within 0.01), point
    ///   contents are the OR of the contents of the brushes containing the
    ///   point, found by brute force over the brush list (not the tree);
    /// - a position test of a ray (start = end, no box) at such a point is solid
    ///   exactly when the point's contents intersect the mask, and reports
    ///   contents that are part of them;
    /// - a ray that stops (fraction > 0, not start-solid) stopped touching a
    ///   brush: the brush hit, grown by 1/8 (the touch zone), contains `endpos`,
    ///   so a cube of half-size 1/8 (+ rounding) there is solid. (A point just
    ///   behind the face hit need not be inside the brush: near an edge the
    ///   touch zone of the neighbouring face stops the ray while it passes
    ///   outside the brush itself.)
    #[test]
    fn d_point_contents_agree_with_brushes_and_traces(
        map in 0..common::MAPS.len(),
        unit in uniform3(0.0f32..1.0),
        frac in uniform3(0.32f32..0.37),
        mask in mask(),
        m in moving(),
    ) {
        let world = &WORLDS_NO_CURVES[map].view();
        let name = common::MAPS[map];
        let mut scratch = Scratch::new();
        let p = off_grid_point(world, unit, frac);
        let pc = point_contents(world, p);
        if let Some(brute) = brute_force_contents(world, p, ROUNDING) {
            prop_assert_eq!(pc, brute, "{}: point contents at {:?} differ from the brushes containing it", name, p.to_array());
            let pos = trace(world, &TraceQuery::ray(p, p, mask).unwrap(), &mut scratch);
            prop_assert_eq!(pos.startsolid, pc & mask != 0,
                "{}: point contents {:#x} at {:?} vs position test {:?} (mask {:#x})", name, pc, p.to_array(), pos, mask);
            if pos.startsolid {
                prop_assert!(pos.contents & !pc == 0 && pos.contents & mask != 0,
                    "{}: position test contents {:#x} not within point contents {:#x} at {:?}", name, pos.contents, pc, p.to_array());
            }
        }

        let world = &WORLDS_NO_CURVES[m.map].view();
        let name = common::MAPS[m.map];
        let box_move = m.query(world);
        let ray = TraceQuery::ray(box_move.start(), box_move.end(), box_move.mask()).unwrap();
        let hit = trace(world, &ray, &mut scratch);
        if hit.startsolid || hit.fraction >= 1.0 || hit.fraction == 0.0 {
            return Ok(());
        }
        let reach = CLIP_EPSILON + ROUNDING;
        prop_assert!(near_brush_with(world, hit.endpos, hit.contents, reach),
            "{}: no brush with contents {:#x} within 1/8 of endpos\n  {}", name, hit.contents, describe(&ray, &hit));
        let cube = TraceQuery::boxed(
            hit.endpos,
            hit.endpos,
            Vec3::splat(-reach),
            Vec3::splat(reach),
            ray.mask(),
        )
        .unwrap();
        let touch = trace(world, &cube, &mut scratch);
        prop_assert!(touch.startsolid,
            "{}: a 1/8 cube at endpos is clear\n  {}\n  cube {:?}", name, describe(&ray, &hit), touch);
    }
}

/// Found by (d) with other seeds: on aggressor, point contents are solid where
/// no brush is. Brush 243 has two almost coplanar sides (planes 1429 and 1550,
/// normals 3e-5 apart); building face polygons, each clips the other's
/// polygon away as "on the plane", so neither face exists, the tree never
/// splits on that plane, and the brush's solid leaf reaches 40 units past it
/// (likewise brush 653). Traces and position tests clip against the brush's
/// planes and are right; point contents read the leaf and are not.
#[test]
fn point_contents_near_almost_coplanar_brush_sides() {
    let world = &WORLDS_NO_CURVES[2].view();
    assert_eq!(common::MAPS[2], "aggressor");
    let mut scratch = Scratch::new();
    let mut wrong = Vec::new();
    for p in [[-629.68, 409.32, 256.32], [-166.68, 1049.32, 262.32]] {
        let p = Vec3::from_array(p);
        let brute = brute_force_contents(world, p, ROUNDING);
        let position = trace(
            world,
            &TraceQuery::ray(p, p, u32::MAX).unwrap(),
            &mut scratch,
        );
        let pc = point_contents(world, p);
        assert_eq!(brute, Some(0), "no brush contains {p}");
        assert!(!position.startsolid, "a position test at {p} is clear");
        if pc != 0 {
            wrong.push(format!("{:?}: {pc:#x}", p.to_array()));
        }
    }
    assert!(
        wrong.is_empty(),
        "point contents are not 0 outside every brush at {wrong:?}"
    );
}
