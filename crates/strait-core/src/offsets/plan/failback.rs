//! Planning a failback: every group consuming the flow's remote topics on the target (B), and
//! where each continues on the source (A), through the offset map read backwards.
//!
//! Records B received after the failover (produced there directly) are not on A. A group's
//! position past them, or before them, is reported with how many such records it has read and
//! how many lie ahead of it: only a `B->A` flow can copy them to A.

use std::collections::{BTreeMap, BTreeSet};

use strait_kafka::admin::{IsolationLevel, OffsetSpec};
use strait_kafka::groups::CommittedOffset;
use strait_kafka::{Client, TopicPartition};
use strait_wire::offset_map::{OffsetMap, PartitionMap, ReverseTranslation, SourcePartition};

use super::{
    active_blocker, cluster_refs, committed_on, describe_group, moving_back, read_map, wanted,
    Direction, FailoverPlan, GroupPlan, PartitionPlan, PlanError,
};
use crate::config::FlowConfig;
use crate::filter::PatternList;
use crate::offsets::{consumer_groups, describe_back};

/// Plans the failback of `flow`'s groups from `target` (B) to `source` (A).
///
/// The groups are those on B that the flow's group filter passes, narrowed by `narrow`, with
/// committed offsets on the flow's remote topics. Per partition: the committed offset on B, its
/// back-translation to A, the group's committed offset on A now, and the records on B that A
/// lacks (read by the group, and ahead of it, up to B's log end now).
pub async fn plan_failback(
    source: &Client,
    target: &Client,
    flow: &FlowConfig,
    narrow: Option<&PatternList>,
) -> Result<FailoverPlan, PlanError> {
    let (a, b) = (flow.source.as_str(), flow.target.as_str());
    let map = read_map(target, flow.source_alias.as_str(), &flow.name()).await?;
    let source_metadata = source
        .refresh_metadata()
        .await
        .map_err(PlanError::kafka(a, "read metadata"))?;
    let target_metadata = target
        .refresh_metadata()
        .await
        .map_err(PlanError::kafka(b, "read metadata"))?;
    // Remote topic -> source topic, for every topic the flow mirrors or has mirrored.
    let mut source_topic: BTreeMap<String, String> = BTreeMap::new();
    let topics = map.iter().map(|(p, _)| p.topic.clone()).chain(
        source_metadata
            .topics
            .values()
            .filter(|t| !t.is_internal && flow.should_replicate_topic(&t.name))
            .map(|t| t.name.clone()),
    );
    for topic in topics {
        source_topic.insert(flow.remote_topic(&topic), topic);
    }
    let mut ask: BTreeSet<TopicPartition> = map
        .iter()
        .map(|(p, _)| TopicPartition::new(flow.remote_topic(&p.topic), p.partition))
        .collect();
    for remote in source_topic.keys() {
        if let Some(t) = target_metadata.topics.get(remote) {
            ask.extend(
                t.partitions
                    .keys()
                    .map(|p| TopicPartition::new(remote.clone(), *p)),
            );
        }
    }
    let ask: Vec<TopicPartition> = ask.into_iter().collect();

    let mut log_ends: BTreeMap<TopicPartition, i64> = BTreeMap::new();
    let mut groups = Vec::new();
    let all = consumer_groups(target, flow)
        .await
        .map_err(PlanError::kafka(b, "list groups"))?;
    for group in all.into_iter().filter(|g| wanted(g, narrow)) {
        let on_target = committed_on(target, b, &group, &ask).await?;
        if on_target.is_empty() {
            continue;
        }
        let sources: Vec<TopicPartition> = on_target
            .keys()
            .filter_map(|tp| {
                let topic = source_topic.get(&tp.topic)?;
                Some(TopicPartition::new(topic.clone(), tp.partition))
            })
            .collect();
        let on_source = committed_on(source, a, &group, &sources).await?;
        let source_state = describe_group(source, a, &group).await?;
        let target_state = describe_group(target, b, &group).await?;

        let mut partitions = Vec::new();
        for (tp, c) in on_target {
            let Some(topic) = source_topic.get(&tp.topic) else {
                continue;
            };
            let log_end = match log_ends.get(&tp) {
                Some(end) => *end,
                None => {
                    let end = target
                        .list_offset(&tp, OffsetSpec::Latest, IsolationLevel::ReadUncommitted)
                        .await
                        .map_err(PlanError::kafka(b, format!("read the end of {tp}")))?
                        .offset;
                    log_ends.insert(tp.clone(), end);
                    end
                }
            };
            let sp = SourcePartition::new(topic.clone(), tp.partition);
            let now = on_source
                .get(&TopicPartition::new(topic.clone(), tp.partition))
                .map(|c| c.offset);
            partitions.push(partition_plan(&map, sp, tp, c, log_end, now, a, b));
        }
        groups.push(GroupPlan {
            blocker: active_blocker(a, &source_state),
            group,
            source_state: Some(source_state.state),
            target_state: Some(target_state.state),
            partitions,
        });
    }

    Ok(FailoverPlan::assemble(
        Direction::Failback,
        flow,
        cluster_refs(flow, source, target).await,
        &map,
        groups,
        Vec::new(),
    ))
}

/// One remote partition `remote` the group committed `c` on, with B's log end now and the
/// group's committed offset on A now.
#[allow(clippy::too_many_arguments)]
fn partition_plan(
    map: &OffsetMap,
    sp: SourcePartition,
    remote: TopicPartition,
    c: CommittedOffset,
    log_end: i64,
    on_source: Option<i64>,
    a: &str,
    b: &str,
) -> PartitionPlan {
    let back = map.translate_back(&sp, c.offset);
    let planned = back.source();
    let (unreplicated, missing_ahead) = map.partition(&sp).map_or((0, 0), |m| {
        (
            foreign_read(m, c.offset),
            foreign_between(m, c.offset, log_end),
        )
    });
    let (duplicates, blocker) = moving_back(planned, on_source);
    PartitionPlan {
        note: note(&back, unreplicated, missing_ahead, a, b),
        topic: sp.topic,
        partition: sp.partition,
        remote_topic: remote.topic,
        source_offset: planned,
        target_offset: Some(c.offset),
        exact: back.is_exact(),
        duplicates,
        unreplicated,
        missing_ahead,
        committed_at_plan: on_source,
        metadata: c.metadata,
        blocker,
    }
}

/// Target offsets in `[from, to)` that hold no record mirrored from the partition. Those below
/// the first segment of a compacted map are not known either way, and are not counted.
fn foreign_between(map: &PartitionMap, from: i64, to: i64) -> i64 {
    let from = match (map.floor(), map.segments().first()) {
        (Some(_), Some(first)) => from.max(first.dst_start),
        _ => from,
    };
    if to <= from {
        return 0;
    }
    let mirrored: i64 = map
        .segments()
        .iter()
        .map(|s| (s.dst_end().min(to) - s.dst_start.max(from)).max(0))
        .sum();
    (to - from) - mirrored
}

/// Target offsets just before position `q` that hold no record mirrored from the partition:
/// those between the last mirrored record before `q` and `q` (past the mapped end, that is
/// [`ReverseTranslation::PastMappedEnd`]'s `unmapped`). 0 inside a segment or before the first.
fn foreign_read(map: &PartitionMap, q: i64) -> i64 {
    let segments = map.segments();
    let i = segments.partition_point(|s| s.dst_end() <= q);
    if segments.get(i).is_some_and(|s| s.dst_start <= q) {
        return 0;
    }
    i.checked_sub(1)
        .and_then(|prev| segments.get(prev))
        .map_or(0, |prev| q - prev.dst_end())
}

/// Why a failback position is not exact, in the operator's words.
fn note(back: &ReverseTranslation, read: i64, ahead: i64, a: &str, b: &str) -> String {
    if matches!(back, ReverseTranslation::Unmapped) {
        return describe_back(back);
    }
    let compacted =
        matches!(back, ReverseTranslation::Compacted { .. }).then(|| describe_back(back));
    let mut parts = Vec::new();
    if read > 0 {
        parts.push(format!(
            "the group read {read} records on {b} that {a} does not have"
        ));
    }
    if ahead > 0 {
        parts.push(format!(
            "{ahead} records on {b} ahead of the group are not on {a}: it will not see them there"
        ));
    }
    if parts.is_empty() {
        return compacted.unwrap_or_default();
    }
    let foreign = format!(
        "{} (written on {b} after the failover; a {b}->{a} flow is needed to copy them)",
        parts.join("; ")
    );
    match compacted {
        Some(c) => format!("{c}; {foreign}"),
        None => foreign,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strait_wire::offset_map::Segment;

    #[test]
    fn records_ahead_not_from_the_source_are_counted_up_to_the_log_end() {
        // Mirrored [0,10) -> [0,10) and [10,15) -> [13,18); 3 foreign offsets at 10..13 and
        // 4 after 18 (log end 22).
        let map = PartitionMap::from_segments([
            Segment {
                src_start: 0,
                dst_start: 0,
                len: 10,
            },
            Segment {
                src_start: 10,
                dst_start: 13,
                len: 5,
            },
        ])
        .unwrap();
        assert_eq!(foreign_between(&map, 0, 22), 7);
        assert_eq!(foreign_between(&map, 11, 22), 6);
        assert_eq!(foreign_between(&map, 14, 22), 4);
        assert_eq!(foreign_between(&map, 20, 22), 2);
        assert_eq!(foreign_between(&map, 22, 22), 0);
        assert_eq!(foreign_between(&map, 5, 10), 0);
    }

    #[test]
    fn records_read_not_from_the_source_are_those_since_the_last_mirrored_one() {
        let map = PartitionMap::from_segments([
            Segment {
                src_start: 0,
                dst_start: 2,
                len: 10,
            },
            Segment {
                src_start: 10,
                dst_start: 15,
                len: 5,
            },
        ])
        .unwrap();
        assert_eq!(foreign_read(&map, 1), 0);
        assert_eq!(foreign_read(&map, 2), 0);
        assert_eq!(foreign_read(&map, 11), 0);
        assert_eq!(foreign_read(&map, 12), 0);
        assert_eq!(foreign_read(&map, 14), 2);
        assert_eq!(foreign_read(&map, 15), 0);
        assert_eq!(foreign_read(&map, 20), 0);
        assert_eq!(foreign_read(&map, 24), 4);
        // Past the mapped end it is what the map's own reverse translation says.
        assert_eq!(
            map.translate_back(24),
            ReverseTranslation::PastMappedEnd {
                source: 15,
                unmapped: 4
            }
        );
    }
}
