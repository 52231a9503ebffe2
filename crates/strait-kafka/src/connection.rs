//! One connection to one broker: framing, ApiVersions negotiation, pipelined requests matched by
//! correlation id, a timeout per request, broker throttling honoured (KIP-219), and a single
//! failure delivered to every waiting request.
//!
//! Requests are written in the order they are made and may be many in flight; the broker answers
//! in order on one connection, but we match by correlation id anyway. When the connection breaks
//! (I/O error, a frame that makes no sense, a request that times out), it is *poisoned*: every
//! waiter gets the same error once, later requests fail at once, and the cluster layer makes a new
//! connection with backoff.
//!
//! Security ([`Security`]): TLS wraps the TCP stream before any Kafka byte is sent
//! ([`crate::tls`]); SASL runs after ApiVersions and again before the broker's session ends
//! ([`crate::sasl`]). Errors of either name the cluster (when the config gave its alias) and
//! the broker address.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, ProduceRequest, SaslAuthenticateRequest,
    SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Message, Request, StrBytes};
use strait_wire::frame::{self, Frame, ProduceBody, Versions};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, RwLock};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::sasl::{self, SaslConfig};
use crate::throttle::ThrottleTime;
use crate::tls::{self, TlsConfig};

/// The last Produce version of Kafka's first transaction protocol (KIP-890: from v12 the
/// broker may add partitions to a transaction implicitly).
const LAST_PRODUCE_OF_FIRST_TRANSACTIONS: i16 = 11;

pub use crate::transport::{BoxFuture, Stream, TcpTransport, Transport};

impl sasl::SaslChannel for BrokerConnection {
    fn addr(&self) -> &str {
        &self.addr
    }

    fn authentication_error(&self, mechanism: &'static str, message: String) -> Error {
        BrokerConnection::authentication_error(self, mechanism, message)
    }

    fn sasl_versions(&self) -> (Option<i16>, Option<i16>) {
        (
            self.version_of::<SaslHandshakeRequest>().ok(),
            self.version_of::<SaslAuthenticateRequest>().ok(),
        )
    }

    fn handshake(
        &self,
        request: &SaslHandshakeRequest,
        version: i16,
    ) -> impl Future<Output = Result<SaslHandshakeResponse>> + Send {
        self.send_during_authentication(request, version)
    }

    fn exchange(
        &self,
        request: &SaslAuthenticateRequest,
        version: i16,
    ) -> impl Future<Output = Result<SaslAuthenticateResponse>> + Send {
        self.send_during_authentication(request, version)
    }
}

/// How a cluster's connections are secured: Kafka's `security.protocol` and what it needs.
/// The default is `PLAINTEXT` (neither).
#[derive(Debug, Clone, Default)]
pub struct Security {
    /// TLS (`SSL`, `SASL_SSL`).
    pub tls: Option<Arc<TlsConfig>>,
    /// SASL (`SASL_PLAINTEXT`, `SASL_SSL`).
    pub sasl: Option<Arc<SaslConfig>>,
}

impl Security {
    /// `security.protocol` as Kafka spells it.
    pub fn protocol(&self) -> &'static str {
        match (self.tls.is_some(), self.sasl.is_some()) {
            (false, false) => "PLAINTEXT",
            (true, false) => "SSL",
            (false, true) => "SASL_PLAINTEXT",
            (true, true) => "SASL_SSL",
        }
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
    /// TLS and SASL.
    pub security: Security,
    /// The alias of the cluster (`A`), for messages; `None` when unknown.
    pub cluster: Option<String>,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        Self {
            client_id: "strait".to_owned(),
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            max_response_bytes: 256 * 1024 * 1024,
            transport: Arc::new(TcpTransport),
            security: Security::default(),
            cluster: None,
        }
    }
}

/// Who is at the other end, for errors: the address, the cluster's alias, and the TLS settings
/// (a broken TLS stream is described as a TLS problem).
#[derive(Debug, Clone)]
struct Peer {
    addr: String,
    cluster: Option<Arc<str>>,
    tls: Option<Arc<TlsConfig>>,
}

impl Peer {
    fn new(addr: &str, config: &ConnectionConfig) -> Self {
        Self {
            addr: addr.to_owned(),
            cluster: config.cluster.as_deref().map(Arc::from),
            tls: config.security.tls.clone(),
        }
    }

    /// An I/O error of the stream: a TLS error when TLS says what went wrong.
    fn io_error(&self, e: &std::io::Error, during_handshake: bool) -> Error {
        if let Some(tls) = &self.tls {
            let host = self
                .addr
                .rsplit_once(':')
                .map_or(&self.addr[..], |(h, _)| h);
            if let Some(message) = tls::describe(e, tls, host, during_handshake) {
                return Error::Tls {
                    cluster: self.cluster.clone(),
                    broker: self.addr.clone(),
                    message: message.into(),
                };
            }
        }
        Error::Io {
            broker: self.addr.clone(),
            message: e.to_string(),
        }
    }
}

type Waiter = oneshot::Sender<Result<Bytes>>;

/// A request handed to the connection by [`BrokerConnection::submit`], its answer not read
/// yet ([`BrokerConnection::answer`]).
#[derive(Debug)]
pub struct Submitted<R> {
    correlation_id: i32,
    version: i16,
    api: ApiKey,
    /// When the request timeout ends, counted from the submission.
    deadline: Instant,
    /// How long the answer may take, for the error when it does not come.
    patience: Duration,
    rx: oneshot::Receiver<Result<Bytes>>,
    request: PhantomData<fn() -> R>,
}

#[derive(Debug, Default)]
struct Shared {
    /// Requests sent and not answered, by correlation id.
    pending: HashMap<i32, Waiter, foldhash::fast::RandomState>,
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
    peer: Peer,
    config: ConnectionConfig,
    versions: Versions,
    next_correlation: AtomicI32,
    /// Frames to write, in order. A task owns the socket's write half, so a caller that gives
    /// up half-way through never leaves half a frame on the wire.
    writer: mpsc::UnboundedSender<Frame>,
    shared: Arc<StdMutex<Shared>>,
    /// Until when the broker asked us not to send (KIP-219).
    throttled_until: StdMutex<Option<Instant>>,
    reader: JoinHandle<()>,
    writer_task: JoinHandle<()>,
    /// Held for reading while a request is written, for writing during a re-authentication,
    /// so that nothing else reaches the broker in the middle of a SASL exchange.
    auth_gate: RwLock<()>,
    /// The task that authenticates again before the broker's session ends (KIP-368).
    reauthenticator: StdMutex<Option<JoinHandle<()>>>,
    /// Re-authentications done.
    reauthentications: AtomicU64,
}

impl fmt::Debug for BrokerConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BrokerConnection")
            .field("addr", &self.addr)
            .field("security", &self.config.security.protocol())
            .field("poisoned", &self.is_poisoned())
            .finish_non_exhaustive()
    }
}

impl Drop for BrokerConnection {
    fn drop(&mut self) {
        self.reader.abort();
        self.writer_task.abort();
        if let Some(task) = self.reauthenticator.lock().ok().and_then(|mut t| t.take()) {
            task.abort();
        }
    }
}

impl BrokerConnection {
    /// Connects: TCP, the TLS handshake when [`Security::tls`] is set, ApiVersions, and SASL
    /// authentication when [`Security::sasl`] is set, all within `connect_timeout`.
    pub async fn connect(addr: &str, config: ConnectionConfig) -> Result<Arc<Self>> {
        let peer = Peer::new(addr, &config);
        let timeout = config.connect_timeout;
        let deadline = Instant::now() + timeout;
        let timed_out = |what: &str| Error::Io {
            broker: addr.to_owned(),
            message: format!("{what} timed out after {timeout:?}"),
        };
        let stream = tokio::time::timeout_at(deadline, config.transport.connect(addr))
            .await
            .map_err(|_| timed_out("connect"))?
            .map_err(|e| peer.io_error(&e, false))?;
        let stream = match &config.security.tls {
            Some(tls) => tokio::time::timeout_at(deadline, tls.handshake(addr, stream))
                .await
                .map_err(|_| timed_out("the TLS handshake"))?
                .map_err(|e| peer.io_error(&e, true))?,
            None => stream,
        };
        let (read_half, write_half) = tokio::io::split(stream);
        let shared = Arc::new(StdMutex::new(Shared::default()));
        let reader = tokio::spawn(read_loop(
            peer.clone(),
            read_half,
            Arc::clone(&shared),
            config.max_response_bytes,
        ));
        let (writer, frames) = mpsc::unbounded_channel();
        let writer_task = tokio::spawn(write_loop(
            peer.clone(),
            write_half,
            frames,
            Arc::clone(&shared),
        ));
        let sasl = config.security.sasl.clone();
        let mut conn = Self {
            addr: addr.to_owned(),
            peer,
            config,
            versions: Versions::default(),
            next_correlation: AtomicI32::new(0),
            writer,
            shared,
            throttled_until: StdMutex::new(None),
            reader,
            writer_task,
            auth_gate: RwLock::new(()),
            reauthenticator: StdMutex::new(None),
            reauthentications: AtomicU64::new(0),
        };
        conn.versions = tokio::time::timeout_at(deadline, conn.negotiate())
            .await
            .map_err(|_| Error::Timeout {
                broker: addr.to_owned(),
                api: ApiKey::ApiVersions,
                after: timeout,
            })??;
        // Boxed: the exchange's future holds every mechanism's state (an HTTP request to a token
        // endpoint, an AWS credential chain, a Kerberos context), far too large to live inline
        // in every future that makes a connection.
        let session = match &sasl {
            Some(sasl) => {
                tokio::time::timeout_at(deadline, Box::pin(sasl::authenticate(&conn, sasl)))
                    .await
                    .map_err(|_| Error::Timeout {
                        broker: addr.to_owned(),
                        api: ApiKey::SaslAuthenticate,
                        after: timeout,
                    })??
            }
            None => None,
        };
        let conn = Arc::new(conn);
        if let (Some(sasl), Some(lifetime)) = (sasl, session) {
            let task = tokio::spawn(reauthenticate_loop(Arc::downgrade(&conn), sasl, lifetime));
            if let Ok(mut slot) = conn.reauthenticator.lock() {
                *slot = Some(task);
            }
        }
        tracing::debug!(
            broker = addr,
            security = conn.config.security.protocol(),
            session = ?session,
            "connected"
        );
        Ok(conn)
    }

    /// Authenticates again on this connection (KIP-368), holding back other requests until
    /// done. Returns the new session's lifetime, if the broker limits it.
    async fn reauthenticate(&self, sasl: &SaslConfig) -> Result<Option<Duration>> {
        let _exclusive = self.auth_gate.write().await;
        let session = Box::pin(sasl::authenticate(self, sasl)).await?;
        self.reauthentications.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(broker = %self.addr, session = ?session, "re-authenticated");
        Ok(session)
    }

    /// How many times this connection authenticated again since it was made.
    pub fn reauthentications(&self) -> u64 {
        self.reauthentications.load(Ordering::Relaxed)
    }

    /// A failed SASL authentication on this connection.
    pub(crate) fn authentication_error(&self, mechanism: &'static str, message: String) -> Error {
        Error::Authentication {
            cluster: self.peer.cluster.clone(),
            broker: self.addr.clone(),
            mechanism,
            message: message.into(),
        }
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
        self.note_throttle(response.throttle_time_ms());
        Ok(response)
    }

    /// [`send`](Self::send) for a request the broker holds back on purpose (JoinGroup waits
    /// until the group's rebalance completes): its answer may take `longer` beyond the request
    /// timeout, as Kafka's clients allow it.
    pub async fn send_held<R>(&self, request: &R, longer: Duration) -> Result<R::Response>
    where
        R: Request + Sync,
        R::Response: ThrottleTime,
    {
        let mut submitted = self.submit(request).await?;
        submitted.deadline += longer;
        submitted.patience += longer;
        self.answer(submitted).await
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
        self.request(request, version, true).await
    }

    /// Sends a request of a SASL exchange: not held back by a re-authentication in progress
    /// (it is part of it).
    pub(crate) async fn send_during_authentication<R: Request + Sync>(
        &self,
        request: &R,
        version: i16,
    ) -> Result<R::Response> {
        self.request(request, version, false).await
    }

    /// Writes a request at the highest common version and returns once it is queued for the
    /// socket, without waiting for its answer: [`BrokerConnection::answer`] waits for that.
    /// Requests submitted one after another (each `submit` finished before the next starts)
    /// reach the broker in that order, and Kafka handles the requests of one connection in
    /// order: a producer keeps its batches of one partition in sequence order this way while
    /// many of its requests are in flight. The request timeout counts from here.
    pub async fn submit<R>(&self, request: &R) -> Result<Submitted<R>>
    where
        R: Request + Sync,
    {
        let version = self.versions.pick::<R>().map_err(|source| Error::Version {
            broker: self.addr.clone(),
            source,
        })?;
        let api = frame::api_key_of::<R>().map_err(|e| self.frame_err(e))?;
        let result = self
            .enqueue(Self::encoder(request), version, true, api)
            .await;
        if let Err(e) = &result {
            e.count_transport(&self.addr, api);
        }
        result
    }

    /// [`submit`](BrokerConnection::submit) for a Produce request of forwarded batches: their
    /// bytes go to the socket from where they are, never copied into the request.
    ///
    /// A transactional request goes at v11 at most: from v12 on, a broker whose cluster has
    /// KIP-890's `transaction.version` 2 adds the partitions to the transaction itself, which
    /// is the second transaction protocol; strait speaks the first (AddPartitionsToTxn before
    /// the first batch of each partition), which Kafka keeps for every client before 4.0.
    pub async fn submit_produce(&self, body: &ProduceBody) -> Result<Submitted<ProduceRequest>> {
        let mut version = self.version_of::<ProduceRequest>()?;
        if body.transactional_id.is_some() {
            version = version.min(LAST_PRODUCE_OF_FIRST_TRANSACTIONS);
        }
        let api = ApiKey::Produce;
        let encode = |version, correlation_id, client_id: &str| {
            frame::encode_produce_request(body, version, correlation_id, client_id)
        };
        let result = self.enqueue(encode, version, true, api).await;
        if let Err(e) = &result {
            e.count_transport(&self.addr, api);
        }
        result
    }

    /// Waits for the answer to a [`submitted`](BrokerConnection::submit) request (within the
    /// request timeout counted from the submission), and honours the broker's throttling as
    /// [`send`](BrokerConnection::send) does.
    pub async fn answer<R>(&self, submitted: Submitted<R>) -> Result<R::Response>
    where
        R: Request,
        R::Response: ThrottleTime,
    {
        let api = submitted.api;
        let result = self.complete(submitted).await;
        match &result {
            Err(e) => e.count_transport(&self.addr, api),
            Ok(response) => self.note_throttle(response.throttle_time_ms()),
        }
        result
    }

    async fn request<R: Request + Sync>(
        &self,
        request: &R,
        version: i16,
        gated: bool,
    ) -> Result<R::Response> {
        let api = frame::api_key_of::<R>().map_err(|e| self.frame_err(e))?;
        let result = match self
            .enqueue::<R>(Self::encoder(request), version, gated, api)
            .await
        {
            Ok(submitted) => self.complete(submitted).await,
            Err(e) => Err(e),
        };
        if let Err(e) = &result {
            e.count_transport(&self.addr, api);
        }
        result
    }

    /// How a kafka-protocol request is encoded: whole, into one buffer.
    fn encoder<R: Request>(
        request: &R,
    ) -> impl FnOnce(i16, i32, &str) -> std::result::Result<Frame, strait_wire::FrameError> + '_
    {
        move |version, correlation_id, client_id| {
            frame::encode_request(request, version, correlation_id, client_id).map(Frame::from)
        }
    }

    /// Encodes a request of type `R` with `encode` (given the version, the correlation id and
    /// the client id) and hands its frame to the writer task, in call order.
    async fn enqueue<R: Request>(
        &self,
        encode: impl FnOnce(i16, i32, &str) -> std::result::Result<Frame, strait_wire::FrameError>,
        version: i16,
        gated: bool,
        api: kafka_protocol::messages::ApiKey,
    ) -> Result<Submitted<R>> {
        self.wait_for_throttle().await;
        let correlation_id = self.next_correlation.fetch_add(1, Ordering::Relaxed);
        let bytes = encode(version, correlation_id, &self.config.client_id)
            .map_err(|e| Error::Invalid(e.to_string()))?;
        let (tx, rx) = oneshot::channel();
        // Only a SASL connection is ever re-authenticated.
        let gate = if gated && self.config.security.sasl.is_some() {
            Some(self.auth_gate.read().await)
        } else {
            None
        };
        {
            let mut shared = self.shared.lock().map_err(|_| Error::Closed)?;
            if let Some(err) = &shared.poisoned {
                return Err(err.clone());
            }
            shared.pending.insert(correlation_id, tx);
        }
        let sent = self.writer.send(bytes);
        drop(gate);
        if sent.is_err() {
            // The writer is gone, so the connection was poisoned and our waiter got the error.
            return Err(rx.await.ok().and_then(Result::err).unwrap_or(Error::Closed));
        }
        Ok(Submitted {
            correlation_id,
            version,
            api,
            deadline: Instant::now() + self.config.request_timeout,
            patience: self.config.request_timeout,
            rx,
            request: PhantomData,
        })
    }

    /// Waits for the answer of an enqueued request and decodes it.
    async fn complete<R: Request>(&self, submitted: Submitted<R>) -> Result<R::Response> {
        let Submitted {
            correlation_id,
            version,
            api,
            deadline,
            patience,
            rx,
            ..
        } = submitted;
        let frame = match tokio::time::timeout_at(deadline, rx).await {
            Ok(result) => result.unwrap_or(Err(Error::Closed))?,
            Err(_) => {
                let err = Error::Timeout {
                    broker: self.addr.clone(),
                    api,
                    after: patience,
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

    /// Holds later requests back for as long as the broker asked (KIP-219).
    fn note_throttle(&self, throttle_ms: Option<i32>) {
        if let Some(ms) = throttle_ms.filter(|ms| *ms > 0) {
            let until = Instant::now() + Duration::from_millis(ms as u64);
            tracing::debug!(broker = %self.addr, throttle_ms = ms, "broker throttled us");
            if let Ok(mut t) = self.throttled_until.lock() {
                *t = Some(t.map_or(until, |old| old.max(until)));
            }
        }
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

    /// Closes the connection after a failed re-authentication: later requests get `err`. A
    /// refusal by the broker replaces the error of the connection closing, which Kafka does
    /// as it sends the refusal, so the reader may have noticed it first.
    fn poison_refused(&self, err: Error) {
        if let Ok(mut shared) = self.shared.lock() {
            if matches!(err, Error::Authentication { .. }) {
                shared.poisoned = None;
            }
            shared.poison(err);
        }
        self.reader.abort();
        self.writer_task.abort();
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

/// Authenticates `conn` again before each session ends, until the connection is gone or the
/// broker stops limiting sessions. A failure closes the connection with that error.
async fn reauthenticate_loop(
    conn: Weak<BrokerConnection>,
    sasl: Arc<SaslConfig>,
    mut lifetime: Duration,
) {
    loop {
        tokio::time::sleep(sasl::reauthentication_delay(lifetime)).await;
        let Some(conn) = conn.upgrade() else { return };
        if conn.is_poisoned() {
            return;
        }
        match conn.reauthenticate(&sasl).await {
            Ok(Some(next)) => lifetime = next,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(broker = %conn.addr, error = %e, "re-authentication failed");
                conn.poison_refused(e);
                return;
            }
        }
    }
}

async fn write_loop(
    peer: Peer,
    mut writer: impl AsyncWrite + Unpin,
    mut frames: mpsc::UnboundedReceiver<Frame>,
    shared: Arc<StdMutex<Shared>>,
) {
    // A frame's pieces go in vectored writes, batches straight from the fetched buffers.
    while let Some(mut frame) = frames.recv().await {
        if let Err(e) = writer.write_all_buf(&mut frame).await {
            let err = peer.io_error(&e, false);
            if let Ok(mut s) = shared.lock() {
                s.poison(err);
            }
            return;
        }
    }
    let _ = writer.shutdown().await;
}

async fn read_loop(
    peer: Peer,
    mut reader: impl AsyncRead + Unpin,
    shared: Arc<StdMutex<Shared>>,
    max_frame: usize,
) {
    let addr = &peer.addr;
    let mut buf = frame::ReceiveBuffer::new(max_frame);
    let err = loop {
        match buf.next_frame() {
            Ok(Some(frame)) => {
                let id = match frame::peek_correlation_id(&frame) {
                    Ok(id) => id,
                    Err(e) => break frame_error(addr, e),
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
            Err(e) => break frame_error(addr, e),
        }
        match reader.read_buf(buf.buf_mut()).await {
            Ok(0) => {
                break Error::Io {
                    broker: addr.clone(),
                    message: "connection closed by broker".into(),
                }
            }
            Ok(_) => {}
            Err(e) => break peer.io_error(&e, false),
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
