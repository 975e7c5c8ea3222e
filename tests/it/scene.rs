//! Scenes: the reference's server-side trace with entities (the committed
//! subsets of its answers, curves on and off), the same answers whatever
//! the batching and threads, entities that change nothing where nothing
//! meets them, and bad entities refused with the entity's index.

use crate::common;

use bspq::conformance::mismatch;
use bspq::map::Map;
use bspq::query::{Answer, QueryError, QueryLine, SceneStream};
use bspq::trace::BatchOptions;
use common::{load_set, load_world, MAPS};
use std::fmt::Write as _;

/// Answers scene lines as one stream, fed `chunk` lines at a time.
fn stream(map: &Map, lines: &[String], chunk: usize, threads: usize) -> Vec<String> {
    let mut stream = SceneStream::new(map);
    let options = BatchOptions::with_threads(threads);
    lines
        .chunks(chunk)
        .flat_map(|part| {
            let parsed = part.iter().map(|l| QueryLine::parse(l)).collect();
            stream.answer(parsed, &options)
        })
        .map(|a| match a {
            Ok(a) => a.to_json(),
            Err(e) => panic!("a committed scene line was refused: {e}"),
        })
        .collect()
}

fn check_map(map: &str, curves: bool) {
    let world = load_world(map, curves);
    let data = load_set(map, "scene", curves);
    let got = stream(&world, &data.queries, 512, 2);
    let mut failed = 0;
    let mut details = String::new();
    for (i, (g, e)) in got.iter().zip(&data.expected).enumerate() {
        let expected: Answer = serde_json::from_str(e).unwrap();
        let answer: Answer = serde_json::from_str(g).unwrap();
        if let Some(why) = mismatch(&expected, &answer) {
            failed += 1;
            if failed <= 8 {
                let _ = write!(
                    details,
                    "\n  line {} [{}]: {why}\n    query    {}\n    expected {e}\n    got      {g}",
                    i + 1,
                    data.kinds[i],
                    data.queries[i]
                );
            }
        }
    }
    assert_eq!(
        failed,
        0,
        "{map} (curves {curves}): {failed} of {} scene answers differ from the reference:{details}",
        got.len()
    );
}

#[test]
fn scenes_match_the_reference_curves_on() {
    for map in MAPS {
        check_map(map, true);
    }
}

#[test]
fn scenes_match_the_reference_curves_off() {
    for map in MAPS {
        check_map(map, false);
    }
}

#[test]
fn batching_and_threads_do_not_change_a_bit() {
    let world = load_world("q3dm6ish", true);
    let lines = load_set("q3dm6ish", "scene", true).queries;
    let one = stream(&world, &lines, lines.len(), 1);
    for (chunk, threads) in [(1, 1), (7, 2), (300, 2)] {
        assert_eq!(
            stream(&world, &lines, chunk, threads),
            one,
            "chunks of {chunk}, {threads} threads"
        );
    }
}

/// Scene lines with one more entity that no query comes near: every answer
/// stays the same (the scene line's own answer counts one more entity).
#[test]
fn an_entity_where_nothing_is_changes_nothing() {
    let world = load_world("oa_ctf2", true);
    let lines = load_set("oa_ctf2", "scene", true).queries;
    let with_far: Vec<String> = lines
        .iter()
        .map(|l| {
            let mut line: serde_json::Value = serde_json::from_str(l).unwrap();
            let Some(entities) = line.get_mut("entities").and_then(|e| e.as_array_mut()) else {
                return l.clone();
            };
            let used: Vec<u64> = entities.iter().filter_map(|e| e["id"].as_u64()).collect();
            let free = (0..1022).find(|id| !used.contains(id)).unwrap();
            entities.push(serde_json::json!({
                "id": free,
                "box": {"mins": [-64, -64, -64], "maxs": [64, 64, 64]},
                "origin": [900000, 900000, 900000],
                "contents": 4294967295u32,
            }));
            line.to_string()
        })
        .collect();
    let plain = stream(&world, &lines, 256, 2);
    let more = stream(&world, &with_far, 256, 2);
    for (i, (a, b)) in plain.iter().zip(&more).enumerate() {
        if lines[i].starts_with(r#"{"entities""#) {
            continue;
        }
        assert_eq!(a, b, "line {}: {}", i + 1, lines[i]);
    }
}

/// With an empty scene every trace answers as the world alone, naming the
/// world when it stops the move and nothing otherwise.
#[test]
fn an_empty_scene_answers_as_the_world() {
    let world = load_world("aggressor", true);
    let data = load_set("aggressor", "rays", true);
    let mut lines = vec![r#"{"entities":[]}"#.to_owned()];
    lines.extend(data.queries.iter().cloned());
    let got = stream(&world, &lines, 1000, 2);
    assert_eq!(got[0], r#"{"entities":0}"#);
    let mut scratch = bspq::trace::Scratch::new();
    for (q, g) in data.queries.iter().zip(&got[1..]) {
        let alone = bspq::query::answer(&world.view(), &mut scratch, &common::parse_query(q));
        let (Answer::Trace(alone), Ok(Answer::Trace(scened))) = (alone, serde_json::from_str(g))
        else {
            panic!("not traces: {g}");
        };
        let entity = if alone.fraction < 1.0 { 1022 } else { 1023 };
        assert_eq!(scened.entity, Some(entity), "{q}");
        assert_eq!(
            Answer::Trace(alone).to_json(),
            Answer::Trace(bspq::query::TraceAnswer {
                entity: None,
                ..scened
            })
            .to_json(),
            "{q}"
        );
    }
}

#[test]
fn bad_entities_are_refused_naming_the_entity() {
    let world = load_world("q3dm6ish", true);
    let models = world.models().len();
    let player = r#"{"id":1,"box":{"mins":[-15,-15,-24],"maxs":[15,15,32]},"origin":[0,0,0]}"#;
    let cases = [
        (
            format!(
                r#"{{"entities":[{player},{{"id":2,"model":"*{}"}}]}}"#,
                models + 1
            ),
            "unknown_model",
            "entity 1",
        ),
        (
            format!(r#"{{"entities":[{player},{{"id":1022,"model":"*1"}}]}}"#),
            "bad_entity_id",
            "entity 1",
        ),
        (
            format!(r#"{{"entities":[{player},{player}]}}"#),
            "bad_entity_id",
            "entity 1",
        ),
        (
            r#"{"entities":[{"id":3,"box":{"mins":[1,0,0],"maxs":[0,1,1]}}]}"#.to_owned(),
            "mins_above_maxs",
            "entity 0",
        ),
        (
            r#"{"entities":[{"id":3,"model":"*1","origin":[0,0,1e39]}]}"#.to_owned(),
            "bad_coordinate",
            "entity 0",
        ),
        (
            r#"{"entities":[{"id":3,"model":"door"}]}"#.to_owned(),
            "malformed_entity",
            "entity 0",
        ),
        (
            r#"{"entities":[{"id":3}]}"#.to_owned(),
            "malformed_entity",
            "entity 0",
        ),
        (
            r#"{"entities":[],"start":[0,0,0],"end":[1,1,1]}"#.to_owned(),
            "mixed_query",
            "",
        ),
    ];
    assert!(models > 0, "q3dm6ish has inline models");
    for (line, code, names) in cases {
        let mut stream = SceneStream::new(&world);
        let answers = stream.answer(
            vec![QueryLine::parse(&line)],
            &BatchOptions::with_threads(1),
        );
        let err: &QueryError = answers[0]
            .as_ref()
            .err()
            .unwrap_or_else(|| panic!("accepted: {line}"));
        assert_eq!(err.code(), code, "{line}: {err}");
        assert!(err.to_string().contains(names), "{line}: {err}");
    }
}

#[test]
fn a_refused_scene_leaves_the_last_one() {
    let world = load_world("q3dm6ish", true);
    let lines = [
        r#"{"entities":[{"id":5,"box":{"mins":[-16,-16,-16],"maxs":[16,16,16]},"origin":[0,0,0]}]}"#,
        r#"{"entities":[{"id":5,"model":"*999"}]}"#,
        r#"{"point":[0,0,0]}"#,
    ];
    let mut stream = SceneStream::new(&world);
    let answers = stream.answer(
        lines.iter().map(|l| QueryLine::parse(l)).collect(),
        &BatchOptions::with_threads(1),
    );
    assert!(answers[1].is_err());
    let Ok(Answer::Point(p)) = &answers[2] else {
        panic!("{:?}", answers[2]);
    };
    assert_ne!(
        p.contents & bspq::contents::CONTENTS_BODY,
        0,
        "the first scene's box holds the point"
    );
}

/// A missile's box may be a point: a player's box sweep still meets it
/// where the two boxes touch, backed off by 1/8 unit as every hit is.
#[test]
fn a_point_sized_box_is_met_by_a_box_sweep() {
    let world = load_world("q3dm6ish", true);
    let far = 500_000.0;
    let lines = [
        format!(
            r#"{{"entities":[{{"id":7,"box":{{"mins":[0,0,0],"maxs":[0,0,0]}},"origin":[{far},0,0]}}]}}"#
        ),
        format!(
            r#"{{"start":[{},0,0],"end":[{},0,0],"mins":[-15,-15,-24],"maxs":[15,15,32],"mask":33554433}}"#,
            far - 100.0,
            far + 100.0
        ),
        format!(
            r#"{{"start":[{},0,0],"end":[{},0,0],"mask":33554433}}"#,
            far - 100.0,
            far + 100.0
        ),
    ];
    let got = stream(&world, &lines, 3, 1);
    let hit: bspq::query::TraceAnswer = serde_json::from_str(&got[1]).unwrap();
    assert_eq!(hit.entity, Some(7));
    assert_eq!(hit.fraction, (85.0 - 0.125) / 200.0);
    assert_eq!(hit.normal, [-1.0, 0.0, 0.0]);
    assert_eq!(hit.contents, bspq::contents::CONTENTS_BODY);
    // A ray along the same line passes through a box of no size.
    let ray: bspq::query::TraceAnswer = serde_json::from_str(&got[2]).unwrap();
    assert_eq!((ray.fraction, ray.entity), (1.0, Some(1023)));
}

/// A model yawed 90° answers a move as the unturned model answers the move
/// turned back: rays, and boxes square in x and y (which a quarter turn
/// leaves unchanged, so the reference's unturned box is exact there). The
/// normal comes back turned. An independent check of the rotation, where
/// the reference data has few such moves.
#[test]
fn a_quarter_turned_model_answers_as_the_turned_back_move() {
    let world = load_world("q3dm6ish", true);
    let mut rng = common::Rng::new(90);
    let mut compared = 0;
    for (k, model) in world.models().iter().enumerate() {
        let (lo, hi) = model.bounds();
        let origin = bspq::Vec3::new(4000.0, -3000.0, 2000.0); // in the void
        let place = |yaw: f32| {
            let scene = bspq::scene::Scene::new(vec![bspq::scene::Entity {
                id: 5,
                shape: bspq::scene::EntityShape::Model(k + 1),
                origin,
                angles: bspq::Vec3::new(0.0, yaw, 0.0),
                contents: u32::MAX,
                owner: bspq::scene::ENTITY_NONE,
            }])
            .expect("a valid scene");
            bspq::scene::PlacedScene::new(&world, &scene).expect("placed")
        };
        let (turned, plain) = (place(90.0), place(0.0));
        // World -> the turned model's frame and back, for a quarter turn.
        let into = |p: bspq::Vec3| bspq::Vec3::new(p.y, -p.x, p.z);
        let out = |p: bspq::Vec3| bspq::Vec3::new(-p.y, p.x, p.z);
        let mut scratch = bspq::trace::Scratch::new();
        for i in 0..200 {
            let pick = |rng: &mut common::Rng| {
                let t = bspq::Vec3::new(rng.unit(), rng.unit(), rng.unit());
                (lo - bspq::Vec3::splat(48.0)) + (hi - lo + bspq::Vec3::splat(96.0)) * t
            };
            let (a, b) = (pick(&mut rng), pick(&mut rng));
            let half = [0.0, 8.0][i % 2];
            let (mins, maxs) = (
                bspq::Vec3::new(-half, -half, -4.0 * half),
                bspq::Vec3::new(half, half, 2.0 * half),
            );
            let query = |s, e| bspq::TraceQuery::boxed(s, e, mins, maxs, u32::MAX).unwrap();
            // The move, placed around the turned model, and the same move in
            // the model's frame around the unturned one.
            let (ta, tb) = (origin + out(a), origin + out(b));
            let (got, e1) = turned.trace(&query(ta, tb), 1023, &mut scratch);
            let (want, e2) = plain.trace(&query(origin + a, origin + b), 1023, &mut scratch);
            assert_eq!(e1 == 5, e2 == 5, "model *{}: move {i}", k + 1);
            assert_eq!(
                (got.startsolid, got.allsolid),
                (want.startsolid, want.allsolid)
            );
            assert!(
                (got.fraction - want.fraction).abs() < 1e-3,
                "*{}: {} vs {}",
                k + 1,
                got.fraction,
                want.fraction
            );
            if want.fraction < 1.0 && !want.allsolid {
                let n = into(got.normal);
                assert!(
                    n.dot(want.normal) > 0.9999,
                    "*{}: {n} vs {}",
                    k + 1,
                    want.normal
                );
            }
            compared += (e2 == 5) as usize;
        }
    }
    assert!(compared > 200, "only {compared} moves met a model");
}

/// q3dm6ish compiled with a player onion hull, and the same map with every
/// model's brushes and patches in model 0 (its brushes follow the world's).
fn with_and_without_movers(hulls: Vec<bspq::world::HullSpec>) -> (Map, Map) {
    let bytes = std::fs::read(common::map_path("q3dm6ish")).expect("map");
    let bsp = bspq::source::Q3Bsp::parse(&bytes).expect("parses");
    let options = bspq::compile::CompileOptions {
        hulls,
        ..Default::default()
    };
    let compile = |bsp: &bspq::source::Q3Bsp, name: &str| {
        Map::from_data(bspq::compile::compile_q3(bsp, name, &options).expect("compiles"))
            .expect("loads")
    };
    let world = compile(&bsp, "q3dm6ish");
    let mut merged = bsp.clone();
    let last = merged.models.last().copied().expect("models");
    for pair in merged.models.windows(2) {
        assert_eq!(
            pair[1].first_brush,
            pair[0].first_brush + pair[0].num_brushes
        );
    }
    merged.models[0].num_brushes = last.first_brush + last.num_brushes;
    merged.models[0].num_surfaces = last.first_surface + last.num_surfaces;
    merged.models.truncate(1);
    (world, compile(&merged, "static"))
}

/// The map's movers where the map has them (every contents, so every mask
/// meets them).
fn movers_at_home(world: &Map) -> bspq::scene::Scene {
    let movers: Vec<bspq::scene::Entity> = (1..=world.models().len())
        .map(|k| bspq::scene::Entity {
            id: k as u32,
            shape: bspq::scene::EntityShape::Model(k),
            origin: bspq::Vec3::ZERO,
            angles: bspq::Vec3::ZERO,
            contents: u32::MAX,
            owner: bspq::scene::ENTITY_NONE,
        })
        .collect();
    bspq::scene::Scene::new(movers).expect("scene")
}

/// Every other query kind with the movers at home answers as the static
/// world does: plane-shifted spheres and capsules (against moved models'
/// own bevels), any-hit, onion hull traces (the world's onion tree, then
/// the entities with the hull's box) and point contents. Moves that start
/// inside something are left out, as above, and so are the few where a
/// mover and the world are met at the same fraction (a tie each side
/// breaks its own way).
#[test]
fn movers_at_home_answer_every_query_kind_as_static_brushes() {
    let hull = bspq::world::HullSpec {
        name: "player".into(),
        mins: [-15.0, -15.0, -24.0],
        maxs: [15.0, 15.0, 32.0],
    };
    let (world, static_world) = with_and_without_movers(vec![hull.clone()]);
    let static_view = static_world.view().without_source_tree();
    let scene = movers_at_home(&world);
    let placed = bspq::scene::PlacedScene::new(&world, &scene).expect("placed");
    let mut scratch = bspq::trace::Scratch::new();
    let as_answer = |r: &bspq::TraceResult| Answer::Trace(bspq::query::TraceAnswer::from(r));
    let shapes = [
        bspq::trace::Shape::Sphere { radius: 12.0 },
        bspq::trace::Shape::Capsule {
            radius: 10.0,
            half_height: 18.0,
        },
    ];
    let mut counts = [0usize; 5];
    let (mut by_mover, mut ties) = (0, 0);
    for line in load_set("q3dm6ish", "scene", true).queries {
        let query = match line.starts_with(r#"{"entities""#) {
            true => continue,
            false => common::parse_query(&line),
        };
        let q = match query {
            bspq::query::Query::Point(p) => {
                let got = placed.point_contents(p, 1023);
                assert_eq!(got, bspq::trace::point_contents(&static_view, p), "{line}");
                counts[0] += 1;
                continue;
            }
            bspq::query::Query::Trace(q) => q,
        };
        let want = bspq::trace::trace(&static_view, &q, &mut scratch);
        if !want.startsolid && !placed.trace(&q, 1023, &mut scratch).0.startsolid {
            let hit = placed.any_hit(&q, 1023, &mut scratch);
            assert_eq!(hit, want.fraction < 1.0, "any-hit: {line}");
            counts[1] += 1;
        }
        for (k, shape) in shapes.iter().enumerate() {
            let shaped = bspq::TraceQuery::shaped(q.start(), q.end(), shape.clone(), q.mask())
                .expect("a valid shape query");
            let want = bspq::trace::trace(&static_view, &shaped, &mut scratch);
            let (got, entity) = placed.trace(&shaped, 1023, &mut scratch);
            if got.startsolid || want.startsolid {
                continue;
            }
            let why = mismatch(&as_answer(&want), &as_answer(&got));
            if why.is_some() && got.fraction == want.fraction {
                ties += 1;
                continue;
            }
            assert!(
                why.is_none(),
                "{shape:?}: {line}: {why:?} (entity {entity})"
            );
            counts[2 + k] += 1;
            by_mover += (entity < 1022) as usize;
        }
        let hull_query = |map: &bspq::trace::Kernel| {
            bspq::trace::HullQuery::new(map, "player", q.start(), q.end(), q.mask())
                .expect("the world has the hull")
        };
        let want = bspq::trace::trace_hull(&static_view, &hull_query(&static_view), &mut scratch);
        let through_world = hull_query(&world.view());
        let first = bspq::trace::trace_hull(&world.view(), &through_world, &mut scratch);
        let (got, entity) = placed.trace_after(first, through_world.query(), 1023, &mut scratch);
        if got.startsolid || want.startsolid {
            continue;
        }
        let why = mismatch(&as_answer(&want), &as_answer(&got));
        if why.is_some() && got.fraction == want.fraction {
            ties += 1;
            continue;
        }
        assert!(why.is_none(), "hull: {line}: {why:?} (entity {entity})");
        counts[4] += 1;
        by_mover += (entity < 1022) as usize;
    }
    assert!(counts.iter().all(|&n| n > 150), "{counts:?} compared");
    assert!(by_mover > 50, "{by_mover} answered by a mover");
    // A mover's surface and the world's met at the same fraction: one
    // world picks by its own order, the server's trace keeps the world's.
    assert!(
        ties * 100 < counts[2..].iter().sum::<usize>(),
        "{ties} ties"
    );
}

/// The map's movers placed where the map has them answer as a world in
/// which their brushes are static: the same map compiled with every model's
/// brushes and patches in model 0 (moves that start inside something are
/// left out: there the server's trace and one world's differ by design, as
/// the world's early stop at fraction 0 and its all-solid rules show).
#[test]
fn movers_at_home_answer_as_static_brushes() {
    let (world, static_world) = with_and_without_movers(Vec::new());
    let static_view = static_world.view().without_source_tree();
    let scene = movers_at_home(&world);
    let placed = bspq::scene::PlacedScene::new(&world, &scene).expect("placed");
    let mut scratch = bspq::trace::Scratch::new();
    let (mut compared, mut by_mover) = (0, 0);
    // The scene set's moves pass near the movers (its scene lines are not
    // moves, and its passes are not used: no entity here makes a move).
    for set in ["rays", "boxes", "extras", "scene"] {
        for line in load_set("q3dm6ish", set, true).queries {
            if line.starts_with(r#"{"entities""#) {
                continue;
            }
            let bspq::query::Query::Trace(q) = common::parse_query(&line) else {
                continue;
            };
            let (got, entity) = placed.trace(&q, 1023, &mut scratch);
            let want = bspq::trace::trace(&static_view, &q, &mut scratch);
            if got.startsolid || want.startsolid {
                continue;
            }
            let as_answer =
                |r: &bspq::TraceResult| Answer::Trace(bspq::query::TraceAnswer::from(r));
            let why = mismatch(&as_answer(&want), &as_answer(&got));
            assert!(why.is_none(), "{set}: {line}: {why:?} (entity {entity})");
            compared += 1;
            by_mover += (entity < 1022) as usize;
        }
    }
    assert!(
        compared > 5000 && by_mover > 100,
        "{compared} compared, {by_mover} by a mover"
    );
}
