//! `strait failover plan` and `strait failback plan`: where each consumer group of a flow
//! continues on the other cluster, planned from the exact offset map
//! (`strait_core::offsets::plan`), printed as a table or JSON and written for `apply`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use strait_core::config::StraitConfig;
use strait_core::offsets::plan::{self, Direction, FailoverPlan};

use crate::clusters::{client_config, connect, connect_both, find_flow, narrowing};
use crate::format::things as count;
use crate::table::{cell, Table};

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

/// Runs `strait failover plan` or `strait failback plan`: plans, prints, writes the plan.
pub(crate) async fn run(direction: Direction, args: PlanArgs) -> anyhow::Result<ExitCode> {
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
    Ok(ExitCode::SUCCESS)
}

/// How long `failover plan` waits for the source before planning from checkpoints.
const SOURCE_PATIENCE: Duration = Duration::from_secs(5);

fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, format!("{text}\n"))
        .with_context(|| format!("cannot write {}", path.display()))
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
