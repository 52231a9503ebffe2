//! Every key strait knows, defined once: its name, where it is set, how its value is read, its
//! default, what strait does with it, and the sentence that documents it.
//!
//! The parser takes defaults and value checks from here ([`super::pair`], the client-key checks
//! of [`super::resolve`]), the warnings at start and `strait check` classify keys from here
//! ([`super::keys`]), and the key tables of `docs/configuration.md` are rendered from here and
//! compared by a test (`STRAIT_BLESS_DOCS=1 cargo test -p strait-core catalogue` rewrites them).

use crate::filter::{
    CONFIG_PROPERTIES_EXCLUDE_DEFAULT, GROUPS_DEFAULT, GROUPS_EXCLUDE_DEFAULT, TOPICS_DEFAULT,
    TOPICS_EXCLUDE_DEFAULT,
};
use crate::policy::DEFAULT_POLICY_CLASS;

/// Where a key is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Only at top level (`clusters`).
    Top,
    /// At top level or per flow (`S->T.<key>`; the flow's wins).
    Flow,
    /// A Kafka client key of a cluster or a flow, for one role (`A.consumer.<key>`,
    /// `S->T.consumer.<key>`), or for every role when `None`.
    Client(Option<Role>),
    /// A connection key (`security.protocol`, `ssl.*`, `sasl.*`): at top level, per cluster
    /// (`A.<key>`) or per client (`A.consumer.<key>`), as MM2 applies them
    /// (`docs/security.md`).
    Connection,
}

/// What strait does with a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Read, checked and acted on.
    Used,
    /// MM2's pre-3.0 name of another key (KIP-629): it works, with a warning.
    Deprecated {
        /// The current name.
        replacement: &'static str,
    },
    /// Valid in MM2, not used by strait: one warning at start, saying why.
    Unused {
        /// Why strait has no use for it.
        reason: &'static str,
    },
}

/// How a value is read. Every value is trimmed first, as Kafka's `ConfigDef` trims it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// `true` or `false`, any case.
    Bool,
    /// A whole number (a Java `long`) of at least `min`.
    Whole {
        /// The least value allowed.
        min: u64,
    },
    /// Whole seconds, at least 1.
    Seconds,
    /// Milliseconds, a whole number of 0 or more.
    Millis,
    /// A byte count from 1 to 2147483647 (the wire's int32).
    Bytes,
    /// `-1` (the broker's default) or 1 to 32767.
    ReplicationFactor,
    /// One of fixed words.
    Choice {
        /// The words.
        choices: &'static [&'static str],
        /// Whether case is ignored (MM2's `ValidString` does not; Kafka's client enums do).
        ignore_case: bool,
        /// The words, for messages: "`source` or `target`".
        text: &'static str,
    },
    /// Comma-separated Java regexes.
    Patterns,
    /// A Java class name; strait has only the default one.
    Class,
    /// A cluster alias.
    Alias,
    /// The replication policy's separator.
    Separator,
    /// A comma-separated list.
    List,
    /// Free text.
    Text,
    /// Whatever MM2 accepts (the key is not used).
    Any,
}

/// Where a key is documented in `docs/configuration.md`: each section is one table there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// Clusters and the file as a whole (described in prose, not in a table).
    Clusters,
    /// "Topics and groups".
    TopicsAndGroups,
    /// "Naming".
    Naming,
    /// "Remote topics and their configs".
    RemoteTopics,
    /// "Offsets, checkpoints, heartbeats".
    Offsets,
    /// "Plug-in classes".
    Classes,
    /// "strait's own keys".
    Strait,
    /// "Client keys strait acts on".
    ClientUsed,
    /// "Client keys without effect".
    ClientUnused,
    /// "Connection keys".
    Connection,
    /// "Accepted, not used".
    Connect,
}

impl Section {
    /// The marker name of the section's table in `docs/configuration.md`, if it has a table.
    pub fn table(self) -> Option<&'static str> {
        Some(match self {
            Section::Clusters => return None,
            Section::TopicsAndGroups => "topics-and-groups",
            Section::Naming => "naming",
            Section::RemoteTopics => "remote-topics",
            Section::Offsets => "offsets",
            Section::Classes => "classes",
            Section::Strait => "strait",
            Section::ClientUsed => "client-used",
            Section::ClientUnused => "client-unused",
            Section::Connection => "connection",
            Section::Connect => "connect",
        })
    }

    /// Every section, in the order of the document.
    pub const ALL: [Section; 11] = [
        Section::Clusters,
        Section::TopicsAndGroups,
        Section::Naming,
        Section::RemoteTopics,
        Section::Offsets,
        Section::Classes,
        Section::Strait,
        Section::ClientUsed,
        Section::ClientUnused,
        Section::Connection,
        Section::Connect,
    ];
}

/// One key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyDef {
    /// The name without prefixes. A name ending in `*` stands for every key starting with
    /// what comes before the `*` (`offset.storage.*`).
    pub name: &'static str,
    /// Where it is set.
    pub place: Place,
    /// Where it is documented.
    pub section: Section,
    /// How its value is read.
    pub value: Value,
    /// The default, as it would be written in the file; empty when there is none (or when it
    /// depends on other keys, which `doc` says).
    pub default: &'static str,
    /// What strait does with it.
    pub status: Status,
    /// What it means, for the documentation.
    pub doc: &'static str,
}

impl KeyDef {
    /// Whether `key` (without prefixes) is this key or one of its family.
    pub fn matches(&self, key: &str) -> bool {
        match self.name.strip_suffix('*') {
            Some(prefix) => key.starts_with(prefix),
            None => key == self.name,
        }
    }
}

const BOOL: Value = Value::Bool;
const RF: Value = Value::ReplicationFactor;

const fn used(
    name: &'static str,
    section: Section,
    value: Value,
    default: &'static str,
    doc: &'static str,
) -> KeyDef {
    KeyDef {
        name,
        place: Place::Flow,
        section,
        value,
        default,
        status: Status::Used,
        doc,
    }
}

const fn deprecated(name: &'static str, section: Section, replacement: &'static str) -> KeyDef {
    KeyDef {
        name,
        place: Place::Flow,
        section,
        value: Value::Patterns,
        default: "",
        status: Status::Deprecated { replacement },
        doc: "MM2's pre-3.0 name of the key it is deprecated for. It works, with a deprecation \
              warning; when both are set, the current name wins from either level, as in MM2.",
    }
}

const fn client(
    role: Option<Role>,
    name: &'static str,
    value: Value,
    default: &'static str,
    doc: &'static str,
) -> KeyDef {
    KeyDef {
        name,
        place: Place::Client(role),
        section: Section::ClientUsed,
        value,
        default,
        status: Status::Used,
        doc,
    }
}

/// A key strait knows and does not use: its reason is both its warning and its doc.
const fn unused(
    place: Place,
    section: Section,
    name: &'static str,
    reason: &'static str,
) -> KeyDef {
    KeyDef {
        name,
        place,
        section,
        value: Value::Any,
        default: "",
        status: Status::Unused { reason },
        doc: reason,
    }
}

const fn client_unused(role: Role, name: &'static str, reason: &'static str) -> KeyDef {
    unused(
        Place::Client(Some(role)),
        Section::ClientUnused,
        name,
        reason,
    )
}

/// A Kafka Connect key.
const fn connect(name: &'static str, reason: &'static str) -> KeyDef {
    unused(Place::Flow, Section::Connect, name, reason)
}

const fn class(name: &'static str, default: &'static str) -> KeyDef {
    KeyDef {
        name,
        place: Place::Flow,
        section: Section::Classes,
        value: Value::Class,
        default,
        status: Status::Used,
        doc: "strait has only MM2's default implementation; another class is refused at start.",
    }
}

const fn connection(name: &'static str, default: &'static str, doc: &'static str) -> KeyDef {
    KeyDef {
        name,
        place: Place::Connection,
        section: Section::Connection,
        value: Value::Text,
        default,
        status: Status::Used,
        doc,
    }
}

const fn connection_unused(name: &'static str, reason: &'static str) -> KeyDef {
    unused(Place::Connection, Section::Connection, name, reason)
}

// Reasons are clauses (no capital, no full stop): a warning reads "`tasks.max` is accepted but
// not used: <reason>"; the documentation's tables make sentences of them.
const JVM_TLS: &str = "it picks a JVM security provider or algorithm; strait's TLS is rustls, \
     which has its own";
const BROKER_SIDE: &str = "it configures a broker's validation of tokens, not a client";
const KERBEROS_RENEWAL: &str = "it tunes the JVM's ticket renewal; strait authenticates again \
     with the keytab or the ticket cache when a session ends";

const CONNECT_WORKER: &str =
    "it configures Kafka Connect's worker, and strait runs without Connect";
const NO_PRODUCER_BATCHING: &str =
    "strait sends the source's batches whole, or merges them for a far target \
     (`strait.batch.merge`, `strait.batch.merge.max.bytes`); there is no producer batching to tune";
const ALWAYS_IDEMPOTENT: &str = "strait always produces with acks=all and idempotence on";

use Section::{Naming, Offsets, RemoteTopics, TopicsAndGroups};

/// Which client of a cluster a setting is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// Reads records and group offsets (`A.consumer.*`).
    Consumer,
    /// Writes records, offset syncs, checkpoints, heartbeats (`A.producer.*`).
    Producer,
    /// Topics, configs, ACLs, group offsets (`A.admin.*`).
    Admin,
}

impl Role {
    /// Every role.
    pub const ALL: [Role; 3] = [Role::Consumer, Role::Producer, Role::Admin];

    /// The key prefix naming the role, with its dot: `consumer.`.
    pub fn prefix(self) -> &'static str {
        match self {
            Role::Consumer => "consumer.",
            Role::Producer => "producer.",
            Role::Admin => "admin.",
        }
    }
}

/// Every key.
pub static KEYS: &[KeyDef] = &[
    KeyDef {
        name: "clusters",
        place: Place::Top,
        section: Section::Clusters,
        value: Value::List,
        default: "",
        status: Status::Used,
        doc: "The aliases of the clusters, comma-separated.",
    },
    KeyDef {
        name: "bootstrap.servers",
        place: Place::Top,
        section: Section::Clusters,
        value: Value::List,
        default: "",
        status: Status::Used,
        doc: "The brokers of every cluster that has no `<alias>.bootstrap.servers`.",
    },
    KeyDef {
        name: "config.providers",
        place: Place::Top,
        section: Section::Clusters,
        value: Value::List,
        default: "",
        status: Status::Used,
        doc: "The config providers that `${provider:path:key}` values name, each with its \
              `config.providers.<name>.class` (`docs/security.md`, \"Secrets outside the file: \
              config providers\").",
    },
    // Topics and groups.
    used(
        "enabled",
        TopicsAndGroups,
        BOOL,
        "false",
        "Whether the flow runs.",
    ),
    used(
        "topics",
        TopicsAndGroups,
        Value::Patterns,
        TOPICS_DEFAULT,
        "Topics to mirror: comma-separated regexes (see Regexes below).",
    ),
    used(
        "topics.exclude",
        TopicsAndGroups,
        Value::Patterns,
        TOPICS_EXCLUDE_DEFAULT,
        "Topics never mirrored. Exclusion wins over `topics`. Kafka 4's default (KIP-1074); \
         Kafka 3's MM2 excluded `.*[\\-\\.]internal`, every topic ending in `.internal` or \
         `-internal`: set that value to keep its behaviour.",
    ),
    deprecated("topics.blacklist", TopicsAndGroups, "topics.exclude"),
    used(
        "groups",
        TopicsAndGroups,
        Value::Patterns,
        GROUPS_DEFAULT,
        "Consumer groups to checkpoint.",
    ),
    used(
        "groups.exclude",
        TopicsAndGroups,
        Value::Patterns,
        GROUPS_EXCLUDE_DEFAULT,
        "Groups never checkpointed.",
    ),
    deprecated("groups.blacklist", TopicsAndGroups, "groups.exclude"),
    used(
        "heartbeats.replication.enabled",
        TopicsAndGroups,
        BOOL,
        "true",
        "Mirror heartbeats topics even when `topics` leaves them out.",
    ),
    // Naming.
    used(
        "replication.policy.class",
        Naming,
        Value::Class,
        DEFAULT_POLICY_CLASS,
        "`DefaultReplicationPolicy` names remote topics `<source>.<topic>`. \
         `org.apache.kafka.connect.mirror.IdentityReplicationPolicy` keeps topic names; only \
         heartbeats are prefixed, and it cannot detect cycles (flows that would loop under it \
         are refused, see above). Any other class is an error.",
    ),
    used(
        "replication.policy.separator",
        Naming,
        Value::Separator,
        ".",
        "Separator between alias and topic. It must be non-empty, and only `[A-Za-z0-9._-]`, \
         since it becomes part of topic names. It is read untrimmed, as MM2 reads it.",
    ),
    used(
        "replication.policy.internal.topic.separator.enabled",
        Naming,
        BOOL,
        "true",
        "Also use the separator in the offset-syncs and checkpoints topic names (KIP-690). Set \
         `false` to keep the pre-3.1 names.",
    ),
    used(
        "source.cluster.alias",
        Naming,
        Value::Alias,
        "",
        "The name the flow gives its source in remote topics, heartbeats and checkpoints; by \
         default the source cluster's alias. The cluster is still reached through its `S.` \
         settings.",
    ),
    used(
        "target.cluster.alias",
        Naming,
        Value::Alias,
        "",
        "The name the flow gives its target in internal topics and heartbeats; by default the \
         target cluster's alias. The cluster is still reached through its `T.` settings.",
    ),
    // Remote topics and their configs.
    used(
        "replication.factor",
        RemoteTopics,
        RF,
        "2",
        "Replication factor of the remote topics strait creates. `-1` means the broker's \
         default.",
    ),
    used(
        "refresh.topics.enabled",
        RemoteTopics,
        BOOL,
        "true",
        "Look for new topics and partitions.",
    ),
    used(
        "refresh.topics.interval.seconds",
        RemoteTopics,
        Value::Seconds,
        "600",
        "How often.",
    ),
    used(
        "sync.topic.configs.enabled",
        RemoteTopics,
        BOOL,
        "true",
        "Copy topic configs to remote topics.",
    ),
    used(
        "sync.topic.configs.interval.seconds",
        RemoteTopics,
        Value::Seconds,
        "600",
        "How often.",
    ),
    used(
        "config.properties.exclude",
        RemoteTopics,
        Value::Patterns,
        CONFIG_PROPERTIES_EXCLUDE_DEFAULT,
        "Topic configs never copied.",
    ),
    deprecated(
        "config.properties.blacklist",
        RemoteTopics,
        "config.properties.exclude",
    ),
    used(
        "use.defaults.from",
        RemoteTopics,
        Value::Choice {
            choices: &["target", "source"],
            ignore_case: false,
            text: "`target` or `source`",
        },
        "target",
        "`target`: a property at its default on the source is deleted on the target. `source` \
         (copy the source's defaults too) is accepted with a warning and behaves as `target`.",
    ),
    used(
        "sync.topic.acls.enabled",
        RemoteTopics,
        BOOL,
        "true",
        "Copy topic ACLs to remote topics (MM2's rules).",
    ),
    used(
        "sync.topic.acls.interval.seconds",
        RemoteTopics,
        Value::Seconds,
        "600",
        "How often.",
    ),
    used(
        "admin.timeout.ms",
        RemoteTopics,
        Value::Whole { min: 1 },
        "60000",
        "How long an admin operation may take.",
    ),
    // Offsets, checkpoints, heartbeats.
    used(
        "emit.offset-syncs.enabled",
        Offsets,
        BOOL,
        "true",
        "Write MM2's offset-syncs topic.",
    ),
    used(
        "offset-syncs.topic.location",
        Offsets,
        Value::Choice {
            choices: &["source", "target"],
            ignore_case: false,
            text: "`source` or `target`",
        },
        "source",
        "`source` puts `mm2-offset-syncs.<target>.internal` on the source cluster. `target` \
         puts `mm2-offset-syncs.<source>.internal` on the target (KIP-716). The value is \
         case-sensitive, as in MM2.",
    ),
    used(
        "offset-syncs.topic.replication.factor",
        Offsets,
        RF,
        "3",
        "Replication factor of the offset-syncs topic.",
    ),
    used(
        "offset.lag.max",
        Offsets,
        Value::Whole { min: 0 },
        "100",
        "Records the target may run past the last offset sync before another one is written.",
    ),
    used(
        "emit.checkpoints.enabled",
        Offsets,
        BOOL,
        "true",
        "Write checkpoints (`<source>.checkpoints.internal` on the target).",
    ),
    used(
        "emit.checkpoints.interval.seconds",
        Offsets,
        Value::Seconds,
        "60",
        "How often.",
    ),
    used(
        "checkpoints.topic.replication.factor",
        Offsets,
        RF,
        "3",
        "Replication factor of the checkpoints topic, and of strait's offset-map topic.",
    ),
    used(
        "refresh.groups.enabled",
        Offsets,
        BOOL,
        "true",
        "Look for new consumer groups. strait lists the groups on every checkpoint pass, so a \
         new group is found then whatever this says.",
    ),
    used(
        "refresh.groups.interval.seconds",
        Offsets,
        Value::Seconds,
        "600",
        "Read and checked; groups are listed on every checkpoint pass instead.",
    ),
    used(
        "sync.group.offsets.enabled",
        Offsets,
        BOOL,
        "false",
        "Commit translated offsets into idle groups on the target.",
    ),
    used(
        "sync.group.offsets.interval.seconds",
        Offsets,
        Value::Seconds,
        "60",
        "How often.",
    ),
    used(
        "emit.heartbeats.enabled",
        Offsets,
        BOOL,
        "true",
        "Write heartbeats.",
    ),
    used(
        "emit.heartbeats.interval.seconds",
        Offsets,
        Value::Seconds,
        "1",
        "How often.",
    ),
    used(
        "heartbeats.topic.replication.factor",
        Offsets,
        RF,
        "3",
        "Replication factor of the heartbeats topic.",
    ),
    // Plug-in classes: only MM2's defaults.
    class(
        "topic.filter.class",
        "org.apache.kafka.connect.mirror.DefaultTopicFilter",
    ),
    class(
        "group.filter.class",
        "org.apache.kafka.connect.mirror.DefaultGroupFilter",
    ),
    class(
        "config.property.filter.class",
        "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter",
    ),
    class(
        "forwarding.admin.class",
        "org.apache.kafka.clients.admin.ForwardingAdmin",
    ),
    // strait's own.
    used(
        STRAIT_MAX_BYTES_IN_FLIGHT,
        Section::Strait,
        Value::Whole { min: 1 },
        "67108864",
        "Bytes, per flow (64 MiB by default): record bytes fetched and not yet acknowledged by \
         the target: a round's fetched batches, the copies written, and the next round's fetch \
         made while they are written (a third for each): a fetch asks for at most a third of \
         it, over all source leaders together. This bounds the flow's memory whatever the \
         number of topics, partitions and leaders (plus at most one batch per leader that is \
         larger than its share, which Kafka always returns, KIP-74; `docs/design.md` §3.3). \
         MM2 has none: it is bounded by its consumer and producer buffers.",
    ),
    used(
        STRAIT_ISOLATION_LEVEL,
        Section::Strait,
        Value::Choice {
            choices: &["read_committed", "read_uncommitted"],
            ignore_case: true,
            text: "`read_committed` or `read_uncommitted`",
        },
        "read_committed",
        "`read_committed` never mirrors aborted transactions. `read_uncommitted` mirrors \
         everything, as MM2's consumer does by default. When unset, the source consumer's own \
         `isolation.level` is used, from `S.consumer.isolation.level` or \
         `S->T.consumer.isolation.level`.",
    ),
    used(
        STRAIT_BATCH_MERGE,
        Section::Strait,
        Value::Choice {
            choices: &["auto", "always", "never"],
            ignore_case: true,
            text: "`auto`, `always` or `never`",
        },
        "auto",
        "Whether consecutive source batches of a partition are merged into one target batch \
         (up to `strait.batch.merge.max.bytes`). A Produce request carries one batch per \
         partition and five are in flight per partition, so small batches bound a partition's \
         rate: across an 80 ms round trip, 5 x 9 KiB is 0.56 MB/s; near the target, the target \
         broker's work per request and per batch. `auto` merges a partition's batches when more \
         of them wait than its window has free requests and either its leader is far (a \
         request it has nothing to do for takes 10 ms or more there and back, measured every \
         10 s on a connection of its own) or the flow writes at most four partitions (gzip \
         aside) to that leader (each request would carry a small batch or four, and the \
         broker's work per request binds: one partition near the target, 4x the rate at less \
         CPU). Near a target that takes many partitions' batches per request, batches go \
         unopened as they came, as before. `always` merges whenever batches wait, near the \
         target with many partitions too (more CPU there: `docs/benchmarks.md`); `never` \
         never. Merged batches keep every record's key, value, headers \
         and timestamp, and the offset map stays exact; only batches that follow each other at \
         the source merge (never across a transaction marker or aborted data, one transaction \
         at a time); compressed batches are decompressed and compressed again with their codec \
         at its default level (CPU: `docs/benchmarks.md`, \"A far target\"). A merged batch the \
         target refuses as too large (its `max.message.bytes`) is split and sent again at \
         once, and that partition's merged batches stay smaller from then on. MM2's producer always \
         builds its own batches (`batch.size`).",
    ),
    used(
        STRAIT_BATCH_MERGE_MAX_BYTES,
        Section::Strait,
        Value::Whole { min: 1 },
        "1000000",
        "Bytes: the largest merged batch (1,000,000 by default, under the 1,048,588 of a \
         broker's default `message.max.bytes`, so a merged batch is taken wherever its parts \
         were). Five of them in flight move about 60 MB/s per partition across an 80 ms round \
         trip.",
    ),
    used(
        STRAIT_SYNC_TOPIC_DELETIONS,
        Section::Strait,
        BOOL,
        "false",
        "When a source topic the flow mirrors is deleted (absent from the source's metadata, \
         unfiltered, at two topic refreshes in a row), delete its remote topic on the target \
         and forget its partitions (out of the offset map too), so that a topic created again \
         under the name is mirrored afresh from its start. Only the flow's own remote topic of \
         that source topic is deleted, never an internal or heartbeats topic; a topic that \
         merely stops passing the filter is never deleted. Off, the deleted topic's partitions \
         stop and its remote topic is kept with all its records. See `mirroring.md`, \"Source \
         topics deleted\". MM2 never deletes a remote topic.",
    ),
    used(
        STRAIT_CHECKPOINTS_CAPTURE_INTERVAL_MS,
        Section::Strait,
        Value::Whole { min: 0 },
        "1000",
        "How often the checkpoint task reads the source groups' committed offsets and writes a \
         checkpoint for each position that changed (with `sync.group.offsets.enabled`, also \
         committed into the idle target group then), so a failover made from the checkpoints \
         alone (the source lost) re-reads about this much of each group's consumption, not up \
         to `emit.checkpoints.interval.seconds`. One ListGroups per source broker and one \
         OffsetFetch per group coordinator for up to 200 groups (v8, Kafka 3.0 and later; one \
         per group on older brokers) each time (the cost at 1,000 and 10,000 groups: `configuration.md`, below this table). \
         `emit.checkpoints.interval.seconds` stays the longest a changed position waits; 0 \
         reads only at that interval, as MM2.",
    ),
    used(
        STRAIT_WORKERS_ENABLED,
        Section::Strait,
        BOOL,
        "true",
        "Run the flow as a member of a group of workers on its target cluster, as MM2's \
         dedicated mode runs it as a Connect group: every `strait run` with this config joins \
         the group (`strait.workers.group.id`), the group's leader hands out the flow's \
         `tasks.max` units, and a unit moves only once its last owner has stopped it; a worker \
         writes only while the group still has it (a lease that lapses with its session \
         timeout), so any number of processes on one file never write a record twice. With \
         `exactly.once.source.support = enabled` each unit also commits its rounds in \
         transactions that its next owner fences. One process needs nothing more. `false`: \
         one `strait run` mirrors every partition without a group, and a second one with the \
         same file would mirror them again. See `scaling.md`.",
    ),
    used(
        STRAIT_WORKERS_GROUP_ID,
        Section::Strait,
        Value::Text,
        "",
        "The workers' group on the target cluster (`strait.workers.enabled`); default \
         `strait-<source>-<target>`. Also the prefix of the units' transactional ids.",
    ),
    used(
        STRAIT_WORKERS_SESSION_TIMEOUT_MS,
        Section::Strait,
        Value::Whole { min: 1 },
        "10000",
        "A worker silent this long is removed from the group and its units go to the others \
         (Connect's default; the broker allows `group.min.session.timeout.ms`, 6 s, to \
         `group.max.session.timeout.ms`, 30 min). Heartbeats go every third of it.",
    ),
    used(
        STRAIT_WORKERS_GROUP_INSTANCE_ID,
        Section::Strait,
        Value::Text,
        "",
        "Makes this worker a static member of the workers' group (KIP-345, as a consumer's \
         `group.instance.id`): unique per process and stable across its restarts, so it is \
         usually read from the environment, e.g. `${env:POD_NAME}` in a Kubernetes \
         StatefulSet. A process that starts with the id of one still in the group takes its \
         place at once instead of waiting for its session timeout, and the old one is refused \
         from then on and runs nothing. A static worker that stops does not leave the group: \
         its units wait for it up to the session timeout (a rolling restart moves nothing \
         that comes back in time). Empty: a dynamic member.",
    ),
    used(
        "exactly.once.source.support",
        RemoteTopics,
        Value::Choice {
            choices: &["enabled", "preparing", "disabled"],
            ignore_case: true,
            text: "`enabled`, `preparing` or `disabled`",
        },
        "disabled",
        "MM2's exactly-once source (KIP-618), read for the flow (`S->T.`), else for its target \
         cluster (`T.exactly.once.source.support`, the form Kafka's documentation gives for \
         MM2's dedicated mode), else at top level. `enabled`: each unit of the flow commits a \
         round's data and offset-map records in one transaction through a transactional id its \
         next owner fences, so a `read_committed` consumer reads every record once whatever \
         crashes; it needs the workers (`strait.workers.enabled`, on by default). `preparing` \
         (a step of MM2's rolling upgrade) and `disabled`: the units write without \
         transactions, as one process does (no transaction markers on the target), still \
         never two writers of one partition at a time.",
    ),
    used(
        "tasks.max",
        RemoteTopics,
        Value::Whole { min: 1 },
        "1",
        "The flow's units of work, shared by its workers (`strait.workers.enabled`): a unit \
         is a share of the flow's partitions (partition `p` of topic `t` in unit `(crc32c(t) + \
         p) mod tasks.max`), what moves between workers and what is fenced. With more units \
         than workers the load spreads evenly, each unit costing a producer (and with \
         exactly-once a transactional id and a commit per round); a few units per worker is a \
         good value. Every worker of a flow must have the same value: while they differ (a \
         changed config rolling through them), no unit runs anywhere. No effect without \
         workers.",
    ),
    // Client keys strait's client acts on.
    client(
        None,
        "client.id",
        Value::Text,
        "strait",
        "Of each client (`A.consumer.client.id`, `A.admin.client.id`, \
         `S->T.producer.client.id` ...): the name every request carries into the brokers' \
         logs, request metrics and quotas. A cluster-level `A.client.id` reaches no client, \
         in MM2 as in strait.",
    ),
    client(
        Some(Role::Consumer),
        "fetch.max.wait.ms",
        Value::Millis,
        "500",
        "Source consumer: how long a fetch waits on the broker for `fetch.min.bytes`.",
    ),
    client(
        Some(Role::Consumer),
        "fetch.min.bytes",
        Value::Bytes,
        "1",
        "Source consumer: the bytes a fetch waits for.",
    ),
    client(
        Some(Role::Consumer),
        "fetch.max.bytes",
        Value::Bytes,
        "52428800",
        "Source consumer: the most a fetch asks for, and never more than a third of \
         `strait.max.bytes.in.flight`.",
    ),
    client(
        Some(Role::Consumer),
        "max.partition.fetch.bytes",
        Value::Bytes,
        "",
        "Source consumer: the most a fetch asks for per partition. When unset, a fetch gives \
         each partition its share of the fetch's bytes, at least 64 KiB and twice the largest \
         batch the partition has sent: one partition across a long link moves more than 1 MiB \
         per round trip, and a round's data is spread over all partitions rather than given to \
         the first few. When set, it is kept as given.",
    ),
    client(
        Some(Role::Consumer),
        "check.crcs",
        BOOL,
        "true",
        "Source consumer: check each fetched batch's CRC-32C before it is forwarded; a batch \
         that fails is fetched again next round. `false` saves that pass over the data (9% of \
         strait's CPU samples on uncompressed batches in a perf profile); a corrupted batch is \
         then caught by the target broker, which refuses it: strait derives the forwarded \
         batch's CRC from the source's, so a wrong CRC stays wrong (`docs/design.md` §3.2).",
    ),
    client(
        Some(Role::Consumer),
        "client.rack",
        Value::Text,
        "",
        "Source consumer: sent with every fetch, so a source cluster with a \
         `replica.selector.class` can name a replica in that rack to read from (KIP-392, \
         `docs/design.md` §3.1).",
    ),
    client(
        Some(Role::Consumer),
        "isolation.level",
        Value::Choice {
            choices: &["read_committed", "read_uncommitted"],
            ignore_case: true,
            text: "`read_committed` or `read_uncommitted`",
        },
        "",
        "Source consumer: used when `strait.isolation.level` is unset.",
    ),
    client(
        Some(Role::Consumer),
        "auto.offset.reset",
        Value::Choice {
            choices: &["earliest", "latest"],
            ignore_case: true,
            text: "`earliest` or `latest`",
        },
        "earliest",
        "Source consumer: where a partition with no offset map and nothing on the target \
         starts (MM2 sets `earliest`). `latest` leaves the records already there behind, and \
         strait logs once how many. A partition strait has mirrored before resumes from its \
         map. `none` and Kafka 4's `by_duration:` are refused at start.",
    ),
    client(
        Some(Role::Producer),
        "delivery.timeout.ms",
        Value::Millis,
        "120000",
        "Target producer: how long a batch may take from when the round hands it to the \
         producer until it is acknowledged, retries, metadata look-ups and requests in flight \
         included; after that the flow stalls and resumes from its map.",
    ),
    client(
        Some(Role::Producer),
        "request.timeout.ms",
        Value::Millis,
        "30000",
        "Target producer: how long one produce request may wait for its answer.",
    ),
    client(
        Some(Role::Producer),
        "max.request.size",
        Value::Bytes,
        "1048576",
        "Target producer: the batches of one produce request add up to at most this; a larger \
         batch goes alone, and the target's `message.max.bytes` decides.",
    ),
    // Client keys strait's client has no use for (any other earns a generic reason).
    client_unused(
        Role::Producer,
        "compression.type",
        "strait forwards the source's batches as they were compressed on the source; it does \
         not recompress",
    ),
    client_unused(Role::Producer, "acks", ALWAYS_IDEMPOTENT),
    client_unused(Role::Producer, "enable.idempotence", ALWAYS_IDEMPOTENT),
    client_unused(
        Role::Producer,
        "max.in.flight.requests.per.connection",
        ALWAYS_IDEMPOTENT,
    ),
    client_unused(Role::Producer, "linger.ms", NO_PRODUCER_BATCHING),
    client_unused(Role::Producer, "batch.size", NO_PRODUCER_BATCHING),
    client_unused(Role::Producer, "buffer.memory", NO_PRODUCER_BATCHING),
    // Connection keys (`docs/security.md` describes each in full).
    KeyDef {
        name: "security.protocol",
        place: Place::Connection,
        section: Section::Connection,
        value: Value::Choice {
            choices: &["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"],
            ignore_case: true,
            text: "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL",
        },
        default: "PLAINTEXT",
        status: Status::Used,
        doc: "TLS (`SSL`), SASL (`SASL_PLAINTEXT`), both (`SASL_SSL`) or neither.",
    },
    connection(
        "ssl.truststore.location",
        "",
        "The CAs to trust: a PEM, PKCS12, JKS or JCEKS file (its first bytes decide). Without \
         a truststore the system's CAs are trusted.",
    ),
    connection("ssl.truststore.password", "", "The truststore's password."),
    connection(
        "ssl.truststore.type",
        "JKS",
        "Checked against the file; the file's own format is what counts.",
    ),
    connection(
        "ssl.truststore.certificates",
        "",
        "The CAs as PEM text, instead of a file.",
    ),
    connection(
        "ssl.keystore.location",
        "",
        "The client's certificate and key for mutual TLS: PEM, PKCS12 or JKS, with one private \
         key.",
    ),
    connection("ssl.keystore.password", "", "The keystore's password."),
    connection(
        "ssl.keystore.type",
        "JKS",
        "Checked against the file; the file's own format is what counts.",
    ),
    connection(
        "ssl.keystore.certificate.chain",
        "",
        "The client's certificate chain as PEM text, with `ssl.keystore.key`.",
    ),
    connection(
        "ssl.keystore.key",
        "",
        "The client's private key as PEM text.",
    ),
    connection(
        "ssl.key.password",
        "",
        "The password of an encrypted PEM key or of a JKS key (the store's when unset).",
    ),
    connection(
        "ssl.endpoint.identification.algorithm",
        "https",
        "`https` verifies the broker's host name; empty turns that off.",
    ),
    connection(
        "ssl.enabled.protocols",
        "TLSv1.2,TLSv1.3",
        "The TLS versions offered.",
    ),
    connection(
        "ssl.engine.factory.class",
        "",
        "A JVM class; refused when set, since strait cannot load it.",
    ),
    connection(
        "sasl.mechanism",
        "GSSAPI",
        "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, GSSAPI or AWS_MSK_IAM.",
    ),
    connection(
        "sasl.jaas.config",
        "",
        "The login module and its options, read as Kafka reads them.",
    ),
    connection(
        "sasl.kerberos.service.name",
        "",
        "GSSAPI: the brokers' Kerberos service name.",
    ),
    connection(
        "sasl.client.callback.handler.class",
        "",
        "Amazon's `IAMClientCallbackHandler` for AWS_MSK_IAM; another class is refused.",
    ),
    connection(
        "sasl.login.callback.handler.class",
        "",
        "OAUTHBEARER: Kafka's `OAuthBearerLoginCallbackHandler` (a token endpoint or a file) or \
         Amazon's IAM handler; another class is refused.",
    ),
    connection(
        "sasl.oauthbearer.token.endpoint.url",
        "",
        "OAUTHBEARER: the identity provider's token endpoint (`https://`), or `file:` a token \
         file read at every authentication.",
    ),
    connection(
        "sasl.oauthbearer.jwt.retriever.class",
        "",
        "Kafka 4.1's retriever class: the client-credentials one is read as the token \
         endpoint's grant; another class is refused.",
    ),
    connection(
        "sasl.oauthbearer.client.credentials.client.id",
        "",
        "OAUTHBEARER: the client id of the client credentials grant.",
    ),
    connection(
        "sasl.oauthbearer.client.credentials.client.secret",
        "",
        "OAUTHBEARER: the client secret of the client credentials grant.",
    ),
    connection(
        "sasl.oauthbearer.scope",
        "",
        "OAUTHBEARER: the scope asked for.",
    ),
    connection(
        "sasl.oauthbearer.header.urlencode",
        "false",
        "OAUTHBEARER: URL-encode the client id and secret in the Authorization header.",
    ),
    connection(
        "sasl.oauthbearer.sub.claim.name",
        "sub",
        "OAUTHBEARER: the claim that names the principal.",
    ),
    connection(
        "sasl.login.connect.timeout.ms",
        "10000",
        "OAUTHBEARER: connecting to the token endpoint.",
    ),
    connection(
        "sasl.login.read.timeout.ms",
        "10000",
        "OAUTHBEARER: reading the token endpoint's answer.",
    ),
    connection(
        "sasl.login.retry.backoff.ms",
        "100",
        "OAUTHBEARER: the first wait before asking the token endpoint again.",
    ),
    connection(
        "sasl.login.retry.backoff.max.ms",
        "10000",
        "OAUTHBEARER: the longest wait between two asks.",
    ),
    connection(
        "sasl.login.refresh.window.factor",
        "0.8",
        "When a token is renewed, as a share of its lifetime (0.5 to 1.0).",
    ),
    connection(
        "sasl.login.refresh.window.jitter",
        "0.05",
        "Random extra share of the lifetime added to that (0 to 0.25).",
    ),
    connection(
        "sasl.login.refresh.min.period.seconds",
        "60",
        "The least time between two renewals (0 to 900).",
    ),
    connection(
        "sasl.login.refresh.buffer.seconds",
        "300",
        "Renew at least this long before the token expires (0 to 3600).",
    ),
    connection_unused(
        "ssl.protocol",
        "strait offers the versions of `ssl.enabled.protocols`; \
         the JVM's `SSLContext` protocol name has no equivalent",
    ),
    connection_unused(
        "ssl.cipher.suites",
        "rustls offers its own modern cipher suites (AEAD, \
         forward secrecy); the list cannot be narrowed",
    ),
    connection_unused("ssl.provider", JVM_TLS),
    connection_unused("ssl.secure.random.implementation", JVM_TLS),
    connection_unused("ssl.keymanager.algorithm", JVM_TLS),
    connection_unused("ssl.trustmanager.algorithm", JVM_TLS),
    connection_unused(
        "sasl.login.class",
        "it names a JVM login class; strait logs in with the \
         mechanism's own code",
    ),
    connection_unused("sasl.kerberos.kinit.cmd", KERBEROS_RENEWAL),
    connection_unused("sasl.kerberos.ticket.renew.window.factor", KERBEROS_RENEWAL),
    connection_unused("sasl.kerberos.ticket.renew.jitter", KERBEROS_RENEWAL),
    connection_unused("sasl.kerberos.min.time.before.relogin", KERBEROS_RENEWAL),
    connection_unused("sasl.oauthbearer.expected.*", BROKER_SIDE),
    connection_unused("sasl.oauthbearer.jwks.endpoint.*", BROKER_SIDE),
    connection_unused("sasl.oauthbearer.clock.skew.seconds", BROKER_SIDE),
    connection_unused("sasl.oauthbearer.scope.claim.name", BROKER_SIDE),
    connection_unused("sasl.server.*", BROKER_SIDE),
    connection_unused(
        "sasl.oauthbearer.assertion.*",
        "it configures the JWT bearer grant (KIP-1139, a signed assertion instead of a client \
         secret), which strait does not offer: it refuses `JwtBearerJwtRetriever`; use the \
         client credentials grant or a token file",
    ),
    connection_unused(
        "sasl.oauthbearer.jwt.validator.class",
        "it picks the JVM class that checks a token the client fetched; strait checks the token \
         itself (its `exp`, and the claim `sasl.oauthbearer.sub.claim.name` names)",
    ),
    connection_unused(
        "ssl.client.auth",
        "it is a broker setting (whether clients must \
         present a certificate)",
    ),
    // Kafka Connect's keys.
    connect(
        "tasks.max.enforce",
        "strait spreads a flow's partitions itself; there are no Connect tasks",
    ),
    connect(
        "consumer.poll.timeout.ms",
        "strait's fetcher waits on the broker, not on a poll timeout",
    ),
    connect(
        "dedicated.mode.enable.internal.rest",
        "it configures Connect's REST server; strait serves its own HTTP API",
    ),
    connect(
        "listeners",
        "it configures Connect's REST server; strait serves its own HTTP API",
    ),
    connect(
        "admin.listeners",
        "it configures Connect's REST server; strait serves its own HTTP API",
    ),
    connect(
        "rest.*",
        "it configures Connect's REST server; strait serves its own HTTP API",
    ),
    connect("name", "it names a Connect connector; strait has none"),
    connect(
        "connector.class",
        "it names a Connect connector; strait has none",
    ),
    connect(
        "metric.reporters",
        "strait exports Prometheus metrics on its HTTP port",
    ),
    connect(
        "offset.flush.interval.ms",
        "it times Connect's offset commits; strait records progress in its offset map",
    ),
    connect(
        "offset.flush.timeout.ms",
        "it times Connect's offset commits; strait records progress in its offset map",
    ),
    connect("group.id", CONNECT_WORKER),
    connect("client.id", CONNECT_WORKER),
    connect("plugin.path", CONNECT_WORKER),
    connect("task.*", CONNECT_WORKER),
    connect("worker.*", CONNECT_WORKER),
    connect(
        "offset.storage.*",
        "it configures Connect's internal topics; strait keeps its progress in its offset-map \
         topic",
    ),
    connect(
        "config.storage.*",
        "it configures Connect's internal topics; strait keeps its progress in its offset-map \
         topic",
    ),
    connect(
        "status.storage.*",
        "it configures Connect's internal topics; strait keeps its progress in its offset-map \
         topic",
    ),
    connect(
        "key.converter*",
        "strait copies keys, values and headers byte for byte (MM2's ByteArrayConverter)",
    ),
    connect(
        "value.converter*",
        "strait copies keys, values and headers byte for byte (MM2's ByteArrayConverter)",
    ),
    connect(
        "header.converter*",
        "strait copies keys, values and headers byte for byte (MM2's ByteArrayConverter)",
    ),
    // A non-empty `transforms` or `predicates` is refused before warnings are made.
    connect(
        "transforms",
        "it lists Single Message Transforms and is empty here, so it changes nothing (a \
         non-empty one is refused)",
    ),
    connect(
        "predicates",
        "it lists Single Message Transforms and is empty here, so it changes nothing (a \
         non-empty one is refused)",
    ),
    connect(
        "transforms.*",
        "it configures a Single Message Transform; strait runs none (it refuses a non-empty \
         `transforms`)",
    ),
    connect(
        "predicates.*",
        "it configures a Single Message Transform; strait runs none (it refuses a non-empty \
         `transforms`)",
    ),
    connect(
        "errors.*",
        "it configures Connect's error handling; strait reports errors itself",
    ),
    connect(
        "access.control.*",
        "it configures Connect's REST server; strait serves its own HTTP API",
    ),
    connect(
        "response.http.headers.config",
        "it configures Connect's REST server; strait serves its own HTTP API",
    ),
    connect(
        "config.action.reload",
        "it tells Connect whether to restart a connector when a config provider's values change; \
         strait reads the providers again each time it loads the file (at start and at every \
         reload)",
    ),
    connect(
        "connector.plugin.version",
        "it picks the version of a Connect connector plugin (KIP-891); strait has none",
    ),
    connect(
        "metric.names.formats",
        "it picks the names of MM2's JMX metrics (KIP-1280, MM2 4.3: `legacy`, `new` or both); \
         strait exports its own metrics, in Prometheus's format, on its HTTP port \
         (`docs/metrics.md`)",
    ),
];

/// `strait.max.bytes.in.flight`.
pub const STRAIT_MAX_BYTES_IN_FLIGHT: &str = "strait.max.bytes.in.flight";
/// `strait.isolation.level`.
pub const STRAIT_ISOLATION_LEVEL: &str = "strait.isolation.level";
/// How often the checkpoint task reads the source groups' positions.
pub const STRAIT_CHECKPOINTS_CAPTURE_INTERVAL_MS: &str = "strait.checkpoints.capture.interval.ms";
/// `strait.batch.merge`.
pub const STRAIT_BATCH_MERGE: &str = "strait.batch.merge";
/// `strait.batch.merge.max.bytes`.
pub const STRAIT_BATCH_MERGE_MAX_BYTES: &str = "strait.batch.merge.max.bytes";
/// `strait.sync.topic.deletions.enabled`.
pub const STRAIT_SYNC_TOPIC_DELETIONS: &str = "strait.sync.topic.deletions.enabled";
/// Run the flow as a group of workers with transactional units.
pub const STRAIT_WORKERS_ENABLED: &str = "strait.workers.enabled";
/// The workers' group id.
pub const STRAIT_WORKERS_GROUP_ID: &str = "strait.workers.group.id";
/// The workers' session timeout.
pub const STRAIT_WORKERS_SESSION_TIMEOUT_MS: &str = "strait.workers.session.timeout.ms";
/// A worker's static membership id.
pub const STRAIT_WORKERS_GROUP_INSTANCE_ID: &str = "strait.workers.group.instance.id";

/// The top-level or flow key `key` (without the `S->T.` prefix): exact names first, then
/// families (`offset.storage.*`).
pub fn flow_key(key: &str) -> Option<&'static KeyDef> {
    find(key, |d| matches!(d.place, Place::Top | Place::Flow))
}

/// The client key `key` of `role` (without prefixes: `linger.ms`).
pub fn client_key(role: Role, key: &str) -> Option<&'static KeyDef> {
    find(key, |d| match d.place {
        Place::Client(None) => true,
        Place::Client(Some(r)) => r == role,
        _ => false,
    })
}

fn find(key: &str, place: impl Fn(&KeyDef) -> bool) -> Option<&'static KeyDef> {
    let mut candidates = KEYS.iter().filter(|d| place(d));
    let exact = candidates.clone().find(|d| d.name == key);
    exact.or_else(|| candidates.find(|d| d.matches(key)))
}

/// The default of the used flow key `name`, as written in a file ("" when it has none).
///
/// # Panics
///
/// If `name` is not a flow key of [`KEYS`]: a mistake in strait's own code, which the tests
/// of every default catch.
pub(crate) fn default_of(name: &str) -> &'static str {
    match flow_key(name) {
        Some(def) => def.default,
        None => panic!("`{name}` is not in the key catalogue"),
    }
}

/// The connection key `key` (`security.protocol`, `ssl.*`, `sasl.*`).
pub fn connection_key(key: &str) -> Option<&'static KeyDef> {
    find(key, |d| d.place == Place::Connection)
}

/// The names of the connection keys strait reads.
pub fn connection_key_names() -> impl Iterator<Item = &'static str> {
    KEYS.iter()
        .filter(|d| d.place == Place::Connection && d.status == Status::Used)
        .map(|d| d.name)
}

/// strait's own keys (`strait.*`).
pub fn strait_keys() -> impl Iterator<Item = &'static str> {
    KEYS.iter()
        .filter(|d| d.section == Section::Strait)
        .map(|d| d.name)
}

/// Checks `value` of a key read as `kind`; the error says what was expected.
pub(crate) fn check_value(kind: Value, value: &str) -> Result<(), Expected> {
    let v = value.trim();
    let ok = match kind {
        Value::Bool => v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false"),
        Value::Whole { min } => v.parse::<i64>().is_ok_and(|n| n >= 0 && n as u64 >= min),
        Value::Seconds => v.parse::<i64>().is_ok_and(|n| n >= 1),
        Value::Millis => v.parse::<u64>().is_ok(),
        Value::Bytes => v.parse::<i32>().is_ok_and(|n| n >= 1),
        Value::ReplicationFactor => v.parse::<i16>().is_ok_and(|n| n == -1 || n >= 1),
        Value::Choice {
            choices,
            ignore_case,
            ..
        } => choices.iter().any(|c| {
            if ignore_case {
                c.eq_ignore_ascii_case(v)
            } else {
                *c == v
            }
        }),
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(Expected::of(kind))
    }
}

/// What a value of some kind must be, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expected {
    /// `true` or `false`.
    Boolean,
    /// A number, described.
    Number(&'static str),
    /// One of the words, described.
    Choice(&'static str),
}

impl Expected {
    /// What was expected, in words.
    pub(crate) fn text(self) -> &'static str {
        match self {
            Expected::Boolean => "`true` or `false`",
            Expected::Number(text) | Expected::Choice(text) => text,
        }
    }

    fn of(kind: Value) -> Self {
        match kind {
            Value::Bool => Expected::Boolean,
            Value::Whole { min: 0 } => Expected::Number("a whole number of 0 or more"),
            Value::Whole { .. } => Expected::Number("a whole number of 1 or more"),
            Value::Seconds => Expected::Number("a whole number of seconds, 1 or more"),
            Value::Millis => Expected::Number("a whole number of milliseconds"),
            Value::Bytes => Expected::Number("a number of bytes from 1 to 2147483647"),
            Value::ReplicationFactor => {
                Expected::Number("an integer from 1 to 32767, or -1 for the broker's default")
            }
            Value::Choice { text, .. } => Expected::Choice(text),
            _ => Expected::Number("a value"),
        }
    }
}

/// The markdown table of `section`, as `docs/configuration.md` holds it.
pub fn render_table(section: Section) -> String {
    let mut out = String::new();
    match section {
        Section::Connect | Section::ClientUnused => {
            out.push_str("| key | why strait does not use it |\n|---|---|\n");
            // Keys sharing a reason share a row, in the table's order.
            let defs: Vec<&KeyDef> = KEYS.iter().filter(|d| d.section == section).collect();
            let mut done = vec![false; defs.len()];
            for i in 0..defs.len() {
                if done[i] {
                    continue;
                }
                let names: Vec<String> = (i..defs.len())
                    .filter(|&j| defs[j].doc == defs[i].doc)
                    .map(|j| {
                        done[j] = true;
                        format!("`{}`", defs[j].name)
                    })
                    .collect();
                out.push_str(&format!(
                    "| {} | {} |\n",
                    names.join(", "),
                    sentence(defs[i].doc)
                ));
            }
        }
        _ => {
            out.push_str("| key | default | meaning |\n|---|---|---|\n");
            for def in KEYS.iter().filter(|d| d.section == section) {
                let name = match def.place {
                    Place::Client(Some(role)) => format!("`{}{}`", role.prefix(), def.name),
                    _ => format!("`{}`", def.name),
                };
                let default = if def.default.is_empty() {
                    String::new()
                } else {
                    format!("`{}`", def.default)
                };
                let doc = match def.status {
                    Status::Deprecated { replacement } => {
                        format!("Deprecated name of `{replacement}`. {}", def.doc)
                    }
                    Status::Unused { reason } => format!("Not used: {reason}."),
                    Status::Used => def.doc.to_owned(),
                };
                out.push_str(&format!("| {name} | {default} | {doc} |\n"));
            }
        }
    }
    out
}

/// A reason (a clause) as a sentence: `it` capitalised, a full stop at the end.
fn sentence(reason: &str) -> String {
    match reason.strip_prefix("it ") {
        Some(rest) => format!("It {rest}."),
        None => format!("{reason}."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every default reads as its own kind of value.
    #[test]
    fn defaults_are_valid_values() {
        for def in KEYS {
            if !def.default.is_empty() {
                assert_eq!(check_value(def.value, def.default), Ok(()), "{}", def.name);
            }
        }
    }

    #[test]
    fn names_are_defined_once_per_place() {
        for (i, a) in KEYS.iter().enumerate() {
            for b in &KEYS[i + 1..] {
                assert!(
                    !(a.name == b.name && a.place == b.place),
                    "{} twice",
                    a.name
                );
            }
        }
    }

    #[test]
    fn families_match_by_prefix() {
        assert_eq!(
            flow_key("offset.storage.topic").map(|d| d.name),
            Some("offset.storage.*")
        );
        assert_eq!(
            flow_key("key.converter.schemas.enable").map(|d| d.name),
            Some("key.converter*")
        );
        assert_eq!(flow_key("transforms").map(|d| d.name), Some("transforms"));
        assert_eq!(flow_key("topics.exclud"), None);
        assert_eq!(
            client_key(Role::Admin, "client.id").map(|d| d.name),
            Some("client.id")
        );
        assert_eq!(client_key(Role::Admin, "linger.ms"), None);
    }

    #[test]
    fn values_are_checked() {
        assert!(check_value(Value::Bool, " TRUE ").is_ok());
        assert!(check_value(Value::Bool, "yes").is_err());
        assert!(check_value(Value::Bytes, "0").is_err());
        assert!(check_value(Value::Bytes, "2147483648").is_err());
        assert!(check_value(Value::Millis, "-1").is_err());
        assert!(check_value(Value::Whole { min: 1 }, "0").is_err());
        assert!(check_value(Value::Whole { min: 0 }, "0").is_ok());
        assert!(check_value(Value::ReplicationFactor, "-1").is_ok());
        assert!(check_value(Value::ReplicationFactor, "0").is_err());
    }

    /// Every `ssl.*` and `sasl.*` key the security code reads is a used connection key here.
    #[test]
    fn the_security_code_reads_catalogued_keys() {
        let sources = [
            include_str!("security.rs"),
            include_str!("security/msk_iam.rs"),
        ];
        let mut read = std::collections::BTreeSet::new();
        for source in sources {
            for piece in source.split('"').skip(1).step_by(2) {
                let is_key = (piece.starts_with("ssl.") || piece.starts_with("sasl."))
                    && piece.len() > 5
                    && piece
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.');
                if is_key {
                    read.insert(piece);
                }
            }
        }
        assert!(read.len() > 20, "{read:?}");
        for key in read {
            let def = connection_key(key);
            assert!(
                def.is_some_and(|d| d.status == Status::Used && d.name == key),
                "{key} is read by the security code but is not a used connection key: {def:?}"
            );
        }
    }

    /// The key tables of `docs/configuration.md` are this catalogue's, rendered; with
    /// `STRAIT_BLESS_DOCS=1` the test writes them there instead.
    #[test]
    fn docs_tables_are_the_catalogue() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let mut updated = doc.clone();
        for section in Section::ALL {
            let Some(name) = section.table() else {
                for def in KEYS.iter().filter(|d| d.section == section) {
                    assert!(
                        doc.contains(&format!("`{}`", def.name)),
                        "`{}` is not in docs/configuration.md",
                        def.name
                    );
                }
                continue;
            };
            let begin = format!("<!-- keys:{name} -->\n");
            let end = "<!-- /keys -->";
            let start = updated
                .find(&begin)
                .unwrap_or_else(|| panic!("docs/configuration.md has no `{begin}`"))
                + begin.len();
            let stop = start + updated[start..].find(end).expect("an end marker");
            updated.replace_range(start..stop, &render_table(section));
        }
        if std::env::var_os("STRAIT_BLESS_DOCS").is_some() {
            std::fs::write(path, &updated).unwrap();
        } else {
            assert!(
                doc == updated,
                "docs/configuration.md's key tables differ from the catalogue \
                 (crates/strait-core/src/config/catalogue.rs); run \
                 `STRAIT_BLESS_DOCS=1 cargo test -p strait-core catalogue` and review the diff"
            );
        }
    }
}
