//! Telling the batches of aborted transactions in a read_committed fetch, as Kafka's consumer
//! does (KIP-98): the answer lists the aborted transactions of the returned range as (producer
//! id, first offset); a transactional batch is aborted when its producer has such a transaction
//! starting at or before the batch and the producer's ABORT marker has not been passed yet. No
//! batch is decompressed.

use std::collections::{BTreeSet, HashSet};

use strait_wire::{ControlType, RawBatch};

use super::AbortedTransaction;

/// The aborted transactions of one fetched range, followed batch by batch in offset order.
#[derive(Debug, Default)]
pub struct AbortedBatches {
    /// Aborted transactions not yet reached, by first offset.
    upcoming: BTreeSet<(i64, i64)>,
    /// Producers whose current transaction is aborted.
    aborting: HashSet<i64>,
}

impl AbortedBatches {
    /// Starts from a fetch answer's aborted-transactions list (empty under read_uncommitted:
    /// then nothing is aborted).
    pub fn new(aborted: &[AbortedTransaction]) -> Self {
        Self {
            upcoming: aborted
                .iter()
                .map(|a| (a.first_offset, a.producer_id))
                .collect(),
            aborting: HashSet::new(),
        }
    }

    /// Whether `batch`, the next in offset order, belongs to an aborted transaction. A control
    /// batch never does, but an ABORT marker ends its producer's aborted transaction.
    pub fn is_aborted(&mut self, batch: &RawBatch) -> bool {
        let header = &batch.header;
        // Every aborted transaction that starts at or before this batch's last offset is open.
        while let Some(&(first, pid)) = self.upcoming.first() {
            if first > header.last_offset() {
                break;
            }
            self.upcoming.pop_first();
            self.aborting.insert(pid);
        }
        if header.attributes.is_control() {
            if batch.control_type() == Some(ControlType::Abort) {
                self.aborting.remove(&header.producer_id);
            }
            return false;
        }
        header.attributes.is_transactional() && self.aborting.contains(&header.producer_id)
    }
}
