//! Writes seed corpora for the fuzz targets into `fuzz/corpus/{q3bsp,pk3,world_file}`
//! from the committed maps (`tests/data/maps`) and a tiny synthetic map.
//! Run from `fuzz/`: `cargo run --release --bin make_seeds` (stable is fine).

use bspq::compile::CompileOptions;
use bspq::map::compile_source;
use bspq::world::format;
use bspq_fuzz::{synthetic_bsp, zip_of};
use std::path::Path;

fn main() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let maps = here.join("../tests/data/maps");
    let corpus = here.join("corpus");
    let mut sources: Vec<(String, Vec<u8>)> = vec![("synthetic".into(), synthetic_bsp())];
    for name in ["oa_ctf2", "q3dm6ish", "aggressor"] {
        let path = maps.join(format!("{name}.bsp"));
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        sources.push((name.into(), bytes));
    }
    let write = |target: &str, name: &str, bytes: &[u8]| {
        let dir = corpus.join(target);
        std::fs::create_dir_all(&dir).expect("corpus dir");
        std::fs::write(dir.join(name), bytes).expect("seed");
        println!("{target}/{name}: {} bytes", bytes.len());
    };
    for (name, bsp) in &sources {
        write("q3bsp", &format!("{name}.bsp"), bsp);
        for curves in [true, false] {
            let options = CompileOptions {
                curves,
                ..Default::default()
            };
            let world = compile_source(bsp, name, &options)
                .unwrap_or_else(|e| panic!("{name} does not compile: {e}"));
            let suffix = if curves { "" } else { "-nocurves" };
            write(
                "world_file",
                &format!("{name}{suffix}.bspq"),
                &format::write(&world),
            );
        }
    }
    // pk3: the synthetic map deflated and stored, with a second non-map
    // member; one real map deflated; two maps (needs a member name).
    let synthetic = &sources[0].1;
    let readme: &[u8] = b"readme";
    write(
        "pk3",
        "synthetic-deflated.pk3",
        &zip_of(
            &[("maps/synthetic.bsp", synthetic), ("readme.txt", readme)],
            true,
        ),
    );
    write(
        "pk3",
        "synthetic-stored.pk3",
        &zip_of(&[("maps/synthetic.bsp", synthetic)], false),
    );
    let compiled = format::write(
        &compile_source(synthetic, "synthetic", &CompileOptions::default()).expect("synthetic"),
    );
    write(
        "pk3",
        "synthetic-compiled.pk3",
        &zip_of(&[("maps/synthetic.bsp", &compiled)], true),
    );
    write(
        "pk3",
        "two-maps.pk3",
        &zip_of(
            &[("maps/a.bsp", synthetic), ("maps/B.BSP", synthetic)],
            true,
        ),
    );
    write(
        "pk3",
        "oa_ctf2.pk3",
        &zip_of(&[("maps/oa_ctf2.bsp", &sources[1].1)], true),
    );
}
