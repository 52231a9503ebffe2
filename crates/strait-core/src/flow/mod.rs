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
//! Layout: `mod.rs` holds the flow, its life (start, run, stall and resume) and its partition
//! states (halted, refused); `round.rs` one round, stage by stage; `decide.rs` what a round
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
mod recover;
mod round;
pub mod topics;

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
use recover::Placement;
use topics::MirroredTopic;

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

#[derive(Debug)]
struct PartitionState {
    remote: TopicPartition,
    /// The next source offset to mirror.
    position: i64,
    /// The source's high watermark (or last stable offset) at the last fetch.
    source_end: i64,
    /// Where its events are counted (`/metrics`, `/v1/status`).
    metrics: PartitionMetrics,
    /// Set while it waits: the target refuses its batches for good, or it could not be placed.
    waiting: Option<Waiting>,
    /// Set when the partition no longer matches its offset map, with why: it is not mirrored
    /// until strait is restarted after someone acted.
    halted: Option<String>,
    /// The largest batch it has sent us, in bytes (doubled while a fetch with room brings it
    /// nothing): a fetch that shares its bytes asks at least twice that of it (`round.rs`,
    /// `partition_ask`).
    largest_batch: Option<i32>,
    /// Set while its source topic is deleted and the flow keeps its remote topic
    /// (`strait.sync.topic.deletions.enabled` off): it is not fetched. Cleared if the topic
    /// comes back; the topic id check halts it first if the topic was made anew.
    gone: bool,
}

impl PartitionState {
    /// Whether the next fetch leaves it out for good (until someone acts or its topic is back):
    /// halted, or its source topic deleted.
    fn stopped(&self) -> bool {
        self.halted.is_some() || self.gone
    }

    /// Whether the next fetch leaves it out for now: it waits, and is not being tried again.
    fn waits(&self) -> bool {
        self.waiting.as_ref().is_some_and(|w| !w.retrying)
    }

    /// Whether it waits to be placed ([`WaitCause::Unplaced`]).
    fn waits_unplaced(&self) -> bool {
        self.waiting
            .as_ref()
            .is_some_and(|w| w.cause == WaitCause::Unplaced)
    }

    /// Makes it wait for `cause` (waiting longer if it already waited for it), resuming at
    /// `resume` if it has no map. Returns the wait.
    fn wait(&mut self, cause: WaitCause, resume: Option<i64>) -> Duration {
        let waiting = match &mut self.waiting {
            Some(w) if w.cause == cause => w,
            other => other.insert(Waiting {
                cause,
                resume,
                retry_at: Instant::now(),
                retrying: false,
                backoff: cause.backoff(),
            }),
        };
        let wait = waiting.backoff.next_wait();
        waiting.resume = resume;
        waiting.retrying = false;
        waiting.retry_at = Instant::now() + wait;
        wait
    }
}

/// A partition that waits ([`WaitCause`]): it is left out of fetches until `retry_at`, then
/// placed again from its map (and for a refused one, tried once more), with a growing wait.
/// The other partitions go on meanwhile.
#[derive(Debug)]
struct Waiting {
    /// Why it waits.
    cause: WaitCause,
    /// Where it resumes if it has no map: the first source offset of a refused write, or where
    /// an unplaced partition stood (`None`: never placed, it starts where a new one does).
    resume: Option<i64>,
    /// When to try again.
    retry_at: Instant,
    /// Whether a refused partition has been placed again for the try at `retry_at` (and is
    /// fetched): it stops waiting when the target takes its batches.
    retrying: bool,
    /// The waits between tries ([`WaitCause::backoff`]).
    backoff: strait_kafka::backoff::Backoff,
}

/// Why a partition waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WaitCause {
    /// The target refuses its batches for good (MESSAGE_TOO_LARGE, INVALID_RECORD,
    /// POLICY_VIOLATION, TOPIC_AUTHORIZATION_FAILED ...).
    Refused,
    /// It could not be placed: its offsets could not be listed or its tail matched for a
    /// reason time can fix (its leader offline on either cluster, its topic being deleted or
    /// created; `recover::Placement::Waiting`).
    Unplaced,
}

impl WaitCause {
    /// The first wait and the longest: a refusal needs someone to act on the target; an
    /// offline partition comes back by itself and is noticed within half a minute.
    fn waits(self) -> (Duration, Duration) {
        match self {
            WaitCause::Refused => (Duration::from_secs(1), Duration::from_secs(300)),
            WaitCause::Unplaced => (Duration::from_secs(1), Duration::from_secs(30)),
        }
    }

    fn backoff(self) -> strait_kafka::backoff::Backoff {
        let (first, longest) = self.waits();
        strait_kafka::backoff::Backoff::new(first, longest)
    }
}

/// How soon a remote topic the target refused to create is tried again, when the topic
/// refresh (`refresh.topics.interval.seconds`) comes later.
const REFUSED_TOPIC_RETRY: Duration = Duration::from_secs(30);

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

    /// Whether the flow writes through a transactional producer (a unit of a worker,
    /// `docs/design.md` §7.3): data and map records go in one transaction, committed by
    /// [`Flow::commit`].
    fn transactional(&self) -> bool {
        self.options.producer.transactional_id.is_some()
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

    /// A transactional flow's commit: the map's changes go into the open transaction beside
    /// the data it records, the transaction is committed, and the map published. So the map
    /// never points at data that was aborted, and a fenced owner commits neither.
    /// Tells what was recorded of `tp` this round: now, or in a transactional flow once the
    /// round commits (an aborted round wrote nothing a reader sees, and its batches are
    /// fetched and counted again when the round is made again).
    pub(super) fn tell_recorded(&mut self, tp: &TopicPartition, recorded: Recorded) {
        if self.transactional() {
            self.uncommitted_told.push((tp.clone(), recorded));
            return;
        }
        self.tell_now(tp, &recorded);
    }

    fn tell_now(&mut self, tp: &TopicPartition, recorded: &Recorded) {
        let Some(state) = self.partitions.get(tp) else {
            return;
        };
        let event = match *recorded {
            Recorded::Written {
                records,
                bytes,
                max_timestamp,
            } => Event::Written {
                records,
                bytes,
                max_timestamp,
            },
            Recorded::Forwarded => Event::Forwarded,
            Recorded::Rebuilt {
                source_base,
                ref runs,
                holes,
            } => Event::Rebuilt {
                source_base,
                runs,
                holes,
            },
            Recorded::Skipped(reason) => Event::Skipped(reason),
            Recorded::Merged => Event::Merged,
            Recorded::Split => Event::Split,
        };
        self.events.tell(tp, &state.metrics, event);
    }

    async fn commit(&mut self) -> Result<(), FlowError> {
        self.compact_map().await;
        let taken = self
            .store
            .take_write(&self.map)
            .map_err(FlowError::internal("offset map"))?;
        let mut result = Ok(());
        let write = match taken {
            Some((write, batches)) => {
                let tp = TopicPartition::new(self.store.topic(), 0);
                let sends = batches.into_iter().map(|b| (tp.clone(), b)).collect();
                if let Some(e) = self
                    .producer
                    .send_all(sends)
                    .await
                    .into_iter()
                    .find_map(Result::err)
                {
                    result = Err(e);
                }
                Some(write)
            }
            None => None,
        };
        if result.is_ok() {
            result = self.producer.commit().await;
        }
        // A failure puts the notes back (unless newer ones replaced them); the error is the
        // producer's, returned below.
        let published = write.and_then(|write| {
            let outcome = result
                .clone()
                .map_err(crate::internal::InternalError::Kafka);
            self.store.taken_written(write, outcome).ok().flatten()
        });
        result.map_err(|e| self.transaction_error(e))?;
        self.publish(published);
        for (tp, recorded) in std::mem::take(&mut self.uncommitted_told) {
            self.tell_now(&tp, &recorded);
        }
        let committed = std::mem::take(&mut self.uncommitted_syncs);
        if let Some(w) = &mut self.offset_syncs {
            for (topic, partition, runs) in committed {
                w.on_batch(&topic, partition, &runs);
            }
        }
        Ok(())
    }

    /// A new epoch of the producer, so that its sequences start afresh. A transactional one is
    /// initialised again with its current epoch, which aborts what is open and, if another
    /// owner initialised the id since, is refused: [`FlowError::Fenced`]. Never initialised
    /// without it, which would fence that owner in turn.
    async fn new_epoch(&mut self) -> Result<(), FlowError> {
        let bumped = self.producer.bump_epoch().await;
        match bumped {
            Err(e) if self.transactional() => Err(self.transaction_error(e)),
            other => Ok(other?),
        }
    }

    /// A transactional producer's failure as the flow's: PRODUCER_FENCED is final
    /// ([`FlowError::Fenced`]); the rest is mended by a new epoch ([`FlowError::Transaction`]).
    fn transaction_error(&self, e: strait_kafka::Error) -> FlowError {
        let transactional_id = self
            .options
            .producer
            .transactional_id
            .clone()
            .unwrap_or_default();
        if e.code() == Some(kafka_protocol::error::ResponseError::ProducerFenced) {
            FlowError::Fenced {
                transactional_id,
                source: e,
            }
        } else {
            FlowError::Transaction {
                transactional_id,
                source: e,
            }
        }
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

    /// Finds new source topics and partitions, makes their remote topics, and places new
    /// partitions; notices source topics deleted ([`Flow::sync_deletions`]).
    pub async fn refresh_topics(&mut self) -> Result<(), FlowError> {
        let found = topics::discover_all(&self.source, &self.config).await?;
        let topics = found.mirrored;
        self.check_topic_ids(topics.iter().map(|t| (t.source.as_str(), t.id)));
        let ids: BTreeMap<&str, [u8; 16]> =
            topics.iter().map(|t| (t.source.as_str(), t.id)).collect();
        self.sync_deletions(&found.present, &ids).await?;
        let remote =
            topics::ensure_remote_topics(&self.source, &self.target, &self.config, &topics).await?;
        self.tell_refused_topics(&remote.refused);
        let remote_counts = remote.counts;
        let mut new = Vec::new();
        for t in &topics {
            let usable = remote_counts
                .get(&t.remote)
                .copied()
                .unwrap_or(0)
                .min(t.partitions);
            for p in 0..usable {
                let tp = TopicPartition::new(&t.source, p);
                if self.mirrors(&tp) && !self.partitions.contains_key(&tp) {
                    new.push((tp, TopicPartition::new(&t.remote, p), None));
                }
            }
        }
        for (tp, remote, placed) in self.place_all(new, recover::PLACEMENT_PATIENCE).await? {
            let position = match placed {
                Placement::At(position) => position,
                _ => self
                    .map
                    .partition(&source_partition(&tp))
                    .and_then(|m| m.src_end())
                    .unwrap_or(0),
            };
            let metrics = self.events.metrics().partition(&tp, &remote);
            metrics.placed(position);
            self.partitions.insert(
                tp.clone(),
                PartitionState {
                    remote,
                    position,
                    source_end: position,
                    metrics,
                    waiting: None,
                    halted: None,
                    largest_batch: None,
                    gone: false,
                },
            );
            match placed {
                Placement::At(_) => {}
                Placement::Diverged(why) => self.halt(&tp, why),
                Placement::Waiting(e) => self.unplaced(&tp, None, &e),
            }
        }
        self.topics = topics;
        let mut every = self
            .config
            .refresh_topics
            .unwrap_or(Duration::from_secs(u64::from(u32::MAX)));
        if !self.refused_topics.is_empty() {
            // A refused remote topic is tried again sooner than the next refresh would.
            every = every.min(REFUSED_TOPIC_RETRY);
        }
        self.next_refresh = Instant::now() + every;
        Ok(())
    }

    /// Says which remote topics the target refuses to create (at warn when one is first
    /// refused or refused otherwise, at debug when again the same) and which it took at last.
    fn tell_refused_topics(&mut self, refused: &BTreeMap<String, strait_kafka::Error>) {
        let flow = self.config.name();
        for (topic, e) in refused {
            let why = e.to_string();
            if self.refused_topics.get(topic) == Some(&why) {
                tracing::debug!(flow = %flow, remote_topic = %topic, error = %why,
                    "the target still refuses to create this remote topic");
                continue;
            }
            tracing::warn!(flow = %flow, remote_topic = %topic, error = %why,
                "the target refuses to create this remote topic (a create-topic policy, an ACL \
                 that does not cover the name, a name it does not accept): its source topic is \
                 not mirrored and is tried again in {} s; the other topics go on",
                REFUSED_TOPIC_RETRY.as_secs());
            self.refused_topics.insert(topic.clone(), why);
        }
        let taken: Vec<String> = self
            .refused_topics
            .keys()
            .filter(|t| !refused.contains_key(*t))
            .cloned()
            .collect();
        for topic in taken {
            self.refused_topics.remove(&topic);
            tracing::info!(flow = %flow, remote_topic = %topic,
                "the target no longer refuses this remote topic (or its source topic is gone)");
        }
    }

    /// Source topics this flow mirrored that the source no longer has, at this refresh and the
    /// one before (`topics::confirm_deleted`; a topic the filter no longer matches is not
    /// deleted). With `strait.sync.topic.deletions.enabled`, each one's remote topic is deleted
    /// on the target and its partitions forgotten ([`Flow::delete_remote`]); without, its
    /// partitions stop and its remote topic stays, as MM2 does. A kept topic that is on the
    /// source again is fetched again, unless the topic id check halted it (made anew).
    async fn sync_deletions(
        &mut self,
        present: &BTreeSet<String>,
        ids: &BTreeMap<&str, [u8; 16]>,
    ) -> Result<(), FlowError> {
        self.forget_deleted_remotes().await?;
        self.take_back(present, ids);
        let mirrored: BTreeSet<String> = self
            .partitions
            .keys()
            .map(|tp| tp.topic.clone())
            .chain(self.topics.iter().map(|t| t.source.clone()))
            .collect();
        let deleted = topics::confirm_deleted(&mirrored, present, &mut self.absent_topics);
        for topic in deleted {
            if self.kept_gone.contains(&topic) || self.source_topic_deleted(&topic).await? {
                continue;
            }
            self.kept_gone.insert(topic.clone());
            self.set_gone(&topic, true);
        }
        Ok(())
    }

    /// Source topics kept as deleted that the source lists again (`present`, with their ids):
    /// fetched again, unless made anew while their remote topic waits to be deleted by unit 0.
    fn take_back(&mut self, present: &BTreeSet<String>, ids: &BTreeMap<&str, [u8; 16]>) {
        let back: Vec<String> = self
            .kept_gone
            .iter()
            .filter(|t| present.contains(*t))
            .cloned()
            .collect();
        for topic in back {
            if self.awaiting_remote.contains_key(&topic) {
                if ids.get(topic.as_str()) != self.topic_ids.get(&topic) {
                    // Made anew: it waits for unit 0 to delete the remote topic, then is
                    // mirrored afresh.
                    continue;
                }
                // The same topic: it was never deleted.
                self.awaiting_remote.remove(&topic);
            }
            self.kept_gone.remove(&topic);
            self.set_gone(&topic, false);
            tracing::info!(
                flow = %self.config.name(),
                source_topic = %topic,
                "source topic is on the source again; its partitions are fetched again unless \
                 it was made anew (then they are halted)"
            );
        }
    }

    /// Marks the partitions of source topic `topic` deleted on the source (not fetched), or no
    /// longer.
    fn set_gone(&mut self, topic: &str, gone: bool) {
        for (_, p) in self
            .partitions
            .iter_mut()
            .filter(|(tp, _)| tp.topic == topic)
        {
            p.gone = gone;
        }
    }

    /// What source topic `topic`, confirmed deleted from listings, does to its remote topic
    /// ([`Flow::sync_deletions`]). Returns whether its partitions are forgotten (its remote topic
    /// is gone); if not, they stop and are kept.
    async fn source_topic_deleted(&mut self, topic: &str) -> Result<bool, FlowError> {
        let remote = self
            .partitions
            .iter()
            .find(|(tp, _)| tp.topic == topic)
            .map_or_else(
                || self.config.remote_topic(topic),
                |(_, p)| p.remote.topic.clone(),
            );
        let flow = self.config.name();
        if !self.config.sync_topic_deletions {
            tracing::info!(%flow, source_topic = %topic, remote_topic = %remote,
                "source topic deleted; its partitions stop and its remote topic is kept, as MM2 \
                 does (strait.sync.topic.deletions.enabled is false)");
            return Ok(false);
        }
        // Missing from the listing twice; before anything is deleted, the source must say the
        // topic is unknown when asked by name. A topic this principal may no longer describe (an
        // ACL taken away) is missing from listings too, and its remote topic is the copy to keep.
        let unknown = self.source.unknown_topics(&[topic]).await?;
        if !unknown.contains(topic) {
            tracing::warn!(%flow, source_topic = %topic, remote_topic = %remote,
                "source topic is missing from the source's topic list, but the source does not \
                 answer that it is unknown (no Describe permission on it?); its remote topic is \
                 kept and its partitions stop");
            return Ok(false);
        }
        if self.leads() {
            return match topics::deletable_remote(&self.config, topic, &remote) {
                Ok(()) => self.delete_remote(topic, &remote).await,
                Err(why) => {
                    tracing::warn!(%flow, source_topic = %topic, remote_topic = %remote,
                        "source topic deleted; its remote topic is kept: {why}");
                    Ok(false)
                }
            };
        }
        tracing::info!(%flow, source_topic = %topic, remote_topic = %remote,
            "source topic deleted; this unit's partitions of it stop, and unit 0 of the flow \
             deletes its remote topic (strait.sync.topic.deletions.enabled); once it is gone \
             this unit forgets them, and a topic made again under the name is mirrored afresh");
        let metadata = self.target.refresh_metadata().await?;
        let Some(id) = metadata.topics.get(&remote).map(|t| t.id) else {
            // Unit 0 was quicker: the remote topic is gone already.
            self.forget_topic(topic, false).await?;
            return Ok(true);
        };
        self.awaiting_remote.insert(topic.to_owned(), (remote, id));
        Ok(false)
    }

    /// Deletes `remote` on the target, the remote topic of `source`, deleted on the source, then
    /// forgets `source`'s partitions: out of the offset map (tombstones written and waited
    /// for), the topic id check, the offset syncs; so a topic made again under the name is
    /// mirrored afresh, from the start `consumer.auto.offset.reset` gives. The remote topic
    /// goes first: a crash in between leaves the map naming records the target no longer has,
    /// which a restart halts on with what to do, rather than a map without the remote topic's
    /// old records, which a new topic's records would be written after. `false` when the
    /// target refuses the deletion for good (logged; the caller keeps the topic); an error
    /// time can fix stalls the flow, and the next refresh tries again.
    async fn delete_remote(&mut self, source: &str, remote: &str) -> Result<bool, FlowError> {
        let flow = self.config.name();
        let refused = |e: &strait_kafka::Error| {
            tracing::error!(
                flow = %flow,
                source_topic = %source,
                remote_topic = %remote,
                error = %e,
                "source topic deleted; cannot delete its remote topic, which is kept and its \
                 partitions stop (strait.sync.topic.deletions.enabled)"
            );
        };
        let answer = match self.target.delete_topics(&[remote]).await {
            Ok(answer) => answer,
            Err(e) if e.is_retriable() => return Err(e.into()),
            Err(e) => {
                refused(&e);
                return Ok(false);
            }
        };
        let mut already_gone = false;
        for (_, result) in answer {
            match result {
                Ok(()) => {}
                Err(e)
                    if e.code()
                        == Some(kafka_protocol::error::ResponseError::UnknownTopicOrPartition) =>
                {
                    already_gone = true;
                }
                Err(e) if e.is_retriable() => return Err(e.into()),
                Err(e) => {
                    refused(&e);
                    return Ok(false);
                }
            }
        }
        let parts = self.forget_topic(source, true).await?;
        self.events.tell_flow(FlowEvent::RemoteTopicDeleted {
            source_topic: source,
            remote_topic: remote,
            partitions: parts.len(),
            already_gone,
        });
        Ok(true)
    }

    /// Forgets source topic `source`: its partitions, its offset map entries, its id, its
    /// offset syncs, so that a topic made again under the name is new to the flow. The map's
    /// entries are removed on the map topic too (tombstones, waited for) for this flow's own
    /// partitions, and for every partition of the topic if `all` (unit 0, or a flow without
    /// units, right after it deleted the remote topic); a unit but unit 0 leaves the others'
    /// entries alone, since by now unit 0 may be writing a new topic's entries under them.
    /// Returns the partitions forgotten.
    async fn forget_topic(
        &mut self,
        source: &str,
        all: bool,
    ) -> Result<Vec<TopicPartition>, FlowError> {
        let parts: Vec<TopicPartition> = self
            .partitions
            .keys()
            .filter(|tp| tp.topic == source)
            .cloned()
            .collect();
        for tp in &parts {
            self.partitions.remove(tp);
            self.orphan_ends.remove(tp);
            self.events.metrics().forget_partition(tp);
        }
        let mapped: Vec<SourcePartition> = self
            .map
            .iter()
            .map(|(sp, _)| sp)
            .filter(|sp| sp.topic == source)
            .cloned()
            .collect();
        for sp in mapped {
            let old = self.map.remove(&sp);
            if all || self.mirrors(&TopicPartition::new(&sp.topic, sp.partition)) {
                self.store.note_partition_removed(&sp, old.as_ref());
            }
        }
        self.topic_ids.remove(source);
        self.absent_topics.remove(source);
        self.kept_gone.remove(source);
        self.prefetched = None;
        if let Some(w) = &mut self.offset_syncs {
            w.forget_topic(source);
        }
        self.persist_map().await?;
        Ok(parts)
    }

    /// In a unit but unit 0: forgets its partitions of each source topic whose deletion it saw,
    /// once unit 0 has deleted the remote topic (gone from the target, or made again under
    /// another id): see `awaiting_remote`.
    async fn forget_deleted_remotes(&mut self) -> Result<(), FlowError> {
        if self.awaiting_remote.is_empty() {
            return Ok(());
        }
        let metadata = self.target.refresh_metadata().await?;
        let done: Vec<String> = self
            .awaiting_remote
            .iter()
            .filter(|(_, (remote, id))| metadata.topics.get(remote).is_none_or(|t| t.id != *id))
            .map(|(source, _)| source.clone())
            .collect();
        for source in done {
            let Some((remote, _)) = self.awaiting_remote.remove(&source) else {
                continue;
            };
            let parts = self.forget_topic(&source, false).await?;
            tracing::info!(
                flow = %self.config.name(),
                source_topic = %source,
                remote_topic = %remote,
                partitions = parts.len(),
                "unit 0 deleted the remote topic of a deleted source topic; this unit forgot its \
                 partitions of it, and mirrors a topic made again under the name afresh"
            );
        }
        Ok(())
    }

    /// Compares the source topics' ids (from the source's metadata, zero where the broker gives
    /// none) with those seen before: a topic whose id changed was deleted and created again,
    /// and its partitions are halted, since its offsets start over below what the map records.
    fn check_topic_ids<'a>(&mut self, ids: impl Iterator<Item = (&'a str, [u8; 16])>) {
        let mut recreated = Vec::new();
        for (topic, id) in ids {
            // A topic waiting for unit 0 to delete its remote topic is checked when it is back
            // (`sync_deletions`): made anew, it is mirrored afresh once the remote topic is gone.
            if id == [0; 16] || self.awaiting_remote.contains_key(topic) {
                continue;
            }
            match self.topic_ids.insert(topic.to_owned(), id) {
                Some(before) if before != id => recreated.push((topic.to_owned(), before, id)),
                _ => {}
            }
        }
        for (topic, before, now) in recreated {
            let parts: Vec<TopicPartition> = self
                .partitions
                .keys()
                .filter(|tp| tp.topic == topic)
                .cloned()
                .collect();
            for tp in parts {
                let why = format!(
                    "source topic {topic} was deleted and created again (its topic id was {}, \
                     now {}): its offsets start over, and the offset map of the old topic \
                     cannot describe its records. {}",
                    topic_id(&before),
                    topic_id(&now),
                    self.diverged_advice()
                );
                self.halt(&tp, why);
            }
        }
    }

    /// What to do about a partition that no longer matches its map.
    fn diverged_advice(&self) -> String {
        format!(
            "The partition is not mirrored until someone acts; the others go on. To mirror it \
             as the source is now, delete the map topic {} on the target and restart strait: \
             it lines each remote topic up with its source again by matching records (what \
             matches is not copied again), keeps the target's copies of records the source no \
             longer has, and copies the source's records after them",
            MapStore::topic_name(self.config.source_alias.as_str())
        )
    }

    /// Stops mirroring `tp` until restart: logged at error once, shown as blocked with why.
    fn halt(&mut self, tp: &TopicPartition, why: String) {
        let Some(state) = self.partitions.get_mut(tp) else {
            return;
        };
        if state.halted.is_some() {
            return;
        }
        let remote = &state.remote;
        self.events
            .tell(tp, &state.metrics, Event::Halted { remote, why: &why });
        state.waiting = None;
        state.halted = Some(why);
    }

    /// The partitions halted because they no longer match their offset map, with why.
    pub fn halted(&self) -> Vec<(TopicPartition, String)> {
        self.partitions
            .iter()
            .filter_map(|(tp, p)| Some((tp.clone(), p.halted.clone()?)))
            .collect()
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

    /// The target refused the write of `tp` from source offset `from` for good: the partition
    /// goes back to `from` and waits (logged at error the first time, at debug after), the
    /// others go on.
    fn refuse(&mut self, tp: &TopicPartition, from: i64, e: &strait_kafka::Error) {
        let Some(state) = self.partitions.get_mut(tp) else {
            return;
        };
        state.position = from;
        let first = state
            .waiting
            .as_ref()
            .is_none_or(|w| w.cause != WaitCause::Refused);
        let wait = state.wait(WaitCause::Refused, Some(from));
        let why = format!(
            "the target refuses the batch from source offset {from} for good ({e}); the \
             partition waits and is tried again in {:.1} s, then less and less often (at most \
             every {} s); the other partitions go on. Fix it on the target: the remote topic's \
             max.message.bytes (or the broker's message.max.bytes), its policies or its ACLs",
            wait.as_secs_f64(),
            WaitCause::Refused.waits().1.as_secs()
        );
        self.events.tell(
            tp,
            &state.metrics,
            Event::Refused {
                remote: &state.remote,
                offset: from,
                error: e,
                why: &why,
                first,
            },
        );
    }

    /// The partition `tp` could not be placed (`e`): it waits and is placed again alone later
    /// (logged at warn the first time, at debug after; shown as blocked with why), the others go
    /// on. `resume`: where it stood, if it has no map.
    fn unplaced(&mut self, tp: &TopicPartition, resume: Option<i64>, e: &strait_kafka::Error) {
        let Some(state) = self.partitions.get_mut(tp) else {
            return;
        };
        let first = state
            .waiting
            .as_ref()
            .is_none_or(|w| w.cause != WaitCause::Unplaced);
        let wait = state.wait(WaitCause::Unplaced, resume);
        let why = format!(
            "cannot place this partition now ({e}); it waits and is tried again in {:.1} s (at \
             most every {} s), and the other partitions go on",
            wait.as_secs_f64(),
            WaitCause::Unplaced.waits().1.as_secs()
        );
        self.events.tell(
            tp,
            &state.metrics,
            Event::Unplaced {
                remote: &state.remote,
                error: e,
                why: &why,
                first,
            },
        );
    }

    /// Places again, from their maps, the waiting partitions whose wait is over: a refused one
    /// is fetched and written once more, an unplaced one goes back to work. One that still
    /// cannot be placed waits longer.
    async fn place_waiting(&mut self) -> Result<(), FlowError> {
        let now = Instant::now();
        let due: Vec<(TopicPartition, TopicPartition, Option<i64>)> = self
            .partitions
            .iter()
            .filter_map(|(tp, p)| {
                let w = p.waiting.as_ref()?;
                (!w.retrying && w.retry_at <= now).then(|| (tp.clone(), p.remote.clone(), w.resume))
            })
            .collect();
        if due.is_empty() {
            return Ok(());
        }
        // A later batch of a refused write may have landed (a partition the producer had never
        // written to accepts any sequence): matching the target's tail finds it.
        for (tp, _, placed) in self.place_all(due, Duration::ZERO).await? {
            let Some(p) = self.partitions.get_mut(&tp) else {
                continue;
            };
            let Some(cause) = p.waiting.as_ref().map(|w| w.cause) else {
                continue;
            };
            match placed {
                Placement::At(position) => {
                    p.position = position;
                    p.metrics.placed(position);
                    match cause {
                        WaitCause::Refused => {
                            if let Some(w) = &mut p.waiting {
                                w.retrying = true;
                            }
                        }
                        WaitCause::Unplaced => {
                            p.waiting = None;
                            self.events
                                .tell(&tp, &p.metrics, Event::Placed { position });
                        }
                    }
                }
                Placement::Diverged(why) => self.halt(&tp, why),
                Placement::Waiting(e) => {
                    let resume = p.waiting.as_ref().and_then(|w| w.resume);
                    match cause {
                        WaitCause::Refused => {
                            p.wait(WaitCause::Refused, resume);
                            tracing::debug!(flow = %self.config.name(), partition = %tp, error = %e,
                                "a refused partition cannot be placed again now; it waits longer");
                        }
                        WaitCause::Unplaced => self.unplaced(&tp, resume, &e),
                    }
                }
            }
        }
        Ok(())
    }
}

/// A topic id as Kafka prints it (`kafka-topics.sh --describe`): its 16 bytes in URL-safe
/// base64 without padding.
fn topic_id(id: &[u8; 16]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id)
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

/// Fences the transactional ids of units of another `tasks.max` (`<group id>-<index>` with an
/// index this count does not have) that still hold a transaction open: a worker of the earlier
/// count killed mid-round, or one stopped and about to go on. Its transaction is aborted, and a
/// late commit of it refused, before this unit writes the same partitions (KIP-618 fences the
/// tasks of an earlier count the same way). Ids whose index this count has are fenced by their
/// own unit's start. A broker that refuses the listing (older than Kafka 3.0) is logged and the
/// unit goes on: such a transaction ends at its timeout.
async fn fence_other_counts(
    target: &Client,
    id: &str,
    unit: crate::scale::UnitFilter,
    config: &strait_kafka::produce::ProducerConfig,
) -> Result<(), FlowError> {
    let Some(group) = id.strip_suffix(&format!("-{}", unit.index)) else {
        return Ok(());
    };
    let prefix = format!("{group}-");
    let stale = |candidate: &str| {
        candidate
            .strip_prefix(&prefix)
            .and_then(|index| index.parse::<u32>().ok())
            .is_some_and(|index| index >= unit.units)
    };
    let ids = match strait_kafka::produce::ongoing_transactions(target, stale).await {
        Ok(ids) => ids,
        Err(e) if e.is_fenced() => return Err(FlowError::Kafka(e)),
        Err(e) => {
            tracing::warn!(transactional_id = %id, error = %e,
                "cannot list the target's transactions to fence units of another tasks.max; \
                 a transaction one of them left open is aborted by its timeout instead");
            return Ok(());
        }
    };
    for stale in ids {
        strait_kafka::produce::fence(target, &stale, config).await?;
        tracing::warn!(transactional_id = %stale, units = unit.units,
            "fenced the transactional id of a unit of another tasks.max: its open transaction \
             is aborted, and its writes refused from now on");
    }
    Ok(())
}
