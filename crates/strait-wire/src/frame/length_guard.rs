//! Refuses a response whose lengths its bytes cannot hold, before the codec allocates for them.
//!
//! `kafka-protocol` 0.18 decodes an array by reading its element count and calling
//! `Vec::with_capacity(count)` before it reads one element (`Array` and `CompactArray` in its
//! `types.rs`). The count comes off the wire, so a response of a dozen bytes that declares 2^31
//! elements asks the allocator for tens of gigabytes, and a failed allocation aborts the process:
//! it is not a panic, nothing can catch it. The `frame_decoder` fuzz target found it
//! (`docs/fuzzing.md`). strait cannot change the codec, so it decodes through [`Guarded`], a
//! buffer that looks at each length as the codec reads it.
//!
//! Every element of an array and every byte of a string or bytes field takes at least one byte
//! of the frame, so a length larger than the bytes left after it is impossible in a real
//! response. The codec reads lengths in two ways:
//!
//! - **Unsigned varints** (flexible versions, KIP-482: compact arrays, strings and bytes, and
//!   tagged fields). In a response, a varint is only ever a length, a count or a tag number, so
//!   one worth more than the bytes after it, plus one (compact lengths are stored plus one), is
//!   refused at once. A one-byte varint (at most 127) is let through: the codec reserves at most
//!   126 elements for it and then fails, and booleans, read the same way, never reach the check.
//!   (A tagged field numbered 128 or more near the very end of a response would be refused too;
//!   Kafka's tags are single digits.)
//! - **`INT32`** (arrays and bytes of the older, non-flexible versions; a flexible version
//!   encodes every length as an unsigned varint, so its responses skip what follows and are
//!   decoded once, which is every hot response from a current broker). Here a length looks
//!   like any plain `INT32` field, and a broker id or a port near the end of a response can
//!   exceed the bytes after it. So such a value is replaced, and the response decoded twice,
//!   with 0 and with 1 in its place: a plain field does not change what the codec reads next, a
//!   length does (no element, or one). When both runs read the same bytes in the same steps
//!   and end the same way,
//!   every replaced value was a plain field, and the real decode follows the same steps with
//!   lengths that all fit: it is safe to run. Otherwise a length was impossible, and the
//!   response is refused. When the runs read the same but fail, the decode fails with their
//!   error: the real one would fail the same way. The correlation id, first in every response
//!   header, is never a length and is not replaced.
//!
//! A response with nothing replaced (the usual case) is decoded once. What remains: a frame of
//! `n` bytes can still make the codec reserve `n` elements of its largest type, some hundred
//! times `n` bytes, where a real response of that size needs a few times `n`. Frames are capped
//! by `max_response_bytes`.

use std::collections::hash_map::{DefaultHasher, RandomState};
use std::hash::{BuildHasher, Hasher};
use std::ops::Range;

use bytes::{Buf, Bytes, TryGetError};
use kafka_protocol::protocol::buf::ByteBuf;

/// A length read from a frame that the bytes after it cannot hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ImpossibleLength {
    /// Where the length starts, in bytes from the start of the frame body.
    pub(super) at: usize,
    /// The length as read.
    pub(super) length: u64,
    /// The bytes left after it.
    pub(super) remaining: usize,
}

/// Why a guarded decode produced nothing.
#[derive(Debug)]
pub(super) enum Refusal {
    /// The codec failed.
    Codec(anyhow::Error),
    /// A length is impossible; the codec was not let allocate for it.
    Impossible(ImpossibleLength),
}

/// Runs `decode` on `frame` through a [`Guarded`] buffer, as the module docs describe.
/// `int32_lengths`: whether the response's version may hold lengths as `INT32` (a version that
/// is not flexible); without, it is decoded once, its varints checked.
pub(super) fn decode<T>(
    frame: &Bytes,
    int32_lengths: bool,
    decode: impl Fn(&mut Guarded) -> anyhow::Result<T>,
) -> Result<T, Refusal> {
    let keys = RandomState::new();
    if !int32_lengths {
        return Guarded::new(frame.clone(), None, keys).run(&decode);
    }
    let mut zero = Guarded::new(frame.clone(), Some(0), keys.clone());
    let with_zero = zero.run(&decode);
    let Some(replaced) = zero.first_replaced else {
        // Every value was the real one: this was the real decode.
        return with_zero;
    };
    if let Err(Refusal::Impossible(impossible)) = with_zero {
        return Err(Refusal::Impossible(impossible));
    }
    let mut one = Guarded::new(frame.clone(), Some(1), keys.clone());
    let with_one = one.run(&decode);
    if let Err(Refusal::Impossible(impossible)) = with_one {
        return Err(Refusal::Impossible(impossible));
    }
    if zero.trace_digest() != one.trace_digest() || with_zero.is_ok() != with_one.is_ok() {
        // A replaced value decided what was read next, or whether the rest decodes: it was a
        // length, and impossible.
        return Err(Refusal::Impossible(replaced));
    }
    // The replaced values were plain fields; a failure was not theirs.
    with_zero?;
    with_one?;
    Guarded::new(frame.clone(), None, keys).run(&decode)
}

/// A frame body being decoded, as a buffer the codec reads from. See the module docs.
#[derive(Debug)]
pub(super) struct Guarded {
    data: Bytes,
    pos: usize,
    /// What replaces an `INT32` that exceeds the bytes after it; `None` in the real decode.
    stand_in: Option<i32>,
    /// The first value replaced.
    first_replaced: Option<ImpossibleLength>,
    /// The varint refused, if one was.
    refused: Option<ImpossibleLength>,
    /// Keys of the trace, the same for every run of one frame.
    keys: RandomState,
    /// Every read from the first replaced value on: where, and how many bytes.
    trace: Option<DefaultHasher>,
}

impl Guarded {
    fn new(data: Bytes, stand_in: Option<i32>, keys: RandomState) -> Self {
        Self {
            data,
            pos: 0,
            stand_in,
            first_replaced: None,
            refused: None,
            keys,
            trace: None,
        }
    }

    fn run<T>(
        &mut self,
        decode: &impl Fn(&mut Guarded) -> anyhow::Result<T>,
    ) -> Result<T, Refusal> {
        let result = decode(self);
        match self.refused {
            Some(impossible) => Err(Refusal::Impossible(impossible)),
            None => result.map_err(Refusal::Codec),
        }
    }

    /// Notes a read of `len` bytes at `at` in the trace, once it has started.
    fn note(&mut self, at: usize, len: usize) {
        if let Some(trace) = &mut self.trace {
            trace.write_usize(at);
            trace.write_usize(len);
        }
    }

    /// The trace, with where the decode stopped.
    fn trace_digest(&self) -> Option<u64> {
        self.trace.clone().map(|mut trace| {
            trace.write_usize(self.pos);
            trace.finish()
        })
    }

    /// `range` of the bytes from the current position, clamped to what is there.
    fn span(&self, range: Range<usize>) -> Range<usize> {
        let end = self.pos.saturating_add(range.end).min(self.data.len());
        let start = self.pos.saturating_add(range.start).min(end);
        start..end
    }
}

/// The unsigned varint at `at` as the codec reads it (up to five bytes, the bits of the fifth
/// beyond 32 dropped), and where it ends; `None` if the bytes end inside it.
fn varint_at(data: &[u8], at: usize) -> Option<(u32, usize)> {
    let mut value = 0u32;
    for i in 0..5 {
        let byte = u32::from(*data.get(at + i)?);
        value |= (byte & 0x7F) << (i * 7);
        if byte < 0x80 {
            return Some((value, at + i + 1));
        }
    }
    Some((value, at + 5))
}

impl Buf for Guarded {
    fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    fn chunk(&self) -> &[u8] {
        &self.data[self.pos..]
    }

    fn advance(&mut self, cnt: usize) {
        let cnt = cnt.min(self.remaining());
        self.note(self.pos, cnt);
        self.pos += cnt;
    }

    fn try_get_u8(&mut self) -> Result<u8, TryGetError> {
        let at = self.pos;
        let Some(&byte) = self.data.get(at) else {
            return Err(TryGetError {
                requested: 1,
                available: 0,
            });
        };
        if byte >= 0x80 {
            if let Some((length, end)) = varint_at(&self.data, at) {
                let remaining = self.data.len() - end;
                if u64::from(length) > remaining as u64 + 1 {
                    self.refused.get_or_insert(ImpossibleLength {
                        at,
                        length: u64::from(length),
                        remaining,
                    });
                    return Err(TryGetError {
                        requested: end - at,
                        available: self.remaining(),
                    });
                }
            }
        }
        self.advance(1);
        Ok(byte)
    }

    fn try_get_i32(&mut self) -> Result<i32, TryGetError> {
        let at = self.pos;
        let Some(bytes) = self.data.get(at..at + 4) else {
            return Err(TryGetError {
                requested: 4,
                available: self.remaining(),
            });
        };
        let value = i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        self.advance(4);
        let remaining = self.remaining();
        let Some(stand_in) = self.stand_in else {
            return Ok(value);
        };
        let exceeds = usize::try_from(value).is_ok_and(|v| v > remaining);
        if at == 0 || !exceeds {
            return Ok(value);
        }
        if self.first_replaced.is_none() {
            self.first_replaced = Some(ImpossibleLength {
                at,
                length: value as u64,
                remaining,
            });
            // The runs are the same up to here; from here on they may differ.
            self.trace = Some(self.keys.build_hasher());
        }
        Ok(stand_in)
    }
}

impl ByteBuf for Guarded {
    fn peek_bytes(&mut self, r: Range<usize>) -> Bytes {
        let span = self.span(r);
        self.note(span.start, span.len());
        self.data.slice(span)
    }

    fn get_bytes(&mut self, size: usize) -> Bytes {
        let span = self.span(0..size);
        self.note(span.start, span.len());
        self.pos = span.end;
        self.data.slice(span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_are_read_as_the_codec_reads_them() {
        assert_eq!(varint_at(&[0x05], 0), Some((5, 1)));
        assert_eq!(varint_at(&[0x00, 0x96, 0x01], 1), Some((150, 3)));
        assert_eq!(
            varint_at(&[0xff, 0xff, 0xff, 0xff, 0x0f], 0),
            Some((u32::MAX, 5))
        );
        // Five bytes at most, even if the fifth says more follow.
        assert_eq!(
            varint_at(&[0x80, 0x80, 0x80, 0x80, 0x81, 0x01], 0).map(|v| v.1),
            Some(5)
        );
        assert_eq!(varint_at(&[0x80, 0x80], 0), None);
    }

    #[test]
    fn a_varint_longer_than_the_rest_is_refused_before_it_is_read() {
        let mut buf = Guarded::new(
            Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2]),
            Some(0),
            RandomState::new(),
        );
        assert!(buf.try_get_u8().is_err());
        assert_eq!(
            buf.refused,
            Some(ImpossibleLength {
                at: 0,
                length: u64::from(u32::MAX),
                remaining: 2
            })
        );
        assert_eq!(buf.remaining(), 7, "nothing consumed");
        // 3 says two elements, and two bytes follow.
        let mut buf = Guarded::new(
            Bytes::from_static(&[0x83, 0x00, 1, 2]),
            None,
            RandomState::new(),
        );
        assert!(buf.try_get_u8().is_ok());
        assert!(buf.refused.is_none());
    }

    #[test]
    fn an_int32_past_the_end_is_replaced_except_the_correlation_id() {
        let bytes = Bytes::from_static(&[0, 0, 0x10, 0, 0, 0, 0x10, 0, 0, 0, 0, 4, 9, 9, 9, 9]);
        let mut buf = Guarded::new(bytes.clone(), Some(1), RandomState::new());
        assert_eq!(buf.try_get_i32().unwrap(), 0x1000, "the correlation id");
        assert_eq!(buf.try_get_i32().unwrap(), 1, "replaced");
        assert_eq!(buf.try_get_i32().unwrap(), 4, "fits");
        assert_eq!(
            buf.first_replaced.map(|r| (r.at, r.length)),
            Some((4, 0x1000))
        );
        let mut real = Guarded::new(bytes, None, RandomState::new());
        real.advance(4);
        assert_eq!(
            real.try_get_i32().unwrap(),
            0x1000,
            "the real run reads real values"
        );
    }
}
