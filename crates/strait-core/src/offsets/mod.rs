//! Consumer-group offsets across clusters (`docs/design.md` §5): a group's committed offsets on the
//! source, translated through a flow's exact offset map to where the group continues on the
//! target, and back.
//!
//! Everything that moves a group between clusters (checkpoints, group sync, failover and
//! failback plans, export and import, the HTTP API) starts from [`translate_group`] or
//! [`translate_offsets`], so they all agree on every number; and everything that translates
//! forward then asks [`at_remote_end`] where a partition mirrored without a record continues.

pub mod checkpoints;
mod events;
pub mod group_sync;
mod passes;
pub mod plan;
pub mod readiness;

use std::collections::BTreeMap;
use std::time::Duration;

use strait_kafka::admin::{IsolationLevel, OffsetSpec};
use strait_kafka::groups::CommittedOffset;
use strait_kafka::{Client, TopicPartition};
use strait_wire::offset_map::{OffsetMap, ReverseTranslation, SourcePartition, Translation};

use crate::config::FlowConfig;

/// One partition of a group's committed offsets, translated to the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranslatedOffset {
    /// The source topic.
    pub topic: String,
    /// The partition (the same on both clusters).
    pub partition: i32,
    /// The topic's name on the target.
    pub remote_topic: String,
    /// The group's committed offset on the source: the next offset it reads there.
    pub source_offset: i64,
    /// The commit's metadata string, kept when the offset is written elsewhere.
    pub metadata: Option<String>,
    /// Where that position lands on the target.
    pub translation: Translation,
}

impl TranslatedOffset {
    /// The source partition.
    pub fn source_partition(&self) -> TopicPartition {
        TopicPartition::new(self.topic.clone(), self.partition)
    }

    /// The partition on the target.
    pub fn remote_partition(&self) -> TopicPartition {
        TopicPartition::new(self.remote_topic.clone(), self.partition)
    }

    /// The target offset a consumer continues from, if the partition is mapped at all.
    pub fn target_offset(&self) -> Option<i64> {
        self.translation.target()
    }

    /// Whether the target offset is exact: nothing skipped, nothing read twice.
    pub fn is_exact(&self) -> bool {
        self.translation.is_exact()
    }

    /// Records the group consumed on the source that are not on the target yet (the
    /// recovery-point gap), 0 when none.
    pub fn unreplicated(&self) -> i64 {
        match self.translation {
            Translation::PastMappedEnd { unreplicated, .. } => unreplicated,
            _ => 0,
        }
    }

    /// One line for an operator: why the translation is not exact, empty when it is.
    pub fn note(&self) -> String {
        describe(&self.translation)
    }
}

/// Why a translation is not exact, in words; empty when it is.
pub fn describe(translation: &Translation) -> String {
    match *translation {
        Translation::Exact { .. } => String::new(),
        Translation::PastMappedEnd { unreplicated, .. } => {
            format!("{unreplicated} records consumed on the source are not mirrored yet")
        }
        Translation::BeforeMappedStart { skipped, .. } => {
            format!("{skipped} unread records were never mirrored")
        }
        Translation::InLostRange { lost, .. } => {
            format!("{lost} records were lost on the source before mirroring")
        }
        Translation::Compacted { reread_at_most, .. } => format!(
            "the offset map was compacted below this offset (it was below the source's log \
             start): up to {reread_at_most} records will be read again"
        ),
        Translation::Unmapped => "partition not mirrored yet".into(),
    }
}

/// Why a reverse (failback) translation is not exact, in words; empty when it is.
pub fn describe_back(translation: &ReverseTranslation) -> String {
    match *translation {
        ReverseTranslation::Exact { .. } => String::new(),
        ReverseTranslation::InTargetGap { foreign, .. } => {
            format!("{foreign} target records ahead did not come from the source")
        }
        ReverseTranslation::PastMappedEnd { unmapped, .. } => format!(
            "{unmapped} records read on the target were never on the source \
             (written there after the failover; a reverse flow is needed to copy them back)"
        ),
        ReverseTranslation::Compacted { reread_at_most, .. } => format!(
            "the offset map was compacted below this offset: up to {reread_at_most} records \
             will be read again, if the source still has them"
        ),
        ReverseTranslation::Unmapped => "partition not mirrored".into(),
    }
}

/// The source partitions `map` has entries for, in order; only `topic`'s when given.
pub fn mapped_partitions(map: &OffsetMap, topic: Option<&str>) -> Vec<TopicPartition> {
    map.iter()
        .filter(|(p, _)| topic.is_none_or(|t| t == p.topic))
        .map(|(p, _)| TopicPartition::new(p.topic.clone(), p.partition))
        .collect()
}

/// Translates committed source offsets of `flow` through `map`, in partition order.
pub fn translate_offsets(
    flow: &FlowConfig,
    map: &OffsetMap,
    committed: impl IntoIterator<Item = (TopicPartition, CommittedOffset)>,
) -> Vec<TranslatedOffset> {
    let mut out: Vec<TranslatedOffset> = committed
        .into_iter()
        .map(|(tp, offset)| {
            let sp = SourcePartition::new(tp.topic.clone(), tp.partition);
            TranslatedOffset {
                remote_topic: flow.remote_topic(&tp.topic),
                translation: map.translate(&sp, offset.offset),
                topic: tp.topic,
                partition: tp.partition,
                source_offset: offset.offset,
                metadata: offset.metadata,
            }
        })
        .collect();
    out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    out
}

/// `group`'s committed offsets on `source` for every partition `map` covers (only `topic`'s
/// when given), translated. Partitions the group never committed are left out.
///
/// The partitions are asked for by name, which every broker answers (some answer nothing to the
/// "all topics" form).
pub async fn translate_group(
    source: &Client,
    flow: &FlowConfig,
    map: &OffsetMap,
    group: &str,
    topic: Option<&str>,
) -> Result<Vec<TranslatedOffset>, strait_kafka::Error> {
    let partitions = mapped_partitions(map, topic);
    if partitions.is_empty() {
        return Ok(Vec::new());
    }
    let committed = source.offset_fetch(group, Some(&partitions)).await?;
    Ok(translate_offsets(flow, map, committed))
}

/// How long [`at_remote_end`] waits for the target's ends before it leaves the rows as they are.
const REMOTE_END_PATIENCE: Duration = Duration::from_secs(5);

/// Whether `map` holds `offset` of `topic`-`partition` inside an extent without a segment, a
/// lost range or a compacted floor: the flow read that partition to there and found no
/// record to mirror (under read_committed, only aborted transactions and their markers).
/// [`OffsetMap::translate`] has no target offset to give (`Unmapped`), but nothing before the
/// extent's end is left to carry across.
pub fn in_extent_alone(map: &OffsetMap, topic: &str, partition: i32, offset: i64) -> bool {
    map.partition(&SourcePartition::new(topic.to_owned(), partition))
        .is_some_and(|m| {
            m.segments().is_empty()
                && m.lost_ranges().is_empty()
                && m.floor().is_none()
                && m.extent()
                    .is_some_and(|e| (e.src_start..=e.src_end).contains(&offset))
        })
}

/// Resolves the rows that `map` leaves `Unmapped` only because their partition was mirrored
/// without a record ([`in_extent_alone`]): such a position continues exactly at the remote
/// partition's end on `target` (ListOffsets latest, read_committed), where a consumer of the
/// remote topic reads the next record the flow mirrors from it. Every path that translates
/// forward for an operator or a group (`strait offsets translate`, `/v1/translate`,
/// `/v1/groups`, checkpoints, failover plans and apply) passes its rows through here.
///
/// Only when `source` says, asked after the target, that the partition still ends where the
/// extent does (its high watermark): a record past the extent may have been mirrored after
/// `map` was taken (a map persisted a while ago, a flow between two rounds), and the remote end
/// would then place the group past a record it has not read. Without `source` (it does not
/// answer), or when the source has more, the row stays `Unmapped`: not mirrored yet.
///
/// When `target` does not answer for a partition (an error, no answer within a few seconds),
/// its row stays `Unmapped`, never a guess, and the other rows are still answered.
pub async fn at_remote_end(
    source: Option<&Client>,
    target: &Client,
    map: &OffsetMap,
    rows: &mut [TranslatedOffset],
) {
    let Some(source) = source else {
        return;
    };
    let Some(ends) = remote_ends(target, map, rows).await else {
        return;
    };
    // Asked after the target: a record mirrored before the target answered was on the source
    // before that, so a source that still ends at the extent's end had none to mirror.
    let asks: Vec<(TopicPartition, OffsetSpec)> = ends
        .keys()
        .filter_map(|remote| {
            let row = rows.iter().find(|t| &t.remote_partition() == remote)?;
            Some((row.source_partition(), OffsetSpec::Latest))
        })
        .collect();
    let source_ends = match source
        .list_offsets_within(&asks, IsolationLevel::ReadUncommitted, REMOTE_END_PATIENCE)
        .await
    {
        Ok(ends) => ends,
        Err(e) => {
            tracing::warn!(
                error = %e,
                "cannot read the source partitions' ends: positions in partitions mirrored                  without a record stay untranslated"
            );
            return;
        }
    };
    for t in rows.iter_mut() {
        let Some(&end) = ends.get(&t.remote_partition()) else {
            continue;
        };
        if !in_extent_alone(map, &t.topic, t.partition, t.source_offset) {
            continue;
        }
        let extent_end = map
            .partition(&SourcePartition::new(t.topic.clone(), t.partition))
            .and_then(|m| m.extent())
            .map(|e| e.src_end);
        let unchanged = matches!(
            (source_ends.get(&t.source_partition()), extent_end),
            (Some(Ok(now)), Some(read_to)) if now.offset <= read_to
        );
        if unchanged && matches!(t.translation, Translation::Unmapped) {
            t.translation = Translation::Exact { target: end };
        }
    }
}

/// The remote partitions' ends on `target` now (read_committed), of the rows `map` leaves
/// `Unmapped` only because their partition was mirrored without a record
/// ([`in_extent_alone`]), by remote partition; `None` when there are none or `target` did not
/// answer (a partition it answered with an error is left out).
pub async fn remote_ends(
    target: &Client,
    map: &OffsetMap,
    rows: &[TranslatedOffset],
) -> Option<BTreeMap<TopicPartition, i64>> {
    let asks: Vec<(TopicPartition, OffsetSpec)> = rows
        .iter()
        .filter(|t| {
            matches!(t.translation, Translation::Unmapped)
                && in_extent_alone(map, &t.topic, t.partition, t.source_offset)
        })
        .map(|t| (t.remote_partition(), OffsetSpec::Latest))
        .collect();
    if asks.is_empty() {
        return None;
    }
    let ends = match target
        .list_offsets_within(&asks, IsolationLevel::ReadCommitted, REMOTE_END_PATIENCE)
        .await
    {
        Ok(ends) => ends,
        Err(e) => {
            tracing::warn!(
                error = %e,
                "cannot read the remote partitions' ends on the target: positions in \
                 partitions mirrored without a record stay untranslated"
            );
            return None;
        }
    };
    let mut out = BTreeMap::new();
    for (tp, end) in ends {
        match end {
            Ok(end) => {
                out.insert(tp, end.offset);
            }
            Err(e) => tracing::warn!(
                topic = %tp.topic,
                partition = tp.partition,
                error = %e,
                "cannot read the remote partition's end on the target: the position stays \
                 untranslated"
            ),
        }
    }
    Some(out)
}

/// The consumer groups on `client` that `flow` carries across (`groups` / `groups.exclude`),
/// sorted: groups of the consumer protocol, and groups that only store offsets (an empty
/// protocol type), as MM2's `listConsumerGroups`.
pub async fn consumer_groups(
    client: &Client,
    flow: &FlowConfig,
) -> Result<Vec<String>, strait_kafka::Error> {
    Ok(client
        .list_groups()
        .await?
        .into_iter()
        .filter(|g| g.protocol_type.is_empty() || g.protocol_type == "consumer")
        .map(|g| g.group_id)
        .filter(|g| flow.should_replicate_group(g))
        .collect())
}

/// The committed offsets of `group` on `client` for `partitions`, by partition.
pub async fn committed(
    client: &Client,
    group: &str,
    partitions: &[TopicPartition],
) -> Result<BTreeMap<TopicPartition, CommittedOffset>, strait_kafka::Error> {
    if partitions.is_empty() {
        return Ok(BTreeMap::new());
    }
    client.offset_fetch(group, Some(partitions)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a partition read without a record to mirror, and only inside what was read, is
    /// left for the target's end: a partition with a segment, a lost range, no map at all, or
    /// a position past the extent is the map's alone to answer.
    #[test]
    fn only_positions_inside_an_extent_without_segments_are_mirrored_without_a_record() {
        let mut map = OffsetMap::new();
        let alone = SourcePartition::new("t", 0);
        map.record_skipped(&alone, 0, 2).expect("skipped");
        assert_eq!(map.translate(&alone, 2), Translation::Unmapped);
        assert!(in_extent_alone(&map, "t", 0, 0));
        assert!(in_extent_alone(&map, "t", 0, 2));
        assert!(!in_extent_alone(&map, "t", 0, 3), "past what was read");
        let mirrored = SourcePartition::new("t", 1);
        map.record_skipped(&mirrored, 0, 2).expect("skipped");
        map.record(&mirrored, 2, 0, 1).expect("a record");
        assert!(!in_extent_alone(&map, "t", 1, 1), "it has a segment");
        let lost = SourcePartition::new("t", 2);
        map.record_lost(&lost, 0, 5).expect("lost");
        assert!(!in_extent_alone(&map, "t", 2, 3), "it has a lost range");
        assert!(!in_extent_alone(&map, "t", 3, 0), "no map");
    }
}
