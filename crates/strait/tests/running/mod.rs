//! What the tests of the strait binary share: MM2 config files for a flow between test
//! clusters, a run of the binary to its end, a `strait run --listen` process between two test
//! clusters, and what the tests read from it: `GET` over plain HTTP, Prometheus text parsed into
//! samples.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use strait_testkit::Clusters;

/// `strait run --config FILE --listen 127.0.0.1:PORT`, killed when dropped.
pub struct Strait {
    child: Child,
    pub port: u16,
    pub log: PathBuf,
}

impl Strait {
    /// Starts `strait run` on `config`, logging to `log`.
    pub fn run(config: &Path, log: PathBuf) -> Strait {
        let port = free_port();
        let file = File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_strait"))
            .args(["run", "--config"])
            .arg(config)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("spawn strait");
        Strait { child, port, log }
    }

    /// The address `strait status --url` takes.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Stops it with SIGTERM (it finishes its round and writes its map) and waits for it.
    pub fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "strait did not stop within 30 s of SIGTERM:\n{}",
            self.log_text()
        );
    }

    /// Sends `signal` (`HUP`, `TERM`, ...) with kill(1).
    pub fn signal(&self, signal: &str) {
        let _ = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status();
    }

    /// Waits up to `secs` seconds for it to exit by itself; its exit status.
    pub fn wait_exit(&mut self, secs: u64) -> Option<ExitStatus> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    }

    /// Polls the log until it holds `text`, for at most `secs` seconds; the log then.
    pub fn log_until(&self, secs: u64, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let log = self.log_text();
            if log.contains(text) {
                return log;
            }
            assert!(
                Instant::now() < deadline,
                "the log does not say {text:?} within {secs} s:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `GET path`: status code and body.
    pub fn get(&self, path: &str) -> std::io::Result<(u16, String)> {
        get(self.port, path)
    }

    /// `GET path`: status code and the body parsed as JSON.
    pub fn get_json(&self, path: &str) -> std::io::Result<(u16, serde_json::Value)> {
        let (status, body) = self.get(path)?;
        let body = serde_json::from_str(&body)
            .map_err(|e| std::io::Error::other(format!("{e}: {body:?}")))?;
        Ok((status, body))
    }

    /// The current `/metrics` samples; empty while it does not answer yet.
    pub fn metrics(&self) -> Metrics {
        match self.get("/metrics") {
            Ok((200, text)) => Metrics::parse(&text),
            _ => Metrics::default(),
        }
    }

    /// Polls `/metrics` until `done` holds, for at most `secs` seconds; the last samples.
    pub fn metrics_until(&self, secs: u64, what: &str, done: impl Fn(&Metrics) -> bool) -> Metrics {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let m = self.metrics();
            if done(&m) {
                return m;
            }
            assert!(
                Instant::now() < deadline,
                "not within {secs} s: {what}\nmetrics:\n{}\nlog:\n{}",
                m.text,
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Strait {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// `GET path` on 127.0.0.1:`port`: status code and body.
pub fn get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(20)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no HTTP head in {text:?}")))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status in {head:?}")))?;
    Ok((status, body.to_owned()))
}

/// An MM2 config with the flow `A->B` between the test clusters, plus `extra` lines.
pub fn write_config(clusters: &Clusters, name: &str, extra: &str) -> PathBuf {
    write_flow_config(clusters, ("A", "B"), name, extra)
}

/// An MM2 config with the flow `a->b` from the source test cluster (alias `a`) to the target
/// one (alias `b`), plus `extra` lines.
pub fn write_flow_config(
    clusters: &Clusters,
    (a, b): (&str, &str),
    name: &str,
    extra: &str,
) -> PathBuf {
    let text = flow_properties(
        (a, &clusters.source.bootstrap),
        (b, &clusters.target.bootstrap),
        extra,
    );
    write_properties(clusters.dir(), name, &text)
}

/// The MM2 properties of one flow `a->b` between two clusters, each given as (alias, bootstrap
/// servers), with every topic strait creates at replication factor 1, then `extra` lines.
pub fn flow_properties(
    (a, a_servers): (&str, &str),
    (b, b_servers): (&str, &str),
    extra: &str,
) -> String {
    format!(
        "clusters = {a}, {b}\n\
         {a}.bootstrap.servers = {a_servers}\n\
         {b}.bootstrap.servers = {b_servers}\n\
         {a}->{b}.enabled = true\n\
         replication.factor = 1\n\
         checkpoints.topic.replication.factor = 1\n\
         offset-syncs.topic.replication.factor = 1\n\
         heartbeats.topic.replication.factor = 1\n\
         {extra}\n"
    )
}

/// Writes `text` to the file `name` in `dir`; its path.
pub fn write_properties(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write config");
    path
}

/// The arguments of `strait run` on `config` until the target has caught up, without the HTTP
/// listener.
pub fn run_until_caught_up(config: &str) -> [&str; 6] {
    [
        "run",
        "--config",
        config,
        "--until-caught-up",
        "--listen",
        "off",
    ]
}

/// What one run of the binary to its end left behind.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    /// Whether it exited 0.
    pub fn ok(&self) -> bool {
        self.status.success()
    }

    /// Its exit code, if it exited.
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Its exit status, stdout and stderr, for an assertion's message.
    pub fn both(&self) -> String {
        format!(
            "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// Runs the strait binary with `args` to its end: `RUST_LOG` unset unless `env` sets it, no
/// colours, `env` set, stdout and stderr to files in `dir` (no terminal); killed after 2 minutes.
pub fn run_to_end(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Finished {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, Ordering::Relaxed);
    let out_path = dir.join(format!("strait-{n}-{}.out", std::process::id()));
    let err_path = dir.join(format!("strait-{n}-{}.err", std::process::id()));
    let mut command = Command::new(env!("CARGO_BIN_EXE_strait"));
    command
        .args(args)
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).expect("stdout file"))
        .stderr(File::create(&err_path).expect("stderr file"));
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().expect("spawn strait");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "strait {args:?} did not finish within 2 minutes:\n{}",
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Finished {
        status,
        stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
    }
}

/// Samples of a Prometheus text page.
#[derive(Debug, Default)]
pub struct Metrics {
    pub text: String,
    samples: Vec<(String, BTreeMap<String, String>, f64)>,
}

impl Metrics {
    pub fn parse(text: &str) -> Metrics {
        let mut samples = Vec::new();
        for line in text.lines() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels = labels
                .split(',')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.trim_matches('"').to_owned()))
                .collect();
            samples.push((name.to_owned(), labels, value));
        }
        Metrics {
            text: text.to_owned(),
            samples,
        }
    }

    /// Values of `name` whose labels include `labels`.
    pub fn values(&self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        self.samples
            .iter()
            .filter(|(n, l, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|(_, _, v)| *v)
            .collect()
    }

    /// The one value of `name` with `labels`, if there is exactly one.
    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        match self.values(name, labels).as_slice() {
            [v] => Some(*v),
            _ => None,
        }
    }

    /// The sum over every series of `name` with `labels`.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.values(name, labels).iter().sum()
    }
}
