//! The cross-check with an independent client: librdkafka writes records to the source with each
//! codec; strait fetches the batches raw, rewrites their headers and produces them raw to the
//! target; librdkafka reads the target. Keys, values, headers, timestamps and order must be
//! identical, and the target must still hold the batches compressed with the source's codec.

mod common;

use std::time::Duration;

use kafka_protocol::records::Compression;
use strait_kafka::admin::NewTopic;
use strait_kafka::produce::{ProducerConfig, RawProducer};
use strait_kafka::TopicPartition;
use strait_testkit::{Clusters, Names, Rdk, TestRecord};

use common::{client, fetch_all};

/// Records with every shape that must survive: keys and null keys, values and tombstones,
/// headers (including a null header value and repeated names), explicit timestamps, binary bytes.
fn sample(partitions: i32, n: usize) -> Vec<TestRecord> {
    let base = 1_710_000_000_000i64;
    (0..n)
        .map(|i| {
            let p = (i as i32) % partitions;
            let key = (i % 5 != 0).then(|| format!("key-{i}").into_bytes());
            let value = (i % 7 != 3).then(|| {
                let mut v = format!("value-{i}-").into_bytes();
                v.extend((0..(i % 64) as u8).map(|b| b.wrapping_mul(37)));
                v
            });
            let mut r = TestRecord::new(p, key.as_deref(), value.as_deref())
                .with_timestamp(base + i as i64 * 17);
            if i % 3 == 0 {
                r = r
                    .with_header("trace", Some(format!("t{i}").as_bytes()))
                    .with_header("empty", None)
                    .with_header("trace", Some(b"dup"));
            }
            r
        })
        .collect()
}

async fn mirror_and_compare(codec: &str, expected: Compression) {
    let clusters = Clusters::shared();
    let names = Names::new();
    let rdk = Rdk::new();
    let src = client(&clusters.source.bootstrap).await;
    let dst = client(&clusters.target.bootstrap).await;
    let name = names.topic(&format!("cross-{codec}"));
    let partitions = 3;
    src.create_topic(NewTopic::new(&name, partitions))
        .await
        .unwrap();
    dst.create_topic(NewTopic::new(&name, partitions))
        .await
        .unwrap();

    let input = sample(partitions, 300);
    rdk.produce(&clusters.source.bootstrap, &name, &input[..150], codec);
    rdk.produce_idempotent(&clusters.source.bootstrap, &name, &input[150..], codec);

    let producer = RawProducer::new(dst.clone(), ProducerConfig::default())
        .await
        .unwrap();
    let mut source_batches = 0;
    for p in 0..partitions {
        let tp = TopicPartition::new(&name, p);
        let batches = fetch_all(&src, &tp, 0).await;
        source_batches += batches.len();
        for b in &batches {
            assert_eq!(b.header.attributes.compression(), Some(expected));
        }
        let sends = batches.iter().map(|b| (tp.clone(), b.clone())).collect();
        let acks = producer.send_all(sends).await;
        let mut next = 0;
        for (b, ack) in batches.iter().zip(acks) {
            let ack = ack.unwrap();
            assert_eq!(ack.base_offset, next, "{tp}");
            assert_eq!(
                ack.base_offset, b.header.base_offset,
                "{tp}: same offsets, nothing lost"
            );
            next += ack.record_count as i64;
        }
        // The target stores what we sent: same codec, same batch boundaries.
        let stored = fetch_all(&dst, &tp, 0).await;
        assert_eq!(stored.len(), batches.len(), "{tp}: batch boundaries kept");
        for (s, t) in batches.iter().zip(&stored) {
            assert_eq!(t.header.attributes.compression(), Some(expected));
            assert_eq!(t.header.record_count, s.header.record_count);
            assert_eq!(s.bytes[61..], t.bytes[61..], "compressed payload untouched");
        }
    }
    assert!(source_batches >= partitions as usize);

    let mirrored = rdk.consume(
        &clusters.target.bootstrap,
        &name,
        input.len(),
        Duration::from_secs(30),
    );
    let original = rdk.consume(
        &clusters.source.bootstrap,
        &name,
        input.len(),
        Duration::from_secs(30),
    );
    assert_eq!(mirrored.len(), input.len());
    assert_eq!(original.len(), mirrored.len());
    for (o, m) in original.iter().zip(&mirrored) {
        assert_eq!(
            (o.partition, o.offset),
            (m.partition, m.offset),
            "order and offsets"
        );
        assert!(o.same_payload(m), "payload differs: {o:?} vs {m:?}");
        assert_eq!(o.timestamp_ms, m.timestamp_ms, "timestamp");
    }
    // And the consumed source equals what was produced, per partition in order.
    for p in 0..partitions {
        let sent: Vec<_> = input.iter().filter(|r| r.partition == p).collect();
        let got: Vec<_> = mirrored.iter().filter(|r| r.partition == p).collect();
        assert_eq!(sent.len(), got.len());
        for (s, g) in sent.iter().zip(got) {
            assert!(s.same_payload(g), "{s:?} vs {g:?}");
            assert_eq!(s.timestamp_ms, g.timestamp_ms);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_batches_none() {
    mirror_and_compare("none", Compression::None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_batches_gzip() {
    mirror_and_compare("gzip", Compression::Gzip).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_batches_snappy() {
    mirror_and_compare("snappy", Compression::Snappy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_batches_lz4() {
    mirror_and_compare("lz4", Compression::Lz4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_batches_zstd() {
    mirror_and_compare("zstd", Compression::Zstd).await;
}
