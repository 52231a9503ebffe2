//! `strait offsets`: consumer-group offsets across clusters: `translate` through the exact
//! offset map (here), `export` a plan to a file (`export.rs`) and `import` one (`import.rs`),
//! as JSON or CSV (`csv.rs`).

mod csv;
mod export;
mod import;

use std::process::ExitCode;

use anyhow::Context as _;
use strait_core::config::{Role, Side, StraitConfig};
use strait_core::internal::map_store::MapStore;
use strait_runtime::rows::GroupOffsetRow;

/// `strait offsets` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct OffsetsArgs {
    #[command(subcommand)]
    command: OffsetsCommand,
}

/// `strait offsets` subcommands.
#[derive(Debug, clap::Subcommand)]
enum OffsetsCommand {
    /// Translate a source group's committed offsets to the target through the exact offset
    /// map: per partition, the target offset a consumer of the remote topic continues from,
    /// whether it is exact, and any gap (records not mirrored yet, lost, or never mirrored).
    #[command(after_help = "\
Examples:
  # Where group billing continues on each flow's target, per partition:
  strait offsets translate --config mm2.properties --group billing
  # One topic, as JSON:
  strait offsets translate --config mm2.properties --group billing \\
      --topic orders --json")]
    Translate(TranslateArgs),
    /// Export group offsets and their translations to the target (a failover plan): JSON in
    /// the plan format, or CSV with one row per group partition (group, topic, partition,
    /// remote topic, source offset, target offset, exact, unreplicated, metadata, ...).
    #[command(after_help = "\
Examples:
  # Every group of flow A->B, in the failover plan format:
  strait offsets export --config mm2.properties --flow 'A->B' \\
      --out offsets.json
  # Some groups, as CSV:
  strait offsets export --config mm2.properties --flow 'A->B' \\
      --groups 'billing-.*' --format csv --out offsets.csv")]
    Export(export::ExportArgs),
    /// Apply an exported offsets file (JSON or CSV) to its destination, with the checks of
    /// `failover apply`: never into an active group, never moving a group back.
    #[command(after_help = "\
Examples:
  # What would be committed, committing nothing:
  strait offsets import --config mm2.properties --dry-run offsets.json
  strait offsets import --config mm2.properties offsets.json")]
    Import(import::ImportArgs),
}

/// Arguments of `offsets translate`.
#[derive(Debug, clap::Args)]
struct TranslateArgs {
    /// The MM2 properties file.
    #[arg(long, value_name = "FILE")]
    config: std::path::PathBuf,
    /// The consumer group, as named on the source.
    #[arg(long)]
    group: String,
    /// Only this source topic.
    #[arg(long)]
    topic: Option<String>,
    /// JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs `strait offsets`.
pub(crate) async fn run(args: OffsetsArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        OffsetsCommand::Translate(args) => translate(args).await,
        OffsetsCommand::Export(args) => export::run(args).await,
        OffsetsCommand::Import(args) => import::run(args).await,
    }
}

/// `strait offsets translate`: a source group's committed offsets, translated through the map.
async fn translate(args: TranslateArgs) -> anyhow::Result<ExitCode> {
    let (group, topic) = (args.group.as_str(), args.topic.as_deref());
    let config = StraitConfig::load(&args.config)?;
    let mut rows = Vec::new();
    for flow in &config.flows {
        let source =
            crate::clusters::connect(config.client_config(flow, Side::Source, Role::Admin)?, None)
                .await
                .with_context(|| format!("cannot reach source {}", flow.source))?;
        let target =
            crate::clusters::connect(config.client_config(flow, Side::Target, Role::Admin)?, None)
                .await
                .with_context(|| format!("cannot reach target {}", flow.target))?;
        let map = MapStore::read(&target, flow.source_alias.as_str()).await?;
        let mut translated =
            strait_core::offsets::translate_group(&source, flow, &map, group, topic).await?;
        strait_core::offsets::at_remote_end(Some(&source), &target, &map, &mut translated).await;
        for t in &translated {
            rows.push(GroupOffsetRow::new(&flow.name(), group, t));
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<14} {:<24} {:>13} {:<28} {:>13} {:<6} NOTE",
        "FLOW", "SOURCE PARTITION", "SOURCE OFFSET", "TARGET PARTITION", "TARGET OFFSET", "EXACT"
    );
    for r in &rows {
        println!(
            "{:<14} {:<24} {:>13} {:<28} {:>13} {:<6} {}",
            r.flow,
            format!("{}-{}", r.topic, r.partition),
            r.source_offset,
            format!("{}-{}", r.remote_topic, r.partition),
            r.target_offset
                .map_or_else(|| "-".to_owned(), |o| o.to_string()),
            if r.exact { "yes" } else { "no" },
            r.note,
        );
    }
    if rows.is_empty() {
        println!("(group {group} has no committed offsets on mirrored partitions)");
    }
    Ok(ExitCode::SUCCESS)
}
