//! Making strait's single-partition compacted topics, and reading one back whole.

use strait_kafka::admin::NewTopic;
use strait_kafka::Client;

use super::error::InternalError;

/// Whether `topic` exists on `client`'s cluster. The client's metadata may be older than the
/// topic (made since by another client, up to `metadata.max.age.ms` ago): a topic missing from
/// it is looked up again in fresh metadata before it is called missing.
pub async fn topic_exists(client: &Client, topic: &str) -> Result<bool, InternalError> {
    if client.metadata().await?.topics.contains_key(topic) {
        return Ok(true);
    }
    Ok(client.refresh_metadata().await?.topics.contains_key(topic))
}

/// Creates one of strait's single-partition compacted topics (the offset map, MM2's
/// offset-syncs, checkpoints and heartbeats; MM2's `createSinglePartitionCompactedTopic`) unless
/// it exists.
pub async fn ensure_compacted_topic(
    client: &Client,
    topic: &str,
    replication_factor: i16,
) -> Result<(), InternalError> {
    if topic_exists(client, topic).await? {
        return Ok(());
    }
    let created = client
        .create_topic(
            NewTopic::new(topic, 1)
                .replication_factor(replication_factor)
                .config("cleanup.policy", "compact"),
        )
        .await;
    match created {
        Ok(()) => {
            tracing::info!(topic = %topic, "created internal topic");
            Ok(())
        }
        Err(e) if e.code() == Some(kafka_protocol::error::ResponseError::TopicAlreadyExists) => {
            Ok(())
        }
        Err(source) => Err(InternalError::Create {
            topic: topic.to_owned(),
            source,
        }),
    }
}

/// Reads partition 0 of `topic` (one of the single-partition compacted topics: the offset map,
/// checkpoints) from its start to the end it has now, calling `each(offset, timestamp, key,
/// value)` for every record in order (the timestamp in ms: its create time, or the broker's
/// append time where the topic sets it). It reads committed records only (read_committed, up to the last
/// stable offset): control batches and the batches of aborted transactions are skipped, so a
/// map written in transactions (`docs/design.md` §7.3) never loads what was aborted. Returns
/// `false`, reading nothing, when
/// the topic does not exist. An `Err` from `each` stops the read and is returned with the topic
/// and offset ([`InternalError::Record`]).
pub async fn read_whole_topic(
    client: &Client,
    topic: &str,
    each: impl FnMut(
        i64,
        i64,
        Option<bytes::Bytes>,
        Option<bytes::Bytes>,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>>,
) -> Result<bool, InternalError> {
    Ok(read_topic_from(client, topic, 0, each).await?.is_some())
}

/// Where [`read_topic_from`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadTo {
    /// The next offset to read: the topic's last stable offset when the read began.
    pub end: i64,
    /// Whether records from `from` on had been deleted (the log starts above `from`): what
    /// was read then is not all that was written since `from`, and a reader that follows the
    /// topic must read it again from the start.
    pub gap: bool,
}

/// [`read_whole_topic`] from offset `from` on, to the end the topic has now: for a reader that
/// follows a topic (the offset map of a flow run by workers, [`MapStore::follow`]) and reads
/// only what was written since its last read. `None` when the topic does not exist.
///
/// [`MapStore::follow`]: super::map_store::MapStore::follow
pub async fn read_topic_from(
    client: &Client,
    topic: &str,
    from: i64,
    mut each: impl FnMut(
        i64,
        i64,
        Option<bytes::Bytes>,
        Option<bytes::Bytes>,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>>,
) -> Result<Option<ReadTo>, InternalError> {
    use strait_kafka::admin::{IsolationLevel, OffsetSpec};
    use strait_kafka::fetch::{FetchOptions, FetchPosition};
    use strait_kafka::TopicPartition;

    if !topic_exists(client, topic).await? {
        return Ok(None);
    }
    let tp = TopicPartition::new(topic, 0);
    let end = client
        .list_offset(&tp, OffsetSpec::Latest, IsolationLevel::ReadCommitted)
        .await?
        .offset;
    let options = FetchOptions {
        max_wait: std::time::Duration::from_millis(10),
        isolation: IsolationLevel::ReadCommitted,
        ..FetchOptions::default()
    };
    let mut position = from.max(0);
    // A topic shorter than where the reader stopped was deleted and made again.
    let mut gap = position > end;
    while position < end {
        let data = client
            .fetch(&[FetchPosition::new(tp.clone(), position)], &options)
            .await
            .remove(&tp)
            .unwrap_or(Err(strait_kafka::Error::Closed))?;
        gap |= from > 0 && data.log_start_offset > position;
        position = position.max(data.log_start_offset);
        let before = position;
        let mut aborted = strait_kafka::fetch::AbortedBatches::new(&data.aborted);
        for batch in strait_wire::BatchScanner::new(data.records) {
            let batch = batch.map_err(|source| InternalError::Scan {
                topic: topic.to_owned(),
                source,
            })?;
            if batch.header.next_offset() <= position {
                continue;
            }
            if !aborted.is_aborted(&batch) && !batch.header.attributes.is_control() {
                // Our own record reader: bounded decompression, nothing merged.
                let records = strait_wire::records::batch_records(&batch).map_err(|source| {
                    InternalError::Decode {
                        topic: topic.to_owned(),
                        offset: batch.header.base_offset,
                        source,
                    }
                })?;
                for record in records {
                    let offset = batch.header.base_offset + i64::from(record.offset_delta);
                    if offset >= position {
                        let timestamp = if batch.header.attributes.timestamp_type_log_append() {
                            batch.header.max_timestamp
                        } else {
                            batch
                                .header
                                .base_timestamp
                                .saturating_add(record.timestamp_delta)
                        };
                        each(offset, timestamp, record.key, record.value).map_err(|source| {
                            InternalError::Record {
                                topic: topic.to_owned(),
                                offset,
                                source,
                            }
                        })?;
                    }
                }
            }
            position = batch.header.next_offset();
        }
        if position == before {
            return Err(InternalError::NoProgress {
                topic: topic.to_owned(),
                position,
                end,
            });
        }
    }
    Ok(Some(ReadTo {
        end: position.max(end),
        gap,
    }))
}
