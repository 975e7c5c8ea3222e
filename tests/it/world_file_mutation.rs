//! Damaged and hostile compiled world files: truncations, byte flips that
//! the checksum catches, and checksum-valid structural corruption (mutated,
//! then re-sealed) must each give an error, or, where the mutation leaves the
//! world valid, a world the kernel queries without panicking. Everything is
//! seeded and deterministic.
//!
//! The random parts are sized to what they find. They were run with eight
//! seeds (the committed ones and seven others), recording the error each
//! case reached, numbers stripped, as its kind:
//! - 200 random truncations: no kind that the structured cuts (header,
//!   table, each section's edges and middle) miss; 20 stay.
//! - 400 byte flips without re-sealing: every one a checksum error; 40 stay.
//! - 120 sealed word overwrites per section: each section's kinds all came
//!   within its first 40 words (the last new one by word 34), except kinds a
//!   structured test here reaches: a node or leaf referenced twice, a
//!   metadata field missing, and a source node referenced twice (4 of 8 runs,
//!   by word 49 to 80; now a case of `broken_source_trees_are_errors`).
//!   None of the 17,280 overwrites panicked. 40 per section stay.
//! - 200 byte flips in the hull sections: every kind by round 62; 80 stay.
//!
//! `BSPQ_SWEEP_SCALE=N` multiplies these counts and `BSPQ_SWEEP_SEED=S`
//! varies the seeds, to search harder.

use crate::common;

use bspq::compile::CompileOptions;
use bspq::map::{compile_source, LoadError, Map};
use bspq::math::Vec3;
use bspq::trace::Scratch;
use bspq::world::format::{self, FormatError, SectionEntry, SectionKind};
use bspq::world::{Brush, BrushSide, Facet, FacetBorder, Leaf, Node, Patch, PatchPlane, Plane};
use common::Rng;
use std::mem::offset_of;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// `default` random cases, times `BSPQ_SWEEP_SCALE` when set.
fn sweep_cases(default: usize) -> usize {
    std::env::var("BSPQ_SWEEP_SCALE")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .map_or(default, |scale| default * scale)
}

/// A sweep's random numbers: `seed`, varied by `BSPQ_SWEEP_SEED` when set.
fn sweep_rng(seed: u64) -> Rng {
    let vary = std::env::var("BSPQ_SWEEP_SEED")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    Rng::new(seed ^ vary)
}

/// oa_ctf2 with curves (it has patches, so every section but the
/// visibility rows and area portals, which it has none of, is non-empty),
/// compiled once and serialised.
fn original() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let source = std::fs::read(common::map_path("oa_ctf2")).unwrap();
        let world = compile_source(&source, "oa_ctf2", &CompileOptions::default()).unwrap();
        format::write(&world)
    })
}

fn sections(bytes: &[u8]) -> Vec<SectionEntry> {
    format::parse_layout(bytes, true).unwrap().sections
}

fn section(bytes: &[u8], kind: SectionKind) -> SectionEntry {
    sections(bytes)
        .into_iter()
        .find(|s| s.kind == kind)
        .unwrap()
}

/// Index of `kind` in the section table.
fn table_index(bytes: &[u8], kind: SectionKind) -> usize {
    sections(bytes).iter().position(|s| s.kind == kind).unwrap()
}

fn get_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
}

fn put_u32(bytes: &mut [u8], at: usize, v: u32) {
    bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(bytes: &mut [u8], at: usize, v: u64) {
    bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn put_f32(bytes: &mut [u8], at: usize, v: f32) {
    put_u32(bytes, at, v.to_bits());
}

/// Byte offset of field `field` of record `index` of section `kind`.
fn field(bytes: &[u8], kind: SectionKind, index: usize, field: usize) -> usize {
    let s = section(bytes, kind);
    assert!(index < s.count, "{kind:?} has {} records", s.count);
    s.offset + index * kind.record_size() + field
}

#[derive(Debug, PartialEq)]
enum Outcome {
    /// Loaded, and queries ran.
    Valid,
    Error(String),
    Panic(String),
}

/// Loads `bytes` under `catch_unwind`, querying the world if it loads.
fn load(bytes: &[u8], seed: u64) -> Outcome {
    let started = Instant::now();
    let outcome = catch_unwind(AssertUnwindSafe(|| match Map::from_compiled_bytes(bytes) {
        Ok(world) => {
            common::exercise(&world.view(), &mut Rng::new(seed), 6);
            Ok(())
        }
        Err(e) => Err(e),
    }));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "a load took {:?}",
        started.elapsed()
    );
    match outcome {
        Ok(Ok(())) => Outcome::Valid,
        Ok(Err(e)) => {
            let msg = e.to_string();
            assert!(!msg.trim().is_empty(), "an error without a message");
            Outcome::Error(msg)
        }
        Err(panic) => Outcome::Panic(
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default(),
        ),
    }
}

/// Mutates a copy of the original, re-seals it and expects an error.
#[track_caller]
fn expect_error(what: &str, mutate: impl FnOnce(&mut Vec<u8>)) -> String {
    let mut bytes = original().to_vec();
    mutate(&mut bytes);
    format::seal(&mut bytes);
    match load(&bytes, 1) {
        Outcome::Error(msg) => msg,
        other => panic!("{what}: expected an error, got {other:?}"),
    }
}

#[test]
fn the_original_loads() {
    assert_eq!(load(original(), 0), Outcome::Valid);
}

#[test]
fn truncations_are_errors() {
    let bytes = original();
    let mut cuts = vec![0, 1, 7, 8, 12, 16, 32, 40, 63, 64, 65];
    let table_end = 64 + 32 * sections(bytes).len();
    cuts.extend([table_end - 1, table_end, table_end + 1]);
    for s in sections(bytes) {
        cuts.extend([s.offset.saturating_sub(1), s.offset, s.offset + 1]);
        cuts.extend([s.offset + s.byte_len / 2, s.offset + s.byte_len]);
        cuts.push((s.offset + s.byte_len).saturating_sub(1));
    }
    let mut rng = sweep_rng(0x0074_7275_6e63);
    cuts.extend((0..sweep_cases(20)).map(|_| rng.below(bytes.len())));
    let content_end = sections(bytes)
        .iter()
        .map(|s| s.offset + s.byte_len)
        .max()
        .unwrap();
    for &cut in &cuts {
        let cut = cut.min(bytes.len() - 1);
        // As is: the header's length no longer matches.
        let truncated = &bytes[..cut];
        match load(truncated, 0) {
            Outcome::Error(_) => {}
            other => panic!("truncation to {cut}: {other:?}"),
        }
        // With the length fixed and the checksum re-sealed: a section now
        // runs past the end (unless only trailing padding was cut).
        if cut >= 64 {
            let mut fixed = truncated.to_vec();
            put_u64(&mut fixed, 24, cut as u64);
            format::seal(&mut fixed);
            match load(&fixed, 0) {
                Outcome::Error(_) => {}
                Outcome::Valid if cut >= content_end => {}
                other => panic!("sealed truncation to {cut}: {other:?}"),
            }
        }
    }
}

#[test]
fn byte_flips_without_resealing_fail_the_checksum() {
    let original = original();
    let mut rng = sweep_rng(0x666c_6970);
    for i in 0..sweep_cases(40) {
        let mut bytes = original.to_vec();
        let at = 64 + rng.below(bytes.len() - 64);
        bytes[at] ^= 1 << rng.below(8);
        let err = match catch_unwind(|| Map::from_compiled_bytes(&bytes)) {
            Ok(Err(e)) => e,
            Ok(Ok(_)) => panic!("flip #{i} at {at} loaded"),
            Err(_) => panic!("flip #{i} at {at} panicked"),
        };
        assert!(
            matches!(err, LoadError::Format(FormatError::Checksum { .. })),
            "flip #{i} at {at}: {err}"
        );
    }
    // Flips in the header: an error or (reserved bytes, flags) a valid world.
    for at in 0..64 {
        for bit in 0..8 {
            let mut bytes = original.to_vec();
            bytes[at] ^= 1 << bit;
            let outcome = load(&bytes, at as u64);
            assert!(
                !matches!(outcome, Outcome::Panic(_)),
                "header flip at {at} bit {bit}: {outcome:?}"
            );
            if (8..40).contains(&at) && !(20..24).contains(&at) {
                assert!(
                    matches!(outcome, Outcome::Error(_)),
                    "header flip at {at} bit {bit}: {outcome:?}"
                );
            }
        }
    }
}

/// Values that break counts, indices and floats.
const NASTY_WORDS: [u32; 14] = [
    0,
    1,
    2,
    0x7FFF_FFFF,
    0x8000_0000,
    0xFFFF_FFFF,
    0xFFFF_FFFE,
    0x0010_0000,
    0x7F80_0000, // +inf
    0xFF80_0000, // -inf
    0x7FC0_0000, // NaN
    0x3F80_0000, // 1.0
    0x4F00_0000, // 2^31 as f32
    0x0000_0081,
];

#[test]
fn sealed_random_word_overwrites_in_every_section() {
    let original = original();
    let mut rng = sweep_rng(0x776f_7264);
    let (mut valid, mut errors) = (0, 0);
    for s in sections(original) {
        for i in 0..sweep_cases(40) as u64 {
            let mut bytes = original.to_vec();
            let words = (s.byte_len / 4).max(1);
            let at = s.offset + 4 * rng.below(words);
            let value = if rng.below(2) == 0 {
                NASTY_WORDS[rng.below(NASTY_WORDS.len())]
            } else {
                rng.next() as u32
            };
            if at + 4 > bytes.len() {
                continue;
            }
            put_u32(&mut bytes, at, value);
            format::seal(&mut bytes);
            match load(&bytes, i) {
                Outcome::Valid => valid += 1,
                Outcome::Error(_) => errors += 1,
                Outcome::Panic(msg) => {
                    panic!("{:?} word at {at} = {value:#x}: panic {msg}", s.kind)
                }
            }
        }
    }
    println!("sealed word overwrites: {valid} valid worlds, {errors} errors");
    assert!(
        valid > 100 && errors > 100,
        "{valid} valid, {errors} errors"
    );
}

#[test]
fn section_table_lies_are_errors() {
    let original = original();
    let n = sections(original).len();
    for index in 0..n {
        let entry = 64 + 32 * index;
        let offset = |b: &mut Vec<u8>, v: u64| put_u64(b, entry + 8, v);
        let count = |b: &mut Vec<u8>, v: u64| put_u64(b, entry + 16, v);
        let len = original.len() as u64;
        for v in [
            u64::MAX,
            u64::MAX / 2,
            1 << 40,
            u32::MAX as u64,
            len,
            len + 1,
        ] {
            expect_error(&format!("section {index} count {v}"), |b| count(b, v));
        }
        for v in [u64::MAX, len, len - 16, 0, 16, 63, 64, 65] {
            if v as usize == sections(original)[index].offset {
                continue;
            }
            // An empty section (oa_ctf2 has no visibility rows and no area
            // portals) reads no bytes: any aligned offset after the table
            // and within the file holds it.
            if sections(original)[index].byte_len == 0 && (v == len || v == len - 16) {
                continue;
            }
            // Offsets that keep the section inside the file may still be
            // aligned and in bounds (then it reads other bytes: fine if it
            // validates, an error otherwise); out-of-bounds ones must fail.
            let mut bytes = original.to_vec();
            offset(&mut bytes, v);
            format::seal(&mut bytes);
            let outcome = load(&bytes, v);
            assert!(
                matches!(outcome, Outcome::Error(_)),
                "section {index} offset {v}: {outcome:?}"
            );
        }
        // Unknown kind, duplicate kind, wrong record size.
        expect_error("unknown kind", |b| put_u32(b, entry, 99));
        expect_error("duplicate kind", |b| {
            let other = get_u32(b, 64 + 32 * ((index + 1) % n));
            put_u32(b, entry, other);
        });
        expect_error("record size", |b| {
            let size = get_u32(b, entry + 4);
            put_u32(b, entry + 4, size + 4);
        });
    }
    // Header counts.
    expect_error("section count 0", |b| put_u32(b, 16, 0));
    expect_error("section count 65", |b| put_u32(b, 16, 65));
    expect_error("section count -1", |b| put_u32(b, 16, u32::MAX));
    expect_error("section count 11", |b| put_u32(b, 16, n as u32 - 1));
    expect_error("header length", |b| put_u32(b, 12, 128));
    // Version 1 predates the entities section; later versions are unknown.
    for version in [0, 1, format::FORMAT_VERSION + 1, u32::MAX] {
        let msg = expect_error("version", |b| put_u32(b, 8, version));
        assert!(msg.contains("unsupported"), "version {version}: {msg}");
    }
    expect_error("file length", |b| put_u64(b, 24, u64::MAX));
}

#[test]
fn a_section_table_claiming_huge_counts_fails_fast() {
    let mut bytes = original()[..4096.min(original().len())].to_vec();
    // Keep the header and table; claim 2^40 records in every section.
    for index in 0..sections(original()).len() {
        put_u64(&mut bytes, 64 + 32 * index + 16, 1 << 40);
    }
    let len = bytes.len() as u64;
    put_u64(&mut bytes, 24, len);
    format::seal(&mut bytes);
    let started = Instant::now();
    assert!(matches!(load(&bytes, 0), Outcome::Error(_)));
    assert!(started.elapsed() < Duration::from_millis(500));
}

#[test]
fn broken_trees_are_errors() {
    let bytes = original();
    let nodes = section(bytes, SectionKind::Nodes);
    let leaves = section(bytes, SectionKind::Leaves);
    let child_at = |i: usize, k: usize| {
        field(
            bytes,
            SectionKind::Nodes,
            i,
            offset_of!(Node, children) + 4 * k,
        )
    };
    let child = |i: usize, k: usize| get_u32(bytes, child_at(i, k)) as i32;
    // A node (not the root) with a node child, and two leaf references.
    let (parent, k) = (1..nodes.count)
        .flat_map(|i| [(i, 0), (i, 1)])
        .find(|&(i, k)| child(i, k) >= 0)
        .unwrap();
    let leaf_refs: Vec<(usize, usize)> = (0..nodes.count)
        .flat_map(|i| [(i, 0), (i, 1)])
        .filter(|&(i, k)| child(i, k) < 0)
        .take(2)
        .collect();
    for (what, value) in [
        ("child is itself (cycle)", parent as i32),
        ("child is the root (cycle)", 0),
        ("child is its parent's predecessor", parent as i32 - 1),
        ("child past the end", nodes.count as i32),
        ("child far past the end", i32::MAX),
        ("leaf past the end", -1 - leaves.count as i32),
        ("leaf i32::MIN", i32::MIN),
    ] {
        expect_error(what, |b| put_u32(b, child_at(parent, k), value as u32));
    }
    // A leaf referenced twice (and another not at all).
    let (a, b) = (leaf_refs[0], leaf_refs[1]);
    expect_error("a leaf referenced twice", |bytes| {
        put_u32(bytes, child_at(b.0, b.1), child(a.0, a.1) as u32)
    });
    // Both children of a node the same node.
    expect_error("a node referenced twice", |bytes| {
        let c = child(parent, k);
        put_u32(bytes, child_at(parent, 1 - k), c as u32)
    });
    // Node plane out of range.
    let planes = section(bytes, SectionKind::Planes).count as u32;
    for v in [planes, planes + 1, u32::MAX] {
        expect_error("node plane out of range", |b| {
            put_u32(b, field(bytes, SectionKind::Nodes, 0, 0), v)
        });
    }
    // No leaves; nodes without a tree.
    expect_error("no leaves", |b| {
        put_u64(b, 64 + 32 * table_index(bytes, SectionKind::Leaves) + 16, 0)
    });
}

#[test]
fn a_tree_deeper_than_the_limit_is_an_error() {
    use bspq::world::validate::MAX_TREE_DEPTH;
    use bspq::world::WorldData;
    let depth = MAX_TREE_DEPTH + 10;
    let mut data = WorldData {
        planes: vec![Plane::new(Vec3::X, 0.0)],
        leaves: vec![bytemuck::Zeroable::zeroed(); depth + 1],
        ..Default::default()
    };
    for i in 0..depth {
        let next = if i + 1 < depth {
            i as i32 + 1
        } else {
            -2 - i as i32
        };
        data.nodes.push(Node {
            plane: 0,
            children: [next, -1 - i as i32],
            flags: 0,
        });
    }
    let bytes = format::write(&data);
    assert!(matches!(load(&bytes, 0), Outcome::Error(e) if e.contains("deeper")));
    // The same chain within the limit loads and answers.
    let depth = 200;
    data.leaves.truncate(depth + 1);
    data.nodes.truncate(depth);
    data.nodes[depth - 1].children[0] = -1 - depth as i32;
    assert_eq!(load(&format::write(&data), 0), Outcome::Valid);
}

#[test]
fn bad_planes_are_errors() {
    let bytes = original();
    let normal = offset_of!(Plane, normal);
    let at = |i: usize, f: usize| field(bytes, SectionKind::Planes, i, f);
    // Pick a non-axial plane and an axial one.
    let planes = section(bytes, SectionKind::Planes);
    let axis = |i: usize| get_u32(bytes, at(i, offset_of!(Plane, axis)));
    let component = |i: usize, k: usize| f32::from_bits(get_u32(bytes, at(i, normal + 4 * k)));
    let skew = (0..planes.count)
        .find(|&i| (0..3).all(|k| component(i, k).abs() < 0.99))
        .unwrap();
    let axial = (0..planes.count).find(|&i| axis(i) < 3).unwrap();
    for i in [skew, axial] {
        expect_error("NaN normal", |b| put_f32(b, at(i, normal), f32::NAN));
        expect_error("inf normal", |b| {
            put_f32(b, at(i, normal + 4), f32::INFINITY)
        });
        expect_error("NaN dist", |b| {
            put_f32(b, at(i, offset_of!(Plane, dist)), f32::NAN)
        });
        expect_error("inf dist", |b| {
            put_f32(b, at(i, offset_of!(Plane, dist)), f32::NEG_INFINITY)
        });
        expect_error("zero normal", |b| {
            for k in 0..3 {
                put_f32(b, at(i, normal + 4 * k), 0.0);
            }
        });
        expect_error("normal of length 2", |b| {
            for k in 0..3 {
                let v = f32::from_bits(get_u32(bytes, at(i, normal + 4 * k)));
                put_f32(b, at(i, normal + 4 * k), 2.0 * v);
            }
        });
        expect_error("normal of length 0.99", |b| {
            for k in 0..3 {
                let v = f32::from_bits(get_u32(bytes, at(i, normal + 4 * k)));
                put_f32(b, at(i, normal + 4 * k), 0.99 * v);
            }
        });
        expect_error("wrong sign bits", |b| {
            let s = get_u32(bytes, at(i, offset_of!(Plane, sign_bits)));
            put_u32(b, at(i, offset_of!(Plane, sign_bits)), s ^ 1);
        });
        expect_error("sign bits out of range", |b| {
            put_u32(b, at(i, offset_of!(Plane, sign_bits)), 8)
        });
        expect_error("wrong axis", |b| {
            let a = axis(i);
            put_u32(b, at(i, offset_of!(Plane, axis)), (a + 1) % 4);
        });
        expect_error("axis out of range", |b| {
            put_u32(b, at(i, offset_of!(Plane, axis)), 7)
        });
    }
    // A flipped normal with consistent sign bits and axis stays valid.
    let mut flipped = bytes.to_vec();
    for k in 0..3 {
        let v = f32::from_bits(get_u32(bytes, at(skew, normal + 4 * k)));
        put_f32(&mut flipped, at(skew, normal + 4 * k), -v);
    }
    let n: Vec<f32> = (0..3)
        .map(|k| f32::from_bits(get_u32(&flipped, at(skew, normal + 4 * k))))
        .collect();
    let bits = (n[0] < 0.0) as u32 | ((n[1] < 0.0) as u32) << 1 | ((n[2] < 0.0) as u32) << 2;
    put_u32(&mut flipped, at(skew, offset_of!(Plane, sign_bits)), bits);
    format::seal(&mut flipped);
    assert_eq!(load(&flipped, 3), Outcome::Valid);
}

#[test]
fn indices_and_ranges_out_of_bounds_are_errors() {
    use SectionKind as K;
    let bytes = original();
    let count = |k: K| section(bytes, k).count as u32;
    let cases: Vec<(&str, K, usize, Vec<u32>)> = vec![
        (
            "brush side plane",
            K::BrushSides,
            offset_of!(BrushSide, plane),
            vec![count(K::Planes), u32::MAX],
        ),
        (
            "brush first side",
            K::Brushes,
            offset_of!(Brush, first_side),
            vec![count(K::BrushSides), u32::MAX],
        ),
        (
            "brush side count",
            K::Brushes,
            offset_of!(Brush, num_sides),
            vec![count(K::BrushSides) + 1, u32::MAX],
        ),
        (
            "leaf brush",
            K::LeafBrushes,
            0,
            vec![count(K::Brushes), u32::MAX],
        ),
        (
            "leaf patch",
            K::LeafPatches,
            0,
            vec![count(K::Patches), u32::MAX],
        ),
        (
            "leaf first brush",
            K::Leaves,
            offset_of!(Leaf, first_brush),
            vec![count(K::LeafBrushes) + 1, u32::MAX],
        ),
        (
            "leaf brush count",
            K::Leaves,
            offset_of!(Leaf, num_brushes),
            vec![count(K::LeafBrushes) + 1, u32::MAX],
        ),
        (
            "leaf first patch",
            K::Leaves,
            offset_of!(Leaf, first_patch),
            vec![count(K::LeafPatches) + 1, u32::MAX],
        ),
        (
            "leaf patch count",
            K::Leaves,
            offset_of!(Leaf, num_patches),
            vec![count(K::LeafPatches) + 1, u32::MAX],
        ),
        (
            "patch first facet",
            K::Patches,
            offset_of!(Patch, first_facet),
            vec![count(K::Facets), u32::MAX],
        ),
        (
            "patch facet count",
            K::Patches,
            offset_of!(Patch, num_facets),
            vec![count(K::Facets) + 1, u32::MAX],
        ),
        (
            "patch first plane",
            K::Patches,
            offset_of!(Patch, first_plane),
            vec![count(K::PatchPlanes), u32::MAX],
        ),
        (
            "patch plane count",
            K::Patches,
            offset_of!(Patch, num_planes),
            vec![count(K::PatchPlanes) + 1, u32::MAX],
        ),
        (
            "patch bounds",
            K::Patches,
            offset_of!(Patch, mins),
            vec![f32::NAN.to_bits(), f32::INFINITY.to_bits()],
        ),
        (
            "facet surface plane",
            K::Facets,
            offset_of!(Facet, surface_plane),
            vec![count(K::PatchPlanes), u32::MAX],
        ),
        (
            "facet first border",
            K::Facets,
            offset_of!(Facet, first_border),
            vec![count(K::FacetBorders), u32::MAX],
        ),
        (
            "facet border count",
            K::Facets,
            offset_of!(Facet, num_borders),
            vec![count(K::FacetBorders) + 1, u32::MAX],
        ),
        (
            "facet border plane",
            K::FacetBorders,
            offset_of!(FacetBorder, plane),
            vec![count(K::PatchPlanes), u32::MAX],
        ),
        (
            "patch plane NaN",
            K::PatchPlanes,
            offset_of!(PatchPlane, plane) + 4,
            vec![f32::NAN.to_bits(), f32::NEG_INFINITY.to_bits()],
        ),
        (
            "patch plane sign bits",
            K::PatchPlanes,
            offset_of!(PatchPlane, sign_bits),
            vec![8, u32::MAX],
        ),
    ];
    let mut rng = Rng::new(0x696e_6478);
    for (what, kind, offset, values) in cases {
        let n = section(bytes, kind).count;
        assert!(n > 0, "{what}: the test map has no {kind:?}");
        // First, last and a random record.
        for record in [0, n - 1, rng.below(n)] {
            for &v in &values {
                expect_error(&format!("{what} = {v:#x} (record {record})"), |b| {
                    put_u32(b, field(bytes, kind, record, offset), v)
                });
            }
        }
    }
    // The range check must not overflow: first + count wrapping to in range.
    expect_error("leaf range wrapping around u32", |b| {
        put_u32(
            b,
            field(bytes, K::Leaves, 0, offset_of!(Leaf, first_brush)),
            u32::MAX,
        );
        put_u32(
            b,
            field(bytes, K::Leaves, 0, offset_of!(Leaf, num_brushes)),
            2,
        );
    });
}

/// The metadata with the first coordinate of `key` set to `value` (which
/// overflows an f32: the loader must not accept infinite bounds).
fn bounds(text: &str, key: &str, value: f64) -> Vec<u8> {
    // A shorter source name makes room for a longer number.
    let text = text.replacen("\"oa_ctf2\"", "\"o\"", 1);
    let at = text.find(&format!("\"{key}\":[")).unwrap() + key.len() + 4;
    let end = at + text[at..].find(',').unwrap();
    format!("{}{value:e}{}", &text[..at], &text[end..]).into_bytes()
}

/// Replaces the metadata JSON in place (padded with spaces to its length).
fn with_meta(text: &[u8]) -> Vec<u8> {
    let mut bytes = original().to_vec();
    let meta = section(&bytes, SectionKind::Meta);
    assert!(text.len() <= meta.byte_len, "replacement metadata too long");
    let body = &mut bytes[meta.offset..meta.offset + meta.byte_len];
    body.fill(b' ');
    body[..text.len()].copy_from_slice(text);
    format::seal(&mut bytes);
    bytes
}

#[test]
fn bad_metadata_is_an_error() {
    let bytes = original();
    let meta = section(bytes, SectionKind::Meta);
    let text = String::from_utf8(bytes[meta.offset..meta.offset + meta.byte_len].to_vec()).unwrap();
    // Still valid: the same text, and a different source name.
    assert_eq!(load(&with_meta(text.as_bytes()), 0), Outcome::Valid);
    let renamed = text.replacen("oa_ctf2", "renamed", 1);
    assert_eq!(load(&with_meta(renamed.as_bytes()), 0), Outcome::Valid);
    let nested = "[".repeat(meta.byte_len.min(100_000));
    let bad: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("not JSON", b"BSPQ".to_vec()),
        ("truncated", text.as_bytes()[..text.len() / 2].to_vec()),
        ("invalid UTF-8", vec![b'{', 0xFF, 0xFE, b'}']),
        ("wrong type", b"[]".to_vec()),
        ("missing fields", b"{\"info\":{}}".to_vec()),
        ("deep nesting", nested.into_bytes()),
        ("mins overflow f32", bounds(&text, "mins", 1e39)),
        ("maxs overflow f32", bounds(&text, "maxs", -1e300)),
        (
            "trailing garbage",
            format!("{}x", text.replacen("\"oa_ctf2\"", "\"o\"", 1)).into_bytes(),
        ),
    ];
    for (what, json) in bad {
        match load(&with_meta(&json), 0) {
            Outcome::Error(_) => {}
            other => panic!("metadata {what}: {other:?}"),
        }
    }
    // Larger than the metadata limit: an error before any parsing.
    expect_error("metadata over the limit", |b| {
        let entry = 64 + 32 * table_index(bytes, SectionKind::Meta);
        put_u64(b, entry + 16, format::MAX_META_BYTES + 1);
    });
}

/// oa_ctf2 with one onion hull (the standing player), serialised.
fn hull_original() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let source = std::fs::read(common::map_path("oa_ctf2")).unwrap();
        let options = CompileOptions {
            hulls: vec![bspq::world::HullSpec {
                name: "stand".into(),
                mins: [-15.0, -15.0, -24.0],
                maxs: [15.0, 15.0, 32.0],
            }],
            // No shape-bevel sections and no source tree: the hull sections
            // are then the last ones.
            shape_bevels: bspq::compile::bevels::BevelOptions::none(),
            ..Default::default()
        };
        let mut world = compile_source(&source, "oa_ctf2", &options).unwrap();
        bspq::compile::source_tree::clear(&mut world);
        format::write(&world)
    })
}

/// Loads a mutated hull world; when it loads, runs hull traces through it.
fn load_hull_world(bytes: &[u8], seed: u64) -> Result<(), bspq::map::LoadError> {
    let world = Map::from_compiled_bytes(bytes)?;
    let view = world.view();
    let mut rng = Rng::new(seed);
    let mut scratch = Scratch::new();
    let (lo, hi) = (Vec3::from_array(view.mins), Vec3::from_array(view.maxs));
    let point = |rng: &mut Rng| lo + (hi - lo) * Vec3::new(rng.unit(), rng.unit(), rng.unit());
    for _ in 0..64 {
        let (start, end) = (point(&mut rng), point(&mut rng));
        let q = bspq::trace::HullQuery::new(&view, "stand", start, end, 1).unwrap();
        let r = bspq::trace::trace_hull(&view, &q, &mut scratch);
        assert!((0.0..=1.0).contains(&r.fraction));
    }
    Ok(())
}

/// Corrupt onion-hull sections are typed errors (`InvalidHulls`, or a
/// missing section when only some are present), never panics; random byte
/// changes in them give an error or a world whose hull traces run.
#[test]
fn corrupt_hull_sections_are_typed_errors() {
    let bytes = hull_original();
    assert!(load_hull_world(bytes, 0).is_ok());
    let hull_error = |what: &str, mutate: &dyn Fn(&mut Vec<u8>)| {
        let mut b = bytes.to_vec();
        mutate(&mut b);
        format::seal(&mut b);
        match catch_unwind(AssertUnwindSafe(|| load_hull_world(&b, 1))) {
            Ok(Err(LoadError::Format(FormatError::InvalidHulls(msg)))) => msg,
            Ok(Err(LoadError::Format(FormatError::MissingSection(name)))) => name.to_owned(),
            other => panic!("{what}: expected a hull error, got {other:?}"),
        }
    };
    let sec = |kind| {
        format::parse_layout(bytes, true)
            .unwrap()
            .sections
            .into_iter()
            .find(|s: &SectionEntry| s.kind == kind)
            .unwrap()
    };
    let records = sec(SectionKind::HullLeaves);
    let solid = sec(SectionKind::LeafHullSolid);
    let brushes = sec(SectionKind::HullLeafBrushes);
    let index_of = |kind| {
        format::parse_layout(bytes, true)
            .unwrap()
            .sections
            .iter()
            .position(|s| s.kind == kind)
            .unwrap()
    };
    // A record's brush range past the end of the list.
    let msg = hull_error("brush range", &|b| {
        put_u32(b, records.offset + 4, u32::MAX - 1)
    });
    assert!(msg.contains("exceeds"), "{msg}");
    // A listed brush index out of range.
    let msg = hull_error("brush index", &|b| put_u32(b, brushes.offset, 1 << 30));
    assert!(msg.contains("out of range"), "{msg}");
    // Contents that are not those of the listed brushes.
    let msg = hull_error("contents", &|b| {
        let at = (0..records.count)
            .map(|i| records.offset + 20 * i)
            .find(|&at| get_u32(b, at + 8) > 0)
            .unwrap();
        let v = get_u32(b, at) ^ 0x8000_0000;
        put_u32(b, at, v)
    });
    assert!(msg.contains("contents"), "{msg}");
    // Solidity bits that disagree with the brush lists.
    let msg = hull_error("solidity bits", &|b| {
        let v = get_u32(b, solid.offset) ^ 1;
        put_u32(b, solid.offset, v)
    });
    assert!(msg.contains("solidity"), "{msg}");
    // Fewer records than leaves × hulls.
    let msg = hull_error("record count", &|b| {
        put_u64(
            b,
            64 + 32 * index_of(SectionKind::HullLeaves) + 16,
            records.count as u64 - 1,
        )
    });
    assert!(msg.contains("leaves × hulls"), "{msg}");
    // The last hull section dropped from the table (it is written last).
    assert_eq!(
        index_of(SectionKind::HullLeafPatches),
        sections(bytes).len() - 1
    );
    let msg = hull_error("missing section", &|b| {
        put_u32(b, 16, sections(bytes).len() as u32 - 1)
    });
    assert_eq!(msg, "hull_leaf_patches");
    // Random byte changes inside the hull sections: errors or working worlds.
    let mut rng = sweep_rng(7);
    let hull_ranges: Vec<SectionEntry> = format::HULL_SECTIONS.iter().map(|&k| sec(k)).collect();
    for round in 0..sweep_cases(80) as u64 {
        let s = &hull_ranges[rng.below(hull_ranges.len())];
        if s.byte_len == 0 {
            continue;
        }
        let mut b = bytes.to_vec();
        let at = s.offset + rng.below(s.byte_len);
        b[at] ^= 1 << rng.below(8);
        format::seal(&mut b);
        let outcome = catch_unwind(AssertUnwindSafe(|| load_hull_world(&b, round)));
        assert!(outcome.is_ok(), "round {round}: a panic");
    }
}

/// The source's tree (optional sections 34–37) is checked like the compiled
/// tree: a proper tree, its lists and indices in range, all four sections
/// or none, as the header's flag says.
#[test]
fn broken_source_trees_are_errors() {
    use SectionKind as K;
    let bytes = original();
    let nodes = section(bytes, K::SourceNodes);
    let child_at =
        |i: usize, k: usize| field(bytes, K::SourceNodes, i, offset_of!(Node, children) + 4 * k);
    let child = |i: usize, k: usize| get_u32(bytes, child_at(i, k)) as i32;
    let (parent, k) = (1..nodes.count)
        .flat_map(|i| [(i, 0), (i, 1)])
        .find(|&(i, k)| child(i, k) >= 0)
        .unwrap();
    for (what, value) in [
        ("source child is itself", parent as i32),
        ("source child is the root", 0),
        ("source child past the end", nodes.count as i32),
        ("source leaf past the end", i32::MIN),
    ] {
        let msg = expect_error(what, |b| put_u32(b, child_at(parent, k), value as u32));
        assert!(msg.contains("source"), "{what}: {msg}");
    }
    // Both children of a node the same node.
    let msg = expect_error("a source node referenced twice", |b| {
        let c = child(parent, k);
        put_u32(b, child_at(parent, 1 - k), c as u32)
    });
    assert!(
        msg.contains("source node") && msg.contains("referenced"),
        "{msg}"
    );
    let count = |k: K| section(bytes, k).count as u32;
    for (what, kind, at, value) in [
        ("source node plane", K::SourceNodes, 0, count(K::Planes)),
        (
            "source leaf brush",
            K::SourceLeafBrushes,
            0,
            count(K::Brushes),
        ),
        (
            "source leaf patch",
            K::SourceLeafPatches,
            0,
            count(K::Patches),
        ),
        (
            "source leaf brush range",
            K::SourceLeaves,
            offset_of!(Leaf, num_brushes),
            count(K::SourceLeafBrushes) + 1,
        ),
        (
            "source leaf patch range",
            K::SourceLeaves,
            offset_of!(Leaf, first_patch),
            u32::MAX,
        ),
    ] {
        let msg = expect_error(what, |b| put_u32(b, field(bytes, kind, 0, at), value));
        assert!(msg.contains("source"), "{what}: {msg}");
    }
    // The flag without the sections, and the sections without the flag.
    expect_error("source-tree flag cleared", |b| {
        let flags = get_u32(b, 20);
        put_u32(b, 20, flags & !format::FLAG_SOURCE_TREE)
    });
    let n = sections(bytes).len();
    let source_last = sections(bytes)
        .iter()
        .rposition(|s| s.kind == K::SourceLeafPatches)
        == Some(n - 1);
    assert!(source_last, "the source sections are written last");
    let msg = expect_error("a source section left out", |b| {
        put_u32(b, 16, n as u32 - 1)
    });
    assert!(msg.contains("source_leaf_patches"), "{msg}");
}

/// A world file written without the source's tree (as builds before it
/// wrote them) loads, and answers the order-dependent cases from its own
/// tree.
#[test]
fn a_file_without_the_source_tree_loads() {
    let source = std::fs::read(common::map_path("oa_ctf2")).unwrap();
    let mut data = compile_source(&source, "oa_ctf2", &CompileOptions::default()).unwrap();
    assert!(data.view().source.is_present());
    bspq::compile::source_tree::clear(&mut data);
    let bytes = format::write(&data);
    let layout = format::parse_layout(&bytes, true).unwrap();
    assert_eq!(layout.flags & format::FLAG_SOURCE_TREE, 0);
    let loaded = Map::from_compiled_bytes(&bytes).unwrap();
    let world = loaded.view();
    assert!(!world.source.is_present());
    common::exercise(&world, &mut Rng::new(7), 6);
}
