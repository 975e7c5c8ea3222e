//! `bspq bench --scene FILE`: the file's box queries traced through the
//! world alone and through the world and a scene, side by side: runs
//! alternate, and the cost of the scene is the median of the runs' ratios.

use super::{stats_line, Measured, Stats};
use anyhow::{bail, Context, Result};
use bspq::map::Map;
use bspq::query::QueryLine;
use bspq::scene::{PlacedScene, ENTITY_NONE};
use bspq::trace::{trace, Scratch, TraceQuery};
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

pub struct SceneRun {
    pub entities: usize,
    pub queries: usize,
    pub world: Measured,
    pub scene: Measured,
    /// Median over the runs of world-only time over scene time… inverted:
    /// how many times longer a query takes with the scene.
    pub scene_over_world: f64,
    /// Share of the queries the scene answered with an entity.
    pub entity_share: f64,
}

/// The scene of FILE: one line `{"entities":[…]}`.
fn read_scene<'m>(map: &'m Map, path: &Path) -> Result<PlacedScene<'m>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the scene {}", path.display()))?;
    let line = QueryLine::parse(text.trim())
        .with_context(|| format!("{} is not a scene line", path.display()))?;
    let Some(scene) = line.scene() else {
        bail!("{} holds no {{\"entities\":[…]}} line", path.display());
    };
    Ok(PlacedScene::new(map, &scene?)?)
}

pub fn run(
    map: &Map,
    path: &Path,
    boxes: &[TraceQuery],
    runs: usize,
    min_run: Duration,
) -> Result<SceneRun> {
    let scene = read_scene(map, path)?;
    let world = map.view();
    let mut scratch = Scratch::new();
    let by_entity = boxes
        .iter()
        .filter(|q| scene.trace(q, ENTITY_NONE, &mut scratch).1 < 1022)
        .count();
    let mut world_pass = |scratch: &mut Scratch| {
        for q in boxes {
            black_box(trace(&world, black_box(q), scratch));
        }
    };
    let mut scene_pass = |scratch: &mut Scratch| {
        for q in boxes {
            black_box(scene.trace(black_box(q), ENTITY_NONE, scratch));
        }
    };
    // Enough passes per run for `min_run`, from one timed pass of each.
    let once = |pass: &mut dyn FnMut(&mut Scratch), scratch: &mut Scratch| {
        let t = Instant::now();
        pass(scratch);
        t.elapsed().max(Duration::from_nanos(1))
    };
    let slower = once(&mut world_pass, &mut scratch).max(once(&mut scene_pass, &mut scratch));
    let passes = (min_run.as_secs_f64() / slower.as_secs_f64())
        .ceil()
        .max(1.0) as usize;
    let (mut world_qps, mut scene_qps, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let mut timed = |pass: &mut dyn FnMut(&mut Scratch)| {
            let t = Instant::now();
            for _ in 0..passes {
                pass(&mut scratch);
            }
            (boxes.len() * passes) as f64 / t.elapsed().as_secs_f64()
        };
        let w = timed(&mut world_pass);
        let s = timed(&mut scene_pass);
        world_qps.push(w);
        scene_qps.push(s);
        ratios.push(w / s);
    }
    ratios.sort_by(f64::total_cmp);
    Ok(SceneRun {
        entities: scene.len(),
        queries: boxes.len(),
        world: Measured {
            wall: Stats::from_runs(world_qps, passes),
            cpu: None,
        },
        scene: Measured {
            wall: Stats::from_runs(scene_qps, passes),
            cpu: None,
        },
        scene_over_world: ratios.get(ratios.len() / 2).copied().unwrap_or(f64::NAN),
        entity_share: by_entity as f64 / boxes.len().max(1) as f64,
    })
}

impl SceneRun {
    pub fn report(&self) -> Vec<String> {
        vec![
            stats_line("world", &self.world),
            stats_line("scene", &self.scene),
            format!(
                "scene      {} entities, {:.2}x the world-only time per box query ({} queries, {:.1}% answered by an entity)",
                self.entities,
                self.scene_over_world,
                self.queries,
                100.0 * self.entity_share
            ),
        ]
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "entities": self.entities,
            "queries": self.queries,
            "world_qps": self.world.wall.median,
            "scene_qps": self.scene.wall.median,
            "scene_over_world": self.scene_over_world,
            "entity_share": self.entity_share,
        })
    }
}
