//! A source topic deleted while strait mirrors it (`docs/mirroring.md`, "Source topics
//! deleted"): with `strait.sync.topic.deletions.enabled` its remote topic goes too, and a topic
//! created again under the name is mirrored afresh from its start; without, the remote topic
//! stays with all its records, as with MM2. A topic that merely stops passing the filter is
//! never deleted: `flow/topics.rs` unit tests (`confirm_deleted` reads the source's unfiltered
//! listing).

mod common;

use std::time::Duration;

use strait_core::flow::Flow;
use strait_kafka::admin::{IsolationLevel, NewTopic, OffsetSpec};
use strait_kafka::{Client, TopicPartition};
use strait_testkit::{Clusters, Names, Rdk, TestRecord};
use strait_wire::offset_map::{SourcePartition, Translation};
use tokio::time::Instant;

/// `n` records over `partitions` partitions, with a header and a timestamp of their own, so
/// that every byte a copy must keep is checked.
fn records(partitions: i32, n: usize, tag: &str) -> Vec<TestRecord> {
    let stamp = common::now_ms() - 60_000;
    (0..n)
        .map(|i| {
            TestRecord::new(
                i as i32 % partitions,
                Some(format!("{tag}-k{i}").as_bytes()),
                Some(format!("{tag}-value-{i}").repeat(3).as_bytes()),
            )
            .with_header("h", Some(tag.as_bytes()))
            .with_timestamp(stamp + i as i64)
        })
        .collect()
}

/// `want` sorted as `Rdk::consume` returns records: by partition, then in the order written.
fn by_partition(want: &[TestRecord]) -> Vec<&TestRecord> {
    let mut sorted: Vec<&TestRecord> = want.iter().collect();
    sorted.sort_by_key(|r| r.partition);
    sorted
}

/// Key, value, headers and timestamp equal, record by record.
fn assert_same(got: &[TestRecord], want: &[TestRecord]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(by_partition(want)).enumerate() {
        assert!(g.same_payload(w), "record {i}: {g:?} vs {w:?}");
        assert_eq!(g.timestamp_ms, w.timestamp_ms, "record {i}");
    }
}

/// `(log start, end)` of `topic`'s partition `p`.
async fn log_range(client: &Client, topic: &str, p: i32) -> (i64, i64) {
    let tp = TopicPartition::new(topic, p);
    let mut ends = [0; 2];
    for (end, spec) in ends
        .iter_mut()
        .zip([OffsetSpec::Earliest, OffsetSpec::Latest])
    {
        *end = client
            .list_offset(&tp, spec, IsolationLevel::ReadUncommitted)
            .await
            .unwrap()
            .offset;
    }
    (ends[0], ends[1])
}

async fn exists(client: &Client, topic: &str) -> bool {
    client
        .refresh_metadata()
        .await
        .unwrap()
        .topics
        .contains_key(topic)
}

/// Creates `topic` once Kafka lets it (right after a deletion it may not yet), and waits for
/// its partitions' leaders.
async fn create(client: &Client, topic: &str, partitions: i32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match client.create_topic(NewTopic::new(topic, partitions)).await {
            Ok(()) => break,
            Err(e) => assert!(Instant::now() < deadline, "{e}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for p in 0..partitions {
        let tp = TopicPartition::new(topic, p);
        let deadline = Instant::now() + Duration::from_secs(30);
        while client
            .list_offset(&tp, OffsetSpec::Latest, IsolationLevel::ReadUncommitted)
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "{topic} has no leader");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

async fn delete(client: &Client, topic: &str) {
    let deleted = client.delete_topics(&[topic]).await.unwrap();
    assert!(deleted.iter().all(|(_, r)| r.is_ok()), "{deleted:?}");
}

/// Runs rounds for `how_long`, none of which may fail.
async fn rounds_for(flow: &mut Flow, how_long: Duration) {
    let until = Instant::now() + how_long;
    while Instant::now() < until {
        flow.round().await.expect("the flow goes on");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const REFRESH: &str = "refresh.topics.interval.seconds = 1\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_source_topic_takes_its_remote_topic_only_when_asked() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let (a, b) = (names.alias("source"), names.alias("target"));
    // Only this test's groups, and no heartbeats (other tests' on the shared clusters): the
    // flows mirror `kept` and `t` alone.
    let own = format!(
        "groups = {}\nheartbeats.replication.enabled = false\n",
        names.pattern()
    );
    let (kept_topic, t) = (names.topic("kept"), names.topic("t"));
    let (remote_kept, remote_t) = (format!("{a}.{kept_topic}"), format!("{a}.{t}"));
    let rdk = Rdk::new();
    let (source, target) = (&clusters.source.bootstrap, &clusters.target.bootstrap);
    let src = common::client(source).await;
    let tgt = common::client(target).await;

    // Off (the default): the source topic is deleted, the remote topic stays with everything.
    create(&src, &kept_topic, 1).await;
    let kept = records(1, 40, "kept");
    rdk.produce(source, &kept_topic, &kept, "lz4");
    let mut flow = common::start_flow_between(
        (&a, &b),
        source,
        target,
        &format!("{REFRESH}{own}{a}->{b}.topics = {kept_topic}"),
    )
    .await;
    flow.run_until_caught_up().await.unwrap();
    assert_eq!(log_range(&tgt, &remote_kept, 0).await, (0, 40));
    delete(&src, &kept_topic).await;
    // Five refresh intervals: the two-refresh rule is met twice over.
    rounds_for(&mut flow, Duration::from_secs(5)).await;
    assert!(!exists(&src, &kept_topic).await);
    assert!(exists(&tgt, &remote_kept).await, "the remote topic is kept");
    assert_eq!(log_range(&tgt, &remote_kept, 0).await, (0, 40));
    assert_same(
        &rdk.consume(target, &remote_kept, 40, Duration::from_secs(30)),
        &kept,
    );
    assert!(flow.halted().is_empty(), "{:?}", flow.halted());
    // The partition stopped: a run to the end does not wait on it.
    flow.run_until_caught_up().await.unwrap();
    drop(flow);

    // On: the remote topic is deleted, and the topic made again is mirrored from its start.
    create(&src, &t, 2).await;
    let old = records(2, 60, "old");
    rdk.produce(source, &t, &old, "zstd");
    let extra = format!(
        "{REFRESH}{own}{a}->{b}.topics = {t}\n\
         {a}->{b}.strait.sync.topic.deletions.enabled = true"
    );
    let mut flow = common::start_flow_between((&a, &b), source, target, &extra).await;
    flow.run_until_caught_up().await.unwrap();
    assert_same(
        &rdk.consume(target, &remote_t, 60, Duration::from_secs(30)),
        &old,
    );
    delete(&src, &t).await;
    let deleted_at = Instant::now();
    let deadline = deleted_at + Duration::from_secs(60);
    while exists(&tgt, &remote_t).await {
        assert!(Instant::now() < deadline, "the remote topic is still there");
        flow.round().await.expect("the flow goes on");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Not at the first refresh that missed it: at the one after.
    assert!(
        deleted_at.elapsed() >= Duration::from_millis(900),
        "deleted after {:?}",
        deleted_at.elapsed()
    );
    assert!(
        flow.map().iter().all(|(sp, _)| sp.topic != t),
        "the map forgot t"
    );
    assert!(flow.topics().iter().all(|topic| topic.source != t));
    // The other flow's remote topic and strait's own topics are untouched.
    assert!(exists(&tgt, &remote_kept).await);
    assert!(exists(&tgt, &format!("strait-offset-map.{a}.internal")).await);

    create(&src, &t, 2).await;
    let new = records(2, 30, "new");
    rdk.produce(source, &t, &new, "none");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        flow.round().await.expect("the flow goes on");
        let mirrored = flow
            .map()
            .iter()
            .filter(|(sp, _)| sp.topic == t)
            .filter_map(|(_, m)| m.src_end())
            .sum::<i64>();
        if mirrored >= 30 {
            break;
        }
        assert!(Instant::now() < deadline, "the new topic is not mirrored");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    flow.run_until_caught_up().await.unwrap();
    assert!(flow.halted().is_empty(), "{:?}", flow.halted());
    for p in 0..2 {
        assert_eq!(
            log_range(&tgt, &remote_t, p).await,
            (0, 15),
            "partition {p}"
        );
        let map = flow.map().partition(&SourcePartition::new(&t, p)).unwrap();
        for offset in [0, 14] {
            assert_eq!(
                map.translate(offset),
                Translation::Exact { target: offset },
                "partition {p} offset {offset}"
            );
        }
    }
    assert_same(
        &rdk.consume(target, &remote_t, 30, Duration::from_secs(30)),
        &new,
    );
    drop(flow);

    // A restart finds the map written without the old topic: nothing halted, nothing again.
    let mut flow = common::start_flow_between((&a, &b), source, target, &extra).await;
    assert!(flow.halted().is_empty(), "{:?}", flow.halted());
    flow.run_until_caught_up().await.unwrap();
    assert_eq!(flow.stats().records, 0, "{:?}", flow.stats());
    assert_eq!(flow.stats().duplicate_records, 0, "{:?}", flow.stats());
}

/// With `tasks.max = 2` (two units, each a flow of its own, in transactions), a transactional
/// source topic of 4 partitions is deleted and created again: unit 0 deletes the remote topic,
/// and each unit forgets its own partitions of it once the remote topic is gone, so the topic
/// made again is mirrored afresh in every partition, not halted in the units but unit 0; and
/// both units restarted find nothing to halt and nothing to write again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_created_again_is_mirrored_afresh_by_every_unit() {
    use strait_core::flow::FlowOptions;
    use strait_core::scale::UnitFilter;
    use strait_kafka::produce::ProducerConfig;

    let clusters = Clusters::shared();
    let names = Names::new();
    let (a, b) = (names.alias("source"), names.alias("target"));
    let t = names.topic("t");
    let remote = format!("{a}.{t}");
    let rdk = Rdk::new();
    let (source, target) = (&clusters.source.bootstrap, &clusters.target.bootstrap);
    let src = common::client(source).await;
    let tgt = common::client(target).await;
    let extra = format!(
        "{REFRESH}groups = {}\nheartbeats.replication.enabled = false\n\
         {a}->{b}.topics = {t}\n\
         {a}->{b}.strait.sync.topic.deletions.enabled = true",
        names.pattern()
    );
    let start = |index: u32| {
        let (a, b, extra, t) = (&a, &b, &extra, &t);
        async move {
            Flow::start(
                common::flow_config_between((a, b), source, target, extra),
                FlowOptions {
                    fetch_max_wait: Duration::from_millis(50),
                    producer: ProducerConfig {
                        transactional_id: Some(format!("strait-test-{t}-{index}")),
                        ..ProducerConfig::default()
                    },
                    unit: Some(UnitFilter { index, units: 2 }),
                    ..FlowOptions::default()
                },
                common::client(source).await,
                common::client(target).await,
            )
            .await
            .expect("unit starts")
        }
    };
    let in_transactions = |records: Vec<TestRecord>| -> Vec<(Vec<TestRecord>, bool)> {
        records.chunks(10).map(|c| (c.to_vec(), true)).collect()
    };
    // Every partition's source end is in its unit's map, and no unit halted anything.
    let caught_up = |units: &[&Flow], ends: &[i64]| {
        for u in units {
            assert!(u.halted().is_empty(), "{:?}", u.halted());
        }
        (0..4).all(|p| {
            units.iter().any(|u| {
                u.map()
                    .partition(&SourcePartition::new(&t, p as i32))
                    .and_then(|m| m.src_end())
                    == Some(ends[p])
            })
        })
    };
    // Each partition's end once the last commit marker is in: Kafka writes the markers after
    // EndTxn has returned to the producer, so the end is read when the last stable offset has
    // reached the high watermark (read too early, it lies before a marker the flow then maps).
    let source_ends = |src: Client, t: String| async move {
        let mut ends = Vec::new();
        for p in 0..4 {
            let tp = TopicPartition::new(&t, p);
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let end = log_range(&src, &t, p).await.1;
                let stable = src
                    .list_offset(&tp, OffsetSpec::Latest, IsolationLevel::ReadCommitted)
                    .await
                    .unwrap()
                    .offset;
                if stable == end {
                    ends.push(end);
                    break;
                }
                assert!(Instant::now() < deadline, "{tp}: markers not written");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        ends
    };

    create(&src, &t, 4).await;
    rdk.produce_transactions(source, &t, &in_transactions(records(4, 40, "old")));
    let (mut u0, mut u1) = (start(0).await, start(1).await);
    u0.run_until_caught_up().await.unwrap();
    u1.run_until_caught_up().await.unwrap();

    delete(&src, &t).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while exists(&tgt, &remote).await
        || [&u0, &u1]
            .iter()
            .any(|u| u.map().iter().any(|(sp, _)| sp.topic == t))
    {
        assert!(Instant::now() < deadline, "the units did not forget {t}");
        u0.round().await.expect("unit 0 goes on");
        u1.round().await.expect("unit 1 goes on");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    create(&src, &t, 4).await;
    let new = records(4, 40, "new");
    rdk.produce_transactions(source, &t, &in_transactions(new.clone()));
    let ends = source_ends(src.clone(), t.clone()).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !caught_up(&[&u0, &u1], &ends) {
        assert!(Instant::now() < deadline, "the new topic is not mirrored");
        u0.round().await.expect("unit 0 goes on");
        u1.round().await.expect("unit 1 goes on");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_same(
        &rdk.consume(target, &remote, 40, Duration::from_secs(30)),
        &new,
    );
    drop((u0, u1));

    // Restarted, both units find the map without the old topic: nothing halted, nothing again.
    let (mut u0, mut u1) = (start(0).await, start(1).await);
    u0.run_until_caught_up().await.unwrap();
    u1.run_until_caught_up().await.unwrap();
    assert!(caught_up(&[&u0, &u1], &ends));
    for u in [&u0, &u1] {
        assert_eq!(u.stats().records, 0, "{:?}", u.stats());
        assert_eq!(u.stats().duplicate_records, 0, "{:?}", u.stats());
    }
}
