//! A client for one Kafka cluster: bootstrap, a metadata cache, one connection per broker made
//! again with jittered backoff when it breaks, and routing of requests to partition leaders and
//! group coordinators.
//!
//! The metadata cache is refreshed on a timer (`metadata.max.age.ms`, default 5 minutes) and
//! whenever an operation meets a routing error (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
//! leader epoch errors, a broken connection). Every Metadata request sets
//! `allow_auto_topic_creation=false`: some brokers create a topic merely because it was asked about.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex as StdMutex, RwLock};
use std::time::Duration;

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, TopicName};
use kafka_protocol::protocol::{Request, StrBytes};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::backoff::Backoff;
use crate::connection::{BrokerConnection, ConnectionConfig, Security};
use crate::error::{check, Context, Error, Result};
use crate::throttle::ThrottleTime;

pub use crate::ids::{BrokerId, TopicPartition};

/// Settings of a cluster client.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `bootstrap.servers`: `host:port` entries.
    pub bootstrap: Vec<String>,
    /// Per-connection settings, including TLS and SASL ([`ClientConfig::with_security`]), which
    /// every connection of the client uses.
    pub connection: ConnectionConfig,
    /// `metadata.max.age.ms`: refresh the metadata at least this often (default 5 minutes).
    pub metadata_max_age: Duration,
    /// `retry.backoff.ms` (default 100 ms): the first wait before a retry.
    pub retry_backoff: Duration,
    /// `retry.backoff.max.ms` (default 1 s): the longest wait between retries.
    pub retry_backoff_max: Duration,
    /// `reconnect.backoff.ms` / `reconnect.backoff.max.ms` (50 ms / 1 s): waits between attempts
    /// to connect to a broker that refused us.
    pub reconnect_backoff: (Duration, Duration),
    /// `default.api.timeout.ms` (default 60 s): how long an operation keeps retrying.
    pub operation_timeout: Duration,
    /// The consumer's `client.rack` (KIP-392), sent with every fetch: a broker with a replica
    /// selector may then name a replica in this rack to read from. `None`: not sent.
    pub client_rack: Option<String>,
}

impl ClientConfig {
    /// Defaults (Kafka's client defaults) for the given bootstrap servers.
    pub fn new(bootstrap: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self {
            bootstrap: bootstrap.into_iter().map(Into::into).collect(),
            connection: ConnectionConfig::default(),
            metadata_max_age: Duration::from_secs(300),
            retry_backoff: Duration::from_millis(100),
            retry_backoff_max: Duration::from_secs(1),
            reconnect_backoff: (Duration::from_millis(50), Duration::from_secs(1)),
            operation_timeout: Duration::from_secs(60),
            client_rack: None,
        }
    }

    /// The same settings with `security` (TLS, SASL) on every connection.
    pub fn with_security(mut self, security: Security) -> Self {
        self.connection.security = security;
        self
    }

    /// The same settings, with errors naming the cluster by `alias`.
    pub fn with_cluster_alias(mut self, alias: impl Into<String>) -> Self {
        self.connection.cluster = Some(alias.into());
        self
    }

    /// TLS and SASL of every connection.
    pub fn security(&self) -> &Security {
        &self.connection.security
    }
}

/// A broker as metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerInfo {
    /// Its id.
    pub id: BrokerId,
    /// Host.
    pub host: String,
    /// Port.
    pub port: i32,
    /// Rack, if set.
    pub rack: Option<String>,
}

impl BrokerInfo {
    /// `host:port`.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// One partition's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// Leader, or `None` while there is none (e.g. during an election).
    pub leader: Option<BrokerId>,
    /// Leader epoch (KIP-320), -1 if unknown.
    pub leader_epoch: i32,
    /// Replicas.
    pub replicas: Vec<BrokerId>,
    /// In-sync replicas.
    pub isr: Vec<BrokerId>,
}

/// One topic's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// Name.
    pub name: String,
    /// Topic id (KIP-516); nil when the broker does not send ids.
    pub id: [u8; 16],
    /// Whether the broker marks it internal (`__consumer_offsets`, ...).
    pub is_internal: bool,
    /// Partitions by index.
    pub partitions: BTreeMap<i32, PartitionInfo>,
}

/// A snapshot of cluster metadata.
#[derive(Debug, Clone, Default)]
pub struct Metadata {
    /// The cluster id.
    pub cluster_id: Option<String>,
    /// The controller, if the broker said.
    pub controller: Option<BrokerId>,
    /// Brokers by id.
    pub brokers: BTreeMap<BrokerId, BrokerInfo>,
    /// Topics by name.
    pub topics: BTreeMap<String, TopicInfo>,
}

impl Metadata {
    /// The leader of a partition, if known.
    pub fn leader(&self, tp: &TopicPartition) -> Option<BrokerId> {
        self.topics
            .get(&tp.topic)?
            .partitions
            .get(&tp.partition)?
            .leader
    }
}

#[derive(Debug, Default)]
struct BrokerSlot {
    conn: Option<Arc<BrokerConnection>>,
    backoff: Option<Backoff>,
    not_before: Option<Instant>,
    /// Whether a connection to this broker was ever made, so the next one is a reconnect.
    connected_before: bool,
    /// Attempts that failed since the last connection.
    failed_attempts: u32,
}

/// One broker address and lane's connection, made and replaced under its own lock.
type Slot = Arc<Mutex<BrokerSlot>>;

#[derive(Debug)]
struct Inner {
    config: ClientConfig,
    metadata: RwLock<Arc<Metadata>>,
    metadata_at: StdMutex<Option<Instant>>,
    /// Serialises refreshes so a storm of routing errors makes one Metadata request.
    refresh_lock: Mutex<()>,
    /// Connections by broker address and lane: lane 0 carries everything but what
    /// [`Client::connection_on_lane`] spreads (see [`crate::groups::COMMIT_LANES`]).
    slots: Mutex<HashMap<(String, u8), Slot>>,
    /// Coordinators by FindCoordinator's key type (0 group, 1 transaction) and key.
    coordinators: StdMutex<HashMap<(i8, String), BrokerId>>,
    /// Fetch sessions and read replicas (`fetch.rs`).
    fetch: crate::fetch::session::FetchState,
}

/// A client for one cluster. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl Client {
    /// Connects to the cluster: reaches a bootstrap broker and loads metadata, retrying for up
    /// to `default.api.timeout.ms`.
    pub async fn connect(config: ClientConfig) -> Result<Self> {
        let patience = config.operation_timeout;
        Self::connect_within(config, patience).await
    }

    /// [`Client::connect`], giving up with the last error when no broker answered within
    /// `patience` (at most `default.api.timeout.ms`), for a caller that retries on its own
    /// and wants to say why sooner. Later operations keep the full timeout.
    pub async fn connect_within(config: ClientConfig, patience: Duration) -> Result<Self> {
        if config.bootstrap.is_empty() {
            return Err(Error::Invalid("bootstrap.servers is empty".into()));
        }
        let client = Self {
            inner: Arc::new(Inner {
                config,
                metadata: RwLock::new(Arc::new(Metadata::default())),
                metadata_at: StdMutex::new(None),
                refresh_lock: Mutex::new(()),
                slots: Mutex::new(HashMap::new()),
                coordinators: StdMutex::new(HashMap::new()),
                fetch: crate::fetch::session::FetchState::default(),
            }),
        };
        let patience = patience.min(client.inner.config.operation_timeout);
        client.refresh_metadata_within(patience).await?;
        client.spawn_metadata_timer();
        Ok(client)
    }

    /// Refreshes metadata every `metadata.max.age.ms` in the background, so leader moves are
    /// seen even when no request fails. The task ends when the last clone of the client is
    /// dropped.
    fn spawn_metadata_timer(&self) {
        let weak = Arc::downgrade(&self.inner);
        let period = self.inner.config.metadata_max_age;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                let Some(inner) = weak.upgrade() else { return };
                let client = Client { inner };
                if let Err(e) = client.refresh_metadata().await {
                    tracing::warn!(error = %e, "periodic metadata refresh failed");
                }
            }
        });
    }

    /// The client's settings.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    pub(crate) fn fetch_state(&self) -> &crate::fetch::session::FetchState {
        &self.inner.fetch
    }

    /// The current metadata snapshot, refreshed first if older than `metadata.max.age.ms`.
    pub async fn metadata(&self) -> Result<Arc<Metadata>> {
        let stale = self
            .inner
            .metadata_at
            .lock()
            .map(|at| at.is_none_or(|at| at.elapsed() >= self.inner.config.metadata_max_age))
            .unwrap_or(true);
        if stale {
            self.refresh_metadata().await?;
        }
        Ok(self.cached_metadata())
    }

    /// The metadata as last loaded, without a refresh.
    pub fn cached_metadata(&self) -> Arc<Metadata> {
        self.inner
            .metadata
            .read()
            .map(|m| Arc::clone(&m))
            .unwrap_or_default()
    }

    /// Loads metadata for all topics now. Concurrent callers share one request.
    pub async fn refresh_metadata(&self) -> Result<Arc<Metadata>> {
        self.refresh_metadata_within(self.inner.config.operation_timeout)
            .await
    }

    /// [`Client::refresh_metadata`], retrying for up to `patience`.
    async fn refresh_metadata_within(&self, patience: Duration) -> Result<Arc<Metadata>> {
        let before = *self.inner.metadata_at.lock().map_err(|_| Error::Closed)?;
        let _guard = self.inner.refresh_lock.lock().await;
        let after = *self.inner.metadata_at.lock().map_err(|_| Error::Closed)?;
        if after != before {
            // Someone refreshed while we waited for the lock.
            return Ok(self.cached_metadata());
        }
        let request = MetadataRequest::default()
            .with_topics(None)
            .with_allow_auto_topic_creation(false);
        // Not through `retry`, which itself refreshes metadata on routing errors.
        let config = &self.inner.config;
        let deadline = Instant::now() + patience;
        let mut backoff = Backoff::new(config.retry_backoff, config.retry_backoff_max);
        let response = loop {
            match self.send_any(&request).await {
                Ok(response) => break response,
                Err(e) if e.is_retriable() && Instant::now() < deadline => {
                    let wait = backoff.next_wait();
                    tracing::debug!(error = %e, retry_in = ?wait, "metadata request failed");
                    tokio::time::sleep(wait).await;
                }
                Err(e) => return Err(e),
            }
        };
        let metadata = Arc::new(parse_metadata(response)?);
        if let Ok(mut m) = self.inner.metadata.write() {
            *m = Arc::clone(&metadata);
        }
        if let Ok(mut at) = self.inner.metadata_at.lock() {
            *at = Some(Instant::now());
        }
        Ok(metadata)
    }

    /// Metadata for the named topics only (one request, no cache update). Unknown topics are
    /// absent from the answer rather than an error; no topic is ever created by asking.
    pub async fn topic_metadata(&self, topics: &[&str]) -> Result<Metadata> {
        parse_metadata(self.send_any(&named_metadata_request(topics)).await?)
    }

    /// Of the named topics, those the cluster says do not exist (UNKNOWN_TOPIC_OR_PARTITION to
    /// a request naming them). A topic the principal may not describe is answered
    /// TOPIC_AUTHORIZATION_FAILED, whether it exists or not, and is not among them: missing
    /// from a listing is not proof that a topic was deleted.
    pub async fn unknown_topics(&self, topics: &[&str]) -> Result<BTreeSet<String>> {
        let response = self.send_any(&named_metadata_request(topics)).await?;
        Ok(response
            .topics
            .into_iter()
            .filter(|t| {
                t.error_code == kafka_protocol::error::ResponseError::UnknownTopicOrPartition.code()
            })
            .filter_map(|t| t.name.map(|n| n.0.to_string()))
            .collect())
    }

    /// The leader of a partition, refreshing metadata once if it is not known.
    pub async fn leader(&self, tp: &TopicPartition) -> Result<BrokerId> {
        if let Some(id) = self.cached_metadata().leader(tp) {
            return Ok(id);
        }
        let metadata = self.refresh_metadata().await?;
        match metadata.topics.get(&tp.topic) {
            None => Err(Error::UnknownTopicOrPartition {
                context: tp.context(),
            }),
            Some(t) => match t.partitions.get(&tp.partition) {
                None => Err(Error::UnknownTopicOrPartition {
                    context: tp.context(),
                }),
                Some(p) => p.leader.ok_or_else(|| {
                    Error::broker(
                        kafka_protocol::error::ResponseError::LeaderNotAvailable,
                        None,
                        tp.context(),
                    )
                }),
            },
        }
    }

    /// Sends a request to a broker by id.
    pub async fn send_to<R>(&self, broker: BrokerId, request: &R) -> Result<R::Response>
    where
        R: Request + Sync,
        R::Response: ThrottleTime,
    {
        let conn = self.connection(broker).await?;
        conn.send(request).await
    }

    /// Sends a request to any reachable broker: a known one, else a bootstrap address.
    pub async fn send_any<R>(&self, request: &R) -> Result<R::Response>
    where
        R: Request + Sync,
        R::Response: ThrottleTime,
    {
        let conn = self.any_connection().await?;
        conn.send(request).await
    }

    /// The connection to a broker by id, made (again) if needed.
    pub async fn connection(&self, broker: BrokerId) -> Result<Arc<BrokerConnection>> {
        self.connection_on_lane(broker, 0).await
    }

    /// Connection `lane` to a broker by id (lane 0 is [`Client::connection`]), made (again) if
    /// needed. A broker answers one request of a connection at a time, so requests that wait
    /// on the broker's side (an offset commit waits for its append to the offsets topic) and
    /// that callers issue by the thousand go faster over several connections.
    pub async fn connection_on_lane(
        &self,
        broker: BrokerId,
        lane: u8,
    ) -> Result<Arc<BrokerConnection>> {
        let addr = match self.cached_metadata().brokers.get(&broker) {
            Some(b) => b.addr(),
            None => {
                let metadata = self.refresh_metadata().await?;
                metadata
                    .brokers
                    .get(&broker)
                    .map(BrokerInfo::addr)
                    .ok_or_else(|| Error::Unexpected {
                        broker: "cluster".into(),
                        what: format!("{broker} is not in the cluster metadata"),
                    })?
            }
        };
        self.connection_to_lane(&addr, lane).await
    }

    /// A connection to any broker: one already open, else the metadata's brokers, else the
    /// bootstrap list, in order.
    pub async fn any_connection(&self) -> Result<Arc<BrokerConnection>> {
        {
            let slots = self.inner.slots.lock().await;
            for slot in slots.values() {
                if let Ok(slot) = slot.try_lock() {
                    if let Some(conn) = slot.conn.as_ref().filter(|c| !c.is_poisoned()) {
                        return Ok(Arc::clone(conn));
                    }
                }
            }
        }
        let mut candidates: Vec<String> = self
            .cached_metadata()
            .brokers
            .values()
            .map(BrokerInfo::addr)
            .collect();
        for addr in &self.inner.config.bootstrap {
            if !candidates.contains(addr) {
                candidates.push(addr.clone());
            }
        }
        let mut last = None;
        for addr in &candidates {
            match self.connection_to(addr).await {
                Ok(conn) => return Ok(conn),
                Err(e) => last = Some(e),
            }
        }
        match last {
            // A TLS or SASL refusal says more than "unreachable": the broker was reached.
            Some(e @ (Error::Tls { .. } | Error::Authentication { .. })) => Err(e),
            last => Err(Error::NoBootstrap {
                tried: candidates.join(","),
                last: Box::new(last.unwrap_or(Error::Closed)),
            }),
        }
    }

    /// The connection to an address, made if there is none or it broke. A broker that failed
    /// recently is not tried again before its backoff has passed.
    pub async fn connection_to(&self, addr: &str) -> Result<Arc<BrokerConnection>> {
        self.connection_to_lane(addr, 0).await
    }

    async fn connection_to_lane(&self, addr: &str, lane: u8) -> Result<Arc<BrokerConnection>> {
        let slot = {
            let mut slots = self.inner.slots.lock().await;
            Arc::clone(slots.entry((addr.to_owned(), lane)).or_default())
        };
        let mut slot = slot.lock().await;
        if let Some(conn) = slot.conn.as_ref().filter(|c| !c.is_poisoned()) {
            return Ok(Arc::clone(conn));
        }
        if slot.conn.take().is_some() {
            crate::reach::lost(addr, self.inner.config.connection.cluster.as_deref());
        }
        if let Some(at) = slot.not_before {
            tokio::time::sleep_until(at).await;
        }
        match BrokerConnection::connect(addr, self.inner.config.connection.clone()).await {
            Ok(conn) => {
                if slot.connected_before || slot.failed_attempts > 0 {
                    metrics::counter!(crate::error::RECONNECTS, "broker" => addr.to_owned())
                        .increment(1);
                }
                crate::reach::answered(addr, self.inner.config.connection.cluster.as_deref());
                slot.connected_before = true;
                slot.failed_attempts = 0;
                slot.backoff = None;
                slot.not_before = None;
                slot.conn = Some(Arc::clone(&conn));
                Ok(conn)
            }
            Err(e) => {
                let (lo, hi) = self.inner.config.reconnect_backoff;
                let wait = slot
                    .backoff
                    .get_or_insert_with(|| Backoff::new(lo, hi))
                    .next_wait();
                slot.not_before = Some(Instant::now() + wait);
                slot.failed_attempts = slot.failed_attempts.saturating_add(1);
                crate::reach::failed(
                    addr,
                    self.inner.config.connection.cluster.as_deref(),
                    &e,
                    wait,
                );
                Err(e)
            }
        }
    }

    /// Runs `op` until it succeeds, fails with an error a retry cannot help, or
    /// `default.api.timeout.ms` passes. Routing errors refresh the metadata (and forget cached
    /// coordinators) before the next try.
    pub async fn retry<T, F, Fut>(&self, what: &str, mut op: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let config = &self.inner.config;
        let deadline = Instant::now() + config.operation_timeout;
        let mut backoff = Backoff::new(config.retry_backoff, config.retry_backoff_max);
        loop {
            match op().await {
                Ok(v) => return Ok(v),
                Err(e) if e.is_retriable() && Instant::now() < deadline => {
                    let wait = backoff.next_wait();
                    tracing::debug!(operation = what, error = %e, retry_in = ?wait, "retrying");
                    if e.needs_metadata_refresh() {
                        self.forget_coordinators();
                        if let Err(refresh) = self.refresh_metadata().await {
                            tracing::debug!(error = %refresh, "metadata refresh failed");
                        }
                    }
                    tokio::time::sleep(
                        wait.min(deadline.saturating_duration_since(Instant::now())),
                    )
                    .await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    pub(crate) fn cached_coordinator(&self, key_type: i8, key: &str) -> Option<BrokerId> {
        self.inner
            .coordinators
            .lock()
            .ok()
            .and_then(|c| c.get(&(key_type, key.to_owned())).copied())
    }

    pub(crate) fn remember_coordinator(&self, key_type: i8, key: &str, broker: BrokerId) {
        if let Ok(mut c) = self.inner.coordinators.lock() {
            c.insert((key_type, key.to_owned()), broker);
        }
    }

    pub(crate) fn forget_coordinators(&self) {
        if let Ok(mut c) = self.inner.coordinators.lock() {
            c.clear();
        }
    }

    /// Closes every connection.
    pub async fn close(&self) {
        let mut slots = self.inner.slots.lock().await;
        slots.clear();
    }
}

/// A Metadata request for the named topics only, creating none.
fn named_metadata_request(topics: &[&str]) -> MetadataRequest {
    MetadataRequest::default()
        .with_topics(Some(
            topics
                .iter()
                .map(|t| {
                    MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string((*t).to_owned()))))
                })
                .collect(),
        ))
        .with_allow_auto_topic_creation(false)
}

fn parse_metadata(response: kafka_protocol::messages::MetadataResponse) -> Result<Metadata> {
    check(response.error_code, None, || Context::None)?;
    let brokers = response
        .brokers
        .into_iter()
        .map(|b| {
            let id = BrokerId(b.node_id.0);
            let info = BrokerInfo {
                id,
                host: b.host.to_string(),
                port: b.port,
                rack: b.rack.map(|r| r.to_string()),
            };
            (id, info)
        })
        .collect();
    let mut topics = BTreeMap::new();
    for t in response.topics {
        let Some(name) = t.name.map(|n| n.0.to_string()) else {
            continue;
        };
        // An absent topic comes back with UNKNOWN_TOPIC_OR_PARTITION: leave it out.
        if t.error_code != 0 {
            tracing::debug!(topic = %name, error_code = t.error_code, "topic metadata error");
            continue;
        }
        let partitions = t
            .partitions
            .into_iter()
            .map(|p| {
                let leader = (p.leader_id.0 >= 0).then_some(BrokerId(p.leader_id.0));
                (
                    p.partition_index,
                    PartitionInfo {
                        leader,
                        leader_epoch: p.leader_epoch,
                        replicas: p.replica_nodes.iter().map(|b| BrokerId(b.0)).collect(),
                        isr: p.isr_nodes.iter().map(|b| BrokerId(b.0)).collect(),
                    },
                )
            })
            .collect();
        topics.insert(
            name.clone(),
            TopicInfo {
                name,
                id: *t.topic_id.as_bytes(),
                is_internal: t.is_internal,
                partitions,
            },
        );
    }
    Ok(Metadata {
        cluster_id: response.cluster_id.map(|c| c.to_string()),
        controller: (response.controller_id.0 >= 0).then_some(BrokerId(response.controller_id.0)),
        brokers,
        topics,
    })
}
