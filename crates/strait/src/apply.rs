//! Applying a plan of group offsets: `strait failover apply`, `strait failback apply`, and
//! what `strait offsets import` applies (`offsets/import.rs`). The destination must answer;
//! the origin may be lost (`strait_core::offsets::plan::apply_plan` checks it when it
//! answers). The report is printed as a table or JSON.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::Args;
use strait_core::config::StraitConfig;
use strait_core::offsets::plan::{
    self, ApplyOptions, ApplyReport, Direction, FailoverPlan, Outcome,
};
use strait_kafka::ClientConfig;

use crate::clusters::{client_config, connect, find_flow};
use crate::format::things as count;
use crate::table::{cell, Table};

/// How long the origin cluster of an apply may take to answer before it counts as lost.
const ORIGIN_TIMEOUT: Duration = Duration::from_secs(5);

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

/// Runs `strait failover apply` or `strait failback apply`.
pub(crate) async fn run(direction: Direction, args: ApplyArgs) -> anyhow::Result<ExitCode> {
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
    let report = apply_plan(
        &plan,
        source_bootstrap,
        target_bootstrap,
        args.dry_run,
        true,
    )
    .await?;
    print(&report, args.json)
}

/// Applies `plan`: the destination must answer, the origin may be lost.
pub(crate) async fn apply_plan(
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
pub(crate) fn print(report: &ApplyReport, json: bool) -> anyhow::Result<ExitCode> {
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
    Ok(ExitCode::SUCCESS)
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
