//! `strait run` processes sharing two flows as workers (`strait.workers.enabled`), started as a
//! user would, under a steady producer on both sides: `source->target` mirrors `ledger` and
//! `target->source` mirrors `orders`, 64 partitions each, 6 units each. Three workers split the
//! units; one is killed with SIGKILL; another is stopped with SIGSTOP past its session timeout,
//! so the group gives its units away and their new owners fence it, then continued with
//! SIGCONT; a fourth joins; one leaves with SIGTERM; then a fifth is started and killed with
//! SIGKILL at a random moment, three times, so that it dies inside open transactions (the
//! aborted batches on the targets show where it died).
//!
//! Asserted at the end: a read_committed librdkafka consumer reads every source record exactly
//! once, in source order, on both targets; each remote partition's committed batches come from
//! one producer id whose epochs never go back (one writer at a time); the stopped worker's log
//! shows the refusal its writes got after it was continued; `/v1/status` of the workers left
//! shows one generation and one leader per flow and every unit owned once.
//!
//! Measured and printed, not asserted (tests never assert on time): the longest time each
//! remote partition's committed end stood still while a worker joined and while one left, for
//! the partitions whose unit moved and for those whose unit stayed, beside the same figure in a
//! quiet period before; and how many transactions the kills and the fencing left aborted.
//!
//! On the shared clusters the test's aliases, topics and group are its own ([`Names`]), and so
//! are the workers' groups and transactional ids (named after the aliases); of each cluster's
//! `heartbeats`, which every test's flows write, the test looks at the heartbeats of its flows.

mod running;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use running::{flow_properties, run_to_end, run_until_caught_up, write_properties, Strait};
use strait_kafka::admin::{IsolationLevel, OffsetSpec};
use strait_kafka::{Client, ClientConfig, TopicPartition};
use strait_testkit::{Clusters, Names, Rdk, TestRecord};
use strait_wire::mm2::Heartbeat;

const PARTITIONS: i32 = 64;
const UNITS: u32 = 6;
/// Records per produce call of a steady producer.
const PER_CALL: u64 = 3_200;

/// `eprintln!` with the time since `$start`, for the note on this test.
macro_rules! note {
    ($start:expr, $($arg:tt)*) => {
        eprintln!("workers [{:>5.1}s] {}", $start.elapsed().as_secs_f64(), format!($($arg)*))
    };
}

/// One mirrored topic: where it is written, where its copy lands, and what was written to it.
struct Stream {
    flow: String,
    topic: String,
    remote: String,
    /// The aliases of the flow's source and target clusters.
    aliases: (String, String),
    /// Bootstrap of the cluster the topic is on.
    from: String,
    /// Bootstrap of the cluster its copy is on.
    to: String,
    /// Ids by partition in offset order, as the source holds them.
    ledger: Mutex<BTreeMap<i32, BTreeMap<i64, u64>>>,
    next_id: AtomicU64,
}

impl Stream {
    /// Writes `n` new records, id `i` to partition `i % PARTITIONS`, and notes where each
    /// landed.
    fn produce(&self, rdk: &Rdk, n: u64) {
        let first = self.next_id.fetch_add(n, Ordering::SeqCst);
        let batch: Vec<TestRecord> = (first..first + n)
            .map(|id| {
                let value = format!("id={id:08};{}", "x".repeat(60));
                TestRecord::new(
                    (id % PARTITIONS as u64) as i32,
                    Some(format!("k{id}").as_bytes()),
                    Some(value.as_bytes()),
                )
            })
            .collect();
        let acks = rdk.produce(&self.from, &self.topic, &batch, "lz4");
        assert_eq!(acks.len(), batch.len());
        let mut ledger = self.ledger.lock().unwrap();
        for (record, (partition, offset)) in batch.iter().zip(acks) {
            ledger
                .entry(partition)
                .or_default()
                .insert(offset, id_of(record));
        }
    }

    fn produced(&self) -> u64 {
        self.next_id.load(Ordering::SeqCst)
    }

    /// Reads the copy read_committed and counts what is missing and what came twice; asserts
    /// source order per partition where nothing is.
    fn lost_and_duplicated(&self, rdk: &Rdk) -> (usize, usize) {
        let produced = self.produced() as usize;
        let copies = rdk.consume(&self.to, &self.remote, produced, Duration::from_secs(180));
        let mut by_partition: BTreeMap<i32, Vec<u64>> = BTreeMap::new();
        for c in &copies {
            by_partition.entry(c.partition).or_default().push(id_of(c));
        }
        let ledger = self.ledger.lock().unwrap();
        let (mut lost, mut duplicated) = (0usize, 0usize);
        for p in 0..PARTITIONS {
            let expected: Vec<u64> = ledger[&p].values().copied().collect();
            let got = by_partition.remove(&p).unwrap_or_default();
            let mut seen = HashSet::new();
            duplicated += got.iter().filter(|id| !seen.insert(**id)).count();
            lost += expected.iter().filter(|id| !seen.contains(*id)).count();
            if lost == 0 && duplicated == 0 {
                assert_eq!(
                    got, expected,
                    "{} partition {p} out of source order",
                    self.remote
                );
            }
        }
        (lost, duplicated)
    }
}

fn id_of(record: &TestRecord) -> u64 {
    let value = record.value.as_deref().expect("a value");
    std::str::from_utf8(&value[3..11]).unwrap().parse().unwrap()
}

/// What a topic holds, batch by batch, as a read_committed fetch reports it.
#[derive(Debug, Default)]
struct Written {
    /// Per partition, the (producer id, epoch) of its committed data batches, each run of
    /// equal ones once, in offset order.
    writers: BTreeMap<i32, Vec<(i64, i16)>>,
    /// Data batches of aborted transactions, and their records.
    aborted_batches: usize,
    aborted_records: usize,
}

/// Reads every partition of `topic` on `bootstrap` up to its last stable offset.
async fn written(bootstrap: &str, topic: &str, partitions: i32) -> Written {
    use strait_kafka::fetch::{AbortedBatches, FetchOptions};

    let client = Client::connect(ClientConfig::new([bootstrap]))
        .await
        .unwrap();
    let options = FetchOptions {
        max_wait: Duration::from_millis(10),
        isolation: IsolationLevel::ReadCommitted,
        ..FetchOptions::default()
    };
    let mut out = Written::default();
    for p in 0..partitions {
        let tp = TopicPartition::new(topic, p);
        let end = client
            .list_offset(&tp, OffsetSpec::Latest, IsolationLevel::ReadCommitted)
            .await
            .unwrap()
            .offset;
        let mut writers: Vec<(i64, i16)> = Vec::new();
        let mut position = 0;
        while position < end {
            let data = fetch_at(&client, &tp, position, &options).await;
            let mut aborted = AbortedBatches::new(&data.aborted);
            let before = position;
            for batch in strait_wire::BatchScanner::new(data.records) {
                let batch = batch.unwrap();
                let header = &batch.header;
                if header.base_offset < position {
                    continue;
                }
                position = header.next_offset();
                // Every batch goes through the tracker: an abort marker ends its range.
                let in_aborted = aborted.is_aborted(&batch);
                if header.attributes.is_control() {
                    continue;
                }
                if in_aborted {
                    out.aborted_batches += 1;
                    out.aborted_records += header.record_count.max(0) as usize;
                    continue;
                }
                let writer = (header.producer_id, header.producer_epoch);
                if writers.last() != Some(&writer) {
                    writers.push(writer);
                }
            }
            assert!(position > before, "no progress in {tp} at {position}");
        }
        if writers.is_empty() {
            eprintln!("workers: {tp}: no committed data batch below {end} (position {position})");
        }
        out.writers.insert(p, writers);
    }
    out
}

/// What one fetch of `tp` from `position` returns.
async fn fetch_at(
    client: &Client,
    tp: &TopicPartition,
    position: i64,
    options: &strait_kafka::fetch::FetchOptions,
) -> strait_kafka::fetch::FetchedData {
    let at = strait_kafka::fetch::FetchPosition::new(tp.clone(), position);
    client
        .fetch(&[at], options)
        .await
        .remove(tp)
        .unwrap()
        .unwrap()
}

/// A remote partition's committed end, by (topic, partition).
type Ends = BTreeMap<(String, i32), i64>;

/// The producer ids of the last `n` batches of partition 0 of `topic` on `bootstrap` that hold
/// heartbeats of the flow `aliases` (source alias, target alias): the topic also holds other
/// tests' heartbeats.
async fn last_writers(
    bootstrap: &str,
    topic: &str,
    (source_alias, target_alias): (&str, &str),
    n: usize,
) -> BTreeSet<i64> {
    use strait_kafka::fetch::FetchOptions;

    let client = Client::connect(ClientConfig::new([bootstrap]))
        .await
        .unwrap();
    let tp = TopicPartition::new(topic, 0);
    let end = client
        .list_offset(&tp, OffsetSpec::Latest, IsolationLevel::ReadUncommitted)
        .await
        .unwrap()
        .offset;
    let options = FetchOptions {
        max_wait: Duration::from_millis(10),
        ..FetchOptions::default()
    };
    let ours = |key: &[u8], value: &[u8]| {
        Heartbeat::decode(key, value).is_ok_and(|h| {
            (h.source_alias.as_str(), h.target_alias.as_str()) == (source_alias, target_alias)
        })
    };
    let mut batches = Vec::new();
    let mut position = 0;
    while position < end {
        let data = fetch_at(&client, &tp, position, &options).await;
        let before = position;
        for batch in strait_wire::BatchScanner::new(data.records) {
            let batch = batch.unwrap();
            let header = &batch.header;
            if header.base_offset >= position {
                position = header.next_offset();
                if header.attributes.is_control() {
                    continue;
                }
                let records = strait_wire::records::batch_records(&batch).unwrap();
                if records.iter().any(|r| {
                    ours(
                        r.key.as_deref().unwrap_or_default(),
                        r.value.as_deref().unwrap_or_default(),
                    )
                }) {
                    batches.push(header.producer_id);
                }
            }
        }
        assert!(position > before, "no progress in {tp} at {position}");
    }
    batches.iter().rev().take(n).copied().collect()
}

/// Every 100 ms, the committed end of each remote partition of each stream, for the pause
/// measurement.
#[derive(Default)]
struct Samples {
    /// (when, remote topic, partition) -> last stable offset.
    ends: Vec<(Instant, Ends)>,
}

impl Samples {
    /// The longest time each partition's end stood still within `from..to`.
    fn longest_stalls(&self, from: Instant, to: Instant) -> BTreeMap<(String, i32), Duration> {
        let window: Vec<_> = self
            .ends
            .iter()
            .filter(|(at, _)| *at >= from && *at <= to)
            .collect();
        let mut out = BTreeMap::new();
        let Some((first_at, first)) = window.first() else {
            return out;
        };
        for key in first.keys() {
            let (mut since, mut last, mut longest) = (*first_at, first[key], Duration::ZERO);
            for (at, ends) in &window {
                let Some(&end) = ends.get(key) else { continue };
                if end != last {
                    longest = longest.max(at.duration_since(since));
                    (since, last) = (*at, end);
                }
            }
            if let Some((at, _)) = window.last() {
                longest = longest.max(at.duration_since(since));
            }
            out.insert(key.clone(), longest);
        }
        out
    }
}

/// Samples the committed ends of `streams`' copies until `running` turns false.
fn sample_ends(streams: Vec<(String, String)>, running: Arc<AtomicBool>) -> Samples {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let mut clients = Vec::new();
        for (bootstrap, remote) in &streams {
            let client = Client::connect(ClientConfig::new([bootstrap.as_str()]))
                .await
                .unwrap();
            let asked: Vec<(TopicPartition, OffsetSpec)> = (0..PARTITIONS)
                .map(|p| (TopicPartition::new(remote.as_str(), p), OffsetSpec::Latest))
                .collect();
            clients.push((client, asked));
        }
        let mut samples = Samples::default();
        while running.load(Ordering::SeqCst) {
            let at = Instant::now();
            let mut ends = BTreeMap::new();
            for (client, asked) in &clients {
                if let Ok(listed) = client
                    .list_offsets(asked, IsolationLevel::ReadCommitted)
                    .await
                {
                    for (tp, offset) in listed {
                        if let Ok(offset) = offset {
                            ends.insert((tp.topic.to_string(), tp.partition), offset.offset);
                        }
                    }
                }
            }
            samples.ends.push((at, ends));
            tokio::time::sleep_until((at + Duration::from_millis(100)).into()).await;
        }
        samples
    })
}

/// Polls the copies of `partitions` until one holds data of an open transaction (its high
/// watermark above its last stable offset, while a transaction `ongoing` picks is Ongoing at
/// its coordinator), for at most `within`; which one.
async fn open_transaction(
    partitions: &[(&Stream, Vec<i32>)],
    ongoing: &(dyn Fn(&str) -> bool + Sync),
    within: Duration,
) -> Option<TopicPartition> {
    let mut asked = Vec::new();
    for (s, ps) in partitions {
        let client = Client::connect(ClientConfig::new([s.to.as_str()]))
            .await
            .unwrap();
        let tps: Vec<(TopicPartition, OffsetSpec)> = ps
            .iter()
            .map(|p| {
                (
                    TopicPartition::new(s.remote.as_str(), *p),
                    OffsetSpec::Latest,
                )
            })
            .collect();
        asked.push((client, tps));
    }
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        for (client, tps) in &asked {
            let (Ok(high), Ok(stable)) = (
                client
                    .list_offsets(tps, IsolationLevel::ReadUncommitted)
                    .await,
                client
                    .list_offsets(tps, IsolationLevel::ReadCommitted)
                    .await,
            ) else {
                continue;
            };
            for (tp, h) in &high {
                let s = stable.get(tp);
                if let (Ok(h), Some(Ok(s))) = (h, s) {
                    // Data above the last stable offset is also there while a commit's markers
                    // are being written, which a kill no longer aborts: only a transaction the
                    // coordinator still calls Ongoing counts (when the listing answers).
                    if h.offset > s.offset && still_ongoing(client, ongoing).await {
                        return Some(tp.clone());
                    }
                }
            }
        }
    }
    None
}

/// Whether `client`'s cluster lists a transaction in the Ongoing state whose id `ongoing`
/// picks; true when the listing fails (the last-stable-offset test alone decides then).
async fn still_ongoing(client: &Client, ongoing: &(dyn Fn(&str) -> bool + Sync)) -> bool {
    strait_kafka::produce::ongoing_transactions(client, ongoing)
        .await
        .map_or(true, |ids| !ids.is_empty())
}

/// Waits until `worker`'s log holds `text` `times` times, for at most `secs` seconds.
fn logged_times(worker: &Strait, text: &str, times: usize, secs: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if worker.log_text().matches(text).count() >= times {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

/// Waits until `worker` runs units of both flows.
fn runs_units(worker: &Strait) {
    let text = "unit handed to this worker";
    assert!(logged_times(worker, text, 2, 60), "{}", worker.log_text());
}

/// `worker`'s place in `flow`'s workers' group, from its `/v1/status`.
fn place(worker: &Strait, flow: &str) -> serde_json::Value {
    flow_status(worker, flow)["worker"].clone()
}

/// `flow`'s entry in `worker`'s `/v1/status` (null if it has none).
fn flow_status(worker: &Strait, flow: &str) -> serde_json::Value {
    let (_, status) = worker.get_json("/v1/status").unwrap();
    status["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["flow"] == flow)
        .cloned()
        .unwrap_or_default()
}

/// The units of `flow` that `worker` owns, by index.
fn owned(worker: &Strait, flow: &str) -> BTreeSet<u32> {
    place(worker, flow)["owned"]
        .as_array()
        .map(|units| {
            units
                .iter()
                .filter_map(|u| u.as_str()?.rsplit('/').next()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The partitions of `stream`'s topic that `worker`'s `/v1/status` lists.
fn shown(worker: &Strait, stream: &Stream) -> Vec<i32> {
    flow_status(worker, &stream.flow)["topics"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["topic"] == stream.topic)
        .flat_map(|t| t["partitions"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p["partition"].as_i64())
        .map(|p| p as i32)
        .collect()
}

/// A small generator for the moments of the kills; its seed is printed.
struct Moments(u64);

impl Moments {
    fn next_millis(&mut self, from: u64, to: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        from + self.0 % (to - from)
    }
}

#[test]
fn workers_share_two_flows_and_every_record_lands_exactly_once() {
    let start = Instant::now();
    let clusters = Clusters::shared();
    let names = Names::new();
    let (a, b) = (names.alias("source"), names.alias("target"));
    let (ledger, orders) = (names.topic("ledger"), names.topic("orders"));
    let billing = names.group("billing");
    let (src, dst) = (
        clusters.source.bootstrap.clone(),
        clusters.target.bootstrap.clone(),
    );
    let rdk = Rdk::new();
    let streams = [
        Arc::new(Stream {
            flow: format!("{a}->{b}"),
            topic: ledger.clone(),
            remote: format!("{a}.{ledger}"),
            aliases: (a.clone(), b.clone()),
            from: src.clone(),
            to: dst.clone(),
            ledger: Mutex::default(),
            next_id: AtomicU64::new(0),
        }),
        Arc::new(Stream {
            flow: format!("{b}->{a}"),
            topic: orders.clone(),
            remote: format!("{b}.{orders}"),
            aliases: (b.clone(), a.clone()),
            from: dst.clone(),
            to: src.clone(),
            ledger: Mutex::default(),
            next_id: AtomicU64::new(0),
        }),
    ];
    for s in &streams {
        rdk.create_topic(&s.from, &s.topic, PARTITIONS);
        s.produce(&rdk, 2 * PER_CALL);
        // A consumer group on each source, for checkpoints and group sync to carry across.
        rdk.commit(&s.from, &billing, &s.topic, &[(0, 10), (1, 20)]);
    }

    // Not the heartbeats topics: on the shared clusters they hold other tests' heartbeats, and
    // the flows, one each way, would copy every test's copies of them back and forth.
    let text = flow_properties(
        (&a, &src),
        (&b, &dst),
        &format!(
            "{b}->{a}.enabled = true\n\
             {a}->{b}.topics = {ledger}\n\
             {b}->{a}.topics = {orders}\n\
             groups = {groups}\n\
             heartbeats.replication.enabled = false\n\
             exactly.once.source.support = enabled\n\
             tasks.max = {UNITS}\n\
             strait.workers.session.timeout.ms = 6000\n\
             emit.checkpoints.interval.seconds = 1\n\
             sync.group.offsets.enabled = true\n\
             sync.group.offsets.interval.seconds = 1",
            groups = names.pattern()
        ),
    );
    let config = write_properties(clusters.dir(), "workers.properties", &text);
    let log = |name: &str| clusters.dir().join(format!("{name}.log"));
    let w1 = Strait::run(&config, log("w1"));
    let w2 = Strait::run(&config, log("w2"));
    let w3 = Strait::run(&config, log("w3"));
    for w in [&w1, &w2, &w3] {
        runs_units(w);
    }
    note!(start, "three workers run units of both flows");

    // A steady producer per topic beside everything that follows.
    let producing = Arc::new(AtomicBool::new(true));
    let producers: Vec<_> = streams
        .iter()
        .map(|s| {
            let (producing, s) = (Arc::clone(&producing), Arc::clone(s));
            std::thread::spawn(move || {
                let rdk = Rdk::new();
                let mut calls = 0;
                while producing.load(Ordering::SeqCst) {
                    s.produce(&rdk, PER_CALL);
                    calls += 1;
                }
                calls
            })
        })
        .collect();
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let remotes = streams
            .iter()
            .map(|s| (s.to.clone(), s.remote.clone()))
            .collect();
        let sampling = Arc::clone(&sampling);
        std::thread::spawn(move || sample_ends(remotes, sampling))
    };

    std::thread::sleep(Duration::from_secs(6));
    let quiet = (Instant::now() - Duration::from_secs(4), Instant::now());
    // 1. kill -9: no LeaveGroup; its units move after its session timeout.
    let mut w1 = w1;
    w1.signal("KILL");
    let _ = w1.wait_exit(10);
    note!(start, "w1 killed with SIGKILL");
    std::thread::sleep(Duration::from_secs(2));

    // 2. SIGSTOP past the session timeout: the group gives its units to the others, whose
    //    initialisations fence it; continued, its writes are refused.
    w2.signal("STOP");
    note!(start, "w2 stopped with SIGSTOP");
    std::thread::sleep(Duration::from_secs(15));
    w2.signal("CONT");
    note!(start, "w2 continued with SIGCONT");
    std::thread::sleep(Duration::from_secs(4));

    // 3. A fourth worker joins: the units it is handed move, the others must not stop.
    let join_began = Instant::now();
    let w4 = Strait::run(&config, log("w4"));
    runs_units(&w4);
    note!(start, "w4 joined and runs units");
    std::thread::sleep(Duration::from_secs(4));
    let join = (join_began, Instant::now());
    let moved_in_join: Vec<(&str, BTreeSet<u32>)> = streams
        .iter()
        .map(|s| (s.flow.as_str(), owned(&w4, &s.flow)))
        .collect();

    // 4. One leaves gracefully: its units move at once.
    let moved_in_leave: Vec<(&str, BTreeSet<u32>)> = streams
        .iter()
        .map(|s| (s.flow.as_str(), owned(&w3, &s.flow)))
        .collect();
    let leave_began = Instant::now();
    w3.stop();
    note!(start, "w3 stopped with SIGTERM");
    std::thread::sleep(Duration::from_secs(5));
    let leave = (leave_began, Instant::now());

    // 5. Kills at random moments: a fifth worker is handed units and killed while it mirrors
    //    them, three times. Whatever it had written in its open transaction is aborted when the
    //    units' next owners initialise them.
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let mut moments = Moments(seed);
    note!(start, "kill moments seeded with {seed}");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for round in 1..=3 {
        let mut w5 = Strait::run(&config, log(&format!("w5-{round}")));
        runs_units(&w5);
        w5.metrics_until(60, "w5 writes", |m| {
            m.sum("strait_record_count_total", &[]) > 0.0
        });
        std::thread::sleep(Duration::from_millis(moments.next_millis(0, 1_000)));
        // Then the first moment one of its partitions holds data of an open transaction:
        // between its produce and its commit (before, beside or after the map's records).
        let theirs: Vec<(&Stream, Vec<i32>)> = streams
            .iter()
            .map(|s| {
                let units = owned(&w5, &s.flow);
                let partitions = (0..PARTITIONS)
                    .filter(|p| {
                        units.contains(&strait_core::scale::unit_index(&s.topic, *p, UNITS))
                    })
                    .collect();
                (s.as_ref(), partitions)
            })
            .collect();
        // The units' transactional ids end in `-<unit>`: w5's are those of the units it owns.
        let ids: Vec<String> = streams
            .iter()
            .flat_map(|s| {
                owned(&w5, &s.flow)
                    .into_iter()
                    .map(|u| format!("-{u}"))
                    .collect::<Vec<_>>()
            })
            .collect();
        let ongoing = |id: &str| id.starts_with("strait-") && ids.iter().any(|u| id.ends_with(u));
        let open = runtime.block_on(open_transaction(&theirs, &ongoing, Duration::from_secs(5)));
        w5.signal("KILL");
        let _ = w5.wait_exit(10);
        note!(
            start,
            "w5 ({round}) killed with SIGKILL {}",
            match open {
                Some(tp) => format!("while {tp} held data of an open transaction"),
                None => "(no open transaction seen within 5 s)".to_owned(),
            }
        );
    }
    std::thread::sleep(Duration::from_secs(3));

    producing.store(false, Ordering::SeqCst);
    let calls: Vec<u64> = producers.into_iter().map(|p| p.join().unwrap()).collect();
    note!(
        start,
        "producers stopped after {calls:?} calls: {:?} records",
        streams.iter().map(|s| s.produced()).collect::<Vec<_>>()
    );

    // Every source record exactly once, in order, for read_committed readers.
    let mut counts = Vec::new();
    for s in &streams {
        let (lost, duplicated) = s.lost_and_duplicated(&rdk);
        note!(start, "{}: lost {lost}, duplicated {duplicated}", s.remote);
        counts.push((lost, duplicated));
    }
    sampling.store(false, Ordering::SeqCst);
    let samples = sampler.join().unwrap();
    // What the consumer stopped at was enough: nothing more arrives.
    std::thread::sleep(Duration::from_secs(5));
    for s in &streams {
        let again = rdk.consume(
            &s.to,
            &s.remote,
            s.produced() as usize,
            Duration::from_secs(60),
        );
        assert_eq!(again.len() as u64, s.produced(), "{}", s.remote);
    }
    assert!(counts.iter().all(|c| *c == (0, 0)), "{counts:?}");

    // One writer at a time per partition: the committed batches of a partition come from its
    // unit's producer id, with epochs that never go back (a new owner's epoch is higher, and a
    // fenced owner's later batches were aborted).
    let mut aborted = 0;
    for s in &streams {
        let copy = runtime.block_on(written(&s.to, &s.remote, PARTITIONS));
        aborted += copy.aborted_batches;
        for (p, writers) in &copy.writers {
            let ids: BTreeSet<i64> = writers.iter().map(|(id, _)| *id).collect();
            assert_eq!(ids.len(), 1, "{} {p}: committed by {writers:?}", s.remote);
            assert!(
                writers.windows(2).all(|w| w[0].1 <= w[1].1),
                "{} {p}: epochs go back: {writers:?}",
                s.remote
            );
        }
        let map_topic = format!(
            "strait-offset-map.{}.internal",
            &s.flow[..s.flow.find('-').unwrap()]
        );
        let map = runtime.block_on(written(&s.to, &map_topic, 1));
        let epochs: usize = copy.writers.values().map(Vec::len).sum();
        note!(
            start,
            "{}: {epochs} (producer id, epoch) runs over {PARTITIONS} partitions; aborted: {} \
             data batches ({} records), {} map batches ({} records)",
            s.remote,
            copy.aborted_batches,
            copy.aborted_records,
            map.aborted_batches,
            map.aborted_records
        );
    }

    // The kills did land inside transactions: their data is on the targets, aborted, and
    // read_committed readers saw none of it (counted above).
    assert!(aborted > 0, "no kill landed inside a transaction");

    // How long partitions stood still, by whether their unit moved.
    let stalls = |(from, to): (Instant, Instant), moved: Option<&[(&str, BTreeSet<u32>)]>| {
        let mut stayed = Vec::new();
        let mut went = Vec::new();
        for ((remote, p), stall) in samples.longest_stalls(from, to) {
            let s = streams.iter().find(|s| s.remote == remote).unwrap();
            let unit = strait_core::scale::unit_index(&s.topic, p, UNITS);
            let moving = moved.is_some_and(|m| {
                m.iter()
                    .any(|(flow, units)| *flow == s.flow && units.contains(&unit))
            });
            if moving {
                went.push(stall.as_secs_f64());
            } else {
                stayed.push(stall.as_secs_f64());
            }
        }
        let summary = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            match v.len() {
                0 => "none".to_owned(),
                n => format!(
                    "{n} partitions, median {:.1} s, max {:.1} s",
                    v[n / 2],
                    v[n - 1]
                ),
            }
        };
        (summary(&mut stayed), summary(&mut went))
    };
    let (calm, _) = stalls(quiet, None);
    note!(start, "longest stall per partition, quiet: {calm}");
    let (stayed, went) = stalls(join, Some(&moved_in_join));
    note!(start, "longest stall per partition, w4 joining: units that stayed {stayed}; units that moved {went}");
    let (stayed, went) = stalls(leave, Some(&moved_in_leave));
    note!(start, "longest stall per partition, w3 leaving: units that stayed {stayed}; units that moved {went}");

    // Group sync, in the transactions of whichever worker led each flow, carried the group
    // across.
    for s in &streams {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let synced = rdk.committed(&s.to, &billing, &s.remote, &[0, 1]);
            if synced.len() == 2 {
                note!(
                    start,
                    "{}: group billing on the target at {synced:?}",
                    s.remote
                );
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{}: billing synced {synced:?}",
                s.remote
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    // The worker stopped past its session timeout was refused when it went on.
    let w2_log = w2.log_text();
    let fenced: Vec<&str> = w2_log
        .lines()
        .filter(|l| l.contains("unit fenced") || l.contains("gives up its units"))
        .collect();
    note!(start, "w2 after SIGCONT: {fenced:#?}");
    assert!(!fenced.is_empty(), "{w2_log}");

    // `/v1/status` of the two workers left: per flow one generation, one leader, and the six
    // units split between them.
    for s in &streams {
        let deadline = Instant::now() + Duration::from_secs(60);
        let places = loop {
            let places: Vec<serde_json::Value> =
                [&w2, &w4].iter().map(|w| place(w, &s.flow)).collect();
            let generations: BTreeSet<i64> = places
                .iter()
                .filter_map(|p| p["generation"].as_i64())
                .collect();
            let mut all: Vec<u32> = [&w2, &w4].iter().flat_map(|w| owned(w, &s.flow)).collect();
            all.sort_unstable();
            if generations.len() == 1
                && !generations.contains(&-1)
                && all == (0..UNITS).collect::<Vec<_>>()
            {
                break places;
            }
            assert!(Instant::now() < deadline, "workers' status: {places:#?}");
            std::thread::sleep(Duration::from_millis(500));
        };
        note!(
            start,
            "{}: status of the two workers left: {places:?}",
            s.flow
        );
        assert_eq!(
            places.iter().filter(|p| p["leader"] == true).count(),
            1,
            "{places:?}"
        );
        // Each partition is shown by the worker that runs it now, and by no other: a unit
        // that left a worker took its partitions off that worker's status and gauges.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let shown: Vec<Vec<i32>> = [&w2, &w4].iter().map(|w| shown(w, s)).collect();
            let mut all: Vec<i32> = shown.concat();
            all.sort_unstable();
            if all == (0..PARTITIONS).collect::<Vec<_>>() {
                note!(
                    start,
                    "{}: partitions shown per worker: {:?}",
                    s.flow,
                    shown.iter().map(Vec::len).collect::<Vec<_>>()
                );
                break;
            }
            assert!(Instant::now() < deadline, "{}: shown {shown:?}", s.flow);
            std::thread::sleep(Duration::from_millis(500));
        }
        // Flow-level series are per unit, so that summing them over the workers counts each
        // unit once.
        for (w, units) in [(&w2, owned(&w2, &s.flow)), (&w4, owned(&w4, &s.flow))] {
            let metrics = w.metrics();
            for unit in units {
                let labels = [
                    ("source", &s.flow[..s.flow.find('-').unwrap()]),
                    ("unit", &unit.to_string()),
                ];
                assert!(
                    metrics.get("strait_flow_stalled", &labels).is_some(),
                    "{}: no strait_flow_stalled of unit {unit}",
                    s.flow
                );
            }
        }
    }
    // Every worker answers `/v1/translate` for every partition of both flows, whatever units
    // it runs, and they agree: the end of each partition translates exactly.
    for s in &streams {
        let ends: BTreeMap<i32, i64> = s
            .ledger
            .lock()
            .unwrap()
            .iter()
            .map(|(p, offsets)| (*p, offsets.keys().last().map_or(0, |o| o + 1)))
            .collect();
        for p in [0, 1, PARTITIONS - 1] {
            let path = format!(
                "/v1/translate?flow={}&topic={}&partition={p}&offset={}",
                s.flow.replace('>', "%3E"),
                s.topic,
                ends[&p]
            );
            let deadline = Instant::now() + Duration::from_secs(30);
            let answers = loop {
                let got: Vec<_> = [&w2, &w4].iter().map(|w| w.get_json(&path)).collect();
                let answers: Vec<serde_json::Value> = got
                    .iter()
                    .filter_map(|a| match a {
                        Ok((200, body)) if body["exact"] == true => Some(body.clone()),
                        _ => None,
                    })
                    .collect();
                if answers.len() == 2 {
                    break answers;
                }
                assert!(Instant::now() < deadline, "{path}: {got:?}");
                std::thread::sleep(Duration::from_millis(300));
            };
            assert_eq!(
                answers[0]["target_offset"], answers[1]["target_offset"],
                "{path}: {answers:?}"
            );
        }
    }
    note!(
        start,
        "both workers translate every flow's partitions, and agree"
    );

    // MM2's heartbeats of each pair are written by the worker that leads its flow alone: the
    // last heartbeats of the flow on each target all come from one producer.
    std::thread::sleep(Duration::from_secs(5));
    for s in &streams {
        let aliases = (s.aliases.0.as_str(), s.aliases.1.as_str());
        let writers = runtime.block_on(last_writers(&s.to, "heartbeats", aliases, 6));
        note!(
            start,
            "{}: the last heartbeats' producers: {writers:?}",
            s.flow
        );
        assert_eq!(writers.len(), 1, "{}: heartbeats from {writers:?}", s.flow);
    }

    for w in [w2, w4] {
        w.stop();
    }
}

/// A one-shot copy does not join the workers: for an exactly-once flow, whose units commit in
/// transactions under their fencing, it refuses to start, naming the flow, before it writes
/// anything (no cluster is needed to be told so).
#[test]
fn a_one_shot_copy_refuses_an_exactly_once_flow() {
    let dir = std::env::temp_dir().join(format!("strait-workers-copy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = flow_properties(
        ("a", "127.0.0.1:1"),
        ("b", "127.0.0.1:1"),
        "exactly.once.source.support = enabled",
    );
    let config = write_properties(&dir, "workers.properties", &text);
    for args in [
        run_until_caught_up(config.to_str().unwrap()).to_vec(),
        vec![
            "mirror",
            "--config",
            config.to_str().unwrap(),
            "--listen",
            "off",
        ],
    ] {
        let done = run_to_end(&dir, &args, &[]);
        assert!(!done.ok(), "{}", done.both());
        assert!(
            done.stderr
                .contains("a->b exactly-once (exactly.once.source.support = enabled)"),
            "{}",
            done.both()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Ids `first..first + n` as records to `partitions` partitions (id `i` to `i % partitions`).
fn records(first: u64, n: u64, partitions: i32) -> Vec<TestRecord> {
    (first..first + n)
        .map(|id| {
            let value = format!("id={id:08};{}", "y".repeat(40));
            TestRecord::new(
                (id % partitions as u64) as i32,
                Some(format!("k{id}").as_bytes()),
                Some(value.as_bytes()),
            )
        })
        .collect()
}

/// The sum of `topic`'s read_committed end offsets on `bootstrap` (-1 while it cannot be read).
fn committed_end(bootstrap: &str, topic: &str, partitions: i32) -> i64 {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let Ok(client) = Client::connect(ClientConfig::new([bootstrap])).await else {
            return -1;
        };
        let mut sum = 0;
        for p in 0..partitions {
            let tp = TopicPartition::new(topic, p);
            match client
                .list_offset(&tp, OffsetSpec::Latest, IsolationLevel::ReadCommitted)
                .await
            {
                Ok(o) => sum += o.offset,
                Err(_) => return -1,
            }
        }
        sum
    })
}

/// Waits until `topic` holds at least `want` records (read_committed end offsets), then until
/// its end stands still for five seconds, so that a late second writer would show; the end.
fn caught_up(bootstrap: &str, topic: &str, partitions: i32, want: i64, secs: u64) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut last = (-1, Instant::now());
    loop {
        let end = committed_end(bootstrap, topic, partitions);
        if end != last.0 {
            last = (end, Instant::now());
        } else if end >= want && last.1.elapsed() >= Duration::from_secs(5) {
            return end;
        }
        assert!(
            Instant::now() < deadline,
            "{topic} holds {end} records of {want} after {secs} s"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Reads `topic` read_committed with librdkafka: (lost, duplicated) among ids `0..produced`.
fn lost_and_duplicated(
    rdk: &Rdk,
    bootstrap: &str,
    topic: &str,
    end: i64,
    produced: u64,
) -> (usize, usize) {
    let copies = rdk.consume(bootstrap, topic, end as usize, Duration::from_secs(120));
    let mut seen = HashSet::new();
    let duplicated = copies.iter().filter(|c| !seen.insert(id_of(c))).count();
    let lost = (0..produced).filter(|id| !seen.contains(id)).count();
    (lost, duplicated)
}

/// Issue 33, tried as an operator who swaps MM2's binary for strait's would: three `strait run`
/// processes on one unchanged MM2 file (`tasks.max = 4`, no key of strait's own), a steady
/// producer of 60,000 records into 8 partitions, one process killed with SIGKILL at a quarter,
/// another stopped with SIGSTOP for 20 s (twice its 10 s session timeout) at half. Every record
/// reaches the target once, read by a read_committed librdkafka consumer; and a one-shot copy
/// of the same file refuses to run while the processes mirror the flow. Before workers were the
/// default, each process mirrored every partition: 75,000 duplicates of 60,000.
#[test]
fn three_processes_on_one_unchanged_mm2_file_write_every_record_once() {
    const PARTITIONS: i32 = 8;
    const PRODUCED: u64 = 60_000;
    const PER_CALL: u64 = 1_000;
    let start = Instant::now();
    let clusters = Clusters::shared();
    let names = Names::new();
    let (a, b) = (names.alias("source"), names.alias("target"));
    let topic = names.topic("events");
    let remote = format!("{a}.{topic}");
    let (src, dst) = (
        clusters.source.bootstrap.clone(),
        clusters.target.bootstrap.clone(),
    );
    let rdk = Rdk::new();
    rdk.create_topic(&src, &topic, PARTITIONS);
    // MM2 keys only; the topic and group filters keep the test to its own names on the shared
    // clusters, and the heartbeats topic (not named after the test) is not mirrored.
    let text = flow_properties(
        (&a, &src),
        (&b, &dst),
        &format!(
            "topics = {topic}\n\
             groups = {groups}\n\
             heartbeats.replication.enabled = false\n\
             tasks.max = 4",
            groups = names.pattern()
        ),
    );
    assert!(!text.contains("strait."), "{text}");
    let config = write_properties(clusters.dir(), "mm2.properties", &text);
    let log = |name: &str| clusters.dir().join(format!("{name}.log"));
    let w1 = Strait::run(&config, log("p1"));
    let w2 = Strait::run(&config, log("p2"));
    let w3 = Strait::run(&config, log("p3"));
    for w in [&w1, &w2, &w3] {
        assert!(logged_times(w, "rebalance done", 1, 60), "{}", w.log_text());
    }
    note!(start, "three processes joined the flow's group");

    let calls = PRODUCED / PER_CALL;
    let mut w2 = Some(w2);
    let mut resume = None;
    for call in 0..calls {
        let acks = rdk.produce(
            &src,
            &topic,
            &records(call * PER_CALL, PER_CALL, PARTITIONS),
            "lz4",
        );
        assert_eq!(acks.len() as u64, PER_CALL);
        if call == calls / 4 {
            w1.signal("KILL");
            note!(
                start,
                "p1 killed with SIGKILL after {} records",
                (call + 1) * PER_CALL
            );
        }
        if call == calls / 2 {
            let stopped = w2.take().unwrap();
            stopped.signal("STOP");
            note!(
                start,
                "p2 stopped with SIGSTOP after {} records",
                (call + 1) * PER_CALL
            );
            resume = Some(std::thread::spawn(move || {
                std::thread::sleep(Duration::from_secs(20));
                stopped.signal("CONT");
                stopped
            }));
        }
        std::thread::sleep(Duration::from_millis(400));
    }
    note!(start, "{PRODUCED} records produced");
    let w2 = resume.unwrap().join().unwrap();
    note!(start, "p2 continued with SIGCONT");

    // A one-shot copy would be a writer beside them: refused, saying why.
    let copy = run_to_end(
        clusters.dir(),
        &run_until_caught_up(config.to_str().unwrap()),
        &[],
    );
    assert!(!copy.ok(), "{}", copy.both());
    assert!(
        copy.stderr.contains("is being mirrored by"),
        "{}",
        copy.both()
    );

    let end = caught_up(&dst, &remote, PARTITIONS, PRODUCED as i64, 180);
    note!(start, "the target holds {end} records");
    let stopped_log = w2.log_text();
    w2.stop();
    w3.stop();
    let (lost, duplicated) = lost_and_duplicated(&rdk, &dst, &remote, end, PRODUCED);
    note!(
        start,
        "{PRODUCED} produced: {lost} lost, {duplicated} duplicated"
    );
    assert_eq!((lost, duplicated), (0, 0));
    assert_eq!(end, PRODUCED as i64, "records on the target");
    // The stopped process learnt it had lost its place and gave its units up.
    assert!(
        stopped_log.contains("this worker gives up its units"),
        "{stopped_log}"
    );
}

/// Issue 33, a `tasks.max` change rolling through the workers: one process with `tasks.max = 4`
/// and one with 6 on one flow. While they disagree, the group hands out no unit (and says why
/// in `/v1/status`); once the second runs the first's settings, every record reaches the target
/// once and the offset map loads (`strait map`). Before, each filtered partitions with its own
/// count under the leader's unit names: two writers of the same partitions.
#[test]
fn workers_with_different_tasks_max_agree_before_anything_runs() {
    const PARTITIONS: i32 = 8;
    const PRODUCED: u64 = 16_000;
    let start = Instant::now();
    let clusters = Clusters::shared();
    let names = Names::new();
    let (a, b) = (names.alias("source"), names.alias("target"));
    let topic = names.topic("rolling");
    let remote = format!("{a}.{topic}");
    let (src, dst) = (
        clusters.source.bootstrap.clone(),
        clusters.target.bootstrap.clone(),
    );
    let rdk = Rdk::new();
    rdk.create_topic(&src, &topic, PARTITIONS);
    let file = |tasks: u32| {
        let text = flow_properties(
            (&a, &src),
            (&b, &dst),
            &format!(
                "topics = {topic}\n\
                 groups = {groups}\n\
                 heartbeats.replication.enabled = false\n\
                 tasks.max = {tasks}",
                groups = names.pattern()
            ),
        );
        write_properties(clusters.dir(), &format!("tasks-{tasks}.properties"), &text)
    };
    let (four, six) = (file(4), file(6));
    let log = |name: &str| clusters.dir().join(format!("{name}.log"));
    let p4 = Strait::run(&four, log("p4"));
    assert!(
        logged_times(&p4, "unit handed to this worker", 4, 60),
        "{}",
        p4.log_text()
    );
    let p6 = Strait::run(&six, log("p6"));
    let flow = format!("{a}->{b}");
    // They disagree: nothing is handed out, and both say why.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        // (`/v1/status` of a process still starting does not answer yet.)
        let status = |w: &Strait| w.get_json("/v1/status").map(|(_, s)| s).unwrap_or_default();
        let worker = |w: &Strait| {
            status(w)["flows"]
                .as_array()
                .and_then(|flows| flows.iter().find(|f| f["flow"] == flow.as_str()).cloned())
                .unwrap_or_default()["worker"]
                .clone()
        };
        let places: Vec<serde_json::Value> = [&p4, &p6].iter().map(|w| worker(w)).collect();
        let refused: Vec<serde_json::Value> = places.iter().map(|p| p["refused"].clone()).collect();
        let owned: usize = places
            .iter()
            .map(|p| p["owned"].as_array().map_or(0, Vec::len))
            .sum();
        if refused
            .iter()
            .all(|r| r.as_str().is_some_and(|r| r.contains("tasks.max = ")))
            && owned == 0
        {
            note!(
                start,
                "the workers disagree and run nothing: {}",
                refused[0]
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no refusal: {refused:?}, {owned} units owned"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    // p4's units stop after their round in flight.
    assert!(
        logged_times(&p4, "unit handed away: stopped here", 4, 60),
        "{}",
        p4.log_text()
    );
    let metrics = p4.metrics();
    assert_eq!(
        metrics.get(
            "strait_workers_disagree",
            &[("source", a.as_str()), ("target", b.as_str())]
        ),
        Some(1.0)
    );
    for call in 0..PRODUCED / 2_000 {
        rdk.produce(
            &src,
            &topic,
            &records(call * 2_000, 2_000, PARTITIONS),
            "lz4",
        );
    }
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        committed_end(&dst, &remote, PARTITIONS).max(0),
        0,
        "mirrored while they disagree"
    );

    // The rolling change reaches the second process: it restarts with tasks.max = 4.
    p6.stop();
    let p6 = Strait::run(&four, log("p6-again"));
    let end = caught_up(&dst, &remote, PARTITIONS, PRODUCED as i64, 120);
    note!(start, "agreed: the target holds {end} records");
    p4.stop();
    p6.stop();
    let (lost, duplicated) = lost_and_duplicated(&rdk, &dst, &remote, end, PRODUCED);
    assert_eq!((lost, duplicated), (0, 0));
    assert_eq!(end, PRODUCED as i64);
    // The offset map loads: no two writers left overlapping segments.
    let map = run_to_end(
        clusters.dir(),
        &["map", "--config", four.to_str().unwrap()],
        &[],
    );
    assert!(map.ok(), "{}", map.both());
}

/// Issue 47: a one-shot copy (`strait run --until-caught-up`) of a flow run by workers, with a
/// `strait run` worker started mid-copy. The copy joins the workers' group owning every unit,
/// so the worker is handed nothing until the copy has stopped between rounds, written its map
/// and left; the worker then carries on from that map. Rounds are kept small (one small batch
/// per partition per fetch), so the copy takes hundreds of them. Every record lands on the
/// target once (a librdkafka read_committed consumer), and the map loads. Before, the copy
/// looked at the group once, at start, and both wrote the same partitions: duplicates.
#[test]
fn a_worker_started_mid_copy_takes_over_and_nothing_lands_twice() {
    const PARTITIONS: i32 = 8;
    const PRODUCED: u64 = 160_000;
    const PER_CALL: u64 = 40_000;
    let start = Instant::now();
    let clusters = Clusters::shared();
    let names = Names::new();
    let (a, b) = (names.alias("source"), names.alias("target"));
    let topic = names.topic("copied");
    let remote = format!("{a}.{topic}");
    let (src, dst) = (
        clusters.source.bootstrap.clone(),
        clusters.target.bootstrap.clone(),
    );
    let rdk = Rdk::new();
    rdk.create_topic(&src, &topic, PARTITIONS);
    // Batches of 20 records, each fetched on its own: a round moves 160 records.
    let small_batches = Rdk::new().with_client_config(&[("batch.num.messages", "20")]);
    for call in 0..PRODUCED / PER_CALL {
        let acks = small_batches.produce(
            &src,
            &topic,
            &records(call * PER_CALL, PER_CALL, PARTITIONS),
            "none",
        );
        assert_eq!(acks.len() as u64, PER_CALL);
    }
    note!(start, "{PRODUCED} records produced");
    let text = flow_properties(
        (&a, &src),
        (&b, &dst),
        &format!(
            "topics = {topic}\n\
             groups = {groups}\n\
             heartbeats.replication.enabled = false\n\
             tasks.max = 4\n\
             {a}.consumer.max.partition.fetch.bytes = 1024\n\
             {a}.consumer.fetch.max.bytes = 8192",
            groups = names.pattern()
        ),
    );
    let config = write_properties(clusters.dir(), "copy.properties", &text);
    let copy_err = clusters.dir().join("copy.err");
    let mut copy = std::process::Command::new(env!("CARGO_BIN_EXE_strait"))
        .args(run_until_caught_up(config.to_str().unwrap()))
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&copy_err).unwrap())
        .spawn()
        .expect("spawn strait");
    // Mid-copy: some records on the target, the copy still running.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let end = committed_end(&dst, &remote, PARTITIONS);
        if end >= (PRODUCED / 20) as i64 {
            note!(start, "the copy wrote {end} records: a worker starts");
            break;
        }
        assert!(
            copy.try_wait().unwrap().is_none(),
            "the copy ended before a worker could start: {}",
            std::fs::read_to_string(&copy_err).unwrap_or_default()
        );
        assert!(Instant::now() < deadline, "the copy wrote {end} records");
        std::thread::sleep(Duration::from_millis(50));
    }
    let worker = Strait::run(&config, clusters.dir().join("worker.log"));
    let deadline = Instant::now() + Duration::from_secs(180);
    let status = loop {
        if let Some(status) = copy.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the copy did not end");
        std::thread::sleep(Duration::from_millis(100));
    };
    let copied = std::fs::read_to_string(&copy_err).unwrap_or_default();
    note!(
        start,
        "the copy ended ({status}) with {} records on the target",
        committed_end(&dst, &remote, PARTITIONS)
    );
    // Caught up before the worker's units started, or gave way to them, saying so.
    assert!(
        status.success() || copied.contains("joined the workers' group"),
        "{copied}"
    );
    let end = caught_up(&dst, &remote, PARTITIONS, PRODUCED as i64, 180);
    worker.stop();
    let (lost, duplicated) = lost_and_duplicated(&rdk, &dst, &remote, end, PRODUCED);
    note!(
        start,
        "{PRODUCED} produced: {lost} lost, {duplicated} duplicated"
    );
    assert_eq!((lost, duplicated), (0, 0));
    assert_eq!(end, PRODUCED as i64, "records on the target");
    let map = run_to_end(
        clusters.dir(),
        &["map", "--config", config.to_str().unwrap()],
        &[],
    );
    assert!(map.ok(), "{}", map.both());
}
