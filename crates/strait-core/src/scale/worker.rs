//! A worker: one `strait run` as a member of the workers' group on the target cluster. It joins,
//! the leader hands out the units ([`super::assign`]), and it heartbeats; what it owns is
//! published on a watch channel for the flows to follow, with the lease they write under
//! (`strait_kafka::lease`). While a rebalance runs, it keeps what it owns. A unit moves in two
//! rebalances ([`super::assign::hand_over`]): its holder is not given it back, stops it, and
//! joins again; only then does the leader hand it to its new owner. Once the worker is told it no
//! longer belongs to the group, or its lease lapses (no answer from the coordinator within the
//! session timeout, less a margin: the group may have removed it), it owns nothing and its lease
//! is revoked for good; it joins again under a new one.
//!
//! Members agree before anything is handed out: each says how many units the flow has
//! (`tasks.max`) and a fingerprint of the settings that decide what each unit writes and how
//! ([`Agreement`]). While they differ (a changed config rolling through the workers), the
//! leader hands out nothing and says why, so two counts never run side by side.
//!
//! What a member says when it joins and what the leader hands back are small JSON documents
//! under the protocol type `strait` ([`PROTOCOL_TYPE`]), readable with
//! `kafka-consumer-groups --describe --members --verbose` or DescribeGroups:
//! `{"version":1,"generation":4,"owned":["A->B/0"],"units":4,"fingerprint":"…"}` and
//! `{"version":1,"generation":5,"leader":"…","units":["A->B/0","A->B/2"]}` (with `"refused"`
//! saying why when the members disagree).

use std::collections::BTreeSet;
use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use serde::{Deserialize, Serialize};
use strait_kafka::lease::Lease;
use strait_kafka::membership::{Beat, Joined, Member, MembershipConfig};
use strait_kafka::Client;
use tokio::sync::watch;
use tokio::time::Instant;

use super::assign::{assign, hand_over, Claim};
use super::units::Unit;

/// The protocol type of strait's workers' groups: a consumer or a Connect worker that joins by
/// mistake is refused (INCONSISTENT_GROUP_PROTOCOL).
pub const PROTOCOL_TYPE: &str = "strait";

/// How long a stopping worker waits for the coordinator to take its LeaveGroup.
const LEAVE_PATIENCE: Duration = Duration::from_secs(3);

/// The version of the join metadata and assignment documents.
const VERSION: u32 = 1;

/// What a member tells the group when it joins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metadata {
    pub version: u32,
    /// The generation it owned `owned` in, -1 if none.
    pub generation: i32,
    /// The units it owns (names, `A->B/0`), or still runs while it stops them.
    pub owned: Vec<String>,
    /// How many units its config cuts the flow into (`tasks.max`); 0 from a worker older than
    /// this field, which never agrees.
    #[serde(default)]
    pub units: u32,
    /// [`Agreement::fingerprint`] of its config.
    #[serde(default)]
    pub fingerprint: String,
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
    /// Why the leader handed out nothing in this generation (the members disagree).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// What the members must share before the leader hands out any unit.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Agreement {
    /// How many units the flow has (`tasks.max`).
    pub units: u32,
    /// A digest of the settings that decide which partitions each unit writes, where and how
    /// (`strait_core::config::FlowConfig::workers_fingerprint`).
    pub fingerprint: String,
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
    /// The lease the units write under: renewed while the worker belongs to the group, revoked
    /// for good when it loses its place.
    pub lease: Lease,
    /// Why the leader handed out nothing (the members' configs disagree), if it did.
    pub refused: Option<String>,
    /// Units must not start before this moment: a static member that joins owning nothing
    /// may have taken the place (and the units) of a process with its instance id that still
    /// runs them until it learns so at its next heartbeat, so its units wait out that
    /// process's lease (a session timeout).
    pub start_after: Option<std::time::Instant>,
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
    agreement: Agreement,
    owned: watch::Sender<Ownership>,
    /// The units this process still runs (told by whoever runs them).
    running: watch::Receiver<BTreeSet<Unit>>,
    /// Keeps `running` open when nobody tells it anything.
    _running: Option<watch::Sender<BTreeSet<Unit>>>,
    /// Units claimed at the last join and not handed back: once none of them runs, the worker
    /// joins again so that the leader can hand them over.
    releasing: Option<BTreeSet<Unit>>,
}

impl Worker {
    /// A worker for `units` (every unit of every flow of its config) in the group `config`
    /// names, on the cluster `client` reaches. Nothing is sent until [`Worker::run`].
    pub fn new(client: Client, config: MembershipConfig, units: BTreeSet<Unit>) -> Self {
        let owned = watch::Sender::new(Ownership {
            generation: -1,
            ..Ownership::default()
        });
        let (running_tx, running) = watch::channel(BTreeSet::new());
        let agreement = Agreement {
            units: units.len() as u32,
            fingerprint: String::new(),
        };
        Self {
            member: Member::new(client, config.clone()),
            config,
            units,
            agreement,
            owned,
            running,
            _running: Some(running_tx),
            releasing: None,
        }
    }

    /// Joins with `agreement` instead of the unit count alone.
    pub fn with_agreement(mut self, agreement: Agreement) -> Self {
        self.agreement = agreement;
        self
    }

    /// Follows which units still run here: a unit handed away is claimed until it no longer
    /// runs, and its release is told to the group by joining again. Without it, a unit is
    /// taken to stop the moment it is handed away.
    pub fn with_running(mut self, running: watch::Receiver<BTreeSet<Unit>>) -> Self {
        self.running = running;
        self._running = None;
        self
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
        let (result, stopped) = tokio::select! {
            () = &mut stop => (Ok(()), true),
            result = self.membership() => (result, false),
        };
        if stopped {
            // A clean stop: the units finish their round (an exactly-once unit commits its
            // transaction) under the lease they hold, and only then is it revoked. Revoked
            // first, their last round was refused and its transaction left to abort: a
            // read_uncommitted consumer read it and then the next owner's copies.
            self.until_units_stop().await;
        }
        if stopped {
            // Asked to stop (SIGTERM, a reload that removed the flow): the units have finished
            // their rounds, and handing them back is the normal end, not a warning.
            self.give_up("the worker stops", false);
        } else {
            self.lose("the worker stops");
        }
        if let Some(id) = &self.config.instance_id {
            tracing::info!(group = %self.config.group, instance_id = %id,
                "a static member stops without leaving the group: its units wait for it up to the session timeout");
            return result;
        }
        // Bounded: the stop already waited for the units, and a coordinator that does not
        // answer removes the member at its session timeout anyway.
        let left = tokio::time::timeout(LEAVE_PATIENCE, self.member.leave()).await;
        if let Err(e) = left
            .map_err(|_| format!("no answer within {LEAVE_PATIENCE:?}"))
            .and_then(|left| left.map_err(|e| e.to_string()))
        {
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
        // What this worker holds: its units, and those handed away that still run.
        let claimed: BTreeSet<Unit> = current
            .units
            .iter()
            .chain(self.releasing.iter().flatten())
            .cloned()
            .collect();
        let metadata = Metadata {
            version: VERSION,
            generation: current.generation,
            owned: claimed.iter().map(Unit::to_string).collect(),
            units: self.agreement.units,
            fingerprint: self.agreement.fingerprint.clone(),
        };
        let joined = match self.member.join(to_json(&metadata)).await {
            Ok(joined) => joined,
            Err(e) => {
                self.lose_if_lapsed(&e);
                return Err(e);
            }
        };
        // A new member id: the group forgot this worker (it may have handed its units away).
        if !current.member_id.is_empty() && joined.member_id != current.member_id {
            self.lose("the group knows this worker under a new member id");
        }
        let assignments = if joined.is_leader() {
            self.hand_out(&joined)
        } else {
            Vec::new()
        };
        let sent = std::time::Instant::now();
        let bytes = match self.member.sync(&joined, &assignments).await {
            Ok(bytes) => bytes,
            // Another rebalance began: join again, keeping what it owns meanwhile.
            Err(e) if e.code() == Some(ResponseError::RebalanceInProgress) => return Ok(()),
            Err(e) => {
                self.lose_if_lapsed(&e);
                return Err(e);
            }
        };
        let lease = self.owned.borrow().lease.clone();
        lease.renew(sent, self.config.session_timeout);
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
                    refused: None,
                }
            }
        };
        let units = self.known_units(&assignment.units);
        if let Some(why) = &assignment.refused {
            tracing::error!(group = %self.config.group, generation = joined.generation, reason = %why,
                "the workers' configs disagree: no unit runs anywhere until every worker runs the same settings");
        }
        // Handed away: released (joining again) once they no longer run.
        let released: BTreeSet<Unit> = claimed.difference(&units).cloned().collect();
        self.releasing = (!released.is_empty()).then_some(released);
        let start_after = match (&self.config.instance_id, current.generation) {
            (Some(_), -1) if !units.is_empty() => Some(sent + self.config.session_timeout),
            _ => current
                .start_after
                .filter(|at| *at > std::time::Instant::now()),
        };
        let ownership = Ownership {
            generation: joined.generation,
            member_id: joined.member_id.clone(),
            leader: joined.leader.clone(),
            units,
            members: joined.members.len(),
            lease,
            refused: assignment.refused.clone(),
            start_after,
        };
        tracing::info!(group = %self.config.group, generation = ownership.generation,
            leader = joined.is_leader(), units = ?ownership.units.iter().map(Unit::to_string).collect::<Vec<_>>(),
            "rebalance done");
        self.owned.send_replace(ownership);
        Ok(())
    }

    /// After a failed join or sync: a worker whose lease has lapsed meanwhile owns nothing.
    fn lose_if_lapsed(&mut self, e: &strait_kafka::Error) {
        if !self.owned.borrow().lease.is_valid() {
            self.lose(&format!(
                "no answer from the workers' group within the session timeout ({:?}): {e}",
                self.config.session_timeout
            ));
        }
    }

    /// The leader's work: every member's assignment, from what each said it owns.
    fn hand_out(&self, joined: &Joined) -> Vec<(String, Bytes)> {
        let said: Vec<(String, Metadata)> = joined
            .members
            .iter()
            .map(|m| {
                let metadata = serde_json::from_slice::<Metadata>(&m.metadata).unwrap_or_else(|e| {
                    tracing::warn!(group = %self.config.group, member = %m.member_id, error = %e,
                        "a member's join metadata is unreadable; it is treated as owning nothing \
                         and as disagreeing");
                    Metadata { version: VERSION, generation: -1, owned: Vec::new(), units: 0, fingerprint: String::new() }
                });
                (m.member_id.clone(), metadata)
            })
            .collect();
        let refused = disagreement(&self.agreement, &said);
        let claims: Vec<Claim> = said
            .iter()
            .map(|(member, metadata)| Claim {
                member: member.clone(),
                owned: metadata
                    .owned
                    .iter()
                    .filter_map(|u| u.parse().ok())
                    .collect(),
                generation: metadata.generation,
            })
            .collect();
        let assignment = match &refused {
            Some(_) => claims
                .iter()
                .map(|c| (c.member.clone(), BTreeSet::new()))
                .collect(),
            None => hand_over(assign(&self.units, &claims), &claims),
        };
        assignment
            .into_iter()
            .map(|(member, units)| {
                let assignment = Assignment {
                    version: VERSION,
                    generation: joined.generation,
                    leader: joined.member_id.clone(),
                    units: units.iter().map(Unit::to_string).collect(),
                    refused: refused.clone(),
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

    /// Heartbeats a third of the session timeout apart until a rebalance starts, the units
    /// handed away have stopped (then it joins again to release them), or the worker loses its
    /// place (its lease lapses, or the coordinator says it is no longer a member).
    async fn heartbeats(&mut self) -> Result<(), WorkerError> {
        let interval = self.config.session_timeout / 3;
        let mut next_beat = Instant::now() + interval;
        let mut told = true;
        loop {
            if self.released() {
                self.releasing = None;
                tracing::info!(group = %self.config.group,
                    "the units handed away have stopped here; joining again to release them");
                return Ok(());
            }
            let lease = self.owned.borrow().lease.clone();
            let lapses = lease.remaining().map(|left| Instant::now() + left);
            let owns = !self.owned.borrow().units.is_empty();
            tokio::select! {
                () = tokio::time::sleep_until(next_beat) => {}
                changed = self.running.changed(), if told => {
                    // Nobody tells what runs any more: what it last said stands.
                    told = changed.is_ok();
                    continue;
                }
                () = async { match lapses { Some(at) => tokio::time::sleep_until(at).await, None => std::future::pending().await } }, if owns => {
                    self.lose(&format!(
                        "no heartbeat answered within the session timeout ({:?}), less its margin: \
                         the group may have removed this worker",
                        self.config.session_timeout
                    ));
                    return Ok(());
                }
            }
            next_beat = Instant::now() + interval;
            let sent = std::time::Instant::now();
            // A coordinator that does not answer (a partition, a frozen broker) must not hold
            // the worker past its lease: the request is given up when the lease lapses.
            let lapses = lease.remaining().map(|left| Instant::now() + left);
            let beat = tokio::select! {
                beat = self.member.heartbeat() => beat,
                () = async { match lapses { Some(at) => tokio::time::sleep_until(at).await, None => std::future::pending().await } }, if owns => {
                    self.lose(&format!(
                        "no heartbeat answered within the session timeout ({:?}), less its margin: \
                         the group may have removed this worker",
                        self.config.session_timeout
                    ));
                    return Ok(());
                }
            };
            match beat {
                Ok(Beat::Member) => lease.renew(sent, self.config.session_timeout),
                Ok(Beat::Rebalance) => {
                    // Still a member (the coordinator would say so otherwise).
                    lease.renew(sent, self.config.session_timeout);
                    return Ok(());
                }
                Ok(Beat::Fenced(e)) => {
                    self.lose(&format!("the group no longer has this worker: {e}"));
                    // Another process joined with this one's `group.instance.id`: joining
                    // again would push it out in turn.
                    if refused_for_good(&e) {
                        return Err(WorkerError::Refused(e));
                    }
                    return Ok(());
                }
                Err(e) if !lease.is_valid() => {
                    self.lose(&format!(
                        "no heartbeat answered within the session timeout ({:?}): {e}",
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

    /// Whether units were handed away and none of them runs here any more.
    /// Waits until none of the units this process runs still runs (as told by
    /// [`with_running`](Self::with_running)), or until the lease they write under lapses,
    /// whichever comes first: past it they could write nothing anyway, and the group may have
    /// handed them on. No heartbeat is sent meanwhile, so the lease is not renewed.
    async fn until_units_stop(&mut self) {
        let Some(left) = self.owned.borrow().lease.remaining() else {
            return;
        };
        let running = &mut self.running;
        let stopped = async {
            loop {
                if running.borrow_and_update().is_empty() {
                    return;
                }
                if running.changed().await.is_err() {
                    return;
                }
            }
        };
        if tokio::time::timeout(left, stopped).await.is_err() {
            tracing::warn!(group = %self.config.group,
                "the units did not stop within the lease they write under; it lapses now, \
                 and what they still write is refused");
        }
    }

    fn released(&self) -> bool {
        self.releasing.as_ref().is_some_and(|units| {
            let running = self.running.borrow();
            units.iter().all(|u| !running.contains(u))
        })
    }

    /// Owns nothing more, and says why. The lease is revoked for good: what still runs under it
    /// writes nothing more, even once the worker has joined again under a new one.
    fn lose(&mut self, why: &str) {
        self.give_up(why, true);
    }

    /// [`lose`](Self::lose), logged as a warning when `unexpected`, else at info.
    fn give_up(&mut self, why: &str, unexpected: bool) {
        let had = self.owned.borrow().units.len();
        if had > 0 && unexpected {
            tracing::warn!(group = %self.config.group, units = had, reason = why,
                "this worker gives up its units");
        } else if had > 0 {
            tracing::info!(group = %self.config.group, units = had, reason = why,
                "this worker gives up its units");
        }
        self.releasing = None;
        self.owned.send_modify(|o| {
            o.lease.revoke();
            o.lease = Lease::new();
            o.generation = -1;
            o.units.clear();
            o.members = 0;
            o.member_id.clear();
        });
    }
}

/// Why the members cannot be handed units: one of them cuts the flow into another number of
/// units, or runs other settings (`None` when all agree with `mine`).
fn disagreement(mine: &Agreement, said: &[(String, Metadata)]) -> Option<String> {
    let mut differing: Vec<String> = said
        .iter()
        .filter(|(_, m)| m.units != mine.units || m.fingerprint != mine.fingerprint)
        .map(|(member, m)| {
            if m.units != mine.units {
                format!(
                    "{member} has tasks.max = {} where the leader has {}",
                    m.units, mine.units
                )
            } else {
                format!(
                    "{member} runs other settings (fingerprint {} where the leader has {})",
                    short(&m.fingerprint),
                    short(&mine.fingerprint)
                )
            }
        })
        .collect();
    if differing.is_empty() {
        return None;
    }
    let more = differing.len().saturating_sub(3);
    differing.truncate(3);
    let mut why = format!(
        "the workers' configs disagree: {}{}; no unit is handed out until every worker runs \
         the same tasks.max and settings",
        differing.join("; "),
        if more > 0 {
            format!(" (and {more} more)")
        } else {
            String::new()
        }
    );
    why.shrink_to_fit();
    Some(why)
}

fn short(fingerprint: &str) -> &str {
    if fingerprint.is_empty() {
        "none: an older strait"
    } else {
        fingerprint.get(..8).unwrap_or(fingerprint)
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
