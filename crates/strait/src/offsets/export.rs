//! `strait offsets export`: a flow's group offsets and their translations to the target, to a
//! file (JSON, the failover plan format; or CSV, `csv.rs`), for teams that keep offsets in an
//! external store.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use strait_core::config::StraitConfig;
use strait_core::offsets::plan;

use super::csv::{self, Format};
use crate::clusters::{connect_both, find_flow, narrowing};
use crate::format::things as count;

/// Arguments of `offsets export`.
#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    /// The MM2 properties file.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// The flow, as `A->B`.
    #[arg(long, value_name = "A->B")]
    flow: String,
    /// Only groups whose whole name matches (a comma-separated list of regexes, as `groups`).
    #[arg(long, value_name = "REGEX")]
    groups: Option<String>,
    /// `json` (the failover plan format) or `csv`.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    format: Format,
    /// Write to this file instead of standard output.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// Runs `strait offsets export`.
pub(crate) async fn run(args: ExportArgs) -> anyhow::Result<ExitCode> {
    let config = StraitConfig::load(&args.config)?;
    let flow = find_flow(&config, &args.flow)?;
    let narrow = narrowing(args.groups.as_deref())?;
    let (source, target) = connect_both(&config, flow).await?;
    let plan = plan::plan_failover(&source, &target, flow, narrow.as_ref()).await?;
    let text = match args.format {
        Format::Json => format!("{}\n", plan.to_json()),
        Format::Csv => csv::to_csv(&plan.rows())?,
    };
    match &args.out {
        Some(path) => {
            std::fs::write(path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            let (partitions, _) = plan.counts();
            eprintln!(
                "{}, {} written to {}",
                count(plan.groups.len(), "group"),
                count(partitions, "partition"),
                path.display()
            );
        }
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}
