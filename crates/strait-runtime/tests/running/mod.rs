//! What the in-process tests of the runtime share: a [`Runtime`] started in this process on a
//! Tokio runtime of its own, with its HTTP API on a free port, while the test itself stays
//! synchronous (as the testkit's clients are); its log lines in a file; `GET` over plain HTTP;
//! Prometheus text parsed into samples; MM2 config files for a flow between test clusters.
#![allow(dead_code, unreachable_pub, unused_imports)]

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use strait_core::status::{FlowStatus, StatusReport};
use strait_runtime::{ControlError, FlowRequested, Options, Reloaded, Runtime};

pub use strait_testkit::flow_config::{write_config, write_flow_config, write_properties};
pub use strait_testkit::prometheus::Metrics;
pub use strait_testkit::served::{self, get, request};

/// A [`Runtime`] of this process on `config`, its HTTP API on 127.0.0.1 at a free port, the
/// config file watched. Dropped, its tasks are abandoned where they are, as a killed process
/// leaves them; [`Running::shutdown`] stops it cleanly.
pub struct Running {
    /// Always `Some` until dropped.
    tokio: Option<tokio::runtime::Runtime>,
    runtime: Option<Runtime>,
    addr: SocketAddr,
    pub log: PathBuf,
}

impl Running {
    /// Starts the runtime on `config`, the file watched; its log lines go to `log` from now on.
    pub fn start(config: &Path, log: PathBuf) -> Running {
        Running::start_with(config, log, true)
    }

    /// Starts the runtime on `config`, the file watched or not; its log lines go to `log`.
    pub fn start_with(config: &Path, log: PathBuf, watch_config: bool) -> Running {
        let options = Options {
            listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            watch_config,
            ..Options::default()
        };
        Running::start_options(config, log, options)
    }

    /// Starts the runtime on `config` with `options` (its `listen` must be set); its log lines
    /// go to `log`.
    pub fn start_options(config: &Path, log: PathBuf, options: Options) -> Running {
        log_to(&log);
        let tokio = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("a Tokio runtime");
        let runtime = tokio
            .block_on(Runtime::start(config, options))
            .unwrap_or_else(|e| panic!("the runtime does not start: {}", e.report()));
        let addr = runtime.http_addr().expect("the HTTP API listens");
        Running {
            tokio: Some(tokio),
            runtime: Some(runtime),
            addr,
            log,
        }
    }

    fn runtime(&self) -> &Runtime {
        self.runtime.as_ref().expect("running")
    }

    fn block_on<T>(&self, future: impl std::future::Future<Output = T>) -> T {
        self.tokio.as_ref().expect("running").block_on(future)
    }

    /// Where its HTTP API listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// [`Runtime::reload`].
    pub fn reload(&self) -> Result<Reloaded, ControlError> {
        self.block_on(self.runtime().reload())
    }

    /// [`Runtime::pause`].
    pub fn pause(&self, flow: &str) -> Result<FlowRequested, ControlError> {
        self.block_on(self.runtime().pause(flow))
    }

    /// [`Runtime::resume`].
    pub fn resume(&self, flow: &str) -> Result<FlowRequested, ControlError> {
        self.block_on(self.runtime().resume(flow))
    }

    /// [`Runtime::status`].
    pub fn status(&self) -> StatusReport {
        self.runtime().status()
    }

    /// The status of the flow `flow`; an assertion fails if it runs no such flow.
    pub fn flow_status(&self, flow: &str) -> FlowStatus {
        let report = self.status();
        report
            .flows
            .iter()
            .find(|f| f.flow == flow)
            .cloned()
            .unwrap_or_else(|| panic!("no flow {flow} in the status: {report:?}"))
    }

    /// [`Runtime::shutdown`]: returns once every flow has written its map.
    pub fn shutdown(mut self) {
        if let Some(runtime) = self.runtime.take() {
            self.block_on(runtime.shutdown());
        }
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
        served::get(self.addr, path)
    }

    /// `POST path` without a body: status code and body.
    pub fn post(&self, path: &str) -> std::io::Result<(u16, String)> {
        served::request(self.addr, "POST", path)
    }
    /// `GET path`: status code and the body parsed as JSON.
    pub fn get_json(&self, path: &str) -> std::io::Result<(u16, serde_json::Value)> {
        served::get_json(self.addr, path)
    }

    /// The current `/metrics` samples; empty while it does not answer yet.
    pub fn metrics(&self) -> Metrics {
        served::metrics(self.addr)
    }

    /// Polls `/metrics` until `done` holds, for at most `secs` seconds; the last samples.
    pub fn metrics_until(&self, secs: u64, what: &str, done: impl Fn(&Metrics) -> bool) -> Metrics {
        served::metrics_until(self.addr, &self.log, secs, what, done)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // The runtime's tasks are dropped mid-round, not asked to finish it: a test that ends
        // with a cluster stopped would wait for rounds that cannot end.
        drop(self.runtime.take());
        if let Some(tokio) = self.tokio.take() {
            tokio.shutdown_background();
        }
    }
}

/// Sends this process's log lines (`info` and up, or `RUST_LOG`) to `path` from now on.
fn log_to(path: &Path) {
    static FILE: OnceLock<Mutex<Option<File>>> = OnceLock::new();
    let file = FILE.get_or_init(|| {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .with_writer(|| LogFile)
            .try_init();
        Mutex::new(None)
    });
    *file.lock().unwrap_or_else(|e| e.into_inner()) = Some(File::create(path).expect("log file"));

    /// Writes to the file chosen last.
    struct LogFile;
    impl Write for LogFile {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let mut file = FILE
                .get()
                .expect("set")
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            match file.as_mut() {
                Some(f) => f.write(buf),
                None => Ok(buf.len()),
            }
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
}
