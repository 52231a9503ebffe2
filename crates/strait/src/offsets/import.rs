//! `strait offsets import`: an offsets file (`export.rs`'s JSON or CSV, or one in its format)
//! applied to its destination with the checks of `failover apply` (`apply.rs`), except that a
//! group moved since the file was made is refused only when it is ahead of the file.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use clap::Args;
use strait_core::config::StraitConfig;
use strait_core::offsets::plan::{ClusterRef, FailoverPlan};

use super::csv::{self, Format};
use crate::apply::apply_plan;
use crate::clusters::{bootstrap, client_config, find_flow};

/// Arguments of `offsets import`.
#[derive(Debug, Args)]
pub(crate) struct ImportArgs {
    /// The file `offsets export` wrote (or one in its format).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// The MM2 properties file: where the clusters are.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// `json` or `csv`; default from the file's extension (`.csv` is CSV, anything else JSON).
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// Check everything, write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `strait offsets import`.
pub(crate) async fn run(args: ImportArgs) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let format = args.format.unwrap_or_else(|| Format::of(&args.file));
    let config = StraitConfig::load(&args.config)?;
    let plan = match format {
        Format::Json => {
            FailoverPlan::from_json(&text).with_context(|| args.file.display().to_string())?
        }
        Format::Csv => {
            let rows = csv::from_csv(&text).with_context(|| args.file.display().to_string())?;
            let Some(first) = rows.first() else {
                bail!("{} has no rows", args.file.display());
            };
            let flow = find_flow(&config, &first.flow)?;
            let cluster = |alias: &str| -> anyhow::Result<ClusterRef> {
                Ok(ClusterRef {
                    alias: alias.to_owned(),
                    bootstrap_servers: bootstrap(&config, alias)?,
                    cluster_id: None,
                })
            };
            FailoverPlan::from_rows(
                rows,
                flow,
                cluster(flow.source.as_str())?,
                cluster(flow.target.as_str())?,
            )
            .with_context(|| args.file.display().to_string())?
        }
    };
    let flow = find_flow(&config, &plan.flow)?;
    let report = apply_plan(
        &plan,
        client_config(&config, flow.source.as_str())?,
        client_config(&config, flow.target.as_str())?,
        args.dry_run,
        // An offsets file may come from elsewhere and not know the destination's offsets when
        // it was made: only a group ahead of the file is refused.
        false,
    )
    .await?;
    crate::apply::print(&report, args.json)
}
