//! The geometry export: every brush's triangles close up into an outward
//! surface, rays cast at the triangles stop where bspq's rays stop, the
//! `.glb` reads back with a glTF reader, and the HTTP route and the
//! command give the same triangles as the library.

use crate::common;
use bspq::geometry::{map_meshes, world_mesh, Mesh, ALL_CONTENTS};
use bspq::margins::SURFACE_CLIP_EPSILON;
use bspq::service::Limits;
use bspq::TraceQuery;
use common::server::TestServer;
use glam::DVec3;
use std::collections::{BTreeMap, HashMap};

const MAPS: [&str; 3] = ["q3dm6ish", "oa_ctf2", "aggressor"];

fn point(mesh: &Mesh, v: u32) -> DVec3 {
    let i = v as usize * 3;
    DVec3::new(
        mesh.vertices[i] as f64,
        mesh.vertices[i + 1] as f64,
        mesh.vertices[i + 2] as f64,
    )
}

/// The triangles of each brush (by source), as corner positions.
fn brush_triangles(mesh: &Mesh) -> BTreeMap<i32, Vec<[DVec3; 3]>> {
    let mut out: BTreeMap<i32, Vec<[DVec3; 3]>> = BTreeMap::new();
    for t in 0..mesh.triangle_count() {
        if mesh.source[t] >= 0 {
            let c = &mesh.triangles[3 * t..3 * t + 3];
            out.entry(mesh.source[t]).or_default().push([
                point(mesh, c[0]),
                point(mesh, c[1]),
                point(mesh, c[2]),
            ]);
        }
    }
    out
}

/// Welds a brush's corners (the test's own: within 0.02 units) and checks
/// that every edge is met once in each direction (closed, consistently
/// wound), that V − E + F = 2, and that the enclosed volume is positive
/// (faces wound outward). Returns why not.
fn closed_surface(triangles: &[[DVec3; 3]]) -> Result<(), String> {
    let mut corners: Vec<DVec3> = Vec::new();
    let mut id = |p: DVec3| -> usize {
        match corners.iter().position(|q| q.distance(p) <= 0.02) {
            Some(i) => i,
            None => {
                corners.push(p);
                corners.len() - 1
            }
        }
    };
    let welded: Vec<[usize; 3]> = triangles
        .iter()
        .map(|t| [id(t[0]), id(t[1]), id(t[2])])
        .collect();
    let mut directed: HashMap<(usize, usize), usize> = HashMap::new();
    for t in &welded {
        if t[0] == t[1] || t[1] == t[2] || t[0] == t[2] {
            return Err(format!("a triangle collapses when welded: {t:?}"));
        }
        for k in 0..3 {
            *directed.entry((t[k], t[(k + 1) % 3])).or_default() += 1;
        }
    }
    for (&(a, b), &n) in &directed {
        if n != 1 || directed.get(&(b, a)) != Some(&1) {
            return Err(format!(
                "edge {a}-{b} is met {n} times, its reverse {:?}",
                directed.get(&(b, a))
            ));
        }
    }
    let (v, e, f) = (
        corners.len() as i64,
        directed.len() as i64 / 2,
        welded.len() as i64,
    );
    if v - e + f != 2 {
        return Err(format!("V − E + F = {v} − {e} + {f} = {}", v - e + f));
    }
    let volume: f64 = triangles
        .iter()
        .map(|t| t[0].dot(t[1].cross(t[2])) / 6.0)
        .sum();
    if volume <= 0.0 {
        return Err(format!("volume {volume} (faces wound inward)"));
    }
    Ok(())
}

#[test]
fn every_brush_is_a_closed_outward_surface() {
    for map in MAPS {
        let loaded = common::load_world(map, true);
        let meshes = map_meshes(&loaded, ALL_CONTENTS, None).expect("all models");
        assert_eq!(meshes.len(), loaded.models().len() + 1);
        let (mut brushes, mut open) = (0, 0);
        for model in &meshes {
            let world = match model.model {
                0 => loaded.world(),
                k => loaded.models()[k - 1].world(),
            };
            let by_brush = brush_triangles(&model.mesh);
            // Every brush with contents has faces (none is lost).
            let with_contents = world.brushes.iter().filter(|b| b.contents != 0).count();
            assert_eq!(by_brush.len(), with_contents, "{map} model {}", model.model);
            for (source, triangles) in &by_brush {
                if let Err(why) = closed_surface(triangles) {
                    open += 1;
                    eprintln!("{map} model {} brush {source}: {why}", model.model);
                }
            }
            brushes += by_brush.len();
        }
        eprintln!(
            "{map}: {} of {brushes} brushes closed (V − E + F = 2, every edge twice, outward)",
            brushes - open
        );
        assert_eq!(open, 0, "{map}: {open} of {brushes} brushes open");
    }
}

/// Where a ray from `start` along `dir` (t in 0..1) first meets a triangle
/// whose contents meet `mask` from its front: (t, triangle).
fn first_front_hit(mesh: &Mesh, start: DVec3, dir: DVec3, mask: u32) -> Option<(f64, usize)> {
    let mut best: Option<(f64, usize)> = None;
    for t in 0..mesh.triangle_count() {
        if mesh.contents[t] & mask == 0 {
            continue;
        }
        let c = &mesh.triangles[3 * t..3 * t + 3];
        let (a, b, d) = (point(mesh, c[0]), point(mesh, c[1]), point(mesh, c[2]));
        let (e1, e2) = (b - a, d - a);
        let normal = e1.cross(e2);
        if normal.dot(dir) >= 0.0 {
            continue;
        }
        // Möller–Trumbore.
        let p = dir.cross(e2);
        let det = e1.dot(p);
        let s = start - a;
        let u = s.dot(p) / det;
        if !(-1e-9..=1.0 + 1e-9).contains(&u) {
            continue;
        }
        let q = s.cross(e1);
        let v = dir.dot(q) / det;
        if v < -1e-9 || u + v > 1.0 + 1e-9 {
            continue;
        }
        let hit = e2.dot(q) / det;
        if (0.0..=1.0).contains(&hit) && best.is_none_or(|(b, _)| hit < b) {
            best = Some((hit, t));
        }
    }
    best
}

/// Whether the segment's bounds come within a unit of a patch's.
fn near_patch(world: &bspq::world::World, start: DVec3, end: DVec3) -> bool {
    let (lo, hi) = (start.min(end) - 1.0, start.max(end) + 1.0);
    world.patches.iter().any(|p| {
        let (pl, ph) = (
            DVec3::from_array(p.mins.map(f64::from)),
            DVec3::from_array(p.maxs.map(f64::from)),
        );
        lo.cmple(ph).all() && hi.cmpge(pl).all()
    })
}

#[test]
fn rays_at_the_triangles_stop_where_bspq_rays_stop() {
    let (mut compared, mut agreed, mut near_patches, mut started_solid) = (0, 0, 0, 0);
    for map in MAPS {
        let loaded = common::load_world(map, true);
        let world = loaded.world();
        let mesh = world_mesh(&world, ALL_CONTENTS);
        let (mut map_compared, mut map_agreed) = (0, 0);
        for line in common::load_set(map, "rays", true).queries {
            let q: serde_json::Value = serde_json::from_str(&line).expect("query");
            let v = |key: &str| {
                let a: [f64; 3] = serde_json::from_value(q[key].clone()).expect("point");
                DVec3::from_array(a)
            };
            let (start, end) = (v("start"), v("end"));
            let mask = q["mask"].as_u64().expect("mask") as u32;
            let ray = TraceQuery::ray(start.as_vec3(), end.as_vec3(), mask).expect("ray");
            let answer = loaded.trace(&ray);
            if answer.startsolid {
                // Inside a brush: the surface has no answer to compare.
                started_solid += 1;
                continue;
            }
            if near_patch(&world, start, end) {
                near_patches += 1;
                continue;
            }
            let length = (end - start).length();
            let dir = end - start;
            let mesh_hit = first_front_hit(&mesh, start, dir, mask);
            let agree = match (answer.fraction < 1.0, mesh_hit) {
                (false, None) => true,
                (true, Some((t, _))) => {
                    // bspq stops 1/8 unit off the plane it hits: that far
                    // along the plane's normal, further along a slanted ray.
                    let n = answer.normal.as_dvec3();
                    let cos = (dir.normalize().dot(n)).abs();
                    ((t - answer.fraction as f64) * length * cos).abs()
                        <= SURFACE_CLIP_EPSILON + 0.01
                }
                _ => false,
            };
            map_compared += 1;
            map_agreed += agree as usize;
        }
        eprintln!(
            "{map}: rays at the triangles agree with bspq on {map_agreed} of {map_compared} ({:.2} %)",
            100.0 * map_agreed as f64 / map_compared as f64
        );
        assert!(map_compared > 0, "{map}: no ray compared");
        compared += map_compared;
        agreed += map_agreed;
    }
    let rate = agreed as f64 / compared as f64;
    eprintln!(
        "all maps: {agreed} of {compared} ({:.2} %); {near_patches} near patches and {started_solid} starting in solid left out",
        100.0 * rate
    );
    assert!(rate >= 0.99, "agreement {rate}");
}

/// The triangles of `meshes` as (corners, contents, surface flags), sorted.
type Tagged = Vec<([[u32; 3]; 3], u32, u32)>;

fn tagged(meshes: &[bspq::geometry::ModelMesh]) -> Tagged {
    let mut out = Tagged::new();
    for m in meshes {
        for t in 0..m.mesh.triangle_count() {
            let c = m.mesh.corners(t).map(|p| p.map(f32::to_bits));
            out.push((c, m.mesh.contents[t], m.mesh.surface_flags[t]));
        }
    }
    out.sort();
    out
}

/// Reads a `.glb` with the `gltf` crate: its triangles with the contents
/// and surface flags of their primitives.
fn glb_triangles(bytes: &[u8]) -> Tagged {
    let glb = gltf::Gltf::from_slice(bytes).expect("a valid glTF");
    let blob = glb.blob.as_deref().expect("a binary chunk");
    let mut out = Tagged::new();
    for mesh in glb.document.meshes() {
        for primitive in mesh.primitives() {
            assert_eq!(primitive.mode(), gltf::mesh::Mode::Triangles);
            let extras: serde_json::Value =
                serde_json::from_str(primitive.extras().as_ref().expect("extras").get())
                    .expect("extras json");
            let contents = extras["contents"].as_u64().expect("contents") as u32;
            let flags = extras["surface_flags"].as_u64().expect("surface_flags") as u32;
            let reader = primitive.reader(|_| Some(blob));
            let positions: Vec<[f32; 3]> = reader.read_positions().expect("positions").collect();
            let indices: Vec<u32> = reader.read_indices().expect("indices").into_u32().collect();
            for t in indices.chunks_exact(3) {
                let c = [0, 1, 2].map(|k| positions[t[k] as usize].map(f32::to_bits));
                out.push((c, contents, flags));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn the_glb_reads_back_with_every_triangle_and_its_flags() {
    let loaded = common::load_world("oa_ctf2", true);
    let meshes = map_meshes(&loaded, ALL_CONTENTS, None).expect("meshes");
    let bytes = bspq::geometry::glb::write(&meshes, serde_json::json!({}));
    let glb = gltf::Gltf::from_slice(&bytes).expect("valid");
    let with_triangles = meshes
        .iter()
        .filter(|m| m.mesh.triangle_count() > 0)
        .count();
    assert_eq!(glb.document.meshes().count(), with_triangles);
    assert_eq!(glb_triangles(&bytes), tagged(&meshes));
    // A mask that meets nothing: a valid file with no mesh.
    let none = map_meshes(&loaded, 0, None).expect("meshes");
    let empty = bspq::geometry::glb::write(&none, serde_json::json!({}));
    assert_eq!(
        gltf::Gltf::from_slice(&empty)
            .expect("valid")
            .document
            .meshes()
            .count(),
        0
    );
}

#[test]
fn the_geometry_route_and_the_export_command_give_the_library_triangles() {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::copy(common::map_path("q3dm6ish"), dir.path().join("arena.bsp")).expect("copy");
    let server = TestServer::start(Some(dir.path().to_owned()), Limits::default());
    let loaded = common::load_world("q3dm6ish", true);
    let agent = crate::common::server::http_agent();
    let get = |path: &str, accept: Option<&str>| {
        let mut request = agent.get(format!("{}{path}", server.base));
        if let Some(a) = accept {
            request = request.header("Accept", a);
        }
        let mut response = request.call().expect("answer");
        let kind = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap_or("").to_owned());
        let bytes = response
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_vec()
            .expect("body");
        (response.status().as_u16(), kind.unwrap_or_default(), bytes)
    };
    // JSON: every model, the library's numbers.
    let (status, kind, bytes) = get("/v1/worlds/arena/geometry", None);
    assert_eq!((status, kind.as_str()), (200, "application/json"));
    let json: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
    assert_eq!(json["world"], "arena");
    assert_eq!(json["version"], 1);
    let hash = format!("{:016x}", loaded.view().info.source_hash);
    assert_eq!(json["source_hash"], hash.as_str());
    let meshes = map_meshes(&loaded, ALL_CONTENTS, None).expect("meshes");
    let models = json["models"].as_array().expect("models");
    assert_eq!(models.len(), meshes.len());
    for (got, want) in models.iter().zip(&meshes) {
        assert_eq!(got["model"], want.model);
        let floats: Vec<f32> = serde_json::from_value(got["vertices"].clone()).expect("vertices");
        assert_eq!(floats, want.mesh.vertices);
        let ints: Vec<u32> = serde_json::from_value(got["triangles"].clone()).expect("triangles");
        assert_eq!(ints, want.mesh.triangles);
        let c: Vec<u32> = serde_json::from_value(got["contents"].clone()).expect("contents");
        assert_eq!(c, want.mesh.contents);
        let f: Vec<u32> = serde_json::from_value(got["surface_flags"].clone()).expect("flags");
        assert_eq!(f, want.mesh.surface_flags);
        let s: Vec<i32> = serde_json::from_value(got["source"].clone()).expect("source");
        assert_eq!(s, want.mesh.source);
    }
    // One model, one mask, as a .glb.
    let (status, kind, bytes) = get(
        "/v1/worlds/arena/geometry?model=1&mask=0x1&format=glb",
        None,
    );
    assert_eq!((status, kind.as_str()), (200, "model/gltf-binary"));
    let one = map_meshes(&loaded, 1, Some(1)).expect("model 1");
    assert_eq!(glb_triangles(&bytes), tagged(&one));
    // OBJ by Accept: one face line per triangle.
    let (status, kind, bytes) = get("/v1/worlds/arena/geometry", Some("model/obj"));
    assert_eq!((status, kind.as_str()), (200, "model/obj"));
    let text = String::from_utf8(bytes).expect("text");
    let faces = text.lines().filter(|l| l.starts_with("f ")).count();
    assert_eq!(
        faces,
        meshes
            .iter()
            .map(|m| m.mesh.triangle_count())
            .sum::<usize>()
    );
    // Errors.
    for (path, code) in [
        ("/v1/worlds/arena/geometry?model=99", "malformed_request"),
        ("/v1/worlds/arena/geometry?format=stl", "malformed_request"),
        ("/v1/worlds/nowhere/geometry", "unknown_world"),
    ] {
        let (status, _, bytes) = get(path, None);
        let body: serde_json::Value = serde_json::from_slice(&bytes).expect("error json");
        assert_eq!(body["error"]["code"], code, "{path}");
        assert!(status == 400 || status == 404, "{path}: {status}");
    }
    // The command writes the same triangles.
    let glb = dir.path().join("out.glb");
    common::bspq_stdout([
        "export".as_ref(),
        common::map_path("q3dm6ish").as_os_str(),
        "--mask".as_ref(),
        "1".as_ref(),
        "-o".as_ref(),
        glb.as_os_str(),
    ]);
    let written = std::fs::read(&glb).expect("written");
    assert_eq!(
        glb_triangles(&written),
        tagged(&map_meshes(&loaded, 1, None).expect("mask 1"))
    );
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_bspq"))
        .args([
            "export",
            common::map_path("q3dm6ish").to_str().expect("path"),
            "-o",
            "out.stl",
        ])
        .output()
        .expect("runs");
    assert!(!bad.status.success());
}
