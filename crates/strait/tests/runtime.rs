//! `strait run` as a process under an operator's hand, between the run's shared Apache Kafka
//! clusters, with Kafka's `GetOffsetShell` and librdkafka as the independent clients at the
//! ends: what the binary adds to the runtime (whose supervision, pause and reload are tested in
//! this process by `crates/strait-runtime/tests/supervision.rs`):
//!
//! 1. `strait flow pause|resume` waits for the flow to pause and says so; an unknown flow is an
//!    error that names it.
//! 2. SIGHUP with a file that does not load changes nothing and says why, and so does `strait
//!    reload`, which exits non-zero; with a flow taken out of the file, `strait reload` says it
//!    stopped.
//! 3. SIGTERM in the middle of a burst: strait exits 0 after writing its map; the next run
//!    mirrors the rest, and B holds every record of A exactly once.
//!
//! And `--log-file` and `-v` for any command.

mod running;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use running::{run_to_end, write_properties, Strait};
use serde_json::Value;
use strait_testkit::{kafka_tool, Clusters, Names, Rdk, TestRecord};

/// The sum of the end offsets of `topic` on `bootstrap`, read with Kafka's `GetOffsetShell`
/// (0 while the topic does not exist).
fn end_offset(bootstrap: &str, topic: &str) -> i64 {
    let out = kafka_tool(
        "org.apache.kafka.tools.GetOffsetShell",
        &["--bootstrap-server", bootstrap, "--topic", topic],
    );
    out.lines()
        .filter_map(|l| l.rsplit(':').next()?.trim().parse::<i64>().ok())
        .sum()
}

/// Waits until `topic` on `bootstrap` ends at `want` (summed over partitions).
fn wait_end(strait: &Strait, bootstrap: &str, topic: &str, want: i64, secs: u64) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let end = end_offset(bootstrap, topic);
        if end == want {
            return;
        }
        assert!(
            end < want,
            "{topic} ends at {end}, beyond the {want} records of its source"
        );
        assert!(
            Instant::now() < deadline,
            "{topic} ends at {end}, not {want}, after {secs} s; log:\n{}",
            strait.log_text()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn records(prefix: &str, range: std::ops::Range<usize>, partitions: i32) -> Vec<TestRecord> {
    range
        .map(|i| {
            TestRecord::new(
                (i as i32) % partitions,
                None,
                Some(format!("{prefix}{i}").as_bytes()),
            )
        })
        .collect()
}

/// The values of `topic` on `bootstrap`, counted (a value seen twice counts 2).
fn value_counts(rdk: &Rdk, bootstrap: &str, topic: &str, count: usize) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for r in rdk.consume(bootstrap, topic, count, Duration::from_secs(60)) {
        let value = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
        *counts.entry(value).or_insert(0) += 1;
    }
    counts
}

fn flow_status(strait: &Strait, flow: &str) -> Value {
    let (code, report) = strait.get_json("/v1/status").expect("/v1/status");
    assert_eq!(code, 200, "{report}");
    report["flows"]
        .as_array()
        .and_then(|flows| flows.iter().find(|f| f["flow"] == flow).cloned())
        .unwrap_or(Value::Null)
}

/// The flows `a->b` (topic `orders`) and, with `b_to_a`, `b->a` (topic `payments`) between the
/// shared clusters, taking only this test's groups, without heartbeats (which MM2 mirrors
/// whatever the topic filter: other tests' too).
fn config_text(clusters: &Clusters, names: &Names, (a, b): (&str, &str), b_to_a: bool) -> String {
    let (orders, payments, groups) = (
        names.topic("orders"),
        names.topic("payments"),
        names.pattern(),
    );
    let back = if b_to_a {
        format!("{b}->{a}.enabled = true\n{b}->{a}.topics = {payments}\n{b}->{a}.groups = {groups}")
    } else {
        String::new()
    };
    format!(
        "clusters = {a}, {b}\n\
         {a}.bootstrap.servers = {}\n\
         {b}.bootstrap.servers = {}\n\
         {a}->{b}.enabled = true\n\
         {a}->{b}.topics = {orders}\n\
         {a}->{b}.groups = {groups}\n\
         {back}\n\
         emit.heartbeats.enabled = false\n\
         heartbeats.replication.enabled = false\n\
         replication.factor = 1\n\
         checkpoints.topic.replication.factor = 1\n\
         offset-syncs.topic.replication.factor = 1\n\
         heartbeats.topic.replication.factor = 1\n",
        clusters.source.bootstrap, clusters.target.bootstrap
    )
}

#[test]
fn the_process_takes_its_commands_and_signals() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let rdk = Rdk::new();
    let (a, b) = (names.alias("A"), names.alias("B"));
    let (ab, ba) = (format!("{a}->{b}"), format!("{b}->{a}"));
    let (orders, payments) = (names.topic("orders"), names.topic("payments"));
    let (remote_orders, remote_payments) = (format!("{a}.{orders}"), format!("{b}.{payments}"));
    let (on_a, on_b) = (&clusters.source.bootstrap, &clusters.target.bootstrap);
    rdk.create_topic(on_a, &orders, 2);
    rdk.produce(on_a, &orders, &records("o", 0..300, 2), "lz4");
    rdk.create_topic(on_b, &payments, 1);
    rdk.produce(on_b, &payments, &records("p", 0..50, 1), "none");
    let config = write_properties(
        clusters.dir(),
        &format!("runtime-{}.properties", names.id()),
        &config_text(&clusters, &names, (&a, &b), true),
    );
    let log = clusters
        .dir()
        .join(format!("strait-runtime-{}.log", names.id()));
    let mut strait = Strait::run(&config, log);
    wait_end(&strait, on_b, &remote_orders, 300, 90);
    wait_end(&strait, on_a, &remote_payments, 50, 90);

    // 1. Pause and resume through the command.
    let url = strait.url();
    let paused = run_to_end(clusters.dir(), &["flow", "pause", &ab, "--url", &url], &[]);
    assert!(paused.ok(), "{}", paused.both());
    assert!(
        paused.stdout.contains(&format!("{ab}: paused")),
        "{}",
        paused.both()
    );
    assert_eq!(flow_status(&strait, &ab)["state"], "paused");
    let resumed = run_to_end(clusters.dir(), &["flow", "resume", &ab, "--url", &url], &[]);
    assert!(resumed.ok(), "{}", resumed.both());
    assert!(
        resumed.stdout.contains(&format!("{ab}: running")),
        "{}",
        resumed.both()
    );
    let unknown = run_to_end(
        clusters.dir(),
        &["flow", "pause", "X->Y", "--url", &url],
        &[],
    );
    assert!(!unknown.ok(), "{}", unknown.both());
    assert!(
        unknown.stderr.contains("no flow X->Y"),
        "{}",
        unknown.both()
    );

    // 2. A file that does not load changes nothing; then B->A is taken out.
    let good = std::fs::read_to_string(&config).expect("config");
    std::fs::write(&config, format!("{good}\n{ab}.enabled = maybe\n")).expect("write");
    strait.signal("HUP");
    strait.log_until(20, "the config does not load");
    let refused = run_to_end(clusters.dir(), &["reload", "--url", &url], &[]);
    assert!(!refused.ok(), "{}", refused.both());
    assert!(refused.stderr.contains("enabled"), "{}", refused.both());
    assert_eq!(flow_status(&strait, &ba)["state"], "running");
    std::fs::write(&config, config_text(&clusters, &names, (&a, &b), false)).expect("write");
    let removed = run_to_end(clusters.dir(), &["reload", "--url", &url], &[]);
    assert!(removed.ok(), "{}", removed.both());
    // The file watch may have read the new file first: then it stopped B->A.
    let by_watch = strait
        .log_text()
        .lines()
        .any(|l| l.contains("flow removed from the config") && l.contains(&ba));
    assert!(
        by_watch
            || removed
                .stdout
                .lines()
                .any(|l| l.starts_with("stopped") && l.contains(&ba)),
        "{}\n{}",
        removed.both(),
        strait.log_text()
    );
    let (_, health) = strait.get_json("/healthz").expect("/healthz");
    assert_eq!(health["flows"], serde_json::json!([ab]));

    // 3. SIGTERM in the middle of a burst, then a new run: every order on B exactly once.
    let total = 300 + 20_000;
    let burst = {
        let (rdk, on_a, orders) = (Rdk::new(), on_a.clone(), orders.clone());
        std::thread::spawn(move || {
            for from in (300..total).step_by(2_000) {
                rdk.produce(&on_a, &orders, &records("o", from..from + 2_000, 2), "lz4");
            }
        })
    };
    // SIGTERM once the burst is flowing: strait is writing when it comes.
    let moving = end_offset(on_b, &remote_orders);
    let deadline = Instant::now() + Duration::from_secs(60);
    while end_offset(on_b, &remote_orders) == moving && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let termed = Instant::now();
    strait.signal("TERM");
    let status = strait
        .wait_exit(60)
        .expect("strait stops within 60 s of SIGTERM");
    let took = termed.elapsed();
    assert!(status.success(), "{status:?}\n{}", strait.log_text());
    // A normal stop warns of nothing (a worker handing back its units was a WARN line).
    let log = strait.log_text();
    let after_stop = log.split("stopping:").nth(1).unwrap_or_default();
    let warned: Vec<&str> = after_stop
        .lines()
        .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
        .collect();
    assert!(
        warned.is_empty(),
        "a clean stop warned:\n{}",
        warned.join("\n")
    );
    let stopped_at = end_offset(on_b, &remote_orders);
    let source_then = end_offset(on_a, &orders);
    eprintln!(
        "measured: strait exited {} ms after SIGTERM, leaving {stopped_at} orders on B while A \
         held {source_then} (of {total} by the burst's end)",
        took.as_millis()
    );
    burst.join().expect("burst producer");
    let strait = Strait::run(
        &config,
        clusters
            .dir()
            .join(format!("strait-runtime-{}-2.log", names.id())),
    );
    wait_end(&strait, on_b, &remote_orders, total as i64, 180);
    let counts = value_counts(&rdk, on_b, &remote_orders, total);
    assert_eq!(counts.len(), total, "every order on B");
    let doubled: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(doubled.is_empty(), "written twice: {doubled:?}");
    strait.stop();
}

/// `--log-file` takes the lines stderr would have had; `-v` raises what is logged.
#[test]
fn log_lines_go_to_the_log_file() {
    let dir = std::env::temp_dir().join(format!("strait-logfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let log = dir.join("strait.log");
    let port = running::free_port().to_string();
    let address = format!("127.0.0.1:{port}");
    let quiet = run_to_end(
        &dir,
        &["probe", "--bootstrap", &address, "--timeout-secs", "2"],
        &[],
    );
    assert!(!quiet.ok(), "{}", quiet.both());
    assert!(
        !quiet.stderr.contains("does not answer"),
        "without -v, probe keeps the client's retries out of its output: {}",
        quiet.both()
    );
    let logged = run_to_end(
        &dir,
        &[
            "probe",
            "--bootstrap",
            &address,
            "--timeout-secs",
            "2",
            "-v",
            "--log-file",
            log.to_str().expect("utf-8 path"),
        ],
        &[],
    );
    assert!(!logged.ok(), "{}", logged.both());
    let lines = std::fs::read_to_string(&log).expect("the log file exists");
    assert!(lines.contains("does not answer"), "{lines}");
    assert!(
        !logged.stderr.contains("does not answer"),
        "log lines went to stderr too: {}",
        logged.both()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
