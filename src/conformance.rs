//! The reference matching rule (docs/conformance.md) and helpers to run query files
//! against expected answers.

use crate::query::{Answer, PointAnswer, QueryError, TraceAnswer};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// Largest allowed distance between expected and actual end positions.
pub const ENDPOS_TOLERANCE: f32 = 0.25;
/// Smallest allowed cosine between expected and actual hit normals.
pub const NORMAL_MIN_DOT: f32 = 0.999;

/// `None` when `actual` matches `expected`, else what differs.
pub fn mismatch(expected: &Answer, actual: &Answer) -> Option<String> {
    match (expected, actual) {
        (Answer::Point(e), Answer::Point(a)) => point_mismatch(e, a),
        (Answer::Trace(e), Answer::Trace(a)) => trace_mismatch(e, a),
        (Answer::Hit(e), Answer::Hit(a)) => {
            (e.hit != a.hit).then(|| format!("hit {} != expected {}", a.hit, e.hit))
        }
        (Answer::Scene(e), Answer::Scene(a)) => (e.entities != a.entities)
            .then(|| format!("{} entities != expected {}", a.entities, e.entities)),
        _ => Some("answer kinds differ".to_owned()),
    }
}

fn point_mismatch(e: &PointAnswer, a: &PointAnswer) -> Option<String> {
    (e.contents != a.contents)
        .then(|| format!("contents {:#x} != expected {:#x}", a.contents, e.contents))
}

fn trace_mismatch(e: &TraceAnswer, a: &TraceAnswer) -> Option<String> {
    let mut diffs = Vec::new();
    if e.entity.is_some() && e.entity != a.entity {
        diffs.push(format!("entity {:?} != {:?}", a.entity, e.entity));
    }
    let contact = ExpectedGround {
        fraction: e.fraction,
        normal: e.normal,
        startsolid: e.startsolid,
        allsolid: e.allsolid,
        surface_flags: e.surface_flags,
        contents: e.contents,
    };
    diffs.extend(ground_mismatch(&contact, a));
    let d = glam::Vec3::from_array(e.endpos).distance(glam::Vec3::from_array(a.endpos));
    if d.is_nan() || d > ENDPOS_TOLERANCE {
        diffs.push(format!("endpos {:?} is {d} from {:?}", a.endpos, e.endpos));
    }
    (!diffs.is_empty()).then(|| diffs.join("; "))
}

/// Opens a text file, transparently gunzipping `.gz` content.
pub fn open_lines(path: &Path) -> std::io::Result<Box<dyn BufRead>> {
    let mut file = std::fs::File::open(path)?;
    let mut magic = [0u8; 2];
    let n = file.read(&mut magic)?;
    let file = std::fs::File::open(path)?;
    if n == 2 && magic == [0x1f, 0x8b] {
        Ok(Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(
            file,
        ))))
    } else {
        Ok(Box::new(BufReader::new(file)))
    }
}

/// Reads all non-empty lines of a (possibly gzipped) file.
pub fn read_lines(path: &Path) -> std::io::Result<Vec<String>> {
    let mut out = Vec::new();
    for line in open_lines(path)?.lines() {
        let line = line?;
        if !line.trim().is_empty() {
            out.push(line);
        }
    }
    Ok(out)
}

/// The non-blank lines of a (possibly gzipped) query file, each as text or,
/// when it is not UTF-8, as the error a bad line gets (see
/// [`crate::query::query_lines`]): one such line does not stop the rest.
pub fn read_query_lines(path: &Path) -> std::io::Result<Vec<Result<String, QueryError>>> {
    let mut out = Vec::new();
    for line in crate::query::query_lines(open_lines(path)?) {
        match line? {
            Ok(text) if text.trim().is_empty() => {}
            line => out.push(line),
        }
    }
    Ok(out)
}

/// Largest allowed distance between the reference's final origin of a
/// move and ours, in units.
pub const ORIGIN_TOLERANCE: f32 = 0.25;
/// Largest allowed length of the difference between the reference's final
/// velocity of a move and ours, in units/s.
pub const VELOCITY_TOLERANCE: f32 = 1.0;

/// A reference answer to a movement line: a slide move's, or a ground
/// probe's (the fields the reference gives).
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(untagged)]
pub enum ExpectedMove {
    Slide(ExpectedSlide),
    Ground(ExpectedGround),
}

#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct ExpectedSlide {
    pub origin: [f32; 3],
    pub velocity: [f32; 3],
    /// Given for the plain slide move only.
    #[serde(default)]
    pub blocked: Option<bool>,
    /// The reference's step events (informative, not compared).
    #[serde(default)]
    pub step_events: Option<u32>,
    pub ground: ExpectedGround,
}

/// A ground probe as the reference reports it (no `endpos`).
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct ExpectedGround {
    pub fraction: f32,
    #[serde(default)]
    pub normal: [f32; 3],
    pub startsolid: bool,
    pub allsolid: bool,
    #[serde(default)]
    pub surface_flags: u32,
    pub contents: u32,
}

/// `None` when the movement answer `actual` matches `expected`, else what
/// differs: the final origin within [`ORIGIN_TOLERANCE`], the velocity
/// within [`VELOCITY_TOLERANCE`], `blocked` where the reference gives it,
/// and the ground probe by the trace rule on the fields the reference gives
/// (no `endpos`).
pub fn movement_mismatch(expected: &ExpectedMove, actual: &Answer) -> Option<String> {
    match (expected, actual) {
        (ExpectedMove::Ground(e), Answer::Ground(a)) => ground_mismatch(e, &a.trace),
        (ExpectedMove::Slide(e), Answer::Slide(a)) => {
            let mut diffs = Vec::new();
            let v = |x: [f32; 3]| glam::Vec3::from_array(x);
            let d = v(e.origin).distance(v(a.origin));
            if d.is_nan() || d > ORIGIN_TOLERANCE {
                diffs.push(format!("origin {:?} is {d} from {:?}", a.origin, e.origin));
            }
            let d = v(e.velocity).distance(v(a.velocity));
            if d.is_nan() || d > VELOCITY_TOLERANCE {
                diffs.push(format!(
                    "velocity {:?} is {d} from {:?}",
                    a.velocity, e.velocity
                ));
            }
            if e.blocked.is_some() && e.blocked != a.blocked {
                diffs.push(format!("blocked {:?} != {:?}", a.blocked, e.blocked));
            }
            if let Some(why) = ground_mismatch(&e.ground, &a.ground.trace) {
                diffs.push(format!("ground: {why}"));
            }
            (!diffs.is_empty()).then(|| diffs.join("; "))
        }
        _ => Some("answer kinds differ".to_owned()),
    }
}

/// The trace rule without `endpos` (which a ground probe's reference
/// answer lacks): solidity, hit or miss, contents, and the plane of a hit.
fn ground_mismatch(e: &ExpectedGround, a: &TraceAnswer) -> Option<String> {
    let mut diffs = Vec::new();
    if e.startsolid != a.startsolid {
        diffs.push(format!("startsolid {} != {}", a.startsolid, e.startsolid));
    }
    if e.allsolid != a.allsolid {
        diffs.push(format!("allsolid {} != {}", a.allsolid, e.allsolid));
    }
    if (e.fraction < 1.0) != (a.fraction < 1.0) {
        diffs.push(format!(
            "hit: fraction {} vs expected {}",
            a.fraction, e.fraction
        ));
    }
    if e.contents != a.contents {
        diffs.push(format!("contents {:#x} != {:#x}", a.contents, e.contents));
    }
    let reports_plane = e.fraction < 1.0 && !e.allsolid && e.normal != [0.0; 3];
    if reports_plane {
        let dot = glam::Vec3::from_array(e.normal).dot(glam::Vec3::from_array(a.normal));
        if dot.is_nan() || dot < NORMAL_MIN_DOT {
            diffs.push(format!("normal {:?} != {:?}", a.normal, e.normal));
        }
        if e.surface_flags != a.surface_flags {
            diffs.push(format!(
                "surface_flags {:#x} != {:#x}",
                a.surface_flags, e.surface_flags
            ));
        }
    }
    (!diffs.is_empty()).then(|| diffs.join("; "))
}
