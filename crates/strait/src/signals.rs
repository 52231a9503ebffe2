//! The process's signals, as the commands that run flows use them: Ctrl-C or SIGTERM to stop
//! (`strait run`, `strait mirror`), SIGHUP to reload (`strait run`).

use tokio::sync::mpsc;

/// Ctrl-C or SIGTERM.
pub(crate) async fn shutdown() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// SIGHUP as a stream of `()`; never fires where there are no such signals.
pub(crate) fn hangup() -> mpsc::Receiver<()> {
    let (tx, rx) = mpsc::channel(1);
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::hangup()) {
            Ok(mut hup) => {
                tokio::spawn(async move {
                    while hup.recv().await.is_some() {
                        let _ = tx.try_send(());
                    }
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGHUP: reload with POST /v1/reload")
            }
        }
    }
    #[cfg(not(unix))]
    drop(tx);
    rx
}
