//! A tick as one gRPC message: query lines (checked) become one
//! `TraceRequest` with a shape table, per-query masks, passes and any-hit,
//! points, moves (ground probes and slide moves) and predictions; its
//! answer becomes answer lines again. `bspq trace --server`
//! and `bspq load` send their queries this way.

use bspq::contents::{MASK_PLAYERSOLID, MASK_SOLID};
use bspq::proto::v1 as pb;
use bspq::query::{
    pass_of, Answer, EntityLine, GroundAnswer, HitAnswer, PointAnswer, PredictAnswer, QueryLine,
    SlideAnswer, TraceAnswer,
};
use bspq::transport::grpc;
use std::collections::HashMap;

/// A scene's entities as the wire message (checked already).
pub fn scene_message(entities: &[EntityLine]) -> pb::Scene {
    let v = |v: [f64; 3]| pb::Vec3 {
        x: v[0] as f32,
        y: v[1] as f32,
        z: v[2] as f32,
    };
    pb::Scene {
        entities: entities
            .iter()
            .map(|e| pb::SceneEntity {
                id: e.id as u32,
                shape: match (&e.model, &e.bbox) {
                    (Some(model), _) => Some(pb::scene_entity::Shape::Model(model.clone())),
                    (None, Some(b)) => Some(pb::scene_entity::Shape::Box(pb::Box {
                        mins: Some(v(b.mins)),
                        maxs: Some(v(b.maxs)),
                    })),
                    (None, None) => None,
                },
                origin: e.origin.map(v),
                angles: e.angles.map(v),
                contents: e.contents,
                owner: e.owner.map(|o| o as u32),
            })
            .collect(),
    }
}

/// The hull a line names, movement lines included.
pub fn hull_name(line: &QueryLine) -> Option<&str> {
    match (&line.ground, &line.slide, &line.predict) {
        (Some(g), _, _) => g.hull.as_deref(),
        (_, Some(s), _) => s.hull.as_deref(),
        (_, _, Some(p)) => p.hull.as_deref(),
        _ => line.hull.as_deref(),
    }
}

/// A tick's shape table: each distinct shape once.
#[derive(Default)]
struct ShapeTable(HashMap<String, u32>);

impl ShapeTable {
    /// `shape`'s index in `m.shapes`, added when new.
    fn index(&mut self, m: &mut pb::TraceRequest, shape: pb::QueryShape) -> u32 {
        let next = self.0.len() as u32;
        *self.0.entry(format!("{shape:?}")).or_insert_with(|| {
            m.shapes.push(shape);
            next
        })
    }
}

/// A move's box as a shape table entry: its hull, or its `mins`/`maxs`.
fn move_shape(
    hull: &Option<String>,
    mins: Option<[f64; 3]>,
    maxs: Option<[f64; 3]>,
) -> pb::QueryShape {
    let vec3 = |v: Option<[f64; 3]>| {
        let [x, y, z] = v.unwrap_or_default().map(|c| c as f32);
        Some(pb::Vec3 { x, y, z })
    };
    pb::QueryShape {
        kind: if let Some(hull) = hull {
            Some(pb::query_shape::Kind::Hull(hull.clone()))
        } else if mins.is_some() || maxs.is_some() {
            Some(pb::query_shape::Kind::Box(pb::Box {
                mins: vec3(mins),
                maxs: vec3(maxs),
            }))
        } else {
            None
        },
        exact: false,
    }
}

/// A line's pass entity as the wire's (checked already).
fn wire_pass(pass: Option<i64>) -> u32 {
    pass_of(pass).unwrap_or(bspq::scene::ENTITY_NONE)
}

/// One tick request and, for each answer in it (the traces, then the
/// points, then the moves, then the predictions), the position of its line
/// in the chunk.
pub struct Tick {
    pub message: pb::TraceRequest,
    /// Each answer's line position: the traces', then the points', the
    /// moves' and the predictions'.
    pub positions: Vec<usize>,
    traces: usize,
    points: usize,
    /// Per move: `None` for a ground probe, else the slide's step flag.
    move_steps: Vec<Option<bool>>,
    /// Per prediction: whether it asked for its path.
    prediction_paths: Vec<bool>,
    any_hits: Vec<bool>,
    /// Whether the message asks any-hit per query (and `hits` comes back).
    hits_answered: bool,
    in_scene: bool,
}

impl Tick {
    pub fn of(world: &str, scene: Option<&pb::Scene>, lines: &[(usize, QueryLine)]) -> Tick {
        let f = |v: [f64; 3]| v.map(|c| c as f32);
        let vec3 = |v: Option<[f64; 3]>| {
            let [x, y, z] = f(v.unwrap_or_default());
            Some(pb::Vec3 { x, y, z })
        };
        let pass = |line: &QueryLine| line.pass().unwrap_or(bspq::scene::ENTITY_NONE);
        let mut m = pb::TraceRequest {
            world: world.to_owned(),
            scene: scene.cloned(),
            ..Default::default()
        };
        let mut positions = Vec::with_capacity(lines.len());
        let mut table = ShapeTable::default();
        for (pos, line) in lines
            .iter()
            .filter(|(_, l)| l.point.is_none() && !l.is_movement())
        {
            let shape = pb::QueryShape {
                kind: if let Some(hull) = &line.hull {
                    Some(pb::query_shape::Kind::Hull(hull.clone()))
                } else if let Some(swept) = &line.shape {
                    Some(pb::query_shape::Kind::Swept(grpc::swept_message(swept)))
                } else if line.mins.is_some() || line.maxs.is_some() {
                    Some(pb::query_shape::Kind::Box(pb::Box {
                        mins: vec3(line.mins),
                        maxs: vec3(line.maxs),
                    }))
                } else {
                    None
                },
                exact: line.exact == Some(true),
            };
            let index = table.index(&mut m, shape);
            m.shape_index.push(index);
            m.starts.extend(f(line.start.unwrap_or_default()));
            m.ends.extend(f(line.end.unwrap_or_default()));
            m.masks.push(line.mask.unwrap_or(MASK_SOLID));
            m.passes.push(pass(line));
            m.any_hits.push(line.any == Some(true));
            positions.push(*pos);
        }
        let traces = positions.len();
        for (pos, line) in lines {
            if let Some(p) = line.point {
                m.points.extend(f(p));
                m.point_passes.push(pass(line));
                positions.push(*pos);
            }
        }
        let points = positions.len() - traces;
        let mut moves = pb::Moves::default();
        let mut move_steps = Vec::new();
        for (pos, line) in lines {
            let (origin, mask, pass, shape) = if let Some(g) = &line.ground {
                moves.kinds.push(pb::MoveKind::Ground as i32);
                moves.velocities.extend([0.0; 3]);
                moves.frametimes.push(0.0);
                moves.gravities.push(0);
                moves.grounds.extend([0.0; 3]);
                moves.steps.push(true);
                move_steps.push(None);
                (
                    g.origin,
                    g.mask,
                    g.pass,
                    move_shape(&g.hull, g.mins, g.maxs),
                )
            } else if let Some(s) = &line.slide {
                let step = s.step.unwrap_or(true);
                moves.kinds.push(pb::MoveKind::Slide as i32);
                moves.velocities.extend(f(s.velocity));
                moves.frametimes.push(s.frametime as f32);
                moves
                    .gravities
                    .push(u32::try_from(s.gravity.unwrap_or(0)).unwrap_or(u32::MAX));
                moves.grounds.extend(f(s.ground.unwrap_or_default()));
                moves.steps.push(step);
                move_steps.push(Some(step));
                (
                    s.origin,
                    s.mask,
                    s.pass,
                    move_shape(&s.hull, s.mins, s.maxs),
                )
            } else {
                continue;
            };
            moves.origins.extend(f(origin));
            moves.masks.push(mask.unwrap_or(MASK_PLAYERSOLID));
            moves.passes.push(wire_pass(pass));
            let index = table.index(&mut m, shape);
            moves.shape_index.push(index);
            positions.push(*pos);
        }
        if !moves.kinds.is_empty() {
            m.moves = Some(moves);
        }
        let mut prediction_paths = Vec::new();
        for (pos, line) in lines {
            let Some(p) = &line.predict else { continue };
            let shape_index = table.index(&mut m, move_shape(&p.hull, p.mins, p.maxs));
            let [x, y, z] = f(p.origin);
            let origin = Some(pb::Vec3 { x, y, z });
            let [x, y, z] = f(p.velocity);
            let velocity = Some(pb::Vec3 { x, y, z });
            m.predictions.push(pb::Prediction {
                origin,
                velocity,
                frametime: p.frametime as f32,
                ticks: u32::try_from(p.ticks).unwrap_or(u32::MAX),
                gravity: u32::try_from(p.gravity.unwrap_or(0)).unwrap_or(u32::MAX),
                until: p.until.clone().unwrap_or_default(),
                blocked_speed: p.blocked_speed.map(|v| v as f32),
                contents: p.contents,
                fall: p.fall.map(|v| v as f32),
                path: p.path == Some(true),
                shape_index,
                mask: p.mask,
                pass: Some(wire_pass(p.pass)),
            });
            prediction_paths.push(p.path == Some(true));
            positions.push(*pos);
        }
        let any_hits = m.any_hits.clone();
        batch_fields(&mut m);
        Tick {
            hits_answered: !m.any_hits.is_empty(),
            any_hits,
            message: m,
            positions,
            traces,
            points,
            move_steps,
            prediction_paths,
            in_scene: scene.is_some(),
        }
    }

    /// Number of answers the message asks for.
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    /// Whether the server's answer has one entry per query in every array.
    pub fn check(&self, r: &pb::TraceResponse) -> Result<(), String> {
        let n = self.traces;
        let points = self.points;
        let moves = self.move_steps.len();
        let scene_moves = if self.in_scene { moves } else { 0 };
        let moves_fit = match &r.moves {
            None => moves == 0,
            Some(m) => {
                m.origins.len() == 3 * moves
                    && m.velocities.len() == 3 * moves
                    && m.blocked.len() == moves
                    && m.stepped.len() == moves
                    && m.fractions.len() == moves
                    && m.endpos.len() == 3 * moves
                    && m.normals.len() == 3 * moves
                    && m.dists.len() == moves
                    && m.flags.len() == moves
                    && m.contents.len() == moves
                    && m.surface_flags.len() == moves
                    && m.entities.len() == scene_moves
                    && m.walkable.len() == moves
            }
        };
        let fits = moves_fit
            && r.predictions.len() == self.prediction_paths.len()
            && r.fractions.len() == n
            && r.endpos.len() == 3 * n
            && r.normals.len() == 3 * n
            && r.dists.len() == n
            && r.flags.len() == n
            && r.contents.len() == n
            && r.surface_flags.len() == n
            && r.hits.len() == if self.hits_answered { n } else { 0 }
            && r.entities.len() == if self.in_scene { n } else { 0 }
            && r.point_contents.len() == points;
        if fits {
            Ok(())
        } else {
            Err(format!(
                "the server answered packed arrays of the wrong lengths for {n} traces, {points} points, {moves} moves and {} predictions",
                self.prediction_paths.len()
            ))
        }
    }

    /// The answers, with their lines' positions, in the message's order.
    pub fn answers(&self, r: &pb::TraceResponse) -> Result<Vec<(usize, Answer)>, String> {
        self.check(r)?;
        let n = self.traces;
        let no_moves = pb::MoveAnswers::default();
        let moves = r.moves.as_ref().unwrap_or(&no_moves);
        Ok(self
            .positions
            .iter()
            .enumerate()
            .map(|(i, &pos)| {
                let answer = if i >= n + self.points + self.move_steps.len() {
                    self.prediction(r, i - n - self.points - self.move_steps.len())
                } else if i >= n + self.points {
                    self.moved(moves, i - n - self.points)
                } else if i >= n {
                    Answer::Point(PointAnswer {
                        contents: r.point_contents[i - n],
                    })
                } else if self.any_hits[i] {
                    Answer::Hit(HitAnswer { hit: r.hits[i] })
                } else {
                    Answer::Trace(
                        TraceColumns {
                            fractions: &r.fractions,
                            endpos: &r.endpos,
                            normals: &r.normals,
                            dists: &r.dists,
                            flags: &r.flags,
                            contents: &r.contents,
                            surface_flags: &r.surface_flags,
                            entities: &r.entities,
                        }
                        .answer(i),
                    )
                };
                (pos, answer)
            })
            .collect())
    }

    /// Move `i`'s answer (after [`Tick::check`]).
    fn moved(&self, m: &pb::MoveAnswers, i: usize) -> Answer {
        let v = |a: &[f32]| [a[3 * i], a[3 * i + 1], a[3 * i + 2]];
        let ground = GroundAnswer {
            trace: TraceColumns {
                fractions: &m.fractions,
                endpos: &m.endpos,
                normals: &m.normals,
                dists: &m.dists,
                flags: &m.flags,
                contents: &m.contents,
                surface_flags: &m.surface_flags,
                entities: &m.entities,
            }
            .answer(i),
            walkable: m.walkable[i],
        };
        match self.move_steps[i] {
            None => Answer::Ground(ground),
            Some(step) => Answer::Slide(SlideAnswer {
                origin: v(&m.origins),
                velocity: v(&m.velocities),
                blocked: (!step).then_some(m.blocked[i]),
                stepped: m.stepped[i],
                ground,
            }),
        }
    }

    /// Prediction `j`'s answer (after [`Tick::check`]).
    fn prediction(&self, r: &pb::TraceResponse, j: usize) -> Answer {
        let p = &r.predictions[j];
        let v = |v: &Option<pb::Vec3>| v.as_ref().map_or([0.0; 3], |v| [v.x, v.y, v.z]);
        let g = p.ground.unwrap_or_default();
        Answer::Predict(Box::new(PredictAnswer {
            event: p.event.clone(),
            tick: p.tick,
            origin: v(&p.origin),
            velocity: v(&p.velocity),
            on_ground: p.on_ground,
            ground: GroundAnswer {
                trace: TraceAnswer {
                    fraction: g.fraction,
                    endpos: v(&g.endpos),
                    normal: v(&g.normal),
                    dist: g.dist,
                    startsolid: g.flags & pb::TraceFlag::Startsolid as u32 != 0,
                    allsolid: g.flags & pb::TraceFlag::Allsolid as u32 != 0,
                    contents: g.contents,
                    surface_flags: g.surface_flags,
                    entity: g.entity,
                },
                walkable: g.walkable,
            },
            path: self.prediction_paths[j]
                .then(|| p.path.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect()),
        }))
    }
}

/// What every query of a tick shares moves to the batch's own fields (one
/// shape, no any-hit, no pass), so a plain batch stays a plain batch, which
/// every server version reads.
fn batch_fields(m: &mut pb::TraceRequest) {
    // (Moves and predictions name their boxes in the table.)
    if m.shapes.len() == 1 && m.moves.is_none() && m.predictions.is_empty() {
        m.shape_index.clear();
        if let Some(shape) = m.shapes.pop() {
            match shape.kind {
                None => {}
                Some(pb::query_shape::Kind::Box(b)) => m.shape = Some(b),
                Some(pb::query_shape::Kind::Hull(name)) => m.hull = Some(name),
                Some(pb::query_shape::Kind::Swept(swept)) => m.swept = Some(swept),
            }
            m.exact = shape.exact;
        }
    }
    if !m.any_hits.contains(&true) {
        m.any_hits.clear();
    }
    if m.passes.iter().all(|&p| p == bspq::scene::ENTITY_NONE) {
        m.passes.clear();
    }
}

/// The packed trace arrays of an answer (a batch's traces, or its moves'
/// final ground probes), all checked to one entry per query.
struct TraceColumns<'a> {
    fractions: &'a [f32],
    endpos: &'a [f32],
    normals: &'a [f32],
    dists: &'a [f32],
    flags: &'a [u32],
    contents: &'a [u32],
    surface_flags: &'a [u32],
    /// Empty without a scene.
    entities: &'a [u32],
}

impl TraceColumns<'_> {
    /// Query `i`'s trace answer.
    fn answer(&self, i: usize) -> TraceAnswer {
        let v = |a: &[f32]| [a[3 * i], a[3 * i + 1], a[3 * i + 2]];
        TraceAnswer {
            fraction: self.fractions[i],
            endpos: v(self.endpos),
            normal: v(self.normals),
            dist: self.dists[i],
            startsolid: self.flags[i] & pb::TraceFlag::Startsolid as u32 != 0,
            allsolid: self.flags[i] & pb::TraceFlag::Allsolid as u32 != 0,
            contents: self.contents[i],
            surface_flags: self.surface_flags[i],
            entity: self.entities.get(i).copied(),
        }
    }
}
