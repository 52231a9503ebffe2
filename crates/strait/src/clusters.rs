//! Clients of a config's clusters for the commands that run once (`failover`, `failback`,
//! `offsets export|import`, `failover check`): the flow named on the command line, its
//! clusters' client settings as MM2 resolves them, and connections that may give up early.

use std::time::Duration;

use anyhow::{bail, Context as _};
use strait_core::config::{FlowConfig, StraitConfig};
use strait_core::filter::PatternList;
use strait_kafka::{Client, ClientConfig};

/// The flow called `name` (`A->B`), or an error listing the config's flows.
pub(crate) fn find_flow<'a>(
    config: &'a StraitConfig,
    name: &str,
) -> anyhow::Result<&'a FlowConfig> {
    let wanted = name.replace(' ', "");
    config
        .flows
        .iter()
        .find(|f| f.name() == wanted)
        .with_context(|| {
            let names: Vec<String> = config.flows.iter().map(FlowConfig::name).collect();
            format!(
                "{} has no enabled flow {name}; its flows are: {}",
                config.path.display(),
                names.join(", ")
            )
        })
}

/// `--groups`, parsed as the config's `groups` list.
pub(crate) fn narrowing(groups: Option<&str>) -> anyhow::Result<Option<PatternList>> {
    groups
        .map(|g| PatternList::parse(g).context("--groups"))
        .transpose()
}

/// The bootstrap servers of cluster `alias`.
pub(crate) fn bootstrap(config: &StraitConfig, alias: &str) -> anyhow::Result<Vec<String>> {
    Ok(config
        .cluster(alias)
        .with_context(|| format!("cluster {alias} is not declared"))?
        .bootstrap_servers
        .clone())
}

/// A client config for cluster `alias`: its bootstrap servers, TLS and SASL (`A.admin.*` over
/// `A.*`), as MM2 resolves them.
pub(crate) fn client_config(config: &StraitConfig, alias: &str) -> anyhow::Result<ClientConfig> {
    Ok(config.cluster_client_config(alias, strait_core::config::Role::Admin)?)
}

/// Clients of both clusters of `flow`.
pub(crate) async fn connect_both(
    config: &StraitConfig,
    flow: &FlowConfig,
) -> anyhow::Result<(Client, Client)> {
    let source = connect(client_config(config, flow.source.as_str())?, None)
        .await
        .with_context(|| format!("cannot reach source {}", flow.source))?;
    let target = connect(client_config(config, flow.target.as_str())?, None)
        .await
        .with_context(|| format!("cannot reach target {}", flow.target))?;
    Ok((source, target))
}

/// A client; with `quick`, giving up after that long.
pub(crate) async fn connect(
    mut config: ClientConfig,
    quick: Option<Duration>,
) -> anyhow::Result<Client> {
    let Some(limit) = quick else {
        return Ok(Client::connect(config).await?);
    };
    config.connection.connect_timeout = limit;
    config.operation_timeout = limit * 2;
    match tokio::time::timeout(limit, Client::connect(config)).await {
        Ok(client) => Ok(client?),
        Err(_) => bail!("no answer within {limit:?}"),
    }
}
