//! A raw idempotent producer: it writes batches that were fetched from another cluster without
//! opening them, and tells the caller the target offset of each.
//!
//! The producer gets a producer id and epoch (InitProducerId, KIP-98) and keeps a sequence per
//! partition. Each batch's header is rewritten for our session (`strait_wire::rewrite`), which
//! costs a copy and a CRC, not a decompression. Requests carry at most one batch per partition
//! (the broker refuses more), many partitions per request, and up to five requests in flight per
//! partition: the broker keeps the metadata of the last five batches per producer to
//! de-duplicate retries, so more would make a retry ambiguous. The five are a sliding window:
//! as soon as one of a partition's requests is answered its next batch goes, with the next
//! batch of every other partition of that leader that has a free slot (`Dispatch`). A batch is
//! prepared (sequence, header) only when it is about to be sent.
//!
//! Requests to one broker are written to its connection in the order they are made, and Kafka
//! handles a connection's requests in order, so a partition's batches arrive in sequence order.
//! Order holds across retries because the broker only appends sequence `n + 1` after `n`: if a
//! batch fails and the ones behind it get OUT_OF_ORDER_SEQUENCE_NUMBER, its partition sends
//! nothing new until its requests in flight are answered, then sends them all again in order,
//! from the first one not acknowledged. A retry of a batch that was in fact written is answered
//! with its original offset (or DUPLICATE_SEQUENCE_NUMBER, an [`Error::DuplicateSequence`]),
//! never appended twice. A batch
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
//!
//! With a `transactional_id` the producer is transactional (`transaction`): the id's coordinator
//! gives the producer id and epoch and fences whoever held the id before; batches carry the
//! transactional bit, each partition joins the open transaction before its first batch, and
//! [`RawProducer::commit`] or [`RawProducer::abort`] ends it.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, ProduceResponse};
use kafka_protocol::records::Compression;
use strait_wire::frame::ProduceBody;
use strait_wire::{ForwardHeader, ForwardedBatch, RawBatch};
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::backoff::Backoff;
use crate::cluster::{BrokerId, Client, Metadata, TopicPartition};
use crate::error::{check, Context, Error, Result};
use crate::groups::OffsetToCommit;

mod dispatch;
mod distance;
mod transaction;

use dispatch::Dispatch;
pub use distance::FAR_ROUND_TRIP;

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
    /// `transactional.id`: with one, the producer is transactional and fences every earlier
    /// producer of the same id; without (the default), it is idempotent only.
    pub transactional_id: Option<String>,
    /// `transaction.timeout.ms` (default 60 s): the coordinator aborts a transaction left open
    /// longer than this.
    pub transaction_timeout: Duration,
    /// A group member's lease ([`crate::lease`]): with one, every request that writes
    /// (Produce, and a transactional producer's InitProducerId, AddPartitionsToTxn,
    /// AddOffsetsToTxn, TxnOffsetCommit, EndTxn) is sent only while the lease holds, else it
    /// fails with [`Error::LeaseLapsed`] unsent.
    pub lease: Option<crate::lease::Lease>,
    /// Whether consecutive batches of a partition are merged into one before they are sent
    /// ([`Merge`]); [`Merge::never`] by default.
    pub merge: Merge,
}

/// When the producer merges a partition's consecutive batches into one (`strait_wire::merge`):
/// a Produce request carries one batch per partition and at most five are in flight per
/// partition, so across a long round trip small batches bound a partition's rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Merge {
    /// When to merge.
    pub mode: MergeMode,
    /// The merged batch's size at most, in bytes (batches that would merge into a larger one
    /// go in two or more merged batches).
    pub max_bytes: usize,
}

/// When to merge batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MergeMode {
    /// Never: every batch goes as it came.
    #[default]
    Never,
    /// When the window bounds the partition: it has more batches waiting than free slots in
    /// its window, and its leader is far ([`FAR_ROUND_TRIP`] or more away, measured apart
    /// from the produce: [`RawProducer::distance`]) or its requests carry the batches of
    /// [`FEW_PARTITIONS`] partitions at most (then the leader's cost per request, not the
    /// bytes, bounds them; not for gzip, whose compression costs more). Near a target that
    /// takes many partitions' batches in each request, batches go as they came, unopened.
    Auto,
    /// Whenever a partition has more than one batch waiting.
    Always,
}

/// A leader to which the producer writes this many partitions or fewer: its requests carry
/// so few batches that its cost per request bounds them, near or far. One partition of 16 KiB
/// batches with the target beside the mirror moved 31.7 MB/s one batch per request (the target
/// broker at 114% of a core) and 212.5 MB/s merged, at less CPU per GB on both sides
/// (`docs/benchmarks.md`, "A far target: merged batches"). With more partitions a request
/// carries a batch of each, the broker's cost per request is shared, and merging near would
/// only add copies (64 partitions: 0.93 core-s/GB unmerged, 1.65 merged).
pub const FEW_PARTITIONS: usize = 4;

impl Merge {
    /// No merging.
    pub fn never() -> Self {
        Self {
            mode: MergeMode::Never,
            max_bytes: 0,
        }
    }
}

impl Default for ProducerConfig {
    fn default() -> Self {
        Self {
            broker_timeout: Duration::from_secs(30),
            delivery_timeout: Duration::from_secs(120),
            max_in_flight_per_partition: 5,
            max_request_size: 1024 * 1024,
            transactional_id: None,
            transaction_timeout: Duration::from_secs(60),
            lease: None,
            merge: Merge::never(),
        }
    }
}

impl ProducerConfig {
    fn transaction_timeout_ms(&self) -> i32 {
        i32::try_from(self.transaction_timeout.as_millis()).unwrap_or(i32::MAX)
    }

    /// `Ok` unless a lease is set and has lapsed: called just before each request that writes.
    pub(crate) fn may_write(&self) -> Result<()> {
        self.lease
            .as_ref()
            .map_or(Ok(()), crate::lease::Lease::check)
    }
}

/// How long one broker may take to list its transactions before the listing goes on without
/// it ([`ongoing_transactions`]).
pub const LIST_TRANSACTIONS_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

/// The transactional ids on `client`'s cluster with a transaction in progress
/// (ListTransactions, KIP-664, asked of every broker at once, each coordinating some ids), of
/// those that `wanted` picks. A broker that has not answered within
/// [`LIST_TRANSACTIONS_PATIENCE`] (or refuses) is left out and said at WARN, so one broker out
/// of reach delays a unit's start by that much, not by the operation timeout per broker; the
/// call fails only when no broker answers.
pub async fn ongoing_transactions(
    client: &Client,
    wanted: impl Fn(&str) -> bool,
) -> Result<Vec<String>> {
    let brokers: Vec<BrokerId> = client.metadata().await?.brokers.keys().copied().collect();
    let request = kafka_protocol::messages::ListTransactionsRequest::default()
        .with_state_filters(vec![kafka_protocol::protocol::StrBytes::from_static_str(
            "Ongoing",
        )])
        .with_duration_filter(-1);
    let asking = brokers.iter().map(|&broker| {
        let request = &request;
        async move {
            let listed = client.retry("list transactions", || async {
                let resp = client.send_to(broker, request).await?;
                check(resp.error_code, None, || Context::None)?;
                Ok(resp)
            });
            let answer = tokio::time::timeout(LIST_TRANSACTIONS_PATIENCE, listed)
                .await
                .unwrap_or_else(|_| {
                    Err(Error::Timeout {
                        broker: format!("broker {broker}"),
                        api: kafka_protocol::messages::ApiKey::ListTransactions,
                        after: LIST_TRANSACTIONS_PATIENCE,
                    })
                });
            (broker, answer)
        }
    });
    let answers = futures::future::join_all(asking).await;
    let mut ids = Vec::new();
    let mut last_error = None;
    let mut answered = false;
    for (broker, answer) in answers {
        match answer {
            Ok(resp) => {
                answered = true;
                ids.extend(
                    resp.transaction_states
                        .into_iter()
                        .map(|t| t.transactional_id.0.to_string())
                        .filter(|id| wanted(id)),
                );
            }
            Err(e) => {
                tracing::warn!(broker = broker.0, error = %e,
                    "cannot list the transactions this broker coordinates; going on without them");
                last_error = Some(e);
            }
        }
    }
    if let (false, Some(e)) = (answered, last_error) {
        return Err(e);
    }
    ids.sort();
    ids.dedup();
    Ok(ids)
}

/// Fences transactional id `id` (InitProducerId without its epoch: the coordinator aborts its
/// open transaction and refuses its earlier producers from then on), under `config`'s lease.
/// For an id no unit owns any more, such as a unit of an earlier `tasks.max`.
pub async fn fence(client: &Client, id: &str, config: &ProducerConfig) -> Result<()> {
    config.may_write()?;
    transaction::init(client, id, config.transaction_timeout_ms(), None).await?;
    Ok(())
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
    /// Whether the batch went merged with others of its partition into one (`Merge`).
    pub merged: bool,
    /// Whether the batch was first sent merged into a batch the target refused as too large,
    /// and so went again in a smaller one, alone or merged with fewer (`Merge`).
    pub split: bool,
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
    /// Which of the call's batches it carries: one, or several merged.
    carries: Carries,
    tp: TopicPartition,
    bytes: ForwardedBatch,
    sequence: i32,
    record_count: i32,
    state: Arc<PartitionState>,
    /// Its in-flight slot. Only the first part of a split batch inherits one; the others take
    /// theirs before they are sent ([`Dispatch::permit_for`]).
    permit: Option<OwnedSemaphorePermit>,
    /// Part of a merged batch the target refused as too large ([`Dispatch::split`]).
    split: bool,
}

/// The call's batches a sent batch carries.
#[derive(Debug)]
enum Carries {
    One(usize),
    /// Merged: each batch's index in the call and the batch as it came, in order (to split
    /// the merged batch again if the target refuses it as too large).
    Merged(Vec<(usize, RawBatch)>),
}

impl Carries {
    /// Each carried batch's result: an acknowledgement split at the batches' record counts,
    /// or the error for each.
    fn results(&self, result: Result<ProduceAck>) -> Vec<(usize, Result<ProduceAck>)> {
        match (self, result) {
            (Carries::One(index), result) => vec![(*index, result)],
            (Carries::Merged(members), Ok(ack)) => {
                let mut base = ack.base_offset;
                members
                    .iter()
                    .map(|(index, batch)| {
                        let count = batch.header.record_count;
                        let one = ProduceAck {
                            base_offset: base,
                            record_count: count,
                            merged: true,
                            ..ack
                        };
                        base += i64::from(count);
                        (*index, Ok(one))
                    })
                    .collect()
            }
            (Carries::Merged(members), Err(e)) => members
                .iter()
                .map(|&(index, _)| (index, Err(e.clone())))
                .collect(),
        }
    }
}

enum Outcome {
    Done(ProduceAck),
    Retry(Error),
    Fail(Error),
}

/// The idempotent raw producer for one target cluster.
#[derive(Debug)]
pub struct RawProducer {
    client: Client,
    config: ProducerConfig,
    producer_id: i64,
    producer_epoch: i16,
    partitions: StdMutex<HashMap<TopicPartition, Arc<PartitionState>>>,
    /// A transactional producer's partitions in its open transaction.
    in_transaction: StdMutex<BTreeSet<TopicPartition>>,
    /// The groups whose offsets are in its open transaction.
    groups_in_transaction: StdMutex<BTreeSet<String>>,
    /// How far each leader is (for [`MergeMode::Auto`]).
    distances: distance::Distances,
    /// Partitions whose target refused a merged batch as too large (its topic's
    /// `max.message.bytes` is below it): their merged batches stay within half the size
    /// refused from then on (kept across epochs).
    merge_caps: StdMutex<HashMap<TopicPartition, usize>>,
}

impl RawProducer {
    /// Gets a producer id from the cluster: InitProducerId without a transactional id, or, with
    /// one, at the id's transaction coordinator, which fences every earlier producer of the id
    /// and aborts the transaction it left open.
    pub async fn new(client: Client, config: ProducerConfig) -> Result<Self> {
        if config.max_in_flight_per_partition == 0 || config.max_in_flight_per_partition > 5 {
            return Err(Error::Invalid(format!(
                "max in flight per partition is {}; an idempotent producer needs 1..=5",
                config.max_in_flight_per_partition
            )));
        }
        if let Some(id) = &config.transactional_id {
            // Initialising the id fences its owner: only under a lease that holds.
            config.may_write()?;
            let session =
                transaction::init(&client, id, config.transaction_timeout_ms(), None).await?;
            tracing::info!(
                transactional_id = %id,
                producer_id = session.producer_id,
                epoch = session.producer_epoch,
                "transactional producer ready; earlier producers of its id are fenced"
            );
            return Ok(Self::with_session(client, config, session));
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
        let session = transaction::Session {
            producer_id: resp.producer_id.0,
            producer_epoch: resp.producer_epoch,
        };
        Ok(Self::with_session(client, config, session))
    }

    fn with_session(client: Client, config: ProducerConfig, session: transaction::Session) -> Self {
        Self {
            distances: distance::Distances::new(client.clone()),
            client,
            config,
            producer_id: session.producer_id,
            producer_epoch: session.producer_epoch,
            partitions: StdMutex::new(HashMap::new()),
            in_transaction: StdMutex::new(BTreeSet::new()),
            groups_in_transaction: StdMutex::new(BTreeSet::new()),
            merge_caps: StdMutex::new(HashMap::new()),
        }
    }

    fn session(&self) -> transaction::Session {
        transaction::Session {
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
        }
    }

    /// Starts a new epoch of the same producer id, every partition's sequence back to 0, so
    /// that partitions whose sequence has a hole (a batch failed for good, or its fate is
    /// unknown) can be written again. Call it only when no batch is in flight (no `send_all`
    /// running). At the last epoch, a new producer id is taken instead.
    ///
    /// A transactional producer asks its coordinator for the bump (KIP-360), which aborts its
    /// open transaction; a producer that was fenced meanwhile gets PRODUCER_FENCED instead
    /// ([`Error::is_fenced`]) and stays fenced.
    pub async fn bump_epoch(&mut self) -> Result<()> {
        if let Some(id) = &self.config.transactional_id {
            self.config.may_write()?;
            let timeout = self.config.transaction_timeout_ms();
            let session =
                transaction::init(&self.client, id, timeout, Some(self.session())).await?;
            self.producer_id = session.producer_id;
            self.producer_epoch = session.producer_epoch;
            self.partitions.lock().map_err(|_| Error::Closed)?.clear();
            self.in_transaction
                .lock()
                .map_err(|_| Error::Closed)?
                .clear();
            self.groups_in_transaction
                .lock()
                .map_err(|_| Error::Closed)?
                .clear();
            tracing::info!(
                transactional_id = %id,
                producer_id = self.producer_id,
                epoch = self.producer_epoch,
                "transactional producer epoch bumped; its open transaction was aborted"
            );
            return Ok(());
        }
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

    /// Writes batches, in order per partition, and returns one result per batch, in the order
    /// given.
    ///
    /// Sequences are given out in call order, so batches of one partition must be handed to the
    /// producer in the order they should land, by one caller at a time per partition. Each
    /// partition keeps up to `max_in_flight_per_partition` requests in flight all the time: as
    /// soon as one of its requests is answered, its next batch goes. A request to a broker
    /// carries the next batch of every partition that broker leads and that has a free slot,
    /// within `max_request_size`.
    ///
    /// Returns within the delivery timeout (plus a backoff's rounding), however many batches:
    /// as Kafka's `delivery.timeout.ms`, it counts from the call, and a batch not acknowledged
    /// by then, in flight or not yet sent, is an [`Error::DeliveryTimeout`]. A batch that fails
    /// for good leaves a hole in its partition's sequence: the partition's later batches are not
    /// sent and fail too.
    ///
    /// A transactional producer first adds the partitions that are not in its open transaction
    /// yet; if that fails, every batch fails with its error.
    pub async fn send_all(
        &self,
        batches: Vec<(TopicPartition, RawBatch)>,
    ) -> Vec<Result<ProduceAck>> {
        if let Err(e) = self.join_transaction(&batches).await {
            return batches.iter().map(|_| Err(e.clone())).collect();
        }
        let deadline = Instant::now() + self.config.delivery_timeout;
        let mut dispatch = Dispatch::new(self, batches, deadline);
        dispatch.run().await;
        dispatch
            .results
            .into_iter()
            .map(|r| r.unwrap_or(Err(Error::Closed)))
            .collect()
    }

    /// Adds to the open transaction the partitions of `batches` that are not in it yet (a
    /// transactional producer only).
    async fn join_transaction(&self, batches: &[(TopicPartition, RawBatch)]) -> Result<()> {
        let Some(id) = &self.config.transactional_id else {
            return Ok(());
        };
        let missing: Vec<TopicPartition> = {
            let joined = self.in_transaction.lock().map_err(|_| Error::Closed)?;
            let missing: BTreeSet<&TopicPartition> = batches
                .iter()
                .map(|(tp, _)| tp)
                .filter(|tp| !joined.contains(*tp))
                .collect();
            missing.into_iter().cloned().collect()
        };
        if missing.is_empty() {
            return Ok(());
        }
        self.config.may_write()?;
        transaction::add_partitions(&self.client, id, self.session(), &missing).await?;
        self.in_transaction
            .lock()
            .map_err(|_| Error::Closed)?
            .extend(missing);
        Ok(())
    }

    /// Puts `offsets` of `group` (a group with no active members) into the open transaction,
    /// starting one if none is open: they are committed to the group when the transaction is,
    /// and a producer fenced meanwhile gets them refused ([`Error::is_fenced`]). A
    /// transactional producer only.
    pub async fn send_offsets(&self, group: &str, offsets: &[OffsetToCommit]) -> Result<()> {
        let Some(id) = &self.config.transactional_id else {
            return Err(Error::Invalid(
                "the producer has no transactional id, so no transaction to put offsets in".into(),
            ));
        };
        let joined = self
            .groups_in_transaction
            .lock()
            .map_err(|_| Error::Closed)?
            .contains(group);
        self.config.may_write()?;
        if !joined {
            transaction::add_offsets(&self.client, id, self.session(), group).await?;
            self.groups_in_transaction
                .lock()
                .map_err(|_| Error::Closed)?
                .insert(group.to_owned());
        }
        transaction::commit_offsets(&self.client, id, self.session(), group, offsets).await
    }

    /// Commits the open transaction: its batches become visible to `read_committed` readers
    /// at once. Call it when every `send_all` of the transaction has returned with success.
    /// Without an open transaction (no batch sent since the last end) there is nothing to do.
    /// An error other than fencing leaves the outcome unknown: abort, or bump the epoch.
    pub async fn commit(&self) -> Result<()> {
        self.end_transaction(true).await
    }

    /// Aborts the open transaction: `read_committed` readers never see its batches.
    pub async fn abort(&self) -> Result<()> {
        self.end_transaction(false).await
    }

    async fn end_transaction(&self, commit: bool) -> Result<()> {
        let Some(id) = &self.config.transactional_id else {
            return Err(Error::Invalid(
                "the producer has no transactional id, so no transaction to end".into(),
            ));
        };
        let open = !self
            .in_transaction
            .lock()
            .map_err(|_| Error::Closed)?
            .is_empty()
            || !self
                .groups_in_transaction
                .lock()
                .map_err(|_| Error::Closed)?
                .is_empty();
        if !open {
            return Ok(());
        }
        if commit {
            self.config.may_write()?;
        }
        transaction::end(&self.client, id, self.session(), commit).await?;
        self.in_transaction
            .lock()
            .map_err(|_| Error::Closed)?
            .clear();
        self.groups_in_transaction
            .lock()
            .map_err(|_| Error::Closed)?
            .clear();
        Ok(())
    }

    fn delivery_timeout(&self, tp: &TopicPartition) -> Error {
        Error::DeliveryTimeout {
            context: tp.context(),
            after: self.config.delivery_timeout,
        }
    }

    /// Gives the batch its sequence and rewrites its header; on failure, the error and what
    /// the batch carried.
    fn prepare(
        &self,
        carries: Carries,
        tp: &TopicPartition,
        batch: &RawBatch,
        state: &Arc<PartitionState>,
        permit: OwnedSemaphorePermit,
    ) -> std::result::Result<Pending, (Carries, Error)> {
        let record_count = batch.header.record_count;
        let Ok(mut seq) = state.seq.lock() else {
            return Err((carries, Error::Closed));
        };
        if let Some(e) = &seq.broken {
            let e = Error::Invalid(format!(
                "{tp}: an earlier batch failed ({e}), so its sequence has a hole; \
                 make a new producer and resume from the last written offset"
            ));
            return Err((carries, e));
        }
        let sequence = seq.next;
        let bytes = match strait_wire::forward(batch, &self.forward_header(sequence)) {
            Ok(bytes) => bytes,
            Err(e) => {
                let e = Error::Invalid(format!("{tp}: cannot forward batch: {e}"));
                return Err((carries, e));
            }
        };
        seq.next = increment_sequence(sequence, record_count);
        seq.unresolved.push_back(sequence);
        drop(seq);
        Ok(Pending {
            carries,
            tp: tp.clone(),
            bytes,
            sequence,
            record_count,
            state: Arc::clone(state),
            permit: Some(permit),
            split: false,
        })
    }

    /// The header of our batch at `sequence`, for `strait_wire::forward`.
    fn forward_header(&self, sequence: i32) -> ForwardHeader {
        ForwardHeader {
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            base_sequence: sequence,
            transactional: self.config.transactional_id.is_some(),
        }
    }

    /// The most bytes to merge into `tp`'s next batch, `next`, if its batches are to be merged
    /// now: `waiting` batches wait (the next one included), its window has `free` slots, and
    /// the call writes `partitions` partitions to its leader.
    fn merge_limit(
        &self,
        tp: &TopicPartition,
        next: &RawBatch,
        leader: BrokerId,
        waiting: usize,
        free: usize,
        partitions: usize,
    ) -> Option<usize> {
        let merge = self.config.merge;
        let wanted = match merge.mode {
            MergeMode::Never => false,
            MergeMode::Always => waiting > 1,
            MergeMode::Auto => {
                // gzip compresses again at a tenth of lz4's speed: near the target that costs
                // more than the requests it saves.
                let gzip = next.header.attributes.compression() == Some(Compression::Gzip);
                waiting > free.max(1)
                    && ((partitions <= FEW_PARTITIONS && !gzip) || self.distances.is_far(leader))
            }
        };
        if !wanted {
            return None;
        }
        let caps = self.merge_caps.lock().ok()?;
        Some(
            caps.get(tp)
                .map_or(merge.max_bytes, |cap| merge.max_bytes.min(*cap)),
        )
    }

    /// The round trip to `leader` as last measured for [`MergeMode::Auto`] (an ApiVersions on
    /// a connection of its own, every 10 s), or `None` until it answered once; asks for a
    /// measure when one is due.
    pub fn distance(&self, leader: BrokerId) -> Option<Duration> {
        self.distances.round_trip(leader)
    }

    /// One Produce request: one batch per partition, its bytes shared with the parts.
    fn produce_request<'p>(
        &self,
        parts: impl Iterator<Item = (&'p TopicPartition, &'p ForwardedBatch)>,
    ) -> ProduceBody {
        let mut by_topic: BTreeMap<&str, Vec<(i32, ForwardedBatch)>> = BTreeMap::new();
        for (tp, batch) in parts {
            by_topic
                .entry(&tp.topic)
                .or_default()
                .push((tp.partition, batch.clone()));
        }
        ProduceBody {
            transactional_id: self.config.transactional_id.clone(),
            acks: -1,
            timeout_ms: self.config.broker_timeout.as_millis().min(i32::MAX as u128) as i32,
            topics: by_topic
                .into_iter()
                .map(|(t, ps)| (t.to_owned(), ps))
                .collect(),
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
