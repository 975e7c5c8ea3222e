//! Inline models in the compiled world file: they round-trip (copied and
//! mapped, sharing the parent's bytes), answer bit for bit as the models of
//! the map compiled in memory, and a damaged models section or nested file
//! is a typed error naming the model, never a panic.

use crate::common;

use bspq::compile::CompileOptions;
use bspq::map::{compile_source, open_compiled_file_with, LoadError, Map};
use bspq::math::Vec3;
use bspq::query::{QueryLine, SceneStream};
use bspq::trace::{BatchOptions, TraceQuery};
use bspq::world::format::{self, FormatError, SectionEntry, SectionKind};
use bspq::world::{World, WorldData};
use common::{result_bits, Rng, MAPS};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

fn compiled(map: &str) -> WorldData {
    let source = std::fs::read(common::map_path(map)).expect("committed map");
    compile_source(&source, map, &CompileOptions::default()).expect("compiles")
}

/// Every array of two worlds, and their bounds and metadata, equal.
#[track_caller]
fn assert_same_world(a: &World, b: &World, what: &str) {
    assert_eq!(a.info, b.info, "{what}: info");
    assert_eq!(a.planes, b.planes, "{what}: planes");
    assert_eq!(a.brushes, b.brushes, "{what}: brushes");
    assert_eq!(a.brush_sides, b.brush_sides, "{what}: brush sides");
    assert_eq!(a.nodes, b.nodes, "{what}: nodes");
    assert_eq!(a.leaves, b.leaves, "{what}: leaves");
    assert_eq!(a.leaf_brushes, b.leaf_brushes, "{what}: leaf brushes");
    assert_eq!(a.leaf_patches, b.leaf_patches, "{what}: leaf patches");
    assert_eq!(a.patches, b.patches, "{what}: patches");
    assert_eq!(a.patch_planes, b.patch_planes, "{what}: patch planes");
    assert_eq!(a.facets, b.facets, "{what}: facets");
    assert_eq!(a.facet_borders, b.facet_borders, "{what}: facet borders");
    assert_eq!(a.leaf_hull_solid, b.leaf_hull_solid, "{what}: hull solid");
    assert_eq!(a.hull_leaves, b.hull_leaves, "{what}: hull leaves");
    assert_eq!(a.hull_leaf_brushes, b.hull_leaf_brushes, "{what}: hulls");
    assert_eq!(a.hull_leaf_patches, b.hull_leaf_patches, "{what}: hulls");
    assert_eq!(a.mins.map(f32::to_bits), b.mins.map(f32::to_bits), "{what}");
    assert_eq!(a.maxs.map(f32::to_bits), b.maxs.map(f32::to_bits), "{what}");
    assert_eq!(a.shape_bevel_ranges, b.shape_bevel_ranges, "{what}: bevels");
    assert_eq!(a.shape_bevels, b.shape_bevels, "{what}: bevels");
    assert_eq!(a.source.nodes, b.source.nodes, "{what}: source nodes");
    assert_eq!(a.source.leaves, b.source.leaves, "{what}: source leaves");
    assert_eq!(a.source.leaf_brushes, b.source.leaf_brushes, "{what}");
    assert_eq!(a.source.leaf_patches, b.source.leaf_patches, "{what}");
}

/// `n` rays, boxes and points from around a model's bounds (grown by 64
/// units, so that moves start and end inside, outside and on it).
fn model_queries(model: &Map, n: usize, seed: u64) -> Vec<TraceQuery> {
    let (mins, maxs) = model.bounds();
    let (lo, hi) = (mins - Vec3::splat(64.0), maxs + Vec3::splat(64.0));
    let mut rng = Rng::new(seed);
    let point = |rng: &mut Rng| lo + (hi - lo) * Vec3::new(rng.unit(), rng.unit(), rng.unit());
    let boxes = [
        (Vec3::ZERO, Vec3::ZERO),
        (Vec3::new(-15.0, -15.0, -24.0), Vec3::new(15.0, 15.0, 32.0)),
        (Vec3::new(-15.0, -15.0, -24.0), Vec3::new(15.0, 15.0, 16.0)),
        (Vec3::splat(-3.0), Vec3::new(5.0, 2.0, 1.0)),
    ];
    (0..n)
        .map(|k| {
            let start = point(&mut rng);
            let end = match k % 5 {
                0 => start,
                1 => start - Vec3::Z * (hi.z - lo.z),
                _ => point(&mut rng),
            };
            let (bmins, bmaxs) = boxes[k % boxes.len()];
            TraceQuery::boxed(start, end, bmins, bmaxs, u32::MAX).expect("a valid query")
        })
        .collect()
}

/// Traces, any-hit and point contents through `b`'s models give `a`'s
/// answers bit for bit; returns how many queries were compared.
fn assert_models_answer_alike(a: &Map, b: &Map, what: &str) -> usize {
    assert_eq!(a.models().len(), b.models().len(), "{what}: model count");
    let mut compared = 0;
    for (index, (ma, mb)) in a.models().iter().zip(b.models()).enumerate() {
        let queries = model_queries(ma, 300, index as u64);
        let (ra, rb) = (ma.trace_batch(&queries), mb.trace_batch(&queries));
        let mut hits = 0;
        for (q, (x, y)) in queries.iter().zip(ra.iter().zip(&rb)) {
            assert_eq!(
                result_bits(x),
                result_bits(y),
                "{what} *{}: {q:?}",
                index + 1
            );
            assert_eq!(result_bits(x), result_bits(&mb.trace(q)), "{what}: {q:?}");
            assert_eq!(ma.any_hit(q), mb.any_hit(q), "{what}: {q:?}");
            assert_eq!(
                ma.point_contents(q.start()),
                mb.point_contents(q.start()),
                "{what}: {q:?}"
            );
            hits += (x.fraction < 1.0) as usize;
            compared += 1;
        }
        assert!(hits > 10, "{what} *{}: only {hits} hits", index + 1);
    }
    compared
}

#[test]
fn models_round_trip_copied_and_mapped() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut total_models = 0;
    for map in MAPS {
        let data = compiled(map);
        let bytes = format::write(&data);
        let built = Map::from_data(data.clone()).expect("builds");
        assert!(!built.models().is_empty(), "{map} has inline models");
        // One writer: a built map re-serialises as the data was written.
        assert!(built.to_file_bytes() == bytes, "{map}: built bytes differ");
        assert_eq!(built.data_bytes(), bytes.len(), "{map}");

        let copied = Map::from_compiled_bytes(&bytes).expect("loads");
        let path = dir.path().join(format!("{map}.bspq"));
        std::fs::write(&path, &bytes).expect("write");
        let mapped = open_compiled_file_with(&path, 0)
            .expect("loads")
            .expect("a world file");
        assert!(mapped.is_mapped() && !copied.is_mapped(), "{map}");
        let layout = format::parse_layout(&bytes, true).expect("layout");
        let ranges = format::model_ranges(&bytes, &layout).expect("table");
        assert_eq!(ranges.len(), data.models.len(), "{map}");
        for loaded in [&copied, &mapped] {
            assert!(loaded.to_file_bytes() == bytes, "{map}: bytes differ");
            assert_eq!(loaded.data_bytes(), bytes.len(), "{map}");
            assert_eq!(loaded.models().len(), data.models.len(), "{map}");
            for (k, (model, model_data)) in loaded.models().iter().zip(&data.models).enumerate() {
                let what = format!("{map} *{}", k + 1);
                assert_same_world(&model.world(), &model_data.view(), &what);
                assert!(model.models().is_empty(), "{what}: models of a model");
                assert!(model.entities().is_empty(), "{what}: entities");
                // The model's nested file, shared rather than copied.
                assert_eq!(model.is_mapped(), loaded.is_mapped(), "{what}");
                assert!(model.file_layout().is_some(), "{what}");
                assert!(
                    model.to_file_bytes() == bytes[ranges[k].clone()],
                    "{what}: nested bytes"
                );
                assert!(model.to_file_bytes() == format::write(model_data), "{what}");
                assert_eq!(model.data_bytes(), ranges[k].len(), "{what}");
            }
            assert_same_world(&loaded.world(), &built.world(), map);
        }
        let n = assert_models_answer_alike(&built, &copied, &format!("{map} copied"));
        assert_eq!(
            n,
            assert_models_answer_alike(&built, &mapped, &format!("{map} mapped")),
        );
        total_models += data.models.len();
    }
    assert!(total_models >= 20, "only {total_models} models");
}

/// Scenes (entities placed through the models) answer through a compiled
/// file, copied or mapped, exactly as through the map compiled in memory.
#[test]
fn scenes_answer_alike_through_a_compiled_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    for map in MAPS {
        let bytes = format::write(&compiled(map));
        let path = dir.path().join(format!("{map}.bspq"));
        std::fs::write(&path, &bytes).expect("write");
        let worlds = [
            common::load_world(map, true),
            Map::from_compiled_bytes(&bytes).expect("loads"),
            open_compiled_file_with(&path, 0)
                .expect("loads")
                .expect("a world file"),
        ];
        let lines = common::load_set(map, "scene", true).queries;
        assert!(lines.len() > 100, "{map}: {} scene lines", lines.len());
        let answers: Vec<Vec<String>> = worlds
            .iter()
            .map(|world| {
                let mut stream = SceneStream::new(world);
                let parsed = lines.iter().map(|l| QueryLine::parse(l)).collect();
                stream
                    .answer(parsed, &BatchOptions::with_threads(2))
                    .into_iter()
                    .map(|a| a.map(|a| a.to_json()).map_err(|e| e.to_string()))
                    .collect::<Result<_, _>>()
                    .expect("answers")
            })
            .collect();
        assert!(answers[1] == answers[0], "{map}: copied file differs");
        assert!(answers[2] == answers[0], "{map}: mapped file differs");
    }
}

// Damaged models sections.

/// oa_ctf2 compiled and serialised once (13 inline models).
fn original() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| format::write(&compiled("oa_ctf2")))
}

fn models_section(bytes: &[u8]) -> SectionEntry {
    format::parse_layout(bytes, true)
        .expect("layout")
        .sections
        .into_iter()
        .find(|s| s.kind == SectionKind::Models)
        .expect("a models section")
}

fn get_u64(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

fn put_u64(bytes: &mut [u8], at: usize, v: u64) {
    bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Absolute positions of model `*k`'s table entry: (offset field, length field).
fn entry(k: usize) -> (usize, usize) {
    let at = models_section(original()).offset + 8 + 16 * (k - 1);
    (at, at + 8)
}

/// Absolute range of model `*k`'s nested file.
fn nested(k: usize) -> std::ops::Range<usize> {
    let layout = format::parse_layout(original(), true).expect("layout");
    format::model_ranges(original(), &layout).expect("table")[k - 1].clone()
}

/// Loads a mutated, re-sealed copy of the original under `catch_unwind`:
/// the format error it must give.
#[track_caller]
fn format_error(what: &str, mutate: impl FnOnce(&mut Vec<u8>)) -> FormatError {
    let mut bytes = original().to_vec();
    mutate(&mut bytes);
    format::seal(&mut bytes);
    match catch_unwind(AssertUnwindSafe(|| Map::from_compiled_bytes(&bytes))) {
        Ok(Err(LoadError::Format(e))) => {
            assert!(!e.to_string().is_empty());
            e
        }
        Ok(Err(other)) => panic!("{what}: not a format error: {other}"),
        Ok(Ok(_)) => panic!("{what}: loaded"),
        Err(_) => panic!("{what}: panicked"),
    }
}

/// The table-entry error for model `*model`, its reason.
#[track_caller]
fn entry_error(what: &str, model: usize, mutate: impl FnOnce(&mut Vec<u8>)) -> String {
    match format_error(what, mutate) {
        FormatError::ModelEntry { model: m, reason } if m == model => reason,
        other => panic!("{what}: expected a table error for *{model}, got {other:?}"),
    }
}

/// The nested-file error of model `*model`.
#[track_caller]
fn nested_error(what: &str, model: usize, mutate: impl FnOnce(&mut Vec<u8>)) -> FormatError {
    match format_error(what, mutate) {
        FormatError::Model { model: m, error } if m == model => *error,
        other => panic!("{what}: expected a nested error for *{model}, got {other:?}"),
    }
}

#[test]
fn the_models_table_is_laid_out_as_documented() {
    let bytes = original();
    let s = models_section(bytes);
    assert_eq!(s.offset % 16, 0);
    assert_eq!(get_u64(bytes, s.offset), 13);
    let mut end = s.offset + 8 + 16 * 13;
    for k in 1..=13 {
        let (o, l) = entry(k);
        let range = nested(k);
        assert_eq!(range.start, end.div_ceil(16) * 16, "*{k} starts aligned");
        assert_eq!(get_u64(bytes, o) as usize, range.start - s.offset);
        assert_eq!(get_u64(bytes, l) as usize, range.len());
        assert!(format::looks_like_world_file(&bytes[range.clone()]));
        end = range.end;
    }
    assert_eq!(end, s.offset + s.byte_len, "the section ends with *13");
    // A world without models has an 8-byte section: a count of zero.
    let mut data = compiled("aggressor");
    data.models.clear();
    let bare = format::write(&data);
    let s = models_section(&bare);
    assert_eq!((s.byte_len, get_u64(&bare, s.offset)), (8, 0));
    assert!(Map::from_compiled_bytes(&bare)
        .expect("loads")
        .models()
        .is_empty());
}

#[test]
fn damaged_model_table_entries_are_typed_errors() {
    let s = models_section(original());
    let (o5, l5) = entry(5);
    let off5 = get_u64(original(), o5);
    let len5 = get_u64(original(), l5);
    // Offsets out of range.
    let past = (s.byte_len as u64).next_multiple_of(16);
    for v in [past, past + 16, 1 << 40, !15] {
        let reason = entry_error("offset out of range", 5, |b| put_u64(b, o5, v));
        assert!(reason.contains("runs past"), "offset {v}: {reason}");
    }
    // Misaligned.
    for v in [off5 + 1, off5 + 8, off5 - 4, u64::MAX] {
        let reason = entry_error("misaligned", 5, |b| put_u64(b, o5, v));
        assert!(reason.contains("aligned"), "offset {v}: {reason}");
    }
    // Overlapping the model before, or the table.
    let (o4, _) = entry(4);
    let reason = entry_error("overlapping", 5, |b| {
        put_u64(b, o5, get_u64(original(), o4))
    });
    assert!(reason.contains("overlaps model *4"), "{reason}");
    let (o1, _) = entry(1);
    let reason = entry_error("over the table", 1, |b| put_u64(b, o1, 16));
    assert!(reason.contains("overlaps the table"), "{reason}");
    // A gap (the models are packed).
    let reason = entry_error("a gap", 5, |b| put_u64(b, o5, off5 + 16));
    assert!(reason.contains("gap"), "{reason}");
    // Lengths: shorter than a header, shorter or longer than the file.
    for v in [0, 63] {
        let reason = entry_error("length below a header", 5, |b| put_u64(b, l5, v));
        assert!(reason.contains("shorter than"), "length {v}: {reason}");
    }
    for v in [len5 - 16, len5 - 1, len5 + 16] {
        let reason = entry_error("length", 5, |b| put_u64(b, l5, v));
        assert!(reason.contains("header says"), "length {v}: {reason}");
    }
    // The nested header agreeing with a shorter length: the next model
    // no longer follows it.
    let reason = entry_error("shortened model", 6, |b| {
        put_u64(b, l5, len5 - 16);
        put_u64(b, nested(5).start + 24, len5 - 16);
    });
    assert!(reason.contains("gap after model *5"), "{reason}");
    // ... and for the last model, bytes left at the section's end.
    let (_, l13) = entry(13);
    let len13 = get_u64(original(), l13);
    let e = format_error("shortened last model", |b| {
        put_u64(b, l13, len13 - 16);
        put_u64(b, nested(13).start + 24, len13 - 16);
    });
    assert!(
        matches!(&e, FormatError::Models(m) if m.contains("follow the last model")),
        "{e:?}"
    );
    // Non-zero padding between the table (216 bytes) and *1.
    let gap = nested(1).start - 1;
    assert!(s.offset + 8 + 16 * 13 <= gap);
    let reason = entry_error("padding", 1, |b| b[gap] = 1);
    assert!(reason.contains("padding"), "{reason}");
}

#[test]
fn a_bad_model_count_is_a_typed_error() {
    let s = models_section(original());
    let room = (s.byte_len as u64 - 8) / 16;
    for v in [room + 1, 1 << 40, u64::MAX] {
        let e = format_error("count too large", |b| put_u64(b, s.offset, v));
        assert!(
            matches!(&e, FormatError::Models(m) if m.contains("at most")),
            "count {v}: {e:?}"
        );
    }
    // One fewer: the table ends sooner, so *1 leaves a gap after it.
    let reason = entry_error("count 12", 1, |b| put_u64(b, s.offset, 12));
    assert!(reason.contains("gap after the table"), "{reason}");
    // None: all the section's bytes are left over.
    let e = format_error("count 0", |b| put_u64(b, s.offset, 0));
    assert!(matches!(e, FormatError::Models(_)), "{e:?}");
    // A section too short for its count.
    let index = format::parse_layout(original(), true)
        .expect("layout")
        .sections
        .iter()
        .position(|x| x.kind == SectionKind::Models)
        .expect("models");
    let e = format_error("section of 4 bytes", |b| {
        put_u64(b, 64 + 32 * index + 16, 4)
    });
    assert!(
        matches!(&e, FormatError::Models(m) if m.contains("too short")),
        "{e:?}"
    );
    // Left out of the table, as a file from before the section was: refused.
    let n = format::parse_layout(original(), true)
        .expect("layout")
        .sections
        .len();
    let e = format_error("no models section", |b| {
        let (at, end) = (64 + 32 * index, 64 + 32 * n);
        b.copy_within(at + 32..end, at);
        b[end - 32..end].fill(0);
        b[16..20].copy_from_slice(&(n as u32 - 1).to_le_bytes());
    });
    assert_eq!(e, FormatError::MissingSection("models"));
}

#[test]
fn damaged_nested_files_are_errors_naming_the_model() {
    let range = nested(7);
    // A byte of the model changed, the parent re-sealed: the model's own
    // checksum catches it.
    let e = nested_error("flipped byte", 7, |b| b[range.start + 200] ^= 4);
    assert!(matches!(e, FormatError::Checksum { .. }), "{e:?}");
    // Bad magic and version in the nested header.
    let e = nested_error("magic", 7, |b| b[range.start] = b'X');
    assert_eq!(e, FormatError::BadMagic);
    let e = nested_error("version", 7, |b| b[range.start + 8] = 1);
    assert_eq!(e, FormatError::UnsupportedVersion(1));
    // A nested plane made NaN, the model re-sealed too: invalid.
    let plane = {
        let inner = &original()[range.clone()];
        let layout = format::parse_layout(inner, true).expect("nested layout");
        layout
            .sections
            .iter()
            .find(|s| s.kind == SectionKind::Planes)
            .expect("planes")
            .offset
    };
    let e = nested_error("NaN plane", 7, |b| {
        let at = range.start + plane;
        b[at..at + 4].copy_from_slice(&f32::NAN.to_bits().to_le_bytes());
        format::seal(&mut b[range.clone()]);
    });
    assert!(matches!(e, FormatError::Invalid(_)), "{e:?}");
}

#[test]
fn a_model_with_models_of_its_own_is_refused() {
    let mut data = compiled("q3dm6ish");
    let inner = data.models[0].clone();
    data.models[2].models.push(inner);
    let bytes = format::write(&data);
    let e = match Map::from_compiled_bytes(&bytes) {
        Err(LoadError::Format(e)) => e,
        other => panic!("expected a format error, got {other:?}"),
    };
    assert_eq!(e, FormatError::NestedModels { model: 3, count: 1 });
    assert!(e.to_string().contains("*3"), "{e}");
}

/// Random words of the models section overwritten (the parent re-sealed):
/// an error or a world, never a panic.
#[test]
fn random_overwrites_of_the_models_section_never_panic() {
    let s = models_section(original());
    let mut rng = Rng::new(0x6d6f_6465);
    let table = 8 + 16 * 13;
    let (mut errors, mut valid) = (0, 0);
    for round in 0..200 {
        let mut bytes = original().to_vec();
        // Half in the table, half anywhere in the section.
        let span = if round % 2 == 0 { table } else { s.byte_len };
        let at = s.offset + 8 * rng.below(span / 8);
        let value = match rng.below(4) {
            0 => rng.next(),
            1 => rng.next() & 0xFFFF,
            2 => get_u64(&bytes, at) ^ (1 << rng.below(64)),
            _ => u64::MAX,
        };
        put_u64(&mut bytes, at, value);
        format::seal(&mut bytes);
        match catch_unwind(AssertUnwindSafe(|| Map::from_compiled_bytes(&bytes))) {
            Ok(Ok(_)) => valid += 1,
            Ok(Err(_)) => errors += 1,
            Err(_) => panic!("round {round}: word at {at} = {value:#x} panicked"),
        }
    }
    assert!(errors > 150, "{errors} errors, {valid} valid");
}
