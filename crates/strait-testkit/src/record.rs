//! A record as tests write and read it with [`crate::Rdk`].

use serde::{Deserialize, Serialize};

/// One Kafka record. When producing, `offset` is ignored and `timestamp_ms: None` lets the
/// producer stamp the current time; when consuming, both are filled in from the broker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestRecord {
    /// Partition to write to, or the one read from.
    pub partition: i32,
    /// Offset read from; `None` for records not read from a broker.
    pub offset: Option<i64>,
    /// `None` is a null key.
    pub key: Option<Vec<u8>>,
    /// `None` is a null value (a tombstone).
    pub value: Option<Vec<u8>>,
    /// Headers in order; a `None` value is a null header value.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// Record timestamp in milliseconds since the epoch.
    pub timestamp_ms: Option<i64>,
}

impl TestRecord {
    /// A record for `partition` with no headers, no offset and no explicit timestamp.
    pub fn new(partition: i32, key: Option<&[u8]>, value: Option<&[u8]>) -> TestRecord {
        TestRecord {
            partition,
            key: key.map(<[u8]>::to_vec),
            value: value.map(<[u8]>::to_vec),
            ..TestRecord::default()
        }
    }

    /// Appends a header.
    pub fn with_header(mut self, name: &str, value: Option<&[u8]>) -> TestRecord {
        self.headers
            .push((name.to_owned(), value.map(<[u8]>::to_vec)));
        self
    }

    /// Sets an explicit timestamp (milliseconds since the epoch).
    pub fn with_timestamp(mut self, timestamp_ms: i64) -> TestRecord {
        self.timestamp_ms = Some(timestamp_ms);
        self
    }

    /// Whether key, value and headers are equal: what replication must preserve, ignoring
    /// partition, offset and timestamp.
    pub fn same_payload(&self, other: &TestRecord) -> bool {
        self.key == other.key && self.value == other.value && self.headers == other.headers
    }
}
