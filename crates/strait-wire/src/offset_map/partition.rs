//! The offset map of one source partition: recording and translation.
use super::{Extent, Floor, LostRange, MapError, ReverseTranslation, Segment, Translation};

/// The offset map of one source partition.
///
/// Invariants: segments are non-empty and strictly increasing and non-overlapping in both
/// source and target; lost ranges are non-empty, increasing, and overlap neither each other
/// nor segments; the extent covers all of them. Every change that would break one is refused
/// with a [`MapError`] and changes nothing. After [`compact_below`](Self::compact_below), a
/// [`Floor`] stands for what was dropped: nothing kept starts before its `src_end`, and every
/// segment, dropped or kept, starts at or after its `dst_start` on the target.
///
/// ```
/// use strait_wire::offset_map::{PartitionMap, Translation};
///
/// let mut map = PartitionMap::new();
/// map.record(0, 0, 3)?; // source 0..3 at target 0..3
/// map.record_skipped(3, 4)?; // a transaction marker at 3
/// map.record(4, 3, 2)?; // source 4..6 at target 3..5
/// assert_eq!(map.segments().len(), 2);
/// assert_eq!(map.translate(3), Translation::Exact { target: 3 });
/// assert_eq!(map.translate(5), Translation::Exact { target: 4 });
/// assert_eq!(map.translate(9), Translation::PastMappedEnd { target: 5, unreplicated: 3 });
/// # Ok::<(), strait_wire::offset_map::MapError>(())
/// ```
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PartitionMap {
    segments: Vec<Segment>,
    lost: Vec<LostRange>,
    extent: Option<Extent>,
    floor: Option<Floor>,
}

/// A copy with room to grow: a map is copied when a change finds it shared
/// ([`OffsetMap`](super::OffsetMap) copies on write), and the change that follows appends a
/// segment, which would otherwise copy the whole list a second time to grow it.
impl Clone for PartitionMap {
    fn clone(&self) -> Self {
        let mut segments = Vec::with_capacity(self.segments.len() + self.segments.len() / 8 + 4);
        segments.extend_from_slice(&self.segments);
        Self {
            segments,
            lost: self.lost.clone(),
            extent: self.extent,
            floor: self.floor,
        }
    }
}

/// What [`PartitionMap::compact_below`] dropped, and the floor that now stands for it: what to
/// persist (the floor's record first, then a tombstone per dropped segment and lost range).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compacted {
    /// The map's floor after compaction.
    pub floor: Floor,
    /// The segments dropped, in source order.
    pub segments: Vec<Segment>,
    /// The lost ranges dropped, in source order.
    pub lost: Vec<LostRange>,
}

impl PartitionMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// A map of `segments` alone, in any order; see [`from_parts`](Self::from_parts).
    pub fn from_segments(segments: impl IntoIterator<Item = Segment>) -> Result<Self, MapError> {
        Self::from_parts(segments, [], None)
    }

    /// Rebuilds a map from persisted parts, in any order, checking every invariant.
    ///
    /// A corrupt or overlapping map is an error naming the offsets involved. Segments that
    /// continue each other linearly are kept apart, not merged: each is a separate record in the
    /// persisted topic, keyed by its source start, and merging would leave a stale record behind
    /// that overlaps the merged one on the next load. The extent is widened to cover every
    /// segment and lost range (a persisted extent may lag behind them).
    pub fn from_parts(
        segments: impl IntoIterator<Item = Segment>,
        lost: impl IntoIterator<Item = LostRange>,
        extent: Option<Extent>,
    ) -> Result<Self, MapError> {
        Self::from_parts_with_floor(segments, lost, extent, None)
    }

    /// [`from_parts`](Self::from_parts) for a map that was compacted
    /// ([`compact_below`](Self::compact_below)) under `floor`.
    ///
    /// Segments and lost ranges that end at or below the floor's `src_end` are left out: they
    /// were compacted away, and a tombstone that did not make it to the topic (or a late write
    /// that landed after it) must not bring them back. One that crosses the floor, or a segment
    /// whose target range starts below the floor's `dst_start`, is an error.
    pub fn from_parts_with_floor(
        segments: impl IntoIterator<Item = Segment>,
        lost: impl IntoIterator<Item = LostRange>,
        extent: Option<Extent>,
        floor: Option<Floor>,
    ) -> Result<Self, MapError> {
        let mut segments: Vec<Segment> = segments.into_iter().collect();
        let mut lost: Vec<LostRange> = lost.into_iter().collect();
        if let Some(f) = floor {
            if f.src_end < 0 || f.dst_start < 0 {
                return Err(MapError::InvalidFloor { floor: f });
            }
            segments.retain(|s| s.src_end() > f.src_end);
            lost.retain(|r| r.src_to > f.src_end);
            let below = segments
                .iter()
                .any(|s| s.src_start < f.src_end || s.dst_start < f.dst_start)
                || lost.iter().any(|r| r.src_from < f.src_end);
            if below || segments.is_empty() {
                return Err(MapError::InvalidFloor { floor: f });
            }
        }
        for segment in &segments {
            segment.check()?;
        }
        for range in &lost {
            if range.src_from < 0 || range.src_from >= range.src_to {
                return Err(MapError::InvalidLostRange { range: *range });
            }
        }
        if let Some(e) = extent {
            if e.src_start < 0 || e.src_end < e.src_start {
                return Err(MapError::InvalidExtent { extent: e });
            }
        }
        segments.sort_by_key(|s| s.src_start);
        lost.sort_by_key(|r| r.src_from);

        for pair in segments.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if a.dst_end() > b.dst_start {
                return Err(MapError::TargetOverlap {
                    first_src: a.src_start,
                    first_dst_start: a.dst_start,
                    first_dst_end: a.dst_end(),
                    second_src: b.src_start,
                    second_dst_start: b.dst_start,
                    second_dst_end: b.dst_end(),
                });
            }
        }
        // Source ranges of segments and lost ranges together, in order, must not overlap.
        let mut ranges: Vec<(i64, i64)> = segments
            .iter()
            .map(|s| (s.src_start, s.src_end()))
            .chain(lost.iter().map(|r| (r.src_from, r.src_to)))
            .collect();
        ranges.sort_unstable();
        for pair in ranges.windows(2) {
            let ((a_start, a_end), (b_start, b_end)) = (pair[0], pair[1]);
            if a_end > b_start {
                return Err(MapError::SourceOverlap {
                    first_start: a_start,
                    first_end: a_end,
                    second_start: b_start,
                    second_end: b_end,
                });
            }
        }

        let covered = match (ranges.first(), ranges.last()) {
            (Some(&(start, _)), Some(&(_, end))) => Some(Extent {
                src_start: start,
                // Ranges do not overlap, so the last one (by start) ends last.
                src_end: end,
            }),
            _ => None,
        };
        let extent = match (extent, covered) {
            (Some(e), Some(c)) => Some(Extent {
                src_start: e.src_start.min(c.src_start),
                src_end: e.src_end.max(c.src_end),
            }),
            (e, c) => e.or(c),
        };
        let extent = match (extent, floor) {
            (Some(e), Some(f)) => Some(Extent {
                src_start: e.src_start.min(f.src_end),
                ..e
            }),
            (e, _) => e,
        };
        Ok(Self {
            segments,
            lost,
            extent,
            floor,
        })
    }

    /// The segments, in source (and target) order.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// The lost ranges, in source order.
    pub fn lost_ranges(&self) -> &[LostRange] {
        &self.lost
    }

    /// The source offsets the map accounts for, or `None` if nothing was recorded yet.
    pub fn extent(&self) -> Option<Extent> {
        self.extent
    }

    /// What stands for the segments and lost ranges dropped by
    /// [`compact_below`](Self::compact_below), if any were.
    pub fn floor(&self) -> Option<Floor> {
        self.floor
    }

    /// The lowest target offset the map ever mapped: the floor's, or the first segment's.
    fn first_dst(&self) -> Option<i64> {
        self.floor
            .map(|f| f.dst_start)
            .or_else(|| self.segments.first().map(|s| s.dst_start))
    }

    /// Whether nothing was recorded yet.
    pub fn is_empty(&self) -> bool {
        self.extent.is_none()
    }

    /// The source position the map accounts for everything before (the end of its extent).
    pub fn src_end(&self) -> Option<i64> {
        self.extent.map(|e| e.src_end)
    }

    /// The end of the last segment's target range, or `None` if nothing was mirrored yet.
    pub fn dst_end(&self) -> Option<i64> {
        self.segments.last().map(Segment::dst_end)
    }

    /// Total source offsets lost.
    pub fn lost_offsets(&self) -> i64 {
        self.lost
            .iter()
            .fold(0i64, |sum, r| sum.saturating_add(r.len()))
    }

    /// Checks that a source range `[src_from, src_from + len)` may be appended.
    fn check_source(&self, src_from: i64, len: i64) -> Result<i64, MapError> {
        if src_from < 0 {
            return Err(MapError::NegativeOffset { offset: src_from });
        }
        let src_to = src_from.checked_add(len).ok_or(MapError::Overflow {
            start: src_from,
            len,
        })?;
        if let Some(e) = self.extent {
            if src_from < e.src_end {
                return Err(MapError::SourceBehind {
                    src_from,
                    src_end: e.src_end,
                });
            }
        }
        Ok(src_to)
    }

    /// Checks that a source range `[src_from, src_to)` may be appended.
    fn check_range(&self, src_from: i64, src_to: i64) -> Result<(), MapError> {
        if src_from < 0 {
            return Err(MapError::NegativeOffset { offset: src_from });
        }
        if src_to <= src_from {
            return Err(MapError::EmptyRange { src_from, src_to });
        }
        // Both ends are non-negative, so the length fits.
        self.check_source(src_from, src_to - src_from).map(drop)
    }

    fn extend_extent(&mut self, src_from: i64, src_to: i64) -> Extent {
        let extent = match self.extent {
            Some(e) => Extent {
                src_start: e.src_start,
                src_end: src_to,
            },
            None => Extent {
                src_start: src_from,
                src_end: src_to,
            },
        };
        self.extent = Some(extent);
        extent
    }

    /// Records a forwarded batch: source offsets `[src_base, src_base + n)` were written at
    /// target offsets `[dst_base, dst_base + n)` (the Produce response's base offset).
    ///
    /// Extends the last segment when the batch continues it in both source and target, else
    /// starts a new one; returns the segment that now holds the batch, which is what to persist.
    /// Offsets between the map's source end and `src_base` become a gap (nothing to mirror).
    /// A rebuilt batch whose source offsets have holes (compaction) is recorded as one call per
    /// run of consecutive source offsets.
    /// Refuses `n <= 0`, negative offsets, a source range before the map's source end, and a
    /// target range before the last segment's target end.
    pub fn record(&mut self, src_base: i64, dst_base: i64, n: i64) -> Result<Segment, MapError> {
        if n <= 0 {
            return Err(MapError::EmptyBatch { src_base, n });
        }
        let src_to = self.check_source(src_base, n)?;
        if dst_base < 0 {
            return Err(MapError::NegativeOffset { offset: dst_base });
        }
        if dst_base.checked_add(n).is_none() {
            return Err(MapError::Overflow {
                start: dst_base,
                len: n,
            });
        }
        if let Some(dst_end) = self.dst_end() {
            if dst_base < dst_end {
                return Err(MapError::TargetBehind { dst_base, dst_end });
            }
        }
        self.extend_extent(src_base, src_to);
        match self.segments.last_mut() {
            Some(last) if last.src_end() == src_base && last.dst_end() == dst_base => {
                last.len += n;
                Ok(*last)
            }
            _ => {
                let segment = Segment {
                    src_start: src_base,
                    dst_start: dst_base,
                    len: n,
                };
                self.segments.push(segment);
                Ok(segment)
            }
        }
    }

    /// Records that source offsets `[src_from, src_to)` were deleted on the source before they
    /// were mirrored (`docs/design.md` §3.4). A range that continues the last lost range extends it;
    /// returns the lost range that now holds these offsets, which is what to persist.
    ///
    /// Refuses an empty range, a negative offset and a range before the map's source end.
    pub fn record_lost(&mut self, src_from: i64, src_to: i64) -> Result<LostRange, MapError> {
        self.check_range(src_from, src_to)?;
        let at_end = self.extent.map(|e| e.src_end);
        self.extend_extent(src_from, src_to);
        match self.lost.last_mut() {
            // Nothing lies between the last lost range and this one.
            Some(last) if last.src_to == src_from && at_end == Some(src_from) => {
                last.src_to = src_to;
                Ok(*last)
            }
            _ => {
                let range = LostRange { src_from, src_to };
                self.lost.push(range);
                Ok(range)
            }
        }
    }

    /// Records that source offsets `[src_from, src_to)` hold nothing to mirror: a control batch
    /// (transaction marker), an aborted transaction's batch, a compaction hole. Gaps between
    /// recorded ranges are implied anyway; this matters at the end of the map, so that a
    /// consumer that has read past a trailing marker translates exactly instead of being counted
    /// one record ahead. Returns the new extent, which is what to persist.
    ///
    /// Refuses an empty range, a negative offset and a range before the map's source end.
    pub fn record_skipped(&mut self, src_from: i64, src_to: i64) -> Result<Extent, MapError> {
        self.check_range(src_from, src_to)?;
        Ok(self.extend_extent(src_from, src_to))
    }

    /// Lost offsets in `[from, to)`.
    fn lost_between(&self, from: i64, to: i64) -> i64 {
        let first = self.lost.partition_point(|r| r.src_to <= from);
        self.lost[first..]
            .iter()
            .take_while(|r| r.src_from < to)
            .fold(0i64, |sum, r| {
                let overlap = r.src_to.min(to).saturating_sub(r.src_from.max(from));
                sum.saturating_add(overlap.max(0))
            })
    }

    /// Translates a source position `p` (the next offset a consumer would read) to the target:
    ///
    /// - inside a segment: `dst_start + (p - src_start)`, [`Exact`](Translation::Exact);
    /// - in a gap (between segments, or at a segment's end when another follows): the next
    ///   segment's `dst_start`, exact, since the gap holds nothing a consumer would read;
    /// - at the map's source end: the target end, exact;
    /// - in a lost range, or in a gap that runs into one:
    ///   [`InLostRange`](Translation::InLostRange);
    /// - past the source end: [`PastMappedEnd`](Translation::PastMappedEnd);
    /// - before the map's start: [`BeforeMappedStart`](Translation::BeforeMappedStart);
    /// - below the [`floor`](Self::floor) left by [`compact_below`](Self::compact_below): the
    ///   lowest target offset ever mapped, [`Compacted`](Translation::Compacted), at or before
    ///   the exact answer, so a consumer may read records twice but skips none;
    /// - nothing mirrored yet: [`Unmapped`](Translation::Unmapped).
    ///
    /// `O(log segments)`, plus the lost ranges passed over.
    pub fn translate(&self, p: i64) -> Translation {
        let (Some(first), Some(last), Some(extent)) =
            (self.segments.first(), self.segments.last(), self.extent)
        else {
            return Translation::Unmapped;
        };
        if p < extent.src_start {
            return Translation::BeforeMappedStart {
                target: self.first_dst().unwrap_or(first.dst_start),
                skipped: extent.src_start.saturating_sub(p),
            };
        }
        if let Some(floor) = self.floor {
            if p < floor.src_end {
                return Translation::Compacted {
                    target: floor.dst_start,
                    reread_at_most: first.dst_start.saturating_sub(floor.dst_start),
                };
            }
        }
        let i = self.segments.partition_point(|s| s.src_end() <= p);
        let (target, limit) = match self.segments.get(i) {
            Some(s) if s.src_start <= p => {
                return Translation::Exact {
                    target: s.dst_start + (p - s.src_start),
                }
            }
            Some(s) => (s.dst_start, s.src_start),
            None if p > extent.src_end => {
                return Translation::PastMappedEnd {
                    target: last.dst_end(),
                    unreplicated: p - extent.src_end,
                }
            }
            None => (last.dst_end(), extent.src_end),
        };
        match self.lost_between(p, limit) {
            0 => Translation::Exact { target },
            lost => Translation::InLostRange { target, lost },
        }
    }

    /// Translates a target position `q` back to the source (failback): the same map read the
    /// other way.
    ///
    /// - inside a segment: `src_start + (q - dst_start)`, exact;
    /// - at the mapped target end: the map's source end, exact;
    /// - before a segment, where the target holds offsets not mirrored from this partition:
    ///   that segment's `src_start`, [`InTargetGap`](ReverseTranslation::InTargetGap);
    /// - past the mapped target end: [`PastMappedEnd`](ReverseTranslation::PastMappedEnd);
    /// - before the first segment kept by [`compact_below`](Self::compact_below): the map's
    ///   source start, [`Compacted`](ReverseTranslation::Compacted);
    /// - nothing mirrored yet: [`Unmapped`](ReverseTranslation::Unmapped).
    pub fn translate_back(&self, q: i64) -> ReverseTranslation {
        let (Some(first), Some(last), Some(extent)) =
            (self.segments.first(), self.segments.last(), self.extent)
        else {
            return ReverseTranslation::Unmapped;
        };
        if self.floor.is_some() && q < first.dst_start {
            return ReverseTranslation::Compacted {
                source: extent.src_start,
                reread_at_most: first.src_start.saturating_sub(extent.src_start),
            };
        }
        let i = self.segments.partition_point(|s| s.dst_end() <= q);
        match self.segments.get(i) {
            Some(s) if s.dst_start <= q => ReverseTranslation::Exact {
                source: s.src_start + (q - s.dst_start),
            },
            Some(s) => ReverseTranslation::InTargetGap {
                source: s.src_start,
                foreign: s.dst_start.saturating_sub(q),
            },
            None if q == last.dst_end() => ReverseTranslation::Exact {
                source: extent.src_end,
            },
            None => ReverseTranslation::PastMappedEnd {
                source: extent.src_end,
                unmapped: q - last.dst_end(),
            },
        }
    }

    /// Drops what no consumer can still need below source position `bound`: every segment and
    /// lost range that ends at or below `bound`, except the last segment, which is always kept
    /// (it is where the map resumes). A [`Floor`] stands for what was dropped; returns it with
    /// the dropped entries, for the caller to persist, or `None` if nothing was dropped.
    ///
    /// `bound` is the lower of the source's log start and the lowest offset any group has
    /// committed on the partition, as far as the caller knows. Translation is then:
    ///
    /// - for a position at or above the floor's `src_end` (so for every position `>= bound`):
    ///   unchanged, exact stays exact at the same target offset;
    /// - for a position below it: [`Translation::Compacted`] at the lowest target offset the
    ///   map ever mapped, which is at or before the exact answer. A consumer there reads some
    ///   records twice; it never skips one. That is what makes any `bound` safe, even one above
    ///   a group's committed offset: a tighter bound only costs precision, never data.
    ///
    /// ```
    /// use strait_wire::offset_map::{PartitionMap, Translation};
    ///
    /// let mut map = PartitionMap::new();
    /// for i in 0..100 {
    ///     map.record(i * 11, i * 10, 10)?; // ten records and a commit marker, 100 times
    /// }
    /// let before = map.translate(555);
    /// let compacted = map.compact_below(500).expect("segments below 500");
    /// assert_eq!(compacted.segments.len(), 45); // those that end at or below 500
    /// assert_eq!(map.segments().len(), 55);
    /// assert_eq!(map.translate(555), before); // exact, as before
    /// assert_eq!(map.translate(100), Translation::Compacted { target: 0, reread_at_most: 450 });
    /// # Ok::<(), strait_wire::offset_map::MapError>(())
    /// ```
    pub fn compact_below(&mut self, bound: i64) -> Option<Compacted> {
        let last = self.segments.last()?;
        let cut = bound.min(last.src_start);
        let n_segments = self.segments.partition_point(|s| s.src_end() <= cut);
        let n_lost = self.lost.partition_point(|r| r.src_to <= cut);
        if n_segments == 0 && n_lost == 0 {
            return None;
        }
        let dst_start = self.first_dst()?;
        let segments: Vec<Segment> = self.segments.drain(..n_segments).collect();
        let lost: Vec<LostRange> = self.lost.drain(..n_lost).collect();
        let dropped_end = segments
            .last()
            .map(Segment::src_end)
            .max(lost.last().map(|r| r.src_to));
        let src_end = dropped_end.max(self.floor.map(|f| f.src_end))?;
        let floor = Floor { src_end, dst_start };
        self.floor = Some(floor);
        if self.segments.capacity() > 2 * self.segments.len() + 16 {
            self.segments.shrink_to_fit();
        }
        if self.lost.capacity() > 2 * self.lost.len() + 16 {
            self.lost.shrink_to_fit();
        }
        Some(Compacted {
            floor,
            segments,
            lost,
        })
    }
}
