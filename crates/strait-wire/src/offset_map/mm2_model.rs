//! A model of MirrorMaker 2's offset translation (`docs/mm2-behaviour.md` §1.2, §2.1-2.2), to
//! compare strait's exact map against in tests and benchmarks.
//!
//! Three parts, each written from MM2's documented behaviour (apache/kafka `connect/mirror`,
//! 3.6+ with KAFKA-14666, KAFKA-15202, KAFKA-15906):
//!
//! - [`SyncEmitter`]: `OffsetSyncWriter.PartitionState`, which decides per mirrored record
//!   whether an offset sync is sent now: the first record of a task's lifetime, a target offset
//!   `offset.lag.max` or more past the last sync's `+1` translation, an upstream gap, or a
//!   downstream truncation. Otherwise the sync is held back until the next commit
//!   (`offset.flush.interval.ms`).
//! - [`SyncStore`]: `OffsetSyncStore`, 64 syncs per partition spaced roughly exponentially back
//!   from the latest, kept under invariants A-D by a linear-time update, and
//!   `translateDownstream` with its "+1 rule".
//! - [`Mm2Model`]: both wired together as in one MM2 flow, per source partition.
//!
//! The model is MM2's *best case*: every sync reaches the store at once (no send queue, no
//! in-flight limit, no reading lag), and the store never restarts (a restart reloads only what
//! compaction left of the syncs topic, often one sync per partition). Real MM2 can only be
//! further behind. [`compare`] counts, over a set of consumer positions, how far behind strait's
//! exact translation it is.
use super::{PartitionMap, Translation};

/// Syncs kept per partition by [`SyncStore`] (`OffsetSyncStore.SYNCS_PER_PARTITION`, one per bit
/// of an offset).
pub const SYNCS_PER_PARTITION: usize = 64;

/// MM2's default `offset.lag.max`, in records.
pub const DEFAULT_OFFSET_LAG_MAX: i64 = 100;

/// One offset sync held by a [`SyncStore`]: source record `upstream` is target record
/// `downstream`.
///
/// MM2 compares syncs by object identity, so each sync applied to a store gets a sequence number
/// and two syncs are equal only if they are the same application, even with equal offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mm2Sync {
    /// Source offset of the synced record.
    pub upstream: i64,
    /// Target offset of the synced record.
    pub downstream: i64,
    sequence: u64,
}

impl Mm2Sync {
    /// The order in which the store received this sync (0 for the first).
    pub fn sequence(&self) -> u64 {
        self.sequence
    }
}

/// `OffsetSyncWriter.PartitionState`: whether a mirrored record's sync is sent at once.
///
/// Arithmetic wraps, like Java's `long`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncEmitter {
    previous_upstream: i64,
    previous_downstream: i64,
    last_sync_downstream: i64,
    offset_lag_max: i64,
}

impl SyncEmitter {
    /// The state at the start of a source task's lifetime.
    pub fn new(offset_lag_max: i64) -> Self {
        Self {
            previous_upstream: -1,
            previous_downstream: -1,
            last_sync_downstream: -1,
            offset_lag_max,
        }
    }

    /// Notes that source record `upstream` was acknowledged at target offset `downstream`, and
    /// says whether its sync is sent now (`true`) or held back until the next commit.
    pub fn update(&mut self, upstream: i64, downstream: i64) -> bool {
        let first_this_lifetime = self.last_sync_downstream == -1;
        // translateDownstream places a group one past the last sync, hence the +1.
        let translation_too_stale = downstream
            .wrapping_sub(self.last_sync_downstream.wrapping_add(1))
            >= self.offset_lag_max;
        let upstream_gap = upstream.wrapping_sub(self.previous_upstream) != 1;
        let downstream_truncated = downstream < self.previous_downstream;
        let now =
            first_this_lifetime || translation_too_stale || upstream_gap || downstream_truncated;
        if now {
            self.last_sync_downstream = downstream;
        }
        self.previous_upstream = upstream;
        self.previous_downstream = downstream;
        now
    }
}

/// What MM2's `translateDownstream` answers for a consumer position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mm2Translation {
    /// The store has not finished its initial read of the syncs topic: no checkpoint.
    NotReady,
    /// No sync for this partition: no checkpoint.
    NoSync,
    /// The position is before every retained sync (MM2 returns -1 and the checkpoint task drops
    /// it: "too far in the past to translate accurately").
    TooFarBehind,
    /// The target position MM2 checkpoints.
    Translated(i64),
}

impl Mm2Translation {
    /// The target position, if MM2 gives one.
    pub fn target(&self) -> Option<i64> {
        match *self {
            Self::Translated(target) => Some(target),
            _ => None,
        }
    }
}

/// `OffsetSyncStore` for one source partition: the retained syncs and `translateDownstream`.
///
/// Invariants over `syncs[0..64]`, for `i < j` and distinct syncs (`docs/mm2-behaviour.md` §2.1):
/// A `syncs[0]` is the latest sync; B `syncs[i].upstream <= syncs[j].upstream + 2^j - 2^i`;
/// C `syncs[i].upstream >= syncs[j].upstream + 2^max(i-2, 0)`; D `syncs[63]` is the oldest
/// sync still usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncStore {
    syncs: Option<[Mm2Sync; SYNCS_PER_PARTITION]>,
    read_to_end: bool,
    next_sequence: u64,
}

impl Default for SyncStore {
    fn default() -> Self {
        Self::new()
    }
}

impl SyncStore {
    /// A store whose initial read of the syncs topic is done (after `OffsetSyncStore.start()`).
    pub fn new() -> Self {
        Self {
            syncs: None,
            read_to_end: true,
            next_sequence: 0,
        }
    }

    /// A store still doing its initial read: each sync replaces all the others, and nothing
    /// translates until [`finish_loading`](Self::finish_loading).
    pub fn loading() -> Self {
        Self {
            read_to_end: false,
            ..Self::new()
        }
    }

    /// Ends the initial read.
    pub fn finish_loading(&mut self) {
        self.read_to_end = true;
    }

    /// The retained syncs, latest first, or `None` before the first sync.
    pub fn syncs(&self) -> Option<&[Mm2Sync; SYNCS_PER_PARTITION]> {
        self.syncs.as_ref()
    }

    /// Applies one sync read from the syncs topic.
    pub fn apply(&mut self, upstream: i64, downstream: i64) {
        let sync = Mm2Sync {
            upstream,
            downstream,
            sequence: self.next_sequence,
        };
        self.next_sequence += 1;
        let syncs = match &mut self.syncs {
            Some(syncs) if self.read_to_end && syncs[0].upstream <= upstream => syncs,
            // First sync, initial read, or an upstream rewind (older syncs are invalid): this
            // sync fills every slot, which satisfies B and C trivially.
            _ => {
                self.syncs = Some([sync; SYNCS_PER_PARTITION]);
                return;
            }
        };
        update_syncs(syncs, sync);
    }

    /// `translateDownstream`: the latest retained sync at or before `position`, then the
    /// "+1 rule": its target offset if the position is exactly at it, else one past it (MM2
    /// cannot know how many records between the sync and the position were mirrored).
    pub fn translate_downstream(&self, position: i64) -> Mm2Translation {
        if !self.read_to_end {
            return Mm2Translation::NotReady;
        }
        let Some(syncs) = &self.syncs else {
            return Mm2Translation::NoSync;
        };
        let sync = syncs
            .iter()
            .find(|s| s.upstream <= position)
            .unwrap_or(&syncs[SYNCS_PER_PARTITION - 1]);
        if sync.upstream > position {
            Mm2Translation::TooFarBehind
        } else if sync.upstream == position {
            Mm2Translation::Translated(sync.downstream)
        } else {
            Mm2Translation::Translated(sync.downstream.wrapping_add(1))
        }
    }
}

/// `2^k` as a Java `long`: `1L << k`, negative for `k = 63`.
fn pow2(k: usize) -> i64 {
    // k < 64 here, so the shift amount fits and only the sign wraps.
    1i64.wrapping_shl(k as u32)
}

/// Invariant B for `syncs[i] = a`, `syncs[j] = b`, `i < j`: `a` is recent enough relative to `b`.
/// A bound that overflows to negative means "no bound", as in MM2.
fn invariant_b(a: Mm2Sync, b: Mm2Sync, i: usize, j: usize) -> bool {
    let bound = b.upstream.wrapping_add(pow2(j)).wrapping_sub(pow2(i));
    a == b || bound < 0 || a.upstream <= bound
}

/// Invariant C for `syncs[i] = a` and the sync `b` after it: `a` is far enough ahead of `b`.
fn invariant_c(a: Mm2Sync, b: Mm2Sync, i: usize) -> bool {
    let bound = b.upstream.wrapping_add(pow2(i.saturating_sub(2)));
    a == b || (bound >= 0 && a.upstream >= bound)
}

/// Puts `sync` at slot 0 and repairs invariant B slot by slot, preferring to keep an older sync
/// from the previous array when it satisfies B and C where it lands, so that more distinct syncs
/// survive. Stops at the first slot that still satisfies B: the rest then satisfy it too.
fn update_syncs(syncs: &mut [Mm2Sync; SYNCS_PER_PARTITION], sync: Mm2Sync) {
    let original = *syncs;
    let mut replacement = sync;
    // Next slot of `original` that may be promoted; never passes `current`.
    let mut candidate = 0;
    syncs[0] = sync;
    for current in 1..SYNCS_PER_PARTITION {
        let previous = current - 1;
        loop {
            let old = original[candidate];
            let recent_enough = invariant_b(syncs[previous], old, previous, current);
            let apart_from_previous = invariant_c(syncs[previous], old, previous);
            let apart_from_next =
                current + 1 >= SYNCS_PER_PARTITION || invariant_c(old, syncs[current + 1], current);
            let duplicate = original.get(candidate + 1) == Some(&old);
            let promote = recent_enough && apart_from_previous && apart_from_next;
            if promote {
                replacement = old;
            }
            // Too close to the previous slot now means too close at every later slot too.
            let skip = duplicate || !apart_from_previous;
            if promote || skip {
                candidate += 1;
            }
            if !(skip && candidate < current) {
                break;
            }
        }
        if invariant_b(syncs[previous], syncs[current], previous, current) {
            break;
        }
        syncs[current] = replacement;
    }
}

/// MM2's translation for one source partition: a [`SyncEmitter`] feeding a [`SyncStore`], in
/// MM2's best case (see the module docs).
///
/// ```
/// use strait_wire::offset_map::mm2_model::{Mm2Model, Mm2Translation};
///
/// let mut mm2 = Mm2Model::new(100);
/// mm2.record_batch(0, 0, 1000); // records 0..1000 at 0..1000: syncs at 0, 101, 202, ...
/// assert_eq!(mm2.translate(0), Mm2Translation::Translated(0));
/// assert_eq!(mm2.translate(500), Mm2Translation::Translated(405)); // sync 404 -> 404, +1
/// mm2.commit(); // the periodic commit sends the held-back sync 999 -> 999
/// assert_eq!(mm2.translate(1000), Mm2Translation::Translated(1000));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mm2Model {
    emitter: SyncEmitter,
    store: SyncStore,
    offset_lag_max: i64,
    delayed: Option<(i64, i64)>,
    syncs_sent: u64,
}

impl Mm2Model {
    /// A model with `offset.lag.max` = `offset_lag_max` ([`DEFAULT_OFFSET_LAG_MAX`] by default
    /// in MM2), its store already read to the end.
    pub fn new(offset_lag_max: i64) -> Self {
        Self {
            emitter: SyncEmitter::new(offset_lag_max),
            store: SyncStore::new(),
            offset_lag_max,
            delayed: None,
            syncs_sent: 0,
        }
    }

    /// `commitRecord`: source record `upstream` was acknowledged at target offset `downstream`.
    pub fn record(&mut self, upstream: i64, downstream: i64) {
        if self.emitter.update(upstream, downstream) {
            self.delayed = None;
            self.send(upstream, downstream);
        } else {
            self.delayed = Some((upstream, downstream));
        }
    }

    /// [`record`](Self::record) for each record of a dense batch: `src_base + i` at
    /// `dst_base + i`, `0 <= i < n`.
    pub fn record_batch(&mut self, src_base: i64, dst_base: i64, n: i64) {
        for i in 0..n.max(0) {
            self.record(src_base.wrapping_add(i), dst_base.wrapping_add(i));
        }
    }

    /// `SourceTask.commit()` (every `offset.flush.interval.ms`): the held-back sync is sent.
    pub fn commit(&mut self) {
        if let Some((upstream, downstream)) = self.delayed.take() {
            self.send(upstream, downstream);
        }
    }

    /// A new source task lifetime (restart, rebalance): the emitter starts over and a held-back
    /// sync is lost. The store is unaffected.
    pub fn restart_task(&mut self) {
        self.emitter = SyncEmitter::new(self.offset_lag_max);
        self.delayed = None;
    }

    fn send(&mut self, upstream: i64, downstream: i64) {
        self.syncs_sent += 1;
        self.store.apply(upstream, downstream);
    }

    /// What MM2 would checkpoint for a consumer at source position `position`.
    pub fn translate(&self, position: i64) -> Mm2Translation {
        self.store.translate_downstream(position)
    }

    /// The sync store.
    pub fn store(&self) -> &SyncStore {
        &self.store
    }

    /// Offset syncs sent so far.
    pub fn syncs_sent(&self) -> u64 {
        self.syncs_sent
    }
}

/// How MM2's translations compare with strait's over a set of consumer positions
/// ([`compare`]). Counts are positions; `redelivered` sums target offsets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Positions compared.
    pub positions: u64,
    /// Positions where strait has no target either (nothing mirrored); not compared further.
    pub strait_unmapped: u64,
    /// Positions where MM2 gives no checkpoint at all (no sync, or too far behind).
    pub mm2_untranslated: u64,
    /// Positions where MM2 gives strait's target.
    pub equal: u64,
    /// Positions where MM2 gives an earlier target: a consumer failing over re-reads records.
    pub behind: u64,
    /// Target offsets re-read, summed over the `behind` positions.
    pub redelivered: i64,
    /// The most target offsets re-read at one position.
    pub max_redelivered: i64,
    /// Positions where MM2 gives a *later* target than strait: a consumer would skip records.
    /// MM2's translation is conservative, so this stays 0 unless one of the two is wrong.
    pub ahead: u64,
}

impl Comparison {
    /// Adds one position's translations.
    pub fn add(&mut self, strait: Translation, mm2: Mm2Translation) {
        self.positions += 1;
        let Some(exact) = strait.target() else {
            self.strait_unmapped += 1;
            return;
        };
        let Some(theirs) = mm2.target() else {
            self.mm2_untranslated += 1;
            return;
        };
        match theirs.cmp(&exact) {
            std::cmp::Ordering::Equal => self.equal += 1,
            std::cmp::Ordering::Less => {
                let extra = exact.saturating_sub(theirs);
                self.behind += 1;
                self.redelivered = self.redelivered.saturating_add(extra);
                self.max_redelivered = self.max_redelivered.max(extra);
            }
            std::cmp::Ordering::Greater => self.ahead += 1,
        }
    }
}

/// Translates each position with strait's map and with the MM2 model, and compares.
pub fn compare(
    map: &PartitionMap,
    mm2: &Mm2Model,
    positions: impl IntoIterator<Item = i64>,
) -> Comparison {
    let mut out = Comparison::default();
    for p in positions {
        out.add(map.translate(p), mm2.translate(p));
    }
    out
}
