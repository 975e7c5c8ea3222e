//! Which entities a move's bounds meet, in scene order.
//!
//! Each axis is cut into slabs, and each slab holds two bit sets over the
//! entities: those whose bounds start in it or before, and those whose
//! bounds end in it or after. An entity can meet a query only if, on every
//! axis, it starts at or before the query's last slab and ends at or after
//! its first: six table words ANDed per 64 entities, whatever the size of
//! the move (a grid of cells had to OR every cell the move covers, and
//! cost a move half the world's trace). The bit sets only narrow the
//! entities: each candidate's bounds are then tested, so the answer is the
//! full scan's.

use crate::math::Vec3;
use glam::Vec3A;
use std::ops::ControlFlow;

/// Most slabs along an axis.
const MAX_SLABS: f32 = 64.0;

/// Slabs' smallest thickness: a player's box spans a few.
const MIN_SLAB: f32 = 16.0;

/// Scenes of at most this many entities keep each slab's bit sets in one
/// `u128` each, in fixed tables (see [`SmallSlabs`]).
const SMALL_SCENE: usize = 128;

#[derive(Debug, Default)]
pub(super) struct Broadphase {
    /// Each entity's bounds, in scene order.
    bounds: Vec<(Vec3A, Vec3A)>,
    /// Bit-set words: one per 64 entities.
    words: usize,
    /// Slab `k` of a query point is `(p - origin) · scale` clamped to
    /// `0..=last` and rounded: a non-decreasing function of `p`, so if an
    /// entity's range meets a query's, the entity's first slab is at most
    /// the query's last, and its last at least the query's first.
    origin: Vec3A,
    scale: Vec3A,
    last: Vec3A,
    /// Per axis, per slab, the words of the entities whose first slab is at
    /// most it (`starting`) and whose last slab is at least it (`ending`):
    /// axis `a` slab `k` from word `(first[a] + k) · words`.
    starting: Vec<u64>,
    ending: Vec<u64>,
    first: [usize; 3],
    /// The same sets for a scene of at most [`SMALL_SCENE`] entities, in
    /// place of `starting` and `ending`.
    small: Option<Box<SmallSlabs>>,
}

/// A small scene's slab sets: per axis, per slab, one `u128` each. The
/// look-up is then six loads at offsets masked to the table's size (no
/// slice bounds, no per-word loop), a third of the general look-up's
/// instructions being its index arithmetic and slice checks. (The offsets
/// are in bytes, scaled in the vector lanes with one shift: a record is 32
/// bytes, beyond an address's scale.)
#[derive(Debug)]
struct SmallSlabs {
    slabs: [[SlabSets; MAX_SLABS as usize]; 3],
}

#[derive(Debug, Default, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct SlabSets {
    starting: u128,
    ending: u128,
}

impl Broadphase {
    /// For entities with these bounds (`lo ≤ hi`, finite), in scene order.
    pub(super) fn new(bounds: &[(Vec3, Vec3)]) -> Self {
        Self::build(bounds, bounds.len() <= SMALL_SCENE)
    }

    /// [`Broadphase::new`], with the small scene's tables when `small` (the
    /// tests build both).
    fn build(bounds: &[(Vec3, Vec3)], small: bool) -> Self {
        let Some(first) = bounds.first() else {
            return Broadphase::default();
        };
        let (lo, hi) = bounds
            .iter()
            .fold(*first, |(lo, hi), (l, h)| (lo.min(*l), hi.max(*h)));
        let extent = (hi - lo).max(Vec3::splat(MIN_SLAB));
        let counts = (extent / MIN_SLAB)
            .ceil()
            .clamp(Vec3::ONE, Vec3::splat(MAX_SLABS));
        let words = bounds.len().div_ceil(64);
        let slabs = counts.to_array().map(|n| n as usize);
        let mut found = Broadphase {
            bounds: bounds
                .iter()
                .map(|(l, h)| ((*l).into(), (*h).into()))
                .collect(),
            words,
            origin: lo.into(),
            // `counts - 1` over the extent: the scene's corners round to
            // the first and last slab, its inside to the nearest slab.
            scale: ((counts - Vec3::ONE) / extent).into(),
            last: (counts - Vec3::ONE).into(),
            first: [0, slabs[0], slabs[0] + slabs[1]],
            ..Broadphase::default()
        };
        if small {
            let mut sets = Box::new(SmallSlabs {
                slabs: [[SlabSets::default(); MAX_SLABS as usize]; 3],
            });
            for (i, (l, h)) in bounds.iter().enumerate() {
                let bit = 1u128 << i;
                let (from, to) = (found.slab_of(*l), found.slab_of(*h));
                for (axis, row) in sets.slabs.iter_mut().enumerate() {
                    for (k, slab) in row.iter_mut().enumerate().take(slabs[axis]) {
                        if k >= from[axis] {
                            slab.starting |= bit;
                        }
                        if k <= to[axis] {
                            slab.ending |= bit;
                        }
                    }
                }
            }
            found.small = Some(sets);
            return found;
        }
        let total = slabs.iter().sum::<usize>() * words;
        found.starting = vec![0; total];
        found.ending = vec![0; total];
        for (i, (l, h)) in bounds.iter().enumerate() {
            let (word, bit) = (i / 64, 1u64 << (i % 64));
            let (from, to) = (found.slab_of(*l), found.slab_of(*h));
            for axis in 0..3 {
                let base = found.first[axis];
                for k in from[axis]..slabs[axis] {
                    found.starting[(base + k) * words + word] |= bit;
                }
                for k in 0..=to[axis] {
                    found.ending[(base + k) * words + word] |= bit;
                }
            }
        }
        found
    }

    /// The slab of `p` along each axis.
    #[inline(always)]
    fn slab_of(&self, p: impl Into<Vec3A>) -> [usize; 3] {
        rounded_lanes::<0>(self.slab_lanes(p.into()))
    }

    /// [`Broadphase::slab_of`] times a small scene's record size: the
    /// records' offsets in their rows.
    #[inline(always)]
    fn slab_offsets(&self, p: Vec3A) -> [usize; 3] {
        rounded_lanes::<SLAB_SHIFT>(self.slab_lanes(p))
    }

    /// `p`'s slab along each axis before rounding.
    #[inline(always)]
    fn slab_lanes(&self, p: Vec3A) -> Vec3A {
        ((p - self.origin) * self.scale)
            .max(Vec3A::ZERO)
            .min(self.last)
    }

    /// Calls `visit` with the index of each entity whose
    /// bounds meet `lo..hi` (touching counts), in scene order, until it
    /// breaks.
    #[inline(always)]
    pub(super) fn meeting<'a, B>(
        &'a self,
        lo: Vec3,
        hi: Vec3,
        mut visit: impl FnMut(usize) -> ControlFlow<B>,
    ) -> ControlFlow<B> {
        if let Some(small) = &self.small {
            return self.meeting_small(small, lo, hi, visit);
        }
        if self.bounds.is_empty() {
            return ControlFlow::Continue(());
        }
        let (l, h) = (self.slab_of(lo), self.slab_of(hi));
        // Each table's row for the query.
        let row = |table: &'a [u64], axis: usize, k: usize| {
            let at = (self.first[axis] + k) * self.words;
            table.get(at..at + self.words).unwrap_or(&[])
        };
        let (qlo, qhi) = (Vec3A::from(lo), Vec3A::from(hi));
        let rows = row(&self.starting, 0, h[0])
            .iter()
            .zip(row(&self.starting, 1, h[1]))
            .zip(row(&self.starting, 2, h[2]))
            .zip(row(&self.ending, 0, l[0]))
            .zip(row(&self.ending, 1, l[1]))
            .zip(row(&self.ending, 2, l[2]));
        for (word, (((((a, b), c), d), e), f)) in rows.enumerate() {
            let mut found = a & b & c & d & e & f;
            while found != 0 {
                let i = 64 * word + found.trailing_zeros() as usize;
                found &= found - 1;
                if let Some((l, h)) = self.bounds.get(i) {
                    if !(l.cmpgt(qhi) | h.cmplt(qlo)).any() {
                        visit(i)?;
                    }
                }
            }
        }
        ControlFlow::Continue(())
    }

    /// The entities whose slabs `lo..hi` meets, from the tables alone:
    /// `None` when there is none (most moves), which is all a move that
    /// meets no entity pays. [`Broadphase::visit_bits`] then tests a small
    /// scene's candidates' bounds; a large scene's are found again by
    /// [`Broadphase::meeting`].
    #[inline(always)]
    pub(super) fn candidates(&self, lo: Vec3A, hi: Vec3A) -> Option<Candidates> {
        if let Some(small) = &self.small {
            let found = self.small_bits(small, lo, hi);
            return (found != 0).then_some(Candidates::Small(found));
        }
        (!self.bounds.is_empty()).then_some(Candidates::Large)
    }

    /// [`Broadphase::meeting`] in a small scene's tables.
    #[inline(always)]
    fn meeting_small<B>(
        &self,
        small: &SmallSlabs,
        lo: Vec3,
        hi: Vec3,
        visit: impl FnMut(usize) -> ControlFlow<B>,
    ) -> ControlFlow<B> {
        let (lo, hi) = (lo.into(), hi.into());
        self.visit_bits(self.small_bits(small, lo, hi), lo, hi, visit)
    }

    /// A small scene's entities whose slabs meet `lo..hi`'s, as bits.
    #[inline(always)]
    fn small_bits(&self, small: &SmallSlabs, lo: Vec3A, hi: Vec3A) -> u128 {
        // Slabs are below `MAX_SLABS`, a power of two: the mask keeps the
        // offset in the row without a bounds check and changes nothing.
        const RECORD: usize = std::mem::size_of::<SlabSets>();
        const _: () = assert!(RECORD == 1 << SLAB_SHIFT);
        let row_mask = (MAX_SLABS as usize - 1) * RECORD;
        let at = |p| self.slab_offsets(p).map(|k| k & row_mask);
        let (l, h) = (at(lo), at(hi));
        let [x, y, z] = small.slabs.each_ref().map(bytemuck::bytes_of);
        // `starting` at a record's offset, `ending` 16 bytes further.
        let set = |row: &[u8], at: usize| bytemuck::pod_read_unaligned::<u128>(&row[at..at + 16]);
        set(x, h[0])
            & set(y, h[1])
            & set(z, h[2])
            & set(x, l[0] + 16)
            & set(y, l[1] + 16)
            & set(z, l[2] + 16)
    }

    /// Calls `visit` with each entity of `found` (bit `i`: entity `i`)
    /// whose bounds meet `lo..hi`, in scene order, until it breaks.
    #[inline(always)]
    pub(super) fn visit_bits<B>(
        &self,
        mut found: u128,
        qlo: Vec3A,
        qhi: Vec3A,
        mut visit: impl FnMut(usize) -> ControlFlow<B>,
    ) -> ControlFlow<B> {
        while found != 0 {
            let i = found.trailing_zeros() as usize;
            found &= found - 1;
            if self.meets(i, qlo, qhi) {
                visit(i)?;
            }
        }
        ControlFlow::Continue(())
    }

    /// Whether entity `i`'s bounds meet `lo..hi` (touching counts).
    #[inline(always)]
    pub(super) fn meets(&self, i: usize, lo: Vec3A, hi: Vec3A) -> bool {
        self.bounds
            .get(i)
            .is_some_and(|(l, h)| !(l.cmpgt(hi) | h.cmplt(lo)).any())
    }
}

/// A small scene's slab record is `1 << SLAB_SHIFT` bytes.
const SLAB_SHIFT: i32 = 5;

/// `v`'s lanes (each in `0..=63`, not NaN) rounded to the nearest integer,
/// ties to even, times `1 << SHIFT` (`SHIFT` at most 10).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn rounded_lanes<const SHIFT: i32>(v: Vec3A) -> [usize; 3] {
    use std::arch::x86_64::{_mm_cvtps_epi32, _mm_extract_epi16, _mm_slli_epi32};
    // One conversion for the three lanes (rounding as the default MXCSR
    // mode does: to nearest, ties to even), scaled by one shift, each lane
    // then read into a register as it is: cheaper than the rounding bias
    // and masks below.
    // SAFETY: value-only SSE2 intrinsics (every x86_64 processor has SSE2).
    unsafe {
        let rounded = _mm_slli_epi32::<SHIFT>(_mm_cvtps_epi32(v.into()));
        [
            _mm_extract_epi16::<0>(rounded) as usize,
            _mm_extract_epi16::<2>(rounded) as usize,
            _mm_extract_epi16::<4>(rounded) as usize,
        ]
    }
}

/// `v`'s lanes (each in `0..=63`, not NaN) rounded to the nearest integer,
/// ties to even, times `1 << SHIFT`.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn rounded_lanes<const SHIFT: i32>(v: Vec3A) -> [usize; 3] {
    // Adding 2²³ rounds a float in `0..2²²` to an integer held in the low
    // bits of the sum's mantissa.
    (v + Vec3A::splat(8_388_608.0))
        .to_array()
        .map(|b| ((b.to_bits() & 0x007f_ffff) as usize) << SHIFT)
}

/// What [`Broadphase::candidates`] found.
#[derive(Debug, Clone, Copy)]
pub(super) enum Candidates {
    /// A small scene's candidates, bit `i` for entity `i` (never 0).
    Small(u128),
    /// A large scene's: [`Broadphase::meeting`] finds them.
    Large,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every query's entities are the full scan's, in scene order: entities
    /// of all sizes, spread or clustered, and queries inside, outside,
    /// touching and spanning the scene.
    #[test]
    fn the_slabs_find_what_the_full_scan_finds() {
        let mut rng = fastrand::Rng::with_seed(0x005e_ed0f_9a1d);
        let point = |rng: &mut fastrand::Rng, scale: f32| {
            Vec3::new(rng.f32() - 0.5, rng.f32() - 0.5, rng.f32() - 0.5) * scale
        };
        let mut met = 0;
        for case in 0..400 {
            let count = [1, 3, 4, 5, 64, 70, 128, 129, 257, 1022][case % 10];
            let spread = [64.0, 1000.0, 8000.0][case % 3];
            let bounds: Vec<(Vec3, Vec3)> = (0..count)
                .map(|_| {
                    let centre = point(&mut rng, spread);
                    let half = point(&mut rng, if case % 5 == 0 { 600.0 } else { 60.0 }).abs();
                    // On a 1/8 grid half the time: faces shared with queries.
                    let snap = |v: Vec3| (v * 8.0).round() / 8.0;
                    (snap(centre - half), snap(centre + half))
                })
                .collect();
            // Both layouts when the scene is small enough for the small one.
            let small = count <= SMALL_SCENE;
            let broadphase = Broadphase::build(&bounds, small);
            let general = Broadphase::build(&bounds, false);
            assert_eq!(broadphase.small.is_some(), small);
            for _ in 0..200 {
                let (lo, hi) = if rng.bool() {
                    let (l, h) = bounds[rng.usize(..count)];
                    // Touching an entity's face, corner or edge.
                    let p = Vec3::new(
                        if rng.bool() { l.x } else { h.x },
                        if rng.bool() { l.y } else { h.y },
                        if rng.bool() { l.z } else { h.z },
                    );
                    (p - point(&mut rng, 40.0).abs(), p)
                } else {
                    let c = point(&mut rng, spread * 1.5);
                    let far = if rng.bool() { 30.0 } else { 3000.0 };
                    let half = point(&mut rng, far).abs();
                    (c - half, c + half)
                };
                let scan: Vec<usize> = (0..count)
                    .filter(|&i| {
                        let (l, h) = bounds[i];
                        !(l.cmpgt(hi).any() || h.cmplt(lo).any())
                    })
                    .collect();
                let mut found = Vec::new();
                let _ = broadphase.meeting(lo, hi, |i| {
                    found.push(i);
                    ControlFlow::<()>::Continue(())
                });
                assert_eq!(found, scan, "case {case}: {lo} {hi}");
                let mut by_general = Vec::new();
                let _ = general.meeting(lo, hi, |i| {
                    by_general.push(i);
                    ControlFlow::<()>::Continue(())
                });
                assert_eq!(by_general, scan, "case {case}: {lo} {hi}, general");
                // A trace's way: the tables' candidates, then their bounds.
                let (qlo, qhi) = (Vec3A::from(lo), Vec3A::from(hi));
                let mut by_candidates = Vec::new();
                match broadphase.candidates(qlo, qhi) {
                    None => {}
                    Some(Candidates::Small(bits)) => {
                        let _ = broadphase.visit_bits(bits, qlo, qhi, |i| {
                            by_candidates.push(i);
                            ControlFlow::<()>::Continue(())
                        });
                    }
                    Some(Candidates::Large) => {
                        // (Found again in full, by `meeting`.)
                        assert!(!small, "case {case}");
                        by_candidates.clone_from(&by_general)
                    }
                }
                assert_eq!(by_candidates, scan, "case {case}: {lo} {hi}, candidates");
                met += scan.len();
            }
        }
        assert!(met > 10_000, "{met}");
    }

    #[test]
    fn an_empty_scene_meets_nothing() {
        let broadphase = Broadphase::new(&[]);
        let far = Vec3::splat(1e6);
        let met = broadphase.meeting(-far, far, |_| ControlFlow::Break(()));
        assert_eq!(met, ControlFlow::Continue(()));
    }
}
