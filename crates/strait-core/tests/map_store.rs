//! The offset map's topic on Apache Kafka. The map a flow publishes is always on the topic
//! (it is written beside the data, published once acknowledged). A flush of more map records than fit in one batch
//! under the target's `message.max.bytes` (1 MiB by default) is written in several batches and
//! reads back whole. One batch of them was refused with MESSAGE_TOO_LARGE, which is not
//! retriable: strait stopped, and stopped again after every restart (a transactional source
//! makes one segment per marker, a compacted one one per hole, and a first round over
//! thousands of partitions one extent per partition).

mod common;

use strait_core::internal::map_store::MapStore;
use strait_kafka::admin::NewTopic;
use strait_kafka::produce::ProducerConfig;
use strait_testkit::{Clusters, Names, Rdk, TestRecord};
use strait_wire::offset_map::{Extent, MapEntry, OffsetMap, Segment, SourcePartition, Translation};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_map_flush_larger_than_a_batch_may_be_is_written_and_reads_back() {
    let clusters = Clusters::shared();
    let big = Names::new().alias("big");
    let target = common::client(&clusters.target.bootstrap).await;
    let (mut store, map) = MapStore::open(&target, &big, 1, Some(ProducerConfig::default()))
        .await
        .unwrap();
    assert!(map.is_empty());

    // 600 partitions of a topic with a long name, 20 segments each (a marker after every 9
    // records) plus the extent: 12,600 records of about 110 bytes, 1.4 MB in all.
    let topic = format!("payments-{}", "x".repeat(40));
    let mut expected = Vec::new();
    for p in 0..600 {
        let sp = SourcePartition::new(&topic, p);
        for s in 0..20i64 {
            let segment = Segment {
                src_start: s * 10,
                dst_start: s * 9,
                len: 9,
            };
            store.note(&sp, MapEntry::Segment(segment));
            expected.push((sp.clone(), segment));
        }
        store.note(
            &sp,
            MapEntry::Extent(Extent {
                src_start: 0,
                src_end: 200,
            }),
        );
    }
    assert_eq!(store.pending(), 600 * 21);
    let published = store.flush(&map).await.unwrap();
    assert!(
        published.is_some(),
        "a write that wrote records publishes its map"
    );
    assert_eq!(store.written(), 600 * 21);
    assert_eq!(store.pending(), 0);

    let loaded = MapStore::read(&target, &big).await.unwrap();
    for (sp, segment) in &expected {
        let partition = loaded.partition(sp).expect("partition loaded");
        assert!(partition.segments().contains(segment), "{sp:?} {segment:?}");
        assert_eq!(partition.extent().map(|e| e.src_end), Some(200));
        // A marker's offset continues at the next segment.
        assert_eq!(
            loaded.translate(sp, segment.src_start + 9),
            Translation::Exact {
                target: segment.dst_start + 9
            },
        );
    }
}

/// The map a flow publishes (what checkpoints, group sync and the status translate with) is
/// always on the map topic: the map is written beside the next round's data, and published
/// only once its write is acknowledged. At the end of a run everything is written and
/// published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_published_map_is_always_on_its_topic() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let (a, b) = (names.alias("source"), names.alias("target"));
    let ledger = names.topic("ledger");
    let rdk = Rdk::new();
    let source = common::client(&clusters.source.bootstrap).await;
    let target = common::client(&clusters.target.bootstrap).await;
    source
        .create_topic(NewTopic::new(&ledger, 4))
        .await
        .unwrap();
    // Only this test's topics and groups; heartbeats topics (mirrored whatever `topics` says)
    // are other tests'.
    let mut flow = common::start_flow_between(
        (&a, &b),
        &clusters.source.bootstrap,
        &clusters.target.bootstrap,
        &format!(
            "topics = {pattern}\n\
             groups = {pattern}\n\
             heartbeats.replication.enabled = false",
            pattern = names.pattern()
        ),
    )
    .await;
    let updates = flow.map_updates();
    let mut checked = 0;
    for round in 0..15 {
        let records: Vec<TestRecord> = (0..40)
            .map(|i| {
                let value = format!("r{round}-{i}");
                TestRecord::new(i % 4, Some(b"k"), Some(value.as_bytes()))
            })
            .collect();
        rdk.produce(&clusters.source.bootstrap, &ledger, &records, "none");
        flow.round().await.expect("round");
        let published = updates.borrow().clone();
        let persisted = MapStore::read(&target, &a).await.unwrap();
        checked += assert_covered(&published, &persisted);
    }
    assert!(checked > 0, "some map was published while the flow ran");
    flow.run_until_caught_up().await.expect("caught up");
    let published = updates.borrow().clone();
    let persisted = MapStore::read(&target, &a).await.unwrap();
    assert_covered(flow.map(), &published);
    assert_covered(&published, &persisted);
    for p in 0..4 {
        let sp = SourcePartition::new(&ledger, p);
        assert_eq!(
            published.partition(&sp).and_then(|m| m.src_end()),
            Some(15 * 10),
            "{sp:?}: every record mirrored is in the published map"
        );
    }
}

/// Every source offset `inner` maps translates the same in `outer`; returns how many.
fn assert_covered(inner: &OffsetMap, outer: &OffsetMap) -> usize {
    let mut n = 0;
    for (sp, m) in inner.iter() {
        let Some(extent) = m.extent() else { continue };
        for p in extent.src_start..extent.src_end {
            assert_eq!(
                inner.translate(sp, p),
                outer.translate(sp, p),
                "{sp:?} offset {p}: {:?} against {:?}",
                inner.partition(sp),
                outer.partition(sp)
            );
            n += 1;
        }
    }
    n
}
