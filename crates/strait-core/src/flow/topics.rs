//! Which source topics a flow mirrors, and their remote topics on the target: created with the
//! source's partition count and its non-default configs (minus `config.properties.exclude`),
//! grown when the source grows (mm2.md §1.8). Deleting a source topic never deletes its remote.

use std::collections::BTreeMap;

use strait_kafka::admin::{AlterConfigOp, ConfigResource, ConfigSource, NewTopic};
use strait_kafka::Client;

use super::error::FlowError;
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
