//! `strait run`: its arguments, and the runtime (`strait_runtime`) run until Ctrl-C or SIGTERM,
//! reloaded on SIGHUP; or, with `--until-caught-up`, a one-shot copy.

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
}

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
    };
    let runtime = Runtime::start(args.config.clone(), options).await?;
    let mut hangup = signals::hangup();
    let stop = signals::shutdown();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => break,
            Some(()) = hangup.recv() => {
                tracing::info!(config = %args.config.display(), "SIGHUP: reading the config again");
                // The runtime logs what the reload did, or why the file does not load.
                tokio::select! {
                    () = &mut stop => break,
                    _ = runtime.reload() => {}
                }
            }
        }
    }
    runtime.shutdown().await;
    Ok(ExitCode::SUCCESS)
}
