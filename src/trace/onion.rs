//! Hull traces through the onion tree (see `compile::onion`): a registered
//! box size traced as a point.
//!
//! The box's centre walks the tree as a ray does (planes thickened only by
//! [`HULL_WALK_SLACK`]); each leaf it reaches names, for the hull, the
//! brushes whose expanded obstacle holds the cell and the patches near it.
//! Those are clipped by the box sweep's own routines (`trace::brush`,
//! `trace::patch`) with the hull's box, so fractions, planes and flags are
//! the box sweep's, bit for bit.
//!
//! Only the order in which brushes are met differs from the box sweep's
//! walk, and the box sweep's answer depends on that order in two cases:
//! equal contacts (the first met wins) and contacts that stop the walk (a
//! brush the box never leaves, or a hit at fraction 0: what came before it
//! decides startsolid and the reported plane). Each brush is therefore
//! clipped on its own and the results folded here (a start inside a brush
//! the box leaves only sets `startsolid`, whatever the order; a move-less
//! trace inside brushes that agree on contents has one answer); when the
//! nearest contact is shared by brushes or patches that disagree on plane,
//! flags or contents, or the walk would have stopped, the query is answered
//! by the box sweep itself (counted in [`HullStats::box_fallback`]).

use super::brush::{box_in_brush, trace_through_brush};
use super::patch::{position_test_patch, trace_through_patch};
use super::work::{Scratch, TraceQuery, TraceResult, TraceWork};
use crate::math::Vec3;
use crate::world::{OnionNode, World};
use thiserror::Error;

/// How far from a node plane the centre's path still visits both sides
/// (units): well above the clip's 1/8-unit touch zone.
pub const HULL_WALK_SLACK: f32 = 1.0;

/// A trace of a registered onion hull.
#[derive(Debug, Clone, PartialEq)]
pub struct HullQuery {
    /// Index of the hull in the world's `info.hulls`.
    pub hull: usize,
    /// The same move as a box sweep of the hull's size (the fallback, and
    /// where the clip takes its box from).
    pub query: TraceQuery,
}

#[derive(Debug, Clone, Error, PartialEq)]
pub enum HullError {
    #[error("no onion hull named {name:?} in this world (it has: {known})")]
    UnknownHull { name: String, known: String },
}

impl HullQuery {
    /// A move of hull `name` of `world` from `start` to `end` against `mask`.
    pub fn new(
        world: &World,
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
        );
        Ok(Self { hull, query })
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
pub fn trace_hull(world: &World, q: &HullQuery, scratch: &mut Scratch) -> TraceResult {
    trace_hull_with_stats(world, q, scratch).0
}

/// [`trace_hull`], also saying what the walk did.
pub fn trace_hull_with_stats(
    world: &World,
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
    let mut walk = Walk {
        world,
        hull: q.hull,
        w: TraceWork::new(&q.query),
        best: None,
        ambiguous: false,
        order_dependent: false,
        startsolid: false,
        inside: None,
        stats: &mut stats,
    };
    scratch.begin(world);
    walk.run(scratch);
    let Walk {
        w,
        best,
        ambiguous,
        order_dependent,
        startsolid,
        inside,
        ..
    } = walk;
    if ambiguous || order_dependent {
        stats.box_fallback = true;
        stats.tie = ambiguous && !order_dependent;
        return (super::trace(world, &q.query, scratch), stats);
    }
    let mut w = w;
    w.result = match inside {
        // A move-less box inside: what the box sweep's position test reports.
        Some(contents) => TraceResult {
            startsolid: true,
            allsolid: true,
            fraction: 0.0,
            contents,
            ..TraceResult::default()
        },
        None => best.unwrap_or_default(),
    };
    w.result.startsolid |= startsolid;
    (w.finish(&q.query), stats)
}

/// Where the walk reads nodes from: plane, children, and per child the
/// contents below for the hull (all ones when unknown).
trait NodeSource {
    fn get(&self, index: i32) -> (Vec3, f32, [i32; 2], [u32; 2]);
}

/// The derived hull tree (plane inline, contents below per child).
struct HullNodes<'a>(&'a [OnionNode]);

impl NodeSource for HullNodes<'_> {
    #[inline(always)]
    fn get(&self, index: i32) -> (Vec3, f32, [i32; 2], [u32; 2]) {
        let n = &self.0[index as usize];
        (
            Vec3::from_array(n.normal),
            n.dist,
            n.children,
            n.contents_below,
        )
    }
}

/// The file's nodes and planes (a world loaded without its derived trees).
struct FileNodes<'a, 'w>(&'a World<'w>);

impl NodeSource for FileNodes<'_, '_> {
    #[inline(always)]
    fn get(&self, index: i32) -> (Vec3, f32, [i32; 2], [u32; 2]) {
        let node = &self.0.nodes[index as usize];
        let plane = &self.0.planes[node.plane as usize];
        (plane.normal(), plane.dist, node.children, [u32::MAX; 2])
    }
}

/// A segment of the centre's path still to walk.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Segment {
    child: i32,
    f1: f32,
    f2: f32,
    p1: Vec3,
    p2: Vec3,
}

struct Walk<'a, 'w> {
    world: &'a World<'w>,
    hull: usize,
    w: TraceWork,
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
    stats: &'a mut HullStats,
}

impl Walk<'_, '_> {
    fn best_fraction(&self) -> f32 {
        self.best.map_or(1.0, |b| b.fraction)
    }

    fn run(&mut self, scratch: &mut Scratch) {
        let world = self.world;
        let onion = world.onion;
        if onion.matches(world) {
            let tree = onion.tree(self.hull, world.nodes.len());
            if let Some(root) = tree.first() {
                if (root.contents_below[0] | root.contents_below[1]) & self.w.mask == 0 {
                    // Nothing anywhere in the mask for this hull.
                    return;
                }
            }
            self.walk(scratch, &HullNodes(tree));
        } else {
            self.walk(scratch, &FileNodes(world));
        }
    }

    fn walk<N: NodeSource>(&mut self, scratch: &mut Scratch, nodes: &N) {
        let mut stack = std::mem::take(&mut scratch.hull_segments);
        stack.clear();
        stack.push(Segment {
            child: self.world.root(),
            f1: 0.0,
            f2: 1.0,
            p1: self.w.start.into(),
            p2: self.w.end.into(),
        });
        while let Some(seg) = stack.pop() {
            // Segments starting exactly at the nearest contact are still
            // walked: an equal contact there decides ties.
            if self.best_fraction() < seg.f1 {
                continue;
            }
            self.walk_segment(scratch, nodes, seg, &mut stack);
            if self.order_dependent {
                break;
            }
        }
        scratch.hull_segments = stack;
    }

    /// Descends from `seg.child` along the near side, pushing far sides;
    /// children with nothing in the mask for this hull are not entered.
    fn walk_segment<N: NodeSource>(
        &mut self,
        scratch: &mut Scratch,
        nodes: &N,
        seg: Segment,
        stack: &mut Vec<Segment>,
    ) {
        let Segment {
            mut child,
            f1,
            mut f2,
            p1,
            mut p2,
        } = seg;
        let mask = self.w.mask;
        while child >= 0 {
            self.stats.nodes += 1;
            let (normal, dist, children, below) = nodes.get(child);
            let t1 = normal.dot(p1) - dist;
            let t2 = normal.dot(p2) - dist;
            let reach = HULL_WALK_SLACK;
            if t1 >= reach && t2 >= reach {
                if below[0] & mask == 0 {
                    return;
                }
                child = children[0];
                continue;
            }
            if t1 < -reach && t2 < -reach {
                if below[1] & mask == 0 {
                    return;
                }
                child = children[1];
                continue;
            }
            let (near, frac_near_end, frac_far_start) = super::tree::straddle(t1, t2, reach);
            if below[near ^ 1] & mask != 0 {
                let frac2 = frac_far_start.clamp(0.0, 1.0);
                stack.push(Segment {
                    child: children[near ^ 1],
                    f1: f1 + (f2 - f1) * frac2,
                    f2,
                    p1: p1 + (p2 - p1) * frac2,
                    p2,
                });
            }
            if below[near] & mask == 0 {
                return;
            }
            let frac = frac_near_end.clamp(0.0, 1.0);
            f2 = f1 + (f2 - f1) * frac;
            p2 = p1 + (p2 - p1) * frac;
            child = children[near];
        }
        self.visit_leaf(scratch, (-1 - child) as usize);
    }

    fn visit_leaf(&mut self, scratch: &mut Scratch, leaf: usize) {
        let world = self.world;
        self.stats.leaves += 1;
        let record = world.hull_leaf(leaf, self.hull);
        let mask = self.w.mask;
        let position_test = self.w.is_position_test();
        if record.contents & mask != 0 {
            let brushes = &world.hull_leaf_brushes[record.first_brush as usize..]
                [..record.num_brushes as usize];
            for &b in brushes {
                let brush = &world.brushes[b as usize];
                if brush.contents & mask == 0 || !scratch.first_visit_brush(b as usize) {
                    continue;
                }
                self.stats.clipped += 1;
                if position_test {
                    if box_in_brush(world, brush, &self.w) {
                        self.inside_of(brush.contents);
                    }
                    continue;
                }
                self.w.result = TraceResult::default();
                trace_through_brush(world, b as usize, &mut self.w);
                let r = self.w.result;
                if r.allsolid {
                    self.order_dependent = true;
                    return;
                }
                if r.startsolid {
                    // No contact is reported for it; only the flag.
                    self.startsolid = true;
                    continue;
                }
                self.offer(r);
                if self.order_dependent {
                    return;
                }
            }
        }
        let patches =
            &world.hull_leaf_patches[record.first_patch as usize..][..record.num_patches as usize];
        for &p in patches {
            let patch = &world.patches[p as usize];
            if patch.contents & mask == 0 || !scratch.first_visit_patch(p as usize) {
                continue;
            }
            self.stats.clipped += 1;
            if position_test {
                if position_test_patch(world, patch, &self.w) {
                    self.inside_of(patch.contents);
                }
                continue;
            }
            self.w.result = TraceResult::default();
            trace_through_patch(world, patch, &mut self.w);
            let r = self.w.result;
            if r.startsolid {
                self.order_dependent = true;
                return;
            }
            self.offer(r);
            if self.order_dependent {
                return;
            }
        }
    }

    /// A move-less box lies inside something with `contents`: the box
    /// sweep reports the first it meets, so all must agree.
    fn inside_of(&mut self, contents: u32) {
        match self.inside {
            Some(c) if c != contents => self.order_dependent = true,
            _ => self.inside = Some(contents),
        }
    }

    /// Folds one brush's or patch's own clip result into the answer.
    fn offer(&mut self, r: TraceResult) {
        if r.fraction >= 1.0 {
            return;
        }
        if r.fraction == 0.0 {
            self.order_dependent = true;
            return;
        }
        match self.best {
            Some(b) if r.fraction > b.fraction => {}
            Some(b) if r.fraction == b.fraction => {
                let same = r.normal == b.normal
                    && r.dist == b.dist
                    && r.surface_flags == b.surface_flags
                    && r.contents == b.contents;
                if !same {
                    self.ambiguous = true;
                }
            }
            _ => {
                self.best = Some(r);
                self.ambiguous = false;
            }
        }
    }
}
