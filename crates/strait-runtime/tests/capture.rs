//! A group's position reaches the target's checkpoints within seconds whatever `tasks.max`
//! is: a flow run by workers in two units, where the unit that writes checkpoints (unit 0)
//! translates through the map as every unit writes it. Before, unit 0 re-read that map every
//! `emit.checkpoints.interval.seconds` (60 s): a commit on a partition of unit 1 reached the
//! checkpoints up to a minute later while the capture gauge said "captured".
//!
//! Then `/v1/readiness` of that instance says ready and exact, poll after poll: its map
//! follows both units' writes.
//!
//! On the run's shared clusters, with this test's own names; checkpoints read back with
//! librdkafka and decoded as MM2's `Checkpoint`.

mod running;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use running::{write_flow_config, Running};
use strait_testkit::{Clusters, Names, Rdk, TestRecord};
use strait_wire::mm2::Checkpoint;

const PER_PARTITION: i64 = 20;

#[test]
fn with_two_units_a_commit_is_checkpointed_within_seconds() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let rdk = Rdk::new();
    let (a, b) = (names.alias("source"), names.alias("target"));
    let topic = names.topic("orders");
    let group = names.group("billing-app");
    let remote = format!("{a}.{topic}");
    let checkpoints = format!("{a}.checkpoints.internal");
    let (src, dst) = (&clusters.source.bootstrap, &clusters.target.bootstrap);
    rdk.create_topic(src, &topic, 2);
    let records: Vec<TestRecord> = (0..2 * PER_PARTITION)
        .map(|i| TestRecord::new((i % 2) as i32, None, Some(format!("r{i}").as_bytes())))
        .collect();
    rdk.produce(src, &topic, &records, "lz4");
    // Made here so that they can be read before strait makes them (strait keeps them as they
    // are): the remote topic, and the checkpoints topic as MM2 makes it.
    rdk.create_topic(dst, &remote, 2);
    rdk.create_topic_with_configs(dst, &checkpoints, 1, &[("cleanup.policy", "compact")]);

    // Workers (the default) in two units, both taken by this one process.
    let config = write_flow_config(
        &clusters,
        (&a, &b),
        &format!("capture-{a}.properties"),
        &format!(
            "topics = {topic}\n\
             groups = {}\n\
             tasks.max = 2\n\
             heartbeats.replication.enabled = false\n",
            names.pattern()
        ),
    );
    let log = clusters.dir().join(format!("strait-capture-{a}.log"));
    let strait = Running::start(&config, log);
    let mirrored = rdk.consume(dst, &remote, records.len(), Duration::from_secs(90));
    assert_eq!(mirrored.len(), records.len());

    // The group commits at the end of both partitions, one of them unit 1's.
    rdk.commit(
        src,
        &group,
        &topic,
        &[(0, PER_PARTITION), (1, PER_PARTITION)],
    );
    let committed = Instant::now();
    let read = rdk.consume(dst, &checkpoints, 2, Duration::from_secs(10));
    let took = committed.elapsed();
    let last: BTreeMap<i32, (i64, i64)> = read
        .iter()
        .map(|r| {
            let c = Checkpoint::decode(
                r.key.as_deref().unwrap_or_default(),
                r.value.as_deref().unwrap_or_default(),
            )
            .expect("a checkpoint");
            assert_eq!(
                (c.group.as_str(), c.topic.as_str()),
                (group.as_str(), remote.as_str())
            );
            (c.partition, (c.upstream_offset, c.downstream_offset))
        })
        .collect();
    assert_eq!(
        last,
        BTreeMap::from([
            (0, (PER_PARTITION, PER_PARTITION)),
            (1, (PER_PARTITION, PER_PARTITION))
        ]),
        "both partitions' positions checkpointed; log:\n{}",
        strait.log_text()
    );
    eprintln!("both positions checkpointed {took:?} after the commit");

    // Caught up and captured: the instance that runs unit 0 answers ready and exact, poll
    // after poll, for both units' partitions (its map follows unit 1's writes too); then
    // ready, 100 polls, while a producer writes on both partitions all along (the flow keeps
    // up: never a 503; not exact while the last records wait to be mirrored, which is true).
    let path = format!("/v1/readiness?flow={a}-%3E{b}");
    for poll in 0..10 {
        let (code, body) = strait.get_json(&path).expect("readiness");
        assert_eq!(code, 200, "poll {poll}: {body}");
        assert_eq!(
            body["flows"][0]["exact"],
            serde_json::Value::Bool(true),
            "{body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let stop = std::sync::Arc::clone(&stop);
        let (rdk, src, topic) = (rdk.clone(), src.clone(), topic.clone());
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let more: Vec<TestRecord> = (0..20)
                    .map(|i| TestRecord::new(i % 2, None, Some(format!("load{n}-{i}").as_bytes())))
                    .collect();
                rdk.produce(&src, &topic, &more, "lz4");
                n += 1;
            }
            n
        })
    };
    for poll in 0..100 {
        let (code, body) = strait.get_json(&path).expect("readiness");
        assert_eq!(code, 200, "poll {poll} under load: {body}");
        assert_eq!(
            body["flows"][0]["ready"],
            serde_json::Value::Bool(true),
            "{body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let batches = load.join().expect("the producer");
    assert!(batches > 3, "the load was steady: {batches} batches of 20");
    strait.shutdown();
}
