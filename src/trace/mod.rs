//! The query kernel: point contents, ray traces and box sweeps against a
//! [`World`]. No I/O, no threads, no allocation per query (the caller owns a
//! [`Scratch`]).
//!
//! The path of a trace reads from the names: [`trace`] → [`tree`] (walk the
//! tree with each node plane shifted by the box's support distance) → leaf →
//! [`brush`] / [`patch`] (exact clipping with the reference's epsilon rules).

mod brush;
mod contents;
mod patch;
mod tree;
mod work;

pub use contents::point_contents;
pub use work::{Scratch, TraceQuery, TraceResult};

use crate::world::World;
use work::TraceWork;

/// Traces `query` through `world` and returns the first contact.
pub fn trace(world: &World, query: &TraceQuery, scratch: &mut Scratch) -> TraceResult {
    let mut work = TraceWork::new(query);
    scratch.begin(world);
    if work.is_position_test() {
        tree::position_test(world, &mut work, scratch);
    } else {
        tree::trace_tree(world, &mut work, scratch);
    }
    work.finish(query)
}
