//! `strait run --listen`: the HTTP API answers from the live map while it mirrors between two
//! real clusters: `/healthz`, `/v1/translate` both ways, `/v1/groups/{group}` for a group
//! committed with librdkafka, and clear errors for bad queries.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use strait_testkit::{Clusters, Rdk, TestRecord};

const TOPIC: &str = "orders";
const RECORDS: usize = 400;

/// Kills `strait run` when the test ends, however it ends.
struct Strait(Child);

impl Drop for Strait {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// `GET path`: the status code and the JSON body.
fn get(port: u16, path: &str) -> std::io::Result<(u16, Value)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(20)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no HTTP head in {text:?}")))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status in {head:?}")))?;
    let body =
        serde_json::from_str(body).map_err(|e| std::io::Error::other(format!("{e}: {body:?}")))?;
    Ok((status, body))
}

#[test]
fn the_http_api_translates_offsets_and_groups_from_the_live_map() {
    let clusters = Clusters::start();
    let rdk = Rdk::new();
    let (a, b) = (&clusters.source.bootstrap, &clusters.target.bootstrap);
    rdk.create_topic(a, TOPIC, 2);
    let records: Vec<TestRecord> = (0..RECORDS)
        .map(|i| TestRecord::new((i % 2) as i32, None, Some(format!("r{i}").as_bytes())))
        .collect();
    rdk.produce(a, TOPIC, &records, "zstd");
    rdk.commit(a, "billing", TOPIC, &[(0, 120), (1, 7)]);

    let config = clusters.dir().join("http.properties");
    std::fs::write(
        &config,
        format!(
            "clusters = A, B\nA.bootstrap.servers = {a}\nB.bootstrap.servers = {b}\n\
             A->B.enabled = true\nreplication.factor = 1\n\
             checkpoints.topic.replication.factor = 1\noffset-syncs.topic.replication.factor = 1\n\
             heartbeats.topic.replication.factor = 1\n"
        ),
    )
    .expect("write config");
    let port = free_port();
    let log = std::fs::File::create(clusters.dir().join("strait.log")).expect("log file");
    let _strait = Strait(
        Command::new(env!("CARGO_BIN_EXE_strait"))
            .args(["run", "--config"])
            .arg(&config)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn strait"),
    );

    // Until everything is mirrored: the end of partition 0 translates exactly.
    let end = (RECORDS / 2) as i64;
    let path = format!("/v1/translate?topic={TOPIC}&partition=0&offset={end}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let answer = loop {
        match get(port, &path) {
            Ok((200, body)) if body["exact"] == Value::Bool(true) => break body,
            other => {
                assert!(
                    Instant::now() < deadline,
                    "no exact translation of the end within 60 s; last answer {other:?}; log:\n{}",
                    std::fs::read_to_string(clusters.dir().join("strait.log")).unwrap_or_default()
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    };
    assert_eq!(answer["flow"], "A->B");
    assert_eq!(answer["remote_topic"], "A.orders");
    assert_eq!(answer["target_offset"], end);

    let (status, health) = get(port, "/healthz").expect("healthz");
    assert_eq!(status, 200);
    assert_eq!(health["status"], "ok");
    assert_eq!(health["flows"], serde_json::json!(["A->B"]));

    // Nothing is filtered on this topic: source offset N is target offset N, both ways.
    let (status, t) = get(
        port,
        &format!("/v1/translate?topic={TOPIC}&partition=1&offset=42"),
    )
    .expect("translate");
    assert_eq!(
        (status, &t["target_offset"], &t["exact"]),
        (200, &42.into(), &true.into())
    );
    assert_eq!(t["result"]["kind"], "exact");
    let (status, r) = get(
        port,
        &format!("/v1/translate?topic={TOPIC}&partition=1&offset=42&direction=reverse"),
    )
    .expect("reverse");
    assert_eq!(
        (status, &r["source_offset"], &r["exact"]),
        (200, &42.into(), &true.into())
    );
    // Past the mapped end: the target end, and the gap said.
    let (_, past) = get(
        port,
        &format!("/v1/translate?topic={TOPIC}&partition=1&offset={}", end + 5),
    )
    .expect("past end");
    assert_eq!(past["target_offset"], end);
    assert_eq!(past["exact"], false);
    assert_eq!(past["result"]["unreplicated"], 5);

    let (status, group) = get(port, "/v1/groups/billing").expect("group");
    assert_eq!(status, 200, "{group}");
    let partitions = group["flows"][0]["partitions"]
        .as_array()
        .expect("partitions");
    let got: Vec<(i64, i64, i64, bool)> = partitions
        .iter()
        .map(|p| {
            (
                p["partition"].as_i64().unwrap_or(-1),
                p["source_offset"].as_i64().unwrap_or(-1),
                p["target_offset"].as_i64().unwrap_or(-1),
                p["exact"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    assert_eq!(got, vec![(0, 120, 120, true), (1, 7, 7, true)]);

    let (status, err) = get(port, "/v1/translate?topic=orders").expect("bad query");
    assert_eq!(status, 400);
    assert!(
        err["error"].as_str().unwrap_or("").contains("partition"),
        "{err}"
    );
    let (status, _) = get(port, "/v1/translate?topic=nope&partition=0&offset=1").expect("404");
    assert_eq!(status, 404);
    let (status, _) = get(
        port,
        "/v1/translate?topic=orders&partition=0&offset=1&flow=B-%3EA",
    )
    .expect("unknown flow");
    assert_eq!(status, 404);
}
