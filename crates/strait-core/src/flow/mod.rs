//! A flow mirrors the topics of one source cluster into one target cluster (`A->B`), batch by
//! batch, and keeps the exact offset map (`docs/design.md` §3–§4).
//!
//! One round (`round.rs`, in stages with one job each): fetch every mirrored partition from
//! where its map ends (read_committed by default), decide per batch (forward, skip, rebuild:
//! `decide.rs`), produce everything to the target through the idempotent raw producer while
//! the next round's fetch and the last round's map write are in flight, record each written
//! batch in the map, and start writing the map's changes to its topic beside the next round.
//! A round holds at most the flow's byte budget (`strait.max.bytes.in.flight`: a third
//! fetched, a third the producer's copies, a third the fetch ahead) whatever the partition and
//! leader count, and per partition the order is kept.
//!
//! At start the map is loaded and each partition resumes where its map ends. Batches the target
//! holds beyond the map (written before a crash, not yet recorded) are matched against the source
//! record by record, from the target's log start at the earliest: a match is recorded and not
//! produced again; what cannot be matched is produced again and counted as duplicates
//! (at-least-once, never loss). Source records deleted before they were matched are recorded as
//! lost, and their copies on the target kept. A remote topic without a map (filled by MM2, or the
//! map topic deleted) is first lined up with the source, whichever side deleted its oldest
//! records. All of that is `recover/` (its module doc says what it guarantees).
//!
//! Records deleted on the source before they were mirrored (OFFSET_OUT_OF_RANGE, or a log start
//! past our position) are recorded as a lost range, logged and counted (`docs/design.md` §3.4).
//!
//! Layout: `mod.rs` holds the flow and its life (start, run, stall and resume);
//! `partition.rs` its partitions' states (halted, refused, waiting to be placed again);
//! `txn.rs` a unit's transaction; `refresh.rs` the topic refresh (new, refused and deleted
//! topics); `round.rs` one round, stage by stage; `decide.rs` what a round
//! does with one partition's fetched bytes (a pure function); `events.rs` what the flow tells
//! about itself (each occurrence logged, counted and shown at once); `classify.rs` markers and
//! aborted transactions; `recover/` where each partition resumes (`placement.rs`: the survey
//! of both clusters, `tail.rs`: matching records); `compact.rs` bounding the map; `topics.rs`
//! the mirrored topics and their remote topics; `error.rs` the [`FlowError`] they all return.
//! The map's topic and MM2's offset syncs are written through [`crate::internal`], which the
//! flow uses and which does not use the flow.

pub mod classify;
mod compact;
mod decide;
mod error;
mod events;
mod partition;
mod recover;
mod refresh;
mod round;
pub mod topics;
mod txn;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use strait_kafka::admin::OffsetSpec;
use strait_kafka::fetch::FetchPosition;
use strait_kafka::produce::{ProducerConfig, RawProducer};
use strait_kafka::{Client, TopicPartition};
use strait_wire::offset_map::{MapEntry, OffsetMap, SourcePartition};
use tokio::time::Instant;

use crate::config::{FlowConfig, Side};
use crate::internal::map_store::MapStore;
use crate::internal::offset_syncs::{OffsetSyncWriter, DELAYED_SYNC_INTERVAL};
use crate::metrics::{FlowMetrics, PartitionMetrics};
use crate::scale::UnitFilter;
use events::{Event, Events, FlowEvent};
use partition::{PartitionState, REFUSED_TOPIC_RETRY};
use recover::Placement;
use topics::MirroredTopic;
use txn::fence_other_counts;

pub use error::FlowError;

/// Counters of one flow since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowStats {
    /// Records written to the target.
    pub records: u64,
    /// Wire bytes of the batches written.
    pub bytes: u64,
    /// Batches forwarded unopened.
    pub batches_forwarded: u64,
    /// Batches decoded and re-encoded (compaction holes, a batch cut by a position).
    pub batches_rebuilt: u64,
    /// Source batches written merged with others of their partition into one target batch
    /// (each also counted as forwarded or rebuilt).
    pub batches_merged: u64,
    /// Control batches (transaction markers) not mirrored.
    pub control_batches_skipped: u64,
    /// Batches of aborted transactions not mirrored.
    pub aborted_batches_skipped: u64,
    /// Source records lost before they could be mirrored.
    pub lost_records: u64,
    /// Records found on the target after a restart and matched, so not written again.
    pub recovered_records: u64,
    /// Records on the target twice: written again because a crash left them unrecorded and
    /// unmatchable, or found there twice when taking over (an earlier mirror's extra copies).
    pub duplicate_records: u64,
    /// Times the flow stalled: a round failed in a way time can fix, and was tried again.
    pub stalls: u64,
}

/// What one round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoundStats {
    /// Records written.
    pub records: u64,
    /// Whether every partition reached the source end seen by the fetch.
    pub caught_up: bool,
    /// Whether a write failed and the partitions were placed again from the map and the
    /// target: the next round waits the flow's backoff, so a write that keeps failing does
    /// not re-place every partition round after round.
    pub placed_again: bool,
}

/// The least a fetch asks per partition when it shares its bytes among them
/// ([`FlowOptions::partition_bytes_from_budget`]), and at least twice the partition's largest
/// batch: below a partition's next batch, the broker would send a cut batch that moves nothing
/// (only the first partition of an answer may go over its limit, KIP-74).
pub const MIN_PARTITION_SHARE: i32 = 64 * 1024;

/// Tuning of a flow beyond its MM2 config.
#[derive(Debug, Clone)]
pub struct FlowOptions {
    /// How long a fetch may wait for data (`fetch.max.wait.ms`, default 500 ms).
    pub fetch_max_wait: Duration,
    /// How many bytes a fetch waits for (`fetch.min.bytes`, default 1).
    pub fetch_min_bytes: i32,
    /// The most bytes one fetch asks for over all partitions (`fetch.max.bytes`, default
    /// 50 MiB), within the flow's budget (a third of `strait.max.bytes.in.flight`).
    pub fetch_max_bytes: i32,
    /// Bytes asked per partition per fetch (`max.partition.fetch.bytes`, default 1 MiB).
    pub partition_max_bytes: i32,
    /// Whether a fetch asks each partition for its share of the fetch's bytes instead of
    /// `partition_max_bytes`, never less than [`MIN_PARTITION_SHARE`] nor than twice the
    /// partition's largest batch. Across a long link to the
    /// source, one partition then moves far more than 1 MiB per round trip; across a long link
    /// to the target, a round's data is spread over all partitions, each of which can only
    /// have five produce requests in flight, instead of going to the first few partitions of
    /// the fetch. `strait run` sets it unless the MM2 file sets `max.partition.fetch.bytes`;
    /// default false (the fixed limit).
    pub partition_bytes_from_budget: bool,
    /// Whether each fetched batch's CRC is checked before it is forwarded (`check.crcs`,
    /// default true, as Kafka's consumer). A batch that fails is fetched again next round. Off,
    /// a corrupted batch is not caught here but still is by the target broker: the forwarded
    /// CRC is derived from the source's (`strait_wire::rewrite`), never computed afresh, so it
    /// stays wrong and the target refuses the batch (`CORRUPT_MESSAGE`); the partition stalls.
    pub check_crcs: bool,
    /// The target producer's settings (`T.producer.delivery.timeout.ms`, `request.timeout.ms`).
    pub producer: ProducerConfig,
    /// The segments a partition's offset map holds before a compaction pass bounds it
    /// (`compact.rs`; default 1,024). Lower only to see compaction in a test.
    pub compact_min_segments: usize,
    /// The one unit of the flow this runs (`tasks.max`, `docs/design.md` §7.2): only its
    /// partitions are mirrored, and only unit 0 syncs topic configs and deletes remote topics.
    /// `None`: every partition (default).
    pub unit: Option<UnitFilter>,
}

impl Default for FlowOptions {
    fn default() -> Self {
        Self {
            fetch_max_wait: Duration::from_millis(500),
            fetch_min_bytes: 1,
            fetch_max_bytes: 50 * 1024 * 1024,
            partition_max_bytes: 1024 * 1024,
            partition_bytes_from_budget: false,
            check_crcs: true,
            producer: ProducerConfig::default(),
            compact_min_segments: compact::COMPACT_MIN_SEGMENTS,
            unit: None,
        }
    }
}

/// What recording a round's acknowledged writes tells of a partition ([`Flow::tell_recorded`]),
/// owned so that a transactional round can hold it until it commits.
#[derive(Debug, Clone)]
pub(super) enum Recorded {
    /// A batch the target acknowledged, as [`Event::Written`] tells it.
    Written {
        records: u64,
        bytes: u64,
        max_timestamp: i64,
    },
    /// [`Event::Forwarded`].
    Forwarded,
    /// [`Event::Rebuilt`].
    Rebuilt {
        source_base: i64,
        runs: Vec<(i64, i64)>,
        holes: bool,
    },
    /// [`Event::Skipped`].
    Skipped(classify::SkipReason),
    /// [`Event::Merged`].
    Merged,
    /// [`Event::Split`].
    Split,
}

/// One written batch as offset syncs note it: source topic, partition, and its runs of
/// `(upstream offset, downstream offset, record count)`.
type UncommittedSyncs = (String, i32, Vec<(i64, i64, i64)>);

/// A running flow.
#[derive(Debug)]
pub struct Flow {
    config: FlowConfig,
    options: FlowOptions,
    source: Client,
    target: Client,
    producer: RawProducer,
    map: OffsetMap,
    store: MapStore,
    /// MM2's offset-syncs topic, written for MM2 tooling (`emit.offset-syncs.enabled`).
    offset_syncs: Option<OffsetSyncWriter>,
    /// A transactional round's batches as offset syncs would note them, held until the round
    /// commits: a sync must never point at data that was aborted.
    uncommitted_syncs: Vec<UncommittedSyncs>,
    /// A transactional round's acknowledged batches, told ([`Event::Written`]) once it commits.
    uncommitted_told: Vec<(TopicPartition, Recorded)>,
    next_delayed_syncs: Instant,
    partitions: BTreeMap<TopicPartition, PartitionState>,
    /// The order partitions are asked for in the next fetch: those that got records last go to
    /// the back (see [`Flow::round`]).
    fetch_order: Vec<TopicPartition>,
    /// The next round's fetch, made while this round's batches were being written: used if
    /// the next round asks exactly the same positions, else dropped.
    prefetched: Option<(Vec<FetchPosition>, strait_kafka::fetch::FetchResults)>,
    /// Per partition, where the target records end that start-up left unmapped because they are
    /// copies of source records deleted before they were recorded: a write there is not
    /// preceded by duplicates.
    orphan_ends: BTreeMap<TopicPartition, i64>,
    topics: Vec<MirroredTopic>,
    next_refresh: Instant,
    next_config_sync: Instant,
    /// Set after a failure: the producer and positions must be re-established first.
    needs_reset: bool,
    /// The source topics' ids as last seen (KIP-516), to notice a topic deleted and created
    /// again.
    topic_ids: BTreeMap<String, [u8; 16]>,
    /// The mirrored source topics absent from the source's metadata at the last refresh: a
    /// topic absent again at the next is deleted (`topics::confirm_deleted`).
    absent_topics: BTreeSet<String>,
    /// Source topics deleted whose remote topics the flow keeps, their partitions stopped (told
    /// once each).
    kept_gone: BTreeSet<String>,
    /// In a unit but unit 0, with `strait.sync.topic.deletions.enabled`: source topics deleted
    /// whose remote topic unit 0 is to delete, with that remote topic and its id on the target
    /// when the deletion was seen. Once it is gone from the target (or made again under
    /// another id), this unit forgets its partitions of the source topic
    /// ([`Flow::forget_deleted_remotes`]), so that a source topic made again under the name is
    /// mirrored afresh here too.
    awaiting_remote: BTreeMap<String, (String, [u8; 16])>,
    /// Remote topics the target refused to create, with why as last told.
    refused_topics: BTreeMap<String, String>,
    /// Set when the target no longer knows our producer id: the reset takes a new one rather
    /// than bumping the epoch.
    fresh_producer: bool,
    /// The flow's counters and metric handles, and where its events are told (`events.rs`).
    events: Events,
    /// The map as last persisted, for readers beside the flow (checkpoints, the HTTP API).
    published: tokio::sync::watch::Sender<std::sync::Arc<OffsetMap>>,
    /// The counters as of the last map flush, for readers beside the flow (progress).
    published_stats: tokio::sync::watch::Sender<FlowStats>,
}

fn source_partition(tp: &TopicPartition) -> SourcePartition {
    SourcePartition::new(tp.topic.clone(), tp.partition)
}

impl Flow {
    /// Connects the flow's pieces: the map is loaded, remote topics made, and every partition
    /// placed where its map ends (or at the source's log start when it has none).
    pub async fn start(
        config: FlowConfig,
        options: FlowOptions,
        source: Client,
        target: Client,
    ) -> Result<Self, FlowError> {
        if config.use_defaults_from == crate::config::UseDefaultsFrom::Source {
            tracing::warn!(
                flow = %config.name(),
                "use.defaults.from=source is not supported yet: topic config sync behaves as \
                 use.defaults.from=target (keys at their default on the source are removed on \
                 the target, so the target's defaults apply)"
            );
        }
        // A transactional producer initialises its id first: that fences every earlier owner
        // of the unit and aborts what it left open, so the map loaded next is final.
        let mut options = options;
        options.producer.merge = config.batch_merge;
        let producer = RawProducer::new(target.clone(), options.producer.clone()).await?;
        let transactional = options.producer.transactional_id.is_some();
        if let (Some(id), Some(unit)) = (&options.producer.transactional_id, options.unit) {
            fence_other_counts(&target, id, unit, &options.producer).await?;
        }
        let (store, map) = MapStore::open(
            &target,
            config.source_alias.as_str(),
            config.checkpoints_topic_replication_factor,
            (!transactional).then(|| options.producer.clone()),
        )
        .await
        .map_err(FlowError::internal("offset map"))?;
        let offset_syncs = if config.emit_offset_syncs {
            let (topic, side) = config.offset_syncs_topic();
            let client = match side {
                Side::Source => source.clone(),
                Side::Target => target.clone(),
            };
            Some(
                // A unit's syncs are fenced as its data is: by an id of their own on the
                // cluster they are written to, which the unit's next owner initialises.
                OffsetSyncWriter::open(
                    client,
                    topic,
                    config.offset_syncs_topic_replication_factor,
                    config.offset_lag_max,
                    options
                        .producer
                        .transactional_id
                        .as_ref()
                        .map(|id| format!("{id}-offset-syncs")),
                )
                .await
                .map_err(FlowError::internal("offset syncs"))?,
            )
        } else {
            None
        };
        let published = tokio::sync::watch::Sender::new(std::sync::Arc::new(map.clone()));
        let config_name = config.name();
        let metrics = FlowMetrics::start(&config, options.unit);
        let mut flow = Self {
            config,
            options,
            source,
            target,
            producer,
            map,
            store,
            offset_syncs,
            uncommitted_syncs: Vec::new(),
            uncommitted_told: Vec::new(),
            next_delayed_syncs: Instant::now() + DELAYED_SYNC_INTERVAL,
            partitions: BTreeMap::new(),
            fetch_order: Vec::new(),
            prefetched: None,
            orphan_ends: BTreeMap::new(),
            topics: Vec::new(),
            next_refresh: Instant::now(),
            next_config_sync: Instant::now(),
            needs_reset: false,
            fresh_producer: false,
            topic_ids: BTreeMap::new(),
            absent_topics: BTreeSet::new(),
            kept_gone: BTreeSet::new(),
            awaiting_remote: BTreeMap::new(),
            refused_topics: BTreeMap::new(),
            events: Events::new(config_name, metrics),
            published,
            published_stats: tokio::sync::watch::Sender::new(FlowStats::default()),
        };
        flow.refresh_topics().await?;
        Ok(flow)
    }

    /// The flow's name, `A->B`.
    pub fn name(&self) -> String {
        self.config.name()
    }

    /// The offset map as last persisted to its topic, updated after every flush that changed
    /// it. What a reader sees here is on the target already, so it survives a crash.
    pub fn map_updates(&self) -> tokio::sync::watch::Receiver<std::sync::Arc<OffsetMap>> {
        self.published.subscribe()
    }

    /// [`Flow::stats`] as of the end of the last round, readable while the flow
    /// runs: what a progress display or a metrics exporter beside the flow reads.
    pub fn stats_updates(&self) -> tokio::sync::watch::Receiver<FlowStats> {
        self.published_stats.subscribe()
    }

    /// Writes the map's changes to its topic, waits for them (and for a write
    /// [`write_map`](Flow::write_map) left in flight), and publishes the new map to
    /// [`Flow::map_updates`] readers (and the counters to [`Flow::stats_updates`] readers).
    async fn persist_map(&mut self) -> Result<(), FlowError> {
        self.write_map(true).await
    }

    /// Writes the map's changes to its topic: in a round, beside the next round's data
    /// (`wait` false: the data does not wait a round trip to the target for the map; a crash
    /// meanwhile leaves records beyond the persisted map, which start-up matches, `recover/`),
    /// and publishes the map of the last write that finished. Every so many writes, large
    /// partitions are compacted first, below what no group on the source still needs
    /// (`compact.rs`).
    async fn write_map(&mut self, wait: bool) -> Result<(), FlowError> {
        if self.transactional() {
            return self.commit().await;
        }
        self.compact_map().await;
        let written = if wait {
            self.store.flush(&self.map).await
        } else {
            self.store.start_flush(&self.map).await
        };
        self.publish(written.map_err(FlowError::internal("offset map"))?);
        Ok(())
    }

    /// Whether `tp` belongs to the unit this flow runs (every partition without a unit).
    fn mirrors(&self, tp: &TopicPartition) -> bool {
        self.options
            .unit
            .is_none_or(|u| u.contains(&tp.topic, tp.partition))
    }

    /// Whether this flow does the work that belongs to no partition: without units, or as
    /// unit 0.
    fn leads(&self) -> bool {
        self.options.unit.is_none_or(|u| u.leads())
    }

    /// Publishes `map`, if a write put it on the topic, and the counters.
    fn publish(&self, map: Option<std::sync::Arc<OffsetMap>>) {
        if let Some(map) = map {
            self.published.send_replace(map);
        }
        self.published_stats.send_replace(self.events.stats());
    }

    /// Counters since start.
    pub fn stats(&self) -> FlowStats {
        self.events.stats()
    }

    /// The target producer's id and epoch (the epoch grows after each failed write).
    pub fn producer_id(&self) -> (i64, i16) {
        self.producer.producer_id()
    }

    /// The exact offset map.
    pub fn map(&self) -> &OffsetMap {
        &self.map
    }

    /// The mirrored topics.
    pub fn topics(&self) -> &[MirroredTopic] {
        &self.topics
    }

    /// What to do when the target lost records the map says it holds.
    fn remap_advice(&self) -> String {
        format!(
            "The partition is not mirrored, rather than written at offsets the map gives to \
             other records; the others go on. To mirror again what is missing, delete the map \
             topic {} on the target and restart strait: it rebuilds the map from what the \
             remote topics hold (records it can match against the source are not written \
             again) and copies the rest",
            MapStore::topic_name(self.config.source_alias.as_str())
        )
    }

    /// Runs rounds until `stop` resolves, then flushes the map.
    pub async fn run(
        &mut self,
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<(), FlowError> {
        // Checked between rounds, never in the middle of one, so a stop never abandons a
        // produce whose offsets are not yet in the map.
        tokio::pin!(stop);
        let mut backoff = strait_kafka::backoff::Backoff::new(
            Duration::from_millis(200),
            Duration::from_secs(10),
        );
        while futures::FutureExt::now_or_never(&mut stop).is_none() {
            tokio::select! {
                biased;
                () = &mut stop => break,
                () = self.while_lease_lapsed() => {}
            }
            self.resilient_round(&mut backoff).await?;
        }
        self.persist_map().await?;
        self.flush_offset_syncs(true).await?;
        Ok(())
    }

    /// Mirrors until every partition has reached the source end it had when this was called.
    pub async fn run_until_caught_up(&mut self) -> Result<(), FlowError> {
        self.run_until_caught_up_unless(std::future::pending())
            .await
            .map(|_| ())
    }

    /// [`run_until_caught_up`](Self::run_until_caught_up), unless `stop` resolves first:
    /// checked between rounds, never in the middle of one, and the map is written for what was
    /// copied either way. `Ok(true)` when caught up, `Ok(false)` when stopped before.
    pub async fn run_until_caught_up_unless(
        &mut self,
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<bool, FlowError> {
        tokio::pin!(stop);
        let mut backoff = strait_kafka::backoff::Backoff::new(
            Duration::from_millis(200),
            Duration::from_secs(10),
        );
        // A partition whose source topic is deleted has no end to reach.
        let asked: Vec<(TopicPartition, OffsetSpec)> = self
            .partitions
            .iter()
            .filter(|(_, p)| !p.gone)
            .map(|(tp, _)| (tp.clone(), OffsetSpec::Latest))
            .collect();
        let mut ends = BTreeMap::new();
        for (tp, end) in self
            .source
            .list_offsets(&asked, self.config.isolation_level)
            .await?
        {
            ends.insert(tp, end?.offset);
        }
        loop {
            // A partition forgotten meanwhile (its source topic deleted) is done.
            let done = ends.iter().all(|(tp, end)| {
                self.partitions
                    .get(tp)
                    .is_none_or(|p| p.position >= *end || p.stopped())
            });
            if done {
                break;
            }
            let stopped = tokio::select! {
                biased;
                () = &mut stop => true,
                () = self.while_lease_lapsed() => false,
            };
            if stopped {
                self.persist_map().await?;
                self.flush_offset_syncs(true).await?;
                return Ok(false);
            }
            self.resilient_round(&mut backoff).await?;
        }
        self.persist_map().await?;
        self.flush_offset_syncs(true).await?;
        Ok(true)
    }

    /// While the lease this flow writes under has lapsed without being revoked, the flow
    /// neither fetches nor writes: its worker waits in a rebalance that a slow member holds up
    /// (the coordinator answers a JoinGroup only when the generation forms, up to the rebalance
    /// timeout, and keeps a member that waits in one), and the answer that ends it renews the
    /// lease. The flow then goes on where it stood: nothing was written meanwhile, so nothing
    /// is placed again. A revoked lease is not waited for: the next write fails for good, and
    /// the unit stops (`strait_kafka::lease`).
    async fn while_lease_lapsed(&self) {
        let Some(lease) = self.options.producer.lease.as_ref() else {
            return;
        };
        if lease.is_valid() || lease.is_revoked() {
            return;
        }
        let flow = self.config.name();
        tracing::info!(flow = %flow,
            "paused: the worker's lease on these partitions lapsed while it waits for the \
             workers' group to answer (a rebalance); resuming when it answers");
        lease.held().await;
        if lease.is_valid() {
            tracing::info!(flow = %flow, "resumed: the workers' group answered and the lease holds again");
        }
    }

    /// A round that survives what time can fix: an unreachable cluster or a broker restart
    /// stalls the flow (logged, retried with backoff) instead of stopping it. Nothing is lost:
    /// the next round starts again from the offset map.
    async fn resilient_round(
        &mut self,
        backoff: &mut strait_kafka::backoff::Backoff,
    ) -> Result<Option<RoundStats>, FlowError> {
        let result = async {
            if self.needs_reset {
                self.reset_after_failure().await?;
                self.needs_reset = false;
                self.events.tell_flow(FlowEvent::ProducerReestablished);
            }
            self.round().await
        }
        .await;
        match result {
            Ok(stats) if stats.placed_again => {
                // A write failed and the partitions were placed again: the backoff runs on
                // until a round writes without failing.
                self.events.tell_flow(FlowEvent::RoundDone);
                tokio::time::sleep(backoff.next_wait()).await;
                Ok(Some(stats))
            }
            Ok(stats) => {
                self.events.tell_flow(FlowEvent::RoundDone);
                *backoff = strait_kafka::backoff::Backoff::new(
                    Duration::from_millis(200),
                    Duration::from_secs(10),
                );
                Ok(Some(stats))
            }
            Err(e) if e.is_retriable() => {
                let wait = backoff.next_wait();
                self.events.tell_flow(FlowEvent::Stalled {
                    error: &e,
                    retry_in: wait,
                });
                self.needs_reset = true;
                tokio::time::sleep(wait).await;
                Ok(None)
            }
            Err(e) => {
                self.events.tell_flow(FlowEvent::Failed(&e));
                Err(e)
            }
        }
    }

    /// Writes MM2 offset syncs: those that fired now, and every `offset.flush.interval.ms`
    /// (60 s) or when `all`, the held-back ones too (KAFKA-15906).
    async fn flush_offset_syncs(&mut self, all: bool) -> Result<(), FlowError> {
        let Some(w) = &mut self.offset_syncs else {
            return Ok(());
        };
        let delayed = all || Instant::now() >= self.next_delayed_syncs;
        // At the end of a run, everything is written and waited for; in a round, the write
        // goes on beside the data (the topic is on the source by default, a round trip away).
        let started = if all {
            w.flush(true).await.map(|_| true)
        } else {
            w.start_flush(delayed).await
        };
        let started = match started {
            Ok(started) => started,
            // A newer owner of the unit initialised the syncs' transactional id.
            Err(crate::internal::InternalError::Kafka(e)) if e.is_fenced() => {
                return Err(FlowError::Fenced {
                    transactional_id: w.transactional_id().unwrap_or_default().to_owned(),
                    source: e,
                })
            }
            Err(e) => return Err(FlowError::internal("offset syncs")(e)),
        };
        if delayed && started {
            self.next_delayed_syncs = Instant::now() + DELAYED_SYNC_INTERVAL;
        }
        Ok(())
    }

    /// A write of `tp` from source offset `from` landed at target offset `base`, below `end`
    /// where the map says the records mirrored so far end: the target lost `base..end` (an
    /// unclean leader election, the remote topic deleted and created again). Returns why, for
    /// halting the partition: translations into the lost range are wrong, and writing on would
    /// put records where the map gives others.
    fn target_truncated(&self, tp: &TopicPartition, from: i64, base: i64, end: i64) -> String {
        let remote = self
            .partitions
            .get(tp)
            .map_or_else(|| tp.to_string(), |p| p.remote.to_string());
        let what = format!(
            "{remote} on the target lost records it had acknowledged: the write of source \
             offset {from} onwards landed at target offset {base}, but the offset map says the \
             records mirrored so far end at target offset {end}, so target records {base}..{end} \
             ({} records) are gone or were replaced (an unclean leader election on the target, \
             or the remote topic deleted and created again)",
            end - base
        );
        tracing::error!(
            flow = %self.config.name(),
            partition = %tp,
            remote = %remote,
            target_offset = base,
            mapped_end = end,
            target_records_gone = end - base,
            "{what}"
        );
        format!("{what}. {}", self.remap_advice())
    }
}

/// Records `from..to` of `sp` as lost in the map (the caller tells [`Event::Lost`]).
fn record_loss(
    map: &mut OffsetMap,
    store: &mut MapStore,
    sp: &SourcePartition,
    from: i64,
    to: i64,
) -> Result<u64, FlowError> {
    let range = map.record_lost(sp, from, to).map_err(FlowError::map(sp))?;
    store.note(sp, MapEntry::Lost(range));
    Ok((to - from) as u64)
}
