//! Potential visibility (`inPVS`) against a reference built here from the
//! raw map file: its own reading of the planes, nodes, leaves and
//! visibility lump, each point's leaf found by testing every leaf's path
//! constraints (not by walking the tree), and the pair rule applied to
//! that. Area portals: a mover made to straddle two areas, closed by index
//! and by area pair; the transports against the library.

use crate::common;

use bspq::bots::pvs::{PointLeaf, PortalRef, Pvs, PvsLine};
use bspq::bots::{pvs, BotsError};
use bspq::map::Map;
use bspq::query::Query;
use bspq::world::format;
use bspq::Vec3;
use common::MAPS;

/// What the reference reads of an IBSP v46 file, by its own parser.
struct Raw {
    planes: Vec<([f32; 3], f32)>,
    nodes: Vec<(usize, [i32; 2])>,
    /// Per leaf: cluster, area, integer bounds.
    leaves: Vec<(i32, i32, [i32; 6])>,
    vis: Option<(usize, usize, Vec<u8>)>,
}

fn lump(bytes: &[u8], n: usize) -> (usize, usize) {
    let at = 8 + 8 * n;
    let word = |o: usize| i32::from_le_bytes(bytes[o..o + 4].try_into().unwrap()) as usize;
    (word(at), word(at + 4))
}

fn i32s(bytes: &[u8], at: usize, n: usize) -> Vec<i32> {
    (0..n)
        .map(|k| i32::from_le_bytes(bytes[at + 4 * k..at + 4 * k + 4].try_into().unwrap()))
        .collect()
}

impl Raw {
    fn parse(bytes: &[u8]) -> Raw {
        let f = |w: i32| f32::from_bits(w as u32);
        let (o, l) = lump(bytes, 2);
        let planes = (0..l / 16)
            .map(|i| {
                let w = i32s(bytes, o + 16 * i, 4);
                ([f(w[0]), f(w[1]), f(w[2])], f(w[3]))
            })
            .collect();
        let (o, l) = lump(bytes, 3);
        let nodes = (0..l / 36)
            .map(|i| {
                let w = i32s(bytes, o + 36 * i, 3);
                (w[0] as usize, [w[1], w[2]])
            })
            .collect();
        let (o, l) = lump(bytes, 4);
        let leaves = (0..l / 48)
            .map(|i| {
                let w = i32s(bytes, o + 48 * i, 8);
                (w[0], w[1], [w[2], w[3], w[4], w[5], w[6], w[7]])
            })
            .collect();
        let (o, l) = lump(bytes, 16);
        let vis = (l > 0).then(|| {
            let w = i32s(bytes, o, 2);
            let (clusters, row) = (w[0] as usize, w[1] as usize);
            (clusters, row, bytes[o + 8..o + 8 + clusters * row].to_vec())
        });
        Raw {
            planes,
            nodes,
            leaves,
            vis,
        }
    }

    /// Every leaf the tree reaches with the sides of the planes on its
    /// path: (plane, front).
    fn paths(&self) -> Vec<(usize, Vec<(usize, bool)>)> {
        let mut out = Vec::new();
        let mut stack = vec![(0i32, Vec::new())];
        while let Some((child, path)) = stack.pop() {
            if child < 0 {
                out.push(((-1 - child) as usize, path));
                continue;
            }
            let (plane, children) = self.nodes[child as usize];
            for (k, &c) in children.iter().enumerate() {
                let mut p = path.clone();
                p.push((plane, k == 0));
                stack.push((c, p));
            }
        }
        out
    }

    /// The point's distance to plane `i` as Quake 3 computes it: a plane
    /// whose normal is +X, +Y or +Z reads the coordinate; any other, the
    /// dot product; in single precision. Zero is the front.
    fn front(&self, i: usize, p: Vec3) -> bool {
        let (n, d) = self.planes[i];
        let p = p.to_array();
        let dist = match (0..3).find(|&k| n[k] == 1.0) {
            Some(k) => p[k] - d,
            None => n[0] * p[0] + n[1] * p[1] + n[2] * p[2] - d,
        };
        dist >= 0.0
    }

    /// The leaf whose every path constraint `p` meets (exactly one).
    fn leaf(&self, paths: &[(usize, Vec<(usize, bool)>)], p: Vec3) -> usize {
        let found: Vec<usize> = paths
            .iter()
            .filter(|(_, path)| {
                path.iter()
                    .all(|&(plane, front)| self.front(plane, p) == front)
            })
            .map(|&(leaf, _)| leaf)
            .collect();
        assert_eq!(found.len(), 1, "{p}: leaves {found:?}");
        found[0]
    }

    /// The pair rule, the areas connected only when equal (no portals).
    fn visible(&self, a: (i32, i32), b: (i32, i32), connected: impl Fn(i32, i32) -> bool) -> bool {
        if a.0 < 0 || b.0 < 0 || a.1 < 0 || b.1 < 0 {
            return false;
        }
        let bit = match &self.vis {
            None => true,
            Some((_, row, rows)) => {
                rows[a.0 as usize * row + b.0 as usize / 8] & (1 << (b.0 % 8)) != 0
            }
        };
        bit && connected(a.1, b.1)
    }
}

/// Points to ask about: starts and ends of the oracle's rays (mostly in
/// the open), its point queries and random points (many in solid or
/// outside), and points
/// exactly on axial node planes (the tie rule).
fn points(map: &str, raw: &Raw, count: usize) -> Vec<Vec3> {
    let mut out = Vec::new();
    let rays = common::load_set(map, "rays", true);
    for line in rays.queries.iter().step_by(16).take(count / 3) {
        if let Query::Trace(q) = common::parse_query(line) {
            out.extend([q.start(), q.end()]);
        }
    }
    let set = common::load_set(map, "points", true);
    for line in set.queries.iter().step_by(20).take(count / 6) {
        if let Query::Point(p) = common::parse_query(line) {
            out.push(p);
        }
    }
    let mut rng = common::Rng::new(46);
    // Anywhere in the leaves' bounds: often in solid.
    let (mut lo, mut hi) = (Vec3::splat(f32::MAX), Vec3::splat(f32::MIN));
    for (_, _, b) in &raw.leaves {
        lo = lo.min(Vec3::new(b[0] as f32, b[1] as f32, b[2] as f32));
        hi = hi.max(Vec3::new(b[3] as f32, b[4] as f32, b[5] as f32));
    }
    for _ in 0..count / 6 {
        out.push(lo + (hi - lo) * Vec3::new(rng.unit(), rng.unit(), rng.unit()));
    }
    // Past the map on every side.
    let middle = (lo + hi) * 0.5;
    for axis in [Vec3::X, Vec3::Y, Vec3::Z] {
        out.push(middle + axis * (hi - lo + 500.0));
        out.push(middle - axis * (hi - lo + 500.0));
    }
    let base: Vec<Vec3> = out.clone();
    for (i, (plane, _)) in raw.nodes.iter().enumerate().step_by(7) {
        let (n, d) = raw.planes[*plane];
        if let Some(k) = (0..3).find(|&k| n[k] == 1.0) {
            let mut p = base[(i + rng.below(base.len())) % base.len()].to_array();
            p[k] = d;
            out.push(Vec3::from_array(p));
        }
        if out.len() >= count {
            break;
        }
    }
    out
}

fn request(points: &[Vec3], targets: Option<&[Vec3]>, closed: Vec<PortalRef>) -> Pvs {
    let j = |v: &[Vec3]| v.iter().map(|p| p.to_array().map(f64::from)).collect();
    PvsLine {
        points: j(points),
        targets: targets.map(j),
        closed_portals: (!closed.is_empty()).then_some(closed),
    }
    .check()
    .expect("a valid request")
}

/// Every committed map, loaded from its `.bsp` and from its compiled
/// file: each point's leaf, cluster and area, and the whole matrix, equal
/// the reference's.
#[test]
fn pvs_equals_the_brute_force_reference_on_every_map() {
    for map in MAPS {
        let bytes = std::fs::read(common::map_path(map)).unwrap();
        let raw = Raw::parse(&bytes);
        let paths = raw.paths();
        let pts = points(map, &raw, 300);
        let targets: Vec<Vec3> = pts.iter().rev().step_by(3).copied().collect();
        let built = common::load_world(map, true);
        let compiled = Map::from_compiled_bytes(&built.to_file_bytes()).unwrap();
        for world in [&built, &compiled] {
            let answer = pvs(&world.world(), &request(&pts, Some(&targets), vec![])).unwrap();
            assert_eq!(answer.vised, raw.vis.is_some(), "{map}");
            assert!(answer.portals.is_empty(), "{map}");
            let where_ = |p: Vec3| {
                let leaf = raw.leaf(&paths, p);
                let (cluster, area, _) = raw.leaves[leaf];
                PointLeaf {
                    leaf: leaf as u32,
                    cluster,
                    area,
                }
            };
            let expected_points: Vec<PointLeaf> = pts.iter().map(|&p| where_(p)).collect();
            let expected_targets: Vec<PointLeaf> = targets.iter().map(|&p| where_(p)).collect();
            assert_eq!(answer.points, expected_points, "{map}");
            assert_eq!(answer.targets.as_ref(), Some(&expected_targets), "{map}");
            let mut seen = [0usize; 2];
            for (i, a) in expected_points.iter().enumerate() {
                for (j, b) in expected_targets.iter().enumerate() {
                    let v = raw.visible((a.cluster, a.area), (b.cluster, b.area), |x, y| x == y);
                    assert_eq!(
                        answer.matrix.visible[i * targets.len() + j],
                        v,
                        "{map}: point {i} {} target {j} {}",
                        pts[i],
                        targets[j]
                    );
                    seen[usize::from(v)] += 1;
                }
            }
            assert!(seen[0] > 100 && seen[1] > 100, "{map}: {seen:?}");
        }
        // The points in clusters and in the void both occur.
        let clusters: Vec<i32> = pts
            .iter()
            .map(|&p| where_cluster(&raw, &paths, p))
            .collect();
        let void = clusters.iter().filter(|&&c| c < 0).count();
        assert!(
            void > 6 && clusters.len() - void > 100,
            "{map}: {void} of {}",
            clusters.len()
        );
    }
}

fn where_cluster(raw: &Raw, paths: &[(usize, Vec<(usize, bool)>)], p: Vec3) -> i32 {
    raw.leaves[raw.leaf(paths, p)].0
}

/// q3dm6ish with a mover straddling its two areas: func_illusionary `*2`
/// renamed func_door (same length with the spaces) and its model's bounds
/// moved to span the small area 1 and the area 0 beside it; the
/// visibility rows all set, so that areas alone decide.
fn q3dm6ish_with_a_door() -> (Vec<u8>, Raw) {
    let mut bytes = std::fs::read(common::map_path("q3dm6ish")).unwrap();
    let (eo, el) = lump(&bytes, 0);
    let text = &mut bytes[eo..eo + el];
    let from = b"\"func_illusionary\"";
    let at = text.windows(from.len()).position(|w| w == from).unwrap();
    text[at..at + from.len()].copy_from_slice(b"\"func_door\"       ");
    let raw = Raw::parse(&bytes);
    // Area 1's leaves, grown by 32 units: they reach the area 0 beside it.
    let (mut lo, mut hi) = ([i32::MAX; 3], [i32::MIN; 3]);
    for (_, area, b) in &raw.leaves {
        if *area == 1 {
            for k in 0..3 {
                lo[k] = lo[k].min(b[k]);
                hi[k] = hi[k].max(b[k + 3]);
            }
        }
    }
    let (mo, _) = lump(&bytes, 7);
    let model2 = mo + 40 * 2;
    for k in 0..3 {
        let (a, b) = ((lo[k] - 32) as f32, (hi[k] + 32) as f32);
        bytes[model2 + 4 * k..model2 + 4 * k + 4].copy_from_slice(&a.to_le_bytes());
        bytes[model2 + 12 + 4 * k..model2 + 16 + 4 * k].copy_from_slice(&b.to_le_bytes());
    }
    let (vo, vl) = lump(&bytes, 16);
    for b in &mut bytes[vo + 8..vo + vl] {
        *b = 0xff;
    }
    let raw = Raw::parse(&bytes);
    (bytes, raw)
}

#[test]
fn areas_connect_through_an_open_portal_and_part_when_it_closes() {
    let (bytes, raw) = q3dm6ish_with_a_door();
    let paths = raw.paths();
    let built = Map::from_bytes(&bytes, "q3dm6ish").unwrap();
    let compiled = Map::from_compiled_bytes(&built.to_file_bytes()).unwrap();
    // A point in the middle of each leaf of either area (where the middle
    // lies in that leaf).
    let mut pts = Vec::new();
    for (leaf, (cluster, area, b)) in raw.leaves.iter().enumerate() {
        let mid = Vec3::new(
            (b[0] + b[3]) as f32 / 2.0,
            (b[1] + b[4]) as f32 / 2.0,
            (b[2] + b[5]) as f32 / 2.0,
        );
        if *cluster >= 0 && (*area == 1 || leaf % 9 == 0) && raw.leaf(&paths, mid) == leaf {
            pts.push(mid);
        }
    }
    let areas: Vec<i32> = pts
        .iter()
        .map(|&p| raw.leaves[raw.leaf(&paths, p)].1)
        .collect();
    assert!(areas.contains(&0) && areas.contains(&1), "{areas:?}");
    for world in [&built, &compiled] {
        let open = pvs(&world.world(), &request(&pts, None, vec![])).unwrap();
        assert_eq!(open.areas, 2);
        assert_eq!(open.portals.len(), 1, "{:?}", open.portals);
        let portal = &open.portals[0];
        assert_eq!((portal.entity, portal.model.as_str()), (3, "*2"));
        let mut joined = portal.areas;
        joined.sort();
        assert_eq!(joined, [0, 1]);
        for closed in [
            vec![PortalRef::Index(0)],
            vec![PortalRef::Areas([1, 0])],
            vec![PortalRef::Areas([0, 1]), PortalRef::Index(0)],
        ] {
            let shut = pvs(&world.world(), &request(&pts, None, closed.clone())).unwrap();
            for (i, a) in areas.iter().enumerate() {
                for (j, b) in areas.iter().enumerate() {
                    let at = i * pts.len() + j;
                    // Every row is set: in the open every pair sees the
                    // other; closed, only pairs within one area.
                    assert!(open.matrix.visible[at], "{i} {j}");
                    assert_eq!(shut.matrix.visible[at], a == b, "{closed:?}: {i} {j}");
                }
            }
        }
        // Naming a portal that does not exist is refused.
        for closed in [PortalRef::Index(1), PortalRef::Areas([0, 2])] {
            assert!(matches!(
                pvs(&world.world(), &request(&pts, None, vec![closed])),
                Err(BotsError::BadSetting {
                    field: "closed_portals",
                    ..
                })
            ));
        }
    }
}

/// A compiled file written without the visibility sections (as before
/// they existed) loads and refuses PVS with its own error; damaged
/// sections are typed load errors.
#[test]
fn files_without_or_with_damaged_visibility() {
    let source = std::fs::read(common::map_path("q3dm6ish")).unwrap();
    let mut data =
        bspq::map::compile_source(&source, "q3dm6ish", &Default::default()).expect("compiles");
    assert!(!data.source_leaf_vis.is_empty() && !data.visibility.is_empty());
    let pts = [Vec3::new(592.0, -60.0, 16.0)];
    let intact = format::write(&data);
    let layout = format::parse_layout(&intact, true).unwrap();
    assert_ne!(layout.flags & format::FLAG_VISIBILITY, 0);
    let mut without = data.clone();
    without.source_leaf_vis.clear();
    without.visibility.clear();
    without.area_portals.clear();
    let bytes = format::write(&without);
    let layout = format::parse_layout(&bytes, true).unwrap();
    assert_eq!(layout.flags & format::FLAG_VISIBILITY, 0);
    let loaded = Map::from_compiled_bytes(&bytes).expect("loads");
    assert!(loaded.world().source.is_present());
    let refused = pvs(&loaded.world(), &request(&pts, None, vec![])).unwrap_err();
    assert_eq!(refused, BotsError::NoVisibility);
    assert_eq!(refused.code(), "no_visibility");
    // Damaged: each a typed error naming what is wrong.
    let leaves = data.source_leaf_vis.len();
    let mut cases: Vec<(&str, bspq::world::WorldData)> = Vec::new();
    let mut bad = data.clone();
    bad.source_leaf_vis[5].cluster = 100_000;
    cases.push(("cluster", bad));
    let mut bad = data.clone();
    bad.source_leaf_vis[5].area = leaves as i32;
    cases.push(("area", bad));
    let mut bad = data.clone();
    bad.source_leaf_vis.pop();
    cases.push(("source leaves", bad));
    let mut bad = data.clone();
    bad.visibility.pop();
    cases.push(("visibility data", bad));
    let mut bad = data.clone();
    bad.visibility[4..8].copy_from_slice(&1i32.to_le_bytes());
    cases.push(("cannot hold", bad));
    let mut bad = data.clone();
    bad.area_portals.push(bspq::world::AreaPortal {
        areas: [0, 2],
        entity: 0,
        model: 1,
    });
    cases.push(("area portal 0", bad));
    for (what, world) in cases {
        let err = Map::from_compiled_bytes(&format::write(&world))
            .expect_err(what)
            .to_string();
        assert!(err.contains(what), "{what}: {err}");
    }
    // The flag cleared on an intact file: the sections are then unexpected.
    let mut flagless = intact.clone();
    let flags = u32::from_le_bytes(flagless[20..24].try_into().unwrap());
    flagless[20..24].copy_from_slice(&(flags & !format::FLAG_VISIBILITY).to_le_bytes());
    format::seal(&mut flagless);
    let err = Map::from_compiled_bytes(&flagless).expect_err("flag cleared");
    assert!(err.to_string().contains("visibility flag"), "{err}");
    data.visibility.clear();
    // A map without visibility data keeps its clusters: every cluster then
    // sees every other.
    let loaded = Map::from_compiled_bytes(&format::write(&data)).expect("loads");
    let answer = pvs(&loaded.world(), &request(&pts, None, vec![])).unwrap();
    assert!(!answer.vised);
}

fn http_post(url: &str, body: &serde_json::Value) -> (u16, serde_json::Value) {
    let mut resp = common::server::http_agent()
        .post(url)
        .header("Content-Type", "application/json")
        .send(body.to_string())
        .expect("request completes");
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().expect("body");
    (status, serde_json::from_str(&text).expect("JSON body"))
}

/// Points of the bundled world (q3dm6ish), in the open and in the void.
fn bundled_points() -> (Map, Vec<Vec3>) {
    let bytes = std::fs::read(common::map_path("q3dm6ish")).unwrap();
    let raw = Raw::parse(&bytes);
    (
        common::load_world("q3dm6ish", true),
        points("q3dm6ish", &raw, 60),
    )
}

fn json_points(points: &[Vec3]) -> serde_json::Value {
    serde_json::json!(points.iter().map(|p| p.to_array()).collect::<Vec<_>>())
}

#[test]
fn pvs_over_http_equals_the_library() {
    use common::server::TestServer;
    // The bundled world, and a compiled copy without the visibility
    // sections (as files written before them).
    let dir = tempfile::tempdir().unwrap();
    let mut old = bspq::map::compile_source(
        &std::fs::read(common::map_path("oa_ctf2")).unwrap(),
        "old",
        &Default::default(),
    )
    .unwrap();
    old.source_leaf_vis.clear();
    old.visibility.clear();
    old.area_portals.clear();
    std::fs::write(dir.path().join("old.bspq"), format::write(&old)).unwrap();
    std::fs::copy(
        common::map_path("q3dm6ish"),
        dir.path().join("q3dm6ish.bsp"),
    )
    .unwrap();
    let server = TestServer::start(
        Some(dir.path().to_owned()),
        bspq::service::Limits::default(),
    );
    let url = format!("{}/v1/worlds/q3dm6ish/pvs", server.base);
    let (world, pts) = bundled_points();
    let targets: Vec<Vec3> = pts.iter().step_by(2).copied().collect();
    for with_targets in [false, true] {
        let mut body = serde_json::json!({"points": json_points(&pts)});
        if with_targets {
            body["targets"] = json_points(&targets);
        }
        let (status, reply) = http_post(&url, &body);
        assert_eq!(status, 200, "{reply}");
        let expected = pvs(
            &world.world(),
            &request(&pts, with_targets.then_some(&targets[..]), vec![]),
        )
        .unwrap();
        assert_eq!(reply["world"], "q3dm6ish");
        assert_eq!(reply["version"], 1);
        assert!(reply["source_hash"].as_str().is_some_and(|h| !h.is_empty()));
        assert_eq!(reply["visible"], serde_json::json!(expected.matrix.rows()));
        assert_eq!(reply["points"], serde_json::json!(expected.points));
        assert_eq!(
            reply.get("targets"),
            expected.targets.map(|t| serde_json::json!(t)).as_ref()
        );
        assert_eq!(
            (&reply["vised"], &reply["areas"], &reply["portals"]),
            (
                &serde_json::json!(true),
                &serde_json::json!(2),
                &serde_json::json!([])
            )
        );
    }
    // Errors: the table's codes.
    for (url, body, status, code) in [
        (
            url.clone(),
            serde_json::json!({"points": vec![[0, 0, 0]; 1025], "targets": vec![[0, 0, 0]; 1024]}),
            400,
            "too_many_pairs",
        ),
        (
            url.clone(),
            serde_json::json!({"points": [[0, 0, 0], [0, 0, 1e9]]}),
            400,
            "bad_coordinate",
        ),
        (
            url.clone(),
            serde_json::json!({"points": [[0, 0, 0]], "closed_portals": [0]}),
            400,
            "bad_setting",
        ),
        (
            url.clone(),
            serde_json::json!({"points": [], "bogus": 1}),
            400,
            "malformed_request",
        ),
        (
            format!("{}/v1/worlds/nowhere/pvs", server.base),
            serde_json::json!({"points": []}),
            404,
            "unknown_world",
        ),
        (
            format!("{}/v1/worlds/old/pvs", server.base),
            serde_json::json!({"points": [[0, 0, 0]]}),
            409,
            "no_visibility",
        ),
    ] {
        let (got, reply) = http_post(&url, &body);
        assert_eq!(
            (got, reply["error"]["code"].as_str()),
            (status, Some(code)),
            "{body}: {reply}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pvs_over_grpc_packs_the_library_bits() {
    use bspq::proto::v1 as pb;
    use common::server::TestServer;
    let server = TestServer::start(None, bspq::service::Limits::default());
    let mut client = server.collision().await;
    let (world, pts) = bundled_points();
    let packed: Vec<f32> = pts.iter().flat_map(|p| p.to_array()).collect();
    let reply = client
        .pvs(pb::PvsRequest {
            world: "q3dm6ish".into(),
            points: packed,
            ..Default::default()
        })
        .await
        .expect("answered")
        .into_inner();
    let expected = pvs(&world.world(), &request(&pts, None, vec![])).unwrap();
    assert!(reply.vised && reply.areas == 2 && reply.portals.is_empty());
    assert!(reply.targets.is_empty());
    let leaves: Vec<PointLeaf> = reply
        .points
        .iter()
        .map(|p| PointLeaf {
            leaf: p.leaf,
            cluster: p.cluster,
            area: p.area,
        })
        .collect();
    assert_eq!(leaves, expected.points);
    assert_eq!(reply.visible, expected.matrix.packed());
    assert!(expected.matrix.visible.iter().any(|&v| v));
    for (request, code) in [
        (
            pb::PvsRequest {
                world: "q3dm6ish".into(),
                points: vec![0.0; 4],
                ..Default::default()
            },
            tonic::Code::InvalidArgument,
        ),
        (
            pb::PvsRequest {
                world: "q3dm6ish".into(),
                points: vec![0.0; 3],
                closed_area_pairs: vec![0, 1, 2],
                ..Default::default()
            },
            tonic::Code::InvalidArgument,
        ),
        (
            pb::PvsRequest {
                world: "q3dm6ish".into(),
                points: vec![0.0; 3],
                closed_area_pairs: vec![0, 1],
                ..Default::default()
            },
            tonic::Code::InvalidArgument,
        ),
    ] {
        let refused = client.pvs(request).await.expect_err("refused");
        assert_eq!(refused.code(), code, "{refused:?}");
    }
}

#[test]
fn pvs_lines_in_bspq_trace() {
    let (world, pts) = bundled_points();
    let expected = pvs(&world.world(), &request(&pts, None, vec![])).unwrap();
    let line = serde_json::json!({"pvs": {"points": json_points(&pts)}});
    let input = format!(
        "{line}\n{}\n{line}\n{}\n{}\n",
        serde_json::json!({"entities": [{"id": 1, "box": {"mins": [-40, -40, -40], "maxs": [40, 40, 40]}, "origin": pts[0].to_array()}]}),
        serde_json::json!({"pvs": {"points": [[0, 0, 0]], "closed_portals": [[0, 1]]}}),
        serde_json::json!({"pvs": {"points": [[0, 0, 0]]}, "start": [0, 0, 0]})
    );
    let lines = common::trace_lines("q3dm6ish", &input);
    assert_eq!(lines.len(), 5, "{lines:?}");
    for answer in [&lines[0], &lines[2]] {
        // A scene changes no potential visibility.
        assert_eq!(answer["visible"], serde_json::json!(expected.matrix.rows()));
        assert_eq!(answer["points"], serde_json::json!(expected.points));
    }
    assert_eq!(lines[1]["entities"], 1);
    assert_eq!(lines[3]["error"]["code"], "bad_setting", "{:?}", lines[3]);
    assert_eq!(lines[3]["error"]["query_index"], 3);
    assert_eq!(lines[4]["error"]["code"], "mixed_query");
}

/// `bspq trace --server` answers PVS lines over gRPC with the same output,
/// byte for byte, and exit status as offline `bspq trace`.
#[test]
fn pvs_lines_over_a_server_equal_offline() {
    use common::server::TestServer;
    let server = TestServer::start(None, bspq::service::Limits::default());
    let (_, pts) = bundled_points();
    let (points, targets) = (json_points(&pts[..20]), json_points(&pts[20..50]));
    let lines = [
        serde_json::json!({"pvs": {"points": points, "targets": targets}}).to_string(),
        serde_json::json!({"pvs": {"points": points}}).to_string(),
        serde_json::json!({"pvs": {"points": points, "targets": []}}).to_string(),
        r#"{"pvs":{"points":[[0,0,0]],"closed_portals":[0]}}"#.into(),
        r#"{"pvs":{"points":[[0,0,0]],"closed_portals":[[0,1]]}}"#.into(),
        r#"{"pvs":{"points":[[0,0,0],[0,0,1e9]]}}"#.into(),
        r#"{"pvs":{"points":[[0,0,0]]},"start":[0,0,0]}"#.into(),
        r#"{"entities":[{"id":4,"box":{"mins":[-16,-64,-64],"maxs":[16,64,64]},"origin":[660,-60,0]}]}"#.into(),
        serde_json::json!({"pvs": {"points": points}}).to_string(),
    ];
    let input = lines.join("\n") + "\n";
    let (offline, remote) = server.trace_offline_and_remote("q3dm6ish", &input);
    assert_eq!(remote, offline);
    let answers = common::json_lines(&offline.1);
    assert_eq!(answers.len(), lines.len());
    assert_eq!(offline.0, Some(1), "the bad lines fail the run");
    assert_eq!(answers[0]["visible"].as_array().unwrap().len(), 20);
    assert_eq!(answers[0]["targets"].as_array().unwrap().len(), 30);
    assert_eq!(answers[2]["visible"], serde_json::json!(vec![""; 20]));
    assert_eq!(answers[3]["error"]["code"], "bad_setting");
    assert_eq!(answers[4]["error"]["code"], "bad_setting");
    assert_eq!(answers[5]["error"]["code"], "bad_coordinate");
    assert_eq!(answers[6]["error"]["code"], "mixed_query");
    assert_eq!(answers[8], answers[1], "a scene changes no PVS answer");
}
