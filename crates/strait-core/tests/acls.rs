//! MM2's topic ACL sync (`docs/mm2-behaviour.md` §1.9) against Apache Kafka and at the request level:
//!
//! - **Kafka with `StandardAuthorizer` at both ends**: ACLs made on the source are copied to the
//!   target as MM2's rules say, the target's ACLs read back by Kafka's own `kafka-acls` tool;
//!   a second pass creates nothing, an ACL deleted on the target is created again, the
//!   target's own ACLs are left alone;
//! - **Kafka without an authorizer as source** (it answers SECURITY_DISABLED): the pass is
//!   skipped with [`AclSyncOutcome::SourceHasNoAuthorizer`], said once in the log however many
//!   passes run, and nothing is asked of the target (a scripted fake, which records every
//!   request);
//! - **Kafka without an authorizer as target**: the copies are worked out but cannot be
//!   created ([`AclSyncOutcome::TargetHasNoAuthorizer`]), warned once;
//! - **scripted fake source and target**, for what Kafka does not do on demand: the exact
//!   DescribeAcls filters and CreateAcls creations sent, a creation the target refuses (tried
//!   again alone at the next pass), a source that answers a group ACL to a topic query.
//!
//! The rules themselves (which ACLs, renamed how) are unit tests of `acls::remote_acl`.

#![allow(unreachable_pub, dead_code, missing_docs)]

mod common;
#[path = "../../strait-kafka/tests/fake/mod.rs"]
mod fake;

use std::collections::BTreeSet;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{ApiKey, CreateAclsResponse, DescribeAclsResponse};
use kafka_protocol::protocol::StrBytes;
use strait_core::acls::{AclSkip, AclSyncOutcome, AclSyncTask};
use strait_kafka::admin::{
    AclBinding, AclFilter, AclOperation, AclPatternType, AclPermission, AclResourceType,
};
use strait_kafka::Client;
use strait_testkit::{kafka_tool, ClusterOptions, Clusters, Names};

use fake::{script, Action, Body, FakeCluster};

/// An ACL as the wire carries it: resource type, name, pattern type, principal, host,
/// operation, permission. Codes: resource TOPIC 2, GROUP 3; pattern LITERAL 3, PREFIXED 4;
/// operation ALL 2, READ 3, WRITE 4, DESCRIBE 8, DESCRIBE_CONFIGS 10; permission DENY 2,
/// ALLOW 3.
type WireAcl = (i8, String, i8, String, String, i8, i8);

fn wire(
    resource: i8,
    name: &str,
    pattern: i8,
    principal: &str,
    host: &str,
    op: i8,
    perm: i8,
) -> WireAcl {
    (
        resource,
        name.into(),
        pattern,
        principal.into(),
        host.into(),
        op,
        perm,
    )
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// A DescribeAcls answer listing `acls`, one resource entry per ACL (Kafka groups them by
/// resource; either is valid).
fn describe_answer(acls: &[WireAcl]) -> DescribeAclsResponse {
    DescribeAclsResponse::default().with_resources(
        acls.iter()
            .map(|(resource, name, pattern, principal, host, op, perm)| {
                DescribeAclsResource::default()
                    .with_resource_type(*resource)
                    .with_resource_name(s(name))
                    .with_pattern_type(*pattern)
                    .with_acls(vec![AclDescription::default()
                        .with_principal(s(principal))
                        .with_host(s(host))
                        .with_operation(*op)
                        .with_permission_type(*perm)])
            })
            .collect(),
    )
}

/// A one-broker fake cluster offering the ACL APIs, answering with `answer` (or the built-in
/// answers).
async fn fake_cluster(
    answer: impl Fn(&Body) -> Option<DescribeOrCreate> + Send + Sync + 'static,
) -> FakeCluster {
    let fake = FakeCluster::start(
        &[1],
        script(move |_, req| match answer(&req.body) {
            Some(DescribeOrCreate::Describe(r)) => req.reply(&r),
            Some(DescribeOrCreate::Create(r)) => req.reply(&r),
            None => Action::Default,
        }),
    )
    .await;
    {
        let mut spec = fake.spec();
        spec.api_versions.push((ApiKey::DescribeAcls, 0, 3));
        spec.api_versions.push((ApiKey::CreateAcls, 0, 3));
    }
    fake
}

enum DescribeOrCreate {
    Describe(DescribeAclsResponse),
    Create(CreateAclsResponse),
}

/// What the fake target holds: its ACLs, and a topic whose next creation it refuses.
#[derive(Debug, Default)]
struct TargetAcls {
    acls: BTreeSet<WireAcl>,
    refuse_once: Option<String>,
}

/// A fake target that keeps the ACLs it is asked to create and lists them back.
async fn fake_target(state: Arc<Mutex<TargetAcls>>) -> FakeCluster {
    fake_cluster(move |body| {
        let mut state = state.lock().unwrap();
        match body {
            Body::DescribeAcls(_) => {
                let acls: Vec<WireAcl> = state.acls.iter().cloned().collect();
                Some(DescribeOrCreate::Describe(describe_answer(&acls)))
            }
            Body::CreateAcls(c) => {
                let mut results = Vec::new();
                for a in &c.creations {
                    let name = a.resource_name.to_string();
                    if state.refuse_once.as_deref() == Some(name.as_str()) {
                        state.refuse_once = None;
                        results.push(
                            AclCreationResult::default()
                                .with_error_code(ResponseError::InvalidRequest.code())
                                .with_error_message(Some(s("scripted refusal"))),
                        );
                        continue;
                    }
                    state.acls.insert((
                        a.resource_type,
                        name,
                        a.resource_pattern_type,
                        a.principal.to_string(),
                        a.host.to_string(),
                        a.operation,
                        a.permission_type,
                    ));
                    results.push(AclCreationResult::default());
                }
                Some(DescribeOrCreate::Create(
                    CreateAclsResponse::default().with_results(results),
                ))
            }
            _ => None,
        }
    })
    .await
}

/// A fake source whose DescribeAcls answers `acls`.
async fn fake_source(acls: Vec<WireAcl>) -> FakeCluster {
    fake_cluster(move |body| match body {
        Body::DescribeAcls(_) => Some(DescribeOrCreate::Describe(describe_answer(&acls))),
        _ => None,
    })
    .await
}

/// The ACLs of the CreateAcls requests `fake` received, one list per request, sorted.
fn created(fake: &FakeCluster) -> Vec<Vec<WireAcl>> {
    fake.requests(ApiKey::CreateAcls)
        .iter()
        .map(|r| {
            let Body::CreateAcls(c) = &r.body else {
                unreachable!()
            };
            let mut acls: Vec<WireAcl> = c
                .creations
                .iter()
                .map(|a| {
                    (
                        a.resource_type,
                        a.resource_name.to_string(),
                        a.resource_pattern_type,
                        a.principal.to_string(),
                        a.host.to_string(),
                        a.operation,
                        a.permission_type,
                    )
                })
                .collect();
            acls.sort();
            acls
        })
        .collect()
}

/// The log lines written while the guard lives, on this thread.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// Captures this thread's events (DEBUG and up) until the guard is dropped. Tests that use
    /// it run on a current-thread runtime, so every task logs on this thread.
    fn capture() -> (Self, tracing::subscriber::DefaultGuard) {
        let logs = Logs::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::DEBUG)
            .finish();
        (logs, tracing::subscriber::set_default(subscriber))
    }

    /// Lines at `level` (`INFO`, `WARN`, `DEBUG`) containing `text`.
    fn count(&self, level: &str, text: &str) -> usize {
        let bytes = self.0.lock().unwrap().clone();
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter(|l| l.contains(level) && l.contains(text))
            .count()
    }
}

#[tokio::test(flavor = "current_thread")]
async fn without_an_authorizer_on_the_source_the_sync_is_skipped_and_said_once() {
    let (logs, _guard) = Logs::capture();
    // A Kafka without an authorizer, as the shared pair is; aliases and filters of its own.
    let clusters = Clusters::shared();
    let names = Names::new();
    let target = fake_cluster(|_| None).await;
    let flow = common::flow_config_between(
        (&names.alias("source"), &names.alias("target")),
        &clusters.source.bootstrap,
        &target.addr(1),
        &format!(
            "topics = {pattern}\n\
             groups = {pattern}\n\
             sync.topic.acls.interval.seconds = 1",
            pattern = names.pattern()
        ),
    );
    assert_eq!(flow.sync_topic_acls, Some(Duration::from_secs(1)));
    let source_client = common::client(&clusters.source.bootstrap).await;
    let target_client = common::client(&target.addr(1)).await;
    let mut task = AclSyncTask::new(flow.clone(), source_client.clone(), target_client.clone());
    for pass in 0..3 {
        let summary = task
            .sync_once()
            .await
            .expect("a skipped pass is not an error");
        assert_eq!(
            summary.outcome,
            AclSyncOutcome::SourceHasNoAuthorizer,
            "pass {pass}"
        );
        assert_eq!(
            (
                summary.source_acls,
                summary.wanted.len(),
                summary.created.len()
            ),
            (0, 0, 0)
        );
    }
    // One line for three passes (the rest at debug).
    assert_eq!(
        logs.count("INFO", "the source cluster has no ACL authorizer"),
        1
    );
    assert_eq!(logs.count("DEBUG", "source still has no ACL authorizer"), 2);
    // The target was never asked anything about ACLs.
    assert!(target.requests(ApiKey::DescribeAcls).is_empty());
    assert!(target.requests(ApiKey::CreateAcls).is_empty());

    // The loop: a pass at once, then one a second, stopping when told.
    let mut task = AclSyncTask::new(flow, source_client, target_client);
    let started = Instant::now();
    task.run(tokio::time::sleep(Duration::from_millis(2500)))
        .await;
    assert!(
        started.elapsed() < Duration::from_millis(3500),
        "stops when told"
    );
    let passes = logs.count("DEBUG", "topic ACL sync pass done");
    assert!((2..=3).contains(&passes), "{passes} passes in 2.5 s");
    assert_eq!(
        logs.count("INFO", "the source cluster has no ACL authorizer"),
        2,
        "once more, for the new task"
    );
    assert!(target.requests(ApiKey::CreateAcls).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_acls_created_on_the_target_follow_mm2s_rules() {
    // pattern LITERAL 3 / PREFIXED 4; op ALL 2, READ 3, WRITE 4, DESCRIBE 8, DESCRIBE_CONFIGS 10;
    // permission DENY 2, ALLOW 3; resource TOPIC 2, GROUP 3.
    let source_acls = vec![
        wire(2, "orders", 3, "User:alice", "*", 3, 3),
        // The same target ACL once ALL becomes READ: created once.
        wire(2, "orders", 3, "User:alice", "*", 2, 3),
        // ALLOW WRITE: not copied.
        wire(2, "orders", 3, "User:bob", "*", 4, 3),
        // ALLOW ALL: READ on the target, which already has it.
        wire(2, "orders", 3, "User:bob", "*", 2, 3),
        // DENY: copied unchanged, host included.
        wire(2, "orders", 3, "User:eve", "10.0.0.9", 3, 2),
        // PREFIXED: not copied.
        wire(2, "orders", 4, "User:carol", "*", 3, 3),
        // The wildcard topic: not copied.
        wire(2, "*", 3, "User:ops", "*", 8, 3),
        // Not in `topics`, internal, or from the target (a cycle): not copied.
        wire(2, "customers", 3, "User:alice", "*", 3, 3),
        wire(2, "__consumer_offsets", 3, "User:alice", "*", 3, 3),
        wire(2, "target.orders", 3, "User:alice", "*", 3, 3),
        // Other operations are kept.
        wire(2, "payments", 3, "User:alice", "*", 10, 3),
        // Heartbeats are mirrored whatever `topics` says; so are their ACLs.
        wire(2, "heartbeats", 3, "User:monitor", "*", 3, 3),
        // A group ACL in a topic answer (a broken source): not copied.
        wire(3, "billing", 3, "User:alice", "*", 3, 3),
    ];
    let source = fake_source(source_acls).await;
    let state = Arc::new(Mutex::new(TargetAcls {
        acls: [wire(2, "source.orders", 3, "User:bob", "*", 3, 3)].into(),
        refuse_once: Some("source.payments".into()),
    }));
    let target = fake_target(Arc::clone(&state)).await;
    let flow = common::flow_config(
        &source.addr(1),
        &target.addr(1),
        "topics = orders, payments",
    );
    let mut task = AclSyncTask::new(
        flow,
        common::client(&source.addr(1)).await,
        common::client(&target.addr(1)).await,
    );

    let summary = task.sync_once().await.expect("pass");
    assert_eq!(summary.outcome, AclSyncOutcome::Synced);
    assert_eq!(summary.source_acls, 13);
    let skipped: Vec<(String, AclSkip)> = summary
        .skipped
        .iter()
        .map(|s| (s.acl.resource_name.clone(), s.why))
        .collect();
    assert_eq!(
        skipped,
        [
            ("orders".into(), AclSkip::AllowsWrite),
            ("orders".into(), AclSkip::NotLiteral),
            ("*".into(), AclSkip::Wildcard),
            ("customers".into(), AclSkip::TopicNotMirrored),
            ("__consumer_offsets".into(), AclSkip::TopicNotMirrored),
            ("target.orders".into(), AclSkip::TopicNotMirrored),
            ("billing".into(), AclSkip::NotTopic),
        ]
    );
    assert_eq!(summary.wanted.len(), 5);
    assert_eq!(summary.already_present, 1);
    assert_eq!(summary.created.len(), 3);
    assert_eq!(summary.failures.len(), 1);
    assert_eq!(summary.failures[0].acl.resource_name, "source.payments");
    assert!(
        summary.failures[0].error.contains("source.payments"),
        "the error names the topic: {}",
        summary.failures[0].error
    );
    assert!(summary
        .created
        .iter()
        .any(|a| a.operation == AclOperation::Read && a.permission == AclPermission::Deny));

    // The exact requests. To the source: TOPIC ACLs of any pattern, principal, host,
    // operation and permission (MM2's `ANY_TOPIC_ACL`).
    let described = source.requests(ApiKey::DescribeAcls);
    assert_eq!(described.len(), 1);
    let Body::DescribeAcls(d) = &described[0].body else {
        unreachable!()
    };
    assert_eq!(
        (
            d.resource_type_filter,
            d.resource_name_filter.is_none(),
            d.pattern_type_filter,
            d.principal_filter.is_none(),
            d.host_filter.is_none(),
            d.operation,
            d.permission_type
        ),
        (2, true, 1, true, true, 1, 1)
    );
    // To the target: its LITERAL TOPIC ACLs, then one CreateAcls with the missing copies.
    let Body::DescribeAcls(d) = &target.requests(ApiKey::DescribeAcls)[0].body else {
        unreachable!()
    };
    assert_eq!((d.resource_type_filter, d.pattern_type_filter), (2, 3));
    assert!(source.requests(ApiKey::CreateAcls).is_empty());
    assert_eq!(
        created(&target),
        vec![vec![
            wire(2, "source.heartbeats", 3, "User:monitor", "*", 3, 3),
            wire(2, "source.orders", 3, "User:alice", "*", 3, 3),
            wire(2, "source.orders", 3, "User:eve", "10.0.0.9", 3, 2),
            wire(2, "source.payments", 3, "User:alice", "*", 10, 3),
        ]]
    );

    // The refused one is asked for again, alone.
    let summary = task.sync_once().await.expect("pass");
    assert_eq!((summary.already_present, summary.created.len()), (4, 1));
    assert!(summary.failures.is_empty());
    assert_eq!(
        created(&target)[1],
        [wire(2, "source.payments", 3, "User:alice", "*", 10, 3)]
    );

    // Nothing changed: nothing sent.
    let summary = task.sync_once().await.expect("pass");
    assert_eq!((summary.already_present, summary.created.len()), (5, 0));
    assert_eq!(created(&target).len(), 2);

    // Deleted on the target: created again. Never deleted by strait: the target's own ACL
    // stays.
    let own = wire(2, "source.orders", 3, "User:auditor", "*", 8, 3);
    {
        let mut s = state.lock().unwrap();
        s.acls
            .remove(&wire(2, "source.orders", 3, "User:alice", "*", 3, 3));
        s.acls.insert(own.clone());
    }
    let summary = task.sync_once().await.expect("pass");
    assert_eq!(summary.created.len(), 1);
    assert_eq!(
        created(&target)[2],
        [wire(2, "source.orders", 3, "User:alice", "*", 3, 3)]
    );
    assert!(state.lock().unwrap().acls.contains(&own));
    assert_eq!(state.lock().unwrap().acls.len(), 6);
}

#[tokio::test(flavor = "current_thread")]
async fn without_an_authorizer_on_the_target_the_copies_are_not_created_and_warned_once() {
    let (logs, _guard) = Logs::capture();
    // A Kafka without an authorizer, as the shared pair is; names and aliases of its own.
    let clusters = Clusters::shared();
    let names = Names::new();
    let (a, b) = (names.alias("source"), names.alias("target"));
    let orders = names.topic("orders");
    let source = fake_source(vec![wire(2, &orders, 3, "User:alice", "*", 3, 3)]).await;
    let flow = common::flow_config_between(
        (&a, &b),
        &source.addr(1),
        &clusters.target.bootstrap,
        &format!(
            "topics = {pattern}\ngroups = {pattern}",
            pattern = names.pattern()
        ),
    );
    let mut task = AclSyncTask::new(
        flow,
        common::client(&source.addr(1)).await,
        common::client(&clusters.target.bootstrap).await,
    );
    for _ in 0..2 {
        let summary = task
            .sync_once()
            .await
            .expect("a skipped pass is not an error");
        assert_eq!(summary.outcome, AclSyncOutcome::TargetHasNoAuthorizer);
        assert_eq!(summary.wanted.len(), 1);
        assert_eq!(summary.wanted[0].resource_name, format!("{a}.{orders}"));
        assert!(summary.created.is_empty() && summary.failures.is_empty());
    }
    assert_eq!(
        logs.count("WARN", "the target cluster has no ACL authorizer"),
        1
    );
    assert_eq!(logs.count("DEBUG", "target still has no ACL authorizer"), 1);
}

/// An ACL binding on a topic (or `resource` type), LITERAL unless `pattern` says otherwise.
fn binding(
    resource: AclResourceType,
    name: &str,
    principal: &str,
    host: &str,
    operation: AclOperation,
    permission: AclPermission,
) -> AclBinding {
    AclBinding {
        resource_type: resource,
        resource_name: name.into(),
        pattern_type: AclPatternType::Literal,
        principal: principal.into(),
        host: host.into(),
        operation,
        permission,
    }
}

fn topic_acl(name: &str, principal: &str, operation: AclOperation) -> AclBinding {
    binding(
        AclResourceType::Topic,
        name,
        principal,
        "*",
        operation,
        AclPermission::Allow,
    )
}

/// Creates `acls` on `client`'s cluster, each one accepted, and waits until DescribeAcls lists
/// `expect_topic_acls` TOPIC ACLs (Kafka's authorizer learns of new ACLs through the metadata
/// log, a moment after CreateAcls is answered).
async fn create_and_wait(client: &Client, acls: &[AclBinding], expect_topic_acls: usize) {
    if !acls.is_empty() {
        for (acl, result) in acls.iter().zip(client.create_acls(acls).await.unwrap()) {
            result.unwrap_or_else(|e| panic!("{acl:?}: {e}"));
        }
    }
    wait_for_topic_acls(client, expect_topic_acls).await;
}

async fn wait_for_topic_acls(client: &Client, n: usize) -> Vec<AclBinding> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let listed = client
            .describe_acls(&AclFilter::all_of(AclResourceType::Topic))
            .await
            .unwrap();
        if listed.len() == n {
            return listed;
        }
        assert!(
            Instant::now() < deadline,
            "{} topic ACLs listed after 30 s, expected {n}: {listed:?}",
            listed.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every ACL of a cluster as Kafka's own `kafka-acls --list` prints it: (resource pattern,
/// ACL), e.g. `ResourcePattern(resourceType=TOPIC, name=source.orders, patternType=LITERAL)`,
/// `(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)`.
fn kafka_acls_list(bootstrap: &str) -> BTreeSet<(String, String)> {
    let out = kafka_tool(
        "org.apache.kafka.tools.AclCommand",
        &["--bootstrap-server", bootstrap, "--list"],
    );
    let mut acls = BTreeSet::new();
    let mut resource = None;
    for line in out.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("Current ACLs for resource `") {
            resource = rest.split_once('`').map(|(r, _)| r.to_owned());
        } else if line.starts_with("(principal=") {
            let resource = resource.clone().unwrap_or_else(|| panic!("{out}"));
            acls.insert((resource, line.to_owned()));
        }
    }
    acls
}

fn listed(
    topic: &str,
    principal: &str,
    host: &str,
    operation: &str,
    permission: &str,
) -> (String, String) {
    (
        format!("ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"),
        format!(
            "(principal={principal}, host={host}, operation={operation}, permissionType={permission})"
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acls_are_copied_between_clusters_with_kafkas_authorizer() {
    let clusters = Clusters::start_with(ClusterOptions::default().with_authorizer());
    let source = common::client(&clusters.source.bootstrap).await;
    let target = common::client(&clusters.target.bootstrap).await;
    use AclOperation::{All, Describe, DescribeConfigs, Read, Write};

    let eve_denied = binding(
        AclResourceType::Topic,
        "orders",
        "User:eve",
        "10.0.0.9",
        Read,
        AclPermission::Deny,
    );
    let source_acls = vec![
        topic_acl("orders", "User:alice", Read),
        // The same target ACL once ALL becomes READ: created once.
        topic_acl("orders", "User:alice", All),
        // ALLOW WRITE: not copied.
        topic_acl("orders", "User:bob", Write),
        // ALLOW ALL: READ on the target, which already has it.
        topic_acl("orders", "User:bob", All),
        // DENY: copied unchanged, host included.
        eve_denied.clone(),
        // PREFIXED: not copied.
        AclBinding {
            pattern_type: AclPatternType::Prefixed,
            ..topic_acl("orders", "User:carol", Read)
        },
        // The wildcard topic: not copied.
        topic_acl("*", "User:ops", Describe),
        // Not in `topics`: not copied.
        topic_acl("customers", "User:alice", Read),
        // Other operations are kept.
        topic_acl("payments", "User:alice", DescribeConfigs),
        // Heartbeats are mirrored whatever `topics` says; so are their ACLs.
        topic_acl("heartbeats", "User:monitor", Read),
        // A group ACL: Kafka does not list it for a TOPIC query.
        binding(
            AclResourceType::Group,
            "billing",
            "User:alice",
            "*",
            Read,
            AclPermission::Allow,
        ),
    ];
    create_and_wait(&source, &source_acls, 10).await;
    // The target's own ACLs: one the sync would make, one of its own.
    let auditor = topic_acl("source.orders", "User:auditor", Describe);
    create_and_wait(
        &target,
        &[
            topic_acl("source.orders", "User:bob", Read),
            auditor.clone(),
        ],
        2,
    )
    .await;

    let flow = common::flow_config(
        &clusters.source.bootstrap,
        &clusters.target.bootstrap,
        "topics = orders, payments",
    );
    let mut task = AclSyncTask::new(flow, source.clone(), target.clone());
    let summary = task.sync_once().await.expect("pass");
    assert_eq!(summary.outcome, AclSyncOutcome::Synced);
    assert_eq!(summary.source_acls, 10);
    let skipped: BTreeSet<(String, AclSkip)> = summary
        .skipped
        .iter()
        .map(|s| (s.acl.resource_name.clone(), s.why))
        .collect();
    assert_eq!(
        skipped,
        BTreeSet::from([
            ("orders".into(), AclSkip::AllowsWrite),
            ("orders".into(), AclSkip::NotLiteral),
            ("*".into(), AclSkip::Wildcard),
            ("customers".into(), AclSkip::TopicNotMirrored),
        ])
    );
    assert_eq!(summary.wanted.len(), 5, "{:?}", summary.wanted);
    assert_eq!(summary.already_present, 1);
    assert_eq!(summary.created.len(), 4, "{:?}", summary.created);
    assert!(summary.failures.is_empty(), "{:?}", summary.failures);

    // What the target holds, as Kafka's own tool lists it.
    wait_for_topic_acls(&target, 6).await;
    let bootstrap = clusters.target.bootstrap.clone();
    let on_target = tokio::task::spawn_blocking(move || kafka_acls_list(&bootstrap))
        .await
        .unwrap();
    assert_eq!(
        on_target,
        BTreeSet::from([
            listed("source.orders", "User:alice", "*", "READ", "ALLOW"),
            listed("source.orders", "User:bob", "*", "READ", "ALLOW"),
            listed("source.orders", "User:eve", "10.0.0.9", "READ", "DENY"),
            listed("source.orders", "User:auditor", "*", "DESCRIBE", "ALLOW"),
            listed(
                "source.payments",
                "User:alice",
                "*",
                "DESCRIBE_CONFIGS",
                "ALLOW"
            ),
            listed("source.heartbeats", "User:monitor", "*", "READ", "ALLOW"),
        ])
    );

    // Nothing changed: nothing created.
    let summary = task.sync_once().await.expect("pass");
    assert_eq!((summary.already_present, summary.created.len()), (5, 0));

    // Deleted on the target (with Kafka's tool): created again. The target's own ACL stays.
    let bootstrap = clusters.target.bootstrap.clone();
    tokio::task::spawn_blocking(move || {
        kafka_tool(
            "org.apache.kafka.tools.AclCommand",
            &[
                "--bootstrap-server",
                &bootstrap,
                "--remove",
                "--force",
                "--deny-principal",
                "User:eve",
                "--deny-host",
                "10.0.0.9",
                "--operation",
                "Read",
                "--topic",
                "source.orders",
            ],
        )
    })
    .await
    .unwrap();
    wait_for_topic_acls(&target, 5).await;
    let summary = task.sync_once().await.expect("pass");
    assert_eq!(
        summary.created,
        [AclBinding {
            resource_name: "source.orders".into(),
            ..eve_denied
        }]
    );
    let now = wait_for_topic_acls(&target, 6).await;
    assert!(now.contains(&auditor), "{now:?}");
}
