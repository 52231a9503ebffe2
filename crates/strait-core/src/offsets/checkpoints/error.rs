//! Why a checkpoint or group-sync pass failed: shared by the checkpoints task and group sync
//! (`offsets/group_sync.rs`), which is why it is a module of its own.

use crate::internal::InternalError;

/// Why a checkpoint or group-sync pass failed. The task logs it and tries again at the next
/// interval.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// A Kafka operation failed.
    #[error("{what}: {source}")]
    Kafka {
        /// What was being done, naming the topic or group.
        what: String,
        /// Why.
        #[source]
        source: strait_kafka::Error,
    },
    /// The checkpoints topic could not be created or read back, or a batch could not be built.
    #[error(transparent)]
    Internal(#[from] InternalError),
    /// The checkpoints topic could not be read back.
    #[error("checkpoints topic {topic}: {message}")]
    Topic {
        /// The checkpoints topic.
        topic: String,
        /// What is wrong.
        message: String,
    },
}

impl CheckpointError {
    /// Whether the next pass may succeed without anyone doing anything (a cluster back up, a
    /// leader elected).
    pub fn is_retriable(&self) -> bool {
        match self {
            CheckpointError::Kafka { source, .. } => source.is_retriable(),
            CheckpointError::Internal(e) => e.is_retriable(),
            CheckpointError::Topic { .. } => false,
        }
    }

    pub(super) fn kafka(what: impl Into<String>) -> impl FnOnce(strait_kafka::Error) -> Self {
        let what = what.into();
        move |source| CheckpointError::Kafka { what, source }
    }
}
