//! What telling an event did, read back in unit tests: the metrics it recorded (through a
//! recorder of the test's own) and the lines it logged (through a subscriber of its own), so a
//! test can check that one occurrence gave its log line and its metrics together.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

/// A recorder and a log for one test's thread.
pub(crate) struct Told {
    recorder: DebuggingRecorder,
    snapshotter: Snapshotter,
    log: Arc<Mutex<Vec<u8>>>,
}

impl Told {
    pub(crate) fn new() -> Self {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        Self {
            recorder,
            snapshotter,
            log: Arc::default(),
        }
    }

    /// Runs `f` on this thread with this recorder and this log.
    pub(crate) fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        let log = Arc::clone(&self.log);
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || Line(Arc::clone(&log)))
            .with_ansi(false)
            .without_time()
            .with_max_level(tracing::Level::TRACE)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            ::metrics::with_local_recorder(&self.recorder, f)
        })
    }

    /// What was recorded since the last call (counters: the increase; gauges: the last value
    /// set, 0 when none was; histograms: the number of values), by name, with the labels other
    /// than `source` and `target` in braces when there are any: `name{group=g,reason=failed}`.
    pub(crate) fn metrics(&self) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for (key, _, _, value) in self.snapshotter.snapshot().into_vec() {
            let key = key.key();
            let labels: Vec<String> = key
                .labels()
                .filter(|l| l.key() != "source" && l.key() != "target")
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            let name = if labels.is_empty() {
                key.name().to_owned()
            } else {
                format!("{}{{{}}}", key.name(), labels.join(","))
            };
            let value = match value {
                DebugValue::Counter(n) => n as f64,
                DebugValue::Gauge(v) => v.0,
                DebugValue::Histogram(values) => values.len() as f64,
            };
            *out.entry(name).or_insert(0.0) += value;
        }
        out
    }

    /// The lines logged since the last call.
    pub(crate) fn log(&self) -> String {
        let bytes = std::mem::take(&mut *self.log.lock().unwrap_or_else(|e| e.into_inner()));
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// Where the test's subscriber writes.
struct Line(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Line {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A flow from cluster `source` to cluster `target`, with `extra` properties. Each test names
/// clusters of its own: the status board is the process's, shared by the tests.
pub(crate) fn flow(source: &str, target: &str, extra: &str) -> crate::config::FlowConfig {
    let text = format!(
        "clusters = {source}, {target}\n{source}.bootstrap.servers = a:9092\n\
         {target}.bootstrap.servers = b:9092\n{source}->{target}.enabled = true\n{extra}"
    );
    crate::config::StraitConfig::parse(&text, "test.properties")
        .expect("valid")
        .flows
        .remove(0)
}

/// `flow`'s entry in `/v1/status`.
pub(crate) fn status(flow: &crate::config::FlowConfig) -> crate::status::FlowStatus {
    crate::status::snapshot()
        .flows
        .into_iter()
        .find(|f| f.flow == flow.name())
        .expect("the flow is on the status board")
}
