//! The heartbeat writers of a running config (`strait_core::heartbeats`), one per
//! `emit.heartbeats` pair, restarted as one when their settings change. A pair whose flow is
//! run by workers is written by the worker that leads the flow (runs its unit 0), as MM2's one
//! heartbeat task writes them, not by every worker.

use strait_core::config::{ClusterConfig, HeartbeatEmitter, StraitConfig};
use strait_core::heartbeats::HeartbeatTask;
use strait_kafka::backoff::Backoff;
use strait_kafka::{Client, ClientConfig};
use tokio::sync::watch;

use super::worker::leads;
use super::{any_stop, RESTART_FIRST, RESTART_MAX};
use crate::flow::Stop;

/// The running heartbeat writers.
#[derive(Debug)]
pub(super) struct Heartbeats {
    /// What they were started from: two configs with the same run the same writers.
    identity: (Vec<HeartbeatEmitter>, Vec<ClusterConfig>),
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Heartbeats {
    /// Starts a writer for every heartbeat pair of `config`, until `stop` (or [`Self::stop`]).
    pub(super) fn start(config: &StraitConfig, stop: Stop) -> Self {
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut tasks = Vec::new();
        for emitter in &config.heartbeats {
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
            let client_config = match config.heartbeat_client(emitter) {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(cluster = %emitter.target, error = %e, "no heartbeats written into the cluster");
                    continue;
                }
            };
            let stop = any_stop(stop.clone(), stop_rx.clone(), |s| *s);
            tasks.push(tokio::spawn(write(
                emitter.clone(),
                client_config,
                led_by,
                stop,
            )));
        }
        Heartbeats {
            identity: identity(config),
            stop: stop_tx,
            tasks,
        }
    }

    /// Whether these writers are the ones `config` would start.
    pub(super) fn runs_as(&self, config: &StraitConfig) -> bool {
        self.identity == identity(config)
    }

    /// Stops the writers and waits for them.
    pub(super) async fn stop(self) {
        let _ = self.stop.send(true);
        self.wait().await;
    }

    /// Waits for the writers to end (on the runtime's stop).
    pub(super) async fn wait(self) {
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

fn identity(config: &StraitConfig) -> (Vec<HeartbeatEmitter>, Vec<ClusterConfig>) {
    (config.heartbeats.clone(), config.clusters.clone())
}

/// One pair's heartbeats until `stop`: once its target cluster answers, and with `led_by`
/// only while this worker leads the flow.
async fn write(
    emitter: HeartbeatEmitter,
    client_config: ClientConfig,
    led_by: Option<watch::Receiver<bool>>,
    stop: Stop,
) {
    let mut backoff = Backoff::new(RESTART_FIRST, RESTART_MAX);
    // A cluster that does not answer yet gets its heartbeats once it does.
    let client = loop {
        // Connecting retries for up to a minute: a stop does not wait for it.
        let connected = tokio::select! {
            connected = Client::connect(client_config.clone()) => connected,
            () = stop.clone() => return,
        };
        match connected {
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
}
