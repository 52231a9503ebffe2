//! Merging consecutive batches of one partition into one larger batch, for a target far away
//! (`docs/design.md` §3.2, "Merge").
//!
//! A Produce request carries one batch per partition and an idempotent producer keeps at most
//! five requests in flight per partition, so forwarding a source's small batches unopened moves
//! at most five of them per round trip to the target. Merging several into one lifts that bound.
//!
//! Only batches that could have been one batch at the source merge ([`may_follow`]): the same
//! codec, timestamp type and transactional bit, source offsets that follow each other without a
//! gap (so never across a transaction marker, a compacted hole or aborted data left out), and,
//! for transactional batches, the same producer id and epoch (one transaction). Batches with a
//! LogAppendTime or a delete horizon keep their own header timestamps and never merge.
//!
//! The merged batch keeps every record's key, value, headers (order, repeats and nulls) and
//! attributes byte for byte, and its absolute timestamp: timestamp deltas are taken from the
//! first batch's base timestamp, offset deltas are dense from 0, and only the framing of each
//! record (its length and the two deltas) is written anew. Compressed batches are decompressed
//! (under a [`DecompressLimit`]) and the merged records compressed again with the same codec at
//! its default level: a batch does not say what level it was compressed at.
use crate::batch::{BatchHeader, RawBatch, MAGIC_V2};
use crate::rebuild::{seal, RebuildError};
use crate::records::{decode_records, DecompressLimit, RecordsError};

/// Whether `next` may be merged after `previous` (see the module docs): both plain v2 data
/// batches with the same attributes, neither LogAppendTime nor with a delete horizon, both dense,
/// `next` starting at the offset after `previous`'s last, and one transaction if transactional.
pub fn may_follow(previous: &BatchHeader, next: &BatchHeader) -> bool {
    let a = previous.attributes;
    previous.magic == MAGIC_V2
        && next.magic == MAGIC_V2
        && a == next.attributes
        && !a.is_control()
        && !a.timestamp_type_log_append()
        && !a.has_delete_horizon()
        && previous.is_dense()
        && next.is_dense()
        && previous.next_offset() == next.base_offset
        && (!a.is_transactional()
            || (previous.producer_id == next.producer_id
                && previous.producer_epoch == next.producer_epoch))
}

/// Merges `batches` (at least one, each [`may_follow`] the one before) into one batch holding
/// all their records in order: base offset 0, offset deltas `0..n`, the first batch's base
/// timestamp and producer fields, the largest max timestamp, partition leader epoch -1, a fresh
/// CRC. The caller knows where each input's records are in it: input `i` starts after the
/// record counts of the inputs before it.
///
/// The inputs' CRCs are not checked again (the scanner that produced them did); their record
/// sections must hold exactly their record counts.
pub fn merge(batches: &[RawBatch], limit: &DecompressLimit) -> Result<RawBatch, RebuildError> {
    let Some(first) = batches.first() else {
        return Err(RebuildError::Internal {
            base_offset: -1,
            detail: "no batch to merge".into(),
        });
    };
    let template = first.header;
    let base_offset = template.base_offset;
    if let Some(pair) = batches
        .windows(2)
        .find(|w| !may_follow(&w[0].header, &w[1].header))
    {
        return Err(RebuildError::Internal {
            base_offset: pair[1].header.base_offset,
            detail: format!(
                "batch does not follow the one at base offset {} closely enough to merge",
                pair[0].header.base_offset
            ),
        });
    }
    let codec = template
        .attributes
        .compression()
        .ok_or(RebuildError::Records {
            base_offset,
            source: RecordsError::UnknownCodec {
                id: template.attributes.codec_id(),
            },
        })?;
    let count: usize = batches
        .iter()
        .map(|b| usize::try_from(b.header.record_count).unwrap_or(0))
        .sum();
    let mut records = Vec::with_capacity(count);
    let mut size_hint = 0usize;
    for batch in batches {
        let h = batch.header;
        let payload = batch.records_bytes();
        size_hint = size_hint.saturating_add(payload.len());
        let decoded =
            decode_records(h.attributes, &payload, h.record_count, limit).map_err(|source| {
                RebuildError::Records {
                    base_offset: h.base_offset,
                    source,
                }
            })?;
        for mut record in decoded {
            // Kafka computes a record's timestamp with wrapping long arithmetic; so do we.
            let timestamp = h.base_timestamp.wrapping_add(record.timestamp_delta);
            record.timestamp_delta = timestamp.wrapping_sub(template.base_timestamp);
            record.offset_delta =
                i32::try_from(records.len()).map_err(|_| RebuildError::TooLarge {
                    base_offset,
                    size: size_hint,
                })?;
            records.push(record);
        }
    }
    let max_timestamp = batches
        .iter()
        .map(|b| b.header.max_timestamp)
        .max()
        .unwrap_or(template.max_timestamp);
    seal(&template, &records, codec, max_timestamp, size_hint)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{batch_records, RawRecord};
    use bytes::Bytes;
    use proptest::prelude::*;

    /// A batch at `base_offset` with `n` records: keys, values (some null), repeated headers,
    /// timestamps that go back and forth, under `attributes`.
    fn batch(base_offset: i64, n: usize, attributes: i16, base_ts: i64, pid: i64) -> RawBatch {
        let records: Vec<RawRecord> = (0..n)
            .map(|i| RawRecord {
                offset_delta: i as i32,
                timestamp_delta: if i % 3 == 1 { -7 } else { i as i64 * 13 },
                attributes: 0,
                key: (i % 4 != 3).then(|| Bytes::from(format!("k{base_offset}-{i}"))),
                value: (i % 5 != 4).then(|| Bytes::from(vec![(base_offset + i as i64) as u8; i])),
                headers: vec![
                    (Bytes::from_static(b"h"), Some(Bytes::from(format!("{i}")))),
                    (Bytes::from_static(b"h"), None),
                ],
            })
            .collect();
        let header = BatchHeader {
            base_offset,
            batch_length: 0,
            partition_leader_epoch: 5,
            magic: 2,
            crc: 0,
            attributes: crate::Attributes(attributes),
            last_offset_delta: n as i32 - 1,
            base_timestamp: base_ts,
            max_timestamp: base_ts + n as i64 * 13,
            producer_id: pid,
            producer_epoch: 0,
            base_sequence: 0,
            record_count: n as i32,
        };
        crate::rebuild::batch_for_test(&header, &records)
    }

    /// Every record of `batches` as (absolute timestamp, key, value, headers, attributes).
    type Seen = (
        i64,
        Option<Bytes>,
        Option<Bytes>,
        Vec<(Bytes, Option<Bytes>)>,
        i8,
    );
    fn seen(batches: &[RawBatch]) -> Vec<Seen> {
        batches
            .iter()
            .flat_map(|b| {
                let base = b.header.base_timestamp;
                batch_records(b).unwrap().into_iter().map(move |r| {
                    (
                        base.wrapping_add(r.timestamp_delta),
                        r.key,
                        r.value,
                        r.headers,
                        r.attributes,
                    )
                })
            })
            .collect()
    }

    /// Consecutive batches: sizes `sizes`, from offset `start`.
    fn run_of(start: i64, sizes: &[usize], attributes: i16, pid: i64) -> Vec<RawBatch> {
        let mut offset = start;
        sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let b = batch(offset, n, attributes, 1_000 + i as i64 * 50, pid);
                offset += n as i64;
                b
            })
            .collect()
    }

    #[test]
    fn a_merge_keeps_every_record_in_every_codec() {
        for codec in 0..=4 {
            let inputs = run_of(40, &[3, 1, 7, 2], codec, -1);
            let merged = merge(&inputs, &DecompressLimit::default()).unwrap();
            let h = merged.header;
            assert_eq!(h.record_count, 13, "codec {codec}");
            assert_eq!(h.last_offset_delta, 12);
            assert_eq!(h.base_offset, 0);
            assert_eq!(h.partition_leader_epoch, -1);
            assert_eq!(h.attributes.0, codec);
            assert_eq!(h.base_timestamp, inputs[0].header.base_timestamp);
            assert_eq!(
                h.max_timestamp,
                inputs.iter().map(|b| b.header.max_timestamp).max().unwrap()
            );
            assert_eq!(
                seen(std::slice::from_ref(&merged)),
                seen(&inputs),
                "codec {codec}"
            );
            let deltas: Vec<i32> = batch_records(&merged)
                .unwrap()
                .iter()
                .map(|r| r.offset_delta)
                .collect();
            assert_eq!(deltas, (0..13).collect::<Vec<_>>());
        }
    }

    #[test]
    fn only_batches_that_follow_each_other_merge() {
        let inputs = run_of(0, &[2, 2], 0, -1);
        assert!(may_follow(&inputs[0].header, &inputs[1].header));
        // A gap (a marker, aborted data, a compacted hole between them).
        let gap = batch(3, 2, 0, 0, -1);
        assert!(!may_follow(&inputs[0].header, &gap.header));
        // Another codec, another timestamp type, a control batch, a delete horizon.
        for other in [1i16, 1 << 3, 1 << 5, 1 << 6] {
            let next = batch(2, 2, other, 0, -1);
            assert!(!may_follow(&inputs[0].header, &next.header), "{other}");
        }
        let log_append = run_of(0, &[2, 2], 1 << 3, -1);
        assert!(!may_follow(&log_append[0].header, &log_append[1].header));
        // Transactional: one producer (one transaction) only.
        let txn = run_of(0, &[2, 2], 1 << 4, 7);
        assert!(may_follow(&txn[0].header, &txn[1].header));
        let other_producer = batch(2, 2, 1 << 4, 0, 8);
        assert!(!may_follow(&txn[0].header, &other_producer.header));
        // A batch with a hole in its offsets (compacted) does not merge as it is.
        let mut holey = inputs[1].clone();
        holey.header.last_offset_delta = 2;
        assert!(!may_follow(&inputs[0].header, &holey.header));
        assert!(merge(&[inputs[0].clone(), gap], &DecompressLimit::default()).is_err());
        assert!(merge(&[], &DecompressLimit::default()).is_err());
    }

    #[test]
    fn a_damaged_record_section_is_an_error_not_a_panic() {
        let mut inputs = run_of(0, &[3, 3], 0, -1);
        let mut bytes = inputs[1].bytes.to_vec();
        bytes.truncate(bytes.len() - 4);
        inputs[1].bytes = Bytes::from(bytes);
        assert!(matches!(
            merge(&inputs, &DecompressLimit::default()),
            Err(RebuildError::Records { base_offset: 3, .. })
        ));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Any run of batches merges into one that holds the same records, in order, with the
        /// same absolute timestamps, and whose split by input record counts gives back each
        /// input's records.
        #[test]
        fn merged_records_are_the_inputs_records(
            sizes in proptest::collection::vec(1usize..20, 1..12),
            codec in 0i16..=4,
            start in 0i64..1_000_000,
        ) {
            let inputs = run_of(start, &sizes, codec, -1);
            let merged = merge(&inputs, &DecompressLimit::default()).unwrap();
            let all = seen(&[merged]);
            prop_assert_eq!(all.len(), sizes.iter().sum::<usize>());
            let mut at = 0;
            for input in &inputs {
                let n = input.header.record_count as usize;
                prop_assert_eq!(&all[at..at + n], &seen(std::slice::from_ref(input))[..]);
                at += n;
            }
        }
    }
}
