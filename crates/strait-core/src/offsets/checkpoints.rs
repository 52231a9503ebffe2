//! MM2's checkpoints topic, written as MirrorMaker 2's `MirrorCheckpointTask` writes it
//! (`docs/mm2-behaviour.md` §1.3, §2.2), but with strait's exact translations instead of MM2's
//! offset-sync estimates, so `RemoteClusterUtils.translateOffsets` and the
//! `CheckpointFormatter` read our exact offsets.
//!
//! # The topic
//!
//! `<source alias>.checkpoints.internal` on the **target**
//! ([`FlowConfig::checkpoints_topic`]): one partition, `cleanup.policy=compact`, replication
//! factor `checkpoints.topic.replication.factor`. Key `group:STRING topic:STRING
//! partition:INT32`, where the topic is the **remote** (downstream) name; value
//! `version:INT16=0 upstreamOffset:INT64 offset:INT64 metadata:STRING` ([`Checkpoint`]).
//!
//! # One pass, every `strait.checkpoints.capture.interval.ms`
//!
//! Every second by default (MM2 waits `emit.checkpoints.interval.seconds`, 60 s, which stays the
//! longest a changed position waits), for every consumer group on the source that passes
//! `groups` / `groups.exclude`, its committed offsets on the partitions the flow's offset map
//! covers are read (one OffsetFetch per coordinator for up to 200 groups,
//! `Client::offset_fetch_groups`) and translated through the map
//! ([`translate_offsets`](super::translate_offsets)); a position in a partition the flow
//! mirrored without a record (only aborted transactions) continues at the remote partition's
//! end ([`at_remote_end`](super::at_remote_end)). Partitions of topics the flow no longer
//! mirrors and partitions without a target position are left out; a group left with nothing is
//! not checkpointed at all (KAFKA-14837).
//!
//! A checkpoint is written only when it is "more recent" than the last one written for that
//! group and partition (MM2's `checkpointIsMoreRecent`, [`CheckpointStore::decide`]): the
//! downstream offset advanced, or the source group was rewound (its committed offset went
//! below the last checkpoint's upstream offset), the only case a checkpoint moves backwards.
//! An unchanged checkpoint is not written again.
//!
//! The last checkpoint per (group, topic, partition) is read back from the topic before the
//! first pass, as MM2's `CheckpointStore` does since Kafka 3.8 (KAFKA-15905), so that rule holds
//! across restarts and a restart writes nothing that is already there.
//!
//! # Group sync
//!
//! The same task commits the last checkpoints into idle target groups every
//! `sync.group.offsets.interval.seconds` when `sync.group.offsets.enabled`: see
//! [`group_sync`](super::group_sync).
//!
//! A failing pass (a cluster down) is logged and tried again at the next interval; it never
//! stops the flow.

pub(super) mod error;
pub(super) mod store;

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use strait_kafka::groups::Stability;
use strait_kafka::produce::{ProducerConfig, RawProducer};
use strait_kafka::{Client, TopicPartition};
use strait_wire::mm2::Checkpoint;
use strait_wire::offset_map::{OffsetMap, SourcePartition, Translation};
use tokio::sync::watch;
use tokio::time::Instant;

use super::events::{Asked, GroupEvent, GroupEvents};
use super::group_sync::GroupSync;
use super::passes::GroupSyncSummary;
pub use super::passes::{CheckpointSummary, GroupFailure};
use crate::config::FlowConfig;
use crate::internal::InternalError;
pub use error::CheckpointError;
pub use store::{checkpoint_for, CheckpointStore, Decision};

use crate::internal::batch::MAX_BATCH_BYTES;

/// Shortest interval the loop honours, so a zero from a hand-built config cannot spin.
const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// How long a group asked alone (its part of a many-group answer was an error) may take
/// before the pass goes on without it; it is asked again at the next pass.
const GROUP_PATIENCE: Duration = Duration::from_secs(5);

/// A flow's checkpoints and group sync, run beside the flow (module docs).
#[derive(Debug)]
pub struct CheckpointTask {
    flow: FlowConfig,
    source: Client,
    target: Client,
    map: watch::Receiver<Arc<OffsetMap>>,
    topic: String,
    producer_config: ProducerConfig,
    /// `None` until the first write, and after a failed one (its sequence has a hole).
    producer: Option<RawProducer>,
    /// A transactional producer whose last write failed: it takes a new epoch (KIP-360)
    /// before the next, never a fresh initialisation, which would fence a newer owner back.
    stale: bool,
    /// Its transactional id was initialised by a newer owner: this task writes nothing more.
    fenced: bool,
    store: CheckpointStore,
    topic_ready: bool,
    loaded: bool,
    group_sync: GroupSync,
    /// Where checkpoints written, translation errors and passes are told (`events.rs`).
    events: GroupEvents,
    /// When each group's offsets were last read on the source (checkpoint latency).
    read_at: HashMap<String, Instant>,
}

impl CheckpointTask {
    /// The task of `flow`: reads groups on `source`, translates them through the map published
    /// by the flow (`Flow::map_updates`), writes checkpoints and syncs groups on `target`.
    /// Nothing is done until the first pass.
    pub fn new(
        flow: FlowConfig,
        source: Client,
        target: Client,
        map: watch::Receiver<Arc<OffsetMap>>,
    ) -> Self {
        let (group_sync, events) = (GroupSync::for_flow(&flow), GroupEvents::of(&flow));
        Self {
            topic: flow.checkpoints_topic(),
            flow,
            source,
            target,
            map,
            producer_config: ProducerConfig::default(),
            producer: None,
            stale: false,
            fenced: false,
            store: CheckpointStore::new(),
            topic_ready: false,
            loaded: false,
            group_sync,
            events,
            read_at: HashMap::new(),
        }
    }

    /// Uses `config` for the checkpoints producer (the target's `producer.*` timeouts). With a
    /// `transactional_id` (the leading unit of a flow run by workers) each checkpoint batch is
    /// a transaction of its own, and the id's first initialisation, at the first write, fences
    /// the task of the unit's earlier owner. Once fenced in turn, the task writes nothing more
    /// (checkpoints and group sync) and [`run`](Self::run) returns.
    pub fn with_producer_config(mut self, config: ProducerConfig) -> Self {
        self.producer_config = config;
        self
    }

    /// Whether the flow's config asks for anything this task does: checkpoints
    /// (`emit.checkpoints.enabled`) or group sync (`sync.group.offsets.enabled`).
    pub fn is_enabled(flow: &FlowConfig) -> bool {
        flow.emit_checkpoints.is_some() || flow.sync_group_offsets.is_some()
    }

    /// Whether the flow writes checkpoints (`emit.checkpoints.enabled`).
    pub fn emits_checkpoints(&self) -> bool {
        self.flow.emit_checkpoints.is_some()
    }

    /// Whether the flow syncs group offsets (`sync.group.offsets.enabled`).
    pub fn syncs_groups(&self) -> bool {
        self.flow.sync_group_offsets.is_some()
    }

    /// The checkpoints topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The last checkpoint per group and remote partition.
    pub fn store(&self) -> &CheckpointStore {
        &self.store
    }

    /// One checkpoint pass: translates every group's committed offsets through the current
    /// map and writes the checkpoints that changed (module docs). Creates the topic and reads
    /// its last checkpoints first, once. What it did is logged at info (at error if it failed)
    /// and shown in `/v1/status`.
    pub async fn emit_once(&mut self) -> Result<CheckpointSummary, CheckpointError> {
        self.checkpoint_pass(Asked::Once).await
    }

    /// A checkpoint pass, told as `asked` says.
    async fn checkpoint_pass(
        &mut self,
        asked: Asked,
    ) -> Result<CheckpointSummary, CheckpointError> {
        let result = self.emit_pass().await;
        self.events.tell(GroupEvent::CheckpointPass {
            result: result.as_ref(),
            asked,
            fenced: self.fenced,
        });
        result
    }

    async fn emit_pass(&mut self) -> Result<CheckpointSummary, CheckpointError> {
        self.claim().await?;
        self.prepare(true).await?;
        let read_at = std::time::SystemTime::now();
        let mut summary = self.translate_groups().await?;
        let pending = std::mem::take(&mut summary.emitted);
        self.write(pending, &mut summary).await?;
        // Every checkpoint of these groups is written or was already there: their positions
        // as read are carried.
        let behind: HashSet<&str> = summary
            .held_back
            .iter()
            .map(|c| c.group.as_str())
            .chain(summary.failures.iter().map(|f| f.group.as_str()))
            .chain(summary.uncarried.iter().map(String::as_str))
            .collect();
        for group in summary
            .groups
            .iter()
            .filter(|g| !behind.contains(g.as_str()))
        {
            self.events
                .tell(GroupEvent::PositionCaptured { group, at: read_at });
        }
        Ok(summary)
    }

    /// One group-sync pass ([`group_sync`](super::group_sync)): commits the last checkpoints
    /// into target groups that have no active members, never moving a group backwards. With
    /// checkpoint emission disabled, the groups are translated first (nothing is written to
    /// the checkpoints topic). What it did is logged at info (at error if it failed) and shown
    /// in `/v1/status`.
    pub async fn sync_once(&mut self) -> Result<GroupSyncSummary, CheckpointError> {
        self.group_sync_pass(None, Asked::Once).await
    }

    /// A group-sync pass over the groups in `only`, or over every group, told as `asked` says.
    async fn group_sync_pass(
        &mut self,
        only: Option<&HashSet<String>>,
        asked: Asked,
    ) -> Result<GroupSyncSummary, CheckpointError> {
        let result = self.sync_pass(only).await;
        self.events.tell(GroupEvent::SyncPass {
            result: result.as_ref(),
            groups: only.is_none().then(|| self.store.groups().count()),
            asked,
            fenced: self.fenced,
        });
        result
    }

    async fn sync_pass(
        &mut self,
        only: Option<&HashSet<String>>,
    ) -> Result<GroupSyncSummary, CheckpointError> {
        self.claim().await?;
        if self.flow.emit_checkpoints.is_none() {
            self.prepare(false).await?;
            let summary = self.translate_groups().await?;
            for checkpoint in summary.emitted {
                self.store.update(checkpoint);
            }
        } else {
            self.prepare(true).await?;
        }
        if self.producer_config.transactional_id.is_none() {
            return self
                .group_sync
                .sync_groups(&self.target, &self.store, only, None)
                .await;
        }
        let producer = self.ready_producer().await?;
        let synced = self
            .group_sync
            .sync_groups(&self.target, &self.store, only, Some(&producer))
            .await;
        if let Err(e) = &synced {
            self.failed_in_transaction(e);
        }
        self.producer = Some(producer);
        synced
    }

    /// Whether a newer owner of the unit fenced this task: it writes nothing more.
    pub fn is_fenced(&self) -> bool {
        self.fenced
    }

    /// A transactional task initialises its id when it starts ([`run`](Self::run)) or at its
    /// first pass, whether or not it has anything to write, so that the task of the unit's
    /// earlier owner is fenced at once.
    async fn claim(&mut self) -> Result<(), CheckpointError> {
        if self.producer_config.transactional_id.is_some() && self.producer.is_none() {
            let producer = self.ready_producer().await?;
            self.producer = Some(producer);
        }
        Ok(())
    }

    /// The producer, made at the first write (a transactional one initialised then, which
    /// fences the task of the unit's earlier owner), with a new epoch after a failure.
    async fn ready_producer(&mut self) -> Result<RawProducer, CheckpointError> {
        let mut producer = match self.producer.take() {
            Some(p) => p,
            None => RawProducer::new(self.target.clone(), self.producer_config.clone())
                .await
                .map_err(CheckpointError::kafka(format!(
                    "starting the producer of {}",
                    self.topic
                )))?,
        };
        if self.stale {
            if let Err(e) = producer.bump_epoch().await {
                let e = CheckpointError::kafka(format!("a new epoch for {}", self.topic))(e);
                self.failed_in_transaction(&e);
                self.producer = Some(producer);
                return Err(e);
            }
            self.stale = false;
        }
        Ok(producer)
    }

    /// A transactional write failed: a new epoch before the next, and nothing more at all if
    /// a newer owner fenced this one.
    fn failed_in_transaction(&mut self, e: &CheckpointError) {
        self.stale = true;
        if matches!(e, CheckpointError::Kafka { source, .. } if source.is_fenced()) {
            self.fenced = true;
        }
    }

    /// Runs passes on the flow's intervals (`emit.checkpoints.interval.seconds`,
    /// `sync.group.offsets.interval.seconds`) until `stop` resolves; the first of each comes
    /// one interval after the start, as in MM2 (a transactional task takes its id at the start,
    /// fencing the task of the unit's earlier owner at once). A failing pass is logged and tried again at the
    /// next interval. Returns at once on `stop`, even mid-pass: what was written stays written,
    /// and the store is read back at the next start.
    pub async fn run(&mut self, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        // A pass every `strait.checkpoints.capture.interval.ms`: checkpoints are written only
        // where a position changed, so a steady group costs nothing but the read.
        let capture = self.flow.checkpoints_capture;
        let emit_every = match (self.flow.emit_checkpoints, capture) {
            (Some(every), Some(capture)) => Some(every.min(capture).max(MIN_INTERVAL)),
            (every, _) => every.map(|d| d.max(MIN_INTERVAL)),
        };
        let sync_every = self.flow.sync_group_offsets.map(|d| d.max(MIN_INTERVAL));
        if emit_every.is_none() && sync_every.is_none() {
            return;
        }
        if emit_every.is_none() {
            tracing::info!(
                flow = %self.flow.name(),
                "sync.group.offsets.enabled without emit.checkpoints.enabled: groups are \
                 translated for group sync, no checkpoints are written"
            );
        }
        // A transactional task takes its id now rather than at its first pass, an interval
        // later: the task of the unit's earlier owner is fenced from the start.
        tokio::select! {
            () = &mut stop => return,
            claimed = self.claim() => if let Err(e) = claimed {
                tracing::warn!(flow = %self.flow.name(), error = %e,
                    "cannot take the checkpoints' transactional id yet; tried again at the \
                     first pass");
            },
        }
        let mut next_emit = emit_every.map(|d| Instant::now() + d);
        let mut next_sync = sync_every.map(|d| Instant::now() + d);
        loop {
            let Some(wake) = next_emit.into_iter().chain(next_sync).min() else {
                return;
            };
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep_until(wake) => {}
            }
            if let (Some(at), Some(every)) = (next_emit, emit_every) {
                if Instant::now() >= at {
                    let started = Instant::now();
                    let changed: HashSet<String> = tokio::select! {
                        () = &mut stop => return,
                        result = self.checkpoint_pass(Asked::ByLoop) => {
                            result.map_or_else(|_| HashSet::new(), |s| {
                                s.emitted.iter().map(|c| c.group.clone()).collect()
                            })
                        }
                    };
                    if self.fenced {
                        return;
                    }
                    // Where positions are captured every second, their target groups follow:
                    // group sync for just the groups this pass wrote (the pass at
                    // `sync.group.offsets.interval.seconds` still looks at every group).
                    if sync_every.is_some()
                        && !changed.is_empty()
                        && self.flow.checkpoints_capture.is_some()
                    {
                        tokio::select! {
                            () = &mut stop => return,
                            _ = self.group_sync_pass(Some(&changed), Asked::ByLoop) => {}
                        }
                        if self.fenced {
                            return;
                        }
                    }
                    next_emit = Some(next_pass(started, every, Instant::now()));
                }
            }
            if let (Some(at), Some(every)) = (next_sync, sync_every) {
                if Instant::now() >= at {
                    tokio::select! {
                        () = &mut stop => return,
                        _ = self.group_sync_pass(None, Asked::ByLoop) => {}
                    }
                    if self.fenced {
                        return;
                    }
                    next_sync = Some(Instant::now() + every);
                }
            }
        }
    }

    /// Creates the topic (when `create`) and reads the last checkpoints back, each once.
    async fn prepare(&mut self, create: bool) -> Result<(), CheckpointError> {
        if create && !self.topic_ready {
            crate::internal::ensure_compacted_topic(
                &self.target,
                &self.topic,
                self.flow.checkpoints_topic_replication_factor,
            )
            .await?;
            self.topic_ready = true;
        }
        if !self.loaded {
            self.store = self.read_back().await?;
            self.loaded = true;
            tracing::debug!(
                flow = %self.flow.name(),
                topic = %self.topic,
                checkpoints = self.store.len(),
                "last checkpoints read back"
            );
        }
        Ok(())
    }

    /// Translates every group and sorts the checkpoints: those to write are returned in
    /// `emitted` (not yet written, the store unchanged).
    async fn translate_groups(&mut self) -> Result<CheckpointSummary, CheckpointError> {
        let map = Arc::clone(&self.map.borrow());
        let groups = super::consumer_groups(&self.source, &self.flow)
            .await
            .map_err(CheckpointError::kafka(
                "listing the source's consumer groups",
            ))?;
        let mut summary = CheckpointSummary::default();
        // Every group's offsets with one request per coordinator (for up to 200 groups),
        // each group answering with the partitions it committed, whatever the flow maps: the
        // cost is what the groups committed, not groups × mapped partitions. Read as MM2
        // reads them, pending transactional commits left aside, and a group asked alone
        // waits at most `GROUP_PATIENCE`: one group never holds the others' capture.
        let read = Instant::now();
        let mut committed = self
            .source
            .offset_fetch_groups_with(
                &groups,
                None,
                Stability::LastCommitted,
                Some(GROUP_PATIENCE),
            )
            .await;
        self.read_at.retain(|g, _| committed.contains_key(g));
        for group in groups {
            self.read_at.insert(group.clone(), read);
            let mut translated = match committed.remove(&group) {
                Some(Ok(offsets)) => {
                    let selected: Vec<_> = offsets
                        .into_iter()
                        .filter(|(tp, _)| self.flow.should_replicate_topic(&tp.topic))
                        .collect();
                    if selected.iter().any(|(tp, _)| {
                        map.partition(&SourcePartition::new(tp.topic.clone(), tp.partition))
                            .is_none()
                    }) {
                        summary.uncarried.push(group.clone());
                    }
                    super::translate_offsets(&self.flow, &map, selected)
                }
                None => continue,
                Some(Err(e)) => {
                    tracing::warn!(
                        flow = %self.flow.name(),
                        group = %group,
                        error = %e,
                        "cannot read the group's committed offsets on the source; \
                         trying again at the next interval"
                    );
                    summary.failures.push(GroupFailure {
                        group,
                        partition: None,
                        error: e.to_string(),
                    });
                    continue;
                }
            };
            // A position in a partition mirrored without a record is checkpointed at the
            // remote partition's end, so group sync, readiness and a plan made from the
            // checkpoints carry it too.
            super::at_remote_end(Some(&self.source), &self.target, &map, &mut translated).await;
            for t in translated
                .iter()
                .filter(|t| self.flow.should_replicate_topic(&t.topic))
            {
                if let Some(error) = translation_error(&t.translation) {
                    self.events.tell(GroupEvent::TranslationError {
                        group: &group,
                        topic: &t.topic,
                        partition: t.partition,
                        error,
                    });
                }
            }
            let checkpoints: Vec<Checkpoint> = translated
                .iter()
                .filter(|t| self.flow.should_replicate_topic(&t.topic))
                .filter_map(|t| checkpoint_for(&group, t))
                .collect();
            if checkpoints.is_empty() {
                // No offsets on mirrored partitions (KAFKA-14837).
                continue;
            }
            summary.groups.push(group);
            for checkpoint in checkpoints {
                match self.store.decide(&checkpoint) {
                    d if d.emits() => summary.emitted.push(checkpoint),
                    Decision::Unchanged => summary.unchanged += 1,
                    _ => {
                        tracing::debug!(
                            group = %checkpoint.group,
                            topic = %checkpoint.topic,
                            partition = checkpoint.partition,
                            upstream = checkpoint.upstream_offset,
                            downstream = checkpoint.downstream_offset,
                            "checkpoint held back: it would move backwards without a rewind \
                             of the source group"
                        );
                        summary.held_back.push(checkpoint);
                    }
                }
            }
        }
        Ok(summary)
    }

    /// Writes `checkpoints` to partition 0, in batches, and records each acknowledged one in
    /// the store and in `summary.emitted`. On failure the rest stays unwritten and unrecorded,
    /// so the next pass writes it.
    async fn write(
        &mut self,
        checkpoints: Vec<Checkpoint>,
        summary: &mut CheckpointSummary,
    ) -> Result<(), CheckpointError> {
        let mut encoded = Vec::with_capacity(checkpoints.len());
        for checkpoint in checkpoints {
            match checkpoint
                .encode_key()
                .and_then(|k| Ok((k, checkpoint.encode_value()?)))
            {
                Ok((key, value)) => encoded.push(Encoded {
                    checkpoint,
                    key,
                    value,
                }),
                Err(e) => {
                    tracing::warn!(
                        group = %checkpoint.group,
                        topic = %checkpoint.topic,
                        partition = checkpoint.partition,
                        error = %e,
                        "cannot encode the checkpoint; skipped"
                    );
                    summary.failures.push(GroupFailure {
                        partition: Some(TopicPartition::new(
                            checkpoint.topic.clone(),
                            checkpoint.partition,
                        )),
                        group: checkpoint.group,
                        error: e.to_string(),
                    });
                }
            }
        }
        let tp = TopicPartition::new(self.topic.clone(), 0);
        for chunk in chunks(encoded) {
            let kvs = chunk
                .iter()
                .map(|e| (e.key.clone(), e.value.clone()))
                .collect();
            let batch = crate::internal::batch::key_value_batch("checkpoints", kvs)
                .map_err(InternalError::from)?;
            let producer = self.ready_producer().await?;
            let transactional = self.producer_config.transactional_id.is_some();
            let written = async {
                producer.send(&tp, &batch).await?;
                if transactional {
                    producer.commit().await?;
                }
                Ok::<(), strait_kafka::Error>(())
            }
            .await;
            if let Err(e) = written {
                let e = CheckpointError::kafka(format!("writing to {}", self.topic))(e);
                if transactional {
                    // Kept, to take a new epoch with its current one.
                    self.failed_in_transaction(&e);
                    self.producer = Some(producer);
                }
                // Otherwise dropped: a failed batch breaks its sequence.
                return Err(e);
            }
            self.producer = Some(producer);
            for Encoded { checkpoint, .. } in chunk {
                let latency = self.read_at.get(&checkpoint.group).map(Instant::elapsed);
                self.events.tell(GroupEvent::CheckpointWritten {
                    checkpoint: &checkpoint,
                    latency,
                });
                self.store.update(checkpoint.clone());
                summary.emitted.push(checkpoint);
            }
        }
        Ok(())
    }

    /// Reads the checkpoints topic back: [`read_checkpoints`].
    async fn read_back(&self) -> Result<CheckpointStore, CheckpointError> {
        read_checkpoints(&self.target, &self.flow).await
    }
}

/// When the checkpoint pass after one that `started` is due: `every` after that start, not
/// after its end, so that a pass that takes a while (1,000 groups on 10,000 partitions took
/// about 2.5 s on a loaded 2-core machine, `bench/capture-cost`) does not stretch the capture
/// interval by its own length (it made passes 3.5 s apart at a 1 s interval); at once when that
/// time has passed.
fn next_pass(started: Instant, every: Duration, now: Instant) -> Instant {
    (started + every).max(now)
}

/// Reads `flow`'s checkpoints topic on `target` from its start and keeps the last checkpoint
/// per key, for groups the flow checkpoints. A missing topic is an empty store. Records that
/// are not v0 checkpoints are skipped and logged, never guessed at.
///
/// This is also where the last known source positions of every group come from when the
/// source cluster is gone (a failover plan made from checkpoints).
pub async fn read_checkpoints(
    target: &Client,
    flow: &FlowConfig,
) -> Result<CheckpointStore, CheckpointError> {
    Ok(read_checkpoints_timed(target, flow).await?.0)
}

/// When each checkpoint of a store was written (its record's timestamp, ms since the epoch), by
/// group and remote partition.
pub type WrittenAt = HashMap<(String, TopicPartition), i64>;

/// [`read_checkpoints`], with when each checkpoint was written.
pub async fn read_checkpoints_timed(
    target: &Client,
    flow: &FlowConfig,
) -> Result<(CheckpointStore, WrittenAt), CheckpointError> {
    let topic = flow.checkpoints_topic();
    let mut store = CheckpointStore::new();
    let mut written = WrittenAt::new();
    crate::internal::read_whole_topic(target, &topic, |offset, timestamp, key, value| {
        let read = read_record(&topic, flow, &mut store, offset, key, value);
        if let Some((c, kept)) = read {
            let at = (c.group, TopicPartition::new(c.topic, c.partition));
            if kept {
                written.insert(at, timestamp);
            } else {
                written.remove(&at);
            }
        }
        Ok(())
    })
    .await
    .map_err(CheckpointError::Internal)?;
    Ok((store, written))
}

/// Applies one record of the checkpoints topic to `store`: the checkpoint it names, and
/// whether it is kept (`false`: a tombstone took it away).
fn read_record(
    topic: &str,
    flow: &FlowConfig,
    store: &mut CheckpointStore,
    offset: i64,
    key: Option<bytes::Bytes>,
    value: Option<bytes::Bytes>,
) -> Option<(Checkpoint, bool)> {
    let Some(key) = key else {
        tracing::warn!(topic, offset, "checkpoint record without a key; skipped");
        return None;
    };
    let Some(value) = value else {
        // A tombstone: the key's checkpoint is gone. `Checkpoint::decode` reads key and
        // value together, so the key is paired with an all-zero v0 value (20 bytes: version,
        // two offsets, empty metadata) to read it alone.
        let c = Checkpoint::decode(&key, &[0u8; 20]).ok()?;
        store.remove(&c.group, &c.topic, c.partition);
        return Some((c, false));
    };
    match Checkpoint::decode(&key, &value) {
        Ok(c) if flow.should_replicate_group(&c.group) => {
            store.update(c.clone());
            Some((c, true))
        }
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(topic, offset, error = %e,
                "record is not an MM2 v0 checkpoint; skipped");
            None
        }
    }
}

/// How many records a translation could be off: 0 when exact, else the records it could not
/// place (not mirrored yet, never mirrored, lost) or may have the group read twice (below the
/// map's compacted start); `None` for an unmapped partition.
fn translation_error(t: &Translation) -> Option<i64> {
    match *t {
        Translation::Exact { .. } => Some(0),
        Translation::PastMappedEnd { unreplicated, .. } => Some(unreplicated),
        Translation::BeforeMappedStart { skipped, .. } => Some(skipped),
        Translation::InLostRange { lost, .. } => Some(lost),
        Translation::Compacted { reread_at_most, .. } => Some(reread_at_most),
        Translation::Unmapped => None,
    }
}

/// A checkpoint with its key and value bytes.
#[derive(Debug)]
struct Encoded {
    checkpoint: Checkpoint,
    key: Vec<u8>,
    value: Vec<u8>,
}

/// Splits encoded checkpoints into runs of at most [`MAX_BATCH_BYTES`] (at least one each).
fn chunks(encoded: Vec<Encoded>) -> Vec<Vec<Encoded>> {
    crate::internal::batch::chunks_by_size(encoded, MAX_BATCH_BYTES, |e| {
        crate::internal::batch::record_size(&e.key, &e.value)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pass is due `every` after the last one started, whatever it took, and at once when
    /// it took longer than that.
    #[test]
    fn passes_are_due_every_interval_from_their_start() {
        let t0 = Instant::now();
        let every = Duration::from_secs(1);
        let ms = Duration::from_millis;
        assert_eq!(next_pass(t0, every, t0 + ms(300)), t0 + every);
        assert_eq!(next_pass(t0, every, t0 + ms(2500)), t0 + ms(2500));
    }

    /// A checkpoint of `group` on `A.orders`, no metadata (used by the store's tests too).
    pub(super) fn cp(group: &str, partition: i32, upstream: i64, downstream: i64) -> Checkpoint {
        Checkpoint {
            group: group.into(),
            topic: "A.orders".into(),
            partition,
            upstream_offset: upstream,
            downstream_offset: downstream,
            metadata: String::new(),
        }
    }

    #[test]
    fn batches_stay_under_the_byte_limit() {
        let item = |n: usize| Encoded {
            checkpoint: cp("g", n as i32, 0, 0),
            key: vec![0u8; 1000],
            value: vec![0u8; 1000],
        };
        let encoded: Vec<_> = (0..300).map(item).collect();
        let out = chunks(encoded);
        assert!(out.len() > 1);
        assert_eq!(out.iter().map(Vec::len).sum::<usize>(), 300);
        for c in &out {
            assert!(c.len() * 2024 <= MAX_BATCH_BYTES, "{}", c.len());
        }
        assert!(chunks(Vec::new()).is_empty());
    }
}
