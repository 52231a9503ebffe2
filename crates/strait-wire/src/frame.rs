//! Kafka request/response framing and API version negotiation.
//!
//! A Kafka frame is a big-endian `i32` size followed by that many bytes. A request frame holds a
//! request header (whose version depends on the API and its version: flexible versions, KIP-482,
//! use header v2 with tagged fields) and the request body. A response frame holds the correlation
//! id, then tagged fields for flexible versions, then the body. ApiVersions is the exception: its
//! response header is always v0, so that a client can read it before it knows what the broker
//! speaks (KIP-511).
//!
//! The connection reads the correlation id of each response with [`peek_correlation_id`] to find
//! the waiter, and the waiter, which knows the API and version it asked for, decodes the rest with
//! [`decode_response`], which refuses lengths the frame cannot hold before the codec allocates
//! for them (`length_guard`).

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

mod length_guard;
mod pieces;
mod produce;
mod receive;

pub use pieces::Frame;
pub use produce::{encode_produce_request, ProduceBody};
pub use receive::ReceiveBuffer;

/// Errors of framing: bytes that cannot be a valid frame, or a message that cannot be encoded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The size prefix is negative or over the configured maximum (a misbehaving peer, or not a
    /// Kafka listener at all, e.g. TLS on a plaintext port).
    #[error("frame size {size} is outside 0..={max} bytes")]
    BadSize {
        /// The size read.
        size: i64,
        /// The largest accepted.
        max: usize,
    },
    /// A response frame too short to hold a correlation id.
    #[error("response frame of {len} bytes has no room for a correlation id")]
    TooShort {
        /// The frame's length.
        len: usize,
    },
    /// The response could not be decoded as the API and version that was asked for.
    #[error("cannot decode {api:?} v{version} response: {reason}")]
    Decode {
        /// The API.
        api: ApiKey,
        /// The version asked for.
        version: i16,
        /// What the codec said.
        reason: String,
    },
    /// The response declares an array, string or bytes field longer than the rest of the frame
    /// (a misbehaving or hostile peer). Refused before the codec would reserve memory for it.
    #[error(
        "{api:?} v{version} response declares a length of {length} at byte {at}, \
         but only {remaining} bytes follow"
    )]
    ImpossibleLength {
        /// The API.
        api: ApiKey,
        /// The version asked for.
        version: i16,
        /// Where the length is, in bytes from the start of the frame body.
        at: usize,
        /// The length as read.
        length: u64,
        /// The bytes left after it.
        remaining: usize,
    },
    /// The request could not be encoded (a field out of range for that version).
    #[error("cannot encode {api:?} v{version} request: {reason}")]
    Encode {
        /// The API.
        api: ApiKey,
        /// The version.
        version: i16,
        /// What the codec said.
        reason: String,
    },
    /// The API key is not one the codec knows.
    #[error("unknown API key {0}")]
    UnknownApi(i16),
}

/// No version of an API that both sides speak.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VersionError {
    /// The broker did not list the API at all.
    #[error("broker does not offer {api:?}")]
    NotOffered {
        /// The API.
        api: ApiKey,
    },
    /// The broker's range and ours do not overlap.
    #[error("broker offers {api:?} v{broker_min}..=v{broker_max}, strait speaks v{ours_min}..=v{ours_max}")]
    NoOverlap {
        /// The API.
        api: ApiKey,
        /// Broker's lowest.
        broker_min: i16,
        /// Broker's highest.
        broker_max: i16,
        /// Our lowest.
        ours_min: i16,
        /// Our highest.
        ours_max: i16,
    },
}

/// The highest version strait uses per API, where it is below what the codec supports.
///
/// Newer versions switch from topic names to topic ids (Fetch v13, Produce v13, OffsetFetch v10)
/// or batch several groups into one request (FindCoordinator v4, OffsetFetch v8); strait does not
/// need either yet, and every broker that speaks the newer versions also speaks these (KIP-896
/// removed only versions below them). Fetch goes to v13 for its topic ids: a source topic
/// deleted and created again is then refused by id rather than read by name.
///
/// Transactions use the classic protocol (KIP-98): AddPartitionsToTxn up to v3 (v4 and later
/// are between brokers), TxnOffsetCommit up to v4 (a later one would add the group to the
/// transaction itself) and EndTxn up to v4; EndTxn v5 would ask for KIP-890's second version,
/// whose coordinator bumps the epoch at every commit. A transactional Produce request stays at
/// v11 for the same reason (see `BrokerConnection::submit_produce`).
fn strait_max(api: ApiKey) -> Option<i16> {
    match api {
        ApiKey::AddPartitionsToTxn => Some(3),
        ApiKey::EndTxn => Some(4),
        ApiKey::TxnOffsetCommit => Some(4),
        ApiKey::Fetch => Some(13),
        ApiKey::Produce => Some(12),
        ApiKey::OffsetFetch => Some(7),
        ApiKey::FindCoordinator => Some(3),
        ApiKey::Metadata => Some(12),
        _ => None,
    }
}

/// What a broker said it speaks, from its ApiVersions response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Versions {
    ranges: BTreeMap<i16, (i16, i16)>,
}

impl Versions {
    /// Reads the ranges out of an ApiVersions response.
    pub fn from_response(resp: &ApiVersionsResponse) -> Self {
        let ranges = resp
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect();
        Self { ranges }
    }

    /// Builds from explicit `(api key, min, max)` triples (tests, fake brokers).
    pub fn from_ranges(ranges: impl IntoIterator<Item = (i16, i16, i16)>) -> Self {
        Self {
            ranges: ranges
                .into_iter()
                .map(|(k, lo, hi)| (k, (lo, hi)))
                .collect(),
        }
    }

    /// The broker's `(min, max)` for an API, if it offers it.
    pub fn broker_range(&self, api: ApiKey) -> Option<(i16, i16)> {
        self.ranges.get(&(api as i16)).copied()
    }

    /// Whether the broker offers the API at all.
    pub fn offers(&self, api: ApiKey) -> bool {
        self.ranges.contains_key(&(api as i16))
    }

    /// The highest version of request `R` that the broker, the codec and strait all speak. The
    /// codec is `R`'s own range: the crate's table for the API key can name a version its
    /// request type cannot encode (OffsetCommit: v10 in the table, v9 in
    /// `OffsetCommitRequest`, and Kafka 4.4 offers v10).
    pub fn pick<R: Request>(&self) -> Result<i16, VersionError> {
        match ApiKey::try_from(R::KEY) {
            Ok(api) => self.pick_within(api, R::VERSIONS),
            Err(_) => Err(VersionError::NotOffered {
                api: ApiKey::ApiVersions,
            }),
        }
    }

    /// The highest version of an API that the broker, the codec and strait all speak.
    pub fn pick_key(&self, api: ApiKey) -> Result<i16, VersionError> {
        self.pick_within(api, api.valid_versions())
    }

    fn pick_within(
        &self,
        api: ApiKey,
        codec: kafka_protocol::protocol::VersionRange,
    ) -> Result<i16, VersionError> {
        let codec = kafka_protocol::protocol::VersionRange {
            min: codec.min.max(api.valid_versions().min),
            max: codec.max.min(api.valid_versions().max),
        };
        let ours_min = codec.min;
        let ours_max = strait_max(api).map_or(codec.max, |m| m.min(codec.max));
        let (broker_min, broker_max) = self
            .broker_range(api)
            .ok_or(VersionError::NotOffered { api })?;
        let hi = ours_max.min(broker_max);
        let lo = ours_min.max(broker_min);
        if lo > hi {
            return Err(VersionError::NoOverlap {
                api,
                broker_min,
                broker_max,
                ours_min,
                ours_max,
            });
        }
        Ok(hi)
    }
}

/// The [`ApiKey`] of request type `R`.
pub fn api_key_of<R: Request>() -> Result<ApiKey, FrameError> {
    ApiKey::try_from(R::KEY).map_err(|_| FrameError::UnknownApi(R::KEY))
}

/// Encodes a whole request frame: size, header, body.
pub fn encode_request<R: Request>(
    req: &R,
    version: i16,
    correlation_id: i32,
    client_id: &str,
) -> Result<Bytes, FrameError> {
    let api = api_key_of::<R>()?;
    let encode_err = |e: anyhow::Error| FrameError::Encode {
        api,
        version,
        reason: e.to_string(),
    };
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_string(client_id.to_owned())));
    let header_version = R::header_version(version);
    let mut buf = BytesMut::with_capacity(64);
    buf.put_i32(0); // size, filled in below
    header
        .encode(&mut buf, header_version)
        .map_err(encode_err)?;
    req.encode(&mut buf, version).map_err(encode_err)?;
    let size = buf.len() - 4;
    let size = i32::try_from(size).map_err(|_| FrameError::BadSize {
        size: size as i64,
        max: i32::MAX as usize,
    })?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}

/// If `buf` starts with a complete frame, removes and returns its body (without the size).
///
/// Returns `Ok(None)` when more bytes are needed (it does not make room for them:
/// [`ReceiveBuffer`] does, reusing memory). `max` bounds the size a peer may announce, so a bad
/// peer cannot make us allocate without limit.
pub fn split_frame(buf: &mut BytesMut, max: usize) -> Result<Option<Bytes>, FrameError> {
    match frame_len(buf, max)? {
        Some(len) if buf.len() >= len => {
            buf.advance(4);
            Ok(Some(buf.split_to(len - 4).freeze()))
        }
        _ => Ok(None),
    }
}

/// The length (size prefix included) of the frame `buf` starts with, once its size is in:
/// `Ok(None)` before that, [`FrameError::BadSize`] for a size that is negative or over `max`.
fn frame_len(buf: &[u8], max: usize) -> Result<Option<usize>, FrameError> {
    let Some(prefix) = buf.get(..4).and_then(|p| <[u8; 4]>::try_from(p).ok()) else {
        return Ok(None);
    };
    let size = i32::from_be_bytes(prefix);
    usize::try_from(size)
        .ok()
        .filter(|s| *s <= max)
        .map(|s| Some(s + 4))
        .ok_or(FrameError::BadSize {
            size: size as i64,
            max,
        })
}

/// The correlation id at the start of a response frame body.
pub fn peek_correlation_id(frame: &[u8]) -> Result<i32, FrameError> {
    match frame {
        [a, b, c, d, ..] => Ok(i32::from_be_bytes([*a, *b, *c, *d])),
        _ => Err(FrameError::TooShort { len: frame.len() }),
    }
}

/// A decoded response with its header.
#[derive(Debug)]
pub struct ResponseFrame<T> {
    /// The correlation id from the header.
    pub correlation_id: i32,
    /// The body.
    pub body: T,
}

/// Decodes a response frame body (what [`split_frame`] returned) as the response to `R` at
/// `version`. Bytes after the body are ignored: a broker never sends them for the version asked.
///
/// A length that the rest of the frame cannot hold is [`FrameError::ImpossibleLength`], found
/// before the codec reserves memory for it (a failed reservation would abort the process).
pub fn decode_response<R: Request>(
    version: i16,
    frame: Bytes,
) -> Result<ResponseFrame<R::Response>, FrameError> {
    let api = api_key_of::<R>()?;
    let header_version = <R::Response as HeaderVersion>::header_version(version);
    // A response header v1 means a flexible version (KIP-482), whose lengths are all unsigned
    // varints. ApiVersions, the one response that keeps header v0 at flexible versions, is
    // treated as not flexible: guarded the longer way, never less.
    let int32_lengths = header_version < 1;
    let decoded = length_guard::decode(&frame, int32_lengths, |buf| {
        let header = ResponseHeader::decode(buf, header_version)?;
        let body = R::Response::decode(buf, version)?;
        Ok(ResponseFrame {
            correlation_id: header.correlation_id,
            body,
        })
    });
    decoded.map_err(|refusal| match refusal {
        length_guard::Refusal::Codec(e) => FrameError::Decode {
            api,
            version,
            reason: e.to_string(),
        },
        length_guard::Refusal::Impossible(l) => FrameError::ImpossibleLength {
            api,
            version,
            at: l.at,
            length: l.length,
            remaining: l.remaining,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::api_versions_response::{ApiVersion, SupportedFeatureKey};
    use kafka_protocol::messages::{
        ApiVersionsRequest, FetchRequest, MetadataRequest, ProduceRequest,
    };
    use kafka_protocol::protocol::decode_request_header_from_buffer;

    fn frame_of(header: &[u8], body: &[u8]) -> BytesMut {
        let mut b = BytesMut::new();
        b.put_i32((header.len() + body.len()) as i32);
        b.put_slice(header);
        b.put_slice(body);
        b
    }

    #[test]
    fn api_versions_v3_answer_with_tagged_fields_decodes() {
        let response = ApiVersionsResponse::default()
            .with_api_keys(vec![
                ApiVersion::default()
                    .with_api_key(ApiKey::Fetch as i16)
                    .with_min_version(4)
                    .with_max_version(17),
                ApiVersion::default()
                    .with_api_key(ApiKey::Produce as i16)
                    .with_min_version(3)
                    .with_max_version(11),
            ])
            .with_supported_features(vec![SupportedFeatureKey::default()
                .with_name(StrBytes::from_static_str("metadata.version"))
                .with_min_version(1)
                .with_max_version(21)])
            .with_finalized_features_epoch(42)
            .with_unknown_tagged_field(99, Bytes::from_static(b"future"));
        let mut body = BytesMut::new();
        response.encode(&mut body, 3).unwrap();
        // ApiVersions answers carry a v0 header (just the correlation id), whatever the version.
        let mut buf = frame_of(&7i32.to_be_bytes(), &body);
        let frame = split_frame(&mut buf, 1 << 20).unwrap().unwrap();
        assert!(buf.is_empty());
        assert_eq!(peek_correlation_id(&frame).unwrap(), 7);
        let decoded = decode_response::<ApiVersionsRequest>(3, frame).unwrap();
        assert_eq!(decoded.correlation_id, 7);
        assert_eq!(decoded.body.finalized_features_epoch, 42);
        assert_eq!(decoded.body.supported_features.len(), 1);
        assert_eq!(
            decoded.body.unknown_tagged_fields.get(&99),
            Some(&Bytes::from_static(b"future"))
        );
        let versions = Versions::from_response(&decoded.body);
        assert_eq!(
            versions.pick::<FetchRequest>(),
            Ok(13),
            "capped at strait's max"
        );
        assert_eq!(versions.pick::<ProduceRequest>(), Ok(11), "broker's max");
        assert_eq!(
            versions.pick::<MetadataRequest>(),
            Err(VersionError::NotOffered {
                api: ApiKey::Metadata
            })
        );
    }

    /// Kafka 4.4 offers OffsetCommit v10, which kafka-protocol's table for the key lists but
    /// its `OffsetCommitRequest` cannot encode (its range ends at v9): every group sync failed
    /// there with "cannot encode OffsetCommit v10 request" until the pick took the request
    /// type's own range.
    #[test]
    fn a_version_the_request_type_cannot_encode_is_never_picked() {
        use kafka_protocol::messages::OffsetCommitRequest;
        use kafka_protocol::protocol::Message;
        let versions = Versions::from_ranges([(ApiKey::OffsetCommit as i16, 2, 10)]);
        let picked = versions.pick::<OffsetCommitRequest>().unwrap();
        assert_eq!(picked, OffsetCommitRequest::VERSIONS.max);
        let request =
            OffsetCommitRequest::default().with_group_id(StrBytes::from_static_str("g").into());
        encode_request(&request, picked, 1, "strait").unwrap();
    }

    #[test]
    fn no_common_version_is_an_error() {
        let versions = Versions::from_ranges([(ApiKey::Produce as i16, 0, 2)]);
        assert!(matches!(
            versions.pick::<ProduceRequest>(),
            Err(VersionError::NoOverlap { .. })
        ));
    }

    #[test]
    fn request_frames_round_trip_through_the_codec() {
        let request = MetadataRequest::default()
            .with_topics(None)
            .with_allow_auto_topic_creation(false);
        // Below v4 a Metadata request cannot say `allow_auto_topic_creation=false`, so it
        // cannot be encoded: strait never sends a metadata request that may create topics.
        assert!(matches!(
            encode_request(&request, 3, 1, "strait"),
            Err(FrameError::Encode { .. })
        ));
        for version in [4i16, 9, 12] {
            let bytes = encode_request(&request, version, 1234, "strait-test").unwrap();
            let mut buf = BytesMut::from(&bytes[..]);
            let mut frame = split_frame(&mut buf, 1 << 20).unwrap().unwrap();
            let header = decode_request_header_from_buffer(&mut frame).unwrap();
            assert_eq!(header.request_api_key, ApiKey::Metadata as i16);
            assert_eq!(header.request_api_version, version);
            assert_eq!(header.correlation_id, 1234);
            assert_eq!(header.client_id.as_deref(), Some("strait-test"));
            let decoded = MetadataRequest::decode(&mut frame, version).unwrap();
            assert_eq!(decoded, request);
            assert!(frame.is_empty(), "v{version}: trailing bytes");
        }
    }

    #[test]
    fn split_frame_waits_for_whole_frames_and_bounds_sizes() {
        let mut buf = BytesMut::from(&[0u8, 0, 0][..]);
        assert!(split_frame(&mut buf, 100).unwrap().is_none());
        let mut buf = frame_of(b"abcd", b"efgh");
        let whole = buf.clone();
        let mut partial = BytesMut::from(&whole[..6]);
        assert!(split_frame(&mut partial, 100).unwrap().is_none());
        assert_eq!(
            &split_frame(&mut buf, 100).unwrap().unwrap()[..],
            b"abcdefgh"
        );
        let mut too_big = frame_of(&[0; 200], b"");
        assert!(matches!(
            split_frame(&mut too_big, 100),
            Err(FrameError::BadSize { size: 200, .. })
        ));
        let mut negative = BytesMut::from(&(-5i32).to_be_bytes()[..]);
        assert!(matches!(
            split_frame(&mut negative, 100),
            Err(FrameError::BadSize { size: -5, .. })
        ));
    }

    #[test]
    fn truncated_responses_are_errors_not_panics() {
        let response = ApiVersionsResponse::default().with_api_keys(vec![ApiVersion::default()
            .with_api_key(1)
            .with_max_version(12)]);
        let mut body = BytesMut::new();
        body.put_i32(1);
        response.encode(&mut body, 3).unwrap();
        let body = body.freeze();
        for cut in 0..body.len() {
            let result = decode_response::<ApiVersionsRequest>(3, body.slice(..cut));
            assert!(result.is_err(), "cut at {cut} decoded");
        }
        assert!(peek_correlation_id(&[1, 2]).is_err());
    }
}
