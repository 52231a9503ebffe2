//! Remote topics made with the source topic's configs when the target refuses some of them
//! (the quick tier: both clusters are the scripted fake broker). A compacted source topic with
//! a key the target does not take (`remote.storage.enable` into a target without tiered
//! storage, a vendor's key into Apache Kafka) is created compacted, with the keys the target
//! takes, in one CreateTopics: never as a deleting topic left for a later AlterConfigs that a
//! principal with CREATE but not ALTER_CONFIGS cannot send. Where the policy itself is refused,
//! the topic is not created at all. A source topic whose configs cannot be read waits alone;
//! the others are created.

#![allow(unreachable_pub, dead_code, missing_docs)]

mod common;
#[path = "../../strait-kafka/tests/fake/mod.rs"]
mod fake;

use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{ApiKey, CreateTopicsResponse, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use strait_core::flow::topics::{ensure_remote_topics, MirroredTopic};

use fake::{script, Action, Body, FakeCluster};

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// A source holding `orders` (one partition), its configs set on the topic: compacted, with
/// a compaction lag and a key only some targets take.
async fn source() -> FakeCluster {
    let fake = FakeCluster::start(
        &[1],
        script(|_, req| match (&req.body, req.api) {
            (Body::DescribeConfigs(d), _)
                if d.resources
                    .iter()
                    .any(|r| r.resource_name.as_str() == "secret") =>
            {
                req.reply(&DescribeConfigsResponse::default().with_results(vec![
                        DescribeConfigsResult::default()
                            .with_resource_type(2)
                            .with_resource_name(s("secret"))
                            .with_error_code(ResponseError::TopicAuthorizationFailed.code()),
                    ]))
            }
            (_, ApiKey::DescribeConfigs) => {
                let configs = [
                    ("cleanup.policy", "compact"),
                    ("min.compaction.lag.ms", "60000"),
                    ("remote.storage.enable", "true"),
                ]
                .into_iter()
                .map(|(k, v)| {
                    DescribeConfigsResourceResult::default()
                        .with_name(s(k))
                        .with_value(Some(s(v)))
                        .with_config_source(1)
                })
                .collect();
                req.reply(&DescribeConfigsResponse::default().with_results(vec![
                        DescribeConfigsResult::default()
                            .with_resource_type(2)
                            .with_resource_name(s("orders"))
                            .with_configs(configs),
                    ]))
            }
            _ => Action::Default,
        }),
    )
    .await;
    fake.spec()
        .api_versions
        .push((ApiKey::DescribeConfigs, 0, 4));
    fake.set_topic("orders", &[1]);
    fake.set_topic("secret", &[1]);
    fake
}

/// A target that refuses every CreateTopics carrying one of `refused` (INVALID_CONFIG, as
/// Kafka answers a key it does not know), validated or not, and creates the rest. It offers no
/// way to alter configs (a principal without ALTER_CONFIGS).
async fn target(refused: &'static [&'static str]) -> FakeCluster {
    FakeCluster::start(
        &[1],
        script(move |fake, req| match &req.body {
            Body::CreateTopics(c) => {
                let results = c
                    .topics
                    .iter()
                    .map(|t| {
                        let refuses = t.configs.iter().any(|k| refused.contains(&k.name.as_str()));
                        let mut result = CreatableTopicResult::default().with_name(t.name.clone());
                        if refuses {
                            result = result
                                .with_error_code(ResponseError::InvalidConfig.code())
                                .with_error_message(Some(s("Unknown topic config name")));
                        } else if !c.validate_only {
                            fake.set_topic(t.name.as_str(), &[1]);
                        }
                        result
                    })
                    .collect();
                req.reply(&CreateTopicsResponse::default().with_topics(results))
            }
            _ => Action::Default,
        }),
    )
    .await
}

/// The configs of every CreateTopics that made a topic (not only validated it).
fn created_with(target: &FakeCluster, refused: &[&str]) -> Vec<Vec<(String, String)>> {
    target
        .requests(ApiKey::CreateTopics)
        .iter()
        .filter_map(|r| match &r.body {
            Body::CreateTopics(c) if !c.validate_only => Some(c),
            _ => None,
        })
        .flat_map(|c| &c.topics)
        .map(|t| {
            t.configs
                .iter()
                .map(|k| {
                    (
                        k.name.to_string(),
                        k.value.as_ref().map(|v| v.to_string()).unwrap_or_default(),
                    )
                })
                .collect::<Vec<_>>()
        })
        .filter(|configs| !configs.iter().any(|(k, _)| refused.contains(&k.as_str())))
        .collect()
}

fn orders() -> Vec<MirroredTopic> {
    vec![MirroredTopic {
        source: "orders".into(),
        remote: "A.orders".into(),
        partitions: 1,
        id: [0; 16],
    }]
}

async fn within<T>(fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), fut)
        .await
        .expect("took more than 30 s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_topic_is_created_compacted_without_the_refused_key() {
    const REFUSED: &[&str] = &["remote.storage.enable"];
    let (source, target) = (source().await, target(REFUSED).await);
    let flow = common::flow_config_between(("A", "B"), &source.addr(1), &target.addr(1), "");
    let made = within(async {
        let (src, dst) = (
            common::client(&source.addr(1)).await,
            common::client(&target.addr(1)).await,
        );
        ensure_remote_topics(&src, &dst, &flow, &orders()).await
    })
    .await
    .expect("remote topics");
    assert_eq!(made.counts.get("A.orders"), Some(&1), "{made:?}");
    assert!(made.refused.is_empty(), "{made:?}");
    let created = created_with(&target, REFUSED);
    assert_eq!(
        created,
        vec![vec![
            ("cleanup.policy".to_owned(), "compact".to_owned()),
            ("min.compaction.lag.ms".to_owned(), "60000".to_owned()),
        ]],
        "one create, compacted, with every key the target takes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_whose_policy_is_refused_is_not_created() {
    const REFUSED: &[&str] = &["cleanup.policy"];
    let (source, target) = (source().await, target(REFUSED).await);
    let flow = common::flow_config_between(("A", "B"), &source.addr(1), &target.addr(1), "");
    let made = within(async {
        let (src, dst) = (
            common::client(&source.addr(1)).await,
            common::client(&target.addr(1)).await,
        );
        ensure_remote_topics(&src, &dst, &flow, &orders()).await
    })
    .await
    .expect("remote topics");
    assert!(made.refused.contains_key("A.orders"), "{made:?}");
    assert!(!made.counts.contains_key("A.orders"), "{made:?}");
    assert!(
        created_with(&target, REFUSED).is_empty(),
        "never created without its cleanup policy"
    );
}

/// A source topic whose configs cannot be described (TOPIC_AUTHORIZATION_FAILED: an ACL without
/// DESCRIBE_CONFIGS on it) waits, refused, and the other topics' remote topics are made: one
/// bad topic never stops the others (before, the whole call failed, and with it the flow).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_whose_configs_cannot_be_read_waits_alone() {
    let (source, target) = (source().await, target(&[]).await);
    let flow = common::flow_config_between(("A", "B"), &source.addr(1), &target.addr(1), "");
    let mut topics = orders();
    topics.push(MirroredTopic {
        source: "secret".into(),
        remote: "A.secret".into(),
        partitions: 1,
        id: [0; 16],
    });
    let made = within(async {
        let (src, dst) = (
            common::client(&source.addr(1)).await,
            common::client(&target.addr(1)).await,
        );
        ensure_remote_topics(&src, &dst, &flow, &topics).await
    })
    .await
    .expect("one topic's configs fail nothing else");
    assert_eq!(made.counts.get("A.orders"), Some(&1), "{made:?}");
    let why = made
        .refused
        .get("A.secret")
        .expect("the unreadable topic waits");
    assert_eq!(
        why.code(),
        Some(ResponseError::TopicAuthorizationFailed),
        "{why}"
    );
}
