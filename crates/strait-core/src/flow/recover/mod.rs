//! Crash recovery: where each partition resumes, so that a restart or a failed produce loses no
//! record and never writes a target offset the map gives to another (`docs/design.md` §4.4).
//!
//! A produce whose answer was lost, or a crash between a produce and the map flush after it,
//! leaves records on the target that the map does not hold. Recovery finds where each partition
//! stands again, from the map and from what both clusters hold now, when a partition is first
//! placed (start-up, a new topic or partition), after any failed produce (every partition), and
//! when a refused partition is tried again:
//!
//! - **The target ends where the map does**: resume at the map's source end.
//! - **The target holds more than the map**: its tail is matched, record by record
//!   (`tail.rs`: key, value, headers, create time; not batch bytes), against the source records
//!   the flow would have written from the map's end, with markers and aborted transactions
//!   skipped as a round skips them. A match is recorded and not written again; the rest is
//!   written again and counted as duplicates. Source records deleted before they were matched
//!   are recorded as lost, and their copies on the target kept. Guarantee: at least once, never
//!   loss, duplicates counted.
//! - **The target holds less than the map, or another record where the map's last copy should
//!   be**: the remote or source topic was deleted and created again, or truncated. The
//!   partition is halted (`FlowError::Diverged`), never written at offsets the map gives to
//!   others; the others go on.
//! - **No map, but the remote topic has records** (filled by MM2 or an earlier strait, or the
//!   map topic deleted): both sides are first lined up, whichever deleted its oldest records,
//!   then matched as above; an earlier mirror's extra copies are recognised and counted.
//!
//! While running, OFFSET_OUT_OF_RANGE from a fetch is handled here too: a source log start past
//! the partition's position is recorded as lost; a position past the source's end halts it.
//!
//! What placing needs from the clusters is asked for all partitions at once (`placement.rs`);
//! matching a tail reads one partition at a time.

mod matcher;
mod placement;
mod tail;

use std::time::Duration;

use strait_kafka::admin::{IsolationLevel, OffsetSpec};
use strait_kafka::fetch::{FetchOptions, FetchPosition};
use strait_kafka::produce::RawProducer;
use strait_kafka::{Client, TopicPartition};
use strait_wire::offset_map::{MapEntry, OffsetMap, SourcePartition};
use strait_wire::{BatchScanner, RawBatch};

use super::error::FlowError;
use super::events::{Event, Matched};
use super::{record_loss, source_partition, Flow};
use crate::config::StartPosition;
use crate::internal::map_store::MapStore;
use matcher::{Matcher, Next, Side, SourceRead, Step, TargetRead};
pub(super) use placement::PLACEMENT_PATIENCE;
use placement::{Listed, Survey, ToPlace};

/// Where placing a partition left it.
#[derive(Debug)]
pub(super) enum Placement {
    /// It resumes at this source offset.
    At(i64),
    /// It no longer matches its offset map: it is halted, with why.
    Diverged(String),
    /// It cannot be placed now, for a reason time can fix (its leader offline on either
    /// cluster, its topic being deleted or created): it waits and is placed again alone later,
    /// while the others go on, as Kafka's consumers and MM2 go on without an offline partition.
    Waiting(strait_kafka::Error),
}

impl Flow {
    /// Places `parts` (source partition, remote partition, where it was if it has no map):
    /// [`Flow::initial_position`] of each, after one [`Survey`] of both clusters for all of
    /// them. Partition by partition: one that no longer matches its map, or cannot be placed
    /// now, says so in its [`Placement`], and the others are placed. Only an error that is not
    /// a partition's (fenced, the map unreadable) ends the placement.
    /// `patience`: how long offsets that cannot be listed are asked again
    /// ([`placement::PLACEMENT_PATIENCE`], or none for partitions tried again after a wait).
    pub(super) async fn place_all(
        &mut self,
        parts: Vec<(TopicPartition, TopicPartition, Option<i64>)>,
        patience: Duration,
    ) -> Result<Vec<(TopicPartition, TopicPartition, Placement)>, FlowError> {
        let to_place: Vec<ToPlace<'_>> = parts
            .iter()
            .map(|(source, remote, _)| ToPlace { source, remote })
            .collect();
        let survey = Survey::take(
            &self.source,
            &self.target,
            &to_place,
            &self.map,
            (
                self.config.auto_offset_reset == StartPosition::Latest,
                self.config.isolation_level,
            ),
            patience,
        )
        .await?;
        drop(to_place);
        let mut placed = Vec::with_capacity(parts.len());
        for (tp, remote, unmapped) in parts {
            let position = match self.initial_position(&tp, &remote, unmapped, &survey).await {
                Ok(position) => Placement::At(position),
                Err(FlowError::Diverged(why)) => Placement::Diverged(why),
                Err(FlowError::Kafka(e)) if e.is_retriable() && !e.is_fenced() => {
                    Placement::Waiting(e)
                }
                Err(e) => return Err(e),
            };
            placed.push((tp, remote, position));
        }
        Ok(placed)
    }

    /// An offset of `tp` from `survey`, its error if the survey could not list it, or asked
    /// alone if the survey did not ask.
    async fn listed(
        &self,
        survey: &Survey,
        which: Listed,
        tp: &TopicPartition,
    ) -> Result<i64, FlowError> {
        if let Some(offset) = survey.offset(which, tp) {
            return Ok(offset);
        }
        if let Some(e) = survey.error(which, tp) {
            return Err(FlowError::Kafka(e.clone()));
        }
        let uncommitted = IsolationLevel::ReadUncommitted;
        let (client, spec, isolation) = match which {
            Listed::TargetEnd => (&self.target, OffsetSpec::Latest, uncommitted),
            Listed::TargetStart => (&self.target, OffsetSpec::Earliest, uncommitted),
            Listed::SourceStart => (&self.source, OffsetSpec::Earliest, uncommitted),
            Listed::SourceEnd => (&self.source, OffsetSpec::Latest, uncommitted),
            Listed::SourceEndIsolated => (
                &self.source,
                OffsetSpec::Latest,
                self.config.isolation_level,
            ),
        };
        Ok(client.list_offset(tp, spec, isolation).await?.offset)
    }

    /// Where a partition never mirrored (no map, nothing on the target) starts: the source's
    /// log start, or with `consumer.auto.offset.reset = latest` its end (the last stable offset
    /// under read_committed), as MM2's consumer starts there. What lies before is not mirrored,
    /// and that is said once, not counted as lost: nothing was deleted.
    async fn start_position(
        &self,
        tp: &TopicPartition,
        earliest: i64,
        survey: &Survey,
    ) -> Result<i64, FlowError> {
        match self.config.auto_offset_reset {
            StartPosition::Earliest => Ok(earliest),
            StartPosition::Latest => {
                let latest = self.listed(survey, Listed::SourceEndIsolated, tp).await?;
                if latest > earliest {
                    tracing::info!(
                        partition = %tp,
                        start = latest,
                        skipped = latest - earliest,
                        "partition starts at the source's end (consumer.auto.offset.reset = \
                         latest): the records before it are not mirrored"
                    );
                }
                Ok(latest)
            }
        }
    }

    /// Where a partition resumes: the end of its map, after matching whatever the target holds
    /// beyond it; or for a partition never mirrored, `unmapped` if given (where it was before),
    /// else its start position (the source's log start, or its end under `latest`).
    async fn initial_position(
        &mut self,
        tp: &TopicPartition,
        remote: &TopicPartition,
        unmapped: Option<i64>,
        survey: &Survey,
    ) -> Result<i64, FlowError> {
        let sp = source_partition(tp);
        let mapped = self
            .map
            .partition(&sp)
            .and_then(|m| Some((m.extent()?.src_end, m.dst_end().unwrap_or(0))));
        let target_end = self.listed(survey, Listed::TargetEnd, remote).await?;
        // The target may have deleted its oldest records (retention, DeleteRecords): what it
        // holds beyond the map starts at its log start at the earliest.
        let target_start = self.listed(survey, Listed::TargetStart, remote).await?;
        let (src, dst) = match mapped {
            Some(m) => m,
            None => {
                let earliest = self.listed(survey, Listed::SourceStart, tp).await?;
                if target_end <= target_start {
                    return match unmapped {
                        Some(position) => Ok(position),
                        None => self.start_position(tp, earliest, survey).await,
                    };
                }
                self.align_without_map(tp, remote, earliest, target_start, target_end)
                    .await?
            }
        };
        if mapped.is_some() {
            let source_end = self.listed(survey, Listed::SourceEnd, tp).await?;
            if source_end < src {
                return Err(FlowError::Diverged(format!(
                    "source partition {tp} ends at offset {source_end}, but the offset map says \
                     strait mirrored it up to offset {src}: the source topic was deleted and \
                     created again, or truncated (an unclean leader election), and its offsets \
                     from {source_end} on are not the records strait mirrored. {}",
                    self.diverged_advice()
                )));
            }
        }
        if let Some(last) = self
            .map
            .partition(&sp)
            .and_then(|m| m.segments().last().copied())
        {
            self.check_last_copy(tp, remote, &last, target_start, survey)
                .await?;
        }
        if target_end > dst {
            let from = dst.max(target_start);
            if from > dst {
                tracing::warn!(
                    flow = %self.config.name(),
                    partition = %tp,
                    remote = %remote,
                    mapped_end = dst,
                    target_log_start = target_start,
                    "the target deleted records beyond the offset map's end (an earlier run \
                     wrote them and stopped before recording them): they cannot be matched, \
                     and matching starts at the target's log start"
                );
            }
            return self.recover_tail(tp, remote, src, from, target_end).await;
        }
        if target_end < dst {
            // Writing on would put records at target offsets the map gives to others.
            return Err(FlowError::Diverged(format!(
                "{remote} on the target ends at offset {target_end}, but the offset map says \
                 {dst} records were written to it: the remote topic was deleted and created \
                 again, or truncated, on the target, and the records below offset {dst} that \
                 were mirrored to it are gone. {}",
                self.remap_advice()
            )));
        }
        Ok(src)
    }

    /// The target must still hold, at the last target offset the map gives, a copy of its
    /// source record: if it holds another record there, the remote topic lost records it had
    /// acknowledged (an unclean leader election on the target, or the topic deleted and created
    /// again) and was written to since, so that its end alone no longer shows it. Where either
    /// record is gone (retention, compaction), nothing can be told and nothing is said.
    async fn check_last_copy(
        &self,
        tp: &TopicPartition,
        remote: &TopicPartition,
        last: &strait_wire::offset_map::Segment,
        target_start: i64,
        survey: &Survey,
    ) -> Result<(), FlowError> {
        let (src, dst) = (last.src_end() - 1, last.dst_end() - 1);
        if dst < target_start {
            return Ok(());
        }
        let options = FetchOptions {
            max_wait: Duration::from_millis(10),
            isolation: IsolationLevel::ReadUncommitted,
            ..FetchOptions::default()
        };
        let copy = match survey.record(true, remote, dst) {
            Some(found) => found,
            None => record_at(&self.target, remote, dst, &options).await?,
        };
        let Some(copy) = copy else {
            return Ok(());
        };
        let original = match survey.record(false, tp, src) {
            Some(found) => found,
            None => record_at(&self.source, tp, src, &options).await?,
        };
        let Some(original) = original else {
            return Ok(());
        };
        if copy.same_record(&original) {
            return Ok(());
        }
        Err(FlowError::Diverged(format!(
            "{remote} on the target holds at offset {dst} a record that is not the copy of \
             source offset {src} the offset map says was written there ({} differ, target vs \
             source): either the remote topic lost records it had acknowledged (an unclean \
             leader election on the target, or the topic deleted and created again) and was \
             written to since, or the source topic was deleted and created again (or truncated) \
             and its offset {src} holds another record now. {}",
            copy.differences(&original),
            self.remap_advice()
        )))
    }

    /// A partition without a map whose remote topic holds `target_start..target_end` (MM2 or an
    /// earlier strait filled it, or the map topic was deleted): where the source (from its log
    /// start `earliest`) and the target line up, as `(source offset, target offset)` to match
    /// from. Either side may have deleted its oldest records since the copy was made:
    ///
    /// - the target's first record is a copy of a later source record: matching starts there,
    ///   and the source records before it, whose copies the target deleted, are not copied
    ///   again;
    /// - the source's first record has its copy further on in the target: matching starts
    ///   there, and the target records before it are copies of records the source deleted.
    ///
    /// When neither is found (the target holds other records), matching starts at both starts,
    /// as before: what does not match is written again.
    async fn align_without_map(
        &self,
        tp: &TopicPartition,
        remote: &TopicPartition,
        earliest: i64,
        target_start: i64,
        target_end: i64,
    ) -> Result<(i64, i64), FlowError> {
        /// Fetches a search may read on either side before it gives up.
        const SEARCH_FETCHES: usize = 4;
        let target_options = FetchOptions {
            max_wait: Duration::from_millis(10),
            isolation: IsolationLevel::ReadCommitted,
            ..FetchOptions::default()
        };
        let source_options = FetchOptions {
            isolation: self.config.isolation_level,
            ..target_options
        };
        let fallback = (earliest, target_start);
        // Either side's log start may move meanwhile: then matching starts as before, and
        // handles it.
        let first = |result: Result<(Vec<tail::TailRecord>, i64), FlowError>| match result {
            Ok((records, _)) => Ok(records.into_iter().next()),
            Err(e) if tail::is_out_of_range(&e) => Ok(None),
            Err(e) => Err(e),
        };
        let t = first(
            tail::mirrorable_records(&self.target, remote, target_start, &target_options).await,
        )?;
        let s = first(tail::mirrorable_records(&self.source, tp, earliest, &source_options).await)?;
        let (Some(t), Some(s)) = (t, s) else {
            return Ok(fallback);
        };
        if t.same_record(&s) {
            return Ok((earliest, t.offset));
        }
        let aligned = match tail::find_record(
            &self.source,
            tp,
            &t,
            earliest,
            i64::MAX,
            SEARCH_FETCHES,
            &source_options,
        )
        .await?
        {
            Some(original) => Some((original, t.offset)),
            None => tail::find_record(
                &self.target,
                remote,
                &s,
                target_start,
                target_end,
                SEARCH_FETCHES,
                &target_options,
            )
            .await?
            .map(|copy| (earliest, copy)),
        };
        let Some((src, dst)) = aligned else {
            return Ok(fallback);
        };
        tracing::info!(
            flow = %self.config.name(),
            partition = %tp,
            remote = %remote,
            source_from = src,
            target_from = dst,
            not_copied_again = src - earliest,
            target_copies_of_deleted = dst - target_start,
            "no offset map for this partition: the remote topic holds copies of it from source \
             offset {src} at target offset {dst}; source records before {src} (their copies were \
             deleted on the target) are not copied again, and target records before {dst} are \
             copies of records deleted on the source"
        );
        Ok((src, dst))
    }

    /// The target holds `dst..target_end` beyond the map. Matches those records, in order,
    /// against the source records from `src` that the flow would have written (aborted
    /// transactions and markers skipped as in a round), record by record (`matcher.rs` decides,
    /// this reads what it asks for), and records the matches. Returns where mirroring resumes,
    /// possibly inside a source batch (the next round rebuilds the rest of it).
    ///
    /// Source records deleted before they were matched (the source's log start passed `src`,
    /// OFFSET_OUT_OF_RANGE) are recorded and counted as lost, as in a round: strait cannot show
    /// the target holds them. The target records that are copies of them are kept: matching
    /// goes on at the copy of the first record the source still has, and the target records
    /// before it are neither matched nor written again nor counted as duplicates.
    async fn recover_tail(
        &mut self,
        tp: &TopicPartition,
        remote: &TopicPartition,
        src: i64,
        dst: i64,
        target_end: i64,
    ) -> Result<i64, FlowError> {
        let sp = source_partition(tp);
        // Only committed records of the target are matched, up to its last stable offset: a
        // transactional flow's target holds markers, and aborted data where an owner was fenced
        // or failed; any target may hold an aborted or still open transaction of copies (an
        // exactly-once MirrorMaker 2 killed mid-transaction, or a fenced unit). Such a copy is
        // not a mirrored record: a read_committed consumer never sees it. The source is read as
        // a round reads it.
        let target_options = FetchOptions {
            max_wait: Duration::from_millis(10),
            isolation: IsolationLevel::ReadCommitted,
            ..FetchOptions::default()
        };
        let source_options = FetchOptions {
            isolation: self.config.isolation_level,
            ..target_options
        };
        self.orphan_ends.remove(tp);
        let mapped = self.map.partition(&sp);
        let after_loss = mapped.is_some_and(|m| ends_in_loss_at(m, src));
        // No map before this matching: the remote topic was filled by another mirror
        // (MirrorMaker 2), or the map topic was deleted.
        let adopted = mapped.is_none_or(|m| m.extent().is_none());
        let started = std::time::Instant::now();
        let mut lost = 0u64;
        let (mut matcher, mut next) = Matcher::start(src, dst, target_end, after_loss);
        loop {
            next = match next {
                Next::ReadTarget(from) => {
                    matcher.target(read_target(&self.target, remote, from, &target_options).await?)
                }
                Next::ReadSource(from) => {
                    matcher.source(read_source(&self.source, tp, from, &source_options).await?)
                }
                Next::FirstSource(from) => matcher.first(
                    tail::mirrorable_records(&self.source, tp, from, &source_options)
                        .await
                        .ok()
                        .and_then(|(records, _)| records.into_iter().next()),
                ),
                Next::Search(search) => {
                    let (client, partition, options) = match search.side {
                        Side::Source => (&self.source, tp, &source_options),
                        Side::Target => (&self.target, remote, &target_options),
                    };
                    let found = tail::find_record(
                        client,
                        partition,
                        &search.wanted,
                        search.from,
                        search.until,
                        search.fetches,
                        options,
                    );
                    matcher.found(found.await?)
                }
                Next::Lose { steps, from, to } => {
                    record_steps(&mut self.map, &mut self.store, &sp, steps)?;
                    lost += record_loss(&mut self.map, &mut self.store, &sp, from, to)?;
                    let metrics = self.events.metrics().partition(tp, remote);
                    self.events.tell(tp, &metrics, Event::Lost { from, to });
                    matcher.lost()
                }
                Next::Done => break,
            };
        }
        let outcome = matcher.finish();
        record_steps(&mut self.map, &mut self.store, &sp, outcome.steps)?;
        let dst = outcome.dst;
        if outcome.orphans > 0 && self.map.partition(&sp).and_then(|m| m.dst_end()) < Some(dst) {
            // Written at `dst` next: the target records before it are not duplicates.
            self.orphan_ends.insert(tp.clone(), dst);
        }
        let metrics = self.events.metrics().partition(tp, remote);
        self.events.tell(
            tp,
            &metrics,
            Event::Matched(Matched {
                remote,
                matched: outcome.matched,
                extra: outcome.extra,
                unmatched: (target_end - dst).max(0),
                lost,
                orphans: outcome.orphans,
                adopted,
                resumes_at: outcome.src,
                elapsed_ms: started.elapsed().as_millis() as u64,
                stopped_by: outcome.stopped_by.as_deref(),
            }),
        );
        self.persist_map().await?;
        Ok(outcome.src)
    }

    /// After a produce failure the producer's sequences have a hole: start a new epoch of the
    /// producer (a new producer id only if the target no longer knows ours) and put every
    /// partition back where its map ends, matching what the target already holds.
    pub(super) async fn reset_after_failure(&mut self) -> Result<(), FlowError> {
        if std::mem::take(&mut self.fresh_producer) && !self.transactional() {
            self.producer =
                RawProducer::new(self.target.clone(), self.options.producer.clone()).await?;
        } else {
            self.new_epoch().await?;
        }
        // An unplaced partition is tried again on its own schedule (`Flow::place_waiting`).
        let parts: Vec<(TopicPartition, TopicPartition, Option<i64>)> = self
            .partitions
            .iter()
            .filter(|(_, p)| !p.stopped() && !p.waits_unplaced())
            .map(|(tp, p)| {
                let resume = p.waiting.as_ref().and_then(|w| w.resume);
                (tp.clone(), p.remote.clone(), resume)
            })
            .collect();
        let placed = self.place_all(parts, PLACEMENT_PATIENCE).await?;
        // Not one partition placed, each for a reason time can fix: the cluster is out of
        // reach rather than some partitions offline. The flow stalls and tries again, as before.
        let none = placed
            .iter()
            .all(|(_, _, p)| matches!(p, Placement::Waiting(_)));
        if let (true, Some((_, _, Placement::Waiting(e)))) = (none, placed.first()) {
            return Err(FlowError::Kafka(e.clone()));
        }
        for (tp, _, placed) in placed {
            match placed {
                Placement::At(position) => {
                    if let Some(p) = self.partitions.get_mut(&tp) {
                        p.position = position;
                        p.metrics.placed(position);
                    }
                }
                Placement::Diverged(why) => self.halt(&tp, why),
                Placement::Waiting(e) => {
                    let resume = self.partitions.get(&tp).map(|p| {
                        p.waiting
                            .as_ref()
                            .and_then(|w| w.resume)
                            .unwrap_or(p.position)
                    });
                    self.unplaced(&tp, resume, &e);
                }
            }
        }
        Ok(())
    }

    /// OFFSET_OUT_OF_RANGE: either the source deleted records we had not mirrored yet (the log
    /// start passed us: loss, recorded) or our position is past the source's end (the source
    /// was truncated, e.g. an unclean leader election: we wait at its end and say so).
    pub(super) async fn handle_out_of_range(
        &mut self,
        tp: &TopicPartition,
    ) -> Result<(), FlowError> {
        let earliest = self
            .source
            .list_offset(tp, OffsetSpec::Earliest, IsolationLevel::ReadUncommitted)
            .await?
            .offset;
        let latest = self
            .source
            .list_offset(tp, OffsetSpec::Latest, IsolationLevel::ReadUncommitted)
            .await?
            .offset;
        let sp = source_partition(tp);
        let Some(state) = self.partitions.get_mut(tp) else {
            return Ok(());
        };
        if earliest > state.position {
            record_loss(
                &mut self.map,
                &mut self.store,
                &sp,
                state.position,
                earliest,
            )?;
            self.events.tell(
                tp,
                &state.metrics,
                Event::Lost {
                    from: state.position,
                    to: earliest,
                },
            );
            state.position = earliest;
        } else if state.position > latest {
            // Moving to the source's end would skip its new records there unrecorded, and the
            // map refuses offsets it has recorded already.
            let position = state.position;
            let why = format!(
                "source partition {tp} ends at offset {latest}, before offset {position}, up to \
                 which strait mirrored it: the source topic was deleted and created again, or \
                 truncated (an unclean leader election), and its offsets from {latest} on are \
                 not the records strait mirrored. {}",
                self.diverged_advice()
            );
            self.halt(tp, why);
        }
        Ok(())
    }
}

/// Puts `steps` in `map`, in order, noting the changes in `store`.
fn record_steps(
    map: &mut OffsetMap,
    store: &mut MapStore,
    sp: &SourcePartition,
    steps: Vec<Step>,
) -> Result<(), FlowError> {
    for step in steps {
        let entry = match step {
            Step::Match { src, dst, n } => {
                MapEntry::Segment(map.record(sp, src, dst, n).map_err(FlowError::map(sp))?)
            }
            Step::Skip { from, to } => MapEntry::Extent(
                map.record_skipped(sp, from, to)
                    .map_err(FlowError::map(sp))?,
            ),
        };
        store.note(sp, entry);
    }
    Ok(())
}

/// The target's committed records from `from`, for the matcher.
async fn read_target(
    client: &Client,
    tp: &TopicPartition,
    from: i64,
    options: &FetchOptions,
) -> Result<TargetRead, FlowError> {
    match tail::mirrorable_records(client, tp, from, options).await {
        Ok((records, next)) => Ok(TargetRead::Records { records, next }),
        Err(e) if tail::is_out_of_range(&e) => Ok(TargetRead::Deleted),
        Err(e) => Err(e),
    }
}

/// The source from `from`, as a round reads it, for the matcher; where it starts now if it
/// deleted its records there.
async fn read_source(
    client: &Client,
    tp: &TopicPartition,
    from: i64,
    options: &FetchOptions,
) -> Result<SourceRead, FlowError> {
    match tail::read_items(client, tp, from, options).await {
        Ok(items) => Ok(SourceRead::Items(items)),
        Err(e) if tail::is_out_of_range(&e) => {
            let earliest = client
                .list_offset(tp, OffsetSpec::Earliest, IsolationLevel::ReadUncommitted)
                .await?;
            Ok(SourceRead::StartsAt(earliest.offset))
        }
        Err(e) => Err(e),
    }
}

/// Whether the last thing `map` recorded is a lost range that ends at `src`, with nothing
/// mirrored after it: target records beyond the map may be copies of the records it lost.
fn ends_in_loss_at(map: &strait_wire::offset_map::PartitionMap, src: i64) -> bool {
    map.lost_ranges().last().is_some_and(|lost| {
        lost.src_to == src
            && map
                .segments()
                .last()
                .is_none_or(|s| s.src_end() <= lost.src_from)
    })
}

async fn fetch_data(
    client: &Client,
    tp: &TopicPartition,
    offset: i64,
    options: &FetchOptions,
) -> Result<strait_kafka::fetch::FetchedData, FlowError> {
    let mut results = client
        .fetch(&[FetchPosition::new(tp.clone(), offset)], options)
        .await;
    Ok(results
        .remove(tp)
        .unwrap_or(Err(strait_kafka::Error::Closed))?)
}

/// The record at exactly `offset`, read uncommitted; `None` if it is gone (retention,
/// compaction) or unreadable.
async fn record_at(
    client: &Client,
    tp: &TopicPartition,
    offset: i64,
    options: &FetchOptions,
) -> Result<Option<tail::TailRecord>, FlowError> {
    let batches = match fetch_batches(client, tp, offset, options).await {
        Ok(batches) => batches,
        Err(e) if tail::is_out_of_range(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(batches
        .first()
        .and_then(|first| placement::record_in(first, offset)))
}

async fn fetch_batches(
    client: &Client,
    tp: &TopicPartition,
    offset: i64,
    options: &FetchOptions,
) -> Result<Vec<RawBatch>, FlowError> {
    let data = fetch_data(client, tp, offset, options).await?;
    Ok(BatchScanner::new(data.records)
        .filter_map(Result::ok)
        .filter(|b| b.header.next_offset() > offset)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use strait_wire::offset_map::PartitionMap;

    #[test]
    fn a_loss_ends_the_map_only_while_nothing_is_mirrored_after_it() {
        let mut map = PartitionMap::new();
        map.record(0, 0, 40).unwrap();
        assert!(!ends_in_loss_at(&map, 40), "no loss");
        map.record_lost(40, 60).unwrap();
        assert!(ends_in_loss_at(&map, 60));
        assert!(!ends_in_loss_at(&map, 59), "not where matching resumes");
        map.record_skipped(60, 61).unwrap();
        assert!(!ends_in_loss_at(&map, 61), "a marker after the loss");
        map.record(61, 40, 5).unwrap();
        assert!(!ends_in_loss_at(&map, 66), "mirrored after the loss");
    }
}
