//! Log lines through `tracing`, on stderr: human-readable by default, one JSON object per line
//! with `--log-format json` (the event's fields at the top level beside `timestamp`, `level`,
//! `target` and `message`). `RUST_LOG` picks what is logged. While `strait mirror` shows
//! progress bars, lines are printed above them (`progress::LogWriter`).
//!
//! No secret reaches a line: config values that hold one are `Secret`s, which print
//! `[redacted]`.

use std::io::IsTerminal as _;

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

/// Installs the global subscriber: `RUST_LOG` if set, else `default_filter`.
pub(crate) fn init(format: LogFormat, default_filter: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(LogWriter);
    match format {
        LogFormat::Human => builder.with_ansi(colors()).init(),
        LogFormat::Json => builder
            .with_ansi(false)
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .init(),
    }
}

/// Colours only for a terminal, and not when `NO_COLOR` is set (<https://no-color.org>).
fn colors() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
