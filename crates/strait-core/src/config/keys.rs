//! The catalogue of keys: which strait reads, which MM2 keys it accepts without using (and why),
//! and the warning each other key earns.

use super::client::{is_connection_key, Role};
use super::error::WarningKind;
use super::flowkey::{parse_flow_key, FlowKey};

/// Keys read per flow, as `S->T.<key>` or as top-level `<key>` (the flow's wins).
pub(crate) const FLOW_KEYS: &[&str] = &[
    "enabled",
    "topics",
    "topics.exclude",
    "topics.blacklist",
    "groups",
    "groups.exclude",
    "groups.blacklist",
    "replication.policy.class",
    "replication.policy.separator",
    "replication.policy.internal.topic.separator.enabled",
    "replication.factor",
    "offset-syncs.topic.replication.factor",
    "checkpoints.topic.replication.factor",
    "heartbeats.topic.replication.factor",
    "offset-syncs.topic.location",
    "emit.offset-syncs.enabled",
    "offset.lag.max",
    "refresh.topics.enabled",
    "refresh.topics.interval.seconds",
    "refresh.groups.enabled",
    "refresh.groups.interval.seconds",
    "sync.topic.configs.enabled",
    "sync.topic.configs.interval.seconds",
    "sync.topic.acls.enabled",
    "sync.topic.acls.interval.seconds",
    "emit.checkpoints.enabled",
    "emit.checkpoints.interval.seconds",
    "sync.group.offsets.enabled",
    "sync.group.offsets.interval.seconds",
    "emit.heartbeats.enabled",
    "emit.heartbeats.interval.seconds",
    "heartbeats.replication.enabled",
    "config.properties.exclude",
    "config.properties.blacklist",
    "use.defaults.from",
    "admin.timeout.ms",
    "source.cluster.alias",
    "target.cluster.alias",
    "topic.filter.class",
    "group.filter.class",
    "config.property.filter.class",
    "forwarding.admin.class",
    STRAIT_MAX_BYTES_IN_FLIGHT,
    STRAIT_ISOLATION_LEVEL,
    STRAIT_SYNC_TOPIC_DELETIONS,
];

/// `strait.max.bytes.in.flight`.
pub(crate) const STRAIT_MAX_BYTES_IN_FLIGHT: &str = "strait.max.bytes.in.flight";
/// `strait.isolation.level`.
pub(crate) const STRAIT_ISOLATION_LEVEL: &str = "strait.isolation.level";
/// `strait.sync.topic.deletions.enabled`.
pub(crate) const STRAIT_SYNC_TOPIC_DELETIONS: &str = "strait.sync.topic.deletions.enabled";
/// strait's own keys.
pub(crate) const STRAIT_KEYS: &[&str] = &[
    STRAIT_MAX_BYTES_IN_FLIGHT,
    STRAIT_ISOLATION_LEVEL,
    STRAIT_SYNC_TOPIC_DELETIONS,
];

/// Keys read only at top level.
const TOP_LEVEL_KEYS: &[&str] = &["clusters", "bootstrap.servers"];

/// The MM2 keys superseded by KIP-629, and their replacements.
const DEPRECATED: &[(&str, &str)] = &[
    ("topics.blacklist", "topics.exclude"),
    ("groups.blacklist", "groups.exclude"),
    ("config.properties.blacklist", "config.properties.exclude"),
];

const CONNECT_WORKER: &str =
    "it configures Kafka Connect's worker, and strait runs without Connect";
const TOP_LEVEL_ROLE: &str = "MM2 applies client settings per cluster (`<alias>.consumer.<key>`) \
     or per flow (`<source>-><target>.consumer.<key>`), never at top level";
const FLOW_CONNECTION: &str = "MM2 takes connection settings from the cluster \
     (`<alias>.security.protocol`, `<alias>.ssl.*`, `<alias>.sasl.*`), not from the flow";
const CLUSTER_OTHER: &str = "MM2 passes cluster-level keys other than bootstrap.servers, \
     security.protocol, ssl.* and sasl.* only to the Connect worker of flows into that cluster; \
     for a client setting use `<alias>.consumer.`, `<alias>.producer.` or `<alias>.admin.`";
const ROLE_BOOTSTRAP: &str =
    "strait connects every client of a cluster through `<alias>.bootstrap.servers`";

/// Why strait ignores an MM2 key it recognises (top-level form, or a flow key without its
/// prefix); `None` if it is not such a key.
pub(crate) fn unused_reason(key: &str) -> Option<&'static str> {
    let reason = match key {
        "tasks.max" | "tasks.max.enforce" => {
            "strait spreads a flow's partitions itself; there are no Connect tasks"
        }
        "consumer.poll.timeout.ms" => "strait's fetcher waits on the broker, not on a poll timeout",
        "dedicated.mode.enable.internal.rest" | "listeners" | "admin.listeners" => {
            "it configures Connect's REST server; strait serves its own HTTP API"
        }
        "name" | "connector.class" => "it names a Connect connector; strait has none",
        "metric.reporters" => "strait exports Prometheus metrics on its HTTP port",
        "offset.flush.interval.ms" | "offset.flush.timeout.ms" => {
            "it times Connect's offset commits; strait records progress in its offset map"
        }
        "exactly.once.source.support" => {
            "strait mirrors at least once with an exact offset map; transactions come later"
        }
        "group.id" | "client.id" | "plugin.path" => CONNECT_WORKER,
        // A non-empty `transforms` or `predicates` is refused before warnings are made.
        "transforms" | "predicates" => {
            "it lists Single Message Transforms and is empty here, so it changes nothing"
        }
        _ => {
            return if ["offset.storage.", "config.storage.", "status.storage."]
                .iter()
                .any(|p| key.starts_with(p))
            {
                Some("it configures Connect's internal topics; strait keeps its progress in its offset-map topic")
            } else if ["key.converter", "value.converter", "header.converter"]
                .iter()
                .any(|p| key.starts_with(p))
            {
                Some("strait copies keys, values and headers byte for byte (MM2's ByteArrayConverter)")
            } else if key.starts_with("transforms.") || key.starts_with("predicates.") {
                Some("it configures a Single Message Transform; strait runs none (it refuses a non-empty `transforms`)")
            } else if key.starts_with("errors.") {
                Some("it configures Connect's error handling; strait reports errors itself")
            } else if key.starts_with("rest.")
                || key.starts_with("task.")
                || key.starts_with("worker.")
            {
                Some(CONNECT_WORKER)
            } else {
                None
            };
        }
    };
    Some(reason)
}

/// The Kafka client keys strait's own client acts on, per role, besides `client.id` and the
/// connection keys (`security.protocol`, `ssl.*`, `sasl.*`), as `docs/configuration.md` ("What
/// `strait run` acts on today") lists them. [`classify`] accepts every client key without a
/// warning, because MM2 hands them all to a Java client; `strait check` says, from this table,
/// which ones strait's client has no use for.
pub(crate) const CLIENT_KEYS_ACTED_ON: &[(Role, &[&str])] = &[
    (
        Role::Consumer,
        &[
            "fetch.max.wait.ms",
            "fetch.min.bytes",
            "fetch.max.bytes",
            "max.partition.fetch.bytes",
            "check.crcs",
            "client.rack",
            "isolation.level",
            "auto.offset.reset",
        ],
    ),
    (
        Role::Producer,
        &[
            "delivery.timeout.ms",
            "request.timeout.ms",
            "max.request.size",
        ],
    ),
    (Role::Admin, &[]),
];

/// Why strait's client does not use client key `key` of `role`.
fn unused_client_key_reason(role: Role, key: &str) -> &'static str {
    match (role, key) {
        (Role::Producer, "compression.type") => {
            "strait forwards the source's batches as they were compressed on the source; it \
             does not recompress"
        }
        (
            Role::Producer,
            "acks" | "enable.idempotence" | "max.in.flight.requests.per.connection",
        ) => "strait always produces with acks=all and idempotence on",
        (Role::Producer, "linger.ms" | "batch.size" | "buffer.memory") => {
            "strait sends the source's batches whole; there is no producer batching to tune"
        }
        _ => "MM2 hands it to its Java Kafka client; strait's own client has no such setting",
    }
}

/// Why strait's client does not act on client key `key` of `role` (without prefixes:
/// `linger.ms` of [`Role::Producer`]); `None` when it does.
pub(crate) fn client_key_unused(role: Role, key: &str) -> Option<&'static str> {
    let acted_on = key == "client.id"
        || is_connection_key(key)
        || CLIENT_KEYS_ACTED_ON
            .iter()
            .any(|(r, keys)| *r == role && keys.contains(&key));
    (!acted_on).then(|| unused_client_key_reason(role, key))
}

/// What a key earns: nothing (`None`), or a warning.
pub(crate) fn classify(key: &str, aliases: &[String]) -> Option<WarningKind> {
    let mut best: Option<WarningKind> = None;
    let mut consider = |kind: Option<WarningKind>| -> bool {
        match kind {
            None => true,
            Some(kind) => {
                if rank(&kind) < best.as_ref().map_or(u8::MAX, rank) {
                    best = Some(kind);
                }
                false
            }
        }
    };

    // A flow key is nothing else: aliases cannot hold `>`.
    if let Some(FlowKey::Valid { rest, .. }) = parse_flow_key(key, aliases) {
        return classify_flow_suffix(rest);
    }
    // As a top-level key.
    if consider(classify_top_level(key)) {
        return None;
    }
    // As a cluster key, for every alias it could start with.
    for alias in aliases {
        if let Some(rest) = key
            .strip_prefix(alias.as_str())
            .and_then(|r| r.strip_prefix('.'))
        {
            if consider(classify_cluster_suffix(rest)) {
                return None;
            }
        }
    }
    best
}

/// Deprecated keys still work; unused keys are MM2's; unknown keys are the least understood.
fn rank(kind: &WarningKind) -> u8 {
    match kind {
        WarningKind::Deprecated { .. } => 0,
        WarningKind::Unused { .. } => 1,
        _ => 2,
    }
}

fn classify_top_level(key: &str) -> Option<WarningKind> {
    if let Some((_, replacement)) = DEPRECATED.iter().find(|(old, _)| *old == key) {
        return Some(WarningKind::Deprecated { replacement });
    }
    if FLOW_KEYS.contains(&key) || TOP_LEVEL_KEYS.contains(&key) || is_connection_key(key) {
        return None;
    }
    if let Some(reason) = unused_reason(key) {
        return Some(WarningKind::Unused { reason });
    }
    if Role::ALL.iter().any(|r| key.starts_with(r.prefix())) {
        return Some(WarningKind::Unused {
            reason: TOP_LEVEL_ROLE,
        });
    }
    Some(WarningKind::Unknown {
        hint: closest(key, FLOW_KEYS.iter().chain(TOP_LEVEL_KEYS)),
    })
}

fn classify_flow_suffix(rest: &str) -> Option<WarningKind> {
    if let Some((_, replacement)) = DEPRECATED.iter().find(|(old, _)| *old == rest) {
        return Some(WarningKind::Deprecated { replacement });
    }
    if FLOW_KEYS.contains(&rest) {
        return None;
    }
    if let Some(reason) = unused_reason(rest) {
        return Some(WarningKind::Unused { reason });
    }
    if is_flow_client_key(rest) {
        // Accepted as MM2 accepts it; a key strait's client does not act on says so.
        return Role::ALL.iter().find_map(|role| {
            let key = rest.strip_prefix(role.prefix())?;
            client_key_unused(*role, key).map(|reason| WarningKind::Unused { reason })
        });
    }
    if is_connection_key(rest) || rest == "bootstrap.servers" {
        return Some(WarningKind::Unused {
            reason: FLOW_CONNECTION,
        });
    }
    Some(WarningKind::Unknown {
        hint: closest(rest, FLOW_KEYS.iter()),
    })
}

fn classify_cluster_suffix(rest: &str) -> Option<WarningKind> {
    if rest == "bootstrap.servers" || is_connection_key(rest) {
        return None;
    }
    for role in Role::ALL {
        if let Some(client_key) = rest.strip_prefix(role.prefix()) {
            return if client_key == "bootstrap.servers" {
                Some(WarningKind::Unused {
                    reason: ROLE_BOOTSTRAP,
                })
            } else {
                client_key_unused(role, client_key).map(|reason| WarningKind::Unused { reason })
            };
        }
    }
    Some(WarningKind::Unused {
        reason: CLUSTER_OTHER,
    })
}

/// Whether a flow key's suffix is a client override (`consumer.fetch.max.bytes`), as opposed to
/// the two connector keys that share the prefixes.
pub(crate) fn is_flow_client_key(rest: &str) -> bool {
    rest != "consumer.poll.timeout.ms"
        && rest != "admin.timeout.ms"
        && Role::ALL.iter().any(|r| rest.starts_with(r.prefix()))
}

/// The known key nearest to `key` by edit distance, if it is near enough to be a typo.
fn closest<'a>(key: &str, known: impl Iterator<Item = &'a &'a str>) -> Option<String> {
    known
        .map(|k| (edit_distance(key, k), *k))
        .filter(|(d, _)| *d > 0 && *d <= 2)
        .min()
        .map(|(_, k)| k.to_owned())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(above + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aliases() -> Vec<String> {
        vec!["A".into(), "B".into()]
    }

    #[test]
    fn used_keys_earn_nothing() {
        for k in [
            "clusters",
            "topics",
            "A->B.topics",
            "A.bootstrap.servers",
            "A.ssl.truststore.location",
            "A.consumer.fetch.max.bytes",
            "A->B.producer.delivery.timeout.ms",
            "security.protocol",
            "sasl.jaas.config",
            "strait.max.bytes.in.flight",
        ] {
            assert_eq!(classify(k, &aliases()), None, "{k}");
        }
    }

    #[test]
    fn client_keys_strait_does_not_act_on_say_so() {
        for k in [
            "A.consumer.max.poll.records",
            "A->B.producer.compression.type",
            "B.producer.linger.ms",
        ] {
            assert!(
                matches!(classify(k, &aliases()), Some(WarningKind::Unused { .. })),
                "{k}: {:?}",
                classify(k, &aliases())
            );
        }
    }

    #[test]
    fn warnings() {
        let unused = |k: &str| matches!(classify(k, &aliases()), Some(WarningKind::Unused { .. }));
        for k in [
            "tasks.max",
            "A->B.tasks.max",
            "config.storage.replication.factor",
            "consumer.max.poll.records",
            "A.max.poll.records",
            "A->B.security.protocol",
            "A.consumer.bootstrap.servers",
            "A->B.consumer.poll.timeout.ms",
            "transforms",
            "transforms.route.type",
            "A->B.predicates.isFoo.pattern",
        ] {
            assert!(unused(k), "{k}");
        }
        assert_eq!(
            classify("topics.blacklist", &aliases()),
            Some(WarningKind::Deprecated {
                replacement: "topics.exclude"
            })
        );
        assert_eq!(
            classify("A->B.topic", &aliases()),
            Some(WarningKind::Unknown {
                hint: Some("topics".into())
            })
        );
        assert_eq!(
            classify("replication.factr", &aliases()),
            Some(WarningKind::Unknown {
                hint: Some("replication.factor".into())
            })
        );
        assert_eq!(
            classify("zzz", &aliases()),
            Some(WarningKind::Unknown { hint: None })
        );
    }

    /// Every key of the catalogue, used or accepted without use, is named in
    /// `docs/configuration.md` (and `strait check` reads the same catalogue).
    #[test]
    fn every_catalogued_key_is_documented() {
        let doc = include_str!("../../../../docs/configuration.md");
        let unused = [
            "tasks.max",
            "tasks.max.enforce",
            "consumer.poll.timeout.ms",
            "dedicated.mode.enable.internal.rest",
            "listeners",
            "admin.listeners",
            "name",
            "connector.class",
            "metric.reporters",
            "offset.flush.interval.ms",
            "offset.flush.timeout.ms",
            "exactly.once.source.support",
            "group.id",
            "client.id",
            "plugin.path",
            "transforms",
            "predicates",
        ];
        for key in unused {
            assert!(unused_reason(key).is_some(), "{key} has no reason");
        }
        for key in FLOW_KEYS.iter().chain(TOP_LEVEL_KEYS).chain(&unused) {
            assert!(
                doc.contains(&format!("`{key}`")),
                "`{key}` is not in docs/configuration.md"
            );
        }
        for (_, keys) in CLIENT_KEYS_ACTED_ON {
            for key in *keys {
                assert!(
                    doc.contains(&format!("`{key}`")),
                    "`{key}` is not in docs/configuration.md"
                );
            }
        }
        for (old, new) in DEPRECATED {
            assert!(doc.contains(&format!("`{old}`")) && doc.contains(&format!("`{new}`")));
        }
    }

    #[test]
    fn client_keys() {
        assert_eq!(client_key_unused(Role::Consumer, "fetch.max.bytes"), None);
        assert_eq!(client_key_unused(Role::Producer, "max.request.size"), None);
        assert_eq!(client_key_unused(Role::Admin, "client.id"), None);
        assert_eq!(
            client_key_unused(Role::Producer, "ssl.keystore.location"),
            None
        );
        for (role, key) in [
            (Role::Producer, "linger.ms"),
            (Role::Producer, "compression.type"),
            (Role::Consumer, "max.poll.records"),
            (Role::Admin, "retries"),
        ] {
            assert!(client_key_unused(role, key).is_some(), "{key}");
        }
    }

    #[test]
    fn edit_distances() {
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("topic", "topics"), 1);
        assert_eq!(edit_distance("flaw", "lawn"), 2);
    }
}
