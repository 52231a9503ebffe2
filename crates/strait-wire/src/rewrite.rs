//! Header rewrite that lets a fetched batch be produced again unopened (`docs/design.md` §3.2).
//!
//! Only header fields change; the (possibly compressed) records are kept byte for byte ([`forward`]
//! does not even copy them), so
//! timestamps, keys, values, headers, codec and batch boundaries all survive. The fields are:
//!
//! - `baseOffset` := 0. The target broker assigns offsets on append; producers send 0.
//! - `partitionLeaderEpoch` := -1, what producers send (`NO_PARTITION_LEADER_EPOCH`). The
//!   source's epoch means nothing on the target, whose leader stamps its own on append (KIP-101);
//!   the field sits outside the CRC, so this costs nothing.
//! - `producerId`, `producerEpoch`, `baseSequence` := ours (KIP-98 idempotence), so the target
//!   de-duplicates our retries and keeps our order.
//! - the transactional bit := whether we forward inside a transaction.
//! - `crc` := the CRC-32C over `attributes` to the end, after those changes. It is derived from
//!   the batch's own CRC and the changed header bytes alone ([`crc_after_patch`]), without
//!   reading the records: a batch whose CRC did not match its bytes leaves with a CRC that still
//!   does not match, so a corruption before the rewrite is caught by the target broker
//!   (`CORRUPT_MESSAGE`) instead of being sealed under a fresh CRC.
//!
//! Control batches, non-dense batches and sequences that would wrap are refused; see
//! [`RewriteError`].
use bytes::{Bytes, BytesMut};

use crate::batch::{
    write, BatchHeader, RawBatch, ATTRIBUTES_AT, BASE_OFFSET_AT, BASE_SEQUENCE_AT, CRC_AT,
    HEADER_SIZE, LOG_OVERHEAD, MAGIC_V2, PARTITION_LEADER_EPOCH_AT, PRODUCER_EPOCH_AT,
    PRODUCER_ID_AT,
};

/// What a forwarded batch carries instead of the source producer's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForwardHeader {
    /// Our producer id on the target cluster (-1 for a non-idempotent forward).
    pub producer_id: i64,
    /// Our producer epoch (-1 for a non-idempotent forward).
    pub producer_epoch: i16,
    /// Sequence number of the batch's first record in our per-partition sequence (-1 for a
    /// non-idempotent forward).
    pub base_sequence: i32,
    /// Whether the batch is produced inside one of our transactions (sets the transactional bit).
    pub transactional: bool,
}

/// Why a batch cannot be forwarded unopened.
///
/// None of these is retriable: the same batch fails the same way every time. What a caller does
/// instead depends on the variant (see each one).
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RewriteError {
    /// A control batch (transaction marker). Clients may not produce these; the mirror drops
    /// them.
    #[error("batch at base offset {base_offset} is a control batch, which cannot be produced")]
    ControlBatch {
        /// Kafka offset of the batch in the source partition.
        base_offset: i64,
    },
    /// The records do not have consecutive offsets (`lastOffsetDelta + 1 != recordCount`), as
    /// after compaction. A broker refuses such a batch from a producer; it must be rebuilt.
    #[error(
        "batch at base offset {base_offset} is not dense ({record_count} records, last \
         offset delta {last_offset_delta}) and must be rebuilt"
    )]
    NotDense {
        /// Kafka offset of the batch in the source partition.
        base_offset: i64,
        /// The `recordCount` field.
        record_count: i32,
        /// The `lastOffsetDelta` field.
        last_offset_delta: i32,
    },
    /// The bytes are shorter than a v2 batch header.
    #[error("batch of {len} bytes is shorter than a v2 header")]
    TooShort {
        /// Bytes given.
        len: usize,
    },
    /// The `batchLength` field does not match the bytes given (`batchLength + 12 != len`).
    #[error("batch declares length {batch_length} but {len} bytes were given")]
    LengthMismatch {
        /// The `batchLength` field.
        batch_length: i32,
        /// Bytes given.
        len: usize,
    },
    /// The magic byte is not 2.
    #[error("batch has magic {magic}, only v2 batches can be rewritten")]
    UnsupportedMagic {
        /// The magic byte found.
        magic: i8,
    },
}

impl RewriteError {
    /// Whether trying the same rewrite again may succeed: never, see [`RewriteError`].
    pub fn is_retriable(&self) -> bool {
        false
    }
}

/// A batch rewritten for forwarding, in two pieces: its new header, and its records as they
/// came, a slice of the fetched buffer. Written one after the other they are the batch
/// [`rewrite_for_forward`] returns, but the records, nearly all of the bytes, are never copied:
/// the producer hands both pieces to the socket as they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardedBatch {
    /// The header (the first [`HEADER_SIZE`] bytes), rewritten, then the records, untouched.
    pieces: [Bytes; 2],
}

impl ForwardedBatch {
    /// The header and the records, in the order they go on the wire.
    pub fn pieces(&self) -> &[Bytes] {
        &self.pieces
    }

    /// The batch's size in bytes.
    pub fn len(&self) -> usize {
        self.pieces.iter().map(Bytes::len).sum()
    }

    /// Never true: a batch has at least a header. (Clippy asks for it beside `len`.)
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole batch in one buffer (a copy; for tests and callers that need contiguous bytes).
    pub fn to_bytes(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(self.len());
        for piece in &self.pieces {
            out.extend_from_slice(piece);
        }
        out.freeze()
    }
}

/// Rewrites `batch` for forwarding under `fwd` without copying its records: the same checks
/// and bytes as [`rewrite_for_forward`], as a [`ForwardedBatch`]. Only the header is read and
/// written; the records are neither copied nor read.
pub fn forward(batch: &RawBatch, fwd: &ForwardHeader) -> Result<ForwardedBatch, RewriteError> {
    let bytes = &batch.bytes;
    let len = bytes.len();
    let header = BatchHeader::parse(bytes).ok_or(RewriteError::TooShort { len })?;
    check(&header, len)?;
    let records = bytes.slice(HEADER_SIZE..);
    let mut head = BytesMut::from(&bytes[..HEADER_SIZE]);
    patch(&mut head, &header, fwd, records.len()).ok_or(RewriteError::TooShort { len })?;
    Ok(ForwardedBatch {
        pieces: [head.freeze(), records],
    })
}

/// Returns a copy of `batch` rewritten for forwarding under `fwd` (see the module docs).
///
/// Works from `batch.bytes` alone (`batch.header` is not trusted). It does not verify the
/// incoming CRC (scan with CRC verification on, the default, to find a corrupted batch before
/// the target does), but it cannot make a wrong CRC right either (see the module docs).
pub fn rewrite_for_forward(batch: &RawBatch, fwd: &ForwardHeader) -> Result<Bytes, RewriteError> {
    let mut out = BytesMut::from(batch.bytes.as_ref());
    rewrite_in_place(&mut out, fwd)?;
    Ok(out.freeze())
}

/// Rewrites one whole v2 batch in `batch` for forwarding under `fwd`, without copying.
///
/// Same checks and result as [`rewrite_for_forward`]; on error nothing has been written.
pub fn rewrite_in_place(batch: &mut [u8], fwd: &ForwardHeader) -> Result<(), RewriteError> {
    let len = batch.len();
    let header = BatchHeader::parse(batch).ok_or(RewriteError::TooShort { len })?;
    check(&header, len)?;
    // `check` made sure the header is there, so none of these writes can miss; the fallback
    // only keeps this function panic-free if that ever changed.
    let records_len = len.saturating_sub(HEADER_SIZE);
    let (head, _) = batch
        .split_at_mut_checked(HEADER_SIZE)
        .ok_or(RewriteError::TooShort { len })?;
    patch(head, &header, fwd, records_len).ok_or(RewriteError::TooShort { len })
}

/// Writes the forwarded header fields and the CRC that follows from them into `head` (the
/// first [`HEADER_SIZE`] bytes of a batch whose records are `records_len` bytes, parsed as
/// `header`); `None` if `head` is too short.
fn patch(
    head: &mut [u8],
    header: &BatchHeader,
    fwd: &ForwardHeader,
    records_len: usize,
) -> Option<()> {
    let before: [u8; HEADER_SIZE - ATTRIBUTES_AT] =
        head.get(ATTRIBUTES_AT..HEADER_SIZE)?.try_into().ok()?;
    patch_fields(head, header, fwd)?;
    let crc = crc_after_patch(
        header.crc,
        &before,
        head.get(ATTRIBUTES_AT..HEADER_SIZE)?,
        records_len,
    );
    write(head, CRC_AT, &crc.to_be_bytes())
}

/// The CRC-32C of a batch's `attributes`-to-end bytes after the header part of them changed from
/// `before` to `after` (equal lengths), given the CRC before (`crc`) and the length of the
/// unchanged records that follow.
///
/// CRC-32C is linear over GF(2): for messages of one length, `crc(x ^ y ^ z) = crc(x) ^ crc(y) ^
/// crc(z)`. With x the batch as it was, y its header part followed by zeros and z the new header
/// part followed by zeros, `x ^ y ^ z` is the new batch, and `crc(y) ^ crc(z)` is
/// `crc(before) ^ crc(after)` carried over `records_len` zero bytes, which
/// `crc::combine(_, 0, records_len)` computes in logarithmic time. The records are not read.
fn crc_after_patch(crc: u32, before: &[u8], after: &[u8], records_len: usize) -> u32 {
    let delta = crc32c::crc32c(before) ^ crc32c::crc32c(after);
    crc ^ crate::crc::combine(delta, 0, records_len)
}

/// Writes the forwarded header fields, all but the CRC, into `batch` (at least a header),
/// whose parsed header is `header`; `None` if the bytes are too short.
fn patch_fields(batch: &mut [u8], header: &BatchHeader, fwd: &ForwardHeader) -> Option<()> {
    let attributes = header.attributes.with_transactional(fwd.transactional);
    write(batch, BASE_OFFSET_AT, &0i64.to_be_bytes())?;
    write(batch, PARTITION_LEADER_EPOCH_AT, &(-1i32).to_be_bytes())?;
    write(batch, ATTRIBUTES_AT, &attributes.0.to_be_bytes())?;
    write(batch, PRODUCER_ID_AT, &fwd.producer_id.to_be_bytes())?;
    write(batch, PRODUCER_EPOCH_AT, &fwd.producer_epoch.to_be_bytes())?;
    write(batch, BASE_SEQUENCE_AT, &fwd.base_sequence.to_be_bytes())
}

/// Everything that must hold before a single byte is written.
fn check(header: &BatchHeader, len: usize) -> Result<(), RewriteError> {
    if header.magic != MAGIC_V2 {
        return Err(RewriteError::UnsupportedMagic {
            magic: header.magic,
        });
    }
    let declared = usize::try_from(header.batch_length)
        .ok()
        .and_then(|l| l.checked_add(LOG_OVERHEAD));
    if declared != Some(len) {
        return Err(RewriteError::LengthMismatch {
            batch_length: header.batch_length,
            len,
        });
    }
    if header.attributes.is_control() {
        return Err(RewriteError::ControlBatch {
            base_offset: header.base_offset,
        });
    }
    if !header.is_dense() {
        return Err(RewriteError::NotDense {
            base_offset: header.base_offset,
            record_count: header.record_count,
            last_offset_delta: header.last_offset_delta,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{batch_crc, MIN_BATCH_LENGTH};

    fn header_only_batch(attributes: i16, record_count: i32, last_offset_delta: i32) -> Vec<u8> {
        let mut b = vec![0u8; HEADER_SIZE];
        b[0..8].copy_from_slice(&42i64.to_be_bytes());
        b[8..12].copy_from_slice(&MIN_BATCH_LENGTH.to_be_bytes());
        b[12..16].copy_from_slice(&7i32.to_be_bytes());
        b[16] = 2;
        b[21..23].copy_from_slice(&attributes.to_be_bytes());
        b[23..27].copy_from_slice(&last_offset_delta.to_be_bytes());
        b[57..61].copy_from_slice(&record_count.to_be_bytes());
        let crc = batch_crc(&b).unwrap();
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    }

    const FWD: ForwardHeader = ForwardHeader {
        producer_id: 9,
        producer_epoch: 3,
        base_sequence: 100,
        transactional: true,
    };

    #[test]
    fn patches_header_and_crc() {
        let mut b = header_only_batch(0, 2, 1);
        rewrite_in_place(&mut b, &FWD).unwrap();
        let h = BatchHeader::parse(&b).unwrap();
        assert_eq!(h.base_offset, 0);
        assert_eq!(h.partition_leader_epoch, -1);
        assert_eq!(h.producer_id, 9);
        assert_eq!(h.producer_epoch, 3);
        assert_eq!(h.base_sequence, 100);
        assert!(h.attributes.is_transactional());
        assert_eq!(batch_crc(&b), Some(h.crc));
    }

    #[test]
    fn refusals_write_nothing() {
        let cases = [
            (header_only_batch(1 << 5, 1, 0), "control"),
            (header_only_batch(0, 1, 1), "not dense"),
        ];
        for (b, what) in cases {
            let mut copy = b.clone();
            assert!(rewrite_in_place(&mut copy, &FWD).is_err(), "{what}");
            assert_eq!(copy, b, "{what}");
        }
        // Sequences wrap from i32::MAX to 0 inside a batch, as Kafka's producer and broker
        // allow (`DefaultRecordBatch.incrementSequence`); the rewrite writes the base only.
        let mut b = header_only_batch(0, 2, 1);
        let fwd = ForwardHeader {
            base_sequence: i32::MAX,
            ..FWD
        };
        rewrite_in_place(&mut b, &fwd).expect("a wrapping batch is accepted");
    }

    #[test]
    fn malformed_input() {
        let mut short = vec![0u8; 60];
        assert_eq!(
            rewrite_in_place(&mut short, &FWD),
            Err(RewriteError::TooShort { len: 60 })
        );
        let mut long = header_only_batch(0, 1, 0);
        long.push(0);
        assert!(matches!(
            rewrite_in_place(&mut long, &FWD),
            Err(RewriteError::LengthMismatch { len: 62, .. })
        ));
        let mut v1 = header_only_batch(0, 1, 0);
        v1[16] = 1;
        assert_eq!(
            rewrite_in_place(&mut v1, &FWD),
            Err(RewriteError::UnsupportedMagic { magic: 1 })
        );
    }
}
