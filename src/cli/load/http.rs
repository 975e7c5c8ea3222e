//! HTTP load: one blocking client thread per connection.

use super::{Budget, Tally, REQUEST_TIMEOUT};
use anyhow::Context;
use bspq::query::{EntityLine, QueryLine};
use std::time::{Duration, Instant};

/// The largest answer read. The HTTP client's default (10 MiB) is less
/// than a full batch's answer: 65 536 traces take about 13 MiB of JSON.
const ANSWER_LIMIT: u64 = 1 << 30;

/// Request bodies built before the clock starts, so clients spend their time on the wire.
pub(crate) struct Plan {
    url: String,
    bodies: Vec<String>,
}

impl Plan {
    /// The plan, once the query lines and the server are known to be good
    /// (`base_url` was checked as `--url` was parsed): a run against a bad
    /// one would only count failures.
    pub fn new(
        base_url: &str,
        world: &str,
        lines: &[QueryLine],
        scene: Option<&[EntityLine]>,
        batch: usize,
    ) -> anyhow::Result<Self> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(REQUEST_TIMEOUT))
            .build()
            .into();
        agent
            .get(&format!("{base_url}/healthz"))
            .call()
            .map_err(|e| anyhow::anyhow!("{e}"))
            .with_context(|| format!("cannot connect to {base_url}"))?;
        let entities = scene.map(serde_json::to_string).transpose()?;
        let lines = lines
            .iter()
            .map(serde_json::to_string)
            .collect::<Result<Vec<_>, _>>()?;
        let bodies = (0..lines.len().div_ceil(batch))
            .map(|b| {
                let queries: Vec<&str> = (0..batch)
                    .map(|k| lines[(b * batch + k) % lines.len()].as_str())
                    .collect();
                match &entities {
                    Some(entities) => format!(
                        "{{\"entities\":{entities},\"queries\":[{}]}}",
                        queries.join(",")
                    ),
                    None => format!("{{\"queries\":[{}]}}", queries.join(",")),
                }
            })
            .collect();
        Ok(Self {
            url: format!("{base_url}/v1/worlds/{world}/trace"),
            bodies,
        })
    }

    pub fn run(
        &self,
        clients: usize,
        budget: &Budget,
        duration: Duration,
    ) -> anyhow::Result<Tally> {
        super::run_clients(clients, budget, duration, |client| {
            self.client(client, budget)
        })
    }

    fn client(&self, client: usize, budget: &Budget) -> Tally {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(REQUEST_TIMEOUT))
            .build()
            .into();
        let mut tally = Tally::default();
        let mut pacer = budget.pacer(client);
        let mut next = client;
        while budget.claim() {
            let body = &self.bodies[next % self.bodies.len()];
            next += 1;
            let scheduled = pacer.wait();
            let sent = Instant::now();
            let answer = agent
                .post(&self.url)
                .header("Content-Type", "application/json")
                .send(body.as_str())
                .and_then(|mut response| {
                    let text = response
                        .body_mut()
                        .with_config()
                        .limit(ANSWER_LIMIT)
                        .read_to_string()?;
                    Ok((response.status().as_u16(), text))
                });
            let outcome = match answer {
                Ok((200, _)) => Ok(()),
                Ok((404, text)) => {
                    budget.abort(not_found(&self.url, &text));
                    break;
                }
                Ok((status, text)) => Err(format!("HTTP {status}: {text}")),
                Err(e) => Err(e.to_string()),
            };
            tally.record(scheduled, sent, outcome);
        }
        tally
    }
}

/// Why a 404 stops the run: every request names the same world (or route),
/// so every one would fail alike.
fn not_found(url: &str, body: &str) -> String {
    let message = super::error_message(body);
    format!("POST {url} answered 404 Not Found: {message}")
}
