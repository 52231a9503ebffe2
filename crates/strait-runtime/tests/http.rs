//! The runtime's HTTP API, started in this process on a free port, answers from the live map
//! while it mirrors between two real clusters: `/healthz`, `/readyz` (ready while the flow
//! runs, not once its source is gone), `/v1/translate` both ways, `/v1/groups/{group}` for a
//! group committed with librdkafka, `/v1/readiness` (safe to fail over once the checkpoints
//! carry the group; not once the source is gone), and clear errors for bad queries.
//!
//! And, on the run's shared clusters with names of its own: a partition mirrored without a
//! record (only an aborted transaction) translates to its remote end, exactly, on
//! `/v1/translate` and `/v1/groups`, and `/v1/readiness` counts a group there exact.

mod running;

use std::time::{Duration, Instant};

use running::{write_config, write_flow_config, Running};
use serde_json::Value;
use strait_testkit::{Clusters, Names, Rdk, TestRecord, Which};

const TOPIC: &str = "orders";
const RECORDS: usize = 400;

#[test]
fn the_http_api_translates_offsets_and_groups_from_the_live_map() {
    let mut clusters = Clusters::start();
    let rdk = Rdk::new();
    let a = &clusters.source.bootstrap.clone();
    rdk.create_topic(a, TOPIC, 2);
    let records: Vec<TestRecord> = (0..RECORDS)
        .map(|i| TestRecord::new((i % 2) as i32, None, Some(format!("r{i}").as_bytes())))
        .collect();
    rdk.produce(a, TOPIC, &records, "zstd");
    rdk.commit(a, "billing", TOPIC, &[(0, 120), (1, 7)]);

    let config = write_config(&clusters, "http.properties", "");
    let strait = Running::start(&config, clusters.dir().join("strait.log"));
    let get = |path: &str| strait.get_json(path);

    // Until everything is mirrored: the end of partition 0 translates exactly.
    let end = (RECORDS / 2) as i64;
    let path = format!("/v1/translate?topic={TOPIC}&partition=0&offset={end}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let answer = loop {
        match get(&path) {
            Ok((200, body)) if body["exact"] == Value::Bool(true) => break body,
            other => {
                assert!(
                    Instant::now() < deadline,
                    "no exact translation of the end within 60 s; last answer {other:?}; log:\n{}",
                    strait.log_text()
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    };
    assert_eq!(answer["flow"], "A->B");
    assert_eq!(answer["remote_topic"], "A.orders");
    assert_eq!(answer["target_offset"], end);

    let (status, health) = get("/healthz").expect("healthz");
    assert_eq!(status, 200);
    assert_eq!(health["status"], "ok");
    assert_eq!(health["flows"], serde_json::json!(["A->B"]));

    // Nothing is filtered on this topic: source offset N is target offset N, both ways.
    let (status, t) = get(&format!(
        "/v1/translate?topic={TOPIC}&partition=1&offset=42"
    ))
    .expect("translate");
    assert_eq!(
        (status, &t["target_offset"], &t["exact"]),
        (200, &42.into(), &true.into())
    );
    assert_eq!(t["result"]["kind"], "exact");
    let (status, r) = get(&format!(
        "/v1/translate?topic={TOPIC}&partition=1&offset=42&direction=reverse"
    ))
    .expect("reverse");
    assert_eq!(
        (status, &r["source_offset"], &r["exact"]),
        (200, &42.into(), &true.into())
    );
    // Past the mapped end: the target end, and the gap said.
    let (_, past) = get(&format!(
        "/v1/translate?topic={TOPIC}&partition=1&offset={}",
        end + 5
    ))
    .expect("past end");
    assert_eq!(past["target_offset"], end);
    assert_eq!(past["exact"], false);
    assert_eq!(past["result"]["unreplicated"], 5);

    let (status, group) = get("/v1/groups/billing").expect("group");
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

    let (status, err) = get("/v1/translate?topic=orders").expect("bad query");
    assert_eq!(status, 400);
    assert!(
        err["error"].as_str().unwrap_or("").contains("partition"),
        "{err}"
    );
    let (status, _) = get("/v1/translate?topic=nope&partition=0&offset=1").expect("404");
    assert_eq!(status, 404);
    let (status, _) =
        get("/v1/translate?topic=orders&partition=0&offset=1&flow=B-%3EA").expect("unknown flow");
    assert_eq!(status, 404);

    // Safe to fail over once the checkpoints carry billing's position (read every second):
    // nothing at risk, the group exact.
    let deadline = Instant::now() + Duration::from_secs(60);
    let safe = loop {
        match get("/v1/readiness") {
            Ok((200, body)) if body["flows"][0]["exact"] == true => break body,
            other => {
                assert!(
                    Instant::now() < deadline,
                    "not ready to fail over within 60 s: {other:?}; log:\n{}",
                    strait.log_text()
                );
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    };
    assert_eq!(safe["ready"], true, "{safe}");
    let flow = &safe["flows"][0];
    assert_eq!(
        (&flow["records_at_risk"], &flow["source_error"]),
        (&0.into(), &Value::Null)
    );
    assert_eq!(flow["groups"][0]["group"], "billing", "{safe}");
    assert_eq!(flow["groups"][0]["records_since_checkpoint"], 0, "{safe}");
    // The metric says the same: billing's position was captured.
    let m = strait.metrics();
    assert!(
        m.text
            .contains("strait_group_position_captured_timestamp_seconds{source=\"A\",target=\"B\",group=\"billing\"}"),
        "{}",
        m.text
    );

    // Ready while the flow runs; not ready once its source cluster is gone (the process lives:
    // /healthz still answers).
    let (status, ready) = get("/readyz").expect("readyz");
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["ready"], true);
    assert_eq!(ready["flows"][0]["flow"], "A->B");
    assert_eq!(ready["flows"][0]["state"], "running");
    clusters.stop_broker(Which::Source);
    let deadline = Instant::now() + Duration::from_secs(120);
    let unready = loop {
        match get("/readyz") {
            Ok((503, body)) => break body,
            other => {
                assert!(
                    Instant::now() < deadline,
                    "still ready 120 s after the source stopped: {other:?}; log:\n{}",
                    strait.log_text()
                );
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    };
    assert_eq!(unready["ready"], false);
    let state = unready["flows"][0]["state"].as_str().unwrap_or_default();
    assert!(["waiting", "stalled"].contains(&state), "{unready}");
    // Nor safe to fail over: the source does not answer, so nothing is known of it.
    let (status, silent) = get("/v1/readiness").expect("readiness");
    assert_eq!(status, 503, "{silent}");
    assert!(silent["flows"][0]["source_error"].is_string(), "{silent}");
    assert_eq!(
        silent["flows"][0]["records_at_risk"],
        Value::Null,
        "{silent}"
    );
    let (status, _) = get("/healthz").expect("healthz");
    assert_eq!(status, 200);
}

/// A partition whose only records are an aborted transaction and its marker is read to its end
/// by the running flow with nothing to copy: its map has an extent and no segment, which the
/// map alone translates as "not mirrored". A position inside it continues at the remote
/// partition's end (0: nothing was written there), exactly, on `/v1/translate` and
/// `/v1/groups`; its checkpoint carries it, so `/v1/readiness` counts the group exact.
#[test]
fn a_partition_of_aborted_records_alone_translates_to_its_remote_end() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let rdk = Rdk::new();
    let (a, b) = (names.alias("source"), names.alias("target"));
    let topic = names.topic("aborted");
    let group = names.group("billing");
    let src = &clusters.source.bootstrap;
    rdk.create_topic(src, &topic, 2);
    rdk.produce(
        src,
        &topic,
        &[TestRecord::new(0, None, Some(b"kept"))],
        "none",
    );
    // Partition 1: one aborted record at 0, its marker at 1; nothing a consumer reads.
    rdk.produce_transactions(
        src,
        &topic,
        &[(vec![TestRecord::new(1, None, Some(b"aborted"))], false)],
    );
    rdk.commit(src, &group, &topic, &[(0, 1), (1, 2)]);
    let config = write_flow_config(
        &clusters,
        (&a, &b),
        &format!("aborted-{a}.properties"),
        &format!(
            "topics = {topic}\n\
             groups = {}\n\
             heartbeats.replication.enabled = false\n",
            names.pattern()
        ),
    );
    let strait = Running::start(
        &config,
        clusters.dir().join(format!("strait-aborted-{a}.log")),
    );
    let get = |path: &str| strait.get_json(path);

    // Once the flow has read partition 1 to its end (2, past the marker).
    let path = format!("/v1/translate?topic={topic}&partition=1&offset=2");
    let deadline = Instant::now() + Duration::from_secs(60);
    let answer = loop {
        match get(&path) {
            Ok((200, body)) if body["exact"] == Value::Bool(true) => break body,
            other => {
                assert!(
                    Instant::now() < deadline,
                    "no exact translation of the end of the aborted partition within 60 s; \
                     last answer {other:?}; log:\n{}",
                    strait.log_text()
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    };
    assert_eq!(answer["remote_topic"], format!("{a}.{topic}"), "{answer}");
    assert_eq!(answer["target_offset"], 0, "{answer}");
    assert_eq!(answer["result"]["kind"], "exact", "{answer}");
    assert_eq!(answer["note"], "", "{answer}");

    let (status, body) = get(&format!("/v1/groups/{group}")).expect("group");
    assert_eq!(status, 200, "{body}");
    let got: Vec<(i64, i64, i64, bool)> = body["flows"][0]["partitions"]
        .as_array()
        .expect("partitions")
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
    assert_eq!(got, vec![(0, 1, 1, true), (1, 2, 0, true)], "{body}");

    // Nothing at risk: the group's position on the aborted partition is checkpointed too.
    let deadline = Instant::now() + Duration::from_secs(60);
    let safe = loop {
        match get("/v1/readiness") {
            Ok((200, body)) if body["flows"][0]["exact"] == true => break body,
            other => {
                assert!(
                    Instant::now() < deadline,
                    "not ready to fail over within 60 s: {other:?}; log:\n{}",
                    strait.log_text()
                );
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    };
    let g = &safe["flows"][0]["groups"][0];
    assert_eq!(g["group"], group.as_str(), "{safe}");
    assert_eq!(g["partitions_without_checkpoint"], 0, "{safe}");
    assert_eq!(g["records_since_checkpoint"], 0, "{safe}");
    strait.shutdown();
}
