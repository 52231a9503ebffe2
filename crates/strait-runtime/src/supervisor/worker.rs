//! A flow run by workers (`strait.workers.enabled`, `docs/design.md` §7): this process joins
//! the flow's workers' group on its target cluster and runs the units the group's leader hands
//! it, each under [`keep_running`] as a flow of its own. A unit handed to another worker is
//! stopped after its round (its next owner's initialisation fences whatever it still tries);
//! the units it keeps run on through a rebalance. Paused, the worker runs none of its units
//! but stays in the group, so they are not mirrored by anyone until it resumes; stopped, it
//! leaves the group, so the others take its units at once.
//!
//! Every worker serves the flow's HTTP API whatever units it runs ([`serve_api_as_worker`]),
//! and the one that runs unit 0 [`leads`] the flow: it writes the flow's heartbeats.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use strait_core::config::{FlowConfig, Role, Side, StraitConfig};
use strait_core::internal::map_store::MapStore;
use strait_core::scale::{Agreement, Ownership, Unit, Worker, PROTOCOL_TYPE};
use strait_kafka::backoff::Backoff;
use strait_kafka::membership::MembershipConfig;
use strait_kafka::Client;
use strait_wire::offset_map::OffsetMap;
use tokio::sync::watch;

use super::events::{tell, RunEvent, WorkerEvent, WorkerEvents};
use super::keep_running::keep_running;
use super::{any_stop, Desired, FIRST_ANSWER, RESTART_FIRST, RESTART_MAX};
use crate::flow::Stop;
use crate::http::{Api, ApiFlow};

/// How often a worker reads a flow's map again for its HTTP API: the checkpoint interval, at
/// most this.
const API_MAP_EVERY: Duration = Duration::from_secs(10);

/// The flow `flow` run by workers, for as long as the runtime runs and the operator wants it
/// (see the module's doc).
pub(super) async fn keep_running_as_worker(
    config: Arc<StraitConfig>,
    flow: FlowConfig,
    desired: watch::Receiver<Desired>,
    stop: Stop,
    api: Arc<Api>,
) {
    let name = flow.name();
    let Some(workers) = flow.workers.clone() else {
        return;
    };
    let leave = any_stop(stop.clone(), desired.clone(), |d| *d == Desired::Stop);
    let Some(client) = join_target(&config, &flow, leave.clone()).await else {
        return;
    };
    let membership = MembershipConfig {
        session_timeout: workers.session_timeout,
        instance_id: workers.instance_id.clone(),
        ..MembershipConfig::new(workers.group_id.clone(), PROTOCOL_TYPE)
    };
    let serving = tokio::spawn(serve_api_as_worker(
        Arc::clone(&config),
        flow.clone(),
        client.clone(),
        Arc::clone(&api),
    ));
    let (running_tx, running_rx) = watch::channel(BTreeSet::new());
    let mut worker = Worker::new(
        client,
        membership,
        Unit::all_of(&name, flow.tasks_max).collect(),
    )
    .with_agreement(Agreement {
        units: flow.tasks_max.max(1),
        fingerprint: flow.workers_fingerprint(),
    })
    .with_running(running_rx);
    let mut ownership = worker.ownership();
    let member = tokio::spawn({
        let leave = leave.clone();
        let name = name.clone();
        async move {
            if let Err(e) = worker.run(leave).await {
                tracing::error!(flow = %name, error = %e, "this worker cannot be a member of the workers' group; it runs none of the flow's units");
            }
        }
    });
    tracing::info!(flow = %name, group = %workers.group_id, units = flow.tasks_max, "joining the workers' group");
    let mut units = Units {
        config,
        flow: flow.clone(),
        stop,
        api,
        running: BTreeMap::new(),
        told: running_tx,
        events: WorkerEvents::new(flow.clone(), workers.clone()),
    };
    let mut wanted = desired;
    loop {
        // A unit whose run ended (fenced by a newer owner) starts again if handed back.
        units.running.retain(|_, (_, task)| !task.is_finished());
        units.tell();
        let now_owned = ownership.borrow_and_update().clone();
        units.events.tell(WorkerEvent::Owns(&now_owned));
        let owned: Vec<u32> = now_owned.units.iter().map(|u| u.index).collect();
        leads(&name).send_if_modified(|l| std::mem::replace(l, owned.contains(&0)) != *l);
        let now = *wanted.borrow_and_update();
        units.stop_lost(&owned).await;
        for (unit_desired, _) in units.running.values() {
            unit_desired.send_if_modified(|d| std::mem::replace(d, now) != now);
        }
        units.start_owned(&owned, &now_owned, now);
        tokio::select! {
            changed = ownership.changed() => if changed.is_err() { break },
            changed = wanted.changed() => if changed.is_err() { break },
            () = leave.clone() => break,
        }
    }
    units.stop_all().await;
    serving.abort();
    leads(&name).send_replace(false);
    let _ = member.await;
}

/// A client of the flow's target, where its workers' group lives; a cluster that does not
/// answer yet is joined once it does. `None` when the flow's settings are wrong (said in the
/// log and the status), or when `leave` comes first.
async fn join_target(config: &StraitConfig, flow: &FlowConfig, leave: Stop) -> Option<Client> {
    let c = match config.client_config(flow, Side::Target, Role::Producer) {
        Ok(c) => c,
        Err(e) => {
            tell(
                flow,
                RunEvent::CannotStart {
                    error: &e.to_string(),
                },
            );
            return None;
        }
    };
    let mut backoff = Backoff::new(RESTART_FIRST, RESTART_MAX);
    loop {
        // A stop, or the flow leaving the config, does not wait for an answer.
        let connected = tokio::select! {
            connected = Client::connect_within(c.clone(), FIRST_ANSWER) => connected,
            () = leave.clone() => return None,
        };
        match connected {
            Ok(client) => return Some(client),
            Err(e) => {
                let wait = backoff.next_wait();
                tell(
                    flow,
                    RunEvent::TargetUnreachable {
                        error: &e.to_string(),
                        retry_in: wait,
                    },
                );
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = leave.clone() => return None,
                }
            }
        }
    }
}

/// The units of a flow that run in this process, each under [`keep_running`].
struct Units {
    config: Arc<StraitConfig>,
    flow: FlowConfig,
    stop: Stop,
    api: Arc<Api>,
    /// By index: what the operator wants of the unit, and its task.
    running: BTreeMap<u32, (watch::Sender<Desired>, tokio::task::JoinHandle<()>)>,
    /// Which units still run here, for the worker: a unit handed away is released to its next
    /// owner only once it has stopped.
    told: watch::Sender<BTreeSet<Unit>>,
    /// Where the worker's ownership and the units it hands away are told (`events.rs`).
    events: WorkerEvents,
}

impl Units {
    /// Tells the worker which units run here now.
    fn tell(&self) {
        let name = self.flow.name();
        let now: BTreeSet<Unit> = self
            .running
            .keys()
            .map(|i| Unit::new(name.as_str(), *i))
            .collect();
        self.told
            .send_if_modified(|was| std::mem::replace(was, now.clone()) != now);
    }

    /// Stops the units handed to another worker, each after its round.
    async fn stop_lost(&mut self, owned: &[u32]) {
        let lost: Vec<u32> = self
            .running
            .keys()
            .filter(|i| !owned.contains(i))
            .copied()
            .collect();
        for index in &lost {
            if let Some((unit_desired, _)) = self.running.get(index) {
                let _ = unit_desired.send(Desired::Stop);
            }
        }
        for index in lost {
            if let Some((_, task)) = self.running.remove(&index) {
                let _ = task.await;
                self.events.tell(WorkerEvent::HandedAway { index });
            }
        }
        self.tell();
    }

    /// Starts the units handed to this worker that do not run here yet.
    fn start_owned(&mut self, owned: &[u32], ownership: &Ownership, now: Desired) {
        for &index in owned {
            if self.running.contains_key(&index) {
                continue;
            }
            tracing::info!(flow = %self.flow.name(), unit = index, "unit handed to this worker: starting");
            let (tx, rx) = watch::channel(now);
            let run = keep_running(
                Arc::clone(&self.config),
                self.flow.clone(),
                Some((index, ownership.lease.clone())),
                rx,
                self.stop.clone(),
                Arc::clone(&self.api),
            );
            let start_after = ownership.start_after;
            let task = tokio::spawn(async move {
                // A static worker that took another process's place waits out its lease.
                if let Some(at) = start_after {
                    tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
                }
                run.await;
            });
            self.running.insert(index, (tx, task));
        }
        self.tell();
    }

    /// Stops every unit and waits for them, telling the worker as each stops: it keeps their
    /// lease until none runs (`Worker::run`), so that each finishes its round under it.
    async fn stop_all(mut self) {
        for (unit_desired, _) in self.running.values() {
            let _ = unit_desired.send(Desired::Stop);
        }
        let indexes: Vec<u32> = self.running.keys().copied().collect();
        for index in indexes {
            if let Some((_, task)) = self.running.remove(&index) {
                let _ = task.await;
            }
            self.tell();
        }
    }
}

/// The HTTP API of a flow run by workers, from every worker whatever units it runs
/// (`/v1/translate`, `/v1/groups/GROUP`): the map as all units write it, read from the map topic
/// on the target now and followed every capture interval (`strait.checkpoints.capture.interval.ms`,
/// at most 10 s; only what was written since is read), and a client of the
/// source for group offsets, connected once it answers.
async fn serve_api_as_worker(
    config: Arc<StraitConfig>,
    flow: FlowConfig,
    target: Client,
    api: Arc<Api>,
) {
    let Ok(source_config) = config.client_config(&flow, Side::Source, Role::Consumer) else {
        return;
    };
    let mut backoff = Backoff::new(RESTART_FIRST, RESTART_MAX);
    let source = loop {
        match Client::connect_within(source_config.clone(), FIRST_ANSWER).await {
            Ok(client) => break client,
            Err(_) => tokio::time::sleep(backoff.next_wait()).await,
        }
    };
    let alias = flow.source_alias.as_str().to_owned();
    let initial = match MapStore::read(&target, &alias).await {
        Ok(map) => map,
        Err(e) => {
            tracing::warn!(flow = %flow.name(), error = %e,
                "cannot read the offset map for the HTTP API yet; trying again shortly");
            OffsetMap::default()
        }
    };
    // As fresh as the positions the flow captures (`/v1/readiness` compares them with it).
    let every = flow
        .checkpoints_capture
        .into_iter()
        .chain(flow.emit_checkpoints)
        .fold(API_MAP_EVERY, std::cmp::min);
    let map = MapStore::follow(target.clone(), alias, Arc::new(initial), every);
    api.set(
        &flow,
        Some(ApiFlow {
            config: flow.clone(),
            source,
            target,
            map,
        }),
    );
    // The follower reads for as long as the API entry holds its receiver.
}

/// Whether this process leads the flow named `name` (runs its unit 0), for the work only one
/// worker does beside the units: its heartbeats.
pub(super) fn leads(name: &str) -> watch::Sender<bool> {
    static LEADS: std::sync::OnceLock<std::sync::Mutex<BTreeMap<String, watch::Sender<bool>>>> =
        std::sync::OnceLock::new();
    LEADS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .entry(name.to_owned())
        .or_insert_with(|| watch::Sender::new(false))
        .clone()
}
