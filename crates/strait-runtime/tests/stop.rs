//! A graceful stop of a worker finishes its last round: the worker keeps the
//! lease its units write under until they have stopped, so the round a stop finds under way is
//! committed, not refused and left to abort. Read `read_uncommitted` (Kafka's default for a
//! consumer), the target then holds every source record once across the stop and the next
//! owner's start. Before, the lease was revoked the moment the stop came: that round's
//! transaction was aborted at the next start, and a `read_uncommitted` consumer read its
//! records and then the next owner's copies of them.
//!
//! On the run's shared clusters, with this test's own names; the target read with librdkafka.

mod running;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use running::{write_flow_config, Running};
use strait_testkit::{Clusters, Names, Rdk, TestRecord};

/// Produce calls of records of about 1 KiB: rounds of megabytes, written back to back, so a
/// stop finds one under way with its records sent and its commit to come.
const CALLS: usize = 10;
const PER_CALL: usize = 3000;

#[test]
fn a_stopped_exactly_once_worker_commits_its_last_round() {
    stop_mid_copy_and_go_on("enabled");
}

/// Without exactly-once, the stopped worker writes its map for every round it wrote: the next
/// owner starts where the map ends and matches nothing (before, the lease was gone before the
/// last map write, and the next owner re-matched thousands of records on the target).
#[test]
fn a_stopped_worker_writes_its_map_before_it_leaves() {
    stop_mid_copy_and_go_on("disabled");
}

/// A flow run by one worker, `exactly.once.source.support` as given, stopped mid-copy; a
/// second start finishes it. Every record once on the target, read_uncommitted, and nothing
/// the second start had to match against the target beyond the map.
fn stop_mid_copy_and_go_on(exactly_once: &str) {
    let clusters = Clusters::shared();
    let names = Names::new();
    let rdk = Rdk::new();
    let (a, b) = (names.alias("source"), names.alias("target"));
    let topic = names.topic("orders");
    let remote = format!("{a}.{topic}");
    let (src, dst) = (&clusters.source.bootstrap, &clusters.target.bootstrap);
    rdk.create_topic(src, &topic, 2);
    for call in 0..CALLS {
        let records: Vec<TestRecord> = (0..PER_CALL)
            .map(|i| {
                let value = format!("c{call}-r{i}-{}", "x".repeat(1000));
                TestRecord::new((i % 2) as i32, None, Some(value.as_bytes()))
            })
            .collect();
        rdk.produce(src, &topic, &records, "none");
    }
    let total = CALLS * PER_CALL;
    let config = write_flow_config(
        &clusters,
        (&a, &b),
        &format!("stop-{a}.properties"),
        &format!(
            "topics = {topic}\n\
             groups = {}\n\
             heartbeats.replication.enabled = false\n\
             emit.checkpoints.enabled = false\n\
             exactly.once.source.support = {exactly_once}\n",
            names.pattern()
        ),
    );
    let flow = format!("{a}->{b}");
    let log = std::env::temp_dir().join(format!("strait-stop-{a}.log"));

    // The first owner copies part of it and is stopped mid-copy.
    let first = Running::start(&config, log.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = first.status();
        let copied = status
            .flows
            .iter()
            .find(|f| f.flow == flow)
            .map_or(0, |f| f.records);
        if copied > 0 {
            assert!(
                (copied as usize) < total,
                "the copy ended before the stop ({copied} of {total}): more rounds needed"
            );
            break;
        }
        assert!(Instant::now() < deadline, "nothing copied within 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    first.shutdown();

    // The next owner (the same unit, so the same transactional id) copies the rest.
    let second = Running::start(&config, log);
    // Read from the start, read_uncommitted: a copy read twice (an aborted round, then the
    // next owner's copy of it) comes before the end, so `total` records then miss some others.
    let uncommitted = Rdk::new().with_client_config(&[("isolation.level", "read_uncommitted")]);
    let read = uncommitted.consume(dst, &remote, total, Duration::from_secs(90));
    // Records past the persisted map that the second start found on the target and matched:
    // what the first one wrote and could not record.
    let recovered = second.metrics().sum(
        "strait_recovered_records_total",
        &[("source", a.as_str()), ("target", b.as_str())],
    );
    second.shutdown();
    assert_eq!(recovered, 0.0, "the first owner's map covered all it wrote");
    let mut seen: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
    for r in &read {
        *seen.entry(r.value.clone().unwrap_or_default()).or_default() += 1;
    }
    let twice = seen.values().filter(|n| **n > 1).count();
    assert_eq!(
        (seen.len(), twice),
        (total, 0),
        "every record once, read_uncommitted, across the stop; log: {}",
        clusters.dir().display()
    );
}
