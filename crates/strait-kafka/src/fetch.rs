//! Raw fetch: one multi-partition Fetch request per source broker, batches returned as the
//! bytes the broker sent, never decompressed.
//!
//! Each partition comes back with its own result: its raw record bytes plus the high watermark,
//! last stable offset, log start offset and aborted-transaction list, or its own typed error
//! (OFFSET_OUT_OF_RANGE means records were deleted before we read them: the caller must record
//! that loss, `docs/design.md` §3.4). The bytes may end in a partial batch; `strait_wire::BatchScanner`
//! stops cleanly there.
//!
//! Each broker is fetched from through a fetch session (KIP-227, `fetch/session.rs`): after
//! the first request, only partitions whose fetch parameters changed are named, and the answer
//! names only partitions with news. [`Client::fetch`] still gives every partition asked for an
//! entry: one the broker left out gets no records and the watermarks the broker said last,
//! which is all a full fetch would have said too (Kafka includes a partition whenever its
//! records, high watermark or log start offset changed). Callers pass the whole list each time;
//! what is left out of it is forgotten by the session. A fetch that overlaps another one to the
//! same broker goes without a session (session id 0, epoch -1), as do brokers older than Fetch
//! v7.
//!
//! With `client.rack` set ([`crate::ClientConfig::client_rack`]), fetches carry it (KIP-392),
//! and a partition whose leader names a preferred read replica is read from that replica until
//! it fails there, its leader changes, or `metadata.max.age.ms` passes. A partition that fails
//! at a replica is asked of its leader again in the same [`Client::fetch`].
//!
//! From Fetch v13 on, topics are named by id (KIP-516), from the client's metadata: a topic
//! deleted and created again under the same name then answers UNKNOWN_TOPIC_ID instead of
//! serving the new topic's records at offsets that meant other records before. The caller sees
//! the error, the metadata is refreshed, and the new id is there to compare.

mod aborted;
pub(crate) mod session;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{
    FetchPartition as WireFetchPartition, FetchTopic, ForgottenTopic,
};
use kafka_protocol::messages::{BrokerId as WireBrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

pub use aborted::AbortedBatches;
use session::{Absent, Known, Plan, Sent};

use crate::admin::IsolationLevel;
use crate::cluster::{BrokerId, Client, TopicPartition};
use crate::error::{check, Context, Error, Result};

/// One partition to fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPosition {
    /// The partition.
    pub tp: TopicPartition,
    /// The offset to read from.
    pub offset: i64,
    /// The leader epoch we last saw, -1 if unknown (KIP-320 fencing).
    pub current_leader_epoch: i32,
    /// Most bytes for this partition (`max.partition.fetch.bytes`, default 1 MiB). A first
    /// batch larger than this is still returned whole (KIP-74).
    pub max_bytes: i32,
}

impl FetchPosition {
    /// Reads `tp` from `offset` with the default partition limit.
    pub fn new(tp: TopicPartition, offset: i64) -> Self {
        Self {
            tp,
            offset,
            current_leader_epoch: -1,
            max_bytes: 1024 * 1024,
        }
    }
}

/// Settings of a fetch request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchOptions {
    /// `fetch.max.wait.ms` (default 500 ms): how long the broker may wait for `min_bytes`.
    pub max_wait: Duration,
    /// `fetch.min.bytes` (default 1).
    pub min_bytes: i32,
    /// `fetch.max.bytes` (default 50 MiB): the limit over all partitions of one
    /// [`Client::fetch`], however many leaders it asks. Each leader's request gets a share in
    /// proportion to its partitions; as Kafka returns at least the first batch of a request
    /// whatever the limit (KIP-74), each leader may exceed its share by one batch.
    pub max_bytes: i32,
    /// Transaction isolation (default read_committed).
    pub isolation: IsolationLevel,
}

impl Default for FetchOptions {
    fn default() -> Self {
        Self {
            max_wait: Duration::from_millis(500),
            min_bytes: 1,
            max_bytes: 50 * 1024 * 1024,
            isolation: IsolationLevel::ReadCommitted,
        }
    }
}

/// An aborted transaction in a fetched range (read_committed only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTransaction {
    /// The producer whose transaction aborted.
    pub producer_id: i64,
    /// The first offset of the aborted transaction.
    pub first_offset: i64,
}

/// What a fetch returned for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedData {
    /// The raw record batches (possibly ending in a partial batch).
    pub records: Bytes,
    /// The high watermark.
    pub high_watermark: i64,
    /// The last stable offset, -1 if the broker does not report it.
    pub last_stable_offset: i64,
    /// The log start offset, -1 if the broker does not report it.
    pub log_start_offset: i64,
    /// Aborted transactions in the returned range (empty under read_uncommitted).
    pub aborted: Vec<AbortedTransaction>,
}

/// Per-partition fetch results.
pub type FetchResults = BTreeMap<TopicPartition, Result<FetchedData>>;

/// One broker's answer: the results, and the read replicas it named (KIP-392).
struct Answer {
    results: FetchResults,
    replicas: Vec<(TopicPartition, BrokerId)>,
}

/// The top-level errors that mean the broker no longer has our session as we know it.
fn is_session_error(code: i16) -> bool {
    [
        ResponseError::FetchSessionIdNotFound,
        ResponseError::InvalidFetchSessionEpoch,
        ResponseError::FetchSessionTopicIdError,
    ]
    .iter()
    .any(|e| e.code() == code)
}

impl Client {
    /// Fetches from one broker in one request, through its fetch session. Partitions it no
    /// longer leads come back with NOT_LEADER_OR_FOLLOWER, per partition.
    pub async fn fetch_from(
        &self,
        broker: BrokerId,
        positions: &[FetchPosition],
        options: &FetchOptions,
    ) -> Result<FetchResults> {
        Ok(self.fetch_at(broker, positions, options).await?.results)
    }

    /// The id of the fetch session the next request to `broker` would continue, if there is
    /// one (for tests and diagnostics).
    pub fn fetch_session_id(&self, broker: BrokerId) -> Option<i32> {
        self.fetch_state().session_id(broker)
    }

    /// How many incremental fetch requests were answered so far (for tests and diagnostics).
    pub fn incremental_fetches(&self) -> u64 {
        self.fetch_state().incremental_fetches()
    }

    async fn fetch_at(
        &self,
        broker: BrokerId,
        positions: &[FetchPosition],
        options: &FetchOptions,
    ) -> Result<Answer> {
        let metadata = self.cached_metadata();
        let state = self.fetch_state();
        let conn = match self.connection(broker).await {
            Ok(conn) => conn,
            Err(e) => {
                state.reset(broker);
                return Err(e);
            }
        };
        let version = conn.version_of::<FetchRequest>()?;
        let wanted: Vec<(TopicPartition, Sent)> = positions
            .iter()
            .map(|p| {
                let sent = Sent {
                    topic_id: metadata.topics.get(&p.tp.topic).map_or([0; 16], |m| m.id),
                    offset: p.offset,
                    max_bytes: p.max_bytes,
                    leader_epoch: p.current_leader_epoch,
                };
                (p.tp.clone(), sent)
            })
            .collect();
        let mut retried = false;
        let (ticket, resp) = loop {
            // Sessions came with Fetch v7.
            let ticket = state.begin(broker, wanted.clone(), version >= 7);
            let request = self.fetch_request(ticket.plan(), positions, &wanted, options, version);
            let resp = match conn.send(&request).await {
                Ok(resp) => resp,
                Err(e) => {
                    ticket.reset(false);
                    return Err(e);
                }
            };
            if is_session_error(resp.error_code) && *ticket.plan() != Plan::Sessionless {
                tracing::debug!(%broker, error_code = resp.error_code,
                    "fetch session reset: the broker refused it");
                let gone = resp.error_code == ResponseError::FetchSessionIdNotFound.code();
                let error = check(resp.error_code, None, || Context::None).err();
                ticket.reset(gone);
                if retried {
                    return Err(error.unwrap_or(Error::Closed));
                }
                retried = true;
                continue;
            }
            break (ticket, resp);
        };
        check(resp.error_code, None, || Context::None)?;
        let mut out = FetchResults::new();
        let mut answered: HashMap<TopicPartition, Option<Known>> = HashMap::new();
        let mut replicas = Vec::new();
        let asked: HashSet<&TopicPartition> = positions.iter().map(|p| &p.tp).collect();
        for t in resp.responses {
            let mut topic = t.topic.0.to_string();
            if topic.is_empty() {
                // v13+: named by id only.
                let id = *t.topic_id.as_bytes();
                topic = positions
                    .iter()
                    .map(|p| p.tp.topic.as_str())
                    .find(|name| metadata.topics.get(*name).is_some_and(|m| m.id == id))
                    .unwrap_or_default()
                    .to_owned();
            }
            for p in t.partitions {
                let tp = TopicPartition::new(topic.clone(), p.partition_index);
                if !asked.contains(&tp) {
                    return Err(Error::Unexpected {
                        broker: broker.to_string(),
                        what: format!("Fetch answer has {tp}, which was not asked for"),
                    });
                }
                if p.preferred_read_replica.0 >= 0 && p.preferred_read_replica.0 != broker.0 {
                    replicas.push((tp.clone(), BrokerId(p.preferred_read_replica.0)));
                }
                let result = check(p.error_code, None, || tp.context()).map(|()| FetchedData {
                    records: p.records.unwrap_or_default(),
                    high_watermark: p.high_watermark,
                    last_stable_offset: p.last_stable_offset,
                    log_start_offset: p.log_start_offset,
                    aborted: p
                        .aborted_transactions
                        .unwrap_or_default()
                        .into_iter()
                        .map(|a| AbortedTransaction {
                            producer_id: a.producer_id.0,
                            first_offset: a.first_offset,
                        })
                        .collect(),
                });
                let known = result.as_ref().ok().map(|d| Known {
                    high_watermark: d.high_watermark,
                    last_stable_offset: d.last_stable_offset,
                    log_start_offset: d.log_start_offset,
                });
                answered.insert(tp.clone(), known);
                out.insert(tp, result);
            }
        }
        // An incremental answer leaves out the partitions with no news: they get no records and
        // what the broker said of them last.
        for (tp, absent) in ticket.answered(resp.session_id, &answered) {
            if let Absent::Unchanged(known) = absent {
                out.insert(
                    tp,
                    Ok(FetchedData {
                        records: Bytes::new(),
                        high_watermark: known.high_watermark,
                        last_stable_offset: known.last_stable_offset,
                        log_start_offset: known.log_start_offset,
                        aborted: Vec::new(),
                    }),
                );
            }
        }
        Ok(Answer {
            results: out,
            replicas,
        })
    }

    /// The Fetch request for `plan`: every position, or only those the session needs, in the
    /// caller's order (topics in the order they first appear): the broker fills the answer in
    /// request order, so the order decides which partitions get data first.
    fn fetch_request(
        &self,
        plan: &Plan,
        positions: &[FetchPosition],
        wanted: &[(TopicPartition, Sent)],
        options: &FetchOptions,
        version: i16,
    ) -> FetchRequest {
        let all: Vec<usize>;
        let (send, forget): (&[usize], &[(TopicPartition, [u8; 16])]) = match plan {
            Plan::Incremental { send, forget, .. } => (send, forget),
            Plan::Sessionless | Plan::Full { .. } => {
                all = (0..positions.len()).collect();
                (&all, &[])
            }
        };
        let mut by_topic: Vec<(&str, [u8; 16], Vec<WireFetchPartition>)> = Vec::new();
        let mut index: HashMap<&str, usize> = HashMap::new();
        for &i in send {
            let (p, (_, sent)) = (&positions[i], &wanted[i]);
            let at = *index.entry(&p.tp.topic).or_insert_with(|| {
                by_topic.push((&p.tp.topic, sent.topic_id, Vec::new()));
                by_topic.len() - 1
            });
            by_topic[at].2.push(
                WireFetchPartition::default()
                    .with_partition(p.tp.partition)
                    .with_current_leader_epoch(p.current_leader_epoch)
                    .with_fetch_offset(p.offset)
                    .with_last_fetched_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(p.max_bytes),
            );
        }
        let mut forgotten: Vec<ForgottenTopic> = Vec::new();
        for (tp, id) in forget {
            match forgotten.last_mut() {
                Some(last) if last.topic.0.as_str() == tp.topic => {
                    last.partitions.push(tp.partition);
                }
                _ => forgotten.push(
                    ForgottenTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(tp.topic.clone())))
                        .with_topic_id(uuid::Uuid::from_bytes(*id))
                        .with_partitions(vec![tp.partition]),
                ),
            }
        }
        let (session_id, session_epoch) = plan.id_and_epoch();
        let mut request = FetchRequest::default()
            .with_replica_id(WireBrokerId(-1))
            .with_max_wait_ms(options.max_wait.as_millis().min(i32::MAX as u128) as i32)
            .with_min_bytes(options.min_bytes)
            .with_max_bytes(options.max_bytes)
            .with_isolation_level(options.isolation.wire())
            .with_session_id(session_id)
            .with_session_epoch(session_epoch)
            .with_forgotten_topics_data(forgotten)
            .with_topics(
                by_topic
                    .into_iter()
                    .map(|(t, id, ps)| {
                        // The name up to v12, the id from v13: the codec writes the one the
                        // negotiated version has.
                        FetchTopic::default()
                            .with_topic(TopicName(StrBytes::from_string(t.to_owned())))
                            .with_topic_id(uuid::Uuid::from_bytes(id))
                            .with_partitions(ps)
                    })
                    .collect(),
            );
        // KIP-392: the broker may name a replica in our rack to read from (Fetch v11+).
        if let Some(rack) = self
            .config()
            .client_rack
            .as_deref()
            .filter(|_| version >= 11)
        {
            request = request.with_rack_id(StrBytes::from_string(rack.to_owned()));
        }
        request
    }

    /// Fetches the given partitions from their leaders (or the replica a leader named, KIP-392),
    /// one request per broker, concurrently, within `options.max_bytes` over all of them (split
    /// by partitions per broker). Every partition asked for gets an entry: data or its own error.
    /// A whole request that fails (the broker unreachable) gives that error to each of its
    /// partitions. A partition that fails at a read replica is asked of its leader again at once.
    pub async fn fetch(&self, positions: &[FetchPosition], options: &FetchOptions) -> FetchResults {
        let state = self.fetch_state();
        let max_age = self.config().metadata_max_age;
        let mut out = FetchResults::new();
        let mut pending: Vec<FetchPosition> = positions.to_vec();
        let mut asked = 0;
        // The second pass asks the leaders for what their read replicas failed.
        for pass in 0..2 {
            let mut by_broker: BTreeMap<BrokerId, Vec<(FetchPosition, BrokerId)>> = BTreeMap::new();
            for p in std::mem::take(&mut pending) {
                match self.leader(&p.tp).await {
                    Ok(leader) => {
                        let from = match pass {
                            0 => state.read_replica(&p.tp, leader).unwrap_or(leader),
                            _ => leader,
                        };
                        by_broker.entry(from).or_default().push((p, leader));
                    }
                    Err(e) => {
                        out.insert(p.tp.clone(), Err(e));
                    }
                }
            }
            if pass == 0 {
                asked = by_broker.values().map(Vec::len).sum();
            }
            let requests = by_broker.into_iter().map(|(broker, ps)| async move {
                let share = FetchOptions {
                    max_bytes: share_of(options.max_bytes, ps.len(), asked),
                    ..*options
                };
                let only: Vec<FetchPosition> = ps.iter().map(|(p, _)| p.clone()).collect();
                let result = self.fetch_at(broker, &only, &share).await;
                (broker, ps, result)
            });
            for (broker, ps, result) in futures::future::join_all(requests).await {
                let mut results = match result {
                    Ok(answer) => {
                        for (tp, replica) in answer.replicas {
                            if let Some((_, leader)) = ps.iter().find(|(p, _)| p.tp == tp) {
                                state.set_read_replica(&tp, *leader, replica, max_age);
                            }
                        }
                        Ok(answer.results)
                    }
                    Err(e) => Err(e),
                };
                for (p, leader) in ps {
                    let r = match &mut results {
                        Ok(results) => results.remove(&p.tp).unwrap_or_else(|| {
                            Err(Error::Unexpected {
                                broker: broker.to_string(),
                                what: format!("Fetch answer does not mention {}", p.tp),
                            })
                        }),
                        Err(e) => Err(e.clone()),
                    };
                    if r.is_err() {
                        state.clear_read_replica(&p.tp);
                        if broker != leader {
                            pending.push(p);
                            continue;
                        }
                    }
                    out.insert(p.tp, r);
                }
            }
            if pending.is_empty() {
                break;
            }
        }
        if out
            .values()
            .any(|r| r.as_ref().err().is_some_and(Error::needs_metadata_refresh))
        {
            if let Err(e) = self.refresh_metadata().await {
                tracing::debug!(error = %e, "metadata refresh after fetch errors failed");
            }
        }
        out
    }
}

/// A leader's share of a fetch's byte limit: `total` split in proportion to its `partitions`
/// of the `asked`, at least 1 (Kafka still returns the first batch).
fn share_of(total: i32, partitions: usize, asked: usize) -> i32 {
    if asked == 0 {
        return total;
    }
    let share = i64::from(total.max(0)) * partitions as i64 / asked as i64;
    i32::try_from(share).unwrap_or(i32::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::share_of;

    #[test]
    fn leaders_share_the_limit_by_partitions() {
        assert_eq!(share_of(3_000, 1, 3), 1_000);
        assert_eq!(share_of(3_000, 2, 3), 2_000);
        assert_eq!(share_of(3_000, 3, 3), 3_000);
        assert_eq!(share_of(i32::MAX, 1, 1), i32::MAX);
        assert_eq!(share_of(10, 1, 1_000), 1);
        assert_eq!(share_of(0, 1, 2), 1);
    }
}
