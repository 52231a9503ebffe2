//! `strait flow pause|resume FLOW`: one flow of a running `strait run` paused or resumed,
//! through its HTTP API (`POST /v1/flows/{flow}/pause|resume`, `docs/http-api.md`). A pause is
//! done when the flow has finished its round and written its map: the command waits for that
//! and says so.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::bail;
use strait_core::status::FlowState;

use crate::endpoint::{error_of, path_segment, Endpoint};

/// `strait flow` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct FlowArgs {
    #[command(subcommand)]
    command: FlowCommand,
}

/// `strait flow` subcommands.
#[derive(Debug, clap::Subcommand)]
enum FlowCommand {
    /// Pause a flow: it finishes its current round, writes its offset map and reads nothing
    /// more until resumed (checkpoints pause with it). Other flows go on. A pause lasts as long
    /// as the process: a restarted `strait run` runs every enabled flow.
    #[command(after_help = "\
Examples:
  # Pause a flow of the instance on this host (quote the `>`):
  strait flow pause 'A->B'
  # Of an instance elsewhere, with its control token:
  strait flow pause 'A->B' --url http://10.0.0.5:9876 \\
      --control-token-file token")]
    Pause(PauseArgs),
    /// Resume a paused flow from its offset map.
    #[command(after_help = "\
Examples:
  strait flow resume 'A->B'
  strait flow resume 'A->B' --url http://10.0.0.5:9876 \\
      --control-token-file token")]
    Resume(PauseArgs),
}

/// Arguments of `flow pause` and `flow resume`: which flow, of which instance.
#[derive(Debug, clap::Args)]
struct PauseArgs {
    /// The flow, `SOURCE->TARGET` (quote it in a shell: 'A->B').
    flow: String,
    /// The HTTP API of the running instance (`strait run --listen`).
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:9876")]
    url: String,
    #[command(flatten)]
    token: crate::common::ControlTokenArgs,
    /// How long to wait for the flow to reach the state asked for.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    wait_secs: u64,
}

/// Runs `strait flow pause|resume`.
pub(crate) async fn run(args: FlowArgs) -> anyhow::Result<ExitCode> {
    let (args, verb, wanted) = match &args.command {
        FlowCommand::Pause(args) => (args, "pause", FlowState::Paused),
        FlowCommand::Resume(args) => (args, "resume", FlowState::Running),
    };
    let endpoint = Endpoint::parse(&args.url)?.with_token(args.token.token()?);
    let path = format!("/v1/flows/{}/{verb}", path_segment(&args.flow));
    let (code, body) = endpoint
        .request("POST", &path, Duration::from_secs(10))
        .await?;
    if code != 200 {
        bail!("{verb} {}: {}", args.flow, error_of(code, &body));
    }
    // Done when the flow shows the state: paused once its round ended and its map is
    // written; running once a round finished again.
    let deadline = Instant::now() + Duration::from_secs(args.wait_secs);
    loop {
        let report = endpoint.status().await?;
        let state = report
            .flows
            .iter()
            .find(|f| f.flow == args.flow)
            .map(|f| (f.state, f.last_error.clone()));
        match state {
            Some((state, _)) if state == wanted => {
                match wanted {
                    FlowState::Paused => println!(
                        "{}: paused (its last round finished and its offset map is written)",
                        args.flow
                    ),
                    _ => println!("{}: running", args.flow),
                }
                return Ok(ExitCode::SUCCESS);
            }
            Some((state, error)) if Instant::now() >= deadline => bail!(
                "{}: asked to {verb}, still {} after {} s{}",
                args.flow,
                state.name(),
                args.wait_secs,
                error
                    .map(|e| format!(" (last error: {})", e.message))
                    .unwrap_or_default()
            ),
            None if Instant::now() >= deadline => bail!(
                "{}: asked to {verb}, but the instance shows no such flow",
                args.flow
            ),
            _ => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}
