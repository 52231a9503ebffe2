//! Apache Kafka's own MirrorMaker 2, run in dedicated mode from the jars `scripts/test-broker
//! install` fetches for it (`scripts/mm2/pom.xml`, its own class path at its own release;
//! `org.apache.kafka.connect.mirror.MirrorMaker mm2.properties --clusters B`):
//! the reference implementation strait is compared with.
//!
//! [`Mm2::start`] writes the properties, starts the JVM with its log in a file and returns at
//! once; [`Mm2::wait_until`] polls a condition (MM2 takes 10-30 s on two cores before the first
//! records, syncs and checkpoints appear); [`Mm2::stop`] sends SIGTERM (MM2's shutdown hook stops
//! its herders) and SIGKILL after a grace period. Dropping an [`Mm2`] kills the JVM, and a
//! watchdog kills it if the test process dies without dropping it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::java::{kafka_conf_dir, mm2_java_command};

/// The line MM2 logs once its herders are started (`MirrorMaker.start`).
pub const MM2_STARTED: &str = "Kafka MirrorMaker started";

/// How long [`Mm2::stop`] waits after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(30);

/// One MirrorMaker 2 JVM in dedicated mode.
///
/// Its files are in the directory given to [`Mm2::start`] (e.g. [`crate::Clusters::dir`], which
/// is kept when a test fails): `mm2-N.properties` and `mm2-N.log` (stdout and stderr, INFO and
/// up, with `scripts/kafka/log4j2.properties`).
#[derive(Debug)]
pub struct Mm2 {
    child: Child,
    watchdog: Option<Child>,
    config: PathBuf,
    log: PathBuf,
    status: Option<ExitStatus>,
}

impl Mm2 {
    /// MM2 properties for one flow `a->b` between two single-broker test clusters, each given
    /// as (alias, bootstrap servers), followed by `extra` lines (a later key wins, as in Java's
    /// `Properties`):
    ///
    /// - `a->b` enabled; `b->a` disabled, with its heartbeats too, so that no `b->a` herder runs
    ///   (by default MM2 starts one for every pair, to emit heartbeats);
    /// - replication factor 1 for the remote topics, MM2's three topics and the Connect worker's
    ///   internal topics (the defaults, 2 and 3, fail on one broker);
    /// - no topic ACL sync (the test brokers have no authorizer);
    /// - test-speed intervals: topics and groups looked up every 5 s (default 600 s),
    ///   checkpoints every 1 s (default 60 s), and the target worker's offset flush, which sends
    ///   the offset syncs held back by `offset.lag.max`, every 1 s (default 60 s; set as
    ///   `b.offset.flush.interval.ms`: MM2 does not pass a top-level one to the worker).
    ///
    /// Group offset sync (`sync.group.offsets.enabled`) stays off, MM2's default.
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
             {b}->{a}.enabled = false\n\
             {b}->{a}.emit.heartbeats.enabled = false\n\
             replication.factor = 1\n\
             checkpoints.topic.replication.factor = 1\n\
             heartbeats.topic.replication.factor = 1\n\
             offset-syncs.topic.replication.factor = 1\n\
             offset.storage.replication.factor = 1\n\
             status.storage.replication.factor = 1\n\
             config.storage.replication.factor = 1\n\
             sync.topic.acls.enabled = false\n\
             refresh.topics.interval.seconds = 5\n\
             refresh.groups.interval.seconds = 5\n\
             emit.checkpoints.interval.seconds = 1\n\
             {b}.offset.flush.interval.ms = 1000\n\
             {extra}\n"
        )
    }

    /// Writes `properties` to `dir/mm2-N.properties` and starts
    /// `org.apache.kafka.connect.mirror.MirrorMaker <file> --clusters <clusters...>` (the
    /// target clusters this node drives; all of the file's when empty), with a 1 GiB heap and
    /// its log in `dir/mm2-N.log`. Returns once the JVM is spawned; MM2 logs [`MM2_STARTED`]
    /// some seconds later ([`Mm2::wait_for_log`]).
    ///
    /// # Panics
    ///
    /// If Kafka is not installed, or a file cannot be written, or java cannot be spawned.
    pub fn start(dir: &Path, properties: &str, clusters: &[&str]) -> Mm2 {
        static RUNS: AtomicUsize = AtomicUsize::new(0);
        let n = RUNS.fetch_add(1, Ordering::Relaxed);
        let config = dir.join(format!("mm2-{n}.properties"));
        let log = dir.join(format!("mm2-{n}.log"));
        std::fs::write(&config, properties)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", config.display()));
        let out = std::fs::File::create(&log)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", log.display()));
        let err = out
            .try_clone()
            .unwrap_or_else(|e| panic!("cannot open {} twice: {e}", log.display()));
        let mut command = mm2_java_command();
        // A later -Xmx and -D win over mm2_java_command's tool settings (256 MiB, warnings only).
        command
            .arg("-Xms256m")
            .arg("-Xmx1g")
            .arg(format!(
                "-Dlog4j2.configurationFile={}",
                kafka_conf_dir().join("log4j2.properties").display()
            ))
            .arg("org.apache.kafka.connect.mirror.MirrorMaker")
            .arg(&config);
        if !clusters.is_empty() {
            command.arg("--clusters").args(clusters);
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start MirrorMaker: {e}"));
        let watchdog = start_watchdog(child.id(), &config);
        Mm2 {
            child,
            watchdog,
            config,
            log,
            status: None,
        }
    }

    /// The JVM's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The properties file it runs on.
    pub fn config(&self) -> &Path {
        &self.config
    }

    /// Its log file (stdout and stderr).
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// The whole log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `lines` lines of the log.
    pub fn log_tail(&self, lines: usize) -> String {
        crate::env::log_tail(&self.log, lines)
    }

    /// The last `lines` WARN, ERROR and FATAL lines of the log.
    pub fn log_problems(&self, lines: usize) -> String {
        let text = self.log_text();
        let problems: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("] WARN ") || l.contains("] ERROR ") || l.contains("] FATAL "))
            .collect();
        problems[problems.len().saturating_sub(lines)..].join("\n")
    }

    /// Whether the JVM is still running.
    pub fn is_running(&mut self) -> bool {
        if self.status.is_some() {
            return false;
        }
        match self.child.try_wait() {
            Ok(Some(status)) => {
                self.status = Some(status);
                false
            }
            Ok(None) => true,
            Err(_) => false,
        }
    }

    /// Calls `condition` every 500 ms until it returns `Some`, and returns that.
    ///
    /// # Panics
    ///
    /// If `timeout` passes first, or MM2 exits meanwhile; the message names `what` and carries
    /// the log's tail.
    pub fn wait_until<T>(
        &mut self,
        timeout: Duration,
        what: &str,
        mut condition: impl FnMut() -> Option<T>,
    ) -> T {
        let started = Instant::now();
        loop {
            if let Some(value) = condition() {
                return value;
            }
            if !self.is_running() {
                panic!(
                    "MirrorMaker exited ({:?}) before {what}; {}:\n{}",
                    self.status,
                    self.log.display(),
                    self.log_tail(60)
                );
            }
            if started.elapsed() >= timeout {
                panic!(
                    "not within {timeout:?} of MirrorMaker running: {what}; {}, last problems:\n{}\nlast lines:\n{}",
                    self.log.display(),
                    self.log_problems(20),
                    self.log_tail(30)
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Waits until the log holds `needle` (e.g. [`MM2_STARTED`]).
    ///
    /// # Panics
    ///
    /// As [`Mm2::wait_until`].
    pub fn wait_for_log(&mut self, needle: &str, timeout: Duration) {
        let log = self.log.clone();
        self.wait_until(timeout, &format!("{needle:?} in its log"), || {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains(needle)
                .then_some(())
        });
    }

    /// Stops MM2: SIGTERM (its shutdown hook stops the herders, connectors and tasks), then
    /// SIGKILL if it is still there 30 s later. Returns its exit status (143 after SIGTERM).
    /// Once stopped, later calls return the same status.
    ///
    /// # Panics
    ///
    /// If it had to be killed: MM2 hung in its shutdown (the message carries the log's tail).
    pub fn stop(&mut self) -> ExitStatus {
        if let Some(status) = self.status {
            return status;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let started = Instant::now();
        while started.elapsed() < STOP_GRACE {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.status = Some(status);
                self.stop_watchdog();
                return status;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.kill();
        panic!(
            "MirrorMaker did not stop within {STOP_GRACE:?} of SIGTERM; killed. {}:\n{}",
            self.log.display(),
            self.log_tail(40)
        );
    }

    /// Kills MM2 at once (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        if self.status.is_none() {
            let _ = self.child.kill();
            self.status = self.child.wait().ok();
        }
        self.stop_watchdog();
    }

    fn stop_watchdog(&mut self) {
        if let Some(mut watchdog) = self.watchdog.take() {
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
    }
}

impl Drop for Mm2 {
    fn drop(&mut self) {
        let was_running = self.is_running();
        self.kill();
        if std::thread::panicking() {
            eprintln!(
                "strait-testkit: MirrorMaker {} ({}); last warnings and errors in {}:\n{}",
                if was_running { "killed" } else { "had exited" },
                self.config.display(),
                self.log.display(),
                self.log_problems(15)
            );
        }
    }
}

/// Starts a shell that SIGKILLs `pid` once this test process is gone, so an MM2 JVM never
/// outlives a test that died without dropping its [`Mm2`]. It leaves a process alone whose
/// command line does not hold `marker` (the pid was reused) and exits by itself once `pid` has
/// exited. `None` if it cannot be started: the JVM is then only stopped by `Drop`.
pub(crate) fn start_watchdog(pid: u32, marker: &Path) -> Option<Child> {
    // A zombie counts as gone (a reaped child's pid 1 may reap it late).
    const SCRIPT: &str = r#"
alive() {
    local state
    [ -r "/proc/$1/stat" ] || return 1
    state=$(sed -e 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}
trap '' INT HUP
parent=$1 child=$2 marker=$3
while alive "$parent" && alive "$child"; do sleep 1; done
if alive "$child" && tr '\0' '\n' <"/proc/$child/cmdline" | grep -qxF -- "$marker"; then
    echo "strait-testkit watchdog: test process $parent is gone; killing $child ($marker)" >&2
    kill -KILL "$child"
fi
"#;
    Command::new("bash")
        .arg("-c")
        .arg(SCRIPT)
        .arg("strait-mm2-watchdog")
        .arg(std::process::id().to_string())
        .arg(pid.to_string())
        .arg(marker)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .ok()
}
