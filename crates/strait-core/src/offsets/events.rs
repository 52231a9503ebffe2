//! What checkpoints and group sync tell about themselves. Each observable occurrence is one
//! [`GroupEvent`], and telling it ([`GroupEvents::tell`]) does everything that occurrence owes
//! its readers at once: a log line when it is worth one, and the flow's group metrics and
//! status (`/metrics`, `/v1/status`). So the log and the metrics cannot disagree about what a
//! pass did, and a new occurrence is added in one place. `flow/events.rs` does the same for
//! the flow.

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use strait_wire::mm2::Checkpoint;
use tokio::time::Instant;

use super::checkpoints::error::CheckpointError;
use super::passes::{CheckpointSummary, GroupSyncSummary, SkipReason, SkippedSync};
use crate::config::FlowConfig;
use crate::metrics::GroupMetrics;

/// Who asked for a pass, which decides how its outcome is said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asked {
    /// The task's own loop: another pass follows at the next interval, so a pass that changed
    /// nothing is said at debug, and written checkpoints at most once an interval.
    ByLoop,
    /// A caller that wanted one pass (the one-shot copy's last one): its outcome is said once,
    /// at info, or at error when it failed.
    Once,
}

/// Something that happened to a flow's checkpoints or group sync.
#[derive(Debug)]
pub(crate) enum GroupEvent<'a> {
    /// `group`'s translated offset on source `topic`-`partition` could be off by `error`
    /// records (0: exact).
    TranslationError {
        group: &'a str,
        topic: &'a str,
        partition: i32,
        error: i64,
    },
    /// `checkpoint` is on the target, `latency` after its group's offsets were read (when
    /// known).
    CheckpointWritten {
        checkpoint: &'a Checkpoint,
        latency: Option<Duration>,
    },
    /// Every checkpoint of `group` carries its position as read on the source `at`.
    PositionCaptured { group: &'a str, at: SystemTime },
    /// A checkpoint pass ended. `fenced`: a newer owner of the flow's lead took the task.
    CheckpointPass {
        result: Result<&'a CheckpointSummary, &'a CheckpointError>,
        asked: Asked,
        fenced: bool,
    },
    /// Group sync committed `partitions` offsets into `group` on the target.
    SyncWritten { group: &'a str, partitions: usize },
    /// Group sync left `skip`'s group (or a partition of it) alone; `repeated`: for the reason
    /// it was left alone last pass.
    SyncSkipped {
        skip: &'a SkippedSync,
        repeated: bool,
    },
    /// A group-sync pass ended. `groups`: over every group, how many have checkpoints (the
    /// status shows how many of them match their checkpoints now); `None` for a pass over the
    /// groups whose checkpoints just changed, which leaves the status as it was.
    SyncPass {
        result: Result<&'a GroupSyncSummary, &'a CheckpointError>,
        groups: Option<usize>,
        asked: Asked,
        fenced: bool,
    },
}

/// A flow's checkpoint and group-sync handles, and where their events are told.
#[derive(Debug, Default)]
pub(crate) struct GroupEvents {
    /// `A->B`; empty for group sync run outside a flow's task.
    flow: String,
    /// The checkpoints topic.
    topic: String,
    /// How often written checkpoints are said at most (`emit.checkpoints.interval.seconds`).
    quiet: Duration,
    /// When written checkpoints were last said at info, and how many were written since.
    said_at: Option<Instant>,
    written_unsaid: usize,
    /// `None` for group sync run outside a flow's task: nothing is counted.
    metrics: Option<GroupMetrics>,
}

impl GroupEvents {
    /// The events of `flow`'s checkpoints and group sync.
    pub(crate) fn of(flow: &FlowConfig) -> Self {
        Self {
            flow: flow.name(),
            topic: flow.checkpoints_topic(),
            quiet: flow.emit_checkpoints.unwrap_or_default(),
            said_at: None,
            written_unsaid: 0,
            metrics: Some(GroupMetrics::new(flow)),
        }
    }

    /// Tells that `event` happened.
    pub(crate) fn tell(&mut self, event: GroupEvent<'_>) {
        match event {
            GroupEvent::TranslationError {
                group,
                topic,
                partition,
                error,
            } => {
                if let Some(m) = &self.metrics {
                    m.translation_error(group, topic, partition, error);
                }
            }
            GroupEvent::CheckpointWritten {
                checkpoint,
                latency,
            } => {
                tracing::debug!(
                    group = %checkpoint.group,
                    topic = %checkpoint.topic,
                    partition = checkpoint.partition,
                    upstream = checkpoint.upstream_offset,
                    downstream = checkpoint.downstream_offset,
                    "checkpoint written"
                );
                if let (Some(m), Some(latency)) = (&self.metrics, latency) {
                    m.checkpoint_written(latency);
                }
            }
            GroupEvent::PositionCaptured { group, at } => {
                if let Some(m) = &self.metrics {
                    m.position_captured(group, at);
                }
            }
            GroupEvent::CheckpointPass {
                result,
                asked,
                fenced,
            } => {
                if let Some(m) = &self.metrics {
                    match result {
                        Ok(s) => {
                            m.checkpoint_pass(s.groups.len(), s.emitted.len());
                            m.groups_now(
                                s.groups
                                    .iter()
                                    .chain(s.failures.iter().map(|f| &f.group))
                                    .chain(&s.uncarried)
                                    .map(String::as_str),
                            );
                        }
                        Err(e) => m.pass_failed(&format_args!("checkpoint pass: {e}")),
                    }
                }
                match asked {
                    Asked::ByLoop => self.say_checkpoint_pass(result, fenced),
                    Asked::Once => self.say_one_checkpoint_pass(result),
                }
            }
            GroupEvent::SyncWritten { group, partitions } => {
                if let Some(m) = &self.metrics {
                    m.sync_written(group, partitions);
                }
                tracing::info!(group = %group, partitions, "group offsets written to the target");
            }
            GroupEvent::SyncSkipped { skip, repeated } => {
                say_skip(self.metrics.as_ref(), skip, repeated)
            }
            GroupEvent::SyncPass {
                result,
                groups,
                asked,
                fenced,
            } => {
                if let (Some(m), Some(groups)) = (&self.metrics, groups) {
                    match result {
                        Ok(s) => {
                            let skipped: HashSet<&str> =
                                s.skipped.iter().map(|k| k.group.as_str()).collect();
                            m.sync_pass(groups.saturating_sub(skipped.len()), skipped.len());
                        }
                        Err(e) => m.pass_failed(&format_args!("group sync pass: {e}")),
                    }
                }
                match asked {
                    Asked::ByLoop => self.say_sync_pass(result, fenced),
                    Asked::Once => self.say_one_sync_pass(result),
                }
            }
        }
    }

    /// Says what a pass of the loop did: checkpoints written at info, but at most once per
    /// `emit.checkpoints.interval.seconds` (passes come every second), with how many were
    /// written since it was last said.
    fn say_checkpoint_pass(
        &mut self,
        result: Result<&CheckpointSummary, &CheckpointError>,
        fenced: bool,
    ) {
        let flow = self.flow.as_str();
        match result {
            Ok(s) if !s.emitted.is_empty() => {
                self.written_unsaid += s.emitted.len();
                if self.said_at.is_some_and(|at| at.elapsed() < self.quiet) {
                    return;
                }
                self.said_at = Some(Instant::now());
                tracing::info!(
                    flow = %flow,
                    topic = %self.topic,
                    groups = s.groups.len(),
                    written = std::mem::take(&mut self.written_unsaid),
                    unchanged = s.unchanged,
                    held_back = s.held_back.len(),
                    failed = s.failures.len(),
                    "checkpoints written (since this was last said)"
                );
            }
            Ok(s) => tracing::debug!(
                flow = %flow,
                groups = s.groups.len(),
                unchanged = s.unchanged,
                held_back = s.held_back.len(),
                failed = s.failures.len(),
                "no checkpoint changed"
            ),
            Err(e) if fenced => tracing::warn!(
                flow = %flow,
                topic = %self.topic,
                error = %e,
                "checkpoints fenced: another worker leads the flow now, and this one writes no \
                 more checkpoints and syncs no more groups"
            ),
            Err(e) => tracing::warn!(
                flow = %flow,
                topic = %self.topic,
                error = %e,
                "checkpoint pass failed; trying again at the next interval"
            ),
        }
    }

    /// Says what a pass asked for once did.
    fn say_one_checkpoint_pass(&self, result: Result<&CheckpointSummary, &CheckpointError>) {
        let flow = self.flow.as_str();
        match result {
            Ok(summary) => tracing::info!(
                flow = %flow,
                topic = %self.topic,
                groups = summary.groups.len(),
                written = summary.emitted.len(),
                unchanged = summary.unchanged,
                "checkpoints written"
            ),
            Err(e) => tracing::error!(flow = %flow, error = %e, "cannot write checkpoints"),
        }
    }

    /// Says what a group-sync pass of the loop did.
    fn say_sync_pass(&self, result: Result<&GroupSyncSummary, &CheckpointError>, fenced: bool) {
        let flow = self.flow.as_str();
        match result {
            Ok(s) => tracing::debug!(
                flow = %flow,
                synced_groups = s.synced_groups.len(),
                written = s.written.len(),
                skipped = s.skipped.len(),
                "group sync pass done"
            ),
            Err(e) if fenced => tracing::warn!(
                flow = %flow,
                error = %e,
                "group sync fenced: another worker leads the flow now, and this one syncs no \
                 more groups and writes no more checkpoints"
            ),
            Err(e) => tracing::warn!(
                flow = %flow,
                error = %e,
                "group sync pass failed; trying again at the next interval"
            ),
        }
    }

    /// Says what a group-sync pass asked for once did.
    fn say_one_sync_pass(&self, result: Result<&GroupSyncSummary, &CheckpointError>) {
        let flow = self.flow.as_str();
        match result {
            Ok(summary) => tracing::info!(
                flow = %flow,
                synced_groups = summary.synced_groups.len(),
                written = summary.written.len(),
                skipped = summary.skipped.len(),
                "group offsets synced"
            ),
            Err(e) => tracing::error!(flow = %flow, error = %e, "cannot sync group offsets"),
        }
    }
}

/// Counts a skip and logs it: at info (warn for a failure) when its reason is new, at debug
/// when it is the one reported last pass.
fn say_skip(metrics: Option<&GroupMetrics>, skip: &SkippedSync, repeated: bool) {
    let (topic, partition) = match &skip.partition {
        Some(tp) => (tp.topic.as_str(), Some(tp.partition)),
        None => ("", None),
    };
    let reason = &skip.reason;
    if let Some(m) = metrics {
        m.sync_skipped(&skip.group, reason.label());
    }
    if repeated {
        tracing::debug!(group = %skip.group, topic, partition, %reason, "group offsets not synced");
    } else if matches!(reason, SkipReason::Failed { .. }) {
        tracing::warn!(group = %skip.group, topic, partition, %reason, "group offsets not synced");
    } else {
        tracing::info!(group = %skip.group, topic, partition, %reason, "group offsets not synced");
    }
}

#[cfg(test)]
mod tests {
    use strait_kafka::TopicPartition;

    use super::*;
    use crate::event_capture::{self as told, Told};

    fn checkpoint(group: &str, partition: i32) -> Checkpoint {
        Checkpoint {
            group: group.into(),
            topic: "A.orders".into(),
            partition,
            upstream_offset: 10,
            downstream_offset: 7,
            metadata: String::new(),
        }
    }

    fn skip(group: &str, reason: SkipReason) -> SkippedSync {
        SkippedSync {
            group: group.into(),
            partition: Some(TopicPartition::new("A.orders", 0)),
            reason,
        }
    }

    fn failure(what: &str) -> CheckpointError {
        CheckpointError::Topic {
            topic: "A.checkpoints.internal".into(),
            message: what.into(),
        }
    }

    #[test]
    fn a_skip_is_counted_each_pass_and_said_at_info_only_when_its_reason_is_new() {
        let told = Told::new();
        let flow = told::flow("skipsrc", "skipdst", "");
        let mut events = told.run(|| GroupEvents::of(&flow));
        let active = skip(
            "g",
            SkipReason::GroupActive {
                state: "Stable".into(),
            },
        );
        told.run(|| {
            events.tell(GroupEvent::SyncSkipped {
                skip: &active,
                repeated: false,
            });
        });
        let key = "strait_group_sync_skips_total{group=g,reason=group_active}";
        assert_eq!(told.metrics()[key], 1.0);
        let log = told.log();
        assert!(log.contains(" INFO "), "{log}");
        assert!(log.contains("group offsets not synced"), "{log}");

        told.run(|| {
            events.tell(GroupEvent::SyncSkipped {
                skip: &active,
                repeated: true,
            });
        });
        assert_eq!(told.metrics()[key], 1.0, "counted again");
        let log = told.log();
        assert!(log.contains("DEBUG"), "{log}");
        assert!(log.contains("group offsets not synced"), "{log}");

        let failed = skip(
            "g",
            SkipReason::Failed {
                error: "no coordinator".into(),
            },
        );
        told.run(|| {
            events.tell(GroupEvent::SyncSkipped {
                skip: &failed,
                repeated: false,
            });
        });
        assert_eq!(
            told.metrics()["strait_group_sync_skips_total{group=g,reason=failed}"],
            1.0
        );
        assert!(told.log().contains(" WARN "));
    }

    #[test]
    fn offsets_synced_are_logged_and_counted_together() {
        let told = Told::new();
        let flow = told::flow("syncsrc", "syncdst", "");
        let mut events = told.run(|| GroupEvents::of(&flow));
        told.run(|| {
            events.tell(GroupEvent::SyncWritten {
                group: "g",
                partitions: 3,
            });
        });
        assert_eq!(
            told.metrics()["strait_group_sync_offsets_written_total{group=g}"],
            3.0
        );
        let log = told.log();
        assert!(log.contains(" INFO "), "{log}");
        assert!(log.contains("group offsets written to the target"), "{log}");
        assert!(log.contains("partitions=3"), "{log}");
    }

    #[test]
    fn a_checkpoint_written_is_logged_and_its_latency_recorded() {
        let told = Told::new();
        let flow = told::flow("cpsrc", "cpdst", "");
        let mut events = told.run(|| GroupEvents::of(&flow));
        let written = checkpoint("g", 1);
        told.run(|| {
            events.tell(GroupEvent::CheckpointWritten {
                checkpoint: &written,
                latency: Some(Duration::from_millis(12)),
            });
            events.tell(GroupEvent::CheckpointWritten {
                checkpoint: &written,
                latency: None,
            });
        });
        assert_eq!(
            told.metrics()["strait_checkpoint_latency_ms"],
            1.0,
            "one latency known"
        );
        let log = told.log();
        assert_eq!(log.matches("checkpoint written").count(), 2, "{log}");
        assert!(log.contains("downstream=7"), "{log}");
    }

    #[test]
    fn a_translation_error_is_recorded_per_group_and_partition() {
        let told = Told::new();
        let flow = told::flow("tesrc", "tedst", "");
        let mut events = told.run(|| GroupEvents::of(&flow));
        told.run(|| {
            events.tell(GroupEvent::TranslationError {
                group: "g",
                topic: "orders",
                partition: 2,
                error: 5,
            });
        });
        assert_eq!(
            told.metrics()["strait_translation_error_records{group=g,topic=orders,partition=2}"],
            5.0
        );
    }

    #[test]
    fn the_loop_says_written_checkpoints_once_an_interval_and_the_status_counts_each() {
        let told = Told::new();
        let flow = told::flow("loopsrc", "loopdst", "");
        let mut events = told.run(|| GroupEvents::of(&flow));
        let pass = |n: i32| CheckpointSummary {
            groups: vec!["g".into()],
            emitted: (0..n).map(|p| checkpoint("g", p)).collect(),
            ..CheckpointSummary::default()
        };
        let (first, second) = (pass(2), pass(3));
        told.run(|| {
            for summary in [&first, &second] {
                events.tell(GroupEvent::CheckpointPass {
                    result: Ok(summary),
                    asked: Asked::ByLoop,
                    fenced: false,
                });
            }
        });
        let log = told.log();
        assert_eq!(
            log.matches("checkpoints written (since this was last said)")
                .count(),
            1,
            "{log}"
        );
        assert!(log.contains("written=2"), "{log}");
        let groups = told::status(&flow).groups;
        assert_eq!(groups.checkpoints_written, 5);
        assert_eq!(groups.checkpointed, 1);
        assert!(groups.last_checkpoint_seconds_ago.is_some());
    }

    #[test]
    fn a_failed_pass_is_shown_and_said_as_whoever_asked_for_it_expects() {
        let told = Told::new();
        let flow = told::flow("failcpsrc", "failcpdst", "");
        let mut events = told.run(|| GroupEvents::of(&flow));
        let error = failure("unreadable");
        let tell = |events: &mut GroupEvents, asked, fenced| {
            told.run(|| {
                events.tell(GroupEvent::CheckpointPass {
                    result: Err(&error),
                    asked,
                    fenced,
                });
            });
            told.log()
        };
        let log = tell(&mut events, Asked::ByLoop, false);
        assert!(log.contains(" WARN "), "{log}");
        assert!(
            log.contains("checkpoint pass failed; trying again at the next interval"),
            "{log}"
        );
        let log = tell(&mut events, Asked::ByLoop, true);
        assert!(log.contains("checkpoints fenced"), "{log}");
        let log = tell(&mut events, Asked::Once, false);
        assert!(log.contains("ERROR"), "{log}");
        assert!(log.contains("cannot write checkpoints"), "{log}");
        let shown = told::status(&flow).groups.last_error.map(|e| e.message);
        assert_eq!(
            shown.as_deref(),
            Some("checkpoint pass: checkpoints topic A.checkpoints.internal: unreadable")
        );
    }

    #[test]
    fn only_a_sync_pass_over_every_group_is_shown() {
        let told = Told::new();
        let flow = told::flow("passsrc", "passdst", "");
        let mut events = told.run(|| GroupEvents::of(&flow));
        let summary = GroupSyncSummary {
            synced_groups: vec!["a".into()],
            skipped: vec![skip(
                "b",
                SkipReason::GroupActive {
                    state: "Stable".into(),
                },
            )],
            ..GroupSyncSummary::default()
        };
        told.run(|| {
            events.tell(GroupEvent::SyncPass {
                result: Ok(&summary),
                groups: Some(3),
                asked: Asked::ByLoop,
                fenced: false,
            });
        });
        let groups = told::status(&flow).groups;
        assert_eq!((groups.synced, groups.sync_skipped), (2, 1));
        assert!(told.log().contains("group sync pass done"));

        // A pass over the groups whose checkpoints just changed leaves the counts as they were.
        let error = failure("gone");
        told.run(|| {
            events.tell(GroupEvent::SyncPass {
                result: Ok(&GroupSyncSummary::default()),
                groups: None,
                asked: Asked::ByLoop,
                fenced: false,
            });
            events.tell(GroupEvent::SyncPass {
                result: Err(&error),
                groups: None,
                asked: Asked::ByLoop,
                fenced: false,
            });
        });
        let groups = told::status(&flow).groups;
        assert_eq!((groups.synced, groups.sync_skipped), (2, 1));
        assert!(groups.last_error.is_none());
        assert!(told
            .log()
            .contains("group sync pass failed; trying again at the next interval"));

        told.run(|| {
            events.tell(GroupEvent::SyncPass {
                result: Err(&error),
                groups: Some(3),
                asked: Asked::Once,
                fenced: false,
            });
        });
        let shown = told::status(&flow).groups.last_error.map(|e| e.message);
        assert_eq!(
            shown.as_deref(),
            Some("group sync pass: checkpoints topic A.checkpoints.internal: gone")
        );
        let log = told.log();
        assert!(log.contains("ERROR"), "{log}");
        assert!(log.contains("cannot sync group offsets"), "{log}");
    }
}
