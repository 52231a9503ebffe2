//! A flow whose source is the scripted fake broker (one broker, Kafka's answers) and whose target
//! is a real cluster: the fake serves exactly the source logs a case needs, byte for byte and on
//! demand (aborted transactions with their fetch list, compacted batches with holes, a log start
//! inside a batch, an empty batch left by compaction, a legacy v1 message), where Kafka would need timing to show them (`flow_txn.rs` and
//! `flow_compacted.rs` show them on Kafka itself), and the target shows what was really written.

#![allow(unreachable_pub, dead_code, missing_docs)]

mod common;
#[path = "../../strait-kafka/tests/fake/mod.rs"]
mod fake;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{
    ApiKey, DescribeConfigsResponse, FetchResponse, ListOffsetsResponse, ProducerId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use strait_core::flow::Flow;
use strait_testkit::{Clusters, Names, Rdk, TestRecord};
use strait_wire::offset_map::{SourcePartition, Translation};

use fake::{script, Action, Body, FakeCluster, Received};

/// The fake source's one topic, `t-<id>`: this test's own, as the target is shared.
fn topic(names: &Names) -> String {
    names.topic("t")
}

/// The flow's cluster aliases, `(source, target)`.
fn aliases(names: &Names) -> (String, String) {
    (names.alias("source"), names.alias("target"))
}

/// The remote topic on the target, `<source alias>.t-<id>`.
fn remote(names: &Names) -> String {
    format!("{}.{}", aliases(names).0, topic(names))
}

/// Fails the test instead of hanging it.
async fn within<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), fut)
        .await
        .expect("test took more than 30 s")
}

/// The source partition `t-<id>-0` as the fake serves it.
#[derive(Debug, Default)]
struct SourceLog {
    /// Encoded v2 batches, in offset order: (base offset, next offset, bytes).
    batches: Vec<(i64, i64, Bytes)>,
    log_start: i64,
    /// High watermark; also the last stable offset (no open transaction).
    end: i64,
    /// Aborted transactions: (producer id, first offset).
    aborted: Vec<(i64, i64)>,
}

impl SourceLog {
    fn push(&mut self, batch: Bytes) {
        let base = i64::from_be_bytes(batch[0..8].try_into().unwrap());
        let last_delta = i32::from_be_bytes(batch[23..27].try_into().unwrap());
        let next = base + i64::from(last_delta) + 1;
        self.batches.push((base, next, batch));
    }
}

type Shared = Arc<Mutex<SourceLog>>;

/// Answers a Fetch as Kafka does: OFFSET_OUT_OF_RANGE outside `log_start..=end`, else every
/// batch ending after the fetch offset (the first may start before it), up to the end; under
/// read_committed, the aborted transactions starting within the returned range.
fn fetch_answer(log: &SourceLog, req: &Received) -> Action {
    let Body::Fetch(f) = &req.body else {
        unreachable!()
    };
    let read_committed = f.isolation_level == 1;
    let mut any_data = false;
    let responses = f
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let offset = p.fetch_offset;
                    let out = PartitionData::default().with_partition_index(p.partition);
                    if offset < log.log_start || offset > log.end {
                        return out
                            .with_error_code(ResponseError::OffsetOutOfRange.code())
                            .with_high_watermark(-1)
                            .with_last_stable_offset(-1)
                            .with_log_start_offset(-1);
                    }
                    let mut records = BytesMut::new();
                    let mut upper = offset;
                    for (_, next, bytes) in &log.batches {
                        if *next > offset && *next <= log.end {
                            records.extend_from_slice(bytes);
                            upper = *next;
                        }
                    }
                    any_data |= !records.is_empty();
                    let aborted = read_committed.then(|| {
                        log.aborted
                            .iter()
                            .filter(|(_, first)| *first < upper)
                            .map(|(pid, first)| {
                                AbortedTransaction::default()
                                    .with_producer_id(ProducerId(*pid))
                                    .with_first_offset(*first)
                            })
                            .collect()
                    });
                    out.with_high_watermark(log.end)
                        .with_last_stable_offset(log.end)
                        .with_log_start_offset(log.log_start)
                        .with_aborted_transactions(aborted)
                        .with_records(Some(records.freeze()))
                })
                .collect();
            FetchableTopicResponse::default()
                .with_topic(t.topic.clone())
                .with_partitions(partitions)
        })
        .collect();
    let reply = req.reply(&FetchResponse::default().with_responses(responses));
    if any_data {
        reply
    } else {
        // Nothing to read: a broker waits (part of) max_wait before answering.
        Action::After(Duration::from_millis(20), Box::new(reply))
    }
}

fn list_offsets_answer(log: &SourceLog, req: &Received) -> Action {
    list_offsets_answer_but(log, req, &[])
}

/// [`list_offsets_answer`], but the partitions in `offline` answer LEADER_NOT_AVAILABLE, as for
/// a partition whose leader is offline.
fn list_offsets_answer_but(log: &SourceLog, req: &Received, offline: &[i32]) -> Action {
    let Body::ListOffsets(l) = &req.body else {
        unreachable!()
    };
    let topics = l
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let answer = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index);
                    if offline.contains(&p.partition_index) {
                        return answer.with_error_code(ResponseError::LeaderNotAvailable.code());
                    }
                    let offset = if p.timestamp == -2 {
                        log.log_start
                    } else {
                        log.end
                    };
                    answer
                        .with_offset(offset)
                        .with_timestamp(-1)
                        .with_leader_epoch(0)
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    req.reply(&ListOffsetsResponse::default().with_topics(topics))
}

/// DescribeConfigs of `topic`: no config set on it.
fn describe_configs_answer(req: &Received, topic: &str) -> Action {
    req.reply(&DescribeConfigsResponse::default().with_results(
        vec![DescribeConfigsResult::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_string(topic.to_owned()))
            .with_configs(vec![])],
    ))
}

/// A one-broker fake source holding topic `t-<id>` with one partition, served from `log`.
async fn fake_source(log: Shared, names: &Names) -> FakeCluster {
    fake_source_seeing_fetches(log, names, || {}).await
}

/// [`fake_source`], calling `on_fetch` as each fetch arrives.
async fn fake_source_seeing_fetches(
    log: Shared,
    names: &Names,
    on_fetch: impl Fn() + Send + Sync + 'static,
) -> FakeCluster {
    let topic = topic(names);
    let described = topic.clone();
    let fake = FakeCluster::start(
        &[1],
        script(move |_, req| {
            let log = log.lock().unwrap();
            match (&req.body, req.api) {
                (Body::Fetch(_), _) => {
                    on_fetch();
                    fetch_answer(&log, req)
                }
                (Body::ListOffsets(_), _) => list_offsets_answer(&log, req),
                (_, ApiKey::DescribeConfigs) => describe_configs_answer(req, &described),
                _ => Action::Default,
            }
        }),
    )
    .await;
    fake.spec()
        .api_versions
        .push((ApiKey::DescribeConfigs, 0, 4));
    fake.set_topic(&topic, &[1]);
    fake
}

async fn start_flow(fake: &FakeCluster, clusters: &Clusters, names: &Names) -> Flow {
    let (a, b) = aliases(names);
    // The fake answers no offset-syncs traffic: keep MM2's offset-syncs topic off the source.
    common::start_flow_between(
        (&a, &b),
        &fake.addr(1),
        &clusters.target.bootstrap,
        &format!(
            "emit.offset-syncs.enabled = false\n\
             topics = {}\n\
             groups = {}",
            topic(names),
            names.pattern()
        ),
    )
    .await
}

/// A record as the fake's batches carry it and as the target should return it.
#[derive(Debug, Clone)]
struct Rec {
    offset: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
    timestamp: i64,
}

impl Rec {
    fn plain(offset: i64) -> Self {
        Self {
            offset,
            key: Some(format!("k{offset}").into_bytes()),
            value: Some(format!("v{offset}").into_bytes()),
            headers: Vec::new(),
            timestamp: 1_720_000_000_000 + offset,
        }
    }

    fn test_record(&self) -> TestRecord {
        let mut r = TestRecord::new(0, self.key.as_deref(), self.value.as_deref())
            .with_timestamp(self.timestamp);
        for (k, v) in &self.headers {
            r = r.with_header(k, v.as_deref());
        }
        r
    }
}

/// How a batch is written by its producer.
#[derive(Debug, Clone, Copy)]
struct Producer {
    id: i64,
    transactional: bool,
}

const PLAIN: Producer = Producer {
    id: -1,
    transactional: false,
};

/// One v2 batch of `records` (their offsets may have holes: a compacted batch).
fn batch(records: &[Rec], producer: Producer, compression: Compression) -> Bytes {
    let base = records[0].offset;
    let records: Vec<Record> = records
        .iter()
        .map(|r| Record {
            transactional: producer.transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: producer.id,
            producer_epoch: if producer.id < 0 { -1 } else { 0 },
            timestamp_type: TimestampType::Creation,
            offset: r.offset,
            // offset - sequence constant, or the encoder starts a new batch.
            sequence: (r.offset - base) as i32,
            timestamp: r.timestamp,
            key: r.key.clone().map(Bytes::from),
            value: r.value.clone().map(Bytes::from),
            headers: r
                .headers
                .iter()
                .map(|(k, v)| (StrBytes::from_string(k.clone()), v.clone().map(Bytes::from)))
                .collect(),
        })
        .collect();
    encode(&records, compression)
}

/// A transaction marker of `producer` at `offset`: kind 0 abort, 1 commit.
fn marker(offset: i64, producer: i64, kind: i16) -> Bytes {
    let mut key = vec![0u8, 0];
    key.extend_from_slice(&kind.to_be_bytes());
    let mut value = vec![0u8, 0];
    value.extend_from_slice(&0i32.to_be_bytes());
    let record = Record {
        transactional: true,
        control: true,
        delete_horizon: false,
        partition_leader_epoch: 0,
        producer_id: producer,
        producer_epoch: 0,
        timestamp_type: TimestampType::Creation,
        offset,
        sequence: -1,
        timestamp: 1_720_000_000_000 + offset,
        key: Some(Bytes::from(key)),
        value: Some(Bytes::from(value)),
        headers: Default::default(),
    };
    encode(&[record], Compression::None)
}

fn encode(records: &[Record], compression: Compression) -> Bytes {
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .expect("encode batch");
    let bytes = buf.freeze();
    assert_eq!(
        strait_wire::BatchScanner::new(bytes.clone()).count(),
        1,
        "one batch"
    );
    bytes
}

/// Reads the remote topic and checks it holds exactly `expected`, in order, with the same
/// keys, values, headers and timestamps.
fn assert_target_holds(rdk: &Rdk, clusters: &Clusters, names: &Names, expected: &[Rec]) {
    let got = rdk.consume(
        &clusters.target.bootstrap,
        &remote(names),
        expected.len(),
        Duration::from_secs(20),
    );
    assert_eq!(got.len(), expected.len(), "record count: {got:?}");
    for (i, (want, have)) in expected.iter().zip(&got).enumerate() {
        let want = want.test_record();
        assert_eq!(have.offset, Some(i as i64), "target offsets are dense");
        assert!(want.same_payload(have), "record {i}: {want:?} vs {have:?}");
        assert_eq!(
            want.timestamp_ms, have.timestamp_ms,
            "record {i}: timestamp"
        );
    }
}

fn assert_exact(flow: &Flow, names: &Names, cases: &[(i64, i64)]) {
    let sp = SourcePartition::new(topic(names), 0);
    for &(source, target) in cases {
        assert_eq!(
            flow.map().translate(&sp, source),
            Translation::Exact { target },
            "source offset {source}"
        );
    }
}

/// Aborted transaction batches are recognised from the fetch response's aborted list, not
/// mirrored, and neither are the markers; the map sends every skipped position to the next
/// mirrored record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborted_transactions_are_skipped_using_the_fetch_aborted_list() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let rdk = Rdk::new();
    let recs: Vec<Rec> = (0..10).map(Rec::plain).collect();
    let aborted = Producer {
        id: 7,
        transactional: true,
    };
    let committed = Producer {
        id: 8,
        transactional: true,
    };
    let log: Shared = Arc::default();
    {
        let mut l = log.lock().unwrap();
        l.push(batch(&recs[0..3], aborted, Compression::None));
        l.push(batch(&recs[3..5], committed, Compression::None));
        l.push(marker(5, 7, 0));
        l.push(marker(6, 8, 1));
        l.push(batch(&recs[7..10], PLAIN, Compression::None));
        l.end = 10;
        l.aborted = vec![(7, 0)];
    }
    let fake = fake_source(Arc::clone(&log), &names).await;
    let mut flow = within(start_flow(&fake, &clusters, &names)).await;
    within(flow.run_until_caught_up()).await.unwrap();

    let stats = flow.stats();
    assert_eq!(stats.records, 5, "{stats:?}");
    assert_eq!(stats.aborted_batches_skipped, 1, "{stats:?}");
    assert_eq!(stats.control_batches_skipped, 2, "{stats:?}");
    assert_eq!(stats.batches_forwarded, 2, "{stats:?}");
    assert_eq!(stats.batches_rebuilt, 0, "{stats:?}");
    assert_eq!(stats.lost_records, 0, "{stats:?}");
    // The flow fetched read_committed.
    assert!(fake.requests(ApiKey::Fetch).iter().all(|r| matches!(
        &r.body,
        Body::Fetch(f) if f.isolation_level == 1
    )));
    let expected: Vec<Rec> = [3, 4, 7, 8, 9]
        .iter()
        .map(|&o| recs[o as usize].clone())
        .collect();
    assert_target_holds(&rdk, &clusters, &names, &expected);
    assert_exact(
        &flow,
        &names,
        &[
            (0, 0),
            (1, 0),
            (3, 0),
            (4, 1),
            (5, 2),
            (6, 2),
            (7, 2),
            (9, 4),
            (10, 5),
        ],
    );
}

/// A compacted batch (offsets 10, 11, 14, 17: holes, lastOffsetDelta 7, 4 records, gzip) is
/// rebuilt dense; its records arrive identical and the map is exact for survivors and holes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_batch_with_holes_is_rebuilt_and_the_map_stays_exact() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let rdk = Rdk::new();
    let mut survivors: Vec<Rec> = [10, 11, 14, 17, 18, 19].map(Rec::plain).to_vec();
    // Headers with order, repeats-free names, a null value; a null key and a tombstone.
    survivors[0].headers = vec![("a".into(), Some(b"1".to_vec())), ("b".into(), None)];
    survivors[1].key = None;
    survivors[2].value = None;
    survivors[3].headers = vec![("z".into(), Some(Vec::new()))];
    survivors[4].headers = vec![("h".into(), Some(b"x".to_vec()))];
    let log: Shared = Arc::default();
    {
        let mut l = log.lock().unwrap();
        l.push(batch(&survivors[..4], PLAIN, Compression::Gzip));
        l.push(batch(&survivors[4..], PLAIN, Compression::None));
        l.log_start = 10;
        l.end = 20;
        let (base, next, bytes) = &l.batches[0];
        let count = i32::from_be_bytes(bytes[57..61].try_into().unwrap());
        assert_eq!((*base, *next, count), (10, 18, 4), "a batch with holes");
    }
    let fake = fake_source(Arc::clone(&log), &names).await;
    let mut flow = within(start_flow(&fake, &clusters, &names)).await;
    within(flow.run_until_caught_up()).await.unwrap();

    let stats = flow.stats();
    assert_eq!(stats.records, 6, "{stats:?}");
    assert_eq!(stats.batches_rebuilt, 1, "{stats:?}");
    assert_eq!(stats.batches_forwarded, 1, "{stats:?}");
    assert_eq!(stats.lost_records, 0, "{stats:?}");
    assert_target_holds(&rdk, &clusters, &names, &survivors);
    assert_exact(
        &flow,
        &names,
        &[
            (10, 0),
            (11, 1),
            (12, 2),
            (13, 2),
            (14, 2),
            (15, 3),
            (16, 3),
            (17, 3),
            (18, 4),
            (19, 5),
            (20, 6),
        ],
    );
}

/// The source's log start moves into the middle of a batch not mirrored yet: the fetch below it
/// is OFFSET_OUT_OF_RANGE, the flow records `5..8` as lost, and the batch served from 8 (still
/// starting at 5, as Kafka serves it) is rebuilt keeping only 8..13.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_cut_by_the_log_start_is_rebuilt_from_the_position() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let rdk = Rdk::new();
    let recs: Vec<Rec> = (0..13).map(Rec::plain).collect();
    let log: Shared = Arc::default();
    {
        let mut l = log.lock().unwrap();
        l.push(batch(&recs[0..5], PLAIN, Compression::None));
        l.end = 5;
    }
    let fake = fake_source(Arc::clone(&log), &names).await;
    let mut flow = within(start_flow(&fake, &clusters, &names)).await;
    within(flow.run_until_caught_up()).await.unwrap();
    assert_eq!(flow.stats().records, 5, "{:?}", flow.stats());

    // Records 5..13 arrive in one batch, and the log start moves to 8 before the flow reads it.
    {
        let mut l = log.lock().unwrap();
        l.batches.clear();
        l.push(batch(&recs[5..13], PLAIN, Compression::Lz4));
        l.log_start = 8;
        l.end = 13;
    }
    within(flow.run_until_caught_up()).await.unwrap();

    // The flow asked for 5, was told it is out of range, and went on from the log start.
    let fetched: Vec<i64> = fake
        .requests(ApiKey::Fetch)
        .iter()
        .filter_map(|r| match &r.body {
            Body::Fetch(f) => Some(f.topics[0].partitions[0].fetch_offset),
            _ => None,
        })
        .collect();
    assert!(
        fetched.windows(2).any(|w| w == [5, 8]),
        "fetch offsets: {fetched:?}"
    );
    let stats = flow.stats();
    assert_eq!(stats.records, 10, "{stats:?}");
    assert_eq!(stats.lost_records, 3, "{stats:?}");
    assert_eq!(stats.batches_rebuilt, 1, "{stats:?}");
    assert_eq!(stats.batches_forwarded, 1, "{stats:?}");
    let mut expected = recs[0..5].to_vec();
    expected.extend_from_slice(&recs[8..13]);
    assert_target_holds(&rdk, &clusters, &names, &expected);

    let sp = SourcePartition::new(topic(&names), 0);
    let pm = flow.map().partition(&sp).expect("mapped");
    let lost: Vec<(i64, i64)> = pm
        .lost_ranges()
        .iter()
        .map(|r| (r.src_from, r.src_to))
        .collect();
    assert_eq!(lost, [(5, 8)]);
    assert_exact(&flow, &names, &[(0, 0), (4, 4), (8, 5), (12, 9), (13, 10)]);
    for p in 5..8 {
        assert_eq!(
            flow.map().translate(&sp, p),
            Translation::InLostRange {
                target: 5,
                lost: 8 - p
            },
            "source offset {p}"
        );
    }
}

/// An empty v2 batch covering `base..base + span`, as Kafka's log cleaner leaves one when it
/// removed every record of a producer's last batch (the batch keeps the producer's state).
fn empty_batch(base: i64, span: i32) -> Bytes {
    let full = batch(&[Rec::plain(base)], PLAIN, Compression::None);
    let mut b = BytesMut::from(&full[..61]);
    b[8..12].copy_from_slice(&(61i32 - 12).to_be_bytes());
    b[23..27].copy_from_slice(&(span - 1).to_be_bytes());
    b[57..61].copy_from_slice(&0i32.to_be_bytes());
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b.freeze()
}

/// A compacted partition whose last batch lost all its records (Kafka keeps it empty): the
/// batch has nothing to write, but its offsets are passed over, and the map must cover them,
/// or a group committed at the partition's end looks unreplicated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_batch_is_passed_over_and_the_map_covers_it() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let rdk = Rdk::new();
    let recs: Vec<Rec> = (0..3).map(Rec::plain).collect();
    let log: Shared = Arc::default();
    {
        let mut l = log.lock().unwrap();
        l.push(batch(&recs, PLAIN, Compression::None));
        l.push(empty_batch(3, 3));
        l.end = 6;
    }
    let fake = fake_source(Arc::clone(&log), &names).await;
    let mut flow = within(start_flow(&fake, &clusters, &names)).await;
    within(flow.run_until_caught_up()).await.unwrap();

    assert_eq!(flow.stats().records, 3, "{:?}", flow.stats());
    assert_target_holds(&rdk, &clusters, &names, &recs);
    let sp = SourcePartition::new(topic(&names), 0);
    let extent = flow.map().partition(&sp).and_then(|m| m.extent());
    assert_eq!(extent.map(|e| e.src_end), Some(6), "{extent:?}");
    assert_exact(&flow, &names, &[(2, 2), (3, 3), (5, 3), (6, 3)]);
}

/// A legacy message (format v1, as written before Kafka 0.11): strait forwards v2 batches only,
/// so the partition is halted there with a message saying what to do, after mirroring what
/// comes before it, instead of fetching the same bytes every round forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_format_v1_record_halts_its_partition_with_a_clear_reason() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let rdk = Rdk::new();
    let recs: Vec<Rec> = (0..3).map(Rec::plain).collect();
    // offset, size, crc, magic 1, attributes, timestamp, key (null), value "legacy".
    let mut message = BytesMut::new();
    message.extend_from_slice(&1i8.to_be_bytes());
    message.extend_from_slice(&0i8.to_be_bytes());
    message.extend_from_slice(&1_720_000_000_003i64.to_be_bytes());
    message.extend_from_slice(&(-1i32).to_be_bytes());
    message.extend_from_slice(&6i32.to_be_bytes());
    message.extend_from_slice(b"legacy");
    let mut legacy = BytesMut::new();
    legacy.extend_from_slice(&3i64.to_be_bytes());
    legacy.extend_from_slice(&(4 + message.len() as i32).to_be_bytes());
    // The message's CRC-32: never checked, strait stops at the magic byte.
    legacy.extend_from_slice(&0u32.to_be_bytes());
    legacy.extend_from_slice(&message);
    let log: Shared = Arc::default();
    {
        let mut l = log.lock().unwrap();
        l.push(batch(&recs, PLAIN, Compression::None));
        l.batches.push((3, 4, legacy.freeze()));
        l.end = 4;
    }
    let fake = fake_source(Arc::clone(&log), &names).await;
    let mut flow = within(start_flow(&fake, &clusters, &names)).await;
    within(flow.run_until_caught_up()).await.unwrap();

    assert_eq!(flow.stats().records, 3, "{:?}", flow.stats());
    assert_target_holds(&rdk, &clusters, &names, &recs);
    let halted = flow.halted();
    assert_eq!(halted.len(), 1, "{halted:?}");
    assert!(
        halted[0].1.contains("message format v1") && halted[0].1.contains("from offset 3"),
        "{}",
        halted[0].1
    );
}

/// One partition of two whose offsets cannot be listed (its ListOffsets answers
/// LEADER_NOT_AVAILABLE, as for a partition whose leader is offline) does not hold the other
/// back: the flow starts, the other partition's records are on the target within seconds, and
/// the offline one waits, shown as blocked with why. Once it answers, it is placed alone and
/// mirrored, each record once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_that_cannot_be_placed_waits_while_the_others_flow() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let clusters = Clusters::shared();
    let names = Names::new();
    let rdk = Rdk::new();
    let topic = topic(&names);
    let recs: Vec<Rec> = (0..6).map(Rec::plain).collect();
    let log: Shared = Arc::default();
    {
        let mut l = log.lock().unwrap();
        l.push(batch(&recs, PLAIN, Compression::None));
        l.end = 6;
    }
    let offline = Arc::new(AtomicBool::new(true));
    let fake = {
        let (log, offline, described) = (Arc::clone(&log), Arc::clone(&offline), topic.clone());
        FakeCluster::start(
            &[1],
            script(move |_, req| {
                let log = log.lock().unwrap();
                match (&req.body, req.api) {
                    (Body::Fetch(_), _) => fetch_answer(&log, req),
                    (Body::ListOffsets(_), _) if offline.load(Ordering::SeqCst) => {
                        list_offsets_answer_but(&log, req, &[1])
                    }
                    (Body::ListOffsets(_), _) => list_offsets_answer(&log, req),
                    (_, ApiKey::DescribeConfigs) => describe_configs_answer(req, &described),
                    _ => Action::Default,
                }
            }),
        )
        .await
    };
    fake.spec()
        .api_versions
        .push((ApiKey::DescribeConfigs, 0, 4));
    fake.set_topic(&topic, &[1, 1]);

    let mirrored = |flow: &Flow, p: i32| {
        flow.map()
            .partition(&SourcePartition::new(&topic, p))
            .and_then(|m| m.src_end())
    };
    let mut flow = within(start_flow(&fake, &clusters, &names)).await;
    within(async {
        while mirrored(&flow, 0) < Some(6) {
            flow.round().await.unwrap();
        }
    })
    .await;
    assert_eq!(mirrored(&flow, 1), None, "partition 1 cannot be placed yet");
    let waiting = strait_core::status::snapshot()
        .flows
        .iter()
        .flat_map(|f| &f.topics)
        .filter(|t| t.topic == topic)
        .flat_map(|t| &t.partitions)
        .find(|p| p.partition == 1)
        .cloned()
        .expect("partition 1 in the status");
    assert!(waiting.blocked, "{waiting:?}");
    let why = waiting.last_error.expect("a last error").message;
    assert!(why.contains("LeaderNotAvailable"), "{why}");

    // Its leader is back: it is placed alone and mirrored.
    offline.store(false, Ordering::SeqCst);
    within(async {
        while mirrored(&flow, 1) < Some(6) {
            flow.round().await.unwrap();
        }
    })
    .await;
    let got = rdk.consume(
        &clusters.target.bootstrap,
        &remote(&names),
        12,
        Duration::from_secs(30),
    );
    for p in [0, 1] {
        let copies: Vec<_> = got.iter().filter(|r| r.partition == p).collect();
        assert_eq!(copies.len(), 6, "partition {p}: each record once");
        for (want, have) in recs.iter().zip(copies) {
            assert!(
                want.test_record().same_payload(have),
                "{want:?} vs {have:?}"
            );
        }
    }
    assert_eq!(flow.stats().duplicate_records, 0);
}

/// The target refuses one remote topic for good (POLICY_VIOLATION, as a create-topic policy
/// answers) and the copied config of another (INVALID_CONFIG, as Kafka answers a key it does
/// not know, such as `remote.storage.enable` without tiered storage): the first is left out and
/// said, the second is created with the configs the target takes (each validated alone first;
/// here none), in one request, and neither fails the call that makes the flow's remote topics.
/// (One fake broker is both clusters here.) `remote_topics.rs` shows a compacted topic keeping
/// its policy that way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_remote_topic_or_config_does_not_fail_the_others() {
    refused_topic_or_config(ResponseError::InvalidConfig).await;
}

/// The target refuses one topic's creation, and another's configs, first with the creation and
/// then alone with `alter_error`.
async fn refused_topic_or_config(alter_error: ResponseError) {
    use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
    use kafka_protocol::messages::describe_configs_response::DescribeConfigsResourceResult;
    use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
    use kafka_protocol::messages::{CreateTopicsResponse, IncrementalAlterConfigsResponse};
    use strait_core::flow::topics;

    let names = Names::new();
    let (keeps, refused) = (names.topic("keeps"), names.topic("refused"));
    let (a, b) = aliases(&names);
    let refused_remote = format!("{a}.{refused}");
    let fake = {
        let refused_remote = refused_remote.clone();
        FakeCluster::start(
            &[1],
            script(move |_, req| match (&req.body, req.api) {
                (Body::DescribeConfigs(d), _) => {
                    // Every topic carries one config of its own on the source.
                    let entry = DescribeConfigsResourceResult::default()
                        .with_name(StrBytes::from_static_str("remote.storage.enable"))
                        .with_value(Some(StrBytes::from_static_str("true")))
                        .with_config_source(1)
                        .with_read_only(false)
                        .with_is_sensitive(false);
                    let results = d
                        .resources
                        .iter()
                        .map(|r| {
                            DescribeConfigsResult::default()
                                .with_resource_type(2)
                                .with_resource_name(r.resource_name.clone())
                                .with_configs(vec![entry.clone()])
                        })
                        .collect();
                    req.reply(&DescribeConfigsResponse::default().with_results(results))
                }
                (Body::CreateTopics(c), _) => {
                    let topics = c
                        .topics
                        .iter()
                        .map(|t| {
                            let code = if t.name.0.as_str() == refused_remote {
                                ResponseError::PolicyViolation.code()
                            } else if !t.configs.is_empty() {
                                ResponseError::InvalidConfig.code()
                            } else {
                                0
                            };
                            CreatableTopicResult::default()
                                .with_name(t.name.clone())
                                .with_error_code(code)
                        })
                        .collect();
                    req.reply(&CreateTopicsResponse::default().with_topics(topics))
                }
                // The config again, alone: refused again.
                (_, ApiKey::IncrementalAlterConfigs) => req.reply(
                    &IncrementalAlterConfigsResponse::default().with_responses(vec![
                        AlterConfigsResourceResponse::default()
                            .with_error_code(alter_error.code())
                            .with_resource_type(2),
                    ]),
                ),
                _ => Action::Default,
            }),
        )
        .await
    };
    fake.spec().api_versions.extend([
        (ApiKey::DescribeConfigs, 0, 4),
        (ApiKey::IncrementalAlterConfigs, 0, 1),
    ]);
    fake.set_topic(&keeps, &[1, 1]);
    fake.set_topic(&refused, &[1]);
    let flow = common::flow_config_between(
        (&a, &b),
        &fake.addr(1),
        &fake.addr(1),
        &format!(
            "topics = {}\nheartbeats.replication.enabled = false",
            names.pattern()
        ),
    );
    let client = common::client(&fake.addr(1)).await;
    let mirrored = topics::discover(&client, &flow).await.unwrap();
    assert_eq!(mirrored.len(), 2, "{mirrored:?}");
    let made = within(topics::ensure_remote_topics(
        &client, &client, &flow, &mirrored,
    ))
    .await
    .expect("a refused topic or config fails nothing");
    let keeps_remote = format!("{a}.{keeps}");
    assert_eq!(made.counts.get(&keeps_remote), Some(&2), "{made:?}");
    assert!(!made.counts.contains_key(&refused_remote), "{made:?}");
    let why = made.refused.get(&refused_remote).expect("said refused");
    assert_eq!(why.code(), Some(ResponseError::PolicyViolation), "{why}");
    // `keeps`: asked with its config, refused; the config validated alone, refused; asked
    // again with the configs the target takes (none), in one request.
    let asked: Vec<(bool, usize)> = fake
        .requests(ApiKey::CreateTopics)
        .iter()
        .filter_map(|r| match &r.body {
            Body::CreateTopics(c) => c
                .topics
                .iter()
                .find(|t| t.name.0.as_str() == keeps_remote)
                .map(|t| (c.validate_only, t.configs.len())),
            _ => None,
        })
        .collect();
    assert_eq!(asked, vec![(false, 1), (true, 1), (false, 0)]);
    // Nothing is left for a later alter the principal may not be allowed (the refused key
    // is said at WARN; the config sync tries it again where it runs).
    assert_eq!(fake.requests(ApiKey::IncrementalAlterConfigs).len(), 0);
}

/// Issue 47: a worker whose coordinator holds its JoinGroup past its lease (another member slow
/// to join a rebalance: Kafka answers a join only when the generation forms, up to the
/// rebalance timeout). The group's coordinator is a fake broker with a session timeout scaled
/// down to 1.5 s (a lease of 1.2 s) that holds the second join for 4 s; the flow writes under
/// the worker's lease to the real target. While the lease has lapsed, the flow neither fetches
/// nor writes (at most the round already under way when it lapsed); once the join is
/// answered, the same lease holds again and the flow goes on where it stood: every record
/// lands once, in order. Before, the flow fetched and failed its writes round after round,
/// placing every partition again each time, with no backoff.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_join_pauses_the_flow_and_it_resumes_where_it_stood() {
    use std::collections::BTreeSet;
    use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
    use std::sync::OnceLock;

    use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
    use kafka_protocol::messages::{
        HeartbeatResponse, JoinGroupResponse, LeaveGroupResponse, SyncGroupResponse,
    };
    use strait_core::scale::{Unit, Worker, PROTOCOL_TYPE};
    use strait_kafka::lease::Lease;
    use strait_kafka::membership::MembershipConfig;

    const HELD: Duration = Duration::from_secs(4);
    let clusters = Clusters::shared();
    let names = Names::new();
    let rdk = Rdk::new();
    let recs: Vec<Rec> = (0..40).map(Rec::plain).collect();
    let log: Shared = Arc::default();
    {
        let mut l = log.lock().unwrap();
        for five in recs[..20].chunks(5) {
            l.push(batch(five, PLAIN, Compression::None));
        }
        l.end = 20;
    }
    // Fetches the source answered while the lease had lapsed (not revoked).
    let lease: Arc<OnceLock<Lease>> = Arc::default();
    let lapsed_fetches = Arc::new(AtomicUsize::new(0));
    let fake = fake_source_seeing_fetches(Arc::clone(&log), &names, {
        let lease = Arc::clone(&lease);
        let lapsed_fetches = Arc::clone(&lapsed_fetches);
        move || {
            if lease
                .get()
                .is_some_and(|l| !l.is_valid() && !l.is_revoked())
            {
                lapsed_fetches.fetch_add(1, Ordering::SeqCst);
            }
        }
    })
    .await;

    // The workers' group's coordinator: one member, `m-1`, leading; the second join is held.
    let joins = Arc::new(AtomicI32::new(0));
    let rebalance = Arc::new(AtomicBool::new(false));
    let coordinator = FakeCluster::start(
        &[1],
        script({
            let joins = Arc::clone(&joins);
            let rebalance = Arc::clone(&rebalance);
            move |_, req| match &req.body {
                Body::JoinGroup(join) => {
                    let generation = joins.fetch_add(1, Ordering::SeqCst) + 1;
                    let protocol = join.protocols.first().expect("a protocol");
                    let member = StrBytes::from_static_str("m-1");
                    let answer = req.reply(
                        &JoinGroupResponse::default()
                            .with_generation_id(generation)
                            .with_protocol_type(Some(join.protocol_type.clone()))
                            .with_protocol_name(Some(protocol.name.clone()))
                            .with_leader(member.clone())
                            .with_member_id(member.clone())
                            .with_members(vec![JoinGroupResponseMember::default()
                                .with_member_id(member)
                                .with_metadata(protocol.metadata.clone())]),
                    );
                    if generation == 1 {
                        answer
                    } else {
                        Action::After(HELD, Box::new(answer))
                    }
                }
                Body::SyncGroup(sync) => {
                    rebalance.store(false, Ordering::SeqCst);
                    let mine = sync
                        .assignments
                        .iter()
                        .find(|a| a.member_id.as_str() == "m-1")
                        .map(|a| a.assignment.clone())
                        .unwrap_or_default();
                    req.reply(
                        &SyncGroupResponse::default()
                            .with_protocol_type(sync.protocol_type.clone())
                            .with_protocol_name(sync.protocol_name.clone())
                            .with_assignment(mine),
                    )
                }
                Body::Heartbeat(_) => {
                    let code = if rebalance.load(Ordering::SeqCst) {
                        ResponseError::RebalanceInProgress.code()
                    } else {
                        0
                    };
                    req.reply(&HeartbeatResponse::default().with_error_code(code))
                }
                Body::LeaveGroup(_) => req.reply(&LeaveGroupResponse::default()),
                _ => Action::Default,
            }
        }),
    )
    .await;
    coordinator.spec().api_versions.extend([
        (ApiKey::JoinGroup, 0, 9),
        (ApiKey::SyncGroup, 0, 5),
        (ApiKey::Heartbeat, 0, 4),
        (ApiKey::LeaveGroup, 0, 5),
    ]);

    let (a, b) = aliases(&names);
    let flow_name = format!("{a}->{b}");
    let mut worker = Worker::new(
        common::client(&coordinator.addr(1)).await,
        MembershipConfig {
            session_timeout: Duration::from_millis(1_500),
            rebalance_timeout: Duration::from_secs(10),
            ..MembershipConfig::new(names.group("workers"), PROTOCOL_TYPE)
        },
        BTreeSet::from([Unit::new(flow_name.as_str(), 0)]),
    );
    let mut ownership = worker.ownership();
    let (leave, left) = tokio::sync::oneshot::channel::<()>();
    let member = tokio::spawn(async move {
        worker
            .run(async {
                let _ = left.await;
            })
            .await
    });
    within(ownership.wait_for(|o| o.generation == 1 && !o.units.is_empty()))
        .await
        .unwrap();
    let owned = ownership.borrow().lease.clone();
    lease.set(owned.clone()).unwrap();

    let config = common::flow_config_between(
        (&a, &b),
        &fake.addr(1),
        &clusters.target.bootstrap,
        &format!(
            "emit.offset-syncs.enabled = false\n\
             topics = {}\n\
             groups = {}",
            topic(&names),
            names.pattern()
        ),
    );
    let mut options = strait_core::flow::FlowOptions {
        fetch_max_wait: Duration::from_millis(50),
        ..strait_core::flow::FlowOptions::default()
    };
    options.producer.lease = Some(owned.clone());
    let target = common::client(&clusters.target.bootstrap).await;
    let mut flow = within(Flow::start(
        config,
        options,
        common::client(&fake.addr(1)).await,
        target.clone(),
    ))
    .await
    .expect("flow starts");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move {
        let result = flow
            .run(async {
                let _ = stopped.await;
            })
            .await;
        (flow, result)
    });
    let written = |n: i64| {
        let target = target.clone();
        let remote = remote(&names);
        async move {
            while common::end_offset(&target, &remote).await < n {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    within(written(20)).await;

    // A rebalance: the next heartbeat says so, and the join that follows is held past the
    // lease. Records arrive while it has lapsed.
    rebalance.store(true, Ordering::SeqCst);
    within(async {
        while owned.is_valid() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    {
        let mut l = log.lock().unwrap();
        for five in recs[20..].chunks(5) {
            l.push(batch(five, PLAIN, Compression::None));
        }
        l.end = 40;
    }
    within(ownership.wait_for(|o| o.generation == 2))
        .await
        .unwrap();
    within(written(40)).await;
    // The worker kept its place and its unit through the long join.
    assert!(!owned.is_revoked());
    assert_eq!(
        ownership.borrow().units,
        BTreeSet::from([Unit::new(flow_name.as_str(), 0)])
    );
    let _ = stop.send(());
    let (flow, result) = within(running).await.unwrap();
    result.expect("the flow ran on");
    let _ = leave.send(());
    within(member).await.unwrap().unwrap();

    let lapsed = lapsed_fetches.load(Ordering::SeqCst);
    assert!(
        lapsed <= 1,
        "{lapsed} fetches while the lease had lapsed (at most the round under way)"
    );
    assert_target_holds(&rdk, &clusters, &names, &recs);
    assert_exact(&flow, &names, &[(0, 0), (20, 20), (39, 39), (40, 40)]);
}
