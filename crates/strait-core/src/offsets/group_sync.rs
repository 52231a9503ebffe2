//! Group offset sync (`sync.group.offsets.enabled`, KIP-545; `docs/mm2-behaviour.md` §2.4): the last
//! checkpoint of each group is committed into the group of the same name on the target, so
//! consumers moved there continue where they stopped on the source, exactly.
//!
//! The rules are MM2's (`MirrorCheckpointTask.syncGroupOffset`):
//!
//! - A group with members on the target (any state but `Empty` or `Dead`) is never written: its
//!   consumers own their positions. A group that gets members between the check and the commit
//!   is refused by the broker (`Error::GroupActive`, MM2's KAFKA-14095 warning) and reported the
//!   same way.
//! - Per partition, the checkpoint's offset is committed only when the target group has no
//!   offset there or a lower one: a target group never moves backwards (KAFKA-12468).
//! - The source group's commit metadata goes with the offset.
//!
//! Every partition or group left alone is reported with its reason, in the pass's
//! [`GroupSyncSummary`] and in the log (at info when the reason is new, at debug while it
//! stays the same, so a long-running active group does not fill the log).

use std::collections::{BTreeMap, HashMap, HashSet};

use strait_kafka::groups::{CommittedOffset, OffsetToCommit};
use strait_kafka::produce::RawProducer;
use strait_kafka::{Client, TopicPartition};
use strait_wire::mm2::Checkpoint;

use super::checkpoints::error::CheckpointError;
use super::checkpoints::store::CheckpointStore;
use super::events::{GroupEvent, GroupEvents};
pub use super::passes::{GroupSyncSummary, SkipReason, SkippedSync, SyncedOffset};
use crate::config::FlowConfig;

/// What to write into one idle target group: no I/O, the rules of the module docs per
/// partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupPlan {
    /// Offsets to commit.
    pub writes: Vec<SyncedOffset>,
    /// Partitions left alone.
    pub skipped: Vec<SkippedSync>,
    /// Partitions already at the translated offset.
    pub up_to_date: usize,
}

/// Plans the sync of `group`, from its last checkpoints (by remote partition) and its
/// committed offsets on the target.
pub fn plan_group(
    group: &str,
    checkpoints: &BTreeMap<TopicPartition, Checkpoint>,
    target: &BTreeMap<TopicPartition, CommittedOffset>,
) -> GroupPlan {
    let mut plan = GroupPlan::default();
    for (tp, checkpoint) in checkpoints {
        let translated = checkpoint.downstream_offset;
        let previous = target.get(tp).map(|c| c.offset);
        match previous {
            Some(have) if have > translated => plan.skipped.push(SkippedSync {
                group: group.to_owned(),
                partition: Some(tp.clone()),
                reason: SkipReason::TargetAhead {
                    target: have,
                    translated,
                },
            }),
            Some(have) if have == translated => plan.up_to_date += 1,
            _ => plan.writes.push(SyncedOffset {
                group: group.to_owned(),
                partition: tp.clone(),
                offset: translated,
                previous,
                metadata: checkpoint.metadata.clone(),
            }),
        }
    }
    plan
}

/// Whether `e` means the target cannot be reached at all: the pass stops, rather than time
/// out once per group.
fn unreachable(e: &strait_kafka::Error) -> bool {
    matches!(
        e,
        strait_kafka::Error::Io { .. }
            | strait_kafka::Error::NoBootstrap { .. }
            | strait_kafka::Error::Timeout { .. }
    )
}

/// Group sync passes, remembering what was last reported so a lasting reason is logged once.
#[derive(Debug, Default)]
pub struct GroupSync {
    reported: HashMap<(String, Option<TopicPartition>), SkipReason>,
    /// Where writes and skips are told (`events.rs`): logged, and counted when run for a flow.
    events: GroupEvents,
}

impl GroupSync {
    /// Nothing reported yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The group sync of `flow`: writes and skips are counted in its metrics.
    pub(crate) fn for_flow(flow: &FlowConfig) -> Self {
        Self {
            events: GroupEvents::of(flow),
            ..Self::default()
        }
    }

    /// One pass over every group of `store` (module docs).
    ///
    /// With a transactional `producer` (the leading unit of a flow run by workers), each
    /// group's offsets are committed in a transaction of that producer, so that a worker fenced
    /// by the unit's next owner writes none; then the first failure ends the pass (the caller
    /// takes a new epoch before the next).
    pub async fn sync_once(
        &mut self,
        target: &Client,
        store: &CheckpointStore,
        producer: Option<&RawProducer>,
    ) -> Result<GroupSyncSummary, CheckpointError> {
        self.sync_groups(target, store, None, producer).await
    }

    /// [`sync_once`](Self::sync_once) for the groups in `only` (those whose checkpoints just
    /// changed), or for every group of `store`. The groups are described, and their offsets on
    /// the target read, with one request per coordinator for many groups
    /// (`Client::describe_groups`, `Client::offset_fetch_groups`); only the commits are one
    /// per group, for the groups that need one.
    pub async fn sync_groups(
        &mut self,
        target: &Client,
        store: &CheckpointStore,
        only: Option<&HashSet<String>>,
        producer: Option<&RawProducer>,
    ) -> Result<GroupSyncSummary, CheckpointError> {
        let groups: Vec<(&str, &BTreeMap<TopicPartition, Checkpoint>)> = store
            .groups()
            .filter(|(g, _)| only.is_none_or(|o| o.contains(*g)))
            .collect();
        let names: Vec<String> = groups.iter().map(|(g, _)| (*g).to_owned()).collect();
        let mut described = target.describe_groups(&names).await;
        let idle: Vec<String> = names
            .iter()
            .filter(|g| matches!(described.get(*g), Some(Ok(d)) if !d.is_active()))
            .cloned()
            .collect();
        let partitions: Vec<TopicPartition> = groups
            .iter()
            .flat_map(|(_, c)| c.keys().cloned())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut committed = if idle.is_empty() {
            BTreeMap::new()
        } else {
            target.offset_fetch_groups(&idle, Some(&partitions)).await
        };
        let mut summary = GroupSyncSummary::default();
        for (group, checkpoints) in groups {
            let answer = match described.remove(group) {
                Some(Ok(d)) if d.is_active() => Ok(skip_active(group, d.state)),
                Some(Ok(_)) => match committed.remove(group) {
                    Some(Ok(on_target)) => {
                        let plan = plan_group(group, checkpoints, &on_target);
                        commit_plan(target, group, plan, producer).await
                    }
                    Some(Err(e)) => Err(e),
                    None => Err(no_answer(group, "its offsets")),
                },
                Some(Err(e)) => Err(e),
                None => Err(no_answer(group, "its description")),
            };
            self.take_answer(&mut summary, group, answer, producer)
                .await?;
        }
        for w in &summary.written {
            tracing::debug!(
                group = %w.group,
                topic = %w.partition.topic,
                partition = w.partition.partition,
                offset = w.offset,
                previous = ?w.previous,
                "group offset written"
            );
        }
        let mut seen = HashSet::new();
        for skip in &summary.skipped {
            self.report(skip);
            seen.insert((skip.group.clone(), skip.partition.clone()));
        }
        // What this pass did not look at stays reported as it was.
        self.reported
            .retain(|key, _| seen.contains(key) || only.is_some_and(|o| !o.contains(&key.0)));
        Ok(summary)
    }

    /// Adds one group's answer to `summary`: its writes and skips, or its failure (after
    /// aborting what its transaction added). A failure that ends the pass (the target gone, a
    /// newer owner) is returned.
    async fn take_answer(
        &mut self,
        summary: &mut GroupSyncSummary,
        group: &str,
        answer: Result<GroupPlan, strait_kafka::Error>,
        producer: Option<&RawProducer>,
    ) -> Result<(), CheckpointError> {
        match answer {
            Ok(plan) => {
                if !plan.writes.is_empty() {
                    summary.synced_groups.push(group.to_owned());
                    self.events.tell(GroupEvent::SyncWritten {
                        group,
                        partitions: plan.writes.len(),
                    });
                }
                summary.written.extend(plan.writes);
                summary.up_to_date += plan.up_to_date;
                summary.skipped.extend(plan.skipped);
            }
            // The cluster is gone, or a newer owner took the task: the pass ends.
            Err(e) if unreachable(&e) || e.is_fenced() => {
                return Err(CheckpointError::Kafka {
                    what: format!("syncing group {group} on the target"),
                    source: e,
                })
            }
            // One group's failure (an ACL, a coordinator moving) is that group's alone. In a
            // transaction, what it added is aborted first, so the next group's transaction
            // starts clean; an abort that fails ends the pass (the task mends its producer).
            Err(e) => {
                if let Some(producer) = producer {
                    if let Err(abort) = producer.abort().await {
                        return Err(CheckpointError::Kafka {
                            what: format!(
                                "aborting group {group}'s offsets after its sync failed ({e})"
                            ),
                            source: abort,
                        });
                    }
                }
                summary.skipped.push(SkippedSync {
                    group: group.to_owned(),
                    partition: None,
                    reason: SkipReason::Failed {
                        error: e.to_string(),
                    },
                });
            }
        }
        Ok(())
    }

    /// Tells a skip, and whether its reason is the one reported last pass (`events.rs` logs a
    /// repeated one at debug).
    fn report(&mut self, skip: &SkippedSync) {
        let key = (skip.group.clone(), skip.partition.clone());
        let repeated = self.reported.get(&key) == Some(&skip.reason);
        self.events.tell(GroupEvent::SyncSkipped { skip, repeated });
        self.reported.insert(key, skip.reason.clone());
    }
}

/// A group the target's answers left out (never expected: each batched call answers every
/// group it is given).
fn no_answer(group: &str, what: &str) -> strait_kafka::Error {
    strait_kafka::Error::Unexpected {
        broker: String::new(),
        what: format!("no answer with {what} for group {group}"),
    }
}

/// The plan of `group`, left alone whole: it has members on the target (`state`).
fn skip_active(group: &str, state: String) -> GroupPlan {
    GroupPlan {
        skipped: vec![SkippedSync {
            group: group.to_owned(),
            partition: None,
            reason: SkipReason::GroupActive { state },
        }],
        ..GroupPlan::default()
    }
}

/// Commits `plan`'s writes into idle target group `group`; the plan, or a skip if members
/// joined meanwhile.
async fn commit_plan(
    target: &Client,
    group: &str,
    plan: GroupPlan,
    producer: Option<&RawProducer>,
) -> Result<GroupPlan, strait_kafka::Error> {
    if plan.writes.is_empty() {
        return Ok(plan);
    }
    let offsets: Vec<OffsetToCommit> = plan
        .writes
        .iter()
        .map(|w| OffsetToCommit {
            tp: w.partition.clone(),
            offset: w.offset,
            leader_epoch: -1,
            metadata: Some(w.metadata.clone()),
        })
        .collect();
    if let Some(producer) = producer {
        producer.send_offsets(group, &offsets).await?;
        // Kafka takes a transactional offset commit without a member id whatever the group's
        // state (the admin commit below it refuses while the group has members), so the
        // describe above is all that guards an active group here. Look again now the offsets
        // are in the transaction: members that joined meanwhile get the transaction aborted.
        // What remains open is the commit's own round trip.
        let again = target.describe_group(group).await?;
        if again.is_active() {
            producer.abort().await?;
            return Ok(skip_active(
                group,
                format!("{} (joined during the sync)", again.state),
            ));
        }
        producer.commit().await?;
        return Ok(plan);
    }
    match target.offset_commit(group, &offsets).await {
        Ok(()) => Ok(plan),
        // Members joined after the describe: nothing was written.
        Err(strait_kafka::Error::GroupActive { .. }) => {
            Ok(skip_active(group, "joined during the sync".to_owned()))
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkpoint(partition: i32, downstream: i64, metadata: &str) -> Checkpoint {
        Checkpoint {
            group: "g".into(),
            topic: "A.orders".into(),
            partition,
            upstream_offset: downstream - 5,
            downstream_offset: downstream,
            metadata: metadata.into(),
        }
    }

    fn committed(offset: i64) -> CommittedOffset {
        CommittedOffset {
            offset,
            leader_epoch: -1,
            metadata: None,
        }
    }

    #[test]
    fn writes_only_where_the_target_is_absent_or_behind() {
        let tp = |p| TopicPartition::new("A.orders", p);
        let checkpoints: BTreeMap<_, _> = (0..4)
            .map(|p| (tp(p), checkpoint(p, 100 + i64::from(p), "meta")))
            .collect();
        // p0: none on the target; p1: behind; p2: equal; p3: ahead.
        let target: BTreeMap<_, _> = [
            (tp(1), committed(50)),
            (tp(2), committed(102)),
            (tp(3), committed(200)),
        ]
        .into_iter()
        .collect();
        let plan = plan_group("g", &checkpoints, &target);
        assert_eq!(
            plan.writes,
            vec![
                SyncedOffset {
                    group: "g".into(),
                    partition: tp(0),
                    offset: 100,
                    previous: None,
                    metadata: "meta".into(),
                },
                SyncedOffset {
                    group: "g".into(),
                    partition: tp(1),
                    offset: 101,
                    previous: Some(50),
                    metadata: "meta".into(),
                },
            ]
        );
        assert_eq!(plan.up_to_date, 1);
        assert_eq!(
            plan.skipped,
            vec![SkippedSync {
                group: "g".into(),
                partition: Some(tp(3)),
                reason: SkipReason::TargetAhead {
                    target: 200,
                    translated: 103
                },
            }]
        );
    }
}
