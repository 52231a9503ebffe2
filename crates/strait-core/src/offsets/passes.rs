//! What one checkpoint or group-sync pass did: the summaries the checkpoints task
//! (`offsets/checkpoints.rs`) and group sync (`offsets/group_sync.rs`) return, which their
//! events (`offsets/events.rs`) tell. A module of its own, so that the events and the passes
//! do not import each other; the types are used under their old paths
//! (`offsets::checkpoints::CheckpointSummary`, `offsets::group_sync::SkipReason` ...).

use strait_kafka::TopicPartition;
use strait_wire::mm2::Checkpoint;

/// A group, or one checkpoint of it, that a pass could not handle; tried again next pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupFailure {
    /// The consumer group.
    pub group: String,
    /// The remote partition, when the failure is about one.
    pub partition: Option<TopicPartition>,
    /// What went wrong.
    pub error: String,
}

/// What one checkpoint pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckpointSummary {
    /// Groups with committed offsets on mirrored partitions, in order: the groups checkpointed.
    pub groups: Vec<String>,
    /// Checkpoints written to the topic this pass, in order (with checkpoint emission
    /// disabled, recorded for group sync only).
    pub emitted: Vec<Checkpoint>,
    /// Checkpoints equal to the last one written: not written again.
    pub unchanged: usize,
    /// Checkpoints that would have moved backwards without a rewind of the source group: not
    /// written, the last one stands.
    pub held_back: Vec<Checkpoint>,
    /// Groups or checkpoints that could not be handled this pass.
    pub failures: Vec<GroupFailure>,
    /// Groups with committed offsets on partitions the flow selects but has not mapped yet (a
    /// topic created since the flow last looked, a partition waiting for its leader, a
    /// remote topic refused): their position there is carried by no checkpoint.
    pub uncarried: Vec<String>,
}

/// Why a group, or one partition of it, was not written.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// The group has active members on the target (`state` as DescribeGroups gives it).
    GroupActive {
        /// The group's state on the target, e.g. `Stable`.
        state: String,
    },
    /// The target group is already past the translated offset: moving it back would make its
    /// consumers read records again.
    TargetAhead {
        /// The target group's committed offset.
        target: i64,
        /// The translated offset from the last checkpoint.
        translated: i64,
    },
    /// The group could not be read or written this pass; tried again next pass.
    Failed {
        /// What went wrong.
        error: String,
    },
}

impl SkipReason {
    /// The reason's label in `strait_group_sync_skips_total`.
    pub(super) fn label(&self) -> &'static str {
        match self {
            SkipReason::GroupActive { .. } => "group_active",
            SkipReason::TargetAhead { .. } => "target_ahead",
            SkipReason::Failed { .. } => "failed",
        }
    }
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkipReason::GroupActive { state } => write!(
                f,
                "the group has active members on the target (state {state}); offsets are only \
                 written while it is empty"
            ),
            SkipReason::TargetAhead { target, translated } => write!(
                f,
                "the target group is at {target}, ahead of the translated offset {translated}; \
                 it is never moved backwards"
            ),
            SkipReason::Failed { error } => write!(f, "failed: {error}"),
        }
    }
}

/// A group, or one partition of it, left alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedSync {
    /// The consumer group.
    pub group: String,
    /// The remote partition, or `None` when the whole group was skipped.
    pub partition: Option<TopicPartition>,
    /// Why.
    pub reason: SkipReason,
}

/// One offset committed into a target group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncedOffset {
    /// The consumer group.
    pub group: String,
    /// The remote partition.
    pub partition: TopicPartition,
    /// The offset committed: the last checkpoint's downstream offset.
    pub offset: i64,
    /// The group's offset there before, if it had one.
    pub previous: Option<i64>,
    /// The commit metadata, the source group's.
    pub metadata: String,
}

/// What one group-sync pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupSyncSummary {
    /// Groups that had offsets written this pass, in order.
    pub synced_groups: Vec<String>,
    /// Every offset written.
    pub written: Vec<SyncedOffset>,
    /// Partitions whose target offset already equals the translated one.
    pub up_to_date: usize,
    /// Groups and partitions left alone, with the reason.
    pub skipped: Vec<SkippedSync>,
}
