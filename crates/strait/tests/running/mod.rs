//! What the tests of the strait binary share: MM2 config files for a flow between test
//! clusters, a run of the binary to its end, a `strait run --listen` process between two test
//! clusters, and what the tests read from it: `GET` over plain HTTP, Prometheus text parsed into
//! samples.
#![allow(dead_code, unreachable_pub, unused_imports)]

use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub use strait_testkit::flow_config::{
    flow_properties, write_config, write_flow_config, write_properties,
};
pub use strait_testkit::prometheus::Metrics;
pub use strait_testkit::served;

/// `strait run --config FILE --listen 127.0.0.1:PORT`, killed when dropped.
pub struct Strait {
    child: Child,
    pub port: u16,
    pub log: PathBuf,
}

impl Strait {
    /// Starts `strait run` on `config`, logging to `log`.
    pub fn run(config: &Path, log: PathBuf) -> Strait {
        Strait::run_with(config, log, &[])
    }

    /// Starts `strait run` on `config` with `args` after its own, logging to `log`.
    pub fn run_with(config: &Path, log: PathBuf, args: &[&str]) -> Strait {
        let port = free_port();
        let file = File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_strait"))
            .args(["run", "--config"])
            .arg(config)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(args)
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("spawn strait");
        Strait { child, port, log }
    }

    /// The address `strait status --url` takes.
    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

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
        served::log_until(&self.log, secs, text)
    }

    pub fn log_text(&self) -> String {
        served::log_text(&self.log)
    }

    /// `GET path`: status code and body.
    pub fn get(&self, path: &str) -> std::io::Result<(u16, String)> {
        served::get(self.addr(), path)
    }
    /// `GET path`: status code and the body parsed as JSON.
    pub fn get_json(&self, path: &str) -> std::io::Result<(u16, serde_json::Value)> {
        served::get_json(self.addr(), path)
    }

    /// The current `/metrics` samples; empty while it does not answer yet.
    pub fn metrics(&self) -> Metrics {
        served::metrics(self.addr())
    }

    /// Polls `/metrics` until `done` holds, for at most `secs` seconds; the last samples.
    pub fn metrics_until(&self, secs: u64, what: &str, done: impl Fn(&Metrics) -> bool) -> Metrics {
        served::metrics_until(self.addr(), &self.log, secs, what, done)
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
    served::get(SocketAddr::from(([127, 0, 0, 1], port)), path)
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
