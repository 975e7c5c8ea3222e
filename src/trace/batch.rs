//! Batches: many traces answered in one call, in structure-of-arrays form,
//! split across threads when large. Every answer is the one the single-query
//! path ([`super::trace`], [`super::any_hit`]) gives for the same query: the
//! kernel keeps no state between queries, so order, batch size and thread
//! count cannot change a bit of it.

use super::sieve::{missed, Moves, Sieve};
use super::work::{InvalidTrace, Scratch, TraceQuery, TraceResult};
use super::Kernel;
use crate::math::Vec3;
use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use thiserror::Error;

/// Traces with one box (`mins`..`maxs`, zero for rays) and one mask, or a
/// mask per query. Query `i` moves from `starts[i]` to `ends[i]`. Built only
/// by constructors that check it: as many ends (and masks) as starts, and
/// every query one that [`TraceQuery::boxed`] accepts.
#[derive(Debug, Clone, Copy)]
pub struct TraceBatch<'a> {
    starts: &'a [Vec3],
    ends: &'a [Vec3],
    mins: Vec3,
    maxs: Vec3,
    mask: u32,
    /// Per-query masks; when present they replace `mask`.
    masks: Option<&'a [u32]>,
}

impl<'a> TraceBatch<'a> {
    /// Rays from `starts` to `ends` with one mask.
    pub fn rays(starts: &'a [Vec3], ends: &'a [Vec3], mask: u32) -> Result<Self, BatchError> {
        Self::boxes(starts, ends, Vec3::ZERO, Vec3::ZERO, mask)
    }

    /// Sweeps of the box `mins..maxs` from `starts` to `ends` with one mask.
    pub fn boxes(
        starts: &'a [Vec3],
        ends: &'a [Vec3],
        mins: Vec3,
        maxs: Vec3,
        mask: u32,
    ) -> Result<Self, BatchError> {
        let batch = Self {
            starts,
            ends,
            mins,
            maxs,
            mask,
            masks: None,
        };
        batch.check()?;
        Ok(batch)
    }

    /// The same batch with a mask per query.
    pub fn with_masks(self, masks: &'a [u32]) -> Result<Self, BatchError> {
        if masks.len() != self.len() {
            return Err(BatchError::Masks {
                queries: self.len(),
                masks: masks.len(),
            });
        }
        Ok(Self {
            masks: Some(masks),
            ..self
        })
    }

    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Query `i`: checked when the batch was built.
    #[inline]
    pub fn query(&self, i: usize) -> TraceQuery {
        TraceQuery {
            start: self.starts[i],
            end: self.ends[i],
            mins: self.mins,
            maxs: self.maxs,
            mask: self.masks.map_or(self.mask, |m| m[i]),
            shape: None,
            exact: false,
        }
    }

    fn check(&self) -> Result<(), BatchError> {
        let n = self.starts.len();
        if self.ends.len() != n {
            return Err(BatchError::Ends {
                starts: n,
                ends: self.ends.len(),
            });
        }
        let (mins, maxs) = (self.mins, self.maxs);
        for (index, (&start, &end)) in self.starts.iter().zip(self.ends).enumerate() {
            TraceQuery::boxed(start, end, mins, maxs, self.mask)
                .map_err(|error| BatchError::Invalid { index, error })?;
        }
        Ok(())
    }

    /// Which of four queries surely touch nothing (see [`Sieve`]).
    #[inline(always)]
    fn touch_nothing(&self, sieve: &Sieve, group: [usize; 4]) -> u32 {
        let [a, b, c, d] = group;
        let (mins, maxs) = (self.mins, self.maxs);
        sieve.moves_touch_nothing(&Moves::of([
            [self.starts[a], self.ends[a], mins, maxs],
            [self.starts[b], self.ends[b], mins, maxs],
            [self.starts[c], self.ends[c], mins, maxs],
            [self.starts[d], self.ends[d], mins, maxs],
        ]))
    }
}

#[derive(Debug, Clone, Error, PartialEq)]
pub enum BatchError {
    #[error("{starts} starts but {ends} ends")]
    Ends { starts: usize, ends: usize },
    #[error("{masks} masks for {queries} queries")]
    Masks { queries: usize, masks: usize },
    #[error("query {index}: {error}")]
    Invalid { index: usize, error: InvalidTrace },
}

/// How a batch is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchOptions {
    /// Most threads to use (the calling thread is one of them).
    pub threads: usize,
    /// A thread gets at least this many queries: smaller batches stay on
    /// the calling thread, where a thread start would cost more than it saves.
    pub min_per_thread: usize,
}

impl Default for BatchOptions {
    fn default() -> Self {
        Self {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            min_per_thread: 256,
        }
    }
}

impl BatchOptions {
    /// Everything on the calling thread.
    pub fn single_thread() -> Self {
        Self {
            threads: 1,
            ..Self::default()
        }
    }

    pub fn with_threads(threads: usize) -> Self {
        Self {
            threads: threads.max(1),
            ..Self::default()
        }
    }

    /// How many threads a batch of `n` queries gets.
    pub fn threads_for(&self, n: usize) -> usize {
        (n / self.min_per_thread.max(1)).clamp(1, self.threads.max(1))
    }
}

/// Answers in structure-of-arrays form: entry `i` of each array belongs to query `i`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchResults {
    pub fractions: Vec<f32>,
    pub endpos: Vec<Vec3>,
    pub normals: Vec<Vec3>,
    pub dists: Vec<f32>,
    pub startsolid: Vec<bool>,
    pub allsolid: Vec<bool>,
    pub contents: Vec<u32>,
    pub surface_flags: Vec<u32>,
}

impl BatchResults {
    pub fn len(&self) -> usize {
        self.fractions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fractions.is_empty()
    }

    pub fn clear(&mut self) {
        self.fractions.clear();
        self.endpos.clear();
        self.normals.clear();
        self.dists.clear();
        self.startsolid.clear();
        self.allsolid.clear();
        self.contents.clear();
        self.surface_flags.clear();
    }

    pub fn push(&mut self, r: &TraceResult) {
        self.fractions.push(r.fraction);
        self.endpos.push(r.endpos);
        self.normals.push(r.normal);
        self.dists.push(r.dist);
        self.startsolid.push(r.startsolid);
        self.allsolid.push(r.allsolid);
        self.contents.push(r.contents);
        self.surface_flags.push(r.surface_flags);
    }

    /// Answer `i` as one record.
    pub fn get(&self, i: usize) -> Option<TraceResult> {
        Some(TraceResult {
            fraction: *self.fractions.get(i)?,
            endpos: *self.endpos.get(i)?,
            normal: *self.normals.get(i)?,
            dist: *self.dists.get(i)?,
            startsolid: *self.startsolid.get(i)?,
            allsolid: *self.allsolid.get(i)?,
            contents: *self.contents.get(i)?,
            surface_flags: *self.surface_flags.get(i)?,
        })
    }
}

/// Traces every query of `batch`; `out` is cleared and filled in query order.
pub fn trace_batch(
    world: &Kernel,
    batch: &TraceBatch,
    options: &BatchOptions,
    out: &mut BatchResults,
) {
    // The trace inlined here: a query built for a call, then read back in
    // lanes, stalled on its own stores.
    let sieve = Sieve::new(world);
    let results = run_sifted(
        batch.len(),
        options,
        |group| batch.touch_nothing(&sieve, group),
        |i| missed(&batch.query(i)),
        |i, scratch| super::trace_probed::<_, false>(world, &batch.query(i), scratch, &mut ()),
    );
    out.clear();
    for r in &results {
        out.push(r);
    }
}

/// Any-hit for every query of `batch`: `out[i]` is whether query `i` touches
/// anything in its mask (exactly `fraction < 1` of its full trace).
pub fn any_hit_batch(
    world: &Kernel,
    batch: &TraceBatch,
    options: &BatchOptions,
    out: &mut Vec<bool>,
) {
    let sieve = Sieve::new(world);
    *out = run_sifted(
        batch.len(),
        options,
        |group| batch.touch_nothing(&sieve, group),
        |_| false,
        |i, scratch| super::any_hit_probed::<_, false>(world, &batch.query(i), scratch, &mut ()),
    );
}

/// Traces a list of queries with any shapes and masks, in order.
pub fn trace_queries(
    world: &Kernel,
    queries: &[TraceQuery],
    options: &BatchOptions,
) -> Vec<TraceResult> {
    let sieve = Sieve::new(world);
    run_sifted(
        queries.len(),
        options,
        |[a, b, c, d]| sieve.touch_nothing([&queries[a], &queries[b], &queries[c], &queries[d]]),
        |i| missed(&queries[i]),
        |i, scratch| super::trace_probed::<_, false>(world, &queries[i], scratch, &mut ()),
    )
}

/// Any-hit for a list of queries with any shapes and masks, in order:
/// answer `i` is [`super::any_hit`] of `queries[i]`.
pub fn any_hit_queries(
    world: &Kernel,
    queries: &[TraceQuery],
    options: &BatchOptions,
) -> Vec<bool> {
    let sieve = Sieve::new(world);
    run_sifted(
        queries.len(),
        options,
        |[a, b, c, d]| sieve.touch_nothing([&queries[a], &queries[b], &queries[c], &queries[d]]),
        |_| false,
        |i, scratch| super::any_hit_probed::<_, false>(world, &queries[i], scratch, &mut ()),
    )
}

/// Pieces per thread a parallel batch is cut into (for balance) ...
const PIECES_PER_THREAD: usize = 8;
/// ... but no smaller than this many queries (taking a piece costs a lock).
const MIN_PIECE: usize = 64;

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::new());
}

/// Runs `answer(i)` for `i` in `0..n`, results in order: on the calling
/// thread alone, or in pieces taken by the calling thread and helpers on
/// rayon's global pool.
pub fn run<R, F>(n: usize, options: &BatchOptions, answer: F) -> Vec<R>
where
    R: Send,
    F: Fn(usize, &mut Scratch) -> R + Sync,
{
    run_pieces(n, options, |first, slots, scratch| {
        for (j, slot) in slots.iter_mut().enumerate() {
            slot.write(answer(first + j, scratch));
        }
    })
}

/// [`run`] with a first pass: `sift(indices)` gives a bitmask of which of
/// four queries' answers are already known (past the end of a batch the
/// last index repeats), `known(i)` such an answer, `answer` the rest. The
/// pass splits each piece into the known and the rest with no branch per
/// query (one would be mispredicted about as often as it saves a search).
pub fn run_sifted<R, S, K, F>(
    n: usize,
    options: &BatchOptions,
    sift: S,
    known: K,
    answer: F,
) -> Vec<R>
where
    R: Send,
    S: Fn([usize; 4]) -> u32 + Sync,
    K: Fn(usize) -> R + Sync,
    F: Fn(usize, &mut Scratch) -> R + Sync,
{
    run_pieces(n, options, |first, slots, scratch| {
        let len = slots.len();
        let mut lists = std::mem::take(&mut scratch.batch_lists);
        lists.clear();
        lists.resize(len + 1, 0);
        // The known from the front, the rest from the back: each query's
        // index is written at both ends, and one end moves past it.
        let (mut front, mut back) = (0, len);
        for group in (0..len).step_by(4) {
            let at = |k: usize| first + (group + k).min(len - 1);
            let known = sift([at(0), at(1), at(2), at(3)]);
            for k in 0..(len - group).min(4) {
                let is_known = known >> k & 1 != 0;
                lists[front] = (group + k) as u32;
                lists[back] = (group + k) as u32;
                front += usize::from(is_known);
                back -= usize::from(!is_known);
            }
        }
        for &j in &lists[..front] {
            slots[j as usize].write(known(first + j as usize));
        }
        for &j in lists[back + 1..].iter().rev() {
            slots[j as usize].write(answer(first + j as usize, scratch));
        }
        scratch.batch_lists = lists;
    })
}

/// Runs `piece(first, slots, scratch)` over pieces of `0..n`: it must write
/// every slot of `slots`, the answers to queries `first..first +
/// slots.len()`. On the calling thread alone (one piece), or in pieces
/// taken by the calling thread and helpers on rayon's global pool.
fn run_pieces<R, P>(n: usize, options: &BatchOptions, piece: P) -> Vec<R>
where
    R: Send,
    P: Fn(usize, &mut [MaybeUninit<R>], &mut Scratch) + Sync,
{
    let threads = options.threads_for(n);
    let mut out: Vec<R> = Vec::with_capacity(n);
    if threads <= 1 {
        // One thread: answers go straight into the output, in order.
        with_scratch(|scratch| piece(0, &mut out.spare_capacity_mut()[..n], scratch));
        // SAFETY: `piece` wrote every one of the first `n` slots (its
        // contract; a panic in it would not have returned here).
        unsafe { out.set_len(n) };
        return out;
    }
    // Several pieces per thread, taken by whichever thread is free: queries
    // differ in cost, and one piece per thread leaves the faster one idle.
    let piece_len = n.div_ceil(threads * PIECES_PER_THREAD).max(MIN_PIECE);
    let pieces_done = AtomicUsize::new(0);
    let piece_count = n.div_ceil(piece_len);
    {
        // Answers are written in place into the output's free space (an
        // intermediate vector and its copy cost a third of the second core).
        let pieces = Mutex::new(
            out.spare_capacity_mut()[..n]
                .chunks_mut(piece_len)
                .enumerate(),
        );
        let work = || {
            let mut scratch = TakenScratch::take();
            loop {
                // The lock is held only to take a piece (no answer panics
                // under it); a poisoned one still hands out pieces.
                let next = pieces.lock().unwrap_or_else(|e| e.into_inner()).next();
                let Some((k, slots)) = next else { break };
                piece(k * piece_len, slots, &mut scratch.0);
                pieces_done.fetch_add(1, Ordering::Release);
            }
        };
        // The calling thread works too, from the first query on: waking a
        // pool thread takes tens of microseconds on a virtual machine, and
        // handing the whole batch to the pool paid that two or three times
        // over per batch (for the job, the second thread, and waking the
        // caller again), 10-20 % of a 4096-query batch on two cores.
        rayon::in_place_scope(|scope| {
            for _ in 1..threads {
                scope.spawn(|_| work());
            }
            work();
            // The pieces still being answered end within one piece's time:
            // wait for them awake (the scope's own wait sleeps, and waking
            // from it costs as much as the piece).
            let deadline = Instant::now() + SPIN_LIMIT;
            while pieces_done.load(Ordering::Acquire) < piece_count && Instant::now() < deadline {
                std::hint::spin_loop();
            }
        });
    }
    // SAFETY: the scope returned normally (a panic in any piece would have
    // been resumed by it), so every piece was taken and its slots written
    // (`piece`'s contract), and together the pieces cover slots 0..n.
    unsafe { out.set_len(n) };
    out
}

/// How long the calling thread waits awake for the pool's last pieces
/// before it sleeps (a piece takes tens of microseconds).
const SPIN_LIMIT: Duration = Duration::from_micros(200);

/// This thread's scratch, taken out of its slot for a run of queries and
/// put back when dropped. Meanwhile the slot holds an empty one, which a
/// batch run from inside an answer (or a piece rayon starts on a thread
/// that waits for its own) takes in turn. Any scratch answers any query:
/// what it holds is only reused space.
struct TakenScratch(Scratch);

impl TakenScratch {
    fn take() -> Self {
        SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut slot) => TakenScratch(std::mem::take(&mut *slot)),
            Err(_) => TakenScratch(Scratch::new()),
        })
    }
}

impl Drop for TakenScratch {
    fn drop(&mut self) {
        SCRATCH.with(|cell| {
            if let Ok(mut slot) = cell.try_borrow_mut() {
                *slot = std::mem::take(&mut self.0);
            }
        });
    }
}

/// Runs `f` with this thread's scratch space.
pub(crate) fn with_scratch<T>(f: impl FnOnce(&mut Scratch) -> T) -> T {
    let mut scratch = TakenScratch::take();
    f(&mut scratch.0)
}
