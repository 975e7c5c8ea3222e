//! Hull traces through the onion tree (see `compile::onion`): a registered
//! box size traced as a point.
//!
//! The box's centre walks the tree as a ray does; each leaf names, for the
//! hull, the brushes whose expanded obstacle holds the cell and the patches
//! near it, clipped by the box sweep's own routines with the hull's box, so
//! fractions, planes and flags are the box sweep's, bit for bit. Only the
//! order brushes are met in differs, and it decides the box sweep's answer
//! in two cases: equal contacts, and contacts that stop the walk. So each
//! brush is clipped on its own and the results folded here; where the
//! nearest contact is shared by primitives that disagree on plane, flags or
//! contents, or the walk would have stopped, the box sweep answers
//! (counted in [`HullStats::box_fallback`]).

use super::fast::{Clipped, Clipper};
use super::walk::{clip_patch, walk, with_stack, HullNodes, Move, PointReach, Segment, Visitor};
use super::work::{InvalidTrace, Scratch, TraceQuery, TraceResult, TraceWork};
use super::Kernel;
use crate::math::Vec3;
use crate::world::HullLeaf;
use thiserror::Error;

/// A trace of a registered onion hull.
#[derive(Debug, Clone, PartialEq)]
pub struct HullQuery {
    /// Index of the hull in the world's `info.hulls`.
    pub(crate) hull: usize,
    /// The same move as a box sweep of the hull's size (the fallback, and
    /// where the clip takes its box from).
    pub(crate) query: TraceQuery,
}

#[derive(Debug, Clone, Error, PartialEq)]
pub enum HullError {
    #[error("no onion hull named {name:?} in this world (it has: {known})")]
    UnknownHull { name: String, known: String },
    #[error(transparent)]
    Invalid(#[from] InvalidTrace),
}

impl HullQuery {
    /// A move of hull `name` of `world` from `start` to `end` against `mask`.
    pub fn new(
        world: &Kernel,
        name: &str,
        start: Vec3,
        end: Vec3,
        mask: u32,
    ) -> Result<Self, HullError> {
        let hull = world
            .hull_index(name)
            .ok_or_else(|| HullError::UnknownHull {
                name: name.to_owned(),
                known: if world.info.hulls.is_empty() {
                    "none".to_owned()
                } else {
                    world
                        .info
                        .hulls
                        .iter()
                        .map(|h| h.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                },
            })?;
        let spec = &world.info.hulls[hull];
        let query = TraceQuery::boxed(
            start,
            end,
            Vec3::from_array(spec.mins),
            Vec3::from_array(spec.maxs),
            mask,
        )?;
        Ok(Self { hull, query })
    }

    /// Index of the hull in the world's `info.hulls`.
    pub fn hull(&self) -> usize {
        self.hull
    }

    /// The same move as a box sweep of the hull's size.
    pub fn query(&self) -> &TraceQuery {
        &self.query
    }
}

/// What a hull trace did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HullStats {
    /// Tree nodes whose plane the walk tested.
    pub nodes: u32,
    /// Leaves reached.
    pub leaves: u32,
    /// Brushes and patches clipped.
    pub clipped: u32,
    /// The answer came from the box sweep (order-dependent case).
    pub box_fallback: bool,
    /// Of those, because equal nearest contacts disagreed (otherwise: a
    /// start in solid or a contact at fraction 0).
    pub tie: bool,
}

/// Traces a hull query (the hull must be one of `world`'s).
pub fn trace_hull(world: &Kernel, q: &HullQuery, scratch: &mut Scratch) -> TraceResult {
    trace_hull_with_stats(world, q, scratch).0
}

/// [`trace_hull`], also saying what the walk did.
pub fn trace_hull_with_stats(
    world: &Kernel,
    q: &HullQuery,
    scratch: &mut Scratch,
) -> (TraceResult, HullStats) {
    let mut stats = HullStats::default();
    let hulls = world.info.hulls.len();
    if q.hull >= hulls || world.hull_leaves.len() != world.leaves.len() * hulls {
        // Not an onion world for this hull: the box sweep is the answer.
        stats.box_fallback = true;
        return (super::trace(world, &q.query, scratch), stats);
    }
    scratch.begin(world);
    let (mut w, found) = with_stack(scratch, |stack, scratch| {
        let mut walk = Walk {
            world,
            hull: q.hull,
            w: TraceWork::new(&q.query),
            scratch,
            found: Folded::default(),
            stats: &mut stats,
        };
        walk.run(stack);
        (walk.w, walk.found)
    });
    if found.ambiguous || found.order_dependent {
        stats.box_fallback = true;
        stats.tie = found.ambiguous && !found.order_dependent;
        return (super::trace(world, &q.query, scratch), stats);
    }
    w.result = found.best.unwrap_or_default();
    if let Some(contents) = found.inside {
        // A move-less box inside: what the box sweep's position test reports.
        w.result = TraceResult::default();
        w.result.set_inside(contents);
    }
    w.result.startsolid |= found.startsolid;
    (w.finish(&q.query), stats)
}

struct Walk<'a, 'w> {
    world: &'a Kernel<'w>,
    hull: usize,
    w: TraceWork,
    scratch: &'a mut Scratch,
    found: Folded,
    stats: &'a mut HullStats,
}

/// The brushes' and patches' own clips, folded.
#[derive(Default)]
struct Folded {
    /// The nearest contact so far (first met among equals).
    best: Option<TraceResult>,
    /// Another contact as near as `best` reports something else.
    ambiguous: bool,
    /// Something would stop the box sweep's walk (allsolid, or a hit at
    /// fraction 0), or a move-less box lies in brushes of differing contents.
    order_dependent: bool,
    /// The box starts inside a brush it leaves.
    startsolid: bool,
    /// A move-less box lies inside brushes (or patches) of these contents.
    inside: Option<u32>,
}

impl Walk<'_, '_> {
    fn best_fraction(&self) -> f32 {
        self.found.best.map_or(1.0, |b| b.fraction)
    }

    fn run(&mut self, stack: &mut Vec<Segment>) {
        let world = self.world;
        let tree = world.accel.onion.tree(self.hull, world.nodes.len());
        if let Some(root) = tree.first() {
            if (root.contents_below[0] | root.contents_below[1]) & self.w.mask == 0 {
                // Nothing anywhere in the mask for this hull.
                return;
            }
        }
        // The box's centre, walked as a point.
        let m = Move {
            start: self.w.start,
            end: self.w.end,
            bounds: self.w.bounds,
            mask: self.w.mask,
        };
        walk(&HullNodes(tree), world.root(), &m, &PointReach, stack, self);
    }

    fn clip_brushes(&mut self, record: &HullLeaf) {
        let world = self.world;
        let brushes =
            &world.hull_leaf_brushes[record.first_brush as usize..][..record.num_brushes as usize];
        let position_test = self.w.is_position_test();
        for &b in brushes {
            let b = b as usize;
            let contents = world.brushes[b].contents;
            if contents & self.w.mask == 0 || !self.scratch.first_visit_brush(b) {
                continue;
            }
            self.stats.clipped += 1;
            if position_test {
                if self.w.holds_start_brush(world, b) {
                    self.inside_of(contents);
                }
                continue;
            }
            match self.w.brush(world, b) {
                Clipped::Miss => {}
                Clipped::Inside { gets_out: false } => {
                    self.found.order_dependent = true;
                    return;
                }
                // No contact is reported for it; only the flag.
                Clipped::Inside { gets_out: true } => self.found.startsolid = true,
                Clipped::Enter { frac, contact } => {
                    self.offer(contact.at(frac));
                    if self.found.order_dependent {
                        return;
                    }
                }
            }
        }
    }

    fn clip_patches(&mut self, record: &HullLeaf) {
        let world = self.world;
        let patches =
            &world.hull_leaf_patches[record.first_patch as usize..][..record.num_patches as usize];
        let position_test = self.w.is_position_test();
        for &p in patches {
            let p = p as usize;
            let contents = world.patches[p].contents;
            if contents & self.w.mask == 0 || !self.scratch.first_visit_patch(p) {
                continue;
            }
            self.stats.clipped += 1;
            if position_test {
                if self.w.holds_start_patch(world, p) {
                    self.inside_of(contents);
                }
                continue;
            }
            let mut r = TraceResult::default();
            clip_patch(world, &self.w, p, &mut r);
            self.offer(r);
            if self.found.order_dependent {
                return;
            }
        }
    }

    /// A move-less box lies inside something with `contents`: the box
    /// sweep reports the first it meets, so all must agree.
    fn inside_of(&mut self, contents: u32) {
        match self.found.inside {
            Some(c) if c != contents => self.found.order_dependent = true,
            _ => self.found.inside = Some(contents),
        }
    }

    /// Folds one brush's or patch's own clip result into the answer.
    fn offer(&mut self, r: TraceResult) {
        if r.fraction >= 1.0 {
            return;
        }
        if r.fraction == 0.0 {
            self.found.order_dependent = true;
            return;
        }
        match self.found.best {
            Some(b) if r.fraction > b.fraction => {}
            Some(b) if r.fraction == b.fraction => {
                let same = r.normal == b.normal
                    && r.dist == b.dist
                    && r.surface_flags == b.surface_flags
                    && r.contents == b.contents;
                if !same {
                    self.found.ambiguous = true;
                }
            }
            _ => {
                self.found.best = Some(r);
                self.found.ambiguous = false;
            }
        }
    }
}

impl Visitor for Walk<'_, '_> {
    fn wanted(&self, f1: f32) -> bool {
        // Pieces starting exactly at the nearest contact are still walked:
        // an equal contact there decides ties.
        f1 <= self.best_fraction()
    }

    fn leaf(&mut self, leaf: i32, _f1: f32) -> bool {
        self.stats.leaves += 1;
        let record = *self.world.hull_leaf((-1 - leaf) as usize, self.hull);
        if record.contents & self.w.mask != 0 {
            self.clip_brushes(&record);
        }
        if !self.found.order_dependent {
            self.clip_patches(&record);
        }
        self.found.order_dependent
    }

    fn node(&mut self) {
        self.stats.nodes += 1;
    }
}
