//! The exact offset map (`docs/design.md` §4): the worked example of `docs/offset-map.md`, every
//! translation case, refused changes, loading, and properties against a brute-force oracle.
use proptest::prelude::*;
use strait_wire::offset_map::{
    Extent, LostRange, MapError, OffsetMap, PartitionMap, ReverseTranslation, Segment,
    SourcePartition, Translation,
};

use ReverseTranslation as R;
use Translation as T;

/// The worked example of `docs/offset-map.md`.
fn worked_example() -> PartitionMap {
    let mut map = PartitionMap::new();
    // 1000-1004: a committed transaction's records; 1005 its commit marker, dropped.
    map.record(1000, 0, 5).unwrap();
    // One compacted source batch holding 1006-1009 and 1013-1015 (1010-1012 removed): rebuilt
    // into one dense target batch, recorded as one call per dense source run.
    map.record(1006, 5, 4).unwrap();
    map.record(1013, 9, 3).unwrap();
    // 1016: a trailing commit marker, dropped.
    map.record_skipped(1016, 1017).unwrap();
    map
}

#[test]
fn worked_example_segments() {
    let map = worked_example();
    assert_eq!(
        map.segments(),
        &[
            Segment {
                src_start: 1000,
                dst_start: 0,
                len: 5
            },
            Segment {
                src_start: 1006,
                dst_start: 5,
                len: 4
            },
            Segment {
                src_start: 1013,
                dst_start: 9,
                len: 3
            },
        ]
    );
    assert_eq!(
        map.extent(),
        Some(Extent {
            src_start: 1000,
            src_end: 1017
        })
    );
    assert_eq!(map.dst_end(), Some(12));
}

#[test]
fn worked_example_forward() {
    let map = worked_example();
    let cases = [
        (
            998,
            T::BeforeMappedStart {
                target: 0,
                skipped: 2,
            },
        ),
        (1000, T::Exact { target: 0 }),
        (1003, T::Exact { target: 3 }),
        (1005, T::Exact { target: 5 }), // the marker: a gap
        (1006, T::Exact { target: 5 }),
        (1009, T::Exact { target: 8 }),
        (1010, T::Exact { target: 9 }), // compaction hole
        (1012, T::Exact { target: 9 }),
        (1013, T::Exact { target: 9 }),
        (1016, T::Exact { target: 12 }), // the trailing marker
        (1017, T::Exact { target: 12 }),
        (
            1020,
            T::PastMappedEnd {
                target: 12,
                unreplicated: 3,
            },
        ),
    ];
    for (p, expected) in cases {
        assert_eq!(map.translate(p), expected, "position {p}");
    }
    // The docs' variant: 1017-1029 deleted on the source before strait read them.
    let mut map = map;
    map.record_lost(1017, 1030).unwrap();
    assert_eq!(
        map.translate(1020),
        T::InLostRange {
            target: 12,
            lost: 10
        }
    );
}

#[test]
fn worked_example_reverse() {
    let map = worked_example();
    let cases = [
        (0, R::Exact { source: 1000 }),
        (4, R::Exact { source: 1004 }),
        (5, R::Exact { source: 1006 }),
        (9, R::Exact { source: 1013 }),
        (11, R::Exact { source: 1015 }),
        (12, R::Exact { source: 1017 }),
        (
            14,
            R::PastMappedEnd {
                source: 1017,
                unmapped: 2,
            },
        ),
    ];
    for (q, expected) in cases {
        assert_eq!(map.translate_back(q), expected, "target position {q}");
    }
}

#[test]
fn without_the_trailing_skip_a_consumer_past_the_marker_looks_one_ahead() {
    let mut map = PartitionMap::new();
    map.record(1000, 0, 5).unwrap();
    assert_eq!(
        map.translate(1006),
        T::PastMappedEnd {
            target: 5,
            unreplicated: 1
        }
    );
    map.record_skipped(1005, 1006).unwrap();
    assert_eq!(map.translate(1006), T::Exact { target: 5 });
}

#[test]
fn target_gap_from_a_crashed_flow() {
    // Source 0-9 at target 0-9; a crash left 10-12 on the target unrecorded (duplicates of
    // source 10-12); the restarted flow produced source 10-14 again at 13-17.
    let mut map = PartitionMap::new();
    map.record(0, 0, 10).unwrap();
    map.record(10, 13, 5).unwrap();
    assert_eq!(map.segments().len(), 2);
    // Forward: the duplicates are skipped, exactly.
    assert_eq!(map.translate(10), T::Exact { target: 13 });
    assert_eq!(map.translate(12), T::Exact { target: 15 });
    // Reverse: a target consumer inside the duplicates.
    assert_eq!(
        map.translate_back(10),
        R::InTargetGap {
            source: 10,
            foreign: 3
        }
    );
    assert_eq!(
        map.translate_back(12),
        R::InTargetGap {
            source: 10,
            foreign: 1
        }
    );
    assert_eq!(map.translate_back(13), R::Exact { source: 10 });
}

#[test]
fn target_records_before_the_map() {
    let mut map = PartitionMap::new();
    map.record(0, 50, 10).unwrap();
    assert_eq!(
        map.translate_back(20),
        R::InTargetGap {
            source: 0,
            foreign: 30
        }
    );
}

#[test]
fn consecutive_batches_extend_one_segment() {
    let mut map = PartitionMap::new();
    for i in 0..100 {
        let seg = map.record(i * 10, 500 + i * 10, 10).unwrap();
        assert_eq!(seg.src_start, 0);
        assert_eq!(seg.len, (i + 1) * 10);
    }
    assert_eq!(map.segments().len(), 1);
    // A source gap, then a target gap, each start a segment.
    assert_eq!(map.record(1001, 1500, 1).unwrap().src_start, 1001);
    assert_eq!(map.record(1002, 1502, 1).unwrap().src_start, 1002);
    assert_eq!(map.segments().len(), 3);
}

#[test]
fn refused_changes_leave_the_map_unchanged() {
    let mut map = worked_example();
    let before = map.clone();
    let refusals: [(Result<(), MapError>, MapError); 10] = [
        (
            map.record(1017, 12, 0).map(drop),
            MapError::EmptyBatch {
                src_base: 1017,
                n: 0,
            },
        ),
        (
            map.record(1017, 12, -3).map(drop),
            MapError::EmptyBatch {
                src_base: 1017,
                n: -3,
            },
        ),
        // Overlaps the mapped source range.
        (
            map.record(1015, 12, 2).map(drop),
            MapError::SourceBehind {
                src_from: 1015,
                src_end: 1017,
            },
        ),
        // Into the skipped trailing marker.
        (
            map.record(1016, 12, 1).map(drop),
            MapError::SourceBehind {
                src_from: 1016,
                src_end: 1017,
            },
        ),
        // Backwards on the source.
        (
            map.record(10, 12, 1).map(drop),
            MapError::SourceBehind {
                src_from: 10,
                src_end: 1017,
            },
        ),
        // Overlaps / backwards on the target.
        (
            map.record(1017, 11, 1).map(drop),
            MapError::TargetBehind {
                dst_base: 11,
                dst_end: 12,
            },
        ),
        (
            map.record(-1, 12, 1).map(drop),
            MapError::NegativeOffset { offset: -1 },
        ),
        (
            map.record(i64::MAX - 1, 12, 5).map(drop),
            MapError::Overflow {
                start: i64::MAX - 1,
                len: 5,
            },
        ),
        (
            map.record_lost(1020, 1020).map(drop),
            MapError::EmptyRange {
                src_from: 1020,
                src_to: 1020,
            },
        ),
        (
            map.record_skipped(1000, 1001).map(drop),
            MapError::SourceBehind {
                src_from: 1000,
                src_end: 1017,
            },
        ),
    ];
    for (i, (got, expected)) in refusals.into_iter().enumerate() {
        assert_eq!(got, Err(expected), "refusal {i}");
    }
    assert_eq!(map, before);
    assert!(!MapError::NegativeOffset { offset: -1 }.is_retriable());
}

#[test]
fn lost_ranges() {
    let mut map = PartitionMap::new();
    map.record(0, 0, 10).unwrap();
    // Fetch at 10 said OFFSET_OUT_OF_RANGE; the log now starts at 30.
    assert_eq!(
        map.record_lost(10, 25).unwrap(),
        LostRange {
            src_from: 10,
            src_to: 25
        }
    );
    // A second loss right after extends the same range.
    assert_eq!(
        map.record_lost(25, 30).unwrap(),
        LostRange {
            src_from: 10,
            src_to: 30
        }
    );
    map.record(30, 10, 5).unwrap();
    assert_eq!(map.lost_ranges().len(), 1);
    assert_eq!(map.lost_offsets(), 20);
    assert_eq!(
        map.translate(10),
        T::InLostRange {
            target: 10,
            lost: 20
        }
    );
    assert_eq!(
        map.translate(12),
        T::InLostRange {
            target: 10,
            lost: 18
        }
    );
    assert_eq!(map.translate(30), T::Exact { target: 10 });
    // Target side: nothing is missing there.
    assert_eq!(map.translate_back(10), R::Exact { source: 30 });

    // A trailing loss, with a marker before it.
    map.record_skipped(35, 36).unwrap();
    map.record_lost(36, 40).unwrap();
    assert_eq!(
        map.translate(35),
        T::InLostRange {
            target: 15,
            lost: 4
        }
    );
    assert_eq!(
        map.translate(38),
        T::InLostRange {
            target: 15,
            lost: 2
        }
    );
    assert_eq!(map.translate(40), T::Exact { target: 15 });
    assert_eq!(
        map.translate(41),
        T::PastMappedEnd {
            target: 15,
            unreplicated: 1
        }
    );
    assert_eq!(map.translate_back(15), R::Exact { source: 40 });
}

#[test]
fn loss_before_anything_was_mirrored() {
    let mut map = PartitionMap::new();
    map.record_lost(0, 100).unwrap();
    assert_eq!(map.translate(50), T::Unmapped);
    map.record(100, 0, 10).unwrap();
    assert_eq!(
        map.translate(50),
        T::InLostRange {
            target: 0,
            lost: 50
        }
    );
    assert_eq!(map.translate(100), T::Exact { target: 0 });
}

#[test]
fn empty_and_skip_only_maps_are_unmapped() {
    let mut map = PartitionMap::new();
    assert!(map.is_empty());
    assert_eq!(map.translate(0), T::Unmapped);
    assert_eq!(map.translate_back(0), R::Unmapped);
    assert_eq!(T::Unmapped.target(), None);
    map.record_skipped(0, 3).unwrap();
    assert!(!map.is_empty());
    assert_eq!(map.translate(1), T::Unmapped);
    // A marker at the very start of the map is a gap like any other.
    map.record(3, 0, 2).unwrap();
    assert_eq!(map.translate(0), T::Exact { target: 0 });
}

#[test]
fn special_negative_positions_do_not_panic() {
    let map = worked_example();
    assert_eq!(
        map.translate(i64::MIN),
        T::BeforeMappedStart {
            target: 0,
            skipped: i64::MAX
        }
    );
    assert_eq!(
        map.translate(i64::MAX),
        T::PastMappedEnd {
            target: 12,
            unreplicated: i64::MAX - 1017
        }
    );
    assert_eq!(
        map.translate_back(-1),
        R::InTargetGap {
            source: 1000,
            foreign: 1
        }
    );
    assert!(map.translate_back(i64::MAX).source().is_some());
}

#[test]
fn extreme_ranges_are_refused_without_overflow() {
    let mut map = worked_example();
    let before = map.clone();
    assert_eq!(
        map.record_lost(-5, i64::MAX),
        Err(MapError::NegativeOffset { offset: -5 })
    );
    assert_eq!(
        map.record_skipped(i64::MIN, i64::MAX),
        Err(MapError::NegativeOffset { offset: i64::MIN })
    );
    assert_eq!(
        map.record_lost(i64::MAX, i64::MIN),
        Err(MapError::EmptyRange {
            src_from: i64::MAX,
            src_to: i64::MIN
        })
    );
    assert_eq!(
        map.record(2000, i64::MAX, 2),
        Err(MapError::Overflow {
            start: i64::MAX,
            len: 2
        })
    );
    assert_eq!(map, before);
    // The largest ranges that fit are accepted.
    map.record_skipped(2000, i64::MAX).unwrap();
    assert_eq!(map.translate(i64::MAX), T::Exact { target: 12 });
}

#[test]
fn offset_map_keeps_partitions_apart() {
    let orders0 = SourcePartition::new("orders", 0);
    let orders1 = SourcePartition::new("orders", 1);
    let mut map = OffsetMap::new();
    map.record(&orders0, 0, 0, 10).unwrap();
    map.record(&orders1, 0, 100, 10).unwrap();
    map.record_skipped(&orders1, 10, 11).unwrap();
    assert_eq!(map.len(), 2);
    assert_eq!(map.segment_count(), 2);
    assert_eq!(map.translate(&orders0, 5), T::Exact { target: 5 });
    assert_eq!(map.translate(&orders1, 5), T::Exact { target: 105 });
    assert_eq!(map.translate(&orders1, 11), T::Exact { target: 110 });
    assert_eq!(map.translate_back(&orders1, 105), R::Exact { source: 5 });
    let unknown = SourcePartition::new("payments", 0);
    assert_eq!(map.translate(&unknown, 5), T::Unmapped);
    assert_eq!(map.translate_back(&unknown, 5), R::Unmapped);
    // A refused first change does not create the partition.
    assert!(map.record(&unknown, 0, 0, 0).is_err());
    assert!(map.partition(&unknown).is_none());
    assert_eq!(orders1.to_string(), "orders-1");
}

#[test]
fn loading_checks_every_invariant_and_names_the_offsets() {
    let seg = |src_start, dst_start, len| Segment {
        src_start,
        dst_start,
        len,
    };
    // In any order.
    let map = PartitionMap::from_segments([seg(20, 10, 5), seg(0, 0, 10)]).unwrap();
    assert_eq!(map.segments()[0].src_start, 0);
    assert_eq!(
        map.extent(),
        Some(Extent {
            src_start: 0,
            src_end: 25
        })
    );
    // Adjacent linear segments stay apart (each is its own persisted record).
    let map = PartitionMap::from_segments([seg(0, 0, 10), seg(10, 10, 5)]).unwrap();
    assert_eq!(map.segments().len(), 2);
    assert_eq!(map.translate(12), T::Exact { target: 12 });

    assert_eq!(
        PartitionMap::from_segments([seg(0, 0, 10), seg(5, 20, 10)]),
        Err(MapError::SourceOverlap {
            first_start: 0,
            first_end: 10,
            second_start: 5,
            second_end: 15
        })
    );
    assert_eq!(
        PartitionMap::from_segments([seg(0, 0, 10), seg(0, 20, 10)]),
        Err(MapError::SourceOverlap {
            first_start: 0,
            first_end: 10,
            second_start: 0,
            second_end: 10
        })
    );
    assert_eq!(
        PartitionMap::from_segments([seg(0, 0, 10), seg(20, 5, 10)]),
        Err(MapError::TargetOverlap {
            first_src: 0,
            first_dst_start: 0,
            first_dst_end: 10,
            second_src: 20,
            second_dst_start: 5,
            second_dst_end: 15
        })
    );
    // Target order reversed without overlap.
    assert!(matches!(
        PartitionMap::from_segments([seg(0, 100, 10), seg(20, 0, 10)]),
        Err(MapError::TargetOverlap { .. })
    ));
    for bad in [
        seg(0, 0, 0),
        seg(-1, 0, 1),
        seg(0, -5, 1),
        seg(i64::MAX, 0, 1),
    ] {
        assert_eq!(
            PartitionMap::from_segments([bad]),
            Err(MapError::InvalidSegment { segment: bad })
        );
    }
    // Lost ranges may not overlap segments or each other.
    let lost = |src_from, src_to| LostRange { src_from, src_to };
    assert_eq!(
        PartitionMap::from_parts([seg(0, 0, 10)], [lost(8, 12)], None),
        Err(MapError::SourceOverlap {
            first_start: 0,
            first_end: 10,
            second_start: 8,
            second_end: 12
        })
    );
    assert!(matches!(
        PartitionMap::from_parts([], [lost(5, 5)], None),
        Err(MapError::InvalidLostRange { .. })
    ));
    let bad_extent = Extent {
        src_start: 10,
        src_end: 5,
    };
    assert_eq!(
        PartitionMap::from_parts([], [], Some(bad_extent)),
        Err(MapError::InvalidExtent { extent: bad_extent })
    );
    // A persisted extent that lags behind the segments is widened.
    let map = PartitionMap::from_parts(
        [seg(0, 0, 10)],
        [lost(10, 12)],
        Some(Extent {
            src_start: 0,
            src_end: 4,
        }),
    )
    .unwrap();
    assert_eq!(map.src_end(), Some(12));
}

// ---------------------------------------------------------------------------------------------
// Properties against a brute-force oracle.

/// One thing that happens to a flow.
#[derive(Debug, Clone)]
enum Op {
    /// A forwarded batch, `src_gap` offsets after the map's source end (markers, aborted data,
    /// compaction holes) and `dst_gap` offsets after the target end (foreign writes, duplicates).
    Batch { src_gap: i64, dst_gap: i64, n: i64 },
    /// Records deleted on the source before they were mirrored.
    Lost { gap: i64, len: i64 },
    /// A dropped control or aborted batch.
    Skip { gap: i64, len: i64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (
            prop_oneof![3 => Just(0i64), 1 => 1i64..4],
            prop_oneof![4 => Just(0i64), 1 => 1i64..4],
            1i64..12,
        )
            .prop_map(|(src_gap, dst_gap, n)| Op::Batch { src_gap, dst_gap, n }),
        1 => (0i64..3, 1i64..6).prop_map(|(gap, len)| Op::Lost { gap, len }),
        1 => (0i64..2, 1i64..3).prop_map(|(gap, len)| Op::Skip { gap, len }),
    ]
}

/// The map's meaning, record by record.
#[derive(Debug, Default)]
struct Oracle {
    /// (source offset, target offset) of every mirrored record, in order.
    records: Vec<(i64, i64)>,
    /// Every lost source offset.
    lost: Vec<i64>,
    start: Option<i64>,
    src_end: i64,
    dst_end: i64,
}

impl Oracle {
    fn cover(&mut self, from: i64, to: i64) {
        self.start.get_or_insert(from);
        self.src_end = to;
    }

    fn forward(&self, p: i64) -> Translation {
        let (Some(start), Some(&(_, first_dst))) = (self.start, self.records.first()) else {
            return T::Unmapped;
        };
        if p < start {
            return T::BeforeMappedStart {
                target: first_dst,
                skipped: start - p,
            };
        }
        let next = self.records.iter().find(|&&(s, _)| s >= p);
        let (target, limit) = match next {
            Some(&(s, d)) => (d, s),
            None if p > self.src_end => {
                return T::PastMappedEnd {
                    target: self.dst_end,
                    unreplicated: p - self.src_end,
                }
            }
            None => (self.dst_end, self.src_end),
        };
        let lost = self.lost.iter().filter(|&&o| o >= p && o < limit).count() as i64;
        if lost > 0 {
            T::InLostRange { target, lost }
        } else {
            T::Exact { target }
        }
    }

    fn reverse(&self, q: i64) -> ReverseTranslation {
        if self.records.is_empty() {
            return R::Unmapped;
        }
        match self.records.iter().find(|&&(_, d)| d >= q) {
            Some(&(s, d)) if d == q => R::Exact { source: s },
            Some(&(s, d)) => R::InTargetGap {
                source: s,
                foreign: d - q,
            },
            None if q == self.dst_end => R::Exact {
                source: self.src_end,
            },
            None => R::PastMappedEnd {
                source: self.src_end,
                unmapped: q - self.dst_end,
            },
        }
    }

    /// Segments the map should hold: one per run that continues in both source and target.
    fn segment_count(&self) -> usize {
        let breaks = self
            .records
            .windows(2)
            .filter(|w| w[1] != (w[0].0 + 1, w[0].1 + 1))
            .count();
        if self.records.is_empty() {
            0
        } else {
            breaks + 1
        }
    }
}

/// Applies `ops` from source offset `src0` and target offset `dst0` to a map and an oracle.
fn build(src0: i64, dst0: i64, ops: &[Op]) -> (PartitionMap, Oracle) {
    let mut map = PartitionMap::new();
    let mut oracle = Oracle {
        src_end: src0,
        dst_end: dst0,
        ..Oracle::default()
    };
    for op in ops {
        match *op {
            Op::Batch {
                src_gap,
                dst_gap,
                n,
            } => {
                let (s, d) = (oracle.src_end + src_gap, oracle.dst_end + dst_gap);
                map.record(s, d, n).unwrap();
                oracle.records.extend((0..n).map(|i| (s + i, d + i)));
                oracle.cover(s, s + n);
                oracle.dst_end = d + n;
            }
            Op::Lost { gap, len } => {
                let s = oracle.src_end + gap;
                map.record_lost(s, s + len).unwrap();
                oracle.lost.extend(s..s + len);
                oracle.cover(s, s + len);
            }
            Op::Skip { gap, len } => {
                let s = oracle.src_end + gap;
                map.record_skipped(s, s + len).unwrap();
                oracle.cover(s, s + len);
            }
        }
    }
    (map, oracle)
}

/// Mostly small offsets near the map, sometimes anything.
fn offset() -> impl Strategy<Value = i64> {
    prop_oneof![8 => -5i64..80, 1 => any::<i64>(), 1 => Just(i64::MAX), 1 => Just(i64::MIN)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn translation_matches_the_oracle(
        src0 in 0i64..50, dst0 in 0i64..50, ops in prop::collection::vec(op(), 0..25)
    ) {
        let (map, oracle) = build(src0, dst0, &ops);
        prop_assert_eq!(map.segments().len(), oracle.segment_count());
        prop_assert_eq!(map.src_end().unwrap_or(src0), oracle.src_end);
        prop_assert_eq!(map.lost_offsets(), oracle.lost.len() as i64);

        // Every mirrored record: exact both ways, and the round trip returns it.
        for &(s, d) in &oracle.records {
            prop_assert_eq!(map.translate(s), T::Exact { target: d });
            prop_assert_eq!(map.translate_back(d), R::Exact { source: s });
        }
        // Every position, including gaps, lost ranges and both ends, against the oracle;
        // targets never go backwards as the position advances.
        let mut last_target = i64::MIN;
        for p in src0.saturating_sub(3)..=oracle.src_end + 3 {
            let t = map.translate(p);
            prop_assert_eq!(t, oracle.forward(p), "position {}", p);
            if let Some(target) = t.target() {
                prop_assert!(target >= last_target);
                last_target = target;
                // The target maps back to a source position with the same target, at or after
                // p unless p is past the mapped end: nothing before p is read again.
                let back = map.translate_back(target).source().unwrap();
                prop_assert_eq!(map.translate(back).target(), Some(target));
                if !matches!(t, T::PastMappedEnd { .. }) {
                    prop_assert!(back >= p);
                }
            }
        }
        let mut last_source = i64::MIN;
        for q in dst0.saturating_sub(3)..=oracle.dst_end + 3 {
            let r = map.translate_back(q);
            prop_assert_eq!(r, oracle.reverse(q), "target position {}", q);
            if let Some(source) = r.source() {
                prop_assert!(source >= last_source);
                last_source = source;
            }
        }
    }

    /// The map rebuilt from its own parts is the same map.
    #[test]
    fn from_parts_rebuilds_the_same_map(
        src0 in 0i64..50, dst0 in 0i64..50, ops in prop::collection::vec(op(), 0..25),
        shuffle in any::<u64>(),
    ) {
        let (map, _) = build(src0, dst0, &ops);
        let mut segments = map.segments().to_vec();
        // Persisted order is arbitrary.
        if !segments.is_empty() {
            let k = (shuffle % segments.len() as u64) as usize;
            segments.rotate_left(k);
        }
        let rebuilt = PartitionMap::from_parts(
            segments,
            map.lost_ranges().iter().rev().copied(),
            map.extent(),
        )
        .unwrap();
        prop_assert_eq!(rebuilt, map);
    }

    /// Any change to a valid map either is refused and changes nothing, or keeps it valid.
    #[test]
    fn arbitrary_changes_keep_the_invariants(
        ops in prop::collection::vec(op(), 0..10),
        changes in prop::collection::vec(
            (0u8..3, offset(), offset(), prop_oneof![8 => -3i64..12, 1 => any::<i64>()]),
            1..20
        ),
    ) {
        let (mut map, _) = build(10, 10, &ops);
        for (kind, a, b, n) in changes {
            let before = map.clone();
            let result = match kind {
                0 => map.record(a, b, n).map(drop),
                1 => map.record_lost(a, a.saturating_add(n)).map(drop),
                _ => map.record_skipped(a, a.saturating_add(n)).map(drop),
            };
            if result.is_err() {
                prop_assert_eq!(&map, &before);
            }
            let reloaded =
                PartitionMap::from_parts(map.segments().to_vec(), map.lost_ranges().to_vec(), map.extent());
            prop_assert_eq!(reloaded.as_ref(), Ok(&map));
            for w in map.segments().windows(2) {
                prop_assert!(w[0].src_end() <= w[1].src_start);
                prop_assert!(w[0].dst_end() <= w[1].dst_start);
                prop_assert!(w[0].src_end() != w[1].src_start || w[0].dst_end() != w[1].dst_start);
            }
        }
    }
}
