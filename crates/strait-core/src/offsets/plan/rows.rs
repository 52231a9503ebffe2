//! A plan as flat rows, one per group partition: the shape of `offsets export --format csv`,
//! read back by `offsets import`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{now, ClusterRef, Direction, FailoverPlan, GroupPlan, PartitionPlan, PlanError};
use crate::config::FlowConfig;

/// One group partition of a plan. The fields mean what [`PartitionPlan`]'s mean; `blocked`
/// is the partition's blocker, or its group's, in words (empty: none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetRow {
    /// The flow, `A->B`.
    pub flow: String,
    /// `failover` or `failback`.
    pub direction: Direction,
    /// The group id.
    pub group: String,
    /// The topic on the source cluster (A).
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The topic on the target cluster (B).
    pub remote_topic: String,
    /// The position on A ([`PartitionPlan::source_offset`]).
    pub source_offset: Option<i64>,
    /// The position on B ([`PartitionPlan::target_offset`]).
    pub target_offset: Option<i64>,
    /// Whether the planned position is exact.
    pub exact: bool,
    /// [`PartitionPlan::duplicates`].
    pub duplicates: i64,
    /// [`PartitionPlan::unreplicated`].
    pub unreplicated: i64,
    /// [`PartitionPlan::missing_ahead`].
    pub missing_ahead: i64,
    /// [`PartitionPlan::committed_at_plan`].
    pub committed_at_plan: Option<i64>,
    /// The commit metadata carried across.
    pub metadata: Option<String>,
    /// What blocks the partition, in words; empty: nothing.
    pub blocked: String,
    /// Why the position is not exact, in words; empty when it is.
    pub note: String,
}

impl FailoverPlan {
    /// One row per group partition, in plan order.
    pub fn rows(&self) -> Vec<OffsetRow> {
        let mut rows = Vec::new();
        for g in &self.groups {
            for p in &g.partitions {
                let blocked = p
                    .blocker
                    .as_ref()
                    .or(g.blocker.as_ref())
                    .map(ToString::to_string)
                    .unwrap_or_default();
                rows.push(OffsetRow {
                    flow: self.flow.clone(),
                    direction: self.direction,
                    group: g.group.clone(),
                    topic: p.topic.clone(),
                    partition: p.partition,
                    remote_topic: p.remote_topic.clone(),
                    source_offset: p.source_offset,
                    target_offset: p.target_offset,
                    exact: p.exact,
                    duplicates: p.duplicates,
                    unreplicated: p.unreplicated,
                    missing_ahead: p.missing_ahead,
                    committed_at_plan: p.committed_at_plan,
                    metadata: p.metadata.clone(),
                    blocked,
                    note: p.note.clone(),
                });
            }
        }
        rows
    }

    /// A plan of `flow` from rows such as [`FailoverPlan::rows`] wrote (an offsets file),
    /// to be applied with the clusters `source` and `target`.
    ///
    /// Every row must name `flow` and one direction. Blockers are not read back: `apply`
    /// checks the clusters again, and a row without a planned offset is skipped anyway. The
    /// plan has no map extent (the file does not carry it) and is dated now.
    pub fn from_rows(
        rows: Vec<OffsetRow>,
        flow: &FlowConfig,
        source: ClusterRef,
        target: ClusterRef,
    ) -> Result<Self, PlanError> {
        let name = flow.name();
        let direction = rows
            .first()
            .map(|r| r.direction)
            .ok_or_else(|| PlanError::Format("the offsets file has no rows".into()))?;
        let mut groups: BTreeMap<String, Vec<PartitionPlan>> = BTreeMap::new();
        for (i, row) in rows.into_iter().enumerate() {
            let line = i + 1;
            if row.flow != name {
                return Err(PlanError::Format(format!(
                    "row {line}: flow {} is not {name}",
                    row.flow
                )));
            }
            if row.direction != direction {
                return Err(PlanError::Format(format!(
                    "row {line}: direction {} differs from the first row's {direction}",
                    row.direction
                )));
            }
            if row.partition < 0 {
                return Err(PlanError::Format(format!(
                    "row {line}: partition {} is negative",
                    row.partition
                )));
            }
            for (what, offset) in [
                ("source_offset", row.source_offset),
                ("target_offset", row.target_offset),
                ("committed_at_plan", row.committed_at_plan),
            ] {
                if offset.is_some_and(|o| o < 0) {
                    return Err(PlanError::Format(format!(
                        "row {line}: {what} {} is negative",
                        offset.unwrap_or_default()
                    )));
                }
            }
            let partitions = groups.entry(row.group).or_default();
            if partitions
                .iter()
                .any(|p| p.topic == row.topic && p.partition == row.partition)
            {
                return Err(PlanError::Format(format!(
                    "row {line}: {}-{} appears twice",
                    row.topic, row.partition
                )));
            }
            partitions.push(PartitionPlan {
                topic: row.topic,
                partition: row.partition,
                remote_topic: row.remote_topic,
                source_offset: row.source_offset,
                target_offset: row.target_offset,
                exact: row.exact,
                duplicates: row.duplicates,
                unreplicated: row.unreplicated,
                missing_ahead: row.missing_ahead,
                committed_at_plan: row.committed_at_plan,
                metadata: row.metadata,
                blocker: None,
                note: row.note,
            });
        }
        let (created_at, created_at_ms) = now();
        Ok(FailoverPlan {
            version: super::PLAN_VERSION,
            direction,
            flow: name,
            source,
            target,
            source_alias: flow.source_alias.to_string(),
            created_at,
            created_at_ms,
            map: Vec::new(),
            groups: groups
                .into_iter()
                .map(|(group, partitions)| GroupPlan {
                    group,
                    source_state: None,
                    target_state: None,
                    blocker: None,
                    partitions,
                })
                .collect(),
            notes: Vec::new(),
        })
    }
}
