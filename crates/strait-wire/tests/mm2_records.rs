//! MM2's internal records (`docs/mm2-behaviour.md` §1.2-1.4): the documented bytes, round trips, and
//! refusal (never a panic) of anything else.
use proptest::prelude::*;
use strait_wire::mm2::{Checkpoint, CodecError, Heartbeat, OffsetSync, MAX_STRING_LEN};

fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

fn orders_sync() -> OffsetSync {
    OffsetSync {
        topic: "orders".into(),
        partition: 3,
        upstream_offset: 1000,
        downstream_offset: 990,
    }
}

fn billing_checkpoint() -> Checkpoint {
    Checkpoint {
        group: "billing-app".into(),
        topic: "us-west.orders".into(),
        partition: 3,
        upstream_offset: 1000,
        downstream_offset: 991,
        metadata: String::new(),
    }
}

#[test]
fn offset_sync_matches_the_documented_bytes() {
    let sync = orders_sync();
    let key = sync.encode_key().unwrap();
    let value = sync.encode_value();
    assert_eq!(key, hex("00 06 6f 72 64 65 72 73 00 00 00 03"));
    assert_eq!(
        value,
        hex("00 00 00 00 00 00 03 e8  00 00 00 00 00 00 03 de")
    );
    assert_eq!(OffsetSync::decode(&key, &value).unwrap(), sync);
}

#[test]
fn checkpoint_matches_the_documented_bytes() {
    let checkpoint = billing_checkpoint();
    let key = checkpoint.encode_key().unwrap();
    let value = checkpoint.encode_value().unwrap();
    let mut expected_key = hex("00 0b");
    expected_key.extend_from_slice(b"billing-app");
    expected_key.extend_from_slice(&hex("00 0e"));
    expected_key.extend_from_slice(b"us-west.orders");
    expected_key.extend_from_slice(&hex("00 00 00 03"));
    assert_eq!(key.len(), 33);
    assert_eq!(key, expected_key);
    assert_eq!(value.len(), 20);
    assert_eq!(
        value,
        hex("00 00  00 00 00 00 00 00 03 e8  00 00 00 00 00 00 03 df  00 00")
    );
    assert_eq!(Checkpoint::decode(&key, &value).unwrap(), checkpoint);
}

#[test]
fn checkpoint_metadata_is_a_string() {
    let checkpoint = Checkpoint {
        metadata: "v=2".into(),
        ..billing_checkpoint()
    };
    let value = checkpoint.encode_value().unwrap();
    assert_eq!(&value[18..], hex("00 03 76 3d 32"));
}

#[test]
fn heartbeat_bytes() {
    let beat = Heartbeat {
        source_alias: "us-west".into(),
        target_alias: "us-east".into(),
        timestamp_ms: 1_700_000_000_000,
    };
    let key = beat.encode_key().unwrap();
    let value = beat.encode_value();
    let mut expected_key = hex("00 07");
    expected_key.extend_from_slice(b"us-west");
    expected_key.extend_from_slice(&hex("00 07"));
    expected_key.extend_from_slice(b"us-east");
    assert_eq!(key, expected_key);
    // 1_700_000_000_000 = 0x18B_CFE5_6800
    assert_eq!(value, hex("00 00  00 00 01 8b cf e5 68 00"));
    assert_eq!(Heartbeat::decode(&key, &value).unwrap(), beat);
}

#[test]
fn strings_longer_than_32767_bytes_are_refused_not_truncated() {
    let longest = "x".repeat(MAX_STRING_LEN);
    let sync = OffsetSync {
        topic: longest.clone(),
        ..orders_sync()
    };
    let key = sync.encode_key().unwrap();
    assert_eq!(&key[..2], &[0x7f, 0xff]);
    assert_eq!(
        OffsetSync::decode(&key, &sync.encode_value()).unwrap(),
        sync
    );

    let too_long = longest + "x";
    let sync = OffsetSync {
        topic: too_long.clone(),
        ..orders_sync()
    };
    assert_eq!(
        sync.encode_key(),
        Err(CodecError::StringTooLong {
            field: "topic",
            len: 32768
        })
    );
    let checkpoint = Checkpoint {
        metadata: too_long.clone(),
        ..billing_checkpoint()
    };
    assert!(matches!(
        checkpoint.encode_value(),
        Err(CodecError::StringTooLong {
            field: "metadata",
            ..
        })
    ));
    let beat = Heartbeat {
        source_alias: "a".into(),
        target_alias: too_long,
        timestamp_ms: 0,
    };
    assert!(matches!(
        beat.encode_key(),
        Err(CodecError::StringTooLong {
            field: "targetClusterAlias",
            ..
        })
    ));
}

#[test]
fn every_truncation_is_an_error() {
    let sync = orders_sync();
    let (key, value) = (sync.encode_key().unwrap(), sync.encode_value());
    for cut in 0..key.len() {
        assert!(
            matches!(
                OffsetSync::decode(&key[..cut], &value),
                Err(CodecError::Truncated { .. })
            ),
            "key cut at {cut}"
        );
    }
    for cut in 0..value.len() {
        assert!(matches!(
            OffsetSync::decode(&key, &value[..cut]),
            Err(CodecError::Truncated { .. })
        ));
    }
    let checkpoint = billing_checkpoint();
    let (key, value) = (
        checkpoint.encode_key().unwrap(),
        checkpoint.encode_value().unwrap(),
    );
    for cut in 0..key.len() {
        assert!(matches!(
            Checkpoint::decode(&key[..cut], &value),
            Err(CodecError::Truncated { .. })
        ));
    }
    for cut in 0..value.len() {
        assert!(matches!(
            Checkpoint::decode(&key, &value[..cut]),
            Err(CodecError::Truncated { .. })
        ));
    }
}

#[test]
fn truncated_string_names_the_field_and_sizes() {
    // "orders" declared, 3 bytes present.
    let key = hex("00 06 6f 72 64");
    assert_eq!(
        OffsetSync::decode(&key, &[0; 16]),
        Err(CodecError::Truncated {
            field: "topic",
            needed: 6,
            available: 3
        })
    );
}

#[test]
fn negative_string_length_is_an_error() {
    let key = hex("ff ff 00 00 00 03");
    assert_eq!(
        OffsetSync::decode(&key, &[0; 16]),
        Err(CodecError::NegativeStringLength {
            field: "topic",
            length: -1
        })
    );
}

#[test]
fn invalid_utf8_is_an_error() {
    let key = hex("00 02 c3 28 00 00 00 03");
    assert_eq!(
        OffsetSync::decode(&key, &[0; 16]),
        Err(CodecError::InvalidUtf8 { field: "topic" })
    );
}

#[test]
fn only_version_0_is_read() {
    let checkpoint = billing_checkpoint();
    let key = checkpoint.encode_key().unwrap();
    let mut value = checkpoint.encode_value().unwrap();
    value[1] = 1;
    assert_eq!(
        Checkpoint::decode(&key, &value),
        Err(CodecError::UnsupportedVersion {
            record: "checkpoint",
            version: 1
        })
    );
    value[0] = 0xff;
    value[1] = 0xff;
    assert!(matches!(
        Checkpoint::decode(&key, &value),
        Err(CodecError::UnsupportedVersion { version: -1, .. })
    ));

    let beat = Heartbeat {
        source_alias: "a".into(),
        target_alias: "b".into(),
        timestamp_ms: 5,
    };
    let mut value = beat.encode_value();
    value[1] = 7;
    assert!(matches!(
        Heartbeat::decode(&beat.encode_key().unwrap(), &value),
        Err(CodecError::UnsupportedVersion {
            record: "heartbeat",
            version: 7
        })
    ));
}

#[test]
fn trailing_bytes_are_an_error() {
    let sync = orders_sync();
    let mut key = sync.encode_key().unwrap();
    let mut value = sync.encode_value();
    value.push(0);
    assert_eq!(
        OffsetSync::decode(&key, &value),
        Err(CodecError::TrailingBytes {
            what: "offset sync value",
            extra: 1
        })
    );
    value.pop();
    key.extend_from_slice(&[1, 2]);
    assert_eq!(
        OffsetSync::decode(&key, &value),
        Err(CodecError::TrailingBytes {
            what: "offset sync key",
            extra: 2
        })
    );
    let checkpoint = billing_checkpoint();
    let mut value = checkpoint.encode_value().unwrap();
    value.push(9);
    assert!(matches!(
        Checkpoint::decode(&checkpoint.encode_key().unwrap(), &value),
        Err(CodecError::TrailingBytes {
            what: "checkpoint value",
            ..
        })
    ));
}

#[test]
fn errors_are_not_retriable() {
    assert!(!CodecError::InvalidUtf8 { field: "topic" }.is_retriable());
}

/// Strings of any Unicode up to a few hundred bytes (the full 32767 is tested above).
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9._-]{0,40}",
        any::<String>().prop_filter("fits", |s| s.len() <= 300),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn offset_sync_round_trips(
        topic in text(), partition in any::<i32>(), up in any::<i64>(), down in any::<i64>()
    ) {
        let sync = OffsetSync { topic, partition, upstream_offset: up, downstream_offset: down };
        let key = sync.encode_key().unwrap();
        let value = sync.encode_value();
        prop_assert_eq!(key.len(), 2 + sync.topic.len() + 4);
        prop_assert_eq!(value.len(), 16);
        prop_assert_eq!(OffsetSync::decode(&key, &value).unwrap(), sync);
    }

    #[test]
    fn checkpoint_round_trips(
        group in text(), topic in text(), metadata in text(), partition in any::<i32>(),
        up in any::<i64>(), down in any::<i64>()
    ) {
        let checkpoint = Checkpoint {
            group, topic, partition, upstream_offset: up, downstream_offset: down, metadata,
        };
        let key = checkpoint.encode_key().unwrap();
        let value = checkpoint.encode_value().unwrap();
        prop_assert_eq!(value.len(), 2 + 16 + 2 + checkpoint.metadata.len());
        prop_assert_eq!(Checkpoint::decode(&key, &value).unwrap(), checkpoint);
    }

    #[test]
    fn heartbeat_round_trips(source in text(), target in text(), ts in any::<i64>()) {
        let beat = Heartbeat { source_alias: source, target_alias: target, timestamp_ms: ts };
        let key = beat.encode_key().unwrap();
        let value = beat.encode_value();
        prop_assert_eq!(value.len(), 10);
        prop_assert_eq!(Heartbeat::decode(&key, &value).unwrap(), beat);
    }

    /// Whatever decodes re-encodes to the same bytes: the encoding is canonical, so a decoded
    /// record can be compared and rewritten without drift.
    #[test]
    fn arbitrary_bytes_never_panic_and_decoded_records_reencode_exactly(
        key in prop::collection::vec(any::<u8>(), 0..48),
        value in prop::collection::vec(any::<u8>(), 0..48),
    ) {
        if let Ok(sync) = OffsetSync::decode(&key, &value) {
            prop_assert_eq!(sync.encode_key().unwrap(), key.clone());
            prop_assert_eq!(sync.encode_value(), value.clone());
        }
        if let Ok(checkpoint) = Checkpoint::decode(&key, &value) {
            prop_assert_eq!(checkpoint.encode_key().unwrap(), key.clone());
            prop_assert_eq!(checkpoint.encode_value().unwrap(), value.clone());
        }
        if let Ok(beat) = Heartbeat::decode(&key, &value) {
            prop_assert_eq!(beat.encode_key().unwrap(), key.clone());
            prop_assert_eq!(beat.encode_value(), value.clone());
        }
    }

    /// Real records with one byte changed or cut short: an error or another valid record.
    #[test]
    fn damaged_records_never_panic(
        group in text(), topic in text(), metadata in text(),
        at in any::<prop::sample::Index>(), byte in any::<u8>(),
        cut in any::<prop::sample::Index>(), damage_key in any::<bool>(),
    ) {
        let checkpoint = Checkpoint {
            group, topic, partition: 1, upstream_offset: 2, downstream_offset: 3, metadata,
        };
        let mut key = checkpoint.encode_key().unwrap();
        let mut value = checkpoint.encode_value().unwrap();
        let target = if damage_key { &mut key } else { &mut value };
        let i = at.index(target.len());
        target[i] = byte;
        let keep = cut.index(target.len() + 1);
        target.truncate(keep);
        let _ = Checkpoint::decode(&key, &value);
        let _ = Heartbeat::decode(&key, &value);
        let _ = OffsetSync::decode(&key, &value);
    }
}
