//! `bspq workload`: query lines for any world in the style of the
//! conformance data's ray and box files, to benchmark a map that
//! has no query file (`bspq bench --queries`), replay it at a server
//! (`bspq load --queries`) or trace it (`bspq trace`).
//!
//! Every move starts at an empty point (no solid, no player clip) inside
//! the level, tried uniformly over the world's bounds: for a Quake 3 map,
//! one in a leaf of the map's own tree with a cluster (where the map
//! compiler's flood fill from the entities reached; the conformance data's
//! starts are all such points); for a compiled world file, which no longer
//! holds clusters, one whose six axis-aligned sight lines all meet
//! something (the void around a sealed map fails one of them; so do some
//! spots inside open maps).
//! Rays are half short moves (16–256 units, any direction) and half sight
//! lines between two such points, with the solid and shot masks in turn.
//! Boxes are standing and crouching player boxes walking (mostly short
//! moves, nearly level) and dropping (straight down, up to 1 000 units)
//! with the player-solid mask, and small boxes of random, often lopsided,
//! shape moving any way up to 400 units with the solid mask: the shares of
//! the conformance data's box files. Ticks are a game server's per-tick
//! traffic in a scene: a scene line first (`--players` standing player
//! boxes where they fit, and every inline model at its own place), then per
//! player in turn a move (a quarter crouching), a ground probe, and a shot,
//! a line of sight (any-hit) or a point, each naming the player as `pass`.
//! Moves are the same scene line, then one frame of Quake 3's step-slide
//! move per player in turn (a tick of player movement): running at 320
//! units/s in any direction over the floor it stands on, or, for a fifth of
//! them and those not on walkable ground, jumping or falling under gravity.
//! Coordinates are on a 1/32-unit grid.

use super::check::query_line;
use super::WorldArgs;
use anyhow::bail;
use bspq::contents::{
    CONTENTS_PLAYERCLIP, CONTENTS_SOLID, MASK_PLAYERSOLID, MASK_SHOT, MASK_SOLID,
};
use bspq::map::{read_source, WorldSpec};
use bspq::math::random_direction;
use bspq::source::q3bsp::{looks_like_ibsp, Q3Bsp};
use bspq::trace::Kernel as World;
use bspq::trace::{point_contents, trace, InvalidTrace, Scratch, TraceQuery};
use clap::{Args, ValueEnum};
use glam::Vec3;
use std::io::Write;
use std::process::ExitCode;

#[derive(Args)]
pub struct WorkloadArgs {
    #[command(flatten)]
    world: WorldArgs,
    /// What to make: `rays` (short moves and sight lines), `boxes`
    /// (player moves and drops, small boxes) or `ticks` (a scene line, then
    /// the players' moves, ground probes, shots, sight lines and points) or
    /// `moves` (a scene line, then one step-slide move per player in turn).
    #[arg(long, value_enum)]
    kind: Kind,
    /// Players in the scene of `ticks` and `moves` (at most 1 000).
    #[arg(long, default_value_t = 64, value_parser = super::count_up_to::<1000>)]
    players: usize,
    /// Query lines to write.
    #[arg(long, default_value_t = 20_000)]
    count: usize,
    /// Seed (the same seed and world give the same lines).
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Kind {
    Rays,
    Boxes,
    Ticks,
    Moves,
}

/// Distinct start points kept (moves reuse them, as players revisit places).
const MAX_STARTS: usize = 4096;
/// Random points tried per start point wanted, at most.
const TRIES_PER_START: usize = 64;

/// Starts tried for a box before one it does not fit is kept.
const FIT_TRIES: usize = 8;

const STANDING: ([f32; 3], [f32; 3]) = ([-15.0, -15.0, -24.0], [15.0, 15.0, 32.0]);
const CROUCHING: ([f32; 3], [f32; 3]) = ([-15.0, -15.0, -24.0], [15.0, 15.0, 16.0]);

pub fn run(args: WorkloadArgs) -> anyhow::Result<ExitCode> {
    if args.count == 0 {
        bail!("--count must be at least 1");
    }
    let loaded = args.world.open()?;
    let world = loaded.view();
    let mut rng = fastrand::Rng::with_seed(args.seed);
    // A Quake 3 map tells inside from outside by its leaves' clusters; a
    // compiled world file no longer holds them.
    let spec = WorldSpec::parse(&args.world.world);
    let source = read_source(&spec)
        .ok()
        .filter(|bytes| looks_like_ibsp(bytes))
        .and_then(|bytes| Q3Bsp::parse(&bytes).ok());
    let starts = inside_points(
        &world,
        source.as_ref(),
        &mut rng,
        args.count.min(MAX_STARTS),
    );
    if starts.is_empty() {
        bail!(
            "no empty point inside the level found in {}",
            args.world.world
        );
    }
    let mut scratch = Scratch::new();
    let mut out = super::answers_out();
    if matches!(args.kind, Kind::Ticks | Kind::Moves) {
        let players = players(&world, &starts, &mut rng, &mut scratch, args.players)?;
        writeln!(out, "{}", scene_line(&players, loaded.models().len()))?;
        let lines = if args.kind == Kind::Ticks {
            tick_lines(&players, &mut rng, args.count)?
        } else {
            move_lines(&world, &players, &mut rng, &mut scratch, args.count)?
        };
        for line in lines {
            writeln!(out, "{line}")?;
        }
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    for i in 0..args.count {
        let query = match args.kind {
            Kind::Rays => ray(&starts, &mut rng, i),
            Kind::Boxes | Kind::Ticks | Kind::Moves => {
                moving_box(&world, &starts, &mut rng, &mut scratch)
            }
        }?;
        writeln!(out, "{}", query_line(&query))?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Up to `wanted` distinct empty points inside the level (see the module
/// notes), tried uniformly over the world's bounds.
fn inside_points(
    world: &World,
    source: Option<&Q3Bsp>,
    rng: &mut fastrand::Rng,
    wanted: usize,
) -> Vec<Vec3> {
    let (lo, hi) = (Vec3::from(world.mins), Vec3::from(world.maxs));
    let reach = (hi - lo).length().max(1.0) * 2.0;
    let mut scratch = Scratch::new();
    let mut inside = |p: Vec3| match source {
        Some(map) => map.cluster_at(p).is_some_and(|cluster| cluster >= 0),
        None => [
            Vec3::X,
            Vec3::Y,
            Vec3::Z,
            Vec3::NEG_X,
            Vec3::NEG_Y,
            Vec3::NEG_Z,
        ]
        .iter()
        .all(|&dir| {
            TraceQuery::ray(p, p + dir * reach, MASK_SOLID)
                .is_ok_and(|sight| trace(world, &sight, &mut scratch).fraction < 1.0)
        }),
    };
    let mut points = Vec::new();
    for _ in 0..wanted.saturating_mul(TRIES_PER_START) {
        if points.len() == wanted {
            break;
        }
        let p = snap(lo + (hi - lo) * Vec3::new(rng.f32(), rng.f32(), rng.f32()));
        let empty = point_contents(world, p) & (CONTENTS_SOLID | CONTENTS_PLAYERCLIP) == 0;
        if empty && inside(p) {
            points.push(p);
        }
    }
    points
}

/// Ray `i`: even ones a short move, odd ones a sight line to another start;
/// the solid mask and the shot mask in turn.
fn ray(starts: &[Vec3], rng: &mut fastrand::Rng, i: usize) -> Result<TraceQuery, InvalidTrace> {
    let start = pick(starts, rng);
    let end = if i.is_multiple_of(2) {
        start + random_direction(rng) * (16.0 + 240.0 * rng.f32())
    } else {
        pick(starts, rng)
    };
    let mask = if (i / 2).is_multiple_of(2) {
        MASK_SOLID
    } else {
        MASK_SHOT
    };
    TraceQuery::ray(start, snap(end), mask)
}

/// A box move: a player walking (53 %, a quarter of them crouching) or
/// dropping (17 %, likewise), or a small box (30 %), from a start where the
/// box fits (tried at a few starts, as a player stands where it fits).
fn moving_box(
    world: &World,
    starts: &[Vec3],
    rng: &mut fastrand::Rng,
    scratch: &mut Scratch,
) -> Result<TraceQuery, InvalidTrace> {
    let roll = rng.f32();
    let player = |rng: &mut fastrand::Rng| {
        if rng.f32() < 0.25 {
            CROUCHING
        } else {
            STANDING
        }
    };
    let ((mins, maxs), mask) = if roll < 0.70 {
        (player(rng), MASK_PLAYERSOLID)
    } else {
        (small_box(rng), MASK_SOLID)
    };
    let (mins, maxs) = (Vec3::from(mins), Vec3::from(maxs));
    let mut start = pick(starts, rng);
    for _ in 0..FIT_TRIES {
        let stand = TraceQuery::boxed(start, start, mins, maxs, mask)?;
        if !trace(world, &stand, scratch).startsolid {
            break;
        }
        start = pick(starts, rng);
    }
    let end = if roll < 0.53 {
        // Mostly short steps, a few long ones, nearly level.
        let angle = rng.f32() * std::f32::consts::TAU;
        let length = 384.0 * rng.f32() * rng.f32();
        let step = Vec3::new(angle.cos() * length, angle.sin() * length, 0.0);
        start + step + Vec3::Z * ((rng.f32() - 0.5) * 128.0)
    } else if roll < 0.70 {
        start - Vec3::Z * (16.0 + 984.0 * rng.f32())
    } else {
        start + random_direction(rng) * (400.0 * rng.f32())
    };
    TraceQuery::boxed(start, snap(end), mins, maxs, mask)
}

/// A small box: half the time a cube about its centre, else a box of three
/// sizes off its centre.
fn small_box(rng: &mut fastrand::Rng) -> ([f32; 3], [f32; 3]) {
    if rng.f32() < 0.5 {
        let half = snap_scalar(1.0 + 31.0 * rng.f32());
        return ([-half; 3], [half; 3]);
    }
    let mut mins = [0.0; 3];
    let mut maxs = [0.0; 3];
    for k in 0..3 {
        let half = 2.0 + 30.0 * rng.f32();
        let offset = (rng.f32() - 0.5) * 80.0;
        mins[k] = snap_scalar(offset - half);
        maxs[k] = snap_scalar(offset + half);
    }
    (mins, maxs)
}

fn pick(starts: &[Vec3], rng: &mut fastrand::Rng) -> Vec3 {
    starts[rng.usize(..starts.len())]
}

/// On the 1/32-unit grid.
fn snap(v: Vec3) -> Vec3 {
    (v * 32.0).round() / 32.0
}

fn snap_scalar(x: f32) -> f32 {
    (x * 32.0).round() / 32.0
}

/// Where `count` standing players stand: on the floor below starts where
/// the box fits.
fn players(
    world: &World,
    starts: &[Vec3],
    rng: &mut fastrand::Rng,
    scratch: &mut Scratch,
    count: usize,
) -> Result<Vec<Vec3>, InvalidTrace> {
    let (mins, maxs) = (Vec3::from(STANDING.0), Vec3::from(STANDING.1));
    let mut players = Vec::with_capacity(count);
    while players.len() < count {
        let mut at = pick(starts, rng);
        for _ in 0..FIT_TRIES {
            let stand = TraceQuery::boxed(at, at, mins, maxs, MASK_PLAYERSOLID)?;
            if !trace(world, &stand, scratch).startsolid {
                break;
            }
            at = pick(starts, rng);
        }
        // On the floor below, as players mostly are.
        let drop = TraceQuery::boxed(at, at - Vec3::Z * 1000.0, mins, maxs, MASK_PLAYERSOLID)?;
        players.push(snap(trace(world, &drop, scratch).endpos));
    }
    Ok(players)
}

/// The scene: player `k` is entity `k`, then the inline models `*1…*models`
/// at their own places.
fn scene_line(players: &[Vec3], models: usize) -> String {
    let boxes = players.iter().enumerate().map(|(id, p)| {
        serde_json::json!({"id": id, "box": {"mins": STANDING.0, "maxs": STANDING.1},
                           "origin": p.to_array()})
    });
    let movers = (1..=models)
        .map(|k| serde_json::json!({"id": players.len() + k - 1, "model": format!("*{k}")}));
    serde_json::json!({"entities": boxes.chain(movers).collect::<Vec<_>>()}).to_string()
}

/// `count` query lines: each player in turn moves, probes the ground, then
/// shoots at, looks at (any-hit) or tests the contents under another.
fn tick_lines(
    players: &[Vec3],
    rng: &mut fastrand::Rng,
    count: usize,
) -> Result<Vec<String>, InvalidTrace> {
    let eye = Vec3::Z * 26.0;
    let mut lines = Vec::with_capacity(count);
    for i in 0.. {
        let id = i % players.len();
        let at = players[id];
        let (mins, maxs) = if rng.f32() < 0.25 {
            CROUCHING
        } else {
            STANDING
        };
        let (mins, maxs) = (Vec3::from(mins), Vec3::from(maxs));
        let angle = rng.f32() * std::f32::consts::TAU;
        let step = Vec3::new(angle.cos(), angle.sin(), 0.0) * (8.0 + 24.0 * rng.f32());
        let mut with_pass = |q: &TraceQuery, any: bool| {
            let mut line: serde_json::Value =
                serde_json::from_str(&query_line(q)).unwrap_or_default();
            line["pass"] = id.into();
            if any {
                line["any"] = true.into();
            }
            lines.push(line.to_string());
        };
        with_pass(
            &TraceQuery::boxed(at, snap(at + step), mins, maxs, MASK_PLAYERSOLID)?,
            false,
        );
        let ground = at - Vec3::Z * 0.25;
        with_pass(
            &TraceQuery::boxed(at, ground, mins, maxs, MASK_PLAYERSOLID)?,
            false,
        );
        let other = pick(players, rng);
        let roll = rng.f32();
        if roll < 0.4 {
            let aim = (other + eye - (at + eye)).normalize_or(Vec3::X);
            with_pass(
                &TraceQuery::ray(at + eye, snap(at + eye + aim * 8192.0), MASK_SHOT)?,
                false,
            );
        } else if roll < 0.8 {
            with_pass(&TraceQuery::ray(at + eye, other + eye, MASK_SOLID)?, true);
        } else {
            lines.push(
                serde_json::json!({"point": (at - Vec3::Z * 25.0).to_array(), "pass": id})
                    .to_string(),
            );
        }
        if lines.len() >= count {
            break;
        }
    }
    lines.truncate(count);
    Ok(lines)
}

/// Units per second a Quake 3 player runs at, and jumps up at.
const RUN_SPEED: f32 = 320.0;
const JUMP_SPEED: f32 = 270.0;
/// Quake 3's default gravity (units/s²) and a 60 Hz frame.
const GRAVITY: i64 = 800;
const FRAMETIME: f64 = 1.0 / 60.0;
/// A plane a player can stand on faces up at least this much.
const WALKABLE_NORMAL_Z: f32 = 0.7;

/// `count` slide lines: each player in turn runs one frame over the floor
/// it stands on (its normal from a ground probe), or jumps or falls.
fn move_lines(
    world: &World,
    players: &[Vec3],
    rng: &mut fastrand::Rng,
    scratch: &mut Scratch,
    count: usize,
) -> Result<Vec<String>, InvalidTrace> {
    let mut lines = Vec::with_capacity(count);
    for i in 0..count {
        let id = i % players.len();
        let at = players[id];
        let (mins, maxs) = if rng.f32() < 0.25 {
            CROUCHING
        } else {
            STANDING
        };
        let probe = TraceQuery::boxed(
            at,
            at - Vec3::Z * 0.25,
            Vec3::from(mins),
            Vec3::from(maxs),
            MASK_PLAYERSOLID,
        )?;
        let floor = trace(world, &probe, scratch);
        let standing = floor.fraction < 1.0 && floor.normal.z >= WALKABLE_NORMAL_Z;
        let angle = rng.f32() * std::f32::consts::TAU;
        let mut velocity = Vec3::new(angle.cos(), angle.sin(), 0.0) * RUN_SPEED;
        let mut slide = serde_json::json!({
            "frametime": FRAMETIME, "mins": mins, "maxs": maxs, "mask": MASK_PLAYERSOLID,
            "pass": id,
        });
        if standing && rng.f32() >= 0.2 {
            slide["ground"] = floor.normal.to_array().into();
        } else {
            if standing {
                velocity.z = JUMP_SPEED;
            }
            slide["gravity"] = GRAVITY.into();
        }
        slide["origin"] = at.to_array().into();
        slide["velocity"] = snap(velocity).to_array().into();
        lines.push(serde_json::json!({ "slide": slide }).to_string());
    }
    Ok(lines)
}
