//! The model of MM2's translation (`docs/mm2-behaviour.md` §1.2, §2.1-2.2), and how it compares with
//! strait's exact map: MM2 may place a consumer earlier (re-delivery), never later.
use proptest::prelude::*;
use strait_wire::offset_map::mm2_model::{
    compare, Comparison, Mm2Model, Mm2Sync, Mm2Translation, SyncEmitter, SyncStore,
    DEFAULT_OFFSET_LAG_MAX, SYNCS_PER_PARTITION,
};
use strait_wire::offset_map::{PartitionMap, Translation};

use Mm2Translation::{NoSync, NotReady, TooFarBehind, Translated};

#[test]
fn emitter_sends_the_first_sync_of_a_lifetime() {
    let mut e = SyncEmitter::new(100);
    assert!(e.update(500, 0));
    assert!(!e.update(501, 1));
}

#[test]
fn emitter_sends_when_the_translation_would_be_offset_lag_max_stale() {
    let mut e = SyncEmitter::new(100);
    assert!(e.update(0, 0));
    // Last sync at 0 translates a group past it to 1; stale once 100 behind that.
    for o in 1..101 {
        assert!(!e.update(o, o), "offset {o}");
    }
    assert!(e.update(101, 101));
    for o in 102..202 {
        assert!(!e.update(o, o), "offset {o}");
    }
    assert!(e.update(202, 202));
}

#[test]
fn emitter_sends_on_an_upstream_gap_or_a_downstream_truncation() {
    let mut e = SyncEmitter::new(100);
    assert!(e.update(0, 0));
    assert!(!e.update(1, 1));
    assert!(e.update(3, 2), "upstream gap (a marker at 2)");
    assert!(!e.update(4, 3));
    assert!(e.update(5, 1), "downstream went backwards");
    assert!(!e.update(6, 2));
}

#[test]
fn store_translation_rules() {
    let mut store = SyncStore::new();
    assert_eq!(store.translate_downstream(5), NoSync);
    store.apply(100, 90);
    assert_eq!(store.translate_downstream(99), TooFarBehind);
    assert_eq!(store.translate_downstream(100), Translated(90));
    // The "+1 rule": one past the sync, however far past.
    assert_eq!(store.translate_downstream(101), Translated(91));
    assert_eq!(store.translate_downstream(5000), Translated(91));
    store.apply(200, 150);
    assert_eq!(store.translate_downstream(150), Translated(91));
    assert_eq!(store.translate_downstream(200), Translated(150));
    assert_eq!(TooFarBehind.target(), None);
    assert_eq!(Translated(3).target(), Some(3));
}

#[test]
fn store_refuses_until_the_initial_read_is_done_and_keeps_only_its_last_sync() {
    let mut store = SyncStore::loading();
    store.apply(100, 100);
    store.apply(200, 200);
    assert_eq!(store.translate_downstream(150), NotReady);
    store.finish_loading();
    // Every sync read during the initial read replaced all the others.
    assert_eq!(store.translate_downstream(150), TooFarBehind);
    assert_eq!(store.translate_downstream(250), Translated(201));
}

#[test]
fn an_upstream_rewind_clears_the_store() {
    let mut store = SyncStore::new();
    store.apply(100, 100);
    store.apply(200, 200);
    assert_eq!(store.translate_downstream(150), Translated(101));
    store.apply(50, 300);
    assert_eq!(store.translate_downstream(150), Translated(301));
    assert_eq!(store.translate_downstream(49), TooFarBehind);
    let syncs = store.syncs().unwrap();
    assert!(syncs.iter().all(|s| s.upstream == 50));
}

#[test]
fn model_holds_back_syncs_until_commit() {
    let mut mm2 = Mm2Model::new(DEFAULT_OFFSET_LAG_MAX);
    mm2.record_batch(0, 0, 10);
    assert_eq!(mm2.syncs_sent(), 1);
    // A caught-up consumer at 10 is placed at 1: nine records again after a failover.
    assert_eq!(mm2.translate(10), Translated(1));
    mm2.commit();
    assert_eq!(mm2.syncs_sent(), 2);
    assert_eq!(mm2.translate(10), Translated(10));
    // Nothing held back: commit sends nothing.
    mm2.commit();
    assert_eq!(mm2.syncs_sent(), 2);
}

#[test]
fn a_task_restart_loses_the_held_back_sync_and_syncs_at_once() {
    let mut mm2 = Mm2Model::new(100);
    mm2.record_batch(0, 0, 10);
    mm2.restart_task();
    mm2.commit();
    assert_eq!(mm2.syncs_sent(), 1);
    mm2.record(10, 10);
    assert_eq!(mm2.syncs_sent(), 2);
    assert_eq!(mm2.translate(10), Translated(10));
}

/// The worked example of `docs/offset-map.md`, as MM2 would translate it.
#[test]
fn worked_example_against_mm2() {
    let mut map = PartitionMap::new();
    let mut mm2 = Mm2Model::new(DEFAULT_OFFSET_LAG_MAX);
    for (src, dst, n) in [(1000, 0, 5), (1006, 5, 4), (1013, 9, 3)] {
        map.record(src, dst, n).unwrap();
        mm2.record_batch(src, dst, n);
    }
    map.record_skipped(1016, 1017).unwrap();
    // Syncs at 1000 (first), 1006 and 1013 (upstream gaps); 1015 held back.
    assert_eq!(mm2.syncs_sent(), 3);
    let rows = [
        (998, None, Some(0)),
        (1000, Some(0), Some(0)),
        (1003, Some(1), Some(3)),
        (1005, Some(1), Some(5)),
        (1006, Some(5), Some(5)),
        (1009, Some(6), Some(8)),
        (1010, Some(6), Some(9)),
        (1013, Some(9), Some(9)),
        (1016, Some(10), Some(12)),
        (1017, Some(10), Some(12)),
        (1020, Some(10), Some(12)),
    ];
    for (p, theirs, ours) in rows {
        assert_eq!(mm2.translate(p).target(), theirs, "MM2 at {p}");
        assert_eq!(map.translate(p).target(), ours, "strait at {p}");
    }
    mm2.commit(); // sync 1015 -> 11
    assert_eq!(mm2.translate(1017), Translated(12));

    let c = compare(&map, &mm2, 998..=1017);
    assert_eq!(c.positions, 20);
    assert_eq!(c.mm2_untranslated, 2);
    assert_eq!(c.ahead, 0);
    assert_eq!(c.equal + c.behind, 18);
    assert!(c.behind > 0);
}

/// A dense topic of 10 000 records and consumers lagging at every position: the error grows
/// with the lag, and is zero only at syncs.
#[test]
fn lagging_consumers_on_a_dense_topic() {
    let mut map = PartitionMap::new();
    let mut mm2 = Mm2Model::new(DEFAULT_OFFSET_LAG_MAX);
    for batch in 0..100 {
        map.record(batch * 100, batch * 100, 100).unwrap();
        mm2.record_batch(batch * 100, batch * 100, 100);
    }
    mm2.commit();
    // The figures quoted in `docs/offset-map.md`.
    let distinct: Vec<i64> = {
        let mut v: Vec<i64> = mm2
            .store()
            .syncs()
            .unwrap()
            .iter()
            .map(|s| s.upstream)
            .collect();
        v.dedup();
        v
    };
    assert_eq!(distinct, [9999, 9898, 9696, 9292, 8888, 8080, 6464, 0]);
    for (p, theirs) in [(9950, 9899), (9500, 9293), (8750, 8081), (1, 1), (6463, 1)] {
        assert_eq!(mm2.translate(p), Translated(theirs));
    }
    let c = compare(&map, &mm2, 0..=10_000);
    assert_eq!(c.positions, 10_001);
    assert_eq!(c.equal, 16);
    assert_eq!(c.redelivered / 10_001, 2269);
    assert_eq!(c.ahead, 0);
    assert_eq!(c.strait_unmapped, 0);
    assert_eq!(c.mm2_untranslated, 0);
    assert!(c.equal > 0 && c.behind > c.equal);
    // Near the head, within offset.lag.max; far behind, much worse.
    let near = compare(&map, &mm2, 9_900..=10_000);
    assert!(near.max_redelivered <= DEFAULT_OFFSET_LAG_MAX);
    assert!(c.max_redelivered > 10 * DEFAULT_OFFSET_LAG_MAX);
}

#[test]
fn comparison_counts() {
    let mut c = Comparison::default();
    c.add(Translation::Unmapped, Translated(1));
    c.add(Translation::Exact { target: 5 }, NoSync);
    c.add(Translation::Exact { target: 5 }, Translated(5));
    c.add(Translation::Exact { target: 5 }, Translated(2));
    c.add(Translation::Exact { target: 9 }, Translated(8));
    c.add(Translation::Exact { target: 5 }, Translated(6));
    assert_eq!(
        c,
        Comparison {
            positions: 6,
            strait_unmapped: 1,
            mm2_untranslated: 1,
            equal: 1,
            behind: 2,
            redelivered: 4,
            max_redelivered: 3,
            ahead: 1,
        }
    );
}

/// The spacing MM2's own test suite documents for syncs every 10 offsets, 0 to 1000 read at
/// start-up and 1010 to 10000 after: the retained syncs near 10000 are 10 apart, further back
/// 30, 60, 240, 480, 1920, and the last start-up sync (1000) is kept as the oldest.
#[test]
fn retained_syncs_match_mm2_for_evenly_spaced_syncs() {
    let mut store = SyncStore::loading();
    let mut offset = 0;
    while offset <= 1000 {
        store.apply(offset, offset);
        offset += 10;
    }
    store.finish_loading();
    while offset <= 10_000 {
        store.apply(offset, offset);
        check_invariants(store.syncs().unwrap(), (offset, offset));
        offset += 10;
    }
    let retained = [
        1000, 4840, 6760, 8680, 9160, 9640, 9880, 9940, 9970, 9990, 10_000,
    ];
    assert_eq!(store.translate_downstream(999), TooFarBehind);
    for pair in retained.windows(2) {
        let (previous, sync) = (pair[0], pair[1]);
        assert_eq!(
            store.translate_downstream(sync - 1),
            Translated(previous + 1)
        );
        assert_eq!(store.translate_downstream(sync), Translated(sync));
        assert_eq!(store.translate_downstream(sync + 1), Translated(sync + 1));
        assert_eq!(store.translate_downstream(sync + 2), Translated(sync + 1));
    }
    let mut distinct: Vec<i64> = store.syncs().unwrap().iter().map(|s| s.upstream).collect();
    distinct.dedup();
    distinct.reverse();
    assert_eq!(distinct, retained);
}

/// Each new sync expires at most one other distinct sync, and the first sync stays the oldest
/// (invariant D), whatever the spacing.
#[test]
fn a_new_sync_expires_at_most_one_other() {
    let distinct = |store: &SyncStore| {
        let syncs = store.syncs().unwrap();
        1 + syncs.windows(2).filter(|w| w[0] != w[1]).count()
    };
    let mut step = 1i64;
    while step < i64::MAX / 5_000 {
        let mut store = SyncStore::new();
        let mut last = 1;
        for k in 0..5_000i64 {
            store.apply(k * step, k * step);
            let syncs = store.syncs().unwrap();
            assert_eq!(syncs[0].upstream, k * step);
            assert_eq!(syncs[SYNCS_PER_PARTITION - 1].upstream, 0);
            let count = distinct(&store);
            assert!(count + 1 >= last, "step {step}: {last} -> {count} at {k}");
            last = count;
        }
        step = step * 8 + 1;
    }
}

/// Checks invariants A-D of `OffsetSyncStore` over every pair of slots.
fn check_invariants(syncs: &[Mm2Sync; SYNCS_PER_PARTITION], latest: (i64, i64)) {
    check_pairs(syncs, latest, SYNCS_PER_PARTITION);
}

/// Checks invariants A-D over pairs of slots at most `reach` apart (1: adjacent slots only,
/// which MM2 notes is enough for them to hold globally).
fn check_pairs(syncs: &[Mm2Sync; SYNCS_PER_PARTITION], latest: (i64, i64), reach: usize) {
    assert_eq!((syncs[0].upstream, syncs[0].downstream), latest, "A");
    for i in 0..SYNCS_PER_PARTITION {
        for j in i + 1..SYNCS_PER_PARTITION.min(i + 1 + reach) {
            let (a, b) = (syncs[i], syncs[j]);
            assert!(a.sequence() >= b.sequence(), "newer syncs first");
            assert!(
                a.upstream >= b.upstream,
                "D: upstream never increases along the array"
            );
            if a == b {
                continue;
            }
            // Java's bound wraps negative (no bound) exactly when it exceeds i64::MAX, where
            // the check holds anyway; i128 sidesteps the wrap.
            let (up_a, up_b) = (i128::from(a.upstream), i128::from(b.upstream));
            assert!(up_a <= up_b + (1i128 << j) - (1i128 << i), "B at {i},{j}");
            assert!(
                up_a >= up_b + (1i128 << i.saturating_sub(2)),
                "C at {i},{j}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Random increasing syncs, with steps from 1 to a few thousand: invariants hold after each.
    #[test]
    fn store_invariants_hold(
        steps in prop::collection::vec(prop_oneof![4 => 1i64..4, 2 => 1i64..200, 1 => 1i64..5000], 1..300)
    ) {
        let mut store = SyncStore::new();
        let (mut up, mut down) = (0i64, 0i64);
        for (k, step) in steps.into_iter().enumerate() {
            up += step;
            down = k as i64;
            store.apply(up, down);
            // Adjacent slots after every sync, all pairs now and then.
            let reach = if k % 32 == 0 { SYNCS_PER_PARTITION } else { 1 };
            check_pairs(store.syncs().unwrap(), (up, down), reach);
        }
        check_invariants(store.syncs().unwrap(), (up, down));
        // Translation is monotonic in the position.
        let mut last = i64::MIN;
        for p in 0..=up + 1 {
            if let Translated(t) = store.translate_downstream(p) {
                prop_assert!(t >= last);
                last = t;
            }
        }
    }

    /// Strait and MM2 fed the same forwarded batches (with source gaps, target gaps and lost
    /// ranges) and random commits: at every position MM2 is at or behind strait, never ahead,
    /// and exact at each sync it holds.
    #[test]
    fn mm2_never_translates_past_strait(
        lag in prop_oneof![Just(DEFAULT_OFFSET_LAG_MAX), 1i64..20],
        batches in prop::collection::vec(
            (prop_oneof![3 => Just(0i64), 1 => 1i64..5],
             prop_oneof![4 => Just(0i64), 1 => 1i64..5],
             1i64..60, any::<bool>(), 0u8..8),
            1..40
        ),
    ) {
        let mut map = PartitionMap::new();
        let mut mm2 = Mm2Model::new(lag);
        let (mut src, mut dst) = (0i64, 0i64);
        for (src_gap, dst_gap, n, commit, lost) in batches {
            if lost == 0 {
                map.record_lost(src, src + 3).unwrap();
                src += 3;
            }
            src += src_gap;
            dst += dst_gap;
            map.record(src, dst, n).unwrap();
            mm2.record_batch(src, dst, n);
            src += n;
            dst += n;
            if commit {
                mm2.commit();
            }
        }
        let c = compare(&map, &mm2, 0..=src + 2);
        prop_assert_eq!(c.ahead, 0, "{:?}", c);
        prop_assert_eq!(c.positions, (src + 3) as u64);
        for sync in mm2.store().syncs().unwrap() {
            prop_assert_eq!(
                map.translate(sync.upstream),
                Translation::Exact { target: sync.downstream }
            );
        }
    }
}
