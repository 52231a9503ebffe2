//! MM2's offset-syncs topic as strait writes it (`docs/mm2-behaviour.md` §1.2).
//!
//! - Without a broker: the per-batch emission arithmetic of `OffsetSyncQueue` against a
//!   record-by-record reference (MM2's `PartitionState.update` transcribed from Java, checked
//!   against `mm2_model::SyncEmitter` record by record) with MM2's `pendingOffsetSyncs` /
//!   `delayedOffsetSyncs` maps, on random feeds with gaps, rewinds, truncations and flushes.
//! - Against a real broker: the topic is made as MM2 makes it, and reading it back raw gives
//!   exactly the syncs MM2 would have written, byte for byte, one batch per flush: a hand-computed
//!   feed on the source cluster, and a random feed (location=target) against the reference.

mod common;

use bytes::Bytes;
use common::client;
use indexmap::IndexMap;
use proptest::prelude::*;
use strait_core::internal::offset_syncs::{OffsetSyncQueue, OffsetSyncWriter};
use strait_kafka::Client;
use strait_testkit::{Clusters, Names};
use strait_wire::mm2::OffsetSync;
use strait_wire::offset_map::mm2_model::SyncEmitter;

// ---------------------------------------------------------------------------------------------
// The reference: MM2's OffsetSyncWriter, one record at a time.

/// `OffsetSyncWriter.PartitionState`, transcribed from Java.
#[derive(Debug, Clone)]
struct JavaPartitionState {
    previous_upstream_offset: i64,
    previous_downstream_offset: i64,
    last_sync_downstream_offset: i64,
    max_offset_lag: i64,
}

impl JavaPartitionState {
    fn new(max_offset_lag: i64) -> Self {
        Self {
            previous_upstream_offset: -1,
            previous_downstream_offset: -1,
            last_sync_downstream_offset: -1,
            max_offset_lag,
        }
    }

    fn update(&mut self, upstream_offset: i64, downstream_offset: i64) -> bool {
        let no_previous_sync_this_lifetime = self.last_sync_downstream_offset == -1;
        let translated_offset_too_stale = downstream_offset
            .wrapping_sub(self.last_sync_downstream_offset.wrapping_add(1))
            >= self.max_offset_lag;
        let skipped_upstream_record =
            upstream_offset.wrapping_sub(self.previous_upstream_offset) != 1;
        let truncated_downstream_topic = downstream_offset < self.previous_downstream_offset;
        let should_sync = no_previous_sync_this_lifetime
            || translated_offset_too_stale
            || skipped_upstream_record
            || truncated_downstream_topic;
        if should_sync {
            self.last_sync_downstream_offset = downstream_offset;
        }
        self.previous_upstream_offset = upstream_offset;
        self.previous_downstream_offset = downstream_offset;
        should_sync
    }
}

/// `OffsetSyncWriter`: `maybeQueueOffsetSyncs` per record, `promoteDelayedOffsetSyncs` and a
/// drain of `pendingOffsetSyncs` per flush.
#[derive(Debug)]
struct Reference {
    lag: i64,
    states: IndexMap<(String, i32), (JavaPartitionState, SyncEmitter)>,
    pending: IndexMap<(String, i32), OffsetSync>,
    delayed: IndexMap<(String, i32), OffsetSync>,
    immediate: u64,
}

impl Reference {
    fn new(offset_lag_max: u64) -> Self {
        Self {
            lag: i64::try_from(offset_lag_max).unwrap_or(i64::MAX),
            states: IndexMap::new(),
            pending: IndexMap::new(),
            delayed: IndexMap::new(),
            immediate: 0,
        }
    }

    fn record(&mut self, topic: &str, partition: i32, upstream: i64, downstream: i64) {
        let key = (topic.to_owned(), partition);
        let lag = self.lag;
        let (java, emitter) = self
            .states
            .entry(key.clone())
            .or_insert_with(|| (JavaPartitionState::new(lag), SyncEmitter::new(lag)));
        let now = java.update(upstream, downstream);
        assert_eq!(
            now,
            emitter.update(upstream, downstream),
            "SyncEmitter disagrees with PartitionState at {key:?} {upstream}->{downstream}"
        );
        let sync = OffsetSync {
            topic: topic.to_owned(),
            partition,
            upstream_offset: upstream,
            downstream_offset: downstream,
        };
        if now {
            self.immediate += 1;
            self.delayed.shift_remove(&key);
            self.pending.insert(key, sync);
        } else {
            self.delayed.insert(key, sync);
        }
    }

    fn on_batch(&mut self, topic: &str, partition: i32, runs: &[(i64, i64, i64)]) {
        for &(upstream, downstream, count) in runs {
            for i in 0..count.max(0) {
                self.record(topic, partition, upstream + i, downstream + i);
            }
        }
    }

    fn pending(&self, include_delayed: bool) -> Vec<OffsetSync> {
        let mut all = self.pending.clone();
        if include_delayed {
            for (k, v) in &self.delayed {
                all.insert(k.clone(), v.clone());
            }
        }
        all.into_values().collect()
    }

    fn take(&mut self, include_delayed: bool) -> Vec<OffsetSync> {
        let out = self.pending(include_delayed);
        self.pending.clear();
        if include_delayed {
            self.delayed.clear();
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Feeds: raw choices turned into plausible (and some implausible) batches.

#[derive(Debug, Clone)]
enum Op {
    Batch {
        topic: &'static str,
        partition: i32,
        runs: Vec<(i64, i64, i64)>,
    },
    Flush(bool),
}

/// One op's raw choices: kind, source partition, and per run (upstream move, downstream move,
/// record count).
type RawOp = (u8, u8, Vec<(u8, u8, u16)>);

const TOPICS: [&str; 2] = ["orders", "clicks"];

/// Turns raw choices into ops, following each partition's next upstream and downstream offset.
/// Upstream: mostly consecutive, sometimes a gap (compaction, markers) or a rewind (records sent
/// again after a failed produce). Downstream: mostly consecutive, sometimes past records someone
/// else wrote, sometimes back (a truncated target).
fn build_feed(raw: &[RawOp], max_count: u16) -> Vec<Op> {
    let mut cursors: IndexMap<(usize, i32), (i64, i64)> = IndexMap::new();
    let mut ops = Vec::new();
    for (kind, which, raw_runs) in raw {
        match kind % 6 {
            0 => ops.push(Op::Flush(false)),
            1 => ops.push(Op::Flush(true)),
            _ => {
                let topic = usize::from(which % 2);
                let partition = i32::from((which / 2) % 3);
                let cursor = cursors
                    .entry((topic, partition))
                    .or_insert((1000 * i64::from(*which % 3), 0));
                let mut runs = Vec::new();
                for &(up, down, count) in raw_runs {
                    let (next_up, next_down) = *cursor;
                    let upstream = match up % 8 {
                        5 => next_up + 1,
                        6 => next_up + 37,
                        7 => (next_up - 10).max(0),
                        _ => next_up,
                    };
                    let downstream = match down % 8 {
                        6 => next_down + 3,
                        7 => (next_down - 20).max(0),
                        _ => next_down,
                    };
                    let count = i64::from(count % max_count);
                    runs.push((upstream, downstream, count));
                    if count > 0 {
                        *cursor = (upstream + count, downstream + count);
                    }
                }
                ops.push(Op::Batch {
                    topic: TOPICS[topic],
                    partition,
                    runs,
                });
            }
        }
    }
    ops
}

fn lag_strategy() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(2),
        Just(7),
        Just(100),
        Just(u64::MAX),
        0u64..400,
    ]
}

fn raw_ops() -> impl Strategy<Value = Vec<RawOp>> {
    prop::collection::vec(
        (
            any::<u8>(),
            any::<u8>(),
            prop::collection::vec((any::<u8>(), any::<u8>(), any::<u16>()), 0..5),
        ),
        0..40,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The per-run arithmetic ends where MM2's per-record rule does, after every batch: same
    /// syncs queued at once and held back, same count fired, same output at every flush.
    #[test]
    fn per_batch_arithmetic_matches_mm2_record_by_record(
        lag in lag_strategy(),
        raw in raw_ops(),
        max_count in prop_oneof![Just(5u16), Just(300u16), Just(3000u16)],
    ) {
        let mut queue = OffsetSyncQueue::new(lag);
        let mut reference = Reference::new(lag);
        for op in build_feed(&raw, max_count) {
            match op {
                Op::Batch { topic, partition, runs } => {
                    queue.on_batch(topic, partition, &runs);
                    reference.on_batch(topic, partition, &runs);
                    prop_assert_eq!(queue.immediate_syncs(), reference.immediate);
                    prop_assert_eq!(queue.pending(false), reference.pending(false));
                    prop_assert_eq!(queue.pending(true), reference.pending(true));
                    prop_assert_eq!(queue.pending_len(), reference.pending.len());
                    prop_assert_eq!(queue.delayed_len(), reference.delayed.len());
                }
                Op::Flush(include_delayed) => {
                    prop_assert_eq!(queue.take(include_delayed), reference.take(include_delayed));
                }
            }
        }
    }
}

/// Long dense runs from scratch, the case the arithmetic is for: one run of n records fires
/// exactly as n single-record batches do.
#[test]
fn one_long_run_equals_record_by_record() {
    for lag in [0u64, 1, 3, 100, 1000] {
        for n in [1i64, 2, 100, 101, 102, 203, 10_000] {
            let mut whole = OffsetSyncQueue::new(lag);
            let mut single = OffsetSyncQueue::new(lag);
            let mut reference = Reference::new(lag);
            whole.on_batch("t", 0, &[(500, 40, n)]);
            for i in 0..n {
                single.on_batch("t", 0, &[(500 + i, 40 + i, 1)]);
            }
            reference.on_batch("t", 0, &[(500, 40, n)]);
            assert_eq!(
                whole.immediate_syncs(),
                reference.immediate,
                "lag {lag} n {n}"
            );
            assert_eq!(
                single.immediate_syncs(),
                reference.immediate,
                "lag {lag} n {n}"
            );
            assert_eq!(whole.pending(true), reference.pending(true));
            assert_eq!(single.pending(true), reference.pending(true));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Against the broker.

/// Every record of partition 0 of `topic`, raw key and value, grouped by batch.
async fn read_batches(client: &Client, topic: &str) -> Vec<Vec<(Bytes, Bytes)>> {
    common::read_batches(client, topic)
        .await
        .into_iter()
        .map(|batch| batch.into_iter().map(|r| (r.key, r.value)).collect())
        .collect()
}

fn decode(batches: &[Vec<(Bytes, Bytes)>]) -> Vec<Vec<OffsetSync>> {
    batches
        .iter()
        .map(|b| {
            b.iter()
                .map(|(k, v)| OffsetSync::decode(k, v).expect("an MM2 offset sync"))
                .collect()
        })
        .collect()
}

fn sync(topic: &str, partition: i32, upstream: i64, downstream: i64) -> OffsetSync {
    OffsetSync {
        topic: topic.into(),
        partition,
        upstream_offset: upstream,
        downstream_offset: downstream,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_the_syncs_mm2_would_write() {
    let clusters = Clusters::shared();
    // The syncs topics are named by cluster alias: this test's own. (The topics the syncs
    // speak of, `orders` and `clicks`, are only names in their records.)
    let names = Names::new();
    let (source_alias, target_alias) = (names.alias("source"), names.alias("target"));
    let source = client(&clusters.source.bootstrap).await;
    let target = client(&clusters.target.bootstrap).await;

    // --- offset-syncs.topic.location=source (the default): on the source, named for the target.
    let on_source = format!("mm2-offset-syncs.{target_alias}.internal");
    let topic = on_source.clone();
    let mut w = OffsetSyncWriter::open(source.clone(), topic.clone(), 1, 100, None)
        .await
        .expect("open");
    common::assert_compacted_single_partition(&source, &topic).await;
    // Opening again finds the topic.
    OffsetSyncWriter::open(source.clone(), topic.clone(), 1, 100, None)
        .await
        .expect("open again");

    let mut expected: Vec<Vec<OffsetSync>> = Vec::new();
    // orders-0, records 0..50 at 0..50: the first of the lifetime goes at once, 49 is held.
    w.on_batch("orders", 0, &[(0, 0, 50)]);
    assert_eq!(w.flush(false).await.unwrap(), 1);
    expected.push(vec![sync("orders", 0, 0, 0)]);

    // 50..150 at 50..150: the lag rule fires at 101 (101 - (0 + 1) >= 100); 149 held.
    w.on_batch("orders", 0, &[(50, 50, 100)]);
    // A rebuilt batch with two runs after compaction holes: 150..160 and 165..170 are gone
    // upstream, so 160 and 170 are gaps and fire; 170 supersedes 101 and 160 in the queue.
    w.on_batch("orders", 0, &[(160, 150, 5), (170, 155, 5)]);
    // orders-1's first record.
    w.on_batch("orders", 1, &[(0, 0, 10)]);
    assert_eq!(w.queue().immediate_syncs(), 5);
    assert_eq!(w.flush(false).await.unwrap(), 2);
    expected.push(vec![sync("orders", 0, 170, 155), sync("orders", 1, 0, 0)]);
    assert_eq!(w.flush(false).await.unwrap(), 0, "nothing new at once");

    // The periodic commit (KAFKA-15906): the held-back syncs, so groups at the end translate.
    assert_eq!(w.flush(true).await.unwrap(), 2);
    expected.push(vec![sync("orders", 0, 174, 159), sync("orders", 1, 9, 9)]);
    assert_eq!(w.flush(true).await.unwrap(), 0, "nothing held back");

    // 1000 records at 160..1160: last sync at 155, so the lag rule fires at 256 (i = 96) and
    // every 101 after: 96, 197, ..., 904 (nine syncs); the latest, 1079 -> 1064, is written.
    w.on_batch("orders", 0, &[(175, 160, 1000)]);
    assert_eq!(w.queue().immediate_syncs(), 14);
    assert_eq!(w.flush(false).await.unwrap(), 1);
    expected.push(vec![sync("orders", 0, 1079, 1064)]);
    assert_eq!(w.flush(true).await.unwrap(), 1);
    expected.push(vec![sync("orders", 0, 1174, 1159)]);

    // The target partition was truncated: 10 lands at 5, below the previous 9.
    w.on_batch("orders", 1, &[(10, 5, 3)]);
    assert_eq!(w.queue().immediate_syncs(), 15);
    assert_eq!(w.flush(false).await.unwrap(), 1);
    expected.push(vec![sync("orders", 1, 10, 5)]);
    assert_eq!(
        (w.queue().pending_len(), w.queue().delayed_len()),
        (0, 1),
        "12 -> 7 waits for the next commit"
    );
    assert_eq!(w.written(), 8);

    let batches = read_batches(&source, &topic).await;
    // Byte for byte: the first sync, orders-0 0 -> 0.
    assert_eq!(&batches[0][0].0[..], b"\x00\x06orders\x00\x00\x00\x00");
    assert_eq!(&batches[0][0].1[..], &[0u8; 16][..]);
    assert_eq!(
        decode(&batches),
        expected,
        "one batch per flush, as computed by hand"
    );

    // --- location=target, a random feed: exactly what MM2's writer would have sent.
    let topic = format!("mm2-offset-syncs.{source_alias}.internal");
    let mut w = OffsetSyncWriter::open(target.clone(), topic.clone(), 1, 100, None)
        .await
        .expect("open on the target");
    common::assert_compacted_single_partition(&target, &topic).await;
    let mut reference = Reference::new(100);
    let mut rng = SplitMix(0x5eed_0ff5_e75a_u64);
    let raw: Vec<RawOp> = (0..300)
        .map(|_| {
            let runs = (0..rng.below(4))
                .map(|_| (rng.byte(), rng.byte(), rng.next() as u16))
                .collect();
            (rng.byte(), rng.byte(), runs)
        })
        .collect();
    let mut expected = Vec::new();
    for op in build_feed(&raw, 400)
        .into_iter()
        .chain([Op::Flush(false), Op::Flush(true)])
    {
        match op {
            Op::Batch {
                topic,
                partition,
                runs,
            } => {
                w.on_batch(topic, partition, &runs);
                reference.on_batch(topic, partition, &runs);
            }
            Op::Flush(include_delayed) => {
                let want = reference.take(include_delayed);
                let n = w.flush(include_delayed).await.expect("flush");
                assert_eq!(n, want.len());
                if !want.is_empty() {
                    expected.push(want);
                }
            }
        }
    }
    assert_eq!(w.queue().immediate_syncs(), reference.immediate);
    assert!(reference.immediate > 50, "the feed exercises the rule");
    assert!(expected.len() > 20, "the feed flushes often");
    let got = decode(&read_batches(&target, &topic).await);
    assert_eq!(got, expected);
    // Nothing landed on the source's syncs topic from the second writer.
    assert_eq!(decode(&read_batches(&source, &on_source).await).len(), 6);

    // --- Writes in the background (what a round does): `start_flush` returns without waiting,
    // one write at a time; a later `flush` waits for it and writes the rest. Every sync lands
    // once, in the order each partition's syncs fired.
    let topic = format!("mm2-offset-syncs.{}.internal", names.alias("background"));
    let mut w = OffsetSyncWriter::open(source.clone(), topic.clone(), 1, 100, None)
        .await
        .expect("open");
    w.on_batch("orders", 0, &[(0, 0, 1)]);
    assert!(w.start_flush(false).await.unwrap(), "nothing was in flight");
    w.on_batch("orders", 1, &[(0, 0, 1)]);
    w.on_batch("orders", 0, &[(5, 1, 1)]);
    // In flight or done by now: either way nothing is lost.
    let started = w.start_flush(false).await.unwrap();
    w.on_batch("orders", 2, &[(0, 0, 1)]);
    // Left to write: orders-2, and orders-1 and orders-0's second if the first write was
    // still in flight at the second call.
    let left = if started { 1 } else { 3 };
    assert_eq!(
        w.flush(true).await.unwrap(),
        left,
        "started again: {started}"
    );
    assert_eq!(w.written(), 4);
    assert_eq!((w.queue().pending_len(), w.queue().delayed_len()), (0, 0));
    let mut got: Vec<OffsetSync> = decode(&read_batches(&source, &topic).await)
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(got.len(), 4, "{got:?}");
    // orders-0's two syncs in the order they fired, then the others.
    assert_eq!(&got[..1], &[sync("orders", 0, 0, 0)]);
    got.sort_by_key(|s| (s.partition, s.upstream_offset));
    assert_eq!(
        got,
        vec![
            sync("orders", 0, 0, 0),
            sync("orders", 0, 5, 1),
            sync("orders", 1, 0, 0),
            sync("orders", 2, 0, 0),
        ]
    );
}

/// A small deterministic generator for the broker feed (no seed to chase in a failure).
#[derive(Debug)]
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn byte(&mut self) -> u8 {
        self.next() as u8
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
