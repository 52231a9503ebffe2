//! Log lines through `tracing`, on stderr or in `--log-file`: human-readable by default, one JSON
//! object per line with `--log-format json` (the event's fields at the top level beside
//! `timestamp`, `level`, `target` and `message`). What is logged: `RUST_LOG` if set, else `-v`
//! (info, `-vv` debug, `-vvv` trace), else the command's default ([`Verbosity`]). While
//! `strait mirror` shows progress bars, lines are printed above them (`progress::LogWriter`).
//!
//! No secret reaches a line: config values that hold one are `Secret`s, which print
//! `[redacted]`.

use std::io::IsTerminal as _;
use std::path::Path;

use anyhow::Context as _;
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::EnvFilter;

use crate::progress::LogWriter;

/// `--log-format`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// One line per event, for people: time, level, target, message, fields.
    #[default]
    Human,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Installs the global subscriber: `RUST_LOG` if set, else `-v` given `verbose` times, else
/// `default_filter`; lines go to `file` (appended) when given, else to stderr.
pub(crate) fn init(
    format: LogFormat,
    default_filter: &str,
    verbose: u8,
    file: Option<&Path>,
) -> anyhow::Result<()> {
    let chosen = match verbose {
        0 => default_filter,
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(chosen));
    let (writer, ansi) = match file {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open the log file {}", path.display()))?;
            (BoxMakeWriter::new(std::sync::Mutex::new(file)), false)
        }
        None => (BoxMakeWriter::new(LogWriter), colors()),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    match format {
        LogFormat::Human => builder.with_ansi(ansi).init(),
        LogFormat::Json => builder
            .with_ansi(false)
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .init(),
    }
    Ok(())
}

/// Colours only for a terminal, and not when `NO_COLOR` is set (<https://no-color.org>).
fn colors() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
