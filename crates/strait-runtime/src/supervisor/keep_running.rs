//! One flow, or one unit of a flow run by workers, kept running for as long as the runtime runs
//! and the operator wants it: started when its clusters answer, restarted after failures with
//! a backoff, paused and resumed on request. A unit fenced by its next owner stops for good.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt as _;
use strait_core::acls::AclSyncTask;
use strait_core::config::{FlowConfig, StraitConfig};
use strait_kafka::backoff::Backoff;
use strait_kafka::lease::Lease;
use tokio::sync::watch;

use super::events::{tell, RunEvent};
use super::{any_stop, Desired, FIRST_ANSWER, RESTART_FIRST, RESTART_MAX};
use crate::error::Error;
use crate::flow::{connect_flow, run_flow, StartedFlow, Stop, Until};
use crate::http::Api;

/// A run this long resets the backoff: the flow's next failure is a new story.
const HEALTHY_RUN: Duration = Duration::from_secs(600);

/// `flow`, or with `unit` one unit of it under its worker's lease, until the runtime stops,
/// the operator stops it, or (a unit) its worker lost its place.
pub(super) async fn keep_running(
    config: Arc<StraitConfig>,
    flow: FlowConfig,
    unit: Option<(u32, Lease)>,
    mut desired: watch::Receiver<Desired>,
    stop: Stop,
    api: Arc<Api>,
) {
    let (unit, lease) = match unit {
        Some((index, lease)) => (Some(index), Some(lease)),
        None => (None, None),
    };
    let mut backoff = Backoff::new(RESTART_FIRST, RESTART_MAX);
    loop {
        if stop.clone().now_or_never().is_some() {
            return;
        }
        // A unit whose worker lost its place writes nothing more under that lease: the
        // worker starts it again under a new one if the group hands it back.
        if lease.as_ref().is_some_and(Lease::is_revoked) {
            return;
        }
        let now = *desired.borrow_and_update();
        match now {
            Desired::Stop => return,
            Desired::Pause => {
                tell(&flow, RunEvent::Paused);
                tokio::select! {
                    () = stop.clone() => return,
                    _ = desired.changed() => continue,
                }
            }
            Desired::Run => {}
        }
        tell(&flow, RunEvent::Starting);
        // Wakes when the runtime stops or the operator wants anything but `Run`.
        let interrupt = any_stop(stop.clone(), desired.clone(), |d| *d != Desired::Run);
        let connected = tokio::select! {
            connected = connect_flow(&config, &flow, unit, lease.clone(), FIRST_ANSWER) => connected,
            () = interrupt.clone() => continue,
        };
        let (started, live, acls) = match connected {
            Ok(c) => c,
            Err(e) => {
                wait_to_start_again(&flow, &e, &mut backoff, interrupt).await;
                continue;
            }
        };
        // A unit's API entry would go stale when the unit moves: a flow run by workers is
        // served by its worker instead (`worker.rs`).
        if let (Some(live), None) = (live, unit) {
            api.set(&flow, Some(live));
        }
        let began = Instant::now();
        let result = run_once(started, acls, interrupt.clone()).await;
        if began.elapsed() >= HEALTHY_RUN {
            backoff = Backoff::new(RESTART_FIRST, RESTART_MAX);
        }
        if let Err(e) = result {
            if lease.as_ref().is_some_and(Lease::is_revoked) {
                tracing::warn!(flow = %flow.name(), unit = unit.unwrap_or_default(), error = %e.report(),
                    "unit stopped: its worker lost its place in the group, so it writes nothing more here");
                return;
            }
            // Fenced by a newer owner, or its worker's lease lapsed (every write refused).
            let fenced = e.is_fenced() || lease.as_ref().is_some_and(|l| !l.is_valid());
            let wait = restart_wait(&flow, fenced, &mut backoff);
            let error = e.report();
            tell(
                &flow,
                if fenced {
                    RunEvent::Fenced {
                        unit: unit.unwrap_or_default(),
                        error: &error,
                        restart_in: wait,
                    }
                } else {
                    RunEvent::Failed {
                        error: &error,
                        restart_in: wait,
                    }
                },
            );
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = interrupt => {}
            }
        }
    }
}

/// Runs a started flow, with its topic ACL sync beside it, until it ends or `interrupt`.
async fn run_once(
    started: StartedFlow,
    acls: Option<AclSyncTask>,
    interrupt: Stop,
) -> Result<(), Error> {
    let acl_task = acls.map(|mut task| {
        let stop = interrupt.clone();
        tokio::spawn(async move { task.run(stop).await })
    });
    let outcome = run_flow(started, Until::Stopped, interrupt).await;
    if let Some(task) = acl_task {
        task.abort();
    }
    outcome.result
}

/// A flow that did not start: a wrong setting waits for the operator (a reload, a pause), a
/// cluster that did not answer for the backoff's next wait; both say why in the log and the
/// status (`events.rs`). Returns early on `interrupt`.
async fn wait_to_start_again(flow: &FlowConfig, e: &Error, backoff: &mut Backoff, interrupt: Stop) {
    let error = e.report();
    if !e.can_retry() {
        tell(flow, RunEvent::CannotStart { error: &error });
        interrupt.await;
        return;
    }
    let wait = backoff.next_wait();
    tell(
        flow,
        RunEvent::StartRetry {
            error: &error,
            retry_in: wait,
        },
    );
    tokio::select! {
        () = tokio::time::sleep(wait) => {}
        () = interrupt => {}
    }
}

/// How long a flow that failed waits before it starts again: the backoff's next wait, or for a
/// unit `fenced` by its next owner two session timeouts (see below).
fn restart_wait(flow: &FlowConfig, fenced: bool, backoff: &mut Backoff) -> Duration {
    if !fenced {
        return backoff.next_wait();
    }
    // Another owner initialised the unit's transactional id: this worker was removed from the
    // group (it learns so from its next heartbeat, and then stops the unit), or the coordinator
    // aborted a transaction that outlived `transaction.timeout.ms`. Only in the second case does
    // the unit still belong here two session timeouts later: then it starts again.
    flow.workers
        .as_ref()
        .map_or(RESTART_MAX, |w| w.session_timeout * 2)
}
