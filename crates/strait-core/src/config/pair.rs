//! One pair of clusters `S->T`: its flow keys resolved (`S->T.<key>` over top-level `<key>` over
//! MM2's default, as `MirrorMakerConfig.connectorBaseConfig` resolves them), checked and typed.

use std::time::Duration;

use strait_kafka::admin::IsolationLevel;

use super::error::{ConfigError, ConfigErrorReason as Reason};
use super::keys;
use super::model::{
    ClusterAlias, FlowConfig, HeartbeatEmitter, OffsetSyncsLocation, StartPosition, UseDefaultsFrom,
};
use super::resolve::{is_topic_char, Found, Resolver};
use super::MAX_BYTES_IN_FLIGHT_DEFAULT;
use crate::filter::{
    java_trim, FilterError, GroupFilter, PatternList, TopicFilter,
    CONFIG_PROPERTIES_EXCLUDE_DEFAULT, GROUPS_DEFAULT, GROUPS_EXCLUDE_DEFAULT, TOPICS_DEFAULT,
    TOPICS_EXCLUDE_DEFAULT,
};
use crate::policy::{ReplicationPolicy, DEFAULT_POLICY_CLASS, IDENTITY_POLICY_CLASS};

const RF_EXPECTED: &str = "an integer from 1 to 32767, or -1 for the broker's default";

/// The flow `source->target` if enabled, and the pair's heartbeat emitter if any.
pub(super) fn pair(
    r: &Resolver<'_>,
    source: &str,
    target: &str,
) -> Result<(Option<FlowConfig>, Option<HeartbeatEmitter>), ConfigError> {
    let s = Scope {
        r,
        prefix: format!("{source}->{target}."),
    };
    let enabled = s.bool("enabled", false)?;
    let source_alias = s.alias("source.cluster.alias", source)?;
    let target_alias = s.alias("target.cluster.alias", target)?;
    let heartbeats_rf = s.replication_factor("heartbeats.topic.replication.factor", 3)?;
    let heartbeat = s
        .periodic("emit.heartbeats", true, 1)?
        .map(|interval| HeartbeatEmitter {
            target: ClusterAlias::new(target),
            source_alias: source_alias.clone(),
            target_alias: target_alias.clone(),
            interval,
            topic_replication_factor: heartbeats_rf,
        });

    s.only_default_class(
        "topic.filter.class",
        "org.apache.kafka.connect.mirror.DefaultTopicFilter",
    )?;
    s.only_default_class(
        "group.filter.class",
        "org.apache.kafka.connect.mirror.DefaultGroupFilter",
    )?;
    s.only_default_class(
        "config.property.filter.class",
        "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter",
    )?;
    s.only_default_class(
        "forwarding.admin.class",
        "org.apache.kafka.clients.admin.ForwardingAdmin",
    )?;

    let topics = TopicFilter::from_lists(
        s.patterns(&["topics"], TOPICS_DEFAULT)?,
        s.patterns(
            &["topics.exclude", "topics.blacklist"],
            TOPICS_EXCLUDE_DEFAULT,
        )?,
    );
    let groups = GroupFilter::from_lists(
        s.patterns(&["groups"], GROUPS_DEFAULT)?,
        s.patterns(
            &["groups.exclude", "groups.blacklist"],
            GROUPS_EXCLUDE_DEFAULT,
        )?,
    );
    let config_properties_exclude = s.patterns(
        &["config.properties.exclude", "config.properties.blacklist"],
        CONFIG_PROPERTIES_EXCLUDE_DEFAULT,
    )?;

    let flow = FlowConfig {
        source: ClusterAlias::new(source),
        target: ClusterAlias::new(target),
        policy: s.policy(source_alias.as_str())?,
        source_alias,
        target_alias,
        topics,
        groups,
        replication_factor: s.replication_factor("replication.factor", 2)?,
        offset_syncs_topic_replication_factor: s
            .replication_factor("offset-syncs.topic.replication.factor", 3)?,
        checkpoints_topic_replication_factor: s
            .replication_factor("checkpoints.topic.replication.factor", 3)?,
        offset_syncs_location: s.choice(
            "offset-syncs.topic.location",
            "`source` or `target`",
            &[
                ("source", OffsetSyncsLocation::Source),
                ("target", OffsetSyncsLocation::Target),
            ],
            false,
        )?,
        emit_offset_syncs: s.bool("emit.offset-syncs.enabled", true)?,
        offset_lag_max: s.unsigned("offset.lag.max", 100, false)?,
        refresh_topics: s.periodic("refresh.topics", true, 600)?,
        refresh_groups: s.periodic("refresh.groups", true, 600)?,
        sync_topic_configs: s.periodic("sync.topic.configs", true, 600)?,
        sync_topic_acls: s.periodic("sync.topic.acls", true, 600)?,
        emit_checkpoints: s.periodic("emit.checkpoints", true, 60)?,
        sync_group_offsets: s.periodic("sync.group.offsets", false, 60)?,
        heartbeats_replication: s.bool("heartbeats.replication.enabled", true)?,
        config_properties_exclude,
        use_defaults_from: s.choice(
            "use.defaults.from",
            "`target` or `source`",
            &[
                ("target", UseDefaultsFrom::Target),
                ("source", UseDefaultsFrom::Source),
            ],
            false,
        )?,
        admin_timeout: Duration::from_millis(s.unsigned("admin.timeout.ms", 60_000, true)?),
        max_bytes_in_flight: s.unsigned(
            keys::STRAIT_MAX_BYTES_IN_FLIGHT,
            MAX_BYTES_IN_FLIGHT_DEFAULT,
            true,
        )?,
        isolation_level: s.isolation_level(source, target)?,
        sync_topic_deletions: s.bool(keys::STRAIT_SYNC_TOPIC_DELETIONS, false)?,
        auto_offset_reset: s.auto_offset_reset(source, target)?,
        client_overrides: r.flow_client(&s.prefix)?,
    };
    Ok((enabled.then_some(flow), heartbeat))
}

/// The keys of one pair `S->T`: the flow's own over top level.
struct Scope<'r, 'a> {
    r: &'r Resolver<'a>,
    /// `S->T.`
    prefix: String,
}

impl<'a> Scope<'_, 'a> {
    fn get(&self, key: &str) -> Option<Found<'a>> {
        self.r
            .top(&format!("{}{key}", self.prefix))
            .or_else(|| self.r.top(key))
    }

    fn bool(&self, key: &str, default: bool) -> Result<bool, ConfigError> {
        let Some(found) = self.get(key) else {
            return Ok(default);
        };
        let value = java_trim(found.value);
        if value.eq_ignore_ascii_case("true") {
            Ok(true)
        } else if value.eq_ignore_ascii_case("false") {
            Ok(false)
        } else {
            let reason = Reason::InvalidBoolean {
                value: found.value.to_owned(),
            };
            Err(self.r.fail(&found, reason))
        }
    }

    /// A Java `long` that must be 0 or more (or 1 or more when `positive`).
    fn unsigned(&self, key: &str, default: u64, positive: bool) -> Result<u64, ConfigError> {
        let Some(found) = self.get(key) else {
            return Ok(default);
        };
        let parsed = java_trim(found.value).parse::<i64>().ok();
        match parsed.and_then(|n| u64::try_from(n).ok()) {
            Some(n) if n > 0 || !positive => Ok(n),
            _ => {
                let expected = if positive {
                    "a whole number of 1 or more"
                } else {
                    "a whole number of 0 or more"
                };
                let reason = Reason::InvalidNumber {
                    value: found.value.to_owned(),
                    expected,
                };
                Err(self.r.fail(&found, reason))
            }
        }
    }

    /// `name.enabled` and `name.interval.seconds`: the interval, or `None` when disabled.
    fn periodic(
        &self,
        name: &str,
        default_enabled: bool,
        default_seconds: u64,
    ) -> Result<Option<Duration>, ConfigError> {
        let enabled = self.bool(&format!("{name}.enabled"), default_enabled)?;
        let key = format!("{name}.interval.seconds");
        let seconds = match self.get(&key) {
            None => default_seconds,
            Some(found) => {
                let value = found.value.to_owned();
                match java_trim(found.value).parse::<i64>() {
                    Ok(n) if n < 0 => {
                        return Err(self.r.fail(&found, Reason::NegativeInterval { value }))
                    }
                    Ok(0) => return Err(self.r.fail(&found, Reason::ZeroInterval { value })),
                    Ok(n) => n.unsigned_abs(),
                    Err(_) => {
                        let expected = "a whole number of seconds";
                        return Err(self
                            .r
                            .fail(&found, Reason::InvalidNumber { value, expected }));
                    }
                }
            }
        };
        Ok(enabled.then(|| Duration::from_secs(seconds)))
    }

    /// A replication factor: -1 (the broker's default) or 1 to 32767.
    fn replication_factor(&self, key: &str, default: i16) -> Result<i16, ConfigError> {
        let Some(found) = self.get(key) else {
            return Ok(default);
        };
        match java_trim(found.value).parse::<i16>() {
            Ok(n) if n == -1 || n >= 1 => Ok(n),
            _ => {
                let reason = Reason::InvalidNumber {
                    value: found.value.to_owned(),
                    expected: RF_EXPECTED,
                };
                Err(self.r.fail(&found, reason))
            }
        }
    }

    /// One of fixed values (trimmed; case-sensitive like MM2's `ValidString` unless
    /// `ignore_case`).
    fn choice<T: Copy + Default>(
        &self,
        key: &str,
        choices_text: &'static str,
        choices: &[(&str, T)],
        ignore_case: bool,
    ) -> Result<T, ConfigError> {
        let Some(found) = self.get(key) else {
            return Ok(T::default());
        };
        let value = java_trim(found.value);
        choices
            .iter()
            .find(|(name, _)| {
                if ignore_case {
                    name.eq_ignore_ascii_case(value)
                } else {
                    *name == value
                }
            })
            .map(|(_, v)| *v)
            .ok_or_else(|| {
                let reason = Reason::InvalidChoice {
                    value: found.value.to_owned(),
                    choices: choices_text,
                };
                self.r.fail(&found, reason)
            })
    }

    /// `source.cluster.alias` / `target.cluster.alias`, default the cluster's own alias.
    fn alias(&self, key: &str, default: &str) -> Result<ClusterAlias, ConfigError> {
        let Some(found) = self.get(key) else {
            return Ok(ClusterAlias::new(default));
        };
        let alias = java_trim(found.value);
        if alias.is_empty() || !alias.chars().all(is_topic_char) {
            let reason = Reason::InvalidAlias {
                alias: alias.to_owned(),
                why: "must be non-empty and hold only letters, digits, `.`, `_` and `-`",
            };
            return Err(self.r.fail(&found, reason));
        }
        Ok(ClusterAlias::new(alias))
    }

    /// The first of `keys` that is set (each flow-over-top), as a pattern list; else `default`.
    /// MM2 prefers `topics.exclude` from any level over the legacy `topics.blacklist`.
    fn patterns(&self, keys: &[&str], default: &str) -> Result<PatternList, ConfigError> {
        let found = keys.iter().find_map(|k| self.get(k));
        let (value, found) = match &found {
            Some(f) => (f.value, Some(f)),
            None => (default, None),
        };
        PatternList::parse(value).map_err(|FilterError { pattern, message }| {
            let reason = Reason::InvalidRegex { pattern, message };
            match found {
                Some(f) => self.r.fail(f, reason),
                None => self.r.error(None, keys.first().copied(), reason),
            }
        })
    }

    fn only_default_class(&self, key: &str, default: &'static str) -> Result<(), ConfigError> {
        match self.get(key) {
            Some(found) if java_trim(found.value) != default => {
                let reason = Reason::UnsupportedClass {
                    class: found.value.to_owned(),
                    supported: default.to_owned(),
                };
                Err(self.r.fail(&found, reason))
            }
            _ => Ok(()),
        }
    }

    fn policy(&self, source_alias: &str) -> Result<ReplicationPolicy, ConfigError> {
        // MM2 hands the separator to the policy untrimmed (`originals()`).
        let separator = match self.get("replication.policy.separator") {
            None => ".".to_owned(),
            Some(found) if found.value.is_empty() => {
                return Err(self.r.fail(&found, Reason::EmptySeparator));
            }
            Some(found) if !found.value.chars().all(is_topic_char) => {
                let reason = Reason::InvalidSeparator {
                    value: found.value.to_owned(),
                };
                return Err(self.r.fail(&found, reason));
            }
            Some(found) => found.value.to_owned(),
        };
        let internal_topic_separator_enabled =
            self.bool("replication.policy.internal.topic.separator.enabled", true)?;
        let class = self.get("replication.policy.class");
        match class.as_ref().map(|f| java_trim(f.value)) {
            None | Some(DEFAULT_POLICY_CLASS) => Ok(ReplicationPolicy::Default {
                separator,
                internal_topic_separator_enabled,
            }),
            Some(IDENTITY_POLICY_CLASS) => Ok(ReplicationPolicy::Identity {
                source_alias: Some(source_alias.to_owned()),
                separator,
                internal_topic_separator_enabled,
            }),
            Some(other) => {
                let reason = Reason::UnsupportedClass {
                    class: other.to_owned(),
                    supported: format!("{DEFAULT_POLICY_CLASS} and {IDENTITY_POLICY_CLASS}"),
                };
                let found = class.as_ref().map(|f| (f.line, f.key.as_str()));
                Err(self.r.error(found.map(|f| f.0), found.map(|f| f.1), reason))
            }
        }
    }

    /// `strait.isolation.level`, else the source consumer's `isolation.level`, else
    /// read_committed.
    /// The source consumer's `auto.offset.reset`, where MM2's source consumer reads it
    /// (`A.consumer.`, then the flow's `A->B.consumer.`); MM2 sets `earliest` when neither does.
    fn auto_offset_reset(&self, source: &str, target: &str) -> Result<StartPosition, ConfigError> {
        let found = self
            .r
            .top(&format!("{source}->{target}.consumer.auto.offset.reset"))
            .or_else(|| self.r.top(&format!("{source}.consumer.auto.offset.reset")));
        let Some(found) = found else {
            return Ok(StartPosition::Earliest);
        };
        match java_trim(found.value).to_ascii_lowercase().as_str() {
            "earliest" => Ok(StartPosition::Earliest),
            "latest" => Ok(StartPosition::Latest),
            _ => {
                // `none` would fail every partition never mirrored (MM2's task fails the same
                // way); `by_duration:` (KIP-1106) is not supported yet.
                let reason = Reason::InvalidChoice {
                    value: found.value.to_owned(),
                    choices: "`earliest` or `latest`",
                };
                Err(self.r.fail(&found, reason))
            }
        }
    }

    fn isolation_level(&self, source: &str, target: &str) -> Result<IsolationLevel, ConfigError> {
        let found = self.get(keys::STRAIT_ISOLATION_LEVEL).or_else(|| {
            self.r
                .top(&format!("{source}.consumer.isolation.level"))
                .or_else(|| {
                    self.r
                        .top(&format!("{source}->{target}.consumer.isolation.level"))
                })
        });
        let Some(found) = found else {
            return Ok(IsolationLevel::ReadCommitted);
        };
        match java_trim(found.value).to_ascii_lowercase().as_str() {
            "read_committed" => Ok(IsolationLevel::ReadCommitted),
            "read_uncommitted" => Ok(IsolationLevel::ReadUncommitted),
            _ => {
                let reason = Reason::InvalidChoice {
                    value: found.value.to_owned(),
                    choices: "`read_committed` or `read_uncommitted`",
                };
                Err(self.r.fail(&found, reason))
            }
        }
    }
}
