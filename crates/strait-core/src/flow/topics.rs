//! Which source topics a flow mirrors, and their remote topics on the target: created with the
//! source's partition count and its non-default configs (minus `config.properties.exclude`),
//! grown when the source grows (mm2.md §1.8). Deleting a source topic never deletes its remote.
//!
//! A topic of more than [`MAX_NEW_PARTITIONS`] partitions is created with that many and grown to
//! its count in steps: Kafka's KRaft controller refuses any one operation of more than 10,000
//! metadata records (`QuorumController.MAX_RECORDS_PER_USER_OP`, not configurable), and a new
//! topic is one record for the topic and one per partition (`docs/benchmarks.md`, "Ten thousand
//! partitions").

use std::collections::BTreeMap;

use strait_kafka::admin::{AlterConfigOp, ConfigResource, ConfigSource, NewTopic};
use strait_kafka::Client;

use super::error::FlowError;
use crate::config::FlowConfig;

/// The most partitions one CreateTopics or CreatePartitions request adds (see the module docs).
pub const MAX_NEW_PARTITIONS: i32 = 9_999;

/// The partition counts to ask for, in order, to take a topic from `from` partitions (0: it does
/// not exist yet, and the first count is the CreateTopics') to `to`, none adding more than
/// [`MAX_NEW_PARTITIONS`]. Empty when there is nothing to add.
fn partition_steps(from: i32, to: i32) -> Vec<i32> {
    let mut steps = Vec::new();
    let mut now = from.max(0);
    while now < to {
        now = now.saturating_add(MAX_NEW_PARTITIONS).min(to);
        steps.push(now);
    }
    steps
}

/// Grows `topic` on `target` from `have` partitions to `want`, in steps of at most
/// [`MAX_NEW_PARTITIONS`]. Returns the count reached, with the error that stopped it short.
async fn grow(
    target: &Client,
    topic: &str,
    have: i32,
    want: i32,
) -> (i32, Result<(), strait_kafka::Error>) {
    let mut now = have;
    for step in partition_steps(have, want) {
        if let Err(e) = target.create_partitions(topic, step).await {
            return (now, Err(e));
        }
        now = step;
    }
    (now, Ok(()))
}

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
                    let (reached, grown) = grow(target, &t.remote, have, t.partitions).await;
                    now = reached;
                    match grown {
                        Ok(()) => {}
                        // The other partitions keep flowing; these wait for the next refresh.
                        Err(e) if !e.is_retriable() => tracing::error!(
                            topic = %t.remote,
                            error = %e,
                            "cannot grow the remote topic; source partitions {now}..{} are not \
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
                let first = t.partitions.min(MAX_NEW_PARTITIONS);
                let mut new =
                    NewTopic::new(&t.remote, first).replication_factor(flow.replication_factor);
                new.configs = configs;
                match target.create_topic(new).await {
                    Ok(()) => {
                        tracing::info!(topic = %t.remote, partitions = first, "created remote topic");
                    }
                    // Made meanwhile (by another flow or a restarted one): the next refresh
                    // finds it and grows it if it has fewer partitions.
                    Err(e)
                        if e.code()
                            == Some(kafka_protocol::error::ResponseError::TopicAlreadyExists) =>
                    {
                        counts.insert(t.remote.clone(), t.partitions);
                        continue;
                    }
                    Err(e) => {
                        return Err(FlowError::Topic {
                            topic: t.remote.clone(),
                            source: e,
                        })
                    }
                }
                let mut now = first;
                if first < t.partitions {
                    tracing::info!(topic = %t.remote, from = first, to = t.partitions, "growing remote topic past what one request may create");
                    let (reached, grown) = grow(target, &t.remote, first, t.partitions).await;
                    now = reached;
                    if let Err(e) = grown {
                        return Err(FlowError::Topic {
                            topic: t.remote.clone(),
                            source: e,
                        });
                    }
                }
                counts.insert(t.remote.clone(), now);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_steps_add_at_most_what_one_request_may() {
        assert_eq!(partition_steps(0, 12), [12]);
        assert_eq!(partition_steps(0, 9_999), [9_999]);
        assert_eq!(partition_steps(0, 10_000), [9_999, 10_000]);
        assert_eq!(partition_steps(9_999, 30_000), [19_998, 29_997, 30_000]);
        assert_eq!(partition_steps(12, 12), Vec::<i32>::new());
        assert_eq!(partition_steps(40, 12), Vec::<i32>::new());
        assert_eq!(partition_steps(i32::MAX - 1, i32::MAX), [i32::MAX]);
    }
}
