//! A compacted source topic with offset holes, on Apache Kafka: its log cleaner compacts a topic
//! made with [`QUICK_COMPACTION`] within seconds, so the source holds keyed records with holes
//! where older values of a key were removed (all but the active segment). Every surviving record
//! arrives identical and in order, and the map is exact for every surviving offset and for every
//! hole (a hole translates to the next surviving record's target offset).

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use strait_testkit::{Clusters, Names, Rdk, TestRecord, QUICK_COMPACTION};
use strait_wire::offset_map::{SourcePartition, Translation};

const PARTITIONS: i32 = 2;
const RECORDS: usize = 600;
const KEYS: usize = 40;

fn records() -> Vec<TestRecord> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64;
    (0..RECORDS)
        .map(|i| {
            // Every tenth record has a key of its own and survives compaction; the others
            // share KEYS keys, so only the newest of each survives: holes all along the log.
            let key = if i % 10 == 0 {
                format!("once-{i}")
            } else {
                format!("account-{}", i % KEYS)
            };
            let mut r = TestRecord::new(
                (i % 4) as i32 % PARTITIONS,
                Some(key.as_bytes()),
                Some(format!("balance-{i}").as_bytes()),
            )
            // Current timestamps: compaction lag (and retention) go by record timestamps.
            .with_timestamp(now + i as i64);
            if i % 3 == 0 {
                r = r.with_header("rev", Some(i.to_string().as_bytes()));
            }
            r
        })
        .collect()
}

/// Reads the whole of `topic` until the broker has compacted it and compaction has settled:
/// fewer records than written, and the same records again 2.5 s later (several cleaner passes).
fn wait_for_compaction(rdk: &Rdk, bootstrap: &str, names: &Names, topic: &str) -> Vec<TestRecord> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut previous: Option<Vec<TestRecord>> = None;
    for attempt in 0.. {
        let everything = consume_all(rdk, bootstrap, names, topic, attempt);
        if everything.len() < RECORDS && previous.as_ref() == Some(&everything) {
            return everything;
        }
        previous = Some(everything);
        assert!(
            Instant::now() < deadline,
            "the broker did not compact {topic} and settle within 60 s"
        );
        std::thread::sleep(Duration::from_millis(2_500));
    }
    unreachable!()
}

/// Every record of `topic`, read to the end of each partition by a group of its own (so it
/// starts at the beginning), sorted by partition and offset.
fn consume_all(
    rdk: &Rdk,
    bootstrap: &str,
    names: &Names,
    topic: &str,
    attempt: u32,
) -> Vec<TestRecord> {
    let group = names.group(&format!("compacted-reader-{attempt}"));
    let mut out = rdk.group_consume(bootstrap, &group, topic, None, Duration::from_secs(30));
    out.sort_by_key(|r| (r.partition, r.offset));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compacted_topic_with_holes_is_mirrored_and_mapped_exactly() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let (a, b) = (names.alias("source"), names.alias("target"));
    let topic = names.topic("accounts");
    let rdk = Rdk::new();
    let (source, target) = (
        clusters.source.bootstrap.clone(),
        clusters.target.bootstrap.clone(),
    );
    rdk.create_topic_with_configs(&source, &topic, PARTITIONS, QUICK_COMPACTION);
    rdk.produce(&source, &topic, &records()[..RECORDS / 2], "none");
    rdk.produce(&source, &topic, &records()[RECORDS / 2..], "lz4");
    let surviving = wait_for_compaction(&rdk, &source, &names, &topic);
    let holes = RECORDS - surviving.len();
    eprintln!(
        "source after compaction: {} records, {holes} holes",
        surviving.len()
    );

    // Only this test's topics and groups; heartbeats topics (mirrored whatever `topics` says) are
    // other tests'.
    let mut flow = common::start_flow_between(
        (&a, &b),
        &source,
        &target,
        &format!(
            "topics = {pattern}\n\
             groups = {pattern}\n\
             heartbeats.replication.enabled = false",
            pattern = names.pattern()
        ),
    )
    .await;
    tokio::time::timeout(Duration::from_secs(60), flow.run_until_caught_up())
        .await
        .expect("mirrors within 60 s")
        .expect("flow mirrors");
    let stats = flow.stats();
    eprintln!("{stats:?}");

    let remote = format!("{a}.{topic}");
    let mirrored = rdk.consume(&target, &remote, surviving.len(), Duration::from_secs(30));
    assert_eq!(
        mirrored.len(),
        surviving.len(),
        "every surviving record arrives"
    );
    let mut by_partition: BTreeMap<i32, Vec<(&TestRecord, &TestRecord)>> = BTreeMap::new();
    for (s, t) in surviving.iter().zip(&mirrored) {
        assert_eq!(s.partition, t.partition);
        assert!(
            s.same_payload(t),
            "record differs at source {:?}: {s:?} vs {t:?}",
            s.offset
        );
        by_partition.entry(s.partition).or_default().push((s, t));
    }

    let map = flow.map();
    let mut exact_holes = 0;
    for (partition, pairs) in &by_partition {
        let sp = SourcePartition::new(&topic, *partition);
        // Holes before the first surviving record: Kafka keeps the log start where it was
        // (compaction does not move it), so they are a gap before the first segment: a consumer
        // there continues at the first mirrored record.
        let first = pairs[0].0.offset.expect("read offset");
        let first_target = pairs[0].1.offset.expect("read offset");
        for hole in 0..first {
            assert_eq!(
                map.translate(&sp, hole).target(),
                Some(first_target),
                "hole {hole} of partition {partition}"
            );
        }
        let mut previous_end = first;
        for (s, t) in pairs {
            let (src, dst) = (
                s.offset.expect("read offset"),
                t.offset.expect("read offset"),
            );
            assert_eq!(
                map.translate(&sp, src),
                Translation::Exact { target: dst },
                "surviving offset {src} of partition {partition}"
            );
            // Every hole before it continues at this record.
            for hole in previous_end..src {
                assert_eq!(
                    map.translate(&sp, hole),
                    Translation::Exact { target: dst },
                    "hole {hole} of partition {partition}"
                );
                exact_holes += 1;
            }
            previous_end = src + 1;
        }
    }
    assert!(exact_holes > 0, "the source had no holes to translate");
    assert_eq!(stats.lost_records, 0);
    assert_eq!(stats.duplicate_records, 0);
    eprintln!(
        "segments per partition: {:?}",
        map.iter()
            .map(|(p, m)| (p.partition, m.segments().len()))
            .collect::<Vec<_>>()
    );
}
