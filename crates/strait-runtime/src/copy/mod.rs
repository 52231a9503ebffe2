//! A one-shot copy of every enabled flow of a config (`strait run --until-caught-up`, `strait
//! mirror`): [`OneShotCopy::start`] starts them all or none, with what runs beside them
//! (checkpoints and group sync per flow, topic ACLs synced once, the HTTP API without
//! control), and [`OneShotCopy::run`] runs them until each caught up with the source end it saw
//! at start, or until interrupted. No heartbeats: a copy has no liveness to show.
//!
//! A flow run by workers is copied as a member of its workers' group that owns every unit
//! ([`member`]): a `strait run` worker that starts mid-copy is handed nothing until the copy has
//! stopped between rounds, written its map and left the group.

mod member;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::{FutureExt as _, StreamExt as _};
use strait_core::config::{FlowConfig, Role, Side, StraitConfig};
use strait_kafka::Client;

use self::member::CopyMember;
use crate::error::Error;
use crate::flow::{connect_flow, run_flow, FlowOutcome, StartedFlow, Stop, Until};
use crate::http::Api;

/// Every enabled flow of a config started for a one-shot copy, with the tasks beside them
/// running.
#[derive(Debug)]
pub struct OneShotCopy {
    flows: Vec<StartedFlow>,
    /// By flow, in config order: its place in its workers' group, for a flow run by workers.
    members: Vec<Option<CopyMember>>,
    http: Option<AbortOnDrop>,
    http_addr: Option<SocketAddr>,
}

/// The HTTP API's task, ended with the copy.
#[derive(Debug)]
struct AbortOnDrop(tokio::task::JoinHandle<std::io::Result<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl OneShotCopy {
    /// Loads the config at `path` and starts every enabled flow: all of them or none, its
    /// checkpoints, topic ACLs synced once, and the HTTP API on `listen` (port 0: any free
    /// port, [`OneShotCopy::http_addr`]). Refuses flows that commit in transactions, and flows
    /// whose `strait run` workers are running; joins the workers' group of each flow run by
    /// workers, owning every unit, before it places the flow.
    pub async fn start(path: &Path, listen: Option<SocketAddr>) -> Result<Self, Error> {
        let config = StraitConfig::load(path)?;
        for warning in &config.warnings {
            tracing::warn!("{}: {warning}", path.display());
        }
        // Bound first, so a taken port stops start-up before anything is mirrored.
        let listener = match listen {
            Some(addr) => Some(crate::http::bind(addr).await?),
            None => None,
        };
        // A one-shot copy writes without the workers' group: beside running workers it would
        // be a second, unfenced writer of their partitions and map.
        let exactly_once: Vec<String> = config
            .flows
            .iter()
            .filter(|f| f.workers.as_ref().is_some_and(|w| w.exactly_once))
            .map(FlowConfig::name)
            .collect();
        if !exactly_once.is_empty() {
            return Err(Error::ExactlyOnceCopy {
                path: path.to_owned(),
                flows: exactly_once,
            });
        }
        let mut targets = Vec::new();
        for flow in &config.flows {
            targets.push(refuse_beside_live_workers(&config, flow, path).await?);
        }
        let mut flows = Vec::new();
        let mut members = Vec::new();
        let mut api = Vec::new();
        let mut acl_tasks = Vec::new();
        for (flow, target) in config.flows.iter().zip(targets) {
            // The flow is placed only once the copy owns its units: what a worker wrote before
            // then is in the map or matched beyond it.
            let member = match (target, &flow.workers) {
                (Some(target), Some(workers)) => {
                    Some(CopyMember::join(target, flow, workers).await?)
                }
                _ => None,
            };
            let lease = member.as_ref().map(CopyMember::lease);
            let (started, live, acls) =
                connect_flow(&config, flow, None, lease, Duration::MAX).await?;
            members.push(member);
            api.extend(live);
            acl_tasks.extend(acls);
            flows.push(started);
        }
        for mut task in acl_tasks {
            if let Err(e) = task.sync_once().await {
                tracing::warn!(error = %e, "cannot sync topic ACLs");
            }
        }
        let http_addr = listener.as_ref().and_then(|l| l.local_addr().ok());
        let http = listener.map(|listener| {
            if let Some(addr) = http_addr {
                tracing::info!(%addr, "HTTP API listening (/healthz, /v1/translate, /v1/groups/GROUP)");
            }
            let api = std::sync::Arc::new(Api::fixed(api));
            // The API ends with the copy ([`OneShotCopy::run`], or when the copy is dropped).
            AbortOnDrop(tokio::spawn(crate::http::serve(
                listener,
                api,
                None,
                crate::server::HttpLimits::default(),
                futures::future::pending(),
            )))
        });
        Ok(OneShotCopy {
            flows,
            members,
            http,
            http_addr,
        })
    }

    /// The started flows, in config order.
    pub fn flows(&self) -> &[StartedFlow] {
        &self.flows
    }

    /// Where the HTTP API listens, when it does.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// Runs every flow to its end, concurrently: until caught up. `interrupt` (Ctrl-C or
    /// SIGTERM in `strait mirror`) ends the copy at once: the flows still running are dropped
    /// mid-round (what they wrote beyond the map is matched by the next run, as after a crash)
    /// and end as interrupted. `on_end(i, outcome)` is called as flow `i` ends; the outcomes
    /// come back in config order.
    pub async fn run(
        self,
        interrupt: impl std::future::Future<Output = ()> + Send + 'static,
        on_end: impl Fn(usize, &FlowOutcome),
    ) -> Vec<FlowOutcome> {
        let OneShotCopy {
            flows,
            members,
            http,
            ..
        } = self;
        let interrupt: Stop = async move {
            interrupt.await;
            tracing::warn!(
                "interrupted: the copy stops now, mid-round; the next run resumes from the offset \
                 map and matches what this one wrote beyond it"
            );
        }
        .boxed()
        .shared();
        let began = Instant::now();
        let watched: Vec<_> = flows
            .iter()
            .map(|f| (f.flow.name(), f.flow.stats_updates()))
            .collect();
        let mut runs: futures::stream::FuturesUnordered<_> = flows
            .into_iter()
            .zip(members)
            .enumerate()
            .map(|(i, (started, member))| {
                let interrupt = interrupt.clone();
                async move {
                    let Some(mut member) = member else {
                        return (i, run_flow(started, Until::CaughtUp, interrupt).await);
                    };
                    // Between rounds, the copy gives way to a worker that joined the group.
                    let lost = member.lost();
                    let stop: Stop = futures::future::select(interrupt, lost.boxed())
                        .map(|_| ())
                        .boxed()
                        .shared();
                    let mut outcome = run_flow(started, Until::CaughtUp, stop).await;
                    if matches!(outcome.result, Err(Error::Interrupted { .. }))
                        && !member.owns_all()
                    {
                        outcome.result = Err(member.joined_error());
                        outcome.interrupted = false;
                    }
                    member.leave().await;
                    (i, outcome)
                }
            })
            .collect();
        let mut interrupted = interrupt.clone();
        let mut outcomes: Vec<Option<FlowOutcome>> = watched.iter().map(|_| None).collect();
        loop {
            tokio::select! {
                next = runs.next() => match next {
                    Some((i, outcome)) => {
                        on_end(i, &outcome);
                        if let Some(slot) = outcomes.get_mut(i) {
                            *slot = Some(outcome);
                        }
                    }
                    None => break,
                },
                () = &mut interrupted => break,
            }
        }
        drop(runs);
        // Caught up, or interrupted: the API ends with the flows.
        drop(http);
        outcomes
            .into_iter()
            .zip(watched)
            .map(|(outcome, (name, stats))| {
                outcome.unwrap_or_else(|| FlowOutcome {
                    stats: *stats.borrow(),
                    elapsed: began.elapsed(),
                    result: Err(Error::Interrupted { flow: name.clone() }),
                    interrupted: true,
                    name,
                })
            })
            .collect()
    }
}

/// A one-shot copy of `flow` refuses to run while `strait run` processes of the same flow are
/// members of its workers' group on the target: they own its partitions, and the copy would
/// write them a second time. For a flow run by workers, a client of the target where the group
/// lives.
async fn refuse_beside_live_workers(
    config: &StraitConfig,
    flow: &FlowConfig,
    path: &Path,
) -> Result<Option<Client>, Error> {
    let Some(workers) = &flow.workers else {
        return Ok(None);
    };
    let target_config = config
        .client_config(flow, Side::Target, Role::Producer)
        .map_err(|e| Error::settings(flow, e))?;
    let target = Client::connect(target_config)
        .await
        .map_err(|source| Error::Unreachable {
            flow: flow.name(),
            side: "target",
            cluster: flow.target.as_str().to_owned(),
            source,
        })?;
    // A member that died (kill -9) is removed a session timeout after its last heartbeat: the
    // copy waits that long for the group to empty before it refuses.
    let patience = Instant::now() + workers.session_timeout + Duration::from_secs(2);
    let mut said = false;
    let group = loop {
        let group = target
            .describe_group(&workers.group_id)
            .await
            .map_err(|source| Error::WorkersUnknown {
                flow: flow.name(),
                group: workers.group_id.clone(),
                target: flow.target.as_str().to_owned(),
                source,
            })?;
        if !group.is_active() || Instant::now() >= patience {
            break group;
        }
        if !said {
            said = true;
            tracing::warn!(flow = %flow.name(), group = %workers.group_id, state = %group.state,
                "the flow's workers' group has members: waiting up to its session timeout for \
                 them to leave (a process that died is removed by then)");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    if group.is_active() {
        return Err(Error::WorkersRunning {
            path: PathBuf::from(path),
            flow: flow.name(),
            members: group.members.len().max(1),
            group: workers.group_id.clone(),
            target: flow.target.as_str().to_owned(),
            state: group.state,
        });
    }
    Ok(Some(target))
}
