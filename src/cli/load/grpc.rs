//! gRPC load: each client on its own thread with its own single-threaded
//! runtime and connection, sending tick messages as unary `Trace` calls or
//! on one `TraceStream` with one tick in flight (a game server's loop).

use super::{Budget, Tally, REQUEST_TIMEOUT};
use crate::cli::tick::{scene_message, Tick};
use anyhow::Context;
use bspq::proto::v1 as pb;
use bspq::query::{EntityLine, QueryLine};
use std::time::{Duration, Instant};
use tokio_stream::StreamExt;

type Client = pb::collision_client::CollisionClient<tonic::transport::Channel>;

/// Tick messages built before the clock starts: the query lines in file
/// order, round-robin, `batch` to a message.
pub(crate) struct Plan {
    url: String,
    ticks: Vec<Tick>,
    scene: Option<pb::Scene>,
    stream: bool,
}

impl Plan {
    /// The plan, once the server is known to answer (a run against one that
    /// does not would only count failures).
    pub fn new(
        url: &str,
        world: &str,
        lines: &[QueryLine],
        scene: Option<&[EntityLine]>,
        batch: usize,
        stream: bool,
    ) -> anyhow::Result<Self> {
        let scene = scene.map(scene_message);
        let ticks = (0..lines.len().div_ceil(batch))
            .map(|t| {
                let tick: Vec<(usize, QueryLine)> = (0..batch)
                    .map(|k| (k, lines[(t * batch + k) % lines.len()].clone()))
                    .collect();
                // Answered with the scene; sent with it as the run says.
                let mut tick = Tick::of(world, scene.as_ref(), &tick);
                tick.message.scene = None;
                tick
            })
            .collect();
        let plan = Self {
            url: url.to_owned(),
            ticks,
            scene,
            stream,
        };
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the client runtime")?
            .block_on(plan.connect())?;
        Ok(plan)
    }

    /// Queries per request.
    pub fn mean_batch(&self) -> f64 {
        let total: usize = self.ticks.iter().map(Tick::len).sum();
        total as f64 / self.ticks.len().max(1) as f64
    }

    async fn connect(&self) -> anyhow::Result<Client> {
        let channel = tonic::transport::Endpoint::from_shared(self.url.clone())
            .with_context(|| format!("bad server URL {:?}", self.url))?
            .timeout(REQUEST_TIMEOUT)
            .connect()
            .await
            .map_err(|err| {
                let causes = crate::cli::causes_once(&err);
                anyhow::anyhow!("cannot connect to {}: {causes}", self.url)
            })?;
        Ok(Client::new(channel)
            .max_decoding_message_size(usize::MAX)
            .max_encoding_message_size(usize::MAX))
    }

    pub fn run(
        &self,
        clients: usize,
        budget: &Budget,
        duration: Duration,
    ) -> anyhow::Result<Tally> {
        super::run_clients(clients, budget, duration, |client| {
            let mut tally = Tally::default();
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    tally.record(Instant::now(), Instant::now(), Err(e.to_string()));
                    return tally;
                }
            };
            runtime.block_on(async {
                match self.connect().await {
                    Err(e) => tally.record(Instant::now(), Instant::now(), Err(e.to_string())),
                    Ok(stub) if self.stream => {
                        self.stream_client(stub, client, budget, &mut tally).await
                    }
                    Ok(stub) => self.unary_client(stub, client, budget, &mut tally).await,
                }
            });
            tally
        })
    }

    async fn unary_client(
        &self,
        mut stub: Client,
        client: usize,
        budget: &Budget,
        tally: &mut Tally,
    ) {
        let mut pacer = budget.pacer(client);
        let mut next = client;
        while budget.claim() {
            let tick = &self.ticks[next % self.ticks.len()];
            next += 1;
            let request = pb::TraceRequest {
                scene: self.scene.clone(),
                ..tick.message.clone()
            };
            let scheduled = pacer.wait();
            let sent = Instant::now();
            let outcome = match stub.trace(request).await {
                Ok(response) => tick.check(&response.into_inner()),
                Err(status) if status.code() == tonic::Code::NotFound => {
                    budget.abort(self.not_found(&status));
                    break;
                }
                Err(status) => Err(status_text(&status)),
            };
            tally.record(scheduled, sent, outcome);
        }
    }

    async fn stream_client(
        &self,
        mut stub: Client,
        client: usize,
        budget: &Budget,
        tally: &mut Tally,
    ) {
        let (sender, receiver) = tokio::sync::mpsc::channel::<pb::TraceRequest>(1);
        let mut answers = match stub
            .trace_stream(tokio_stream::wrappers::ReceiverStream::new(receiver))
            .await
        {
            Ok(response) => response.into_inner(),
            Err(status) if status.code() == tonic::Code::NotFound => {
                budget.abort(self.not_found(&status));
                return;
            }
            Err(status) => {
                tally.record(Instant::now(), Instant::now(), Err(status_text(&status)));
                return;
            }
        };
        let mut pacer = budget.pacer(client);
        let mut next = client;
        let mut sequence = 0u64;
        while budget.claim() {
            let tick = &self.ticks[next % self.ticks.len()];
            next += 1;
            sequence += 1;
            // The stream keeps the scene its first message carries.
            let request = pb::TraceRequest {
                sequence,
                scene: if sequence == 1 {
                    self.scene.clone()
                } else {
                    None
                },
                ..tick.message.clone()
            };
            let scheduled = pacer.wait();
            let sent = Instant::now();
            if sender.send(request).await.is_err() {
                tally.record(scheduled, sent, Err("the server closed the stream".into()));
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
                Ok(Some(Ok(answer))) if answer.sequence != sequence => Err(format!(
                    "the answer to tick {} arrived for tick {sequence}",
                    answer.sequence
                )),
                Ok(Some(Ok(answer))) => tick.check(&answer),
            };
            let broken = outcome.is_err();
            tally.record(scheduled, sent, outcome);
            if broken {
                break;
            }
        }
    }

    /// Why NOT_FOUND stops the run: every request names the same world, so
    /// every one would fail alike.
    fn not_found(&self, status: &tonic::Status) -> String {
        let message = super::error_message(status.message());
        format!("{} answered NOT_FOUND: {message}", self.url)
    }
}

fn status_text(status: &tonic::Status) -> String {
    format!("gRPC {:?}: {}", status.code(), status.message())
}
