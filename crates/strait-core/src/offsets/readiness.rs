//! "Is it safe to fail over now?" (`strait failover check`, `GET /v1/readiness`): what a
//! failover of a flow `A->B` at this moment would leave behind, on the two recovery points a
//! failover has (`docs/failover.md`, "Before the day"):
//!
//! - **Data**: records written on A and not yet on B, per partition, and how long the oldest of
//!   them has waited (the mirror's lag). If A is lost now, they are lost with it.
//! - **Positions**: per group, what it consumed on A after its last checkpoint on B (a plan
//!   made from the checkpoints alone, A lost, has it read that again), and how old that
//!   checkpoint is when it no longer matches the group's position.
//!
//! A failover now is **exact** when nothing is at risk: every record on A is on B, and every
//! group's position on A is the one its last checkpoint carries. With A answering, a plan is
//! exact anyway (made from A's live positions, `strait failover plan`); this answers the
//! question for the day A stops answering.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Serialize;
use strait_kafka::admin::OffsetSpec;
use strait_kafka::fetch::{FetchOptions, FetchPosition};
use strait_kafka::groups::Stability;
use strait_kafka::{Client, TopicPartition};
use strait_wire::offset_map::{OffsetMap, SourcePartition};
use strait_wire::BatchScanner;

use super::checkpoints::{read_checkpoints_timed, CheckpointError};
use crate::config::{FlowConfig, StartPosition};

/// How long the source may take to answer before it counts as not answering.
pub const SOURCE_PATIENCE: Duration = Duration::from_secs(5);

/// How far ahead of this clock a record's time may be and still give an age (0): clocks of
/// hosts in one place differ by this much.
const CLOCK_SLACK_MS: i64 = 1000;

/// What a failover of one flow now would leave behind.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowReadiness {
    /// `A->B`.
    pub flow: String,
    /// Why the source did not answer within [`SOURCE_PATIENCE`]; `None` when it did. Without
    /// it, the data at risk and the groups' live positions are unknown.
    pub source_error: Option<String>,
    /// Records on the source not yet on the target, over the flow's mirrored partitions.
    pub records_at_risk: Option<i64>,
    /// How long the oldest of them has waited: now − its create time, in seconds.
    pub seconds_at_risk: Option<f64>,
    /// The partitions with records at risk.
    pub partitions: Vec<PartitionRisk>,
    /// Every group the flow carries across that has a position on the source or a checkpoint.
    pub groups: Vec<GroupReadiness>,
    /// Whether a failover now, the source lost, would be exact: nothing at risk.
    pub exact: bool,
    /// Why the flow is not mirroring now, where the one asking knows (`strait run`'s
    /// `/v1/readiness`: not started, waiting for a cluster, paused, failed ...): such a flow
    /// is not ready, whatever it had mirrored. `None` from `strait failover check`, which
    /// sees the clusters, not the process.
    pub not_running: Option<String>,
}

/// Records of one source partition that are not on the target yet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PartitionRisk {
    pub topic: String,
    pub partition: i32,
    /// The source's end (its last stable offset under read_committed) − where the map ends.
    pub records: i64,
    /// How long the first of them has waited, in seconds ([`PartitionRisk::age_from`]);
    /// `None` when that is not known: the partition is not ready.
    pub seconds: Option<f64>,
    /// What that wait is measured from.
    pub age_from: Option<AgeFrom>,
}

/// What a record's wait ([`PartitionRisk::seconds`]) is measured from, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AgeFrom {
    /// The source broker's append time (a topic with `message.timestamp.type=LogAppendTime`).
    AppendTime,
    /// The last time this process's fetches saw the partition's end below the record
    /// (`strait run`'s `/v1/readiness`, for the partitions it mirrors): the record came
    /// after, so the wait is at most this, and at least this less one fetch's wait.
    SeenByStrait,
    /// The record's create time, which its producer stamps (an event time set by the
    /// application among them): used only where neither of the above is known, and only
    /// when it is not ahead of this clock.
    CreateTime,
}

/// One group's captured position.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupReadiness {
    pub group: String,
    /// Source offsets it moved past since its last checkpoint, over its partitions: read again
    /// after a failover made from the checkpoints. `None` when the source did not answer.
    pub records_since_checkpoint: Option<i64>,
    /// Source records it has not consumed that a failover made from the checkpoints would
    /// skip: it was rewound on the source below its last checkpoint, which no pass has
    /// carried yet. `None` when the source did not answer.
    pub records_skipped: Option<i64>,
    /// Partitions where it has a position on the source and no checkpoint at all (a topic
    /// the flow has not mapped yet among them).
    pub partitions_without_checkpoint: usize,
    /// 0 while its last checkpoints carry its position; else now − when the oldest checkpoint
    /// behind it was written, in seconds (what it consumed since is at most that old).
    /// `None` when unknown (the source did not answer, or no checkpoint).
    pub position_age_seconds: Option<f64>,
    /// Seconds since its most recent checkpoint was written (`None`: it has none).
    pub last_checkpoint_seconds: Option<f64>,
}

impl GroupReadiness {
    /// Whether a failover now would place it exactly where it is on the source.
    pub fn exact(&self) -> bool {
        self.records_since_checkpoint == Some(0)
            && self.records_skipped == Some(0)
            && self.partitions_without_checkpoint == 0
    }
}

impl FlowReadiness {
    /// The answer for a flow that is not mirroring now (`why`: not started, paused, failed
    /// ...), when what it mirrored was not read: not ready, nothing known.
    pub fn not_running(flow: &FlowConfig, why: String) -> Self {
        Self {
            flow: flow.name(),
            source_error: None,
            records_at_risk: None,
            seconds_at_risk: None,
            partitions: Vec::new(),
            groups: Vec::new(),
            exact: false,
            not_running: Some(why),
        }
    }

    /// Whether the flow is ready within `within`: the source answered, no record has waited
    /// longer than `within` to be mirrored, and every group's captured position is at most
    /// that old.
    pub fn ready_within(&self, within: Duration) -> bool {
        let limit = within.as_secs_f64();
        self.source_error.is_none()
            && self.not_running.is_none()
            && self.seconds_at_risk.is_none_or(|s| s <= limit)
            && self.partitions.iter().all(|p| p.seconds.is_some())
            && self.groups.iter().all(|g| {
                g.partitions_without_checkpoint == 0
                    && g.records_skipped.is_none_or(|n| n == 0)
                    && g.position_age_seconds.is_some_and(|s| s <= limit)
            })
    }
}

/// `within` as a duration: a number of seconds, 0 or more and finite; else why not, for a
/// `--within` or `?within=` that is not one.
pub fn within(seconds: f64) -> Result<Duration, String> {
    if seconds.is_finite() && seconds >= 0.0 {
        Duration::try_from_secs_f64(seconds).map_err(|e| format!("within {seconds}: {e}"))
    } else {
        Err(format!(
            "within is a number of seconds, 0 or more (e.g. 5 or 0.5), not {seconds}"
        ))
    }
}

/// Assesses `flow` now: its map as persisted on the target (`map`), the checkpoints on the
/// target, and the source's ends and group positions where the source answers within
/// [`SOURCE_PATIENCE`] (`source`: a client of it, or why there is none). `now_ms`: the time to
/// measure ages from (ms since the epoch).
pub async fn assess(
    source: Result<&Client, String>,
    target: &Client,
    flow: &FlowConfig,
    map: &OffsetMap,
    now_ms: i64,
) -> Result<FlowReadiness, CheckpointError> {
    let (checkpoints, written) = read_checkpoints_timed(target, flow).await?;
    let live = match source {
        Ok(source) => tokio::time::timeout(SOURCE_PATIENCE, read_source(source, flow, map))
            .await
            .map(|read| read.map_err(|e| e.to_string())),
        Err(why) => Ok(Err(why)),
    };
    let (live, source_error) = match live {
        Ok(Ok(live)) => (Some(live), None),
        Ok(Err(e)) => (None, Some(e)),
        Err(_) => (
            None,
            Some(format!(
                "{} did not answer within {} s",
                flow.source,
                SOURCE_PATIENCE.as_secs()
            )),
        ),
    };
    let age = |ms: i64| (now_ms - ms).max(0) as f64 / 1000.0;
    let partitions: Vec<PartitionRisk> = live.as_ref().map_or_else(Vec::new, |l| {
        l.behind
            .iter()
            .map(|(tp, b)| {
                let from = b
                    .append_ms
                    .map(|ms| (ms, AgeFrom::AppendTime))
                    .or_else(|| {
                        crate::status::written_after(flow, tp, b.from)
                            .map(|ms| (ms, AgeFrom::SeenByStrait))
                    })
                    // A time ahead of this clock by more than a little is a producer's own,
                    // not when the record arrived: no age (`first_times`).
                    .or_else(|| {
                        b.create_ms
                            .filter(|ms| *ms <= now_ms + CLOCK_SLACK_MS)
                            .map(|ms| (ms, AgeFrom::CreateTime))
                    });
                PartitionRisk {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                    records: b.records,
                    seconds: from.map(|(ms, _)| age(ms)),
                    age_from: from.map(|(_, f)| f),
                }
            })
            .collect()
    });
    let mut names: BTreeSet<String> = checkpoints.groups().map(|(g, _)| g.to_owned()).collect();
    if let Some(l) = &live {
        names.extend(l.positions.keys().cloned());
    }
    // When each group's most recent checkpoint was written: one pass over them all.
    let mut latest: BTreeMap<&str, i64> = BTreeMap::new();
    for ((group, _), at) in &written {
        let entry = latest.entry(group.as_str()).or_insert(*at);
        *entry = (*entry).max(*at);
    }
    let mut groups = Vec::new();
    for group in names {
        let mut g = GroupReadiness {
            group: group.clone(),
            records_since_checkpoint: live.as_ref().map(|_| 0),
            records_skipped: live.as_ref().map(|_| 0),
            partitions_without_checkpoint: 0,
            position_age_seconds: live.as_ref().map(|_| 0.0),
            last_checkpoint_seconds: None,
        };
        g.last_checkpoint_seconds = latest.get(group.as_str()).copied().map(age);
        let positions = live.as_ref().and_then(|l| l.positions.get(&group));
        for (tp, offset) in positions.into_iter().flatten() {
            let remote = TopicPartition::new(flow.remote_topic(&tp.topic), tp.partition);
            let Some(c) = checkpoints.get(&group, &remote.topic, remote.partition) else {
                g.partitions_without_checkpoint += 1;
                g.position_age_seconds = None;
                continue;
            };
            let since = (offset - c.upstream_offset).max(0);
            // Rewound on the source below its checkpoint: a failover made from the
            // checkpoints would skip what it has not read yet.
            let skipped = (c.upstream_offset - offset).max(0);
            if skipped > 0 {
                *g.records_skipped.get_or_insert(0) += skipped;
            }
            if since > 0 || skipped > 0 {
                *g.records_since_checkpoint.get_or_insert(0) += since;
                let at = written.get(&(group.clone(), remote)).copied().map(age);
                g.position_age_seconds = match (g.position_age_seconds, at) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    _ => None,
                };
            }
        }
        groups.push(g);
    }
    let records_at_risk = live
        .as_ref()
        .map(|_| partitions.iter().map(|p| p.records).sum());
    let seconds_at_risk = live.as_ref().map(|_| {
        partitions
            .iter()
            .filter_map(|p| p.seconds)
            .fold(0.0, f64::max)
    });
    let exact = source_error.is_none()
        && records_at_risk == Some(0)
        && groups.iter().all(GroupReadiness::exact);
    Ok(FlowReadiness {
        flow: flow.name(),
        source_error,
        records_at_risk,
        seconds_at_risk,
        partitions,
        groups,
        exact,
        not_running: None,
    })
}

/// Records of a partition not on the target yet.
struct Behind {
    /// How many.
    records: i64,
    /// The offset of the first.
    from: i64,
    /// The first one's append time on the source (ms), where the topic keeps append times.
    append_ms: Option<i64>,
    /// The first one's create time (ms), where the topic keeps those.
    create_ms: Option<i64>,
}

/// What the source says now.
struct Live {
    /// Per source partition the flow selects that is behind its source end.
    behind: BTreeMap<TopicPartition, Behind>,
    /// Per group the flow carries across: its committed offsets on the partitions the flow
    /// selects, mapped or not.
    positions: BTreeMap<String, BTreeMap<TopicPartition, i64>>,
}

/// How long one group's offsets may take to read before the check goes on without them.
const GROUP_PATIENCE: Duration = Duration::from_secs(3);

/// Reads the source as the flow would see it now: every partition its filters select
/// (discovered now, not when the flow last refreshed its topics), each compared with where
/// the map ends, or, unmapped, with where the flow would start it (its log start, or its end
/// with `auto.offset.reset = latest`); and every group's committed offsets on them.
async fn read_source(
    source: &Client,
    flow: &FlowConfig,
    map: &OffsetMap,
) -> Result<Live, strait_kafka::Error> {
    // Heartbeats topics are left out: the mirror's own liveness records, written every second
    // and mirrored at the flow's pace, are no application's data a failover loses.
    let selected: Vec<_> = crate::flow::topics::discover_all(source, flow)
        .await
        .map_err(|e| strait_kafka::Error::Invalid(format!("listing the source's topics: {e}")))?
        .mirrored
        .into_iter()
        .filter(|t| !flow.policy.is_heartbeats_topic(&t.source))
        .collect();
    let partitions: Vec<TopicPartition> = selected
        .iter()
        .flat_map(|t| (0..t.partitions).map(|p| TopicPartition::new(t.source.clone(), p)))
        .collect();
    let mapped_end = |tp: &TopicPartition| {
        map.partition(&SourcePartition::new(tp.topic.clone(), tp.partition))
            .and_then(|m| m.extent())
            .map(|e| e.src_end)
    };
    let latest: Vec<(TopicPartition, OffsetSpec)> = partitions
        .iter()
        .map(|tp| (tp.clone(), OffsetSpec::Latest))
        .collect();
    let ends = source.list_offsets(&latest, flow.isolation_level).await?;
    let unmapped: Vec<(TopicPartition, OffsetSpec)> = partitions
        .iter()
        .filter(|tp| mapped_end(tp).is_none())
        .map(|tp| (tp.clone(), OffsetSpec::Earliest))
        .collect();
    let starts = if unmapped.is_empty() || flow.auto_offset_reset == StartPosition::Latest {
        BTreeMap::new()
    } else {
        source.list_offsets(&unmapped, flow.isolation_level).await?
    };
    // Where the records not yet on the target begin, per partition.
    let mut from: Vec<(TopicPartition, i64)> = Vec::new();
    let mut behind = BTreeMap::new();
    for tp in &partitions {
        let end = match ends.get(tp) {
            Some(Ok(listed)) => listed.offset,
            Some(Err(e)) => return Err(e.clone()),
            None => {
                return Err(strait_kafka::Error::Invalid(format!(
                    "the source gave no end for {tp}"
                )))
            }
        };
        let start = match (mapped_end(tp), starts.get(tp)) {
            (Some(mapped), _) => mapped,
            (None, Some(Ok(listed))) => listed.offset,
            (None, Some(Err(e))) => return Err(e.clone()),
            // Started at the end when the flow finds it: nothing before is mirrored.
            (None, None) => end,
        };
        if end > start {
            behind.insert(
                tp.clone(),
                Behind {
                    records: end - start,
                    from: start,
                    append_ms: None,
                    create_ms: None,
                },
            );
            from.push((tp.clone(), start));
        }
    }
    first_times(source, flow, &from, &mut behind).await;
    let groups = super::consumer_groups(source, flow).await?;
    let mut positions = BTreeMap::new();
    let committed = source
        .offset_fetch_groups_with(
            &groups,
            None,
            Stability::LastCommitted,
            Some(GROUP_PATIENCE),
        )
        .await;
    for (group, offsets) in committed {
        let at: BTreeMap<TopicPartition, i64> = offsets?
            .into_iter()
            .filter(|(tp, _)| {
                flow.should_replicate_topic(&tp.topic)
                    && !flow.policy.is_heartbeats_topic(&tp.topic)
            })
            .map(|(tp, c)| (tp, c.offset))
            .collect();
        if !at.is_empty() {
            positions.insert(group, at);
        }
    }
    Ok(Live { behind, positions })
}

/// When the first record not yet mirrored was written, for each partition `behind`: one
/// fetch over all of them, a little of each. The broker's append time where the topic keeps
/// it; else the record's create time, which its producer stamps: an application's event time
/// may be any time, so [`assess`] takes it only where this process saw nothing of the
/// partition ([`AgeFrom`]), and a time ahead of now gives no age (the partition counts as not
/// ready). A partition whose fetch fails has neither.
async fn first_times(
    source: &Client,
    flow: &FlowConfig,
    from: &[(TopicPartition, i64)],
    behind: &mut BTreeMap<TopicPartition, Behind>,
) {
    let positions: Vec<FetchPosition> = from
        .iter()
        .map(|(tp, at)| {
            let mut p = FetchPosition::new(tp.clone(), *at);
            p.max_bytes = 16 * 1024;
            p
        })
        .collect();
    if positions.is_empty() {
        return;
    }
    let options = FetchOptions {
        max_wait: Duration::from_millis(10),
        isolation: flow.isolation_level,
        ..FetchOptions::default()
    };
    for (tp, data) in source.fetch(&positions, &options).await {
        let Ok(data) = data else { continue };
        let first = BatchScanner::new(data.records)
            .filter_map(Result::ok)
            .find(|b| !b.header.attributes.is_control());
        if let (Some(b), Some(entry)) = (first, behind.get_mut(&tp)) {
            if b.header.attributes.timestamp_type_log_append() {
                entry.append_ms = Some(b.header.max_timestamp);
            } else {
                entry.create_ms = Some(b.header.base_timestamp);
            }
        }
    }
}
