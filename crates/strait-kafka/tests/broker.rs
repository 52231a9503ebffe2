//! Every runtime operation against a real Kafka-protocol broker (the test broker of
//! `scripts/test-broker`), with librdkafka as the independent client at the ends.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use strait_kafka::admin::{
    AclBinding, AclFilter, AclOperation, AclPatternType, AclPermission, AclResourceType,
    AlterConfigOp, ConfigResource, IsolationLevel, NewTopic, OffsetSpec,
};
use strait_kafka::fetch::{FetchOptions, FetchPosition};
use strait_kafka::groups::OffsetToCommit;
use strait_kafka::produce::{ProducerConfig, RawProducer};
use strait_kafka::{Error, TopicPartition};
use strait_testkit::{Clusters, GroupProtocol, Rdk, TestRecord};

use common::{client, fetch_all, topic};

fn records(partition: i32, n: usize, tag: &str) -> Vec<TestRecord> {
    (0..n)
        .map(|i| {
            TestRecord::new(
                partition,
                Some(format!("k{i}").as_bytes()),
                Some(format!("{tag}-{i}").as_bytes()),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connects_negotiates_and_describes_the_cluster() {
    let clusters = Clusters::start();
    let c = client(&clusters.source.bootstrap).await;
    let conn = c.any_connection().await.unwrap();
    for api in [
        kafka_protocol::messages::ApiKey::Metadata,
        kafka_protocol::messages::ApiKey::Fetch,
        kafka_protocol::messages::ApiKey::Produce,
    ] {
        assert!(conn.versions().offers(api), "{api:?} not offered");
    }
    let desc = c.describe_cluster().await.unwrap();
    assert_eq!(desc.brokers.len(), 1, "{desc:?}");
    assert_eq!(desc.brokers[0].addr(), clusters.source.bootstrap);
    let metadata = c.refresh_metadata().await.unwrap();
    assert_eq!(metadata.brokers.len(), 1);

    // The two clusters are independent.
    let t = client(&clusters.target.bootstrap).await;
    t.create_topic(NewTopic::new(topic("only-on-target"), 1))
        .await
        .unwrap();
    let on_source = c.refresh_metadata().await.unwrap();
    assert!(!on_source.topics.contains_key(&topic("only-on-target")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_are_created_configured_and_deleted() {
    let clusters = Clusters::start();
    let c = client(&clusters.source.bootstrap).await;
    let name = topic("orders");
    c.create_topic(
        NewTopic::new(&name, 3)
            .replication_factor(1)
            .config("cleanup.policy", "compact")
            .config("retention.ms", "3600000"),
    )
    .await
    .unwrap();
    let metadata = c.cached_metadata();
    let info = metadata.topics.get(&name).expect("topic in metadata");
    assert_eq!(info.partitions.len(), 3);
    assert!(info.partitions.values().all(|p| p.leader.is_some()));

    // Creating it again is a typed error.
    let again = c.create_topic(NewTopic::new(&name, 3)).await.unwrap_err();
    assert_eq!(
        again.code(),
        Some(ResponseError::TopicAlreadyExists),
        "{again}"
    );

    // Configs: the keys we set are reported with their values.
    let resource = ConfigResource::Topic(name.clone());
    let configs: BTreeMap<_, _> = c
        .describe_configs(&resource)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.name, e.value))
        .collect();
    assert_eq!(configs.get("cleanup.policy"), Some(&Some("compact".into())));
    assert_eq!(configs.get("retention.ms"), Some(&Some("3600000".into())));

    c.incremental_alter_configs(
        &resource,
        &[
            AlterConfigOp::Set("retention.ms".into(), "7200000".into()),
            AlterConfigOp::Set("max.message.bytes".into(), "2097152".into()),
        ],
    )
    .await
    .unwrap();
    let configs: BTreeMap<_, _> = c
        .describe_configs(&resource)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.name, e.value))
        .collect();
    assert_eq!(configs.get("retention.ms"), Some(&Some("7200000".into())));
    assert_eq!(
        configs.get("max.message.bytes"),
        Some(&Some("2097152".into()))
    );

    // Asking about a topic that does not exist must not create it.
    let ghost = topic("ghost");
    let m = c.topic_metadata(&[&ghost]).await.unwrap();
    assert!(!m.topics.contains_key(&ghost));
    let m = c.refresh_metadata().await.unwrap();
    assert!(
        !m.topics.contains_key(&ghost),
        "metadata request created a topic"
    );
    let err = c.leader(&TopicPartition::new(&ghost, 0)).await.unwrap_err();
    assert!(
        matches!(err, Error::UnknownTopicOrPartition { .. }),
        "{err}"
    );

    let results = c.delete_topics(&[&name]).await.unwrap();
    assert!(results[0].1.is_ok(), "{results:?}");
    assert!(!c.cached_metadata().topics.contains_key(&name));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_earliest_latest_and_by_time() {
    let clusters = Clusters::start();
    let rdk = Rdk::new();
    let c = client(&clusters.source.bootstrap).await;
    let name = topic("events");
    c.create_topic(NewTopic::new(&name, 1)).await.unwrap();
    let base = 1_700_000_000_000i64;
    let recs: Vec<_> = (0..10)
        .map(|i| {
            TestRecord::new(0, None, Some(format!("v{i}").as_bytes()))
                .with_timestamp(base + i * 1000)
        })
        .collect();
    // One record per batch here, so each timestamp is a batch's timestamp too.
    for r in &recs {
        rdk.produce(
            &clusters.source.bootstrap,
            &name,
            std::slice::from_ref(r),
            "none",
        );
    }
    let tp = TopicPartition::new(&name, 0);
    let uncommitted = IsolationLevel::ReadUncommitted;
    let earliest = c
        .list_offset(&tp, OffsetSpec::Earliest, uncommitted)
        .await
        .unwrap();
    let latest = c
        .list_offset(&tp, OffsetSpec::Latest, uncommitted)
        .await
        .unwrap();
    assert_eq!(earliest.offset, 0);
    assert_eq!(latest.offset, 10);
    let by_time = c
        .list_offset(&tp, OffsetSpec::Timestamp(base + 4500), uncommitted)
        .await
        .unwrap();
    assert_eq!(by_time.offset, 5, "{by_time:?}");
    assert_eq!(by_time.timestamp, base + 5000);
    let after_all = c
        .list_offset(&tp, OffsetSpec::Timestamp(base + 60_000), uncommitted)
        .await
        .unwrap();
    assert_eq!(after_all.offset, -1, "no record at or after that time");

    // Several partitions at once; an unknown one gets its own error.
    let all = c
        .list_offsets(
            &[
                (tp.clone(), OffsetSpec::Latest),
                (TopicPartition::new(&name, 7), OffsetSpec::Latest),
            ],
            IsolationLevel::ReadCommitted,
        )
        .await
        .unwrap();
    assert_eq!(all[&tp].as_ref().unwrap().offset, 10);
    assert!(all[&TopicPartition::new(&name, 7)].is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_offsets_for_any_group() {
    let clusters = Clusters::start();
    let rdk = Rdk::new();
    let bootstrap = &clusters.source.bootstrap;
    let c = client(bootstrap).await;
    let name = topic("payments");
    c.create_topic(NewTopic::new(&name, 2)).await.unwrap();
    rdk.produce(bootstrap, &name, &records(0, 20, "a"), "none");
    rdk.produce(bootstrap, &name, &records(1, 20, "b"), "none");

    // A group that librdkafka committed for, without members.
    let group = topic("billing");
    rdk.commit(bootstrap, &group, &name, &[(0, 7), (1, 11)]);
    let listed = c.list_groups().await.unwrap();
    assert!(listed.iter().any(|g| g.group_id == group), "{listed:?}");
    let described = c.describe_group(&group).await.unwrap();
    assert!(!described.is_active(), "{described:?}");
    // Asked by partition, and for all topics (topics = null).
    let both = [TopicPartition::new(&name, 0), TopicPartition::new(&name, 1)];
    let committed = c.offset_fetch(&group, Some(&both)).await.unwrap();
    assert_eq!(committed[&TopicPartition::new(&name, 0)].offset, 7);
    assert_eq!(committed[&TopicPartition::new(&name, 1)].offset, 11);
    let all = c.offset_fetch(&group, None).await.unwrap();
    assert_eq!(all, committed);
    let only_p1 = c
        .offset_fetch(&group, Some(&[TopicPartition::new(&name, 1)]))
        .await
        .unwrap();
    assert_eq!(only_p1.len(), 1);

    // strait commits for the empty group; librdkafka reads it back.
    let commit = |p: i32, offset: i64| OffsetToCommit {
        tp: TopicPartition::new(&name, p),
        offset,
        leader_epoch: -1,
        metadata: Some("strait".into()),
    };
    c.offset_commit(&group, &[commit(0, 15), commit(1, 16)])
        .await
        .unwrap();
    let seen = rdk.committed(bootstrap, &group, &name, &[0, 1]);
    assert_eq!(seen.get(&0), Some(&15));
    assert_eq!(seen.get(&1), Some(&16));

    // A group with a running member, on either group protocol (classic, and Kafka 4's
    // consumer protocol of KIP-848, which DescribeGroups cannot see): its state says active, it
    // lists its member, and a commit is refused, typed. Once the member left, it is idle again.
    for protocol in [GroupProtocol::Classic, GroupProtocol::Consumer] {
        let active = topic(&format!("live-{protocol:?}"));
        let member = rdk.group_member_with(bootstrap, &active, &name, protocol);
        let described = c.describe_group(&active).await.unwrap();
        assert!(described.is_active(), "{protocol:?}: {described:?}");
        assert_eq!(described.members.len(), 1, "{protocol:?}: {described:?}");
        assert_eq!(
            described.members[0].client_id, "strait-rdk",
            "{described:?}"
        );
        let err = c.offset_commit(&active, &[commit(0, 3)]).await.unwrap_err();
        assert!(
            matches!(err, Error::GroupActive { .. }),
            "{protocol:?}: {err}"
        );
        assert!(!err.is_retriable());
        drop(member);
        let described = c.describe_group(&active).await.unwrap();
        assert!(
            !described.is_active(),
            "{protocol:?} after leaving: {described:?}"
        );
        c.offset_commit(&active, &[commit(0, 3)]).await.unwrap();
    }

    // A group nobody has heard of describes as dead/empty and has no offsets.
    let nobody = topic("nobody");
    assert!(!c.describe_group(&nobody).await.unwrap().is_active());
    assert!(c.offset_fetch(&nobody, None).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_fetch_many_partitions_with_typed_partition_errors() {
    let clusters = Clusters::start();
    let rdk = Rdk::new();
    let bootstrap = &clusters.source.bootstrap;
    let c = client(bootstrap).await;
    let name = topic("clicks");
    c.create_topic(NewTopic::new(&name, 3)).await.unwrap();
    rdk.produce(bootstrap, &name, &records(0, 30, "p0"), "lz4");
    rdk.produce(bootstrap, &name, &records(1, 5, "p1"), "none");

    let p0 = TopicPartition::new(&name, 0);
    let p1 = TopicPartition::new(&name, 1);
    let p2 = TopicPartition::new(&name, 2);
    let options = FetchOptions {
        max_wait: Duration::from_millis(50),
        ..FetchOptions::default()
    };
    let results = c
        .fetch(
            &[
                FetchPosition::new(p0.clone(), 0),
                FetchPosition::new(p1.clone(), 0),
                FetchPosition::new(p2.clone(), 0),
            ],
            &options,
        )
        .await;
    assert_eq!(results.len(), 3);
    let d0 = results[&p0].as_ref().unwrap();
    let d1 = results[&p1].as_ref().unwrap();
    let d2 = results[&p2].as_ref().unwrap();
    assert_eq!(
        (d0.high_watermark, d1.high_watermark, d2.high_watermark),
        (30, 5, 0)
    );
    assert!(d2.records.is_empty());
    let count = |records: &bytes::Bytes| -> i64 {
        strait_wire::BatchScanner::new(records.clone())
            .map(|b| b.unwrap().header.record_count as i64)
            .sum()
    };
    assert_eq!(count(&d0.records), 30);
    assert_eq!(count(&d1.records), 5);
    let lz4 = strait_wire::BatchScanner::new(d0.records.clone())
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(
        lz4.header.attributes.compression(),
        Some(kafka_protocol::records::Compression::Lz4)
    );

    // An offset past the end is OFFSET_OUT_OF_RANGE on Kafka, for that partition only. The test
    // broker answers it with no records and no error instead; both leave the other partition's
    // answer intact. (The typed error path is shown below, below the log start.)
    let results = c
        .fetch(
            &[
                FetchPosition::new(p0.clone(), 500),
                FetchPosition::new(p1.clone(), 2),
            ],
            &options,
        )
        .await;
    match &results[&p0] {
        Err(err) => assert_eq!(err.code(), Some(ResponseError::OffsetOutOfRange), "{err}"),
        Ok(data) => assert!(
            data.records.is_empty() && data.high_watermark == 30,
            "{data:?}"
        ),
    }
    // A fetch from inside a batch returns the whole batch; the records from 2 on are there.
    let from_two: Vec<_> =
        strait_wire::BatchScanner::new(results[&p1].as_ref().unwrap().records.clone())
            .map(|b| b.unwrap().header)
            .collect();
    assert!(from_two[0].base_offset <= 2, "{from_two:?}");
    assert_eq!(from_two.last().unwrap().next_offset(), 5);

    // Records deleted before we read them: log start moves, and reading below it is
    // OFFSET_OUT_OF_RANGE (the loss strait must record, DESIGN.md §3.4).
    let low = c.delete_records(&p1, 3).await.unwrap();
    assert_eq!(low, 3);
    let results = c
        .fetch(&[FetchPosition::new(p1.clone(), 0)], &options)
        .await;
    let err = results[&p1].as_ref().unwrap_err();
    assert_eq!(err.code(), Some(ResponseError::OffsetOutOfRange), "{err}");
    let earliest = c
        .list_offset(&p1, OffsetSpec::Earliest, IsolationLevel::ReadUncommitted)
        .await
        .unwrap();
    assert_eq!(earliest.offset, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_idempotent_produce_returns_exact_offsets() {
    let clusters = Clusters::start();
    let rdk = Rdk::new();
    let src = client(&clusters.source.bootstrap).await;
    let dst = client(&clusters.target.bootstrap).await;
    let name = topic("ledger");
    src.create_topic(NewTopic::new(&name, 2)).await.unwrap();
    dst.create_topic(NewTopic::new(&name, 2)).await.unwrap();
    // Many small batches on two partitions: each produce call is its own batch.
    for i in 0..12 {
        rdk.produce(
            &clusters.source.bootstrap,
            &name,
            &records(i % 2, 3 + i as usize, "x"),
            "zstd",
        );
    }
    let producer = RawProducer::new(dst.clone(), ProducerConfig::default())
        .await
        .unwrap();
    let mut all = Vec::new();
    for p in 0..2 {
        let tp = TopicPartition::new(&name, p);
        for b in fetch_all(&src, &tp, 0).await {
            all.push((tp.clone(), b));
        }
    }
    assert_eq!(all.len(), 12);
    // Everything in one call: several requests (one batch per partition each), all in flight.
    let acks = producer.send_all(all.clone()).await;
    let mut next = BTreeMap::new();
    for ((tp, batch), ack) in all.iter().zip(&acks) {
        let ack = ack.as_ref().unwrap();
        let expected = next.entry(tp.clone()).or_insert(0i64);
        assert_eq!(
            ack.base_offset, *expected,
            "{tp}: batches land in order, densely"
        );
        assert_eq!(ack.record_count, batch.header.record_count);
        *expected += ack.record_count as i64;
    }
    // The target holds the same batches, byte for byte from the records on, under our
    // producer id with consecutive sequences.
    let (pid, epoch) = producer.producer_id();
    for p in 0..2 {
        let tp = TopicPartition::new(&name, p);
        let source: Vec<_> = all
            .iter()
            .filter(|(t, _)| *t == tp)
            .map(|(_, b)| b)
            .collect();
        let target = fetch_all(&dst, &tp, 0).await;
        assert_eq!(target.len(), source.len());
        let mut seq = 0;
        for (s, t) in source.iter().zip(&target) {
            assert_eq!(t.header.producer_id, pid);
            assert_eq!(t.header.producer_epoch, epoch);
            assert_eq!(t.header.base_sequence, seq);
            seq += t.header.record_count;
            assert_eq!(s.bytes[61..], t.bytes[61..], "payload untouched");
            assert_eq!(s.header.max_timestamp, t.header.max_timestamp);
        }
    }
    // A second round continues the sequences.
    let tp0 = TopicPartition::new(&name, 0);
    let again = producer.send(&tp0, &all[0].1).await.unwrap();
    assert_eq!(again.base_offset, *next.get(&tp0).unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acls_describe_and_create_on_a_cluster_without_authorizer() {
    let clusters = Clusters::start();
    let c = client(&clusters.source.bootstrap).await;
    // Kafka without an authorizer answers SECURITY_DISABLED; strait reports it typed so that
    // ACL sync can skip with one log line (MM2's behaviour).
    let described = c
        .describe_acls(&AclFilter::all_of(AclResourceType::Topic))
        .await;
    match described {
        Ok(acls) => assert!(acls.is_empty(), "{acls:?}"),
        Err(e) => assert_eq!(e.code(), Some(ResponseError::SecurityDisabled), "{e}"),
    }
    let binding = AclBinding {
        resource_type: AclResourceType::Topic,
        resource_name: "orders".into(),
        pattern_type: AclPatternType::Literal,
        principal: "User:alice".into(),
        host: "*".into(),
        operation: AclOperation::Read,
        permission: AclPermission::Allow,
    };
    let created = c.create_acls(std::slice::from_ref(&binding)).await;
    match created {
        Ok(results) => {
            assert_eq!(results.len(), 1);
            let err = results[0].as_ref().unwrap_err();
            assert_eq!(err.code(), Some(ResponseError::SecurityDisabled), "{err}");
        }
        Err(e) => assert_eq!(e.code(), Some(ResponseError::SecurityDisabled), "{e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_partitions_is_not_offered_by_the_test_broker() {
    // The test broker does not offer CreatePartitions; the request path is covered by the
    // scripted fake broker (tests/fake_broker.rs). Here: the refusal is typed, not a hang.
    let clusters = Clusters::start();
    let c = client(&clusters.source.bootstrap).await;
    let name = topic("grow");
    c.create_topic(NewTopic::new(&name, 1)).await.unwrap();
    match c.create_partitions(&name, 3).await {
        Ok(()) => {
            let m = c.refresh_metadata().await.unwrap();
            assert_eq!(m.topics[&name].partitions.len(), 3);
        }
        Err(e) => assert!(
            matches!(e, Error::Version { .. })
                || e.code() == Some(ResponseError::UnsupportedVersion),
            "{e}"
        ),
    }
}
