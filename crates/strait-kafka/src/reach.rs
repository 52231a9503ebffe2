//! Brokers this process cannot reach now, over all its clients: what the log says about them
//! and what `strait status` and `/readyz` show.
//!
//! A broker that stops answering is said once, at WARN, when the first attempt fails; while it
//! stays so, attempts go on with backoff (`reconnect.backoff.ms`..`reconnect.backoff.max.ms`)
//! and are logged at DEBUG, with a reminder at WARN every [`REMIND_EVERY`]; when it answers
//! again, once more at INFO, with how long it lasted. Several clients of one cluster share a
//! broker's entry: one line per change for the process, not one per client and attempt (an
//! unreachable cluster used to log about four lines a second, forever).

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

/// How often a broker that still does not answer is said again.
pub const REMIND_EVERY: Duration = Duration::from_secs(300);

/// A broker that does not answer now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreachable {
    /// The cluster's alias, where the client knows it.
    pub cluster: Option<String>,
    /// `host:port`.
    pub broker: String,
    /// The last attempt's error.
    pub error: String,
    /// When the first attempt of this spell failed.
    pub since: SystemTime,
    /// Attempts that failed since.
    pub attempts: u64,
}

/// What to say about a failed attempt ([`Brokers::failed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Say {
    /// Nothing above DEBUG: the broker's state did not change.
    Quiet,
    /// The broker stopped answering.
    Stopped,
    /// It still does not answer, [`REMIND_EVERY`] after it was last said.
    Still,
}

#[derive(Debug)]
struct Entry {
    shown: Unreachable,
    since: Instant,
    said_at: Instant,
}

/// The brokers that do not answer, by address.
#[derive(Debug, Default)]
pub(crate) struct Brokers {
    entries: HashMap<String, Entry>,
    /// When a lost connection to a broker was last said.
    lost_said: HashMap<String, Instant>,
}

/// How long after a lost connection to a broker another lost connection to it is not said
/// (several clients and connections lose theirs together when a broker goes).
pub const LOST_QUIET: Duration = Duration::from_secs(60);

impl Brokers {
    /// A connection to `broker` was lost at `now`: whether to say so.
    pub(crate) fn lost(&mut self, broker: &str, now: Instant) -> bool {
        if self.entries.contains_key(broker) {
            return false;
        }
        match self.lost_said.get(broker) {
            Some(at) if now.saturating_duration_since(*at) < LOST_QUIET => false,
            _ => {
                self.lost_said.insert(broker.to_owned(), now);
                true
            }
        }
    }

    /// An attempt to reach `broker` failed at `now`.
    pub(crate) fn failed(
        &mut self,
        broker: &str,
        cluster: Option<&str>,
        error: String,
        now: Instant,
    ) -> Say {
        match self.entries.get_mut(broker) {
            Some(entry) => {
                entry.shown.attempts = entry.shown.attempts.saturating_add(1);
                entry.shown.error = error;
                if now.saturating_duration_since(entry.said_at) >= REMIND_EVERY {
                    entry.said_at = now;
                    Say::Still
                } else {
                    Say::Quiet
                }
            }
            None => {
                self.entries.insert(
                    broker.to_owned(),
                    Entry {
                        shown: Unreachable {
                            cluster: cluster.map(str::to_owned),
                            broker: broker.to_owned(),
                            error,
                            since: SystemTime::now(),
                            attempts: 1,
                        },
                        since: now,
                        said_at: now,
                    },
                );
                Say::Stopped
            }
        }
    }

    /// `broker` answered at `now`: how long it did not, and the attempts that failed, when it
    /// did not.
    pub(crate) fn answered(&mut self, broker: &str, now: Instant) -> Option<(Duration, u64)> {
        let entry = self.entries.remove(broker)?;
        Some((
            now.saturating_duration_since(entry.since),
            entry.shown.attempts,
        ))
    }

    fn unreachable(&self) -> Vec<Unreachable> {
        let mut all: Vec<Unreachable> = self.entries.values().map(|e| e.shown.clone()).collect();
        all.sort_by(|a, b| (&a.cluster, &a.broker).cmp(&(&b.cluster, &b.broker)));
        all
    }
}

fn brokers() -> MutexGuard<'static, Brokers> {
    static BROKERS: std::sync::LazyLock<Mutex<Brokers>> =
        std::sync::LazyLock::new(|| Mutex::new(Brokers::default()));
    BROKERS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Every broker this process cannot reach now, by cluster and address.
pub fn unreachable() -> Vec<Unreachable> {
    brokers().unreachable()
}

/// An attempt to connect to `broker` failed with `error`; the next is in `retry_in`.
pub(crate) fn failed(broker: &str, cluster: Option<&str>, error: &dyn Display, retry_in: Duration) {
    let now = Instant::now();
    let say = brokers().failed(broker, cluster, error.to_string(), now);
    let cluster = cluster.unwrap_or("-");
    match say {
        Say::Stopped => tracing::warn!(
            cluster,
            broker,
            error = %error,
            "broker does not answer; trying again with backoff (said again every {} minutes \
             while it lasts)",
            REMIND_EVERY.as_secs() / 60
        ),
        Say::Still => {
            let (since, attempts) = brokers()
                .entries
                .get(broker)
                .map(|e| (now.saturating_duration_since(e.since), e.shown.attempts))
                .unwrap_or_default();
            tracing::warn!(
                cluster,
                broker,
                error = %error,
                for_seconds = since.as_secs(),
                attempts,
                "broker still does not answer"
            );
        }
        Say::Quiet => {
            tracing::debug!(cluster, broker, error = %error, retry_in = ?retry_in, "cannot connect");
        }
    }
}

/// A connection to `broker` broke; the client connects again at its next request.
pub(crate) fn lost(broker: &str, cluster: Option<&str>) {
    let cluster = cluster.unwrap_or("-");
    if brokers().lost(broker, Instant::now()) {
        tracing::warn!(cluster, broker, "connection lost; connecting again");
    } else {
        tracing::debug!(cluster, broker, "connection lost; connecting again");
    }
}

/// A connection to `broker` was made.
pub(crate) fn answered(broker: &str, cluster: Option<&str>) {
    if let Some((after, attempts)) = brokers().answered(broker, Instant::now()) {
        tracing::info!(
            cluster = cluster.unwrap_or("-"),
            broker,
            after_seconds = after.as_secs(),
            failed_attempts = attempts,
            "broker answers again"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attempts every second for ten minutes: said when it stopped, once at each reminder,
    /// and when it answers again; another broker is its own.
    #[test]
    fn a_broker_is_said_once_per_change_and_reminded() {
        let mut brokers = Brokers::default();
        let start = Instant::now();
        let mut said = Vec::new();
        for s in 0..600 {
            let at = start + Duration::from_secs(s);
            let say = brokers.failed("b1:9092", Some("A"), format!("refused {s}"), at);
            if say != Say::Quiet {
                said.push((s, say));
            }
        }
        assert_eq!(said, [(0, Say::Stopped), (300, Say::Still)]);
        let shown = brokers.unreachable();
        assert_eq!(shown.len(), 1);
        assert_eq!(shown[0].cluster.as_deref(), Some("A"));
        assert_eq!(shown[0].attempts, 600);
        assert_eq!(shown[0].error, "refused 599");
        assert_eq!(
            brokers.failed("b2:9092", Some("A"), "refused".into(), start),
            Say::Stopped
        );
        assert_eq!(
            brokers.answered("b1:9092", start + Duration::from_secs(601)),
            Some((Duration::from_secs(601), 600))
        );
        assert_eq!(brokers.answered("b1:9092", start), None);
        assert_eq!(brokers.unreachable().len(), 1);
        // A lost connection is said once a minute per broker, and not while it is said to
        // be unreachable.
        let later = start + Duration::from_secs(1000);
        assert!(brokers.lost("b3:9092", later));
        assert!(!brokers.lost("b3:9092", later + Duration::from_secs(59)));
        assert!(brokers.lost("b3:9092", later + Duration::from_secs(60)));
        assert!(!brokers.lost("b2:9092", later));
        // Unreachable again later: a new spell, said again.
        assert_eq!(
            brokers.failed(
                "b1:9092",
                Some("A"),
                "refused".into(),
                start + Duration::from_secs(700)
            ),
            Say::Stopped
        );
    }
}
