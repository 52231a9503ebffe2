//! strait's runtime: the flows of an MM2 config file run as `strait run` and `strait mirror`
//! run them, as library code a test starts and stops in this process.
//!
//! - [`Runtime`] (`supervisor/`): every enabled flow kept running until shut down, each on its
//!   own (waiting for its clusters, restarted after failures, paused and resumed), reloaded when
//!   the file changes or when asked ([`control`]), with heartbeats and, for flows run by
//!   workers, a place in the flow's workers' group.
//! - [`OneShotCopy`] (`copy/`): every enabled flow copied once, until each caught up with the
//!   source end it saw at start.
//! - `flow.rs`: one flow connected, placed where its map ends and run with its checkpoints,
//!   group sync and topic ACL sync beside it, for both (its producer and fetch settings from
//!   the file in `settings.rs`).
//! - `http.rs`: the HTTP API both serve (`docs/http-api.md`), with [`rows`] shared with the
//!   commands' `--json`; `access.rs` says who may send its control requests ([`ControlToken`]),
//!   `server.rs` serves it within [`HttpLimits`].
//!
//! Errors are [`Error`]s that say whether trying again can help. The flows' status board and
//! metrics registry are one per process (`strait_core::status`, `strait_core::metrics`), keyed
//! by flow name: runtimes started side by side in one process share them. The binary
//! (`crates/strait`) parses arguments, turns signals into [`Runtime::reload`] and
//! [`Runtime::shutdown`], prints and exits.

mod access;
pub mod control;
mod copy;
mod error;
mod flow;
mod http;
pub mod rows;
mod server;
mod settings;
mod supervisor;

pub use access::{BadToken, ControlToken};
pub use control::{ControlError, FlowRequested, Reloaded, Requested};
pub use copy::OneShotCopy;
pub use error::Error;
pub use flow::{FlowOutcome, StartedFlow};
pub use server::HttpLimits;
pub use supervisor::{Options, Runtime};
