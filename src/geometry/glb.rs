//! Meshes as binary glTF 2.0 (`.glb`).
//!
//! One glTF mesh and node per model (named `world` for model 0, `*k` for
//! inline model `k`), under one root node that turns Quake's Z-up axes
//! into glTF's Y-up (a rotation of −90° about X): the vertices themselves
//! stay in map units and coordinates. A mesh has one primitive per
//! (contents, surface flags) pair, with `extras: {"contents": c,
//! "surface_flags": s}`, so every triangle's contents and flags are its
//! primitive's. All primitives of a model share its `POSITION` accessor
//! and a per-vertex `_SOURCE` attribute (float): the [`super::Source`] of
//! the brush or patch the vertex belongs to (vertices are never shared
//! between two of them). Models without triangles are left out.

use super::ModelMesh;
use serde_json::{json, Value};
use std::collections::BTreeMap;

const FLOAT: u32 = 5126;
const UNSIGNED_INT: u32 = 5125;
const ARRAY_BUFFER: u32 = 34962;
const ELEMENT_ARRAY_BUFFER: u32 = 34963;
const TRIANGLES: u32 = 4;

/// The glTF name of a model's mesh and node.
pub fn model_name(model: usize) -> String {
    match model {
        0 => "world".to_owned(),
        k => format!("*{k}"),
    }
}

/// The `.glb` bytes of `meshes`; `extras` goes in the asset's `extras`.
pub fn write(meshes: &[ModelMesh], extras: Value) -> Vec<u8> {
    let mut bin: Vec<u8> = Vec::new();
    let mut views: Vec<Value> = Vec::new();
    let mut accessors: Vec<Value> = Vec::new();
    let mut gltf_meshes: Vec<Value> = Vec::new();
    let mut nodes: Vec<Value> = vec![json!({
        "name": "quake z-up",
        "rotation": [-std::f32::consts::FRAC_1_SQRT_2, 0.0, 0.0, std::f32::consts::FRAC_1_SQRT_2],
        "children": [],
    })];
    let mut view = |bin: &mut Vec<u8>, bytes: &[u8], target: u32| -> usize {
        let offset = bin.len();
        bin.extend_from_slice(bytes);
        while !bin.len().is_multiple_of(4) {
            bin.push(0);
        }
        views.push(
            json!({"buffer": 0, "byteOffset": offset, "byteLength": bytes.len(), "target": target}),
        );
        views.len() - 1
    };
    for ModelMesh { model, mesh } in meshes.iter().filter(|m| m.mesh.triangle_count() > 0) {
        let count = mesh.vertex_count();
        let (mut lo, mut hi) = ([f32::INFINITY; 3], [f32::NEG_INFINITY; 3]);
        for p in mesh.vertices.chunks_exact(3) {
            for k in 0..3 {
                lo[k] = lo[k].min(p[k]);
                hi[k] = hi[k].max(p[k]);
            }
        }
        let positions = view(&mut bin, &le_bytes(&mesh.vertices), ARRAY_BUFFER);
        accessors.push(json!({
            "bufferView": positions, "componentType": FLOAT, "count": count,
            "type": "VEC3", "min": lo, "max": hi,
        }));
        let position = accessors.len() - 1;
        let source = vertex_sources(mesh);
        let sources = view(&mut bin, &le_bytes(&source), ARRAY_BUFFER);
        accessors.push(
            json!({"bufferView": sources, "componentType": FLOAT, "count": count, "type": "SCALAR"}),
        );
        let source = accessors.len() - 1;
        let mut groups: BTreeMap<(u32, u32), Vec<u32>> = BTreeMap::new();
        for t in 0..mesh.triangle_count() {
            groups
                .entry((mesh.contents[t], mesh.surface_flags[t]))
                .or_default()
                .extend_from_slice(&mesh.triangles[3 * t..3 * t + 3]);
        }
        let mut primitives = Vec::with_capacity(groups.len());
        for ((contents, surface_flags), indices) in groups {
            let at = view(
                &mut bin,
                &indices
                    .iter()
                    .flat_map(|i| i.to_le_bytes())
                    .collect::<Vec<u8>>(),
                ELEMENT_ARRAY_BUFFER,
            );
            let (lo, hi) = indices
                .iter()
                .fold((u32::MAX, 0), |(lo, hi), &i| (lo.min(i), hi.max(i)));
            accessors.push(json!({
                "bufferView": at, "componentType": UNSIGNED_INT, "count": indices.len(),
                "type": "SCALAR", "min": [lo], "max": [hi],
            }));
            primitives.push(json!({
                "attributes": {"POSITION": position, "_SOURCE": source},
                "indices": accessors.len() - 1,
                "mode": TRIANGLES,
                "extras": {"contents": contents, "surface_flags": surface_flags},
            }));
        }
        gltf_meshes.push(json!({"name": model_name(*model), "primitives": primitives, "extras": {"model": model}}));
        nodes.push(json!({"name": model_name(*model), "mesh": gltf_meshes.len() - 1}));
        let child = nodes.len() - 1;
        if let Some(children) = nodes[0]["children"].as_array_mut() {
            children.push(child.into());
        }
    }
    if nodes.len() == 1 {
        // glTF wants a non-empty list of children, or none.
        if let Some(root) = nodes[0].as_object_mut() {
            root.remove("children");
        }
    }
    let mut document = json!({
        "asset": {"version": "2.0", "generator": concat!("bspq ", env!("CARGO_PKG_VERSION")), "extras": extras},
        "scene": 0,
        "scenes": [{"nodes": [0]}],
        "nodes": nodes,
    });
    if !gltf_meshes.is_empty() {
        document["meshes"] = gltf_meshes.into();
        document["accessors"] = accessors.into();
        document["bufferViews"] = views.into();
        document["buffers"] = json!([{"byteLength": bin.len()}]);
    }
    container(document.to_string().into_bytes(), bin)
}

/// Each vertex's source (all of a vertex's triangles have the same one).
fn vertex_sources(mesh: &super::Mesh) -> Vec<f32> {
    let mut source = vec![0.0f32; mesh.vertex_count()];
    for (t, corners) in mesh.triangles.chunks_exact(3).enumerate() {
        for &v in corners {
            source[v as usize] = mesh.source[t] as f32;
        }
    }
    source
}

/// glTF's byte order (little-endian) whatever the machine's.
fn le_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// The GLB container: header, JSON chunk (padded with spaces), binary
/// chunk (padded with zeros; left out when empty).
fn container(mut json: Vec<u8>, mut bin: Vec<u8>) -> Vec<u8> {
    while !json.len().is_multiple_of(4) {
        json.push(b' ');
    }
    while !bin.len().is_multiple_of(4) {
        bin.push(0);
    }
    let bin_chunk = if bin.is_empty() { 0 } else { 8 + bin.len() };
    let total = 12 + 8 + json.len() + bin_chunk;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(b"glTF");
    out.extend_from_slice(&2u32.to_le_bytes());
    out.extend_from_slice(&(total as u32).to_le_bytes());
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(b"JSON");
    out.extend_from_slice(&json);
    if !bin.is_empty() {
        out.extend_from_slice(&(bin.len() as u32).to_le_bytes());
        out.extend_from_slice(b"BIN\0");
        out.extend_from_slice(&bin);
    }
    out
}
