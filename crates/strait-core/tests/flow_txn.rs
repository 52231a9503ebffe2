//! A flow whose source holds transactional data: transaction markers take source offsets and are
//! not mirrored, aborted transactions are not mirrored under read_committed (the default) and
//! are under read_uncommitted (as MM2's consumer reads by default), and the offset map stays
//! exact across all of it.
//!
//! The transactions are written by librdkafka's transactional producers into Apache Kafka, which
//! writes the commit and abort markers (after EndTxn has returned to the producer, so a test
//! waits for the last stable offset to reach the high watermark before it mirrors) and lists
//! aborted transactions in READ_COMMITTED fetches. Small fetches (one batch each) put a
//! transaction's data and its marker, and the batches of transactions interleaved by two
//! producers, in different fetches, hence different rounds.

mod common;

use common::client;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use strait_core::flow::{Flow, FlowOptions};
use strait_kafka::admin::{IsolationLevel, OffsetSpec};
use strait_kafka::{Client, TopicPartition};
use strait_testkit::{Clusters, Names, Rdk, TestRecord};
use strait_wire::offset_map::{OffsetMap, SourcePartition, Translation};

/// How long mirroring, or the source finishing its transactions, may take before a test gives
/// up (the suite runs many brokers on few cores).
const TIMEOUT: Duration = Duration::from_secs(60);

/// Bytes per partition per fetch small enough that Kafka returns one batch per fetch (it always
/// returns the first batch, whatever its size).
const ONE_BATCH: i32 = 1;

/// The flow between the test's own aliases with `extra` config lines, fetching at most
/// `partition_max_bytes` per partition.
async fn start(clusters: &Clusters, names: &Names, extra: &str, partition_max_bytes: i32) -> Flow {
    let options = FlowOptions {
        partition_max_bytes,
        ..quick_fetches()
    };
    start_with(clusters, names, extra, options).await
}

/// The flow's default options, but for fetches that wait 50 ms for data.
fn quick_fetches() -> FlowOptions {
    FlowOptions {
        fetch_max_wait: Duration::from_millis(50),
        ..FlowOptions::default()
    }
}

/// The flow between the test's own aliases (`names`), of its topics and groups only, with
/// `extra` config lines and `options`. Heartbeats topics, which a flow mirrors whatever `topics`
/// says, are left out: other tests on the shared clusters write them.
async fn start_with(clusters: &Clusters, names: &Names, extra: &str, options: FlowOptions) -> Flow {
    let pattern = names.pattern();
    Flow::start(
        common::flow_config_between(
            (&names.alias("source"), &names.alias("target")),
            &clusters.source.bootstrap,
            &clusters.target.bootstrap,
            &format!(
                "topics = {pattern}\n\
                 groups = {pattern}\n\
                 heartbeats.replication.enabled = false\n\
                 {extra}"
            ),
        ),
        options,
        client(&clusters.source.bootstrap).await,
        client(&clusters.target.bootstrap).await,
    )
    .await
    .expect("flow starts")
}

/// The name of a transactional producer of the test's own for `Rdk::transaction_steps`, the
/// start of its `transactional.id` (to which rdk.py adds a fresh UUID): `<base>-<id>`.
fn producer(names: &Names, base: &str) -> String {
    format!("{base}-{}", names.id())
}

/// `(read_committed end, high watermark)` of `tp`.
async fn ends(client: &Client, tp: &TopicPartition) -> (i64, i64) {
    let mut out = [0; 2];
    for (end, isolation) in out.iter_mut().zip([
        IsolationLevel::ReadCommitted,
        IsolationLevel::ReadUncommitted,
    ]) {
        *end = client
            .list_offset(tp, OffsetSpec::Latest, isolation)
            .await
            .expect("list offsets")
            .offset;
    }
    (out[0], out[1])
}

/// Waits until every transaction on `topic`'s `partitions` is complete on the source: Kafka
/// writes a transaction's markers after EndTxn returned to the producer, and until then the
/// last stable offset stays at the transaction's first offset.
async fn wait_for_markers(source: &Client, topic: &str, partitions: i32) {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    for p in 0..partitions {
        let tp = TopicPartition::new(topic, p);
        loop {
            let (stable, end) = ends(source, &tp).await;
            if stable == end {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{tp}: last stable offset {stable} still below the end {end} after {TIMEOUT:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// `run_until_caught_up`, bounded by [`TIMEOUT`].
async fn mirror(flow: &mut Flow) {
    tokio::time::timeout(TIMEOUT, flow.run_until_caught_up())
        .await
        .unwrap_or_else(|_| panic!("not caught up within {TIMEOUT:?}: {:?}", flow.stats()))
        .expect("flow mirrors");
}

/// `n` records tagged `tag`, round-robin over `partitions`, with keys, headers and recent
/// timestamps.
fn records(partitions: i32, n: usize, tag: &str) -> Vec<TestRecord> {
    let now = common::now_ms();
    (0..n)
        .map(|i| {
            let mut r = TestRecord::new(
                (i as i32) % partitions,
                (i % 3 != 0)
                    .then(|| format!("k{i}").into_bytes())
                    .as_deref(),
                Some(format!("{tag}-{i}").as_bytes()),
            )
            .with_timestamp(now - 60_000 + i as i64);
            if i % 2 == 0 {
                r = r.with_header("tx", Some(tag.as_bytes()));
            }
            r
        })
        .collect()
}

/// Records with the `(partition, offset)` they got on the source.
fn placed(records: &[TestRecord], offsets: &[(i32, i64)]) -> Vec<(i32, i64, TestRecord)> {
    assert_eq!(records.len(), offsets.len());
    records
        .iter()
        .zip(offsets)
        .map(|(r, &(p, o))| {
            assert_eq!(p, r.partition);
            (p, o, r.clone())
        })
        .collect()
}

/// Checks what `flow` made of `topic`: its remote topic holds exactly the records of `want`
/// (placed on the source as given), per partition in source order, dense from target offset 0,
/// payloads and timestamps equal; and the map translates every source position up to the
/// source's end exactly: a record's offset to its copy's, any other offset (markers, aborted
/// data) to the next mirrored record's, the end to the target's end.
async fn assert_mirrored_exactly(
    clusters: &Clusters,
    names: &Names,
    flow: &Flow,
    topic: &str,
    partitions: i32,
    want: &[(i32, i64, TestRecord)],
) {
    let rdk = Rdk::new();
    let remote = format!("{}.{topic}", names.alias("source"));
    let on_target = rdk.consume(
        &clusters.target.bootstrap,
        &remote,
        want.len(),
        Duration::from_secs(30),
    );
    let src = client(&clusters.source.bootstrap).await;
    let dst = client(&clusters.target.bootstrap).await;
    for p in 0..partitions {
        let mut mine: Vec<&(i32, i64, TestRecord)> = want.iter().filter(|w| w.0 == p).collect();
        mine.sort_by_key(|w| w.1);
        let copies: Vec<&TestRecord> = on_target.iter().filter(|r| r.partition == p).collect();
        assert_eq!(copies.len(), mine.len(), "{remote}-{p}: count");
        for (i, ((_, offset, w), c)) in mine.iter().zip(&copies).enumerate() {
            assert!(w.same_payload(c), "{remote}-{p} [{i}]: {w:?} vs {c:?}");
            assert_eq!(w.timestamp_ms, c.timestamp_ms, "{remote}-{p}: timestamp");
            assert_eq!(c.offset, Some(i as i64), "{remote}-{p}: dense");
            assert!(*offset >= 0);
        }
        let target_end = ends(&dst, &TopicPartition::new(&remote, p)).await.1;
        assert_eq!(
            target_end,
            mine.len() as i64,
            "{remote}-{p}: nothing else on the target"
        );
        let record_at: BTreeMap<i64, i64> = mine
            .iter()
            .enumerate()
            .map(|(i, w)| (w.1, i as i64))
            .collect();
        assert_exact_from(&src, flow.map(), (topic, p), &record_at, target_end, 0).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_transactions_mirror_and_the_map_stays_exact_across_markers() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let source = &clusters.source.bootstrap;
    let rdk = Rdk::new();
    let topic = &names.topic("ledger");
    rdk.create_topic(source, topic, 2);

    // Plain batches (several records each) and committed transactions touching both
    // partitions, interleaved: every transaction leaves a commit marker in each partition.
    let mut want = Vec::new();
    let mut committed_txns = 0;
    for round in 0..3 {
        let plain = records(2, 8, &format!("plain{round}"));
        let offsets = rdk.produce(source, topic, &plain, "none");
        want.extend(placed(&plain, &offsets));
        let txns: Vec<(Vec<TestRecord>, bool)> = (0..2)
            .map(|t| (records(2, 4 + t, &format!("txn{round}.{t}")), true))
            .collect();
        let offsets = rdk.produce_transactions(source, topic, &txns);
        committed_txns += txns.len();
        for ((records, _), offsets) in txns.iter().zip(&offsets) {
            want.extend(placed(records, offsets));
        }
    }
    let tail = records(2, 6, "tail");
    let offsets = rdk.produce(source, topic, &tail, "lz4");
    want.extend(placed(&tail, &offsets));
    wait_for_markers(&client(source).await, topic, 2).await;

    let mut flow = start(
        &clusters,
        &names,
        "",
        FlowOptions::default().partition_max_bytes,
    )
    .await;
    mirror(&mut flow).await;
    let stats = flow.stats();
    assert_eq!(stats.records, want.len() as u64, "{stats:?}");
    assert_eq!(stats.aborted_batches_skipped, 0, "{stats:?}");
    assert_eq!(
        stats.control_batches_skipped,
        2 * committed_txns as u64,
        "one commit marker per transaction and partition: {stats:?}"
    );
    assert_eq!(stats.duplicate_records, 0, "{stats:?}");
    assert_eq!(stats.lost_records, 0, "{stats:?}");
    assert_mirrored_exactly(&clusters, &names, &flow, topic, 2, &want).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborted_transactions_are_not_mirrored() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let source = &clusters.source.bootstrap;
    let rdk = Rdk::new();
    let topic = &names.topic("payments");
    rdk.create_topic(source, topic, 1);

    let before = records(1, 5, "before");
    let before_at = rdk.produce(source, topic, &before, "none");
    let committed = records(1, 4, "committed");
    let aborted = records(1, 3, "aborted");
    let later = records(1, 2, "later");
    let offsets = rdk.produce_transactions(
        source,
        topic,
        &[
            (committed.clone(), true),
            (aborted.clone(), false),
            (later.clone(), true),
        ],
    );
    let after = records(1, 5, "after");
    let after_at = rdk.produce(source, topic, &after, "none");
    wait_for_markers(&client(source).await, topic, 1).await;
    let mut want = placed(&before, &before_at);
    want.extend(placed(&committed, &offsets[0]));
    want.extend(placed(&later, &offsets[2]));
    want.extend(placed(&after, &after_at));

    let mut flow = start(
        &clusters,
        &names,
        "",
        FlowOptions::default().partition_max_bytes,
    )
    .await;
    mirror(&mut flow).await;
    let stats = flow.stats();
    assert!(stats.aborted_batches_skipped > 0, "{stats:?}");
    assert_eq!(
        stats.control_batches_skipped, 3,
        "commit, abort, commit: {stats:?}"
    );
    assert_eq!(stats.records, want.len() as u64, "{stats:?}");
    assert_eq!(stats.lost_records, 0, "{stats:?}");
    assert_mirrored_exactly(&clusters, &names, &flow, topic, 1, &want).await;
}

/// One batch per fetch: the aborted transaction's data comes in one round and its ABORT marker
/// in a later one. The data is skipped all the same (the fetch that returns it lists the
/// transaction as aborted), and the map is exact at every step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_marker_fetched_after_its_data_still_drops_the_data() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let source = &clusters.source.bootstrap;
    let rdk = Rdk::new();
    let topic = &names.topic("payments");
    rdk.create_topic(source, topic, 1);

    let before = records(1, 3, "before");
    let before_at = rdk.produce(source, topic, &before, "none");
    // The aborted transaction in three batches: one record per produce step, each flushed on
    // its own.
    let aborted: Vec<Vec<TestRecord>> = (0..3)
        .map(|b| records(1, 1, &format!("aborted{b}")))
        .collect();
    let p = producer(&names, "p");
    let p = p.as_str();
    let mut steps = vec![(p, "begin", vec![])];
    steps.extend(aborted.iter().map(|r| (p, "produce", r.clone())));
    steps.push((p, "abort", vec![]));
    let committed = records(1, 2, "committed");
    steps.extend([
        (p, "begin", vec![]),
        (p, "produce", committed.clone()),
        (p, "commit", vec![]),
    ]);
    let at = rdk.transaction_steps(source, topic, &steps);
    let after = records(1, 2, "after");
    let after_at = rdk.produce(source, topic, &after, "none");
    wait_for_markers(&client(source).await, topic, 1).await;
    let aborted_end = at[3].last().unwrap().1 + 1;
    // The abort marker is the offset right after the aborted data.
    let abort_marker = aborted_end;
    assert_eq!(
        at[6][0].1,
        abort_marker + 1,
        "the next transaction follows it"
    );
    let mut want = placed(&before, &before_at);
    want.extend(placed(&committed, &at[6]));
    want.extend(placed(&after, &after_at));

    let mut flow = start(&clusters, &names, "", ONE_BATCH).await;
    let sp = SourcePartition::new(topic, 0);
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    let mut data_dropped_before_marker = false;
    let mut rounds = 0;
    while flow.stats().records < want.len() as u64 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not mirrored within {TIMEOUT:?} ({rounds} rounds): {:?}",
            flow.stats()
        );
        flow.round().await.expect("round");
        rounds += 1;
        let accounted = flow
            .map()
            .partition(&sp)
            .and_then(|m| m.src_end())
            .unwrap_or(0);
        if flow.stats().aborted_batches_skipped > 0 && accounted <= abort_marker {
            data_dropped_before_marker = true;
        }
    }
    assert!(
        data_dropped_before_marker,
        "no round dropped aborted data before fetching its marker ({rounds} rounds)"
    );
    let stats = flow.stats();
    assert_eq!(stats.aborted_batches_skipped, 3, "{stats:?}");
    assert_eq!(stats.control_batches_skipped, 2, "abort, commit: {stats:?}");
    assert_eq!(stats.lost_records, 0, "{stats:?}");
    assert_mirrored_exactly(&clusters, &names, &flow, topic, 1, &want).await;
}

/// Two transactional producers whose transactions interleave batch by batch, fetched one batch
/// at a time: first A aborts and B commits, then A commits and B aborts. Only the committed
/// transactions' records reach the target, in source order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interleaved_transactions_of_two_producers_across_fetches() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let source = &clusters.source.bootstrap;
    let rdk = Rdk::new();
    let topic = &names.topic("payments");
    rdk.create_topic(source, topic, 1);

    let before = records(1, 2, "before");
    let before_at = rdk.produce(source, topic, &before, "none");
    let part = |tag: &str, n| records(1, n, tag);
    let (a, b) = (producer(&names, "a"), producer(&names, "b"));
    let (a, b) = (a.as_str(), b.as_str());
    let steps = vec![
        (a, "begin", vec![]),
        (b, "begin", vec![]),
        (a, "produce", part("a1", 2)),
        (b, "produce", part("b1", 2)),
        (a, "produce", part("a2", 1)),
        (b, "produce", part("b2", 3)),
        (a, "abort", vec![]),
        (b, "commit", vec![]),
        (a, "begin", vec![]),
        (b, "begin", vec![]),
        (b, "produce", part("b3", 2)),
        (a, "produce", part("a3", 2)),
        (b, "produce", part("b4", 1)),
        (a, "produce", part("a4", 2)),
        (a, "commit", vec![]),
        (b, "abort", vec![]),
    ];
    let at = rdk.transaction_steps(source, topic, &steps);
    let after = records(1, 2, "after");
    let after_at = rdk.produce(source, topic, &after, "none");
    wait_for_markers(&client(source).await, topic, 1).await;

    let committed_steps = [3, 5, 11, 13]; // b1, b2, a3, a4
    let mut want = placed(&before, &before_at);
    for i in committed_steps {
        want.extend(placed(&steps[i].2, &at[i]));
    }
    want.extend(placed(&after, &after_at));
    let aborted: BTreeSet<i64> = [2, 4, 10, 12]
        .iter()
        .flat_map(|&i| at[i].iter().map(|&(_, o)| o))
        .collect();
    // The producers really interleave: an aborted batch lies between committed ones.
    let first_b1 = at[3][0].1;
    let last_b2 = at[5].last().unwrap().1;
    assert!(aborted.range(first_b1..last_b2).next().is_some(), "{at:?}");

    let mut flow = start(&clusters, &names, "", ONE_BATCH).await;
    mirror(&mut flow).await;
    let stats = flow.stats();
    assert_eq!(stats.records, want.len() as u64, "{stats:?}");
    // a1, a2, b3, b4: at least one batch each.
    assert!(stats.aborted_batches_skipped >= 4, "{stats:?}");
    assert_eq!(
        stats.control_batches_skipped, 4,
        "two markers each: {stats:?}"
    );
    assert_eq!(stats.lost_records, 0, "{stats:?}");
    assert_eq!(stats.duplicate_records, 0, "{stats:?}");
    assert_mirrored_exactly(&clusters, &names, &flow, topic, 1, &want).await;
}

/// `strait.isolation.level = read_uncommitted`: the flow reads as MM2's consumer does by default,
/// so aborted transactions are mirrored like any data; only the markers (which no client may
/// write) are left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_uncommitted_mirrors_aborted_transactions_as_mm2_does() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let source = &clusters.source.bootstrap;
    let rdk = Rdk::new();
    let topic = &names.topic("payments");
    rdk.create_topic(source, topic, 1);

    let before = records(1, 3, "before");
    let before_at = rdk.produce(source, topic, &before, "none");
    let committed = records(1, 4, "committed");
    let aborted = records(1, 3, "aborted");
    let later = records(1, 2, "later");
    let offsets = rdk.produce_transactions(
        source,
        topic,
        &[
            (committed.clone(), true),
            (aborted.clone(), false),
            (later.clone(), true),
        ],
    );
    let after = records(1, 2, "after");
    let after_at = rdk.produce(source, topic, &after, "none");
    wait_for_markers(&client(source).await, topic, 1).await;
    let mut want = placed(&before, &before_at);
    want.extend(placed(&committed, &offsets[0]));
    want.extend(placed(&aborted, &offsets[1]));
    want.extend(placed(&later, &offsets[2]));
    want.extend(placed(&after, &after_at));

    let mut flow = start(
        &clusters,
        &names,
        "strait.isolation.level = read_uncommitted",
        FlowOptions::default().partition_max_bytes,
    )
    .await;
    mirror(&mut flow).await;
    let stats = flow.stats();
    assert_eq!(stats.records, want.len() as u64, "{stats:?}");
    assert_eq!(stats.aborted_batches_skipped, 0, "{stats:?}");
    assert_eq!(
        stats.control_batches_skipped, 3,
        "commit, abort, commit: {stats:?}"
    );
    assert_eq!(stats.lost_records, 0, "{stats:?}");
    assert_mirrored_exactly(&clusters, &names, &flow, topic, 1, &want).await;
}

/// Issue 17 item 7: a compacted, transactional source never moves its log start, and every
/// transaction's marker starts a segment of its own, so only the groups' committed offsets can
/// bound its map. Partition 0 has two groups (the lower one is the bound), partition 1 none (it
/// keeps its last segment alone). Positions at and above the bound translate exactly, those
/// below to `Compacted`, at or before the exact answer; every committed record is on the
/// target; and the map loaded again from its topic is the compacted one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_transactional_source_is_compacted_below_the_lowest_group_offset() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let source = &clusters.source.bootstrap;
    let rdk = Rdk::new();
    let topic = &names.topic("balances");
    rdk.create_topic_with_configs(source, topic, 2, &[("cleanup.policy", "compact")]);
    const TXNS: usize = 60;
    let now = common::now_ms();
    // One record per partition per transaction, each key its own (so the log cleaner removes
    // nothing); every seventh transaction is aborted.
    let txns: Vec<(Vec<TestRecord>, bool)> = (0..TXNS)
        .map(|t| {
            let records = (0..2)
                .map(|p| {
                    TestRecord::new(
                        p,
                        Some(format!("account-{t}-{p}").as_bytes()),
                        Some(format!("balance-{t}").as_bytes()),
                    )
                    .with_timestamp(now - 60_000 + t as i64)
                })
                .collect();
            (records, t % 7 != 3)
        })
        .collect();
    let offsets = rdk.produce_transactions(source, topic, &txns);
    let mut want = Vec::new();
    for ((records, commit), offsets) in txns.iter().zip(&offsets) {
        if *commit {
            want.extend(placed(records, offsets));
        }
    }
    wait_for_markers(&client(source).await, topic, 2).await;
    let committed_at = |p: i32| -> Vec<i64> {
        let mut o: Vec<i64> = want.iter().filter(|w| w.0 == p).map(|w| w.1).collect();
        o.sort_unstable();
        o
    };
    let p0 = committed_at(0);
    // Two groups on partition 0: "behind" at the 20th committed record, "ahead" further on.
    let (behind, ahead) = (p0[20], p0[40]);
    rdk.commit(source, &names.group("behind"), topic, &[(0, behind)]);
    rdk.commit(source, &names.group("ahead"), topic, &[(0, ahead)]);

    // The first run mirrors (its first pass may or may not see the whole map, depending on
    // how the rounds fell); the second starts from the map topic and its first flush is a pass.
    let compacting = |min_segments| FlowOptions {
        compact_min_segments: min_segments,
        ..quick_fetches()
    };
    let mut flow = start_with(&clusters, &names, "", compacting(10)).await;
    mirror(&mut flow).await;
    drop(flow);
    let mut flow = start_with(&clusters, &names, "", compacting(10)).await;
    mirror(&mut flow).await;
    assert_eq!(flow.stats().lost_records, 0, "{:?}", flow.stats());

    // Every committed record is on the target, in order, and nothing else.
    let remote = format!("{}.{topic}", names.alias("source"));
    let dst = client(&clusters.target.bootstrap).await;
    let on_target = rdk.consume(
        &clusters.target.bootstrap,
        &remote,
        want.len(),
        Duration::from_secs(30),
    );
    // Per partition: source offset -> target offset of its copy, and the target's end.
    let mut target_of: BTreeMap<i32, BTreeMap<i64, i64>> = BTreeMap::new();
    let mut target_end: BTreeMap<i32, i64> = BTreeMap::new();
    for p in 0..2 {
        let mut mine: Vec<&(i32, i64, TestRecord)> = want.iter().filter(|w| w.0 == p).collect();
        mine.sort_by_key(|w| w.1);
        let copies: Vec<&TestRecord> = on_target.iter().filter(|r| r.partition == p).collect();
        assert_eq!(copies.len(), mine.len(), "{remote}-{p}: count");
        for ((_, offset, w), c) in mine.iter().zip(&copies) {
            assert!(w.same_payload(c), "{remote}-{p}: {w:?} vs {c:?}");
            target_of
                .entry(p)
                .or_default()
                .insert(*offset, c.offset.expect("read offset"));
        }
        let end = ends(&dst, &TopicPartition::new(&remote, p)).await.1;
        assert_eq!(end, mine.len() as i64, "{remote}-{p}: nothing else");
        target_end.insert(p, end);
    }

    let src = client(source).await;
    // Partition 0: compacted up to the lower group's offset, and no further.
    let sp0 = SourcePartition::new(topic, 0);
    let part0 = flow.map().partition(&sp0).expect("partition 0 mapped");
    let floor = part0.floor().expect("partition 0 compacted");
    let last_below = *p0.iter().rfind(|&&o| o < behind).expect("records below");
    assert!(
        (last_below + 1..=behind).contains(&floor.src_end),
        "floor {floor:?}: dropped up to the group {behind}, kept from it"
    );
    assert_eq!(floor.dst_start, 0, "the lowest target offset ever mapped");
    assert!(
        part0.segments().len() < p0.len() - 15,
        "{} segments kept of {}",
        part0.segments().len(),
        p0.len()
    );
    let exact_from = |p: i32, from: i64| {
        assert_exact_from(
            &src,
            flow.map(),
            (topic, p),
            &target_of[&p],
            target_end[&p],
            from,
        )
    };
    exact_from(0, behind).await;
    let below = p0[5];
    match flow.map().translate(&sp0, below) {
        Translation::Compacted { target, .. } => {
            assert!(
                target <= target_of[&0][&below],
                "at or before the exact answer"
            )
        }
        other => panic!("below the floor, {below} translates to {other:?}"),
    }

    // Partition 1: no group, so only the last segment is kept; the end is still exact.
    let sp1 = SourcePartition::new(topic, 1);
    let part1 = flow.map().partition(&sp1).expect("partition 1 mapped");
    assert!(part1.floor().is_some(), "partition 1 compacted");
    assert_eq!(part1.segments().len(), 1, "{:?}", part1.segments());
    let p1_last = *committed_at(1).last().expect("records");
    exact_from(1, p1_last).await;

    // What the map topic holds loads as the same compacted map.
    let compacted = flow.map().clone();
    drop(flow);
    let flow = start_with(&clusters, &names, "", compacting(usize::MAX)).await;
    for sp in [&sp0, &sp1] {
        assert_eq!(
            flow.map().partition(sp),
            compacted.partition(sp),
            "{sp:?} loaded again"
        );
    }
}

/// Checks that every position of `topic`-`p` from `from` to the source's end translates
/// exactly: a record's offset to its copy's (`record_at`: source offset -> target offset), any
/// other (a marker, aborted data) to the next copy's, the end to `target_end`.
async fn assert_exact_from(
    source: &Client,
    map: &OffsetMap,
    (topic, p): (&str, i32),
    record_at: &BTreeMap<i64, i64>,
    target_end: i64,
    from: i64,
) {
    let source_end = ends(source, &TopicPartition::new(topic, p)).await.1;
    let sp = SourcePartition::new(topic, p);
    for pos in from..=source_end {
        let target = record_at
            .range(pos..)
            .next()
            .map_or(target_end, |(_, &t)| t);
        assert_eq!(
            map.translate(&sp, pos),
            Translation::Exact { target },
            "{topic}-{p} position {pos} ({})",
            if record_at.contains_key(&pos) {
                "a record"
            } else if pos == source_end {
                "the end"
            } else {
                "a marker or aborted data"
            }
        );
    }
}
