//! `bspq bench --mesh-obj FILE`: the parry3d baseline's mesh (the solid
//! brushes' faces and the solid patch facets' polygons, welded, as
//! triangles) written as a Wavefront OBJ file, so that an engine outside
//! the process (a triangle ray tracer measured side by side) runs on the
//! very triangles parry3d does.

use super::parry::Baseline;
use anyhow::Context;
use std::io::{BufWriter, Write};
use std::path::Path;

/// Writes `v x y z` lines, then `f a b c` lines (1-based, outward winding).
pub fn write(baseline: &Baseline, path: &Path) -> anyhow::Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut out = BufWriter::new(file);
    let mesh = &baseline.mesh;
    writeln!(
        out,
        "# bspq bench --mesh-obj: {} solid brushes, {} patch facets, {} triangles",
        baseline.brushes, baseline.facets, baseline.triangles
    )?;
    for p in mesh.vertices() {
        // `{:?}` prints the shortest decimal that reads back to the same f32.
        writeln!(out, "v {:?} {:?} {:?}", p.x, p.y, p.z)?;
    }
    for [a, b, c] in mesh.indices() {
        writeln!(out, "f {} {} {}", a + 1, b + 1, c + 1)?;
    }
    out.flush()
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}
