//! Why a flow stops ([`FlowError`]): a module of its own, below the flow's other modules that
//! return it, so that they need not import the flow itself.

use strait_kafka::TopicPartition;
use strait_wire::offset_map::{MapError, SourcePartition};
use strait_wire::rebuild::RebuildError;

use crate::internal::InternalError;

/// Errors that stop a flow.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FlowError {
    /// A Kafka operation failed for good.
    #[error(transparent)]
    Kafka(#[from] strait_kafka::Error),
    /// A remote topic could not be made.
    #[error("cannot create remote topic {topic}: {source}")]
    Topic {
        /// The remote topic.
        topic: String,
        /// Why.
        #[source]
        source: strait_kafka::Error,
    },
    /// The offset map refused a change to a partition's map (it would overlap what the map
    /// holds).
    #[error("offset map: {partition}: {source}")]
    Map {
        /// The source partition.
        partition: SourcePartition,
        /// Why.
        #[source]
        source: MapError,
    },
    /// A fetched batch had to be rebuilt (a compaction hole, cut by the partition's position)
    /// and could not be: its records cannot be decoded.
    #[error("{partition}: cannot rebuild the batch at offset {offset}: {source}")]
    Rebuild {
        /// The source partition.
        partition: TopicPartition,
        /// The batch's base offset.
        offset: i64,
        /// Why.
        #[source]
        source: RebuildError,
    },
    /// One of the flow's own topics (`what`: the offset map's, MM2's offset syncs) could not be
    /// made, read or written.
    #[error("{what}: {source}")]
    Internal {
        /// Which topic: `"offset map"`, `"offset syncs"`.
        what: &'static str,
        /// Why (boxed: it is large, and rare).
        #[source]
        source: Box<InternalError>,
    },
    /// A partition no longer matches its offset map (a source or remote topic deleted and
    /// created again, or truncated): it is not mirrored until someone acts. Stops only that
    /// partition.
    #[error("{0}")]
    Diverged(String),
    /// Another worker owns this flow's unit now: it initialised the unit's transactional id,
    /// which fenced this producer (PRODUCER_FENCED). Nothing more is written here, not data,
    /// not map records (`docs/design.md` §7.3).
    #[error(
        "fenced: another owner initialised transactional id {transactional_id}, so this one \
         writes nothing more ({source})"
    )]
    Fenced {
        /// The unit's transactional id.
        transactional_id: String,
        /// The broker's refusal.
        #[source]
        source: strait_kafka::Error,
    },
    /// Ending a transaction failed in a way a new epoch of the producer may mend (a timeout,
    /// the coordinator moving, the transaction aborted by its timeout): the flow resumes from
    /// its map after re-initialising its transactional id with its current epoch, which says
    /// PRODUCER_FENCED instead if another owner took over.
    #[error("transaction of {transactional_id} not committed: {source}")]
    Transaction {
        /// The unit's transactional id.
        transactional_id: String,
        /// Why.
        #[source]
        source: strait_kafka::Error,
    },
}

impl FlowError {
    /// Whether trying again later can help (a cluster unreachable, a leader moving), as opposed
    /// to a fault that needs a person (a corrupt map, a topic that cannot be created).
    pub fn is_retriable(&self) -> bool {
        match self {
            FlowError::Kafka(e) | FlowError::Topic { source: e, .. } => e.is_retriable(),
            FlowError::Internal { source, .. } => source.is_retriable(),
            // A batch that cannot be rebuilt fails the same way when fetched again.
            FlowError::Map { .. }
            | FlowError::Rebuild { .. }
            | FlowError::Diverged(_)
            | FlowError::Fenced { .. } => false,
            FlowError::Transaction { .. } => true,
        }
    }

    /// Whether another owner fenced this flow's transactional producer.
    pub fn is_fenced(&self) -> bool {
        matches!(self, FlowError::Fenced { .. })
    }

    /// A change to `partition`'s map refused.
    pub(super) fn map(partition: &SourcePartition) -> impl FnOnce(MapError) -> FlowError + '_ {
        move |source| FlowError::Map {
            partition: partition.clone(),
            source,
        }
    }

    /// Turns an error of one of the flow's own topics (`what`, see [`FlowError::Internal`])
    /// into the flow's: a failed Kafka operation stays [`FlowError::Kafka`], as it was before
    /// these topics had a module of their own.
    pub(super) fn internal(what: &'static str) -> impl FnOnce(InternalError) -> FlowError {
        move |e| match e {
            InternalError::Kafka(e) => FlowError::Kafka(e),
            source => FlowError::Internal {
                what,
                source: Box::new(source),
            },
        }
    }
}
