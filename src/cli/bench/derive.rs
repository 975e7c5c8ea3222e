//! Coherent workloads derived from a query file, for measuring what the
//! coherence pass and packets do with queries that share their start (the
//! oracle files' queries are spread over the whole map).

use bspq::math::Vec3;
use bspq::trace::TraceQuery;
use clap::ValueEnum;

/// A workload made from the file's traces (as many queries as the file has).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Derive {
    /// A bot's view: from each start, 16 rays of 1024 units in random
    /// directions within ±46° of yaw and ±17° of pitch of a random heading.
    Fans,
    /// A player's tick: each query's move, a ground check 1/4 unit down, a
    /// step 18 units up and the move from there, with the query's box.
    Ticks,
}

/// Rays per fan.
const FAN: usize = 16;
/// How far a fan's rays reach (units).
const FAN_LENGTH: f32 = 1024.0;
/// A player's step height (units), as Quake 3's.
const STEP: f32 = 18.0;
/// How far below the box a ground check looks (units).
const GROUND_CHECK: f32 = 0.25;

/// The derived workload: `traces.len()` queries (fewer when the file has
/// fewer than one fan or tick's worth), the same on every run.
pub fn derive(kind: Derive, traces: &[TraceQuery]) -> Vec<TraceQuery> {
    let mut rng = fastrand::Rng::with_seed(0x005e_ed0f_b5f0);
    let mut out = Vec::with_capacity(traces.len());
    match kind {
        Derive::Fans => {
            for q in traces.iter().take(traces.len() / FAN) {
                let heading = rng.f32() * std::f32::consts::TAU;
                for _ in 0..FAN {
                    let yaw = heading + (rng.f32() - 0.5) * 1.6;
                    let pitch = (rng.f32() - 0.5) * 0.6;
                    let dir = Vec3::new(
                        yaw.cos() * pitch.cos(),
                        yaw.sin() * pitch.cos(),
                        pitch.sin(),
                    );
                    out.push(TraceQuery::ray(q.start, q.start + dir * FAN_LENGTH, q.mask));
                }
            }
        }
        Derive::Ticks => {
            for q in traces
                .iter()
                .filter(|q| q.shape.is_none())
                .take(traces.len() / 4)
            {
                let moved =
                    |start: Vec3, end: Vec3| TraceQuery::boxed(start, end, q.mins, q.maxs, q.mask);
                let up = Vec3::new(0.0, 0.0, STEP);
                out.push(moved(q.start, q.end));
                out.push(moved(q.start, q.start - Vec3::new(0.0, 0.0, GROUND_CHECK)));
                out.push(moved(q.start, q.start + up));
                out.push(moved(q.start + up, q.end + up));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> Vec<TraceQuery> {
        (0..64)
            .map(|i| {
                let start = Vec3::new(i as f32 * 8.0, 0.0, 64.0);
                let half = Vec3::new(15.0, 15.0, 24.0);
                TraceQuery::boxed(start, start + Vec3::X * 100.0, -half, half, 1)
            })
            .collect()
    }

    #[test]
    fn fans_share_their_start_and_reach_the_same_length() {
        let fans = derive(Derive::Fans, &file());
        assert_eq!(fans.len(), 64);
        for fan in fans.chunks(FAN) {
            assert!(fan
                .iter()
                .all(|q| q.start == fan[0].start && q.mins == Vec3::ZERO));
            for q in fan {
                assert!(((q.end - q.start).length() - FAN_LENGTH).abs() < 0.01);
            }
        }
        assert_eq!(fans, derive(Derive::Fans, &file()), "deterministic");
    }

    #[test]
    fn ticks_are_four_moves_of_one_box() {
        let ticks = derive(Derive::Ticks, &file());
        assert_eq!(ticks.len(), 64);
        for tick in ticks.chunks(4) {
            assert!(tick
                .iter()
                .all(|q| q.mins == tick[0].mins && q.maxs == tick[0].maxs));
            assert_eq!(tick[1].end.z, tick[0].start.z - GROUND_CHECK);
            assert_eq!(tick[3].start, tick[2].end);
        }
    }
}
