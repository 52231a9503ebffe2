//! One connection to one broker: framing, ApiVersions negotiation, pipelined requests matched by
//! correlation id, a timeout per request, broker throttling honoured (KIP-219), and a single
//! failure delivered to every waiting request.
//!
//! Requests are written in the order they are made and may be many in flight; the broker answers
//! in order on one connection, but we match by correlation id anyway. When the connection breaks
//! (I/O error, a frame that makes no sense, a request that times out), it is *poisoned*: every
//! waiter gets the same error once, later requests fail at once, and the cluster layer makes a new
//! connection with backoff.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::{Message, Request, StrBytes};
use strait_wire::frame::{self, Versions};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::throttle::ThrottleTime;

/// A byte stream to a broker: TCP now, TLS later.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Stream for T {}

/// A boxed future, for the [`Transport`] seam.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How to open a byte stream to a broker address. The seam where TLS goes: a TLS transport wraps
/// the TCP stream before any Kafka byte is sent. SASL, which speaks Kafka frames, goes after the
/// ApiVersions exchange in [`BrokerConnection::connect`].
pub trait Transport: Send + Sync + fmt::Debug + 'static {
    /// Opens a stream to `addr` (`host:port`).
    fn connect<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, std::io::Result<Box<dyn Stream>>>;
}

/// Plain TCP, `security.protocol=PLAINTEXT`.
#[derive(Debug, Default, Clone, Copy)]
pub struct TcpTransport;

impl Transport for TcpTransport {
    fn connect<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, std::io::Result<Box<dyn Stream>>> {
        Box::pin(async move {
            let stream = tokio::net::TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            Ok(Box::new(stream) as Box<dyn Stream>)
        })
    }
}

/// Settings of a connection.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    /// `client.id` sent in every request header.
    pub client_id: String,
    /// How long a request may wait for its answer (Kafka's `request.timeout.ms`, default 30 s).
    pub request_timeout: Duration,
    /// How long connecting, including ApiVersions, may take (default 10 s).
    pub connect_timeout: Duration,
    /// The largest response frame accepted, in bytes (default 256 MiB). Bounds what a bad peer
    /// can make us allocate.
    pub max_response_bytes: usize,
    /// How to open the byte stream.
    pub transport: Arc<dyn Transport>,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        Self {
            client_id: "strait".to_owned(),
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            max_response_bytes: 256 * 1024 * 1024,
            transport: Arc::new(TcpTransport),
        }
    }
}

type Waiter = oneshot::Sender<Result<Bytes>>;

#[derive(Debug, Default)]
struct Shared {
    /// Requests sent and not answered, by correlation id.
    pending: HashMap<i32, Waiter>,
    /// Set once; every later request gets it.
    poisoned: Option<Error>,
}

impl Shared {
    fn poison(&mut self, err: Error) {
        if self.poisoned.is_none() {
            self.poisoned = Some(err.clone());
        }
        for (_, waiter) in self.pending.drain() {
            let _ = waiter.send(Err(err.clone()));
        }
    }
}

/// A live connection to one broker.
pub struct BrokerConnection {
    addr: String,
    config: ConnectionConfig,
    versions: Versions,
    next_correlation: AtomicI32,
    /// Frames to write, in order. A task owns the socket's write half, so a caller that gives
    /// up half-way through never leaves half a frame on the wire.
    writer: mpsc::UnboundedSender<Bytes>,
    shared: Arc<StdMutex<Shared>>,
    /// Until when the broker asked us not to send (KIP-219).
    throttled_until: StdMutex<Option<Instant>>,
    reader: JoinHandle<()>,
    writer_task: JoinHandle<()>,
}

impl fmt::Debug for BrokerConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BrokerConnection")
            .field("addr", &self.addr)
            .field("poisoned", &self.is_poisoned())
            .finish_non_exhaustive()
    }
}

impl Drop for BrokerConnection {
    fn drop(&mut self) {
        self.reader.abort();
        self.writer_task.abort();
    }
}

impl BrokerConnection {
    /// Connects and negotiates API versions.
    pub async fn connect(addr: &str, config: ConnectionConfig) -> Result<Arc<Self>> {
        let io_err = |e: std::io::Error| Error::Io {
            broker: addr.to_owned(),
            message: e.to_string(),
        };
        let timeout = config.connect_timeout;
        let stream = tokio::time::timeout(timeout, config.transport.connect(addr))
            .await
            .map_err(|_| Error::Io {
                broker: addr.to_owned(),
                message: format!("connect timed out after {timeout:?}"),
            })?
            .map_err(io_err)?;
        let (read_half, write_half) = tokio::io::split(stream);
        let shared = Arc::new(StdMutex::new(Shared::default()));
        let reader = tokio::spawn(read_loop(
            addr.to_owned(),
            read_half,
            Arc::clone(&shared),
            config.max_response_bytes,
        ));
        let (writer, frames) = mpsc::unbounded_channel();
        let writer_task = tokio::spawn(write_loop(
            addr.to_owned(),
            write_half,
            frames,
            Arc::clone(&shared),
        ));
        let mut conn = Self {
            addr: addr.to_owned(),
            config,
            versions: Versions::default(),
            next_correlation: AtomicI32::new(0),
            writer,
            shared,
            throttled_until: StdMutex::new(None),
            reader,
            writer_task,
        };
        conn.versions = tokio::time::timeout(timeout, conn.negotiate())
            .await
            .map_err(|_| Error::Timeout {
                broker: addr.to_owned(),
                api: ApiKey::ApiVersions,
                after: timeout,
            })??;
        tracing::debug!(broker = addr, "connected");
        Ok(Arc::new(conn))
    }

    /// ApiVersions at the highest version we speak; a broker that does not know it answers
    /// UNSUPPORTED_VERSION in the v0 format with its own range, and we ask again at that.
    async fn negotiate(&self) -> Result<Versions> {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("strait"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let mut version = ApiVersionsRequest::VERSIONS.max;
        for _ in 0..2 {
            let resp: ApiVersionsResponse = self.send_at(&request, version).await?;
            match ResponseError::try_from_code(resp.error_code) {
                None => return Ok(Versions::from_response(&resp)),
                Some(ResponseError::UnsupportedVersion) => {
                    let theirs = resp
                        .api_keys
                        .iter()
                        .find(|k| k.api_key == ApiKey::ApiVersions as i16)
                        .map_or(0, |k| k.max_version);
                    version = theirs.clamp(0, version);
                }
                Some(code) => return Err(Error::broker(code, None, Default::default())),
            }
        }
        Err(Error::Unexpected {
            broker: self.addr.clone(),
            what: "ApiVersions negotiation did not converge".into(),
        })
    }

    /// `host:port` of the broker.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// What the broker speaks.
    pub fn versions(&self) -> &Versions {
        &self.versions
    }

    /// Whether this connection is dead (a new one is needed).
    pub fn is_poisoned(&self) -> bool {
        self.shared
            .lock()
            .map(|s| s.poisoned.is_some())
            .unwrap_or(true)
    }

    /// Sends a request at the highest common version and waits for its answer.
    pub async fn send<R>(&self, request: &R) -> Result<R::Response>
    where
        R: Request + Sync,
        R::Response: ThrottleTime,
    {
        let version = self.versions.pick::<R>().map_err(|source| Error::Version {
            broker: self.addr.clone(),
            source,
        })?;
        let response = self.send_at(request, version).await?;
        if let Some(ms) = response.throttle_time_ms().filter(|ms| *ms > 0) {
            let until = Instant::now() + Duration::from_millis(ms as u64);
            tracing::debug!(broker = %self.addr, throttle_ms = ms, "broker throttled us");
            if let Ok(mut t) = self.throttled_until.lock() {
                *t = Some(t.map_or(until, |old| old.max(until)));
            }
        }
        Ok(response)
    }

    /// The version [`send`](Self::send) would use for `R`.
    pub fn version_of<R: Request>(&self) -> Result<i16> {
        self.versions.pick::<R>().map_err(|source| Error::Version {
            broker: self.addr.clone(),
            source,
        })
    }

    /// Sends at an explicit version.
    pub async fn send_at<R: Request + Sync>(
        &self,
        request: &R,
        version: i16,
    ) -> Result<R::Response> {
        let api = frame::api_key_of::<R>().map_err(|e| self.frame_err(e))?;
        self.wait_for_throttle().await;
        let correlation_id = self.next_correlation.fetch_add(1, Ordering::Relaxed);
        let bytes = frame::encode_request(request, version, correlation_id, &self.config.client_id)
            .map_err(|e| Error::Invalid(e.to_string()))?;
        let (tx, rx) = oneshot::channel();
        {
            let mut shared = self.shared.lock().map_err(|_| Error::Closed)?;
            if let Some(err) = &shared.poisoned {
                return Err(err.clone());
            }
            shared.pending.insert(correlation_id, tx);
        }
        let timeout = self.config.request_timeout;
        if self.writer.send(bytes).is_err() {
            // The writer is gone, so the connection was poisoned and our waiter got the error.
            return Err(rx.await.ok().and_then(Result::err).unwrap_or(Error::Closed));
        }
        let frame = match tokio::time::timeout(timeout, rx).await {
            Ok(result) => result.unwrap_or(Err(Error::Closed))?,
            Err(_) => {
                let err = Error::Timeout {
                    broker: self.addr.clone(),
                    api,
                    after: timeout,
                };
                self.poison(err.clone());
                return Err(err);
            }
        };
        let decoded = frame::decode_response::<R>(version, frame).map_err(|e| {
            let err = self.frame_err(e);
            // A response we cannot read means we no longer know where the stream is.
            self.poison(err.clone());
            err
        })?;
        if decoded.correlation_id != correlation_id {
            let err = Error::Unexpected {
                broker: self.addr.clone(),
                what: format!(
                    "response header correlation id {} for request {correlation_id}",
                    decoded.correlation_id
                ),
            };
            self.poison(err.clone());
            return Err(err);
        }
        Ok(decoded.body)
    }

    async fn wait_for_throttle(&self) {
        let until = self.throttled_until.lock().ok().and_then(|t| *t);
        if let Some(until) = until {
            tokio::time::sleep_until(until).await;
        }
    }

    fn frame_err(&self, e: strait_wire::FrameError) -> Error {
        Error::Frame {
            broker: self.addr.clone(),
            source: Arc::new(e),
        }
    }

    /// Closes the connection, failing every waiter with `err`.
    fn poison(&self, err: Error) {
        if let Ok(mut shared) = self.shared.lock() {
            shared.poison(err);
        }
        self.reader.abort();
        self.writer_task.abort();
    }
}

async fn write_loop(
    addr: String,
    mut writer: impl AsyncWrite + Unpin,
    mut frames: mpsc::UnboundedReceiver<Bytes>,
    shared: Arc<StdMutex<Shared>>,
) {
    while let Some(frame) = frames.recv().await {
        if let Err(e) = writer.write_all(&frame).await {
            let err = Error::Io {
                broker: addr.clone(),
                message: e.to_string(),
            };
            if let Ok(mut s) = shared.lock() {
                s.poison(err);
            }
            return;
        }
    }
    let _ = writer.shutdown().await;
}

async fn read_loop(
    addr: String,
    mut reader: impl AsyncRead + Unpin,
    shared: Arc<StdMutex<Shared>>,
    max_frame: usize,
) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let err = loop {
        match frame::split_frame(&mut buf, max_frame) {
            Ok(Some(frame)) => {
                let id = match frame::peek_correlation_id(&frame) {
                    Ok(id) => id,
                    Err(e) => break frame_error(&addr, e),
                };
                let waiter = match shared.lock() {
                    Ok(mut s) => s.pending.remove(&id),
                    Err(_) => break Error::Closed,
                };
                match waiter {
                    Some(w) => {
                        let _ = w.send(Ok(frame));
                    }
                    None => {
                        break Error::Unexpected {
                            broker: addr.clone(),
                            what: format!("response for unknown correlation id {id}"),
                        }
                    }
                }
                continue;
            }
            Ok(None) => {}
            Err(e) => break frame_error(&addr, e),
        }
        match reader.read_buf(&mut buf).await {
            Ok(0) => {
                break Error::Io {
                    broker: addr.clone(),
                    message: "connection closed by broker".into(),
                }
            }
            Ok(_) => {}
            Err(e) => {
                break Error::Io {
                    broker: addr.clone(),
                    message: e.to_string(),
                }
            }
        }
    };
    tracing::debug!(broker = %addr, error = %err, "connection closed");
    if let Ok(mut s) = shared.lock() {
        s.poison(err);
    }
}

fn frame_error(addr: &str, e: strait_wire::FrameError) -> Error {
    Error::Frame {
        broker: addr.to_owned(),
        source: Arc::new(e),
    }
}
