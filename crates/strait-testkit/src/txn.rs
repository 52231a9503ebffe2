//! Transactional source data: a librdkafka transactional producer that commits and aborts.
//! Apache Kafka writes a commit or abort marker after each transaction, at an offset of its own,
//! and lists aborted transactions in READ_COMMITTED fetch answers.

use serde::Serialize;

use crate::rdk::{Delivery, Rdk, WireRecordIn};
use crate::record::TestRecord;

impl Rdk {
    /// Runs `txns` in order with one transactional producer (a fresh `transactional.id`):
    /// for each, `begin_transaction`, produce its records (each to its `partition`), flush, then
    /// `commit_transaction` when its flag is `true`, else `abort_transaction`. Returns the
    /// `(partition, offset)` of every record, per transaction, aborted ones included.
    ///
    /// # Panics
    ///
    /// If any step fails, with the script's stderr.
    pub fn produce_transactions(
        &self,
        bootstrap: &str,
        topic: &str,
        txns: &[(Vec<TestRecord>, bool)],
    ) -> Vec<Vec<(i32, i64)>> {
        let input: Vec<WireTxn<'_>> = txns
            .iter()
            .map(|(records, commit)| WireTxn {
                commit: *commit,
                records: records.iter().map(WireRecordIn::from).collect(),
            })
            .collect();
        let input = serde_json::to_vec(&input).expect("transactions serialize to JSON");
        let args: Vec<String> = ["produce-txn", "--bootstrap", bootstrap, "--topic", topic]
            .iter()
            .map(|a| (*a).to_owned())
            .collect();
        let deliveries: Vec<Vec<Delivery>> = self.run_json(&args, Some(input));
        deliveries
            .into_iter()
            .map(|txn| txn.into_iter().map(|d| (d.partition, d.offset)).collect())
            .collect()
    }
}

/// One transaction as `rdk.py produce-txn` reads it.
#[derive(Serialize)]
struct WireTxn<'a> {
    commit: bool,
    records: Vec<WireRecordIn<'a>>,
}
