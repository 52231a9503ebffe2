//! What a flow tells about itself. Each observable occurrence is one [`Event`] (of one
//! partition) or one [`FlowEvent`] (of the flow as a whole: a round done, a stall, a failure, a
//! remote topic deleted), and telling it ([`Events::tell`], [`Events::tell_flow`]) does
//! everything that occurrence owes its readers at once: a log line when it is worth one, the
//! flow's counters ([`FlowStats`], what `strait mirror` sums up) and the metrics and status
//! (`/metrics`, `/v1/status`). So the log, the counters and the status cannot disagree about
//! what happened, and a new occurrence is added in one place.

use std::time::Duration;

use strait_kafka::TopicPartition;

use super::classify::SkipReason;
use super::FlowStats;
use crate::metrics::{FlowMetrics, PartitionMetrics};

/// Something that happened to one partition of the flow.
#[derive(Debug)]
pub(super) enum Event<'a> {
    /// A batch was read from the source; its newest record has `max_timestamp`.
    Read { max_timestamp: i64 },
    /// A batch forwarded unopened is on the target (its round committed, in a transactional
    /// flow). Counted once it is, so that a write that failed and is made again, or a round
    /// aborted, counts once.
    Forwarded,
    /// A batch decoded and encoded again from the source batch at `source_base`, carrying the
    /// source `runs` `(offset, count)`, is on the target: its offsets had holes (compaction,
    /// `holes`), or it started before the partition's position.
    Rebuilt {
        source_base: i64,
        runs: &'a [(i64, i64)],
        holes: bool,
    },
    /// A batch written as part of a merged batch ([`Event::Forwarded`] or [`Event::Rebuilt`]
    /// is told of it too).
    Merged,
    /// A batch whose merged batch the target refused as too large went again in a smaller one
    /// (split in place, `strait_kafka::produce`; [`Event::Forwarded`] or [`Event::Rebuilt`] is
    /// told of it too).
    Split,
    /// A control batch or a batch of an aborted transaction is recorded as not mirrored.
    Skipped(SkipReason),
    /// The target acknowledged a batch of `records` records and `bytes` bytes.
    Written {
        records: u64,
        bytes: u64,
        max_timestamp: i64,
    },
    /// Source offsets `from..to` were deleted before they were mirrored: recorded as lost.
    Lost { from: i64, to: i64 },
    /// `n` records are on the target twice (written again after a crash left them
    /// unrecorded, or found twice when taking over).
    Duplicates(u64),
    /// A fetch of the partition failed; it is fetched again next round.
    FetchFailed(&'a strait_kafka::Error),
    /// A write failed in a way that resumes the flow from the offset map.
    ProduceFailed(&'a strait_kafka::Error),
    /// The target took the partition's batches again after refusing them.
    Accepted,
    /// The partition is not mirrored until strait is restarted after someone acted.
    Halted {
        remote: &'a TopicPartition,
        why: &'a str,
    },
    /// The target refused the write from source `offset` for good; the partition waits and is
    /// tried again (`first`: the first refusal in a row, logged at error).
    Refused {
        remote: &'a TopicPartition,
        offset: i64,
        error: &'a strait_kafka::Error,
        why: &'a str,
        first: bool,
    },
    /// The partition could not be placed now (its leader offline, its topic being deleted or
    /// created); it waits and is placed again alone later (`first`: the first time in a row,
    /// logged at warn).
    Unplaced {
        remote: &'a TopicPartition,
        error: &'a strait_kafka::Error,
        why: &'a str,
        first: bool,
    },
    /// A partition that could not be placed is placed at last, at source `position`.
    Placed { position: i64 },
    /// Records the target held beyond the offset map were matched against the source at
    /// start-up or after a failure (`recover/`).
    Matched(Matched<'a>),
}

/// Something that happened to the flow as a whole.
#[derive(Debug)]
pub(super) enum FlowEvent<'a> {
    /// A round finished.
    RoundDone,
    /// A round failed in a way time can fix (a cluster unreachable); the flow tries again in
    /// `retry_in`, from the offset map.
    Stalled {
        error: &'a dyn std::error::Error,
        retry_in: Duration,
    },
    /// After a stall, the producer and the partitions' positions were set up again.
    ProducerReestablished,
    /// The flow stopped on an error that needs a person.
    Failed(&'a dyn std::error::Error),
    /// Source topic `source_topic` was deleted, so its remote topic was deleted on the target
    /// (`already_gone`: someone deleted it first) and its `partitions` forgotten
    /// (`strait.sync.topic.deletions.enabled`).
    RemoteTopicDeleted {
        source_topic: &'a str,
        remote_topic: &'a str,
        partitions: usize,
        already_gone: bool,
    },
}

/// What matching a partition's target tail found (`recover/`).
#[derive(Debug)]
pub(super) struct Matched<'a> {
    pub remote: &'a TopicPartition,
    /// Target records matched with their source records: recorded, not written again.
    pub matched: i64,
    /// Target records that are second copies of matched ones (kept, left out of the map).
    pub extra: i64,
    /// Target records left unmatched: written again, counted as duplicates when they are.
    pub unmatched: i64,
    /// Source records deleted before they were matched (each range told as [`Event::Lost`]).
    pub lost: u64,
    /// Target records that are copies of source records deleted before they were recorded.
    pub orphans: i64,
    /// Whether there was no map for the partition: a remote topic another mirror filled.
    pub adopted: bool,
    /// The source offset the partition resumes at.
    pub resumes_at: i64,
    pub elapsed_ms: u64,
    /// Why matching stopped, if it did before the target's end.
    pub stopped_by: Option<&'a str>,
}

/// The flow's counters and metrics, and where its events are told.
#[derive(Debug)]
pub(super) struct Events {
    flow: String,
    stats: FlowStats,
    metrics: FlowMetrics,
}

impl Events {
    /// The events of the flow named `flow` (`A->B`), counted from zero, whose handles are
    /// `metrics`.
    pub(super) fn new(flow: String, metrics: FlowMetrics) -> Self {
        Self {
            flow,
            stats: FlowStats::default(),
            metrics,
        }
    }

    /// The counters since start.
    pub(super) fn stats(&self) -> FlowStats {
        self.stats
    }

    /// The flow's metric handles, where its partitions' handles are made.
    pub(super) fn metrics(&self) -> &FlowMetrics {
        &self.metrics
    }

    /// Tells that `event` happened to the flow.
    pub(super) fn tell_flow(&mut self, event: FlowEvent<'_>) {
        let flow = self.flow.as_str();
        match event {
            FlowEvent::RoundDone => self.metrics.running(),
            FlowEvent::Stalled { error, retry_in } => {
                self.stats.stalls += 1;
                self.metrics.stalled(&error);
                tracing::warn!(flow = %flow, error = %error, retry_in = ?retry_in, "flow stalled; retrying");
            }
            FlowEvent::ProducerReestablished => {
                tracing::info!(flow = %flow, "producer re-established; resuming from the offset map");
            }
            FlowEvent::Failed(error) => self.metrics.failed(&error),
            FlowEvent::RemoteTopicDeleted {
                source_topic,
                remote_topic,
                partitions,
                already_gone,
            } => {
                self.metrics.remote_topic_deleted();
                tracing::warn!(
                    flow = %flow,
                    source_topic = %source_topic,
                    remote_topic = %remote_topic,
                    partitions,
                    "source topic deleted; deleted its remote topic on the target{} and forgot its \
                     partitions (strait.sync.topic.deletions.enabled)",
                    if already_gone { " (already gone)" } else { "" }
                );
            }
        }
    }

    /// Tells that `event` happened to `tp`, whose handles are `metrics`.
    pub(super) fn tell(
        &mut self,
        tp: &TopicPartition,
        metrics: &PartitionMetrics,
        event: Event<'_>,
    ) {
        let flow = self.flow.as_str();
        let stats = &mut self.stats;
        match event {
            Event::Read { max_timestamp } => metrics.read(max_timestamp),
            Event::Forwarded => {
                stats.batches_forwarded += 1;
                metrics.forwarded();
            }
            Event::Rebuilt {
                source_base,
                runs,
                holes,
            } => {
                log_rebuild(flow, tp, source_base, runs, holes);
                stats.batches_rebuilt += 1;
                metrics.rebuilt();
            }
            Event::Merged => {
                stats.batches_merged += 1;
                metrics.merged();
            }
            Event::Split => metrics.split(),
            Event::Skipped(SkipReason::ControlBatch) => {
                stats.control_batches_skipped += 1;
                metrics.dropped(false);
            }
            Event::Skipped(SkipReason::Aborted) => {
                stats.aborted_batches_skipped += 1;
                metrics.dropped(true);
            }
            Event::Written {
                records,
                bytes,
                max_timestamp,
            } => {
                stats.records += records;
                stats.bytes += bytes;
                metrics.written(records, bytes, max_timestamp);
            }
            Event::Lost { from, to } => {
                tracing::error!(
                    flow = %flow,
                    topic = %tp.topic,
                    partition = tp.partition,
                    from,
                    to,
                    lost = to - from,
                    "records were deleted on the source before they were mirrored; the range \
                     is recorded as lost in the offset map and mirroring continues after it"
                );
                stats.lost_records += (to - from).max(0) as u64;
                metrics.lost(from, to);
            }
            Event::Duplicates(n) => {
                stats.duplicate_records += n;
                metrics.duplicates(n);
            }
            Event::FetchFailed(e) => {
                tracing::debug!(flow = %flow, partition = %tp, error = %e, "fetch error; retried next round");
                metrics.error(format_args!("fetch from the source: {e}"));
            }
            Event::ProduceFailed(e) => {
                tracing::warn!(flow = %flow, partition = %tp, error = %e, "produce failed; resuming from the offset map");
                metrics.error(format_args!("produce to the target: {e}"));
            }
            Event::Accepted => {
                tracing::info!(flow = %flow, partition = %tp, "the target takes this partition's batches again");
                metrics.blocked(None);
            }
            Event::Halted { remote, why } => {
                tracing::error!(flow = %flow, partition = %tp, remote = %remote, "partition halted: {why}");
                metrics.blocked(Some(why));
            }
            Event::Refused {
                remote,
                offset,
                error,
                why,
                first,
            } => {
                if first {
                    tracing::error!(flow = %flow, partition = %tp, remote = %remote, offset, error = %error, "{why}");
                } else {
                    tracing::debug!(flow = %flow, partition = %tp, offset, error = %error, "refused again");
                }
                metrics.blocked(Some(why));
            }
            Event::Unplaced {
                remote,
                error,
                why,
                first,
            } => {
                if first {
                    tracing::warn!(flow = %flow, partition = %tp, remote = %remote, error = %error, "{why}");
                } else {
                    tracing::debug!(flow = %flow, partition = %tp, error = %error, "cannot place this partition yet");
                }
                metrics.blocked(Some(why));
            }
            Event::Placed { position } => {
                tracing::info!(flow = %flow, partition = %tp, position, "partition placed after waiting; it is mirrored again");
                metrics.blocked(None);
            }
            Event::Matched(m) => {
                // Lost ranges were told one by one as they were found; duplicates to be written
                // again are counted when they are (a target gap in the map), not here: a run
                // stopped before that would otherwise count them twice. Extra copies are
                // counted here: nothing writes them again, and the map puts them in a target
                // gap, so a restart does not find them again.
                stats.recovered_records += m.matched as u64;
                stats.duplicate_records += m.extra as u64;
                metrics.recovered(m.matched as u64);
                metrics.duplicates(m.extra as u64);
                log_matched(flow, tp, &m);
            }
        }
    }
}

/// One line per rebuilt batch: at debug for compaction holes (routine on a compacted topic),
/// at info for a batch cut by the partition's position (after a restart or a loss inside it).
fn log_rebuild(flow: &str, tp: &TopicPartition, offset: i64, runs: &[(i64, i64)], holes: bool) {
    let records: i64 = runs.iter().map(|r| r.1).sum();
    let (topic, partition) = (&tp.topic, tp.partition);
    if holes {
        tracing::debug!(
            flow = %flow, %topic, partition, offset, records, kind = "compaction holes",
            "batch rebuilt: its offsets have holes (compaction), so it is re-encoded densely"
        );
    } else {
        tracing::info!(
            flow = %flow, %topic, partition, offset, records, kind = "cut by position",
            "batch rebuilt: it starts before the partition's position (a restart or a loss \
             inside it), so only its records from the position on are written"
        );
    }
}

/// What matching a target tail found, when it found anything: at warn when records will be
/// written again or are there twice, at info when another mirror's records were all taken over.
fn log_matched(flow: &str, tp: &TopicPartition, m: &Matched<'_>) {
    let stopped_by = m.stopped_by.unwrap_or("-");
    if m.adopted && m.lost == 0 && m.orphans == 0 {
        // The same words as below first: tools that sum `recovered=` find both.
        let message = "target held records beyond the offset map, and no map for this \
                       partition: taking over a remote topic filled by MirrorMaker 2 or \
                       another mirror (or the map topic was deleted); its records were \
                       matched with the source record by record: matched ones are in the map \
                       and not copied again, extra copies (an earlier mirror wrote them \
                       twice) are kept and counted as duplicates, unmatched ones will be \
                       written again";
        macro_rules! adopted_line {
            ($level:ident) => {
                tracing::$level!(
                    flow = %flow,
                    partition = %tp,
                    remote = %m.remote,
                    recovered = m.matched,
                    extra_copies = m.extra,
                    duplicates = m.unmatched,
                    resumes_at = m.resumes_at,
                    elapsed_ms = m.elapsed_ms,
                    stopped_by,
                    "{message}"
                )
            };
        }
        if m.unmatched > 0 || m.extra > 0 {
            adopted_line!(warn);
        } else {
            adopted_line!(info);
        }
    } else if m.matched > 0 || m.unmatched > 0 || m.orphans > 0 || m.extra > 0 {
        tracing::warn!(
            flow = %flow,
            partition = %tp,
            remote = %m.remote,
            recovered = m.matched,
            duplicates = m.unmatched,
            lost = m.lost,
            copies_of_lost = m.orphans,
            extra_copies = m.extra,
            stopped_by,
            "target held records beyond the offset map (an earlier run stopped before \
             recording them): matched ones are kept, the rest will be written again; copies \
             of records the source deleted before they were recorded are kept, not written \
             again"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event_capture::{self as told, Told};
    use crate::status::FlowState;

    fn events(flow: &crate::config::FlowConfig) -> Events {
        Events::new(flow.name(), FlowMetrics::start(flow, None))
    }

    #[test]
    fn a_stall_is_logged_counted_and_shown_and_the_next_round_clears_it() {
        let told = Told::new();
        let flow = told::flow("stallsrc", "stalldst", "");
        let mut events = told.run(|| events(&flow));
        told.metrics();
        told.run(|| {
            events.tell_flow(FlowEvent::Stalled {
                error: &std::io::Error::other("the target does not answer"),
                retry_in: Duration::from_millis(400),
            });
        });
        let metrics = told.metrics();
        assert_eq!(metrics["strait_flow_stalled"], 1.0, "{metrics:?}");
        assert_eq!(metrics["strait_flow_stalls_total"], 1.0, "{metrics:?}");
        assert_eq!(events.stats().stalls, 1);
        let log = told.log();
        assert!(log.contains("WARN"), "{log}");
        assert!(log.contains("flow stalled; retrying"), "{log}");
        assert!(log.contains("error=the target does not answer"), "{log}");
        assert!(log.contains("retry_in=400ms"), "{log}");
        let status = told::status(&flow);
        assert_eq!(status.state, FlowState::Stalled);
        assert_eq!(
            status.last_error.map(|e| e.message).as_deref(),
            Some("the target does not answer")
        );

        told.run(|| events.tell_flow(FlowEvent::RoundDone));
        let metrics = told.metrics();
        assert_eq!(metrics["strait_flow_stalled"], 0.0, "{metrics:?}");
        assert_eq!(metrics["strait_flow_stalls_total"], 0.0, "no new stall");
        assert!(metrics["strait_flow_last_round_timestamp_seconds"] > 0.0);
        assert_eq!(events.stats().stalls, 1);
        assert_eq!(told::status(&flow).state, FlowState::Running);
        assert_eq!(told.log(), "", "a round done is not logged");
    }

    #[test]
    fn a_failure_is_shown_with_its_error() {
        let told = Told::new();
        let flow = told::flow("failsrc", "faildst", "");
        let mut events = told.run(|| events(&flow));
        told.run(|| {
            events.tell_flow(FlowEvent::Failed(&std::io::Error::other(
                "the map is unreadable",
            )))
        });
        let status = told::status(&flow);
        assert_eq!(status.state, FlowState::Failed);
        assert_eq!(
            status.last_error.map(|e| e.message).as_deref(),
            Some("the map is unreadable")
        );
        assert_eq!(events.stats().stalls, 0);
    }

    #[test]
    fn a_producer_set_up_again_is_logged() {
        let told = Told::new();
        let flow = told::flow("resetsrc", "resetdst", "");
        let mut events = told.run(|| events(&flow));
        told.run(|| events.tell_flow(FlowEvent::ProducerReestablished));
        let log = told.log();
        assert!(log.contains("INFO"), "{log}");
        assert!(
            log.contains("producer re-established; resuming from the offset map"),
            "{log}"
        );
        assert!(log.contains("flow=resetsrc->resetdst"), "{log}");
    }

    #[test]
    fn a_remote_topic_deleted_is_logged_and_counted_together() {
        let told = Told::new();
        let flow = told::flow("delsrc", "deldst", "");
        let mut events = told.run(|| events(&flow));
        told.metrics();
        told.run(|| {
            events.tell_flow(FlowEvent::RemoteTopicDeleted {
                source_topic: "orders",
                remote_topic: "delsrc.orders",
                partitions: 3,
                already_gone: true,
            });
        });
        let metrics = told.metrics();
        assert_eq!(metrics["strait_remote_topics_deleted_total"], 1.0);
        let log = told.log();
        assert!(log.contains("WARN"), "{log}");
        assert!(
            log.contains(
                "source topic deleted; deleted its remote topic on the target (already gone) and \
                 forgot its partitions (strait.sync.topic.deletions.enabled)"
            ),
            "{log}"
        );
        assert!(log.contains("remote_topic=delsrc.orders"), "{log}");
        assert!(log.contains("partitions=3"), "{log}");
    }
}
