//! `strait failover plan|apply` and `strait failback plan|apply`: consumer groups moved between
//! the clusters of a flow, planned from the exact offset map, reviewed, then applied
//! (`strait_core::offsets::plan`). This file reads arguments and prints tables and JSON.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::{Args, Subcommand};
use strait_core::config::StraitConfig;
use strait_core::offsets::plan::{
    self, ApplyOptions, ApplyReport, Direction, FailoverPlan, Outcome,
};
use strait_kafka::ClientConfig;

use crate::clusters::{client_config, connect, connect_both, find_flow, narrowing};

/// How long the origin cluster of an apply may take to answer before it counts as lost.
const ORIGIN_TIMEOUT: Duration = Duration::from_secs(5);

/// `strait failover ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum FailoverCommand {
    /// Plan moving the consumer groups of a flow `A->B` from A to B.
    ///
    /// Every group on A that the flow carries across (`groups` / `groups.exclude`, narrowed by
    /// --groups) with committed offsets on a mirrored topic. When A does not answer within 5 s
    /// (it is lost), each group's last checkpoint on B stands in for its committed offset on A
    /// (what it read after that checkpoint it reads again). Per partition:
    ///
    ///   SOURCE OFFSET   the group's committed offset on A (the next offset it reads there)
    ///   TARGET OFFSET   where it continues on B: the translation through the exact offset map
    ///   EXACT           yes: every record before TARGET OFFSET was read on A, none after it
    ///   DUPLICATES      records it would read twice: the group is already further on B and
    ///                   applying would move it back (blocked); otherwise 0
    ///   UNREPLICATED    records it read on A that are not on B yet (the recovery-point gap);
    ///                   if the flow mirrors them later, apply refuses the plan as stale
    ///   MISSING AHEAD   records it has not read that B will never have (lost on A before
    ///                   mirroring, or before the map's start)
    ///   TARGET NOW      the group's committed offset on B now (`-`: none); apply refuses a
    ///                   group that moved there since the plan
    ///   STATUS          ready, or blocked: the group is active on B, its committed offset on B
    ///                   is ahead, the topic is not mirrored, or the partition is not in the map
    ///
    /// A table by default; --json prints the plan (the file `failover apply` reads), --out
    /// writes it to a file.
    #[command(verbatim_doc_comment)]
    Plan(PlanArgs),
    /// Apply a failover plan: commit its target offsets into the same group ids on B.
    ///
    /// Per group: a group already at the planned offsets is left alone ("already applied"); a
    /// group is refused when it is active on B, moved on B since the plan, would move back, when
    /// the offset map now translates its offsets differently (stale plan: re-plan), or when A
    /// answers and the group is active there or its offsets there changed. If A does not answer
    /// within 5 s (lost), that is said and the groups go ahead. Exits non-zero if any group was
    /// refused.
    Apply(ApplyArgs),
    /// Is it safe to fail over now? What a failover of each flow would leave behind if its
    /// source were lost at this moment.
    ///
    /// Per flow and group:
    ///
    ///   data          records on A not yet on B, per partition, and how long the oldest has
    ///                 waited (the mirror's lag): lost with A
    ///   POSITION AGE  0 while the group's last checkpoint carries its position on A; else how
    ///                 old the oldest checkpoint behind it is (`N uncaught`: partitions it
    ///                 committed on with no checkpoint yet)
    ///   READ AGAIN    offsets it moved past on A since its last checkpoint: a plan made from
    ///                 the checkpoints (A lost) has it read them again
    ///   EXACT         yes: a failover now places it exactly where it is on A
    ///
    /// Exit status: 0 ready (nothing waits longer than --within, every position at most that
    /// old), 3 not ready, 4 a source did not answer (the check cannot tell what it holds; the
    /// positions shown are the checkpoints'), 1 an error (the target or config). With A
    /// answering, `failover plan` is exact whatever this says; this is for the day A stops.
    #[command(verbatim_doc_comment)]
    Check(crate::readiness::CheckArgs),
}

/// `strait failback ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum FailbackCommand {
    /// Plan moving the consumer groups of a flow `A->B` back from B to A.
    ///
    /// Every group on B (passing the flow's group filter and --groups) with committed offsets on
    /// the flow's remote topics; per partition, through the offset map read backwards:
    ///
    ///   TARGET OFFSET   the group's committed offset on B's remote topic
    ///   SOURCE OFFSET   where it continues on A, for the records that came from A
    ///   EXACT           yes: every record from A before SOURCE OFFSET was read on B, none after
    ///   DUPLICATES      records it would read twice: the group is already further on A and
    ///                   applying would move it back (blocked); otherwise 0
    ///   UNREPLICATED    records it read on B that A does not have (written on B after the
    ///                   failover): a B->A flow is needed to copy them
    ///   MISSING AHEAD   records on B ahead of the group that A does not have: it will not see
    ///                   them on A unless a B->A flow copies them
    ///   SOURCE NOW      the group's committed offset on A now (`-`: none)
    ///   STATUS          ready, or blocked: the group is active on A, ahead on A, or the
    ///                   partition is not in the map
    ///
    /// A table by default; --json prints the plan, --out writes it to a file.
    #[command(verbatim_doc_comment)]
    Plan(PlanArgs),
    /// Apply a failback plan: commit its source offsets into the same group ids on A, with the
    /// same checks as `failover apply` (B is the origin here).
    Apply(ApplyArgs),
}

/// Arguments of `failover plan` and `failback plan`.
#[derive(Debug, Args)]
pub(crate) struct PlanArgs {
    /// The MM2 properties file.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// The flow, as `A->B` (`source->target` aliases of the config).
    #[arg(long, value_name = "A->B")]
    flow: String,
    /// Only groups whose whole name matches (a comma-separated list of regexes, as `groups`).
    #[arg(long, value_name = "REGEX")]
    groups: Option<String>,
    /// Write the plan (JSON) to this file, for `apply`.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Print the plan as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Arguments of `failover apply` and `failback apply`.
#[derive(Debug, Args)]
pub(crate) struct ApplyArgs {
    /// The plan file written by `plan --out`.
    #[arg(value_name = "PLAN")]
    plan: PathBuf,
    /// The MM2 properties file; without it the clusters are reached at the bootstrap servers
    /// the plan recorded.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Check everything, write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) async fn failover(command: FailoverCommand) -> anyhow::Result<()> {
    match command {
        FailoverCommand::Plan(args) => plan(Direction::Failover, args).await,
        FailoverCommand::Apply(args) => apply(Direction::Failover, args).await,
        FailoverCommand::Check(args) => crate::readiness::check(args).await,
    }
}

pub(crate) async fn failback(command: FailbackCommand) -> anyhow::Result<()> {
    match command {
        FailbackCommand::Plan(args) => plan(Direction::Failback, args).await,
        FailbackCommand::Apply(args) => apply(Direction::Failback, args).await,
    }
}

async fn plan(direction: Direction, args: PlanArgs) -> anyhow::Result<()> {
    let config = StraitConfig::load(&args.config)?;
    let flow = find_flow(&config, &args.flow)?;
    let narrow = narrowing(args.groups.as_deref())?;
    let plan = match direction {
        Direction::Failover => {
            let target = connect(client_config(&config, flow.target.as_str())?, None)
                .await
                .with_context(|| format!("cannot reach target {}", flow.target))?;
            let source_config = client_config(&config, flow.source.as_str())?;
            let source_bootstrap = source_config.bootstrap.clone();
            // A lost source is what a failover is for: then the checkpoints on the target say
            // where each group was.
            match connect(source_config, Some(SOURCE_PATIENCE)).await {
                Ok(source) => plan::plan_failover(&source, &target, flow, narrow.as_ref()).await?,
                Err(e) => {
                    eprintln!(
                        "source cluster {} does not answer ({e:#}): planning from the checkpoints on {}",
                        flow.source, flow.target
                    );
                    plan::plan_failover_from_checkpoints(
                        &target,
                        flow,
                        source_bootstrap,
                        narrow.as_ref(),
                    )
                    .await?
                }
            }
        }
        Direction::Failback => {
            let (source, target) = connect_both(&config, flow).await?;
            plan::plan_failback(&source, &target, flow, narrow.as_ref()).await?
        }
    };
    if let Some(out) = &args.out {
        write_file(out, &plan.to_json())?;
    }
    if args.json {
        println!("{}", plan.to_json());
    } else {
        print_plan(&plan, args.out.as_deref());
    }
    Ok(())
}

async fn apply(direction: Direction, args: ApplyArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.plan)
        .with_context(|| format!("cannot read {}", args.plan.display()))?;
    let plan = FailoverPlan::from_json(&text).with_context(|| args.plan.display().to_string())?;
    if plan.direction != direction {
        bail!(
            "{} is a {} plan: apply it with `strait {} apply`",
            args.plan.display(),
            plan.direction,
            plan.direction
        );
    }
    // Without --config the plan's bootstrap servers are used, in PLAINTEXT: a secured cluster
    // needs the config for its TLS and SASL settings.
    let (source_bootstrap, target_bootstrap) = match &args.config {
        Some(path) => {
            let config = StraitConfig::load(path)?;
            let flow = find_flow(&config, &plan.flow)?;
            (
                client_config(&config, flow.source.as_str())?,
                client_config(&config, flow.target.as_str())?,
            )
        }
        None => (
            ClientConfig::new(plan.source.bootstrap_servers.clone()),
            ClientConfig::new(plan.target.bootstrap_servers.clone()),
        ),
    };
    let report = apply_with(
        &plan,
        source_bootstrap,
        target_bootstrap,
        args.dry_run,
        true,
    )
    .await?;
    finish(&report, args.json)
}

/// Applies `plan`: the destination must answer, the origin may be lost.
pub(crate) async fn apply_with(
    plan: &FailoverPlan,
    source_bootstrap: ClientConfig,
    target_bootstrap: ClientConfig,
    dry_run: bool,
    refuse_moved: bool,
) -> anyhow::Result<ApplyReport> {
    let (destination, origin) = match plan.direction {
        Direction::Failover => (&target_bootstrap, &source_bootstrap),
        Direction::Failback => (&source_bootstrap, &target_bootstrap),
    };
    let dest_alias = &plan.destination().alias;
    let destination = connect(destination.clone(), None)
        .await
        .with_context(|| format!("cannot reach {dest_alias}, where the plan writes"))?;
    let origin = match connect(origin.clone(), Some(ORIGIN_TIMEOUT)).await {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::debug!(
                cluster = %plan.origin().alias,
                error = format!("{e:#}"),
                "origin cluster does not answer; going ahead without checking it"
            );
            None
        }
    };
    let (source, target) = match plan.direction {
        Direction::Failover => (origin.as_ref(), Some(&destination)),
        Direction::Failback => (Some(&destination), origin.as_ref()),
    };
    let options = ApplyOptions {
        dry_run,
        refuse_moved,
    };
    Ok(plan::apply_plan(plan, source, target, options).await?)
}

/// Prints the report; an error if any group was refused.
pub(crate) fn finish(report: &ApplyReport, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        print_report(report);
    }
    let refused = report.refused();
    if refused > 0 {
        bail!(
            "{refused} of {} refused; nothing was written for them",
            count(report.groups.len(), "group")
        );
    }
    Ok(())
}

/// How long `failover plan` waits for the source before planning from checkpoints.
const SOURCE_PATIENCE: Duration = Duration::from_secs(5);

fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, format!("{text}\n"))
        .with_context(|| format!("cannot write {}", path.display()))
}

pub(crate) use crate::format::things as count;

/// An optional offset for a table.
fn cell(offset: Option<i64>) -> String {
    offset.map_or_else(|| "-".to_owned(), |o| o.to_string())
}

fn print_plan(plan: &FailoverPlan, out: Option<&Path>) {
    let failover = plan.direction == Direction::Failover;
    println!(
        "{} plan for flow {}, {} -> {}, made {}",
        plan.direction,
        plan.flow,
        plan.origin().alias,
        plan.destination().alias,
        plan.created_at
    );
    for note in &plan.notes {
        println!("note: {note}");
    }
    let mut table = Table::new(if failover {
        &[
            "GROUP",
            "SOURCE PARTITION",
            "SOURCE OFFSET",
            "TARGET PARTITION",
            "TARGET OFFSET",
            "EXACT",
            "DUPLICATES",
            "UNREPLICATED",
            "MISSING AHEAD",
            "TARGET NOW",
            "STATUS",
        ]
    } else {
        &[
            "GROUP",
            "TARGET PARTITION",
            "TARGET OFFSET",
            "SOURCE PARTITION",
            "SOURCE OFFSET",
            "EXACT",
            "DUPLICATES",
            "UNREPLICATED",
            "MISSING AHEAD",
            "SOURCE NOW",
            "STATUS",
        ]
    });
    for g in &plan.groups {
        for p in &g.partitions {
            let source = (
                format!("{}-{}", p.topic, p.partition),
                cell(p.source_offset),
            );
            let target = (
                format!("{}-{}", p.remote_topic, p.partition),
                cell(p.target_offset),
            );
            let (from, to) = if failover {
                (source, target)
            } else {
                (target, source)
            };
            let mut status = Vec::new();
            if let Some(b) = g.blocker.as_ref().or(p.blocker.as_ref()) {
                status.push(format!("blocked: {b}"));
            } else {
                status.push("ready".to_owned());
            }
            if !p.note.is_empty() {
                status.push(p.note.clone());
            }
            table.row(vec![
                g.group.clone(),
                from.0,
                from.1,
                to.0,
                to.1,
                if p.exact { "yes" } else { "no" }.to_owned(),
                p.duplicates.to_string(),
                p.unreplicated.to_string(),
                p.missing_ahead.to_string(),
                cell(p.committed_at_plan),
                status.join("; "),
            ]);
        }
    }
    println!();
    table.print();
    let (partitions, blocked) = plan.counts();
    println!();
    for g in &plan.groups {
        let origin_state = match plan.direction {
            Direction::Failover => g.source_state.as_deref(),
            Direction::Failback => g.target_state.as_deref(),
        };
        if let Some(state) = origin_state.filter(|s| !matches!(*s, "Empty" | "Dead" | "")) {
            println!(
                "note: group {} is active on {} (state {state}): apply refuses it until its \
                 consumers there stop",
                g.group,
                plan.origin().alias
            );
        }
    }
    if plan.groups.is_empty() {
        println!("no groups to move: none has committed offsets on the flow's topics");
        return;
    }
    println!(
        "{}, {}: {} ready, {blocked} blocked",
        count(plan.groups.len(), "group"),
        count(partitions, "partition"),
        partitions - blocked
    );
    match out {
        Some(path) => println!(
            "plan written to {}; apply it with: strait {} apply {}",
            path.display(),
            plan.direction,
            path.display()
        ),
        None => println!("write it with --out FILE to apply it"),
    }
}

fn print_report(report: &ApplyReport) {
    println!(
        "{} apply for flow {}{}: writing on {}",
        report.direction,
        report.flow,
        if report.dry_run { " (dry run)" } else { "" },
        report.destination
    );
    for note in &report.notes {
        println!("note: {note}");
    }
    let (mut applied, mut already, mut refused, mut dry) = (0, 0, 0, 0);
    for g in &report.groups {
        match g.outcome {
            Outcome::Applied => applied += 1,
            Outcome::AlreadyApplied => already += 1,
            Outcome::DryRun => dry += 1,
            Outcome::Refused { .. } => refused += 1,
        }
        println!("\ngroup {}: {}", g.group, g.outcome);
        let mut table = Table::new(&["PARTITION", "COMMITTED BEFORE", "PLANNED", ""]);
        for p in &g.partitions {
            let what = match (&p.skipped, &g.outcome) {
                (Some(why), _) => format!("skipped: {why}"),
                (None, Outcome::Applied) => "committed".to_owned(),
                (None, Outcome::DryRun) => "would commit".to_owned(),
                (None, _) => String::new(),
            };
            table.row(vec![
                format!("{}-{}", p.topic, p.partition),
                cell(p.committed_before),
                cell(p.planned),
                what,
            ]);
        }
        table.print_indented("  ");
    }
    println!(
        "\n{applied} applied, {already} already applied, {refused} refused{}",
        if report.dry_run {
            format!(", {dry} would apply")
        } else {
            String::new()
        }
    );
}

/// A text table: columns as wide as their widest cell; numbers right-aligned; the last
/// column free text.
struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    fn row(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    fn print(&self) {
        self.print_indented("");
    }

    fn print_indented(&self, indent: &str) {
        let columns = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        let mut numeric = vec![true; columns];
        for row in &self.rows {
            for (i, c) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(c.chars().count());
                numeric[i] &= c == "-" || c.parse::<i64>().is_ok();
            }
        }
        let line = |cells: &[String]| {
            let mut text = String::from(indent);
            for (i, c) in cells.iter().enumerate().take(columns) {
                let last = i + 1 == columns;
                if last {
                    text.push_str(c);
                } else if numeric[i] {
                    text.push_str(&format!("{c:>w$}  ", w = widths[i]));
                } else {
                    text.push_str(&format!("{c:<w$}  ", w = widths[i]));
                }
            }
            text.trim_end().to_owned()
        };
        println!("{}", line(&self.header));
        for row in &self.rows {
            println!("{}", line(row));
        }
    }
}
