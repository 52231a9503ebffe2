//! How fast the raw producer writes one partition of a real broker: ~100 MB of pre-built
//! 16 KiB batches, in calls of 64 batches (what a flow's round holds for one partition with the
//! default 1 MiB per-partition fetch). A measurement, not a check: it is ignored by default and
//! asserts nothing about time. Run it with
//!
//! ```text
//! cargo test --release -p strait-kafka --test produce_throughput -- --ignored --nocapture
//! ```
//!
//! `STRAIT_THROUGHPUT_MB` changes the volume, `STRAIT_THROUGHPUT_CALL` the batches per call.

mod common;

use std::time::Instant;

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use strait_kafka::admin::NewTopic;
use strait_kafka::produce::{ProducerConfig, RawProducer};
use strait_kafka::TopicPartition;
use strait_testkit::Clusters;
use strait_wire::{BatchScanner, RawBatch};

use common::{client, topic};

/// One uncompressed v2 batch of 16 records of 1000 bytes: about 16 KiB.
fn batch_16k() -> RawBatch {
    let records: Vec<Record> = (0..16)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i,
            sequence: i as i32,
            timestamp: 1_700_000_000_000 + i,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(vec![b'v'; 1000])),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("encode batch");
    BatchScanner::new(buf.freeze())
        .next()
        .expect("one batch")
        .expect("well-formed batch")
}

/// CPU time of this process (user and system) from `/proc/self/stat`, at 100 ticks a second;
/// 0 where there is no `/proc`.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    // After the command: state is field 3, utime 14 and stime 15 (counting from 1).
    let ticks = |i: usize| {
        fields
            .get(i - 3)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(14) + ticks(15)) / 100.0
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run it with --ignored --nocapture"]
async fn one_partition_of_16k_batches() {
    // A pair of its own, not the shared one: a measurement wants brokers nobody else writes to.
    let clusters = Clusters::start();
    let dst = client(&clusters.target.bootstrap).await;
    let name = topic("throughput");
    dst.create_topic(NewTopic::new(&name, 1)).await.unwrap();
    let producer = RawProducer::new(dst.clone(), ProducerConfig::default())
        .await
        .unwrap();
    let tp = TopicPartition::new(&name, 0);
    let batch = batch_16k();
    let size = batch.bytes.len();
    let total_mb = env_usize("STRAIT_THROUGHPUT_MB", 100);
    let per_call = env_usize("STRAIT_THROUGHPUT_CALL", 64);
    let count = total_mb * 1_000_000 / size;
    // One batch first: the partition then holds the producer's state and pipelining starts.
    producer.send(&tp, &batch).await.unwrap();
    let started = Instant::now();
    let cpu_before = cpu_seconds();
    let mut sent = 0;
    while sent < count {
        let n = per_call.min(count - sent);
        let calls: Vec<_> = (0..n).map(|_| (tp.clone(), batch.clone())).collect();
        for ack in producer.send_all(calls).await {
            ack.expect("batch written");
        }
        sent += n;
    }
    let secs = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_before;
    let mb = (sent * size) as f64 / 1e6;
    println!(
        "one partition: {sent} batches of {size} B in calls of {per_call}: {mb:.0} MB in \
         {secs:.2} s = {:.1} MB/s; producer CPU {cpu:.2} s",
        mb / secs
    );
}
