//! The debugging page in a real browser (headless Chromium over the
//! DevTools protocol) against the real `bspq serve` binary: the world list,
//! a drawn canvas, a trace typed into the form answered as `bspq trace`
//! answers it, recorded traces of other clients, and no request to any
//! other host.

use crate::common::browser::{Browser, Image};
use crate::common::server::BinaryServer;
use crate::common::{map_path, skip};
use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

const TEST: &str = "debug_page_in_a_browser";
/// The canvas's clear colour (0.08, 0.09, 0.1).
const BACKGROUND: [u8; 3] = [20, 23, 26];
const WAIT: Duration = Duration::from_secs(10);

/// `bspq trace` (locally, or against a server with `args`): the answer lines to `lines`.
fn bspq_trace(args: &[&str], lines: &str) -> Vec<Value> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bspq"))
        .arg("trace")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("bspq trace runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(lines.as_bytes())
        .expect("query written");
    let out = child.wait_with_output().expect("bspq trace ends");
    assert!(out.status.success(), "bspq trace failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("an answer line"))
        .collect()
}

/// The canvas's place in the page, and a screenshot.
fn canvas_shot(browser: &mut Browser) -> ([u32; 4], Image) {
    let rect = browser
        .eval("(() => { const r = document.getElementById('view').getBoundingClientRect(); return [r.x, r.y, r.width, r.height].map(Math.round); })()")
        .expect("the canvas's place");
    let n = |i: usize| rect[i].as_u64().unwrap_or(0) as u32;
    let png = browser.screenshot().expect("a screenshot");
    ([n(0), n(1), n(2), n(3)], Image::decode(&png))
}

#[test]
fn debug_page_in_a_browser() {
    let worlds = tempfile::tempdir().expect("tempdir");
    std::fs::copy(map_path("q3dm6ish"), worlds.path().join("q3dm6ish.bsp")).expect("map copied");
    let dir = worlds.path().to_str().expect("utf-8 path");
    let server = BinaryServer::start(&["--worlds", dir, "--record-queries", "64"]);
    let base = server.http_url();
    let mut browser = match Browser::launch(1280, 800) {
        Ok(b) => b,
        Err(why) => return skip(TEST, &why),
    };
    browser
        .call(
            "Page.navigate",
            serde_json::json!({"url": format!("{base}/")}),
        )
        .expect("navigates");

    // The world list shows the world, and the page loads it.
    browser
        .wait_for("document.body.dataset.world === 'q3dm6ish'", WAIT)
        .expect("the page loads the world");
    let row = browser
        .eval("document.querySelector('#worlds tbody tr').innerText")
        .expect("a row");
    let row = row.as_str().unwrap_or_default();
    assert!(row.starts_with("q3dm6ish\t1\t"), "world row: {row:?}");
    let load_ms = browser.eval("window.bspqLoadMs").expect("load time");
    let _ = writeln!(std::io::stderr(), "{TEST}: q3dm6ish loaded in {load_ms} ms");

    // Cut the ceilings off (the height slice), to see into the rooms.
    browser.type_into("slice-max", "150").expect("typed");
    // The canvas is drawn: a good share of it is not background, in many shades.
    browser
        .eval("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
        .expect("a frame drawn");
    let (clip, before) = canvas_shot(&mut browser);
    let (drawn, colours) = before.stats(clip, BACKGROUND);
    assert!(
        drawn > 0.05 && colours >= 8,
        "canvas drawn {drawn:.3}, {colours} colours"
    );

    // A trace typed into the form, with a scene (a mover where the map has
    // it, a player's box): the same answer as `bspq trace`, drawn.
    let (start, end, mask) = ("-600,-50,50", "-600,-50,-500", "33619969");
    let scene = r#"[{"id":1,"model":"*1"},{"id":2,"box":{"mins":[-15,-15,-24],"maxs":[15,15,32]},"origin":[-500,-50,-200]}]"#;
    browser
        .eval("document.querySelector('details').open = true")
        .expect("scene shown");
    browser.type_into("scene", scene).expect("typed");
    browser.type_into("start", start).expect("typed");
    browser.type_into("end", end).expect("typed");
    browser.type_into("mask", mask).expect("typed");
    browser
        .eval("(() => { const s = document.getElementById('shape'); s.value = 'player'; s.dispatchEvent(new Event('change')); document.getElementById('run-trace').click(); return true; })()")
        .expect("trace run");
    browser
        .wait_for("document.body.dataset.traced === '1'", WAIT)
        .expect("the trace is answered");
    let shown = browser
        .eval("document.getElementById('answer').textContent")
        .expect("answer");
    let shown: Value =
        serde_json::from_str(shown.as_str().unwrap_or_default()).expect("JSON shown");
    let line = format!(
        "{{\"entities\":{scene}}}\n{{\"start\":[{start}],\"end\":[{end}],\"mins\":[-15,-15,-24],\"maxs\":[15,15,32],\"mask\":{mask}}}\n"
    );
    let map = map_path("q3dm6ish");
    let expected = bspq_trace(&["--world", map.to_str().expect("utf-8")], &line);
    assert_eq!(shown["results"][0], expected[1], "page vs bspq trace");
    assert_eq!(
        expected[1]["entity"], 1022,
        "the test trace stops on the world"
    );
    assert!(expected[1]["fraction"].as_f64().expect("fraction") < 1.0);
    let curl = browser
        .eval("document.getElementById('curl').textContent")
        .expect("curl");
    let curl = curl.as_str().unwrap_or_default();
    assert!(
        curl.starts_with(&format!(
            "curl -s -X POST {base}/v1/worlds/q3dm6ish/trace -d '"
        )),
        "{curl}"
    );
    browser
        .eval("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
        .expect("a frame drawn");
    let (_, after) = canvas_shot(&mut browser);
    let changed = after.differing(&before, clip);
    assert!(changed > 100, "the trace changed {changed} pixels");
    // (For the docs: `BSPQ_PAGE_SCREENSHOTS=DIR` keeps the screenshots.)
    if let Some(dir) = std::env::var_os("BSPQ_PAGE_SCREENSHOTS") {
        let png = browser.screenshot().expect("a screenshot");
        std::fs::write(std::path::Path::new(&dir).join("debug-page-trace.png"), png)
            .expect("screenshot written");
    }

    // Traces other clients send (HTTP and gRPC) appear among the recent ones.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(WAIT))
        .build()
        .into();
    agent
        .post(&format!("{base}/v1/worlds/q3dm6ish/trace"))
        .send(r#"{"queries":[{"start":[11,0,0],"end":[11,0,-900]},{"start":[22,0,0],"end":[22,0,-900],"mask":65537},{"start":[33,0,0],"end":[33,0,-900],"any":true}]}"#)
        .expect("HTTP trace");
    bspq_trace(
        &["--server", &server.grpc, "--world", "q3dm6ish"],
        "{\"start\":[44,0,0],\"end\":[44,0,-900],\"mins\":[-8,-8,-8],\"maxs\":[8,8,8]}\n",
    );
    browser
        .wait_for("Number(document.body.dataset.recent) >= 5", WAIT)
        .expect("the page shows the recorded traces");
    let listed = browser
        .eval("[...document.querySelectorAll('#recent-list li')].map((li) => li.textContent)")
        .expect("list");
    let listed: Vec<&str> = listed
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(listed.len(), 5, "{listed:?}");
    assert!(listed[0].starts_with("#5 box mask 0x1 "), "{listed:?}");
    assert!(listed[1].starts_with("#4 ray any mask 0x1 "), "{listed:?}");
    assert!(listed[2].starts_with("#3 ray mask 0x10001 "), "{listed:?}");
    // Filtered by kind in the page.
    browser
        .eval("(() => { const k = document.getElementById('recent-kind'); k.value = 'box'; k.dispatchEvent(new Event('change')); return true; })()")
        .expect("filter set");
    browser
        .wait_for("(() => { const l = [...document.querySelectorAll('#recent-list li')]; return l.length === 2 && l.every((li) => li.textContent.includes(' box ')); })()", WAIT)
        .expect("only boxes listed");
    let recent: Value = serde_json::from_reader(
        agent
            .get(&format!("{base}/v1/worlds/q3dm6ish/recent?kind=ray"))
            .call()
            .expect("recent")
            .into_body()
            .into_reader(),
    )
    .expect("JSON");
    let starts: Vec<f64> = recent["traces"]
        .as_array()
        .expect("traces")
        .iter()
        .map(|t| t["start"][0].as_f64().unwrap_or(f64::NAN))
        .collect();
    assert_eq!(starts, [11.0, 22.0, 33.0]);

    // Nothing was asked of any other host.
    let urls = browser.requested_urls();
    assert!(urls.iter().any(|u| u.ends_with("/v1/worlds")), "{urls:?}");
    for url in &urls {
        assert!(
            url.starts_with(&format!("{base}/")),
            "request to another host: {url}"
        );
    }
}

/// Without `--record-queries` nothing is kept: the route says recording is
/// off and lists nothing after traces are answered; the page's files are
/// served with a policy that keeps it to this server.
#[test]
fn recording_is_off_unless_asked() {
    use crate::common::server::TestServer;
    let server = TestServer::start(None, bspq::service::Limits::default());
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(WAIT))
        .build()
        .into();
    let name = server.registry.names()[0].clone();
    agent
        .post(&format!("{}/v1/worlds/{name}/trace", server.base))
        .send(r#"{"queries":[{"start":[0,0,0],"end":[0,0,-900]}]}"#)
        .expect("trace");
    let mut response = agent
        .get(&format!("{}/v1/worlds/{name}/recent", server.base))
        .call()
        .expect("recent");
    let recent: Value = serde_json::from_reader(response.body_mut().as_reader()).expect("JSON");
    assert_eq!(recent["capacity"], 0);
    assert_eq!(recent["recorded"], 0);
    assert_eq!(recent["traces"], serde_json::json!([]));
    let bad = agent
        .get(&format!(
            "{}/v1/worlds/{name}/recent?kind=cube",
            server.base
        ))
        .call()
        .expect("answered");
    assert_eq!(bad.status(), 400);
    for path in ["/", "/ui/", "/ui/app.js"] {
        let page = agent
            .get(&format!("{}{path}", server.base))
            .call()
            .expect("page");
        assert_eq!(page.status(), 200, "{path}");
        let policy = page.headers()["content-security-policy"]
            .to_str()
            .unwrap_or_default();
        assert!(policy.contains("connect-src 'self'"), "{policy}");
    }
}
