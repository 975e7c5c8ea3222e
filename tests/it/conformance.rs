//! Reference conformance on the committed oracle subsets (the matching
//! rule): every answer of every set of every committed map, curves on and
//! off, must match the reference answer. The answers that depend on the
//! order in which the reference visits leaves (ties between equal contacts,
//! early stops at fraction 0) are checked on their own too, from every such
//! line of the full oracle files of the committed maps
//! (`tests/data/oracle/order_dependent.jsonl`).

use crate::common;

use bspq::conformance::mismatch;
use bspq::query::{answer, Answer, QueryLine};
use bspq::trace::Scratch;
use common::{load_set, load_world, MAPS, SETS};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// How many mismatches a failing test prints in full.
const SHOW: usize = 12;

/// Runs every set of `map` with curves on or off; panics with a readable
/// report on any mismatch.
fn check_map(map: &str, curves: bool) {
    let loaded = load_world(map, curves);
    let world = loaded.view();
    let mut scratch = Scratch::new();
    let mut summary = String::new();
    let mut details = String::new();
    let mut unexpected = 0usize;
    for set in SETS {
        let data = load_set(map, set, curves);
        let mut matched = 0usize;
        let mut failed_by_kind: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, (q, e)) in data.queries.iter().zip(&data.expected).enumerate() {
            let line = i + 1;
            let query = common::parse_query(q);
            let expected: Answer = serde_json::from_str(e)
                .unwrap_or_else(|err| panic!("{map}/{set} answer {line}: {err}"));
            let got = answer(&world, &mut scratch, &query);
            match mismatch(&expected, &got) {
                None => matched += 1,
                Some(why) => {
                    unexpected += 1;
                    *failed_by_kind.entry(data.kinds[i].as_str()).or_default() += 1;
                    if unexpected <= SHOW {
                        let _ = write!(
                            details,
                            "\n  {set} line {line} [{kind}]: {why}\n    query    {q}\n    expected {e}\n    got      {got}",
                            kind = data.kinds[i],
                            got = got.to_json()
                        );
                    }
                }
            }
        }
        let total = data.queries.len();
        let _ = write!(
            summary,
            "\n  {set:7} {matched}/{total} matched ({:.3}%), {} mismatches {failed_by_kind:?}",
            100.0 * matched as f64 / total.max(1) as f64,
            total - matched,
        );
    }
    println!("{map} (curves {curves}):{summary}");
    if unexpected > 0 {
        panic!(
            "{map} (curves {}): {unexpected} answers do not match the reference{}\nfirst mismatches (line = 1-based line in tests/data/oracle/{map}/SET.jsonl.gz):{details}",
            if curves { "on" } else { "off" },
            summary
        );
    }
}

#[test]
fn oa_ctf2_curves_off() {
    check_map("oa_ctf2", false);
}

/// The only committed map with patches.
#[test]
fn oa_ctf2_curves_on() {
    check_map("oa_ctf2", true);
}

#[test]
fn q3dm6ish_curves_on() {
    check_map("q3dm6ish", true);
}

#[test]
fn q3dm6ish_curves_off() {
    check_map("q3dm6ish", false);
}

#[test]
fn aggressor_curves_on() {
    check_map("aggressor", true);
}

#[test]
fn aggressor_curves_off() {
    check_map("aggressor", false);
}

/// One answer of the full oracle that depends on the reference's visit order.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OrderCase {
    map: String,
    curves: bool,
    set: String,
    line: usize,
    kind: String,
    query: serde_json::Value,
    expected: serde_json::Value,
}

fn order_cases() -> Vec<OrderCase> {
    let path = common::data_dir().join("oracle/order_dependent.jsonl");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Every answer of the committed maps' full oracle files that depends on
/// the order in which the reference visits leaves matches, walked through
/// the source's tree; the compiled tree's own order gets them wrong, so the
/// cases do test the order.
#[test]
fn order_dependent_answers_match_the_reference() {
    let cases = order_cases();
    assert!(cases.len() >= 20, "only {} cases", cases.len());
    let mut wrong_without = 0;
    let mut failures = String::new();
    for map in MAPS {
        for curves in [false, true] {
            let loaded = load_world(map, curves);
            let world = loaded.view();
            assert!(world.source.is_present(), "{map}: no source tree");
            let mut scratch = Scratch::new();
            for case in cases.iter().filter(|c| c.map == map && c.curves == curves) {
                let query = QueryLine::parse(&case.query.to_string())
                    .and_then(|q| q.validate())
                    .unwrap_or_else(|e| panic!("{case:?}: {e}"));
                let expected: Answer = serde_json::from_value(case.expected.clone())
                    .unwrap_or_else(|e| panic!("{case:?}: {e}"));
                let got = answer(&world, &mut scratch, &query);
                if let Some(why) = mismatch(&expected, &got) {
                    let _ = write!(
                        failures,
                        "\n  {map} curves {curves} {} line {} [{}]: {why}",
                        case.set, case.line, case.kind
                    );
                }
                let compiled = world.without_source_tree();
                let got = answer(&compiled, &mut scratch, &query);
                wrong_without += mismatch(&expected, &got).is_some() as usize;
            }
        }
    }
    assert!(
        failures.is_empty(),
        "order-dependent answers differ:{failures}"
    );
    assert!(
        wrong_without * 2 >= cases.len(),
        "the compiled tree's order gets only {wrong_without} of {} wrong",
        cases.len()
    );
}

/// The committed subsets have the documented sizes (guards against a bad
/// regeneration silently shrinking the suite).
#[test]
fn subsets_have_expected_sizes() {
    for map in MAPS {
        for set in ["rays", "boxes", "points"] {
            assert_eq!(load_set(map, set, true).queries.len(), 2000, "{map}/{set}");
        }
        let extras = load_set(map, "extras", false).queries.len();
        assert!(extras >= 3000, "{map}/extras has only {extras} lines");
        for set in SETS {
            // Curves on and off answer the same queries.
            assert_eq!(
                load_set(map, set, true).expected.len(),
                load_set(map, set, false).expected.len()
            );
        }
    }
}
