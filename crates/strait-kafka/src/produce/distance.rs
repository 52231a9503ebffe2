//! How far a leader is, for [`MergeMode::Auto`](super::MergeMode::Auto): the round trip of a
//! request with nothing ahead of it and nothing for the broker to do, an ApiVersions on a
//! connection of its own, measured again every [`PROBE_EVERY`].
//!
//! A Produce request's own round trip cannot tell distance from load: a broker takes one
//! request of a connection at a time, so behind a producer's other megabyte requests a busy
//! broker beside the mirror answers as late as one 80 ms away (`bench/cpu-per-gb`, 64
//! partitions near: up to 40% of the batches merged when Produce round trips were the measure).
//! An ApiVersions on another connection waits for none of them, and the broker answers it
//! without touching a log.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use kafka_protocol::messages::ApiVersionsRequest;
use tokio::time::Instant;

use crate::connection::BrokerConnection;
use crate::{BrokerId, Client};

/// A leader whose quickest probe round trip is at least this: far enough that a partition's
/// five requests in flight, not the source, bound it with small batches (the same region's
/// zones are 1-2 ms apart, other regions 20 ms and more).
pub const FAR_ROUND_TRIP: Duration = Duration::from_millis(10);

/// How often a leader's distance is measured again.
const PROBE_EVERY: Duration = Duration::from_secs(10);

/// ApiVersions requests per measure; the quickest counts.
const PROBES: usize = 3;

/// The distance to each leader a producer writes to.
#[derive(Debug)]
pub(super) struct Distances {
    client: Client,
    leaders: Arc<Mutex<HashMap<BrokerId, Distance>>>,
}

#[derive(Debug, Default)]
struct Distance {
    /// The quickest round trip of the last measure that answered.
    round_trip: Option<Duration>,
    /// When it was last measured (answered or not).
    measured: Option<Instant>,
    measuring: bool,
    /// The connection the measures go over, kept between them.
    connection: Option<Arc<BrokerConnection>>,
}

impl Distances {
    pub(super) fn new(client: Client) -> Self {
        Self {
            client,
            leaders: Arc::default(),
        }
    }

    /// Whether `leader` was [`FAR_ROUND_TRIP`] or more away when last measured (not far until
    /// measured).
    pub(super) fn is_far(&self, leader: BrokerId) -> bool {
        self.round_trip(leader).is_some_and(|r| r >= FAR_ROUND_TRIP)
    }

    /// The round trip to `leader` when last measured. Measures it in the background when it
    /// never was or [`PROBE_EVERY`] has passed; needs a Tokio runtime.
    pub(super) fn round_trip(&self, leader: BrokerId) -> Option<Duration> {
        let Ok(mut leaders) = self.leaders.lock() else {
            return None;
        };
        let distance = leaders.entry(leader).or_default();
        let due = distance
            .measured
            .is_none_or(|at| at.elapsed() >= PROBE_EVERY);
        if due && !distance.measuring {
            distance.measuring = true;
            let connection = distance.connection.clone();
            tokio::spawn(measure(
                self.client.clone(),
                leader,
                connection,
                Arc::downgrade(&self.leaders),
            ));
        }
        distance.round_trip
    }
}

/// Measures the round trip to `leader` over `connection` (or a new one) and records it; a
/// failure leaves the last measure as it was, tried again after [`PROBE_EVERY`].
async fn measure(
    client: Client,
    leader: BrokerId,
    connection: Option<Arc<BrokerConnection>>,
    leaders: Weak<Mutex<HashMap<BrokerId, Distance>>>,
) {
    let connection = match connection.filter(|c| !c.is_poisoned()) {
        Some(c) => Some(c),
        None => connect(&client, leader).await,
    };
    let mut quickest: Option<Duration> = None;
    if let Some(c) = &connection {
        for _ in 0..PROBES {
            let sent = Instant::now();
            match c.send(&ApiVersionsRequest::default()).await {
                Ok(_) => {
                    let took = sent.elapsed();
                    quickest = Some(quickest.map_or(took, |q| q.min(took)));
                }
                Err(e) => {
                    tracing::debug!(broker = leader.0, error = %e, "cannot measure the distance to the leader");
                    break;
                }
            }
        }
    }
    let Some(leaders) = leaders.upgrade() else {
        return;
    };
    let Ok(mut leaders) = leaders.lock() else {
        return;
    };
    let distance = leaders.entry(leader).or_default();
    distance.measuring = false;
    distance.measured = Some(Instant::now());
    if let Some(q) = quickest {
        tracing::debug!(broker = leader.0, round_trip = ?q, "distance to the leader measured");
        distance.round_trip = Some(q);
        distance.connection = connection;
    } else {
        distance.connection = None;
    }
}

/// A connection of its own to `leader`, so no other request waits ahead of the measure.
async fn connect(client: &Client, leader: BrokerId) -> Option<Arc<BrokerConnection>> {
    let addr = client.cached_metadata().brokers.get(&leader)?.addr();
    match BrokerConnection::connect(&addr, client.config().connection.clone()).await {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::debug!(broker = %addr, error = %e, "cannot connect to measure the distance to the leader");
            None
        }
    }
}
