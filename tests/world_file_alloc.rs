//! Loading a hostile compiled world allocates in proportion to the file, not
//! to the counts it claims (no unbounded memory). This binary has one
//! test and an allocator with a hard cap: going over the cap during a load
//! fails the allocation, which aborts the test binary (a loud failure).
//!
//! It stays a test crate of its own, outside `tests/it`: a global allocator
//! is the whole binary's, so in the shared crate the cap would also catch
//! (and abort on) allocations of every test running beside these.

mod common;

use bspq::compile::CompileOptions;
use bspq::map::{compile_source, Map};
use bspq::world::format;
use cap::Cap;
use std::alloc::System;

#[global_allocator]
static ALLOCATOR: Cap<System> = Cap::new(System, usize::MAX);

/// The cap is global: the tests of this binary take turns.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Loads `bytes` with the allocator capped at what is held now plus 4× the
/// file size + 1 MiB; returns whether it loaded and the bytes still held.
fn load_capped(what: &str, bytes: &[u8]) -> bool {
    let before = ALLOCATOR.allocated();
    let budget = 4 * bytes.len() + (1 << 20);
    ALLOCATOR.set_limit(before + budget).unwrap();
    let result = Map::from_compiled_bytes(bytes);
    let held = ALLOCATOR.allocated().saturating_sub(before);
    ALLOCATOR.set_limit(usize::MAX).unwrap();
    println!(
        "{what}: {} bytes, {} ({held} bytes held after loading, budget {budget})",
        bytes.len(),
        match &result {
            Ok(_) => "loaded".to_owned(),
            Err(e) => format!("error: {e}"),
        }
    );
    result.is_ok()
}

fn put_u64(bytes: &mut [u8], at: usize, v: u64) {
    bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn loading_hostile_files_stays_within_a_memory_budget() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let source = std::fs::read(common::map_path("oa_ctf2")).unwrap();
    let world = compile_source(&source, "oa_ctf2", &CompileOptions::default()).unwrap();
    let original = format::write(&world);
    drop(world);
    let sections = format::parse_layout(&original, true).unwrap().sections;
    assert!(load_capped("the original", &original));

    // Huge counts in every section of a short file.
    let mut huge = original[..4096].to_vec();
    for index in 0..sections.len() {
        put_u64(&mut huge, 64 + 32 * index + 16, 1 << 40);
    }
    let len = huge.len() as u64;
    put_u64(&mut huge, 24, len);
    format::seal(&mut huge);
    assert!(!load_capped("huge counts", &huge));

    // Each section claiming the whole rest of the file (the largest count
    // that stays in bounds).
    for (index, s) in sections.iter().enumerate() {
        let mut bytes = original.clone();
        let records = (original.len() - s.offset) / s.kind.record_size();
        put_u64(&mut bytes, 64 + 32 * index + 16, records as u64);
        format::seal(&mut bytes);
        // An error, or (facets: the extra records happen to validate) a world.
        load_capped(&format!("{} spans the file", s.kind.name()), &bytes);
    }

    // Metadata of deeply nested arrays, and of many small hulls.
    for (what, meta) in [
        ("nested metadata", "[".repeat(1 << 19)),
        (
            "many hulls",
            format!(
                "{{\"info\":{{\"hulls\":[{}]}}}}",
                vec!["{\"name\":\"\",\"mins\":[0,0,0],\"maxs\":[0,0,0]}"; 20_000].join(",")
            ),
        ),
    ] {
        let mut data = bspq::world::WorldData {
            leaves: vec![bytemuck::Zeroable::zeroed()],
            ..Default::default()
        };
        data.info.source_name = "x".repeat(meta.len());
        let mut bytes = format::write(&data);
        let m = format::parse_layout(&bytes, true).unwrap().sections[0].clone();
        assert_eq!(m.kind, format::SectionKind::Meta);
        let body = &mut bytes[m.offset..m.offset + m.byte_len];
        body.fill(b' ');
        body[..meta.len()].copy_from_slice(meta.as_bytes());
        format::seal(&mut bytes);
        load_capped(what, &bytes);
    }
}

/// A pk3 whose member claims (in both zip headers) to inflate to 400 MiB:
/// extracting it must not reserve memory for the claim.
#[test]
fn a_pk3_member_lying_about_its_size_is_not_preallocated() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    use std::io::Write;
    use zip::write::SimpleFileOptions;
    let body = vec![7u8; 4096];
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    zip.start_file(
        "maps/liar.bsp",
        SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored),
    )
    .unwrap();
    zip.write_all(&body).unwrap();
    let mut archive = zip.finish().unwrap().into_inner();
    let claim = (400u32 << 20).to_le_bytes();
    let find = |archive: &[u8], sig: &[u8]| archive.windows(4).position(|w| w == sig).unwrap();
    let local = find(&archive, b"PK\x03\x04");
    archive[local + 22..local + 26].copy_from_slice(&claim);
    let central = find(&archive, b"PK\x01\x02");
    archive[central + 24..central + 28].copy_from_slice(&claim);

    let before = ALLOCATOR.allocated();
    ALLOCATOR
        .set_limit(before + 4 * archive.len() + (1 << 20))
        .unwrap();
    let result = bspq::source::pk3::read_member(&archive, "maps/liar.bsp");
    ALLOCATOR.set_limit(usize::MAX).unwrap();
    println!("lying pk3 member: {:?}", result.as_ref().map(Vec::len));
    // The stored body is 4096 bytes: either those bytes or an error, never
    // the claimed size.
    if let Ok(bytes) = result {
        assert!(bytes.len() <= 4096);
    }
}
