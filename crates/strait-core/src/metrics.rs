//! strait's metrics (`docs/metrics.md`), recorded through the [`metrics`] facade where each
//! event happens; the binary installs the recorder and renders them on `/metrics` in
//! Prometheus text format. Without a recorder (a library user, `--listen off`) they cost
//! nothing.
//!
//! MirrorMaker 2's metrics keep their meaning under Prometheus-style names
//! (`docs/mm2-behaviour.md` §1.12): `record-count` is [`RECORD_COUNT`], `byte-count`
//! [`BYTE_COUNT`], `record-age-ms` [`RECORD_AGE`], `replication-latency-ms`
//! [`REPLICATION_LATENCY`], `checkpoint-latency-ms` [`CHECKPOINT_LATENCY`]. MM2's rates and
//! min/max/avg are what Prometheus computes from counters and histograms (`rate()`,
//! `histogram_quantile()`, `_sum / _count`).
//!
//! Labels: `source` and `target` (the flow's cluster aliases), then `topic` (the **source**
//! topic) and `partition`, or `group`. Series stay bounded by what the config mirrors:
//! per-partition series for counts and lag, per-topic series for batch counters and
//! histograms (buckets times partitions would dominate), per-group series for the position
//! capture and group sync (the checkpoint latency is per flow), per group and partition only
//! for the translation error.
//!
//! A group's series go when the group goes (deleted on the source, or no longer selected):
//! they are kept in a recorder of their own when the process installed one
//! ([`set_group_recorder`]), whose series expire when not updated for a while; each of a live
//! group's series is updated by [`touch_groups`] (a group is live while its flow's last
//! checkpoint pass listed it), so only the gone groups' series expire.
//!
//! A unit's series go when the unit leaves this worker, and a partition's gauges when its unit
//! leaves or its topic is deleted: the Prometheus recorder cannot forget a series, so
//! [`hide_released`] leaves them out of what `/metrics` shows until they come back
//! ([`release_unit`]).
//!
//! Every handle here also feeds the process's [`status`](crate::status) board, so one call
//! records an event for `/metrics` and `/v1/status` at once.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use ::metrics::{Counter, Gauge, Histogram, Key, Label, Level, Metadata, Recorder, Unit};
use strait_kafka::TopicPartition;

use crate::config::FlowConfig;
use crate::scale::UnitFilter;
use crate::status::{self, FlowEntry, FlowState, Now, PartitionEntry};

/// Records written to the target (MM2 `record-count`); per partition.
pub const RECORD_COUNT: &str = "strait_record_count_total";
/// Bytes of record batches written to the target (MM2 `byte-count`, which counts value bytes
/// only); per partition.
pub const BYTE_COUNT: &str = "strait_byte_count_total";
/// Per batch read from the source: now minus the batch's newest record timestamp (MM2
/// `record-age-ms`, per record there); per topic.
pub const RECORD_AGE: &str = "strait_record_age_ms";
/// Per batch acknowledged by the target: now minus the batch's newest record timestamp (MM2
/// `replication-latency-ms`, per record there); per topic.
pub const REPLICATION_LATENCY: &str = "strait_replication_latency_ms";
/// Per checkpoint acknowledged by the target: now minus when its group's offsets were read on
/// the source (MM2 `checkpoint-latency-ms`); per group.
pub const CHECKPOINT_LATENCY: &str = "strait_checkpoint_latency_ms";
/// When a checkpoint pass last found every checkpoint of a group at its position on the source
/// (seconds since the epoch); per group.
pub const POSITION_CAPTURED: &str = "strait_group_position_captured_timestamp_seconds";
/// Source end at the last fetch minus the next offset to mirror; per partition.
pub const LAG_RECORDS: &str = "strait_lag_records";
/// How far behind in time (`status` module docs), 0 when caught up; per partition.
pub const LAG_SECONDS: &str = "strait_lag_seconds";
/// Bytes of batches sent to the target and not yet acknowledged; per flow.
pub const BYTES_IN_FLIGHT: &str = "strait_bytes_in_flight";
/// Batches forwarded unopened; per topic.
pub const BATCHES_FORWARDED: &str = "strait_batches_forwarded_total";
/// Batches decoded and re-encoded (compaction holes, a batch cut by a position); per topic.
pub const BATCHES_REBUILT: &str = "strait_batches_rebuilt_total";
/// Source batches written merged with others of their partition into one (`strait.batch.merge`);
/// per topic.
pub const BATCHES_MERGED: &str = "strait_batches_merged_total";
/// Source batches whose merged batch the target refused as too large, so that they went again
/// in smaller batches; per topic.
pub const BATCHES_SPLIT: &str = "strait_batches_split_total";
/// Batches not mirrored, `reason` `control` (transaction markers) or `aborted`; per topic.
pub const BATCHES_DROPPED: &str = "strait_batches_dropped_total";
/// Segments of the offset map; per partition.
pub const MAP_SEGMENTS: &str = "strait_map_segments";
/// Source records deleted before they were mirrored (`docs/design.md` §3.4); per partition.
pub const LOST_RECORDS: &str = "strait_lost_records_total";
/// Records written twice (a crash left them unrecorded and unmatchable); per partition.
pub const DUPLICATE_RECORDS: &str = "strait_duplicate_records_total";
/// Records found on the target after a restart and matched, so not written again; per
/// partition.
pub const RECOVERED_RECORDS: &str = "strait_recovered_records_total";
/// 1 while a partition is not mirrored: the target refuses its batches for good (too large,
/// invalid, a policy, an ACL; tried again with backoff), or it no longer matches its offset map
/// (needs a person); else 0. Per partition; its last error says which.
pub const PARTITION_BLOCKED: &str = "strait_partition_blocked";
/// How far a group's translated offset could be off, in records: 0 when exact; per group and
/// partition.
pub const TRANSLATION_ERROR: &str = "strait_translation_error_records";
/// Offsets committed into target groups by group sync; per group.
pub const GROUP_SYNC_WRITTEN: &str = "strait_group_sync_offsets_written_total";
/// Groups or partitions group sync left alone, `reason` `group_active`, `target_ahead` or
/// `failed`; per group.
pub const GROUP_SYNC_SKIPPED: &str = "strait_group_sync_skips_total";
/// 1 while the flow is stalled (a cluster unreachable, retrying), else 0; per flow.
pub const FLOW_STALLED: &str = "strait_flow_stalled";
/// Times the flow stalled; per flow.
pub const FLOW_STALLS: &str = "strait_flow_stalls_total";
/// Remote topics deleted on the target because their source topic was deleted
/// (`strait.sync.topic.deletions.enabled`); per flow.
pub const REMOTE_TOPICS_DELETED: &str = "strait_remote_topics_deleted_total";
/// When the flow's last round finished, in seconds since the Unix epoch; per flow. A flow
/// waiting on a cluster stops moving it (alert on `time() - strait_flow_last_round_timestamp_seconds`).
pub const FLOW_LAST_ROUND: &str = "strait_flow_last_round_timestamp_seconds";

/// 1 while the flow's workers disagree on `tasks.max` or its settings, so that its group hands
/// out no unit and nothing of the flow is mirrored; else 0; per flow.
pub const WORKERS_DISAGREE: &str = "strait_workers_disagree";

/// Bucket bounds, in milliseconds, of the `_ms` histograms: from a millisecond to an hour.
pub const LATENCY_BUCKETS_MS: &[f64] = &[
    1.0,
    5.0,
    10.0,
    25.0,
    50.0,
    100.0,
    250.0,
    500.0,
    1_000.0,
    2_500.0,
    5_000.0,
    10_000.0,
    30_000.0,
    60_000.0,
    300_000.0,
    900_000.0,
    3_600_000.0,
];

/// How a metric is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetricKind {
    Counter,
    Gauge,
    Histogram,
}

impl MetricKind {
    /// Its name in `docs/metrics.md` and in Prometheus's `# TYPE` line.
    pub fn as_str(self) -> &'static str {
        match self {
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
            MetricKind::Histogram => "histogram",
        }
    }
}

/// One metric of strait: the one place its name, kind, unit, labels and help are written.
/// [`describe`] registers every one with the recorder, and a test holds `docs/metrics.md` to
/// this table (every row there is one here, with the same kind and labels, and the other way
/// round), as the key catalogue holds `docs/configuration.md`.
#[derive(Debug, Clone, Copy)]
pub struct MetricDef {
    pub name: &'static str,
    pub kind: MetricKind,
    pub unit: Unit,
    /// Its labels, in order.
    pub labels: &'static [&'static str],
    /// The `# HELP` text.
    pub help: &'static str,
}

const FLOW: &[&str] = &["source", "target"];
const TOPIC: &[&str] = &["source", "target", "topic"];
const TOPIC_REASON: &[&str] = &["source", "target", "topic", "reason"];
const PARTITION: &[&str] = &["source", "target", "topic", "partition"];
const GROUP: &[&str] = &["source", "target", "group"];
const GROUP_REASON: &[&str] = &["source", "target", "group", "reason"];
const GROUP_PARTITION: &[&str] = &["source", "target", "group", "topic", "partition"];

/// Every metric strait emits: those of this crate, and the Kafka runtime's
/// (`strait_kafka::error`).
pub const METRICS: &[MetricDef] = &[
    MetricDef {
        name: RECORD_COUNT,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        labels: PARTITION,
        help: "Records written to the target (MM2 record-count).",
    },
    MetricDef {
        name: BYTE_COUNT,
        kind: MetricKind::Counter,
        unit: Unit::Bytes,
        labels: PARTITION,
        help: "Bytes of record batches written to the target, as on the wire (MM2 byte-count counts value bytes).",
    },
    MetricDef {
        name: RECORD_AGE,
        kind: MetricKind::Histogram,
        unit: Unit::Milliseconds,
        labels: TOPIC,
        help: "Per batch read from the source: now minus its newest record's timestamp (MM2 record-age-ms).",
    },
    MetricDef {
        name: REPLICATION_LATENCY,
        kind: MetricKind::Histogram,
        unit: Unit::Milliseconds,
        labels: TOPIC,
        help: "Per batch acknowledged by the target: now minus its newest record's timestamp (MM2 replication-latency-ms).",
    },
    MetricDef {
        name: CHECKPOINT_LATENCY,
        kind: MetricKind::Histogram,
        unit: Unit::Milliseconds,
        labels: FLOW,
        help: "Per checkpoint acknowledged by the target: now minus when its group's offsets were read on the source (MM2 checkpoint-latency-ms).",
    },
    MetricDef {
        name: POSITION_CAPTURED,
        kind: MetricKind::Gauge,
        unit: Unit::Seconds,
        labels: GROUP,
        help: "When the group's position on the source was last found carried by its checkpoints (seconds since the epoch): a failover made from the checkpoints re-reads what it consumed since.",
    },
    MetricDef {
        name: LAG_RECORDS,
        kind: MetricKind::Gauge,
        unit: Unit::Count,
        labels: PARTITION,
        help: "Source end at the last fetch minus the next source offset to mirror.",
    },
    MetricDef {
        name: LAG_SECONDS,
        kind: MetricKind::Gauge,
        unit: Unit::Seconds,
        labels: PARTITION,
        help: "0 when caught up, else now minus the later of the last mirrored record's timestamp and the last time the partition was caught up.",
    },
    MetricDef {
        name: BYTES_IN_FLIGHT,
        kind: MetricKind::Gauge,
        unit: Unit::Bytes,
        labels: FLOW,
        help: "Bytes of batches sent to the target and not yet acknowledged.",
    },
    MetricDef {
        name: BATCHES_FORWARDED,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        labels: TOPIC,
        help: "Batches forwarded unopened.",
    },
    MetricDef {
        name: BATCHES_REBUILT,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        labels: TOPIC,
        help: "Batches decoded and re-encoded (compaction holes, a batch cut by a position).",
    },
    MetricDef {
        name: BATCHES_MERGED,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        labels: TOPIC,
        help: "Source batches written merged with others of their partition into one target \
               batch (`strait.batch.merge`); each is counted as forwarded or rebuilt too.",
    },
    MetricDef {
        name: BATCHES_SPLIT,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        labels: TOPIC,
        help: "Source batches whose merged batch the target refused as too large (its topic's \
               max.message.bytes below the merge), so that they went again at once in smaller \
               batches.",
    },
    MetricDef {
        name: BATCHES_DROPPED,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        labels: TOPIC_REASON,
        help: "Batches not mirrored: transaction markers (reason=control) and aborted transactions (reason=aborted).",
    },
    MetricDef {
        name: MAP_SEGMENTS,
        kind: MetricKind::Gauge,
        unit: Unit::Count,
        labels: PARTITION,
        help: "Segments of the partition's offset map.",
    },
    MetricDef {
        name: LOST_RECORDS,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        labels: PARTITION,
        help: "Source records deleted before they were mirrored; each range is in the offset map and the log.",
    },
    MetricDef {
        name: DUPLICATE_RECORDS,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        labels: PARTITION,
        help: "Records written to the target twice (a crash left them unrecorded and unmatchable).",
    },
    MetricDef {
        name: RECOVERED_RECORDS,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        labels: PARTITION,
        help: "Records found on the target after a restart and matched, so not written again.",
    },
    MetricDef {
        name: TRANSLATION_ERROR,
        kind: MetricKind::Gauge,
        unit: Unit::Count,
        labels: GROUP_PARTITION,
        help: "How many records a group's translated offset could be off: 0 when exact, else unreplicated, skipped or lost records.",
    },
    MetricDef {
        name: GROUP_SYNC_WRITTEN,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        labels: GROUP,
        help: "Offsets committed into target groups by group sync.",
    },
    MetricDef {
        name: GROUP_SYNC_SKIPPED,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        labels: GROUP_REASON,
        help: "Groups or partitions group sync left alone, by reason (group_active, target_ahead, failed).",
    },
    MetricDef {
        name: FLOW_STALLED,
        kind: MetricKind::Gauge,
        unit: Unit::Count,
        labels: FLOW,
        help: "1 while the flow is stalled (a cluster unreachable, retrying), else 0.",
    },
    MetricDef {
        name: FLOW_STALLS,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        labels: FLOW,
        help: "Times the flow stalled.",
    },
    MetricDef {
        name: REMOTE_TOPICS_DELETED,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        labels: FLOW,
        help: "Remote topics deleted on the target because their source topic was deleted (strait.sync.topic.deletions.enabled).",
    },
    MetricDef {
        name: PARTITION_BLOCKED,
        kind: MetricKind::Gauge,
        unit: Unit::Count,
        labels: PARTITION,
        help: "1 while the partition is not mirrored: the target refuses its batches for good (too large, invalid, a policy, an ACL; retried with backoff) or it no longer matches its offset map (a source or remote topic deleted and created again, truncated; needs a person). Its last error says which; the other partitions go on.",
    },
    MetricDef {
        name: FLOW_LAST_ROUND,
        kind: MetricKind::Gauge,
        unit: Unit::Seconds,
        labels: FLOW,
        help: "When the flow's last round finished, in seconds since the Unix epoch.",
    },
    MetricDef {
        name: WORKERS_DISAGREE,
        kind: MetricKind::Gauge,
        unit: Unit::Count,
        labels: FLOW,
        help: "1 while the flow's workers disagree on tasks.max or its settings, so that no unit is handed out; else 0.",
    },
    MetricDef {
        name: strait_kafka::error::REQUEST_ERRORS,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        labels: &["broker", "api", "error"],
        help: "Requests that failed: by broker, Kafka API and kind when no readable answer came (io, timeout, closed, ...), by the error code's name (broker and api empty) when the answer was an error.",
    },
    MetricDef {
        name: strait_kafka::error::RECONNECTS,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        labels: &["broker"],
        help: "Connections to a broker made again after one was lost or refused.",
    },
];

/// Registers the help text and unit of every metric of [`METRICS`] with the installed
/// recorder. Call once, after installing it.
pub fn describe() {
    for m in METRICS {
        match m.kind {
            MetricKind::Counter => ::metrics::describe_counter!(m.name, m.unit, m.help),
            MetricKind::Gauge => ::metrics::describe_gauge!(m.name, m.unit, m.help),
            MetricKind::Histogram => ::metrics::describe_histogram!(m.name, m.unit, m.help),
        }
    }
}

/// Whether the workers of `flow` disagree ([`WORKERS_DISAGREE`]).
pub fn workers_disagree(flow: &FlowConfig, disagree: bool) {
    ::metrics::gauge!(
        WORKERS_DISAGREE,
        "source" => flow.source.as_str().to_owned(),
        "target" => flow.target.as_str().to_owned()
    )
    .set(f64::from(u8::from(disagree)));
}

/// Brings the gauges that move with time alone up to date (lag in seconds); call before
/// rendering the metrics.
pub fn refresh() {
    status::refresh_lag_gauges();
}

/// A unit's gauges: its series leave `/metrics` when it leaves this worker.
const UNIT_GAUGES: [&str; 3] = [FLOW_STALLED, BYTES_IN_FLIGHT, FLOW_LAST_ROUND];

/// A partition's gauges: its series leave `/metrics` when it is no longer mirrored here.
const PARTITION_GAUGES: [&str; 4] = [LAG_SECONDS, LAG_RECORDS, MAP_SEGMENTS, PARTITION_BLOCKED];

/// The units (source, target, unit) and partitions (source, target, topic, partition) this
/// process no longer runs, whose gauges [`hide_released`] leaves out.
#[derive(Debug, Default)]
struct Released {
    units: HashSet<[String; 3]>,
    partitions: HashSet<[String; 4]>,
}

fn released() -> MutexGuard<'static, Released> {
    static RELEASED: std::sync::LazyLock<Mutex<Released>> =
        std::sync::LazyLock::new(Mutex::default);
    RELEASED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `text` (Prometheus text format) without the gauges of units and partitions this process
/// no longer runs ([`release_unit`], a deleted topic's partitions): what `/metrics` shows, so
/// that a gone unit's last values neither linger nor count twice. Counters stay, as counters
/// do.
pub fn hide_released(text: &str) -> String {
    let released = released();
    if released.units.is_empty() && released.partitions.is_empty() {
        return text.to_owned();
    }
    let hidden = |line: &str| {
        let Some((name, labels)) = sample_labels(line) else {
            return false;
        };
        let get = |key: &str| {
            labels
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        if UNIT_GAUGES.contains(&name) {
            released
                .units
                .contains(&[get("source"), get("target"), get("unit")])
        } else if PARTITION_GAUGES.contains(&name) {
            released.partitions.contains(&[
                get("source"),
                get("target"),
                get("topic"),
                get("partition"),
            ])
        } else {
            false
        }
    };
    let mut out = String::with_capacity(text.len());
    for line in text.lines().filter(|l| !hidden(l)) {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// A sample line's metric name and labels (values unescaped); `None` for a comment, or a
/// sample without labels.
fn sample_labels(line: &str) -> Option<(&str, Vec<(&str, String)>)> {
    let (name, rest) = line.split_once('{')?;
    if name.starts_with('#') {
        return None;
    }
    let mut labels = Vec::new();
    let mut rest = rest;
    loop {
        let (key, after) = rest.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (_, c) => value.push(c),
            }
        };
        labels.push((key.trim_start_matches(','), value));
        rest = &after[end + 1..];
        if rest.starts_with('}') {
            return Some((name, labels));
        }
    }
}

/// A unit of `flow` left this worker (handed to another, or fenced): the gauges of its
/// partitions and its flow-level gauges go to 0 here and leave `/metrics`
/// ([`hide_released`]), and `/v1/status` no longer lists its partitions, so that a sum over
/// the workers counts each partition once, where it runs now. Counters stay, as counters do:
/// each worker's count is what it did.
pub fn release_unit(flow: &FlowConfig, unit: UnitFilter) {
    let (source, target) = (flow.source.as_str(), flow.target.as_str());
    released()
        .units
        .insert([source.to_owned(), target.to_owned(), unit.index.to_string()]);
    for tp in status::flow_entry(flow).release(unit) {
        released().partitions.insert([
            source.to_owned(),
            target.to_owned(),
            tp.topic.clone(),
            tp.partition.to_string(),
        ]);
        let partition = [
            ("source", source.to_owned()),
            ("target", target.to_owned()),
            ("topic", tp.topic.clone()),
            ("partition", tp.partition.to_string()),
        ];
        for gauge in [LAG_SECONDS, LAG_RECORDS, MAP_SEGMENTS, PARTITION_BLOCKED] {
            ::metrics::gauge!(gauge, &partition).set(0.0);
        }
    }
    let labels = [
        ("source", source.to_owned()),
        ("target", target.to_owned()),
        ("unit", unit.index.to_string()),
    ];
    ::metrics::gauge!(FLOW_STALLED, &labels).set(0.0);
    ::metrics::gauge!(BYTES_IN_FLIGHT, &labels).set(0.0);
}

/// Milliseconds from `timestamp` (ms since the epoch) to now; `None` for a batch without one.
fn age_ms(timestamp: i64, now: &Now) -> Option<f64> {
    (timestamp >= 0).then(|| (now.unix_ms - timestamp).max(0) as f64)
}

/// One flow's handles.
#[derive(Debug, Clone)]
pub(crate) struct FlowMetrics {
    source: String,
    target: String,
    bytes_in_flight: Gauge,
    stalled: Gauge,
    stalls: Counter,
    remote_topics_deleted: Counter,
    last_round: Gauge,
    entry: Arc<FlowEntry>,
    partitions: Arc<Mutex<BTreeMap<TopicPartition, PartitionMetrics>>>,
}

impl FlowMetrics {
    /// The handles of `flow` (with `unit`, of one unit of it), which (re)starts now.
    pub(crate) fn start(flow: &FlowConfig, unit: Option<UnitFilter>) -> Self {
        let (source, target) = (
            flow.source.as_str().to_owned(),
            flow.target.as_str().to_owned(),
        );
        // A unit of a flow run by workers has flow-level series of its own: summed over the
        // workers, each unit counts once wherever it runs (`docs/metrics.md`).
        let mut labels = vec![("source", source.clone()), ("target", target.clone())];
        if let Some(unit) = unit {
            labels.push(("unit", unit.index.to_string()));
            released()
                .units
                .remove(&[source.clone(), target.clone(), unit.index.to_string()]);
        }
        let entry = status::flow_entry(flow);
        entry.restart(unit);
        let stalled = ::metrics::gauge!(FLOW_STALLED, &labels);
        stalled.set(0.0);
        Self {
            bytes_in_flight: ::metrics::gauge!(BYTES_IN_FLIGHT, &labels),
            stalls: ::metrics::counter!(FLOW_STALLS, &labels),
            remote_topics_deleted: ::metrics::counter!(REMOTE_TOPICS_DELETED, &labels),
            last_round: ::metrics::gauge!(FLOW_LAST_ROUND, &labels),
            stalled,
            source,
            target,
            entry,
            partitions: Arc::default(),
        }
    }

    /// The handles of one partition, made on first use.
    pub(crate) fn partition(
        &self,
        tp: &TopicPartition,
        remote: &TopicPartition,
    ) -> PartitionMetrics {
        let mut partitions = self
            .partitions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        partitions
            .entry(tp.clone())
            .or_insert_with(|| {
                PartitionMetrics::new(&self.source, &self.target, tp, &remote.topic, &self.entry)
            })
            .clone()
    }

    /// Forgets a partition the flow no longer mirrors (its source topic deleted): its gauges
    /// go to 0 and `/v1/status` no longer lists it. Its counters stay, as counters do.
    pub(crate) fn forget_partition(&self, tp: &TopicPartition) {
        let gone = self
            .partitions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(tp);
        if let Some(p) = gone {
            p.0.lag_records.set(0.0);
            p.0.map_segments.set(0.0);
            p.0.blocked.set(0.0);
        }
        released().partitions.insert([
            self.source.clone(),
            self.target.clone(),
            tp.topic.clone(),
            tp.partition.to_string(),
        ]);
        self.entry.forget_partition(tp);
    }

    /// Batches of `bytes` are on their way to the target (0: all acknowledged).
    pub(crate) fn in_flight(&self, bytes: u64) {
        self.bytes_in_flight.set(bytes as f64);
    }

    /// A remote topic was deleted because its source topic was.
    pub(crate) fn remote_topic_deleted(&self) {
        self.remote_topics_deleted.increment(1);
    }

    /// A round finished.
    pub(crate) fn running(&self) {
        let now = Now::new();
        self.stalled.set(0.0);
        self.last_round.set(now.unix_ms as f64 / 1000.0);
        self.entry.set_state(FlowState::Running, None, &now);
    }

    /// A round failed in a way time can fix; the flow retries. Lag in seconds keeps growing.
    pub(crate) fn stalled(&self, error: &dyn std::fmt::Display) {
        let now = Now::new();
        self.stalled.set(1.0);
        self.stalls.increment(1);
        self.entry
            .set_state(FlowState::Stalled, Some(error.to_string()), &now);
    }

    /// The flow stopped on an error that needs a person.
    pub(crate) fn failed(&self, error: &dyn std::fmt::Display) {
        self.entry
            .set_state(FlowState::Failed, Some(error.to_string()), &Now::new());
    }
}

/// One partition's handles (cheap to clone: they share the series).
#[derive(Debug, Clone)]
pub(crate) struct PartitionMetrics(Arc<PartitionHandles>);

#[derive(Debug)]
struct PartitionHandles {
    records: Counter,
    bytes: Counter,
    record_age: Histogram,
    replication_latency: Histogram,
    lag_records: Gauge,
    map_segments: Gauge,
    forwarded: Counter,
    rebuilt: Counter,
    merged: Counter,
    split: Counter,
    dropped_control: Counter,
    dropped_aborted: Counter,
    lost: Counter,
    duplicates: Counter,
    recovered: Counter,
    blocked: Gauge,
    entry: Arc<PartitionEntry>,
}

impl PartitionMetrics {
    fn new(
        source: &str,
        target: &str,
        tp: &TopicPartition,
        remote_topic: &str,
        flow: &FlowEntry,
    ) -> Self {
        let topic = [
            ("source", source.to_owned()),
            ("target", target.to_owned()),
            ("topic", tp.topic.clone()),
        ];
        let partition = [
            ("source", source.to_owned()),
            ("target", target.to_owned()),
            ("topic", tp.topic.clone()),
            ("partition", tp.partition.to_string()),
        ];
        let dropped = |reason: &'static str| {
            let mut labels = topic.to_vec();
            labels.push(("reason", reason.to_owned()));
            ::metrics::counter!(BATCHES_DROPPED, &labels)
        };
        released().partitions.remove(&[
            source.to_owned(),
            target.to_owned(),
            tp.topic.clone(),
            tp.partition.to_string(),
        ]);
        let lag_seconds = ::metrics::gauge!(LAG_SECONDS, &partition);
        let entry = flow.partition(tp, remote_topic, lag_seconds);
        let handles = PartitionHandles {
            records: ::metrics::counter!(RECORD_COUNT, &partition),
            bytes: ::metrics::counter!(BYTE_COUNT, &partition),
            record_age: ::metrics::histogram!(RECORD_AGE, &topic),
            replication_latency: ::metrics::histogram!(REPLICATION_LATENCY, &topic),
            lag_records: ::metrics::gauge!(LAG_RECORDS, &partition),
            map_segments: ::metrics::gauge!(MAP_SEGMENTS, &partition),
            forwarded: ::metrics::counter!(BATCHES_FORWARDED, &topic),
            rebuilt: ::metrics::counter!(BATCHES_REBUILT, &topic),
            merged: ::metrics::counter!(BATCHES_MERGED, &topic),
            split: ::metrics::counter!(BATCHES_SPLIT, &topic),
            dropped_control: dropped("control"),
            dropped_aborted: dropped("aborted"),
            lost: ::metrics::counter!(LOST_RECORDS, &partition),
            duplicates: ::metrics::counter!(DUPLICATE_RECORDS, &partition),
            recovered: ::metrics::counter!(RECOVERED_RECORDS, &partition),
            blocked: ::metrics::gauge!(PARTITION_BLOCKED, &partition),
            entry,
        };
        // Present from the start, so "none lost" reads as 0, not as a missing series.
        for c in [
            &handles.records,
            &handles.bytes,
            &handles.lost,
            &handles.duplicates,
        ] {
            c.increment(0);
        }
        Self(Arc::new(handles))
    }

    /// A batch to mirror was read from the source; `max_timestamp` is its newest record's.
    pub(crate) fn read(&self, max_timestamp: i64) {
        if let Some(ms) = age_ms(max_timestamp, &Now::new()) {
            self.0.record_age.record(ms);
        }
    }

    /// A batch is forwarded unopened.
    pub(crate) fn forwarded(&self) {
        self.0.forwarded.increment(1);
    }

    /// A batch is rebuilt.
    pub(crate) fn rebuilt(&self) {
        self.0.rebuilt.increment(1);
    }

    /// A batch went merged with others.
    pub(crate) fn merged(&self) {
        self.0.merged.increment(1);
    }

    /// A batch went again split from a merged batch refused as too large.
    pub(crate) fn split(&self) {
        self.0.split.increment(1);
    }

    /// A control batch (`aborted: false`) or a batch of an aborted transaction is dropped.
    pub(crate) fn dropped(&self, aborted: bool) {
        if aborted {
            self.0.dropped_aborted.increment(1);
        } else {
            self.0.dropped_control.increment(1);
        }
    }

    /// The target acknowledged a batch of `records` records and `bytes` bytes whose newest
    /// record has `max_timestamp`.
    pub(crate) fn written(&self, records: u64, bytes: u64, max_timestamp: i64) {
        self.0.records.increment(records);
        self.0.bytes.increment(bytes);
        if let Some(ms) = age_ms(max_timestamp, &Now::new()) {
            self.0.replication_latency.record(ms);
        }
        self.0.entry.written(records, bytes, max_timestamp);
    }

    /// Source offsets `from..to` were deleted before they were mirrored: counted, and the
    /// partition's last error says so.
    pub(crate) fn lost(&self, from: i64, to: i64) {
        let n = (to - from).max(0) as u64;
        self.0.lost.increment(n);
        self.0.entry.lost(n);
        self.error(format_args!(
            "{n} records (offsets {from}..{to}) were deleted on the source before they were \
             mirrored: recorded as lost"
        ));
    }

    /// Records written twice.
    pub(crate) fn duplicates(&self, n: u64) {
        self.0.duplicates.increment(n);
        self.0.entry.duplicates(n);
    }

    /// Records on the target matched after a restart.
    pub(crate) fn recovered(&self, n: u64) {
        self.0.recovered.increment(n);
    }

    /// Something went wrong with this partition (it is retried).
    pub(crate) fn error(&self, message: impl std::fmt::Display) {
        self.0.entry.error(message.to_string(), &Now::new());
    }

    /// The partition is not mirrored (`Some(why)`, also its last error), or is again
    /// (`None`).
    pub(crate) fn blocked(&self, why: Option<&str>) {
        self.0.blocked.set(if why.is_some() { 1.0 } else { 0.0 });
        if let Some(why) = why {
            self.error(why);
        }
        self.0.entry.blocked(why.is_some());
    }

    /// The partition resumes at `position`, where its map ends.
    pub(crate) fn placed(&self, position: i64) {
        self.0.entry.placed(position);
    }

    /// A fetch saw the source end at `source_end`; what is mirrored is unchanged until the
    /// round's writes are acknowledged.
    pub(crate) fn fetched(&self, source_end: i64) {
        let lag = self.0.entry.progress(source_end, None, &Now::new());
        self.0.lag_records.set(lag as f64);
    }

    /// Where the partition stands after a round: the source end seen by the fetch, the next
    /// offset to mirror (everything before it on the target), and its map's segment count.
    pub(crate) fn progress(&self, source_end: i64, position: i64, segments: usize) {
        let lag = self
            .0
            .entry
            .progress(source_end, Some(position), &Now::new());
        self.0.lag_records.set(lag as f64);
        self.0.map_segments.set(segments as f64);
    }
}

/// A consumer group's series: (source, target, group).
type GroupId = (String, String, String);

/// Each live group's series.
type LiveGroups = HashMap<GroupId, HashSet<(MetricKind, Key)>>;

/// The series of every live group, to touch ([`touch_groups`]).
fn live_groups() -> MutexGuard<'static, LiveGroups> {
    static LIVE: std::sync::LazyLock<Mutex<LiveGroups>> = std::sync::LazyLock::new(Mutex::default);
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The recorder of the groups' series ([`set_group_recorder`]).
static GROUP_RECORDER: OnceLock<&'static (dyn Recorder + Send + Sync)> = OnceLock::new();

/// Records the groups' series (`group` label) with `recorder`, which should forget a series
/// not updated for a while (the binary's has an idle timeout): see the module docs. Without
/// one they go to the installed recorder and stay. False when one was set already.
pub fn set_group_recorder(recorder: &'static (dyn Recorder + Send + Sync)) -> bool {
    GROUP_RECORDER.set(recorder).is_ok()
}

/// Updates every series of every live group without changing it (a gauge moved by 0, a
/// counter by 0), so that only the series of groups gone expire. Call more often than the
/// group recorder's idle timeout.
pub fn touch_groups() {
    let Some(recorder) = group_recorder() else {
        return;
    };
    let series: Vec<(MetricKind, Key)> = live_groups().values().flatten().cloned().collect();
    for (kind, key) in series {
        match kind {
            MetricKind::Gauge => recorder.register_gauge(&key, &metadata()).increment(0.0),
            MetricKind::Counter => recorder.register_counter(&key, &metadata()).increment(0),
            // No group series is a histogram; recording nothing would not touch one.
            MetricKind::Histogram => {}
        }
    }
}

fn metadata() -> Metadata<'static> {
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()))
}

#[cfg(test)]
thread_local! {
    /// A test's group recorder, in place of the process's ([`GROUP_RECORDER`]).
    static TEST_GROUP_RECORDER: std::cell::Cell<Option<&'static (dyn Recorder + Send + Sync)>> =
        const { std::cell::Cell::new(None) };
}

/// The group recorder, if one was set.
fn group_recorder() -> Option<&'static (dyn Recorder + Send + Sync)> {
    #[cfg(test)]
    if let Some(recorder) = TEST_GROUP_RECORDER.with(std::cell::Cell::get) {
        return Some(recorder);
    }
    GROUP_RECORDER.get().copied()
}

/// Runs `f` with the group recorder, else the installed one.
fn with_group_recorder<T>(f: impl FnOnce(&dyn Recorder) -> T) -> T {
    match group_recorder() {
        Some(recorder) => f(recorder),
        None => ::metrics::with_recorder(f),
    }
}

/// A flow's checkpoint and group-sync handles.
#[derive(Debug, Clone)]
pub(crate) struct GroupMetrics {
    source: String,
    target: String,
    entry: Arc<FlowEntry>,
}

impl GroupMetrics {
    pub(crate) fn new(flow: &FlowConfig) -> Self {
        Self {
            source: flow.source.as_str().to_owned(),
            target: flow.target.as_str().to_owned(),
            entry: status::flow_entry(flow),
        }
    }

    fn group_labels(&self, group: &str) -> [(&'static str, String); 3] {
        [
            ("source", self.source.clone()),
            ("target", self.target.clone()),
            ("group", group.to_owned()),
        ]
    }

    /// `group`'s series `name` with `labels`, remembered as live until a checkpoint pass no
    /// longer lists the group ([`GroupMetrics::groups_now`]).
    fn series(
        &self,
        group: &str,
        kind: MetricKind,
        name: &'static str,
        labels: &[(&'static str, String)],
    ) -> Key {
        let labels: Vec<Label> = labels
            .iter()
            .map(|(k, v)| Label::new(*k, v.clone()))
            .collect();
        let key = Key::from_parts(name, labels);
        let id = (self.source.clone(), self.target.clone(), group.to_owned());
        live_groups()
            .entry(id)
            .or_default()
            .insert((kind, key.clone()));
        key
    }

    fn group_gauge(
        &self,
        group: &str,
        name: &'static str,
        labels: &[(&'static str, String)],
    ) -> Gauge {
        let key = self.series(group, MetricKind::Gauge, name, labels);
        with_group_recorder(|r| r.register_gauge(&key, &metadata()))
    }

    fn group_counter(
        &self,
        group: &str,
        name: &'static str,
        labels: &[(&'static str, String)],
    ) -> Counter {
        let key = self.series(group, MetricKind::Counter, name, labels);
        with_group_recorder(|r| r.register_counter(&key, &metadata()))
    }

    /// The flow's groups now are `groups` (a checkpoint pass listed them, or failed on them):
    /// the series of its other groups are no longer touched, and expire.
    pub(crate) fn groups_now<'a>(&self, groups: impl IntoIterator<Item = &'a str>) {
        let now: HashSet<&str> = groups.into_iter().collect();
        live_groups().retain(|(source, target, group), _| {
            (source, target) != (&self.source, &self.target) || now.contains(group.as_str())
        });
    }

    /// `group`'s translated offset on source `topic`-`partition` could be off by `error`
    /// records (0: exact).
    pub(crate) fn translation_error(&self, group: &str, topic: &str, partition: i32, error: i64) {
        let labels = [
            ("source", self.source.clone()),
            ("target", self.target.clone()),
            ("group", group.to_owned()),
            ("topic", topic.to_owned()),
            ("partition", partition.to_string()),
        ];
        self.group_gauge(group, TRANSLATION_ERROR, &labels)
            .set(error as f64);
    }

    /// A checkpoint of `group` was acknowledged, `latency` after the group's offsets were read.
    pub(crate) fn checkpoint_written(&self, latency: Duration) {
        let flow = [
            ("source", self.source.clone()),
            ("target", self.target.clone()),
        ];
        ::metrics::histogram!(CHECKPOINT_LATENCY, &flow).record(latency.as_secs_f64() * 1000.0);
    }

    /// `group`'s position on the source, read at `at`, is what its checkpoints carry.
    pub(crate) fn position_captured(&self, group: &str, at: std::time::SystemTime) {
        let seconds = at
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        self.group_gauge(group, POSITION_CAPTURED, &self.group_labels(group))
            .set(seconds);
    }

    /// A checkpoint pass succeeded: `groups` checkpointed, `written` checkpoints written.
    pub(crate) fn checkpoint_pass(&self, groups: usize, written: usize) {
        self.entry.checkpoint_pass(groups, written);
    }

    /// `n` offsets of `group` were committed on the target.
    pub(crate) fn sync_written(&self, group: &str, n: usize) {
        self.group_counter(group, GROUP_SYNC_WRITTEN, &self.group_labels(group))
            .increment(n as u64);
    }

    /// Group sync left `group` (or a partition of it) alone for `reason`.
    pub(crate) fn sync_skipped(&self, group: &str, reason: &'static str) {
        let mut labels = self.group_labels(group).to_vec();
        labels.push(("reason", reason.to_owned()));
        self.group_counter(group, GROUP_SYNC_SKIPPED, &labels)
            .increment(1);
    }

    /// A sync pass succeeded: `synced` groups match their checkpoints, `skipped` do not.
    pub(crate) fn sync_pass(&self, synced: usize, skipped: usize) {
        self.entry.sync_pass(synced, skipped);
    }

    /// A checkpoint or sync pass failed.
    pub(crate) fn pass_failed(&self, error: &dyn std::fmt::Display) {
        self.entry.groups_error(error.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(name, kind, labels)` of every metric row of `docs/metrics.md`'s tables.
    fn documented() -> Vec<(String, String, Vec<String>)> {
        include_str!("../../../docs/metrics.md")
            .lines()
            .filter(|l| l.starts_with("| `strait_"))
            .map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                let labels = cells[3].split(',').map(|s| s.trim().to_owned()).collect();
                (
                    cells[1].trim_matches('`').to_owned(),
                    cells[2].to_owned(),
                    labels,
                )
            })
            .collect()
    }

    /// Three groups with series of every kind a group has; a checkpoint pass then lists two
    /// of them: the third's series leave the group recorder once its idle time passed, the
    /// others' stay, touched, though nothing else updated them (before, a deleted group's
    /// series stayed for the life of the process, its captured time frozen).
    #[test]
    fn a_gone_groups_series_leave_and_the_live_groups_stay() {
        use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusRecorder};
        let recorder: &'static PrometheusRecorder = Box::leak(Box::new(
            PrometheusBuilder::new()
                .idle_timeout(
                    metrics_util::MetricKindMask::ALL,
                    Some(Duration::from_millis(400)),
                )
                .build_recorder(),
        ));
        TEST_GROUP_RECORDER.with(|r| r.set(Some(recorder)));
        let handle = recorder.handle();
        let flow = crate::event_capture::flow("GoneA", "GoneB", "");
        let m = GroupMetrics::new(&flow);
        for g in ["kept-1", "kept-2", "gone"] {
            m.position_captured(g, std::time::SystemTime::now());
            m.translation_error(g, "orders", 0, 0);
            m.sync_written(g, 3);
            m.sync_skipped(g, "target_ahead");
        }
        let shown = |g: &str| {
            handle
                .render()
                .lines()
                .filter(|l| l.contains(&format!("group=\"{g}\"")))
                .count()
        };
        assert_eq!(shown("gone"), 4, "{}", handle.render());
        m.groups_now(["kept-1", "kept-2"]);
        for _ in 0..10 {
            std::thread::sleep(Duration::from_millis(100));
            touch_groups();
            handle.run_upkeep();
        }
        assert_eq!(shown("gone"), 0, "{}", handle.render());
        for g in ["kept-1", "kept-2"] {
            assert_eq!(shown(g), 4, "{g}: {}", handle.render());
        }
        // A group listed again is live again.
        m.position_captured("gone", std::time::SystemTime::now());
        assert_eq!(shown("gone"), 1);
        TEST_GROUP_RECORDER.with(|r| r.set(None));
    }

    /// A unit handed away: its gauges and its partitions' leave what `/metrics` shows (they
    /// stayed, at 0, for the life of the process), its counters and the other unit's series
    /// stay; the unit back on this worker shows again.
    #[test]
    fn a_released_units_gauges_leave_metrics_and_come_back_with_it() {
        use metrics_exporter_prometheus::PrometheusBuilder;
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let flow = crate::event_capture::flow("HandA", "HandB", "");
        let (unit0, unit1) = (
            UnitFilter { index: 0, units: 2 },
            UnitFilter { index: 1, units: 2 },
        );
        let on = |topic: &str, p: i32| TopicPartition::new(topic, p);
        let (held, away) = ::metrics::with_local_recorder(&recorder, || {
            let held = FlowMetrics::start(&flow, Some(unit0));
            let away = FlowMetrics::start(&flow, Some(unit1));
            for (m, unit) in [(&held, unit0), (&away, unit1)] {
                for p in 0..8 {
                    let tp = on("orders", p);
                    if unit.contains(&tp.topic, p) {
                        let pm = m.partition(&tp, &tp);
                        pm.progress(10, 7, 1);
                        pm.written(1, 10, 0);
                    }
                }
                m.in_flight(5);
            }
            (held, away)
        });
        let owner = |p: i32| {
            if unit1.contains("orders", p) {
                "1"
            } else {
                "0"
            }
        };
        let shown = |name: &str, labels: &[(&str, &str)]| {
            let text = hide_released(&handle.render());
            text.lines()
                .filter(|l| {
                    l.starts_with(&format!("{name}{{"))
                        && labels
                            .iter()
                            .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
                })
                .count()
        };
        let away_partition = (0..8).find(|p| owner(*p) == "1").expect("unit 1 has one");
        let held_partition = (0..8).find(|p| owner(*p) == "0").expect("unit 0 has one");
        let ap = away_partition.to_string();
        let hp = held_partition.to_string();
        assert_eq!(shown(BYTES_IN_FLIGHT, &[("unit", "1")]), 1);
        assert_eq!(shown(LAG_RECORDS, &[("partition", &ap)]), 1);
        ::metrics::with_local_recorder(&recorder, || release_unit(&flow, unit1));
        assert_eq!(shown(BYTES_IN_FLIGHT, &[("unit", "1")]), 0);
        assert_eq!(shown(FLOW_STALLED, &[("unit", "1")]), 0);
        for gauge in PARTITION_GAUGES {
            assert_eq!(shown(gauge, &[("partition", &ap)]), 0, "{gauge}");
        }
        assert_eq!(
            shown(RECORD_COUNT, &[("partition", &ap)]),
            1,
            "counters stay"
        );
        assert_eq!(shown(BYTES_IN_FLIGHT, &[("unit", "0")]), 1);
        assert_eq!(shown(LAG_RECORDS, &[("partition", &hp)]), 1);
        drop((held, away));
        // Back on this worker.
        ::metrics::with_local_recorder(&recorder, || {
            let back = FlowMetrics::start(&flow, Some(unit1));
            let tp = on("orders", away_partition);
            back.partition(&tp, &tp).progress(12, 12, 1);
        });
        assert_eq!(shown(BYTES_IN_FLIGHT, &[("unit", "1")]), 1);
        assert_eq!(shown(LAG_RECORDS, &[("partition", &ap)]), 1);
    }

    #[test]
    fn sample_lines_are_read_with_escaped_label_values() {
        let line = r#"strait_lag_records{source="a\"b",target="c\\d",topic="t",partition="3"} 7"#;
        let (name, labels) = sample_labels(line).expect("a sample");
        assert_eq!(name, "strait_lag_records");
        assert_eq!(
            labels,
            [
                ("source", "a\"b".to_owned()),
                ("target", "c\\d".to_owned()),
                ("topic", "t".to_owned()),
                ("partition", "3".to_owned())
            ]
        );
        assert_eq!(sample_labels("# TYPE strait_lag_records gauge"), None);
        assert_eq!(sample_labels("strait_up 1"), None);
        assert_eq!(sample_labels("broken{source=\"a"), None);
    }

    #[test]
    fn every_metric_is_documented_as_it_is_defined() {
        let docs = documented();
        for m in METRICS {
            let row = docs.iter().find(|(name, ..)| name == m.name);
            let Some((_, kind, labels)) = row else {
                panic!("{} has no row in docs/metrics.md", m.name);
            };
            assert_eq!(
                kind,
                m.kind.as_str(),
                "{}: its type in docs/metrics.md",
                m.name
            );
            assert_eq!(
                labels, m.labels,
                "{}: its labels in docs/metrics.md",
                m.name
            );
        }
        for (name, ..) in &docs {
            assert!(
                METRICS.iter().any(|m| m.name == name),
                "docs/metrics.md documents {name}, which strait does not define (metrics::METRICS)"
            );
        }
        let mut names: Vec<&str> = METRICS.iter().map(|m| m.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), METRICS.len(), "a metric defined twice");
    }

    /// A metric name written as a constant anywhere it is recorded is in the catalogue, so a
    /// new one cannot be emitted without its help, registration and documentation.
    #[test]
    fn every_metric_name_constant_is_in_the_catalogue() {
        let sources = [
            include_str!("metrics.rs"),
            include_str!("../../strait-kafka/src/error.rs"),
        ];
        for source in sources {
            for line in source.lines() {
                let Some(rest) = line.trim().strip_prefix("pub const ") else {
                    continue;
                };
                let Some(name) = rest.split('"').nth(1) else {
                    continue;
                };
                if name.starts_with("strait_") {
                    assert!(
                        METRICS.iter().any(|m| m.name == name),
                        "{name} is not in metrics::METRICS"
                    );
                }
            }
        }
    }
}
