//! The records inside a v2 batch (KIP-98, Kafka's `DefaultRecord`), and the codecs around them,
//! for the batches that must be opened: the rebuild path of `docs/design.md` §3.2.
//!
//! Layout of one record once the batch's records section is decompressed (lengths and deltas are
//! zig-zag varints; `varlong` is the 64-bit kind):
//!
//! ```text
//! length varint | attributes i8 | timestampDelta varlong | offsetDelta varint
//! keyLength varint (<0: null) | key | valueLength varint (<0: null) | value
//! headerCount varint | per header: keyLength varint | key | valueLength varint (<0: null) | value
//! ```
//!
//! Why not `kafka-protocol`'s `RecordBatchDecoder`: it keeps headers in an `IndexMap`, which
//! merges repeated header keys. Kafka allows them and a mirror must pass them through, so a
//! [`RawRecord`] keeps its headers as an ordered list of raw byte slices.
//!
//! Why not its decompressors: they inflate the whole input before looking at the size (and its
//! raw-snappy path allocates whatever the input's length prefix says), so a small batch could make
//! us allocate gigabytes. [`decompress`] stops at a [`DecompressLimit`] instead.
//!
//! Framing, as Kafka's Java client reads and writes it: gzip stream; snappy in snappy-java's
//! "xerial" framing (a plain snappy block is accepted on read, as snappy-java does); LZ4 frame
//! format with independent 64 KiB blocks (`KafkaLZ4BlockOutputStream`); a zstd frame.
use std::io::{Read, Write};

use bytes::Bytes;
use kafka_protocol::records::Compression;

use crate::batch::Attributes;

/// One record of a v2 batch, its fields as on the wire.
///
/// Keys, values and headers are zero-copy slices of the (decompressed) records buffer. Headers
/// keep their order and repeated keys; a header key is a UTF-8 string in Kafka, kept here as the
/// raw bytes it was sent as.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawRecord {
    /// Offset of the record relative to the batch's `baseOffset`.
    pub offset_delta: i32,
    /// Timestamp of the record relative to the batch's `baseTimestamp`.
    pub timestamp_delta: i64,
    /// The record-level attributes byte (unused by Kafka so far, kept as is).
    pub attributes: i8,
    /// The key, `None` for a null key.
    pub key: Option<Bytes>,
    /// The value, `None` for a null value (a tombstone).
    pub value: Option<Bytes>,
    /// The headers in order: key bytes and value (`None` for a null value).
    pub headers: Vec<(Bytes, Option<Bytes>)>,
}

/// Why records could not be decoded, decompressed, compressed or encoded.
///
/// `record` fields count records from 0 in the order of the batch. None of these is retriable:
/// the same bytes fail the same way every time.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordsError {
    /// The batch's `recordCount` is negative.
    #[error("record count {count} is negative")]
    NegativeRecordCount {
        /// The `recordCount` field.
        count: i32,
    },
    /// The records section ends inside a record.
    #[error("record {record} is cut short in its {field}")]
    Truncated {
        /// Index of the record in the batch.
        record: usize,
        /// The field being read.
        field: &'static str,
    },
    /// A varint is longer than its type allows, or its value does not fit it.
    #[error("record {record} has an invalid varint in its {field}")]
    InvalidVarint {
        /// Index of the record in the batch.
        record: usize,
        /// The field being read.
        field: &'static str,
    },
    /// A length or count that may not be negative is.
    #[error("record {record} has invalid {field} {value}")]
    InvalidLength {
        /// Index of the record in the batch.
        record: usize,
        /// The field being read.
        field: &'static str,
        /// The value read.
        value: i32,
    },
    /// A record's fields do not add up to its `length` prefix.
    #[error("record {record} declares {declared} bytes but its fields take {read}")]
    SizeMismatch {
        /// Index of the record in the batch.
        record: usize,
        /// The record's `length` field.
        declared: i32,
        /// Bytes its fields took.
        read: usize,
    },
    /// Bytes are left after the `recordCount` records (Kafka: "records still remaining").
    #[error("{extra} bytes left after the {count} records the batch declares")]
    TrailingBytes {
        /// The batch's `recordCount`.
        count: i32,
        /// Bytes left over.
        extra: usize,
    },
    /// The codec id in the batch's attributes is not one Kafka defines (5-7).
    #[error("unknown compression codec id {id}")]
    UnknownCodec {
        /// Attributes bits 0-2.
        id: u8,
    },
    /// The compressed records are not valid for their codec.
    #[error("cannot decompress {codec:?} records: {reason}")]
    Decompress {
        /// The batch's codec.
        codec: Compression,
        /// What the codec reported.
        reason: String,
    },
    /// The records decompress to more than the [`DecompressLimit`] allows.
    #[error(
        "{codec:?} records of {compressed} bytes decompress to more than the limit of {limit} \
         bytes"
    )]
    DecompressedTooLarge {
        /// The batch's codec.
        codec: Compression,
        /// Size of the compressed records section.
        compressed: usize,
        /// The limit applied to it (see [`DecompressLimit::max_output`]).
        limit: usize,
    },
    /// The codec failed to compress (it should not on any input).
    #[error("cannot compress records with {codec:?}: {reason}")]
    Compress {
        /// The codec asked for.
        codec: Compression,
        /// What the codec reported.
        reason: String,
    },
    /// A record, or one of its fields, is too large for its length field (an i32).
    #[error("a record's {field} of {size} bytes does not fit the v2 format")]
    TooLarge {
        /// The field that overflowed (`record` for the record as a whole).
        field: &'static str,
        /// Its size.
        size: usize,
    },
}

/// How far a batch's records may grow when decompressed; what stops a decompression bomb.
///
/// The limit for a records section of `n` compressed bytes is
/// `min(max_bytes, max(ratio_exempt_bytes, n * max_ratio))`: see
/// [`max_output`](Self::max_output). The ratio rule catches a small bomb early; the exemption
/// keeps it from refusing real batches of very repetitive data, which compress far better than
/// 64:1 (zstd turns a megabyte of identical records into a few kilobytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecompressLimit {
    /// Hard cap on one batch's decompressed records, in bytes. Default 256 MiB.
    pub max_bytes: usize,
    /// Largest decompressed-to-compressed ratio accepted once the output passes
    /// `ratio_exempt_bytes`. Default 64.
    pub max_ratio: usize,
    /// Output up to this many bytes is accepted whatever its ratio. Default 16 MiB.
    pub ratio_exempt_bytes: usize,
}

impl Default for DecompressLimit {
    fn default() -> Self {
        Self {
            max_bytes: 256 << 20,
            max_ratio: 64,
            ratio_exempt_bytes: 16 << 20,
        }
    }
}

impl DecompressLimit {
    /// The most bytes `compressed_len` compressed bytes may decompress to.
    pub fn max_output(&self, compressed_len: usize) -> usize {
        compressed_len
            .saturating_mul(self.max_ratio)
            .max(self.ratio_exempt_bytes)
            .min(self.max_bytes)
    }
}

/// Decodes the records of a scanned batch: decompresses its records section with the codec in
/// its header and parses `recordCount` records, under the default [`DecompressLimit`].
///
/// Trusts `batch.header` as the scanner parsed it; a batch from anywhere else should go through
/// [`decode_records`] with its own checks.
pub fn batch_records(batch: &crate::RawBatch) -> Result<Vec<RawRecord>, RecordsError> {
    decode_records(
        batch.header.attributes,
        &batch.records_bytes(),
        batch.header.record_count,
        &DecompressLimit::default(),
    )
}

/// Decompresses `payload` (a batch's records section) with the codec in `attributes`, under
/// `limit`, and parses `record_count` records from it (see [`parse_records`]).
pub fn decode_records(
    attributes: Attributes,
    payload: &Bytes,
    record_count: i32,
    limit: &DecompressLimit,
) -> Result<Vec<RawRecord>, RecordsError> {
    if record_count < 0 {
        return Err(RecordsError::NegativeRecordCount {
            count: record_count,
        });
    }
    let codec = attributes.compression().ok_or(RecordsError::UnknownCodec {
        id: attributes.codec_id(),
    })?;
    let data = decompress(codec, payload, limit)?;
    parse_records(&data, record_count)
}

/// Parses exactly `record_count` records from `data`, an uncompressed records section.
///
/// Every byte must belong to a record: a section that ends early or has bytes left over is an
/// error, as it is for Kafka. Memory grows with the records actually parsed (each consumes at
/// least 7 bytes of `data`), whatever the count says; keys, values and headers are slices of
/// `data`, not copies.
pub fn parse_records(data: &Bytes, record_count: i32) -> Result<Vec<RawRecord>, RecordsError> {
    let count = usize::try_from(record_count).map_err(|_| RecordsError::NegativeRecordCount {
        count: record_count,
    })?;
    let mut cursor = Cursor::new(data);
    // The smallest record takes 7 bytes (length, attributes, two deltas, two null lengths and a
    // header count, one byte each), but a parsed record takes some 100, so reserve only a little
    // up front and let the vector grow with the records actually there.
    let mut records = Vec::with_capacity(count.min(data.len() / 7).min(PREALLOC_RECORDS));
    for record in 0..count {
        records.push(parse_record(&mut cursor, record)?);
    }
    match cursor.remaining() {
        0 => Ok(records),
        extra => Err(RecordsError::TrailingBytes {
            count: record_count,
            extra,
        }),
    }
}

/// Records reserved before parsing; more are added as they parse.
const PREALLOC_RECORDS: usize = 1024;
/// Headers reserved per record before parsing them.
const PREALLOC_HEADERS: usize = 16;

fn parse_record(cursor: &mut Cursor<'_>, record: usize) -> Result<RawRecord, RecordsError> {
    let at = |field: &'static str| move |bad: Bad| bad.at(record, field);
    let length = cursor.varint().map_err(at("length"))?;
    let size = usize::try_from(length).map_err(|_| RecordsError::InvalidLength {
        record,
        field: "length",
        value: length,
    })?;
    if size > cursor.remaining() {
        return Err(RecordsError::Truncated {
            record,
            field: "length",
        });
    }
    let mut body = cursor.sub(size);
    cursor.skip(size);

    let attributes = body.byte().map_err(at("attributes"))? as i8;
    let timestamp_delta = body.varlong().map_err(at("timestampDelta"))?;
    let offset_delta = body.varint().map_err(at("offsetDelta"))?;
    let key = body.nullable_bytes().map_err(at("key"))?;
    let value = body.nullable_bytes().map_err(at("value"))?;
    let header_count = body.varint().map_err(at("headerCount"))?;
    let header_count = usize::try_from(header_count).map_err(|_| RecordsError::InvalidLength {
        record,
        field: "headerCount",
        value: header_count,
    })?;
    // A header takes at least 2 bytes (two one-byte lengths) of input, 64 parsed.
    let mut headers =
        Vec::with_capacity(header_count.min(body.remaining() / 2).min(PREALLOC_HEADERS));
    for _ in 0..header_count {
        let key_length = body.varint().map_err(at("headerKey"))?;
        let key_size = usize::try_from(key_length).map_err(|_| RecordsError::InvalidLength {
            record,
            field: "headerKey",
            value: key_length,
        })?;
        let key = body.bytes(key_size).map_err(at("headerKey"))?;
        let value = body.nullable_bytes().map_err(at("headerValue"))?;
        headers.push((key, value));
    }
    if body.remaining() != 0 {
        return Err(RecordsError::SizeMismatch {
            record,
            declared: length,
            read: size - body.remaining(),
        });
    }
    Ok(RawRecord {
        offset_delta,
        timestamp_delta,
        attributes,
        key,
        value,
        headers,
    })
}

/// What went wrong reading one field, before the caller says which record and field it was.
#[derive(Debug, Clone, Copy)]
enum Bad {
    Truncated,
    Varint,
}

impl Bad {
    fn at(self, record: usize, field: &'static str) -> RecordsError {
        match self {
            Self::Truncated => RecordsError::Truncated { record, field },
            Self::Varint => RecordsError::InvalidVarint { record, field },
        }
    }
}

/// A read position in `buf`, never past `end` (and `end` never past `buf.len()`).
struct Cursor<'a> {
    buf: &'a Bytes,
    pos: usize,
    end: usize,
}

impl<'a> Cursor<'a> {
    fn new(buf: &'a Bytes) -> Self {
        Self {
            buf,
            pos: 0,
            end: buf.len(),
        }
    }

    fn remaining(&self) -> usize {
        self.end.saturating_sub(self.pos)
    }

    /// A cursor over the next `len` bytes (fewer if fewer remain).
    fn sub(&self, len: usize) -> Self {
        Self {
            buf: self.buf,
            pos: self.pos,
            end: self.pos + len.min(self.remaining()),
        }
    }

    fn skip(&mut self, len: usize) {
        self.pos += len.min(self.remaining());
    }

    fn byte(&mut self) -> Result<u8, Bad> {
        if self.pos >= self.end {
            return Err(Bad::Truncated);
        }
        let b = *self.buf.get(self.pos).ok_or(Bad::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    /// An unsigned LEB128 of at most `max_bytes` bytes.
    fn unsigned(&mut self, max_bytes: u32) -> Result<u64, Bad> {
        let mut raw: u64 = 0;
        for i in 0..max_bytes {
            let b = self.byte()?;
            raw |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(raw);
            }
        }
        Err(Bad::Varint)
    }

    /// A zig-zag varint of at most 5 bytes whose value fits 32 bits (Kafka's `readVarint`).
    fn varint(&mut self) -> Result<i32, Bad> {
        let raw = u32::try_from(self.unsigned(5)?).map_err(|_| Bad::Varint)?;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    /// A zig-zag varlong of at most 10 bytes (Kafka's `readVarlong`).
    fn varlong(&mut self) -> Result<i64, Bad> {
        let raw = self.unsigned(10)?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    fn bytes(&mut self, len: usize) -> Result<Bytes, Bad> {
        if len > self.remaining() {
            return Err(Bad::Truncated);
        }
        let slice = self.buf.slice(self.pos..self.pos + len);
        self.pos += len;
        Ok(slice)
    }

    /// A varint length then that many bytes; a negative length is null, as in Kafka.
    fn nullable_bytes(&mut self) -> Result<Option<Bytes>, Bad> {
        match usize::try_from(self.varint()?) {
            Ok(len) => self.bytes(len).map(Some),
            Err(_) => Ok(None),
        }
    }
}

impl RawRecord {
    /// Appends the record to `out` in the v2 record format, `length` prefix included.
    ///
    /// Keys, values and headers are written byte for byte; a null is written as length -1.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), RecordsError> {
        let body = self.body_len()?;
        out.reserve(body.saturating_add(5));
        put_varint(out, fit_i32("record", body)?);
        out.push(self.attributes as u8);
        put_varlong(out, self.timestamp_delta);
        put_varint(out, self.offset_delta);
        put_nullable(out, self.key.as_deref(), "key")?;
        put_nullable(out, self.value.as_deref(), "value")?;
        put_varint(out, fit_i32("headerCount", self.headers.len())?);
        for (key, value) in &self.headers {
            put_varint(out, fit_i32("headerKey", key.len())?);
            out.extend_from_slice(key);
            put_nullable(out, value.as_deref(), "headerValue")?;
        }
        Ok(())
    }

    /// Size of everything after the `length` prefix.
    fn body_len(&self) -> Result<usize, RecordsError> {
        let mut len = 1 + varlong_len(self.timestamp_delta) + varint_len(self.offset_delta);
        len = add(len, nullable_len(self.key.as_deref(), "key")?)?;
        len = add(len, nullable_len(self.value.as_deref(), "value")?)?;
        len = add(len, varint_len(fit_i32("headerCount", self.headers.len())?))?;
        for (key, value) in &self.headers {
            len = add(len, nullable_len(Some(key), "headerKey")?)?;
            len = add(len, nullable_len(value.as_deref(), "headerValue")?)?;
        }
        fit_i32("record", len)?;
        Ok(len)
    }
}

/// Appends `records` to `out` in the v2 record format, one after the other, as they go in an
/// uncompressed records section.
pub fn encode_records(records: &[RawRecord], out: &mut Vec<u8>) -> Result<(), RecordsError> {
    records.iter().try_for_each(|r| r.encode(out))
}

fn add(a: usize, b: usize) -> Result<usize, RecordsError> {
    a.checked_add(b).ok_or(RecordsError::TooLarge {
        field: "record",
        size: usize::MAX,
    })
}

fn fit_i32(field: &'static str, size: usize) -> Result<i32, RecordsError> {
    i32::try_from(size).map_err(|_| RecordsError::TooLarge { field, size })
}

fn nullable_len(bytes: Option<&[u8]>, field: &'static str) -> Result<usize, RecordsError> {
    Ok(match bytes {
        None => 1,
        Some(b) => varint_len(fit_i32(field, b.len())?) + b.len(),
    })
}

fn put_nullable(
    out: &mut Vec<u8>,
    bytes: Option<&[u8]>,
    field: &'static str,
) -> Result<(), RecordsError> {
    match bytes {
        None => put_varint(out, -1),
        Some(b) => {
            put_varint(out, fit_i32(field, b.len())?);
            out.extend_from_slice(b);
        }
    }
    Ok(())
}

fn zigzag32(v: i32) -> u64 {
    u64::from(((v << 1) ^ (v >> 31)) as u32)
}

fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn put_unsigned(out: &mut Vec<u8>, mut raw: u64) {
    while raw >= 0x80 {
        out.push((raw as u8) | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

fn unsigned_len(raw: u64) -> usize {
    // 1 byte per started group of 7 bits, at least 1.
    let bits = 64 - raw.leading_zeros() as usize;
    bits.div_ceil(7).max(1)
}

fn put_varint(out: &mut Vec<u8>, v: i32) {
    put_unsigned(out, zigzag32(v));
}

fn put_varlong(out: &mut Vec<u8>, v: i64) {
    put_unsigned(out, zigzag64(v));
}

fn varint_len(v: i32) -> usize {
    unsigned_len(zigzag32(v))
}

fn varlong_len(v: i64) -> usize {
    unsigned_len(zigzag64(v))
}

/// snappy-java's stream header: magic, then format version 1 and oldest compatible version 1.
const XERIAL_HEADER: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";
/// What tells a xerial stream from a plain snappy block (snappy-java checks these 8 bytes).
const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
/// snappy-java's block size, which Kafka's producer uses.
const XERIAL_BLOCK: usize = 32 * 1024;
/// Kafka's LZ4 writer uses 64 KiB independent blocks without checksums.
const LZ4_BLOCK_SIZE: lz4::BlockSize = lz4::BlockSize::Max64KB;
/// Kafka's default `compression.zstd.level`.
const ZSTD_LEVEL: i32 = 3;
/// zstd's own default window limit (128 MiB), the one Kafka's zstd-jni reader has too. Frames
/// that declare a larger window are refused before anything is allocated for them.
const ZSTD_WINDOW_LOG_MAX: u32 = 27;

/// Decompresses a batch's records section compressed with `codec`, refusing to produce more
/// than `limit.max_output(data.len())` bytes. [`Compression::None`] returns `data` itself.
///
/// Output is produced in bounded steps and checked as it grows, so a bomb costs at most the
/// limit (and the codec's own bounded working memory), never what it claims to hold.
pub fn decompress(
    codec: Compression,
    data: &Bytes,
    limit: &DecompressLimit,
) -> Result<Bytes, RecordsError> {
    let max = limit.max_output(data.len());
    let failed = |e: std::io::Error| RecordsError::Decompress {
        codec,
        reason: e.to_string(),
    };
    let too_large = RecordsError::DecompressedTooLarge {
        codec,
        compressed: data.len(),
        limit: max,
    };
    let out = match codec {
        Compression::None => return Ok(data.clone()),
        Compression::Gzip => {
            // Java's `GZIPInputStream` reads concatenated members; so does this.
            read_bounded(flate2::read::MultiGzDecoder::new(&data[..]), max)
                .map_err(|e| e.into_error(failed, too_large))?
        }
        Compression::Snappy => snappy_decompress(data, max).map_err(|e| match e {
            Inflate::TooLarge => too_large,
            Inflate::Failed(reason) => RecordsError::Decompress { codec, reason },
        })?,
        Compression::Lz4 => {
            let mut decoder = lz4::Decoder::new(&data[..]).map_err(failed)?;
            let out =
                read_bounded(&mut decoder, max).map_err(|e| e.into_error(failed, too_large))?;
            // The decoder ends quietly on a frame that is cut short; `finish` tells.
            decoder.finish().1.map_err(failed)?;
            out
        }
        Compression::Zstd => {
            let mut decoder = zstd::stream::read::Decoder::new(&data[..]).map_err(failed)?;
            decoder
                .window_log_max(ZSTD_WINDOW_LOG_MAX)
                .map_err(failed)?;
            read_bounded(decoder, max).map_err(|e| e.into_error(failed, too_large))?
        }
    };
    Ok(Bytes::from(out))
}

/// Why bounded inflation stopped.
enum Inflate {
    TooLarge,
    Failed(String),
}

enum ReadBounded {
    TooLarge,
    Io(std::io::Error),
}

impl ReadBounded {
    fn into_error(
        self,
        failed: impl FnOnce(std::io::Error) -> RecordsError,
        too_large: RecordsError,
    ) -> RecordsError {
        match self {
            Self::TooLarge => too_large,
            Self::Io(e) => failed(e),
        }
    }
}

/// Reads `reader` to its end, failing as soon as it yields more than `max` bytes.
fn read_bounded(mut reader: impl Read, max: usize) -> Result<Vec<u8>, ReadBounded> {
    let mut out = Vec::new();
    let mut chunk = vec![0u8; 32 * 1024];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => return Ok(out),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ReadBounded::Io(e)),
        };
        if n > max - out.len() {
            return Err(ReadBounded::TooLarge);
        }
        out.extend_from_slice(chunk.get(..n).unwrap_or_default());
    }
}

/// Reads snappy-java's framing (header, then blocks each behind a big-endian u32 length), or a
/// single plain snappy block when the header is not there, as snappy-java does.
fn snappy_decompress(data: &[u8], max: usize) -> Result<Vec<u8>, Inflate> {
    let mut out = Vec::new();
    if !data.starts_with(XERIAL_MAGIC) {
        snappy_block(data, max, &mut out)?;
        return Ok(out);
    }
    let mut rest = data
        .get(XERIAL_HEADER.len()..)
        .ok_or_else(|| Inflate::Failed("snappy stream header is cut short".into()))?;
    while !rest.is_empty() {
        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
            return Err(Inflate::Failed("snappy block length is cut short".into()));
        };
        // snappy-java reads a stream header where a block length should be as the start of a
        // concatenated stream, and skips it.
        if len[..] == XERIAL_MAGIC[..4] && tail.starts_with(&XERIAL_MAGIC[4..]) {
            rest = tail
                .get(XERIAL_HEADER.len() - 4..)
                .ok_or_else(|| Inflate::Failed("snappy stream header is cut short".into()))?;
            continue;
        }
        let len = usize::try_from(u32::from_be_bytes(*len)).unwrap_or(usize::MAX);
        let block = tail
            .get(..len)
            .ok_or_else(|| Inflate::Failed(format!("snappy block of {len} bytes is cut short")))?;
        snappy_block(block, max, &mut out)?;
        rest = tail.get(len..).unwrap_or_default();
    }
    Ok(out)
}

/// Appends one plain snappy block to `out`, checking its declared size before allocating it.
fn snappy_block(block: &[u8], max: usize, out: &mut Vec<u8>) -> Result<(), Inflate> {
    if block.is_empty() {
        return Ok(());
    }
    let len = snap::raw::decompress_len(block).map_err(|e| Inflate::Failed(e.to_string()))?;
    if len > max.saturating_sub(out.len()) {
        return Err(Inflate::TooLarge);
    }
    let start = out.len();
    out.resize(start + len, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, out.get_mut(start..).unwrap_or_default())
        .map_err(|e| Inflate::Failed(e.to_string()))?;
    out.truncate(start + written);
    Ok(())
}

/// Compresses `data` (an uncompressed records section) with `codec` and appends the result to
/// `out`, framed as Kafka's Java producer frames it (see the module docs).
pub fn compress(codec: Compression, data: &[u8], out: &mut Vec<u8>) -> Result<(), RecordsError> {
    let failed = |e: &dyn std::fmt::Display| RecordsError::Compress {
        codec,
        reason: e.to_string(),
    };
    match codec {
        Compression::None => out.extend_from_slice(data),
        Compression::Gzip => {
            let mut encoder = flate2::write::GzEncoder::new(out, flate2::Compression::default());
            encoder.write_all(data).map_err(|e| failed(&e))?;
            encoder.finish().map_err(|e| failed(&e))?;
        }
        Compression::Snappy => {
            out.extend_from_slice(XERIAL_HEADER);
            let mut encoder = snap::raw::Encoder::new();
            let mut scratch = vec![0u8; snap::raw::max_compress_len(XERIAL_BLOCK)];
            for block in data.chunks(XERIAL_BLOCK) {
                let n = encoder
                    .compress(block, &mut scratch)
                    .map_err(|e| failed(&e))?;
                let compressed = scratch.get(..n).unwrap_or_default();
                let len = u32::try_from(n).map_err(|e| failed(&e))?;
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(compressed);
            }
        }
        Compression::Lz4 => {
            let mut encoder = lz4::EncoderBuilder::new()
                .block_size(LZ4_BLOCK_SIZE)
                .block_mode(lz4::BlockMode::Independent)
                .block_checksum(lz4::liblz4::BlockChecksum::NoBlockChecksum)
                .checksum(lz4::ContentChecksum::NoChecksum)
                .build(out)
                .map_err(|e| failed(&e))?;
            encoder.write_all(data).map_err(|e| failed(&e))?;
            encoder.finish().1.map_err(|e| failed(&e))?;
        }
        Compression::Zstd => {
            let compressed = zstd::bulk::compress(data, ZSTD_LEVEL).map_err(|e| failed(&e))?;
            out.extend_from_slice(&compressed);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(offset_delta: i32) -> RawRecord {
        RawRecord {
            offset_delta,
            timestamp_delta: -3,
            attributes: 0,
            key: Some(Bytes::from_static(b"k")),
            value: None,
            headers: vec![
                (Bytes::from_static(b"h"), Some(Bytes::from_static(b"1"))),
                (Bytes::from_static(b"h"), None),
                (Bytes::from_static(b""), Some(Bytes::new())),
                (Bytes::from_static(b"h"), Some(Bytes::from_static(b"2"))),
            ],
        }
    }

    fn encoded(records: &[RawRecord]) -> Bytes {
        let mut out = Vec::new();
        encode_records(records, &mut out).unwrap();
        Bytes::from(out)
    }

    #[test]
    fn varints_match_kafka() {
        for (v, bytes) in [
            (0i32, &[0x00][..]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (150, &[0xac, 0x02]),
            (i32::MAX, &[0xfe, 0xff, 0xff, 0xff, 0x0f]),
            (i32::MIN, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        ] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out, bytes, "{v}");
            assert_eq!(varint_len(v), bytes.len());
            let b = Bytes::copy_from_slice(bytes);
            assert_eq!(Cursor::new(&b).varint().ok(), Some(v));
        }
        for v in [0i64, -1, 1 << 40, i64::MAX, i64::MIN] {
            let mut out = Vec::new();
            put_varlong(&mut out, v);
            assert_eq!(varlong_len(v), out.len());
            let b = Bytes::from(out);
            assert_eq!(Cursor::new(&b).varlong().ok(), Some(v));
        }
        // Too long, or over 32 bits, for a varint; cut short.
        for bad in [
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0x01][..],
            &[0xff, 0xff, 0xff, 0xff, 0x1f],
        ] {
            let b = Bytes::copy_from_slice(bad);
            assert!(matches!(Cursor::new(&b).varint(), Err(Bad::Varint)));
        }
        let b = Bytes::from_static(&[0x80]);
        assert!(matches!(Cursor::new(&b).varint(), Err(Bad::Truncated)));
        let b = Bytes::from_static(&[0xff; 11]);
        assert!(matches!(Cursor::new(&b).varlong(), Err(Bad::Varint)));
    }

    #[test]
    fn round_trip_keeps_duplicate_headers_and_nulls() {
        let records = vec![record(0), record(3), RawRecord::default()];
        let data = encoded(&records);
        assert_eq!(parse_records(&data, 3).unwrap(), records);
    }

    #[test]
    fn parse_errors_are_typed() {
        let data = encoded(&[record(0)]);
        assert_eq!(
            parse_records(&data, 2),
            Err(RecordsError::Truncated {
                record: 1,
                field: "length"
            })
        );
        assert_eq!(
            parse_records(&data, 0),
            Err(RecordsError::TrailingBytes {
                count: 0,
                extra: data.len()
            })
        );
        assert_eq!(
            parse_records(&data, -1),
            Err(RecordsError::NegativeRecordCount { count: -1 })
        );
        // The length prefix says one byte more than there is.
        let mut longer = data.to_vec();
        longer[0] += 2;
        assert_eq!(
            parse_records(&Bytes::from(longer.clone()), 1),
            Err(RecordsError::Truncated {
                record: 0,
                field: "length"
            })
        );
        // ... and with one more byte there, the fields do not add up to it.
        longer.push(0);
        assert!(matches!(
            parse_records(&Bytes::from(longer), 1),
            Err(RecordsError::SizeMismatch { record: 0, .. })
        ));
        // Negative record length, negative header count.
        assert!(matches!(
            parse_records(&Bytes::from_static(&[0x01]), 1),
            Err(RecordsError::InvalidLength {
                field: "length",
                value: -1,
                ..
            })
        ));
        let bad_headers = Bytes::from_static(&[0x0c, 0, 0, 0, 0x01, 0x01, 0x01]);
        assert!(matches!(
            parse_records(&bad_headers, 1),
            Err(RecordsError::InvalidLength {
                field: "headerCount",
                value: -1,
                ..
            })
        ));
        // A huge header count with nothing behind it allocates nothing big and fails.
        let many = Bytes::from_static(&[0x14, 0, 0, 0, 0x01, 0x01, 0xfe, 0xff, 0xff, 0xff, 0x0f]);
        assert!(matches!(
            parse_records(&many, 1),
            Err(RecordsError::SizeMismatch { .. } | RecordsError::Truncated { .. })
        ));
    }

    #[test]
    fn huge_counts_do_not_allocate() {
        assert!(parse_records(&Bytes::new(), i32::MAX).is_err());
        assert!(parse_records(&Bytes::from_static(&[0; 64]), i32::MAX).is_err());
    }

    #[test]
    fn codecs_round_trip() {
        let data = encoded(&[record(0), record(1)]);
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            for input in [&data[..], &big[..], &[][..]] {
                let mut out = Vec::new();
                compress(codec, input, &mut out).unwrap();
                let back = decompress(codec, &Bytes::from(out), &DecompressLimit::default());
                assert_eq!(back.unwrap(), input, "{codec:?}");
            }
        }
    }

    /// Kafka-written snappy (xerial framing) and a plain snappy block, from `kafka-protocol`'s
    /// own tests: both hold one record whose value is `sdfdsf`.
    #[test]
    fn reads_xerial_and_plain_snappy() {
        let xerial: &[u8] = b"\x82\x53\x4e\x41\x50\x50\x59\x00\x00\x00\x00\x01\x00\x00\x00\x01\
            \x00\x00\x00\x0f\x0d\x30\x18\x00\x00\x00\x01\x0csdfdsf\x00";
        let plain: &[u8] = b"\r0\x18\0\0\0\x01\x0csdfdsf\0";
        for input in [xerial, plain] {
            let data = decompress(
                Compression::Snappy,
                &Bytes::copy_from_slice(input),
                &DecompressLimit::default(),
            )
            .unwrap();
            let records = parse_records(&data, 1).unwrap();
            assert_eq!(records[0].value.as_deref(), Some(&b"sdfdsf"[..]));
            assert_eq!(records[0].key, None);
        }
        // Two xerial streams back to back read as one.
        let mut twice = xerial.to_vec();
        twice.extend_from_slice(xerial);
        let data = decompress(
            Compression::Snappy,
            &Bytes::from(twice),
            &DecompressLimit::default(),
        )
        .unwrap();
        assert_eq!(parse_records(&data, 2).unwrap().len(), 2);
    }

    #[test]
    fn snappy_length_prefix_is_checked_before_allocating() {
        // A plain block claiming 4 GiB - 1.
        let claim = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0x00]);
        let limit = DecompressLimit::default();
        assert!(matches!(
            decompress(Compression::Snappy, &claim, &limit),
            Err(RecordsError::DecompressedTooLarge { .. })
        ));
    }

    #[test]
    fn limit_rule() {
        let limit = DecompressLimit::default();
        assert_eq!(limit.max_output(0), 16 << 20);
        assert_eq!(limit.max_output(1 << 20), 64 << 20);
        assert_eq!(limit.max_output(100 << 20), 256 << 20);
        assert_eq!(limit.max_output(usize::MAX), 256 << 20);
    }

    #[test]
    fn truncated_and_garbage_streams_fail() {
        let data = encoded(&[record(0), record(1)]);
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let mut out = Vec::new();
            compress(codec, &data, &mut out).unwrap();
            let cut = Bytes::copy_from_slice(&out[..out.len() - 3]);
            let result = decompress(codec, &cut, &DecompressLimit::default());
            assert!(
                result.is_err() || parse_records(&result.unwrap(), 2).is_err(),
                "{codec:?}"
            );
            let garbage = Bytes::from_static(b"\x00\x01\x02garbage, not a compressed stream");
            assert!(
                decompress(codec, &garbage, &DecompressLimit::default()).is_err(),
                "{codec:?}"
            );
        }
    }

    #[test]
    fn unknown_codec() {
        assert_eq!(
            decode_records(Attributes(5), &Bytes::new(), 0, &DecompressLimit::default()),
            Err(RecordsError::UnknownCodec { id: 5 })
        );
    }
}
