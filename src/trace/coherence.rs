//! The coherence pass: an order of a batch's queries in which neighbours
//! start near each other (a Morton curve through their start points), so
//! that a packet's members tend to walk the same nodes.

use crate::math::Vec3;

/// Bits per axis of the Morton code (three interleaved: 30 bits).
const BITS: u32 = 10;

/// The indices `0..starts.len()` ordered along a Morton curve through the
/// starts (quantized over their own bounds); equal codes keep index order,
/// so the order is a function of the starts alone.
pub(crate) fn morton_order(starts: &[Vec3]) -> Vec<u32> {
    let Some(&first) = starts.first() else {
        return Vec::new();
    };
    let (low, high) = starts
        .iter()
        .fold((first, first), |(lo, hi), &p| (lo.min(p), hi.max(p)));
    let cells = ((1u32 << BITS) - 1) as f32;
    let extent = (high - low).max(Vec3::splat(f32::MIN_POSITIVE));
    let scale = Vec3::splat(cells) / extent;
    let codes: Vec<u32> = starts
        .iter()
        .map(|&p| {
            // Finite starts land in 0..=cells; anything else (the batch
            // was validated, but the order must never panic) in cell 0.
            let cell = ((p - low) * scale).to_array().map(|c| {
                if c.is_finite() {
                    c.clamp(0.0, cells) as u32
                } else {
                    0
                }
            });
            morton3(cell)
        })
        .collect();
    radix_order(&codes)
}

/// The indices of `codes` sorted by code (`3 * BITS` bits), equal codes in
/// index order: a least-significant-digit radix sort, one pass per
/// [`BITS`] bits (a comparison sort cost 60 instructions per query).
fn radix_order(codes: &[u32]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..codes.len() as u32).collect();
    let mut next = vec![0u32; codes.len()];
    let digits = 1usize << BITS;
    let mut counts = vec![0usize; digits];
    for pass in 0..3 {
        let digit = |i: u32| ((codes[i as usize] >> (pass * BITS)) as usize) & (digits - 1);
        counts.fill(0);
        for &i in &order {
            counts[digit(i)] += 1;
        }
        let mut total = 0;
        for count in counts.iter_mut() {
            let here = *count;
            *count = total;
            total += here;
        }
        // Stable: each digit's indices keep their order from the last pass.
        for &i in &order {
            let slot = &mut counts[digit(i)];
            next[*slot] = i;
            *slot += 1;
        }
        std::mem::swap(&mut order, &mut next);
    }
    order
}

/// Interleaves the low [`BITS`] bits of each coordinate: x in bit 0, y in
/// bit 1, z in bit 2, and so on up.
fn morton3([x, y, z]: [u32; 3]) -> u32 {
    spread(x) | (spread(y) << 1) | (spread(z) << 2)
}

/// Moves bit `i` of a 10-bit value to bit `3 * i`.
fn spread(v: u32) -> u32 {
    let mut v = v & 0x3ff;
    v = (v | (v << 16)) & 0x0300_00ff;
    v = (v | (v << 8)) & 0x0300_f00f;
    v = (v | (v << 4)) & 0x030c_30c3;
    v = (v | (v << 2)) & 0x0924_9249;
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_puts_each_bit_three_apart() {
        for i in 0..BITS {
            assert_eq!(spread(1 << i), 1 << (3 * i));
        }
        assert_eq!(morton3([1, 0, 0]), 1);
        assert_eq!(morton3([0, 1, 0]), 2);
        assert_eq!(morton3([0, 0, 1]), 4);
        assert_eq!(morton3([1023, 1023, 1023]), (1 << 30) - 1);
    }

    #[test]
    fn the_order_is_a_permutation_that_groups_near_starts() {
        // Two clusters, interleaved in the input.
        let starts: Vec<Vec3> = (0..64)
            .map(|i| {
                let base = if i % 2 == 0 { 0.0 } else { 4096.0 };
                Vec3::new(base + (i % 7) as f32, base + (i % 5) as f32, base)
            })
            .collect();
        let order = morton_order(&starts);
        let mut seen = order.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..64).collect::<Vec<u32>>());
        // Each cluster is one run of the order.
        let changes = order
            .windows(2)
            .filter(|w| (w[0] % 2) != (w[1] % 2))
            .count();
        assert_eq!(changes, 1);
    }

    #[test]
    fn the_radix_order_is_a_stable_sort_by_code() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let codes: Vec<u32> = (0..5000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                // Few distinct codes: many ties, in every digit.
                (state as u32) & 0x3c0f_f00f
            })
            .collect();
        let mut want: Vec<u32> = (0..codes.len() as u32).collect();
        want.sort_by_key(|&i| (codes[i as usize], i));
        assert_eq!(radix_order(&codes), want);
    }

    #[test]
    fn degenerate_batches_do_not_panic() {
        assert!(morton_order(&[]).is_empty());
        assert_eq!(morton_order(&[Vec3::ONE; 3]), vec![0, 1, 2]);
        let odd = [Vec3::new(f32::NAN, 0.0, f32::INFINITY), Vec3::ZERO];
        assert_eq!(morton_order(&odd).len(), 2);
    }
}
