//! The query kernel: point contents, ray traces, box and shape sweeps
//! against a [`Kernel`] (a world and what loading derived from it, in
//! [`accel`]). No I/O and no allocation per query (the caller owns a
//! [`Scratch`]); batches spread over rayon's pool. The paths a trace takes
//! are drawn in `docs/architecture.md`.
//!
//! Why each path exists, and what holds it to the reference walk:
//! - the walk ([`mod@walk`]) answers as Quake 3 does (`tests/it/conformance.rs`);
//! - the fast search ([`fast`]) is several times faster; `bspq check`,
//!   `tests/it/batch.rs` and `tests/it/listing.rs` compare it with the walk;
//! - the eight-wide search ([`wide`]) is a third fewer node steps with AVX2;
//!   `tests/it/wide.rs` compares it with the four-wide one;
//! - the first pass ([`sieve`]) answers moves that reach no occupied grid
//!   cell without a search; `tests/it/batch.rs`, `tests/it/single_grid.rs`;
//! - the tie search ([`walk::first_tied_contact`]) finds the walk's answer
//!   among tied contacts without the whole walk; `tests/it/batch.rs`;
//! - onion hulls ([`onion`]) skip subtrees free for their box;
//!   `tests/it/onion.rs` against the box sweep;
//! - a world of one brush is clipped directly ([`lone_brush`]); the scene's
//!   tests against this world's fast path and walk.

pub mod accel;
mod batch;
mod brush;
mod contents;
#[cfg(feature = "exact")]
pub mod exact;
mod fast;
mod lone_brush;
pub mod onion;
pub(crate) mod patch;
pub mod shape;
pub mod sieve;
mod sweep;
mod walk;
#[cfg(target_arch = "x86_64")]
mod wide;
mod work;

pub(crate) use batch::with_scratch;
pub use batch::{
    any_hit_batch, any_hit_queries, run as run_batch, run_sifted as run_batch_sifted, trace_batch,
    trace_queries, BatchError, BatchOptions, BatchResults, TraceBatch,
};
pub use contents::point_contents;
#[cfg(feature = "exact")]
pub use exact::reference_trace;
pub(crate) use lone_brush::{BoxSweep, LoneAxial, LoneBrush, LoneClip};
pub use onion::{trace_hull, trace_hull_with_stats, HullError, HullQuery, HullStats};
pub use shape::{ConvexHull, InvalidShape, Shape};
pub use walk::WalkStats;
pub use work::{checked_point, InvalidTrace, Scratch, TraceQuery, TraceResult, MAX_COORDINATE};

use crate::world::World;
use work::TraceWork;

/// A world as the kernel reads it: the file's arrays and what loading
/// derived from them ([`accel::Accel`]: the kernel's trees and grids, built
/// by [`accel::build`] from the same world). It reads as the world it
/// wraps.
#[derive(Debug, Clone, Copy)]
pub struct Kernel<'a> {
    pub world: World<'a>,
    pub accel: &'a accel::Accel,
    /// Answer every trace with the BSP walk over the tree that decides the
    /// visit order (the reference the fast paths are held to), never the
    /// fast search or the batch's first pass.
    pub walk_only: bool,
}

impl<'a> Kernel<'a> {
    /// `world` with `accel`, which must have been built from it.
    pub fn new(world: World<'a>, accel: &'a accel::Accel) -> Self {
        Kernel {
            world,
            accel,
            walk_only: false,
        }
    }

    /// This world answering every trace with the reference walk (see
    /// [`Kernel::walk_only`]).
    pub fn reference(&self) -> Self {
        Kernel {
            walk_only: true,
            ..*self
        }
    }

    /// This world without the source's tree: answers that depend on the
    /// order in which leaves are visited come from the compiled tree (for
    /// tests and tools comparing the two).
    pub fn without_source_tree(&self) -> Self {
        Kernel {
            world: self.world.without_source_tree(),
            ..*self
        }
    }
}

impl<'a> std::ops::Deref for Kernel<'a> {
    type Target = World<'a>;

    fn deref(&self) -> &World<'a> {
        &self.world
    }
}

/// Traces `query` through `world` and returns the first contact.
pub fn trace(world: &Kernel, query: &TraceQuery, scratch: &mut Scratch) -> TraceResult {
    trace_probed::<_, true>(world, query, scratch, &mut ())
}

/// [`trace`], also counting what the walk did (for tuning; slower).
pub fn trace_with_stats(
    world: &Kernel,
    query: &TraceQuery,
    scratch: &mut Scratch,
) -> (TraceResult, WalkStats) {
    let mut stats = WalkStats::default();
    let result = trace_probed::<_, true>(world, query, scratch, &mut stats);
    (result, stats)
}

/// Whether the trace touches anything in its mask: exactly `fraction < 1` of
/// [`trace`], found faster by stopping at the first contact.
pub fn any_hit(world: &Kernel, query: &TraceQuery, scratch: &mut Scratch) -> bool {
    any_hit_probed::<_, true>(world, query, scratch, &mut ())
}

/// [`any_hit`], also counting what the walk did.
pub fn any_hit_with_stats(
    world: &Kernel,
    query: &TraceQuery,
    scratch: &mut Scratch,
) -> (bool, WalkStats) {
    let mut stats = WalkStats::default();
    let hit = any_hit_probed::<_, true>(world, query, scratch, &mut stats);
    (hit, stats)
}

/// [`trace`] with a probe; `SIFT`: a move is first asked of the
/// occupancy grid (a batch, whose first pass asked already, passes false).
#[inline(always)]
pub(crate) fn trace_probed<P: walk::Probe, const SIFT: bool>(
    world: &Kernel,
    query: &TraceQuery,
    scratch: &mut Scratch,
    probe: &mut P,
) -> TraceResult {
    if let Some(shape) = &query.shape {
        #[cfg(feature = "exact")]
        if query.exact {
            return exact::trace_exact(world, query, shape, scratch);
        }
        return sweep::trace_shape(world, query, shape, scratch);
    }
    // A move that reaches no occupied cell of the grid touches nothing.
    // (Measured: on the maps where most moves touch nothing, a miss through
    // the hierarchy cost several times this test; elsewhere the test costs
    // more than it saves, and the world's choice leaves it out.)
    if SIFT && sieve::Sieve::single::<false>(world).touches_nothing(query) {
        return sieve::missed(query);
    }
    let mut work = TraceWork::new(query);
    match walk(world, &mut work, scratch, probe) {
        Some(found) => found.result(query),
        None => work.finish(query),
    }
}

/// [`any_hit`] with a probe; `SIFT` as for [`trace_probed`].
#[inline(always)]
pub(crate) fn any_hit_probed<P: walk::Probe, const SIFT: bool>(
    world: &Kernel,
    query: &TraceQuery,
    scratch: &mut Scratch,
    probe: &mut P,
) -> bool {
    if let Some(shape) = &query.shape {
        // Exact mode refines the plane-shifted contact, which may move it
        // past the end: only the full answer tells.
        if query.exact && cfg!(feature = "exact") {
            return trace_probed::<P, false>(world, query, scratch, probe).fraction < 1.0;
        }
        return sweep::any_hit_shape(world, query, shape, scratch);
    }
    if SIFT && sieve::Sieve::single::<true>(world).touches_nothing(query) {
        return false;
    }
    let mut work = TraceWork::new(query);
    work.stop_at_any_hit = true;
    match walk(world, &mut work, scratch, probe) {
        Some(found) => found.fraction() < 1.0,
        None => work.result.fraction < 1.0,
    }
}

/// Answers a ray or box: moves with the fast trace, falling back to the
/// BSP walk when the answer depends on the walk's order; position tests
/// with the walk. The fast trace's answer is returned as found; the walk's
/// is left in `work.result`.
#[inline(always)]
fn walk<P: walk::Probe>(
    world: &Kernel,
    work: &mut TraceWork,
    scratch: &mut Scratch,
    probe: &mut P,
) -> Option<fast::Found> {
    if work.is_position_test() {
        scratch.begin(world);
        let mut inside = None;
        walk::position_test(world, &*work, scratch, probe, |_, contents| {
            inside = Some(contents);
            true
        });
        if let Some(contents) = inside {
            work.result.set_inside(contents);
        }
        return None;
    }
    if world.walk_only {
        scratch.begin(world);
        work.result = walk::trace_tree(world, &*work, scratch, probe);
        return None;
    }
    let outcome = fast::search(world, &world.accel.bvh, work, scratch, probe);
    settle(world, work, outcome, scratch, probe)
}

/// Makes the fast trace's `outcome` the move's answer: as found (returned,
/// built in one piece: filling `work.result` cost two stalled loads), a hit
/// (any-hit), or the BSP walk's answer (both left in `work.result`).
#[inline(always)]
fn settle<P: walk::Probe>(
    world: &Kernel,
    work: &mut TraceWork,
    outcome: fast::Outcome,
    scratch: &mut Scratch,
    probe: &mut P,
) -> Option<fast::Found> {
    match outcome {
        fast::Outcome::Answered(found) => return Some(found),
        fast::Outcome::Hit => {
            work.result.fraction = 0.0;
            return None;
        }
        // (A ray's patch hit met after the first tied brush could still
        // replace it: rays on maps with patches take the whole walk.)
        fast::Outcome::Tied(frac) if !work.is_point || world.patches.is_empty() => {
            if let Some(contact) = walk::first_tied_contact(world, &*work, scratch, frac) {
                probe.tie();
                return Some(fast::Found::contact(frac, contact));
            }
        }
        fast::Outcome::Tied(_) | fast::Outcome::Undecided => {}
    }
    probe.fallback();
    scratch.begin(world);
    work.result = walk::trace_tree(world, &*work, scratch, probe);
    None
}

/// One brush's contact with a trace, for diagnostics.
#[derive(Debug, Clone, Copy)]
pub struct BrushContact {
    pub brush: u32,
    pub source_index: u32,
    pub result: TraceResult,
}

/// Every brush in `query.mask` that the trace touches, each clipped on its
/// own (brute force, no tree): the raw material of "why this answer".
pub fn brush_contacts(world: &Kernel, query: &TraceQuery) -> Vec<BrushContact> {
    use fast::{Clipped, Clipper};
    let work = TraceWork::new(query);
    let mut out = Vec::new();
    for (i, b) in world.brushes.iter().enumerate() {
        if b.contents & query.mask == 0 {
            continue;
        }
        let mut result = TraceResult::default();
        if work.is_position_test() {
            if work.holds_start_brush(world, i) {
                result.set_inside(b.contents);
            }
        } else {
            match work.brush(world, i) {
                Clipped::Miss => {}
                Clipped::Inside { gets_out } => {
                    result.startsolid = true;
                    if !gets_out {
                        result.set_inside(b.contents);
                    }
                }
                Clipped::Enter { frac, contact } => {
                    result = fast::Found::contact(frac, contact).result(query);
                }
            }
        }
        if result.fraction < 1.0 || result.startsolid {
            out.push(BrushContact {
                brush: i as u32,
                source_index: b.source_index,
                result: result.ended(query),
            });
        }
    }
    out
}
