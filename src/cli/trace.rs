//! `bspq trace`: JSON query lines in, answer lines out — answered by the
//! kernel in process, or by a server over gRPC with `--server ADDR`.

use super::WorldArgs;
use anyhow::Context;
use bspq::proto::v1 as pb;
use bspq::query::{
    error_json, error_line, query_lines, Answer, HitAnswer, PointAnswer, Query, QueryError,
    QueryLine, Request, SceneStream, TraceAnswer,
};
use bspq::trace::BatchOptions;
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

/// A line checked for sending to a server: hull lines (whose hull only the
/// server's world knows) are checked as the ray of the same move and sent
/// with the hull's name; `any` lines become any-hit requests either way.
fn remote_request(line: &QueryLine) -> Result<Request, QueryError> {
    let Some(_) = &line.hull else {
        return line.request();
    };
    if line.mins.is_some() || line.maxs.is_some() || line.shape.is_some() || line.exact.is_some() {
        return Err(QueryError::HullWithShape);
    }
    QueryLine {
        hull: None,
        any: None,
        ..line.clone()
    }
    .request()
    .map(|r| match r {
        Request::Query(Query::Trace(q)) if line.any == Some(true) => Request::AnyHit(q),
        other => other,
    })
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

/// Lines are read in chunks of `batch`; each is validated locally (so bad
/// lines get the same error lines as offline). In a chunk, traces that share
/// a box are sent as one `Trace` call with that box as the batch shape and
/// per-query masks; points go in one `PointContents` call. Any-hit lines are
/// sent as traces and answered `hit = fraction < 1`. Answers are printed in
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
        let mut client = pb::collision_client::CollisionClient::new(channel)
            .max_decoding_message_size(usize::MAX)
            .max_encoding_message_size(usize::MAX);
        let stdin = std::io::stdin().lock();
        let mut out = super::answers_out();
        let mut failed = 0usize;
        let mut lines = query_lines(stdin).enumerate();
        loop {
            let chunk = next_chunk(&mut lines, batch)?;
            if chunk.is_empty() {
                break;
            }
            for slot in answer_chunk(&mut client, world, &chunk).await? {
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

/// The query a server rejected in a request (as the service names it:
/// INVALID_ARGUMENT with a JSON error body and `query_index`).
struct Rejected {
    /// Index of the query in the request.
    index: usize,
    code: String,
    /// The message as offline mode words it (without the server's `query N: `).
    message: String,
}

impl Rejected {
    fn from_status(status: &tonic::Status) -> Option<Rejected> {
        if status.code() != tonic::Code::InvalidArgument {
            return None;
        }
        let body: serde_json::Value = serde_json::from_str(status.message()).ok()?;
        let error = body.get("error")?;
        let index = usize::try_from(error.get("query_index")?.as_u64()?).ok()?;
        let message = error.get("message")?.as_str()?;
        let prefix = format!("query {index}: ");
        Some(Rejected {
            index,
            code: error.get("code")?.as_str()?.to_owned(),
            message: message.strip_prefix(&prefix).unwrap_or(message).to_owned(),
        })
    }
}

async fn answer_chunk(
    client: &mut Client,
    world: &str,
    chunk: &[InputLine],
) -> anyhow::Result<Vec<Slot>> {
    let mut slots = Vec::with_capacity(chunk.len());
    // Box (as bits), swept shape, exactness and hull -> the traces that share them.
    let mut groups: HashMap<String, Group> = HashMap::new();
    let mut points = pb::PointContentsRequest {
        world: world.to_owned(),
        points: Vec::new(),
    };
    let mut point_slots = Vec::new();
    let mut any_hit = vec![false; chunk.len()];
    for (pos, (index, line)) in chunk.iter().enumerate() {
        let parsed = line.clone().and_then(|line| {
            let q = QueryLine::parse(&line)?;
            remote_request(&q).map(|r| (q, r))
        });
        any_hit[pos] = matches!(&parsed, Ok((line, Request::AnyHit(_))) if line.any == Some(true));
        match parsed {
            Err(err) => {
                slots.push(Slot::Rejected {
                    line_index: *index,
                    message: err.to_string(),
                    json: error_json(&err, *index),
                });
            }
            Ok((_, Request::Query(Query::Point(p)))) => {
                points.points.extend_from_slice(&p.to_array());
                point_slots.push(pos);
                slots.push(Slot::Pending);
            }
            Ok((_, Request::Hull { .. })) => {
                // `remote_request` sends hull lines as traces named by the hull.
                slots.push(Slot::Answer(String::new()));
            }
            Ok((line, Request::Query(Query::Trace(q)) | Request::AnyHit(q))) => {
                let (mins, maxs) = (q.mins().to_array(), q.maxs().to_array());
                let swept = line
                    .shape
                    .as_ref()
                    .map(bspq::transport::grpc::swept_message);
                let bits: Vec<u32> = [mins, maxs].concat().iter().map(|f| f.to_bits()).collect();
                let key = format!("{bits:?} {swept:?} {} {:?}", q.exact(), line.hull);
                let group = groups.entry(key).or_insert_with(|| {
                    let shape = (swept.is_none()
                        && line.hull.is_none()
                        && (mins != [0.0; 3] || maxs != [0.0; 3]))
                        .then(|| pb::Box {
                            mins: Some(pb::Vec3 {
                                x: mins[0],
                                y: mins[1],
                                z: mins[2],
                            }),
                            maxs: Some(pb::Vec3 {
                                x: maxs[0],
                                y: maxs[1],
                                z: maxs[2],
                            }),
                        });
                    Group {
                        positions: Vec::new(),
                        request: pb::TraceRequest {
                            world: world.to_owned(),
                            shape,
                            swept,
                            exact: q.exact(),
                            hull: line.hull.clone(),
                            ..Default::default()
                        },
                    }
                });
                group.positions.push(pos);
                let request = &mut group.request;
                request.starts.extend_from_slice(&q.start().to_array());
                request.ends.extend_from_slice(&q.end().to_array());
                request.masks.push(q.mask());
                slots.push(Slot::Pending);
            }
        }
    }
    if !point_slots.is_empty() {
        let r = client
            .point_contents(points)
            .await
            .map_err(status_error)?
            .into_inner();
        anyhow::ensure!(
            r.contents.len() == point_slots.len(),
            "server answered {} points for {}",
            r.contents.len(),
            point_slots.len()
        );
        for (pos, contents) in point_slots.iter().zip(r.contents) {
            slots[*pos] = Slot::Answer(Answer::Point(PointAnswer { contents }).to_json());
        }
    }
    for group in groups.into_values() {
        group.answer(client, chunk, &any_hit, &mut slots).await?;
    }
    Ok(slots)
}

/// Traces of one chunk that share a box, shape and hull: one `Trace` request.
struct Group {
    /// Positions in the chunk of the request's queries, in order.
    positions: Vec<usize>,
    request: pb::TraceRequest,
}

impl Group {
    /// Sends the request and fills the slots of its queries. When the
    /// server rejects a query, that line gets the error line offline mode
    /// gives it (with its input line number) and the others are sent again:
    /// a bad line costs its own answer only, as offline. A hull the world
    /// does not register is every query's fault (they share it), so all
    /// get its error at once.
    async fn answer(
        mut self,
        client: &mut Client,
        chunk: &[InputLine],
        any_hit: &[bool],
        slots: &mut [Slot],
    ) -> anyhow::Result<()> {
        while !self.positions.is_empty() {
            let status = match client.trace(self.request.clone()).await {
                Ok(response) => return self.fill(&response.into_inner(), any_hit, slots),
                Err(status) => status,
            };
            let Some(rejected) = Rejected::from_status(&status) else {
                return Err(status_error(status));
            };
            if rejected.index >= self.positions.len() {
                return Err(status_error(status));
            }
            let bad: Vec<usize> = if rejected.code == "unknown_hull" {
                (0..self.positions.len()).collect()
            } else {
                vec![rejected.index]
            };
            for &k in &bad {
                let pos = self.positions[k];
                let line_index = chunk[pos].0;
                slots[pos] = Slot::Rejected {
                    line_index,
                    message: rejected.message.clone(),
                    json: error_line(&rejected.code, &rejected.message, line_index),
                };
            }
            self.remove(&bad);
        }
        Ok(())
    }

    /// Drops the queries at `indices` (ascending) from the request.
    fn remove(&mut self, indices: &[usize]) {
        let keep = |k: &usize| indices.binary_search(k).is_err();
        let r = &mut self.request;
        let per_query = |values: &[f32], width: usize| -> Vec<f32> {
            values
                .chunks(width)
                .enumerate()
                .filter(|(k, _)| keep(k))
                .flat_map(|(_, v)| v.iter().copied())
                .collect()
        };
        r.starts = per_query(&r.starts, 3);
        r.ends = per_query(&r.ends, 3);
        r.masks = (r.masks.iter().enumerate())
            .filter(|(k, _)| keep(k))
            .map(|(_, m)| *m)
            .collect();
        self.positions = (self.positions.iter().enumerate())
            .filter(|(k, _)| keep(k))
            .map(|(_, p)| *p)
            .collect();
    }

    /// Fills the slots of the request's queries from the server's answers.
    fn fill(
        &self,
        r: &pb::TraceResponse,
        any_hit: &[bool],
        slots: &mut [Slot],
    ) -> anyhow::Result<()> {
        let n = self.positions.len();
        anyhow::ensure!(
            r.fractions.len() == n
                && r.endpos.len() == 3 * n
                && r.normals.len() == 3 * n
                && r.dists.len() == n
                && r.flags.len() == n
                && r.contents.len() == n
                && r.surface_flags.len() == n,
            "server answered packed arrays of the wrong lengths for {n} traces"
        );
        for (i, pos) in self.positions.iter().enumerate() {
            let v = |a: &[f32]| [a[3 * i], a[3 * i + 1], a[3 * i + 2]];
            let t = TraceAnswer {
                fraction: r.fractions[i],
                endpos: v(&r.endpos),
                normal: v(&r.normals),
                dist: r.dists[i],
                startsolid: r.flags[i] & pb::TraceFlag::Startsolid as u32 != 0,
                allsolid: r.flags[i] & pb::TraceFlag::Allsolid as u32 != 0,
                contents: r.contents[i],
                surface_flags: r.surface_flags[i],
                entity: None,
            };
            let answer = if any_hit[*pos] {
                Answer::Hit(HitAnswer {
                    hit: t.fraction < 1.0,
                })
            } else {
                Answer::Trace(t)
            };
            slots[*pos] = Slot::Answer(answer.to_json());
        }
        Ok(())
    }
}
