//! One round of the data path, in stages with one job each ([`Flow::round`]):
//!
//! 1. [`upkeep`](Flow::upkeep): new topics and partitions, topic configs, refused partitions
//!    whose wait is over;
//! 2. [`fetch`](Flow::fetch): every partition from its position, or the fetch made ahead in the
//!    last round; an outage of the source ends the round here;
//! 3. [`decide`](Flow::decide): per partition, what to write and what to record
//!    (`decide.rs`, a pure function), into a [`Plan`];
//! 4. [`write`](Flow::write): the plan's batches to the target, with the next round's fetch and
//!    the last round's map write in flight beside them;
//! 5. [`record`](Flow::record): the acknowledged writes into the offset map, in source order,
//!    into an [`Outcome`];
//! 6. [`settle`](Flow::settle): start the map's and the offset syncs' writes beside the next
//!    round, and halt, refuse or reset the partitions whose writes failed.

use std::collections::{BTreeSet, HashSet};

use kafka_protocol::error::ResponseError;
use strait_kafka::admin::IsolationLevel;
use strait_kafka::fetch::{FetchOptions, FetchPosition, FetchResults, FetchedData};
use strait_kafka::produce::ProduceAck;
use strait_kafka::TopicPartition;
use strait_wire::offset_map::MapEntry;
use strait_wire::{BatchHeader, RawBatch};
use tokio::time::Instant;

use super::classify::SkipReason;
use super::decide::{self, Decision, Stop, WriteKind};
use super::events::Event;
use super::{record_loss, source_partition, topics, Flow, FlowError, Recorded, RoundStats};

/// What a round decided to write and to record.
#[derive(Debug, Default)]
struct Plan {
    /// The batches to produce, each with its remote partition.
    sends: Vec<(TopicPartition, RawBatch)>,
    /// Per partition, in source order: what to record once the writes are acknowledged.
    /// Skips are recorded in the same order as the writes around them, never ahead of them.
    steps: Vec<(TopicPartition, Step)>,
    /// Whether every partition reached the source end its fetch saw.
    caught_up: bool,
    /// Partitions whose next batch is in message format v0/v1, with why: halted after the
    /// round (fetched again, it would be the same bytes every round, forever).
    old_format: Vec<(TopicPartition, String)>,
}

/// A planned change to a partition's map, applied after the round's writes are acknowledged.
#[derive(Debug)]
enum Step {
    /// Source offsets `from..to` not mirrored: markers and aborted transactions (`reason`),
    /// or batches with nothing left to write (no reason: passed over).
    Skip {
        from: i64,
        to: i64,
        reason: Option<SkipReason>,
    },
    /// `sends[send]`, of `bytes` bytes and newest record time `max_timestamp`, made as `kind`
    /// says, carries the source runs `(offset, count)`, in order.
    Write {
        send: usize,
        runs: Vec<(i64, i64)>,
        bytes: u64,
        max_timestamp: i64,
        kind: WriteKind,
    },
}

/// What recording a round's acknowledgements found.
#[derive(Debug, Default)]
struct Outcome {
    records: u64,
    /// Partitions with a failed write: nothing after it was recorded this round.
    failed: BTreeSet<TopicPartition>,
    /// Writes the target refused for good: (partition, first source offset, why).
    refusals: Vec<(TopicPartition, i64, strait_kafka::Error)>,
    /// Writes that landed below what the map says the target holds (the target lost records),
    /// with why.
    truncated: Vec<(TopicPartition, String)>,
    /// Whether a write failed in a way that needs every partition placed again (its fate
    /// unknown: a timeout, a broker gone), not only the refused ones.
    reset: bool,
}

/// One write's acknowledgement, taken once by [`Flow::record`].
type Ack = Option<strait_kafka::Result<ProduceAck>>;

impl Flow {
    /// One fetch-and-produce round over all partitions (the module doc lists its stages).
    pub async fn round(&mut self) -> Result<RoundStats, FlowError> {
        self.upkeep().await?;
        let fetched = self.fetch().await?;
        let mut plan = self.decide(fetched).await?;
        // A transactional flow's round is one transaction: if it does not commit, its data is
        // aborted, and what it recorded is taken back with it.
        let before = self
            .transactional()
            .then(|| (self.map.clone(), self.store.notes()));
        let acks = self.write(&mut plan).await;
        let recorded = async {
            let outcome = self.record(&plan, acks)?;
            if before.is_some() {
                self.commit().await?;
            }
            Ok(outcome)
        }
        .await;
        let outcome = match (recorded, before) {
            (Ok(outcome), _) => outcome,
            (Err(e), Some((map, notes))) => {
                self.map = map;
                self.store.restore_notes(notes);
                self.uncommitted_syncs.clear();
                self.uncommitted_told.clear();
                return Err(e);
            }
            (Err(e), None) => return Err(e),
        };
        self.settle(plan, outcome).await
    }

    /// New topics and partitions (every `refresh.topics.interval.seconds`), topic configs
    /// (every `sync.topic.configs.interval.seconds`), and waiting partitions due again.
    async fn upkeep(&mut self) -> Result<(), FlowError> {
        if Instant::now() >= self.next_refresh {
            self.refresh_topics().await?;
        }
        if let Some(every) = self.config.sync_topic_configs.filter(|_| self.leads()) {
            if Instant::now() >= self.next_config_sync {
                topics::sync_configs(&self.source, &self.target, &self.config, &self.topics)
                    .await?;
                self.next_config_sync = Instant::now() + every;
            }
        }
        self.place_waiting().await
    }

    /// Fetches every partition from its position (or takes the fetch made ahead, if it asked
    /// the same), checks the source topics' ids, and puts the partitions that got records at
    /// the back of the next fetch's order. Every partition failing the same way (the source
    /// unreachable) is an outage: the caller logs it and backs off, rather than spin quietly.
    async fn fetch(&mut self) -> Result<FetchResults, FlowError> {
        self.order_new_partitions();
        let positions = self.fetch_positions();
        let results = match self.prefetched.take() {
            Some((asked, results)) if asked == positions => results,
            _ => {
                let options = self.fetch_options();
                self.source.fetch(&positions, &options).await
            }
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
        self.reorder_after(&results);
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
        Ok(results)
    }

    /// Keeps the fetch order to the partitions mirrored, new ones at its end.
    fn order_new_partitions(&mut self) {
        self.fetch_order
            .retain(|tp| self.partitions.contains_key(tp));
        if self.fetch_order.len() < self.partitions.len() {
            let known: HashSet<&TopicPartition> = self.fetch_order.iter().collect();
            let new: Vec<TopicPartition> = self
                .partitions
                .keys()
                .filter(|tp| !known.contains(tp))
                .cloned()
                .collect();
            self.fetch_order.extend(new);
        }
    }

    /// Kafka fills a fetch answer in request order, and lets only the first partition with
    /// data go past its size limit (KIP-74): asked always in the same order, partitions late
    /// in it (or whose next batch is larger than the limit) could get nothing round after
    /// round until retention deleted their records. So, as Kafka's own consumer does,
    /// partitions that got records go to the back of the order for the next fetch.
    fn reorder_after(&mut self, results: &FetchResults) {
        let (waited, fed): (Vec<TopicPartition>, Vec<TopicPartition>) =
            std::mem::take(&mut self.fetch_order)
                .into_iter()
                .partition(|tp| match results.get(tp) {
                    Some(Ok(data)) => data.records.is_empty(),
                    _ => true,
                });
        self.fetch_order = waited;
        self.fetch_order.extend(fed);
    }

    /// Decides, partition by partition, what the fetched records become.
    async fn decide(&mut self, fetched: FetchResults) -> Result<Plan, FlowError> {
        let mut plan = Plan {
            caught_up: true,
            ..Plan::default()
        };
        // Whether the answer was far from the fetch's byte limit: then a partition that got
        // nothing although it has records was not crowded out by the others.
        let returned: usize = fetched
            .values()
            .filter_map(|r| r.as_ref().ok())
            .map(|d| d.records.len())
            .sum();
        let had_room = returned < usize::try_from(self.fetch_options().max_bytes / 2).unwrap_or(0);
        for (tp, result) in fetched {
            if self.partitions.get(&tp).is_some_and(|p| p.halted.is_some()) {
                // Halted by the topic id check: nothing of it is written.
                continue;
            }
            match result {
                Ok(data) => self.decide_partition(&tp, data, had_room, &mut plan)?,
                Err(e) if e.code() == Some(ResponseError::OffsetOutOfRange) => {
                    self.handle_out_of_range(&tp).await?;
                    plan.caught_up = false;
                }
                Err(e) => {
                    if let Some(state) = self.partitions.get(&tp) {
                        self.events
                            .tell(&tp, &state.metrics, Event::FetchFailed(&e));
                    }
                    plan.caught_up = false;
                }
            }
        }
        Ok(plan)
    }

    /// Decides what `tp`'s fetched `data` becomes (`decide::partition`), tells what it read, and
    /// moves its position past it. `had_room`: the fetch's answer was far below its byte limit.
    fn decide_partition(
        &mut self,
        tp: &TopicPartition,
        data: FetchedData,
        had_room: bool,
        plan: &mut Plan,
    ) -> Result<(), FlowError> {
        let Some(state) = self.partitions.get_mut(tp) else {
            return Ok(());
        };
        let committed_end = if self.config.isolation_level == IsolationLevel::ReadCommitted
            && data.last_stable_offset >= 0
        {
            data.last_stable_offset
        } else {
            data.high_watermark
        };
        state.source_end = committed_end;
        state.metrics.fetched(committed_end);
        // The first batch's declared size, whole or cut by the fetch's limit: what the next
        // fetch asks at least (`partition_ask`). Nothing at all although the partition has
        // records and the answer had room: its next batch is larger than it asked (Kafka sends
        // no part of it), so it asks twice as much next time.
        if let Some(first) = BatchHeader::parse(&data.records) {
            let size = i32::try_from(first.total_size()).unwrap_or(i32::MAX);
            state.largest_batch = state.largest_batch.max(Some(size));
        } else if had_room && data.records.is_empty() && committed_end > state.position {
            state.largest_batch = Some(
                state
                    .largest_batch
                    .map_or(super::MIN_PARTITION_SHARE, |b| b.saturating_mul(2)),
            );
        }
        if data.log_start_offset > state.position {
            let sp = source_partition(tp);
            let (from, to) = (state.position, data.log_start_offset);
            record_loss(&mut self.map, &mut self.store, &sp, from, to)?;
            self.events
                .tell(tp, &state.metrics, Event::Lost { from, to });
            state.position = to;
        }
        let decided = decide::partition(
            state.position,
            data.records,
            &data.aborted,
            self.options.check_crcs,
        )
        .map_err(|e| FlowError::Rebuild {
            partition: tp.clone(),
            offset: e.base_offset,
            source: e.source,
        })?;
        // What a batch is (forwarded, rebuilt, skipped) is told once its step is recorded
        // (`record`): a write that fails is decided again, and counted once.
        for decision in decided.steps {
            let step = match decision {
                Decision::Skip { from, to, reason } => Step::Skip {
                    from,
                    to,
                    reason: Some(reason),
                },
                Decision::PassOver {
                    from,
                    to,
                    max_timestamp,
                } => {
                    self.events
                        .tell(tp, &state.metrics, Event::Read { max_timestamp });
                    Step::Skip {
                        from,
                        to,
                        reason: None,
                    }
                }
                Decision::Write {
                    batch,
                    runs,
                    kind,
                    max_timestamp,
                } => {
                    self.events
                        .tell(tp, &state.metrics, Event::Read { max_timestamp });
                    let (bytes, max_timestamp) =
                        (batch.bytes.len() as u64, batch.header.max_timestamp);
                    let size = i32::try_from(bytes).unwrap_or(i32::MAX);
                    state.largest_batch = state.largest_batch.max(Some(size));
                    plan.sends.push((state.remote.clone(), batch));
                    Step::Write {
                        send: plan.sends.len() - 1,
                        runs,
                        bytes,
                        max_timestamp,
                        kind,
                    }
                }
            };
            plan.steps.push((tp.clone(), step));
        }
        state.position = decided.position;
        match decided.stopped {
            Some(Stop::OldFormat { magic, base_offset }) => {
                plan.old_format
                    .push((tp.clone(), old_format(tp, magic, base_offset)));
            }
            Some(Stop::Unreadable(e)) => {
                tracing::warn!(partition = %tp, error = %e, "bad batch from the source; fetched again next round");
            }
            None => {}
        }
        if state.position < committed_end {
            plan.caught_up = false;
        }
        Ok(())
    }

    /// Produces the plan's batches. Beside them go the next round's fetch, if there is more to
    /// fetch (a round then costs the longer of the source's and the target's round trips, not
    /// both; caught up, a fetch would wait `fetch.max.wait.ms` for new records and hold this
    /// round's end back), and the map write the last round started (`MapStore::start_flush`).
    /// The batches go to the producer (`plan.sends` is left empty): the steps say what each
    /// carried.
    async fn write(&mut self, plan: &mut Plan) -> Vec<Ack> {
        self.events
            .metrics()
            .in_flight(plan.sends.iter().map(|(_, b)| b.bytes.len() as u64).sum());
        let more = self
            .partitions
            .values()
            .any(|p| !p.stopped() && p.waiting.is_none() && p.position < p.source_end);
        let next_positions = if more {
            self.fetch_positions()
        } else {
            Vec::new()
        };
        let options = self.fetch_options();
        let prefetch = async {
            if next_positions.is_empty() {
                None
            } else {
                Some(self.source.fetch(&next_positions, &options).await)
            }
        };
        let (acks, prefetched) = tokio::join!(
            self.producer.send_all(std::mem::take(&mut plan.sends)),
            prefetch
        );
        self.prefetched = prefetched.map(|results| (next_positions, results));
        self.events.metrics().in_flight(0);
        acks.into_iter().map(Some).collect()
    }

    /// Records the plan's steps whose writes were acknowledged, partition by partition in
    /// source order: a partition's steps after a failed write wait for the map-driven restart.
    fn record(&mut self, plan: &Plan, mut acks: Vec<Ack>) -> Result<Outcome, FlowError> {
        let mut outcome = Outcome::default();
        for (tp, step) in &plan.steps {
            if outcome.failed.contains(tp) {
                continue;
            }
            let sp = source_partition(tp);
            match step {
                Step::Skip { from, to, reason } => {
                    let extent = self
                        .map
                        .record_skipped(&sp, *from, *to)
                        .map_err(FlowError::map(&sp))?;
                    self.store.note(&sp, MapEntry::Extent(extent));
                    if let Some(reason) = reason {
                        self.tell_recorded(tp, Recorded::Skipped(*reason));
                    }
                }
                Step::Write {
                    send,
                    runs,
                    bytes,
                    max_timestamp,
                    kind,
                } => {
                    let from = runs.first().map_or(0, |r| r.0);
                    match acks.get_mut(*send).and_then(Option::take) {
                        Some(Ok(ack)) => match self.record_write(tp, runs, &ack)? {
                            Ok(()) => {
                                outcome.records += ack.record_count as u64;
                                let made = match *kind {
                                    WriteKind::Forwarded => Recorded::Forwarded,
                                    WriteKind::Rebuilt { source_base, holes } => {
                                        Recorded::Rebuilt {
                                            source_base,
                                            runs: runs.clone(),
                                            holes,
                                        }
                                    }
                                };
                                self.tell_recorded(tp, made);
                                if ack.merged {
                                    self.tell_recorded(tp, Recorded::Merged);
                                }
                                if ack.split {
                                    self.tell_recorded(tp, Recorded::Split);
                                }
                                let written = Recorded::Written {
                                    records: ack.record_count as u64,
                                    bytes: *bytes,
                                    max_timestamp: *max_timestamp,
                                };
                                self.tell_recorded(tp, written);
                            }
                            Err(why) => {
                                outcome.truncated.push((tp.clone(), why));
                                outcome.failed.insert(tp.clone());
                            }
                        },
                        Some(Err(e)) if e.is_refusal() => {
                            outcome.refusals.push((tp.clone(), from, e));
                            outcome.failed.insert(tp.clone());
                        }
                        Some(Err(e)) => {
                            if let Some(state) = self.partitions.get(tp) {
                                self.events
                                    .tell(tp, &state.metrics, Event::ProduceFailed(&e));
                            }
                            self.fresh_producer |= needs_new_producer(&e);
                            outcome.failed.insert(tp.clone());
                            outcome.reset = true;
                        }
                        None => {
                            outcome.failed.insert(tp.clone());
                            outcome.reset = true;
                        }
                    }
                }
            }
        }
        Ok(outcome)
    }

    /// Records one acknowledged write of `tp`, carrying the source `runs`, in the map and the
    /// offset syncs. `Ok(Err(why))` when it landed below records the target had acknowledged:
    /// the target lost them, and nothing more is recorded for the partition.
    fn record_write(
        &mut self,
        tp: &TopicPartition,
        runs: &[(i64, i64)],
        ack: &ProduceAck,
    ) -> Result<Result<(), String>, FlowError> {
        let sp = source_partition(tp);
        let map_dst_end = self.map.partition(&sp).and_then(|m| m.dst_end());
        if let Some(end) = map_dst_end.filter(|end| ack.base_offset < *end) {
            let from = runs.first().map_or(0, |r| r.0);
            return Ok(Err(self.target_truncated(tp, from, ack.base_offset, end)));
        }
        // Target records between the map's end and this write are copies of source records the
        // map could not account for (an earlier run wrote them and stopped before recording
        // them).
        // In a transactional flow, what lies between is transaction markers and aborted data.
        let mapped_end = map_dst_end.max(self.orphan_ends.remove(tp));
        let duplicates = mapped_end
            .filter(|e| ack.base_offset > *e && !self.transactional())
            .map(|end| (ack.base_offset - end) as u64);
        let mut dst = ack.base_offset;
        let mut sync_runs = Vec::with_capacity(runs.len());
        for &(src, n) in runs {
            let segment = self
                .map
                .record(&sp, src, dst, n)
                .map_err(FlowError::map(&sp))?;
            self.store.note(&sp, MapEntry::Segment(segment));
            sync_runs.push((src, dst, n));
            dst += n;
        }
        if self.transactional() {
            self.uncommitted_syncs
                .push((tp.topic.to_string(), tp.partition, sync_runs));
        } else if let Some(w) = &mut self.offset_syncs {
            w.on_batch(&tp.topic, tp.partition, &sync_runs);
        }
        let Some(state) = self.partitions.get_mut(tp) else {
            return Ok(Ok(()));
        };
        if let Some(n) = duplicates {
            self.events.tell(tp, &state.metrics, Event::Duplicates(n));
        }
        if state.waiting.take().is_some() {
            self.events.tell(tp, &state.metrics, Event::Accepted);
        }
        Ok(Ok(()))
    }

    /// Ends the round: starts the map's and the offset syncs' writes beside the next round,
    /// halts, refuses or resets the partitions whose writes failed, and shows where each
    /// partition stands.
    async fn settle(&mut self, plan: Plan, outcome: Outcome) -> Result<RoundStats, FlowError> {
        let mut caught_up = plan.caught_up;
        if !outcome.failed.is_empty() || !plan.old_format.is_empty() {
            // Positions change (placed again, halted): the fetch ahead no longer fits.
            self.prefetched = None;
        }
        self.write_map(false).await?;
        self.flush_offset_syncs(false).await?;
        for (tp, why) in outcome.truncated.into_iter().chain(plan.old_format) {
            self.halt(&tp, why);
            caught_up = false;
        }
        if !outcome.refusals.is_empty() {
            for (tp, from, e) in outcome.refusals {
                self.refuse(&tp, from, &e);
            }
            if !outcome.reset {
                // The refused partitions' sequences have a hole; nothing is in flight.
                self.new_epoch().await?;
            }
            caught_up = false;
        }
        if outcome.reset {
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
        Ok(RoundStats {
            records: outcome.records,
            caught_up,
            placed_again: outcome.reset,
        })
    }

    /// What the next fetch asks: every partition neither halted nor waiting (refused, unplaced),
    /// from its position, in [`Flow::fetch_order`](Flow) order, each for
    /// `max.partition.fetch.bytes` or its share of the fetch
    /// ([`FlowOptions::partition_bytes_from_budget`](super::FlowOptions)).
    pub(super) fn fetch_positions(&self) -> Vec<FetchPosition> {
        let mut positions: Vec<FetchPosition> = self
            .fetch_order
            .iter()
            .filter_map(|tp| {
                let p = self.partitions.get(tp)?;
                if p.stopped() || p.waits() {
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
                let largest = self.partitions.get(&p.tp).and_then(|s| s.largest_batch);
                p.max_bytes = partition_ask(share, largest);
            }
        }
        positions
    }

    /// The settings of the data fetches. A third of the flow's budget
    /// (`strait.max.bytes.in.flight`) for each: the round's fetched batches, the producer's
    /// copies of them (each batch's header is rewritten for our producer id), and the next
    /// round's fetch made while they are written; less if `fetch.max.bytes` says so. Split
    /// across the leaders by `Client::fetch`.
    pub(super) fn fetch_options(&self) -> FetchOptions {
        let budget = i32::try_from(self.config.max_bytes_in_flight / 3).unwrap_or(i32::MAX);
        FetchOptions {
            max_wait: self.options.fetch_max_wait,
            min_bytes: self.options.fetch_min_bytes,
            max_bytes: budget.min(self.options.fetch_max_bytes).max(1),
            isolation: self.config.isolation_level,
        }
    }
}

/// How many bytes a fetch asks of one partition when it shares the fetch's bytes among its
/// partitions ([`FlowOptions::partition_bytes_from_budget`](super::FlowOptions)): its `share`,
/// but never less than [`MIN_PARTITION_SHARE`](super::MIN_PARTITION_SHARE) nor than twice the
/// largest batch the partition has sent (a limit below its next batch moves nothing: only the
/// first partition of an answer may go over its limit, KIP-74). A partition starved that way
/// doubles its `largest_batch` each round (`decide_partition`) until its batch fits.
fn partition_ask(share: i32, largest_batch: Option<i32>) -> i32 {
    let floor = share.max(super::MIN_PARTITION_SHARE);
    largest_batch.map_or(floor, |batch| floor.max(batch.saturating_mul(2)))
}

/// Why a partition holding message format v0/v1 from `base_offset` is halted.
fn old_format(tp: &TopicPartition, magic: i8, base_offset: i64) -> String {
    format!(
        "source partition {tp} holds records in message format v{magic} (written by Kafka \
         before 0.11, or with an old log.message.format.version) from offset {base_offset}: \
         strait forwards record batches as they are and mirrors format v2 only. The records \
         before offset {base_offset} are mirrored; this partition is halted there, the others \
         go on. To mirror it, rewrite the topic's records in format v2 on the source (copy it \
         with a current producer into a new topic, or let retention remove the old records), \
         or leave the topic out of `topics`"
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: i32 = 1024 * 1024;

    /// 64 partitions of 9 KiB batches sharing a 21 MB fetch ask 330 KB each, not 1 MiB, so
    /// that every partition gets data in every round.
    #[test]
    fn a_partition_asks_for_its_share() {
        let share = 21 * 1000 * 1000 / 64;
        assert_eq!(partition_ask(share, None), share);
        assert_eq!(partition_ask(share, Some(9 * 1024)), share);
    }

    /// A share smaller than the partition's batches would bring cut batches: the ask covers
    /// two of its largest, and never drops below the floor.
    #[test]
    fn the_ask_covers_the_largest_batch_and_the_floor() {
        assert_eq!(partition_ask(2_000, Some(MIB)), 2 * MIB);
        assert_eq!(partition_ask(2_000, Some(1_000)), 64 * 1024);
        assert_eq!(partition_ask(2_000, None), 64 * 1024);
        assert_eq!(partition_ask(2_000, Some(i32::MAX)), i32::MAX);
        // One partition: the whole fetch.
        assert_eq!(partition_ask(21 * MIB, Some(16 * 1024)), 21 * MIB);
    }
}
