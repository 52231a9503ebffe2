//! `strait run`: every enabled flow of the config, concurrently, until stopped.

use std::path::Path;

use anyhow::{bail, Context as _};
use strait_core::config::{Role, SecurityProtocol, Side, StraitConfig};
use strait_core::flow::{Flow, FlowOptions};
use strait_kafka::{Client, ClientConfig};

pub(crate) async fn run(path: &Path, until_caught_up: bool) -> anyhow::Result<()> {
    let config = StraitConfig::load(path)?;
    for warning in &config.warnings {
        tracing::warn!("{}: {warning}", path.display());
    }
    let mut flows = Vec::new();
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
        let started = Flow::start(flow.clone(), FlowOptions::default(), source, target)
            .await
            .with_context(|| format!("flow {} cannot start", flow.name()))?;
        tracing::info!(
            flow = %started.name(),
            topics = started.topics().len(),
            "flow started"
        );
        flows.push(started);
    }
    let runs = flows.into_iter().map(|mut flow| async move {
        let result = if until_caught_up {
            flow.run_until_caught_up().await
        } else {
            flow.run(shutdown_signal()).await
        };
        let stats = flow.stats();
        tracing::info!(flow = %flow.name(), ?stats, "flow stopped");
        result.with_context(|| format!("flow {} failed", flow.name()))
    });
    for result in futures::future::join_all(runs).await {
        result?;
    }
    Ok(())
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
