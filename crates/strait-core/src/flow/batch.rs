//! Building the small record batches strait writes itself (offset-map records, MM2's offset
//! syncs): keys and values only, uncompressed, timestamped now, always exactly one batch.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use strait_wire::{BatchScanner, RawBatch};

use super::FlowError;

/// One batch holding `records` (key, value) in order. `what` names them in errors.
pub(crate) fn key_value_batch(
    what: &str,
    records: Vec<(Vec<u8>, Vec<u8>)>,
) -> Result<RawBatch, FlowError> {
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
) -> Result<RawBatch, FlowError> {
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
            value: Some(Bytes::from(value)),
            headers: Default::default(),
            delete_horizon: false,
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, records.iter(), &options)
        .map_err(|e| FlowError::Map(format!("cannot encode {what}: {e}")))?;
    let mut batches = BatchScanner::new(buf.freeze());
    let batch = batches
        .next()
        .ok_or_else(|| FlowError::Map(format!("encoded {what} batch is empty")))?
        .map_err(|e| FlowError::Map(format!("encoded {what} batch: {e}")))?;
    if batch.header.record_count as usize != count || batches.next().is_some() {
        return Err(FlowError::Map(format!(
            "encoded {count} {what} into more than one batch"
        )));
    }
    Ok(batch)
}
