//! strait's own topics, apart from the data it mirrors: the offset map (`map_store.rs`), MM2's
//! offset syncs (`offset_syncs.rs`), and what checkpoints (`offsets/checkpoints.rs`) and
//! heartbeats (`heartbeats.rs`) share with them: making a single-partition compacted topic and
//! reading one back whole (`topic.rs`), and building the small uncompressed batches strait
//! writes itself with a `RawProducer`, each under [`MAX_BATCH_BYTES`](batch::MAX_BATCH_BYTES)
//! (`batch.rs`), and writing them beside the data, one write at a time (`writer.rs`). Their
//! record codecs are in `strait-wire` (`mm2.rs`, `offset_map/persist.rs`).
//!
//! This module sits below the data path (`flow/`), the offset tools (`offsets/`) and the
//! heartbeats, and imports none of them: those depend on it, not on each other. Its errors are
//! [`InternalError`]; each caller turns them into its own at the boundary.

pub(crate) mod batch;
mod error;
pub mod map_store;
pub mod offset_syncs;
mod topic;
mod writer;

pub use error::InternalError;
pub use topic::{ensure_compacted_topic, read_topic_from, read_whole_topic, topic_exists, ReadTo};
