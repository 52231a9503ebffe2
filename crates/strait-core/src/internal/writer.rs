//! Writing one of strait's own single-partition topics beside the data
//! ([`BackgroundWriter`]): the offset map's and MM2's offset syncs both use it, so that a round
//! of the data path never waits a round trip for them.
//!
//! One write at a time, each in a task of its own with an idempotent producer of the writer's
//! own (not the data's: a failed write here must not put a hole in the data's sequences, nor a
//! data failure here). A write is a list of phases: every batch of a phase is in flight
//! together, the next phase starts once the previous one is acknowledged (the map writes its
//! entries before the tombstones they make safe). What was written travels with the write as
//! its `payload`, so that the owner can put it back if the write failed, or publish it once it
//! succeeded.
//!
//! With a `transactional_id` in its producer config (a unit of a flow run by workers), each
//! write is one transaction, committed once every phase is acknowledged, and the id is
//! initialised once, when the writer makes its producer: that fences whoever wrote with it
//! before, and a writer fenced in turn by a newer owner gets the broker's refusal
//! ([`strait_kafka::Error::is_fenced`]) on every later write. A failed write keeps the producer
//! and takes a new epoch with its current one before the next (KIP-360), never a fresh
//! initialisation, which would fence the newer owner back.

use strait_kafka::produce::{ProducerConfig, RawProducer};
use strait_kafka::{Client, TopicPartition};
use strait_wire::RawBatch;

use super::InternalError;

/// Writes `payload`s to partition 0 of one topic, one write at a time, beside the caller.
#[derive(Debug)]
pub(crate) struct BackgroundWriter<P> {
    client: Client,
    topic: String,
    config: ProducerConfig,
    /// `None` before the first write and after a failed one: the producer's sequence has a
    /// hole, so the next write makes a new one.
    producer: Option<RawProducer>,
    /// A transactional producer whose last write failed: it takes a new epoch first.
    stale: bool,
    in_flight: Option<tokio::task::JoinHandle<Write<P>>>,
}

/// The end of a write: the producer back (unless a batch failed), the payload, and how it went.
#[derive(Debug)]
struct Write<P> {
    producer: Option<RawProducer>,
    stale: bool,
    payload: P,
    result: Result<(), InternalError>,
}

/// A write that finished: its payload, and whether it is on the topic.
#[derive(Debug)]
pub(crate) struct Finished<P> {
    pub payload: P,
    pub result: Result<(), InternalError>,
}

impl<P: Send + 'static> BackgroundWriter<P> {
    /// A writer of `topic` on `client`'s cluster, with producers made from `config`.
    pub(crate) fn new(client: Client, topic: String, config: ProducerConfig) -> Self {
        Self {
            client,
            topic,
            config,
            producer: None,
            stale: false,
            in_flight: None,
        }
    }

    /// Makes the producer now, so that a cluster that refuses us says so at start rather than
    /// at the first write.
    pub(crate) async fn connect(&mut self) -> Result<(), InternalError> {
        if self.producer.is_none() {
            self.producer = Some(RawProducer::new(self.client.clone(), self.config.clone()).await?);
        }
        Ok(())
    }

    /// The topic written.
    pub(crate) fn topic(&self) -> &str {
        &self.topic
    }

    /// The transactional id of its producer, if it has one.
    pub(crate) fn transactional_id(&self) -> Option<&str> {
        self.config.transactional_id.as_deref()
    }

    /// Whether a write is in flight.
    pub(crate) fn busy(&self) -> bool {
        self.in_flight.as_ref().is_some_and(|w| !w.is_finished())
    }

    /// The write in flight, if it has finished: taken, so that its payload goes back to the
    /// caller. `None` while it runs or when there is none.
    pub(crate) async fn finished(&mut self) -> Result<Option<Finished<P>>, InternalError> {
        if self.busy() {
            return Ok(None);
        }
        self.wait().await
    }

    /// Waits for the write in flight, if any, and takes it.
    pub(crate) async fn wait(&mut self) -> Result<Option<Finished<P>>, InternalError> {
        let Some(running) = self.in_flight.take() else {
            return Ok(None);
        };
        // Only a panic in the write or the runtime shutting down ends a task without its
        // payload: what it held cannot be put back, so the caller stops rather than go on with
        // a topic that misses it.
        let write = running.await.map_err(|e| InternalError::WriteLost {
            topic: self.topic.clone(),
            why: e.to_string(),
        })?;
        self.producer = write.producer;
        self.stale = write.stale;
        Ok(Some(Finished {
            payload: write.payload,
            result: write.result,
        }))
    }

    /// Starts writing `phases` (batches for partition 0, phase after phase) in a task of its
    /// own, carrying `payload`. Call only when not [`busy`](Self::busy) and after taking the
    /// last write ([`finished`](Self::finished) or [`wait`](Self::wait)).
    pub(crate) fn start(&mut self, payload: P, phases: Vec<Vec<RawBatch>>) {
        debug_assert!(self.in_flight.is_none(), "one write at a time");
        let tp = TopicPartition::new(&self.topic, 0);
        let write = write(
            self.client.clone(),
            self.config.clone(),
            self.producer.take(),
            self.stale,
            tp,
            payload,
            phases,
        );
        self.in_flight = Some(tokio::spawn(write));
    }
}

/// Writes `phases` to `tp` with `producer`, or a new producer on `client` when there is none;
/// a transactional one commits them as one transaction, after a new epoch if it is `stale`.
async fn write<P>(
    client: Client,
    config: ProducerConfig,
    producer: Option<RawProducer>,
    stale: bool,
    tp: TopicPartition,
    payload: P,
    phases: Vec<Vec<RawBatch>>,
) -> Write<P> {
    let transactional = config.transactional_id.is_some();
    let mut producer = match producer {
        Some(p) => p,
        None => match RawProducer::new(client, config).await {
            Ok(p) => p,
            Err(e) => {
                return Write {
                    producer: None,
                    stale: false,
                    payload,
                    result: Err(e.into()),
                }
            }
        },
    };
    let result = async {
        if stale {
            producer.bump_epoch().await?;
        }
        for phase in phases {
            let sends = phase.into_iter().map(|b| (tp.clone(), b)).collect();
            if let Some(Err(e)) = producer
                .send_all(sends)
                .await
                .into_iter()
                .find(Result::is_err)
            {
                return Err(e);
            }
        }
        if transactional {
            producer.commit().await?;
        }
        Ok(())
    }
    .await;
    match result {
        Ok(()) => Write {
            producer: Some(producer),
            stale: false,
            payload,
            result: Ok(()),
        },
        // A transactional producer is kept, to take a new epoch with its current one.
        Err(e) if transactional => Write {
            producer: Some(producer),
            stale: true,
            payload,
            result: Err(e.into()),
        },
        // Dropped with its broken sequence: the next write makes a new producer.
        Err(e) => Write {
            producer: None,
            stale: false,
            payload,
            result: Err(e.into()),
        },
    }
}
