//! Which source topics a flow mirrors, and their remote topics on the target: created with the
//! source's partition count and its non-default configs (minus `config.properties.exclude`),
//! grown when the source grows (`docs/mm2-behaviour.md` §1.8). Deleting a source topic deletes its remote topic
//! only when the flow is told to (`strait.sync.topic.deletions.enabled`, off by default as MM2
//! never does): [`confirm_deleted`] decides which source topics are gone, [`deletable_remote`]
//! which remote topic may go with one (`docs/mirroring.md`, "Source topics deleted").
//!
//! A topic of more than [`MAX_NEW_PARTITIONS`] partitions is created with that many and grown to
//! its count in steps: Kafka's KRaft controller refuses any one operation of more than 10,000
//! metadata records (`QuorumController.MAX_RECORDS_PER_USER_OP`, not configurable), and a new
//! topic is one record for the topic and one per partition (`docs/benchmarks.md`, "Ten thousand
//! partitions").

use std::collections::{BTreeMap, BTreeSet};

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
        if now >= step {
            continue;
        }
        if let Err(e) = target.create_partitions(topic, step).await {
            // Another writer grew it meanwhile (another unit of the flow run by workers, each
            // of which grows the remote topics it sees short): Kafka refuses a count that is
            // not above the topic's, so the count it has now is what counts.
            if e.code() == Some(kafka_protocol::error::ResponseError::InvalidPartitions) {
                if let Some(count) = partitions_now(target, topic).await {
                    if count >= step {
                        now = count;
                        continue;
                    }
                }
            }
            return (now, Err(e));
        }
        now = step;
    }
    (now, Ok(()))
}

/// `topic`'s partition count on `target`, from fresh metadata.
async fn partitions_now(target: &Client, topic: &str) -> Option<i32> {
    let metadata = target.refresh_metadata().await.ok()?;
    metadata
        .topics
        .get(topic)
        .map(|t| t.partitions.len() as i32)
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
    Ok(discover_all(source, flow).await?.mirrored)
}

/// What one look at the source's metadata found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovered {
    /// The topics the flow mirrors now (the filter applied).
    pub mirrored: Vec<MirroredTopic>,
    /// The name of every topic the source has, whether the flow mirrors it or not: a topic
    /// absent from here is deleted, not merely left out by the filter.
    pub present: BTreeSet<String>,
}

/// The source topics the flow mirrors now, with their remote names, and every topic the
/// source has (one metadata request for all topics).
pub async fn discover_all(source: &Client, flow: &FlowConfig) -> Result<Discovered, FlowError> {
    let metadata = source.refresh_metadata().await?;
    let mirrored = metadata
        .topics
        .values()
        .filter(|t| !t.is_internal && flow.should_replicate_topic(&t.name))
        .map(|t| MirroredTopic {
            source: t.name.clone(),
            remote: flow.remote_topic(&t.name),
            partitions: t.partitions.len() as i32,
            id: t.id,
        })
        .collect();
    let present = metadata.topics.keys().cloned().collect();
    Ok(Discovered { mirrored, present })
}

/// Which source topics the flow mirrored are deleted: absent from the source's unfiltered
/// listing (`present`) at this refresh **and** at the one before (`absent_before`, which this
/// updates to the mirrored topics absent now). One odd metadata answer deletes nothing, and a
/// topic the filter no longer matches is present, so never returned. Returns the topics in
/// name order; a topic stays returned at each refresh while it is absent and still mirrored.
pub fn confirm_deleted(
    mirrored: &BTreeSet<String>,
    present: &BTreeSet<String>,
    absent_before: &mut BTreeSet<String>,
) -> Vec<String> {
    let absent_now: BTreeSet<String> = mirrored
        .iter()
        .filter(|t| !present.contains(*t))
        .cloned()
        .collect();
    let confirmed = absent_now.intersection(absent_before).cloned().collect();
    *absent_before = absent_now;
    confirmed
}

/// The remote topic to delete with deleted source topic `source`, whose partitions the flow
/// wrote to `remote`: only if it is this flow's remote topic of `source` (the replication
/// policy's name for it), and neither it nor `source` is an internal topic (MM2's, Kafka's,
/// strait's offset maps) nor a heartbeats topic. Else why not.
pub fn deletable_remote(flow: &FlowConfig, source: &str, remote: &str) -> Result<(), String> {
    let expected = flow.remote_topic(source);
    if remote != expected {
        return Err(format!(
            "the flow wrote {source} to {remote}, not to {expected}, its remote topic by the \
             replication policy"
        ));
    }
    for topic in [source, remote] {
        if flow.policy.is_internal_topic(topic) || flow.policy.is_heartbeats_topic(topic) {
            return Err(format!(
                "{topic} is an internal or heartbeats topic, never deleted by strait"
            ));
        }
    }
    Ok(())
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

/// What [`ensure_remote_topics`] made of the remote topics.
#[derive(Debug, Default)]
pub struct RemoteTopics {
    /// The target partition count per remote topic that exists.
    pub counts: BTreeMap<String, i32>,
    /// Remote topics the target refuses to create for good (a create-topic policy, an ACL that
    /// does not cover the name, a name it does not accept), with why. Their source topics
    /// wait and are tried again at the next refresh; the others flow (MM2 logs a warning per
    /// topic and goes on, too).
    pub refused: BTreeMap<String, strait_kafka::Error>,
}

/// Whether the target refuses a topic's configs (a key it does not know, such as
/// `remote.storage.enable` on a broker without tiered storage or a `confluent.*` key from
/// Confluent Server, or a value an alter-config policy forbids): the request may pass without
/// them.
fn refuses_configs(e: &strait_kafka::Error) -> bool {
    use kafka_protocol::error::ResponseError;
    matches!(
        e.code(),
        Some(ResponseError::InvalidConfig | ResponseError::PolicyViolation)
    )
}

/// The configs of `configs` the target takes, each asked alone with a CreateTopics of `topic`
/// that only validates; a key whose answer is not a
/// refusal of configs (the target out of reach) is kept, so the create that follows says why.
async fn accepted_configs(
    target: &Client,
    topic: &NewTopic,
    configs: &[(String, String)],
) -> Vec<(String, String)> {
    let mut accepted = Vec::with_capacity(configs.len());
    for config in configs {
        let mut alone = topic.clone();
        alone.configs = vec![config.clone()];
        match target.validate_topic(alone).await {
            Err(e) if refuses_configs(&e) => {}
            _ => accepted.push(config.clone()),
        }
    }
    accepted
}

/// Makes sure each remote topic exists with at least the source's partitions. One the target
/// refuses for good is left out (in [`RemoteTopics::refused`]); one whose copied configs the
/// target refuses in part is created with the keys it takes, found by validating each alone
/// (the keys refused are said), in one request; one whose `cleanup.policy` is refused, or
/// that is refused with the keys taken, is refused, never created without its policy (a
/// deleting topic where the source's is compacted). Only an error time can fix (the target out of reach) fails the call.
pub async fn ensure_remote_topics(
    source: &Client,
    target: &Client,
    flow: &FlowConfig,
    topics: &[MirroredTopic],
) -> Result<RemoteTopics, FlowError> {
    let existing = target.refresh_metadata().await?;
    let mut counts = BTreeMap::new();
    let mut refused = BTreeMap::new();
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
                // A topic whose configs cannot be read (an ACL without DESCRIBE_CONFIGS on
                // it, a broker's odd answer) waits, refused, like one the target refuses: made
                // without them it could delete what the source keeps. The others go on.
                let configs = match replicable_configs(source, flow, &t.source).await {
                    Ok(configs) => configs,
                    Err(FlowError::Kafka(e)) if !e.is_retriable() => {
                        tracing::warn!(topic = %t.source, error = %e,
                            "cannot read the source topic's configs; its remote topic is not \
                             created until they can be read (tried again at each refresh)");
                        refused.insert(t.remote.clone(), e);
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                let first = t.partitions.min(MAX_NEW_PARTITIONS);
                let new = |configs: Vec<(String, String)>| {
                    let mut new =
                        NewTopic::new(&t.remote, first).replication_factor(flow.replication_factor);
                    new.configs = configs;
                    new
                };
                let mut created = target.create_topic(new(configs.clone())).await;
                if let Err(e) = &created {
                    if !configs.is_empty() && refuses_configs(e) {
                        // Created with the keys the target takes, in the one request, so the
                        // topic never exists without them (a compacted topic made as a
                        // deleting one, and never given its policy where the principal may
                        // create but not alter configs, would delete what the source keeps).
                        let accepted = accepted_configs(target, &new(Vec::new()), &configs).await;
                        tracing::warn!(topic = %t.remote, error = %e,
                            refused = ?configs.iter().filter(|c| !accepted.contains(c))
                                .map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
                            "the target refuses some of the source topic's configs; the remote \
                             topic is created with the others (exclude the refused keys with \
                             config.properties.exclude to stop trying)");
                        // Without its cleanup policy a compacted topic would delete: then
                        // it is not created at all (refused below, tried at each refresh).
                        let policy_kept = configs
                            .iter()
                            .all(|c| c.0 != "cleanup.policy" || accepted.contains(c));
                        if accepted.len() < configs.len() && policy_kept {
                            created = target.create_topic(new(accepted)).await;
                        }
                    }
                }
                match created {
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
                    Err(e) if e.is_retriable() => {
                        return Err(FlowError::Topic {
                            topic: t.remote.clone(),
                            source: e,
                        })
                    }
                    Err(e) => {
                        refused.insert(t.remote.clone(), e);
                        continue;
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
    Ok(RemoteTopics { counts, refused })
}

/// Brings each remote topic's configs in line with its source (`docs/mm2-behaviour.md` §1.8, MM2's
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
        // One topic whose configs cannot be read or set does not stop the others': said, and
        // tried again at the next sync.
        match sync_topic_configs(source, target, flow, t).await {
            Ok(n) => changed += n,
            Err(e) if e.is_retriable() => return Err(e),
            Err(e) => tracing::warn!(topic = %t.remote, error = %e,
                "cannot sync this remote topic's configs from the source; the others go on, and \
                 the next sync tries again"),
        }
    }
    Ok(changed)
}

/// [`sync_configs`] for one topic. A request the target refuses for its configs is made
/// again key by key, and each key refused is said (MM2 logs the whole request's failure).
async fn sync_topic_configs(
    source: &Client,
    target: &Client,
    flow: &FlowConfig,
    t: &MirroredTopic,
) -> Result<usize, FlowError> {
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
        return Ok(0);
    }
    tracing::info!(topic = %t.remote, changes = ops.len(), "syncing topic configs from the source");
    match target.incremental_alter_configs(&resource, &ops).await {
        Ok(()) => return Ok(ops.len()),
        Err(e) if ops.len() > 1 && refuses_configs(&e) => {}
        Err(e) => return Err(e.into()),
    }
    set_key_by_key(target, &t.remote, ops).await
}

/// Applies `ops` to `topic`'s configs one at a time: each the target refuses (INVALID_CONFIG,
/// POLICY_VIOLATION) is said at warn, the others are set. Returns how many were.
async fn set_key_by_key(
    target: &Client,
    topic: &str,
    ops: Vec<AlterConfigOp>,
) -> Result<usize, FlowError> {
    let resource = ConfigResource::Topic(topic.to_owned());
    let mut applied = 0;
    for op in ops {
        match target
            .incremental_alter_configs(&resource, std::slice::from_ref(&op))
            .await
        {
            Ok(()) => applied += 1,
            Err(e) if refuses_configs(&e) => tracing::warn!(topic = %topic, change = ?op,
                error = %e, "the target refuses this config of the remote topic; the others \
                 are set (exclude the key with config.properties.exclude to stop trying)"),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_topic_is_deleted_only_when_absent_at_two_refreshes_in_a_row() {
        let mirrored = names(&["a", "b"]);
        let mut absent = BTreeSet::new();
        // `b` vanishes once (an odd answer) and comes back: nothing is deleted.
        assert!(confirm_deleted(&mirrored, &names(&["a"]), &mut absent).is_empty());
        assert_eq!(absent, names(&["b"]));
        assert!(confirm_deleted(&mirrored, &names(&["a", "b"]), &mut absent).is_empty());
        assert!(absent.is_empty());
        // Absent twice in a row: deleted.
        assert!(confirm_deleted(&mirrored, &names(&["a"]), &mut absent).is_empty());
        assert_eq!(
            confirm_deleted(&mirrored, &names(&["a"]), &mut absent),
            ["b"]
        );
        // Once forgotten by the flow (no longer mirrored), it is not returned again.
        assert!(confirm_deleted(&names(&["a"]), &names(&["a"]), &mut absent).is_empty());
        assert!(absent.is_empty());
    }

    #[test]
    fn a_topic_the_filter_no_longer_matches_is_never_deleted() {
        // `b` is still on the source, only not mirrored any more: it is present in the
        // unfiltered listing, refresh after refresh.
        let mirrored = names(&["a", "b"]);
        let present = names(&["a", "b", "c"]);
        let mut absent = BTreeSet::new();
        for _ in 0..5 {
            assert!(confirm_deleted(&mirrored, &present, &mut absent).is_empty());
            assert!(absent.is_empty());
        }
        // An empty answer (a broker that lists nothing) twice deletes what it leaves out; once
        // deletes nothing.
        assert!(confirm_deleted(&mirrored, &BTreeSet::new(), &mut absent).is_empty());
        assert!(confirm_deleted(&mirrored, &present, &mut absent).is_empty());
    }

    fn flow(extra: &str) -> FlowConfig {
        let text = format!(
            "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n\
             A->B.enabled = true\n{extra}"
        );
        crate::config::StraitConfig::parse(&text, "test.properties")
            .expect("valid")
            .flows
            .remove(0)
    }

    #[test]
    fn only_the_flows_own_remote_topic_of_a_user_topic_may_be_deleted() {
        let f = flow("");
        assert_eq!(deletable_remote(&f, "orders", "A.orders"), Ok(()));
        // Not the policy's name for it.
        assert!(deletable_remote(&f, "orders", "orders").is_err());
        assert!(deletable_remote(&f, "orders", "A.orders2").is_err());
        // Internal and heartbeats topics, on either side.
        for (source, remote) in [
            ("heartbeats", "A.heartbeats"),
            ("C.heartbeats", "A.C.heartbeats"),
            ("__consumer_offsets", "A.__consumer_offsets"),
            (
                "mm2-offset-syncs.B.internal",
                "A.mm2-offset-syncs.B.internal",
            ),
            (
                "strait-offset-map.C.internal",
                "A.strait-offset-map.C.internal",
            ),
            ("C.checkpoints.internal", "A.C.checkpoints.internal"),
        ] {
            assert!(
                deletable_remote(&f, source, remote).is_err(),
                "{source} -> {remote}"
            );
        }
        let identity = flow(
            "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n",
        );
        assert_eq!(deletable_remote(&identity, "orders", "orders"), Ok(()));
        assert!(deletable_remote(&identity, "orders", "A.orders").is_err());
    }

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
