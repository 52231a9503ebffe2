//! One flow of a config started and run: [`connect_flow`] connects its clients, places the
//! flow where its map ends and makes what runs beside it (checkpoints and group sync, the HTTP
//! API's view of it, topic ACL sync); [`run_flow`] runs it with its checkpoints until it caught
//! up or is stopped. The supervisor (`supervisor/`) and the one-shot copy (`copy/`) both run
//! their flows this way.

use futures::future::{BoxFuture, Shared};
use futures::FutureExt as _;
use strait_core::acls::AclSyncTask;
use strait_core::config::{FlowConfig, Role, Side, StraitConfig};
use strait_core::flow::{Flow, FlowError, FlowStats};
use strait_core::internal::map_store::MapStore;
use strait_core::offsets::checkpoints::CheckpointTask;
use strait_core::scale::UnitFilter;
use strait_kafka::Client;

use crate::error::Error;
use crate::http::ApiFlow;
use crate::settings::{fetch_options, producer_config};

/// How long a flow runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Until {
    /// Until stopped: `strait run`.
    Stopped,
    /// Until every partition has reached the source end it had at start: a one-shot copy
    /// (`strait run --until-caught-up`, `strait mirror`). No heartbeats (there is no liveness
    /// to show), topic ACLs synced once, one last checkpoint pass after the copy. A stop between
    /// rounds ends it as [`Error::Interrupted`], with the map written for what it copied.
    CaughtUp,
}

/// The end of a run (shutdown, or a flow asked to stop), as a future any number of tasks can
/// wait on.
pub(crate) type Stop = Shared<BoxFuture<'static, ()>>;

/// A started flow and the clients it uses.
#[derive(Debug)]
pub struct StartedFlow {
    /// The flow, placed where its map ends, not running yet.
    pub flow: Flow,
    /// Its config.
    pub config: FlowConfig,
    /// A client of its source cluster.
    pub source: Client,
    /// A client of its target cluster.
    pub target: Client,
    /// Checkpoints and group sync beside it, when enabled.
    checkpoints: Option<CheckpointTask>,
}

/// How a flow's run ended.
#[derive(Debug)]
pub struct FlowOutcome {
    /// `A->B`.
    pub name: String,
    /// Its counters at the end (for an interrupted copy, as of its last round).
    pub stats: FlowStats,
    /// How long it ran.
    pub elapsed: std::time::Duration,
    /// Whether it ended as asked (caught up, or stopped), or why not.
    pub result: Result<(), Error>,
    /// Whether a signal stopped a copy until caught up before this flow got there.
    pub interrupted: bool,
}

/// A started flow and what runs beside it: what the HTTP API needs of it, and its topic ACL
/// sync (`None` where this process does not do that work).
pub(crate) type Connected = (StartedFlow, Option<ApiFlow>, Option<AclSyncTask>);

/// Connects one flow's clients, places the flow where its map ends and makes what runs beside
/// it: its checkpoint task (inside the [`StartedFlow`]), what the HTTP API needs of it, and its
/// topic ACL sync when enabled. A cluster where no broker answers within `patience` (at most
/// `default.api.timeout.ms`, 60 s) is an [`Error::Unreachable`] with the last error; a setting
/// that cannot be used an [`Error::Settings`].
///
/// With `unit`, only that unit of a flow run by workers is started: its partitions, written
/// under the worker's `lease` (`strait_kafka::lease`), and with exactly-once through a
/// transactional producer whose id is the workers' group id and the unit's index, which fences
/// the unit's earlier owner. The work beside the flow (checkpoints, group sync, ACL sync, the
/// HTTP API's map) belongs to unit 0 alone, and reads the map as all units write it, read again
/// every checkpoint interval.
pub(crate) async fn connect_flow(
    config: &StraitConfig,
    flow: &FlowConfig,
    unit: Option<u32>,
    lease: Option<strait_kafka::lease::Lease>,
    patience: std::time::Duration,
) -> Result<Connected, Error> {
    // One client per cluster of the flow, secured as its main user: the source as the
    // flow's consumer (`A.consumer.*`), the target as its producer (`B.producer.*`), each
    // over the cluster's own settings (`docs/security.md`).
    // `strait check` builds the same two (`StraitConfig::refused_clients`).
    let (source_config, target_config) = config
        .flow_clients(flow)
        .map_err(|e| Error::settings(flow, e))?;
    let mut options = strait_core::flow::FlowOptions {
        producer: producer_config(&config.client_props(flow, Side::Target, Role::Producer))
            .map_err(|e| Error::settings(flow, e))?,
        ..fetch_options(&config.client_props(flow, Side::Source, Role::Consumer))
            .map_err(|e| Error::settings(flow, e))?
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
    let source = connect(source_config, patience, flow, Side::Source).await?;
    let target = connect(target_config, patience, flow, Side::Target).await?;
    // The checkpoints and group sync of a unit are fenced as its data is, by an id of their own
    // (the unit's id is its flow's: a second initialisation of it would fence the flow).
    let mut producer = options.producer.clone();
    producer.transactional_id = producer
        .transactional_id
        .map(|id| format!("{id}-checkpoints"));
    let started = Flow::start(flow.clone(), options, source.clone(), target.clone())
        .await
        .map_err(|source| Error::FlowStart {
            flow: flow.name(),
            source,
        })?;
    tracing::info!(
        flow = %started.name(),
        topics = started.topics().len(),
        "flow started"
    );
    // A unit's flow knows only its own partitions' progress: the work beside it follows the
    // map as every unit writes it, as often as positions are captured (every second by
    // default), so that a position is translated through a map as fresh as the position.
    let map = if unit.is_some() && flow.tasks_max > 1 && beside {
        let every = flow
            .checkpoints_capture
            .into_iter()
            .chain(flow.emit_checkpoints)
            .chain(flow.sync_group_offsets)
            .min()
            .unwrap_or(std::time::Duration::from_secs(1));
        MapStore::follow(
            target.clone(),
            flow.source_alias.as_str().to_owned(),
            std::sync::Arc::clone(&started.map_updates().borrow()),
            every,
        )
    } else {
        started.map_updates()
    };
    let live = beside.then(|| ApiFlow {
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
    let started = StartedFlow {
        flow: started,
        config: flow.clone(),
        source,
        target,
        checkpoints,
    };
    Ok((started, live, acls))
}

/// A client of the flow's cluster on `side`, or [`Error::Unreachable`].
async fn connect(
    config: strait_kafka::ClientConfig,
    patience: std::time::Duration,
    flow: &FlowConfig,
    side: Side,
) -> Result<Client, Error> {
    Client::connect_within(config, patience)
        .await
        .map_err(|source| {
            let (side, cluster) = match side {
                Side::Source => ("source", &flow.source),
                Side::Target => ("target", &flow.target),
            };
            Error::Unreachable {
                flow: flow.name(),
                side,
                cluster: cluster.as_str().to_owned(),
                source,
            }
        })
}

/// One flow, with its checkpoints beside it, until `until`.
pub(crate) async fn run_flow(started: StartedFlow, until: Until, stop: Stop) -> FlowOutcome {
    let began = std::time::Instant::now();
    let StartedFlow {
        mut flow,
        mut checkpoints,
        ..
    } = started;
    let mut stopped_early = false;
    let result = match (until, &mut checkpoints) {
        (Until::CaughtUp, checkpoints) => {
            // `stop` is looked at between rounds: the map is written for what was copied.
            let result = match flow.run_until_caught_up_unless(stop).await {
                Ok(caught_up) => {
                    stopped_early = !caught_up;
                    Ok(())
                }
                Err(e) => Err(e),
            };
            if let (Ok(()), false, Some(task)) = (&result, stopped_early, checkpoints) {
                final_checkpoint_passes(task).await;
            }
            // Caught up everywhere it could: a halted partition was not copied, which a
            // one-shot copy must not report as success.
            let halted = flow.halted();
            match (result, halted.first()) {
                (Ok(()), Some((tp, why))) => Err(FlowError::Diverged(format!(
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
        batches_merged = stats.batches_merged,
        batches_dropped_control = stats.control_batches_skipped,
        batches_dropped_aborted = stats.aborted_batches_skipped,
        lost_records = stats.lost_records,
        recovered_records = stats.recovered_records,
        duplicate_records = stats.duplicate_records,
        "flow stopped"
    );
    let result = match result {
        Ok(()) if stopped_early => Err(Error::Interrupted { flow: name.clone() }),
        Ok(()) => Ok(()),
        Err(source) => Err(Error::FlowFailed {
            flow: name.clone(),
            source,
        }),
    };
    FlowOutcome {
        name,
        stats,
        elapsed: began.elapsed(),
        result,
        interrupted: stopped_early,
    }
}

/// After a one-shot copy: one checkpoint pass (and a group-sync pass when enabled), so the
/// checkpoints match the data just mirrored. Each pass tells what it did itself: logged at info
/// (at error if it failed) and shown in `/v1/status` (`crates/strait-core/src/offsets/events.rs`).
/// A failure is not fatal: the data is mirrored, and the next run writes the checkpoints.
async fn final_checkpoint_passes(task: &mut CheckpointTask) {
    if task.emits_checkpoints() {
        let _ = task.emit_once().await;
    }
    if task.syncs_groups() {
        let _ = task.sync_once().await;
    }
}
