//! Why one of strait's own topics could not be made, read or written ([`InternalError`]).

use strait_wire::mm2::{CodecError, OffsetSync};
use strait_wire::offset_map::{LoadError, PersistError};

use super::batch;

/// Why one of strait's own topics could not be made, read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InternalError {
    /// A Kafka operation failed.
    #[error(transparent)]
    Kafka(#[from] strait_kafka::Error),
    /// The topic could not be created.
    #[error("cannot create internal topic {topic}: {source}")]
    Create {
        /// The topic.
        topic: String,
        /// Why.
        #[source]
        source: strait_kafka::Error,
    },
    /// A batch read back from the topic cannot be scanned.
    #[error("{topic}: {source}")]
    Scan {
        /// The topic.
        topic: String,
        /// Why.
        #[source]
        source: strait_wire::ScanError,
    },
    /// A batch read back from the topic cannot be decoded.
    #[error("{topic}: cannot decode the batch at offset {offset}: {source}")]
    Decode {
        /// The topic.
        topic: String,
        /// The batch's base offset.
        offset: i64,
        /// Why.
        #[source]
        source: strait_wire::records::RecordsError,
    },
    /// A record read back from the topic was refused by its reader
    /// ([`read_whole_topic`](super::read_whole_topic)'s `each`).
    #[error("{topic} offset {offset}: {source}")]
    Record {
        /// The topic.
        topic: String,
        /// The record's offset.
        offset: i64,
        /// What the reader said.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Reading the topic back stopped moving (a fetch returned nothing before its end).
    #[error("{topic}: no progress reading at offset {position} of {end}")]
    NoProgress {
        /// The topic.
        topic: String,
        /// Where the read stood.
        position: i64,
        /// The end it was reading to.
        end: i64,
    },
    /// The offset map read back from its topic is not valid (it overlaps itself, ...).
    #[error("{topic}: {source}")]
    MapLoad {
        /// The map topic.
        topic: String,
        /// Which partition, and what is wrong.
        #[source]
        source: LoadError,
    },
    /// A key of the offset map cannot be encoded.
    #[error("cannot encode map key: {0}")]
    MapKey(#[source] PersistError),
    /// An offset sync cannot be encoded (a topic name longer than a Kafka `STRING` holds).
    #[error("cannot encode offset sync {sync:?}: {source}")]
    OffsetSync {
        /// The sync.
        sync: OffsetSync,
        /// Why.
        #[source]
        source: CodecError,
    },
    /// A write in the background ended without its result (a bug, or the runtime shutting
    /// down): what it carried cannot be written again from here.
    #[error(
        "the write of {topic} did not finish ({why}); restart strait: the map is read back and \
         the target matched against the source, so nothing is lost"
    )]
    WriteLost {
        /// The topic.
        topic: String,
        /// The task's error.
        why: String,
    },
    /// A batch of records strait writes could not be built.
    #[error(transparent)]
    Batch(#[from] batch::BatchError),
}

impl InternalError {
    /// Whether trying again later can help (a cluster unreachable, a leader moving), as opposed
    /// to a fault that needs a person (a corrupt map, a topic that cannot be created).
    pub fn is_retriable(&self) -> bool {
        match self {
            InternalError::Kafka(e) | InternalError::Create { source: e, .. } => e.is_retriable(),
            _ => false,
        }
    }
}
