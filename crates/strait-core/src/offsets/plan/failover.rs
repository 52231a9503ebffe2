//! Planning a failover: every group consuming on the flow's source cluster (A), and where each
//! continues on the target (B), from the exact offset map.

use std::collections::{BTreeMap, BTreeSet};

use futures::StreamExt;
use strait_kafka::groups::{CommittedOffset, Stability};
use strait_kafka::{Client, TopicPartition};
use strait_wire::offset_map::{OffsetMap, Translation};

use super::{
    active_blocker, cluster_refs, committed_on, describe_group, described_group, known_committed,
    known_committed_of, moving_back, read_map, wanted, Blocker, ClusterRef, Committed,
    Descriptions, Direction, FailoverPlan, GroupPlan, PartitionPlan, PlanError,
};
use crate::config::FlowConfig;
use crate::filter::PatternList;
use crate::offsets::{
    at_remote_end, committed, consumer_groups, in_extent_alone, mapped_partitions,
    translate_offsets,
};
use crate::offsets::{describe, TranslatedOffset};

/// Plans the failover of `flow`'s groups from `source` (A) to `target` (B).
///
/// The groups are those on A that the flow carries across (`groups` / `groups.exclude`), and
/// among them those `narrow` matches (whole names, MM2's list syntax), that have committed
/// offsets on a topic the flow mirrors. Per partition the plan holds the committed offset on A,
/// its translation through the map as persisted on B (exact, or why not), the group's committed
/// offset on B now, and what blocks applying it. A group's committed offsets on topics the flow
/// does not mirror are listed as blocked ([`Blocker::TopicNotMirrored`]) where the broker lists
/// them (Kafka's all-topics OffsetFetch).
pub async fn plan_failover(
    source: &Client,
    target: &Client,
    flow: &FlowConfig,
    narrow: Option<&PatternList>,
) -> Result<FailoverPlan, PlanError> {
    let a = flow.source.as_str();
    let map = read_map(target, flow.source_alias.as_str(), &flow.name()).await?;
    let metadata = source
        .refresh_metadata()
        .await
        .map_err(PlanError::kafka(a, "read metadata"))?;
    let mut mirrored: BTreeSet<String> = map.iter().map(|(p, _)| p.topic.clone()).collect();
    let mut ask: BTreeSet<TopicPartition> = mapped_partitions(&map, None).into_iter().collect();
    for t in metadata.topics.values() {
        if !t.is_internal && flow.should_replicate_topic(&t.name) {
            mirrored.insert(t.name.clone());
            ask.extend(
                t.partitions
                    .keys()
                    .map(|p| TopicPartition::new(t.name.clone(), *p)),
            );
        }
    }
    let ask: Vec<TopicPartition> = ask.into_iter().collect();

    let all = consumer_groups(source, flow)
        .await
        .map_err(PlanError::kafka(a, "list groups"))?;
    // Groups are independent: several are asked about at once (each takes a few round trips
    // to both clusters), in order, so a thousand groups plan in seconds.
    // Their states on both clusters are asked together first (a plan is a snapshot; apply
    // asks again).
    let all: Vec<String> = all.into_iter().filter(|g| wanted(g, narrow)).collect();
    let (on_source, on_target) =
        futures::join!(source.describe_groups(&all), target.describe_groups(&all));
    let planning = Planning {
        source,
        target,
        flow,
        map: &map,
        mirrored: &mirrored,
        ask: &ask,
        on_source: &on_source,
        on_target: &on_target,
    };
    let planning = &planning;
    let mut groups = Vec::new();
    // A chunk's committed offsets are asked together, one OffsetFetch (v8, many groups) per
    // coordinator and cluster, instead of one per group and cluster: on the source for all
    // topics, then on the target for the remote partitions of what they committed on the
    // source. A group whose part of an answer failed is asked alone, as before.
    for chunk in all.chunks(super::DESCRIBED_AT_ONCE) {
        let on_a = source
            .offset_fetch_groups_with(chunk, None, Stability::Stable, None)
            .await;
        let remote: BTreeSet<TopicPartition> = on_a
            .values()
            .filter_map(|r| r.as_ref().ok())
            .flat_map(BTreeMap::keys)
            .filter(|tp| mirrored.contains(&tp.topic))
            .map(|tp| TopicPartition::new(flow.remote_topic(&tp.topic), tp.partition))
            .collect();
        let remote: Vec<TopicPartition> = remote.into_iter().collect();
        let on_b = if remote.is_empty() {
            Committed::new()
        } else {
            target
                .offset_fetch_groups_with(chunk, Some(&remote), Stability::Stable, None)
                .await
        };
        let known = Known {
            on_a: &on_a,
            on_b: &on_b,
            asked_on_b: &remote,
        };
        let known = &known;
        let planned: Vec<Result<Option<GroupPlan>, PlanError>> = futures::stream::iter(chunk)
            .map(|group| planning.group(group.clone(), known))
            .buffered(GROUPS_AT_ONCE)
            .collect()
            .await;
        for plan in planned {
            groups.extend(plan?);
        }
    }

    Ok(FailoverPlan::assemble(
        Direction::Failover,
        flow,
        cluster_refs(flow, source, target).await,
        &map,
        groups,
        Vec::new(),
    ))
}

/// How many groups a plan or an apply works on at once: each takes a few round trips to both
/// clusters, and their coordinators answer many at once (`bench/failover-scale`).
pub(super) const GROUPS_AT_ONCE: usize = 64;

/// A chunk's committed offsets, asked together ([`plan_failover`]).
struct Known<'a> {
    /// On the source, all topics.
    on_a: &'a Committed,
    /// On the target, of the partitions `asked_on_b` (sorted).
    on_b: &'a Committed,
    asked_on_b: &'a [TopicPartition],
}

/// What every group's part of [`plan_failover`] reads.
struct Planning<'a> {
    source: &'a Client,
    target: &'a Client,
    flow: &'a FlowConfig,
    map: &'a OffsetMap,
    /// The source topics the flow mirrors.
    mirrored: &'a BTreeSet<String>,
    /// Their partitions, asked by name when the all-topics form answers nothing.
    ask: &'a [TopicPartition],
    on_source: &'a Descriptions,
    on_target: &'a Descriptions,
}

impl Planning<'_> {
    /// One group's part of [`plan_failover`]: `None` when it has no offsets on mirrored topics.
    /// `known`: the chunk's committed offsets, asked together.
    async fn group(
        &self,
        group: String,
        known: &Known<'_>,
    ) -> Result<Option<GroupPlan>, PlanError> {
        let Planning {
            source,
            target,
            flow,
            map,
            mirrored,
            ask,
            on_source,
            on_target,
        } = *self;
        let (a, b) = (flow.source.as_str(), flow.target.as_str());
        let what = || format!("read the committed offsets of group {group}");
        // Kafka lists every committed partition for "all topics"; asking by partition when that
        // answer is empty covers brokers that answer that form with nothing.
        // The all-topics form only adds topics the flow does not mirror (listed as blocked);
        // a broker that cannot answer it leaves the plan complete for the mirrored ones.
        let on_a = match known_committed(known.on_a, &group) {
            Some(offsets) => Ok(offsets),
            None => source.offset_fetch(&group, None).await,
        };
        let mut offsets = match on_a {
            Ok(offsets) => offsets,
            Err(e) if !e.is_retriable() => {
                tracing::warn!(
                    cluster = a,
                    group = %group,
                    error = %e,
                    "cannot list the group's offsets on all topics; planning the mirrored \
                     topics only"
                );
                BTreeMap::new()
            }
            Err(e) => return Err(PlanError::kafka(a, what())(e)),
        };
        if offsets.is_empty() {
            offsets.extend(
                committed(source, &group, ask)
                    .await
                    .map_err(PlanError::kafka(a, what()))?,
            );
        }
        let (on_mirrored, elsewhere): (BTreeMap<_, _>, BTreeMap<_, _>) = offsets
            .into_iter()
            .partition(|(tp, _)| mirrored.contains(&tp.topic));
        if on_mirrored.is_empty() {
            return Ok(None);
        }
        let mut translated = translate_offsets(flow, map, on_mirrored);
        at_remote_end(Some(source), target, map, &mut translated).await;
        let remote: Vec<TopicPartition> = translated
            .iter()
            .map(TranslatedOffset::remote_partition)
            .collect();
        // Independent questions, asked at once.
        let now_on_b = async {
            let asked = remote
                .iter()
                .all(|tp| known.asked_on_b.binary_search(tp).is_ok());
            match known_committed_of(known.on_b, &group, &remote).filter(|_| asked) {
                Some(offsets) => Ok(offsets),
                None => committed_on(target, b, &group, &remote).await,
            }
        };
        let (on_target, source_state, target_state) = futures::join!(
            now_on_b,
            described_group(on_source, source, a, &group),
            described_group(on_target, target, b, &group)
        );
        let (on_target, source_state, target_state) = (on_target?, source_state?, target_state?);

        let mut partitions: Vec<PartitionPlan> = translated
            .into_iter()
            .map(|t| {
                let now = on_target.get(&t.remote_partition()).map(|c| c.offset);
                partition_plan(t, now)
            })
            .collect();
        partitions.extend(elsewhere.into_iter().map(|(tp, c)| unmirrored(flow, tp, c)));
        partitions.sort_by(|x, y| (&x.topic, x.partition).cmp(&(&y.topic, y.partition)));
        Ok(Some(GroupPlan {
            blocker: active_blocker(b, &target_state),
            group,
            source_state: Some(source_state.state),
            target_state: Some(target_state.state),
            partitions,
        }))
    }
}

/// Plans the failover of `flow`'s groups when the source cluster (A) cannot be reached: each
/// group's source positions are its last checkpoints in `<A>.checkpoints.internal` on B (the
/// upstream offsets strait wrote there every `emit.checkpoints.interval.seconds`), translated
/// through the map as persisted on B. `source_bootstrap` is recorded in the plan so `apply` can
/// still check A if it comes back.
///
/// What a group consumed on A after its last checkpoint is not known here; it will be read
/// again on B. The plan says so in its notes and on every partition.
pub async fn plan_failover_from_checkpoints(
    target: &Client,
    flow: &FlowConfig,
    source_bootstrap: Vec<String>,
    narrow: Option<&PatternList>,
) -> Result<FailoverPlan, PlanError> {
    let (a, b) = (flow.source.as_str(), flow.target.as_str());
    let map = read_map(target, flow.source_alias.as_str(), &flow.name()).await?;
    let checkpoints = crate::offsets::checkpoints::read_checkpoints(target, flow)
        .await
        .map_err(|source| PlanError::Checkpoints {
            flow: flow.name(),
            source: Box::new(source),
        })?;
    // Checkpoints name the remote topic; the map knows which source topic each came from.
    let source_topic: BTreeMap<String, String> = map
        .iter()
        .map(|(p, _)| (flow.remote_topic(&p.topic), p.topic.clone()))
        .collect();
    let mut groups = Vec::new();
    for (group, by_partition) in checkpoints.groups() {
        if !wanted(group, narrow) {
            continue;
        }
        let translated = translate_checkpoints(flow, &map, &source_topic, by_partition.values());
        if translated.is_empty() {
            continue;
        }
        let remote: Vec<TopicPartition> = translated
            .iter()
            .map(TranslatedOffset::remote_partition)
            .collect();
        let on_target = committed_on(target, b, group, &remote).await?;
        let target_state = describe_group(target, b, group).await?;
        let partitions = translated
            .into_iter()
            .map(|t| {
                let now = on_target.get(&t.remote_partition()).map(|c| c.offset);
                let mut p = partition_plan(t, now);
                let from = "source offset from the group's last checkpoint";
                p.note = if p.note.is_empty() {
                    from.to_owned()
                } else {
                    format!("{from}; {}", p.note)
                };
                p
            })
            .collect();
        groups.push(GroupPlan {
            blocker: active_blocker(b, &target_state),
            group: group.to_owned(),
            source_state: None,
            target_state: Some(target_state.state),
            partitions,
        });
    }
    let interval = match (flow.emit_checkpoints, flow.checkpoints_capture) {
        (None, _) => "never: emit.checkpoints.enabled=false".to_owned(),
        (Some(every), Some(capture)) if capture < every => {
            format!("within {} ms of each change", capture.as_millis())
        }
        (Some(every), _) => format!("every {} s", every.as_secs()),
    };
    Ok(FailoverPlan::assemble(
        Direction::Failover,
        flow,
        (
            ClusterRef::new(a, source_bootstrap, None),
            ClusterRef::of(b, target).await,
        ),
        &map,
        groups,
        vec![format!(
            "cluster {a} did not answer: each group's source offsets are its last checkpoint in \
             {} on {b} (written {interval}); what a group consumed on {a} after its last \
             checkpoint it will read again on {b}",
            flow.checkpoints_topic()
        )],
    ))
}

/// A group's last checkpoints (`checkpoints`, naming remote topics; `source_topic` gives each
/// one's source topic), translated: each upstream offset as `map` translates it now, except
/// where the map has since been compacted past it (`Translation::Compacted`, the lowest target
/// offset ever mapped: the whole remote partition read again). There the checkpoint's own
/// downstream offset is taken, when it is further on: it was the map's answer when the
/// checkpoint was written (an MM2 checkpoint's is at or before that), so the group reads
/// again at most what lies between it and the exact answer, about one checkpoint interval, and
/// skips nothing.
fn translate_checkpoints<'a>(
    flow: &FlowConfig,
    map: &OffsetMap,
    source_topic: &BTreeMap<String, String>,
    checkpoints: impl Iterator<Item = &'a strait_wire::mm2::Checkpoint>,
) -> Vec<TranslatedOffset> {
    let mut downstream = BTreeMap::new();
    let positions: Vec<(TopicPartition, CommittedOffset)> = checkpoints
        .filter_map(|c| {
            let tp = TopicPartition::new(source_topic.get(&c.topic)?.clone(), c.partition);
            downstream.insert(tp.clone(), c.downstream_offset);
            Some((
                tp,
                CommittedOffset {
                    offset: c.upstream_offset,
                    leader_epoch: -1,
                    metadata: Some(c.metadata.clone()),
                },
            ))
        })
        .collect();
    let mut translated = translate_offsets(flow, map, positions);
    for t in &mut translated {
        // A partition mirrored without a record: its checkpoint was written at the remote
        // partition's end once the source confirmed it had nothing past the extent
        // (`at_remote_end`), exact then, and every record mirrored since lands after it.
        if matches!(t.translation, Translation::Unmapped)
            && in_extent_alone(map, &t.topic, t.partition, t.source_offset)
        {
            if let Some(&written) = downstream.get(&t.source_partition()) {
                t.translation = Translation::Exact { target: written };
            }
            continue;
        }
        let Translation::Compacted {
            target,
            reread_at_most,
        } = t.translation
        else {
            continue;
        };
        let Some(&written) = downstream.get(&t.source_partition()) else {
            continue;
        };
        if written > target {
            t.translation = Translation::Compacted {
                target: written,
                reread_at_most: (target + reread_at_most - written).max(0),
            };
        }
    }
    translated
}

/// One translated partition; `on_target` is the group's committed offset on the remote
/// partition now.
fn partition_plan(t: TranslatedOffset, on_target: Option<i64>) -> PartitionPlan {
    let planned = t.target_offset();
    let missing_ahead = match t.translation {
        Translation::BeforeMappedStart { skipped, .. } => skipped,
        Translation::InLostRange { lost, .. } => lost,
        _ => 0,
    };
    let (duplicates, blocker) = moving_back(planned, on_target);
    let mut note = describe(&t.translation);
    if t.unreplicated() > 0 {
        // The gap closes if the flow still runs; a plan applied before it does would have the
        // group read those records twice once they arrive.
        note.push_str(
            ": let the flow catch up and plan again, or the group reads them twice once they \
             are mirrored (if the source is lost, so are they)",
        );
    }
    PartitionPlan {
        exact: t.is_exact(),
        unreplicated: t.unreplicated(),
        note,
        source_offset: Some(t.source_offset),
        target_offset: planned,
        duplicates,
        missing_ahead,
        committed_at_plan: on_target,
        blocker,
        topic: t.topic,
        partition: t.partition,
        remote_topic: t.remote_topic,
        metadata: t.metadata,
    }
}

/// A committed partition of a topic the flow does not mirror.
fn unmirrored(flow: &FlowConfig, tp: TopicPartition, c: CommittedOffset) -> PartitionPlan {
    PartitionPlan {
        remote_topic: flow.remote_topic(&tp.topic),
        topic: tp.topic,
        partition: tp.partition,
        source_offset: Some(c.offset),
        target_offset: None,
        exact: false,
        duplicates: 0,
        unreplicated: 0,
        missing_ahead: 0,
        committed_at_plan: None,
        metadata: c.metadata,
        blocker: Some(Blocker::TopicNotMirrored),
        note: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strait_wire::mm2::Checkpoint;
    use strait_wire::offset_map::SourcePartition;

    /// A transactional source: 2,000 segments of 5 records, each followed by a commit marker
    /// (source offsets 6 apart, target offsets 5 apart, the target written without markers).
    /// A group's last checkpoint is at upstream 9,000 (exact downstream 7,500); since, the
    /// group moved on and the map was compacted below source offset 10,000. Planned from the
    /// checkpoints, the group resumes at the checkpoint's own downstream offset, not at the
    /// start of the remote partition.
    #[test]
    fn a_checkpoint_the_map_was_compacted_past_keeps_its_own_target_offset() {
        let flow = crate::config::StraitConfig::parse(
            "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n\
             A->B.enabled = true\n",
            "test.properties",
        )
        .expect("valid")
        .flows
        .remove(0);
        let sp = SourcePartition::new("orders", 0);
        let mut map = OffsetMap::new();
        for i in 0..2_000 {
            map.record(&sp, i * 6, i * 5, 5).unwrap();
        }
        let exact = map.translate(&sp, 9_000);
        assert_eq!(exact, Translation::Exact { target: 7_500 });
        assert!(map.compact_below(&sp, 10_000).is_some());
        let compacted = map.translate(&sp, 9_000);
        assert!(
            matches!(compacted, Translation::Compacted { target: 0, .. }),
            "{compacted:?}"
        );

        let source_topic = BTreeMap::from([("A.orders".to_owned(), "orders".to_owned())]);
        let checkpoint = Checkpoint {
            group: "billing".into(),
            topic: "A.orders".into(),
            partition: 0,
            upstream_offset: 9_000,
            downstream_offset: 7_500,
            metadata: String::new(),
        };
        let translated =
            translate_checkpoints(&flow, &map, &source_topic, [&checkpoint].into_iter());
        assert_eq!(translated.len(), 1);
        let t = &translated[0];
        assert_eq!(t.source_offset, 9_000);
        let Translation::Compacted {
            target,
            reread_at_most,
        } = t.translation
        else {
            panic!("{:?}", t.translation);
        };
        assert_eq!(target, 7_500, "the checkpoint's own target offset");
        // At most up to the first segment the map kept.
        let first_kept = map.partition(&sp).unwrap().segments()[0].dst_start;
        assert!(first_kept > 7_500, "{first_kept}");
        assert_eq!(reread_at_most, first_kept - 7_500);

        // A checkpoint still inside the map is translated by the map, as before.
        let inside = Checkpoint {
            upstream_offset: 11_000,
            downstream_offset: 1,
            ..checkpoint
        };
        let translated = translate_checkpoints(&flow, &map, &source_topic, [&inside].into_iter());
        assert!(
            translated[0].translation.is_exact(),
            "{:?}",
            translated[0].translation
        );
    }
}
