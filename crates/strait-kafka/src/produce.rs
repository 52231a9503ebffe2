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

mod distance;
mod transaction;

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
            merged: false,
            split: p.split,
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

/// Gives each batch `carries` its result.
fn deliver(
    results: &mut [Option<Result<ProduceAck>>],
    carries: &Carries,
    result: Result<ProduceAck>,
) {
    for (index, result) in carries.results(result) {
        if let Some(r) = results.get_mut(index) {
            *r = Some(result);
        }
    }
}

/// Waits, in the background, for one of the partition's in-flight permits when another caller
/// holds them all (our own answers will not free any while none of ours is in flight).
fn await_permit(
    lane: &mut Lane,
    permits: &mut FuturesUnordered<BoxFuture<'static, (usize, Option<OwnedSemaphorePermit>)>>,
    index: usize,
) {
    if lane.in_flight == 0 && !lane.awaiting_permit {
        lane.awaiting_permit = true;
        let semaphore = Arc::clone(&lane.state.permits);
        permits.push(Box::pin(async move {
            (index, semaphore.acquire_owned().await.ok())
        }));
    }
}

/// Half of a refused merged batch's members as batches to send: merged again, or the one
/// batch as it came (each as it came if they do not merge after all).
fn merge_again(members: &[(usize, RawBatch)]) -> Vec<(Carries, RawBatch)> {
    if let [(index, batch)] = members {
        return vec![(Carries::One(*index), batch.clone())];
    }
    let batches: Vec<RawBatch> = members.iter().map(|(_, b)| b.clone()).collect();
    let limit = strait_wire::records::DecompressLimit::default();
    match strait_wire::merge::merge(&batches, &limit) {
        Ok(merged) => vec![(Carries::Merged(members.to_vec()), merged)],
        Err(_) => members
            .iter()
            .map(|(index, batch)| (Carries::One(*index), batch.clone()))
            .collect(),
    }
}

/// How many of the call's batches `carries` carries.
fn members_of(carries: &Carries) -> usize {
    match carries {
        Carries::One(_) => 1,
        Carries::Merged(members) => members.len(),
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

/// A batch in a request: its lane (whose partition it goes to), its sequence, and the bytes
/// to send.
struct Part {
    lane: usize,
    sequence: i32,
    bytes: ForwardedBatch,
}

/// What came back for a request: the broker it went to, the batches it carried (lane and
/// sequence), and the answer.
type Answer = (BrokerId, Vec<(usize, i32)>, Result<ProduceResponse>);

/// A prepared batch: its sequence given and its header rewritten, until it is answered for
/// good. Its rewritten copy and its in-flight permit go with it.
struct Slot {
    pending: Pending,
    /// In a request not answered yet.
    sent: bool,
}

/// After a retriable failure a partition sends nothing more until its requests in flight are
/// answered, the backoff has passed and, if the failure was about routing, the metadata was
/// refreshed; then it sends again from its first unacknowledged batch, in order.
struct Hold {
    not_before: Instant,
    /// The number of metadata refreshes that must have finished (one started after the
    /// failure).
    refreshes: Option<u64>,
}

/// One partition's share of a `send_all` call.
struct Lane {
    tp: TopicPartition,
    state: Arc<PartitionState>,
    /// Batches not prepared yet, in call order (their index in the call).
    queue: VecDeque<(usize, RawBatch)>,
    /// Prepared batches, in sequence order: those sent come first, then those to (re)send.
    window: VecDeque<Slot>,
    /// Slots of `window` in a request not answered yet.
    in_flight: usize,
    hold: Option<Hold>,
    backoff: Backoff,
    /// Whether the partition's leader was unknown before (a first miss waits only for a
    /// metadata refresh, later ones back off too).
    missed_leader: bool,
    /// An in-flight permit that was waited for (another caller held them all), not used yet.
    spare: Option<OwnedSemaphorePermit>,
    awaiting_permit: bool,
}

impl Lane {
    fn is_done(&self) -> bool {
        self.queue.is_empty() && self.window.is_empty()
    }

    /// Takes the next batch from the queue, with the ones behind it that may follow it merged
    /// into it while the merged batch stays within `merge` bytes (no merging without a limit):
    /// as many as their own sizes allow, then half as many until the merged batch (whose record
    /// framing or compression may come out larger) fits. Batches that cannot be merged after
    /// all (their records do not decode) go as they came.
    fn take_next(&mut self, merge: Option<usize>) -> Option<(Carries, RawBatch)> {
        let (first_index, first) = self.queue.pop_front()?;
        let Some(max_bytes) = merge else {
            return Some((Carries::One(first_index), first));
        };
        let mut size = first.bytes.len();
        let mut members = vec![(first_index, first)];
        while let Some((_, next)) = self.queue.front() {
            let last = members.last().map(|(_, b)| &b.header);
            if !last.is_some_and(|l| strait_wire::merge::may_follow(l, &next.header))
                || size.saturating_add(next.bytes.len()) > max_bytes
            {
                break;
            }
            size += next.bytes.len();
            members.extend(self.queue.pop_front());
        }
        while members.len() > 1 {
            let batches: Vec<RawBatch> = members.iter().map(|(_, b)| b.clone()).collect();
            let limit = strait_wire::records::DecompressLimit::default();
            match strait_wire::merge::merge(&batches, &limit) {
                Ok(merged) if merged.bytes.len() <= max_bytes => {
                    return Some((Carries::Merged(members), merged));
                }
                Ok(_) => {
                    let keep = members.len() / 2;
                    for member in members.drain(keep..).rev() {
                        self.queue.push_front(member);
                    }
                }
                Err(e) => {
                    tracing::debug!(
                        partition = %self.tp,
                        error = %e,
                        "batches not merged; they go as they came"
                    );
                    for member in members.drain(1..).rev() {
                        self.queue.push_front(member);
                    }
                }
            }
        }
        let (index, batch) = members.pop()?;
        Some((Carries::One(index), batch))
    }

    /// The error that left a hole in the partition's sequence, if one did.
    fn hole(&self) -> Option<Error> {
        self.state.seq.lock().ok().and_then(|s| s.broken.clone())
    }

    fn acknowledged(&self) -> bool {
        self.state
            .seq
            .lock()
            .map(|s| s.acknowledged)
            .unwrap_or(false)
    }
}

enum Event {
    Deadline,
    Answer(Answer),
    Permit(usize, Option<OwnedSemaphorePermit>),
    Refreshed,
    Wake,
}

/// One `send_all` call: per partition a sliding window of up to `max_in_flight_per_partition`
/// requests in flight, refilled as soon as one of them is answered.
///
/// Each time something happens (an answer, the end of a backoff or of a metadata refresh, a
/// permit freed by another caller) it [`pumps`](Dispatch::pump): in rounds, every partition
/// that may send gives its next batch (first those to send again after a retriable failure,
/// then a newly prepared one while its window has room), and the batches of a round go to
/// their leaders, one request per leader (several when they exceed `max_request_size`), as
/// Kafka's Java producer drains the ready batches of each node. A partition's batches are
/// prepared (sequence, rewritten header) only when they are about to be sent.
///
/// Requests to one broker are submitted to its connection strictly in the order they were
/// made (each waits until the one before it is written), and Kafka handles a connection's
/// requests in order: a partition's batches reach its leader in sequence order.
struct Dispatch<'a> {
    producer: &'a RawProducer,
    deadline: Instant,
    results: Vec<Option<Result<ProduceAck>>>,
    lanes: Vec<Lane>,
    requests: FuturesUnordered<BoxFuture<'a, Answer>>,
    /// Per broker, dropped once the last request made for it has been submitted.
    submitted: HashMap<BrokerId, oneshot::Receiver<()>>,
    permits: FuturesUnordered<BoxFuture<'static, (usize, Option<OwnedSemaphorePermit>)>>,
    refresh: Option<BoxFuture<'a, ()>>,
    refreshes_started: u64,
    refreshes_done: u64,
    refresh_wanted: bool,
    /// Per leader, how many partitions the producer writes to it (`MergeMode::Auto` only;
    /// counted at the first pump).
    partitions_per_leader: HashMap<BrokerId, usize>,
}

impl<'a> Dispatch<'a> {
    fn new(
        producer: &'a RawProducer,
        batches: Vec<(TopicPartition, RawBatch)>,
        deadline: Instant,
    ) -> Self {
        let mut results: Vec<Option<Result<ProduceAck>>> = batches.iter().map(|_| None).collect();
        let mut by_partition: BTreeMap<TopicPartition, VecDeque<(usize, RawBatch)>> =
            BTreeMap::new();
        for (index, (tp, batch)) in batches.into_iter().enumerate() {
            by_partition
                .entry(tp)
                .or_default()
                .push_back((index, batch));
        }
        let client = producer.client.config();
        let mut lanes = Vec::with_capacity(by_partition.len());
        for (tp, queue) in by_partition {
            match producer.partition(&tp) {
                Ok(state) => lanes.push(Lane {
                    tp,
                    state,
                    queue,
                    window: VecDeque::new(),
                    in_flight: 0,
                    hold: None,
                    backoff: Backoff::new(client.retry_backoff, client.retry_backoff_max),
                    missed_leader: false,
                    spare: None,
                    awaiting_permit: false,
                }),
                Err(e) => {
                    for (index, _) in queue {
                        results[index] = Some(Err(e.clone()));
                    }
                }
            }
        }
        Self {
            producer,
            deadline,
            results,
            lanes,
            requests: FuturesUnordered::new(),
            submitted: HashMap::new(),
            permits: FuturesUnordered::new(),
            refresh: None,
            refreshes_started: 0,
            refreshes_done: 0,
            refresh_wanted: false,
            partitions_per_leader: HashMap::new(),
        }
    }

    /// Until every batch has a result, or the deadline: then what is left (in flight or not
    /// yet sent) is a delivery timeout, and requests still in flight are abandoned.
    async fn run(&mut self) {
        loop {
            // (A ready answer is taken before the deadline is looked at, hence this test.)
            if Instant::now() >= self.deadline {
                self.time_out();
                return;
            }
            self.pump();
            if self.lanes.iter().all(Lane::is_done) {
                return;
            }
            match self.next_event().await {
                Event::Deadline => {
                    self.time_out();
                    return;
                }
                Event::Answer(answer) => {
                    self.on_answer(answer);
                    // Everything answered meanwhile too, so the next requests carry as many
                    // partitions as are ready.
                    while let Some(Some(answer)) = self.requests.next().now_or_never() {
                        self.on_answer(answer);
                    }
                }
                Event::Permit(lane, permit) => {
                    let lane = &mut self.lanes[lane];
                    lane.awaiting_permit = false;
                    lane.spare = permit;
                }
                Event::Refreshed => {
                    self.refresh = None;
                    self.refreshes_done = self.refreshes_started;
                }
                Event::Wake => {}
            }
        }
    }

    async fn next_event(&mut self) -> Event {
        let now = Instant::now();
        let wake = self
            .lanes
            .iter()
            .filter(|l| l.in_flight == 0)
            .filter_map(|l| l.hold.as_ref().map(|h| h.not_before))
            .filter(|at| *at > now)
            .min();
        let deadline = self.deadline;
        let (requests, permits, refresh) =
            (&mut self.requests, &mut self.permits, &mut self.refresh);
        let (any_request, any_permit, refreshing) =
            (!requests.is_empty(), !permits.is_empty(), refresh.is_some());
        tokio::select! {
            biased;
            Some(answer) = requests.next(), if any_request => Event::Answer(answer),
            Some((lane, permit)) = permits.next(), if any_permit => Event::Permit(lane, permit),
            () = async { if let Some(r) = refresh.as_mut() { r.await } }, if refreshing => {
                Event::Refreshed
            }
            () = tokio::time::sleep_until(wake.unwrap_or(deadline)), if wake.is_some() => {
                Event::Wake
            }
            () = tokio::time::sleep_until(deadline) => Event::Deadline,
        }
    }

    /// Sends what may be sent now, in rounds of at most one batch per partition.
    fn pump(&mut self) {
        let now = Instant::now();
        for lane in &mut self.lanes {
            if let Some(hold) = &lane.hold {
                let refreshed = hold.refreshes.is_none_or(|r| self.refreshes_done >= r);
                if lane.in_flight == 0 && now >= hold.not_before && refreshed {
                    lane.hold = None;
                }
            }
        }
        let metadata = self.producer.client.cached_metadata();
        self.count_partitions_per_leader(&metadata);
        let limit = self.producer.config.max_request_size.max(1);
        loop {
            let mut round: BTreeMap<BrokerId, Vec<Part>> = BTreeMap::new();
            for lane in 0..self.lanes.len() {
                if let Some((leader, part)) = self.next_part(lane, &metadata, now) {
                    round.entry(leader).or_default().push(part);
                }
            }
            if round.is_empty() {
                break;
            }
            // Each request within `max.request.size` (at least one batch): a round larger
            // than that goes as several requests, in order.
            for (leader, parts) in round {
                let mut chunk = Vec::new();
                let mut size = 0;
                for part in parts {
                    if !chunk.is_empty() && size + part.bytes.len() > limit {
                        self.request(leader, std::mem::take(&mut chunk));
                        size = 0;
                    }
                    size += part.bytes.len();
                    chunk.push(part);
                }
                self.request(leader, chunk);
            }
        }
        if self.refresh_wanted && self.refresh.is_none() {
            self.refresh_wanted = false;
            self.refreshes_started += 1;
            let (client, deadline) = (&self.producer.client, self.deadline);
            self.refresh = Some(Box::pin(async move {
                match tokio::time::timeout_at(deadline, client.refresh_metadata()).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => tracing::debug!(error = %e, "metadata refresh failed"),
                    Err(_) => tracing::debug!("metadata refresh cut by the delivery timeout"),
                }
            }));
        }
    }

    /// Counts, per leader, the partitions it leads that this producer writes (those of earlier
    /// calls too), for [`MergeMode::Auto`] ([`FEW_PARTITIONS`]); once per call. A flow of many
    /// partitions whose last few still have data (the others caught up, or a call of few) is
    /// no reason to merge near the target: merging there cost 30% more CPU per GB
    /// (`bench/cpu-per-gb`, 64 partitions).
    fn count_partitions_per_leader(&mut self, metadata: &Metadata) {
        if self.producer.config.merge.mode != MergeMode::Auto
            || !self.partitions_per_leader.is_empty()
        {
            return;
        }
        let Ok(partitions) = self.producer.partitions.lock() else {
            return;
        };
        for tp in partitions.keys() {
            if let Some(leader) = metadata.leader(tp) {
                *self.partitions_per_leader.entry(leader).or_default() += 1;
            }
        }
    }

    /// The partition's next batch to send, and its leader, if it may send one now: it is not
    /// held after a failure, has a free slot, and (until a batch of this epoch is acknowledged)
    /// nothing in flight.
    fn next_part(
        &mut self,
        index: usize,
        metadata: &Metadata,
        now: Instant,
    ) -> Option<(BrokerId, Part)> {
        let limit = self.producer.config.max_in_flight_per_partition;
        let lane = &self.lanes[index];
        if lane.hold.is_some() || lane.is_done() {
            return None;
        }
        // Until a batch of this epoch is acknowledged, only the first goes.
        let acknowledged = lane.acknowledged();
        if !acknowledged && lane.in_flight > 0 {
            return None;
        }
        let resend = lane.window.iter().position(|s| !s.sent);
        if resend.is_none() && (lane.queue.is_empty() || lane.window.len() >= limit) {
            return None;
        }
        let Some(leader) = metadata.leader(&lane.tp) else {
            self.leader_unknown(index, metadata, now);
            return None;
        };
        let position = match resend {
            Some(position) if self.permit_for(index, position) => position,
            Some(_) => return None,
            None => self.prepare_next(index, leader)?,
        };
        let lane = &mut self.lanes[index];
        let slot = &mut lane.window[position];
        slot.sent = true;
        lane.in_flight += 1;
        Some((
            leader,
            Part {
                lane: index,
                sequence: slot.pending.sequence,
                bytes: slot.pending.bytes.clone(),
            },
        ))
    }

    /// Prepares the partition's next batch into its window, if an in-flight permit is free;
    /// returns its position there. The batches waiting behind it are merged into it when the
    /// producer merges now ([`RawProducer::merge_limit`]).
    fn prepare_next(&mut self, index: usize, leader: BrokerId) -> Option<usize> {
        let producer = self.producer;
        let window = producer.config.max_in_flight_per_partition;
        let partitions = self
            .partitions_per_leader
            .get(&leader)
            .copied()
            .unwrap_or(usize::MAX);
        let lane = &mut self.lanes[index];
        loop {
            let free = lane
                .spare
                .take()
                .or_else(|| Arc::clone(&lane.state.permits).try_acquire_owned().ok());
            // Slots are taken one at a time and never waited for while this call holds some
            // of the partition's (its own answers free them), so concurrent callers cannot
            // hold each other's slots.
            let Some(permit) = free else {
                await_permit(lane, &mut self.permits, index);
                return None;
            };
            let free = window.saturating_sub(lane.window.len());
            let (_, next) = lane.queue.front()?;
            let merge =
                producer.merge_limit(&lane.tp, next, leader, lane.queue.len(), free, partitions);
            let (carries, batch) = lane.take_next(merge)?;
            match producer.prepare(carries, &lane.tp, &batch, &lane.state, permit) {
                Ok(pending) => {
                    lane.window.push_back(Slot {
                        pending,
                        sent: false,
                    });
                    return Some(lane.window.len() - 1);
                }
                Err((carries, e)) => {
                    deliver(&mut self.results, &carries, Err(e));
                    if lane.queue.is_empty() {
                        return None;
                    }
                }
            }
        }
    }

    /// Whether the slot at `position` of the partition's window holds an in-flight permit, as a
    /// batch must to be sent: the part of a split batch takes a free one, or one from a slot
    /// behind it that is not sent (it cannot go before this one anyway).
    fn permit_for(&mut self, index: usize, position: usize) -> bool {
        let lane = &mut self.lanes[index];
        if lane.window[position].pending.permit.is_some() {
            return true;
        }
        let permit = lane
            .spare
            .take()
            .or_else(|| Arc::clone(&lane.state.permits).try_acquire_owned().ok())
            .or_else(|| {
                lane.window
                    .iter_mut()
                    .skip(position + 1)
                    .rev()
                    .filter(|s| !s.sent)
                    .find_map(|s| s.pending.permit.take())
            });
        match permit {
            Some(permit) => {
                lane.window[position].pending.permit = Some(permit);
                true
            }
            None => {
                await_permit(lane, &mut self.permits, index);
                false
            }
        }
    }

    /// Splits the merged batch at `position` of the partition's window, which the target
    /// refused as too large (its topic's `max.message.bytes` is below it, which the producer
    /// cannot know), into two halves in its place, each merged again (or one batch as it came),
    /// to be sent at once. The halves take the refused batch's sequence range in order, as
    /// Kafka's own producer gives the batches it splits after MESSAGE_TOO_LARGE: nothing of
    /// the range was written, so the partition's sequence has no hole, and its batches sent
    /// behind the refused one come back OUT_OF_ORDER_SEQUENCE_NUMBER and are sent again after
    /// the halves. From then on the partition's merged batches stay within half the size
    /// refused. Returns false, leaving the window as it was, if the batch was not merged or
    /// cannot be split.
    fn split(&mut self, index: usize, position: usize, refusal: &Error) -> bool {
        let producer = self.producer;
        let lane = &mut self.lanes[index];
        let Some(slot) = lane.window.get(position) else {
            return false;
        };
        let Carries::Merged(members) = &slot.pending.carries else {
            return false;
        };
        let (front, back) = members.split_at(members.len() / 2);
        let mut parts = Vec::with_capacity(2);
        let mut sequence = slot.pending.sequence;
        for (carries, batch) in [front, back].into_iter().flat_map(merge_again) {
            let Ok(bytes) = strait_wire::forward(&batch, &producer.forward_header(sequence)) else {
                return false;
            };
            let record_count = batch.header.record_count;
            parts.push(Pending {
                carries,
                tp: lane.tp.clone(),
                bytes,
                sequence,
                record_count,
                state: Arc::clone(&lane.state),
                permit: None,
                split: true,
            });
            sequence = increment_sequence(sequence, record_count);
        }
        let Some(mut refused) = lane.window.remove(position) else {
            return false;
        };
        let refused_bytes = refused.pending.bytes.len();
        let cap = refused_bytes / 2;
        if let Ok(mut caps) = producer.merge_caps.lock() {
            let was = caps.entry(lane.tp.clone()).or_insert(cap);
            *was = cap.min(*was);
        }
        tracing::info!(
            partition = %lane.tp,
            bytes = refused_bytes,
            batches = members_of(&refused.pending.carries),
            parts = parts.len(),
            error = %refusal,
            "the target refused a merged batch as too large; it goes again split, and this \
             partition's merged batches stay within {cap} bytes from now on"
        );
        if let Some(first) = parts.first_mut() {
            first.permit = refused.pending.permit.take();
        }
        // The parts' sequences take the refused batch's place among those unresolved (the
        // first part keeps its sequence).
        if let Ok(mut seq) = lane.state.seq.lock() {
            if let Some(at) = seq
                .unresolved
                .iter()
                .position(|s| *s == refused.pending.sequence)
            {
                for (k, part) in parts.iter().enumerate().skip(1) {
                    seq.unresolved.insert(at + k, part.sequence);
                }
            }
        }
        for (k, pending) in parts.into_iter().enumerate() {
            lane.window.insert(
                position + k,
                Slot {
                    pending,
                    sent: false,
                },
            );
        }
        true
    }

    /// The partition's leader is not in the metadata: it waits for a refresh (and, after the
    /// first miss, a backoff), as after a retriable error.
    fn leader_unknown(&mut self, index: usize, metadata: &Metadata, now: Instant) {
        let refreshes = self.want_refresh();
        let lane = &mut self.lanes[index];
        let known = metadata
            .topics
            .get(&lane.tp.topic)
            .is_some_and(|t| t.partitions.contains_key(&lane.tp.partition));
        tracing::debug!(
            partition = %lane.tp,
            known,
            "partition leader unknown; waiting for the metadata"
        );
        let wait = if lane.missed_leader {
            lane.backoff.next_wait()
        } else {
            Duration::ZERO
        };
        lane.missed_leader = true;
        lane.hold = Some(Hold {
            not_before: now + wait,
            refreshes: Some(refreshes),
        });
    }

    /// Asks for a metadata refresh; returns how many must have finished for one to have
    /// started after now.
    fn want_refresh(&mut self) -> u64 {
        self.refresh_wanted = true;
        self.refreshes_started + 1
    }

    /// Makes a request to `leader`, submitted after the one made before it for that broker.
    fn request(&mut self, leader: BrokerId, parts: Vec<Part>) {
        let producer = self.producer;
        let lanes = &self.lanes;
        let request = producer.produce_request(parts.iter().map(|p| (&lanes[p.lane].tp, &p.bytes)));
        let carried: Vec<(usize, i32)> = parts.iter().map(|p| (p.lane, p.sequence)).collect();
        drop(parts);
        let (submitted, now_submitted) = oneshot::channel::<()>();
        let previous = self.submitted.insert(leader, now_submitted);
        self.requests.push(Box::pin(async move {
            if let Some(previous) = previous {
                // Dropped (never sent) once that request is submitted, or failed to be.
                let _ = previous.await;
            }
            // The lease is looked at last, when the request is about to be written: a process
            // stopped and resumed past its session timeout sends nothing.
            let queued = match producer.client.connection(leader).await {
                Ok(conn) => match producer.config.may_write() {
                    Ok(()) => conn.submit_produce(&request).await.map(|s| (conn, s)),
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            };
            drop(submitted);
            drop(request);
            let answer = match queued {
                Ok((conn, submitted)) => conn.answer(submitted).await,
                Err(e) => Err(e),
            };
            (leader, carried, answer)
        }));
    }

    fn on_answer(&mut self, (leader, carried, answer): Answer) {
        match answer {
            Ok(mut response) => {
                // Keyed by names borrowed from the answer: no copy per partition.
                let mut answers: HashMap<_, _, foldhash::fast::RandomState> = HashMap::default();
                for t in &mut response.responses {
                    let topic = t.name.0.as_str();
                    for p in t.partition_responses.drain(..) {
                        answers.insert((topic, p.index), p);
                    }
                }
                // Each batch's outcome first (a request carries one batch per partition, so
                // settling one cannot change another's), then each is settled.
                let lanes = &self.lanes;
                let outcomes: Vec<(usize, i32, Option<Outcome>)> = carried
                    .into_iter()
                    .map(|(index, sequence)| {
                        let lane = &lanes[index];
                        let key = (lane.tp.topic.as_str(), lane.tp.partition);
                        let outcome = lane
                            .window
                            .iter()
                            .find(|s| s.pending.sequence == sequence)
                            .map(|slot| match answers.remove(&key) {
                                None => Outcome::Fail(Error::Unexpected {
                                    broker: leader.to_string(),
                                    what: format!("Produce answer does not mention {}", lane.tp),
                                }),
                                Some(answer) => classify_answer(&slot.pending, answer),
                            });
                        (index, sequence, outcome)
                    })
                    .collect();
                for (index, sequence, outcome) in outcomes {
                    match outcome {
                        Some(outcome) => self.settle(index, sequence, outcome),
                        // Settled already (the deadline passed): only its request is over.
                        None => self.lanes[index].in_flight -= 1,
                    }
                }
            }
            Err(e) => {
                for (index, sequence) in carried {
                    self.settle(index, sequence, classify_request_error(e.clone()));
                }
            }
        }
    }

    /// Takes the outcome of one batch's request.
    fn settle(&mut self, index: usize, sequence: i32, outcome: Outcome) {
        let now = Instant::now();
        let refresh = match &outcome {
            Outcome::Retry(e) if e.needs_metadata_refresh() => Some(self.want_refresh()),
            _ => None,
        };
        let lane = &mut self.lanes[index];
        lane.in_flight -= 1;
        let Some(position) = lane
            .window
            .iter()
            .position(|s| s.pending.sequence == sequence)
        else {
            return;
        };
        let hole = lane.hole();
        let whole = hole.is_none();
        let behind_hole = hole.is_some()
            && match &outcome {
                Outcome::Done(_) => false,
                Outcome::Retry(_) => true,
                Outcome::Fail(e) => e.code() == Some(ResponseError::OutOfOrderSequenceNumber),
            };
        let e = match outcome {
            Outcome::Done(ack) => {
                if let Some(slot) = lane.window.remove(position) {
                    resolve(&slot.pending, None);
                    deliver(&mut self.results, &slot.pending.carries, Ok(ack));
                }
                let client = self.producer.client.config();
                lane.backoff = Backoff::new(client.retry_backoff, client.retry_backoff_max);
                return;
            }
            Outcome::Retry(e) if now < self.deadline && hole.is_none() => {
                tracing::debug!(partition = %lane.tp, sequence, error = %e, "retrying batch");
                lane.window[position].sent = false;
                let hold = lane.hold.get_or_insert_with(|| Hold {
                    not_before: now + lane.backoff.next_wait(),
                    refreshes: None,
                });
                hold.refreshes = hold.refreshes.max(refresh);
                return;
            }
            Outcome::Retry(e) | Outcome::Fail(e) => match hole {
                // Behind a hole in the sequence: it could not be written.
                Some(hole) if behind_hole => Error::Invalid(format!(
                    "{}: not sent, an earlier batch failed ({hole})",
                    lane.tp
                )),
                _ => e,
            },
        };
        let too_large = matches!(
            e.code(),
            Some(ResponseError::MessageTooLarge | ResponseError::RecordListTooLarge)
        );
        if too_large && whole && self.split(index, position, &e) {
            return;
        }
        let lane = &mut self.lanes[index];
        tracing::warn!(partition = %lane.tp, sequence, error = %e, "batch failed");
        let Some(slot) = lane.window.remove(position) else {
            return;
        };
        let fatal = !matches!(e, Error::DuplicateSequence { .. });
        resolve(&slot.pending, fatal.then(|| e.clone()));
        deliver(&mut self.results, &slot.pending.carries, Err(e));
        if fatal {
            self.fail_unsent(index);
        }
    }

    /// The partition's sequence has a hole: its batches not in flight are never sent, so
    /// nothing can land out of order. (Past the deadline they are delivery timeouts.)
    fn fail_unsent(&mut self, index: usize) {
        let past = Instant::now() >= self.deadline;
        let producer = self.producer;
        let lane = &mut self.lanes[index];
        let Some(hole) = lane.hole() else { return };
        let why = |tp: &TopicPartition| {
            if past {
                producer.delivery_timeout(tp)
            } else {
                Error::Invalid(format!("{tp}: not sent, an earlier batch failed ({hole})"))
            }
        };
        let mut sent = VecDeque::new();
        for slot in lane.window.drain(..) {
            if slot.sent {
                sent.push_back(slot);
            } else {
                let e = why(&lane.tp);
                resolve(&slot.pending, Some(e.clone()));
                deliver(&mut self.results, &slot.pending.carries, Err(e));
            }
        }
        lane.window = sent;
        for (batch_index, _) in lane.queue.drain(..) {
            self.results[batch_index] = Some(Err(why(&lane.tp)));
        }
        lane.spare = None;
    }

    /// The deadline passed: whatever has no result yet is a delivery timeout. A batch in
    /// flight may still be written, so its partition's sequence has a hole from here.
    fn time_out(&mut self) {
        for lane in &mut self.lanes {
            let e = self.producer.delivery_timeout(&lane.tp);
            if !lane.is_done() {
                tracing::warn!(
                    partition = %lane.tp,
                    batches = lane.window.len() + lane.queue.len(),
                    error = %e,
                    "batches failed"
                );
            }
            for slot in lane.window.drain(..) {
                resolve(&slot.pending, Some(e.clone()));
                deliver(&mut self.results, &slot.pending.carries, Err(e.clone()));
            }
            for (batch_index, _) in lane.queue.drain(..) {
                self.results[batch_index] = Some(Err(e.clone()));
            }
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
