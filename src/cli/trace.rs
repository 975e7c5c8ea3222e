//! `bspq trace`: JSON query lines in, answer lines out — answered by the
//! kernel in process, or by a server over gRPC with `--server ADDR`.

use super::WorldArgs;
use anyhow::Context;
use bspq::contents::MASK_SOLID;
use bspq::proto::v1 as pb;
use bspq::query::{
    error_json, error_line, query_lines, Answer, EntityLine, HitAnswer, PointAnswer, QueryError,
    QueryLine, SceneAnswer, SceneStream, TraceAnswer,
};
use bspq::trace::BatchOptions;
use bspq::transport::grpc;
use clap::Args;
use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;

#[derive(Args)]
pub struct TraceArgs {
    #[command(flatten)]
    world: WorldArgs,
    /// Ask a bspq server over gRPC at ADDR (HOST:PORT or http://HOST:PORT)
    /// instead of loading the world: `--world` then names a world the server serves.
    #[arg(long, env = "BSPQ_SERVER", value_name = "ADDR", value_parser = super::address::server_url)]
    server: Option<String>,
    /// Lines answered per batch (locally, or per round of gRPC calls with `--server`).
    #[arg(long, default_value_t = 1024, value_parser = super::count_up_to::<{ super::MAX_BATCH }>)]
    batch: usize,
    /// Threads a local batch may use (default: all cores).
    #[arg(long, value_parser = super::count_up_to::<{ super::MAX_THREADS }>)]
    threads: Option<usize>,
}

pub fn run(args: TraceArgs) -> anyhow::Result<ExitCode> {
    if let Some(server) = &args.server {
        return run_remote(server, &args.world.world, args.batch);
    }
    let map = args.world.open()?;
    let options = args
        .threads
        .map_or_else(BatchOptions::default, BatchOptions::with_threads);
    let stdin = std::io::stdin().lock();
    let mut out = super::answers_out();
    let mut failed = 0usize;
    let mut lines = query_lines(stdin).enumerate();
    // `{"entities":[…]}` lines set the scene of the lines after them.
    let mut stream = SceneStream::new(&map);
    loop {
        let chunk = next_chunk(&mut lines, args.batch)?;
        if chunk.is_empty() {
            break;
        }
        let indices: Vec<usize> = chunk.iter().map(|(index, _)| *index).collect();
        let parsed = chunk
            .into_iter()
            .map(|(_, line)| line.and_then(|text| QueryLine::parse(&text)))
            .collect();
        for (index, answer) in indices.into_iter().zip(stream.answer(parsed, &options)) {
            match answer {
                Ok(a) => writeln!(out, "{}", a.to_json())?,
                Err(err) => {
                    failed += 1;
                    eprintln!("bspq: line {}: {err}", index + 1);
                    writeln!(out, "{}", error_json(&err, index))?;
                }
            }
        }
    }
    out.flush()?;
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// An input line and its (0-based) line number: its text, or why it has none.
type InputLine = (usize, Result<String, QueryError>);

/// Up to `batch` non-blank input lines with their line numbers; empty at
/// the end of the input.
fn next_chunk(
    lines: &mut impl Iterator<Item = (usize, std::io::Result<Result<String, QueryError>>)>,
    batch: usize,
) -> std::io::Result<Vec<InputLine>> {
    let mut chunk = Vec::new();
    for (index, line) in lines {
        let line = line?;
        if line.as_ref().is_ok_and(|text| text.trim().is_empty()) {
            continue;
        }
        chunk.push((index, line));
        if chunk.len() == batch {
            break;
        }
    }
    Ok(chunk)
}

/// Checks a query line as offline mode would, short of what only the
/// server's world knows (its hulls and models): hull lines are checked as
/// the ray of the same move.
fn check_query(line: &QueryLine) -> Result<(), QueryError> {
    if line.hull.is_some() {
        if line.mins.is_some()
            || line.maxs.is_some()
            || line.shape.is_some()
            || line.exact.is_some()
        {
            return Err(QueryError::HullWithShape);
        }
        QueryLine {
            hull: None,
            ..line.clone()
        }
        .request()?;
    } else {
        line.request()?;
    }
    line.pass().map(|_| ())
}

/// One input line of a chunk: its answer, or why it has none, once known.
enum Slot {
    Pending,
    Answer(String),
    /// A bad line: its number, why it is bad, and the error line written
    /// in its place (reported in line order, as offline mode does).
    Rejected {
        line_index: usize,
        message: String,
        json: String,
    },
}

impl Slot {
    fn rejected(line_index: usize, code: &str, message: String) -> Slot {
        Slot::Rejected {
            line_index,
            json: error_line(code, &message, line_index),
            message,
        }
    }
}

/// Lines are read in chunks of `batch`; each is checked locally (so bad
/// lines get the same error lines as offline). The queries of a chunk
/// between scene lines go to the server as one tick: a `Trace` call with a
/// shape table, per-query masks, passes and any-hit, and the points. A
/// scene line is sent alone first (the server checks its models), then
/// travels with every later call. Answers are printed in input order.
fn run_remote(server: &str, world: &str, batch: usize) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start runtime")?;
    runtime.block_on(async {
        let channel = tonic::transport::Endpoint::from_shared(server.to_owned())
            .with_context(|| format!("bad server URL {server:?}"))?
            .connect()
            .await
            .map_err(|err| {
                anyhow::anyhow!("cannot connect to {server}: {}", super::causes_once(&err))
            })?;
        let client = pb::collision_client::CollisionClient::new(channel)
            .max_decoding_message_size(usize::MAX)
            .max_encoding_message_size(usize::MAX);
        let mut remote = Remote {
            client,
            world: world.to_owned(),
            scene: None,
        };
        let stdin = std::io::stdin().lock();
        let mut out = super::answers_out();
        let mut failed = 0usize;
        let mut lines = query_lines(stdin).enumerate();
        loop {
            let chunk = next_chunk(&mut lines, batch)?;
            if chunk.is_empty() {
                break;
            }
            for slot in remote.answer_chunk(&chunk).await? {
                match slot {
                    Slot::Answer(answer) => writeln!(out, "{answer}")?,
                    Slot::Rejected {
                        line_index,
                        message,
                        json,
                    } => {
                        failed += 1;
                        eprintln!("bspq: line {}: {message}", line_index + 1);
                        writeln!(out, "{json}")?;
                    }
                    Slot::Pending => anyhow::bail!("a query got no answer"),
                }
            }
        }
        out.flush()?;
        Ok(if failed == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        })
    })
}

type Client = pb::collision_client::CollisionClient<tonic::transport::Channel>;

fn status_error(status: tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("server answered {:?}: {}", status.code(), status.message())
}

/// What the server said was wrong with a request (INVALID_ARGUMENT with
/// the JSON error body): the query it names, if one is to blame.
struct Rejected {
    index: Option<usize>,
    code: String,
    /// The message as offline mode words it (without the server's
    /// `query N: ` or `scene: `).
    message: String,
}

impl Rejected {
    fn from_status(status: &tonic::Status) -> Option<Rejected> {
        if status.code() != tonic::Code::InvalidArgument {
            return None;
        }
        let body: serde_json::Value = serde_json::from_str(status.message()).ok()?;
        let error = body.get("error")?;
        let index = match error.get("query_index") {
            Some(i) => Some(usize::try_from(i.as_u64()?).ok()?),
            None => None,
        };
        let message = error.get("message")?.as_str()?;
        let prefix = index.map_or_else(|| "scene: ".to_owned(), |i| format!("query {i}: "));
        Some(Rejected {
            index,
            code: error.get("code")?.as_str()?.to_owned(),
            message: message.strip_prefix(&prefix).unwrap_or(message).to_owned(),
        })
    }
}

/// A server session: the client and the scene set by the last good scene line.
struct Remote {
    client: Client,
    world: String,
    scene: Option<pb::Scene>,
}

impl Remote {
    async fn answer_chunk(&mut self, chunk: &[InputLine]) -> anyhow::Result<Vec<Slot>> {
        let mut slots = Vec::with_capacity(chunk.len());
        let mut tick = Vec::new();
        for (pos, (index, line)) in chunk.iter().enumerate() {
            let parsed = line.clone().and_then(|text| QueryLine::parse(&text));
            let checked = parsed.and_then(|line| match line.scene() {
                Some(scene) => scene.map(|_| line),
                None => check_query(&line).map(|()| line),
            });
            match checked {
                Err(err) => slots.push(Slot::Rejected {
                    line_index: *index,
                    message: err.to_string(),
                    json: error_json(&err, *index),
                }),
                Ok(line) => match &line.entities {
                    Some(entities) => {
                        self.answer_tick(std::mem::take(&mut tick), chunk, &mut slots)
                            .await?;
                        slots.push(self.set_scene(entities, *index).await?);
                    }
                    None => {
                        tick.push((pos, line));
                        slots.push(Slot::Pending);
                    }
                },
            }
        }
        self.answer_tick(tick, chunk, &mut slots).await?;
        Ok(slots)
    }

    /// Sends a scene alone; when the server places it, it is the scene of
    /// the calls after it.
    async fn set_scene(
        &mut self,
        entities: &[EntityLine],
        line_index: usize,
    ) -> anyhow::Result<Slot> {
        let scene = scene_message(entities);
        let request = pb::TraceRequest {
            world: self.world.clone(),
            scene: Some(scene.clone()),
            ..Default::default()
        };
        match self.client.trace(request).await {
            Ok(_) => {
                self.scene = Some(scene);
                Ok(Slot::Answer(
                    Answer::Scene(SceneAnswer {
                        entities: entities.len(),
                    })
                    .to_json(),
                ))
            }
            Err(status) => match Rejected::from_status(&status) {
                Some(r) if r.index.is_none() => Ok(Slot::rejected(line_index, &r.code, r.message)),
                _ => Err(status_error(status)),
            },
        }
    }

    /// Answers one tick's queries (positions in the chunk, checked lines).
    /// When the server rejects a query, that line gets the error line
    /// offline mode gives it and the others are sent again: a bad line
    /// costs its own answer only. A hull the world does not register is
    /// the fault of every query naming it, so all of them get its error.
    async fn answer_tick(
        &mut self,
        mut tick: Vec<(usize, QueryLine)>,
        chunk: &[InputLine],
        slots: &mut [Slot],
    ) -> anyhow::Result<()> {
        while !tick.is_empty() {
            let mut request = Tick::of(&self.world, self.scene.as_ref(), &tick);
            let status = match self
                .client
                .trace(std::mem::take(&mut request.message))
                .await
            {
                Ok(response) => return request.fill(&response.into_inner(), slots),
                Err(status) => status,
            };
            let Some(rejected) = Rejected::from_status(&status) else {
                return Err(status_error(status));
            };
            let Some(&bad_pos) = rejected.index.and_then(|i| request.positions.get(i)) else {
                return Err(status_error(status));
            };
            let hull = |pos: usize| {
                tick.iter()
                    .find(|(p, _)| *p == pos)
                    .and_then(|(_, l)| l.hull.clone())
            };
            let bad_hull = (rejected.code == "unknown_hull")
                .then(|| hull(bad_pos))
                .flatten();
            tick.retain(|(pos, line)| {
                let bad = *pos == bad_pos || (bad_hull.is_some() && line.hull == bad_hull);
                if bad {
                    let line_index = chunk[*pos].0;
                    slots[*pos] =
                        Slot::rejected(line_index, &rejected.code, rejected.message.clone());
                }
                !bad
            });
        }
        Ok(())
    }
}

/// A scene's entities as the wire message (checked already).
fn scene_message(entities: &[EntityLine]) -> pb::Scene {
    let v = |v: [f64; 3]| pb::Vec3 {
        x: v[0] as f32,
        y: v[1] as f32,
        z: v[2] as f32,
    };
    pb::Scene {
        entities: entities
            .iter()
            .map(|e| pb::SceneEntity {
                id: e.id as u32,
                shape: match (&e.model, &e.bbox) {
                    (Some(model), _) => Some(pb::scene_entity::Shape::Model(model.clone())),
                    (None, Some(b)) => Some(pb::scene_entity::Shape::Box(pb::Box {
                        mins: Some(v(b.mins)),
                        maxs: Some(v(b.maxs)),
                    })),
                    (None, None) => None,
                },
                origin: e.origin.map(v),
                angles: e.angles.map(v),
                contents: e.contents,
                owner: e.owner.map(|o| o as u32),
            })
            .collect(),
    }
}

/// One tick request and, for each answer in it (the traces, then the
/// points), the position of its line in the chunk.
struct Tick {
    message: pb::TraceRequest,
    positions: Vec<usize>,
    traces: usize,
    any_hits: Vec<bool>,
    in_scene: bool,
}

impl Tick {
    fn of(world: &str, scene: Option<&pb::Scene>, lines: &[(usize, QueryLine)]) -> Tick {
        let f = |v: [f64; 3]| v.map(|c| c as f32);
        let vec3 = |v: Option<[f64; 3]>| {
            let [x, y, z] = f(v.unwrap_or_default());
            Some(pb::Vec3 { x, y, z })
        };
        let pass = |line: &QueryLine| line.pass().unwrap_or(bspq::scene::ENTITY_NONE);
        let mut m = pb::TraceRequest {
            world: world.to_owned(),
            scene: scene.cloned(),
            ..Default::default()
        };
        let mut positions = Vec::with_capacity(lines.len());
        // Each distinct shape once in the table.
        let mut table: HashMap<String, u32> = HashMap::new();
        for (pos, line) in lines.iter().filter(|(_, l)| l.point.is_none()) {
            let shape = pb::QueryShape {
                kind: if let Some(hull) = &line.hull {
                    Some(pb::query_shape::Kind::Hull(hull.clone()))
                } else if let Some(swept) = &line.shape {
                    Some(pb::query_shape::Kind::Swept(grpc::swept_message(swept)))
                } else if line.mins.is_some() || line.maxs.is_some() {
                    Some(pb::query_shape::Kind::Box(pb::Box {
                        mins: vec3(line.mins),
                        maxs: vec3(line.maxs),
                    }))
                } else {
                    None
                },
                exact: line.exact == Some(true),
            };
            let next = table.len() as u32;
            let index = *table.entry(format!("{shape:?}")).or_insert_with(|| {
                m.shapes.push(shape);
                next
            });
            m.shape_index.push(index);
            m.starts.extend(f(line.start.unwrap_or_default()));
            m.ends.extend(f(line.end.unwrap_or_default()));
            m.masks.push(line.mask.unwrap_or(MASK_SOLID));
            m.passes.push(pass(line));
            m.any_hits.push(line.any == Some(true));
            positions.push(*pos);
        }
        let traces = positions.len();
        for (pos, line) in lines {
            if let Some(p) = line.point {
                m.points.extend(f(p));
                m.point_passes.push(pass(line));
                positions.push(*pos);
            }
        }
        Tick {
            any_hits: m.any_hits.clone(),
            message: m,
            positions,
            traces,
            in_scene: scene.is_some(),
        }
    }

    /// Fills the slots of the request's queries from the server's answers.
    fn fill(&self, r: &pb::TraceResponse, slots: &mut [Slot]) -> anyhow::Result<()> {
        let n = self.traces;
        let points = self.positions.len() - n;
        anyhow::ensure!(
            r.fractions.len() == n
                && r.endpos.len() == 3 * n
                && r.normals.len() == 3 * n
                && r.dists.len() == n
                && r.flags.len() == n
                && r.contents.len() == n
                && r.surface_flags.len() == n
                && r.hits.len() == n
                && r.entities.len() == if self.in_scene { n } else { 0 }
                && r.point_contents.len() == points,
            "server answered packed arrays of the wrong lengths for {n} traces and {points} points"
        );
        for (i, pos) in self.positions.iter().enumerate() {
            let answer = if i >= n {
                Answer::Point(PointAnswer {
                    contents: r.point_contents[i - n],
                })
            } else if self.any_hits[i] {
                Answer::Hit(HitAnswer { hit: r.hits[i] })
            } else {
                let v = |a: &[f32]| [a[3 * i], a[3 * i + 1], a[3 * i + 2]];
                Answer::Trace(TraceAnswer {
                    fraction: r.fractions[i],
                    endpos: v(&r.endpos),
                    normal: v(&r.normals),
                    dist: r.dists[i],
                    startsolid: r.flags[i] & pb::TraceFlag::Startsolid as u32 != 0,
                    allsolid: r.flags[i] & pb::TraceFlag::Allsolid as u32 != 0,
                    contents: r.contents[i],
                    surface_flags: r.surface_flags[i],
                    entity: r.entities.get(i).copied(),
                })
            };
            slots[*pos] = Slot::Answer(answer.to_json());
        }
        Ok(())
    }
}
