//! Every error of the HTTP API is `{"error": "..."}` with the status `docs/http-api.md` gives,
//! without a cluster (the quick tier): a [`Runtime`](strait_runtime::Runtime) in this process on
//! a config whose clusters do not answer, so its one flow never starts. An unknown path or
//! method, a bad query or path and an unknown flow each answer JSON that says what to do, and a
//! group asked of a flow that has not started is 503 (its answer is not known), not an empty
//! 200 that reads as "no committed offsets".

mod running;

use std::path::PathBuf;

use running::{write_properties, Running};

/// A directory of the test's own and a config in it: `A->B` between clusters that do not
/// answer (a loopback port nothing listens on), run by this process alone.
fn config(name: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("strait-errors-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let text = format!(
        "clusters = A, B\n\
         A.bootstrap.servers = 127.0.0.1:{port}\n\
         B.bootstrap.servers = 127.0.0.1:{port}\n\
         A->B.enabled = true\n\
         strait.workers.enabled = false\n"
    );
    let config = write_properties(&dir, "errors.properties", &text);
    (dir, config)
}

/// The `error` of a JSON error body, or why the body is not one.
fn error_of(body: &str) -> Result<String, String> {
    let value: serde_json::Value =
        serde_json::from_str(body).map_err(|e| format!("{e}: not JSON: {body:?}"))?;
    value["error"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("no error in {body:?}"))
}

#[test]
fn every_error_is_json_with_the_documented_status() {
    let (dir, config) = config("json");
    let strait = Running::start(&config, dir.join("strait.log"));

    let cases: [(&str, &str, u16, &str); 10] = [
        ("GET", "/nope", 404, "/v1/status"),
        ("GET", "/v1/flows/A-%3EB/pause", 405, "POST"),
        ("POST", "/v1/translate", 405, "GET"),
        ("GET", "/v1/translate?partition=x", 400, "partition"),
        ("GET", "/v1/translate?topic=t&partition=0", 400, "offset"),
        ("GET", "/v1/readiness?within=soon", 400, "within"),
        ("GET", "/v1/groups/%FF", 400, "group"),
        ("POST", "/v1/flows/X-%3EY/pause", 404, "A->B"),
        // The flow has not started (its clusters do not answer): the group's offsets are not
        // known, which is not the same as none.
        ("GET", "/v1/groups/billing", 503, "has not started"),
        (
            "GET",
            "/v1/translate?topic=t&partition=0&offset=1",
            503,
            "has not started",
        ),
    ];
    let mut wrong = Vec::new();
    for (method, path, code, says) in cases {
        let (got, body) = match method {
            "GET" => strait.get(path),
            _ => strait.post(path),
        }
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        match error_of(&body) {
            Ok(error) if got == code && error.contains(says) => {}
            Ok(error) => wrong.push(format!("{method} {path}: {got} {error}")),
            Err(why) => wrong.push(format!("{method} {path}: {got} {why}")),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    strait.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}
