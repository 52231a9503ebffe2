//! The Produce request of forwarded batches, encoded as a [`Frame`] whose batches are not
//! copied: kafka-protocol's codec takes each batch as one `Bytes` and copies it into the
//! request buffer, which for a mirror is nearly all the bytes it moves. The layout is the
//! codec's (`ProduceRequest` v3 to v12; a test compares the two byte for byte).

use bytes::{Buf, BufMut, BytesMut};
use kafka_protocol::messages::{ApiKey, ProduceRequest, RequestHeader};
use kafka_protocol::protocol::{Encodable, HeaderVersion, Request, StrBytes};

use super::{Frame, FrameError};
use crate::rewrite::ForwardedBatch;

/// The first version with compact (varint) lengths and tagged fields (KIP-482).
const FIRST_FLEXIBLE: i16 = 9;
/// The versions encoded here: from the oldest a Kafka 4 broker takes to the last that names
/// topics (v13 names them by id).
const VERSIONS: std::ops::RangeInclusive<i16> = 3..=12;

/// A Produce request of forwarded batches, one batch per partition.
#[derive(Debug, Clone, Default)]
pub struct ProduceBody {
    /// The transactional id of a transactional producer (its batches then carry the
    /// transactional bit); `None` for an idempotent one.
    pub transactional_id: Option<String>,
    /// `acks`: -1 (all) for an idempotent producer.
    pub acks: i16,
    /// How long the broker may wait for replicas, in milliseconds.
    pub timeout_ms: i32,
    /// Per topic, in request order: its name and its partitions' batches.
    pub topics: Vec<(String, Vec<(i32, ForwardedBatch)>)>,
}

/// Encodes `body` as a whole request frame (size, header, body) at `version`, each batch's
/// pieces referenced, not copied.
pub fn encode_produce_request(
    body: &ProduceBody,
    version: i16,
    correlation_id: i32,
    client_id: &str,
) -> Result<Frame, FrameError> {
    let encode_err = |reason: String| FrameError::Encode {
        api: ApiKey::Produce,
        version,
        reason,
    };
    if !VERSIONS.contains(&version) {
        return Err(encode_err(
            "version not supported for forwarded batches".into(),
        ));
    }
    let flexible = version >= FIRST_FLEXIBLE;
    let partitions: usize = body.topics.iter().map(|(_, ps)| ps.len()).sum();
    // Everything but the batches goes into one buffer, split off before each batch.
    let names: usize = body.topics.iter().map(|(name, _)| name.len() + 10).sum();
    let mut buf = BytesMut::with_capacity(64 + client_id.len() + names + partitions * 16);
    buf.put_i32(0); // size, filled in below
    RequestHeader::default()
        .with_request_api_key(ProduceRequest::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_string(client_id.to_owned())))
        .encode(&mut buf, ProduceRequest::header_version(version))
        .map_err(|e| encode_err(e.to_string()))?;
    let mut head = buf.split();

    let mut frame = Frame::with_capacity(2 + partitions * 3);
    put_nullable_string(&mut buf, body.transactional_id.as_deref(), flexible)
        .map_err(encode_err)?;
    buf.put_i16(body.acks);
    buf.put_i32(body.timeout_ms);
    put_length(&mut buf, body.topics.len(), flexible).map_err(encode_err)?;
    for (name, batches) in &body.topics {
        put_string(&mut buf, name, flexible).map_err(encode_err)?;
        put_length(&mut buf, batches.len(), flexible).map_err(encode_err)?;
        for (index, batch) in batches {
            buf.put_i32(*index);
            put_length(&mut buf, batch.len(), flexible).map_err(encode_err)?;
            frame.push(buf.split().freeze());
            for piece in batch.pieces() {
                frame.push(piece.clone());
            }
            put_tags(&mut buf, flexible);
        }
        put_tags(&mut buf, flexible);
    }
    put_tags(&mut buf, flexible);
    frame.push(buf.freeze());

    let size = head.len() - 4 + frame.remaining();
    let size = i32::try_from(size).map_err(|_| encode_err(format!("{size} bytes")))?;
    head[..4].copy_from_slice(&size.to_be_bytes());
    let mut whole = Frame::from(head.freeze());
    whole.append(frame);
    Ok(whole)
}

/// An empty tagged-field section, in flexible versions.
fn put_tags(buf: &mut BytesMut, flexible: bool) {
    if flexible {
        put_uvarint(buf, 0);
    }
}

/// An array's element count or a bytes field's length: `INT32`, or in flexible versions an
/// unsigned varint of the length plus one.
fn put_length(buf: &mut BytesMut, len: usize, flexible: bool) -> Result<(), String> {
    if flexible {
        let compact = u32::try_from(len)
            .ok()
            .and_then(|l| l.checked_add(1))
            .ok_or_else(|| format!("a length of {len} does not fit a varint"))?;
        put_uvarint(buf, compact);
    } else {
        let len = i32::try_from(len).map_err(|_| format!("a length of {len} exceeds INT32"))?;
        buf.put_i32(len);
    }
    Ok(())
}

/// A string: `INT16` length, or in flexible versions a compact length.
fn put_string(buf: &mut BytesMut, s: &str, flexible: bool) -> Result<(), String> {
    if flexible {
        put_length(buf, s.len(), true)?;
    } else {
        let len = i16::try_from(s.len()).map_err(|_| format!("a string of {} bytes", s.len()))?;
        buf.put_i16(len);
    }
    buf.put_slice(s.as_bytes());
    Ok(())
}

/// A nullable string: null is `INT16` -1, or in flexible versions a compact length of 0.
fn put_nullable_string(buf: &mut BytesMut, s: Option<&str>, flexible: bool) -> Result<(), String> {
    match s {
        Some(s) => put_string(buf, s, flexible),
        None if flexible => {
            put_uvarint(buf, 0);
            Ok(())
        }
        None => {
            buf.put_i16(-1);
            Ok(())
        }
    }
}

fn put_uvarint(buf: &mut BytesMut, mut value: u32) {
    while value >= 0x80 {
        buf.put_u8((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{batch_crc, BatchScanner, HEADER_SIZE, MIN_BATCH_LENGTH};
    use crate::frame::encode_request;
    use crate::rewrite::{forward, ForwardHeader};
    use bytes::Bytes;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{TopicName, TransactionalId};

    /// A dense batch of one record slot and `extra` payload bytes (the scanner only reads the
    /// header and the CRC).
    fn batch(extra: usize) -> ForwardedBatch {
        let mut b = vec![0u8; HEADER_SIZE + extra];
        let batch_length = MIN_BATCH_LENGTH + extra as i32;
        b[8..12].copy_from_slice(&batch_length.to_be_bytes());
        b[16] = 2;
        b[57..61].copy_from_slice(&1i32.to_be_bytes());
        b.iter_mut().skip(HEADER_SIZE).for_each(|x| *x = 7);
        let crc = batch_crc(&b).unwrap();
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        let raw = BatchScanner::new(Bytes::from(b)).next().unwrap().unwrap();
        let fwd = ForwardHeader {
            producer_id: 5,
            producer_epoch: 1,
            base_sequence: 0,
            transactional: false,
        };
        forward(&raw, &fwd).unwrap()
    }

    #[test]
    fn the_same_bytes_as_the_codec_at_every_version() {
        for transactional_id in [None, Some("strait-unit-0".to_owned())] {
            same_bytes_as_the_codec(transactional_id);
        }
    }

    fn same_bytes_as_the_codec(transactional_id: Option<String>) {
        let body = ProduceBody {
            transactional_id,
            acks: -1,
            timeout_ms: 30_000,
            topics: vec![
                ("a".into(), vec![(0, batch(10)), (3, batch(200))]),
                ("topic-b".into(), vec![(1, batch(0))]),
            ],
        };
        let request = ProduceRequest::default()
            .with_transactional_id(
                body.transactional_id
                    .clone()
                    .map(|id| TransactionalId(StrBytes::from_string(id))),
            )
            .with_acks(body.acks)
            .with_timeout_ms(body.timeout_ms)
            .with_topic_data(
                body.topics
                    .iter()
                    .map(|(name, batches)| {
                        TopicProduceData::default()
                            .with_name(TopicName(StrBytes::from_string(name.clone())))
                            .with_partition_data(
                                batches
                                    .iter()
                                    .map(|(i, b)| {
                                        PartitionProduceData::default()
                                            .with_index(*i)
                                            .with_records(Some(b.to_bytes()))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        for version in VERSIONS {
            let ours = encode_produce_request(&body, version, 42, "strait").unwrap();
            let codec = encode_request(&request, version, 42, "strait").unwrap();
            assert_eq!(
                ours.to_bytes(),
                codec,
                "v{version}, {:?}",
                body.transactional_id
            );
        }
        assert!(encode_produce_request(&body, 13, 42, "strait").is_err());
    }

    #[test]
    fn batches_are_not_copied() {
        let b = batch(100);
        let body = ProduceBody {
            transactional_id: None,
            acks: -1,
            timeout_ms: 1,
            topics: vec![("t".into(), vec![(0, b.clone())])],
        };
        let frame = encode_produce_request(&body, 12, 1, "c").unwrap();
        let mut slices = [std::io::IoSlice::new(&[]); 8];
        let n = bytes::Buf::chunks_vectored(&frame, &mut slices);
        assert!(slices[..n]
            .iter()
            .any(|s| s.as_ptr() == b.pieces()[1].as_ptr()));
    }
}
