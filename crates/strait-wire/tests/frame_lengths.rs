//! Lengths in a broker's response that the frame cannot hold (`frame::decode_response`).
//!
//! `kafka-protocol` reserves memory for an array's declared element count before reading one
//! element; a dozen hostile bytes declaring 2^31 elements made the process abort on the failed
//! reservation (found by the `frame_decoder` fuzz target, `docs/fuzzing.md`). Without the
//! guard, the first two tests abort this test binary instead of failing. The rest check that
//! real responses, including ones with large `INT32` fields near their end, still decode to
//! exactly what was encoded.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, MetadataRequest, MetadataResponse,
    ProduceRequest, ResponseHeader, SaslHandshakeRequest, SaslHandshakeResponse, TopicName,
};
use kafka_protocol::protocol::{Encodable, HeaderVersion, Request, StrBytes};
use proptest::prelude::*;
use strait_wire::frame::decode_response;
use strait_wire::FrameError;

/// A response frame body (header and body) as a broker sends it, or `None` if `body` has a
/// field `version` cannot carry.
fn response<T: Encodable + HeaderVersion>(
    body: &T,
    version: i16,
    correlation_id: i32,
) -> Option<Bytes> {
    let mut buf = BytesMut::new();
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, T::header_version(version))
        .ok()?;
    body.encode(&mut buf, version).ok()?;
    Some(buf.freeze())
}

/// Decodes `frame` as the response to `R` at `version` and encodes the body back; the bytes
/// must be the ones sent.
fn assert_round_trip<R: Request>(frame: &Bytes, version: i16, correlation_id: i32)
where
    R::Response: Encodable + HeaderVersion,
{
    let decoded =
        decode_response::<R>(version, frame.clone()).unwrap_or_else(|e| panic!("v{version}: {e}"));
    assert_eq!(decoded.correlation_id, correlation_id);
    let again = response(&decoded.body, version, correlation_id).expect("decoded, so encodable");
    assert_eq!(again, *frame, "v{version}");
}

#[test]
fn an_int32_array_length_past_the_end_is_refused_not_reserved() {
    // SaslHandshake, the first answer on a SASL connection: correlation id, error code, then
    // `mechanisms` declaring i32::MAX strings with nothing after it.
    let frame = Bytes::from_static(&[0, 0, 0, 1, 0, 0, 0x7f, 0xff, 0xff, 0xff]);
    for version in [0, 1] {
        match decode_response::<SaslHandshakeRequest>(version, frame.clone()) {
            Err(FrameError::ImpossibleLength {
                api: ApiKey::SaslHandshake,
                at: 6,
                length: 0x7fff_ffff,
                remaining: 0,
                ..
            }) => {}
            other => panic!("v{version}: {other:?}"),
        }
    }
}

#[test]
fn the_fuzzers_first_find_is_an_error() {
    // `fuzz/regressions/frame_decoder/produce-v3-int32-array-length` without its two selector
    // bytes: a Produce v3 answer whose `responses` declares 0x7d410223 topics and ends there.
    // The codec asked for 201 GB. With the length replaced, the frame ends before the throttle
    // time (no topic) or inside the first topic (one): both read the same bytes and fail, so
    // the answer is refused as cut short.
    let frame = Bytes::from_static(&[0x00, 0x00, 0x7d, 0x7d, 0x7d, 0x41, 0x02, 0x23]);
    match decode_response::<ProduceRequest>(3, frame) {
        Err(FrameError::Decode {
            api: ApiKey::Produce,
            version: 3,
            reason,
        }) => assert!(reason.contains("Not enough bytes"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_compact_array_length_past_the_end_is_refused_not_reserved() {
    // Metadata v12: correlation id, no tagged fields, throttle time, then `brokers` declaring
    // u32::MAX - 1 brokers as a five-byte varint, with three bytes after it.
    let frame = Bytes::from_static(&[
        0, 0, 0, 1, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2, 3,
    ]);
    match decode_response::<MetadataRequest>(12, frame) {
        Err(FrameError::ImpossibleLength {
            api: ApiKey::Metadata,
            version: 12,
            at: 9,
            length: 0xffff_ffff,
            remaining: 3,
        }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_int32_length_is_refused_when_more_bytes_follow_it_than_elements_need() {
    // Metadata v1: `brokers` declares 1000 brokers and 40 bytes follow: room for fields, not
    // for 1000 brokers. The error names the count, where it is and what follows.
    let mut frame = vec![0, 0, 0, 7];
    frame.extend_from_slice(&1000i32.to_be_bytes());
    frame.extend_from_slice(&[0; 40]);
    let err = decode_response::<MetadataRequest>(1, Bytes::from(frame)).unwrap_err();
    assert!(
        matches!(
            err,
            FrameError::ImpossibleLength {
                at: 4,
                length: 1000,
                remaining: 40,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "Metadata v1 response declares a length of 1000 at byte 4, but only 40 bytes follow"
    );
}

/// A Metadata response at `version` whose last fields are `INT32`s far larger than the bytes
/// after them; fields `version` does not have are left out.
fn metadata_with_large_ints(version: i16) -> MetadataResponse {
    let mut partition = MetadataResponsePartition::default()
        .with_partition_index(70_000)
        .with_leader_id(BrokerId(1_000_001))
        .with_replica_nodes(vec![BrokerId(1_000_001), BrokerId(2_000_002)])
        .with_isr_nodes(vec![BrokerId(1_000_001)]);
    if version >= 5 {
        partition = partition.with_offline_replicas(vec![BrokerId(2_000_002)]);
    }
    if version >= 7 {
        partition = partition.with_leader_epoch(123_456);
    }
    let mut topic = MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
        .with_partitions(vec![partition]);
    if version >= 8 {
        topic = topic.with_topic_authorized_operations(0x0000_0ff8);
    }
    let mut body = MetadataResponse::default()
        .with_brokers(vec![MetadataResponseBroker::default()
            .with_node_id(BrokerId(1_000_001))
            .with_host(StrBytes::from_static_str("b1"))
            .with_port(65_535)])
        .with_topics(vec![topic]);
    if version >= 1 {
        body = body.with_controller_id(BrokerId(1_000_001));
    }
    if version >= 3 {
        body = body.with_throttle_time_ms(i32::MAX);
    }
    if (8..=10).contains(&version) {
        body = body.with_cluster_authorized_operations(0x7fff_ff00);
    }
    body
}

#[test]
fn large_int32_fields_near_the_end_still_decode_at_every_version() {
    let range = ApiKey::Metadata.valid_versions();
    for version in range.min..=range.max {
        let body = metadata_with_large_ints(version);
        // A correlation id far larger than the frame, as on a long-lived connection.
        let frame = response(&body, version, 9_000_000).expect("encodes");
        assert_round_trip::<MetadataRequest>(&frame, version, 9_000_000);
    }
}

#[test]
fn a_damaged_length_anywhere_is_an_error_or_a_value_never_an_abort() {
    let fetch = |version| fetch_response(version, 7, vec![(3, 99, Some(vec![1; 70]))]);
    let handshake =
        SaslHandshakeResponse::default()
            .with_mechanisms(vec![StrBytes::from_static_str("PLAIN"); 3]);
    let mut frames: Vec<(ApiKey, i16, Bytes)> = Vec::new();
    for version in [1, 8, 9, 12] {
        let metadata = metadata_with_large_ints(version);
        frames.extend(response(&metadata, version, 5).map(|f| (ApiKey::Metadata, version, f)));
    }
    for version in [4, 11, 12] {
        frames.extend(response(&fetch(version), version, 5).map(|f| (ApiKey::Fetch, version, f)));
    }
    frames.extend(response(&handshake, 1, 5).map(|f| (ApiKey::SaslHandshake, 1, f)));
    assert_eq!(frames.len(), 8);
    let damages: [&[u8]; 3] = [
        &[0x7f, 0xff, 0xff, 0xff],
        &[0x00, 0x10, 0x00, 0x00],
        &[0xff, 0xff, 0xff, 0xff, 0x0f],
    ];
    for (api, version, frame) in frames {
        for damage in damages {
            for at in 0..frame.len() {
                let mut bytes = frame.to_vec();
                let end = (at + damage.len()).min(bytes.len());
                bytes[at..end].copy_from_slice(&damage[..end - at]);
                let bytes = Bytes::from(bytes);
                // Any outcome but an abort; these run in this very process.
                let _ = match api {
                    ApiKey::Metadata => {
                        decode_response::<MetadataRequest>(version, bytes).map(|_| ())
                    }
                    ApiKey::Fetch => decode_response::<FetchRequest>(version, bytes).map(|_| ()),
                    _ => decode_response::<SaslHandshakeRequest>(version, bytes).map(|_| ()),
                };
            }
        }
    }
}

/// A Fetch response at `version` with one topic and the given `(partition, high watermark,
/// records)`; the session id only where `version` has one.
fn fetch_response(
    version: i16,
    session_id: i32,
    partitions: Vec<(i32, i64, Option<Vec<u8>>)>,
) -> FetchResponse {
    let partitions = partitions
        .into_iter()
        .map(|(index, hw, records)| {
            PartitionData::default()
                .with_partition_index(index)
                .with_high_watermark(hw)
                .with_records(records.map(Bytes::from))
        })
        .collect();
    let body = FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
        .with_topic(TopicName(StrBytes::from_static_str("orders")))
        .with_partitions(partitions)]);
    if version >= 7 {
        body.with_session_id(session_id)
    } else {
        body
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Metadata responses with arbitrary ids, ports and operations decode to what was encoded,
    /// at every version the codec knows.
    #[test]
    fn metadata_responses_round_trip(
        correlation_id in any::<i32>(),
        brokers in prop::collection::vec((any::<i32>(), "[a-z]{0,12}", any::<i32>()), 0..4),
        partitions in prop::collection::vec(
            (any::<i32>(), any::<i32>(), prop::collection::vec(any::<i32>(), 0..4)),
            0..4,
        ),
        topic_ops in any::<i32>(),
        cluster_ops in any::<i32>(),
    ) {
        let brokers: Vec<_> = brokers
            .into_iter()
            .map(|(id, host, port)| {
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(id))
                    .with_host(StrBytes::from_string(host))
                    .with_port(port)
            })
            .collect();
        let partitions: Vec<_> = partitions
            .into_iter()
            .map(|(index, leader, replicas)| {
                MetadataResponsePartition::default()
                    .with_partition_index(index)
                    .with_leader_id(BrokerId(leader))
                    .with_replica_nodes(replicas.into_iter().map(BrokerId).collect())
            })
            .collect();
        let range = ApiKey::Metadata.valid_versions();
        for version in range.min..=range.max {
            let mut topic = MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("orders"))))
                .with_partitions(partitions.clone());
            if version >= 8 {
                topic = topic.with_topic_authorized_operations(topic_ops);
            }
            let mut body = MetadataResponse::default()
                .with_brokers(brokers.clone())
                .with_topics(vec![topic]);
            if (8..=10).contains(&version) {
                body = body.with_cluster_authorized_operations(cluster_ops);
            }
            let frame = response(&body, version, correlation_id).expect("encodes");
            assert_round_trip::<MetadataRequest>(&frame, version, correlation_id);
        }
    }

    /// Fetch responses with arbitrary session ids, partitions and record bytes decode to what
    /// was encoded, at every version strait may use.
    #[test]
    fn fetch_responses_round_trip(
        correlation_id in any::<i32>(),
        session_id in any::<i32>(),
        partitions in prop::collection::vec(
            (any::<i32>(), any::<i64>(), prop::option::of(prop::collection::vec(any::<u8>(), 0..40))),
            0..4,
        ),
    ) {
        // Topic names up to v12, the highest strait speaks; topic ids from v13.
        for version in ApiKey::Fetch.valid_versions().min..=12 {
            let body = fetch_response(version, session_id, partitions.clone());
            let frame = response(&body, version, correlation_id).expect("encodes");
            assert_round_trip::<FetchRequest>(&frame, version, correlation_id);
        }
    }
}
