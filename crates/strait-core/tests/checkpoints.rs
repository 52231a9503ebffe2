//! MM2 checkpoints as strait writes them (`docs/mm2-behaviour.md` §1.3, §2.2), against two real
//! clusters with librdkafka committing the source groups:
//!
//! - the checkpoints topic holds MM2's exact bytes (built by hand here, not with the codec under
//!   test), with the map's exact target offsets, for the groups the filter lets through that
//!   have offsets on mirrored partitions;
//! - a checkpoint is written when its group advances or rewinds, never again when nothing
//!   changed, and a new task reads the last ones back instead of writing them again;
//! - the loop runs on its intervals and stops when told;
//! - commit metadata travels into the checkpoint and into the target group, shown with a
//!   scripted fake source (serving a committed offset with metadata) and a fake target (whose
//!   OffsetCommit is inspected as strait sent it): the librdkafka client these tests commit
//!   with commits no metadata.

#![allow(unreachable_pub, dead_code, missing_docs)]

mod common;
#[path = "../../strait-kafka/tests/fake/mod.rs"]
mod fake;
mod mirror;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use strait_core::offsets::checkpoints::{CheckpointTask, Decision};
use strait_kafka::{Client, TopicPartition};
use strait_testkit::{Clusters, Names};
use strait_wire::mm2::Checkpoint;
use strait_wire::offset_map::{OffsetMap, SourcePartition};

use mirror::{end_offset, mirror, on_partition, read_topic, Mirror};

/// A Kafka `STRING`, by hand: int16 length, then the bytes.
fn string(s: &str) -> Vec<u8> {
    let mut out = (s.len() as i16).to_be_bytes().to_vec();
    out.extend_from_slice(s.as_bytes());
    out
}

/// MM2's checkpoint key, by hand: group, topic, partition.
fn key(group: &str, topic: &str, partition: i32) -> Bytes {
    let mut out = string(group);
    out.extend(string(topic));
    out.extend(partition.to_be_bytes());
    out.into()
}

/// MM2's checkpoint value, by hand: version 0, upstream, downstream, metadata.
fn value(upstream: i64, downstream: i64, metadata: &str) -> Bytes {
    let mut out = vec![0, 0];
    out.extend(upstream.to_be_bytes());
    out.extend(downstream.to_be_bytes());
    out.extend(string(metadata));
    out.into()
}

/// A checkpoint of `group` on `remote`-`partition`.
fn cp(remote: &str, group: &str, partition: i32, upstream: i64, downstream: i64) -> Checkpoint {
    Checkpoint {
        group: group.into(),
        topic: remote.into(),
        partition,
        upstream_offset: upstream,
        downstream_offset: downstream,
        metadata: String::new(),
    }
}

impl Mirror {
    /// A checkpoint of `group` on the remote topic's `partition`.
    fn cp(&self, group: &str, partition: i32, upstream: i64, downstream: i64) -> Checkpoint {
        cp(&self.remote, group, partition, upstream, downstream)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_are_mm2_records_with_the_exact_offsets() {
    let m = mirror("").await;
    let (billing, reporting) = (m.group("billing-app"), m.group("reporting"));
    let remote = m.remote.as_str();
    m.commit_source(&billing, &[(0, 12), (1, 15)]);
    m.commit_source(&reporting, &[(0, 20)]);
    // Left out by MM2's default `groups.exclude` (`console-consumer-.*`), though the `groups`
    // filter lets it through.
    m.commit_source(&m.group("console-consumer-7"), &[(0, 5)]);
    // Offsets only on a topic the flow does not mirror (KAFKA-14837).
    m.rdk.commit(
        &m.clusters.source.bootstrap,
        &m.group("unrelated"),
        &m.elsewhere,
        &[(0, 0)],
    );

    let mut task = m.task();
    assert_eq!(task.topic(), m.checkpoints);
    let summary = task.emit_once().await.expect("checkpoint pass");
    assert_eq!(summary.groups, [billing.as_str(), reporting.as_str()]);
    assert!(summary.failures.is_empty(), "{:?}", summary.failures);

    let written = read_topic(&m.target, &m.checkpoints).await;
    // The first record, spelled out: group "billing-app-<id>" (20 bytes), topic
    // "source<id>.orders-<id>" (30 bytes), partition 0; version 0, upstream 12, downstream 17,
    // metadata "".
    assert_eq!(
        written[0].0[..],
        [
            b"\x00\x14",
            billing.as_bytes(),
            b"\x00\x1e",
            remote.as_bytes(),
            b"\x00\x00\x00\x00"
        ]
        .concat()
    );
    assert_eq!(
        &written[0].1[..],
        &[0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 0, 0, 0, 0, 0, 0, 0, 17, 0, 0][..]
    );
    assert_eq!(
        written,
        vec![
            // orders-0 at 12 is target 17 (5 foreign records came first).
            (key(&billing, remote, 0), value(12, 17, "")),
            // orders-1 at 15 is target 18: the 3 foreign records lie between 14 and 15.
            (key(&billing, remote, 1), value(15, 18, "")),
            (key(&reporting, remote, 0), value(20, 25, "")),
        ]
    );
    // The downstream offsets are the map's, and what the pass reports.
    for (k, v) in &written {
        let c = Checkpoint::decode(k, v).expect("a v0 checkpoint");
        let sp = SourcePartition::new(&m.topic, c.partition);
        assert_eq!(
            m.flow.map().translate(&sp, c.upstream_offset).target(),
            Some(c.downstream_offset)
        );
    }
    assert_eq!(
        summary.emitted,
        vec![
            m.cp(&billing, 0, 12, 17),
            m.cp(&billing, 1, 15, 18),
            m.cp(&reporting, 0, 20, 25),
        ]
    );

    // The topic is made as MM2 makes it: one partition, compacted.
    common::assert_compacted_single_partition(&m.target, &m.checkpoints).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_move_with_the_group_and_survive_a_restart() {
    let m = mirror("").await;
    let (billing, reporting) = (m.group("billing-app"), m.group("reporting"));
    m.commit_source(&billing, &[(0, 12), (1, 15)]);
    m.commit_source(&reporting, &[(0, 20)]);
    let mut task = m.task();
    assert_eq!(task.emit_once().await.unwrap().emitted.len(), 3);
    assert_eq!(m.checkpoints_end().await, 3);

    // Nothing changed: nothing written.
    let summary = task.emit_once().await.unwrap();
    assert!(summary.emitted.is_empty(), "{summary:?}");
    assert_eq!(summary.unchanged, 3);
    assert_eq!(m.checkpoints_end().await, 3);

    // The group advances: one new checkpoint.
    m.commit_source(&billing, &[(0, 14)]);
    let summary = task.emit_once().await.unwrap();
    assert_eq!(summary.emitted, vec![m.cp(&billing, 0, 14, 19)]);
    assert_eq!(summary.unchanged, 2);
    assert_eq!(m.checkpoints_end().await, 4);

    // The group is rewound on the source: the checkpoint moves back with it.
    m.commit_source(&billing, &[(0, 3)]);
    let summary = task.emit_once().await.unwrap();
    assert_eq!(summary.emitted, vec![m.cp(&billing, 0, 3, 8)]);
    assert_eq!(m.checkpoints_end().await, 5);

    // A group past what is mirrored stays at the target end until the records follow; its
    // source position is written at once (MM2 would wait for the target end to move).
    m.rdk.produce(
        &m.clusters.source.bootstrap,
        &m.topic,
        &on_partition(0, 2, "third"),
        "none",
    );
    m.commit_source(&reporting, &[(0, 22)]);
    let summary = task.emit_once().await.unwrap();
    assert_eq!(summary.emitted, vec![m.cp(&reporting, 0, 22, 25)]);
    assert_eq!(
        task.store().decide(&m.cp(&reporting, 0, 22, 25)),
        Decision::Unchanged
    );
    assert_eq!(m.checkpoints_end().await, 6);

    // A new task reads the last checkpoints back: nothing is written again. The last record
    // of billing-app orders-0 is the rewound one (3 -> 8), not the highest.
    let mut restarted = m.task();
    let summary = restarted.emit_once().await.unwrap();
    assert!(summary.emitted.is_empty(), "{summary:?}");
    assert_eq!(summary.unchanged, 3);
    assert_eq!(m.checkpoints_end().await, 6);
    assert_eq!(
        restarted.store().get(&billing, &m.remote, 0),
        Some(&m.cp(&billing, 0, 3, 8))
    );

    // The flow mirrors the new records and publishes its map: the restarted task follows.
    let (remote, checkpoints) = (m.remote.clone(), m.checkpoints.clone());
    let mut flow = m.flow;
    flow.run_until_caught_up().await.unwrap();
    m.rdk
        .commit(&m.clusters.source.bootstrap, &billing, &m.topic, &[(1, 18)]);
    let summary = restarted.emit_once().await.unwrap();
    assert_eq!(
        summary.emitted,
        vec![
            cp(&remote, &billing, 1, 18, 21),
            cp(&remote, &reporting, 0, 22, 27)
        ]
    );
    assert_eq!(end_offset(&m.target, &checkpoints).await, 8);
    // What is in the topic, last per key, is what the task holds.
    let mut last = std::collections::BTreeMap::new();
    for (k, v) in read_topic(&m.target, &checkpoints).await {
        let c = Checkpoint::decode(&k, &v).unwrap();
        last.insert((c.group.clone(), c.partition), c);
    }
    for ((group, partition), c) in &last {
        assert_eq!(restarted.store().get(group, &remote, *partition), Some(c));
    }
    assert_eq!(last.len(), restarted.store().len());
}

/// Waits until `group`'s offsets on the target's `remote` (`<source alias>.orders-<id>`) are
/// `want`.
async fn wait_for_target_group(
    target: &Client,
    (group, remote): (&str, &str),
    deadline: tokio::time::Instant,
    want: &[(i32, i64)],
) {
    let tps = [
        TopicPartition::new(remote, 0),
        TopicPartition::new(remote, 1),
    ];
    loop {
        let have: Vec<(i32, i64)> = target
            .offset_fetch(group, Some(&tps))
            .await
            .unwrap()
            .into_iter()
            .map(|(tp, c)| (tp.partition, c.offset))
            .collect();
        if have == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "group not synced: {have:?}, want {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A checkpoint task running its loop ([`CheckpointTask::run`]) until [`Running::stop`].
struct Running {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<CheckpointTask>,
}

impl Running {
    fn start(mut task: CheckpointTask) -> Running {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            task.run(async {
                let _ = stopped.await;
            })
            .await;
            task
        });
        Running { stop, task }
    }

    /// Stops the loop, which must end within 5 s; the task.
    async fn stop(self) -> CheckpointTask {
        self.stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), self.task)
            .await
            .expect("the loop stops when told")
            .unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_task_runs_on_its_intervals_until_stopped() {
    let m = mirror(
        "emit.checkpoints.interval.seconds = 1\n\
         sync.group.offsets.enabled = true\n\
         sync.group.offsets.interval.seconds = 1",
    )
    .await;
    let billing = m.group("billing-app");
    let remote = m.remote.as_str();
    m.commit_source(&billing, &[(0, 12), (1, 15)]);
    let running = Running::start(m.task());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    wait_for_target_group(&m.target, (&billing, remote), deadline, &[(0, 17), (1, 18)]).await;
    // The group moves on the source; the loop carries it over.
    m.commit_source(&billing, &[(0, 14)]);
    wait_for_target_group(&m.target, (&billing, remote), deadline, &[(0, 19), (1, 18)]).await;
    assert_eq!(
        read_topic(&m.target, &m.checkpoints).await,
        vec![
            (key(&billing, remote, 0), value(12, 17, "")),
            (key(&billing, remote, 1), value(15, 18, "")),
            (key(&billing, remote, 0), value(14, 19, "")),
        ]
    );
    let task = running.stop().await;
    assert_eq!(task.store().len(), 2);
}

/// Waits until the checkpoints topic holds `want`, in order.
async fn wait_for_checkpoints(m: &Mirror, want: &[(Bytes, Bytes)], deadline: tokio::time::Instant) {
    loop {
        let have = read_topic(&m.target, &m.checkpoints).await;
        if have == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "checkpoints not written: {have:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A group's new position is checkpointed at the next read of the source groups
/// (`strait.checkpoints.capture.interval.ms`, 1 s by default), not at the next
/// `emit.checkpoints.interval.seconds`: with an MM2 file asking for 10 minutes, two commits of
/// the source group each reach the checkpoints topic within the test's 30 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_position_is_checkpointed_without_waiting_for_the_interval() {
    let m = mirror("emit.checkpoints.interval.seconds = 600").await;
    let billing = m.group("billing-app");
    let remote = m.remote.as_str();
    m.commit_source(&billing, &[(0, 12), (1, 15)]);
    let running = Running::start(m.task());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut want = vec![
        (key(&billing, remote, 0), value(12, 17, "")),
        (key(&billing, remote, 1), value(15, 18, "")),
    ];
    wait_for_checkpoints(&m, &want, deadline).await;
    m.commit_source(&billing, &[(0, 14)]);
    want.push((key(&billing, remote, 0), value(14, 19, "")));
    wait_for_checkpoints(&m, &want, deadline).await;
    running.stop().await;
}

/// With group sync on, a target group follows its source group at the next read of the groups,
/// not at the next `sync.group.offsets.interval.seconds`: with an MM2 file asking for 10
/// minutes for both checkpoints and sync, two commits of the source group each reach the idle
/// target group within the test's 30 s (fails with only the interval's full pass).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_group_follows_its_source_group_without_waiting_for_the_interval() {
    let m = mirror(
        "emit.checkpoints.interval.seconds = 600\n\
         sync.group.offsets.enabled = true\n\
         sync.group.offsets.interval.seconds = 600",
    )
    .await;
    let billing = m.group("billing-app");
    let remote = m.remote.as_str();
    m.commit_source(&billing, &[(0, 12), (1, 15)]);
    let running = Running::start(m.task());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    wait_for_target_group(&m.target, (&billing, remote), deadline, &[(0, 17), (1, 18)]).await;
    m.commit_source(&billing, &[(0, 14)]);
    wait_for_target_group(&m.target, (&billing, remote), deadline, &[(0, 19), (1, 18)]).await;
    running.stop().await;
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// "Is it safe to fail over now?" on real clusters: exact right after a checkpoint pass; then a
/// group that consumed past its last checkpoint (2 records to read again, its position as old
/// as that checkpoint), a flow that stopped mirroring while the source took 6 more records (at
/// risk, with their age), and a source that does not answer (nothing known of it; the groups
/// as the checkpoints have them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_says_what_a_failover_now_would_leave_behind() {
    use strait_core::offsets::readiness::assess;
    let m = mirror("").await;
    let (billing, reporting) = (m.group("billing-app"), m.group("reporting"));
    m.commit_source(&billing, &[(0, 12), (1, 15)]);
    m.commit_source(&reporting, &[(0, 20)]);
    let mut task = m.task();
    task.emit_once().await.expect("checkpoint pass");
    let map = m.flow.map().clone();
    let ready = assess(Ok(&m.source), &m.target, &m.config, &map, now_ms())
        .await
        .unwrap();
    assert_eq!(ready.source_error, None);
    assert_eq!(
        (ready.records_at_risk, ready.seconds_at_risk),
        (Some(0), Some(0.0))
    );
    assert!(ready.partitions.is_empty(), "{ready:?}");
    let names: Vec<&str> = ready.groups.iter().map(|g| g.group.as_str()).collect();
    assert_eq!(names, [billing.as_str(), reporting.as_str()]);
    assert!(ready.groups.iter().all(|g| g.exact()), "{ready:?}");
    assert!(
        ready.exact && ready.ready_within(Duration::ZERO),
        "{ready:?}"
    );

    // The group consumes past its checkpoint; nothing is checkpointed meanwhile.
    m.commit_source(&billing, &[(0, 14), (1, 15)]);
    let lagging = assess(Ok(&m.source), &m.target, &m.config, &map, now_ms() + 3_000)
        .await
        .unwrap();
    let b = &lagging.groups[0];
    assert_eq!(
        (b.records_since_checkpoint, b.exact()),
        (Some(2), false),
        "{b:?}"
    );
    let age = b.position_age_seconds.expect("an age");
    assert!(age >= 3.0, "as old as the checkpoint behind it: {age}");
    assert!(lagging.groups[1].exact(), "the other group is carried");
    assert!(!lagging.exact && !lagging.ready_within(Duration::from_secs(1)));
    assert!(lagging.ready_within(Duration::from_secs(3600)));

    // The flow stops; the source takes 6 more records, 3 per partition.
    m.rdk.produce(
        &m.clusters.source.bootstrap,
        &m.topic,
        &mirror::records(2, 6, "unmirrored"),
        "none",
    );
    let stalled = assess(Ok(&m.source), &m.target, &m.config, &map, now_ms() + 2_000)
        .await
        .unwrap();
    assert_eq!(stalled.records_at_risk, Some(6), "{stalled:?}");
    let at_risk: Vec<(i32, i64)> = stalled
        .partitions
        .iter()
        .map(|p| (p.partition, p.records))
        .collect();
    assert_eq!(at_risk, [(0, 3), (1, 3)]);
    assert!(stalled
        .partitions
        .iter()
        .all(|p| p.seconds.is_some_and(|s| s >= 2.0)));
    assert!(!stalled.ready_within(Duration::from_secs(1)));

    // The source does not answer: the groups are the checkpoints' alone.
    let silent = assess(
        Err("no answer".to_owned()),
        &m.target,
        &m.config,
        &map,
        now_ms(),
    )
    .await
    .unwrap();
    assert_eq!(silent.source_error.as_deref(), Some("no answer"));
    assert_eq!((silent.records_at_risk, silent.exact), (None, false));
    assert_eq!(silent.groups.len(), 2);
    assert!(silent
        .groups
        .iter()
        .all(|g| g.records_since_checkpoint.is_none() && g.last_checkpoint_seconds.is_some()));
    assert!(!silent.ready_within(Duration::from_secs(3600)));
}

/// A record's wait is measured from when this process's fetches last saw its partition's end
/// below it, not from the time its producer stamped on it: an application's event time an
/// hour old made a record that had just arrived an hour old (not ready), and one ten minutes
/// ahead of the clock gave no age at all (not ready, for ten minutes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_ages_a_record_by_when_strait_saw_it_not_by_its_event_time() {
    use strait_core::offsets::readiness::{assess, AgeFrom};
    use strait_testkit::TestRecord;
    let started = now_ms();
    let m = mirror("").await;
    let (hour, ten_minutes) = (3_600_000, 600_000);
    let before = now_ms();
    let stamped = [
        TestRecord::new(0, None, Some(b"replayed")).with_timestamp(before - hour),
        TestRecord::new(1, None, Some(b"early")).with_timestamp(before + ten_minutes),
    ];
    m.rdk
        .produce(&m.clusters.source.bootstrap, &m.topic, &stamped, "none");
    let written = now_ms();
    let map = m.flow.map().clone();
    let at = now_ms();
    let answer = assess(Ok(&m.source), &m.target, &m.config, &map, at)
        .await
        .unwrap();
    assert_eq!(answer.records_at_risk, Some(2), "{answer:?}");
    for p in &answer.partitions {
        assert_eq!(p.age_from, Some(AgeFrom::SeenByStrait), "{p:?}");
        let ms = p.seconds.expect("an age") * 1000.0;
        // Never less than the record's wait (it was written before `written`), never more
        // than the time since the flow last fetched (after `started`).
        assert!(ms + 1.0 >= (at - written) as f64, "{p:?}");
        assert!(ms <= (at - started) as f64 + 1.0, "{p:?}");
    }
    assert!(
        answer.ready_within(Duration::from_secs(600)),
        "both have waited less than the test has run: {answer:?}"
    );
}

/// A partition the map holds as read without a record to mirror (only an aborted transaction)
/// continues at the remote partition's end only while the source still ends where the map's
/// extent does. Once the source has more, mirrored to the target after the map was taken (a
/// persisted map lags the flow by seconds), the remote end would place a group past records
/// it never read: it stays "not mirrored yet". Without the source nothing is confirmed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_read_without_a_record_is_at_the_remote_end_only_while_the_source_has_no_more()
{
    use strait_core::offsets::{at_remote_end, translate_offsets};
    use strait_kafka::groups::CommittedOffset;
    use strait_testkit::TestRecord;
    use strait_wire::offset_map::{OffsetMap, SourcePartition, Translation};
    let clusters = Clusters::shared();
    let names = Names::new();
    let rdk = strait_testkit::Rdk::new();
    let (a, b) = (names.alias("source"), names.alias("target"));
    let (src, dst) = (&clusters.source.bootstrap, &clusters.target.bootstrap);
    let topic = names.topic("aborted");
    let remote = format!("{a}.{topic}");
    rdk.create_topic(src, &topic, 2);
    rdk.create_topic(dst, &remote, 2);
    // On both partitions: an aborted record at 0, its marker at 1.
    let aborted: Vec<TestRecord> = (0..2)
        .map(|p| TestRecord::new(p, None, Some(b"aborted")))
        .collect();
    rdk.produce_transactions(src, &topic, &[(aborted, false)]);
    let mut map = OffsetMap::new();
    for p in 0..2 {
        map.record_skipped(&SourcePartition::new(&topic, p), 0, 2)
            .expect("skipped");
    }
    // Partition 1 then takes 3 records on the source, mirrored after the map was taken.
    rdk.produce(src, &topic, &mirror::on_partition(1, 3, "later"), "none");
    rdk.produce(dst, &remote, &mirror::on_partition(1, 3, "later"), "none");
    let config = common::flow_config_between((&a, &b), src, dst, &format!("topics = {topic}"));
    let (source, target) = (common::client(src).await, common::client(dst).await);
    let at_end = |p: i32| {
        (
            TopicPartition::new(topic.clone(), p),
            CommittedOffset {
                offset: 2,
                leader_epoch: -1,
                metadata: None,
            },
        )
    };
    let mut rows = translate_offsets(&config, &map, [at_end(0), at_end(1)]);
    assert!(rows.iter().all(|t| t.translation == Translation::Unmapped));
    at_remote_end(Some(&source), &target, &map, &mut rows).await;
    assert_eq!(rows[0].translation, Translation::Exact { target: 0 });
    assert_eq!(
        rows[1].translation,
        Translation::Unmapped,
        "the remote end (3) is past 3 records the group has not read"
    );
    let mut unconfirmed = translate_offsets(&config, &map, [at_end(0), at_end(1)]);
    at_remote_end(None, &target, &map, &mut unconfirmed).await;
    assert!(unconfirmed
        .iter()
        .all(|t| t.translation == Translation::Unmapped));
}

/// Readiness covers what the flow should mirror, not what its map holds: a topic created on
/// the source since the flow last looked (10 records, none mirrored) is at risk from its log
/// start, and a group that committed on it has a position no checkpoint carries; a group
/// rewound on the source below its checkpoint is not exact (a failover made from the
/// checkpoints would skip what it has not read). Each was "exact" before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_covers_a_topic_not_mapped_yet_and_a_rewound_group() {
    use strait_core::offsets::readiness::assess;
    let m = mirror("").await;
    let src = m.clusters.source.bootstrap.clone();
    let late = m.names.topic("late");
    m.rdk.create_topic(&src, &late, 1);
    m.rdk
        .produce(&src, &late, &mirror::on_partition(0, 10, "late"), "none");
    // The flow's filter selects the new topic too; its map has never seen it.
    let (a, b) = &m.aliases;
    let config = common::flow_config_between(
        (a, b),
        &src,
        &m.clusters.target.bootstrap,
        &format!(
            "topics = {}|{late}\ngroups = {}\nheartbeats.replication.enabled = false",
            m.topic,
            m.names.pattern()
        ),
    );
    let (billing, late_reader) = (m.group("billing-app"), m.group("late-reader"));
    m.commit_source(&billing, &[(0, 12), (1, 15)]);
    m.rdk.commit(&src, &late_reader, &late, &[(0, 4)]);
    let mut task = CheckpointTask::new(
        config.clone(),
        m.source.clone(),
        m.target.clone(),
        m.flow.map_updates(),
    );
    let summary = task.emit_once().await.expect("checkpoint pass");
    assert_eq!(
        summary.uncarried,
        std::slice::from_ref(&late_reader),
        "{summary:?}"
    );
    let map = m.flow.map().clone();
    // Ten seconds on: the late records have waited that long.
    let answer = assess(Ok(&m.source), &m.target, &config, &map, now_ms() + 10_000)
        .await
        .unwrap();
    assert_eq!(answer.records_at_risk, Some(10), "{answer:?}");
    let at_risk: Vec<(&str, i32, i64)> = answer
        .partitions
        .iter()
        .map(|p| (p.topic.as_str(), p.partition, p.records))
        .collect();
    assert_eq!(at_risk, [(late.as_str(), 0, 10)]);
    assert!(
        answer.partitions[0].seconds.is_some_and(|s| s >= 10.0),
        "{answer:?}"
    );
    assert!(!answer.exact && !answer.ready_within(Duration::from_secs(5)));
    let reader = answer
        .groups
        .iter()
        .find(|g| g.group == late_reader)
        .expect("the group on the late topic is listed");
    assert_eq!(reader.partitions_without_checkpoint, 1, "{reader:?}");
    assert!(!reader.exact());
    let b = answer.groups.iter().find(|g| g.group == billing).unwrap();
    assert!(b.exact(), "{b:?}");

    // The group is rewound on the source below its checkpoint, before any pass carries it.
    m.commit_source(&billing, &[(0, 5), (1, 15)]);
    let rewound = assess(Ok(&m.source), &m.target, &config, &map, now_ms())
        .await
        .unwrap();
    let b = rewound.groups.iter().find(|g| g.group == billing).unwrap();
    assert_eq!(b.records_skipped, Some(7), "{b:?}");
    assert!(!b.exact(), "{b:?}");
    // The next pass carries the rewind (MM2's rule), and the group is exact again.
    task.emit_once().await.expect("checkpoint pass");
    let carried = assess(Ok(&m.source), &m.target, &config, &map, now_ms())
        .await
        .unwrap();
    let b = carried.groups.iter().find(|g| g.group == billing).unwrap();
    assert!(b.exact(), "{b:?}");
}

/// A group that moved on the source while its target position did not (it committed past
/// what is mirrored) is checkpointed at once: the checkpoint carries the position it has, so
/// readiness calls it captured only once it is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_position_past_the_mirror_is_checkpointed_when_it_moves() {
    let m = mirror("").await;
    let billing = m.group("billing-app");
    // Partition 0 is mirrored up to source 20 (target 25): both commits lie past it.
    m.commit_source(&billing, &[(0, 20)]);
    let mut task = m.task();
    task.emit_once().await.expect("checkpoint pass");
    m.rdk.produce(
        &m.clusters.source.bootstrap,
        &m.topic,
        &mirror::on_partition(0, 5, "unmirrored"),
        "none",
    );
    m.commit_source(&billing, &[(0, 23)]);
    let summary = task.emit_once().await.expect("checkpoint pass");
    let written: Vec<(i64, i64)> = summary
        .emitted
        .iter()
        .map(|c| (c.upstream_offset, c.downstream_offset))
        .collect();
    assert_eq!(written, [(23, 25)], "{summary:?}");
    let remote = m.remote.clone();
    let last = task.store().get(&billing, &remote, 0).cloned().unwrap();
    assert_eq!((last.upstream_offset, last.downstream_offset), (23, 25));
}

// ---------------------------------------------------------------------------------------------
// Commit metadata: a fake source serves it, a fake target records the commit strait sends.

mod metadata {
    use super::*;
    use crate::fake::{script, Action, Body, FakeCluster};
    use kafka_protocol::messages::describe_groups_response::DescribedGroup;
    use kafka_protocol::messages::list_groups_response::ListedGroup;
    use kafka_protocol::messages::offset_fetch_response::{
        OffsetFetchResponsePartition, OffsetFetchResponseTopic,
    };
    use kafka_protocol::messages::{
        ApiKey, DescribeGroupsResponse, GroupId, ListGroupsResponse, OffsetFetchResponse, TopicName,
    };
    use kafka_protocol::protocol::StrBytes;
    use strait_core::offsets::group_sync::{GroupSync, SyncedOffset};

    const METADATA: &str = "billing;v=2";

    fn s(text: &str) -> StrBytes {
        StrBytes::from_string(text.to_owned())
    }

    /// A one-broker cluster holding `topic` (one partition) and group `group`, which is empty
    /// and has committed `committed` (offset, metadata) on `topic`-0, when given.
    async fn fake_cluster(
        topic: &str,
        group: &str,
        committed: Option<(i64, &'static str)>,
    ) -> FakeCluster {
        let topic_name = topic.to_owned();
        let group = group.to_owned();
        let fake = FakeCluster::start(
            &[1],
            script(move |_, req| match (&req.body, req.api) {
                (_, ApiKey::ListGroups) => req.reply(&ListGroupsResponse::default().with_groups(
                    vec![ListedGroup::default()
                        .with_group_id(GroupId(s(&group)))
                        .with_protocol_type(s("consumer"))
                        .with_group_state(s("Empty"))],
                )),
                (_, ApiKey::DescribeGroups) => req.reply(
                    &DescribeGroupsResponse::default().with_groups(vec![DescribedGroup::default()
                        .with_group_id(GroupId(s(&group)))
                        .with_group_state(s("Empty"))
                        .with_protocol_type(s("consumer"))]),
                ),
                (Body::OffsetFetch(_), _) => {
                    let partitions = committed
                        .iter()
                        .map(|(offset, metadata)| {
                            OffsetFetchResponsePartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(*offset)
                                .with_committed_leader_epoch(-1)
                                .with_metadata(Some(s(metadata)))
                        })
                        .collect();
                    req.reply(&OffsetFetchResponse::default().with_topics(vec![
                        OffsetFetchResponseTopic::default()
                            .with_name(TopicName(s(&topic_name)))
                            .with_partitions(partitions),
                    ]))
                }
                (Body::OffsetCommit(c), _) => req.reply(&fake::offset_commit_response(c, 0)),
                _ => Action::Default,
            }),
        )
        .await;
        fake.spec()
            .api_versions
            .extend([(ApiKey::ListGroups, 0, 4), (ApiKey::DescribeGroups, 0, 5)]);
        fake.set_topic(topic, &[1]);
        fake
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn commit_metadata_goes_into_the_checkpoint_and_the_target_group() {
        let clusters = Clusters::shared();
        let names = Names::new();
        let (a, b) = (names.alias("source"), names.alias("target"));
        let (topic, group) = (names.topic("orders"), names.group("billing-app"));
        let (remote, checkpoints) = (format!("{a}.{topic}"), format!("{a}.checkpoints.internal"));
        let source = fake_cluster(&topic, &group, Some((12, METADATA))).await;
        let config = common::flow_config_between(
            (&a, &b),
            &source.addr(1),
            &clusters.target.bootstrap,
            &format!("topics = {topic}\ngroups = {}", names.pattern()),
        );
        // The map a flow would have made: orders-0 [0, 20) at [5, 25).
        let mut map = OffsetMap::new();
        map.record(&SourcePartition::new(&topic, 0), 0, 5, 20)
            .unwrap();
        let (_publish, updates) = tokio::sync::watch::channel(Arc::new(map));
        let target = common::client(&clusters.target.bootstrap).await;
        let mut task = CheckpointTask::new(
            config,
            common::client(&source.addr(1)).await,
            target.clone(),
            updates,
        );
        let summary = task.emit_once().await.expect("checkpoint pass");
        assert_eq!(summary.groups, [group.as_str()]);
        assert_eq!(
            read_topic(&target, &checkpoints).await,
            vec![(key(&group, &remote, 0), value(12, 17, METADATA))]
        );

        // Group sync into an empty target group keeps the metadata in the commit.
        let fake_target = fake_cluster(&remote, &group, None).await;
        let sync = GroupSync::new()
            .sync_once(
                &common::client(&fake_target.addr(1)).await,
                task.store(),
                None,
            )
            .await
            .expect("sync pass");
        assert_eq!(sync.synced_groups, [group.as_str()]);
        assert_eq!(
            sync.written,
            vec![SyncedOffset {
                group: group.clone(),
                partition: TopicPartition::new(&remote, 0),
                offset: 17,
                previous: None,
                metadata: METADATA.into(),
            }]
        );
        let commits = fake_target.requests(ApiKey::OffsetCommit);
        assert_eq!(commits.len(), 1);
        let Body::OffsetCommit(commit) = &commits[0].body else {
            panic!("an OffsetCommit");
        };
        assert_eq!(commit.group_id.0.as_str(), group);
        assert_eq!(commit.generation_id_or_member_epoch, -1);
        let p = &commit.topics[0].partitions[0];
        assert_eq!(commit.topics[0].name.0.as_str(), remote);
        assert_eq!((p.partition_index, p.committed_offset), (0, 17));
        assert_eq!(
            p.committed_metadata.as_ref().map(|m| m.as_str()),
            Some(METADATA)
        );
    }

    /// The capture reads what the groups committed as MM2 does: without `require_stable`, so
    /// a transactional application with an offset commit pending (the broker answers
    /// UNSTABLE_OFFSET_COMMIT to a stable read) holds neither its own capture nor the other
    /// groups', and without naming partitions, so the coordinator answers only what each group
    /// committed (not groups × mapped partitions). Before, the pending commit was retried for
    /// the operation timeout and the group was not checkpointed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pending_transactional_commit_holds_no_capture() {
        use kafka_protocol::error::ResponseError;
        let clusters = Clusters::shared();
        let names = Names::new();
        let (a, b) = (names.alias("source"), names.alias("target"));
        let topic = names.topic("orders");
        let (txn, plain) = (names.group("txn-app"), names.group("plain-app"));
        let checkpoints = format!("{a}.checkpoints.internal");
        let groups = [txn.clone(), plain.clone()];
        let topic_name = topic.clone();
        let txn_group = txn.clone();
        let source = FakeCluster::start(
            &[1],
            script(move |_, req| match (&req.body, req.api) {
                (_, ApiKey::ListGroups) => req.reply(
                    &ListGroupsResponse::default().with_groups(
                        groups
                            .iter()
                            .map(|g| {
                                ListedGroup::default()
                                    .with_group_id(GroupId(s(g)))
                                    .with_protocol_type(s("consumer"))
                                    .with_group_state(s("Stable"))
                            })
                            .collect(),
                    ),
                ),
                (Body::OffsetFetch(f), _) => {
                    let pending = f.group_id.0.as_str() == txn_group && f.require_stable;
                    let partition = if pending {
                        OffsetFetchResponsePartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(-1)
                            .with_error_code(ResponseError::UnstableOffsetCommit.code())
                    } else {
                        OffsetFetchResponsePartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(12)
                            .with_committed_leader_epoch(-1)
                    };
                    req.reply(&OffsetFetchResponse::default().with_topics(vec![
                        OffsetFetchResponseTopic::default()
                            .with_name(TopicName(s(&topic_name)))
                            .with_partitions(vec![partition]),
                    ]))
                }
                _ => Action::Default,
            }),
        )
        .await;
        source
            .spec()
            .api_versions
            .extend([(ApiKey::ListGroups, 0, 4), (ApiKey::DescribeGroups, 0, 5)]);
        source.set_topic(&topic, &[1]);
        let config = common::flow_config_between(
            (&a, &b),
            &source.addr(1),
            &clusters.target.bootstrap,
            &format!("topics = {topic}\ngroups = {}", names.pattern()),
        );
        let mut map = OffsetMap::new();
        map.record(&SourcePartition::new(&topic, 0), 0, 5, 20)
            .unwrap();
        let (_publish, updates) = tokio::sync::watch::channel(Arc::new(map));
        let target = common::client(&clusters.target.bootstrap).await;
        let mut task = CheckpointTask::new(
            config,
            common::client(&source.addr(1)).await,
            target.clone(),
            updates,
        );
        let summary = tokio::time::timeout(Duration::from_secs(30), task.emit_once())
            .await
            .expect("the pass ends")
            .expect("checkpoint pass");
        let mut want = vec![plain.clone(), txn.clone()];
        want.sort();
        let mut got = summary.groups.clone();
        got.sort();
        assert_eq!(got, want, "{summary:?}");
        assert!(summary.failures.is_empty(), "{summary:?}");
        let written = read_topic(&target, &checkpoints).await;
        assert_eq!(written.len(), 2, "{written:?}");
        for request in source.requests(ApiKey::OffsetFetch) {
            let Body::OffsetFetch(f) = &request.body else {
                continue;
            };
            assert!(!f.require_stable, "read as MM2 reads: {f:?}");
            assert!(f.topics.is_none(), "no partitions named: {f:?}");
        }
    }

    /// A one-broker target holding `A.orders` for transactional group sync: DescribeGroups
    /// answers each group as `describe` says (its error code and state, given the group and
    /// how many DescribeGroups came before), nothing is committed yet, and the transactional
    /// calls succeed. With a client of it, and a transactional producer on it.
    async fn transactional_target(
        describe: impl Fn(&str, usize) -> (i16, &'static str) + Send + Sync + 'static,
    ) -> (
        FakeCluster,
        strait_kafka::Client,
        strait_kafka::produce::RawProducer,
    ) {
        use kafka_protocol::messages::{
            AddOffsetsToTxnResponse, EndTxnResponse, TxnOffsetCommitResponse,
        };
        use std::sync::atomic::{AtomicUsize, Ordering};
        use strait_kafka::produce::{ProducerConfig, RawProducer};

        let described = AtomicUsize::new(0);
        let fake = FakeCluster::start(
            &[1],
            script(move |_, req| match (&req.body, req.api) {
                (Body::DescribeGroups(d), _) => {
                    let before = described.fetch_add(1, Ordering::SeqCst);
                    let groups = d
                        .groups
                        .iter()
                        .map(|g| {
                            let (code, state) = describe(g.0.as_str(), before);
                            DescribedGroup::default()
                                .with_group_id(g.clone())
                                .with_error_code(code)
                                .with_group_state(s(state))
                                .with_protocol_type(s("consumer"))
                        })
                        .collect();
                    req.reply(&DescribeGroupsResponse::default().with_groups(groups))
                }
                // Nothing committed on the target yet.
                (Body::OffsetFetch(_), _) => req.reply(&OffsetFetchResponse::default()),
                (_, ApiKey::AddOffsetsToTxn) => req.reply(&AddOffsetsToTxnResponse::default()),
                (_, ApiKey::TxnOffsetCommit) => req.reply(&TxnOffsetCommitResponse::default()),
                (_, ApiKey::EndTxn) => req.reply(&EndTxnResponse::default()),
                _ => Action::Default,
            }),
        )
        .await;
        fake.spec().api_versions.extend([
            (ApiKey::DescribeGroups, 0, 5),
            (ApiKey::AddOffsetsToTxn, 0, 3),
            (ApiKey::TxnOffsetCommit, 0, 3),
            (ApiKey::EndTxn, 0, 3),
        ]);
        fake.set_topic("A.orders", &[1]);
        let client = common::client(&fake.addr(1)).await;
        let producer = RawProducer::new(
            client.clone(),
            ProducerConfig {
                transactional_id: Some("strait-A-B-0-checkpoints".into()),
                ..ProducerConfig::default()
            },
        )
        .await
        .expect("transactional producer");
        (fake, client, producer)
    }

    /// One checkpoint per group, of `A.orders` partition 0 (upstream 10, downstream 7).
    fn checkpoints_of(groups: &[&str]) -> strait_core::offsets::checkpoints::CheckpointStore {
        let mut store = strait_core::offsets::checkpoints::CheckpointStore::new();
        for group in groups {
            store.update(Checkpoint {
                group: (*group).into(),
                topic: "A.orders".into(),
                partition: 0,
                upstream_offset: 10,
                downstream_offset: 7,
                metadata: String::new(),
            });
        }
        store
    }

    /// Transactional group sync (a unit of exactly-once workers): the target refuses to
    /// describe one group (GROUP_AUTHORIZATION_FAILED, as to a principal without DESCRIBE on
    /// it). That group is skipped as failed, and the groups after it are still synced, each in
    /// a transaction of its own. Before, the pass ended at the first group that failed, so no
    /// group after it was ever synced.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_refused_group_does_not_stop_transactional_group_sync() {
        use kafka_protocol::error::ResponseError;
        use strait_core::offsets::group_sync::SkipReason;

        let (fake, client, producer) = transactional_target(|group, _| {
            if group.starts_with("a-") {
                (ResponseError::GroupAuthorizationFailed.code(), "")
            } else {
                (0, "Empty")
            }
        })
        .await;
        let store = checkpoints_of(&["a-refused", "b-billing", "c-shipping"]);
        let summary = GroupSync::new()
            .sync_once(&client, &store, Some(&producer))
            .await
            .expect("the pass goes on past the refused group");
        assert_eq!(summary.synced_groups, ["b-billing", "c-shipping"]);
        assert!(
            summary.skipped.iter().any(|s| s.group == "a-refused"
                && matches!(&s.reason, SkipReason::Failed { error } if error.contains("GROUP_AUTHORIZATION_FAILED") || error.contains("GroupAuthorizationFailed"))),
            "{:?}",
            summary.skipped
        );
        // One transaction per synced group.
        assert_eq!(fake.requests(ApiKey::TxnOffsetCommit).len(), 2);
        assert_eq!(fake.requests(ApiKey::EndTxn).len(), 2);
    }

    /// Kafka takes a transactional offset commit without a member id whatever the group's state
    /// (an admin commit it refuses while the group has members), so the describe before it is
    /// not enough: a group whose members join between that describe and the commit would have
    /// its offsets overwritten. The group is described again once the offsets are in the
    /// transaction; found active then, the transaction is aborted and the group skipped.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_group_that_becomes_active_mid_sync_is_not_written_by_a_transaction() {
        use strait_core::offsets::group_sync::SkipReason;

        // Empty at the first look, a member joined by the second.
        let (fake, client, producer) =
            transactional_target(|_, before| (0, if before == 0 { "Empty" } else { "Stable" }))
                .await;
        let store = checkpoints_of(&["billing"]);
        let summary = GroupSync::new()
            .sync_once(&client, &store, Some(&producer))
            .await
            .expect("the pass");
        assert!(summary.synced_groups.is_empty(), "{summary:?}");
        assert!(
            summary.skipped.iter().any(|s| s.group == "billing"
                && matches!(s.reason, SkipReason::GroupActive { .. })),
            "{:?}",
            summary.skipped
        );
        let ends = fake.requests(ApiKey::EndTxn);
        assert_eq!(ends.len(), 1);
        let Body::EndTxn(end) = &ends[0].body else {
            panic!("an EndTxn");
        };
        assert!(
            !end.committed,
            "the transaction holding the offsets must be aborted"
        );
    }
}
