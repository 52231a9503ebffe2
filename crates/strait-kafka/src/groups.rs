//! Consumer-group offsets for any group, as an admin: find the coordinator, list and describe
//! groups, fetch committed offsets, and commit offsets on a group's behalf.
//!
//! A commit on a group's behalf uses generation -1 and an empty member id, as Kafka's
//! `AdminClient.alterConsumerGroupOffsets` does. A broker accepts that only while the group has
//! no active members; otherwise it answers UNKNOWN_MEMBER_ID (or ILLEGAL_GENERATION /
//! REBALANCE_IN_PROGRESS mid-rebalance), which comes back as [`Error::GroupActive`]: strait must
//! never move the position of a group whose consumers are running.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_describe_request::ConsumerGroupDescribeRequest;
use kafka_protocol::messages::consumer_group_describe_response::DescribedGroup as DescribedConsumerGroup;
use kafka_protocol::messages::describe_groups_request::DescribeGroupsRequest;
use kafka_protocol::messages::describe_groups_response::DescribedGroup as DescribedClassicGroup;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    ApiKey, FindCoordinatorRequest, GroupId, ListGroupsRequest, OffsetCommitRequest,
    OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::cluster::{BrokerId, Client, TopicPartition};
use crate::error::{check, Context, Error, Result};

/// A group as ListGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    /// The group id.
    pub group_id: String,
    /// `consumer` for consumer groups; `connect` and others exist.
    pub protocol_type: String,
    /// State (`Empty`, `Stable`, ...), when the broker reports it (ListGroups v4+).
    pub state: Option<String>,
}

/// A member of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMember {
    /// Member id.
    pub member_id: String,
    /// Static membership id (KIP-345), if any.
    pub group_instance_id: Option<String>,
    /// The member's `client.id`.
    pub client_id: String,
    /// The member's host.
    pub client_host: String,
}

/// A group as DescribeGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// The group id.
    pub group_id: String,
    /// State: classic groups `Empty`, `Stable`, `PreparingRebalance`, `CompletingRebalance`,
    /// `Dead`; consumer-protocol groups (KIP-848) `Empty`, `Assigning`, `Reconciling`,
    /// `Stable`, `Dead`.
    pub state: String,
    /// Protocol type (`consumer` for consumer groups).
    pub protocol_type: String,
    /// Members. Some brokers list none even for an active group: decide activity from
    /// [`GroupDescription::is_active`], which reads the state.
    pub members: Vec<GroupMember>,
}

impl GroupDescription {
    /// Whether the group has (or is getting) running members, so its offsets must not be
    /// written: any state but `Empty` and `Dead` (and a group that does not exist, `Dead`).
    pub fn is_active(&self) -> bool {
        !matches!(self.state.as_str(), "Empty" | "Dead" | "")
    }
}

/// A committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// The next offset the group will read.
    pub offset: i64,
    /// The leader epoch of the record before it, -1 if unknown (KIP-320).
    pub leader_epoch: i32,
    /// The commit's metadata string.
    pub metadata: Option<String>,
}

/// One offset to commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetToCommit {
    /// Partition.
    pub tp: TopicPartition,
    /// Next offset to read.
    pub offset: i64,
    /// Leader epoch, -1 if unknown.
    pub leader_epoch: i32,
    /// Metadata to keep with the commit.
    pub metadata: Option<String>,
}

fn group_id(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_owned()))
}

fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

/// A committed offset as OffsetFetch answers it; `None` where the group committed none (-1).
fn committed(
    offset: i64,
    leader_epoch: i32,
    metadata: Option<StrBytes>,
) -> Option<CommittedOffset> {
    (offset >= 0).then(|| CommittedOffset {
        offset,
        leader_epoch,
        metadata: metadata.map(|m| m.to_string()),
    })
}

/// `partitions`' indexes by topic.
fn by_topic(partitions: &[TopicPartition]) -> BTreeMap<&str, Vec<i32>> {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        by_topic.entry(&tp.topic).or_default().push(tp.partition);
    }
    by_topic
}

/// Groups named in one OffsetFetch request (v8).
const GROUPS_PER_OFFSET_FETCH: usize = 200;

/// How committed offsets are read (OffsetFetch's `require_stable`, KIP-447).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stability {
    /// Wait for a pending transactional offset commit to complete or abort (the partition
    /// answers `UNSTABLE_OFFSET_COMMIT`, retried): what a plan applied to groups reads.
    Stable,
    /// The last committed offset, pending transactional commits left aside, as MM2 and
    /// Kafka's admin client read by default: what the position capture reads every second,
    /// so that one application's open transaction never holds every group's capture.
    LastCommitted,
}

/// Partitions named in one OffsetFetch request (v8), over all its groups: fewer groups a
/// request where each names many.
const PARTITIONS_PER_OFFSET_FETCH: usize = 100_000;

/// OffsetFetch's first version that asks for several groups at once (KIP-709). strait's
/// highest otherwise stays at 7 (`strait_wire::frame`), so one group's fetch keeps its shape.
const OFFSET_FETCH_MANY: i16 = 8;

/// Groups whose coordinators are looked up (or that are described alone) at once.
const GROUPS_LOCATED_AT_ONCE: usize = 64;

/// Groups named in one DescribeGroups (or ConsumerGroupDescribe) request.
const GROUPS_PER_DESCRIBE: usize = 250;

/// A group as ConsumerGroupDescribe describes it (not GROUP_ID_NOT_FOUND: the caller has
/// already taken that to mean "not a consumer-protocol group").
fn consumer_protocol_description(g: DescribedConsumerGroup) -> Result<GroupDescription> {
    let group = g.group_id.0.to_string();
    check(g.error_code, g.error_message.as_ref(), || {
        Context::Group(group.clone())
    })?;
    Ok(GroupDescription {
        group_id: group,
        state: g.group_state.to_string(),
        protocol_type: "consumer".to_owned(),
        members: g
            .members
            .into_iter()
            .map(|m| GroupMember {
                member_id: m.member_id.to_string(),
                group_instance_id: m.instance_id.map(|s| s.to_string()),
                client_id: m.client_id.to_string(),
                client_host: m.client_host.to_string(),
            })
            .collect(),
    })
}

/// A group as DescribeGroups describes it. Kafka's classic coordinator describes an unknown
/// group as `Dead`; the KIP-848 coordinator answers GROUP_ID_NOT_FOUND. Both mean: no such
/// group, no members.
fn classic_description(g: DescribedClassicGroup) -> Result<GroupDescription> {
    let group = g.group_id.0.to_string();
    if ResponseError::try_from_code(g.error_code) == Some(ResponseError::GroupIdNotFound) {
        return Ok(GroupDescription {
            group_id: group,
            state: "Dead".to_owned(),
            protocol_type: String::new(),
            members: Vec::new(),
        });
    }
    check(g.error_code, g.error_message.as_ref(), || {
        Context::Group(group.clone())
    })?;
    Ok(GroupDescription {
        group_id: group,
        state: g.group_state.to_string(),
        protocol_type: g.protocol_type.to_string(),
        members: g
            .members
            .into_iter()
            .map(|m| GroupMember {
                member_id: m.member_id.to_string(),
                group_instance_id: m.group_instance_id.map(|s| s.to_string()),
                client_id: m.client_id.to_string(),
                client_host: m.client_host.to_string(),
            })
            .collect(),
    })
}

/// FindCoordinator's key type for a consumer group.
const GROUP_KEY: i8 = 0;
/// FindCoordinator's key type for a transactional id.
const TRANSACTION_KEY: i8 = 1;

/// Connections to a group coordinator that offset commits are spread over, by group id (one
/// group's commits stay on one connection, in order). A broker answers one request of a
/// connection at a time and holds each commit until its append to `__consumer_offsets`
/// (Kafka 4's coordinator lingers `group.coordinator.append.linger.ms`, 5 ms, to batch
/// appends): on one connection 1,000 groups' commits took 7.5 s on Apache Kafka 4.1.1, on 8
/// connections 1.1 s, on 32 0.5 s (`docs/failover.md`). Connections are opened when a commit
/// first needs one, so a mirror that syncs a few groups opens a few.
pub const COMMIT_LANES: u8 = 16;

/// The lane of [`COMMIT_LANES`] that carries `group`'s commits (FNV-1a of the id).
fn commit_lane(group: &str) -> u8 {
    let hash = group.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    u8::try_from(hash % u64::from(COMMIT_LANES)).unwrap_or(0)
}

impl Client {
    /// The coordinator of a group (FindCoordinator), cached until a routing error.
    pub async fn coordinator(&self, group: &str) -> Result<BrokerId> {
        self.find_coordinator(GROUP_KEY, group, Context::Group(group.to_owned()))
            .await
    }

    /// The coordinator of a transactional id (FindCoordinator with key type 1), cached until a
    /// routing error.
    pub async fn transaction_coordinator(&self, transactional_id: &str) -> Result<BrokerId> {
        let context = Context::Transaction(transactional_id.to_owned());
        self.find_coordinator(TRANSACTION_KEY, transactional_id, context)
            .await
    }

    async fn find_coordinator(
        &self,
        key_type: i8,
        key: &str,
        context: Context,
    ) -> Result<BrokerId> {
        if let Some(id) = self.cached_coordinator(key_type, key) {
            return Ok(id);
        }
        let request = FindCoordinatorRequest::default()
            .with_key(StrBytes::from_string(key.to_owned()))
            .with_key_type(key_type);
        let resp = self
            .retry("find coordinator", || async {
                let resp = self.send_any(&request).await?;
                check(resp.error_code, resp.error_message.as_ref(), || {
                    context.clone()
                })?;
                Ok(resp)
            })
            .await?;
        let id = BrokerId(resp.node_id.0);
        if !self.cached_metadata().brokers.contains_key(&id) {
            self.refresh_metadata().await?;
        }
        self.remember_coordinator(key_type, key, id);
        Ok(id)
    }

    /// Every group on the cluster: each broker lists the groups it coordinates, so all brokers
    /// are asked.
    pub async fn list_groups(&self) -> Result<Vec<GroupListing>> {
        let brokers: Vec<BrokerId> = self.metadata().await?.brokers.keys().copied().collect();
        let mut out = Vec::new();
        for broker in brokers {
            let resp = self
                .retry("list groups", || async {
                    let resp = self.send_to(broker, &ListGroupsRequest::default()).await?;
                    check(resp.error_code, None, || Context::None)?;
                    Ok(resp)
                })
                .await?;
            out.extend(resp.groups.into_iter().map(|g| GroupListing {
                group_id: g.group_id.0.to_string(),
                protocol_type: g.protocol_type.to_string(),
                state: Some(g.group_state.to_string()).filter(|s| !s.is_empty()),
            }));
        }
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out.dedup_by(|a, b| a.group_id == b.group_id);
        Ok(out)
    }

    /// Describes one group. A group that does not exist comes back in state `Dead`.
    ///
    /// Groups on Kafka 4's consumer protocol (KIP-848, `group.protocol=consumer`) are invisible
    /// to DescribeGroups: the broker answers `Dead` (v0-5) or GROUP_ID_NOT_FOUND (v6+) for them,
    /// running members or not. So, as Kafka's own Admin does, ConsumerGroupDescribe (API 69) is
    /// asked first where the coordinator offers it, and DescribeGroups only for a group it does
    /// not know (a classic group, or none).
    pub async fn describe_group(&self, group: &str) -> Result<GroupDescription> {
        self.retry("describe group", || async {
            let coordinator = self.coordinator(group).await?;
            let mut answers = self.describe_at(coordinator, &[group]).await?;
            answers.remove(group).ok_or_else(|| Error::Unexpected {
                broker: format!("{coordinator}"),
                what: format!("DescribeGroups answer does not mention group {group}"),
            })?
        })
        .await
    }

    /// Describes many groups with few requests: each coordinator is asked once for all of its
    /// groups, as [`Client::describe_group`] asks for one. A group whose coordinator cannot be
    /// found or asked, or whose answer is an error, is then described on its own, with
    /// `describe_group`'s retries: every group gets the answer `describe_group` would give.
    /// Failover plans and their apply describe a thousand groups on each cluster this way.
    pub async fn describe_groups(
        &self,
        groups: &[String],
    ) -> BTreeMap<String, Result<GroupDescription>> {
        use futures::StreamExt;
        let (requests, mut again) = self.by_coordinator(groups, GROUPS_PER_DESCRIBE).await;
        let asked =
            futures::future::join_all(requests.into_iter().map(|(coordinator, ids)| async move {
                let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
                let answers = self.describe_at(coordinator, &refs).await;
                (ids, answers)
            }))
            .await;
        let mut out = BTreeMap::new();
        for (ids, answers) in asked {
            match answers {
                Ok(mut answers) => {
                    for g in ids {
                        match answers.remove(&g) {
                            Some(Ok(d)) => {
                                out.insert(g, Ok(d));
                            }
                            _ => again.push(g),
                        }
                    }
                }
                Err(_) => again.extend(ids),
            }
        }
        let alone: Vec<(String, Result<GroupDescription>)> = futures::stream::iter(again)
            .map(|g| async move {
                let d = self.describe_group(&g).await;
                (g, d)
            })
            .buffer_unordered(GROUPS_LOCATED_AT_ONCE)
            .collect()
            .await;
        out.extend(alone);
        out
    }

    /// `groups` by coordinator, in requests of at most `per_request` groups; and the groups
    /// whose coordinator cannot be found now (asked alone later, with retries).
    async fn by_coordinator(
        &self,
        groups: &[String],
        per_request: usize,
    ) -> (Vec<(BrokerId, Vec<String>)>, Vec<String>) {
        use futures::StreamExt;
        let mut locating = Vec::new();
        for g in groups {
            let g = g.clone();
            locating.push(async move {
                let coordinator = self.coordinator(&g).await;
                (g, coordinator)
            });
        }
        let located: Vec<(String, Result<BrokerId>)> = futures::stream::iter(locating)
            .buffer_unordered(GROUPS_LOCATED_AT_ONCE)
            .collect()
            .await;
        let mut by_coordinator: BTreeMap<BrokerId, Vec<String>> = BTreeMap::new();
        let mut again: Vec<String> = Vec::new();
        for (g, coordinator) in located {
            match coordinator {
                Ok(c) => by_coordinator.entry(c).or_default().push(g),
                Err(_) => again.push(g),
            }
        }
        let requests = by_coordinator
            .into_iter()
            .flat_map(|(coordinator, ids)| {
                ids.chunks(per_request)
                    .map(|c| (coordinator, c.to_vec()))
                    .collect::<Vec<_>>()
            })
            .collect();
        (requests, again)
    }

    /// Asks `coordinator` to describe `groups`: both questions at once (pipelined on the
    /// connection), the consumer-protocol answer where a group is one, else the classic one.
    /// Groups the answers do not mention are left out.
    async fn describe_at(
        &self,
        coordinator: BrokerId,
        groups: &[&str],
    ) -> Result<BTreeMap<String, Result<GroupDescription>>> {
        let conn = self.connection(coordinator).await?;
        let ids: Vec<GroupId> = groups.iter().map(|g| group_id(g)).collect();
        let classic = DescribeGroupsRequest::default().with_groups(ids.clone());
        let modern = conn
            .version_of::<ConsumerGroupDescribeRequest>()
            .is_ok()
            .then(|| ConsumerGroupDescribeRequest::default().with_group_ids(ids));
        let (modern, classic) = futures::join!(
            async {
                match &modern {
                    Some(request) => Some(conn.send(request).await),
                    None => None,
                }
            },
            conn.send(&classic)
        );
        let mut out = BTreeMap::new();
        if let Some(modern) = modern {
            for g in modern?.groups {
                let id = g.group_id.0.to_string();
                // GROUP_ID_NOT_FOUND: not a consumer-protocol group (a classic one, or none).
                if ResponseError::try_from_code(g.error_code)
                    != Some(ResponseError::GroupIdNotFound)
                {
                    out.insert(id, consumer_protocol_description(g));
                }
            }
        }
        for g in classic?.groups {
            let id = g.group_id.0.to_string();
            out.entry(id).or_insert_with(|| classic_description(g));
        }
        Ok(out)
    }

    /// The group's committed offsets, for the given topics or (with `None`) all of them.
    /// Partitions without a committed offset are left out. Asks for stable offsets (KIP-447)
    /// where the broker supports it, so a pending transactional commit is waited for.
    pub async fn offset_fetch(
        &self,
        group: &str,
        topics: Option<&[TopicPartition]>,
    ) -> Result<BTreeMap<TopicPartition, CommittedOffset>> {
        self.offset_fetch_with(group, topics, Stability::Stable)
            .await
    }

    /// [`offset_fetch`](Self::offset_fetch), reading as `stability` says.
    pub async fn offset_fetch_with(
        &self,
        group: &str,
        topics: Option<&[TopicPartition]>,
        stability: Stability,
    ) -> Result<BTreeMap<TopicPartition, CommittedOffset>> {
        let topics = topics.map(|tps| {
            by_topic(tps)
                .into_iter()
                .map(|(t, ps)| {
                    OffsetFetchRequestTopic::default()
                        .with_name(topic_name(t))
                        .with_partition_indexes(ps)
                })
                .collect::<Vec<_>>()
        });
        let request = OffsetFetchRequest::default()
            .with_group_id(group_id(group))
            .with_topics(topics)
            .with_require_stable(stability == Stability::Stable);
        self.retry("offset fetch", || async {
            let coordinator = self.coordinator(group).await?;
            let resp = self.send_to(coordinator, &request).await?;
            // A group that does not exist has no offsets (the KIP-848 coordinator says so with
            // GROUP_ID_NOT_FOUND, the classic one with an empty answer).
            if ResponseError::try_from_code(resp.error_code) == Some(ResponseError::GroupIdNotFound)
            {
                return Ok(BTreeMap::new());
            }
            check(resp.error_code, None, || Context::Group(group.to_owned()))?;
            let mut out = BTreeMap::new();
            for t in resp.topics {
                for p in t.partitions {
                    let tp = TopicPartition::new(t.name.0.to_string(), p.partition_index);
                    check(p.error_code, None, || tp.context())?;
                    if let Some(committed) =
                        committed(p.committed_offset, p.committed_leader_epoch, p.metadata)
                    {
                        out.insert(tp, committed);
                    }
                }
            }
            Ok(out)
        })
        .await
    }

    /// The committed offsets of many groups on `partitions` (with `None`, every partition each
    /// committed to), with few
    /// requests: each coordinator that offers OffsetFetch v8 (KIP-709, Kafka 3.0 and later) is
    /// asked once for up to [`GROUPS_PER_OFFSET_FETCH`] of its groups. A group whose coordinator
    /// cannot be found or asked, or whose answer is an error, and every group of a coordinator
    /// without v8, is then asked alone with [`Client::offset_fetch`]'s retries: every group
    /// gets the answer `offset_fetch` would give. The checkpoint task reads a thousand groups
    /// every second this way.
    pub async fn offset_fetch_groups(
        &self,
        groups: &[String],
        partitions: Option<&[TopicPartition]>,
    ) -> BTreeMap<String, Result<BTreeMap<TopicPartition, CommittedOffset>>> {
        self.offset_fetch_groups_with(groups, partitions, Stability::Stable, None)
            .await
    }

    /// [`offset_fetch_groups`](Self::offset_fetch_groups), reading as `stability` says; a
    /// group asked alone (its batch failed, or its coordinator has no v8) that has no answer
    /// within `patience` gets [`Error::Timeout`], so one group cannot hold the others.
    pub async fn offset_fetch_groups_with(
        &self,
        groups: &[String],
        partitions: Option<&[TopicPartition]>,
        stability: Stability,
        patience: Option<std::time::Duration>,
    ) -> BTreeMap<String, Result<BTreeMap<TopicPartition, CommittedOffset>>> {
        use futures::StreamExt;
        // A request names each group's partitions: at most about 100,000 in all.
        let named = partitions.map_or(1, <[TopicPartition]>::len).max(1);
        let per_request = (PARTITIONS_PER_OFFSET_FETCH / named).clamp(1, GROUPS_PER_OFFSET_FETCH);
        let (requests, mut again) = self.by_coordinator(groups, per_request).await;
        let topics = partitions.map(|tps| {
            by_topic(tps)
                .into_iter()
                .map(|(t, ps)| {
                    OffsetFetchRequestTopics::default()
                        .with_name(topic_name(t))
                        .with_partition_indexes(ps)
                })
                .collect::<Vec<_>>()
        });
        // Futures made in a loop, each owning what it reads: a closure that lends them makes
        // the caller's future lose `Send` (rust-lang/rust#102211).
        let mut asking = Vec::new();
        for (coordinator, ids) in requests {
            let topics = topics.clone();
            asking.push(async move {
                let answers = self
                    .offset_fetch_at(coordinator, &ids, topics, stability)
                    .await;
                (ids, answers)
            });
        }
        let asked = futures::future::join_all(asking).await;
        let mut out = BTreeMap::new();
        for (ids, answers) in asked {
            match answers {
                Ok(Some(mut answers)) => {
                    for g in ids {
                        match answers.remove(&g) {
                            Some(offsets) => {
                                out.insert(g, Ok(offsets));
                            }
                            None => again.push(g),
                        }
                    }
                }
                Ok(None) | Err(_) => again.extend(ids),
            }
        }
        let mut alone = Vec::new();
        for g in again {
            let partitions = partitions.map(<[TopicPartition]>::to_vec);
            alone.push(async move {
                let fetch = self.offset_fetch_with(&g, partitions.as_deref(), stability);
                let offsets =
                    match patience {
                        None => fetch.await,
                        Some(after) => tokio::time::timeout(after, fetch).await.unwrap_or(Err(
                            Error::Timeout {
                                broker: format!("the coordinator of group {g}"),
                                api: ApiKey::OffsetFetch,
                                after,
                            },
                        )),
                    };
                (g, offsets)
            });
        }
        let alone: Vec<_> = futures::stream::iter(alone)
            .buffer_unordered(GROUPS_LOCATED_AT_ONCE)
            .collect()
            .await;
        out.extend(alone);
        out
    }

    /// Asks `coordinator` for the committed offsets of `groups` in one OffsetFetch v8; `None`
    /// if it does not offer v8. Groups whose answer is an error (or holds one) are left out.
    async fn offset_fetch_at(
        &self,
        coordinator: BrokerId,
        groups: &[String],
        topics: Option<Vec<OffsetFetchRequestTopics>>,
        stability: Stability,
    ) -> Result<Option<BTreeMap<String, BTreeMap<TopicPartition, CommittedOffset>>>> {
        let conn = self.connection(coordinator).await?;
        let offers = conn
            .versions()
            .broker_range(ApiKey::OffsetFetch)
            .is_some_and(|(lo, hi)| (lo..=hi).contains(&OFFSET_FETCH_MANY));
        if !offers {
            return Ok(None);
        }
        let request = OffsetFetchRequest::default()
            .with_groups(
                groups
                    .iter()
                    .map(|g| {
                        // With no topics named: every topic the group committed to.
                        OffsetFetchRequestGroup::default()
                            .with_group_id(group_id(g))
                            .with_topics(topics.clone())
                    })
                    .collect(),
            )
            .with_require_stable(stability == Stability::Stable);
        let resp = conn.send_at(&request, OFFSET_FETCH_MANY).await?;
        let mut out = BTreeMap::new();
        'groups: for g in resp.groups {
            let group = g.group_id.0.to_string();
            let mut offsets = BTreeMap::new();
            match ResponseError::try_from_code(g.error_code) {
                None => {}
                // No such group: no offsets, as `offset_fetch` answers.
                Some(ResponseError::GroupIdNotFound) => {
                    out.insert(group, offsets);
                    continue;
                }
                Some(_) => continue,
            }
            for t in g.topics {
                for p in t.partitions {
                    if p.error_code != 0 {
                        continue 'groups;
                    }
                    let tp = TopicPartition::new(t.name.0.to_string(), p.partition_index);
                    if let Some(committed) =
                        committed(p.committed_offset, p.committed_leader_epoch, p.metadata)
                    {
                        offsets.insert(tp, committed);
                    }
                }
            }
            out.insert(group, offsets);
        }
        Ok(Some(out))
    }

    /// Commits offsets for a group that has no active members (generation -1, empty member
    /// id). An active group gives [`Error::GroupActive`] and nothing is written. Sent on the
    /// group's lane of [`COMMIT_LANES`] connections to its coordinator.
    pub async fn offset_commit(&self, group: &str, offsets: &[OffsetToCommit]) -> Result<()> {
        let mut by_topic: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
        for o in offsets {
            by_topic.entry(&o.tp.topic).or_default().push(
                OffsetCommitRequestPartition::default()
                    .with_partition_index(o.tp.partition)
                    .with_committed_offset(o.offset)
                    .with_committed_leader_epoch(o.leader_epoch)
                    .with_committed_metadata(Some(StrBytes::from_string(
                        o.metadata.clone().unwrap_or_default(),
                    ))),
            );
        }
        let request = OffsetCommitRequest::default()
            .with_group_id(group_id(group))
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(StrBytes::default())
            .with_retention_time_ms(-1)
            .with_topics(
                by_topic
                    .into_iter()
                    .map(|(t, ps)| {
                        OffsetCommitRequestTopic::default()
                            .with_name(topic_name(t))
                            .with_partitions(ps)
                    })
                    .collect(),
            );
        self.retry("offset commit", || async {
            let coordinator = self.coordinator(group).await?;
            let resp = self
                .connection_on_lane(coordinator, commit_lane(group))
                .await?
                .send(&request)
                .await?;
            for t in resp.topics {
                for p in t.partitions {
                    match ResponseError::try_from_code(p.error_code) {
                        None => {}
                        Some(
                            ResponseError::UnknownMemberId
                            | ResponseError::IllegalGeneration
                            | ResponseError::RebalanceInProgress
                            | ResponseError::FencedInstanceId
                            | ResponseError::StaleMemberEpoch,
                        ) => {
                            return Err(Error::GroupActive {
                                group: group.to_owned(),
                            })
                        }
                        Some(code) => {
                            return Err(Error::broker(
                                code,
                                None,
                                TopicPartition::new(t.name.0.to_string(), p.partition_index)
                                    .context(),
                            ))
                        }
                    }
                }
            }
            Ok(())
        })
        .await
    }
}
