//! One pair of clusters `S->T`: its flow keys resolved (`S->T.<key>` over top-level `<key>` over
//! MM2's default, as `MirrorMakerConfig.connectorBaseConfig` resolves them), checked and typed.

use std::time::Duration;

use strait_kafka::admin::IsolationLevel;
use strait_kafka::produce::{Merge, MergeMode};

use super::catalogue::{self, Value};
use super::client::Role;
use super::error::{ConfigError, ConfigErrorReason as Reason};
use super::keys;
use super::model::{
    ClusterAlias, FlowConfig, HeartbeatEmitter, OffsetSyncsLocation, StartPosition,
    UseDefaultsFrom, WorkersConfig,
};
use super::resolve::{is_topic_char, reason, Found, Resolver};
use crate::filter::{java_trim, FilterError, GroupFilter, PatternList, TopicFilter};
use crate::policy::{ReplicationPolicy, DEFAULT_POLICY_CLASS, IDENTITY_POLICY_CLASS};

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
    let enabled = s.bool("enabled")?;
    let source_alias = s.alias("source.cluster.alias", source)?;
    let target_alias = s.alias("target.cluster.alias", target)?;
    let heartbeats_rf = s.replication_factor("heartbeats.topic.replication.factor")?;
    let heartbeat = s
        .periodic("emit.heartbeats")?
        .map(|interval| HeartbeatEmitter {
            target: ClusterAlias::new(target),
            source_alias: source_alias.clone(),
            target_alias: target_alias.clone(),
            interval,
            topic_replication_factor: heartbeats_rf,
        });

    for key in [
        "topic.filter.class",
        "group.filter.class",
        "config.property.filter.class",
        "forwarding.admin.class",
    ] {
        s.only_default_class(key)?;
    }

    let topics = TopicFilter::from_lists(
        s.patterns(&["topics"])?,
        s.patterns(&["topics.exclude", "topics.blacklist"])?,
    );
    let groups = GroupFilter::from_lists(
        s.patterns(&["groups"])?,
        s.patterns(&["groups.exclude", "groups.blacklist"])?,
    );
    let config_properties_exclude =
        s.patterns(&["config.properties.exclude", "config.properties.blacklist"])?;

    let flow = FlowConfig {
        source: ClusterAlias::new(source),
        target: ClusterAlias::new(target),
        policy: s.policy(source_alias.as_str())?,
        source_alias,
        target_alias,
        topics,
        groups,
        replication_factor: s.replication_factor("replication.factor")?,
        offset_syncs_topic_replication_factor: s
            .replication_factor("offset-syncs.topic.replication.factor")?,
        checkpoints_topic_replication_factor: s
            .replication_factor("checkpoints.topic.replication.factor")?,
        offset_syncs_location: s.choice(
            "offset-syncs.topic.location",
            &[
                ("source", OffsetSyncsLocation::Source),
                ("target", OffsetSyncsLocation::Target),
            ],
        )?,
        emit_offset_syncs: s.bool("emit.offset-syncs.enabled")?,
        offset_lag_max: s.whole("offset.lag.max")?,
        refresh_topics: s.periodic("refresh.topics")?,
        refresh_groups: s.periodic("refresh.groups")?,
        sync_topic_configs: s.periodic("sync.topic.configs")?,
        sync_topic_acls: s.periodic("sync.topic.acls")?,
        emit_checkpoints: s.periodic("emit.checkpoints")?,
        checkpoints_capture: Some(Duration::from_millis(
            s.whole(keys::STRAIT_CHECKPOINTS_CAPTURE_INTERVAL_MS)?,
        ))
        .filter(|d| !d.is_zero()),
        sync_group_offsets: s.periodic("sync.group.offsets")?,
        heartbeats_replication: s.bool("heartbeats.replication.enabled")?,
        config_properties_exclude,
        use_defaults_from: s.choice(
            "use.defaults.from",
            &[
                ("target", UseDefaultsFrom::Target),
                ("source", UseDefaultsFrom::Source),
            ],
        )?,
        admin_timeout: Duration::from_millis(s.whole("admin.timeout.ms")?),
        max_bytes_in_flight: s.whole(keys::STRAIT_MAX_BYTES_IN_FLIGHT)?,
        isolation_level: s.isolation_level(source, target)?,
        batch_merge: s.batch_merge()?,
        sync_topic_deletions: s.bool(keys::STRAIT_SYNC_TOPIC_DELETIONS)?,
        auto_offset_reset: s.auto_offset_reset(source, target)?,
        tasks_max: u32::try_from(s.whole("tasks.max")?).unwrap_or(u32::MAX),
        workers: s.workers(source, target)?,
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

    /// The value of `key` checked as the catalogue reads it (`None`: unset, use the default).
    fn checked(&self, key: &str) -> Result<Option<Found<'a>>, ConfigError> {
        let Some(found) = self.get(key) else {
            return Ok(None);
        };
        let kind = catalogue::flow_key(key).map_or(Value::Any, |d| d.value);
        match catalogue::check_value(kind, found.value) {
            Ok(()) => Ok(Some(found)),
            Err(expected) => Err(self.r.fail(&found, reason(expected, kind, found.value))),
        }
    }

    /// The value set, else the catalogue's default.
    fn value(&self, key: &str) -> Result<&'a str, ConfigError> {
        Ok(self
            .checked(key)?
            .map_or(catalogue::default_of(key), |f| f.value)
            .trim())
    }

    fn bool(&self, key: &str) -> Result<bool, ConfigError> {
        Ok(self.value(key)?.eq_ignore_ascii_case("true"))
    }

    /// A whole number, at least the catalogue's minimum.
    fn whole(&self, key: &str) -> Result<u64, ConfigError> {
        Ok(self.value(key)?.parse::<u64>().unwrap_or_default())
    }

    /// `name.enabled` and `name.interval.seconds`: the interval, or `None` when disabled.
    fn periodic(&self, name: &str) -> Result<Option<Duration>, ConfigError> {
        let enabled = self.bool(&format!("{name}.enabled"))?;
        let seconds = self
            .value(&format!("{name}.interval.seconds"))?
            .parse::<u64>()
            .unwrap_or(1);
        Ok(enabled.then(|| Duration::from_secs(seconds)))
    }

    /// `strait.workers.*`: the flow's workers' group, unless `strait.workers.enabled = false`.
    /// Workers are the default, so that any number of `strait run` on one file share the flow
    /// as MM2's dedicated mode shares it, instead of each writing every record.
    fn workers(&self, source: &str, target: &str) -> Result<Option<WorkersConfig>, ConfigError> {
        let exactly_once = self.exactly_once(target)?;
        let enabled = match self.checked(keys::STRAIT_WORKERS_ENABLED)? {
            Some(found) => found.value.trim().eq_ignore_ascii_case("true"),
            None => true,
        };
        if !enabled {
            return Ok(None);
        }
        let group_id = match self.value(keys::STRAIT_WORKERS_GROUP_ID)? {
            "" => format!("strait-{source}-{target}"),
            id => id.to_owned(),
        };
        Ok(Some(WorkersConfig {
            group_id,
            session_timeout: Duration::from_millis(
                self.whole(keys::STRAIT_WORKERS_SESSION_TIMEOUT_MS)?,
            ),
            instance_id: Some(self.value(keys::STRAIT_WORKERS_GROUP_INSTANCE_ID)?)
                .filter(|id| !id.is_empty())
                .map(str::to_owned),
            exactly_once,
        }))
    }

    /// `exactly.once.source.support = enabled`: the flow's own key (`S->T.`), else the target
    /// cluster's (`T.`, the form Kafka's documentation gives for MM2's dedicated mode, where it
    /// is a setting of the Connect workers of flows into `T`), else the top-level one.
    fn exactly_once(&self, target: &str) -> Result<bool, ConfigError> {
        const KEY: &str = "exactly.once.source.support";
        let flow_or_cluster = self
            .r
            .top(&format!("{}{KEY}", self.prefix))
            .or_else(|| self.r.top(&format!("{target}.{KEY}")))
            .or_else(|| self.r.top(KEY));
        let Some(found) = flow_or_cluster else {
            return Ok(false);
        };
        let kind = catalogue::flow_key(KEY).map_or(Value::Any, |d| d.value);
        if let Err(expected) = catalogue::check_value(kind, found.value) {
            return Err(self.r.fail(&found, reason(expected, kind, found.value)));
        }
        Ok(found.value.trim().eq_ignore_ascii_case("enabled"))
    }

    /// A replication factor: -1 (the broker's default) or 1 to 32767.
    fn replication_factor(&self, key: &str) -> Result<i16, ConfigError> {
        Ok(self.value(key)?.parse::<i16>().unwrap_or(-1))
    }

    /// One of the catalogue's words for `key` (checked, in the case it asks for), as `T`.
    fn choice<T: Copy + Default>(
        &self,
        key: &str,
        choices: &[(&str, T)],
    ) -> Result<T, ConfigError> {
        let value = self.value(key)?;
        Ok(choices
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(value))
            .map(|(_, v)| *v)
            .unwrap_or_default())
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
    fn patterns(&self, keys: &[&str]) -> Result<PatternList, ConfigError> {
        let found = keys.iter().find_map(|k| self.get(k));
        let (value, found) = match &found {
            Some(f) => (f.value, Some(f)),
            None => (catalogue::default_of(keys[0]), None),
        };
        PatternList::parse(value).map_err(|FilterError { pattern, message }| {
            let reason = Reason::InvalidRegex { pattern, message };
            match found {
                Some(f) => self.r.fail(f, reason),
                None => self.r.error(None, keys.first().copied(), reason),
            }
        })
    }

    fn only_default_class(&self, key: &str) -> Result<(), ConfigError> {
        let default = catalogue::default_of(key);
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
            None => catalogue::default_of("replication.policy.separator").to_owned(),
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
            self.bool("replication.policy.internal.topic.separator.enabled")?;
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

    /// The source consumer's `auto.offset.reset`, where MM2's source consumer reads it
    /// (`S->T.consumer.`, then `S.consumer.`); MM2 sets `earliest` when neither does. `none`
    /// would fail every partition never mirrored (MM2's task fails the same way);
    /// `by_duration:` (KIP-1106) is not supported yet.
    fn auto_offset_reset(&self, source: &str, target: &str) -> Result<StartPosition, ConfigError> {
        let found = self
            .r
            .top(&format!("{source}->{target}.consumer.auto.offset.reset"))
            .or_else(|| self.r.top(&format!("{source}.consumer.auto.offset.reset")));
        let value = self.client_value(found, Role::Consumer, "auto.offset.reset")?;
        Ok(if value.eq_ignore_ascii_case("latest") {
            StartPosition::Latest
        } else {
            StartPosition::Earliest
        })
    }

    /// `strait.isolation.level`, else the source consumer's `isolation.level`, else
    /// read_committed.
    /// `strait.batch.merge` and `strait.batch.merge.max.bytes`.
    fn batch_merge(&self) -> Result<Merge, ConfigError> {
        let mode = self.choice(
            keys::STRAIT_BATCH_MERGE,
            &[
                ("auto", MergeMode::Auto),
                ("always", MergeMode::Always),
                ("never", MergeMode::Never),
            ],
        )?;
        let max_bytes = self.whole(keys::STRAIT_BATCH_MERGE_MAX_BYTES)?;
        Ok(Merge {
            mode,
            max_bytes: usize::try_from(max_bytes).unwrap_or(usize::MAX),
        })
    }

    fn isolation_level(&self, source: &str, target: &str) -> Result<IsolationLevel, ConfigError> {
        let value = match self.checked(keys::STRAIT_ISOLATION_LEVEL)? {
            Some(found) => found.value.trim(),
            None => {
                let found = self
                    .r
                    .top(&format!("{source}.consumer.isolation.level"))
                    .or_else(|| {
                        self.r
                            .top(&format!("{source}->{target}.consumer.isolation.level"))
                    });
                match found {
                    Some(found) => {
                        self.client_value(Some(found), Role::Consumer, "isolation.level")?
                    }
                    None => catalogue::default_of(keys::STRAIT_ISOLATION_LEVEL),
                }
            }
        };
        Ok(if value.eq_ignore_ascii_case("read_uncommitted") {
            IsolationLevel::ReadUncommitted
        } else {
            IsolationLevel::ReadCommitted
        })
    }

    /// The trimmed value of client key `key` of `role` found, checked as the catalogue reads
    /// it; the catalogue's default when not found.
    fn client_value(
        &self,
        found: Option<Found<'a>>,
        role: Role,
        key: &str,
    ) -> Result<&'a str, ConfigError> {
        let def = catalogue::client_key(role, key);
        let Some(found) = found else {
            return Ok(def.map_or("", |d| d.default));
        };
        let kind = def.map_or(Value::Any, |d| d.value);
        catalogue::check_value(kind, found.value)
            .map_err(|expected| self.r.fail(&found, reason(expected, kind, found.value)))?;
        Ok(found.value.trim())
    }
}
