//! A one-shot copy's place in its flow's workers' group (`docs/design.md` §7.6): the copy joins
//! the group as a worker of its own that claims every unit of the flow, and writes under that
//! worker's lease (`strait_kafka::lease`), as a `strait run` worker's units do.
//!
//! The group is the fence. A `strait run` worker that starts mid-copy joins the group; the
//! leader never hands it a unit that the copy still claims ([`strait_core::scale::hand_over`]):
//! the copy is not given back the units the balance moves away, and so learns, at that
//! rebalance, that a worker wants them. It then stops between rounds, writes its map, and
//! leaves the group; only then are the units handed to the worker, whose units start from
//! that map and match what the copy wrote beyond it. The copy gives way, not the worker: it is
//! the one meant to end. A copy that loses its place (no answer from the coordinator within
//! the session timeout) has its lease lapse before the group can hand its units on, so its
//! late writes are refused unsent.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::FutureExt as _;
use strait_core::config::{FlowConfig, WorkersConfig};
use strait_core::scale::{Agreement, Ownership, Unit, Worker, WorkerError, PROTOCOL_TYPE};
use strait_kafka::lease::Lease;
use strait_kafka::membership::MembershipConfig;
use strait_kafka::Client;
use tokio::sync::{oneshot, watch};

use crate::error::Error;

/// How long a copy waits for the group to hand it every unit before it gives up: a rebalance
/// (the coordinator holds a join up to the rebalance timeout) and a session timeout.
const FIRST_GENERATION: Duration = Duration::from_secs(60);

/// How long a copy that ends waits for its worker to leave the group.
const LEAVE_PATIENCE: Duration = Duration::from_secs(5);

/// A one-shot copy's membership of one flow's workers' group, owning every unit.
#[derive(Debug)]
pub(super) struct CopyMember {
    flow: String,
    group: String,
    target: String,
    all: BTreeSet<Unit>,
    ownership: watch::Receiver<Ownership>,
    running: watch::Sender<BTreeSet<Unit>>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), WorkerError>>>,
}

impl CopyMember {
    /// Joins `flow`'s workers' group through `target` and waits until the group hands this
    /// copy every unit of the flow. [`Error::WorkersJoined`] when it hands some to a worker
    /// (one joined since the copy looked), before anything is written.
    pub(super) async fn join(
        target: Client,
        flow: &FlowConfig,
        workers: &WorkersConfig,
    ) -> Result<Self, Error> {
        let name = flow.name();
        let all: BTreeSet<Unit> = Unit::all_of(&name, flow.tasks_max).collect();
        let membership = MembershipConfig {
            session_timeout: workers.session_timeout,
            ..MembershipConfig::new(workers.group_id.clone(), PROTOCOL_TYPE)
        };
        // The copy runs every unit from the start, until it says otherwise ([`Self::leave`]).
        let (running, running_rx) = watch::channel(all.clone());
        let mut worker = Worker::new(target, membership, all.clone())
            .with_agreement(Agreement {
                units: flow.tasks_max.max(1),
                fingerprint: flow.workers_fingerprint(),
            })
            .with_running(running_rx);
        let mut ownership = worker.ownership();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move { worker.run(stopped.map(|_| ())).await });
        let mut member = CopyMember {
            flow: name,
            group: workers.group_id.clone(),
            target: flow.target.as_str().to_owned(),
            all,
            ownership: ownership.clone(),
            running,
            stop: Some(stop),
            task: Some(task),
        };
        let first = async {
            loop {
                if ownership.borrow_and_update().generation >= 0 {
                    return true;
                }
                if ownership.changed().await.is_err() {
                    return false;
                }
            }
        };
        let joined = tokio::time::timeout(FIRST_GENERATION, first).await;
        if joined != Ok(true) {
            let why = match member.task.take() {
                Some(task) if task.is_finished() => match task.await {
                    Ok(Err(e)) => e.to_string(),
                    _ => "its membership ended".to_owned(),
                },
                Some(task) => {
                    task.abort();
                    format!("no generation formed within {FIRST_GENERATION:?}")
                }
                None => "its membership ended".to_owned(),
            };
            return Err(Error::WorkersUnknown {
                flow: member.flow.clone(),
                group: member.group.clone(),
                target: member.target.clone(),
                source: strait_kafka::Error::Invalid(format!(
                    "the copy could not join the workers' group: {why}"
                )),
            });
        }
        if !member.owns_all() {
            let e = member.joined_error();
            member.leave().await;
            return Err(e);
        }
        tracing::info!(flow = %member.flow, group = %member.group,
            "the copy owns every unit of the flow in its workers' group: a `strait run` worker \
             that starts now waits for the copy to give them up");
        Ok(member)
    }

    /// The lease the copy writes under.
    pub(super) fn lease(&self) -> Lease {
        self.ownership.borrow().lease.clone()
    }

    /// Whether the group still leaves every unit with this copy.
    pub(super) fn owns_all(&self) -> bool {
        let ownership = self.ownership.borrow();
        ownership.generation >= 0 && ownership.units == self.all && ownership.refused.is_none()
    }

    /// Resolves once the group no longer leaves every unit with this copy: a worker joined and
    /// the balance moves units to it, or the copy lost its place.
    pub(super) fn lost(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut ownership = self.ownership.clone();
        let all = self.all.clone();
        async move {
            loop {
                {
                    let now = ownership.borrow_and_update();
                    if now.generation < 0 || now.units != all || now.refused.is_some() {
                        return;
                    }
                }
                if ownership.changed().await.is_err() {
                    return;
                }
            }
        }
    }

    /// The error a copy that gave way to a worker ends with.
    pub(super) fn joined_error(&self) -> Error {
        Error::WorkersJoined {
            flow: self.flow.clone(),
            group: self.group.clone(),
            target: self.target.clone(),
        }
    }

    /// The copy no longer writes: its units are released and it leaves the group, so that the
    /// workers take them at once.
    pub(super) async fn leave(&mut self) {
        self.running.send_replace(BTreeSet::new());
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            match tokio::time::timeout(LEAVE_PATIENCE, task).await {
                Ok(Ok(Err(e))) => {
                    tracing::warn!(flow = %self.flow, group = %self.group, error = %e,
                        "the copy's membership of the workers' group ended with an error");
                }
                Ok(_) => {}
                Err(_) => tracing::warn!(flow = %self.flow, group = %self.group,
                    "the copy did not leave the workers' group in time; its place ends with its session timeout"),
            }
        }
    }
}

/// A copy dropped without [`CopyMember::leave`] (interrupted): its membership ends with it, and
/// the group forgets it after its session timeout.
impl Drop for CopyMember {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
