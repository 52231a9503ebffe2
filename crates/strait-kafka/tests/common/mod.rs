//! Helpers shared by the broker-backed tests.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use strait_kafka::admin::IsolationLevel;
use strait_kafka::fetch::{FetchOptions, FetchPosition};
use strait_kafka::{Client, ClientConfig, TopicPartition};
use strait_wire::{BatchScanner, RawBatch};

/// A client with short timeouts, so a broken test fails fast. Logs go to the test's output
/// with `RUST_LOG` (e.g. `RUST_LOG=strait_kafka=debug`).
pub async fn client(bootstrap: &str) -> Client {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let mut config = ClientConfig::new([bootstrap]);
    config.operation_timeout = Duration::from_secs(20);
    config.connection.request_timeout = Duration::from_secs(10);
    Client::connect(config)
        .await
        .expect("connect to test broker")
}

/// Every complete batch of a partition from `from` to the high watermark.
pub async fn fetch_all(client: &Client, tp: &TopicPartition, from: i64) -> Vec<RawBatch> {
    let options = FetchOptions {
        max_wait: Duration::from_millis(100),
        isolation: IsolationLevel::ReadUncommitted,
        ..FetchOptions::default()
    };
    let mut offset = from;
    let mut batches = Vec::new();
    for _ in 0..1000 {
        let mut results = client
            .fetch(&[FetchPosition::new(tp.clone(), offset)], &options)
            .await;
        let data = results
            .remove(tp)
            .expect("an entry per partition")
            .expect("fetch ok");
        for batch in BatchScanner::new(data.records.clone()) {
            let batch = batch.expect("well-formed batch");
            // A fetch may start inside a batch; skip what is before `offset`.
            if batch.header.next_offset() <= offset {
                continue;
            }
            offset = batch.header.next_offset();
            batches.push(batch);
        }
        if offset >= data.high_watermark {
            return batches;
        }
    }
    panic!("{tp}: did not reach the high watermark");
}

/// A topic name unique to this test run.
pub fn topic(name: &str) -> String {
    format!("{name}-{}", std::process::id())
}
