//! `GET /v1/readiness` of a runtime whose flow never started (the quick tier: its clusters do
//! not answer): the flow is listed NOT READY with its reason, with `flow=` and without, never
//! an empty "ready"; and a bad `within` or query is a 400 with a JSON error, never a panic.

mod running;

use running::{write_properties, Running};
use serde_json::Value;

/// A loopback port nothing listens on (bound, then let go).
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn start(name: &str) -> Running {
    let dir = std::env::temp_dir().join(format!(
        "strait-runtime-readiness-{name}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("dir");
    let port = closed_port();
    let text = format!(
        "clusters = A, B\n\
         A.bootstrap.servers = 127.0.0.1:{port}\n\
         B.bootstrap.servers = 127.0.0.1:{port}\n\
         A->B.enabled = true\n\
         strait.workers.enabled = false\n"
    );
    let config = write_properties(&dir, "readiness.properties", &text);
    Running::start_with(&config, dir.join("strait.log"), false)
}

#[test]
fn a_flow_that_never_started_is_not_ready_with_its_reason() {
    let strait = start("never");
    for path in ["/v1/readiness", "/v1/readiness?flow=A-%3EB"] {
        let (code, body) = strait.get_json(path).expect(path);
        assert_eq!(code, 503, "{path}: {body}");
        assert_eq!(body["ready"], Value::Bool(false), "{path}: {body}");
        let flows = body["flows"].as_array().expect("flows");
        assert_eq!(
            flows.len(),
            1,
            "{path}: the configured flow is listed: {body}"
        );
        let flow = &flows[0];
        assert_eq!(flow["flow"], "A->B");
        assert_eq!(flow["ready"], Value::Bool(false));
        assert_eq!(flow["exact"], Value::Bool(false));
        let why = flow["not_running"].as_str().unwrap_or_default();
        assert!(
            why.contains("not started") || why.contains("starting") || why.contains("waiting"),
            "{path}: the reason is said: {body}"
        );
    }
    // Paused, it says so.
    strait.pause("A->B").expect("pause");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (code, body) = strait.get_json("/v1/readiness").expect("readiness");
        let why = body["flows"][0]["not_running"].as_str().unwrap_or_default();
        if why.contains("paused") {
            assert_eq!(code, 503, "{body}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a paused flow is said paused: {body}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    strait.shutdown();
}

#[test]
fn bad_query_values_are_a_400_with_a_json_error() {
    let strait = start("bad");
    for query in [
        "within=inf",
        "within=-5",
        "within=NaN",
        "within=1e400",
        "within=soon",
        "flow=A-%3EB&within=infinity",
    ] {
        let path = format!("/v1/readiness?{query}");
        let (code, body) = strait.get(&path).expect(&path);
        assert_eq!(code, 400, "{path}: {body}");
        let json: Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{path}: not JSON ({e}): {body}"));
        assert!(
            json["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{path}: {body}"
        );
    }
    // A query that does not parse at all is answered in the same shape.
    let path = "/v1/translate?topic=t&partition=zero&offset=1";
    let (code, body) = strait.get(path).expect(path);
    assert_eq!(code, 400, "{path}: {body}");
    let json: Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: not JSON ({e}): {body}"));
    assert!(json["error"].is_string(), "{path}: {body}");
    // The server still answers after them all.
    let (code, _) = strait.get("/healthz").expect("healthz");
    assert_eq!(code, 200);
    strait.shutdown();
}
