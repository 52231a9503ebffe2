//! The mirror the checkpoint and group-sync tests start from: two real clusters (the run's
//! shared pair), `orders` mirrored so that target offsets differ from source offsets, and
//! helpers to read the target. Every topic, group and cluster alias is the test's own
//! ([`Names`]): the checkpoints topic, the remote topic and the groups of one test are no other
//! test's.
#![allow(dead_code, unreachable_pub)]

use bytes::Bytes;
use strait_core::config::FlowConfig;
use strait_core::flow::Flow;
use strait_core::offsets::checkpoints::CheckpointTask;
use strait_kafka::Client;
use strait_testkit::{Clusters, Names, Rdk, TestRecord};
use strait_wire::offset_map::{SourcePartition, Translation};

use crate::common;

/// Two clusters, `orders` (2 partitions) mirrored so that target offsets differ from source
/// offsets, and the flow that did it, with this test's names.
pub struct Mirror {
    pub clusters: Clusters,
    pub rdk: Rdk,
    pub source: Client,
    pub target: Client,
    pub flow: Flow,
    pub config: FlowConfig,
    /// This test's names: groups are `names.group(..)` (see [`Mirror::group`]).
    pub names: Names,
    /// The flow's cluster aliases, this test's own: `(source, target)`.
    pub aliases: (String, String),
    /// The mirrored topic, `orders-<id>` (2 partitions).
    pub topic: String,
    /// A source topic the flow does not mirror, `elsewhere-<id>` (1 partition).
    pub elsewhere: String,
    /// The mirrored topic on the target, `<source alias>.orders-<id>`.
    pub remote: String,
    /// The checkpoints topic on the target, `<source alias>.checkpoints.internal`.
    pub checkpoints: String,
}

pub fn records(partitions: i32, n: usize, tag: &str) -> Vec<TestRecord> {
    (0..n)
        .map(|i| {
            TestRecord::new(
                (i as i32) % partitions,
                Some(format!("k{i}").as_bytes()),
                Some(format!("{tag}-{i}").as_bytes()),
            )
        })
        .collect()
}

pub fn on_partition(partition: i32, n: usize, tag: &str) -> Vec<TestRecord> {
    (0..n)
        .map(|i| TestRecord::new(partition, None, Some(format!("{tag}-{i}").as_bytes())))
        .collect()
}

/// The mirror, in two rounds, with records someone else wrote on the target in between:
///
/// - `orders-0`: source `[0, 20)` at target `[5, 25)` (5 records were there first);
/// - `orders-1`: source `[0, 15)` at `[0, 15)`, then 3 foreign records, then `[15, 20)` at
///   `[18, 23)`.
///
/// `topics = orders`, so topic `elsewhere` on the source is not mirrored; `groups` lets
/// through this test's groups only; heartbeats (other tests' on the shared clusters) are not
/// mirrored.
pub async fn mirror(extra: &str) -> Mirror {
    let clusters = Clusters::shared();
    let names = Names::new();
    let (a, b) = (names.alias("source"), names.alias("target"));
    let topic = names.topic("orders");
    let elsewhere = names.topic("elsewhere");
    let remote = format!("{a}.{topic}");
    let checkpoints = format!("{a}.checkpoints.internal");
    let rdk = Rdk::new();
    let (src, dst) = (
        clusters.source.bootstrap.clone(),
        clusters.target.bootstrap.clone(),
    );
    rdk.create_topic(&src, &topic, 2);
    rdk.create_topic(&src, &elsewhere, 1);
    rdk.create_topic(&dst, &remote, 2);
    rdk.produce(&dst, &remote, &on_partition(0, 5, "foreign"), "none");
    rdk.produce(&src, &topic, &records(2, 30, "first"), "none");
    let extra = format!(
        "topics = {topic}\n\
         groups = {}\n\
         heartbeats.replication.enabled = false\n\
         {extra}",
        names.pattern()
    );
    let mut flow = common::start_flow_between((&a, &b), &src, &dst, &extra).await;
    flow.run_until_caught_up().await.expect("first mirror");
    rdk.produce(&dst, &remote, &on_partition(1, 3, "foreign"), "none");
    rdk.produce(&src, &topic, &records(2, 10, "second"), "none");
    flow.run_until_caught_up().await.expect("second mirror");
    let p0 = SourcePartition::new(&topic, 0);
    let p1 = SourcePartition::new(&topic, 1);
    for (sp, source, target) in [
        (&p0, 0, 5),
        (&p0, 12, 17),
        (&p0, 20, 25),
        (&p1, 14, 14),
        (&p1, 15, 18),
        (&p1, 20, 23),
    ] {
        assert_eq!(
            flow.map().translate(sp, source),
            Translation::Exact { target },
            "{sp} {source}"
        );
    }
    Mirror {
        source: common::client(&src).await,
        target: common::client(&dst).await,
        config: common::flow_config_between((&a, &b), &src, &dst, &extra),
        clusters,
        rdk,
        flow,
        names,
        aliases: (a, b),
        topic,
        elsewhere,
        remote,
        checkpoints,
    }
}

impl Mirror {
    /// This test's consumer group `<base>-<id>`.
    pub fn group(&self, base: &str) -> String {
        self.names.group(base)
    }

    pub fn task(&self) -> CheckpointTask {
        CheckpointTask::new(
            self.config.clone(),
            self.source.clone(),
            self.target.clone(),
            self.flow.map_updates(),
        )
    }

    pub fn commit_source(&self, group: &str, offsets: &[(i32, i64)]) {
        self.rdk
            .commit(&self.clusters.source.bootstrap, group, &self.topic, offsets);
    }

    pub async fn checkpoints_end(&self) -> i64 {
        end_offset(&self.target, &self.checkpoints).await
    }
}

pub use common::end_offset;

/// Every record of partition 0 of `topic`, raw key and value, in order.
pub async fn read_topic(client: &Client, topic: &str) -> Vec<(Bytes, Bytes)> {
    common::read_records(client, topic)
        .await
        .into_iter()
        .map(|r| (r.key, r.value))
        .collect()
}
