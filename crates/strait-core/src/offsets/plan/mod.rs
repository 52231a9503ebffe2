//! Failover and failback plans (`docs/design.md` §5): where each consumer group continues when it
//! moves from one cluster of a flow to the other, worked out from the exact offset map, written
//! down for a person to check, and applied idempotently.
//!
//! A flow `A->B` mirrors A's topics into B. A group *leaves* one cluster (its **origin**) and
//! *moves to* the other (its **destination**):
//! - [`plan_failover`]: groups consuming on A move to B. Their committed offsets on A are read and
//!   translated through the map ([`super::translate_offsets`], the same numbers as `offsets
//!   translate`, checkpoints and the HTTP API). When A does not answer,
//!   [`plan_failover_from_checkpoints`] takes each group's last checkpoint on B instead.
//! - [`plan_failback`]: groups consuming B's remote topics move back to A, through the map read
//!   backwards ([`strait_wire::offset_map::OffsetMap::translate_back`]). Records B received
//!   after the failover are not on A: the plan counts them, and says a `B->A` flow is needed.
//! - [`apply_plan`]: commits a plan's offsets into the same group ids on the destination,
//!   group by group, refusing a group that is running, has moved since the plan, or whose plan
//!   the map has overtaken. Applying twice is applying once.
//! - [`OffsetRow`]: the same plan as flat rows, one per group partition, for CSV export and
//!   import.
//!
//! Partitions, topics and offsets keep the flow's words in both directions: `topic` and
//! `source_offset` are on A, `remote_topic` and `target_offset` on B; [`Direction`] says which
//! side is read and which is written. Counts of records are offset distances, so they bound the
//! number of records from above (a transaction marker takes an offset).

mod apply;
mod failback;
mod failover;
mod rows;

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use strait_kafka::groups::{CommittedOffset, GroupDescription};
use strait_kafka::{Client, TopicPartition};
use strait_wire::offset_map::{OffsetMap, SourcePartition};

use crate::internal::map_store::MapStore;
use crate::internal::InternalError;
use crate::offsets::checkpoints::CheckpointError;

pub use apply::{
    apply_plan, ApplyOptions, ApplyReport, GroupReport, Outcome, PartitionApply, Refusal,
};
pub use failback::plan_failback;
pub use failover::{plan_failover, plan_failover_from_checkpoints};
pub use rows::OffsetRow;

/// The format version of plans this strait writes and reads. A plan with a higher version is
/// refused rather than misread.
pub const PLAN_VERSION: u32 = 1;

/// Which way a plan moves groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// From the flow's source cluster (A) to its target (B): offsets are read on A, written
    /// on B's remote topics.
    Failover,
    /// From the flow's target cluster (B) back to its source (A): offsets are read on B's
    /// remote topics, written on A's topics.
    Failback,
}

impl Direction {
    /// `failover` or `failback`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Failover => "failover",
            Direction::Failback => "failback",
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A cluster as the plan found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterRef {
    /// The alias in the config (`clusters`).
    pub alias: String,
    /// The bootstrap servers used, so `apply` can run without the config file.
    pub bootstrap_servers: Vec<String>,
    /// The cluster's id (its metadata's `cluster_id`) when the plan was made; `None` when it
    /// did not answer (or, in plans written before strait recorded it, unknown). `apply`
    /// refuses a plan whose clusters answer with other ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
}

/// A failover or failback plan: per group and partition, where the group continues on its
/// destination, how exact that is, and what stands in the way. Serialized as the plan file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailoverPlan {
    /// Format version, [`PLAN_VERSION`].
    pub version: u32,
    /// `failover` (A to B) or `failback` (B to A).
    pub direction: Direction,
    /// The flow, `A->B`, as the config names it.
    pub flow: String,
    /// The flow's source cluster (A).
    pub source: ClusterRef,
    /// The flow's target cluster (B).
    pub target: ClusterRef,
    /// The source's name in remote topics and in the offset map's topic
    /// (`source.cluster.alias`).
    pub source_alias: String,
    /// When the plan was made, RFC 3339 in UTC.
    pub created_at: String,
    /// When the plan was made, milliseconds since the Unix epoch.
    pub created_at_ms: i64,
    /// The offset map the plan was computed from, for the partitions in it. `apply` reads the
    /// map again and refuses a group whose offsets it would now translate differently.
    pub map: Vec<MapExtent>,
    /// The groups, by name.
    pub groups: Vec<GroupPlan>,
    /// What the reader must know about the whole plan, e.g. that the source offsets come from
    /// checkpoints because the source cluster did not answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// What the offset map held for one source partition when the plan was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapExtent {
    /// Source topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// The first source offset the map accounts for.
    pub source_start: i64,
    /// The source position the map accounts for everything before.
    pub source_end: i64,
    /// The first mirrored record's target offset.
    pub target_start: i64,
    /// One past the last mirrored record's target offset.
    pub target_end: i64,
    /// Segments (runs mirrored one to one); one more than the number of gaps. Those the map
    /// kept, once it was compacted below the source's log start (`docs/design.md` §4.5).
    pub segments: usize,
    /// Source offsets deleted before they were mirrored.
    pub lost: i64,
}

/// One group of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupPlan {
    /// The group id, the same on both clusters.
    pub group: String,
    /// The group's state on the source cluster (A) when planned: `Empty`, `Stable`, ...;
    /// `Dead` when there is no such group. `null` when not asked.
    pub source_state: Option<String>,
    /// The group's state on the target cluster (B) when planned, as `source_state`.
    pub target_state: Option<String>,
    /// What keeps the whole group from being applied, as found when planned (`apply` checks
    /// again): running members on the destination.
    pub blocker: Option<Blocker>,
    /// The group's partitions, by topic and partition.
    pub partitions: Vec<PartitionPlan>,
}

/// One partition of a group in a plan. Offsets are positions: the next offset the group reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionPlan {
    /// The topic on the source cluster (A).
    pub topic: String,
    /// The partition, the same on both clusters.
    pub partition: i32,
    /// The topic's name on the target cluster (B).
    pub remote_topic: String,
    /// The group's position on A. Failover: its committed offset there (read). Failback: where
    /// it continues there (planned; written by `apply`). `null`: none (failback of an unmapped
    /// partition).
    pub source_offset: Option<i64>,
    /// The group's position on B. Failover: where it continues there (planned; written by
    /// `apply`). Failback: its committed offset there (read). `null`: none (failover of a
    /// partition the map has nothing for).
    pub target_offset: Option<i64>,
    /// Whether the planned position is exact: every record before it was read on the origin,
    /// none after it was.
    pub exact: bool,
    /// Records the group would read a second time: the group's committed offset on the
    /// destination is ahead of the planned one by this much, so applying would move it back
    /// (blocked: [`Blocker::WouldMoveBack`]). Otherwise 0: the map is exact, so the planned
    /// position is never before a record the group read on the origin.
    pub duplicates: i64,
    /// Records the group read on its origin that its destination does not have. Failover:
    /// consumed on A and not mirrored to B yet (the recovery-point gap); if the flow mirrors them
    /// later the plan is stale and `apply` says to plan again. Failback: the records on B
    /// between the last one that came from A and the group's position, written on B directly
    /// (after the failover) and never on A; a `B->A` flow is needed to copy them.
    pub unreplicated: i64,
    /// Records the group has not read yet on its origin that its destination does not have, so
    /// it will not see them after the move. Failover: deleted on A before they were mirrored, or
    /// before the map's start. Failback: on B ahead of the group's position and not from A
    /// (written on B after the failover); a `B->A` flow is needed to copy them.
    pub missing_ahead: i64,
    /// The group's committed offset on the partition the plan writes (the remote partition on B
    /// for a failover, the source partition on A for a failback) when planned; `null`: none.
    /// `apply` refuses a group whose offset there has changed since, unless it is the planned
    /// one.
    pub committed_at_plan: Option<i64>,
    /// The metadata string of the commit read on the origin, written with the planned offset.
    pub metadata: Option<String>,
    /// Why this partition cannot be applied as planned, if it cannot.
    pub blocker: Option<Blocker>,
    /// Why the planned position is not exact, in words; empty when it is.
    pub note: String,
}

impl PartitionPlan {
    /// The source partition (on A).
    pub fn source_partition(&self) -> TopicPartition {
        TopicPartition::new(self.topic.clone(), self.partition)
    }

    /// The remote partition (on B).
    pub fn remote_partition(&self) -> TopicPartition {
        TopicPartition::new(self.remote_topic.clone(), self.partition)
    }

    /// The partition `direction` writes (on the destination).
    pub fn written_partition(&self, direction: Direction) -> TopicPartition {
        match direction {
            Direction::Failover => self.remote_partition(),
            Direction::Failback => self.source_partition(),
        }
    }

    /// The partition `direction` reads (on the origin).
    pub fn read_partition(&self, direction: Direction) -> TopicPartition {
        match direction {
            Direction::Failover => self.source_partition(),
            Direction::Failback => self.remote_partition(),
        }
    }

    /// The offset `direction` writes: the planned position on the destination.
    pub fn planned_offset(&self, direction: Direction) -> Option<i64> {
        match direction {
            Direction::Failover => self.target_offset,
            Direction::Failback => self.source_offset,
        }
    }

    /// The offset `direction` read: the group's committed position on the origin.
    pub fn read_offset(&self, direction: Direction) -> Option<i64> {
        match direction {
            Direction::Failover => self.source_offset,
            Direction::Failback => self.target_offset,
        }
    }
}

/// Why a group or partition cannot be applied as planned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Blocker {
    /// The group has running members on its destination: its offsets cannot be written there
    /// until they stop (Kafka refuses, and strait never moves a running group).
    GroupActive {
        /// The destination cluster's alias.
        cluster: String,
        /// The group's state there (`Stable`, `PreparingRebalance`, ...).
        state: String,
    },
    /// The group's committed offset on the destination is ahead of the planned one: applying
    /// would move it back, and it would read the records in between again.
    WouldMoveBack {
        /// The committed offset on the destination.
        committed: i64,
        /// The planned offset.
        planned: i64,
    },
    /// The flow does not mirror this topic (filtered out, internal, or from another cluster):
    /// there is nothing to continue from on the destination.
    TopicNotMirrored,
    /// The flow mirrors the topic, but the map has nothing for this partition yet.
    PartitionUnmapped,
}

impl fmt::Display for Blocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Blocker::GroupActive { cluster, state } => write!(
                f,
                "group is active on {cluster} (state {state}): stop its consumers there first"
            ),
            Blocker::WouldMoveBack { committed, planned } => write!(
                f,
                "group is at {committed} on the destination, ahead of the planned {planned}: \
                 applying would move it back and it would read {} records again",
                committed - planned
            ),
            Blocker::TopicNotMirrored => f.write_str("topic is not mirrored by this flow"),
            Blocker::PartitionUnmapped => {
                f.write_str("partition not mirrored yet: the offset map has nothing for it")
            }
        }
    }
}

/// Why a plan could not be made, read or applied as a whole. Per-group refusals are not errors:
/// they are in the [`ApplyReport`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// A Kafka operation on one cluster failed for good.
    #[error("cluster {cluster}: {what}: {source}")]
    Kafka {
        /// The cluster's alias.
        cluster: String,
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: strait_kafka::Error,
    },
    /// The offset map could not be read.
    #[error("flow {flow}: cannot read the offset map: {source}")]
    Map {
        /// The flow.
        flow: String,
        /// The error (boxed: it is large, and rare).
        #[source]
        source: Box<InternalError>,
    },
    /// The checkpoints topic could not be read (a failover plan made from checkpoints).
    #[error("flow {flow}: cannot read the checkpoints: {source}")]
    Checkpoints {
        /// The flow.
        flow: String,
        /// The error (boxed: it is large, and rare).
        #[source]
        source: Box<CheckpointError>,
    },
    /// A plan or offsets file is not valid.
    #[error("{0}")]
    Format(String),
    /// The plan names a cluster by an id other than the one a cluster it was applied to
    /// answers with.
    #[error("{0}")]
    OtherCluster(String),
    /// A plan written by a newer strait.
    #[error(
        "plan format version {found} is newer than this strait reads ({supported}): use the \
         strait that wrote it, or a newer one"
    )]
    Version {
        /// The plan's version.
        found: u64,
        /// [`PLAN_VERSION`].
        supported: u32,
    },
    /// The cluster a plan writes to is not available.
    #[error("{direction} writes offsets on cluster {cluster}, which is not connected")]
    NoDestination {
        /// The plan's direction.
        direction: Direction,
        /// The destination's alias.
        cluster: String,
    },
}

impl PlanError {
    /// Whether trying again later may help (a cluster unreachable, a coordinator moving).
    pub fn is_retriable(&self) -> bool {
        match self {
            PlanError::Kafka { source, .. } => source.is_retriable(),
            PlanError::Map { source, .. } => source.is_retriable(),
            PlanError::Checkpoints { source, .. } => source.is_retriable(),
            PlanError::NoDestination { .. } => true,
            PlanError::Format(_) | PlanError::Version { .. } | PlanError::OtherCluster(_) => false,
        }
    }

    fn kafka(cluster: &str, what: impl Into<String>) -> impl FnOnce(strait_kafka::Error) -> Self {
        let cluster = cluster.to_owned();
        let what = what.into();
        move |source| PlanError::Kafka {
            cluster,
            what,
            source,
        }
    }
}

impl FailoverPlan {
    /// The plan as pretty JSON, the plan file's format.
    pub fn to_json(&self) -> String {
        // A plan is strings and numbers only: serializing it cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Reads a plan file, refusing a version this strait does not know.
    pub fn from_json(text: &str) -> Result<Self, PlanError> {
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| PlanError::Format(format!("not a JSON plan: {e}")))?;
        match value.get("version").and_then(serde_json::Value::as_u64) {
            None => {
                return Err(PlanError::Format(
                    "not a strait plan: no numeric `version` field".into(),
                ))
            }
            Some(v) if v > u64::from(PLAN_VERSION) => {
                return Err(PlanError::Version {
                    found: v,
                    supported: PLAN_VERSION,
                })
            }
            Some(_) => {}
        }
        serde_json::from_value(value).map_err(|e| PlanError::Format(format!("invalid plan: {e}")))
    }

    /// The cluster the plan writes to.
    pub fn destination(&self) -> &ClusterRef {
        match self.direction {
            Direction::Failover => &self.target,
            Direction::Failback => &self.source,
        }
    }

    /// The cluster the plan read the groups' positions from.
    pub fn origin(&self) -> &ClusterRef {
        match self.direction {
            Direction::Failover => &self.source,
            Direction::Failback => &self.target,
        }
    }

    /// Partitions over all groups, and how many of them are blocked (by their own blocker or
    /// their group's).
    pub fn counts(&self) -> (usize, usize) {
        let mut total = 0;
        let mut blocked = 0;
        for g in &self.groups {
            for p in &g.partitions {
                total += 1;
                if g.blocker.is_some() || p.blocker.is_some() {
                    blocked += 1;
                }
            }
        }
        (total, blocked)
    }
}

impl FailoverPlan {
    /// A plan of `flow` made now from `groups`, with the extent of `map` for the partitions
    /// the groups use.
    fn assemble(
        direction: Direction,
        flow: &crate::config::FlowConfig,
        (source, target): (ClusterRef, ClusterRef),
        map: &OffsetMap,
        groups: Vec<GroupPlan>,
        notes: Vec<String>,
    ) -> Self {
        let used: std::collections::BTreeSet<SourcePartition> = groups
            .iter()
            .flat_map(|g| &g.partitions)
            .map(|p| SourcePartition::new(p.topic.clone(), p.partition))
            .collect();
        let (created_at, created_at_ms) = now();
        Self {
            version: PLAN_VERSION,
            direction,
            flow: flow.name(),
            source,
            target,
            source_alias: flow.source_alias.to_string(),
            created_at,
            created_at_ms,
            map: map_extents(map, &used),
            groups,
            notes,
        }
    }
}

impl ClusterRef {
    /// Cluster `alias` of a plan, reached at `bootstrap_servers`, of id `cluster_id`.
    fn new(alias: &str, bootstrap_servers: Vec<String>, cluster_id: Option<String>) -> Self {
        Self {
            alias: alias.to_owned(),
            bootstrap_servers,
            cluster_id,
        }
    }

    /// Cluster `alias` as `client` reaches it, with the id it answers with.
    async fn of(alias: &str, client: &Client) -> Self {
        Self::new(
            alias,
            client.config().bootstrap.clone(),
            cluster_id(client).await,
        )
    }

    /// Whether `client` reaches another cluster than this one: both ids known and different.
    /// Why, in words, when it does.
    pub async fn other_than(&self, client: &Client) -> Option<String> {
        let planned = self.cluster_id.as_deref()?;
        let found = cluster_id(client).await?;
        (found != planned).then(|| {
            format!(
                "the plan was made for cluster {} with id {planned}, but {} answers with id \
                 {found}: a plan applies only to the clusters it was made for (make a new \
                 plan with the config of these clusters)",
                self.alias,
                client.config().bootstrap.join(",")
            )
        })
    }
}

/// The id `client`'s cluster gives in its metadata; `None` if it gives none.
async fn cluster_id(client: &Client) -> Option<String> {
    client.metadata().await.ok()?.cluster_id.clone()
}

/// `flow`'s source and target clusters as a plan names them, reached with `source` and
/// `target`.
async fn cluster_refs(
    flow: &crate::config::FlowConfig,
    source: &Client,
    target: &Client,
) -> (ClusterRef, ClusterRef) {
    (
        ClusterRef::of(flow.source.as_str(), source).await,
        ClusterRef::of(flow.target.as_str(), target).await,
    )
}

/// The map's extent for `partitions` (those mapped), in order.
fn map_extents<'a>(
    map: &OffsetMap,
    partitions: impl IntoIterator<Item = &'a SourcePartition>,
) -> Vec<MapExtent> {
    let mut out: Vec<MapExtent> = partitions
        .into_iter()
        .filter_map(|sp| {
            let pmap = map.partition(sp)?;
            let extent = pmap.extent()?;
            let first = pmap.segments().first()?;
            Some(MapExtent {
                topic: sp.topic.clone(),
                partition: sp.partition,
                source_start: extent.src_start,
                source_end: extent.src_end,
                // A compacted map's floor keeps the first mirrored record's target offset.
                target_start: pmap.floor().map_or(first.dst_start, |f| f.dst_start),
                target_end: pmap.dst_end().unwrap_or(first.dst_start),
                segments: pmap.segments().len(),
                lost: pmap.lost_offsets(),
            })
        })
        .collect();
    out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    out.dedup_by(|a, b| a.topic == b.topic && a.partition == b.partition);
    out
}

/// Now, as (RFC 3339 UTC, ms since the epoch).
fn now() -> (String, i64) {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    (rfc3339_utc(ms), ms)
}

/// `ms` since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub(crate) fn rfc3339_utc(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    // Civil date from days since 1970-01-01 (proleptic Gregorian), by 400-year eras.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    )
}

/// The offset map of `flow` (whose source is `source_alias` in remote topics) as persisted on
/// `target`.
async fn read_map(target: &Client, source_alias: &str, flow: &str) -> Result<OffsetMap, PlanError> {
    MapStore::read(target, source_alias)
        .await
        .map_err(|source| PlanError::Map {
            flow: flow.to_owned(),
            source: Box::new(source),
        })
}

/// `group`'s committed offsets of `partitions` on `client`, cluster `cluster`.
async fn committed_on(
    client: &Client,
    cluster: &str,
    group: &str,
    partitions: &[TopicPartition],
) -> Result<BTreeMap<TopicPartition, CommittedOffset>, PlanError> {
    super::committed(client, group, partitions)
        .await
        .map_err(PlanError::kafka(
            cluster,
            format!("read the committed offsets of group {group}"),
        ))
}

/// Groups described together (`Client::describe_groups`) before a plan or an apply works on
/// them: one request per coordinator and cluster instead of one (or two) per group.
pub(super) const DESCRIBED_AT_ONCE: usize = 250;

/// Groups' descriptions on one cluster, asked together (`Client::describe_groups`).
type Descriptions = BTreeMap<String, strait_kafka::Result<GroupDescription>>;

/// Groups' committed offsets on one cluster, asked together
/// (`Client::offset_fetch_groups_with`).
type Committed = BTreeMap<String, strait_kafka::Result<BTreeMap<TopicPartition, CommittedOffset>>>;

/// `group`'s committed offsets from `known`, where its answer there is one.
fn known_committed(
    known: &Committed,
    group: &str,
) -> Option<BTreeMap<TopicPartition, CommittedOffset>> {
    match known.get(group) {
        Some(Ok(offsets)) => Some(offsets.clone()),
        _ => None,
    }
}

/// `group`'s committed offsets of `partitions` from `known`, where its answer there is one
/// (`known` must have been asked for at least those partitions).
fn known_committed_of(
    known: &Committed,
    group: &str,
    partitions: &[TopicPartition],
) -> Option<BTreeMap<TopicPartition, CommittedOffset>> {
    let Some(Ok(offsets)) = known.get(group) else {
        return None;
    };
    Some(
        partitions
            .iter()
            .filter_map(|tp| Some((tp.clone(), offsets.get(tp)?.clone())))
            .collect(),
    )
}

/// `group` from `known`, the descriptions asked together on `client`'s cluster, or asked alone
/// if it is not there. Plans and apply both read a group's state through this.
async fn known_or_described(
    known: &Descriptions,
    client: &Client,
    group: &str,
) -> strait_kafka::Result<GroupDescription> {
    match known.get(group) {
        Some(d) => d.clone(),
        None => client.describe_group(group).await,
    }
}

/// [`known_or_described`], its error said as the plan says it (cluster `cluster`).
async fn described_group(
    known: &Descriptions,
    client: &Client,
    cluster: &str,
    group: &str,
) -> Result<GroupDescription, PlanError> {
    known_or_described(known, client, group)
        .await
        .map_err(PlanError::kafka(cluster, format!("describe group {group}")))
}

/// `group` as `cluster` describes it.
async fn describe_group(
    client: &Client,
    cluster: &str,
    group: &str,
) -> Result<GroupDescription, PlanError> {
    client
        .describe_group(group)
        .await
        .map_err(PlanError::kafka(cluster, format!("describe group {group}")))
}

/// What blocks a whole group whose destination `cluster` describes it as `state`: running
/// members there.
fn active_blocker(cluster: &str, state: &GroupDescription) -> Option<Blocker> {
    state.is_active().then(|| Blocker::GroupActive {
        cluster: cluster.to_owned(),
        state: state.state.clone(),
    })
}

/// The records a group would read again, and the blocker, when the planned position on the
/// destination is `planned` and the group is committed at `on_destination` there now.
fn moving_back(planned: Option<i64>, on_destination: Option<i64>) -> (i64, Option<Blocker>) {
    match (planned, on_destination) {
        (None, _) => (0, Some(Blocker::PartitionUnmapped)),
        (Some(planned), Some(committed)) if committed > planned => (
            committed - planned,
            Some(Blocker::WouldMoveBack { committed, planned }),
        ),
        _ => (0, None),
    }
}

/// `group` passes the `--groups` narrowing (none: every group).
fn wanted(group: &str, narrow: Option<&crate::filter::PatternList>) -> bool {
    narrow.is_none_or(|n| n.matches(group))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_utc(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339_utc(1_795_000_000_123), "2026-11-18T11:06:40.123Z");
        assert_eq!(rfc3339_utc(-1), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn a_newer_plan_version_is_refused_by_name() {
        let err = FailoverPlan::from_json(r#"{"version": 99, "groups": []}"#).unwrap_err();
        assert!(matches!(err, PlanError::Version { found: 99, .. }), "{err}");
        let err = FailoverPlan::from_json(r#"{"groups": []}"#).unwrap_err();
        assert!(err.to_string().contains("version"), "{err}");
    }
}
