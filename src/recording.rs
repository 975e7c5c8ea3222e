//! The recent-queries ring buffer (`bspq serve --record-queries N`): the
//! last N traces each world answered, over any transport, with their
//! answers, for the debugging page and `GET /v1/worlds/{name}/recent`.
//!
//! Off unless asked (N = 0: nothing is kept and recording costs one branch
//! per batch). Each world keeps at most N entries, each of bounded size (a
//! convex shape has at most [`crate::query::MAX_CONVEX_POINTS`] points), and
//! the last scene a batch was traced with when it has at most
//! [`MAX_RECORDED_ENTITIES`] entities. A world's buffer goes with its
//! unload.

use crate::query::{Answer, EntityLine, QueryLine, ShapeLine};
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// Largest `--record-queries`: 1 Mi entries of a few hundred bytes each
/// bound the memory per world.
pub const MAX_RECORDED_QUERIES: usize = 1 << 20;

/// Largest scene kept as "the last scene" (a larger one is not kept).
pub const MAX_RECORDED_ENTITIES: usize = 1024;

/// How a trace ended, as the page colours it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Went the whole way (`fraction` 1, or an any-hit trace that hit nothing).
    Miss,
    /// Stopped on something (`fraction` < 1, or an any-hit trace that hit).
    Hit,
    /// Started inside a solid but left it.
    StartSolid,
    /// Started inside a solid and never left it.
    AllSolid,
}

/// One recorded trace: the query as sent and how it was answered.
#[derive(Debug, Clone, Serialize)]
pub struct RecordedTrace {
    /// Numbers every recorded trace of a world, from 1, in answer order.
    pub seq: u64,
    /// When it was answered: milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The world version that answered.
    pub version: u64,
    /// `ray`, `box`, `shape` or `hull`.
    pub kind: &'static str,
    /// The query's mask (its default, MASK_SOLID, when it named none).
    pub mask: u32,
    pub start: [f64; 3],
    pub end: [f64; 3],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mins: Option<[f64; 3]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maxs: Option<[f64; 3]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<ShapeLine>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hull: Option<String>,
    /// An any-hit trace (answered only hit or not).
    pub any: bool,
    /// Traced with a scene.
    pub in_scene: bool,
    pub outcome: Outcome,
    /// The answer as the client got it.
    pub answer: Answer,
}

/// What `GET /v1/worlds/{name}/recent` answers.
#[derive(Debug, Clone, Serialize)]
pub struct Recent {
    pub world: String,
    /// The buffer's size per world (0: recording is off).
    pub capacity: usize,
    /// Traces recorded for this world so far (including those the buffer
    /// no longer holds).
    pub recorded: u64,
    /// The last scene a recorded batch was traced with.
    pub scene: Option<Vec<EntityLine>>,
    /// Oldest first.
    pub traces: Vec<RecordedTrace>,
}

/// Which recorded traces to show.
#[derive(Debug, Clone, Default)]
pub struct RecentFilter {
    pub kind: Option<String>,
    pub mask: Option<u32>,
    /// Only traces numbered after this.
    pub after: Option<u64>,
}

impl RecentFilter {
    fn keeps(&self, t: &RecordedTrace) -> bool {
        self.kind.as_deref().is_none_or(|k| k == t.kind)
            && self.mask.is_none_or(|m| m == t.mask)
            && self.after.is_none_or(|a| t.seq > a)
    }
}

#[derive(Debug, Default)]
struct WorldLog {
    traces: VecDeque<RecordedTrace>,
    recorded: u64,
    scene: Option<Vec<EntityLine>>,
}

/// Every world's recent traces.
#[derive(Debug, Default)]
pub struct Recorder {
    capacity: usize,
    worlds: Mutex<HashMap<String, WorldLog>>,
}

impl Recorder {
    /// Keeps the last `capacity` traces per world (0: off), at most
    /// [`MAX_RECORDED_QUERIES`].
    pub fn new(capacity: usize) -> Self {
        Recorder {
            capacity: capacity.min(MAX_RECORDED_QUERIES),
            worlds: Mutex::default(),
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn is_on(&self) -> bool {
        self.capacity > 0
    }

    /// Records a batch's traces (its other lines are left out) and its
    /// scene: `lines[i]` was answered `answers[i]` by `version` of `world`.
    pub fn record(
        &self,
        world: &str,
        version: u64,
        scene: Option<&[EntityLine]>,
        lines: &[QueryLine],
        answers: &[Answer],
    ) {
        if !self.is_on() {
            return;
        }
        let at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        // The scene the batch ended with: its last scene line, else the
        // request's own.
        let last_scene = lines
            .iter()
            .rev()
            .find_map(|l| l.entities.as_deref())
            .or(scene)
            .filter(|s| s.len() <= MAX_RECORDED_ENTITIES);
        let mut worlds = self.worlds.lock().unwrap_or_else(|p| p.into_inner());
        let log = worlds.entry(world.to_owned()).or_default();
        if let Some(s) = last_scene {
            log.scene = Some(s.to_vec());
        }
        // Only the last `capacity` traces of a large batch can stay.
        let traces = lines.iter().filter(|l| is_trace(l)).count();
        let mut skip = traces.saturating_sub(self.capacity);
        let mut in_scene = scene.is_some();
        for (line, answer) in lines.iter().zip(answers) {
            in_scene |= line.entities.is_some();
            if !is_trace(line) {
                continue;
            }
            let Some(outcome) = outcome(answer) else {
                continue;
            };
            log.recorded += 1;
            if skip > 0 {
                skip -= 1;
                continue;
            }
            if log.traces.len() == self.capacity {
                log.traces.pop_front();
            }
            log.traces.push_back(RecordedTrace {
                seq: log.recorded,
                at_ms,
                version,
                kind: kind(line),
                mask: line.mask.unwrap_or(crate::contents::MASK_SOLID),
                start: line.start.unwrap_or_default(),
                end: line.end.unwrap_or_default(),
                mins: line.mins,
                maxs: line.maxs,
                shape: line.shape.clone(),
                hull: line.hull.clone(),
                any: line.any == Some(true),
                in_scene,
                outcome,
                answer: answer.clone(),
            });
        }
    }

    /// Counts `n` traces answered but not kept (the head of a batch larger
    /// than the buffer, recorded without making their lines).
    pub fn count_unkept(&self, world: &str, n: u64) {
        if !self.is_on() || n == 0 {
            return;
        }
        let mut worlds = self.worlds.lock().unwrap_or_else(|p| p.into_inner());
        worlds.entry(world.to_owned()).or_default().recorded += n;
    }

    /// A world's recorded traces that pass `filter`, oldest first.
    pub fn recent(&self, world: &str, filter: &RecentFilter) -> Recent {
        let worlds = self.worlds.lock().unwrap_or_else(|p| p.into_inner());
        let log = worlds.get(world);
        Recent {
            world: world.to_owned(),
            capacity: self.capacity,
            recorded: log.map_or(0, |l| l.recorded),
            scene: log.and_then(|l| l.scene.clone()),
            traces: log
                .map(|l| {
                    l.traces
                        .iter()
                        .filter(|t| filter.keeps(t))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// Drops a world's buffer (it was unloaded).
    pub fn forget(&self, world: &str) {
        let mut worlds = self.worlds.lock().unwrap_or_else(|p| p.into_inner());
        worlds.remove(world);
    }
}

/// A trace line (not a point, scene or movement line).
fn is_trace(line: &QueryLine) -> bool {
    line.start.is_some() && line.end.is_some() && line.entities.is_none()
}

fn kind(line: &QueryLine) -> &'static str {
    if line.hull.is_some() {
        "hull"
    } else if line.shape.is_some() {
        "shape"
    } else if line.mins.is_some() || line.maxs.is_some() {
        "box"
    } else {
        "ray"
    }
}

fn outcome(answer: &Answer) -> Option<Outcome> {
    Some(match answer {
        Answer::Trace(t) if t.allsolid => Outcome::AllSolid,
        Answer::Trace(t) if t.startsolid => Outcome::StartSolid,
        Answer::Trace(t) if t.fraction < 1.0 => Outcome::Hit,
        Answer::Trace(_) => Outcome::Miss,
        Answer::Hit(h) if h.hit => Outcome::Hit,
        Answer::Hit(_) => Outcome::Miss,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::{HitAnswer, TraceAnswer};

    fn trace(fraction: f32, startsolid: bool, allsolid: bool) -> Answer {
        Answer::Trace(TraceAnswer {
            fraction,
            endpos: [0.0; 3],
            normal: [0.0; 3],
            dist: 0.0,
            startsolid,
            allsolid,
            contents: 0,
            surface_flags: 0,
            entity: None,
        })
    }

    fn ray(x: f64, mask: Option<u32>) -> QueryLine {
        QueryLine {
            start: Some([x, 0.0, 0.0]),
            end: Some([x, 0.0, -10.0]),
            mask,
            ..Default::default()
        }
    }

    #[test]
    fn off_records_nothing() {
        let r = Recorder::new(0);
        r.record("w", 1, None, &[ray(0.0, None)], &[trace(1.0, false, false)]);
        let recent = r.recent("w", &RecentFilter::default());
        assert_eq!((recent.capacity, recent.recorded), (0, 0));
        assert!(recent.traces.is_empty());
    }

    #[test]
    fn keeps_the_last_n_traces_with_their_outcomes() {
        let r = Recorder::new(3);
        let point = QueryLine {
            point: Some([0.0; 3]),
            ..Default::default()
        };
        let boxed = QueryLine {
            mins: Some([-1.0; 3]),
            maxs: Some([1.0; 3]),
            ..ray(4.0, Some(1))
        };
        let lines = [
            ray(0.0, None),
            point,
            ray(1.0, Some(1)),
            ray(2.0, Some(1)),
            QueryLine {
                any: Some(true),
                ..ray(3.0, None)
            },
            boxed,
        ];
        let answers = [
            trace(1.0, false, false),
            Answer::Point(crate::query::PointAnswer { contents: 1 }),
            trace(0.5, false, false),
            trace(0.0, true, false),
            Answer::Hit(HitAnswer { hit: false }),
            trace(0.0, true, true),
        ];
        r.record("w", 7, None, &lines, &answers);
        let all = r.recent("w", &RecentFilter::default());
        // Five traces (the point is left out), the last three kept.
        assert_eq!(all.recorded, 5);
        let seen: Vec<_> = all
            .traces
            .iter()
            .map(|t| (t.seq, t.start[0], t.kind, t.outcome, t.any))
            .collect();
        assert_eq!(
            seen,
            [
                (3, 2.0, "ray", Outcome::StartSolid, false),
                (4, 3.0, "ray", Outcome::Miss, true),
                (5, 4.0, "box", Outcome::AllSolid, false),
            ]
        );
        assert_eq!(all.traces[1].mask, crate::contents::MASK_SOLID);
        let boxes = RecentFilter {
            kind: Some("box".into()),
            ..Default::default()
        };
        assert_eq!(r.recent("w", &boxes).traces.len(), 1);
        let mask1 = RecentFilter {
            mask: Some(1),
            ..Default::default()
        };
        let seqs: Vec<u64> = r.recent("w", &mask1).traces.iter().map(|t| t.seq).collect();
        // (#4 named no mask: it has the default, MASK_SOLID = 1.)
        assert_eq!(seqs, [3, 4, 5]);
        let after = RecentFilter {
            after: Some(4),
            ..Default::default()
        };
        assert_eq!(r.recent("w", &after).traces.len(), 1);
        assert!(r
            .recent("other", &RecentFilter::default())
            .traces
            .is_empty());
        r.forget("w");
        assert_eq!(r.recent("w", &RecentFilter::default()).recorded, 0);
    }

    #[test]
    fn a_batch_larger_than_the_buffer_keeps_its_end() {
        let r = Recorder::new(2);
        let lines: Vec<QueryLine> = (0..10).map(|i| ray(i as f64, None)).collect();
        let answers = vec![trace(1.0, false, false); 10];
        r.record("w", 1, None, &lines, &answers);
        let recent = r.recent("w", &RecentFilter::default());
        assert_eq!(recent.recorded, 10);
        let xs: Vec<(u64, f64)> = recent.traces.iter().map(|t| (t.seq, t.start[0])).collect();
        assert_eq!(xs, [(9, 8.0), (10, 9.0)]);
        // The same batch's tail recorded alone, its head only counted.
        let r = Recorder::new(2);
        r.count_unkept("w", 8);
        r.record("w", 1, None, &lines[8..], &answers[8..]);
        let tail = r.recent("w", &RecentFilter::default());
        let same: Vec<(u64, f64)> = tail.traces.iter().map(|t| (t.seq, t.start[0])).collect();
        assert_eq!((tail.recorded, same), (10, xs));
    }
}
