//! The mirror the checkpoint and group-sync tests start from: two real clusters, `orders`
//! mirrored so that target offsets differ from source offsets, and helpers to read the target.
#![allow(dead_code, unreachable_pub)]

use bytes::Bytes;
use strait_core::config::FlowConfig;
use strait_core::flow::Flow;
use strait_core::offsets::checkpoints::CheckpointTask;
use strait_kafka::Client;
use strait_testkit::{Clusters, Rdk, TestRecord};
use strait_wire::offset_map::{SourcePartition, Translation};

use crate::common;

pub const TOPIC: &str = "orders";
pub const REMOTE: &str = "source.orders";
pub const CHECKPOINTS: &str = "source.checkpoints.internal";

/// Two clusters, `orders` (2 partitions) mirrored so that target offsets differ from source
/// offsets, and the flow that did it.
pub struct Mirror {
    pub clusters: Clusters,
    pub rdk: Rdk,
    pub source: Client,
    pub target: Client,
    pub flow: Flow,
    pub config: FlowConfig,
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
/// `topics = orders`, so topic `elsewhere` on the source is not mirrored.
pub async fn mirror(extra: &str) -> Mirror {
    let clusters = Clusters::start();
    let rdk = Rdk::new();
    let (src, dst) = (
        clusters.source.bootstrap.clone(),
        clusters.target.bootstrap.clone(),
    );
    rdk.create_topic(&src, TOPIC, 2);
    rdk.create_topic(&src, "elsewhere", 1);
    rdk.create_topic(&dst, REMOTE, 2);
    rdk.produce(&dst, REMOTE, &on_partition(0, 5, "foreign"), "none");
    rdk.produce(&src, TOPIC, &records(2, 30, "first"), "none");
    let extra = format!("topics = {TOPIC}\n{extra}");
    let mut flow = common::start_flow(&src, &dst, &extra).await;
    flow.run_until_caught_up().await.expect("first mirror");
    rdk.produce(&dst, REMOTE, &on_partition(1, 3, "foreign"), "none");
    rdk.produce(&src, TOPIC, &records(2, 10, "second"), "none");
    flow.run_until_caught_up().await.expect("second mirror");
    let p0 = SourcePartition::new(TOPIC, 0);
    let p1 = SourcePartition::new(TOPIC, 1);
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
        config: common::flow_config(&src, &dst, &extra),
        clusters,
        rdk,
        flow,
    }
}

impl Mirror {
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
            .commit(&self.clusters.source.bootstrap, group, TOPIC, offsets);
    }

    pub async fn checkpoints_end(&self) -> i64 {
        end_offset(&self.target, CHECKPOINTS).await
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
