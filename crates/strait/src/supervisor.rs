//! `strait run` until stopped: every flow of the config kept running on its own, under the
//! operator's hand (`docs/deploying.md`, "Runtime control").
//!
//! - **Each flow on its own.** A flow whose cluster does not answer at start waits and retries
//!   while the others run; a flow that fails starts again after a backoff (1 s doubling to
//!   5 min, reset once a run lasted 10 min), saying why in the log and in `/v1/status`. Only
//!   an error in the flow's settings waits for a changed file.
//! - **Pause and resume** (`POST /v1/flows/{flow}/pause|resume`, `strait flow pause|resume`):
//!   a paused flow finishes its round, writes its map and stops reading; resumed, it goes on
//!   from its map. Pauses live in this process: a restart runs every enabled flow.
//! - **Reload** on SIGHUP, on `POST /v1/reload`, or when the config file's bytes change
//!   (checked every 5 s unless `--no-watch-config`): the file is read again and only the flows
//!   whose settings changed (their own keys, or their clusters') restart; new flows start,
//!   removed ones stop, the others keep flowing. A file that does not parse changes nothing.
//! - **SIGTERM or Ctrl-C**: every flow finishes its round (in-flight writes are acknowledged),
//!   writes its map and offset syncs, and the process exits 0.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::FutureExt as _;
use serde_json::{json, Value};
use strait_core::config::{ClusterConfig, FlowConfig, HeartbeatEmitter, Role, Side, StraitConfig};
use strait_core::flow::FlowError;
use strait_core::heartbeats::HeartbeatTask;
use strait_core::internal::map_store::MapStore;
use strait_core::scale::{Agreement, Unit, UnitFilter, Worker, PROTOCOL_TYPE};
use strait_core::status::{self, FlowState, WorkerStatus};
use strait_kafka::backoff::Backoff;
use strait_kafka::lease::Lease;
use strait_kafka::membership::MembershipConfig;
use strait_kafka::Client;
use strait_wire::offset_map::OffsetMap;
use tokio::sync::{mpsc, watch};

use crate::http::{Api, ControlRequest};
use crate::runtime::{Stop, Until};

/// How often the config file is compared with what was last loaded.
const WATCH_EVERY: Duration = Duration::from_secs(5);
/// The first wait before a failed flow starts again; it doubles up to [`RESTART_MAX`].
const RESTART_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between two starts of a failing flow.
const RESTART_MAX: Duration = Duration::from_secs(300);
/// How long one start waits for a broker of each cluster to answer before it says why (in the
/// log and `/v1/status`) and waits to try again; Kafka's own clients would wait
/// `default.api.timeout.ms` (60 s) in silence.
const FIRST_ANSWER: Duration = Duration::from_secs(10);
/// A run this long resets the backoff: the flow's next failure is a new story.
const HEALTHY_RUN: Duration = Duration::from_secs(600);

/// What the operator wants of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Desired {
    Run,
    Pause,
    /// Removed from the config, or about to restart with new settings.
    Stop,
}

/// Everything a flow's behaviour depends on: its resolved keys and both clusters' settings.
/// Two equal identities mirror the same way, so a reload leaves such a flow alone.
#[derive(Debug, Clone, PartialEq)]
struct FlowIdentity {
    flow: FlowConfig,
    source: Option<ClusterConfig>,
    target: Option<ClusterConfig>,
}

impl FlowIdentity {
    fn of(config: &StraitConfig, flow: &FlowConfig) -> Self {
        Self {
            flow: flow.clone(),
            source: config.cluster(flow.source.as_str()).cloned(),
            target: config.cluster(flow.target.as_str()).cloned(),
        }
    }
}

/// One supervised flow.
#[derive(Debug)]
struct Supervised {
    identity: FlowIdentity,
    desired: watch::Sender<Desired>,
    task: tokio::task::JoinHandle<()>,
}

/// The heartbeat writers, restarted as one when their settings change.
#[derive(Debug)]
struct Heartbeats {
    identity: (Vec<HeartbeatEmitter>, Vec<ClusterConfig>),
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// The options of `strait run` that the supervisor needs.
#[derive(Debug, Clone)]
pub(crate) struct RunOptions {
    /// The config file.
    pub(crate) path: PathBuf,
    /// Where the HTTP API listens.
    pub(crate) listen: Option<std::net::SocketAddr>,
    /// Reload when the file's bytes change.
    pub(crate) watch_config: bool,
}

/// Runs every enabled flow of the file until SIGTERM or Ctrl-C. A file that does not parse at
/// start is an error; after that, nothing a flow meets ends the process.
pub(crate) async fn run(options: RunOptions) -> anyhow::Result<()> {
    let loaded = std::fs::read(&options.path).unwrap_or_default();
    let config = StraitConfig::load(&options.path)?;
    // Bound first, so a taken port stops start-up before anything is mirrored.
    let listener = match options.listen {
        Some(addr) => Some(crate::http::bind(addr).await?),
        None => None,
    };
    let stop: Stop = async {
        crate::runtime::shutdown_signal().await;
        tracing::info!("stopping: every flow finishes its current round and writes its offset map");
    }
    .boxed()
    .shared();
    let (control, mut requests) = mpsc::channel(16);
    let api = Arc::new(Api::with_control(control));
    let http = listener.map(|listener| {
        if let Ok(addr) = listener.local_addr() {
            tracing::info!(%addr, "HTTP API listening (/healthz, /readyz, /v1/status, /v1/translate, /v1/groups/GROUP, /metrics)");
        }
        tokio::spawn(crate::http::serve(listener, Arc::clone(&api), stop.clone()))
    });
    let mut supervisor = Supervisor {
        path: options.path.clone(),
        api,
        stop: stop.clone(),
        flows: BTreeMap::new(),
        heartbeats: None,
        loaded,
    };
    supervisor.apply(config).await;
    let mut hangup = hangup_signal();
    let mut watch = tokio::time::interval(WATCH_EVERY);
    watch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut stopped = stop.clone();
    loop {
        tokio::select! {
            () = &mut stopped => break,
            Some(()) = hangup.recv() => {
                tracing::info!(config = %options.path.display(), "SIGHUP: reading the config again");
                let _ = supervisor.reload().await;
            }
            _ = watch.tick(), if options.watch_config => {
                // A file being written may be read half-way: it fails to parse, changes
                // nothing, and the next look reads it whole.
                if let Ok(bytes) = std::fs::read(&options.path) {
                    if bytes != supervisor.loaded {
                        tracing::info!(config = %options.path.display(), "the config file changed: reading it again");
                        let _ = supervisor.reload().await;
                    }
                }
            }
            Some(request) = requests.recv() => supervisor.handle(request).await,
        }
    }
    supervisor.shutdown().await;
    if let Some(http) = http {
        let _ = http.await;
    }
    Ok(())
}

/// SIGHUP as a stream of `()`; never fires where there are no such signals.
fn hangup_signal() -> mpsc::Receiver<()> {
    let (tx, rx) = mpsc::channel(1);
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::hangup()) {
            Ok(mut hup) => {
                tokio::spawn(async move {
                    while hup.recv().await.is_some() {
                        let _ = tx.try_send(());
                    }
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGHUP: reload with POST /v1/reload")
            }
        }
    }
    #[cfg(not(unix))]
    drop(tx);
    rx
}

struct Supervisor {
    path: PathBuf,
    api: Arc<Api>,
    stop: Stop,
    flows: BTreeMap<String, Supervised>,
    heartbeats: Option<Heartbeats>,
    /// The bytes of the file as last read, to notice a change.
    loaded: Vec<u8>,
}

impl Supervisor {
    /// Makes the running flows and heartbeats those of `config`: starts new ones, restarts
    /// changed ones, stops removed ones. What it did, by flow name.
    async fn apply(&mut self, config: StraitConfig) -> Value {
        for warning in &config.warnings {
            tracing::warn!("{}: {warning}", self.path.display());
        }
        let config = Arc::new(config);
        let wanted: BTreeMap<String, FlowIdentity> = config
            .flows
            .iter()
            .map(|f| (f.name(), FlowIdentity::of(&config, f)))
            .collect();
        let (mut started, mut restarted, mut stopped, mut unchanged) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        // Removed flows and changed ones stop first, each after its current round.
        let mut paused = Vec::new();
        let mut ending = Vec::new();
        for (name, flow) in std::mem::take(&mut self.flows) {
            match wanted.get(&name) {
                Some(identity) if *identity == flow.identity => {
                    unchanged.push(name.clone());
                    self.flows.insert(name, flow);
                }
                Some(_) => {
                    if *flow.desired.borrow() == Desired::Pause {
                        paused.push(name.clone());
                    }
                    restarted.push(name.clone());
                    ending.push(flow);
                }
                None => {
                    stopped.push(name.clone());
                    ending.push(flow);
                }
            }
        }
        for flow in &ending {
            let _ = flow.desired.send(Desired::Stop);
        }
        for flow in ending {
            let _ = flow.task.await;
        }
        for name in &stopped {
            self.api.remove(name);
            status::forget_flow(name);
            tracing::info!(flow = %name, "flow removed from the config: stopped");
        }
        for flow in &config.flows {
            let name = flow.name();
            if self.flows.contains_key(&name) {
                continue;
            }
            let desired = if paused.contains(&name) {
                Desired::Pause
            } else {
                Desired::Run
            };
            if restarted.contains(&name) {
                tracing::info!(flow = %name, "flow settings changed: restarted");
            } else {
                started.push(name.clone());
            }
            let (tx, rx) = watch::channel(desired);
            self.api.set(flow, None);
            let task = if flow.workers.is_some() {
                tokio::spawn(keep_running_as_worker(
                    Arc::clone(&config),
                    flow.clone(),
                    rx,
                    self.stop.clone(),
                    Arc::clone(&self.api),
                ))
            } else {
                tokio::spawn(keep_running(
                    Arc::clone(&config),
                    flow.clone(),
                    None,
                    rx,
                    self.stop.clone(),
                    Arc::clone(&self.api),
                ))
            };
            self.flows.insert(
                name.clone(),
                Supervised {
                    identity: wanted[&name].clone(),
                    desired: tx,
                    task,
                },
            );
        }
        self.apply_heartbeats(&config).await;
        json!({
            "started": started,
            "restarted": restarted,
            "stopped": stopped,
            "unchanged": unchanged,
        })
    }

    /// Restarts the heartbeat writers if what they write, or where, changed.
    async fn apply_heartbeats(&mut self, config: &StraitConfig) {
        let identity = (config.heartbeats.clone(), config.clusters.clone());
        if self
            .heartbeats
            .as_ref()
            .is_some_and(|h| h.identity == identity)
        {
            return;
        }
        if let Some(old) = self.heartbeats.take() {
            let _ = old.stop.send(true);
            for task in old.tasks {
                let _ = task.await;
            }
        }
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut tasks = Vec::new();
        for emitter in &config.heartbeats {
            // The heartbeats of a pair whose flow workers run are written by the worker that
            // leads the flow (runs its unit 0), as MM2's one heartbeat task writes them, not by
            // every worker.
            let led_by = config
                .flows
                .iter()
                .find(|f| {
                    f.workers.is_some()
                        && f.target == emitter.target
                        && f.source_alias == emitter.source_alias
                        && f.target_alias == emitter.target_alias
                })
                .map(|f| leads(&f.name()).subscribe());
            let client_config = match config
                .cluster_client_config(emitter.target.as_str(), Role::Producer)
            {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(cluster = %emitter.target, error = %e, "no heartbeats written into the cluster");
                    continue;
                }
            };
            let emitter = emitter.clone();
            let stop = any_stop(self.stop.clone(), stop_rx.clone(), |s| *s);
            tasks.push(tokio::spawn(async move {
                let mut backoff = Backoff::new(RESTART_FIRST, RESTART_MAX);
                // A cluster that does not answer yet gets its heartbeats once it does.
                let client = loop {
                    match Client::connect(client_config.clone()).await {
                        Ok(client) => break client,
                        Err(e) => {
                            let wait = backoff.next_wait();
                            tracing::warn!(
                                cluster = %emitter.target,
                                error = %e,
                                retry_in_seconds = wait.as_secs(),
                                "cannot reach the cluster to write heartbeats; retrying"
                            );
                            tokio::select! {
                                () = tokio::time::sleep(wait) => {}
                                () = stop.clone() => return,
                            }
                        }
                    }
                };
                let mut task = HeartbeatTask::new(emitter, client);
                let Some(mut leading) = led_by else {
                    task.run(stop).await;
                    return;
                };
                loop {
                    // Until this worker leads the flow, then while it does.
                    tokio::select! {
                        led = leading.wait_for(|l| *l) => if led.is_err() { return },
                        () = stop.clone() => return,
                    }
                    let mut led = leading.clone();
                    let no_longer = async move {
                        let _ = led.wait_for(|l| !*l).await;
                    };
                    tokio::select! {
                        () = task.run(no_longer) => {}
                        () = stop.clone() => return,
                    }
                }
            }));
        }
        self.heartbeats = Some(Heartbeats {
            identity,
            stop: stop_tx,
            tasks,
        });
    }

    /// Reads the file again and applies it; a file that does not load changes nothing.
    async fn reload(&mut self) -> Result<Value, String> {
        if let Ok(bytes) = std::fs::read(&self.path) {
            self.loaded = bytes;
        }
        match StraitConfig::load(&self.path) {
            Ok(config) => {
                let done = self.apply(config).await;
                tracing::info!(
                    started = %list(&done["started"]),
                    restarted = %list(&done["restarted"]),
                    stopped = %list(&done["stopped"]),
                    unchanged = %list(&done["unchanged"]),
                    "config reloaded"
                );
                Ok(done)
            }
            Err(e) => {
                tracing::error!(error = %e, "the config does not load: keeping the flows as they run");
                Err(format!("{e}; the flows run on as before"))
            }
        }
    }

    async fn handle(&mut self, request: ControlRequest) {
        match request {
            ControlRequest::Pause(name, reply) => {
                let _ = reply.send(self.set_desired(&name, Desired::Pause));
            }
            ControlRequest::Resume(name, reply) => {
                let _ = reply.send(self.set_desired(&name, Desired::Run));
            }
            ControlRequest::Reload(reply) => {
                let _ = reply.send(self.reload().await);
            }
        }
    }

    fn set_desired(&self, name: &str, desired: Desired) -> Result<Value, String> {
        let Some(flow) = self.flows.get(name) else {
            return Err(format!(
                "no flow {name}; this instance runs {}",
                self.flows.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        };
        let before = *flow.desired.borrow();
        flow.desired.send_replace(desired);
        let (verb, already) = match desired {
            Desired::Pause => ("paused", before == Desired::Pause),
            _ => ("resumed", before == Desired::Run),
        };
        if !already {
            tracing::info!(flow = %name, "flow {verb} by request");
        }
        Ok(json!({
            "flow": name,
            "requested": if desired == Desired::Pause { "pause" } else { "run" },
            "changed": !already,
        }))
    }

    /// Waits for every flow and heartbeat writer to end (they stop on the same signal).
    async fn shutdown(self) {
        for (_, flow) in self.flows {
            let _ = flow.task.await;
        }
        if let Some(heartbeats) = self.heartbeats {
            for task in heartbeats.tasks {
                let _ = task.await;
            }
        }
    }
}

/// Milliseconds since the Unix epoch, now.
fn unix_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `["a", "b"]` as `a, b` (or `-`).
fn list(names: &Value) -> String {
    let names: Vec<&str> = names
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if names.is_empty() {
        "-".to_owned()
    } else {
        names.join(", ")
    }
}

/// Resolves when the process stops or `watched` turns to what `done` accepts.
fn any_stop<T: Send + Sync + 'static>(
    stop: Stop,
    mut watched: watch::Receiver<T>,
    done: impl Fn(&T) -> bool + Send + Sync + 'static,
) -> Stop {
    let changed: BoxFuture<'static, ()> = async move {
        let _ = watched.wait_for(|v| done(v)).await;
    }
    .boxed();
    futures::future::select(stop, changed)
        .map(|_| ())
        .boxed()
        .shared()
}

/// Whether this process leads the flow named `name` (runs its unit 0), for the work only one
/// worker does beside the units: its heartbeats.
fn leads(name: &str) -> watch::Sender<bool> {
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

/// A flow run by workers (`strait.workers.enabled`, `docs/design.md` §7): this process joins
/// the flow's workers' group on its target cluster and runs the units the group's leader
/// hands it, each under [`keep_running`] as a flow of its own. A unit handed to another worker
/// is stopped after its round (its next owner's initialisation fences whatever it still
/// tries); the units it keeps run on through a rebalance. Paused, the worker runs none of its
/// units but stays in the group, so they are not mirrored by anyone until it resumes; stopped,
/// it leaves the group, so the others take its units at once.
async fn keep_running_as_worker(
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
    // The workers' group lives on the target cluster; a cluster that does not answer yet is
    // joined once it does.
    let client = match config.client_config(&flow, Side::Target, Role::Producer) {
        Ok(c) => {
            let mut backoff = Backoff::new(RESTART_FIRST, RESTART_MAX);
            loop {
                match Client::connect_within(c.clone(), FIRST_ANSWER).await {
                    Ok(client) => break client,
                    Err(e) => {
                        let wait = backoff.next_wait();
                        tracing::warn!(flow = %name, error = %e, retry_in_seconds = wait.as_secs(),
                            "cannot reach the target to join the workers' group; retrying");
                        status::set_flow_state(
                            &flow,
                            FlowState::Starting,
                            Some(e.to_string()),
                            None,
                        );
                        tokio::select! {
                            () = tokio::time::sleep(wait) => {}
                            () = leave.clone() => return,
                        }
                    }
                }
            }
        }
        Err(e) => {
            tracing::error!(flow = %name, error = %e, "flow cannot start: fix the config (a reload picks it up)");
            status::set_flow_state(&flow, FlowState::Failed, Some(e.to_string()), None);
            return;
        }
    };
    let membership = MembershipConfig {
        session_timeout: workers.session_timeout,
        instance_id: workers.instance_id.clone(),
        ..MembershipConfig::new(workers.group_id.clone(), PROTOCOL_TYPE)
    };
    let units = Unit::all_of(&name, flow.tasks_max).collect();
    let serving = tokio::spawn(serve_api_as_worker(
        Arc::clone(&config),
        flow.clone(),
        client.clone(),
        Arc::clone(&api),
    ));
    let (running_units, running_rx) = watch::channel(BTreeSet::new());
    let mut worker = Worker::new(client, membership, units)
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
    let mut running: BTreeMap<u32, (watch::Sender<Desired>, tokio::task::JoinHandle<()>)> =
        BTreeMap::new();
    // Tells the worker which units still run here, so that a unit handed away is released to
    // its next owner only once it has stopped.
    let tell_running =
        |running: &BTreeMap<u32, (watch::Sender<Desired>, tokio::task::JoinHandle<()>)>| {
            let now: BTreeSet<Unit> = running
                .keys()
                .map(|i| Unit::new(name.as_str(), *i))
                .collect();
            running_units.send_if_modified(|was| std::mem::replace(was, now.clone()) != now);
        };
    let mut wanted = desired.clone();
    let mut shown_generation = i32::MIN;
    loop {
        // A unit whose run ended (fenced by a newer owner) starts again if handed back.
        running.retain(|_, (_, task)| !task.is_finished());
        tell_running(&running);
        let now_owned = ownership.borrow_and_update().clone();
        strait_core::metrics::workers_disagree(&flow, now_owned.refused.is_some());
        if now_owned.generation != shown_generation {
            shown_generation = now_owned.generation;
            tracing::info!(flow = %name, generation = now_owned.generation,
                units = ?now_owned.units.iter().map(Unit::to_string).collect::<Vec<_>>(),
                "this worker's units");
            status::set_worker(
                &flow,
                WorkerStatus {
                    group: workers.group_id.clone(),
                    member_id: now_owned.member_id.clone(),
                    generation: now_owned.generation,
                    leader: !now_owned.member_id.is_empty()
                        && now_owned.leader == now_owned.member_id,
                    members: now_owned.members,
                    units: flow.tasks_max,
                    owned: now_owned.units.iter().map(Unit::to_string).collect(),
                    last_rebalance_ms: (now_owned.generation >= 0).then(unix_now_ms),
                    refused: now_owned.refused.clone(),
                },
            );
        }
        let owned: Vec<u32> = now_owned.units.iter().map(|u| u.index).collect();
        leads(&name).send_if_modified(|l| std::mem::replace(l, owned.contains(&0)) != *l);
        let now = *wanted.borrow_and_update();
        // Units handed to another worker stop after their round.
        let lost: Vec<u32> = running
            .keys()
            .filter(|i| !owned.contains(i))
            .copied()
            .collect();
        for index in &lost {
            if let Some((unit_desired, _)) = running.get(index) {
                let _ = unit_desired.send(Desired::Stop);
            }
        }
        for index in lost {
            if let Some((_, task)) = running.remove(&index) {
                let _ = task.await;
                strait_core::metrics::release_unit(
                    &flow,
                    UnitFilter {
                        index,
                        units: flow.tasks_max,
                    },
                );
                tracing::info!(flow = %name, unit = index, "unit handed away: stopped here");
            }
        }
        tell_running(&running);
        for (_, (unit_desired, _)) in running.iter() {
            unit_desired.send_if_modified(|d| std::mem::replace(d, now) != now);
        }
        for index in owned {
            if running.contains_key(&index) {
                continue;
            }
            tracing::info!(flow = %name, unit = index, "unit handed to this worker: starting");
            let (tx, rx) = watch::channel(now);
            let run = keep_running(
                Arc::clone(&config),
                flow.clone(),
                Some((index, now_owned.lease.clone())),
                rx,
                stop.clone(),
                Arc::clone(&api),
            );
            let start_after = now_owned.start_after;
            let task = tokio::spawn(async move {
                // A static worker that took another process's place waits out its lease.
                if let Some(at) = start_after {
                    tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
                }
                run.await;
            });
            running.insert(index, (tx, task));
        }
        tell_running(&running);
        tokio::select! {
            changed = ownership.changed() => if changed.is_err() { break },
            changed = wanted.changed() => if changed.is_err() { break },
            () = leave.clone() => break,
        }
    }
    for (_, (unit_desired, _)) in running.iter() {
        let _ = unit_desired.send(Desired::Stop);
    }
    for (_, (_, task)) in running {
        let _ = task.await;
    }
    serving.abort();
    leads(&name).send_replace(false);
    let _ = member.await;
}

/// How often a worker reads a flow's map again for its HTTP API: the checkpoint interval, at
/// most this.
const API_MAP_EVERY: Duration = Duration::from_secs(10);

/// The HTTP API of a flow run by workers, from every worker whatever units it runs
/// (`/v1/translate`, `/v1/groups/GROUP`): the map as all units write it, read from the map topic
/// on the target now and again every checkpoint interval (at most 10 s), and a client of the
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
    let every = flow
        .emit_checkpoints
        .map_or(API_MAP_EVERY, |d| d.min(API_MAP_EVERY));
    let map = MapStore::follow(target.clone(), alias, Arc::new(initial), every);
    api.set(
        &flow,
        Some(crate::http::ApiFlow {
            config: flow.clone(),
            source,
            target,
            map,
        }),
    );
    // The follower reads for as long as the API entry holds its receiver.
}

/// One flow, or with `unit` one unit of a flow run by workers, for as long as the process runs
/// and the operator wants it: started when its clusters answer, restarted after failures,
/// paused and resumed on request. A unit fenced by its next owner stops for good.
async fn keep_running(
    config: Arc<StraitConfig>,
    flow: FlowConfig,
    unit: Option<(u32, Lease)>,
    mut desired: watch::Receiver<Desired>,
    stop: Stop,
    api: Arc<Api>,
) {
    let name = flow.name();
    let (unit, lease) = match unit {
        Some((index, lease)) => (Some(index), Some(lease)),
        None => (None, None),
    };
    let mut backoff = Backoff::new(RESTART_FIRST, RESTART_MAX);
    // Wakes when the process stops or the operator wants anything but `Run`.
    let not_running = |desired: &watch::Receiver<Desired>| {
        any_stop(stop.clone(), desired.clone(), |d| *d != Desired::Run)
    };
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
                status::set_flow_state(&flow, FlowState::Paused, None, None);
                tokio::select! {
                    () = stop.clone() => return,
                    _ = desired.changed() => continue,
                }
            }
            Desired::Run => {}
        }
        status::set_flow_state(&flow, FlowState::Starting, None, None);
        let interrupt = not_running(&desired);
        let connected = tokio::select! {
            connected = crate::runtime::connect_flow(&config, &flow, unit, lease.clone(), FIRST_ANSWER) => connected,
            () = interrupt.clone() => continue,
        };
        let (started, live, acls) = match connected {
            Ok(c) => c,
            Err(crate::runtime::StartError::Config(e)) => {
                tracing::error!(flow = %name, error = %format!("{e:#}"), "flow cannot start: fix the config (a reload picks it up)");
                status::set_flow_state(&flow, FlowState::Failed, Some(format!("{e:#}")), None);
                let _ = interrupt.await;
                continue;
            }
            Err(crate::runtime::StartError::Cluster(e)) => {
                let wait = backoff.next_wait();
                tracing::warn!(
                    flow = %name,
                    error = %format!("{e:#}"),
                    retry_in_seconds = wait.as_secs(),
                    "flow cannot start; the other flows run on, this one retries"
                );
                status::set_flow_state(&flow, FlowState::Starting, Some(format!("{e:#}")), None);
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = interrupt => {}
                }
                continue;
            }
        };
        // A unit's API entry would go stale when the unit moves: a flow run by workers is
        // served by its worker instead (`serve_api_as_worker`).
        if let (Some(live), None) = (live, unit) {
            api.set(&flow, Some(live));
        }
        let began = Instant::now();
        let acl_task = acls.map(|mut task| {
            let stop = interrupt.clone();
            tokio::spawn(async move { task.run(stop).await })
        });
        let outcome = crate::runtime::run_flow(started, Until::Stopped, interrupt.clone()).await;
        if let Some(task) = acl_task {
            task.abort();
        }
        if began.elapsed() >= HEALTHY_RUN {
            backoff = Backoff::new(RESTART_FIRST, RESTART_MAX);
        }
        if let Err(e) = outcome.result {
            // Fenced by a newer owner, or its worker's lease lapsed (every write refused).
            let fenced = e.chain().any(|c| {
                c.downcast_ref::<FlowError>()
                    .is_some_and(FlowError::is_fenced)
                    || c.downcast_ref::<strait_kafka::Error>()
                        .is_some_and(strait_kafka::Error::is_fenced)
            }) || lease.as_ref().is_some_and(|l| !l.is_valid());
            if lease.as_ref().is_some_and(Lease::is_revoked) {
                tracing::warn!(flow = %name, unit = unit.unwrap_or_default(), error = %format!("{e:#}"),
                    "unit stopped: its worker lost its place in the group, so it writes nothing more here");
                return;
            }
            let wait = if fenced {
                // Another owner initialised the unit's transactional id: this worker was
                // removed from the group (it learns so from its next heartbeat, and then stops
                // the unit), or the coordinator aborted a transaction that outlived
                // `transaction.timeout.ms`. Only in the second case does the unit still belong
                // here two session timeouts later: then it starts again.
                let wait = flow
                    .workers
                    .as_ref()
                    .map_or(RESTART_MAX, |w| w.session_timeout * 2);
                tracing::warn!(
                    flow = %name,
                    unit = unit.unwrap_or_default(),
                    error = %format!("{e:#}"),
                    restart_in_seconds = wait.as_secs(),
                    "unit fenced: another worker owns it now, and this one writes nothing more \
                     to it; it starts again only if the group still gives it to this worker then"
                );
                wait
            } else {
                let wait = backoff.next_wait();
                tracing::error!(
                    flow = %name,
                    error = %format!("{e:#}"),
                    restart_in_seconds = wait.as_secs(),
                    "flow failed; it restarts from its offset map"
                );
                wait
            };
            status::set_flow_state(
                &flow,
                FlowState::Restarting,
                Some(format!("{e:#}")),
                Some(Instant::now() + wait),
            );
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = interrupt => {}
            }
        }
    }
}
