//! The rebuild path against batches with offset holes: `kafka-protocol`'s encoder writes the
//! source batches (every codec), its decoder and ours read the rebuilt ones back, and the
//! forwarding rewrite must accept them. Hand-made batches carry what that encoder cannot write
//! (repeated header keys), and damaged or hostile bytes must never make anything panic.
mod common;

use std::io::{Read, Write};

use bytes::Bytes;
use common::{compression, fix_crc, producer, record, ProducerSpec, RecordSpec};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use proptest::prelude::*;
use strait_wire::batch::{batch_crc, HEADER_SIZE, LOG_OVERHEAD};
use strait_wire::rebuild::{rebuild, rebuild_with_limit, RebuildError, Rebuilt, Run};
use strait_wire::records::{
    batch_records, compress, decompress, encode_records, parse_records, DecompressLimit, RawRecord,
    RecordsError,
};
use strait_wire::{rewrite_for_forward, BatchHeader, BatchScanner, ForwardHeader, RawBatch};

const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

const FWD: ForwardHeader = ForwardHeader {
    producer_id: 4242,
    producer_epoch: 7,
    base_sequence: 1000,
    transactional: false,
};

/// A source batch as a compacted log holds it: records at arbitrary increasing offsets.
#[derive(Debug, Clone)]
struct HoleySpec {
    compression: Compression,
    producer: Option<ProducerSpec>,
    log_append: bool,
    /// (offset, record), offsets strictly increasing.
    records: Vec<(i64, RecordSpec)>,
}

impl HoleySpec {
    fn min_offset(&self) -> i64 {
        self.records.first().map_or(0, |r| r.0)
    }

    /// The records as `kafka-protocol` wants them. Its encoder writes `offsetDelta = offset -
    /// min_offset` and `lastOffsetDelta = max - min`, so gaps in `offset` are holes in the batch;
    /// it keeps records in one batch only while `offset - sequence` stays the same.
    fn kafka_records(&self) -> Vec<Record> {
        let base_sequence = self.producer.map_or(-1, |p| p.base_sequence);
        let min = self.min_offset();
        self.records
            .iter()
            .map(|(offset, r)| Record {
                transactional: self.producer.is_some_and(|p| p.transactional),
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 9,
                producer_id: self.producer.map_or(-1, |p| p.producer_id),
                producer_epoch: self.producer.map_or(-1, |p| p.producer_epoch),
                timestamp_type: TimestampType::Creation,
                offset: *offset,
                sequence: base_sequence.wrapping_add((offset - min) as i32),
                timestamp: r.timestamp,
                key: r.key.clone().map(Bytes::from),
                value: r.value.clone().map(Bytes::from),
                headers: r
                    .headers
                    .iter()
                    .map(|(k, v)| (StrBytes::from_string(k.clone()), v.clone().map(Bytes::from)))
                    .collect(),
            })
            .collect()
    }

    fn encode(&self) -> RawBatch {
        let mut buf = bytes::BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &self.kafka_records(),
            &RecordEncodeOptions {
                version: 2,
                compression: self.compression,
            },
        )
        .expect("kafka-protocol encodes the batch");
        let mut bytes = buf.to_vec();
        if self.log_append {
            bytes[22] |= 1 << 3;
            fix_crc(&mut bytes);
        }
        let batch = scan_one(Bytes::from(bytes));
        let h = batch.header;
        assert_eq!(h.record_count as usize, self.records.len());
        assert_eq!(h.base_offset, self.min_offset());
        let max = self.records.last().map_or(0, |r| r.0);
        assert_eq!(i64::from(h.last_offset_delta), max - self.min_offset());
        batch
    }
}

fn scan_one(buf: Bytes) -> RawBatch {
    let mut scanner = BatchScanner::new(buf);
    let batch = scanner.next().expect("a batch").expect("scans");
    assert!(scanner.next().is_none(), "exactly one batch");
    assert_eq!(scanner.trailing_partial_bytes(), 0);
    batch
}

fn holey_spec() -> impl Strategy<Value = HoleySpec> {
    (
        0i64..1 << 40,
        compression(),
        prop::option::of(producer()),
        any::<bool>(),
        0i64..1 << 42,
    )
        .prop_flat_map(|(base, compression, producer, log_append, ts)| {
            prop::collection::vec((1i64..5, record(ts)), 1..40).prop_map(move |steps| {
                let mut offset = base;
                let records = steps
                    .into_iter()
                    .map(|(step, r)| {
                        offset += step;
                        (offset, r)
                    })
                    .collect();
                HoleySpec {
                    compression,
                    producer,
                    log_append,
                    records,
                }
            })
        })
}

/// A spec and a `keep_from` from a little before its first offset to a little past its last.
fn spec_and_keep_from() -> impl Strategy<Value = (HoleySpec, i64)> {
    holey_spec().prop_flat_map(|spec| {
        let first = spec.min_offset();
        let last = spec.records.last().map_or(first, |r| r.0);
        (Just(spec), first - 2..=last + 2)
    })
}

/// Checks everything a rebuilt batch must satisfy against the records kept from `spec`.
fn check_rebuilt(
    source: &RawBatch,
    spec: &HoleySpec,
    keep_from: i64,
    rebuilt: Option<Rebuilt>,
) -> Result<(), TestCaseError> {
    let kept: Vec<(i64, Record)> = spec
        .records
        .iter()
        .map(|r| r.0)
        .zip(spec.kafka_records())
        .filter(|(offset, _)| *offset >= keep_from)
        .collect();
    let Some(rebuilt) = rebuilt else {
        prop_assert!(
            kept.is_empty(),
            "nothing rebuilt but {} records kept",
            kept.len()
        );
        return Ok(());
    };
    prop_assert!(!kept.is_empty());

    // The batch scans (CRC included), is dense, and keeps the codec and every attribute bit.
    let batch = scan_one(rebuilt.batch.bytes.clone());
    prop_assert_eq!(&batch, &rebuilt.batch);
    let (src, h) = (source.header, batch.header);
    prop_assert!(h.is_dense());
    prop_assert_eq!(h.record_count as usize, kept.len());
    prop_assert_eq!(h.base_offset, 0);
    prop_assert_eq!(h.partition_leader_epoch, -1);
    prop_assert_eq!(h.attributes, src.attributes);
    prop_assert_eq!(h.attributes.compression(), Some(spec.compression));
    prop_assert_eq!(h.base_timestamp, src.base_timestamp);
    prop_assert_eq!(
        (h.producer_id, h.producer_epoch, h.base_sequence),
        (src.producer_id, src.producer_epoch, src.base_sequence)
    );
    let all_kept = kept.len() == spec.records.len();
    let expected_max = if all_kept || spec.log_append {
        src.max_timestamp
    } else {
        kept.iter().map(|(_, r)| r.timestamp).max().unwrap_or(-1)
    };
    prop_assert_eq!(h.max_timestamp, expected_max);

    // The runs are the kept offsets, in order, as maximal runs of consecutive offsets.
    let from_runs: Vec<i64> = rebuilt
        .runs
        .iter()
        .flat_map(|r| r.src_offset..r.src_offset + r.len)
        .collect();
    let kept_offsets: Vec<i64> = kept.iter().map(|(o, _)| *o).collect();
    prop_assert_eq!(from_runs, kept_offsets);
    for pair in rebuilt.runs.windows(2) {
        prop_assert!(pair[0].src_offset + pair[0].len < pair[1].src_offset);
    }
    prop_assert!(rebuilt.runs.iter().all(|r| r.len >= 1));

    // Our parser: same bytes, same absolute timestamps, dense deltas.
    let ours = batch_records(&batch).expect("our parser reads the rebuilt batch");
    prop_assert_eq!(ours.len(), kept.len());
    for ((got, (_, want)), i) in ours.iter().zip(&kept).zip(0i32..) {
        prop_assert_eq!(got.offset_delta, i);
        prop_assert_eq!(&got.key, &want.key);
        prop_assert_eq!(&got.value, &want.value);
        prop_assert_eq!(h.base_timestamp + got.timestamp_delta, want.timestamp);
        let want_headers: Vec<(Bytes, Option<Bytes>)> = want
            .headers
            .iter()
            .map(|(k, v)| (Bytes::copy_from_slice(k.as_bytes()), v.clone()))
            .collect();
        prop_assert_eq!(&got.headers, &want_headers);
    }

    // An independent reader (kafka-protocol, its own decompressors) agrees.
    let set = RecordBatchDecoder::decode(&mut batch.bytes.clone()).expect("kafka-protocol decodes");
    prop_assert_eq!(set.compression, spec.compression);
    prop_assert_eq!(set.records.len(), kept.len());
    for ((got, (_, want)), i) in set.records.iter().zip(&kept).zip(0i64..) {
        prop_assert_eq!(got.offset, i);
        prop_assert_eq!(&got.key, &want.key);
        prop_assert_eq!(&got.value, &want.value);
        prop_assert_eq!(&got.headers, &want.headers);
        prop_assert_eq!(got.timestamp, want.timestamp);
    }

    // The forwarding rewrite takes it.
    let out = rewrite_for_forward(&batch, &FWD).expect("the rewrite accepts a rebuilt batch");
    let fwd = scan_one(out);
    prop_assert_eq!(fwd.header.producer_id, FWD.producer_id);
    prop_assert_eq!(&fwd.bytes[HEADER_SIZE..], &batch.bytes[HEADER_SIZE..]);
    Ok(())
}

/// Random records for our own encoder: header keys from a tiny alphabet so that they repeat,
/// null keys, values and header values, any timestamp delta.
fn raw_record() -> impl Strategy<Value = RawRecord> {
    let blob = || prop::option::of(prop::collection::vec(any::<u8>(), 0..20).prop_map(Bytes::from));
    (
        any::<i64>(),
        any::<i8>(),
        blob(),
        blob(),
        prop::collection::vec(("[ab]{0,1}".prop_map(Bytes::from), blob()), 0..6),
    )
        .prop_map(
            |(timestamp_delta, attributes, key, value, headers)| RawRecord {
                offset_delta: 0,
                timestamp_delta,
                attributes,
                key,
                value,
                headers,
            },
        )
}

/// A batch written by hand with our encoder and codecs, for what `kafka-protocol` cannot write.
/// `records` carry their offset deltas; the header gets `last_offset_delta`.
fn hand_batch(
    base_offset: i64,
    codec: Compression,
    attributes_extra: i16,
    records: &[RawRecord],
    last_offset_delta: i32,
) -> RawBatch {
    let mut out = Vec::new();
    out.extend_from_slice(&base_offset.to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes());
    out.extend_from_slice(&5i32.to_be_bytes());
    out.push(2);
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&((codec as i16) | attributes_extra).to_be_bytes());
    out.extend_from_slice(&last_offset_delta.to_be_bytes());
    out.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
    out.extend_from_slice(&1_700_000_000_999i64.to_be_bytes());
    out.extend_from_slice(&(-1i64).to_be_bytes());
    out.extend_from_slice(&(-1i16).to_be_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes());
    out.extend_from_slice(&(records.len() as i32).to_be_bytes());
    assert_eq!(out.len(), HEADER_SIZE);
    let mut plain = Vec::new();
    encode_records(records, &mut plain).expect("encodes");
    compress(codec, &plain, &mut out).expect("compresses");
    finish(out)
}

/// Sets `batchLength` and the CRC of a batch being built by hand, and scans it.
fn finish(mut out: Vec<u8>) -> RawBatch {
    let len = (out.len() - LOG_OVERHEAD) as i32;
    out[8..12].copy_from_slice(&len.to_be_bytes());
    fix_crc(&mut out);
    scan_one(Bytes::from(out))
}

/// A batch around an arbitrary records section, with a valid length and CRC.
fn wrap_payload(
    attributes: i16,
    record_count: i32,
    last_offset_delta: i32,
    payload: &[u8],
) -> RawBatch {
    let mut out = vec![0u8; HEADER_SIZE];
    out[16] = 2;
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    out[23..27].copy_from_slice(&last_offset_delta.to_be_bytes());
    out[57..61].copy_from_slice(&record_count.to_be_bytes());
    out.extend_from_slice(payload);
    let len = (out.len() - LOG_OVERHEAD) as i32;
    out[8..12].copy_from_slice(&len.to_be_bytes());
    fix_crc(&mut out);
    RawBatch {
        header: BatchHeader::parse(&out).expect("a header"),
        bytes: Bytes::from(out),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Random holey batches, every codec, random `keep_from`: the rebuilt batch scans, is dense,
    /// keeps the codec, attributes and producer fields, holds exactly the kept records (bytes and
    /// absolute timestamps, read by our parser and by kafka-protocol's), its runs are the kept
    /// offsets, and the forwarding rewrite accepts it.
    #[test]
    fn rebuilds_kept_records((spec, keep_from) in spec_and_keep_from()) {
        let source = spec.encode();
        let rebuilt = rebuild(&source, keep_from).expect("rebuilds");
        check_rebuilt(&source, &spec, keep_from, rebuilt)?;
    }

    /// Repeated header keys, null header values, null keys and values survive a rebuild in
    /// order and byte for byte, with every codec.
    #[test]
    fn repeated_headers_survive(
        records in prop::collection::vec((1i32..4, raw_record()), 1..20),
        codec in compression(),
        keep in 0usize..20,
    ) {
        let mut delta = -1;
        let records: Vec<RawRecord> = records
            .into_iter()
            .map(|(step, r)| {
                delta += step;
                RawRecord { offset_delta: delta, ..r }
            })
            .collect();
        let source = hand_batch(500, codec, 0, &records, delta);
        let keep_from = 500 + i64::from(records[keep.min(records.len() - 1)].offset_delta);
        let rebuilt = rebuild(&source, keep_from).expect("rebuilds").expect("keeps some");
        let got = batch_records(&rebuilt.batch).expect("reads back");
        let want = &records[keep.min(records.len() - 1)..];
        prop_assert_eq!(got.len(), want.len());
        for ((g, w), i) in got.iter().zip(want).zip(0i32..) {
            prop_assert_eq!(g, &RawRecord { offset_delta: i, ..w.clone() });
        }
        prop_assert_eq!(rebuilt.batch.header.attributes.compression(), Some(codec));
        prop_assert!(rewrite_for_forward(&rebuilt.batch, &FWD).is_ok());
    }

    /// Our parser and `rebuild` never panic on arbitrary bytes.
    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..400),
        count in prop_oneof![0i32..8, any::<i32>()],
        attributes in any::<i16>(),
        last_offset_delta in prop_oneof![0i32..8, any::<i32>()],
        keep_from in any::<i64>(),
    ) {
        let data = Bytes::from(bytes.clone());
        let _ = parse_records(&data, count);
        for codec in CODECS {
            let _ = decompress(codec, &data, &DecompressLimit::default());
        }
        // As a whole batch (mostly refused by its framing) ...
        let raw = RawBatch {
            header: BatchHeader::parse(&bytes).unwrap_or(wrap_payload(0, 0, 0, &[]).header),
            bytes: data,
        };
        let _ = rebuild(&raw, keep_from);
        // ... and behind a valid header, length and CRC, with any codec and flags.
        let batch = wrap_payload(attributes, count, last_offset_delta, &bytes);
        let _ = rebuild(&batch, keep_from);
    }

    /// Damaged real batches (bytes flipped or cut inside the records, then the CRC fixed so that
    /// the damage reaches the decoders) never make `rebuild` panic, and whatever it returns is a
    /// batch that scans.
    #[test]
    fn damaged_batches_never_panic(
        spec in holey_spec(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..4),
        cut in prop::option::of(any::<prop::sample::Index>()),
        keep_from in any::<i64>(),
    ) {
        let source = spec.encode();
        let mut bytes = source.bytes.to_vec();
        let payload_len = bytes.len() - HEADER_SIZE;
        if payload_len > 0 {
            for (at, mask) in &flips {
                bytes[HEADER_SIZE + at.index(payload_len)] ^= mask;
            }
            if let Some(cut) = cut {
                bytes.truncate(HEADER_SIZE + cut.index(payload_len));
            }
        }
        let damaged = finish(bytes);
        if let Ok(Some(rebuilt)) = rebuild(&damaged, keep_from) {
            scan_one(rebuilt.batch.bytes.clone());
            prop_assert!(rebuilt.batch.header.is_dense());
        }
    }
}

/// The example of the brief: a compacted batch holding offsets 10, 11, 14, 17, every codec and
/// every interesting `keep_from`.
#[test]
fn compacted_batch_10_11_14_17() {
    for codec in CODECS {
        let spec = HoleySpec {
            compression: codec,
            producer: Some(ProducerSpec {
                producer_id: 31,
                producer_epoch: 2,
                base_sequence: 40,
                transactional: true,
            }),
            log_append: false,
            records: [10, 11, 14, 17]
                .into_iter()
                .map(|o| {
                    (
                        o,
                        RecordSpec {
                            key: Some(format!("k{o}").into_bytes()),
                            value: (o != 14).then(|| vec![o as u8; 100]),
                            headers: vec![("trace".into(), Some(b"x".to_vec()))],
                            timestamp: 1_000 + 3 * o,
                        },
                    )
                })
                .collect(),
        };
        let source = spec.encode();
        assert!(!source.header.is_dense());
        assert!(
            rewrite_for_forward(&source, &FWD).is_err(),
            "holes must not be forwarded"
        );
        for (keep_from, runs) in [
            (0, vec![(10, 2), (14, 1), (17, 1)]),
            (11, vec![(11, 1), (14, 1), (17, 1)]),
            (12, vec![(14, 1), (17, 1)]),
            (17, vec![(17, 1)]),
            (18, vec![]),
        ] {
            let rebuilt = rebuild(&source, keep_from).expect("rebuilds");
            let got: Vec<(i64, i64)> = rebuilt
                .as_ref()
                .map(|r| {
                    r.runs
                        .iter()
                        .map(|Run { src_offset, len }| (*src_offset, *len))
                        .collect()
                })
                .unwrap_or_default();
            assert_eq!(got, runs, "{codec:?} from {keep_from}");
            check_rebuilt(&source, &spec, keep_from, rebuilt).expect("checks");
        }
    }
}

/// A dense batch rebuilt whole is the same records again, under the same header fields.
#[test]
fn dense_batch_rebuilt_whole_keeps_everything() {
    for codec in CODECS {
        let records: Vec<RawRecord> = (0..5)
            .map(|i| RawRecord {
                offset_delta: i,
                timestamp_delta: i64::from(i),
                headers: vec![(Bytes::from_static(b"k"), None); 2],
                value: Some(Bytes::from(vec![7; 300])),
                ..RawRecord::default()
            })
            .collect();
        let source = hand_batch(0, codec, 1 << 4, &records, 4);
        let rebuilt = rebuild(&source, i64::MIN).unwrap().unwrap();
        assert_eq!(
            rebuilt.runs,
            vec![Run {
                src_offset: 0,
                len: 5
            }]
        );
        assert_eq!(batch_records(&rebuilt.batch).unwrap(), records);
        let (a, b) = (source.header, rebuilt.batch.header);
        assert_eq!(
            BatchHeader {
                crc: 0,
                batch_length: 0,
                partition_leader_epoch: 0,
                ..a
            },
            BatchHeader {
                crc: 0,
                batch_length: 0,
                partition_leader_epoch: 0,
                ..b
            },
            "{codec:?}"
        );
        assert!(b.attributes.is_transactional());
    }
}

#[test]
fn control_and_corrupt_batches_are_refused() {
    let records = [RawRecord::default()];
    let control = hand_batch(3, Compression::None, 1 << 5, &records, 0);
    assert_eq!(
        rebuild(&control, 0),
        Err(RebuildError::ControlBatch { base_offset: 3 })
    );

    let good = hand_batch(3, Compression::Zstd, 0, &records, 0);
    let mut bytes = good.bytes.to_vec();
    *bytes.last_mut().unwrap() ^= 0x40;
    let damaged = RawBatch {
        bytes: Bytes::from(bytes),
        ..good.clone()
    };
    let err = rebuild(&damaged, 0).unwrap_err();
    assert!(matches!(err, RebuildError::CrcMismatch { .. }), "{err}");
    assert!(err.is_retriable());

    let mut short = good.clone();
    short.bytes = good.bytes.slice(..good.bytes.len() - 1);
    assert!(matches!(
        rebuild(&short, 0),
        Err(RebuildError::LengthMismatch { .. })
    ));
    let mut tiny = good.clone();
    tiny.bytes = good.bytes.slice(..20);
    assert_eq!(rebuild(&tiny, 0), Err(RebuildError::TooShort { len: 20 }));
    let mut v1 = good.bytes.to_vec();
    v1[16] = 1;
    let v1 = RawBatch {
        bytes: Bytes::from(v1),
        ..good
    };
    assert!(matches!(
        rebuild(&v1, 0),
        Err(RebuildError::UnsupportedMagic { magic: 1, .. })
    ));
}

/// Streams `n` zero bytes through `encoder` without holding them.
fn zeros_into(mut encoder: impl Write, n: u64) {
    std::io::copy(&mut std::io::repeat(0).take(n), &mut encoder).expect("compresses");
}

/// A decompression bomb: a few kilobytes that inflate to 100 MB of zeros (one "record"). The
/// default limit refuses it by ratio long before the whole of it exists; a hard cap refuses it
/// too. Built by streaming, so the test itself never holds the 100 MB either.
#[test]
fn decompression_bombs_are_refused() {
    const HUNDRED_MB: u64 = 100_000_000;
    let mut bombs = Vec::new();

    let mut zstd = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    zeros_into(&mut zstd, HUNDRED_MB);
    bombs.push((Compression::Zstd, zstd.finish().unwrap()));

    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    zeros_into(&mut gzip, HUNDRED_MB);
    bombs.push((Compression::Gzip, gzip.finish().unwrap()));

    let mut lz4 = lz4::EncoderBuilder::new().build(Vec::new()).unwrap();
    zeros_into(&mut lz4, HUNDRED_MB);
    let (lz4, result) = lz4.finish();
    result.unwrap();
    bombs.push((Compression::Lz4, lz4));

    for (codec, payload) in &bombs {
        assert!(
            payload.len() < 1 << 20,
            "{codec:?}: {} bytes",
            payload.len()
        );
        let batch = wrap_payload(*codec as i16, 1, 0, payload);
        let default = DecompressLimit::default();
        match rebuild(&batch, 0) {
            Err(RebuildError::Records {
                source: RecordsError::DecompressedTooLarge { limit, .. },
                ..
            }) => assert_eq!(limit, default.max_output(payload.len()), "{codec:?}"),
            other => panic!("{codec:?}: {other:?}"),
        }
        let capped = DecompressLimit {
            max_bytes: 1 << 20,
            ..default
        };
        assert!(matches!(
            rebuild_with_limit(&batch, 0, &capped),
            Err(RebuildError::Records {
                source: RecordsError::DecompressedTooLarge {
                    limit: 1_048_576,
                    ..
                },
                ..
            })
        ));
    }

    // Snappy compresses zeros only about 20:1, under the ratio rule: the hard cap stops it.
    let mut snappy = Vec::new();
    compress(Compression::Snappy, &vec![0u8; 20 << 20], &mut snappy).unwrap();
    let batch = wrap_payload(Compression::Snappy as i16, 1, 0, &snappy);
    let capped = DecompressLimit {
        max_bytes: 4 << 20,
        ..DecompressLimit::default()
    };
    assert!(matches!(
        rebuild_with_limit(&batch, 0, &capped),
        Err(RebuildError::Records {
            source: RecordsError::DecompressedTooLarge { .. },
            ..
        })
    ));
}

/// What the batch encoder writes for a LogAppendTime batch is what the rebuild keeps: the bit and
/// the append time in `maxTimestamp`, even when only some records are kept.
#[test]
fn log_append_time_keeps_max_timestamp() {
    let records: Vec<RawRecord> = [0, 2, 5]
        .into_iter()
        .map(|d| RawRecord {
            offset_delta: d,
            timestamp_delta: i64::from(d),
            ..RawRecord::default()
        })
        .collect();
    let source = hand_batch(100, Compression::Lz4, 1 << 3, &records, 5);
    let rebuilt = rebuild(&source, 101).unwrap().unwrap();
    assert_eq!(
        rebuilt.batch.header.max_timestamp,
        source.header.max_timestamp
    );
    assert!(rebuilt.batch.header.attributes.timestamp_type_log_append());
    assert_eq!(
        rebuilt.runs,
        vec![
            Run {
                src_offset: 102,
                len: 1
            },
            Run {
                src_offset: 105,
                len: 1
            }
        ]
    );
    assert_eq!(
        batch_crc(&rebuilt.batch.bytes),
        Some(rebuilt.batch.header.crc)
    );
}
