//! The offset map's persisted records: the bytes, round trips, the loader's compacted-topic
//! semantics, and refusal (never a panic) of bad input.
use proptest::prelude::*;
use strait_wire::mm2::CodecError;
use strait_wire::offset_map::{
    Extent, Floor, LoadError, LostRange, MapEntry, MapError, MapKey, MapLoader, MapRecord,
    OffsetMap, PartitionMap, PersistError, Segment, SourcePartition, Translation,
};

fn orders(partition: i32) -> SourcePartition {
    SourcePartition::new("orders", partition)
}

fn segment_record(src_start: i64, dst_start: i64, len: i64, generation: i32) -> MapRecord {
    MapRecord {
        partition: orders(3),
        entry: MapEntry::Segment(Segment {
            src_start,
            dst_start,
            len,
        }),
        generation,
    }
}

fn load(records: &[MapRecord]) -> Result<OffsetMap, LoadError> {
    let mut loader = MapLoader::new();
    for r in records {
        loader
            .apply(&r.encode_key().unwrap(), Some(&r.encode_value()))
            .unwrap();
    }
    loader.finish()
}

#[test]
fn segment_record_bytes() {
    let record = segment_record(1000, 990, 25, 7);
    let mut key = vec![0, 0, 0, 0, 6];
    key.extend_from_slice(b"orders");
    key.extend_from_slice(&[0, 0, 0, 3]);
    key.extend_from_slice(&1000i64.to_be_bytes());
    assert_eq!(record.encode_key().unwrap(), key);
    let mut value = vec![0, 0];
    value.extend_from_slice(&990i64.to_be_bytes());
    value.extend_from_slice(&25i64.to_be_bytes());
    value.extend_from_slice(&7i32.to_be_bytes());
    assert_eq!(value.len(), 22);
    assert_eq!(record.encode_value(), value);
    assert_eq!(MapRecord::decode(&key, &value).unwrap(), record);
}

#[test]
fn lost_and_extent_record_bytes() {
    let lost = MapRecord {
        partition: orders(3),
        entry: MapEntry::Lost(LostRange {
            src_from: 10,
            src_to: 30,
        }),
        generation: 1,
    };
    let key = lost.encode_key().unwrap();
    assert_eq!(&key[..3], &[0, 0, 1]);
    assert_eq!(&key[key.len() - 8..], &10i64.to_be_bytes());
    assert_eq!(lost.encode_value().len(), 14);
    assert_eq!(MapRecord::decode(&key, &lost.encode_value()).unwrap(), lost);

    let extent = MapRecord {
        partition: orders(3),
        entry: MapEntry::Extent(Extent {
            src_start: 0,
            src_end: 31,
        }),
        generation: 1,
    };
    let key = extent.encode_key().unwrap();
    assert_eq!(&key[..3], &[0, 0, 2]);
    // One extent per partition: the key ends with the partition.
    assert_eq!(&key[key.len() - 4..], &[0, 0, 0, 3]);
    assert_eq!(extent.encode_value().len(), 22);
    assert_eq!(
        MapRecord::decode(&key, &extent.encode_value()).unwrap(),
        extent
    );
}

#[test]
fn floor_record_bytes() {
    let floor = MapRecord {
        partition: orders(3),
        entry: MapEntry::Floor(Floor {
            src_end: 500,
            dst_start: 7,
        }),
        generation: 2,
    };
    let key = floor.encode_key().unwrap();
    assert_eq!(&key[..3], &[0, 0, 3]);
    // One floor per partition: the key ends with the partition.
    assert_eq!(&key[key.len() - 4..], &[0, 0, 0, 3]);
    let mut value = vec![0, 0];
    value.extend_from_slice(&500i64.to_be_bytes());
    value.extend_from_slice(&7i64.to_be_bytes());
    value.extend_from_slice(&2i32.to_be_bytes());
    assert_eq!(floor.encode_value(), value);
    assert_eq!(MapRecord::decode(&key, &value).unwrap(), floor);
}

#[test]
fn bad_keys_and_values_are_errors() {
    let record = segment_record(1, 2, 3, 4);
    let key = record.encode_key().unwrap();
    let value = record.encode_value();

    let mut bad = key.clone();
    bad[1] = 1;
    assert_eq!(
        MapKey::decode(&bad),
        Err(PersistError::Codec(CodecError::UnsupportedVersion {
            record: "offset map key",
            version: 1
        }))
    );
    let mut bad = key.clone();
    bad[2] = 4;
    assert_eq!(
        MapKey::decode(&bad),
        Err(PersistError::UnknownKind { kind: 4 })
    );
    bad[2] = 9;
    assert_eq!(
        MapKey::decode(&bad),
        Err(PersistError::UnknownKind { kind: 9 })
    );
    let mut bad = value.clone();
    bad[0] = 0x80;
    assert!(matches!(
        MapRecord::decode(&key, &bad),
        Err(PersistError::Codec(CodecError::UnsupportedVersion { .. }))
    ));
    assert!(matches!(
        MapRecord::decode(&key, &value[..21]),
        Err(PersistError::Codec(CodecError::Truncated {
            field: "generation",
            ..
        }))
    ));
    let mut long = value.clone();
    long.push(0);
    assert!(matches!(
        MapRecord::decode(&key, &long),
        Err(PersistError::Codec(CodecError::TrailingBytes { .. }))
    ));
    for cut in 0..key.len() {
        assert!(MapKey::decode(&key[..cut]).is_err());
    }
    assert!(!PersistError::UnknownKind { kind: 3 }.is_retriable());
}

#[test]
fn later_records_replace_earlier_ones_and_tombstones_delete() {
    // The last segment extended twice: three records under one key.
    let records = [
        segment_record(0, 0, 10, 1),
        segment_record(0, 0, 20, 1),
        segment_record(0, 0, 30, 1),
    ];
    let map = load(&records).unwrap();
    assert_eq!(map.partition(&orders(3)).unwrap().segments()[0].len, 30);

    let mut loader = MapLoader::new();
    let r = segment_record(0, 0, 10, 1);
    let key = r.encode_key().unwrap();
    loader.apply(&key, Some(&r.encode_value())).unwrap();
    loader.apply(&key, None).unwrap();
    assert!(loader.finish().unwrap().is_empty());
}

#[test]
fn a_stale_generation_does_not_replace_a_newer_one() {
    // Worker of generation 5 extended the segment; a fenced-off worker of generation 4 writes
    // late.
    let map = load(&[segment_record(0, 0, 50, 5), segment_record(0, 0, 10, 4)]).unwrap();
    assert_eq!(map.partition(&orders(3)).unwrap().segments()[0].len, 50);
    // Equal generations: the later record wins.
    let map = load(&[segment_record(0, 0, 50, 5), segment_record(0, 0, 60, 5)]).unwrap();
    assert_eq!(map.partition(&orders(3)).unwrap().segments()[0].len, 60);
}

#[test]
fn a_late_shorter_record_of_the_same_generation_does_not_shorten_the_map() {
    // A flush abandoned at its timeout lands after a newer one of the same writer: the segment,
    // the lost range and the extent only ever grow, so the larger value is kept. Taking the late
    // record would open a false gap at 20..50 that translation would call exact, and consumers
    // failing over there would skip records.
    let extent = |src_end| MapRecord {
        partition: orders(3),
        entry: MapEntry::Extent(Extent {
            src_start: 0,
            src_end,
        }),
        generation: 5,
    };
    let lost = |src_to| MapRecord {
        partition: orders(3),
        entry: MapEntry::Lost(LostRange {
            src_from: 60,
            src_to,
        }),
        generation: 5,
    };
    let map = load(&[
        segment_record(0, 0, 50, 5),
        lost(70),
        extent(70),
        segment_record(0, 0, 20, 5),
        lost(65),
        extent(40),
    ])
    .unwrap();
    let p = map.partition(&orders(3)).unwrap();
    assert_eq!(p.segments()[0].len, 50);
    assert_eq!(p.lost_ranges()[0].src_to, 70);
    assert_eq!(p.extent().map(|e| e.src_end), Some(70));
    assert_eq!(
        map.translate(&orders(3), 30),
        Translation::Exact { target: 30 }
    );
    // A segment moved to other target offsets is another mapping, not a late write: the later
    // record stands (the loader cannot know better, and the partition's checks apply).
    let map = load(&[segment_record(0, 0, 50, 5), segment_record(0, 100, 20, 5)]).unwrap();
    assert_eq!(
        map.partition(&orders(3)).unwrap().segments()[0].dst_start,
        100
    );
}

#[test]
fn an_overlapping_persisted_map_is_an_error_naming_partition_and_offsets() {
    let err = load(&[segment_record(0, 0, 10, 1), segment_record(5, 10, 10, 1)]).unwrap_err();
    assert_eq!(
        err,
        LoadError {
            partition: orders(3),
            error: MapError::SourceOverlap {
                first_start: 0,
                first_end: 10,
                second_start: 5,
                second_end: 15,
            },
        }
    );
    assert_eq!(
        err.to_string(),
        "persisted offset map of orders-3 is invalid: source offsets [0, 10) and [5, 15) overlap"
    );
    let err = load(&[segment_record(0, 0, 0, 1)]).unwrap_err();
    assert!(matches!(err.error, MapError::InvalidSegment { .. }));
}

#[test]
fn a_map_survives_a_restart() {
    let mut map = OffsetMap::new();
    let (p0, p1) = (orders(0), SourcePartition::new("payments", 1));
    map.record(&p0, 0, 0, 10).unwrap();
    map.record_skipped(&p0, 10, 11).unwrap();
    map.record(&p0, 11, 10, 10).unwrap();
    map.record(&p1, 500, 0, 3).unwrap();
    map.record_lost(&p1, 503, 600).unwrap();
    map.record(&p1, 600, 3, 3).unwrap();
    map.record_skipped(&p1, 603, 604).unwrap();

    let mut records = Vec::new();
    for (partition, m) in map.iter() {
        records.extend(m.to_records(partition, 1));
    }
    let loaded = load(&records).unwrap();
    assert_eq!(loaded, map);
    assert_eq!(loaded.translate(&p1, 604), Translation::Exact { target: 6 });
}

fn entry() -> impl Strategy<Value = MapEntry> {
    prop_oneof![
        (any::<i64>(), any::<i64>(), any::<i64>()).prop_map(|(src_start, dst_start, len)| {
            MapEntry::Segment(Segment {
                src_start,
                dst_start,
                len,
            })
        }),
        (any::<i64>(), any::<i64>())
            .prop_map(|(src_from, src_to)| MapEntry::Lost(LostRange { src_from, src_to })),
        (any::<i64>(), any::<i64>())
            .prop_map(|(src_start, src_end)| MapEntry::Extent(Extent { src_start, src_end })),
        (any::<i64>(), any::<i64>())
            .prop_map(|(src_end, dst_start)| MapEntry::Floor(Floor { src_end, dst_start })),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn records_round_trip(
        topic in "[a-zA-Z0-9._-]{0,249}", partition in any::<i32>(), entry in entry(),
        generation in any::<i32>(),
    ) {
        let record = MapRecord { partition: SourcePartition { topic, partition }, entry, generation };
        let key = record.encode_key().unwrap();
        let value = record.encode_value();
        prop_assert_eq!(MapKey::decode(&key).unwrap(), record.key());
        prop_assert_eq!(MapRecord::decode(&key, &value).unwrap(), record);
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        key in prop::collection::vec(any::<u8>(), 0..40),
        value in prop::collection::vec(any::<u8>(), 0..30),
        tombstone in any::<bool>(),
    ) {
        if let Ok(record) = MapRecord::decode(&key, &value) {
            prop_assert_eq!(record.encode_key().unwrap(), key.clone());
            prop_assert_eq!(record.encode_value(), value.clone());
        }
        let mut loader = MapLoader::new();
        let _ = loader.apply(&key, if tombstone { None } else { Some(&value) });
        let _ = loader.finish();
    }

    /// Whatever the records say, loading gives a valid map or an error, never a panic; and a
    /// map that loads translates without panicking.
    #[test]
    fn arbitrary_records_load_or_fail_cleanly(
        entries in prop::collection::vec((entry(), 0i32..3), 0..8),
        probes in prop::collection::vec(any::<i64>(), 0..8),
    ) {
        let records: Vec<MapRecord> = entries
            .into_iter()
            .map(|(entry, generation)| MapRecord { partition: orders(0), entry, generation })
            .collect();
        if let Ok(map) = load(&records) {
            for p in probes {
                let _ = map.translate(&orders(0), p);
                let _ = map.translate_back(&orders(0), p);
            }
        }
    }

    /// Real map records with one byte changed or cut short.
    #[test]
    fn damaged_records_never_panic(
        src in 0i64..1000, dst in 0i64..1000, len in 1i64..1000,
        at in any::<prop::sample::Index>(), byte in any::<u8>(), in_key in any::<bool>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let r = segment_record(src, dst, len, 1);
        let mut key = r.encode_key().unwrap();
        let mut value = r.encode_value();
        let target = if in_key { &mut key } else { &mut value };
        let i = at.index(target.len());
        target[i] = byte;
        let keep = cut.index(target.len() + 1);
        target.truncate(keep);
        let mut loader = MapLoader::new();
        if loader.apply(&key, Some(&value)).is_ok() {
            let _ = loader.finish();
        }
    }
}

#[test]
fn small_segments_load_into_a_partition_map() {
    // The loader and `from_parts` agree.
    let map = load(&[segment_record(10, 0, 5, 1), segment_record(0, 100, 5, 1)]);
    assert!(matches!(
        map.unwrap_err().error,
        MapError::TargetOverlap { .. }
    ));
    let direct = PartitionMap::from_segments([
        Segment {
            src_start: 10,
            dst_start: 0,
            len: 5,
        },
        Segment {
            src_start: 0,
            dst_start: 100,
            len: 5,
        },
    ]);
    assert!(direct.is_err());
}
