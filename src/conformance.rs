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
    let d = glam::Vec3::from_array(e.endpos).distance(glam::Vec3::from_array(a.endpos));
    if d.is_nan() || d > ENDPOS_TOLERANCE {
        diffs.push(format!("endpos {:?} is {d} from {:?}", a.endpos, e.endpos));
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
