//! The transactional side of the raw producer (KIP-98), in Kafka's first transaction protocol:
//! the producer's `transactional.id` is initialised at its coordinator (InitProducerId), which
//! gives it the id's producer id with a new epoch, aborts whatever transaction the id had open
//! and, from then on, refuses the previous epoch: every writer that held the id before is
//! fenced. Each partition joins the open transaction (AddPartitionsToTxn) before its first
//! batch of it; EndTxn commits or aborts, and the coordinator writes the markers that make the
//! batches visible to `read_committed` readers, or hide them for good.
//!
//! A group's offsets join a transaction too (AddOffsetsToTxn at the transaction coordinator,
//! then TxnOffsetCommit at the group's coordinator): they are committed with it, or never, and
//! a fenced producer's offsets are refused like its batches.
//!
//! A fenced producer learns it from the coordinator (PRODUCER_FENCED) or from a partition
//! leader (INVALID_PRODUCER_EPOCH): see [`crate::Error::is_fenced`]. Nothing it sends after that
//! lands. Only a new initialisation of the id writes again, and that fences the other writer
//! in turn, so the caller decides who may do it (scale-out: the owner of the unit).

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, GroupId,
    InitProducerIdRequest, ProducerId, TopicName, TransactionalId, TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;

use crate::cluster::{Client, TopicPartition};
use crate::error::{check, Context, Error, Result};
use crate::groups::OffsetToCommit;

/// A producer id and epoch as the coordinator gave them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Session {
    pub(super) producer_id: i64,
    pub(super) producer_epoch: i16,
}

/// Initialises `transactional_id` at its coordinator. With `current` `None` the id is taken
/// whoever held it (the previous holder is fenced); with `Some`, it is the holder bumping its own
/// epoch (KIP-360), which the coordinator refuses with PRODUCER_FENCED when another producer
/// took the id since. Either way the id's open transaction, if any, is aborted.
pub(super) async fn init(
    client: &Client,
    transactional_id: &str,
    timeout_ms: i32,
    current: Option<Session>,
) -> Result<Session> {
    let (producer_id, producer_epoch) =
        current.map_or((-1, -1), |s| (s.producer_id, s.producer_epoch));
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(transactional_id_of(transactional_id)))
        .with_transaction_timeout_ms(timeout_ms)
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(producer_epoch);
    let resp = client
        .retry("init transactional producer id", || async {
            let coordinator = client.transaction_coordinator(transactional_id).await?;
            let resp = client.send_to(coordinator, &request).await?;
            check(resp.error_code, None, || context(transactional_id))?;
            Ok(resp)
        })
        .await?;
    Ok(Session {
        producer_id: resp.producer_id.0,
        producer_epoch: resp.producer_epoch,
    })
}

/// Adds `partitions` to the open transaction of `session` (the first one starts it).
pub(super) async fn add_partitions(
    client: &Client,
    transactional_id: &str,
    session: Session,
    partitions: &[TopicPartition],
) -> Result<()> {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        by_topic.entry(&tp.topic).or_default().push(tp.partition);
    }
    let request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(transactional_id_of(transactional_id))
        .with_v3_and_below_producer_id(ProducerId(session.producer_id))
        .with_v3_and_below_producer_epoch(session.producer_epoch)
        .with_v3_and_below_topics(
            by_topic
                .into_iter()
                .map(|(topic, partitions)| {
                    AddPartitionsToTxnTopic::default()
                        .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                        .with_partitions(partitions)
                })
                .collect(),
        );
    until_not_concurrent(
        client,
        transactional_id,
        "add partitions to transaction",
        || async {
            let coordinator = client.transaction_coordinator(transactional_id).await?;
            let resp = client.send_to(coordinator, &request).await?;
            if concurrent(resp.error_code)
                || resp.results_by_topic_v3_and_below.iter().any(|t| {
                    t.results_by_partition
                        .iter()
                        .any(|p| concurrent(p.partition_error_code))
                })
            {
                return Ok(false);
            }
            check(resp.error_code, None, || context(transactional_id))?;
            // One partition's error fails the request; the others then say only
            // OPERATION_NOT_ATTEMPTED, so the first other error is the cause.
            let mut not_attempted = None;
            for topic in &resp.results_by_topic_v3_and_below {
                for p in &topic.results_by_partition {
                    let tp = || Context::Partition {
                        topic: topic.name.0.to_string(),
                        partition: p.partition_index,
                    };
                    let code = ResponseError::try_from_code(p.partition_error_code);
                    if code == Some(ResponseError::OperationNotAttempted) {
                        not_attempted
                            .get_or_insert_with(|| check(p.partition_error_code, None, tp));
                    } else {
                        check(p.partition_error_code, None, tp)?;
                    }
                }
            }
            not_attempted.unwrap_or(Ok(())).map(|()| true)
        },
    )
    .await
}

/// Adds `group`'s offsets to the open transaction of `session` (AddOffsetsToTxn: the
/// coordinator then writes the transaction's markers to the group's `__consumer_offsets`
/// partition too).
pub(super) async fn add_offsets(
    client: &Client,
    transactional_id: &str,
    session: Session,
    group: &str,
) -> Result<()> {
    let request = AddOffsetsToTxnRequest::default()
        .with_transactional_id(transactional_id_of(transactional_id))
        .with_producer_id(ProducerId(session.producer_id))
        .with_producer_epoch(session.producer_epoch)
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())));
    until_not_concurrent(
        client,
        transactional_id,
        "add offsets to transaction",
        || async {
            let coordinator = client.transaction_coordinator(transactional_id).await?;
            let resp = client.send_to(coordinator, &request).await?;
            if concurrent(resp.error_code) {
                return Ok(false);
            }
            check(resp.error_code, None, || context(transactional_id)).map(|()| true)
        },
    )
    .await
}

/// Commits `offsets` of `group` in the open transaction of `session` (TxnOffsetCommit at the
/// group's coordinator, after [`add_offsets`]). They take effect when the transaction commits.
/// Sent without a member id or generation, as a mirror writes into a group it is not a member
/// of: Kafka accepts that whatever the group's state, so the caller checks that the group has
/// no active members first.
pub(super) async fn commit_offsets(
    client: &Client,
    transactional_id: &str,
    session: Session,
    group: &str,
    offsets: &[OffsetToCommit],
) -> Result<()> {
    let mut by_topic: BTreeMap<&str, Vec<TxnOffsetCommitRequestPartition>> = BTreeMap::new();
    for o in offsets {
        by_topic.entry(&o.tp.topic).or_default().push(
            TxnOffsetCommitRequestPartition::default()
                .with_partition_index(o.tp.partition)
                .with_committed_offset(o.offset)
                .with_committed_leader_epoch(o.leader_epoch)
                .with_committed_metadata(Some(StrBytes::from_string(
                    o.metadata.clone().unwrap_or_default(),
                ))),
        );
    }
    let request = TxnOffsetCommitRequest::default()
        .with_transactional_id(transactional_id_of(transactional_id))
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_producer_id(ProducerId(session.producer_id))
        .with_producer_epoch(session.producer_epoch)
        .with_generation_id(-1)
        .with_member_id(StrBytes::default())
        .with_topics(
            by_topic
                .into_iter()
                .map(|(topic, partitions)| {
                    TxnOffsetCommitRequestTopic::default()
                        .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                        .with_partitions(partitions)
                })
                .collect(),
        );
    until_not_concurrent(
        client,
        transactional_id,
        "commit offsets in transaction",
        || async {
            let coordinator = client.coordinator(group).await?;
            let resp = client.send_to(coordinator, &request).await?;
            for topic in &resp.topics {
                for p in &topic.partitions {
                    if concurrent(p.error_code) {
                        return Ok(false);
                    }
                    check(p.error_code, None, || Context::Partition {
                        topic: topic.name.0.to_string(),
                        partition: p.partition_index,
                    })?;
                }
            }
            Ok(true)
        },
    )
    .await
}

fn concurrent(code: i16) -> bool {
    ResponseError::try_from_code(code) == Some(ResponseError::ConcurrentTransactions)
}

/// Runs `attempt` (itself retried on the client's terms) until it returns `true`, again every
/// [`CONCURRENT_RETRY`] while it returns `false`, which it does when the coordinator answered
/// CONCURRENT_TRANSACTIONS, up to the client's operation timeout.
///
/// Right after a commit the coordinator is still writing the last transaction's markers and
/// answers CONCURRENT_TRANSACTIONS for a few milliseconds: asked again every 10 ms (as Kafka's
/// producer does, every 20 ms), not after the client's retry backoff (100 ms and growing), which
/// would cost every transactional round that much.
async fn until_not_concurrent<F, Fut>(
    client: &Client,
    transactional_id: &str,
    what: &str,
    attempt: F,
) -> Result<()>
where
    F: Fn() -> Fut + Sync,
    Fut: std::future::Future<Output = Result<bool>> + Send,
{
    let deadline = tokio::time::Instant::now() + client.config().operation_timeout;
    loop {
        if client.retry(what, &attempt).await? {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::broker(
                ResponseError::ConcurrentTransactions,
                None,
                context(transactional_id),
            ));
        }
        tokio::time::sleep(CONCURRENT_RETRY).await;
    }
}

/// How soon an AddPartitionsToTxn answered CONCURRENT_TRANSACTIONS is sent again.
const CONCURRENT_RETRY: std::time::Duration = std::time::Duration::from_millis(10);

/// Commits (`commit`) or aborts the open transaction of `session`.
pub(super) async fn end(
    client: &Client,
    transactional_id: &str,
    session: Session,
    commit: bool,
) -> Result<()> {
    let request = EndTxnRequest::default()
        .with_transactional_id(transactional_id_of(transactional_id))
        .with_producer_id(ProducerId(session.producer_id))
        .with_producer_epoch(session.producer_epoch)
        .with_committed(commit);
    let what = if commit {
        "commit transaction"
    } else {
        "abort transaction"
    };
    client
        .retry(what, || async {
            let coordinator = client.transaction_coordinator(transactional_id).await?;
            let resp = client.send_to(coordinator, &request).await?;
            check(resp.error_code, None, || context(transactional_id))
        })
        .await
}

fn transactional_id_of(id: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(id.to_owned()))
}

fn context(transactional_id: &str) -> Context {
    Context::Transaction(transactional_id.to_owned())
}
