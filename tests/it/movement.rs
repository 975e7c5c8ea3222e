//! Player movement: the committed subsets of the reference's movement
//! answers (ground probes, slide and step-slide moves) on every committed
//! map; invariants on random moves (open space moves by velocity × time
//! exactly, a move that starts free never ends in solid, a prediction is
//! its ticks chained); batches, threads and HTTP give the scalar answers;
//! scenes take part; bad lines are refused with their codes.

use crate::common;

use bspq::conformance::{movement_mismatch, ExpectedMove};
use bspq::map::Map;
use bspq::math::Vec3;
use bspq::movement::{
    self, Body, Collider, Event, InScene, Motion, PredictQuery, SlideQuery, StopEvents,
};
use bspq::query::{answer_all, answer_request, requests_in, Answer, QueryLine, SceneStream};
use bspq::scene::{Entity, EntityShape, PlacedScene, Scene};
use bspq::trace::{BatchOptions, Scratch};
use bspq::MASK_PLAYERSOLID;
use common::{load_set, load_world, MAPS};
use std::fmt::Write as _;

const PLAYER_MINS: Vec3 = Vec3::new(-15.0, -15.0, -24.0);
const PLAYER_MAXS: Vec3 = Vec3::new(15.0, 15.0, 32.0);

fn player() -> Body {
    Body::boxed(PLAYER_MINS, PLAYER_MAXS, MASK_PLAYERSOLID).unwrap()
}

/// Answers query lines through the line format, as `bspq trace` does.
fn answer_lines(map: &Map, lines: &[String], threads: usize) -> Vec<Answer> {
    let parsed: Vec<QueryLine> = lines.iter().map(|l| QueryLine::parse(l).unwrap()).collect();
    let requests = requests_in(&parsed, &map.view()).unwrap_or_else(|(i, e)| {
        panic!("line {} was refused: {e}\n  {}", i + 1, lines[i]);
    });
    answer_all(&map.view(), &requests, &BatchOptions::with_threads(threads))
}

fn check_map(map: &str) {
    let world = load_world(map, true);
    let data = load_set(map, "moves", true);
    let got = answer_lines(&world, &data.queries, 2);
    let mut failed = 0;
    let mut details = String::new();
    for (i, (g, e)) in got.iter().zip(&data.expected).enumerate() {
        let expected: ExpectedMove = serde_json::from_str(e).unwrap();
        if let Some(why) = movement_mismatch(&expected, g) {
            failed += 1;
            if failed <= 8 {
                let _ = write!(
                    details,
                    "\n  line {} [{}]: {why}\n    query    {}\n    expected {e}\n    got      {}",
                    i + 1,
                    data.kinds[i],
                    data.queries[i],
                    g.to_json()
                );
            }
        }
    }
    assert!(data.queries.len() >= 1000, "{map}: the subset is too small");
    assert_eq!(
        failed,
        0,
        "{map}: {failed} of {} movement answers differ from the reference:{details}",
        got.len()
    );
}

#[test]
fn oa_ctf2_moves_match_the_reference() {
    check_map("oa_ctf2");
}

#[test]
fn q3dm6ish_moves_match_the_reference() {
    check_map("q3dm6ish");
}

#[test]
fn aggressor_moves_match_the_reference() {
    check_map("aggressor");
}

/// A small seeded generator (xorshift64*): the same cases every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `lo..hi`, on the 1/64 grid the reference's queries use.
    fn range(&mut self, lo: f32, hi: f32) -> f32 {
        let unit = (self.next() >> 40) as f32 / (1u64 << 24) as f32;
        ((lo + unit * (hi - lo)) * 64.0).round() / 64.0
    }

    fn point_in(&mut self, (lo, hi): (Vec3, Vec3)) -> Vec3 {
        Vec3::new(
            self.range(lo.x, hi.x),
            self.range(lo.y, hi.y),
            self.range(lo.z, hi.z),
        )
    }

    fn velocity(&mut self, speed: f32) -> Vec3 {
        Vec3::new(
            self.range(-speed, speed),
            self.range(-speed, speed),
            self.range(-speed, speed),
        )
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Whether the player box at `origin` is clear of everything in its mask.
fn free(world: &impl Collider, body: &Body, origin: Vec3, scratch: &mut Scratch) -> bool {
    let (at, _) = world.sweep(body, origin, origin, scratch);
    !at.startsolid && !at.allsolid
}

/// Random origins where the player box is free, in `map`'s bounds.
fn free_origins(map: &Map, count: usize, rng: &mut Rng) -> Vec<Vec3> {
    let world = map.view();
    let body = player();
    let mut scratch = Scratch::new();
    let bounds = map.bounds();
    let mut found = Vec::new();
    for _ in 0..count * 50 {
        let origin = rng.point_in(bounds);
        if free(&world, &body, origin, &mut scratch) {
            found.push(origin);
            if found.len() == count {
                break;
            }
        }
    }
    found
}

#[test]
fn a_slide_in_open_space_moves_by_velocity_times_frametime() {
    let mut rng = Rng(0x6d6f_7665);
    for map in MAPS {
        let loaded = load_world(map, true);
        let world = loaded.view();
        let body = player();
        let mut scratch = Scratch::new();
        let mut checked = 0;
        for origin in free_origins(&loaded, 1500, &mut rng) {
            let velocity = rng.velocity(600.0);
            let frametime = rng.range(0.008, 0.1);
            let gravity = if rng.chance(50) { 800 } else { 0 };
            // Where the frame goes with nothing in the way: under gravity,
            // at the average of the start and end velocities.
            let end_velocity = Vec3::new(
                velocity.x,
                velocity.y,
                velocity.z - gravity as f32 * frametime,
            );
            let mean = Vec3::new(velocity.x, velocity.y, (velocity.z + end_velocity.z) * 0.5);
            let end = Vec3::new(
                origin.x + frametime * mean.x,
                origin.y + frametime * mean.y,
                origin.z + frametime * mean.z,
            );
            let (clear, _) = world.sweep(&body, origin, end, &mut scratch);
            if clear.fraction < 1.0 {
                continue;
            }
            for step in [true, false] {
                let query = SlideQuery::new(Motion { origin, velocity }, frametime, body.clone())
                    .unwrap()
                    .with_gravity(gravity)
                    .unwrap()
                    .with_step(step);
                let moved = movement::slide(&world, &query, &mut scratch);
                assert_eq!(
                    moved.motion,
                    Motion {
                        origin: end,
                        velocity: end_velocity
                    },
                    "{map}: {query:?}"
                );
                assert_eq!(moved.stepped, 0.0);
                assert_eq!(moved.blocked, (!step).then_some(false));
            }
            checked += 1;
        }
        assert!(checked > 200, "{map}: only {checked} open moves found");
    }
}

#[test]
fn a_move_that_starts_free_never_ends_in_solid() {
    let mut rng = Rng(0x736f_6c69);
    for map in MAPS {
        let loaded = load_world(map, true);
        let world = loaded.view();
        let body = player();
        let mut scratch = Scratch::new();
        let mut moved_into_something = 0;
        for origin in free_origins(&loaded, 1500, &mut rng) {
            let motion = Motion {
                origin,
                velocity: rng.velocity(1200.0),
            };
            let ground = movement::ground(&world, &body, origin, &mut scratch);
            let query = SlideQuery::new(motion, rng.range(0.008, 0.25), body.clone())
                .unwrap()
                .with_gravity(if rng.chance(60) { 800 } else { 0 })
                .unwrap()
                .with_ground(ground.plane())
                .unwrap()
                .with_step(rng.chance(70));
            let moved = movement::slide(&world, &query, &mut scratch);
            assert!(
                free(&world, &body, moved.motion.origin, &mut scratch),
                "{map}: {query:?} ended in solid at {}",
                moved.motion.origin
            );
            moved_into_something += usize::from(moved.motion.velocity != motion.velocity);
            let predicted = PredictQuery::new(motion, 0.05, body.clone(), 20)
                .unwrap()
                .with_gravity(800)
                .unwrap();
            let end = movement::predict(&world, &predicted, &mut scratch);
            assert!(
                free(&world, &body, end.motion.origin, &mut scratch),
                "{map}: {predicted:?} ended in solid at {}",
                end.motion.origin
            );
        }
        assert!(
            moved_into_something > 100,
            "{map}: too few moves hit anything"
        );
    }
}

#[test]
fn a_prediction_of_n_ticks_is_n_single_ticks_chained() {
    let mut rng = Rng(0x7072_6564);
    let loaded = load_world("q3dm6ish", true);
    let world = loaded.view();
    let mut scratch = Scratch::new();
    let mut events = std::collections::BTreeSet::new();
    for origin in free_origins(&loaded, 150, &mut rng) {
        let mut horizontal = rng.velocity(400.0);
        horizontal.z = 0.0;
        let ticks = 1 + (rng.next() % 40) as u32;
        let stops = StopEvents {
            landed: true,
            left_ground: rng.chance(50),
            blocked_below: rng.chance(50).then_some(20.0),
            contents: None,
            fell: rng.chance(50).then_some(64.0),
        };
        let whole = PredictQuery::new(
            Motion {
                origin,
                velocity: horizontal,
            },
            0.05,
            player(),
            ticks,
        )
        .unwrap()
        .with_gravity(800)
        .unwrap()
        .with_stops(stops.clone())
        .unwrap()
        .with_path(true);
        let all_at_once = movement::predict(&world, &whole, &mut scratch);
        events.insert(all_at_once.event.name());

        // The same ticks one at a time: each a one-tick prediction from
        // where the last ended (the fall is measured from the first start).
        let mut motion = whole.motion();
        let mut path = Vec::new();
        let mut was_standing = None;
        for tick in 1..=all_at_once.tick {
            let one = PredictQuery::new(motion, 0.05, player(), 1)
                .unwrap()
                .with_gravity(800)
                .unwrap()
                .with_path(true);
            let stepped = movement::predict(&world, &one, &mut scratch);
            assert_eq!(stepped.event, Event::Ticks);
            path.extend(stepped.path);
            motion = stepped.motion;
            if tick == all_at_once.tick {
                was_standing = Some(stepped.on_ground);
            }
        }
        assert_eq!(motion, all_at_once.motion, "{whole:?}");
        assert_eq!(path, all_at_once.path, "{whole:?}");
        assert_eq!(was_standing, Some(all_at_once.on_ground));
    }
    assert!(
        events.len() >= 3,
        "the random predictions stopped for too few reasons: {events:?}"
    );
}

/// Movement lines of every kind for the batch tests: the committed subset's
/// slides and probes, and predictions from its origins.
fn mixed_lines(map: &str) -> Vec<String> {
    let mut lines = load_set(map, "moves", true).queries;
    let origins: Vec<[f64; 3]> = lines
        .iter()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            serde_json::from_value(v["slide"]["origin"].clone()).ok()
        })
        .take(200)
        .collect();
    for (i, o) in origins.iter().enumerate() {
        let line = serde_json::json!({"predict": {
            "origin": o, "velocity": [(i % 7) as f64 * 50.0 - 150.0, 200.0, 0.0],
            "frametime": 0.05, "ticks": 30, "gravity": 800,
            "mins": [-15, -15, -24], "maxs": [15, 15, 32],
            "until": ["landed", "left_ground", "blocked"], "path": i % 2 == 0,
        }});
        lines.insert(i * 5, line.to_string());
    }
    lines
}

#[test]
fn batches_and_threads_answer_as_the_scalar_path() {
    let map = load_world("oa_ctf2", true);
    let lines = mixed_lines("oa_ctf2");
    let world = map.view();
    let mut scratch = Scratch::new();
    let scalar: Vec<String> = lines
        .iter()
        .map(|l| {
            let request = QueryLine::parse(l).unwrap().request_in(&world).unwrap();
            answer_request(&world, &mut scratch, &request).to_json()
        })
        .collect();
    for threads in [1, 2] {
        let batched: Vec<String> = answer_lines(&map, &lines, threads)
            .iter()
            .map(Answer::to_json)
            .collect();
        assert_eq!(batched, scalar, "{threads} threads");
    }
    // Through a scene stream in small chunks, with an empty scene: the
    // same answers, each naming the entity that gave its probe.
    let mut stream = SceneStream::new(&map);
    let mut streamed = Vec::new();
    let empty_scene = r#"{"entities":[]}"#.to_owned();
    for chunk in lines.chunks(97) {
        let mut part = vec![empty_scene.clone()];
        part.extend_from_slice(chunk);
        let parsed = part.iter().map(|l| QueryLine::parse(l)).collect();
        let answers = stream.answer(parsed, &BatchOptions::with_threads(2));
        streamed.extend(answers.into_iter().skip(1).map(|a| a.unwrap()));
    }
    for (got, want) in streamed.iter().zip(&scalar) {
        let want: Answer = serde_json::from_str(want).unwrap();
        assert_eq!(without_entities(got.clone()), want);
    }
}

/// An answer without the entity its probes name (answers in a scene name
/// one, answers without do not).
fn without_entities(answer: Answer) -> Answer {
    match answer {
        Answer::Ground(mut g) => {
            g.trace.entity = None;
            Answer::Ground(g)
        }
        Answer::Slide(mut s) => {
            s.ground.trace.entity = None;
            Answer::Slide(s)
        }
        Answer::Predict(mut p) => {
            p.ground.trace.entity = None;
            Answer::Predict(p)
        }
        other => other,
    }
}

/// In the void, far from the map: only the scene is there.
const VOID: Vec3 = Vec3::new(20_000.0, 20_000.0, 20_000.0);

fn scene_of(map: &Map, entities: Vec<Entity>) -> PlacedScene<'_> {
    PlacedScene::new(map, &Scene::new(entities).unwrap()).unwrap()
}

fn box_entity(id: u32, origin: Vec3, mins: Vec3, maxs: Vec3) -> Entity {
    let shape = EntityShape::Box { mins, maxs };
    Entity {
        id,
        contents: Entity::default_contents(&shape),
        shape,
        origin,
        angles: Vec3::ZERO,
        owner: bspq::scene::ENTITY_NONE,
    }
}

#[test]
fn players_stand_on_and_are_stopped_by_scene_entities() {
    let map = load_world("q3dm6ish", true);
    let mover = 1;
    // The mover's own box, a floor slab under it and a player ahead of it.
    let scene = scene_of(
        &map,
        vec![
            box_entity(mover, VOID, PLAYER_MINS, PLAYER_MAXS),
            box_entity(
                7,
                VOID - Vec3::new(0.0, 0.0, 24.125 + 8.0),
                Vec3::new(-512.0, -512.0, -8.0),
                Vec3::new(512.0, 512.0, 8.0),
            ),
            box_entity(
                9,
                VOID + Vec3::new(100.0, 0.0, 0.0),
                PLAYER_MINS,
                PLAYER_MAXS,
            ),
        ],
    );
    let mut scratch = Scratch::new();
    let body = player();
    let collider = InScene {
        scene: &scene,
        pass: mover,
    };
    let probe = movement::ground(&collider, &body, VOID, &mut scratch);
    assert!(probe.walkable, "{probe:?}");
    assert_eq!(probe.entity, 7);
    // Without passing over its own box, the mover is stuck in it.
    let stuck = InScene {
        scene: &scene,
        pass: bspq::scene::ENTITY_NONE,
    };
    assert!(
        movement::ground(&stuck, &body, VOID, &mut scratch)
            .trace
            .allsolid
    );

    let walk = PredictQuery::new(
        Motion {
            origin: VOID,
            velocity: Vec3::new(320.0, 0.0, 0.0),
        },
        0.05,
        body.clone(),
        100,
    )
    .unwrap()
    .with_gravity(800)
    .unwrap()
    .with_stops(StopEvents {
        blocked_below: Some(1.0),
        left_ground: true,
        ..StopEvents::default()
    })
    .unwrap();
    let walked = movement::predict(&collider, &walk, &mut scratch);
    assert_eq!(walked.event, Event::Blocked, "{walked:?}");
    // Stopped an eighth of a unit short of the other player's box.
    let gap = (VOID.x + 100.0 - 15.0) - (walked.motion.origin.x + 15.0);
    assert!((0.0..0.5).contains(&gap), "{walked:?}");
    assert!(walked.on_ground);

    // Walking the other way, the slab ends and the mover falls off it.
    let away = PredictQuery::new(
        Motion {
            origin: VOID,
            velocity: Vec3::new(-320.0, 0.0, 0.0),
        },
        0.05,
        body,
        100,
    )
    .unwrap()
    .with_gravity(800)
    .unwrap()
    .with_stops(StopEvents {
        left_ground: true,
        ..StopEvents::default()
    })
    .unwrap();
    let fell = movement::predict(&collider, &away, &mut scratch);
    assert_eq!(fell.event, Event::LeftGround, "{fell:?}");
    assert!(fell.motion.origin.x < VOID.x - 512.0);
}

#[test]
fn bad_movement_lines_are_refused_with_their_codes() {
    let map = load_world("q3dm6ish", true);
    let world = map.view();
    let player = r#""mins":[-15,-15,-24],"maxs":[15,15,32]"#;
    let slide = |extra: &str| {
        format!(
            r#"{{"slide":{{"origin":[0,0,0],"velocity":[1,2,3],"frametime":0.05,{player}{extra}}}}}"#
        )
    };
    let predict = |extra: &str| {
        format!(
            r#"{{"predict":{{"origin":[0,0,0],"velocity":[1,2,3],"frametime":0.05,{player}{extra}}}}}"#
        )
    };
    let cases = [
        (
            format!(r#"{{"slide":{{"origin":[0,0,0],"velocity":[1e6,0,0],"frametime":0.05,{player}}}}}"#),
            "bad_velocity",
        ),
        (
            format!(r#"{{"slide":{{"origin":[0,0,0],"velocity":[0,0,0],"frametime":-1,{player}}}}}"#),
            "bad_frametime",
        ),
        (
            format!(r#"{{"slide":{{"origin":[0,0,0],"velocity":[0,0,0],"frametime":2,{player}}}}}"#),
            "bad_frametime",
        ),
        (
            format!(r#"{{"slide":{{"origin":[9e6,0,0],"velocity":[0,0,0],"frametime":0.1,{player}}}}}"#),
            "bad_coordinate",
        ),
        (slide(r#","gravity":-800"#), "bad_gravity"),
        (slide(r#","gravity":1000000"#), "bad_gravity"),
        (slide(r#","gravity":800.5"#), "malformed_query"),
        (slide(r#","ground":[0,0,2]"#), "bad_ground_normal"),
        (slide(r#","stairs":true"#), "malformed_query"),
        (slide(r#","hull":"player""#), "mixed_query"),
        (
            r#"{"slide":{"origin":[0,0,0],"velocity":[0,0,0],"frametime":0.05,"hull":"nosuch"}}"#
                .to_owned(),
            "unknown_hull",
        ),
        (
            r#"{"slide":{"origin":[0,0,0],"velocity":[0,0,0],"frametime":0.05,"mins":[-15,-15,-24]}}"#
                .to_owned(),
            "missing_field",
        ),
        (
            r#"{"ground":{"origin":[0,0,0],"mins":[15,15,15],"maxs":[-15,-15,32]}}"#.to_owned(),
            "mins_above_maxs",
        ),
        (
            format!(r#"{{"ground":{{"origin":[0,0,0],{player}}},"start":[0,0,0]}}"#),
            "mixed_query",
        ),
        (
            format!(
                r#"{{"ground":{{"origin":[0,0,0],{player}}},"slide":{{"origin":[0,0,0],"velocity":[0,0,0],"frametime":0.1,{player}}}}}"#
            ),
            "mixed_query",
        ),
        (predict(r#","ticks":0"#), "bad_ticks"),
        (predict(r#","ticks":1001"#), "bad_ticks"),
        (predict(r#","ticks":10,"until":["exploded"]"#), "bad_stop"),
        (predict(r#","ticks":10,"until":["fell"]"#), "bad_stop"),
        (predict(r#","ticks":10,"contents":56"#), "bad_stop"),
        (predict(r#","ticks":10,"until":["contents"],"contents":0"#), "bad_stop"),
        (predict(r#","ticks":10,"until":["blocked"],"blocked_speed":-1"#), "bad_stop"),
        (predict(r#","ticks":10,"pass":5000"#), "malformed_query"),
    ];
    for (line, code) in &cases {
        let refused = QueryLine::parse(line)
            .and_then(|l| {
                l.pass()?;
                l.request_in(&world)
            })
            .expect_err(line);
        assert_eq!(refused.code(), *code, "{line}: {refused}");
    }
}

#[test]
fn bspq_conformance_runs_the_moves_set() {
    let map = common::map_path("aggressor");
    let oracle = common::oracle_dir("aggressor");
    let run = |extra: &[&str]| {
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "conformance".as_ref(),
            "--strict".as_ref(),
            "--world".as_ref(),
            map.as_os_str(),
            "--oracle".as_ref(),
            oracle.as_os_str(),
        ];
        args.extend(extra.iter().map(std::ffi::OsStr::new));
        std::process::Command::new(env!("CARGO_BIN_EXE_bspq"))
            .args(args)
            .output()
            .expect("bspq runs")
    };
    let out = run(&["--sets", "moves"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("moves   1250/1250 matched (100.000%)"),
        "{text}"
    );
    // The reference's movement answers are for curves on only: the default
    // sets skip them with curves off, a named set is an error.
    let out = run(&["--no-curves"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("moves   skipped"), "{text}");
    assert_eq!(
        run(&["--no-curves", "--sets", "moves"]).status.code(),
        Some(1)
    );
}

#[test]
fn bspq_trace_and_http_answer_movement_lines_as_the_library() {
    use common::server::TestServer;
    let lines = mixed_lines("q3dm6ish");
    let lines = &lines[..400];
    let map = load_world("q3dm6ish", true);
    let want: Vec<String> = answer_lines(&map, lines, 1)
        .iter()
        .map(Answer::to_json)
        .collect();

    let input = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(input.path(), lines.join("\n")).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bspq"))
        .args(["trace", "--world"])
        .arg(common::map_path("q3dm6ish"))
        .stdin(std::fs::File::open(input.path()).unwrap())
        .output()
        .expect("bspq runs");
    assert!(out.status.success());
    let offline: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
    assert_eq!(offline, want);

    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(common::map_path("q3dm6ish"), dir.path().join("arena.bsp")).unwrap();
    let server = TestServer::start(Some(dir.path().to_owned()), Default::default());
    let queries: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let body = serde_json::json!({ "queries": queries }).to_string();
    let mut reply = ureq::post(&format!("{}/v1/worlds/arena/trace", server.base))
        .header("Content-Type", "application/json")
        .send(&body)
        .expect("HTTP answers");
    let reply: serde_json::Value =
        serde_json::from_str(&reply.body_mut().read_to_string().unwrap()).unwrap();
    let results = reply["results"].as_array().expect("results");
    let over_http: Vec<Answer> = results
        .iter()
        .map(|r| serde_json::from_value(r.clone()).unwrap())
        .collect();
    let want: Vec<Answer> = want
        .iter()
        .map(|w| serde_json::from_str(w).unwrap())
        .collect();
    assert_eq!(over_http, want);

    // Over gRPC (`bspq trace --server`, one tick message per batch) the
    // same lines get the same answer lines, byte for byte.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bspq"))
        .args(["trace", "--world", "arena", "--server", &server.grpc_url()])
        .stdin(std::fs::File::open(input.path()).unwrap())
        .output()
        .expect("bspq runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let over_grpc: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
    assert_eq!(over_grpc, offline);

    // A bad movement line rejects the body with its code and index.
    let bad = serde_json::json!({"queries": [queries[0], {"predict": {
        "origin": [0, 0, 0], "velocity": [0, 0, 0], "frametime": 0.05, "ticks": 0,
        "mins": [-15, -15, -24], "maxs": [15, 15, 32]}}]})
    .to_string();
    let reply = ureq::post(&format!("{}/v1/worlds/arena/trace", server.base))
        .config()
        .http_status_as_error(false)
        .build()
        .header("Content-Type", "application/json")
        .send(&bad)
        .expect("HTTP answers");
    assert_eq!(reply.status().as_u16(), 400);
    let reply: serde_json::Value =
        serde_json::from_str(&reply.into_body().read_to_string().unwrap()).unwrap();
    assert_eq!(reply["error"]["code"], "bad_ticks");
    assert_eq!(reply["error"]["query_index"], 1);
}

/// A movement line naming a registered hull answers as the same line with
/// the hull's box, bit for bit (traced through the hull's tree instead).
#[test]
fn hull_moves_answer_as_their_box() {
    use bspq::compile::CompileOptions;
    use bspq::world::HullSpec;
    let source = std::fs::read(common::map_path("q3dm6ish")).unwrap();
    let options = CompileOptions {
        hulls: vec![HullSpec {
            name: "stand".into(),
            mins: PLAYER_MINS.to_array(),
            maxs: PLAYER_MAXS.to_array(),
        }],
        ..CompileOptions::default()
    };
    let map =
        Map::from_data(bspq::map::compile_source(&source, "q3dm6ish", &options).unwrap()).unwrap();
    let boxed: Vec<String> = mixed_lines("q3dm6ish")
        .into_iter()
        .filter(|l| l.contains(r#""mins":[-15,-15,-24],"maxs":[15,15,32]"#))
        .collect();
    assert!(boxed.len() > 500);
    let hulled: Vec<String> = boxed
        .iter()
        .map(|l| {
            l.replace(
                r#""mins":[-15,-15,-24],"maxs":[15,15,32]"#,
                r#""hull":"stand""#,
            )
        })
        .collect();
    let by_box: Vec<String> = answer_lines(&map, &boxed, 2)
        .iter()
        .map(Answer::to_json)
        .collect();
    let by_hull: Vec<String> = answer_lines(&map, &hulled, 2)
        .iter()
        .map(Answer::to_json)
        .collect();
    assert_eq!(by_hull, by_box);

    // A body made from this world's hull moves through a world without
    // it as its box.
    let plain = load_world("q3dm6ish", true);
    let body = Body::hull(&map.view(), "stand", MASK_PLAYERSOLID).unwrap();
    let mut scratch = Scratch::new();
    let at = Vec3::new(560.0, -60.0, -39.875);
    assert_eq!(
        movement::ground(&plain.view(), &body, at, &mut scratch),
        movement::ground(&plain.view(), &player(), at, &mut scratch)
    );
}

#[test]
fn predictions_stop_on_contents_and_out_of_range() {
    let map = load_world("q3dm6ish", true);
    // Another player's box ahead, which a box colliding with solid only
    // walks into: the prediction stops once the boxes overlap.
    let scene = scene_of(
        &map,
        vec![box_entity(
            9,
            VOID + Vec3::new(100.0, 0.0, 0.0),
            PLAYER_MINS,
            PLAYER_MAXS,
        )],
    );
    let collider = InScene {
        scene: &scene,
        pass: 1,
    };
    let ghost = Body::boxed(PLAYER_MINS, PLAYER_MAXS, bspq::MASK_SOLID).unwrap();
    let walk = PredictQuery::new(
        Motion {
            origin: VOID,
            velocity: Vec3::new(320.0, 0.0, 0.0),
        },
        0.05,
        ghost.clone(),
        100,
    )
    .unwrap()
    .with_stops(StopEvents {
        contents: Some(bspq::contents::CONTENTS_BODY),
        ..StopEvents::default()
    })
    .unwrap();
    let met = movement::predict(&collider, &walk, &mut Scratch::new());
    assert_eq!(met.event, Event::Contents, "{met:?}");
    // 16 units a tick: the boxes (30 wide, 100 apart) overlap after tick 5.
    assert_eq!(met.tick, 5);

    // Falling through the void under the strongest gravity for whole
    // seconds: too fast to move after the second tick.
    let drop = PredictQuery::new(
        Motion {
            origin: VOID,
            velocity: Vec3::ZERO,
        },
        1.0,
        ghost,
        1000,
    )
    .unwrap()
    .with_gravity(movement::MAX_GRAVITY)
    .unwrap();
    let fell = movement::predict(&collider, &drop, &mut Scratch::new());
    assert_eq!(fell.event, Event::OutOfRange, "{fell:?}");
    assert_eq!(fell.tick, 2);
}
