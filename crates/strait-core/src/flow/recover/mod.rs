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

mod placement;
mod tail;

use std::time::Duration;

use strait_kafka::admin::{IsolationLevel, OffsetSpec};
use strait_kafka::fetch::{FetchOptions, FetchPosition};
use strait_kafka::produce::RawProducer;
use strait_kafka::{Client, TopicPartition};
use strait_wire::offset_map::{MapEntry, OffsetMap, SourcePartition};
use strait_wire::{BatchScanner, RawBatch};

use super::classify::{AbortTracker, Action};
use super::error::FlowError;
use super::events::{Event, Matched};
use super::{record_loss, source_partition, Flow};
use crate::config::StartPosition;
use crate::internal::map_store::MapStore;
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
    /// transactions and markers skipped as in a round), record by record (`tail.rs`), and
    /// records the matches. Returns where mirroring resumes, possibly inside a source batch (the
    /// next round rebuilds the rest of it).
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
        mut src: i64,
        mut dst: i64,
        target_end: i64,
    ) -> Result<i64, FlowError> {
        let sp = source_partition(tp);
        // Only committed records of the target are matched, up to its last stable offset: a
        // transactional flow's target holds markers, and aborted data where an owner was fenced
        // or failed; any target may hold an aborted or still open transaction of copies (an
        // exactly-once MirrorMaker 2 killed mid-transaction, or a fenced unit). Such a copy is
        // not a mirrored record: a read_committed consumer never sees it. The offsets between
        // committed records are gaps, neither matched nor extra copies.
        let options = FetchOptions {
            max_wait: Duration::from_millis(10),
            isolation: IsolationLevel::ReadCommitted,
            ..FetchOptions::default()
        };
        // The source is read as a round reads it.
        let committed = FetchOptions {
            isolation: self.config.isolation_level,
            ..options
        };
        let mut gaps = 0i64;
        self.orphan_ends.remove(tp);
        let mut matched = 0i64;
        let mut lost = 0u64;
        // Target records that are copies of source records deleted before they were recorded.
        let mut orphans = 0i64;
        // Whether the target records from `dst` may be copies of records the source deleted: the
        // map (or this matching) has just recorded a loss that ends at `src`.
        let mut after_loss = self
            .map
            .partition(&sp)
            .is_some_and(|m| ends_in_loss_at(m, src));
        let dst_start = dst;
        // Matches and skips not yet in the map, in order: a rewind (below) can take back those
        // from a source offset on. Put in the map before a loss is recorded, and at the end.
        let mut pending = Pending::default();
        // The create time of the last record matched.
        let mut last_matched: Option<i64> = None;
        // No map before this matching: the remote topic was filled by another mirror
        // (MirrorMaker 2), or the map topic was deleted.
        let adopted = self.map.partition(&sp).is_none_or(|m| m.extent().is_none());
        let started = std::time::Instant::now();
        let mut stopped_by: Option<String> = None;
        'outer: while dst < target_end {
            let progress = (src, dst);
            // The target's committed records from `dst`, whichever batches hold them.
            let target = match tail::mirrorable_records(&self.target, remote, dst, &options).await {
                Ok((records, next)) => {
                    let first = records.first().map_or(next, |r| r.offset);
                    if first > dst {
                        gaps += first - dst;
                        dst = first;
                    }
                    if records.is_empty() {
                        if next > progress.1 {
                            continue 'outer;
                        }
                        stopped_by = Some(format!(
                            "the target returned no committed records from offset {dst}"
                        ));
                        break;
                    }
                    records
                }
                Err(e) if tail::is_out_of_range(&e) => {
                    stopped_by = Some(format!(
                        "the target deleted its records at offset {dst} while they were matched"
                    ));
                    break;
                }
                Err(e) => return Err(e),
            };
            let mut target = target.into_iter();
            let source_data = match fetch_data(&self.source, tp, src, &committed).await {
                Ok(data) => data,
                Err(e) if tail::is_out_of_range(&e) => {
                    let earliest = self
                        .source
                        .list_offset(tp, OffsetSpec::Earliest, IsolationLevel::ReadUncommitted)
                        .await?
                        .offset;
                    if earliest <= src {
                        stopped_by =
                            Some(format!("the source ends before offset {src} (truncated?)"));
                        break;
                    }
                    matched += pending.apply(&mut self.map, &mut self.store, &sp)?;
                    lost += record_loss(&mut self.map, &mut self.store, &sp, src, earliest)?;
                    let metrics = self.metrics.partition(tp, remote);
                    self.events.tell(
                        tp,
                        &metrics,
                        Event::Lost {
                            from: src,
                            to: earliest,
                        },
                    );
                    src = earliest;
                    after_loss = true;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let mut tracker = AbortTracker::new(&source_data.aborted);
            let from = src;
            let source_batches = BatchScanner::new(source_data.records)
                .filter_map(Result::ok)
                .filter(move |b| b.header.next_offset() > from);
            let mut target_ran_out = false;
            'batches: for b in source_batches {
                let b = match tracker.classify(b) {
                    // Skipped over, as a round would.
                    Action::Skip { from, to, .. } => {
                        pending.skip(from.max(src), to);
                        src = to;
                        continue;
                    }
                    Action::Forward(b) | Action::Rebuild(b) => b,
                };
                let records = match tail::records_from(&b, src) {
                    Ok(records) => records,
                    Err(e) => {
                        stopped_by = Some(format!(
                            "the source batch at offset {} cannot be read: {e}",
                            b.header.base_offset
                        ));
                        break 'outer;
                    }
                };
                for s in records {
                    let Some(t) = target.next() else {
                        // This fetch of the target ends here: fetch both again from here.
                        target_ran_out = true;
                        break 'batches;
                    };
                    if t.offset > dst {
                        gaps += t.offset - dst;
                        dst = t.offset;
                    }
                    if t.offset != dst {
                        stopped_by = Some(format!(
                            "the target's next record is at offset {}, not {dst}",
                            t.offset
                        ));
                        break 'outer;
                    }
                    if !t.same_record(&s) && after_loss {
                        // The target records from here are copies of records the source
                        // deleted, up to the copy of `s` if the tail holds one.
                        let copy = tail::find_record(
                            &self.target,
                            remote,
                            &s,
                            dst,
                            target_end,
                            usize::MAX,
                            &options,
                        )
                        .await?;
                        let to = copy.unwrap_or(target_end);
                        orphans += to - dst;
                        dst = to;
                        after_loss = false;
                        continue 'outer;
                    }
                    if !t.same_record(&s) {
                        // The target may hold some records twice: MirrorMaker 2 is at least
                        // once, and a task that restarts (a crash, a rebalance) copies again
                        // what it had copied since its last offset commit. Then `t` is a second
                        // copy of a source record already matched here: those records are
                        // matched again, to their later copies, so that a consumer placed
                        // through the map after the cutover does not read the second copies.
                        // The first copies are kept, left out of the map and counted as
                        // duplicates.
                        if let Some(again) = tail::find_record(
                            &self.source,
                            tp,
                            &t,
                            pending.floor.unwrap_or(src),
                            src,
                            EXTRA_COPIES_SEARCH_FETCHES,
                            &committed,
                        )
                        .await?
                        {
                            pending.take_back_from(again);
                            src = again;
                            continue 'outer;
                        }
                        // The second copies may start before the records matched here, at
                        // records the source has deleted since: then the copy of the first record
                        // matched here comes further on. Looked for only when `t` is older than
                        // the last record matched (a copy made again), as this search reads ahead.
                        let older = matches!(
                            (t.timestamp, last_matched),
                            (Some(t), Some(last)) if t < last
                        );
                        if let (true, Some(floor)) = (older, pending.floor) {
                            let first =
                                tail::mirrorable_records(&self.source, tp, floor, &committed)
                                    .await
                                    .ok()
                                    .and_then(|(records, _)| records.into_iter().next());
                            if let Some(first) = first {
                                if let Some(copy) = tail::find_record(
                                    &self.target,
                                    remote,
                                    &first,
                                    dst + 1,
                                    target_end,
                                    RECOPY_SEARCH_FETCHES,
                                    &options,
                                )
                                .await?
                                {
                                    pending.take_back_from(floor);
                                    src = floor;
                                    dst = copy;
                                    continue 'outer;
                                }
                            }
                        }
                        // A compacted source may also have removed records whose copies the
                        // target holds: the copy of `s` comes further on, and the target
                        // records before it are not copies of `s` or of anything after it. They
                        // are kept, left out of the map and counted as duplicates.
                        if let Some(copy) = tail::find_record(
                            &self.target,
                            remote,
                            &s,
                            dst + 1,
                            target_end,
                            EXTRA_COPIES_SEARCH_FETCHES,
                            &options,
                        )
                        .await?
                        {
                            dst = copy;
                            continue 'outer;
                        }
                        // A compacted source may have removed the record the target holds a
                        // copy of (superseded by a later record with its key) since it was
                        // written; then it cannot be matched, and is written again by nobody.
                        let gone = if s.offset > src {
                            format!(
                                "; source offsets {src}..{} are no longer on the source \
                                 (compaction or retention), the target record may be a copy of \
                                 one of them",
                                s.offset
                            )
                        } else {
                            String::new()
                        };
                        stopped_by = Some(format!(
                            "target offset {} is not a copy of source offset {} ({} differ; \
                             target vs source){gone}",
                            t.offset,
                            s.offset,
                            t.differences(&s)
                        ));
                        break 'outer;
                    }
                    after_loss = false;
                    last_matched = s.timestamp;
                    pending.matched(s.offset, dst, src);
                    src = s.offset + 1;
                    dst += 1;
                }
                // All of the batch matched, trailing compaction holes included.
                src = b.header.next_offset();
            }
            if (src, dst) == progress {
                if after_loss && !target_ran_out {
                    // The source has nothing left to match: the rest of the tail is copies of
                    // what it deleted.
                    orphans += target_end - dst;
                    dst = target_end;
                    break;
                }
                stopped_by.get_or_insert_with(|| {
                    if target_ran_out {
                        format!("the target returned no records from offset {dst}")
                    } else {
                        format!("the source has no records from offset {src} to match")
                    }
                });
                break;
            }
        }
        matched += pending.apply(&mut self.map, &mut self.store, &sp)?;
        // Every target offset from `dst_start` to `dst` is matched, a copy of a record the source
        // lost, or an extra copy (left out of the map).
        let extra = dst - dst_start - matched - orphans - gaps;
        if orphans > 0 && self.map.partition(&sp).and_then(|m| m.dst_end()) < Some(dst) {
            // Written at `dst` next: the target records before it are not duplicates.
            self.orphan_ends.insert(tp.clone(), dst);
        }
        let unmatched = (target_end - dst).max(0);
        let metrics = self.metrics.partition(tp, remote);
        self.events.tell(
            tp,
            &metrics,
            Event::Matched(Matched {
                remote,
                matched,
                extra,
                unmatched,
                lost,
                orphans,
                adopted,
                resumes_at: src,
                elapsed_ms: started.elapsed().as_millis() as u64,
                stopped_by: stopped_by.as_deref(),
            }),
        );
        self.persist_map().await?;
        Ok(src)
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

/// Matches and skips that [`Flow::recover_tail`] has found and not yet put in the map.
#[derive(Debug, Default)]
struct Pending {
    /// The source offset the first of them starts at.
    floor: Option<i64>,
    steps: Vec<PendingStep>,
}

#[derive(Debug, Clone, Copy)]
enum PendingStep {
    /// Source offsets `src..src + n` are at target offsets `dst..dst + n`.
    Match { src: i64, dst: i64, n: i64 },
    /// Source offsets `from..to` are not mirrored (markers, aborted transactions).
    Skip { from: i64, to: i64 },
}

impl Pending {
    /// Source offset `src` matched target offset `dst`; `position` is where matching stood
    /// (`src` or before it, at compaction holes).
    fn matched(&mut self, src: i64, dst: i64, position: i64) {
        self.floor.get_or_insert(position);
        if let Some(PendingStep::Match { src: s, dst: d, n }) = self.steps.last_mut() {
            if *s + *n == src && *d + *n == dst {
                *n += 1;
                return;
            }
        }
        self.steps.push(PendingStep::Match { src, dst, n: 1 });
    }

    fn skip(&mut self, from: i64, to: i64) {
        self.floor.get_or_insert(from);
        self.steps.push(PendingStep::Skip { from, to });
    }

    /// Takes back every match and skip at source offset `from` and later.
    fn take_back_from(&mut self, from: i64) {
        while let Some(step) = self.steps.last_mut() {
            match step {
                PendingStep::Match { src, n, .. } if *src < from => {
                    *n = (*n).min(from - *src);
                    break;
                }
                PendingStep::Skip { from: f, to } if *f < from => {
                    *to = (*to).min(from);
                    break;
                }
                _ => {
                    self.steps.pop();
                }
            }
        }
    }

    /// Puts every step in `map` (noting the changes in `store`), in order; the number of
    /// records matched.
    fn apply(
        &mut self,
        map: &mut OffsetMap,
        store: &mut MapStore,
        sp: &SourcePartition,
    ) -> Result<i64, FlowError> {
        let mut matched = 0;
        for step in self.steps.drain(..) {
            match step {
                PendingStep::Match { src, dst, n } => {
                    let segment = map.record(sp, src, dst, n).map_err(FlowError::map(sp))?;
                    store.note(sp, MapEntry::Segment(segment));
                    matched += n;
                }
                PendingStep::Skip { from, to } => {
                    let extent = map
                        .record_skipped(sp, from, to)
                        .map_err(FlowError::map(sp))?;
                    store.note(sp, MapEntry::Extent(extent));
                }
            }
        }
        self.floor = None;
        Ok(matched)
    }
}

/// Fetches of the target read to find the copy of a source record further on, past records
/// that are not copies of it (an earlier mirror's extra copies): at least 1 MiB each.
const EXTRA_COPIES_SEARCH_FETCHES: usize = 64;

/// Fetches of the target read to find a second copy of the first record matched, past copies of
/// records the source has deleted.
const RECOPY_SEARCH_FETCHES: usize = 16;

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
