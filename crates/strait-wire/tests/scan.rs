//! The batch scanner against batches encoded by `kafka-protocol`: properties and edge cases.
mod common;

use bytes::{Bytes, BytesMut};
use common::{batch_spec, fix_crc, simple_batch, BatchSpec};
use kafka_protocol::records::{Compression, RecordBatchDecoder};
use proptest::prelude::*;
use strait_wire::batch::{HEADER_SIZE, MIN_BATCH_LENGTH};
use strait_wire::{
    rewrite_for_forward, BatchHeader, BatchScanner, ForwardHeader, RawBatch, ScanError,
};

/// Scans all of `buf`, panicking on an error.
fn scan_ok(buf: Bytes) -> (Vec<RawBatch>, BatchScanner) {
    let mut scanner = BatchScanner::new(buf);
    let batches = scanner
        .by_ref()
        .collect::<Result<Vec<_>, _>>()
        .expect("scans");
    (batches, scanner)
}

fn concat(parts: &[&[u8]]) -> Bytes {
    let mut buf = BytesMut::new();
    for part in parts {
        buf.extend_from_slice(part);
    }
    buf.freeze()
}

fn assert_header_matches(h: &BatchHeader, spec: &BatchSpec, len: usize) {
    let n = spec.records.len() as i32;
    assert_eq!(h.base_offset, spec.base_offset);
    assert_eq!(h.total_size(), len);
    assert_eq!(h.partition_leader_epoch, spec.partition_leader_epoch);
    assert_eq!(h.magic, 2);
    assert_eq!(h.attributes.compression(), Some(spec.compression));
    assert_eq!(h.attributes.is_transactional(), spec.transactional());
    assert_eq!(h.attributes.is_control(), spec.control);
    assert!(!h.attributes.timestamp_type_log_append());
    assert!(!h.attributes.has_delete_horizon());
    assert_eq!(h.last_offset_delta, n - 1);
    assert_eq!(h.record_count, n);
    assert!(h.is_dense());
    assert_eq!(h.next_offset(), spec.base_offset + i64::from(n));
    assert_eq!(h.base_timestamp, spec.min_timestamp());
    assert_eq!(h.max_timestamp, spec.max_timestamp());
    assert_eq!(h.producer_id, spec.producer_id());
    assert_eq!(h.has_producer_id(), spec.producer.is_some());
    assert_eq!(h.producer_epoch, spec.producer_epoch());
    assert_eq!(h.base_sequence, spec.base_sequence());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Property 1: concatenated batches scan to exactly those batches, and a cut-off prefix of
    /// one more batch ends the scan cleanly, counted as trailing bytes.
    #[test]
    fn scans_concatenated_batches(
        specs in prop::collection::vec(batch_spec(true), 1..4),
        tail in batch_spec(true),
        cut in any::<prop::sample::Index>(),
    ) {
        let encoded: Vec<Bytes> = specs.iter().map(BatchSpec::encode).collect();
        let whole = concat(&encoded.iter().map(|b| b.as_ref()).collect::<Vec<_>>());

        let (batches, scanner) = scan_ok(whole.clone());
        prop_assert_eq!(batches.len(), specs.len());
        for ((batch, spec), bytes) in batches.iter().zip(&specs).zip(&encoded) {
            assert_header_matches(&batch.header, spec, bytes.len());
            prop_assert_eq!(&batch.bytes, bytes);
            prop_assert_eq!(batch.records_bytes(), bytes.slice(HEADER_SIZE..));
        }
        prop_assert_eq!(scanner.consumed_bytes(), whole.len());
        prop_assert_eq!(scanner.trailing_partial_bytes(), 0);
        prop_assert_eq!(scanner.remaining(), 0);

        // Cross-check with kafka-protocol's own header reader.
        let infos = RecordBatchDecoder::decode_batch_info(&mut whole.clone()).expect("decodes");
        prop_assert_eq!(infos.len(), batches.len());
        for (info, batch) in infos.iter().zip(&batches) {
            prop_assert_eq!(info.min_offset, batch.header.base_offset);
            prop_assert_eq!(info.record_count, batch.header.record_count);
            prop_assert_eq!(info.base_sequence, batch.header.base_sequence);
        }

        let tail = tail.encode();
        let prefix = cut.index(tail.len()); // 0..len: never the whole batch
        let cut_buf = concat(&[&whole, &tail[..prefix]]);
        let (cut_batches, scanner) = scan_ok(cut_buf);
        prop_assert_eq!(&cut_batches, &batches);
        prop_assert_eq!(scanner.consumed_bytes(), whole.len());
        prop_assert_eq!(scanner.trailing_partial_bytes(), prefix);
        prop_assert_eq!(scanner.remaining(), prefix);
        prop_assert!(scanner.is_finished());
    }

    /// Property 4, scanner side: arbitrary bytes never panic, and whatever is yielded is
    /// consistent with the buffer.
    #[test]
    fn arbitrary_bytes_never_panic(buf in prop::collection::vec(any::<u8>(), 0..600)) {
        check_never_panics(Bytes::from(buf));
    }

    /// Property 4, with enough structure to get past the length and magic checks: a plausible
    /// length and magic 2 over random bytes, scanned without the CRC check.
    #[test]
    fn plausible_headers_never_panic(
        mut buf in prop::collection::vec(any::<u8>(), 17..400),
        length in -5i32..500,
    ) {
        buf[8..12].copy_from_slice(&length.to_be_bytes());
        buf[16] = 2;
        check_never_panics(Bytes::from(buf));
    }

    /// Property 4 on real batches: random byte flips and truncations never panic.
    #[test]
    fn damaged_batches_never_panic(
        specs in prop::collection::vec(batch_spec(true), 1..3),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..6),
        keep in any::<prop::sample::Index>(),
    ) {
        let mut buf: Vec<u8> = specs.iter().flat_map(|s| s.encode().to_vec()).collect();
        for (at, xor) in flips {
            let at = at.index(buf.len());
            buf[at] ^= xor;
        }
        let keep = keep.index(buf.len() + 1);
        buf.truncate(keep);
        check_never_panics(Bytes::from(buf));
    }
}

/// Scans `buf` with and without the CRC check, rewriting every batch that comes out, and checks
/// the scanner's accounting.
fn check_never_panics(buf: Bytes) {
    for verify in [true, false] {
        let mut scanner = BatchScanner::new(buf.clone()).verify_crc(verify);
        let mut yielded = BytesMut::new();
        let mut failed = None;
        for item in scanner.by_ref() {
            match item {
                Ok(batch) => {
                    assert_eq!(batch.bytes.len(), batch.header.total_size());
                    assert_eq!(batch.header.magic, 2);
                    assert!(batch.header.record_count >= 0);
                    assert!(batch.header.next_offset() > batch.header.base_offset);
                    yielded.extend_from_slice(&batch.bytes);
                    let fwd = ForwardHeader {
                        producer_id: 1,
                        producer_epoch: 0,
                        base_sequence: 0,
                        transactional: false,
                    };
                    if let Ok(out) = rewrite_for_forward(&batch, &fwd) {
                        assert_eq!(out.len(), batch.bytes.len());
                    }
                }
                Err(err) => failed = Some(err),
            }
        }
        assert!(scanner.is_finished());
        assert_eq!(&yielded[..], &buf[..scanner.consumed_bytes()]);
        match failed {
            Some(err) => {
                assert_eq!(err.offset(), scanner.consumed_bytes());
                assert_eq!(scanner.trailing_partial_bytes(), 0);
            }
            None => assert_eq!(
                scanner.consumed_bytes() + scanner.trailing_partial_bytes(),
                buf.len()
            ),
        }
    }
}

// ---- Edge cases (5) ----

#[test]
fn empty_buffer() {
    let mut scanner = BatchScanner::new(Bytes::new());
    assert!(scanner.next().is_none());
    assert_eq!(scanner.trailing_partial_bytes(), 0);
    assert_eq!(scanner.consumed_bytes(), 0);
    assert!(scanner.next().is_none());
}

#[test]
fn eleven_bytes_is_partial() {
    let batch = simple_batch(0, false).encode();
    let mut scanner = BatchScanner::new(batch.slice(..11));
    assert!(scanner.next().is_none());
    assert_eq!(scanner.trailing_partial_bytes(), 11);
    assert_eq!(scanner.consumed_bytes(), 0);
}

#[test]
fn batch_cut_in_its_header_is_partial() {
    let first = simple_batch(0, false).encode();
    let second = simple_batch(3, false).encode();
    for cut in [1, 12, 16, 17, 30, HEADER_SIZE - 1, HEADER_SIZE] {
        let (batches, scanner) = scan_ok(concat(&[&first, &second[..cut]]));
        assert_eq!(batches.len(), 1, "cut at {cut}");
        assert_eq!(scanner.consumed_bytes(), first.len());
        assert_eq!(scanner.trailing_partial_bytes(), cut);
    }
}

#[test]
fn batch_cut_in_its_records_is_partial() {
    let batch = simple_batch(0, false).encode();
    for cut in [HEADER_SIZE + 1, batch.len() - 1] {
        let (batches, scanner) = scan_ok(batch.slice(..cut));
        assert!(batches.is_empty());
        assert_eq!(scanner.trailing_partial_bytes(), cut);
    }
}

#[test]
fn bad_crc_is_an_error_after_the_good_batches() {
    let first = simple_batch(0, false).encode();
    let mut second = simple_batch(3, false).encode().to_vec();
    let last = second.len() - 1;
    second[last] ^= 0x01;
    let mut scanner = BatchScanner::new(concat(&[&first, &second, &first]));
    assert!(scanner.next().unwrap().is_ok());
    let err = scanner.next().unwrap().unwrap_err();
    let ScanError::CrcMismatch {
        offset,
        base_offset,
        expected,
        actual,
    } = err
    else {
        panic!("expected a CRC mismatch, got {err:?}");
    };
    assert_eq!(offset, first.len());
    assert_eq!(base_offset, 3);
    assert_eq!(
        expected,
        u32::from_be_bytes(second[17..21].try_into().unwrap())
    );
    assert_ne!(expected, actual);
    assert!(scanner.next().is_none(), "an error ends the scan");
    assert_eq!(scanner.consumed_bytes(), first.len());
    assert_eq!(scanner.trailing_partial_bytes(), 0);

    // The same bytes pass when the check is off.
    let (batches, _) = {
        let mut s = BatchScanner::without_crc_check(concat(&[&first, &second]));
        let b = s.by_ref().collect::<Result<Vec<_>, _>>().unwrap();
        (b, s)
    };
    assert_eq!(batches.len(), 2);
}

#[test]
fn legacy_magic_is_unsupported() {
    let mut batch = simple_batch(7, false).encode().to_vec();
    batch[16] = 1;
    let err = BatchScanner::new(Bytes::from(batch))
        .next()
        .unwrap()
        .unwrap_err();
    assert_eq!(
        err,
        ScanError::UnsupportedMagic {
            magic: 1,
            offset: 0,
            base_offset: 7
        }
    );

    // A v0 message is shorter than a v2 header; it is still reported by its magic.
    let mut v0 = vec![0u8; 12 + 14];
    v0[8..12].copy_from_slice(&14i32.to_be_bytes());
    let err = BatchScanner::new(Bytes::from(v0))
        .next()
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, ScanError::UnsupportedMagic { magic: 0, .. }));
}

#[test]
fn negative_or_short_length_is_an_error() {
    for length in [-1, i32::MIN, 0, 14, MIN_BATCH_LENGTH - 1] {
        let mut batch = simple_batch(9, false).encode().to_vec();
        batch[8..12].copy_from_slice(&length.to_be_bytes());
        let err = BatchScanner::new(Bytes::from(batch))
            .next()
            .unwrap()
            .unwrap_err();
        assert_eq!(
            err,
            ScanError::InvalidBatchLength {
                offset: 0,
                base_offset: 9,
                batch_length: length
            }
        );
    }
    // A negative length is refused before the magic byte is even there.
    let mut short = vec![0u8; 12];
    short[8..12].copy_from_slice(&(-1i32).to_be_bytes());
    let err = BatchScanner::new(Bytes::from(short))
        .next()
        .unwrap()
        .unwrap_err();
    assert!(matches!(
        err,
        ScanError::InvalidBatchLength {
            batch_length: -1,
            ..
        }
    ));
}

#[test]
fn huge_length_is_partial_unless_a_limit_is_set() {
    let mut batch = simple_batch(0, false).encode().to_vec();
    batch[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
    let (batches, scanner) = scan_ok(Bytes::from(batch.clone()));
    assert!(batches.is_empty());
    assert_eq!(scanner.trailing_partial_bytes(), batch.len());
    let err = BatchScanner::new(Bytes::from(batch))
        .with_max_batch_size(1 << 20)
        .next()
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, ScanError::BatchTooLarge { size, .. } if size == i32::MAX as usize + 12));
}

#[test]
fn negative_record_count_is_an_error() {
    let mut batch = simple_batch(0, false).encode().to_vec();
    batch[57..61].copy_from_slice(&(-3i32).to_be_bytes());
    fix_crc(&mut batch);
    let err = BatchScanner::new(Bytes::from(batch))
        .next()
        .unwrap()
        .unwrap_err();
    assert!(matches!(
        err,
        ScanError::InvalidRecordCount {
            record_count: -3,
            ..
        }
    ));
}

#[test]
fn unknown_codec_is_scanned_not_judged() {
    let mut batch = simple_batch(0, false).encode().to_vec();
    batch[22] |= 0b111;
    fix_crc(&mut batch);
    let (batches, _) = scan_ok(Bytes::from(batch));
    assert_eq!(batches[0].header.attributes.compression(), None);
    assert_eq!(batches[0].header.attributes.codec_id(), 7);
}

#[test]
fn every_codec_scans() {
    for compression in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let spec = BatchSpec {
            compression,
            ..simple_batch(0, false)
        };
        let (batches, _) = scan_ok(spec.encode());
        assert_eq!(
            batches[0].header.attributes.compression(),
            Some(compression)
        );
    }
}
