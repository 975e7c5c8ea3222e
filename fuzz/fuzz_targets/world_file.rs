//! Compiled world files. Each input is loaded twice: as is (the checksum
//! rejects nearly every mutation), and after fixing the header's file length
//! and re-sealing the checksum, so that mutations reach the structural parser
//! and the validator. Whatever loads is queried.
#![no_main]

use bspq::world::format;
use bspq::map::Map;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(loaded) = Map::from_compiled_bytes(data) {
        bspq_fuzz::exercise(&loaded.view(), data);
    }
    if data.len() < format::HEADER_LEN {
        return;
    }
    let mut fixed = data.to_vec();
    fixed[24..32].copy_from_slice(&(data.len() as u64).to_le_bytes());
    format::seal(&mut fixed);
    if let Ok(loaded) = Map::from_compiled_bytes(&fixed) {
        // A world that validated must also serialise back to a loadable file.
        let again = loaded.to_file_bytes();
        assert_eq!(again, fixed);
        bspq_fuzz::exercise(&loaded.view(), data);
    }
});
