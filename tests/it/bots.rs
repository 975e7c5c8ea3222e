//! What bots ask: sight matrices equal to the single any-hit rays they
//! stand for (world alone and with a scene, every committed map).

use crate::common;

use bspq::bots::{sight_matrix, sight_matrix_in_scene, Sight};
use bspq::map::Map;
use bspq::scene::{Entity, EntityShape, PlacedScene, Scene, ENTITY_NONE};
use bspq::trace::{any_hit, BatchOptions, Scratch, TraceQuery};
use bspq::{Vec3, MASK_SHOT, MASK_SOLID};
use common::{load_world, MAPS};

/// Points in the map's bounds, most of them in the open (where sight is
/// interesting), a few in solid.
fn points(world: &Map, rng: &mut common::Rng, count: usize) -> Vec<Vec3> {
    let (lo, hi) = world.bounds();
    let mut out = Vec::new();
    while out.len() < count {
        let t = Vec3::new(rng.unit(), rng.unit(), rng.unit());
        let p = lo + (hi - lo) * t;
        if world.point_contents(p) & MASK_SOLID == 0 || out.len() % 8 == 7 {
            out.push(p);
        }
    }
    out
}

/// Small pieces on two threads, so that the split is exercised.
fn split() -> BatchOptions {
    BatchOptions {
        threads: 2,
        min_per_thread: 16,
    }
}

#[test]
fn sight_matrix_equals_single_any_hit_rays() {
    for map in MAPS {
        let world = load_world(map, true);
        let mut rng = common::Rng::new(43);
        let eyes = points(&world, &mut rng, 40);
        let targets = points(&world, &mut rng, 48);
        let mut scratch = Scratch::new();
        let mut seen = [0usize; 2];
        for (targets, mask) in [(Some(targets), MASK_SOLID), (None, 0x2000_0001)] {
            let sight = Sight::new(eyes.clone(), targets.clone(), mask).expect("valid");
            for options in [BatchOptions::single_thread(), split()] {
                let matrix = sight_matrix(&world.view(), &sight, &options);
                let to = targets.as_ref().unwrap_or(&eyes);
                assert_eq!((matrix.eyes, matrix.targets), (eyes.len(), to.len()));
                for (e, &eye) in eyes.iter().enumerate() {
                    for (t, &target) in to.iter().enumerate() {
                        let ray = TraceQuery::ray(eye, target, mask).unwrap();
                        let visible = !any_hit(&world.view(), &ray, &mut scratch);
                        assert_eq!(
                            matrix.visible[e * to.len() + t],
                            visible,
                            "{map}: eye {e} {eye} target {t} {target} mask {mask:#x}"
                        );
                        seen[usize::from(visible)] += 1;
                    }
                }
            }
        }
        // Both answers occur, or the comparison says little.
        assert!(seen[0] > 100 && seen[1] > 100, "{map}: {seen:?}");
    }
}

#[test]
fn sight_matrix_in_a_scene_equals_single_scene_any_hit_rays() {
    for map in MAPS {
        let world = load_world(map, true);
        let mut rng = common::Rng::new(4343);
        let eyes = points(&world, &mut rng, 24);
        let sight = Sight::new(eyes.clone(), None, MASK_SHOT).expect("valid");
        let alone = sight_matrix(&world.view(), &sight, &split());
        // Boxes at the middle of pairs that see each other, and the map's
        // first model moved to another: entities that block some rays
        // (boxes are bodies, as in Quake 3: only masks with BODY see them).
        let n = eyes.len();
        let mut seeing = (0..n * n).filter(|&i| alone.visible[i] && i / n != i % n);
        let mut middle = || {
            let i = seeing.next().expect("pairs that see each other");
            (eyes[i / n] + eyes[i % n]) * 0.5
        };
        let mut entities: Vec<Entity> = (0..6)
            .map(|k| Entity {
                id: k,
                shape: EntityShape::Box {
                    mins: Vec3::splat(-24.0),
                    maxs: Vec3::splat(24.0),
                },
                origin: middle(),
                angles: Vec3::ZERO,
                contents: MASK_SHOT,
                owner: ENTITY_NONE,
            })
            .collect();
        if !world.models().is_empty() {
            let (lo, hi) = world.models()[0].bounds();
            entities.push(Entity {
                id: 100,
                shape: EntityShape::Model(1),
                origin: middle() - (lo + hi) * 0.5,
                angles: Vec3::new(0.0, 30.0, 0.0),
                contents: MASK_SHOT,
                owner: ENTITY_NONE,
            });
        }
        let scene = Scene::new(entities).expect("scene");
        let placed = PlacedScene::new(&world, &scene).expect("placed");
        let matrix = sight_matrix_in_scene(&placed, &sight, &split());
        let mut scratch = Scratch::new();
        for (e, &eye) in eyes.iter().enumerate() {
            for (t, &target) in eyes.iter().enumerate() {
                let ray = TraceQuery::ray(eye, target, MASK_SHOT).unwrap();
                let visible = !placed.any_hit(&ray, ENTITY_NONE, &mut scratch);
                assert_eq!(
                    matrix.visible[e * eyes.len() + t],
                    visible,
                    "{map}: eye {e} target {t}"
                );
            }
        }
        // The entities block what the world alone lets through.
        let blocked = (matrix.visible.iter().zip(&alone.visible))
            .filter(|(s, w)| !**s && **w)
            .count();
        assert!(
            blocked > 0,
            "{map}: no entity blocked a ray ({} visible alone, {} in the scene, {:?})",
            alone.visible.iter().filter(|v| **v).count(),
            matrix.visible.iter().filter(|v| **v).count(),
            scene
                .entities()
                .iter()
                .map(|e| e.origin)
                .collect::<Vec<_>>()
        );
    }
}

/// Eyes and targets on the bundled world, as JSON and as points.
fn bundled_points(seed: u64, count: usize) -> (Map, Vec<Vec3>, serde_json::Value) {
    let world = load_world("q3dm6ish", true);
    let mut rng = common::Rng::new(seed);
    let p = points(&world, &mut rng, count);
    let json = serde_json::json!(p.iter().map(|v| v.to_array()).collect::<Vec<_>>());
    (world, p, json)
}

fn http_post(url: &str, body: &serde_json::Value) -> (u16, serde_json::Value) {
    let agent = crate::common::server::http_agent();
    let mut resp = agent
        .post(url)
        .header("Content-Type", "application/json")
        .send(body.to_string())
        .expect("request completes");
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().expect("body");
    (status, serde_json::from_str(&text).expect("JSON body"))
}

#[test]
fn sight_over_http_equals_the_library() {
    use common::server::TestServer;
    let server = TestServer::start(None, bspq::service::Limits::default());
    let url = format!("{}/v1/worlds/q3dm6ish/sight", server.base);
    let (world, eyes, eyes_json) = bundled_points(7, 20);
    let (_, targets, targets_json) = bundled_points(8, 30);
    let box_entity = serde_json::json!([{"id": 3, "box": {"mins": [-32, -32, -32], "maxs": [32, 32, 32]},
        "origin": ((eyes[0] + targets[0]) * 0.5).to_array()}]);
    let bodies = [
        (
            serde_json::json!({"eyes": eyes_json, "targets": targets_json}),
            true,
            false,
        ),
        (
            serde_json::json!({"eyes": eyes_json, "mask": MASK_SHOT}),
            false,
            false,
        ),
        (
            serde_json::json!({"eyes": eyes_json, "targets": targets_json, "mask": MASK_SHOT, "entities": box_entity}),
            true,
            true,
        ),
    ];
    for (body, with_targets, in_scene) in bodies {
        let (status, reply) = http_post(&url, &body);
        assert_eq!(status, 200, "{reply}");
        let mask = if body.get("mask").is_some() {
            MASK_SHOT
        } else {
            MASK_SOLID
        };
        let sight = Sight::new(eyes.clone(), with_targets.then(|| targets.clone()), mask).unwrap();
        let expected = if in_scene {
            let lines: Vec<bspq::query::EntityLine> =
                serde_json::from_value(box_entity.clone()).unwrap();
            let scene = bspq::query::scene_of(&lines).unwrap();
            let placed = PlacedScene::new(&world, &scene).unwrap();
            sight_matrix_in_scene(&placed, &sight, &BatchOptions::default())
        } else {
            sight_matrix(&world.view(), &sight, &BatchOptions::default())
        };
        assert_eq!(reply["world"], "q3dm6ish");
        assert_eq!(reply["version"], 1);
        assert_eq!(
            reply["visible"],
            serde_json::json!(expected.rows()),
            "{body}"
        );
    }
    // Errors: the table's codes, the point named.
    let too_many =
        serde_json::json!({"eyes": vec![[0, 0, 0]; 1025], "targets": vec![[0, 0, 0]; 1024]});
    let (status, reply) = http_post(&url, &too_many);
    assert_eq!(
        (status, reply["error"]["code"].as_str()),
        (400, Some("too_many_pairs")),
        "{reply}"
    );
    let (status, reply) = http_post(&url, &serde_json::json!({"eyes": [[0, 0, 0], [0, 0, 1e9]]}));
    assert_eq!(
        (status, reply["error"]["code"].as_str()),
        (400, Some("bad_coordinate")),
        "{reply}"
    );
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`eyes` 1"),
        "{reply}"
    );
    let (status, reply) = http_post(&url, &serde_json::json!({"eyes": [], "bogus": 1}));
    assert_eq!(
        (status, reply["error"]["code"].as_str()),
        (400, Some("malformed_request")),
        "{reply}"
    );
    let (status, reply) = http_post(
        &format!("{}/v1/worlds/nowhere/sight", server.base),
        &serde_json::json!({"eyes": []}),
    );
    assert_eq!(
        (status, reply["error"]["code"].as_str()),
        (404, Some("unknown_world")),
        "{reply}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sight_over_grpc_packs_the_library_bits() {
    use bspq::proto::v1 as pb;
    use common::server::TestServer;
    let server = TestServer::start(None, bspq::service::Limits::default());
    let mut client = server.collision().await;
    let (world, eyes, _) = bundled_points(9, 19);
    let packed: Vec<f32> = eyes.iter().flat_map(|p| p.to_array()).collect();
    let reply = client
        .sight(pb::SightRequest {
            world: "q3dm6ish".into(),
            eyes: packed,
            ..Default::default()
        })
        .await
        .expect("answered")
        .into_inner();
    let expected = sight_matrix(
        &world.view(),
        &Sight::new(eyes.clone(), None, MASK_SOLID).unwrap(),
        &BatchOptions::default(),
    );
    assert_eq!((reply.eyes, reply.targets), (19, 19));
    for (i, &visible) in expected.visible.iter().enumerate() {
        assert_eq!(
            reply.visible[i / 8] >> (i % 8) & 1 == 1,
            visible,
            "pair {i}"
        );
    }
    let refused = client
        .sight(pb::SightRequest {
            world: "q3dm6ish".into(),
            eyes: vec![0.0; 4],
            ..Default::default()
        })
        .await
        .expect_err("not whole triples");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
}

#[test]
fn sight_lines_in_bspq_trace_follow_the_scene_lines() {
    let (world, eyes, eyes_json) = bundled_points(10, 12);
    let sight = Sight::new(eyes.clone(), None, MASK_SHOT).unwrap();
    let alone = sight_matrix(&world.view(), &sight, &BatchOptions::default());
    let n = eyes.len();
    let pair = (0..n * n)
        .find(|&i| alone.visible[i] && i / n != i % n)
        .expect("two eyes that see each other");
    let entities = serde_json::json!([{"id": 1, "box": {"mins": [-40, -40, -40], "maxs": [40, 40, 40]},
        "origin": ((eyes[pair / n] + eyes[pair % n]) * 0.5).to_array()}]);
    let line = serde_json::json!({"sight": {"eyes": eyes_json, "mask": MASK_SHOT}});
    let input = format!(
        "{line}\n{}\n{line}\n{}\n",
        serde_json::json!({"entities": entities}),
        serde_json::json!({"sight": {"eyes": [[0, 0, 0]]}, "start": [0, 0, 0]})
    );
    let lines = common::trace_lines("q3dm6ish", &input);
    let lines_of_entities: Vec<bspq::query::EntityLine> = serde_json::from_value(entities).unwrap();
    let scene = bspq::query::scene_of(&lines_of_entities).unwrap();
    let placed = PlacedScene::new(&world, &scene).unwrap();
    let in_scene = sight_matrix_in_scene(&placed, &sight, &BatchOptions::default());
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert_eq!(lines[0]["visible"], serde_json::json!(alone.rows()));
    assert_eq!(lines[1]["entities"], 1);
    assert_eq!(lines[2]["visible"], serde_json::json!(in_scene.rows()));
    assert_ne!(alone.rows(), in_scene.rows(), "the box blocks a pair");
    assert_eq!(lines[3]["error"]["code"], "mixed_query");
}

/// A player's box standing on the floor under `p` (dropped from `p`), or
/// none where it does not fit or finds no walkable floor.
fn standing_at(world: &Map, p: Vec3) -> Option<Vec3> {
    use bspq::movement::{ground, Body};
    let body = Body::boxed(
        Vec3::new(-15.0, -15.0, -24.0),
        Vec3::new(15.0, 15.0, 32.0),
        bspq::MASK_PLAYERSOLID,
    )
    .ok()?;
    let drop = TraceQuery::boxed(
        p,
        p - Vec3::new(0.0, 0.0, 512.0),
        body.mins(),
        body.maxs(),
        bspq::MASK_PLAYERSOLID,
    )
    .ok()?;
    let r = world.trace(&drop);
    if r.startsolid || r.fraction >= 1.0 {
        return None;
    }
    let mut scratch = Scratch::new();
    ground(&world.view(), &body, r.endpos, &mut scratch)
        .walkable
        .then_some(r.endpos)
}

/// The walk again from public single moves: each tick one step-slide move
/// ([`bspq::movement::slide`]) from where the last ended, its velocity
/// aimed at B and turned along the ground when standing, as the walk
/// describes itself; the final origin and tick count must agree.
fn walked_by_single_moves(world: &Map, from: Vec3, to: Vec3, ticks: u32) -> (u32, Vec3) {
    use bspq::movement::{ground, slide, Body, Motion, SlideQuery};
    let body = Body::boxed(
        Vec3::new(-15.0, -15.0, -24.0),
        Vec3::new(15.0, 15.0, 32.0),
        bspq::MASK_PLAYERSOLID,
    )
    .unwrap();
    let view = world.view();
    let mut scratch = Scratch::new();
    let mut motion = Motion {
        origin: from,
        velocity: Vec3::ZERO,
    };
    let mut probe = ground(&view, &body, from, &mut scratch);
    let flat = |v: Vec3| Vec3::new(v.x, v.y, 0.0);
    for tick in 1..=ticks {
        let standing = probe
            .plane()
            .filter(|n| !(motion.velocity.z > 0.0 && motion.velocity.dot(*n) > 10.0));
        let query = match standing {
            Some(n) => {
                let towards = flat(to - motion.origin);
                let left = towards.length();
                let mut v = if left == 0.0 {
                    Vec3::ZERO
                } else {
                    towards * (320f32.min(left / 0.05) / left)
                };
                let speed = v.length();
                if speed > 0.0 {
                    let backoff = v.dot(n);
                    let backoff = if backoff < 0.0 {
                        backoff * 1.001
                    } else {
                        backoff / 1.001
                    };
                    let c = v - n * backoff;
                    v = c * (1.0 / c.length()) * speed;
                }
                SlideQuery::new(
                    Motion {
                        origin: motion.origin,
                        velocity: v,
                    },
                    0.05,
                    body.clone(),
                )
                .unwrap()
                .with_ground(Some(n))
                .unwrap()
            }
            None => SlideQuery::new(motion, 0.05, body.clone())
                .unwrap()
                .with_gravity(800)
                .unwrap(),
        };
        let moved = slide(&view, &query, &mut scratch);
        motion = moved.motion;
        probe = moved.ground;
        let on = probe
            .plane()
            .filter(|n| !(motion.velocity.z > 0.0 && motion.velocity.dot(*n) > 10.0));
        if on.is_some()
            && flat(to - motion.origin).length() <= 16.0
            && (motion.origin.z - to.z).abs() <= 18.0
        {
            return (tick, motion.origin);
        }
    }
    (ticks, motion.origin)
}

#[test]
fn walks_equal_chained_single_moves() {
    use bspq::bots::{walk, Stop, WalkLine};
    for map in MAPS {
        let world = load_world(map, true);
        let mut rng = common::Rng::new(4344);
        let mut spots = Vec::new();
        let (lo, hi) = world.bounds();
        for _ in 0..4000 {
            let p = lo + (hi - lo) * Vec3::new(rng.unit(), rng.unit(), rng.unit());
            if let Some(s) = standing_at(&world, p) {
                spots.push(s);
            }
            if spots.len() == 40 {
                break;
            }
        }
        assert!(spots.len() >= 20, "{map}: {} spots", spots.len());
        let mut reasons = std::collections::BTreeMap::new();
        let mut scratch = Scratch::new();
        for pair in spots.chunks(2).filter(|p| p.len() == 2) {
            // Near targets, so that some are reached.
            let (from, far) = (pair[0], pair[1]);
            for to in [far, from + (far - from).normalize_or_zero() * 96.0] {
                let line = WalkLine {
                    from: from.to_array().map(f64::from),
                    to: to.to_array().map(f64::from),
                    ticks: Some(60),
                    ..Default::default()
                };
                let w = line.check().expect("valid walk");
                let answer = walk(&world.view(), &w, &mut scratch);
                *reasons.entry(format!("{:?}", answer.reason)).or_insert(0) += 1;
                assert_eq!(answer.reached, answer.reason == Stop::Reached);
                if answer.reached {
                    assert!(answer.distance <= 16.0, "{map}: {answer:?}");
                }
                // Walks that ended for a reason the chain does not model
                // are compared up to their last tick.
                let (tick, origin) = walked_by_single_moves(&world, from, to, answer.ticks.max(1));
                if answer.reason != Stop::StartSolid {
                    assert_eq!(
                        answer.origin,
                        origin.to_array(),
                        "{map}: {from} → {to}: {answer:?}"
                    );
                    if answer.reached {
                        assert_eq!(answer.ticks, tick, "{map}: {from} → {to}");
                    }
                }
            }
        }
        assert!(reasons.contains_key("Reached"), "{map}: {reasons:?}");
        assert!(reasons.len() >= 2, "{map}: {reasons:?}");
    }
}

#[test]
fn walks_over_http_equal_the_library() {
    use bspq::bots::{walk, WalkLine};
    use common::server::TestServer;
    let server = TestServer::start(None, bspq::service::Limits::default());
    let world = load_world("q3dm6ish", true);
    let from = standing_at(&world, Vec3::new(592.0, -60.0, 0.0)).expect("the stairs' foot");
    let walks = vec![
        WalkLine {
            from: from.to_array().map(f64::from),
            to: [800.0, -60.0, 0.0],
            ..Default::default()
        },
        WalkLine {
            from: from.to_array().map(f64::from),
            to: [592.0, 300.0, -40.0],
            jump: Some(true),
            ..Default::default()
        },
    ];
    let (status, reply) = http_post(
        &format!("{}/v1/worlds/q3dm6ish/walk", server.base),
        &serde_json::json!({ "walks": walks }),
    );
    assert_eq!(status, 200, "{reply}");
    let mut scratch = Scratch::new();
    for (i, line) in walks.iter().enumerate() {
        let expected = walk(&world.view(), &line.check().unwrap(), &mut scratch);
        let got: bspq::bots::WalkAnswer =
            serde_json::from_value(reply["results"][i].clone()).expect("a walk answer");
        assert_eq!(got, expected);
    }
    let (status, reply) = http_post(
        &format!("{}/v1/worlds/q3dm6ish/walk", server.base),
        &serde_json::json!({ "walks": [{"from": [0, 0, 0], "to": [1, 1, 1]}, {"from": [0, 0, 0], "to": [1, 1, 1], "ticks": 0}] }),
    );
    assert_eq!(
        (
            status,
            reply["error"]["code"].as_str(),
            reply["error"]["query_index"].as_u64()
        ),
        (400, Some("bad_ticks"), Some(1)),
        "{reply}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn walks_over_grpc_equal_the_library() {
    use bspq::bots::{walk, WalkLine};
    use bspq::proto::v1 as pb;
    use bspq::transport::grpc::bots::{walk_answers, walk_message};
    use common::server::TestServer;
    let server = TestServer::start(None, bspq::service::Limits::default());
    let mut client = server.collision().await;
    let world = load_world("q3dm6ish", true);
    let from = standing_at(&world, Vec3::new(592.0, -60.0, 0.0)).expect("the stairs' foot");
    let from = from.to_array().map(f64::from);
    let walks = [
        WalkLine {
            from,
            to: [800.0, -60.0, 0.0],
            ..Default::default()
        },
        WalkLine {
            from,
            to: [592.0, 300.0, -40.0],
            jump: Some(true),
            ..Default::default()
        },
        // Every setting given, a crouching box (one side of it).
        WalkLine {
            from,
            to: [592.0, 140.0, -40.0],
            speed: Some(200.0),
            maxs: Some([15.0, 15.0, 16.0]),
            mask: Some(1),
            frametime: Some(0.025),
            gravity: Some(600),
            ticks: Some(300),
            radius: Some(24.0),
            height: Some(20.0),
            fall: Some(64.0),
            ..Default::default()
        },
    ];
    let reply = client
        .walk(pb::WalkRequest {
            world: "q3dm6ish".into(),
            walks: walks.iter().map(walk_message).collect(),
            scene: None,
        })
        .await
        .expect("answered")
        .into_inner();
    assert_eq!(reply.world, "q3dm6ish");
    assert_eq!(
        reply.source_hash,
        format!("{:016x}", world.view().info.source_hash)
    );
    let got = walk_answers(&reply).expect("one answer per walk");
    let mut scratch = Scratch::new();
    let expected: Vec<_> = walks
        .iter()
        .map(|line| walk(&world.view(), &line.check().unwrap(), &mut scratch))
        .collect();
    assert_eq!(got, expected);
    assert!(got.iter().any(|w| w.reached) && got.iter().any(|w| !w.reached));
    // A box entity in the way (a body: the player mask stops on it) blocks
    // the first walk, unless the walker is that entity.
    let in_the_way = pb::Scene {
        entities: vec![pb::SceneEntity {
            id: 4,
            shape: Some(pb::scene_entity::Shape::Box(pb::Box {
                mins: Some(pb::Vec3 {
                    x: -16.0,
                    y: -64.0,
                    z: -64.0,
                }),
                maxs: Some(pb::Vec3 {
                    x: 16.0,
                    y: 64.0,
                    z: 64.0,
                }),
            })),
            origin: Some(pb::Vec3 {
                x: 660.0,
                y: -60.0,
                z: 0.0,
            }),
            ..Default::default()
        }],
    };
    let first = walks[0].clone();
    let passing = WalkLine {
        pass: Some(4),
        ..first.clone()
    };
    let reply = client
        .walk(pb::WalkRequest {
            world: "q3dm6ish".into(),
            walks: vec![walk_message(&first), walk_message(&passing)],
            scene: Some(in_the_way),
        })
        .await
        .expect("answered")
        .into_inner();
    let got = walk_answers(&reply).expect("one answer per walk");
    assert!(!got[0].reached, "{:?}", got[0]);
    assert_eq!(got[1], expected[0], "the walker's own box is passed over");
    // A bad walk rejects the call, naming it.
    let refused = client
        .walk(pb::WalkRequest {
            world: "q3dm6ish".into(),
            walks: vec![
                walk_message(&first),
                walk_message(&WalkLine {
                    ticks: Some(0),
                    ..first.clone()
                }),
            ],
            scene: None,
        })
        .await
        .expect_err("bad ticks");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    let body: serde_json::Value = serde_json::from_str(refused.message()).expect("JSON");
    assert_eq!(body["error"]["code"], "bad_ticks");
    assert_eq!(body["error"]["query_index"], 1);
}

/// `bspq trace --server` answers bot lines (sight matrices and walks, in
/// and out of scenes, good and bad) over gRPC with the same output, byte
/// for byte, and the same exit status as offline `bspq trace`.
#[test]
fn bot_lines_over_a_server_equal_offline() {
    use common::server::TestServer;
    let server = TestServer::start(None, bspq::service::Limits::default());
    let (_, points, eyes) = bundled_points(11, 9);
    let (_, _, targets) = bundled_points(12, 7);
    // A box between two eyes that see each other.
    let between = serde_json::json!({"entities": [{"id": 5, "box": {"mins": [-40, -40, -40], "maxs": [40, 40, 40]},
        "origin": ((points[0] + points[7]) * 0.5).to_array()}]});
    let walk = r#"{"walk":{"from":[592,-60,-39.875],"to":[720,-60,40]}}"#;
    let lines = [
        serde_json::json!({"sight": {"eyes": eyes, "targets": targets}}).to_string(),
        serde_json::json!({"sight": {"eyes": eyes, "mask": MASK_SHOT}}).to_string(),
        serde_json::json!({"sight": {"eyes": eyes, "targets": []}}).to_string(),
        r#"{"start":[-600,-50,50],"end":[-600,-50,-500]}"#.into(),
        walk.into(),
        r#"{"walk":{"from":[592,-60,-39.875],"to":[592,300,-40],"jump":true}}"#.into(),
        r#"{"walk":{"from":[592,-60,-39.875],"to":[592,140,-40],"speed":200,"maxs":[15,15,16],"mask":1,"frametime":0.025,"gravity":600,"ticks":300,"radius":24,"height":20,"fall":64}}"#.into(),
        r#"{"walk":{"from":[592,-60,-39.875],"to":[720,-60,40],"ticks":0}}"#.into(),
        r#"{"walk":{"from":[592,-60,-39.875],"to":[720,-60,40],"speed":-1}}"#.into(),
        r#"{"sight":{"eyes":[[0,0,0],[0,0,1e9]]}}"#.into(),
        r#"{"sight":{"eyes":[[0,0,0]]},"start":[0,0,0]}"#.into(),
        // A box in the first walk's way, and the walker that is that box.
        r#"{"entities":[{"id":4,"box":{"mins":[-16,-64,-64],"maxs":[16,64,64]},"origin":[660,-60,0]}]}"#.into(),
        walk.into(),
        r#"{"walk":{"from":[592,-60,-39.875],"to":[720,-60,40],"pass":4}}"#.into(),
        between.to_string(),
        serde_json::json!({"sight": {"eyes": eyes, "mask": MASK_SHOT}}).to_string(),
        r#"{"start":[592,-60,0],"end":[720,-60,0],"mask":33554433}"#.into(),
        r#"{"entities":[]}"#.into(),
        walk.into(),
    ];
    let input = lines.join("\n") + "\n";
    let (offline, remote) = server.trace_offline_and_remote("q3dm6ish", &input);
    assert_eq!(remote, offline);
    let answers = common::json_lines(&offline.1);
    assert_eq!(answers.len(), lines.len());
    assert_eq!(offline.0, Some(1), "the bad lines fail the run");
    // What the comparison covers: answers of every kind and the errors.
    assert_eq!(answers[2]["visible"], serde_json::json!(vec![""; 9]));
    assert_eq!(answers[4]["reached"], true);
    assert_eq!(answers[7]["error"]["code"], "bad_ticks");
    assert_eq!(answers[8]["error"]["code"], "bad_setting");
    assert_eq!(answers[9]["error"]["code"], "bad_coordinate");
    assert_eq!(answers[10]["error"]["code"], "mixed_query");
    assert_eq!(answers[12]["reached"], false, "the box blocks the walk");
    assert_eq!(answers[13], answers[4], "the walker passes its own box");
    let sees_7 = |answer: &serde_json::Value| answer["visible"][0].as_str().unwrap().as_bytes()[7];
    assert_eq!(sees_7(&answers[1]), b'1', "eyes 0 and 7 see each other");
    assert_eq!(sees_7(&answers[15]), b'0', "the box hides eye 7");
    assert_eq!(answers[18], answers[4]);
}
