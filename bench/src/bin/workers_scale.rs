//! `workers-scale`: one flow run by 1, 2 and 3 workers (`strait.workers.enabled`,
//! `docs/scaling.md`): how fast they copy a loaded topic together, what each costs, and how long
//! a rebalance takes when a worker joins them and when one leaves.
//!
//! Two Apache Kafka clusters are started (`strait-testkit`, the jars the tests use) and a source
//! topic is loaded once (librdkafka, 1 KiB lz4 records). Then, for each count of workers, that
//! many `strait run` processes (the release binary) start together with one config of their own
//! (new aliases: a new group, new remote and internal topics) and copy the topic in
//! transactions. Printed per count:
//!
//! - `settle s`: from the processes' start until their `/v1/status` shows one generation whose
//!   units cover the flow's `tasks.max` once;
//! - `copy s`, `MB/s`, `rec/s/worker`: from the start until the workers' `/metrics` count every
//!   record written (`strait_record_count_total`, summed over them);
//! - `core-s/GB`: the workers' CPU time (user + system, `/proc/<pid>/stat`) over that time, per
//!   GB of record batches;
//! - `join s`: once caught up, one more worker starts; from its start until the group settles
//!   again with it;
//! - `leave s`: one worker gets SIGTERM (it leaves the group); from then until the others
//!   settle without it.
//!
//! ```sh
//! cargo build --release -p strait
//! cargo run --release --manifest-path bench/Cargo.toml --bin workers-scale -- --records 300000
//! ```

use std::collections::BTreeSet;
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use strait_bench::rdk;
use strait_testkit::Clusters;

#[derive(Debug, Parser)]
struct Args {
    /// The strait binary (build it with `cargo build --release -p strait`).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/release/strait"))]
    strait: PathBuf,
    /// Records in the source topic.
    #[arg(long, default_value_t = 300_000)]
    records: u64,
    /// Its partitions.
    #[arg(long, default_value_t = 48)]
    partitions: i32,
    /// Bytes per record value.
    #[arg(long, default_value_t = 1024)]
    value_bytes: usize,
    /// The flow's units (`tasks.max`).
    #[arg(long, default_value_t = 6)]
    tasks: u32,
    /// The workers' session timeout (`strait.workers.session.timeout.ms`).
    #[arg(long, default_value_t = 6000)]
    session_ms: u64,
    /// The largest number of workers to run together.
    #[arg(long, default_value_t = 3)]
    max_workers: usize,
    /// How the flow is run: `exactly-once` (`exactly.once.source.support = enabled`, each
    /// round one transaction), `workers` (strait's default: a group, units without
    /// transactions), or `one-process` (`strait.workers.enabled = false`: no group; one
    /// process only, so no join or leave). `workers` against `one-process` at one process is
    /// the cost of the coordination that makes several processes on one file safe.
    #[arg(long, value_enum, default_value_t = Mode::ExactlyOnce)]
    mode: Mode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Mode {
    ExactlyOnce,
    Workers,
    OneProcess,
}

impl Mode {
    /// The lines this mode adds to the file.
    fn keys(self) -> &'static str {
        match self {
            Mode::ExactlyOnce => "exactly.once.source.support = enabled\n",
            Mode::Workers => "",
            Mode::OneProcess => "strait.workers.enabled = false\n",
        }
    }
}

/// One `strait run` process and the port of its HTTP API.
struct Worker {
    child: Child,
    port: u16,
}

impl Worker {
    fn start(strait: &Path, config: &Path, log: &Path) -> anyhow::Result<Worker> {
        let port = free_port()?;
        let log = std::fs::File::create(log)?;
        let child = Command::new(strait)
            .args(["run", "--config"])
            .arg(config)
            .args([
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--no-watch-config",
            ])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        Ok(Worker { child, port })
    }

    /// The flow's `worker` entry of `/v1/status`, once the API answers.
    fn place(&self) -> Option<serde_json::Value> {
        let body = get(self.port, "/v1/status")?;
        let status: serde_json::Value = serde_json::from_str(&body).ok()?;
        Some(status["flows"].get(0)?["worker"].clone())
    }

    /// A counter of `/metrics`, summed over its series.
    fn counter(&self, name: &str) -> f64 {
        let Some(body) = get(self.port, "/metrics") else {
            return 0.0;
        };
        body.lines()
            .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// CPU seconds it used (user + system).
    fn cpu_seconds(&self) -> f64 {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())) else {
            return 0.0;
        };
        // Fields after the command name (which is in parentheses): utime is the 14th field of
        // the line, stime the 15th.
        let after = stat.rsplit(')').next().unwrap_or("");
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        // SAFETY: sysconf only reads a constant.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        (ticks(11) + ticks(12)) / per_second
    }

    fn stop(mut self) {
        // SAFETY: kill sends a signal to a child of ours.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A plain HTTP/1.0 GET; the body, if the answer is 200.
fn get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200")
        .then(|| body.to_owned())
        .or_else(|| head.starts_with("HTTP/1.0 200").then(|| body.to_owned()))
}

/// Waits until `workers` show one generation whose units cover `tasks` units once; how long.
fn settled(workers: &[&Worker], tasks: u32, within: Duration) -> anyhow::Result<Duration> {
    let began = Instant::now();
    loop {
        let places: Vec<serde_json::Value> = workers.iter().filter_map(|w| w.place()).collect();
        if places.len() == workers.len() {
            let generations: BTreeSet<i64> = places
                .iter()
                .filter_map(|p| p["generation"].as_i64())
                .collect();
            let owned: Vec<String> = places
                .iter()
                .flat_map(|p| p["owned"].as_array().cloned().unwrap_or_default())
                .filter_map(|u| u.as_str().map(str::to_owned))
                .collect();
            let distinct: BTreeSet<&String> = owned.iter().collect();
            if generations.len() == 1
                && !generations.contains(&-1)
                && owned.len() == tasks as usize
                && distinct.len() == owned.len()
            {
                return Ok(began.elapsed());
            }
        }
        anyhow::ensure!(
            began.elapsed() < within,
            "the workers did not settle: {places:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.strait.is_file(),
        "no strait binary at {} (cargo build --release -p strait, or --strait PATH)",
        args.strait.display()
    );
    let clusters = Clusters::start();
    let (src, dst) = (
        clusters.source.bootstrap.clone(),
        clusters.target.bootstrap.clone(),
    );
    let produced = rdk::load_topic(
        &src,
        "load",
        args.partitions,
        args.records,
        args.value_bytes,
    )?;
    println!(
        "source: {} records of {} B in {} partitions (lz4), loaded in {:.1} s; tasks.max {}, \
         session timeout {} ms; mode {:?}",
        produced.records,
        args.value_bytes,
        args.partitions,
        produced.seconds,
        args.tasks,
        args.session_ms,
        args.mode
    );
    println!(
        "{:>7} {:>9} {:>7} {:>7} {:>13} {:>10} {:>7} {:>8}",
        "workers", "settle s", "copy s", "MB/s", "rec/s/worker", "core-s/GB", "join s", "leave s"
    );
    let max_workers = if args.mode == Mode::OneProcess {
        1
    } else {
        args.max_workers
    };
    for count in 1..=max_workers {
        // Aliases of their own per run: a new group, new remote and internal topics.
        let (s, t) = (format!("src{count}"), format!("tgt{count}"));
        let text = format!(
            "clusters = {s}, {t}\n{s}.bootstrap.servers = {src}\n{t}.bootstrap.servers = {dst}\n\
             {s}->{t}.enabled = true\nreplication.factor = 1\n\
             checkpoints.topic.replication.factor = 1\noffset-syncs.topic.replication.factor = 1\n\
             heartbeats.topic.replication.factor = 1\nemit.offset-syncs.enabled = false\n\
             emit.checkpoints.enabled = false\nsync.group.offsets.enabled = false\n\
             emit.heartbeats.enabled = false\ntopics = load\n\
             {}tasks.max = {}\n\
             strait.workers.session.timeout.ms = {}\n",
            args.mode.keys(),
            args.tasks,
            args.session_ms
        );
        let config = clusters.dir().join(format!("workers-{count}.properties"));
        std::fs::write(&config, text)?;
        let log = |name: &str| clusters.dir().join(format!("workers-{count}-{name}.log"));
        let began = Instant::now();
        let mut workers = Vec::new();
        for i in 0..count {
            workers.push(Worker::start(&args.strait, &config, &log(&i.to_string()))?);
        }
        let all: Vec<&Worker> = workers.iter().collect();
        let settle = if args.mode == Mode::OneProcess {
            Duration::ZERO
        } else {
            settled(&all, args.tasks, Duration::from_secs(120))?
        };
        let records = produced.records as f64;
        loop {
            let written: f64 = workers
                .iter()
                .map(|w| w.counter("strait_record_count_total"))
                .sum();
            if written >= records {
                break;
            }
            anyhow::ensure!(
                began.elapsed() < Duration::from_secs(600),
                "{count} workers wrote {written} of {records} records in 10 minutes"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let copy = began.elapsed().as_secs_f64();
        let bytes: f64 = workers
            .iter()
            .map(|w| w.counter("strait_byte_count_total"))
            .sum();
        let cpu: f64 = workers.iter().map(Worker::cpu_seconds).sum();
        if args.mode == Mode::OneProcess {
            println!(
                "{:>7} {:>9} {:>7.2} {:>7.1} {:>13.0} {:>10.2} {:>7} {:>8}",
                count,
                "-",
                copy,
                bytes / 1e6 / copy,
                records / copy / count as f64,
                cpu / (bytes / 1e9),
                "-",
                "-"
            );
            break;
        }

        let joining = Worker::start(&args.strait, &config, &log("joins"))?;
        let joined_at = Instant::now();
        let mut with_it: Vec<&Worker> = workers.iter().collect();
        with_it.push(&joining);
        settled(&with_it, args.tasks, Duration::from_secs(120))?;
        let join = joined_at.elapsed().as_secs_f64();

        let leaving = workers.remove(0);
        let left_at = Instant::now();
        leaving.stop();
        let mut rest: Vec<&Worker> = workers.iter().collect();
        rest.push(&joining);
        settled(&rest, args.tasks, Duration::from_secs(120))?;
        let leave = left_at.elapsed().as_secs_f64();

        println!(
            "{:>7} {:>9.2} {:>7.2} {:>7.1} {:>13.0} {:>10.2} {:>7.2} {:>8.2}",
            count,
            settle.as_secs_f64(),
            copy,
            bytes / 1e6 / copy,
            records / copy / count as f64,
            cpu / (bytes / 1e9),
            join,
            leave
        );
        drop(workers);
        drop(joining);
    }
    Ok(())
}
