//! `strait status`: one screen on a running `strait run`, read from its HTTP API
//! (`GET /v1/status`, `docs/http-api.md`): per flow its state, throughput, lag, lost records,
//! last error and consumer groups; per topic its partitions, lag in records and seconds,
//! throughput, lost records and last error. `--json` prints the API's answer; `--watch`
//! redraws in place every 2 s until Ctrl-C.
//!
//! When nothing answers at the address, it says so and exits non-zero.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use crate::endpoint::Endpoint;
use crate::format::{bytes, count, count_signed as count_i, duration, rate};
use strait_core::status::{ErrorNote, FlowState, FlowStatus, StatusReport, WorkerStatus};

/// How often `--watch` redraws.
const WATCH_EVERY: Duration = Duration::from_secs(2);
/// ANSI: cursor home, clear the screen.
const CLEAR: &str = "\x1b[H\x1b[2J";

/// `strait status` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct StatusArgs {
    /// The HTTP API of the running instance (`strait run --listen`, 127.0.0.1:9876 by default).
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:9876")]
    url: String,
    /// Print the `/v1/status` answer as JSON instead of a table (one line per refresh with
    /// `--watch`).
    #[arg(long)]
    json: bool,
    /// Redraw every 2 seconds until Ctrl-C.
    #[arg(long)]
    watch: bool,
}

/// Runs `strait status`.
pub(crate) async fn run(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let endpoint = Endpoint::parse(&args.url)?;
    // The first answer decides whether there is anything to show at all.
    let report = endpoint.status().await?;
    if !args.watch {
        if args.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            print!("{}", render(&args.url, &report));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let stop = tokio::signal::ctrl_c();
    tokio::pin!(stop);
    let mut answer = Ok(report);
    loop {
        match (&answer, args.json) {
            (Ok(report), true) => println!("{}", serde_json::to_string(report)?),
            (Ok(report), false) => print!(
                "{CLEAR}{}\nrefreshing every {} s; Ctrl-C to stop\n",
                render(&args.url, report),
                WATCH_EVERY.as_secs()
            ),
            (Err(e), true) => eprintln!("{e:#}"),
            (Err(e), false) => print!(
                "{CLEAR}strait at {}\n\n{e:#}\n\nretrying every {} s; Ctrl-C to stop\n",
                args.url,
                WATCH_EVERY.as_secs()
            ),
        }
        tokio::select! {
            _ = &mut stop => return Ok(ExitCode::SUCCESS),
            () = tokio::time::sleep(WATCH_EVERY) => {}
        }
        answer = endpoint.status().await;
    }
}

/// The screen for `report`.
fn render(url: &str, report: &StatusReport) -> String {
    let mut out = String::new();
    let flows = report.flows.len();
    let _ = writeln!(
        out,
        "strait at {url}: {flows} flow{}",
        if flows == 1 { "" } else { "s" }
    );
    for flow in &report.flows {
        out.push('\n');
        render_flow(&mut out, flow);
    }
    out
}

fn render_flow(out: &mut String, f: &FlowStatus) {
    render_state(out, f);
    if let Some(w) = &f.worker {
        render_worker(out, w);
    }
    render_counters(out, f);
    render_topics(out, f);
}

/// The flow's first line, and what its state says it waits for.
fn render_state(out: &mut String, f: &FlowStatus) {
    let state = f.state.name();
    let _ = writeln!(
        out,
        "{}  {}  up {}",
        f.flow,
        state.to_uppercase(),
        duration(f.uptime_seconds)
    );
    if f.state == FlowState::Waiting {
        let since = f.last_round_seconds_ago.unwrap_or(f.uptime_seconds);
        let _ = writeln!(
            out,
            "  waiting     no round finished for {}: a cluster is slow or not answering (see \
             the log); lag counts from the last fetch",
            duration(since)
        );
    }
    for u in &f.unreachable {
        let _ = writeln!(
            out,
            "  no answer   cluster {} broker {} for {} ({} attempts): {}",
            u.cluster,
            u.broker,
            duration(u.for_seconds),
            u.attempts,
            u.error
        );
    }
    if f.state == FlowState::Restarting {
        let _ = writeln!(
            out,
            "  restarting  in {}, from its offset map (see last error)",
            duration(f.restart_in_seconds.unwrap_or(0.0))
        );
    }
    if f.state == FlowState::Paused {
        let _ = writeln!(
            out,
            "  paused      on request; resume with `strait flow resume '{}'`",
            f.flow
        );
    }
}

/// The worker's line: its group, generation and units.
fn render_worker(out: &mut String, w: &WorkerStatus) {
    let role = if w.leader {
        format!("leader of {} members", w.members)
    } else {
        "member".to_owned()
    };
    let place = if w.generation < 0 {
        "owns no units (joining the group)".to_owned()
    } else {
        format!(
            "generation {}, {role}, runs {} of {} units: {}",
            w.generation,
            w.owned.len(),
            w.units,
            if w.owned.is_empty() {
                "none".to_owned()
            } else {
                w.owned.join(" ")
            }
        )
    };
    let _ = writeln!(out, "  worker      group {}: {place}", w.group);
}

/// Throughput, lag, groups and the last error.
fn render_counters(out: &mut String, f: &FlowStatus) {
    let _ = writeln!(
        out,
        "  throughput  {} rec/s  {}/s   mirrored {} records, {}",
        rate(f.records_per_second),
        bytes(f.bytes_per_second),
        count(f.records),
        bytes(f.bytes as f64)
    );
    let _ = writeln!(
        out,
        "  lag         {} record{}, {}   lost {}   duplicates {}",
        count_i(f.lag_records),
        if f.lag_records == 1 { "" } else { "s" },
        lag_seconds(f.lag_seconds),
        count(f.lost_records),
        count(f.duplicate_records)
    );
    let g = &f.groups;
    let checkpoints = if g.checkpoints_enabled {
        format!(
            "{} checkpointed{}",
            g.checkpointed,
            ago(" (pass ", g.last_checkpoint_seconds_ago, " ago)")
        )
    } else {
        "checkpoints off".to_owned()
    };
    let sync = if g.sync_enabled {
        format!(
            "{} synced, {} skipped{}",
            g.synced,
            g.sync_skipped,
            ago(" (pass ", g.last_sync_seconds_ago, " ago)")
        )
    } else {
        "group sync off".to_owned()
    };
    let _ = writeln!(out, "  groups      {checkpoints}   {sync}");
    if let Some(e) = &g.last_error {
        let _ = writeln!(out, "  groups err  {}", error(e, 100));
    }
    let _ = writeln!(
        out,
        "  last error  {}",
        f.last_error
            .as_ref()
            .map(|e| error(e, 100))
            .unwrap_or_else(|| "none".into())
    );
}

/// The table of the flow's topics.
fn render_topics(out: &mut String, f: &FlowStatus) {
    if f.topics.is_empty() {
        let _ = writeln!(out, "\n  no topics mirrored");
        return;
    }
    let header = [
        "TOPIC",
        "REMOTE",
        "PARTS",
        "LAG",
        "LAG TIME",
        "REC/S",
        "BYTES/S",
        "RECORDS",
        "LOST",
        "LAST ERROR",
    ];
    let rows: Vec<[String; 10]> = f
        .topics
        .iter()
        .map(|t| {
            [
                t.topic.clone(),
                t.remote_topic.clone(),
                match t.partitions.iter().filter(|p| p.blocked).count() {
                    0 => t.partitions.len().to_string(),
                    blocked => format!("{} ({blocked} blocked)", t.partitions.len()),
                },
                count_i(t.lag_records),
                lag_seconds(t.lag_seconds),
                rate(t.records_per_second),
                bytes(t.bytes_per_second),
                count(t.records),
                count(t.lost_records),
                t.last_error
                    .as_ref()
                    .map(|e| error(e, 60))
                    .unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    out.push('\n');
    let line = |cells: &[String]| {
        let mut l = String::from(" ");
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            // Names left, numbers right, the error last and unpadded.
            match i {
                0 | 1 => {
                    let _ = write!(l, " {cell:<w$}");
                }
                9 => {
                    let _ = write!(l, "  {cell}");
                }
                _ => {
                    let _ = write!(l, " {cell:>w$}");
                }
            }
        }
        l.trim_end().to_owned()
    };
    let _ = writeln!(out, "{}", line(&header.map(str::to_owned)));
    for row in &rows {
        let _ = writeln!(out, "{}", line(row));
    }
}

fn lag_seconds(s: Option<f64>) -> String {
    match s {
        Some(s) if s < 10.0 && s > 0.0 => format!("{s:.1}s"),
        Some(s) => duration(s),
        None => "unknown".into(),
    }
}

fn ago(before: &str, seconds: Option<f64>, after: &str) -> String {
    seconds
        .map(|s| format!("{before}{}{after}", duration(s)))
        .unwrap_or_default()
}

/// `message (12s ago)`, the message cut to `max` characters.
fn error(e: &ErrorNote, max: usize) -> String {
    let one_line = e.message.replace('\n', " ");
    let message = if one_line.chars().count() > max {
        let cut: String = one_line.chars().take(max.saturating_sub(3)).collect();
        format!("{cut}...")
    } else {
        one_line
    };
    format!("{message} ({} ago)", duration(e.seconds_ago))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lags_read_at_a_glance() {
        assert_eq!(lag_seconds(Some(0.0)), "0s");
        assert_eq!(lag_seconds(Some(2.345)), "2.3s");
        assert_eq!(lag_seconds(None), "unknown");
    }
}
