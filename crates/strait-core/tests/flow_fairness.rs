//! Fetch fairness against Apache Kafka. Kafka fills a fetch answer in request order and lets
//! only the first partition with data go past its size limit (KIP-74), so a flow that always
//! asks in the same order starves the partitions late in it while an early one has a backlog,
//! and never moves a partition whose next batch is larger than the per-partition limit unless
//! it happens to come first. Every backlogged partition must progress.

mod common;

use std::time::Duration;

use strait_core::flow::{Flow, FlowOptions};
use strait_kafka::admin::NewTopic;
use strait_testkit::{Clusters, Names, Rdk, TestRecord};
use strait_wire::offset_map::SourcePartition;

const PARTITIONS: i32 = 20;
/// Partitions 0..BIG hold 1 MiB each, far more than the flow may fetch in the rounds below.
const BIG: i32 = 3;
/// The flow's byte budget, and so the most one fetch returns.
const BUDGET: usize = 64 * 1024;
/// Partition 19's one record: larger than the per-partition fetch limit.
const HUGE: usize = 200 * 1024;

fn record(partition: i32, i: usize, size: usize) -> TestRecord {
    let mut value = format!("p{partition}-{i}-").into_bytes();
    value.resize(size, b'x');
    TestRecord::new(partition, Some(format!("k{i}").as_bytes()), Some(&value))
}

/// The flow from `source` to `target` between `names`' aliases, of `names`' topics and groups
/// only (heartbeats topics, which a flow mirrors whatever `topics` says, left out: other tests
/// write them), with a byte budget of `budget` and `options`, fetching with a 50 ms wait.
async fn start(
    (source, target): (&str, &str),
    names: &Names,
    budget: usize,
    options: FlowOptions,
) -> Flow {
    let config = common::flow_config_between(
        (&names.alias("source"), &names.alias("target")),
        source,
        target,
        &format!(
            "topics = {pattern}\n\
             groups = {pattern}\n\
             heartbeats.replication.enabled = false\n\
             strait.max.bytes.in.flight = {budget}",
            pattern = names.pattern()
        ),
    );
    let options = FlowOptions {
        fetch_max_wait: Duration::from_millis(50),
        ..options
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_backlogged_partition_progresses() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let wide = names.topic("wide");
    let rdk = Rdk::new();
    let (source, target) = (&clusters.source.bootstrap, &clusters.target.bootstrap);
    common::client(source)
        .await
        .create_topic(NewTopic::new(&wide, PARTITIONS))
        .await
        .unwrap();
    let mut records = Vec::new();
    for p in 0..BIG {
        records.extend((0..1024).map(|i| record(p, i, 1024)));
    }
    for p in BIG..PARTITIONS - 1 {
        records.extend((0..5).map(|i| record(p, i, 100)));
    }
    records.push(record(PARTITIONS - 1, 0, HUGE));
    // Batches of at most 8 KiB, so that one fetch of the backlog does not take a whole
    // partition in one oversized first batch (KIP-74). The message limit is librdkafka's, not
    // the broker's: the huge record must fit.
    Rdk::new()
        .with_client_config(&[("batch.size", "8192"), ("message.max.bytes", "1000000")])
        .produce(source, &wide, &records, "none");

    let options = FlowOptions {
        partition_max_bytes: 64 * 1024,
        ..FlowOptions::default()
    };
    let mut flow = start((source, target), &names, BUDGET, options).await;

    // 3 MiB of backlog in the first three partitions takes at least 48 rounds of 64 KiB; asked
    // in a fixed order, partitions 3..19 would get nothing in the first 24.
    let progressed = |flow: &Flow| -> Vec<i32> {
        (0..PARTITIONS)
            .filter(|p| {
                let sp = SourcePartition::new(&wide, *p);
                flow.map()
                    .partition(&sp)
                    .and_then(|m| m.extent())
                    .is_some_and(|e| e.src_end > 0)
            })
            .collect()
    };
    let mut rounds = 0;
    while progressed(&flow).len() < PARTITIONS as usize && rounds < 24 {
        flow.round().await.expect("round");
        rounds += 1;
    }
    let done = progressed(&flow);
    assert_eq!(
        done.len(),
        PARTITIONS as usize,
        "after {rounds} rounds only these partitions progressed: {done:?} ({:?})",
        flow.stats()
    );
    eprintln!("every partition progressed within {rounds} rounds");

    // And the flow still carries everything, each record once.
    flow.run_until_caught_up().await.unwrap();
    let stats = flow.stats();
    assert_eq!(stats.records, records.len() as u64, "{stats:?}");
    assert_eq!(stats.duplicate_records, 0, "{stats:?}");
    let huge = rdk.consume(
        target,
        &format!("{}.{wide}", names.alias("source")),
        records.len(),
        Duration::from_secs(60),
    );
    assert_eq!(huge.len(), records.len());
    let last = huge
        .iter()
        .find(|r| r.partition == PARTITIONS - 1)
        .expect("partition 19 mirrored");
    assert_eq!(last.value.as_ref().map(Vec::len), Some(HUGE));
}

/// `strait run` without `max.partition.fetch.bytes` asks each partition for its share of the
/// fetch (`FlowOptions::partition_bytes_from_budget`). With many partitions that share can be
/// smaller than their batches: the broker then sends cut batches, which move nothing, except
/// to the first partition of an answer (KIP-74). A cut batch's header tells its size, and the
/// next fetch asks enough: many partitions move per round, not one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_share_smaller_than_the_batches_still_moves_many_partitions_per_round() {
    const WIDE: i32 = 32;
    const LARGE: usize = 200 * 1024;
    let clusters = Clusters::shared();
    let names = Names::new();
    let large = names.topic("large");
    let rdk = Rdk::new();
    let (source, target) = (&clusters.source.bootstrap, &clusters.target.bootstrap);
    common::client(source)
        .await
        .create_topic(NewTopic::new(&large, WIDE))
        .await
        .unwrap();
    // Two batches of one 200 KiB record per partition (a record larger than `batch.size`
    // goes alone).
    let records: Vec<TestRecord> = (0..WIDE)
        .flat_map(|p| (0..2).map(move |i| record(p, i, LARGE)))
        .collect();
    Rdk::new()
        .with_client_config(&[("batch.size", "16384"), ("message.max.bytes", "1000000")])
        .produce(source, &large, &records, "none");

    // A fetch of 2 MiB: a share of 64 KiB per partition, a third of a batch.
    let options = FlowOptions {
        partition_bytes_from_budget: true,
        ..FlowOptions::default()
    };
    let mut flow = start((source, target), &names, 6 * 1024 * 1024, options).await;
    // One partition per round (the first of each answer) would take 64 rounds.
    let mut rounds = 0;
    while flow.stats().records < records.len() as u64 && rounds < 24 {
        flow.round().await.expect("round");
        rounds += 1;
    }
    let stats = flow.stats();
    assert_eq!(
        stats.records,
        records.len() as u64,
        "after {rounds} rounds: {stats:?}"
    );
    eprintln!(
        "{} records of {LARGE} bytes in {rounds} rounds",
        stats.records
    );
    let copied = rdk.consume(
        target,
        &format!("{}.{large}", names.alias("source")),
        records.len(),
        Duration::from_secs(60),
    );
    assert_eq!(copied.len(), records.len());
    assert!(copied
        .iter()
        .all(|r| r.value.as_ref().map(Vec::len) == Some(LARGE)));
}
