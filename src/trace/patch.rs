//! Clipping against patch facets with the reference's rules: each facet is a
//! thin convex piece (surface plane, borders, bevels, back of the surface);
//! planes are pushed out by the box, the surface plane by its signed support
//! and the borders by its absolute value, and the back side is never hit.
//!
//! Rays take a path of their own, as in the reference: a facet has no
//! thickness, so a zero-size box would enter the surface and leave its back at
//! the same fraction and never hit; rays instead find where they cross each
//! surface plane and check that crossing against the facet's borders.

use super::accel::SideLanes;
use super::brush::{lane_dot, BrushClip, Crossings};
use super::work::TraceWork;
use super::Kernel;
use crate::margins::SURFACE_CLIP_EPSILON;
use crate::math::{lanes_of, splat_axes, Vec3};
use crate::world::{Facet, FacetBorder, Patch, PatchPlane};
use glam::{Vec3A, Vec4};

/// `a · b` summed left to right in f32, as the reference does for patch planes.
#[inline(always)]
pub(super) fn dot(a: impl Into<Vec3>, b: Vec3) -> f32 {
    let a = a.into();
    a.x * b.x + a.y * b.y + a.z * b.z
}

/// A patch plane's normal.
#[inline(always)]
pub(super) fn normal(p: &PatchPlane) -> Vec3 {
    Vec3::new(p.plane[0], p.plane[1], p.plane[2])
}

/// A facet the move hits, found on its own (nothing found before is read).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct FacetHit {
    /// The fraction the trace would stop at.
    pub frac: f32,
    /// The hit replaces a contact at fraction `f` found before when
    /// `frac < f` (boxes: `at == frac`) or, for rays, when `at <= f` (`at`
    /// is where the ray crosses the surface plane, past `frac`).
    pub at: f32,
    pub normal: Vec3,
    pub dist: f32,
}

impl FacetHit {
    /// A box's hit at `frac` on the plane (`normal`, `dist`) it entered last.
    fn of_box(frac: f32, normal: Vec3, dist: f32) -> FacetHit {
        FacetHit {
            frac,
            at: frac,
            normal,
            dist,
        }
    }
}

/// The move's hit on one facet, on its own, if it stops no later than
/// `stop_limit` (a ray's hit past it is not looked at closely).
#[inline]
pub(crate) fn facet_hit(
    world: &Kernel,
    facet: usize,
    w: &TraceWork,
    stop_limit: f32,
) -> Option<FacetHit> {
    if w.is_point {
        point_facet_hit(world, facet, w, 1.0, stop_limit)
    } else {
        box_facet_hit(world, facet, w)
    }
}

/// The swept bounds meet patch `patch`'s bounds, with the clip epsilon as
/// slack (see [`super::accel`]'s `patch_reach`).
#[inline(always)]
pub(crate) fn patch_in_reach(world: &Kernel, patch: usize, [lo, hi]: &[Vec3A; 2]) -> bool {
    let [min, max] = &world.accel.patch_reach[patch];
    (hi.cmpge(*min) & lo.cmple(*max)).all()
}

/// The facet's planes as the box sees them: the surface plane first, then
/// each border (flipped when inward), each pushed out by the box.
#[inline(always)]
fn shifted_planes<'a>(
    world: &'a Kernel,
    facet: &'a Facet,
    w: &'a TraceWork,
) -> ((Vec3, f32), impl Iterator<Item = (Vec3, f32)> + 'a) {
    let surface = &world.patch_planes[facet.surface_plane as usize];
    let n = normal(surface);
    // Pushed out by the box's signed support along the normal.
    let surface_plane = (n, surface.plane[3] - dot(w.offset(surface.sign_bits), n));
    let first = facet.first_border as usize;
    let borders = world.facet_borders[first..first + facet.num_borders as usize]
        .iter()
        .map(move |b: &FacetBorder| {
            let p = &world.patch_planes[b.plane as usize];
            let (n, d) = if b.inward != 0 {
                (-normal(p), -p.plane[3])
            } else {
                (normal(p), p.plane[3])
            };
            // The box is centred, so the support is the same either way round.
            (n, d + dot(w.offset(p.sign_bits), n).abs())
        });
    (surface_plane, borders)
}

/// Facet `facet`'s plane records in the kernel's lanes and which planes are
/// inward borders.
#[inline(always)]
pub(super) fn facet_lanes<'a>(world: &Kernel<'a>, facet: usize) -> (&'a [SideLanes], u32) {
    let lanes = &world.accel.facets[facet];
    let count = 1 + world.facets[facet].num_borders as usize;
    let records = &world.accel.facet_lanes[lanes.first as usize..][..count.div_ceil(4)];
    (records, lanes.inward)
}

/// The box's hit on facet `index`, on its own: four planes at a time with
/// the brush clip's crossings in lanes ([`Crossings`]), each plane's shift,
/// both distances and the tests computed with the same operations per lane
/// (a loop over the planes branched on every plane: a facet clip cost about
/// ten mispredicted branches).
fn box_facet_hit(world: &Kernel, index: usize, w: &TraceWork) -> Option<FacetHit> {
    let facet = &world.facets[index];
    let (records, inward) = facet_lanes(world, index);
    let (lower, upper) = (splat_axes(w.lower), splat_axes(w.extents));
    let (start, end) = (splat_axes(w.start), splat_axes(w.end));
    let mut clip = Crossings::new();
    for (chunk, planes) in records.iter().enumerate() {
        let n = [planes.x, planes.y, planes.z];
        // The box corner furthest along -n: the surface plane's and an
        // outward border's `offset` (their sign bits are n's) ...
        let behind: [Vec4; 3] =
            std::array::from_fn(|k| Vec4::select(n[k].cmplt(Vec4::ZERO), upper[k], lower[k]));
        // ... and along +n: an inward border's, whose sign bits are those
        // of its own normal, -n.
        let ahead: [Vec4; 3] =
            std::array::from_fn(|k| Vec4::select(n[k].cmpgt(Vec4::ZERO), upper[k], lower[k]));
        let support_behind = lane_dot(&behind, &n);
        let support_ahead = lane_dot(&ahead, &n);
        // Borders are pushed out by the support's absolute value, the
        // surface plane (plane 0) by its signed value: `d - s` is `d + -s`.
        let lanes_inward = lanes_of((inward >> (4 * chunk)) & 0xF);
        let mut shift = Vec4::select(lanes_inward, support_ahead.abs(), support_behind.abs());
        if chunk == 0 {
            shift = Vec4::select(lanes_of(1), -support_behind, shift);
        }
        let dist = planes.dist + shift;
        let d1 = lane_dot(&start, &n) - dist;
        let d2 = lane_dot(&end, &n) - dist;
        if !clip.meet_lanes(chunk * 4, d1, d2) {
            return None;
        }
    }
    let (frac, plane) = facet_entry(clip.finish(), facet)?;
    let (surface, borders) = shifted_planes(world, facet, w);
    let (normal, dist) = entry_plane(plane, surface, borders)?;
    Some(FacetHit::of_box(frac, normal, dist))
}

/// A facet's clip through the brush clip's crossings as a facet hit: the
/// fraction and the plane entered (0: the surface plane, `k`: border
/// `k - 1`); none when the move misses, starts behind every plane (then
/// nothing enters) or enters through the last border, the back of the
/// surface, which is never hit.
pub(super) fn facet_entry(clip: BrushClip, facet: &Facet) -> Option<(f32, usize)> {
    match clip {
        BrushClip::Enter { frac, side } if side == 0 || side != facet.num_borders as usize => {
            Some((frac, side))
        }
        _ => None,
    }
}

/// Plane `plane` of a facet's pushed-out planes (its surface plane, then
/// its borders).
pub(super) fn entry_plane(
    plane: usize,
    surface: (Vec3, f32),
    mut borders: impl Iterator<Item = (Vec3, f32)>,
) -> Option<(Vec3, f32)> {
    match plane.checked_sub(1) {
        None => Some(surface),
        Some(border) => borders.nth(border),
    }
}

/// How a ray relates to one plane: whether it starts in front, and the
/// fraction where it crosses (a large value when it never does going forward).
#[inline(always)]
fn ray_crossing(p: &PatchPlane, w: &TraceWork) -> (bool, f32) {
    let n = normal(p);
    let offset = dot(w.offset(p.sign_bits), n);
    let d1 = dot(w.start, n) - p.plane[3] + offset;
    let d2 = dot(w.end, n) - p.plane[3] + offset;
    let crossing = if d1 == d2 {
        NEVER
    } else {
        let f = d1 / (d1 - d2);
        if f <= 0.0 {
            NEVER
        } else {
            f
        }
    };
    (d1 > 0.0, crossing)
}

const NEVER: f32 = 99999.0;

/// A ray's hit on facet `facet`, if it crosses the surface no later than
/// `limit` (a crossing past it cannot replace a contact there) and stops no
/// later than `stop_limit`.
fn point_facet_hit(
    world: &Kernel,
    index: usize,
    w: &TraceWork,
    limit: f32,
    stop_limit: f32,
) -> Option<FacetHit> {
    let facet = &world.facets[index];
    let surface = &world.patch_planes[facet.surface_plane as usize];
    let (front, at) = ray_crossing(surface, w);
    if !front || at > limit {
        return None;
    }
    let n = normal(surface);
    let offset = dot(w.offset(surface.sign_bits), n);
    let d1 = dot(w.start, n) - surface.plane[3] + offset;
    let d2 = dot(w.end, n) - surface.plane[3] + offset;
    let frac = ((d1 as f64 - SURFACE_CLIP_EPSILON) / (d1 - d2) as f64) as f32;
    let frac = if frac < 0.0 { 0.0 } else { frac };
    if frac > stop_limit {
        return None;
    }
    let (records, inward) = facet_lanes(world, index);
    if !ray_within_borders(records, inward, w, at) {
        return None;
    }
    Some(FacetHit {
        frac,
        at,
        normal: n,
        dist: surface.plane[3],
    })
}

/// Whether the ray, crossing the facet's surface plane at `at`, crosses it
/// within every border (in front of the border's own normal until `at` or
/// from `at` on, as the border faces). Four planes at a time from the
/// facet's lane records, inward borders flipped: a flipped plane's
/// distances are exactly the unflipped ones negated.
fn ray_within_borders(records: &[SideLanes], inward: u32, w: &TraceWork, at: f32) -> bool {
    let (start, end) = (splat_axes(w.start), splat_axes(w.end));
    let at = Vec4::splat(at);
    let mut inside = true;
    for (chunk, planes) in records.iter().enumerate() {
        let n = [planes.x, planes.y, planes.z];
        let lanes_inward = lanes_of((inward >> (4 * chunk)) & 0xF);
        // (`ray_crossing` adds the box's offset, zero for a ray: that
        // changes at most the sign of a zero distance.)
        let d1 = lane_dot(&start, &n) - planes.dist;
        let d2 = lane_dot(&end, &n) - planes.dist;
        let f = d1 / (d1 - d2);
        let never = d1.cmpeq(d2) | f.cmple(Vec4::ZERO);
        let crossing = Vec4::select(never, Vec4::splat(NEVER), f);
        let front = (lanes_inward & d1.cmplt(Vec4::ZERO)) | (!lanes_inward & d1.cmpgt(Vec4::ZERO));
        // In front of the border until it is crossed: crossed by `at`.
        let toward = front ^ lanes_inward;
        let within = (toward & crossing.cmple(at)) | (!toward & crossing.cmpge(at));
        let mut within = within.bitmask();
        if chunk == 0 {
            // Lane 0 is the surface plane, not a border.
            within |= 1;
        }
        inside &= within == 0xF;
    }
    inside
}

/// Whether the box at the trace's start overlaps a facet of `patch`.
pub(crate) fn position_test_patch(world: &Kernel, patch: &Patch, w: &TraceWork) -> bool {
    // A point is never inside a facet (they have no thickness), so the
    // reference does not test points at all.
    if w.is_point {
        return false;
    }
    let first = patch.first_facet as usize;
    world.facets[first..first + patch.num_facets as usize]
        .iter()
        .any(|facet| {
            let (surface, mut borders) = shifted_planes(world, facet, w);
            dot(w.start, surface.0) - surface.1 <= 0.0
                && borders.all(|(n, d)| dot(w.start, n) - d <= 0.0)
        })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::compile::patch::{add_patch, PatchSource};
    use crate::trace::work::TraceQuery;
    use crate::world::WorldData;

    const CONTENTS: u32 = 1;
    const FLAGS: u32 = 0x4000;

    /// Adds the patch of 3×3 control points `grid(i, j)`; its index.
    fn add_grid(world: &mut WorldData, grid: impl Fn(f32, f32) -> Vec3) -> Option<u32> {
        let points: Vec<Vec3> = (0..3)
            .flat_map(|j| (0..3).map(move |i| (i as f32, j as f32)))
            .map(|(i, j)| grid(i, j))
            .collect();
        let source = PatchSource {
            width: 3,
            height: 3,
            points: &points,
            contents: CONTENTS,
            surface_flags: FLAGS,
            source_surface: 0,
        };
        add_patch(world, &source)
    }

    /// A flat 3×3 patch on z = 0 over (0,0)–(64,64), facing +z.
    fn flat_world() -> crate::map::Map {
        let mut world = WorldData::default();
        let added = add_grid(&mut world, |i, j| Vec3::new(i * 32.0, j * 32.0, 0.0));
        assert_eq!(added, Some(0));
        with_kernel(world)
    }

    /// `data` loaded, with the kernel's records built.
    pub(crate) fn with_kernel(mut data: WorldData) -> crate::map::Map {
        if data.leaves.is_empty() {
            // (A world is at least one leaf.)
            data.leaves.push(bytemuck::Zeroable::zeroed());
        }
        crate::map::Map::from_data(data).expect("a valid world")
    }

    /// The move's answer against patch 0 alone.
    fn sweep(world: &Kernel, start: Vec3, end: Vec3, half: f32) -> TraceWork {
        let mut w = TraceWork::new(
            &TraceQuery::boxed(start, end, Vec3::splat(-half), Vec3::splat(half), 1).unwrap(),
        );
        let mut result = w.result;
        crate::trace::walk::clip_patch(world, &w, 0, &mut result);
        w.result = result;
        w
    }

    #[test]
    fn flat_patch_is_one_facet_on_the_patch_plane() {
        let map = flat_world();
        let world = map.view();
        assert_eq!(world.facets.len(), 1);
        let surface = &world.patch_planes[world.facets[0].surface_plane as usize];
        assert_eq!(surface.plane, [0.0, 0.0, 1.0, 0.0]);
        let p = &world.patches[0];
        assert_eq!((p.mins, p.maxs), ([-1.0, -1.0, -1.0], [65.0, 65.0, 1.0]));
    }

    #[test]
    fn ray_from_the_front_hits_short_of_the_surface() {
        let world = flat_world();
        let w = sweep(
            &world.view(),
            Vec3::new(16.0, 16.0, 64.0),
            Vec3::new(16.0, 16.0, -64.0),
            0.0,
        );
        assert_eq!(
            w.result.fraction,
            ((64.0 - SURFACE_CLIP_EPSILON) / 128.0) as f32
        );
        assert_eq!(w.result.normal, Vec3::Z);
        assert_eq!(
            (w.result.contents, w.result.surface_flags),
            (CONTENTS, FLAGS)
        );
        assert!(!w.result.startsolid);
    }

    #[test]
    fn ray_from_the_back_or_beside_misses() {
        let world = flat_world();
        let w = sweep(
            &world.view(),
            Vec3::new(16.0, 16.0, -64.0),
            Vec3::new(16.0, 16.0, 64.0),
            0.0,
        );
        assert_eq!(w.result.fraction, 1.0);
        let w = sweep(
            &world.view(),
            Vec3::new(80.0, 16.0, 64.0),
            Vec3::new(80.0, 16.0, -64.0),
            0.0,
        );
        assert_eq!(w.result.fraction, 1.0);
        assert_eq!(w.result.contents, 0);
    }

    #[test]
    fn box_hits_the_plane_expanded_by_its_size() {
        let world = flat_world();
        let w = sweep(
            &world.view(),
            Vec3::new(16.0, 16.0, 64.0),
            Vec3::new(16.0, 16.0, -64.0),
            8.0,
        );
        assert_eq!(
            w.result.fraction,
            ((56.0 - SURFACE_CLIP_EPSILON) / 128.0) as f32
        );
        assert_eq!((w.result.normal, w.result.dist), (Vec3::Z, 8.0));
        // The box reaches past the edge: still a hit.
        let w = sweep(
            &world.view(),
            Vec3::new(70.0, 16.0, 64.0),
            Vec3::new(70.0, 16.0, -64.0),
            8.0,
        );
        assert!(w.result.fraction < 1.0);
        // From behind, the box passes through (the back side is never hit).
        let w = sweep(
            &world.view(),
            Vec3::new(16.0, 16.0, -64.0),
            Vec3::new(16.0, 16.0, 64.0),
            8.0,
        );
        assert_eq!(w.result.fraction, 1.0);
    }

    #[test]
    fn position_test_is_inside_the_slab_only() {
        let world = flat_world();
        let at = |p: Vec3, half: f32| {
            let w = TraceWork::new(&TraceQuery {
                start: p,
                end: p,
                mins: Vec3::splat(-half),
                maxs: Vec3::splat(half),
                mask: 1,
                shape: None,
                exact: false,
            });
            position_test_patch(&world.view(), &world.view().patches[0], &w)
        };
        assert!(at(Vec3::new(32.0, 32.0, 4.0), 8.0));
        assert!(at(Vec3::new(32.0, 32.0, -7.0), 8.0));
        assert!(!at(Vec3::new(32.0, 32.0, 9.0), 8.0));
        assert!(!at(Vec3::new(80.0, 32.0, 0.0), 8.0));
        // Points are never inside a patch.
        assert!(!at(Vec3::new(32.0, 32.0, 0.0), 0.0));
    }

    /// The reach test in `f32` lanes answers as the reference's test in
    /// `f64` does, on swept bounds at, just inside and just outside each
    /// patch bound grown by the clip epsilon, and anywhere around.
    #[test]
    fn patch_reach_equals_the_reference_test() {
        let data = curved_world();
        let world = data.view();
        let reference = |patch: &Patch, [lo, hi]: &[Vec3A; 2]| {
            (0..3).all(|k| {
                (hi[k] as f64) >= patch.mins[k] as f64 - SURFACE_CLIP_EPSILON
                    && (lo[k] as f64) <= patch.maxs[k] as f64 + SURFACE_CLIP_EPSILON
            })
        };
        let mut rng = fastrand::Rng::with_seed(0x2545_f491_4f6c_dd1d);
        let (mut inside, mut outside) = (0, 0);
        for case in 0..40_000 {
            let p = case % world.patches.len();
            let patch = &world.patches[p];
            // A value near a grown bound (its f32 neighbours included) or
            // anywhere near the patch.
            let mut near = |bound: f32, grow: f64| {
                let at = (bound as f64 + grow) as f32;
                match rng.u32(..5) {
                    0 => at,
                    1 => at.next_up(),
                    2 => at.next_down(),
                    3 => bound,
                    _ => bound + (rng.f32() - 0.5) * 200.0,
                }
            };
            let mut lo = [0.0; 3];
            let mut hi = [0.0; 3];
            for k in 0..3 {
                lo[k] = near(patch.maxs[k], SURFACE_CLIP_EPSILON);
                hi[k] = near(patch.mins[k], -SURFACE_CLIP_EPSILON);
            }
            let bounds = [Vec3A::from_array(lo), Vec3A::from_array(hi)];
            let expected = reference(patch, &bounds);
            assert_eq!(
                patch_in_reach(&world, p, &bounds),
                expected,
                "patch {p}: {bounds:?}"
            );
            if expected {
                inside += 1;
            } else {
                outside += 1;
            }
        }
        assert!(
            inside > 2_000 && outside > 2_000,
            "{inside} in, {outside} out"
        );
        // A NaN bound reaches nothing.
        let nan = [Vec3A::splat(f32::NAN), Vec3A::splat(f32::NAN)];
        assert!(!patch_in_reach(&world, 0, &nan));
    }

    /// Curved patches facing every way: bumps along x and y, an arch on
    /// its side and a saddle, so facets have borders of every kind, inward
    /// ones included, and bevels.
    pub(crate) fn curved_world() -> crate::map::Map {
        let mut world = WorldData::default();
        let grids: [&dyn Fn(f32, f32) -> Vec3; 4] = [
            &|i, j| Vec3::new(i * 40.0, j * 40.0, if i == 1.0 { 48.0 } else { 0.0 }),
            &|i, j| Vec3::new(i * 40.0, j * 40.0, if j == 1.0 { -32.0 } else { 0.0 }),
            &|i, j| Vec3::new(if j == 1.0 { 56.0 } else { 0.0 }, i * 33.0, j * 40.0),
            &|i, j| Vec3::new(i * 40.0 + j * 7.0, j * 40.0, (i - 1.0) * (j - 1.0) * 30.0),
        ];
        for grid in grids {
            assert!(add_grid(&mut world, grid).is_some());
        }
        with_kernel(world)
    }

    /// The facet tests' cases: moves around [`curved_world`]'s patches, and
    /// a tally of hits and misses, both of which must be common.
    pub(crate) struct Cases {
        rng: fastrand::Rng,
        hits: usize,
        misses: usize,
    }

    impl Cases {
        pub(crate) fn new(seed: u64) -> Self {
            Cases {
                rng: fastrand::Rng::with_seed(seed),
                hits: 0,
                misses: 0,
            }
        }

        pub(crate) fn range(&mut self, lo: f32, hi: f32) -> f32 {
            lo + (hi - lo) * self.rng.f32()
        }

        /// Case `case`'s move: random ends, one case in five along an axis.
        pub(crate) fn random_move(&mut self, case: usize) -> (Vec3, Vec3) {
            let mut point = || {
                Vec3::new(
                    self.range(-40.0, 130.0),
                    self.range(-40.0, 130.0),
                    self.range(-60.0, 80.0),
                )
            };
            let start = point();
            let mut end = point();
            if case.is_multiple_of(5) {
                end = start;
                end[case % 3] = self.range(-60.0, 130.0);
            }
            (start, end)
        }

        pub(crate) fn tally(&mut self, hit: bool) {
            if hit {
                self.hits += 1;
            } else {
                self.misses += 1;
            }
        }

        pub(crate) fn assert_both_common(&self) {
            assert!(
                self.hits > 2_000 && self.misses > 2_000,
                "{} hits, {} misses",
                self.hits,
                self.misses
            );
        }
    }

    /// A hit as bits, to compare without `-0.0 == 0.0`.
    pub(crate) fn hit_bits(hit: Option<(f32, Vec3, f32)>) -> Option<[u32; 5]> {
        hit.map(|(f, n, d)| [f, n.x, n.y, n.z, d].map(f32::to_bits))
    }

    /// A facet's clip as the reference computes it, plane by plane, over
    /// its pushed-out planes (surface plane, then borders).
    pub(crate) fn reference_facet_hit(
        facet: &Facet,
        surface: (Vec3, f32),
        borders: impl Iterator<Item = (Vec3, f32)>,
        start: Vec3,
        end: Vec3,
    ) -> Option<(f32, Vec3, f32)> {
        let borders: Vec<_> = borders.collect();
        let planes = std::iter::once(surface).chain(borders.iter().copied());
        let planes = planes.map(|(n, d)| (glam::Vec3A::from(n), d));
        let clip = crate::trace::brush::tests::reference_clip(start.into(), end.into(), planes);
        let (frac, plane) = facet_entry(clip, facet)?;
        let (normal, dist) = entry_plane(plane, surface, borders.into_iter())?;
        Some((frac, normal, dist))
    }

    /// The lane clip of a facet answers as the reference's plane loop does,
    /// bit for bit: boxes of every size and offset (with uneven bounds whose
    /// centre rounds, so the corners are not each other's negatives)
    /// crossing, grazing, starting inside and missing the facets of curved
    /// patches.
    #[test]
    fn facet_lane_clip_equals_the_reference() {
        let data = curved_world();
        let world = data.view();
        assert!(
            world.accel.facets.iter().any(|f| f.inward != 0),
            "no inward border to test"
        );
        let mut cases = Cases::new(0x51_7cc1_b727_220a);
        for case in 0..40_000 {
            let facet = case % world.facets.len();
            let (start, end) = cases.random_move(case);
            let mut between = |lo: [f32; 3], hi: [f32; 3]| {
                Vec3::from_array(std::array::from_fn(|k| cases.range(lo[k], hi[k])))
            };
            let mins = between([-20.0, -20.0, -30.0], [0.0; 3]);
            let maxs = between([0.0; 3], [20.0, 20.0, 30.0]);
            let (mins, maxs) = if case.is_multiple_of(4) {
                (-maxs, maxs)
            } else {
                (mins, maxs)
            };
            let w = TraceWork::new(&TraceQuery::boxed(start, end, mins, maxs, 1).unwrap());
            if w.is_point {
                continue;
            }
            let from_lanes = box_facet_hit(&world, facet, &w).map(|h| (h.frac, h.normal, h.dist));
            let (surface, borders) = shifted_planes(&world, &world.facets[facet], &w);
            let (start, end) = (w.start.into(), w.end.into());
            let reference = reference_facet_hit(&world.facets[facet], surface, borders, start, end);
            assert_eq!(
                hit_bits(from_lanes),
                hit_bits(reference),
                "case {case}: facet {facet} {start} {end} {mins} {maxs}"
            );
            cases.tally(reference.is_some());
        }
        cases.assert_both_common();
    }

    /// Whether the ray, crossing the facet's surface at `at`, crosses it
    /// within every border, as the reference tests it, border by border.
    fn reference_within_borders(world: &Kernel, facet: &Facet, w: &TraceWork, at: f32) -> bool {
        let first = facet.first_border as usize;
        world.facet_borders[first..first + facet.num_borders as usize]
            .iter()
            .all(|b| {
                let (front, crossing) = ray_crossing(&world.patch_planes[b.plane as usize], w);
                if front ^ (b.inward != 0) {
                    crossing <= at
                } else {
                    crossing >= at
                }
            })
    }

    /// A ray's border test from the kernel's lanes answers as the
    /// reference's border loop does: rays crossing, grazing and missing
    /// the facets of curved patches, from either side.
    #[test]
    fn ray_facet_lanes_equal_the_border_loop() {
        let data = curved_world();
        let world = data.view();
        let mut cases = Cases::new(0x6a09_e667_f3bc_c908);
        for case in 0..40_000 {
            let facet = case % world.facets.len();
            let (start, mut end) = cases.random_move(case);
            if case.is_multiple_of(2) {
                // Through a point of the facet's patch's bounds.
                let patch = world
                    .patches
                    .iter()
                    .find(|p| {
                        (p.first_facet..p.first_facet + p.num_facets).contains(&(facet as u32))
                    })
                    .expect("every facet has a patch");
                let target = Vec3::from_array(std::array::from_fn(|k| {
                    cases.range(patch.mins[k], patch.maxs[k])
                }));
                end = start + (target - start) * 2.0;
            }
            let w = TraceWork::new(&TraceQuery::ray(start, end, 1).unwrap());
            let surface = &world.patch_planes[world.facets[facet].surface_plane as usize];
            let (front, at) = ray_crossing(surface, &w);
            if !front || at > 1.0 {
                continue;
            }
            let (records, inward) = facet_lanes(&world, facet);
            let lanes = ray_within_borders(records, inward, &w, at);
            let reference = reference_within_borders(&world, &world.facets[facet], &w, at);
            assert_eq!(lanes, reference, "case {case}: facet {facet} {start} {end}");
            cases.tally(reference);
        }
        cases.assert_both_common();
    }
}
