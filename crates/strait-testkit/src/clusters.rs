//! Two real brokers on loopback, started by `scripts/test-broker start` and stopped on drop;
//! either can be stopped and started again (`stop-one`, `start-one`) to show outages.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::env;

/// One running broker: a single-node Kafka cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broker {
    /// "source" or "target"; also the broker's cluster id.
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
}

/// Where the brokers keep their data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Storage {
    /// In RAM (fast); a broker stopped and started again comes back empty.
    #[default]
    Memory,
    /// In a sqlite file in the broker's working directory: survives a restart, several times
    /// slower. When it starts, the broker applies time retention (`retention.ms`, 7 days by
    /// default) to the records' timestamps: records stamped older than that are gone after a
    /// restart, so tests that restart must use recent timestamps (or set `retention.ms`).
    Sqlite,
}

impl Storage {
    fn as_arg(self) -> &'static str {
        match self {
            Storage::Memory => "memory",
            Storage::Sqlite => "sqlite",
        }
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

/// Two independent single-broker clusters, "source" and "target", with in-memory storage
/// ([`Clusters::start`]) or sqlite storage that survives a broker restart
/// ([`Clusters::start_with`]).
///
/// Dropping it stops both brokers and removes their directory. If the test is panicking, the
/// directory is kept and the tails of both logs are printed. A watchdog started with the brokers
/// also stops them if the test process dies without dropping this.
#[derive(Debug)]
pub struct Clusters {
    /// The cluster strait replicates from.
    pub source: Broker,
    /// The cluster strait replicates to.
    pub target: Broker,
    dir: PathBuf,
    storage: Storage,
}

impl Clusters {
    /// Starts both brokers with in-memory storage and waits until each answers ApiVersions.
    ///
    /// # Panics
    ///
    /// If the broker binary is not installed (run `scripts/test-broker install`), or if the
    /// brokers do not start; the message carries the script's output.
    pub fn start() -> Clusters {
        Clusters::start_with(Storage::Memory)
    }

    /// Starts both brokers with `storage` and waits until each answers ApiVersions.
    ///
    /// # Panics
    ///
    /// As [`Clusters::start`].
    pub fn start_with(storage: Storage) -> Clusters {
        let bin = env::broker_bin();
        if !bin.is_file() {
            panic!(
                "test broker not installed: run scripts/test-broker install (no broker binary at {})",
                bin.display()
            );
        }
        let dir = env::unique_dir("strait-test");
        let script = env::scripts_dir().join("test-broker");
        let output = Command::new("bash")
            .arg(&script)
            .arg("start")
            .arg("--dir")
            .arg(&dir)
            .arg("--parent")
            .arg(std::process::id().to_string())
            .arg("--storage")
            .arg(storage.as_arg())
            .env("STRAIT_TEST_BROKER_BIN", &bin)
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
        let env_file = dir.join("clusters.env");
        let text = read_env_file(&env_file);
        let vars = parse_env(&text);
        let broker = |name: &str, prefix: &str| {
            let get = |key: &str| {
                vars.get(format!("{prefix}_{key}").as_str())
                    .copied()
                    .unwrap_or_else(|| panic!("{} has no {prefix}_{key}", env_file.display()))
            };
            Broker {
                name: name.to_owned(),
                bootstrap: get("BOOTSTRAP").to_owned(),
                pid: get("PID")
                    .parse()
                    .unwrap_or_else(|e| panic!("{prefix}_PID in {}: {e}", env_file.display())),
                log: dir.join(format!("{name}.log")),
            }
        };
        let source = broker("source", "SOURCE");
        let target = broker("target", "TARGET");
        Clusters {
            source,
            target,
            dir,
            storage,
        }
    }

    /// Where the brokers keep their data.
    pub fn storage(&self) -> Storage {
        self.storage
    }

    /// One broker.
    pub fn broker(&self, which: Which) -> &Broker {
        match which {
            Which::Source => &self.source,
            Which::Target => &self.target,
        }
    }

    /// Stops one broker (TERM, then KILL after 5 s) and returns once its process is gone.
    /// Clients of it then see refused connections until [`Clusters::start_broker`]. Note that
    /// nisshi goes on serving for up to 5 s after TERM while clients are connected, so this
    /// takes that long; [`Clusters::kill_broker`] is immediate. It blocks: from async code, call
    /// it inside `tokio::task::block_in_place` or `spawn_blocking`.
    ///
    /// # Panics
    ///
    /// If the script fails.
    pub fn stop_broker(&mut self, which: Which) {
        self.run_one("stop-one", which, &[]);
    }

    /// Kills one broker at once (SIGKILL: a crash, no graceful shutdown) and returns once its
    /// process is gone. What it acknowledged stays in [`Storage::Sqlite`]. Blocks, as
    /// [`Clusters::stop_broker`].
    ///
    /// # Panics
    ///
    /// If the script fails.
    pub fn kill_broker(&mut self, which: Which) {
        self.run_one("stop-one", which, &["--grace", "0"]);
    }

    /// Starts a broker stopped by [`Clusters::stop_broker`] again, on the same port with the same
    /// storage (with [`Storage::Sqlite`] it has its data back; in memory it comes back empty),
    /// and returns once it answers ApiVersions. Updates its [`Broker::pid`]. Blocks, as
    /// [`Clusters::stop_broker`].
    ///
    /// # Panics
    ///
    /// If the broker is running, or does not come back; the message carries its log's tail.
    pub fn start_broker(&mut self, which: Which) {
        self.run_one("start-one", which, &[]);
        self.reload_pid(which);
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
        self.reload_pid(which);
    }

    fn run_one(&self, command: &str, which: Which, extra: &[&str]) {
        let script = env::scripts_dir().join("test-broker");
        let output = Command::new("bash")
            .arg(&script)
            .arg(command)
            .arg("--dir")
            .arg(&self.dir)
            .arg("--which")
            .arg(which.as_arg())
            .args(extra)
            .env("STRAIT_TEST_BROKER_BIN", env::broker_bin())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        if !output.status.success() {
            panic!(
                "{} {command} --which {} failed ({}):\n{}{}",
                script.display(),
                which.as_arg(),
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }

    fn reload_pid(&mut self, which: Which) {
        let env_file = self.dir.join("clusters.env");
        let text = read_env_file(&env_file);
        let key = match which {
            Which::Source => "SOURCE_PID",
            Which::Target => "TARGET_PID",
        };
        let pid = parse_env(&text)
            .get(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{} has no {key} after start-one", env_file.display()));
        match which {
            Which::Source => self.source.pid = pid,
            Which::Target => self.target.pid = pid,
        }
    }

    /// The directory holding `clusters.env`, the broker logs and their working directories.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Clusters {
    fn drop(&mut self) {
        env::stop_with_script("test-broker", &self.dir);
        if std::thread::panicking() {
            for broker in [&self.source, &self.target] {
                eprintln!(
                    "strait-testkit: last lines of {} ({}):\n{}",
                    broker.log.display(),
                    broker.name,
                    broker.log_tail(30)
                );
            }
            eprintln!("strait-testkit: kept {}", self.dir.display());
        } else if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            eprintln!("strait-testkit: cannot remove {}: {e}", self.dir.display());
        }
    }
}

fn read_env_file(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// `KEY=VALUE` lines; a later line wins.
fn parse_env(text: &str) -> HashMap<&str, &str> {
    text.lines()
        .filter_map(|line| line.split_once('='))
        .collect()
}
