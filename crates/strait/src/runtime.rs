//! Running the flows of a config: one flow connected and started ([`connect_flow`]) and run
//! with its checkpoints ([`run_flow`]), which `strait run` (`run.rs`) keeps going under its
//! supervisor (`supervisor.rs`); and a one-shot copy of every flow, shared by `strait run
//! --until-caught-up` and `strait mirror` (`mirror.rs`).
//!
//! [`start`] starts every enabled flow and what runs beside it: checkpoints and group sync per
//! flow (`strait_core::offsets::checkpoints`), topic ACL sync, and the HTTP API.
//! [`Mirroring::run`] then runs the flows to their end.

use std::path::Path;

use anyhow::Context as _;
use futures::future::{BoxFuture, Shared};
use futures::{FutureExt as _, StreamExt as _};
use strait_core::acls::AclSyncTask;
use strait_core::config::{FlowConfig, Role, Side, StraitConfig};
use strait_core::flow::{Flow, FlowOptions, FlowStats};
use strait_core::internal::map_store::MapStore;
use strait_core::offsets::checkpoints::CheckpointTask;
use strait_core::scale::UnitFilter;
use strait_kafka::Client;

/// How long the flows run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Until {
    /// Until Ctrl-C or SIGTERM: `strait run`.
    Stopped,
    /// Until every partition has reached the source end it had at start: a one-shot copy
    /// (`strait run --until-caught-up`, `strait mirror`). No heartbeats (there is no liveness
    /// to show), topic ACLs synced once, one last checkpoint pass after the copy.
    CaughtUp,
}

/// Ctrl-C or SIGTERM, as a future any number of tasks can wait on.
pub(crate) type Stop = Shared<BoxFuture<'static, ()>>;

/// A started flow and the clients it uses.
#[derive(Debug)]
pub(crate) struct StartedFlow {
    /// The flow, placed where its map ends, not running yet.
    pub(crate) flow: Flow,
    /// Its config.
    pub(crate) config: FlowConfig,
    /// A client of its source cluster.
    pub(crate) source: Client,
    /// A client of its target cluster.
    pub(crate) target: Client,
    /// Checkpoints and group sync beside it, when enabled.
    checkpoints: Option<CheckpointTask>,
}

/// How a flow's run ended.
#[derive(Debug)]
pub(crate) struct FlowOutcome {
    /// `A->B`.
    pub(crate) name: String,
    /// Its counters at the end (for an interrupted copy, as of its last round).
    pub(crate) stats: FlowStats,
    /// How long it ran.
    pub(crate) elapsed: std::time::Duration,
    /// Whether it ended as asked (caught up, or stopped) or failed or was interrupted.
    pub(crate) result: anyhow::Result<()>,
    /// Whether a signal stopped a copy until caught up before this flow got there.
    pub(crate) interrupted: bool,
}

/// Every enabled flow started for a one-shot copy (`strait run --until-caught-up`,
/// `strait mirror`), with the tasks beside them running. `strait run` itself runs each flow
/// under its own supervisor (`supervisor.rs`).
#[derive(Debug)]
pub(crate) struct Mirroring {
    flows: Vec<StartedFlow>,
    stop: Stop,
    http: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

/// Loads the config and starts every enabled flow for a one-shot copy ([`Until::CaughtUp`]):
/// all of them or none, its checkpoints, topic ACLs synced once, and the HTTP API on `listen`.
/// No heartbeats: a copy has no liveness to show.
pub(crate) async fn start(
    path: &Path,
    listen: Option<std::net::SocketAddr>,
) -> anyhow::Result<Mirroring> {
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
    // A one-shot copy writes without the workers' group: beside running workers it would be a
    // second, unfenced writer of their partitions and map.
    let exactly_once: Vec<String> = config
        .flows
        .iter()
        .filter(|f| f.workers.as_ref().is_some_and(|w| w.exactly_once))
        .map(FlowConfig::name)
        .collect();
    anyhow::ensure!(
        exactly_once.is_empty(),
        "{}: {} exactly-once (exactly.once.source.support = enabled): each unit commits in \
         transactions under its workers' fencing, which a one-shot copy (`strait run \
         --until-caught-up`, `strait mirror`) does not join. Run `strait run` (it joins the \
         workers), or copy with a file without exactly.once.source.support while no worker runs",
        path.display(),
        exactly_once.join(", ")
    );
    for flow in &config.flows {
        refuse_beside_live_workers(&config, flow, path).await?;
    }
    for flow in &config.flows {
        let (started, live, acls) =
            connect_flow(&config, flow, None, None, std::time::Duration::MAX)
                .await
                .map_err(StartError::into_inner)?;
        api.extend(live);
        acl_tasks.extend(acls);
        flows.push(started);
    }
    let stop: Stop = async move {
        shutdown_signal().await;
        tracing::warn!(
            "interrupted: the copy stops now, mid-round; the next run resumes from the offset \
             map and matches what this one wrote beyond it"
        );
    }
    .boxed()
    .shared();
    for mut task in acl_tasks {
        if let Err(e) = task.sync_once().await {
            tracing::warn!(error = %e, "cannot sync topic ACLs");
        }
    }
    let http = listener.map(|listener| {
        if let Ok(addr) = listener.local_addr() {
            tracing::info!(%addr, "HTTP API listening (/healthz, /v1/translate, /v1/groups/GROUP)");
        }
        let api = std::sync::Arc::new(crate::http::Api::fixed(api));
        tokio::spawn(crate::http::serve(listener, api, stop.clone()))
    });
    Ok(Mirroring { flows, stop, http })
}

/// A one-shot copy of `flow` refuses to run while `strait run` processes of the same flow are
/// members of its workers' group on the target: they own its partitions, and the copy would
/// write them a second time.
async fn refuse_beside_live_workers(
    config: &StraitConfig,
    flow: &FlowConfig,
    path: &Path,
) -> anyhow::Result<()> {
    let Some(workers) = &flow.workers else {
        return Ok(());
    };
    let target = Client::connect(
        config
            .client_config(flow, Side::Target, Role::Producer)
            .with_context(|| format!("flow {}", flow.name()))?,
    )
    .await
    .with_context(|| format!("flow {}: cannot reach target {}", flow.name(), flow.target))?;
    // A member that died (kill -9) is removed a session timeout after its last heartbeat: the
    // copy waits that long for the group to empty before it refuses.
    let patience =
        std::time::Instant::now() + workers.session_timeout + std::time::Duration::from_secs(2);
    let mut said = false;
    let group = loop {
        let group = target
            .describe_group(&workers.group_id)
            .await
            .with_context(|| {
                format!(
                    "flow {}: cannot tell whether `strait run` processes of this flow are \
                     running (describing the workers' group {} on {})",
                    flow.name(),
                    workers.group_id,
                    flow.target
                )
            })?;
        if !group.is_active() || std::time::Instant::now() >= patience {
            break group;
        }
        if !said {
            said = true;
            tracing::warn!(flow = %flow.name(), group = %workers.group_id, state = %group.state,
                "the flow's workers' group has members: waiting up to its session timeout for \
                 them to leave (a process that died is removed by then)");
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    };
    anyhow::ensure!(
        !group.is_active(),
        "{}: flow {} is being mirrored by {} `strait run` process(es) with this file (the \
         workers' group {} on {} is {}): a one-shot copy beside them would write its partitions \
         a second time. Stop them first, or let them mirror",
        path.display(),
        flow.name(),
        group.members.len().max(1),
        workers.group_id,
        flow.target,
        group.state
    );
    Ok(())
}

/// Why a flow did not start.
#[derive(Debug)]
pub(crate) enum StartError {
    /// Its settings are wrong: only a changed file helps.
    Config(anyhow::Error),
    /// A cluster did not answer or refused: trying again later may help.
    Cluster(anyhow::Error),
}

impl StartError {
    pub(crate) fn into_inner(self) -> anyhow::Error {
        match self {
            StartError::Config(e) | StartError::Cluster(e) => e,
        }
    }
}

/// Connects one flow's clients, places the flow where its map ends and makes what runs beside
/// it: its checkpoint task (inside the [`StartedFlow`]), what the HTTP API needs of it, and its
/// topic ACL sync when enabled. A cluster where no broker answers within `patience` (at most
/// `default.api.timeout.ms`, 60 s) is a [`StartError::Cluster`] with the last error.
///
/// With `unit`, only that unit of a flow run by workers is started: its partitions, written
/// under the worker's `lease` (`strait_kafka::lease`), and with exactly-once through a
/// transactional producer whose id is the workers' group id and the unit's index, which fences
/// the unit's earlier owner. The work beside the flow (checkpoints,
/// group sync, ACL sync, the HTTP API's map) belongs to unit 0 alone, and reads the map as all
/// units write it, read again every checkpoint interval. `None` from the API part: this unit
/// does not serve it.
pub(crate) async fn connect_flow(
    config: &StraitConfig,
    flow: &FlowConfig,
    unit: Option<u32>,
    lease: Option<strait_kafka::lease::Lease>,
    patience: std::time::Duration,
) -> Result<
    (
        StartedFlow,
        Option<crate::http::ApiFlow>,
        Option<AclSyncTask>,
    ),
    StartError,
> {
    let settings =
        |e: anyhow::Error| StartError::Config(e.context(format!("flow {}", flow.name())));
    // One client per cluster of the flow, secured as its main user: the source as the
    // flow's consumer (`A.consumer.*`), the target as its producer (`B.producer.*`), each
    // over the cluster's own settings (`docs/security.md`).
    let source_config = config
        .client_config(flow, Side::Source, Role::Consumer)
        .map_err(|e| settings(e.into()))?;
    let target_config = config
        .client_config(flow, Side::Target, Role::Producer)
        .map_err(|e| settings(e.into()))?;
    let mut options = FlowOptions {
        producer: producer_config(&config.client_props(flow, Side::Target, Role::Producer))
            .map_err(settings)?,
        ..fetch_options(&config.client_props(flow, Side::Source, Role::Consumer))
            .map_err(settings)?
    };
    if let (Some(index), Some(workers)) = (unit, &flow.workers) {
        options.unit = Some(UnitFilter {
            index,
            units: flow.tasks_max,
        });
        if workers.exactly_once {
            options.producer.transactional_id = Some(format!("{}-{index}", workers.group_id));
        }
    }
    options.producer.lease = lease;
    let beside = unit.is_none_or(|index| index == 0);
    let source = Client::connect_within(source_config, patience)
        .await
        .map_err(|e| {
            StartError::Cluster(anyhow::Error::new(e).context(format!(
                "flow {}: cannot reach source {}",
                flow.name(),
                flow.source
            )))
        })?;
    let target = Client::connect_within(target_config, patience)
        .await
        .map_err(|e| {
            StartError::Cluster(anyhow::Error::new(e).context(format!(
                "flow {}: cannot reach target {}",
                flow.name(),
                flow.target
            )))
        })?;
    // The checkpoints and group sync of a unit are fenced as its data is, by an id of their own
    // (the unit's id is its flow's: a second initialisation of it would fence the flow).
    let mut producer = options.producer.clone();
    producer.transactional_id = producer
        .transactional_id
        .map(|id| format!("{id}-checkpoints"));
    let started = Flow::start(flow.clone(), options, source.clone(), target.clone())
        .await
        .map_err(|e| {
            StartError::Cluster(
                anyhow::Error::new(e).context(format!("flow {} cannot start", flow.name())),
            )
        })?;
    tracing::info!(
        flow = %started.name(),
        topics = started.topics().len(),
        "flow started"
    );
    // A unit's flow knows only its own partitions' progress: the work beside it reads the map
    // as every unit writes it.
    let map = if unit.is_some() && flow.tasks_max > 1 && beside {
        let every = flow
            .emit_checkpoints
            .into_iter()
            .chain(flow.sync_group_offsets)
            .min()
            .unwrap_or(std::time::Duration::from_secs(60));
        MapStore::follow(
            target.clone(),
            flow.source_alias.as_str().to_owned(),
            std::sync::Arc::clone(&started.map_updates().borrow()),
            every,
        )
    } else {
        started.map_updates()
    };
    let live = beside.then(|| crate::http::ApiFlow {
        config: flow.clone(),
        source: source.clone(),
        target: target.clone(),
        map: map.clone(),
    });
    let acls = (beside && AclSyncTask::is_enabled(flow))
        .then(|| AclSyncTask::new(flow.clone(), source.clone(), target.clone()));
    let checkpoints = (beside && CheckpointTask::is_enabled(flow)).then(|| {
        CheckpointTask::new(flow.clone(), source.clone(), target.clone(), map)
            .with_producer_config(producer)
    });
    Ok((
        StartedFlow {
            flow: started,
            config: flow.clone(),
            source,
            target,
            checkpoints,
        },
        live,
        acls,
    ))
}

impl Mirroring {
    /// The started flows, in config order.
    pub(crate) fn flows(&self) -> &[StartedFlow] {
        &self.flows
    }

    /// Runs every flow to its end, concurrently: until caught up. A signal interrupts the copy
    /// at once: the flows still running are
    /// dropped mid-round (what they wrote beyond the map is matched by the next run, as after a
    /// crash) and end as interrupted. `on_end(i, outcome)` is called as flow `i` ends; the
    /// outcomes come back in config order.
    pub(crate) async fn run(self, on_end: impl Fn(usize, &FlowOutcome)) -> Vec<FlowOutcome> {
        let Mirroring { flows, stop, http } = self;
        let began = std::time::Instant::now();
        let watched: Vec<_> = flows
            .iter()
            .map(|f| (f.flow.name(), f.flow.stats_updates()))
            .collect();
        let mut runs: futures::stream::FuturesUnordered<_> = flows
            .into_iter()
            .enumerate()
            .map(|(i, started)| {
                let stop = stop.clone();
                async move { (i, run_flow(started, Until::CaughtUp, stop).await) }
            })
            .collect();
        let mut interrupted = stop.clone();
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
        if let Some(http) = http {
            // Caught up, no signal comes: the API ends with the flows.
            http.abort();
        }
        outcomes
            .into_iter()
            .zip(watched)
            .map(|(outcome, (name, stats))| {
                outcome.unwrap_or_else(|| FlowOutcome {
                    stats: *stats.borrow(),
                    elapsed: began.elapsed(),
                    result: Err(anyhow::anyhow!(
                        "flow {name} was interrupted before it caught up; the next run \
                         resumes from the offset map"
                    )),
                    interrupted: true,
                    name,
                })
            })
            .collect()
    }
}

/// One flow, with its checkpoints beside it, until `until`.
pub(crate) async fn run_flow(started: StartedFlow, until: Until, stop: Stop) -> FlowOutcome {
    let began = std::time::Instant::now();
    let StartedFlow {
        mut flow,
        mut checkpoints,
        ..
    } = started;
    let result = match (until, &mut checkpoints) {
        (Until::CaughtUp, checkpoints) => {
            let result = flow.run_until_caught_up().await;
            if let (Ok(()), Some(task)) = (&result, checkpoints) {
                final_checkpoint_passes(task, &flow.name()).await;
            }
            // Caught up everywhere it could: a halted partition was not copied, which a
            // one-shot copy must not report as success.
            let halted = flow.halted();
            match (result, halted.first()) {
                (Ok(()), Some((tp, why))) => Err(strait_core::flow::FlowError::Diverged(format!(
                    "{} partition(s) halted, not copied; {tp}: {why}",
                    halted.len()
                ))),
                (result, _) => result,
            }
        }
        (Until::Stopped, Some(task)) => {
            // The task stops with the flow, whether on the signal or on a flow failure.
            let (flow_done, flow_done_rx) = tokio::sync::oneshot::channel::<()>();
            let task_stop = futures::future::select(stop.clone(), flow_done_rx).map(|_| ());
            let run_flow = async {
                let result = flow.run(stop).await;
                let _ = flow_done.send(());
                result
            };
            tokio::join!(run_flow, task.run(task_stop)).0
        }
        (Until::Stopped, None) => flow.run(stop).await,
    };
    let name = flow.name();
    let stats = flow.stats();
    // Fields named as the metrics name them (`docs/metrics.md`), not a debug dump of the struct.
    tracing::info!(
        flow = %name,
        record_count = stats.records,
        byte_count = stats.bytes,
        batches_forwarded = stats.batches_forwarded,
        batches_rebuilt = stats.batches_rebuilt,
        batches_dropped_control = stats.control_batches_skipped,
        batches_dropped_aborted = stats.aborted_batches_skipped,
        lost_records = stats.lost_records,
        recovered_records = stats.recovered_records,
        duplicate_records = stats.duplicate_records,
        "flow stopped"
    );
    let result = result.with_context(|| format!("flow {name} failed"));
    FlowOutcome {
        name,
        stats,
        elapsed: began.elapsed(),
        result,
        interrupted: false,
    }
}

/// After a one-shot copy: one checkpoint pass (and a group-sync pass when enabled), so the
/// checkpoints match the data just mirrored. A failure is logged, not fatal: the data is
/// mirrored, and the next run writes the checkpoints.
async fn final_checkpoint_passes(task: &mut CheckpointTask, flow: &str) {
    if task.emits_checkpoints() {
        match task.emit_once().await {
            Ok(summary) => tracing::info!(
                flow = %flow,
                topic = %task.topic(),
                groups = summary.groups.len(),
                written = summary.emitted.len(),
                unchanged = summary.unchanged,
                "checkpoints written"
            ),
            Err(e) => tracing::error!(flow = %flow, error = %e, "cannot write checkpoints"),
        }
    }
    if task.syncs_groups() {
        match task.sync_once().await {
            Ok(summary) => tracing::info!(
                flow = %flow,
                synced_groups = summary.synced_groups.len(),
                written = summary.written.len(),
                skipped = summary.skipped.len(),
                "group offsets synced"
            ),
            Err(e) => tracing::error!(flow = %flow, error = %e, "cannot sync group offsets"),
        }
    }
}

/// Ctrl-C or SIGTERM.
pub(crate) async fn shutdown_signal() {
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
}

/// The producer keys strait honours: `delivery.timeout.ms` and `request.timeout.ms`, resolved
/// the way MM2 resolves them (`T.producer.*`, `S->T.producer.*`). Acks are always `all` and
/// idempotence always on.
fn producer_config(
    props: &strait_core::config::ClientProps,
) -> anyhow::Result<strait_kafka::produce::ProducerConfig> {
    let mut config = strait_kafka::produce::ProducerConfig::default();
    if let Some(d) = millis(props, Role::Producer, "delivery.timeout.ms")? {
        config.delivery_timeout = d;
    }
    if let Some(d) = millis(props, Role::Producer, "request.timeout.ms")? {
        config.broker_timeout = d;
    }
    if let Some(n) = bytes(props, Role::Producer, "max.request.size")? {
        config.max_request_size = n as usize;
    }
    Ok(config)
}

/// A flow's fetch settings from the source consumer's keys (`S.consumer.*`, then
/// `S->T.consumer.*`, as MM2 resolves them): `fetch.max.wait.ms`, `fetch.min.bytes`,
/// `fetch.max.bytes`, `max.partition.fetch.bytes`, `check.crcs`. Without
/// `max.partition.fetch.bytes`, a fetch gives each partition its share of the fetch's budget
/// rather than 1 MiB ([`FlowOptions::partition_bytes_from_budget`]).
fn fetch_options(props: &strait_core::config::ClientProps) -> anyhow::Result<FlowOptions> {
    let mut options = FlowOptions {
        partition_bytes_from_budget: true,
        ..FlowOptions::default()
    };
    if let Some(d) = millis(props, Role::Consumer, "fetch.max.wait.ms")? {
        options.fetch_max_wait = d;
    }
    if let Some(n) = bytes(props, Role::Consumer, "fetch.min.bytes")? {
        options.fetch_min_bytes = n;
    }
    if let Some(n) = bytes(props, Role::Consumer, "fetch.max.bytes")? {
        options.fetch_max_bytes = n;
    }
    if let Some(n) = bytes(props, Role::Consumer, "max.partition.fetch.bytes")? {
        options.partition_max_bytes = n;
        options.partition_bytes_from_budget = false;
    }
    if let Some(check) = value::<bool>(props, Role::Consumer, "check.crcs")? {
        options.check_crcs = check;
    }
    Ok(options)
}

/// `key` of the `role` client as milliseconds.
fn millis(
    props: &strait_core::config::ClientProps,
    role: Role,
    key: &str,
) -> anyhow::Result<Option<std::time::Duration>> {
    Ok(value::<u64>(props, role, key)?.map(std::time::Duration::from_millis))
}

/// `key` of the `role` client as a byte count (1 to 2 GiB, the wire's int32).
fn bytes(
    props: &strait_core::config::ClientProps,
    role: Role,
    key: &str,
) -> anyhow::Result<Option<i32>> {
    value::<i32>(props, role, key)
}

/// `key` of the `role` client, checked as the key catalogue reads it, then parsed.
fn value<T: std::str::FromStr>(
    props: &strait_core::config::ClientProps,
    role: Role,
    key: &str,
) -> anyhow::Result<Option<T>> {
    let Some(text) = props.checked(role, key).map_err(anyhow::Error::msg)? else {
        return Ok(None);
    };
    let parsed = text.to_ascii_lowercase().parse::<T>().ok();
    parsed
        .map(Some)
        .with_context(|| format!("{}{key} = {text:?} cannot be read", role.prefix()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The resolved keys of the `a->b` flow's `side` client in `role`, with `extra` lines.
    fn client_props(extra: &str, side: Side, role: Role) -> strait_core::config::ClientProps {
        let config = StraitConfig::parse(&file(extra), "t.properties").unwrap();
        config.client_props(&config.flows[0], side, role)
    }

    fn file(extra: &str) -> String {
        format!(
            "clusters = a, b\na.bootstrap.servers = h:1\nb.bootstrap.servers = h:2\n\
             a->b.enabled = true\n{extra}\n"
        )
    }

    /// A client value strait acts on is checked when the file is read: the error names the
    /// line and the key.
    fn refused(extra: &str) {
        let e = StraitConfig::parse(&file(extra), "t.properties").unwrap_err();
        let key = extra.split(" = ").next().unwrap();
        let text = e.to_string();
        assert!(text.contains(key) && text.contains(":5"), "{extra}: {text}");
    }

    fn props(extra: &str) -> strait_core::config::ClientProps {
        client_props(extra, Side::Target, Role::Producer)
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
        refused("b.producer.delivery.timeout.ms = soon");
        refused("a->b.producer.max.request.size = 0");
        let sized = producer_config(&props("b.producer.max.request.size = 4194304")).unwrap();
        assert_eq!(sized.max_request_size, 4 << 20);
        assert_eq!(defaults.max_request_size, 1 << 20);
    }

    fn consumer_props(extra: &str) -> strait_core::config::ClientProps {
        client_props(extra, Side::Source, Role::Consumer)
    }

    #[test]
    fn fetch_settings_come_from_the_source_consumer_keys() {
        let defaults = fetch_options(&consumer_props("")).unwrap();
        assert_eq!(
            defaults.fetch_max_wait,
            std::time::Duration::from_millis(500)
        );
        assert_eq!(
            (
                defaults.fetch_min_bytes,
                defaults.fetch_max_bytes,
                defaults.partition_max_bytes
            ),
            (1, 50 << 20, 1 << 20)
        );
        assert!(defaults.partition_bytes_from_budget);
        assert!(defaults.check_crcs);
        let unchecked =
            fetch_options(&consumer_props("a->b.consumer.check.crcs = FALSE ")).unwrap();
        assert!(!unchecked.check_crcs);
        // The flow's consumer keys, and the cluster's over them, as MM2 resolves them.
        let set = fetch_options(&consumer_props(
            "a->b.consumer.fetch.max.wait.ms = 100\na->b.consumer.fetch.min.bytes = 65536\n\
             a.consumer.fetch.max.bytes = 8388608\na->b.consumer.max.partition.fetch.bytes = 1024\n\
             a.consumer.max.partition.fetch.bytes = 2097152",
        ))
        .unwrap();
        assert_eq!(set.fetch_max_wait, std::time::Duration::from_millis(100));
        assert_eq!(
            (
                set.fetch_min_bytes,
                set.fetch_max_bytes,
                set.partition_max_bytes
            ),
            (65536, 8 << 20, 2 << 20)
        );
        assert!(
            !set.partition_bytes_from_budget,
            "a partition limit the file sets is kept as it is"
        );
        for bad in [
            "a.consumer.fetch.max.bytes = 0",
            "a.consumer.fetch.max.bytes = 3000000000",
            "a.consumer.fetch.min.bytes = lots",
            "a.consumer.check.crcs = yes",
            "a->b.consumer.fetch.max.wait.ms = -1",
        ] {
            refused(bad);
        }
    }
}
