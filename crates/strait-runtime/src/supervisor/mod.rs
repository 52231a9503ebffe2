//! `strait run` until stopped: every flow of the config kept running on its own, under the
//! operator's hand (`docs/deploying.md`, "Runtime control"). [`Runtime::start`] starts it and
//! hands back the [`Runtime`] to reload, pause, resume and shut down; the binary turns signals
//! into those calls, and a test calls them itself.
//!
//! - **Each flow on its own** (`keep_running.rs`). A flow whose cluster does not answer at
//!   start waits and retries while the others run; a flow that fails starts again after a
//!   backoff (1 s doubling to 5 min, reset once a run lasted 10 min), saying why in the log and
//!   in `/v1/status`. Only an error in the flow's settings waits for a changed file. A flow run
//!   by workers joins its workers' group and runs the units it is handed (`worker.rs`).
//! - **Pause and resume** ([`Runtime::pause`], `POST /v1/flows/{flow}/pause|resume`): a
//!   paused flow finishes its round, writes its map and stops reading; resumed, it goes on
//!   from its map. Pauses live in this process: a restart runs every enabled flow.
//! - **Reload** ([`Runtime::reload`], `POST /v1/reload`, or when the config file's bytes
//!   change, checked every 5 s unless [`Options::watch_config`] is off): the file is read again
//!   and only the flows whose settings changed (their own keys, or their clusters') restart;
//!   new flows start, removed ones stop, the others keep flowing. A file that does not parse
//!   changes nothing. Heartbeats restart when theirs change (`heartbeats.rs`).
//! - **Shutdown** ([`Runtime::shutdown`]): every flow finishes its round (in-flight writes are
//!   acknowledged), writes its map and offset syncs.

mod events;
mod heartbeats;
mod keep_running;
mod worker;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt as _;
use strait_core::config::{ClusterConfig, FlowConfig, StraitConfig};
use strait_core::status::{self, StatusReport};
use tokio::sync::{mpsc, oneshot, watch};

use crate::access::ControlToken;
use crate::control::{ask, ControlError, ControlRequest, FlowRequested, Reloaded, Requested};
use crate::error::Error;
use crate::flow::Stop;
use crate::http::Api;
use crate::server::HttpLimits;
use heartbeats::Heartbeats;

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

/// How a [`Runtime`] runs. `Options::default()`: no HTTP API, the file not watched, no control
/// token, [`HttpLimits::default`].
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Where the HTTP API listens (port 0: any free port, [`Runtime::http_addr`] says which);
    /// `None`: no API.
    pub listen: Option<SocketAddr>,
    /// Reload when the config file's bytes change (compared every 5 s).
    pub watch_config: bool,
    /// The token the API's control requests must carry; without one they are taken from
    /// anyone on a loopback `listen` address and refused on any other (`crate::access`).
    pub control_token: Option<ControlToken>,
    /// The HTTP server's timeouts and connection cap.
    pub http: HttpLimits,
}

/// A running `strait run`: every enabled flow of a config file, kept running until
/// [`Runtime::shutdown`]. Dropped without it, it stops the same way without waiting.
#[derive(Debug)]
pub struct Runtime {
    api: Arc<Api>,
    control: mpsc::Sender<ControlRequest>,
    http_addr: Option<SocketAddr>,
    /// Dropped to stop: every task waits on its receiver.
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Runtime {
    /// Loads the config file at `config` and starts every enabled flow of it, and what runs
    /// beside them (checkpoints, group sync, heartbeats, topic ACL sync, the HTTP API). A file
    /// that does not load or an address that cannot be bound is an error; after that, nothing
    /// a flow meets ends the runtime.
    pub async fn start(config: impl Into<PathBuf>, options: Options) -> Result<Runtime, Error> {
        let path = config.into();
        let loaded = std::fs::read(&path).unwrap_or_default();
        let config = StraitConfig::load(&path)?;
        // Bound first, so a taken port stops start-up before anything is mirrored.
        let listener = match options.listen {
            Some(addr) => Some(crate::http::bind(addr).await?),
            None => None,
        };
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let stop: Stop = stop_rx.map(|_| ()).boxed().shared();
        let (control, requests) = mpsc::channel(16);
        let api = Arc::new(Api::with_control(control.clone()));
        let http_addr = listener.as_ref().and_then(|l| l.local_addr().ok());
        let http = listener.map(|listener| {
            if let Some(addr) = http_addr {
                tracing::info!(%addr, "HTTP API listening (/healthz, /readyz, /v1/status, /v1/translate, /v1/groups/GROUP, /metrics)");
                if options.control_token.is_none() && !addr.ip().is_loopback() {
                    tracing::warn!(%addr, "the HTTP API listens beyond this host without a control token: it serves reads only, and refuses pause, resume and reload (403); give strait run --control-token-file FILE or STRAIT_CONTROL_TOKEN to allow them");
                }
            }
            tokio::spawn(crate::http::serve(
                listener,
                Arc::clone(&api),
                options.control_token.clone(),
                options.http,
                stop.clone(),
            ))
        });
        let mut supervisor = Supervisor {
            path,
            api: Arc::clone(&api),
            stop,
            flows: BTreeMap::new(),
            heartbeats: None,
            loaded,
        };
        supervisor.apply(config).await;
        let task = tokio::spawn(supervise(supervisor, requests, options.watch_config, http));
        Ok(Runtime {
            api,
            control,
            http_addr,
            stop: Some(stop_tx),
            task: Some(task),
        })
    }

    /// Where the HTTP API listens, when it does.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// Reads the config file again and applies it, as SIGHUP does: flows whose settings
    /// changed restart (each after its round), new ones start, removed ones stop. A file that
    /// does not load changes nothing ([`ControlError::Reload`]).
    pub async fn reload(&self) -> Result<Reloaded, ControlError> {
        ask(&self.control, ControlRequest::Reload).await
    }

    /// Asks the flow `A->B` to pause: it finishes its round, writes its map and reads nothing
    /// more until resumed (its status shows `paused` then).
    pub async fn pause(&self, flow: &str) -> Result<FlowRequested, ControlError> {
        ask(&self.control, |reply| {
            ControlRequest::Pause(flow.to_owned(), reply)
        })
        .await
    }

    /// Asks a paused flow to resume from its map.
    pub async fn resume(&self, flow: &str) -> Result<FlowRequested, ControlError> {
        ask(&self.control, |reply| {
            ControlRequest::Resume(flow.to_owned(), reply)
        })
        .await
    }

    /// Where this runtime's flows stand now: what `GET /v1/status` answers.
    pub fn status(&self) -> StatusReport {
        self.api.status()
    }

    /// Stops: every flow finishes its round (in-flight writes are acknowledged) and writes its
    /// map and offset syncs; the heartbeat writers and the HTTP API end. Returns once all have.
    pub async fn shutdown(mut self) {
        tracing::info!("stopping: every flow finishes its current round and writes its offset map");
        drop(self.stop.take());
        if let Some(task) = self.task.take() {
            if let Err(e) = task.await {
                if e.is_panic() {
                    std::panic::resume_unwind(e.into_panic());
                }
            }
        }
    }
}

/// The runtime's own task: watches the file, answers control requests, and on stop waits for
/// every flow, heartbeat writer and the HTTP API to end.
async fn supervise(
    mut supervisor: Supervisor,
    mut requests: mpsc::Receiver<ControlRequest>,
    watch_config: bool,
    http: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
) {
    let mut watch = tokio::time::interval(WATCH_EVERY);
    watch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut stopped = supervisor.stop.clone();
    loop {
        tokio::select! {
            () = &mut stopped => break,
            _ = watch.tick(), if watch_config => {
                // A file being written may be read half-way: it fails to parse, changes
                // nothing, and the next look reads it whole.
                if let Ok(bytes) = std::fs::read(&supervisor.path) {
                    if bytes != supervisor.loaded {
                        tracing::info!(config = %supervisor.path.display(), "the config file changed: reading it again");
                        let _ = supervisor.reload().await;
                    }
                }
            }
            Some(request) = requests.recv() => supervisor.handle(request).await,
        }
    }
    // A control request from now on is answered 503 (stopping) at once, rather than holding
    // its HTTP connection, and so the API's stop, until its grace runs out.
    drop(requests);
    supervisor.shutdown().await;
    if let Some(http) = http {
        let _ = http.await;
    }
}

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
    async fn apply(&mut self, config: StraitConfig) -> Reloaded {
        for warning in &config.warnings {
            tracing::warn!("{}: {warning}", self.path.display());
        }
        let config = Arc::new(config);
        let wanted: BTreeMap<String, FlowIdentity> = config
            .flows
            .iter()
            .map(|f| (f.name(), FlowIdentity::of(&config, f)))
            .collect();
        let mut done = Reloaded::default();
        // Removed flows and changed ones stop first, each after its current round.
        let mut paused = Vec::new();
        let mut ending = Vec::new();
        for (name, flow) in std::mem::take(&mut self.flows) {
            match wanted.get(&name) {
                Some(identity) if *identity == flow.identity => {
                    done.unchanged.push(name.clone());
                    self.flows.insert(name, flow);
                }
                Some(_) => {
                    if *flow.desired.borrow() == Desired::Pause {
                        paused.push(name.clone());
                    }
                    done.restarted.push(name);
                    ending.push(flow);
                }
                None => {
                    done.stopped.push(name);
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
        for name in &done.stopped {
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
            if done.restarted.contains(&name) {
                tracing::info!(flow = %name, "flow settings changed: restarted");
            } else {
                done.started.push(name.clone());
            }
            let supervised = self.spawn(&config, flow, wanted[&name].clone(), desired);
            self.flows.insert(name, supervised);
        }
        self.apply_heartbeats(&config).await;
        done
    }

    /// Starts keeping `flow` running, as the operator wants it (`desired`).
    fn spawn(
        &self,
        config: &Arc<StraitConfig>,
        flow: &FlowConfig,
        identity: FlowIdentity,
        desired: Desired,
    ) -> Supervised {
        let (tx, rx) = watch::channel(desired);
        self.api.set(flow, None);
        let (config, stop, api) = (Arc::clone(config), self.stop.clone(), Arc::clone(&self.api));
        let task = if flow.workers.is_some() {
            tokio::spawn(worker::keep_running_as_worker(
                config,
                flow.clone(),
                rx,
                stop,
                api,
            ))
        } else {
            tokio::spawn(keep_running::keep_running(
                config,
                flow.clone(),
                None,
                rx,
                stop,
                api,
            ))
        };
        Supervised {
            identity,
            desired: tx,
            task,
        }
    }

    /// Restarts the heartbeat writers if what they write, or where, changed.
    async fn apply_heartbeats(&mut self, config: &StraitConfig) {
        if self.heartbeats.as_ref().is_some_and(|h| h.runs_as(config)) {
            return;
        }
        if let Some(old) = self.heartbeats.take() {
            old.stop().await;
        }
        self.heartbeats = Some(Heartbeats::start(config, self.stop.clone()));
    }

    /// Reads the file again and applies it; a file that does not load changes nothing.
    async fn reload(&mut self) -> Result<Reloaded, ControlError> {
        if let Ok(bytes) = std::fs::read(&self.path) {
            self.loaded = bytes;
        }
        match StraitConfig::load(&self.path) {
            Ok(config) => {
                let done = self.apply(config).await;
                tracing::info!(
                    started = %list(&done.started),
                    restarted = %list(&done.restarted),
                    stopped = %list(&done.stopped),
                    unchanged = %list(&done.unchanged),
                    "config reloaded"
                );
                Ok(done)
            }
            Err(e) => {
                tracing::error!(error = %e, "the config does not load: keeping the flows as they run");
                Err(ControlError::Reload(e))
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

    fn set_desired(&self, name: &str, desired: Desired) -> Result<FlowRequested, ControlError> {
        let Some(flow) = self.flows.get(name) else {
            return Err(ControlError::NoFlow {
                flow: name.to_owned(),
                running: self.flows.keys().cloned().collect(),
            });
        };
        let before = *flow.desired.borrow();
        flow.desired.send_replace(desired);
        let (verb, requested, already) = match desired {
            Desired::Pause => ("paused", Requested::Pause, before == Desired::Pause),
            _ => ("resumed", Requested::Run, before == Desired::Run),
        };
        if !already {
            tracing::info!(flow = %name, "flow {verb} by request");
        }
        Ok(FlowRequested {
            flow: name.to_owned(),
            requested,
            changed: !already,
        })
    }

    /// Waits for every flow and heartbeat writer to end (they stop on the same signal).
    async fn shutdown(self) {
        for (_, flow) in self.flows {
            let _ = flow.task.await;
        }
        if let Some(heartbeats) = self.heartbeats {
            heartbeats.wait().await;
        }
    }
}

/// `["a", "b"]` as `a, b` (or `-`).
fn list(names: &[String]) -> String {
    if names.is_empty() {
        "-".to_owned()
    } else {
        names.join(", ")
    }
}

/// Resolves when the runtime stops or `watched` turns to what `done` accepts.
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
