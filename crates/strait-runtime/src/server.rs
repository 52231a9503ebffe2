//! The HTTP server under the API (`docs/http-api.md`, "Limits"): an accept loop serving a
//! router over hyper's HTTP/1 connections, so that no client can hold the process.
//!
//! - A client has [`HttpLimits::header_read_timeout`] to send a request's head (the first, and
//!   each next one on a kept-alive connection), else its connection is closed.
//! - A request is answered within [`HttpLimits::request_timeout`] (a control request within
//!   [`HttpLimits::control_timeout`]: a reload waits for the changed flows' rounds), else 503.
//! - At most [`HttpLimits::max_connections`] connections are open at once; one more is closed
//!   as soon as it is accepted.
//! - On stop, no connection is accepted any more, the open ones are asked to close after their
//!   answer, and after [`HttpLimits::shutdown_grace`] those still open are dropped.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

/// The HTTP server's limits; the defaults suit `strait run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// How long a client may take to send a request's head: 10 s.
    pub header_read_timeout: Duration,
    /// How long a read (`GET`) may take to be answered: 30 s.
    pub request_timeout: Duration,
    /// How long a control request may take to be answered: 120 s (a reload answers once the
    /// flows it restarts have finished their round).
    pub control_timeout: Duration,
    /// How many connections may be open at once: 64.
    pub max_connections: usize,
    /// How long a stop waits for the open connections before it drops them: 5 s.
    pub shutdown_grace: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            header_read_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            control_timeout: Duration::from_secs(120),
            max_connections: 64,
            shutdown_grace: Duration::from_secs(5),
        }
    }
}

/// Middleware: answers 503 when the handler has not answered within its time.
pub(crate) async fn time_limit(
    State(limit): State<Duration>,
    request: Request,
    next: Next,
) -> Response {
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(answer) => answer,
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({
                "error": format!("no answer within {} s; try again", limit.as_secs())
            })),
        )
            .into_response(),
    }
}

/// Serves `router` on `listener` within `limits` until `stop` resolves, then for at most
/// [`HttpLimits::shutdown_grace`] more.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: HttpLimits,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // Past its largest count a semaphore panics: that many connections is no cap anyway.
    let slots = Arc::new(Semaphore::new(
        limits.max_connections.min(Semaphore::MAX_PERMITS),
    ));
    let (stopping, stopped) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut full_told = false;
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut stop => break,
            // Reaps finished connections, so the set holds only open ones.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, or a connection reset before it was accepted:
                    // the next accept may do better.
                    tracing::debug!(error = %e, "HTTP API: cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            if !full_told {
                tracing::warn!(
                    %peer,
                    max = limits.max_connections,
                    "HTTP API: too many open connections; closing new ones until some end"
                );
                full_told = true;
            }
            drop(stream);
            continue;
        };
        full_told = false;
        connections.spawn(connection(
            stream,
            peer,
            router.clone(),
            limits,
            stopped.clone(),
            slot,
        ));
    }
    drop(listener);
    let _ = stopping.send(true);
    let drained = tokio::time::timeout(limits.shutdown_grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::info!(
            open = connections.len(),
            "HTTP API: connections still open after {} s; closing them",
            limits.shutdown_grace.as_secs_f64()
        );
        connections.shutdown().await;
    }
    Ok(())
}

/// One connection, served until it closes, or asked to close when `stopped` turns true.
async fn connection(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    router: Router,
    limits: HttpLimits,
    mut stopped: watch::Receiver<bool>,
    _slot: tokio::sync::OwnedSemaphorePermit,
) {
    let service = hyper::service::service_fn(move |mut request: Request<hyper::body::Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        tower_service::Service::call(&mut router.clone(), request)
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let mut asked_to_close = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "HTTP API: connection ended");
                }
                return;
            }
            changed = stopped.changed(), if !asked_to_close => {
                if changed.is_err() || *stopped.borrow() {
                    conn.as_mut().graceful_shutdown();
                    asked_to_close = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::routing::get;

    /// A route answering after `wait`, within `limit`.
    fn slow(wait: Duration, limit: Duration) -> Router {
        Router::new()
            .route(
                "/slow",
                get(move || async move {
                    tokio::time::sleep(wait).await;
                    "done"
                }),
            )
            .route_layer(axum::middleware::from_fn_with_state(limit, time_limit))
    }

    async fn status(router: Router) -> StatusCode {
        let request = Request::get("/slow")
            .body(Body::empty())
            .expect("a request");
        match tower_service::Service::call(&mut router.clone(), request).await {
            Ok(answer) => answer.status(),
            Err(never) => match never {},
        }
    }

    #[tokio::test]
    async fn an_answer_past_its_time_is_503() {
        let late = slow(Duration::from_secs(10), Duration::from_millis(50));
        assert_eq!(status(late).await, StatusCode::SERVICE_UNAVAILABLE);
        let in_time = slow(Duration::from_millis(1), Duration::from_secs(10));
        assert_eq!(status(in_time).await, StatusCode::OK);
    }
}
