//! Quake 3 IBSP v46 bytes: parse, compile (curves on and, for some inputs,
//! off), validate like a loaded world, then run queries derived from the input.
#![no_main]

use bspq::compile::CompileOptions;
use bspq::source::Q3Bsp;
use bspq::map::{compile_source, Map};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The parser alone (cheap, every input).
    if Q3Bsp::parse(data).is_err() {
        return;
    }
    let options = CompileOptions {
        // The last byte picks curves off for a quarter of the inputs.
        curves: data.last().is_none_or(|b| b % 4 != 0),
        ..Default::default()
    };
    let Ok(compiled) = compile_source(data, "fuzz", &options) else {
        return;
    };
    // What the compiler builds must pass the loader's validation, and
    // must survive a round trip through the file format.
    let bytes = bspq::world::format::write(&compiled);
    let loaded = Map::from_data(compiled)
        .unwrap_or_else(|e| panic!("compiled world fails validation: {e}"));
    bspq_fuzz::exercise(&loaded.view(), data);
    let reloaded = Map::from_compiled_bytes(&bytes)
        .unwrap_or_else(|e| panic!("written world does not load: {e}"));
    bspq_fuzz::exercise(&reloaded.view(), data);
});
