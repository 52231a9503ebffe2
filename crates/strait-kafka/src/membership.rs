//! Membership of a Kafka group under a protocol type of strait's own, the way Kafka Connect's
//! workers share their connectors and tasks: the classic group protocol's JoinGroup, SyncGroup,
//! Heartbeat and LeaveGroup, run against the group's coordinator.
//!
//! The coordinator gathers the members that join within the rebalance timeout, gives them a
//! generation number and names one the leader; the leader alone receives every member's
//! metadata, decides who does what, and hands each member its assignment through SyncGroup. A
//! member that does not heartbeat for the session timeout is removed, and the next generation
//! forms without it: its heartbeats and syncs are then refused (UNKNOWN_MEMBER_ID or
//! ILLEGAL_GENERATION), which is how it learns it no longer owns anything.
//!
//! A new member is first told its id and asked to join again with it (KIP-394). A member with
//! a `group.instance.id` is static (KIP-345): it keeps its place across restarts within the
//! session timeout, and a second process with the same instance id fences the first
//! (FENCED_INSTANCE_ID).

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest,
};
use kafka_protocol::protocol::StrBytes;

use crate::backoff::Backoff;
use crate::cluster::Client;
use crate::error::{is_coordinator_moved, Context, Error, Result};

/// How many times a join is sent again after an answer that another try may mend (the member
/// forgotten, a retriable error) before the error is returned.
const ATTEMPTS: u32 = 10;

/// A group's settings, as a member joins it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MembershipConfig {
    /// The group id.
    pub group: String,
    /// The protocol type every member of the group must share (Connect's is `connect`,
    /// consumers' `consumer`); a member of another type is refused
    /// (INCONSISTENT_GROUP_PROTOCOL).
    pub protocol_type: String,
    /// The name of the assignment protocol this member offers.
    pub protocol: String,
    /// A member silent for this long is removed (`session.timeout.ms`; the broker allows
    /// `group.min.session.timeout.ms`, 6 s, to `group.max.session.timeout.ms`, 30 min).
    pub session_timeout: Duration,
    /// How long the coordinator waits for the members to join again once a rebalance starts
    /// (`rebalance.timeout.ms`).
    pub rebalance_timeout: Duration,
    /// `group.instance.id`: a static member (KIP-345), or `None`.
    pub instance_id: Option<String>,
}

impl MembershipConfig {
    /// A dynamic member of `group` under `protocol_type`, with Connect's timeouts (session
    /// 10 s, rebalance 60 s).
    pub fn new(group: impl Into<String>, protocol_type: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            protocol_type: protocol_type.into(),
            protocol: "default".to_owned(),
            session_timeout: Duration::from_secs(10),
            rebalance_timeout: Duration::from_secs(60),
            instance_id: None,
        }
    }
}

/// One member of the group, as the last join left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    /// Its member id.
    pub member_id: String,
    /// Its `group.instance.id`, if static.
    pub instance_id: Option<String>,
    /// What it said about itself when it joined.
    pub metadata: Bytes,
}

/// A generation of the group, as a join returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    /// The generation: one more with every rebalance.
    pub generation: i32,
    /// This member's id.
    pub member_id: String,
    /// The leader's member id.
    pub leader: String,
    /// Every member with its metadata; given to the leader only (empty for the others).
    pub members: Vec<JoinedMember>,
}

impl Joined {
    /// Whether this member leads the generation and must hand out the assignments.
    pub fn is_leader(&self) -> bool {
        self.member_id == self.leader
    }
}

/// What a heartbeat learnt.
#[derive(Debug, Clone)]
pub enum Beat {
    /// This member still belongs to the current generation.
    Member,
    /// A rebalance started: join again (within the rebalance timeout) to stay in the group.
    Rebalance,
    /// This member is no longer in the group (removed after its session timeout, or fenced by
    /// a newer member with its instance id): it owns nothing and must stop writing. The error
    /// is the coordinator's answer.
    Fenced(Error),
}

/// A member of a group.
#[derive(Debug)]
pub struct Member {
    client: Client,
    config: MembershipConfig,
    member_id: String,
    generation: i32,
}

impl Member {
    /// A member of `config.group` on the cluster `client` reaches; nothing is sent until
    /// [`Member::join`].
    pub fn new(client: Client, config: MembershipConfig) -> Self {
        Self {
            client,
            config,
            member_id: String::new(),
            generation: -1,
        }
    }

    /// The member id the coordinator gave, empty before the first join.
    pub fn member_id(&self) -> &str {
        &self.member_id
    }

    /// The generation of the last join, -1 before the first.
    pub fn generation(&self) -> i32 {
        self.generation
    }

    /// Joins the group (again), offering `metadata`, and waits until the generation forms: the
    /// coordinator answers once every known member joined or the rebalance timeout passed.
    pub async fn join(&mut self, metadata: Bytes) -> Result<Joined> {
        let group = self.config.group.clone();
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let mut failures = 0;
        loop {
            let request = JoinGroupRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(group.clone())))
                .with_session_timeout_ms(millis(self.config.session_timeout))
                .with_rebalance_timeout_ms(millis(self.config.rebalance_timeout))
                .with_member_id(StrBytes::from_string(self.member_id.clone()))
                .with_group_instance_id(self.instance_id())
                .with_protocol_type(StrBytes::from_string(self.config.protocol_type.clone()))
                .with_protocols(vec![JoinGroupRequestProtocol::default()
                    .with_name(StrBytes::from_string(self.config.protocol.clone()))
                    .with_metadata(metadata.clone())]);
            let held = self.config.rebalance_timeout;
            let answer = self
                .to_coordinator("join group", &request, held, |a| a.error_code)
                .await?;
            match ResponseError::try_from_code(answer.error_code) {
                None => {
                    self.member_id = answer.member_id.to_string();
                    self.generation = answer.generation_id;
                    return Ok(Joined {
                        generation: answer.generation_id,
                        member_id: answer.member_id.to_string(),
                        leader: answer.leader.to_string(),
                        members: answer
                            .members
                            .into_iter()
                            .map(|m| JoinedMember {
                                member_id: m.member_id.to_string(),
                                instance_id: m.group_instance_id.map(|i| i.to_string()),
                                metadata: m.metadata,
                            })
                            .collect(),
                    });
                }
                // KIP-394: a new member learns its id and joins again with it.
                Some(ResponseError::MemberIdRequired) => {
                    self.member_id = answer.member_id.to_string();
                }
                // The coordinator forgot this member (its session ended): join as a new one.
                Some(ResponseError::UnknownMemberId) if failures < ATTEMPTS => {
                    failures += 1;
                    self.member_id.clear();
                }
                Some(code) if code.is_retriable() && failures < ATTEMPTS => {
                    failures += 1;
                    tokio::time::sleep(backoff.next_wait()).await;
                }
                Some(code) => return Err(Error::broker(code, None, Context::Group(group))),
            }
        }
    }

    /// Completes the rebalance that `joined` belongs to. The leader passes every member's
    /// assignment (member id, bytes); the others pass none. Returns this member's assignment.
    /// REBALANCE_IN_PROGRESS means another rebalance began meanwhile: join again.
    pub async fn sync(
        &mut self,
        joined: &Joined,
        assignments: &[(String, Bytes)],
    ) -> Result<Bytes> {
        let group = self.config.group.clone();
        let request = SyncGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.clone())))
            .with_generation_id(joined.generation)
            .with_member_id(StrBytes::from_string(joined.member_id.clone()))
            .with_group_instance_id(self.instance_id())
            .with_protocol_type(Some(StrBytes::from_string(
                self.config.protocol_type.clone(),
            )))
            .with_protocol_name(Some(StrBytes::from_string(self.config.protocol.clone())))
            .with_assignments(
                assignments
                    .iter()
                    .map(|(member, bytes)| {
                        SyncGroupRequestAssignment::default()
                            .with_member_id(StrBytes::from_string(member.clone()))
                            .with_assignment(bytes.clone())
                    })
                    .collect(),
            );
        // The coordinator holds a follower's sync until the leader's arrives.
        let held = self.config.rebalance_timeout;
        let answer = self
            .to_coordinator("sync group", &request, held, |a| a.error_code)
            .await?;
        match ResponseError::try_from_code(answer.error_code) {
            None => Ok(answer.assignment),
            Some(code) => Err(Error::broker(code, None, Context::Group(group))),
        }
    }

    /// Tells the coordinator this member lives; to be sent well within the session timeout (a
    /// third of it, as Kafka's clients do).
    pub async fn heartbeat(&self) -> Result<Beat> {
        let group = self.config.group.clone();
        let request = HeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.clone())))
            .with_generation_id(self.generation)
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_group_instance_id(self.instance_id());
        let answer = self
            .to_coordinator("heartbeat", &request, Duration::ZERO, |a| a.error_code)
            .await?;
        Ok(match ResponseError::try_from_code(answer.error_code) {
            None => Beat::Member,
            Some(ResponseError::RebalanceInProgress) => Beat::Rebalance,
            Some(
                code @ (ResponseError::UnknownMemberId
                | ResponseError::IllegalGeneration
                | ResponseError::FencedInstanceId),
            ) => Beat::Fenced(Error::broker(code, None, Context::Group(group))),
            Some(code) => return Err(Error::broker(code, None, Context::Group(group))),
        })
    }

    /// Leaves the group at once, so that the others rebalance without waiting for this
    /// member's session to end. A member that was never in a generation sends nothing.
    pub async fn leave(&mut self) -> Result<()> {
        if self.member_id.is_empty() {
            return Ok(());
        }
        let group = self.config.group.clone();
        let request = LeaveGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.clone())))
            .with_members(vec![MemberIdentity::default()
                .with_member_id(StrBytes::from_string(self.member_id.clone()))
                .with_group_instance_id(self.instance_id())
                .with_reason(Some(StrBytes::from_static_str("the member stops")))]);
        let answer = self
            .to_coordinator("leave group", &request, Duration::ZERO, |a| a.error_code)
            .await?;
        let code = ResponseError::try_from_code(answer.error_code).or_else(|| {
            answer
                .members
                .iter()
                .find_map(|m| ResponseError::try_from_code(m.error_code))
        });
        self.member_id.clear();
        self.generation = -1;
        match code {
            // Already gone: what leaving wanted.
            None | Some(ResponseError::UnknownMemberId) => Ok(()),
            Some(code) => Err(Error::broker(code, None, Context::Group(group))),
        }
    }

    fn instance_id(&self) -> Option<StrBytes> {
        self.config.instance_id.clone().map(StrBytes::from_string)
    }

    /// Sends `request` to the group's coordinator through [`Client::retry`]: an unreachable
    /// coordinator, or an answer (its `error_code`) saying the coordinator moved or is loading,
    /// is asked again after the coordinator is looked up afresh, until
    /// `default.api.timeout.ms`. The answer may take `held` beyond the request timeout: the
    /// coordinator holds a join or a sync until the generation forms.
    async fn to_coordinator<R>(
        &self,
        what: &str,
        request: &R,
        held: Duration,
        error_code: fn(&R::Response) -> i16,
    ) -> Result<R::Response>
    where
        R: kafka_protocol::protocol::Request + Sync,
        R::Response: crate::throttle::ThrottleTime + Send,
    {
        let group = &self.config.group;
        self.client
            .retry(what, || async {
                let coordinator = self.client.coordinator(group).await?;
                let connection = self.client.connection(coordinator).await?;
                let answer = connection.send_held(request, held).await?;
                match ResponseError::try_from_code(error_code(&answer)) {
                    Some(code) if is_coordinator_moved(code) => {
                        Err(Error::broker(code, None, Context::Group(group.clone())))
                    }
                    _ => Ok(answer),
                }
            })
            .await
    }
}

/// A duration in whole milliseconds, as the protocol's int32 fields take it.
fn millis(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}
