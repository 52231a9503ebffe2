//! Runtime control of a running [`Runtime`](crate::Runtime): pause and resume one flow, reload
//! the config file. The same requests come from the runtime's handle (a test, the binary on
//! SIGHUP) and from the HTTP API (`POST /v1/flows/{flow}/pause|resume`, `POST /v1/reload`,
//! which `strait flow` and `strait reload` call); the answers here are the API's bodies too
//! (`docs/http-api.md`).

use serde::{Deserialize, Serialize};
use strait_core::config::ConfigError;
use tokio::sync::{mpsc, oneshot};

/// What a reload did, by flow name: the answer of [`Runtime::reload`](crate::Runtime::reload)
/// and of `POST /v1/reload`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reloaded {
    /// Flows new in the file, started.
    pub started: Vec<String>,
    /// Flows whose settings (or their clusters') changed, restarted after their round.
    pub restarted: Vec<String>,
    /// Flows no longer in the file, stopped after their round.
    pub stopped: Vec<String>,
    /// Flows left running as they were.
    pub unchanged: Vec<String>,
}

/// What the operator asked of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Requested {
    /// Pause after the current round.
    Pause,
    /// Run (resume).
    Run,
}

/// The answer to a pause or resume: of [`Runtime::pause`](crate::Runtime::pause) and
/// `POST /v1/flows/{flow}/pause|resume`. The flow gets there in its own time (a pause once its
/// round finished and its map is written): its status says when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowRequested {
    /// `A->B`.
    pub flow: String,
    /// What was asked.
    pub requested: Requested,
    /// Whether that changes anything (`false`: it was already asked).
    pub changed: bool,
}

/// Why a control request was not carried out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    /// The runtime runs no flow of that name.
    #[error("no flow {flow}; this instance runs {}", running.join(", "))]
    NoFlow {
        /// The name asked for.
        flow: String,
        /// The flows it runs.
        running: Vec<String>,
    },
    /// The config file does not load now: nothing changed.
    #[error("{0}; the flows run on as before")]
    Reload(ConfigError),
    /// The runtime is stopping, or stopped.
    #[error("strait is stopping")]
    Stopping,
    /// A one-shot copy takes no control requests.
    #[error("this is a one-shot copy: it takes no pause, resume or reload")]
    OneShot,
}

/// A request for the runtime's supervisor, with where its answer goes.
#[derive(Debug)]
pub(crate) enum ControlRequest {
    /// Pause the named flow after its current round.
    Pause(String, oneshot::Sender<Result<FlowRequested, ControlError>>),
    /// Resume the named flow.
    Resume(String, oneshot::Sender<Result<FlowRequested, ControlError>>),
    /// Read the config file again and restart the flows whose settings changed.
    Reload(oneshot::Sender<Result<Reloaded, ControlError>>),
}

/// Hands a request to the supervisor behind `control` and waits for its answer.
pub(crate) async fn ask<T>(
    control: &mpsc::Sender<ControlRequest>,
    request: impl FnOnce(oneshot::Sender<Result<T, ControlError>>) -> ControlRequest,
) -> Result<T, ControlError> {
    let (reply, answer) = oneshot::channel();
    control
        .send(request(reply))
        .await
        .map_err(|_| ControlError::Stopping)?;
    answer.await.map_err(|_| ControlError::Stopping)?
}
