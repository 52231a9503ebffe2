//! Bounding the offset map (`docs/design.md` §4.5): every
//! [`COMPACT_EVERY_FLUSHES`](crate::internal::map_store::COMPACT_EVERY_FLUSHES) map
//! flushes (about one per round), the partitions whose map holds at least
//! [`FlowOptions::compact_min_segments`](super::FlowOptions::compact_min_segments) segments are
//! compacted below a bound (`OffsetMap::compact_below`), and the store notes the floor and a
//! tombstone per dropped entry, written by the same flush.
//!
//! # The bound
//!
//! For each partition, `max(log start, lowest committed)`:
//!
//! - **log start**: the source partition's earliest offset (ListOffsets). Nothing below it can
//!   be read on the source any more.
//! - **lowest committed**: the lowest offset that any consumer group on the source has
//!   committed for the partition (every group the source lists, whether or not `groups` selects
//!   it, so that widening the filter later finds its groups translated exactly). A partition
//!   no group has committed on is bounded by its map's last segment: no position there needs a
//!   translation, and a group that commits one later gets the safe answer below. This bound is
//!   what keeps a source whose log start never moves (a compacted topic, infinite retention)
//!   from growing its map without end.
//!
//! If the groups cannot be listed or fetched in time, the pass uses the log start alone, as it
//! would for a cluster without groups of its own; if the log starts cannot be had, the pass is
//! left for the next one.
//!
//! # Why any such bound is safe
//!
//! - A position at or above the bound translates exactly as before, whatever was dropped.
//! - A position below it (a group committed below the log start, which Kafka resets by its
//!   `auto.offset.reset` anyway; a group that committed for the first time, or moved back,
//!   after the pass) translates, at failover or in a checkpoint, to
//!   `Translation::Compacted`: the lowest target offset the map ever mapped, which is at or
//!   before the exact answer. The group reads again at most what lies between the two on the
//!   target, and skips nothing, so no record is lost by the failover. A checkpoint already
//!   written for it stays (a lower one is not "more recent"), and group sync never moves a
//!   target group backwards.
//!
//! A compaction that dropped a position some group still needed would cost that group
//! duplicates, never records; which is also why a bound taken a moment ago is fine.
//! Groups on the *target* that committed on a remote topic are not asked: a failback
//! translation below the floor goes back to the map's source start, again re-reading, never
//! skipping.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use kafka_protocol::error::ResponseError;
use strait_kafka::admin::{IsolationLevel, OffsetSpec};
use strait_kafka::TopicPartition;

use super::{source_partition, Flow};

/// The segments a partition's map must hold, by default, before a pass asks for its bound.
pub(super) const COMPACT_MIN_SEGMENTS: usize = 1024;

/// How long a pass waits for the source's log starts before leaving it for the next one.
const LOG_START_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a pass waits for the source's groups and their offsets before it bounds by the
/// log starts alone.
const GROUPS_TIMEOUT: Duration = Duration::from_secs(30);

/// Groups whose offsets are asked at once.
const GROUPS_AT_ONCE: usize = 16;

impl Flow {
    /// Compacts the map below each large partition's bound, when a pass is due. Never fails
    /// the flow: a source that does not answer leaves it for the next pass.
    pub(super) async fn compact_map(&mut self) {
        if !self.store.compaction_due() {
            return;
        }
        let min_segments = self.options.compact_min_segments.max(1);
        let due: Vec<(TopicPartition, OffsetSpec)> = self
            .partitions
            .keys()
            .filter(|tp| {
                self.map
                    .partition(&source_partition(tp))
                    .is_some_and(|m| m.segments().len() >= min_segments)
            })
            .map(|tp| (tp.clone(), OffsetSpec::Earliest))
            .collect();
        if due.is_empty() {
            return;
        }
        let listed = match tokio::time::timeout(
            LOG_START_TIMEOUT,
            self.source
                .list_offsets(&due, IsolationLevel::ReadUncommitted),
        )
        .await
        {
            Ok(Ok(listed)) => listed,
            Ok(Err(e)) => {
                tracing::debug!(flow = %self.config.name(), error = %e, "no log starts for the offset map's compaction; next pass");
                return;
            }
            Err(_) => {
                tracing::debug!(flow = %self.config.name(), "no log starts for the offset map's compaction in time; next pass");
                return;
            }
        };
        let partitions: Vec<TopicPartition> = due.into_iter().map(|(tp, _)| tp).collect();
        let lowest = self.lowest_committed(&partitions).await;
        for (tp, result) in listed {
            let log_start = match result {
                Ok(l) if l.offset >= 0 => l.offset,
                _ => continue,
            };
            let (bound, by) = match &lowest {
                None => (log_start, "log start (groups unknown)"),
                Some(lowest) => match lowest.get(&tp) {
                    Some(&committed) if committed > log_start => (committed, "lowest committed"),
                    Some(_) => (log_start, "log start"),
                    None => (i64::MAX, "no group committed"),
                },
            };
            let sp = source_partition(&tp);
            if let Some(compacted) = self.map.compact_below(&sp, bound) {
                tracing::info!(
                    flow = %self.config.name(),
                    partition = %tp,
                    log_start,
                    bound = %by,
                    dropped_segments = compacted.segments.len(),
                    dropped_lost_ranges = compacted.lost.len(),
                    floor = compacted.floor.src_end,
                    "offset map compacted below what no group still needs"
                );
                self.store.note_compacted(&sp, &compacted);
            }
        }
    }

    /// The lowest offset any group on the source has committed, per partition of
    /// `partitions` that has one; `None` if the groups could not be listed or asked in time.
    async fn lowest_committed(
        &self,
        partitions: &[TopicPartition],
    ) -> Option<BTreeMap<TopicPartition, i64>> {
        let source = &self.source;
        let ask = async {
            let groups = source.list_groups().await?;
            let mut answers = futures::stream::iter(groups)
                .map(|g| async move { source.offset_fetch(&g.group_id, Some(partitions)).await })
                .buffer_unordered(GROUPS_AT_ONCE);
            let mut lowest: BTreeMap<TopicPartition, i64> = BTreeMap::new();
            while let Some(committed) = answers.next().await {
                let committed = match committed {
                    Ok(committed) => committed,
                    // A group strait may not describe is one it cannot translate either.
                    Err(e) if e.code() == Some(ResponseError::GroupAuthorizationFailed) => continue,
                    Err(e) => return Err(e),
                };
                for (tp, c) in committed {
                    lowest
                        .entry(tp)
                        .and_modify(|o| *o = (*o).min(c.offset))
                        .or_insert(c.offset);
                }
            }
            Ok::<_, strait_kafka::Error>(lowest)
        };
        match tokio::time::timeout(GROUPS_TIMEOUT, ask).await {
            Ok(Ok(lowest)) => Some(lowest),
            Ok(Err(e)) => {
                tracing::debug!(flow = %self.config.name(), error = %e, "no group offsets for the offset map's compaction; bounded by the log start");
                None
            }
            Err(_) => {
                tracing::debug!(flow = %self.config.name(), "no group offsets for the offset map's compaction in time; bounded by the log start");
                None
            }
        }
    }
}
