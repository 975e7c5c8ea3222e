//! Meshes as Wavefront OBJ text.
//!
//! In map coordinates (Quake's: Z up). One object per model (`o world`,
//! `o *k`), and within it one group per (contents, surface flags) pair,
//! named `contents_0xC_flags_0xS` and preceded by a comment saying the
//! same; faces are counter-clockwise seen from outside the solid.

use super::glb::model_name;
use super::ModelMesh;
use std::collections::BTreeMap;
use std::fmt::Write;

/// The OBJ text of `meshes`, after the comment lines `header`.
pub fn write(meshes: &[ModelMesh], header: &[String]) -> String {
    let mut out = String::new();
    for line in header {
        let _ = writeln!(out, "# {line}");
    }
    // OBJ numbers vertices from 1 across the whole file.
    let mut base = 1usize;
    for ModelMesh { model, mesh } in meshes {
        let _ = writeln!(out, "o {}", model_name(*model));
        for p in mesh.vertices.chunks_exact(3) {
            let _ = writeln!(out, "v {} {} {}", p[0], p[1], p[2]);
        }
        let mut groups: BTreeMap<(u32, u32), Vec<usize>> = BTreeMap::new();
        for t in 0..mesh.triangle_count() {
            groups
                .entry((mesh.contents[t], mesh.surface_flags[t]))
                .or_default()
                .push(t);
        }
        for ((contents, flags), triangles) in groups {
            let _ = writeln!(out, "# contents {contents:#x} surface_flags {flags:#x}");
            let _ = writeln!(out, "g contents_{contents:#x}_flags_{flags:#x}");
            for t in triangles {
                let [a, b, c] = [0, 1, 2].map(|k| mesh.triangles[3 * t + k] as usize + base);
                let _ = writeln!(out, "f {a} {b} {c}");
            }
        }
        base += mesh.vertex_count();
    }
    out
}
