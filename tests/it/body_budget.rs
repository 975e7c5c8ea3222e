//! The byte budget of query bodies held at once: a body is admitted on its
//! head, before it is read, so a burst of big bodies past the budget is
//! refused at once (`429 overloaded` / `RESOURCE_EXHAUSTED`) while the
//! bodies admitted are answered right, and nothing stays counted after.
//! A real server on loopback ports, real clients, bounded counts.

use crate::common;

use common::server::TestServer;

use bspq::proto::v1 as pb;
use bspq::query::{answer, Answer};
use bspq::service::Limits;
use bspq::trace::Scratch;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

const RAYS: usize = 12_000;

/// `RAYS` rays down across the bundled world, as query lines.
fn ray_lines() -> Vec<String> {
    (0..RAYS)
        .map(|i| {
            let (x, y) = (
                (i % 120) as f32 * 12.0 - 720.0,
                (i / 120) as f32 * 12.0 - 600.0,
            );
            format!(r#"{{"start":[{x},{y},200.0],"end":[{x},{y},-600.0]}}"#)
        })
        .collect()
}

/// The offline kernel's answers to `lines` on the same map.
fn expected(lines: &[String]) -> Vec<Answer> {
    let world = common::load_world("q3dm6ish", true);
    let mut scratch = Scratch::new();
    lines
        .iter()
        .map(|l| answer(&world.view(), &mut scratch, &common::parse_query(l)))
        .collect()
}

/// POSTs `body` to the trace route: the status and the JSON answer.
fn post(base: &str, body: &str) -> (u16, serde_json::Value) {
    let agent = crate::common::server::http_agent();
    let mut response = agent
        .post(&format!("{base}/v1/worlds/q3dm6ish/trace"))
        .header("Content-Type", "application/json")
        .send(body)
        .expect("an answer");
    let text = response.body_mut().read_to_string().expect("a body");
    (
        response.status().as_u16(),
        serde_json::from_str(&text).expect("JSON"),
    )
}

/// A 200 whose answers are `want`, or a 429 `overloaded`: which one.
fn good_or_refused((status, reply): (u16, serde_json::Value), want: &[Answer]) -> bool {
    if status == 429 {
        assert_eq!(reply["error"]["code"], "overloaded", "{reply}");
        return false;
    }
    assert_eq!(status, 200, "{reply}");
    let got: Vec<Answer> = serde_json::from_value(reply["results"].clone()).expect("the answers");
    assert!(got == want, "an admitted batch was answered wrong");
    true
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn bodies_past_the_byte_budget_are_refused_before_they_are_read() {
    let lines = ray_lines();
    let want = expected(&lines);
    let body = format!(r#"{{"queries":[{}]}}"#, lines.join(","));
    // Room for one body and a half: a second big body never fits beside one.
    let server = TestServer::start(
        None,
        Limits {
            max_body_bytes_in_flight: body.len() * 3 / 2,
            ..Limits::default()
        },
    );
    let budget = &server.service.body_admission;
    // A client announces a big body and sends a few bytes of it: its
    // length is held from its head on.
    let mut slow = std::net::TcpStream::connect(server.http).expect("connects");
    write!(
        slow,
        "POST /v1/worlds/q3dm6ish/trace HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .expect("head");
    slow.write_all(&body.as_bytes()[..100])
        .expect("a little body");
    wait_until("the announced body to be held", || {
        budget.held() == body.len()
    });
    // A burst of big bodies meanwhile, over both transports: every one is
    // refused at once, none read.
    let refused = std::thread::scope(|s| {
        let calls: Vec<_> = (0..6)
            .map(|_| s.spawn(|| good_or_refused(post(&server.base, &body), &want)))
            .collect();
        calls
            .into_iter()
            .map(|c| c.join().expect("client thread"))
            .filter(|answered| !answered)
            .count()
    });
    assert_eq!(refused, 6);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let message = pb::TraceRequest {
        world: "q3dm6ish".into(),
        starts: vec![0.0; 3 * 60_000],
        ends: vec![1.0; 3 * 60_000],
        ..Default::default()
    };
    let status = rt
        .block_on(async { server.collision().await.trace(message).await })
        .expect_err("refused");
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    let error: serde_json::Value = serde_json::from_str(status.message()).expect("JSON body");
    assert_eq!(error["error"]["code"], "overloaded");
    // A small body still fits beside the held one.
    let small = format!(r#"{{"queries":[{}]}}"#, lines[..10].join(","));
    assert!(good_or_refused(post(&server.base, &small), &want[..10]));
    // The held body arrives and is answered right.
    slow.write_all(&body.as_bytes()[100..]).expect("the rest");
    let mut reply = Vec::new();
    slow.read_to_end(&mut reply).expect("the answer");
    let reply = String::from_utf8(reply).expect("UTF-8");
    assert!(reply.starts_with("HTTP/1.1 200"), "{}", &reply[..200]);
    let json = &reply[reply.find("\r\n\r\n").expect("a head") + 4..];
    let got: serde_json::Value = serde_json::from_str(json).expect("JSON");
    assert!(good_or_refused((200, got), &want));
    wait_until("nothing to be held", || budget.held() == 0);
    // A free-for-all burst: each body answered right or refused, at least
    // one answered, and nothing held after.
    let answered = std::thread::scope(|s| {
        let calls: Vec<_> = (0..4)
            .map(|_| s.spawn(|| good_or_refused(post(&server.base, &body), &want)))
            .collect();
        calls
            .into_iter()
            .map(|c| c.join().expect("client thread"))
            .filter(|answered| *answered)
            .count()
    });
    assert!(answered >= 1);
    wait_until("nothing to be held", || budget.held() == 0);
    assert_eq!(server.service.admission.held(), 0);
}
