//! A tick as one gRPC message: query lines (checked) become one
//! `TraceRequest` with a shape table, per-query masks, passes and any-hit,
//! and points; its answer becomes answer lines again. `bspq trace --server`
//! and `bspq load` send their queries this way.

use bspq::contents::MASK_SOLID;
use bspq::proto::v1 as pb;
use bspq::query::{Answer, EntityLine, HitAnswer, PointAnswer, QueryLine, TraceAnswer};
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

/// One tick request and, for each answer in it (the traces, then the
/// points), the position of its line in the chunk.
pub struct Tick {
    pub message: pb::TraceRequest,
    /// Each answer's line position: the traces', then the points'.
    pub positions: Vec<usize>,
    traces: usize,
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
        // Each distinct shape once in the table.
        let mut table: HashMap<String, u32> = HashMap::new();
        for (pos, line) in lines.iter().filter(|(_, l)| l.point.is_none()) {
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
            let next = table.len() as u32;
            let index = *table.entry(format!("{shape:?}")).or_insert_with(|| {
                m.shapes.push(shape);
                next
            });
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
        let any_hits = m.any_hits.clone();
        batch_fields(&mut m);
        Tick {
            hits_answered: !m.any_hits.is_empty(),
            any_hits,
            message: m,
            positions,
            traces,
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
        let points = self.positions.len() - n;
        let fits = r.fractions.len() == n
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
                "the server answered packed arrays of the wrong lengths for {n} traces and {points} points"
            ))
        }
    }

    /// The answers, with their lines' positions, in the message's order.
    pub fn answers(&self, r: &pb::TraceResponse) -> Result<Vec<(usize, Answer)>, String> {
        self.check(r)?;
        let n = self.traces;
        Ok(self
            .positions
            .iter()
            .enumerate()
            .map(|(i, &pos)| {
                let answer = if i >= n {
                    Answer::Point(PointAnswer {
                        contents: r.point_contents[i - n],
                    })
                } else if self.any_hits[i] {
                    Answer::Hit(HitAnswer { hit: r.hits[i] })
                } else {
                    let v = |a: &[f32]| [a[3 * i], a[3 * i + 1], a[3 * i + 2]];
                    Answer::Trace(TraceAnswer {
                        fraction: r.fractions[i],
                        endpos: v(&r.endpos),
                        normal: v(&r.normals),
                        dist: r.dists[i],
                        startsolid: r.flags[i] & pb::TraceFlag::Startsolid as u32 != 0,
                        allsolid: r.flags[i] & pb::TraceFlag::Allsolid as u32 != 0,
                        contents: r.contents[i],
                        surface_flags: r.surface_flags[i],
                        entity: r.entities.get(i).copied(),
                    })
                };
                (pos, answer)
            })
            .collect())
    }
}

/// What every query of a tick shares moves to the batch's own fields (one
/// shape, no any-hit, no pass), so a plain batch stays a plain batch, which
/// every server version reads.
fn batch_fields(m: &mut pb::TraceRequest) {
    if m.shapes.len() == 1 {
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
