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

/// How long a one-shot command waits for a cluster (`--timeout`); Kafka's admin timeout
/// when not given.
static PATIENCE: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();

/// After this long without an answer, a command says what it waits for.
const SAY_WAITING_AFTER: Duration = Duration::from_secs(2);

/// Sets `--timeout` for the process's one-shot commands.
pub(crate) fn set_patience(timeout: Duration) {
    let _ = PATIENCE.set(timeout);
}

/// `--timeout`: seconds, more than 0, finite.
pub(crate) fn parse_timeout(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(format!("a number of seconds above 0, not {text}"));
    }
    Duration::try_from_secs_f64(seconds).map_err(|e| e.to_string())
}

/// A client; with `quick`, giving up after that long, else after `--timeout` when given.
/// Past 2 s without an answer, says on stderr which cluster it waits for and how long it
/// will, so an incident command is never silent for a minute.
pub(crate) async fn connect(
    mut config: ClientConfig,
    quick: Option<Duration>,
) -> anyhow::Result<Client> {
    let limit = quick.or_else(|| PATIENCE.get().copied());
    if let Some(limit) = limit {
        config.connection.connect_timeout = config.connection.connect_timeout.min(limit);
        config.operation_timeout = limit;
    }
    let patience = limit.unwrap_or(config.operation_timeout);
    let servers = config.bootstrap.join(",");
    let connecting = tokio::time::timeout(patience, Client::connect(config));
    tokio::pin!(connecting);
    if quick.is_none() {
        tokio::select! {
            answered = &mut connecting => return answered_within(answered, patience),
            () = tokio::time::sleep(SAY_WAITING_AFTER) => eprintln!(
                "strait: waiting for {servers} to answer (giving up after {}; --timeout sets it)",
                crate::format::duration(patience.as_secs_f64())
            ),
        }
    }
    answered_within(connecting.await, patience)
}

fn answered_within(
    answered: Result<strait_kafka::Result<Client>, tokio::time::error::Elapsed>,
    patience: Duration,
) -> anyhow::Result<Client> {
    match answered {
        Ok(client) => Ok(client?),
        Err(_) => bail!("no answer within {patience:?}"),
    }
}
