//! The slow path of `docs/design.md` §3.2: open a batch that cannot be forwarded as it is, and
//! re-encode the records to keep as one new dense batch.
//!
//! Two cases need it:
//!
//! - A compacted batch whose offsets have holes (`lastOffsetDelta + 1 != recordCount`): a broker
//!   refuses it from a producer (`docs/mm2-behaviour.md` §3, `LogValidator`).
//! - A batch that straddles a position: only the records at or after a source offset are wanted,
//!   e.g. after the source's log start moved into the middle of the batch.
//!
//! The new batch keeps every record's bytes (key, value, headers with their order, repeats and
//! nulls, record attributes) and absolute timestamp, the codec, the batch attributes and the
//! producer fields; its offsets are dense from 0, and it is ready for
//! [`rewrite_for_forward`](crate::rewrite_for_forward), which sets our producer fields. The
//! caller maps the source offsets it kept, [`Rebuilt::runs`], to the target offsets the batch
//! lands at.
use bytes::Bytes;
use kafka_protocol::records::Compression;

use crate::batch::{
    batch_crc, write, BatchHeader, RawBatch, BATCH_LENGTH_AT, CRC_AT, HEADER_SIZE, LOG_OVERHEAD,
    MAGIC_V2,
};
use crate::records::{
    compress, decode_records, encode_records, DecompressLimit, RawRecord, RecordsError,
};
use crate::BatchScanner;

/// A stretch of consecutive source offsets kept in a rebuilt batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// First source offset of the stretch.
    pub src_offset: i64,
    /// Number of records in it (at least 1).
    pub len: i64,
}

/// A batch rebuilt from the records kept out of a source batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rebuilt {
    /// The new batch: base offset 0, dense offsets, partition leader epoch -1, valid CRC.
    pub batch: RawBatch,
    /// The source offsets kept, as runs of consecutive offsets in order. The new batch holds
    /// run 0's records first, then run 1's, and so on: if the batch is appended at target offset
    /// `d`, run `i` starts at `d` plus the lengths of the runs before it.
    pub runs: Vec<Run>,
}

/// Why a batch could not be rebuilt.
///
/// `base_offset` is the source batch's, as read from its bytes. Only a CRC mismatch may be worth
/// a retry (after fetching again); everything else repeats on the same bytes.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RebuildError {
    /// The bytes are shorter than a v2 batch header.
    #[error("batch of {len} bytes is shorter than a v2 header")]
    TooShort {
        /// Bytes given.
        len: usize,
    },
    /// The `batchLength` field does not match the bytes given (`batchLength + 12 != len`).
    #[error("batch at base offset {base_offset} declares length {batch_length} but {len} bytes were given")]
    LengthMismatch {
        /// Kafka offset of the batch in the source partition.
        base_offset: i64,
        /// The `batchLength` field.
        batch_length: i32,
        /// Bytes given.
        len: usize,
    },
    /// The magic byte is not 2.
    #[error(
        "batch at base offset {base_offset} has magic {magic}, only v2 batches can be rebuilt"
    )]
    UnsupportedMagic {
        /// Kafka offset of the batch in the source partition.
        base_offset: i64,
        /// The magic byte found.
        magic: i8,
    },
    /// The stored CRC does not match the bytes: the batch was damaged. Rebuilding would give
    /// damaged records a valid CRC, so it is refused.
    #[error(
        "batch at base offset {base_offset} is corrupt: stored CRC {expected:#010x}, computed \
         {actual:#010x}"
    )]
    CrcMismatch {
        /// Kafka offset of the batch in the source partition.
        base_offset: i64,
        /// The CRC stored in the header.
        expected: u32,
        /// The CRC computed over the bytes.
        actual: u32,
    },
    /// A control batch (transaction marker): clients may not produce these; the mirror drops
    /// them instead.
    #[error("batch at base offset {base_offset} is a control batch, which cannot be produced")]
    ControlBatch {
        /// Kafka offset of the batch in the source partition.
        base_offset: i64,
    },
    /// The records could not be decompressed or parsed.
    #[error("batch at base offset {base_offset}: {source}")]
    Records {
        /// Kafka offset of the batch in the source partition.
        base_offset: i64,
        /// What was wrong with them.
        #[source]
        source: RecordsError,
    },
    /// A record's offset delta is negative, not above the previous record's, or past the
    /// batch's `lastOffsetDelta`: the batch contradicts itself.
    #[error(
        "batch at base offset {base_offset}: record {record} has offset delta {offset_delta}, \
         out of order or past the last offset delta {last_offset_delta}"
    )]
    InvalidOffsetDelta {
        /// Kafka offset of the batch in the source partition.
        base_offset: i64,
        /// Index of the record in the batch.
        record: usize,
        /// Its offset delta.
        offset_delta: i32,
        /// The batch's `lastOffsetDelta`.
        last_offset_delta: i32,
    },
    /// The rebuilt batch would not fit a v2 batch's i32 length (its codec compressed worse than
    /// the source's by more than 2 GiB).
    #[error("batch at base offset {base_offset} would rebuild to {size} bytes, over the v2 limit")]
    TooLarge {
        /// Kafka offset of the batch in the source partition.
        base_offset: i64,
        /// Size the rebuilt batch would have.
        size: usize,
    },
    /// The rebuilt batch did not scan back: a bug in this module, reported rather than panicked.
    #[error("batch at base offset {base_offset} rebuilt into bytes that do not scan: {detail}")]
    Internal {
        /// Kafka offset of the batch in the source partition.
        base_offset: i64,
        /// What the scanner said.
        detail: String,
    },
}

impl RebuildError {
    /// Whether rebuilding the same batch after fetching it again may succeed: only for a CRC
    /// mismatch, which may come from damage on the way (a caller should still bound retries).
    pub fn is_retriable(&self) -> bool {
        matches!(self, Self::CrcMismatch { .. })
    }
}

/// Rebuilds `batch` keeping the records at source offset `keep_from` or later, under the default
/// [`DecompressLimit`]. See [`rebuild_with_limit`].
pub fn rebuild(batch: &RawBatch, keep_from: i64) -> Result<Option<Rebuilt>, RebuildError> {
    rebuild_with_limit(batch, keep_from, &DecompressLimit::default())
}

/// Rebuilds `batch` keeping the records whose source offset (`baseOffset + offsetDelta`) is
/// `keep_from` or later, as one new dense batch; `Ok(None)` when no record is kept (an empty
/// batch, or all before `keep_from`). Pass `i64::MIN` to keep everything.
///
/// Works from `batch.bytes` alone (`batch.header` is not trusted) and verifies the CRC first.
/// The new batch has:
///
/// - base offset 0, offset deltas `0..n`, `lastOffsetDelta` `n - 1`, `recordCount` `n`;
/// - the same `baseTimestamp` and each record's timestamp delta unchanged, so every record's
///   absolute timestamp is kept; `maxTimestamp` kept when every record is, else the largest
///   kept timestamp; in a LogAppendTime batch (attributes bit 3), where record timestamps mean
///   nothing and `maxTimestamp` is the append time, `maxTimestamp` is kept as is;
/// - the same attributes (codec, timestamp type, transactional, delete horizon), the records
///   compressed again with the same codec;
/// - the same producer id, epoch and base sequence (the forwarding rewrite replaces them);
/// - partition leader epoch -1 and a CRC-32C over the new bytes.
///
/// Control batches are refused: they are dropped, never produced.
pub fn rebuild_with_limit(
    batch: &RawBatch,
    keep_from: i64,
    limit: &DecompressLimit,
) -> Result<Option<Rebuilt>, RebuildError> {
    let bytes = &batch.bytes;
    let header = check(bytes)?;
    let base_offset = header.base_offset;
    let records_error = |source| RebuildError::Records {
        base_offset,
        source,
    };
    let codec = header
        .attributes
        .compression()
        .ok_or(RecordsError::UnknownCodec {
            id: header.attributes.codec_id(),
        })
        .map_err(records_error)?;
    if header.record_count == 0 {
        // Compaction leaves empty batches behind (kept for producer state): nothing to keep,
        // whatever their records section holds.
        return Ok(None);
    }
    let payload = bytes.slice(HEADER_SIZE..);
    let records = decode_records(header.attributes, &payload, header.record_count, limit)
        .map_err(records_error)?;

    // Source offsets, checked to increase within the batch's declared range.
    let mut offsets = Vec::with_capacity(records.len());
    let mut previous: Option<i32> = None;
    for (i, record) in records.iter().enumerate() {
        let delta = record.offset_delta;
        let offset = base_offset.checked_add(i64::from(delta));
        match offset {
            Some(offset)
                if delta >= 0
                    && delta <= header.last_offset_delta
                    && previous.is_none_or(|p| p < delta) =>
            {
                offsets.push(offset);
            }
            _ => {
                return Err(RebuildError::InvalidOffsetDelta {
                    base_offset,
                    record: i,
                    offset_delta: delta,
                    last_offset_delta: header.last_offset_delta,
                })
            }
        }
        previous = Some(delta);
    }

    let first_kept = offsets.partition_point(|&o| o < keep_from);
    let kept = records.get(first_kept..).unwrap_or_default();
    let kept_offsets = offsets.get(first_kept..).unwrap_or_default();
    if kept.is_empty() {
        return Ok(None);
    }

    let mut runs: Vec<Run> = Vec::new();
    for &offset in kept_offsets {
        match runs.last_mut() {
            Some(run) if run.src_offset.checked_add(run.len) == Some(offset) => run.len += 1,
            _ => runs.push(Run {
                src_offset: offset,
                len: 1,
            }),
        }
    }

    let max_timestamp = if first_kept == 0 || header.attributes.timestamp_type_log_append() {
        header.max_timestamp
    } else {
        // Kafka computes a record's timestamp with wrapping long arithmetic; so do we.
        kept.iter()
            .map(|r| header.base_timestamp.wrapping_add(r.timestamp_delta))
            .max()
            .unwrap_or(header.max_timestamp)
    };

    let mut dense = kept.to_vec();
    for (delta, record) in (0i32..).zip(dense.iter_mut()) {
        record.offset_delta = delta;
    }
    let batch = seal(&header, &dense, codec, max_timestamp, payload.len())?;
    Ok(Some(Rebuilt { batch, runs }))
}

/// One new batch of `records` (offset deltas already dense from 0, timestamp deltas relative to
/// `template.base_timestamp`), compressed with `codec`, under `template`'s attributes, base
/// timestamp and producer fields, with `max_timestamp`; base offset 0, partition leader epoch
/// -1, a fresh CRC. `size_hint` is the expected size of the records section. Errors name
/// `template.base_offset`.
pub(crate) fn seal(
    template: &BatchHeader,
    records: &[RawRecord],
    codec: Compression,
    max_timestamp: i64,
    size_hint: usize,
) -> Result<RawBatch, RebuildError> {
    let base_offset = template.base_offset;
    let records_error = |source| RebuildError::Records {
        base_offset,
        source,
    };
    let count = i32::try_from(records.len()).map_err(|_| RebuildError::TooLarge {
        base_offset,
        size: records.len(),
    })?;
    let mut out = Vec::with_capacity(HEADER_SIZE.saturating_add(size_hint));
    out.extend_from_slice(&new_header(template, count, max_timestamp));
    if codec == Compression::None {
        encode_records(records, &mut out).map_err(records_error)?;
    } else {
        let mut plain = Vec::with_capacity(size_hint);
        encode_records(records, &mut plain).map_err(records_error)?;
        compress(codec, &plain, &mut out).map_err(records_error)?;
    }
    let batch_length = out
        .len()
        .checked_sub(LOG_OVERHEAD)
        .and_then(|l| i32::try_from(l).ok())
        .ok_or(RebuildError::TooLarge {
            base_offset,
            size: out.len(),
        })?;
    let internal = |detail: String| RebuildError::Internal {
        base_offset,
        detail,
    };
    write(&mut out, BATCH_LENGTH_AT, &batch_length.to_be_bytes())
        .and_then(|()| batch_crc(&out))
        .and_then(|crc| write(&mut out, CRC_AT, &crc.to_be_bytes()))
        .ok_or_else(|| internal("header shorter than expected".into()))?;

    let mut scanner = BatchScanner::new(Bytes::from(out));
    match scanner.next() {
        Some(Ok(batch)) => Ok(batch),
        Some(Err(e)) => Err(internal(e.to_string())),
        None => Err(internal("no complete batch".into())),
    }
}

/// Everything about the source batch's framing that must hold before its records are opened.
fn check(bytes: &[u8]) -> Result<BatchHeader, RebuildError> {
    let len = bytes.len();
    let header = BatchHeader::parse(bytes).ok_or(RebuildError::TooShort { len })?;
    let base_offset = header.base_offset;
    if header.magic != MAGIC_V2 {
        return Err(RebuildError::UnsupportedMagic {
            base_offset,
            magic: header.magic,
        });
    }
    if header.total_size() != len {
        return Err(RebuildError::LengthMismatch {
            base_offset,
            batch_length: header.batch_length,
            len,
        });
    }
    let actual = batch_crc(bytes).ok_or(RebuildError::TooShort { len })?;
    if actual != header.crc {
        return Err(RebuildError::CrcMismatch {
            base_offset,
            expected: header.crc,
            actual,
        });
    }
    if header.attributes.is_control() {
        return Err(RebuildError::ControlBatch { base_offset });
    }
    Ok(header)
}

/// The new batch's header, with `batchLength` and the CRC left 0 to be patched in.
fn new_header(source: &BatchHeader, count: i32, max_timestamp: i64) -> Vec<u8> {
    let mut h = Vec::with_capacity(HEADER_SIZE);
    h.extend_from_slice(&0i64.to_be_bytes()); // baseOffset
    h.extend_from_slice(&0i32.to_be_bytes()); // batchLength, patched
    h.extend_from_slice(&(-1i32).to_be_bytes()); // partitionLeaderEpoch, as producers send
    h.extend_from_slice(&MAGIC_V2.to_be_bytes());
    h.extend_from_slice(&0u32.to_be_bytes()); // crc, patched
    h.extend_from_slice(&source.attributes.0.to_be_bytes());
    h.extend_from_slice(&(count - 1).to_be_bytes()); // lastOffsetDelta
    h.extend_from_slice(&source.base_timestamp.to_be_bytes());
    h.extend_from_slice(&max_timestamp.to_be_bytes());
    h.extend_from_slice(&source.producer_id.to_be_bytes());
    h.extend_from_slice(&source.producer_epoch.to_be_bytes());
    h.extend_from_slice(&source.base_sequence.to_be_bytes());
    h.extend_from_slice(&count.to_be_bytes());
    h
}

/// A batch with `header`'s fields as given (base offset, leader epoch, last offset delta and
/// all) around `records`, compressed with its codec, its length and CRC computed: for tests
/// that need batches no producer writes.
#[cfg(test)]
pub(crate) fn batch_for_test(header: &BatchHeader, records: &[RawRecord]) -> RawBatch {
    let mut out = new_header(header, header.record_count, header.max_timestamp);
    out[0..8].copy_from_slice(&header.base_offset.to_be_bytes());
    out[12..16].copy_from_slice(&header.partition_leader_epoch.to_be_bytes());
    out[23..27].copy_from_slice(&header.last_offset_delta.to_be_bytes());
    let mut plain = Vec::new();
    encode_records(records, &mut plain).unwrap();
    compress(header.attributes.compression().unwrap(), &plain, &mut out).unwrap();
    let len = (out.len() - LOG_OVERHEAD) as i32;
    out[8..12].copy_from_slice(&len.to_be_bytes());
    let crc = batch_crc(&out).unwrap();
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    BatchScanner::new(Bytes::from(out)).next().unwrap().unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{batch_records, RawRecord};

    /// A batch written by hand: our encoder for the records, so headers may repeat.
    fn hand_batch(
        base_offset: i64,
        attributes: i16,
        deltas: &[i32],
        last_offset_delta: i32,
    ) -> RawBatch {
        let records: Vec<RawRecord> = deltas
            .iter()
            .map(|&d| RawRecord {
                offset_delta: d,
                timestamp_delta: i64::from(d) * 10,
                attributes: 0,
                key: Some(Bytes::from(format!("k{d}"))),
                value: (d % 2 == 0).then(|| Bytes::from(vec![d as u8; 5])),
                headers: vec![
                    (Bytes::from_static(b"dup"), Some(Bytes::from_static(b"a"))),
                    (Bytes::from_static(b"dup"), None),
                    (Bytes::from_static(b"dup"), Some(Bytes::from_static(b"b"))),
                ],
            })
            .collect();
        let source = BatchHeader {
            base_offset,
            batch_length: 0,
            partition_leader_epoch: 3,
            magic: 2,
            crc: 0,
            attributes: crate::Attributes(attributes),
            last_offset_delta,
            base_timestamp: 1000,
            max_timestamp: 1000 + 10 * i64::from(last_offset_delta),
            producer_id: 77,
            producer_epoch: 1,
            base_sequence: 5,
            record_count: deltas.len() as i32,
        };
        batch_for_test(&source, &records)
    }

    #[test]
    fn keeps_tail_of_holey_batch_with_duplicate_headers() {
        for codec in 0..=4 {
            let source = hand_batch(100, codec, &[0, 1, 4, 5, 9], 9);
            let all = batch_records(&source).unwrap();
            let rebuilt = rebuild(&source, 101).unwrap().unwrap();
            assert_eq!(
                rebuilt.runs,
                vec![
                    Run {
                        src_offset: 101,
                        len: 1
                    },
                    Run {
                        src_offset: 104,
                        len: 2
                    },
                    Run {
                        src_offset: 109,
                        len: 1
                    },
                ]
            );
            let h = rebuilt.batch.header;
            assert!(h.is_dense());
            assert_eq!(h.record_count, 4);
            assert_eq!(h.base_offset, 0);
            assert_eq!(h.partition_leader_epoch, -1);
            assert_eq!(h.attributes.codec_id(), codec as u8);
            assert_eq!(
                (h.producer_id, h.producer_epoch, h.base_sequence),
                (77, 1, 5)
            );
            assert_eq!(h.base_timestamp, 1000);
            assert_eq!(h.max_timestamp, 1090);
            let kept = batch_records(&rebuilt.batch).unwrap();
            for (i, (new, old)) in kept.iter().zip(&all[1..]).enumerate() {
                assert_eq!(new.offset_delta, i as i32);
                assert_eq!(
                    RawRecord {
                        offset_delta: old.offset_delta,
                        ..new.clone()
                    },
                    *old
                );
            }
        }
    }

    #[test]
    fn max_timestamp_rules() {
        // All kept: the source's maxTimestamp, even where the records disagree with it.
        let mut source = hand_batch(0, 0, &[0, 2, 3], 3);
        let mut bytes = source.bytes.to_vec();
        bytes[35..43].copy_from_slice(&5000i64.to_be_bytes());
        let crc = batch_crc(&bytes).unwrap();
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
        source = BatchScanner::new(Bytes::from(bytes.clone()))
            .next()
            .unwrap()
            .unwrap();
        let all = rebuild(&source, 0).unwrap().unwrap();
        assert_eq!(all.batch.header.max_timestamp, 5000);
        let some = rebuild(&source, 1).unwrap().unwrap();
        assert_eq!(some.batch.header.max_timestamp, 1030);
        // LogAppendTime: kept as is, and the bit too.
        bytes[22] |= 1 << 3;
        let crc = batch_crc(&bytes).unwrap();
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
        source = BatchScanner::new(Bytes::from(bytes))
            .next()
            .unwrap()
            .unwrap();
        let some = rebuild(&source, 1).unwrap().unwrap();
        assert_eq!(some.batch.header.max_timestamp, 5000);
        assert!(some.batch.header.attributes.timestamp_type_log_append());
    }

    #[test]
    fn nothing_kept_and_refusals() {
        let source = hand_batch(10, 0, &[0, 3], 3);
        assert_eq!(rebuild(&source, 14), Ok(None));
        for codec in 0..=4 {
            let empty = hand_batch(10, codec, &[], 3);
            assert_eq!(rebuild(&empty, 0), Ok(None), "codec {codec}");
        }
        assert!(rebuild(&source, i64::MIN).unwrap().is_some());

        let control = hand_batch(10, 1 << 5, &[0], 0);
        assert_eq!(
            rebuild(&control, 0),
            Err(RebuildError::ControlBatch { base_offset: 10 })
        );

        let mut damaged = source.clone();
        let mut bytes = damaged.bytes.to_vec();
        *bytes.last_mut().unwrap() ^= 1;
        damaged.bytes = Bytes::from(bytes);
        let err = rebuild(&damaged, 0).unwrap_err();
        assert!(matches!(
            err,
            RebuildError::CrcMismatch {
                base_offset: 10,
                ..
            }
        ));
        assert!(err.is_retriable());

        // Offsets out of order, or past lastOffsetDelta.
        for (deltas, last) in [(&[2, 1][..], 2), (&[0, 0][..], 0), (&[0, 5][..], 4)] {
            let bad = hand_batch(10, 0, deltas, last);
            assert!(
                matches!(
                    rebuild(&bad, 0),
                    Err(RebuildError::InvalidOffsetDelta { record: 1, .. })
                ),
                "{deltas:?}"
            );
        }
    }

    #[test]
    fn unknown_codec_is_refused() {
        let source = hand_batch(0, 0, &[0], 0);
        let mut bytes = source.bytes.to_vec();
        bytes[22] |= 6;
        let crc = batch_crc(&bytes).unwrap();
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
        let source = RawBatch {
            bytes: Bytes::from(bytes),
            ..source
        };
        assert!(matches!(
            rebuild(&source, 0),
            Err(RebuildError::Records {
                source: RecordsError::UnknownCodec { id: 6 },
                ..
            })
        ));
    }
}
