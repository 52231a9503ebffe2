//! From parsed properties to a [`StraitConfig`]: the clusters, their client settings, the checks
//! and the warnings; each pair's flow keys are [`super::pair`]'s.
//!
//! Checks run in a fixed order (`clusters`, unsupported features, flow keys, strait keys,
//! clusters, flows) and the first fault, at its lowest line, is the error.

use std::path::Path;

use super::catalogue::{self, Expected, Value};
use super::client::{is_connection_key, ClientSettings, KeyOrigin, Role, SecurityProtocol};
use super::error::{ConfigError, ConfigErrorReason as Reason, ConfigWarning};
use super::flowkey::{parse_flow_key, FlowKey};
use super::keys::{classify, is_flow_client_key};
use super::model::{ClusterAlias, ClusterConfig};
use super::properties::Properties;
use crate::filter::{java_trim, split_list};

/// A key found in the file.
#[derive(Debug, Clone)]
pub(super) struct Found<'a> {
    pub(super) key: String,
    pub(super) value: &'a str,
    pub(super) line: usize,
}

impl Found<'_> {
    /// The key and line, for a client setting to name where it was set.
    fn origin(&self) -> KeyOrigin {
        KeyOrigin {
            key: self.key.clone(),
            line: self.line,
        }
    }
}

pub(super) struct Resolver<'a> {
    props: &'a Properties,
    path: &'a Path,
    aliases: Vec<String>,
    clusters_line: Option<usize>,
}

impl<'a> Resolver<'a> {
    /// A resolver of `props`, read from `path`; [`Resolver::read_clusters`] first.
    pub(super) fn new(props: &'a Properties, path: &'a Path) -> Self {
        Resolver {
            props,
            path,
            aliases: Vec::new(),
            clusters_line: None,
        }
    }

    /// The cluster aliases of `clusters`, in order.
    pub(super) fn aliases(&self) -> &[String] {
        &self.aliases
    }

    pub(super) fn error(
        &self,
        line: Option<usize>,
        key: Option<&str>,
        reason: Reason,
    ) -> ConfigError {
        ConfigError {
            path: self.path.to_owned(),
            line,
            key: key.map(str::to_owned),
            reason,
        }
    }

    /// Two flows into one target cluster under one workers' group would share its members and
    /// its transactional ids (`<group id>-<unit>`): each flow's units would fence the other's.
    pub(super) fn check_workers_groups(
        &self,
        flows: &[super::FlowConfig],
    ) -> Result<(), ConfigError> {
        for (i, a) in flows.iter().enumerate() {
            for b in &flows[i + 1..] {
                let (Some(wa), Some(wb)) = (&a.workers, &b.workers) else {
                    continue;
                };
                if a.target != b.target || wa.group_id != wb.group_id {
                    continue;
                }
                let key = super::keys::STRAIT_WORKERS_GROUP_ID;
                let found = self
                    .top(&format!("{}.{key}", b.name()))
                    .or_else(|| self.top(&format!("{}.{key}", a.name())))
                    .or_else(|| self.top(key));
                let reason = Reason::SharedWorkersGroup {
                    group: wa.group_id.clone(),
                    flows: format!("{} and {}", a.name(), b.name()),
                };
                return Err(match found {
                    Some(found) => self.fail(&found, reason),
                    None => self.error(None, None, reason),
                });
            }
        }
        Ok(())
    }

    pub(super) fn fail(&self, found: &Found<'_>, reason: Reason) -> ConfigError {
        self.error(Some(found.line), Some(&found.key), reason)
    }

    pub(super) fn top(&self, key: &str) -> Option<Found<'a>> {
        self.props.get(key).map(|p| Found {
            key: key.to_owned(),
            value: &p.value,
            line: p.line,
        })
    }

    /// Every key with its property, by line.
    pub(super) fn by_line(&self) -> Vec<Found<'a>> {
        let mut all: Vec<Found<'a>> = self
            .props
            .iter()
            .map(|(k, p)| Found {
                key: k.to_owned(),
                value: &p.value,
                line: p.line,
            })
            .collect();
        all.sort_by_key(|f| f.line);
        all
    }

    pub(super) fn check_unsupported(&self) -> Result<(), ConfigError> {
        for found in self.by_line() {
            // `config.providers*` keys never get here: `providers.rs` consumes them and resolves
            // their references first.
            let key = found.key.as_str();
            let name = match parse_flow_key(key, &self.aliases) {
                Some(FlowKey::Valid { rest, .. }) => rest,
                _ => key,
            };
            let is_transform_key = name == "transforms" || name == "predicates";
            if is_transform_key && !java_trim(found.value).is_empty() {
                return Err(self.fail(
                    &found,
                    Reason::Unsupported {
                        what: "Single Message Transforms",
                        why: "record batches are forwarded unopened, so records cannot be \
                              changed the way MM2 would have changed them",
                    },
                ));
            }
        }
        Ok(())
    }

    pub(super) fn read_clusters(&mut self) -> Result<(), ConfigError> {
        let Some(found) = self.top("clusters") else {
            return Err(self.error(None, Some("clusters"), Reason::MissingClusters));
        };
        self.clusters_line = Some(found.line);
        let mut aliases: Vec<String> = Vec::new();
        for alias in split_list(found.value) {
            let why = if alias.is_empty() {
                Some("is empty (two commas in a row, or a trailing comma?)")
            } else if !alias.chars().all(is_topic_char) {
                Some("may hold only letters, digits, `.`, `_` and `-`: it becomes part of topic names")
            } else {
                None
            };
            if let Some(why) = why {
                let reason = Reason::InvalidAlias {
                    alias: alias.to_owned(),
                    why,
                };
                return Err(self.fail(&found, reason));
            }
            if !aliases.iter().any(|a| a == alias) {
                aliases.push(alias.to_owned());
            }
        }
        if aliases.is_empty() {
            return Err(self.fail(&found, Reason::MissingClusters));
        }
        self.aliases = aliases;
        Ok(())
    }

    pub(super) fn check_flow_keys(&self) -> Result<(), ConfigError> {
        for found in self.by_line() {
            let undeclared = match parse_flow_key(&found.key, &self.aliases) {
                Some(FlowKey::UndeclaredSource(alias) | FlowKey::UndeclaredTarget(alias)) => alias,
                Some(FlowKey::Valid { source, target, .. }) if source == target => {
                    let reason = Reason::SelfFlow {
                        alias: source.to_owned(),
                    };
                    return Err(self.fail(&found, reason));
                }
                _ => continue,
            };
            let reason = Reason::UndeclaredCluster {
                alias: undeclared.to_owned(),
                declared: self.aliases.join(", "),
            };
            return Err(self.fail(&found, reason));
        }
        Ok(())
    }

    pub(super) fn check_strait_keys(&self) -> Result<(), ConfigError> {
        for found in self.by_line() {
            let name = match parse_flow_key(&found.key, &self.aliases) {
                Some(FlowKey::Valid { rest, .. }) => rest,
                _ => found.key.as_str(),
            };
            if name.starts_with("strait.") && !catalogue::strait_keys().any(|k| k == name) {
                let reason = Reason::UnknownStraitKey {
                    known: catalogue::strait_keys().collect::<Vec<_>>().join(", "),
                };
                return Err(self.fail(&found, reason));
            }
        }
        Ok(())
    }

    pub(super) fn cluster(&self, alias: &str) -> Result<ClusterConfig, ConfigError> {
        let key = format!("{alias}.bootstrap.servers");
        let Some(found) = self.top(&key).or_else(|| self.top("bootstrap.servers")) else {
            let reason = Reason::MissingBootstrap {
                cluster: alias.to_owned(),
            };
            return Err(self.error(self.clusters_line, Some(&key), reason));
        };
        let mut bootstrap_servers = Vec::new();
        for entry in split_list(found.value) {
            match parse_bootstrap(entry) {
                Some(server) => bootstrap_servers.push(server),
                None => {
                    let reason = Reason::InvalidBootstrap {
                        entry: entry.to_owned(),
                    };
                    return Err(self.fail(&found, reason));
                }
            }
        }
        if bootstrap_servers.is_empty() {
            let reason = Reason::MissingBootstrap {
                cluster: alias.to_owned(),
            };
            return Err(self.fail(&found, reason));
        }
        Ok(ClusterConfig {
            alias: ClusterAlias::new(alias),
            bootstrap_servers,
            client: self.cluster_client(alias)?,
        })
    }

    /// `MirrorMakerConfig.clusterProps` per role: `A.role.k`, then `A.k` and top-level `k` for
    /// connection keys, each only where nothing stronger was set.
    fn cluster_client(&self, alias: &str) -> Result<ClientSettings, ConfigError> {
        let mut settings = ClientSettings::default();
        let prefix = format!("{alias}.");
        let all = self.by_line();
        for found in &all {
            let Some(rest) = found.key.strip_prefix(&prefix) else {
                continue;
            };
            for role in Role::ALL {
                if let Some(client_key) = rest.strip_prefix(role.prefix()) {
                    if client_key != "bootstrap.servers" {
                        self.check_client_value(found, Some(role), client_key)?;
                        settings.role_mut(role).insert_if_absent(
                            client_key,
                            found.value,
                            Some(found.origin()),
                        );
                    }
                }
            }
        }
        let cluster_level = all
            .iter()
            .filter_map(|f| f.key.strip_prefix(&prefix).map(|rest| (f, rest)));
        let top_level = all.iter().map(|f| (f, f.key.as_str()));
        for (found, client_key) in cluster_level.chain(top_level) {
            if is_connection_key(client_key) {
                self.check_client_value(found, None, client_key)?;
                for role in Role::ALL {
                    settings.role_mut(role).insert_if_absent(
                        client_key,
                        found.value,
                        Some(found.origin()),
                    );
                }
            }
        }
        Ok(settings)
    }

    /// `S->T.consumer.*`, `.producer.*`, `.admin.*`.
    pub(super) fn flow_client(&self, prefix: &str) -> Result<ClientSettings, ConfigError> {
        let mut settings = ClientSettings::default();
        for found in self.by_line() {
            let Some(rest) = found.key.strip_prefix(prefix) else {
                continue;
            };
            if !is_flow_client_key(rest) {
                continue;
            }
            for role in Role::ALL {
                if let Some(client_key) = rest.strip_prefix(role.prefix()) {
                    if client_key != "bootstrap.servers" {
                        self.check_client_value(&found, Some(role), client_key)?;
                        settings.role_mut(role).insert_if_absent(
                            client_key,
                            found.value,
                            Some(found.origin()),
                        );
                    }
                }
            }
        }
        Ok(settings)
    }

    /// A client key's value checked as the catalogue reads it (client keys strait does not act
    /// on are not checked: MM2's Java client would check them, strait ignores them).
    fn check_client_value(
        &self,
        found: &Found<'_>,
        role: Option<Role>,
        client_key: &str,
    ) -> Result<(), ConfigError> {
        if client_key == "security.protocol" && SecurityProtocol::parse(found.value).is_none() {
            let reason = Reason::InvalidChoice {
                value: found.value.to_owned(),
                choices: SecurityProtocol::CHOICES,
            };
            return Err(self.fail(found, reason));
        }
        let def = role.and_then(|role| catalogue::client_key(role, client_key));
        if let Some(def) = def.filter(|d| d.status == catalogue::Status::Used) {
            if let Err(expected) = catalogue::check_value(def.value, found.value) {
                return Err(self.fail(found, reason(expected, def.value, found.value)));
            }
        }
        Ok(())
    }

    pub(super) fn warnings(&self) -> Vec<ConfigWarning> {
        let mut warnings = Vec::new();
        for (key, prop) in self.props.iter() {
            if let Some(earlier_line) = prop.replaced_line {
                warnings.push(ConfigWarning {
                    key: key.to_owned(),
                    line: prop.line,
                    kind: super::WarningKind::Duplicate { earlier_line },
                });
            }
            if let Some(kind) = classify(key, &self.aliases) {
                warnings.push(ConfigWarning {
                    key: key.to_owned(),
                    line: prop.line,
                    kind,
                });
            }
        }
        warnings.sort_by_key(|w| w.line);
        warnings
    }
}

/// The characters Kafka allows in topic names.
pub(super) fn is_topic_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// `host:port` (an optional `scheme://` dropped, as Kafka's address parser ignores it); `None`
/// when it is not one.
fn parse_bootstrap(entry: &str) -> Option<String> {
    let entry = entry.rsplit_once("://").map_or(entry, |(_, rest)| rest);
    let (host, port) = entry.rsplit_once(':')?;
    let bare_host = host.trim_start_matches('[').trim_end_matches(']');
    let port: u16 = port.parse().ok()?;
    if bare_host.is_empty() || port == 0 || bare_host.chars().any(char::is_whitespace) {
        return None;
    }
    Some(entry.to_owned())
}

/// The error for `value`, which is not what `kind` expects.
pub(super) fn reason(expected: Expected, kind: Value, value: &str) -> Reason {
    let value_owned = value.to_owned();
    match expected {
        Expected::Boolean => Reason::InvalidBoolean { value: value_owned },
        Expected::Choice(choices) => Reason::InvalidChoice {
            value: value_owned,
            choices,
        },
        Expected::Number(expected) => match (kind, java_trim(value).parse::<i64>()) {
            (Value::Seconds, Ok(n)) if n < 0 => Reason::NegativeInterval { value: value_owned },
            (Value::Seconds, Ok(0)) => Reason::ZeroInterval { value: value_owned },
            _ => Reason::InvalidNumber {
                value: value_owned,
                expected,
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::parse_bootstrap;

    #[test]
    fn bootstrap_entries() {
        assert_eq!(parse_bootstrap("a:9092").as_deref(), Some("a:9092"));
        assert_eq!(
            parse_bootstrap("PLAINTEXT://a:9092").as_deref(),
            Some("a:9092")
        );
        assert_eq!(parse_bootstrap("[::1]:9092").as_deref(), Some("[::1]:9092"));
        assert_eq!(
            parse_bootstrap("A_host1:9092").as_deref(),
            Some("A_host1:9092")
        );
        for bad in ["a", "a:", ":9092", "a:0", "a:65536", "a:x", ""] {
            assert_eq!(parse_bootstrap(bad), None, "{bad}");
        }
    }
}
