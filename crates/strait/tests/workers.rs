//! `strait run` processes sharing one flow as workers (`strait.workers.enabled`), started as a
//! user would, under a steady producer: three workers split the flow's units; one is killed
//! with SIGKILL; another is stopped with SIGSTOP past its session timeout, so the group gives
//! its units away and their new owners fence it, then continued with SIGCONT; a fourth joins;
//! one leaves with SIGTERM. At the end a read_committed librdkafka consumer reads every source
//! record exactly once, in source order, and the stopped worker's log shows the refusal its
//! writes got after it was continued.

mod running;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use running::{write_flow_config, Strait};
use strait_testkit::{Clusters, Rdk, TestRecord};

const TOPIC: &str = "ledger";
const REMOTE: &str = "source.ledger";
const PARTITIONS: i32 = 16;
/// Records per produce call of the steady producer.
const PER_CALL: u64 = 1_600;

/// `eprintln!` with the time since `$start`, for the note on this test.
macro_rules! note {
    ($start:expr, $($arg:tt)*) => {
        eprintln!("workers [{:>5.1}s] {}", $start.elapsed().as_secs_f64(), format!($($arg)*))
    };
}

/// Records with ids `first..first + n`, id `i` to partition `i % PARTITIONS`.
fn records(first: u64, n: u64) -> Vec<TestRecord> {
    (first..first + n)
        .map(|id| {
            let value = format!("id={id:08};{}", "x".repeat(60));
            TestRecord::new(
                (id % PARTITIONS as u64) as i32,
                Some(format!("k{id}").as_bytes()),
                Some(value.as_bytes()),
            )
        })
        .collect()
}

fn id_of(record: &TestRecord) -> u64 {
    let value = record.value.as_deref().expect("a value");
    std::str::from_utf8(&value[3..11]).unwrap().parse().unwrap()
}

/// Ids by partition in offset order, as the source holds them.
type Ledger = Arc<Mutex<BTreeMap<i32, BTreeMap<i64, u64>>>>;

fn produce(rdk: &Rdk, bootstrap: &str, first: u64, n: u64, ledger: &Ledger) {
    let batch = records(first, n);
    let acks = rdk.produce(bootstrap, TOPIC, &batch, "lz4");
    assert_eq!(acks.len(), batch.len());
    let mut ledger = ledger.lock().unwrap();
    for (record, (partition, offset)) in batch.iter().zip(acks) {
        ledger
            .entry(partition)
            .or_default()
            .insert(offset, id_of(record));
    }
}

/// Per remote partition, the (producer id, epoch) of its committed data batches, each run of
/// equal ones once, in offset order.
async fn committed_writers(bootstrap: &str) -> BTreeMap<i32, Vec<(i64, i16)>> {
    use strait_kafka::admin::{IsolationLevel, OffsetSpec};
    use strait_kafka::fetch::{AbortedBatches, FetchOptions, FetchPosition};
    use strait_kafka::{Client, ClientConfig, TopicPartition};

    let client = Client::connect(ClientConfig::new([bootstrap]))
        .await
        .unwrap();
    let options = FetchOptions {
        max_wait: Duration::from_millis(10),
        isolation: IsolationLevel::ReadCommitted,
        ..FetchOptions::default()
    };
    let mut out = BTreeMap::new();
    for p in 0..PARTITIONS {
        let tp = TopicPartition::new(REMOTE, p);
        let end = client
            .list_offset(&tp, OffsetSpec::Latest, IsolationLevel::ReadCommitted)
            .await
            .unwrap()
            .offset;
        let mut writers: Vec<(i64, i16)> = Vec::new();
        let mut position = 0;
        while position < end {
            let data = client
                .fetch(&[FetchPosition::new(tp.clone(), position)], &options)
                .await
                .remove(&tp)
                .unwrap()
                .unwrap();
            let mut aborted = AbortedBatches::new(&data.aborted);
            let before = position;
            for batch in strait_wire::BatchScanner::new(data.records) {
                let batch = batch.unwrap();
                let header = &batch.header;
                let skip = aborted.is_aborted(&batch) || header.attributes.is_control();
                if header.base_offset >= position {
                    position = header.next_offset();
                    let writer = (header.producer_id, header.producer_epoch);
                    if !skip && writers.last() != Some(&writer) {
                        writers.push(writer);
                    }
                }
            }
            assert!(position > before, "no progress in {tp} at {position}");
        }
        out.insert(p, writers);
    }
    out
}

fn signal(worker: &Strait, name: &str) {
    worker.signal(name);
}

/// Waits until `worker`'s log holds `text`, for at most `secs` seconds.
fn logged(worker: &Strait, text: &str, secs: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if worker.log_text().contains(text) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

#[test]
fn workers_share_a_flow_and_every_record_lands_exactly_once() {
    let start = Instant::now();
    let clusters = Clusters::start();
    let (src, dst) = (
        clusters.source.bootstrap.clone(),
        clusters.target.bootstrap.clone(),
    );
    let rdk = Rdk::new();
    rdk.create_topic(&src, TOPIC, PARTITIONS);
    let ledger: Ledger = Arc::default();
    let next_id = Arc::new(AtomicU64::new(0));
    produce(&rdk, &src, 0, 4 * PER_CALL, &ledger);
    next_id.store(4 * PER_CALL, Ordering::SeqCst);

    let config = write_flow_config(
        &clusters,
        ("source", "target"),
        "workers.properties",
        "strait.workers.enabled = true\n\
         tasks.max = 6\n\
         strait.workers.session.timeout.ms = 6000\n\
         emit.checkpoints.enabled = false\n\
         sync.group.offsets.enabled = false",
    );
    let log = |name: &str| clusters.dir().join(format!("{name}.log"));
    let w1 = Strait::run(&config, log("w1"));
    let w2 = Strait::run(&config, log("w2"));
    let w3 = Strait::run(&config, log("w3"));
    for w in [&w1, &w2, &w3] {
        assert!(
            logged(w, "unit handed to this worker", 60),
            "{}",
            w.log_text()
        );
    }
    note!(start, "three workers run units");

    // A steady producer beside everything that follows.
    let producing = Arc::new(AtomicBool::new(true));
    let producer = {
        let (producing, ledger, next_id, src) = (
            Arc::clone(&producing),
            Arc::clone(&ledger),
            Arc::clone(&next_id),
            src.clone(),
        );
        std::thread::spawn(move || {
            let rdk = Rdk::new();
            let mut calls = 0;
            while producing.load(Ordering::SeqCst) {
                let first = next_id.fetch_add(PER_CALL, Ordering::SeqCst);
                produce(&rdk, &src, first, PER_CALL, &ledger);
                calls += 1;
            }
            calls
        })
    };

    std::thread::sleep(Duration::from_secs(3));
    // 1. kill -9: no LeaveGroup; its units move after its session timeout.
    let mut w1 = w1;
    signal(&w1, "KILL");
    let _ = w1.wait_exit(10);
    note!(start, "w1 killed with SIGKILL");
    std::thread::sleep(Duration::from_secs(2));

    // 2. SIGSTOP past the session timeout: the group gives its units to the others, whose
    //    initialisations fence it; continued, its writes are refused.
    signal(&w2, "STOP");
    note!(start, "w2 stopped with SIGSTOP");
    std::thread::sleep(Duration::from_secs(15));
    signal(&w2, "CONT");
    note!(start, "w2 continued with SIGCONT");

    // 3. A fourth worker joins.
    let w4 = Strait::run(&config, log("w4"));
    assert!(
        logged(&w4, "unit handed to this worker", 60),
        "{}",
        w4.log_text()
    );
    note!(start, "w4 joined and runs units");
    std::thread::sleep(Duration::from_secs(3));

    // 4. One leaves gracefully: its units move at once.
    w3.stop();
    note!(start, "w3 stopped with SIGTERM");
    std::thread::sleep(Duration::from_secs(3));
    producing.store(false, Ordering::SeqCst);
    let calls = producer.join().unwrap();
    let produced = next_id.load(Ordering::SeqCst);
    note!(
        start,
        "producer stopped after {calls} calls: {produced} records"
    );

    // Every source record exactly once, in order, for read_committed readers.
    let copies = rdk.consume(&dst, REMOTE, produced as usize, Duration::from_secs(180));
    note!(start, "target read: {} records", copies.len());
    let mut by_partition: BTreeMap<i32, Vec<u64>> = BTreeMap::new();
    for c in &copies {
        by_partition.entry(c.partition).or_default().push(id_of(c));
    }
    let ledger = ledger.lock().unwrap();
    let (mut lost, mut duplicated) = (0usize, 0usize);
    for p in 0..PARTITIONS {
        let expected: Vec<u64> = ledger[&p].values().copied().collect();
        let got = by_partition.remove(&p).unwrap_or_default();
        let mut seen = std::collections::HashSet::new();
        duplicated += got.iter().filter(|id| !seen.insert(**id)).count();
        lost += expected.iter().filter(|id| !seen.contains(*id)).count();
        if lost == 0 && duplicated == 0 {
            assert_eq!(got, expected, "partition {p} out of source order");
        }
    }
    // What the consumer stopped at was enough: nothing more arrives.
    std::thread::sleep(Duration::from_secs(5));
    let again = rdk.consume(&dst, REMOTE, produced as usize, Duration::from_secs(60));
    note!(
        start,
        "lost {lost}, duplicated {duplicated}; read again: {}",
        again.len()
    );
    assert_eq!((lost, duplicated), (0, 0));
    assert_eq!(again.len(), produced as usize);

    // One writer at a time per partition: the committed batches of a partition come from its
    // unit's producer id, with epochs that never go back (a new owner's epoch is higher, and a
    // fenced owner's later batches were aborted).
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let owners = runtime.block_on(committed_writers(&dst));
    for (p, writers) in &owners {
        let ids: std::collections::BTreeSet<i64> = writers.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids.len(), 1, "partition {p}: committed by {writers:?}");
        assert!(
            writers.windows(2).all(|w| w[0].1 <= w[1].1),
            "partition {p}: epochs go back: {writers:?}"
        );
    }
    let epochs: usize = owners.values().map(|w| w.len()).sum();
    note!(
        start,
        "committed writers (producer id, epoch) per partition: {epochs} in all, {owners:?}"
    );

    // The worker stopped past its session timeout was refused when it went on.
    let w2_log = w2.log_text();
    let fenced: Vec<&str> = w2_log
        .lines()
        .filter(|l| l.contains("unit fenced") || l.contains("gives up its units"))
        .collect();
    note!(start, "w2 after SIGCONT: {fenced:#?}");
    assert!(!fenced.is_empty(), "{w2_log}");
    // `/v1/status` of the two workers left: one generation, the six units split between them.
    let deadline = Instant::now() + Duration::from_secs(60);
    let places = loop {
        let places: Vec<serde_json::Value> = [&w2, &w4]
            .iter()
            .map(|w| w.get_json("/v1/status").unwrap().1["flows"][0]["worker"].clone())
            .collect();
        let generations: std::collections::BTreeSet<i64> = places
            .iter()
            .map(|p| p["generation"].as_i64().unwrap())
            .collect();
        let mut owned: Vec<String> = places
            .iter()
            .flat_map(|p| p["owned"].as_array().unwrap().clone())
            .map(|u| u.as_str().unwrap().to_owned())
            .collect();
        owned.sort();
        let all: Vec<String> = (0..6).map(|i| format!("source->target/{i}")).collect();
        if generations.len() == 1 && !generations.contains(&-1) && owned == all {
            break places;
        }
        assert!(Instant::now() < deadline, "workers' status: {places:#?}");
        std::thread::sleep(Duration::from_millis(500));
    };
    note!(start, "status of the two workers left: {places:?}");
    assert_eq!(
        places.iter().filter(|p| p["leader"] == true).count(),
        1,
        "{places:?}"
    );
    for w in [w2, w4] {
        w.stop();
    }
}
