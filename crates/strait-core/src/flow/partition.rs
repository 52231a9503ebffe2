//! A mirrored partition's state in the flow: where it goes on from, and whether it is halted
//! (its remote partition diverged), refused (its remote topic not made), or waiting to be
//! placed again with a growing backoff, while the other partitions go on.

use super::*;

impl Flow {
    /// Stops mirroring `tp` until restart: logged at error once, shown as blocked with why.
    pub(super) fn halt(&mut self, tp: &TopicPartition, why: String) {
        let Some(state) = self.partitions.get_mut(tp) else {
            return;
        };
        if state.halted.is_some() {
            return;
        }
        let remote = &state.remote;
        self.events
            .tell(tp, &state.metrics, Event::Halted { remote, why: &why });
        state.waiting = None;
        state.halted = Some(why);
    }

    /// The partitions halted because they no longer match their offset map, with why.
    pub fn halted(&self) -> Vec<(TopicPartition, String)> {
        self.partitions
            .iter()
            .filter_map(|(tp, p)| Some((tp.clone(), p.halted.clone()?)))
            .collect()
    }

    /// The target refused the write of `tp` from source offset `from` for good: the partition
    /// goes back to `from` and waits (logged at error the first time, at debug after), the
    /// others go on.
    pub(super) fn refuse(&mut self, tp: &TopicPartition, from: i64, e: &strait_kafka::Error) {
        let Some(state) = self.partitions.get_mut(tp) else {
            return;
        };
        state.position = from;
        let first = state
            .waiting
            .as_ref()
            .is_none_or(|w| w.cause != WaitCause::Refused);
        let wait = state.wait(WaitCause::Refused, Some(from));
        let why = format!(
            "the target refuses the batch from source offset {from} for good ({e}); the \
             partition waits and is tried again in {:.1} s, then less and less often (at most \
             every {} s); the other partitions go on. Fix it on the target: the remote topic's \
             max.message.bytes (or the broker's message.max.bytes), its policies or its ACLs",
            wait.as_secs_f64(),
            WaitCause::Refused.waits().1.as_secs()
        );
        self.events.tell(
            tp,
            &state.metrics,
            Event::Refused {
                remote: &state.remote,
                offset: from,
                error: e,
                why: &why,
                first,
            },
        );
    }

    /// The partition `tp` could not be placed (`e`): it waits and is placed again alone later
    /// (logged at warn the first time, at debug after; shown as blocked with why), the others go
    /// on. `resume`: where it stood, if it has no map.
    pub(super) fn unplaced(
        &mut self,
        tp: &TopicPartition,
        resume: Option<i64>,
        e: &strait_kafka::Error,
    ) {
        let Some(state) = self.partitions.get_mut(tp) else {
            return;
        };
        let first = state
            .waiting
            .as_ref()
            .is_none_or(|w| w.cause != WaitCause::Unplaced);
        let wait = state.wait(WaitCause::Unplaced, resume);
        let why = format!(
            "cannot place this partition now ({e}); it waits and is tried again in {:.1} s (at \
             most every {} s), and the other partitions go on",
            wait.as_secs_f64(),
            WaitCause::Unplaced.waits().1.as_secs()
        );
        self.events.tell(
            tp,
            &state.metrics,
            Event::Unplaced {
                remote: &state.remote,
                error: e,
                why: &why,
                first,
            },
        );
    }

    /// Places again, from their maps, the waiting partitions whose wait is over: a refused one
    /// is fetched and written once more, an unplaced one goes back to work. One that still
    /// cannot be placed waits longer.
    pub(super) async fn place_waiting(&mut self) -> Result<(), FlowError> {
        let now = Instant::now();
        let due: Vec<(TopicPartition, TopicPartition, Option<i64>)> = self
            .partitions
            .iter()
            .filter_map(|(tp, p)| {
                let w = p.waiting.as_ref()?;
                (!w.retrying && w.retry_at <= now).then(|| (tp.clone(), p.remote.clone(), w.resume))
            })
            .collect();
        if due.is_empty() {
            return Ok(());
        }
        // A later batch of a refused write may have landed (a partition the producer had never
        // written to accepts any sequence): matching the target's tail finds it.
        for (tp, _, placed) in self.place_all(due, Duration::ZERO).await? {
            let Some(p) = self.partitions.get_mut(&tp) else {
                continue;
            };
            let Some(cause) = p.waiting.as_ref().map(|w| w.cause) else {
                continue;
            };
            match placed {
                Placement::At(position) => {
                    p.position = position;
                    p.metrics.placed(position);
                    match cause {
                        WaitCause::Refused => {
                            if let Some(w) = &mut p.waiting {
                                w.retrying = true;
                            }
                        }
                        WaitCause::Unplaced => {
                            p.waiting = None;
                            self.events
                                .tell(&tp, &p.metrics, Event::Placed { position });
                        }
                    }
                }
                Placement::Diverged(why) => self.halt(&tp, why),
                Placement::Waiting(e) => {
                    let resume = p.waiting.as_ref().and_then(|w| w.resume);
                    match cause {
                        WaitCause::Refused => {
                            p.wait(WaitCause::Refused, resume);
                            tracing::debug!(flow = %self.config.name(), partition = %tp, error = %e,
                                "a refused partition cannot be placed again now; it waits longer");
                        }
                        WaitCause::Unplaced => self.unplaced(&tp, resume, &e),
                    }
                }
            }
        }
        Ok(())
    }
}

#[derive(Debug)]
pub(super) struct PartitionState {
    pub(super) remote: TopicPartition,
    /// The next source offset to mirror.
    pub(super) position: i64,
    /// The source's high watermark (or last stable offset) at the last fetch.
    pub(super) source_end: i64,
    /// Where its events are counted (`/metrics`, `/v1/status`).
    pub(super) metrics: PartitionMetrics,
    /// Set while it waits: the target refuses its batches for good, or it could not be placed.
    pub(super) waiting: Option<Waiting>,
    /// Set when the partition no longer matches its offset map, with why: it is not mirrored
    /// until strait is restarted after someone acted.
    pub(super) halted: Option<String>,
    /// The largest batch it has sent us, in bytes (doubled while a fetch with room brings it
    /// nothing): a fetch that shares its bytes asks at least twice that of it (`round.rs`,
    /// `partition_ask`).
    pub(super) largest_batch: Option<i32>,
    /// Set while its source topic is deleted and the flow keeps its remote topic
    /// (`strait.sync.topic.deletions.enabled` off): it is not fetched. Cleared if the topic
    /// comes back; the topic id check halts it first if the topic was made anew.
    pub(super) gone: bool,
}

impl PartitionState {
    /// Whether the next fetch leaves it out for good (until someone acts or its topic is back):
    /// halted, or its source topic deleted.
    pub(super) fn stopped(&self) -> bool {
        self.halted.is_some() || self.gone
    }

    /// Whether the next fetch leaves it out for now: it waits, and is not being tried again.
    pub(super) fn waits(&self) -> bool {
        self.waiting.as_ref().is_some_and(|w| !w.retrying)
    }

    /// Whether it waits to be placed ([`WaitCause::Unplaced`]).
    pub(super) fn waits_unplaced(&self) -> bool {
        self.waiting
            .as_ref()
            .is_some_and(|w| w.cause == WaitCause::Unplaced)
    }

    /// Makes it wait for `cause` (waiting longer if it already waited for it), resuming at
    /// `resume` if it has no map. Returns the wait.
    pub(super) fn wait(&mut self, cause: WaitCause, resume: Option<i64>) -> Duration {
        let waiting = match &mut self.waiting {
            Some(w) if w.cause == cause => w,
            other => other.insert(Waiting {
                cause,
                resume,
                retry_at: Instant::now(),
                retrying: false,
                backoff: cause.backoff(),
            }),
        };
        let wait = waiting.backoff.next_wait();
        waiting.resume = resume;
        waiting.retrying = false;
        waiting.retry_at = Instant::now() + wait;
        wait
    }
}

/// A partition that waits ([`WaitCause`]): it is left out of fetches until `retry_at`, then
/// placed again from its map (and for a refused one, tried once more), with a growing wait.
/// The other partitions go on meanwhile.
#[derive(Debug)]
pub(super) struct Waiting {
    /// Why it waits.
    pub(super) cause: WaitCause,
    /// Where it resumes if it has no map: the first source offset of a refused write, or where
    /// an unplaced partition stood (`None`: never placed, it starts where a new one does).
    pub(super) resume: Option<i64>,
    /// When to try again.
    pub(super) retry_at: Instant,
    /// Whether a refused partition has been placed again for the try at `retry_at` (and is
    /// fetched): it stops waiting when the target takes its batches.
    pub(super) retrying: bool,
    /// The waits between tries ([`WaitCause::backoff`]).
    pub(super) backoff: strait_kafka::backoff::Backoff,
}

/// Why a partition waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WaitCause {
    /// The target refuses its batches for good (MESSAGE_TOO_LARGE, INVALID_RECORD,
    /// POLICY_VIOLATION, TOPIC_AUTHORIZATION_FAILED ...).
    Refused,
    /// It could not be placed: its offsets could not be listed or its tail matched for a
    /// reason time can fix (its leader offline on either cluster, its topic being deleted or
    /// created; `recover::Placement::Waiting`).
    Unplaced,
}

impl WaitCause {
    /// The first wait and the longest: a refusal needs someone to act on the target; an
    /// offline partition comes back by itself and is noticed within half a minute.
    pub(super) fn waits(self) -> (Duration, Duration) {
        match self {
            WaitCause::Refused => (Duration::from_secs(1), Duration::from_secs(300)),
            WaitCause::Unplaced => (Duration::from_secs(1), Duration::from_secs(30)),
        }
    }

    pub(super) fn backoff(self) -> strait_kafka::backoff::Backoff {
        let (first, longest) = self.waits();
        strait_kafka::backoff::Backoff::new(first, longest)
    }
}

/// How soon a remote topic the target refused to create is tried again, when the topic
/// refresh (`refresh.topics.interval.seconds`) comes later.
pub(super) const REFUSED_TOPIC_RETRY: Duration = Duration::from_secs(30);
