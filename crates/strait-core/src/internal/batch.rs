//! Building the record batches strait writes itself (offset-map records, MM2's offset syncs,
//! checkpoints, heartbeats): keys and values only, uncompressed, timestamped now. A batch is
//! kept under [`MAX_BATCH_BYTES`]: more records than that go in several batches
//! ([`key_value_batches`]), since a batch over the target's `message.max.bytes` (1 MiB by
//! default) is refused with MESSAGE_TOO_LARGE, for good.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use strait_wire::{BatchScanner, RawBatch};

/// Why a batch strait writes itself could not be built. `what` names its records
/// (`"checkpoints"`, `"offset-map records"` ...).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    /// Kafka's record encoder failed.
    #[error("cannot encode {what}: {source}")]
    Encode {
        /// What the records are.
        what: String,
        /// The encoder's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The encoder's output holds no batch.
    #[error("encoded {what} batch is empty")]
    Empty {
        /// What the records are.
        what: String,
    },
    /// The encoder's output cannot be read back.
    #[error("encoded {what} batch: {source}")]
    Unreadable {
        /// What the records are.
        what: String,
        /// Why.
        #[source]
        source: strait_wire::ScanError,
    },
    /// The encoder made more than one batch of records meant for one.
    #[error("encoded {count} {what} into more than one batch")]
    NotOne {
        /// What the records are.
        what: String,
        /// How many records.
        count: usize,
    },
}

/// The most record bytes (keys, values and each record's overhead) strait puts in one batch it
/// writes itself: a quarter of Kafka's default `message.max.bytes`, so that a target with a
/// smaller limit still takes it.
pub(crate) const MAX_BATCH_BYTES: usize = 256 * 1024;

/// `items` in order, in runs whose sizes (by `size`) add up to at most `max`; a run holds at
/// least one item, so an item larger than `max` is a run of its own.
pub(crate) fn chunks_by_size<T>(
    items: Vec<T>,
    max: usize,
    size: impl Fn(&T) -> usize,
) -> Vec<Vec<T>> {
    let mut out = Vec::new();
    let mut current = Vec::new();
    let mut bytes = 0;
    for item in items {
        let n = size(&item);
        if !current.is_empty() && bytes + n > max {
            out.push(std::mem::take(&mut current));
            bytes = 0;
        }
        bytes += n;
        current.push(item);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The bytes a (key, value) record takes in a batch, overhead included (lengths, deltas,
/// attributes: at most 24 bytes for these records).
pub(crate) fn record_size(key: &[u8], value: &[u8]) -> usize {
    key.len() + value.len() + 24
}

/// `records` (key, value) in order, in as many batches of at most [`MAX_BATCH_BYTES`] as they
/// need. `what` names them in errors.
pub(crate) fn key_value_batches(
    what: &str,
    records: Vec<(Vec<u8>, Vec<u8>)>,
) -> Result<Vec<RawBatch>, BatchError> {
    let now = now_ms();
    chunks_by_size(records, MAX_BATCH_BYTES, |(k, v)| record_size(k, v))
        .into_iter()
        .map(|chunk| key_value_batch_at(what, chunk, now))
        .collect()
}

/// [`key_value_batches`] where a value may be null (`None`): a tombstone, which deletes its key
/// from a compacted topic.
pub(crate) fn key_value_batches_nullable(
    what: &str,
    records: Vec<(Vec<u8>, Option<Vec<u8>>)>,
) -> Result<Vec<RawBatch>, BatchError> {
    let now = now_ms();
    chunks_by_size(records, MAX_BATCH_BYTES, |(k, v)| {
        record_size(k, v.as_deref().unwrap_or_default())
    })
    .into_iter()
    .map(|chunk| nullable_batch_at(what, chunk, now))
    .collect()
}

/// One batch holding `records` (key, value) in order. `what` names them in errors.
pub(crate) fn key_value_batch(
    what: &str,
    records: Vec<(Vec<u8>, Vec<u8>)>,
) -> Result<RawBatch, BatchError> {
    key_value_batch_at(what, records, now_ms())
}

/// Milliseconds since the Unix epoch, as the records strait writes are stamped (0 if the clock
/// is before 1970).
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// [`key_value_batch`] with every record stamped `timestamp_ms` (a heartbeat's record carries
/// the heartbeat's own timestamp, as MM2's `MirrorHeartbeatTask` writes it).
pub(crate) fn key_value_batch_at(
    what: &str,
    records: Vec<(Vec<u8>, Vec<u8>)>,
    timestamp_ms: i64,
) -> Result<RawBatch, BatchError> {
    let records = records.into_iter().map(|(k, v)| (k, Some(v))).collect();
    nullable_batch_at(what, records, timestamp_ms)
}

/// [`key_value_batch_at`] where a value may be null (a tombstone).
fn nullable_batch_at(
    what: &str,
    records: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    timestamp_ms: i64,
) -> Result<RawBatch, BatchError> {
    let now = timestamp_ms;
    let count = records.len();
    let records: Vec<Record> = records
        .into_iter()
        .enumerate()
        .map(|(i, (key, value))| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // kafka-protocol's encoder starts a new batch whenever offset - sequence changes;
            // one batch it must be (the producer's rewrite sets the real sequence).
            sequence: i as i32,
            timestamp: now,
            key: Some(Bytes::from(key)),
            value: value.map(Bytes::from),
            headers: Default::default(),
            delete_horizon: false,
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, records.iter(), &options).map_err(|e| {
        BatchError::Encode {
            what: what.to_owned(),
            source: e.into(),
        }
    })?;
    let mut batches = BatchScanner::new(buf.freeze());
    let batch = batches
        .next()
        .ok_or_else(|| BatchError::Empty {
            what: what.to_owned(),
        })?
        .map_err(|source| BatchError::Unreadable {
            what: what.to_owned(),
            source,
        })?;
    if batch.header.record_count as usize != count || batches.next().is_some() {
        return Err(BatchError::NotOne {
            what: what.to_owned(),
            count,
        });
    }
    Ok(batch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_records_go_in_several_batches_each_under_the_limit_in_order() {
        let records: Vec<(Vec<u8>, Vec<u8>)> = (0..20_000u32)
            .map(|i| (format!("key-{i:08}").into_bytes(), vec![7u8; 40]))
            .collect();
        let total: usize = records.iter().map(|(k, v)| record_size(k, v)).sum();
        assert!(total > 1024 * 1024, "{total}");
        let batches = key_value_batches("test records", records).unwrap();
        assert!(batches.len() >= 4, "{}", batches.len());
        let mut count = 0;
        for batch in &batches {
            assert!(
                batch.bytes.len() <= MAX_BATCH_BYTES + 100,
                "{}",
                batch.bytes.len()
            );
            count += batch.header.record_count as usize;
        }
        assert_eq!(count, 20_000);
        assert!(key_value_batches("none", Vec::new()).unwrap().is_empty());
    }

    #[test]
    fn a_null_value_is_written_as_a_tombstone() {
        let records = vec![(b"a".to_vec(), Some(b"1".to_vec())), (b"b".to_vec(), None)];
        let batches = key_value_batches_nullable("test records", records).unwrap();
        assert_eq!(batches.len(), 1);
        let decoded = strait_wire::records::batch_records(&batches[0]).unwrap();
        assert_eq!(decoded.len(), 2);
        assert_eq!(decoded[0].value.as_deref(), Some(&b"1"[..]));
        assert_eq!(decoded[1].key.as_deref(), Some(&b"b"[..]));
        assert_eq!(decoded[1].value, None);
    }
}
