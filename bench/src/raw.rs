//! A topic's record batches as the broker stores them, read with strait's client
//! (`strait-kafka`), for two measurements that must not depend on either mirror: the wire
//! bytes of a workload, and the broker-bound ceiling (the same batches written to the target by
//! a producer that does nothing else).

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use strait_kafka::admin::{IsolationLevel, NewTopic, OffsetSpec};
use strait_kafka::fetch::{FetchOptions, FetchPosition};
use strait_kafka::produce::{ProducerConfig, RawProducer};
use strait_kafka::{Client, ClientConfig, TopicPartition};
use strait_wire::{BatchScanner, RawBatch};

/// A connected client for `bootstrap`.
pub async fn connect(bootstrap: &str) -> anyhow::Result<Client> {
    let mut config = ClientConfig::new([bootstrap]);
    config.operation_timeout = Duration::from_secs(60);
    Client::connect(config)
        .await
        .with_context(|| format!("connect to {bootstrap}"))
}

/// Every batch of every partition of `topic`, in offset order per partition.
#[derive(Debug, Default)]
pub struct TopicBatches {
    /// Per partition, its batches.
    pub partitions: Vec<(TopicPartition, Vec<RawBatch>)>,
}

impl TopicBatches {
    /// Batches in all.
    pub fn batches(&self) -> usize {
        self.partitions.iter().map(|(_, b)| b.len()).sum()
    }

    /// Records in all.
    pub fn records(&self) -> u64 {
        self.partitions
            .iter()
            .flat_map(|(_, b)| b.iter())
            .map(|b| b.header.record_count.max(0) as u64)
            .sum()
    }

    /// Bytes of the batches as stored and sent on the wire (headers included).
    pub fn wire_bytes(&self) -> u64 {
        self.partitions
            .iter()
            .flat_map(|(_, b)| b.iter())
            .map(|b| b.bytes.len() as u64)
            .sum()
    }
}

/// Reads all of `topic` from offset 0 to each partition's high watermark at start.
pub async fn read_topic(client: &Client, topic: &str) -> anyhow::Result<TopicBatches> {
    let metadata = client.refresh_metadata().await?;
    let info = metadata
        .topics
        .get(topic)
        .with_context(|| format!("no topic {topic}"))?;
    let count = info.partitions.len() as i32;
    let mut next = vec![0i64; count as usize];
    let mut end = vec![i64::MAX; count as usize];
    let mut out: Vec<Vec<RawBatch>> = vec![Vec::new(); count as usize];
    let options = FetchOptions {
        max_wait: Duration::from_millis(10),
        isolation: IsolationLevel::ReadUncommitted,
        ..FetchOptions::default()
    };
    let started = Instant::now();
    loop {
        let open: Vec<FetchPosition> = (0..count)
            .filter(|p| next[*p as usize] < end[*p as usize])
            .map(|p| {
                let mut pos = FetchPosition::new(TopicPartition::new(topic, p), next[p as usize]);
                pos.max_bytes = 8 << 20;
                pos
            })
            .collect();
        if open.is_empty() {
            break;
        }
        if started.elapsed() > Duration::from_secs(600) {
            bail!("reading {topic} took more than 600 s");
        }
        // A bounded number of partitions per request keeps each response within fetch.max.bytes.
        for chunk in open.chunks(256) {
            let results = client.fetch(chunk, &options).await;
            for (tp, result) in results {
                let p = tp.partition as usize;
                let data = result.with_context(|| format!("fetch {tp}"))?;
                if end[p] == i64::MAX {
                    end[p] = data.high_watermark;
                }
                for batch in BatchScanner::new(data.records) {
                    let batch = batch.with_context(|| format!("scan {tp}"))?;
                    if batch.header.next_offset() <= next[p] {
                        continue;
                    }
                    next[p] = batch.header.next_offset();
                    out[p].push(batch);
                }
            }
        }
    }
    Ok(TopicBatches {
        partitions: out
            .into_iter()
            .enumerate()
            .map(|(p, b)| (TopicPartition::new(topic, p as i32), b))
            .collect(),
    })
}

/// Partitions of `topic` and the sum of their end offsets; `(0, 0)` if there is no such topic.
pub async fn count(client: &Client, topic: &str) -> anyhow::Result<(usize, i64)> {
    let metadata = client.refresh_metadata().await?;
    let Some(info) = metadata.topics.get(topic) else {
        return Ok((0, 0));
    };
    let asks: Vec<(TopicPartition, OffsetSpec)> = (0..info.partitions.len() as i32)
        .map(|p| (TopicPartition::new(topic, p), OffsetSpec::Latest))
        .collect();
    let mut total = 0i64;
    for (tp, listed) in client
        .list_offsets(&asks, IsolationLevel::ReadUncommitted)
        .await?
    {
        total += listed
            .with_context(|| format!("end offset of {tp}"))?
            .offset;
    }
    Ok((asks.len(), total))
}

/// What the ceiling run measured.
#[derive(Debug, Clone, Copy)]
pub struct Replayed {
    /// Batches written.
    pub batches: usize,
    /// Records written.
    pub records: u64,
    /// Bytes written.
    pub wire_bytes: u64,
    /// Seconds from the first send to the last acknowledgement.
    pub seconds: f64,
}

/// Writes `batches` to a new topic `target_topic` on `target` (same partition count) with an
/// idempotent raw producer: five batches in flight per partition, many partitions per
/// request, acks=all. Nothing else happens: no fetch, no offset map, no decompression.
pub async fn replay(
    target: &Client,
    target_topic: &str,
    batches: &TopicBatches,
) -> anyhow::Result<Replayed> {
    let partitions = batches.partitions.len() as i32;
    target
        .create_topic(NewTopic::new(target_topic, partitions).replication_factor(1))
        .await
        .with_context(|| format!("create {target_topic}"))?;
    crate::watch::wait_partitions_ready(target, target_topic, partitions as usize).await?;
    let producer = RawProducer::new(target.clone(), ProducerConfig::default()).await?;
    // Round-robin over partitions, so each request carries many partitions.
    let mut list = Vec::with_capacity(batches.batches());
    let longest = batches
        .partitions
        .iter()
        .map(|(_, b)| b.len())
        .max()
        .unwrap_or(0);
    for i in 0..longest {
        for (tp, b) in &batches.partitions {
            if let Some(batch) = b.get(i) {
                list.push((
                    TopicPartition::new(target_topic, tp.partition),
                    batch.clone(),
                ));
            }
        }
    }
    let started = Instant::now();
    let results = producer.send_all(list).await;
    let seconds = started.elapsed().as_secs_f64();
    let mut records = 0u64;
    for r in results {
        let ack = r.context("replay a batch")?;
        records += ack.record_count.max(0) as u64;
    }
    Ok(Replayed {
        batches: batches.batches(),
        records,
        wire_bytes: batches.wire_bytes(),
        seconds,
    })
}
