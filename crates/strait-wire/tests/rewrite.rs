//! The forwarding rewrite against batches encoded by `kafka-protocol`: the rewritten batch scans,
//! decodes to the same records under our producer fields, and keeps its payload byte for byte.
mod common;

use bytes::Bytes;
use common::{batch_spec, fix_crc, simple_batch, BatchSpec};
use kafka_protocol::records::{RecordBatchDecoder, TimestampType};
use proptest::prelude::*;
use strait_wire::batch::{batch_crc, HEADER_SIZE};
use strait_wire::rewrite::rewrite_in_place;
use strait_wire::{
    forward, rewrite_for_forward, BatchScanner, ForwardHeader, ForwardedBatch, RawBatch,
    RewriteError,
};

/// Header byte ranges the rewrite may change: baseOffset, partitionLeaderEpoch, crc,
/// attributes, producerId/producerEpoch/baseSequence.
const PATCHED: [std::ops::Range<usize>; 5] = [0..8, 12..16, 17..21, 21..23, 43..57];

fn scan_one(buf: Bytes) -> RawBatch {
    let mut scanner = BatchScanner::new(buf);
    let batch = scanner.next().expect("a batch").expect("scans");
    assert!(scanner.next().is_none(), "exactly one batch");
    assert_eq!(scanner.trailing_partial_bytes(), 0);
    batch
}

fn forward_header() -> impl Strategy<Value = ForwardHeader> {
    prop_oneof![
        // Not idempotent.
        Just(ForwardHeader {
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            transactional: false,
        }),
        // Idempotent, maybe transactional; the sequence leaves room for 50 records.
        (
            0i64..=i64::MAX,
            0i16..=i16::MAX,
            0i32..=i32::MAX - 49,
            any::<bool>()
        )
            .prop_map(
                |(producer_id, producer_epoch, base_sequence, transactional)| ForwardHeader {
                    producer_id,
                    producer_epoch,
                    base_sequence,
                    transactional,
                }
            ),
    ]
}

/// A real batch, with the LogAppendTime bit set by hand when `log_append` (kafka-protocol's
/// encoder never sets it), so that the test sees the rewrite leave it alone.
fn source_batch(spec: &BatchSpec, log_append: bool) -> RawBatch {
    let mut bytes = spec.encode().to_vec();
    if log_append {
        bytes[22] |= 1 << 3;
        fix_crc(&mut bytes);
    }
    scan_one(Bytes::from(bytes))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Property 2: the rewritten bytes scan to one batch with our producer fields, base offset
    /// 0 and a valid CRC; every byte the rewrite has no business with is unchanged.
    #[test]
    fn rewrite_then_scan_round_trips(
        spec in batch_spec(false),
        log_append in any::<bool>(),
        fwd in forward_header(),
    ) {
        let source = source_batch(&spec, log_append);
        let out = rewrite_for_forward(&source, &fwd).expect("rewrites");
        let got = scan_one(out.clone());
        let (before, after) = (source.header, got.header);

        prop_assert_eq!(after.base_offset, 0);
        prop_assert_eq!(after.partition_leader_epoch, -1);
        prop_assert_eq!(after.producer_id, fwd.producer_id);
        prop_assert_eq!(after.producer_epoch, fwd.producer_epoch);
        prop_assert_eq!(after.base_sequence, fwd.base_sequence);
        prop_assert_eq!(after.attributes.is_transactional(), fwd.transactional);
        prop_assert_eq!(after.attributes, before.attributes.with_transactional(fwd.transactional));
        prop_assert_eq!(after.attributes.timestamp_type_log_append(), log_append);
        prop_assert_eq!(Some(after.crc), batch_crc(&out));
        prop_assert_eq!(after.batch_length, before.batch_length);
        prop_assert_eq!(after.magic, before.magic);
        prop_assert_eq!(after.last_offset_delta, before.last_offset_delta);
        prop_assert_eq!(after.record_count, before.record_count);
        prop_assert_eq!(after.base_timestamp, before.base_timestamp);
        prop_assert_eq!(after.max_timestamp, before.max_timestamp);

        // The payload is untouched, and so is every header byte outside the patched fields.
        prop_assert_eq!(&out[HEADER_SIZE..], &source.bytes[HEADER_SIZE..]);
        for (i, (a, b)) in out.iter().zip(source.bytes.iter()).enumerate() {
            if !PATCHED.iter().any(|r| r.contains(&i)) {
                prop_assert_eq!(a, b, "byte {} changed", i);
            }
        }

        // In place gives the same bytes, and so does the rewrite in pieces, whose records are
        // the source's buffer itself; rewriting again changes nothing.
        let mut in_place = source.bytes.to_vec();
        rewrite_in_place(&mut in_place, &fwd).expect("rewrites in place");
        prop_assert_eq!(&in_place[..], &out[..]);
        let pieces = forward(&source, &fwd).expect("rewrites in pieces");
        prop_assert_eq!(pieces.len(), out.len());
        prop_assert_eq!(pieces.to_bytes(), out.clone());
        prop_assert_eq!(pieces.pieces()[1].as_ptr(), source.bytes[HEADER_SIZE..].as_ptr());
        let again = rewrite_for_forward(&got, &fwd).expect("rewrites again");
        prop_assert_eq!(again, out);
    }

    /// A batch corrupted before the rewrite (one byte of its records changed, its CRC not)
    /// leaves with a CRC that does not match either, by exactly the same corruption: putting the
    /// byte back makes the rewritten batch's CRC right. The rewrite never seals a corruption.
    #[test]
    fn a_corrupted_batch_leaves_corrupted(
        spec in batch_spec(false),
        fwd in forward_header(),
        at in any::<prop::sample::Index>(),
        flip in 1u8..=255,
    ) {
        let source = source_batch(&spec, false);
        prop_assume!(source.bytes.len() > HEADER_SIZE);
        let i = HEADER_SIZE + at.index(source.bytes.len() - HEADER_SIZE);
        let mut corrupted = source.bytes.to_vec();
        corrupted[i] ^= flip;
        let raw = RawBatch { header: source.header, bytes: Bytes::from(corrupted) };
        let mut out = forward(&raw, &fwd).expect("rewrites").to_bytes().to_vec();
        let declared = u32::from_be_bytes(out[17..21].try_into().unwrap());
        prop_assert_ne!(batch_crc(&out), Some(declared));
        out[i] ^= flip;
        prop_assert_eq!(batch_crc(&out), Some(declared));
    }

    /// Property 3: kafka-protocol's decoder reads the rewritten batch as the same records, now
    /// under our producer id, epoch and sequences.
    #[test]
    fn rewritten_batch_decodes_to_the_same_records(
        spec in batch_spec(false),
        log_append in any::<bool>(),
        fwd in forward_header(),
    ) {
        let source = source_batch(&spec, log_append);
        let out = rewrite_for_forward(&source, &fwd).expect("rewrites");
        let set = RecordBatchDecoder::decode(&mut out.clone()).expect("decodes");
        prop_assert_eq!(set.version, 2);
        prop_assert_eq!(set.compression, spec.compression);
        let expected = spec.kafka_records();
        prop_assert_eq!(set.records.len(), expected.len());
        let timestamp_type = if log_append {
            TimestampType::LogAppend
        } else {
            TimestampType::Creation
        };
        for ((got, want), i) in set.records.iter().zip(&expected).zip(0i32..) {
            prop_assert_eq!(&got.key, &want.key);
            prop_assert_eq!(&got.value, &want.value);
            prop_assert_eq!(&got.headers, &want.headers);
            prop_assert_eq!(got.timestamp, want.timestamp);
            prop_assert_eq!(got.timestamp_type, timestamp_type);
            prop_assert_eq!(got.offset, i64::from(i)); // relative offsets, from base offset 0
            prop_assert_eq!(got.sequence, fwd.base_sequence.wrapping_add(i));
            prop_assert_eq!(got.producer_id, fwd.producer_id);
            prop_assert_eq!(got.producer_epoch, fwd.producer_epoch);
            prop_assert_eq!(got.transactional, fwd.transactional);
            prop_assert_eq!(got.partition_leader_epoch, -1);
            prop_assert!(!got.control);
        }
    }

    /// Property 4, rewrite side: whatever bytes a `RawBatch` holds (its header is not trusted),
    /// the rewrite returns an error or a batch of the same size; it never panics.
    #[test]
    fn rewrite_of_arbitrary_bytes_never_panics(
        mut bytes in prop::collection::vec(any::<u8>(), 0..200),
        magic_2 in any::<bool>(),
        fwd in forward_header(),
    ) {
        if magic_2 && bytes.len() > 16 {
            bytes[16] = 2;
            let len = i32::try_from(bytes.len() - 12).unwrap_or(i32::MAX);
            bytes[8..12].copy_from_slice(&len.to_be_bytes());
        }
        let header = simple_batch(0, false);
        let raw = RawBatch {
            header: scan_one(header.encode()).header,
            bytes: Bytes::from(bytes.clone()),
        };
        let pieces = forward(&raw, &fwd);
        prop_assert_eq!(pieces.as_ref().ok().map(ForwardedBatch::to_bytes), rewrite_for_forward(&raw, &fwd).ok());
        if let Ok(out) = rewrite_for_forward(&raw, &fwd) {
            prop_assert_eq!(out.len(), bytes.len());
            prop_assert_eq!(scan_one(out).header.record_count, raw_record_count(&bytes));
        }
    }
}

fn raw_record_count(bytes: &[u8]) -> i32 {
    i32::from_be_bytes(bytes[57..61].try_into().unwrap())
}

const FWD: ForwardHeader = ForwardHeader {
    producer_id: 77,
    producer_epoch: 1,
    base_sequence: 500,
    transactional: false,
};

// ---- Edge cases (5) ----

#[test]
fn control_batch_is_refused() {
    let batch = scan_one(simple_batch(40, true).encode());
    assert!(batch.header.attributes.is_control());
    assert_eq!(
        rewrite_for_forward(&batch, &FWD),
        Err(RewriteError::ControlBatch { base_offset: 40 })
    );
}

#[test]
fn non_dense_batch_is_refused() {
    // Three records whose last offset delta says 4, as compaction leaves them.
    let mut bytes = simple_batch(100, false).encode().to_vec();
    bytes[23..27].copy_from_slice(&4i32.to_be_bytes());
    fix_crc(&mut bytes);
    let batch = scan_one(Bytes::from(bytes));
    assert!(!batch.header.is_dense());
    assert_eq!(batch.header.next_offset(), 105);
    assert_eq!(
        rewrite_for_forward(&batch, &FWD),
        Err(RewriteError::NotDense {
            base_offset: 100,
            record_count: 3,
            last_offset_delta: 4
        })
    );
}

#[test]
fn sequences_may_wrap_inside_the_batch() {
    // Kafka sequences wrap from i32::MAX to 0, and a batch may straddle the wrap: the broker
    // checks `lastSequence` with the same wrapping arithmetic. Only the base is written.
    let batch = scan_one(simple_batch(0, false).encode()); // last offset delta 2
    let at = |base_sequence| ForwardHeader {
        base_sequence,
        ..FWD
    };
    for base in [i32::MAX - 2, i32::MAX - 1, i32::MAX] {
        let out = rewrite_for_forward(&batch, &at(base)).expect("wrapping is allowed");
        assert_eq!(scan_one(out).header.base_sequence, base);
    }
}

#[test]
fn transactional_bit_is_set_and_cleared() {
    let spec = simple_batch(0, false);
    let txn_spec = BatchSpec {
        producer: spec.producer.map(|p| common::ProducerSpec {
            transactional: true,
            ..p
        }),
        ..spec.clone()
    };
    for source in [spec, txn_spec] {
        let batch = scan_one(source.encode());
        for transactional in [false, true] {
            let fwd = ForwardHeader {
                transactional,
                ..FWD
            };
            let out = scan_one(rewrite_for_forward(&batch, &fwd).unwrap());
            assert_eq!(out.header.attributes.is_transactional(), transactional);
        }
    }
}

#[test]
fn header_of_raw_batch_is_not_trusted() {
    // A RawBatch built by hand whose header says "fine" but whose bytes are a control batch.
    let good = scan_one(simple_batch(0, false).encode());
    let control = scan_one(simple_batch(0, true).encode());
    let lying = RawBatch {
        header: good.header,
        bytes: control.bytes,
    };
    assert!(matches!(
        rewrite_for_forward(&lying, &FWD),
        Err(RewriteError::ControlBatch { .. })
    ));
    let truncated = RawBatch {
        header: good.header,
        bytes: good.bytes.slice(..good.bytes.len() - 1),
    };
    assert!(matches!(
        rewrite_for_forward(&truncated, &FWD),
        Err(RewriteError::LengthMismatch { .. })
    ));
}
