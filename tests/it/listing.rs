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

use crate::common;

use bspq::compile::CompileOptions;
use bspq::map::{compile_source, Map};
use bspq::trace::accel::bvh::{
    BvhNode, EMPTY_SLOT, INDEX, LOOSE_FACET, PATCH, PRIMITIVE, RAY_FACET, SMALL_BOX_HALF,
};
use bspq::trace::Kernel as World;
use bspq::trace::{any_hit, trace, trace_queries, BatchOptions, Scratch, TraceQuery};
use bspq::world::WorldData;
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
        // The largest the boxes' tree over single facets serves, and one
        // past it (see `SMALL_BOX_HALF`).
        (Vec3::splat(-SMALL_BOX_HALF), Vec3::splat(SMALL_BOX_HALF)),
        (Vec3::new(-20.0, -20.0, -90.0), Vec3::new(20.0, 20.0, 40.0)),
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
                if i % 7 == 0 { u32::MAX } else { 1 },
            )
            .unwrap()
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
    let mut rng = Rng::new(0x5eed_1157);
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
        let loaded = Map::from_data(data).expect("still a valid world");
        let world = loaded.view();
        for &b in &picked {
            assert!(
                world.accel.unlisted.brush(b as usize),
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
    let mut rng = Rng::new(0x09a7_c4e5);
    // Of the committed maps, oa_ctf2 has patches.
    let mut data = compile("oa_ctf2");
    let mut picked = Vec::new();
    for p in 0..data.patches.len() as u32 {
        if unlist(&mut data, p, true) {
            picked.push(p);
        }
    }
    assert!(picked.len() >= 8, "too few patches listed twice");
    let loaded = Map::from_data(data).expect("still a valid world");
    let world = loaded.view();
    for &p in &picked {
        let patch = &world.patches[p as usize];
        let mut queries = moves_at(&mut rng, patch.mins, patch.maxs, 300);
        queries.extend(grazing_rays(&world, p as usize, &mut rng, 300));
        assert_as_walk(&world, &queries, &format!("oa_ctf2 patch {p}"));
    }
}

/// Rays skimming the facets of patch `p`: each crosses a facet's surface
/// plane at a point inside the patch's bounds, at a slope of 1/4 to 1/128.
/// A ray stops 1/8 unit short of the plane, which along such a ray lies up
/// to 16 units back from where it meets the facet.
fn grazing_rays(world: &World, p: usize, rng: &mut Rng, count: usize) -> Vec<TraceQuery> {
    let patch = &world.patches[p];
    let (lo, hi) = (Vec3::from(patch.mins), Vec3::from(patch.maxs));
    let facets = patch.first_facet as usize..(patch.first_facet + patch.num_facets) as usize;
    let snap = |v: Vec3| (v * 8.0).round() / 8.0;
    (0..count)
        .map(|_| {
            let facet = &world.facets[facets.start + rng.below(facets.len())];
            let [x, y, z, dist] = world.patch_planes[facet.surface_plane as usize].plane;
            let n = Vec3::new(x, y, z);
            let point = lo + (hi - lo) * Vec3::new(rng.unit(), rng.unit(), rng.unit());
            let on_plane = point - n * (n.dot(point) - dist);
            let across = Vec3::new(rng.unit() - 0.5, rng.unit() - 0.5, rng.unit() - 0.5);
            let along = (across - n * n.dot(across)).normalize_or(n.any_orthonormal_vector());
            let length = 16.0 + 240.0 * rng.unit();
            let slope = 1.0 / (4.0 + 124.0 * rng.unit());
            let start = on_plane - along * length + n * (length * slope);
            let end = on_plane + along * length * rng.unit() - n * (length * slope);
            TraceQuery::ray(snap(start), snap(end), 1).unwrap()
        })
        .collect()
}

/// The committed maps as compiled: the unlisted pieces found are few, and
/// moves aimed at them answer as the walk does.
#[test]
fn unlisted_pieces_of_the_committed_maps_are_traced_as_the_walk_does() {
    let mut rng = Rng::new(0x0011_57ed);
    for map in MAPS {
        let loaded = Map::from_data(compile(map)).expect("committed map loads");
        let world = loaded.view();
        let unlisted = &world.accel.unlisted;
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
/// `world::border_starts`): such rays answer as the walk does, and so do
/// rays starting with that coordinate on another axis, which the fast
/// trace answers.
#[test]
fn rays_starting_on_a_facet_border_plane_are_traced_as_the_walk_does() {
    let mut rng = Rng::new(0x000b_0de5);
    let loaded = Map::from_data(compile("oa_ctf2")).expect("committed map loads");
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
    for i in 0..20_000 {
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
        // One in four on another axis's coordinate only: not on the plane,
        // so the fast trace answers those (see `trace::accel::border_starts`).
        let on = if i % 4 == 3 {
            (axis + 1 + rng.below(2)) % 3
        } else {
            axis
        };
        start[on] = at;
        let dir = Vec3::new(rng.unit() - 0.5, rng.unit() - 0.5, rng.unit() - 0.5);
        let end = ((start + dir.normalize_or(Vec3::Z) * 1024.0 * rng.unit()) * 8.0).round() / 8.0;
        queries.push(TraceQuery::ray(start, end, 1).unwrap());
    }
    assert_as_walk(&world, &queries, "oa_ctf2 ray from a border plane");
}

/// Facets whose axial bevels are only nearly axial, as many real maps'
/// are: the rays' tree holds each such facet bounded by its polygon, the
/// boxes' tree bounded by how far a box can meet it (up to
/// `SMALL_BOX_HALF`; larger boxes search its whole patch), and all answer
/// as the walk does. (The committed maps' facets all have exact axial
/// planes, so this tilts them: each exactly axial patch plane turns about
/// the point on it nearest its patch's centre, by 0.002 radians as real
/// maps' are, and by 0.05, where a large box's reach past the polygon
/// exceeds the cull margin.)
#[test]
fn facets_with_nearly_axial_planes_are_traced_as_the_walk_does() {
    for (tilt, seed) in [(0.002, 0x0a11_7117), (0.05, 0x0a11_7118)] {
        let mut rng = Rng::new(seed);
        let loaded = Map::from_data(tilted_patch_planes("oa_ctf2", tilt, &mut rng))
            .expect("still a valid world");
        let world = loaded.view();
        let bvh = &world.accel.bvh;
        let count = |nodes: &[BvhNode], kind: u32| {
            nodes
                .iter()
                .flat_map(|n| n.children)
                .filter(|&c| c != EMPTY_SLOT && c & PRIMITIVE != 0 && c & RAY_FACET == kind)
                .count()
        };
        let ray_facets = count(&bvh.patches, RAY_FACET);
        assert!(
            ray_facets > 100,
            "tilt {tilt}: only {ray_facets} facets bounded by their polygon"
        );
        let box_facets = count(&bvh.combined, LOOSE_FACET);
        assert!(
            box_facets >= ray_facets,
            "tilt {tilt}: {box_facets} facets bounded by a box's reach"
        );
        assert!(count(&bvh.combined_whole, PATCH) > 10, "tilt {tilt}");
        for (p, patch) in world.patches.iter().enumerate().step_by(3) {
            let mut queries = moves_at(&mut rng, patch.mins, patch.maxs, 200);
            if tilt > 0.01 {
                // A whole patch is met where the move's swept box reaches
                // its bounds; past them, a box can meet a facet tilted this
                // far by more than the cull margin (see the README).
                queries.retain(|q| (q.maxs() - q.mins()).max_element() <= 2.0 * SMALL_BOX_HALF);
            }
            assert_as_walk(
                &world,
                &queries,
                &format!("oa_ctf2 patch {p} tilted {tilt}"),
            );
        }
    }
}

/// `map` compiled, with each exactly axial patch plane turned by `tilt`
/// radians (either way, at random) about the point on it nearest its
/// patch's centre.
fn tilted_patch_planes(map: &str, tilt: f32, rng: &mut Rng) -> WorldData {
    let mut data = compile(map);
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
            turned[(axis + 1) % 3] = if rng.unit() < 0.5 { tilt } else { -tilt };
            let turned = turned.normalize();
            p.plane = [turned.x, turned.y, turned.z, turned.dot(pivot)];
            p.sign_bits = (0..3).filter(|&k| turned[k] < 0.0).map(|k| 1 << k).sum();
            tilted += 1;
        }
    }
    assert!(tilted > 100, "{map}: only {tilted} axial patch planes");
    data
}

/// The bounds the boxes' tree gives a facet lacking an axial plane hold,
/// grown by a box's half-size, every centre where that box meets the
/// facet (within 1/8 unit of each of its planes pushed out by the box),
/// for boxes up to `SMALL_BOX_HALF`: checked on random centres around
/// oa_ctf2's facets tilted by 0.05 radians, where that region reaches
/// well past the facet's polygon grown by the box.
#[test]
fn a_box_meets_a_loosely_bounded_facet_only_within_its_bounds() {
    let mut rng = Rng::new(0x0a11_7119);
    let loaded = Map::from_data(tilted_patch_planes("oa_ctf2", 0.05, &mut rng))
        .expect("still a valid world");
    let world = loaded.view();
    let bvh = &world.accel.bvh;
    let mut facets = 0;
    let mut inside = 0;
    for node in &bvh.combined {
        for slot in 0..4 {
            let child = node.children[slot];
            if child == EMPTY_SLOT || child & PRIMITIVE == 0 || child & RAY_FACET != LOOSE_FACET {
                continue;
            }
            facets += 1;
            let lo = Vec3::new(node.min[0][slot], node.min[1][slot], node.min[2][slot]);
            let hi = Vec3::new(node.max[0][slot], node.max[1][slot], node.max[2][slot]);
            let facet = &world.facets[(child & INDEX) as usize];
            let plane = |index: u32, flipped: bool| {
                let [x, y, z, d] = world.patch_planes[index as usize].plane;
                let sign = if flipped { -1.0 } else { 1.0 };
                (Vec3::new(x, y, z) * sign, d * sign)
            };
            let borders =
                &world.facet_borders[facet.first_border as usize..][..facet.num_borders as usize];
            let planes: Vec<(Vec3, f32)> = std::iter::once(plane(facet.surface_plane, false))
                .chain(borders.iter().map(|b| plane(b.plane, b.inward != 0)))
                .collect();
            let patch = &world.patches[bvh.facet_patch[(child & INDEX) as usize] as usize];
            for _ in 0..2000 {
                let half = Vec3::new(rng.unit(), rng.unit(), rng.unit()) * SMALL_BOX_HALF;
                let reach = half * 3.0 + Vec3::splat(16.0);
                let (around_lo, around_hi) = (
                    Vec3::from(patch.mins) - reach,
                    Vec3::from(patch.maxs) + reach,
                );
                let centre = around_lo
                    + (around_hi - around_lo) * Vec3::new(rng.unit(), rng.unit(), rng.unit());
                let meets = planes
                    .iter()
                    .all(|&(n, d)| n.dot(centre) <= d + n.abs().dot(half) + 0.125);
                if meets {
                    inside += 1;
                    assert!(
                        (lo - half).cmple(centre).all() && centre.cmple(hi + half).all(),
                        "facet {child:#x}: a box of half-size {half} meets it at {centre}, outside {lo}..{hi} grown by it"
                    );
                }
            }
        }
    }
    assert!(
        facets > 100,
        "only {facets} facets bounded by a box's reach"
    );
    assert!(inside > 10_000, "only {inside} centres met a facet");
}
