//! Shared by the integration tests: real batches built with `kafka-protocol`'s encoder, and
//! proptest strategies for them.
#![allow(dead_code)] // each test binary uses a different subset

use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use proptest::prelude::*;
use strait_wire::batch::batch_crc;

/// One record as a test describes it.
#[derive(Debug, Clone)]
pub(crate) struct RecordSpec {
    pub(crate) key: Option<Vec<u8>>,
    pub(crate) value: Option<Vec<u8>>,
    pub(crate) headers: Vec<(String, Option<Vec<u8>>)>,
    pub(crate) timestamp: i64,
}

/// The producer fields of a batch written by an idempotent producer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProducerSpec {
    pub(crate) producer_id: i64,
    pub(crate) producer_epoch: i16,
    pub(crate) base_sequence: i32,
    pub(crate) transactional: bool,
}

/// One batch as a test describes it; [`encode`](Self::encode) makes the real bytes.
#[derive(Debug, Clone)]
pub(crate) struct BatchSpec {
    pub(crate) base_offset: i64,
    pub(crate) partition_leader_epoch: i32,
    pub(crate) compression: Compression,
    pub(crate) producer: Option<ProducerSpec>,
    pub(crate) control: bool,
    pub(crate) records: Vec<RecordSpec>,
}

impl BatchSpec {
    pub(crate) fn producer_id(&self) -> i64 {
        self.producer.map_or(-1, |p| p.producer_id)
    }
    pub(crate) fn producer_epoch(&self) -> i16 {
        self.producer.map_or(-1, |p| p.producer_epoch)
    }
    pub(crate) fn base_sequence(&self) -> i32 {
        self.producer.map_or(-1, |p| p.base_sequence)
    }
    pub(crate) fn transactional(&self) -> bool {
        self.producer.is_some_and(|p| p.transactional)
    }
    pub(crate) fn min_timestamp(&self) -> i64 {
        self.records.iter().map(|r| r.timestamp).min().unwrap_or(-1)
    }
    pub(crate) fn max_timestamp(&self) -> i64 {
        self.records.iter().map(|r| r.timestamp).max().unwrap_or(-1)
    }

    /// The records as `kafka-protocol` wants them: consecutive offsets and sequences, every
    /// batch-level field equal, so that its encoder writes exactly one batch.
    pub(crate) fn kafka_records(&self) -> Vec<Record> {
        (0i64..)
            .zip(&self.records)
            .map(|(i, r)| Record {
                transactional: self.transactional(),
                control: self.control,
                delete_horizon: false,
                partition_leader_epoch: self.partition_leader_epoch,
                producer_id: self.producer_id(),
                producer_epoch: self.producer_epoch(),
                timestamp_type: TimestampType::Creation,
                offset: self.base_offset + i,
                sequence: self.base_sequence().wrapping_add(i as i32),
                timestamp: r.timestamp,
                key: r.key.clone().map(Bytes::from),
                value: r.value.clone().map(Bytes::from),
                // A duplicate key keeps its first position and its last value, in the encoder's
                // input and in the decoder's output alike.
                headers: r
                    .headers
                    .iter()
                    .map(|(k, v)| (StrBytes::from_string(k.clone()), v.clone().map(Bytes::from)))
                    .collect(),
            })
            .collect()
    }

    /// The batch's bytes, as `kafka-protocol` encodes them.
    pub(crate) fn encode(&self) -> Bytes {
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &self.kafka_records(),
            &RecordEncodeOptions {
                version: 2,
                compression: self.compression,
            },
        )
        .expect("kafka-protocol encodes the batch");
        buf.freeze()
    }
}

/// Sets the CRC of a whole batch after its CRC-covered bytes were patched by hand.
pub(crate) fn fix_crc(batch: &mut [u8]) {
    let crc = batch_crc(batch).expect("a whole batch");
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// A three-record uncompressed batch at `base_offset`, for hand-written cases.
pub(crate) fn simple_batch(base_offset: i64, control: bool) -> BatchSpec {
    BatchSpec {
        base_offset,
        partition_leader_epoch: 5,
        compression: Compression::None,
        producer: Some(ProducerSpec {
            producer_id: 1000,
            producer_epoch: 2,
            base_sequence: 10,
            transactional: false,
        }),
        control,
        records: (0..3)
            .map(|i| RecordSpec {
                key: Some(format!("key-{i}").into_bytes()),
                value: Some(vec![i as u8; 20]),
                headers: vec![("h".to_owned(), Some(b"v".to_vec()))],
                timestamp: 1_700_000_000_000 + i,
            })
            .collect(),
    }
}

pub(crate) fn compression() -> impl Strategy<Value = Compression> {
    prop_oneof![
        Just(Compression::None),
        Just(Compression::Gzip),
        Just(Compression::Snappy),
        Just(Compression::Lz4),
        Just(Compression::Zstd),
    ]
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..max)
}

pub(crate) fn record(base_timestamp: i64) -> impl Strategy<Value = RecordSpec> {
    (
        prop::option::of(bytes(24)),
        prop::option::of(bytes(64)),
        prop::collection::vec(("[a-z]{0,6}", prop::option::of(bytes(12))), 0..3),
        0i64..1_000_000,
    )
        .prop_map(move |(key, value, headers, delta)| RecordSpec {
            key,
            value,
            headers,
            timestamp: base_timestamp + delta,
        })
}

pub(crate) fn producer() -> impl Strategy<Value = ProducerSpec> {
    (
        0i64..=i64::MAX,
        0i16..=i16::MAX,
        0i32..=i32::MAX - 64,
        any::<bool>(),
    )
        .prop_map(
            |(producer_id, producer_epoch, base_sequence, transactional)| ProducerSpec {
                producer_id,
                producer_epoch,
                base_sequence,
                transactional,
            },
        )
}

/// A batch of 1..50 records with any codec and, half the time, producer fields. `control`
/// batches only when `allow_control`.
pub(crate) fn batch_spec(allow_control: bool) -> impl Strategy<Value = BatchSpec> {
    (
        0i64..1 << 40,
        -1i32..1000,
        compression(),
        prop::option::of(producer()),
        any::<bool>().prop_map(move |c| c && allow_control),
        0i64..1 << 42,
    )
        .prop_flat_map(
            |(base_offset, partition_leader_epoch, compression, producer, control, ts)| {
                prop::collection::vec(record(ts), 1..50).prop_map(move |records| BatchSpec {
                    base_offset,
                    partition_leader_epoch,
                    compression,
                    producer,
                    control,
                    records,
                })
            },
        )
}
