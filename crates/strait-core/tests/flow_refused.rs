//! A batch the target refuses for good (here: larger than the remote topic's
//! `max.message.bytes`, MESSAGE_TOO_LARGE) stops only its partition: the partition is reported
//! refused and tried again with a growing wait, the other partitions go on, and the producer
//! keeps its id (the epoch is bumped, no new producer state piles up on the target, KIP-936).
//! Once the topic takes the batch, the partition catches up exactly once.

mod common;

use common::client;
use std::time::Duration;

use strait_kafka::admin::{AlterConfigOp, ConfigResource, NewTopic};
use strait_testkit::{Clusters, Names, Rdk, TestRecord};
use strait_wire::offset_map::{SourcePartition, Translation};

fn small(partition: i32, tag: &str, n: usize) -> Vec<TestRecord> {
    (0..n)
        .map(|i| {
            TestRecord::new(
                partition,
                Some(format!("k{i}").as_bytes()),
                Some(format!("{tag}-{i}").as_bytes()),
            )
        })
        .collect()
}

/// The producer ids the target keeps state for on `topic`-`partition`, by Kafka's own
/// `kafka-transactions.sh describe-producers`.
fn producers_on_target(bootstrap: &str, topic: &str, partition: i32) -> Vec<String> {
    let out = strait_testkit::kafka_tool(
        "org.apache.kafka.tools.TransactionsCommand",
        &[
            "--bootstrap-server",
            bootstrap,
            "describe-producers",
            "--topic",
            topic,
            "--partition",
            &partition.to_string(),
        ],
    );
    out.lines()
        .skip_while(|l| !l.starts_with("ProducerId"))
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

/// What `strait status` shows for `topic`-`partition`.
fn partition_status(topic: &str, partition: i32) -> strait_core::status::PartitionStatus {
    strait_core::status::snapshot()
        .flows
        .iter()
        .flat_map(|f| &f.topics)
        .filter(|t| t.topic == topic)
        .flat_map(|t| &t.partitions)
        .find(|p| p.partition == partition)
        .unwrap_or_else(|| panic!("{topic}-{partition} in the status"))
        .clone()
}

fn consumed(rdk: &Rdk, bootstrap: &str, topic: &str, n: usize) -> Vec<TestRecord> {
    rdk.consume(bootstrap, topic, n, Duration::from_secs(30))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_batch_holds_back_its_partition_only_and_takes_no_new_producer_ids() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let (a, b) = (names.alias("source"), names.alias("target"));
    let orders = names.topic("orders");
    let remote = format!("{a}.{orders}");
    let rdk = Rdk::new();
    let src = client(&clusters.source.bootstrap).await;
    let dst = client(&clusters.target.bootstrap).await;
    src.create_topic(NewTopic::new(&orders, 2)).await.unwrap();
    // The remote topic takes batches up to 2 KB; config sync is off so it stays that way.
    dst.create_topic(NewTopic::new(&remote, 2).config("max.message.bytes", "2048"))
        .await
        .unwrap();

    // Partition 1: three small records, one of 8 KB, three small.
    let mut p1 = small(1, "p1a", 3);
    p1.push(TestRecord::new(1, Some(b"big"), Some(&vec![b'x'; 8192])));
    p1.extend(small(1, "p1b", 3));
    rdk.produce(&clusters.source.bootstrap, &orders, &p1[..3], "none");
    rdk.produce(&clusters.source.bootstrap, &orders, &p1[3..4], "none");
    rdk.produce(&clusters.source.bootstrap, &orders, &p1[4..], "none");
    let mut p0 = small(0, "p0a", 20);
    rdk.produce(&clusters.source.bootstrap, &orders, &p0, "none");

    // Only this test's topics and groups; no heartbeats (other tests' on the shared clusters):
    // the batch counts below are of `orders` alone.
    let mut flow = common::start_flow_between(
        (&a, &b),
        &clusters.source.bootstrap,
        &clusters.target.bootstrap,
        &format!(
            "sync.topic.configs.enabled = false\n\
             topics = {orders}\n\
             groups = {}\n\
             heartbeats.replication.enabled = false",
            names.pattern()
        ),
    )
    .await;
    let (producer_id, first_epoch) = flow.producer_id();

    // Six seconds of rounds, with more records for partition 0 halfway.
    let started = tokio::time::Instant::now();
    let mut more_sent = false;
    let mut rounds = 0;
    while started.elapsed() < Duration::from_secs(6) {
        flow.round()
            .await
            .expect("a refused batch does not stop the flow");
        rounds += 1;
        if !more_sent && started.elapsed() > Duration::from_secs(3) {
            let more = small(0, "p0b", 20);
            rdk.produce(&clusters.source.bootstrap, &orders, &more, "none");
            p0.extend(more);
            more_sent = true;
        }
    }

    // Partition 0 is all there, in order; partition 1 up to the refused batch, nothing after.
    let got = consumed(&rdk, &clusters.target.bootstrap, &remote, 43);
    let got0: Vec<_> = got.iter().filter(|r| r.partition == 0).collect();
    let got1: Vec<_> = got.iter().filter(|r| r.partition == 1).collect();
    assert_eq!(got0.len(), 40, "partition 0 goes on ({rounds} rounds)");
    for (w, h) in p0.iter().zip(&got0) {
        assert!(w.same_payload(h), "{w:?} vs {h:?}");
    }
    assert_eq!(got1.len(), 3, "partition 1 stops at the refused batch");
    for (w, h) in p1.iter().zip(&got1) {
        assert!(w.same_payload(h), "{w:?} vs {h:?}");
    }
    let sp1 = SourcePartition::new(&orders, 1);
    assert_eq!(
        flow.map().partition(&sp1).and_then(|m| m.src_end()),
        Some(3)
    );

    // Tried again with a growing wait, not every round; always the same producer id.
    let (id, epoch) = flow.producer_id();
    assert_eq!(id, producer_id, "no new producer id");
    let tries = epoch - first_epoch;
    assert!(
        (1..=5).contains(&tries),
        "{tries} refused tries in 6 s over {rounds} rounds: the partition must back off"
    );
    // Kafka's own view: one producer's state on the written partitions.
    for p in [0, 1] {
        let ids = producers_on_target(&clusters.target.bootstrap, &remote, p);
        assert_eq!(ids, vec![producer_id.to_string()], "partition {p}");
    }

    // Reported: the partition is refused, and says why.
    let partition = partition_status(&orders, 1);
    assert!(partition.blocked, "{partition:?}");
    let why = partition.last_error.expect("a last error").message;
    assert!(
        why.contains("MessageTooLarge") || why.contains("MESSAGE_TOO_LARGE"),
        "{why}"
    );

    // The topic takes 1 MB batches now: partition 1 catches up, each record once.
    dst.incremental_alter_configs(
        &ConfigResource::Topic(remote.clone()),
        &[AlterConfigOp::Set(
            "max.message.bytes".into(),
            "1048576".into(),
        )],
    )
    .await
    .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while flow.map().partition(&sp1).and_then(|m| m.src_end()) < Some(7) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "partition 1 did not resume"
        );
        flow.round().await.unwrap();
    }
    let got = consumed(&rdk, &clusters.target.bootstrap, &remote, 47);
    let got1: Vec<_> = got.iter().filter(|r| r.partition == 1).collect();
    assert_eq!(got1.len(), 7, "each record of partition 1 once");
    for (w, h) in p1.iter().zip(&got1) {
        assert!(w.same_payload(h), "{w:?} vs {h:?}");
    }
    let map1 = flow.map().partition(&sp1).unwrap();
    for offset in 0..7 {
        assert_eq!(
            map1.translate(offset),
            Translation::Exact { target: offset },
            "offset {offset}"
        );
    }
    assert_eq!(flow.stats().duplicate_records, 0);
    let partition = partition_status(&orders, 1);
    assert!(!partition.blocked, "{partition:?}");

    // The refused batch was decided again at every try; it is counted once, when the target
    // took it: the batch counters say what the target holds.
    let on_target = batches_on(&dst, &remote, 2).await;
    let stats = flow.stats();
    assert_eq!(
        stats.batches_forwarded + stats.batches_rebuilt,
        on_target,
        "{stats:?}, after {tries} refused tries"
    );
}

/// The record batches `topic`'s `partitions` hold on the cluster of `client`, read from the
/// start.
async fn batches_on(client: &strait_kafka::Client, topic: &str, partitions: i32) -> u64 {
    let options = strait_kafka::fetch::FetchOptions {
        max_wait: Duration::from_millis(10),
        ..Default::default()
    };
    let mut count = 0;
    for p in 0..partitions {
        let tp = strait_kafka::TopicPartition::new(topic, p);
        let position = strait_kafka::fetch::FetchPosition::new(tp.clone(), 0);
        let data = client
            .fetch(&[position], &options)
            .await
            .remove(&tp)
            .expect("an answer for the partition")
            .expect("the partition fetched");
        for batch in strait_wire::BatchScanner::new(data.records) {
            batch.expect("a whole batch");
            count += 1;
        }
    }
    count
}
