//! `strait check --config FILE`: what an MM2 (or strait) properties file does under strait,
//! without mirroring anything: the flows and their settings in effect, every key of the file
//! as used, ignored (with the catalogue's reason) or refused (with the error), what an MM2 user
//! loses or gains with this file, and, with `--connect`, the topics and consumer groups each
//! flow would take now. `docs/check.md` describes the output and the exit codes.
//!
//! The verdict is the config module's own (`StraitConfig::from_properties`), and the settings
//! of every client `strait run` makes from the file, built as `run` builds them before it
//! connects (`StraitConfig::refused_clients`: JAAS lines, login modules, stores): a file
//! `check` accepts is a file `strait run` starts with. To list every refused key rather than
//! the first, a refused key is taken out and the file resolved again.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use tokio::time::Instant;

use anyhow::Context as _;
use serde::Serialize;
use strait_core::config::properties::{self, Properties};
use strait_core::config::{
    ConfigError, FlowConfig, Role, Side, StartPosition, StraitConfig, WarningKind,
};
use strait_kafka::admin::IsolationLevel;
use strait_kafka::{Client, ClientConfig};

/// Exit code: strait runs this file.
pub(crate) const EXIT_RUNS: u8 = 0;
/// Exit code: strait refuses this file (syntax or config errors).
pub(crate) const EXIT_REFUSED: u8 = 1;
/// Exit code: `--strict`, and some key is ignored, unknown, deprecated or set twice.
pub(crate) const EXIT_STRICT: u8 = 3;
/// Exit code: `--connect`, and a cluster did not answer.
pub(crate) const EXIT_UNREACHABLE: u8 = 4;

/// How many refused keys are looked for before giving up.
const MAX_REFUSALS: usize = 64;

const EXIT_CODES: &str = "Exit codes:
  0  strait runs this file (warnings allowed unless --strict)
  1  strait refuses this file: a syntax or config error (listed under refused keys / errors)
  2  bad command line
  3  --strict, and some key is ignored, unknown, deprecated or set twice
  4  --connect, and a cluster did not answer or refused the connection
When several apply, the lowest of 1, 4, 3 wins.

Examples:
  # The verdict, the flows and every key, without touching a cluster:
  strait check --config mm2.properties
  # In CI: fail on ignored or unknown keys too, the report as JSON:
  strait check --config mm2.properties --strict --format json
  # Also list the topics and groups each flow would take now:
  strait check --config mm2.properties --connect";

/// `strait check` arguments.
#[derive(Debug, clap::Args)]
#[command(after_help = EXIT_CODES)]
pub(crate) struct CheckArgs {
    /// The MM2 properties file (`connect-mirror-maker.properties` style).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// `human` text, or `json` (one object: verdict, flows, keys, notes, clusters).
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    /// Exit 3 when any key is ignored, unknown, deprecated or set twice.
    #[arg(long)]
    strict: bool,
    /// Also connect to every cluster and list the topics and consumer groups each enabled flow
    /// would take now. Off by default: without it, `check` never touches the network.
    #[arg(long)]
    connect: bool,
    /// With `--connect`: how long each cluster has to answer.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    timeout_secs: u64,
}

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Human,
    Json,
}

/// What `check` found; `--format json` prints it as is.
#[derive(Debug, Serialize)]
struct Report {
    file: String,
    /// `runs` or `refused`.
    verdict: &'static str,
    exit_code: u8,
    /// Every ordered pair of clusters, enabled or not (empty when the file is refused).
    flows: Vec<FlowRow>,
    /// Heartbeat writers (MM2 runs them for every pair, enabled or not).
    heartbeats: Vec<HeartbeatRow>,
    keys: Keys,
    /// Errors that name no key of the file (a missing key, no flow enabled).
    errors: Vec<String>,
    /// What an MM2 user loses, gains, or finds different with this file.
    notes: Vec<Note>,
    /// With `--connect`: each cluster's answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    clusters: Option<Vec<ClusterRow>>,
}

#[derive(Debug, Default, Serialize)]
struct Keys {
    used: Vec<KeyRow>,
    ignored: Vec<KeyRow>,
    refused: Vec<KeyRow>,
}

/// One key of the file.
#[derive(Debug, Serialize)]
struct KeyRow {
    key: String,
    line: usize,
    /// Used: a remark (deprecated, set twice); ignored: why; refused: the error.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    /// Unknown keys: the known key it is close to.
    #[serde(skip_serializing_if = "Option::is_none")]
    did_you_mean: Option<String>,
}

#[derive(Debug, Serialize)]
struct FlowRow {
    flow: String,
    enabled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    settings: Option<FlowSettings>,
    /// With `--connect`: what the flow would take now.
    #[serde(skip_serializing_if = "Option::is_none")]
    now: Option<FlowNow>,
}

/// A flow's settings in effect. Intervals in seconds; `None` when that task is disabled.
#[derive(Debug, Serialize)]
struct FlowSettings {
    topics: String,
    topics_exclude: String,
    groups: String,
    groups_exclude: String,
    replication_policy: String,
    separator: String,
    /// What `orders` is called on the target.
    example_remote_topic: String,
    replication_factor: i16,
    refresh_topics_secs: Option<u64>,
    sync_topic_configs_secs: Option<u64>,
    sync_topic_acls_secs: Option<u64>,
    emit_checkpoints_secs: Option<u64>,
    /// `strait.checkpoints.capture.interval.ms`: how often positions are read (`None`: only
    /// every `emit_checkpoints_secs`).
    checkpoints_capture_ms: Option<u64>,
    sync_group_offsets_secs: Option<u64>,
    checkpoints_topic: String,
    offset_syncs_topic: Option<String>,
    offset_lag_max: u64,
    heartbeats_replication: bool,
    isolation_level: &'static str,
    start: &'static str,
    max_bytes_in_flight: u64,
}

#[derive(Debug, Serialize)]
struct FlowNow {
    /// `(source topic, remote topic, partitions)`, sorted; `None` when the source did not answer.
    topics: Option<Vec<TopicNow>>,
    groups: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Debug, Serialize)]
struct TopicNow {
    topic: String,
    remote: String,
    partitions: i32,
}

#[derive(Debug, Serialize)]
struct HeartbeatRow {
    /// The cluster written to.
    into: String,
    /// The record key's pair, `source->target` aliases.
    pair: String,
    interval_secs: u64,
}

#[derive(Debug, Serialize)]
struct ClusterRow {
    cluster: String,
    bootstrap: Vec<String>,
    /// `answers`; `refused`: strait refuses the settings of one of its clients, so it was not
    /// contacted; `failed`: contacted, and it did not answer or refused the connection.
    status: &'static str,
    reachable: bool,
    /// Why it is refused or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// [`ClusterRow::status`] values.
const ANSWERS: &str = "answers";
const REFUSED: &str = "refused";
const FAILED: &str = "failed";

#[derive(Debug, Serialize)]
struct Note {
    /// `loses`, `gains` or `differs`.
    kind: &'static str,
    /// The key it follows from, if one.
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    text: String,
}

/// Runs `strait check`; exits with the code of the verdict.
pub(crate) async fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let report = check(&args).await?;
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Format::Human => print!("{}", crate::format::printable(&render(&report))),
    }
    Ok(ExitCode::from(report.exit_code))
}

async fn check(args: &CheckArgs) -> anyhow::Result<Report> {
    let path = args.config.as_path();
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut report = Report {
        file: path.display().to_string(),
        verdict: "runs",
        exit_code: EXIT_RUNS,
        flows: Vec::new(),
        heartbeats: Vec::new(),
        keys: Keys::default(),
        errors: Vec::new(),
        notes: Vec::new(),
        clusters: None,
    };
    let props = match properties::parse(&properties::decode(&bytes)) {
        Ok(props) => props,
        Err(e) => {
            report.verdict = "refused";
            report.exit_code = EXIT_REFUSED;
            let row = KeyRow {
                key: e.key.clone().unwrap_or_default(),
                line: e.line,
                reason: Some(e.reason.clone()),
                did_you_mean: None,
            };
            if e.key.is_some() {
                report.keys.refused.push(row);
            } else {
                report.errors.push(format!("line {}: {}", e.line, e.reason));
            }
            return Ok(report);
        }
    };
    let resolved = resolve_all(&props, path);
    report.errors = resolved.errors;
    classify_keys(&props, &resolved.refused, &mut report.keys);
    let refused = !resolved.refused.is_empty() || !report.errors.is_empty();
    if refused {
        report.verdict = "refused";
        report.exit_code = EXIT_REFUSED;
    }
    // A file that resolves but whose clients' settings are refused still has its flows: they
    // are shown, and `--connect` contacts the clusters whose settings are not refused.
    let Some(config) = resolved.config else {
        report.notes = notes(&props, None, &report.keys);
        return Ok(report);
    };
    report.flows = flow_rows(&config);
    report.heartbeats = config
        .heartbeats
        .iter()
        .map(|h| HeartbeatRow {
            into: h.target.to_string(),
            pair: format!("{}->{}", h.source_alias, h.target_alias),
            interval_secs: h.interval.as_secs(),
        })
        .collect();
    report.notes = notes(&props, Some(&config), &report.keys);
    let mut unreachable = false;
    if args.connect {
        // One deadline for everything `--connect` does: the clusters are contacted at once,
        // then the flows' sources asked at once, within what is left.
        let deadline = Instant::now() + Duration::from_secs(args.timeout_secs.max(1));
        let clusters = reach_clusters(&config, &resolved.refused_clusters, deadline).await;
        unreachable = clusters.iter().any(|c| c.status == FAILED);
        let now = futures::future::join_all(report.flows.iter().map(|row| {
            let flow = config.flows.iter().find(|f| f.name() == row.flow);
            let (config, clusters) = (&config, &clusters);
            async move {
                match flow {
                    Some(flow) => Some(flow_now(config, flow, clusters, deadline).await),
                    None => None,
                }
            }
        }))
        .await;
        for (row, now) in report.flows.iter_mut().zip(now) {
            row.now = now;
        }
        report.clusters = Some(clusters);
    }
    let warned =
        !report.keys.ignored.is_empty() || report.keys.used.iter().any(|k| k.reason.is_some());
    report.exit_code = if refused {
        EXIT_REFUSED
    } else if unreachable {
        EXIT_UNREACHABLE
    } else if args.strict && warned {
        EXIT_STRICT
    } else {
        EXIT_RUNS
    };
    Ok(report)
}

/// What [`resolve_all`] found.
struct Resolved {
    /// The config the whole file resolves to, its clients' settings refused or not; `None`
    /// when the file itself is refused.
    config: Option<StraitConfig>,
    /// The refused keys of the file, with their errors.
    refused: BTreeMap<String, ConfigError>,
    /// The errors that name no key of the file.
    errors: Vec<String>,
    /// The clusters one of whose clients' settings are refused, with the first reason.
    refused_clusters: BTreeMap<String, String>,
}

/// Resolves `props` as `strait run` would, then builds the settings of every client `run`
/// makes from it ([`StraitConfig::refused_clients`]); while either is refused for keys of the
/// file, notes the errors, takes the keys out and tries again.
fn resolve_all(props: &Properties, path: &Path) -> Resolved {
    let mut resolved = Resolved {
        config: None,
        refused: BTreeMap::new(),
        errors: Vec::new(),
        refused_clusters: BTreeMap::new(),
    };
    let mut remaining = props.clone();
    for round in 0..MAX_REFUSALS {
        match StraitConfig::from_properties(&remaining, path) {
            Ok(config) => {
                let refusals = config.refused_clients();
                if round == 0 {
                    for r in &refusals {
                        let why = match &r.error.key {
                            Some(key) => format!("{key}: {}", r.error.reason),
                            None => r.error.reason.to_string(),
                        };
                        resolved
                            .refused_clusters
                            .entry(r.cluster.to_string())
                            .or_insert(why);
                    }
                    resolved.config = Some(config);
                }
                let mut taken_out = false;
                let mut unset = BTreeSet::new();
                for r in refusals {
                    // Several clients refuse the same key (a cluster's key reaches all three).
                    if r.error
                        .key
                        .as_ref()
                        .is_some_and(|k| resolved.refused.contains_key(k))
                    {
                        continue;
                    }
                    match r.error.key.clone().filter(|k| remaining.get(k).is_some()) {
                        Some(key) => {
                            remaining.remove(&key);
                            resolved.refused.insert(key, r.error);
                            taken_out = true;
                        }
                        // A key the file does not set (SASL without `sasl.jaas.config`), once
                        // per cluster; only as the file is written: once a refused key is
                        // taken out, its absence is no news.
                        None if round == 0
                            && unset.insert((r.cluster.to_string(), r.error.key.clone())) =>
                        {
                            resolved.errors.push(r.error.reason.to_string());
                        }
                        None => {}
                    }
                }
                if !taken_out {
                    break;
                }
            }
            Err(e) => match e.key.clone().filter(|k| remaining.get(k).is_some()) {
                Some(key) => {
                    remaining.remove(&key);
                    resolved.refused.insert(key, e);
                }
                None => {
                    resolved.errors.push(e.reason.to_string());
                    break;
                }
            },
        }
    }
    resolved
}

/// Sorts every key of the file into used, ignored and refused.
fn classify_keys(props: &Properties, refused: &BTreeMap<String, ConfigError>, keys: &mut Keys) {
    let aliases: Vec<String> = props
        .get("clusters")
        .map(|p| {
            p.value
                .split(',')
                .map(|a| a.trim().to_owned())
                .filter(|a| !a.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let mut all: Vec<(&str, &properties::Property)> = props.iter().collect();
    all.sort_by_key(|(_, p)| p.line);
    for (key, prop) in all {
        let twice = prop
            .replaced_line
            .map(|l| format!("also set on line {l}; this line wins"));
        let row = |reason: Option<String>, did_you_mean: Option<String>| KeyRow {
            key: key.to_owned(),
            line: prop.line,
            reason,
            did_you_mean,
        };
        if let Some(e) = refused.get(key) {
            keys.refused.push(row(Some(e.reason.to_string()), None));
            continue;
        }
        if key == "config.providers" || key.starts_with("config.providers.") {
            keys.used.push(row(twice, None));
            continue;
        }
        match StraitConfig::key_warning(key, &aliases) {
            None => match StraitConfig::client_key_of(key, &aliases) {
                Some((role, k)) if StraitConfig::client_key_unused(role, k).is_some() => {
                    let reason = StraitConfig::client_key_unused(role, k).map(str::to_owned);
                    keys.ignored.push(row(reason, None))
                }
                _ => {
                    let note = at_default(key, &prop.value, &aliases);
                    let note = match (note, twice) {
                        (Some(n), Some(t)) => Some(format!("{n}; {t}")),
                        (n, t) => n.or(t),
                    };
                    keys.used.push(row(note, None))
                }
            },
            Some(WarningKind::Deprecated { replacement }) => {
                let note = format!("deprecated in MM2 (still works): use `{replacement}`");
                let note = match twice {
                    Some(t) => format!("{note}; {t}"),
                    None => note,
                };
                keys.used.push(row(Some(note), None));
            }
            Some(WarningKind::Unused { reason }) => {
                keys.ignored.push(row(Some(reason.to_owned()), None))
            }
            Some(WarningKind::Unknown { hint }) => keys
                .ignored
                .push(row(Some("unknown to MM2 and to strait".to_owned()), hint)),
            Some(_) => keys.used.push(row(twice, None)),
        }
    }
}

/// A note when a used key is set to the default the key catalogue gives it: a line that may
/// go, unless it overrides another level's value (`A->B.x` over a top-level `x`).
fn at_default(key: &str, value: &str, aliases: &[String]) -> Option<String> {
    let def = StraitConfig::key_definition(key, aliases)?;
    let same = !def.default.is_empty() && value.trim().eq_ignore_ascii_case(def.default);
    same.then(|| format!("set to its default, `{}`", def.default))
}

/// Every ordered pair of clusters, with the settings of the enabled ones.
fn flow_rows(config: &StraitConfig) -> Vec<FlowRow> {
    let mut rows = Vec::new();
    for source in &config.clusters {
        for target in config.clusters.iter().filter(|t| t.alias != source.alias) {
            let name = format!("{}->{}", source.alias, target.alias);
            let flow = config.flows.iter().find(|f| f.name() == name);
            rows.push(FlowRow {
                flow: name,
                enabled: flow.is_some(),
                settings: flow.map(settings),
                now: None,
            });
        }
    }
    rows
}

fn settings(flow: &FlowConfig) -> FlowSettings {
    let secs = |d: Option<Duration>| d.map(|d| d.as_secs());
    FlowSettings {
        topics: flow.topics.include().as_str().to_owned(),
        topics_exclude: flow.topics.exclude().as_str().to_owned(),
        groups: flow.groups.include().as_str().to_owned(),
        groups_exclude: flow.groups.exclude().as_str().to_owned(),
        replication_policy: flow
            .policy
            .class_name()
            .rsplit('.')
            .next()
            .unwrap_or_default()
            .to_owned(),
        separator: flow.policy.separator().to_owned(),
        example_remote_topic: flow.remote_topic("orders"),
        replication_factor: flow.replication_factor,
        refresh_topics_secs: secs(flow.refresh_topics),
        sync_topic_configs_secs: secs(flow.sync_topic_configs),
        sync_topic_acls_secs: secs(flow.sync_topic_acls),
        emit_checkpoints_secs: secs(flow.emit_checkpoints),
        checkpoints_capture_ms: flow
            .checkpoints_capture
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        sync_group_offsets_secs: secs(flow.sync_group_offsets),
        checkpoints_topic: flow.checkpoints_topic(),
        offset_syncs_topic: flow.emit_offset_syncs.then(|| {
            let (topic, side) = flow.offset_syncs_topic();
            let on = match side {
                Side::Source => &flow.source,
                Side::Target => &flow.target,
            };
            format!("{topic} on {on}")
        }),
        offset_lag_max: flow.offset_lag_max,
        heartbeats_replication: flow.heartbeats_replication,
        isolation_level: match flow.isolation_level {
            IsolationLevel::ReadCommitted => "read_committed",
            IsolationLevel::ReadUncommitted => "read_uncommitted",
        },
        start: match flow.auto_offset_reset {
            StartPosition::Earliest => "earliest",
            StartPosition::Latest => "latest",
        },
        max_bytes_in_flight: flow.max_bytes_in_flight,
    }
}

/// What an MM2 user loses, gains or finds different with this file, from its keys and flows.
fn notes(props: &Properties, config: Option<&StraitConfig>, keys: &Keys) -> Vec<Note> {
    let mut notes = Notes::default();
    notes.refused(keys);
    let workers = config.is_some_and(|c| c.flows.iter().any(|f| f.workers.is_some()));
    let connect_keys = notes.ignored(keys);
    notes.workers(props, keys, workers);
    if connect_keys > 0 {
        notes.add(
            "gains",
            None,
            format!(
                "no Kafka Connect to run: {connect_keys} Connect key(s) of this file \
                 (worker, converters, internal topics, REST) have no effect"
            ),
        );
    }
    notes.deprecated(keys);
    let Some(config) = config else {
        return notes.0;
    };
    if !config.flows.is_empty() {
        notes.add(
            "gains",
            None,
            "an exact offset map per flow (`strait-offset-map.<source>.internal` on the \
             target): checkpoints and failover translate offsets exactly, where MM2 samples \
             offset syncs every `offset.lag.max` records"
                .to_owned(),
        );
        notes.add(
            "gains",
            None,
            "record batches are forwarded as the source wrote them: no decompression, no \
             recompression, no per-record work"
                .to_owned(),
        );
    }
    for flow in &config.flows {
        notes.flow(props, flow);
    }
    for k in &keys.used {
        if bare(&k.key).starts_with("strait.") {
            notes.add(
                "gains",
                Some(&k.key),
                "a strait-only key; MM2 ignores it, so the file still runs under MM2".to_owned(),
            );
        }
    }
    notes.0
}

/// The name a key has without its `S->T.` or alias prefix.
fn bare(key: &str) -> String {
    match key.split_once("->") {
        Some((_, rest)) => rest.split_once('.').map_or(rest, |(_, r)| r).to_owned(),
        None => key.to_owned(),
    }
}

/// [`notes`] as they are found, in order.
#[derive(Default)]
struct Notes(Vec<Note>);

impl Notes {
    fn add(&mut self, kind: &'static str, key: Option<&str>, text: String) {
        self.0.push(Note {
            kind,
            key: key.map(str::to_owned),
            text,
        });
    }

    /// What the refused keys lose.
    fn refused(&mut self, keys: &Keys) {
        let refused = |name: &str| keys.refused.iter().find(|k| bare(&k.key) == name);
        if let Some(k) = refused("transforms").or_else(|| refused("predicates")) {
            self.add(
                "loses",
                Some(&k.key),
                "Single Message Transforms: strait forwards record batches unopened and cannot \
                 change records; drop the SMT chain, or keep MM2 for this flow"
                    .to_owned(),
            );
        }
    }

    /// What the ignored keys change: the target's compression, Connect's task keys, typos;
    /// returns how many are Connect's own.
    fn ignored(&mut self, keys: &Keys) -> usize {
        let mut connect_keys = 0;
        for k in &keys.ignored {
            let name = bare(&k.key);
            match name.as_str() {
                _ if name.ends_with("producer.compression.type") => self.add(
                    "differs",
                    Some(&k.key),
                    "batches keep the compression the source producers gave them; the target \
                     producer's `compression.type` is not applied"
                        .to_owned(),
                ),
                "tasks.max.enforce" => self.add(
                    "differs",
                    Some(&k.key),
                    "no Connect tasks: strait spreads a flow's partitions itself".to_owned(),
                ),
                _ if k.did_you_mean.is_some() => self.add(
                    "differs",
                    Some(&k.key),
                    format!(
                        "`{}` is unknown and has no effect: did you mean `{}`?",
                        k.key,
                        k.did_you_mean.as_deref().unwrap_or_default()
                    ),
                ),
                _ => {
                    let reason = k.reason.as_deref().unwrap_or_default();
                    if reason.contains("Connect") || reason.contains("Converter") {
                        connect_keys += 1;
                    }
                }
            }
        }
        connect_keys
    }

    /// What `exactly.once.source.support` and `tasks.max` mean with or without the workers.
    fn workers(&mut self, props: &Properties, keys: &Keys, workers: bool) {
        for k in keys
            .used
            .iter()
            .filter(|k| bare(&k.key) == "exactly.once.source.support")
        {
            let value = props.get(&k.key).map_or("", |p| p.value.trim());
            if value.eq_ignore_ascii_case("enabled") && workers {
                self.add(
                    "differs",
                    Some(&k.key),
                    "exactly-once source (`enabled`): each unit of the flow, run by the workers \
                     that every `strait run` with this file joins on the target cluster, commits \
                     a round's data and offset map in one transaction its next owner fences (no \
                     Connect cluster)"
                        .to_owned(),
                );
            } else if !value.eq_ignore_ascii_case("disabled") && !workers {
                self.add(
                    "loses",
                    Some(&k.key),
                    format!(
                        "exactly-once source (`{value}`): it needs the workers, which \
                         `strait.workers.enabled = false` turns off, so one run mirrors at least \
                         once, with an exact offset map"
                    ),
                );
            }
        }
        for k in keys.used.iter().filter(|k| bare(&k.key) == "tasks.max") {
            if !workers {
                self.add(
                    "differs",
                    Some(&k.key),
                    "no Connect tasks: `tasks.max` counts only when workers run the flow \
                     (`strait.workers.enabled`, on unless set to false), as its units of work; \
                     one `strait run` without them mirrors every partition itself"
                        .to_owned(),
                );
            }
        }
    }

    /// Keys MM2 deprecated, still honoured.
    fn deprecated(&mut self, keys: &Keys) {
        for k in &keys.used {
            if let Some(replacement) = k
                .reason
                .as_deref()
                .and_then(|r| r.strip_prefix("deprecated in MM2 (still works): use `"))
            {
                let replacement = replacement.split('`').next().unwrap_or_default();
                self.add(
                    "differs",
                    Some(&k.key),
                    format!("deprecated key, still honoured: rename it `{replacement}`"),
                );
            }
        }
    }

    /// What differs for one flow: the isolation level, group sync without checkpoints,
    /// `refresh.groups.*`.
    fn flow(&mut self, props: &Properties, flow: &FlowConfig) {
        let name = flow.name();
        let set =
            |key: &str| props.get(key).is_some() || props.get(&format!("{name}.{key}")).is_some();
        let client_set = |key: &str| {
            props.iter().any(|(k, _)| {
                k.ends_with(&format!("consumer.{key}"))
                    && (k.starts_with(&format!("{}.", flow.source))
                        || k.starts_with(&format!("{name}.")))
            })
        };
        if !set("strait.isolation.level")
            && !client_set("isolation.level")
            && flow.isolation_level == IsolationLevel::ReadCommitted
        {
            self.add(
                "differs",
                None,
                format!(
                    "{name}: reads committed records only; MM2 reads uncommitted by default \
                     (set `strait.isolation.level = read_uncommitted` to mirror aborted \
                     transactions as MM2 did)"
                ),
            );
        }
        if flow.sync_group_offsets.is_some() && flow.emit_checkpoints.is_none() {
            self.add(
                "gains",
                None,
                format!(
                    "{name}: group offsets are synced even with checkpoints off (strait \
                     translates in memory; MM2 would sync nothing)"
                ),
            );
        }
        if set("refresh.groups.interval.seconds") || set("refresh.groups.enabled") {
            self.add(
                "differs",
                Some("refresh.groups.*"),
                format!(
                    "{name}: `refresh.groups.*` is read but not acted on yet: groups are \
                     listed on every checkpoint pass"
                ),
            );
        }
    }
}

/// Connects to every cluster at once, with its own settings, until `deadline`; a cluster whose
/// settings are refused (`refused`, by alias) is not contacted.
async fn reach_clusters(
    config: &StraitConfig,
    refused: &BTreeMap<String, String>,
    deadline: Instant,
) -> Vec<ClusterRow> {
    let rows = config.clusters.iter().map(|cluster| async move {
        let alias = cluster.alias.as_str();
        let answer = match refused.get(alias) {
            Some(why) => Err((REFUSED, why.clone())),
            None => match config.cluster_client_config(alias, Role::Admin) {
                Ok(client) => connect(client, deadline)
                    .await
                    .map(|_| ())
                    .map_err(|e| (FAILED, format!("{e:#}"))),
                Err(e) => Err((REFUSED, e.reason.to_string())),
            },
        };
        ClusterRow {
            cluster: alias.to_owned(),
            bootstrap: cluster.bootstrap_servers.clone(),
            status: answer.as_ref().err().map_or(ANSWERS, |(status, _)| status),
            reachable: answer.is_ok(),
            error: answer.err().map(|(_, why)| why),
        }
    });
    futures::future::join_all(rows).await
}

/// The topics and groups `flow` would take now, selected by the flow's own code; its source
/// is asked only when it answered in `clusters`.
async fn flow_now(
    config: &StraitConfig,
    flow: &FlowConfig,
    clusters: &[ClusterRow],
    deadline: Instant,
) -> FlowNow {
    let unknown = |error: String| FlowNow {
        topics: None,
        groups: None,
        error: Some(error),
    };
    let source = clusters.iter().find(|c| c.cluster == flow.source.as_str());
    match source.map(|c| c.status) {
        Some(REFUSED) => {
            return unknown(format!(
                "source {} not contacted: strait refuses its settings",
                flow.source
            ))
        }
        Some(FAILED) => {
            return unknown(format!(
                "source {} not asked: it did not answer or refused the connection",
                flow.source
            ))
        }
        _ => {}
    }
    let answer = async {
        let client_config = config.client_config(flow, Side::Source, Role::Admin)?;
        let source = connect(client_config, deadline).await?;
        let mut topics: Vec<TopicNow> = strait_core::flow::topics::discover(&source, flow)
            .await?
            .into_iter()
            .map(|t| TopicNow {
                topic: t.source,
                remote: t.remote,
                partitions: t.partitions,
            })
            .collect();
        topics.sort_by(|a, b| a.topic.cmp(&b.topic));
        let mut groups = strait_core::offsets::consumer_groups(&source, flow).await?;
        groups.sort();
        anyhow::Ok((topics, groups))
    };
    match tokio::time::timeout_at(deadline, answer).await {
        Ok(Ok((topics, groups))) => FlowNow {
            topics: Some(topics),
            groups: Some(groups),
            error: None,
        },
        Ok(Err(e)) => unknown(format!("{e:#}")),
        Err(_) => unknown(format!(
            "source {} did not answer within the timeout",
            flow.source
        )),
    }
}

/// A client of `config`'s cluster, connected before `deadline`, or why not: the client's own
/// error (connection refused, a host name that does not resolve, TLS or SASL refused) when it
/// has one by then, else that nothing answered.
async fn connect(mut config: ClientConfig, deadline: Instant) -> anyhow::Result<Client> {
    let left = deadline.saturating_duration_since(Instant::now());
    // The client retries a broker that is down until its patience runs out, then says why the
    // last try failed: it gives up a little before the deadline, its waits between tries kept
    // short, so that the reason, not only "no answer", is there by the deadline.
    let patience = left.saturating_sub((left / 5).min(Duration::from_secs(1)));
    config.connection.connect_timeout = patience;
    config.operation_timeout = left;
    config.retry_backoff_max = config.retry_backoff_max.min(Duration::from_millis(200));
    config.reconnect_backoff.1 = config.reconnect_backoff.1.min(Duration::from_millis(200));
    match tokio::time::timeout_at(deadline, Client::connect_within(config, patience)).await {
        Ok(client) => Ok(client?),
        Err(_) => anyhow::bail!("no answer within {left:?}"),
    }
}

fn secs(value: Option<u64>) -> String {
    value.map_or_else(|| "off".to_owned(), |s| format!("every {s} s"))
}

/// The human form of `report`.
fn render(report: &Report) -> String {
    let mut out = String::new();
    let verdict = match report.verdict {
        "runs" => "strait runs this file",
        _ => "strait refuses this file",
    };
    let _ = writeln!(
        out,
        "{}: {verdict} (exit {})",
        report.file, report.exit_code
    );
    for e in &report.errors {
        let _ = writeln!(out, "error: {e}");
    }
    if !report.flows.is_empty() {
        let _ = writeln!(out, "\nFlows");
    }
    for row in &report.flows {
        render_flow(&mut out, row);
    }
    if !report.heartbeats.is_empty() {
        let _ = writeln!(out, "\nHeartbeats");
        for h in &report.heartbeats {
            let _ = writeln!(
                out,
                "  into {} every {} s (pair {})",
                h.into, h.interval_secs, h.pair
            );
        }
    }
    if let Some(clusters) = &report.clusters {
        let _ = writeln!(out, "\nClusters");
        for c in clusters {
            let why = c.error.as_deref().unwrap_or_default();
            let state = match c.status {
                REFUSED => format!("REFUSED, not contacted: {why}"),
                FAILED => format!("FAILED: {why}"),
                _ => "answers".to_owned(),
            };
            let _ = writeln!(out, "  {} ({})  {state}", c.cluster, c.bootstrap.join(","));
        }
    }
    for (title, rows) in [
        ("Keys used", &report.keys.used),
        ("Keys ignored", &report.keys.ignored),
        ("Keys refused", &report.keys.refused),
    ] {
        let _ = writeln!(out, "\n{title} ({})", rows.len());
        for k in rows {
            let _ = write!(out, "  line {:<4} {}", k.line, k.key);
            if let Some(reason) = &k.reason {
                let _ = write!(out, ": {reason}");
            }
            if let Some(hint) = &k.did_you_mean {
                let _ = write!(out, " (did you mean `{hint}`?)");
            }
            let _ = writeln!(out);
        }
    }
    if !report.notes.is_empty() {
        let _ = writeln!(out, "\nCompared with MM2");
        for n in &report.notes {
            let about = match &n.key {
                Some(key) if !n.text.contains(key.as_str()) => format!("`{key}`: "),
                _ => String::new(),
            };
            let _ = writeln!(out, "  {:<8} {about}{}", n.kind, n.text);
        }
    }
    out
}

/// One flow of [`render`]: its settings, and what its clusters hold now (`--connect`).
fn render_flow(out: &mut String, row: &FlowRow) {
    let Some(s) = &row.settings else {
        let _ = writeln!(out, "  {}  disabled", row.flow);
        return;
    };
    let _ = writeln!(out, "  {}  enabled", row.flow);
    let mut line = |name: &str, value: String| {
        let _ = writeln!(out, "    {name:<16}{value}");
    };
    line(
        "topics",
        format!("{}  (exclude {})", s.topics, s.topics_exclude),
    );
    line(
        "groups",
        format!("{}  (exclude {})", s.groups, s.groups_exclude),
    );
    line(
        "policy",
        format!(
            "{}, separator `{}`: orders -> {}",
            s.replication_policy, s.separator, s.example_remote_topic
        ),
    );
    line("replication", format!("factor {}", s.replication_factor));
    line("refresh topics", secs(s.refresh_topics_secs));
    line("topic configs", secs(s.sync_topic_configs_secs));
    line("topic ACLs", secs(s.sync_topic_acls_secs));
    line(
        "checkpoints",
        match (s.emit_checkpoints_secs, s.checkpoints_capture_ms) {
            (Some(n), Some(ms)) if ms < n.saturating_mul(1000) => {
                format!("each change within {ms} ms into {}", s.checkpoints_topic)
            }
            (Some(n), _) => format!("every {n} s into {}", s.checkpoints_topic),
            (None, _) => "off".to_owned(),
        },
    );
    line("group offsets", secs(s.sync_group_offsets_secs));
    line(
        "offset syncs",
        match &s.offset_syncs_topic {
            Some(t) => format!("{t}, offset.lag.max {}", s.offset_lag_max),
            None => "off".to_owned(),
        },
    );
    line(
        "reads",
        format!(
            "{}, from {} when never mirrored, {} in flight",
            s.isolation_level,
            s.start,
            crate::format::bytes(s.max_bytes_in_flight as f64)
        ),
    );
    if let Some(now) = &row.now {
        match (&now.topics, &now.groups, &now.error) {
            (Some(topics), Some(groups), _) => {
                let list: Vec<String> = topics
                    .iter()
                    .map(|t| format!("{} -> {} ({}p)", t.topic, t.remote, t.partitions))
                    .collect();
                line(
                    "topics now",
                    format!("{}: {}", topics.len(), list.join(", ")),
                );
                line(
                    "groups now",
                    format!("{}: {}", groups.len(), groups.join(", ")),
                );
            }
            (_, _, error) => line(
                "now",
                format!("unknown: {}", error.as_deref().unwrap_or_default()),
            ),
        }
    }
}
