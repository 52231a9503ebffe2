//! Record-batch scanner for the v2 batch format (magic 2, KIP-98).
//!
//! A Fetch response hands us, per partition, a `records` buffer of concatenated batches. The
//! scanner walks it without decompressing or copying anything: each complete batch comes out as
//! its parsed 61-byte header plus a [`Bytes`] slice of the original buffer.
//!
//! Layout (big-endian), with the byte position of each field:
//!
//! ```text
//!  0 baseOffset i64 | 8 batchLength i32 | 12 partitionLeaderEpoch i32 | 16 magic i8 | 17 crc u32
//! 21 attributes i16 | 23 lastOffsetDelta i32 | 27 baseTimestamp i64 | 35 maxTimestamp i64
//! 43 producerId i64 | 51 producerEpoch i16 | 53 baseSequence i32 | 57 recordCount i32 | 61 records
//! ```
//!
//! `batchLength` counts the bytes after itself; the CRC (CRC-32C) covers `attributes` to the end.
//!
//! A broker cuts the last batch of a response off at the fetch size limit (KIP-74), so a
//! truncated trailing batch is normal and ends the scan quietly; see
//! [`BatchScanner::trailing_partial_bytes`].
use std::iter::FusedIterator;

use bytes::Bytes;
use kafka_protocol::records::Compression;

/// Bytes of `baseOffset` + `batchLength`: what must be there to learn a batch's size
/// (`LOG_OVERHEAD` in Kafka).
pub const LOG_OVERHEAD: usize = 12;
/// Size of a v2 batch header, from `baseOffset` through `recordCount`.
pub const HEADER_SIZE: usize = 61;
/// The smallest `batchLength` a v2 batch can have: its header without [`LOG_OVERHEAD`].
pub const MIN_BATCH_LENGTH: i32 = (HEADER_SIZE - LOG_OVERHEAD) as i32;
/// The only batch format this crate reads.
pub const MAGIC_V2: i8 = 2;

// Byte positions of the header fields, shared with `rewrite`.
pub(crate) const BASE_OFFSET_AT: usize = 0;
pub(crate) const BATCH_LENGTH_AT: usize = 8;
pub(crate) const PARTITION_LEADER_EPOCH_AT: usize = 12;
/// The same position for v0/v1 messages (offset i64, size i32, crc u32, magic i8), which is how
/// Kafka tells the formats apart before parsing either.
pub(crate) const MAGIC_AT: usize = 16;
pub(crate) const CRC_AT: usize = 17;
/// First byte covered by the CRC.
pub(crate) const ATTRIBUTES_AT: usize = 21;
pub(crate) const LAST_OFFSET_DELTA_AT: usize = 23;
pub(crate) const BASE_TIMESTAMP_AT: usize = 27;
pub(crate) const MAX_TIMESTAMP_AT: usize = 35;
pub(crate) const PRODUCER_ID_AT: usize = 43;
pub(crate) const PRODUCER_EPOCH_AT: usize = 51;
pub(crate) const BASE_SEQUENCE_AT: usize = 53;
pub(crate) const RECORD_COUNT_AT: usize = 57;

/// Reads `N` bytes at `at`, or `None` if they are not all there.
pub(crate) fn read<const N: usize>(buf: &[u8], at: usize) -> Option<[u8; N]> {
    buf.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// Overwrites `src.len()` bytes at `at`, or returns `None` (writing nothing) if they are not all
/// there.
pub(crate) fn write(buf: &mut [u8], at: usize, src: &[u8]) -> Option<()> {
    buf.get_mut(at..at.checked_add(src.len())?)?
        .copy_from_slice(src);
    Some(())
}

/// The CRC-32C a v2 batch should carry: over everything from `attributes` to the end of `batch`.
///
/// `batch` is one whole batch (as in [`RawBatch::bytes`]). Returns `None` if it is shorter than a
/// header. Compare with [`BatchHeader::crc`] to verify, or write it at byte 17 after patching
/// CRC-covered fields.
pub fn batch_crc(batch: &[u8]) -> Option<u32> {
    if batch.len() < HEADER_SIZE {
        return None;
    }
    batch.get(ATTRIBUTES_AT..).map(crc32c::crc32c)
}

/// The `attributes` field of a v2 batch header.
///
/// Bits 0-2: compression codec; bit 3: timestamp type (set: LogAppendTime); bit 4:
/// transactional; bit 5: control batch; bit 6: has delete horizon (KIP-534). The rest is unused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attributes(pub i16);

impl Attributes {
    const CODEC_MASK: i16 = 0b111;
    const TIMESTAMP_TYPE: i16 = 1 << 3;
    const TRANSACTIONAL: i16 = 1 << 4;
    const CONTROL: i16 = 1 << 5;
    const DELETE_HORIZON: i16 = 1 << 6;

    /// The raw compression codec id, bits 0-2 (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
    pub fn codec_id(self) -> u8 {
        // Masked to 3 bits, so the cast cannot truncate.
        (self.0 & Self::CODEC_MASK) as u8
    }

    /// The compression codec, or `None` for the ids 5-7 that Kafka does not define.
    ///
    /// The scanner does not reject unknown codecs: it never decompresses, and forwarding an
    /// unopened batch does not need to know its codec.
    pub fn compression(self) -> Option<Compression> {
        match self.codec_id() {
            0 => Some(Compression::None),
            1 => Some(Compression::Gzip),
            2 => Some(Compression::Snappy),
            3 => Some(Compression::Lz4),
            4 => Some(Compression::Zstd),
            _ => None,
        }
    }

    /// Whether the batch belongs to a transaction (bit 4).
    pub fn is_transactional(self) -> bool {
        self.0 & Self::TRANSACTIONAL != 0
    }

    /// Whether the batch holds control records, i.e. transaction markers (bit 5).
    pub fn is_control(self) -> bool {
        self.0 & Self::CONTROL != 0
    }

    /// Whether the timestamps are the broker's LogAppendTime rather than CreateTime (bit 3).
    pub fn timestamp_type_log_append(self) -> bool {
        self.0 & Self::TIMESTAMP_TYPE != 0
    }

    /// Whether `baseTimestamp` holds a delete horizon set by compaction (bit 6, KIP-534).
    pub fn has_delete_horizon(self) -> bool {
        self.0 & Self::DELETE_HORIZON != 0
    }

    /// The same attributes with the transactional bit set or cleared.
    #[must_use]
    pub fn with_transactional(self, transactional: bool) -> Self {
        if transactional {
            Self(self.0 | Self::TRANSACTIONAL)
        } else {
            Self(self.0 & !Self::TRANSACTIONAL)
        }
    }
}

/// A v2 batch header, every field as on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// Offset of the first record (set by the broker that appended the batch).
    pub base_offset: i64,
    /// Bytes in the batch after this field; the whole batch is `batch_length + 12` bytes.
    pub batch_length: i32,
    /// Leader epoch of the broker that appended the batch (KIP-101); -1 from producers.
    pub partition_leader_epoch: i32,
    /// Format version; 2 for every batch the scanner yields.
    pub magic: i8,
    /// CRC-32C over `attributes` to the end of the batch, as stored.
    pub crc: u32,
    /// Codec, timestamp type, transactional, control and delete-horizon bits.
    pub attributes: Attributes,
    /// Offset of the last record relative to `base_offset`.
    pub last_offset_delta: i32,
    /// Timestamp of the first record (or the delete horizon, see
    /// [`Attributes::has_delete_horizon`]).
    pub base_timestamp: i64,
    /// Largest timestamp in the batch.
    pub max_timestamp: i64,
    /// Idempotent/transactional producer id, -1 if none.
    pub producer_id: i64,
    /// Producer epoch, -1 if none.
    pub producer_epoch: i16,
    /// Sequence number of the first record, -1 if none.
    pub base_sequence: i32,
    /// Number of records in the batch.
    pub record_count: i32,
}

impl BatchHeader {
    /// Parses the first [`HEADER_SIZE`] bytes of `buf` as a v2 header, without validating
    /// anything (not even the magic byte). `None` if `buf` is shorter than a header.
    pub fn parse(buf: &[u8]) -> Option<Self> {
        if buf.len() < HEADER_SIZE {
            return None;
        }
        Some(Self {
            base_offset: i64::from_be_bytes(read(buf, BASE_OFFSET_AT)?),
            batch_length: i32::from_be_bytes(read(buf, BATCH_LENGTH_AT)?),
            partition_leader_epoch: i32::from_be_bytes(read(buf, PARTITION_LEADER_EPOCH_AT)?),
            magic: i8::from_be_bytes(read(buf, MAGIC_AT)?),
            crc: u32::from_be_bytes(read(buf, CRC_AT)?),
            attributes: Attributes(i16::from_be_bytes(read(buf, ATTRIBUTES_AT)?)),
            last_offset_delta: i32::from_be_bytes(read(buf, LAST_OFFSET_DELTA_AT)?),
            base_timestamp: i64::from_be_bytes(read(buf, BASE_TIMESTAMP_AT)?),
            max_timestamp: i64::from_be_bytes(read(buf, MAX_TIMESTAMP_AT)?),
            producer_id: i64::from_be_bytes(read(buf, PRODUCER_ID_AT)?),
            producer_epoch: i16::from_be_bytes(read(buf, PRODUCER_EPOCH_AT)?),
            base_sequence: i32::from_be_bytes(read(buf, BASE_SEQUENCE_AT)?),
            record_count: i32::from_be_bytes(read(buf, RECORD_COUNT_AT)?),
        })
    }

    /// Offset of the last record: `base_offset + last_offset_delta`.
    ///
    /// Saturates instead of overflowing on a nonsensical header; the scanner never yields a
    /// batch for which that could happen.
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .saturating_add(i64::from(self.last_offset_delta))
    }

    /// The offset to fetch after this batch: `last_offset() + 1`. Saturates like
    /// [`last_offset`](Self::last_offset).
    pub fn next_offset(&self) -> i64 {
        self.last_offset().saturating_add(1)
    }

    /// Whether the records have consecutive offsets: `record_count == last_offset_delta + 1`,
    /// with at least one record.
    ///
    /// A broker refuses a produced batch that is not dense. Compaction leaves batches with gaps
    /// (and even empty batches, kept for producer state), which fail this test and must be
    /// rebuilt or dropped rather than forwarded unopened (`docs/design.md` §3.2).
    pub fn is_dense(&self) -> bool {
        self.last_offset_delta >= 0
            && i64::from(self.record_count) == i64::from(self.last_offset_delta) + 1
    }

    /// Size of the whole batch in bytes, `batch_length + 12`; 0 for a negative `batch_length`.
    pub fn total_size(&self) -> usize {
        usize::try_from(self.batch_length)
            .ok()
            .and_then(|len| len.checked_add(LOG_OVERHEAD))
            .unwrap_or(0)
    }

    /// Whether an idempotent or transactional producer wrote the batch (`producer_id >= 0`).
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }
}

/// One complete batch: its header and all its bytes (a zero-copy slice of the fetched buffer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawBatch {
    /// The parsed header, as found in `bytes`.
    pub header: BatchHeader,
    /// The whole batch, header included: `header.total_size()` bytes.
    pub bytes: Bytes,
}

impl RawBatch {
    /// The record data after the header, compressed with the batch's codec if any.
    pub fn records_bytes(&self) -> Bytes {
        self.bytes.slice(HEADER_SIZE.min(self.bytes.len())..)
    }

    /// For a control batch, the kind of marker it carries (KIP-98): the `type` field of its
    /// record's key (`version: i16, type: i16`). `None` for a data batch or a control batch
    /// whose record cannot be read. Control batches are never compressed.
    pub fn control_type(&self) -> Option<ControlType> {
        if !self.header.attributes.is_control() || self.header.attributes.codec_id() != 0 {
            return None;
        }
        let mut rest = self.bytes.get(HEADER_SIZE..)?;
        let _length = read_varint(&mut rest)?;
        let (_attributes, tail) = rest.split_first()?;
        rest = tail;
        let _timestamp_delta = read_varint(&mut rest)?;
        let _offset_delta = read_varint(&mut rest)?;
        let key_length = read_varint(&mut rest)?;
        if key_length < 4 {
            return None;
        }
        let key = rest.get(..4)?;
        let kind = i16::from_be_bytes([key[2], key[3]]);
        Some(match kind {
            0 => ControlType::Abort,
            1 => ControlType::Commit,
            other => ControlType::Other(other),
        })
    }
}

/// The marker a control batch carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlType {
    /// A transaction was aborted: its producer's earlier records in it are to be skipped.
    Abort,
    /// A transaction was committed.
    Commit,
    /// Another control record (e.g. KRaft's); never seen in a data topic.
    Other(i16),
}

/// Reads a zig-zag varint (up to 64 bits), advancing `buf`. `None` if cut short or too long.
fn read_varint(buf: &mut &[u8]) -> Option<i64> {
    let mut raw: u64 = 0;
    for i in 0..10 {
        let (byte, rest) = buf.split_first()?;
        *buf = rest;
        raw |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some(((raw >> 1) as i64) ^ -((raw & 1) as i64));
        }
    }
    None
}

/// Why a buffer of record batches could not be scanned further.
///
/// Each variant carries `offset`, the byte position in the scanned buffer where the bad batch
/// starts, and the batch's `base_offset` (Kafka offset), which is readable whenever an error is
/// raised. The scanner yields one error and then stops.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScanError {
    /// `batchLength` is negative, or (for a v2 batch) shorter than a header.
    #[error(
        "record batch at byte {offset} (base offset {base_offset}) has invalid length \
         {batch_length}, minimum is {MIN_BATCH_LENGTH}"
    )]
    InvalidBatchLength {
        /// Byte position of the batch in the scanned buffer.
        offset: usize,
        /// Kafka offset of the batch's first record.
        base_offset: i64,
        /// The `batchLength` field as read.
        batch_length: i32,
    },
    /// The magic byte is not 2: a legacy v0/v1 message set (not supported yet) or garbage.
    #[error(
        "record batch at byte {offset} (base offset {base_offset}) has magic {magic}, \
         only v2 batches are supported"
    )]
    UnsupportedMagic {
        /// The magic byte as read (0 or 1 for a legacy message set).
        magic: i8,
        /// Byte position of the batch in the scanned buffer.
        offset: usize,
        /// Kafka offset of the batch (or legacy message), read from the same position.
        base_offset: i64,
    },
    /// The batch declares a size over the limit set with [`BatchScanner::with_max_batch_size`].
    #[error(
        "record batch at byte {offset} (base offset {base_offset}) declares {size} bytes, \
         over the limit of {max}"
    )]
    BatchTooLarge {
        /// Byte position of the batch in the scanned buffer.
        offset: usize,
        /// Kafka offset of the batch's first record.
        base_offset: i64,
        /// The declared total size, `batchLength + 12`.
        size: usize,
        /// The configured limit.
        max: usize,
    },
    /// The stored CRC does not match the batch's bytes.
    #[error(
        "record batch at byte {offset} (base offset {base_offset}) is corrupt: stored CRC \
         {expected:#010x}, computed {actual:#010x}"
    )]
    CrcMismatch {
        /// Byte position of the batch in the scanned buffer.
        offset: usize,
        /// Kafka offset of the batch's first record.
        base_offset: i64,
        /// The CRC stored in the header.
        expected: u32,
        /// The CRC computed over the bytes.
        actual: u32,
    },
    /// `recordCount` is negative.
    #[error(
        "record batch at byte {offset} (base offset {base_offset}) has negative record count \
         {record_count}"
    )]
    InvalidRecordCount {
        /// Byte position of the batch in the scanned buffer.
        offset: usize,
        /// Kafka offset of the batch's first record.
        base_offset: i64,
        /// The `recordCount` field as read.
        record_count: i32,
    },
    /// `lastOffsetDelta` is negative, or the batch's last offset does not fit an i64. Either
    /// would make [`BatchHeader::next_offset`] fail to move a fetch position forward.
    #[error(
        "record batch at byte {offset} (base offset {base_offset}) has invalid last offset \
         delta {last_offset_delta}"
    )]
    InvalidLastOffsetDelta {
        /// Byte position of the batch in the scanned buffer.
        offset: usize,
        /// Kafka offset of the batch's first record.
        base_offset: i64,
        /// The `lastOffsetDelta` field as read.
        last_offset_delta: i32,
    },
}

impl ScanError {
    /// Byte position, in the scanned buffer, of the batch that failed.
    pub fn offset(&self) -> usize {
        match *self {
            Self::InvalidBatchLength { offset, .. }
            | Self::UnsupportedMagic { offset, .. }
            | Self::BatchTooLarge { offset, .. }
            | Self::CrcMismatch { offset, .. }
            | Self::InvalidRecordCount { offset, .. }
            | Self::InvalidLastOffsetDelta { offset, .. } => offset,
        }
    }

    /// Kafka offset of the batch that failed, as read from its first 8 bytes.
    pub fn base_offset(&self) -> i64 {
        match *self {
            Self::InvalidBatchLength { base_offset, .. }
            | Self::UnsupportedMagic { base_offset, .. }
            | Self::BatchTooLarge { base_offset, .. }
            | Self::CrcMismatch { base_offset, .. }
            | Self::InvalidRecordCount { base_offset, .. }
            | Self::InvalidLastOffsetDelta { base_offset, .. } => base_offset,
        }
    }

    /// Whether fetching the same offset again may succeed.
    ///
    /// Only a CRC mismatch may be transient (bytes damaged on the way); a caller should still
    /// bound such retries, since a batch corrupt on the broker's disk fails every time. Every
    /// other error is about the format and repeats on the same bytes.
    pub fn is_retriable(&self) -> bool {
        matches!(self, Self::CrcMismatch { .. })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Scanning,
    /// Ended without error; holds the bytes of a partial trailing batch (0 if none).
    Done {
        partial: usize,
    },
    /// Yielded an error.
    Failed,
}

/// Walks a buffer of concatenated v2 record batches (a Fetch response partition's `records`),
/// yielding each complete batch zero-copy.
///
/// For each batch, in order:
///
/// 1. Fewer than 12 bytes left: partial trailing batch, the scan ends.
/// 2. Negative `batchLength`: [`ScanError::InvalidBatchLength`].
/// 3. Fewer than 17 bytes left (the magic byte is not there yet): partial, the scan ends.
/// 4. Magic not 2: [`ScanError::UnsupportedMagic`]. Legacy v0/v1 messages keep their magic at
///    the same position, so they are reported as such rather than as a bad length.
/// 5. `batchLength` below 49 (a v2 header): [`ScanError::InvalidBatchLength`].
/// 6. Declared size over [`with_max_batch_size`](Self::with_max_batch_size), if set:
///    [`ScanError::BatchTooLarge`].
/// 7. Fewer than `batchLength + 12` bytes left: partial, the scan ends.
/// 8. CRC check (unless disabled), then negative `recordCount` and bad `lastOffsetDelta`.
///
/// A partial trailing batch is not an error: brokers cut the last batch off at the fetch size
/// limit (KIP-74). The iterator returns `None`, and
/// [`trailing_partial_bytes`](Self::trailing_partial_bytes) says how many bytes were left over.
///
/// A declared length larger than what is left is therefore taken as partial, however large:
/// `batchLength` fits an i32 and a broker's `message.max.bytes` can be set to anything, so the
/// scanner alone cannot tell a huge batch from a corrupt length. A caller that knows its limit
/// can set it with [`with_max_batch_size`](Self::with_max_batch_size). A caller that sees a
/// partial batch and no complete one after a fetch that should have returned one (KIP-74 makes
/// a broker return at least one whole batch) should treat that as an error of its own.
///
/// Once an error has been yielded, the iterator returns `None`.
#[derive(Debug, Clone)]
pub struct BatchScanner {
    buf: Bytes,
    /// Start of the next batch; every byte before it was yielded as a complete batch.
    pos: usize,
    verify_crc: bool,
    max_batch_size: Option<usize>,
    state: State,
}

impl BatchScanner {
    /// A scanner over `buf` that verifies each batch's CRC.
    pub fn new(buf: Bytes) -> Self {
        Self {
            buf,
            pos: 0,
            verify_crc: true,
            max_batch_size: None,
            state: State::Scanning,
        }
    }

    /// A scanner over `buf` that skips the CRC check, for callers whose bytes were verified
    /// already or who accept the risk to save a pass over the data.
    ///
    /// Beware: [`rewrite_for_forward`](crate::rewrite_for_forward) writes a fresh CRC, so a
    /// batch corrupted before it was scanned this way would leave with a valid CRC, and the
    /// target broker could not notice.
    pub fn without_crc_check(buf: Bytes) -> Self {
        Self::new(buf).verify_crc(false)
    }

    /// Turns the CRC check on or off (on by default).
    #[must_use]
    pub fn verify_crc(mut self, verify: bool) -> Self {
        self.verify_crc = verify;
        self
    }

    /// Refuses batches declaring more than `max` bytes (`batchLength + 12`) with
    /// [`ScanError::BatchTooLarge`], even when they are cut off. No limit by default.
    #[must_use]
    pub fn with_max_batch_size(mut self, max: usize) -> Self {
        self.max_batch_size = Some(max);
        self
    }

    /// Bytes of the complete batches yielded so far; the next batch starts here.
    pub fn consumed_bytes(&self) -> usize {
        self.pos
    }

    /// Bytes not yet yielded as complete batches.
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// After the scan ended without error, the size of the partial trailing batch (0 if the
    /// buffer ended on a batch boundary). 0 while scanning and after an error.
    pub fn trailing_partial_bytes(&self) -> usize {
        match self.state {
            State::Done { partial } => partial,
            State::Scanning | State::Failed => 0,
        }
    }

    /// Whether the scan is over (the iterator returned `None` or an error).
    pub fn is_finished(&self) -> bool {
        self.state != State::Scanning
    }

    /// Scans the batch at `self.pos`: `Ok(None)` when the rest is a partial batch (or nothing).
    fn scan_one(&self) -> Result<Option<RawBatch>, ScanError> {
        let offset = self.pos;
        let rest = self.buf.get(offset..).unwrap_or_default();
        let (Some(base_offset), Some(batch_length)) = (
            read(rest, BASE_OFFSET_AT).map(i64::from_be_bytes),
            read(rest, BATCH_LENGTH_AT).map(i32::from_be_bytes),
        ) else {
            return Ok(None);
        };
        let invalid_length = ScanError::InvalidBatchLength {
            offset,
            base_offset,
            batch_length,
        };
        let Ok(length) = usize::try_from(batch_length) else {
            return Err(invalid_length);
        };
        let Some(magic) = read(rest, MAGIC_AT).map(i8::from_be_bytes) else {
            return Ok(None);
        };
        if magic != MAGIC_V2 {
            return Err(ScanError::UnsupportedMagic {
                magic,
                offset,
                base_offset,
            });
        }
        if batch_length < MIN_BATCH_LENGTH {
            return Err(invalid_length);
        }
        // Cannot overflow: length <= i32::MAX.
        let size = length.saturating_add(LOG_OVERHEAD);
        if let Some(max) = self.max_batch_size {
            if size > max {
                return Err(ScanError::BatchTooLarge {
                    offset,
                    base_offset,
                    size,
                    max,
                });
            }
        }
        let Some(batch) = rest.get(..size) else {
            return Ok(None);
        };
        let Some(header) = BatchHeader::parse(batch) else {
            // Unreachable: size >= HEADER_SIZE was checked above. Treat as partial.
            return Ok(None);
        };
        if self.verify_crc {
            // `batch` holds at least a header, so there is a CRC to compute; the fallback
            // only keeps this panic-free.
            let actual = batch_crc(batch).unwrap_or(!header.crc);
            if actual != header.crc {
                return Err(ScanError::CrcMismatch {
                    offset,
                    base_offset,
                    expected: header.crc,
                    actual,
                });
            }
        }
        if header.record_count < 0 {
            return Err(ScanError::InvalidRecordCount {
                offset,
                base_offset,
                record_count: header.record_count,
            });
        }
        let next_offset_fits = base_offset
            .checked_add(i64::from(header.last_offset_delta))
            .and_then(|last| last.checked_add(1))
            .is_some();
        if header.last_offset_delta < 0 || !next_offset_fits {
            return Err(ScanError::InvalidLastOffsetDelta {
                offset,
                base_offset,
                last_offset_delta: header.last_offset_delta,
            });
        }
        let end = offset.saturating_add(size);
        Ok(Some(RawBatch {
            header,
            bytes: self.buf.slice(offset..end),
        }))
    }
}

impl Iterator for BatchScanner {
    type Item = Result<RawBatch, ScanError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.state != State::Scanning {
            return None;
        }
        match self.scan_one() {
            Ok(Some(batch)) => {
                self.pos = self.pos.saturating_add(batch.bytes.len());
                Some(Ok(batch))
            }
            Ok(None) => {
                self.state = State::Done {
                    partial: self.remaining(),
                };
                None
            }
            Err(err) => {
                self.state = State::Failed;
                Some(Err(err))
            }
        }
    }
}

impl FusedIterator for BatchScanner {}

#[cfg(test)]
mod tests {
    use super::*;

    fn marker(kind: i16, control: bool) -> RawBatch {
        use kafka_protocol::records::{
            Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
        };
        let mut key = vec![0u8, 0];
        key.extend_from_slice(&kind.to_be_bytes());
        let record = Record {
            transactional: true,
            control,
            partition_leader_epoch: 0,
            producer_id: 7,
            producer_epoch: 0,
            timestamp_type: TimestampType::Creation,
            offset: 40,
            sequence: -1,
            timestamp: 1,
            key: Some(Bytes::from(key)),
            value: Some(Bytes::from_static(&[0, 0, 0, 0, 0, 0])),
            headers: Default::default(),
            delete_horizon: false,
        };
        let mut buf = bytes::BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        RecordBatchEncoder::encode(&mut buf, [&record], &options).unwrap();
        BatchScanner::new(buf.freeze()).next().unwrap().unwrap()
    }

    #[test]
    fn control_markers_are_read_from_the_record_key() {
        assert_eq!(marker(0, true).control_type(), Some(ControlType::Abort));
        assert_eq!(marker(1, true).control_type(), Some(ControlType::Commit));
        assert_eq!(marker(5, true).control_type(), Some(ControlType::Other(5)));
        assert_eq!(
            marker(0, false).control_type(),
            None,
            "a data batch has no marker"
        );
        // Cut anywhere in the record, the marker is unreadable, never a panic.
        let whole = marker(0, true);
        for cut in HEADER_SIZE..whole.bytes.len() {
            let cut_batch = RawBatch {
                header: whole.header,
                bytes: whole.bytes.slice(..cut),
            };
            let _ = cut_batch.control_type();
        }
    }

    #[test]
    fn varints_decode_zigzag_and_refuse_overlong() {
        let mut b: &[u8] = &[0x01];
        assert_eq!(read_varint(&mut b), Some(-1));
        let mut b: &[u8] = &[0xac, 0x02];
        assert_eq!(read_varint(&mut b), Some(150));
        let mut b: &[u8] = &[0xff; 11];
        assert_eq!(read_varint(&mut b), None);
        let mut b: &[u8] = &[0x80];
        assert_eq!(read_varint(&mut b), None);
    }

    /// A minimal valid batch with no records payload, for unit tests that need exact bytes.
    fn tiny_batch(base_offset: i64, record_count: i32, last_offset_delta: i32) -> Vec<u8> {
        let mut b = vec![0u8; HEADER_SIZE];
        b[0..8].copy_from_slice(&base_offset.to_be_bytes());
        b[8..12].copy_from_slice(&MIN_BATCH_LENGTH.to_be_bytes());
        b[12..16].copy_from_slice(&(-1i32).to_be_bytes());
        b[16] = 2;
        b[23..27].copy_from_slice(&last_offset_delta.to_be_bytes());
        b[43..51].copy_from_slice(&(-1i64).to_be_bytes());
        b[51..53].copy_from_slice(&(-1i16).to_be_bytes());
        b[53..57].copy_from_slice(&(-1i32).to_be_bytes());
        b[57..61].copy_from_slice(&record_count.to_be_bytes());
        let crc = batch_crc(&b).unwrap();
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    }

    #[test]
    fn attributes_bits() {
        let a = Attributes(0b111_1011);
        assert_eq!(a.compression(), Some(Compression::Lz4));
        assert!(a.timestamp_type_log_append());
        assert!(a.is_transactional());
        assert!(a.is_control());
        assert!(a.has_delete_horizon());
        assert!(!a.with_transactional(false).is_transactional());
        assert_eq!(a.with_transactional(false).with_transactional(true), a);
        for id in 5..=7 {
            assert_eq!(Attributes(id).compression(), None);
            assert_eq!(Attributes(id).codec_id(), id as u8);
        }
        assert_eq!(Attributes(0).compression(), Some(Compression::None));
    }

    #[test]
    fn header_helpers() {
        let h = BatchHeader::parse(&tiny_batch(100, 3, 2)).unwrap();
        assert_eq!(h.last_offset(), 102);
        assert_eq!(h.next_offset(), 103);
        assert!(h.is_dense());
        assert_eq!(h.total_size(), HEADER_SIZE);
        assert!(!h.has_producer_id());
        let gap = BatchHeader::parse(&tiny_batch(100, 3, 4)).unwrap();
        assert!(!gap.is_dense());
        let empty = BatchHeader::parse(&tiny_batch(100, 0, -1)).unwrap();
        assert!(!empty.is_dense(), "an empty batch is not dense");
        let neg = BatchHeader {
            batch_length: -5,
            base_offset: i64::MAX,
            last_offset_delta: i32::MAX,
            ..h
        };
        assert_eq!(neg.total_size(), 0);
        assert_eq!(neg.next_offset(), i64::MAX);
    }

    #[test]
    fn scans_tiny_batches_and_counts_partial() {
        let mut buf = tiny_batch(0, 1, 0);
        buf.extend(tiny_batch(1, 2, 1));
        buf.extend(&tiny_batch(3, 1, 0)[..30]);
        let mut s = BatchScanner::new(Bytes::from(buf));
        assert_eq!(s.next().unwrap().unwrap().header.base_offset, 0);
        assert_eq!(s.next().unwrap().unwrap().header.base_offset, 1);
        assert!(!s.is_finished());
        assert!(s.next().is_none());
        assert!(s.is_finished());
        assert_eq!(s.consumed_bytes(), 2 * HEADER_SIZE);
        assert_eq!(s.trailing_partial_bytes(), 30);
        assert_eq!(s.remaining(), 30);
        assert!(s.next().is_none());
    }

    #[test]
    fn max_batch_size_applies_to_partial_batches() {
        let mut b = tiny_batch(7, 1, 0);
        b[8..12].copy_from_slice(&1_000_000i32.to_be_bytes());
        let mut s = BatchScanner::new(Bytes::from(b.clone()));
        assert!(s.next().is_none());
        assert_eq!(s.trailing_partial_bytes(), HEADER_SIZE);
        let mut s = BatchScanner::new(Bytes::from(b)).with_max_batch_size(1 << 16);
        let err = s.next().unwrap().unwrap_err();
        assert_eq!(
            err,
            ScanError::BatchTooLarge {
                offset: 0,
                base_offset: 7,
                size: 1_000_012,
                max: 1 << 16
            }
        );
        assert!(!err.is_retriable());
        assert!(s.next().is_none());
    }

    #[test]
    fn negative_last_offset_delta_is_refused() {
        let buf = tiny_batch(0, 1, -1);
        let err = BatchScanner::new(Bytes::from(buf))
            .next()
            .unwrap()
            .unwrap_err();
        assert!(matches!(
            err,
            ScanError::InvalidLastOffsetDelta {
                last_offset_delta: -1,
                ..
            }
        ));
        let buf = tiny_batch(i64::MAX, 1, 0);
        let err = BatchScanner::new(Bytes::from(buf))
            .next()
            .unwrap()
            .unwrap_err();
        assert_eq!(err.base_offset(), i64::MAX);
    }

    #[test]
    fn crc_check_can_be_skipped() {
        let mut b = tiny_batch(0, 1, 0);
        b[17] ^= 0xff;
        let err = BatchScanner::new(Bytes::from(b.clone()))
            .next()
            .unwrap()
            .unwrap_err();
        assert!(err.is_retriable());
        assert_eq!(err.offset(), 0);
        let ok = BatchScanner::without_crc_check(Bytes::from(b))
            .next()
            .unwrap();
        assert!(ok.is_ok());
    }
}
