//! Facets of a refined grid: every grid square becomes one facet (flat
//! square) or two (its triangles). A facet is its surface plane, its border
//! planes (the neighbours' surface planes where that works, otherwise planes
//! through the edge perpendicular to the surface), bevel planes so that
//! plane-shifted box traces stay tight, and last the back of its surface.

use super::grid::Grid;
use super::planes::{self, normal, PlaneEq, PlaneList, Side, TooManyPlanes};
use super::winding::FacetWinding;
use super::{MAX_FACET_BORDERS, MAX_MAP_BOUNDS, MAX_PATCH_FACETS};
use crate::margins::{PATCH_NORMAL_EPSILON, PATCH_WINDING_EPSILON};
use crate::math::Vec3;

/// A patch's collision geometry, plane indices local to `planes`.
#[derive(Debug, Clone, Default)]
pub(super) struct PatchCollide {
    pub planes: Vec<PlaneEq>,
    pub facets: Vec<FacetDef>,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct FacetDef {
    pub surface: usize,
    pub borders: Vec<BorderDef>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct BorderDef {
    pub plane: usize,
    /// The plane is used flipped (the facet lies in front of it).
    pub inward: bool,
    /// The border is the neighbour's surface plane equal to this facet's own.
    pub no_adjust: bool,
}

/// A border while the facet is being built: `plane` may be missing.
#[derive(Debug, Clone, Copy)]
struct Border {
    plane: Option<usize>,
    inward: bool,
    no_adjust: bool,
}

impl Border {
    fn new(plane: Option<usize>, no_adjust: bool) -> Self {
        Border {
            plane,
            inward: false,
            no_adjust,
        }
    }
}

/// Edges of a grid square, as [`edge_plane`] builds them.
#[derive(Debug, Clone, Copy)]
enum Edge {
    Top,
    Right,
    Bottom,
    Left,
    /// The diagonal, seen from triangle 0 / triangle 1.
    Diagonal0,
    Diagonal1,
}

/// The surface planes of every grid square's two triangles.
struct SquarePlanes {
    height: usize,
    planes: Vec<[Option<usize>; 2]>,
}

impl SquarePlanes {
    fn at(&self, i: usize, j: usize) -> [Option<usize>; 2] {
        self.planes[i * self.height + j]
    }

    /// Triangle `tri`'s plane, or the other triangle's when it has none.
    fn either(&self, i: usize, j: usize, tri: usize) -> Option<usize> {
        let p = self.at(i, j);
        p[tri].or(p[1 - tri])
    }
}

/// Builds the facets of `grid`; `None` when the patch exceeds a limit.
pub(super) fn build(grid: &Grid) -> Option<PatchCollide> {
    build_facets(grid).ok().flatten()
}

fn build_facets(grid: &Grid) -> Result<Option<PatchCollide>, TooManyPlanes> {
    let (width, height) = (grid.width(), grid.height());
    if width < 2 || height < 2 {
        return Ok(Some(PatchCollide::default()));
    }
    let mut list = PlaneList::default();
    // Triangle 0 is (i,j) (i+1,j) (i+1,j+1); triangle 1 is (i+1,j+1) (i,j+1) (i,j).
    let mut squares = SquarePlanes {
        height: height - 1,
        planes: Vec::with_capacity((width - 1) * (height - 1)),
    };
    for i in 0..width - 1 {
        for j in 0..height - 1 {
            let p = |a: usize, b: usize| grid.point(a, b);
            let t0 = list.triangle_plane(p(i, j), p(i + 1, j), p(i + 1, j + 1))?;
            let t1 = list.triangle_plane(p(i + 1, j + 1), p(i, j + 1), p(i, j))?;
            squares.planes.push([t0, t1]);
        }
    }

    let mut facets = Vec::new();
    for i in 0..width - 1 {
        for j in 0..height - 1 {
            let own = squares.at(i, j);
            // Each edge borrows the neighbouring square's adjacent triangle
            // plane (across a wrap seam too); an edge plane replaces it when
            // there is no neighbour or it is this square's own plane.
            let wrap_h = |k: usize| grid.wrap_height.then(|| squares.at(i, k));
            let wrap_w = |k: usize| grid.wrap_width.then(|| squares.at(k, j));
            let above = if j > 0 {
                Some(squares.at(i, j - 1))
            } else {
                wrap_h(height - 2)
            };
            let below = if j < height - 2 {
                Some(squares.at(i, j + 1))
            } else {
                wrap_h(0)
            };
            let before = if i > 0 {
                Some(squares.at(i - 1, j))
            } else {
                wrap_w(width - 2)
            };
            let after = if i < width - 2 {
                Some(squares.at(i + 1, j))
            } else {
                wrap_w(0)
            };
            let mut border = |found: Option<usize>, own_tri: usize, edge: Edge| {
                // (A missing neighbour "equals" a missing own plane, as in the reference.)
                let no_adjust = found == own[own_tri];
                let plane = if found.is_none() || no_adjust {
                    edge_plane(&mut list, grid, &squares, i, j, edge)?
                } else {
                    found
                };
                Ok::<_, TooManyPlanes>(Border::new(plane, no_adjust))
            };
            // The order of these calls decides the plane list, as in the reference.
            let top = border(above.and_then(|p| p[1]), 0, Edge::Top)?;
            let bottom = border(below.and_then(|p| p[0]), 1, Edge::Bottom)?;
            let left = border(before.and_then(|p| p[0]), 1, Edge::Left)?;
            let right = border(after.and_then(|p| p[1]), 0, Edge::Right)?;

            if own[0] == own[1] {
                let Some(surface) = own[0] else {
                    continue; // degenerate square
                };
                let borders = vec![top, right, bottom, left];
                let corners = [(i, j), (i + 1, j), (i + 1, j + 1), (i, j + 1)];
                add_facet(&mut list, &mut facets, grid, surface, borders, &corners)?;
            } else {
                // Each triangle's third border is the other triangle's plane
                // (or, when that is degenerate, the square's far edge).
                let d0 = match own[1].or(bottom.plane) {
                    Some(p) => Some(p),
                    None => edge_plane(&mut list, grid, &squares, i, j, Edge::Diagonal0)?,
                };
                if let Some(surface) = own[0] {
                    let borders = vec![top, right, Border::new(d0, false)];
                    let corners = [(i, j), (i + 1, j), (i + 1, j + 1)];
                    add_facet(&mut list, &mut facets, grid, surface, borders, &corners)?;
                }
                let d1 = match own[0].or(top.plane) {
                    Some(p) => Some(p),
                    None => edge_plane(&mut list, grid, &squares, i, j, Edge::Diagonal1)?,
                };
                if let Some(surface) = own[1] {
                    let borders = vec![bottom, left, Border::new(d1, false)];
                    let corners = [(i + 1, j + 1), (i, j + 1), (i, j)];
                    add_facet(&mut list, &mut facets, grid, surface, borders, &corners)?;
                }
            }
            if facets.len() > MAX_PATCH_FACETS {
                return Ok(None);
            }
        }
    }
    Ok(Some(PatchCollide {
        planes: list.planes,
        facets,
    }))
}

/// A plane through a square's edge, perpendicular to the square's surface
/// (4 units along the normal give the third point), facing out of the square.
fn edge_plane(
    list: &mut PlaneList,
    grid: &Grid,
    squares: &SquarePlanes,
    i: usize,
    j: usize,
    edge: Edge,
) -> Result<Option<usize>, TooManyPlanes> {
    let p = |a: usize, b: usize| grid.point(a, b);
    // (first point, second point, which triangle's plane, first point is the lift base)
    let (p1, p2, tri, swap) = match edge {
        Edge::Top => (p(i, j), p(i + 1, j), 0, false),
        Edge::Bottom => (p(i, j + 1), p(i + 1, j + 1), 1, true),
        Edge::Left => (p(i, j), p(i, j + 1), 1, true),
        Edge::Right => (p(i + 1, j), p(i + 1, j + 1), 0, false),
        Edge::Diagonal0 => (p(i + 1, j + 1), p(i, j), 0, false),
        Edge::Diagonal1 => (p(i, j), p(i + 1, j + 1), 1, false),
    };
    let Some(surface) = squares.either(i, j, tri) else {
        // Both triangles are degenerate: the square makes no facet anyway.
        return Ok(None);
    };
    let up = p1 + normal(&list.get(surface)) * 4.0;
    if swap {
        list.triangle_plane(p2, p1, up)
    } else {
        list.triangle_plane(p1, p2, up)
    }
}

/// Orients the borders, validates the facet's polygon, adds its bevels and
/// the back of its surface, and keeps it when it is valid.
fn add_facet(
    list: &mut PlaneList,
    facets: &mut Vec<FacetDef>,
    grid: &Grid,
    surface: usize,
    mut borders: Vec<Border>,
    corners: &[(usize, usize)],
) -> Result<(), TooManyPlanes> {
    set_border_inward(list, grid, &mut borders, corners);
    let Some(mut borders) = validate(list, surface, &borders) else {
        return Ok(());
    };
    if add_bevels(list, surface, &mut borders)? {
        borders.push(BorderDef {
            plane: surface,
            inward: true,
            no_adjust: false,
        });
    }
    facets.push(FacetDef { surface, borders });
    Ok(())
}

/// A border is inward when the facet's corners lie in front of it; a border
/// that every corner lies on is no border at all (the facet is then dropped).
fn set_border_inward(
    list: &PlaneList,
    grid: &Grid,
    borders: &mut [Border],
    corners: &[(usize, usize)],
) {
    for b in borders.iter_mut() {
        let (mut front, mut back) = (0, 0);
        for &(a, c) in corners {
            match list.side(grid.point(a, c), b.plane) {
                Side::Front => front += 1,
                Side::Back => back += 1,
                Side::On => {}
            }
        }
        match (front > 0, back > 0) {
            (true, false) => b.inward = true,
            (false, true) => b.inward = false,
            (false, false) => b.plane = None,
            // Corners on both sides: the reference treats it as outward.
            (true, true) => b.inward = false,
        }
    }
}

/// The plane as the facet uses it for chopping its polygon: the side the
/// facet lies on faces forward.
fn facing(list: &PlaneList, plane: usize, inward: bool) -> PlaneEq {
    let p = list.get(plane);
    if inward {
        p
    } else {
        planes::flipped(&p)
    }
}

/// The facet's polygon: its surface plane's base square chopped by `borders`
/// (skipping the surface plane itself when `skip_surface`).
fn facet_winding(
    list: &PlaneList,
    surface: usize,
    borders: impl Iterator<Item = (usize, bool)>,
) -> Option<FacetWinding> {
    let s = list.get(surface);
    let mut w = FacetWinding::base_for_plane(normal(&s), s[3])?;
    for (plane, inward) in borders {
        let p = facing(list, plane, inward);
        w = w.chop(normal(&p), p[3], PATCH_WINDING_EPSILON)?;
    }
    Some(w)
}

/// The facet's final borders when its polygon survives every border and is
/// of a plausible size; `None` drops the facet.
fn validate(list: &PlaneList, surface: usize, borders: &[Border]) -> Option<Vec<BorderDef>> {
    let defs = borders
        .iter()
        .map(|b| {
            b.plane.map(|plane| BorderDef {
                plane,
                inward: b.inward,
                no_adjust: b.no_adjust,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let w = facet_winding(list, surface, defs.iter().map(|b| (b.plane, b.inward)))?;
    let (lo, hi) = w.bounds();
    let plausible = (0..3).all(|k| {
        hi[k] - lo[k] <= MAX_MAP_BOUNDS && lo[k] < MAX_MAP_BOUNDS && hi[k] > -MAX_MAP_BOUNDS
    });
    plausible.then_some(defs)
}

/// Adds axial bevels at the facet polygon's bounds and edge bevels (planes
/// through a non-axial edge, parallel to an axis, with the whole polygon
/// behind them) that the facet does not have yet. False when the polygon
/// vanished, in which case the reference adds no back plane either.
fn add_bevels(
    list: &mut PlaneList,
    surface: usize,
    borders: &mut Vec<BorderDef>,
) -> Result<bool, TooManyPlanes> {
    let Some(w) = facet_winding(
        list,
        surface,
        borders
            .iter()
            .filter(|b| b.plane != surface)
            .map(|b| (b.plane, b.inward)),
    ) else {
        return Ok(false);
    };
    let surface_plane = list.get(surface);
    let known = |list: &PlaneList, borders: &[BorderDef], plane: &PlaneEq| {
        planes::plane_equal(&surface_plane, plane).is_some()
            || borders
                .iter()
                .any(|b| planes::plane_equal(&list.get(b.plane), plane).is_some())
    };

    let (lo, hi) = w.bounds();
    for axis in 0..3 {
        for dir in [-1.0f32, 1.0] {
            let mut plane = [0.0f32; 4];
            plane[axis] = dir;
            plane[3] = if dir > 0.0 { hi[axis] } else { -lo[axis] };
            if known(list, borders, &plane) {
                continue;
            }
            if borders.len() >= MAX_FACET_BORDERS {
                continue;
            }
            let (index, flipped) = list.find(&plane)?;
            borders.push(BorderDef {
                plane: index,
                inward: flipped,
                no_adjust: false,
            });
        }
    }

    let n = w.points.len();
    for j in 0..n {
        let a = w.points[j];
        let mut edge = a - w.points[(j + 1) % n];
        if planes::normalize(&mut edge) < 0.5 {
            continue; // degenerate edge
        }
        snap_vector(&mut edge);
        if (0..3).any(|k| edge[k] == 1.0 || edge[k] == -1.0) {
            continue; // axial edges are covered by the axial bevels
        }
        for axis in 0..3 {
            for dir in [-1.0f32, 1.0] {
                let mut along = Vec3::ZERO;
                along[axis] = dir;
                let mut nrm = edge.cross(along);
                if planes::normalize(&mut nrm) < 0.5 {
                    continue;
                }
                let plane = [nrm.x, nrm.y, nrm.z, planes::dot(a, nrm)];
                // A proper bevel has the whole polygon behind it.
                if w.points
                    .iter()
                    .any(|p| planes::distance(&plane, *p) as f64 > 0.1)
                {
                    continue;
                }
                if known(list, borders, &plane) {
                    continue;
                }
                if borders.len() >= MAX_FACET_BORDERS {
                    continue;
                }
                let (index, flipped) = list.find(&plane)?;
                // A bevel that would cut the polygon away entirely is not kept
                // (its plane stays in the list, as in the reference).
                let p = facing(list, index, flipped);
                if w.clone()
                    .chop(normal(&p), p[3], PATCH_WINDING_EPSILON)
                    .is_none()
                {
                    continue;
                }
                borders.push(BorderDef {
                    plane: index,
                    inward: flipped,
                    no_adjust: false,
                });
            }
        }
    }
    Ok(true)
}

/// Snaps a nearly axial unit vector onto its axis.
fn snap_vector(v: &mut Vec3) {
    for k in 0..3 {
        for target in [1.0f32, -1.0] {
            if ((v[k] - target) as f64).abs() < PATCH_NORMAL_EPSILON {
                *v = Vec3::ZERO;
                v[k] = target;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flat 3×3 patch on z = 8 from (0,0) to (64,64).
    fn flat_grid() -> Grid {
        let pts: Vec<Vec3> = (0..3)
            .flat_map(|j| (0..3).map(move |i| Vec3::new(i as f32 * 32.0, j as f32 * 32.0, 8.0)))
            .collect();
        Grid::refined(3, 3, &pts).expect("grid")
    }

    #[test]
    fn flat_patch_is_one_facet_on_its_plane() {
        let pc = build(&flat_grid()).expect("collide");
        assert_eq!(pc.facets.len(), 1);
        let f = &pc.facets[0];
        // The refined grid is transposed, so this winding faces up.
        assert_eq!(pc.planes[f.surface], [0.0, 0.0, 1.0, 8.0]);
        // 4 edges (they are the x/y axial bevels too; the z bevels are the
        // surface itself), and the back of the surface last.
        let last = f.borders.last().expect("borders");
        assert_eq!((last.plane, last.inward), (f.surface, true));
        assert_eq!(f.borders.len(), 4 + 1);
        // Every border faces so that the facet's middle lies behind it.
        let mid = Vec3::new(32.0, 32.0, 8.0);
        for b in &f.borders[..4] {
            let p = facing(
                &PlaneList {
                    planes: pc.planes.clone(),
                },
                b.plane,
                !b.inward,
            );
            assert!(planes::distance(&p, mid) < 0.0, "{p:?}");
        }
    }

    #[test]
    fn degenerate_patch_has_no_facets() {
        let grid = Grid::refined(3, 3, &[Vec3::ONE; 9]).expect("grid");
        assert!(build(&grid).expect("collide").facets.is_empty());
    }

    #[test]
    fn bent_patch_has_many_facets() {
        let pts: Vec<Vec3> = (0..3)
            .flat_map(|j| {
                (0..3).map(move |i| {
                    Vec3::new(
                        i as f32 * 64.0,
                        j as f32 * 64.0,
                        if i == 1 { 128.0 } else { 0.0 },
                    )
                })
            })
            .collect();
        let grid = Grid::refined(3, 3, &pts).expect("grid");
        let pc = build(&grid).expect("collide");
        assert!(pc.facets.len() >= grid.width() - 1);
        for f in &pc.facets {
            assert!(f.borders.len() >= 4);
        }
    }
}
