//! Values that must never reach a log: passwords, JAAS configs, private keys.

use std::fmt;

/// A secret config value. `Debug` and `Display` print `[redacted]`; [`Secret::expose`] is the
/// only way to read it, so every use is visible in the code. The runtime's own type, so a
/// password goes from the config file to the TLS or SASL code without ever being a plain
/// `String` in between.
pub use strait_kafka::secret::Secret;

/// A client setting's value: plain, or a [`Secret`] when its key says it holds one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientValue {
    /// Safe to log.
    Plain(String),
    /// Printed as `[redacted]`.
    Secret(Secret),
}

impl ClientValue {
    /// The value for `key`, a [`Secret`] when [`is_secret_key`] says so.
    pub fn for_key(key: &str, value: impl Into<String>) -> Self {
        if is_secret_key(key) {
            Self::Secret(Secret::new(value))
        } else {
            Self::Plain(value.into())
        }
    }

    /// The value itself.
    pub fn expose(&self) -> &str {
        match self {
            Self::Plain(v) => v,
            Self::Secret(s) => s.expose(),
        }
    }

    /// Whether the value is secret.
    pub fn is_secret(&self) -> bool {
        matches!(self, Self::Secret(_))
    }
}

impl fmt::Display for ClientValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Plain(v) => f.write_str(v),
            Self::Secret(s) => fmt::Display::fmt(s, f),
        }
    }
}

/// Whether a client key holds a secret: `sasl.jaas.config`, any `*password`, `*secret*`, and the
/// PEM keys and certificates Kafka types as `PASSWORD` (`ssl.keystore.key`,
/// `ssl.keystore.certificate.chain`, `ssl.truststore.certificates`).
pub fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    key == "sasl.jaas.config"
        || key.ends_with("password")
        || key.contains("secret")
        || key.ends_with("ssl.keystore.key")
        || key.ends_with("ssl.keystore.certificate.chain")
        || key.ends_with("ssl.truststore.certificates")
        || key.ends_with(".jaas.config")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s}"), "[redacted]");
        assert_eq!(format!("{s:?}"), "[redacted]");
        assert_eq!(s.expose(), "hunter2");
        let v = ClientValue::for_key("ssl.truststore.password", "hunter2");
        assert!(v.is_secret());
        assert_eq!(format!("{v} {v:?}"), "[redacted] Secret([redacted])");
        assert_eq!(v.expose(), "hunter2");
    }

    #[test]
    fn secret_keys() {
        for k in [
            "sasl.jaas.config",
            "ssl.key.password",
            "ssl.keystore.password",
            "ssl.truststore.password",
            "ssl.keystore.key",
            "ssl.keystore.certificate.chain",
            "ssl.truststore.certificates",
            "sasl.oauthbearer.client.credentials.client.secret",
            "basic.auth.password",
            "listener.name.sasl_ssl.plain.sasl.jaas.config",
        ] {
            assert!(is_secret_key(k), "{k}");
        }
        for k in [
            "security.protocol",
            "ssl.truststore.location",
            "sasl.mechanism",
        ] {
            assert!(!is_secret_key(k), "{k}");
        }
    }
}
