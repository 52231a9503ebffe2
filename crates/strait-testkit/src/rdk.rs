//! An independent Kafka client for the ends of a test: librdkafka (PyPI confluent-kafka 2.16)
//! driven through `scripts/rdk.py`, so test data is written and checked by code that shares
//! nothing with strait.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::sync::Mutex;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::env;
use crate::record::TestRecord;

/// How long a group member may take to join its group and get an assignment.
const JOIN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a group member may take to leave its group once asked to.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `scripts/rdk.py` with the venv python. Every method panics, with the script's stderr,
/// when the operation fails.
#[derive(Debug, Clone)]
pub struct Rdk {
    python: PathBuf,
    script: PathBuf,
    /// librdkafka settings for every client, as JSON (`STRAIT_RDK_CONFIG`).
    client_config: Option<String>,
}

impl Default for Rdk {
    fn default() -> Self {
        Rdk::new()
    }
}

impl Rdk {
    /// Finds the python with confluent-kafka: `$STRAIT_TEST_PYTHON`, else
    /// `$STRAIT_CACHE/venv/bin/python`.
    ///
    /// # Panics
    ///
    /// If that python does not exist (run `scripts/test-broker venv`).
    pub fn new() -> Rdk {
        let python = env::python();
        if !python.is_file() {
            panic!(
                "test python not installed: run scripts/test-broker install (or scripts/test-broker venv); no python at {}",
                python.display()
            );
        }
        Rdk {
            python,
            script: env::scripts_dir().join("rdk.py"),
            client_config: None,
        }
    }

    /// The same client with librdkafka `settings` on every client it makes (e.g.
    /// `security.protocol`, `ssl.ca.location`, `sasl.mechanism`, `sasl.username`,
    /// `sasl.password`), for secured clusters.
    pub fn with_client_config(mut self, settings: &[(&str, &str)]) -> Rdk {
        let map: BTreeMap<&str, &str> = settings.iter().copied().collect();
        self.client_config = Some(serde_json::to_string(&map).expect("settings serialize"));
        self
    }

    /// Creates `topic` with `partitions` partitions (replication factor 1) and waits until
    /// metadata shows them all.
    pub fn create_topic(&self, bootstrap: &str, topic: &str, partitions: i32) {
        self.create_topic_with_configs(bootstrap, topic, partitions, &[]);
    }

    /// Like [`Rdk::create_topic`], with topic configs such as `("cleanup.policy", "compact")`.
    pub fn create_topic_with_configs(
        &self,
        bootstrap: &str,
        topic: &str,
        partitions: i32,
        configs: &[(&str, &str)],
    ) {
        let mut args = vec![
            "create-topic".to_owned(),
            "--bootstrap".to_owned(),
            bootstrap.to_owned(),
            "--topic".to_owned(),
            topic.to_owned(),
            "--partitions".to_owned(),
            partitions.to_string(),
        ];
        for (name, value) in configs {
            args.push("--config".to_owned());
            args.push(format!("{name}={value}"));
        }
        self.run(&args, None);
    }

    /// Produces `records` in order, each to its `partition`, with `acks=all`.
    /// `compression` is one of none, gzip, snappy, lz4, zstd. Returns `(partition, offset)`
    /// for each record.
    pub fn produce(
        &self,
        bootstrap: &str,
        topic: &str,
        records: &[TestRecord],
        compression: &str,
    ) -> Vec<(i32, i64)> {
        self.produce_with(bootstrap, topic, records, compression, false)
    }

    /// Like [`Rdk::produce`], with an idempotent producer (producer id and sequence numbers).
    pub fn produce_idempotent(
        &self,
        bootstrap: &str,
        topic: &str,
        records: &[TestRecord],
        compression: &str,
    ) -> Vec<(i32, i64)> {
        self.produce_with(bootstrap, topic, records, compression, true)
    }

    fn produce_with(
        &self,
        bootstrap: &str,
        topic: &str,
        records: &[TestRecord],
        compression: &str,
        idempotent: bool,
    ) -> Vec<(i32, i64)> {
        let input: Vec<WireRecordIn<'_>> = records.iter().map(WireRecordIn::from).collect();
        let input = serde_json::to_vec(&input).expect("records serialize to JSON");
        let mut args = vec![
            "produce".to_owned(),
            "--bootstrap".to_owned(),
            bootstrap.to_owned(),
            "--topic".to_owned(),
            topic.to_owned(),
            "--compression".to_owned(),
            compression.to_owned(),
        ];
        if idempotent {
            args.push("--idempotent".to_owned());
        }
        let deliveries: Vec<Delivery> = self.run_json(&args, Some(input));
        deliveries
            .into_iter()
            .map(|d| (d.partition, d.offset))
            .collect()
    }

    /// Reads all partitions of `topic` from the beginning, without a consumer group, until
    /// `count` records arrived. Records come sorted by partition, then offset.
    ///
    /// # Panics
    ///
    /// If fewer than `count` records arrive within `timeout`.
    pub fn consume(
        &self,
        bootstrap: &str,
        topic: &str,
        count: usize,
        timeout: Duration,
    ) -> Vec<TestRecord> {
        let args = [
            "consume".to_owned(),
            "--bootstrap".to_owned(),
            bootstrap.to_owned(),
            "--topic".to_owned(),
            topic.to_owned(),
            "--count".to_owned(),
            count.to_string(),
            "--timeout".to_owned(),
            timeout.as_secs_f64().to_string(),
        ];
        let records: Vec<WireRecordOut> = self.run_json(&args, None);
        records.into_iter().map(TestRecord::from).collect()
    }

    /// A consumer in `group` subscribed to `topic` reads from the group's committed offsets
    /// (the earliest where it has none) at most `max` records (`None`: up to the end of every
    /// partition), commits what it read, and leaves. Records come in the order read.
    ///
    /// # Panics
    ///
    /// If the end is not reached (`max` = `None`) or the commit fails within `timeout`.
    pub fn group_consume(
        &self,
        bootstrap: &str,
        group: &str,
        topic: &str,
        max: Option<usize>,
        timeout: Duration,
    ) -> Vec<TestRecord> {
        let timeout = timeout.as_secs_f64().to_string();
        let mut args = group_args(
            "group-consume",
            bootstrap,
            group,
            topic,
            &["--timeout", &timeout],
        );
        if let Some(max) = max {
            args.extend(["--max".to_owned(), max.to_string()]);
        }
        let records: Vec<WireRecordOut> = self.run_json(&args, None);
        records.into_iter().map(TestRecord::from).collect()
    }

    /// Starts a consumer that joins `group` subscribed to `topic` with the classic group
    /// protocol and returns once it has an assignment, so the group is active (Stable). It stays
    /// in the group until dropped.
    pub fn group_member(&self, bootstrap: &str, group: &str, topic: &str) -> GroupMember {
        GroupMember::start(self, bootstrap, group, topic, GroupProtocol::Classic)
    }

    /// [`Rdk::group_member`] with the given group protocol: with
    /// [`GroupProtocol::Consumer`] the group is a KIP-848 group, which Kafka's DescribeGroups
    /// does not see.
    pub fn group_member_with(
        &self,
        bootstrap: &str,
        group: &str,
        topic: &str,
        protocol: GroupProtocol,
    ) -> GroupMember {
        GroupMember::start(self, bootstrap, group, topic, protocol)
    }

    /// Commits `offsets` (`(partition, offset)`) for `group` without joining it. The broker
    /// accepts this only while the group has no members.
    pub fn commit(&self, bootstrap: &str, group: &str, topic: &str, offsets: &[(i32, i64)]) {
        let list = offsets
            .iter()
            .map(|(p, o)| format!("{p}:{o}"))
            .collect::<Vec<_>>()
            .join(",");
        let args = group_args("commit", bootstrap, group, topic, &["--offsets", &list]);
        self.run(&args, None);
    }

    /// The committed offsets of `group` for `partitions` of `topic`; partitions without a
    /// committed offset are left out.
    pub fn committed(
        &self,
        bootstrap: &str,
        group: &str,
        topic: &str,
        partitions: &[i32],
    ) -> BTreeMap<i32, i64> {
        let list = partitions
            .iter()
            .map(i32::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let args = group_args(
            "committed",
            bootstrap,
            group,
            topic,
            &["--partitions", &list],
        );
        let offsets: BTreeMap<i32, Option<i64>> = self.run_json(&args, None);
        offsets
            .into_iter()
            .filter_map(|(p, o)| o.map(|o| (p, o)))
            .collect()
    }

    fn command(&self, args: &[String]) -> Command {
        let mut command = Command::new(&self.python);
        command.arg(&self.script).args(args);
        if let Some(settings) = &self.client_config {
            command.env("STRAIT_RDK_CONFIG", settings);
        }
        command
    }

    fn describe(args: &[String]) -> String {
        let mut text = String::from("rdk.py");
        for arg in args {
            let _ = write!(text, " {arg}");
        }
        text
    }

    /// Runs rdk.py with `args`, feeding `stdin`; returns stdout or panics with stderr. The
    /// command runs in a long-lived `rdk.py serve` process (Python and librdkafka started once
    /// per test, not once per call): an idle one from [`SERVERS`], else a new one, given back
    /// when the call is answered. Calls made at the same time get processes of their own.
    fn run(&self, args: &[String], stdin: Option<Vec<u8>>) -> Vec<u8> {
        let idle = SERVERS.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut server = match idle {
            Some(server) => server,
            None => Server::start(&self.python, &self.script),
        };
        let request = ServeRequest {
            args,
            stdin: stdin.map(|bytes| String::from_utf8(bytes).expect("rdk.py input is JSON text")),
            config: self.client_config.as_deref(),
        };
        let answer = server
            .call(&request)
            .unwrap_or_else(|e| panic!("{}: rdk.py serve failed: {e}", Self::describe(args)));
        SERVERS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(server);
        if answer.code != 0 {
            panic!(
                "{} failed (exit status: {}):\n{}",
                Self::describe(args),
                answer.code,
                answer.stderr
            );
        }
        answer.stdout.into_bytes()
    }

    pub(crate) fn run_json<T: for<'de> Deserialize<'de>>(
        &self,
        args: &[String],
        stdin: Option<Vec<u8>>,
    ) -> T {
        let stdout = self.run(args, stdin);
        serde_json::from_slice(&stdout).unwrap_or_else(|e| {
            panic!(
                "{} printed unexpected output ({e}):\n{}",
                Self::describe(args),
                String::from_utf8_lossy(&stdout)
            )
        })
    }
}

/// Idle `rdk.py serve` processes of this test process. Each ends when its stdin closes, which
/// is when the test process exits.
static SERVERS: Mutex<Vec<Server>> = Mutex::new(Vec::new());

/// One line to `rdk.py serve`: a command as its arguments, its standard input, and the
/// client settings (`STRAIT_RDK_CONFIG`).
#[derive(Serialize)]
struct ServeRequest<'a> {
    args: &'a [String],
    stdin: Option<String>,
    config: Option<&'a str>,
}

/// `rdk.py serve`'s answer to a command: its exit code and output.
#[derive(Deserialize)]
struct ServeAnswer {
    code: i32,
    stdout: String,
    stderr: String,
}

/// A running `rdk.py serve`. librdkafka's own log lines are copied to the test's stderr by a
/// thread (not inherited: a process that keeps the test's stderr open past the test's end
/// looks like a leak to the runner).
struct Server {
    _child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Server {
    fn start(python: &std::path::Path, script: &std::path::Path) -> Server {
        let mut child = Command::new(python)
            .arg(script)
            .arg("serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {} serve: {e}", script.display()));
        let stderr = child.stderr.take().expect("stderr is piped");
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("rdk.py serve: {line}");
            }
        });
        Server {
            stdin: child.stdin.take().expect("stdin is piped"),
            stdout: BufReader::new(child.stdout.take().expect("stdout is piped")),
            _child: child,
        }
    }

    fn call(&mut self, request: &ServeRequest<'_>) -> std::io::Result<ServeAnswer> {
        let mut line = serde_json::to_vec(request)?;
        line.push(b'\n');
        self.stdin.write_all(&line)?;
        self.stdin.flush()?;
        let mut answer = String::new();
        if self.stdout.read_line(&mut answer)? == 0 {
            return Err(std::io::Error::other("it exited"));
        }
        Ok(serde_json::from_str(&answer)?)
    }
}

/// How a consumer takes part in its group (`group.protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupProtocol {
    /// JoinGroup, SyncGroup and Heartbeat, assignment by the group's leader.
    Classic,
    /// Kafka 4's consumer protocol (KIP-848): ConsumerGroupHeartbeat, assignment by the broker.
    Consumer,
}

/// A running consumer group member (see [`Rdk::group_member`]). Dropping it closes the
/// consumer, which leaves the group at once.
#[derive(Debug)]
pub struct GroupMember {
    child: Child,
    stdin: Option<ChildStdin>,
    stderr: Option<JoinHandle<String>>,
    group: String,
}

impl GroupMember {
    fn start(
        rdk: &Rdk,
        bootstrap: &str,
        group: &str,
        topic: &str,
        protocol: GroupProtocol,
    ) -> GroupMember {
        let protocol = match protocol {
            GroupProtocol::Classic => "classic",
            GroupProtocol::Consumer => "consumer",
        };
        let args = group_args(
            "group-member",
            bootstrap,
            group,
            topic,
            &["--protocol", protocol],
        );
        let mut child = rdk
            .command(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", rdk.python.display()));
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut stderr = child.stderr.take().expect("stderr is piped");
        let stderr = thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        let (ready_tx, ready_rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(line) if line.trim() == "READY" => {
                        let _ = ready_tx.send(());
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        });
        let mut member = GroupMember {
            stdin: child.stdin.take(),
            child,
            stderr: Some(stderr),
            group: group.to_owned(),
        };
        if ready_rx.recv_timeout(JOIN_TIMEOUT).is_err() {
            // Timed out, or the script exited before READY.
            let _ = member.child.kill();
            let _ = member.child.wait();
            let stderr = member.take_stderr();
            panic!(
                "{} did not get an assignment within {JOIN_TIMEOUT:?}:\n{stderr}",
                Rdk::describe(&args)
            );
        }
        member
    }

    /// The group this member joined.
    pub fn group(&self) -> &str {
        &self.group
    }

    fn take_stderr(&mut self) -> String {
        self.stderr
            .take()
            .and_then(|handle| handle.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for GroupMember {
    fn drop(&mut self) {
        // Closing stdin asks the script to close its consumer, which sends LeaveGroup.
        drop(self.stdin.take());
        let deadline = Instant::now() + LEAVE_TIMEOUT;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    if !status.success() {
                        let stderr = self.take_stderr();
                        eprintln!(
                            "strait-testkit: group member of {} exited with {status}:\n{stderr}",
                            self.group
                        );
                    }
                    break;
                }
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
                _ => {
                    eprintln!(
                        "strait-testkit: group member of {} did not leave within {LEAVE_TIMEOUT:?}; killing it",
                        self.group
                    );
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break;
                }
            }
        }
    }
}

/// A record as `rdk.py produce` and `produce-txn` read it.
#[derive(Serialize)]
pub(crate) struct WireRecordIn<'a> {
    partition: i32,
    key: Option<String>,
    value: Option<String>,
    headers: Vec<(&'a str, Option<String>)>,
    timestamp: Option<i64>,
}

impl<'a> From<&'a TestRecord> for WireRecordIn<'a> {
    fn from(record: &'a TestRecord) -> Self {
        WireRecordIn {
            partition: record.partition,
            key: record.key.as_deref().map(|k| BASE64.encode(k)),
            value: record.value.as_deref().map(|v| BASE64.encode(v)),
            headers: record
                .headers
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_deref().map(|v| BASE64.encode(v))))
                .collect(),
            timestamp: record.timestamp_ms,
        }
    }
}

/// One `rdk.py produce` or `produce-txn` result.
#[derive(Deserialize)]
pub(crate) struct Delivery {
    pub(crate) partition: i32,
    pub(crate) offset: i64,
}

/// A record as `rdk.py consume` prints it.
#[derive(Deserialize)]
struct WireRecordOut {
    partition: i32,
    offset: i64,
    key: Option<String>,
    value: Option<String>,
    headers: Vec<(String, Option<String>)>,
    /// librdkafka's (timestamp type, ms); type 0 means not available.
    timestamp: (i32, i64),
}

fn decode(text: Option<String>) -> Option<Vec<u8>> {
    text.map(|t| {
        BASE64
            .decode(t.as_bytes())
            .unwrap_or_else(|e| panic!("rdk.py printed invalid base64 {t:?}: {e}"))
    })
}

impl From<WireRecordOut> for TestRecord {
    fn from(record: WireRecordOut) -> Self {
        let (timestamp_type, timestamp_ms) = record.timestamp;
        TestRecord {
            partition: record.partition,
            offset: Some(record.offset),
            key: decode(record.key),
            value: decode(record.value),
            headers: record
                .headers
                .into_iter()
                .map(|(name, value)| (name, decode(value)))
                .collect(),
            timestamp_ms: (timestamp_type != 0).then_some(timestamp_ms),
        }
    }
}

/// The arguments of an rdk.py group command: `command --bootstrap B --group G --topic T`, then
/// `more`.
fn group_args(
    command: &str,
    bootstrap: &str,
    group: &str,
    topic: &str,
    more: &[&str],
) -> Vec<String> {
    [
        command,
        "--bootstrap",
        bootstrap,
        "--group",
        group,
        "--topic",
        topic,
    ]
    .iter()
    .chain(more)
    .map(|s| (*s).to_owned())
    .collect()
}
