//! Floor grids: every cell is the single box trace it stands for (the
//! drop, and the standing and crouching boxes placed where it rests), and
//! the HTTP route streams the same cells.

use crate::common;
use bspq::contents::MASK_PLAYERSOLID;
use bspq::movement::MIN_WALK_NORMAL;
use bspq::query::floor::{FloorBand, FloorRequest, CROUCH_MAXS, PLAYER_MAXS, PLAYER_MINS};
use bspq::service::Limits;
use bspq::trace::BatchOptions;
use bspq::{TraceQuery, Vec3};
use common::server::TestServer;

fn request(spacing: f32) -> FloorRequest {
    FloorRequest {
        from: [-880.0, -780.0],
        to: [780.0, 750.0],
        spacing,
        top: 600.0,
        bottom: None,
        mins: None,
        maxs: None,
        mask: None,
        ..Default::default()
    }
}

/// All bands of a grid, through the library.
fn bands(map: &bspq::Map, request: &FloorRequest) -> Vec<FloorBand> {
    let world = map.view();
    let grid = request.check(&world).expect("a valid grid");
    let mut out = Vec::new();
    let mut row = 0;
    while row < grid.rows {
        let band = grid
            .band(&world, row, &BatchOptions::default())
            .expect("band");
        row += band.rows;
        out.push(band);
    }
    out
}

#[test]
fn every_cell_is_its_single_box_trace() {
    let map = common::load_world("q3dm6ish", true);
    let request = request(12.0);
    let grid = request.check(&map.view()).expect("grid");
    let bands = bands(&map, &request);
    assert!(bands.len() > 1, "the grid spans several bands");
    let bottom = map.view().mins[2] - 1.0;
    let mins = Vec3::from_array(PLAYER_MINS);
    let maxs = Vec3::from_array(PLAYER_MAXS);
    let mut heights = vec![None; grid.cells()];
    let (mut walkable, mut standing, mut crouch_only) = (0, 0, 0);
    for band in &bands {
        for k in 0..band.floor.len() {
            let cell = band.first_row * grid.columns + k;
            let (column, row) = (cell % grid.columns, cell / grid.columns);
            let [x, y] = grid.point(column, row);
            let drop = TraceQuery::boxed(
                Vec3::new(x, y, request.top),
                Vec3::new(x, y, bottom),
                mins,
                maxs,
                MASK_PLAYERSOLID,
            )
            .expect("query");
            let single = map.trace(&drop);
            let floor = (!single.startsolid && single.fraction < 1.0).then_some(single.endpos.z);
            assert_eq!(band.floor[k], floor, "cell {column},{row}");
            assert_eq!(band.normal[k], single.normal.to_array());
            assert_eq!(band.startsolid[k], single.startsolid);
            assert_eq!(band.contents[k], single.contents);
            assert_eq!(band.surface_flags[k], single.surface_flags);
            assert_eq!(
                band.walkable[k],
                floor.is_some() && single.normal.z >= MIN_WALK_NORMAL
            );
            heights[cell] = floor;
            let fits = |top: [f32; 3]| {
                floor.map(|z| {
                    let at = Vec3::new(x, y, z);
                    let placed =
                        TraceQuery::boxed(at, at, mins, Vec3::from_array(top), MASK_PLAYERSOLID)
                            .expect("query");
                    !map.trace(&placed).startsolid
                })
            };
            assert_eq!(band.stand[k], fits(PLAYER_MAXS).unwrap_or(false));
            assert_eq!(band.crouch[k], fits(CROUCH_MAXS).unwrap_or(false));
            walkable += band.walkable[k] as usize;
            standing += band.stand[k] as usize;
            crouch_only += (band.crouch[k] && !band.stand[k]) as usize;
        }
    }
    // Steps: the neighbours' heights less the cell's.
    for band in &bands {
        for k in 0..band.floor.len() {
            let cell = band.first_row * grid.columns + k;
            let (c, r) = (
                (cell % grid.columns) as isize,
                (cell / grid.columns) as isize,
            );
            let at = |c: isize, r: isize| {
                (c >= 0 && r >= 0 && (c as usize) < grid.columns && (r as usize) < grid.rows)
                    .then(|| heights[r as usize * grid.columns + c as usize])
                    .flatten()
            };
            let step = |c2, r2| Some(at(c2, r2)? - heights[cell]?);
            assert_eq!(
                band.steps[k],
                [
                    step(c + 1, r),
                    step(c, r + 1),
                    step(c - 1, r),
                    step(c, r - 1)
                ]
            );
        }
    }
    assert!(
        walkable > 100 && standing > 100,
        "{walkable} walkable, {standing} standing"
    );
    eprintln!(
        "{} cells: {walkable} walkable, {standing} fit standing, {crouch_only} only crouching",
        grid.cells()
    );
}

#[test]
fn grids_are_bounded_and_checked() {
    let map = common::load_world("q3dm6ish", true);
    let world = map.view();
    assert!(request(0.5).check(&world).is_err(), "over a million cells");
    assert!(request(0.0).check(&world).is_err());
    let mut inverted = request(16.0);
    inverted.to = [-900.0, 0.0];
    assert!(inverted.check(&world).is_err());
    let mut low = request(16.0);
    low.bottom = Some(700.0);
    assert!(low.check(&world).is_err());
}

#[test]
fn the_floor_route_streams_the_library_cells() {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::copy(common::map_path("q3dm6ish"), dir.path().join("arena.bsp")).expect("copy");
    let server = TestServer::start(Some(dir.path().to_owned()), Limits::default());
    let map = common::load_world("q3dm6ish", true);
    let agent = crate::common::server::http_agent();
    let body = r#"{"from":[-880,-780],"to":[780,750],"spacing":12,"top":600}"#;
    let mut response = agent
        .post(format!("{}/v1/worlds/arena/floor", server.base))
        .send(body)
        .expect("answer");
    assert_eq!(response.status().as_u16(), 200);
    let text = response
        .body_mut()
        .with_config()
        .limit(64 << 20)
        .read_to_string()
        .expect("body");
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let want = bands(&map, &request(12.0));
    assert_eq!(lines.len(), want.len() + 1);
    assert_eq!(lines[0]["world"], "arena");
    let cells = lines[0]["cells"].as_u64().expect("cells");
    let mut done = 0;
    for (line, band) in lines[1..].iter().zip(&want) {
        done += band.floor.len() as u64;
        assert_eq!(line["done"].as_u64(), Some(done));
        assert_eq!(line["total"].as_u64(), Some(cells));
        // Through text, as the server writes it (f32 values as f32 print).
        let mut expected: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(band).expect("band json")).expect("json");
        let got = line.clone();
        expected["done"] = done.into();
        expected["total"] = cells.into();
        assert_eq!(got, expected);
    }
    assert_eq!(done, cells);
    // Too many cells: refused before the answer starts, with the error table's status.
    let too_many = r#"{"from":[-880,-780],"to":[780,750],"spacing":0.5,"top":600}"#;
    let mut response = agent
        .post(format!("{}/v1/worlds/arena/floor", server.base))
        .send(too_many)
        .expect("answer");
    assert_eq!(response.status().as_u16(), 400);
    let error: serde_json::Value =
        serde_json::from_str(&response.body_mut().read_to_string().expect("body")).expect("json");
    assert_eq!(error["error"]["code"], "grid_too_large");
}

#[test]
fn the_floor_command_prints_the_library_cells() {
    let map = common::load_world("q3dm6ish", true);
    let out = common::bspq_stdout([
        "floor",
        common::map_path("q3dm6ish").to_str().expect("path"),
        r#"{"from":[-880,-780],"to":[780,750],"spacing":12,"top":600}"#,
    ]);
    let lines: Vec<&str> = out.lines().collect();
    let want = bands(&map, &request(12.0));
    assert_eq!(lines.len(), want.len() + 1);
    let header: serde_json::Value = serde_json::from_str(lines[0]).expect("header");
    assert_eq!(header["world"], "q3dm6ish");
    assert_eq!(header["cells"].as_u64(), Some(139 * 128));
    // The content that answers, as a server names it.
    let hash = format!("{:016x}", map.view().info.source_hash);
    assert_eq!(header["source_hash"], hash.as_str());
    for (line, band) in lines[1..].iter().zip(&want) {
        let got: serde_json::Value = serde_json::from_str(line).expect("band line");
        let expected: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(band).expect("json")).expect("json");
        assert_eq!(got["floor"], expected["floor"]);
        assert_eq!(got["steps"], expected["steps"]);
        assert_eq!(got["stand"], expected["stand"]);
    }
}

/// q3dm6ish compiled with an onion hull "wide" (a box unlike the player's,
/// so the cells' feet are its own).
fn hulled() -> bspq::Map {
    let source = std::fs::read(common::map_path("q3dm6ish")).expect("map");
    let data = bspq::map::compile_source(
        &source,
        "q3dm6ish",
        &bspq::compile::CompileOptions {
            hulls: vec![bspq::world::HullSpec {
                name: "wide".into(),
                mins: [-24.0, -24.0, -16.0],
                maxs: [24.0, 24.0, 16.0],
            }],
            ..Default::default()
        },
    )
    .expect("compiles");
    bspq::Map::from_data(data).expect("world")
}

/// The answer of one query line, as `bspq trace` answers it.
fn single_line(world: &bspq::trace::Kernel, line: serde_json::Value) -> bspq::query::TraceAnswer {
    let parsed = bspq::query::QueryLine::parse(&line.to_string()).expect("a query line");
    let request = parsed.request_in(world).expect("a valid line");
    let answer = bspq::query::answer_request(world, &mut bspq::trace::Scratch::new(), &request);
    match answer {
        bspq::query::Answer::Trace(t) => t,
        other => panic!("{line}: not a trace answer: {other:?}"),
    }
}

/// Asserts every cell of `request`'s grid is the single trace line of its
/// drop (`shape` holds the line's shape fields), and its fits are the
/// player boxes placed with their feet `feet` below where the drop rests;
/// returns how many cells have a floor.
fn assert_cells_are_single_lines(
    world: &bspq::trace::Kernel,
    request: &FloorRequest,
    shape: serde_json::Value,
    feet: f32,
) -> usize {
    let grid = request.check(world).expect("grid");
    let bottom = world.mins[2] - 1.0;
    let mask = request.mask.unwrap_or(MASK_PLAYERSOLID);
    let mut floors = 0;
    let mut row = 0;
    while row < grid.rows {
        let band = grid
            .band(world, row, &BatchOptions::default())
            .expect("band");
        for k in 0..band.floor.len() {
            let cell = band.first_row * grid.columns + k;
            let [x, y] = grid.point(cell % grid.columns, cell / grid.columns);
            let mut line = serde_json::json!({"start": [x, y, request.top], "end": [x, y, bottom], "mask": mask});
            for (key, value) in shape.as_object().expect("fields") {
                line[key] = value.clone();
            }
            let single = single_line(world, line.clone());
            let floor = (!single.startsolid && single.fraction < 1.0).then_some(single.endpos[2]);
            assert_eq!(band.floor[k], floor, "{line}");
            assert_eq!(band.normal[k], single.normal, "{line}");
            assert_eq!(band.startsolid[k], single.startsolid, "{line}");
            assert_eq!(band.contents[k], single.contents, "{line}");
            assert_eq!(band.surface_flags[k], single.surface_flags, "{line}");
            let fits = |top: [f32; 3]| {
                floor.is_some_and(|z| {
                    let at = [x, y, z + feet - PLAYER_MINS[2]];
                    let placed = serde_json::json!({"start": at, "end": at, "mins": PLAYER_MINS, "maxs": top, "mask": mask});
                    !single_line(world, placed).startsolid
                })
            };
            assert_eq!(band.stand[k], fits(PLAYER_MAXS), "{line}");
            assert_eq!(band.crouch[k], fits(CROUCH_MAXS), "{line}");
            floors += floor.is_some() as usize;
        }
        row += band.rows;
    }
    floors
}

#[test]
fn cells_of_hulls_and_shapes_are_their_single_trace_lines() {
    let map = hulled();
    let world = map.view();
    let grid = |shape: serde_json::Value| -> FloorRequest {
        let mut body =
            serde_json::json!({"from": [-880, -780], "to": [780, 750], "spacing": 40, "top": 600});
        for (key, value) in shape.as_object().expect("fields") {
            body[key] = value.clone();
        }
        serde_json::from_value(body).expect("a floor request")
    };
    let cases = [
        (serde_json::json!({"hull": "wide"}), -16.0),
        (
            serde_json::json!({"shape": {"sphere": {"radius": 12}}}),
            -12.0,
        ),
        (
            serde_json::json!({"shape": {"capsule": {"radius": 10, "half_height": 20}}, "exact": true}),
            -30.0,
        ),
        (
            serde_json::json!({"mins": [-8, -8, -4], "maxs": [8, 8, 40]}),
            -4.0,
        ),
    ];
    for (shape, feet) in cases {
        let floors =
            assert_cells_are_single_lines(&world, &grid(shape.clone()), shape.clone(), feet);
        assert!(floors > 50, "{shape}: {floors} cells with a floor");
    }
    // Refused as a trace line's shape is.
    let code = |shape: serde_json::Value| match grid(shape).check(&world) {
        Err(bspq::query::floor::FloorError::Shape(e)) => e.code(),
        other => panic!("{other:?}"),
    };
    assert_eq!(code(serde_json::json!({"hull": "prone"})), "unknown_hull");
    assert_eq!(
        code(serde_json::json!({"hull": "wide", "mins": [-1, -1, -1]})),
        "mixed_query"
    );
    assert_eq!(
        code(serde_json::json!({"shape": {"sphere": {"radius": 4}}, "maxs": [1, 1, 1]})),
        "mixed_query"
    );
    assert_eq!(
        code(serde_json::json!({"shape": {"sphere": {"radius": -4}}})),
        "bad_shape"
    );
}

/// A chunk's cells as the band they pack.
fn unpacked(chunk: &bspq::proto::v1::FloorChunk) -> FloorBand {
    use bspq::proto::v1::FloorFlag;
    let n = chunk.floors.len();
    let on = |k: usize, flag: FloorFlag| chunk.flags[k] & flag as u32 != 0;
    let steps = [
        FloorFlag::StepEast,
        FloorFlag::StepNorth,
        FloorFlag::StepWest,
        FloorFlag::StepSouth,
    ];
    FloorBand {
        first_row: chunk.first_row as usize,
        rows: chunk.band_rows as usize,
        floor: (0..n)
            .map(|k| on(k, FloorFlag::Floor).then_some(chunk.floors[k]))
            .collect(),
        normal: chunk
            .normals
            .chunks_exact(3)
            .map(|v| [v[0], v[1], v[2]])
            .collect(),
        walkable: (0..n).map(|k| on(k, FloorFlag::Walkable)).collect(),
        startsolid: (0..n).map(|k| on(k, FloorFlag::Startsolid)).collect(),
        contents: chunk.contents.clone(),
        surface_flags: chunk.surface_flags.clone(),
        stand: (0..n).map(|k| on(k, FloorFlag::Stand)).collect(),
        crouch: (0..n).map(|k| on(k, FloorFlag::Crouch)).collect(),
        steps: (0..n)
            .map(|k| std::array::from_fn(|d| on(k, steps[d]).then_some(chunk.steps[4 * k + d])))
            .collect(),
    }
}

/// A worlds directory with the bundled map as `arena` and its hull
/// compile as `hulled`.
fn worlds_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::copy(common::map_path("q3dm6ish"), dir.path().join("arena.bsp")).expect("copy");
    std::fs::write(dir.path().join("hulled.bspq"), hulled().to_file_bytes()).expect("write");
    dir
}

/// The chunks of one `Floor` call.
async fn floor_chunks(
    client: &mut bspq::proto::v1::collision_client::CollisionClient<tonic::transport::Channel>,
    request: bspq::proto::v1::FloorRequest,
) -> Result<Vec<bspq::proto::v1::FloorChunk>, tonic::Status> {
    let mut stream = client.floor(request).await?.into_inner();
    let mut chunks = Vec::new();
    while let Some(chunk) = stream.message().await? {
        chunks.push(chunk);
    }
    Ok(chunks)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_floor_rpc_streams_the_library_cells() {
    use bspq::proto::v1 as pb;
    let dir = worlds_dir();
    let server = TestServer::start(Some(dir.path().to_owned()), Limits::default());
    let mut client = server.collision().await;
    let grid = pb::FloorRequest {
        world: "arena".into(),
        from_x: -880.0,
        from_y: -780.0,
        to_x: 780.0,
        to_y: 750.0,
        spacing: 12.0,
        top: 600.0,
        ..Default::default()
    };
    let map = common::load_world("q3dm6ish", true);
    let hulled_map = hulled();
    let hull_request = FloorRequest {
        spacing: 40.0,
        hull: Some("wide".into()),
        ..request(40.0)
    };
    let cases = [
        (grid.clone(), &map, request(12.0)),
        (
            pb::FloorRequest {
                world: "hulled".into(),
                spacing: 40.0,
                hull: "wide".into(),
                ..grid.clone()
            },
            &hulled_map,
            hull_request,
        ),
    ];
    for (message, map, library) in cases {
        let chunks = floor_chunks(&mut client, message.clone())
            .await
            .expect("streamed");
        let want = bands(map, &library);
        assert!(want.len() > 1 || message.hull == "wide");
        assert_eq!(chunks.len(), want.len());
        let total = library.check(&map.view()).expect("grid").cells() as u64;
        let mut done = 0;
        for (chunk, band) in chunks.iter().zip(&want) {
            done += band.floor.len() as u64;
            assert_eq!((chunk.done, chunk.total), (done, total));
            assert_eq!(chunk.world, message.world);
            assert_eq!(
                chunk.source_hash,
                format!("{:016x}", map.view().info.source_hash)
            );
            assert_eq!(&unpacked(chunk), band);
        }
        assert_eq!(done, total);
    }
    // Refused before the stream starts, with the error table's codes.
    let refused = |status: tonic::Status| {
        let body: serde_json::Value = serde_json::from_str(status.message()).expect("JSON");
        (
            status.code(),
            body["error"]["code"].as_str().map(str::to_owned),
        )
    };
    let cases = [
        (
            pb::FloorRequest {
                spacing: 0.5,
                ..grid.clone()
            },
            tonic::Code::InvalidArgument,
            "grid_too_large",
        ),
        (
            pb::FloorRequest {
                hull: "prone".into(),
                ..grid.clone()
            },
            tonic::Code::InvalidArgument,
            "unknown_hull",
        ),
        (
            pb::FloorRequest {
                spacing: -1.0,
                ..grid.clone()
            },
            tonic::Code::InvalidArgument,
            "malformed_request",
        ),
        (
            pb::FloorRequest {
                world: "nowhere".into(),
                ..grid.clone()
            },
            tonic::Code::NotFound,
            "unknown_world",
        ),
    ];
    for (message, code, name) in cases {
        let status = client.floor(message).await.expect_err("refused");
        assert_eq!(refused(status), (code, Some(name.to_owned())));
    }
}

/// A client that drops the stream after its first chunk stops the work:
/// the job ends (its traces leave the server's in-flight budget) having
/// made only the bands already buffered toward the client, far fewer than
/// the grid's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_floor_stream_stops_the_work() {
    use bspq::proto::v1 as pb;
    let dir = worlds_dir();
    let server = TestServer::start(Some(dir.path().to_owned()), Limits::default());
    let mut client = server.collision().await;
    // 1022 × 942 cells: 59 bands.
    let mut stream = client
        .floor(pb::FloorRequest {
            world: "arena".into(),
            from_x: -880.0,
            from_y: -780.0,
            to_x: 780.0,
            to_y: 750.0,
            spacing: 1.625,
            top: 600.0,
            ..Default::default()
        })
        .await
        .expect("streams")
        .into_inner();
    let first = stream.message().await.expect("a chunk").expect("a chunk");
    assert_eq!(first.total, 1022 * 942);
    assert!(
        server.service.admission.held() > 0,
        "the job holds its traces"
    );
    drop(stream);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while server.service.admission.held() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the job still runs a minute after its client left"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let made = server
        .metrics
        .queries
        .with_label_values(&["arena", "floor", "grpc"])
        .get();
    eprintln!(
        "{made} of {} cells made before the job stopped",
        first.total
    );
    assert!(made >= first.done, "{made}");
    assert!(made < first.total / 4, "{made} of {} cells", first.total);
}
