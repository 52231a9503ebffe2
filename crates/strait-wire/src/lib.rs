//! strait's pure layer: no sockets, no clocks, no files.
//!
//! - [`frame`]: Kafka request/response framing over the `kafka-protocol` codec, and the
//!   version negotiation that picks, per API, the highest version both sides speak.
//! - [`batch`]: a scanner over the raw record-batch bytes of a Fetch response (magic v2,
//!   KIP-98), yielding each complete batch and its header without decompressing anything.
//! - [`rewrite`]: the header rewrite that lets a fetched batch be produced again unopened
//!   (`docs/design.md` §3.2): base offset, producer id/epoch, base sequence, transactional bit, CRC32C.
//! - [`records`], [`rebuild`]: our own codec for the records inside a batch (repeated header
//!   keys kept) and its compression codecs, bounded against bombs; the slow path that decodes a
//!   batch the broker would refuse (offset holes) or that straddles a position, and re-encodes the
//!   records kept as one dense batch (`docs/design.md` §3.2).
//! - [`merge`]: consecutive batches of a partition merged into one, for a far target.
//! - [`mm2`], [`offset_map`]: MM2's internal record formats byte for byte; the exact offset map
//!   (`docs/design.md` §4), its persisted form, and a model of MM2's translation to compare with.
//!
//! Everything here is fed bytes from the network, so nothing here may panic on them.

pub mod batch;
mod crc;
pub mod frame;
pub mod merge;
pub mod mm2;
pub mod offset_map;
pub mod rebuild;
pub mod records;
pub mod rewrite;

pub use batch::{Attributes, BatchHeader, BatchScanner, ControlType, RawBatch, ScanError};
pub use frame::{FrameError, ResponseFrame, VersionError, Versions};
pub use rewrite::{forward, rewrite_for_forward, ForwardHeader, ForwardedBatch, RewriteError};
