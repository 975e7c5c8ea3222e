//! Clipping against patch facets (placeholder until patch collision lands).

use super::work::TraceWork;
use crate::world::{Patch, World};

pub(crate) fn trace_through_patch(_world: &World, _patch: &Patch, _w: &mut TraceWork) {}

pub(crate) fn position_test_patch(_world: &World, _patch: &Patch, _w: &TraceWork) -> bool {
    false
}
