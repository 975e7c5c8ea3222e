//! Rays near patches whose answer depends on the order the walk meets
//! contacts in, against the walk over the source's tree, bit for bit.
//!
//! A map may hold two copies of one patch (real ones do: oacmpdm8 and
//! pul1ctf have several): a ray then hits both at the same fraction, with
//! the same window and the same report, and whichever the walk meets first
//! wins. The fast trace answers those itself; these tests double the
//! committed map's patches to have many such rays.

use crate::common;

use bspq::compile::CompileOptions;
use bspq::map::{compile_source, Map};
use bspq::trace::Kernel as World;
use bspq::trace::{trace, trace_queries, trace_with_stats, BatchOptions, Scratch, TraceQuery};
use bspq::world::{Leaf, Patch, WorldData};
use common::{map_path, result_bits, Rng};
use glam::Vec3;
/// Rays skimming the facets of patch `p` (crossing a facet's surface plane
/// inside the patch's bounds at a slope of 1/2 to 1/128, from either
/// side), and rays aimed at the patch's bounds from around them, some along
/// an axis; every coordinate on the 1/8-unit grid.
fn rays_at_patch(world: &World, p: usize, rng: &mut Rng, count: usize) -> Vec<TraceQuery> {
    let patch = &world.patches[p];
    let (lo, hi) = (Vec3::from(patch.mins), Vec3::from(patch.maxs));
    let facets = patch.first_facet as usize..(patch.first_facet + patch.num_facets) as usize;
    let snap = |v: Vec3| (v * 8.0).round() / 8.0;
    (0..count)
        .map(|i| {
            let point = lo + (hi - lo) * Vec3::new(rng.unit(), rng.unit(), rng.unit());
            let (start, end) = if i % 4 != 3 {
                let facet = &world.facets[facets.start + rng.below(facets.len())];
                let [x, y, z, dist] = world.patch_planes[facet.surface_plane as usize].plane;
                let n = Vec3::new(x, y, z);
                let on_plane = point - n * (n.dot(point) - dist);
                let across = Vec3::new(rng.unit() - 0.5, rng.unit() - 0.5, rng.unit() - 0.5);
                let along = (across - n * n.dot(across)).normalize_or(n.any_orthonormal_vector());
                let length = 16.0 + 240.0 * rng.unit();
                let slope = 1.0 / (2.0 + 126.0 * rng.unit());
                let side = if i % 8 == 5 { -1.0 } else { 1.0 };
                let rise = n * (side * length * slope);
                (
                    on_plane - along * length + rise,
                    on_plane + along * length * rng.unit() - rise,
                )
            } else {
                let dir = Vec3::new(rng.unit() - 0.5, rng.unit() - 0.5, rng.unit() - 0.5);
                let mut dir = dir.normalize_or(Vec3::Z);
                if i % 3 == 0 {
                    dir[rng.below(3)] = 0.0;
                }
                (
                    point - dir * (8.0 + 248.0 * rng.unit()),
                    point + dir * 64.0 * rng.unit(),
                )
            };
            TraceQuery::ray(snap(start), snap(end), 1).unwrap()
        })
        .collect()
}

/// `data` with patch `p` doubled: a second patch with copies of its
/// facets (the same planes), listed right after it wherever it is listed.
fn double_patch(data: &mut WorldData, p: u32) {
    let patch = data.patches[p as usize];
    let copy = data.patches.len() as u32;
    let facets = patch.first_facet as usize..(patch.first_facet + patch.num_facets) as usize;
    let first_facet = data.facets.len() as u32;
    data.facets.extend_from_within(facets);
    data.patches.push(Patch {
        first_facet,
        ..patch
    });
    relist(&mut data.leaves, &mut data.leaf_patches, p, copy);
    relist(
        &mut data.source_leaves,
        &mut data.source_leaf_patches,
        p,
        copy,
    );
}

/// The leaves' patch lists with `copy` listed after every `p`.
fn relist(leaves: &mut [Leaf], list: &mut Vec<u32>, p: u32, copy: u32) {
    let mut out = Vec::with_capacity(list.len() + 64);
    for leaf in leaves {
        let first = out.len() as u32;
        for &q in &list[leaf.first_patch as usize..][..leaf.num_patches as usize] {
            out.push(q);
            if q == p {
                out.push(copy);
            }
        }
        leaf.first_patch = first;
        leaf.num_patches = out.len() as u32 - first;
    }
    *list = out;
}

/// Whether `plane` (normal and distance) is the surface plane of a facet
/// of patch `p`.
fn on_patch(world: &World, p: usize, normal: Vec3, dist: f32) -> bool {
    let patch = &world.patches[p];
    world.facets[patch.first_facet as usize..][..patch.num_facets as usize]
        .iter()
        .any(|f| {
            let [x, y, z, d] = world.patch_planes[f.surface_plane as usize].plane;
            [x, y, z, d].map(f32::to_bits) == [normal.x, normal.y, normal.z, dist].map(f32::to_bits)
        })
}

/// Rays at oa_ctf2's patches, each patch doubled, answer as the walk does
/// (single, with the walk's counters, and batched), and most of those
/// hitting a patch are answered without the walk.
#[test]
fn rays_at_doubled_patches_are_answered_as_the_walk_does() {
    let bytes = std::fs::read(map_path("oa_ctf2")).expect("committed map");
    let mut data = compile_source(&bytes, "oa_ctf2", &CompileOptions::default())
        .expect("committed map compiles");
    let patches = data.patches.len() as u32;
    assert!(patches >= 20, "oa_ctf2 has {patches} patches");
    assert!(data.hull_leaf_patches.is_empty());
    for p in 0..patches {
        double_patch(&mut data, p);
    }
    let loaded = Map::from_data(data).expect("the doubled world loads");
    let world = loaded.view();
    let walk = world.reference();
    let mut rng = Rng::new(0x9a7c_4e5d_0f21_b3a8);
    let mut scratch = Scratch::new();
    let (mut on_patches, mut without_walk) = (0, 0);
    for p in 0..patches as usize {
        let queries = rays_at_patch(&world, p, &mut rng, 300);
        let batch = trace_queries(&world, &queries, &BatchOptions::single_thread());
        for (i, q) in queries.iter().enumerate() {
            let expected = trace(&walk, q, &mut scratch);
            let bits = result_bits(&expected);
            let (got, stats) = trace_with_stats(&world, q, &mut scratch);
            assert_eq!(result_bits(&got), bits, "patch {p}: {q:?}");
            assert_eq!(result_bits(&trace(&world, q, &mut scratch)), bits);
            assert_eq!(result_bits(&batch[i]), bits, "batch: patch {p}: {q:?}");
            if expected.fraction < 1.0 && on_patch(&world, p, expected.normal, expected.dist) {
                on_patches += 1;
                without_walk += (stats.fallbacks == 0) as usize;
            }
        }
    }
    assert!(on_patches >= 3_000, "{on_patches} rays hit a doubled patch");
    assert!(
        without_walk * 10 >= on_patches * 9,
        "{without_walk} of {on_patches} rays hitting a doubled patch were answered without the walk"
    );
}
