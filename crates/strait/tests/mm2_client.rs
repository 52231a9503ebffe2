//! MirrorMaker 2 compatibility both ways, against Apache Kafka's own MM2 code (4.3.1, the newest
//! `connect-mirror` Maven Central serves here: the jars `scripts/test-broker install` fetches from
//! `scripts/mm2/pom.xml`), on Kafka 4.4.0 brokers, not against our reading of it:
//!
//! - **strait -> MM2's client library.** strait mirrors `A->B` (`strait run --until-caught-up`,
//!   then a short `strait run` for heartbeats); then MM2's `MirrorClient` and
//!   `RemoteClusterUtils.translateOffsets` (`scripts/kafka/MirrorClientCheck.java`) read the
//!   target, and must find the checkpoint and heartbeat topics, the upstream cluster and its
//!   hops, and translate each group to exactly the offsets strait checkpointed, which are the
//!   offsets `strait offsets translate` gives and the offsets worked out here from the records
//!   themselves. Kafka's `ConsumerGroupCommand` witnesses the group offsets strait committed on
//!   the target (`sync.group.offsets.enabled`), and MM2's formatters
//!   (`CheckpointFormatter`, `OffsetSyncFormatter`, `HeartbeatFormatter`) read every record
//!   strait wrote to MM2's three topics as strait's own decoder reads it.
//! - **MM2 -> strait.** Real MM2 (dedicated mode, `strait_testkit::Mm2`) mirrors `A->B` until it
//!   has written offset syncs, checkpoints and heartbeats; it is stopped, and strait's decoders
//!   (`strait_wire::mm2`) read every one of those records: the values must be what MM2's own
//!   formatters print for the same records, the bytes what strait's encoders write for those
//!   values, and the values what can be worked out independently (syncs where the records
//!   landed, checkpoints at the source groups' offsets translated by MM2's rule, heartbeats
//!   from `A` to `B` within the run). `MirrorClientCheck` against MM2's target is the control
//!   that shows the Java side reads MM2's own output the way the first test expects.
//!
//! On the shared clusters every name is the test's own ([`Names`]): its aliases, hence its
//! remote, checkpoint, offset-sync and Connect topics, its topic and its groups. Only the
//! `heartbeats` topic of each cluster is shared by every test: a test's heartbeats there (and in
//! its copy of the source's) are the records naming its aliases, and only those are checked;
//! what MM2's client library lists of the whole cluster is narrowed to the names of this test.

mod running;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use running::{run_to_end, run_until_caught_up, write_flow_config, Finished, Strait};
use strait_kafka::admin::{IsolationLevel, OffsetSpec};
use strait_kafka::fetch::{FetchOptions, FetchPosition};
use strait_kafka::{Client, ClientConfig, TopicPartition};
use strait_testkit::{
    kafka_conf_dir, kafka_tool, mm2_java_command, mm2_tool, Clusters, Mm2, Names, Rdk, TestRecord,
    MM2_STARTED,
};
use strait_wire::mm2::{Checkpoint, Heartbeat, OffsetSync};
use strait_wire::BatchScanner;

/// Written into each cluster by the heartbeat emitter whose target it is (on the shared
/// clusters, by every test's).
const HEARTBEATS: &str = "heartbeats";

const CHECKPOINT_FORMATTER: &str = "org.apache.kafka.connect.mirror.formatters.CheckpointFormatter";
const OFFSET_SYNC_FORMATTER: &str =
    "org.apache.kafka.connect.mirror.formatters.OffsetSyncFormatter";
const HEARTBEAT_FORMATTER: &str = "org.apache.kafka.connect.mirror.formatters.HeartbeatFormatter";

/// How long MM2 (or strait) may take to produce what a test waits for.
const WAIT: Duration = Duration::from_secs(180);

/// The names of one test: its cluster aliases, its topic and the topics named after them.
struct Test {
    names: Names,
    /// The source cluster's alias.
    a: String,
    /// The target cluster's alias.
    b: String,
    /// An alias no cluster of the test has.
    c: String,
    topic: String,
    /// `<source>.<topic>`, on the target.
    remote: String,
    /// `<source>.checkpoints.internal`, on the target.
    checkpoints: String,
    /// `mm2-offset-syncs.<target>.internal`, on the source (`offset-syncs.topic.location=source`).
    offset_syncs: String,
    /// The source's `heartbeats`, mirrored to the target.
    remote_heartbeats: String,
}

impl Test {
    fn new() -> Test {
        let names = Names::new();
        let (a, b, c) = (names.alias("A"), names.alias("B"), names.alias("C"));
        let topic = names.topic("orders");
        Test {
            remote: format!("{a}.{topic}"),
            checkpoints: format!("{a}.checkpoints.internal"),
            offset_syncs: format!("mm2-offset-syncs.{b}.internal"),
            remote_heartbeats: format!("{a}.{HEARTBEATS}"),
            topic,
            a,
            b,
            c,
            names,
        }
    }

    /// The test's cluster aliases.
    fn aliases(&self) -> [&str; 3] {
        [&self.a, &self.b, &self.c]
    }

    /// Whether `name` (a topic or a cluster alias) is `heartbeats` or this test's: one of its
    /// aliases, the checkpoints topic of one, or a remote topic whose every hop is one of them
    /// (`A.orders-<id>`, `A.heartbeats`; not `A.X.heartbeats`, the copy of another test's
    /// flow's copy of `heartbeats`, which the flow mirrors as it mirrors every heartbeats topic).
    fn is_ours(&self, name: &str) -> bool {
        let ours = |alias: &str| self.aliases().contains(&alias);
        if name == HEARTBEATS || ours(name) {
            return true;
        }
        if let Some(alias) = name.strip_suffix(".checkpoints.internal") {
            return ours(alias);
        }
        match name.rsplit_once('.') {
            Some((hops, _)) => hops.split('.').all(ours),
            None => false,
        }
    }

    /// Whether `raw` is a heartbeat that names one of this test's aliases.
    fn is_our_heartbeat(&self, raw: &Raw) -> bool {
        Heartbeat::decode(&raw.key, &raw.value).is_ok_and(|h| {
            self.aliases().contains(&h.source_alias.as_str())
                || self.aliases().contains(&h.target_alias.as_str())
        })
    }

    /// The heartbeats of `topic` (partition 0) that name this test's aliases, in order.
    fn heartbeats(&self, kafka: &Kafka, client: &Client, topic: &str) -> Vec<Heartbeat> {
        kafka
            .records(client, topic)
            .iter()
            .filter(|raw| self.is_our_heartbeat(raw))
            .map(<Heartbeat as Decoded>::decode)
            .collect()
    }
}

#[test]
fn mm2_client_library_reads_what_strait_wrote() {
    let clusters = Clusters::shared();
    let t = Test::new();
    let (alias_a, alias_b) = (t.a.as_str(), t.b.as_str());
    let (topic, remote) = (t.topic.as_str(), t.remote.as_str());
    let rdk = Rdk::new();
    let (a, b) = (
        clusters.source.bootstrap.clone(),
        clusters.target.bootstrap.clone(),
    );
    let kafka = Kafka::new(&a, &b);

    // The remote topic exists with 5 records of someone else's on partition 0, so target
    // offsets differ from source offsets there and a translation cannot pass for identity.
    rdk.create_topic(&a, topic, 2);
    rdk.create_topic(&b, remote, 2);
    rdk.produce(&b, remote, &values(0, "foreign", 0..5), "none");
    let source_records: Vec<TestRecord> = (0..20)
        .flat_map(|i| [0, 1].map(|p| record(p, &format!("a-{p}-{i}"))))
        .collect();
    rdk.produce(&a, topic, &source_records, "lz4");

    // Groups on the source. "ahead" has read further on the target already: group sync must
    // leave it there. "console-consumer-7" is left out by MM2's default `groups.exclude`.
    let (billing, reporting, ahead, console, nobody) = (
        t.names.group("billing"),
        t.names.group("reporting"),
        t.names.group("ahead"),
        t.names.group("console-consumer-7"),
        t.names.group("nobody"),
    );
    let groups: [(&str, &[(i32, i64)]); 4] = [
        (&billing, &[(0, 12), (1, 15)]),
        (&reporting, &[(0, 20)]),
        (&ahead, &[(0, 3)]),
        (&console, &[(0, 5)]),
    ];
    for (group, offsets) in groups {
        rdk.commit(&a, group, topic, offsets);
    }
    rdk.commit(&b, &ahead, remote, &[(0, 22)]);

    // Only this test's topic and groups; heartbeats are mirrored whatever `topics` says.
    let flow = format!("{alias_a}->{alias_b}");
    let config = write_flow_config(
        &clusters,
        (alias_a, alias_b),
        "strait.properties",
        &format!(
            "{flow}.topics = {topic}\n\
             {flow}.groups = {groups}\n\
             sync.group.offsets.enabled = true\n\
             sync.group.offsets.interval.seconds = 1\n\
             emit.checkpoints.interval.seconds = 1\n\
             refresh.topics.interval.seconds = 1\n\
             emit.heartbeats.interval.seconds = 1",
            groups = t.names.pattern()
        ),
    );
    let config = config.to_str().expect("utf-8 path");
    let dir = clusters.dir();

    // A one-shot copy: the data, then one checkpoint pass and one group-sync pass.
    let started = Instant::now();
    let out = strait(dir, &run_until_caught_up(config));
    assert!(
        out.ok(),
        "strait run --until-caught-up failed:\n{}",
        out.both()
    );
    eprintln!("strait run --until-caught-up: {:?}", started.elapsed());
    let after_copy = last_checkpoints(&kafka.records(&kafka.target, &t.checkpoints));

    // Heartbeats come from a running strait only: B->A writes them into A, A->B writes into B
    // and mirrors A's as A.heartbeats. Both topics hold other tests' heartbeats too: this
    // test's are those naming its aliases.
    let started = Instant::now();
    let running = Strait::run(Path::new(config), dir.join("strait-run.log"));
    let deadline = Instant::now() + WAIT;
    loop {
        let topics = kafka.topics(&kafka.target);
        let beating = |topic: &str| {
            topics.contains(topic) && t.heartbeats(&kafka, &kafka.target, topic).len() >= 2
        };
        if beating(HEARTBEATS) && beating(&t.remote_heartbeats) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no heartbeats on the target within {WAIT:?}; topics {topics:?}\n{}",
            running.log_text()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    running.stop();
    eprintln!("strait run until heartbeats: {:?}", started.elapsed());

    // What strait wrote, decoded by strait: the last checkpoint per group and partition.
    let checkpoints = last_checkpoints(&kafka.records(&kafka.target, &t.checkpoints));
    // The one-shot copy wrote them all; the running strait found nothing to change.
    assert_eq!(checkpoints, after_copy);
    let positions = Positions::read(&rdk, (&a, topic), (&b, remote), source_records.len(), 45);
    // source offset -> target offset, worked out from where each record landed.
    assert_eq!(positions.translate(0, 12), 17);
    assert_eq!(positions.translate(1, 15), 15);
    assert_eq!(positions.translate(0, 20), 25);
    assert_eq!(positions.translate(0, 3), 8);

    // MM2's client library against the target; of the whole cluster, this test's names.
    let started = Instant::now();
    let answers = mirror_client_check(
        &b,
        alias_a,
        &[&billing, &reporting, &ahead, &console, &nobody],
        &t.aliases(),
    );
    eprintln!("MirrorClientCheck: {:?}", started.elapsed());
    assert_eq!(
        answers.list_of("checkpointTopics", &t),
        [t.checkpoints.as_str()]
    );
    assert_eq!(
        answers.list_of("heartbeatTopics", &t),
        [t.remote_heartbeats.as_str(), HEARTBEATS]
    );
    assert_eq!(answers.list_of("upstreamClusters", &t), [alias_a]);
    assert_eq!(
        answers.list_of("remoteTopics", &t),
        [t.remote_heartbeats.as_str(), remote]
    );
    // A.heartbeats is one hop from A; nothing on B came from B or from a cluster C.
    assert_eq!(answers.hops(alias_a), 1);
    assert_eq!(answers.hops(alias_b), -1);
    assert_eq!(answers.hops(&t.c), -1);

    let committed_on_b = group_offsets_on(&b, &groups.map(|(g, _)| g));
    for (group, offsets) in groups {
        let translated = answers.translated(group);
        if group.starts_with("console-consumer-") {
            assert!(translated.is_empty(), "{group}: {translated:?}");
            assert!(
                !checkpoints.keys().any(|(g, _, _)| g == group),
                "{group} checkpointed: {checkpoints:?}"
            );
            assert!(
                !committed_on_b.keys().any(|(g, _, _)| g == group),
                "{group} committed on the target: {committed_on_b:?}"
            );
            continue;
        }
        // Each committed source offset, translated from the records.
        let expected: BTreeMap<(String, i32), i64> = offsets
            .iter()
            .map(|&(p, o)| ((remote.to_owned(), p), positions.translate(p, o)))
            .collect();
        // RemoteClusterUtils.translateOffsets == the records.
        assert_eq!(translated, expected, "{group}: translateOffsets");
        // == the checkpoints strait wrote, whose upstream offsets are the group's on A.
        let written: BTreeMap<(String, i32), i64> = checkpoints
            .iter()
            .filter(|((g, _, _), _)| g == group)
            .map(|((_, t, p), c)| ((t.clone(), *p), c.downstream_offset))
            .collect();
        assert_eq!(written, expected, "{group}: checkpoints");
        let on_a = rdk.committed(&a, group, topic, &[0, 1]);
        for &(p, _) in offsets {
            let c = &checkpoints[&(group.to_owned(), remote.to_owned(), p)];
            assert_eq!(Some(&c.upstream_offset), on_a.get(&p), "{group} p{p}");
            assert_eq!(c.metadata, "", "{group} p{p}");
        }
        // == strait's own answer.
        assert_eq!(
            strait_translate(dir, config, group),
            expected,
            "{group}: strait"
        );
        // ConsumerGroupCommand: group sync committed them on B, except where B was ahead.
        let on_b: BTreeMap<(String, i32), i64> = committed_on_b
            .iter()
            .filter(|((g, _, _), _)| g == group)
            .map(|((_, t, p), o)| ((t.clone(), *p), *o))
            .collect();
        if group == ahead {
            assert_eq!(on_b, BTreeMap::from([((remote.to_owned(), 0), 22)]));
        } else {
            assert_eq!(
                on_b, expected,
                "{group}: ConsumerGroupCommand on the target"
            );
        }
    }
    assert_eq!(answers.translated(&nobody), BTreeMap::new());

    // MM2's formatters read every record of MM2's three topics as strait's decoder does (of
    // the shared `heartbeats` topics, the records of this test's).
    let all = |_: &Raw| true;
    let syncs = formatters_agree::<OffsetSync>(&kafka, &kafka.source, &a, &t.offset_syncs, all);
    // strait's offset syncs point where the records landed.
    for s in syncs.iter().filter(|s| s.topic == topic) {
        assert_eq!(
            positions.landed.get(&(s.partition, s.upstream_offset)),
            Some(&s.downstream_offset),
            "{s:?}"
        );
    }
    assert!(syncs.iter().any(|s| s.topic == topic), "{syncs:?}");
    formatters_agree::<Checkpoint>(&kafka, &kafka.target, &b, &t.checkpoints, all);
    for (heartbeats, from, to) in [
        (HEARTBEATS, alias_a, alias_b),
        (t.remote_heartbeats.as_str(), alias_b, alias_a),
    ] {
        let beats = formatters_agree::<Heartbeat>(&kafka, &kafka.target, &b, heartbeats, |r| {
            t.is_our_heartbeat(r)
        });
        assert!(
            beats
                .iter()
                .all(|h| (h.source_alias.as_str(), h.target_alias.as_str()) == (from, to)),
            "{heartbeats}: {beats:?}"
        );
    }
}

#[test]
fn strait_decodes_what_mm2_wrote() {
    let clusters = Clusters::shared();
    let t = Test::new();
    let (alias_a, alias_b) = (t.a.as_str(), t.b.as_str());
    let (topic, remote) = (t.topic.as_str(), t.remote.as_str());
    let rdk = Rdk::new();
    let (a, b) = (
        clusters.source.bootstrap.clone(),
        clusters.target.bootstrap.clone(),
    );
    let kafka = Kafka::new(&a, &b);
    rdk.create_topic(&a, topic, 2);
    let source_records: Vec<TestRecord> = (0..30)
        .flat_map(|i| [0, 1].map(|p| record(p, &format!("a-{p}-{i}"))))
        .collect();
    rdk.produce(&a, topic, &source_records, "none");
    // "app" has read everything; "lagging" is mid-way, where MM2 translates conservatively.
    let (app, lagging, nobody) = (
        t.names.group("app"),
        t.names.group("lagging"),
        t.names.group("nobody"),
    );
    let groups: [(&str, [(i32, i64); 2]); 2] =
        [(&app, [(0, 30), (1, 30)]), (&lagging, [(0, 13), (1, 4)])];
    for (group, offsets) in &groups {
        rdk.commit(&a, group, topic, offsets);
    }

    // Offset syncs every 10 records, so there are several per partition. Only this test's
    // topic and groups, and not the source's `heartbeats`, which other tests' heartbeat
    // emitters write (MM2 mirrors it whatever `topics` says): as on clusters of the test's own,
    // where nothing writes heartbeats into A.
    let properties = Mm2::flow_properties(
        (alias_a, &a),
        (alias_b, &b),
        &format!(
            "offset.lag.max = 10
             topics = {pattern}
             groups = {pattern}
             heartbeats.replication.enabled = false",
            pattern = t.names.pattern()
        ),
    );
    let started_ms = now_ms();
    let started = Instant::now();
    let mut mm2 = Mm2::start(clusters.dir(), &properties, &[alias_b]);
    mm2.wait_for_log(MM2_STARTED, WAIT);
    eprintln!("MM2 started: {:?}", started.elapsed());
    // Until "app" is checkpointed at the end of both partitions (which takes the held-back sync
    // of the last record), "lagging" on both, the last records synced, and 3 heartbeats (of
    // this test's: the target's `heartbeats` holds other tests' too).
    mm2.wait_until(WAIT, "MM2's syncs, checkpoints and heartbeats", || {
        let target_topics = kafka.topics(&kafka.target);
        let source_topics = kafka.topics(&kafka.source);
        if !target_topics.contains(&t.checkpoints)
            || !target_topics.contains(HEARTBEATS)
            || !source_topics.contains(&t.offset_syncs)
        {
            return None;
        }
        let checkpoints = last_checkpoints(&kafka.records(&kafka.target, &t.checkpoints));
        let at = |g: &str, p: i32| {
            checkpoints
                .get(&(g.to_owned(), remote.to_owned(), p))
                .map(|c| c.downstream_offset)
        };
        let syncs: Vec<OffsetSync> = kafka
            .records(&kafka.source, &t.offset_syncs)
            .iter()
            .map(decode_sync)
            .collect();
        let synced = |p: i32| {
            syncs
                .iter()
                .any(|s| s.partition == p && s.upstream_offset == 29)
        };
        (at(&app, 0) == Some(30)
            && at(&app, 1) == Some(30)
            && at(&lagging, 0).is_some()
            && at(&lagging, 1).is_some()
            && synced(0)
            && synced(1)
            && t.heartbeats(&kafka, &kafka.target, HEARTBEATS).len() >= 3)
            .then_some(())
    });
    eprintln!(
        "MM2 wrote syncs, checkpoints, heartbeats: {:?}",
        started.elapsed()
    );
    mm2.stop();
    let stopped_ms = now_ms();
    assert!(
        mm2.log_text().contains("Kafka MirrorMaker stopped"),
        "MM2 did not shut down cleanly:\n{}",
        mm2.log_tail(30)
    );
    let positions = Positions::read(
        &rdk,
        (&a, topic),
        (&b, remote),
        source_records.len(),
        source_records.len(),
    );

    // Offset syncs: MM2's formatter and strait's decoder agree on every record, and each sync
    // says where its record landed: A.orders is a one-to-one copy.
    let all = |_: &Raw| true;
    let syncs = formatters_agree::<OffsetSync>(&kafka, &kafka.source, &a, &t.offset_syncs, all);
    for p in [0, 1] {
        let upstream: Vec<i64> = syncs
            .iter()
            .filter(|s| s.partition == p)
            .map(|s| s.upstream_offset)
            .collect();
        // Not necessarily in order: a sync MM2 held back is sent at its next offset commit,
        // after syncs it sent at once (seen: 0, 11, 1, 22, 29). MM2's reader keeps what is
        // consistent; each sync below must still say where its record landed.
        assert!(
            upstream.contains(&0),
            "p{p}: the first record's sync: {upstream:?}"
        );
        assert_eq!(upstream.iter().max(), Some(&29), "p{p}: {upstream:?}");
        assert!(upstream.len() >= 3, "offset.lag.max 10: {upstream:?}");
    }
    for s in &syncs {
        assert_eq!(s.topic, topic, "{s:?}");
        assert_eq!(
            positions.landed.get(&(s.partition, s.upstream_offset)),
            Some(&s.downstream_offset),
            "{s:?}"
        );
    }

    // Checkpoints: the groups' offsets on A, translated by MM2's rule from the syncs just read
    // (the nearest sync at or below the group: its downstream offset, plus one when the group
    // is past it), never ahead of where the records landed.
    let records = formatters_agree::<Checkpoint>(&kafka, &kafka.target, &b, &t.checkpoints, all);
    for c in &records {
        assert_eq!(c.topic, remote, "{c:?}");
        assert_eq!(c.metadata, "", "{c:?}");
        let (_, offsets) = groups
            .iter()
            .find(|(g, _)| *g == c.group)
            .unwrap_or_else(|| panic!("checkpoint of an unknown group: {c:?}"));
        let committed = offsets
            .iter()
            .find(|(p, _)| *p == c.partition)
            .map(|(_, o)| *o);
        assert_eq!(Some(c.upstream_offset), committed, "{c:?}");
        let g = c.upstream_offset;
        assert!(
            syncs.iter().any(|s| s.partition == c.partition
                && s.upstream_offset <= g
                && c.downstream_offset == s.downstream_offset + i64::from(g != s.upstream_offset)),
            "{c:?} follows from no sync in {syncs:?}"
        );
        assert!(
            c.downstream_offset <= positions.translate(c.partition, g),
            "{c:?}"
        );
    }
    let checkpoints = last_checkpoints(&kafka.records(&kafka.target, &t.checkpoints));

    // Heartbeats (those naming this test's aliases): from A to B, one a second or so, within
    // the run.
    let beats = formatters_agree::<Heartbeat>(&kafka, &kafka.target, &b, HEARTBEATS, |r| {
        t.is_our_heartbeat(r)
    });
    assert!(beats.len() >= 3, "{beats:?}");
    for h in &beats {
        assert_eq!(
            (h.source_alias.as_str(), h.target_alias.as_str()),
            (alias_a, alias_b)
        );
        assert!(
            (started_ms..=stopped_ms).contains(&h.timestamp_ms),
            "{h:?} outside the run [{started_ms}, {stopped_ms}]"
        );
    }
    assert!(
        beats
            .windows(2)
            .all(|w| w[0].timestamp_ms < w[1].timestamp_ms),
        "{beats:?}"
    );

    // The control: MM2's client library reads MM2's own output as the first test expects it to
    // read strait's; of the whole cluster, this test's names.
    let answers = mirror_client_check(&b, alias_a, &[&app, &lagging, &nobody], &[alias_a]);
    assert_eq!(
        answers.list_of("checkpointTopics", &t),
        [t.checkpoints.as_str()]
    );
    // No B->A herder ran, so no A.heartbeats and no upstream cluster.
    assert_eq!(answers.list_of("heartbeatTopics", &t), [HEARTBEATS]);
    assert!(
        answers.list_of("upstreamClusters", &t).is_empty(),
        "{answers:?}"
    );
    assert_eq!(answers.list_of("remoteTopics", &t), [remote]);
    assert_eq!(answers.hops(alias_a), -1);
    for (group, _) in &groups {
        let last: BTreeMap<(String, i32), i64> = checkpoints
            .iter()
            .filter(|((g, _, _), _)| g == group)
            .map(|((_, t, p), c)| ((t.clone(), *p), c.downstream_offset))
            .collect();
        assert_eq!(answers.translated(group), last, "{group}");
    }
    assert_eq!(
        answers.translated(&app),
        BTreeMap::from([((remote.to_owned(), 0), 30), ((remote.to_owned(), 1), 30)])
    );
    assert!(answers.translated(&nobody).is_empty());
}

// --- the records ---------------------------------------------------------------------------

/// A record with `value` as key and value.
fn record(partition: i32, value: &str) -> TestRecord {
    TestRecord::new(partition, Some(value.as_bytes()), Some(value.as_bytes()))
}

/// Records `<tag>-<i>` for each `i` of `range`, all to `partition`.
fn values(partition: i32, tag: &str, range: std::ops::Range<i64>) -> Vec<TestRecord> {
    range
        .map(|i| record(partition, &format!("{tag}-{i}")))
        .collect()
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Where each source record landed on the target, worked out from the records themselves
/// (librdkafka reads both topics; every value is distinct).
struct Positions {
    /// (partition, source offset) -> target offset.
    landed: BTreeMap<(i32, i64), i64>,
}

impl Positions {
    /// From `topic` on the source `a` to `remote` on the target `b`.
    fn read(
        rdk: &Rdk,
        (a, topic): (&str, &str),
        (b, remote): (&str, &str),
        source_total: usize,
        target_total: usize,
    ) -> Positions {
        let timeout = Duration::from_secs(30);
        let source = rdk.consume(a, topic, source_total, timeout);
        let target = rdk.consume(b, remote, target_total, timeout);
        let at: BTreeMap<(i32, Vec<u8>), i64> = target
            .iter()
            .map(|r| {
                (
                    (r.partition, r.value.clone().unwrap_or_default()),
                    offset(r),
                )
            })
            .collect();
        let landed = source
            .iter()
            .map(|r| {
                let value = r.value.clone().unwrap_or_default();
                let target = at
                    .get(&(r.partition, value))
                    .copied()
                    .unwrap_or_else(|| panic!("source record {r:?} is not on the target"));
                ((r.partition, offset(r)), target)
            })
            .collect();
        Positions { landed }
    }

    /// Where a consumer at source position `g` continues on the target: the target offset of
    /// the record at `g`, or one past the last record's when `g` is the end.
    fn translate(&self, partition: i32, g: i64) -> i64 {
        if let Some(t) = self.landed.get(&(partition, g)) {
            return *t;
        }
        let (&(_, last), &t) = self
            .landed
            .range((partition, 0)..(partition, i64::MAX))
            .next_back()
            .unwrap_or_else(|| panic!("nothing mirrored on partition {partition}"));
        assert_eq!(g, last + 1, "p{partition} {g}: past the end");
        t + 1
    }
}

fn offset(r: &TestRecord) -> i64 {
    r.offset.expect("consumed records have offsets")
}

/// A record of one of MM2's topics as fetched: its offset and raw key and value.
#[derive(Debug, Clone)]
struct Raw {
    offset: i64,
    key: Vec<u8>,
    value: Vec<u8>,
}

/// strait-kafka clients of both clusters, on a runtime of their own.
struct Kafka {
    runtime: tokio::runtime::Runtime,
    source: Client,
    target: Client,
}

impl Kafka {
    fn new(a: &str, b: &str) -> Kafka {
        let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
        let connect = |bootstrap: &str| {
            let mut config = ClientConfig::new([bootstrap]);
            config.operation_timeout = Duration::from_secs(20);
            runtime
                .block_on(Client::connect(config))
                .unwrap_or_else(|e| panic!("connect to {bootstrap}: {e}"))
        };
        let (source, target) = (connect(a), connect(b));
        Kafka {
            runtime,
            source,
            target,
        }
    }

    fn topics(&self, client: &Client) -> BTreeSet<String> {
        let metadata = self
            .runtime
            .block_on(client.refresh_metadata())
            .expect("metadata");
        metadata.topics.keys().cloned().collect()
    }

    /// The end offset of partition 0 of `topic`.
    fn end_offset(&self, client: &Client, topic: &str) -> i64 {
        self.runtime
            .block_on(client.list_offset(
                &TopicPartition::new(topic, 0),
                OffsetSpec::Latest,
                IsolationLevel::ReadUncommitted,
            ))
            .unwrap_or_else(|e| panic!("end offset of {topic}: {e}"))
            .offset
    }

    /// Every record of partition 0 of `topic` up to its end now, in order.
    fn records(&self, client: &Client, topic: &str) -> Vec<Raw> {
        let tp = TopicPartition::new(topic, 0);
        let end = self.end_offset(client, topic);
        let options = FetchOptions {
            max_wait: Duration::from_millis(10),
            isolation: IsolationLevel::ReadUncommitted,
            ..Default::default()
        };
        let mut position = 0;
        let mut out = Vec::new();
        while position < end {
            let data = self
                .runtime
                .block_on(client.fetch(&[FetchPosition::new(tp.clone(), position)], &options))
                .remove(&tp)
                .expect("the partition asked for")
                .unwrap_or_else(|e| panic!("fetch {topic} at {position}: {e}"));
            let before = position;
            for batch in BatchScanner::new(data.records) {
                let batch = batch.expect("a well-formed batch");
                if batch.header.next_offset() <= position || batch.header.attributes.is_control() {
                    position = position.max(batch.header.next_offset());
                    continue;
                }
                let records = strait_wire::records::batch_records(&batch).expect("records decode");
                for r in records {
                    let offset = batch.header.base_offset + i64::from(r.offset_delta);
                    if offset < position {
                        continue;
                    }
                    out.push(Raw {
                        offset,
                        key: r.key.map(|k| k.to_vec()).expect("MM2's records have keys"),
                        value: r.value.map(|v| v.to_vec()).expect("and values"),
                    });
                }
                position = batch.header.next_offset();
            }
            assert!(
                position > before,
                "no progress reading {topic} at {position}"
            );
        }
        out
    }
}

// --- strait's decoders against MM2's formatters ----------------------------------------------

/// One of MM2's record types, as strait decodes it.
trait Decoded: Sized {
    /// MM2's formatter class for it.
    const FORMATTER: &'static str;
    fn decode(raw: &Raw) -> Self;
    /// The bytes strait's encoder writes for this value.
    fn encode(&self) -> (Vec<u8>, Vec<u8>);
    /// The line MM2's formatter prints for it: `toString()` of MM2's class.
    fn mm2_line(&self) -> String;
}

fn decode_sync(raw: &Raw) -> OffsetSync {
    OffsetSync::decode(&raw.key, &raw.value).unwrap_or_else(|e| {
        panic!(
            "not an offset sync at {}: {e}; key {:02x?} value {:02x?}",
            raw.offset, raw.key, raw.value
        )
    })
}

impl Decoded for OffsetSync {
    const FORMATTER: &'static str = OFFSET_SYNC_FORMATTER;
    fn decode(raw: &Raw) -> Self {
        decode_sync(raw)
    }
    fn encode(&self) -> (Vec<u8>, Vec<u8>) {
        (self.encode_key().expect("encodes"), self.encode_value())
    }
    fn mm2_line(&self) -> String {
        format!(
            "OffsetSync{{topicPartition={}-{}, upstreamOffset={}, downstreamOffset={}}}",
            self.topic, self.partition, self.upstream_offset, self.downstream_offset
        )
    }
}

impl Decoded for Checkpoint {
    const FORMATTER: &'static str = CHECKPOINT_FORMATTER;
    fn decode(raw: &Raw) -> Self {
        Checkpoint::decode(&raw.key, &raw.value).unwrap_or_else(|e| {
            panic!(
                "not a checkpoint at {}: {e}; key {:02x?} value {:02x?}",
                raw.offset, raw.key, raw.value
            )
        })
    }
    fn encode(&self) -> (Vec<u8>, Vec<u8>) {
        (
            self.encode_key().expect("encodes"),
            self.encode_value().expect("encodes"),
        )
    }
    fn mm2_line(&self) -> String {
        format!(
            "Checkpoint{{consumerGroupId={}, topicPartition={}-{}, upstreamOffset={}, downstreamOffset={}, metadata={}}}",
            self.group,
            self.topic,
            self.partition,
            self.upstream_offset,
            self.downstream_offset,
            self.metadata
        )
    }
}

impl Decoded for Heartbeat {
    const FORMATTER: &'static str = HEARTBEAT_FORMATTER;
    fn decode(raw: &Raw) -> Self {
        Heartbeat::decode(&raw.key, &raw.value).unwrap_or_else(|e| {
            panic!(
                "not a heartbeat at {}: {e}; key {:02x?} value {:02x?}",
                raw.offset, raw.key, raw.value
            )
        })
    }
    fn encode(&self) -> (Vec<u8>, Vec<u8>) {
        (self.encode_key().expect("encodes"), self.encode_value())
    }
    fn mm2_line(&self) -> String {
        format!(
            "Heartbeat{{sourceClusterAlias={}, targetClusterAlias={}, timestamp={}}}",
            self.source_alias, self.target_alias, self.timestamp_ms
        )
    }
}

/// Reads every record of `topic` (partition 0) on `client`'s cluster, takes those `ours` keeps
/// (of a topic other tests write too, this test's), decodes each with strait's decoder, and
/// checks (1) that strait's encoder gives back the same bytes, and (2) that MM2's formatter
/// (`ConsoleConsumer --formatter`, over every record of the topic) prints, record for record,
/// what MM2's `toString()` makes of the values strait decoded. Returns the decoded records.
fn formatters_agree<T: Decoded + std::fmt::Debug>(
    kafka: &Kafka,
    client: &Client,
    bootstrap: &str,
    topic: &str,
    ours: impl Fn(&Raw) -> bool,
) -> Vec<T> {
    let all = kafka.records(client, topic);
    let kept: Vec<bool> = all.iter().map(&ours).collect();
    let raws: Vec<&Raw> = all
        .iter()
        .zip(&kept)
        .filter(|(_, k)| **k)
        .map(|(r, _)| r)
        .collect();
    assert!(!raws.is_empty(), "{topic} has none of this test's records");
    let decoded: Vec<T> = raws.iter().map(|r| T::decode(r)).collect();
    for (raw, value) in raws.iter().zip(&decoded) {
        let (key, val) = value.encode();
        assert_eq!(
            (&key, &val),
            (&raw.key, &raw.value),
            "{topic} at {}: strait encodes {value:?} differently",
            raw.offset
        );
    }
    let formatter = T::FORMATTER;
    let started = Instant::now();
    let count = all.len().to_string();
    let printed = mm2_tool(
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        &[
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--partition",
            "0",
            "--offset",
            "earliest",
            "--max-messages",
            &count,
            "--timeout-ms",
            "30000",
            "--formatter",
            formatter,
        ],
    );
    eprintln!(
        "{topic}: {} records through {formatter} in {:?}, {} of them this test's",
        all.len(),
        started.elapsed(),
        raws.len()
    );
    let printed: Vec<&str> = printed.lines().collect();
    assert_eq!(
        printed.len(),
        all.len(),
        "{topic}: lines MM2's {formatter} printed"
    );
    let printed: Vec<&str> = printed
        .into_iter()
        .zip(&kept)
        .filter(|(_, k)| **k)
        .map(|(line, _)| line)
        .collect();
    let ours: Vec<String> = decoded.iter().map(T::mm2_line).collect();
    assert_eq!(
        printed, ours,
        "{topic}: MM2's {formatter} vs strait's decoder"
    );
    decoded
}

/// The last checkpoint per (group, topic, partition), as `translateOffsets` keeps them.
fn last_checkpoints(raws: &[Raw]) -> BTreeMap<(String, String, i32), Checkpoint> {
    raws.iter()
        .map(<Checkpoint as Decoded>::decode)
        .map(|c| ((c.group.clone(), c.topic.clone(), c.partition), c))
        .collect()
}

// --- the Java witnesses ------------------------------------------------------------------------

/// What `scripts/kafka/MirrorClientCheck.java` printed: lines of tab-separated fields.
#[derive(Debug)]
struct Answers {
    lines: Vec<Vec<String>>,
}

impl Answers {
    /// The names after `what` on its one line.
    fn list(&self, what: &str) -> Vec<String> {
        let lines: Vec<&Vec<String>> = self.lines.iter().filter(|l| l[0] == what).collect();
        assert_eq!(lines.len(), 1, "one {what} line: {self:?}");
        lines[0][1..].to_vec()
    }

    /// [`Answers::list`], narrowed to the names of test `t` ([`Test::is_ours`]): what the
    /// answer would be on clusters of the test's own.
    fn list_of(&self, what: &str, t: &Test) -> Vec<String> {
        self.list(what)
            .into_iter()
            .filter(|name| t.is_ours(name))
            .collect()
    }

    /// `replicationHops(alias)`.
    fn hops(&self, alias: &str) -> i32 {
        let line = self
            .lines
            .iter()
            .find(|l| l[0] == "replicationHops" && l[1] == alias)
            .unwrap_or_else(|| panic!("no replicationHops {alias}: {self:?}"));
        line[2].parse().expect("a number")
    }

    /// `translateOffsets(group)`: (topic, partition) -> offset.
    fn translated(&self, group: &str) -> BTreeMap<(String, i32), i64> {
        let out: BTreeMap<(String, i32), i64> = self
            .lines
            .iter()
            .filter(|l| l[0] == "translate" && l[1] == group)
            .map(|l| {
                assert_eq!(l.get(5).map(String::as_str), Some(""), "metadata: {l:?}");
                (
                    (l[2].clone(), l[3].parse().expect("partition")),
                    l[4].parse().expect("offset"),
                )
            })
            .collect();
        let count = self
            .lines
            .iter()
            .find(|l| l[0] == "translated" && l[1] == group)
            .unwrap_or_else(|| panic!("group {group} not translated: {self:?}"));
        assert_eq!(count[2], out.len().to_string(), "{group}");
        out
    }
}

/// Runs MirrorClientCheck against `bootstrap` for source alias `source`.
fn mirror_client_check(bootstrap: &str, source: &str, groups: &[&str], hops: &[&str]) -> Answers {
    let program = kafka_conf_dir().join("MirrorClientCheck.java");
    let mut command = mm2_java_command();
    command
        .arg(&program)
        .args(["--bootstrap", bootstrap, "--source", source]);
    for group in groups {
        command.args(["--group", group]);
    }
    for alias in hops {
        command.args(["--hops", alias]);
    }
    let output = command.output().expect("run java");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "MirrorClientCheck failed ({}):\n{stdout}{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!("--- MirrorClientCheck against {bootstrap} ---\n{stdout}");
    Answers {
        lines: stdout
            .lines()
            .map(|l| l.split('\t').map(str::to_owned).collect())
            .collect(),
    }
}

/// Every committed offset of each of `groups` that exists on `bootstrap` (of the shared
/// cluster's groups, those of a test), as Kafka's `ConsumerGroupCommand --list`, then
/// `--describe --group G... --offsets` of those listed, prints them:
/// (group, topic, partition) -> CURRENT-OFFSET.
fn group_offsets_on(bootstrap: &str, groups: &[&str]) -> BTreeMap<(String, String, i32), i64> {
    const COMMAND: &str = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand";
    let listed = kafka_tool(COMMAND, &["--bootstrap-server", bootstrap, "--list"]);
    let listed: BTreeSet<&str> = listed.lines().map(str::trim).collect();
    let mut args = vec!["--bootstrap-server", bootstrap, "--describe", "--offsets"];
    for group in groups.iter().filter(|g| listed.contains(**g)) {
        args.extend(["--group", group]);
    }
    if !args.contains(&"--group") {
        eprintln!("--- ConsumerGroupCommand --list: none of {groups:?} ---");
        return BTreeMap::new();
    }
    let text = kafka_tool(COMMAND, &args);
    eprintln!(
        "--- ConsumerGroupCommand {} ---\n{text}",
        args[2..].join(" ")
    );
    let mut out = BTreeMap::new();
    let mut columns: Option<Vec<&str>> = None;
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.is_empty() {
            columns = None;
        } else if fields[0] == "GROUP" {
            columns = Some(fields);
        } else if let Some(columns) = &columns {
            let field = |name: &str| {
                let i = columns
                    .iter()
                    .position(|c| *c == name)
                    .unwrap_or_else(|| panic!("no column {name} in {columns:?}"));
                fields[i]
            };
            if let Ok(offset) = field("CURRENT-OFFSET").parse() {
                let partition = field("PARTITION").parse().expect("a partition");
                out.insert(
                    (
                        field("GROUP").to_owned(),
                        field("TOPIC").to_owned(),
                        partition,
                    ),
                    offset,
                );
            }
        }
    }
    out
}

// --- strait ----------------------------------------------------------------------------------

/// Runs the strait binary with `args` to its end.
fn strait(dir: &Path, args: &[&str]) -> Finished {
    run_to_end(dir, args, &[("RUST_LOG", "warn")])
}

/// `strait offsets translate --group GROUP --json`: (remote topic, partition) -> target offset.
fn strait_translate(dir: &Path, config: &str, group: &str) -> BTreeMap<(String, i32), i64> {
    let out = strait(
        dir,
        &[
            "offsets",
            "translate",
            "--config",
            config,
            "--group",
            group,
            "--json",
        ],
    );
    assert!(out.ok(), "strait offsets translate failed:\n{}", out.both());
    let rows: Vec<serde_json::Value> = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", out.both()));
    rows.iter()
        .map(|r| {
            (
                (
                    r["remote_topic"].as_str().expect("remote_topic").to_owned(),
                    r["partition"].as_i64().expect("partition") as i32,
                ),
                r["target_offset"].as_i64().expect("target_offset"),
            )
        })
        .collect()
}
