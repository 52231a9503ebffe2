//! MM2's internal records (`strait_wire::mm2`): offset syncs, checkpoints and heartbeats, read
//! from topics strait does not own. Two halves, picked by the first input byte:
//!
//! - decode arbitrary key and value bytes; whatever decodes must encode back to exactly the
//!   same bytes (the format has one encoding per record, and decoding is strict);
//! - build a record from arbitrary fields, encode it, and decode it back to the same record
//!   (or be refused for a string over 32767 bytes, never truncated).
#![no_main]

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use strait_wire::mm2::{Checkpoint, CodecError, Heartbeat, OffsetSync};

/// Splits the rest of the input into a key and a value at a position read from it.
fn key_value<'a>(u: &mut Unstructured<'a>) -> Result<(&'a [u8], &'a [u8])> {
    let split = u.arbitrary::<u16>()? as usize;
    let rest = u.bytes(u.len())?;
    let split = split.min(rest.len());
    Ok(rest.split_at(split))
}

fn decode_reencode(kind: u8, u: &mut Unstructured<'_>) -> Result<()> {
    let (key, value) = key_value(u)?;
    match kind % 3 {
        0 => {
            if let Ok(sync) = OffsetSync::decode(key, value) {
                assert_eq!(sync.encode_key().expect("decoded, so encodable"), key);
                assert_eq!(sync.encode_value(), value);
            }
        }
        1 => {
            if let Ok(cp) = Checkpoint::decode(key, value) {
                assert_eq!(cp.encode_key().expect("decoded, so encodable"), key);
                assert_eq!(cp.encode_value().expect("decoded, so encodable"), value);
            }
        }
        _ => {
            if let Ok(beat) = Heartbeat::decode(key, value) {
                assert_eq!(beat.encode_key().expect("decoded, so encodable"), key);
                assert_eq!(beat.encode_value(), value);
            }
        }
    }
    Ok(())
}

/// An encode result: the bytes, or the refusal of a string too long for a Kafka `STRING`.
fn encoded(r: std::result::Result<Vec<u8>, CodecError>, longest: usize) -> Option<Vec<u8>> {
    match r {
        Ok(bytes) => {
            assert!(longest <= strait_wire::mm2::MAX_STRING_LEN);
            Some(bytes)
        }
        Err(CodecError::StringTooLong { len, .. }) => {
            assert!(len > strait_wire::mm2::MAX_STRING_LEN);
            None
        }
        Err(e) => panic!("encoding failed with {e}"),
    }
}

/// A string, sometimes made longer than a Kafka `STRING` holds.
fn string(u: &mut Unstructured<'_>) -> Result<String> {
    let mut s: String = u.arbitrary()?;
    if u.ratio(1, 16)? {
        let pad =
            strait_wire::mm2::MAX_STRING_LEN + 1 - s.len().min(strait_wire::mm2::MAX_STRING_LEN);
        s.push_str(&"x".repeat(pad - u.int_in_range(0..=1)?));
    }
    Ok(s)
}

fn encode_decode(kind: u8, u: &mut Unstructured<'_>) -> Result<()> {
    match kind % 3 {
        0 => {
            let sync = OffsetSync {
                topic: string(u)?,
                partition: u.arbitrary()?,
                upstream_offset: u.arbitrary()?,
                downstream_offset: u.arbitrary()?,
            };
            if let Some(key) = encoded(sync.encode_key(), sync.topic.len()) {
                assert_eq!(OffsetSync::decode(&key, &sync.encode_value()), Ok(sync));
            }
        }
        1 => {
            let cp = Checkpoint {
                group: string(u)?,
                topic: string(u)?,
                partition: u.arbitrary()?,
                upstream_offset: u.arbitrary()?,
                downstream_offset: u.arbitrary()?,
                metadata: string(u)?,
            };
            let key = encoded(cp.encode_key(), cp.group.len().max(cp.topic.len()));
            let value = encoded(cp.encode_value(), cp.metadata.len());
            if let (Some(key), Some(value)) = (key, value) {
                assert_eq!(Checkpoint::decode(&key, &value), Ok(cp));
            }
        }
        _ => {
            let beat = Heartbeat {
                source_alias: string(u)?,
                target_alias: string(u)?,
                timestamp_ms: u.arbitrary()?,
            };
            let longest = beat.source_alias.len().max(beat.target_alias.len());
            if let Some(key) = encoded(beat.encode_key(), longest) {
                assert_eq!(Heartbeat::decode(&key, &beat.encode_value()), Ok(beat));
            }
        }
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(mode) = u.arbitrary::<u8>() else {
        return;
    };
    let _ = if mode < 128 {
        decode_reencode(mode, &mut u)
    } else {
        encode_decode(mode, &mut u)
    };
});
