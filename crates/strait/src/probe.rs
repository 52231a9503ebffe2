//! `strait probe`: connect to a cluster and show its id, brokers, and the API versions strait
//! would use with it, so a reachability or compatibility problem shows before a mirror starts.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use kafka_protocol::messages::ApiKey;
use strait_kafka::{Client, ClientConfig};

/// `strait probe` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct ProbeArgs {
    /// Bootstrap servers, `host:port[,host:port...]` (as `bootstrap.servers`).
    #[arg(long, value_name = "HOST:PORT")]
    bootstrap: String,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 15)]
    timeout_secs: u64,
}

/// The APIs strait's runtime uses, in the order shown by `probe`.
const APIS: &[ApiKey] = &[
    ApiKey::ApiVersions,
    ApiKey::Metadata,
    ApiKey::Fetch,
    ApiKey::Produce,
    ApiKey::InitProducerId,
    ApiKey::ListOffsets,
    ApiKey::FindCoordinator,
    ApiKey::ListGroups,
    ApiKey::DescribeGroups,
    ApiKey::OffsetFetch,
    ApiKey::OffsetCommit,
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::CreatePartitions,
    ApiKey::DescribeConfigs,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::DescribeCluster,
    ApiKey::DescribeAcls,
    ApiKey::CreateAcls,
    ApiKey::DeleteRecords,
];

/// Runs `strait probe`.
pub(crate) async fn run(args: ProbeArgs) -> anyhow::Result<ExitCode> {
    let (bootstrap, timeout) = (&args.bootstrap, Duration::from_secs(args.timeout_secs));
    let servers: Vec<String> = bootstrap
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let mut config = ClientConfig::new(servers);
    config.operation_timeout = timeout;
    let client = tokio::time::timeout(timeout, Client::connect(config))
        .await
        .with_context(|| format!("no answer from {bootstrap} within {timeout:?}"))?
        .with_context(|| format!("cannot reach cluster at {bootstrap}"))?;
    let cluster = client.describe_cluster().await?;
    println!("cluster id   {}", cluster.cluster_id);
    match cluster.controller {
        Some(c) => println!("controller   {}", c.0),
        None => println!("controller   (not reported)"),
    }
    for b in &cluster.brokers {
        println!(
            "broker       {} at {}{}",
            b.id.0,
            b.addr(),
            b.rack
                .as_deref()
                .map(|r| format!(" rack {r}"))
                .unwrap_or_default()
        );
    }
    let metadata = client.cached_metadata();
    println!("topics       {}", metadata.topics.len());
    let conn = client.any_connection().await?;
    println!("\n{:<26} {:>8} {:>10}", "API", "broker", "strait uses");
    for api in APIS {
        let broker = conn
            .versions()
            .broker_range(*api)
            .map(|(lo, hi)| format!("{lo}..{hi}"))
            .unwrap_or_else(|| "-".into());
        let ours = conn
            .versions()
            .pick_key(*api)
            .map(|v| format!("v{v}"))
            .unwrap_or_else(|e| format!("none ({e})"));
        println!("{:<26} {:>8} {:>10}", format!("{api:?}"), broker, ours);
    }
    Ok(ExitCode::SUCCESS)
}
