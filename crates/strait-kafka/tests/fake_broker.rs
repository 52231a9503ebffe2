//! The runtime's paths that a real broker rarely shows (pipelined answers out of order, broken
//! connections, timeouts, throttling, leader moves, truncated frames, partial batches, produce
//! retries, refused group commits), against the scripted fake broker of `fake/`.

mod fake;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, CreatePartitionsResponse, FetchResponse, ListOffsetsRequest, ListOffsetsResponse,
    MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use strait_kafka::admin::{IsolationLevel, OffsetSpec};
use strait_kafka::connection::{BrokerConnection, ConnectionConfig};
use strait_kafka::error::Context;
use strait_kafka::fetch::{FetchOptions, FetchPosition};
use strait_kafka::groups::OffsetToCommit;
use strait_kafka::produce::{
    Merge, MergeMode, ProducerConfig, RawProducer, FAR_ROUND_TRIP, FEW_PARTITIONS,
};
use strait_kafka::{BrokerId, Client, ClientConfig, Error, TopicPartition};
use strait_wire::{BatchHeader, BatchScanner, FrameError};

use fake::{async_script, script, Action, Body, FakeCluster};

/// Fails the test instead of hanging it.
async fn within<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .expect("test took more than 10 s")
}

fn client_config(fake: &FakeCluster) -> ClientConfig {
    let mut config = ClientConfig::new([fake.addr(1)]);
    config.operation_timeout = Duration::from_secs(3);
    config.retry_backoff = Duration::from_millis(10);
    config.retry_backoff_max = Duration::from_millis(50);
    config.reconnect_backoff = (Duration::from_millis(10), Duration::from_millis(50));
    config.connection.request_timeout = Duration::from_secs(2);
    config.connection.connect_timeout = Duration::from_secs(2);
    config
}

async fn client(fake: &FakeCluster) -> Client {
    Client::connect(client_config(fake))
        .await
        .expect("connect to fake")
}

async fn connection(fake: &FakeCluster, config: ConnectionConfig) -> Arc<BrokerConnection> {
    BrokerConnection::connect(&fake.addr(1), config)
        .await
        .expect("connect to fake")
}

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// A Metadata request for one topic, so an answer can be told apart by what was asked.
fn metadata_for(topic: &str) -> MetadataRequest {
    MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(TopicName(str_bytes(topic))))
        ]))
        .with_allow_auto_topic_creation(false)
}

fn asked_topic(req: &MetadataRequest) -> String {
    req.topics
        .as_ref()
        .and_then(|ts| ts.first())
        .and_then(|t| t.name.as_ref())
        .map(|n| n.0.to_string())
        .unwrap_or_default()
}

/// `n` records at offsets `base..base + n` in one uncompressed v2 batch.
fn batch(base: i64, n: usize, tag: &str) -> Bytes {
    batch_with(base, n, tag, Compression::None)
}

/// [`batch`], compressed with `compression`.
fn batch_with(base: i64, n: usize, tag: &str, compression: Compression) -> Bytes {
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: base + i as i64,
            // Consecutive, or the encoder starts a new batch per record.
            sequence: i as i32,
            timestamp: 1_700_000_000_000 + i as i64,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(format!("{tag}-{i}"))),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .expect("encode batch");
    buf.freeze()
}

/// Two Metadata requests in flight on one connection, answered in reverse order: each caller
/// gets the answer to its own request, because answers are matched by correlation id and not
/// by arrival order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_answers_out_of_order_reach_their_callers() {
    let held = Arc::new(Mutex::new(None::<Bytes>));
    let fake = FakeCluster::start(
        &[1],
        script(move |_, req| match &req.body {
            Body::Metadata(m) => {
                let topic = asked_topic(m);
                let answer = req
                    .frame(&MetadataResponse::default().with_cluster_id(Some(str_bytes(&topic))));
                let mut held = held.lock().unwrap();
                match held.take() {
                    None => {
                        *held = Some(answer);
                        Action::Ignore
                    }
                    Some(first) => Action::Many(vec![Action::Send(answer), Action::Send(first)]),
                }
            }
            _ => Action::Default,
        }),
    )
    .await;
    within(async {
        let conn = connection(&fake, ConnectionConfig::default()).await;
        let (ask_a, ask_b) = (metadata_for("a"), metadata_for("b"));
        let (a, b) = tokio::join!(conn.send(&ask_a), conn.send(&ask_b));
        assert_eq!(a.unwrap().cluster_id.unwrap().as_str(), "a");
        assert_eq!(b.unwrap().cluster_id.unwrap().as_str(), "b");
        let asked = fake.requests(ApiKey::Metadata);
        assert_eq!(asked.len(), 2);
        assert_ne!(
            asked[0].header.correlation_id,
            asked[1].header.correlation_id
        );
        assert!(!conn.is_poisoned());
    })
    .await;
}

/// A connection that breaks with three requests in flight gives every waiter the same I/O
/// error once; the connection is then poisoned, and a fourth request fails at once without
/// being sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_connection_fails_every_waiter_with_the_same_error() {
    let fake = FakeCluster::start(
        &[1],
        script(|fake, req| match req.api {
            ApiKey::Metadata if fake.requests(ApiKey::Metadata).len() == 3 => Action::Close,
            ApiKey::Metadata => Action::Ignore,
            _ => Action::Default,
        }),
    )
    .await;
    within(async {
        let conn = connection(&fake, ConnectionConfig::default()).await;
        let asks = [metadata_for("a"), metadata_for("b"), metadata_for("c")];
        let (a, b, c) = tokio::join!(
            conn.send(&asks[0]),
            conn.send(&asks[1]),
            conn.send(&asks[2])
        );
        let messages: Vec<String> = [a, b, c]
            .into_iter()
            .map(|r| match r {
                Err(Error::Io { message, .. }) => message,
                other => panic!("expected Error::Io, got {other:?}"),
            })
            .collect();
        assert!(messages.iter().all(|m| *m == messages[0]), "{messages:?}");
        assert!(conn.is_poisoned());

        let started = Instant::now();
        let fourth = conn.send(&metadata_for("d")).await;
        assert!(
            matches!(&fourth, Err(Error::Io { message, .. }) if *message == messages[0]),
            "{fourth:?}"
        );
        assert!(started.elapsed() < Duration::from_millis(500));
        assert_eq!(fake.requests(ApiKey::Metadata).len(), 3, "the 4th was sent");
    })
    .await;
}

/// A request whose caller gives up while its frame is half written (a `select!` or an outer
/// timeout dropping the future) must not leave half a frame on the wire: the next request is
/// answered, or fails at once, instead of being swallowed by the broker as the rest of the
/// abandoned frame and timing out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_cancelled_mid_write_does_not_corrupt_the_stream() {
    let fake = FakeCluster::start(
        &[1],
        async_script(|_, req| async move {
            match &req.body {
                // Stops reading for a while, so that the big request below fills the socket.
                Body::Metadata(m) if asked_topic(m) == "slow" => {
                    tokio::time::sleep(Duration::from_millis(700)).await;
                    Action::Default
                }
                Body::Produce(_) => Action::Ignore,
                _ => Action::Default,
            }
        }),
    )
    .await;
    within(async {
        let config = ConnectionConfig {
            request_timeout: Duration::from_secs(2),
            ..ConnectionConfig::default()
        };
        let conn = connection(&fake, config).await;
        let slow = tokio::spawn({
            let conn = Arc::clone(&conn);
            async move { conn.send(&metadata_for("slow")).await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Far more than the socket buffers hold, so the write cannot finish while the fake
        // is not reading.
        let big = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(1000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(str_bytes("t")))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(Bytes::from(vec![0u8; 24 << 20])))])]);
        let abandoned = tokio::time::timeout(Duration::from_millis(200), conn.send(&big)).await;
        assert!(abandoned.is_err(), "the big write finished: {abandoned:?}");

        let after = conn.send(&metadata_for("after")).await;
        assert!(
            !matches!(after, Err(Error::Timeout { .. })),
            "the next request was lost in the half-written frame: {after:?}"
        );
        let _ = slow.await;
    })
    .await;
}

/// A request the broker never answers fails with `Error::Timeout` after `request.timeout.ms`,
/// and the connection is poisoned (a late answer would match nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_request_times_out_and_poisons_the_connection() {
    let fake = FakeCluster::start(
        &[1],
        script(|_, req| match req.api {
            ApiKey::Metadata => Action::Ignore,
            _ => Action::Default,
        }),
    )
    .await;
    within(async {
        let config = ConnectionConfig {
            request_timeout: Duration::from_millis(300),
            ..ConnectionConfig::default()
        };
        let conn = connection(&fake, config).await;
        let started = Instant::now();
        let result = conn.send(&metadata_for("a")).await;
        let waited = started.elapsed();
        assert!(
            matches!(
                result,
                Err(Error::Timeout {
                    api: ApiKey::Metadata,
                    ..
                })
            ),
            "{result:?}"
        );
        assert!(waited >= Duration::from_millis(300), "{waited:?}");
        assert!(waited < Duration::from_secs(2), "{waited:?}");
        assert!(conn.is_poisoned());
        let again = conn.send(&metadata_for("b")).await;
        assert!(matches!(again, Err(Error::Timeout { .. })), "{again:?}");
        assert_eq!(fake.requests(ApiKey::Metadata).len(), 1);
    })
    .await;
}

/// KIP-219: after an answer with `throttle_time_ms = 400`, the client sends nothing more on that
/// connection for 400 ms (measured at the fake: a behaviour bound, not a benchmark).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_answer_holds_back_the_next_request() {
    let fake = FakeCluster::start(
        &[1],
        script(|fake, req| match &req.body {
            Body::Metadata(m) if fake.requests(ApiKey::Metadata).len() == 1 => {
                req.reply(&fake.spec().metadata(m).with_throttle_time_ms(400))
            }
            _ => Action::Default,
        }),
    )
    .await;
    within(async {
        let client = client(&fake).await;
        client.refresh_metadata().await.unwrap();
        let asked = fake.requests(ApiKey::Metadata);
        assert_eq!(asked.len(), 2);
        assert_eq!(
            asked[0].conn, asked[1].conn,
            "a new connection is not throttled"
        );
        let gap = asked[1].at.duration_since(asked[0].at);
        assert!(
            gap >= Duration::from_millis(350),
            "next request after {gap:?}"
        );
    })
    .await;
}

/// A connection the broker closed (after answering) is replaced: the next operation succeeds
/// on a new connection, and counted as a reconnect.
#[tokio::test]
async fn a_closed_connection_is_replaced() {
    let fake = FakeCluster::start(
        &[1],
        script(|_, req| match req.api {
            ApiKey::Metadata if req.conn == 1 => Action::Many(vec![Action::Default, Action::Close]),
            _ => Action::Default,
        }),
    )
    .await;
    let recorder = metrics_util::debugging::DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    // This test's thread only: the runtime is single-threaded.
    let _local = metrics::set_default_local_recorder(&recorder);
    within(async {
        let client = client(&fake).await;
        // Let the client's reader see the close (a close it has not seen yet is the ignored
        // test below).
        tokio::time::sleep(Duration::from_millis(200)).await;
        let metadata = client.refresh_metadata().await.unwrap();
        assert_eq!(metadata.brokers.len(), 1);
        assert_eq!(fake.connections(1), 2);
        let asked = fake.requests(ApiKey::Metadata);
        assert_eq!(asked.iter().map(|r| r.conn).collect::<Vec<_>>(), [1, 2]);
    })
    .await;
    let reconnects: u64 = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| key.key().name() == "strait_broker_reconnects_total")
        .map(|(.., value)| match value {
            metrics_util::debugging::DebugValue::Counter(n) => n,
            _ => 0,
        })
        .sum();
    assert_eq!(reconnects, 1, "the replaced connection is counted once");
}

/// A metadata refresh whose connection the broker closes while the request is in flight (an
/// idle connection closed by `connections.max.idle.ms`, a broker restart) is retried on a new
/// connection, not failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_survives_a_connection_closed_under_it() {
    let fake = FakeCluster::start(
        &[1],
        script(|_, req| match req.api {
            ApiKey::Metadata if req.conn == 1 && req.header.correlation_id > 1 => Action::Close,
            _ => Action::Default,
        }),
    )
    .await;
    within(async {
        let client = client(&fake).await;
        let result = client.refresh_metadata().await;
        assert!(result.is_ok(), "{result:?}");
        assert_eq!(fake.connections(1), 2);
    })
    .await;
}

/// A leader move: broker 1 answers ListOffsets with NOT_LEADER_OR_FOLLOWER (and metadata now
/// names broker 2); the client refreshes its metadata and asks broker 2, whose answer it
/// returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_move_refreshes_metadata_and_routes_to_the_new_leader() {
    let fake = FakeCluster::start(
        &[1, 2],
        script(|fake, req| match &req.body {
            Body::ListOffsets(l) => {
                let topic = l.topics[0].name.clone();
                let partition = |p: ListOffsetsPartitionResponse| {
                    ListOffsetsResponse::default().with_topics(vec![
                        ListOffsetsTopicResponse::default()
                            .with_name(topic.clone())
                            .with_partitions(vec![p.with_partition_index(0)]),
                    ])
                };
                if req.broker == 1 {
                    fake.set_topic("t", &[2]);
                    req.reply(&partition(
                        ListOffsetsPartitionResponse::default()
                            .with_error_code(ResponseError::NotLeaderOrFollower.code()),
                    ))
                } else {
                    req.reply(&partition(
                        ListOffsetsPartitionResponse::default()
                            .with_offset(42)
                            .with_timestamp(-1)
                            .with_leader_epoch(1),
                    ))
                }
            }
            _ => Action::Default,
        }),
    )
    .await;
    fake.set_topic("t", &[1]);
    within(async {
        let client = client(&fake).await;
        let tp = TopicPartition::new("t", 0);
        assert_eq!(client.leader(&tp).await.unwrap().0, 1);
        let listed = client
            .list_offset(&tp, OffsetSpec::Latest, IsolationLevel::ReadUncommitted)
            .await
            .unwrap();
        assert_eq!(listed.offset, 42);
        assert_eq!(client.cached_metadata().leader(&tp).map(|b| b.0), Some(2));
        let brokers: Vec<i32> = fake
            .requests(ApiKey::ListOffsets)
            .iter()
            .map(|r| r.broker)
            .collect();
        assert_eq!(brokers, [1, 2]);
        assert!(
            fake.requests(ApiKey::Metadata).len() >= 2,
            "metadata not refreshed"
        );
    })
    .await;
}

/// An answer to ListOffsets request `l` naming every partition it asked, each answered by
/// `answer(partition index)` (its index and a timestamp of -1 filled in here).
fn list_offsets_answer(
    l: &ListOffsetsRequest,
    answer: impl Fn(i32) -> ListOffsetsPartitionResponse,
) -> ListOffsetsResponse {
    let topics = l
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    answer(p.partition_index)
                        .with_partition_index(p.partition_index)
                        .with_timestamp(-1)
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

/// ListOffsets for many partitions: one request per leader naming all of its partitions (not
/// one per partition), the leaders asked together; a partition whose leader moved
/// (NOT_LEADER_OR_FOLLOWER in the batch) is asked again at its new leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_asks_each_leader_once_for_all_its_partitions() {
    let fake = FakeCluster::start(
        &[1, 2],
        script(|fake, req| match &req.body {
            Body::ListOffsets(l) => req.reply(&list_offsets_answer(l, |i| {
                let answer = ListOffsetsPartitionResponse::default().with_leader_epoch(0);
                if i == 3 && req.broker == 1 {
                    // Partition 3 moved to broker 2.
                    fake.set_topic("t", &[1, 2, 1, 2]);
                    answer.with_error_code(ResponseError::NotLeaderOrFollower.code())
                } else {
                    answer.with_offset(100 + i64::from(i))
                }
            })),
            _ => Action::Default,
        }),
    )
    .await;
    // Partitions 0 and 2 on broker 1, 1 on broker 2, 3 on broker 1 until it moves.
    fake.set_topic("t", &[1, 2, 1, 1]);
    within(async {
        let client = client(&fake).await;
        client.metadata().await.unwrap();
        let asked: Vec<(TopicPartition, OffsetSpec)> = (0..4)
            .map(|p| (TopicPartition::new("t", p), OffsetSpec::Latest))
            .collect();
        let listed = client
            .list_offsets(&asked, IsolationLevel::ReadUncommitted)
            .await
            .unwrap();
        for p in 0..4 {
            let offset = listed[&TopicPartition::new("t", p)]
                .as_ref()
                .unwrap()
                .offset;
            assert_eq!(offset, 100 + i64::from(p), "partition {p}");
        }
        let mut requests: Vec<(i32, Vec<i32>)> = fake
            .requests(ApiKey::ListOffsets)
            .iter()
            .map(|r| {
                let Body::ListOffsets(l) = &r.body else {
                    unreachable!()
                };
                let mut ps: Vec<i32> = l.topics[0]
                    .partitions
                    .iter()
                    .map(|p| p.partition_index)
                    .collect();
                ps.sort();
                (r.broker, ps)
            })
            .collect();
        // The two leaders' requests go out together, in either order; partition 3 comes last.
        requests[..2].sort();
        assert_eq!(
            requests,
            [(1, vec![0, 2, 3]), (2, vec![1]), (2, vec![3])],
            "one request per leader, then the moved partition alone"
        );
    })
    .await;
}

/// Partitions whose logs the broker is still creating (UNKNOWN_TOPIC_OR_PARTITION for every
/// one of them, as right after a large CreateTopics) are asked again together, in one request
/// per leader, not one by one: a flow of 10,000 new partitions waited minutes for that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_asks_again_together_what_a_broker_is_still_creating() {
    let answered = Arc::new(AtomicBool::new(false));
    let seen = Arc::clone(&answered);
    let fake = FakeCluster::start(
        &[1],
        script(move |_, req| match &req.body {
            Body::ListOffsets(l) => {
                // The first request finds no log yet; the next finds all of them.
                let ready = seen.swap(true, Ordering::SeqCst);
                req.reply(&list_offsets_answer(l, |i| {
                    let answer = ListOffsetsPartitionResponse::default();
                    if ready {
                        answer.with_offset(i64::from(i))
                    } else {
                        answer.with_error_code(ResponseError::UnknownTopicOrPartition.code())
                    }
                }))
            }
            _ => Action::Default,
        }),
    )
    .await;
    fake.set_topic("t", &[1; 50]);
    within(async {
        let client = client(&fake).await;
        let asked: Vec<(TopicPartition, OffsetSpec)> = (0..50)
            .map(|p| (TopicPartition::new("t", p), OffsetSpec::Latest))
            .collect();
        let listed = client
            .list_offsets(&asked, IsolationLevel::ReadUncommitted)
            .await
            .unwrap();
        for p in 0..50 {
            let offset = listed[&TopicPartition::new("t", p)]
                .as_ref()
                .unwrap()
                .offset;
            assert_eq!(offset, i64::from(p), "partition {p}");
        }
        let sizes: Vec<usize> = fake
            .requests(ApiKey::ListOffsets)
            .iter()
            .map(|r| {
                let Body::ListOffsets(l) = &r.body else {
                    unreachable!()
                };
                l.topics.iter().map(|t| t.partitions.len()).sum()
            })
            .collect();
        assert_eq!(sizes, [50, 50], "asked twice, all partitions each time");
    })
    .await;
}

/// CreatePartitions goes to the controller with the topic and the new total; on success the
/// metadata is refreshed and shows the new partitions. INVALID_PARTITIONS comes back as that
/// broker error, with the broker's message and the topic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_partitions_sends_the_count_to_the_controller() {
    let fake = FakeCluster::start(
        &[1, 2],
        script(|fake, req| match &req.body {
            Body::CreatePartitions(c) => {
                let t = &c.topics[0];
                let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
                let result = if fake.requests(ApiKey::CreatePartitions).len() == 1 {
                    fake.set_topic(&t.name.0, &vec![1; t.count as usize]);
                    result
                } else {
                    result
                        .with_error_code(ResponseError::InvalidPartitions.code())
                        .with_error_message(Some(str_bytes("Topic already has 5 partitions.")))
                };
                req.reply(&CreatePartitionsResponse::default().with_results(vec![result]))
            }
            _ => Action::Default,
        }),
    )
    .await;
    fake.set_topic("t", &[1]);
    fake.spec().controller = 2;
    within(async {
        let client = client(&fake).await;
        client.create_partitions("t", 5).await.unwrap();
        let sent = fake.requests(ApiKey::CreatePartitions);
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].broker, 2, "not sent to the controller");
        let Body::CreatePartitions(request) = &sent[0].body else {
            unreachable!()
        };
        let asked: Vec<(String, i32)> = request
            .topics
            .iter()
            .map(|t| (t.name.0.to_string(), t.count))
            .collect();
        assert_eq!(asked, [("t".to_owned(), 5)]);
        assert_eq!(client.cached_metadata().topics["t"].partitions.len(), 5);

        let refused = client.create_partitions("t", 5).await.unwrap_err();
        match refused {
            Error::Broker {
                code: ResponseError::InvalidPartitions,
                message,
                context,
            } => {
                assert_eq!(message.as_deref(), Some("Topic already has 5 partitions."));
                assert_eq!(context, Context::Topic("t".into()));
            }
            other => panic!("expected INVALID_PARTITIONS, got {other:?}"),
        }
        assert_eq!(fake.requests(ApiKey::CreatePartitions).len(), 2, "retried");
    })
    .await;
}

/// A frame whose size prefix is right but whose Metadata body is cut in the middle is a
/// protocol error (`Error::Frame`, no panic) and poisons the connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_response_is_a_frame_error() {
    let fake = FakeCluster::start(
        &[1, 2, 3],
        script(|fake, req| match &req.body {
            Body::Metadata(m) => {
                let whole = req.frame(&fake.spec().metadata(m));
                let body = whole.slice(4..4 + (whole.len() - 4) / 2);
                let mut frame = BytesMut::from(&(body.len() as i32).to_be_bytes()[..]);
                frame.extend_from_slice(&body);
                Action::Send(frame.freeze())
            }
            _ => Action::Default,
        }),
    )
    .await;
    fake.set_topic("topic-with-a-long-name", &[1, 2, 3, 1, 2, 3]);
    within(async {
        let conn = connection(&fake, ConnectionConfig::default()).await;
        let result = conn.send(&MetadataRequest::default()).await;
        match &result {
            Err(Error::Frame { source, .. }) => {
                assert!(matches!(**source, FrameError::Decode { .. }), "{source:?}");
            }
            other => panic!("expected Error::Frame, got {other:?}"),
        }
        assert!(conn.is_poisoned());
    })
    .await;
}

/// A negative or huge size prefix is a protocol error (`Error::Frame`, nothing allocated), and
/// poisons the connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_size_prefix_is_a_frame_error() {
    for size in [-2i32, i32::MAX] {
        let fake = FakeCluster::start(
            &[1],
            script(move |_, req| match req.api {
                ApiKey::Metadata => {
                    let mut frame = size.to_be_bytes().to_vec();
                    frame.extend_from_slice(&req.header.correlation_id.to_be_bytes());
                    Action::Send(frame.into())
                }
                _ => Action::Default,
            }),
        )
        .await;
        within(async {
            let conn = connection(&fake, ConnectionConfig::default()).await;
            let result = conn.send(&metadata_for("a")).await;
            match &result {
                Err(Error::Frame { source, .. }) => {
                    assert!(
                        matches!(**source, FrameError::BadSize { size: s, .. } if s == i64::from(size)),
                        "{source:?}"
                    );
                }
                other => panic!("size {size}: expected Error::Frame, got {other:?}"),
            }
            assert!(conn.is_poisoned());
        })
        .await;
    }
}

/// A Fetch answer ending in half a batch (the broker's size limit, KIP-74) comes back whole;
/// the scanner yields the complete batch, stops cleanly and reports the partial bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_ending_in_a_partial_batch_scans_cleanly() {
    let first = batch(0, 3, "first");
    let second = batch(3, 3, "second");
    let half = second.len() / 2;
    let mut records = BytesMut::from(&first[..]);
    records.extend_from_slice(&second[..half]);
    let records = records.freeze();
    let sent = records.clone();
    let fake = FakeCluster::start(
        &[1],
        script(move |_, req| match &req.body {
            Body::Fetch(f) => req.reply(&FetchResponse::default().with_responses(
                vec![FetchableTopicResponse::default()
                    .with_topic(f.topics[0].topic.clone())
                    .with_partitions(vec![PartitionData::default()
                        .with_partition_index(0)
                        .with_high_watermark(6)
                        .with_last_stable_offset(6)
                        .with_log_start_offset(0)
                        .with_records(Some(sent.clone()))])],
            )),
            _ => Action::Default,
        }),
    )
    .await;
    fake.set_topic("t", &[1]);
    within(async {
        let client = client(&fake).await;
        let tp = TopicPartition::new("t", 0);
        let mut results = client
            .fetch(
                &[FetchPosition::new(tp.clone(), 0)],
                &FetchOptions::default(),
            )
            .await;
        let data = results.remove(&tp).expect("an entry").expect("fetch ok");
        assert_eq!(data.records, records);
        assert_eq!(data.high_watermark, 6);
        let mut scanner = BatchScanner::new(data.records);
        let only = scanner.next().expect("one batch").expect("well-formed");
        assert_eq!(only.header.base_offset, 0);
        assert_eq!(only.header.record_count, 3);
        assert_eq!(only.bytes, first);
        assert!(scanner.next().is_none());
        assert!(scanner.is_finished());
        assert_eq!(scanner.consumed_bytes(), first.len());
        assert_eq!(scanner.trailing_partial_bytes(), half);
    })
    .await;
}

/// What the fake leader did with produced batches.
#[derive(Debug, Default)]
struct Log {
    /// The base sequence to refuse once with NOT_LEADER_OR_FOLLOWER.
    reject_once: Option<i32>,
    /// The base sequence refused with NOT_LEADER_OR_FOLLOWER.
    rejected: Option<i32>,
    expected_sequence: i32,
    next_offset: i64,
    appended: Vec<i32>,
    refused_out_of_order: usize,
    /// Every base sequence the leader was sent, in arrival order.
    received: Vec<i32>,
    /// The size of every batch the leader was sent, in arrival order.
    received_bytes: Vec<usize>,
    /// Batches larger than this are refused with MESSAGE_TOO_LARGE (the topic's
    /// `max.message.bytes`).
    max_batch_bytes: Option<usize>,
    refused_too_large: usize,
}

/// A fake leader of `t-0` that appends what the producer (id 1000) sends, refuses the batch
/// `log.reject_once` names once with NOT_LEADER_OR_FOLLOWER, and checks sequences as Kafka
/// does: OUT_OF_ORDER_SEQUENCE_NUMBER for a gap, but any sequence while it holds nothing of
/// the producer (Kafka keeps no state for a producer that never wrote to the partition).
async fn sequence_checking_leader(log: Arc<Mutex<Log>>) -> FakeCluster {
    sequence_checking_leader_after(log, Duration::ZERO).await
}

/// [`sequence_checking_leader`], answering each request `delay` after it arrives (a leader that
/// far away).
async fn sequence_checking_leader_after(log: Arc<Mutex<Log>>, delay: Duration) -> FakeCluster {
    let leader_log = log;
    let fake = FakeCluster::start(
        &[1],
        script(move |_, req| match &req.body {
            Body::Produce(p) => {
                let mut log = leader_log.lock().unwrap();
                let topics = p
                    .topic_data
                    .iter()
                    .map(|t| {
                        let partitions = t
                            .partition_data
                            .iter()
                            .map(|d| {
                                let answer =
                                    PartitionProduceResponse::default().with_index(d.index);
                                let records = d.records.clone().unwrap_or_default();
                                let mut scan = BatchScanner::new(records);
                                let Some(Ok(batch)) = scan.next() else {
                                    return answer
                                        .with_error_code(ResponseError::CorruptMessage.code());
                                };
                                let h: BatchHeader = batch.header;
                                assert_eq!((h.producer_id, h.producer_epoch), (1000, 0));
                                assert!(scan.next().is_none(), "one batch per partition");
                                log.received.push(h.base_sequence);
                                log.received_bytes.push(batch.bytes.len());
                                if log.max_batch_bytes.is_some_and(|m| batch.bytes.len() > m) {
                                    log.refused_too_large += 1;
                                    return answer
                                        .with_error_code(ResponseError::MessageTooLarge.code());
                                }
                                if log.reject_once == Some(h.base_sequence) {
                                    log.reject_once = None;
                                    log.rejected = Some(h.base_sequence);
                                    return answer.with_error_code(
                                        ResponseError::NotLeaderOrFollower.code(),
                                    );
                                }
                                if !log.appended.is_empty()
                                    && h.base_sequence != log.expected_sequence
                                {
                                    log.refused_out_of_order += 1;
                                    return answer.with_error_code(
                                        ResponseError::OutOfOrderSequenceNumber.code(),
                                    );
                                }
                                let base = log.next_offset;
                                log.appended.push(h.base_sequence);
                                log.expected_sequence = h.base_sequence + h.record_count;
                                log.next_offset += i64::from(h.record_count);
                                answer.with_base_offset(base)
                            })
                            .collect();
                        TopicProduceResponse::default()
                            .with_name(t.name.clone())
                            .with_partition_responses(partitions)
                    })
                    .collect();
                away(
                    delay,
                    req.reply(&ProduceResponse::default().with_responses(topics)),
                )
            }
            _ => away(delay, Action::Default),
        }),
    )
    .await;
    fake.set_topic("t", &[1]);
    fake
}

/// `action`, `delay` later: every answer of a leader that far away.
fn away(delay: Duration, action: Action) -> Action {
    if delay.is_zero() {
        action
    } else {
        Action::After(delay, Box::new(action))
    }
}

/// Batches of `counts` records for `t-0` that follow each other (each starts at the offset
/// after the one before), as a partition's batches do at the source, compressed with `codec`.
fn consecutive_batches(
    counts: &[usize],
    codec: Compression,
) -> Vec<(TopicPartition, strait_wire::RawBatch)> {
    let tp = TopicPartition::new("t", 0);
    let mut base = 0;
    counts
        .iter()
        .map(|n| {
            let raw = BatchScanner::new(batch_with(base, *n, "p", codec))
                .next()
                .unwrap()
                .unwrap();
            base += *n as i64;
            (tp.clone(), raw)
        })
        .collect()
}

/// Sends 60 consecutive batches of 2 records (`codec`) with merging `mode` to a leader answering after
/// `delay`: the acknowledgements (each batch's own offset and count) and what the leader got.
async fn send_merging(
    mode: MergeMode,
    delay: Duration,
    codec: Compression,
) -> (Vec<(i64, i32)>, Log) {
    let log = Arc::new(Mutex::new(Log::default()));
    let fake = sequence_checking_leader_after(Arc::clone(&log), delay).await;
    let producer = merging(&fake, mode).await;
    let acks = producer
        .send_all(consecutive_batches(&[2; 60], codec))
        .await
        .into_iter()
        .map(|a| {
            let a = a.expect("batch written");
            (a.base_offset, a.record_count)
        })
        .collect();
    let log = std::mem::take(&mut *log.lock().unwrap());
    (acks, log)
}

/// A partition's waiting batches merge into one: with `auto` toward a leader answering at
/// once when the partition is alone there (its requests would carry one batch each; when the
/// leader is far, or many partitions share it:
/// `batches_merge_when_the_leader_is_far_or_requests_carry_few_partitions`), compressed or not
/// (gzip only when the leader is far), and with `always`; never with `never`, however far the
/// leader. Every batch is acknowledged
/// at its own offsets either way, and the leader sees its sequences without a gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_merge_when_asked_or_alone_on_their_leader() {
    within(async {
        let expected: Vec<(i64, i32)> = (0..60).map(|i| (2 * i, 2)).collect();
        let (far, near) = (Duration::from_millis(15), Duration::ZERO);
        for codec in [Compression::Lz4, Compression::None] {
            let (acks, log) = send_merging(MergeMode::Auto, near, codec).await;
            assert_eq!(acks, expected);
            assert_eq!(
                log.received,
                [0],
                "{codec:?}, alone near: all 60 in one batch"
            );
            assert_eq!(log.next_offset, 120);
            assert_eq!(log.refused_out_of_order, 0);
        }

        // gzip would be compressed again at a tenth of lz4's speed: only for a far leader.
        let (acks, log) = send_merging(MergeMode::Auto, near, Compression::Gzip).await;
        assert_eq!(acks, expected);
        assert_eq!(log.received.len(), 60, "gzip, alone near: unmerged");
        let (acks, log) = send_merging(MergeMode::Auto, far, Compression::Gzip).await;
        assert_eq!(acks, expected);
        assert_eq!(log.received, [0], "gzip, far: all 60 in one batch");

        let (acks, log) = send_merging(MergeMode::Always, near, Compression::Lz4).await;
        assert_eq!(acks, expected);
        assert_eq!(log.received, [0], "all 60 in one batch");

        let (acks, log) = send_merging(MergeMode::Never, far, Compression::None).await;
        assert_eq!(acks, expected);
        assert_eq!(log.received.len(), 60);
    })
    .await;
}

/// A leader of `partitions` partitions of `t` answering each request `delay` after it arrives
/// (its Produce requests `busy` later still), and per partition the record count of each batch
/// it was sent (it appends whatever comes).
async fn appending_leader(
    partitions: usize,
    delay: Duration,
    busy: Duration,
) -> (FakeCluster, Arc<Mutex<BTreeMap<i32, Vec<i32>>>>) {
    let log: Arc<Mutex<BTreeMap<i32, Vec<i32>>>> = Arc::default();
    let leader_log = Arc::clone(&log);
    let fake = FakeCluster::start(
        &[1],
        script(move |_, req| match &req.body {
            Body::Produce(p) => {
                let mut log = leader_log.lock().unwrap();
                let topics = p
                    .topic_data
                    .iter()
                    .map(|t| {
                        let answers = t
                            .partition_data
                            .iter()
                            .map(|d| {
                                let records = d.records.clone().unwrap_or_default();
                                let Some(Ok(batch)) = BatchScanner::new(records).next() else {
                                    return PartitionProduceResponse::default()
                                        .with_index(d.index)
                                        .with_error_code(ResponseError::CorruptMessage.code());
                                };
                                let counts = log.entry(d.index).or_default();
                                let base: i32 = counts.iter().sum();
                                counts.push(batch.header.record_count);
                                PartitionProduceResponse::default()
                                    .with_index(d.index)
                                    .with_base_offset(i64::from(base))
                            })
                            .collect();
                        TopicProduceResponse::default()
                            .with_name(t.name.clone())
                            .with_partition_responses(answers)
                    })
                    .collect();
                away(
                    delay + busy,
                    req.reply(&ProduceResponse::default().with_responses(topics)),
                )
            }
            _ => away(delay, Action::Default),
        }),
    )
    .await;
    fake.set_topic("t", &vec![1; partitions]);
    (fake, log)
}

/// `auto` merges where the window bounds a partition: when its leader is far, or when a
/// request would carry the batches of a few partitions at most ([`FEW_PARTITIONS`]). With
/// that many partitions of 30 small batches each on a leader answering at once, each
/// partition's batches go merged; with one partition more they go as they came, unopened;
/// with one more and a leader answering every request after 15 ms (past [`FAR_ROUND_TRIP`]),
/// merged; but near and busy, answering only its Produce requests after 15 ms, unmerged (the
/// distance is measured apart from the produce). Partitions done early still count: the last
/// one left of many is not merged.
/// Every batch is acknowledged at its own offsets either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_merge_when_the_leader_is_far_or_requests_carry_few_partitions() {
    within(async {
        let (far, near) = (Duration::from_millis(15), Duration::ZERO);
        assert!(far > FAR_ROUND_TRIP);
        let (few, more) = (FEW_PARTITIONS, FEW_PARTITIONS + 1);
        // (batches of 2 records per partition, the leader's delay, its Produce requests' delay
        // beyond that, what it receives per partition: the record count of each batch)
        type Case = (Vec<usize>, Duration, Duration, Vec<Vec<i32>>);
        let busy = far;
        let cases: Vec<Case> = vec![
            (vec![30; few], near, near, vec![vec![60]; few]),
            (vec![30; more], near, near, vec![vec![2; 30]; more]),
            (vec![30; more], far, near, vec![vec![60]; more]),
            (vec![30; more], near, busy, vec![vec![2; 30]; more]),
            // The others done after one batch each: the last is no less one of many.
            (
                [vec![1; few], vec![30]].concat(),
                near,
                near,
                [vec![vec![2]; few], vec![vec![2; 30]]].concat(),
            ),
        ];
        for (sizes, delay, slow, expected) in cases {
            let (fake, log) = appending_leader(sizes.len(), delay, slow).await;
            let producer = merging(&fake, MergeMode::Auto).await;
            send_consecutive(&producer, &sizes).await;
            let received: Vec<Vec<i32>> = log.lock().unwrap().values().cloned().collect();
            assert_eq!(
                received, expected,
                "{sizes:?} batches, {delay:?} away, produce {slow:?} slower"
            );
        }

        // A call of one partition after a call of many: the producer writes many there.
        let (fake, log) = appending_leader(more, near, near).await;
        let producer = merging(&fake, MergeMode::Auto).await;
        send_consecutive(&producer, &vec![1; more]).await;
        send_consecutive(&producer, &[30]).await;
        let received = log.lock().unwrap()[&0].clone();
        assert_eq!(received, [vec![2], vec![2; 30]].concat());
    })
    .await;
}

/// A producer into `fake` (whose leader is broker 1) that merges in `mode`, up to 1 MiB, once
/// it knows how far the leader is.
async fn merging(fake: &FakeCluster, mode: MergeMode) -> RawProducer {
    let producer = RawProducer::new(
        client(fake).await,
        ProducerConfig {
            delivery_timeout: Duration::from_secs(5),
            merge: Merge {
                mode,
                max_bytes: 1 << 20,
            },
            ..ProducerConfig::default()
        },
    )
    .await
    .unwrap();
    while producer.distance(BrokerId(1)).is_none() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    producer
}

/// Sends `sizes[p]` consecutive batches of 2 records to each partition `t-p` in one call (each
/// partition's from offset 0), and checks each is acknowledged at its own offsets.
async fn send_consecutive(producer: &RawProducer, sizes: &[usize]) {
    let batches: Vec<(TopicPartition, strait_wire::RawBatch)> = (0..)
        .zip(sizes)
        .flat_map(|(p, n)| {
            consecutive_batches(&vec![2; *n], Compression::None)
                .into_iter()
                .map(move |(_, b)| (TopicPartition::new("t", p), b))
        })
        .collect();
    let acks: Vec<i32> = producer
        .send_all(batches)
        .await
        .into_iter()
        .map(|a| a.expect("batch written").record_count)
        .collect();
    assert_eq!(acks, vec![2; sizes.iter().sum()], "{sizes:?}");
}

/// Batches merged beyond `max_bytes` are split: 60 batches of 2 records merge into batches
/// that each fit the limit, every batch acknowledged at its own offsets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merged_batch_stays_within_its_limit() {
    within(async {
        let log = Arc::new(Mutex::new(Log::default()));
        let fake = sequence_checking_leader(Arc::clone(&log)).await;
        let batches = consecutive_batches(&[2; 60], Compression::None);
        let one = batches[0].1.bytes.len();
        let producer = RawProducer::new(
            client(&fake).await,
            ProducerConfig {
                merge: Merge {
                    mode: MergeMode::Always,
                    max_bytes: one * 10,
                },
                ..ProducerConfig::default()
            },
        )
        .await
        .unwrap();
        let acks: Vec<(i64, i32)> = producer
            .send_all(batches)
            .await
            .into_iter()
            .map(|a| {
                let a = a.expect("batch written");
                (a.base_offset, a.record_count)
            })
            .collect();
        assert_eq!(acks, (0..60).map(|i| (2 * i, 2)).collect::<Vec<_>>());
        let log = log.lock().unwrap();
        assert!(log.received.len() >= 6, "{:?}", log.received);
        assert!(log.received.len() < 60, "{:?}", log.received);
        assert_eq!(log.next_offset, 120);
    })
    .await;
}

/// A producer into `fake` that merges whenever batches wait, up to 1 MiB.
async fn always_merging(fake: &FakeCluster) -> RawProducer {
    RawProducer::new(
        client(fake).await,
        ProducerConfig {
            delivery_timeout: Duration::from_secs(5),
            merge: Merge {
                mode: MergeMode::Always,
                max_bytes: 1 << 20,
            },
            ..ProducerConfig::default()
        },
    )
    .await
    .unwrap()
}

/// A merged batch the target refuses as too large (its topic's `max.message.bytes` is below
/// the merge, which strait cannot know) is split in place and sent again at once, not
/// refused: the leader takes at most 8 of 60 batches of 2 records merged, sees the merge of
/// all 60 refused, then smaller ones, and every batch lands exactly once, in order, at its own
/// offsets (the leader checks the sequences: the split batches keep the refused one's range),
/// well within the second a refusal would pause the partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merged_batch_refused_as_too_large_is_split_and_sent_at_once() {
    within(async {
        let log = Arc::new(Mutex::new(Log::default()));
        let batches = consecutive_batches(&[2; 60], Compression::None);
        let one = batches[0].1.bytes.len();
        log.lock().unwrap().max_batch_bytes = Some(one * 8);
        let fake = sequence_checking_leader(Arc::clone(&log)).await;
        let producer = always_merging(&fake).await;
        let started = Instant::now();
        let acks: Vec<(i64, i32)> = producer
            .send_all(batches)
            .await
            .into_iter()
            .map(|a| {
                let a = a.expect("batch written");
                (a.base_offset, a.record_count)
            })
            .collect();
        let took = started.elapsed();
        assert_eq!(acks, (0..60).map(|i| (2 * i, 2)).collect::<Vec<_>>());
        assert!(took < Duration::from_millis(900), "took {took:?}");
        let log = log.lock().unwrap();
        assert_eq!(log.next_offset, 120, "every record once");
        assert_eq!(log.appended.first(), Some(&0));
        assert!(
            log.appended.windows(2).all(|w| w[0] < w[1]),
            "in sequence order: {:?}",
            log.appended
        );
        // All 60 merged first (refused), then halves (30 refused, then 15 taken), in order.
        let sizes = &log.received_bytes;
        assert_eq!(log.received[..3], [0, 0, 0], "{sizes:?}");
        assert!(sizes[0] > sizes[1] && sizes[1] > sizes[2], "{sizes:?}");
        assert!(sizes[0] > one * 8 && sizes[2] <= one * 8, "{sizes:?}");
        assert_eq!(log.appended, [0, 30, 60, 90], "{sizes:?}");
        assert_eq!(log.refused_too_large, 3, "{sizes:?}");
    })
    .await;
}

/// A batch the target refuses as too large on its own goes the way of any refusal: split
/// down to the batches it was merged from, the first of them fails with MESSAGE_TOO_LARGE
/// and the ones behind it with it (its partition's sequence has a hole).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_too_large_alone_is_refused_after_splitting() {
    within(async {
        let log = Arc::new(Mutex::new(Log::default()));
        let batches = consecutive_batches(&[2; 4], Compression::None);
        let one = batches[0].1.bytes.len();
        log.lock().unwrap().max_batch_bytes = Some(one - 1);
        let fake = sequence_checking_leader(Arc::clone(&log)).await;
        let producer = always_merging(&fake).await;
        let results = producer.send_all(batches).await;
        let first = results[0].as_ref().expect_err("too large");
        assert_eq!(first.code(), Some(ResponseError::MessageTooLarge));
        assert!(first.is_refusal());
        assert!(results.iter().all(Result::is_err), "{results:?}");
        let log = log.lock().unwrap();
        assert_eq!(log.next_offset, 0);
        // 4 merged, then 2 merged, then the first alone.
        assert_eq!(log.refused_too_large, 3, "{:?}", log.received_bytes);
    })
    .await;
}

/// Batches of `counts` records for `t-0`, one per count.
fn batches_of(counts: &[usize]) -> Vec<(TopicPartition, strait_wire::RawBatch)> {
    let tp = TopicPartition::new("t", 0);
    counts
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let raw = BatchScanner::new(batch(100 * (i as i64 + 1), *n, "p"))
                .next()
                .unwrap()
                .unwrap();
            (tp.clone(), raw)
        })
        .collect()
}

async fn producer_of(fake: &FakeCluster) -> RawProducer {
    let producer = RawProducer::new(
        client(fake).await,
        ProducerConfig {
            delivery_timeout: Duration::from_secs(3),
            ..ProducerConfig::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(producer.producer_id(), (1000, 0));
    producer
}

fn offsets_of(acks: Vec<strait_kafka::Result<strait_kafka::produce::ProduceAck>>) -> Vec<i64> {
    acks.into_iter()
        .map(|a| a.expect("batch written").base_offset)
        .collect()
}

/// An idempotent produce whose first batch meets NOT_LEADER_OR_FOLLOWER, and whose later
/// batches meet OUT_OF_ORDER_SEQUENCE_NUMBER behind it (as Kafka answers), is retried in
/// order: all three batches land, in sequence order, at consecutive offsets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_retries_keep_the_order_of_sequences() {
    let log = Arc::new(Mutex::new(Log::default()));
    let fake = sequence_checking_leader(Arc::clone(&log)).await;
    within(async {
        let producer = producer_of(&fake).await;
        // One batch first: the leader holds the producer's state from then on.
        assert_eq!(offsets_of(producer.send_all(batches_of(&[1])).await), [0]);
        log.lock().unwrap().reject_once = Some(1);
        let offsets = offsets_of(producer.send_all(batches_of(&[2, 3, 4])).await);
        assert_eq!(offsets, [1, 3, 6]);
        let log = log.lock().unwrap();
        assert_eq!(log.rejected, Some(1));
        // The two batches behind the refused one were sent before the retry, and refused.
        assert_eq!(log.refused_out_of_order, 2);
        assert_eq!(log.appended, [0, 1, 3, 6]);
        assert_eq!(log.expected_sequence, 10);
        assert_eq!(fake.requests(ApiKey::InitProducerId).len(), 1);
    })
    .await;
}

/// The first batches a producer sends to a partition that holds nothing of it: Kafka accepts
/// any sequence there, so if the first batch is refused (NOT_LEADER_OR_FOLLOWER while a new
/// topic gets its leader) a second one sent beside it would land first, out of order. The
/// producer sends one batch to such a partition until one is acknowledged, then pipelines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_batches_to_a_partition_land_in_order_when_the_first_is_retried() {
    let log = Arc::new(Mutex::new(Log {
        reject_once: Some(0),
        ..Log::default()
    }));
    let fake = sequence_checking_leader(Arc::clone(&log)).await;
    within(async {
        let producer = producer_of(&fake).await;
        let offsets = offsets_of(producer.send_all(batches_of(&[2, 3, 4])).await);
        assert_eq!(offsets, [0, 2, 5]);
        let log = log.lock().unwrap();
        assert_eq!(log.rejected, Some(0));
        assert_eq!(log.appended, [0, 2, 5], "in sequence order");
        assert_eq!(log.refused_out_of_order, 0);
    })
    .await;
}

/// The delivery timeout counts from the call, as Kafka's `delivery.timeout.ms` does, however
/// many requests the batches need: against a leader that refuses every batch with a retriable
/// error, the first batch is retried until the timeout, and the others are never sent but fail
/// with `DeliveryTimeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_delivery_timeout_bounds_a_whole_send_not_each_request() {
    let sequences = Arc::new(Mutex::new(std::collections::BTreeSet::new()));
    let seen = Arc::clone(&sequences);
    let fake = FakeCluster::start(
        &[1],
        script(move |_, req| match &req.body {
            Body::Produce(p) => {
                let topics = p
                    .topic_data
                    .iter()
                    .map(|t| {
                        let partitions = t
                            .partition_data
                            .iter()
                            .map(|d| {
                                let records = d.records.clone().unwrap_or_default();
                                if let Some(Ok(b)) = BatchScanner::new(records).next() {
                                    seen.lock().unwrap().insert(b.header.base_sequence);
                                }
                                PartitionProduceResponse::default()
                                    .with_index(d.index)
                                    .with_error_code(ResponseError::NotLeaderOrFollower.code())
                            })
                            .collect();
                        TopicProduceResponse::default()
                            .with_name(t.name.clone())
                            .with_partition_responses(partitions)
                    })
                    .collect();
                req.reply(&ProduceResponse::default().with_responses(topics))
            }
            _ => Action::Default,
        }),
    )
    .await;
    fake.set_topic("t", &[1]);
    within(async {
        let timeout = Duration::from_secs(1);
        let producer = RawProducer::new(
            client(&fake).await,
            ProducerConfig {
                delivery_timeout: timeout,
                ..ProducerConfig::default()
            },
        )
        .await
        .unwrap();
        let tp = TopicPartition::new("t", 0);
        // Twelve one-record batches: more than five, so not all in flight at once.
        let batches = (0..12)
            .map(|i| {
                let raw = BatchScanner::new(batch(i, 1, "w")).next().unwrap().unwrap();
                (tp.clone(), raw)
            })
            .collect();
        let started = Instant::now();
        let results = producer.send_all(batches).await;
        let took = started.elapsed();
        assert_eq!(results.len(), 12);
        for (i, r) in results.iter().enumerate() {
            match r {
                Err(Error::DeliveryTimeout { after, .. }) => assert_eq!(*after, timeout),
                Err(Error::Broker { code, .. }) if i == 0 => {
                    assert_eq!(*code, ResponseError::NotLeaderOrFollower)
                }
                // Behind the first once it failed for good: never sent.
                Err(Error::Invalid(m)) if i < 5 => assert!(m.contains("not sent"), "{m}"),
                other => panic!("batch {i}: {other:?}"),
            }
        }
        assert!(
            results[5..]
                .iter()
                .all(|r| matches!(r, Err(Error::DeliveryTimeout { .. }))),
            "{results:?}"
        );
        // Only the first batch ever reached the broker: the partition holds nothing of the
        // producer, so the others wait for it to be acknowledged and are never sent.
        let sent = sequences.lock().unwrap().clone();
        assert_eq!(sent.into_iter().collect::<Vec<_>>(), [0]);
        // One timeout and a backoff's rounding, not one per request.
        assert!(took < timeout * 2, "send_all took {took:?}");
    })
    .await;
}

/// A Produce the leader never answers is abandoned at the delivery timeout, not at the end of
/// the request timeout (here longer): `send_all` returns by its deadline with
/// `DeliveryTimeout` for every batch, whatever its requests are waiting on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_produce_ends_at_the_delivery_timeout() {
    let fake = FakeCluster::start(
        &[1],
        script(|_, req| match req.api {
            ApiKey::Produce => Action::Ignore,
            _ => Action::Default,
        }),
    )
    .await;
    fake.set_topic("t", &[1, 1]);
    within(async {
        let mut config = client_config(&fake);
        config.connection.request_timeout = Duration::from_secs(5);
        let client = Client::connect(config).await.expect("connect to fake");
        let timeout = Duration::from_millis(500);
        let producer = RawProducer::new(
            client,
            ProducerConfig {
                delivery_timeout: timeout,
                ..ProducerConfig::default()
            },
        )
        .await
        .unwrap();
        let batches = (0..4)
            .map(|i| {
                let raw = BatchScanner::new(batch(i, 1, "u")).next().unwrap().unwrap();
                (TopicPartition::new("t", (i % 2) as i32), raw)
            })
            .collect();
        let started = Instant::now();
        let results = producer.send_all(batches).await;
        let took = started.elapsed();
        assert!(
            results
                .iter()
                .all(|r| matches!(r, Err(Error::DeliveryTimeout { .. }))),
            "{results:?}"
        );
        assert!(!fake.requests(ApiKey::Produce).is_empty());
        // Well before the 5 s request timeout the requests were waiting on.
        assert!(took < Duration::from_secs(3), "send_all took {took:?}");
    })
    .await;
}

/// A fake leader's record of produced batches: each is appended at the next offset of its
/// partition, and (partition, base sequence) is noted in arrival order.
#[derive(Debug, Default)]
struct Ledger {
    next_offset: std::collections::BTreeMap<i32, i64>,
    received: Vec<(i32, i32)>,
}

impl Ledger {
    /// Appends every batch of the request and returns the answer.
    fn append(&mut self, request: &ProduceRequest) -> ProduceResponse {
        let topics = request
            .topic_data
            .iter()
            .map(|t| {
                let partitions = t
                    .partition_data
                    .iter()
                    .map(|d| {
                        let records = d.records.clone().unwrap_or_default();
                        let mut scan = BatchScanner::new(records);
                        let h = scan.next().expect("a batch").expect("well-formed").header;
                        assert!(scan.next().is_none(), "one batch per partition");
                        self.received.push((d.index, h.base_sequence));
                        let next = self.next_offset.entry(d.index).or_insert(0);
                        let base = *next;
                        *next += i64::from(h.record_count);
                        PartitionProduceResponse::default()
                            .with_index(d.index)
                            .with_base_offset(base)
                    })
                    .collect();
                TopicProduceResponse::default()
                    .with_name(t.name.clone())
                    .with_partition_responses(partitions)
            })
            .collect();
        ProduceResponse::default().with_responses(topics)
    }

    /// The base sequences of one partition, in arrival order.
    fn sequences(&self, partition: i32) -> Vec<i32> {
        self.received
            .iter()
            .filter(|(p, _)| *p == partition)
            .map(|(_, s)| *s)
            .collect()
    }
}

/// One-record batches: `rounds` of one batch per partition of `t`, partition by partition.
fn one_record_batches(
    partitions: &[i32],
    rounds: usize,
) -> Vec<(TopicPartition, strait_wire::RawBatch)> {
    let mut batches = Vec::new();
    for round in 0..rounds {
        for p in partitions {
            let raw = BatchScanner::new(batch(round as i64, 1, "r"))
                .next()
                .unwrap()
                .unwrap();
            batches.push((TopicPartition::new("t", *p), raw));
        }
    }
    batches
}

/// Five requests of one partition in flight, the leader answering only the first: the
/// partition's sixth batch is sent as soon as that answer arrives, not when all five are
/// answered (the leader answers the other four only once it has the sixth). The window slides;
/// it does not go in waves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_batch_of_a_partition_goes_as_soon_as_one_is_answered() {
    #[derive(Default)]
    struct Leader {
        ledger: Ledger,
        held: Vec<Bytes>,
        held_when_sixth_came: Option<usize>,
    }
    let leader = Arc::new(Mutex::new(Leader::default()));
    let state = Arc::clone(&leader);
    let fake = FakeCluster::start(
        &[1],
        script(move |_, req| match &req.body {
            Body::Produce(p) => {
                let mut s = state.lock().unwrap();
                let answer = req.frame(&s.ledger.append(p));
                match s.ledger.received.last().unwrap().1 {
                    // The second to fifth batches of the call: held back.
                    2..=5 => {
                        s.held.push(answer);
                        Action::Ignore
                    }
                    6 => {
                        s.held_when_sixth_came = Some(s.held.len());
                        let mut sends: Vec<Action> = s.held.drain(..).map(Action::Send).collect();
                        sends.push(Action::Send(answer));
                        Action::Many(sends)
                    }
                    _ => Action::Send(answer),
                }
            }
            _ => Action::Default,
        }),
    )
    .await;
    fake.set_topic("t", &[1]);
    within(async {
        let producer = producer_of(&fake).await;
        // One batch first: the leader holds the producer's state from then on.
        assert_eq!(offsets_of(producer.send_all(batches_of(&[1])).await), [0]);
        let offsets = offsets_of(producer.send_all(batches_of(&[1; 10])).await);
        assert_eq!(offsets, (1..=10).collect::<Vec<i64>>());
        let s = leader.lock().unwrap();
        assert_eq!(s.held_when_sixth_came, Some(4), "2..5 still in flight");
        assert_eq!(s.ledger.sequences(0), (0..=10).collect::<Vec<i32>>());
    })
    .await;
}

/// Twenty batches of one partition in one call, against a leader that answers the oldest of
/// its requests only when it holds five: the producer keeps five in flight all the time and
/// never a sixth, and its batches arrive in sequence order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_never_has_more_than_five_requests_in_flight() {
    #[derive(Default)]
    struct Leader {
        ledger: Ledger,
        held: std::collections::VecDeque<Bytes>,
        most_held: usize,
    }
    let leader = Arc::new(Mutex::new(Leader::default()));
    let state = Arc::clone(&leader);
    let fake = FakeCluster::start(
        &[1],
        script(move |_, req| match &req.body {
            Body::Produce(p) => {
                let mut s = state.lock().unwrap();
                let answer = req.frame(&s.ledger.append(p));
                let sequence = s.ledger.received.last().unwrap().1;
                if sequence == 0 {
                    return Action::Send(answer);
                }
                s.held.push_back(answer);
                s.most_held = s.most_held.max(s.held.len());
                if sequence == 20 {
                    Action::Many(s.held.drain(..).map(Action::Send).collect())
                } else if s.held.len() == 5 {
                    Action::Send(s.held.pop_front().unwrap())
                } else {
                    Action::Ignore
                }
            }
            _ => Action::Default,
        }),
    )
    .await;
    fake.set_topic("t", &[1]);
    within(async {
        let producer = producer_of(&fake).await;
        assert_eq!(offsets_of(producer.send_all(batches_of(&[1])).await), [0]);
        let offsets = offsets_of(producer.send_all(batches_of(&[1; 20])).await);
        assert_eq!(offsets, (1..=20).collect::<Vec<i64>>());
        let s = leader.lock().unwrap();
        assert_eq!(s.most_held, 5, "five in flight, never more");
        assert_eq!(s.ledger.sequences(0), (0..=20).collect::<Vec<i32>>());
    })
    .await;
}

/// A retriable error in the middle of a long call (NOT_LEADER_OR_FOLLOWER for the fourth batch,
/// OUT_OF_ORDER_SEQUENCE_NUMBER for those sent behind it): the partition's batches still reach
/// the leader in sequence order, starting again from the refused one, and all land in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_sends_in_sequence_order_after_a_retriable_error() {
    let log = Arc::new(Mutex::new(Log::default()));
    let fake = sequence_checking_leader(Arc::clone(&log)).await;
    within(async {
        let producer = producer_of(&fake).await;
        assert_eq!(offsets_of(producer.send_all(batches_of(&[1])).await), [0]);
        log.lock().unwrap().reject_once = Some(4);
        let offsets = offsets_of(producer.send_all(batches_of(&[1; 12])).await);
        assert_eq!(offsets, (1..=12).collect::<Vec<i64>>());
        let log = log.lock().unwrap();
        assert_eq!(log.rejected, Some(4));
        assert_eq!(log.appended, (0..=12).collect::<Vec<i32>>());
        // Each batch follows the one before it, except once: the refused one sent again.
        for pair in log.received.windows(2) {
            assert!(
                pair[1] == pair[0] + 1 || pair[1] == 4,
                "out of order: {:?}",
                log.received
            );
        }
        assert_eq!(log.received.iter().filter(|s| **s == 4).count(), 2);
        assert!(log.refused_out_of_order <= 4, "{log:?}");
    })
    .await;
}

/// Three partitions led by one broker, five batches each in one call: five requests, each
/// carrying the next batch of every partition, in sequence order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_carries_the_next_batch_of_every_partition_of_its_leader() {
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let state = Arc::clone(&ledger);
    let fake = FakeCluster::start(
        &[1],
        script(move |_, req| match &req.body {
            Body::Produce(p) => req.reply(&state.lock().unwrap().append(p)),
            _ => Action::Default,
        }),
    )
    .await;
    fake.set_topic("t", &[1, 1, 1]);
    within(async {
        let producer = producer_of(&fake).await;
        // The first batch of each partition: alone until acknowledged, in one request.
        let first = producer.send_all(one_record_batches(&[0, 1, 2], 1)).await;
        assert_eq!(offsets_of(first), [0, 0, 0]);
        let acks = producer.send_all(one_record_batches(&[0, 1, 2], 5)).await;
        let offsets = offsets_of(acks);
        assert_eq!(offsets, [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5]);
        let requests = fake.requests(ApiKey::Produce);
        assert_eq!(requests.len(), 6);
        for r in &requests {
            let Body::Produce(p) = &r.body else {
                unreachable!()
            };
            let partitions: Vec<i32> = p.topic_data[0]
                .partition_data
                .iter()
                .map(|d| d.index)
                .collect();
            assert_eq!(partitions, [0, 1, 2]);
        }
        let ledger = ledger.lock().unwrap();
        for p in 0..3 {
            assert_eq!(ledger.sequences(p), (0..=5).collect::<Vec<i32>>());
        }
    })
    .await;
}

/// `max_request_size` smaller than two batches: every request carries one batch, and each
/// partition's batches still arrive in sequence order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_request_size_splits_requests_and_keeps_the_order() {
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let state = Arc::clone(&ledger);
    let fake = FakeCluster::start(
        &[1],
        script(move |_, req| match &req.body {
            Body::Produce(p) => req.reply(&state.lock().unwrap().append(p)),
            _ => Action::Default,
        }),
    )
    .await;
    fake.set_topic("t", &[1, 1]);
    within(async {
        let producer = RawProducer::new(
            client(&fake).await,
            ProducerConfig {
                delivery_timeout: Duration::from_secs(3),
                max_request_size: 1,
                ..ProducerConfig::default()
            },
        )
        .await
        .unwrap();
        let acks = producer.send_all(one_record_batches(&[0, 1], 8)).await;
        let offsets = offsets_of(acks);
        assert_eq!(offsets, [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7]);
        let requests = fake.requests(ApiKey::Produce);
        assert_eq!(requests.len(), 16);
        for r in &requests {
            let Body::Produce(p) = &r.body else {
                unreachable!()
            };
            assert_eq!(p.topic_data.len(), 1);
            assert_eq!(p.topic_data[0].partition_data.len(), 1);
        }
        let ledger = ledger.lock().unwrap();
        for p in 0..2 {
            assert_eq!(ledger.sequences(p), (0..8).collect::<Vec<i32>>());
        }
    })
    .await;
}

/// A commit on behalf of a group (generation -1, no member id) that the coordinator refuses
/// with UNKNOWN_MEMBER_ID, because the group has members, is `Error::GroupActive`, not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_for_an_active_group_is_refused() {
    let fake = FakeCluster::start(
        &[1],
        script(|_, req| match &req.body {
            Body::OffsetCommit(c) => req.reply(&fake::offset_commit_response(
                c,
                ResponseError::UnknownMemberId.code(),
            )),
            _ => Action::Default,
        }),
    )
    .await;
    fake.set_topic("t", &[1]);
    within(async {
        let client = client(&fake).await;
        let result = client
            .offset_commit(
                "g",
                &[OffsetToCommit {
                    tp: TopicPartition::new("t", 0),
                    offset: 5,
                    leader_epoch: -1,
                    metadata: None,
                }],
            )
            .await;
        assert!(
            matches!(&result, Err(Error::GroupActive { group }) if group == "g"),
            "{result:?}"
        );
        let found = fake.requests(ApiKey::FindCoordinator);
        assert_eq!(found.len(), 1);
        let Body::FindCoordinator(f) = &found[0].body else {
            unreachable!()
        };
        assert_eq!((f.key.as_str(), f.key_type), ("g", 0));
        let commits = fake.requests(ApiKey::OffsetCommit);
        assert_eq!(commits.len(), 1, "GroupActive was retried");
        let Body::OffsetCommit(c) = &commits[0].body else {
            unreachable!()
        };
        assert_eq!(c.group_id.0.as_str(), "g");
        assert_eq!(c.generation_id_or_member_epoch, -1);
        assert_eq!(c.member_id.as_str(), "");
        assert_eq!(c.topics[0].partitions[0].committed_offset, 5);
    })
    .await;
}

/// Commits of many groups are spread over several connections to their coordinator (a broker
/// answers one request of a connection at a time, and Kafka 4's coordinator holds each commit
/// for its append: on one connection 10,000 groups' commits took 57 s), and one group's
/// commits all go over the same connection, so they stay in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_groups_commit_over_several_connections_each_group_over_one() {
    let fake = FakeCluster::start(
        &[1],
        script(|_, req| match &req.body {
            Body::OffsetCommit(c) => req.reply(&fake::offset_commit_response(c, 0)),
            _ => Action::Default,
        }),
    )
    .await;
    fake.set_topic("t", &[1]);
    within(async {
        let client = client(&fake).await;
        let commit = |group: String, offset: i64| {
            let client = client.clone();
            async move {
                client
                    .offset_commit(
                        &group,
                        &[OffsetToCommit {
                            tp: TopicPartition::new("t", 0),
                            offset,
                            leader_epoch: -1,
                            metadata: None,
                        }],
                    )
                    .await
            }
        };
        for round in 0..2 {
            let all = (0..64).map(|g| commit(format!("app-{g}"), round));
            for result in futures::future::join_all(all).await {
                result.expect("commit");
            }
        }
        let commits = fake.requests(ApiKey::OffsetCommit);
        assert_eq!(commits.len(), 128);
        let mut by_group: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
        for c in &commits {
            let Body::OffsetCommit(body) = &c.body else {
                unreachable!()
            };
            by_group
                .entry(body.group_id.0.to_string())
                .or_default()
                .insert(c.conn);
        }
        let used: BTreeSet<usize> = by_group.values().flatten().copied().collect();
        assert!(
            used.len() >= 8,
            "64 groups' commits went over {} connection(s): {used:?}",
            used.len()
        );
        assert!(
            used.len() <= usize::from(strait_kafka::groups::COMMIT_LANES),
            "more connections than lanes: {used:?}"
        );
        for (group, conns) in &by_group {
            assert_eq!(conns.len(), 1, "{group}'s commits went over {conns:?}");
        }
    })
    .await;
}

/// Many groups are described with one DescribeGroups request per coordinator, and a group
/// whose part of that answer is an error (here COORDINATOR_LOAD_IN_PROGRESS, once) is asked
/// again on its own and gets the answer `describe_group` would give.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_groups_are_described_in_one_request_and_an_erring_one_alone() {
    use kafka_protocol::messages::describe_groups_response::DescribedGroup;
    use kafka_protocol::messages::DescribeGroupsResponse;
    let loading = Arc::new(Mutex::new(true));
    let fake = FakeCluster::start(
        &[1],
        script(move |_, req| match &req.body {
            Body::DescribeGroups(d) => {
                let mut first = loading.lock().unwrap();
                let groups = d
                    .groups
                    .iter()
                    .map(|g| {
                        let id = g.0.as_str();
                        let error = if id == "b" && *first {
                            ResponseError::CoordinatorLoadInProgress.code()
                        } else {
                            0
                        };
                        DescribedGroup::default()
                            .with_group_id(g.clone())
                            .with_error_code(error)
                            .with_group_state(str_bytes(if id == "c" { "Stable" } else { "Empty" }))
                            .with_protocol_type(str_bytes("consumer"))
                    })
                    .collect();
                if d.groups.iter().any(|g| g.0.as_str() == "b") {
                    *first = false;
                }
                req.reply(&DescribeGroupsResponse::default().with_groups(groups))
            }
            _ => Action::Default,
        }),
    )
    .await;
    within(async {
        let client = client(&fake).await;
        let ids: Vec<String> = ["a", "b", "c"].map(str::to_owned).to_vec();
        let described = client.describe_groups(&ids).await;
        assert_eq!(described.len(), 3, "{described:?}");
        for (g, state) in [("a", "Empty"), ("b", "Empty"), ("c", "Stable")] {
            let d = described[g]
                .as_ref()
                .unwrap_or_else(|e| panic!("group {g}: {e}"));
            assert_eq!((d.group_id.as_str(), d.state.as_str()), (g, state));
        }
        let asked: Vec<Vec<String>> = fake
            .requests(ApiKey::DescribeGroups)
            .iter()
            .map(|r| {
                let Body::DescribeGroups(d) = &r.body else {
                    unreachable!()
                };
                let mut ids: Vec<String> = d.groups.iter().map(|g| g.0.to_string()).collect();
                ids.sort();
                ids
            })
            .collect();
        assert_eq!(asked, [vec!["a", "b", "c"], vec!["b"]]);
    })
    .await;
}

/// The committed offset the scripted coordinator gives group `g` on partition 0 of `t`.
fn committed_of(group: &str) -> i64 {
    group.bytes().map(i64::from).sum::<i64>() * 7
}

/// A coordinator that answers OffsetFetch for any group, one at a time (v1-7) or many (v8):
/// every group committed `committed_of(group)` on `t`-0, but `g-missing`, which does not
/// exist, and `g-loading`, whose first answer in a many-group request is
/// COORDINATOR_LOAD_IN_PROGRESS.
async fn offsets_coordinator(max_version: i16) -> FakeCluster {
    use kafka_protocol::messages::offset_fetch_response::{
        OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
        OffsetFetchResponseTopic, OffsetFetchResponseTopics,
    };
    use kafka_protocol::messages::OffsetFetchResponse;
    let fake = FakeCluster::start(
        &[1],
        script(move |_, req| match &req.body {
            Body::OffsetFetch(f) if req.version() >= 8 => {
                let groups = f
                    .groups
                    .iter()
                    .map(|g| {
                        let id = g.group_id.0.as_str();
                        let group =
                            OffsetFetchResponseGroup::default().with_group_id(g.group_id.clone());
                        match id {
                            "g-missing" => {
                                group.with_error_code(ResponseError::GroupIdNotFound.code())
                            }
                            "g-loading" => group
                                .with_error_code(ResponseError::CoordinatorLoadInProgress.code()),
                            _ => group.with_topics(vec![OffsetFetchResponseTopics::default()
                                .with_name(TopicName(str_bytes("t")))
                                .with_partitions(vec![OffsetFetchResponsePartitions::default()
                                    .with_partition_index(0)
                                    .with_committed_offset(committed_of(id))])]),
                        }
                    })
                    .collect();
                req.reply(&OffsetFetchResponse::default().with_groups(groups))
            }
            Body::OffsetFetch(f) => {
                let id = f.group_id.0.as_str();
                let topics = if id == "g-missing" {
                    Vec::new()
                } else {
                    vec![OffsetFetchResponseTopic::default()
                        .with_name(TopicName(str_bytes("t")))
                        .with_partitions(vec![OffsetFetchResponsePartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(committed_of(id))])]
                };
                req.reply(&OffsetFetchResponse::default().with_topics(topics))
            }
            _ => Action::Default,
        }),
    )
    .await;
    fake.spec()
        .api_versions
        .retain(|(api, _, _)| *api != ApiKey::OffsetFetch);
    fake.spec()
        .api_versions
        .push((ApiKey::OffsetFetch, 1, max_version));
    fake
}

/// Many groups' committed offsets are read with one OffsetFetch v8 per coordinator for up to
/// 200 groups (KIP-709), not one request per group: 450 groups, 3 requests, plus one alone for
/// a group whose part of the answer was an error. A coordinator without v8 is asked group by
/// group, and both give the same answers, a group that does not exist having no offsets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_groups_offsets_are_read_with_one_request_per_coordinator() {
    let mut groups: Vec<String> = (0..448).map(|i| format!("g-{i}")).collect();
    groups.extend(["g-missing".to_owned(), "g-loading".to_owned()]);
    let mut answers = Vec::new();
    for (max_version, requests) in [(8, 4), (7, groups.len())] {
        let fake = offsets_coordinator(max_version).await;
        let read = within(async {
            let client = client(&fake).await;
            client.offset_fetch_groups(&groups, None).await
        })
        .await;
        assert_eq!(read.len(), groups.len());
        for (g, offsets) in &read {
            let offsets = offsets.as_ref().unwrap_or_else(|e| panic!("{g}: {e}"));
            let want: Vec<i64> = if g == "g-missing" {
                Vec::new()
            } else {
                vec![committed_of(g)]
            };
            let got: Vec<i64> = offsets.values().map(|c| c.offset).collect();
            assert_eq!(got, want, "group {g} at v{max_version}");
        }
        assert_eq!(
            fake.requests(ApiKey::OffsetFetch).len(),
            requests,
            "OffsetFetch requests with a coordinator of v{max_version} at most"
        );
        answers.push(
            read.into_iter()
                .map(|(g, o)| (g, o.unwrap()))
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(answers[0], answers[1]);
}

/// A fetch over partitions led by three brokers stays within its byte limit as a whole: each
/// leader's request asks for its share (by partitions), not the whole limit, so a flow's
/// budget holds however many leaders its partitions have.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_over_many_leaders_shares_its_byte_limit() {
    let fake = FakeCluster::start(
        &[1, 2, 3],
        script(|_, req| match &req.body {
            Body::Fetch(f) => req.reply(
                &FetchResponse::default().with_responses(
                    f.topics
                        .iter()
                        .map(|t| {
                            FetchableTopicResponse::default()
                                .with_topic(t.topic.clone())
                                .with_partitions(
                                    t.partitions
                                        .iter()
                                        .map(|p| {
                                            PartitionData::default()
                                                .with_partition_index(p.partition)
                                                .with_high_watermark(0)
                                                .with_last_stable_offset(0)
                                                .with_log_start_offset(0)
                                                .with_records(Some(Bytes::new()))
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                ),
            ),
            _ => Action::Default,
        }),
    )
    .await;
    // Six partitions: broker 1 leads three, broker 2 two, broker 3 one.
    fake.set_topic("t", &[1, 1, 1, 2, 2, 3]);
    within(async {
        let client = client(&fake).await;
        let positions: Vec<FetchPosition> = (0..6)
            .map(|p| FetchPosition::new(TopicPartition::new("t", p), 0))
            .collect();
        let options = FetchOptions {
            max_wait: Duration::from_millis(1),
            max_bytes: 6_000_000,
            ..FetchOptions::default()
        };
        let results = client.fetch(&positions, &options).await;
        assert!(results.values().all(Result::is_ok), "{results:?}");
    })
    .await;
    let mut asked: Vec<(i32, i32)> = fake
        .requests(ApiKey::Fetch)
        .iter()
        .filter_map(|r| match &r.body {
            Body::Fetch(f) => Some((r.broker, f.max_bytes)),
            _ => None,
        })
        .collect();
    asked.sort();
    assert_eq!(
        asked,
        [(1, 3_000_000), (2, 2_000_000), (3, 1_000_000)],
        "each leader asks its share; together the limit"
    );
}

/// A fake leader of topic `t` that keeps fetch sessions as Kafka does, in miniature: epoch 0
/// starts a session (`give_id`, 0 for none), an incremental request adds what it sends and
/// drops what it forgets, and its answer names only the partitions sent, with records, or whose
/// high watermark moved since last said.
#[derive(Debug, Default)]
struct SessionBroker {
    give_id: i32,
    /// The high watermark of each partition now.
    hw: BTreeMap<i32, i64>,
    /// The high watermark last answered, per partition.
    told: BTreeMap<i32, i64>,
    /// Records to answer with, per partition (every time it is answered).
    records: BTreeMap<i32, Bytes>,
    in_session: BTreeSet<i32>,
    /// Top-level error codes for the next requests, last first.
    fail_next: Vec<i16>,
}

fn session_script(state: Arc<Mutex<SessionBroker>>) -> fake::Script {
    script(move |_, req| {
        let Body::Fetch(f) = &req.body else {
            return Action::Default;
        };
        let mut s = state.lock().unwrap();
        if let Some(code) = s.fail_next.pop() {
            return req.reply(&FetchResponse::default().with_error_code(code));
        }
        let sent: BTreeSet<i32> = f
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.partition))
            .collect();
        let incremental = f.session_id != 0 && f.session_epoch > 0;
        if incremental {
            s.in_session.extend(&sent);
            for t in &f.forgotten_topics_data {
                for p in &t.partitions {
                    s.in_session.remove(p);
                }
            }
        } else {
            s.in_session = sent.clone();
        }
        let answer: Vec<i32> = if incremental {
            s.in_session
                .iter()
                .copied()
                .filter(|p| {
                    sent.contains(p)
                        || s.told.get(p) != Some(&s.hw.get(p).copied().unwrap_or(0))
                        || s.records.contains_key(p)
                })
                .collect()
        } else {
            sent.iter().copied().collect()
        };
        let mut partitions = Vec::new();
        for p in answer {
            let hw = s.hw.get(&p).copied().unwrap_or(0);
            s.told.insert(p, hw);
            partitions.push(
                PartitionData::default()
                    .with_partition_index(p)
                    .with_high_watermark(hw)
                    .with_last_stable_offset(hw)
                    .with_log_start_offset(0)
                    .with_records(Some(s.records.get(&p).cloned().unwrap_or_default())),
            );
        }
        let session_id = match (incremental, f.session_epoch) {
            (true, _) => f.session_id,
            (false, 0) => s.give_id,
            _ => 0,
        };
        req.reply(
            &FetchResponse::default()
                .with_session_id(session_id)
                .with_responses(vec![FetchableTopicResponse::default()
                    .with_topic(TopicName(str_bytes("t")))
                    .with_partitions(partitions)]),
        )
    })
}

/// (session id, epoch, partitions sent, partitions forgotten) of each Fetch the fake read.
fn fetches_read(fake: &FakeCluster) -> Vec<(i32, i32, Vec<i32>, Vec<i32>)> {
    fake.requests(ApiKey::Fetch)
        .iter()
        .filter_map(|r| match &r.body {
            Body::Fetch(f) => Some((
                f.session_id,
                f.session_epoch,
                f.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.partition))
                    .collect(),
                f.forgotten_topics_data
                    .iter()
                    .flat_map(|t| t.partitions.clone())
                    .collect(),
            )),
            _ => None,
        })
        .collect()
}

fn at(partition: i32, offset: i64) -> FetchPosition {
    FetchPosition::new(TopicPartition::new("t", partition), offset)
}

fn quick() -> FetchOptions {
    FetchOptions {
        max_wait: Duration::from_millis(1),
        ..FetchOptions::default()
    }
}

async fn session_fake(state: &Arc<Mutex<SessionBroker>>, partitions: i32) -> FakeCluster {
    let fake = FakeCluster::start(&[1], session_script(Arc::clone(state))).await;
    fake.set_topic("t", &vec![1; partitions as usize]);
    fake
}

/// KIP-227: the first fetch asks for a session (id 0, epoch 0) with every partition; the next
/// one continues it (its id, epoch 1) naming only the partition whose offset moved and
/// forgetting the one no longer asked for; the unchanged one is left out of the request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_second_fetch_to_a_broker_is_incremental() {
    let state = Arc::new(Mutex::new(SessionBroker {
        give_id: 77,
        ..SessionBroker::default()
    }));
    let fake = session_fake(&state, 3).await;
    within(async {
        let client = client(&fake).await;
        let first = client
            .fetch(&[at(0, 0), at(1, 0), at(2, 0)], &quick())
            .await;
        assert_eq!(first.len(), 3);
        assert!(first.values().all(Result::is_ok), "{first:?}");
        assert_eq!(client.fetch_session_id(BrokerId(1)), Some(77));
        let second = client.fetch(&[at(0, 5), at(1, 0)], &quick()).await;
        assert_eq!(
            second.keys().map(|tp| tp.partition).collect::<Vec<_>>(),
            [0, 1]
        );
        assert!(second.values().all(Result::is_ok), "{second:?}");
        assert_eq!(client.incremental_fetches(), 1);
        // Nothing changed: an empty incremental request.
        client.fetch(&[at(0, 5), at(1, 0)], &quick()).await;
    })
    .await;
    assert_eq!(
        fetches_read(&fake),
        [
            (0, 0, vec![0, 1, 2], vec![]),
            (77, 1, vec![0], vec![2]),
            (77, 2, vec![], vec![]),
        ]
    );
}

/// An incremental answer names only partitions with news; the others still come back to the
/// caller, with no records and the high watermark the broker said last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_left_out_of_an_incremental_answer_keep_their_high_watermark() {
    let state = Arc::new(Mutex::new(SessionBroker {
        give_id: 9,
        hw: BTreeMap::from([(0, 10), (1, 20)]),
        records: BTreeMap::from([(0, batch(0, 2, "p0"))]),
        ..SessionBroker::default()
    }));
    let fake = session_fake(&state, 2).await;
    within(async {
        let client = client(&fake).await;
        let positions = [at(0, 0), at(1, 20)];
        let first = client.fetch(&positions, &quick()).await;
        let p1 = first[&TopicPartition::new("t", 1)].as_ref().unwrap();
        assert_eq!(p1.high_watermark, 20);
        // Partition 1 is not sent again and its watermark did not move: left out of the answer.
        let second = client.fetch(&positions, &quick()).await;
        let p1 = second[&TopicPartition::new("t", 1)].as_ref().unwrap();
        assert_eq!((p1.high_watermark, p1.last_stable_offset), (20, 20));
        assert_eq!(p1.log_start_offset, 0);
        assert!(p1.records.is_empty());
        let p0 = second[&TopicPartition::new("t", 0)].as_ref().unwrap();
        assert_eq!(p0.records, batch(0, 2, "p0"));
        // Its watermark moves: the broker says so, and that is what is kept.
        state.lock().unwrap().hw.insert(1, 25);
        let third = client.fetch(&positions, &quick()).await;
        assert_eq!(
            third[&TopicPartition::new("t", 1)]
                .as_ref()
                .unwrap()
                .high_watermark,
            25
        );
        let fourth = client.fetch(&positions, &quick()).await;
        assert_eq!(
            fourth[&TopicPartition::new("t", 1)]
                .as_ref()
                .unwrap()
                .high_watermark,
            25
        );
        assert_eq!(client.incremental_fetches(), 3);
    })
    .await;
    let read = fetches_read(&fake);
    assert_eq!(read.len(), 4);
    assert!(read[1..]
        .iter()
        .all(|(id, _, sent, _)| *id == 9 && sent.is_empty()));
    let answered_p1: Vec<i64> = state
        .lock()
        .unwrap()
        .told
        .get(&1)
        .into_iter()
        .copied()
        .collect();
    assert_eq!(answered_p1, [25]);
}

/// A broker that lost the session (FETCH_SESSION_ID_NOT_FOUND) is asked again at once with a
/// full fetch, whose data the caller gets; the session then starts over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_session_is_retried_as_a_full_fetch() {
    let state = Arc::new(Mutex::new(SessionBroker {
        give_id: 5,
        hw: BTreeMap::from([(0, 2), (1, 0)]),
        records: BTreeMap::from([(0, batch(0, 2, "p0"))]),
        ..SessionBroker::default()
    }));
    let fake = session_fake(&state, 2).await;
    within(async {
        let client = client(&fake).await;
        let positions = [at(0, 0), at(1, 0)];
        client.fetch(&positions, &quick()).await;
        assert_eq!(client.fetch_session_id(BrokerId(1)), Some(5));
        {
            let mut s = state.lock().unwrap();
            s.fail_next = vec![ResponseError::FetchSessionIdNotFound.code()];
            s.give_id = 6;
        }
        let again = client.fetch(&positions, &quick()).await;
        let p0 = again[&TopicPartition::new("t", 0)]
            .as_ref()
            .expect("data after the retry");
        assert_eq!(p0.records, batch(0, 2, "p0"));
        assert_eq!(p0.high_watermark, 2);
        assert!(again[&TopicPartition::new("t", 1)].is_ok());
        assert_eq!(client.fetch_session_id(BrokerId(1)), Some(6));
        // INVALID_FETCH_SESSION_EPOCH: the same, closing the old session in the full fetch.
        state.lock().unwrap().fail_next = vec![ResponseError::InvalidFetchSessionEpoch.code()];
        let again = client.fetch(&positions, &quick()).await;
        assert!(again.values().all(Result::is_ok), "{again:?}");
    })
    .await;
    assert_eq!(
        fetches_read(&fake),
        [
            (0, 0, vec![0, 1], vec![]),
            (5, 1, vec![], vec![]),
            (0, 0, vec![0, 1], vec![]),
            (6, 1, vec![], vec![]),
            (6, 0, vec![0, 1], vec![]),
        ]
    );
}

/// A broker that keeps no session for us (session id 0 in its answer, e.g. its cache is full)
/// gets full fetches, each asking again, and no error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_without_sessions_gets_full_fetches() {
    let state = Arc::new(Mutex::new(SessionBroker {
        give_id: 0,
        hw: BTreeMap::from([(0, 3), (1, 4)]),
        ..SessionBroker::default()
    }));
    let fake = session_fake(&state, 2).await;
    within(async {
        let client = client(&fake).await;
        for _ in 0..3 {
            let results = client.fetch(&[at(0, 0), at(1, 0)], &quick()).await;
            assert!(results.values().all(Result::is_ok), "{results:?}");
            assert_eq!(
                results[&TopicPartition::new("t", 1)]
                    .as_ref()
                    .unwrap()
                    .high_watermark,
                4
            );
            assert_eq!(client.fetch_session_id(BrokerId(1)), None);
        }
        assert_eq!(client.incremental_fetches(), 0);
    })
    .await;
    assert_eq!(fetches_read(&fake), vec![(0, 0, vec![0, 1], vec![]); 3]);
}

/// KIP-392: `client.rack` goes into every fetch; a leader that names a preferred read replica
/// sends the partition's next fetch there; an error from the replica sends it back to the
/// leader at once, within the same fetch, and for the fetches after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preferred_read_replica_is_followed_until_it_fails() {
    let replica_fails = Arc::new(AtomicBool::new(false));
    let named = Arc::new(AtomicBool::new(false));
    let fails = Arc::clone(&replica_fails);
    let fake = FakeCluster::start(
        &[1, 2],
        script(move |_, req| {
            let Body::Fetch(f) = &req.body else {
                return Action::Default;
            };
            let mut p = PartitionData::default()
                .with_partition_index(0)
                .with_high_watermark(3)
                .with_last_stable_offset(3)
                .with_log_start_offset(0)
                .with_records(Some(Bytes::new()));
            if req.broker == 1 && !named.swap(true, Ordering::SeqCst) {
                // The leader names broker 2, once, and sends no records.
                p = p.with_preferred_read_replica(kafka_protocol::messages::BrokerId(2));
            } else if req.broker == 2 && fails.load(Ordering::SeqCst) {
                p = p.with_error_code(ResponseError::OffsetOutOfRange.code());
            } else {
                p = p.with_records(Some(batch(0, 3, &format!("from {}", req.broker))));
            }
            req.reply(&FetchResponse::default().with_responses(
                vec![FetchableTopicResponse::default()
                    .with_topic(f.topics[0].topic.clone())
                    .with_partitions(vec![p])],
            ))
        }),
    )
    .await;
    fake.set_topic("t", &[1]);
    within(async {
        let mut config = client_config(&fake);
        config.client_rack = Some("rack-b".into());
        let client = Client::connect(config).await.unwrap();
        let tp = TopicPartition::new("t", 0);
        let named = client.fetch(&[at(0, 0)], &quick()).await;
        assert!(named[&tp].as_ref().unwrap().records.is_empty());
        let from_replica = client.fetch(&[at(0, 0)], &quick()).await;
        assert_eq!(
            from_replica[&tp].as_ref().unwrap().records,
            batch(0, 3, "from 2")
        );
        replica_fails.store(true, Ordering::SeqCst);
        let back = client.fetch(&[at(0, 0)], &quick()).await;
        assert_eq!(back[&tp].as_ref().unwrap().records, batch(0, 3, "from 1"));
        let after = client.fetch(&[at(0, 0)], &quick()).await;
        assert_eq!(after[&tp].as_ref().unwrap().records, batch(0, 3, "from 1"));
    })
    .await;
    let asked: Vec<(i32, String)> = fake
        .requests(ApiKey::Fetch)
        .iter()
        .filter_map(|r| match &r.body {
            Body::Fetch(f) => Some((r.broker, f.rack_id.to_string())),
            _ => None,
        })
        .collect();
    let rack = || "rack-b".to_owned();
    assert_eq!(
        asked,
        [
            (1, rack()),
            (2, rack()),
            (2, rack()),
            (1, rack()),
            (1, rack())
        ]
    );
}

/// The open transactions of a cluster are asked of every broker at once, each given at most
/// `LIST_TRANSACTIONS_PATIENCE`: one broker that does not answer leaves out only the ids it
/// coordinates, and the others' come back within that bound (before, each broker was asked
/// in turn for up to the operation timeout, here 60 s: an exactly-once unit's start waited a
/// minute for one unreachable target broker).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_silent_broker_does_not_hold_the_listing_of_open_transactions() {
    use kafka_protocol::messages::list_transactions_response::TransactionState;
    use kafka_protocol::messages::{ListTransactionsResponse, TransactionalId};
    let fake = FakeCluster::start(
        &[1, 2, 3],
        script(|_, req| match req.api {
            ApiKey::ListTransactions if req.broker == 2 => Action::Ignore,
            ApiKey::ListTransactions => req.reply(
                &ListTransactionsResponse::default().with_transaction_states(vec![
                    TransactionState::default()
                        .with_transactional_id(TransactionalId(StrBytes::from_string(format!(
                            "g-{}",
                            req.broker + 4
                        ))))
                        .with_transaction_state(StrBytes::from_static_str("Ongoing")),
                ]),
            ),
            _ => Action::Default,
        }),
    )
    .await;
    fake.spec()
        .api_versions
        .push((ApiKey::ListTransactions, 0, 1));
    let mut config = client_config(&fake);
    config.operation_timeout = Duration::from_secs(60);
    config.connection.request_timeout = Duration::from_secs(60);
    let client = Client::connect(config).await.expect("connect to fake");
    let listed = tokio::time::timeout(
        strait_kafka::produce::LIST_TRANSACTIONS_PATIENCE + Duration::from_secs(10),
        strait_kafka::produce::ongoing_transactions(&client, |id| id.starts_with("g-")),
    )
    .await
    .expect("within the patience, not the operation timeout")
    .expect("the brokers that answer");
    assert_eq!(listed, ["g-5", "g-7"]);
}
