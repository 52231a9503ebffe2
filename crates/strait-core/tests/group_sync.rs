//! Group offset sync (`sync.group.offsets.enabled`, `docs/mm2-behaviour.md` §2.4) against two real
//! clusters, librdkafka committing on both and holding a target group active:
//!
//! - an absent target group gets exactly the translated offsets;
//! - a target group ahead of the translation is never moved back (a partition behind is moved
//!   forward);
//! - a group with an active member on the target is not touched, and the skip is reported;
//!   once the member leaves, the next pass (a new task, from the checkpoints read back) syncs it;
//! - with checkpoint emission off, group sync still translates and writes, and no checkpoints
//!   topic appears.

#![allow(unreachable_pub, dead_code, missing_docs)]

mod common;
mod mirror;

use std::collections::BTreeMap;
use std::time::Duration;

use strait_core::offsets::group_sync::{SkipReason, SkippedSync, SyncedOffset};
use strait_kafka::produce::ProducerConfig;
use strait_kafka::TopicPartition;

use mirror::{mirror, Mirror};

impl Mirror {
    /// `group`'s offset written on the remote topic's `partition`.
    fn synced(
        &self,
        group: &str,
        partition: i32,
        offset: i64,
        previous: Option<i64>,
    ) -> SyncedOffset {
        SyncedOffset {
            group: group.into(),
            partition: TopicPartition::new(&self.remote, partition),
            offset,
            previous,
            metadata: String::new(),
        }
    }

    fn commit_target(&self, group: &str, offsets: &[(i32, i64)]) {
        self.rdk.commit(
            &self.clusters.target.bootstrap,
            group,
            &self.remote,
            offsets,
        );
    }

    /// `group`'s offsets on the target, read by librdkafka.
    fn target_offsets(&self, group: &str) -> BTreeMap<i32, i64> {
        self.rdk.committed(
            &self.clusters.target.bootstrap,
            group,
            &self.remote,
            &[0, 1],
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_sync_writes_idle_groups_and_never_moves_one_back() {
    let m = mirror("sync.group.offsets.enabled = true").await;
    let [billing, reporting, active, ahead] =
        ["billing-app", "reporting", "active-app", "ahead-app"].map(|g| m.group(g));
    // Source positions and their exact target offsets (see `mirror`):
    m.commit_source(&billing, &[(0, 12), (1, 15)]); // 17, 18
    m.commit_source(&reporting, &[(0, 20)]); // 25
    m.commit_source(&active, &[(0, 10), (1, 10)]); // 15, 10
    m.commit_source(&ahead, &[(0, 12), (1, 12)]); // 17, 12

    // The target side: ahead-app is ahead on orders-0 and behind on orders-1; reporting is
    // already there; active-app has a member.
    m.commit_target(&ahead, &[(0, 30), (1, 5)]);
    m.commit_target(&reporting, &[(0, 25)]);
    m.commit_target(&active, &[(0, 2)]);
    let member = m
        .rdk
        .group_member(&m.clusters.target.bootstrap, &active, &m.remote);

    let mut task = m.task();
    task.emit_once().await.expect("checkpoint pass");
    let summary = task.sync_once().await.expect("sync pass");
    assert_eq!(summary.synced_groups, [ahead.as_str(), billing.as_str()]);
    assert_eq!(
        summary.written,
        vec![
            m.synced(&ahead, 1, 12, Some(5)),
            m.synced(&billing, 0, 17, None),
            m.synced(&billing, 1, 18, None),
        ]
    );
    assert_eq!(summary.up_to_date, 1, "reporting");
    assert_eq!(summary.skipped.len(), 2, "{:?}", summary.skipped);
    assert_eq!(summary.skipped[0].group, active);
    assert_eq!(summary.skipped[0].partition, None);
    assert!(
        matches!(&summary.skipped[0].reason, SkipReason::GroupActive { state } if state != "Empty"),
        "{:?}",
        summary.skipped[0]
    );
    assert_eq!(
        summary.skipped[1],
        SkippedSync {
            group: ahead.clone(),
            partition: Some(TopicPartition::new(&m.remote, 0)),
            reason: SkipReason::TargetAhead {
                target: 30,
                translated: 17
            },
        }
    );
    // What the target holds, read by librdkafka.
    assert_eq!(m.target_offsets(&billing), [(0, 17), (1, 18)].into());
    assert_eq!(m.target_offsets(&ahead), [(0, 30), (1, 12)].into());
    assert_eq!(m.target_offsets(&reporting), [(0, 25)].into());
    assert_eq!(
        m.target_offsets(&active),
        [(0, 2)].into(),
        "an active group is not touched"
    );

    // The member leaves. A new task syncs from the checkpoints it reads back.
    drop(member);
    let mut restarted = m.task();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let summary = loop {
        let summary = restarted.sync_once().await.expect("sync pass");
        if summary.synced_groups.contains(&active) {
            break summary;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "active-app never became idle: {summary:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(summary.synced_groups, [active.as_str()]);
    assert_eq!(
        summary.written,
        vec![
            m.synced(&active, 0, 15, Some(2)),
            m.synced(&active, 1, 10, None),
        ]
    );
    assert_eq!(summary.up_to_date, 4);
    assert_eq!(summary.skipped.len(), 1, "ahead-app orders-0 still ahead");
    assert_eq!(m.target_offsets(&active), [(0, 15), (1, 10)].into());
    assert_eq!(m.target_offsets(&ahead), [(0, 30), (1, 12)].into());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_sync_without_checkpoint_emission_writes_no_checkpoints() {
    let m = mirror(
        "emit.checkpoints.enabled = false\n\
         sync.group.offsets.enabled = true",
    )
    .await;
    let billing = m.group("billing-app");
    m.commit_source(&billing, &[(0, 12), (1, 15)]);
    let mut task = m.task();
    assert!(!task.emits_checkpoints() && task.syncs_groups());
    let summary = task.sync_once().await.expect("sync pass");
    assert_eq!(
        summary.written,
        vec![
            m.synced(&billing, 0, 17, None),
            m.synced(&billing, 1, 18, None)
        ]
    );
    assert_eq!(m.target_offsets(&billing), [(0, 17), (1, 18)].into());
    let metadata = m.target.refresh_metadata().await.unwrap();
    assert!(
        !metadata.topics.contains_key(&m.checkpoints),
        "no checkpoints topic"
    );
    // Nothing changed: nothing written again.
    let again = task.sync_once().await.expect("sync pass");
    assert!(again.written.is_empty(), "{again:?}");
    assert_eq!(again.up_to_date, 2);
}

/// Workers: the checkpoints and group sync of a flow's leading unit are written in
/// transactions of an id of their own, so that when another worker takes the unit (its task
/// initialises the id) the earlier one writes nothing more: no checkpoint, no group offset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_task_writes_no_checkpoints_and_syncs_no_groups() {
    let m = mirror("sync.group.offsets.enabled = true").await;
    let billing = m.group("billing-app");
    // The id of unit 0 of the flow `<source alias>-><target alias>`: this test's own.
    let (a, b) = &m.aliases;
    let unit = ProducerConfig {
        transactional_id: Some(format!("strait-{a}-{b}-0-checkpoints")),
        ..ProducerConfig::default()
    };
    m.commit_source(&billing, &[(0, 12), (1, 15)]); // 17, 18
    let mut old = m.task().with_producer_config(unit.clone());
    let first = old.emit_once().await.expect("checkpoint pass");
    assert_eq!(first.emitted.len(), 2);
    old.sync_once().await.expect("sync pass");
    assert_eq!(
        m.target_offsets(&billing),
        BTreeMap::from([(0, 17), (1, 18)])
    );

    // The next owner's task starts: its first pass takes the id, with nothing to write.
    let mut new = m.task().with_producer_config(unit);
    let taken = new
        .emit_once()
        .await
        .expect("the next owner's checkpoint pass");
    assert!(taken.emitted.is_empty(), "{:?}", taken.emitted);
    let end = m.checkpoints_end().await;

    // The source group moves on; the earlier owner's writes are refused.
    m.commit_source(&billing, &[(0, 20)]); // 25
    let refused = old
        .emit_once()
        .await
        .expect_err("a fenced checkpoint write");
    assert!(old.is_fenced(), "{refused}");
    assert_eq!(
        m.checkpoints_end().await,
        end,
        "the fenced task wrote a checkpoint"
    );
    let refused = old.sync_once().await.expect_err("a fenced group sync");
    assert!(old.is_fenced(), "{refused}");
    assert_eq!(
        m.target_offsets(&billing),
        BTreeMap::from([(0, 17), (1, 18)])
    );

    // The owner writes both.
    let written = new.emit_once().await.expect("checkpoint pass");
    assert_eq!(written.emitted.len(), 1, "{:?}", written.emitted);
    assert!(m.checkpoints_end().await > end);
    let pass = new.sync_once().await.expect("sync pass");
    assert_eq!(pass.written, vec![m.synced(&billing, 0, 25, Some(17))]);
    assert_eq!(
        m.target_offsets(&billing),
        BTreeMap::from([(0, 25), (1, 18)])
    );
    assert!(!new.is_fenced());
}

/// The next owner's task fences the earlier one when it starts, not at its first pass an
/// interval later (60 s here, as MM2's default): from then on the earlier task's checkpoints
/// are refused, though the next owner has written nothing yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_owners_task_fences_the_earlier_one_when_it_starts() {
    let m = mirror(
        "sync.group.offsets.enabled = true\n\
         emit.checkpoints.interval.seconds = 60\n\
         sync.group.offsets.interval.seconds = 60",
    )
    .await;
    let billing = m.group("billing-app");
    let (a, b) = &m.aliases;
    let unit = ProducerConfig {
        transactional_id: Some(format!("strait-{a}-{b}-0-checkpoints")),
        ..ProducerConfig::default()
    };
    m.commit_source(&billing, &[(0, 12), (1, 15)]);
    let mut old = m.task().with_producer_config(unit.clone());
    assert_eq!(
        old.emit_once()
            .await
            .expect("checkpoint pass")
            .emitted
            .len(),
        2
    );

    let mut new = m.task().with_producer_config(unit);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move {
        new.run(async {
            let _ = stopped.await;
        })
        .await;
    });
    // The earlier owner goes on writing, a new position each time, until it is refused.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut position = 12;
    while !old.is_fenced() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the earlier owner's task still writes checkpoints 15 s after the next owner's \
             task started"
        );
        position += 1;
        m.commit_source(&billing, &[(0, position)]);
        let _ = old.emit_once().await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let _ = stop.send(());
    running.await.unwrap();
}
