//! What each flow of this process is doing now, for `GET /v1/status` and `strait status`: per
//! flow, topic and partition, the source end, the mirrored position, lag in records and
//! seconds, throughput, lost records and the last error; per flow, its consumer groups
//! checkpointed and synced (`docs/http-api.md`).
//!
//! The flows and their checkpoint tasks write here through the handles of
//! [`metrics`](crate::metrics), which count the same events for Prometheus, so `/metrics` and
//! `/v1/status` never disagree. The board is one per process, keyed by flow name (`A->B`), like
//! the metrics registry: whoever serves the HTTP API reads [`snapshot`] without being handed
//! anything by the flows.
//!
//! **Lag in seconds** of a partition is 0 when it is caught up (nothing between the mirrored
//! position and the source end seen by the last fetch). Otherwise it is
//! `now - max(timestamp of the last record mirrored, last time the partition was caught up)`:
//! the oldest record not yet mirrored came after both, so this is at least its age (an upper
//! bound, tight while records keep coming), and it keeps growing while the flow is stalled.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ::metrics::Gauge;
use serde::{Deserialize, Serialize};
use strait_kafka::TopicPartition;

use crate::config::FlowConfig;
use crate::scale::UnitFilter;

/// Throughput is averaged over about this long.
const RATE_WINDOW: Duration = Duration::from_secs(10);

/// A flow whose round has not finished for this long is shown as [`FlowState::Waiting`].
const WAITING_AFTER: Duration = Duration::from_secs(30);

/// Everything this process mirrors: the answer of `GET /v1/status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusReport {
    /// One entry per flow, in name order.
    pub flows: Vec<FlowStatus>,
}

/// Whether a flow is moving.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowState {
    /// Started, no round finished yet.
    Starting,
    /// The last round finished.
    Running,
    /// No round has finished for 30 s: a cluster is slow or does not answer, and the fetch or
    /// the produce is being retried (lag keeps counting from the last fetch).
    Waiting,
    /// The last round failed in a way time can fix (a cluster unreachable); retrying.
    Stalled,
    /// The flow stopped on an error; `strait run` starts it again after a backoff
    /// (`last_error` says why, `restart_in_seconds` when).
    Restarting,
    /// Paused by an operator (`strait flow pause`, `POST /v1/flows/{flow}/pause`): its last
    /// round finished and its map is written; nothing moves until it is resumed.
    Paused,
    /// The flow stopped on an error that needs a person (`last_error` says which).
    Failed,
}

impl FlowState {
    /// The name `/v1/status` gives it: `running`, `paused` ...
    pub fn name(self) -> &'static str {
        match self {
            FlowState::Starting => "starting",
            FlowState::Running => "running",
            FlowState::Waiting => "waiting",
            FlowState::Stalled => "stalled",
            FlowState::Restarting => "restarting",
            FlowState::Paused => "paused",
            FlowState::Failed => "failed",
        }
    }
}

impl std::fmt::Display for FlowState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An error, when it happened, and how long ago (at the time of the snapshot).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorNote {
    /// The error, naming what it is about.
    pub message: String,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// Seconds between then and the snapshot.
    pub seconds_ago: f64,
}

/// A broker of one of the flow's clusters that this process cannot reach now
/// (`strait_kafka::reach`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unreachable {
    /// The cluster's alias.
    pub cluster: String,
    /// `host:port`.
    pub broker: String,
    /// The last attempt's error.
    pub error: String,
    /// When the first attempt that failed was, in milliseconds since the Unix epoch.
    pub since_ms: i64,
    /// Seconds from then to the snapshot.
    pub for_seconds: f64,
    /// Attempts that failed since.
    pub attempts: u64,
}

/// One flow (`A->B`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowStatus {
    /// `A->B`.
    pub flow: String,
    /// The source cluster alias.
    pub source: String,
    /// The target cluster alias.
    pub target: String,
    /// Whether it is moving.
    pub state: FlowState,
    /// Seconds since the flow started.
    pub uptime_seconds: f64,
    /// While [`FlowState::Restarting`]: seconds until the next start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_in_seconds: Option<f64>,
    /// Seconds since its last round finished; `null` before the first.
    pub last_round_seconds_ago: Option<f64>,
    /// Records written to the target since start.
    pub records: u64,
    /// Bytes of record batches written to the target since start.
    pub bytes: u64,
    /// Records written per second, over the last 10 s or so.
    pub records_per_second: f64,
    /// Bytes written per second, over the last 10 s or so.
    pub bytes_per_second: f64,
    /// Records on the source not mirrored yet, summed over the partitions.
    pub lag_records: i64,
    /// The largest lag in seconds of any partition (module docs); `null` while unknown.
    pub lag_seconds: Option<f64>,
    /// Source records deleted before they were mirrored, since start (`docs/design.md` §3.4).
    pub lost_records: u64,
    /// Records written twice since start (after a crash left them unrecorded).
    pub duplicate_records: u64,
    /// The last error of the flow or of any of its partitions.
    pub last_error: Option<ErrorNote>,
    /// Brokers of its clusters this process cannot reach now: why, and since when.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreachable: Vec<Unreachable>,
    /// Consumer groups carried across.
    pub groups: GroupsStatus,
    /// When workers run the flow (`strait.workers.enabled`): this worker's place in their
    /// group. `topics` then lists the partitions of this worker's units only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<WorkerStatus>,
    /// The mirrored topics, in name order.
    pub topics: Vec<TopicStatus>,
}

/// This process as a member of a flow's workers' group (`docs/design.md` §7).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerStatus {
    /// The group id on the target cluster.
    pub group: String,
    /// This worker's member id; empty until it first joined.
    pub member_id: String,
    /// The generation its units were handed out in; -1 while it owns nothing (joining, or
    /// removed from the group).
    pub generation: i32,
    /// Whether this worker leads the generation (it handed out the units).
    pub leader: bool,
    /// The members of the generation; known to the leader only (0 on the others).
    pub members: usize,
    /// The flow's units (`tasks.max`).
    pub units: u32,
    /// The units this worker runs (`A->B/0` ...).
    pub owned: Vec<String>,
    /// When the last rebalance ended, in milliseconds since the Unix epoch.
    pub last_rebalance_ms: Option<i64>,
    /// Why the group's leader handed out no unit in the last rebalance: the workers' configs
    /// disagree (another `tasks.max`, other settings). `None` when they agree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// A flow's consumer groups: checkpoints and group sync.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupsStatus {
    /// Whether checkpoints are written (`emit.checkpoints.enabled`).
    pub checkpoints_enabled: bool,
    /// Whether group offsets are synced (`sync.group.offsets.enabled`).
    pub sync_enabled: bool,
    /// Groups with committed offsets on mirrored partitions at the last checkpoint pass.
    pub checkpointed: usize,
    /// Checkpoints written since start.
    pub checkpoints_written: u64,
    /// Seconds since the last checkpoint pass that succeeded.
    pub last_checkpoint_seconds_ago: Option<f64>,
    /// Groups whose target offsets equal their last checkpoints after the last sync pass.
    pub synced: usize,
    /// Groups left alone (or partly) at the last sync pass: active on the target, ahead
    /// there, or failed.
    pub sync_skipped: usize,
    /// Seconds since the last sync pass that succeeded.
    pub last_sync_seconds_ago: Option<f64>,
    /// The last failed checkpoint or sync pass.
    pub last_error: Option<ErrorNote>,
}

/// One mirrored topic of a flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopicStatus {
    /// The source topic.
    pub topic: String,
    /// Its name on the target.
    pub remote_topic: String,
    /// Records not mirrored yet, summed over its partitions.
    pub lag_records: i64,
    /// The largest lag in seconds of its partitions.
    pub lag_seconds: Option<f64>,
    /// Records written since start.
    pub records: u64,
    /// Bytes written since start.
    pub bytes: u64,
    /// Records written per second.
    pub records_per_second: f64,
    /// Bytes written per second.
    pub bytes_per_second: f64,
    /// Records lost since start.
    pub lost_records: u64,
    /// Records written twice since start.
    pub duplicate_records: u64,
    /// The last error of any of its partitions.
    pub last_error: Option<ErrorNote>,
    /// Its partitions, in order.
    pub partitions: Vec<PartitionStatus>,
}

/// One mirrored partition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartitionStatus {
    /// The partition (the same on both clusters).
    pub partition: i32,
    /// The source's end at the last fetch: its high watermark, or its last stable offset
    /// under `read_committed`.
    pub source_end: i64,
    /// The next source offset to mirror: everything before it is on the target.
    pub position: i64,
    /// `source_end - position`, never below 0.
    pub lag_records: i64,
    /// Lag in seconds (module docs); `null` while unknown (behind, nothing mirrored yet).
    pub lag_seconds: Option<f64>,
    /// Records written since start.
    pub records: u64,
    /// Bytes written since start.
    pub bytes: u64,
    /// Records written per second.
    pub records_per_second: f64,
    /// Bytes written per second.
    pub bytes_per_second: f64,
    /// Records lost since start.
    pub lost_records: u64,
    /// Records written twice since start.
    pub duplicate_records: u64,
    /// The last error about this partition.
    pub last_error: Option<ErrorNote>,
    /// True while the partition is not mirrored (`last_error` says why): the target refuses its
    /// batches for good (too large, invalid, a policy, an ACL), and it is tried again with a
    /// growing wait; or it no longer matches its offset map (a source or remote topic deleted
    /// and created again, or truncated), and it waits for a person.
    #[serde(default)]
    pub blocked: bool,
}

/// The status of every flow of this process, in name order.
pub fn snapshot() -> StatusReport {
    let flows: Vec<Arc<FlowEntry>> = lock(board()).values().cloned().collect();
    let now = Now::new();
    StatusReport {
        flows: flows.iter().map(|f| f.status(&now)).collect(),
    }
}

/// Sets every partition's lag-in-seconds gauge to its value now: the lag grows while nothing
/// happens (a flow waiting on a cluster), so the gauge is brought up to date before a scrape.
pub(crate) fn refresh_lag_gauges() {
    let flows: Vec<Arc<FlowEntry>> = lock(board()).values().cloned().collect();
    let now = Now::new();
    for flow in flows {
        let partitions: Vec<Arc<PartitionEntry>> =
            lock(&flow.data).partitions.values().cloned().collect();
        for p in partitions {
            p.refresh_lag_gauge(&now);
        }
    }
}

/// Milliseconds since the Unix epoch.
pub(crate) fn unix_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The time, both ways, taken once per snapshot or event.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Now {
    pub(crate) instant: Instant,
    pub(crate) unix_ms: i64,
}

impl Now {
    pub(crate) fn new() -> Self {
        Self {
            instant: Instant::now(),
            unix_ms: unix_ms(SystemTime::now()),
        }
    }
}

type Board = Mutex<BTreeMap<String, Arc<FlowEntry>>>;

fn board() -> &'static Board {
    static BOARD: OnceLock<Board> = OnceLock::new();
    BOARD.get_or_init(Board::default)
}

/// A poisoned lock only means a writer panicked mid-update: the numbers are still worth showing.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The board's entry of `flow`, made on first use (by the flow or its checkpoint task,
/// whichever starts first).
pub(crate) fn flow_entry(flow: &FlowConfig) -> Arc<FlowEntry> {
    let mut flows = lock(board());
    Arc::clone(flows.entry(flow.name()).or_insert_with(|| {
        Arc::new(FlowEntry {
            name: flow.name(),
            source: flow.source.as_str().to_owned(),
            target: flow.target.as_str().to_owned(),
            data: Mutex::new(FlowData::new(flow)),
        })
    }))
}

/// What runs a flow (`strait run`'s supervisor) sets its state while the flow itself cannot:
/// waiting for a cluster before it starts ([`FlowState::Starting`] with the error), paused,
/// or restarting after a failure at `restart_at`.
pub fn set_flow_state(
    flow: &FlowConfig,
    state: FlowState,
    error: Option<String>,
    restart_at: Option<Instant>,
) {
    let entry = flow_entry(flow);
    entry.set_state(state, error, &Now::new());
    lock(&entry.data).restart_at = restart_at;
}

/// What runs a flow as a worker sets after each rebalance, and when the worker loses its
/// units: its place in the group, shown in `/v1/status`.
pub fn set_worker(flow: &FlowConfig, worker: WorkerStatus) {
    let entry = flow_entry(flow);
    let mut d = lock(&entry.data);
    let owned: Vec<UnitFilter> = worker
        .owned
        .iter()
        .filter_map(|u| u.parse::<crate::scale::Unit>().ok())
        .map(|u| UnitFilter {
            index: u.index,
            units: worker.units,
        })
        .collect();
    // Partitions of units that went to other workers are no longer shown here.
    d.partitions
        .retain(|tp, _| owned.iter().any(|u| u.contains(&tp.topic, tp.partition)));
    d.worker = Some(worker);
}

/// Takes a flow off the board (a reload removed it from the config).
pub fn forget_flow(name: &str) {
    lock(board()).remove(name);
}

/// One flow on the board.
#[derive(Debug)]
pub(crate) struct FlowEntry {
    name: String,
    source: String,
    target: String,
    data: Mutex<FlowData>,
}

#[derive(Debug)]
struct FlowData {
    started: Instant,
    last_round: Option<Instant>,
    state: FlowState,
    restart_at: Option<Instant>,
    last_error: Option<(String, i64)>,
    partitions: BTreeMap<TopicPartition, Arc<PartitionEntry>>,
    groups: GroupsData,
    worker: Option<WorkerStatus>,
}

impl FlowData {
    fn new(flow: &FlowConfig) -> Self {
        Self {
            started: Instant::now(),
            last_round: None,
            state: FlowState::Starting,
            restart_at: None,
            last_error: None,
            partitions: BTreeMap::new(),
            worker: None,
            groups: GroupsData {
                checkpoints_enabled: flow.emit_checkpoints.is_some(),
                sync_enabled: flow.sync_group_offsets.is_some(),
                ..GroupsData::default()
            },
        }
    }
}

#[derive(Debug, Default)]
struct GroupsData {
    checkpoints_enabled: bool,
    sync_enabled: bool,
    checkpointed: usize,
    checkpoints_written: u64,
    last_checkpoint: Option<Instant>,
    synced: usize,
    sync_skipped: usize,
    last_sync: Option<Instant>,
    last_error: Option<(String, i64)>,
}

impl FlowEntry {
    /// A flow (re)starts: its partitions and counters begin again. With `unit`, one unit of a
    /// flow run by workers: only that unit's partitions begin again, the other units of this
    /// process run on.
    pub(crate) fn restart(&self, unit: Option<UnitFilter>) {
        let mut d = lock(&self.data);
        d.state = FlowState::Starting;
        d.restart_at = None;
        match unit {
            None => {
                d.started = Instant::now();
                d.last_round = None;
                d.last_error = None;
                d.partitions.clear();
            }
            Some(unit) => d
                .partitions
                .retain(|tp, _| !unit.contains(&tp.topic, tp.partition)),
        }
    }

    /// Drops the entries of `unit`'s partitions (the unit left this worker), their lag gauges
    /// at 0; returns which they were.
    pub(crate) fn release(&self, unit: UnitFilter) -> Vec<TopicPartition> {
        let mut d = lock(&self.data);
        let gone: Vec<TopicPartition> = d
            .partitions
            .keys()
            .filter(|tp| unit.contains(&tp.topic, tp.partition))
            .cloned()
            .collect();
        for tp in &gone {
            if let Some(entry) = d.partitions.remove(tp) {
                entry.lag_seconds.set(0.0);
            }
        }
        gone
    }

    /// Drops the entry of a partition the flow no longer mirrors (its source topic deleted,
    /// and the flow told to forget it), its lag gauge at 0.
    pub(crate) fn forget_partition(&self, tp: &TopicPartition) {
        if let Some(entry) = lock(&self.data).partitions.remove(tp) {
            entry.lag_seconds.set(0.0);
        }
    }

    /// The entry of one partition, made on first use; `lag_seconds` is its gauge.
    pub(crate) fn partition(
        &self,
        tp: &TopicPartition,
        remote_topic: &str,
        lag_seconds: Gauge,
    ) -> Arc<PartitionEntry> {
        let mut d = lock(&self.data);
        Arc::clone(d.partitions.entry(tp.clone()).or_insert_with(|| {
            Arc::new(PartitionEntry {
                remote_topic: remote_topic.to_owned(),
                lag_seconds,
                data: Mutex::new(PartitionData::new()),
            })
        }))
    }

    pub(crate) fn set_state(&self, state: FlowState, error: Option<String>, now: &Now) {
        let mut d = lock(&self.data);
        d.state = state;
        d.restart_at = None;
        if state == FlowState::Running {
            d.last_round = Some(now.instant);
        }
        if let Some(e) = error {
            d.last_error = Some((e, now.unix_ms));
        }
    }

    pub(crate) fn checkpoint_pass(&self, groups: usize, written: usize) {
        let mut d = lock(&self.data);
        d.groups.checkpointed = groups;
        d.groups.checkpoints_written += written as u64;
        d.groups.last_checkpoint = Some(Instant::now());
    }

    pub(crate) fn sync_pass(&self, synced: usize, skipped: usize) {
        let mut d = lock(&self.data);
        d.groups.synced = synced;
        d.groups.sync_skipped = skipped;
        d.groups.last_sync = Some(Instant::now());
    }

    pub(crate) fn groups_error(&self, error: String) {
        lock(&self.data).groups.last_error = Some((error, Now::new().unix_ms));
    }

    fn status(&self, now: &Now) -> FlowStatus {
        let d = lock(&self.data);
        let mut topics: BTreeMap<&str, TopicStatus> = BTreeMap::new();
        for (tp, entry) in &d.partitions {
            let p = entry.status(tp.partition, now);
            let t = topics
                .entry(tp.topic.as_str())
                .or_insert_with(|| TopicStatus {
                    topic: tp.topic.clone(),
                    remote_topic: entry.remote_topic.clone(),
                    lag_records: 0,
                    lag_seconds: Some(0.0),
                    records: 0,
                    bytes: 0,
                    records_per_second: 0.0,
                    bytes_per_second: 0.0,
                    lost_records: 0,
                    duplicate_records: 0,
                    last_error: None,
                    partitions: Vec::new(),
                });
            t.lag_records += p.lag_records;
            t.lag_seconds = max_lag(t.lag_seconds, p.lag_seconds);
            t.records += p.records;
            t.bytes += p.bytes;
            t.records_per_second += p.records_per_second;
            t.bytes_per_second += p.bytes_per_second;
            t.lost_records += p.lost_records;
            t.duplicate_records += p.duplicate_records;
            t.last_error = latest(t.last_error.take(), p.last_error.clone());
            t.partitions.push(p);
        }
        let topics: Vec<TopicStatus> = topics.into_values().collect();
        let note = |e: &Option<(String, i64)>| {
            e.as_ref()
                .map(|(message, at)| error_note(message, *at, now))
        };
        let mut last_error = note(&d.last_error);
        for t in &topics {
            last_error = latest(last_error, t.last_error.clone());
        }
        let ago = |t: Option<Instant>| t.map(|t| now.instant.duration_since(t).as_secs_f64());
        let since_round = now
            .instant
            .duration_since(d.last_round.unwrap_or(d.started));
        let state = match d.state {
            FlowState::Starting | FlowState::Running if since_round > WAITING_AFTER => {
                FlowState::Waiting
            }
            s => s,
        };
        FlowStatus {
            flow: self.name.clone(),
            source: self.source.clone(),
            target: self.target.clone(),
            state,
            uptime_seconds: now.instant.duration_since(d.started).as_secs_f64(),
            restart_in_seconds: d
                .restart_at
                .filter(|_| state == FlowState::Restarting)
                .map(|at| at.saturating_duration_since(now.instant).as_secs_f64()),
            last_round_seconds_ago: ago(d.last_round),
            records: topics.iter().map(|t| t.records).sum(),
            bytes: topics.iter().map(|t| t.bytes).sum(),
            // Folded from 0.0: an empty `f64` sum is -0.0, shown as `-0.0 rec/s`.
            records_per_second: topics.iter().fold(0.0, |sum, t| sum + t.records_per_second),
            bytes_per_second: topics.iter().fold(0.0, |sum, t| sum + t.bytes_per_second),
            lag_records: topics.iter().map(|t| t.lag_records).sum(),
            lag_seconds: topics
                .iter()
                .try_fold(0.0, |acc: f64, t| Some(acc.max(t.lag_seconds?))),
            lost_records: topics.iter().map(|t| t.lost_records).sum(),
            duplicate_records: topics.iter().map(|t| t.duplicate_records).sum(),
            last_error,
            unreachable: unreachable(&[&self.source, &self.target], now),
            groups: GroupsStatus {
                checkpoints_enabled: d.groups.checkpoints_enabled,
                sync_enabled: d.groups.sync_enabled,
                checkpointed: d.groups.checkpointed,
                checkpoints_written: d.groups.checkpoints_written,
                last_checkpoint_seconds_ago: ago(d.groups.last_checkpoint),
                synced: d.groups.synced,
                sync_skipped: d.groups.sync_skipped,
                last_sync_seconds_ago: ago(d.groups.last_sync),
                last_error: note(&d.groups.last_error),
            },
            worker: d.worker.clone(),
            topics,
        }
    }
}

/// The brokers of `clusters` (aliases) this process cannot reach now.
pub fn unreachable_in(clusters: &[&str]) -> Vec<Unreachable> {
    unreachable(clusters, &Now::new())
}

fn unreachable(clusters: &[&str], now: &Now) -> Vec<Unreachable> {
    strait_kafka::reach::unreachable()
        .into_iter()
        .filter_map(|u| {
            let cluster = u.cluster.filter(|c| clusters.contains(&c.as_str()))?;
            let since_ms = unix_ms(u.since);
            Some(Unreachable {
                cluster,
                broker: u.broker,
                error: u.error,
                since_ms,
                for_seconds: (now.unix_ms - since_ms).max(0) as f64 / 1000.0,
                attempts: u.attempts,
            })
        })
        .collect()
}

/// The larger lag; unknown wins, since the true value may be anything.
fn max_lag(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(a?.max(b?))
}

fn latest(a: Option<ErrorNote>, b: Option<ErrorNote>) -> Option<ErrorNote> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b.at_ms > a.at_ms { b } else { a }),
        (a, b) => a.or(b),
    }
}

fn error_note(message: &str, at_ms: i64, now: &Now) -> ErrorNote {
    ErrorNote {
        message: message.to_owned(),
        at_ms,
        seconds_ago: (now.unix_ms - at_ms).max(0) as f64 / 1000.0,
    }
}

/// One partition on the board.
#[derive(Debug)]
pub(crate) struct PartitionEntry {
    remote_topic: String,
    /// `strait_lag_seconds` of this partition, kept up to date at each scrape.
    lag_seconds: Gauge,
    data: Mutex<PartitionData>,
}

#[derive(Debug)]
struct PartitionData {
    source_end: i64,
    position: i64,
    records: u64,
    bytes: u64,
    lost: u64,
    duplicates: u64,
    /// Timestamp of the newest record mirrored, ms since the epoch.
    last_mirrored_ms: Option<i64>,
    /// When the partition was last seen caught up, ms since the epoch.
    caught_up_ms: Option<i64>,
    last_error: Option<(String, i64)>,
    blocked: bool,
    rate: Rate,
    /// Where fetches saw the source end, and when: how long a record not mirrored yet has
    /// waited, without its producer's timestamp ([`written_after`]).
    ends: EndsSeen,
}

impl PartitionData {
    fn new() -> Self {
        Self {
            ends: EndsSeen::default(),
            source_end: 0,
            position: 0,
            records: 0,
            bytes: 0,
            lost: 0,
            duplicates: 0,
            last_mirrored_ms: None,
            caught_up_ms: None,
            last_error: None,
            blocked: false,
            rate: Rate::default(),
        }
    }

    fn lag_records(&self) -> i64 {
        (self.source_end - self.position).max(0)
    }

    /// Module docs.
    fn lag_seconds(&self, now_ms: i64) -> Option<f64> {
        if self.lag_records() == 0 {
            return Some(0.0);
        }
        let since = self.last_mirrored_ms.max(self.caught_up_ms)?;
        Some((now_ms - since).max(0) as f64 / 1000.0)
    }
}

impl PartitionEntry {
    /// Records written and acknowledged; `max_timestamp` is the batch's newest record's.
    pub(crate) fn written(&self, records: u64, bytes: u64, max_timestamp: i64) {
        let mut d = lock(&self.data);
        d.records += records;
        d.bytes += bytes;
        if max_timestamp >= 0 {
            d.last_mirrored_ms = Some(d.last_mirrored_ms.unwrap_or(0).max(max_timestamp));
        }
    }

    pub(crate) fn lost(&self, n: u64) {
        lock(&self.data).lost += n;
    }

    pub(crate) fn duplicates(&self, n: u64) {
        lock(&self.data).duplicates += n;
    }

    pub(crate) fn error(&self, message: String, now: &Now) {
        lock(&self.data).last_error = Some((message, now.unix_ms));
    }

    pub(crate) fn blocked(&self, blocked: bool) {
        lock(&self.data).blocked = blocked;
    }

    /// Where the partition stands after a round (`position` all on the target), or after a
    /// fetch (`position: None`: the one of the last round still holds); returns the lag in
    /// records, and sets the lag-in-seconds gauge.
    pub(crate) fn progress(&self, source_end: i64, position: Option<i64>, now: &Now) -> i64 {
        let mut d = lock(&self.data);
        d.source_end = source_end;
        match position {
            Some(p) => d.position = p,
            // A fetch's answer: the end is where it says, now (after a round, the end is the
            // one its fetch saw earlier, and may have moved since).
            None => {
                let position = d.position;
                d.ends.saw(source_end, now.unix_ms, position);
            }
        }
        if d.lag_records() == 0 {
            d.caught_up_ms = Some(now.unix_ms);
        }
        let (records, bytes) = (d.records, d.bytes);
        d.rate.sample(now.instant, records, bytes);
        if let Some(s) = d.lag_seconds(now.unix_ms) {
            self.lag_seconds.set(s);
        }
        d.lag_records()
    }

    /// The partition resumes at `position` (everything before it is on the target).
    pub(crate) fn placed(&self, position: i64) {
        lock(&self.data).position = position;
    }

    /// Sets the lag-in-seconds gauge to its value `now`.
    pub(crate) fn refresh_lag_gauge(&self, now: &Now) {
        if let Some(s) = lock(&self.data).lag_seconds(now.unix_ms) {
            self.lag_seconds.set(s);
        }
    }

    fn status(&self, partition: i32, now: &Now) -> PartitionStatus {
        let d = lock(&self.data);
        let (records_per_second, bytes_per_second) =
            d.rate.per_second(now.instant, d.records, d.bytes);
        PartitionStatus {
            partition,
            source_end: d.source_end,
            position: d.position,
            lag_records: d.lag_records(),
            lag_seconds: d.lag_seconds(now.unix_ms),
            records: d.records,
            bytes: d.bytes,
            records_per_second,
            bytes_per_second,
            lost_records: d.lost,
            duplicate_records: d.duplicates,
            last_error: d.last_error.as_ref().map(|(m, at)| error_note(m, *at, now)),
            blocked: d.blocked,
        }
    }
}

/// How many source ends [`EndsSeen`] keeps per partition.
const ENDS_KEPT: usize = 64;

/// The source ends a partition's fetches saw, each with the last time it was seen, so that
/// for a record not mirrored yet at offset `o` the last time the end was at or below `o` is
/// known: the record was written after it ([`EndsSeen::before`]). Ends at or below the
/// mirrored position are dropped but the last of them; past [`ENDS_KEPT`], every other one in
/// the middle: an offset then finds an earlier time than it would have, so an age from it is
/// longer, never shorter, than the record's wait.
#[derive(Debug, Default)]
struct EndsSeen {
    /// (end, ms since the epoch it was last seen there), ends rising.
    seen: VecDeque<(i64, i64)>,
}

impl EndsSeen {
    /// A fetch's answer at `at_ms` said the end is `end`; everything below `position` is
    /// mirrored.
    fn saw(&mut self, end: i64, at_ms: i64, position: i64) {
        match self.seen.back_mut() {
            Some((last, t)) if *last == end => *t = (*t).max(at_ms),
            // The end went back (the log truncated on a new leader): what was seen above it
            // says nothing of the records written there now.
            Some((last, _)) if *last > end => {
                self.seen.clear();
                self.seen.push_back((end, at_ms));
            }
            _ => self.seen.push_back((end, at_ms)),
        }
        while self.seen.len() >= 2 && self.seen[1].0 <= position {
            self.seen.pop_front();
        }
        if self.seen.len() > ENDS_KEPT {
            let last = self.seen.len() - 1;
            let mut i = 0;
            self.seen.retain(|_| {
                i += 1;
                i == 1 || i - 1 == last || i % 2 == 1
            });
        }
    }

    /// The last time (ms since the epoch) the end was seen at or below `offset`: a record at
    /// `offset` was written on the source after it. `None` when never seen that low (the
    /// record was there before the first fetch).
    fn before(&self, offset: i64) -> Option<i64> {
        self.seen
            .iter()
            .rev()
            .find(|(end, _)| *end <= offset)
            .map(|(_, at)| *at)
    }
}

/// The last time (ms since the epoch) this process's fetches saw the source end of `flow`'s
/// partition `tp` at or below `offset`: the record at `offset` was written on the source after
/// it (within the time a fetch's answer takes to be read), whatever its producer stamped on it.
/// `None` when this process does not mirror the partition now, or its first fetch already
/// found the record there.
pub fn written_after(flow: &FlowConfig, tp: &TopicPartition, offset: i64) -> Option<i64> {
    let entry = lock(board()).get(&flow.name()).cloned()?;
    let partition = lock(&entry.data).partitions.get(tp).cloned()?;
    let before = lock(&partition.data).ends.before(offset);
    before
}

/// Throughput from samples of the running totals, at most one a second, kept for about
/// [`RATE_WINDOW`].
#[derive(Debug, Default)]
struct Rate {
    samples: VecDeque<(Instant, u64, u64)>,
    /// When the totals last moved, and to what.
    moved: Option<(Instant, u64, u64)>,
}

impl Rate {
    fn sample(&mut self, now: Instant, records: u64, bytes: u64) {
        if self
            .moved
            .is_none_or(|(_, r, b)| (r, b) != (records, bytes))
        {
            self.moved = Some((now, records, bytes));
        }
        let due = self
            .samples
            .back()
            .is_none_or(|(t, _, _)| now.duration_since(*t) >= Duration::from_secs(1));
        if due {
            self.samples.push_back((now, records, bytes));
        }
        // Keep one sample at or before the window's start, as the base.
        while self.samples.len() > 1
            && self
                .samples
                .get(1)
                .is_some_and(|(t, _, _)| now.duration_since(*t) >= RATE_WINDOW)
        {
            self.samples.pop_front();
        }
    }

    /// Per second since the oldest sample, with the totals as they are `now`.
    fn per_second(&self, now: Instant, records: u64, bytes: u64) -> (f64, f64) {
        let Some((t, r, b)) = self.samples.front() else {
            return (0.0, 0.0);
        };
        // Nothing written for a whole window (a cluster that stopped answering): nothing
        // per second, not the old rate spread over an ever longer time.
        if self
            .moved
            .is_none_or(|(at, _, _)| now.saturating_duration_since(at) >= RATE_WINDOW)
        {
            return (0.0, 0.0);
        }
        let secs = now.duration_since(*t).as_secs_f64();
        if secs < 0.5 {
            return (0.0, 0.0);
        }
        (
            records.saturating_sub(*r) as f64 / secs,
            bytes.saturating_sub(*b) as f64 / secs,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes every second for a minute, then none: the rate is theirs while they go on, and
    /// nothing once a window passed without one (it was 0.27 rec/s 30 s after the source
    /// broker died, from writes that stopped then).
    #[test]
    fn the_rate_falls_to_nothing_a_window_after_the_last_write() {
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let mut rate = Rate::default();
        let mut records = 0;
        for s in 0..60 {
            records += 100;
            rate.sample(at(s), records, records * 10);
        }
        let (per_second, _) = rate.per_second(at(59), records, records * 10);
        assert!((per_second - 100.0).abs() < 15.0, "{per_second}");
        // Rounds that write nothing still sample: the rate stays while the window holds
        // writes, and is nothing once it holds none.
        for s in 60..65 {
            rate.sample(at(s), records, records * 10);
        }
        let (per_second, _) = rate.per_second(at(64), records, records * 10);
        assert!(per_second > 0.0, "{per_second}");
        for s in 65..100 {
            rate.sample(at(s), records, records * 10);
        }
        for now in [69, 99, 600] {
            let (per_second, bytes) = rate.per_second(at(now), records, records * 10);
            assert_eq!(
                (per_second, bytes),
                (0.0, 0.0),
                "at {now} s, the last write at 59 s"
            );
        }
    }

    #[test]
    fn state_names_are_the_json_names() {
        for state in [
            FlowState::Starting,
            FlowState::Running,
            FlowState::Waiting,
            FlowState::Stalled,
            FlowState::Restarting,
            FlowState::Paused,
            FlowState::Failed,
        ] {
            assert_eq!(serde_json::to_value(state).unwrap(), state.name());
        }
    }

    #[test]
    fn lag_seconds_counts_from_the_later_of_last_record_and_last_caught_up() {
        let mut d = PartitionData::new();
        d.source_end = 10;
        d.position = 10;
        assert_eq!(d.lag_seconds(5_000), Some(0.0));
        d.source_end = 15;
        // Behind, with nothing known: unknown.
        assert_eq!(d.lag_seconds(5_000), None);
        d.last_mirrored_ms = Some(1_000);
        assert_eq!(d.lag_seconds(5_000), Some(4.0));
        d.caught_up_ms = Some(3_500);
        assert_eq!(d.lag_seconds(5_000), Some(1.5));
        // A clock behind the record timestamps never gives a negative lag.
        assert_eq!(d.lag_seconds(0), Some(0.0));
    }

    #[test]
    fn ends_seen_give_the_last_time_the_end_was_below_a_record() {
        let mut ends = EndsSeen::default();
        ends.saw(10, 1_000, 10);
        ends.saw(10, 2_000, 10);
        ends.saw(12, 2_500, 10);
        ends.saw(12, 3_000, 10);
        ends.saw(15, 4_000, 10);
        // Offset 10 was written after 2.0 s (the end was still 10 then), 12 after 3.0 s.
        assert_eq!(ends.before(10), Some(2_000));
        assert_eq!(ends.before(11), Some(2_000));
        assert_eq!(ends.before(12), Some(3_000));
        assert_eq!(ends.before(14), Some(3_000));
        assert_eq!(ends.before(9), None, "there before the first fetch");
        // Mirrored up to 12: ends below 12 go, but the last at or below it stays.
        ends.saw(15, 5_000, 12);
        assert_eq!(ends.before(12), Some(3_000));
        assert_eq!(ends.before(15), Some(5_000));
        assert_eq!(ends.seen.len(), 2, "{:?}", ends.seen);
        // A truncated log starts again.
        ends.saw(13, 6_000, 12);
        assert_eq!(ends.before(14), Some(6_000));
        assert_eq!(ends.before(12), None);
    }

    /// Thinned out, the answer for an offset is never later than it was: ages only grow.
    #[test]
    fn thinned_ends_never_shorten_an_age() {
        let mut full = EndsSeen::default();
        let mut kept = EndsSeen::default();
        for i in 0..500i64 {
            kept.saw(i * 3, i * 100, 0);
            full.seen.push_back((i * 3, i * 100));
        }
        assert!(kept.seen.len() <= ENDS_KEPT + 1, "{}", kept.seen.len());
        assert_eq!(kept.seen.back(), full.seen.back());
        for offset in 0..1_500 {
            let (k, f) = (kept.before(offset), full.before(offset));
            assert!(k.is_some() && k <= f, "offset {offset}: {k:?} after {f:?}");
        }
    }

    #[test]
    fn rate_is_the_growth_over_the_window() {
        let start = Instant::now();
        let mut rate = Rate::default();
        for s in 0..30u64 {
            rate.sample(start + Duration::from_secs(s), s * 100, s * 1000);
        }
        let now = start + Duration::from_secs(29);
        let (r, b) = rate.per_second(now, 2900, 29000);
        assert!((r - 100.0).abs() < 1e-9, "{r}");
        assert!((b - 1000.0).abs() < 1e-9, "{b}");
        // Nothing more written for a long while: no rate.
        let (r, _) = rate.per_second(start + Duration::from_secs(600), 2900, 29000);
        assert_eq!(r, 0.0);
    }

    /// A flow with no partitions yet (starting, or its topics not found) sums no rates: 0.0,
    /// not the -0.0 an empty `f64` sum gives (`strait status` printed `-0.0 rec/s`).
    #[test]
    fn a_flow_without_partitions_has_no_negative_zero_rate() {
        let flow = crate::event_capture::flow("zeroA", "zeroB", "");
        flow_entry(&flow);
        let status = crate::event_capture::status(&flow);
        assert!(status.topics.is_empty(), "{status:?}");
        for rate in [status.records_per_second, status.bytes_per_second] {
            assert!(rate == 0.0 && rate.is_sign_positive(), "{rate:?}");
        }
    }

    #[test]
    fn unknown_lag_wins_the_max() {
        assert_eq!(max_lag(Some(1.0), Some(2.0)), Some(2.0));
        assert_eq!(max_lag(Some(1.0), None), None);
    }
}
