//! `strait reload`: a running `strait run` reads its config file again, as SIGHUP does, through
//! its HTTP API (`POST /v1/reload`, `docs/http-api.md`); prints what the reload did, flow by
//! flow ([`Reloaded`]).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context as _};
use strait_runtime::Reloaded;

use crate::endpoint::{error_of, Endpoint};

/// How long a reload may take to answer: changed flows finish their round first.
const RELOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// `strait reload` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct ReloadArgs {
    /// The HTTP API of the running instance (`strait run --listen`).
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:9876")]
    url: String,
    #[command(flatten)]
    token: crate::common::ControlTokenArgs,
}

/// Runs `strait reload`.
pub(crate) async fn run(args: ReloadArgs) -> anyhow::Result<ExitCode> {
    let endpoint = Endpoint::parse(&args.url)?.with_token(args.token.token()?);
    let (code, body) = endpoint
        .request("POST", "/v1/reload", RELOAD_TIMEOUT)
        .await?;
    if code != 200 {
        bail!("reload: {}", error_of(code, &body));
    }
    let done: Reloaded = serde_json::from_str(&body)
        .with_context(|| format!("{} did not say what the reload did: {body}", endpoint.url))?;
    for (what, names) in [
        ("started", &done.started),
        ("restarted", &done.restarted),
        ("stopped", &done.stopped),
        ("unchanged", &done.unchanged),
    ] {
        let names = if names.is_empty() {
            "-".to_owned()
        } else {
            names.join(", ")
        };
        println!("{what:<10} {names}");
    }
    Ok(ExitCode::SUCCESS)
}
