//! Hostile and damaged inputs: mutated map files must give an error or a
//! valid world, never a panic or a hang, and worlds read from a
//! `.pk3` archive answer exactly as the plain `.bsp` does.

use crate::common;

use bspq::compile::CompileOptions;
use bspq::map::{open_world, world_from_bytes, WorldSpec};
use bspq::query::{answer, Query};
use bspq::trace::Kernel as World;
use bspq::trace::Scratch;
use common::Rng;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

/// The lumps of an IBSP file that collision reads (shaders, planes, nodes,
/// leaves, leaf surfaces, leaf brushes, models, brushes, brush sides, draw
/// vertices, surfaces), as `(offset, length)` from the header.
fn collision_lumps(bytes: &[u8]) -> Vec<(usize, usize)> {
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13]
        .iter()
        .map(|&lump| (word(8 + lump * 8), word(12 + lump * 8)))
        .filter(|&(_, len)| len > 0)
        .collect()
}

/// One way of damaging a file.
#[derive(Debug, Clone)]
enum Mutation {
    Truncate(usize),
    /// XOR one byte.
    Flip {
        at: usize,
        mask: u8,
    },
    /// Overwrite an aligned 32-bit word (counts, indices, floats).
    Word {
        at: usize,
        value: u32,
    },
}

impl Mutation {
    fn apply(&self, original: &[u8]) -> Vec<u8> {
        match *self {
            Mutation::Truncate(len) => original[..len].to_vec(),
            Mutation::Flip { at, mask } => {
                let mut b = original.to_vec();
                b[at] ^= mask;
                b
            }
            Mutation::Word { at, value } => {
                let mut b = original.to_vec();
                b[at..at + 4].copy_from_slice(&value.to_le_bytes());
                b
            }
        }
    }
}

/// Values that break counts, indices and floats.
const NASTY_WORDS: [u32; 12] = [
    0,
    1,
    0x7FFF_FFFF,
    0x8000_0000,
    0xFFFF_FFFF,
    0xFFFF_FFFE,
    0x0010_0000,
    0x7F80_0000, // +inf
    0xFF80_0000, // -inf
    0x7FC0_0000, // NaN
    0x4F00_0000, // 2^31 as f32
    0x0000_0081,
];

fn mutations(original: &[u8], count: usize, seed: u64) -> Vec<Mutation> {
    let mut rng = Rng::new(seed);
    let lumps = collision_lumps(original);
    let header = 8 + 17 * 8;
    let mut out = Vec::with_capacity(count);
    // Truncations at every structural boundary first, then random ones.
    for len in [0, 1, 4, 7, 8, header - 1, header] {
        out.push(Mutation::Truncate(len));
    }
    for &(offset, len) in &lumps {
        for cut in [offset, offset + 1, offset + len - 1] {
            if cut < original.len() {
                out.push(Mutation::Truncate(cut));
            }
        }
    }
    while out.len() < count {
        let in_lump = |rng: &mut Rng| {
            let (offset, len) = lumps[rng.below(lumps.len())];
            (offset + rng.below(len)).min(original.len() - 4)
        };
        let m = match rng.below(10) {
            0 | 1 => Mutation::Truncate(rng.below(original.len())),
            2 => Mutation::Flip {
                at: rng.below(header),
                mask: 1 << rng.below(8),
            },
            3 => Mutation::Word {
                at: 8 + 4 * rng.below(34),
                value: NASTY_WORDS[rng.below(NASTY_WORDS.len())],
            },
            4..=6 => Mutation::Flip {
                at: in_lump(&mut rng),
                mask: 1 << rng.below(8),
            },
            _ => Mutation::Word {
                at: in_lump(&mut rng) & !3,
                value: if rng.below(2) == 0 {
                    NASTY_WORDS[rng.below(NASTY_WORDS.len())]
                } else {
                    rng.next() as u32
                },
            },
        };
        out.push(m);
    }
    out.truncate(count);
    out
}

/// Every index of a world is in range (what the kernel relies on without checks).
fn check_world(w: &World) -> Result<(), String> {
    let within = |what: &str, first: u32, num: u32, len: usize| {
        if first as usize + num as usize <= len {
            Ok(())
        } else {
            Err(format!("{what} range {first}+{num} beyond {len}"))
        }
    };
    for n in w.nodes {
        if n.plane as usize >= w.planes.len() {
            return Err(format!("node plane {} out of range", n.plane));
        }
        for c in n.children {
            let ok = if c >= 0 {
                (c as usize) < w.nodes.len()
            } else {
                ((-1 - c) as usize) < w.leaves.len()
            };
            if !ok {
                return Err(format!("node child {c} out of range"));
            }
        }
    }
    if w.leaves.is_empty() {
        return Err("no leaves".into());
    }
    for l in w.leaves {
        within(
            "leaf brushes",
            l.first_brush,
            l.num_brushes,
            w.leaf_brushes.len(),
        )?;
        within(
            "leaf patches",
            l.first_patch,
            l.num_patches,
            w.leaf_patches.len(),
        )?;
    }
    if let Some(b) = w
        .leaf_brushes
        .iter()
        .find(|&&b| b as usize >= w.brushes.len())
    {
        return Err(format!("leaf brush {b} out of range"));
    }
    if let Some(p) = w
        .leaf_patches
        .iter()
        .find(|&&p| p as usize >= w.patches.len())
    {
        return Err(format!("leaf patch {p} out of range"));
    }
    for b in w.brushes {
        within(
            "brush sides",
            b.first_side,
            b.num_sides,
            w.brush_sides.len(),
        )?;
    }
    if let Some(s) = w
        .brush_sides
        .iter()
        .find(|s| s.plane as usize >= w.planes.len())
    {
        return Err(format!("brush side plane {} out of range", s.plane));
    }
    for p in w.patches {
        within("patch facets", p.first_facet, p.num_facets, w.facets.len())?;
        within(
            "patch planes",
            p.first_plane,
            p.num_planes,
            w.patch_planes.len(),
        )?;
    }
    for f in w.facets {
        within(
            "facet borders",
            f.first_border,
            f.num_borders,
            w.facet_borders.len(),
        )?;
        if f.surface_plane as usize >= w.patch_planes.len() {
            return Err(format!("facet plane {} out of range", f.surface_plane));
        }
    }
    if let Some(b) = w
        .facet_borders
        .iter()
        .find(|b| b.plane as usize >= w.patch_planes.len())
    {
        return Err(format!("facet border plane {} out of range", b.plane));
    }
    if w.planes
        .iter()
        .any(|p| !p.dist.is_finite() || p.normal.iter().any(|c| !c.is_finite()))
    {
        return Err("a non-finite plane".into());
    }
    Ok(())
}

#[test]
fn mutated_maps_give_errors_or_valid_worlds() {
    // The smallest committed map; compiling it takes tens of milliseconds, so
    // the count is bounded. Mutations that keep the file parseable compile
    // fully, with curves on (patch control points are in the mutated lumps).
    // `BSPQ_MUTATIONS=N` / `BSPQ_MUTATION_SEED=S` search harder.
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let count = env("BSPQ_MUTATIONS").map_or(2000, |n| n as usize);
    let seed = env("BSPQ_MUTATION_SEED").unwrap_or(0x6273_7071_0001);
    const SLOW: Duration = Duration::from_secs(10);
    let original = std::fs::read(common::map_path("oa_ctf2")).unwrap();
    let list = mutations(&original, count, seed);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(4));
    let started = Instant::now();
    let results: Vec<(usize, usize, Vec<String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let list = &list;
                let original = &original;
                s.spawn(move || {
                    let (mut ok, mut err, mut problems) = (0usize, 0usize, Vec::new());
                    for (i, m) in list.iter().enumerate().skip(t).step_by(threads) {
                        let bytes = m.apply(original);
                        let t0 = Instant::now();
                        let outcome = catch_unwind(AssertUnwindSafe(|| {
                            let options = CompileOptions {
                                curves: i % 4 != 0,
                                ..Default::default()
                            };
                            match world_from_bytes(&bytes, "mutant", &options) {
                                Ok(loaded) => {
                                    let world = loaded.view();
                                    check_world(&world)?;
                                    common::exercise(&world, &mut Rng::new(i as u64), 12);
                                    Ok(true)
                                }
                                Err(e) => {
                                    if e.to_string().trim().is_empty() {
                                        return Err("an error without a message".to_owned());
                                    }
                                    Ok(false)
                                }
                            }
                        }));
                        let took = t0.elapsed();
                        match outcome {
                            Ok(Ok(true)) => ok += 1,
                            Ok(Ok(false)) => err += 1,
                            Ok(Err(why)) => problems.push(format!("#{i} {m:?}: {why}")),
                            Err(panic) => {
                                let msg = panic
                                    .downcast_ref::<String>()
                                    .cloned()
                                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                                    .unwrap_or_default();
                                problems.push(format!("#{i} {m:?}: PANIC {msg}"));
                            }
                        }
                        if took > SLOW {
                            problems.push(format!("#{i} {m:?}: took {took:?}"));
                        }
                    }
                    (ok, err, problems)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ok: usize = results.iter().map(|r| r.0).sum();
    let err: usize = results.iter().map(|r| r.1).sum();
    let problems: Vec<&String> = results.iter().flat_map(|r| &r.2).collect();
    println!(
        "{count} mutations (seed {seed:#x}): {ok} valid worlds, {err} errors, {} problems, {:?} on {threads} threads",
        problems.len(),
        started.elapsed()
    );
    assert!(
        problems.is_empty(),
        "{} of {count} mutated files misbehaved (seed {seed:#x}):\n{}",
        problems.len(),
        problems
            .iter()
            .take(20)
            .map(|p| p.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    // Both outcomes must actually be exercised.
    assert!(
        ok > count / 10 && err > count / 10,
        "{ok} valid, {err} errors"
    );
}

#[test]
fn pk3_member_answers_like_the_plain_bsp() {
    let bsp = std::fs::read(common::map_path("q3dm6ish")).unwrap();
    let readme: &[u8] = b"not a map";
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("pak9.pk3");
    std::fs::write(
        &archive,
        common::pk3_of(&[("readme.txt", readme), ("maps/q3dm6ish.bsp", &bsp)]),
    )
    .unwrap();
    let archive_str = archive.to_str().unwrap();

    let spec = WorldSpec::parse(&format!("{archive_str}:maps/q3dm6ish.bsp"));
    assert_eq!(spec.path, archive);
    assert_eq!(spec.member.as_deref(), Some("maps/q3dm6ish.bsp"));
    assert_eq!(spec.name(), "q3dm6ish");
    for curves in [true, false] {
        let options = CompileOptions {
            curves,
            ..Default::default()
        };
        let from_pk3 = open_world(&spec, &options).expect("pk3 member opens");
        let plain = common::load_world("q3dm6ish", curves);
        let (from_pk3, plain) = (from_pk3.view(), plain.view());
        let (mut s1, mut s2) = (Scratch::new(), Scratch::new());
        let mut n = 0;
        for set in common::SETS {
            for line in common::load_set("q3dm6ish", set, curves).queries {
                let q: Query = common::parse_query(&line);
                let a = answer(&from_pk3, &mut s1, &q);
                let b = answer(&plain, &mut s2, &q);
                assert_eq!(a, b, "{set}: {line}");
                n += 1;
            }
        }
        assert!(n > 9000, "only {n} queries compared");
    }

    // Quake's file system is case-insensitive; so is member lookup.
    let upper = WorldSpec::parse(&format!("{archive_str}:MAPS/Q3DM6ISH.BSP"));
    open_world(
        &upper,
        &CompileOptions {
            curves: false,
            ..Default::default()
        },
    )
    .expect("case-insensitive member");

    // An archive with a single map opens without naming the member.
    let single = dir.path().join("single.pk3");
    std::fs::write(&single, common::pk3_of(&[("maps/q3dm6ish.bsp", &bsp)])).unwrap();
    open_world(
        &WorldSpec::parse(single.to_str().unwrap()),
        &CompileOptions {
            curves: false,
            ..Default::default()
        },
    )
    .expect("the only map of an archive");
}

#[test]
fn pk3_missing_member_is_an_error_naming_it() {
    let bsp = std::fs::read(common::map_path("q3dm6ish")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("pak9.pk3");
    std::fs::write(
        &archive,
        common::pk3_of(&[("maps/q3dm6ish.bsp", &bsp), ("maps/other.bsp", b"IBSP")]),
    )
    .unwrap();
    let archive_str = archive.to_str().unwrap();
    let options = CompileOptions {
        curves: true,
        ..Default::default()
    };

    let spec = WorldSpec::parse(&format!("{archive_str}:maps/nosuchmap.bsp"));
    let err = open_world(&spec, &options)
        .map(|_| ())
        .expect_err("a missing member must not open");
    assert!(
        err.to_string().contains("maps/nosuchmap.bsp"),
        "the error does not name the member: {err}"
    );

    // Two maps and no member named: an error that says to name one.
    let err = open_world(&WorldSpec::parse(archive_str), &options)
        .map(|_| ())
        .expect_err("an archive with two maps needs a member");
    assert!(
        err.to_string().contains("maps/"),
        "the error does not suggest a member: {err}"
    );

    // A damaged archive is an error, not a panic.
    let mut bytes = std::fs::read(&archive).unwrap();
    let len = bytes.len();
    bytes.truncate(len / 2);
    let damaged = dir.path().join("damaged.pk3");
    std::fs::write(&damaged, &bytes).unwrap();
    let spec = WorldSpec::parse(&format!("{}:maps/q3dm6ish.bsp", damaged.display()));
    assert!(open_world(&spec, &options).is_err());
}
