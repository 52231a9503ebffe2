//! What the supervisor tells about the flows it keeps running. Each occurrence of a flow's life
//! (it cannot start, it failed and restarts, a unit was fenced, a worker's units changed) is
//! one [`RunEvent`] or one [`WorkerEvent`], and telling it does everything that occurrence owes
//! its readers at once: its log line, and the flow's state in `/v1/status` or its metric. So
//! the log and the status cannot disagree about what happened to a flow, as in the flow's own
//! events (`crates/strait-core/src/flow/events.rs`).

use std::time::{Duration, Instant};

use strait_core::config::{FlowConfig, WorkersConfig};
use strait_core::scale::{Ownership, Unit, UnitFilter};
use strait_core::status::{self, FlowState, WorkerStatus};

/// Something that happened to a flow, or one unit of it, kept running by the supervisor.
#[derive(Debug)]
pub(super) enum RunEvent<'a> {
    /// The flow is being started.
    Starting,
    /// Paused by an operator.
    Paused,
    /// The flow's settings are wrong: it waits for a changed config.
    CannotStart { error: &'a str },
    /// A cluster of the flow did not answer (or refused) at start: it tries again in
    /// `retry_in`, while the other flows run on.
    StartRetry { error: &'a str, retry_in: Duration },
    /// A flow run by workers cannot reach the target, where its workers' group lives: it tries
    /// again in `retry_in`.
    TargetUnreachable { error: &'a str, retry_in: Duration },
    /// The flow failed: it starts again from its offset map in `restart_in`.
    Failed {
        error: &'a str,
        restart_in: Duration,
    },
    /// Another worker owns `unit` now (it fenced this one): it starts again in `restart_in`,
    /// only if the group still gives it to this worker then.
    Fenced {
        unit: u32,
        error: &'a str,
        restart_in: Duration,
    },
}

/// Tells that `event` happened to `flow`.
pub(super) fn tell(flow: &FlowConfig, event: RunEvent<'_>) {
    let name = flow.name();
    match event {
        RunEvent::Starting => status::set_flow_state(flow, FlowState::Starting, None, None),
        RunEvent::Paused => status::set_flow_state(flow, FlowState::Paused, None, None),
        RunEvent::CannotStart { error } => {
            tracing::error!(flow = %name, error = %error, "flow cannot start: fix the config (a reload picks it up)");
            status::set_flow_state(flow, FlowState::Failed, Some(error.to_owned()), None);
        }
        RunEvent::StartRetry { error, retry_in } => {
            tracing::warn!(
                flow = %name,
                error = %error,
                retry_in_seconds = retry_in.as_secs(),
                "flow cannot start; the other flows run on, this one retries"
            );
            status::set_flow_state(flow, FlowState::Starting, Some(error.to_owned()), None);
        }
        RunEvent::TargetUnreachable { error, retry_in } => {
            tracing::warn!(flow = %name, error = %error, retry_in_seconds = retry_in.as_secs(),
                "cannot reach the target to join the workers' group; retrying");
            status::set_flow_state(flow, FlowState::Starting, Some(error.to_owned()), None);
        }
        RunEvent::Failed { error, restart_in } => {
            tracing::error!(
                flow = %name,
                error = %error,
                restart_in_seconds = restart_in.as_secs(),
                "flow failed; it restarts from its offset map"
            );
            restarting(flow, error, restart_in);
        }
        RunEvent::Fenced {
            unit,
            error,
            restart_in,
        } => {
            tracing::warn!(
                flow = %name,
                unit,
                error = %error,
                restart_in_seconds = restart_in.as_secs(),
                "unit fenced: another worker owns it now, and this one writes nothing more \
                 to it; it starts again only if the group still gives it to this worker then"
            );
            restarting(flow, error, restart_in);
        }
    }
}

/// The flow waits `restart_in` after `error` before it starts again.
fn restarting(flow: &FlowConfig, error: &str, restart_in: Duration) {
    status::set_flow_state(
        flow,
        FlowState::Restarting,
        Some(error.to_owned()),
        Some(Instant::now() + restart_in),
    );
}

/// Something that happened to this process as a worker of a flow.
#[derive(Debug)]
pub(super) enum WorkerEvent<'a> {
    /// The worker's place in the group, as of its last rebalance (told at every turn of the
    /// worker's loop, said when its generation changed).
    Owns(&'a Ownership),
    /// Unit `index` went to another worker and has stopped here.
    HandedAway { index: u32 },
}

/// Where a worker's events are told: it remembers the generation last said.
#[derive(Debug)]
pub(super) struct WorkerEvents {
    flow: FlowConfig,
    workers: WorkersConfig,
    shown_generation: i32,
}

impl WorkerEvents {
    /// The events of this process as a worker of `flow`, in the group `workers` says.
    pub(super) fn new(flow: FlowConfig, workers: WorkersConfig) -> Self {
        Self {
            flow,
            workers,
            shown_generation: i32::MIN,
        }
    }

    /// Tells that `event` happened.
    pub(super) fn tell(&mut self, event: WorkerEvent<'_>) {
        match event {
            WorkerEvent::Owns(owned) => {
                strait_core::metrics::workers_disagree(&self.flow, owned.refused.is_some());
                if owned.generation != self.shown_generation {
                    self.shown_generation = owned.generation;
                    self.show_ownership(owned);
                }
            }
            WorkerEvent::HandedAway { index } => {
                strait_core::metrics::release_unit(
                    &self.flow,
                    UnitFilter {
                        index,
                        units: self.flow.tasks_max,
                    },
                );
                tracing::info!(flow = %self.flow.name(), unit = index, "unit handed away: stopped here");
            }
        }
    }

    /// Logs the units this worker owns after a rebalance, and shows its place in `/v1/status`.
    fn show_ownership(&self, owned: &Ownership) {
        let flow = &self.flow;
        tracing::info!(flow = %flow.name(), generation = owned.generation,
            units = ?owned.units.iter().map(Unit::to_string).collect::<Vec<_>>(),
            "this worker's units");
        status::set_worker(
            flow,
            WorkerStatus {
                group: self.workers.group_id.clone(),
                member_id: owned.member_id.clone(),
                generation: owned.generation,
                leader: !owned.member_id.is_empty() && owned.leader == owned.member_id,
                members: owned.members,
                units: flow.tasks_max,
                owned: owned.units.iter().map(Unit::to_string).collect(),
                last_rebalance_ms: (owned.generation >= 0).then(unix_now_ms),
                refused: owned.refused.clone(),
            },
        );
    }
}

/// Milliseconds since the Unix epoch, now.
fn unix_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    use strait_core::config::StraitConfig;
    use strait_core::status::FlowStatus;

    use super::*;

    /// A flow from `source` to `target` run by workers; each test names clusters of its own,
    /// the status board being the process's.
    fn flow(source: &str, target: &str) -> FlowConfig {
        let text = format!(
            "clusters = {source}, {target}\n{source}.bootstrap.servers = a:9092\n\
             {target}.bootstrap.servers = b:9092\n{source}->{target}.enabled = true\n\
             {source}->{target}.tasks.max = 2\nstrait.workers.enabled = true\n"
        );
        StraitConfig::parse(&text, "test.properties")
            .expect("valid")
            .flows
            .remove(0)
    }

    fn status(flow: &FlowConfig) -> FlowStatus {
        status::snapshot()
            .flows
            .into_iter()
            .find(|f| f.flow == flow.name())
            .expect("on the board")
    }

    /// Runs `f` with a log of its own; returns what it logged.
    fn logged(f: impl FnOnce()) -> String {
        #[derive(Clone, Default)]
        struct Log(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Log {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let log = Log::default();
        let writer = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .without_time()
            .with_max_level(tracing::Level::DEBUG)
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        let bytes = log.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The values of `name`'s series in `recorder` since it was last read.
    fn gauge(snapshotter: &metrics_util::debugging::Snapshotter, name: &str) -> Vec<f64> {
        snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .filter(|(key, ..)| key.key().name() == name)
            .filter_map(|(.., value)| match value {
                DebugValue::Gauge(v) => Some(v.0),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_failed_flow_is_logged_and_shown_restarting_together() {
        let flow = flow("failrun", "failrundst");
        let log = logged(|| {
            tell(
                &flow,
                RunEvent::Failed {
                    error: "the map is unreadable",
                    restart_in: Duration::from_secs(4),
                },
            );
        });
        assert!(log.contains("ERROR"), "{log}");
        assert!(
            log.contains("flow failed; it restarts from its offset map"),
            "{log}"
        );
        assert!(log.contains("restart_in_seconds=4"), "{log}");
        let shown = status(&flow);
        assert_eq!(shown.state, FlowState::Restarting);
        assert!(shown
            .restart_in_seconds
            .is_some_and(|s| s > 3.0 && s <= 4.0));
        assert_eq!(
            shown.last_error.map(|e| e.message).as_deref(),
            Some("the map is unreadable")
        );
    }

    #[test]
    fn a_fenced_unit_is_logged_and_shown_restarting_together() {
        let flow = flow("fencerun", "fencerundst");
        let log = logged(|| {
            tell(
                &flow,
                RunEvent::Fenced {
                    unit: 1,
                    error: "fenced",
                    restart_in: Duration::from_secs(20),
                },
            );
        });
        assert!(log.contains(" WARN "), "{log}");
        assert!(
            log.contains("unit fenced: another worker owns it now"),
            "{log}"
        );
        assert!(log.contains("unit=1"), "{log}");
        assert_eq!(status(&flow).state, FlowState::Restarting);
    }

    #[test]
    fn a_flow_that_cannot_start_says_why_in_the_log_and_the_status() {
        let flow = flow("startrun", "startrundst");
        let log = logged(|| {
            tell(
                &flow,
                RunEvent::StartRetry {
                    error: "no broker answered",
                    retry_in: Duration::from_secs(2),
                },
            );
        });
        assert!(
            log.contains("flow cannot start; the other flows run on, this one retries"),
            "{log}"
        );
        let shown = status(&flow);
        assert_eq!(shown.state, FlowState::Starting);
        assert_eq!(
            shown.last_error.map(|e| e.message).as_deref(),
            Some("no broker answered")
        );

        let log = logged(|| tell(&flow, RunEvent::CannotStart { error: "bad key" }));
        assert!(log.contains("ERROR"), "{log}");
        assert!(log.contains("flow cannot start: fix the config"), "{log}");
        assert_eq!(status(&flow).state, FlowState::Failed);
    }

    #[test]
    fn ownership_sets_the_gauge_each_time_and_is_said_once_a_generation() {
        let flow = flow("ownrun", "ownrundst");
        let workers = flow.workers.clone().expect("run by workers");
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let mut events = WorkerEvents::new(flow.clone(), workers);
        let refused = Ownership {
            generation: 3,
            member_id: "me".into(),
            leader: "me".into(),
            refused: Some("tasks.max differs".into()),
            ..Ownership::default()
        };
        metrics::with_local_recorder(&recorder, || {
            let log = logged(|| events.tell(WorkerEvent::Owns(&refused)));
            assert_eq!(log.matches("this worker's units").count(), 1, "{log}");
            assert_eq!(gauge(&snapshotter, "strait_workers_disagree"), [1.0]);
            let log = logged(|| events.tell(WorkerEvent::Owns(&refused)));
            assert_eq!(log, "", "the same generation is said once");
            assert_eq!(gauge(&snapshotter, "strait_workers_disagree"), [1.0]);
            let agreed = Ownership {
                generation: 4,
                refused: None,
                ..refused.clone()
            };
            let log = logged(|| events.tell(WorkerEvent::Owns(&agreed)));
            assert!(log.contains("generation=4"), "{log}");
            assert_eq!(gauge(&snapshotter, "strait_workers_disagree"), [0.0]);
        });
        let worker = status(&flow).worker.expect("a worker");
        assert_eq!(worker.generation, 4);
        assert!(worker.leader);
        assert_eq!(worker.refused, None);
    }

    #[test]
    fn a_unit_handed_away_is_logged_and_its_gauges_released_together() {
        let flow = flow("awayrun", "awayrundst");
        let workers = flow.workers.clone().expect("run by workers");
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let mut events = WorkerEvents::new(flow, workers);
        metrics::with_local_recorder(&recorder, || {
            let log = logged(|| events.tell(WorkerEvent::HandedAway { index: 1 }));
            assert!(log.contains("unit handed away: stopped here"), "{log}");
            assert!(log.contains("unit=1"), "{log}");
            assert_eq!(gauge(&snapshotter, "strait_flow_stalled"), [0.0]);
        });
    }
}
