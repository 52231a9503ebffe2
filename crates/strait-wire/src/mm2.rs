//! MirrorMaker 2's three internal record formats, byte for byte (KIP-382; `docs/mm2-behaviour.md`
//! §1.1-1.4): offset syncs, checkpoints and heartbeats.
//!
//! strait writes these topics so that MM2's own tooling (`RemoteClusterUtils.translateOffsets`,
//! the `CheckpointFormatter`, dashboards) keeps working on a cluster strait mirrors into. Keys and
//! values are Kafka `Schema`/`Struct` encodings: big-endian `INT16`/`INT32`/`INT64`, and `STRING`
//! as an `int16` length (0..=32767, never null) followed by that many UTF-8 bytes. No varints, no
//! tagged fields.
//!
//! | record | key | value |
//! |---|---|---|
//! | [`OffsetSync`] | `topic:STRING partition:INT32` | `upstreamOffset:INT64 offset:INT64` (no version) |
//! | [`Checkpoint`] | `group:STRING topic:STRING partition:INT32` | `version:INT16=0 upstreamOffset:INT64 offset:INT64 metadata:STRING` |
//! | [`Heartbeat`] | `sourceClusterAlias:STRING targetClusterAlias:STRING` | `version:INT16=0 timestamp:INT64` |
//!
//! # Where decoding is stricter than MM2
//!
//! MM2's readers (`Checkpoint.deserializeRecord`, `Heartbeat.deserializeRecord`) read the
//! version, then `assert version == 0` and read the v0 fields; Java assertions are off in
//! production, so any version is read as v0. They also stop after the last field and ignore
//! whatever follows, and decode malformed UTF-8 to U+FFFD. strait refuses all three
//! ([`CodecError::UnsupportedVersion`], [`CodecError::TrailingBytes`],
//! [`CodecError::InvalidUtf8`]): MM2 and strait only ever write exact v0 records, so a record
//! that is anything else was written by something newer or is damaged, and reading its first
//! bytes as v0 could yield wrong offsets silently (Kafka's own versioned records have inserted
//! fields mid-record in later versions). A caller that meets such a record should skip it and say
//! so, never guess.

/// The only value version MM2 writes for checkpoints and heartbeats (`Checkpoint.VERSION`,
/// `Heartbeat.VERSION`).
pub const VERSION_0: i16 = 0;

/// The longest string a Kafka `STRING` can hold, in UTF-8 bytes (`Short.MAX_VALUE`).
pub const MAX_STRING_LEN: usize = i16::MAX as usize;

/// Why bytes could not be decoded as an MM2 internal record, or a record could not be encoded.
///
/// None of these is retriable: the same bytes (or the same record) fail the same way every time.
/// `field` is the Kafka schema's field name (`"topic"`, `"upstreamOffset"`, ...), for messages.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum CodecError {
    /// The input ends inside a field.
    #[error("input ends inside field {field}: needs {needed} more bytes, {available} left")]
    Truncated {
        /// The field being read.
        field: &'static str,
        /// Bytes the field needs from where it starts (for a string: its declared length).
        needed: usize,
        /// Bytes left in the input where the field starts.
        available: usize,
    },
    /// A string's length prefix is negative. Kafka's `STRING` is not nullable.
    #[error("string field {field} has negative length {length}")]
    NegativeStringLength {
        /// The field being read.
        field: &'static str,
        /// The length prefix as read.
        length: i16,
    },
    /// A string's bytes are not UTF-8 (MM2 would decode them lossily; strait refuses).
    #[error("string field {field} is not valid UTF-8")]
    InvalidUtf8 {
        /// The field being read.
        field: &'static str,
    },
    /// The value's version header is not one this crate reads (only [`VERSION_0`]).
    #[error("{record} value has version {version}, only version 0 is supported")]
    UnsupportedVersion {
        /// Which record type (`"checkpoint"`, `"heartbeat"`, or one of strait's own).
        record: &'static str,
        /// The version as read.
        version: i16,
    },
    /// Bytes are left after the last field.
    #[error("{extra} unexpected bytes after the last field of a {what}")]
    TrailingBytes {
        /// What was decoded (`"checkpoint key"`, ...).
        what: &'static str,
        /// How many bytes were left over.
        extra: usize,
    },
    /// A string to encode is longer than a Kafka `STRING` can hold ([`MAX_STRING_LEN`] bytes).
    /// It is refused, never truncated.
    #[error("string field {field} is {len} bytes, the most a Kafka STRING holds is 32767")]
    StringTooLong {
        /// The field being written.
        field: &'static str,
        /// Its length in UTF-8 bytes.
        len: usize,
    },
}

impl CodecError {
    /// Whether trying again may succeed: never, see [`CodecError`].
    pub fn is_retriable(&self) -> bool {
        false
    }
}

/// A cursor over a key or value, with checked reads for Kafka's primitive types.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    fn take(&mut self, field: &'static str, n: usize) -> Result<&'a [u8], CodecError> {
        if self.buf.len() < n {
            return Err(CodecError::Truncated {
                field,
                needed: n,
                available: self.buf.len(),
            });
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], CodecError> {
        let bytes = self.take(field, N)?;
        // `take` returned exactly N bytes.
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    pub(crate) fn i8(&mut self, field: &'static str) -> Result<i8, CodecError> {
        self.array::<1>(field).map(i8::from_be_bytes)
    }

    pub(crate) fn i16(&mut self, field: &'static str) -> Result<i16, CodecError> {
        self.array::<2>(field).map(i16::from_be_bytes)
    }

    pub(crate) fn i32(&mut self, field: &'static str) -> Result<i32, CodecError> {
        self.array::<4>(field).map(i32::from_be_bytes)
    }

    pub(crate) fn i64(&mut self, field: &'static str) -> Result<i64, CodecError> {
        self.array::<8>(field).map(i64::from_be_bytes)
    }

    /// A Kafka `STRING`: `int16` length, then that many UTF-8 bytes.
    pub(crate) fn string(&mut self, field: &'static str) -> Result<String, CodecError> {
        let length = self.i16(field)?;
        let len = usize::try_from(length)
            .map_err(|_| CodecError::NegativeStringLength { field, length })?;
        let bytes = self.take(field, len)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| CodecError::InvalidUtf8 { field })
    }

    /// Fails unless every byte has been read.
    pub(crate) fn finish(self, what: &'static str) -> Result<(), CodecError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(CodecError::TrailingBytes {
                what,
                extra: self.buf.len(),
            })
        }
    }
}

/// Appends a Kafka `STRING`, or refuses one over [`MAX_STRING_LEN`] bytes.
pub(crate) fn put_string(
    out: &mut Vec<u8>,
    field: &'static str,
    s: &str,
) -> Result<(), CodecError> {
    let len = i16::try_from(s.len()).map_err(|_| CodecError::StringTooLong {
        field,
        len: s.len(),
    })?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

/// Reads a value's `version:INT16` header and refuses anything but [`VERSION_0`].
fn read_version(r: &mut Reader<'_>, record: &'static str) -> Result<(), CodecError> {
    match r.i16("version")? {
        VERSION_0 => Ok(()),
        version => Err(CodecError::UnsupportedVersion { record, version }),
    }
}

/// One record of the offset-syncs topic (`mm2-offset-syncs.<alias>.internal`, `OffsetSync.java`):
/// source record `upstream_offset` of `topic`/`partition` was written at `downstream_offset` in
/// the remote topic.
///
/// ```
/// use strait_wire::mm2::OffsetSync;
///
/// let sync = OffsetSync {
///     topic: "orders".into(),
///     partition: 3,
///     upstream_offset: 1000,
///     downstream_offset: 990,
/// };
/// let key = sync.encode_key()?;
/// assert_eq!(key, b"\x00\x06orders\x00\x00\x00\x03");
/// assert_eq!(OffsetSync::decode(&key, &sync.encode_value())?, sync);
/// # Ok::<(), strait_wire::mm2::CodecError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OffsetSync {
    /// The upstream (source) topic name, not the remote one.
    pub topic: String,
    /// The partition, the same on both sides.
    pub partition: i32,
    /// The record's offset in the source partition.
    pub upstream_offset: i64,
    /// The record's offset in the remote (target) partition.
    pub downstream_offset: i64,
}

impl OffsetSync {
    /// The key: `topic:STRING partition:INT32`.
    pub fn encode_key(&self) -> Result<Vec<u8>, CodecError> {
        let mut out = Vec::with_capacity(2 + self.topic.len() + 4);
        put_string(&mut out, "topic", &self.topic)?;
        out.extend_from_slice(&self.partition.to_be_bytes());
        Ok(out)
    }

    /// The value: `upstreamOffset:INT64 offset:INT64`, 16 bytes, with no version header.
    pub fn encode_value(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16);
        out.extend_from_slice(&self.upstream_offset.to_be_bytes());
        out.extend_from_slice(&self.downstream_offset.to_be_bytes());
        out
    }

    /// Decodes a record's key and value.
    pub fn decode(key: &[u8], value: &[u8]) -> Result<Self, CodecError> {
        let mut k = Reader::new(key);
        let topic = k.string("topic")?;
        let partition = k.i32("partition")?;
        k.finish("offset sync key")?;
        let mut v = Reader::new(value);
        let upstream_offset = v.i64("upstreamOffset")?;
        let downstream_offset = v.i64("offset")?;
        v.finish("offset sync value")?;
        Ok(Self {
            topic,
            partition,
            upstream_offset,
            downstream_offset,
        })
    }
}

/// One record of the checkpoints topic (`<source>.checkpoints.internal`, `Checkpoint.java`):
/// consumer group `group`, at `upstream_offset` in the source partition, translates to
/// `downstream_offset` in the remote `topic`.
///
/// ```
/// use strait_wire::mm2::Checkpoint;
///
/// let checkpoint = Checkpoint {
///     group: "billing-app".into(),
///     topic: "us-west.orders".into(),
///     partition: 3,
///     upstream_offset: 1000,
///     downstream_offset: 991,
///     metadata: String::new(),
/// };
/// let (key, value) = (checkpoint.encode_key()?, checkpoint.encode_value()?);
/// assert_eq!((key.len(), value.len()), (33, 20));
/// assert_eq!(Checkpoint::decode(&key, &value)?, checkpoint);
/// # Ok::<(), strait_wire::mm2::CodecError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Checkpoint {
    /// The consumer group id.
    pub group: String,
    /// The **downstream** (remote) topic name, e.g. `us-west.orders`; un-prefixed when the
    /// upstream topic itself came from the target (failback, `docs/mm2-behaviour.md` §1.3).
    pub topic: String,
    /// The partition, the same on both sides.
    pub partition: i32,
    /// The group's committed offset in the source partition.
    pub upstream_offset: i64,
    /// The translated offset in the remote partition.
    pub downstream_offset: i64,
    /// The group's commit metadata, copied as is (empty if none; never null).
    pub metadata: String,
}

impl Checkpoint {
    /// The key: `group:STRING topic:STRING partition:INT32`.
    pub fn encode_key(&self) -> Result<Vec<u8>, CodecError> {
        let mut out = Vec::with_capacity(4 + self.group.len() + self.topic.len() + 4);
        put_string(&mut out, "group", &self.group)?;
        put_string(&mut out, "topic", &self.topic)?;
        out.extend_from_slice(&self.partition.to_be_bytes());
        Ok(out)
    }

    /// The value: `version:INT16=0 upstreamOffset:INT64 offset:INT64 metadata:STRING`.
    pub fn encode_value(&self) -> Result<Vec<u8>, CodecError> {
        let mut out = Vec::with_capacity(2 + 16 + 2 + self.metadata.len());
        out.extend_from_slice(&VERSION_0.to_be_bytes());
        out.extend_from_slice(&self.upstream_offset.to_be_bytes());
        out.extend_from_slice(&self.downstream_offset.to_be_bytes());
        put_string(&mut out, "metadata", &self.metadata)?;
        Ok(out)
    }

    /// Decodes a record's key and value; see the module docs for what is refused.
    pub fn decode(key: &[u8], value: &[u8]) -> Result<Self, CodecError> {
        let mut k = Reader::new(key);
        let group = k.string("group")?;
        let topic = k.string("topic")?;
        let partition = k.i32("partition")?;
        k.finish("checkpoint key")?;
        let mut v = Reader::new(value);
        read_version(&mut v, "checkpoint")?;
        let upstream_offset = v.i64("upstreamOffset")?;
        let downstream_offset = v.i64("offset")?;
        let metadata = v.string("metadata")?;
        v.finish("checkpoint value")?;
        Ok(Self {
            group,
            topic,
            partition,
            upstream_offset,
            downstream_offset,
            metadata,
        })
    }
}

/// One record of the `heartbeats` topic (`Heartbeat.java`): the heartbeat connector of flow
/// `source_alias -> target_alias` was alive at `timestamp_ms`.
///
/// ```
/// use strait_wire::mm2::Heartbeat;
///
/// let beat = Heartbeat { source_alias: "A".into(), target_alias: "B".into(), timestamp_ms: 1 };
/// assert_eq!(beat.encode_key()?, b"\x00\x01A\x00\x01B");
/// assert_eq!(beat.encode_value(), b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01");
/// # Ok::<(), strait_wire::mm2::CodecError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Heartbeat {
    /// `sourceClusterAlias`.
    pub source_alias: String,
    /// `targetClusterAlias`.
    pub target_alias: String,
    /// Milliseconds since the Unix epoch.
    pub timestamp_ms: i64,
}

impl Heartbeat {
    /// The key: `sourceClusterAlias:STRING targetClusterAlias:STRING`.
    pub fn encode_key(&self) -> Result<Vec<u8>, CodecError> {
        let mut out = Vec::with_capacity(4 + self.source_alias.len() + self.target_alias.len());
        put_string(&mut out, "sourceClusterAlias", &self.source_alias)?;
        put_string(&mut out, "targetClusterAlias", &self.target_alias)?;
        Ok(out)
    }

    /// The value: `version:INT16=0 timestamp:INT64`, 10 bytes.
    pub fn encode_value(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(10);
        out.extend_from_slice(&VERSION_0.to_be_bytes());
        out.extend_from_slice(&self.timestamp_ms.to_be_bytes());
        out
    }

    /// Decodes a record's key and value; see the module docs for what is refused.
    pub fn decode(key: &[u8], value: &[u8]) -> Result<Self, CodecError> {
        let mut k = Reader::new(key);
        let source_alias = k.string("sourceClusterAlias")?;
        let target_alias = k.string("targetClusterAlias")?;
        k.finish("heartbeat key")?;
        let mut v = Reader::new(value);
        read_version(&mut v, "heartbeat")?;
        let timestamp_ms = v.i64("timestamp")?;
        v.finish("heartbeat value")?;
        Ok(Self {
            source_alias,
            target_alias,
            timestamp_ms,
        })
    }
}
