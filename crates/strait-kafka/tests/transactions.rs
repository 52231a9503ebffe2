//! The raw producer with a `transactional.id`, against Apache Kafka's transaction coordinator:
//! forwarded batches become transactional batches of our producer; a commit makes them visible
//! to `read_committed` readers and an abort hides them for good; a second producer of the same
//! id fences the first (its open transaction is aborted, and every later write, commit or epoch
//! bump of the first is refused); the second writes on. Both ends are read by librdkafka, and
//! the target's batches are read back to show which producer id and epoch wrote each.

mod common;

use std::time::Duration;

use strait_kafka::produce::{ProducerConfig, RawProducer};
use strait_kafka::TopicPartition;
use strait_testkit::{Clusters, Names, Rdk, TestRecord};
use strait_wire::RawBatch;

use common::{client, fetch_all};

/// Five source transactions' worth of data: call `c` writes 4 records to each of 2 partitions,
/// one batch per partition (each call is flushed on its own).
const CALLS: usize = 5;
const PER_BATCH: usize = 4;

fn call_records(call: usize) -> Vec<TestRecord> {
    (0..2)
        .flat_map(|p| {
            (0..PER_BATCH).map(move |i| {
                TestRecord::new(
                    p,
                    Some(format!("k{i}").as_bytes()),
                    Some(format!("call{call}-p{p}-{i}").as_bytes()),
                )
                .with_header("call", Some(format!("{call}").as_bytes()))
            })
        })
        .collect()
}

fn call_of(record: &TestRecord) -> usize {
    let value = String::from_utf8(record.value.clone().unwrap()).unwrap();
    value["call".len()..value.find('-').unwrap()]
        .parse()
        .unwrap()
}

/// `records` without their offsets (partition, key, value, headers and timestamp), in
/// partition and offset order.
fn payloads(records: &[TestRecord]) -> Vec<TestRecord> {
    records
        .iter()
        .map(|r| TestRecord {
            offset: None,
            ..r.clone()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_commit_abort_and_fence_the_earlier_producer() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let (source, target) = (&clusters.source.bootstrap, &clusters.target.bootstrap);
    let rdk = Rdk::new();
    let name = names.topic("txn-forward");
    rdk.create_topic(source, &name, 2);
    rdk.create_topic(target, &name, 2);
    for call in 0..CALLS {
        rdk.produce(source, &name, &call_records(call), "lz4");
    }
    let src = client(source).await;
    // batches[call] = that call's batches of each partition: usually one, but librdkafka may
    // split a call on a loaded machine; call c's records are at offsets c * PER_BATCH.. of each
    // partition.
    let mut batches: Vec<Vec<(TopicPartition, RawBatch)>> = vec![Vec::new(); CALLS];
    for p in 0..2 {
        let tp = TopicPartition::new(&name, p);
        let all = fetch_all(&src, &tp, 0).await;
        let records: i64 = all.iter().map(|b| i64::from(b.header.record_count)).sum();
        assert_eq!(records, (CALLS * PER_BATCH) as i64, "{tp}: records");
        for batch in all {
            let call = (batch.header.base_offset / PER_BATCH as i64) as usize;
            batches[call].push((tp.clone(), batch));
        }
    }

    let config = ProducerConfig {
        transactional_id: Some(format!("strait-test-{name}")),
        ..ProducerConfig::default()
    };
    let a = RawProducer::new(client(target).await, config.clone())
        .await
        .unwrap();
    // Call 0 committed, call 1 aborted, call 2 committed, call 3 left open.
    for (call, commit) in [(0, true), (1, false), (2, true), (3, false)] {
        for ack in a.send_all(batches[call].clone()).await {
            ack.unwrap();
        }
        match (call, commit) {
            (3, _) => {}
            (_, true) => a.commit().await.unwrap(),
            (_, false) => a.abort().await.unwrap(),
        }
    }

    // A second producer of the same id: the same producer id at a later epoch. A's open
    // transaction (call 3) is aborted by the coordinator, under an epoch of its own between
    // the two (Kafka bumps once to fence and abort, then again for the new producer).
    let b = RawProducer::new(client(target).await, config.clone())
        .await
        .unwrap();
    let (a_id, a_epoch) = a.producer_id();
    let (b_id, b_epoch) = b.producer_id();
    assert_eq!(b_id, a_id);
    assert!(b_epoch > a_epoch, "A at epoch {a_epoch}, B at {b_epoch}");
    eprintln!("producer id {a_id}: A at epoch {a_epoch}, B at epoch {b_epoch}");

    // A is fenced everywhere: its data, its commit, its own epoch bump.
    let refused = a.send_all(batches[4].clone()).await;
    for r in &refused {
        r.as_ref()
            .expect_err("a fenced producer's batch must be refused");
    }
    // The first batch of each partition is refused as fenced (one behind it, when the call
    // was split, is not sent: an earlier batch failed).
    assert!(refused
        .iter()
        .any(|r| r.as_ref().is_err_and(|e| e.is_fenced())));
    eprintln!(
        "fenced producer's batch: {}",
        refused[0].as_ref().unwrap_err()
    );
    let commit = a
        .commit()
        .await
        .expect_err("a fenced producer cannot commit");
    assert!(commit.is_fenced(), "{commit}");
    eprintln!("fenced producer's commit: {commit}");
    let mut a = a;
    let bump = a
        .bump_epoch()
        .await
        .expect_err("a fenced producer cannot take the id back");
    assert!(bump.is_fenced(), "{bump}");
    eprintln!("fenced producer's epoch bump: {bump}");

    // B writes call 4 and commits.
    for ack in b.send_all(batches[4].clone()).await {
        ack.unwrap();
    }
    b.commit().await.unwrap();

    // The source as librdkafka reads it, and the target with both isolation levels.
    let wait = Duration::from_secs(60);
    let source_records = rdk.consume(source, &name, CALLS * 2 * PER_BATCH, wait);
    let committed = Rdk::new()
        .with_client_config(&[("isolation.level", "read_committed")])
        .consume(target, &name, 3 * 2 * PER_BATCH, wait);
    let everything = Rdk::new()
        .with_client_config(&[("isolation.level", "read_uncommitted")])
        .consume(target, &name, CALLS * 2 * PER_BATCH, wait);
    let expected: Vec<TestRecord> = source_records
        .iter()
        .filter(|r| [0, 2, 4].contains(&call_of(r)))
        .cloned()
        .collect();
    assert_eq!(
        payloads(&committed),
        payloads(&expected),
        "read_committed sees calls 0, 2 and 4, each once, in order"
    );
    assert_eq!(
        payloads(&everything),
        payloads(&source_records),
        "read_uncommitted sees every call once: the fenced write did not land"
    );

    // The target's batches: per partition, five data batches (four of A's epoch, call 4 of B's)
    // and five markers (commit, abort, commit, the abort of A's open transaction, commit).
    let dst = client(target).await;
    for p in 0..2 {
        let tp = TopicPartition::new(&name, p);
        let all = fetch_all(&dst, &tp, 0).await;
        let data: Vec<(i64, i16, bool)> = all
            .iter()
            .filter(|b| !b.header.attributes.is_control())
            .map(|b| {
                (
                    b.header.producer_id,
                    b.header.producer_epoch,
                    b.header.attributes.is_transactional(),
                )
            })
            .collect();
        let mut want = vec![(a_id, a_epoch, true); 4];
        want.push((a_id, b_epoch, true));
        assert_eq!(data, want, "{tp}: who wrote each data batch");
        let markers = all
            .iter()
            .filter(|b| b.header.attributes.is_control())
            .count();
        assert_eq!(markers, 5, "{tp}: one marker per ended transaction");
        for (batch, source) in all
            .iter()
            .filter(|b| !b.header.attributes.is_control())
            .zip(&batches)
        {
            assert_eq!(
                batch.records_bytes(),
                source
                    .iter()
                    .find(|(t, _)| *t == tp)
                    .unwrap()
                    .1
                    .records_bytes(),
                "{tp}: the records go through unopened"
            );
        }
    }
}
