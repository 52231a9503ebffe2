//! Progress of a one-shot copy (`strait mirror`), read beside the running flows without
//! touching them: per flow, the source offsets the persisted offset map accounts for
//! (`Flow::map_updates`), against the source end offsets its partitions had at start, and the
//! bytes written (`Flow::stats_updates`).
//!
//! In a terminal: one indicatif bar per flow (records, bytes, rate, ETA), with log lines printed
//! above the bars. Elsewhere: one `info` log line per flow every few seconds, and a final line
//! per flow (`caught up`, `failed` or `interrupted`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use strait_core::flow::FlowStats;
use strait_wire::offset_map::{OffsetMap, SourcePartition};
use tokio::sync::{mpsc, watch};

use crate::format::count;

/// What a flow has to copy: per source partition, the source offsets `[start, end)` from
/// where the flow resumed to the source end at start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Goal {
    partitions: BTreeMap<SourcePartition, (i64, i64)>,
}

impl Goal {
    /// Adds a partition to copy from `start` to `end` (nothing when `end <= start`).
    pub(crate) fn add(&mut self, partition: SourcePartition, start: i64, end: i64) {
        self.partitions.insert(partition, (start, end.max(start)));
    }

    /// How many partitions.
    pub(crate) fn partitions(&self) -> usize {
        self.partitions.len()
    }

    /// Source offsets to copy in all.
    pub(crate) fn total(&self) -> u64 {
        self.partitions
            .values()
            .map(|(start, end)| (end - start).unsigned_abs())
            .sum()
    }

    /// Source offsets of the goal the map accounts for (mirrored, lost, or nothing to mirror:
    /// transaction markers, aborted transactions, compaction holes).
    pub(crate) fn done(&self, map: &OffsetMap) -> u64 {
        self.partitions
            .iter()
            .map(|(sp, (start, end))| {
                let reached = map
                    .partition(sp)
                    .and_then(|m| m.src_end())
                    .unwrap_or(*start);
                (reached.clamp(*start, *end) - start).unsigned_abs()
            })
            .sum()
    }
}

/// One flow, as the progress display follows it.
#[derive(Debug, Clone)]
pub(crate) struct Tracked {
    /// `A->B`.
    pub(crate) name: String,
    /// What it has to copy.
    pub(crate) goal: Goal,
    /// Its map as last persisted.
    pub(crate) map: watch::Receiver<Arc<OffsetMap>>,
    /// Its counters as of the last round.
    pub(crate) stats: watch::Receiver<FlowStats>,
}

/// Where a flow stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Snapshot {
    /// Source offsets of the goal accounted for.
    pub(crate) done: u64,
    /// Source offsets of the goal.
    pub(crate) total: u64,
    /// Counters (records and bytes written, lost, duplicates).
    pub(crate) stats: FlowStats,
}

impl Tracked {
    /// Where the flow stands now.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let map = Arc::clone(&self.map.borrow());
        Snapshot {
            done: self.goal.done(&map),
            total: self.goal.total(),
            stats: *self.stats.borrow(),
        }
    }
}

/// How a flow's copy ended, as the display shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum End {
    /// Every partition reached its end.
    CaughtUp,
    /// The flow stopped with this error.
    Failed(String),
}

/// How progress is shown.
#[derive(Debug, Clone, Copy)]
pub(crate) enum View {
    /// indicatif bars on stderr (a terminal).
    Bars,
    /// A log line per flow this often.
    Lines(Duration),
}

/// Shows progress until every flow has ended (reported on `ends` as `(flow index, end)`) or
/// `ends` closes (the copy was interrupted: flows not ended are shown as interrupted).
pub(crate) async fn report(
    flows: Vec<Tracked>,
    view: View,
    mut ends: mpsc::UnboundedReceiver<(usize, End)>,
) {
    let started = Instant::now();
    let mut display = match view {
        View::Bars => Display::bars(&flows),
        View::Lines(_) => Display::Lines,
    };
    let every = match view {
        View::Bars => Duration::from_millis(100),
        View::Lines(every) => every,
    };
    let mut ended = vec![false; flows.len()];
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while ended.contains(&false) {
        tokio::select! {
            end = ends.recv() => match end {
                Some((i, end)) => {
                    if let (Some(flow), Some(done)) = (flows.get(i), ended.get_mut(i)) {
                        display.end(i, flow, Some(&end), started.elapsed());
                        *done = true;
                    }
                }
                None => break,
            },
            _ = tick.tick() => {
                for (i, flow) in flows.iter().enumerate() {
                    if !ended[i] {
                        display.show(i, flow, started.elapsed());
                    }
                }
            }
        }
    }
    for (i, flow) in flows.iter().enumerate() {
        if !ended[i] {
            display.end(i, flow, None, started.elapsed());
        }
    }
    display.close();
}

/// The display itself.
enum Display {
    Bars {
        bars: Vec<ProgressBar>,
        multi: MultiProgress,
    },
    Lines,
}

impl std::fmt::Debug for Display {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Display::Bars { .. } => "Display::Bars",
            Display::Lines => "Display::Lines",
        })
    }
}

impl Display {
    fn bars(flows: &[Tracked]) -> Display {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let style = bar_style("cyan", true);
        let width = flows.iter().map(|f| f.name.len()).max().unwrap_or(0);
        let bars = flows
            .iter()
            .map(|flow| {
                let snapshot = flow.snapshot();
                let bar = ProgressBar::new(snapshot.total)
                    .with_style(style.clone())
                    .with_prefix(format!("{:<width$}", flow.name))
                    .with_position(snapshot.done)
                    .with_message(bytes(snapshot.stats.bytes));
                multi.add(bar)
            })
            .collect();
        show_logs_above(Some(multi.clone()));
        Display::Bars { bars, multi }
    }

    /// The periodic update.
    fn show(&mut self, i: usize, flow: &Tracked, elapsed: Duration) {
        let snapshot = flow.snapshot();
        match self {
            Display::Bars { bars, .. } => {
                if let Some(bar) = bars.get(i) {
                    bar.set_position(snapshot.done);
                    bar.set_message(bytes(snapshot.stats.bytes));
                }
            }
            Display::Lines => {
                let rate = rate(snapshot.done, elapsed);
                let eta = (rate > 0.0).then(|| {
                    Duration::from_secs_f64(
                        snapshot.total.saturating_sub(snapshot.done) as f64 / rate,
                    )
                });
                tracing::info!(
                    target: "strait::progress",
                    flow = %flow.name,
                    done = snapshot.done,
                    total = snapshot.total,
                    percent = percent(snapshot.done, snapshot.total),
                    bytes = snapshot.stats.bytes,
                    rate = rate.round() as u64,
                    eta_secs = eta.map(|d| d.as_secs()),
                    "{}",
                    line(&flow.name, &snapshot, rate, eta)
                );
            }
        }
    }

    /// The flow's final state: `end` is `None` when the copy was interrupted.
    fn end(&mut self, i: usize, flow: &Tracked, end: Option<&End>, elapsed: Duration) {
        let mut snapshot = flow.snapshot();
        if end == Some(&End::CaughtUp) {
            // Every partition's position passed its end: what the map may still trail by is
            // nothing to copy (e.g. a compacted batch whose last records are gone).
            snapshot.done = snapshot.total;
        }
        let verdict = match end {
            Some(End::CaughtUp) => "caught up".to_owned(),
            Some(End::Failed(e)) => format!("failed: {e}"),
            None => "interrupted".to_owned(),
        };
        let rate = rate(snapshot.done, elapsed).round() as u64;
        match self {
            Display::Bars { bars, .. } => {
                if let Some(bar) = bars.get(i) {
                    let (colour, verdict) = match end {
                        Some(End::CaughtUp) => ("green", "caught up"),
                        Some(End::Failed(_)) => ("red", "FAILED (see the log and the summary)"),
                        None => ("yellow", "interrupted"),
                    };
                    bar.set_style(bar_style(colour, false));
                    bar.set_position(snapshot.done);
                    let message = format!(
                        "{}, {verdict} in {} ({} rec/s)",
                        bytes(snapshot.stats.bytes),
                        short_duration(elapsed),
                        crate::format::rate(rate as f64)
                    );
                    if end == Some(&End::CaughtUp) {
                        bar.finish_with_message(message);
                    } else {
                        bar.abandon_with_message(message);
                    }
                }
            }
            Display::Lines => {
                let text = format!(
                    "mirror {}: {verdict}, {}/{} records ({}%), {} in {}, {} rec/s",
                    flow.name,
                    count(snapshot.done),
                    count(snapshot.total),
                    percent(snapshot.done, snapshot.total),
                    bytes(snapshot.stats.bytes),
                    short_duration(elapsed),
                    crate::format::rate(rate as f64),
                );
                let (done, total, bytes) = (snapshot.done, snapshot.total, snapshot.stats.bytes);
                let percent = percent(done, total);
                if end == Some(&End::CaughtUp) {
                    tracing::info!(
                        target: "strait::progress",
                        flow = %flow.name, done, total, percent, bytes, rate, caught_up = true,
                        "{text}"
                    );
                } else {
                    tracing::warn!(
                        target: "strait::progress",
                        flow = %flow.name, done, total, percent, bytes, rate, caught_up = false,
                        "{text}"
                    );
                }
            }
        }
    }

    fn close(self) {
        if let Display::Bars { multi, .. } = self {
            show_logs_above(None);
            // The finished bars stay on screen as the copy's record.
            drop(multi);
        }
    }
}

/// `A->B [=====>    ] 12,000/50,000 records (24%) 3.0 MiB 4,100/s eta 9s` while the copy runs
/// (`running`), the rate and ETA replaced by the message at the end.
fn bar_style(colour: &str, running: bool) -> ProgressStyle {
    let tail = if running {
        "{msg} {per_sec:0} eta {eta}"
    } else {
        "{msg}"
    };
    ProgressStyle::with_template(&format!(
        "{{prefix:.bold}} [{{bar:30.{colour}}}] {{human_pos}}/{{human_len}} records ({{percent}}%) {tail}"
    ))
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ")
}

/// `mirror A->B: 12,000/50,000 records (24%), 3.0 MiB, 4,100 rec/s, eta 9s`.
fn line(name: &str, s: &Snapshot, rate: f64, eta: Option<Duration>) -> String {
    let mut text = format!(
        "mirror {name}: {}/{} records ({}%), {}, {} rec/s, eta ",
        count(s.done),
        count(s.total),
        percent(s.done, s.total),
        bytes(s.stats.bytes),
        crate::format::rate(rate),
    );
    match eta {
        Some(eta) => text.push_str(&short_duration(eta)),
        None => text.push('?'),
    }
    text
}

/// Whole percent, rounded down (100 only when done), 100 for nothing to do.
pub(crate) fn percent(done: u64, total: u64) -> u64 {
    if total == 0 {
        return 100;
    }
    (u128::from(done.min(total)) * 100 / u128::from(total)) as u64
}

/// Records per second over `elapsed`.
fn rate(done: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        done as f64 / secs
    } else {
        0.0
    }
}

/// `3.0 MiB`, as every command prints sizes.
pub(crate) fn bytes(n: u64) -> String {
    crate::format::bytes(n as f64)
}

/// `850ms`, `9s`, `2m05s`, `1h02m`.
pub(crate) fn short_duration(d: Duration) -> String {
    crate::format::elapsed(d)
}

/// The bars log lines are printed above, while they show.
static BARS: Mutex<Option<MultiProgress>> = Mutex::new(None);

fn show_logs_above(bars: Option<MultiProgress>) {
    if let Ok(mut slot) = BARS.lock() {
        *slot = bars;
    }
}

/// stderr for log lines: while progress bars show, each line is printed above them (the bars
/// are cleared, the line written, the bars drawn again) instead of through them.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LogWriter;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> Self::Writer {
        LogWriter
    }
}

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // One call per log line (the formatter writes each line whole).
        let bars = BARS.lock().ok().and_then(|b| b.clone());
        match bars {
            Some(bars) => bars.suspend(|| std::io::stderr().write_all(buf))?,
            None => std::io::stderr().write_all(buf)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(p: i32) -> SourcePartition {
        SourcePartition::new("events", p)
    }

    #[test]
    fn done_counts_what_the_map_accounts_for_within_the_goal() {
        let mut goal = Goal::default();
        goal.add(sp(0), 10, 110); // resumes at 10, source end 100 further
        goal.add(sp(1), 0, 50); // never mirrored before
        goal.add(sp(2), 7, 7); // nothing to copy
        assert_eq!(goal.total(), 150);

        let mut map = OffsetMap::new();
        assert_eq!(goal.done(&map), 0);
        map.record(&sp(0), 0, 0, 40).unwrap();
        assert_eq!(goal.done(&map), 30, "offsets 10..40 of partition 0");
        map.record_lost(&sp(1), 0, 20).unwrap();
        map.record(&sp(1), 20, 0, 5).unwrap();
        assert_eq!(goal.done(&map), 30 + 25, "lost offsets are accounted for");
        // Past the end at start (records written since): capped at the goal.
        map.record(&sp(0), 40, 40, 500).unwrap();
        map.record(&sp(1), 25, 5, 100).unwrap();
        assert_eq!(goal.done(&map), goal.total());
    }

    #[test]
    fn lines_read_as_the_progress_of_a_copy() {
        let snapshot = Snapshot {
            done: 12_000,
            total: 50_000,
            stats: FlowStats {
                bytes: 3_100_000,
                ..FlowStats::default()
            },
        };
        assert_eq!(
            line("A->B", &snapshot, 4100.2, Some(Duration::from_secs(9))),
            "mirror A->B: 12,000/50,000 records (24%), 3.0 MiB, 4,100 rec/s, eta 9s"
        );
        assert_eq!(percent(49_999, 50_000), 99, "100% only when done");
        assert_eq!(percent(0, 0), 100);
        assert_eq!(short_duration(Duration::from_millis(850)), "850ms");
        assert_eq!(short_duration(Duration::from_secs(125)), "2m05s");
        assert_eq!(short_duration(Duration::from_secs(3720)), "1h02m");
    }
}
