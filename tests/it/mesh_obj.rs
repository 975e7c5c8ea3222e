//! `bspq bench --mesh-obj`: the parry3d baseline's mesh written as OBJ, for
//! engines measured outside the process (benches/maps/run.sh's Embree
//! harness). The file must be the world's solid surfaces: a brute-force ray
//! cast over its triangles finds the reference's first contact.

use crate::common;
use std::io::Write;

/// A segment's first crossing of a triangle (Möller–Trumbore), as a
/// fraction of the segment.
fn crossing(start: [f64; 3], delta: [f64; 3], tri: [[f64; 3]; 3]) -> Option<f64> {
    let sub = |a: [f64; 3], b: [f64; 3]| [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
    let cross = |a: [f64; 3], b: [f64; 3]| {
        [
            a[1] * b[2] - a[2] * b[1],
            a[2] * b[0] - a[0] * b[2],
            a[0] * b[1] - a[1] * b[0],
        ]
    };
    let dot = |a: [f64; 3], b: [f64; 3]| a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
    let (e1, e2) = (sub(tri[1], tri[0]), sub(tri[2], tri[0]));
    let p = cross(delta, e2);
    let det = dot(e1, p);
    if det.abs() < 1e-12 {
        return None;
    }
    let s = sub(start, tri[0]);
    let u = dot(s, p) / det;
    let q = cross(s, e1);
    let v = dot(delta, q) / det;
    let t = dot(e2, q) / det;
    (u >= 0.0 && v >= 0.0 && u + v <= 1.0 && (0.0..=1.0).contains(&t)).then_some(t)
}

fn vec3(value: &serde_json::Value) -> [f64; 3] {
    let at = |i: usize| value[i].as_f64().expect("a number");
    [at(0), at(1), at(2)]
}

#[test]
fn bench_writes_the_baseline_mesh_a_ray_cast_agrees_with() {
    let set = common::load_set("q3dm6ish", "rays", true);
    let dir = tempfile::tempdir().expect("a temporary folder");
    let picked: Vec<usize> = (0..set.queries.len()).step_by(50).collect();
    let queries = dir.path().join("rays.jsonl");
    let mut file = std::fs::File::create(&queries).expect("a query file");
    for &i in &picked {
        writeln!(file, "{}", set.queries[i]).expect("written");
    }
    drop(file);
    let obj = dir.path().join("mesh.obj");
    let map = common::map_path("q3dm6ish");
    let text = common::bspq_stdout([
        "bench".as_ref(),
        "--json".as_ref(),
        "--no-shapes".as_ref(),
        "--runs=1".as_ref(),
        "--min-run-ms=1".as_ref(),
        "--world".as_ref(),
        map.as_os_str(),
        "--queries".as_ref(),
        queries.as_os_str(),
        "--mesh-obj".as_ref(),
        obj.as_os_str(),
    ]);
    let report: serde_json::Value =
        serde_json::from_str(text.lines().last().expect("a JSON line")).expect("JSON");

    let mut vertices = Vec::new();
    let mut triangles = Vec::new();
    for line in std::fs::read_to_string(&obj).expect("the OBJ file").lines() {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("v") => {
                let v: Vec<f64> = words.map(|w| w.parse().expect("a coordinate")).collect();
                vertices.push([v[0], v[1], v[2]]);
            }
            Some("f") => {
                let f: Vec<usize> = words.map(|w| w.parse().expect("an index")).collect();
                triangles.push([f[0] - 1, f[1] - 1, f[2] - 1]);
            }
            _ => {}
        }
    }
    assert_eq!(
        report["parry_mesh"]["triangles"],
        triangles.len(),
        "{report}"
    );
    assert_eq!(report["parry_mesh"]["vertices"], vertices.len(), "{report}");

    // The reference's first contact against the nearest crossing of any
    // triangle: equal within one unit (the reference stops 1/8 unit short
    // and resolves edges and ties by its own rules).
    let mut agree = 0;
    for &i in &picked {
        let q: serde_json::Value = serde_json::from_str(&set.queries[i]).expect("a query");
        let expected: serde_json::Value =
            serde_json::from_str(&set.expected[i]).expect("an answer");
        let (start, end) = (vec3(&q["start"]), vec3(&q["end"]));
        let delta = [end[0] - start[0], end[1] - start[1], end[2] - start[2]];
        let length = (delta[0] * delta[0] + delta[1] * delta[1] + delta[2] * delta[2]).sqrt();
        let nearest = triangles
            .iter()
            .filter_map(|t| crossing(start, delta, t.map(|k| vertices[k])))
            .fold(1.0f64, f64::min);
        let fraction = expected["fraction"].as_f64().expect("a fraction");
        agree += ((nearest - fraction).abs() * length <= 1.0) as usize;
    }
    assert!(
        agree * 100 >= picked.len() * 95,
        "{agree} of {} rays agree",
        picked.len()
    );
}
