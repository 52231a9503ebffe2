//! The `strait` command. Each subcommand lives in its own file with its arguments and its
//! `run` (`run.rs`, `mirror.rs`, `status.rs`, `control.rs`, ...); what they share is in
//! `common.rs` (arguments), `format.rs` (numbers for people), `endpoint.rs` (the HTTP API of a
//! running instance), `signals.rs` (Ctrl-C, SIGTERM, SIGHUP) and `clusters.rs` (clients of a
//! config's clusters for the commands that run once). The flows run in `strait_runtime`
//! (`crates/strait-runtime`): `strait run` and `strait mirror` start it, turn signals into its
//! calls, print and exit. No two files import each other (`scripts/module-cycles`).

use clap::{Parser, Subcommand};

mod check;
mod clusters;
mod common;
mod config_tools;
mod control;
mod endpoint;
mod export;
mod failover;
mod format;
mod logs;
mod map;
mod mirror;
mod offsets;
mod probe;
mod progress;
mod readiness;
mod run;
mod signals;
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
    /// Log more: `-v` info, `-vv` debug, `-vvv` trace (`RUST_LOG` overrides it). By default
    /// `run` logs info; `mirror` in a terminal shows its bars and summary with warnings only
    /// (info in `--log-file`); other commands log warnings.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Write log lines to this file (appended) instead of stderr.
    #[arg(long, global = true, value_name = "FILE")]
    log_file: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Mirror the enabled flows (`A->B.enabled = true`) of an MirrorMaker 2 `.properties` file:
    /// remote topics are created, batches are forwarded unopened, and the exact offset map is kept
    /// in `strait-offset-map.<source>.internal` on each target. Checkpoints (and group offset
    /// sync when enabled) run beside each flow; an HTTP API translates offsets.
    ///
    /// Each flow runs on its own: one whose cluster does not answer waits and retries while
    /// the others run, and a failed flow restarts from its map after a backoff. SIGHUP, `strait
    /// reload` or a changed file reloads the config: only flows whose settings changed restart.
    /// `strait flow pause|resume` pauses one flow. Stops cleanly on Ctrl-C or SIGTERM: every
    /// flow finishes its round and writes its map.
    Run(run::RunArgs),
    /// Pause or resume one flow of a running `strait run`, through its HTTP API.
    Flow {
        #[command(subcommand)]
        command: control::FlowCommand,
    },
    /// Make a running `strait run` read its config file again, as SIGHUP does: flows whose
    /// settings changed restart, new ones start, removed ones stop, the others keep flowing.
    /// A file that does not load changes nothing (the error is shown).
    Reload(control::ReloadArgs),
    /// Copy once: mirror the enabled flows until every partition selected at start has
    /// reached the source end offset it had at start, then exit with a summary per flow
    /// (records, bytes, duration, lost, duplicates). Exits non-zero when records were lost on
    /// the source, a flow failed, or the copy was interrupted. Progress bars in a terminal,
    /// progress log lines otherwise.
    Mirror(mirror::MirrorArgs),
    /// Show the exact offset map of each flow, as persisted on its target: per source
    /// partition, the mapped segments (source start, target start, length), lost ranges and
    /// where mirroring stands.
    Map(map::MapArgs),
    /// Consumer-group offsets across clusters.
    Offsets {
        #[command(subcommand)]
        command: offsets::OffsetsCommand,
    },
    /// Move consumer groups from a flow's source cluster to its target (after A is lost, or
    /// for a planned switch): `plan` shows, per group and partition, where each continues on
    /// the target, exactly, and what stands in the way; `apply` commits that plan; `check`
    /// says whether a failover now would lose records or have groups read any again.
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
        command: config_tools::ConfigCommand,
    },
    /// Say what an MM2 properties file does under strait, without mirroring: the flows and
    /// their settings, every key as used, ignored (and why) or refused, what changes from MM2,
    /// and with --connect the topics and groups each flow would take now. Exit codes: 0 runs,
    /// 1 refused, 3 warnings with --strict, 4 a cluster did not answer (docs/check.md).
    Check(check::CheckArgs),
    /// Connect to a cluster and show its id, brokers, and the API versions strait would use
    /// with it, so a reachability or compatibility problem shows before a mirror is started.
    Probe(probe::ProbeArgs),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // `run` logs what it does; the one-shot commands print their answer and log only what
    // went wrong, without the runtime's reconnect attempts (a lost cluster is expected there,
    // and the command says so itself). RUST_LOG overrides both.
    let default_filter = match &cli.command {
        Command::Run(_) => "info",
        // In a terminal the bars and the summary say what happens; info lines would scroll
        // through them. They go to --log-file, or show with -v.
        Command::Mirror(_)
            if std::io::IsTerminal::is_terminal(&std::io::stderr()) && cli.log_file.is_none() =>
        {
            "warn"
        }
        Command::Mirror(_) => "info",
        _ => "warn,strait_kafka::cluster=error",
    };
    logs::init(
        cli.log_format,
        default_filter,
        cli.verbose,
        cli.log_file.as_deref(),
    )?;
    match cli.command {
        Command::Run(args) => run::run(args).await,
        Command::Flow { command } => control::flow(command).await,
        Command::Reload(args) => control::reload(args).await,
        Command::Mirror(args) => mirror::mirror(args).await,
        Command::Map(args) => map::show(args).await,
        Command::Offsets { command } => offsets::run(command).await,
        Command::Failover { command } => failover::failover(command).await,
        Command::Failback { command } => failover::failback(command).await,
        Command::Status(args) => status::status(args).await,
        Command::Check(args) => check::run(args).await,
        Command::Config { command } => config_tools::run(command),
        Command::Probe(args) => probe::run(args).await,
    }
}
