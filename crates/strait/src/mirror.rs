//! `strait mirror --until caught-up`: a one-shot copy. Every enabled flow copies until each
//! partition selected at start reaches the source end offset it had at start (read with the
//! flow's isolation level), then the command prints a summary per flow and exits: 0 when every
//! flow caught up and nothing was lost, non-zero when records were lost on the source, a flow
//! failed, or the copy was interrupted.
//!
//! The flows are started and run by the runtime `strait run` uses (`strait_runtime`'s
//! `OneShotCopy`); this adds the progress display (`progress.rs`) and the summary.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::json;
use strait_kafka::admin::{IsolationLevel, OffsetSpec};
use strait_kafka::TopicPartition;
use strait_wire::offset_map::SourcePartition;

use strait_runtime::{FlowOutcome, OneShotCopy, StartedFlow};

use crate::progress::{self, End, Goal, Tracked, View};

/// `strait mirror`.
#[derive(Debug, clap::Args)]
pub(crate) struct MirrorArgs {
    /// The MM2 properties file (`connect-mirror-maker.properties` style).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// When to stop. `caught-up`: once every partition selected at start has reached the
    /// source end offset it had at start.
    #[arg(long, value_enum, default_value_t = Until::CaughtUp)]
    until: Until,
    /// Where the HTTP API listens during the copy (`/healthz`, `/v1/translate`, ...), or
    /// `off`. Off by default: a one-shot copy rarely needs it, and a fixed port would collide
    /// with a `strait run` on the same host.
    #[arg(long, value_name = "HOST:PORT|off", default_value = "off", value_parser = crate::common::parse_listen)]
    listen: crate::common::Listen,
    /// Seconds between progress lines when stderr is not a terminal (in a terminal, bars show
    /// instead).
    #[arg(long, value_name = "SECONDS", default_value = "5", value_parser = parse_seconds)]
    progress_interval: Duration,
    /// The summary as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// `--until`: when a mirror stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Until {
    /// Every partition selected at start has reached the source end offset it had at start.
    CaughtUp,
}

fn parse_seconds(value: &str) -> Result<Duration, String> {
    value
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("{value}: give a number of seconds above 0, e.g. 5 or 0.5"))
}

/// Runs the copy, shows progress, prints the summary; an error when anything was lost, failed
/// or interrupted (after the summary).
pub(crate) async fn run(args: MirrorArgs) -> anyhow::Result<ExitCode> {
    // The only value for now: a new one must be handled here (this stops compiling).
    let Until::CaughtUp = args.until;
    let began = Instant::now();
    let copy = OneShotCopy::start(&args.config, args.listen.0).await?;
    let mut tracked = Vec::new();
    for started in copy.flows() {
        let goal = goal(started).await.with_context(|| {
            format!(
                "flow {}: cannot read the source end offsets",
                started.flow.name()
            )
        })?;
        tracing::info!(
            flow = %started.flow.name(),
            partitions = goal.partitions(),
            records = goal.total(),
            "copying until caught up"
        );
        tracked.push(Tracked {
            name: started.flow.name(),
            goal,
            map: started.flow.map_updates(),
            stats: started.flow.stats_updates(),
        });
    }
    let view = if std::io::stderr().is_terminal() {
        View::Bars
    } else {
        View::Lines(args.progress_interval)
    };
    let (ends, ends_rx) = tokio::sync::mpsc::unbounded_channel();
    let display = tokio::spawn(progress::report(tracked.clone(), view, ends_rx));
    let outcomes = copy
        .run(crate::signals::shutdown(), move |i, outcome| {
            let end = match &outcome.result {
                Ok(()) => End::CaughtUp,
                Err(e) => End::Failed(e.report()),
            };
            let _ = ends.send((i, end));
        })
        .await;
    // The display ends once every flow has (or the copy was interrupted).
    let _ = display.await;
    let summary = Summary::new(&tracked, &outcomes, began.elapsed());
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary.json())?);
    } else {
        print!("{}", summary.table());
    }
    summary.verdict()?;
    Ok(ExitCode::SUCCESS)
}

/// The partitions a flow copies and how far: from where each resumes (its map's end, or the
/// source's log start for a partition never mirrored) to the source end offset now. Only the
/// partitions the flow mirrors: those its remote topic has too.
async fn goal(started: &StartedFlow) -> anyhow::Result<Goal> {
    let map = Arc::clone(&started.flow.map_updates().borrow());
    let remote = started.target.refresh_metadata().await?;
    let mut partitions = Vec::new();
    for topic in started.flow.topics() {
        let remote_count = remote
            .topics
            .get(&topic.remote)
            .map_or(0, |t| t.partitions.len());
        let count = usize::try_from(topic.partitions)
            .unwrap_or(0)
            .min(remote_count);
        for p in 0..count {
            let p = i32::try_from(p).unwrap_or(i32::MAX);
            partitions.push(TopicPartition::new(&topic.source, p));
        }
    }
    let isolation = started.config.isolation_level;
    let reads = partitions.iter().map(|tp| {
        let map = &map;
        async move {
            let sp = SourcePartition::new(tp.topic.clone(), tp.partition);
            let end = started
                .source
                .list_offset(tp, OffsetSpec::Latest, isolation)
                .await
                .with_context(|| format!("{tp}: end offset"))?
                .offset;
            let start = match map.partition(&sp).and_then(|m| m.src_end()) {
                Some(start) => start,
                None => {
                    started
                        .source
                        .list_offset(tp, OffsetSpec::Earliest, IsolationLevel::ReadUncommitted)
                        .await
                        .with_context(|| format!("{tp}: log start offset"))?
                        .offset
                }
            };
            Ok::<_, anyhow::Error>((sp, start, end))
        }
    });
    let mut goal = Goal::default();
    for read in futures::future::join_all(reads).await {
        let (sp, start, end) = read?;
        goal.add(sp, start, end);
    }
    Ok(goal)
}

/// What the command prints at the end, one row per flow.
#[derive(Debug)]
struct Summary {
    rows: Vec<Row>,
    elapsed: Duration,
}

#[derive(Debug)]
struct Row {
    flow: String,
    /// `caught up`, `failed` or `interrupted`.
    result: &'static str,
    error: Option<String>,
    /// Source offsets of the goal accounted for, and the goal.
    done: u64,
    total: u64,
    records: u64,
    bytes: u64,
    lost: u64,
    duplicates: u64,
    elapsed: Duration,
}

impl Summary {
    fn new(tracked: &[Tracked], outcomes: &[FlowOutcome], elapsed: Duration) -> Summary {
        let rows = tracked
            .iter()
            .zip(outcomes)
            .map(|(flow, outcome)| {
                let snapshot = flow.snapshot();
                let (result, error, done) = match &outcome.result {
                    Ok(()) => ("caught up", None, snapshot.total),
                    Err(e) => {
                        let result = if outcome.interrupted {
                            "interrupted"
                        } else {
                            "failed"
                        };
                        (result, Some(e.report()), snapshot.done)
                    }
                };
                Row {
                    flow: outcome.name.clone(),
                    result,
                    error,
                    done,
                    total: snapshot.total,
                    records: outcome.stats.records,
                    bytes: outcome.stats.bytes,
                    lost: outcome.stats.lost_records,
                    duplicates: outcome.stats.duplicate_records,
                    elapsed: outcome.elapsed,
                }
            })
            .collect();
        Summary { rows, elapsed }
    }

    fn table(&self) -> String {
        let width = self
            .rows
            .iter()
            .map(|r| r.flow.len())
            .max()
            .unwrap_or(0)
            .max(4);
        let mut out = format!(
            "{:<width$}  {:<11}  {:>12}  {:>10}  {:>10}  {:>10}  {:>8}\n",
            "flow", "result", "records", "bytes", "lost", "duplicates", "duration"
        );
        for r in &self.rows {
            out.push_str(&format!(
                "{:<width$}  {:<11}  {:>12}  {:>10}  {:>10}  {:>10}  {:>8}\n",
                r.flow,
                r.result,
                crate::format::count(r.records),
                progress::bytes(r.bytes),
                crate::format::count(r.lost),
                crate::format::count(r.duplicates),
                progress::short_duration(r.elapsed),
            ));
        }
        for r in &self.rows {
            if let Some(e) = &r.error {
                out.push_str(&format!(
                    "{}: {} at {}/{} source offsets ({}%): {e}\n",
                    r.flow,
                    r.result,
                    r.done,
                    r.total,
                    progress::percent(r.done, r.total)
                ));
            }
            if r.lost > 0 {
                out.push_str(&format!(
                    "{}: {} records were deleted on the source before they were mirrored; the \
                     ranges are in the log (`records were deleted on the source`) and in the \
                     offset map (`strait map`)\n",
                    r.flow, r.lost
                ));
            }
        }
        out.push_str(&format!(
            "total {} in {}\n",
            if self.ok() {
                "caught up"
            } else {
                "NOT caught up cleanly"
            },
            progress::short_duration(self.elapsed)
        ));
        out
    }

    fn json(&self) -> serde_json::Value {
        json!({
            "ok": self.ok(),
            "duration_ms": self.elapsed.as_millis() as u64,
            "flows": self.rows.iter().map(|r| json!({
                "flow": r.flow,
                "result": r.result,
                "error": r.error,
                "source_offsets_done": r.done,
                "source_offsets_total": r.total,
                "records": r.records,
                "bytes": r.bytes,
                "lost_records": r.lost,
                "duplicate_records": r.duplicates,
                "duration_ms": r.elapsed.as_millis() as u64,
            })).collect::<Vec<_>>(),
        })
    }

    fn ok(&self) -> bool {
        self.rows.iter().all(|r| r.error.is_none() && r.lost == 0)
    }

    /// The exit: an error naming what went wrong, when anything did.
    fn verdict(&self) -> anyhow::Result<()> {
        let mut problems = Vec::new();
        for r in &self.rows {
            if r.error.is_some() {
                problems.push(format!("flow {} {}", r.flow, r.result));
            }
            if r.lost > 0 {
                problems.push(format!("flow {} lost {} records", r.flow, r.lost));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            anyhow::bail!("the copy did not complete cleanly: {}", problems.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strait_core::flow::FlowStats;
    use strait_wire::offset_map::OffsetMap;

    fn tracked(name: &str) -> Tracked {
        let mut goal = Goal::default();
        goal.add(SourcePartition::new("events", 0), 30, 60);
        Tracked {
            name: name.to_owned(),
            goal,
            map: tokio::sync::watch::channel(Arc::new(OffsetMap::new())).1,
            stats: tokio::sync::watch::channel(FlowStats::default()).1,
        }
    }

    fn outcome(name: &str, lost: u64, result: Result<(), strait_runtime::Error>) -> FlowOutcome {
        FlowOutcome {
            name: name.to_owned(),
            stats: FlowStats {
                records: 10,
                bytes: 161,
                lost_records: lost,
                ..FlowStats::default()
            },
            elapsed: Duration::from_millis(18),
            result,
            interrupted: false,
        }
    }

    #[test]
    fn a_clean_copy_exits_zero_and_a_loss_or_failure_does_not() {
        let clean = Summary::new(
            &[tracked("A->B")],
            &[outcome("A->B", 0, Ok(()))],
            Duration::from_secs(1),
        );
        assert!(clean.verdict().is_ok());
        assert!(
            clean.table().contains("total caught up in 1s"),
            "{}",
            clean.table()
        );

        let lost = Summary::new(
            &[tracked("A->B"), tracked("B->A")],
            &[
                outcome("A->B", 20, Ok(())),
                outcome(
                    "B->A",
                    0,
                    Err(strait_runtime::Error::FlowFailed {
                        flow: "B->A".into(),
                        source: strait_core::flow::FlowError::Diverged("no leader".into()),
                    }),
                ),
            ],
            Duration::from_secs(1),
        );
        let error = lost.verdict().unwrap_err().to_string();
        assert!(error.contains("flow A->B lost 20 records"), "{error}");
        assert!(error.contains("flow B->A failed"), "{error}");
        let table = lost.table();
        let row: Vec<&str> = table
            .lines()
            .find(|l| l.starts_with("A->B "))
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(
            row,
            ["A->B", "caught", "up", "10", "161", "B", "20", "0", "18ms"]
        );
        assert!(
            table.contains("B->A: failed at 0/30 source offsets (0%): flow B->A failed: no leader"),
            "{table}"
        );
        let json = lost.json();
        assert_eq!(json["ok"], false);
        assert_eq!(json["flows"][0]["lost_records"], 20);
        assert_eq!(json["flows"][1]["result"], "failed");
    }
}
