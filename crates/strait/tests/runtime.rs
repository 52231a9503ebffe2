//! `strait run` under an operator's hand, against real Apache Kafka clusters A, B and C, with
//! Kafka's `GetOffsetShell` and librdkafka as the independent clients at the ends:
//!
//! 1. C is down when strait starts: its flow C->B waits and says why, A->B and B->A mirror;
//!    once C is up, C->B starts by itself.
//! 2. `strait flow pause 'A->B'`: nothing reaches B while it is paused; resumed, every record
//!    arrives once.
//! 3. A changed file reloads by itself: only the flow whose keys changed restarts; the unchanged
//!    flow keeps its run (and its longest pause across the reload is printed).
//! 4. A file that does not load (SIGHUP, `strait reload`) changes nothing and says why; a flow
//!    taken out of the file stops.
//! 5. SIGTERM in the middle of a burst: strait exits 0 after writing its map; the next run
//!    mirrors the rest, and B holds every record of A exactly once.

mod running;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use running::{run_to_end, write_properties, Strait};
use serde_json::Value;
use strait_testkit::{kafka_tool, Clusters, Rdk, TestRecord, Which};

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

fn config_text(a: &str, b: &str, c: &str, b_to_a: &str) -> String {
    format!(
        "clusters = A, B, C\n\
         A.bootstrap.servers = {a}\n\
         B.bootstrap.servers = {b}\n\
         C.bootstrap.servers = {c}\n\
         A->B.enabled = true\n\
         A->B.topics = orders\n\
         C->B.enabled = true\n\
         C->B.topics = events\n\
         {b_to_a}\n\
         replication.factor = 1\n\
         checkpoints.topic.replication.factor = 1\n\
         offset-syncs.topic.replication.factor = 1\n\
         heartbeats.topic.replication.factor = 1\n\
         emit.checkpoints.interval.seconds = 1\n"
    )
}

#[test]
fn flows_wait_pause_reload_and_stop_on_their_own() {
    let p1 = Clusters::start();
    let mut p2 = Clusters::start();
    let rdk = Rdk::new();
    let (a, b, c) = (
        p1.source.bootstrap.clone(),
        p1.target.bootstrap.clone(),
        p2.source.bootstrap.clone(),
    );
    rdk.create_topic(&a, "orders", 2);
    rdk.produce(&a, "orders", &records("o", 0..300, 2), "lz4");
    rdk.create_topic(&b, "payments", 1);
    rdk.produce(&b, "payments", &records("p", 0..50, 1), "none");
    rdk.create_topic(&b, "refunds", 1);
    rdk.produce(&b, "refunds", &records("f", 0..10, 1), "none");
    rdk.create_topic(&c, "events", 1);
    rdk.produce(&c, "events", &records("e", 0..100, 1), "zstd");
    p2.stop_broker(Which::Source);

    // 1. C is down at start.
    let b_to_a = "B->A.enabled = true\nB->A.topics = payments";
    let config = write_properties(
        p1.dir(),
        "runtime.properties",
        &config_text(&a, &b, &c, b_to_a),
    );
    let launched = Instant::now();
    let mut strait = Strait::run(&config, p1.dir().join("strait.log"));
    wait_end(&strait, &b, "A.orders", 300, 90);
    wait_end(&strait, &a, "B.payments", 50, 90);
    // Its first attempt gives up when no broker of C answered for 10 s.
    let deadline = Instant::now() + Duration::from_secs(150);
    let waiting = loop {
        let status = flow_status(&strait, "C->B");
        if status["last_error"]["message"].is_string() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "C->B says nothing of C: {status}\n{}",
            strait.log_text()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    eprintln!(
        "measured: C->B said why it waits {:.1} s after strait started",
        launched.elapsed().as_secs_f64()
    );
    assert!(
        ["starting", "waiting"].contains(&waiting["state"].as_str().unwrap_or_default()),
        "{waiting}"
    );
    let why = waiting["last_error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("cannot reach source C"), "{waiting}");
    let (code, ready) = strait.get_json("/readyz").expect("/readyz");
    assert_eq!(code, 503, "not ready while C->B waits: {ready}");
    strait.log_until(10, "this one retries");
    p2.start_broker(Which::Source);
    wait_end(&strait, &b, "C.events", 100, 120);
    let events = value_counts(&rdk, &b, "C.events", 100);
    assert_eq!(events.len(), 100, "C.events holds each event once");
    let deadline = Instant::now() + Duration::from_secs(60);
    while strait.get("/readyz").map(|(code, _)| code).ok() != Some(200) {
        assert!(
            Instant::now() < deadline,
            "not ready once C is up: {:?}",
            strait.get("/readyz")
        );
        std::thread::sleep(Duration::from_millis(300));
    }

    // 2. Pause and resume A->B.
    let url = strait.url();
    let paused = run_to_end(p1.dir(), &["flow", "pause", "A->B", "--url", &url], &[]);
    assert!(paused.ok(), "{}", paused.both());
    assert!(paused.stdout.contains("A->B: paused"), "{}", paused.both());
    assert_eq!(flow_status(&strait, "A->B")["state"], "paused");
    let (code, ready) = strait.get_json("/readyz").expect("/readyz");
    assert_eq!(
        code, 200,
        "a paused flow is deliberate, still ready: {ready}"
    );
    rdk.produce(&a, "orders", &records("o", 300..500, 2), "lz4");
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(
        end_offset(&b, "A.orders"),
        300,
        "records reached B while A->B was paused"
    );
    let resumed = run_to_end(p1.dir(), &["flow", "resume", "A->B", "--url", &url], &[]);
    assert!(resumed.ok(), "{}", resumed.both());
    wait_end(&strait, &b, "A.orders", 500, 60);
    let orders = value_counts(&rdk, &b, "A.orders", 500);
    assert_eq!(orders.len(), 500, "each of the 500 orders once on B");
    assert!(orders.values().all(|n| *n == 1));
    let unknown = run_to_end(p1.dir(), &["flow", "pause", "X->Y", "--url", &url], &[]);
    assert!(!unknown.ok(), "{}", unknown.both());
    assert!(
        unknown.stderr.contains("no flow X->Y"),
        "{}",
        unknown.both()
    );

    // 3. The file changes B->A only, under a steady producer into A's orders: A->B keeps its run.
    let producing = Arc::new(AtomicBool::new(true));
    let producer = {
        let (rdk, a, producing) = (Rdk::new(), a.clone(), Arc::clone(&producing));
        std::thread::spawn(move || {
            let mut next = 500;
            while producing.load(Ordering::Relaxed) {
                rdk.produce(&a, "orders", &records("o", next..next + 20, 2), "lz4");
                next += 20;
            }
            next
        })
    };
    let before = flow_status(&strait, "A->B");
    let edited = Instant::now();
    write_properties(
        p1.dir(),
        "runtime.properties",
        &config_text(
            &a,
            &b,
            &c,
            "B->A.enabled = true\nB->A.topics = payments, refunds",
        ),
    );
    // Sampled while the reload happens: when A->B's count of records last moved.
    let mut last_moved = Instant::now();
    let mut last_count = before["records"].as_u64().unwrap_or(0);
    let mut longest_pause = Duration::ZERO;
    let reloaded_at = loop {
        let now = flow_status(&strait, "A->B");
        let count = now["records"].as_u64().unwrap_or(0);
        if count != last_count {
            longest_pause = longest_pause.max(last_moved.elapsed());
            last_moved = Instant::now();
            last_count = count;
        }
        if strait.log_text().contains("config reloaded") {
            break Instant::now();
        }
        assert!(
            edited.elapsed() < Duration::from_secs(30),
            "the changed file was not reloaded within 30 s:\n{}",
            strait.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    // A little after the reload too, so a pause it caused shows.
    while reloaded_at.elapsed() < Duration::from_secs(3) {
        let count = flow_status(&strait, "A->B")["records"]
            .as_u64()
            .unwrap_or(0);
        if count != last_count {
            longest_pause = longest_pause.max(last_moved.elapsed());
            last_moved = Instant::now();
            last_count = count;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "measured: A->B's longest pause across the reload that restarted B->A: {} ms",
        longest_pause.as_millis()
    );
    let log = strait.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("config reloaded"))
        .unwrap_or_default();
    assert!(line.contains("restarted=B->A"), "{line}");
    assert!(line.contains("unchanged=A->B, C->B"), "{line}");
    let after = flow_status(&strait, "A->B");
    let kept = after["uptime_seconds"].as_f64().unwrap_or(0.0)
        - before["uptime_seconds"].as_f64().unwrap_or(0.0);
    assert!(
        kept + 0.5 >= edited.elapsed().as_secs_f64() - 1.0,
        "A->B was restarted by a reload that did not change it: {before} then {after}"
    );
    assert!(
        after["records"].as_u64() > before["records"].as_u64(),
        "A->B mirrored nothing across the reload: {before} then {after}"
    );
    wait_end(&strait, &a, "B.refunds", 10, 60);
    producing.store(false, Ordering::Relaxed);
    let produced = producer.join().expect("producer thread");

    // 4. A file that does not load changes nothing; then B->A is taken out.
    let good = std::fs::read_to_string(&config).expect("config");
    std::fs::write(&config, format!("{good}\nA->B.enabled = maybe\n")).expect("write");
    strait.signal("HUP");
    strait.log_until(20, "the config does not load");
    let refused = run_to_end(p1.dir(), &["reload", "--url", &url], &[]);
    assert!(!refused.ok(), "{}", refused.both());
    assert!(refused.stderr.contains("enabled"), "{}", refused.both());
    assert_eq!(flow_status(&strait, "B->A")["state"], "running");
    std::fs::write(&config, config_text(&a, &b, &c, "")).expect("write");
    let removed = run_to_end(p1.dir(), &["reload", "--url", &url], &[]);
    assert!(removed.ok(), "{}", removed.both());
    // The file watch may have read the new file first: then it stopped B->A.
    let by_watch = strait
        .log_text()
        .lines()
        .any(|l| l.contains("flow removed from the config") && l.contains("B->A"));
    assert!(
        by_watch
            || removed
                .stdout
                .lines()
                .any(|l| l.starts_with("stopped") && l.contains("B->A")),
        "{}\n{}",
        removed.both(),
        strait.log_text()
    );
    let (_, health) = strait.get_json("/healthz").expect("/healthz");
    assert_eq!(health["flows"], serde_json::json!(["A->B", "C->B"]));

    // 5. SIGTERM in the middle of a burst, then a new run: every order on B exactly once.
    wait_end(&strait, &b, "A.orders", produced as i64, 120);
    let total = produced + 20_000;
    let burst = {
        let (rdk, a) = (Rdk::new(), a.clone());
        std::thread::spawn(move || {
            for from in (produced..total).step_by(2_000) {
                rdk.produce(&a, "orders", &records("o", from..from + 2_000, 2), "lz4");
            }
        })
    };
    // SIGTERM once the burst is flowing: strait is writing when it comes.
    let moving = end_offset(&b, "A.orders");
    let deadline = Instant::now() + Duration::from_secs(60);
    while end_offset(&b, "A.orders") == moving && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let termed = Instant::now();
    strait.signal("TERM");
    let status = strait
        .wait_exit(60)
        .expect("strait stops within 60 s of SIGTERM");
    let took = termed.elapsed();
    assert!(status.success(), "{status:?}\n{}", strait.log_text());
    let stopped_at = end_offset(&b, "A.orders");
    let source_then = end_offset(&a, "orders");
    eprintln!(
        "measured: strait exited {} ms after SIGTERM, leaving {stopped_at} orders on B while A \
         held {source_then} (of {total} by the burst's end)",
        took.as_millis()
    );
    burst.join().expect("burst producer");
    let strait = Strait::run(&config, p1.dir().join("strait-2.log"));
    wait_end(&strait, &b, "A.orders", total as i64, 180);
    let orders = value_counts(&rdk, &b, "A.orders", total);
    assert_eq!(orders.len(), total, "every order on B");
    let doubled: Vec<_> = orders.iter().filter(|(_, n)| **n > 1).collect();
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
        !quiet.stderr.contains("cannot connect"),
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
    assert!(lines.contains("cannot connect"), "{lines}");
    assert!(
        !logged.stderr.contains("cannot connect"),
        "log lines went to stderr too: {}",
        logged.both()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
