//! A flow whose source holds transactional data: transaction markers take source offsets and are
//! not mirrored, aborted transactions are not mirrored, and the offset map stays exact across
//! both.
//!
//! The transactions are written by librdkafka's transactional producer into Apache Kafka, which
//! writes the commit and abort markers and lists aborted transactions in READ_COMMITTED fetches.

mod common;

use common::client;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use strait_core::flow::Flow;
use strait_kafka::admin::{IsolationLevel, OffsetSpec};
use strait_kafka::fetch::{FetchOptions, FetchPosition};
use strait_kafka::{Client, TopicPartition};
use strait_testkit::{Broker, Clusters, Rdk, TestRecord};
use strait_wire::offset_map::{SourcePartition, Translation};

/// How long mirroring may take before a test gives up.
const MIRROR_TIMEOUT: Duration = Duration::from_secs(30);

/// The `source->target` flow.
async fn start(source: &Broker, clusters: &Clusters) -> Flow {
    common::start_flow(&source.bootstrap, &clusters.target.bootstrap, "").await
}

/// Mirrors with `run_until_caught_up`, then runs more rounds until `expected` records were
/// written, all bounded by [`MIRROR_TIMEOUT`]. The extra rounds are for tansu's ListOffsets
/// (latest), which answers the last batch's base offset + 1 instead of the end for multi-record
/// batches, so `run_until_caught_up` may see an end that is too early.
async fn mirror(flow: &mut Flow, expected: usize) {
    let deadline = tokio::time::Instant::now() + MIRROR_TIMEOUT;
    tokio::time::timeout_at(deadline, flow.run_until_caught_up())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "run_until_caught_up did not return within {MIRROR_TIMEOUT:?}: {:?}",
                flow.stats()
            )
        })
        .expect("flow mirrors");
    let after_catch_up = flow.stats().records;
    let mut extra_rounds = 0;
    while flow.stats().records < expected as u64 {
        extra_rounds += 1;
        assert!(
            tokio::time::Instant::now() < deadline,
            "not all records mirrored within {MIRROR_TIMEOUT:?}: {:?}",
            flow.stats()
        );
        flow.round().await.expect("flow round");
    }
    if extra_rounds > 0 {
        eprintln!(
            "run_until_caught_up returned after {after_catch_up} of {expected} records; \
             {extra_rounds} more round(s) mirrored the rest"
        );
    }
}

/// `n` records tagged `tag`, round-robin over `partitions`, with keys, headers and timestamps.
fn records(partitions: i32, n: usize, tag: &str) -> Vec<TestRecord> {
    (0..n)
        .map(|i| {
            let mut r = TestRecord::new(
                (i as i32) % partitions,
                (i % 3 != 0)
                    .then(|| format!("k{i}").into_bytes())
                    .as_deref(),
                Some(format!("{tag}-{i}").as_bytes()),
            )
            .with_timestamp(1_720_000_000_000 + i as i64);
            if i % 2 == 0 {
                r = r.with_header("tx", Some(tag.as_bytes()));
            }
            r
        })
        .collect()
}

/// The source's high watermark of `tp`, from a Fetch (tansu's ListOffsets(latest) is wrong for
/// multi-record batches).
async fn high_watermark(source: &Client, tp: &TopicPartition) -> i64 {
    let options = FetchOptions {
        max_wait: Duration::from_millis(10),
        isolation: IsolationLevel::ReadUncommitted,
        ..FetchOptions::default()
    };
    source
        .fetch(&[FetchPosition::new(tp.clone(), 0)], &options)
        .await
        .remove(tp)
        .expect("the partition is in the fetch response")
        .expect("fetch succeeds")
        .high_watermark
}

fn by_partition(records: &[TestRecord]) -> BTreeMap<i32, Vec<&TestRecord>> {
    let mut map: BTreeMap<i32, Vec<&TestRecord>> = BTreeMap::new();
    for r in records {
        map.entry(r.partition).or_default().push(r);
    }
    map
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_transactions_mirror_and_the_map_stays_exact_across_markers() {
    let clusters = Clusters::start();
    let source = &clusters.source;
    let rdk = Rdk::new();
    let topic = "ledger";
    rdk.create_topic(&source.bootstrap, topic, 2);

    // Plain batches (several records each) and committed transactions touching both
    // partitions, interleaved: every transaction leaves a commit marker in each partition.
    let mut expected = Vec::new();
    let mut committed_txns = 0;
    for round in 0..3 {
        let plain = records(2, 8, &format!("plain{round}"));
        rdk.produce(&source.bootstrap, topic, &plain, "none");
        expected.extend(plain);
        let txns: Vec<(Vec<TestRecord>, bool)> = (0..2)
            .map(|t| (records(2, 4 + t, &format!("txn{round}.{t}")), true))
            .collect();
        rdk.produce_transactions(&source.bootstrap, topic, &txns);
        committed_txns += txns.len();
        expected.extend(txns.into_iter().flat_map(|(r, _)| r));
    }
    let tail = records(2, 6, "tail");
    rdk.produce(&source.bootstrap, topic, &tail, "lz4");
    expected.extend(tail);

    let mut flow = start(source, &clusters).await;
    mirror(&mut flow, expected.len()).await;
    let stats = flow.stats();
    assert_eq!(stats.records, expected.len() as u64, "{stats:?}");
    assert_eq!(stats.aborted_batches_skipped, 0, "{stats:?}");
    assert_eq!(
        stats.control_batches_skipped,
        2 * committed_txns as u64,
        "one commit marker per transaction and partition: {stats:?}"
    );
    assert_eq!(stats.duplicate_records, 0, "{stats:?}");

    // The target holds exactly the committed and plain records, in order per partition.
    let remote = format!("source.{topic}");
    let on_source = rdk.consume(
        &source.bootstrap,
        topic,
        expected.len(),
        Duration::from_secs(20),
    );
    let on_target = rdk.consume(
        &clusters.target.bootstrap,
        &remote,
        expected.len(),
        Duration::from_secs(20),
    );
    assert_eq!(on_source.len(), expected.len());
    assert_eq!(on_target.len(), expected.len());
    let want = by_partition(&expected);
    let src = by_partition(&on_source);
    let dst = by_partition(&on_target);
    let src_client = client(&source.bootstrap).await;
    let dst_client = client(&clusters.target.bootstrap).await;
    for p in 0..2 {
        let (want, src, dst) = (&want[&p], &src[&p], &dst[&p]);
        assert_eq!(want.len(), dst.len(), "{remote}-{p}: count");
        assert_eq!(want.len(), src.len(), "{topic}-{p}: count");
        for ((w, s), d) in want.iter().zip(src).zip(dst) {
            assert!(w.same_payload(s), "{topic}-{p}: {w:?} vs {s:?}");
            assert!(w.same_payload(d), "{remote}-{p}: {w:?} vs {d:?}");
            assert_eq!(w.timestamp_ms, d.timestamp_ms, "{remote}-{p}: timestamp");
        }
        let target_end = dst_client
            .list_offset(
                &TopicPartition::new(&remote, p),
                OffsetSpec::Latest,
                IsolationLevel::ReadUncommitted,
            )
            .await
            .unwrap()
            .offset;
        assert_eq!(
            target_end,
            want.len() as i64,
            "{remote}-{p}: nothing else on the target"
        );

        // The map: every record's source offset translates to its target offset; a marker's
        // offset, and the end, to the next record's target offset.
        let sp = SourcePartition::new(topic, p);
        let source_end = high_watermark(&src_client, &TopicPartition::new(topic, p)).await;
        let record_offsets: BTreeMap<i64, i64> = src
            .iter()
            .zip(dst)
            .map(|(s, d)| (s.offset.unwrap(), d.offset.unwrap()))
            .collect();
        let markers: Vec<i64> = (0..source_end)
            .filter(|o| !record_offsets.contains_key(o))
            .collect();
        assert_eq!(
            markers.len(),
            committed_txns,
            "{topic}-{p}: one marker offset per transaction; records at {:?}",
            record_offsets.keys().collect::<Vec<_>>()
        );
        for pos in 0..=source_end {
            let want_target = match record_offsets.range(pos..).next() {
                Some((_, &target)) => target,
                None => target_end,
            };
            assert_eq!(
                flow.map().translate(&sp, pos),
                Translation::Exact {
                    target: want_target
                },
                "{topic}-{p} position {pos} ({})",
                if record_offsets.contains_key(&pos) {
                    "a record"
                } else if pos == source_end {
                    "the end"
                } else {
                    "a marker"
                }
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborted_transactions_are_not_mirrored() {
    let clusters = Clusters::start();
    let source = &clusters.source;
    let rdk = Rdk::new();
    let topic = "payments";
    rdk.create_topic(&source.bootstrap, topic, 1);

    let before = records(1, 5, "before");
    rdk.produce(&source.bootstrap, topic, &before, "none");
    let committed = records(1, 4, "committed");
    let aborted = records(1, 3, "aborted");
    let later = records(1, 2, "later");
    let offsets = rdk.produce_transactions(
        &source.bootstrap,
        topic,
        &[
            (committed.clone(), true),
            (aborted.clone(), false),
            (later.clone(), true),
        ],
    );
    let after = records(1, 5, "after");
    rdk.produce(&source.bootstrap, topic, &after, "none");
    // On the target the records are dense from 0: `later` follows `before` and `committed`.
    let target_of_later = (before.len() + committed.len()) as i64;
    let expected: Vec<TestRecord> = [before, committed, later, after].concat();

    let mut flow = start(source, &clusters).await;
    mirror(&mut flow, expected.len()).await;
    let stats = flow.stats();
    assert!(stats.aborted_batches_skipped > 0, "{stats:?}");
    assert_eq!(
        stats.control_batches_skipped, 3,
        "commit, abort, commit: {stats:?}"
    );
    assert_eq!(stats.records, expected.len() as u64, "{stats:?}");

    let remote = format!("source.{topic}");
    let on_target = rdk.consume(
        &clusters.target.bootstrap,
        &remote,
        expected.len(),
        Duration::from_secs(20),
    );
    assert_eq!(on_target.len(), expected.len());
    for (w, h) in expected.iter().zip(&on_target) {
        assert!(w.same_payload(h), "{remote}: {w:?} vs {h:?}");
    }
    let aborted_values: BTreeSet<_> = aborted.iter().map(|r| r.value.clone()).collect();
    assert!(on_target.iter().all(|r| !aborted_values.contains(&r.value)));
    let dst_client = client(&clusters.target.bootstrap).await;
    let target_end = dst_client
        .list_offset(
            &TopicPartition::new(&remote, 0),
            OffsetSpec::Latest,
            IsolationLevel::ReadUncommitted,
        )
        .await
        .unwrap()
        .offset;
    assert_eq!(
        target_end,
        expected.len() as i64,
        "no aborted record on the target"
    );

    // The aborted range and its marker translate to the first record after them.
    let sp = SourcePartition::new(topic, 0);
    let first_aborted = offsets[1][0].1;
    let first_later = offsets[2][0].1;
    for pos in first_aborted..=first_later {
        assert_eq!(
            flow.map().translate(&sp, pos),
            Translation::Exact {
                target: target_of_later
            },
            "position {pos}"
        );
    }
}
