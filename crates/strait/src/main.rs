//! The `strait` command: `run` mirrors the flows of an MM2 config; `probe` checks a cluster.

use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use kafka_protocol::messages::ApiKey;
use strait_kafka::{Client, ClientConfig};

mod check;
mod export;
mod failover;
mod http;
mod logs;
mod map;
mod mirror;
mod progress;
mod run;
mod status;
mod strimzi;

/// Mirror Kafka topics between clusters and carry consumer-group positions across, exactly.
#[derive(Debug, Parser)]
#[command(name = "strait", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How log lines (stderr) are written: `human` lines, or one JSON object per line.
    #[arg(long, global = true, value_enum, default_value_t = logs::LogFormat::Human)]
    log_format: logs::LogFormat,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Mirror the enabled flows (`A->B.enabled = true`) of an MirrorMaker 2 `.properties` file:
    /// remote topics are created, batches are forwarded unopened, and the exact offset map is kept
    /// in `strait-offset-map.<source>.internal` on each target. Checkpoints (and group offset
    /// sync when enabled) run beside each flow; an HTTP API translates offsets. Stops cleanly on
    /// Ctrl-C or SIGTERM, after writing the map.
    Run {
        /// The MM2 properties file (`connect-mirror-maker.properties` style).
        #[arg(long, value_name = "FILE")]
        config: std::path::PathBuf,
        /// Exit once every partition has reached the source end it had at start (a one-shot copy)
        /// instead of mirroring until stopped.
        #[arg(long)]
        until_caught_up: bool,
        /// Where the HTTP API listens (`/healthz`, `/v1/translate`, `/v1/groups/GROUP`; see
        /// docs/http-api.md), or `off`.
        #[arg(long, value_name = "HOST:PORT|off", default_value = "127.0.0.1:9876", value_parser = parse_listen)]
        listen: Listen,
    },
    /// Copy once: mirror the enabled flows until every partition selected at start has
    /// reached the source end offset it had at start, then exit with a summary per flow
    /// (records, bytes, duration, lost, duplicates). Exits non-zero when records were lost on
    /// the source, a flow failed, or the copy was interrupted. Progress bars in a terminal,
    /// progress log lines otherwise.
    Mirror(mirror::MirrorArgs),
    /// Show the exact offset map of each flow, as persisted on its target: per source
    /// partition, the mapped segments (source start, target start, length), lost ranges and
    /// where mirroring stands.
    Map {
        /// The MM2 properties file.
        #[arg(long, value_name = "FILE")]
        config: std::path::PathBuf,
        /// JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Consumer-group offsets across clusters.
    Offsets {
        #[command(subcommand)]
        command: OffsetsCommand,
    },
    /// Move consumer groups from a flow's source cluster to its target (after A is lost, or
    /// for a planned switch): `plan` shows, per group and partition, where each continues on
    /// the target, exactly, and what stands in the way; `apply` commits that plan.
    Failover {
        #[command(subcommand)]
        command: failover::FailoverCommand,
    },
    /// Move consumer groups back from a flow's target cluster to its source: `plan` reads the
    /// offset map backwards and reports records the source lacks; `apply` commits that plan.
    Failback {
        #[command(subcommand)]
        command: failover::FailbackCommand,
    },
    /// One screen on a running `strait run`, from its HTTP API: per flow and topic, the
    /// partitions, lag (records and seconds), throughput, lost records, the last error, and the
    /// consumer groups checkpointed and synced. Exits non-zero when no instance answers.
    Status(status::StatusArgs),
    /// Configuration tools: turn a Strimzi `KafkaMirrorMaker2` resource into an MM2 file.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Say what an MM2 properties file does under strait, without mirroring: the flows and
    /// their settings, every key as used, ignored (and why) or refused, what changes from MM2,
    /// and with --connect the topics and groups each flow would take now. Exit codes: 0 runs,
    /// 1 refused, 3 warnings with --strict, 4 a cluster did not answer (docs/check.md).
    Check(check::CheckArgs),
    /// Connect to a cluster and show its id, brokers, and the API versions strait would use
    /// with it, so a reachability or compatibility problem shows before a mirror is started.
    Probe {
        /// Bootstrap servers, `host:port[,host:port...]` (as `bootstrap.servers`).
        #[arg(long, value_name = "HOST:PORT")]
        bootstrap: String,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 15)]
        timeout_secs: u64,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Turn a Strimzi KafkaMirrorMaker2 resource (YAML, kafka.strimzi.io/v1beta2) into the MM2
    /// properties file strait runs: clusters, TLS and authentication, mirrors with their topic
    /// and group patterns, tasksMax, the connectors' settings and rack awareness. Secrets are
    /// never copied: the file reads them at run time from the Kubernetes Secrets mounted under
    /// --secrets-dir. What is not carried over is listed on stderr (docs/strimzi.md).
    FromStrimzi {
        /// The resource (a YAML file holding one KafkaMirrorMaker2).
        #[arg(value_name = "FILE")]
        file: std::path::PathBuf,
        /// Where the pod mounts each Secret as a directory (`<dir>/<secret name>/<key>`).
        #[arg(long, value_name = "DIR", default_value = "/etc/strait/secrets")]
        secrets_dir: String,
        /// Write the properties here instead of to stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<std::path::PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum OffsetsCommand {
    /// Translate a source group's committed offsets to the target through the exact offset
    /// map: per partition, the target offset a consumer of the remote topic continues from,
    /// whether it is exact, and any gap (records not mirrored yet, lost, or never mirrored).
    Translate {
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
    },
    /// Export group offsets and their translations to the target (a failover plan): JSON in
    /// the plan format, or CSV with one row per group partition (group, topic, partition,
    /// remote topic, source offset, target offset, exact, unreplicated, metadata, ...).
    Export(export::ExportArgs),
    /// Apply an exported offsets file (JSON or CSV) to its destination, with the checks of
    /// `failover apply`: never into an active group, never moving a group back.
    Import(export::ImportArgs),
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

/// `--listen`: an address, or `None` for `off`.
#[derive(Debug, Clone, Copy)]
struct Listen(Option<std::net::SocketAddr>);

fn parse_listen(value: &str) -> Result<Listen, String> {
    if value.eq_ignore_ascii_case("off") {
        return Ok(Listen(None));
    }
    value.parse().map(|addr| Listen(Some(addr))).map_err(|e| {
        format!(
            "{e}: give HOST:PORT with an IP address (e.g. 127.0.0.1:9876 or 0.0.0.0:9876), or off"
        )
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // `run` logs what it does; the one-shot commands print their answer and log only what
    // went wrong, without the runtime's reconnect attempts (a lost cluster is expected there,
    // and the command says so itself). RUST_LOG overrides both.
    let default_filter = match cli.command {
        Command::Run { .. } | Command::Mirror(_) => "info",
        _ => "warn,strait_kafka::cluster=error",
    };
    logs::init(cli.log_format, default_filter);
    match cli.command {
        Command::Run {
            config,
            until_caught_up,
            listen,
        } => run::run(&config, until_caught_up, listen.0).await,
        Command::Mirror(args) => mirror::mirror(args).await,
        Command::Map { config, json } => map::show(&config, json).await,
        Command::Offsets {
            command:
                OffsetsCommand::Translate {
                    config,
                    group,
                    topic,
                    json,
                },
        } => map::translate(&config, &group, topic.as_deref(), json).await,
        Command::Offsets {
            command: OffsetsCommand::Export(args),
        } => export::export(args).await,
        Command::Offsets {
            command: OffsetsCommand::Import(args),
        } => export::import(args).await,
        Command::Failover { command } => failover::failover(command).await,
        Command::Failback { command } => failover::failback(command).await,
        Command::Status(args) => status::status(args).await,
        Command::Check(args) => check::run(args).await,
        Command::Config {
            command:
                ConfigCommand::FromStrimzi {
                    file,
                    secrets_dir,
                    out,
                },
        } => from_strimzi(&file, &secrets_dir, out.as_deref()),
        Command::Probe {
            bootstrap,
            timeout_secs,
        } => probe(&bootstrap, Duration::from_secs(timeout_secs)).await,
    }
}

fn from_strimzi(
    file: &std::path::Path,
    secrets_dir: &str,
    out: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let conversion = strimzi::convert(&text, &file.display().to_string(), secrets_dir)
        .map_err(anyhow::Error::msg)?;
    match out {
        Some(path) => std::fs::write(path, &conversion.properties)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => print!("{}", conversion.properties),
    }
    for note in &conversion.notes {
        eprintln!("note: {note}");
    }
    Ok(())
}

async fn probe(bootstrap: &str, timeout: Duration) -> anyhow::Result<()> {
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
    Ok(())
}
