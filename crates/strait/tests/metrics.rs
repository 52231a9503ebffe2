//! `/metrics` of `strait run --listen` scraped while it mirrors between two real clusters:
//! record and byte counts reach what was produced and move with new data, lag falls to 0,
//! latency histograms fill, nothing is lost; a group's translation error follows the map;
//! checkpoints and group sync are counted; and records deleted on the source before they were
//! mirrored show as lost, in `/metrics` and `/v1/status`.

mod running;

use running::{write_flow_config, Metrics, Strait};
use serde_json::Value;
use strait_kafka::{Client, ClientConfig, TopicPartition};
use strait_testkit::{Clusters, Names, Rdk, TestRecord};

fn records(partition: i32, n: usize, tag: &str) -> Vec<TestRecord> {
    (0..n)
        .map(|i| TestRecord::new(partition, None, Some(format!("{tag}{i}").as_bytes())))
        .collect()
}

/// The labels of one partition of the flow `a->b`.
fn flow_labels<'a>(
    (a, b): (&'a str, &'a str),
    topic: &'a str,
    partition: &'a str,
) -> [(&'static str, &'a str); 4] {
    [
        ("source", a),
        ("target", b),
        ("topic", topic),
        ("partition", partition),
    ]
}

#[test]
fn metrics_follow_a_real_mirror() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let (src, dst) = (names.alias("A"), names.alias("B"));
    let ab = (src.as_str(), dst.as_str());
    let orders = names.topic("orders");
    let orders = orders.as_str();
    let (billing, ahead) = (names.group("billing"), names.group("ahead"));
    let (billing, ahead) = (billing.as_str(), ahead.as_str());
    let rdk = Rdk::new();
    let a = &clusters.source.bootstrap;
    rdk.create_topic(a, orders, 2);
    for p in 0..2 {
        rdk.produce(a, orders, &records(p, 200, "o"), "lz4");
    }
    // "billing" sits inside the data; "ahead" has committed 50 offsets past partition 0's end
    // (a commit is not checked against the log), so its translation is 50 records short.
    rdk.commit(a, billing, orders, &[(0, 120), (1, 7)]);
    rdk.commit(a, ahead, orders, &[(0, 250)]);
    let config = write_flow_config(
        &clusters,
        ab,
        "metrics.properties",
        &format!(
            "{src}->{dst}.topics = {orders}\n\
             {src}->{dst}.groups = {pattern}\n\
             emit.checkpoints.interval.seconds = 1\n\
             sync.group.offsets.enabled = true\nsync.group.offsets.interval.seconds = 1",
            pattern = names.pattern()
        ),
    );
    let strait = Strait::run(&config, clusters.dir().join("strait-metrics.log"));

    let caught_up = |m: &Metrics, total: f64| {
        m.sum("strait_record_count_total", &[("topic", orders)]) == total
            && m.get("strait_lag_records", &flow_labels(ab, orders, "0")) == Some(0.0)
            && m.get("strait_lag_records", &flow_labels(ab, orders, "1")) == Some(0.0)
    };
    let m = strait.metrics_until(60, "400 records mirrored, lag 0", |m| caught_up(m, 400.0));
    for p in ["0", "1"] {
        let labels = flow_labels(ab, orders, p);
        assert_eq!(m.get("strait_record_count_total", &labels), Some(200.0));
        assert!(m.get("strait_byte_count_total", &labels).unwrap_or(0.0) > 200.0 * 2.0);
        assert_eq!(m.get("strait_lost_records_total", &labels), Some(0.0));
        assert_eq!(m.get("strait_duplicate_records_total", &labels), Some(0.0));
        assert_eq!(m.get("strait_lag_seconds", &labels), Some(0.0));
        assert!(m.get("strait_map_segments", &labels).unwrap_or(0.0) >= 1.0);
    }
    let topic = [("source", ab.0), ("target", ab.1), ("topic", orders)];
    let forwarded = m
        .get("strait_batches_forwarded_total", &topic)
        .unwrap_or(0.0);
    assert!(forwarded >= 2.0, "{forwarded}");
    assert_eq!(m.get("strait_batches_rebuilt_total", &topic), Some(0.0));
    // One latency and one age observation per forwarded batch.
    assert_eq!(
        m.get("strait_replication_latency_ms_count", &topic),
        Some(forwarded)
    );
    assert_eq!(m.get("strait_record_age_ms_count", &topic), Some(forwarded));
    assert!(
        m.get("strait_replication_latency_ms_sum", &topic)
            .unwrap_or(-1.0)
            >= 0.0
    );
    assert_eq!(
        m.get("strait_flow_stalled", &[("source", ab.0), ("target", ab.1)]),
        Some(0.0)
    );
    assert!(
        m.text
            .contains("# TYPE strait_replication_latency_ms histogram"),
        "{}",
        m.text
    );
    assert!(m.text.contains("# HELP strait_record_count_total"));

    // The group translation errors: exact inside the data, 50 short past partition 0's end.
    let error = |m: &Metrics, group: &str, p: &str| {
        m.get(
            "strait_translation_error_records",
            &[("group", group), ("topic", orders), ("partition", p)],
        )
    };
    let m = strait.metrics_until(30, "translation errors of both groups", |m| {
        error(m, ahead, "0") == Some(50.0) && error(m, billing, "0") == Some(0.0)
    });
    assert_eq!(error(&m, billing, "1"), Some(0.0));
    // Both checkpoints of billing written (one latency each, counted per flow) and synced into
    // the target group.
    let flow = [("source", ab.0), ("target", ab.1)];
    let billing = [("source", ab.0), ("target", ab.1), ("group", billing)];
    let m = strait.metrics_until(30, "billing checkpointed and synced", |m| {
        m.get("strait_checkpoint_latency_ms_count", &flow) >= Some(2.0)
            && m.get("strait_group_sync_offsets_written_total", &billing) >= Some(2.0)
    });
    assert!(m
        .text
        .contains("# TYPE strait_checkpoint_latency_ms histogram"));

    // New data: the counters move, lag returns to 0, and "ahead" is no longer short.
    rdk.produce(a, orders, &records(0, 100, "n"), "none");
    let m = strait.metrics_until(60, "500 records mirrored, lag 0", |m| caught_up(m, 500.0));
    assert_eq!(
        m.get("strait_record_count_total", &flow_labels(ab, orders, "0")),
        Some(300.0)
    );
    assert!(
        m.get("strait_batches_forwarded_total", &topic)
            .unwrap_or(0.0)
            > forwarded
    );
    strait.metrics_until(
        30,
        "ahead's translation exact once its offset is mirrored",
        |m| error(m, ahead, "0") == Some(0.0),
    );
    let m = strait.metrics();
    assert_eq!(m.sum("strait_lost_records_total", &[]), 0.0);
}

#[test]
fn records_deleted_before_mirroring_show_as_lost() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let (src, dst) = (names.alias("A"), names.alias("B"));
    let events = names.topic("events");
    let events = events.as_str();
    let rdk = Rdk::new();
    let a = &clusters.source.bootstrap;
    rdk.create_topic(a, events, 1);
    for chunk in records(0, 30, "e").chunks(10) {
        rdk.produce(a, events, chunk, "none");
    }
    let config = write_flow_config(
        &clusters,
        (&src, &dst),
        "lost.properties",
        &format!(
            "{src}->{dst}.topics = {events}\n{src}->{dst}.groups = {}",
            names.pattern()
        ),
    );
    let labels = flow_labels((&src, &dst), events, "0");
    let first = Strait::run(&config, clusters.dir().join("strait-lost-1.log"));
    first.metrics_until(60, "30 records mirrored", |m| {
        m.get("strait_record_count_total", &labels) == Some(30.0)
            && m.get("strait_lag_records", &labels) == Some(0.0)
    });
    first.stop();

    // 30 more while strait is down, of which the first 20 are deleted before it sees them.
    for chunk in records(0, 30, "f").chunks(10) {
        rdk.produce(a, events, chunk, "none");
    }
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let low_watermark = runtime.block_on(async {
        let source = Client::connect(ClientConfig::new([a.as_str()]))
            .await
            .expect("connect");
        source
            .delete_records(&TopicPartition::new(events, 0), 50)
            .await
            .expect("delete records")
    });
    assert_eq!(low_watermark, 50);

    let second = Strait::run(&config, clusters.dir().join("strait-lost-2.log"));
    let m = second.metrics_until(60, "the last 10 records mirrored, lag 0", |m| {
        m.get("strait_record_count_total", &labels) == Some(10.0)
            && m.get("strait_lag_records", &labels) == Some(0.0)
    });
    assert_eq!(m.get("strait_lost_records_total", &labels), Some(20.0));
    assert_eq!(m.get("strait_duplicate_records_total", &labels), Some(0.0));

    let (code, body) = second.get("/v1/status").expect("status");
    assert_eq!(code, 200, "{body}");
    let status: Value = serde_json::from_str(&body).expect("JSON");
    let flow = &status["flows"][0];
    assert_eq!(flow["flow"], format!("{src}->{dst}"));
    assert_eq!(flow["lost_records"], 20);
    let topic = flow["topics"]
        .as_array()
        .and_then(|topics| topics.iter().find(|t| t["topic"] == events))
        .unwrap_or_else(|| panic!("no {events} in {flow}"));
    let partition = &topic["partitions"][0];
    assert_eq!(partition["lost_records"], 20);
    assert_eq!(partition["position"], 60);
    assert_eq!(partition["source_end"], 60);
    assert_eq!(partition["lag_records"], 0);
    let error = partition["last_error"]["message"].as_str().unwrap_or("");
    assert!(
        error.contains("20 records (offsets 30..50)") && error.contains("lost"),
        "{partition}"
    );
}
