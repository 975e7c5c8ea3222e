//! Batches: many traces answered in one call, in structure-of-arrays form,
//! split across threads when large. Every answer is the one the single-query
//! path ([`super::trace`], [`super::any_hit`]) gives for the same query: the
//! kernel keeps no state between queries, so order, batch size and thread
//! count cannot change a bit of it.
//!
//! Each query is answered by the scalar kernel (there is no packet path
//! yet), so any shape the scalar kernel knows works in a batch.

use super::work::{Scratch, TraceQuery, TraceResult};
use crate::math::Vec3;
use crate::world::World;
use rayon::prelude::*;
use std::cell::RefCell;
use thiserror::Error;

/// Traces with one shape (`mins`..`maxs`, zero for rays) and one mask, or a
/// mask per query. Query `i` moves from `starts[i]` to `ends[i]`.
#[derive(Debug, Clone, Copy)]
pub struct TraceBatch<'a> {
    pub starts: &'a [Vec3],
    pub ends: &'a [Vec3],
    pub mins: Vec3,
    pub maxs: Vec3,
    pub mask: u32,
    /// Per-query masks; when present they replace `mask`.
    pub masks: Option<&'a [u32]>,
}

impl<'a> TraceBatch<'a> {
    /// Rays from `starts` to `ends` with one mask.
    pub fn rays(starts: &'a [Vec3], ends: &'a [Vec3], mask: u32) -> Self {
        Self {
            starts,
            ends,
            mins: Vec3::ZERO,
            maxs: Vec3::ZERO,
            mask,
            masks: None,
        }
    }

    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Query `i` (after [`TraceBatch::check`]).
    #[inline]
    pub fn query(&self, i: usize) -> TraceQuery {
        TraceQuery::boxed(
            self.starts[i],
            self.ends[i],
            self.mins,
            self.maxs,
            self.masks.map_or(self.mask, |m| m[i]),
        )
    }

    /// The arrays must have one entry per query.
    pub fn check(&self) -> Result<(), BatchError> {
        let n = self.starts.len();
        if self.ends.len() != n {
            return Err(BatchError::Ends {
                starts: n,
                ends: self.ends.len(),
            });
        }
        if let Some(m) = self.masks {
            if m.len() != n {
                return Err(BatchError::Masks {
                    queries: n,
                    masks: m.len(),
                });
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum BatchError {
    #[error("{starts} starts but {ends} ends")]
    Ends { starts: usize, ends: usize },
    #[error("{masks} masks for {queries} queries")]
    Masks { queries: usize, masks: usize },
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
    world: &World,
    batch: &TraceBatch,
    options: &BatchOptions,
    out: &mut BatchResults,
) -> Result<(), BatchError> {
    batch.check()?;
    let results = run(batch.len(), options, |i, scratch| {
        super::trace(world, &batch.query(i), scratch)
    });
    out.clear();
    for r in &results {
        out.push(r);
    }
    Ok(())
}

/// Any-hit for every query of `batch`: `out[i]` is whether query `i` touches
/// anything in its mask (exactly `fraction < 1` of its full trace).
pub fn any_hit_batch(
    world: &World,
    batch: &TraceBatch,
    options: &BatchOptions,
    out: &mut Vec<bool>,
) -> Result<(), BatchError> {
    batch.check()?;
    *out = run(batch.len(), options, |i, scratch| {
        super::any_hit(world, &batch.query(i), scratch)
    });
    Ok(())
}

/// Traces a list of queries with any shapes and masks, in order.
pub fn trace_queries(
    world: &World,
    queries: &[TraceQuery],
    options: &BatchOptions,
) -> Vec<TraceResult> {
    run(queries.len(), options, |i, scratch| {
        super::trace(world, &queries[i], scratch)
    })
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::new());
}

/// Runs `answer(i)` for `i` in `0..n`, results in order: one contiguous
/// chunk per thread, on the calling thread alone or on rayon's global pool.
pub fn run<R, F>(n: usize, options: &BatchOptions, answer: F) -> Vec<R>
where
    R: Send,
    F: Fn(usize, &mut Scratch) -> R + Sync,
{
    let threads = options.threads_for(n);
    if threads <= 1 {
        // One thread: answers go straight into the output, in order.
        let mut out = Vec::with_capacity(n);
        with_scratch(|scratch| out.extend((0..n).map(|i| answer(i, scratch))));
        return out;
    }
    let mut out: Vec<Option<R>> = (0..n).map(|_| None).collect();
    let chunk = n.div_ceil(threads).max(1);
    let answer_chunk = |first: usize, slots: &mut [Option<R>]| {
        with_scratch(|scratch| {
            for (k, slot) in slots.iter_mut().enumerate() {
                *slot = Some(answer(first + k, scratch));
            }
        })
    };
    // Rayon's pool keeps its threads (and their scratch) between batches.
    out.par_chunks_mut(chunk)
        .enumerate()
        .for_each(|(c, slots)| answer_chunk(c * chunk, slots));
    // Every slot was filled above.
    out.into_iter().flatten().collect()
}

/// Runs `f` with this thread's scratch space (a fresh one when it is
/// already in use: an answer that runs a batch of its own).
fn with_scratch<T>(f: impl FnOnce(&mut Scratch) -> T) -> T {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => f(&mut scratch),
        Err(_) => f(&mut Scratch::new()),
    })
}
