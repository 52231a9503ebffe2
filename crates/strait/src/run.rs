//! `strait run`: every enabled flow of the config, concurrently, until stopped; beside each
//! flow, its checkpoints and group sync (`strait_core::offsets::checkpoints`).

use std::path::Path;

use anyhow::{bail, Context as _};
use futures::FutureExt as _;
use strait_core::acls::AclSyncTask;
use strait_core::config::{Role, SecurityProtocol, Side, StraitConfig};
use strait_core::flow::{Flow, FlowOptions};
use strait_core::heartbeats::HeartbeatTask;
use strait_core::offsets::checkpoints::CheckpointTask;
use strait_kafka::{Client, ClientConfig};

pub(crate) async fn run(
    path: &Path,
    until_caught_up: bool,
    listen: Option<std::net::SocketAddr>,
) -> anyhow::Result<()> {
    let config = StraitConfig::load(path)?;
    for warning in &config.warnings {
        tracing::warn!("{}: {warning}", path.display());
    }
    // Bound first, so a taken port stops start-up before anything is mirrored.
    let listener = match listen {
        Some(addr) => Some(crate::http::bind(addr).await?),
        None => None,
    };
    let mut flows = Vec::new();
    let mut api = Vec::new();
    let mut acl_tasks = Vec::new();
    for flow in &config.flows {
        for side in [Side::Source, Side::Target] {
            let props = config.client_props(flow, side, Role::Admin);
            let protocol = props.security_protocol();
            if protocol != SecurityProtocol::Plaintext {
                bail!(
                    "flow {}: security.protocol {protocol:?} is not supported yet; only \
                     PLAINTEXT connections are (TLS and SASL are planned)",
                    flow.name()
                );
            }
        }
        let client = |alias: &str| {
            let cluster = config
                .cluster(alias)
                .with_context(|| format!("cluster {alias} is not declared"))?;
            Ok::<_, anyhow::Error>(ClientConfig::new(cluster.bootstrap_servers.clone()))
        };
        let source = Client::connect(client(flow.source.as_str())?)
            .await
            .with_context(|| {
                format!("flow {}: cannot reach source {}", flow.name(), flow.source)
            })?;
        let target = Client::connect(client(flow.target.as_str())?)
            .await
            .with_context(|| {
                format!("flow {}: cannot reach target {}", flow.name(), flow.target)
            })?;
        let options = FlowOptions {
            producer: producer_config(&config.client_props(flow, Side::Target, Role::Producer))
                .with_context(|| format!("flow {}", flow.name()))?,
            ..FlowOptions::default()
        };
        let producer = options.producer.clone();
        let started = Flow::start(flow.clone(), options, source.clone(), target.clone())
            .await
            .with_context(|| format!("flow {} cannot start", flow.name()))?;
        tracing::info!(
            flow = %started.name(),
            topics = started.topics().len(),
            "flow started"
        );
        api.push(crate::http::ApiFlow {
            config: flow.clone(),
            source: source.clone(),
            map: started.map_updates(),
        });
        if AclSyncTask::is_enabled(flow) {
            acl_tasks.push(AclSyncTask::new(
                flow.clone(),
                source.clone(),
                target.clone(),
            ));
        }
        let checkpoints = CheckpointTask::is_enabled(flow).then(|| {
            CheckpointTask::new(flow.clone(), source, target, started.map_updates())
                .with_producer_config(producer)
        });
        flows.push((started, checkpoints));
    }
    let stop = shutdown_signal().boxed().shared();
    // Beside the flows: topic ACL sync per flow, and MM2's heartbeats per cluster pair (not for
    // a one-shot copy, which has no liveness to show).
    let mut side_tasks: Vec<futures::future::BoxFuture<'static, ()>> = Vec::new();
    for mut task in acl_tasks {
        if until_caught_up {
            if let Err(e) = task.sync_once().await {
                tracing::warn!(error = %e, "cannot sync topic ACLs");
            }
        } else {
            let stop = stop.clone();
            side_tasks.push(async move { task.run(stop).await }.boxed());
        }
    }
    if !until_caught_up {
        for emitter in &config.heartbeats {
            let Some(cluster) = config.cluster(emitter.target.as_str()) else {
                continue;
            };
            match Client::connect(ClientConfig::new(cluster.bootstrap_servers.clone())).await {
                Ok(client) => {
                    let mut task = HeartbeatTask::new(emitter.clone(), client);
                    let stop = stop.clone();
                    side_tasks.push(async move { task.run(stop).await }.boxed());
                }
                Err(e) => tracing::warn!(
                    cluster = %emitter.target,
                    error = %e,
                    "cannot reach the cluster: no heartbeats written into it"
                ),
            }
        }
    }
    let side_tasks = tokio::spawn(futures::future::join_all(side_tasks));
    let http = listener.map(|listener| {
        if let Ok(addr) = listener.local_addr() {
            tracing::info!(%addr, "HTTP API listening (/healthz, /v1/translate, /v1/groups/GROUP)");
        }
        tokio::spawn(crate::http::serve(listener, api, stop.clone()))
    });
    let runs = flows.into_iter().map(|(mut flow, mut checkpoints)| {
        let stop = stop.clone();
        async move {
            let result = if until_caught_up {
                let result = flow.run_until_caught_up().await;
                if let (Ok(()), Some(task)) = (&result, &mut checkpoints) {
                    final_checkpoint_passes(task, &flow.name()).await;
                }
                result
            } else if let Some(task) = &mut checkpoints {
                // The task stops with the flow, whether on the signal or on a flow failure.
                let (flow_done, flow_done_rx) = tokio::sync::oneshot::channel::<()>();
                let task_stop = futures::future::select(stop.clone(), flow_done_rx).map(|_| ());
                let run_flow = async {
                    let result = flow.run(stop).await;
                    let _ = flow_done.send(());
                    result
                };
                tokio::join!(run_flow, task.run(task_stop)).0
            } else {
                flow.run(stop).await
            };
            let stats = flow.stats();
            tracing::info!(flow = %flow.name(), ?stats, "flow stopped");
            result.with_context(|| format!("flow {} failed", flow.name()))
        }
    });
    let results = futures::future::join_all(runs).await;
    // On a signal they stop with the flows; after a one-shot copy or a failed flow, at once.
    side_tasks.abort();
    if let Some(http) = http {
        // With --until-caught-up no signal comes: the API ends with the flows.
        http.abort();
    }
    for result in results {
        result?;
    }
    Ok(())
}

/// With `--until-caught-up`: one checkpoint pass (and a group-sync pass when enabled) once the
/// flow has caught up, so the checkpoints match the data just mirrored. A failure is logged,
/// not fatal: the data is mirrored, and the next run writes the checkpoints.
async fn final_checkpoint_passes(task: &mut CheckpointTask, flow: &str) {
    if task.emits_checkpoints() {
        match task.emit_once().await {
            Ok(summary) => tracing::info!(
                flow,
                topic = task.topic(),
                groups = summary.groups.len(),
                written = summary.emitted.len(),
                unchanged = summary.unchanged,
                "checkpoints written"
            ),
            Err(e) => tracing::error!(flow, error = %e, "cannot write checkpoints"),
        }
    }
    if task.syncs_groups() {
        match task.sync_once().await {
            Ok(summary) => tracing::info!(
                flow,
                synced_groups = summary.synced_groups.len(),
                written = summary.written.len(),
                skipped = summary.skipped.len(),
                "group offsets synced"
            ),
            Err(e) => tracing::error!(flow, error = %e, "cannot sync group offsets"),
        }
    }
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
    tracing::info!("stopping: finishing the current round and writing the offset map");
}

/// The producer keys strait honours: `delivery.timeout.ms` and `request.timeout.ms`, resolved
/// the way MM2 resolves them (`T.producer.*`, `S->T.producer.*`). Acks are always `all` and
/// idempotence always on.
fn producer_config(
    props: &strait_core::config::ClientProps,
) -> anyhow::Result<strait_kafka::produce::ProducerConfig> {
    let mut config = strait_kafka::produce::ProducerConfig::default();
    let millis = |key: &str| -> anyhow::Result<Option<std::time::Duration>> {
        props
            .get(key)
            .map(|v| {
                v.expose()
                    .trim()
                    .parse::<u64>()
                    .map(std::time::Duration::from_millis)
                    .with_context(|| format!("producer {key} must be a number of milliseconds"))
            })
            .transpose()
    };
    if let Some(d) = millis("delivery.timeout.ms")? {
        config.delivery_timeout = d;
    }
    if let Some(d) = millis("request.timeout.ms")? {
        config.broker_timeout = d;
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(extra: &str) -> strait_core::config::ClientProps {
        let text = format!(
            "clusters = a, b\na.bootstrap.servers = h:1\nb.bootstrap.servers = h:2\n\
             a->b.enabled = true\n{extra}\n"
        );
        let config = StraitConfig::parse(&text, "t.properties").unwrap();
        config.client_props(&config.flows[0], Side::Target, Role::Producer)
    }

    #[test]
    fn producer_timeouts_come_from_the_target_producer_keys() {
        let c = producer_config(&props(
            "b.producer.delivery.timeout.ms = 5000\nb.producer.request.timeout.ms = 700",
        ))
        .unwrap();
        assert_eq!(c.delivery_timeout, std::time::Duration::from_secs(5));
        assert_eq!(c.broker_timeout, std::time::Duration::from_millis(700));
        let defaults = producer_config(&props("")).unwrap();
        assert_eq!(
            defaults.delivery_timeout,
            std::time::Duration::from_secs(120)
        );
        let bad = producer_config(&props("b.producer.delivery.timeout.ms = soon")).unwrap_err();
        assert!(
            format!("{bad:#}").contains("delivery.timeout.ms"),
            "{bad:#}"
        );
    }
}
