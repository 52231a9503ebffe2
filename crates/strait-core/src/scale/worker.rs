//! A worker: one `strait run` as a member of the workers' group on the target cluster. It joins,
//! the leader hands out the units ([`super::assign`]), and it heartbeats; what it owns is
//! published on a watch channel for the flows to follow. While a rebalance runs, it keeps what
//! it owns (the next owner of a unit that moves fences it through the unit's transactional id,
//! `docs/design.md` §7.3); once it is told it no longer belongs to the group, or it could not
//! reach the coordinator for a whole session timeout (the group has then removed it), it owns
//! nothing until it has joined again.
//!
//! What a member says when it joins and what the leader hands back are small JSON documents
//! under the protocol type `strait` ([`PROTOCOL_TYPE`]), readable with
//! `kafka-consumer-groups --describe --members --verbose` or DescribeGroups:
//! `{"version":1,"generation":4,"owned":["A->B/0"]}` and
//! `{"version":1,"generation":5,"leader":"…","units":["A->B/0","A->B/2"]}`.

use std::collections::BTreeSet;
use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use serde::{Deserialize, Serialize};
use strait_kafka::membership::{Beat, Joined, Member, MembershipConfig};
use strait_kafka::Client;
use tokio::sync::watch;
use tokio::time::Instant;

use super::assign::{assign, Claim};
use super::units::Unit;

/// The protocol type of strait's workers' groups: a consumer or a Connect worker that joins by
/// mistake is refused (INCONSISTENT_GROUP_PROTOCOL).
pub const PROTOCOL_TYPE: &str = "strait";

/// The version of the join metadata and assignment documents.
const VERSION: u32 = 1;

/// What a member tells the group when it joins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metadata {
    pub version: u32,
    /// The generation it owned `owned` in, -1 if none.
    pub generation: i32,
    /// The units it owns (names, `A->B/0`).
    pub owned: Vec<String>,
}

/// What the leader hands one member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    pub version: u32,
    pub generation: i32,
    /// The leader's member id.
    pub leader: String,
    /// The units the member owns in this generation.
    pub units: Vec<String>,
}

/// What this worker owns, as of its last completed rebalance.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ownership {
    /// The generation the units were handed out in (-1: none yet, or no longer in the group).
    pub generation: i32,
    /// This worker's member id (empty before the first join).
    pub member_id: String,
    /// The leader's member id.
    pub leader: String,
    /// The units this worker owns.
    pub units: BTreeSet<Unit>,
    /// How many members the generation has; known to the leader only (0 on the others).
    pub members: usize,
}

/// Why a worker stopped.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The coordinator refused the worker for a reason another try will not mend (an ACL, a
    /// group of another protocol type, a session timeout outside the broker's bounds).
    #[error("the workers' group refused this worker: {0}")]
    Refused(#[source] strait_kafka::Error),
}

/// A member of the workers' group.
#[derive(Debug)]
pub struct Worker {
    member: Member,
    config: MembershipConfig,
    units: BTreeSet<Unit>,
    owned: watch::Sender<Ownership>,
}

impl Worker {
    /// A worker for `units` (every unit of every flow of its config) in the group `config`
    /// names, on the cluster `client` reaches. Nothing is sent until [`Worker::run`].
    pub fn new(client: Client, config: MembershipConfig, units: BTreeSet<Unit>) -> Self {
        let owned = watch::Sender::new(Ownership {
            generation: -1,
            ..Ownership::default()
        });
        Self {
            member: Member::new(client, config.clone()),
            config,
            units,
            owned,
        }
    }

    /// What this worker owns, updated after every rebalance and whenever it loses its place.
    pub fn ownership(&self) -> watch::Receiver<Ownership> {
        self.owned.subscribe()
    }

    /// Joins, owns, heartbeats and joins again, until `stop` resolves (then it leaves the group
    /// so that the others take its units at once; a static member does not, so that its units
    /// wait for it to come back, up to its session timeout) or the coordinator refuses it for
    /// good (another process took its `group.instance.id`, an ACL ...).
    pub async fn run(&mut self, stop: impl Future<Output = ()>) -> Result<(), WorkerError> {
        tokio::pin!(stop);
        let result = tokio::select! {
            () = &mut stop => Ok(()),
            result = self.membership() => result,
        };
        self.lose("the worker stops");
        if let Some(id) = &self.config.instance_id {
            tracing::info!(group = %self.config.group, instance_id = %id,
                "a static member stops without leaving the group: its units wait for it up to the session timeout");
            return result;
        }
        if let Err(e) = self.member.leave().await {
            tracing::warn!(group = %self.config.group, error = %e,
                "could not leave the workers' group; the others take over after its session timeout");
        }
        result
    }

    async fn membership(&mut self) -> Result<(), WorkerError> {
        let fresh_backoff = || {
            strait_kafka::backoff::Backoff::new(Duration::from_millis(200), Duration::from_secs(5))
        };
        let mut backoff = fresh_backoff();
        loop {
            match self.rebalance().await {
                Ok(()) => backoff = fresh_backoff(),
                Err(e) if refused_for_good(&e) => return Err(WorkerError::Refused(e)),
                Err(e) => {
                    tracing::warn!(group = %self.config.group, error = %e,
                        "joining the workers' group failed; trying again");
                    tokio::time::sleep(backoff.next_wait()).await;
                    continue;
                }
            }
            self.heartbeats().await?;
        }
    }

    /// One rebalance: join, assign if leading, sync, publish.
    async fn rebalance(&mut self) -> Result<(), strait_kafka::Error> {
        let current = self.owned.borrow().clone();
        let metadata = Metadata {
            version: VERSION,
            generation: current.generation,
            owned: current.units.iter().map(Unit::to_string).collect(),
        };
        let joined = self.member.join(to_json(&metadata)).await?;
        let assignments = if joined.is_leader() {
            self.hand_out(&joined)
        } else {
            Vec::new()
        };
        let bytes = match self.member.sync(&joined, &assignments).await {
            Ok(bytes) => bytes,
            // Another rebalance began: join again, keeping what it owns meanwhile.
            Err(e) if e.code() == Some(ResponseError::RebalanceInProgress) => return Ok(()),
            Err(e) => return Err(e),
        };
        let assignment: Assignment = match serde_json::from_slice(&bytes) {
            Ok(a) => a,
            Err(e) => {
                tracing::error!(group = %self.config.group, error = %e,
                    "the leader's assignment is unreadable (a worker of another strait version \
                     leads?); this worker owns nothing in this generation");
                Assignment {
                    version: VERSION,
                    generation: joined.generation,
                    leader: joined.leader.clone(),
                    units: Vec::new(),
                }
            }
        };
        let units = self.known_units(&assignment.units);
        let ownership = Ownership {
            generation: joined.generation,
            member_id: joined.member_id.clone(),
            leader: joined.leader.clone(),
            units,
            members: joined.members.len(),
        };
        tracing::info!(group = %self.config.group, generation = ownership.generation,
            leader = joined.is_leader(), units = ?ownership.units.iter().map(Unit::to_string).collect::<Vec<_>>(),
            "rebalance done");
        self.owned.send_replace(ownership);
        Ok(())
    }

    /// The leader's work: every member's assignment, from what each said it owns.
    fn hand_out(&self, joined: &Joined) -> Vec<(String, Bytes)> {
        let claims: Vec<Claim> = joined
            .members
            .iter()
            .map(|m| {
                let metadata = serde_json::from_slice::<Metadata>(&m.metadata).unwrap_or_else(|e| {
                    tracing::warn!(group = %self.config.group, member = %m.member_id, error = %e,
                        "a member's join metadata is unreadable; it is treated as owning nothing");
                    Metadata { version: VERSION, generation: -1, owned: Vec::new() }
                });
                Claim {
                    member: m.member_id.clone(),
                    owned: metadata
                        .owned
                        .iter()
                        .filter_map(|u| u.parse().ok())
                        .collect(),
                    generation: metadata.generation,
                }
            })
            .collect();
        assign(&self.units, &claims)
            .into_iter()
            .map(|(member, units)| {
                let assignment = Assignment {
                    version: VERSION,
                    generation: joined.generation,
                    leader: joined.member_id.clone(),
                    units: units.iter().map(Unit::to_string).collect(),
                };
                (member, to_json(&assignment))
            })
            .collect()
    }

    /// The assigned units this worker's config has; the others are named in an error (the
    /// leader runs another config).
    fn known_units(&self, names: &[String]) -> BTreeSet<Unit> {
        let mut units = BTreeSet::new();
        for name in names {
            match name.parse::<Unit>() {
                Ok(unit) if self.units.contains(&unit) => {
                    units.insert(unit);
                }
                _ => tracing::error!(group = %self.config.group, unit = %name,
                    "the leader assigned a unit this worker's config does not have (do the \
                     workers run different configs?); it is not run here"),
            }
        }
        units
    }

    /// Heartbeats a third of the session timeout apart until a rebalance starts or the worker
    /// loses its place.
    async fn heartbeats(&mut self) -> Result<(), WorkerError> {
        let interval = self.config.session_timeout / 3;
        let mut last_answer = Instant::now();
        loop {
            tokio::time::sleep(interval).await;
            match self.member.heartbeat().await {
                Ok(Beat::Member) => last_answer = Instant::now(),
                Ok(Beat::Rebalance) => return Ok(()),
                Ok(Beat::Fenced(e)) => {
                    self.lose(&format!("the group no longer has this worker: {e}"));
                    // Another process joined with this one's `group.instance.id`: joining
                    // again would push it out in turn.
                    if refused_for_good(&e) {
                        return Err(WorkerError::Refused(e));
                    }
                    return Ok(());
                }
                Err(e) if last_answer.elapsed() >= self.config.session_timeout => {
                    self.lose(&format!(
                        "no heartbeat answered for the session timeout ({:?}): {e}",
                        self.config.session_timeout
                    ));
                    return Ok(());
                }
                Err(e) => {
                    tracing::warn!(group = %self.config.group, error = %e, "heartbeat failed");
                }
            }
        }
    }

    /// Owns nothing more, and says why.
    fn lose(&self, why: &str) {
        let had = self.owned.borrow().units.len();
        if had > 0 {
            tracing::warn!(group = %self.config.group, units = had, reason = why,
                "this worker gives up its units");
        }
        self.owned.send_modify(|o| {
            o.generation = -1;
            o.units.clear();
            o.members = 0;
        });
    }
}

/// Whether the coordinator's refusal will not change by trying again.
fn refused_for_good(e: &strait_kafka::Error) -> bool {
    matches!(
        e.code(),
        Some(
            ResponseError::GroupAuthorizationFailed
                | ResponseError::InconsistentGroupProtocol
                | ResponseError::InvalidSessionTimeout
                | ResponseError::InvalidGroupId
                | ResponseError::GroupMaxSizeReached
                | ResponseError::FencedInstanceId
        )
    )
}

fn to_json<T: Serialize>(value: &T) -> Bytes {
    Bytes::from(serde_json::to_vec(value).expect("plain structs serialize"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_read_as_the_module_doc_shows() {
        let metadata: Metadata =
            serde_json::from_str(r#"{"version":1,"generation":4,"owned":["A->B/0"]}"#).unwrap();
        assert_eq!(metadata.owned, ["A->B/0"]);
        let assignment: Assignment = serde_json::from_str(
            r#"{"version":1,"generation":5,"leader":"m-1","units":["A->B/0","A->B/2"]}"#,
        )
        .unwrap();
        assert_eq!(assignment.units.len(), 2);
        assert_eq!(
            serde_json::from_slice::<Assignment>(&to_json(&assignment)).unwrap(),
            assignment
        );
    }
}
