//! Which brushes and patches the source's tree lists wherever they reach.
//!
//! The reference clips a primitive only in leaves of the source's tree that
//! list it, and the map compiler does not always list it everywhere its
//! collision geometry reaches (dropped slivers of split brushes, thin
//! brushes listed on one side, patch facets poking out of their drawn
//! surface's leaves): there the reference passes through. The fast trace
//! meets every primitive near the move, so at load each brush's polyhedron
//! and facet's polygon is cut down the source's tree and the bounds of the
//! pieces in leaves that do not list it are kept; a contact within them
//! goes to the walk (anywhere else, its leaf lists the primitive). Pieces
//! within [`PLANE_SIDE_EPSILON`] of a plane go to both sides, erring
//! towards "unlisted", which only costs the walk's time.

use super::{next_down, next_up, union};
use crate::geometry::polygons::{facet_polygon, polyhedron};
use crate::margins::{PLANE_SIDE_EPSILON, UNLISTED_MARGIN};
use crate::math::{DVec3, Winding};
use crate::world::World;
use glam::Vec3A;

/// The brushes, facets and patches with pieces where the source's tree does
/// not list them, and those pieces' bounds (all empty when the world has no
/// source tree).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Unlisted {
    brushes: Pieces,
    facets: Pieces,
    /// A patch's are its facets' together.
    patches: Pieces,
}

/// Per primitive, a bit (set: it has unlisted pieces) and, for those, the
/// bounds of the pieces grown by [`UNLISTED_MARGIN`]. The bits are what a
/// trace reads first: a few hundred bytes that stay in the cache, where the
/// bounds of every primitive would not.
#[derive(Debug, Clone, Default, PartialEq)]
struct Pieces {
    marked: Vec<u64>,
    bounds: Vec<Bounds>,
}

impl Pieces {
    /// From per-primitive bounds, [`LISTED`] for none.
    fn new(bounds: Vec<Bounds>) -> Pieces {
        if bounds.iter().all(is_listed) {
            return Pieces::default();
        }
        let mut marked = vec![0u64; bounds.len().div_ceil(64)];
        for (i, r) in bounds.iter().enumerate() {
            if !is_listed(r) {
                marked[i / 64] |= 1 << (i % 64);
            }
        }
        Pieces { marked, bounds }
    }

    #[inline(always)]
    fn of(&self, i: usize) -> Option<&Bounds> {
        let word = *self.marked.get(i / 64)?;
        if word >> (i % 64) & 1 == 0 {
            return None;
        }
        self.bounds.get(i)
    }

    fn count(&self) -> usize {
        self.marked.iter().map(|w| w.count_ones() as usize).sum()
    }

    fn all(&self) -> impl Iterator<Item = Bounds> + '_ {
        (0..self.bounds.len()).filter_map(|i| self.of(i).copied())
    }
}

/// `[mins, maxs]`.
pub type Bounds = [[f32; 3]; 2];

/// Nothing unlisted.
pub const LISTED: Bounds = [[f32::INFINITY; 3], [f32::NEG_INFINITY; 3]];

/// Taken as unlisted anywhere: every contact goes to the walk.
const EVERYWHERE: Bounds = [[f32::NEG_INFINITY; 3], [f32::INFINITY; 3]];

/// Point-plane tests the search may spend on one world: real maps take a
/// few million (the most of 113 OpenArena maps, oa_thor's, 3.6); a hostile
/// file built to split every brush at every node gets the rest of its
/// primitives taken as unlisted anywhere (their contacts then take the
/// walk, which is always right) instead of a load that never ends.
const BUDGET: u64 = 200_000_000;

impl Unlisted {
    pub const EMPTY: Unlisted = Unlisted {
        brushes: Pieces {
            marked: Vec::new(),
            bounds: Vec::new(),
        },
        facets: Pieces {
            marked: Vec::new(),
            bounds: Vec::new(),
        },
        patches: Pieces {
            marked: Vec::new(),
            bounds: Vec::new(),
        },
    };

    /// Whether a box at `at()` (its corners) comes near a piece of brush
    /// `b` that the source's tree does not list there (`at` is only called
    /// for a brush with such pieces).
    #[inline(always)]
    pub fn brush_near(&self, b: usize, at: impl FnOnce() -> (Vec3A, Vec3A)) -> bool {
        self.brushes.of(b).is_some_and(|r| overlaps(r, at()))
    }

    /// [`Unlisted::brush_near`] for facet `f`.
    #[inline(always)]
    pub fn facet_near(&self, f: usize, at: impl FnOnce() -> (Vec3A, Vec3A)) -> bool {
        self.facets.of(f).is_some_and(|r| overlaps(r, at()))
    }

    /// [`Unlisted::brush_near`] for any facet of patch `p`.
    #[inline(always)]
    pub fn patch_near(&self, p: usize, at: impl FnOnce() -> (Vec3A, Vec3A)) -> bool {
        self.patches.of(p).is_some_and(|r| overlaps(r, at()))
    }

    /// Whether brush `b` has a piece the source's tree does not list.
    pub fn brush(&self, b: usize) -> bool {
        self.brushes.of(b).is_some()
    }

    /// How many brushes and facets have a piece the source's tree does not
    /// list.
    pub fn counts(&self) -> (usize, usize) {
        (self.brushes.count(), self.facets.count())
    }

    /// The bounds of every brush's and facet's unlisted pieces, grown by
    /// [`UNLISTED_MARGIN`].
    pub fn pieces(&self) -> impl Iterator<Item = Bounds> + '_ {
        self.brushes.all().chain(self.facets.all())
    }
}

fn is_listed(r: &Bounds) -> bool {
    r[0][0] > r[1][0]
}

#[inline(always)]
fn overlaps(r: &Bounds, (lo, hi): (Vec3A, Vec3A)) -> bool {
    (lo.cmple(Vec3A::from_array(r[1])) & hi.cmpge(Vec3A::from_array(r[0]))).all()
}

/// Finds the unlisted pieces of `world`'s primitives (see the module notes).
pub fn find(world: &World) -> Unlisted {
    if !world.source.is_present() {
        return Unlisted::EMPTY;
    }
    let mut budget = BUDGET;
    let brushes: Vec<Bounds> = (0..world.brushes.len())
        .map(|b| {
            let brush = &world.brushes[b];
            let sides = &world.brush_sides[brush.first_side as usize..][..brush.num_sides as usize];
            let planes: Vec<(DVec3, f64)> = sides
                .iter()
                .map(|s| world.planes[s.plane as usize].to_f64())
                .collect();
            let listed = |leaf: &crate::world::Leaf| {
                world.source.leaf_brushes[leaf.first_brush as usize..][..leaf.num_brushes as usize]
                    .contains(&(b as u32))
            };
            unlisted_bounds(
                world,
                Piece::new(polyhedron(&planes), planes),
                &listed,
                &mut budget,
            )
        })
        .collect();
    let mut facets = vec![LISTED; world.facets.len()];
    let mut patches = vec![LISTED; world.patches.len()];
    for (p, patch) in world.patches.iter().enumerate() {
        let listed = |leaf: &crate::world::Leaf| {
            world.source.leaf_patches[leaf.first_patch as usize..][..leaf.num_patches as usize]
                .contains(&(p as u32))
        };
        let first = patch.first_facet as usize;
        let count = patch.num_facets as usize;
        for (f, bounds) in facets.iter_mut().enumerate().skip(first).take(count) {
            *bounds = unlisted_bounds(
                world,
                Piece::flat(facet_polygon(world, f)),
                &listed,
                &mut budget,
            );
            patches[p] = union(patches[p], *bounds);
        }
    }
    Unlisted {
        brushes: Pieces::new(brushes),
        facets: Pieces::new(facets),
        patches: Pieces::new(patches),
    }
}

/// A piece of a primitive: a convex polyhedron's faces and the planes it
/// lies behind (the primitive's and the cuts made so far), or one flat
/// polygon (no planes).
#[derive(Clone)]
struct Piece {
    faces: Vec<Winding>,
    planes: Vec<(DVec3, f64)>,
    /// The bounds of the faces' points: most nodes lie clear of them, and
    /// one test against the box places the piece without visiting every
    /// point.
    lo: DVec3,
    hi: DVec3,
}

impl Piece {
    fn new(faces: Vec<Winding>, planes: Vec<(DVec3, f64)>) -> Piece {
        let mut lo = DVec3::splat(f64::INFINITY);
        let mut hi = DVec3::splat(f64::NEG_INFINITY);
        for p in faces.iter().flat_map(|w| &w.points) {
            lo = lo.min(*p);
            hi = hi.max(*p);
        }
        Piece {
            faces,
            planes,
            lo,
            hi,
        }
    }

    fn flat(polygon: Winding) -> Piece {
        Piece::new(vec![polygon], Vec::new())
    }

    /// Which side of `n · p = d` the piece's bounds lie beyond the side
    /// epsilon, when they do: `Some(true)` in front, `Some(false)` behind.
    fn clear_of(&self, n: DVec3, d: f64) -> Option<bool> {
        let centre = (self.lo + self.hi) * 0.5;
        let reach = ((self.hi - self.lo) * 0.5).dot(n.abs());
        let t = centre.dot(n) - d;
        if t - reach > PLANE_SIDE_EPSILON {
            Some(true)
        } else if t + reach < -PLANE_SIDE_EPSILON {
            Some(false)
        } else {
            None
        }
    }

    fn is_empty(&self) -> bool {
        self.faces.iter().all(Winding::is_empty)
    }

    /// The parts in front of and behind `n · p = d`. A polyhedron's part
    /// gets the face the cut makes (its corners where three cuts meet lie
    /// on no earlier face).
    fn split(&self, n: DVec3, d: f64) -> (Piece, Piece) {
        let mut front = Vec::with_capacity(self.faces.len() + 1);
        let mut back = Vec::with_capacity(self.faces.len() + 1);
        for w in &self.faces {
            let (a, b) = w.split(n, d, PLANE_SIDE_EPSILON);
            front.push(a);
            back.push(b);
        }
        let (mut front_planes, mut back_planes) = (Vec::new(), Vec::new());
        if !self.planes.is_empty() {
            let mut cap = Winding::base_for_plane(n, d);
            let inside = self
                .planes
                .iter()
                .all(|&(m, e)| cap.clip_back(m, e, PLANE_SIDE_EPSILON));
            if inside {
                front.push(cap.clone());
                back.push(cap);
            }
            front_planes = self.planes.clone();
            front_planes.push((-n, -d));
            back_planes = self.planes.clone();
            back_planes.push((n, d));
        }
        (
            Piece::new(front, front_planes),
            Piece::new(back, back_planes),
        )
    }
}

/// The bounds (grown by [`UNLISTED_MARGIN`], rounded outward) of the parts
/// of `piece`, cut down the source's tree, that end in a leaf for which
/// `listed` does not hold; [`LISTED`] when there is none.
fn unlisted_bounds(
    world: &World,
    piece: Piece,
    listed: &dyn Fn(&crate::world::Leaf) -> bool,
    budget: &mut u64,
) -> Bounds {
    let source = &world.source;
    let mut lo = DVec3::splat(f64::INFINITY);
    let mut hi = DVec3::splat(f64::NEG_INFINITY);
    let mut stack = vec![(source.root(), piece)];
    while let Some((child, piece)) = stack.pop() {
        if piece.is_empty() {
            continue;
        }
        // Each step costs about as much as the piece has points.
        let cost = piece
            .faces
            .iter()
            .map(|w| w.points.len() as u64)
            .sum::<u64>();
        let Some(left) = budget.checked_sub(cost.max(1)) else {
            *budget = 0;
            return EVERYWHERE;
        };
        *budget = left;
        let node = usize::try_from(child)
            .ok()
            .and_then(|c| source.nodes.get(c));
        let Some(node) = node else {
            // A leaf (validation made every child reference good).
            let leaf = usize::try_from(-1 - i64::from(child)).ok();
            if !leaf.and_then(|l| source.leaves.get(l)).is_some_and(listed) {
                for w in piece.faces.iter().filter(|w| !w.is_empty()) {
                    let (a, b) = w.bounds();
                    lo = lo.min(a);
                    hi = hi.max(b);
                }
            }
            continue;
        };
        let (n, d) = world.planes[node.plane as usize].to_f64();
        let [front, back] = node.children;
        match piece.clear_of(n, d) {
            Some(true) => {
                stack.push((front, piece));
                continue;
            }
            Some(false) => {
                stack.push((back, piece));
                continue;
            }
            None => {}
        }
        let (mut below, mut above) = (f64::INFINITY, f64::NEG_INFINITY);
        for point in piece.faces.iter().flat_map(|w| &w.points) {
            let t = point.dot(n) - d;
            below = below.min(t);
            above = above.max(t);
        }
        if below >= -PLANE_SIDE_EPSILON && above > PLANE_SIDE_EPSILON {
            stack.push((front, piece));
        } else if above <= PLANE_SIDE_EPSILON && below < -PLANE_SIDE_EPSILON {
            stack.push((back, piece));
        } else if above <= PLANE_SIDE_EPSILON {
            // On the plane: a move touching it reaches both sides.
            let (a, b) = (piece.clone(), piece);
            stack.push((front, a));
            stack.push((back, b));
        } else {
            let (a, b) = piece.split(n, d);
            stack.push((front, a));
            stack.push((back, b));
        }
    }
    if lo.x > hi.x {
        return LISTED;
    }
    let margin = UNLISTED_MARGIN as f64;
    [
        (lo - margin).to_array().map(|v| next_down(v as f32)),
        (hi + margin).to_array().map(|v| next_up(v as f32)),
    ]
}
