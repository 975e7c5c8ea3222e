//! The full trace's search over the eight-wide trees
//! ([`super::accel::bvh::WideTrees`]), on processors with AVX2: the search
//! of [`super::fast`] with eight children tested in one AVX vector per row,
//! so a move takes fewer, equally cheap node steps. The same primitives are
//! clipped by the same code and offered to the same search; only the order
//! they are met in may differ, and the search's answer does not depend on
//! it (see [`super::fast`]), so the answers are the four-wide search's bit
//! for bit (`tests/wide.rs` compares both).

use super::accel::bvh::{Avx2, WideNode, WIDE};
use super::accel::cores::CoreLanes;
use super::fast::{push_nearest_last, Clipper, Entry, Lanes, Ray, Searching, Stop};
use super::walk::Probe;
use std::arch::x86_64::*;

/// A move's slab constants, one AVX splat per axis (see [`Ray`]).
struct Ray8 {
    low: [__m256; 3],
    high: [__m256; 3],
    inv: [__m256; 3],
}

/// The same constants as `ray`'s, eight lanes wide.
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
fn ray8(ray: &Ray) -> Ray8 {
    // (Each of the four-wide splats' lanes holds the axis's value.)
    let splat = |v: &[glam::Vec4; 3]| {
        [0, 1, 2].map(|k| {
            let lanes = __m128::from(v[k]);
            _mm256_insertf128_ps::<1>(_mm256_castps128_ps256(lanes), lanes)
        })
    };
    Ray8 {
        low: splat(&ray.low),
        high: splat(&ray.high),
        inv: splat(&ray.inv),
    }
}

/// Per lane the fraction where the move enters the child's grown bounds
/// (the four-wide test's operations, lane for lane), the lanes entered no
/// later than `limit` whose contents meet `mask` as a vector mask, and
/// those lanes as a bitmask.
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
#[inline]
fn enter(ray: &Ray8, node: &WideNode, limit: f32, mask: __m256i) -> ((__m256, __m256), u32) {
    let mut near = _mm256_setzero_ps();
    let mut far = _mm256_set1_ps(limit);
    for k in 0..3 {
        // SAFETY: the rows are 32-byte aligned arrays of eight f32 (the
        // node is 64-byte aligned and each row 32 bytes long).
        let (min, max) = unsafe {
            (
                _mm256_load_ps(node.min[k].as_ptr()),
                _mm256_load_ps(node.max[k].as_ptr()),
            )
        };
        let a = _mm256_mul_ps(_mm256_sub_ps(min, ray.low[k]), ray.inv[k]);
        let b = _mm256_mul_ps(_mm256_sub_ps(max, ray.high[k]), ray.inv[k]);
        near = _mm256_max_ps(near, _mm256_min_ps(a, b));
        far = _mm256_min_ps(far, _mm256_max_ps(a, b));
    }
    let entered = _mm256_cmp_ps::<_CMP_LE_OS>(near, far);
    // SAFETY: eight u32, 32-byte aligned (they follow six 32-byte rows).
    let contents = unsafe { _mm256_load_si256(node.contents.as_ptr().cast()) };
    let unmet = _mm256_cmpeq_epi32(_mm256_and_si256(contents, mask), _mm256_setzero_si256());
    let entered = _mm256_andnot_ps(_mm256_castsi256_ps(unmet), entered);
    ((near, entered), _mm256_movemask_ps(entered) as u32)
}

/// For each set of lanes (a bitmask), the lanes in it in order, then the
/// others: a permutation that moves the entered lanes to the front.
const FRONT: [[u8; WIDE]; 256] = {
    let mut table = [[0u8; WIDE]; 256];
    let mut bits = 0;
    while bits < 256 {
        let mut at = 0;
        let mut lane = 0;
        while lane < WIDE {
            if bits & (1 << lane) != 0 {
                table[bits][at] = lane as u8;
                at += 1;
            }
            lane += 1;
        }
        lane = 0;
        while lane < WIDE {
            if bits & (1 << lane) == 0 {
                table[bits][at] = lane as u8;
                at += 1;
            }
            lane += 1;
        }
        bits += 1;
    }
    table
};

/// The entries of the lanes in `hits` (two or more), as [`Entry`]s, the
/// entered ones first in lane order, [`Entry::NONE`] after them.
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
#[inline]
fn entries(node: &WideNode, near: __m256, entered: __m256, hits: u32) -> [Entry; WIDE] {
    let all = _mm256_set1_epi32(-1);
    let not_entered = _mm256_andnot_si256(_mm256_castps_si256(entered), all);
    // The entry fraction's bits without the sign (-0.0 is 0), all ones for
    // a lane not entered; likewise the child.
    let bits = _mm256_and_si256(_mm256_castps_si256(near), _mm256_set1_epi32(0x7FFF_FFFF));
    let bits = _mm256_or_si256(bits, not_entered);
    // SAFETY: eight u32, 32-byte aligned.
    let children = unsafe { _mm256_load_si256(node.children.as_ptr().cast()) };
    let children = _mm256_or_si256(children, not_entered);
    let order = FRONT[(hits & 0xFF) as usize];
    let order = _mm256_cvtepu8_epi32(_mm_set_epi64x(0, i64::from_le_bytes(order)));
    let bits = _mm256_permutevar8x32_epi32(bits, order);
    let children = _mm256_permutevar8x32_epi32(children, order);
    // An entry is the child in the low half and the fraction in the high.
    let low = _mm256_unpacklo_epi32(children, bits);
    let high = _mm256_unpackhi_epi32(children, bits);
    let mut out = [0u64; WIDE];
    // SAFETY: `out` holds 64 bytes; each store writes 16 of them.
    unsafe {
        let p = out.as_mut_ptr().cast::<__m128i>();
        _mm_storeu_si128(p, _mm256_castsi256_si128(low));
        _mm_storeu_si128(p.add(1), _mm256_castsi256_si128(high));
        _mm_storeu_si128(p.add(2), _mm256_extracti128_si256::<1>(low));
        _mm_storeu_si128(p.add(3), _mm256_extracti128_si256::<1>(high));
    }
    out.map(Entry::from_bits)
}

/// The full trace's search (not any-hit) over the eight-wide trees, once
/// the unbounded primitives are clipped: boxes and shapes search the tree
/// over brushes and patches, rays the brushes' tree and then the patches'
/// to the end of the move (as over the four-wide ones).
///
/// # Safety
/// The processor must have the features this is compiled for: only
/// [`Avx2::search`] calls it, with its proof.
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
unsafe fn search_wide<C: Clipper, P: Probe>(
    s: &mut Searching<C, P>,
    ray: &Ray,
    all_patches: bool,
) -> Result<(), Stop> {
    let eight = Eight {
        ray: ray8(ray),
        mask: _mm256_set1_epi32(s.clipper.mask() as i32),
    };
    let wide = &s.bvh.wide;
    if !all_patches {
        let nodes = wide.combined_for(s.clipper.segment().2);
        return s.tree::<_, false>(&eight, nodes, &[], false);
    }
    s.tree::<_, false>(&eight, &wide.brushes, &[], false)?;
    s.tree::<_, false>(&eight, &wide.patches, &[], true)
}

impl Avx2 {
    /// The full trace's search over the eight-wide trees (see
    /// [`search_wide`]).
    #[inline(always)]
    pub(super) fn search<C: Clipper, P: Probe>(
        self,
        s: &mut Searching<C, P>,
        ray: &Ray,
        all_patches: bool,
    ) -> Result<(), Stop> {
        // SAFETY: an `Avx2` exists only where `Avx2::detect` found every
        // feature `search_wide` is compiled for.
        unsafe { search_wide(s, ray, all_patches) }
    }
}

/// The eight-wide trees' lanes. Made only inside [`search_wide`], so its
/// methods run only where the processor has the features.
struct Eight {
    ray: Ray8,
    mask: __m256i,
}

impl Lanes for Eight {
    type Node = WideNode;
    type Near = (__m256, __m256);

    #[inline(always)]
    fn enter(&self, node: &WideNode, limit: f32) -> ((__m256, __m256), u32) {
        // SAFETY: see `Eight`.
        unsafe { enter(&self.ray, node, limit, self.mask) }
    }

    #[inline(always)]
    fn child(node: &WideNode, lane: usize) -> u32 {
        node.children[lane]
    }

    #[inline(always)]
    fn push_nearest_last(
        node: &WideNode,
        (near, entered): (__m256, __m256),
        hits: u32,
        stack: &mut [Entry],
        top: &mut usize,
    ) -> u32 {
        // SAFETY: see `Eight`.
        let lanes = unsafe { entries(node, near, entered, hits) };
        let count = hits.count_ones() as usize;
        if count <= 4 {
            let [a, b, c, d, ..] = lanes;
            push_nearest_last([a, b, c, d], count, stack, top)
        } else {
            push_many(lanes, count, stack, top)
        }
    }

    fn core_hit(&self, _cores: &[CoreLanes], _node: u32) -> bool {
        // (Any-hit searches the four-wide trees.)
        false
    }
}

/// Pushes all but the nearest of `count` (five or more) entered lanes,
/// nearest on top, and returns the nearest's child. Out of the loop: under
/// a twentieth of the node steps that enter two or more children on the
/// development maps enter more than four.
#[cold]
#[inline(never)]
fn push_many(mut lanes: [Entry; WIDE], count: usize, stack: &mut [Entry], top: &mut usize) -> u32 {
    lanes.sort_unstable_by(|x, y| y.cmp(x));
    let first = WIDE - count;
    stack[*top..*top + count - 1].copy_from_slice(&lanes[first..WIDE - 1]);
    *top += count - 1;
    lanes[WIDE - 1].child()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each row of the table lists the lanes of its set in order, then the
    /// others in order: a permutation with the set in front.
    #[test]
    fn the_front_table_puts_the_set_first() {
        for (bits, row) in FRONT.iter().enumerate() {
            let set: Vec<u8> = (0..WIDE as u8).filter(|&l| bits & (1 << l) != 0).collect();
            let rest: Vec<u8> = (0..WIDE as u8).filter(|&l| bits & (1 << l) == 0).collect();
            assert_eq!(row.to_vec(), [set, rest].concat(), "{bits:08b}");
        }
    }
}
