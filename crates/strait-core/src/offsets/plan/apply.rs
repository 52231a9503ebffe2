//! Applying a plan: each group's planned offsets committed on its destination, into the same
//! group id, with the metadata of the commit they came from; or the reason not.
//!
//! Per group, in this order:
//! 1. Already at the planned offsets on the destination: nothing to write (so applying twice
//!    is applying once).
//! 2. Refused if the group is active on the destination (and if the commit is refused as
//!    active anyway, [`strait_kafka::Error::GroupActive`]).
//! 3. Refused if its committed offsets on the destination changed since the plan (and are not
//!    the planned ones), or are ahead of the planned ones (applying would move it back).
//! 4. Refused if the offset map, read again, now translates the plan's origin offsets
//!    differently: records the plan counted as not yet mirrored have been since, and the old
//!    plan would deliver them twice. Re-plan.
//! 5. If the origin cluster answers: refused if the group is active there or its offsets there
//!    changed since the plan (its consumers still run). If it does not answer (lost), that is
//!    said once and the group goes ahead.
//! 6. Committed (unless a dry run).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use futures::StreamExt;
use serde::Serialize;
use strait_kafka::groups::{CommittedOffset, GroupDescription, OffsetToCommit, Stability};
use strait_kafka::{Client, TopicPartition};
use strait_wire::offset_map::{OffsetMap, SourcePartition, Translation};

use super::{
    known_committed_of, known_or_described, read_map, Committed, Descriptions, Direction,
    FailoverPlan, GroupPlan, PartitionPlan, PlanError,
};
use crate::offsets::{at_remote_end, committed, in_extent_alone, remote_ends, TranslatedOffset};

/// How to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApplyOptions {
    /// Check everything, write nothing.
    pub dry_run: bool,
    /// Refuse a group whose committed offsets on the destination changed since the plan
    /// (unless to the planned ones). True for plans. An offsets file from elsewhere
    /// (`offsets import`) may not know them: with false, only a group ahead of the planned
    /// offsets is refused.
    pub refuse_moved: bool,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        Self {
            dry_run: false,
            refuse_moved: true,
        }
    }
}

/// What applying a plan did, group by group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApplyReport {
    /// The plan's direction.
    pub direction: Direction,
    /// The plan's flow.
    pub flow: String,
    /// The cluster written to.
    pub destination: String,
    /// Whether nothing was written on purpose.
    pub dry_run: bool,
    /// Things said once for the whole plan (a cluster that did not answer).
    pub notes: Vec<String>,
    /// One per group of the plan, in plan order.
    pub groups: Vec<GroupReport>,
}

impl ApplyReport {
    /// Groups refused.
    pub fn refused(&self) -> usize {
        self.groups
            .iter()
            .filter(|g| matches!(g.outcome, Outcome::Refused { .. }))
            .count()
    }
}

/// What happened to one group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupReport {
    /// The group id.
    pub group: String,
    /// Applied, already applied, refused (and why) or checked only.
    pub outcome: Outcome,
    /// Every partition of the group's plan, on the destination.
    pub partitions: Vec<PartitionApply>,
}

/// One partition of a group, on the destination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionApply {
    /// The topic written (the remote topic for a failover, the source topic for a failback).
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The group's committed offset there before applying; `null`: none, or not read.
    pub committed_before: Option<i64>,
    /// The planned offset; `null`: the plan has none.
    pub planned: Option<i64>,
    /// Why the partition was left alone while the rest of its group was applied.
    pub skipped: Option<String>,
}

/// The outcome for one group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// The planned offsets were committed.
    Applied,
    /// The group was at the planned offsets already: nothing written.
    AlreadyApplied,
    /// Every check passed; nothing written (dry run).
    DryRun,
    /// Nothing written, because of `reason`.
    Refused {
        /// Why.
        reason: Refusal,
    },
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Applied => f.write_str("applied"),
            Outcome::AlreadyApplied => f.write_str("already applied (nothing to change)"),
            Outcome::DryRun => f.write_str("would apply (dry run)"),
            Outcome::Refused { reason } => write!(f, "refused: {reason}"),
        }
    }
}

/// Why a group was not applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Refusal {
    /// No partition of the group has a planned offset (all unmapped or not mirrored).
    NothingToApply,
    /// The group has running members on the destination.
    ActiveOnDestination {
        /// The destination.
        cluster: String,
        /// The group's state there.
        state: String,
    },
    /// The group's committed offset on the destination changed since the plan.
    MovedSincePlan {
        /// The destination.
        cluster: String,
        /// Partition written.
        topic: String,
        /// Partition.
        partition: i32,
        /// Committed when planned.
        at_plan: Option<i64>,
        /// Committed now.
        now: Option<i64>,
    },
    /// The group is ahead of the planned offset on the destination.
    WouldMoveBack {
        /// The destination.
        cluster: String,
        /// Partition written.
        topic: String,
        /// Partition.
        partition: i32,
        /// Committed now.
        committed: i64,
        /// Planned.
        planned: i64,
    },
    /// The map now translates the plan's origin offset differently.
    StalePlan {
        /// Partition written.
        topic: String,
        /// Partition.
        partition: i32,
        /// Planned.
        planned: Option<i64>,
        /// What the map gives now.
        now: Option<i64>,
    },
    /// The group has running members on the origin.
    ActiveOnOrigin {
        /// The origin.
        cluster: String,
        /// The group's state there.
        state: String,
    },
    /// The group's committed offset on the origin changed since the plan.
    OriginMoved {
        /// The origin.
        cluster: String,
        /// Partition read.
        topic: String,
        /// Partition.
        partition: i32,
        /// Committed when planned.
        at_plan: Option<i64>,
        /// Committed now.
        now: Option<i64>,
    },
    /// A check or the commit failed.
    Failed {
        /// The cluster.
        cluster: String,
        /// What was being done.
        what: String,
        /// The error.
        error: String,
    },
}

/// An optional offset in words.
fn show(offset: Option<i64>) -> String {
    offset.map_or_else(|| "none".to_owned(), |o| o.to_string())
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NothingToApply => {
                f.write_str("nothing to apply: no partition of the group has a planned offset")
            }
            Refusal::ActiveOnDestination { cluster, state } => write!(
                f,
                "group is active on {cluster} (state {state}): stop its consumers there, then \
                 apply again"
            ),
            Refusal::MovedSincePlan {
                cluster,
                topic,
                partition,
                at_plan,
                now,
            } => write!(
                f,
                "group moved on {cluster} since the plan: {topic}-{partition} was at {} then \
                 and is at {} now; re-plan",
                show(*at_plan),
                show(*now)
            ),
            Refusal::WouldMoveBack {
                cluster,
                topic,
                partition,
                committed,
                planned,
            } => write!(
                f,
                "group is at {committed} on {cluster} {topic}-{partition}, ahead of the planned \
                 {planned}: applying would move it back and it would read {} records again",
                committed - planned
            ),
            Refusal::StalePlan {
                topic,
                partition,
                planned,
                now,
            } => write!(
                f,
                "stale plan: the offset map now places {topic}-{partition} at {} instead of the \
                 planned {} (records counted as not mirrored have been mirrored since; applying \
                 would deliver them twice); re-plan",
                show(*now),
                show(*planned)
            ),
            Refusal::ActiveOnOrigin { cluster, state } => write!(
                f,
                "group is still active on {cluster} (state {state}): stop its consumers there \
                 and re-plan"
            ),
            Refusal::OriginMoved {
                cluster,
                topic,
                partition,
                at_plan,
                now,
            } => write!(
                f,
                "group's offsets on {cluster} changed since the plan ({topic}-{partition} was \
                 {}, is {}): its consumers there may still run; stop them and re-plan",
                show(*at_plan),
                show(*now)
            ),
            Refusal::Failed {
                cluster,
                what,
                error,
            } => write!(f, "{what} on {cluster} failed: {error}"),
        }
    }
}

/// Applies `plan`. The destination's client is required (`target` for a failover, `source`
/// for a failback); the origin's may be `None` when that cluster cannot be reached, and the
/// checks against it are then skipped and noted. The offset map is read from `target`; without
/// it the stale-plan check is skipped and noted.
///
/// Errors only when nothing can be applied at all (no destination, map unreadable); every
/// group's fate is in the report.
pub async fn apply_plan(
    plan: &FailoverPlan,
    source: Option<&Client>,
    target: Option<&Client>,
    options: ApplyOptions,
) -> Result<ApplyReport, PlanError> {
    let (destination, origin) = match plan.direction {
        Direction::Failover => (target, source),
        Direction::Failback => (source, target),
    };
    let destination = destination.ok_or_else(|| PlanError::NoDestination {
        direction: plan.direction,
        cluster: plan.destination().alias.clone(),
    })?;
    // A plan applied to clusters other than those it was made for (a config pointing
    // elsewhere, a cluster rebuilt) would write offsets that mean nothing there.
    if let Some(why) = plan.destination().other_than(destination).await {
        return Err(PlanError::OtherCluster(why));
    }
    if let Some(origin) = origin {
        if let Some(why) = plan.origin().other_than(origin).await {
            return Err(PlanError::OtherCluster(why));
        }
    }
    let mut notes = Vec::new();
    let map = match target {
        Some(t) => Some(read_map(t, &plan.source_alias, &plan.flow).await?),
        None => {
            notes.push(format!(
                "target cluster {} did not answer: the offset map was not read, so the plan \
                 was not checked against it",
                plan.target.alias
            ));
            None
        }
    };
    if origin.is_none() {
        notes.push(format!(
            "origin cluster {} did not answer: the groups' offsets there were not checked \
             (make sure their consumers there are stopped)",
            plan.origin().alias
        ));
    }
    let ctx = Ctx {
        plan,
        destination,
        origin,
        map: map.as_ref(),
        options,
    };
    // Groups are independent: several at once, reported in the plan's order. A chunk's
    // groups are described together first, one request per coordinator and cluster, and
    // checked and written right after, so a description is at most a chunk's apply old.
    let ctx = &ctx;
    let mut groups: Vec<GroupReport> = Vec::with_capacity(plan.groups.len());
    for chunk in plan.groups.chunks(super::DESCRIBED_AT_ONCE) {
        let ids: Vec<String> = chunk.iter().map(|g| g.group.clone()).collect();
        // The partitions the chunk's groups write on the destination and read on the origin:
        // their committed offsets are asked for the whole chunk in one OffsetFetch per
        // coordinator (v8 names many groups) instead of one per group and cluster.
        let (written, read) = chunk_partitions(chunk, plan.direction);
        let (on_destination, on_origin, committed_destination, committed_origin) = futures::join!(
            ctx.destination.describe_groups(&ids),
            async {
                match ctx.origin {
                    Some(origin) => origin.describe_groups(&ids).await,
                    None => BTreeMap::new(),
                }
            },
            ctx.destination
                .offset_fetch_groups_with(&ids, Some(&written), Stability::Stable, None),
            async {
                match ctx.origin {
                    Some(origin) => {
                        origin
                            .offset_fetch_groups_with(&ids, Some(&read), Stability::Stable, None)
                            .await
                    }
                    None => BTreeMap::new(),
                }
            },
        );
        let described = Described {
            destination: &on_destination,
            origin: &on_origin,
            committed_destination: &committed_destination,
            committed_origin: &committed_origin,
        };
        let described = &described;
        groups.extend(
            futures::stream::iter(chunk)
                .map(|group| ctx.apply_group(group, described))
                .buffered(super::failover::GROUPS_AT_ONCE)
                .collect::<Vec<_>>()
                .await,
        );
    }
    Ok(ApplyReport {
        direction: plan.direction,
        flow: plan.flow.clone(),
        destination: plan.destination().alias.clone(),
        dry_run: options.dry_run,
        notes,
        groups,
    })
}

/// The descriptions of a chunk's groups on both clusters (`Client::describe_groups`), and
/// their committed offsets (`Client::offset_fetch_groups_with`).
struct Described<'a> {
    destination: &'a Descriptions,
    origin: &'a Descriptions,
    committed_destination: &'a Committed,
    committed_origin: &'a Committed,
}

/// Every partition `chunk`'s groups write on the destination, and every one they read on the
/// origin, where a group has a planned offset: what [`apply_plan`] asks for the chunk.
fn chunk_partitions(
    chunk: &[GroupPlan],
    direction: Direction,
) -> (Vec<TopicPartition>, Vec<TopicPartition>) {
    let (mut written, mut read) = (BTreeSet::new(), BTreeSet::new());
    for p in chunk.iter().flat_map(|g| &g.partitions) {
        if p.planned_offset(direction).is_some() {
            written.insert(p.written_partition(direction));
            read.insert(p.read_partition(direction));
        }
    }
    (written.into_iter().collect(), read.into_iter().collect())
}

/// The group as the origin sees it at apply time.
struct OriginState {
    description: GroupDescription,
    now: BTreeMap<TopicPartition, CommittedOffset>,
}

struct Ctx<'a> {
    plan: &'a FailoverPlan,
    destination: &'a Client,
    origin: Option<&'a Client>,
    map: Option<&'a OffsetMap>,
    options: ApplyOptions,
}

impl Ctx<'_> {
    async fn apply_group(&self, group: &GroupPlan, described: &Described<'_>) -> GroupReport {
        let direction = self.plan.direction;
        let mut partitions: Vec<PartitionApply> = group
            .partitions
            .iter()
            .map(|p| {
                let tp = p.written_partition(direction);
                let planned = p.planned_offset(direction);
                PartitionApply {
                    topic: tp.topic,
                    partition: tp.partition,
                    committed_before: None,
                    planned,
                    skipped: planned.is_none().then(|| {
                        p.blocker.as_ref().map_or_else(
                            || "no planned offset".to_owned(),
                            |b| format!("blocked: {b}"),
                        )
                    }),
                }
            })
            .collect();
        let outcome = match self
            .check_and_commit(group, &mut partitions, described)
            .await
        {
            Ok(outcome) => outcome,
            Err(reason) => Outcome::Refused { reason },
        };
        GroupReport {
            group: group.group.clone(),
            outcome,
            partitions,
        }
    }

    fn failed(&self, cluster: &str, what: String) -> impl FnOnce(strait_kafka::Error) -> Refusal {
        let cluster = cluster.to_owned();
        move |e| Refusal::Failed {
            cluster,
            what,
            error: e.to_string(),
        }
    }

    /// Group `id` as `client` (cluster `cluster`) describes it: from `known`, the chunk's
    /// descriptions, where it is there.
    async fn describe(
        &self,
        known: &Descriptions,
        client: &Client,
        cluster: &str,
        id: &str,
    ) -> Result<GroupDescription, Refusal> {
        known_or_described(known, client, id)
            .await
            .map_err(self.failed(cluster, format!("describing group {id}")))
    }

    /// Group `id`'s committed offsets of `partitions` on `client` (cluster `cluster`): from
    /// `known`, the chunk's, where its answer is there (asked alone where it failed).
    async fn committed(
        &self,
        known: &Committed,
        client: &Client,
        cluster: &str,
        id: &str,
        partitions: &[TopicPartition],
    ) -> Result<BTreeMap<TopicPartition, CommittedOffset>, Refusal> {
        if let Some(offsets) = known_committed_of(known, id, partitions) {
            return Ok(offsets);
        }
        committed(client, id, partitions)
            .await
            .map_err(self.failed(cluster, format!("reading the offsets of group {id}")))
    }

    async fn check_and_commit(
        &self,
        group: &GroupPlan,
        report: &mut [PartitionApply],
        described: &Described<'_>,
    ) -> Result<Outcome, Refusal> {
        let direction = self.plan.direction;
        let dest = &self.plan.destination().alias;
        let id = group.group.as_str();
        // The partitions to write, with their planned offsets.
        let todo: Vec<(&PartitionPlan, TopicPartition, i64)> = group
            .partitions
            .iter()
            .filter_map(|p| {
                Some((
                    p,
                    p.written_partition(direction),
                    p.planned_offset(direction)?,
                ))
            })
            .collect();
        if todo.is_empty() {
            return Err(Refusal::NothingToApply);
        }
        let written: Vec<TopicPartition> = todo.iter().map(|(_, tp, _)| tp.clone()).collect();
        // Everything the checks below need, asked at once; checked in the same order as if
        // asked one by one.
        let (current, description, origin) = futures::join!(
            self.committed(
                described.committed_destination,
                self.destination,
                dest,
                id,
                &written
            ),
            self.describe(described.destination, self.destination, dest, id),
            async {
                match self.origin {
                    Some(origin) => Some(self.origin_state(described, origin, id, &todo).await),
                    None => None,
                }
            }
        );
        let current = current?;
        for r in report.iter_mut() {
            let tp = TopicPartition::new(r.topic.clone(), r.partition);
            r.committed_before = current.get(&tp).map(|c| c.offset);
        }
        let now = |tp: &TopicPartition| current.get(tp).map(|c| c.offset);
        if todo
            .iter()
            .all(|(_, tp, planned)| now(tp) == Some(*planned))
        {
            return Ok(Outcome::AlreadyApplied);
        }

        let description = description?;
        if description.is_active() {
            return Err(Refusal::ActiveOnDestination {
                cluster: dest.clone(),
                state: description.state,
            });
        }
        for (p, tp, planned) in &todo {
            let at = now(tp);
            if self.options.refuse_moved && at != p.committed_at_plan && at != Some(*planned) {
                return Err(Refusal::MovedSincePlan {
                    cluster: dest.clone(),
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                    at_plan: p.committed_at_plan,
                    now: at,
                });
            }
            if let Some(committed) = at.filter(|c| c > planned) {
                return Err(Refusal::WouldMoveBack {
                    cluster: dest.clone(),
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                    committed,
                    planned: *planned,
                });
            }
        }
        if let Some(map) = self.map {
            let forward = match direction {
                Direction::Failover => self.translated_again(map, &todo).await,
                Direction::Failback => BTreeMap::new(),
            };
            for (p, tp, planned) in &todo {
                let sp = SourcePartition::new(p.topic.clone(), p.partition);
                let again = match direction {
                    Direction::Failover => forward.get(&p.source_partition()).copied().flatten(),
                    Direction::Failback => p
                        .target_offset
                        .and_then(|o| map.translate_back(&sp, o).source()),
                };
                if again != Some(*planned) {
                    return Err(Refusal::StalePlan {
                        topic: tp.topic.clone(),
                        partition: tp.partition,
                        planned: Some(*planned),
                        now: again,
                    });
                }
            }
        }
        if let Some(origin) = origin {
            self.check_origin(origin?, &todo)?;
        }
        if self.options.dry_run {
            return Ok(Outcome::DryRun);
        }
        let offsets: Vec<OffsetToCommit> = todo
            .iter()
            .map(|(p, tp, planned)| OffsetToCommit {
                tp: tp.clone(),
                offset: *planned,
                // The origin's leader epochs mean nothing on the destination.
                leader_epoch: -1,
                metadata: p.metadata.clone(),
            })
            .collect();
        match self.destination.offset_commit(id, &offsets).await {
            Ok(()) => Ok(Outcome::Applied),
            Err(strait_kafka::Error::GroupActive { .. }) => Err(Refusal::ActiveOnDestination {
                cluster: dest.clone(),
                state: "active (the broker refused the commit)".into(),
            }),
            Err(e) => Err(self
                .failed(dest, format!("committing the offsets of group {id}"))(
                e
            )),
        }
    }

    /// Where `map` places the plan's source offsets of `todo` now (a failover: the map is
    /// read from the destination), as the plan placed them
    /// ([`at_remote_end`](crate::offsets::at_remote_end) included, the origin confirming), by
    /// source partition. Without the origin, a partition mirrored without a record is where
    /// the plan placed it if the remote partition still ends there: nothing was written to it
    /// since the plan, which the source confirmed or took from a checkpoint written so.
    async fn translated_again(
        &self,
        map: &OffsetMap,
        todo: &[(&PartitionPlan, TopicPartition, i64)],
    ) -> BTreeMap<TopicPartition, Option<i64>> {
        let mut rows: Vec<TranslatedOffset> = todo
            .iter()
            .filter_map(|(p, _, _)| {
                let source_offset = p.source_offset?;
                let sp = SourcePartition::new(p.topic.clone(), p.partition);
                Some(TranslatedOffset {
                    topic: p.topic.clone(),
                    partition: p.partition,
                    remote_topic: p.remote_topic.clone(),
                    source_offset,
                    metadata: None,
                    translation: map.translate(&sp, source_offset),
                })
            })
            .collect();
        match self.origin {
            Some(origin) => at_remote_end(Some(origin), self.destination, map, &mut rows).await,
            None => {
                let ends = remote_ends(self.destination, map, &rows)
                    .await
                    .unwrap_or_default();
                for t in &mut rows {
                    let planned = todo
                        .iter()
                        .find(|(p, _, _)| p.source_partition() == t.source_partition())
                        .map(|(_, _, planned)| *planned);
                    let Some(end) = ends
                        .get(&t.remote_partition())
                        .copied()
                        .filter(|end| Some(*end) == planned)
                    else {
                        continue;
                    };
                    if matches!(t.translation, Translation::Unmapped)
                        && in_extent_alone(map, &t.topic, t.partition, t.source_offset)
                    {
                        t.translation = Translation::Exact { target: end };
                    }
                }
            }
        }
        rows.iter()
            .map(|t| (t.source_partition(), t.target_offset()))
            .collect()
    }

    /// The group on the origin: its description and its committed offsets of the partitions
    /// the plan read.
    async fn origin_state(
        &self,
        known: &Described<'_>,
        origin: &Client,
        id: &str,
        todo: &[(&PartitionPlan, TopicPartition, i64)],
    ) -> Result<OriginState, Refusal> {
        let cluster = &self.plan.origin().alias;
        let read: Vec<TopicPartition> = todo
            .iter()
            .map(|(p, _, _)| p.read_partition(self.plan.direction))
            .collect();
        let (description, now) = futures::join!(
            self.describe(known.origin, origin, cluster, id),
            self.committed(known.committed_origin, origin, cluster, id, &read)
        );
        Ok(OriginState {
            description: description?,
            now: now?,
        })
    }

    /// The group must not run on the origin, nor have moved there since the plan.
    fn check_origin(
        &self,
        origin: OriginState,
        todo: &[(&PartitionPlan, TopicPartition, i64)],
    ) -> Result<(), Refusal> {
        let direction = self.plan.direction;
        let cluster = &self.plan.origin().alias;
        let OriginState { description, now } = origin;
        if description.is_active() {
            return Err(Refusal::ActiveOnOrigin {
                cluster: cluster.clone(),
                state: description.state,
            });
        }
        for (p, _, _) in todo {
            let tp = p.read_partition(direction);
            let at = now.get(&tp).map(|c| c.offset);
            if at != p.read_offset(direction) {
                return Err(Refusal::OriginMoved {
                    cluster: cluster.clone(),
                    topic: tp.topic,
                    partition: tp.partition,
                    at_plan: p.read_offset(direction),
                    now: at,
                });
            }
        }
        Ok(())
    }
}
