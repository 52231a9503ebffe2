//! Client settings per cluster and role, gathered the way MM2's `MirrorMakerConfig.clusterProps`
//! and `MirrorConnectorConfig.*Config(role)` gather them.
//!
//! For cluster `A` and role `consumer` (likewise `producer`, `admin`), strongest first:
//! 1. `A.consumer.<key>`;
//! 2. `A.<key>`, only for connection keys (`security.protocol`, `ssl.*`, `sasl.*`);
//! 3. `<key>` at top level, only for connection keys;
//! 4. `S->T.consumer.<key>` of the flow using the client (see [`ClientSettings::overlaid_on`]).
//!
//! MM2 applies nothing else: `A.max.poll.records` and top-level `consumer.max.poll.records`
//! reach no client (strait warns about both). `bootstrap.servers` is kept apart, in
//! [`super::ClusterConfig::bootstrap_servers`].

use std::collections::BTreeMap;
use std::fmt;

pub use super::catalogue::Role;
use super::secret::ClientValue;

/// Which end of a flow a client talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The cluster records come from.
    Source,
    /// The cluster records go to.
    Target,
}

/// `security.protocol`, checked when the config is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SecurityProtocol {
    /// No TLS, no SASL (Kafka's default).
    #[default]
    Plaintext,
    /// TLS.
    Ssl,
    /// SASL without TLS.
    SaslPlaintext,
    /// SASL over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// The accepted spellings, for messages.
    pub const CHOICES: &'static str = "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL";

    /// Parses a value as Kafka does: trimmed, case-insensitive.
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Some(Self::Plaintext),
            "SSL" => Some(Self::Ssl),
            "SASL_PLAINTEXT" => Some(Self::SaslPlaintext),
            "SASL_SSL" => Some(Self::SaslSsl),
            _ => None,
        }
    }
}

/// Whether MM2 treats `key` as a connection setting (its `MirrorClientConfig.CLIENT_CONFIG_DEF`):
/// those set on a cluster (`A.ssl.truststore.location`) or at top level reach every client of
/// the cluster. `bootstrap.servers` is one too, but is kept apart.
pub fn is_connection_key(key: &str) -> bool {
    key == "security.protocol" || key.starts_with("ssl.") || key.starts_with("sasl.")
}

/// One client's settings: Kafka client keys (without prefix) and their values, each with the
/// key and line of the file that set it.
#[derive(Debug, Clone, Default)]
pub struct ClientProps {
    entries: BTreeMap<String, ClientValue>,
    /// Where each key was set (`B.ssl.truststore.type`, line 12), for errors that name it.
    origins: BTreeMap<String, KeyOrigin>,
}

/// The key of the file, as written, that set a client key, and its line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyOrigin {
    /// `B.ssl.truststore.type`, `A->B.producer.ssl.keystore.location`, `sasl.mechanism`.
    pub key: String,
    /// 1-based.
    pub line: usize,
}

/// Two clients with the same keys and values are configured alike, wherever in the file the
/// keys are: a reload that only moves lines restarts nothing (`strait-runtime/src/supervisor/mod.rs`
/// compares flows' settings).
impl PartialEq for ClientProps {
    fn eq(&self, other: &Self) -> bool {
        self.entries == other.entries
    }
}

impl Eq for ClientProps {}

impl ClientProps {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&ClientValue> {
        self.entries.get(key)
    }

    /// The key of the file that set `key`, and its line; `None` when unset, or set other
    /// than by a file.
    pub fn origin(&self, key: &str) -> Option<&KeyOrigin> {
        self.origins.get(key)
    }

    /// Every key and value, sorted by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &ClientValue)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// `security.protocol` (checked when the config was read; `PLAINTEXT` when unset).
    pub fn security_protocol(&self) -> SecurityProtocol {
        self.get("security.protocol")
            .and_then(|v| SecurityProtocol::parse(v.expose()))
            .unwrap_or_default()
    }

    /// The trimmed value of `key` of the `role` client, checked as the key catalogue
    /// (`catalogue.rs`) reads it; `None` when unset. The values of a file were checked when it
    /// was read, so the error (what was expected) comes only from settings made otherwise.
    pub fn checked(&self, role: Role, key: &str) -> Result<Option<&str>, String> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        let value = value.expose();
        if let Some(def) = super::catalogue::client_key(role, key) {
            super::catalogue::check_value(def.value, value).map_err(|expected| {
                format!(
                    "{}{key} = {value:?}: expected {}",
                    role.prefix(),
                    expected.text()
                )
            })?;
        }
        Ok(Some(value.trim()))
    }

    /// Sets `key` unless it is set: MM2's `putIfAbsent`. `origin`: the file's key and line
    /// that set it.
    pub(crate) fn insert_if_absent(&mut self, key: &str, value: &str, origin: Option<KeyOrigin>) {
        if !self.entries.contains_key(key) {
            self.entries
                .insert(key.to_owned(), ClientValue::for_key(key, value));
            if let Some(origin) = origin {
                self.origins.insert(key.to_owned(), origin);
            }
        }
    }

    /// `self` with every key of `stronger` set over it.
    pub fn overlaid_with(&self, stronger: &ClientProps) -> ClientProps {
        let mut out = self.clone();
        for (k, v) in &stronger.entries {
            out.entries.insert(k.clone(), v.clone());
            match stronger.origins.get(k) {
                Some(origin) => out.origins.insert(k.clone(), origin.clone()),
                None => out.origins.remove(k),
            };
        }
        out
    }
}

impl fmt::Display for ClientProps {
    /// `key=value` pairs, secrets redacted.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (k, v) in &self.entries {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}

/// The settings of a cluster's three clients (or a flow's overrides of them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientSettings {
    /// The consumer's.
    pub consumer: ClientProps,
    /// The producer's.
    pub producer: ClientProps,
    /// The admin client's.
    pub admin: ClientProps,
}

impl ClientSettings {
    /// The settings of one role.
    pub fn role(&self, role: Role) -> &ClientProps {
        match role {
            Role::Consumer => &self.consumer,
            Role::Producer => &self.producer,
            Role::Admin => &self.admin,
        }
    }

    pub(crate) fn role_mut(&mut self, role: Role) -> &mut ClientProps {
        match role {
            Role::Consumer => &mut self.consumer,
            Role::Producer => &mut self.producer,
            Role::Admin => &mut self.admin,
        }
    }

    /// A flow's overrides (`self`, from `S->T.consumer.*` ...) under a cluster's settings: the
    /// cluster's win, as in MM2, where `source.consumer.*` is applied after `consumer.*`.
    pub fn overlaid_on(&self, cluster: &ClientSettings, role: Role) -> ClientProps {
        self.role(role).overlaid_with(cluster.role(role))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn security_protocol_parses_like_kafka() {
        assert_eq!(
            SecurityProtocol::parse(" sasl_ssl "),
            Some(SecurityProtocol::SaslSsl)
        );
        assert_eq!(SecurityProtocol::parse("SSL"), Some(SecurityProtocol::Ssl));
        assert_eq!(SecurityProtocol::parse("TLS"), None);
        assert_eq!(
            ClientProps::default().security_protocol(),
            SecurityProtocol::Plaintext
        );
    }

    #[test]
    fn put_if_absent_and_overlay() {
        let mut weak = ClientProps::default();
        let at = |key: &str, line| {
            Some(KeyOrigin {
                key: key.to_owned(),
                line,
            })
        };
        weak.insert_if_absent("a", "1", at("A.a", 1));
        weak.insert_if_absent("a", "2", at("a", 2));
        weak.insert_if_absent("b", "1", at("A.b", 3));
        let mut strong = ClientProps::default();
        strong.insert_if_absent("b", "9", at("A->B.b", 4));
        let merged = weak.overlaid_with(&strong);
        assert_eq!(merged.get("a").unwrap().expose(), "1");
        assert_eq!(merged.get("b").unwrap().expose(), "9");
        assert_eq!(merged.to_string(), "a=1, b=9");
        // Each key names the line that set the value in effect.
        assert_eq!(merged.origin("a"), at("A.a", 1).as_ref());
        assert_eq!(merged.origin("b"), at("A->B.b", 4).as_ref());
        // Where a key was set does not make two clients' settings differ.
        let mut moved = ClientProps::default();
        moved.insert_if_absent("a", "1", at("A.a", 7));
        let mut unmoved = ClientProps::default();
        unmoved.insert_if_absent("a", "1", None);
        assert_eq!(moved, unmoved);
    }

    #[test]
    fn display_redacts() {
        let mut p = ClientProps::default();
        p.insert_if_absent("sasl.jaas.config", "secret stuff", None);
        assert_eq!(p.to_string(), "sasl.jaas.config=[redacted]");
        assert!(!format!("{p:?}").contains("secret stuff"));
    }
}
