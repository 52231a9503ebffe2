//! What placing partitions needs from both clusters, asked for all of them at once.
//!
//! Placing a partition (where it resumes: `Flow::initial_position`) needs the target's log end
//! and start of its remote partition, the source's log start and end, and, for a partition with
//! a map, the record at the last offsets the map gives on either side (to tell that the target
//! still holds the copy it recorded). Asked one partition at a time, that is several round
//! trips to each cluster per partition: across 80 ms to the source, 64 partitions took 12 s to
//! start and 10,000 would take half an hour. A [`Survey`] asks each question once for every
//! partition being placed: one ListOffsets per leader per question, and one multi-partition
//! fetch per leader for the last copies, so placing costs a few round trips whatever the
//! partition count (`docs/design.md` §4.1).
//!
//! A partition whose offsets the survey could not list within its patience (its
//! leader offline, its topic being deleted) keeps its error: that partition waits and is placed
//! again alone later, and the others are placed now (`Flow::place_all`). A record the survey's
//! fetch did not bring (a batch too large for it) is asked again for that partition alone.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use strait_kafka::admin::{IsolationLevel, OffsetSpec};
use strait_kafka::fetch::{FetchOptions, FetchPosition, FetchResults};
use strait_kafka::{Client, TopicPartition};
use strait_wire::offset_map::OffsetMap;
use strait_wire::{BatchScanner, RawBatch};

use super::tail::{self, TailRecord};
use crate::flow::error::FlowError;
use crate::flow::source_partition;

/// Bytes asked per partition by a survey's fetch: one ordinary batch. A larger batch comes back
/// cut, and its partition's record is fetched again alone.
const SURVEY_PARTITION_BYTES: i32 = 64 * 1024;
/// Partitions per survey fetch: at [`SURVEY_PARTITION_BYTES`] each, 64 MiB at most per request.
const SURVEY_FETCH_PARTITIONS: usize = 1024;
/// How long placing asks again the partitions whose offsets could not be listed (a leader
/// moving answers within a second or two) before it leaves them to wait: a partition whose
/// leader is offline must not hold the others back for the client's whole operation timeout.
/// A waiting partition tried again is asked once, without patience: the round waits for it.
pub(in crate::flow) const PLACEMENT_PATIENCE: Duration = Duration::from_secs(3);

/// Which offset of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Listed {
    /// The remote partition's log end on the target.
    TargetEnd,
    /// The remote partition's log start on the target.
    TargetStart,
    /// The source partition's log start.
    SourceStart,
    /// The source partition's log end (read_uncommitted).
    SourceEnd,
    /// The source partition's end under the flow's isolation level (where
    /// `auto.offset.reset = latest` starts a new partition).
    SourceEndIsolated,
}

/// A partition to place: the source partition and its remote partition.
pub(super) struct ToPlace<'a> {
    pub(super) source: &'a TopicPartition,
    pub(super) remote: &'a TopicPartition,
}

/// The answers for a set of partitions being placed. A missing answer is asked alone.
#[derive(Debug, Default)]
pub(super) struct Survey {
    offsets: BTreeMap<(Listed, TopicPartition), i64>,
    /// Why an offset could not be listed within the survey's patience.
    errors: BTreeMap<(Listed, TopicPartition), strait_kafka::Error>,
    /// The record at an offset, per cluster (`true`: the target), where the survey's fetch
    /// answered for it: `None` when it is gone (retention, compaction).
    records: BTreeMap<(bool, TopicPartition, i64), Option<TailRecord>>,
}

impl Survey {
    /// Asks both clusters about `parts`: their offsets (asking again those that fail for
    /// `patience`), and for those with a map the records at the last offsets it gives.
    /// `latest_start`: whether new partitions start at the source's end
    /// (`auto.offset.reset = latest`), read under `isolation`.
    pub(super) async fn take(
        source: &Client,
        target: &Client,
        parts: &[ToPlace<'_>],
        map: &OffsetMap,
        (latest_start, isolation): (bool, IsolationLevel),
        patience: Duration,
    ) -> Result<Survey, FlowError> {
        if parts.is_empty() {
            return Ok(Survey::default());
        }
        let remotes = |spec| {
            parts
                .iter()
                .map(|p| (p.remote.clone(), spec))
                .collect::<Vec<_>>()
        };
        let sources = |spec| {
            parts
                .iter()
                .map(|p| (p.source.clone(), spec))
                .collect::<Vec<_>>()
        };
        let uncommitted = IsolationLevel::ReadUncommitted;
        let (remote_ends, remote_starts) =
            (remotes(OffsetSpec::Latest), remotes(OffsetSpec::Earliest));
        let (source_starts, source_ends) =
            (sources(OffsetSpec::Earliest), sources(OffsetSpec::Latest));
        let (target_end, target_start, source_start, source_end, source_end_isolated) = tokio::join!(
            target.list_offsets_within(&remote_ends, uncommitted, patience),
            target.list_offsets_within(&remote_starts, uncommitted, patience),
            source.list_offsets_within(&source_starts, uncommitted, patience),
            source.list_offsets_within(&source_ends, uncommitted, patience),
            async {
                if latest_start {
                    source
                        .list_offsets_within(&source_ends, isolation, patience)
                        .await
                } else {
                    Ok(BTreeMap::new())
                }
            },
        );
        let mut survey = Survey::default();
        for (which, listed) in [
            (Listed::TargetEnd, target_end?),
            (Listed::TargetStart, target_start?),
            (Listed::SourceStart, source_start?),
            (Listed::SourceEnd, source_end?),
            (Listed::SourceEndIsolated, source_end_isolated?),
        ] {
            for (tp, result) in listed {
                match result {
                    Ok(listed) => {
                        survey.offsets.insert((which, tp), listed.offset);
                    }
                    Err(e) => {
                        survey.errors.insert((which, tp), e);
                    }
                }
            }
        }
        // The records at the last offsets the maps give, where the target still holds them.
        let mut on_target = Vec::new();
        let mut on_source = Vec::new();
        for p in parts {
            let Some(last) = map
                .partition(&source_partition(p.source))
                .and_then(|m| m.segments().last().copied())
            else {
                continue;
            };
            let dst = last.dst_end() - 1;
            let held = survey
                .offsets
                .get(&(Listed::TargetStart, p.remote.clone()))
                .is_some_and(|start| dst >= *start);
            if held {
                on_target.push(position(p.remote, dst));
                on_source.push(position(p.source, last.src_end() - 1));
            }
        }
        let (target_records, source_records) = tokio::join!(
            records_at(target, &on_target),
            records_at(source, &on_source)
        );
        for (on_target, found) in [(true, target_records), (false, source_records)] {
            for ((tp, offset), record) in found {
                survey.records.insert((on_target, tp, offset), record);
            }
        }
        Ok(survey)
    }

    /// The surveyed offset, if the survey has it.
    pub(super) fn offset(&self, which: Listed, tp: &TopicPartition) -> Option<i64> {
        self.offsets.get(&(which, tp.clone())).copied()
    }

    /// Why the survey could not list that offset, if it could not.
    pub(super) fn error(&self, which: Listed, tp: &TopicPartition) -> Option<&strait_kafka::Error> {
        self.errors.get(&(which, tp.clone()))
    }

    /// The surveyed record at `offset` of `tp` on the target (`on_target`) or the source:
    /// `Some(None)` when it is gone, `None` when the survey did not find out.
    pub(super) fn record(
        &self,
        on_target: bool,
        tp: &TopicPartition,
        offset: i64,
    ) -> Option<Option<TailRecord>> {
        self.records.get(&(on_target, tp.clone(), offset)).cloned()
    }
}

fn position(tp: &TopicPartition, offset: i64) -> FetchPosition {
    FetchPosition {
        max_bytes: SURVEY_PARTITION_BYTES,
        ..FetchPosition::new(tp.clone(), offset)
    }
}

/// The record at each position's offset, read uncommitted, for the positions a fetch answered
/// conclusively: the record, or `None` when it is gone (out of range, or the batch holding its
/// offset no longer has it). Partitions whose answer was empty, cut or an error are left out.
async fn records_at(
    client: &Client,
    positions: &[FetchPosition],
) -> Vec<((TopicPartition, i64), Option<TailRecord>)> {
    let options = FetchOptions {
        max_wait: Duration::from_millis(10),
        max_bytes: SURVEY_PARTITION_BYTES.saturating_mul(SURVEY_FETCH_PARTITIONS as i32),
        isolation: IsolationLevel::ReadUncommitted,
        ..FetchOptions::default()
    };
    let mut out = Vec::new();
    for chunk in positions.chunks(SURVEY_FETCH_PARTITIONS) {
        let results: FetchResults = client.fetch(chunk, &options).await;
        for p in chunk {
            let offset = p.offset;
            let found = match results.get(&p.tp) {
                Some(Ok(data)) => {
                    let batches: Vec<RawBatch> = BatchScanner::new(data.records.clone())
                        .map_while(Result::ok)
                        .filter(|b| b.header.next_offset() > offset)
                        .collect();
                    match batches.first() {
                        Some(first) => record_in(first, offset),
                        None => continue,
                    }
                }
                Some(Err(e)) if e.code() == Some(ResponseError::OffsetOutOfRange) => None,
                _ => continue,
            };
            out.push(((p.tp.clone(), offset), found));
        }
    }
    out
}

/// The record at exactly `offset` in `batch`, the first batch fetched from it: `None` if the
/// batch no longer holds it (compaction) or cannot be read.
pub(super) fn record_in(batch: &RawBatch, offset: i64) -> Option<TailRecord> {
    tail::records_from(batch, offset)
        .ok()
        .and_then(|records| records.into_iter().next())
        .filter(|r| r.offset == offset)
}
