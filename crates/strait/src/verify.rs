//! `strait verify`: every partition a flow's offset map accounts for, compared record by record
//! between source and target (`strait_core::verify`), with a report a change board can file:
//! a text summary or `--json`, progress lines on stderr, a rate limit, and a state file to
//! resume an interrupted run. Exit 0 identical, 3 differences, 1 an error.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt as _;
use serde::{Deserialize, Serialize};
use strait_core::config::{FlowConfig, StraitConfig};
use strait_core::filter::PatternList;
use strait_core::internal::map_store::MapStore;
use strait_core::verify::{self, Ends, Limiter, PartitionJob, ReadOptions, Tally};
use strait_kafka::TopicPartition;
use strait_wire::offset_map::OffsetMap;

use crate::format;

/// `strait verify` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct VerifyArgs {
    /// The MM2 properties file.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Only this flow, `SOURCE->TARGET` (quote it in a shell: 'A->B'); every enabled flow
    /// without it.
    #[arg(long, value_name = "FLOW")]
    flow: Option<String>,
    /// Only the source topics matching this pattern (MM2's list syntax: regular expressions
    /// matching the whole name, comma-separated).
    #[arg(long, value_name = "RE")]
    topics: Option<String>,
    /// The report as JSON on stdout instead of text.
    #[arg(long)]
    json: bool,
    /// Read at most this many MB (10^6 bytes) per second, source and target together.
    #[arg(long, value_name = "MB")]
    max_mb_per_s: Option<f64>,
    /// Keep each partition's progress in this file, and resume from it: partitions it says are
    /// done are not read again, the others continue where they stopped.
    #[arg(long, value_name = "FILE")]
    state: Option<PathBuf>,
    /// Partitions compared at the same time (each reads its source and target side by side).
    #[arg(long, value_name = "N", default_value_t = 4)]
    parallel: usize,
    /// Seconds between progress lines on stderr.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    progress_interval: f64,
}

/// What the state file holds: per partition (`FLOW topic-partition`), its tally and whether it
/// is done.
#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    partitions: BTreeMap<String, SavedPartition>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedPartition {
    done: bool,
    tally: Tally,
}

impl State {
    fn load(path: &Path) -> anyhow::Result<State> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .with_context(|| format!("the state file {} does not read", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State::default()),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// Writes the whole file anew and renames it into place, so a kill leaves the old one or
    /// the new one.
    fn save(&self, path: &Path) -> anyhow::Result<()> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
    }
}

/// One partition of the report.
#[derive(Debug, Serialize)]
struct PartitionRow {
    flow: String,
    topic: String,
    partition: i32,
    remote_topic: String,
    /// `identical`, `differences` or `error`.
    status: &'static str,
    /// The source offsets compared: `[from, to)`.
    source_from: i64,
    source_to: i64,
    /// The target offsets compared: `[from, to)`; `null` when the map maps none.
    target_from: Option<i64>,
    target_to: Option<i64>,
    #[serde(flatten)]
    tally: Tally,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// The sums over every partition.
#[derive(Debug, Default, Serialize)]
struct Totals {
    partitions: usize,
    partitions_with_differences: usize,
    partitions_with_errors: usize,
    identical: u64,
    missing: u64,
    extra: u64,
    differing: u64,
    gone_on_source: u64,
    aborted_on_source: u64,
    aborted_on_target: u64,
}

/// The whole report, `--json`.
#[derive(Debug, Serialize)]
struct Report {
    /// `identical`, `differences`, `error`, or `nothing_compared` (no partition matched).
    result: &'static str,
    config: String,
    flows: Vec<String>,
    started: String,
    finished: String,
    seconds: f64,
    bytes_read: u64,
    totals: Totals,
    partitions: Vec<PartitionRow>,
}

/// A partition to compare, with its flow.
struct Job {
    flow: String,
    key: String,
    job: PartitionJob,
}

/// Runs `strait verify`.
pub(crate) async fn run(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let config = StraitConfig::load(&args.config)?;
    let flows: Vec<&FlowConfig> = match &args.flow {
        Some(name) => vec![crate::clusters::find_flow(&config, name)?],
        None => config.flows.iter().collect(),
    };
    let topics = checked_args(&args)?;
    let mut state = match &args.state {
        Some(path) => State::load(path)?,
        None => State::default(),
    };
    let (started, _) = verify::now_utc();
    let clock = Instant::now();
    let limiter = Arc::new(Limiter::new(args.max_mb_per_s.map(|mb| mb * 1e6)));
    let mut rows = Vec::new();
    let mut progress = Progress::new(Duration::from_secs_f64(args.progress_interval));
    for flow in &flows {
        let (source, target) = crate::clusters::connect_both(&config, flow).await?;
        let map = MapStore::read(&target, flow.source_alias.as_str())
            .await
            .with_context(|| format!("cannot read the offset map of {}", flow.name()))?;
        let jobs = jobs(flow, &map, topics.as_ref());
        progress.total += jobs
            .iter()
            .map(|j| u64::try_from(j.job.source_to - j.job.source_from).unwrap_or(0))
            .sum::<u64>();
        // Up to --parallel partitions at a time, polled by this task: the state and the
        // progress lines are shared through locks held only between awaits.
        let shared = Mutex::new((&mut state, &mut progress, Instant::now()));
        let flow_name = flow.name();
        let compared: Vec<anyhow::Result<(usize, PartitionRow)>> =
            futures::stream::iter(jobs.into_iter().enumerate())
                .map(|(i, job)| {
                    let (shared, source, target, limiter) = (&shared, &source, &target, &limiter);
                    let (flow_name, state_path) = (flow_name.as_str(), args.state.as_deref());
                    async move {
                        let saved = lock(shared).0.partitions.get(&job.key).cloned();
                        let (tally, error, ends) = match saved {
                            Some(saved) if saved.done => (saved.tally, None, None),
                            saved => {
                                let tally = saved.map(|s| s.tally).unwrap_or_default();
                                let mut last = None;
                                let result = verify::verify_partition(
                                    source,
                                    target,
                                    &job.job,
                                    tally,
                                    limiter,
                                    ReadOptions::default(),
                                    |tally, ends| {
                                        last = Some(ends);
                                        let mut guard = lock(shared);
                                        let (state, progress, last_saved) = &mut *guard;
                                        progress.show(flow_name, &job.job, tally, limiter);
                                        let Some(path) = state_path else { return };
                                        if last_saved.elapsed() >= Duration::from_secs(2) {
                                            *last_saved = Instant::now();
                                            state.partitions.insert(
                                                job.key.clone(),
                                                SavedPartition {
                                                    done: false,
                                                    tally: tally.clone(),
                                                },
                                            );
                                            if let Err(e) = state.save(path) {
                                                eprintln!("strait verify: {e:#}");
                                            }
                                        }
                                    },
                                )
                                .await;
                                match result {
                                    Ok(tally) => {
                                        let mut guard = lock(shared);
                                        guard.0.partitions.insert(
                                            job.key.clone(),
                                            SavedPartition {
                                                done: true,
                                                tally: tally.clone(),
                                            },
                                        );
                                        if let Some(path) = state_path {
                                            guard.0.save(path)?;
                                        }
                                        (tally, None, last)
                                    }
                                    Err(e) => (Tally::default(), Some(e.to_string()), last),
                                }
                            }
                        };
                        lock(shared).1.finished(&job.job);
                        Ok((i, row(job, tally, error, ends)))
                    }
                })
                .buffer_unordered(args.parallel.max(1))
                .collect()
                .await;
        let mut compared = compared.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
        compared.sort_by_key(|(i, _)| *i);
        rows.extend(compared.into_iter().map(|(_, row)| row));
    }
    let (finished, _) = verify::now_utc();
    let report = report(
        &args.config,
        &flows,
        rows,
        started,
        finished,
        clock,
        &limiter,
    );
    print_report(&report, args.json)
}

/// Prints `report` (`--json` or text) and gives the exit code of its result: 0 identical (or
/// nothing compared), 3 differences, 1 errors.
fn print_report(report: &Report, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        print_text(report);
    }
    Ok(match report.result {
        "identical" | "nothing_compared" => ExitCode::SUCCESS,
        "differences" => ExitCode::from(3),
        _ => ExitCode::FAILURE,
    })
}

/// The `--topics` filter, once the numbers given are checked.
fn checked_args(args: &VerifyArgs) -> anyhow::Result<Option<PatternList>> {
    let topics = args
        .topics
        .as_deref()
        .map(|t| PatternList::parse(t).context("--topics"))
        .transpose()?;
    if !(args.progress_interval.is_finite() && args.progress_interval > 0.0) {
        anyhow::bail!("--progress-interval: a number of seconds above 0");
    }
    if let Some(mb) = args.max_mb_per_s {
        if !(mb.is_finite() && mb > 0.0) {
            anyhow::bail!("--max-mb-per-s: a number above 0, not {mb}");
        }
    }
    Ok(topics)
}

/// The partitions of `flow`'s map that `topics` selects, each with the range to compare.
fn jobs(flow: &FlowConfig, map: &OffsetMap, topics: Option<&PatternList>) -> Vec<Job> {
    map.iter()
        .filter(|(p, _)| topics.is_none_or(|t| t.matches(&p.topic)))
        .filter_map(|(p, pmap)| {
            let job = PartitionJob::from_map(
                TopicPartition::new(p.topic.clone(), p.partition),
                TopicPartition::new(flow.remote_topic(&p.topic), p.partition),
                pmap,
            )?;
            Some(Job {
                flow: flow.name(),
                key: format!("{} {p}", flow.name()),
                job,
            })
        })
        .collect()
}

/// `mutex` locked; a panic elsewhere while it was held does not stop the report.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn row(job: Job, tally: Tally, error: Option<String>, ends: Option<Ends>) -> PartitionRow {
    let status = if error.is_some() {
        "error"
    } else if tally.has_differences() {
        "differences"
    } else {
        "identical"
    };
    let p = job.job;
    PartitionRow {
        flow: job.flow,
        topic: p.source.topic,
        partition: p.source.partition,
        remote_topic: p.target.topic,
        status,
        source_from: p.source_from,
        source_to: ends.map_or(p.source_to, |e| e.source),
        target_from: p.target_from,
        target_to: p
            .target_from
            .map(|_| ends.map_or(tally.next_target, |e| e.target)),
        tally,
        error,
    }
}

fn report(
    config: &Path,
    flows: &[&FlowConfig],
    partitions: Vec<PartitionRow>,
    started: String,
    finished: String,
    clock: Instant,
    limiter: &Limiter,
) -> Report {
    let mut totals = Totals {
        partitions: partitions.len(),
        ..Totals::default()
    };
    for p in &partitions {
        let t = &p.tally;
        totals.identical += t.identical;
        totals.missing += t.missing;
        totals.extra += t.extra;
        totals.differing += t.differing;
        totals.gone_on_source += t.gone_on_source;
        totals.aborted_on_source += t.aborted_on_source;
        totals.aborted_on_target += t.aborted_on_target;
        match p.status {
            "error" => totals.partitions_with_errors += 1,
            "differences" => totals.partitions_with_differences += 1,
            _ => {}
        }
    }
    let result = if totals.partitions_with_errors > 0 {
        "error"
    } else if totals.partitions_with_differences > 0 {
        "differences"
    } else if totals.partitions == 0 {
        "nothing_compared"
    } else {
        "identical"
    };
    Report {
        result,
        config: config.display().to_string(),
        flows: flows.iter().map(|f| f.name()).collect(),
        started,
        finished,
        seconds: clock.elapsed().as_secs_f64(),
        bytes_read: limiter.bytes_read(),
        totals,
        partitions,
    }
}

fn print_text(r: &Report) {
    println!("strait verify of {}", r.config);
    println!("flows:    {}", r.flows.join(", "));
    println!("started:  {}", r.started);
    println!(
        "finished: {} ({}, {} read)",
        r.finished,
        format::elapsed(Duration::from_secs_f64(r.seconds)),
        format::bytes(r.bytes_read as f64)
    );
    println!();
    let mut table = crate::table::Table::new(&[
        "FLOW",
        "PARTITION",
        "SOURCE OFFSETS",
        "TARGET OFFSETS",
        "IDENTICAL",
        "MISSING",
        "EXTRA",
        "DIFFERING",
        "GONE ON SOURCE",
        "ABORTED",
        "STATUS",
    ]);
    for p in &r.partitions {
        let t = &p.tally;
        table.row(vec![
            p.flow.clone(),
            format!("{}-{}", p.topic, p.partition),
            format!("{}..{}", p.source_from, p.source_to),
            match (p.target_from, p.target_to) {
                (Some(from), Some(to)) => format!("{from}..{to}"),
                _ => "-".to_owned(),
            },
            t.identical.to_string(),
            t.missing.to_string(),
            t.extra.to_string(),
            t.differing.to_string(),
            t.gone_on_source.to_string(),
            (t.aborted_on_source + t.aborted_on_target).to_string(),
            p.status.to_owned(),
        ]);
    }
    if r.partitions.is_empty() {
        println!("(no offset map yet: nothing has been mirrored with this config)");
    } else {
        table.print();
    }
    print_differences(r);
    let t = &r.totals;
    println!();
    println!(
        "{} compared: {} records identical, {} missing on the target, {} extra on the \
         target, {} differing.",
        format::things(t.partitions, "partition"),
        format::count(t.identical),
        format::count(t.missing),
        format::count(t.extra),
        format::count(t.differing)
    );
    println!(
        "Not compared: {} mirrored records no longer on the source (compacted or deleted \
         there); passed over: {} records of aborted transactions on the source, {} on the target.",
        format::count(t.gone_on_source),
        format::count(t.aborted_on_source),
        format::count(t.aborted_on_target)
    );
    println!(
        "Result: {}",
        match r.result {
            "identical" => "IDENTICAL".to_owned(),
            "nothing_compared" => {
                "NOTHING COMPARED (no partition of an offset map matched)".to_owned()
            }
            "differences" => format!(
                "DIFFERENCES in {}",
                format::things(t.partitions_with_differences, "partition")
            ),
            _ => format!(
                "ERROR: {} could not be verified",
                format::things(t.partitions_with_errors, "partition")
            ),
        }
    );
}

/// Each partition's error, and its differences with examples.
fn print_differences(r: &Report) {
    for p in &r.partitions {
        let t = &p.tally;
        if let Some(e) = &p.error {
            println!("\n{} {}-{}: error: {e}", p.flow, p.topic, p.partition);
        }
        if !t.has_differences() {
            continue;
        }
        println!(
            "\n{} {}-{} -> {}-{}:",
            p.flow, p.topic, p.partition, p.remote_topic, p.partition
        );
        print_examples("missing on the target", t.missing, &t.missing_examples);
        print_examples("extra on the target", t.extra, &t.extra_examples);
        print_examples("differing", t.differing, &t.differing_examples);
    }
}

/// One kind of difference of a partition: its count and the examples kept.
fn print_examples(what: &str, n: u64, examples: &[verify::Example]) {
    if n == 0 {
        return;
    }
    let shown: Vec<String> = examples
        .iter()
        .map(|e| {
            let fields = if e.fields.is_empty() {
                String::new()
            } else {
                format!(" ({})", e.fields.join(", "))
            };
            match (e.source_offset, e.target_offset) {
                (Some(s), Some(t)) => format!("source {s} -> target {t}{fields}"),
                (Some(s), None) => format!("source {s} (in a gap of the map)"),
                (None, Some(t)) => format!("target {t}"),
                (None, None) => "-".to_owned(),
            }
        })
        .collect();
    let more = if n > examples.len() as u64 {
        format!(", and {} more", format::count(n - examples.len() as u64))
    } else {
        String::new()
    };
    println!(
        "  {what} ({}): {}{more}",
        format::count(n),
        shown.join("; ")
    );
}

/// Progress lines on stderr, at most one per interval.
struct Progress {
    every: Duration,
    last: Instant,
    started: Instant,
    /// Source offsets of every partition to compare.
    total: u64,
    /// Source offsets of the partitions finished.
    finished: u64,
    /// Source offsets compared so far of the partitions under way, by source partition.
    under_way: BTreeMap<TopicPartition, u64>,
}

impl Progress {
    fn new(every: Duration) -> Self {
        Progress {
            every,
            last: Instant::now(),
            started: Instant::now(),
            total: 0,
            finished: 0,
            under_way: BTreeMap::new(),
        }
    }

    fn span(job: &PartitionJob) -> u64 {
        u64::try_from(job.source_to - job.source_from).unwrap_or(0)
    }

    fn show(&mut self, flow: &str, job: &PartitionJob, tally: &Tally, limiter: &Limiter) {
        let within = u64::try_from(tally.next_source - job.source_from)
            .unwrap_or(0)
            .min(Self::span(job));
        self.under_way.insert(job.source.clone(), within);
        if self.last.elapsed() < self.every {
            return;
        }
        self.last = Instant::now();
        let done = self.finished + self.under_way.values().sum::<u64>();
        let seconds = self.started.elapsed().as_secs_f64().max(1e-3);
        eprintln!(
            "verify {flow}: {}/{} source offsets ({}%), {} read at {}/s; {} at source offset {} \
             of {}; {} missing, {} extra, {} differing so far",
            format::count(done),
            format::count(self.total),
            crate::progress::percent(done, self.total),
            format::bytes(limiter.bytes_read() as f64),
            format::bytes(limiter.bytes_read() as f64 / seconds),
            job.source,
            tally.next_source,
            job.source_to,
            format::count(tally.missing),
            format::count(tally.extra),
            format::count(tally.differing),
        );
    }

    fn finished(&mut self, job: &PartitionJob) {
        self.under_way.remove(&job.source);
        self.finished += Self::span(job);
    }
}
