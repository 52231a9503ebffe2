//! MM2's offset-syncs topic, written as MirrorMaker 2 writes it (`docs/mm2-behaviour.md` §1.2), so
//! that MM2's own tooling (`MirrorCheckpointTask`'s `OffsetSyncStore`,
//! `RemoteClusterUtils.translateOffsets`, the `OffsetSyncFormatter`) works on a cluster strait
//! mirrors into.
//!
//! # The topic
//!
//! `mm2-offset-syncs.<other alias>.internal` (the separator follows the replication policy,
//! KIP-690), on the **source** cluster by default, or on the target with
//! `offset-syncs.topic.location=target` (KIP-716, Kafka 3.0): see
//! [`FlowConfig::offset_syncs_topic`](crate::config::FlowConfig::offset_syncs_topic). One
//! partition, `cleanup.policy=compact`, replication factor
//! `offset-syncs.topic.replication.factor`; every record goes to partition 0. Key
//! `topic:STRING partition:INT32` (the **upstream** topic), value
//! `upstreamOffset:INT64 offset:INT64`, no version header ([`OffsetSync`]).
//!
//! # When a sync is written (`OffsetSyncWriter.PartitionState.update`)
//!
//! MM2 calls `update(upstream, downstream)` for every record once the target acknowledged it
//! (`MirrorSourceTask.commitRecord`). The record's sync is queued for sending **at once** when:
//!
//! - it is the partition's first record of the task's lifetime;
//! - `downstream - (lastSyncDownstream + 1) >= offset.lag.max`: MM2 translates a group one past
//!   the last sync (the "+1 rule"), so this bounds how stale a translation near the live end gets
//!   (KAFKA-14797);
//! - the upstream offsets skip (`upstream - previousUpstream != 1`: compaction holes,
//!   transaction markers, aborted batches, SMT filtering), since MM2 cannot extrapolate across a
//!   gap;
//! - the downstream offset went backwards (`downstream < previousDownstream`: the target
//!   partition was truncated or re-created).
//!
//! Otherwise the sync is held back as *delayed* and sent at the next `SourceTask.commit()`, every
//! `offset.flush.interval.ms` (60 s by default, [`DELAYED_SYNC_INTERVAL`]). That is KAFKA-15906
//! (Kafka 3.7): before it, a partition that stopped receiving records kept its last sync up to
//! `offset.lag.max` records behind its end, and groups at the end never translated to it.
//!
//! A sync sent at once discards the partition's delayed one. Both queues keep only the latest
//! sync per partition (MM2's `pendingOffsetSyncs` and `delayedOffsetSyncs` maps): MM2 sends at
//! most 10 syncs at a time and a newer sync replaces a queued one of its partition, and strait
//! starts a write of its queue after each round (in the background, one write at a time, so
//! the data never waits for the offset-syncs topic's cluster), so of the syncs that fired for a
//! partition since the last write only the latest is written. Translation is unaffected in correctness (MM2's store only
//! ever translates conservatively); it is as precise as MM2 under load.
//!
//! # Computing it per batch
//!
//! strait learns offsets per written batch, as runs of consecutive records (`upstream`,
//! `downstream`, `count`). Within a run both offsets advance by exactly one, so only its first
//! record can be a gap or a truncation (or the first of the lifetime), and for the others only
//! the lag rule can fire: at run index `i` when `downstream + i >= lastSyncDownstream + 1 +
//! offset.lag.max`, then every `offset.lag.max + 1` records after that. [`OffsetSyncQueue`]
//! computes where it fires arithmetically, in constant time per run, and ends in exactly the
//! state MM2's record-by-record rule reaches (`strait_wire::offset_map::mm2_model::SyncEmitter`
//! is the reference the tests compare against).

use std::collections::HashMap;
use std::time::Duration;

use foldhash::fast::RandomState as Fast;
use indexmap::IndexMap;
use strait_kafka::produce::ProducerConfig;
use strait_kafka::Client;
use strait_wire::mm2::OffsetSync;

use super::error::InternalError;
use super::writer::{BackgroundWriter, Finished};

/// How often MM2 sends the delayed syncs: Connect's `offset.flush.interval.ms` default, at which
/// `SourceTask.commit()` promotes them (KAFKA-15906). Call
/// [`OffsetSyncWriter::flush`]`(true)` this often.
pub const DELAYED_SYNC_INTERVAL: Duration = Duration::from_secs(60);

/// A source partition, as the queues key it.
type Key = (String, i32);

/// `OffsetSyncWriter.PartitionState` for one source partition. `-1` means "none yet", as in
/// MM2.
#[derive(Debug, Clone, Copy)]
struct PartitionState {
    previous_upstream: i64,
    previous_downstream: i64,
    last_sync_downstream: i64,
}

impl PartitionState {
    const NEW: Self = Self {
        previous_upstream: -1,
        previous_downstream: -1,
        last_sync_downstream: -1,
    };
}

/// Which records of one run had their sync queued at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RunSyncs {
    /// How many records of the run fired at once.
    immediate: u64,
    /// The index in the run of the last one that did.
    last: Option<i64>,
}

/// MM2's rule for a run of `count` records, `upstream + i` written at `downstream + i`, applied
/// to `state` as `count` calls of `PartitionState.update` would.
///
/// Offsets are those of real records (`0 <= offset`, far from `i64::MAX`); the first record's
/// tests use Java's wrapping `long` arithmetic, the lag rule inside the run exact arithmetic,
/// which agree there.
fn apply_run(
    state: &mut PartitionState,
    offset_lag_max: i64,
    upstream: i64,
    downstream: i64,
    count: i64,
) -> RunSyncs {
    let mut out = RunSyncs {
        immediate: 0,
        last: None,
    };
    if count <= 0 {
        return out;
    }
    // The run's first record: every condition can hold.
    let first_this_lifetime = state.last_sync_downstream == -1;
    let translation_too_stale =
        downstream.wrapping_sub(state.last_sync_downstream.wrapping_add(1)) >= offset_lag_max;
    let upstream_gap = upstream.wrapping_sub(state.previous_upstream) != 1;
    let downstream_truncated = downstream < state.previous_downstream;
    if first_this_lifetime || translation_too_stale || upstream_gap || downstream_truncated {
        state.last_sync_downstream = downstream;
        out.immediate = 1;
        out.last = Some(0);
    }
    // Records 1..count: upstream and downstream each advance by one, so only the lag rule can
    // fire, at i >= lastSyncDownstream + 1 + lag - downstream, then every lag + 1 records.
    let lag = i128::from(offset_lag_max);
    let threshold = i128::from(state.last_sync_downstream) + 1 + lag - i128::from(downstream);
    let first_fire = threshold.max(1);
    let end = i128::from(count) - 1;
    if first_fire <= end {
        let step = (lag + 1).max(1);
        let more = (end - first_fire) / step;
        let last = first_fire + more * step;
        // Both are in 1..count, so they fit.
        out.immediate += (more + 1) as u64;
        let last = last as i64;
        out.last = Some(last);
        state.last_sync_downstream = downstream.wrapping_add(last);
    }
    state.previous_upstream = upstream.wrapping_add(count - 1);
    state.previous_downstream = downstream.wrapping_add(count - 1);
    out
}

/// The offset syncs of one flow waiting to be written: MM2's `PartitionState` per source
/// partition and its two queues, `pendingOffsetSyncs` (sent at once) and `delayedOffsetSyncs`
/// (sent at the next commit, KAFKA-15906). No I/O; [`OffsetSyncWriter`] writes what it holds.
#[derive(Debug, Clone)]
pub struct OffsetSyncQueue {
    offset_lag_max: i64,
    states: HashMap<String, HashMap<i32, PartitionState, Fast>, Fast>,
    /// Latest sync to send at once per partition, in MM2's `LinkedHashMap` order.
    pending: IndexMap<Key, (i64, i64), Fast>,
    /// Latest held-back sync per partition.
    delayed: IndexMap<Key, (i64, i64), Fast>,
    immediate: u64,
}

impl OffsetSyncQueue {
    /// A queue at the start of a task's lifetime, with `offset.lag.max` = `offset_lag_max`
    /// (values past `i64::MAX` act as `i64::MAX`, as a Java `long` would hold them).
    pub fn new(offset_lag_max: u64) -> Self {
        Self {
            offset_lag_max: i64::try_from(offset_lag_max).unwrap_or(i64::MAX),
            states: HashMap::default(),
            pending: IndexMap::default(),
            delayed: IndexMap::default(),
            immediate: 0,
        }
    }

    /// Notes one written batch of source partition `source_topic`/`partition` as runs of
    /// `(upstream offset, downstream offset, record count)`: record `upstream + i` was written at
    /// `downstream + i` for `0 <= i < count`. Runs come in the order their records were written;
    /// empty runs are ignored. Equivalent to MM2's `maybeQueueOffsetSyncs` for each record.
    pub fn on_batch(&mut self, source_topic: &str, partition: i32, runs: &[(i64, i64, i64)]) {
        if runs.iter().all(|&(_, _, count)| count <= 0) {
            return;
        }
        if !self.states.contains_key(source_topic) {
            self.states
                .insert(source_topic.to_owned(), HashMap::default());
        }
        let Some(partitions) = self.states.get_mut(source_topic) else {
            return;
        };
        let state = partitions.entry(partition).or_insert(PartitionState::NEW);
        let key: Key = (source_topic.to_owned(), partition);
        for &(upstream, downstream, count) in runs {
            if count <= 0 {
                continue;
            }
            let syncs = apply_run(state, self.offset_lag_max, upstream, downstream, count);
            self.immediate += syncs.immediate;
            if let Some(i) = syncs.last {
                // `delayedOffsetSyncs.remove(tp); pendingOffsetSyncs.put(tp, sync)`.
                self.delayed.shift_remove(&key);
                self.pending.insert(
                    key.clone(),
                    (upstream.wrapping_add(i), downstream.wrapping_add(i)),
                );
            }
            let last = count - 1;
            if syncs.last != Some(last) {
                // The records after the last immediate one: `delayedOffsetSyncs.put(tp, sync)`,
                // the latest wins.
                self.delayed.insert(
                    key.clone(),
                    (upstream.wrapping_add(last), downstream.wrapping_add(last)),
                );
            }
        }
    }

    /// Forgets source topic `topic`: its partitions' states and the syncs queued for them. For
    /// a topic deleted on the source whose remote topic went with it; a topic made again under
    /// the name starts from MM2's state of a new partition.
    pub fn forget_topic(&mut self, topic: &str) {
        self.states.remove(topic);
        self.pending.retain(|(t, _), _| t != topic);
        self.delayed.retain(|(t, _), _| t != topic);
    }

    /// What a flush would write now, in order: the syncs queued to send at once and, with
    /// `include_delayed`, the held-back ones too (MM2's `promoteDelayedOffsetSyncs`, which
    /// replaces a partition's pending sync with its newer delayed one). At most one per
    /// partition.
    pub fn pending(&self, include_delayed: bool) -> Vec<OffsetSync> {
        let mut all = self.pending.clone();
        if include_delayed {
            for (key, sync) in &self.delayed {
                all.insert(key.clone(), *sync);
            }
        }
        all.into_iter()
            .map(|((topic, partition), (upstream, downstream))| OffsetSync {
                topic,
                partition,
                upstream_offset: upstream,
                downstream_offset: downstream,
            })
            .collect()
    }

    /// Puts back syncs whose write failed, so that a later flush writes them: each goes back to
    /// the syncs to send at once unless its partition has a newer one queued there (taken
    /// after them, it supersedes them).
    pub fn restore(&mut self, syncs: Vec<OffsetSync>) {
        for sync in syncs {
            self.pending
                .entry((sync.topic, sync.partition))
                .or_insert((sync.upstream_offset, sync.downstream_offset));
        }
    }

    /// [`pending`](Self::pending), and forgets what it returns (the caller wrote it).
    pub fn take(&mut self, include_delayed: bool) -> Vec<OffsetSync> {
        let out = self.pending(include_delayed);
        self.pending.clear();
        if include_delayed {
            self.delayed.clear();
        }
        out
    }

    /// Partitions with a sync queued to send at once.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Partitions with a held-back sync.
    pub fn delayed_len(&self) -> usize {
        self.delayed.len()
    }

    /// How many records so far fired a sync at once under MM2's rule, before only the latest per
    /// partition was kept: how many syncs MM2 would send if none were ever superseded in its
    /// queue.
    pub fn immediate_syncs(&self) -> u64 {
        self.immediate
    }

    /// `offset.lag.max` in effect.
    pub fn offset_lag_max(&self) -> i64 {
        self.offset_lag_max
    }
}

/// Writes one flow's offset syncs to MM2's offset-syncs topic (module docs).
#[derive(Debug)]
pub struct OffsetSyncWriter {
    writer: BackgroundWriter<Vec<OffsetSync>>,
    queue: OffsetSyncQueue,
    written: u64,
}

impl OffsetSyncWriter {
    /// Opens the writer of `topic` on `client`'s cluster (the source by default, the target with
    /// `offset-syncs.topic.location=target`): creates the topic if missing (one partition,
    /// `cleanup.policy=compact`, `replication_factor`, as MM2's
    /// `createSinglePartitionCompactedTopic`) and an idempotent producer of its own on that
    /// cluster; with `transactional_id` (a unit of a flow run by workers) a transactional one,
    /// whose initialisation here fences the unit's earlier owner, each write one transaction.
    pub async fn open(
        client: Client,
        topic: String,
        replication_factor: i16,
        offset_lag_max: u64,
        transactional_id: Option<String>,
    ) -> Result<Self, InternalError> {
        super::ensure_compacted_topic(&client, &topic, replication_factor).await?;
        let config = ProducerConfig {
            transactional_id,
            ..ProducerConfig::default()
        };
        let mut writer = BackgroundWriter::new(client, topic, config);
        writer.connect().await?;
        Ok(Self {
            writer,
            queue: OffsetSyncQueue::new(offset_lag_max),
            written: 0,
        })
    }

    /// The offset-syncs topic.
    pub fn topic(&self) -> &str {
        self.writer.topic()
    }

    /// The transactional id its writes are fenced by, if any.
    pub fn transactional_id(&self) -> Option<&str> {
        self.writer.transactional_id()
    }

    /// The syncs waiting to be written.
    pub fn queue(&self) -> &OffsetSyncQueue {
        &self.queue
    }

    /// Sync records written so far (writes still in flight not counted).
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Notes one batch written to the target, as runs of `(upstream offset, downstream offset,
    /// record count)`; see [`OffsetSyncQueue::on_batch`]. Call it for every acknowledged batch,
    /// in the order of each partition's writes.
    pub fn on_batch(&mut self, source_topic: &str, partition: i32, runs: &[(i64, i64, i64)]) {
        self.queue.on_batch(source_topic, partition, runs);
    }

    /// Forgets source topic `topic` ([`OffsetSyncQueue::forget_topic`]).
    pub fn forget_topic(&mut self, topic: &str) {
        self.queue.forget_topic(topic);
    }

    /// Writes the syncs queued to send at once and, with `include_delayed`, the held-back ones
    /// (MM2 does that at every commit, every `offset.flush.interval.ms`: KAFKA-15906), to
    /// partition 0 (in several batches when there are many), and waits for them, after the
    /// write [`start_flush`](Self::start_flush) left in flight, if any. Returns the number of
    /// records this call wrote. On failure nothing is forgotten: the next flush writes the same
    /// syncs or newer ones.
    pub async fn flush(&mut self, include_delayed: bool) -> Result<usize, InternalError> {
        let earlier = self.writer.wait().await?;
        self.settle(earlier)?;
        if !self.begin(include_delayed)? {
            return Ok(0);
        }
        let done = self.writer.wait().await?;
        let n = done.as_ref().map_or(0, |d| d.payload.len());
        self.settle(done).map(|()| n)
    }

    /// Starts writing what [`flush`](Self::flush) would write, and returns without waiting:
    /// the offset-syncs topic lives on the source cluster by default, across the distance the
    /// mirror spans, and the data must not wait a round trip for it (MM2 sends its syncs
    /// without waiting too). One write at a time: while the last one is in flight this starts
    /// nothing and returns `false`, and the syncs wait for the next call (a newer sync of a
    /// partition replaces its queued one meanwhile). A write that failed is reported by the
    /// next call, its syncs queued again.
    pub async fn start_flush(&mut self, include_delayed: bool) -> Result<bool, InternalError> {
        if self.writer.busy() {
            return Ok(false);
        }
        let finished = self.writer.finished().await?;
        self.settle(finished)?;
        self.begin(include_delayed)?;
        Ok(true)
    }

    /// Takes what is due from the queue and starts its write; `false` if nothing is due.
    fn begin(&mut self, include_delayed: bool) -> Result<bool, InternalError> {
        let syncs = self.queue.pending(include_delayed);
        if syncs.is_empty() {
            return Ok(false);
        }
        let batches = encode(&syncs)?;
        self.queue.take(include_delayed);
        self.writer.start(syncs, vec![batches]);
        Ok(true)
    }

    /// Takes the end of a write: its count, or its syncs queued again and the error.
    fn settle(&mut self, done: Option<Finished<Vec<OffsetSync>>>) -> Result<(), InternalError> {
        let Some(done) = done else {
            return Ok(());
        };
        match done.result {
            Ok(()) => {
                self.written += done.payload.len() as u64;
                Ok(())
            }
            Err(e) => {
                self.queue.restore(done.payload);
                Err(e)
            }
        }
    }
}

/// Encodes syncs as uncompressed batches (as many as they need), timestamped now (MM2's
/// producer stamps its sends).
fn encode(syncs: &[OffsetSync]) -> Result<Vec<strait_wire::RawBatch>, InternalError> {
    let mut kvs = Vec::with_capacity(syncs.len());
    for sync in syncs {
        let key = sync
            .encode_key()
            .map_err(|source| InternalError::OffsetSync {
                sync: sync.clone(),
                source,
            })?;
        kvs.push((key, sync.encode_value()));
    }
    Ok(super::batch::key_value_batches("offset syncs", kvs)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lag rule fires at 0, 101, 202, ... for a dense feed from scratch (mm2_model's doc).
    #[test]
    fn dense_feed_fires_every_lag_plus_one() {
        let mut state = PartitionState::NEW;
        let syncs = apply_run(&mut state, 100, 0, 0, 1000);
        assert_eq!(syncs.immediate, 10);
        assert_eq!(syncs.last, Some(909));
        assert_eq!(state.last_sync_downstream, 909);
        // Split the same feed at odd places: same state.
        let mut split = PartitionState::NEW;
        let mut n = 0;
        for (from, len) in [(0, 1), (1, 100), (101, 1), (102, 457), (559, 441)] {
            n += apply_run(&mut split, 100, from, from, len).immediate;
        }
        assert_eq!(n, 10);
        assert_eq!(split.last_sync_downstream, 909);
        assert_eq!(split.previous_upstream, 999);
    }

    /// A failed write's syncs go back, except where a newer sync of their partition is queued.
    #[test]
    fn restored_syncs_do_not_replace_newer_ones() {
        let mut q = OffsetSyncQueue::new(100);
        q.on_batch("t", 0, &[(0, 0, 1)]);
        q.on_batch("t", 1, &[(0, 0, 1)]);
        let failed = q.take(false);
        assert_eq!(failed.len(), 2);
        // t-0 fires again (a gap) while the write is out.
        q.on_batch("t", 0, &[(10, 1, 1)]);
        q.restore(failed);
        let again = q.take(false);
        let got: Vec<(i32, i64)> = again
            .iter()
            .map(|s| (s.partition, s.upstream_offset))
            .collect();
        assert_eq!(got, [(0, 10), (1, 0)]);
    }

    #[test]
    fn zero_lag_fires_every_record() {
        let mut state = PartitionState::NEW;
        let syncs = apply_run(&mut state, 0, 5, 7, 4);
        assert_eq!((syncs.immediate, syncs.last), (4, Some(3)));
    }

    #[test]
    fn queue_keeps_latest_and_promotes_delayed() {
        let mut q = OffsetSyncQueue::new(100);
        q.on_batch("t", 0, &[(0, 0, 3)]);
        assert_eq!((q.pending_len(), q.delayed_len()), (1, 1));
        let now = q.take(false);
        assert_eq!(
            (now.len(), now[0].upstream_offset, now[0].downstream_offset),
            (1, 0, 0)
        );
        let later = q.take(true);
        assert_eq!(
            (
                later.len(),
                later[0].upstream_offset,
                later[0].downstream_offset
            ),
            (1, 2, 2)
        );
        assert!(q.take(true).is_empty());
    }
}
