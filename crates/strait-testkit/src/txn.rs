//! Transactional source data: a librdkafka transactional producer that commits and aborts, and
//! several producers driven step by step so that their transactions interleave in a partition
//! (`rdk.py produce-txn`, `rdk.py txn-steps`).
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
        self.run_offsets("produce-txn", bootstrap, topic, &input)
    }

    /// Runs `steps` in order against `topic`. A step is `(producer, op, records)`: the
    /// producer's name (each name is a transactional producer of its own, with a fresh
    /// `transactional.id`, made at its first step), and the op, one of `"begin"`
    /// (`begin_transaction`), `"produce"` (produce `records`, each to its partition, and flush
    /// them, so they are in the log before the next step), `"commit"` (`commit_transaction`) and
    /// `"abort"` (`abort_transaction`); `records` is empty but for `"produce"`.
    ///
    /// Returns, per step, the `(partition, offset)` of each record it produced (empty for the
    /// other steps).
    ///
    /// # Panics
    ///
    /// If any step fails, with the script's stderr.
    pub fn transaction_steps(
        &self,
        bootstrap: &str,
        topic: &str,
        steps: &[(&str, &str, Vec<TestRecord>)],
    ) -> Vec<Vec<(i32, i64)>> {
        let input: Vec<WireStep<'_>> = steps
            .iter()
            .map(|(producer, op, records)| WireStep {
                producer,
                op,
                records: records.iter().map(WireRecordIn::from).collect(),
            })
            .collect();
        self.run_offsets("txn-steps", bootstrap, topic, &input)
    }

    /// Runs `rdk.py COMMAND --bootstrap B --topic T` with `input` as JSON on stdin, and returns
    /// the `(partition, offset)` of each record, per transaction or step.
    fn run_offsets(
        &self,
        command: &str,
        bootstrap: &str,
        topic: &str,
        input: &impl Serialize,
    ) -> Vec<Vec<(i32, i64)>> {
        let input = serde_json::to_vec(input).expect("transactions serialize to JSON");
        let args: Vec<String> = [command, "--bootstrap", bootstrap, "--topic", topic]
            .iter()
            .map(|a| (*a).to_owned())
            .collect();
        let deliveries: Vec<Vec<Delivery>> = self.run_json(&args, Some(input));
        deliveries
            .into_iter()
            .map(|one| one.into_iter().map(|d| (d.partition, d.offset)).collect())
            .collect()
    }
}

/// One transaction as `rdk.py produce-txn` reads it.
#[derive(Serialize)]
struct WireTxn<'a> {
    commit: bool,
    records: Vec<WireRecordIn<'a>>,
}

/// One step as `rdk.py txn-steps` reads it.
#[derive(Serialize)]
struct WireStep<'a> {
    producer: &'a str,
    op: &'a str,
    records: Vec<WireRecordIn<'a>>,
}
