//! The comparison of one partition, apart from any cluster: the committed records of the source
//! from the map's start to its end, and those of the target from the map's first target offset to
//! the target's end, walked together in offset order through the map's segments.
//!
//! Per record, one outcome:
//!
//! | source | target | outcome |
//! |---|---|---|
//! | at `s`, in a segment | at the segment's image of `s` | identical, or differing (fields named) |
//! | at `s` | nothing at the image of `s`, or `s` in a gap of the map | missing on the target |
//! | nothing at `s` (compacted or deleted since it was mirrored) | at the image of `s` | gone on the source: not compared |
//! | - | at an offset no segment maps to (written by something else, or past the map's end) | extra on the target |
//!
//! Aborted transactions and markers never reach this: the readers pass over them
//! (`verify/digest.rs`) as a consumer reading committed data does.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use strait_wire::offset_map::Segment;

use super::digest::Entry;

/// Examples listed per kind of difference and partition; every one is counted.
pub const EXAMPLES: usize = 20;

/// A record found different, missing or extra: its offsets on both sides where it has them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Example {
    /// The source offset; `null` for a record extra on the target.
    pub source_offset: Option<i64>,
    /// The target offset; `null` for a record missing on the target whose source offset the map
    /// does not map (a gap of the map).
    pub target_offset: Option<i64>,
    /// For a record that differs: the fields that do (`key`, `value`, `headers`, `timestamp`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
}

/// The counts of one partition's comparison so far, and where it stands: what a state file
/// keeps to resume it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// Records on both sides, the same.
    pub identical: u64,
    /// Records of the source the target lacks.
    pub missing: u64,
    /// Records on the target the map does not account for.
    pub extra: u64,
    /// Records on both sides whose key, value, headers or create time differ.
    pub differing: u64,
    /// Mapped records the source no longer holds (compacted or deleted since they were
    /// mirrored): their copy is on the target, there is nothing to compare it with.
    pub gone_on_source: u64,
    /// Records of aborted transactions passed over on the source.
    pub aborted_on_source: u64,
    /// Records of aborted transactions passed over on the target.
    pub aborted_on_target: u64,
    /// Up to [`EXAMPLES`] records missing on the target.
    pub missing_examples: Vec<Example>,
    /// Up to [`EXAMPLES`] records extra on the target.
    pub extra_examples: Vec<Example>,
    /// Up to [`EXAMPLES`] records that differ.
    pub differing_examples: Vec<Example>,
    /// Every source record before this offset is accounted for.
    pub next_source: i64,
    /// Every target record before this offset is accounted for.
    pub next_target: i64,
}

impl Tally {
    /// Whether anything differs.
    pub fn has_differences(&self) -> bool {
        self.missing + self.extra + self.differing > 0
    }
}

fn note(list: &mut Vec<Example>, example: Example) {
    if list.len() < EXAMPLES {
        list.push(example);
    }
}

/// One partition's walk: the map's segments and the tally.
#[derive(Debug)]
pub struct Walk {
    segments: Vec<Segment>,
    /// Index of the segment the source side is at (source offsets only grow).
    src_seg: usize,
    /// Index of the segment the target side is at (target offsets only grow).
    dst_seg: usize,
    /// What was found so far.
    pub tally: Tally,
}

/// Where a source offset goes through the segments.
fn image(segments: &[Segment], cursor: &mut usize, s: i64) -> Option<i64> {
    while *cursor < segments.len() && segments[*cursor].src_end() <= s {
        *cursor += 1;
    }
    let seg = segments.get(*cursor)?;
    (seg.src_start <= s).then(|| seg.dst_start + (s - seg.src_start))
}

/// Which source offset a target offset is the image of.
fn preimage(segments: &[Segment], cursor: &mut usize, t: i64) -> Option<i64> {
    while *cursor < segments.len() && segments[*cursor].dst_end() <= t {
        *cursor += 1;
    }
    let seg = segments.get(*cursor)?;
    (seg.dst_start <= t).then(|| seg.src_start + (t - seg.dst_start))
}

impl Walk {
    /// A walk over `segments` (in source order), resuming from `tally`.
    pub fn new(segments: &[Segment], tally: Tally) -> Self {
        Walk {
            segments: segments.to_vec(),
            src_seg: 0,
            dst_seg: 0,
            tally,
        }
    }

    /// Accounts for as many entries as can be told now, taking them from the front of `source`
    /// and `target` (each in offset order). A side that is `done` has nothing after what it
    /// holds; otherwise a record is decided only once the other side has shown the record at or
    /// past the offset that decides it. Returns whether both sides are used up and done.
    pub fn advance(
        &mut self,
        source: &mut VecDeque<Entry>,
        source_done: bool,
        target: &mut VecDeque<Entry>,
        target_done: bool,
    ) -> bool {
        loop {
            // A target record no segment maps to is extra, whatever the source holds.
            let mapped = match target.front() {
                Some(t) => match preimage(&self.segments, &mut self.dst_seg, t.offset) {
                    Some(s) => Some((*t, s)),
                    None => {
                        self.extra(t.offset);
                        target.pop_front();
                        continue;
                    }
                },
                None => None,
            };
            match (source.front().copied(), mapped) {
                (Some(s), Some((t, from))) if s.offset == from => {
                    let fields = s.digest.differences(&t.digest);
                    if fields.is_empty() {
                        self.tally.identical += 1;
                    } else {
                        self.tally.differing += 1;
                        note(
                            &mut self.tally.differing_examples,
                            Example {
                                source_offset: Some(s.offset),
                                target_offset: Some(t.offset),
                                fields: fields.into_iter().map(str::to_owned).collect(),
                            },
                        );
                    }
                    self.passed_source(s.offset);
                    self.passed_target(t.offset);
                    source.pop_front();
                    target.pop_front();
                }
                (Some(s), Some((_, from))) if s.offset < from => {
                    self.missing(s.offset);
                    source.pop_front();
                }
                (Some(_), Some((t, _))) => {
                    self.tally.gone_on_source += 1;
                    self.passed_target(t.offset);
                    target.pop_front();
                }
                (Some(s), None) if target_done => {
                    self.missing(s.offset);
                    source.pop_front();
                }
                (None, Some((t, _))) if source_done => {
                    self.tally.gone_on_source += 1;
                    self.passed_target(t.offset);
                    target.pop_front();
                }
                (None, None) => return source_done && target_done,
                _ => return false,
            }
        }
    }

    fn passed_source(&mut self, offset: i64) {
        self.tally.next_source = self.tally.next_source.max(offset.saturating_add(1));
    }

    fn passed_target(&mut self, offset: i64) {
        self.tally.next_target = self.tally.next_target.max(offset.saturating_add(1));
    }

    fn missing(&mut self, s: i64) {
        let target_offset = image(&self.segments, &mut self.src_seg, s);
        self.tally.missing += 1;
        note(
            &mut self.tally.missing_examples,
            Example {
                source_offset: Some(s),
                target_offset,
                fields: Vec::new(),
            },
        );
        self.passed_source(s);
    }

    fn extra(&mut self, t: i64) {
        self.tally.extra += 1;
        note(
            &mut self.tally.extra_examples,
            Example {
                source_offset: None,
                target_offset: Some(t),
                fields: Vec::new(),
            },
        );
        self.passed_target(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::digest::RecordDigest;

    fn entry(offset: i64, value: u8) -> Entry {
        Entry {
            offset,
            digest: RecordDigest::of(Some(b"k"), Some(&[value]), &[], Some(1)),
        }
    }

    fn seg(src_start: i64, dst_start: i64, len: i64) -> Segment {
        Segment {
            src_start,
            dst_start,
            len,
        }
    }

    /// Runs a whole walk, feeding the sides `step` entries at a time.
    fn walk(segments: &[Segment], source: &[Entry], target: &[Entry], step: usize) -> Tally {
        let mut w = Walk::new(segments, Tally::default());
        let (mut s, mut t) = (VecDeque::new(), VecDeque::new());
        let (mut si, mut ti) = (source.iter(), target.iter());
        loop {
            s.extend(si.by_ref().take(step).copied());
            t.extend(ti.by_ref().take(step).copied());
            let (sd, td) = (si.len() == 0, ti.len() == 0);
            if w.advance(&mut s, sd, &mut t, td) {
                return w.tally;
            }
        }
    }

    #[test]
    fn a_faithful_copy_through_gaps_is_identical() {
        // Source 10..15 at 0..5, a marker at 15, 16..18 at 5..7; the target has a marker of
        // its own at 7 (never read: markers are passed over), then 17 mirrored at 8.
        let segments = [seg(10, 0, 5), seg(16, 5, 2)];
        let source: Vec<Entry> = (10..15).chain(16..18).map(|o| entry(o, o as u8)).collect();
        let target: Vec<Entry> = (0..7)
            .map(|i| entry(i, [10, 11, 12, 13, 14, 16, 17][i as usize]))
            .collect();
        for step in [1, 2, 100] {
            let tally = walk(&segments, &source, &target, step);
            assert_eq!(tally.identical, 7, "{tally:?}");
            assert!(!tally.has_differences(), "{tally:?}");
            assert_eq!((tally.next_source, tally.next_target), (18, 7));
        }
    }

    #[test]
    fn missing_extra_differing_and_gone_are_told_apart() {
        let segments = [seg(0, 0, 10)];
        // Source: 0..10 but 3 (compacted on the source since).
        let source: Vec<Entry> = (0..10).filter(|o| *o != 3).map(|o| entry(o, 1)).collect();
        // Target: 0..10 but 6 (deleted), 8 differs; 10 and 11 written by someone else.
        let mut target: Vec<Entry> = (0..12).filter(|o| *o != 6).map(|o| entry(o, 1)).collect();
        target
            .iter_mut()
            .find(|e| e.offset == 8)
            .unwrap()
            .digest
            .value = Some(9);
        for step in [1, 3, 100] {
            let t = walk(&segments, &source, &target, step);
            assert_eq!(
                (
                    t.identical,
                    t.missing,
                    t.extra,
                    t.differing,
                    t.gone_on_source
                ),
                (7, 1, 2, 1, 1),
                "{t:?}"
            );
            assert_eq!(
                t.missing_examples,
                [Example {
                    source_offset: Some(6),
                    target_offset: Some(6),
                    fields: vec![]
                }]
            );
            assert_eq!(t.differing_examples[0].fields, ["value"]);
            assert_eq!(t.differing_examples[0].target_offset, Some(8));
            let extra: Vec<_> = t.extra_examples.iter().map(|e| e.target_offset).collect();
            assert_eq!(extra, [Some(10), Some(11)]);
        }
    }

    #[test]
    fn a_record_in_a_gap_of_the_map_is_missing_without_a_target_offset() {
        // The map says 5 held nothing to mirror, yet the source has a committed record there.
        let segments = [seg(0, 0, 5), seg(6, 5, 2)];
        let source: Vec<Entry> = (0..8).map(|o| entry(o, 1)).collect();
        let target: Vec<Entry> = (0..7).map(|o| entry(o, 1)).collect();
        let t = walk(&segments, &source, &target, 2);
        assert_eq!((t.identical, t.missing), (7, 1));
        assert_eq!(t.missing_examples[0].source_offset, Some(5));
        assert_eq!(t.missing_examples[0].target_offset, None);
    }

    #[test]
    fn a_foreign_record_between_segments_is_extra() {
        // Source 0..3 at 0..3, something else wrote 3, source 3..5 at 4..6.
        let segments = [seg(0, 0, 3), seg(3, 4, 2)];
        let source: Vec<Entry> = (0..5).map(|o| entry(o, 1)).collect();
        let target: Vec<Entry> = (0..6).map(|o| entry(o, 1)).collect();
        let t = walk(&segments, &source, &target, 1);
        assert_eq!((t.identical, t.extra), (5, 1));
        assert_eq!(t.extra_examples[0].target_offset, Some(3));
    }

    #[test]
    fn examples_are_capped_counts_are_not() {
        let segments = [seg(0, 0, 100)];
        let source: Vec<Entry> = (0..100).map(|o| entry(o, 1)).collect();
        let t = walk(&segments, &source, &[], 7);
        assert_eq!(t.missing, 100);
        assert_eq!(t.missing_examples.len(), EXAMPLES);
    }
}
