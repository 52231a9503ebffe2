//! The offset map's topic on Apache Kafka: a flush of more map records than fit in one batch
//! under the target's `message.max.bytes` (1 MiB by default) is written in several batches and
//! reads back whole. One batch of them was refused with MESSAGE_TOO_LARGE, which is not
//! retriable: strait stopped, and stopped again after every restart (a transactional source
//! makes one segment per marker, a compacted one one per hole, and a first round over
//! thousands of partitions one extent per partition).

mod common;

use strait_core::internal::map_store::MapStore;
use strait_kafka::produce::ProducerConfig;
use strait_testkit::Clusters;
use strait_wire::offset_map::{Extent, MapEntry, Segment, SourcePartition, Translation};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_map_flush_larger_than_a_batch_may_be_is_written_and_reads_back() {
    let clusters = Clusters::start();
    let target = common::client(&clusters.target.bootstrap).await;
    let (mut store, map) = MapStore::open(&target, "big", 1, ProducerConfig::default())
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

    let loaded = MapStore::read(&target, "big").await.unwrap();
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
