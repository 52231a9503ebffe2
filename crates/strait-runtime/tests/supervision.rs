//! The runtime under an operator's hand, started in this process, against real Apache Kafka
//! clusters A, B and C, with Kafka's `GetOffsetShell` and librdkafka as the independent clients
//! at the ends:
//!
//! 1. C is down when the runtime starts: its flow C->B waits and says why, A->B and B->A
//!    mirror; once C is up, C->B starts by itself.
//! 2. `pause("A->B")`: nothing reaches B while it is paused; resumed, every record arrives
//!    once; an unknown flow is named.
//! 3. A changed file reloads by itself: only the flow whose keys changed restarts; the unchanged
//!    flow keeps its run (and its longest pause across the reload is printed).
//! 4. A file that does not load changes nothing and says why; a flow taken out of the file
//!    stops.
//!
//! What the process adds is tested on the binary (`crates/strait/tests/runtime.rs`): signals,
//! exit codes, the `strait flow` and `strait reload` commands, and a stop in the middle of a
//! burst (SIGTERM, which the binary turns into `Runtime::shutdown`) after which the next run
//! holds every record once.

mod running;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use running::{write_properties, Running};
use strait_core::status::{FlowState, FlowStatus};
use strait_runtime::ControlError;
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
fn wait_end(strait: &Running, bootstrap: &str, topic: &str, want: i64, secs: u64) {
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

/// Waits up to `secs` seconds for `flow` to show `state`.
fn wait_state(strait: &Running, flow: &str, state: FlowState, secs: u64) -> FlowStatus {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let status = strait.flow_status(flow);
        if status.state == state {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "{flow} is not {state:?} within {secs} s: {status:?}\n{}",
            strait.log_text()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
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
    let strait = Running::start(&config, p1.dir().join("strait.log"));
    wait_end(&strait, &b, "A.orders", 300, 90);
    wait_end(&strait, &a, "B.payments", 50, 90);
    // Its first attempt gives up when no broker of C answered for 10 s.
    let deadline = Instant::now() + Duration::from_secs(150);
    let waiting = loop {
        let status = strait.flow_status("C->B");
        if status.last_error.is_some() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "C->B says nothing of C: {status:?}\n{}",
            strait.log_text()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    eprintln!(
        "measured: C->B said why it waits {:.1} s after the runtime started",
        launched.elapsed().as_secs_f64()
    );
    assert!(
        [FlowState::Starting, FlowState::Waiting].contains(&waiting.state),
        "{waiting:?}"
    );
    let why = waiting
        .last_error
        .as_ref()
        .map_or("", |e| e.message.as_str());
    assert!(why.contains("cannot reach source C"), "{waiting:?}");
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
    let asked = strait.pause("A->B").expect("pause A->B");
    assert!(asked.changed, "{asked:?}");
    // Paused once its round finished and its map is written.
    wait_state(&strait, "A->B", FlowState::Paused, 60);
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
    let asked = strait.resume("A->B").expect("resume A->B");
    assert!(asked.changed, "{asked:?}");
    wait_end(&strait, &b, "A.orders", 500, 60);
    let orders = value_counts(&rdk, &b, "A.orders", 500);
    assert_eq!(orders.len(), 500, "each of the 500 orders once on B");
    assert!(orders.values().all(|n| *n == 1));
    let unknown = strait.pause("X->Y").expect_err("X->Y is no flow");
    assert!(
        matches!(unknown, ControlError::NoFlow { .. }),
        "{unknown:?}"
    );
    assert!(unknown.to_string().contains("no flow X->Y"), "{unknown}");

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
    let before = strait.flow_status("A->B");
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
    let mut last_count = before.records;
    let mut longest_pause = Duration::ZERO;
    let reloaded_at = loop {
        let count = strait.flow_status("A->B").records;
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
        let count = strait.flow_status("A->B").records;
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
    let after = strait.flow_status("A->B");
    let kept = after.uptime_seconds - before.uptime_seconds;
    assert!(
        kept + 0.5 >= edited.elapsed().as_secs_f64() - 1.0,
        "A->B was restarted by a reload that did not change it: {before:?} then {after:?}"
    );
    assert!(
        after.records > before.records,
        "A->B mirrored nothing across the reload: {before:?} then {after:?}"
    );
    wait_end(&strait, &a, "B.refunds", 10, 60);
    producing.store(false, Ordering::Relaxed);
    let produced = producer.join().expect("producer thread");

    // 4. A file that does not load changes nothing; then B->A is taken out.
    let good = std::fs::read_to_string(&config).expect("config");
    std::fs::write(&config, format!("{good}\nA->B.enabled = maybe\n")).expect("write");
    let refused = strait.reload().expect_err("a file that does not load");
    assert!(matches!(refused, ControlError::Reload(_)), "{refused:?}");
    assert!(refused.to_string().contains("enabled"), "{refused}");
    strait.log_until(20, "the config does not load");
    assert_eq!(strait.flow_status("B->A").state, FlowState::Running);
    std::fs::write(&config, config_text(&a, &b, &c, "")).expect("write");
    let removed = strait.reload().expect("reload");
    // The file watch may have read the new file first: then it stopped B->A.
    let by_watch = strait
        .log_text()
        .lines()
        .any(|l| l.contains("flow removed from the config") && l.contains("B->A"));
    assert!(
        by_watch || removed.stopped == ["B->A"],
        "{removed:?}\n{}",
        strait.log_text()
    );
    let (_, health) = strait.get_json("/healthz").expect("/healthz");
    assert_eq!(health["flows"], serde_json::json!(["A->B", "C->B"]));

    // What the producer wrote reaches B, then the runtime stops when asked.
    wait_end(&strait, &b, "A.orders", produced as i64, 120);
    strait.shutdown();
}
