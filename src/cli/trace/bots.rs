//! Bot lines sent to a server: the walks between two scene lines as one
//! `Walk` call, each sight matrix as a `Sight` call, each PVS line as a
//! `Pvs` call, with the scene of the lines before them; answers written as
//! offline mode writes them.

use super::{status_error, InputLine, Rejected, Remote, Slot};
use bspq::bots::{BotAnswer, PvsLine, SightAnswer, SightLine, SightMatrix, WalkLine};
use bspq::proto::v1 as pb;
use bspq::query::{Answer, QueryLine};
use bspq::transport::grpc::bots::{pvs_answer, pvs_message, walk_answers, walk_message};

fn written(answer: BotAnswer) -> Slot {
    Slot::Answer(Answer::Bots(answer).to_json())
}

impl Remote {
    /// Answers checked bot lines (positions in the chunk).
    pub(super) async fn answer_bots(
        &mut self,
        bots: Vec<(usize, QueryLine)>,
        chunk: &[InputLine],
        slots: &mut [Slot],
    ) -> anyhow::Result<()> {
        let mut walks = Vec::new();
        for (pos, line) in bots {
            match (line.sight, line.pvs, line.walk) {
                (Some(sight), _, _) => slots[pos] = self.sight(&sight, chunk[pos].0).await?,
                (None, Some(pvs), _) => slots[pos] = self.pvs(&pvs, chunk[pos].0).await?,
                (None, None, Some(walk)) => walks.push((pos, walk)),
                (None, None, None) => {
                    anyhow::bail!("line {} is not a bot line", chunk[pos].0 + 1)
                }
            }
        }
        self.walks(walks, chunk, slots).await
    }

    async fn sight(&mut self, line: &SightLine, line_index: usize) -> anyhow::Result<Slot> {
        if line.targets.as_ref().is_some_and(Vec::is_empty) {
            // No targets (not "the eyes": the message cannot tell them
            // apart): every row is empty, with no ray to trace.
            let visible = vec![String::new(); line.eyes.len()];
            return Ok(written(BotAnswer::Sight(SightAnswer { visible })));
        }
        let packed = |points: &[[f64; 3]]| -> Vec<f32> {
            points.iter().flatten().map(|&c| c as f32).collect()
        };
        let request = pb::SightRequest {
            world: self.world.clone(),
            eyes: packed(&line.eyes),
            targets: line.targets.as_deref().map_or_else(Vec::new, packed),
            mask: line.mask,
            scene: self.scene.clone(),
        };
        let reply = match self.client.sight(request).await {
            Ok(reply) => reply.into_inner(),
            Err(status) => {
                return match Rejected::from_status(&status) {
                    Some(r) => Ok(Slot::rejected(line_index, &r.code, r.message)),
                    None => Err(status_error(status)),
                }
            }
        };
        let matrix =
            SightMatrix::from_packed(reply.eyes as usize, reply.targets as usize, &reply.visible)
                .ok_or_else(|| {
                anyhow::anyhow!("the server's sight matrix does not hold eyes × targets bits")
            })?;
        let visible = matrix.rows();
        Ok(written(BotAnswer::Sight(SightAnswer { visible })))
    }

    /// A PVS line as one `Pvs` call (a scene changes no potential
    /// visibility, so none is sent).
    async fn pvs(&mut self, line: &PvsLine, line_index: usize) -> anyhow::Result<Slot> {
        let with_targets = line.targets.is_some();
        let reply = match self.client.pvs(pvs_message(&self.world, line)).await {
            Ok(reply) => reply.into_inner(),
            Err(status) => {
                return match Rejected::from_status(&status) {
                    Some(r) => Ok(Slot::rejected(line_index, &r.code, r.message)),
                    None => Err(status_error(status)),
                }
            }
        };
        // No targets (not "the points": the message cannot tell them
        // apart): the server answered the points among themselves, and
        // every row is empty.
        if line.targets.as_ref().is_some_and(Vec::is_empty) {
            let mut reply = reply;
            reply.visible.clear();
            reply.targets.clear();
            let answer = pvs_answer(&reply, true)
                .ok_or_else(|| anyhow::anyhow!("the server's PVS answer is malformed"))?;
            return Ok(written(BotAnswer::Pvs(answer)));
        }
        let answer = pvs_answer(&reply, with_targets).ok_or_else(|| {
            anyhow::anyhow!("the server's PVS matrix does not hold points × targets bits")
        })?;
        Ok(written(BotAnswer::Pvs(answer)))
    }

    /// Answers walks in one call. When the server rejects a walk, that
    /// line gets the error line and the others are sent again, as for
    /// traces.
    async fn walks(
        &mut self,
        mut walks: Vec<(usize, WalkLine)>,
        chunk: &[InputLine],
        slots: &mut [Slot],
    ) -> anyhow::Result<()> {
        while !walks.is_empty() {
            let request = pb::WalkRequest {
                world: self.world.clone(),
                walks: walks.iter().map(|(_, w)| walk_message(w)).collect(),
                scene: self.scene.clone(),
            };
            let status = match self.client.walk(request).await {
                Ok(reply) => {
                    let answers = walk_answers(&reply.into_inner())
                        .filter(|a| a.len() == walks.len())
                        .ok_or_else(|| anyhow::anyhow!("the server did not answer every walk"))?;
                    for ((pos, _), answer) in walks.iter().zip(answers) {
                        slots[*pos] = written(BotAnswer::Walk(answer));
                    }
                    return Ok(());
                }
                Err(status) => status,
            };
            let Some(rejected) = Rejected::from_status(&status) else {
                return Err(status_error(status));
            };
            let Some(i) = rejected.index.filter(|&i| i < walks.len()) else {
                return Err(status_error(status));
            };
            let (pos, _) = walks.remove(i);
            slots[pos] = Slot::rejected(chunk[pos].0, &rejected.code, rejected.message);
        }
        Ok(())
    }
}
