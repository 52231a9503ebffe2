//! Which source topics a flow mirrors, and their remote topics on the target: created with the
//! source's partition count and its non-default configs (minus `config.properties.exclude`),
//! grown when the source grows (mm2.md §1.8). Deleting a source topic never deletes its remote.

use std::collections::BTreeMap;

use strait_kafka::admin::{AlterConfigOp, ConfigResource, ConfigSource, NewTopic};
use strait_kafka::Client;

use super::FlowError;
use crate::config::FlowConfig;

/// A source topic being mirrored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirroredTopic {
    /// Source name.
    pub source: String,
    /// Remote (target) name.
    pub remote: String,
    /// Partition count on the source.
    pub partitions: i32,
    /// Its topic id on the source (KIP-516); zero where the broker gives none.
    pub id: [u8; 16],
}

/// The source topics the flow mirrors now, with their remote names.
pub async fn discover(source: &Client, flow: &FlowConfig) -> Result<Vec<MirroredTopic>, FlowError> {
    let metadata = source.refresh_metadata().await?;
    Ok(metadata
        .topics
        .values()
        .filter(|t| !t.is_internal && flow.should_replicate_topic(&t.name))
        .map(|t| MirroredTopic {
            source: t.name.clone(),
            remote: flow.remote_topic(&t.name),
            partitions: t.partitions.len() as i32,
            id: t.id,
        })
        .collect())
}

/// The configs of a source topic that its remote topic should carry: set on the topic itself
/// (not defaults), not read-only or sensitive, and not excluded.
pub async fn replicable_configs(
    source: &Client,
    flow: &FlowConfig,
    topic: &str,
) -> Result<Vec<(String, String)>, FlowError> {
    let entries = source
        .describe_configs(&ConfigResource::Topic(topic.to_owned()))
        .await?;
    Ok(entries
        .into_iter()
        .filter(|e| {
            matches!(e.source, ConfigSource::DynamicTopic)
                && !e.read_only
                && !e.sensitive
                && flow.should_replicate_config_property(&e.name)
        })
        .filter_map(|e| e.value.map(|v| (e.name, v)))
        .collect())
}

/// Makes sure each remote topic exists with at least the source's partitions. Returns the
/// target partition count per remote topic.
pub async fn ensure_remote_topics(
    source: &Client,
    target: &Client,
    flow: &FlowConfig,
    topics: &[MirroredTopic],
) -> Result<BTreeMap<String, i32>, FlowError> {
    let existing = target.refresh_metadata().await?;
    let mut counts = BTreeMap::new();
    for t in topics {
        match existing.topics.get(&t.remote) {
            Some(remote) => {
                let have = remote.partitions.len() as i32;
                let mut now = have;
                if have < t.partitions {
                    tracing::info!(topic = %t.remote, from = have, to = t.partitions, "growing remote topic");
                    match target.create_partitions(&t.remote, t.partitions).await {
                        Ok(()) => now = t.partitions,
                        // The other partitions keep flowing; these wait for the next refresh.
                        Err(e) if !e.is_retriable() => tracing::error!(
                            topic = %t.remote,
                            error = %e,
                            "cannot grow the remote topic; source partitions {have}..{} are not \
                             mirrored until it has them",
                            t.partitions
                        ),
                        Err(e) => return Err(e.into()),
                    }
                }
                counts.insert(t.remote.clone(), now);
            }
            None => {
                let configs = replicable_configs(source, flow, &t.source).await?;
                let mut new = NewTopic::new(&t.remote, t.partitions)
                    .replication_factor(flow.replication_factor);
                new.configs = configs;
                match target.create_topic(new).await {
                    Ok(()) => {
                        tracing::info!(topic = %t.remote, partitions = t.partitions, "created remote topic");
                    }
                    Err(e)
                        if e.code()
                            == Some(kafka_protocol::error::ResponseError::TopicAlreadyExists) => {}
                    Err(e) => {
                        return Err(FlowError::Topic {
                            topic: t.remote.clone(),
                            source: e,
                        })
                    }
                }
                counts.insert(t.remote.clone(), t.partitions);
            }
        }
    }
    Ok(counts)
}

/// Brings each remote topic's configs in line with its source (mm2.md §1.8, MM2's
/// `syncTopicConfigs` with `use.defaults.from=target`): keys set on the source are set on the
/// target; keys set on the target but not on the source are deleted, so the target's default
/// applies. Excluded keys (`config.properties.exclude`) are left alone on both sides. Returns
/// the number of keys changed.
pub async fn sync_configs(
    source: &Client,
    target: &Client,
    flow: &FlowConfig,
    topics: &[MirroredTopic],
) -> Result<usize, FlowError> {
    let mut changed = 0;
    for t in topics {
        let wanted: BTreeMap<String, String> = replicable_configs(source, flow, &t.source)
            .await?
            .into_iter()
            .collect();
        let resource = ConfigResource::Topic(t.remote.clone());
        let have: BTreeMap<String, Option<String>> = target
            .describe_configs(&resource)
            .await?
            .into_iter()
            .filter(|e| matches!(e.source, ConfigSource::DynamicTopic) && !e.read_only)
            .map(|e| (e.name, e.value))
            .collect();
        let mut ops = Vec::new();
        for (key, value) in &wanted {
            if have.get(key).and_then(Option::as_ref) != Some(value) {
                ops.push(AlterConfigOp::Set(key.clone(), value.clone()));
            }
        }
        for key in have.keys() {
            if !wanted.contains_key(key) && flow.should_replicate_config_property(key) {
                ops.push(AlterConfigOp::Delete(key.clone()));
            }
        }
        if ops.is_empty() {
            continue;
        }
        tracing::info!(topic = %t.remote, changes = ops.len(), "syncing topic configs from the source");
        changed += ops.len();
        target.incremental_alter_configs(&resource, &ops).await?;
    }
    Ok(changed)
}

/// Creates one of strait's single-partition compacted topics (the offset map, MM2's
/// offset-syncs; MM2's `createSinglePartitionCompactedTopic`) unless it exists.
pub async fn ensure_compacted_topic(
    client: &Client,
    topic: &str,
    replication_factor: i16,
) -> Result<(), FlowError> {
    if client.metadata().await?.topics.contains_key(topic) {
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
        Err(source) => Err(FlowError::Topic {
            topic: topic.to_owned(),
            source,
        }),
    }
}

/// Reads partition 0 of `topic` (one of the single-partition compacted topics: the offset map,
/// checkpoints) from its start to the end it has now, calling `each(offset, key, value)` for
/// every record in order; control batches are skipped. Returns `false`, reading nothing, when
/// the topic does not exist. An `Err` from `each` stops the read and is returned with the topic
/// and offset.
pub async fn read_whole_topic(
    client: &Client,
    topic: &str,
    mut each: impl FnMut(i64, Option<bytes::Bytes>, Option<bytes::Bytes>) -> Result<(), String>,
) -> Result<bool, FlowError> {
    use strait_kafka::admin::{IsolationLevel, OffsetSpec};
    use strait_kafka::fetch::{FetchOptions, FetchPosition};
    use strait_kafka::TopicPartition;

    if !client.metadata().await?.topics.contains_key(topic) {
        return Ok(false);
    }
    let tp = TopicPartition::new(topic, 0);
    let end = client
        .list_offset(&tp, OffsetSpec::Latest, IsolationLevel::ReadUncommitted)
        .await?
        .offset;
    let options = FetchOptions {
        max_wait: std::time::Duration::from_millis(10),
        isolation: IsolationLevel::ReadUncommitted,
        ..FetchOptions::default()
    };
    let mut position = 0;
    while position < end {
        let data = client
            .fetch(&[FetchPosition::new(tp.clone(), position)], &options)
            .await
            .remove(&tp)
            .unwrap_or(Err(strait_kafka::Error::Closed))?;
        position = position.max(data.log_start_offset);
        let before = position;
        for batch in strait_wire::BatchScanner::new(data.records) {
            let batch = batch.map_err(|e| FlowError::Map(format!("{topic}: {e}")))?;
            if batch.header.next_offset() <= position {
                continue;
            }
            if !batch.header.attributes.is_control() {
                // Our own record reader: bounded decompression, nothing merged.
                let records = strait_wire::records::batch_records(&batch).map_err(|e| {
                    FlowError::Map(format!(
                        "{topic}: cannot decode the batch at offset {}: {e}",
                        batch.header.base_offset
                    ))
                })?;
                for record in records {
                    let offset = batch.header.base_offset + i64::from(record.offset_delta);
                    if offset >= position {
                        each(offset, record.key, record.value)
                            .map_err(|e| FlowError::Map(format!("{topic} offset {offset}: {e}")))?;
                    }
                }
            }
            position = batch.header.next_offset();
        }
        if position == before {
            return Err(FlowError::Map(format!(
                "{topic}: no progress reading at offset {position} of {end}"
            )));
        }
    }
    Ok(true)
}
