//! Helpers shared by the fuzz targets: exercising a loaded world with queries
//! derived from the input bytes, and a tiny synthetic IBSP for seeds.

use bspq::math::Vec3;
use bspq::query::MAX_COORDINATE;
use bspq::trace::{point_contents, trace, Scratch, TraceQuery};
use bspq::trace::Kernel as World;

/// Reads query material cyclically from the input's last bytes, so that the
/// fuzzer can steer the queries (trailing bytes of an IBSP file are ignored
/// by the parser) while the queries stay deterministic per input.
struct Material<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Material<'_> {
    fn byte(&mut self) -> u8 {
        if self.bytes.is_empty() {
            return 0;
        }
        let b = self.bytes[self.at % self.bytes.len()];
        self.at = self.at.wrapping_add(1);
        b
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }
    /// A coordinate: mostly inside the (grown) world bounds, sometimes a raw
    /// float from the input (kept to what the query layer accepts).
    fn coord(&mut self, lo: f32, hi: f32) -> f32 {
        if self.byte().is_multiple_of(8) {
            let v = f32::from_bits(self.u32());
            if v.is_finite() && v.abs() <= MAX_COORDINATE {
                return v;
            }
        }
        lo + (hi - lo) * (self.u16() as f32 / u16::MAX as f32)
    }
    fn point(&mut self, lo: Vec3, hi: Vec3) -> Vec3 {
        Vec3::new(
            self.coord(lo.x, hi.x),
            self.coord(lo.y, hi.y),
            self.coord(lo.z, hi.z),
        )
    }
}

/// Runs a handful of traces (rays, boxes, position tests) and point-contents
/// queries through `world`, all derived from `input`. Must never panic.
pub fn exercise(world: &World, input: &[u8]) {
    let tail = &input[input.len().saturating_sub(256)..];
    let mut m = Material { bytes: tail, at: 0 };
    let lo = Vec3::from_array(world.mins);
    let hi = Vec3::from_array(world.maxs);
    let limit = Vec3::splat(MAX_COORDINATE);
    let (lo, hi) = if lo.is_finite() && hi.is_finite() && lo.cmple(hi).all() {
        (
            (lo - Vec3::splat(64.0)).max(-limit),
            (hi + Vec3::splat(64.0)).min(limit),
        )
    } else {
        (Vec3::splat(-4096.0), Vec3::splat(4096.0))
    };
    let masks = [1u32, 0x0201_0001, 0x0600_0001, 0x38, u32::MAX];
    let mut scratch = Scratch::new();
    for _ in 0..8 {
        let kind = m.byte();
        let start = m.point(lo, hi);
        let end = if kind % 4 == 3 {
            start
        } else {
            m.point(lo, hi)
        };
        let (mins, maxs) = match (kind >> 2) % 4 {
            0 => (Vec3::ZERO, Vec3::ZERO),
            1 => (Vec3::new(-15.0, -15.0, -24.0), Vec3::new(15.0, 15.0, 32.0)),
            2 => {
                let a = Vec3::new(
                    (m.byte() % 64) as f32,
                    (m.byte() % 64) as f32,
                    (m.byte() % 64) as f32,
                );
                let b = Vec3::new(
                    (m.byte() % 64) as f32,
                    (m.byte() % 64) as f32,
                    (m.byte() % 64) as f32,
                );
                (-a, b)
            }
            _ => (Vec3::splat(-0.125), Vec3::splat(0.125)),
        };
        let mask = masks[(kind >> 4) as usize % masks.len()];
        // The points are drawn within the limits and the boxes are ordered,
        // so every query is one the constructor accepts.
        let q = match TraceQuery::boxed(start, end, mins, maxs, mask) {
            Ok(q) => q,
            Err(e) => panic!("the fuzzer built an invalid query: {e}"),
        };
        let r = trace(world, &q, &mut scratch);
        assert!(
            (0.0..=1.0).contains(&r.fraction),
            "fraction {} out of range for {q:?}",
            r.fraction
        );
        let _ = point_contents(world, start);
        let _ = point_contents(world, end);
    }
}

fn put_i32s(out: &mut Vec<u8>, values: &[i32]) {
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

fn put_f32s(out: &mut Vec<u8>, values: &[f32]) {
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// A tiny but complete IBSP v46 file: two solid box brushes (a floor and a
/// pillar, one with a water brush beside it), a 3×3 patch, a two-leaf tree.
/// A seed that compiles in microseconds, so the fuzzer mutates it quickly.
pub fn synthetic_bsp() -> Vec<u8> {
    let mut lumps: Vec<Vec<u8>> = vec![Vec::new(); 17];
    // Entities.
    lumps[0] = b"{\n\"classname\" \"worldspawn\"\n}\n\0".to_vec();
    // Shaders: solid, water, a curve shader.
    for (name, surf, contents) in [
        ("textures/base/floor", 0i32, 1i32),
        ("textures/liquids/water", 0, 0x20),
        ("textures/curve/arch", 0x20, 1),
    ] {
        let mut rec = vec![0u8; 64];
        rec[..name.len()].copy_from_slice(name.as_bytes());
        lumps[1].extend_from_slice(&rec);
        put_i32s(&mut lumps[1], &[surf, contents]);
    }
    // Box brushes as axial planes: for each box, +x -x +y -y +z -z.
    let boxes: [([f32; 3], [f32; 3], i32); 3] = [
        ([-256.0, -256.0, -16.0], [256.0, 256.0, 0.0], 0),
        ([-32.0, -32.0, 0.0], [32.0, 32.0, 128.0], 0),
        ([64.0, -64.0, 0.0], [192.0, 64.0, 48.0], 1),
    ];
    let mut plane_count = 0;
    for (b, (mins, maxs, shader)) in boxes.iter().enumerate() {
        let first_side = plane_count;
        for axis in 0..3 {
            let mut n = [0.0f32; 3];
            n[axis] = 1.0;
            put_f32s(&mut lumps[2], &[n[0], n[1], n[2], maxs[axis]]);
            n[axis] = -1.0;
            put_f32s(&mut lumps[2], &[n[0], n[1], n[2], -mins[axis]]);
        }
        for k in 0..6 {
            put_i32s(&mut lumps[9], &[first_side + k, *shader]);
        }
        put_i32s(&mut lumps[8], &[first_side, 6, *shader]);
        put_i32s(&mut lumps[6], &[b as i32]);
        plane_count += 6;
    }
    // Nodes: one splitter (z = 0 plane, index 0 is +x of box 0... use +z of
    // box 0, plane 4) with two leaves.
    put_i32s(&mut lumps[3], &[4, -1, -2, -256, -256, -16, 256, 256, 128]);
    // Leaves: front (above the floor) holds brushes 1, 2 and the patch;
    // back holds the floor.
    put_i32s(
        &mut lumps[4],
        &[0, 0, -256, -256, 0, 256, 256, 128, 0, 1, 1, 2],
    );
    put_i32s(
        &mut lumps[4],
        &[0, 0, -256, -256, -16, 256, 256, 0, 1, 0, 0, 1],
    );
    // Leaf brushes were pushed as 0, 1, 2: leaf 0 uses [1, 2], leaf 1 uses [0].
    put_i32s(&mut lumps[5], &[0]);
    // Draw verts: a 3×3 arch over x in [-128, -64], y in [-32, 32].
    for row in 0..3 {
        for col in 0..3 {
            let x = -128.0 + 32.0 * col as f32;
            let y = -32.0 + 32.0 * row as f32;
            let z = if col == 1 { 96.0 } else { 0.0 };
            put_f32s(
                &mut lumps[10],
                &[x, y, z, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
            );
            lumps[10].extend_from_slice(&[255, 255, 255, 255]);
        }
    }
    // Surfaces: one patch.
    let mut surface = vec![0u8; 104];
    for (at, v) in [
        (0, 2i32),
        (4, -1),
        (8, 2),
        (12, 0),
        (16, 9),
        (96, 3),
        (100, 3),
    ] {
        surface[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }
    lumps[13] = surface;
    // Model 0: everything.
    put_f32s(&mut lumps[7], &[-256.0, -256.0, -16.0, 256.0, 256.0, 128.0]);
    put_i32s(&mut lumps[7], &[0, 1, 0, 3]);

    let header = 8 + 17 * 8;
    let mut out = vec![0u8; header];
    out[..4].copy_from_slice(b"IBSP");
    out[4..8].copy_from_slice(&46i32.to_le_bytes());
    for (i, lump) in lumps.iter().enumerate() {
        let offset = out.len() as i32;
        out[8 + i * 8..12 + i * 8].copy_from_slice(&offset.to_le_bytes());
        out[12 + i * 8..16 + i * 8].copy_from_slice(&(lump.len() as i32).to_le_bytes());
        out.extend_from_slice(lump);
        while out.len() % 4 != 0 {
            out.push(0);
        }
    }
    out
}

/// A zip archive of `members` (name, bytes), deflated or stored.
pub fn zip_of(members: &[(&str, &[u8])], deflate: bool) -> Vec<u8> {
    use std::io::Write;
    use zip::write::SimpleFileOptions;
    let method = if deflate {
        zip::CompressionMethod::Deflated
    } else {
        zip::CompressionMethod::Stored
    };
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, bytes) in members {
        zip.start_file(
            *name,
            SimpleFileOptions::default().compression_method(method),
        )
        .expect("zip member");
        zip.write_all(bytes).expect("zip write");
    }
    zip.finish().expect("zip finish").into_inner()
}
