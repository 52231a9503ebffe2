//! Transactions of several producers at once: librdkafka transactional producers driven step by
//! step, so that their transactions interleave in a partition (`rdk.py txn-steps`).

use serde::Serialize;

use crate::rdk::{Delivery, Rdk, WireRecordIn};
use crate::record::TestRecord;

impl Rdk {
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
        let input = serde_json::to_vec(&input).expect("steps serialize to JSON");
        let args: Vec<String> = ["txn-steps", "--bootstrap", bootstrap, "--topic", topic]
            .iter()
            .map(|a| (*a).to_owned())
            .collect();
        let deliveries: Vec<Vec<Delivery>> = self.run_json(&args, Some(input));
        deliveries
            .into_iter()
            .map(|step| step.into_iter().map(|d| (d.partition, d.offset)).collect())
            .collect()
    }
}

/// One step as `rdk.py txn-steps` reads it.
#[derive(Serialize)]
struct WireStep<'a> {
    producer: &'a str,
    op: &'a str,
    records: Vec<WireRecordIn<'a>>,
}
