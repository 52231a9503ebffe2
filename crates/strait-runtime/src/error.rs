//! Why the runtime, a one-shot copy or one of their flows did not start or ended, and whether
//! trying again can help ([`Error::can_retry`]): a wrong setting waits for a changed file, a
//! cluster that does not answer is tried again.

use std::net::SocketAddr;
use std::path::PathBuf;

use strait_core::config::ConfigError;
use strait_core::flow::FlowError;

/// What went wrong, with the flow, cluster or file it is about.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The config file does not load.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A flow's client settings cannot be used as written.
    #[error("flow {flow}")]
    Settings {
        /// `A->B`.
        flow: String,
        /// The setting and what is wrong with it.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The HTTP API cannot listen where asked (the port is taken, the address is not this
    /// host's).
    #[error(
        "cannot serve HTTP on {addr}: {error} (choose another with --listen, or --listen off)"
    )]
    Listen {
        /// Where it was asked to listen.
        addr: SocketAddr,
        /// Why it cannot.
        error: std::io::Error,
    },
    /// No broker of one of a flow's clusters answered, or it refused the connection.
    #[error("flow {flow}: cannot reach {side} {cluster}")]
    Unreachable {
        /// `A->B`.
        flow: String,
        /// `source` or `target`.
        side: &'static str,
        /// The cluster's alias.
        cluster: String,
        /// The client's error.
        #[source]
        source: strait_kafka::Error,
    },
    /// A flow's clients connected, but the flow could not be placed where its map ends.
    #[error("flow {flow} cannot start")]
    FlowStart {
        /// `A->B`.
        flow: String,
        /// Why.
        #[source]
        source: FlowError,
    },
    /// A running flow stopped on an error.
    #[error("flow {flow} failed")]
    FlowFailed {
        /// `A->B`.
        flow: String,
        /// Why.
        #[source]
        source: FlowError,
    },
    /// A signal stopped a one-shot copy before this flow caught up.
    #[error(
        "flow {flow} was interrupted before it caught up; the next run resumes from the offset map"
    )]
    Interrupted {
        /// `A->B`.
        flow: String,
    },
    /// A one-shot copy refuses flows that commit in transactions under their workers' fencing.
    #[error(
        "{}: {} exactly-once (exactly.once.source.support = enabled): each unit commits in \
         transactions under its workers' fencing, which a one-shot copy (`strait run \
         --until-caught-up`, `strait mirror`) does not join. Run `strait run` (it joins the \
         workers), or copy with a file without exactly.once.source.support while no worker runs",
        path.display(),
        flows.join(", ")
    )]
    ExactlyOnceCopy {
        /// The config file.
        path: PathBuf,
        /// The flows, `A->B`.
        flows: Vec<String>,
    },
    /// Whether `strait run` workers of a flow are running cannot be told: its workers' group
    /// could not be described.
    #[error(
        "flow {flow}: cannot tell whether `strait run` processes of this flow are running \
         (describing the workers' group {group} on {target})"
    )]
    WorkersUnknown {
        /// `A->B`.
        flow: String,
        /// The workers' group.
        group: String,
        /// The target cluster's alias, where the group lives.
        target: String,
        /// The client's error.
        #[source]
        source: strait_kafka::Error,
    },
    /// A one-shot copy refuses a flow whose `strait run` workers are running: they own its
    /// partitions.
    #[error(
        "{}: flow {flow} is being mirrored by {members} `strait run` process(es) with this file \
         (the workers' group {group} on {target} is {state}): a one-shot copy beside them would \
         write its partitions a second time. Stop them first, or let them mirror",
        path.display()
    )]
    WorkersRunning {
        /// The config file.
        path: PathBuf,
        /// `A->B`.
        flow: String,
        /// How many members the group has (at least 1).
        members: usize,
        /// The workers' group.
        group: String,
        /// The target cluster's alias.
        target: String,
        /// The group's state.
        state: String,
    },
    /// A `strait run` worker of a flow joined its workers' group while a one-shot copy of the
    /// flow ran, and the group handed it units the copy held: the copy stopped between rounds
    /// (or before writing anything), its map written for what it copied, and left the group so
    /// that the workers carry the flow on from there.
    #[error(
        "flow {flow}: a `strait run` worker joined the workers' group {group} on {target} during          this copy, so the copy stopped before writing another round, with the offset map          written for everything it copied, and left the group to the workers: they carry the          flow on from there, matching what the copy wrote. To finish with a copy instead, stop          the `strait run` processes of this flow and run the copy again"
    )]
    WorkersJoined {
        /// `A->B`.
        flow: String,
        /// The workers' group.
        group: String,
        /// The target cluster's alias, where the group lives.
        target: String,
    },
}

impl Error {
    /// Whether trying again later with the same file may get further: `true` for what depends
    /// on the clusters (one did not answer, a flow could not start or failed there), which the
    /// supervisor retries with a backoff; `false` for what only a changed file or command line
    /// fixes (the file, a setting, the listen address, a copy refused).
    pub fn can_retry(&self) -> bool {
        match self {
            Error::Unreachable { .. }
            | Error::FlowStart { .. }
            | Error::FlowFailed { .. }
            | Error::Interrupted { .. }
            | Error::WorkersUnknown { .. } => true,
            Error::Config(_)
            | Error::Settings { .. }
            | Error::Listen { .. }
            | Error::ExactlyOnceCopy { .. }
            | Error::WorkersRunning { .. }
            | Error::WorkersJoined { .. } => false,
        }
    }

    /// Whether another owner fenced the flow's writes: a newer owner of its unit initialised
    /// the unit's transactional id, or its worker's lease was refused.
    pub fn is_fenced(&self) -> bool {
        let mut next: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(e) = next {
            if e.downcast_ref::<FlowError>()
                .is_some_and(FlowError::is_fenced)
                || e.downcast_ref::<strait_kafka::Error>()
                    .is_some_and(strait_kafka::Error::is_fenced)
            {
                return true;
            }
            next = e.source();
        }
        false
    }

    /// This error and every cause under it, `what: why: why`, as a log line or the status
    /// shows it.
    pub fn report(&self) -> String {
        let mut text = self.to_string();
        let mut next = std::error::Error::source(self);
        while let Some(e) = next {
            text.push_str(": ");
            text.push_str(&e.to_string());
            next = e.source();
        }
        text
    }

    pub(crate) fn settings(
        flow: &strait_core::config::FlowConfig,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Error::Settings {
            flow: flow.name(),
            source: source.into(),
        }
    }
}
