//! The runtime's one error type, and whether a retry can help.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::ApiKey;
use strait_wire::{FrameError, VersionError};

/// What a failed operation was about, so an error names the topic, partition or group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Context {
    /// Nothing more specific than the request.
    #[default]
    None,
    /// A topic.
    Topic(String),
    /// A partition.
    Partition {
        /// Topic.
        topic: String,
        /// Partition.
        partition: i32,
    },
    /// A consumer group.
    Group(String),
    /// A config or ACL resource.
    Resource(String),
    /// A transactional id.
    Transaction(String),
}

impl std::fmt::Display for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Context::None => Ok(()),
            Context::Topic(t) => write!(f, " (topic {t})"),
            Context::Partition { topic, partition } => write!(f, " ({topic}-{partition})"),
            Context::Group(g) => write!(f, " (group {g})"),
            Context::Resource(r) => write!(f, " ({r})"),
            Context::Transaction(t) => write!(f, " (transactional id {t})"),
        }
    }
}

/// Errors of the Kafka runtime.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The TCP connection could not be made or broke. Shared by every request that was waiting
    /// on that connection.
    #[error("connection to {broker} failed: {message}")]
    Io {
        /// `host:port`.
        broker: String,
        /// What the OS said.
        message: String,
    },
    /// TLS with a broker failed: its certificate is not trusted, is for another name or has
    /// expired, it refused ours, or it does not speak TLS. The message says which and what to
    /// change. Retrying does not help until the config or the certificates change.
    #[error("{}TLS with broker {broker} failed: {message}", in_cluster(.cluster))]
    Tls {
        /// The cluster's alias, when known.
        cluster: Option<Arc<str>>,
        /// `host:port`.
        broker: String,
        /// What went wrong and what to change.
        message: Box<str>,
    },
    /// SASL authentication with a broker failed: wrong credentials, a mechanism the broker does
    /// not enable, a listener without SASL. Never carries a secret. Retrying does not help
    /// until the config or the broker's users change.
    #[error("{}SASL {mechanism} authentication with broker {broker} failed: {message}", in_cluster(.cluster))]
    Authentication {
        /// The cluster's alias, when known.
        cluster: Option<Arc<str>>,
        /// `host:port`.
        broker: String,
        /// `PLAIN`, `SCRAM-SHA-256`, ...
        mechanism: &'static str,
        /// What went wrong and what to change.
        message: Box<str>,
    },
    /// A request got no answer in time. The connection is closed, because a late answer would
    /// otherwise be matched to nothing and a broker that stops answering is not healthy.
    #[error("{api:?} request to {broker} timed out after {after:?}")]
    Timeout {
        /// `host:port`.
        broker: String,
        /// The API.
        api: ApiKey,
        /// How long we waited.
        after: Duration,
    },
    /// Bytes that do not decode as what we asked for.
    #[error("protocol error from {broker}: {source}")]
    Frame {
        /// `host:port`.
        broker: String,
        /// The framing error.
        #[source]
        source: Arc<FrameError>,
    },
    /// No common version of an API.
    #[error("{broker}: {source}")]
    Version {
        /// `host:port`.
        broker: String,
        /// Details.
        #[source]
        source: VersionError,
    },
    /// The broker answered with an error code.
    #[error("broker error {code}{context}{}", message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    Broker {
        /// The error.
        code: ResponseError,
        /// The broker's error message, when it sent one.
        message: Option<String>,
        /// What it was about.
        context: Context,
    },
    /// A group-offset write refused because the group has active members on that cluster
    /// (`UNKNOWN_MEMBER_ID` / `ILLEGAL_GENERATION` to a commit with generation -1). Retrying will
    /// not help until the group's consumers stop.
    #[error("group {group} has active members; its offsets can only be written while it is empty")]
    GroupActive {
        /// The group.
        group: String,
    },
    /// The cluster has no such topic or partition (after a metadata refresh).
    #[error("unknown topic or partition{context}")]
    UnknownTopicOrPartition {
        /// Which one.
        context: Context,
    },
    /// No broker in the bootstrap list could be reached.
    #[error("no bootstrap broker reachable ({tried}): {last}")]
    NoBootstrap {
        /// The list tried.
        tried: String,
        /// The last failure.
        last: Box<Error>,
    },
    /// The broker's answer is well-formed but does not make sense (a partition we did not ask
    /// for, a missing entry). Names what is wrong.
    #[error("unexpected answer from {broker}: {what}")]
    Unexpected {
        /// `host:port` or "cluster".
        broker: String,
        /// What.
        what: String,
    },
    /// An idempotent produce the broker saw as a duplicate of an earlier one whose result we did
    /// not receive: the data is on the target, but its offset is unknown to us.
    #[error("duplicate sequence{context}: batch already written, offset unknown")]
    DuplicateSequence {
        /// The partition.
        context: Context,
    },
    /// A batch was not acknowledged within the producer's delivery timeout
    /// (`delivery.timeout.ms`), counted from when it was handed to the producer. Whether it was
    /// written is unknown: the caller resumes from what it knows was written.
    #[error("batch not acknowledged within the delivery timeout ({after:?}){context}")]
    DeliveryTimeout {
        /// The partition.
        context: Context,
        /// The delivery timeout.
        after: Duration,
    },
    /// The runtime was shut down.
    #[error("client closed")]
    Closed,
    /// The writer's group lease lapsed ([`crate::lease`]): it has not heard from its group's
    /// coordinator within its session timeout, so another member may own what it writes. The
    /// write was not sent; nothing more is written under that lease until the group hands the
    /// work back. Final for the writer, as fencing is.
    #[error(
        "not written: this worker's lease on its units lapsed (no answer from the workers' \
         group within the session timeout), so another worker may own them now"
    )]
    LeaseLapsed,
    /// A caller error (bad argument), not a remote one.
    #[error("invalid request: {0}")]
    Invalid(String),
}

impl Error {
    /// Whether the same request might succeed if tried again (after a metadata refresh and a
    /// backoff). Errors that need a human, or a different request, say no.
    pub fn is_retriable(&self) -> bool {
        match self {
            Error::Io { .. } | Error::Timeout { .. } | Error::DeliveryTimeout { .. } => true,
            // Unreachable brokers may come back; a TLS or SASL refusal will not.
            Error::NoBootstrap { last, .. } => last.is_retriable(),
            // A transaction coordinator answers CONCURRENT_TRANSACTIONS while it is still
            // ending the transactional id's last transaction; Kafka's producer retries it.
            Error::Broker { code, .. } => {
                code.is_retriable()
                    || is_coordinator_moved(*code)
                    || *code == ResponseError::ConcurrentTransactions
            }
            Error::UnknownTopicOrPartition { .. } => true,
            Error::Frame { .. }
            | Error::Version { .. }
            | Error::GroupActive { .. }
            | Error::Unexpected { .. }
            | Error::DuplicateSequence { .. }
            | Error::Closed
            | Error::LeaseLapsed
            | Error::Tls { .. }
            | Error::Authentication { .. }
            | Error::Invalid(_) => false,
        }
    }

    /// Whether a writer was fenced: another producer initialised its transactional id since
    /// (PRODUCER_FENCED from the coordinator, INVALID_PRODUCER_EPOCH from a partition leader),
    /// or its group lease lapsed ([`Error::LeaseLapsed`]). Nothing it writes lands any more;
    /// only a new initialisation of the id (a new lease) writes again.
    pub fn is_fenced(&self) -> bool {
        matches!(
            self,
            Error::Broker {
                code: ResponseError::ProducerFenced | ResponseError::InvalidProducerEpoch,
                ..
            } | Error::LeaseLapsed
        )
    }

    /// Whether the error means our routing is stale: the metadata (leaders, coordinators)
    /// should be refreshed before a retry.
    pub fn needs_metadata_refresh(&self) -> bool {
        match self {
            Error::Io { .. } | Error::Timeout { .. } | Error::UnknownTopicOrPartition { .. } => {
                true
            }
            Error::Broker { code, .. } => matches!(
                code,
                ResponseError::NotLeaderOrFollower
                    | ResponseError::UnknownTopicOrPartition
                    | ResponseError::LeaderNotAvailable
                    | ResponseError::FencedLeaderEpoch
                    | ResponseError::UnknownLeaderEpoch
                    | ResponseError::NotCoordinator
                    | ResponseError::CoordinatorNotAvailable
                    | ResponseError::KafkaStorageError
                    | ResponseError::ReplicaNotAvailable
                    | ResponseError::BrokerNotAvailable
                    | ResponseError::UnknownTopicId
            ),
            _ => false,
        }
    }

    /// Whether the broker refused a produced batch for good: the same bytes to the same
    /// partition will be refused again until someone changes the topic or the permissions
    /// (a batch over the topic's `max.message.bytes`, a record the broker rejects, a policy, an
    /// ACL). Only that partition is affected; the producer's other partitions can go on.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self.code(),
            Some(
                ResponseError::MessageTooLarge
                    | ResponseError::RecordListTooLarge
                    | ResponseError::InvalidRecord
                    | ResponseError::InvalidTimestamp
                    | ResponseError::PolicyViolation
                    | ResponseError::TopicAuthorizationFailed
                    | ResponseError::InvalidTopicException
                    | ResponseError::UnsupportedForMessageFormat
            )
        )
    }

    /// The broker error code, if this is one.
    pub fn code(&self) -> Option<ResponseError> {
        match self {
            Error::Broker { code, .. } => Some(*code),
            _ => None,
        }
    }

    pub(crate) fn broker(code: ResponseError, message: Option<String>, context: Context) -> Self {
        if code == ResponseError::UnknownTopicOrPartition {
            return Error::UnknownTopicOrPartition { context };
        }
        Error::Broker {
            code,
            message: message.filter(|m| !m.is_empty()),
            context,
        }
    }
}

/// `cluster `A`: ` before a message, when the alias is known.
fn in_cluster(cluster: &Option<Arc<str>>) -> String {
    cluster
        .as_deref()
        .map(|c| format!("cluster `{c}`: "))
        .unwrap_or_default()
}

pub(crate) fn is_coordinator_moved(code: ResponseError) -> bool {
    matches!(
        code,
        ResponseError::NotCoordinator
            | ResponseError::CoordinatorNotAvailable
            | ResponseError::CoordinatorLoadInProgress
    )
}

/// Turns a response's error code into `Ok(())` or a typed error.
pub(crate) fn check(
    code: i16,
    message: Option<&kafka_protocol::protocol::StrBytes>,
    context: impl FnOnce() -> Context,
) -> Result<()> {
    match ResponseError::try_from_code(code) {
        None => Ok(()),
        Some(err) => Err(Error::broker_counted(
            err,
            message.map(|m| m.to_string()),
            context(),
        )),
    }
}

/// Counts an error a broker answered with (`strait_broker_request_errors_total`, `docs/metrics.md`).
/// The error code's place in the response is per API, so this is where every code the runtime
/// reads passes; the broker and API are known only for transport failures
/// ([`Error::count_transport`]).
fn count_code(err: ResponseError) {
    metrics::counter!(
        REQUEST_ERRORS,
        "broker" => "",
        "api" => "",
        "error" => format!("{err:?}"),
    )
    .increment(1);
}

/// `strait_broker_request_errors_total`: requests that failed.
pub const REQUEST_ERRORS: &str = "strait_broker_request_errors_total";

/// `strait_broker_reconnects_total`: connections made again after one failed or broke.
pub const RECONNECTS: &str = "strait_broker_reconnects_total";

impl Error {
    /// [`Error::broker`], counted.
    fn broker_counted(code: ResponseError, message: Option<String>, context: Context) -> Error {
        count_code(code);
        Error::broker(code, message, context)
    }

    /// The kind of a request that failed before an answer could be read, for the metric's
    /// `error` label: `io`, `timeout`, `closed`, `frame`, `version`, `tls`, `authentication`,
    /// `unexpected`, or `other`.
    fn transport_kind(&self) -> &'static str {
        match self {
            Error::Io { .. } => "io",
            Error::Timeout { .. } => "timeout",
            Error::Closed => "closed",
            Error::Frame { .. } => "frame",
            Error::Version { .. } => "version",
            Error::Tls { .. } => "tls",
            Error::Authentication { .. } => "authentication",
            Error::Unexpected { .. } => "unexpected",
            _ => "other",
        }
    }

    /// Counts a request to `broker` for `api` that failed with this error.
    pub(crate) fn count_transport(&self, broker: &str, api: kafka_protocol::messages::ApiKey) {
        metrics::counter!(
            REQUEST_ERRORS,
            "broker" => broker.to_owned(),
            "api" => format!("{api:?}"),
            "error" => self.transport_kind(),
        )
        .increment(1);
    }
}

/// The runtime's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    /// Every `Result` of the runtime, and of the layers that wrap its errors, carries this:
    /// kept small (clippy's `result_large_err` counts the wrappers too).
    #[test]
    fn error_stays_small() {
        assert!(
            std::mem::size_of::<super::Error>() <= 72,
            "{}",
            std::mem::size_of::<super::Error>()
        );
    }
}
