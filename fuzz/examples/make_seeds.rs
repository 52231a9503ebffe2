//! Writes the seed inputs in `fuzz/seeds/<target>/`: real record batches (every codec),
//! responses as a broker encodes them, MM2 records and MM2 config files, so that a short run
//! starts from valid input instead of finding its structure first. Not a fuzz target; run it
//! (without the fuzzing flags) after changing it, and commit what it writes:
//!
//! ```sh
//! cargo run --manifest-path fuzz/Cargo.toml --example make_seeds
//! ```

use std::fs;
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, FetchResponse, MetadataResponse, ResponseHeader,
    SaslHandshakeResponse, TopicName,
};
use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use strait_wire::mm2::{Checkpoint, Heartbeat, OffsetSync};

const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    fs::create_dir_all(dir).expect("create the seed directory");
    fs::write(dir.join(name), bytes).expect("write a seed");
}

/// A batch of `n` records at `base_offset`, with keys, values, a null, and headers (one key
/// repeated), as an idempotent producer writes it.
fn batch(compression: Compression, base_offset: i64, n: i64, control: bool) -> Bytes {
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional: control,
            control,
            delete_horizon: false,
            partition_leader_epoch: 3,
            producer_id: 4242,
            producer_epoch: 1,
            timestamp_type: TimestampType::Creation,
            offset: base_offset + i,
            sequence: i as i32,
            timestamp: 1_700_000_000_000 + i,
            key: (i % 3 != 2).then(|| Bytes::from(format!("key-{i}"))),
            value: Some(Bytes::from(vec![b'a' + (i % 26) as u8; 16 + i as usize])),
            headers: [("trace", Some("t-1")), ("empty", None)]
                .into_iter()
                .map(|(k, v)| {
                    (
                        StrBytes::from_static_str(k),
                        v.map(|s: &'static str| Bytes::from_static(s.as_bytes())),
                    )
                })
                .collect(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .expect("encode a batch");
    buf.freeze()
}

/// `[api index, version pick]` and the response frame body, as `frame_decoder` reads them.
fn response<T: Encodable + HeaderVersion>(
    api_index: u8,
    api: ApiKey,
    version: i16,
    body: &T,
) -> Vec<u8> {
    let range = api.valid_versions();
    let mut out = vec![api_index, (version - range.min) as u8];
    let mut buf = BytesMut::new();
    ResponseHeader::default()
        .with_correlation_id(77)
        .encode(&mut buf, T::header_version(version))
        .expect("encode a header");
    body.encode(&mut buf, version).expect("encode a response");
    out.extend_from_slice(&buf);
    out
}

fn main() {
    let seeds = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("seeds");

    // Record batches: one per codec, a control batch, and two batches back to back.
    let scanner = seeds.join("batch_scanner");
    let records = seeds.join("records");
    for codec in CODECS {
        let b = batch(codec, 100, 5, false);
        write(&scanner, &format!("batch-{codec:?}"), &b);
        // `records` reads a position to rebuild from first: keep from the third record.
        let mut with_pick = vec![3];
        with_pick.extend_from_slice(&b);
        write(&records, &format!("batch-{codec:?}"), &with_pick);
    }
    let control = batch(Compression::None, 7, 1, true);
    write(&scanner, "control", &control);
    let two = [
        batch(Compression::None, 0, 2, false),
        batch(Compression::Lz4, 2, 3, false),
    ]
    .concat();
    write(&scanner, "two-batches", &two);
    write(&records, "two-batches", &[[1u8].as_slice(), &two].concat());

    // Responses, one per kind strait reads the most, at flexible and older versions.
    let frames = seeds.join("frame_decoder");
    let metadata = MetadataResponse::default()
        .with_brokers(vec![MetadataResponseBroker::default()
            .with_node_id(BrokerId(1))
            .with_host(StrBytes::from_static_str("localhost"))
            .with_port(9092)])
        .with_topics(vec![MetadataResponseTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("orders"))))
            .with_partitions(vec![MetadataResponsePartition::default()
                .with_partition_index(0)
                .with_leader_id(BrokerId(1))
                .with_replica_nodes(vec![BrokerId(1)])
                .with_isr_nodes(vec![BrokerId(1)])])]);
    for version in [1, 9, 12] {
        write(
            &frames,
            &format!("metadata-v{version}"),
            &response(3, ApiKey::Metadata, version, &metadata),
        );
    }
    let fetch = FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
        .with_topic(TopicName(StrBytes::from_static_str("orders")))
        .with_partitions(vec![PartitionData::default()
            .with_partition_index(0)
            .with_high_watermark(105)
            .with_records(Some(batch(Compression::None, 100, 2, false)))])]);
    for version in [4, 11, 12] {
        write(
            &frames,
            &format!("fetch-v{version}"),
            &response(1, ApiKey::Fetch, version, &fetch),
        );
    }
    let versions = ApiVersionsResponse::default().with_api_keys(
        [
            (0, 3, 11),
            (1, 4, 17),
            (3, 0, 12),
            (9, 1, 9),
            (10, 0, 6),
            (36, 0, 2),
        ]
        .into_iter()
        .map(|(k, lo, hi)| {
            ApiVersion::default()
                .with_api_key(k)
                .with_min_version(lo)
                .with_max_version(hi)
        })
        .collect(),
    );
    write(
        &frames,
        "api-versions-v3",
        &response(10, ApiKey::ApiVersions, 3, &versions),
    );
    let handshake = SaslHandshakeResponse::default().with_mechanisms(vec![
        StrBytes::from_static_str("PLAIN"),
        StrBytes::from_static_str("SCRAM-SHA-512"),
    ]);
    write(
        &frames,
        "sasl-handshake-v1",
        &response(9, ApiKey::SaslHandshake, 1, &handshake),
    );

    // MM2 records: [kind, key length (u16, little-endian as `arbitrary` reads it)], key, value.
    let mm2 = seeds.join("mm2_records");
    let mm2_seed = |kind: u8, key: Vec<u8>, value: Vec<u8>| {
        let mut out = vec![kind];
        out.extend_from_slice(&(key.len() as u16).to_le_bytes());
        out.extend(key);
        out.extend(value);
        out
    };
    let sync = OffsetSync {
        topic: "orders".into(),
        partition: 3,
        upstream_offset: 1000,
        downstream_offset: 990,
    };
    write(
        &mm2,
        "offset-sync",
        &mm2_seed(0, sync.encode_key().unwrap(), sync.encode_value()),
    );
    let checkpoint = Checkpoint {
        group: "billing".into(),
        topic: "A.orders".into(),
        partition: 3,
        upstream_offset: 1000,
        downstream_offset: 990,
        metadata: "m".into(),
    };
    write(
        &mm2,
        "checkpoint",
        &mm2_seed(
            1,
            checkpoint.encode_key().unwrap(),
            checkpoint.encode_value().unwrap(),
        ),
    );
    let beat = Heartbeat {
        source_alias: "A".into(),
        target_alias: "B".into(),
        timestamp_ms: 1_700_000_000_000,
    };
    write(
        &mm2,
        "heartbeat",
        &mm2_seed(2, beat.encode_key().unwrap(), beat.encode_value()),
    );

    // Config files: the repository's examples.
    let config = seeds.join("config_parser");
    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples");
    for name in ["mm2-sample.properties", "quickstart.properties"] {
        let text = fs::read(examples.join(name)).expect("read an example config");
        write(&config, name, &text);
    }
    println!("seeds written to {}", seeds.display());
}
