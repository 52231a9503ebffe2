//! `strait flow pause|resume FLOW` and `strait reload`: the runtime control of a running
//! `strait run`, through its HTTP API (`POST /v1/flows/{flow}/pause|resume`, `POST /v1/reload`;
//! `docs/http-api.md`). A pause is done when the flow has finished its round and written its
//! map: the command waits for that and says so.

use std::time::{Duration, Instant};

use anyhow::bail;
use serde_json::Value;
use strait_core::status::FlowState;

use crate::endpoint::{path_segment, Endpoint};

/// How long a reload may take to answer: changed flows finish their round first.
const RELOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// `strait flow` subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum FlowCommand {
    /// Pause a flow: it finishes its current round, writes its offset map and reads nothing
    /// more until resumed (checkpoints pause with it). Other flows go on. A pause lasts as long
    /// as the process: a restarted `strait run` runs every enabled flow.
    Pause(FlowArgs),
    /// Resume a paused flow from its offset map.
    Resume(FlowArgs),
}

/// Which flow, of which instance.
#[derive(Debug, clap::Args)]
pub(crate) struct FlowArgs {
    /// The flow, `SOURCE->TARGET` (quote it in a shell: 'A->B').
    flow: String,
    /// The HTTP API of the running instance (`strait run --listen`).
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:9876")]
    url: String,
    /// How long to wait for the flow to reach the state asked for.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    wait_secs: u64,
}

/// `strait reload` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct ReloadArgs {
    /// The HTTP API of the running instance (`strait run --listen`).
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:9876")]
    url: String,
}

/// Runs `strait flow pause|resume`.
pub(crate) async fn flow(command: FlowCommand) -> anyhow::Result<()> {
    let (args, verb, wanted) = match &command {
        FlowCommand::Pause(args) => (args, "pause", FlowState::Paused),
        FlowCommand::Resume(args) => (args, "resume", FlowState::Running),
    };
    let endpoint = Endpoint::parse(&args.url)?;
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
                return Ok(());
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

/// Runs `strait reload`.
pub(crate) async fn reload(args: ReloadArgs) -> anyhow::Result<()> {
    let endpoint = Endpoint::parse(&args.url)?;
    let (code, body) = endpoint
        .request("POST", "/v1/reload", RELOAD_TIMEOUT)
        .await?;
    if code != 200 {
        bail!("reload: {}", error_of(code, &body));
    }
    let done: Value = serde_json::from_str(&body).unwrap_or_default();
    for what in ["started", "restarted", "stopped", "unchanged"] {
        let names: Vec<&str> = done[what]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        println!(
            "{what:<10} {}",
            if names.is_empty() {
                "-".to_owned()
            } else {
                names.join(", ")
            }
        );
    }
    Ok(())
}

/// The `{"error": ...}` of an answer, or the answer.
fn error_of(code: u16, body: &str) -> String {
    match serde_json::from_str::<Value>(body) {
        Ok(v) if v["error"].is_string() => v["error"].as_str().unwrap_or_default().to_owned(),
        _ => format!("answered {code}: {}", body.trim()),
    }
}
