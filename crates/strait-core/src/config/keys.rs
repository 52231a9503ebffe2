//! The warning each key of a file earns, from the key catalogue (`catalogue.rs`): nothing for
//! a key strait reads, else deprecated, unused (and why) or unknown (and the nearest known key).

use super::catalogue::{self, Place, Status};
use super::client::{is_connection_key, Role};
use super::error::WarningKind;
use super::flowkey::{parse_flow_key, FlowKey};

pub(crate) use super::catalogue::{
    STRAIT_BATCH_MERGE, STRAIT_BATCH_MERGE_MAX_BYTES, STRAIT_CHECKPOINTS_CAPTURE_INTERVAL_MS,
    STRAIT_ISOLATION_LEVEL, STRAIT_MAX_BYTES_IN_FLIGHT, STRAIT_SYNC_TOPIC_DELETIONS,
    STRAIT_WORKERS_ENABLED, STRAIT_WORKERS_GROUP_ID, STRAIT_WORKERS_GROUP_INSTANCE_ID,
    STRAIT_WORKERS_SESSION_TIMEOUT_MS,
};

/// Keys read only at top level.
const TOP_LEVEL_KEYS: &[&str] = &["clusters", "bootstrap.servers"];

const TOP_LEVEL_ROLE: &str = "MM2 applies client settings per cluster (`<alias>.consumer.<key>`) \
     or per flow (`<source>-><target>.consumer.<key>`), never at top level";
const FLOW_CONNECTION: &str = "MM2 takes connection settings from the cluster \
     (`<alias>.security.protocol`, `<alias>.ssl.*`, `<alias>.sasl.*`), not from the flow";
const CLUSTER_OTHER: &str = "MM2 passes cluster-level keys other than bootstrap.servers, \
     security.protocol, ssl.* and sasl.* only to the Connect worker of flows into that cluster; \
     for a client setting use `<alias>.consumer.`, `<alias>.producer.` or `<alias>.admin.`";
const ROLE_BOOTSTRAP: &str =
    "strait connects every client of a cluster through `<alias>.bootstrap.servers`";
const CLIENT_OTHER: &str =
    "MM2 hands it to its Java Kafka client; strait's own client has no such setting";

const UNKNOWN_CONNECTION: &str = "neither Kafka's clients nor strait know this connection key";

/// What a connection key (`security.protocol`, `ssl.*`, `sasl.*`) earns: nothing when strait
/// reads it, else why it is not used, or that it is unknown (with the nearest known one).
fn classify_connection(key: &str) -> Option<WarningKind> {
    match catalogue::connection_key(key).map(|d| d.status) {
        Some(Status::Used) => None,
        Some(Status::Unused { reason }) => Some(WarningKind::Unused { reason }),
        _ => Some(WarningKind::Unknown {
            hint: closest(key, catalogue::connection_key_names()),
        }),
    }
}

/// The flow keys strait reads (`S->T.<key>` or top-level `<key>`), deprecated names included.
fn is_flow_key(key: &str) -> bool {
    catalogue::flow_key(key)
        .is_some_and(|d| d.place == Place::Flow && !matches!(d.status, Status::Unused { .. }))
}

/// Why strait ignores an MM2 key it recognises (top-level form, or a flow key without its
/// prefix); `None` if it is not such a key.
pub(crate) fn unused_reason(key: &str) -> Option<&'static str> {
    match catalogue::flow_key(key)?.status {
        Status::Unused { reason } => Some(reason),
        _ => None,
    }
}

fn deprecated(key: &str) -> Option<&'static str> {
    match catalogue::flow_key(key)?.status {
        Status::Deprecated { replacement } => Some(replacement),
        _ => None,
    }
}

/// Why strait's client does not act on client key `key` of `role` (without prefixes:
/// `linger.ms` of [`Role::Producer`]); `None` when it does. Connection keys
/// (`security.protocol`, `ssl.*`, `sasl.*`) are acted on, as `docs/security.md` describes.
pub(crate) fn client_key_unused(role: Role, key: &str) -> Option<&'static str> {
    if is_connection_key(key) {
        return classify_connection(key).map(|kind| match kind {
            WarningKind::Unused { reason } => reason,
            _ => UNKNOWN_CONNECTION,
        });
    }
    match catalogue::client_key(role, key).map(|d| d.status) {
        Some(Status::Used) => None,
        Some(Status::Unused { reason }) => Some(reason),
        _ => Some(CLIENT_OTHER),
    }
}

/// The client and the client key `key` sets, in a file whose `clusters` are `aliases`:
/// `(Producer, "linger.ms")` for `B.producer.linger.ms` or `A->B.producer.linger.ms`.
pub(crate) fn client_key_of<'a>(key: &'a str, aliases: &[String]) -> Option<(Role, &'a str)> {
    let rest = match parse_flow_key(key, aliases) {
        Some(FlowKey::Valid { rest, .. }) if is_flow_client_key(rest) => rest,
        Some(_) => return None,
        // The longest alias that, with its dot, starts the key.
        None => aliases
            .iter()
            .filter_map(|a| key.strip_prefix(a.as_str())?.strip_prefix('.'))
            .min_by_key(|rest| rest.len())?,
    };
    Role::ALL
        .into_iter()
        .find_map(|role| rest.strip_prefix(role.prefix()).map(|k| (role, k)))
}

/// The catalogue's entry for `key` as written in a file whose `clusters` are `aliases` (a flow
/// key with or without its `S->T.`, a client key with its prefixes); `None` for keys it does not
/// hold.
pub(crate) fn definition(key: &str, aliases: &[String]) -> Option<&'static catalogue::KeyDef> {
    if let Some((role, client_key)) = client_key_of(key, aliases) {
        return catalogue::client_key(role, client_key);
    }
    match parse_flow_key(key, aliases) {
        Some(FlowKey::Valid { rest, .. }) => catalogue::flow_key(rest),
        Some(_) => None,
        None => catalogue::flow_key(key),
    }
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

/// Deprecated keys still work; unused keys are MM2's; unknown keys are the least understood,
/// and one read with a near known key (a typo) better than one without.
fn rank(kind: &WarningKind) -> u8 {
    match kind {
        WarningKind::Deprecated { .. } => 0,
        WarningKind::Unused { .. } => 1,
        WarningKind::Unknown { hint: Some(_) } => 2,
        _ => 3,
    }
}

fn classify_top_level(key: &str) -> Option<WarningKind> {
    if let Some(replacement) = deprecated(key) {
        return Some(WarningKind::Deprecated { replacement });
    }
    if is_connection_key(key) {
        return classify_connection(key);
    }
    if is_flow_key(key) || TOP_LEVEL_KEYS.contains(&key) {
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
        hint: closest(key, flow_key_names().chain(TOP_LEVEL_KEYS.iter().copied())),
    })
}

fn classify_flow_suffix(rest: &str) -> Option<WarningKind> {
    if let Some(replacement) = deprecated(rest) {
        return Some(WarningKind::Deprecated { replacement });
    }
    if is_flow_key(rest) {
        return None;
    }
    if let Some(reason) = unused_reason(rest) {
        return Some(WarningKind::Unused { reason });
    }
    if is_flow_client_key(rest) {
        // Accepted as MM2 accepts it; a key strait's client does not act on says so.
        return Role::ALL.iter().find_map(|role| {
            let key = rest.strip_prefix(role.prefix())?;
            if is_connection_key(key) {
                return classify_connection(key);
            }
            client_key_unused(*role, key).map(|reason| WarningKind::Unused { reason })
        });
    }
    if is_connection_key(rest) || rest == "bootstrap.servers" {
        return Some(WarningKind::Unused {
            reason: FLOW_CONNECTION,
        });
    }
    Some(WarningKind::Unknown {
        hint: closest(rest, flow_key_names()),
    })
}

fn classify_cluster_suffix(rest: &str) -> Option<WarningKind> {
    // `T.exactly.once.source.support`: MM2's Connect worker setting for flows into `T`, which
    // strait reads for those flows (`pair.rs`).
    if rest == "bootstrap.servers" || rest == "exactly.once.source.support" {
        return None;
    }
    if is_connection_key(rest) {
        return classify_connection(rest);
    }
    for role in Role::ALL {
        if let Some(client_key) = rest.strip_prefix(role.prefix()) {
            return if client_key == "bootstrap.servers" {
                Some(WarningKind::Unused {
                    reason: ROLE_BOOTSTRAP,
                })
            } else if is_connection_key(client_key) {
                classify_connection(client_key)
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

/// The names of the flow keys strait reads.
fn flow_key_names() -> impl Iterator<Item = &'static str> {
    catalogue::KEYS
        .iter()
        .filter(|d| d.place == Place::Flow && d.status == Status::Used)
        .map(|d| d.name)
}

/// The known key nearest to `key` by edit distance, if it is near enough to be a typo.
fn closest<'a>(key: &str, known: impl Iterator<Item = &'a str>) -> Option<String> {
    known
        .map(|k| (edit_distance(key, k), k))
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
            "tasks.max.enforce",
            "A->B.tasks.max.enforce",
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

    #[test]
    fn connection_keys_are_used_ignored_or_unknown() {
        for k in [
            "security.protocol",
            "A.ssl.truststore.location",
            "B.consumer.sasl.jaas.config",
            "sasl.mechanism",
        ] {
            assert_eq!(classify(k, &aliases()), None, "{k}");
        }
        for k in [
            "A.ssl.cipher.suites",
            "ssl.protocol",
            "B.producer.ssl.keymanager.algorithm",
            "A.sasl.kerberos.kinit.cmd",
            "A.sasl.oauthbearer.expected.audience",
        ] {
            assert!(
                matches!(classify(k, &aliases()), Some(WarningKind::Unused { .. })),
                "{k}: {:?}",
                classify(k, &aliases())
            );
        }
        assert_eq!(
            classify("A.ssl.truststore.locaton", &aliases()),
            Some(WarningKind::Unknown {
                hint: Some("ssl.truststore.location".into())
            })
        );
        assert!(client_key_unused(Role::Consumer, "ssl.cipher.suites").is_some());
        assert_eq!(
            client_key_unused(Role::Consumer, "ssl.keystore.location"),
            None
        );
    }

    #[test]
    fn definitions_read_prefixes() {
        let aliases = vec!["us-west".to_owned(), "us-west.b".to_owned()];
        let name = |k: &str| definition(k, &aliases).map(|d| d.name);
        assert_eq!(name("us-west->us-west.b.topics"), Some("topics"));
        assert_eq!(name("offset.lag.max"), Some("offset.lag.max"));
        assert_eq!(
            name("us-west.b.consumer.fetch.max.bytes"),
            Some("fetch.max.bytes")
        );
        assert_eq!(
            name("us-west->us-west.b.producer.linger.ms"),
            Some("linger.ms")
        );
        assert_eq!(
            name("us-west->us-west.b.admin.timeout.ms"),
            Some("admin.timeout.ms")
        );
        assert_eq!(name("us-west.consumer.max.poll.records"), None);
        assert_eq!(
            client_key_of("us-west.b.producer.acks", &aliases),
            Some((Role::Producer, "acks"))
        );
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
