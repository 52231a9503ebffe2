//! What `strait verify` keeps of a record: a digest per field (key, value, headers) and its
//! create time, taken from fetched batches as a consumer reading committed data sees them.
//!
//! Digests are rapidhash v3 (64 bits per field), whose output is fixed across versions and
//! platforms. They are of the records, not of their batches: a batch strait rebuilt (a
//! compacted batch made dense, `docs/design.md` §3.2), merged or recompressed on the target
//! holds records with the same digests as the source's.

use bytes::Bytes;
use rapidhash::v3::{rapidhash_v3, RapidStreamHasherV3, DEFAULT_RAPID_SECRETS};
use strait_kafka::fetch::{AbortedBatches, AbortedTransaction};
use strait_wire::records::batch_records;
use strait_wire::BatchScanner;

/// One record's fields, digested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordDigest {
    /// The key's digest; `None` for a null key.
    pub key: Option<u64>,
    /// The value's digest; `None` for a null value (a tombstone).
    pub value: Option<u64>,
    /// The digest of the headers, in order, repeated keys and null values included.
    pub headers: u64,
    /// The create time; `None` when the broker stamped the batch (LogAppendTime), which a copy
    /// cannot share with its original (as `flow/recover/tail.rs` compares the target's tail).
    pub timestamp: Option<i64>,
}

impl RecordDigest {
    /// Digests a record's fields.
    pub fn of(
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(Bytes, Option<Bytes>)],
        timestamp: Option<i64>,
    ) -> Self {
        let mut h = RapidStreamHasherV3::new(&DEFAULT_RAPID_SECRETS);
        h.write(&(headers.len() as u64).to_le_bytes());
        for (name, value) in headers {
            h.write(&(name.len() as u64).to_le_bytes());
            h.write(name);
            match value {
                Some(v) => {
                    h.write(&(v.len() as u64).to_le_bytes());
                    h.write(v);
                }
                None => h.write(&u64::MAX.to_le_bytes()),
            }
        }
        RecordDigest {
            key: key.map(rapidhash_v3),
            value: value.map(rapidhash_v3),
            headers: h.finish(),
            timestamp,
        }
    }

    /// The fields that differ from `other`'s: `key`, `value`, `headers`, `timestamp`. Empty
    /// when the two are the same record; a timestamp is compared only when both carry their
    /// create time.
    pub fn differences(&self, other: &RecordDigest) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.key != other.key {
            out.push("key");
        }
        if self.value != other.value {
            out.push("value");
        }
        if self.headers != other.headers {
            out.push("headers");
        }
        if let (Some(a), Some(b)) = (self.timestamp, other.timestamp) {
            if a != b {
                out.push("timestamp");
            }
        }
        out
    }
}

/// A record a consumer reading committed data sees, at its offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// Its offset in its partition.
    pub offset: i64,
    /// Its fields, digested.
    pub digest: RecordDigest,
}

/// What one fetched buffer of a partition holds from offset `from` to `end` (exclusive).
#[derive(Debug, Default)]
pub struct Digested {
    /// The committed records, in offset order.
    pub entries: Vec<Entry>,
    /// Records of aborted transactions passed over (their batches' record counts).
    pub aborted: u64,
    /// The offset after the last complete batch read (`from` when there was none).
    pub next: i64,
}

/// Why fetched bytes could not be read: a batch that does not scan (a bad CRC, length or magic)
/// or whose records do not decode.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Unreadable(pub String);

/// Reads the complete batches of `records` (one fetch answer of a partition, its aborted
/// transactions `aborted`): every record at offsets in `[from, end)` of a batch that is neither
/// a control batch nor part of an aborted transaction, digested. Bytes from outside: a batch
/// that does not decode is an error, never a panic.
pub fn digest_fetched(
    records: Bytes,
    aborted: &[AbortedTransaction],
    from: i64,
    end: i64,
) -> Result<Digested, Unreadable> {
    let mut out = Digested {
        next: from,
        ..Digested::default()
    };
    let mut aborts = AbortedBatches::new(aborted);
    for batch in BatchScanner::new(records) {
        let batch = batch.map_err(|e| Unreadable(e.to_string()))?;
        let header = &batch.header;
        if header.base_offset >= end {
            break;
        }
        let next = header.next_offset();
        // The abort tracker follows every batch in order, the ones before `from` too.
        let is_aborted = aborts.is_aborted(&batch);
        if next <= from {
            continue;
        }
        out.next = out.next.max(next.min(end));
        if header.attributes.is_control() {
            continue;
        }
        if is_aborted {
            out.aborted += u64::try_from(header.record_count).unwrap_or(0);
            continue;
        }
        let log_append = header.attributes.timestamp_type_log_append();
        let records = batch_records(&batch).map_err(|e| {
            Unreadable(format!(
                "the batch at offset {} does not decode: {e}",
                header.base_offset
            ))
        })?;
        for r in records {
            let offset = header.base_offset.saturating_add(i64::from(r.offset_delta));
            if offset < from || offset >= end {
                continue;
            }
            let timestamp =
                (!log_append).then(|| header.base_timestamp.saturating_add(r.timestamp_delta));
            out.entries.push(Entry {
                offset,
                digest: RecordDigest::of(
                    r.key.as_deref(),
                    r.value.as_deref(),
                    &r.headers,
                    timestamp,
                ),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(key: &[u8], value: Option<&[u8]>, headers: &[(&str, Option<&str>)]) -> RecordDigest {
        let headers: Vec<(Bytes, Option<Bytes>)> = headers
            .iter()
            .map(|(k, v)| {
                (
                    Bytes::copy_from_slice(k.as_bytes()),
                    v.map(|v| Bytes::copy_from_slice(v.as_bytes())),
                )
            })
            .collect();
        RecordDigest::of(Some(key), value, &headers, Some(7))
    }

    #[test]
    fn each_field_is_told_apart() {
        let a = digest(b"k", Some(b"v"), &[("h", Some("1"))]);
        assert!(a.differences(&a).is_empty());
        assert_eq!(
            a.differences(&digest(b"K", Some(b"v"), &[("h", Some("1"))])),
            ["key"]
        );
        assert_eq!(
            a.differences(&digest(b"k", None, &[("h", Some("1"))])),
            ["value"]
        );
        assert_eq!(
            a.differences(&digest(b"k", Some(b""), &[("h", Some("1"))])),
            ["value"]
        );
        // Header order, a null header value and header boundaries all count.
        assert_eq!(
            a.differences(&digest(b"k", Some(b"v"), &[("h", None)])),
            ["headers"]
        );
        assert_eq!(
            a.differences(&digest(b"k", Some(b"v"), &[("h1", Some(""))])),
            ["headers"]
        );
        let two = digest(b"k", Some(b"v"), &[("a", Some("1")), ("b", Some("2"))]);
        let swapped = digest(b"k", Some(b"v"), &[("b", Some("2")), ("a", Some("1"))]);
        assert_eq!(two.differences(&swapped), ["headers"]);
        let later = RecordDigest {
            timestamp: Some(8),
            ..a
        };
        assert_eq!(a.differences(&later), ["timestamp"]);
        // A broker-stamped time is not compared.
        let stamped = RecordDigest {
            timestamp: None,
            ..a
        };
        assert!(a.differences(&stamped).is_empty());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        // A base offset, a batch length of 61, an epoch, then magic 0xab and bytes that are no
        // batch: the scan fails on the magic.
        let mut junk = vec![0u8; 8];
        junk.extend_from_slice(&61i32.to_be_bytes());
        junk.extend_from_slice(&[0u8; 4]);
        junk.extend(std::iter::repeat_n(0xab, 80));
        let bytes = Bytes::from(junk);
        assert!(digest_fetched(bytes, &[], 0, 100).is_err());
        // A partial batch is no error: nothing read, the position unchanged.
        let got = digest_fetched(Bytes::from_static(&[0u8; 5]), &[], 3, 100).unwrap();
        assert!(got.entries.is_empty());
        assert_eq!(got.next, 3);
    }
}
