//! Bounding the offset map (`docs/design.md` §4.5): every [`COMPACT_EVERY_FLUSHES`] map
//! flushes (about one per round), the partitions whose map holds at least
//! [`COMPACT_MIN_SEGMENTS`] segments are compacted below their source log start
//! (`OffsetMap::compact_below`), and the store notes the floor and a tombstone per dropped
//! entry, written by the same flush.
//!
//! # Why the source's log start is a safe bound
//!
//! The bound is the source partition's log start alone, asked with ListOffsets when a pass is
//! due. The lowest offset committed by any group is known to the checkpoint task, not the
//! flow; bringing it here is left for later, and it is not needed for safety, only for
//! precision:
//!
//! - A position at or above the log start translates exactly as before, whatever was dropped.
//! - A group whose committed offset is below the log start cannot resume there on the source:
//!   its next fetch gets `OFFSET_OUT_OF_RANGE` and the consumer resets by its
//!   `auto.offset.reset`. Translated at failover (or checkpointed), its position is below the
//!   map's floor and gets `Translation::Compacted`: the lowest target offset the map ever
//!   mapped, which is at or before the exact answer. The group reads again at most what lies
//!   between the two on the target, and skips nothing, so no record is lost by the failover.
//!   A checkpoint already written for it stays (a lower one is not "more recent"), and group
//!   sync never moves a target group backwards.
//!
//! A compaction that dropped a position some group still needed would cost that group
//! duplicates, never records; the same holds for any bound, which is why a bound taken a
//! moment ago (the log start only grows) is fine too.

use std::time::Duration;

use strait_kafka::admin::{IsolationLevel, OffsetSpec};
use strait_kafka::TopicPartition;

use super::{source_partition, Flow};

/// Map flushes between two compaction passes.
pub(super) const COMPACT_EVERY_FLUSHES: u32 = 1000;

/// The segments a partition's map must hold before a pass asks for its log start.
pub(super) const COMPACT_MIN_SEGMENTS: usize = 1024;

/// How long a pass waits for the source's log starts before leaving it for the next one.
const LOG_START_TIMEOUT: Duration = Duration::from_secs(5);

impl Flow {
    /// Compacts the map below each large partition's source log start, when a pass is due.
    /// Never fails the flow: a source that does not answer leaves it for the next pass.
    pub(super) async fn compact_map(&mut self) {
        if !self.store.compaction_due() {
            return;
        }
        let due: Vec<(TopicPartition, OffsetSpec)> = self
            .partitions
            .keys()
            .filter(|tp| {
                self.map
                    .partition(&source_partition(tp))
                    .is_some_and(|m| m.segments().len() >= COMPACT_MIN_SEGMENTS)
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
        for (tp, result) in listed {
            let log_start = match result {
                Ok(l) if l.offset >= 0 => l.offset,
                _ => continue,
            };
            let sp = source_partition(&tp);
            if let Some(compacted) = self.map.compact_below(&sp, log_start) {
                tracing::info!(
                    flow = %self.config.name(),
                    partition = %tp,
                    log_start,
                    dropped_segments = compacted.segments.len(),
                    dropped_lost_ranges = compacted.lost.len(),
                    floor = compacted.floor.src_end,
                    "offset map compacted below the source's log start"
                );
                self.store.note_compacted(&sp, &compacted);
            }
        }
    }
}
