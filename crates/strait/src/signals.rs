//! The process's signals, as the commands that run flows use them: Ctrl-C or SIGTERM to stop
//! (`strait run`, `strait mirror`; for `strait run` a second one during the stop exits at once,
//! [`stops`]), SIGHUP to reload (`strait run`).

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

/// Every Ctrl-C or SIGTERM from now on, as a stream of `()`: the first asks for a graceful
/// stop, the next one may cut it short.
pub(crate) fn stops() -> mpsc::Receiver<()> {
    let (tx, rx) = mpsc::channel(2);
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let term = signal(SignalKind::terminate());
            let int = signal(SignalKind::interrupt());
            if let (Ok(mut term), Ok(mut int)) = (term, int) {
                loop {
                    tokio::select! {
                        Some(()) = term.recv() => {}
                        Some(()) = int.recv() => {}
                        else => return,
                    }
                    if tx.send(()).await.is_err() {
                        return;
                    }
                }
            }
        }
        while tokio::signal::ctrl_c().await.is_ok() {
            if tx.send(()).await.is_err() {
                return;
            }
        }
    });
    rx
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
