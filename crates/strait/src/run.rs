//! `strait run`: its arguments, and the entry that runs the flows until stopped under the
//! supervisor (`supervisor.rs`) or copies once (`runtime.rs`).

use std::path::Path;

use crate::runtime::start;

/// `strait run` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// The MM2 properties file (`connect-mirror-maker.properties` style).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: std::path::PathBuf,
    /// Exit once every partition has reached the source end it had at start (a one-shot copy)
    /// instead of mirroring until stopped.
    #[arg(long)]
    until_caught_up: bool,
    /// Where the HTTP API listens (`/healthz`, `/v1/translate`, `/v1/groups/GROUP`; see
    /// docs/http-api.md), or `off`.
    #[arg(long, value_name = "HOST:PORT|off", default_value = "127.0.0.1:9876", value_parser = crate::common::parse_listen)]
    listen: crate::common::Listen,
    /// Do not reload when the config file changes (SIGHUP and `strait reload` still do).
    /// By default the file is compared every 5 s with what was last loaded.
    #[arg(long)]
    no_watch_config: bool,
}

/// Runs `strait run`: until stopped under the supervisor (`supervisor.rs`), or a one-shot copy.
pub(crate) async fn run(args: RunArgs) -> anyhow::Result<()> {
    if args.until_caught_up {
        return run_until_caught_up(&args.config, args.listen.0).await;
    }
    crate::supervisor::run(crate::supervisor::RunOptions {
        path: args.config,
        listen: args.listen.0,
        watch_config: !args.no_watch_config,
    })
    .await
}

/// `strait run --until-caught-up`: start, copy, and fail with the first flow that failed.
async fn run_until_caught_up(
    path: &Path,
    listen: Option<std::net::SocketAddr>,
) -> anyhow::Result<()> {
    let mirroring = start(path, listen).await?;
    for outcome in mirroring.run(|_, _| {}).await {
        outcome.result?;
    }
    Ok(())
}
