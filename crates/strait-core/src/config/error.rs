//! What can be wrong with a config file (errors stop start-up) and what is only worth saying
//! (warnings, logged once by the caller).

use std::fmt;
use std::path::{Path, PathBuf};

/// A config that strait refuses to start with. It names the file, the line and the key where it
/// can, and says what is wrong; it never quotes the value of a secret.
#[derive(Debug, thiserror::Error)]
#[error("{}: {reason}", location(.path, .line, .key))]
pub struct ConfigError {
    /// The config file.
    pub path: PathBuf,
    /// The 1-based line of the key at fault; for a missing key, the line of the key that made it
    /// necessary (e.g. `clusters`), if any.
    pub line: Option<usize>,
    /// The key at fault, as written in the file.
    pub key: Option<String>,
    /// What is wrong.
    pub reason: ConfigErrorReason,
}

impl ConfigError {
    /// Whether trying again could help: only when the file could not be read.
    pub fn is_retriable(&self) -> bool {
        matches!(self.reason, ConfigErrorReason::Io(_))
    }
}

fn location(path: &Path, line: &Option<usize>, key: &Option<String>) -> String {
    let mut out = path.display().to_string();
    if let Some(line) = line {
        out.push_str(&format!(":{line}"));
    }
    if let Some(key) = key {
        out.push_str(&format!(": key `{key}`"));
    }
    out
}

/// Why a config is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigErrorReason {
    /// The file could not be read.
    #[error("cannot read the file: {0}")]
    Io(#[source] std::io::Error),
    /// A line Java's `Properties.load` refuses too.
    #[error("{0}")]
    Syntax(String),
    /// `clusters` is absent or lists no alias.
    #[error("no clusters declared: list the cluster aliases, e.g. `clusters = A, B`")]
    MissingClusters,
    /// An alias in `clusters` that cannot name a cluster.
    #[error("cluster alias `{alias}` {why}")]
    InvalidAlias {
        /// The alias as written.
        alias: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A declared cluster has no `bootstrap.servers`.
    #[error(
        "cluster `{cluster}` has no bootstrap servers: set `{cluster}.bootstrap.servers = host:port, ...` \
         (MM2 connects to every declared cluster, so every one needs it)"
    )]
    MissingBootstrap {
        /// The cluster alias.
        cluster: String,
    },
    /// A `bootstrap.servers` entry that is not `host:port`.
    #[error("bootstrap server `{entry}` is not `host:port` with a port from 1 to 65535")]
    InvalidBootstrap {
        /// The entry as written.
        entry: String,
    },
    /// A flow key names a cluster that `clusters` does not declare.
    #[error("flow key names cluster `{alias}`, which is not in `clusters` ({declared})")]
    UndeclaredCluster {
        /// The alias used.
        alias: String,
        /// The declared aliases, comma-separated.
        declared: String,
    },
    /// A flow from a cluster to itself.
    #[error(
        "a flow from `{alias}` to itself is not possible; a flow needs two different clusters"
    )]
    SelfFlow {
        /// The alias.
        alias: String,
    },
    /// Not `true` or `false`.
    #[error("expected `true` or `false`, found `{value}`")]
    InvalidBoolean {
        /// The value as written.
        value: String,
    },
    /// Not an integer, or out of range.
    #[error("expected {expected}, found `{value}`")]
    InvalidNumber {
        /// The value as written.
        value: String,
        /// What was expected, e.g. "an integer from 1 to 32767, or -1".
        expected: &'static str,
    },
    /// A negative `*.interval.seconds`.
    #[error(
        "interval `{value}` is negative; MM2 would silently disable the task, strait refuses to \
         guess: set the matching `*.enabled = false` to turn it off"
    )]
    NegativeInterval {
        /// The value as written.
        value: String,
    },
    /// A zero `*.interval.seconds`.
    #[error("interval must be at least 1 second, found `{value}` (MM2 cannot schedule 0 either)")]
    ZeroInterval {
        /// The value as written.
        value: String,
    },
    /// A regex neither regex engine accepts.
    #[error("invalid regex `{pattern}`: {message}")]
    InvalidRegex {
        /// The pattern as MM2 would compile it (the list joined with `|`).
        pattern: String,
        /// The engine's message.
        message: String,
    },
    /// A Java class strait does not implement.
    #[error("unsupported class `{class}`; strait supports {supported}")]
    UnsupportedClass {
        /// The class as written.
        class: String,
        /// The accepted class names, comma-separated.
        supported: String,
    },
    /// A value outside a fixed set.
    #[error("expected one of {choices}, found `{value}`")]
    InvalidChoice {
        /// The value as written.
        value: String,
        /// The accepted values.
        choices: &'static str,
    },
    /// An empty `replication.policy.separator`.
    #[error("the separator is empty; MM2 would split every topic name at every character")]
    EmptySeparator,
    /// A separator with characters a topic name cannot hold.
    #[error(
        "separator `{value}` has characters Kafka forbids in topic names (allowed: letters, \
         digits, `.`, `_`, `-`); remote topics could not be created"
    )]
    InvalidSeparator {
        /// The value as written.
        value: String,
    },
    /// No `A->B.enabled = true` anywhere.
    #[error(
        "no flow is enabled: enable one with `<source>-><target>.enabled = true` (MM2 would run \
         only heartbeats; strait refuses to start doing nothing)"
    )]
    NoFlowEnabled,
    /// An MM2 feature strait does not have, whose absence would change what gets mirrored.
    #[error("strait does not support {what}: {why}")]
    Unsupported {
        /// The feature.
        what: &'static str,
        /// Why strait refuses rather than ignores it.
        why: &'static str,
    },
    /// A `${provider:path:key}` reference, or a `config.providers` declaration, that cannot be
    /// resolved. Never quotes a resolved value.
    #[error("{0}")]
    ConfigProvider(String),
    /// TLS or SASL settings that cannot be used: a store that cannot be read, a wrong store
    /// password, a `sasl.jaas.config` that does not parse, a mechanism strait does not have.
    /// Never quotes a secret.
    #[error("{0}")]
    Security(String),
    /// Two flows into one target cluster set one workers' group id.
    #[error(
        "flows {flows} both use the workers' group {group} on their target cluster: their units \
         would share its members and transactional ids and fence each other. Give each flow a \
         group of its own (`<source>-><target>.strait.workers.group.id`), or leave the key unset \
         (default `strait-<source>-<target>`)"
    )]
    SharedWorkersGroup {
        /// The group id.
        group: String,
        /// The two flows.
        flows: String,
    },
    /// Enabled flows that would carry records back to a cluster they came from
    /// (`config/loops.rs`).
    #[error("{0}")]
    Loop(Box<LoopFound>),
    /// Enabled flows in a cycle whose topic filters strait cannot compare.
    #[error(
        "flows {flows} form a cycle, and strait cannot tell whether they would mirror records \
         back to the cluster they came from: {why}. Narrow their `topics` so strait can compare \
         them, or mirror in one direction only"
    )]
    MaybeLoop {
        /// The flows of the cycle.
        flows: String,
        /// Why strait cannot tell.
        why: String,
    },
    /// A `strait.` key strait does not know.
    #[error("unknown strait key; strait's own keys are: {known}")]
    UnknownStraitKey {
        /// The known `strait.` keys, comma-separated.
        known: String,
    },
}

/// A loop of flows found ([`ConfigErrorReason::Loop`]): `topic` written on `cluster` comes back
/// to it as `returns_as` through `flows`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopFound {
    /// The flows of the cycle, in order (`A->B, B->A`).
    pub flows: String,
    /// The cluster a record starts on.
    pub cluster: String,
    /// A topic that would loop.
    pub topic: String,
    /// The name it comes back as.
    pub returns_as: String,
    /// Whether it would go round again.
    pub endless: bool,
}

impl fmt::Display for LoopFound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            flows,
            cluster,
            topic,
            returns_as,
            endless,
        } = self;
        let again = if *endless {
            ", and round again without end"
        } else {
            ""
        };
        write!(
            f,
            "flows {flows} would mirror records back to the cluster they came from: topic \
             `{topic}` written on {cluster} comes back to {cluster} as `{returns_as}`{again}. \
             MM2 loops the same way. Mirror each topic in one direction only (narrow these \
             flows' `topics` or `topics.exclude`), or use DefaultReplicationPolicy with the same \
             alias for a cluster in every flow, whose remote topic names let a flow skip what \
             another copied"
        )
    }
}

/// Something in the config worth telling the operator once; strait starts anyway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    /// The key, as written.
    pub key: String,
    /// Its 1-based line.
    pub line: usize,
    /// What about it.
    pub kind: WarningKind,
}

/// The kinds of [`ConfigWarning`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WarningKind {
    /// Neither strait nor MM2 knows the key (MM2 ignores unknown keys too): a typo?
    Unknown {
        /// A likely intended key, if one is obvious.
        hint: Option<String>,
    },
    /// An MM2 key that strait accepts and does not use.
    Unused {
        /// Why strait does not need it.
        reason: &'static str,
    },
    /// A key MM2 deprecated; it still works.
    Deprecated {
        /// The key to use instead.
        replacement: &'static str,
    },
    /// The key is set more than once; the last value wins, as in Java.
    Duplicate {
        /// The line of the replaced assignment.
        earlier_line: usize,
    },
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: key `{}` ", self.line, self.key)?;
        match &self.kind {
            WarningKind::Unknown { hint: None } => write!(f, "is unknown and ignored"),
            WarningKind::Unknown { hint: Some(hint) } => {
                write!(f, "is unknown and ignored (did you mean `{hint}`?)")
            }
            WarningKind::Unused { reason } => write!(f, "is accepted but not used: {reason}"),
            WarningKind::Deprecated { replacement } => {
                write!(f, "is deprecated in MM2; use `{replacement}` instead")
            }
            WarningKind::Duplicate { earlier_line } => write!(
                f,
                "is also set on line {earlier_line}; the value on line {} wins",
                self.line
            ),
        }
    }
}
