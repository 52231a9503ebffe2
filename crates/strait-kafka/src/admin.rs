//! Admin operations: topics, configs, partitions, offsets by time, the cluster, ACLs and record
//! deletion.
//!
//! Topic and config changes go to the controller when metadata names one, else to any broker
//! (KRaft brokers forward them, KIP-590). Broker configs go to that broker. ListOffsets and
//! DeleteRecords go to each partition's leader.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    BrokerId as WireBrokerId, CreateAclsRequest, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteRecordsRequest, DeleteTopicsRequest, DescribeAclsRequest, DescribeClusterRequest,
    DescribeConfigsRequest, IncrementalAlterConfigsRequest, ListOffsetsRequest, TopicName,
};
use kafka_protocol::protocol::{Request, StrBytes};

use crate::cluster::{BrokerId, BrokerInfo, Client, TopicPartition};
use crate::error::{check, Context, Error, Result};
use crate::throttle::ThrottleTime;

/// Broker-side timeout sent with admin requests that wait for the controller.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

fn name(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn topic_name(s: &str) -> TopicName {
    TopicName(name(s))
}

/// A topic to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    /// Name.
    pub name: String,
    /// Partition count; -1 for the broker's default.
    pub partitions: i32,
    /// Replication factor; -1 for the broker's default.
    pub replication_factor: i16,
    /// Topic configs (`cleanup.policy`, ...).
    pub configs: Vec<(String, String)>,
}

impl NewTopic {
    /// A topic with `partitions` partitions, the broker's replication factor and no configs.
    pub fn new(name: impl Into<String>, partitions: i32) -> Self {
        Self {
            name: name.into(),
            partitions,
            replication_factor: -1,
            configs: Vec::new(),
        }
    }

    /// Sets the replication factor.
    pub fn replication_factor(mut self, rf: i16) -> Self {
        self.replication_factor = rf;
        self
    }

    /// Adds a config.
    pub fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.configs.push((key.into(), value.into()));
        self
    }
}

/// A resource that has configs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigResource {
    /// A topic.
    Topic(String),
    /// A broker.
    Broker(BrokerId),
}

impl ConfigResource {
    fn wire(&self) -> (i8, String) {
        match self {
            ConfigResource::Topic(t) => (2, t.clone()),
            ConfigResource::Broker(b) => (4, b.0.to_string()),
        }
    }

    fn context(&self) -> Context {
        match self {
            ConfigResource::Topic(t) => Context::Topic(t.clone()),
            ConfigResource::Broker(b) => Context::Resource(b.to_string()),
        }
    }
}

/// Where a config value comes from (DescribeConfigs `config_source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigSource {
    /// Set on the topic.
    DynamicTopic,
    /// Set dynamically on this broker.
    DynamicBroker,
    /// Set dynamically as the default for all brokers.
    DynamicDefaultBroker,
    /// From the broker's `server.properties`. MM2 never copies these.
    StaticBroker,
    /// Kafka's built-in default.
    Default,
    /// Anything else, by its code.
    Other(i8),
}

impl ConfigSource {
    fn from_code(code: i8) -> Self {
        match code {
            1 => Self::DynamicTopic,
            2 => Self::DynamicBroker,
            3 => Self::DynamicDefaultBroker,
            4 => Self::StaticBroker,
            5 => Self::Default,
            other => Self::Other(other),
        }
    }
}

/// One config entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// Key.
    pub name: String,
    /// Value; `None` when sensitive or unset.
    pub value: Option<String>,
    /// Where it comes from.
    pub source: ConfigSource,
    /// Read-only.
    pub read_only: bool,
    /// Sensitive (the broker hides the value).
    pub sensitive: bool,
}

impl ConfigEntry {
    /// Whether the value is the default (not set on the resource itself).
    pub fn is_default(&self) -> bool {
        matches!(
            self.source,
            ConfigSource::Default | ConfigSource::StaticBroker
        )
    }
}

/// An IncrementalAlterConfigs operation (KIP-339).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlterConfigOp {
    /// Set a value.
    Set(String, String),
    /// Remove the value, so the default applies.
    Delete(String),
    /// Append to a list value.
    Append(String, String),
    /// Remove from a list value.
    Subtract(String, String),
}

impl AlterConfigOp {
    fn wire(&self) -> AlterableConfig {
        let (key, op, value) = match self {
            AlterConfigOp::Set(k, v) => (k, 0, Some(v)),
            AlterConfigOp::Delete(k) => (k, 1, None),
            AlterConfigOp::Append(k, v) => (k, 2, Some(v)),
            AlterConfigOp::Subtract(k, v) => (k, 3, Some(v)),
        };
        AlterableConfig::default()
            .with_name(name(key))
            .with_config_operation(op)
            .with_value(value.map(|v| name(v)))
    }
}

/// Which offset ListOffsets should find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset.
    Earliest,
    /// The log end offset (high watermark, or last stable offset under read_committed).
    Latest,
    /// The first offset whose timestamp is at or after this time (ms since the epoch).
    Timestamp(i64),
}

impl OffsetSpec {
    fn wire(self) -> i64 {
        match self {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
            OffsetSpec::Timestamp(t) => t,
        }
    }
}

/// Transaction isolation for reads (Fetch and ListOffsets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationLevel {
    /// See everything up to the high watermark, including open and aborted transactions.
    ReadUncommitted,
    /// See only up to the last stable offset (strait's default, as MM2's with EOS).
    #[default]
    ReadCommitted,
}

impl IsolationLevel {
    pub(crate) fn wire(self) -> i8 {
        match self {
            IsolationLevel::ReadUncommitted => 0,
            IsolationLevel::ReadCommitted => 1,
        }
    }
}

/// A ListOffsets answer for one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListedOffset {
    /// The offset; -1 when no record matches a timestamp query.
    pub offset: i64,
    /// The record's timestamp, -1 if not applicable.
    pub timestamp: i64,
    /// The leader epoch, -1 if unknown.
    pub leader_epoch: i32,
}

/// The cluster as DescribeCluster (or Metadata) reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterDescription {
    /// Cluster id.
    pub cluster_id: String,
    /// Controller, if reported.
    pub controller: Option<BrokerId>,
    /// Brokers.
    pub brokers: Vec<BrokerInfo>,
}

macro_rules! code_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $variant:ident = $code:literal),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum $name {
            $($(#[$vm])* $variant,)*
            /// A code this version of strait does not know.
            Other(i8),
        }
        impl $name {
            /// The wire code.
            pub fn code(self) -> i8 {
                match self { $(Self::$variant => $code,)* Self::Other(c) => c }
            }
            /// From the wire code.
            pub fn from_code(code: i8) -> Self {
                match code { $($code => Self::$variant,)* c => Self::Other(c) }
            }
        }
    };
}

code_enum!(
    /// What an ACL protects.
    AclResourceType {
        /// Any (filters only).
        Any = 1,
        /// A topic.
        Topic = 2,
        /// A consumer group.
        Group = 3,
        /// The cluster.
        Cluster = 4,
        /// A transactional id.
        TransactionalId = 5,
        /// A delegation token.
        DelegationToken = 6,
        /// A user.
        User = 7,
    }
);

code_enum!(
    /// How an ACL's resource name matches.
    AclPatternType {
        /// Any (filters only).
        Any = 1,
        /// Literal or prefixed that matches (filters only).
        Match = 2,
        /// The exact name.
        Literal = 3,
        /// Names starting with it.
        Prefixed = 4,
    }
);

code_enum!(
    /// The operation an ACL allows or denies.
    AclOperation {
        /// Any (filters only).
        Any = 1,
        /// All operations.
        All = 2,
        /// Read.
        Read = 3,
        /// Write.
        Write = 4,
        /// Create.
        Create = 5,
        /// Delete.
        Delete = 6,
        /// Alter.
        Alter = 7,
        /// Describe.
        Describe = 8,
        /// Cluster action.
        ClusterAction = 9,
        /// Describe configs.
        DescribeConfigs = 10,
        /// Alter configs.
        AlterConfigs = 11,
        /// Idempotent write.
        IdempotentWrite = 12,
    }
);

code_enum!(
    /// Allow or deny.
    AclPermission {
        /// Any (filters only).
        Any = 1,
        /// Deny.
        Deny = 2,
        /// Allow.
        Allow = 3,
    }
);

/// One ACL.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AclBinding {
    /// Resource type.
    pub resource_type: AclResourceType,
    /// Resource name.
    pub resource_name: String,
    /// Pattern type.
    pub pattern_type: AclPatternType,
    /// Principal, e.g. `User:alice`.
    pub principal: String,
    /// Host, `*` for any.
    pub host: String,
    /// Operation.
    pub operation: AclOperation,
    /// Allow or deny.
    pub permission: AclPermission,
}

/// A filter for DescribeAcls; `None` fields match anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFilter {
    /// Resource type (`Any` for all).
    pub resource_type: AclResourceType,
    /// Resource name.
    pub resource_name: Option<String>,
    /// Pattern type (`Any` for all).
    pub pattern_type: AclPatternType,
    /// Principal.
    pub principal: Option<String>,
    /// Host.
    pub host: Option<String>,
    /// Operation (`Any` for all).
    pub operation: AclOperation,
    /// Permission (`Any` for all).
    pub permission: AclPermission,
}

impl AclFilter {
    /// Every ACL on resources of this type (MM2 lists `TOPIC` ACLs of any pattern).
    pub fn all_of(resource_type: AclResourceType) -> Self {
        Self {
            resource_type,
            resource_name: None,
            pattern_type: AclPatternType::Any,
            principal: None,
            host: None,
            operation: AclOperation::Any,
            permission: AclPermission::Any,
        }
    }
}

impl Client {
    /// Sends to the controller when metadata names one, else to any broker.
    async fn send_admin<R>(&self, request: &R) -> Result<R::Response>
    where
        R: Request + Sync,
        R::Response: ThrottleTime,
    {
        match self.cached_metadata().controller {
            Some(controller) => self.send_to(controller, request).await,
            None => self.send_any(request).await,
        }
    }

    /// Creates topics; one result per topic, in order. A topic that exists gives
    /// `TOPIC_ALREADY_EXISTS`.
    pub async fn create_topics(&self, topics: &[NewTopic]) -> Result<Vec<(String, Result<()>)>> {
        self.create_topics_as(topics, false).await
    }

    /// Asks whether the cluster would create `topic` as given (CreateTopics with
    /// `validate_only`): nothing is created; the answer is the error a create would give.
    pub async fn validate_topic(&self, topic: NewTopic) -> Result<()> {
        let mut results = self
            .create_topics_as(std::slice::from_ref(&topic), true)
            .await?;
        results.pop().map_or(Ok(()), |(_, r)| r)
    }

    async fn create_topics_as(
        &self,
        topics: &[NewTopic],
        validate_only: bool,
    ) -> Result<Vec<(String, Result<()>)>> {
        let request = CreateTopicsRequest::default()
            .with_validate_only(validate_only)
            .with_timeout_ms(ADMIN_TIMEOUT.as_millis() as i32)
            .with_topics(
                topics
                    .iter()
                    .map(|t| {
                        CreatableTopic::default()
                            .with_name(topic_name(&t.name))
                            .with_num_partitions(t.partitions)
                            .with_replication_factor(t.replication_factor)
                            .with_configs(
                                t.configs
                                    .iter()
                                    .map(|(k, v)| {
                                        CreatableTopicConfig::default()
                                            .with_name(name(k))
                                            .with_value(Some(name(v)))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let resp = self
            .retry("create topics", || self.send_admin(&request))
            .await?;
        let mut by_name: BTreeMap<String, Result<()>> = resp
            .topics
            .into_iter()
            .map(|r| {
                let topic = r.name.0.to_string();
                let result = check(r.error_code, r.error_message.as_ref(), || {
                    Context::Topic(topic.clone())
                });
                (topic, result)
            })
            .collect();
        let results = topics
            .iter()
            .map(|t| {
                let result = by_name.remove(&t.name).unwrap_or_else(|| {
                    Err(Error::Unexpected {
                        broker: "cluster".into(),
                        what: format!("CreateTopics answer does not mention {}", t.name),
                    })
                });
                (t.name.clone(), result)
            })
            .collect();
        if !validate_only {
            self.refresh_metadata().await?;
        }
        Ok(results)
    }

    /// Creates one topic; an error if it fails (including when it exists).
    pub async fn create_topic(&self, topic: NewTopic) -> Result<()> {
        let mut results = self.create_topics(std::slice::from_ref(&topic)).await?;
        results.pop().map_or(Ok(()), |(_, r)| r)
    }

    /// Deletes topics by name; one result per topic, in order.
    pub async fn delete_topics(&self, topics: &[&str]) -> Result<Vec<(String, Result<()>)>> {
        let request = DeleteTopicsRequest::default()
            .with_timeout_ms(ADMIN_TIMEOUT.as_millis() as i32)
            .with_topic_names(topics.iter().map(|t| topic_name(t)).collect())
            .with_topics(
                topics
                    .iter()
                    .map(|t| {
                        kafka_protocol::messages::delete_topics_request::DeleteTopicState::default()
                            .with_name(Some(topic_name(t)))
                    })
                    .collect(),
            );
        let resp = self
            .retry("delete topics", || self.send_admin(&request))
            .await?;
        let mut by_name: BTreeMap<String, Result<()>> = resp
            .responses
            .into_iter()
            .filter_map(|r| {
                let topic = r.name?.0.to_string();
                let result = check(r.error_code, r.error_message.as_ref(), || {
                    Context::Topic(topic.clone())
                });
                Some((topic, result))
            })
            .collect();
        let results = topics
            .iter()
            .map(|t| {
                let result = by_name.remove(*t).unwrap_or_else(|| {
                    Err(Error::Unexpected {
                        broker: "cluster".into(),
                        what: format!("DeleteTopics answer does not mention {t}"),
                    })
                });
                ((*t).to_owned(), result)
            })
            .collect();
        self.refresh_metadata().await?;
        Ok(results)
    }

    /// The configs of a resource, every key the broker reports. Some brokers report only
    /// keys set on the resource.
    pub async fn describe_configs(&self, resource: &ConfigResource) -> Result<Vec<ConfigEntry>> {
        let (rtype, rname) = resource.wire();
        let request = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(rtype)
                .with_resource_name(name(&rname))
                .with_configuration_keys(None),
        ]);
        let resp = self
            .retry("describe configs", || async {
                match resource {
                    ConfigResource::Broker(b) => self.send_to(*b, &request).await,
                    ConfigResource::Topic(_) => self.send_any(&request).await,
                }
            })
            .await?;
        let result = resp
            .results
            .into_iter()
            .find(|r| r.resource_type == rtype && r.resource_name.as_str() == rname)
            .ok_or_else(|| Error::Unexpected {
                broker: "cluster".into(),
                what: format!("DescribeConfigs answer does not mention {rname}"),
            })?;
        check(result.error_code, result.error_message.as_ref(), || {
            resource.context()
        })?;
        Ok(result
            .configs
            .into_iter()
            .map(|c| ConfigEntry {
                name: c.name.to_string(),
                value: c.value.map(|v| v.to_string()),
                source: ConfigSource::from_code(c.config_source),
                read_only: c.read_only,
                sensitive: c.is_sensitive,
            })
            .collect())
    }

    /// Changes configs key by key (IncrementalAlterConfigs, KIP-339; MM2 uses it since 3.5).
    pub async fn incremental_alter_configs(
        &self,
        resource: &ConfigResource,
        ops: &[AlterConfigOp],
    ) -> Result<()> {
        let (rtype, rname) = resource.wire();
        let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(rtype)
                .with_resource_name(name(&rname))
                .with_configs(ops.iter().map(AlterConfigOp::wire).collect()),
        ]);
        let resp = self
            .retry("alter configs", || async {
                match resource {
                    ConfigResource::Broker(b) => self.send_to(*b, &request).await,
                    ConfigResource::Topic(_) => self.send_admin(&request).await,
                }
            })
            .await?;
        for r in resp.responses {
            check(r.error_code, r.error_message.as_ref(), || {
                resource.context()
            })?;
        }
        Ok(())
    }

    /// Grows a topic to `total` partitions (partitions can never shrink).
    pub async fn create_partitions(&self, topic: &str, total: i32) -> Result<()> {
        let request = CreatePartitionsRequest::default()
            .with_timeout_ms(ADMIN_TIMEOUT.as_millis() as i32)
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(topic_name(topic))
                .with_count(total)
                .with_assignments(None)]);
        let resp = self
            .retry("create partitions", || self.send_admin(&request))
            .await?;
        for r in resp.results {
            check(r.error_code, r.error_message.as_ref(), || {
                Context::Topic(topic.to_owned())
            })?;
        }
        self.refresh_metadata().await?;
        Ok(())
    }

    /// ListOffsets for several partitions: one request per leader naming all of its
    /// partitions, the leaders asked concurrently, so that placing thousands of partitions
    /// across a distance costs one round trip rather than one per partition. One result per
    /// partition. The partitions that err in a way time can fix (a leader moved or not elected
    /// yet, a partition the broker is still creating, a request that failed as a whole) are
    /// asked again together, after one metadata refresh and a backoff, until the client's
    /// operation timeout; then each gets its last error. Never one request per partition: a
    /// flow of 10,000 new partitions asked them one by one, with a metadata refresh each.
    ///
    /// A partition must appear once: Kafka refuses a ListOffsets request naming one twice.
    pub async fn list_offsets(
        &self,
        partitions: &[(TopicPartition, OffsetSpec)],
        isolation: IsolationLevel,
    ) -> Result<BTreeMap<TopicPartition, Result<ListedOffset>>> {
        self.list_offsets_within(partitions, isolation, self.config().operation_timeout)
            .await
    }

    /// [`list_offsets`](Client::list_offsets), asking the failed partitions again for at most
    /// `patience` (capped by the operation timeout) rather than the whole operation timeout: for
    /// a caller that does something else with a partition that is not answering (a flow places
    /// the others and tries that one again later), where one partition without a leader must
    /// not hold all of them back for a minute.
    pub async fn list_offsets_within(
        &self,
        partitions: &[(TopicPartition, OffsetSpec)],
        isolation: IsolationLevel,
        patience: Duration,
    ) -> Result<BTreeMap<TopicPartition, Result<ListedOffset>>> {
        let config = self.config();
        let deadline = tokio::time::Instant::now() + patience.min(config.operation_timeout);
        let mut backoff =
            crate::backoff::Backoff::new(config.retry_backoff, config.retry_backoff_max);
        let mut out = BTreeMap::new();
        let mut asked = partitions.to_vec();
        let cached = self.cached_metadata();
        if asked.iter().any(|(tp, _)| cached.leader(tp).is_none()) {
            self.refresh_metadata().await?;
        }
        loop {
            let failed = self.list_offsets_once(&asked, isolation, &mut out).await;
            if failed.is_empty() {
                return Ok(out);
            }
            if tokio::time::Instant::now() >= deadline {
                for (tp, _, e) in failed {
                    out.insert(tp, Err(e));
                }
                return Ok(out);
            }
            let wait = backoff.next_wait();
            tracing::debug!(partitions = failed.len(), retry_in = ?wait, "ListOffsets: asking again the partitions that failed");
            if let Err(e) = self.refresh_metadata().await {
                tracing::debug!(error = %e, "metadata refresh after ListOffsets errors failed");
            }
            tokio::time::sleep(
                wait.min(deadline.saturating_duration_since(tokio::time::Instant::now())),
            )
            .await;
            asked = failed.into_iter().map(|(tp, spec, _)| (tp, spec)).collect();
        }
    }

    /// One pass of [`list_offsets`](Client::list_offsets): every partition whose leader the
    /// cached metadata knows, one request per leader. Answers and lasting errors go to `out`;
    /// returns the partitions to ask again, with why.
    async fn list_offsets_once(
        &self,
        partitions: &[(TopicPartition, OffsetSpec)],
        isolation: IsolationLevel,
        out: &mut BTreeMap<TopicPartition, Result<ListedOffset>>,
    ) -> Vec<(TopicPartition, OffsetSpec, Error)> {
        let metadata = self.cached_metadata();
        let mut by_leader: BTreeMap<BrokerId, Vec<(TopicPartition, OffsetSpec)>> = BTreeMap::new();
        let mut failed = Vec::new();
        for (tp, spec) in partitions {
            match metadata.leader(tp) {
                Some(leader) => by_leader
                    .entry(leader)
                    .or_default()
                    .push((tp.clone(), *spec)),
                None => {
                    let e = if metadata
                        .topics
                        .get(&tp.topic)
                        .is_some_and(|t| t.partitions.contains_key(&tp.partition))
                    {
                        Error::broker(
                            kafka_protocol::error::ResponseError::LeaderNotAvailable,
                            None,
                            tp.context(),
                        )
                    } else {
                        Error::UnknownTopicOrPartition {
                            context: tp.context(),
                        }
                    };
                    failed.push((tp.clone(), *spec, e));
                }
            }
        }
        let requests = by_leader.into_iter().map(|(leader, ps)| async move {
            let result = self.list_offsets_from(leader, &ps, isolation).await;
            (leader, ps, result)
        });
        for (leader, ps, result) in futures::future::join_all(requests).await {
            match result {
                Ok(mut listed) => {
                    for (tp, spec) in ps {
                        match listed.remove(&tp) {
                            Some(Err(e)) if e.is_retriable() => failed.push((tp, spec, e)),
                            Some(answer) => {
                                out.insert(tp, answer);
                            }
                            None => {
                                let e = Error::Unexpected {
                                    broker: leader.to_string(),
                                    what: format!("ListOffsets answer does not mention {tp}"),
                                };
                                failed.push((tp, spec, e));
                            }
                        }
                    }
                }
                Err(e) if e.is_retriable() => {
                    tracing::debug!(error = %e, "ListOffsets failed; its partitions are asked again");
                    failed.extend(ps.into_iter().map(|(tp, spec)| (tp, spec, e.clone())));
                }
                Err(e) => {
                    for (tp, _) in ps {
                        out.insert(tp, Err(e.clone()));
                    }
                }
            }
        }
        failed
    }

    /// One ListOffsets request to `leader` for all of `partitions`; a result per partition
    /// it answered for.
    async fn list_offsets_from(
        &self,
        leader: BrokerId,
        partitions: &[(TopicPartition, OffsetSpec)],
        isolation: IsolationLevel,
    ) -> Result<BTreeMap<TopicPartition, Result<ListedOffset>>> {
        let mut by_topic: BTreeMap<&str, Vec<ListOffsetsPartition>> = BTreeMap::new();
        for (tp, spec) in partitions {
            by_topic.entry(&tp.topic).or_default().push(
                ListOffsetsPartition::default()
                    .with_partition_index(tp.partition)
                    .with_current_leader_epoch(-1)
                    .with_timestamp(spec.wire()),
            );
        }
        let request = ListOffsetsRequest::default()
            .with_replica_id(WireBrokerId(-1))
            .with_isolation_level(isolation.wire())
            .with_topics(
                by_topic
                    .into_iter()
                    .map(|(topic, ps)| {
                        ListOffsetsTopic::default()
                            .with_name(topic_name(topic))
                            .with_partitions(ps)
                    })
                    .collect(),
            );
        let resp = self.send_to(leader, &request).await?;
        let mut out = BTreeMap::new();
        for t in resp.topics {
            for p in t.partitions {
                let tp = TopicPartition::new(t.name.0.as_str(), p.partition_index);
                let result = check(p.error_code, None, || tp.context()).map(|()| ListedOffset {
                    offset: p.offset,
                    timestamp: p.timestamp,
                    leader_epoch: p.leader_epoch,
                });
                out.insert(tp, result);
            }
        }
        Ok(out)
    }

    /// ListOffsets for one partition.
    pub async fn list_offset(
        &self,
        tp: &TopicPartition,
        spec: OffsetSpec,
        isolation: IsolationLevel,
    ) -> Result<ListedOffset> {
        self.retry("list offsets", || {
            self.list_offset_once(tp, spec, isolation)
        })
        .await
    }

    async fn list_offset_once(
        &self,
        tp: &TopicPartition,
        spec: OffsetSpec,
        isolation: IsolationLevel,
    ) -> Result<ListedOffset> {
        let leader = self.leader(tp).await?;
        self.list_offsets_from(leader, &[(tp.clone(), spec)], isolation)
            .await?
            .remove(tp)
            .unwrap_or_else(|| {
                Err(Error::Unexpected {
                    broker: leader.to_string(),
                    what: format!("ListOffsets answer does not mention {tp}"),
                })
            })
    }

    /// The cluster's id, controller and brokers (DescribeCluster, KIP-700; from Metadata when
    /// the broker does not offer it).
    pub async fn describe_cluster(&self) -> Result<ClusterDescription> {
        let conn = self.any_connection().await?;
        if !conn
            .versions()
            .offers(kafka_protocol::messages::ApiKey::DescribeCluster)
        {
            let m = self.refresh_metadata().await?;
            return Ok(ClusterDescription {
                cluster_id: m.cluster_id.clone().unwrap_or_default(),
                controller: m.controller,
                brokers: m.brokers.values().cloned().collect(),
            });
        }
        let resp = self
            .retry("describe cluster", || async {
                let resp = self.send_any(&DescribeClusterRequest::default()).await?;
                check(resp.error_code, resp.error_message.as_ref(), || {
                    Context::None
                })?;
                Ok(resp)
            })
            .await?;
        Ok(ClusterDescription {
            cluster_id: resp.cluster_id.to_string(),
            controller: (resp.controller_id.0 >= 0).then_some(BrokerId(resp.controller_id.0)),
            brokers: resp
                .brokers
                .into_iter()
                .map(|b| BrokerInfo {
                    id: BrokerId(b.broker_id.0),
                    host: b.host.to_string(),
                    port: b.port,
                    rack: b.rack.map(|r| r.to_string()),
                })
                .collect(),
        })
    }

    /// ACLs matching a filter. A cluster without an authorizer answers SECURITY_DISABLED,
    /// returned as that broker error.
    pub async fn describe_acls(&self, filter: &AclFilter) -> Result<Vec<AclBinding>> {
        let request = DescribeAclsRequest::default()
            .with_resource_type_filter(filter.resource_type.code())
            .with_resource_name_filter(filter.resource_name.as_deref().map(name))
            .with_pattern_type_filter(filter.pattern_type.code())
            .with_principal_filter(filter.principal.as_deref().map(name))
            .with_host_filter(filter.host.as_deref().map(name))
            .with_operation(filter.operation.code())
            .with_permission_type(filter.permission.code());
        let resp = self
            .retry("describe acls", || async {
                let resp = self.send_any(&request).await?;
                check(resp.error_code, resp.error_message.as_ref(), || {
                    Context::None
                })?;
                Ok(resp)
            })
            .await?;
        let mut out = Vec::new();
        for r in resp.resources {
            for acl in r.acls {
                out.push(AclBinding {
                    resource_type: AclResourceType::from_code(r.resource_type),
                    resource_name: r.resource_name.to_string(),
                    pattern_type: AclPatternType::from_code(r.pattern_type),
                    principal: acl.principal.to_string(),
                    host: acl.host.to_string(),
                    operation: AclOperation::from_code(acl.operation),
                    permission: AclPermission::from_code(acl.permission_type),
                });
            }
        }
        Ok(out)
    }

    /// Creates ACLs; one result per binding, in order.
    pub async fn create_acls(&self, acls: &[AclBinding]) -> Result<Vec<Result<()>>> {
        let request = CreateAclsRequest::default().with_creations(
            acls.iter()
                .map(|a| {
                    AclCreation::default()
                        .with_resource_type(a.resource_type.code())
                        .with_resource_name(name(&a.resource_name))
                        .with_resource_pattern_type(a.pattern_type.code())
                        .with_principal(name(&a.principal))
                        .with_host(name(&a.host))
                        .with_operation(a.operation.code())
                        .with_permission_type(a.permission.code())
                })
                .collect(),
        );
        let resp = self
            .retry("create acls", || self.send_any(&request))
            .await?;
        if resp.results.len() != acls.len() {
            return Err(Error::Unexpected {
                broker: "cluster".into(),
                what: format!(
                    "CreateAcls answered {} results for {} ACLs",
                    resp.results.len(),
                    acls.len()
                ),
            });
        }
        Ok(resp
            .results
            .into_iter()
            .zip(acls)
            .map(|(r, a)| {
                check(r.error_code, r.error_message.as_ref(), || {
                    Context::Resource(format!("ACL on {}", a.resource_name))
                })
            })
            .collect())
    }

    /// Deletes records before `offset` (moves the log start offset); returns the new low
    /// watermark.
    pub async fn delete_records(&self, tp: &TopicPartition, offset: i64) -> Result<i64> {
        self.retry("delete records", || async {
            let leader = self.leader(tp).await?;
            let request = DeleteRecordsRequest::default()
                .with_timeout_ms(ADMIN_TIMEOUT.as_millis() as i32)
                .with_topics(vec![DeleteRecordsTopic::default()
                    .with_name(topic_name(&tp.topic))
                    .with_partitions(vec![DeleteRecordsPartition::default()
                        .with_partition_index(tp.partition)
                        .with_offset(offset)])]);
            let resp = self.send_to(leader, &request).await?;
            let p = resp
                .topics
                .into_iter()
                .filter(|t| t.name.0.as_str() == tp.topic)
                .flat_map(|t| t.partitions)
                .find(|p| p.partition_index == tp.partition)
                .ok_or_else(|| Error::Unexpected {
                    broker: leader.to_string(),
                    what: format!("DeleteRecords answer does not mention {tp}"),
                })?;
            check(p.error_code, None, || tp.context())?;
            Ok(p.low_watermark)
        })
        .await
    }
}
