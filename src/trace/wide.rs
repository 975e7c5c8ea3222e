//! The full trace's search over the eight-wide trees
//! ([`crate::world::bvh::WideTrees`]), on processors with AVX2: the walk of
//! [`super::fast`] with eight children tested in one AVX vector per row, so
//! a move takes fewer, equally cheap node steps. The same primitives are
//! clipped by the same code and offered to the same [`Search`]; only the
//! order they are met in may differ, and the search's answer does not
//! depend on it (see [`super::fast`]), so the answers are the four-wide
//! search's bit for bit (the tests compare both).

use super::fast::{pop_within, primitive, push_nearest_last, Clipper, Entry, Ray, Search, Stop};
use super::walk::Probe;
use crate::world::bvh::{Bvh, WideNode, PRIMITIVE, WIDE};
use crate::world::World;
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
/// (the four-wide test's operations, lane for lane), and the lanes entered
/// no later than `limit` whose contents meet `mask`, as a vector mask.
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
#[inline]
fn enter(ray: &Ray8, node: &WideNode, limit: f32, mask: __m256i) -> (__m256, __m256) {
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
    (near, _mm256_andnot_ps(_mm256_castsi256_ps(unmet), entered))
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
/// to the end of the move (as `fast::run` does over the four-wide ones).
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
#[allow(clippy::too_many_arguments)]
pub(super) fn run_wide<C: Clipper, P: Probe>(
    world: &World,
    bvh: &Bvh,
    ray: &Ray,
    all_patches: bool,
    clipper: &C,
    search: &mut Search,
    stack: &mut [Entry],
    probe: &mut P,
) -> Result<(), Stop> {
    let ray = ray8(ray);
    let wide = &bvh.wide;
    if !all_patches {
        let nodes = wide.combined_for(clipper.segment().2);
        return walk(
            world, bvh, nodes, false, &ray, clipper, search, stack, probe,
        );
    }
    walk(
        world,
        bvh,
        &wide.brushes,
        false,
        &ray,
        clipper,
        search,
        stack,
        probe,
    )?;
    walk(
        world,
        bvh,
        &wide.patches,
        true,
        &ray,
        clipper,
        search,
        stack,
        probe,
    )
}

/// One tree's walk, nearest child first (see `fast::walk_full`).
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
#[allow(clippy::too_many_arguments)]
#[inline]
fn walk<C: Clipper, P: Probe>(
    world: &World,
    bvh: &Bvh,
    nodes: &[WideNode],
    to_the_end: bool,
    ray: &Ray8,
    clipper: &C,
    search: &mut Search,
    stack: &mut [Entry],
    probe: &mut P,
) -> Result<(), Stop> {
    if nodes.is_empty() {
        return Ok(());
    }
    let mask = _mm256_set1_epi32(clipper.mask() as i32);
    let limit = |search: &Search| if to_the_end { 1.0 } else { search.window() };
    let mut current = 0u32;
    let mut top = 0;
    'visit: loop {
        if current & PRIMITIVE != 0 {
            primitive(world, bvh, current, clipper, search, probe)?;
        } else {
            probe.bvh_node();
            let node = &nodes[current as usize];
            let (near, entered) = enter(ray, node, limit(search), mask);
            let hits = _mm256_movemask_ps(entered) as u32;
            if hits != 0 && hits & (hits - 1) == 0 {
                current = node.children[hits.trailing_zeros() as usize];
                continue 'visit;
            }
            if hits != 0 {
                let lanes = entries(node, near, entered, hits);
                let count = hits.count_ones() as usize;
                current = if count <= 4 {
                    let [a, b, c, d, ..] = lanes;
                    push_nearest_last([a, b, c, d], count, stack, &mut top)
                } else {
                    push_many(lanes, count, stack, &mut top)
                };
                continue 'visit;
            }
        }
        match pop_within(stack, &mut top, limit(search)) {
            Some(next) => current = next,
            None => return Ok(()),
        }
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
