//! Raw fetch: one multi-partition Fetch request per leader, batches returned as the bytes the
//! broker sent, never decompressed.
//!
//! Each partition comes back with its own result: its raw record bytes plus the high watermark,
//! last stable offset, log start offset and aborted-transaction list, or its own typed error
//! (OFFSET_OUT_OF_RANGE means records were deleted before we read them: the caller must record
//! that loss, `docs/design.md` §3.4). The bytes may end in a partial batch; `strait_wire::BatchScanner`
//! stops cleanly there.
//!
//! Fetch sessions (KIP-227) are not used yet: every request is a full fetch (session id 0,
//! epoch -1), which every broker accepts.
//!
//! From Fetch v13 on, topics are named by id (KIP-516), from the client's metadata: a topic
//! deleted and created again under the same name then answers UNKNOWN_TOPIC_ID instead of
//! serving the new topic's records at offsets that meant other records before. The caller sees
//! the error, the metadata is refreshed, and the new id is there to compare.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition as WireFetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId as WireBrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

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

impl Client {
    /// Fetches from one broker in one request. Partitions it no longer leads come back with
    /// NOT_LEADER_OR_FOLLOWER, per partition.
    pub async fn fetch_from(
        &self,
        broker: BrokerId,
        positions: &[FetchPosition],
        options: &FetchOptions,
    ) -> Result<FetchResults> {
        // In the caller's order (topics in the order they first appear): the broker fills the
        // answer in request order, so the order decides which partitions get data first.
        let metadata = self.cached_metadata();
        let mut by_topic: Vec<(&str, Vec<WireFetchPartition>)> = Vec::new();
        let mut index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        for p in positions {
            let i = *index.entry(&p.tp.topic).or_insert_with(|| {
                by_topic.push((&p.tp.topic, Vec::new()));
                by_topic.len() - 1
            });
            by_topic[i].1.push(
                WireFetchPartition::default()
                    .with_partition(p.tp.partition)
                    .with_current_leader_epoch(p.current_leader_epoch)
                    .with_fetch_offset(p.offset)
                    .with_last_fetched_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(p.max_bytes),
            );
        }
        let request = FetchRequest::default()
            .with_replica_id(WireBrokerId(-1))
            .with_max_wait_ms(options.max_wait.as_millis().min(i32::MAX as u128) as i32)
            .with_min_bytes(options.min_bytes)
            .with_max_bytes(options.max_bytes)
            .with_isolation_level(options.isolation.wire())
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(
                by_topic
                    .into_iter()
                    .map(|(t, ps)| {
                        // The name up to v12, the id from v13: the codec writes the one the
                        // negotiated version has.
                        let id = metadata.topics.get(t).map_or([0; 16], |m| m.id);
                        FetchTopic::default()
                            .with_topic(TopicName(StrBytes::from_string(t.to_owned())))
                            .with_topic_id(uuid::Uuid::from_bytes(id))
                            .with_partitions(ps)
                    })
                    .collect(),
            );
        let resp = self.send_to(broker, &request).await?;
        check(resp.error_code, None, || Context::None)?;
        let mut out = FetchResults::new();
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
                if !positions.iter().any(|pos| pos.tp == tp) {
                    return Err(Error::Unexpected {
                        broker: broker.to_string(),
                        what: format!("Fetch answer has {tp}, which was not asked for"),
                    });
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
                out.insert(tp, result);
            }
        }
        Ok(out)
    }

    /// Fetches the given partitions from their leaders, one request per leader, concurrently,
    /// within `options.max_bytes` over all of them (split by partitions per leader). Every
    /// partition asked for gets an entry: data or its own error. A whole request that fails
    /// (the broker unreachable) gives that error to each of its partitions.
    pub async fn fetch(&self, positions: &[FetchPosition], options: &FetchOptions) -> FetchResults {
        let mut by_leader: BTreeMap<BrokerId, Vec<FetchPosition>> = BTreeMap::new();
        let mut out = FetchResults::new();
        for p in positions {
            match self.leader(&p.tp).await {
                Ok(leader) => by_leader.entry(leader).or_default().push(p.clone()),
                Err(e) => {
                    out.insert(p.tp.clone(), Err(e));
                }
            }
        }
        let asked: usize = by_leader.values().map(Vec::len).sum();
        let requests = by_leader.into_iter().map(|(leader, ps)| async move {
            let share = FetchOptions {
                max_bytes: share_of(options.max_bytes, ps.len(), asked),
                ..*options
            };
            let result = self.fetch_from(leader, &ps, &share).await;
            (ps, result)
        });
        for (ps, result) in futures::future::join_all(requests).await {
            match result {
                Ok(mut results) => {
                    for p in ps {
                        let r = results.remove(&p.tp).unwrap_or_else(|| {
                            Err(Error::Unexpected {
                                broker: "leader".into(),
                                what: format!("Fetch answer does not mention {}", p.tp),
                            })
                        });
                        out.insert(p.tp, r);
                    }
                }
                Err(e) => {
                    for p in ps {
                        out.insert(p.tp, Err(e.clone()));
                    }
                }
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
