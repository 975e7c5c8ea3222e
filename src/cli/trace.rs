//! `bspq trace`: JSON query lines in, answer lines out — answered by the
//! kernel in process, or by a server over gRPC with `--server ADDR`.

use super::tick::{hull_name, scene_message, Tick};
use super::WorldArgs;
use anyhow::Context;
use bspq::proto::v1 as pb;
use bspq::query::{
    error_json, error_line, query_lines, Answer, EntityLine, QueryError, QueryLine, SceneAnswer,
    SceneStream,
};
use bspq::trace::BatchOptions;
use clap::Args;
use std::io::Write;
use std::process::ExitCode;

mod bots;

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
    if let Some(bot) = line.bot() {
        return bot.map(|_| ());
    }
    if line.is_movement() {
        // A hull is the server's to look up: the rest is checked with a
        // point box in its place.
        let mut unhulled = line.clone();
        let boxes = [
            unhulled
                .ground
                .as_mut()
                .map(|g| (&mut g.hull, &mut g.mins, &mut g.maxs)),
            unhulled
                .slide
                .as_mut()
                .map(|s| (&mut s.hull, &mut s.mins, &mut s.maxs)),
            unhulled
                .predict
                .as_mut()
                .map(|p| (&mut p.hull, &mut p.mins, &mut p.maxs)),
        ];
        for (hull, mins, maxs) in boxes.into_iter().flatten() {
            if hull.take().is_some() {
                if mins.is_some() || maxs.is_some() {
                    return Err(QueryError::HullWithShape);
                }
                *mins = Some([0.0; 3]);
                *maxs = Some([0.0; 3]);
            }
        }
        unhulled.movement(None).transpose()?;
        return line.pass().map(|_| ());
    }
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
/// shape table, per-query masks, passes and any-hit, and the points; its
/// bot lines as one `Walk` call for the walks and a `Sight` call per
/// matrix. A scene line is sent alone first (the server checks its
/// models), then travels with every later call. Answers are printed in
/// input order.
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

/// A connection to a server: the client and the scene set by the last good
/// scene line.
struct Remote {
    client: Client,
    world: String,
    scene: Option<pb::Scene>,
}

impl Remote {
    async fn answer_chunk(&mut self, chunk: &[InputLine]) -> anyhow::Result<Vec<Slot>> {
        let mut slots = Vec::with_capacity(chunk.len());
        let mut tick = Vec::new();
        let mut bots = Vec::new();
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
                        self.answer_bots(std::mem::take(&mut bots), chunk, &mut slots)
                            .await?;
                        slots.push(self.set_scene(entities, *index).await?);
                    }
                    None if line.is_bot() => {
                        bots.push((pos, line));
                        slots.push(Slot::Pending);
                    }
                    None => {
                        tick.push((pos, line));
                        slots.push(Slot::Pending);
                    }
                },
            }
        }
        self.answer_tick(tick, chunk, &mut slots).await?;
        self.answer_bots(bots, chunk, &mut slots).await?;
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
                Ok(response) => {
                    let answers = request
                        .answers(&response.into_inner())
                        .map_err(|e| anyhow::anyhow!(e))?;
                    for (pos, answer) in answers {
                        slots[pos] = Slot::Answer(answer.to_json());
                    }
                    return Ok(());
                }
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
                    .and_then(|(_, l)| hull_name(l).map(str::to_owned))
            };
            let bad_hull = (rejected.code == "unknown_hull")
                .then(|| hull(bad_pos))
                .flatten();
            tick.retain(|(pos, line)| {
                let bad = *pos == bad_pos
                    || (bad_hull.is_some() && hull_name(line) == bad_hull.as_deref());
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
