//! What several commands share in their arguments.

/// `--listen`: an address, or `None` for `off`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Listen(pub(crate) Option<std::net::SocketAddr>);

pub(crate) fn parse_listen(value: &str) -> Result<Listen, String> {
    if value.eq_ignore_ascii_case("off") {
        return Ok(Listen(None));
    }
    value.parse().map(|addr| Listen(Some(addr))).map_err(|e| {
        format!(
            "{e}: give HOST:PORT with an IP address (e.g. 127.0.0.1:9876 or 0.0.0.0:9876), or off"
        )
    })
}

/// The environment variable that holds the control token itself.
const TOKEN_ENV: &str = "STRAIT_CONTROL_TOKEN";

/// `--control-token-file`, or `STRAIT_CONTROL_TOKEN`: the bearer token of the HTTP API's
/// control requests, for `strait run` (which requires it) and for the commands that send them
/// (`strait flow`, `strait reload`). `docs/security.md`, "The HTTP API".
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ControlTokenArgs {
    /// A file holding the bearer token of the HTTP API's pause, resume and reload (its
    /// whitespace around it trimmed). Without it, the token is read from
    /// STRAIT_CONTROL_TOKEN_FILE, else from STRAIT_CONTROL_TOKEN itself; without any, control
    /// needs no token on a loopback address and is refused on any other.
    #[arg(long, value_name = "FILE")]
    control_token_file: Option<std::path::PathBuf>,
}

impl ControlTokenArgs {
    /// The token given, if any: the file named by the flag or `STRAIT_CONTROL_TOKEN_FILE`,
    /// else `STRAIT_CONTROL_TOKEN`. An empty variable is none.
    pub(crate) fn token(&self) -> anyhow::Result<Option<strait_runtime::ControlToken>> {
        use anyhow::Context as _;
        let from_env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let file = self
            .control_token_file
            .clone()
            .or_else(|| from_env("STRAIT_CONTROL_TOKEN_FILE").map(Into::into));
        let (value, source) = match file {
            Some(path) => {
                let value = std::fs::read_to_string(&path).with_context(|| {
                    format!("cannot read the control token file {}", path.display())
                })?;
                (value, path.display().to_string())
            }
            None => match from_env(TOKEN_ENV) {
                Some(value) => (value, TOKEN_ENV.to_owned()),
                None => return Ok(None),
            },
        };
        strait_runtime::ControlToken::new(&value)
            .map(Some)
            .with_context(|| format!("the control token of {source}"))
    }
}
