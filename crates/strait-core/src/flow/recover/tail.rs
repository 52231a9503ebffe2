//! Matching the target's unrecorded tail record by record.
//!
//! After a crash or a failed produce, the target can hold records beyond the offset map: written,
//! acknowledged or not, but never recorded. They are copies of the source records from where the
//! map ends, in order, so the flow compares them with those source records and records what
//! matches instead of writing it again.
//!
//! The comparison is by record (key, value, headers, timestamp), not by batch bytes: the target
//! may hold the same records in other batches than the ones written. Kafka keeps batches as
//! written, but recompresses a batch whose codec differs from the topic's `compression.type`,
//! and other Kafka-protocol brokers may return several written batches as one.
//!
//! Where the two sides no longer start together, [`find_record`] looks for one record on the
//! other side: from the first offset stamped at or after the record's timestamp (a copy keeps
//! its original's create time), forward. That lines up a target whose oldest copies were
//! deleted (its log start moved) with the source, and a target tail with a source whose oldest
//! records were deleted since they were copied.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use strait_kafka::admin::{IsolationLevel, OffsetSpec};
use strait_kafka::fetch::{AbortedTransaction, FetchOptions};
use strait_kafka::{Client, TopicPartition};
use strait_wire::records::{batch_records, RecordsError};
use strait_wire::{BatchScanner, RawBatch};

use crate::flow::classify::{AbortTracker, Action};
use crate::flow::error::FlowError;

/// A record as a consumer sees it, with its absolute offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TailRecord {
    /// Its offset in its partition.
    pub(super) offset: i64,
    /// Its create time; `None` when the broker set the time (LogAppendTime), which a copy
    /// cannot share with its original.
    pub(super) timestamp: Option<i64>,
    pub(super) key: Option<Bytes>,
    pub(super) value: Option<Bytes>,
    pub(super) headers: Vec<(Bytes, Option<Bytes>)>,
}

impl TailRecord {
    /// Whether `self` is a copy of `other`, or the other way round: same key, value and
    /// headers, and the same timestamp when both carry their create time.
    pub(super) fn same_record(&self, other: &TailRecord) -> bool {
        let times_agree = match (self.timestamp, other.timestamp) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        };
        times_agree
            && self.key == other.key
            && self.value == other.value
            && self.headers == other.headers
    }

    /// What differs between `self` and `other`, for the log: `"value, timestamp 5 vs 7"`.
    pub(super) fn differences(&self, other: &TailRecord) -> String {
        let mut what = Vec::new();
        if self.key != other.key {
            what.push("key".to_owned());
        }
        if self.value != other.value {
            what.push("value".to_owned());
        }
        if self.headers != other.headers {
            what.push("headers".to_owned());
        }
        if let (Some(a), Some(b)) = (self.timestamp, other.timestamp) {
            if a != b {
                what.push(format!("timestamp {a} vs {b}"));
            }
        }
        what.join(", ")
    }
}

/// One piece of what a source fetch holds from a position, as a round would mirror it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum SourceItem {
    /// Source offsets `from..to` are not mirrored: a marker, or a batch of an aborted
    /// transaction.
    Skip { from: i64, to: i64 },
    /// A record the flow would write.
    Record(TailRecord),
    /// The batch whose records came before ends at this offset (its trailing compaction holes
    /// included).
    BatchEnd(i64),
    /// The batch at `base_offset` cannot be read.
    Unreadable { base_offset: i64, why: String },
}

/// The records of `batch` at offsets `from` and later, decompressed, in order.
pub(super) fn records_from(batch: &RawBatch, from: i64) -> Result<Vec<TailRecord>, RecordsError> {
    let header = &batch.header;
    let log_append = header.attributes.timestamp_type_log_append();
    Ok(batch_records(batch)?
        .into_iter()
        .map(|r| TailRecord {
            offset: header.base_offset.saturating_add(i64::from(r.offset_delta)),
            timestamp: (!log_append)
                .then(|| header.base_timestamp.saturating_add(r.timestamp_delta)),
            key: r.key,
            value: r.value,
            headers: r.headers,
        })
        .filter(|r| r.offset >= from)
        .collect())
}

/// Whether `e` is OFFSET_OUT_OF_RANGE: the offset is before the partition's log start or past
/// its end.
pub(super) fn is_out_of_range(e: &FlowError) -> bool {
    matches!(e, FlowError::Kafka(e) if e.code() == Some(ResponseError::OffsetOutOfRange))
}

/// What a flow would mirror of fetched `records` (with the fetch's `aborted` transactions) from
/// offset `from`, batch by batch: markers and aborted transactions (under read_committed) as
/// skips, the records of the others in order, each followed by its batch's end. A batch that
/// cannot be decoded ends the list; one that cannot even be scanned ends it unsaid, as the
/// fetch may end in a partial batch.
pub(super) fn source_items(
    records: Bytes,
    aborted: &[AbortedTransaction],
    from: i64,
) -> Vec<SourceItem> {
    let mut tracker = AbortTracker::new(aborted);
    let mut items = Vec::new();
    for batch in BatchScanner::new(records) {
        let Ok(batch) = batch else { break };
        if batch.header.next_offset() <= from {
            continue;
        }
        let end = batch.header.next_offset();
        match tracker.classify(batch) {
            Action::Skip { from, to, .. } => items.push(SourceItem::Skip { from, to }),
            Action::Forward(b) | Action::Rebuild(b) => match records_from(&b, from) {
                Ok(records) => {
                    items.extend(records.into_iter().map(SourceItem::Record));
                    items.push(SourceItem::BatchEnd(end));
                }
                Err(e) => {
                    items.push(SourceItem::Unreadable {
                        base_offset: b.header.base_offset,
                        why: e.to_string(),
                    });
                    break;
                }
            },
        }
    }
    items
}

/// What `tp` holds from offset `from` that a flow would mirror, as far as one fetch reaches
/// ([`source_items`]; under read_committed, `options.isolation`, aborted transactions are
/// skipped).
pub(super) async fn read_items(
    client: &Client,
    tp: &TopicPartition,
    from: i64,
    options: &FetchOptions,
) -> Result<Vec<SourceItem>, FlowError> {
    let data = super::fetch_data(client, tp, from, options).await?;
    Ok(source_items(data.records, &data.aborted, from))
}

/// The records of `tp` that a flow would mirror, from offset `from`, as far as one fetch reaches
/// ([`read_items`]). Also returns the offset after the last batch looked at (`from` when the
/// fetch returned none). A batch that cannot be read ends the list.
pub(super) async fn mirrorable_records(
    client: &Client,
    tp: &TopicPartition,
    from: i64,
    options: &FetchOptions,
) -> Result<(Vec<TailRecord>, i64), FlowError> {
    let mut records = Vec::new();
    let mut next = from;
    for item in read_items(client, tp, from, options).await? {
        match item {
            SourceItem::Record(r) => records.push(r),
            SourceItem::Skip { to: end, .. } | SourceItem::BatchEnd(end) => next = end,
            SourceItem::Unreadable { .. } => break,
        }
    }
    Ok((records, next))
}

/// The offset of the first record of `tp` at or after `from` and before `until` that is the
/// same record as `wanted` ([`TailRecord::same_record`]), reading at most `fetches` fetches.
///
/// The search starts at the first offset stamped at or after `wanted`'s timestamp (ListOffsets
/// by time), when that is past `from`: a copy keeps its original's create time, so nothing
/// before that offset can be it. `None` when no such record was found within the limits, or
/// `tp` has nothing there any more.
pub(super) async fn find_record(
    client: &Client,
    tp: &TopicPartition,
    wanted: &TailRecord,
    from: i64,
    until: i64,
    fetches: usize,
    options: &FetchOptions,
) -> Result<Option<i64>, FlowError> {
    let mut position = from;
    if let Some(ts) = wanted.timestamp {
        let stamped = client
            .list_offset(
                tp,
                OffsetSpec::Timestamp(ts),
                IsolationLevel::ReadUncommitted,
            )
            .await?
            .offset;
        if stamped < 0 {
            // Every record there is older than `wanted`.
            return Ok(None);
        }
        position = position.max(stamped);
    }
    for _ in 0..fetches {
        if position >= until {
            break;
        }
        let (records, next) = match mirrorable_records(client, tp, position, options).await {
            Ok(found) => found,
            Err(e) if is_out_of_range(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        for r in records.iter().take_while(|r| r.offset < until) {
            if r.same_record(wanted) {
                return Ok(Some(r.offset));
            }
        }
        if next <= position {
            break;
        }
        position = next;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    use strait_wire::BatchScanner;

    fn encode(
        offsets: &[i64],
        compression: Compression,
        timestamp_type: TimestampType,
    ) -> Vec<RawBatch> {
        let records: Vec<Record> = offsets
            .iter()
            .map(|&o| Record {
                transactional: false,
                control: false,
                partition_leader_epoch: 0,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type,
                offset: o,
                // The encoder keeps records in one batch while offset - sequence is constant.
                sequence: o as i32,
                timestamp: 1_000 + o,
                key: Some(Bytes::from(format!("k{o}"))),
                value: Some(Bytes::from(format!("v{o}"))),
                headers: Default::default(),
                delete_horizon: false,
            })
            .collect();
        let mut buf = BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression,
        };
        RecordBatchEncoder::encode(&mut buf, records.iter(), &options).unwrap();
        if timestamp_type == TimestampType::LogAppend {
            // The encoder leaves the batch's timestamp-type bit to the broker: set it, as a
            // broker would, and seal the batch again.
            buf[22] |= 0x08;
            let crc = strait_wire::batch::batch_crc(&buf).unwrap();
            buf[17..21].copy_from_slice(&crc.to_be_bytes());
        }
        BatchScanner::new(buf.freeze())
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn records_keep_their_offsets_and_create_times_and_start_at_from() {
        let batch = &encode(&[10, 11, 12, 13], Compression::Lz4, TimestampType::Creation)[0];
        let recs = records_from(batch, 12).unwrap();
        let offsets: Vec<_> = recs.iter().map(|r| r.offset).collect();
        assert_eq!(offsets, [12, 13]);
        assert_eq!(recs[0].timestamp, Some(1_012));
        assert_eq!(recs[0].value.as_deref(), Some(&b"v12"[..]));
    }

    #[test]
    fn the_same_records_in_another_codec_match() {
        let plain = &encode(&[5, 6], Compression::None, TimestampType::Creation)[0];
        let zstd = &encode(&[5, 6], Compression::Zstd, TimestampType::Creation)[0];
        assert_ne!(plain.bytes, zstd.bytes);
        let a = records_from(plain, 0).unwrap();
        let b = records_from(zstd, 0).unwrap();
        assert!(a.iter().zip(&b).all(|(x, y)| x.same_record(y)));
        assert!(!a[0].same_record(&b[1]), "different records do not match");
        assert_eq!(
            a[0].differences(&b[1]),
            "key, value, timestamp 1005 vs 1006"
        );
        assert_eq!(a[0].differences(&b[0]), "");
    }

    #[test]
    fn a_broker_set_time_is_not_compared() {
        let create = &encode(&[7], Compression::None, TimestampType::Creation)[0];
        let append = &encode(&[7], Compression::None, TimestampType::LogAppend)[0];
        let a = records_from(create, 0).unwrap();
        let b = records_from(append, 0).unwrap();
        assert_eq!(b[0].timestamp, None);
        assert!(a[0].same_record(&b[0]));
        let mut other = a[0].clone();
        other.timestamp = Some(1);
        assert!(
            !a[0].same_record(&other),
            "create times that differ do not match"
        );
    }
}
