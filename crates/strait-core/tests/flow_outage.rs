//! Flows against real clusters that go away and come back: a target or source broker stopped
//! mid-run stalls the flow, which resumes when the broker is back, with every record mirrored
//! exactly once; a target tail the map never recorded is matched, whatever batches hold it; and
//! two flows in opposite directions do not mirror each other's remote topics (or their offset
//! maps) back.
//!
//! Kafka keeps its data on disk, so a stopped broker comes back with it, on the same port.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use strait_core::config::{FlowConfig, StraitConfig};
use strait_core::flow::{Flow, FlowError, FlowOptions};
use strait_kafka::admin::{IsolationLevel, NewTopic, OffsetSpec};
use strait_kafka::{Client, ClientConfig, TopicPartition};
use strait_testkit::{Clusters, Names, Rdk, TestRecord, Which};
use strait_wire::offset_map::{SourcePartition, Translation};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::Layer as _;

/// How long a broker stays down: several of the flow clients' operation timeouts, so that after
/// the round in flight has given up, a later round fails as a whole and the flow itself must
/// stall, back off and reset (a shorter outage is absorbed by the clients' own retries).
const OUTAGE: Duration = Duration::from_secs(4);

/// The flow's clients: an outage shows up as failed operations within
/// `operation_timeout`, well inside [`OUTAGE`].
fn flow_client_config(bootstrap: &str) -> ClientConfig {
    let mut config = ClientConfig::new([bootstrap]);
    config.operation_timeout = Duration::from_secs(1);
    config.connection.request_timeout = Duration::from_millis(1500);
    config.connection.connect_timeout = Duration::from_secs(1);
    config.reconnect_backoff = (Duration::from_millis(50), Duration::from_millis(500));
    config.retry_backoff_max = Duration::from_millis(500);
    config
}

/// "flow stalled" warnings seen, by flow name (`A->B`). Each test gives its flow its own
/// cluster aliases, so tests running at once do not count each other's.
static STALLS: Mutex<BTreeMap<String, usize>> = Mutex::new(BTreeMap::new());

/// Counts the flow's "flow stalled; retrying" warnings into [`STALLS`], whatever `RUST_LOG` says.
struct StallCounter;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for StallCounter {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        #[derive(Default)]
        struct Fields {
            message: String,
            flow: String,
        }
        impl tracing::field::Visit for Fields {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                match field.name() {
                    "message" => self.message = format!("{value:?}"),
                    "flow" => self.flow = format!("{value:?}"),
                    _ => {}
                }
            }
        }
        if !event.metadata().target().starts_with("strait_core::flow") {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        if fields.message.starts_with("flow stalled") {
            *STALLS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(fields.flow)
                .or_default() += 1;
        }
    }
}

fn stalls(flow: &str) -> usize {
    STALLS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(flow)
        .copied()
        .unwrap_or(0)
}

fn init_tracing() {
    let fmt = tracing_subscriber::fmt::layer()
        .with_test_writer()
        .with_filter(tracing_subscriber::EnvFilter::from_default_env());
    let _ = tracing_subscriber::registry()
        .with(fmt)
        .with(StallCounter)
        .try_init();
}

async fn flow_client(bootstrap: &str) -> Client {
    init_tracing();
    Client::connect(flow_client_config(bootstrap))
        .await
        .expect("connect")
}

/// The test's own clients (setup, checks): patient.
async fn client(bootstrap: &str) -> Client {
    init_tracing();
    let mut config = ClientConfig::new([bootstrap]);
    config.operation_timeout = Duration::from_secs(10);
    Client::connect(config).await.expect("connect")
}

/// An MM2 config naming the source cluster `a` and the target cluster `b`, with the flow
/// `a->b` enabled.
fn config(clusters: &Clusters, (a, b): (&str, &str), extra: &str) -> StraitConfig {
    let text = format!(
        "clusters = {a}, {b}\n\
         {a}.bootstrap.servers = {}\n\
         {b}.bootstrap.servers = {}\n\
         {a}->{b}.enabled = true\n\
         replication.factor = 1\n\
         checkpoints.topic.replication.factor = 1\n\
         offset-syncs.topic.replication.factor = 1\n\
         heartbeats.topic.replication.factor = 1\n\
         {extra}\n",
        clusters.source.bootstrap, clusters.target.bootstrap
    );
    StraitConfig::parse(&text, "test.properties").expect("valid config")
}

fn flow_config(config: &StraitConfig, source: &str) -> FlowConfig {
    config
        .flows
        .iter()
        .find(|f| f.source.as_str() == source)
        .unwrap_or_else(|| panic!("no flow from {source}"))
        .clone()
}

fn options() -> FlowOptions {
    FlowOptions {
        fetch_max_wait: Duration::from_millis(50),
        ..FlowOptions::default()
    }
}

/// Config of the outage tests' flows: topics are looked for every second, so each round
/// also asks both clusters for metadata. An outage then fails a round (the flow stalls, backs
/// off, and resets from its map when the cluster is back) instead of only being retried
/// inside the producer, whose delivery timeout (120 s) outlasts any outage a test can afford.
const REFRESH_EVERY_SECOND: &str = "refresh.topics.interval.seconds = 1";

/// The flow from `clusters.source` (alias `aliases.0`) to `clusters.target` (alias `aliases.1`).
async fn start(clusters: &Clusters, aliases: (&str, &str)) -> Flow {
    Flow::start(
        flow_config(&config(clusters, aliases, REFRESH_EVERY_SECOND), aliases.0),
        options(),
        flow_client(&clusters.source.bootstrap).await,
        flow_client(&clusters.target.bootstrap).await,
    )
    .await
    .expect("flow starts")
}

/// As [`start`], plus `extra` config lines, with the test's patient clients: for tests that take
/// no broker down and run on the shared clusters, whose controllers, busy with every other
/// test, may take longer than [`flow_client_config`]'s 1 s to create a topic.
async fn start_patient(clusters: &Clusters, aliases: (&str, &str), extra: &str) -> Flow {
    let extra = format!("{REFRESH_EVERY_SECOND}\n{extra}");
    Flow::start(
        flow_config(&config(clusters, aliases, &extra), aliases.0),
        options(),
        client(&clusters.source.bootstrap).await,
        client(&clusters.target.bootstrap).await,
    )
    .await
    .expect("flow starts")
}

/// Records `from..from + n` of a run tagged `tag`, spread over `partitions`, stamped a minute
/// ago (Kafka's time retention goes by record timestamps).
fn records(partitions: i32, from: usize, n: usize, tag: &str) -> Vec<TestRecord> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64;
    (from..from + n)
        .map(|i| {
            TestRecord::new(
                (i as i32) % partitions,
                Some(format!("k{i}").as_bytes()),
                Some(format!("{tag}-{i}").as_bytes()),
            )
            .with_header("seq", Some(i.to_string().as_bytes()))
            .with_timestamp(now_ms - 60_000 + i as i64)
        })
        .collect()
}

/// Produces `recs` in `batches` calls (so each partition gets several batches).
fn produce_batches(rdk: &Rdk, bootstrap: &str, topic: &str, recs: &[TestRecord], batches: usize) {
    produce_in(rdk, bootstrap, topic, recs, batches, "lz4");
}

/// As [`produce_batches`], compressed with `codec`.
fn produce_in(
    rdk: &Rdk,
    bootstrap: &str,
    topic: &str,
    recs: &[TestRecord],
    batches: usize,
    codec: &str,
) {
    for chunk in recs.chunks(recs.len().div_ceil(batches).max(1)) {
        rdk.produce(bootstrap, topic, chunk, codec);
    }
}

/// A flow running `Flow::run` in a task, until [`Running::stop`].
struct Running {
    stop: oneshot::Sender<()>,
    task: JoinHandle<(Flow, Result<(), FlowError>)>,
}

fn spawn_run(mut flow: Flow) -> Running {
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let result = flow
            .run(async {
                let _ = stopped.await;
            })
            .await;
        (flow, result)
    });
    Running { stop, task }
}

impl Running {
    /// Asks the flow to stop after its current round and returns it.
    async fn stop(self) -> Flow {
        let _ = self.stop.send(());
        let (flow, result) = tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .expect("the flow stops within 30 s of being asked")
            .expect("the flow task does not panic");
        result.unwrap_or_else(|e| panic!("Flow::run failed: {e}"));
        flow
    }
}

/// Sum of the latest offsets of `topic`'s `partitions` partitions.
async fn end_offsets(client: &Client, topic: &str, partitions: i32) -> Result<i64, String> {
    let mut sum = 0;
    for p in 0..partitions {
        sum += client
            .list_offset(
                &TopicPartition::new(topic, p),
                OffsetSpec::Latest,
                IsolationLevel::ReadUncommitted,
            )
            .await
            .map_err(|e| e.to_string())?
            .offset;
    }
    Ok(sum)
}

/// Waits until `topic` on `bootstrap` holds at least `count` records (or panics after
/// `timeout`). Returns how long that took.
async fn wait_for_records(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    count: i64,
    timeout: Duration,
) -> Duration {
    let started = Instant::now();
    let client = client(bootstrap).await;
    let mut last = Err("not asked yet".to_owned());
    while started.elapsed() < timeout {
        last = end_offsets(&client, topic, partitions).await;
        if matches!(last, Ok(n) if n >= count) {
            return started.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{topic} on {bootstrap}: fewer than {count} records after {timeout:?} (last: {last:?})");
}

/// Consumes `topic` and checks it holds exactly `expected`: per partition, the same payloads
/// and timestamps in the same order, nothing missing and nothing twice.
async fn assert_exactly_once(
    rdk: &Rdk,
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    expected: &[TestRecord],
) {
    let end = end_offsets(&client(bootstrap).await, topic, partitions)
        .await
        .unwrap();
    assert_eq!(
        end,
        expected.len() as i64,
        "{topic}: the target's end offsets add up to the records sent (none written twice)"
    );
    let got = rdk.consume(bootstrap, topic, expected.len(), Duration::from_secs(30));
    assert_eq!(got.len(), expected.len(), "{topic}: record count");
    let seen: BTreeSet<_> = got.iter().map(|r| r.value.clone()).collect();
    assert_eq!(seen.len(), got.len(), "{topic}: a record appears twice");
    for p in 0..partitions {
        let want: Vec<_> = expected.iter().filter(|r| r.partition == p).collect();
        let have: Vec<_> = got.iter().filter(|r| r.partition == p).collect();
        assert_eq!(want.len(), have.len(), "{topic}-{p}: count");
        for (i, (w, h)) in want.iter().zip(&have).enumerate() {
            assert!(w.same_payload(h), "{topic}-{p} #{i}: {w:?} vs {h:?}");
            assert_eq!(
                w.timestamp_ms, h.timestamp_ms,
                "{topic}-{p} #{i}: timestamp"
            );
            assert_eq!(h.offset, Some(i as i64), "{topic}-{p}: offsets are dense");
        }
    }
}

/// Every source offset of `topic` up to its end translates to the same target offset: one
/// unbroken mapping, no gap and no lost range.
fn assert_map_exact(flow: &Flow, topic: &str, ends: &BTreeMap<i32, i64>) {
    for (&p, &end) in ends {
        let sp = SourcePartition::new(topic, p);
        let partition = flow
            .map()
            .partition(&sp)
            .unwrap_or_else(|| panic!("no map for {topic}-{p}"));
        assert!(
            partition.lost_ranges().is_empty(),
            "{topic}-{p}: lost ranges {:?}",
            partition.lost_ranges()
        );
        for pos in [0, end / 2, end - 1, end] {
            assert_eq!(
                flow.map().translate(&sp, pos),
                Translation::Exact { target: pos },
                "{topic}-{p} position {pos}"
            );
        }
    }
}

fn per_partition(recs: &[TestRecord]) -> BTreeMap<i32, i64> {
    let mut ends = BTreeMap::new();
    for r in recs {
        *ends.entry(r.partition).or_insert(0) += 1;
    }
    ends
}

const PARTITIONS: i32 = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_outage_stalls_the_flow_and_it_resumes_without_loss() {
    let test_started = Instant::now();
    let mut clusters = Clusters::start();
    let rdk = Rdk::new();
    let src = client(&clusters.source.bootstrap).await;
    src.create_topic(NewTopic::new("orders", PARTITIONS))
        .await
        .unwrap();
    let first = records(PARTITIONS, 0, 120, "a");
    produce_batches(&rdk, &clusters.source.bootstrap, "orders", &first, 3);

    // Aliases of its own, so its flow's name (for `stalls`) is this test's.
    let mut flow = start(&clusters, ("east", "west")).await;
    flow.run_until_caught_up().await.unwrap();
    assert_eq!(flow.stats().records, 120, "{:?}", flow.stats());

    // The target crashes; the source keeps taking records.
    tokio::task::block_in_place(|| clusters.kill_broker(Which::Target));
    let second = records(PARTITIONS, 120, 90, "b");
    produce_batches(&rdk, &clusters.source.bootstrap, "orders", &second, 3);
    let running = spawn_run(flow);
    tokio::time::sleep(OUTAGE).await;
    assert!(
        !running.task.is_finished(),
        "the flow must stall while the target is down, not stop"
    );

    let outage_ended = Instant::now();
    tokio::task::block_in_place(|| clusters.start_broker(Which::Target));
    let mut all = first;
    all.extend(second);
    let waited = wait_for_records(
        &clusters.target.bootstrap,
        "east.orders",
        PARTITIONS,
        all.len() as i64,
        Duration::from_secs(25),
    )
    .await;
    eprintln!(
        "target back after {:?}; caught up {waited:?} after that",
        outage_ended.elapsed() - waited
    );
    let flow = running.stop().await;
    // Whether the flow itself logged a stall, or the producer's own retries (delivery timeout)
    // rode out the outage, depends on timing; what must hold is below: nothing lost or doubled.
    eprintln!(
        "flow-level stalls during the target outage: {}",
        stalls("east->west")
    );

    let stats = flow.stats();
    assert_eq!(stats.lost_records, 0, "{stats:?}");
    assert_eq!(stats.duplicate_records, 0, "{stats:?}");
    assert_eq!(
        stats.records + stats.recovered_records,
        all.len() as u64,
        "{stats:?}"
    );
    assert_exactly_once(
        &rdk,
        &clusters.target.bootstrap,
        "east.orders",
        PARTITIONS,
        &all,
    )
    .await;
    assert_map_exact(&flow, "orders", &per_partition(&all));
    eprintln!("test took {:?}", test_started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_outage_stalls_and_resumes() {
    let test_started = Instant::now();
    let mut clusters = Clusters::start();
    let rdk = Rdk::new();
    let src = client(&clusters.source.bootstrap).await;
    src.create_topic(NewTopic::new("orders", PARTITIONS))
        .await
        .unwrap();
    let first = records(PARTITIONS, 0, 120, "a");
    produce_batches(&rdk, &clusters.source.bootstrap, "orders", &first, 3);

    let mut flow = start(&clusters, ("north", "south")).await;
    flow.run_until_caught_up().await.unwrap();

    // Records arrive while the flow runs, and it mirrors them...
    let running = spawn_run(flow);
    let second = records(PARTITIONS, 120, 60, "b");
    produce_batches(&rdk, &clusters.source.bootstrap, "orders", &second, 2);
    wait_for_records(
        &clusters.target.bootstrap,
        "north.orders",
        PARTITIONS,
        180,
        Duration::from_secs(20),
    )
    .await;

    // ...then the source crashes, stays down a while and comes back with its data.
    tokio::task::block_in_place(|| clusters.kill_broker(Which::Source));
    tokio::time::sleep(OUTAGE).await;
    assert!(
        !running.task.is_finished(),
        "the flow must stall while the source is down, not stop"
    );
    tokio::task::block_in_place(|| clusters.start_broker(Which::Source));
    let third = records(PARTITIONS, 180, 60, "c");
    produce_batches(&rdk, &clusters.source.bootstrap, "orders", &third, 2);

    let mut all = first;
    all.extend(second);
    all.extend(third);
    let waited = wait_for_records(
        &clusters.target.bootstrap,
        "north.orders",
        PARTITIONS,
        all.len() as i64,
        Duration::from_secs(25),
    )
    .await;
    eprintln!("caught up {waited:?} after the last records were produced");
    let flow = running.stop().await;
    assert!(
        stalls("north->south") >= 1,
        "the outage should have stalled the flow itself (not only a client's retries)"
    );

    let stats = flow.stats();
    assert_eq!(stats.lost_records, 0, "{stats:?}");
    assert_eq!(stats.duplicate_records, 0, "{stats:?}");
    assert_eq!(
        stats.records + stats.recovered_records,
        all.len() as u64,
        "{stats:?}"
    );
    assert_exactly_once(
        &rdk,
        &clusters.target.bootstrap,
        "north.orders",
        PARTITIONS,
        &all,
    )
    .await;
    assert_map_exact(&flow, "orders", &per_partition(&all));
    eprintln!("test took {:?}", test_started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_way_flows_do_not_loop() {
    let test_started = Instant::now();
    let clusters = Clusters::shared();
    let names = Names::new();
    let (a, b) = (names.alias("source"), names.alias("target"));
    let rdk = Rdk::new();
    // Every topic with this test's id in its name: its own topics, its remote topics and its
    // internal topics (offset maps, offset syncs, named by its aliases), so that, as with the
    // default `.*`, what keeps remote and internal topics from being mirrored (back) are the
    // cycle and internal-topic rules, not the filter. Heartbeats are not replicated: the
    // shared source's `heartbeats` holds every test's, and this test is not about them.
    let config = config(
        &clusters,
        (&a, &b),
        &format!(
            "{b}->{a}.enabled = true\n\
             topics = .*{id}.*\n\
             groups = {groups}\n\
             heartbeats.replication.enabled = false",
            id = names.id(),
            groups = names.pattern()
        ),
    );
    assert_eq!(config.flows.len(), 2, "both directions: {:?}", config.flows);
    let src = client(&clusters.source.bootstrap).await;
    let dst = client(&clusters.target.bootstrap).await;
    let orders = names.topic("orders");
    // A user's topic named like an internal one: Kafka 4's MM2 mirrors it (KIP-1074).
    let audit = format!("{}.internal", names.topic("audit"));
    let payments = names.topic("payments");
    src.create_topic(NewTopic::new(&orders, 2)).await.unwrap();
    src.create_topic(NewTopic::new(&audit, 1)).await.unwrap();
    dst.create_topic(NewTopic::new(&payments, 1)).await.unwrap();
    let order_records = records(2, 0, 40, "order");
    let audit_records = records(1, 0, 10, "audit");
    let payment_records = records(1, 0, 30, "payment");
    produce_batches(&rdk, &clusters.source.bootstrap, &orders, &order_records, 2);
    produce_batches(&rdk, &clusters.source.bootstrap, &audit, &audit_records, 2);
    produce_batches(
        &rdk,
        &clusters.target.bootstrap,
        &payments,
        &payment_records,
        2,
    );

    // Patient clients (no broker goes down here; the shared brokers are busy).
    let mut forward = Flow::start(
        flow_config(&config, &a),
        options(),
        client(&clusters.source.bootstrap).await,
        client(&clusters.target.bootstrap).await,
    )
    .await
    .expect("source->target starts");
    let mut backward = Flow::start(
        flow_config(&config, &b),
        options(),
        client(&clusters.target.bootstrap).await,
        client(&clusters.source.bootstrap).await,
    )
    .await
    .expect("target->source starts");
    forward.run_until_caught_up().await.unwrap();
    backward.run_until_caught_up().await.unwrap();
    // A few more rounds each, after each has seen the other's remote topic and offset map.
    for _ in 0..2 {
        forward.refresh_topics().await.unwrap();
        forward.run_until_caught_up().await.unwrap();
        backward.refresh_topics().await.unwrap();
        backward.run_until_caught_up().await.unwrap();
    }

    let remote_orders = format!("{a}.{orders}");
    let remote_audit = format!("{a}.{audit}");
    let remote_payments = format!("{b}.{payments}");
    let flow_names = |flow: &Flow| -> Vec<(String, String)> {
        flow.topics()
            .iter()
            .map(|t| (t.source.clone(), t.remote.clone()))
            .collect()
    };
    let mut forward_names = flow_names(&forward);
    forward_names.sort();
    assert_eq!(
        forward_names,
        vec![
            (audit.clone(), remote_audit.clone()),
            (orders.clone(), remote_orders.clone())
        ],
        "source->target mirrors orders and audit.internal, no internal topic"
    );
    assert_eq!(
        flow_names(&backward),
        vec![(payments.clone(), remote_payments.clone())],
        "target->source mirrors only payments"
    );
    assert_eq!(forward.stats().records, 50, "{:?}", forward.stats());
    assert_eq!(backward.stats().records, 30, "{:?}", backward.stats());

    // This test's topics: those with its id in their name (the clusters are shared).
    let topics = |metadata: &strait_kafka::Metadata| -> BTreeSet<String> {
        metadata
            .topics
            .keys()
            .filter(|t| t.contains(names.id()))
            .cloned()
            .collect()
    };
    let on_source = topics(&src.refresh_metadata().await.unwrap());
    let on_target = topics(&dst.refresh_metadata().await.unwrap());
    // Other internal topics (MM2's offset-syncs, ...) may come and go; the topics of users and
    // the offset maps are fixed.
    let user = |topics: &BTreeSet<String>| -> BTreeSet<String> {
        topics
            .iter()
            .filter(|t| {
                !t.starts_with("__") && !t.ends_with(".internal") && !t.ends_with("-internal")
            })
            .cloned()
            .collect()
    };
    let set = |names: &[&str]| {
        names
            .iter()
            .map(|n| (*n).to_owned())
            .collect::<BTreeSet<_>>()
    };
    assert_eq!(
        user(&on_source),
        set(&[&orders, &remote_payments]),
        "topics on the source: {on_source:?}"
    );
    assert_eq!(
        user(&on_target),
        set(&[&payments, &remote_orders]),
        "topics on the target: {on_target:?}"
    );
    assert!(
        on_source.contains(&format!("strait-offset-map.{b}.internal")),
        "{on_source:?}"
    );
    assert!(on_target.contains(&remote_audit), "{on_target:?}");
    assert!(
        on_target.contains(&format!("strait-offset-map.{a}.internal")),
        "{on_target:?}"
    );
    // Nothing else carries a cluster prefix: no remote topic mirrored back
    // (`target.source.orders`, `source.target.payments`), no offset map or other internal
    // topic mirrored (`source.strait-offset-map.target.internal`, ...).
    let (a_prefix, b_prefix) = (format!("{a}."), format!("{b}."));
    for (side, topics, remotes) in [
        ("source", &on_source, vec![remote_payments.as_str()]),
        (
            "target",
            &on_target,
            vec![remote_orders.as_str(), remote_audit.as_str()],
        ),
    ] {
        for t in topics {
            assert!(
                remotes.contains(&t.as_str())
                    || !(t.starts_with(&a_prefix) || t.starts_with(&b_prefix)),
                "{side} has {t}: mirrored back or mirrored an internal topic ({topics:?})"
            );
        }
    }

    assert_exactly_once(
        &rdk,
        &clusters.target.bootstrap,
        &remote_orders,
        2,
        &order_records,
    )
    .await;
    assert_exactly_once(
        &rdk,
        &clusters.target.bootstrap,
        &remote_audit,
        1,
        &audit_records,
    )
    .await;
    assert_exactly_once(
        &rdk,
        &clusters.source.bootstrap,
        &remote_payments,
        1,
        &payment_records,
    )
    .await;
    eprintln!("test took {:?}", test_started.elapsed());
}

/// Target records beyond the offset map (a run wrote them and stopped before recording them)
/// are matched record by record, whatever batches hold them: here they were written in another
/// codec than the source's (as Kafka does when the topic's `compression.type` differs). Every one
/// is recovered, none is written twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrecorded_tail_in_another_codec_is_matched() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let (a, b) = (names.alias("tm"), names.alias("tn"));
    let aliases = (a.as_str(), b.as_str());
    // Only this test's topics and groups; no heartbeats: the shared source's `heartbeats`
    // holds every test's, and the record counts below are of this test's records.
    let extra = format!(
        "topics = {pattern}\n\
         groups = {pattern}\n\
         heartbeats.replication.enabled = false",
        pattern = names.pattern()
    );
    let orders = names.topic("orders");
    let rdk = Rdk::new();
    let src = client(&clusters.source.bootstrap).await;
    src.create_topic(NewTopic::new(&orders, PARTITIONS))
        .await
        .unwrap();
    let first = records(PARTITIONS, 0, 120, "a");
    produce_batches(&rdk, &clusters.source.bootstrap, &orders, &first, 3);
    let mut flow = start_patient(&clusters, aliases, &extra).await;
    flow.run_until_caught_up().await.unwrap();
    assert_eq!(flow.stats().records, 120, "{:?}", flow.stats());
    drop(flow);

    // More records on the source; the first 40 of each partition reach the target as an
    // earlier run would have left them: written (zstd, not the source's lz4, in 4 produce
    // calls), not recorded in the map.
    let second = records(PARTITIONS, 120, 180, "b");
    produce_batches(&rdk, &clusters.source.bootstrap, &orders, &second, 3);
    let remote = format!("{}.{orders}", aliases.0);
    let mut tail = 0;
    for p in 0..PARTITIONS {
        let copies: Vec<TestRecord> = second
            .iter()
            .filter(|r| r.partition == p)
            .take(40)
            .cloned()
            .collect();
        tail += copies.len();
        produce_in(
            &rdk,
            &clusters.target.bootstrap,
            &remote,
            &copies,
            4,
            "zstd",
        );
    }

    let mut flow = start_patient(&clusters, aliases, &extra).await;
    flow.run_until_caught_up().await.unwrap();
    let stats = flow.stats();
    assert_eq!(stats.recovered_records, tail as u64, "{stats:?}");
    assert_eq!(stats.duplicate_records, 0, "{stats:?}");
    assert_eq!(stats.records, (second.len() - tail) as u64, "{stats:?}");
    assert_eq!(stats.lost_records, 0, "{stats:?}");
    let mut all = first;
    all.extend(second);
    assert_exactly_once(&rdk, &clusters.target.bootstrap, &remote, PARTITIONS, &all).await;
    assert_map_exact(&flow, &orders, &per_partition(&all));
}
