//! `strait map`: the persisted offset map of each flow, per partition, readable at 3 a.m.

use anyhow::Context as _;
use strait_core::config::{Role, Side, StraitConfig};
use strait_core::internal::map_store::MapStore;
use strait_kafka::Client;

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

/// Runs `strait map`.
pub(crate) async fn show(args: MapArgs) -> anyhow::Result<()> {
    let json = args.json;
    let config = StraitConfig::load(&args.config)?;
    let mut out = Vec::new();
    for flow in &config.flows {
        let target = Client::connect(config.client_config(flow, Side::Target, Role::Admin)?)
            .await
            .with_context(|| format!("cannot reach target {}", flow.target))?;
        let map = MapStore::read(&target, flow.source_alias.as_str()).await?;
        for (partition, pmap) in map.iter() {
            let extent = pmap.extent();
            out.push(serde_json::json!({
                "flow": flow.name(),
                "topic": partition.topic,
                "partition": partition.partition,
                "remote_topic": flow.remote_topic(&partition.topic),
                "segments": pmap.segments().iter().map(|s| serde_json::json!({
                    "source_start": s.src_start, "target_start": s.dst_start, "length": s.len,
                })).collect::<Vec<_>>(),
                "lost": pmap.lost_ranges().iter().map(|l| serde_json::json!({
                    "from": l.src_from, "to": l.src_to,
                })).collect::<Vec<_>>(),
                "source_end": extent.map(|e| e.src_end),
                "target_end": pmap.dst_end(),
            }));
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!(
        "{:<14} {:<28} {:>9} {:>10} {:>10} {:>9} {:>6}",
        "FLOW", "PARTITION", "SEGMENTS", "SOURCE END", "TARGET END", "LOST", "GAPS"
    );
    for p in &out {
        let segments = p["segments"].as_array().map_or(0, Vec::len);
        let lost: i64 = p["lost"]
            .as_array()
            .map(|l| {
                l.iter()
                    .map(|r| r["to"].as_i64().unwrap_or(0) - r["from"].as_i64().unwrap_or(0))
                    .sum()
            })
            .unwrap_or(0);
        println!(
            "{:<14} {:<28} {:>9} {:>10} {:>10} {:>9} {:>6}",
            p["flow"].as_str().unwrap_or(""),
            format!("{}-{}", p["topic"].as_str().unwrap_or(""), p["partition"]),
            segments,
            p["source_end"].to_string(),
            p["target_end"].to_string(),
            lost,
            segments.saturating_sub(1),
        );
    }
    if out.is_empty() {
        println!("(no offset map yet: nothing has been mirrored with this config)");
    }
    Ok(())
}
