//! Two Apache Kafka clusters on loopback: the pair shared by a whole test run
//! ([`Clusters::shared`], started once by `scripts/test`), or a pair of a test's own
//! ([`Clusters::start`], started by `scripts/test-broker start` and killed on drop), which can be
//! stopped, killed and started again (`stop-one`, `start-one`) to show outages.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::brokers::{self, BrokerSet};
use crate::env;

/// The environment variable that names the shared pair's directory (its `clusters.env`), set by
/// `scripts/test` for the whole run.
pub const SHARED_CLUSTERS_ENV: &str = "STRAIT_TEST_CLUSTERS";

/// One running broker: a single-node Kafka cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broker {
    /// "source" or "target" (or "secure" for a [`crate::SecureBroker`]).
    pub name: String,
    /// `127.0.0.1:PORT`, for `bootstrap.servers`.
    pub bootstrap: String,
    /// Process id of the broker (of its latest start: stale while it is stopped).
    pub pid: u32,
    /// The broker's log file (stdout and stderr).
    pub log: PathBuf,
}

impl Broker {
    /// Sends an ApiVersions v0 request and checks the answer carries our correlation id and no
    /// error: the broker is up and speaks Kafka.
    pub fn check_api_versions(&self) -> io::Result<()> {
        const CORRELATION_ID: i32 = 0x5742;
        let addr: SocketAddr = self
            .bootstrap
            .parse()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        let client_id = b"strait-testkit";
        // Request header v1: api key 18 (ApiVersions), version 0, correlation id, client id.
        let mut body = Vec::new();
        body.extend_from_slice(&18i16.to_be_bytes());
        body.extend_from_slice(&0i16.to_be_bytes());
        body.extend_from_slice(&CORRELATION_ID.to_be_bytes());
        body.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
        body.extend_from_slice(client_id);
        let mut request = (body.len() as i32).to_be_bytes().to_vec();
        request.extend_from_slice(&body);
        stream.write_all(&request)?;
        // Response: size, correlation id, error code, ...
        let mut head = [0u8; 10];
        stream.read_exact(&mut head)?;
        let correlation_id = i32::from_be_bytes([head[4], head[5], head[6], head[7]]);
        let error_code = i16::from_be_bytes([head[8], head[9]]);
        if correlation_id != CORRELATION_ID {
            return Err(io::Error::other(format!(
                "ApiVersions answer has correlation id {correlation_id}, expected {CORRELATION_ID}"
            )));
        }
        if error_code != 0 {
            return Err(io::Error::other(format!(
                "ApiVersions answer has error code {error_code}"
            )));
        }
        Ok(())
    }

    /// The last `lines` lines of the broker's log.
    pub fn log_tail(&self, lines: usize) -> String {
        crate::env::log_tail(&self.log, lines)
    }

    /// The last `lines` WARN, ERROR and FATAL lines of the broker's log (where a failing test
    /// looks first: the tail of a stopped broker's log is its shutdown).
    pub fn log_problems(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let problems: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("] WARN ") || l.contains("] ERROR ") || l.contains("] FATAL "))
            .collect();
        problems[problems.len().saturating_sub(lines)..].join("\n")
    }
}

/// Topic configs under which Kafka's log cleaner compacts a topic within a few seconds, for
/// tests that need holes in a compacted log: segments roll every 100 ms (on the next append, so
/// write in several calls), any dirty share qualifies, records may be compacted at once, and a
/// segment is cleaned at the latest 100 ms after it was written. The active segment (the last
/// records written) is never cleaned, as in any Kafka.
pub const QUICK_COMPACTION: &[(&str, &str)] = &[
    ("cleanup.policy", "compact"),
    ("segment.ms", "100"),
    ("min.cleanable.dirty.ratio", "0.01"),
    ("min.compaction.lag.ms", "0"),
    ("max.compaction.lag.ms", "100"),
    ("delete.retention.ms", "100"),
];

/// What the brokers of [`Clusters::start_with`] get on top of `scripts/kafka/broker.properties`.
#[derive(Debug, Clone, Default)]
pub struct ClusterOptions {
    /// Broker properties, added after the base file (a later key wins). `@PORT@`,
    /// `@CONTROLLER_PORT@` and `@INTERNAL_PORT@` in a value stand for the broker's ports.
    pub properties: Vec<(String, String)>,
    /// Arguments for `kafka-storage format`, e.g. `--add-scram` and its value.
    pub format_args: Vec<String>,
    /// Options for the brokers' JVMs (system properties such as
    /// `-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=...`), kept for restarts.
    pub jvm_options: Vec<String>,
}

impl ClusterOptions {
    /// Adds an option to the brokers' JVM command line.
    pub fn jvm_option(mut self, option: &str) -> ClusterOptions {
        self.jvm_options.push(option.to_owned());
        self
    }

    /// Adds a broker property.
    pub fn property(mut self, key: &str, value: &str) -> ClusterOptions {
        self.properties.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Kafka's `StandardAuthorizer`, with the test clients (`User:ANONYMOUS` on the plaintext
    /// listeners) as super users: ACLs can be created, listed and deleted, and nothing is denied.
    pub fn with_authorizer(self) -> ClusterOptions {
        self.property(
            "authorizer.class.name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        )
        .property("super.users", "User:ANONYMOUS")
    }
}

/// One of the two brokers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// The cluster strait replicates from.
    Source,
    /// The cluster strait replicates to.
    Target,
}

impl Which {
    fn as_arg(self) -> &'static str {
        match self {
            Which::Source => "source",
            Which::Target => "target",
        }
    }
}

/// Two independent single-broker Apache Kafka clusters, "source" and "target", with their data
/// on disk.
///
/// A pair of the test's own ([`Clusters::start`]) can be stopped, killed and started again with
/// its data; dropping it kills both brokers (their data is thrown away) and removes their
/// directory. If the test is panicking, the directory is kept and the brokers' last warnings are
/// printed. A watchdog started with the brokers also kills them if the test process dies without
/// dropping this.
///
/// The shared pair ([`Clusters::shared`]) serves every test of a run at once: such a test names
/// its topics, groups and cluster aliases with [`crate::Names`], and never stops a broker.
#[derive(Debug)]
pub struct Clusters {
    /// The cluster strait replicates from.
    pub source: Broker,
    /// The cluster strait replicates to.
    pub target: Broker,
    owner: Owner,
}

/// Who the brokers belong to.
#[derive(Debug)]
enum Owner {
    /// Started for this test, killed on drop.
    Own(BrokerSet),
    /// The run's shared pair; `scratch` is this test's own directory for files (configs, logs),
    /// removed on drop unless the test panicked.
    Shared { scratch: PathBuf },
}

impl Clusters {
    /// Starts both brokers and waits until each is up.
    ///
    /// # Panics
    ///
    /// If Kafka is not installed (run `scripts/test-broker install`), or if the brokers do not
    /// start; the message carries the script's output.
    pub fn start() -> Clusters {
        Clusters::start_with(ClusterOptions::default())
    }

    /// Starts both brokers with `options` and waits until each is up.
    ///
    /// # Panics
    ///
    /// As [`Clusters::start`].
    pub fn start_with(options: ClusterOptions) -> Clusters {
        let set = BrokerSet::start("strait-test", &["source", "target"], &options);
        Clusters {
            source: set.brokers[0].clone(),
            target: set.brokers[1].clone(),
            owner: Owner::Own(set),
        }
    }

    /// The pair shared by the whole run: the clusters named by `$STRAIT_TEST_CLUSTERS` (a
    /// directory written by `scripts/test-broker start`, as `scripts/test` does once per run),
    /// else a pair of the test's own ([`Clusters::start`]), so a test run by hand still runs.
    ///
    /// Other tests use the same brokers at the same time: name every topic, group and cluster
    /// alias with [`crate::Names`], give every flow a `topics` and `groups` filter of them, and
    /// never stop, kill or restart a broker (those methods panic here).
    ///
    /// # Panics
    ///
    /// If `$STRAIT_TEST_CLUSTERS` is set but its brokers cannot be read or do not answer.
    pub fn shared() -> Clusters {
        let Some(dir) = std::env::var_os(SHARED_CLUSTERS_ENV).filter(|d| !d.is_empty()) else {
            return Clusters::start();
        };
        let dir = PathBuf::from(dir);
        let mut found = brokers::read_brokers(&dir, &["source", "target"]);
        let target = found.pop().expect("two brokers");
        let source = found.pop().expect("two brokers");
        for broker in [&source, &target] {
            if let Err(e) = broker.check_api_versions() {
                panic!(
                    "the shared {} cluster ({}, {}) does not answer: {e}; last warnings:\n{}",
                    broker.name,
                    broker.bootstrap,
                    dir.display(),
                    broker.log_problems(15)
                );
            }
        }
        Clusters {
            source,
            target,
            owner: Owner::Shared {
                scratch: env::unique_dir("strait-shared-test"),
            },
        }
    }

    /// Whether these are the run's shared clusters.
    pub fn is_shared(&self) -> bool {
        matches!(self.owner, Owner::Shared { .. })
    }

    /// One broker.
    pub fn broker(&self, which: Which) -> &Broker {
        match which {
            Which::Source => &self.source,
            Which::Target => &self.target,
        }
    }

    /// Stops one broker (SIGTERM: Kafka's controlled shutdown, SIGKILL after 20 s) and returns
    /// once its process is gone. Clients of it then see refused connections until
    /// [`Clusters::start_broker`]. It blocks: from async code, call it inside
    /// `tokio::task::block_in_place` or `spawn_blocking`.
    ///
    /// # Panics
    ///
    /// If the script fails.
    pub fn stop_broker(&mut self, which: Which) {
        self.run_one("stop-one", which, &[]);
    }

    /// Kills one broker at once (SIGKILL: a crash, no controlled shutdown, nothing flushed that
    /// the OS does not keep) and returns once its process is gone. Blocks, as
    /// [`Clusters::stop_broker`].
    ///
    /// # Panics
    ///
    /// If the script fails.
    pub fn kill_broker(&mut self, which: Which) {
        self.run_one("stop-one", which, &["--grace", "0"]);
    }

    /// Starts a stopped broker again, on the same ports with its data, and returns once it is
    /// up. Updates its [`Broker::pid`]. Blocks, as [`Clusters::stop_broker`].
    ///
    /// # Panics
    ///
    /// If the broker is running, or does not come back; the message carries its log's tail.
    pub fn start_broker(&mut self, which: Which) {
        self.run_one("start-one", which, &[]);
    }

    /// [`Clusters::stop_broker`], a wait of `down`, then [`Clusters::start_broker`] (a graceful
    /// stop: see [`Clusters::kill_broker`] for a crash).
    ///
    /// # Panics
    ///
    /// As those.
    pub fn restart_broker(&mut self, which: Which, down: Duration) {
        let down = format!("{:.3}", down.as_secs_f64());
        self.run_one("restart", which, &["--down-seconds", &down]);
    }

    fn run_one(&mut self, command: &str, which: Which, extra: &[&str]) {
        let Owner::Own(set) = &mut self.owner else {
            panic!(
                "{command} of the {} broker: the shared clusters serve other tests at the same \
                 time; a test that stops, kills or restarts a broker starts its own \
                 (Clusters::start)",
                which.as_arg()
            );
        };
        set.run_one(command, which.as_arg(), extra);
        self.source = set.brokers[0].clone();
        self.target = set.brokers[1].clone();
    }

    /// A directory of this test's for files: for a pair of its own, the one holding
    /// `clusters.env`, the brokers' properties, logs and data; for the shared pair, a scratch
    /// directory of its own.
    pub fn dir(&self) -> &Path {
        match &self.owner {
            Owner::Own(set) => set.dir(),
            Owner::Shared { scratch } => scratch,
        }
    }
}

impl Drop for Clusters {
    fn drop(&mut self) {
        if let Owner::Shared { scratch } = &self.owner {
            if std::thread::panicking() {
                for broker in [&self.source, &self.target] {
                    eprintln!(
                        "strait-testkit: the shared {} cluster's last warnings and errors ({}):\n{}",
                        broker.name,
                        broker.log.display(),
                        broker.log_problems(15)
                    );
                }
                eprintln!("strait-testkit: kept {}", scratch.display());
            } else {
                let _ = std::fs::remove_dir_all(scratch);
            }
        }
    }
}
