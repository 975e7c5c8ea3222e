//! pk3 (zip) archives: list the .bsp members, extract them with a small size
//! limit and with the default one, and load whatever they hold through the
//! content-sniffing entry point, then run queries on what loads.
#![no_main]

use bspq::compile::CompileOptions;
use bspq::source::pk3;
use bspq::map::world_from_bytes;
use libfuzzer_sys::fuzz_target;

/// A member limit far below the default, so that limit paths are reached.
const SMALL_LIMIT: u64 = 64 * 1024;

fuzz_target!(|data: &[u8]| {
    if let Ok(members) = pk3::bsp_members(data) {
        for name in members.iter().take(4) {
            let small = pk3::read_member_limited(data, name, SMALL_LIMIT);
            if let Ok(bytes) = &small {
                assert!(bytes.len() as u64 <= SMALL_LIMIT);
            }
            // Case-insensitive lookup and a leading slash are accepted too.
            let _ = pk3::read_member_limited(data, &format!("/{}", name.to_uppercase()), 4096);
        }
    }
    let _ = pk3::read_member(data, "maps/none.bsp");
    // The whole pipeline: zip → member → (IBSP | compiled world) → world.
    if let Ok(loaded) = world_from_bytes(data, "fuzz", &CompileOptions::default()) {
        bspq_fuzz::exercise(&loaded.view(), data);
    }
});
