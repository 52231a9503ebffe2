//! Decodes arbitrary bytes as a broker's answer, the way a strait connection does: split off a
//! frame, read its correlation id, then decode it with `decode_response` as the response to
//! one of the requests strait sends, at one of the versions the codec knows. The first input
//! byte picks the API, the second the version; the rest is the frame body (response header and
//! body). Nothing may panic or abort on any input, and what decodes must encode back.
#![no_main]

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, Request};
use libfuzzer_sys::fuzz_target;
use strait_wire::frame::{decode_response, peek_correlation_id, split_frame};
use strait_wire::Versions;

/// Decodes `body` as the response to `R` at a version chosen by `pick` within the codec's
/// range, and checks what comes out.
fn decode_as<R: Request>(pick: u8, body: Bytes) {
    let Ok(api) = ApiKey::try_from(R::KEY) else {
        return;
    };
    let range = api.valid_versions();
    let span = (range.max - range.min + 1) as u8;
    let version = range.min + (pick % span) as i16;
    let Ok(frame) = decode_response::<R>(version, body.clone()) else {
        return;
    };
    assert_eq!(
        Ok(frame.correlation_id),
        peek_correlation_id(&body).map_err(|_| ()),
        "the correlation id decoded is the one peeked"
    );
    // What decoded is a value of the version asked for; encoding it back must not panic (it
    // may refuse a field the version cannot hold, e.g. a null where only later versions allow
    // one, since the decoder is more lenient than the encoder).
    let mut out = BytesMut::new();
    let _ = frame.body.encode(&mut out, version);
}

fuzz_target!(|data: &[u8]| {
    // The connection's reader: a size prefix, then that many bytes.
    let mut buf = BytesMut::from(data);
    while let Ok(Some(frame)) = split_frame(&mut buf, 1 << 16) {
        let _ = peek_correlation_id(&frame);
    }

    let [api, pick, rest @ ..] = data else {
        return;
    };
    let body = Bytes::copy_from_slice(rest);
    // Every request type strait's clients send (strait-kafka), in ApiKey order.
    match api % 22 {
        0 => decode_as::<ProduceRequest>(*pick, body),
        1 => decode_as::<FetchRequest>(*pick, body),
        2 => decode_as::<ListOffsetsRequest>(*pick, body),
        3 => decode_as::<MetadataRequest>(*pick, body),
        4 => decode_as::<OffsetCommitRequest>(*pick, body),
        5 => decode_as::<OffsetFetchRequest>(*pick, body),
        6 => decode_as::<FindCoordinatorRequest>(*pick, body),
        7 => decode_as::<DescribeGroupsRequest>(*pick, body),
        8 => decode_as::<ListGroupsRequest>(*pick, body),
        9 => decode_as::<SaslHandshakeRequest>(*pick, body),
        10 => {
            // The first answer on every connection; its ranges drive version negotiation.
            let range = ApiKey::ApiVersions.valid_versions();
            let version = range.min + (*pick as i16 % (range.max - range.min + 1));
            if let Ok(frame) = decode_response::<ApiVersionsRequest>(version, body) {
                let versions = Versions::from_response(&frame.body);
                for key in [
                    ApiKey::Produce,
                    ApiKey::Fetch,
                    ApiKey::Metadata,
                    ApiKey::OffsetFetch,
                    ApiKey::FindCoordinator,
                    ApiKey::SaslAuthenticate,
                ] {
                    if let Ok(v) = versions.pick_key(key) {
                        let codec = key.valid_versions();
                        assert!(codec.min <= v && v <= codec.max, "{key:?} v{v}");
                        let (lo, hi) = versions.broker_range(key).expect("offered");
                        assert!(lo <= v && v <= hi, "{key:?} v{v} outside {lo}..={hi}");
                    }
                }
            }
        }
        11 => decode_as::<CreateTopicsRequest>(*pick, body),
        12 => decode_as::<DeleteTopicsRequest>(*pick, body),
        13 => decode_as::<DeleteRecordsRequest>(*pick, body),
        14 => decode_as::<InitProducerIdRequest>(*pick, body),
        15 => decode_as::<DescribeAclsRequest>(*pick, body),
        16 => decode_as::<CreateAclsRequest>(*pick, body),
        17 => decode_as::<DescribeConfigsRequest>(*pick, body),
        18 => decode_as::<SaslAuthenticateRequest>(*pick, body),
        19 => decode_as::<CreatePartitionsRequest>(*pick, body),
        20 => decode_as::<IncrementalAlterConfigsRequest>(*pick, body),
        _ => decode_as::<DescribeClusterRequest>(*pick, body),
    }
});
