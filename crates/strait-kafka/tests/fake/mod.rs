//! A scripted fake Kafka broker, for the runtime paths a real broker rarely shows (`docs/design.md`
//! §8): answers out of order, late or never, throttling, truncated frames, closed connections,
//! leader moves and error codes on demand.
//!
//! Each fake broker listens on 127.0.0.1:0, reads size-prefixed request frames, decodes header
//! and body with `kafka-protocol`, records them, and asks the test's [`Script`] what to do. The
//! script may answer [`Action::Default`] for the built-in answers: ApiVersions from a
//! configurable list, Metadata from the shared [`ClusterSpec`] (so several fakes form one
//! cluster), FindCoordinator (the broker asked) and InitProducerId.
#![allow(unreachable_pub, dead_code)]

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, BrokerId, CreateAclsRequest,
    CreatePartitionsRequest, CreateTopicsRequest, DescribeAclsRequest, DescribeClusterRequest,
    FetchRequest, FindCoordinatorRequest, FindCoordinatorResponse, InitProducerIdRequest,
    InitProducerIdResponse, ListOffsetsRequest, MetadataRequest, MetadataResponse,
    OffsetCommitRequest, OffsetFetchRequest, ProduceRequest, ProducerId, RequestHeader,
    ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{decode_request_header_from_buffer, Decodable, Encodable, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};
use tokio::sync::Notify;

/// A boxed future, what a [`Script`] returns.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Decides what a fake broker does with each request it reads. Requests of one connection are
/// handed over one at a time, in the order they arrived.
pub type Script = Arc<dyn Fn(FakeCluster, Received) -> BoxFuture<Action> + Send + Sync>;

/// A script from a plain closure.
pub fn script(f: impl Fn(&FakeCluster, &Received) -> Action + Send + Sync + 'static) -> Script {
    Arc::new(move |fake, req| {
        let action = f(&fake, &req);
        Box::pin(async move { action })
    })
}

/// A script from an async closure.
pub fn async_script<F, Fut>(f: F) -> Script
where
    F: Fn(FakeCluster, Received) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Action> + Send + 'static,
{
    Arc::new(move |fake, req| Box::pin(f(fake, req)))
}

/// What a fake broker does with a request.
#[derive(Debug)]
pub enum Action {
    /// The built-in answer (ApiVersions, Metadata, FindCoordinator, InitProducerId); anything
    /// else closes the connection and says so on stderr.
    Default,
    /// Writes these bytes (a whole frame from [`Received::frame`], or anything at all).
    Send(Bytes),
    /// Closes the connection (after what was queued before it).
    Close,
    /// Never answers.
    Ignore,
    /// Does the action later; the connection keeps reading meanwhile.
    After(Duration, Box<Action>),
    /// Does each action in turn.
    Many(Vec<Action>),
}

macro_rules! bodies {
    ($($api:ident($t:ty)),* $(,)?) => {
        /// A decoded request body.
        #[derive(Debug, Clone)]
        pub enum Body {
            $(#[allow(missing_docs)] $api($t),)*
            /// An API the fake does not decode.
            Other,
        }

        fn decode_body(api: ApiKey, buf: &mut Bytes, version: i16) -> Result<Body, String> {
            Ok(match api {
                $(ApiKey::$api => Body::$api(<$t>::decode(buf, version).map_err(|e| e.to_string())?),)*
                _ => Body::Other,
            })
        }
    };
}

bodies!(
    ApiVersions(ApiVersionsRequest),
    Metadata(MetadataRequest),
    Fetch(FetchRequest),
    Produce(ProduceRequest),
    ListOffsets(ListOffsetsRequest),
    CreatePartitions(CreatePartitionsRequest),
    CreateTopics(CreateTopicsRequest),
    FindCoordinator(FindCoordinatorRequest),
    DescribeGroups(kafka_protocol::messages::DescribeGroupsRequest),
    OffsetCommit(OffsetCommitRequest),
    OffsetFetch(OffsetFetchRequest),
    InitProducerId(InitProducerIdRequest),
    DescribeCluster(DescribeClusterRequest),
    DescribeAcls(DescribeAclsRequest),
    CreateAcls(CreateAclsRequest),
    SaslHandshake(kafka_protocol::messages::SaslHandshakeRequest),
    SaslAuthenticate(kafka_protocol::messages::SaslAuthenticateRequest),
    EndTxn(kafka_protocol::messages::EndTxnRequest),
    DescribeConfigs(kafka_protocol::messages::DescribeConfigsRequest),
    JoinGroup(kafka_protocol::messages::JoinGroupRequest),
    SyncGroup(kafka_protocol::messages::SyncGroupRequest),
    Heartbeat(kafka_protocol::messages::HeartbeatRequest),
    LeaveGroup(kafka_protocol::messages::LeaveGroupRequest),
);

/// A request as a fake broker read it.
#[derive(Debug, Clone)]
pub struct Received {
    /// Id of the broker that read it.
    pub broker: i32,
    /// Which connection to that broker, counting from 1.
    pub conn: usize,
    /// The API.
    pub api: ApiKey,
    /// The request header.
    pub header: RequestHeader,
    /// The body.
    pub body: Body,
    /// When it was read.
    pub at: Instant,
}

impl Received {
    /// The request's API version.
    pub fn version(&self) -> i16 {
        self.header.request_api_version
    }

    /// The response frame carrying `msg`: size, header (correlation id copied), body, all at
    /// the request's version.
    pub fn frame<M: Encodable>(&self, msg: &M) -> Bytes {
        response_frame(self.api, self.version(), self.header.correlation_id, msg)
    }

    /// Answers with `msg`.
    pub fn reply<M: Encodable>(&self, msg: &M) -> Action {
        Action::Send(self.frame(msg))
    }
}

/// The answer to an OffsetCommit `request`: every partition it names, with `error_code` (0:
/// committed).
pub fn offset_commit_response(
    request: &kafka_protocol::messages::OffsetCommitRequest,
    error_code: i16,
) -> kafka_protocol::messages::OffsetCommitResponse {
    use kafka_protocol::messages::offset_commit_response::{
        OffsetCommitResponsePartition, OffsetCommitResponseTopic,
    };
    kafka_protocol::messages::OffsetCommitResponse::default().with_topics(
        request
            .topics
            .iter()
            .map(|t| {
                OffsetCommitResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                OffsetCommitResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(error_code)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

/// Encodes a response frame. ApiVersions answers always carry header v0 (KIP-511), which
/// `response_header_version` knows.
pub fn response_frame<M: Encodable>(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    msg: &M,
) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, api.response_header_version(version))
        .expect("fake broker encodes the response header");
    msg.encode(&mut buf, version)
        .unwrap_or_else(|e| panic!("fake broker cannot encode {api:?} v{version}: {e}"));
    let size = i32::try_from(buf.len() - 4).expect("frame fits an i32");
    buf[..4].copy_from_slice(&size.to_be_bytes());
    buf.freeze()
}

/// What the fake cluster looks like; shared by all its brokers, changeable at any time.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    /// Cluster id.
    pub cluster_id: String,
    /// Controller id, -1 for none.
    pub controller: i32,
    /// Broker id -> port, filled in by [`FakeCluster::start`].
    pub brokers: BTreeMap<i32, u16>,
    /// Topic -> the leader of each partition, by index (-1: no leader).
    pub topics: BTreeMap<String, Vec<i32>>,
    /// What ApiVersions offers: (api, min, max).
    pub api_versions: Vec<(ApiKey, i16, i16)>,
    /// What InitProducerId answers: (producer id, epoch).
    pub producer: (i64, i16),
}

/// The versions strait needs.
pub fn strait_api_versions() -> Vec<(ApiKey, i16, i16)> {
    vec![
        (ApiKey::ApiVersions, 0, 4),
        (ApiKey::Metadata, 0, 12),
        (ApiKey::Fetch, 4, 12),
        (ApiKey::Produce, 3, 12),
        (ApiKey::ListOffsets, 1, 10),
        (ApiKey::CreatePartitions, 0, 3),
        (ApiKey::CreateTopics, 2, 7),
        (ApiKey::FindCoordinator, 0, 3),
        (ApiKey::DescribeGroups, 0, 5),
        (ApiKey::OffsetCommit, 2, 9),
        (ApiKey::OffsetFetch, 1, 7),
        (ApiKey::InitProducerId, 0, 5),
        (ApiKey::DescribeCluster, 0, 1),
    ]
}

fn name(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

impl ClusterSpec {
    /// The Metadata answer: all topics, or those asked for (unknown ones with
    /// UNKNOWN_TOPIC_OR_PARTITION, as Kafka does).
    pub fn metadata(&self, request: &MetadataRequest) -> MetadataResponse {
        let wanted: Vec<String> = match &request.topics {
            None => self.topics.keys().cloned().collect(),
            Some(ts) => ts
                .iter()
                .filter_map(|t| Some(t.name.as_ref()?.0.to_string()))
                .collect(),
        };
        let topics = wanted
            .into_iter()
            .map(|t| {
                let topic = MetadataResponseTopic::default().with_name(Some(TopicName(name(&t))));
                let Some(leaders) = self.topics.get(&t) else {
                    return topic.with_error_code(ResponseError::UnknownTopicOrPartition.code());
                };
                topic.with_partitions(
                    (0..)
                        .zip(leaders)
                        .map(|(i, leader)| {
                            MetadataResponsePartition::default()
                                .with_partition_index(i)
                                .with_leader_id(BrokerId(*leader))
                                .with_leader_epoch(0)
                                .with_replica_nodes(vec![BrokerId(*leader)])
                                .with_isr_nodes(vec![BrokerId(*leader)])
                        })
                        .collect(),
                )
            })
            .collect();
        MetadataResponse::default()
            .with_cluster_id(Some(name(&self.cluster_id)))
            .with_controller_id(BrokerId(self.controller))
            .with_brokers(
                self.brokers
                    .iter()
                    .map(|(id, port)| {
                        MetadataResponseBroker::default()
                            .with_node_id(BrokerId(*id))
                            .with_host(StrBytes::from_static_str("127.0.0.1"))
                            .with_port(i32::from(*port))
                    })
                    .collect(),
            )
            .with_topics(topics)
    }
}

/// One or more fake brokers forming one cluster. Cheap to clone.
#[derive(Clone)]
pub struct FakeCluster {
    inner: Arc<Inner>,
}

struct Inner {
    spec: Mutex<ClusterSpec>,
    log: Mutex<Vec<Received>>,
    connections: Mutex<BTreeMap<i32, usize>>,
    script: Script,
}

impl fmt::Debug for FakeCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeCluster")
            .field("spec", &*self.spec())
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl FakeCluster {
    /// Starts one fake broker per id; the first id is the controller. No topics yet.
    pub async fn start(ids: &[i32], script: Script) -> Self {
        let mut listeners = Vec::new();
        let mut brokers = BTreeMap::new();
        for id in ids {
            let listener = TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind fake broker");
            brokers.insert(*id, listener.local_addr().expect("local addr").port());
            listeners.push((*id, listener));
        }
        let fake = Self {
            inner: Arc::new(Inner {
                spec: Mutex::new(ClusterSpec {
                    cluster_id: "fake-cluster".into(),
                    controller: ids.first().copied().unwrap_or(-1),
                    brokers,
                    topics: BTreeMap::new(),
                    api_versions: strait_api_versions(),
                    producer: (1000, 0),
                }),
                log: Mutex::new(Vec::new()),
                connections: Mutex::new(BTreeMap::new()),
                script,
            }),
        };
        for (id, listener) in listeners {
            let fake = fake.clone();
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let conn = {
                        let mut conns = lock(&fake.inner.connections);
                        let n = conns.entry(id).or_default();
                        *n += 1;
                        *n
                    };
                    tokio::spawn(serve(fake.clone(), id, conn, stream));
                }
            });
        }
        fake
    }

    /// The cluster description, locked.
    pub fn spec(&self) -> MutexGuard<'_, ClusterSpec> {
        lock(&self.inner.spec)
    }

    /// Sets the leaders of a topic's partitions (creating it).
    pub fn set_topic(&self, topic: &str, leaders: &[i32]) {
        self.spec()
            .topics
            .insert(topic.to_owned(), leaders.to_vec());
    }

    /// `host:port` of a broker.
    pub fn addr(&self, id: i32) -> String {
        format!("127.0.0.1:{}", self.spec().brokers[&id])
    }

    /// Every request read so far, in order.
    pub fn received(&self) -> Vec<Received> {
        lock(&self.inner.log).clone()
    }

    /// The requests of one API read so far, by any broker.
    pub fn requests(&self, api: ApiKey) -> Vec<Received> {
        self.received()
            .into_iter()
            .filter(|r| r.api == api)
            .collect()
    }

    /// Connections accepted by a broker so far.
    pub fn connections(&self, id: i32) -> usize {
        lock(&self.inner.connections).get(&id).copied().unwrap_or(0)
    }

    /// The built-in answer to a request.
    pub fn default_answer(&self, req: &Received) -> Action {
        let spec = self.spec().clone();
        match &req.body {
            Body::ApiVersions(_) => {
                let keys: Vec<ApiVersion> = spec
                    .api_versions
                    .iter()
                    .map(|(k, lo, hi)| {
                        ApiVersion::default()
                            .with_api_key(*k as i16)
                            .with_min_version(*lo)
                            .with_max_version(*hi)
                    })
                    .collect();
                let ours = spec
                    .api_versions
                    .iter()
                    .find(|v| v.0 == ApiKey::ApiVersions);
                if ours.is_none_or(|v| req.version() > v.2) {
                    // KIP-511: a version we do not speak gets UNSUPPORTED_VERSION in v0.
                    let resp = ApiVersionsResponse::default()
                        .with_error_code(ResponseError::UnsupportedVersion.code())
                        .with_api_keys(keys);
                    let frame = response_frame(req.api, 0, req.header.correlation_id, &resp);
                    return Action::Send(frame);
                }
                req.reply(&ApiVersionsResponse::default().with_api_keys(keys))
            }
            Body::Metadata(m) => req.reply(&spec.metadata(m)),
            Body::FindCoordinator(f) => {
                let port = i32::from(spec.brokers[&req.broker]);
                let host = StrBytes::from_static_str("127.0.0.1");
                let coordinators = f
                    .coordinator_keys
                    .iter()
                    .map(|k| {
                        Coordinator::default()
                            .with_key(k.clone())
                            .with_node_id(BrokerId(req.broker))
                            .with_host(host.clone())
                            .with_port(port)
                    })
                    .collect();
                let mut resp = FindCoordinatorResponse::default();
                if req.version() >= 4 {
                    resp = resp.with_coordinators(coordinators);
                } else {
                    resp = resp
                        .with_node_id(BrokerId(req.broker))
                        .with_host(host)
                        .with_port(port);
                }
                req.reply(&resp)
            }
            Body::InitProducerId(_) => req.reply(
                &InitProducerIdResponse::default()
                    .with_producer_id(ProducerId(spec.producer.0))
                    .with_producer_epoch(spec.producer.1),
            ),
            _ => {
                eprintln!(
                    "fake broker {}: no answer scripted for {:?} v{}; closing",
                    req.broker,
                    req.api,
                    req.version()
                );
                Action::Close
            }
        }
    }
}

enum Out {
    Bytes(Bytes),
    Close,
}

/// Reads requests on one connection and acts on them; a writer task owns the write half, so
/// delayed answers can be written while reading goes on.
async fn serve(fake: FakeCluster, broker: i32, conn: usize, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let (mut rd, mut wr) = stream.into_split();
    let (tx, mut rx) = unbounded_channel::<Out>();
    let closed = Arc::new(Notify::new());
    let closing = Arc::clone(&closed);
    tokio::spawn(async move {
        while let Some(Out::Bytes(bytes)) = rx.recv().await {
            if wr.write_all(&bytes).await.is_err() {
                break;
            }
        }
        drop(wr);
        closing.notify_one();
    });
    loop {
        let frame = tokio::select! {
            frame = read_frame(&mut rd) => frame,
            () = closed.notified() => None,
        };
        let Some(frame) = frame else { return };
        let req = match decode(broker, conn, frame) {
            Ok(req) => req,
            Err(e) => {
                eprintln!("fake broker {broker}: cannot decode a request: {e}; closing");
                let _ = tx.send(Out::Close);
                return;
            }
        };
        lock(&fake.inner.log).push(req.clone());
        let action = (fake.inner.script)(fake.clone(), req.clone()).await;
        perform(&fake, &req, action, &tx);
    }
}

fn perform(fake: &FakeCluster, req: &Received, action: Action, out: &UnboundedSender<Out>) {
    match action {
        Action::Default => perform(fake, req, fake.default_answer(req), out),
        Action::Send(bytes) => {
            let _ = out.send(Out::Bytes(bytes));
        }
        Action::Close => {
            let _ = out.send(Out::Close);
        }
        Action::Ignore => {}
        Action::After(delay, action) => {
            let (fake, req, out) = (fake.clone(), req.clone(), out.clone());
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                perform(&fake, &req, *action, &out);
            });
        }
        Action::Many(actions) => {
            for action in actions {
                perform(fake, req, action, out);
            }
        }
    }
}

async fn read_frame(rd: &mut OwnedReadHalf) -> Option<Bytes> {
    let size = rd.read_i32().await.ok()?;
    let size = usize::try_from(size).ok().filter(|s| *s <= 64 << 20)?;
    let mut body = vec![0; size];
    rd.read_exact(&mut body).await.ok()?;
    Some(body.into())
}

fn decode(broker: i32, conn: usize, mut frame: Bytes) -> Result<Received, String> {
    let at = Instant::now();
    if frame.len() < 8 {
        return Err(format!("request frame of {} bytes", frame.len()));
    }
    let api_key = i16::from_be_bytes([frame[0], frame[1]]);
    let api = ApiKey::try_from(api_key).map_err(|_| format!("unknown API key {api_key}"))?;
    let header = decode_request_header_from_buffer(&mut frame).map_err(|e| e.to_string())?;
    let body = decode_body(api, &mut frame, header.request_api_version)?;
    Ok(Received {
        broker,
        conn,
        api,
        header,
        body,
        at,
    })
}
