//! A raw idempotent producer: it writes batches that were fetched from another cluster without
//! opening them, and tells the caller the target offset of each.
//!
//! The producer gets a producer id and epoch (InitProducerId, KIP-98) and keeps a sequence per
//! partition. Each batch's header is rewritten for our session (`strait_wire::rewrite`), which
//! costs a copy and a CRC, not a decompression. Requests carry at most one batch per partition
//! (the broker refuses more), many partitions per request, and up to five requests in flight per
//! partition: the broker keeps the metadata of the last five batches per producer to
//! de-duplicate retries, so more would make a retry ambiguous.
//!
//! Order holds across retries because the broker only appends sequence `n + 1` after `n`: if a
//! batch fails and the ones behind it get OUT_OF_ORDER_SEQUENCE_NUMBER, they are all sent again
//! in order. A retry of a batch that was in fact written is answered with its original offset (or
//! DUPLICATE_SEQUENCE_NUMBER, an [`Error::DuplicateSequence`]), never appended twice. A batch
//! that fails for good leaves a hole in its partition's sequence; that partition then refuses
//! further batches until the producer's epoch is bumped ([`RawProducer::bump_epoch`]), so
//! nothing after the hole can be written out of order.
//!
//! A partition that holds nothing of the producer yet (its first batch of an epoch) takes any
//! sequence: were a second batch in flight beside a first one that is retried (a new topic's
//! leader not ready), it would land first. So until a partition acknowledges one batch of the
//! epoch, its batches go one at a time.
//!
//! The epoch is bumped on the client, as Kafka's own idempotent producer does (KIP-360): the
//! same producer id with epoch + 1 and every sequence back to 0. The broker accepts a higher
//! epoch starting at sequence 0 and from then on refuses the lower one, so a late batch of the
//! old epoch cannot land after the new epoch's. Taking a new producer id instead would leave
//! one more producer's state on every partition of the target until it expires, which is what
//! a producer failing in a loop must not do (KIP-936).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{InitProducerIdRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use strait_wire::{rewrite_for_forward, ForwardHeader, RawBatch};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::backoff::Backoff;
use crate::cluster::{BrokerId, Client, TopicPartition};
use crate::error::{check, Context, Error, Result};

/// Settings of the raw producer.
#[derive(Debug, Clone)]
pub struct ProducerConfig {
    /// How long the broker may wait for replicas before answering (`request.timeout.ms`,
    /// default 30 s). Acks are always `all` (-1).
    pub broker_timeout: Duration,
    /// `delivery.timeout.ms` (default 120 s): how long a batch is retried before it fails.
    pub delivery_timeout: Duration,
    /// Requests in flight per partition; at most 5 (`max.in.flight.requests.per.connection`).
    pub max_in_flight_per_partition: usize,
    /// `max.request.size` (default 1 MiB): the batches of one produce request add up to at most
    /// this, except that a request always carries at least one batch (a batch larger than this
    /// goes alone; the broker's `message.max.bytes` decides whether it is taken).
    pub max_request_size: usize,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        Self {
            broker_timeout: Duration::from_secs(30),
            delivery_timeout: Duration::from_secs(120),
            max_in_flight_per_partition: 5,
            max_request_size: 1024 * 1024,
        }
    }
}

/// Where a produced batch landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProduceAck {
    /// Target offset of the batch's first record; its records are at
    /// `base_offset .. base_offset + record_count`.
    pub base_offset: i64,
    /// Records in the batch.
    pub record_count: i32,
    /// The broker's append time when the topic uses LogAppendTime, else -1.
    pub log_append_time: i64,
    /// The partition's log start offset, -1 if not reported.
    pub log_start_offset: i64,
}

/// The next sequence after `n` records from `base`. Kafka sequences wrap from `i32::MAX` to 0.
pub fn increment_sequence(base: i32, n: i32) -> i32 {
    if base > i32::MAX - n {
        n - (i32::MAX - base) - 1
    } else {
        base + n
    }
}

#[derive(Debug)]
struct SequenceState {
    next: i32,
    /// Sequences sent and not yet resolved, in the order they were given out.
    unresolved: VecDeque<i32>,
    /// Set when a batch failed for good; the partition's sequence has a hole.
    broken: Option<Error>,
    /// Whether a batch of this epoch was acknowledged. Until one is, the partition may hold
    /// nothing of the producer, and Kafka then takes any sequence: a second batch in flight
    /// could land before a first one that is retried. So only one is sent until then.
    acknowledged: bool,
}

#[derive(Debug)]
struct PartitionState {
    permits: Arc<Semaphore>,
    seq: StdMutex<SequenceState>,
}

/// A batch on its way.
#[derive(Debug)]
struct Pending {
    index: usize,
    tp: TopicPartition,
    bytes: Bytes,
    sequence: i32,
    record_count: i32,
    state: Arc<PartitionState>,
    _permit: OwnedSemaphorePermit,
}

enum Outcome {
    Done(ProduceAck),
    Retry(Error),
    Fail(Error),
    /// Not sent: an earlier batch of its partition must be acknowledged first.
    Wait,
}

/// The idempotent raw producer for one target cluster.
#[derive(Debug)]
pub struct RawProducer {
    client: Client,
    config: ProducerConfig,
    producer_id: i64,
    producer_epoch: i16,
    partitions: StdMutex<HashMap<TopicPartition, Arc<PartitionState>>>,
}

impl RawProducer {
    /// Gets a producer id from the cluster (InitProducerId without a transactional id).
    pub async fn new(client: Client, config: ProducerConfig) -> Result<Self> {
        if config.max_in_flight_per_partition == 0 || config.max_in_flight_per_partition > 5 {
            return Err(Error::Invalid(format!(
                "max in flight per partition is {}; an idempotent producer needs 1..=5",
                config.max_in_flight_per_partition
            )));
        }
        let request = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(i32::MAX)
            .with_producer_id(kafka_protocol::messages::ProducerId(-1))
            .with_producer_epoch(-1);
        let resp = client
            .retry("init producer id", || async {
                let resp = client.send_any(&request).await?;
                check(resp.error_code, None, || Context::None)?;
                Ok(resp)
            })
            .await?;
        tracing::info!(
            producer_id = resp.producer_id.0,
            epoch = resp.producer_epoch,
            "idempotent producer ready"
        );
        Ok(Self {
            client,
            config,
            producer_id: resp.producer_id.0,
            producer_epoch: resp.producer_epoch,
            partitions: StdMutex::new(HashMap::new()),
        })
    }

    /// Starts a new epoch of the same producer id, every partition's sequence back to 0, so
    /// that partitions whose sequence has a hole (a batch failed for good, or its fate is
    /// unknown) can be written again. Call it only when no batch is in flight (no `send_all`
    /// running). At the last epoch, a new producer id is taken instead.
    pub async fn bump_epoch(&mut self) -> Result<()> {
        if self.producer_epoch == i16::MAX {
            let fresh = Self::new(self.client.clone(), self.config.clone()).await?;
            *self = fresh;
            return Ok(());
        }
        self.producer_epoch += 1;
        self.partitions.lock().map_err(|_| Error::Closed)?.clear();
        tracing::info!(
            producer_id = self.producer_id,
            epoch = self.producer_epoch,
            "idempotent producer epoch bumped; sequences start again at 0"
        );
        Ok(())
    }

    /// Our producer id and epoch.
    pub fn producer_id(&self) -> (i64, i16) {
        (self.producer_id, self.producer_epoch)
    }

    /// The client this producer writes through.
    pub fn client(&self) -> &Client {
        &self.client
    }

    fn partition(&self, tp: &TopicPartition) -> Result<Arc<PartitionState>> {
        let mut map = self.partitions.lock().map_err(|_| Error::Closed)?;
        Ok(Arc::clone(map.entry(tp.clone()).or_insert_with(|| {
            Arc::new(PartitionState {
                permits: Arc::new(Semaphore::new(self.config.max_in_flight_per_partition)),
                seq: StdMutex::new(SequenceState {
                    next: 0,
                    unresolved: VecDeque::new(),
                    broken: None,
                    acknowledged: false,
                }),
            })
        })))
    }

    /// Writes one batch and returns where it landed.
    pub async fn send(&self, tp: &TopicPartition, batch: &RawBatch) -> Result<ProduceAck> {
        let mut results = self.send_all(vec![(tp.clone(), batch.clone())]).await;
        results.pop().unwrap_or(Err(Error::Closed))
    }

    /// Writes batches, in order per partition, as few requests as the one-batch-per-partition
    /// rule allows, all in flight together. One result per batch, in the order given.
    ///
    /// Sequences are given out in call order, so batches of one partition must be handed to the
    /// producer in the order they should land, by one caller at a time per partition. More
    /// batches per partition than the in-flight limit are sent in waves of that many.
    ///
    /// Returns within the delivery timeout (plus a backoff's rounding), however many waves: as
    /// Kafka's `delivery.timeout.ms`, it counts from the call, and a batch not acknowledged by
    /// then, in flight or not yet sent, is an [`Error::DeliveryTimeout`].
    pub async fn send_all(
        &self,
        batches: Vec<(TopicPartition, RawBatch)>,
    ) -> Vec<Result<ProduceAck>> {
        let deadline = Instant::now() + self.config.delivery_timeout;
        let mut results: Vec<Option<Result<ProduceAck>>> = batches.iter().map(|_| None).collect();
        let limit = self.config.max_in_flight_per_partition;
        let mut waves: Vec<Vec<(usize, TopicPartition, RawBatch)>> = Vec::new();
        let mut seen: HashMap<TopicPartition, usize> = HashMap::new();
        for (index, (tp, batch)) in batches.into_iter().enumerate() {
            let n = seen.entry(tp.clone()).or_insert(0);
            let wave = *n / limit;
            *n += 1;
            if waves.len() <= wave {
                waves.resize_with(wave + 1, Vec::new);
            }
            waves[wave].push((index, tp, batch));
        }
        for wave in waves {
            // (A ready future is polled before its deadline is checked, hence the first test.)
            let pending = if Instant::now() < deadline {
                tokio::time::timeout_at(deadline, self.prepare_wave(wave.clone(), &mut results))
                    .await
                    .ok()
            } else {
                None
            };
            // Out of time before the wave could go, or while it waited for in-flight slots
            // another caller holds.
            let Some(pending) = pending else {
                for (index, tp, _) in wave {
                    results[index] = Some(Err(self.delivery_timeout(&tp)));
                }
                continue;
            };
            self.deliver(pending, &mut results, deadline).await;
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or(Err(Error::Closed)))
            .collect()
    }

    /// Takes the in-flight slots of a wave (at most the limit per partition), partition by
    /// partition in a fixed order so that concurrent callers cannot hold each other's slots,
    /// then gives each batch its sequence and rewrites its header.
    async fn prepare_wave(
        &self,
        wave: Vec<(usize, TopicPartition, RawBatch)>,
        results: &mut [Option<Result<ProduceAck>>],
    ) -> Vec<Pending> {
        let mut by_partition: BTreeMap<TopicPartition, Vec<(usize, RawBatch)>> = BTreeMap::new();
        for (index, tp, batch) in wave {
            by_partition.entry(tp).or_default().push((index, batch));
        }
        let mut pending = Vec::new();
        for (tp, batches) in by_partition {
            let slots = async {
                let state = self.partition(&tp)?;
                let permits = Arc::clone(&state.permits)
                    .acquire_many_owned(batches.len() as u32)
                    .await
                    .map_err(|_| Error::Closed)?;
                Ok::<_, Error>((state, permits))
            };
            let (state, mut permits) = match slots.await {
                Ok(s) => s,
                Err(e) => {
                    for (index, _) in batches {
                        results[index] = Some(Err(e.clone()));
                    }
                    continue;
                }
            };
            for (index, batch) in batches {
                let Some(permit) = permits.split(1) else {
                    results[index] = Some(Err(Error::Closed));
                    continue;
                };
                match self.prepare(index, &tp, &batch, &state, permit) {
                    Ok(p) => pending.push(p),
                    Err(e) => results[index] = Some(Err(e)),
                }
            }
        }
        pending
    }

    fn delivery_timeout(&self, tp: &TopicPartition) -> Error {
        Error::DeliveryTimeout {
            context: tp.context(),
            after: self.config.delivery_timeout,
        }
    }

    /// Sends prepared batches until each is written, fails for good, or `deadline` passes (to a
    /// partition with no batch acknowledged yet in this epoch, one at a time until one is).
    /// An attempt still in flight at the deadline is abandoned: its batches' fate is unknown,
    /// so they fail and poison their partitions' sequences.
    async fn deliver(
        &self,
        mut pending: Vec<Pending>,
        results: &mut [Option<Result<ProduceAck>>],
        deadline: Instant,
    ) {
        let mut backoff = Backoff::new(
            self.client.config().retry_backoff,
            self.client.config().retry_backoff_max,
        );
        while !pending.is_empty() {
            let outcomes = match tokio::time::timeout_at(deadline, self.attempt(&pending)).await {
                Ok(outcomes) => outcomes,
                Err(_) => pending
                    .iter()
                    .map(|p| Outcome::Fail(self.delivery_timeout(&p.tp)))
                    .collect(),
            };
            let mut retry = Vec::new();
            let mut refresh = false;
            let mut failed_some = false;
            for (p, outcome) in pending.into_iter().zip(outcomes) {
                match outcome {
                    Outcome::Done(ack) => {
                        resolve(&p, None);
                        results[p.index] = Some(Ok(ack));
                    }
                    Outcome::Wait => retry.push(p),
                    Outcome::Retry(e) if Instant::now() < deadline => {
                        failed_some = true;
                        refresh |= e.needs_metadata_refresh();
                        tracing::debug!(partition = %p.tp, sequence = p.sequence, error = %e, "retrying batch");
                        retry.push(p);
                    }
                    Outcome::Retry(e) | Outcome::Fail(e) => {
                        tracing::warn!(partition = %p.tp, sequence = p.sequence, error = %e, "batch failed");
                        let fatal = !matches!(e, Error::DuplicateSequence { .. });
                        resolve(&p, fatal.then(|| e.clone()));
                        results[p.index] = Some(Err(e));
                    }
                }
            }
            pending = retry;
            if !pending.is_empty() && failed_some {
                if refresh {
                    match tokio::time::timeout_at(deadline, self.client.refresh_metadata()).await {
                        Ok(Ok(_)) => {}
                        Ok(Err(e)) => tracing::debug!(error = %e, "metadata refresh failed"),
                        Err(_) => tracing::debug!("metadata refresh cut by the delivery timeout"),
                    }
                }
                let wait = backoff.next_wait();
                tokio::time::sleep(wait.min(deadline.saturating_duration_since(Instant::now())))
                    .await;
            }
        }
    }

    /// Gives the batch its sequence and rewrites its header.
    fn prepare(
        &self,
        index: usize,
        tp: &TopicPartition,
        batch: &RawBatch,
        state: &Arc<PartitionState>,
        permit: OwnedSemaphorePermit,
    ) -> Result<Pending> {
        let record_count = batch.header.record_count;
        let mut seq = state.seq.lock().map_err(|_| Error::Closed)?;
        if let Some(e) = &seq.broken {
            return Err(Error::Invalid(format!(
                "{tp}: an earlier batch failed ({e}), so its sequence has a hole; \
                 make a new producer and resume from the last written offset"
            )));
        }
        let sequence = seq.next;
        let header = ForwardHeader {
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            base_sequence: sequence,
            transactional: false,
        };
        let bytes = rewrite_for_forward(batch, &header)
            .map_err(|e| Error::Invalid(format!("{tp}: cannot forward batch: {e}")))?;
        seq.next = increment_sequence(sequence, record_count);
        seq.unresolved.push_back(sequence);
        drop(seq);
        Ok(Pending {
            index,
            tp: tp.clone(),
            bytes,
            sequence,
            record_count,
            state: Arc::clone(state),
            _permit: permit,
        })
    }

    /// One try for every pending batch: grouped by leader, at most one batch per partition per
    /// request, all requests in flight at once.
    async fn attempt(&self, pending: &[Pending]) -> Vec<Outcome> {
        let mut outcomes: Vec<Option<Outcome>> = pending.iter().map(|_| None).collect();
        // (leader, round) -> indexes into `pending`; round k holds each partition's k-th batch.
        let mut requests: BTreeMap<(BrokerId, usize), Vec<usize>> = BTreeMap::new();
        let mut rounds: HashMap<&TopicPartition, usize> = HashMap::new();
        for (i, p) in pending.iter().enumerate() {
            let (broken, waits) = p
                .state
                .seq
                .lock()
                .map(|s| {
                    (
                        s.broken.clone(),
                        // Until a batch of this epoch is acknowledged, only the first goes.
                        !s.acknowledged && s.unresolved.front() != Some(&p.sequence),
                    )
                })
                .unwrap_or((None, false));
            if let Some(e) = broken {
                // Behind a hole in the sequence: never sent, so it cannot land out of order.
                outcomes[i] = Some(Outcome::Fail(Error::Invalid(format!(
                    "{}: not sent, an earlier batch failed ({e})",
                    p.tp
                ))));
                continue;
            }
            if waits {
                outcomes[i] = Some(Outcome::Wait);
                continue;
            }
            match self.client.leader(&p.tp).await {
                Ok(leader) => {
                    let round = rounds.entry(&p.tp).or_insert(0);
                    requests.entry((leader, *round)).or_default().push(i);
                    *round += 1;
                }
                Err(e) => outcomes[i] = Some(classify_request_error(e)),
            }
        }
        // Each request within `max.request.size`: a (leader, round) group larger than that goes
        // as several requests, in order, so a partition's batches still go out in round order.
        let limit = self.config.max_request_size.max(1);
        let requests = requests.into_iter().flat_map(|((leader, _), idx)| {
            let mut chunks: Vec<(BrokerId, Vec<usize>)> = Vec::new();
            let mut size = 0;
            for i in idx {
                let bytes = pending[i].bytes.len();
                match chunks.last_mut() {
                    Some((_, chunk)) if size + bytes <= limit => {
                        chunk.push(i);
                        size += bytes;
                    }
                    _ => {
                        chunks.push((leader, vec![i]));
                        size = bytes;
                    }
                }
            }
            chunks
        });
        let sends = requests.map(|(leader, idx)| async move {
            let batch: Vec<&Pending> = idx.iter().map(|i| &pending[*i]).collect();
            (idx, self.produce_once(leader, &batch).await)
        });
        for (idx, result) in futures::future::join_all(sends).await {
            match result {
                Ok(per_partition) => {
                    for (i, outcome) in idx.into_iter().zip(per_partition) {
                        outcomes[i] = Some(outcome);
                    }
                }
                Err(e) => {
                    for i in idx {
                        outcomes[i] = Some(classify_request_error(e.clone()));
                    }
                }
            }
        }
        outcomes
            .into_iter()
            .map(|o| o.unwrap_or(Outcome::Fail(Error::Closed)))
            .collect()
    }

    /// One ProduceRequest to one broker, one batch per partition.
    async fn produce_once(&self, leader: BrokerId, batch: &[&Pending]) -> Result<Vec<Outcome>> {
        let mut by_topic: BTreeMap<&str, Vec<PartitionProduceData>> = BTreeMap::new();
        for p in batch {
            by_topic.entry(&p.tp.topic).or_default().push(
                PartitionProduceData::default()
                    .with_index(p.tp.partition)
                    .with_records(Some(p.bytes.clone())),
            );
        }
        let request = ProduceRequest::default()
            .with_transactional_id(None)
            .with_acks(-1)
            .with_timeout_ms(self.config.broker_timeout.as_millis().min(i32::MAX as u128) as i32)
            .with_topic_data(
                by_topic
                    .into_iter()
                    .map(|(t, ps)| {
                        TopicProduceData::default()
                            .with_name(TopicName(StrBytes::from_string(t.to_owned())))
                            .with_partition_data(ps)
                    })
                    .collect(),
            );
        let resp = self.client.send_to(leader, &request).await?;
        let mut answers = HashMap::new();
        for t in resp.responses {
            let topic = t.name.0.to_string();
            for p in t.partition_responses {
                answers.insert(TopicPartition::new(topic.clone(), p.index), p);
            }
        }
        Ok(batch
            .iter()
            .map(|p| match answers.remove(&p.tp) {
                None => Outcome::Fail(Error::Unexpected {
                    broker: leader.to_string(),
                    what: format!("Produce answer does not mention {}", p.tp),
                }),
                Some(answer) => classify_answer(p, answer),
            })
            .collect())
    }
}

fn classify_answer(
    p: &Pending,
    answer: kafka_protocol::messages::produce_response::PartitionProduceResponse,
) -> Outcome {
    let Some(code) = ResponseError::try_from_code(answer.error_code) else {
        return Outcome::Done(ProduceAck {
            base_offset: answer.base_offset,
            record_count: p.record_count,
            log_append_time: answer.log_append_time_ms,
            log_start_offset: answer.log_start_offset,
        });
    };
    let message = answer.error_message.map(|m| m.to_string());
    match code {
        ResponseError::DuplicateSequenceNumber => Outcome::Fail(Error::DuplicateSequence {
            context: p.tp.context(),
        }),
        ResponseError::OutOfOrderSequenceNumber => {
            // Retriable only while an earlier batch of this partition is unresolved: then we
            // are simply ahead of its retry.
            let earlier_unresolved = p
                .state
                .seq
                .lock()
                .map(|s| {
                    s.unresolved
                        .front()
                        .is_some_and(|first| *first != p.sequence)
                })
                .unwrap_or(false);
            let err = Error::broker(code, message, p.tp.context());
            if earlier_unresolved {
                Outcome::Retry(err)
            } else {
                Outcome::Fail(err)
            }
        }
        _ => classify_request_error(Error::broker(code, message, p.tp.context())),
    }
}

fn classify_request_error(e: Error) -> Outcome {
    if e.is_retriable() {
        Outcome::Retry(e)
    } else {
        Outcome::Fail(e)
    }
}

/// Marks a batch resolved; `broken` poisons its partition's sequence.
fn resolve(p: &Pending, broken: Option<Error>) {
    if let Ok(mut seq) = p.state.seq.lock() {
        seq.unresolved.retain(|s| *s != p.sequence);
        seq.acknowledged |= broken.is_none();
        if broken.is_some() && seq.broken.is_none() {
            seq.broken = broken;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::increment_sequence;

    #[test]
    fn sequences_wrap_like_kafka() {
        assert_eq!(increment_sequence(0, 5), 5);
        assert_eq!(increment_sequence(i32::MAX - 2, 2), i32::MAX);
        assert_eq!(increment_sequence(i32::MAX - 2, 3), 0);
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 10), 8);
    }
}
