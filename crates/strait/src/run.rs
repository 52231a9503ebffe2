//! `strait run`: its arguments, and the runtime (`strait_runtime`) run until Ctrl-C or SIGTERM,
//! reloaded on SIGHUP; or, with `--until-caught-up`, a one-shot copy. A second Ctrl-C or
//! SIGTERM while the runtime stops exits at once, with 130.

use std::process::ExitCode;

use strait_runtime::{OneShotCopy, Options, Runtime};

use crate::signals;

/// `strait run` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// The MM2 properties file (`connect-mirror-maker.properties` style).
    #[arg(long, value_name = "FILE")]
    config: std::path::PathBuf,
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
    #[command(flatten)]
    token: crate::common::ControlTokenArgs,
}

/// The exit status of a stop cut short by a second signal (as a shell reports Ctrl-C).
const CUT_SHORT: i32 = 130;

/// Runs `strait run`: until stopped (exit 0 once every flow has written its map), or a
/// one-shot copy that fails with the first flow that failed.
pub(crate) async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    if args.until_caught_up {
        let copy = OneShotCopy::start(&args.config, args.listen.0).await?;
        for outcome in copy.run(signals::shutdown(), |_, _| {}).await {
            outcome.result?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let options = Options {
        listen: args.listen.0,
        watch_config: !args.no_watch_config,
        control_token: args.token.token()?,
        ..Options::default()
    };
    let runtime = Runtime::start(args.config.clone(), options).await?;
    let mut hangup = signals::hangup();
    let mut stops = signals::stops();
    loop {
        tokio::select! {
            Some(()) = stops.recv() => break,
            Some(()) = hangup.recv() => {
                tracing::info!(config = %args.config.display(), "SIGHUP: reading the config again");
                // The runtime logs what the reload did, or why the file does not load.
                tokio::select! {
                    Some(()) = stops.recv() => break,
                    _ = runtime.reload() => {}
                }
            }
            // No signal can reach this process (neither could be listened for): it runs until
            // killed.
            else => std::future::pending::<()>().await,
        }
    }
    tokio::select! {
        () = runtime.shutdown() => Ok(ExitCode::SUCCESS),
        Some(()) = stops.recv() => {
            // As after a kill: the next start recovers each flow from the map it last wrote
            // (docs/design.md §4.4).
            tracing::warn!("a second stop signal: exiting now, without waiting for the flows to finish their round");
            eprintln!("strait: a second stop signal: exiting now (status {CUT_SHORT})");
            std::process::exit(CUT_SHORT)
        }
    }
}
