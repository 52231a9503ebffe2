//! Two real brokers on loopback, started by `scripts/test-broker start` and stopped on drop.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::env;

/// One running broker: a single-node Kafka cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broker {
    /// "source" or "target"; also the broker's cluster id.
    pub name: String,
    /// `127.0.0.1:PORT`, for `bootstrap.servers`.
    pub bootstrap: String,
    /// Process id of the broker.
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
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

/// Two independent single-broker clusters, "source" and "target", each with in-memory storage.
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
}

impl Clusters {
    /// Starts both brokers and waits until each answers ApiVersions.
    ///
    /// # Panics
    ///
    /// If the broker binary is not installed (run `scripts/test-broker install`), or if the
    /// brokers do not start; the message carries the script's output.
    pub fn start() -> Clusters {
        let bin = env::broker_bin();
        if !bin.is_file() {
            panic!(
                "test broker not installed: run scripts/test-broker install (no broker binary at {})",
                bin.display()
            );
        }
        let dir = unique_dir();
        let script = env::scripts_dir().join("test-broker");
        let output = Command::new("bash")
            .arg(&script)
            .arg("start")
            .arg("--dir")
            .arg(&dir)
            .arg("--parent")
            .arg(std::process::id().to_string())
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
        let text = std::fs::read_to_string(&env_file)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", env_file.display()));
        let vars: HashMap<&str, &str> = text
            .lines()
            .filter_map(|line| line.split_once('='))
            .collect();
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
        }
    }

    /// The directory holding `clusters.env`, the broker logs and their working directories.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Clusters {
    fn drop(&mut self) {
        let script = env::scripts_dir().join("test-broker");
        match Command::new("bash")
            .arg(&script)
            .arg("stop")
            .arg("--dir")
            .arg(&self.dir)
            .output()
        {
            Ok(output) if output.status.success() => {}
            Ok(output) => eprintln!(
                "strait-testkit: {} stop failed ({}): {}",
                script.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ),
            Err(e) => eprintln!("strait-testkit: cannot run {}: {e}", script.display()),
        }
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

/// A new, empty directory under the system temp dir, unique across processes and threads.
fn unique_dir() -> PathBuf {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let base = std::env::temp_dir();
    loop {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("strait-test-{}-{n}-{nanos:09}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => return dir,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => panic!("cannot create {}: {e}", dir.display()),
        }
    }
}
