//! The geometry export as a service call: a world's triangles (all models
//! or one, contents filtered by a mask) as JSON, binary glTF or OBJ, with
//! the size bounded.

use super::{Service, ServiceError};
use crate::geometry::{self, glb, obj, ModelMesh, Source};
use serde::Serialize;

/// Most triangles one answer may hold (the largest development maps have
/// about 25 000; the JSON form takes about 40 bytes a triangle).
pub const MAX_GEOMETRY_TRIANGLES: usize = 2_000_000;

/// What the caller asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GeometryRequest {
    pub mask: Option<u32>,
    pub model: Option<usize>,
    pub format: GeometryFormat,
}

/// The answer's encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GeometryFormat {
    #[default]
    Json,
    Glb,
    Obj,
}

impl GeometryFormat {
    /// From a `format=` value or a file extension.
    pub fn parse(name: &str) -> Option<GeometryFormat> {
        match name.to_ascii_lowercase().as_str() {
            "json" => Some(GeometryFormat::Json),
            "glb" => Some(GeometryFormat::Glb),
            "obj" => Some(GeometryFormat::Obj),
            _ => None,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            GeometryFormat::Json => "application/json",
            GeometryFormat::Glb => "model/gltf-binary",
            GeometryFormat::Obj => "model/obj",
        }
    }
}

/// The encoded answer.
#[derive(Debug, Clone)]
pub struct GeometryAnswer {
    pub world: String,
    pub version: u64,
    pub format: GeometryFormat,
    pub bytes: Vec<u8>,
    pub triangles: usize,
}

/// The JSON form of one model.
#[derive(Serialize)]
struct ModelJson<'a> {
    model: usize,
    vertices: &'a [f32],
    triangles: &'a [u32],
    contents: &'a [u32],
    surface_flags: &'a [u32],
    source: &'a [Source],
}

#[derive(Serialize)]
struct GeometryJson<'a> {
    world: &'a str,
    version: u64,
    source_hash: &'a str,
    mask: u32,
    models: Vec<ModelJson<'a>>,
}

impl Service {
    /// World `name`'s triangles, encoded as `request.format` asks.
    pub fn geometry(
        &self,
        name: &str,
        request: &GeometryRequest,
    ) -> Result<GeometryAnswer, ServiceError> {
        let version = self.world(name)?;
        let mask = request.mask.unwrap_or(geometry::ALL_CONTENTS);
        let meshes = geometry::map_meshes(&version.world, mask, request.model)
            .map_err(|e| ServiceError::Malformed(e.to_string()))?;
        let triangles: usize = meshes.iter().map(|m| m.mesh.triangle_count()).sum();
        if triangles > MAX_GEOMETRY_TRIANGLES {
            return Err(ServiceError::GeometryTooLarge {
                triangles,
                limit: MAX_GEOMETRY_TRIANGLES,
            });
        }
        let bytes = encode(
            (&version.name, version.version, &version.source_hash),
            mask,
            &meshes,
            request.format,
        )
        .map_err(|e| ServiceError::Internal(format!("encoding the geometry: {e}")))?;
        Ok(GeometryAnswer {
            world: version.name.clone(),
            version: version.version,
            format: request.format,
            bytes,
            triangles,
        })
    }
}

/// `meshes` in `format`, naming the world, its version, the content it
/// was built from (its source hash) and the mask.
pub fn encode(
    (world, version, source_hash): (&str, u64, &str),
    mask: u32,
    meshes: &[ModelMesh],
    format: GeometryFormat,
) -> Result<Vec<u8>, serde_json::Error> {
    Ok(match format {
        GeometryFormat::Json => serde_json::to_vec(&GeometryJson {
            world,
            version,
            source_hash,
            mask,
            models: meshes
                .iter()
                .map(|m| ModelJson {
                    model: m.model,
                    vertices: &m.mesh.vertices,
                    triangles: &m.mesh.triangles,
                    contents: &m.mesh.contents,
                    surface_flags: &m.mesh.surface_flags,
                    source: &m.mesh.source,
                })
                .collect(),
        })?,
        GeometryFormat::Glb => glb::write(
            meshes,
            serde_json::json!({"world": world, "version": version,
                               "source_hash": source_hash, "mask": mask}),
        ),
        GeometryFormat::Obj => obj::write(
            meshes,
            &[
                format!("bspq geometry: world {world} version {version} source_hash {source_hash} mask {mask:#x}"),
                "map coordinates (Z up); one group per contents and surface flags".to_owned(),
            ],
        )
        .into_bytes(),
    })
}
