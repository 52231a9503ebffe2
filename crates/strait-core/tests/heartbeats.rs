//! MM2 heartbeats as strait writes them (`docs/mm2-behaviour.md` §1.4), against real clusters:
//!
//! - the `heartbeats` topic (one partition, compacted) holds MM2's exact bytes, built by hand
//!   here (not with the codec under test), stamped now, in increasing order, the record
//!   timestamp equal to the heartbeat's;
//! - a flow mirrors them like data, even when `topics` leaves them out: `source.heartbeats`
//!   on the target holds the same records; through two flows A->B->C they arrive on C as
//!   `B.A.heartbeats` (three clusters: the shared pair as A and C, B of the test's own);
//! - the loop writes one per interval and stops when told;
//! - after the cluster lost everything (its broker stopped, its data directory wiped and
//!   formatted afresh, a new cluster on the same address: no topics, no producer ids) the next
//!   attempts create the topic again and heartbeats resume (clusters of the test's own).
//!
//! On the shared clusters every test's heartbeats go to the one `heartbeats` topic of the
//! cluster: a test's cluster aliases are its own ([`Names::alias`]), so its heartbeats are the
//! records keyed by them ([`read_heartbeats`]), and only those are checked.

#![allow(unreachable_pub, dead_code, missing_docs)]

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use strait_core::config::{FlowConfig, HeartbeatEmitter, StraitConfig};
use strait_core::flow::{Flow, FlowOptions};
use strait_core::heartbeats::HeartbeatTask;
use strait_kafka::admin::IsolationLevel;
use strait_kafka::fetch::{FetchOptions, FetchPosition};
use strait_kafka::produce::ProducerConfig;
use strait_kafka::{Client, ClientConfig, TopicPartition};
use strait_testkit::{Clusters, Names, Which};
use strait_wire::BatchScanner;

/// One record as read back: key, value, timestamp.
type Rec = (Bytes, Bytes, i64);

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A Kafka `STRING`, by hand: int16 length, then the bytes.
fn string(s: &str) -> Vec<u8> {
    let mut out = (s.len() as i16).to_be_bytes().to_vec();
    out.extend_from_slice(s.as_bytes());
    out
}

/// MM2's heartbeat key, by hand: source alias, target alias.
fn key(source_alias: &str, target_alias: &str) -> Bytes {
    let mut out = string(source_alias);
    out.extend(string(target_alias));
    out.into()
}

/// MM2's heartbeat value, by hand: version 0 (int16), timestamp (int64).
fn value(timestamp_ms: i64) -> Bytes {
    let mut out = vec![0, 0];
    out.extend(timestamp_ms.to_be_bytes());
    out.into()
}

/// An MM2 config of `clusters` (alias, bootstrap) with the `flows` (`A->B`) enabled and every
/// internal topic at replication factor 1.
fn config(clusters: &[(&str, &str)], flows: &[&str], extra: &str) -> StraitConfig {
    let mut text = format!(
        "clusters = {}\n",
        clusters.iter().map(|c| c.0).collect::<Vec<_>>().join(", ")
    );
    for (alias, bootstrap) in clusters {
        text.push_str(&format!("{alias}.bootstrap.servers = {bootstrap}\n"));
    }
    for flow in flows {
        text.push_str(&format!("{flow}.enabled = true\n"));
    }
    text.push_str(
        "replication.factor = 1\n\
         checkpoints.topic.replication.factor = 1\n\
         offset-syncs.topic.replication.factor = 1\n\
         heartbeats.topic.replication.factor = 1\n",
    );
    text.push_str(extra);
    StraitConfig::parse(&text, "test.properties").expect("valid config")
}

/// The emitter of pair `source->target` (writing into `target`).
fn emitter(config: &StraitConfig, source: &str, target: &str) -> HeartbeatEmitter {
    config
        .heartbeats
        .iter()
        .find(|e| e.source_alias.as_str() == source && e.target.as_str() == target)
        .unwrap_or_else(|| panic!("emitter {source}->{target}: {:?}", config.heartbeats))
        .clone()
}

fn flow(config: &StraitConfig, name: &str) -> FlowConfig {
    config
        .flows
        .iter()
        .find(|f| f.name() == name)
        .unwrap_or_else(|| panic!("flow {name}"))
        .clone()
}

async fn start_flow(config: FlowConfig, source: &str, target: &str) -> Flow {
    let options = FlowOptions {
        fetch_max_wait: Duration::from_millis(50),
        ..FlowOptions::default()
    };
    Flow::start(
        config,
        options,
        common::client(source).await,
        common::client(target).await,
    )
    .await
    .expect("flow starts")
}

/// A client whose operations give up after `timeout`.
async fn client_with_timeout(bootstrap: &str, timeout: Duration) -> Client {
    let mut config = ClientConfig::new([bootstrap]);
    config.operation_timeout = timeout;
    Client::connect(config).await.expect("connect")
}

/// Every record of partition 0 of `topic`, raw key, value and timestamp, in order.
async fn read_topic(client: &Client, topic: &str) -> Vec<Rec> {
    common::read_records(client, topic)
        .await
        .into_iter()
        .map(|r| (r.key, r.value, r.timestamp))
        .collect()
}

/// The heartbeats keyed (`source_alias`, `target_alias`) in partition 0 of `topic` up to its
/// end now, with their offsets, in order: on the shared clusters `heartbeats` (and a flow's
/// copy of it) also holds other tests' heartbeats, written by any client, which are passed
/// over. The log has no holes and no overlap; this test's records are as MM2 writes them: no
/// headers, a key and a value.
async fn read_heartbeats(
    client: &Client,
    topic: &str,
    (source_alias, target_alias): (&str, &str),
) -> Vec<(i64, Rec)> {
    let ours = key(source_alias, target_alias);
    let tp = TopicPartition::new(topic, 0);
    let end = common::end_offset(client, topic).await;
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
            if batch.header.next_offset() <= position {
                continue;
            }
            assert_eq!(batch.header.base_offset, position, "no holes, no overlap");
            position = batch.header.next_offset();
            if batch.header.attributes.is_control() {
                continue;
            }
            let records = strait_wire::records::batch_records(&batch).expect("records decode");
            for r in records {
                if r.key.as_ref() != Some(&ours) {
                    continue;
                }
                assert!(r.headers.is_empty(), "MM2 writes no headers");
                out.push((
                    batch.header.base_offset + i64::from(r.offset_delta),
                    (
                        ours.clone(),
                        r.value.expect("value"),
                        batch.header.base_timestamp + r.timestamp_delta,
                    ),
                ));
            }
        }
        assert!(
            position > before,
            "no progress reading {topic} at {position}"
        );
    }
    out
}

/// [`read_heartbeats`] without the offsets.
async fn read_heartbeat_records(client: &Client, topic: &str, aliases: (&str, &str)) -> Vec<Rec> {
    read_heartbeats(client, topic, aliases)
        .await
        .into_iter()
        .map(|(_, r)| r)
        .collect()
}

/// Checks `records` are heartbeats keyed (`source_alias`, `target_alias`), byte for byte,
/// stamped in `[from, to]` in increasing order, each record's timestamp its heartbeat's.
fn assert_heartbeats(records: &[Rec], source_alias: &str, target_alias: &str, from: i64, to: i64) {
    let mut last = i64::MIN;
    for (i, (k, v, ts)) in records.iter().enumerate() {
        assert_eq!(k, &key(source_alias, target_alias), "record {i}: key");
        assert_eq!(
            v,
            &value(*ts),
            "record {i}: value carries the record timestamp"
        );
        assert!(
            (from..=to).contains(ts),
            "record {i}: timestamp {ts} not within [{from}, {to}]"
        );
        assert!(*ts > last, "record {i}: timestamps increase");
        last = *ts;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_are_mm2_records_and_are_mirrored_like_data() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let (a, b) = (names.alias("source"), names.alias("target"));
    let (s, t) = (&clusters.source.bootstrap, &clusters.target.bootstrap);
    // `topics = orders` leaves heartbeats out of the filter; they are mirrored all the same.
    let cfg = config(
        &[(a.as_str(), s.as_str()), (b.as_str(), t.as_str())],
        &[format!("{a}->{b}").as_str()],
        &format!(
            "topics = {}\ngroups = {}\n",
            names.topic("orders"),
            names.pattern()
        ),
    );
    // For the flow source->target, the pair target->source writes `heartbeats` into source.
    let e = emitter(&cfg, &b, &a);
    assert_eq!(e.interval, Duration::from_secs(1), "MM2's default interval");
    let source = common::client(s).await;
    let mut task = HeartbeatTask::new(e, source.clone());
    assert_eq!(task.topic(), "heartbeats");

    let from = now_ms();
    let mut offsets = Vec::new();
    for _ in 0..3 {
        let summary = task.emit_once().await.expect("heartbeat written");
        offsets.push(summary.offset);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let to = now_ms();
    assert_eq!(task.written(), 3);
    common::assert_compacted_single_partition(&source, "heartbeats").await;

    // Other tests' heartbeats may lie between ours: ours are at the offsets reported.
    let (found, written): (Vec<i64>, Vec<Rec>) = read_heartbeats(&source, "heartbeats", (&b, &a))
        .await
        .into_iter()
        .unzip();
    assert_eq!(found, offsets);
    assert_eq!(written.len(), 3);
    // The first record, spelled out: key "target<id>" (14 bytes), "source<id>" (14 bytes);
    // value version 0 then the timestamp.
    assert_eq!(
        written[0].0[..],
        [b"\x00\x0e", b.as_bytes(), b"\x00\x0e", a.as_bytes()].concat()
    );
    assert_eq!(&written[0].1[..2], &[0, 0]);
    assert_eq!(written[0].1.len(), 10);
    assert_heartbeats(&written, &b, &a, from, to);

    // The flow source->target mirrors them to `source.heartbeats`, records unchanged.
    let mut flow = start_flow(flow(&cfg, &format!("{a}->{b}")), s, t).await;
    flow.run_until_caught_up().await.expect("caught up");
    let target = common::client(t).await;
    assert_eq!(
        read_heartbeat_records(&target, &format!("{a}.heartbeats"), (&b, &a)).await,
        written
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_travel_two_hops_as_b_a_heartbeats() {
    // Three clusters: A and C the shared pair, B a broker of the test's own (the only cluster
    // here that nothing else writes heartbeats into: see the last check).
    let ac = Clusters::shared();
    let own = Clusters::start();
    let (a, b, c) = (
        ac.source.bootstrap.as_str(),
        own.source.bootstrap.as_str(),
        ac.target.bootstrap.as_str(),
    );
    let names = Names::new();
    let [alias_a, alias_b, alias_c] = ["A", "B", "C"].map(|base| names.alias(base));
    let filters = format!("topics = {0}\ngroups = {0}\n", names.pattern());
    let three = [
        (alias_a.as_str(), a),
        (alias_b.as_str(), b),
        (alias_c.as_str(), c),
    ];
    let cfg = config(
        &three,
        &[
            format!("{alias_a}->{alias_b}").as_str(),
            &format!("{alias_b}->{alias_c}"),
        ],
        &filters,
    );
    let (a_to_b, b_to_c) = (
        flow(&cfg, &format!("{alias_a}->{alias_b}")),
        flow(&cfg, &format!("{alias_b}->{alias_c}")),
    );
    let (a_heartbeats, b_a_heartbeats) = (
        format!("{alias_a}.heartbeats"),
        format!("{alias_b}.{alias_a}.heartbeats"),
    );

    // The names, from the policy: A's `heartbeats` is `A.heartbeats` on B, `B.A.heartbeats`
    // on C, and still a heartbeats topic whose original is `heartbeats`.
    assert_eq!(a_to_b.remote_topic("heartbeats"), a_heartbeats);
    assert_eq!(b_to_c.remote_topic(&a_heartbeats), b_a_heartbeats);
    assert!(b_to_c.should_replicate_topic(&a_heartbeats));
    assert!(b_to_c.policy.is_heartbeats_topic(&b_a_heartbeats));
    assert_eq!(b_to_c.policy.original_topic(&b_a_heartbeats), "heartbeats");
    // A flow back into A or B would be a cycle: it never copies them again.
    let back = config(
        &three,
        &[
            format!("{alias_c}->{alias_a}").as_str(),
            &format!("{alias_c}->{alias_b}"),
        ],
        &filters,
    );
    assert!(!flow(&back, &format!("{alias_c}->{alias_a}")).should_replicate_topic(&b_a_heartbeats));
    assert!(!flow(&back, &format!("{alias_c}->{alias_b}")).should_replicate_topic(&b_a_heartbeats));

    // For the flow A->B, the pair B->A writes `heartbeats` into A.
    let a_client = common::client(a).await;
    let mut task = HeartbeatTask::new(emitter(&cfg, &alias_b, &alias_a), a_client.clone());
    let from = now_ms();
    for _ in 0..2 {
        task.emit_once().await.expect("heartbeat written");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let to = now_ms();
    let written = read_heartbeat_records(&a_client, "heartbeats", (&alias_b, &alias_a)).await;
    assert_eq!(written.len(), 2);
    assert_heartbeats(&written, &alias_b, &alias_a, from, to);

    let mut first = start_flow(a_to_b, a, b).await;
    first.run_until_caught_up().await.expect("A->B caught up");
    let on_b = read_heartbeat_records(
        &common::client(b).await,
        &a_heartbeats,
        (&alias_b, &alias_a),
    )
    .await;
    assert_eq!(on_b, written);

    let mut second = start_flow(b_to_c, b, c).await;
    second.run_until_caught_up().await.expect("B->C caught up");
    let c_client = common::client(c).await;
    assert_eq!(
        read_heartbeat_records(&c_client, &b_a_heartbeats, (&alias_b, &alias_a)).await,
        written
    );
    let on_c = c_client.refresh_metadata().await.unwrap();
    assert!(
        !on_c.topics.contains_key(&format!("{alias_b}.heartbeats")),
        "B has no heartbeats of its own here"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_task_writes_one_heartbeat_per_interval_until_stopped() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let (a, b) = (names.alias("source"), names.alias("target"));
    let s = clusters.source.bootstrap.as_str();
    let cfg = config(
        &[(a.as_str(), s), (b.as_str(), &clusters.target.bootstrap)],
        &[format!("{a}->{b}").as_str()],
        &format!("topics = {0}\ngroups = {0}\n", names.pattern()),
    );
    let source = common::client(s).await;
    let mut task = HeartbeatTask::new(emitter(&cfg, &b, &a), source.clone());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let started = now_ms();
    let running = tokio::spawn(async move {
        task.run(async {
            let _ = stopped.await;
        })
        .await;
        task
    });
    // Until three are written (bounded: the suite runs many brokers on few cores).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let exists = source
            .refresh_metadata()
            .await
            .unwrap()
            .topics
            .contains_key("heartbeats");
        if exists && read_heartbeats(&source, "heartbeats", (&b, &a)).await.len() >= 3 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "three heartbeats not written within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.send(()).unwrap();
    let task = tokio::time::timeout(Duration::from_secs(5), running)
        .await
        .expect("the loop stops when told")
        .unwrap();
    let stopped_at = now_ms();

    let written = read_heartbeat_records(&source, "heartbeats", (&b, &a)).await;
    assert_eq!(written.len() as u64, task.written());
    // One per second, the first one second after the start: never more than the seconds that
    // passed.
    let elapsed = stopped_at - started;
    assert!(
        written.len() >= 3 && written.len() as i64 <= elapsed / 1000,
        "{} heartbeats in {elapsed} ms",
        written.len()
    );
    assert_heartbeats(&written, &b, &a, started + 990, stopped_at);
    for pair in written.windows(2) {
        let gap = pair[1].2 - pair[0].2;
        assert!(gap >= 990, "heartbeats {gap} ms apart, interval 1 s");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_resume_after_the_cluster_lost_everything() {
    let mut clusters = Clusters::start();
    let s = clusters.source.bootstrap.clone();
    let cfg = config(
        &[("source", &s), ("target", &clusters.target.bootstrap)],
        &["source->target"],
        "",
    );
    let client = client_with_timeout(&s, Duration::from_secs(3)).await;
    // Writes give up after 3 s (the default is delivery.timeout.ms, 120 s).
    let producer = ProducerConfig {
        delivery_timeout: Duration::from_secs(3),
        ..ProducerConfig::default()
    };
    let mut task = HeartbeatTask::new(emitter(&cfg, "target", "source"), client.clone())
        .with_producer_config(producer);
    task.emit_once().await.expect("first heartbeat");
    task.emit_once().await.expect("second heartbeat");

    // The cluster loses everything: the broker comes back on the same address as a new,
    // empty cluster (no topic, no producer state, another cluster id).
    let id_before = client.describe_cluster().await.unwrap().cluster_id;
    tokio::task::block_in_place(|| {
        clusters.stop_broker(Which::Source);
        format_afresh(&clusters, "source");
        clusters.start_broker(Which::Source);
    });
    let reader = common::client(&s).await;
    let id_after = reader.describe_cluster().await.unwrap().cluster_id;
    assert_ne!(id_after, id_before, "a new cluster");
    assert!(
        !reader
            .refresh_metadata()
            .await
            .unwrap()
            .topics
            .contains_key("heartbeats"),
        "nothing kept"
    );

    let from = now_ms();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut attempts = 0;
    let resumed = loop {
        attempts += 1;
        match task.emit_once().await {
            Ok(summary) => break summary,
            Err(e) if tokio::time::Instant::now() < deadline => {
                eprintln!("attempt {attempts}: {e}");
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(e) => panic!("heartbeats did not resume after {attempts} attempts: {e}"),
        }
    };
    assert_eq!(resumed.offset, 0, "a new topic");
    common::assert_compacted_single_partition(&reader, "heartbeats").await;
    let written = read_topic(&reader, "heartbeats").await;
    assert_eq!(written.len(), 1);
    assert_heartbeats(&written, "target", "source", from, now_ms());
    assert_eq!(written[0].2, resumed.heartbeat.timestamp_ms);
}

/// Wipes the data directory of the stopped broker `name` of `clusters` and formats it again
/// with a new cluster id, as `scripts/test-broker start` does: started again, it is a new, empty
/// cluster on the same ports.
fn format_afresh(clusters: &Clusters, name: &str) {
    let dir = clusters.dir();
    let data = dir.join(name).join("data");
    std::fs::remove_dir_all(&data).unwrap_or_else(|e| panic!("{}: {e}", data.display()));
    let output = strait_testkit::java_command()
        .arg("kafka.tools.StorageTool")
        .arg("format")
        // One =-joined argument: an id may start with '-'.
        .arg(format!("--cluster-id={}", new_cluster_id()))
        .arg("--config")
        .arg(dir.join(format!("{name}.properties")))
        .output()
        .expect("run kafka-storage format");
    assert!(
        output.status.success(),
        "kafka-storage format: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A Kafka cluster id: 16 random bytes, URL-safe base64 without padding (what
/// `kafka-storage random-uuid` prints).
fn new_cluster_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bytes = Vec::with_capacity(16);
    for _ in 0..2 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos(),
        );
        bytes.extend(h.finish().to_be_bytes());
    }
    let mut bits = 0u32;
    let mut held = 0;
    let mut out = String::new();
    for b in bytes {
        bits = (bits << 8) | u32::from(b);
        held += 8;
        while held >= 6 {
            held -= 6;
            out.push(ALPHABET[((bits >> held) & 63) as usize] as char);
        }
    }
    if held > 0 {
        out.push(ALPHABET[((bits << (6 - held)) & 63) as usize] as char);
    }
    out
}
