//! The exact offset map (`docs/design.md` §4): which target offset each mirrored source offset was
//! written at, per source partition, and translation of consumer positions both ways.
//!
//! Each forwarded batch of `n` dense records at source base `b`, appended at target base `d`,
//! maps `[b, b+n)` to `[d, d+n)`. The map keeps these as [`Segment`]s, extending the last one
//! when a batch continues it linearly in both source and target, so the number of segments grows
//! only with gaps: transaction markers, aborted data, compaction holes, lost ranges on the
//! source; crash re-production or foreign writes on the target. Between gaps a partition costs
//! one segment however many batches went through it. (With a transactional source that is one
//! segment per transaction, since each commit marker leaves a one-offset gap.)
//!
//! Offsets are Kafka offsets (`>= 0`). A *position* is the next offset a consumer would read,
//! as committed by a consumer group. Translation works on positions:
//!
//! ```text
//! source  0 1 2 | 3 (marker) | 4 5 | 6 7 (compacted away) | 8 9
//! target  0 1 2 |            | 3 4 |                      | 5 6
//! segments (0 -> 0, len 3), (4 -> 3, len 2), (8 -> 5, len 2); extent [0, 10)
//!
//! position 1 -> 1 exact    position 3 -> 3 exact (the marker is not a record)
//! position 6 -> 5 exact    position 10 -> 7 exact (read everything)
//! position 12 -> 7 and 2 source offsets not yet mirrored
//! ```
//!
//! [`PartitionMap::translate`] and [`PartitionMap::translate_back`] list every case;
//! `docs/offset-map.md` walks through them. [`mm2_model`] is a model of MirrorMaker 2's sampled
//! translation, kept for comparison; the persisted form of the map is in [`MapRecord`].
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

pub mod mm2_model;
mod partition;
mod persist;
mod translation;

pub use partition::{Compacted, PartitionMap};
pub use translation::{ReverseTranslation, Translation};

pub use persist::{
    LoadError, MapEntry, MapKey, MapLoader, MapRecord, PersistError, MAP_FORMAT_VERSION,
};

/// A source topic partition, the key of an [`OffsetMap`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourcePartition {
    /// The source topic name (not the remote name on the target).
    pub topic: String,
    /// The partition index, the same on both sides.
    pub partition: i32,
}

impl SourcePartition {
    /// Makes one.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        Self {
            topic: topic.into(),
            partition,
        }
    }
}

impl fmt::Display for SourcePartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Source offsets `src_start + i` were written at target offsets `dst_start + i`, `0 <= i < len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Segment {
    /// First source offset.
    pub src_start: i64,
    /// Target offset of the first source offset.
    pub dst_start: i64,
    /// Number of offsets, `> 0` in a map.
    pub len: i64,
}

impl Segment {
    /// One past the last source offset.
    pub fn src_end(&self) -> i64 {
        self.src_start.saturating_add(self.len)
    }

    /// One past the last target offset.
    pub fn dst_end(&self) -> i64 {
        self.dst_start.saturating_add(self.len)
    }

    /// Checks the segment on its own: offsets `>= 0`, `len > 0`, both ends representable.
    fn check(&self) -> Result<(), MapError> {
        let ok = self.src_start >= 0
            && self.dst_start >= 0
            && self.len > 0
            && self.src_start.checked_add(self.len).is_some()
            && self.dst_start.checked_add(self.len).is_some();
        if ok {
            Ok(())
        } else {
            Err(MapError::InvalidSegment { segment: *self })
        }
    }
}

/// Source offsets `[src_from, src_to)` were deleted on the source before they were mirrored
/// (`docs/design.md` §3.4): they are on neither cluster now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LostRange {
    /// First lost offset.
    pub src_from: i64,
    /// One past the last lost offset.
    pub src_to: i64,
}

impl LostRange {
    /// Number of offsets lost (an upper bound on records: some may have been markers).
    pub fn len(&self) -> i64 {
        self.src_to.saturating_sub(self.src_from)
    }

    /// Whether the range is empty (never the case in a map).
    pub fn is_empty(&self) -> bool {
        self.len() <= 0
    }
}

/// The source offsets a map accounts for: every offset in `[src_start, src_end)` was mirrored
/// (in a segment), lost (in a lost range) or held nothing to mirror (a gap: control batch,
/// aborted transaction, compaction hole).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Extent {
    /// The first source offset the flow handled.
    pub src_start: i64,
    /// The source position the flow has handled everything before.
    pub src_end: i64,
}

/// What stands for the segments and lost ranges a map dropped below a bound
/// ([`PartitionMap::compact_below`]): source positions below `src_end` are no longer mapped
/// exactly, and translate to `dst_start`, the lowest target offset the map ever mapped (so at
/// or before where they were).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Floor {
    /// Source positions below this were compacted away; nothing kept starts before it.
    pub src_end: i64,
    /// The lowest target offset the map ever mapped.
    pub dst_start: i64,
}

/// Why the map refused a change, or a persisted map could not be loaded.
///
/// A refused change leaves the map as it was. None of these is retriable: the same call fails
/// the same way. At run time they mean the caller's bookkeeping is wrong (or the target
/// partition was truncated); at load time, that the persisted map is corrupt.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum MapError {
    /// A batch of `n <= 0` records.
    #[error("batch at source offset {src_base} has {n} records, must be at least 1")]
    EmptyBatch {
        /// Source base offset given.
        src_base: i64,
        /// Record count given.
        n: i64,
    },
    /// A lost or skipped range that is empty or reversed.
    #[error("source range [{src_from}, {src_to}) is empty")]
    EmptyRange {
        /// Start given.
        src_from: i64,
        /// End given.
        src_to: i64,
    },
    /// A negative offset.
    #[error("offset {offset} is negative")]
    NegativeOffset {
        /// The offset given.
        offset: i64,
    },
    /// `start + len` does not fit in an `i64`.
    #[error("range of {len} offsets at {start} overflows")]
    Overflow {
        /// Start given.
        start: i64,
        /// Length given.
        len: i64,
    },
    /// The source range starts before the map's source end: it overlaps what is already mapped,
    /// lost or skipped, or goes backwards. The map is append-only on the source side.
    #[error("source offset {src_from} is before the map's source end {src_end}")]
    SourceBehind {
        /// Start of the refused range.
        src_from: i64,
        /// The map's source end.
        src_end: i64,
    },
    /// The batch's target base is before the end of the last segment's target range: it
    /// overlaps mapped target offsets or goes backwards (e.g. the target partition was
    /// truncated).
    #[error("target offset {dst_base} is before the map's target end {dst_end}")]
    TargetBehind {
        /// Target base given.
        dst_base: i64,
        /// End of the last segment's target range.
        dst_end: i64,
    },
    /// A persisted segment is invalid on its own (negative offset, `len <= 0`, overflow).
    #[error(
        "segment source {} target {} length {} is invalid",
        segment.src_start,
        segment.dst_start,
        segment.len
    )]
    InvalidSegment {
        /// The segment as loaded.
        segment: Segment,
    },
    /// A persisted lost range is invalid on its own (negative or empty).
    #[error("lost range [{}, {}) is invalid", range.src_from, range.src_to)]
    InvalidLostRange {
        /// The range as loaded.
        range: LostRange,
    },
    /// A persisted extent is invalid (negative, or its end before its start).
    #[error("extent [{}, {}) is invalid", extent.src_start, extent.src_end)]
    InvalidExtent {
        /// The extent as loaded.
        extent: Extent,
    },
    /// A persisted floor is negative, a segment or lost range crosses it, a segment kept
    /// above it starts below its target offset, or nothing is left above it.
    #[error("floor at source {} target {} is invalid", floor.src_end, floor.dst_start)]
    InvalidFloor {
        /// The floor as loaded.
        floor: Floor,
    },
    /// Two persisted source ranges (segments or lost ranges) overlap.
    #[error(
        "source offsets [{first_start}, {first_end}) and [{second_start}, {second_end}) \
         overlap"
    )]
    SourceOverlap {
        /// Start of the earlier range.
        first_start: i64,
        /// End of the earlier range.
        first_end: i64,
        /// Start of the later range.
        second_start: i64,
        /// End of the later range.
        second_end: i64,
    },
    /// Two persisted segments overlap on the target, or their target ranges are in the opposite
    /// order of their source ranges.
    #[error(
        "segments at source {first_src} and {second_src} have target ranges \
         [{first_dst_start}, {first_dst_end}) and [{second_dst_start}, {second_dst_end}), \
         which overlap or are out of order"
    )]
    TargetOverlap {
        /// Source start of the earlier segment.
        first_src: i64,
        /// Target start of the earlier segment.
        first_dst_start: i64,
        /// Target end of the earlier segment.
        first_dst_end: i64,
        /// Source start of the later segment.
        second_src: i64,
        /// Target start of the later segment.
        second_dst_start: i64,
        /// Target end of the later segment.
        second_dst_end: i64,
    },
}

impl MapError {
    /// Whether trying the same change again may succeed: never, see [`MapError`].
    pub fn is_retriable(&self) -> bool {
        false
    }
}

/// The offset maps of every mirrored source partition, with the [`PartitionMap`] API per
/// partition.
///
/// Each partition's map is held behind an [`Arc`] and copied on write: cloning an `OffsetMap`
/// (as a flow does to publish it after every flush) copies one pointer per partition, and the
/// next change to a partition copies that partition's map only if a clone still shares it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OffsetMap {
    partitions: BTreeMap<SourcePartition, Arc<PartitionMap>>,
}

impl OffsetMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// The map of one partition, if anything was recorded for it.
    pub fn partition(&self, partition: &SourcePartition) -> Option<&PartitionMap> {
        self.partitions.get(partition).map(|m| &**m)
    }

    /// The map of one partition as shared with clones of this `OffsetMap`: two clones hold the
    /// same `Arc` (`Arc::ptr_eq`) until one of them changes the partition.
    pub fn shared_partition(&self, partition: &SourcePartition) -> Option<&Arc<PartitionMap>> {
        self.partitions.get(partition)
    }

    /// Sets the map of one partition (e.g. loaded), returning the one it replaces.
    pub fn insert(
        &mut self,
        partition: SourcePartition,
        map: PartitionMap,
    ) -> Option<PartitionMap> {
        self.partitions
            .insert(partition, Arc::new(map))
            .map(Arc::unwrap_or_clone)
    }

    /// Removes the map of one partition.
    pub fn remove(&mut self, partition: &SourcePartition) -> Option<PartitionMap> {
        self.partitions.remove(partition).map(Arc::unwrap_or_clone)
    }

    /// Every partition's map, in partition order.
    pub fn iter(&self) -> impl Iterator<Item = (&SourcePartition, &PartitionMap)> {
        self.partitions.iter().map(|(p, m)| (p, &**m))
    }

    /// Number of partitions.
    pub fn len(&self) -> usize {
        self.partitions.len()
    }

    /// Whether there are no partitions.
    pub fn is_empty(&self) -> bool {
        self.partitions.is_empty()
    }

    /// Total segments over all partitions (a size metric).
    pub fn segment_count(&self) -> usize {
        self.partitions.values().map(|m| m.segments().len()).sum()
    }

    /// [`PartitionMap::compact_below`] for one partition; `None` for a partition with no map
    /// or nothing to drop (then nothing is copied).
    pub fn compact_below(&mut self, partition: &SourcePartition, bound: i64) -> Option<Compacted> {
        let map = self.partitions.get_mut(partition)?;
        let last = map.segments().last()?;
        let droppable = map
            .segments()
            .first()
            .is_some_and(|s| s.src_end() <= bound.min(last.src_start))
            || map
                .lost_ranges()
                .first()
                .is_some_and(|r| r.src_to <= bound.min(last.src_start));
        if !droppable {
            return None;
        }
        Arc::make_mut(map).compact_below(bound)
    }

    /// Applies `change` to the partition's map, creating it only if the change succeeds.
    fn change<T>(
        &mut self,
        partition: &SourcePartition,
        change: impl FnOnce(&mut PartitionMap) -> Result<T, MapError>,
    ) -> Result<T, MapError> {
        if let Some(map) = self.partitions.get_mut(partition) {
            return change(Arc::make_mut(map));
        }
        let mut map = PartitionMap::new();
        let out = change(&mut map)?;
        self.partitions.insert(partition.clone(), Arc::new(map));
        Ok(out)
    }

    /// [`PartitionMap::record`] for one partition.
    pub fn record(
        &mut self,
        partition: &SourcePartition,
        src_base: i64,
        dst_base: i64,
        n: i64,
    ) -> Result<Segment, MapError> {
        self.change(partition, |m| m.record(src_base, dst_base, n))
    }

    /// [`PartitionMap::record_lost`] for one partition.
    pub fn record_lost(
        &mut self,
        partition: &SourcePartition,
        src_from: i64,
        src_to: i64,
    ) -> Result<LostRange, MapError> {
        self.change(partition, |m| m.record_lost(src_from, src_to))
    }

    /// [`PartitionMap::record_skipped`] for one partition.
    pub fn record_skipped(
        &mut self,
        partition: &SourcePartition,
        src_from: i64,
        src_to: i64,
    ) -> Result<Extent, MapError> {
        self.change(partition, |m| m.record_skipped(src_from, src_to))
    }

    /// [`PartitionMap::translate`] for one partition; [`Translation::Unmapped`] for a partition
    /// with no map.
    pub fn translate(&self, partition: &SourcePartition, p: i64) -> Translation {
        self.partitions
            .get(partition)
            .map_or(Translation::Unmapped, |m| m.translate(p))
    }

    /// [`PartitionMap::translate_back`] for one partition; [`ReverseTranslation::Unmapped`] for
    /// a partition with no map.
    pub fn translate_back(&self, partition: &SourcePartition, q: i64) -> ReverseTranslation {
        self.partitions
            .get(partition)
            .map_or(ReverseTranslation::Unmapped, |m| m.translate_back(q))
    }
}
