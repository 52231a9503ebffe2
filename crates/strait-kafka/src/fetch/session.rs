//! What the client remembers between fetches: one fetch session per source broker (KIP-227)
//! and the preferred read replica of each partition (KIP-392).
//!
//! A session lets a broker keep the partition list of the last request, so a request names only
//! the partitions whose fetch parameters changed (and those to forget), and the answer names
//! only the partitions with news: records, an error, a new high watermark or log start offset,
//! a preferred read replica. The session also keeps what the broker last said of each partition,
//! so that [`crate::Client::fetch`] still answers every partition it was asked for.
//!
//! The rules, as Kafka's own consumer keeps them: epoch 0 asks for a new session (a full fetch
//! of every partition), each later request carries the session's id and the next epoch, and a
//! session serves one request at a time. A request that goes wrong in any way (no answer, a
//! session error, a partition error) throws the session away: the next request is full again,
//! naming the old id so the broker drops it at once rather than when it is evicted.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex as StdMutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::ids::{BrokerId, TopicPartition};

/// What a request told the broker of one partition; a change of any of these means the
/// partition is sent again in the next incremental request. The log start offset a consumer
/// sends is always -1, so it cannot change and is not kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sent {
    pub(crate) topic_id: [u8; 16],
    pub(crate) offset: i64,
    pub(crate) max_bytes: i32,
    pub(crate) leader_epoch: i32,
}

/// What the broker last said of a partition, handed back when an incremental answer leaves the
/// partition out (nothing changed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Known {
    pub(crate) high_watermark: i64,
    pub(crate) last_stable_offset: i64,
    pub(crate) log_start_offset: i64,
}

/// How one request uses the broker's session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Plan {
    /// No session at all (id 0, epoch -1): the broker keeps nothing. For a broker too old for
    /// sessions, or while the session serves another request.
    Sessionless,
    /// Every partition, epoch 0: asks for a new session, and closes `close` (0: none).
    Full { close: i32 },
    /// Session `id` at `epoch`: only the partitions in `send` (indices into the request's
    /// partitions), and `forget` those the caller no longer asks for.
    Incremental {
        id: i32,
        epoch: i32,
        send: Vec<usize>,
        forget: Vec<(TopicPartition, [u8; 16])>,
    },
}

impl Plan {
    /// The request's session id and epoch.
    pub(crate) fn id_and_epoch(&self) -> (i32, i32) {
        match self {
            Plan::Sessionless => (0, -1),
            Plan::Full { close } => (*close, 0),
            Plan::Incremental { id, epoch, .. } => (*id, *epoch),
        }
    }

    pub(crate) fn is_incremental(&self) -> bool {
        matches!(self, Plan::Incremental { .. })
    }
}

#[derive(Debug, Default)]
struct Session {
    /// The broker's id for the session, 0 when there is none.
    id: i32,
    /// The epoch of the next request: 0 for a full one.
    epoch: i32,
    /// A request is using the session.
    busy: bool,
    /// What the broker's session holds, and what the broker last said of each partition.
    partitions: HashMap<TopicPartition, (Sent, Known)>,
}

impl Session {
    fn plan(&self, wanted: &[(TopicPartition, Sent)]) -> Plan {
        if self.id == 0 || self.epoch <= 0 {
            return Plan::Full { close: self.id };
        }
        let send = wanted
            .iter()
            .enumerate()
            .filter(|(_, (tp, sent))| self.partitions.get(tp).is_none_or(|(s, _)| s != sent))
            .map(|(i, _)| i)
            .collect();
        let asked: HashSet<&TopicPartition> = wanted.iter().map(|(tp, _)| tp).collect();
        let mut forget: Vec<(TopicPartition, [u8; 16])> = self
            .partitions
            .iter()
            .filter(|(tp, _)| !asked.contains(tp))
            .map(|(tp, (sent, _))| (tp.clone(), sent.topic_id))
            .collect();
        forget.sort();
        Plan::Incremental {
            id: self.id,
            epoch: self.epoch,
            send,
            forget,
        }
    }

    /// Forgets the session; the next request is full and closes the old one on the broker.
    fn reset(&mut self) {
        self.epoch = 0;
        self.partitions.clear();
    }
}

/// A preferred read replica, valid while the partition's leader stays the one it was learnt
/// from and until `until` (`metadata.max.age.ms` after it was learnt).
#[derive(Debug, Clone, Copy)]
struct ReadReplica {
    broker: BrokerId,
    leader: BrokerId,
    until: Instant,
}

/// Sessions and read replicas of one client.
#[derive(Debug, Default)]
pub(crate) struct FetchState {
    sessions: StdMutex<HashMap<BrokerId, Session>>,
    replicas: StdMutex<HashMap<TopicPartition, ReadReplica>>,
    incremental: AtomicU64,
}

impl FetchState {
    /// Starts a request to `broker` for `wanted`: the session is now busy until the ticket is
    /// finished or dropped. `sessions` is false when the broker's Fetch version is too old.
    pub(crate) fn begin(
        &self,
        broker: BrokerId,
        wanted: Vec<(TopicPartition, Sent)>,
        sessions: bool,
    ) -> Ticket<'_> {
        let plan = if !sessions {
            Plan::Sessionless
        } else {
            match self.sessions.lock() {
                Ok(mut all) => {
                    let session = all.entry(broker).or_default();
                    if session.busy {
                        Plan::Sessionless
                    } else {
                        session.busy = true;
                        session.plan(&wanted)
                    }
                }
                Err(_) => Plan::Sessionless,
            }
        };
        Ticket {
            state: self,
            broker,
            holds: plan != Plan::Sessionless,
            plan,
            wanted,
            finished: false,
        }
    }

    /// The id of the session with `broker` that the next request would continue, if any.
    pub(crate) fn session_id(&self, broker: BrokerId) -> Option<i32> {
        let all = self.sessions.lock().ok()?;
        all.get(&broker)
            .filter(|s| s.id != 0 && s.epoch > 0)
            .map(|s| s.id)
    }

    /// How many incremental requests were answered.
    pub(crate) fn incremental_fetches(&self) -> u64 {
        self.incremental.load(Ordering::Relaxed)
    }

    /// Throws away the session with `broker` unless a request holds it (which then decides).
    pub(crate) fn reset(&self, broker: BrokerId) {
        if let Ok(mut all) = self.sessions.lock() {
            if let Some(session) = all.get_mut(&broker).filter(|s| !s.busy && s.epoch > 0) {
                let id = session.id;
                tracing::debug!(%broker, session = id, "fetch session reset: no connection");
                session.reset();
            }
        }
    }

    /// The broker to read `tp` from instead of its `leader`, if one was named and still holds.
    pub(crate) fn read_replica(&self, tp: &TopicPartition, leader: BrokerId) -> Option<BrokerId> {
        let mut replicas = self.replicas.lock().ok()?;
        let r = *replicas.get(tp)?;
        if r.leader != leader || Instant::now() >= r.until {
            replicas.remove(tp);
            tracing::debug!(partition = %tp, replica = %r.broker, "back to the leader");
            return None;
        }
        Some(r.broker)
    }

    /// Remembers that `leader` named `replica` as the broker to read `tp` from, for `max_age`.
    pub(crate) fn set_read_replica(
        &self,
        tp: &TopicPartition,
        leader: BrokerId,
        replica: BrokerId,
        max_age: Duration,
    ) {
        if let Ok(mut replicas) = self.replicas.lock() {
            let until = Instant::now() + max_age;
            let previous = replicas.insert(
                tp.clone(),
                ReadReplica {
                    broker: replica,
                    leader,
                    until,
                },
            );
            if previous.is_none_or(|p| p.broker != replica) {
                tracing::debug!(partition = %tp, %replica, "reading from a preferred replica");
            }
        }
    }

    /// Reads `tp` from its leader again.
    pub(crate) fn clear_read_replica(&self, tp: &TopicPartition) {
        if let Ok(mut replicas) = self.replicas.lock() {
            if let Some(r) = replicas.remove(tp) {
                tracing::debug!(partition = %tp, replica = %r.broker, "back to the leader");
            }
        }
    }
}

/// One request's hold on a broker's session. Dropped unfinished (no answer, an error, the
/// caller gave up half-way), it resets the session: the broker may or may not have moved it on,
/// and only a full request is right either way.
#[derive(Debug)]
pub(crate) struct Ticket<'a> {
    state: &'a FetchState,
    broker: BrokerId,
    plan: Plan,
    wanted: Vec<(TopicPartition, Sent)>,
    /// Whether the ticket holds the session (it is not [`Plan::Sessionless`]).
    holds: bool,
    finished: bool,
}

/// What a session answer gives a partition the broker left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Absent {
    /// Nothing changed: the broker said this last.
    Unchanged(Known),
    /// The session knew nothing of it either: the answer is wrong.
    Unknown,
}

impl Ticket<'_> {
    pub(crate) fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Throws the session away now, and lets the broker forget it too: the next request is
    /// full. `known_gone`: the broker said it has no such session, so there is nothing to close.
    pub(crate) fn reset(mut self, known_gone: bool) {
        self.finished = true;
        self.update(|session| {
            if known_gone {
                session.id = 0;
            }
            session.reset();
        });
    }

    /// The broker answered with `session_id` and these partitions (what it said of each, `None`
    /// for an error). Returns what to hand back for the partitions it left out. A partition
    /// error resets the session (the broker may have a new leader or lost the partition).
    pub(crate) fn answered(
        mut self,
        session_id: i32,
        answered: &HashMap<TopicPartition, Option<Known>>,
    ) -> HashMap<TopicPartition, Absent> {
        self.finished = true;
        let plan = std::mem::replace(&mut self.plan, Plan::Sessionless);
        let wanted = std::mem::take(&mut self.wanted);
        let broker = self.broker;
        let mut absent = HashMap::new();
        let incremental = plan.is_incremental();
        if incremental {
            self.state.incremental.fetch_add(1, Ordering::Relaxed);
        }
        if !self.holds {
            for (tp, _) in &wanted {
                if !answered.contains_key(tp) {
                    absent.insert(tp.clone(), Absent::Unknown);
                }
            }
            return absent;
        }
        self.update(|session| {
            let errors = answered.values().any(Option::is_none);
            for (tp, _) in &wanted {
                if answered.contains_key(tp) {
                    continue;
                }
                let known = match (&plan, session.partitions.get(tp)) {
                    (Plan::Incremental { .. }, Some((_, known))) => Absent::Unchanged(*known),
                    _ => Absent::Unknown,
                };
                absent.insert(tp.clone(), known);
            }
            let broken = errors || absent.values().any(|a| *a == Absent::Unknown);
            match plan {
                Plan::Sessionless => {}
                Plan::Incremental { id, .. } if session_id != id => {
                    tracing::debug!(%broker, session = id, answered = session_id,
                        "fetch session: the broker answered another session; starting again");
                    session.reset();
                }
                _ if broken => {
                    tracing::debug!(%broker, session = session_id,
                        "fetch session reset after a partition error");
                    session.id = session_id;
                    session.reset();
                }
                Plan::Full { close } => {
                    session.partitions.clear();
                    session.id = session_id;
                    session.epoch = i32::from(session_id != 0);
                    if session_id != 0 {
                        tracing::debug!(%broker, session = session_id, partitions = wanted.len(),
                            "fetch session created");
                    } else if close != 0 {
                        tracing::debug!(%broker, "no fetch session kept for us; full fetches");
                    }
                    fill(session, wanted, answered);
                }
                Plan::Incremental { .. } => {
                    session.epoch = next_epoch(session.epoch);
                    let asked: HashSet<&TopicPartition> = wanted.iter().map(|(tp, _)| tp).collect();
                    session.partitions.retain(|tp, _| asked.contains(tp));
                    fill(session, wanted, answered);
                }
            }
        });
        absent
    }

    fn update(&self, f: impl FnOnce(&mut Session)) {
        if !self.holds {
            // A sessionless request may run beside one that holds the session: hands off.
            return;
        }
        if let Ok(mut all) = self.state.sessions.lock() {
            let session = all.entry(self.broker).or_default();
            session.busy = false;
            f(session);
        }
    }
}

/// Records what was sent and what the broker said, keeping what it said before for the
/// partitions it left out.
fn fill(
    session: &mut Session,
    wanted: Vec<(TopicPartition, Sent)>,
    answered: &HashMap<TopicPartition, Option<Known>>,
) {
    for (tp, sent) in wanted {
        let known = match answered.get(&tp) {
            Some(Some(known)) => *known,
            _ => match session.partitions.get(&tp) {
                Some((_, known)) => *known,
                None => continue,
            },
        };
        session.partitions.insert(tp, (sent, known));
    }
}

/// The epoch after `epoch`: it wraps to 1, never to 0 (a new session) or below (closing).
fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if !self.finished && self.holds {
            let broker = self.broker;
            self.finished = true;
            self.update(|session| {
                let id = session.id;
                tracing::debug!(%broker, session = id, "fetch session reset: request cut short");
                session.reset();
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    fn sent(offset: i64) -> Sent {
        Sent {
            topic_id: [0; 16],
            offset,
            max_bytes: 100,
            leader_epoch: -1,
        }
    }

    fn known(hw: i64) -> Option<Known> {
        Some(Known {
            high_watermark: hw,
            last_stable_offset: hw,
            log_start_offset: 0,
        })
    }

    #[test]
    fn a_session_goes_full_then_incremental_and_forgets() {
        let state = FetchState::default();
        let b = BrokerId(1);
        let ticket = state.begin(b, vec![(tp(0), sent(0)), (tp(1), sent(0))], true);
        assert_eq!(ticket.plan(), &Plan::Full { close: 0 });
        // A second request while the first is out goes without the session.
        let other = state.begin(b, vec![(tp(0), sent(0))], true);
        assert_eq!(other.plan(), &Plan::Sessionless);
        other.answered(0, &HashMap::from([(tp(0), known(9))]));
        let answered = HashMap::from([(tp(0), known(5)), (tp(1), known(7))]);
        assert!(ticket.answered(42, &answered).is_empty());
        assert_eq!(state.session_id(b), Some(42));

        let ticket = state.begin(b, vec![(tp(0), sent(3)), (tp(2), sent(0))], true);
        assert_eq!(
            ticket.plan(),
            &Plan::Incremental {
                id: 42,
                epoch: 1,
                send: vec![0, 1],
                forget: vec![(tp(1), [0; 16])],
            }
        );
        let absent = ticket.answered(42, &HashMap::from([(tp(2), known(1))]));
        assert_eq!(
            absent,
            HashMap::from([(tp(0), Absent::Unchanged(known(5).unwrap()))])
        );
        let ticket = state.begin(b, vec![(tp(0), sent(3)), (tp(2), sent(0))], true);
        assert!(
            matches!(ticket.plan(), Plan::Incremental { epoch: 2, send, .. } if send.is_empty())
        );
        // Dropped unanswered: the next request is full and closes the old session.
        drop(ticket);
        let ticket = state.begin(b, vec![(tp(0), sent(3))], true);
        assert_eq!(ticket.plan(), &Plan::Full { close: 42 });
        ticket.reset(true);
        let ticket = state.begin(b, vec![(tp(0), sent(3))], true);
        assert_eq!(ticket.plan(), &Plan::Full { close: 0 });
    }

    #[test]
    fn a_partition_error_resets_the_session() {
        let state = FetchState::default();
        let b = BrokerId(1);
        let ticket = state.begin(b, vec![(tp(0), sent(0)), (tp(1), sent(0))], true);
        ticket.answered(7, &HashMap::from([(tp(0), known(1)), (tp(1), None)]));
        assert_eq!(state.session_id(b), None);
        let ticket = state.begin(b, vec![(tp(0), sent(0))], true);
        assert_eq!(ticket.plan(), &Plan::Full { close: 7 });
    }

    #[test]
    fn a_read_replica_holds_while_its_leader_does_and_not_past_its_age() {
        let state = FetchState::default();
        let (leader, replica) = (BrokerId(1), BrokerId(2));
        let hour = Duration::from_secs(3600);
        state.set_read_replica(&tp(0), leader, replica, hour);
        assert_eq!(state.read_replica(&tp(0), leader), Some(replica));
        assert_eq!(state.read_replica(&tp(1), leader), None);
        // A new leader: back to it, and the replica is forgotten.
        assert_eq!(state.read_replica(&tp(0), BrokerId(3)), None);
        assert_eq!(state.read_replica(&tp(0), leader), None);
        state.set_read_replica(&tp(0), leader, replica, Duration::ZERO);
        assert_eq!(state.read_replica(&tp(0), leader), None);
        state.set_read_replica(&tp(0), leader, replica, hour);
        state.clear_read_replica(&tp(0));
        assert_eq!(state.read_replica(&tp(0), leader), None);
    }

    #[test]
    fn epochs_wrap_to_one() {
        assert_eq!(next_epoch(1), 2);
        assert_eq!(next_epoch(i32::MAX), 1);
    }
}
