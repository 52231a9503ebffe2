//! The typed config: clusters, flows and heartbeat emitters, as read from an MM2 file.

use std::borrow::Borrow;
use std::fmt;
use std::time::Duration;

use strait_kafka::admin::IsolationLevel;

use super::client::ClientSettings;
use crate::filter::{GroupFilter, PatternList, TopicFilter};
use crate::policy::ReplicationPolicy;

/// Where a partition that was never mirrored starts (`consumer.auto.offset.reset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StartPosition {
    /// The source's log start: everything the source still has (MM2's default).
    #[default]
    Earliest,
    /// The source's end: only what is written from now on.
    Latest,
}

/// A cluster's alias, as listed in `clusters` (`A`, `us-west`). Also the name a flow uses for
/// a cluster in remote topic names, heartbeats and checkpoints.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterAlias(String);

impl ClusterAlias {
    /// Wraps an alias. The config checks aliases it reads: non-empty, only `[A-Za-z0-9._-]`.
    pub fn new(alias: impl Into<String>) -> Self {
        Self(alias.into())
    }

    /// The alias.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ClusterAlias {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Borrow<str> for ClusterAlias {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for ClusterAlias {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// One cluster of `clusters`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// Its alias.
    pub alias: ClusterAlias,
    /// `A.bootstrap.servers` (or, as in MM2, a top-level `bootstrap.servers`): `host:port`
    /// entries, any `scheme://` prefix removed.
    pub bootstrap_servers: Vec<String>,
    /// Its clients' settings (`A.security.protocol`, `A.ssl.*`, `A.sasl.*`, `A.consumer.*`,
    /// `A.producer.*`, `A.admin.*` and top-level connection keys); see [`super::client`].
    pub client: ClientSettings,
}

/// Where the offset-syncs topic lives (`offset-syncs.topic.location`, KIP-716).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OffsetSyncsLocation {
    /// On the source cluster, named after the target alias (MM2's default).
    #[default]
    Source,
    /// On the target cluster, named after the source alias.
    Target,
}

/// Whose defaults a synced topic config falls back to (`use.defaults.from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UseDefaultsFrom {
    /// A property at its default on the source is deleted on the target (MM2's default).
    #[default]
    Target,
    /// The source's default values are copied too.
    Source,
}

/// One enabled flow `source->target`, every setting resolved: `source->target.<key>` over
/// top-level `<key>` over MM2's default.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowConfig {
    /// The cluster records are read from.
    pub source: ClusterAlias,
    /// The cluster records are written to.
    pub target: ClusterAlias,
    /// The source's name in topic names, heartbeats and checkpoints: `source.cluster.alias`,
    /// default the source cluster's alias.
    pub source_alias: ClusterAlias,
    /// The target's name in the same places: `target.cluster.alias`, default the target
    /// cluster's alias.
    pub target_alias: ClusterAlias,
    /// `topics` (default `.*`) and `topics.exclude` (default `mm2.*\.internal, .*\.replica,
    /// __.*`, Kafka 4's; legacy `topics.blacklist`).
    pub topics: TopicFilter,
    /// `groups` (default `.*`) and `groups.exclude` (default `console-consumer-.*, connect-.*,
    /// __.*`; legacy `groups.blacklist`).
    pub groups: GroupFilter,
    /// `replication.policy.class` (Default or Identity), `replication.policy.separator`
    /// (default `.`) and `replication.policy.internal.topic.separator.enabled` (default true).
    pub policy: ReplicationPolicy,
    /// `replication.factor` of remote topics strait creates (default 2; -1: the broker's).
    pub replication_factor: i16,
    /// `offset-syncs.topic.replication.factor` (default 3).
    pub offset_syncs_topic_replication_factor: i16,
    /// `checkpoints.topic.replication.factor` (default 3).
    pub checkpoints_topic_replication_factor: i16,
    /// `offset-syncs.topic.location` (default source).
    pub offset_syncs_location: OffsetSyncsLocation,
    /// `emit.offset-syncs.enabled` (default true): write MM2's offset-syncs topic.
    pub emit_offset_syncs: bool,
    /// `offset.lag.max` (default 100 records): how far the target may run past the last offset
    /// sync before another is written.
    pub offset_lag_max: u64,
    /// `refresh.topics.enabled` / `.interval.seconds` (true / 600 s): look for new topics and
    /// partitions; `None` when disabled.
    pub refresh_topics: Option<Duration>,
    /// `refresh.groups.enabled` / `.interval.seconds` (true / 600 s): look for new groups.
    pub refresh_groups: Option<Duration>,
    /// `sync.topic.configs.enabled` / `.interval.seconds` (true / 600 s).
    pub sync_topic_configs: Option<Duration>,
    /// `sync.topic.acls.enabled` / `.interval.seconds` (true / 600 s).
    pub sync_topic_acls: Option<Duration>,
    /// `emit.checkpoints.enabled` / `.interval.seconds` (true / 60 s).
    pub emit_checkpoints: Option<Duration>,
    /// `strait.checkpoints.capture.interval.ms` (strait only; default 1 000 ms, `None` when
    /// 0): how often the checkpoint task reads the source groups' positions and writes the
    /// checkpoints that changed; `emit_checkpoints` stays the longest a change waits. MM2
    /// reads them only at `emit.checkpoints.interval.seconds`.
    pub checkpoints_capture: Option<Duration>,
    /// `sync.group.offsets.enabled` / `.interval.seconds` (**false** / 60 s).
    pub sync_group_offsets: Option<Duration>,
    /// `heartbeats.replication.enabled` (default true): mirror heartbeats topics even when
    /// `topics` leaves them out.
    pub heartbeats_replication: bool,
    /// `config.properties.exclude` (legacy `config.properties.blacklist`): topic configs never
    /// synced. Default: the throttled-replica lists, `message.timestamp.difference.max.ms`,
    /// `message.timestamp.type`, `unclean.leader.election.enable`, `min.insync.replicas`.
    pub config_properties_exclude: PatternList,
    /// `use.defaults.from` (default target).
    pub use_defaults_from: UseDefaultsFrom,
    /// `admin.timeout.ms` (default 60 000 ms): how long an admin operation may take.
    pub admin_timeout: Duration,
    /// `strait.max.bytes.in.flight` (strait only; default 64 MiB, in bytes): fetched but not yet
    /// acknowledged bytes of this flow, whatever the topic and partition count. MM2 has no
    /// equivalent (its bound is the consumer's and producer's buffers).
    pub max_bytes_in_flight: u64,
    /// `strait.isolation.level` (strait only; `read_committed` (default) or
    /// `read_uncommitted`). When unset, the source consumer's `isolation.level` (e.g.
    /// `A.consumer.isolation.level`) is honoured. MM2 reads uncommitted unless told otherwise;
    /// strait does not mirror aborted transactions unless told to.
    pub isolation_level: IsolationLevel,
    /// `strait.batch.merge` and `strait.batch.merge.max.bytes` (strait only; `auto`, 1,000,000 bytes):
    /// when the target producer merges a partition's consecutive source batches into one
    /// (`docs/design.md` §3.2). MM2's producer always builds its own batches.
    pub batch_merge: strait_kafka::produce::Merge,
    /// `strait.sync.topic.deletions.enabled` (strait only; default false): when a source topic
    /// this flow mirrored is deleted (absent from the source's metadata at two refreshes in a
    /// row), delete its remote topic on the target and forget its partitions, so a topic made
    /// again under that name is mirrored afresh. MM2 never deletes a remote topic; off, neither
    /// does strait (`docs/mirroring.md`, "Source topics deleted").
    pub sync_topic_deletions: bool,
    /// `tasks.max` (default 1): the flow's units of work when workers run it.
    pub tasks_max: u32,
    /// `strait.workers.*`: the group of workers that runs the flow's units; `None` when
    /// `strait.workers.enabled = false` (one process mirrors every partition, and a second
    /// one with the same file would mirror them again).
    pub workers: Option<WorkersConfig>,
    /// Where a partition never mirrored starts: the source consumer's `auto.offset.reset`
    /// (`A.consumer.auto.offset.reset` or `A->B.consumer.auto.offset.reset`), `earliest` by
    /// default as MM2 sets it; `latest` starts at the source's end.
    pub auto_offset_reset: StartPosition,
    /// `source->target.consumer.*`, `.producer.*`, `.admin.*`: this flow's client settings, under
    /// the clusters' own (see [`super::StraitConfig::client_props`]).
    pub client_overrides: ClientSettings,
}

/// The workers' group of a flow (`docs/design.md` §7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkersConfig {
    /// `strait.workers.group.id`, default `strait-<source>-<target>`: the group on the target
    /// cluster, and the prefix of the units' transactional ids.
    pub group_id: String,
    /// `strait.workers.session.timeout.ms` (default 10 s).
    pub session_timeout: Duration,
    /// `strait.workers.group.instance.id`: this worker as a static member (KIP-345).
    pub instance_id: Option<String>,
    /// `exactly.once.source.support = enabled` (for the flow, its target cluster, or the whole
    /// file): each unit commits a round's data and map records in one transaction through a
    /// transactional id its next owner fences. Otherwise the units write as a single process
    /// does (idempotent, no transaction markers), fenced by their worker's lease and the
    /// group's hand-over (`docs/design.md` §7.3).
    pub exactly_once: bool,
}

impl FlowConfig {
    /// `source->target`, for logs.
    pub fn name(&self) -> String {
        format!("{}->{}", self.source, self.target)
    }

    /// A digest of the settings that decide which partitions each of the flow's units writes,
    /// where and how: the members of a workers' group must share it before the group hands out
    /// any unit (`scale/worker.rs`). The unit count (`tasks.max`) is compared on its own.
    pub fn workers_fingerprint(&self) -> String {
        let settings = format!(
            "{}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{}",
            self.name(),
            self.source_alias,
            self.target_alias,
            self.policy,
            self.topics,
            self.isolation_level,
            self.workers.as_ref().map(|w| (&w.group_id, w.exactly_once)),
            self.offset_syncs_location,
            self.sync_topic_deletions,
        );
        format!("{:08x}", crc32c::crc32c(settings.as_bytes()))
    }

    /// The name on the target of source topic `topic`.
    pub fn remote_topic(&self, topic: &str) -> String {
        self.policy
            .format_remote_topic(self.source_alias.as_str(), topic)
    }

    /// Whether this flow mirrors source topic `topic`, as `MirrorSourceConnector
    /// .shouldReplicateTopic`: it passes the filter (or is a heartbeats topic and
    /// `heartbeats.replication.enabled`), is not internal, would not loop
    /// ([`crate::policy::ReplicationPolicy::is_cycle`]), and its remote name reads back as one
    /// ([`crate::policy::ReplicationPolicy::traces`]).
    pub fn should_replicate_topic(&self, topic: &str) -> bool {
        (self.topics.should_replicate_topic(topic)
            || (self.heartbeats_replication && self.policy.is_heartbeats_topic(topic)))
            && !self.policy.is_internal_topic(topic)
            && !self.policy.is_cycle(
                topic,
                self.source_alias.as_str(),
                self.target_alias.as_str(),
            )
            && self.policy.traces(self.source_alias.as_str(), topic)
    }

    /// Whether this flow checkpoints consumer group `group`.
    pub fn should_replicate_group(&self, group: &str) -> bool {
        self.groups.should_replicate_group(group)
    }

    /// Whether topic config `property` may be copied to remote topics (MM2 also skips read-only,
    /// sensitive and static-broker properties; that is the syncing code's test).
    pub fn should_replicate_config_property(&self, property: &str) -> bool {
        !self.config_properties_exclude.matches(property)
    }

    /// The offset-syncs topic's name, and the side it lives on (`offset-syncs.topic.location`).
    pub fn offset_syncs_topic(&self) -> (String, crate::config::Side) {
        match self.offset_syncs_location {
            OffsetSyncsLocation::Source => (
                self.policy.offset_syncs_topic(self.target_alias.as_str()),
                crate::config::Side::Source,
            ),
            OffsetSyncsLocation::Target => (
                self.policy.offset_syncs_topic(self.source_alias.as_str()),
                crate::config::Side::Target,
            ),
        }
    }

    /// The checkpoints topic on the target: `<source alias>.checkpoints.internal`.
    pub fn checkpoints_topic(&self) -> String {
        self.policy.checkpoints_topic(self.source_alias.as_str())
    }
}

/// A heartbeat writer: every `interval`, a record keyed (`source_alias`, `target_alias`) goes
/// to the `heartbeats` topic of cluster `target`.
///
/// As in MM2, there is one for every ordered pair of declared clusters whose
/// `emit.heartbeats.enabled` resolves to true, **whether or not that pair's flow is enabled**:
/// for a flow A->B, the pair B->A writes `heartbeats` into A, which A->B then mirrors to B as
/// `A.heartbeats` (`docs/mm2-behaviour.md` §1.4, `MirrorMakerConfig.clusterPairs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatEmitter {
    /// The cluster written to.
    pub target: ClusterAlias,
    /// The pair's source name in the record key (`source.cluster.alias` of the pair).
    pub source_alias: ClusterAlias,
    /// The pair's target name in the record key (`target.cluster.alias` of the pair).
    pub target_alias: ClusterAlias,
    /// `emit.heartbeats.interval.seconds` (default 1 s).
    pub interval: Duration,
    /// `heartbeats.topic.replication.factor` (default 3), if strait creates the topic.
    pub topic_replication_factor: i16,
}
