//! Flows that each run one unit of a flow through a transactional producer (`docs/design.md`
//! §7.2–§7.3), against Apache Kafka: two units split the partitions between them; a new owner
//! of a unit fences the old one, whose next write is refused and which writes nothing more; an
//! owner that wrote a round's data and crashed before committing leaves aborted data that the
//! next owner neither matches nor counts; an owner that committed and crashed before its map
//! was written leaves committed data that the next owner matches instead of writing again. At
//! the end, a read_committed librdkafka consumer reads every source record exactly once, in
//! order, and the map sends every source offset to the copy of its record. And after a
//! `tasks.max` change, the new units fence a unit of the earlier count left mid-transaction.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{batches_from, client};
use strait_core::flow::{Flow, FlowOptions};
use strait_core::internal::map_store::MapStore;
use strait_core::scale::UnitFilter;
use strait_kafka::produce::{ProducerConfig, RawProducer};
use strait_kafka::TopicPartition;
use strait_testkit::{Clusters, Names, Rdk, TestRecord};
use strait_wire::offset_map::{SourcePartition, Translation};

const PARTITIONS: i32 = 8;

/// The source cluster's alias in this test's flow.
fn source_alias(names: &Names) -> String {
    names.alias("source")
}

/// This test's source topic.
fn topic(names: &Names) -> String {
    names.topic("orders")
}

/// Its remote topic on the target.
fn remote(names: &Names) -> String {
    format!("{}.{}", source_alias(names), topic(names))
}

fn unit_options(names: &Names, index: u32) -> FlowOptions {
    FlowOptions {
        fetch_max_wait: Duration::from_millis(50),
        producer: ProducerConfig {
            transactional_id: Some(format!("strait-test-{}-{index}", topic(names))),
            ..ProducerConfig::default()
        },
        unit: Some(UnitFilter { index, units: 2 }),
        ..FlowOptions::default()
    }
}

/// A unit of the flow between the test's own aliases, of its topics and groups only. Heartbeats
/// topics, which a flow mirrors whatever `topics` says, are left out: other tests on the shared
/// clusters write them.
async fn start_unit(clusters: &Clusters, names: &Names, index: u32) -> Flow {
    let pattern = names.pattern();
    Flow::start(
        common::flow_config_between(
            (&source_alias(names), &names.alias("target")),
            &clusters.source.bootstrap,
            &clusters.target.bootstrap,
            &format!(
                "topics = {pattern}\n\
                 groups = {pattern}\n\
                 heartbeats.replication.enabled = false"
            ),
        ),
        unit_options(names, index),
        client(&clusters.source.bootstrap).await,
        client(&clusters.target.bootstrap).await,
    )
    .await
    .expect("unit starts")
}

/// `n` records per partition, values naming their partition, round and index.
fn records(round: &str, n: usize) -> Vec<TestRecord> {
    (0..PARTITIONS)
        .flat_map(|p| {
            (0..n).map(move |i| {
                let value = format!("{round}-p{p}-{i}");
                TestRecord::new(p, Some(format!("k{i}").as_bytes()), Some(value.as_bytes()))
                    .with_header("round", Some(round.as_bytes()))
            })
        })
        .collect()
}

/// Writes, under `transactional_id`, copies of the source batches of `unit`'s partitions from
/// where the map on the target ends: what an owner of the unit writes in a round. Commits them
/// if `commit`, else leaves the transaction open as a crash would. Returns the records written.
async fn write_like_an_owner(clusters: &Clusters, names: &Names, unit: u32, commit: bool) -> i64 {
    let (topic, remote) = (&topic(names), &remote(names));
    let source = client(&clusters.source.bootstrap).await;
    let target = client(&clusters.target.bootstrap).await;
    let map = MapStore::read(&target, &source_alias(names)).await.unwrap();
    let filter = UnitFilter {
        index: unit,
        units: 2,
    };
    let producer = RawProducer::new(target.clone(), unit_options(names, unit).producer)
        .await
        .unwrap();
    let mut sends = Vec::new();
    for p in (0..PARTITIONS).filter(|p| filter.contains(topic, *p)) {
        let from = map
            .partition(&SourcePartition::new(topic, p))
            .and_then(|m| m.src_end())
            .unwrap();
        for batch in batches_from(&source, &TopicPartition::new(topic, p), from).await {
            assert_eq!(batch.header.base_offset, from.max(batch.header.base_offset));
            sends.push((TopicPartition::new(remote, p), batch));
        }
    }
    let records: i64 = sends
        .iter()
        .map(|(_, b)| i64::from(b.header.record_count))
        .sum();
    for ack in producer.send_all(sends).await {
        ack.unwrap();
    }
    if commit {
        producer.commit().await.unwrap();
    }
    // Dropped without committing: the transaction stays open until the next owner's
    // initialisation aborts it.
    records
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn units_split_partitions_fence_earlier_owners_and_commit_exactly_once() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let (topic, remote) = (&topic(&names), &remote(&names));
    let (src, dst) = (&clusters.source.bootstrap, &clusters.target.bootstrap);
    let rdk = Rdk::new();
    rdk.create_topic(src, topic, PARTITIONS);
    let mut sent = rdk.produce(src, topic, &records("one", 50), "lz4").len();

    // 1. Two units split the partitions: each writes only its own.
    let mut a0 = start_unit(&clusters, &names, 0).await;
    let mut a1 = start_unit(&clusters, &names, 1).await;
    a0.run_until_caught_up().await.unwrap();
    a1.run_until_caught_up().await.unwrap();
    let split = |flow: &Flow| -> Vec<i32> {
        (0..PARTITIONS)
            .filter(|p| {
                flow.map()
                    .partition(&SourcePartition::new(topic, *p))
                    .is_some_and(|m| m.src_end() == Some(50))
            })
            .collect()
    };
    let (units0, units1) = (split(&a0), split(&a1));
    eprintln!("unit 0 mirrors {units0:?}, unit 1 mirrors {units1:?}");
    assert!(!units0.is_empty() && !units1.is_empty());
    assert_eq!(units0.len() + units1.len(), PARTITIONS as usize);
    assert!(units0.iter().all(|p| !units1.contains(p)));

    // 2. A new owner of unit 0 fences the first: the first's next write is refused, and it
    //    stops for good, having written nothing more.
    sent += rdk.produce(src, topic, &records("two", 30), "lz4").len();
    let mut b0 = start_unit(&clusters, &names, 0).await;
    b0.run_until_caught_up().await.unwrap();
    let fenced = a0.run_until_caught_up().await.unwrap_err();
    eprintln!("the first owner of unit 0 was refused: {fenced}");
    assert!(fenced.is_fenced(), "{fenced:?}");
    drop(a0);

    // 3. An owner of unit 1 writes a round's data and crashes before committing; the next owner
    //    must neither match that aborted data nor count it, and writes the records again.
    sent += rdk.produce(src, topic, &records("three", 20), "lz4").len();
    let aborted = write_like_an_owner(&clusters, &names, 1, false).await;
    let mut b1 = start_unit(&clusters, &names, 1).await;
    b1.run_until_caught_up().await.unwrap();
    assert_eq!(b1.stats().duplicate_records, 0);
    assert_eq!(b1.stats().recovered_records, 0);
    // The earlier owner of unit 1 is fenced too.
    assert!(a1.run_until_caught_up().await.unwrap_err().is_fenced());
    drop(a1);

    // 4. An owner of unit 1 commits a round's data and crashes before its map is written: the
    //    next owner matches it and writes none of it again.
    sent += rdk.produce(src, topic, &records("four", 20), "lz4").len();
    let committed = write_like_an_owner(&clusters, &names, 1, true).await;
    let mut c1 = start_unit(&clusters, &names, 1).await;
    c1.run_until_caught_up().await.unwrap();
    assert_eq!(c1.stats().recovered_records as i64, committed);
    assert_eq!(c1.stats().duplicate_records, 0);
    b0.run_until_caught_up().await.unwrap();
    eprintln!("aborted copies left by the crash: {aborted}; committed and matched: {committed}");

    // 5. read_committed: every source record once, in order, headers and timestamps equal.
    let source_records = rdk.consume(src, topic, sent, Duration::from_secs(60));
    let target_records = rdk.consume(dst, remote, sent, Duration::from_secs(60));
    assert_eq!(target_records.len(), sent);
    let by_partition = |records: &[TestRecord]| {
        let mut out: BTreeMap<i32, Vec<TestRecord>> = BTreeMap::new();
        for r in records {
            out.entry(r.partition).or_default().push(r.clone());
        }
        out
    };
    let (from, to) = (by_partition(&source_records), by_partition(&target_records));
    let map = MapStore::read(&client(dst).await, &source_alias(&names))
        .await
        .unwrap();
    for (p, originals) in &from {
        let copies = &to[p];
        assert_eq!(copies.len(), originals.len(), "partition {p}");
        for (original, copy) in originals.iter().zip(copies) {
            assert!(copy.same_payload(original), "{original:?} vs {copy:?}");
            assert_eq!(copy.timestamp_ms, original.timestamp_ms);
            // The map sends the source offset to its copy.
            let sp = SourcePartition::new(topic, *p);
            match map.translate(&sp, original.offset.unwrap()) {
                Translation::Exact { target } => assert_eq!(Some(target), copy.offset),
                other => panic!("{original:?} translates to {other:?}"),
            }
        }
    }
    // The aborted copies are on the target, where only read_uncommitted readers see them.
    let target = client(dst).await;
    let mut uncommitted = 0;
    for p in 0..PARTITIONS {
        for b in batches_from(&target, &TopicPartition::new(remote, p), 0).await {
            if !b.header.attributes.is_control() {
                uncommitted += i64::from(b.header.record_count);
            }
        }
    }
    assert_eq!(uncommitted, sent as i64 + aborted);
}

/// A `tasks.max` change: a unit of the earlier count (index 3 of 4) was cut off mid-round with
/// its transaction open when the flow came back with 2 units. The units of the new count fence
/// its transactional id before they write, so its open transaction is aborted and its late
/// commit refused: a read_committed reader sees every record once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn units_of_a_new_count_fence_a_unit_of_the_earlier_count() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let (topic, remote) = (&topic(&names), &remote(&names));
    let (src, dst) = (&clusters.source.bootstrap, &clusters.target.bootstrap);
    let rdk = Rdk::new();
    rdk.create_topic(src, topic, PARTITIONS);
    rdk.create_topic(dst, remote, PARTITIONS);
    let sent = rdk.produce(src, topic, &records("one", 40), "lz4").len();

    // The earlier count's unit 3 copies its partitions' batches and does not commit yet.
    let source = client(src).await;
    let target = client(dst).await;
    let old = UnitFilter { index: 3, units: 4 };
    let zombie = RawProducer::new(
        target.clone(),
        ProducerConfig {
            transactional_id: Some(format!("strait-test-{topic}-3")),
            transaction_timeout: Duration::from_secs(600),
            ..ProducerConfig::default()
        },
    )
    .await
    .unwrap();
    let mut sends = Vec::new();
    for p in (0..PARTITIONS).filter(|p| old.contains(topic, *p)) {
        for batch in batches_from(&source, &TopicPartition::new(topic, p), 0).await {
            sends.push((TopicPartition::new(remote, p), batch));
        }
    }
    assert!(!sends.is_empty(), "unit 3 of 4 owns some of 8 partitions");
    for ack in zombie.send_all(sends).await {
        ack.unwrap();
    }

    // The flow comes back with two units, which mirror everything.
    let mut u0 = start_unit(&clusters, &names, 0).await;
    let mut u1 = start_unit(&clusters, &names, 1).await;
    u0.run_until_caught_up().await.unwrap();
    u1.run_until_caught_up().await.unwrap();

    // The earlier unit wakes and commits: refused.
    let late = zombie.commit().await.unwrap_err();
    eprintln!("the earlier count's unit was refused: {late}");
    assert!(late.is_fenced(), "{late:?}");

    let copies = rdk.consume(dst, remote, sent, Duration::from_secs(60));
    assert_eq!(copies.len(), sent);
    let mut seen = std::collections::BTreeSet::new();
    for copy in &copies {
        assert!(seen.insert(copy.value.clone()), "read twice: {copy:?}");
    }
}
