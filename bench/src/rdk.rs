//! librdkafka clients with the settings every benchmark run shares.
//!
//! The producer settings are librdkafka's throughput settings for a mirror: acks=all,
//! idempotence on, up to 1 MB batches (`batch.size`, the broker's default `message.max.bytes`
//! caps a batch there) filled for up to 100 ms, a deep local queue. The consumer fetches up to
//! 50 MB per request and 4 MiB per partition, and keeps up to 512 MiB queued.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, Message, Offset, TopicPartitionList};

use crate::workload::{Pool, HEADER_NAME, HEADER_VALUE};

/// Counts delivery reports: successes, failures, and the first failure's text.
#[derive(Debug, Default)]
pub struct Deliveries {
    /// Records acknowledged by the broker.
    pub ok: AtomicU64,
    /// Records that failed for good.
    pub failed: AtomicU64,
    first_error: std::sync::Mutex<Option<String>>,
}

impl Deliveries {
    /// The first delivery error, if any.
    pub fn first_error(&self) -> Option<String> {
        self.first_error.lock().ok().and_then(|e| e.clone())
    }
}

/// The producer's context: counts delivery reports.
#[derive(Debug, Clone, Default)]
pub struct Counting(pub Arc<Deliveries>);

impl ClientContext for Counting {}

impl ProducerContext for Counting {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(_) => {
                self.0.ok.fetch_add(1, Ordering::Relaxed);
            }
            Err((e, _)) => {
                self.0.failed.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut first) = self.0.first_error.lock() {
                    first.get_or_insert_with(|| e.to_string());
                }
            }
        }
    }
}

/// librdkafka's codec name for a workload codec (`none`, `lz4`, `zstd`, ...).
pub fn codec(name: &str) -> anyhow::Result<&'static str> {
    Ok(match name {
        "none" => "none",
        "gzip" => "gzip",
        "snappy" => "snappy",
        "lz4" => "lz4",
        "zstd" => "zstd",
        other => bail!("unknown codec {other}"),
    })
}

/// A throughput-tuned idempotent producer (acks=all) writing with `codec`. `batch_bytes` and
/// `linger_ms` override the mirror's batching (the source loader writes smaller batches, as
/// a Kafka producer with its default `batch.size` does).
pub fn producer(
    bootstrap: &str,
    codec_name: &str,
    batch_bytes: usize,
    linger_ms: u64,
) -> anyhow::Result<(BaseProducer<Counting>, Arc<Deliveries>)> {
    let deliveries = Arc::new(Deliveries::default());
    let producer: BaseProducer<Counting> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("client.id", "strait-bench")
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("max.in.flight.requests.per.connection", "5")
        .set("compression.codec", codec(codec_name)?)
        .set("batch.size", batch_bytes.to_string())
        .set("batch.num.messages", "1000000")
        .set("linger.ms", linger_ms.to_string())
        .set("queue.buffering.max.kbytes", "1048576")
        .set("queue.buffering.max.messages", "2000000")
        .set("message.timeout.ms", "300000")
        .set("allow.auto.create.topics", "false")
        .create_with_context(Counting(Arc::clone(&deliveries)))
        .context("create producer")?;
    Ok((producer, deliveries))
}

/// The mirror's producer batching: 1 MB batches, lingering up to 100 ms.
pub const MIRROR_BATCH_BYTES: usize = 1_000_000;
/// The mirror's `linger.ms`.
pub const MIRROR_LINGER_MS: u64 = 100;

/// A throughput-tuned consumer without a group (partitions are assigned, as MM2's source
/// tasks do), reading from the earliest offset.
pub fn consumer(bootstrap: &str) -> anyhow::Result<BaseConsumer> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("client.id", "strait-bench")
        .set("group.id", "strait-bench-baseline")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("fetch.max.bytes", "52428800")
        .set("fetch.message.max.bytes", "4194304")
        .set("fetch.wait.max.ms", "100")
        .set("queued.max.messages.kbytes", "524288")
        .set("queued.min.messages", "1000000")
        .set("allow.auto.create.topics", "false")
        .create()
        .context("create consumer")
}

/// Partition count of `topic`.
pub fn partitions(consumer: &BaseConsumer, topic: &str) -> anyhow::Result<i32> {
    let md = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(30))
        .with_context(|| format!("metadata of {topic}"))?;
    let t = md
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .with_context(|| format!("topic {topic} not in metadata"))?;
    if let Some(e) = t.error() {
        bail!("topic {topic}: {e:?}");
    }
    Ok(t.partitions().len() as i32)
}

/// High watermark of every partition of `topic`.
pub fn high_watermarks(
    consumer: &BaseConsumer,
    topic: &str,
    partitions: i32,
) -> anyhow::Result<Vec<i64>> {
    (0..partitions)
        .map(|p| {
            consumer
                .fetch_watermarks(topic, p, Duration::from_secs(30))
                .map(|(_, high)| high)
                .with_context(|| format!("watermarks of {topic}-{p}"))
        })
        .collect()
}

/// Assigns every partition of `topic` from the beginning.
pub fn assign_all(consumer: &BaseConsumer, topic: &str, partitions: i32) -> anyhow::Result<()> {
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    consumer.assign(&tpl).context("assign")
}

/// Creates `topic` with `partitions` partitions (replication factor 1); an existing topic is
/// an error unless `may_exist`.
pub fn create_topic(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    may_exist: bool,
) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .context("create admin client")?;
    let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(60)));
    let results = futures::executor::block_on(admin.create_topics([&new], &opts))
        .with_context(|| format!("create topic {topic}"))?;
    for r in results {
        match r {
            Ok(_) => {}
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) if may_exist => {}
            Err((t, e)) => bail!("create topic {t}: {e}"),
        }
    }
    Ok(())
}

/// Sends one record, waiting (serving delivery reports) while the local queue is full.
pub fn send_blocking<'a>(
    producer: &BaseProducer<Counting>,
    mut record: BaseRecord<'a, [u8], [u8]>,
) -> anyhow::Result<()> {
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                producer.poll(Duration::from_millis(5));
                record = back;
            }
            Err((e, _)) => bail!("produce: {e}"),
        }
    }
}

/// Waits until every record is acknowledged; fails on any delivery error.
pub fn flush(producer: &BaseProducer<Counting>, deliveries: &Deliveries) -> anyhow::Result<()> {
    producer
        .flush(Duration::from_secs(300))
        .context("flush: records still queued after 300 s")?;
    let failed = deliveries.failed.load(Ordering::Relaxed);
    if failed > 0 {
        bail!(
            "{failed} records failed to deliver; first error: {}",
            deliveries.first_error().unwrap_or_default()
        );
    }
    Ok(())
}

/// What a produce run did.
#[derive(Debug, Clone, Copy)]
pub struct Produced {
    /// Records acknowledged.
    pub records: u64,
    /// Value + key + header bytes handed to the producer.
    pub payload_bytes: u64,
    /// Seconds from the first send to the last acknowledgement.
    pub seconds: f64,
}

/// Creates `topic` with `partitions` and loads it with `count` workload records of
/// `value_bytes` (lz4, 64 KiB batches): the source topic of the benches that start their own
/// clusters (`eos-cost`, `workers-scale`).
pub fn load_topic(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    count: u64,
    value_bytes: usize,
) -> anyhow::Result<Produced> {
    create_topic(bootstrap, topic, partitions, false)?;
    let pool = Pool::new(7, value_bytes, Pool::count_for(value_bytes));
    produce_workload(
        bootstrap,
        topic,
        partitions,
        "lz4",
        &pool,
        count,
        64 * 1024,
        20,
        1_700_000_000_000,
    )
}

/// Produces `count` workload records to `topic` (partition `i % partitions`), timestamps one
/// millisecond apart from `base_timestamp`.
#[allow(clippy::too_many_arguments)]
pub fn produce_workload(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    codec_name: &str,
    pool: &Pool,
    count: u64,
    batch_bytes: usize,
    linger_ms: u64,
    base_timestamp: i64,
) -> anyhow::Result<Produced> {
    let (producer, deliveries) = producer(bootstrap, codec_name, batch_bytes, linger_ms)?;
    let started = Instant::now();
    let mut payload = 0u64;
    for i in 0..count {
        let value = pool.value(i);
        let key = pool.key(i);
        payload += (value.len() + key.len() + HEADER_NAME.len() + HEADER_VALUE.len()) as u64;
        let headers = OwnedHeaders::new().insert(Header {
            key: HEADER_NAME,
            value: Some(HEADER_VALUE),
        });
        let record = BaseRecord::to(topic)
            .partition((i % partitions as u64) as i32)
            .key(key)
            .payload(&value[..])
            .headers(headers)
            .timestamp(base_timestamp + i as i64);
        send_blocking(&producer, record)?;
        if i.is_multiple_of(1024) {
            producer.poll(Duration::ZERO);
        }
    }
    flush(&producer, &deliveries)?;
    Ok(Produced {
        records: deliveries.ok.load(Ordering::Relaxed),
        payload_bytes: payload,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The key, value and header bytes of a consumed record.
pub fn payload_len(m: &impl Message) -> u64 {
    use rdkafka::message::Headers as _;
    let headers: usize = m
        .headers()
        .map(|h| {
            h.iter()
                .map(|h| h.key.len() + h.value.map_or(0, <[u8]>::len))
                .sum()
        })
        .unwrap_or(0);
    (m.key().map_or(0, <[u8]>::len) + m.payload().map_or(0, <[u8]>::len) + headers) as u64
}
