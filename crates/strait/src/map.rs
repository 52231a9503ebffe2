//! `strait map`: the persisted offset map of each flow, per partition, readable at 3 a.m.

use std::process::ExitCode;

use anyhow::Context as _;
use serde::Serialize;
use strait_core::config::{FlowConfig, Role, Side, StraitConfig};
use strait_core::internal::map_store::MapStore;
use strait_wire::offset_map::{PartitionMap, SourcePartition};

/// `strait map` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct MapArgs {
    /// The MM2 properties file.
    #[arg(long, value_name = "FILE")]
    config: std::path::PathBuf,
    /// JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// One source partition's map: a row of the table, an object of `--json`.
#[derive(Debug, Serialize)]
struct MapRow {
    /// `A->B`.
    flow: String,
    /// The source topic.
    topic: String,
    /// The partition (the same on both clusters).
    partition: i32,
    /// The topic's name on the target.
    remote_topic: String,
    /// The mapped runs, in source order.
    segments: Vec<SegmentRow>,
    /// Source ranges deleted before they were mirrored.
    lost: Vec<LostRow>,
    /// The source offset the map accounts for up to; `null` for an empty map.
    source_end: Option<i64>,
    /// The target offset after the last mapped record; `null` for an empty map.
    target_end: Option<i64>,
}

/// A run of source offsets mirrored one to one.
#[derive(Debug, Serialize)]
struct SegmentRow {
    source_start: i64,
    target_start: i64,
    length: i64,
}

/// Source offsets `[from, to)` lost.
#[derive(Debug, Serialize)]
struct LostRow {
    from: i64,
    to: i64,
}

impl MapRow {
    fn new(flow: &FlowConfig, partition: &SourcePartition, pmap: &PartitionMap) -> Self {
        MapRow {
            flow: flow.name(),
            topic: partition.topic.clone(),
            partition: partition.partition,
            remote_topic: flow.remote_topic(&partition.topic),
            segments: pmap
                .segments()
                .iter()
                .map(|s| SegmentRow {
                    source_start: s.src_start,
                    target_start: s.dst_start,
                    length: s.len,
                })
                .collect(),
            lost: pmap
                .lost_ranges()
                .iter()
                .map(|l| LostRow {
                    from: l.src_from,
                    to: l.src_to,
                })
                .collect(),
            source_end: pmap.extent().map(|e| e.src_end),
            target_end: pmap.dst_end(),
        }
    }

    /// Source offsets lost, in all.
    fn lost_records(&self) -> i64 {
        self.lost.iter().map(|l| l.to - l.from).sum()
    }
}

/// Runs `strait map`.
pub(crate) async fn run(args: MapArgs) -> anyhow::Result<ExitCode> {
    let config = StraitConfig::load(&args.config)?;
    let mut rows = Vec::new();
    for flow in &config.flows {
        let target =
            crate::clusters::connect(config.client_config(flow, Side::Target, Role::Admin)?, None)
                .await
                .with_context(|| format!("cannot reach target {}", flow.target))?;
        let map = MapStore::read(&target, flow.source_alias.as_str()).await?;
        rows.extend(
            map.iter()
                .map(|(partition, pmap)| MapRow::new(flow, partition, pmap)),
        );
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print_table(&rows);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_table(rows: &[MapRow]) {
    println!(
        "{:<14} {:<28} {:>9} {:>10} {:>10} {:>9} {:>6}",
        "FLOW", "PARTITION", "SEGMENTS", "SOURCE END", "TARGET END", "LOST", "GAPS"
    );
    for r in rows {
        println!(
            "{:<14} {:<28} {:>9} {:>10} {:>10} {:>9} {:>6}",
            r.flow,
            format!("{}-{}", r.topic, r.partition),
            r.segments.len(),
            cell(r.source_end),
            cell(r.target_end),
            r.lost_records(),
            r.segments.len().saturating_sub(1),
        );
    }
    if rows.is_empty() {
        println!("(no offset map yet: nothing has been mirrored with this config)");
    }
}

/// An end offset for the table: `null` for an empty map, as `--json` writes it.
fn cell(offset: Option<i64>) -> String {
    offset.map_or_else(|| "null".to_owned(), |o| o.to_string())
}
