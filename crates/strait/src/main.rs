//! The `strait` command: arguments, output and exit codes. Each subcommand is a file named for
//! it, with its arguments (`RunArgs`, `MirrorArgs`, ...) and the same entry, `run(args) ->
//! Result<ExitCode>`: `run.rs`, `mirror.rs`, `map.rs`, `offsets/`, `failover.rs`,
//! `failback.rs`, `status.rs`, `flow.rs`, `reload.rs`, `config_tools.rs`, `check.rs`,
//! `probe.rs`, `verify.rs`. Steps that two subcommands share have files of their own, named for
//! the step: `plan.rs` and `apply.rs` (a failover or failback plan made, applied), `readiness.rs`
//! (`failover check`). What they all share: `common.rs` (arguments), `format.rs` and
//! `table.rs` (numbers and tables for people), `endpoint.rs` (the HTTP API of a running
//! instance), `signals.rs` (Ctrl-C, SIGTERM, SIGHUP), `clusters.rs` (clients of a config's
//! clusters for the commands that run once), `logs.rs` and `progress.rs`. The flows run in
//! `strait_runtime` (`crates/strait-runtime`): `strait run` and `strait mirror` start it, turn
//! signals into its calls, print and exit. No two files import each other
//! (`scripts/module-cycles`).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod apply;
mod check;
mod clusters;
mod common;
mod config_tools;
mod endpoint;
mod failback;
mod failover;
mod flow;
mod format;
mod logs;
mod map;
mod mirror;
mod offsets;
mod plan;
mod probe;
mod progress;
mod readiness;
mod reload;
mod run;
mod signals;
mod status;
mod strimzi;
mod table;
mod verify;

/// Mirror Kafka topics between clusters and carry consumer-group positions across, exactly.
#[derive(Debug, Parser)]
#[command(name = "strait", version, about, long_about = None, max_term_width = 100)]
#[command(after_help = "\
Examples:
  # What strait makes of an MM2 file, without touching a cluster:
  strait check --config mm2.properties
  # Mirror its enabled flows, then look at them from another shell:
  strait run --config mm2.properties
  strait status
  # Move consumer groups from A to B: read the plan, then apply it:
  strait failover plan --config mm2.properties --flow 'A->B' \\
      --out plan.json
  strait failover apply --config mm2.properties plan.json

Each command's --help has examples of its own; docs/ in the repository or
/usr/share/doc/strait/ says more.")]
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
    /// For the commands that ask a cluster once (`failover`, `failback`, `map`, `offsets`,
    /// `status` of a config): give up on a cluster that has not answered within this many
    /// seconds (default 60, Kafka's admin timeout). After 2 s they say what they wait for.
    #[arg(long, global = true, value_name = "SECONDS", value_parser = clusters::parse_timeout)]
    timeout: Option<std::time::Duration>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Mirror the enabled flows (`A->B.enabled = true`) of a MirrorMaker 2 `.properties` file:
    /// remote topics are created, batches are forwarded unopened, and the exact offset map is kept
    /// in `strait-offset-map.<source>.internal` on each target. Checkpoints (and group offset
    /// sync when enabled) run beside each flow; an HTTP API translates offsets.
    ///
    /// Each flow runs on its own: one whose cluster does not answer waits and retries while
    /// the others run, and a failed flow restarts from its map after a backoff. SIGHUP, `strait
    /// reload` or a changed file reloads the config: only flows whose settings changed restart.
    /// `strait flow pause|resume` pauses one flow. Stops cleanly on Ctrl-C or SIGTERM: every
    /// flow finishes its round and writes its map.
    #[command(after_help = "\
Examples:
  # Mirror the enabled flows of an MM2 file (HTTP API on :9876):
  strait run --config /etc/strait/mm2.properties
  # In a container: the API on every address, control behind a token:
  strait run --config mm2.properties --listen 0.0.0.0:9876 \\
      --control-token-file /etc/strait/token
  # Mirror until caught up with the sources, then stop:
  strait run --config mm2.properties --until-caught-up")]
    Run(run::RunArgs),
    /// Pause or resume one flow of a running `strait run`, through its HTTP API.
    #[command(after_help = "\
Examples:
  strait flow pause 'A->B'
  strait flow resume 'A->B' --url http://10.0.0.5:9876")]
    Flow(flow::FlowArgs),
    /// Make a running `strait run` read its config file again, as SIGHUP does: flows whose
    /// settings changed restart, new ones start, removed ones stop, the others keep flowing.
    /// A file that does not load changes nothing (the error is shown).
    #[command(after_help = "\
Examples:
  # After editing the file of the instance on this host:
  strait reload
  # Of an instance elsewhere, with its control token:
  strait reload --url http://10.0.0.5:9876 --control-token-file token")]
    Reload(reload::ReloadArgs),
    /// Copy once: mirror the enabled flows until every partition selected at start has
    /// reached the source end offset it had at start, then exit with a summary per flow
    /// (records, bytes, duration, lost, duplicates). Exits non-zero when records were lost on
    /// the source, a flow failed, or the copy was interrupted. Progress bars in a terminal,
    /// progress log lines otherwise.
    #[command(after_help = "\
Examples:
  # Copy what the file's flows select now, then exit with a summary:
  strait mirror --config mm2.properties --until caught-up
  # The summary as JSON, for a script:
  strait mirror --config mm2.properties --until caught-up --json")]
    Mirror(mirror::MirrorArgs),
    /// Show the exact offset map of each flow, as persisted on its target: per source
    /// partition, the mapped segments (source start, target start, length), lost ranges and
    /// where mirroring stands.
    #[command(after_help = "\
Examples:
  strait map --config mm2.properties
  strait map --config mm2.properties --json > map.json")]
    Map(map::MapArgs),
    /// Consumer-group offsets across clusters.
    #[command(after_help = "\
Examples:
  strait offsets translate --config mm2.properties --group billing
  strait offsets export --config mm2.properties --flow 'A->B' \\
      --out offsets.json
  strait offsets import --config mm2.properties --dry-run offsets.json")]
    Offsets(offsets::OffsetsArgs),
    /// Move consumer groups from a flow's source cluster to its target (after A is lost, or
    /// for a planned switch): `plan` shows, per group and partition, where each continues on
    /// the target, exactly, and what stands in the way; `apply` commits that plan; `check`
    /// says whether a failover now would lose records or have groups read any again.
    #[command(after_help = "\
Examples:
  strait failover check --config mm2.properties --flow 'A->B'
  strait failover plan --config mm2.properties --flow 'A->B' \\
      --out plan.json
  strait failover apply --config mm2.properties plan.json")]
    Failover(failover::FailoverArgs),
    /// Move consumer groups back from a flow's target cluster to its source: `plan` reads the
    /// offset map backwards and reports records the source lacks; `apply` commits that plan.
    #[command(after_help = "\
Examples:
  strait failback plan --config mm2.properties --flow 'A->B' \\
      --out back.json
  strait failback apply --config mm2.properties back.json")]
    Failback(failback::FailbackArgs),
    /// Compare a flow's source and target record by record through the exact offset map:
    /// for every partition the map accounts for, the records on both (same key, value, headers
    /// and create time, compared by digest, so rebuilt or merged batches compare equal),
    /// records missing on the target, extra on the target (written there by something else, or
    /// past the map's end) and records that differ, each with its offsets on both sides.
    /// Aborted transactions and markers are passed over on both sides; mapped records the
    /// source no longer holds (compacted or deleted since) are counted, not compared.
    ///
    /// Verify a flow that is stopped or paused (`strait flow pause`): records a running flow
    /// has written but not yet recorded in its map count as extra. Exit status: 0 identical,
    /// 3 differences, 1 an error (a partition that could not be read, a cluster that does not
    /// answer).
    #[command(after_help = "\
Examples:
  # Everything the flows of an MM2 file mirrored, compared:
  strait verify --config mm2.properties
  # One flow, some topics, gently, resumable, as JSON for the record:
  strait verify --config mm2.properties --flow 'A->B' \\
      --topics 'orders.*' --max-mb-per-s 50 \\
      --state verify-state.json --json > verify.json")]
    Verify(verify::VerifyArgs),
    /// One screen on a running `strait run`, from its HTTP API: per flow and topic, the
    /// partitions, lag (records and seconds), throughput, lost records, the last error, and the
    /// consumer groups checkpointed and synced. Exits non-zero when no instance answers.
    #[command(after_help = "\
Examples:
  # The instance on this host, redrawn every 2 s:
  strait status --watch
  # One elsewhere, as JSON:
  strait status --url http://10.0.0.5:9876 --json")]
    Status(status::StatusArgs),
    /// Configuration tools: turn a Strimzi `KafkaMirrorMaker2` resource into an MM2 file.
    #[command(after_help = "\
Examples:
  strait config from-strimzi kmm2.yaml --out mm2.properties")]
    Config(config_tools::ConfigArgs),
    /// Say what an MM2 properties file does under strait, without mirroring: the flows and
    /// their settings, every key as used, ignored (and why) or refused, what changes from MM2,
    /// and with --connect the topics and groups each flow would take now. Exit codes: 0 runs,
    /// 1 refused, 3 warnings with --strict, 4 a cluster did not answer (docs/check.md).
    Check(check::CheckArgs),
    /// Connect to a cluster and show its id, brokers, and the API versions strait would use
    /// with it, so a reachability or compatibility problem shows before a mirror is started.
    #[command(after_help = "\
Examples:
  strait probe --bootstrap kafka-1.primary:9092,kafka-2.primary:9092")]
    Probe(probe::ProbeArgs),
}

/// Runs the command. A user's error (a missing file, a bad value, a cluster that does not
/// answer) is printed as `Error:` and its causes on one line, exit status 1, whatever
/// `RUST_BACKTRACE` says: a backtrace is for a bug, which a panic still shows.
fn main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("Error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(command()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("Error: {}", user_error(&e));
            ExitCode::FAILURE
        }
    }
}

/// `e` and its causes, on one line, without a backtrace.
fn user_error(e: &anyhow::Error) -> String {
    format!("{e:#}")
}

async fn command() -> anyhow::Result<ExitCode> {
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
        _ => "warn,strait_kafka::cluster=error,strait_kafka::reach=error",
    };
    if let Some(timeout) = cli.timeout {
        clusters::set_patience(timeout);
    }
    logs::init(
        cli.log_format,
        default_filter,
        cli.verbose,
        cli.log_file.as_deref(),
    )?;
    match cli.command {
        Command::Run(args) => run::run(args).await,
        Command::Flow(args) => flow::run(args).await,
        Command::Reload(args) => reload::run(args).await,
        Command::Mirror(args) => mirror::run(args).await,
        Command::Map(args) => map::run(args).await,
        Command::Offsets(args) => offsets::run(args).await,
        Command::Failover(args) => failover::run(args).await,
        Command::Failback(args) => failback::run(args).await,
        Command::Verify(args) => verify::run(args).await,
        Command::Status(args) => status::run(args).await,
        Command::Check(args) => check::run(args).await,
        Command::Config(args) => config_tools::run(args).await,
        Command::Probe(args) => probe::run(args).await,
    }
}
