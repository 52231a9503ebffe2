//! Cutover from a running MirrorMaker 2 to strait (issue 12 §2): MM2 mirrors `A->B`, is stopped
//! with SIGTERM as an operator would, and strait starts on the very same `.properties` file.
//!
//! The scenario, on two Apache Kafka 4.4.0 clusters, with MirrorMaker 2 4.3.1 (the newest
//! `connect-mirror` Maven Central serves here):
//!
//! 1. ids 0..3000 on `orders` (3 partitions, lz4 batches); DeleteRecords trims each partition's
//!    start (100, 150, 200 records), so source offsets and target offsets differ once mirrored;
//! 2. two librdkafka groups read part of it on A and commit (`before`, `after`);
//! 3. real MM2 (dedicated mode, `strait_testkit::Mm2`) mirrors it until both groups are
//!    checkpointed on B, and is stopped with SIGTERM; MM2's checkpoints and its Connect offsets
//!    are kept for comparison;
//! 4. A trims one partition further (records MM2 copied and both groups read), and 1500 more ids
//!    are written: the topic is only partly mirrored;
//! 5. `strait run` starts on MM2's file: it must line each partition up with what MM2 wrote,
//!    match those records one by one (recovered, not copied again), and mirror only the rest;
//! 6. `after` reads further on A (a group committed after the cutover); strait checkpoints both;
//! 7. `strait failover plan` / `apply` moves both groups to B, where librdkafka consumers in the
//!    same groups read the rest.
//!
//! Asserted: every id exactly once per group across A then B (duplicates and losses counted
//! separately); B holds each source record once, with the same key, value, headers and
//! timestamp, and nothing else (its end offsets are exactly what MM2 and strait copied, nothing
//! written twice); strait's counters (recovered, duplicates, lost); the plan's target offsets equal
//! the translation worked out from the records, and MM2's own checkpoints for the same groups are
//! printed beside them (never ahead of them). `-- --nocapture` prints the figures behind
//! `docs/migrating-from-mm2.md`.
//!
//! On the shared clusters the test's aliases, topic and groups are its own ([`Names`]), and so
//! are the topics named after the aliases (MM2's checkpoints and Connect topics, strait's map);
//! MM2 and strait mirror only the test's topic and groups.

mod running;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use running::{run_to_end, Finished, Strait};
use strait_kafka::admin::{IsolationLevel, OffsetSpec};
use strait_kafka::fetch::{FetchOptions, FetchPosition};
use strait_kafka::{Client, ClientConfig, TopicPartition};
use strait_testkit::{Clusters, Mm2, Names, Rdk, TestRecord, MM2_STARTED};
use strait_wire::mm2::Checkpoint;
use strait_wire::BatchScanner;

const PARTITIONS: i32 = 3;
/// Ids written before MM2 runs.
const BEFORE_MM2: u64 = 3_000;
/// Ids written after MM2 stopped, before strait starts.
const AFTER_MM2: u64 = 1_500;
/// Records deleted from the start of each partition before MM2 runs.
const TRIM: [i64; 3] = [100, 150, 200];
const WAIT: Duration = Duration::from_secs(180);
const TIMEOUT: Duration = Duration::from_secs(60);

/// The names of one test: its cluster aliases, its topic and the topics named after them.
struct Test {
    names: Names,
    /// The source cluster's alias.
    a: String,
    /// The target cluster's alias.
    b: String,
    topic: String,
    /// `<source>.<topic>`, on B.
    remote: String,
    /// `<source>.checkpoints.internal`, on B: written by MM2, then by strait.
    checkpoints: String,
    /// MM2's Connect offsets topic in dedicated mode: on B, named after the source
    /// (`mm2-offsets.<source>.internal`, `MirrorMakerConfig.workerConfig`).
    connect_offsets: String,
}

impl Test {
    fn new() -> Test {
        let names = Names::new();
        let (a, b) = (names.alias("A"), names.alias("B"));
        let topic = names.topic("orders");
        Test {
            remote: format!("{a}.{topic}"),
            checkpoints: format!("{a}.checkpoints.internal"),
            connect_offsets: format!("mm2-offsets.{a}.internal"),
            topic,
            a,
            b,
            names,
        }
    }

    /// The flow, `A->B`.
    fn flow(&self) -> String {
        format!("{}->{}", self.a, self.b)
    }
}

/// The record of id `i`: partition `i % 3`, key `k-i`, value `id-i`, a header `id`.
fn record(i: u64) -> TestRecord {
    let id = i.to_string();
    TestRecord::new(
        (i % PARTITIONS as u64) as i32,
        Some(format!("k-{i}").as_bytes()),
        Some(format!("id-{i}").as_bytes()),
    )
    .with_header("id", Some(id.as_bytes()))
}

fn id_of(r: &TestRecord) -> u64 {
    let value = r.value.as_deref().expect("every record has a value");
    std::str::from_utf8(value)
        .ok()
        .and_then(|v| v.strip_prefix("id-"))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("not a test record: {r:?}"))
}

fn offset(r: &TestRecord) -> i64 {
    r.offset.expect("consumed records have offsets")
}

#[test]
fn cutover_from_mm2_continues_where_it_stopped_without_copying_again() {
    cutover(false);
}

/// As above, but MM2 was killed once (SIGKILL) before it committed any Connect offset and
/// started again, so it copied everything a second time (MM2 is at least once): B holds each of
/// those records twice. strait must match each record to its later copy (so that no group
/// placed through its map reads the second copies), report the first copies as duplicates,
/// and copy nothing again.
#[test]
fn cutover_from_mm2_that_copied_records_twice_matches_their_later_copies() {
    cutover(true);
}

fn cutover(mm2_crashed: bool) {
    let clusters = Clusters::shared();
    let t = Test::new();
    let (alias_a, alias_b) = (t.a.as_str(), t.b.as_str());
    let (topic, remote, offsets_topic) = (
        t.topic.as_str(),
        t.remote.as_str(),
        t.connect_offsets.as_str(),
    );
    let flow = t.flow();
    let (before, after) = (t.names.group("before"), t.names.group("after"));
    let rdk = Rdk::new();
    let (a, b) = (
        clusters.source.bootstrap.clone(),
        clusters.target.bootstrap.clone(),
    );
    let dir = clusters.dir().to_owned();
    let kafka = Kafka::new(&a, &b);

    // 1. The topic, its first ids, and its start trimmed.
    rdk.create_topic(&a, topic, PARTITIONS);
    produce(&rdk, &a, topic, 0, BEFORE_MM2, 6);
    for (p, to) in TRIM.iter().enumerate() {
        kafka.delete_records(topic, p as i32, *to);
    }
    let trimmed: BTreeSet<u64> = (0..BEFORE_MM2)
        .filter(|i| (i / PARTITIONS as u64) < TRIM[(i % PARTITIONS as u64) as usize] as u64)
        .collect();

    // 2. Two groups read part of it on A and commit.
    let mut read_on_a: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for (group, n) in [(before.as_str(), 900), (after.as_str(), 600)] {
        let read = rdk.group_consume(&a, group, topic, Some(n), TIMEOUT);
        assert_eq!(read.len(), n, "{group}");
        read_on_a.insert(group, read.iter().map(id_of).collect());
    }
    let committed_before_cutover: BTreeMap<&str, BTreeMap<i32, i64>> =
        [before.as_str(), after.as_str()]
            .into_iter()
            .map(|g| (g, rdk.committed(&a, g, topic, &[0, 1, 2])))
            .collect();
    eprintln!("committed on A before the cutover: {committed_before_cutover:?}");

    // 3. MM2 mirrors it, checkpoints both groups, and is stopped as an operator would.
    // Only this test's topic and groups, and not the source's `heartbeats`, which other tests'
    // heartbeat emitters write (MM2 and strait mirror it whatever `topics` says): as on
    // clusters of the test's own, where nothing writes heartbeats into A.
    let topics = format!(
        "{flow}.topics = {topic}\n\
         {flow}.groups = {groups}\n\
         heartbeats.replication.enabled = false",
        groups = t.names.pattern()
    );
    let properties = Mm2::flow_properties((alias_a, &a), (alias_b, &b), &topics);
    let first_copy: i64 = TRIM.iter().map(|t| BEFORE_MM2 as i64 / 3 - t).sum();
    let mut next_id = BEFORE_MM2;
    // Copied by MM2 twice (`mm2_crashed`).
    let mut copied_twice = 0;
    if mm2_crashed {
        // No Connect offset committed (flush every 10 minutes) when MM2 is killed.
        let once = Mm2::flow_properties(
            (alias_a, &a),
            (alias_b, &b),
            &format!("{topics}\n{alias_b}.offset.flush.interval.ms = 600000"),
        );
        let mut mm2 = Mm2::start(&dir, &once, &[alias_b]);
        mm2.wait_for_log(MM2_STARTED, WAIT);
        mm2.wait_until(WAIT, "MM2 mirrored the topic once", || {
            let copied: i64 = (0..PARTITIONS)
                .map(|p| kafka.end(&kafka.target, remote, p))
                .sum();
            (copied == first_copy).then_some(())
        });
        mm2.kill();
        copied_twice = first_copy;
        eprintln!(
            "MM2 copied {first_copy} records and was killed (SIGKILL) before any offset commit"
        );
        produce(&rdk, &a, topic, next_id, 300, 1);
        next_id += 300;
    }
    let mirrored_by_mm2 = first_copy + (next_id - BEFORE_MM2) as i64;
    let started = Instant::now();
    let mut mm2 = Mm2::start(&dir, &properties, &[alias_b]);
    mm2.wait_for_log(MM2_STARTED, WAIT);
    mm2.wait_until(
        WAIT,
        "MM2 mirrored the topic and checkpointed both groups",
        || {
            if !kafka.topics(&kafka.target).contains(&t.checkpoints) {
                return None;
            }
            let copied: i64 = (0..PARTITIONS)
                .map(|p| kafka.end(&kafka.target, remote, p))
                .sum();
            let checkpoints =
                last_checkpoints(&kafka.records(&kafka.target, &t.checkpoints, 0), remote);
            let all = committed_before_cutover.iter().all(|(g, offsets)| {
                offsets.iter().all(|(p, o)| {
                    checkpoints
                        .get(&((*g).to_owned(), *p))
                        .is_some_and(|c| c.upstream_offset == *o)
                })
            });
            (copied == mirrored_by_mm2 + copied_twice && all).then_some(())
        },
    );
    eprintln!(
        "MM2 mirrored {mirrored_by_mm2} records and checkpointed: {:?}",
        started.elapsed()
    );
    let status = mm2.stop();
    eprintln!("MM2 stopped with SIGTERM: {status}");
    assert!(
        mm2.log_text().contains("Kafka MirrorMaker stopped"),
        "MM2 did not shut down cleanly:\n{}",
        mm2.log_tail(30)
    );
    let mm2_checkpoints =
        last_checkpoints(&kafka.records(&kafka.target, &t.checkpoints, 0), remote);
    let mm2_target_ends: Vec<i64> = (0..PARTITIONS)
        .map(|p| kafka.end(&kafka.target, remote, p))
        .collect();
    eprintln!("--- what MM2 left behind ---");
    eprintln!("{remote} end offsets on B: {mm2_target_ends:?}");
    for ((g, p), c) in &mm2_checkpoints {
        eprintln!(
            "MM2 checkpoint {g} {remote}-{p}: upstream {} downstream {}",
            c.upstream_offset, c.downstream_offset
        );
    }
    let connect_offsets = kafka.connect_offsets(&t);
    for ((p, key), (_, value)) in &connect_offsets {
        eprintln!("MM2 Connect offset {key} = {value} (partition {p} of {offsets_topic})");
    }

    // 4. A deletes more of one partition (records MM2 copied and both groups read), and more
    // ids arrive: MM2 mirrored only part of the topic.
    let (late_p, late_to) = (0..PARTITIONS)
        .map(|p| {
            let read = committed_before_cutover
                .values()
                .map(|o| o.get(&p).copied().unwrap_or(0))
                .min()
                .unwrap_or(0);
            (p, TRIM[p as usize] + (read - TRIM[p as usize]).max(0) / 2)
        })
        .max_by_key(|(p, to)| to - TRIM[*p as usize])
        .expect("partitions");
    let late_trimmed = late_to - TRIM[late_p as usize];
    if late_trimmed > 0 {
        kafka.delete_records(topic, late_p, late_to);
    }
    eprintln!(
        "A deleted {late_trimmed} more records of {topic}-{late_p} after MM2 stopped (to {late_to})"
    );
    produce(&rdk, &a, topic, next_id, AFTER_MM2, 3);
    let all_ids: BTreeSet<u64> = (0..next_id + AFTER_MM2)
        .filter(|i| !trimmed.contains(i))
        .collect();

    // 5. strait on MM2's very file.
    let config = mm2.config().to_owned();
    let started = Instant::now();
    let strait = Strait::run(&config, dir.join("strait-cutover.log"));
    let expected_ends: Vec<i64> = (0..PARTITIONS)
        .map(|p| mm2_target_ends[p as usize] + AFTER_MM2 as i64 / 3)
        .collect();
    let metrics = strait.metrics_until(120, "strait caught up", |m| {
        m.sum("strait_lag_records", &[]) == 0.0
            && m.sum("strait_record_count_total", &[]) >= AFTER_MM2 as f64
    });
    eprintln!("strait caught up: {:?}", started.elapsed());
    let target_ends: Vec<i64> = (0..PARTITIONS)
        .map(|p| kafka.end(&kafka.target, remote, p))
        .collect();
    let recovered = metrics.sum("strait_recovered_records_total", &[]);
    let duplicates = metrics.sum("strait_duplicate_records_total", &[]);
    let lost = metrics.sum("strait_lost_records_total", &[]);
    let written = metrics.sum("strait_record_count_total", &[]);
    eprintln!(
        "strait: recovered {recovered}, written {written}, duplicates {duplicates}, lost {lost}; \
         B ends {target_ends:?}, expected {expected_ends:?}"
    );

    // 6. `after` reads further on A, after the cutover; strait checkpoints it.
    let read = rdk.group_consume(&a, &after, topic, Some(1_000), TIMEOUT);
    assert_eq!(read.len(), 1_000);
    read_on_a
        .get_mut(after.as_str())
        .expect("read before")
        .extend(read.iter().map(id_of));
    let committed: BTreeMap<&str, BTreeMap<i32, i64>> = [before.as_str(), after.as_str()]
        .into_iter()
        .map(|g| (g, rdk.committed(&a, g, topic, &[0, 1, 2])))
        .collect();
    eprintln!("committed on A at failover: {committed:?}");
    let deadline = Instant::now() + WAIT;
    let strait_checkpoints = loop {
        let checkpoints =
            last_checkpoints(&kafka.records(&kafka.target, &t.checkpoints, 0), remote);
        let current = committed.iter().all(|(g, offsets)| {
            offsets.iter().all(|(p, o)| {
                // `after` moved after the cutover, so only strait can have written these: it
                // writes every group's changes in one pass.
                checkpoints
                    .get(&((*g).to_owned(), *p))
                    .is_some_and(|c| c.upstream_offset == *o)
            })
        });
        if current {
            break checkpoints;
        }
        assert!(
            Instant::now() < deadline,
            "strait did not checkpoint {committed:?} within {WAIT:?}: {checkpoints:?}\n{}",
            strait.log_text()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let status = Command::new(env!("CARGO_BIN_EXE_strait"))
        .args(["status", "--url", &strait.url()])
        .output()
        .expect("strait status");
    eprintln!(
        "--- strait status ---\n{}",
        String::from_utf8_lossy(&status.stdout)
    );
    let log = strait.log_text();
    strait.stop();
    eprintln!("--- strait's log about the take-over ---");
    for line in log.lines().filter(|l| {
        l.contains("no offset map")
            || l.contains("taking over")
            || l.contains("beyond the offset map")
            || l.contains("lost")
            || l.contains("WARN")
            || l.contains("ERROR")
            || l.contains("flow stopped")
    }) {
        eprintln!("{line}");
    }

    let map = strait_ok(
        &dir,
        &["map", "--config", config.to_str().expect("utf-8 path")],
    );
    eprintln!("--- strait map ---\n{map}");

    // What B holds, against A, record by record.
    let on_a = rdk.consume(&a, topic, all_ids.len() - late_trimmed as usize, TIMEOUT);
    let b_total: i64 = target_ends.iter().sum();
    let on_b = rdk.consume(&b, remote, b_total as usize, TIMEOUT);
    let positions = Positions::new(&on_a, &on_b);
    let mut b_ids: Vec<u64> = on_b.iter().map(id_of).collect();
    b_ids.sort_unstable();
    let b_dups = b_ids.windows(2).filter(|w| w[0] == w[1]).count();
    let b_set: BTreeSet<u64> = b_ids.iter().copied().collect();
    let b_missing = all_ids.difference(&b_set).count();
    let b_foreign = b_set.difference(&all_ids).count();
    eprintln!(
        "B: {} records, {} distinct ids, {b_dups} ids twice, {b_missing} ids missing, {b_foreign} \
         foreign",
        on_b.len(),
        b_set.len()
    );
    assert_eq!(
        (b_dups, b_missing, b_foreign),
        (copied_twice as usize, 0, 0),
        "B's ids: twice, missing, foreign"
    );
    assert_eq!(
        b_total,
        on_a.len() as i64 + late_trimmed + duplicates as i64,
        "B holds A's records, the copies of those A deleted since, and the duplicates strait \
         reported, nothing else"
    );
    for r in &on_a {
        let copy = positions.copy_of(r);
        assert!(
            copy.same_payload(r) && copy.timestamp_ms == r.timestamp_ms,
            "A {r:?}\nB {copy:?}"
        );
    }
    assert_eq!(target_ends, expected_ends, "B holds nothing written twice");
    assert_eq!(
        (recovered, duplicates, lost, written),
        (
            (mirrored_by_mm2 - late_trimmed) as f64,
            copied_twice as f64,
            0.0,
            AFTER_MM2 as f64
        ),
        "strait's counters: recovered, duplicates, lost, written"
    );

    // Translation: strait's checkpoints (and below, its plan) against the records, MM2's
    // checkpoints beside them.
    eprintln!(
        "\n{:<8} {:>9} {:>8} {:>13} {:>14} {:>16} {:>15}",
        "group",
        "partition",
        "on A",
        "from records",
        "MM2 checkpoint",
        "strait checkpoint",
        "MM2 behind by"
    );
    for (g, offsets) in &committed {
        for (p, o) in offsets {
            let exact = positions.translate(*p, *o);
            let ours = strait_checkpoints[&((*g).to_owned(), *p)].downstream_offset;
            let theirs = mm2_checkpoints
                .get(&((*g).to_owned(), *p))
                .map(|c| (c.upstream_offset, c.downstream_offset));
            let theirs_text = theirs.map_or("-".to_owned(), |(u, d)| format!("{d} (of {u})"));
            let behind = theirs.map_or("-".to_owned(), |(u, d)| {
                format!("{}", positions.translate(*p, u) - d)
            });
            eprintln!("{g:<8} {p:>9} {o:>8} {exact:>13} {theirs_text:>14} {ours:>16} {behind:>15}");
            assert_eq!(ours, exact, "{g} p{p}: strait's checkpoint");
            if let Some((u, d)) = theirs {
                assert!(d <= positions.translate(*p, u), "{g} p{p}: MM2 ahead");
            }
        }
    }

    // 7. Failover: plan, apply, and both groups read the rest on B.
    let config = config.to_str().expect("utf-8 path");
    let plan_path = dir.join("plan.json");
    let plan_path = plan_path.to_str().expect("utf-8 path");
    let table = strait_ok(
        &dir,
        &["failover", "plan", "--config", config, "--flow", &flow],
    );
    eprintln!("--- strait failover plan ---\n{table}");
    strait_ok(
        &dir,
        &[
            "failover", "plan", "--config", config, "--flow", &flow, "--out", plan_path,
        ],
    );
    for ((g, p), target) in planned_targets(plan_path) {
        let o = committed[g.as_str()][&p];
        assert_eq!(target, positions.translate(p, o), "{g} p{p}: the plan");
    }
    let applied = strait_ok(&dir, &["failover", "apply", plan_path, "--config", config]);
    eprintln!("--- strait failover apply ---\n{applied}");

    // A group without an offset on a partition starts there at B's log start, as it would at
    // A's: it reads every copy B holds there, the duplicates MM2 wrote included (no plan can
    // place a group on a partition it never committed).
    let copies_twice_on = |p: i32| -> usize {
        let ids: Vec<u64> = on_b
            .iter()
            .filter(|r| r.partition == p)
            .map(id_of)
            .collect();
        ids.len() - ids.iter().collect::<BTreeSet<_>>().len()
    };
    eprintln!(
        "\n{:<8} {:>9} {:>9} {:>10} {:>6} {:>28}",
        "group", "read on A", "read on B", "duplicates", "lost", "MM2's, where never committed"
    );
    let mut failures = Vec::new();
    for (g, a_ids) in &read_on_a {
        let read_on_b = rdk.group_consume(&b, g, remote, None, TIMEOUT);
        let mut times: HashMap<u64, usize> = HashMap::new();
        for id in a_ids.iter().copied().chain(read_on_b.iter().map(id_of)) {
            *times.entry(id).or_default() += 1;
        }
        let duplicated: usize = times.values().map(|n| n - 1).sum();
        let lost = all_ids.iter().filter(|id| !times.contains_key(id)).count();
        let foreign = times.keys().filter(|id| !all_ids.contains(id)).count();
        let unplaced: usize = (0..PARTITIONS)
            .filter(|p| !committed[*g].contains_key(p))
            .map(copies_twice_on)
            .sum();
        eprintln!(
            "{g:<8} {:>9} {:>9} {duplicated:>10} {lost:>6} {unplaced:>28}",
            a_ids.len(),
            read_on_b.len()
        );
        if duplicated != unplaced || lost != 0 || foreign != 0 {
            failures.push(format!(
                "{g}: {duplicated} duplicates, {lost} lost, {foreign} foreign"
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:?}");

    if !mm2_crashed {
        roll_back_to_mm2(
            &t,
            &kafka,
            &rdk,
            (&a, &b),
            (&dir, &properties),
            next_id + AFTER_MM2,
            &all_ids,
        );
    }
}

/// Rolling back: strait stopped, MM2 started again on the same file. MM2 resumes each partition
/// at its Connect offset, which is where MM2 stopped, not where strait did: left alone it would
/// copy again everything strait mirrored. So each offset is first set to where strait's copy
/// ends, by writing a record with the same key to MM2's offsets topic (where a console producer
/// would put it: Connect's key, so the same partition). MM2 then copies only what is new. It
/// runs in `dir` on `properties`, as before.
fn roll_back_to_mm2(
    t: &Test,
    kafka: &Kafka,
    rdk: &Rdk,
    (a, b): (&str, &str),
    (dir, properties): (&Path, &str),
    first_new: u64,
    all_ids: &BTreeSet<u64>,
) {
    let (topic, remote, offsets_topic) = (
        t.topic.as_str(),
        t.remote.as_str(),
        t.connect_offsets.as_str(),
    );
    // strait caught up and stopped, and nothing was written to A since: its copy ends at A's
    // end.
    let ends: Vec<i64> = (0..PARTITIONS)
        .map(|p| kafka.end(&kafka.source, topic, p))
        .collect();
    let b_before: i64 = (0..PARTITIONS)
        .map(|p| kafka.end(&kafka.target, remote, p))
        .sum();
    // As MM2 left them: strait does not touch them.
    let mm2_offsets = kafka.connect_offsets(t);
    let offsets_partitions = kafka.partitions(&kafka.target, offsets_topic);
    let mut rewritten = Vec::new();
    for ((p, key), (source, value)) in &mm2_offsets {
        // Where Kafka's Java producer (Connect's, or kafka-console-producer's) puts the key.
        assert_eq!(
            *p,
            java_partition(key.as_bytes(), offsets_partitions),
            "{key}: not in the partition the Java producer's default partitioner picks"
        );
        let stored: i64 = serde_json::from_str::<serde_json::Value>(value).expect("JSON")["offset"]
            .as_i64()
            .expect("an offset");
        // MM2 stored the last offset it copied (it stopped at the end of what existed then).
        let offset = ends[*source as usize] - 1;
        let new_value = format!("{{\"offset\":{offset}}}");
        eprintln!(
            "rolling back: {offsets_topic} partition {p}: {key} = {value} (MM2 copied up to \
             {stored}) -> {new_value}"
        );
        rewritten.push(TestRecord::new(
            *p,
            Some(key.as_bytes()),
            Some(new_value.as_bytes()),
        ));
    }
    assert_eq!(rewritten.len(), PARTITIONS as usize, "{mm2_offsets:?}");
    rdk.produce(b, offsets_topic, &rewritten, "none");
    produce(rdk, a, &t.topic, first_new, 300, 1);
    let started = Instant::now();
    let mut mm2 = Mm2::start(dir, properties, &[t.b.as_str()]);
    mm2.wait_for_log(MM2_STARTED, WAIT);
    mm2.wait_until(WAIT, "MM2 mirrored the 300 new records", || {
        let total: i64 = (0..PARTITIONS)
            .map(|p| kafka.end(&kafka.target, remote, p))
            .sum();
        (total >= b_before + 300).then_some(())
    });
    // Anything copied again would come with them or right after.
    std::thread::sleep(Duration::from_secs(5));
    mm2.stop();
    let b_after: i64 = (0..PARTITIONS)
        .map(|p| kafka.end(&kafka.target, remote, p))
        .sum();
    let on_b = rdk.consume(b, remote, b_after as usize, TIMEOUT);
    let ids: Vec<u64> = on_b.iter().map(id_of).collect();
    let distinct: BTreeSet<u64> = ids.iter().copied().collect();
    let expected: BTreeSet<u64> = all_ids
        .iter()
        .copied()
        .chain(first_new..first_new + 300)
        .collect();
    eprintln!(
        "MM2 after the roll-back ({:?}): B {b_before} -> {b_after} records, {} ids twice, {} \
         missing",
        started.elapsed(),
        ids.len() - distinct.len(),
        expected.difference(&distinct).count()
    );
    assert_eq!(b_after, b_before + 300, "MM2 copied only the new records");
    assert_eq!(distinct, expected);
    assert_eq!(ids.len(), distinct.len(), "no id twice on B");
}

/// The partition Kafka's Java producer picks for `key` among `partitions`
/// (`BuiltInPartitioner.partitionForKey`: murmur2, made positive, modulo).
fn java_partition(key: &[u8], partitions: i32) -> i32 {
    const M: u32 = 0x5bd1_e995;
    let mut h: u32 = 0x9747_b28c ^ key.len() as u32;
    let mut chunks = key.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        for (i, b) in rest.iter().enumerate().rev() {
            h ^= u32::from(*b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    ((h & 0x7fff_ffff) % partitions as u32) as i32
}

/// Produces ids `first..first + n` to `topic` in `calls` produce calls (batches of different
/// sizes).
fn produce(rdk: &Rdk, bootstrap: &str, topic: &str, first: u64, n: u64, calls: u64) {
    for c in 0..calls {
        let records: Vec<TestRecord> = (first + c * n / calls..first + (c + 1) * n / calls)
            .map(record)
            .collect();
        let acks = rdk.produce(bootstrap, topic, &records, "lz4");
        assert_eq!(acks.len(), records.len());
    }
}

/// Where each record of A landed on B, worked out from the records (every value is distinct).
struct Positions {
    /// (partition, value) -> the record on B.
    on_b: HashMap<(i32, Vec<u8>), TestRecord>,
    /// (partition, source offset) -> target offset.
    landed: BTreeMap<(i32, i64), i64>,
}

impl Positions {
    fn new(on_a: &[TestRecord], on_b: &[TestRecord]) -> Positions {
        let by_value: HashMap<(i32, Vec<u8>), TestRecord> = on_b
            .iter()
            .map(|r| {
                (
                    (r.partition, r.value.clone().unwrap_or_default()),
                    r.clone(),
                )
            })
            .collect();
        let landed = on_a
            .iter()
            .filter_map(|r| {
                let copy = by_value.get(&(r.partition, r.value.clone().unwrap_or_default()))?;
                Some(((r.partition, offset(r)), offset(copy)))
            })
            .collect();
        Positions {
            on_b: by_value,
            landed,
        }
    }

    fn copy_of(&self, r: &TestRecord) -> &TestRecord {
        self.on_b
            .get(&(r.partition, r.value.clone().unwrap_or_default()))
            .unwrap_or_else(|| panic!("A's record {r:?} is not on B"))
    }

    /// Where a consumer at A position `g` continues on B: the copy of the first record at or
    /// after `g`, or one past the last copy at the end.
    fn translate(&self, partition: i32, g: i64) -> i64 {
        if let Some((_, t)) = self
            .landed
            .range((partition, g)..(partition, i64::MAX))
            .next()
        {
            return *t;
        }
        self.landed
            .range((partition, 0)..(partition, i64::MAX))
            .next_back()
            .map_or(0, |(_, t)| t + 1)
    }
}

/// The last checkpoint per (group, partition) of `remote` (`A.orders`), as MM2's readers keep
/// them.
fn last_checkpoints(raws: &[Raw], remote: &str) -> BTreeMap<(String, i32), Checkpoint> {
    raws.iter()
        .map(|r| {
            Checkpoint::decode(&r.key, &r.value)
                .unwrap_or_else(|e| panic!("not a checkpoint at {}: {e}", r.offset))
        })
        .filter(|c| c.topic == remote)
        .map(|c| ((c.group.clone(), c.partition), c))
        .collect()
}

/// `(group, partition) -> target offset` of a plan file.
fn planned_targets(path: &str) -> BTreeMap<(String, i32), i64> {
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("read plan")).expect("JSON");
    let mut out = BTreeMap::new();
    for g in plan["groups"].as_array().expect("groups") {
        for p in g["partitions"].as_array().expect("partitions") {
            out.insert(
                (
                    g["group"].as_str().expect("group").to_owned(),
                    p["partition"].as_i64().expect("partition") as i32,
                ),
                p["target_offset"].as_i64().expect("target offset"),
            );
        }
    }
    out
}

/// Runs the strait binary to its end; it must succeed. Its stdout.
fn strait_ok(dir: &Path, args: &[&str]) -> String {
    let out: Finished = run_to_end(dir, args, &[("RUST_LOG", "warn")]);
    assert!(out.ok(), "strait {args:?} failed:\n{}", out.both());
    out.stdout
}

/// A record as fetched: offset, raw key and value.
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

    fn partitions(&self, client: &Client, topic: &str) -> i32 {
        let metadata = self
            .runtime
            .block_on(client.refresh_metadata())
            .expect("metadata");
        metadata
            .topics
            .get(topic)
            .map_or(0, |t| t.partitions.len() as i32)
    }

    fn delete_records(&self, topic: &str, partition: i32, to: i64) {
        let tp = TopicPartition::new(topic, partition);
        let start = self
            .runtime
            .block_on(self.source.delete_records(&tp, to))
            .unwrap_or_else(|e| panic!("delete records of {tp} to {to}: {e}"));
        assert_eq!(start, to, "{tp}: log start");
    }

    fn end(&self, client: &Client, topic: &str, partition: i32) -> i64 {
        let tp = TopicPartition::new(topic, partition);
        self.runtime
            .block_on(client.list_offset(&tp, OffsetSpec::Latest, IsolationLevel::ReadUncommitted))
            .unwrap_or_else(|e| panic!("end offset of {tp}: {e}"))
            .offset
    }

    /// Every record of one partition of `topic` up to its end now, in order.
    fn records(&self, client: &Client, topic: &str, partition: i32) -> Vec<Raw> {
        let tp = TopicPartition::new(topic, partition);
        let end = self.end(client, topic, partition);
        let options = FetchOptions {
            max_wait: Duration::from_millis(10),
            isolation: IsolationLevel::ReadUncommitted,
            ..Default::default()
        };
        let mut position = self
            .runtime
            .block_on(client.list_offset(
                &tp,
                OffsetSpec::Earliest,
                IsolationLevel::ReadUncommitted,
            ))
            .expect("log start")
            .offset;
        let mut out = Vec::new();
        while position < end {
            let data = self
                .runtime
                .block_on(client.fetch(&[FetchPosition::new(tp.clone(), position)], &options))
                .remove(&tp)
                .expect("the partition asked for")
                .unwrap_or_else(|e| panic!("fetch {tp} at {position}: {e}"));
            let before = position;
            for batch in BatchScanner::new(data.records) {
                let batch = batch.expect("a well-formed batch");
                if batch.header.next_offset() <= position || batch.header.attributes.is_control() {
                    position = position.max(batch.header.next_offset());
                    continue;
                }
                for r in strait_wire::records::batch_records(&batch).expect("records decode") {
                    let offset = batch.header.base_offset + i64::from(r.offset_delta);
                    if offset >= position {
                        out.push(Raw {
                            offset,
                            key: r.key.map(|k| k.to_vec()).unwrap_or_default(),
                            value: r.value.map(|v| v.to_vec()).unwrap_or_default(),
                        });
                    }
                }
                position = batch.header.next_offset();
            }
            assert!(position > before, "no progress reading {tp} at {position}");
        }
        out
    }

    /// MM2's Connect source offsets of test `t`'s topic (the last per key): (partition of the
    /// offsets topic, key) -> (source partition, value), as JSON text.
    fn connect_offsets(&self, t: &Test) -> BTreeMap<(i32, String), (i32, String)> {
        let mut out = BTreeMap::new();
        for p in 0..self.partitions(&self.target, &t.connect_offsets) {
            for r in self.records(&self.target, &t.connect_offsets, p) {
                let key = String::from_utf8_lossy(&r.key).into_owned();
                let Ok(json) = serde_json::from_str::<serde_json::Value>(&key) else {
                    continue;
                };
                let partition = &json[1];
                if partition["topic"] == t.topic.as_str() && partition["cluster"] == t.a.as_str() {
                    let source = partition["partition"].as_i64().expect("partition") as i32;
                    let value = String::from_utf8_lossy(&r.value).into_owned();
                    out.insert((p, key), (source, value));
                }
            }
        }
        out
    }
}

/// The cost of taking over a remote topic without a map: 1,000,000 records (100-byte values,
/// lz4, from Kafka's `ProducerPerformance`) in 3 partitions are mirrored by strait, its map
/// topic is deleted, and strait starts again: every record is read on both sides and matched.
/// The same path as after MM2 (no map, a full remote topic), without MM2's minutes of copying.
/// A measurement, not run by default:
/// `cargo test -p strait --test cutover -- --ignored --nocapture` (`STRAIT_BIN` picks another
/// build of strait, e.g. a release one).
#[test]
#[ignore = "a measurement of several minutes"]
fn takeover_of_a_million_records_is_timed() {
    const RECORDS: i64 = 1_000_000;
    let clusters = Clusters::start();
    let t = Test::new();
    let (alias_a, alias_b, topic, remote) = (
        t.a.as_str(),
        t.b.as_str(),
        t.topic.as_str(),
        t.remote.as_str(),
    );
    let rdk = Rdk::new();
    let (a, b) = (
        clusters.source.bootstrap.clone(),
        clusters.target.bootstrap.clone(),
    );
    let dir = clusters.dir().to_owned();
    let kafka = Kafka::new(&a, &b);
    rdk.create_topic(&a, topic, PARTITIONS);
    let started = Instant::now();
    let servers = format!("bootstrap.servers={a}");
    let records = RECORDS.to_string();
    strait_testkit::kafka_tool(
        "org.apache.kafka.tools.ProducerPerformance",
        &[
            "--topic",
            topic,
            "--num-records",
            &records,
            "--record-size",
            "100",
            "--throughput",
            "-1",
            "--producer-props",
            &servers,
            "compression.type=lz4",
            "linger.ms=20",
            "batch.size=65536",
        ],
    );
    eprintln!("produced {RECORDS} records: {:?}", started.elapsed());
    let config = running::write_flow_config(
        &clusters,
        (alias_a, alias_b),
        "strait.properties",
        &format!(
            "{}.topics = {topic}\nemit.checkpoints.enabled = false",
            t.flow()
        ),
    );
    let config = config.to_str().expect("utf-8 path");
    let bin = std::env::var("STRAIT_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_strait").into());
    let run = |name: &str| -> (Duration, String) {
        let log = dir.join(name);
        let started = Instant::now();
        let status = Command::new(&bin)
            .args(running::run_until_caught_up(config))
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info")
            .stderr(std::fs::File::create(&log).expect("log file"))
            .status()
            .expect("run strait");
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(status.success(), "strait failed:\n{text}");
        (started.elapsed(), text)
    };
    let (copy, _) = run("copy.log");
    eprintln!("strait copied them: {copy:?}");
    let map_topic = &format!("strait-offset-map.{alias_a}.internal");
    kafka
        .runtime
        .block_on(kafka.target.delete_topics(&[map_topic]))
        .expect("delete the map topic");
    let deadline = Instant::now() + TIMEOUT;
    while kafka.topics(&kafka.target).contains(map_topic) {
        assert!(Instant::now() < deadline, "{map_topic} not deleted");
        std::thread::sleep(Duration::from_millis(200));
    }
    let (takeover, log) = run("takeover.log");
    let mut recovered = 0;
    for line in log
        .lines()
        .filter(|l| l.contains("no map for this partition"))
    {
        eprintln!("{line}");
        let field = line
            .split(" recovered=")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|n| n.parse::<i64>().ok())
            .expect("recovered=");
        recovered += field;
    }
    eprintln!("strait took over {recovered} records (no map, everything matched): {takeover:?}");
    assert_eq!(recovered, RECORDS);
    let ends: i64 = (0..PARTITIONS)
        .map(|p| kafka.end(&kafka.target, remote, p))
        .sum();
    assert_eq!(ends, RECORDS, "nothing written again");
}
