//! Brushes and patches the source's tree does not list everywhere they
//! reach: the reference passes through those pieces, and the fast trace
//! must answer as the walk over the source's tree does.
//!
//! Real maps have such pieces (a sliver split off a brush, a patch's
//! collision facets poking out of the leaves that list the patch), but the
//! committed maps have few, so these tests make more: each takes a brush
//! or patch out of one of the leaves that list it, then traces moves aimed
//! at it and compares the fast trace, any-hit and the batch path with the
//! walk, bit for bit.

mod common;

use bspq::compile::CompileOptions;
use bspq::trace::{any_hit, trace, trace_queries, BatchOptions, Scratch, TraceQuery};
use bspq::world::bvh::{EMPTY_SLOT, PRIMITIVE, RAY_FACET};
use bspq::world::load::{compile_source, LoadedWorld};
use bspq::world::{World, WorldData};
use common::{map_path, result_bits, Rng, MAPS};
use glam::Vec3;

fn compile(map: &str) -> WorldData {
    let bytes = std::fs::read(map_path(map)).expect("committed map");
    compile_source(&bytes, map, &CompileOptions::default()).expect("committed map compiles")
}

/// Takes brush or patch `item` (`patch`: a patch) out of the first leaf of
/// the source's tree that lists it, when another leaf lists it too.
fn unlist(data: &mut WorldData, item: u32, patch: bool) -> bool {
    let lists = |data: &WorldData, leaf: usize| {
        let l = &data.source_leaves[leaf];
        let (first, count, list) = if patch {
            (l.first_patch, l.num_patches, &data.source_leaf_patches)
        } else {
            (l.first_brush, l.num_brushes, &data.source_leaf_brushes)
        };
        list[first as usize..][..count as usize].contains(&item)
    };
    let listing: Vec<usize> = (0..data.source_leaves.len())
        .filter(|&l| lists(data, l))
        .collect();
    if listing.len() < 2 {
        return false;
    }
    let leaf = &mut data.source_leaves[listing[0]];
    let (first, count, list) = if patch {
        (
            leaf.first_patch,
            &mut leaf.num_patches,
            &mut data.source_leaf_patches,
        )
    } else {
        (
            leaf.first_brush,
            &mut leaf.num_brushes,
            &mut data.source_leaf_brushes,
        )
    };
    let range = first as usize..(first + *count) as usize;
    let Some(at) = list[range.clone()].iter().position(|&x| x == item) else {
        return false;
    };
    // Swap it to the end of the leaf's list and shorten the list.
    list.swap(range.start + at, range.end - 1);
    *count -= 1;
    true
}

/// Moves aimed at the bounds `lo..hi` from around them: rays and boxes,
/// some grazing an axis, from up to 256 units away.
fn moves_at(rng: &mut Rng, lo: [f32; 3], hi: [f32; 3], count: usize) -> Vec<TraceQuery> {
    let (lo, hi) = (Vec3::from(lo), Vec3::from(hi));
    let boxes = [
        (Vec3::ZERO, Vec3::ZERO),
        (Vec3::new(-15.0, -15.0, -24.0), Vec3::new(15.0, 15.0, 32.0)),
        (Vec3::splat(-4.0), Vec3::splat(4.0)),
    ];
    let snap = |v: Vec3| (v * 8.0).round() / 8.0;
    (0..count)
        .map(|i| {
            let target = lo + (hi - lo) * Vec3::new(rng.unit(), rng.unit(), rng.unit());
            let dir = Vec3::new(rng.unit() - 0.5, rng.unit() - 0.5, rng.unit() - 0.5);
            let mut dir = dir.normalize_or(Vec3::Z);
            if i % 3 == 0 {
                dir[rng.below(3)] = 0.0;
            }
            let start = snap(target - dir * (8.0 + 248.0 * rng.unit()));
            let end = snap(target + dir * 64.0 * rng.unit());
            let (mins, maxs) = boxes[i % boxes.len()];
            TraceQuery::boxed(
                start,
                end,
                mins,
                maxs,
                if i % 5 == 0 { u32::MAX } else { 1 },
            )
        })
        .collect()
}

/// The fast trace, any-hit and batches against the walk over the source's
/// tree, on `queries`.
fn assert_as_walk(world: &World, queries: &[TraceQuery], what: &str) {
    let walk = world.reference();
    let mut scratch = Scratch::new();
    let batch = trace_queries(world, queries, &BatchOptions::single_thread());
    for (i, q) in queries.iter().enumerate() {
        let expected = trace(&walk, q, &mut scratch);
        let got = trace(world, q, &mut scratch);
        assert_eq!(
            result_bits(&got),
            result_bits(&expected),
            "{what}: fast trace vs walk on {q:?}\n got {got:?}\n want {expected:?}"
        );
        assert_eq!(
            result_bits(&batch[i]),
            result_bits(&expected),
            "{what}: batch on {q:?}"
        );
        assert_eq!(
            any_hit(world, q, &mut scratch),
            expected.fraction < 1.0,
            "{what}: any-hit on {q:?}"
        );
    }
}

#[test]
fn brushes_taken_out_of_a_leaf_are_traced_as_the_walk_does() {
    let mut rng = Rng(0x5eed_1157);
    for map in MAPS {
        let mut data = compile(map);
        let mut picked = Vec::new();
        for _ in 0..400 {
            let b = rng.below(data.brushes.len()) as u32;
            if data.brushes[b as usize].contents != 0 && unlist(&mut data, b, false) {
                picked.push(b);
            }
            if picked.len() == 24 {
                break;
            }
        }
        assert!(picked.len() >= 8, "{map}: too few brushes listed twice");
        let loaded = LoadedWorld::from_data(data).expect("still a valid world");
        let world = loaded.view();
        for &b in &picked {
            assert!(
                world.kernel.unlisted.brush(b as usize),
                "{map}: brush {b} was taken out of a leaf but is not found unlisted"
            );
            let brush = &world.brushes[b as usize];
            let queries = moves_at(&mut rng, brush.mins, brush.maxs, 300);
            assert_as_walk(&world, &queries, &format!("{map} brush {b}"));
        }
    }
}

#[test]
fn patches_taken_out_of_a_leaf_are_traced_as_the_walk_does() {
    let mut rng = Rng(0x09a7_c4e5);
    // Of the committed maps, oa_ctf2 has patches.
    let mut data = compile("oa_ctf2");
    let mut picked = Vec::new();
    for p in 0..data.patches.len() as u32 {
        if unlist(&mut data, p, true) {
            picked.push(p);
        }
    }
    assert!(picked.len() >= 8, "too few patches listed twice");
    let loaded = LoadedWorld::from_data(data).expect("still a valid world");
    let world = loaded.view();
    for &p in &picked {
        let patch = &world.patches[p as usize];
        let queries = moves_at(&mut rng, patch.mins, patch.maxs, 300);
        assert_as_walk(&world, &queries, &format!("oa_ctf2 patch {p}"));
    }
}

/// The committed maps as compiled: the unlisted pieces found are few, and
/// moves aimed at them answer as the walk does.
#[test]
fn unlisted_pieces_of_the_committed_maps_are_traced_as_the_walk_does() {
    let mut rng = Rng(0x0011_57ed);
    for map in MAPS {
        let loaded = LoadedWorld::from_data(compile(map)).expect("committed map loads");
        let world = loaded.view();
        let unlisted = &world.kernel.unlisted;
        let (brushes, facets) = unlisted.counts();
        assert!(
            brushes * 10 <= world.brushes.len(),
            "{map}: {brushes} brushes"
        );
        assert!(
            facets * 4 <= world.facets.len().max(1),
            "{map}: {facets} facets"
        );
        for r in unlisted.pieces().take(40) {
            let queries = moves_at(&mut rng, r[0], r[1], 200);
            assert_as_walk(&world, &queries, &format!("{map} unlisted piece {r:?}"));
        }
    }
}

/// A ray starting exactly on a facet's axial border plane passes that
/// border wherever it goes, so it can meet the facet far outside the
/// patch's bounds when the walk tests the patch (see
/// `world::border_starts`): such rays answer as the walk does.
#[test]
fn rays_starting_on_a_facet_border_plane_are_traced_as_the_walk_does() {
    let mut rng = Rng(0x000b_0de5);
    let loaded = LoadedWorld::from_data(compile("oa_ctf2")).expect("committed map loads");
    let world = loaded.view();
    let mut planes = Vec::new();
    for (f, facet) in world.facets.iter().enumerate() {
        let borders =
            &world.facet_borders[facet.first_border as usize..][..facet.num_borders as usize];
        for b in borders.iter().filter(|b| b.inward == 0) {
            let [x, y, z, dist] = world.patch_planes[b.plane as usize].plane;
            for (axis, n) in [x, y, z].into_iter().enumerate() {
                if n.abs() == 1.0 && [x, y, z].iter().filter(|&&c| c != 0.0).count() == 1 {
                    planes.push((f, axis, dist * n));
                }
            }
        }
    }
    assert!(planes.len() > 100, "oa_ctf2 has axial facet borders");
    let mut queries = Vec::new();
    for _ in 0..20_000 {
        let (f, axis, at) = planes[rng.below(planes.len())];
        let patch = world
            .patches
            .iter()
            .find(|p| (p.first_facet..p.first_facet + p.num_facets).contains(&(f as u32)))
            .expect("every facet belongs to a patch");
        let around = |lo: f32, hi: f32, rng: &mut Rng| {
            ((lo - 128.0 + (hi - lo + 256.0) * rng.unit()) * 8.0).round() / 8.0
        };
        let mut start = Vec3::ZERO;
        for k in 0..3 {
            start[k] = around(patch.mins[k], patch.maxs[k], &mut rng);
        }
        start[axis] = at;
        let dir = Vec3::new(rng.unit() - 0.5, rng.unit() - 0.5, rng.unit() - 0.5);
        let end = ((start + dir.normalize_or(Vec3::Z) * 1024.0 * rng.unit()) * 8.0).round() / 8.0;
        queries.push(TraceQuery::ray(start, end, 1));
    }
    assert_as_walk(&world, &queries, "oa_ctf2 ray from a border plane");
}

/// Facets whose axial bevels are only nearly axial, as many real maps'
/// are: the rays' tree holds each such facet bounded by its polygon, the
/// boxes' tree its whole patch, and both answer as the walk does. (The
/// committed maps' facets all have exact axial planes, so this tilts
/// them: each exactly axial patch plane turns by 0.002 radians about the
/// point on it nearest its patch's centre.)
#[test]
fn facets_with_nearly_axial_planes_are_traced_as_the_walk_does() {
    let mut rng = Rng(0x0a11_7117);
    let mut data = compile("oa_ctf2");
    let mut tilted = 0;
    for patch in data.patches.clone() {
        let centre = (Vec3::from(patch.mins) + Vec3::from(patch.maxs)) * 0.5;
        let planes = patch.first_plane as usize..(patch.first_plane + patch.num_planes) as usize;
        for p in &mut data.patch_planes[planes] {
            let [x, y, z, dist] = p.plane;
            let n = Vec3::new(x, y, z);
            let Some(axis) = (0..3).find(|&k| n[k].abs() == 1.0) else {
                continue;
            };
            let pivot = centre - n * (n.dot(centre) - dist);
            let mut turned = n;
            turned[(axis + 1) % 3] = if rng.unit() < 0.5 { 0.002 } else { -0.002 };
            let turned = turned.normalize();
            p.plane = [turned.x, turned.y, turned.z, turned.dot(pivot)];
            p.sign_bits = (0..3).filter(|&k| turned[k] < 0.0).map(|k| 1 << k).sum();
            tilted += 1;
        }
    }
    assert!(tilted > 100, "only {tilted} axial patch planes");
    let loaded = LoadedWorld::from_data(data).expect("still a valid world");
    let world = loaded.view();
    let bvh = &world.kernel.bvh;
    let ray_facets = bvh
        .patches
        .iter()
        .flat_map(|n| n.children)
        .filter(|&c| c != EMPTY_SLOT && c & PRIMITIVE != 0 && c & RAY_FACET == RAY_FACET)
        .count();
    assert!(
        ray_facets > 100,
        "only {ray_facets} facets bounded by their polygon"
    );
    for (p, patch) in world.patches.iter().enumerate().step_by(3) {
        let queries = moves_at(&mut rng, patch.mins, patch.maxs, 200);
        assert_as_walk(&world, &queries, &format!("oa_ctf2 tilted patch {p}"));
    }
}
