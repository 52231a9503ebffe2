//! What to do with each fetched batch: forward it unopened, skip it, or rebuild it
//! (`docs/design.md` §3.2).
//!
//! Skipped: control batches (transaction markers; clients may not write them) and, under
//! read_committed, the batches of aborted transactions, told as Kafka's consumer tells them
//! (`strait_kafka::fetch::AbortedBatches`), without decompressing anything.
//!
//! Rebuilt: batches the broker would refuse as they are, i.e. compacted batches whose offsets
//! have holes (`lastOffsetDelta + 1 != recordCount`).

use strait_kafka::fetch::{AbortedBatches, AbortedTransaction};
use strait_wire::RawBatch;

/// Why a source range is not mirrored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// A transaction marker (commit or abort).
    ControlBatch,
    /// A batch of an aborted transaction.
    Aborted,
}

/// The decision for one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Produce as it is (header rewritten only).
    Forward(RawBatch),
    /// Produce after decoding and re-encoding it densely.
    Rebuild(RawBatch),
    /// Mirror nothing for the source offsets `from..to`.
    Skip {
        /// First skipped offset.
        from: i64,
        /// One past the last skipped offset.
        to: i64,
        /// Why.
        reason: SkipReason,
    },
}

impl Action {
    /// The source offset after this batch.
    pub fn next_offset(&self) -> i64 {
        match self {
            Action::Forward(b) | Action::Rebuild(b) => b.header.next_offset(),
            Action::Skip { to, .. } => *to,
        }
    }
}

/// Classifies the batches of one fetched range, following its aborted transactions.
#[derive(Debug, Default)]
pub struct AbortTracker {
    aborted: AbortedBatches,
}

impl AbortTracker {
    /// Starts from a fetch response's aborted-transactions list.
    pub fn new(aborted: &[AbortedTransaction]) -> Self {
        Self {
            aborted: AbortedBatches::new(aborted),
        }
    }

    /// Decides for one batch, in offset order.
    pub fn classify(&mut self, batch: RawBatch) -> Action {
        let aborted = self.aborted.is_aborted(&batch);
        let header = batch.header;
        let (from, to) = (header.base_offset, header.next_offset());
        if header.attributes.is_control() {
            return Action::Skip {
                from,
                to,
                reason: SkipReason::ControlBatch,
            };
        }
        if aborted {
            return Action::Skip {
                from,
                to,
                reason: SkipReason::Aborted,
            };
        }
        if header.is_dense() {
            Action::Forward(batch)
        } else {
            Action::Rebuild(batch)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    use strait_wire::BatchScanner;

    fn batch(base: i64, n: i64, pid: i64, transactional: bool, control: Option<i16>) -> RawBatch {
        let records: Vec<Record> = (0..n)
            .map(|i| Record {
                transactional,
                control: control.is_some(),
                partition_leader_epoch: 0,
                producer_id: pid,
                producer_epoch: 0,
                timestamp_type: TimestampType::Creation,
                offset: base + i,
                // The encoder keeps records in one batch while offset - sequence is constant.
                sequence: i as i32,
                timestamp: 1000 + i,
                key: control.map(|kind| {
                    let mut k = vec![0u8, 0];
                    k.extend_from_slice(&kind.to_be_bytes());
                    Bytes::from(k)
                }),
                value: Some(Bytes::from_static(b"v")),
                headers: Default::default(),
                delete_horizon: false,
            })
            .collect();
        let mut buf = BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        RecordBatchEncoder::encode(&mut buf, records.iter(), &options).unwrap();
        BatchScanner::new(buf.freeze()).next().unwrap().unwrap()
    }

    #[test]
    fn aborted_batches_and_markers_are_skipped_committed_ones_forwarded() {
        // offsets: 0-2 txn A (pid 1, aborted), 3-4 txn B (pid 2, committed), 5 abort marker A,
        // 6 commit marker B, 7-8 plain, 9-10 pid 1 again in a new, committed transaction.
        let batches = vec![
            batch(0, 3, 1, true, None),
            batch(3, 2, 2, true, None),
            batch(5, 1, 1, true, Some(0)),
            batch(6, 1, 2, true, Some(1)),
            batch(7, 2, -1, false, None),
            batch(9, 2, 1, true, None),
        ];
        let mut tracker = AbortTracker::new(&[AbortedTransaction {
            producer_id: 1,
            first_offset: 0,
        }]);
        let actions: Vec<_> = batches.into_iter().map(|b| tracker.classify(b)).collect();
        let kinds: Vec<_> = actions
            .iter()
            .map(|a| match a {
                Action::Forward(b) => format!("fwd {}", b.header.base_offset),
                Action::Rebuild(b) => format!("rebuild {}", b.header.base_offset),
                Action::Skip { from, reason, .. } => format!("skip {from} {reason:?}"),
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "skip 0 Aborted",
                "fwd 3",
                "skip 5 ControlBatch",
                "skip 6 ControlBatch",
                "fwd 7",
                "fwd 9",
            ]
        );
        let ends: Vec<_> = actions.iter().map(Action::next_offset).collect();
        assert_eq!(ends, [3, 5, 6, 7, 9, 11]);
    }

    #[test]
    fn without_an_aborted_list_transactional_data_is_forwarded() {
        // read_uncommitted, or a broker that sends no list: nothing is judged aborted.
        let mut tracker = AbortTracker::new(&[]);
        assert!(matches!(
            tracker.classify(batch(0, 2, 4, true, None)),
            Action::Forward(_)
        ));
    }
}
