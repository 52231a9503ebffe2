//! Bounding the offset map (`docs/design.md` §4.5): compaction below a bound keeps every
//! translation at or above it and never moves one below it forward (a consumer may read twice,
//! never skip); tombstones and the floor record remove the dropped entries on reload; and a
//! clone of the map shares every partition a change did not touch.
use std::sync::Arc;

use proptest::prelude::*;
use strait_wire::offset_map::{
    Floor, MapLoader, MapRecord, OffsetMap, PartitionMap, ReverseTranslation, SourcePartition,
    Translation,
};

/// One step of building a map: a gap of `gap` source offsets (markers), then `len` offsets
/// recorded as `kind` (0, 1: mirrored, `dst_gap` target offsets after the last; 2: lost;
/// 3: skipped).
fn build(steps: &[(i64, i64, i64, u8)]) -> PartitionMap {
    let mut map = PartitionMap::new();
    let (mut src, mut dst) = (0i64, 0i64);
    for &(gap, len, dst_gap, kind) in steps {
        src += gap;
        match kind {
            0 | 1 => {
                dst += dst_gap;
                map.record(src, dst, len).unwrap();
                dst += len;
            }
            2 => {
                map.record_lost(src, src + len).unwrap();
            }
            _ => {
                map.record_skipped(src, src + len).unwrap();
            }
        }
        src += len;
    }
    map
}

fn steps() -> impl Strategy<Value = Vec<(i64, i64, i64, u8)>> {
    prop::collection::vec((0i64..3, 1i64..5, 0i64..2, 0u8..4), 0..40)
}

/// Loads a map from `(key, value)` records applied in order, `None` a tombstone.
fn load(records: &[(Vec<u8>, Option<Vec<u8>>)]) -> OffsetMap {
    let mut loader = MapLoader::new();
    for (key, value) in records {
        loader.apply(key, value.as_deref()).unwrap();
    }
    loader.finish().unwrap()
}

fn encoded(records: Vec<MapRecord>) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    records
        .into_iter()
        .map(|r| (r.encode_key().unwrap(), Some(r.encode_value())))
        .collect()
}

/// Checks `compacted` against the map it came from, for every position around the map.
fn check_against(original: &PartitionMap, compacted: &PartitionMap, bound: i64) {
    let end = original.src_end().unwrap_or(0) + 3;
    for p in -2..end {
        let (was, now) = (original.translate(p), compacted.translate(p));
        if p >= bound {
            assert_eq!(now, was, "position {p} at or above the bound {bound}");
        } else {
            match (was.target(), now.target()) {
                (Some(was_t), Some(now_t)) => {
                    assert!(now_t <= was_t, "position {p}: {now:?} after {was:?}")
                }
                (None, None) => {}
                _ => panic!("position {p}: {now:?} after {was:?}"),
            }
        }
    }
    // Failback: at or above the first segment kept, unchanged; below it, never further on.
    let kept_dst = compacted.segments().first().map_or(0, |s| s.dst_start);
    for q in -2..original.dst_end().unwrap_or(0) + 3 {
        let (was, now) = (original.translate_back(q), compacted.translate_back(q));
        if compacted.floor().is_none() || q >= kept_dst {
            assert_eq!(now, was, "target position {q}");
        } else {
            assert!(
                now.source() <= was.source() && now.source().is_some(),
                "target position {q}: {now:?} after {was:?}"
            );
        }
    }
    assert_eq!(compacted.extent(), original.extent());
    assert_eq!(compacted.dst_end(), original.dst_end());
    assert_eq!(compacted.segments().last(), original.segments().last());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Compaction below any bound, twice: exact stays exact at or above the bound, and below it
    /// no position translates further on than it did (a consumer reads twice, never skips).
    /// What is left persists and loads as the same map.
    #[test]
    fn compaction_keeps_translation_at_or_above_the_bound_and_never_skips_below(
        steps in steps(), first in 0i64..200, second in 0i64..200,
    ) {
        let original = build(&steps);
        let mut map = original.clone();
        let compacted = map.compact_below(first);
        if let Some(c) = &compacted {
            prop_assert!(c.floor.src_end <= first);
            prop_assert!(!c.segments.is_empty() || !c.lost.is_empty());
        } else {
            prop_assert_eq!(&map, &original);
        }
        check_against(&original, &map, first);
        let bound = first.max(second);
        map.compact_below(second);
        check_against(&original, &map, bound);
        if let Some(floor) = map.floor() {
            prop_assert_eq!(floor.dst_start, original.segments()[0].dst_start);
        }

        let sp = SourcePartition::new("orders", 0);
        let loaded = load(&encoded(map.to_records(&sp, 0)));
        prop_assert_eq!(loaded.partition(&sp), (!map.is_empty()).then_some(&map));
    }

    /// The persisted map after compaction: every record the map ever had, then the floor, then
    /// the tombstones, loads as the compacted map; and the floor alone is enough for that (a
    /// crash between the two writes), since the loader leaves out what lies below it.
    #[test]
    fn tombstones_and_the_floor_remove_compacted_entries_on_reload(
        steps in steps(), bound in 0i64..200,
    ) {
        let sp = SourcePartition::new("orders", 0);
        let mut map = build(&steps);
        let mut topic = encoded(map.to_records(&sp, 0));
        let Some(compacted) = map.compact_below(bound) else { return Ok(()); };
        topic.extend(encoded(vec![compacted.floor_record(&sp, 0)]));
        let floor_only = topic.clone();
        topic.extend(
            compacted.tombstones(&sp).into_iter().map(|k| (k.encode().unwrap(), None)),
        );
        let loaded = load(&topic);
        prop_assert_eq!(loaded.partition(&sp), Some(&map));
        let from_floor_only = load(&floor_only);
        prop_assert_eq!(from_floor_only.partition(&sp), Some(&map));
        // What the topic's own compaction leaves (the newest record per key, tombstones gone)
        // is what the compacted map writes in full.
        let mut kept = std::collections::BTreeMap::new();
        for (k, v) in topic {
            kept.insert(k, v);
        }
        let kept: Vec<_> = kept.into_iter().filter(|(_, v)| v.is_some()).collect();
        prop_assert_eq!(kept.len(), map.to_records(&sp, 0).len());
    }
}

/// Source 0..1000: ten records and a commit marker per transaction, so 91 segments.
fn transactional() -> PartitionMap {
    let mut map = PartitionMap::new();
    let mut dst = 0;
    for i in 0..91 {
        map.record(i * 11, dst, 10).unwrap();
        dst += 10;
    }
    map
}

#[test]
fn compaction_below_the_log_start_keeps_exact_translation_above_it() {
    let original = transactional();
    let mut map = original.clone();
    let c = map.compact_below(500).unwrap();
    assert_eq!(c.segments.len(), 45);
    assert_eq!(
        c.floor,
        Floor {
            src_end: 494,
            dst_start: 0
        }
    );
    assert_eq!(map.segments().len(), 46);
    for p in 494..1002 {
        assert_eq!(map.translate(p), original.translate(p), "{p}");
    }
    // A group committed at 100 (below the log start; Kafka would reset it on the source) goes
    // to the start of the mapped target range: it reads again, it skips nothing.
    assert_eq!(original.translate(100), Translation::Exact { target: 91 });
    assert_eq!(
        map.translate(100),
        Translation::Compacted {
            target: 0,
            reread_at_most: 450
        }
    );
    assert!(!map.translate(100).is_exact());
    assert_eq!(
        map.translate_back(91),
        ReverseTranslation::Compacted {
            source: 0,
            reread_at_most: 495
        }
    );
    // Compacting again below the same bound drops nothing; the last segment always stays.
    assert_eq!(map.compact_below(500), None);
    let c = map.compact_below(i64::MAX).unwrap();
    assert_eq!(c.floor.dst_start, 0);
    assert_eq!(map.segments().len(), 1);
    assert_eq!(map.segments().last(), original.segments().last());
    assert_eq!(map.translate(1001), original.translate(1001));
    assert_eq!(map.dst_end(), original.dst_end());
}

#[test]
fn lost_ranges_below_the_bound_go_too_and_recording_goes_on() {
    let mut map = PartitionMap::new();
    map.record_lost(0, 100).unwrap();
    map.record(100, 0, 10).unwrap();
    map.record_skipped(110, 111).unwrap();
    map.record(111, 10, 10).unwrap();
    let c = map.compact_below(120).unwrap();
    assert_eq!(c.lost.len(), 1);
    assert_eq!(c.segments.len(), 1);
    assert_eq!(map.lost_ranges(), &[]);
    assert_eq!(map.translate(50).target(), Some(0));
    map.record(121, 20, 5).unwrap();
    assert_eq!(map.translate(123), Translation::Exact { target: 22 });
}

#[test]
fn a_floor_crossed_by_a_kept_segment_does_not_load() {
    let map = transactional();
    let sp = SourcePartition::new("orders", 0);
    let mut records = encoded(map.to_records(&sp, 0));
    let bad = MapRecord {
        partition: sp.clone(),
        entry: strait_wire::offset_map::MapEntry::Floor(Floor {
            src_end: 5,
            dst_start: 0,
        }),
        generation: 0,
    };
    records.extend(encoded(vec![bad]));
    let mut loader = MapLoader::new();
    for (k, v) in &records {
        loader.apply(k, v.as_deref()).unwrap();
    }
    assert!(loader.finish().is_err());
}

#[test]
fn a_clone_shares_every_partition_a_change_did_not_touch() {
    let mut map = OffsetMap::new();
    let parts: Vec<SourcePartition> = (0..3).map(|i| SourcePartition::new("orders", i)).collect();
    for p in &parts {
        map.record(p, 0, 0, 10).unwrap();
        map.record(p, 11, 10, 10).unwrap();
    }
    let published = map.clone();
    for p in &parts {
        assert!(Arc::ptr_eq(
            map.shared_partition(p).unwrap(),
            published.shared_partition(p).unwrap()
        ));
    }
    map.record(&parts[1], 22, 20, 5).unwrap();
    assert!(Arc::ptr_eq(
        map.shared_partition(&parts[0]).unwrap(),
        published.shared_partition(&parts[0]).unwrap()
    ));
    assert!(Arc::ptr_eq(
        map.shared_partition(&parts[2]).unwrap(),
        published.shared_partition(&parts[2]).unwrap()
    ));
    assert!(!Arc::ptr_eq(
        map.shared_partition(&parts[1]).unwrap(),
        published.shared_partition(&parts[1]).unwrap()
    ));
    // The published map is the one before the change.
    assert_eq!(published.partition(&parts[1]).unwrap().segments().len(), 2);
    assert_eq!(map.partition(&parts[1]).unwrap().segments().len(), 3);
    // A compaction that drops nothing copies nothing either.
    let again = map.clone();
    assert_eq!(map.compact_below(&parts[0], 5), None);
    assert!(Arc::ptr_eq(
        map.shared_partition(&parts[0]).unwrap(),
        again.shared_partition(&parts[0]).unwrap()
    ));
}
