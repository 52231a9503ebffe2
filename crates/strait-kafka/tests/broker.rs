//! Every runtime operation against Apache Kafka (single-node KRaft clusters started by
//! `scripts/test-broker`), with librdkafka as the independent client at the ends: topics,
//! configs with their sources, partitions added, offsets by time, records deleted, group
//! offsets with their metadata, and ACLs with and without Kafka's `StandardAuthorizer`.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use strait_kafka::admin::{
    AclBinding, AclFilter, AclOperation, AclPatternType, AclPermission, AclResourceType,
    AlterConfigOp, ConfigEntry, ConfigResource, ConfigSource, IsolationLevel, NewTopic, OffsetSpec,
};
use strait_kafka::fetch::{FetchOptions, FetchPosition};
use strait_kafka::groups::{CommittedOffset, OffsetToCommit};
use strait_kafka::produce::{ProducerConfig, RawProducer};
use strait_kafka::{Client, Error, TopicPartition};
use strait_testkit::{ClusterOptions, Clusters, GroupProtocol, Names, Rdk, TestRecord};

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
    let clusters = Clusters::shared();
    let names = Names::new();
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
    let only_on_target = names.topic("only-on-target");
    t.create_topic(NewTopic::new(&only_on_target, 1))
        .await
        .unwrap();
    let on_source = c.refresh_metadata().await.unwrap();
    assert!(!on_source.topics.contains_key(&only_on_target));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_are_created_configured_and_deleted() {
    // A broker-wide default of our own, to tell STATIC_BROKER_CONFIG from Kafka's built-in
    // defaults: `log.cleaner.min.compaction.lag.ms` is the broker's `min.compaction.lag.ms`.
    let clusters = Clusters::start_with(
        ClusterOptions::default().property("log.cleaner.min.compaction.lag.ms", "4321"),
    );
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
    eventually(
        &format!("{name} with 3 led partitions in metadata"),
        || async {
            let metadata = c.refresh_metadata().await.map_err(|e| e.to_string())?;
            match metadata.topics.get(&name) {
                Some(info)
                    if info.partitions.len() == 3
                        && info.partitions.values().all(|p| p.leader.is_some()) =>
                {
                    Ok(())
                }
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;

    // Creating it again is a typed error.
    let again = c.create_topic(NewTopic::new(&name, 3)).await.unwrap_err();
    assert_eq!(
        again.code(),
        Some(ResponseError::TopicAlreadyExists),
        "{again}"
    );

    // Configs: Kafka lists every topic config, each with where its value comes from. Only the
    // keys set on the topic are DYNAMIC_TOPIC_CONFIG (what MM2 copies); the rest are the
    // broker's defaults, from its properties or Kafka's built-in ones.
    let resource = ConfigResource::Topic(name.clone());
    let configs = config_map(&c, &resource).await;
    assert!(
        configs.len() > 20,
        "every topic config is listed: {configs:?}"
    );
    let set_on_topic: Vec<&str> = configs
        .values()
        .filter(|e| e.source == ConfigSource::DynamicTopic)
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(set_on_topic, ["cleanup.policy", "retention.ms"]);
    assert_config(
        &configs,
        "cleanup.policy",
        "compact",
        ConfigSource::DynamicTopic,
    );
    assert_config(
        &configs,
        "retention.ms",
        "3600000",
        ConfigSource::DynamicTopic,
    );
    assert_config(
        &configs,
        "min.compaction.lag.ms",
        "4321",
        ConfigSource::StaticBroker,
    );
    assert_config(
        &configs,
        "compression.type",
        "producer",
        ConfigSource::Default,
    );
    assert!(!configs["cleanup.policy"].is_default());
    assert!(configs["min.compaction.lag.ms"].is_default());
    assert!(configs["compression.type"].is_default());
    assert!(configs.values().all(|e| !e.read_only && !e.sensitive));

    // Key by key: two set, one deleted (back to Kafka's default). A broker applies the change
    // to its cache a moment after the controller answered, so read until it shows.
    c.incremental_alter_configs(
        &resource,
        &[
            AlterConfigOp::Set("retention.ms".into(), "7200000".into()),
            AlterConfigOp::Set("max.message.bytes".into(), "2097152".into()),
            AlterConfigOp::Delete("cleanup.policy".into()),
        ],
    )
    .await
    .unwrap();
    let configs = eventually("the altered configs", || async {
        let configs = config_map(&c, &resource).await;
        let value = |key: &str| configs[key].value.clone().unwrap_or_default();
        if value("retention.ms") == "7200000" && value("cleanup.policy") == "delete" {
            Ok(configs)
        } else {
            Err(format!("{configs:?}"))
        }
    })
    .await;
    assert_config(
        &configs,
        "retention.ms",
        "7200000",
        ConfigSource::DynamicTopic,
    );
    assert_config(
        &configs,
        "max.message.bytes",
        "2097152",
        ConfigSource::DynamicTopic,
    );
    assert_config(&configs, "cleanup.policy", "delete", ConfigSource::Default);

    // Kafka refuses what it does not know, typed and at once (not retried).
    for op in [
        AlterConfigOp::Set("cleanup.policy".into(), "sideways".into()),
        AlterConfigOp::Set("no.such.config".into(), "1".into()),
    ] {
        let err = c
            .incremental_alter_configs(&resource, std::slice::from_ref(&op))
            .await
            .unwrap_err();
        assert_eq!(
            err.code(),
            Some(ResponseError::InvalidConfig),
            "{op:?}: {err}"
        );
        assert!(!err.is_retriable(), "{err}");
        assert!(err.to_string().contains(&name), "{err}");
    }

    // A broker's own configs: from its properties file, or read-only.
    let broker = c.describe_cluster().await.unwrap().brokers[0].id;
    let configs = config_map(&c, &ConfigResource::Broker(broker)).await;
    assert_config(
        &configs,
        "log.cleaner.min.compaction.lag.ms",
        "4321",
        ConfigSource::StaticBroker,
    );
    assert_eq!(
        configs["node.id"].value.as_deref(),
        Some(broker.0.to_string().as_str())
    );
    assert!(configs["node.id"].read_only, "{:?}", configs["node.id"]);

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
    eventually(&format!("{name} gone from metadata"), || async {
        let metadata = c.refresh_metadata().await.map_err(|e| e.to_string())?;
        match metadata.topics.get(&name) {
            None => Ok(()),
            Some(info) => Err(format!("{info:?}")),
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_earliest_latest_and_by_time() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let rdk = Rdk::new();
    let c = client(&clusters.source.bootstrap).await;
    let name = names.topic("events");
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
    let clusters = Clusters::shared();
    let names = Names::new();
    let rdk = Rdk::new();
    let bootstrap = &clusters.source.bootstrap;
    let c = client(bootstrap).await;
    let name = names.topic("payments");
    c.create_topic(NewTopic::new(&name, 2)).await.unwrap();
    rdk.produce(bootstrap, &name, &records(0, 20, "a"), "none");
    rdk.produce(bootstrap, &name, &records(1, 20, "b"), "none");

    // A group that librdkafka committed for, without members.
    let group = names.group("billing");
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
        let active = names.group(&format!("live-{protocol:?}"));
        let member = rdk.group_member_with(bootstrap, &active, &name, protocol);
        let described = c.describe_group(&active).await.unwrap();
        assert!(described.is_active(), "{protocol:?}: {described:?}");
        assert_eq!(described.members.len(), 1, "{protocol:?}: {described:?}");
        assert_eq!(
            described.members[0].client_id, "strait-rdk",
            "{described:?}"
        );
        // Described together with the idle group and an unknown one, each is described as
        // when asked alone.
        let ids = [active.clone(), group.clone(), names.group("unheard-of")];
        let together = c.describe_groups(&ids).await;
        assert_eq!(together.len(), ids.len(), "{together:?}");
        for id in &ids {
            let alone = c.describe_group(id).await.unwrap();
            assert_eq!(together[id].as_ref().unwrap(), &alone, "{protocol:?}: {id}");
        }
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
    let nobody = names.group("nobody");
    assert!(!c.describe_group(&nobody).await.unwrap().is_active());
    assert!(c.offset_fetch(&nobody, None).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_fetch_many_partitions_with_typed_partition_errors() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let rdk = Rdk::new();
    let bootstrap = &clusters.source.bootstrap;
    let c = client(bootstrap).await;
    let name = names.topic("clicks");
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

    // An offset past the end is OFFSET_OUT_OF_RANGE, for that partition only; the other
    // partition's answer is intact.
    let results = c
        .fetch(
            &[
                FetchPosition::new(p0.clone(), 500),
                FetchPosition::new(p1.clone(), 2),
            ],
            &options,
        )
        .await;
    let err = results[&p0].as_ref().unwrap_err();
    assert_eq!(err.code(), Some(ResponseError::OffsetOutOfRange), "{err}");
    // A fetch from inside a batch returns the whole batch; the records from 2 on are there.
    let from_two: Vec<_> =
        strait_wire::BatchScanner::new(results[&p1].as_ref().unwrap().records.clone())
            .map(|b| b.unwrap().header)
            .collect();
    assert!(from_two[0].base_offset <= 2, "{from_two:?}");
    assert_eq!(from_two.last().unwrap().next_offset(), 5);

    // Records deleted before we read them: log start moves, and reading below it is
    // OFFSET_OUT_OF_RANGE (the loss strait must record, docs/design.md §3.4).
    let low = c.delete_records(&p1, 3).await.unwrap();
    assert_eq!(low, 3);
    let results = c
        .fetch(&[FetchPosition::new(p1.clone(), 0)], &options)
        .await;
    let err = results[&p1].as_ref().unwrap_err();
    assert_eq!(err.code(), Some(ResponseError::OffsetOutOfRange), "{err}");
    // Past the high watermark is OFFSET_OUT_OF_RANGE, typed, and moves nothing; -1 deletes up
    // to the high watermark.
    let err = c.delete_records(&p1, 99).await.unwrap_err();
    assert_eq!(err.code(), Some(ResponseError::OffsetOutOfRange), "{err}");
    let earliest = c
        .list_offset(&p1, OffsetSpec::Earliest, IsolationLevel::ReadUncommitted)
        .await
        .unwrap();
    assert_eq!(earliest.offset, 3);
    assert_eq!(c.delete_records(&p1, -1).await.unwrap(), 5);
    let earliest = c
        .list_offset(&p1, OffsetSpec::Earliest, IsolationLevel::ReadUncommitted)
        .await
        .unwrap();
    assert_eq!(earliest.offset, 5);
    let results = c
        .fetch(&[FetchPosition::new(p1.clone(), 5)], &options)
        .await;
    let emptied = results[&p1].as_ref().unwrap();
    assert!(emptied.records.is_empty(), "{emptied:?}");
    assert_eq!(emptied.high_watermark, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_idempotent_produce_returns_exact_offsets() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let rdk = Rdk::new();
    let src = client(&clusters.source.bootstrap).await;
    let dst = client(&clusters.target.bootstrap).await;
    let name = names.topic("ledger");
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
async fn acls_are_created_and_described_with_kafkas_authorizer() {
    let clusters = Clusters::start_with(ClusterOptions::default().with_authorizer());
    let c = client(&clusters.source.bootstrap).await;
    let acl = |name: &str, principal: &str, operation, permission| AclBinding {
        resource_type: AclResourceType::Topic,
        resource_name: name.into(),
        pattern_type: AclPatternType::Literal,
        principal: principal.into(),
        host: "*".into(),
        operation,
        permission,
    };
    let read = acl(
        "orders",
        "User:alice",
        AclOperation::Read,
        AclPermission::Allow,
    );
    let deny = AclBinding {
        host: "10.0.0.9".into(),
        ..acl(
            "orders",
            "User:eve",
            AclOperation::Write,
            AclPermission::Deny,
        )
    };
    let prefixed = AclBinding {
        pattern_type: AclPatternType::Prefixed,
        ..acl(
            "pay",
            "User:alice",
            AclOperation::Describe,
            AclPermission::Allow,
        )
    };
    // A principal without its type: Kafka refuses that one ACL, the others are created.
    let broken = acl("orders", "alice", AclOperation::Read, AclPermission::Allow);
    let results = c
        .create_acls(&[read.clone(), broken, deny.clone(), prefixed.clone()])
        .await
        .unwrap();
    assert_eq!(results.len(), 4);
    assert!(
        results[0].is_ok() && results[2].is_ok() && results[3].is_ok(),
        "{results:?}"
    );
    let err = results[1].as_ref().unwrap_err();
    assert_eq!(err.code(), Some(ResponseError::InvalidRequest), "{err}");
    assert!(err.to_string().contains("ACL on orders"), "{err}");

    // Listed back once the broker has them (ACLs reach a broker's authorizer through the
    // metadata log, a moment after CreateAcls is answered).
    let mut all = eventually("the three ACLs listed", || async {
        let acls = c
            .describe_acls(&AclFilter::all_of(AclResourceType::Topic))
            .await
            .map_err(|e| e.to_string())?;
        if acls.len() == 3 {
            Ok(acls)
        } else {
            Err(format!("{acls:?}"))
        }
    })
    .await;
    all.sort();
    let mut expected = vec![read.clone(), deny.clone(), prefixed.clone()];
    expected.sort();
    assert_eq!(all, expected);

    // Filters: by pattern type (MM2 lists the target's LITERAL ones), by principal, by
    // resource type.
    let literal = c
        .describe_acls(&AclFilter {
            pattern_type: AclPatternType::Literal,
            ..AclFilter::all_of(AclResourceType::Topic)
        })
        .await
        .unwrap();
    assert_eq!(literal.len(), 2, "{literal:?}");
    assert!(!literal.contains(&prefixed));
    let eve = c
        .describe_acls(&AclFilter {
            principal: Some("User:eve".into()),
            ..AclFilter::all_of(AclResourceType::Any)
        })
        .await
        .unwrap();
    assert_eq!(eve, [deny]);
    let groups = c
        .describe_acls(&AclFilter::all_of(AclResourceType::Group))
        .await
        .unwrap();
    assert!(groups.is_empty(), "{groups:?}");

    // Creating one that exists is not an error.
    let again = c.create_acls(std::slice::from_ref(&read)).await.unwrap();
    assert!(again[0].is_ok(), "{again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acls_on_a_cluster_without_authorizer_are_security_disabled() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let c = client(&clusters.source.bootstrap).await;
    // Kafka without an authorizer answers SECURITY_DISABLED; strait reports it typed so that
    // ACL sync can skip with one log line (MM2's behaviour).
    let err = c
        .describe_acls(&AclFilter::all_of(AclResourceType::Topic))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(ResponseError::SecurityDisabled), "{err}");
    assert!(!err.is_retriable());
    let binding = AclBinding {
        resource_type: AclResourceType::Topic,
        resource_name: names.topic("orders"),
        pattern_type: AclPatternType::Literal,
        principal: "User:alice".into(),
        host: "*".into(),
        operation: AclOperation::Read,
        permission: AclPermission::Allow,
    };
    let results = c.create_acls(std::slice::from_ref(&binding)).await.unwrap();
    assert_eq!(results.len(), 1);
    let err = results[0].as_ref().unwrap_err();
    assert_eq!(err.code(), Some(ResponseError::SecurityDisabled), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_are_added_to_a_topic() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let rdk = Rdk::new();
    let bootstrap = &clusters.source.bootstrap;
    let c = client(bootstrap).await;
    let name = names.topic("grow");
    c.create_topic(NewTopic::new(&name, 1)).await.unwrap();
    rdk.produce(bootstrap, &name, &records(0, 3, "old"), "none");
    c.create_partitions(&name, 3).await.unwrap();
    // Kafka's Admin says it may take a moment for brokers to learn of the new partitions.
    eventually(&format!("{name} with 3 led partitions"), || async {
        let metadata = c.refresh_metadata().await.map_err(|e| e.to_string())?;
        let partitions = &metadata.topics[&name].partitions;
        if partitions.len() == 3 && partitions.values().all(|p| p.leader.is_some()) {
            Ok(())
        } else {
            Err(format!("{partitions:?}"))
        }
    })
    .await;

    // The new partitions take records (librdkafka writes, strait reads), the old one kept its.
    rdk.produce(bootstrap, &name, &records(2, 4, "new"), "none");
    let count = |batches: Vec<strait_wire::RawBatch>| -> i64 {
        batches
            .iter()
            .map(|b| i64::from(b.header.record_count))
            .sum()
    };
    assert_eq!(
        count(fetch_all(&c, &TopicPartition::new(&name, 2), 0).await),
        4
    );
    assert_eq!(
        count(fetch_all(&c, &TopicPartition::new(&name, 0), 0).await),
        3
    );
    assert_eq!(
        count(fetch_all(&c, &TopicPartition::new(&name, 1), 0).await),
        0
    );

    // As many as it has, or fewer: INVALID_PARTITIONS with Kafka's message, not retried.
    for total in [3, 2] {
        match c.create_partitions(&name, total).await.unwrap_err() {
            Error::Broker {
                code: ResponseError::InvalidPartitions,
                message,
                context,
            } => {
                let message = message.unwrap_or_default();
                assert!(message.contains('3'), "{total}: {message}");
                assert_eq!(context, strait_kafka::Context::Topic(name.clone()));
            }
            other => panic!("{total}: expected INVALID_PARTITIONS, got {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_offsets_keep_their_metadata_and_leader_epoch() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let rdk = Rdk::new();
    let bootstrap = &clusters.source.bootstrap;
    let c = client(bootstrap).await;
    let orders = names.topic("orders");
    let refunds = names.topic("refunds");
    c.create_topic(NewTopic::new(&orders, 2)).await.unwrap();
    c.create_topic(NewTopic::new(&refunds, 1)).await.unwrap();
    let group = names.group("mirrored-group");
    let commit = |tp: TopicPartition, offset: i64, leader_epoch: i32, metadata: Option<&str>| {
        OffsetToCommit {
            tp,
            offset,
            leader_epoch,
            metadata: metadata.map(str::to_owned),
        }
    };
    let o0 = TopicPartition::new(&orders, 0);
    let o1 = TopicPartition::new(&orders, 1);
    let r0 = TopicPartition::new(&refunds, 0);
    c.offset_commit(
        &group,
        &[
            commit(o0.clone(), 5, 0, Some("strait: from source offset 17")),
            commit(o1.clone(), 0, -1, None),
            commit(r0.clone(), 9, 0, Some("ünïcode ✓")),
        ],
    )
    .await
    .unwrap();

    // All topics of the group at once (topics = null), each with what was committed; no
    // metadata is kept as "" (as Kafka's own clients send it).
    let all = c.offset_fetch(&group, None).await.unwrap();
    let expected = |offset: i64, leader_epoch: i32, metadata: &str| CommittedOffset {
        offset,
        leader_epoch,
        metadata: Some(metadata.to_owned()),
    };
    assert_eq!(
        all,
        BTreeMap::from([
            (o0.clone(), expected(5, 0, "strait: from source offset 17")),
            (o1.clone(), expected(0, -1, "")),
            (r0.clone(), expected(9, 0, "ünïcode ✓")),
        ])
    );
    // librdkafka sees the same offsets.
    assert_eq!(
        rdk.committed(bootstrap, &group, &orders, &[0, 1]),
        BTreeMap::from([(0, 5), (1, 0)])
    );

    // A later commit replaces offset, epoch and metadata.
    c.offset_commit(&group, &[commit(o0.clone(), 6, -1, None)])
        .await
        .unwrap();
    let now = c
        .offset_fetch(&group, Some(std::slice::from_ref(&o0)))
        .await
        .unwrap();
    assert_eq!(now, BTreeMap::from([(o0.clone(), expected(6, -1, ""))]));

    // Metadata longer than the broker keeps (offset.metadata.max.bytes, 4096) is refused for
    // that partition, typed, and nothing is written.
    let long = "m".repeat(5000);
    let err = c
        .offset_commit(&group, &[commit(o0.clone(), 7, -1, Some(&long))])
        .await
        .unwrap_err();
    assert_eq!(
        err.code(),
        Some(ResponseError::OffsetMetadataTooLarge),
        "{err}"
    );
    let now = c
        .offset_fetch(&group, Some(std::slice::from_ref(&o0)))
        .await
        .unwrap();
    assert_eq!(now[&o0].offset, 6);
}

/// Runs `check` every 100 ms until it returns `Ok`, for up to 30 s, and returns its value; a
/// panic with its last `Err` otherwise. Kafka applies topic, partition, config and ACL changes
/// to a broker's caches a moment after the request that made them was answered (its `Admin`
/// documents it), so a read right after a change may not show it yet.
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match check().await {
            Ok(value) => return value,
            Err(last) if Instant::now() > deadline => {
                panic!("{what}: not so after 30 s; last seen: {last}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// A resource's configs by name.
async fn config_map(c: &Client, resource: &ConfigResource) -> BTreeMap<String, ConfigEntry> {
    c.describe_configs(resource)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.name.clone(), e))
        .collect()
}

fn assert_config(
    configs: &BTreeMap<String, ConfigEntry>,
    key: &str,
    value: &str,
    source: ConfigSource,
) {
    let entry = configs
        .get(key)
        .unwrap_or_else(|| panic!("{key} not listed: {configs:?}"));
    assert_eq!(
        (entry.value.as_deref(), entry.source),
        (Some(value), source),
        "{entry:?}"
    );
}

/// Fetch sessions (KIP-227) against Kafka: 200 partitions fetched round after round, as a flow
/// does, with records produced to a few of them between rounds. After the first (full) fetch
/// every request continues the broker's session, and still every partition comes back each
/// round, with its right high watermark, and every record arrives once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_sessions_carry_many_partitions_across_incremental_fetches() {
    const PARTITIONS: i32 = 200;
    let clusters = Clusters::shared();
    let names = Names::new();
    let rdk = Rdk::new();
    let bootstrap = &clusters.source.bootstrap;
    let c = client(bootstrap).await;
    let name = names.topic("sessions");
    c.create_topic(NewTopic::new(&name, PARTITIONS))
        .await
        .unwrap();
    let tp = |p: i32| TopicPartition::new(&name, p);
    let leader = eventually("leaders of the new topic", || async {
        c.refresh_metadata().await.map_err(|e| e.to_string())?;
        let leaders: Option<Vec<_>> = (0..PARTITIONS)
            .map(|p| c.cached_metadata().leader(&tp(p)))
            .collect();
        leaders
            .and_then(|l| l.first().copied())
            .ok_or_else(|| "no leader yet".to_owned())
    })
    .await;
    let options = FetchOptions {
        max_wait: Duration::from_millis(20),
        ..FetchOptions::default()
    };
    let mut positions: BTreeMap<i32, i64> = (0..PARTITIONS).map(|p| (p, 0)).collect();
    let mut values: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    let mut expected_hw: BTreeMap<i32, i64> = BTreeMap::new();
    let rounds = std::cell::Cell::new(0u64);
    // One round: fetch every position, check every partition answered with its high watermark,
    // keep the values and move on. Returns whether anything arrived.
    let round = |positions: &mut BTreeMap<i32, i64>,
                 values: &mut BTreeMap<i32, Vec<String>>,
                 expected_hw: &BTreeMap<i32, i64>,
                 results: strait_kafka::fetch::FetchResults| {
        rounds.set(rounds.get() + 1);
        assert_eq!(results.len(), positions.len());
        let mut moved = false;
        for (p, offset) in positions.iter_mut() {
            let data = results[&tp(*p)]
                .as_ref()
                .unwrap_or_else(|e| panic!("{p}: {e}"));
            assert_eq!(
                data.high_watermark,
                expected_hw.get(p).copied().unwrap_or(0),
                "partition {p}"
            );
            for batch in strait_wire::BatchScanner::new(data.records.clone()) {
                let batch = batch.unwrap();
                if batch.header.next_offset() <= *offset {
                    continue;
                }
                assert_eq!(
                    batch.header.base_offset, *offset,
                    "partition {p}: a gap or a repeat"
                );
                let mut bytes = batch.bytes.clone();
                let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut bytes).unwrap();
                for r in set.records {
                    let v = r.value.map(|v| String::from_utf8_lossy(&v).into_owned());
                    values.entry(*p).or_default().push(v.unwrap_or_default());
                }
                *offset = batch.header.next_offset();
                moved = true;
            }
        }
        moved
    };
    let ask = |positions: &BTreeMap<i32, i64>| -> Vec<FetchPosition> {
        positions
            .iter()
            .map(|(p, o)| FetchPosition::new(tp(*p), *o))
            .collect()
    };

    // The first fetch that every partition answers makes the session (a new topic's partitions
    // may answer NOT_LEADER_OR_FOLLOWER for a moment, which resets it); nothing to read yet.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let results = c.fetch(&ask(&positions), &options).await;
        if results.values().all(Result::is_ok) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "partitions still failing: {results:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let incremental_before = c.incremental_fetches();
    let session = c
        .fetch_session_id(leader)
        .expect("Kafka made a fetch session");
    assert_ne!(session, 0);

    for (wave, produced) in [[(3, 10), (77, 7), (199, 1)], [(3, 5), (150, 40), (0, 2)]]
        .iter()
        .enumerate()
    {
        for (p, n) in produced {
            rdk.produce(
                bootstrap,
                &name,
                &records(*p, *n, &format!("w{wave}")),
                "none",
            );
            *expected_hw.entry(*p).or_default() += *n as i64;
        }
        let mut quiet = 0;
        for _ in 0..100 {
            let results = c.fetch(&ask(&positions), &options).await;
            if round(&mut positions, &mut values, &expected_hw, results) {
                quiet = 0;
            } else if positions
                .iter()
                .all(|(p, o)| *o == expected_hw.get(p).copied().unwrap_or(0))
            {
                quiet += 1;
                if quiet == 3 {
                    break;
                }
            }
        }
        for (p, end) in &expected_hw {
            assert_eq!(positions[p], *end, "partition {p} read to its end");
        }
    }
    let want = |parts: &[(usize, &str)]| -> Vec<String> {
        parts
            .iter()
            .flat_map(|(n, tag)| (0..*n).map(move |i| format!("{tag}-{i}")))
            .collect()
    };
    assert_eq!(values[&3], want(&[(10, "w0"), (5, "w1")]));
    assert_eq!(values[&77], want(&[(7, "w0")]));
    assert_eq!(values[&199], want(&[(1, "w0")]));
    assert_eq!(values[&150], want(&[(40, "w1")]));
    assert_eq!(values[&0], want(&[(2, "w1")]));
    assert_eq!(values.len(), 5);

    // Every fetch since continued the same session.
    assert_eq!(c.fetch_session_id(leader), Some(session));
    assert_eq!(c.incremental_fetches() - incremental_before, rounds.get());

    // Half the partitions dropped: they are forgotten, the rest still answer, incrementally.
    positions.retain(|p, _| p % 2 == 1);
    let results = c.fetch(&ask(&positions), &options).await;
    round(&mut positions, &mut values, &expected_hw, results);
    assert_eq!(c.fetch_session_id(leader), Some(session));
    assert_eq!(c.incremental_fetches() - incremental_before, rounds.get());
}

/// `client.rack` set against a cluster without a replica selector: fetches carry the rack and
/// nothing changes (the leader answers, no replica is named).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_rack_is_harmless_without_a_replica_selector() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let rdk = Rdk::new();
    let bootstrap = &clusters.source.bootstrap;
    let mut config = strait_kafka::ClientConfig::new([bootstrap.as_str()]);
    config.operation_timeout = Duration::from_secs(20);
    config.client_rack = Some("rack-a".into());
    let c = Client::connect(config).await.unwrap();
    let name = names.topic("racked");
    c.create_topic(NewTopic::new(&name, 2)).await.unwrap();
    rdk.produce(bootstrap, &name, &records(1, 12, "r"), "lz4");
    let p1 = TopicPartition::new(&name, 1);
    let batches = fetch_all(&c, &p1, 0).await;
    let count: i64 = batches
        .iter()
        .map(|b| i64::from(b.header.record_count))
        .sum();
    assert_eq!(count, 12);
    assert_eq!(batches.last().unwrap().header.next_offset(), 12);
}
