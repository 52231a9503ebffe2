//! Merged batches (`strait.batch.merge`, `docs/design.md` §3.2) against Apache Kafka: a source
//! written in many small batches by librdkafka is mirrored with merging on, and librdkafka reads
//! the target back record by record (keys, values, headers, tombstones, explicit timestamps) in
//! every codec; the target holds fewer, larger batches; every source offset translates to the
//! target offset of its copy; a transactional source with aborted transactions merges only
//! within a transaction and never across a marker; and a merged batch the target refuses as too
//! large is split and sent again, nothing lost, nothing refused.

mod common;

use common::{assert_mirrored, batches_from, client};
use std::time::Duration;

use strait_core::flow::Flow;
use strait_kafka::admin::{IsolationLevel, NewTopic, OffsetSpec};
use strait_kafka::{Client, TopicPartition};
use strait_testkit::{Clusters, Names, Rdk, TestRecord};
use strait_wire::offset_map::{SourcePartition, Translation};
use strait_wire::records::batch_records;

/// The flow between the test's own aliases, of its topics only, merging whenever batches wait,
/// plus `extra` lines.
async fn start(clusters: &Clusters, names: &Names, extra: &str) -> Flow {
    let pattern = names.pattern();
    common::start_flow_between(
        (&names.alias("source"), &names.alias("target")),
        &clusters.source.bootstrap,
        &clusters.target.bootstrap,
        &format!(
            "topics = {pattern}\n\
             groups = {pattern}\n\
             heartbeats.replication.enabled = false\n\
             strait.batch.merge = always\n\
             {extra}"
        ),
    )
    .await
}

fn remote(names: &Names, topic: &str) -> String {
    format!("{}.{topic}", names.alias("source"))
}

/// A librdkafka client whose producers send at most `records` records per batch.
fn small_batches(records: usize) -> Rdk {
    Rdk::new().with_client_config(&[("batch.num.messages", &records.to_string())])
}

/// `n` records over `partitions`: keys (some null), values (some tombstones), headers with a
/// repeated key and a null value, and explicit timestamps that go back and forth.
fn records(partitions: i32, n: usize, tag: &str) -> Vec<TestRecord> {
    let now = common::now_ms();
    (0..n)
        .map(|i| {
            let mut r = TestRecord::new(
                (i as i32) % partitions,
                (i % 5 != 0)
                    .then(|| format!("k{i}").into_bytes())
                    .as_deref(),
                (i % 7 != 3)
                    .then(|| format!("{tag}-{i}-{}", "x".repeat(i % 50)).into_bytes())
                    .as_deref(),
            )
            .with_timestamp(now - 3_600_000 + (i as i64 % 11) * 1_000 - (i as i64 % 3) * 7);
            if i % 2 == 0 {
                r = r.with_header("h", Some(b"1")).with_header("h", None);
            }
            r
        })
        .collect()
}

/// The data batches of `tp` (no control batches), from its start.
async fn data_batches(client: &Client, tp: &TopicPartition) -> Vec<strait_wire::RawBatch> {
    batches_from(client, tp, 0)
        .await
        .into_iter()
        .filter(|b| !b.header.attributes.is_control())
        .collect()
}

/// Every source offset of `topic`'s partitions up to their end (of those `mirrored` keeps:
/// not aborted data) translates to the target offset whose record has the same key and value
/// (read raw on both sides).
async fn assert_translated_exactly(
    flow: &Flow,
    (src, dst): (&Client, &Client),
    topic: &str,
    remote: &str,
    partitions: i32,
    mirrored: impl Fn(i32, i64) -> bool,
) {
    for p in 0..partitions {
        let source = TopicPartition::new(topic, p);
        let target = TopicPartition::new(remote, p);
        let by_offset = |batches: Vec<strait_wire::RawBatch>| {
            let mut all = std::collections::BTreeMap::new();
            for b in batches {
                let base = b.header.base_offset;
                for r in batch_records(&b).unwrap() {
                    all.insert(base + i64::from(r.offset_delta), (r.key, r.value));
                }
            }
            all
        };
        let source_records = by_offset(data_batches(src, &source).await);
        let target_records = by_offset(data_batches(dst, &target).await);
        let sp = SourcePartition::new(topic, p);
        for (offset, record) in source_records.iter().filter(|(o, _)| mirrored(p, **o)) {
            match flow.map().translate(&sp, *offset) {
                Translation::Exact { target } => assert_eq!(
                    target_records.get(&target),
                    Some(record),
                    "{topic}-{p}: source offset {offset} translates to {target}"
                ),
                other => panic!("{topic}-{p}: source offset {offset}: {other:?}"),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merged_batches_read_back_identical_in_every_codec() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let rdk = small_batches(4);
    let src = client(&clusters.source.bootstrap).await;
    let dst = client(&clusters.target.bootstrap).await;
    let codecs = ["none", "gzip", "snappy", "lz4", "zstd"];
    let mut expected = Vec::new();
    for codec in codecs {
        let name = names.topic(codec);
        src.create_topic(NewTopic::new(&name, 2).config("retention.ms", "86400000"))
            .await
            .unwrap();
        let recs = records(2, 200, &name);
        rdk.produce(&clusters.source.bootstrap, &name, &recs, codec);
        expected.push((name, recs));
    }

    let mut flow = start(&clusters, &names, "").await;
    flow.run_until_caught_up().await.unwrap();
    let stats = flow.stats();
    assert_eq!(stats.records, 1_000, "{stats:?}");
    assert_eq!(stats.duplicate_records, 0, "{stats:?}");
    assert_eq!(stats.lost_records, 0, "{stats:?}");
    assert!(stats.batches_merged > 0, "nothing merged: {stats:?}");

    for (name, recs) in &expected {
        let remote = remote(&names, name);
        assert_mirrored(&rdk, &clusters.target.bootstrap, &remote, recs);
        let mut source_batches = 0;
        let mut target_batches = 0;
        for p in 0..2 {
            let source = data_batches(&src, &TopicPartition::new(name, p)).await;
            let target = data_batches(&dst, &TopicPartition::new(&remote, p)).await;
            assert!(
                source.iter().all(|b| b.header.record_count <= 4),
                "{name}: the source was written in small batches"
            );
            // The codec is kept.
            assert!(target
                .iter()
                .all(|b| b.header.attributes.codec_id() == source[0].header.attributes.codec_id()));
            source_batches += source.len();
            target_batches += target.len();
        }
        assert!(
            target_batches < source_batches,
            "{name}: {target_batches} target batches for {source_batches} source batches"
        );
        assert_translated_exactly(&flow, (&src, &dst), name, &remote, 2, |_, _| true).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transactional_source_merges_within_its_transactions_only() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let rdk = small_batches(2);
    let src = client(&clusters.source.bootstrap).await;
    let dst = client(&clusters.target.bootstrap).await;
    let name = names.topic("txn");
    src.create_topic(NewTopic::new(&name, 1).config("retention.ms", "86400000"))
        .await
        .unwrap();
    // Transactions of 10 records (five batches each), every third aborted.
    let all = records(1, 120, &name);
    let txns: Vec<(Vec<TestRecord>, bool)> = all
        .chunks(10)
        .enumerate()
        .map(|(i, chunk)| (chunk.to_vec(), i % 3 != 1))
        .collect();
    let offsets = rdk.produce_transactions(&clusters.source.bootstrap, &name, &txns);
    let committed_offsets: std::collections::BTreeSet<i64> = offsets
        .iter()
        .zip(&txns)
        .filter(|(_, (_, commit))| *commit)
        .flat_map(|(offsets, _)| offsets.iter().map(|(_, o)| *o))
        .collect();
    let committed: Vec<TestRecord> = txns
        .iter()
        .filter(|(_, commit)| *commit)
        .flat_map(|(records, _)| records.clone())
        .collect();
    // The markers are written after EndTxn returns: wait for the last stable offset.
    let tp = TopicPartition::new(&name, 0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let stable = src
            .list_offset(&tp, OffsetSpec::Latest, IsolationLevel::ReadCommitted)
            .await
            .unwrap()
            .offset;
        let end = src
            .list_offset(&tp, OffsetSpec::Latest, IsolationLevel::ReadUncommitted)
            .await
            .unwrap()
            .offset;
        if stable == end {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "transactions open");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let mut flow = start(&clusters, &names, "").await;
    flow.run_until_caught_up().await.unwrap();
    let stats = flow.stats();
    assert_eq!(stats.records, committed.len() as u64, "{stats:?}");
    assert!(stats.batches_merged > 0, "nothing merged: {stats:?}");
    assert_eq!(stats.duplicate_records, 0, "{stats:?}");
    let remote = remote(&names, &name);
    assert_mirrored(&rdk, &clusters.target.bootstrap, &remote, &committed);

    // Each target batch holds records of one transaction: consecutive source offsets (so no
    // marker and no aborted data between them), from one committed transaction.
    let target = data_batches(&dst, &TopicPartition::new(&remote, 0)).await;
    let txn_of = |value: &[u8]| {
        let text = String::from_utf8_lossy(value).to_string();
        let i: usize = text.split('-').rev().nth(1).unwrap().parse().unwrap();
        i / 10
    };
    let mut merged = 0;
    for batch in &target {
        let records = batch_records(batch).unwrap();
        let txns: std::collections::BTreeSet<usize> = records
            .iter()
            .filter_map(|r| r.value.as_deref().map(txn_of))
            .collect();
        assert!(
            txns.len() <= 1,
            "a target batch spans transactions {txns:?}"
        );
        merged += usize::from(records.len() > 2);
    }
    assert!(
        merged > 0,
        "no target batch holds more than one source batch"
    );
    let committed = |_, offset| committed_offsets.contains(&offset);
    assert_translated_exactly(&flow, (&src, &dst), &name, &remote, 1, committed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merged_batch_refused_as_too_large_is_split_and_goes_again() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let rdk = small_batches(4);
    let src = client(&clusters.source.bootstrap).await;
    let dst = client(&clusters.target.bootstrap).await;
    let name = names.topic("small");
    // Batches of up to 4 records of about 1 KiB fit 16 KiB; a merge of many does not. The
    // remote topic takes the source's max.message.bytes.
    src.create_topic(
        NewTopic::new(&name, 1)
            .config("retention.ms", "86400000")
            .config("max.message.bytes", "16384"),
    )
    .await
    .unwrap();
    let now = common::now_ms();
    let recs: Vec<TestRecord> = (0..200)
        .map(|i| {
            TestRecord::new(
                0,
                Some(format!("k{i}").as_bytes()),
                Some(format!("{i}-{}", "v".repeat(1000)).as_bytes()),
            )
            .with_timestamp(now - 60_000 + i)
        })
        .collect();
    rdk.produce(&clusters.source.bootstrap, &name, &recs, "none");

    let mut flow = start(&clusters, &names, "").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while flow.stats().records < 200 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not mirrored: {:?}",
            flow.stats()
        );
        flow.round().await.unwrap();
    }
    let stats = flow.stats();
    assert_eq!(stats.records, 200, "{stats:?}");
    assert_eq!(stats.duplicate_records, 0, "{stats:?}");
    assert_eq!(stats.lost_records, 0, "{stats:?}");
    let remote = remote(&names, &name);
    assert_mirrored(&rdk, &clusters.target.bootstrap, &remote, &recs);
    assert_translated_exactly(&flow, (&src, &dst), &name, &remote, 1, |_, _| true).await;
}
