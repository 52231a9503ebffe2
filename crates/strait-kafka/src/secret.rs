//! A value that must never reach a log: a password, a token, a JAAS config, a private key.

use std::fmt;

/// A secret value. `Debug` and `Display` print `[redacted]`; [`Secret::expose`] is the only way
/// to read it, so every use is visible in the code.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value itself, for the code that hands it to a TLS or SASL implementation.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the value is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::Secret;

    #[test]
    fn never_printed() {
        let s = Secret::new("hunter2");
        assert_eq!(
            format!("{s} {s:?} {s:#?}"),
            "[redacted] [redacted] [redacted]"
        );
        assert_eq!(s.expose(), "hunter2");
    }
}
