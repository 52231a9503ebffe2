//! `strait map`: the persisted offset map of each flow, per partition, readable at 3 a.m.

use std::path::Path;

use anyhow::Context as _;
use strait_core::config::StraitConfig;
use strait_core::flow::map_store::MapStore;
use strait_kafka::{Client, ClientConfig};

pub(crate) async fn show(path: &Path, json: bool) -> anyhow::Result<()> {
    let config = StraitConfig::load(path)?;
    let mut out = Vec::new();
    for flow in &config.flows {
        let cluster = config
            .cluster(flow.target.as_str())
            .with_context(|| format!("cluster {} is not declared", flow.target))?;
        let target = Client::connect(ClientConfig::new(cluster.bootstrap_servers.clone()))
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
            p["source_end"],
            p["target_end"],
            lost,
            segments.saturating_sub(1),
        );
    }
    if out.is_empty() {
        println!("(no offset map yet: nothing has been mirrored with this config)");
    }
    Ok(())
}
