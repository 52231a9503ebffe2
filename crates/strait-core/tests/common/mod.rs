//! Setup shared by the flow tests: clients, a `source->target` flow config, a started flow;
//! and reading back the single-partition topics strait writes as MM2 does (heartbeats, offset
//! syncs, checkpoints): their raw records and how the topic was made.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use bytes::Bytes;
use strait_core::config::{FlowConfig, StraitConfig};
use strait_core::flow::{Flow, FlowOptions};
use strait_kafka::admin::{ConfigResource, IsolationLevel, OffsetSpec};
use strait_kafka::fetch::{FetchOptions, FetchPosition};
use strait_kafka::{Client, ClientConfig, TopicPartition};
use strait_testkit::{Rdk, TestRecord};
use strait_wire::{BatchScanner, RawBatch};

/// A client with a 20 s operation timeout; logs to the test's output with `RUST_LOG`.
pub async fn client(bootstrap: &str) -> Client {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let mut config = ClientConfig::new([bootstrap]);
    config.operation_timeout = Duration::from_secs(20);
    Client::connect(config).await.expect("connect")
}

/// The `source->target` flow of an MM2 config for one-broker clusters, plus `extra` lines.
pub fn flow_config(source: &str, target: &str, extra: &str) -> FlowConfig {
    flow_config_between(("source", "target"), source, target, extra)
}

/// The `A->B` flow of an MM2 config for one-broker clusters, `aliases` being `(A, B)`, plus
/// `extra` lines. A test on the shared clusters gives aliases of its own
/// (`strait_testkit::Names::alias`) and a `topics` filter of its own topics in `extra`.
pub fn flow_config_between(
    (a, b): (&str, &str),
    source: &str,
    target: &str,
    extra: &str,
) -> FlowConfig {
    let text = format!(
        "clusters = {a}, {b}\n\
         {a}.bootstrap.servers = {source}\n\
         {b}.bootstrap.servers = {target}\n\
         {a}->{b}.enabled = true\n\
         replication.factor = 1\n\
         checkpoints.topic.replication.factor = 1\n\
         offset-syncs.topic.replication.factor = 1\n\
         heartbeats.topic.replication.factor = 1\n\
         {extra}\n"
    );
    let config = StraitConfig::parse(&text, "test.properties").expect("valid config");
    config
        .flows
        .into_iter()
        .find(|f| f.source.as_str() == a)
        .unwrap_or_else(|| panic!("{a}->{b} flow"))
}

/// That flow started, fetching with a 50 ms wait.
pub async fn start_flow(source: &str, target: &str, extra: &str) -> Flow {
    start_flow_between(("source", "target"), source, target, extra).await
}

/// The flow of [`flow_config_between`] started, fetching with a 50 ms wait.
pub async fn start_flow_between(
    aliases: (&str, &str),
    source: &str,
    target: &str,
    extra: &str,
) -> Flow {
    let options = FlowOptions {
        fetch_max_wait: Duration::from_millis(50),
        ..FlowOptions::default()
    };
    Flow::start(
        flow_config_between(aliases, source, target, extra),
        options,
        client(source).await,
        client(target).await,
    )
    .await
    .expect("flow starts")
}

/// One record as read from a topic: raw key, value and timestamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRecord {
    pub key: Bytes,
    pub value: Bytes,
    pub timestamp: i64,
}

/// The end offset (high watermark) of partition 0 of `topic`.
pub async fn end_offset(client: &Client, topic: &str) -> i64 {
    client
        .list_offset(
            &TopicPartition::new(topic, 0),
            OffsetSpec::Latest,
            IsolationLevel::ReadUncommitted,
        )
        .await
        .expect("end offset")
        .offset
}

/// Every batch of `tp` from `from` to its end now (read_uncommitted: aborted data and markers
/// included), as the broker holds it.
pub async fn batches_from(client: &Client, tp: &TopicPartition, from: i64) -> Vec<RawBatch> {
    let end = client
        .list_offset(tp, OffsetSpec::Latest, IsolationLevel::ReadUncommitted)
        .await
        .unwrap()
        .offset;
    let options = FetchOptions {
        max_wait: Duration::from_millis(10),
        isolation: IsolationLevel::ReadUncommitted,
        ..FetchOptions::default()
    };
    let mut position = from;
    let mut out = Vec::new();
    while position < end {
        let data = client
            .fetch(&[FetchPosition::new(tp.clone(), position)], &options)
            .await
            .remove(tp)
            .unwrap()
            .unwrap();
        for batch in BatchScanner::new(data.records) {
            let batch = batch.unwrap();
            if batch.header.base_offset >= position {
                position = batch.header.next_offset();
                out.push(batch);
            }
        }
    }
    out
}

/// Every record of partition 0 of `topic` up to its end now, grouped by batch, in order.
/// Checks what MM2's topics hold: no holes, no overlap, no control batches, no headers, a key
/// and a value on every record.
pub async fn read_batches(client: &Client, topic: &str) -> Vec<Vec<RawRecord>> {
    let tp = TopicPartition::new(topic, 0);
    let end = end_offset(client, topic).await;
    let options = FetchOptions {
        max_wait: Duration::from_millis(10),
        isolation: IsolationLevel::ReadUncommitted,
        ..Default::default()
    };
    let mut position = 0;
    let mut out = Vec::new();
    while position < end {
        let data = client
            .fetch(&[FetchPosition::new(tp.clone(), position)], &options)
            .await
            .remove(&tp)
            .expect("asked")
            .expect("fetch");
        let before = position;
        for batch in BatchScanner::new(data.records) {
            let batch = batch.expect("well-formed batch");
            assert!(
                !batch.header.attributes.is_control(),
                "no control batches expected"
            );
            if batch.header.next_offset() <= position {
                continue;
            }
            assert_eq!(batch.header.base_offset, position, "no holes, no overlap");
            let records = strait_wire::records::batch_records(&batch).expect("records decode");
            out.push(
                records
                    .into_iter()
                    .map(|r| {
                        assert!(r.headers.is_empty(), "MM2 writes no headers");
                        RawRecord {
                            key: r.key.expect("key"),
                            value: r.value.expect("value"),
                            timestamp: batch.header.base_timestamp + r.timestamp_delta,
                        }
                    })
                    .collect(),
            );
            position = batch.header.next_offset();
        }
        assert!(
            position > before,
            "no progress reading {topic} at {position}"
        );
    }
    out
}

/// Every record of partition 0 of `topic` up to its end now, in order ([`read_batches`]).
pub async fn read_records(client: &Client, topic: &str) -> Vec<RawRecord> {
    read_batches(client, topic).await.concat()
}

/// `topic` is made as MM2 makes its own topics: one partition, compacted.
pub async fn assert_compacted_single_partition(client: &Client, topic: &str) {
    // A broker that has just made the topic may not list it yet (seen under load).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let m = loop {
        let m = client.refresh_metadata().await.unwrap();
        if m.topics.contains_key(topic) || tokio::time::Instant::now() > deadline {
            break m;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        m.topics.contains_key(topic),
        "{topic} is not in the metadata"
    );
    assert_eq!(
        m.topics[topic].partitions.len(),
        1,
        "{topic}: one partition"
    );
    let configs = client
        .describe_configs(&ConfigResource::Topic(topic.to_owned()))
        .await
        .unwrap();
    assert!(
        configs
            .iter()
            .any(|c| c.name == "cleanup.policy" && c.value.as_deref() == Some("compact")),
        "{topic}: cleanup.policy=compact; {configs:?}"
    );
}

/// Milliseconds since the epoch, for record timestamps that a topic's time retention keeps.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

/// Consumes `count` records of `topic` and checks they equal `expected` per partition in order.
pub fn assert_mirrored(rdk: &Rdk, bootstrap: &str, topic: &str, expected: &[TestRecord]) {
    let got = rdk.consume(bootstrap, topic, expected.len(), Duration::from_secs(30));
    assert_eq!(got.len(), expected.len(), "{topic}: record count");
    let partitions: std::collections::BTreeSet<i32> =
        expected.iter().map(|r| r.partition).collect();
    for p in partitions {
        let want: Vec<_> = expected.iter().filter(|r| r.partition == p).collect();
        let have: Vec<_> = got.iter().filter(|r| r.partition == p).collect();
        assert_eq!(want.len(), have.len(), "{topic}-{p}: count");
        for (w, h) in want.iter().zip(&have) {
            assert!(w.same_payload(h), "{topic}-{p}: {w:?} vs {h:?}");
            assert_eq!(w.timestamp_ms, h.timestamp_ms, "{topic}-{p}: timestamp");
        }
    }
}
