//! Matching the target's unrecorded tail against the source, without a broker: a state machine
//! in the shape `decide.rs` gave the round. The matcher says what it needs next ([`Next`]: a
//! read of either side, a search for one record, a loss to record), [`Flow::recover_tail`]
//! reads it from the clusters and hands it back, and the matcher decides. What it decides is
//! a list of [`Step`]s for the map and an [`Outcome`]: where the partition resumes, and what
//! the target's tail held.
//!
//! The rules (`docs/design.md` §4.4), from where the map ends:
//!
//! - **Matched**: the target's next committed record is a copy of the source's next record
//!   the flow would write (`TailRecord::same_record`): recorded, not written again.
//! - **Skipped**: a source marker or aborted transaction is passed over and recorded as
//!   skipped, as a round would; a target offset that holds no committed record (a marker, an
//!   aborted or fenced copy) is a **gap**, neither matched nor a copy.
//! - **Lost**: the source deleted records before they were matched: recorded as lost; the
//!   target records that are copies of them (**orphans**) are kept and passed over.
//! - **Extra copies**: an earlier mirror copied some records twice (MirrorMaker 2 is at least
//!   once); the later copies are matched and the earlier ones counted as extra.
//! - **Diverged** or **end of data**: matching stops, and the partition resumes after the last
//!   match: what the target holds beyond is written again (at least once, never loss).
//!
//! [`Flow::recover_tail`]: super::super::Flow

use std::collections::VecDeque;
use std::mem;

use super::tail::{SourceItem, TailRecord};

/// Searches of the target for the copy of a source record further on, past records that are
/// not copies of it (an earlier mirror's extra copies): fetches of at least 1 MiB each.
pub(super) const EXTRA_COPIES_SEARCH_FETCHES: usize = 64;

/// Searches of the target for a second copy of the first record matched, past copies of
/// records the source has deleted: fetches.
pub(super) const RECOPY_SEARCH_FETCHES: usize = 16;

/// What a read of the target's committed records from a position found.
#[derive(Debug, Clone)]
pub(super) enum TargetRead {
    /// The committed records from the position, in order, as far as one fetch reaches, and
    /// the offset after the last batch that fetch looked at.
    Records { records: Vec<TailRecord>, next: i64 },
    /// The target deleted its records at the position (OFFSET_OUT_OF_RANGE).
    Deleted,
}

/// What a read of the source from a position found.
#[derive(Debug, Clone)]
pub(super) enum SourceRead {
    /// What it holds from the position, as far as one fetch reaches.
    Items(Vec<SourceItem>),
    /// Its records at the position are deleted: its log start is now this offset.
    StartsAt(i64),
}

/// Which cluster a search reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    Source,
    Target,
}

/// A search for the first record of `side` at or after `from` and before `until` that is the
/// same record as `wanted`, reading at most `fetches` fetches (`tail::find_record`). The source
/// is read as a round reads it, the target committed only.
#[derive(Debug, Clone)]
pub(super) struct Search {
    pub(super) side: Side,
    pub(super) wanted: TailRecord,
    pub(super) from: i64,
    pub(super) until: i64,
    pub(super) fetches: usize,
}

/// What the matcher needs next.
#[derive(Debug)]
pub(super) enum Next {
    /// The target's committed records from this offset: give [`Matcher::target`].
    ReadTarget(i64),
    /// The source from this offset: give [`Matcher::source`].
    ReadSource(i64),
    /// The source's first record the flow would write, from this offset, `None` if none can be
    /// read: give [`Matcher::first`].
    FirstSource(i64),
    /// Give [`Matcher::found`] what the search found.
    Search(Search),
    /// Put `steps` in the map, then record source offsets `from..to` as lost; then call
    /// [`Matcher::lost`].
    Lose {
        steps: Vec<Step>,
        from: i64,
        to: i64,
    },
    /// Matching is over: [`Matcher::finish`].
    Done,
}

/// A decision for the map, in source order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Source offsets `src..src + n` are at target offsets `dst..dst + n`.
    Match { src: i64, dst: i64, n: i64 },
    /// Source offsets `from..to` are not mirrored (markers, aborted transactions).
    Skip { from: i64, to: i64 },
}

/// What matching found, once [`Next::Done`].
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Outcome {
    /// The steps not yet given out with a [`Next::Lose`].
    pub(super) steps: Vec<Step>,
    /// The source offset the partition resumes at.
    pub(super) src: i64,
    /// The target offset matching reached: everything before it is accounted for below.
    pub(super) dst: i64,
    /// Target records matched, in all steps given out.
    pub(super) matched: i64,
    /// Target offsets that hold no committed record.
    pub(super) gaps: i64,
    /// Target records that are copies of source records deleted before they were recorded.
    pub(super) orphans: i64,
    /// Target records that are copies made twice (kept, left out of the map).
    pub(super) extra: i64,
    /// Why matching stopped before the target's end, if it did.
    pub(super) stopped_by: Option<String>,
}

/// Where the matcher is. (One lives while a partition is matched: its size does not matter.)
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum State {
    /// Waiting for the target's records from `dst`.
    ReadingTarget,
    /// Waiting for the source's records from `src`, to compare with `target`.
    ReadingSource {
        target: VecDeque<TailRecord>,
    },
    /// The target record `t` is not a copy of the source record `s`: finding out why.
    Resolving {
        t: TailRecord,
        s: TailRecord,
        stage: Stage,
    },
    /// A loss was given out; matching goes on with a new read.
    Losing,
    Done,
}

/// The questions asked, in order, when a target record is not a copy of the source's.
#[derive(Debug, Clone, Copy)]
enum Stage {
    /// After a loss: where does the copy of `s` come on the target?
    PastOrphans,
    /// Is `t` a second copy of a source record matched here already?
    CopiedAgain,
    /// The first source record from `floor`, to look for its second copy.
    FirstFromFloor { floor: i64 },
    /// Where does the second copy of the record at `floor` come on the target?
    CopiedAgainFromDeleted { floor: i64 },
    /// Does the copy of `s` come further on (the source compacted what is between)?
    FurtherOn,
}

/// Matches and skips found and not yet given out: a rewind can take back those from a source
/// offset on.
#[derive(Debug, Default)]
struct Pending {
    /// The source offset the first of them starts at.
    floor: Option<i64>,
    steps: Vec<Step>,
}

impl Pending {
    /// Source offset `src` matched target offset `dst`; `position` is where matching stood
    /// (`src` or before it, at compaction holes).
    fn matched(&mut self, src: i64, dst: i64, position: i64) {
        self.floor.get_or_insert(position);
        if let Some(Step::Match { src: s, dst: d, n }) = self.steps.last_mut() {
            if *s + *n == src && *d + *n == dst {
                *n += 1;
                return;
            }
        }
        self.steps.push(Step::Match { src, dst, n: 1 });
    }

    fn skip(&mut self, from: i64, to: i64) {
        self.floor.get_or_insert(from);
        self.steps.push(Step::Skip { from, to });
    }

    /// Takes back every match and skip at source offset `from` and later.
    fn take_back_from(&mut self, from: i64) {
        while let Some(step) = self.steps.last_mut() {
            match step {
                Step::Match { src, n, .. } if *src < from => {
                    *n = (*n).min(from - *src);
                    break;
                }
                Step::Skip { from: f, to } if *f < from => {
                    *to = (*to).min(from);
                    break;
                }
                _ => {
                    self.steps.pop();
                }
            }
        }
    }

    /// Gives out every step, counting the records matched into `matched`.
    fn take(&mut self, matched: &mut i64) -> Vec<Step> {
        self.floor = None;
        let steps = mem::take(&mut self.steps);
        *matched += steps
            .iter()
            .map(|s| match s {
                Step::Match { n, .. } => *n,
                Step::Skip { .. } => 0,
            })
            .sum::<i64>();
        steps
    }
}

/// Matches a partition's target tail `dst..target_end` against its source from `src`.
#[derive(Debug)]
pub(super) struct Matcher {
    state: State,
    src: i64,
    dst: i64,
    dst_start: i64,
    target_end: i64,
    /// `(src, dst)` when the current read began: a read that moves neither ends matching.
    progress: (i64, i64),
    pending: Pending,
    matched: i64,
    gaps: i64,
    orphans: i64,
    /// Whether the target records from `dst` may be copies of records the source deleted: a
    /// loss that ends at `src` has just been recorded.
    after_loss: bool,
    /// The create time of the last record matched.
    last_matched: Option<i64>,
    stopped_by: Option<String>,
}

impl Matcher {
    /// A matcher for the target's `dst..target_end` against the source from `src`, and what
    /// it needs first. `after_loss`: the map ends in a loss at `src`.
    pub(super) fn start(src: i64, dst: i64, target_end: i64, after_loss: bool) -> (Self, Next) {
        let mut matcher = Matcher {
            state: State::ReadingTarget,
            src,
            dst,
            dst_start: dst,
            target_end,
            progress: (src, dst),
            pending: Pending::default(),
            matched: 0,
            gaps: 0,
            orphans: 0,
            after_loss,
            last_matched: None,
            stopped_by: None,
        };
        let next = matcher.read_target();
        (matcher, next)
    }

    /// The target's committed records from the offset [`Next::ReadTarget`] asked for.
    pub(super) fn target(&mut self, read: TargetRead) -> Next {
        let (records, next) = match read {
            TargetRead::Records { records, next } => (records, next),
            TargetRead::Deleted => {
                return self.stop(format!(
                    "the target deleted its records at offset {} while they were matched",
                    self.dst
                ))
            }
        };
        let first = records.first().map_or(next, |r| r.offset);
        if first > self.dst {
            self.gaps += first - self.dst;
            self.dst = first;
        }
        if records.is_empty() {
            if next > self.progress.1 {
                return self.read_target();
            }
            return self.stop(format!(
                "the target returned no committed records from offset {}",
                self.dst
            ));
        }
        self.state = State::ReadingSource {
            target: records.into(),
        };
        Next::ReadSource(self.src)
    }

    /// The source from the offset [`Next::ReadSource`] asked for: compares it, record by record,
    /// with the target records read before.
    pub(super) fn source(&mut self, read: SourceRead) -> Next {
        let State::ReadingSource { mut target } = mem::replace(&mut self.state, State::Done) else {
            return self.misused("source");
        };
        let items = match read {
            SourceRead::Items(items) => items,
            SourceRead::StartsAt(earliest) if earliest <= self.src => {
                return self.stop(format!(
                    "the source ends before offset {} (truncated?)",
                    self.src
                ))
            }
            SourceRead::StartsAt(earliest) => {
                let from = mem::replace(&mut self.src, earliest);
                self.after_loss = true;
                self.state = State::Losing;
                return Next::Lose {
                    steps: self.pending.take(&mut self.matched),
                    from,
                    to: earliest,
                };
            }
        };
        let mut target_ran_out = false;
        for item in items {
            let s = match item {
                SourceItem::Skip { from, to } => {
                    self.pending.skip(from.max(self.src), to);
                    self.src = to;
                    continue;
                }
                SourceItem::BatchEnd(end) => {
                    self.src = end;
                    continue;
                }
                SourceItem::Unreadable { base_offset, why } => {
                    return self.stop(format!(
                        "the source batch at offset {base_offset} cannot be read: {why}"
                    ))
                }
                SourceItem::Record(s) => s,
            };
            let Some(t) = target.pop_front() else {
                // This read of the target ends here: both are read again from here.
                target_ran_out = true;
                break;
            };
            if t.offset > self.dst {
                self.gaps += t.offset - self.dst;
                self.dst = t.offset;
            }
            if t.offset != self.dst {
                return self.stop(format!(
                    "the target's next record is at offset {}, not {}",
                    t.offset, self.dst
                ));
            }
            if !t.same_record(&s) {
                return self.mismatch(t, s);
            }
            self.after_loss = false;
            self.last_matched = s.timestamp;
            self.pending.matched(s.offset, self.dst, self.src);
            self.src = s.offset + 1;
            self.dst += 1;
        }
        if (self.src, self.dst) != self.progress {
            return self.read_target();
        }
        if self.after_loss && !target_ran_out {
            // The source has nothing left to match: the rest of the tail is copies of what it
            // deleted.
            self.orphans += self.target_end - self.dst;
            self.dst = self.target_end;
            return self.done();
        }
        self.stop(if target_ran_out {
            format!("the target returned no records from offset {}", self.dst)
        } else {
            format!(
                "the source has no records from offset {} to match",
                self.src
            )
        })
    }

    /// The loss given out with [`Next::Lose`] is recorded.
    pub(super) fn lost(&mut self) -> Next {
        match self.state {
            State::Losing => self.read_target(),
            _ => self.misused("lost"),
        }
    }

    /// What the search given out with [`Next::Search`] found.
    pub(super) fn found(&mut self, found: Option<i64>) -> Next {
        let State::Resolving { t, s, stage } = mem::replace(&mut self.state, State::Done) else {
            return self.misused("found");
        };
        match (stage, found) {
            (Stage::PastOrphans, copy) => {
                // The target records up to the copy of `s` are copies of records the source
                // deleted; all of the rest are, if the tail holds no copy of it.
                let to = copy.unwrap_or(self.target_end);
                self.orphans += to - self.dst;
                self.dst = to;
                self.after_loss = false;
                self.read_target()
            }
            (Stage::CopiedAgain, Some(again)) => {
                // `t` is a second copy of source record `again`: those records are matched
                // again, to their later copies, so that a consumer placed through the map after
                // a cutover does not read the second copies; the first are extra.
                self.pending.take_back_from(again);
                self.src = again;
                self.read_target()
            }
            (Stage::CopiedAgain, None) => {
                // The second copies may start before the records matched here, at records the
                // source has deleted since: then the copy of the first record matched here
                // comes further on. Looked for only when `t` is older than the last record
                // matched (a copy made again), as this search reads ahead.
                let older = matches!(
                    (t.timestamp, self.last_matched),
                    (Some(t), Some(last)) if t < last
                );
                match (older, self.pending.floor) {
                    (true, Some(floor)) => {
                        self.state = State::Resolving {
                            t,
                            s,
                            stage: Stage::FirstFromFloor { floor },
                        };
                        Next::FirstSource(floor)
                    }
                    _ => self.further_on(t, s),
                }
            }
            (Stage::CopiedAgainFromDeleted { floor }, Some(copy)) => {
                self.pending.take_back_from(floor);
                self.src = floor;
                self.dst = copy;
                self.read_target()
            }
            (Stage::FurtherOn, Some(copy)) => {
                // The target records before it are not copies of `s` or of anything after it:
                // kept, left out of the map, counted as extra.
                self.dst = copy;
                self.read_target()
            }
            (Stage::FurtherOn, None) => self.diverged(&t, &s),
            (Stage::CopiedAgainFromDeleted { .. }, None) => self.further_on(t, s),
            (Stage::FirstFromFloor { .. }, _) => self.misused("found"),
        }
    }

    /// The source's first record from the offset [`Next::FirstSource`] asked for.
    pub(super) fn first(&mut self, first: Option<TailRecord>) -> Next {
        let State::Resolving {
            t,
            s,
            stage: Stage::FirstFromFloor { floor },
        } = mem::replace(&mut self.state, State::Done)
        else {
            return self.misused("first");
        };
        match first {
            Some(first) => self.resolve(
                t,
                s,
                Stage::CopiedAgainFromDeleted { floor },
                Search {
                    side: Side::Target,
                    wanted: first,
                    from: self.dst + 1,
                    until: self.target_end,
                    fetches: RECOPY_SEARCH_FETCHES,
                },
            ),
            None => self.further_on(t, s),
        }
    }

    /// What matching found; call once [`Next::Done`] was given.
    pub(super) fn finish(mut self) -> Outcome {
        let steps = self.pending.take(&mut self.matched);
        let extra = self.dst - self.dst_start - self.matched - self.orphans - self.gaps;
        Outcome {
            steps,
            src: self.src,
            dst: self.dst,
            matched: self.matched,
            gaps: self.gaps,
            orphans: self.orphans,
            extra,
            stopped_by: self.stopped_by,
        }
    }

    fn read_target(&mut self) -> Next {
        if self.dst >= self.target_end {
            return self.done();
        }
        self.progress = (self.src, self.dst);
        self.state = State::ReadingTarget;
        Next::ReadTarget(self.dst)
    }

    fn mismatch(&mut self, t: TailRecord, s: TailRecord) -> Next {
        if self.after_loss {
            let search = Search {
                side: Side::Target,
                wanted: s.clone(),
                from: self.dst,
                until: self.target_end,
                fetches: usize::MAX,
            };
            return self.resolve(t, s, Stage::PastOrphans, search);
        }
        let search = Search {
            side: Side::Source,
            wanted: t.clone(),
            from: self.pending.floor.unwrap_or(self.src),
            until: self.src,
            fetches: EXTRA_COPIES_SEARCH_FETCHES,
        };
        self.resolve(t, s, Stage::CopiedAgain, search)
    }

    fn further_on(&mut self, t: TailRecord, s: TailRecord) -> Next {
        let search = Search {
            side: Side::Target,
            wanted: s.clone(),
            from: self.dst + 1,
            until: self.target_end,
            fetches: EXTRA_COPIES_SEARCH_FETCHES,
        };
        self.resolve(t, s, Stage::FurtherOn, search)
    }

    fn resolve(&mut self, t: TailRecord, s: TailRecord, stage: Stage, search: Search) -> Next {
        self.state = State::Resolving { t, s, stage };
        Next::Search(search)
    }

    fn diverged(&mut self, t: &TailRecord, s: &TailRecord) -> Next {
        // A compacted source may have removed the record the target holds a copy of
        // (superseded by a later record with its key) since it was written; then it cannot be
        // matched, and is written again by nobody.
        let gone = if s.offset > self.src {
            format!(
                "; source offsets {}..{} are no longer on the source (compaction or \
                 retention), the target record may be a copy of one of them",
                self.src, s.offset
            )
        } else {
            String::new()
        };
        self.stop(format!(
            "target offset {} is not a copy of source offset {} ({} differ; target vs \
             source){gone}",
            t.offset,
            s.offset,
            t.differences(s)
        ))
    }

    fn stop(&mut self, why: String) -> Next {
        self.stopped_by = Some(why);
        self.done()
    }

    fn done(&mut self) -> Next {
        self.state = State::Done;
        Next::Done
    }

    /// An answer the matcher did not ask for: a bug in the caller, ended as a stop (nothing
    /// beyond is matched, so nothing is lost).
    fn misused(&mut self, what: &str) -> Next {
        debug_assert!(false, "Matcher::{what} called in state {:?}", self.state);
        self.stop(format!("recovery asked in the wrong order ({what})"))
    }
}

#[cfg(test)]
mod tests {
    //! The matcher run against partitions held in memory: a source of batches (records with
    //! compaction holes, markers and aborted transactions as skips) and a target of committed
    //! records with gaps, each read a few batches or records at a time, as a fetch would.

    use super::*;
    use bytes::Bytes;
    use proptest::prelude::*;

    /// A source batch.
    #[derive(Debug, Clone)]
    enum Batch {
        Records { records: Vec<TailRecord>, end: i64 },
        Skip { from: i64, to: i64 },
    }

    impl Batch {
        fn end(&self) -> i64 {
            match self {
                Batch::Records { end, .. } => *end,
                Batch::Skip { to, .. } => *to,
            }
        }
    }

    #[derive(Debug, Clone)]
    struct Source {
        batches: Vec<Batch>,
        /// Its log start: records before it are deleted.
        start: i64,
        /// Batches one read returns.
        per_read: usize,
    }

    #[derive(Debug, Clone)]
    struct Target {
        /// Its committed records, in offset order.
        records: Vec<TailRecord>,
        /// Its end: offsets without a record below it hold markers or aborted copies.
        end: i64,
        /// Its last stable offset: a transaction open from here is not read.
        stable: i64,
        /// Records one read returns.
        per_read: usize,
    }

    fn record(offset: i64, name: &str, time: i64) -> TailRecord {
        TailRecord {
            offset,
            timestamp: Some(time),
            key: Some(Bytes::from(format!("k-{name}"))),
            value: Some(Bytes::from(format!("v-{name}"))),
            headers: Vec::new(),
        }
    }

    impl Source {
        fn records(&self) -> impl Iterator<Item = &TailRecord> {
            self.batches.iter().flat_map(|b| match b {
                Batch::Records { records, .. } => records.as_slice(),
                Batch::Skip { .. } => &[],
            })
        }

        fn visible(&self) -> impl Iterator<Item = &TailRecord> {
            self.records().filter(|r| r.offset >= self.start)
        }

        fn read(&self, from: i64) -> SourceRead {
            let end = self.batches.last().map_or(0, Batch::end);
            if from < self.start || from > end {
                return SourceRead::StartsAt(self.start);
            }
            let mut items = Vec::new();
            for batch in self
                .batches
                .iter()
                .filter(|b| b.end() > from)
                .take(self.per_read)
            {
                match batch {
                    Batch::Skip { from, to } => items.push(SourceItem::Skip {
                        from: *from,
                        to: *to,
                    }),
                    Batch::Records { records, end } => {
                        items.extend(
                            records
                                .iter()
                                .filter(|r| r.offset >= from)
                                .cloned()
                                .map(SourceItem::Record),
                        );
                        items.push(SourceItem::BatchEnd(*end));
                    }
                }
            }
            SourceRead::Items(items)
        }
    }

    impl Target {
        fn visible(&self) -> impl Iterator<Item = &TailRecord> {
            self.records.iter().filter(|r| r.offset < self.stable)
        }

        fn read(&self, from: i64) -> TargetRead {
            let records: Vec<TailRecord> = self
                .visible()
                .filter(|r| r.offset >= from)
                .take(self.per_read)
                .cloned()
                .collect();
            let rest = self.visible().filter(|r| r.offset >= from).count();
            // A read that holds the rest of the committed records also passes over the markers
            // and aborted batches up to the last stable offset.
            let next = match records.last() {
                Some(last) if rest > records.len() => last.offset + 1,
                _ => self.stable.max(from),
            };
            TargetRead::Records { records, next }
        }
    }

    /// What a run of the matcher gave out.
    #[derive(Debug)]
    struct Run {
        outcome: Outcome,
        /// Every step, those given out with a loss included, in order.
        steps: Vec<Step>,
        lost: Vec<(i64, i64)>,
    }

    fn run(source: &Source, target: &Target, src: i64, dst: i64, after_loss: bool) -> Run {
        fn find<'a>(
            mut records: impl Iterator<Item = &'a TailRecord>,
            search: &Search,
        ) -> Option<i64> {
            records
                .find(|r| {
                    r.offset >= search.from
                        && r.offset < search.until
                        && r.same_record(&search.wanted)
                })
                .map(|r| r.offset)
        }
        let (mut matcher, mut next) = Matcher::start(src, dst, target.end, after_loss);
        let mut steps = Vec::new();
        let mut lost = Vec::new();
        for _ in 0..10_000 {
            next = match next {
                Next::ReadTarget(from) => matcher.target(target.read(from)),
                Next::ReadSource(from) => matcher.source(source.read(from)),
                Next::FirstSource(from) => matcher.first(
                    (from >= source.start)
                        .then(|| source.visible().find(|r| r.offset >= from).cloned())
                        .flatten(),
                ),
                Next::Search(search) => matcher.found(match search.side {
                    Side::Source => find(source.visible(), &search),
                    Side::Target => find(target.visible(), &search),
                }),
                Next::Lose {
                    steps: given,
                    from,
                    to,
                } => {
                    steps.extend(given);
                    lost.push((from, to));
                    matcher.lost()
                }
                Next::Done => {
                    let outcome = matcher.finish();
                    steps.extend(outcome.steps.iter().copied());
                    return Run {
                        outcome,
                        steps,
                        lost,
                    };
                }
            };
        }
        panic!("matching did not end: {matcher:?}");
    }

    /// What holds after any matching: every match pairs a source record with its copy, the
    /// steps go forward on both sides as the map needs, every source record before the resume
    /// point is matched or recorded lost (nothing skipped unsaid), and every target offset
    /// matching passed is accounted for.
    fn check(source: &Source, target: &Target, start: (i64, i64), run: &Run) {
        let o = &run.outcome;
        let mut covered = std::collections::BTreeSet::new();
        let (mut src_floor, mut dst_floor) = start;
        for step in &run.steps {
            match *step {
                Step::Match { src, dst, n } => {
                    assert!(n > 0 && src >= src_floor && dst >= dst_floor, "{run:?}");
                    for i in 0..n {
                        let s = source.visible().find(|r| r.offset == src + i);
                        let t = target.visible().find(|r| r.offset == dst + i);
                        match (s, t) {
                            (Some(s), Some(t)) => assert!(s.same_record(t), "{s:?} {t:?}"),
                            _ => panic!("match of {} to {} without both records", src + i, dst + i),
                        }
                        covered.insert(src + i);
                    }
                    (src_floor, dst_floor) = (src + n, dst + n);
                    assert!(dst_floor <= o.dst, "matched past where matching stood");
                }
                Step::Skip { from, to } => {
                    assert!(from >= src_floor && to > from, "{run:?}");
                    src_floor = to;
                }
            }
        }
        assert!(src_floor <= o.src, "a step past the resume point: {run:?}");
        for r in source
            .records()
            .filter(|r| r.offset >= start.0 && r.offset < o.src)
        {
            let lost = run.lost.iter().any(|&(f, t)| (f..t).contains(&r.offset));
            assert!(
                covered.contains(&r.offset) || lost,
                "source record {} before the resume point {} neither matched nor lost: {run:?}",
                r.offset,
                o.src
            );
        }
        assert!(o.dst >= start.1 && o.dst <= target.end, "{run:?}");
        assert!(o.extra >= 0, "more accounted for than passed: {run:?}");
        assert_eq!(
            o.dst - start.1,
            o.matched + o.gaps + o.orphans + o.extra,
            "{run:?}"
        );
        let matched: i64 = run
            .steps
            .iter()
            .map(|s| match s {
                Step::Match { n, .. } => *n,
                Step::Skip { .. } => 0,
            })
            .sum();
        assert_eq!(o.matched, matched);
    }

    /// A source of `n` records in batches of `sizes`, a skip batch of two offsets after every
    /// batch listed in `skips_after`, and a compaction hole before every record in `holes`.
    fn source(n: usize, sizes: &[usize], skips_after: &[usize], holes: &[usize]) -> Source {
        let mut batches = Vec::new();
        let mut offset = 0;
        let mut made = 0;
        for (i, &size) in sizes.iter().cycle().enumerate() {
            if made == n {
                break;
            }
            let mut records = Vec::new();
            for _ in 0..size.max(1).min(n - made) {
                if holes.contains(&made) {
                    offset += 1;
                }
                records.push(record(offset, &made.to_string(), 1_000 + made as i64));
                offset += 1;
                made += 1;
            }
            batches.push(Batch::Records {
                records,
                end: offset,
            });
            if skips_after.contains(&i) {
                batches.push(Batch::Skip {
                    from: offset,
                    to: offset + 2,
                });
                offset += 2;
            }
        }
        Source {
            batches,
            start: 0,
            per_read: 2,
        }
    }

    /// A target whose tail is copies of `copies` (indexes into the source's records), a gap of
    /// `gap` offsets before every copy listed in `gaps_before`.
    fn target(source: &Source, copies: &[usize], gaps_before: &[usize], gap: i64) -> Target {
        let originals: Vec<&TailRecord> = source.records().collect();
        let mut records = Vec::new();
        let mut offset = 0;
        for (i, &c) in copies.iter().enumerate() {
            if gaps_before.contains(&i) {
                offset += gap;
            }
            let mut copy = originals[c].clone();
            copy.offset = offset;
            records.push(copy);
            offset += 1;
        }
        Target {
            records,
            end: offset,
            stable: offset,
            per_read: 3,
        }
    }

    #[test]
    fn matched_the_whole_tail_is_recorded_and_resumes_after_it() {
        let s = source(10, &[3], &[], &[]);
        let t = target(&s, &[0, 1, 2, 3, 4, 5, 6], &[], 0);
        let r = run(&s, &t, 0, 0, false);
        check(&s, &t, (0, 0), &r);
        assert_eq!(
            r.steps,
            [Step::Match {
                src: 0,
                dst: 0,
                n: 7
            }]
        );
        assert_eq!((r.outcome.src, r.outcome.dst, r.outcome.extra), (7, 7, 0));
        assert_eq!(r.outcome.stopped_by, None);
    }

    #[test]
    fn aborted_source_transactions_and_markers_are_skipped_and_holes_passed_over() {
        // Batches of 2 with a skip after the first and second; a hole before record 3.
        let s = source(6, &[2], &[0, 1], &[3]);
        let t = target(&s, &[0, 1, 2, 3, 4, 5], &[], 0);
        let r = run(&s, &t, 0, 0, false);
        check(&s, &t, (0, 0), &r);
        assert!(r.steps.contains(&Step::Skip { from: 2, to: 4 }));
        assert_eq!(r.outcome.matched, 6);
        assert_eq!(r.outcome.src, s.batches.last().unwrap().end());
    }

    #[test]
    fn gaps_on_the_target_are_neither_matched_nor_extra() {
        // Aborted copies or markers of 3 offsets before the 2nd and 5th copy, and at its end.
        let s = source(6, &[2], &[], &[]);
        let mut t = target(&s, &[0, 1, 2, 3, 4, 5], &[1, 4], 3);
        t.end += 2;
        t.stable = t.end;
        let r = run(&s, &t, 0, 0, false);
        check(&s, &t, (0, 0), &r);
        assert_eq!((r.outcome.matched, r.outcome.gaps), (6, 8));
        assert_eq!((r.outcome.dst, r.outcome.extra), (t.end, 0));
        assert_eq!(r.outcome.stopped_by, None);
    }

    #[test]
    fn an_open_transaction_on_the_target_is_not_matched() {
        // Copies of records 4 and 5 in a transaction still open: beyond the last stable offset.
        let s = source(6, &[2], &[], &[]);
        let mut t = target(&s, &[0, 1, 2, 3, 4, 5], &[], 0);
        t.stable = 4;
        let r = run(&s, &t, 0, 0, false);
        check(&s, &t, (0, 0), &r);
        assert_eq!((r.outcome.matched, r.outcome.src), (4, 4));
        assert!(r
            .outcome
            .stopped_by
            .unwrap()
            .contains("no committed records from offset 4"));
    }

    #[test]
    fn diverged_matching_stops_and_the_rest_is_written_again() {
        let s = source(6, &[3], &[], &[]);
        let mut t = target(&s, &[0, 1, 2, 3, 4], &[], 0);
        t.records[3] = record(3, "someone else's", 5);
        let r = run(&s, &t, 0, 0, false);
        check(&s, &t, (0, 0), &r);
        assert_eq!((r.outcome.matched, r.outcome.src, r.outcome.dst), (3, 3, 3));
        let why = r.outcome.stopped_by.unwrap();
        assert!(
            why.contains("target offset 3 is not a copy of source offset 3"),
            "{why}"
        );
    }

    #[test]
    fn end_of_data_on_the_source_stops_matching() {
        // The target holds one more record than the source ever had.
        let s = source(4, &[2], &[], &[]);
        let mut t = target(&s, &[0, 1, 2, 3], &[], 0);
        t.records.push(record(4, "extra", 2_000));
        t.end = 5;
        t.stable = 5;
        let r = run(&s, &t, 0, 0, false);
        check(&s, &t, (0, 0), &r);
        assert_eq!((r.outcome.matched, r.outcome.src), (4, 4));
        assert!(r
            .outcome
            .stopped_by
            .unwrap()
            .contains("the source has no records"));
    }

    #[test]
    fn records_copied_twice_are_matched_to_their_later_copies() {
        // MirrorMaker 2 copied 0..4, restarted from 2, and copied 2..6.
        let s = source(6, &[2], &[], &[]);
        let t = target(&s, &[0, 1, 2, 3, 2, 3, 4, 5], &[], 0);
        let r = run(&s, &t, 0, 0, false);
        check(&s, &t, (0, 0), &r);
        assert_eq!(
            r.steps,
            [
                Step::Match {
                    src: 0,
                    dst: 0,
                    n: 2
                },
                Step::Match {
                    src: 2,
                    dst: 4,
                    n: 4
                }
            ]
        );
        assert_eq!((r.outcome.extra, r.outcome.src), (2, 6));
    }

    #[test]
    fn a_copy_of_a_record_the_source_compacted_away_is_extra() {
        // Copied 0..4; since then compaction removed record 2 from the source.
        let mut s = source(4, &[4], &[], &[]);
        let t = target(&s, &[0, 1, 2, 3], &[], 0);
        let Batch::Records { records, .. } = &mut s.batches[0] else {
            unreachable!()
        };
        records.remove(2);
        let r = run(&s, &t, 0, 0, false);
        check(&s, &t, (0, 0), &r);
        assert_eq!(
            r.steps,
            [
                Step::Match {
                    src: 0,
                    dst: 0,
                    n: 2
                },
                Step::Match {
                    src: 3,
                    dst: 3,
                    n: 1
                }
            ]
        );
        assert_eq!((r.outcome.extra, r.outcome.src), (1, 4));
        assert_eq!(r.outcome.stopped_by, None);
    }

    #[test]
    fn records_the_source_deleted_are_lost_and_their_copies_kept() {
        // The source deleted records 0..3; the target holds copies of 0..5.
        let mut s = source(6, &[1], &[], &[]);
        s.start = 3;
        let t = target(&s, &[0, 1, 2, 3, 4, 5], &[], 0);
        let r = run(&s, &t, 0, 0, false);
        check(&s, &t, (0, 0), &r);
        assert_eq!(r.lost, [(0, 3)]);
        assert_eq!(
            r.steps,
            [Step::Match {
                src: 3,
                dst: 3,
                n: 3
            }]
        );
        assert_eq!((r.outcome.orphans, r.outcome.extra), (3, 0));
    }

    #[test]
    fn a_target_deleted_while_matched_stops_matching() {
        let s = source(4, &[2], &[], &[]);
        let t = target(&s, &[0, 1, 2, 3], &[], 0);
        let (mut matcher, next) = Matcher::start(0, 0, t.end, false);
        assert!(matches!(next, Next::ReadTarget(0)));
        assert!(matches!(matcher.target(TargetRead::Deleted), Next::Done));
        let outcome = matcher.finish();
        assert_eq!((outcome.src, outcome.matched), (0, 0));
        assert!(outcome.stopped_by.unwrap().contains("deleted its records"));
    }

    /// A tail made by a mirror of `source`: what it copied, in order, with its slips.
    #[derive(Debug, Clone)]
    enum Slip {
        /// Copies of the next `n` records.
        Copy(usize),
        /// A restart: copies again from `back` records before.
        Again(usize),
        /// Offsets holding no committed record (markers, aborted copies).
        Gap(i64),
        /// A record that is no copy.
        Foreign,
    }

    fn slip() -> impl Strategy<Value = Slip> {
        prop_oneof![
            4 => (1usize..6).prop_map(Slip::Copy),
            1 => (1usize..4).prop_map(Slip::Again),
            1 => (1i64..4).prop_map(Slip::Gap),
            1 => Just(Slip::Foreign),
        ]
    }

    fn made_by(source: &Source, slips: &[Slip], open: i64, per_read: usize) -> Target {
        let originals: Vec<&TailRecord> = source.records().collect();
        let (mut records, mut offset, mut next) = (Vec::new(), 0, 0usize);
        for slip in slips {
            match slip {
                Slip::Copy(n) => {
                    for _ in 0..*n {
                        let Some(original) = originals.get(next) else {
                            break;
                        };
                        let mut copy = (*original).clone();
                        copy.offset = offset;
                        records.push(copy);
                        (offset, next) = (offset + 1, next + 1);
                    }
                }
                Slip::Again(back) => next = next.saturating_sub(*back),
                Slip::Gap(n) => offset += n,
                Slip::Foreign => {
                    records.push(record(offset, &format!("foreign {offset}"), 1_000 + offset));
                    offset += 1;
                }
            }
        }
        let stable = (offset - open).max(0);
        Target {
            records,
            end: offset,
            stable,
            per_read,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// A tail of exact copies, whatever the batches, skips, holes, gaps and read sizes:
        /// every copy is matched, none is extra, and matching never stops early.
        #[test]
        fn exact_copies_are_all_matched(
            n in 1usize..40,
            sizes in prop::collection::vec(1usize..5, 1..4),
            skips in prop::collection::vec(0usize..12, 0..4),
            holes in prop::collection::vec(0usize..40, 0..4),
            copied in 0usize..40,
            gaps in prop::collection::vec(0usize..40, 0..4),
            reads in (1usize..4, 1usize..6),
        ) {
            let mut s = source(n, &sizes, &skips, &holes);
            s.per_read = reads.0;
            let copies: Vec<usize> = (0..copied.min(n)).collect();
            let mut t = target(&s, &copies, &gaps, 2);
            t.per_read = reads.1;
            let r = run(&s, &t, 0, 0, false);
            check(&s, &t, (0, 0), &r);
            prop_assert_eq!(r.outcome.matched, copies.len() as i64);
            prop_assert_eq!(r.outcome.extra, 0);
            prop_assert_eq!(r.outcome.dst, t.end);
            prop_assert_eq!(r.outcome.stopped_by, None);
        }

        /// Any tail an earlier mirror can leave (restarts, gaps, foreign records, an open
        /// transaction at its end), on a source that may have deleted its oldest records:
        /// nothing is lost unsaid, every match is a copy, every target offset is accounted for.
        #[test]
        fn any_tail_loses_nothing_unsaid(
            n in 1usize..30,
            sizes in prop::collection::vec(1usize..5, 1..4),
            skips in prop::collection::vec(0usize..10, 0..3),
            holes in prop::collection::vec(0usize..30, 0..3),
            slips in prop::collection::vec(slip(), 0..10),
            open in 0i64..3,
            deleted in 0usize..6,
            reads in (1usize..4, 1usize..6),
        ) {
            let mut s = source(n, &sizes, &skips, &holes);
            s.per_read = reads.0;
            let start = s.records().nth(deleted).map_or(0, |r| r.offset);
            s.start = start;
            let t = made_by(&s, &slips, open, reads.1);
            let r = run(&s, &t, 0, 0, false);
            check(&s, &t, (0, 0), &r);
        }
    }
}
