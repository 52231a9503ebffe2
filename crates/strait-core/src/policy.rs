//! MM2's replication policy: how a remote topic is named, how a name is read back into its source
//! cluster and upstream topic, which topics are internal, and when a topic would loop
//! (`docs/mm2-behaviour.md` §1.6–§1.7).
//!
//! This is a faithful port of `DefaultReplicationPolicy` and `IdentityReplicationPolicy` from
//! `connect/mirror-client`, including their corner cases, because strait must name topics exactly
//! as MM2 does for MM2 tooling (`RemoteClusterUtils`, `MirrorClient`) to keep working:
//! - `topic_source` follows Java's `String.split`, which drops trailing empty pieces: `"A."` has no
//!   source, `".orders"` has the empty source `""`.
//! - internal topic names use the configured separator unless
//!   `replication.policy.internal.topic.separator.enabled=false` (KIP-690).
//! - the identity policy prefixes heartbeats only, recognises a heartbeats topic by the suffix
//!   `heartbeats` (so `myheartbeats` counts, as in MM2), and cannot detect cycles.

/// MM2's class name for the default policy (`replication.policy.class`).
pub const DEFAULT_POLICY_CLASS: &str = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy";
/// MM2's class name for the identity policy (`replication.policy.class`, Kafka 3.0+).
pub const IDENTITY_POLICY_CLASS: &str = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy";
/// The default `replication.policy.separator`.
pub const DEFAULT_SEPARATOR: &str = ".";

const HEARTBEATS_TOPIC: &str = "heartbeats";

/// How remote topics are named, with MM2's semantics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicationPolicy {
    /// `DefaultReplicationPolicy`: `orders` from cluster `us-west` becomes `us-west.orders`.
    Default {
        /// `replication.policy.separator` (default `.`).
        separator: String,
        /// `replication.policy.internal.topic.separator.enabled` (default true): use `separator`
        /// in the names of the offset-syncs and checkpoints topics too (KIP-690).
        internal_topic_separator_enabled: bool,
    },
    /// `IdentityReplicationPolicy`: topic names are kept; only heartbeats are prefixed.
    Identity {
        /// `source.cluster.alias`: what [`ReplicationPolicy::topic_source`] answers for any
        /// non-heartbeats topic. MM2 sets it to the flow's source alias.
        source_alias: Option<String>,
        /// `replication.policy.separator`, used for heartbeats and internal topics.
        separator: String,
        /// As for [`ReplicationPolicy::Default`].
        internal_topic_separator_enabled: bool,
    },
}

impl Default for ReplicationPolicy {
    /// MM2's default: `DefaultReplicationPolicy` with separator `.`.
    fn default() -> Self {
        Self::with_separator(DEFAULT_SEPARATOR)
    }
}

impl ReplicationPolicy {
    /// The default policy with the given separator (internal topics use it too).
    pub fn with_separator(separator: impl Into<String>) -> Self {
        Self::Default {
            separator: separator.into(),
            internal_topic_separator_enabled: true,
        }
    }

    /// The identity policy with separator `.`, answering `source_alias` as every topic's source.
    pub fn identity(source_alias: Option<String>) -> Self {
        Self::Identity {
            source_alias,
            separator: DEFAULT_SEPARATOR.to_owned(),
            internal_topic_separator_enabled: true,
        }
    }

    /// MM2's class name for this policy, as `replication.policy.class` spells it.
    pub fn class_name(&self) -> &'static str {
        match self {
            Self::Default { .. } => DEFAULT_POLICY_CLASS,
            Self::Identity { .. } => IDENTITY_POLICY_CLASS,
        }
    }

    /// The separator between cluster alias and topic.
    pub fn separator(&self) -> &str {
        match self {
            Self::Default { separator, .. } | Self::Identity { separator, .. } => separator,
        }
    }

    fn internal_separator(&self) -> &str {
        match self {
            Self::Default {
                separator,
                internal_topic_separator_enabled,
            }
            | Self::Identity {
                separator,
                internal_topic_separator_enabled,
                ..
            } => {
                if *internal_topic_separator_enabled {
                    separator
                } else {
                    "."
                }
            }
        }
    }

    /// The name on the target of `topic` replicated from the cluster `source_alias`.
    pub fn format_remote_topic(&self, source_alias: &str, topic: &str) -> String {
        match self {
            Self::Identity { .. } if !looks_like_heartbeat(topic) => topic.to_owned(),
            _ => format!("{source_alias}{}{topic}", self.separator()),
        }
    }

    /// What [`ReplicationPolicy::format_remote_topic`] puts before a topic's name (heartbeats
    /// aside): `A.` for the default policy, nothing for the identity policy.
    pub fn remote_topic_prefix(&self, source_alias: &str) -> String {
        match self {
            Self::Identity { .. } => String::new(),
            Self::Default { separator, .. } => format!("{source_alias}{separator}"),
        }
    }

    /// Whether the remote name of `topic` from `source_alias` reads back as a remote topic of
    /// that cluster, as [`ReplicationPolicy::is_cycle`] needs to stop it coming back. Only a
    /// name made of separators alone does not (`_` with separator `_` becomes `A__`, which
    /// Java's split reads as no remote topic): MM2 mirrors it, and mirrors its copy back once;
    /// strait does not mirror it (`docs/configuration.md`).
    pub fn traces(&self, source_alias: &str, topic: &str) -> bool {
        match self {
            Self::Identity { .. } => true,
            Self::Default { separator, .. } => {
                split_source(separator, &self.format_remote_topic(source_alias, topic)).is_some()
            }
        }
    }

    /// The alias of the cluster `topic` was replicated from, or `None` when it is not a remote
    /// topic. For the identity policy, the configured source alias (heartbeats excepted).
    pub fn topic_source<'a>(&'a self, topic: &'a str) -> Option<&'a str> {
        match self {
            Self::Identity { source_alias, .. } if !looks_like_heartbeat(topic) => {
                source_alias.as_deref()
            }
            _ => split_source(self.separator(), topic).map(|(source, _)| source),
        }
    }

    /// The name of `topic` one hop upstream, or `None` when it is not a remote topic. For the
    /// identity policy, `topic` itself (heartbeats excepted).
    pub fn upstream_topic<'a>(&self, topic: &'a str) -> Option<&'a str> {
        match self {
            Self::Identity { .. } if !looks_like_heartbeat(topic) => Some(topic),
            _ => split_source(self.separator(), topic).map(|(_, upstream)| upstream),
        }
    }

    /// The name of `topic` on the cluster it was first written to, through every hop; `topic`
    /// itself when it is not a remote topic.
    pub fn original_topic<'a>(&self, topic: &'a str) -> &'a str {
        let mut current = topic;
        // Every hop of the default policy shortens the name, so this ends; the bound is a guard.
        for _ in 0..=topic.len() {
            match self.upstream_topic(current) {
                Some(upstream) if upstream != current => current = upstream,
                _ => break,
            }
        }
        current
    }

    /// The heartbeats topic: `heartbeats`.
    pub fn heartbeats_topic(&self) -> &'static str {
        HEARTBEATS_TOPIC
    }

    /// The offset-syncs topic naming `other_alias`: `mm2-offset-syncs.<alias>.internal` with
    /// the separator rules of KIP-690. Which alias and which cluster depend on
    /// `offset-syncs.topic.location` (see [`crate::config::FlowConfig::offset_syncs_topic`]).
    pub fn offset_syncs_topic(&self, other_alias: &str) -> String {
        let sep = self.internal_separator();
        format!("mm2-offset-syncs{sep}{other_alias}{sep}internal")
    }

    /// The checkpoints topic written on the target for groups of `source_alias`:
    /// `<alias>.checkpoints.internal`.
    pub fn checkpoints_topic(&self, source_alias: &str) -> String {
        format!("{source_alias}{}", self.checkpoints_suffix())
    }

    fn checkpoints_suffix(&self) -> String {
        let sep = self.internal_separator();
        format!("{sep}checkpoints{sep}internal")
    }

    /// Whether `topic` is a checkpoints topic (by its suffix).
    pub fn is_checkpoints_topic(&self, topic: &str) -> bool {
        topic.ends_with(&self.checkpoints_suffix())
    }

    /// Whether `topic` is a heartbeats topic: its original name is `heartbeats`, so
    /// `A.heartbeats` and `B.A.heartbeats` are.
    pub fn is_heartbeats_topic(&self, topic: &str) -> bool {
        self.original_topic(topic) == HEARTBEATS_TOPIC
    }

    /// Whether `topic` is one of MM2's internal topics, as Kafka 4's MM2 tells them (KIP-1074):
    /// a name that starts with `mm2` and ends with `<separator>internal` (offset syncs, and the
    /// configs, offsets and status topics of MM2's dedicated mode), or a checkpoints topic.
    pub fn is_mm2_internal_topic(&self, topic: &str) -> bool {
        let internal_suffix = format!("{}internal", self.internal_separator());
        (topic.starts_with("mm2") && topic.ends_with(&internal_suffix))
            || self.is_checkpoints_topic(topic)
    }

    /// The names [`ReplicationPolicy::is_internal_topic`] holds internal, as one regex (for the
    /// `regex` crate, to match whole names).
    pub fn internal_topics_pattern(&self) -> String {
        let internal = regex::escape(&format!("{}internal", self.internal_separator()));
        let checkpoints = regex::escape(&self.checkpoints_suffix());
        format!(r"mm2.*{internal}|.*{checkpoints}|__.*|\..*|strait-offset-map\..*\.internal")
    }

    /// Whether `topic` is internal and never replicated: MM2's internal topics, Kafka's (`__*`,
    /// `.*`) and strait's own offset maps ([`is_strait_internal_topic`]). A user's topic whose
    /// name merely ends with `.internal` or `-internal` is not internal: Kafka 4's MM2 mirrors it
    /// (KIP-1074), and so does strait.
    pub fn is_internal_topic(&self, topic: &str) -> bool {
        self.is_mm2_internal_topic(topic)
            || topic.starts_with("__")
            || topic.starts_with('.')
            || is_strait_internal_topic(topic)
    }

    /// Whether replicating `topic` from the cluster `source_alias` into the cluster
    /// `target_alias` would send it round a loop (`MirrorSourceConnector.isCycle`): some hop's
    /// source is the target, or, with the default policy, the source itself (KAFKA-9914): a
    /// topic on the source named after the source was mirrored into it under another alias (two
    /// aliases for one cluster, or MM2 instances that name the clusters differently), and
    /// mirroring it on would prefix it again at every turn (`A.A.A.orders`). The identity policy
    /// keeps the first test only, as MM2 does: it reads every topic as the source's own. A topic
    /// that is its own upstream (the identity policy) is never a cycle: that policy cannot see
    /// them.
    pub fn is_cycle(&self, topic: &str, source_alias: &str, target_alias: &str) -> bool {
        let own_name_loops = matches!(self, Self::Default { .. });
        let mut current = topic;
        for _ in 0..=topic.len() {
            let Some(source) = self.topic_source(current) else {
                return false;
            };
            if source == target_alias || (own_name_loops && source == source_alias) {
                return true;
            }
            match self.upstream_topic(current) {
                Some(upstream) if upstream != current => current = upstream,
                _ => return false,
            }
        }
        false
    }
}

/// The identity policy's test for heartbeats: the name ends with `heartbeats`.
fn looks_like_heartbeat(topic: &str) -> bool {
    topic.ends_with(HEARTBEATS_TOPIC)
}

/// Splits `topic` into (source alias, upstream topic) as `DefaultReplicationPolicy` does with
/// `Pattern.split`: the source is the text before the first separator, and there must be a
/// non-empty piece after it (Java drops trailing empty pieces, so `"A."` and `"A.."` are not
/// remote topics). An empty separator never splits.
fn split_source<'a>(separator: &str, topic: &'a str) -> Option<(&'a str, &'a str)> {
    if separator.is_empty() {
        return None;
    }
    let at = topic.find(separator)?;
    let rest = &topic[at + separator.len()..];
    if rest.split(separator).all(str::is_empty) {
        return None;
    }
    Some((&topic[..at], rest))
}

/// strait's own internal topics, never mirrored: the offset maps
/// (`strait-offset-map.<source alias>.internal`, `crate::internal::map_store`).
pub fn is_strait_internal_topic(topic: &str) -> bool {
    topic.starts_with("strait-offset-map.") && topic.ends_with(".internal")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn underscore() -> ReplicationPolicy {
        ReplicationPolicy::with_separator("_")
    }

    #[test]
    fn default_policy_names_remote_topics() {
        let p = ReplicationPolicy::default();
        assert_eq!(p.format_remote_topic("us-west", "orders"), "us-west.orders");
        assert_eq!(p.topic_source("us-west.orders"), Some("us-west"));
        assert_eq!(p.upstream_topic("us-west.orders"), Some("orders"));
        assert_eq!(p.original_topic("us-west.orders"), "orders");
        assert_eq!(p.topic_source("orders"), None);
        assert_eq!(p.upstream_topic("orders"), None);
        assert_eq!(p.original_topic("orders"), "orders");
        assert_eq!(p.class_name(), DEFAULT_POLICY_CLASS);
    }

    #[test]
    fn default_policy_reads_multi_hop_names() {
        let p = ReplicationPolicy::default();
        assert_eq!(p.topic_source("B.A.heartbeats"), Some("B"));
        assert_eq!(p.upstream_topic("B.A.heartbeats"), Some("A.heartbeats"));
        assert_eq!(p.original_topic("B.A.heartbeats"), "heartbeats");
        assert!(p.is_heartbeats_topic("heartbeats"));
        assert!(p.is_heartbeats_topic("A.heartbeats"));
        assert!(p.is_heartbeats_topic("B.A.heartbeats"));
        assert!(!p.is_heartbeats_topic("A.heartbeats2"));
        assert!(!p.is_heartbeats_topic("myheartbeats"));
    }

    #[test]
    fn split_follows_java_string_split() {
        let p = ReplicationPolicy::default();
        // Trailing empty pieces are dropped: not remote topics.
        assert_eq!(p.topic_source("A."), None);
        assert_eq!(p.topic_source("A.."), None);
        assert_eq!(p.topic_source("."), None);
        assert_eq!(p.topic_source(""), None);
        // A leading empty piece is kept: the source is "".
        assert_eq!(p.topic_source(".orders"), Some(""));
        assert_eq!(p.upstream_topic(".orders"), Some("orders"));
        // Only the first separator splits.
        assert_eq!(p.topic_source("a..b"), Some("a"));
        assert_eq!(p.upstream_topic("a..b"), Some(".b"));
        let long = ReplicationPolicy::with_separator("__");
        assert_eq!(long.topic_source("a___b"), Some("a"));
        assert_eq!(long.upstream_topic("a___b"), Some("_b"));
    }

    #[test]
    fn custom_separator() {
        let p = underscore();
        assert_eq!(p.format_remote_topic("us-west", "orders"), "us-west_orders");
        assert_eq!(p.topic_source("us-west_orders"), Some("us-west"));
        // The default separator means nothing to this policy.
        assert_eq!(p.topic_source("us-west.orders"), None);
        assert_eq!(p.original_topic("B_A_heartbeats"), "heartbeats");
        assert!(p.is_heartbeats_topic("B_A_heartbeats"));
        assert!(p.is_cycle("B_A_orders", "C", "A"));
    }

    #[test]
    fn internal_topic_names_follow_kip_690() {
        let p = ReplicationPolicy::default();
        assert_eq!(p.offset_syncs_topic("B"), "mm2-offset-syncs.B.internal");
        assert_eq!(p.checkpoints_topic("A"), "A.checkpoints.internal");
        assert_eq!(p.heartbeats_topic(), "heartbeats");

        let p = underscore();
        assert_eq!(p.offset_syncs_topic("B"), "mm2-offset-syncs_B_internal");
        assert_eq!(p.checkpoints_topic("A"), "A_checkpoints_internal");
        assert!(p.is_checkpoints_topic("A_checkpoints_internal"));
        assert!(!p.is_checkpoints_topic("A.checkpoints.internal"));
        assert!(p.is_mm2_internal_topic("mm2-offset-syncs_B_internal"));
        assert!(p.is_internal_topic("mm2-offset-syncs_B_internal"));

        let legacy = ReplicationPolicy::Default {
            separator: "_".into(),
            internal_topic_separator_enabled: false,
        };
        assert_eq!(
            legacy.offset_syncs_topic("B"),
            "mm2-offset-syncs.B.internal"
        );
        assert_eq!(legacy.checkpoints_topic("A"), "A.checkpoints.internal");
        assert!(legacy.is_checkpoints_topic("A.checkpoints.internal"));
        // Remote topics still use the separator.
        assert_eq!(legacy.format_remote_topic("A", "t"), "A_t");
    }

    #[test]
    fn internal_topics() {
        let p = ReplicationPolicy::default();
        for t in [
            "__consumer_offsets",
            "__transaction_state",
            ".hidden",
            "mm2-offset-syncs.B.internal",
            "A.checkpoints.internal",
            "B.A.checkpoints.internal",
            "mm2-configs.A.internal",
            "mm2-offsets.A.internal",
            "mm2-status.A.internal",
            "strait-offset-map.A.internal",
        ] {
            assert!(p.is_internal_topic(t), "{t}");
        }
        // KIP-1074: users' topics named like internal ones are mirrored.
        for t in [
            "orders",
            "A.orders",
            "internal",
            "heartbeats",
            "_single",
            "x.internal",
            "audit-internal",
            "connect-offsets-internal",
            "A.x.internal",
            "mm2-offset-syncs.B",
        ] {
            assert!(!p.is_internal_topic(t), "{t}");
        }
        assert!(p.is_checkpoints_topic("A.checkpoints.internal"));
        assert!(!p.is_checkpoints_topic("A.checkpoints"));
        assert!(!p.is_mm2_internal_topic("internal"));
        assert!(!p.is_mm2_internal_topic(".internal2"));
    }

    #[test]
    fn cycles_recurse_upstream() {
        let p = ReplicationPolicy::default();
        // A->B: a topic that came from B would go back to B.
        assert!(p.is_cycle("B.orders", "A", "B"));
        assert!(p.is_cycle("C.B.orders", "A", "B"));
        assert!(p.is_cycle("D.C.B.orders", "A", "B"));
        assert!(!p.is_cycle("orders", "A", "B"));
        assert!(!p.is_cycle("C.orders", "A", "B"));
        assert!(!p.is_cycle("D.C.orders", "A", "B"));
        // B->A: A's heartbeats mirrored to B come back as a cycle.
        assert!(p.is_cycle("A.heartbeats", "B", "A"));
        assert!(!p.is_cycle("heartbeats", "B", "A"));
        // Names that are not remote topics are never cycles.
        assert!(!p.is_cycle("B.", "A", "B"));
    }

    /// KAFKA-9914: a topic on the source that some hop says came from the source itself was
    /// mirrored into it under another alias; mirroring it on would add a prefix at every turn.
    #[test]
    fn a_topic_named_after_its_own_cluster_is_a_cycle() {
        let p = ReplicationPolicy::default();
        // `clusters = kafka, backup`, both the same cluster, `kafka->backup`: `kafka.orders`
        // is the copy of `orders`, and must not become `kafka.kafka.orders`.
        assert!(p.is_cycle("kafka.orders", "kafka", "backup"));
        assert!(p.is_cycle("kafka.kafka.orders", "kafka", "backup"));
        // At any hop: another instance named this cluster `A` and mirrored `A.orders` on.
        assert!(p.is_cycle("C.A.orders", "A", "B"));
        assert!(!p.is_cycle("C.D.orders", "A", "B"));
        assert!(!p.is_cycle("orders", "kafka", "backup"));
        // With another separator too.
        let p = ReplicationPolicy::with_separator("_");
        assert!(p.is_cycle("A_orders", "A", "B"));
        assert!(!p.is_cycle("C_orders", "A", "B"));
        // The identity policy reads every topic as the source's own: only the target's test.
        let p = ReplicationPolicy::identity(Some("A".into()));
        assert!(!p.is_cycle("orders", "A", "B"));
        assert!(!p.is_cycle("A.orders", "A", "B"));
        assert!(p.is_cycle("B.heartbeats", "A", "B"));
    }

    #[test]
    fn internal_topics_pattern_matches_what_is_internal() {
        let names = [
            "mm2-offset-syncs.B.internal",
            "mm2-configs.A.internal",
            "A.checkpoints.internal",
            "__consumer_offsets",
            ".hidden",
            "strait-offset-map.A.internal",
            "orders",
            "orders.internal",
            "mm2",
            "A_checkpoints_internal",
            "mm2-offset-syncs_B_internal",
        ];
        for policy in [ReplicationPolicy::default(), underscore()] {
            let re = regex::Regex::new(&format!(r"\A(?:{})\z", policy.internal_topics_pattern()))
                .unwrap();
            for name in names {
                assert_eq!(re.is_match(name), policy.is_internal_topic(name), "{name}");
            }
        }
    }

    #[test]
    fn a_name_of_separators_alone_cannot_be_traced() {
        let p = underscore();
        assert!(!p.traces("A", "_"));
        assert_eq!(p.topic_source(&p.format_remote_topic("A", "_")), None);
        assert!(p.traces("A", "orders_"));
        assert!(p.traces("A", "_orders"));
        assert!(ReplicationPolicy::default().traces("A", "_"));
        assert!(ReplicationPolicy::identity(Some("A".into())).traces("A", "_"));
    }

    #[test]
    fn identity_policy_keeps_names() {
        let p = ReplicationPolicy::identity(Some("A".into()));
        assert_eq!(p.class_name(), IDENTITY_POLICY_CLASS);
        assert_eq!(p.format_remote_topic("A", "orders"), "orders");
        assert_eq!(p.format_remote_topic("A", "us.orders"), "us.orders");
        assert_eq!(p.topic_source("orders"), Some("A"));
        assert_eq!(p.topic_source("B.orders"), Some("A"));
        assert_eq!(p.upstream_topic("orders"), Some("orders"));
        assert_eq!(p.original_topic("orders"), "orders");
        // Heartbeats are still prefixed and read back as the default policy does.
        assert_eq!(p.format_remote_topic("A", "heartbeats"), "A.heartbeats");
        assert_eq!(p.topic_source("B.A.heartbeats"), Some("B"));
        assert_eq!(p.upstream_topic("B.A.heartbeats"), Some("A.heartbeats"));
        assert_eq!(p.original_topic("B.A.heartbeats"), "heartbeats");
        assert!(p.is_heartbeats_topic("A.heartbeats"));
        // MM2 matches heartbeats by suffix.
        assert_eq!(p.format_remote_topic("A", "myheartbeats"), "A.myheartbeats");

        let unnamed = ReplicationPolicy::identity(None);
        assert_eq!(unnamed.topic_source("orders"), None);
    }

    #[test]
    fn identity_policy_cannot_see_cycles() {
        // Flow A->B: every topic's source is A, and a topic is its own upstream.
        let p = ReplicationPolicy::identity(Some("A".into()));
        assert!(!p.is_cycle("orders", "A", "B"));
        assert!(!p.is_cycle("B.orders", "A", "B"));
        // Except when the configured source alias is the target itself.
        assert!(p.is_cycle("orders", "C", "A"));
        // Heartbeats keep their prefixes, so their cycles are seen.
        assert!(p.is_cycle("B.heartbeats", "A", "B"));
        assert!(!p.is_cycle("C.heartbeats", "A", "B"));
    }

    #[test]
    fn identity_policy_internal_topics_use_separator() {
        let p = ReplicationPolicy::Identity {
            source_alias: Some("A".into()),
            separator: "_".into(),
            internal_topic_separator_enabled: true,
        };
        assert_eq!(p.offset_syncs_topic("B"), "mm2-offset-syncs_B_internal");
        assert_eq!(p.checkpoints_topic("A"), "A_checkpoints_internal");
        assert_eq!(p.format_remote_topic("A", "heartbeats"), "A_heartbeats");
    }

    #[test]
    fn empty_separator_never_splits() {
        let p = ReplicationPolicy::with_separator("");
        assert_eq!(p.topic_source("A.orders"), None);
        assert!(!p.is_cycle("A.orders", "C", "A"));
        assert_eq!(p.original_topic("A.orders"), "A.orders");
    }
}
