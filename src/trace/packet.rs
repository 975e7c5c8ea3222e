//! Packets: up to [`PACKET`] moves walk the kernel's hierarchy together.
//!
//! A node is fetched once for the whole packet and slab-tested for each
//! member still interested in it; a child is pushed once with the members
//! that entered it (and each one's entry fraction), nearest first by the
//! nearest member. Each member keeps its own [`Search`] and prunes by its
//! own window, so it clips exactly the primitives its single search could
//! need, only in another order; the search's answer does not depend on the
//! order (see [`super::fast`]), and a member whose answer would is
//! [`Outcome::Undecided`], as alone. A subtree only one member entered goes
//! to that member's single walk. On every workload measured this is slower
//! than single queries (the four-wide nodes already fill the lanes with
//! children; see the README), so batches use packets only when asked.

use super::fast::{
    lanes_in_mask, primitive_unmasked, sort_farthest_first, walk as walk_alone, Clipper, Outcome,
    Ray, Search, Stop,
};
use super::work::Scratch;
use crate::math::lanes_of;
use crate::world::bvh::{Bvh, BvhNode, PRIMITIVE, SMALL_BOX_HALF, WIDTH};
use crate::world::cores::CoreLanes;
use crate::world::World;
use glam::{Vec3A, Vec4};

/// Moves per packet (one SIMD lane each).
pub(crate) const PACKET: usize = 4;

/// A pushed child: the members that entered it, where each did (one lane
/// per member) and the nearest of those (the visit order's key).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PacketEntry {
    near: Vec4,
    child: u32,
    members: u32,
    nearest: f32,
}

/// Calls `f` with the index of each member set in `members`.
#[inline(always)]
fn for_each_member(mut members: u32, mut f: impl FnMut(usize)) {
    while members != 0 {
        let m = members.trailing_zeros() as usize;
        members &= members - 1;
        f(m);
    }
}

/// The members' slab-test constants, one lane per member (structure of
/// arrays): a child's bounds grown by member `m`'s box are entered at
/// `(min - low[m]) * inv[m]` and `(max - high[m]) * inv[m]` per axis.
struct Rays {
    low: [Vec4; 3],
    high: [Vec4; 3],
    inv: [Vec4; 3],
}

impl Rays {
    /// Lanes past the last member repeat it (their bits are never set).
    fn new<C: Clipper>(clippers: &[C]) -> Self {
        let mut low = [[0.0; PACKET]; 3];
        let mut high = [[0.0; PACKET]; 3];
        let mut inv = [[0.0; PACKET]; 3];
        for m in 0..PACKET {
            let (start, end, half) = clippers[m.min(clippers.len() - 1)].segment();
            for k in 0..3 {
                let d = end[k] - start[k];
                // As the single search: a zero component never crosses a
                // slab, and a huge finite reciprocal avoids 0 * inf.
                let r = 1.0 / d;
                inv[k][m] = if r.is_finite() {
                    r
                } else {
                    1e30f32.copysign(d)
                };
                low[k][m] = start[k] + half[k];
                high[k][m] = start[k] - half[k];
            }
        }
        Rays {
            low: low.map(Vec4::from_array),
            high: high.map(Vec4::from_array),
            inv: inv.map(Vec4::from_array),
        }
    }

    /// Member `m`'s constants in the single search's form (splats).
    fn alone(&self, m: usize) -> Ray {
        let splat = |v: &[Vec4; 3]| v.map(|lanes| Vec4::splat(lanes[m]));
        Ray {
            low: splat(&self.low),
            high: splat(&self.high),
            inv: splat(&self.inv),
        }
    }

    /// Per member, where its move enters child `slot`'s grown bounds, and
    /// a bitmask of the members that enter it no later than their `limits`.
    /// (The same operations per lane as the single search's test.)
    #[inline(always)]
    fn enter(&self, node: &BvhNode, slot: usize, limits: Vec4) -> (Vec4, u32) {
        let mut near = Vec4::ZERO;
        let mut far = limits;
        for k in 0..3 {
            let a = (Vec4::splat(node.min[k][slot]) - self.low[k]) * self.inv[k];
            let b = (Vec4::splat(node.max[k][slot]) - self.high[k]) * self.inv[k];
            near = near.max(a.min(b));
            far = far.min(a.max(b));
        }
        (near, near.cmple(far).bitmask())
    }
}

/// The packet's members: their moves, searches and which still run.
struct Members<'a, C> {
    clippers: &'a [C],
    searches: [Search; PACKET],
    stops: [Result<(), Stop>; PACKET],
    /// Members whose search has not stopped.
    running: u32,
    /// The members' contents mask, when they share one.
    mask: Option<u32>,
}

impl<C: Clipper> Members<'_, C> {
    /// Where each member stops looking in a tree it searches to the end of
    /// its move (a member in `to_the_end`) or to its window.
    #[inline(always)]
    fn limits(&self, to_the_end: u32) -> Vec4 {
        Vec4::from_array(std::array::from_fn(|m| {
            if to_the_end & (1 << m) != 0 {
                1.0
            } else {
                self.searches[m].window()
            }
        }))
    }

    /// Of `members`, those whose mask meets `contents`.
    #[inline(always)]
    fn masked(&self, members: u32, contents: u32) -> u32 {
        let mut kept = 0;
        for_each_member(members, |m| {
            if self.clippers[m].mask() & contents != 0 {
                kept |= 1 << m;
            }
        });
        kept
    }

    /// Clips primitive `reference` for each of `members`.
    fn clip(&mut self, world: &World, bvh: &Bvh, reference: u32, members: u32) {
        for_each_member(members, |m| {
            let stop = primitive_unmasked(
                world,
                bvh,
                reference,
                &self.clippers[m],
                &mut self.searches[m],
                &mut (),
            );
            if let Err(stop) = stop {
                self.stops[m] = Err(stop);
                self.running &= !(1 << m);
            }
        });
    }
}

/// Searches the hierarchy for each of `clippers` (moves, not position
/// tests; one to [`PACKET`]): entry `i` of the answer is what
/// [`super::fast::search`] answers for `clippers[i]` alone.
pub(crate) fn search_packet<C: Clipper>(
    world: &World,
    bvh: &Bvh,
    clippers: &[C],
    scratch: &mut Scratch,
) -> [Outcome; PACKET] {
    let count = clippers.len().min(PACKET);
    let mut outcomes = [Outcome::Undecided; PACKET];
    if count == 0 {
        return outcomes;
    }
    let clippers = &clippers[..count];
    let first_mask = clippers[0].mask();
    let mut members = Members {
        clippers,
        searches: std::array::from_fn(|_| Search::new()),
        stops: std::array::from_fn(|_| Ok(())),
        running: (1 << count) - 1,
        mask: clippers
            .iter()
            .all(|c| c.mask() == first_mask)
            .then_some(first_mask),
    };
    for &reference in &bvh.unbounded {
        let running = members.running;
        members.clip(world, bvh, reference, running);
    }
    let mut patches_to_the_end = 0;
    for (m, c) in clippers.iter().enumerate() {
        if c.patch_hits_reach_back() {
            patches_to_the_end |= 1 << m;
        }
    }
    let rays = Rays::new(clippers);
    let depth = bvh.stack_depth + WIDTH;
    if scratch.packet_stack.len() < depth {
        scratch.packet_stack.resize(depth, PacketEntry::default());
    }
    let mut stacks = Stacks {
        packet: &mut scratch.packet_stack,
        alone: super::fast::search_stack(&mut scratch.bvh_stack, bvh),
    };
    // Rays search the brushes' tree, then the patches' (to the end of the
    // move); boxes the tree over both for their size, as alone.
    let mut live = members.running;
    let small = clippers.iter().enumerate().fold(0, |small, (m, c)| {
        let fits = c.segment().2.cmple(Vec3A::splat(SMALL_BOX_HALF)).all();
        small | u32::from(fits) << m
    });
    let (small_nodes, small_cores) = bvh.combined_for(Vec3A::ZERO);
    let (large_nodes, large_cores) = bvh.combined_for(Vec3A::INFINITY);
    let walks: [(&[BvhNode], &[CoreLanes], u32, u32); 4] = [
        (&bvh.brushes, &bvh.brush_cores, 0, patches_to_the_end),
        (&bvh.patches, &[], patches_to_the_end, patches_to_the_end),
        (small_nodes, small_cores, 0, !patches_to_the_end & small),
        (large_nodes, large_cores, 0, !patches_to_the_end & !small),
    ];
    for (nodes, cores, to_the_end, group) in walks {
        members.running = live & group;
        let tree = Tree {
            world,
            bvh,
            nodes,
            cores,
            to_the_end,
        };
        walk(&tree, &rays, &mut members, &mut stacks);
        live = live & !group | members.running;
    }
    let Members {
        searches, stops, ..
    } = members;
    for (m, (search, stop)) in searches.iter().zip(stops).enumerate() {
        if m < count {
            outcomes[m] = search.outcome(stop);
        }
    }
    outcomes
}

/// One tree being searched.
struct Tree<'a> {
    world: &'a World<'a>,
    bvh: &'a Bvh,
    nodes: &'a [BvhNode],
    /// Its nodes' solid cores, for a member's any-hit walk alone.
    cores: &'a [CoreLanes],
    /// The members that search it to the end of their move rather than to
    /// their window.
    to_the_end: u32,
}

/// The packet's stack, and the one a member walking alone uses.
struct Stacks<'a> {
    packet: &'a mut [PacketEntry],
    alone: &'a mut [super::fast::Entry],
}

/// Walks one tree with the packet. A subtree only one member entered is
/// handed to that member's own (single) walk: packets pay off only where
/// members share nodes.
fn walk<C: Clipper>(tree: &Tree, rays: &Rays, members: &mut Members<C>, stacks: &mut Stacks) {
    if tree.nodes.is_empty() || members.running == 0 {
        return;
    }
    let Tree {
        world,
        bvh,
        nodes,
        cores,
        to_the_end,
    } = *tree;
    let stack = &mut *stacks.packet;
    let all_any_hit = members.clippers.iter().all(|c| c.any_hit());
    let mut limits = members.limits(to_the_end);
    let mut current = (0, members.running);
    let mut top = 0;
    'visit: loop {
        let (child, visiting) = current;
        if visiting & (visiting - 1) == 0 {
            let m = visiting.trailing_zeros() as usize;
            let stop = walk_alone(
                world,
                bvh,
                nodes,
                cores,
                child,
                to_the_end & visiting != 0,
                &rays.alone(m),
                &members.clippers[m],
                &mut members.searches[m],
                stacks.alone,
                &mut (),
            );
            if let Err(stop) = stop {
                members.stops[m] = Err(stop);
                members.running &= !visiting;
            }
            limits = members.limits(to_the_end);
        } else if child & PRIMITIVE != 0 {
            members.clip(world, bvh, child, visiting);
            limits = members.limits(to_the_end);
        } else {
            let node = &nodes[child as usize];
            let slots = match members.mask {
                Some(mask) => lanes_in_mask(&node.contents, mask),
                None => (1 << WIDTH) - 1,
            };
            let base = top;
            for slot in 0..WIDTH {
                if slots & (1 << slot) == 0 {
                    continue;
                }
                let (near, entered) = rays.enter(node, slot, limits);
                let mut entered = entered & visiting;
                if members.mask.is_none() {
                    entered = members.masked(entered, node.contents[slot]);
                }
                if entered != 0 {
                    let nearest =
                        Vec4::select(lanes_of(entered), near, Vec4::INFINITY).min_element();
                    stack[top] = PacketEntry {
                        near,
                        child: node.children[slot],
                        members: entered,
                        nearest,
                    };
                    top += 1;
                }
            }
            if top > base {
                if !all_any_hit {
                    sort_farthest_first(&mut stack[base..top], |e| e.nearest);
                }
                top -= 1;
                current = (stack[top].child, stack[top].members);
                continue 'visit;
            }
        }
        // Pop the next entry some running member still needs (windows may
        // have shrunk since it was pushed).
        loop {
            if top == 0 || members.running == 0 {
                return;
            }
            top -= 1;
            let entry = &stack[top];
            let needed = entry.members & members.running & entry.near.cmple(limits).bitmask();
            if needed != 0 {
                current = (entry.child, needed);
                continue 'visit;
            }
        }
    }
}
