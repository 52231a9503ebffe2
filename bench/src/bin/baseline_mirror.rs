//! THE BASELINE: a record-level mirror on librdkafka, the architecture MirrorMaker 2,
//! MirrorMaker 1, Confluent Replicator and uReplicator share (consume records, produce them
//! again), built on the fastest Kafka client there is. It is what strait is measured against in
//! `docs/benchmarks.md`; it is not part of strait.
//!
//! `mirror` copies every partition of a source topic to a target topic of the same partition
//! count (created here, as MM2 creates remote topics), keeping partition, key, value, headers
//! and timestamp, producing with the source's codec, acks=all and idempotence on, and exits
//! once every record the source held at start is acknowledged by the target (strait's
//! `--until-caught-up`). `consume-only` and `produce-only` measure each half alone, to show the
//! client is tuned as well as librdkafka allows. Each prints one JSON line.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use clap::{Parser, Subcommand};
use rdkafka::message::Headers as _;
use rdkafka::producer::BaseRecord;
use rdkafka::Message;
use strait_bench::rdk;
use strait_bench::workload::Pool;

#[derive(Debug, Parser)]
#[command(name = "baseline-mirror")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Mirror `--topic` from `--source` to `--target-topic` on `--target`, until caught up.
    Mirror {
        #[arg(long)]
        source: String,
        #[arg(long)]
        target: String,
        #[arg(long)]
        topic: String,
        #[arg(long)]
        target_topic: String,
        /// The codec to produce with: the source's (none, lz4, zstd, ...).
        #[arg(long)]
        codec: String,
    },
    /// Consume every record of `--topic` (as the mirror does), and nothing else.
    ConsumeOnly {
        #[arg(long)]
        source: String,
        #[arg(long)]
        topic: String,
    },
    /// Produce `--records` workload records of `--size` bytes (as the mirror's producer is set
    /// up), to a new topic of `--partitions` partitions.
    ProduceOnly {
        #[arg(long)]
        target: String,
        #[arg(long)]
        topic: String,
        #[arg(long)]
        partitions: i32,
        #[arg(long)]
        codec: String,
        #[arg(long)]
        size: usize,
        #[arg(long)]
        records: u64,
    },
}

fn main() -> anyhow::Result<()> {
    let started = Instant::now();
    let out = match Cli::parse().command {
        Command::Mirror {
            source,
            target,
            topic,
            target_topic,
            codec,
        } => mirror(&source, &target, &topic, &target_topic, &codec)?,
        Command::ConsumeOnly { source, topic } => consume_only(&source, &topic)?,
        Command::ProduceOnly {
            target,
            topic,
            partitions,
            codec,
            size,
            records,
        } => {
            rdk::create_topic(&target, &topic, partitions, false)?;
            let pool = Pool::new(7, size, Pool::count_for(size));
            let p = rdk::produce_workload(
                &target,
                &topic,
                partitions,
                &codec,
                &pool,
                records,
                rdk::MIRROR_BATCH_BYTES,
                rdk::MIRROR_LINGER_MS,
                // Timestamps end now: Kafka 4 refuses records more than an hour in the future
                // (`log.message.timestamp.after.max.ms`), and millions of records one
                // millisecond apart from now would reach past it.
                now_ms() - records as i64,
            )?;
            serde_json::json!({
                "records": p.records,
                "payload_bytes": p.payload_bytes,
                "seconds": p.seconds,
            })
        }
    };
    let mut out = out;
    out["process_seconds"] = serde_json::json!(started.elapsed().as_secs_f64());
    println!("{out}");
    Ok(())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Where each partition stands: the next offset to read, and the end to reach.
struct Progress {
    next: Vec<i64>,
    end: Vec<i64>,
    open: usize,
}

impl Progress {
    fn new(end: Vec<i64>) -> Self {
        let open = end.iter().filter(|e| **e > 0).count();
        Self {
            next: vec![0; end.len()],
            end,
            open,
        }
    }

    /// Notes that `offset` of `partition` was read.
    fn read(&mut self, partition: i32, offset: i64) {
        let p = partition as usize;
        if p >= self.next.len() {
            return;
        }
        let was_open = self.next[p] < self.end[p];
        self.next[p] = offset + 1;
        if was_open && self.next[p] >= self.end[p] {
            self.open -= 1;
        }
    }

    fn done(&self) -> bool {
        self.open == 0
    }
}

fn mirror(
    source: &str,
    target: &str,
    topic: &str,
    target_topic: &str,
    codec: &str,
) -> anyhow::Result<serde_json::Value> {
    // The producer first: librdkafka's idempotent producer waits about 0.5 s for its producer
    // id when it starts (its PID timer fires before any broker connection is up), and that
    // wait overlaps the set-up below.
    let t0 = Instant::now();
    let (producer, deliveries) = rdk::producer(
        target,
        codec,
        rdk::MIRROR_BATCH_BYTES,
        rdk::MIRROR_LINGER_MS,
    )?;
    let consumer = rdk::consumer(source)?;
    let partitions = rdk::partitions(&consumer, topic)?;
    let mut progress = Progress::new(rdk::high_watermarks(&consumer, topic, partitions)?);
    rdk::create_topic(target, target_topic, partitions, false)?;
    eprintln!(
        "{:?} set up: {partitions} partitions, target topic created",
        t0.elapsed()
    );
    rdk::assign_all(&consumer, topic, partitions)?;
    let mut records = 0u64;
    let mut payload = 0u64;
    let mut idle_since: Option<Instant> = None;
    while !progress.done() {
        let Some(polled) = consumer.poll(Duration::from_millis(100)) else {
            producer.poll(Duration::ZERO);
            let since = *idle_since.get_or_insert_with(Instant::now);
            if since.elapsed() > Duration::from_secs(60) {
                bail!("no record for 60 s with {} partitions open", progress.open);
            }
            continue;
        };
        idle_since = None;
        let m = polled.context("consume")?;
        payload += rdk::payload_len(&m);
        let mut record: BaseRecord<'_, [u8], [u8]> =
            BaseRecord::to(target_topic).partition(m.partition());
        if let Some(k) = m.key() {
            record = record.key(k);
        }
        if let Some(v) = m.payload() {
            record = record.payload(v);
        }
        if let Some(h) = m.headers() {
            if h.count() > 0 {
                record = record.headers(h.detach());
            }
        }
        if let Some(ts) = m.timestamp().to_millis() {
            record = record.timestamp(ts);
        }
        rdk::send_blocking(&producer, record)?;
        progress.read(m.partition(), m.offset());
        records += 1;
        if records.is_multiple_of(1024) {
            producer.poll(Duration::ZERO);
        }
    }
    eprintln!(
        "{:?} every record consumed and handed to the producer",
        t0.elapsed()
    );
    rdk::flush(&producer, &deliveries)?;
    eprintln!("{:?} every record acknowledged", t0.elapsed());
    let acked = deliveries.ok.load(Ordering::Relaxed);
    if acked != records {
        bail!("{records} records consumed, {acked} acknowledged by the target");
    }
    Ok(serde_json::json!({
        "records": records,
        "payload_bytes": payload,
        "partitions": partitions,
    }))
}

fn consume_only(source: &str, topic: &str) -> anyhow::Result<serde_json::Value> {
    let consumer = rdk::consumer(source)?;
    let partitions = rdk::partitions(&consumer, topic)?;
    let mut progress = Progress::new(rdk::high_watermarks(&consumer, topic, partitions)?);
    let started = Instant::now();
    rdk::assign_all(&consumer, topic, partitions)?;
    let mut records = 0u64;
    let mut payload = 0u64;
    while !progress.done() {
        let Some(polled) = consumer.poll(Duration::from_millis(100)) else {
            if started.elapsed() > Duration::from_secs(600) {
                bail!("not caught up after 600 s");
            }
            continue;
        };
        let m = polled.context("consume")?;
        payload += rdk::payload_len(&m);
        progress.read(m.partition(), m.offset());
        records += 1;
    }
    Ok(serde_json::json!({
        "records": records,
        "payload_bytes": payload,
        "seconds": started.elapsed().as_secs_f64(),
    }))
}
