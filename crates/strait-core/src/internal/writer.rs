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
    in_flight: Option<tokio::task::JoinHandle<Write<P>>>,
}

/// The end of a write: the producer back (unless a batch failed), the payload, and how it went.
#[derive(Debug)]
struct Write<P> {
    producer: Option<RawProducer>,
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
            tp,
            payload,
            phases,
        );
        self.in_flight = Some(tokio::spawn(write));
    }
}

/// Writes `phases` to `tp` with `producer`, or a new producer on `client` when there is none.
async fn write<P>(
    client: Client,
    config: ProducerConfig,
    producer: Option<RawProducer>,
    tp: TopicPartition,
    payload: P,
    phases: Vec<Vec<RawBatch>>,
) -> Write<P> {
    let producer = match producer {
        Some(p) => p,
        None => match RawProducer::new(client, config).await {
            Ok(p) => p,
            Err(e) => {
                return Write {
                    producer: None,
                    payload,
                    result: Err(e.into()),
                }
            }
        },
    };
    for phase in phases {
        let sends = phase.into_iter().map(|b| (tp.clone(), b)).collect();
        if let Some(Err(e)) = producer
            .send_all(sends)
            .await
            .into_iter()
            .find(Result::is_err)
        {
            // Dropped with its broken sequence: the next write makes a new producer.
            return Write {
                producer: None,
                payload,
                result: Err(e.into()),
            };
        }
    }
    Write {
        producer: Some(producer),
        payload,
        result: Ok(()),
    }
}
