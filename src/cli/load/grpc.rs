//! gRPC load: one connection per client on a tokio runtime, unary `Trace`
//! calls or one `TraceStream` per client with one batch in flight.

use super::{Budget, Pacer, Tally, REQUEST_TIMEOUT};
use anyhow::Context;
use bspq::proto::v1 as pb;
use bspq::query::{Query, QueryLine};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_stream::StreamExt;

type Client = pb::collision_client::CollisionClient<tonic::transport::Channel>;

/// Requests built before the clock starts. A gRPC batch has one box, so the
/// queries are grouped by box, then cut into batches of at most `batch`.
pub(crate) struct Plan {
    url: String,
    requests: Vec<pb::TraceRequest>,
}

fn vec3(v: [f32; 3]) -> pb::Vec3 {
    pb::Vec3 {
        x: v[0],
        y: v[1],
        z: v[2],
    }
}

impl Plan {
    pub fn new(url: &str, world: &str, lines: &[String], batch: usize) -> anyhow::Result<Self> {
        // Box (as bits) -> the queries of that box, in file order.
        let mut groups: BTreeMap<[u32; 6], Vec<bspq::trace::TraceQuery>> = BTreeMap::new();
        for (index, line) in lines.iter().enumerate() {
            let query = QueryLine::parse(line)
                .and_then(|q| q.validate())
                .with_context(|| format!("query line {}", index + 1))?;
            if let Query::Trace(q) = query {
                let size = [q.mins().to_array(), q.maxs().to_array()].concat();
                let key: [u32; 6] = std::array::from_fn(|i| size[i].to_bits());
                groups.entry(key).or_default().push(q);
            }
        }
        let mut requests = Vec::new();
        for queries in groups.values() {
            for chunk in queries.chunks(batch) {
                let (mins, maxs) = (chunk[0].mins().to_array(), chunk[0].maxs().to_array());
                let shape = (mins != [0.0; 3] || maxs != [0.0; 3]).then(|| pb::Box {
                    mins: Some(vec3(mins)),
                    maxs: Some(vec3(maxs)),
                });
                requests.push(pb::TraceRequest {
                    world: world.to_owned(),
                    starts: chunk.iter().flat_map(|q| q.start().to_array()).collect(),
                    ends: chunk.iter().flat_map(|q| q.end().to_array()).collect(),
                    shape,
                    masks: chunk.iter().map(|q| q.mask()).collect(),
                    ..Default::default()
                });
            }
        }
        anyhow::ensure!(!requests.is_empty(), "no trace queries to send");
        Ok(Self {
            url: url.to_owned(),
            requests,
        })
    }

    /// Queries per request, averaged over the plan (the last batch of each box may be short).
    pub fn mean_batch(&self) -> f64 {
        let total: usize = self.requests.iter().map(|r| r.masks.len()).sum();
        total as f64 / self.requests.len() as f64
    }

    pub fn run(
        self: Arc<Self>,
        clients: usize,
        stream: bool,
        budget: Arc<Budget>,
        duration: Duration,
    ) -> anyhow::Result<Tally> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("cannot start the client runtime")?;
        runtime.block_on(async {
            let mut tasks = Vec::with_capacity(clients);
            for client in 0..clients {
                let channel = tonic::transport::Endpoint::from_shared(self.url.clone())
                    .with_context(|| format!("bad server URL {:?}", self.url))?
                    .timeout(REQUEST_TIMEOUT)
                    .connect()
                    .await
                    .map_err(|err| {
                        let causes = crate::cli::causes_once(&err);
                        anyhow::anyhow!("cannot connect to {}: {causes}", self.url)
                    })?;
                let stub = Client::new(channel)
                    .max_decoding_message_size(usize::MAX)
                    .max_encoding_message_size(usize::MAX);
                let (plan, budget) = (Arc::clone(&self), Arc::clone(&budget));
                tasks.push(tokio::spawn(async move {
                    if stream {
                        plan.stream_client(stub, client, &budget).await
                    } else {
                        plan.unary_client(stub, client, &budget).await
                    }
                }));
            }
            // Stops the clients at the deadline unless their request budget ends them first.
            let timer = {
                let budget = Arc::clone(&budget);
                tokio::spawn(async move {
                    tokio::time::sleep(duration).await;
                    budget.stop.store(true, Ordering::Relaxed);
                })
            };
            let mut total = Tally::default();
            for task in tasks {
                total.merge(task.await.context("a load client failed")?);
            }
            timer.abort();
            Ok(total)
        })
    }

    async fn unary_client(&self, mut stub: Client, client: usize, budget: &Budget) -> Tally {
        let mut tally = Tally::default();
        let mut pacer = budget.pacer(client);
        let mut next = client;
        while budget.claim() {
            let request = self.requests[next % self.requests.len()].clone();
            next += 1;
            let expected = request.masks.len();
            let started = paced_start(&mut pacer).await;
            let outcome = match stub.trace(request).await {
                Ok(response) => check_answer(&response.into_inner(), expected, None),
                Err(status) if status.code() == tonic::Code::NotFound => {
                    budget.abort(self.not_found(&status));
                    break;
                }
                Err(status) => Err(status_text(&status)),
            };
            tally.record(started, outcome);
        }
        tally
    }

    async fn stream_client(&self, mut stub: Client, client: usize, budget: &Budget) -> Tally {
        let mut tally = Tally::default();
        let (sender, receiver) = tokio::sync::mpsc::channel::<pb::TraceRequest>(1);
        let mut answers = match stub
            .trace_stream(tokio_stream::wrappers::ReceiverStream::new(receiver))
            .await
        {
            Ok(response) => response.into_inner(),
            Err(status) if status.code() == tonic::Code::NotFound => {
                budget.abort(self.not_found(&status));
                return tally;
            }
            Err(status) => {
                tally.record(Instant::now(), Err(status_text(&status)));
                return tally;
            }
        };
        let mut pacer = budget.pacer(client);
        let mut next = client;
        let mut sequence = 0u64;
        while budget.claim() {
            let mut request = self.requests[next % self.requests.len()].clone();
            next += 1;
            sequence += 1;
            request.sequence = sequence;
            let expected = request.masks.len();
            let started = paced_start(&mut pacer).await;
            if sender.send(request).await.is_err() {
                tally.record(started, Err("the server closed the stream".into()));
                break;
            }
            let outcome = match tokio::time::timeout(REQUEST_TIMEOUT, answers.next()).await {
                Err(_) => Err("no answer within the timeout".to_owned()),
                Ok(None) => Err("the server ended the stream".to_owned()),
                Ok(Some(Err(status))) if status.code() == tonic::Code::NotFound => {
                    budget.abort(self.not_found(&status));
                    break;
                }
                Ok(Some(Err(status))) => Err(status_text(&status)),
                Ok(Some(Ok(answer))) => check_answer(&answer, expected, Some(sequence)),
            };
            let broken = outcome.is_err();
            tally.record(started, outcome);
            if broken {
                break;
            }
        }
        tally
    }
}

impl Plan {
    /// Why NOT_FOUND stops the run: every request names the same world, so
    /// every one would fail alike.
    fn not_found(&self, status: &tonic::Status) -> String {
        let message = super::error_message(status.message());
        format!("{} answered NOT_FOUND: {message}", self.url)
    }
}

/// Waits for the request's scheduled time (if paced) and returns the time its latency counts from.
async fn paced_start(pacer: &mut Pacer) -> Instant {
    match pacer.next_slot() {
        Some(slot) => {
            tokio::time::sleep_until(slot.into()).await;
            slot
        }
        None => Instant::now(),
    }
}

/// The answer has one result per query (and, on a stream, the batch's sequence number).
fn check_answer(
    answer: &pb::TraceResponse,
    queries: usize,
    sequence: Option<u64>,
) -> Result<(), String> {
    if answer.fractions.len() != queries || answer.endpos.len() != 3 * queries {
        return Err(format!(
            "{} answers for {queries} queries",
            answer.fractions.len()
        ));
    }
    match sequence {
        Some(s) if answer.sequence != s => Err(format!(
            "answer to batch {} arrived for batch {s}",
            answer.sequence
        )),
        _ => Ok(()),
    }
}

fn status_text(status: &tonic::Status) -> String {
    format!("gRPC {:?}: {}", status.code(), status.message())
}
