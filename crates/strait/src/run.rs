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
        let options = FlowOptions {
            producer: producer_config(&config.client_props(flow, Side::Target, Role::Producer))
                .with_context(|| format!("flow {}", flow.name()))?,
            ..FlowOptions::default()
        };
        let started = Flow::start(flow.clone(), options, source, target)
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
