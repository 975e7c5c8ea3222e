//! Patch (curve) collision geometry: each patch surface becomes a "patch
//! collide", a list of facets (a surface plane plus border and bevel planes)
//! over a shared plane list, built the way the reference builds it so that
//! traces against it give the reference's answers.
//!
//! Path: [`grid`] (refine the control grid into points on the curve) →
//! [`facets`] (one or two facets per grid square, using [`planes`] for the
//! deduplicated plane list and [`winding`] for validation and bevels) → the
//! flat records of [`World`](crate::world::World).

mod facets;
mod grid;
mod planes;
mod winding;

use crate::math::Vec3;
use crate::source::q3bsp::Model;
use crate::source::Q3Bsp;
use crate::world::{self, WorldData};

// The reference's construction epsilons, in one place. Reproducing its facets
// exactly depends on these values, so they are not tunable.

/// A column is kept (subdivided) when the curve's midpoint lies at least this
/// far from the chord between its interpolating points.
const SUBDIVIDE_DISTANCE: f32 = 16.0;
/// Size of the reference's base windings and bounds of a valid facet.
const MAX_MAP_BOUNDS: f32 = 65535.0;
/// A patch grows its bounds by this much in every direction.
const BOUNDS_GROWTH: f32 = 1.0;

// Limits that bound memory and time on hostile input. The reference has the
// same grid limit; patches beyond any of these are left out.

/// Most points along either side of a refined grid.
const MAX_GRID_SIDE: usize = crate::source::q3bsp::MAX_PATCH_SIDE;
/// Most planes of one patch collide.
const MAX_PATCH_PLANES: usize = 4096;
/// Most facets of one patch collide.
const MAX_PATCH_FACETS: usize = 1024;
/// Most borders of a facet before bevels stop being added (4 edges, 6 axial, 16 edge bevels).
use crate::world::MAX_FACET_BORDERS;
/// Most points of a facet winding.
const MAX_WINDING_POINTS: usize = 64;

/// A patch as the tree builder sees it: its index in `World::patches`.
#[derive(Debug, Clone, Copy)]
pub struct PatchInput {
    pub index: u32,
}

/// Builds the collision facets of every patch of `model` into `world`.
/// Patches that exceed a limit, or leave no facet, are left out.
pub fn collect(bsp: &Q3Bsp, model: &Model, world: &mut WorldData) -> Vec<PatchInput> {
    bsp.patches_of(model)
        .filter_map(|patch| {
            let (contents, surface_flags) = bsp
                .shaders
                .get(patch.shader as usize)
                .map_or((0, 0), |s| (s.content_flags, s.surface_flags));
            let source = PatchSource {
                width: patch.width,
                height: patch.height,
                points: &patch.points,
                contents,
                surface_flags,
                source_surface: patch.surface_index,
            };
            add_patch(world, &source).map(|index| PatchInput { index })
        })
        .collect()
}

/// One patch surface to compile: its control grid (row-major, `width` per
/// row) and what its shader says.
#[derive(Debug, Clone, Copy)]
pub struct PatchSource<'a> {
    pub width: usize,
    pub height: usize,
    pub points: &'a [Vec3],
    pub contents: u32,
    pub surface_flags: u32,
    pub source_surface: u32,
}

/// Appends one patch's collision records to `world`; its index in
/// `World::patches`, or `None` when it is left out.
pub fn add_patch(world: &mut WorldData, source: &PatchSource) -> Option<u32> {
    let grid = grid::Grid::refined(source.width, source.height, source.points)?;
    let collide = facets::build(&grid)?;
    if collide.facets.is_empty() {
        return None;
    }
    // The refined grid's points bound every facet polygon.
    let (mins, maxs) = grid.bounds();
    let grow = Vec3::splat(BOUNDS_GROWTH);
    let index = u32::try_from(world.patches.len()).ok()?;
    let first_plane = u32::try_from(world.patch_planes.len()).ok()?;
    world
        .patch_planes
        .extend(collide.planes.iter().map(|p| world::PatchPlane {
            plane: *p,
            sign_bits: planes::sign_bits(p),
        }));
    let first_facet = world.facets.len() as u32;
    for facet in &collide.facets {
        let first_border = world.facet_borders.len() as u32;
        world
            .facet_borders
            .extend(facet.borders.iter().map(|b| world::FacetBorder {
                plane: first_plane + b.plane as u32,
                inward: b.inward as u32,
                no_adjust: b.no_adjust as u32,
            }));
        world.facets.push(world::Facet {
            surface_plane: first_plane + facet.surface as u32,
            first_border,
            num_borders: facet.borders.len() as u32,
        });
    }
    world.patches.push(world::Patch {
        contents: source.contents,
        surface_flags: source.surface_flags,
        first_facet,
        num_facets: collide.facets.len() as u32,
        first_plane,
        num_planes: collide.planes.len() as u32,
        mins: (mins - grow).to_array(),
        maxs: (maxs + grow).to_array(),
        source_surface: source.source_surface,
    });
    Some(index)
}
