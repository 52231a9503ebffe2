//! A flow mirrors the topics of one source cluster into one target cluster (`A->B`), batch by
//! batch, and keeps the exact offset map (`docs/design.md` §3–§4).
//!
//! One round: fetch every mirrored partition from where its map ends (read_committed by
//! default), decide per batch (forward, skip, rebuild: `decide.rs`), produce everything to the
//! target through the idempotent raw producer while the next round's fetch is in flight, record
//! each written batch in the map, and flush the map's changes to its topic. A round holds at most
//! the flow's byte budget (`strait.max.bytes.in.flight`: a third fetched, a third the producer's
//! copies, a third the fetch ahead) whatever the partition and leader count, and per partition
//! the order is kept.
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
//! Layout: `mod.rs` holds the flow, its round and its partition states (halted, refused);
//! `decide.rs` what a round does with one partition's fetched bytes (a pure function);
//! `classify.rs` markers and aborted transactions; `recover/` where each partition resumes
//! (`placement.rs`: the survey of both clusters, `tail.rs`: matching records); `compact.rs`
//! bounding the map; `topics.rs` the mirrored topics and their remote topics; `error.rs` the
//! [`FlowError`] they all return. The map's topic and MM2's offset syncs are written through
//! [`crate::internal`], which the flow uses and which does not use the flow.

pub mod classify;
mod compact;
mod decide;
mod error;
mod recover;
pub mod topics;

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use strait_kafka::admin::{IsolationLevel, OffsetSpec};
use strait_kafka::fetch::{FetchOptions, FetchPosition};
use strait_kafka::produce::{ProducerConfig, RawProducer};
use strait_kafka::{Client, TopicPartition};
use strait_wire::offset_map::{MapEntry, OffsetMap, SourcePartition};
use strait_wire::RawBatch;
use tokio::time::Instant;

use crate::config::{FlowConfig, Side};
use crate::internal::map_store::MapStore;
use crate::internal::offset_syncs::{OffsetSyncWriter, DELAYED_SYNC_INTERVAL};
use crate::metrics::{FlowMetrics, PartitionMetrics};
use classify::SkipReason;
use decide::{Decision, Stop, WriteKind};
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
}

/// What one round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoundStats {
    /// Records written.
    pub records: u64,
    /// Whether every partition reached the source end seen by the fetch.
    pub caught_up: bool,
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
    /// Set while the target refuses the partition's batches for good.
    refused: Option<Refused>,
    /// Set when the partition no longer matches its offset map, with why: it is not mirrored
    /// until strait is restarted after someone acted.
    halted: Option<String>,
}

/// A partition whose batches the target refuses for good (MESSAGE_TOO_LARGE, INVALID_RECORD,
/// POLICY_VIOLATION, TOPIC_AUTHORIZATION_FAILED ...): it is left out of fetches until
/// `retry_at`, then placed again from its map and tried once more, with a growing wait. The
/// other partitions go on meanwhile.
#[derive(Debug)]
struct Refused {
    /// The first source offset of the refused write: where the partition resumes.
    resume: i64,
    /// When to try again.
    retry_at: Instant,
    /// Whether it has been placed again for the try at `retry_at`.
    retrying: bool,
    /// The waits between tries: 1 s doubling up to 5 minutes.
    backoff: strait_kafka::backoff::Backoff,
}

/// The first wait after a refusal, and the longest.
const REFUSED_BACKOFF: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(300));

/// A planned change to a partition's map, applied after the round's writes are acknowledged.
#[derive(Debug)]
enum Step {
    /// Source offsets `from..to` not mirrored (markers, aborted transactions).
    Skip { from: i64, to: i64 },
    /// `sends[send]` carries the source runs `(offset, count)`, in order.
    Write { send: usize, runs: Vec<(i64, i64)> },
}

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
    /// Whether a fetch of few partitions asks each for more than `partition_max_bytes`: the
    /// fetch's share of the budget split among them. Across a long link one partition then
    /// moves far more than 1 MiB per round trip. `strait run` sets it unless the MM2 file sets
    /// `max.partition.fetch.bytes`; default false (the fixed limit).
    pub partition_bytes_from_budget: bool,
    /// The target producer's settings (`T.producer.delivery.timeout.ms`, `request.timeout.ms`).
    pub producer: ProducerConfig,
    /// The segments a partition's offset map holds before a compaction pass bounds it
    /// (`compact.rs`; default 1,024). Lower only to see compaction in a test.
    pub compact_min_segments: usize,
}

impl Default for FlowOptions {
    fn default() -> Self {
        Self {
            fetch_max_wait: Duration::from_millis(500),
            fetch_min_bytes: 1,
            fetch_max_bytes: 50 * 1024 * 1024,
            partition_max_bytes: 1024 * 1024,
            partition_bytes_from_budget: false,
            producer: ProducerConfig::default(),
            compact_min_segments: compact::COMPACT_MIN_SEGMENTS,
        }
    }
}

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
    /// Set when the target no longer knows our producer id: the reset takes a new one rather
    /// than bumping the epoch.
    fresh_producer: bool,
    stats: FlowStats,
    /// The map as last persisted, for readers beside the flow (checkpoints, the HTTP API).
    published: tokio::sync::watch::Sender<std::sync::Arc<OffsetMap>>,
    /// Where the flow's events are counted (`/metrics`, `/v1/status`).
    metrics: FlowMetrics,
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
        let producer = RawProducer::new(target.clone(), options.producer.clone()).await?;
        let (store, map) = MapStore::open(
            &target,
            config.source_alias.as_str(),
            config.checkpoints_topic_replication_factor,
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
                OffsetSyncWriter::open(
                    client,
                    topic,
                    config.offset_syncs_topic_replication_factor,
                    config.offset_lag_max,
                )
                .await
                .map_err(FlowError::internal("offset syncs"))?,
            )
        } else {
            None
        };
        let published = tokio::sync::watch::Sender::new(std::sync::Arc::new(map.clone()));
        let metrics = FlowMetrics::start(&config);
        let mut flow = Self {
            config,
            options,
            source,
            target,
            producer,
            map,
            store,
            offset_syncs,
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
            stats: FlowStats::default(),
            published,
            metrics,
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

    /// [`Flow::stats`] as of the last map flush (after every round), readable while the flow
    /// runs: what a progress display or a metrics exporter beside the flow reads.
    pub fn stats_updates(&self) -> tokio::sync::watch::Receiver<FlowStats> {
        self.published_stats.subscribe()
    }

    /// Writes the map's changes to its topic and publishes the new map to
    /// [`Flow::map_updates`] readers (and the counters to [`Flow::stats_updates`] readers).
    /// Every so many flushes, large partitions are compacted first, below what no group on
    /// the source still needs (`compact.rs`).
    async fn persist_map(&mut self) -> Result<(), FlowError> {
        self.compact_map().await;
        let written = self
            .store
            .flush(&self.producer)
            .await
            .map_err(FlowError::internal("offset map"))?;
        if written > 0 {
            // Cheap: the clone shares each partition's map (copy on write, `OffsetMap`), so it
            // costs a pointer per partition, not a copy of every segment.
            self.published
                .send_replace(std::sync::Arc::new(self.map.clone()));
        }
        self.published_stats.send_replace(self.stats);
        Ok(())
    }

    /// Counters since start.
    pub fn stats(&self) -> FlowStats {
        self.stats
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
    /// partitions.
    pub async fn refresh_topics(&mut self) -> Result<(), FlowError> {
        let topics = topics::discover(&self.source, &self.config).await?;
        self.check_topic_ids(topics.iter().map(|t| (t.source.as_str(), t.id)));
        let remote_counts =
            topics::ensure_remote_topics(&self.source, &self.target, &self.config, &topics).await?;
        let mut new = Vec::new();
        for t in &topics {
            let usable = remote_counts
                .get(&t.remote)
                .copied()
                .unwrap_or(0)
                .min(t.partitions);
            for p in 0..usable {
                let tp = TopicPartition::new(&t.source, p);
                if !self.partitions.contains_key(&tp) {
                    new.push((tp, TopicPartition::new(&t.remote, p), None));
                }
            }
        }
        for (tp, remote, placed) in self.place_all(new).await? {
            let position = placed.as_ref().copied().unwrap_or_else(|_| {
                self.map
                    .partition(&source_partition(&tp))
                    .and_then(|m| m.src_end())
                    .unwrap_or(0)
            });
            let metrics = self.metrics.partition(&tp, &remote);
            metrics.placed(position);
            self.partitions.insert(
                tp.clone(),
                PartitionState {
                    remote,
                    position,
                    source_end: position,
                    metrics,
                    refused: None,
                    halted: None,
                },
            );
            if let Err(why) = placed {
                self.halt(&tp, why);
            }
        }
        self.topics = topics;
        self.next_refresh = Instant::now()
            + self
                .config
                .refresh_topics
                .unwrap_or(Duration::from_secs(u64::from(u32::MAX)));
        Ok(())
    }

    /// Compares the source topics' ids (from the source's metadata, zero where the broker gives
    /// none) with those seen before: a topic whose id changed was deleted and created again,
    /// and its partitions are halted, since its offsets start over below what the map records.
    fn check_topic_ids<'a>(&mut self, ids: impl Iterator<Item = (&'a str, [u8; 16])>) {
        let mut recreated = Vec::new();
        for (topic, id) in ids {
            if id == [0; 16] {
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
        let flow = self.config.name();
        let Some(state) = self.partitions.get_mut(tp) else {
            return;
        };
        if state.halted.is_some() {
            return;
        }
        tracing::error!(flow = %flow, partition = %tp, remote = %state.remote, "partition halted: {why}");
        state.metrics.blocked(Some(&why));
        state.refused = None;
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
            self.resilient_round(&mut backoff).await?;
        }
        self.persist_map().await?;
        self.flush_offset_syncs(true).await?;
        Ok(())
    }

    /// Mirrors until every partition has reached the source end it had when this was called.
    pub async fn run_until_caught_up(&mut self) -> Result<(), FlowError> {
        let mut backoff = strait_kafka::backoff::Backoff::new(
            Duration::from_millis(200),
            Duration::from_secs(10),
        );
        let asked: Vec<(TopicPartition, OffsetSpec)> = self
            .partitions
            .keys()
            .map(|tp| (tp.clone(), OffsetSpec::Latest))
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
            let done = ends.iter().all(|(tp, end)| {
                self.partitions
                    .get(tp)
                    .is_some_and(|p| p.position >= *end || p.halted.is_some())
            });
            if done {
                break;
            }
            self.resilient_round(&mut backoff).await?;
        }
        self.persist_map().await?;
        self.flush_offset_syncs(true).await?;
        Ok(())
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
                tracing::info!(flow = %self.name(), "producer re-established; resuming from the offset map");
            }
            self.round().await
        }
        .await;
        match result {
            Ok(stats) => {
                self.metrics.running();
                *backoff = strait_kafka::backoff::Backoff::new(
                    Duration::from_millis(200),
                    Duration::from_secs(10),
                );
                Ok(Some(stats))
            }
            Err(e) if e.is_retriable() => {
                self.metrics.stalled(&e);
                let wait = backoff.next_wait();
                tracing::warn!(flow = %self.name(), error = %e, retry_in = ?wait, "flow stalled; retrying");
                self.needs_reset = true;
                tokio::time::sleep(wait).await;
                Ok(None)
            }
            Err(e) => {
                self.metrics.failed(&e);
                Err(e)
            }
        }
    }

    /// One fetch-and-produce round over all partitions.
    pub async fn round(&mut self) -> Result<RoundStats, FlowError> {
        if Instant::now() >= self.next_refresh {
            self.refresh_topics().await?;
        }
        if let Some(every) = self.config.sync_topic_configs {
            if Instant::now() >= self.next_config_sync {
                topics::sync_configs(&self.source, &self.target, &self.config, &self.topics)
                    .await?;
                self.next_config_sync = Instant::now() + every;
            }
        }
        self.replace_refused().await?;
        // Kafka fills a fetch answer in request order, and lets only the first partition with
        // data go past its size limit (KIP-74): asked always in the same order, partitions late
        // in it (or whose next batch is larger than the limit) could get nothing round after
        // round until retention deleted their records. So, as Kafka's own consumer does,
        // partitions that got records go to the back of the order for the next fetch.
        self.fetch_order
            .retain(|tp| self.partitions.contains_key(tp));
        if self.fetch_order.len() < self.partitions.len() {
            let known: std::collections::HashSet<&TopicPartition> =
                self.fetch_order.iter().collect();
            let new: Vec<TopicPartition> = self
                .partitions
                .keys()
                .filter(|tp| !known.contains(tp))
                .cloned()
                .collect();
            self.fetch_order.extend(new);
        }
        let positions = self.fetch_positions();
        let options = self.fetch_options();
        let results = match self.prefetched.take() {
            Some((asked, results)) if asked == positions => results,
            _ => self.source.fetch(&positions, &options).await,
        };
        // A source topic deleted and created again keeps its name, not its id: the metadata the
        // client holds (refreshed on fetch errors and every `metadata.max.age.ms`) tells.
        let metadata = self.source.cached_metadata();
        let ids: Vec<(String, [u8; 16])> = self
            .topics
            .iter()
            .filter_map(|t| Some((t.source.clone(), metadata.topics.get(&t.source)?.id)))
            .collect();
        self.check_topic_ids(ids.iter().map(|(t, id)| (t.as_str(), *id)));
        let (waited, fed): (Vec<TopicPartition>, Vec<TopicPartition>) =
            std::mem::take(&mut self.fetch_order)
                .into_iter()
                .partition(|tp| match results.get(tp) {
                    Some(Ok(data)) => data.records.is_empty(),
                    _ => true,
                });
        self.fetch_order = waited;
        self.fetch_order.extend(fed);
        // Every partition failing the same way (the source unreachable) is an outage: let the
        // caller log it and back off, rather than spin quietly.
        let mut errors = results.values().filter_map(|r| r.as_ref().err());
        if let Some(first) = errors.next() {
            let all_failed = results.values().all(Result::is_err);
            if all_failed
                && matches!(
                    first,
                    strait_kafka::Error::Io { .. }
                        | strait_kafka::Error::NoBootstrap { .. }
                        | strait_kafka::Error::Timeout { .. }
                )
            {
                return Err(FlowError::Kafka(first.clone()));
            }
        }

        // What to produce, and how each written batch maps back to source offsets.
        let mut sends: Vec<(TopicPartition, RawBatch)> = Vec::new();
        // Per partition, in source order: what to record once the writes are acknowledged.
        // Skips are recorded in the same order as the writes around them, never ahead of them.
        let mut plans: Vec<(TopicPartition, Step)> = Vec::new();
        let mut caught_up = true;
        // Partitions whose next batch is in message format v0/v1: halted after this round.
        let mut old_format: Vec<(TopicPartition, String)> = Vec::new();
        for (tp, result) in results {
            if self.partitions.get(&tp).is_some_and(|p| p.halted.is_some()) {
                // Halted by the topic id check above: nothing of it is written.
                continue;
            }
            let data = match result {
                Ok(d) => d,
                Err(e) if e.code() == Some(ResponseError::OffsetOutOfRange) => {
                    self.handle_out_of_range(&tp).await?;
                    caught_up = false;
                    continue;
                }
                Err(e) => {
                    tracing::debug!(partition = %tp, error = %e, "fetch error; retried next round");
                    if let Some(state) = self.partitions.get(&tp) {
                        state
                            .metrics
                            .error(format_args!("fetch from the source: {e}"));
                    }
                    caught_up = false;
                    continue;
                }
            };
            let Some(state) = self.partitions.get_mut(&tp) else {
                continue;
            };
            let sp = source_partition(&tp);
            let committed_end = if self.config.isolation_level == IsolationLevel::ReadCommitted
                && data.last_stable_offset >= 0
            {
                data.last_stable_offset
            } else {
                data.high_watermark
            };
            state.source_end = committed_end;
            state.metrics.fetched(committed_end);
            if data.log_start_offset > state.position {
                let lost = record_loss(
                    &self.config.name(),
                    &mut self.map,
                    &mut self.store,
                    &sp,
                    state.position,
                    data.log_start_offset,
                )?;
                self.stats.lost_records += lost;
                state.metrics.lost(state.position, data.log_start_offset);
                state.position = data.log_start_offset;
            }
            let decided =
                decide::partition(state.position, data.records, &data.aborted).map_err(|e| {
                    FlowError::Rebuild {
                        partition: tp.clone(),
                        offset: e.base_offset,
                        source: e.source,
                    }
                })?;
            for step in decided.steps {
                match step {
                    Decision::Skip { from, to, reason } => {
                        match reason {
                            SkipReason::ControlBatch => {
                                self.stats.control_batches_skipped += 1;
                                state.metrics.dropped(false);
                            }
                            SkipReason::Aborted => {
                                self.stats.aborted_batches_skipped += 1;
                                state.metrics.dropped(true);
                            }
                        }
                        plans.push((tp.clone(), Step::Skip { from, to }));
                    }
                    Decision::PassOver {
                        from,
                        to,
                        max_timestamp,
                    } => {
                        state.metrics.read(max_timestamp);
                        plans.push((tp.clone(), Step::Skip { from, to }));
                    }
                    Decision::Write {
                        batch,
                        runs,
                        kind,
                        max_timestamp,
                    } => {
                        state.metrics.read(max_timestamp);
                        match kind {
                            WriteKind::Forwarded => {
                                self.stats.batches_forwarded += 1;
                                state.metrics.forwarded();
                            }
                            WriteKind::Rebuilt { source_base, holes } => {
                                log_rebuild(&self.config.name(), &tp, source_base, &runs, holes);
                                self.stats.batches_rebuilt += 1;
                                state.metrics.rebuilt();
                            }
                        }
                        plans.push((
                            tp.clone(),
                            Step::Write {
                                send: sends.len(),
                                runs,
                            },
                        ));
                        sends.push((state.remote.clone(), batch));
                    }
                }
            }
            state.position = decided.position;
            match decided.stopped {
                Some(Stop::OldFormat { magic, base_offset }) => {
                    // Fetched again, it would be the same bytes every round, forever.
                    old_format.push((
                        tp.clone(),
                        format!(
                            "source partition {tp} holds records in message format v{magic} \
                             (written by Kafka before 0.11, or with an old \
                             log.message.format.version) from offset {base_offset}: strait \
                             forwards record batches as they are and mirrors format v2 only. \
                             The records before offset {base_offset} are mirrored; this \
                             partition is halted there, the others go on. To mirror it, \
                             rewrite the topic's records in format v2 on the source (copy it \
                             with a current producer into a new topic, or let retention \
                             remove the old records), or leave the topic out of `topics`"
                        ),
                    ));
                }
                Some(Stop::Unreadable(e)) => {
                    tracing::warn!(partition = %tp, error = %e, "bad batch from the source; fetched again next round");
                }
                None => {}
            }
            if state.position < committed_end {
                caught_up = false;
            }
        }

        self.metrics
            .in_flight(sends.iter().map(|(_, b)| b.bytes.len() as u64).sum());
        // While the batches are written, the next round's data is fetched, if there is more
        // to fetch: a round then costs the longer of the source's and the target's round
        // trips, not both. (Caught up, a fetch would wait `fetch.max.wait.ms` for new records
        // and hold this round's end back.)
        let more = self
            .partitions
            .values()
            .any(|p| p.halted.is_none() && p.refused.is_none() && p.position < p.source_end);
        let next_positions = if more {
            self.fetch_positions()
        } else {
            Vec::new()
        };
        let prefetch = async {
            if next_positions.is_empty() {
                None
            } else {
                Some(self.source.fetch(&next_positions, &options).await)
            }
        };
        let (acks, prefetched) = tokio::join!(self.producer.send_all(sends.clone()), prefetch);
        let mut acks: Vec<Option<strait_kafka::Result<strait_kafka::produce::ProduceAck>>> =
            acks.into_iter().map(Some).collect();
        self.prefetched = prefetched.map(|results| (next_positions, results));
        self.metrics.in_flight(0);
        let mut records = 0u64;
        // Partitions with a failed write: nothing after it is recorded this round.
        let mut failed: std::collections::BTreeSet<TopicPartition> = Default::default();
        // Writes the target refused for good: (partition, first source offset, why).
        let mut refusals: Vec<(TopicPartition, i64, strait_kafka::Error)> = Vec::new();
        // Writes that landed below what the map says the target holds: the target lost records.
        let mut truncated: Vec<(TopicPartition, String)> = Vec::new();
        // Whether a write failed in a way that needs every partition placed again (its fate
        // unknown: a timeout, a broker gone), not only the refused ones.
        let mut reset = false;
        for (tp, step) in plans {
            if failed.contains(&tp) {
                // Everything after a failed write waits for the map-driven restart.
                continue;
            }
            let sp = source_partition(&tp);
            match step {
                Step::Skip { from, to } => {
                    let extent = self
                        .map
                        .record_skipped(&sp, from, to)
                        .map_err(FlowError::map(&sp))?;
                    self.store.note(&sp, MapEntry::Extent(extent));
                }
                Step::Write { send, runs } => match acks.get_mut(send).and_then(Option::take) {
                    Some(Ok(ack)) => {
                        let map_dst_end = self.map.partition(&sp).and_then(|m| m.dst_end());
                        if let Some(end) = map_dst_end.filter(|end| ack.base_offset < *end) {
                            // The target took this write below records it had acknowledged:
                            // it lost them. Nothing more is recorded for the partition.
                            let from = runs.first().map_or(0, |r| r.0);
                            let why = self.target_truncated(&tp, from, ack.base_offset, end);
                            truncated.push((tp.clone(), why));
                            failed.insert(tp);
                            continue;
                        }
                        // Target records between the map's end and this write are copies of
                        // source records the map could not account for (an earlier run wrote
                        // them and stopped before recording them).
                        let mapped_end = map_dst_end.max(self.orphan_ends.remove(&tp));
                        if let Some(end) = mapped_end.filter(|e| ack.base_offset > *e) {
                            self.stats.duplicate_records += (ack.base_offset - end) as u64;
                            if let Some(state) = self.partitions.get(&tp) {
                                state.metrics.duplicates((ack.base_offset - end) as u64);
                            }
                        }
                        let mut dst = ack.base_offset;
                        let mut sync_runs = Vec::with_capacity(runs.len());
                        for (src, n) in runs {
                            let segment = self
                                .map
                                .record(&sp, src, dst, n)
                                .map_err(FlowError::map(&sp))?;
                            self.store.note(&sp, MapEntry::Segment(segment));
                            sync_runs.push((src, dst, n));
                            dst += n;
                        }
                        if let Some(w) = &mut self.offset_syncs {
                            w.on_batch(&tp.topic, tp.partition, &sync_runs);
                        }
                        records += ack.record_count as u64;
                        self.stats.bytes += sends[send].1.bytes.len() as u64;
                        if let Some(state) = self.partitions.get_mut(&tp) {
                            let batch = &sends[send].1;
                            state.metrics.written(
                                ack.record_count as u64,
                                batch.bytes.len() as u64,
                                batch.header.max_timestamp,
                            );
                            if state.refused.take().is_some() {
                                tracing::info!(
                                    flow = %self.config.name(),
                                    partition = %tp,
                                    "the target takes this partition's batches again"
                                );
                                state.metrics.blocked(None);
                            }
                        }
                    }
                    Some(Err(e)) if e.is_refusal() => {
                        let from = runs.first().map_or(0, |r| r.0);
                        refusals.push((tp.clone(), from, e));
                        failed.insert(tp);
                    }
                    Some(Err(e)) => {
                        tracing::warn!(flow = %self.config.name(), partition = %tp, error = %e, "produce failed; resuming from the offset map");
                        if let Some(state) = self.partitions.get(&tp) {
                            state
                                .metrics
                                .error(format_args!("produce to the target: {e}"));
                        }
                        self.fresh_producer |= needs_new_producer(&e);
                        failed.insert(tp);
                        reset = true;
                    }
                    None => {
                        failed.insert(tp);
                        reset = true;
                    }
                },
            }
        }
        self.stats.records += records;
        if !failed.is_empty() || !old_format.is_empty() {
            // Positions change (placed again, halted): the fetch ahead no longer fits.
            self.prefetched = None;
        }
        self.persist_map().await?;
        self.flush_offset_syncs(false).await?;
        for (tp, why) in truncated.into_iter().chain(old_format) {
            self.halt(&tp, why);
            caught_up = false;
        }
        if !refusals.is_empty() {
            for (tp, from, e) in refusals {
                self.refuse(&tp, from, &e);
            }
            if !reset {
                // The refused partitions' sequences have a hole; nothing is in flight.
                self.producer.bump_epoch().await?;
            }
            caught_up = false;
        }
        if reset {
            self.needs_reset = true;
            self.reset_after_failure().await?;
            self.needs_reset = false;
            caught_up = false;
        }
        for (tp, state) in &self.partitions {
            let segments = self
                .map
                .partition(&source_partition(tp))
                .map_or(0, |m| m.segments().len());
            state
                .metrics
                .progress(state.source_end, state.position, segments);
        }
        Ok(RoundStats { records, caught_up })
    }

    /// What the next fetch asks: every partition neither halted nor waiting after a refusal,
    /// from its position, in [`Flow::fetch_order`](Flow) order.
    fn fetch_positions(&self) -> Vec<FetchPosition> {
        let mut positions: Vec<FetchPosition> = self
            .fetch_order
            .iter()
            .filter_map(|tp| {
                let p = self.partitions.get(tp)?;
                if p.halted.is_some() || p.refused.as_ref().is_some_and(|r| !r.retrying) {
                    return None;
                }
                Some(FetchPosition {
                    max_bytes: self.options.partition_max_bytes,
                    ..FetchPosition::new(tp.clone(), p.position)
                })
            })
            .collect();
        if self.options.partition_bytes_from_budget && !positions.is_empty() {
            let share = self.fetch_options().max_bytes / positions.len() as i32;
            for p in &mut positions {
                p.max_bytes = p.max_bytes.max(share);
            }
        }
        positions
    }

    /// The settings of the data fetches. A third of the flow's budget
    /// (`strait.max.bytes.in.flight`) for each: the round's fetched batches, the producer's
    /// copies of them (each batch's header is rewritten for our producer id), and the next
    /// round's fetch made while they are written; less if `fetch.max.bytes` says so. Split
    /// across the leaders by `Client::fetch`.
    fn fetch_options(&self) -> FetchOptions {
        let budget = i32::try_from(self.config.max_bytes_in_flight / 3).unwrap_or(i32::MAX);
        FetchOptions {
            max_wait: self.options.fetch_max_wait,
            min_bytes: self.options.fetch_min_bytes,
            max_bytes: budget.min(self.options.fetch_max_bytes).max(1),
            isolation: self.config.isolation_level,
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
            w.flush(true)
                .await
                .map_err(FlowError::internal("offset syncs"))?;
            true
        } else {
            w.start_flush(delayed)
                .await
                .map_err(FlowError::internal("offset syncs"))?
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
        let flow = self.config.name();
        let Some(state) = self.partitions.get_mut(tp) else {
            return;
        };
        state.position = from;
        let first = state.refused.is_none();
        let refused = state.refused.get_or_insert_with(|| Refused {
            resume: from,
            retry_at: Instant::now(),
            retrying: false,
            backoff: strait_kafka::backoff::Backoff::new(REFUSED_BACKOFF.0, REFUSED_BACKOFF.1),
        });
        let wait = refused.backoff.next_wait();
        refused.resume = from;
        refused.retrying = false;
        refused.retry_at = Instant::now() + wait;
        let why = format!(
            "the target refuses the batch from source offset {from} for good ({e}); the \
             partition waits and is tried again in {:.1} s, then less and less often (at most \
             every {} s); the other partitions go on. Fix it on the target: the remote topic's \
             max.message.bytes (or the broker's message.max.bytes), its policies or its ACLs",
            wait.as_secs_f64(),
            REFUSED_BACKOFF.1.as_secs()
        );
        if first {
            tracing::error!(flow = %flow, partition = %tp, remote = %state.remote, offset = from, error = %e, "{why}");
        } else {
            tracing::debug!(flow = %flow, partition = %tp, offset = from, error = %e, "refused again");
        }
        state.metrics.blocked(Some(&why));
    }

    /// Places again, from their maps, the refused partitions whose wait is over, so the next
    /// fetch tries them once more.
    async fn replace_refused(&mut self) -> Result<(), FlowError> {
        let now = Instant::now();
        let due: Vec<(TopicPartition, TopicPartition, Option<i64>)> = self
            .partitions
            .iter()
            .filter_map(|(tp, p)| {
                let r = p.refused.as_ref()?;
                (!r.retrying && r.retry_at <= now)
                    .then(|| (tp.clone(), p.remote.clone(), Some(r.resume)))
            })
            .collect();
        if due.is_empty() {
            return Ok(());
        }
        // A later batch of the refused write may have landed (a partition the producer had
        // never written to accepts any sequence): matching the target's tail finds it.
        for (tp, _, placed) in self.place_all(due).await? {
            let position = match placed {
                Ok(position) => position,
                Err(why) => {
                    self.halt(&tp, why);
                    continue;
                }
            };
            if let Some(p) = self.partitions.get_mut(&tp) {
                p.position = position;
                p.metrics.placed(position);
                if let Some(r) = &mut p.refused {
                    r.retrying = true;
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

/// Whether a failed write means the target no longer accepts our producer id and epoch, so
/// that only a new producer id helps.
fn needs_new_producer(e: &strait_kafka::Error) -> bool {
    matches!(
        e.code(),
        Some(
            ResponseError::InvalidProducerEpoch
                | ResponseError::ProducerFenced
                | ResponseError::UnknownProducerId
                | ResponseError::InvalidProducerIdMapping
        )
    )
}

/// Records `from..to` as lost, loudly: one error line naming the flow, topic, partition and
/// range.
fn record_loss(
    flow: &str,
    map: &mut OffsetMap,
    store: &mut MapStore,
    sp: &SourcePartition,
    from: i64,
    to: i64,
) -> Result<u64, FlowError> {
    let range = map.record_lost(sp, from, to).map_err(FlowError::map(sp))?;
    store.note(sp, MapEntry::Lost(range));
    tracing::error!(
        flow = %flow,
        topic = %sp.topic,
        partition = sp.partition,
        from,
        to,
        lost = to - from,
        "records were deleted on the source before they were mirrored; the range is recorded \
         as lost in the offset map and mirroring continues after it"
    );
    Ok((to - from) as u64)
}

/// One line per rebuilt batch: at debug for compaction holes (routine on a compacted topic),
/// at info for a batch cut by the partition's position (after a restart or a loss inside it).
fn log_rebuild(flow: &str, tp: &TopicPartition, offset: i64, runs: &[(i64, i64)], holes: bool) {
    let records: i64 = runs.iter().map(|r| r.1).sum();
    let (topic, partition) = (&tp.topic, tp.partition);
    if holes {
        tracing::debug!(
            flow = %flow, %topic, partition, offset, records, kind = "compaction holes",
            "batch rebuilt: its offsets have holes (compaction), so it is re-encoded densely"
        );
    } else {
        tracing::info!(
            flow = %flow, %topic, partition, offset, records, kind = "cut by position",
            "batch rebuilt: it starts before the partition's position (a restart or a loss \
             inside it), so only its records from the position on are written"
        );
    }
}
