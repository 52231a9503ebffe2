//! MM2's heartbeats, written as MirrorMaker 2's `MirrorHeartbeatTask` writes them
//! (`docs/mm2-behaviour.md` §1.4), so that `MirrorClient.replicationHops()`, `upstreamClusters()`,
//! the `HeartbeatFormatter` and latency dashboards built on heartbeats work on clusters strait
//! mirrors between.
//!
//! # The topic
//!
//! `heartbeats` ([`ReplicationPolicy::heartbeats_topic`]) on the emitter's cluster
//! ([`HeartbeatEmitter::target`]): one partition, `cleanup.policy=compact`, replication factor
//! `heartbeats.topic.replication.factor`, created if missing. Every record goes to partition 0:
//! key `sourceClusterAlias:STRING targetClusterAlias:STRING`, value `version:INT16=0
//! timestamp:INT64` ([`Heartbeat`]), stamped with the heartbeat's own timestamp.
//!
//! # How they travel
//!
//! There is an emitter for every ordered pair of clusters with `emit.heartbeats.enabled`, flow
//! or not: for a flow A->B, the pair B->A writes `heartbeats` into A. Flows mirror heartbeats
//! topics like data, even when `topics` leaves them out
//! ([`FlowConfig::should_replicate_topic`](crate::config::FlowConfig::should_replicate_topic),
//! `heartbeats.replication.enabled`), so A->B copies them to B as `A.heartbeats`, and a further
//! B->C to C as `B.A.heartbeats`. A heartbeat that arrives shows the whole path is alive; its
//! age on arrival is the replication latency.
//!
//! # Schedule
//!
//! [`HeartbeatTask::run`] writes one heartbeat every `emit.heartbeats.interval.seconds` (1 s by
//! default), the first one interval after the start, as MM2's task does. A failed write is
//! tried again at the next interval, with a fresh producer; the first failure in a row is
//! logged as a warning, the rest quietly, and the recovery once.

use std::future::Future;
use std::time::Duration;

use strait_kafka::produce::{ProducerConfig, RawProducer};
use strait_kafka::{Client, TopicPartition};
use strait_wire::mm2::{CodecError, Heartbeat};

use crate::config::HeartbeatEmitter;
use crate::internal::InternalError;
use crate::policy::ReplicationPolicy;

/// Shortest interval the loop honours, so a zero from a hand-built config cannot spin.
const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// Why a heartbeat could not be written. The task logs it and tries again at the next interval.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HeartbeatError {
    /// A Kafka operation failed.
    #[error("{what}: {source}")]
    Kafka {
        /// What was being done, naming the topic and cluster.
        what: String,
        /// Why.
        #[source]
        source: strait_kafka::Error,
    },
    /// The heartbeats topic could not be created, or the batch could not be built.
    #[error(transparent)]
    Internal(#[from] InternalError),
    /// The key cannot be encoded: an alias longer than a Kafka `STRING` holds.
    #[error("cannot encode the heartbeat key: {0}")]
    Encode(#[from] CodecError),
}

impl HeartbeatError {
    /// Whether the next attempt may succeed without anyone doing anything (a cluster back up,
    /// a leader elected).
    pub fn is_retriable(&self) -> bool {
        match self {
            HeartbeatError::Kafka { source, .. } => source.is_retriable(),
            HeartbeatError::Internal(e) => e.is_retriable(),
            HeartbeatError::Encode(_) => false,
        }
    }
}

/// One heartbeat written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatSummary {
    /// The heartbeat, as written.
    pub heartbeat: Heartbeat,
    /// Its offset in partition 0 of the heartbeats topic.
    pub offset: i64,
}

/// One heartbeat emitter at work: writes [`Heartbeat`]s for its pair of aliases into the
/// `heartbeats` topic of its cluster (module docs).
#[derive(Debug)]
pub struct HeartbeatTask {
    emitter: HeartbeatEmitter,
    client: Client,
    topic: String,
    producer_config: ProducerConfig,
    /// `None` until the first write, and after a failed one (its sequence has a hole).
    producer: Option<RawProducer>,
    topic_ready: bool,
    written: u64,
    /// Failed attempts since the last heartbeat written.
    failures_in_a_row: u64,
}

impl HeartbeatTask {
    /// The task of `emitter`; `client` must be connected to the emitter's cluster
    /// ([`HeartbeatEmitter::target`]). Nothing is done until the first pass.
    pub fn new(emitter: HeartbeatEmitter, client: Client) -> Self {
        Self {
            emitter,
            client,
            topic: ReplicationPolicy::default().heartbeats_topic().to_owned(),
            producer_config: ProducerConfig::default(),
            producer: None,
            topic_ready: false,
            written: 0,
            failures_in_a_row: 0,
        }
    }

    /// Uses `config` for the heartbeats producer (the cluster's `producer.*` timeouts).
    pub fn with_producer_config(mut self, config: ProducerConfig) -> Self {
        self.producer_config = config;
        self
    }

    /// The emitter this task runs.
    pub fn emitter(&self) -> &HeartbeatEmitter {
        &self.emitter
    }

    /// The heartbeats topic: `heartbeats`.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Heartbeats written since the task was made.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The heartbeat this emitter would write at `timestamp_ms`.
    pub fn heartbeat_at(&self, timestamp_ms: i64) -> Heartbeat {
        Heartbeat {
            source_alias: self.emitter.source_alias.as_str().to_owned(),
            target_alias: self.emitter.target_alias.as_str().to_owned(),
            timestamp_ms,
        }
    }

    /// Writes one heartbeat, stamped now, to partition 0 of the heartbeats topic. Creates the
    /// topic first if it is missing (once; again after a failure, in case it was deleted).
    pub async fn emit_once(&mut self) -> Result<HeartbeatSummary, HeartbeatError> {
        let result = self.try_emit().await;
        if result.is_err() {
            // A failed batch breaks the producer's sequence; the topic may be gone.
            self.producer = None;
            self.topic_ready = false;
        }
        result
    }

    async fn try_emit(&mut self) -> Result<HeartbeatSummary, HeartbeatError> {
        if !self.topic_ready {
            crate::internal::ensure_compacted_topic(
                &self.client,
                &self.topic,
                self.emitter.topic_replication_factor,
            )
            .await?;
            self.topic_ready = true;
        }
        let heartbeat = self.heartbeat_at(crate::internal::batch::now_ms());
        let key = heartbeat.encode_key()?;
        let batch = crate::internal::batch::key_value_batch_at(
            "heartbeat",
            vec![(key, heartbeat.encode_value())],
            heartbeat.timestamp_ms,
        )
        .map_err(InternalError::from)?;
        let producer = match self.producer.take() {
            Some(p) => p,
            None => RawProducer::new(self.client.clone(), self.producer_config.clone())
                .await
                .map_err(|source| HeartbeatError::Kafka {
                    what: format!(
                        "starting the heartbeats producer on cluster {}",
                        self.emitter.target
                    ),
                    source,
                })?,
        };
        let ack = producer
            .send(&TopicPartition::new(self.topic.clone(), 0), &batch)
            .await
            .map_err(|source| HeartbeatError::Kafka {
                what: format!(
                    "writing to {} on cluster {}",
                    self.topic, self.emitter.target
                ),
                source,
            })?;
        self.producer = Some(producer);
        self.written += 1;
        Ok(HeartbeatSummary {
            heartbeat,
            offset: ack.base_offset,
        })
    }

    /// Writes a heartbeat every `emit.heartbeats.interval.seconds` until `stop` resolves, the
    /// first one interval after the start, as MM2 does. A failed write is logged and tried
    /// again at the next interval. Returns at once on `stop`, even mid-write.
    pub async fn run(&mut self, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        let every = self.emitter.interval.max(MIN_INTERVAL);
        loop {
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep(every) => {}
            }
            tokio::select! {
                () = &mut stop => return,
                result = self.emit_once() => self.log(result),
            }
        }
    }

    /// Logs a pass: the first heartbeat, the first failure of a run of them and the recovery
    /// at their levels, the rest at debug, so a cluster down for an hour is one warning.
    fn log(&mut self, result: Result<HeartbeatSummary, HeartbeatError>) {
        let e = &self.emitter;
        match result {
            Ok(s) => {
                if self.failures_in_a_row > 0 {
                    tracing::info!(
                        cluster = %e.target,
                        topic = %self.topic,
                        failed = self.failures_in_a_row,
                        "heartbeats are written again"
                    );
                } else if self.written == 1 {
                    tracing::info!(
                        cluster = %e.target,
                        topic = %self.topic,
                        source_alias = %e.source_alias,
                        target_alias = %e.target_alias,
                        every = ?e.interval,
                        "writing heartbeats"
                    );
                } else {
                    tracing::debug!(
                        cluster = %e.target,
                        offset = s.offset,
                        timestamp_ms = s.heartbeat.timestamp_ms,
                        "heartbeat written"
                    );
                }
                self.failures_in_a_row = 0;
            }
            Err(error) => {
                self.failures_in_a_row += 1;
                if self.failures_in_a_row == 1 {
                    tracing::warn!(
                        cluster = %e.target,
                        topic = %self.topic,
                        error = %error,
                        "cannot write a heartbeat; trying again every {:?}, quietly until it works",
                        e.interval
                    );
                } else {
                    tracing::debug!(
                        cluster = %e.target,
                        failed = self.failures_in_a_row,
                        error = %error,
                        "heartbeat still failing"
                    );
                }
            }
        }
    }
}
