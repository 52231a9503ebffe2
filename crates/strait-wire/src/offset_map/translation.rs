//! The results of translating a position through the map, forward and back.

/// Where a source position lands on the target: [`PartitionMap::translate`](super::PartitionMap::translate).
///
/// Counts are source offset distances, so they bound the number of records from above (some of
/// those offsets may be markers or aborted data).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Translation {
    /// `target` is exactly where a consumer at the source position continues: nothing skipped,
    /// nothing read twice. The position was inside a segment, in a gap between segments
    /// (the next mirrored record's target offset), or at the end of the map.
    Exact {
        /// Target position.
        target: i64,
    },
    /// The position is past the map's source end: the consumer has read `unreplicated` source
    /// offsets that are not on the target yet (the recovery-point gap). `target` is the end of
    /// the mapped target data; those records will follow there once mirrored.
    ///
    /// Map `[0,10) -> [0,10)`, position 14: `PastMappedEnd { target: 10, unreplicated: 4 }`.
    PastMappedEnd {
        /// Target position: the end of the mapped target range.
        target: i64,
        /// Source offsets consumed on the source and not mirrored yet.
        unreplicated: i64,
    },
    /// The position is before the map's start: `skipped` source offsets the consumer has not
    /// read were never seen by the flow (deleted or left behind before mirroring started), and a
    /// consumer on the target starts at the first mirrored record, `target`.
    ///
    /// Map `[100,110) -> [0,10)`, position 40: `BeforeMappedStart { target: 0, skipped: 60 }`.
    BeforeMappedStart {
        /// Target position: the first mapped target offset.
        target: i64,
        /// Source offsets between the position and the map's start.
        skipped: i64,
    },
    /// Between the position and the next mirrored record lie `lost` offsets that were deleted on
    /// the source before they were mirrored: the consumer has not read them and never will, on
    /// either cluster. The position is inside a lost range, or in a gap that runs into one.
    /// `target` is the next mirrored record's target offset (or the mapped end if none).
    ///
    /// Segments `(0 -> 0, len 10)`, `(30 -> 10, len 5)`, lost `[10, 30)`, position 12:
    /// `InLostRange { target: 10, lost: 18 }`.
    InLostRange {
        /// Target position.
        target: i64,
        /// Lost source offsets ahead of the position, before the next mirrored record.
        lost: i64,
    },
    /// The position is below the map's [`Floor`](super::Floor): the segments around it were
    /// dropped by [`compact_below`](super::PartitionMap::compact_below) (they lay below the
    /// source's log start), so the exact answer is no longer known. `target` is the lowest
    /// target offset the map ever mapped, at or before the exact answer: a consumer there reads
    /// at most `reread_at_most` records twice, and skips none.
    Compacted {
        /// Target position: the floor's `dst_start`.
        target: i64,
        /// Target offsets between `target` and the first segment kept: an upper bound on the
        /// records read twice.
        reread_at_most: i64,
    },
    /// Nothing has been mirrored from this partition: there is no target position.
    Unmapped,
}

impl Translation {
    /// The target position, if there is one.
    pub fn target(&self) -> Option<i64> {
        match *self {
            Self::Exact { target }
            | Self::PastMappedEnd { target, .. }
            | Self::BeforeMappedStart { target, .. }
            | Self::InLostRange { target, .. }
            | Self::Compacted { target, .. } => Some(target),
            Self::Unmapped => None,
        }
    }

    /// Whether the translation is exact.
    pub fn is_exact(&self) -> bool {
        matches!(self, Self::Exact { .. })
    }
}

/// Where a target position lands on the source (failback): [`PartitionMap::translate_back`](super::PartitionMap::translate_back).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReverseTranslation {
    /// `source` is exactly where a consumer at the target position continues on the source.
    Exact {
        /// Source position.
        source: i64,
    },
    /// The position is in a target range that holds no records mirrored from this source
    /// partition (written directly on the target, e.g. after a failover, or duplicates of a
    /// crashed flow), before the first segment or between two. The consumer has `foreign`
    /// such offsets ahead of it, which the source does not have; `source` is where the next
    /// mirrored record came from.
    ///
    /// Segments `(0 -> 0, len 10)`, `(10 -> 15, len 5)`, target position 12:
    /// `InTargetGap { source: 10, foreign: 3 }`.
    InTargetGap {
        /// Source position.
        source: i64,
        /// Target offsets between the position and the next mirrored record.
        foreign: i64,
    },
    /// The position is past the mapped target end: the consumer has read `unmapped` target
    /// offsets that did not come from this source (typically produced on the target after a
    /// failover). `source` is the map's source end.
    PastMappedEnd {
        /// Source position: the map's source end.
        source: i64,
        /// Target offsets read past the mapped end.
        unmapped: i64,
    },
    /// The position is before the first segment kept by
    /// [`compact_below`](super::PartitionMap::compact_below): the exact answer is no longer
    /// known. `source` is the map's source start, at or before it: a consumer there reads at
    /// most `reread_at_most` source offsets twice (if the source still has them; they lay below
    /// its log start when the map was compacted).
    Compacted {
        /// Source position: the map's source start.
        source: i64,
        /// Source offsets between `source` and the first segment kept.
        reread_at_most: i64,
    },
    /// Nothing has been mirrored from this partition: there is no source position.
    Unmapped,
}

impl ReverseTranslation {
    /// The source position, if there is one.
    pub fn source(&self) -> Option<i64> {
        match *self {
            Self::Exact { source }
            | Self::InTargetGap { source, .. }
            | Self::PastMappedEnd { source, .. }
            | Self::Compacted { source, .. } => Some(source),
            Self::Unmapped => None,
        }
    }

    /// Whether the translation is exact.
    pub fn is_exact(&self) -> bool {
        matches!(self, Self::Exact { .. })
    }
}
