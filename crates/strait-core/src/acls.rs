//! MM2's topic ACL sync (`docs/mm2-behaviour.md` §1.9, `MirrorSourceConnector.syncTopicAcls`): the
//! source's ACLs on mirrored topics, copied onto their remote topics so that whoever may read
//! `orders` on the source may read `A.orders` on the target, and only strait may write it.
//!
//! # Which ACLs, and how ([`remote_acl`])
//!
//! Every `sync.topic.acls.interval.seconds` (600 s by default) the source's topic ACLs are
//! listed (DescribeAcls: resource TOPIC, any pattern, any principal, host, operation and
//! permission). Each one is copied to the target when:
//!
//! - its pattern is LITERAL: PREFIXED ACLs are not copied (as in MM2), since a prefix names
//!   topics that are not all mirrored and not all renamed alike;
//! - its topic is mirrored by the flow (`topics`, `topics.exclude`, heartbeats, internal
//!   topics and cycles: [`FlowConfig::should_replicate_topic`]);
//! - it does not grant writing: `ALLOW WRITE` is dropped, so that only strait writes remote
//!   topics, and `ALLOW ALL` becomes `ALLOW READ`.
//!
//! The copy names the remote topic (`A.orders`, or `orders` under the identity policy), still
//! LITERAL, with the same principal and host. Other operations (READ, DESCRIBE, CREATE,
//! DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS) keep theirs, and **DENY ACLs are copied
//! unchanged**, as MM2 does: a principal kept out of `orders` stays out of `A.orders`, whatever
//! the target allows more broadly. (A `DENY WRITE` or `DENY ALL` whose principal matches
//! strait's own, e.g. `User:*`, then stops strait writing that remote topic, as it stops MM2.)
//!
//! Two cases differ from MM2, where MM2 would send the target something useless:
//! - the wildcard topic `*` (LITERAL `*` means every topic): MM2 would create an ACL on the
//!   literal topic `A.*`, a name no topic can have; strait leaves it out;
//! - operations or permissions Kafka does not accept on a topic ACL (unknown codes,
//!   CLUSTER_ACTION, IDEMPOTENT_WRITE): left out rather than sent to fail.
//!
//! # Applying them
//!
//! Additive only: ACLs are created, never deleted, so an ACL removed on the source stays on the
//! target until someone removes it there. The target's LITERAL topic ACLs are listed first and
//! only the missing ones are created, so a pass that changes nothing sends nothing, and an ACL
//! someone deleted on the target comes back at the next pass (as with MM2, which creates them
//! all every time).
//!
//! # Clusters without an authorizer
//!
//! A cluster without an authorizer answers SECURITY_DISABLED. On the source that means there is
//! nothing to copy: the pass is skipped ([`AclSyncOutcome::SourceHasNoAuthorizer`]) and said
//! once at info level (MM2 does the same), again only if the authorizer comes and goes. On the
//! target it means the source's ACLs cannot be enforced there: skipped and warned once
//! ([`AclSyncOutcome::TargetHasNoAuthorizer`]).

use std::collections::BTreeSet;
use std::future::Future;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use strait_kafka::admin::{
    AclBinding, AclFilter, AclOperation, AclPatternType, AclPermission, AclResourceType,
};
use strait_kafka::Client;
use tokio::time::Instant;

use crate::config::FlowConfig;

/// Most ACLs sent in one CreateAcls request.
const MAX_ACLS_PER_REQUEST: usize = 1000;

/// Shortest interval the loop honours, so a zero from a hand-built config cannot spin.
const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// The resource name of a LITERAL ACL on every topic.
const WILDCARD: &str = "*";

/// Why a source ACL is not copied to the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum AclSkip {
    /// Not on a topic (the source answered a group, cluster, ... ACL to a topic query).
    NotTopic,
    /// PREFIXED (or a pattern type strait does not know): MM2 copies LITERAL ACLs only.
    NotLiteral,
    /// An operation or permission Kafka does not accept on a topic ACL.
    Unsupported,
    /// `ALLOW WRITE`: only strait writes remote topics.
    AllowsWrite,
    /// The wildcard topic `*`: it has no remote name.
    Wildcard,
    /// The flow does not mirror the topic.
    TopicNotMirrored,
}

impl AclSkip {
    /// Why, in words, for logs.
    pub fn reason(self) -> &'static str {
        match self {
            AclSkip::NotTopic => "not a topic ACL",
            AclSkip::NotLiteral => "not a LITERAL ACL (PREFIXED ACLs are not copied)",
            AclSkip::Unsupported => "operation or permission not valid on a topic ACL",
            AclSkip::AllowsWrite => "ALLOW WRITE: only strait writes remote topics",
            AclSkip::Wildcard => "wildcard topic `*`: no remote topic name",
            AclSkip::TopicNotMirrored => "topic not mirrored by this flow",
        }
    }
}

/// The ACL to create on the target for source ACL `source`, or why there is none (module
/// docs). Pure: the same input always gives the same answer.
pub fn remote_acl(flow: &FlowConfig, source: &AclBinding) -> Result<AclBinding, AclSkip> {
    if source.resource_type != AclResourceType::Topic {
        return Err(AclSkip::NotTopic);
    }
    if source.pattern_type != AclPatternType::Literal {
        return Err(AclSkip::NotLiteral);
    }
    let permission = match source.permission {
        AclPermission::Allow | AclPermission::Deny => source.permission,
        _ => return Err(AclSkip::Unsupported),
    };
    let operation = match source.operation {
        AclOperation::All
        | AclOperation::Read
        | AclOperation::Write
        | AclOperation::Create
        | AclOperation::Delete
        | AclOperation::Alter
        | AclOperation::Describe
        | AclOperation::DescribeConfigs
        | AclOperation::AlterConfigs => source.operation,
        _ => return Err(AclSkip::Unsupported),
    };
    let operation = match (permission, operation) {
        (AclPermission::Allow, AclOperation::Write) => return Err(AclSkip::AllowsWrite),
        (AclPermission::Allow, AclOperation::All) => AclOperation::Read,
        (_, operation) => operation,
    };
    if source.resource_name == WILDCARD {
        return Err(AclSkip::Wildcard);
    }
    if !flow.should_replicate_topic(&source.resource_name) {
        return Err(AclSkip::TopicNotMirrored);
    }
    Ok(AclBinding {
        resource_type: AclResourceType::Topic,
        resource_name: flow.remote_topic(&source.resource_name),
        pattern_type: AclPatternType::Literal,
        principal: source.principal.clone(),
        host: source.host.clone(),
        operation,
        permission,
    })
}

/// Why an ACL sync pass failed. The task logs it and tries again at the next interval.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AclSyncError {
    /// A Kafka operation failed.
    #[error("{what}: {source}")]
    Kafka {
        /// What was being done, naming the cluster.
        what: String,
        /// Why.
        #[source]
        source: strait_kafka::Error,
    },
}

impl AclSyncError {
    /// Whether the next pass may succeed without anyone doing anything.
    pub fn is_retriable(&self) -> bool {
        match self {
            AclSyncError::Kafka { source, .. } => source.is_retriable(),
        }
    }
}

/// How a pass ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AclSyncOutcome {
    /// The ACLs were compared and the missing ones created (see the summary's failures).
    #[default]
    Synced,
    /// The source has no authorizer (SECURITY_DISABLED): there are no ACLs to copy. Nothing was
    /// asked of the target.
    SourceHasNoAuthorizer,
    /// The target has no authorizer (SECURITY_DISABLED): the ACLs to copy cannot be created.
    TargetHasNoAuthorizer,
}

/// A source ACL not copied, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedAcl {
    /// The ACL on the source.
    pub acl: AclBinding,
    /// Why it is not copied.
    pub why: AclSkip,
}

/// A target ACL that could not be created; tried again next pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFailure {
    /// The ACL that was to be created on the target.
    pub acl: AclBinding,
    /// What the target answered.
    pub error: String,
}

/// What one ACL sync pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AclSyncSummary {
    /// How the pass ended.
    pub outcome: AclSyncOutcome,
    /// Topic ACLs listed on the source.
    pub source_acls: usize,
    /// Source ACLs not copied, with the reason, in the order listed.
    pub skipped: Vec<SkippedAcl>,
    /// The ACLs the target should have, deduplicated and sorted (two source ACLs can give the
    /// same target ACL: `ALLOW ALL` and `ALLOW READ` of one principal).
    pub wanted: Vec<AclBinding>,
    /// Of those, the ones already on the target.
    pub already_present: usize,
    /// Of those, the ones created this pass.
    pub created: Vec<AclBinding>,
    /// Of those, the ones the target refused.
    pub failures: Vec<AclFailure>,
}

/// A flow's topic ACL sync, run beside the flow (module docs).
#[derive(Debug)]
pub struct AclSyncTask {
    flow: FlowConfig,
    source: Client,
    target: Client,
    /// Whether "no authorizer" was logged for the source since it last answered.
    source_no_authorizer_logged: bool,
    /// The same for the target.
    target_no_authorizer_logged: bool,
}

impl AclSyncTask {
    /// The task of `flow`: lists ACLs on `source`, creates their copies on `target`. Nothing
    /// is done until the first pass.
    pub fn new(flow: FlowConfig, source: Client, target: Client) -> Self {
        Self {
            flow,
            source,
            target,
            source_no_authorizer_logged: false,
            target_no_authorizer_logged: false,
        }
    }

    /// Whether the flow's config asks for ACL sync (`sync.topic.acls.enabled`).
    pub fn is_enabled(flow: &FlowConfig) -> bool {
        flow.sync_topic_acls.is_some()
    }

    /// One pass: lists the source's topic ACLs, works out their target copies and creates
    /// those the target lacks (module docs).
    pub async fn sync_once(&mut self) -> Result<AclSyncSummary, AclSyncError> {
        let mut summary = AclSyncSummary::default();
        let all = AclFilter::all_of(AclResourceType::Topic);
        let Some(source_acls) = self.list_acls(true, &all, &mut summary).await? else {
            return Ok(summary);
        };
        self.source_no_authorizer_logged = false;
        summary.source_acls = source_acls.len();
        let mut wanted = BTreeSet::new();
        for acl in source_acls {
            match remote_acl(&self.flow, &acl) {
                Ok(remote) => {
                    wanted.insert(remote);
                }
                Err(why) => summary.skipped.push(SkippedAcl { acl, why }),
            }
        }
        summary.wanted = wanted.into_iter().collect();
        if summary.wanted.is_empty() {
            return Ok(summary);
        }

        let filter = AclFilter {
            pattern_type: AclPatternType::Literal,
            ..AclFilter::all_of(AclResourceType::Topic)
        };
        let Some(present) = self.list_acls(false, &filter, &mut summary).await? else {
            return Ok(summary);
        };
        let present: BTreeSet<AclBinding> = present.into_iter().collect();
        let missing: Vec<AclBinding> = summary
            .wanted
            .iter()
            .filter(|acl| !present.contains(*acl))
            .cloned()
            .collect();
        summary.already_present = summary.wanted.len() - missing.len();
        let mut security_disabled = 0;
        for chunk in missing.chunks(MAX_ACLS_PER_REQUEST) {
            let results =
                self.target
                    .create_acls(chunk)
                    .await
                    .map_err(|source| AclSyncError::Kafka {
                        what: format!("creating topic ACLs on cluster {}", self.flow.target),
                        source,
                    })?;
            for (acl, result) in chunk.iter().zip(results) {
                match result {
                    Ok(()) => {
                        tracing::info!(
                            flow = %self.flow.name(),
                            topic = %acl.resource_name,
                            principal = %acl.principal,
                            host = %acl.host,
                            operation = ?acl.operation,
                            permission = ?acl.permission,
                            "created topic ACL on the target"
                        );
                        summary.created.push(acl.clone());
                    }
                    Err(e) => {
                        security_disabled += usize::from(is_security_disabled(&e));
                        summary.failures.push(AclFailure {
                            acl: acl.clone(),
                            error: e.to_string(),
                        });
                    }
                }
            }
        }
        if !missing.is_empty() && security_disabled == missing.len() {
            self.note_no_authorizer(false);
            summary.failures.clear();
            summary.outcome = AclSyncOutcome::TargetHasNoAuthorizer;
        } else {
            self.target_no_authorizer_logged = false;
        }
        Ok(summary)
    }

    /// Runs a pass at once, then every `sync.topic.acls.interval.seconds` (as MM2 schedules
    /// it), until `stop` resolves. A failing pass is logged and tried again at the next
    /// interval. Returns at once on `stop`, even mid-pass. Does nothing when the flow's ACL
    /// sync is disabled.
    pub async fn run(&mut self, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        let Some(every) = self.flow.sync_topic_acls.map(|d| d.max(MIN_INTERVAL)) else {
            return;
        };
        loop {
            let next = Instant::now() + every;
            tokio::select! {
                () = &mut stop => return,
                result = self.sync_once() => self.log(result),
            }
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep_until(next) => {}
            }
        }
    }

    /// The ACLs `filter` selects on the source (`source_side`) or the target; `None` when that
    /// side has no authorizer (said once, and `summary`'s outcome set to it).
    async fn list_acls(
        &mut self,
        source_side: bool,
        filter: &AclFilter,
        summary: &mut AclSyncSummary,
    ) -> Result<Option<Vec<AclBinding>>, AclSyncError> {
        let client = if source_side {
            &self.source
        } else {
            &self.target
        };
        match client.describe_acls(filter).await {
            Err(e) if is_security_disabled(&e) => {
                self.note_no_authorizer(source_side);
                summary.outcome = if source_side {
                    AclSyncOutcome::SourceHasNoAuthorizer
                } else {
                    AclSyncOutcome::TargetHasNoAuthorizer
                };
                Ok(None)
            }
            Err(source) => {
                let cluster = if source_side {
                    &self.flow.source
                } else {
                    &self.flow.target
                };
                Err(AclSyncError::Kafka {
                    what: format!("listing the topic ACLs of cluster {cluster}"),
                    source,
                })
            }
            Ok(acls) => Ok(Some(acls)),
        }
    }

    /// Says once that a side has no authorizer, until it answers again.
    fn note_no_authorizer(&mut self, source_side: bool) {
        let flow = self.flow.name();
        if source_side {
            if std::mem::replace(&mut self.source_no_authorizer_logged, true) {
                tracing::debug!(flow = %flow, "source still has no ACL authorizer; ACL sync skipped");
            } else {
                tracing::info!(
                    flow = %flow,
                    cluster = %self.flow.source,
                    "the source cluster has no ACL authorizer, so no topic ACLs are synced; \
                     set sync.topic.acls.enabled = false to stop checking"
                );
            }
        } else if std::mem::replace(&mut self.target_no_authorizer_logged, true) {
            tracing::debug!(flow = %flow, "target still has no ACL authorizer; ACL sync skipped");
        } else {
            tracing::warn!(
                flow = %flow,
                cluster = %self.flow.target,
                "the target cluster has no ACL authorizer: the source's topic ACLs cannot be \
                 copied, and the remote topics are open to every client of the target"
            );
        }
    }

    fn log(&self, result: Result<AclSyncSummary, AclSyncError>) {
        match result {
            Ok(s) => {
                for failure in &s.failures {
                    tracing::warn!(
                        flow = %self.flow.name(),
                        topic = %failure.acl.resource_name,
                        principal = %failure.acl.principal,
                        operation = ?failure.acl.operation,
                        error = %failure.error,
                        "cannot create topic ACL on the target; trying again at the next pass"
                    );
                }
                tracing::debug!(
                    flow = %self.flow.name(),
                    outcome = ?s.outcome,
                    source_acls = s.source_acls,
                    skipped = s.skipped.len(),
                    wanted = s.wanted.len(),
                    already_present = s.already_present,
                    created = s.created.len(),
                    failed = s.failures.len(),
                    "topic ACL sync pass done"
                );
            }
            Err(e) => tracing::warn!(
                flow = %self.flow.name(),
                error = %e,
                "topic ACL sync pass failed; trying again at the next interval"
            ),
        }
    }
}

fn is_security_disabled(e: &strait_kafka::Error) -> bool {
    e.code() == Some(ResponseError::SecurityDisabled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::StraitConfig;

    /// The flow A->B with `extra` lines.
    fn flow(extra: &str) -> FlowConfig {
        let text = format!(
            "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n\
             A->B.enabled = true\n{extra}\n"
        );
        let config = StraitConfig::parse(&text, "test.properties").expect("valid config");
        config.flows.into_iter().next().expect("A->B")
    }

    fn acl(
        topic: &str,
        pattern: AclPatternType,
        operation: AclOperation,
        permission: AclPermission,
    ) -> AclBinding {
        AclBinding {
            resource_type: AclResourceType::Topic,
            resource_name: topic.to_owned(),
            pattern_type: pattern,
            principal: "User:alice".to_owned(),
            host: "10.0.0.7".to_owned(),
            operation,
            permission,
        }
    }

    fn allow(topic: &str, operation: AclOperation) -> AclBinding {
        acl(
            topic,
            AclPatternType::Literal,
            operation,
            AclPermission::Allow,
        )
    }

    fn deny(topic: &str, operation: AclOperation) -> AclBinding {
        AclBinding {
            permission: AclPermission::Deny,
            ..allow(topic, operation)
        }
    }

    /// `source` copied to `topic` with `operation` and `permission`, principal and host kept.
    fn copied(
        source: &AclBinding,
        topic: &str,
        operation: AclOperation,
        permission: AclPermission,
    ) -> AclBinding {
        AclBinding {
            resource_type: AclResourceType::Topic,
            resource_name: topic.to_owned(),
            pattern_type: AclPatternType::Literal,
            principal: source.principal.clone(),
            host: source.host.clone(),
            operation,
            permission,
        }
    }

    /// The target topic `flow` copies the ACL `operation` on `topic` to (an allowed one).
    fn remote_name(flow: &FlowConfig, topic: &str, operation: AclOperation) -> String {
        remote_acl(flow, &allow(topic, operation))
            .expect("copied")
            .resource_name
    }

    /// ACLs on `orders` with each of `operations` and `permission` are copied to `A.orders`
    /// as they are.
    fn assert_copied_as_is(operations: &[AclOperation], permission: AclPermission) {
        let f = flow("");
        for &op in operations {
            let src = acl("orders", AclPatternType::Literal, op, permission);
            assert_eq!(
                remote_acl(&f, &src),
                Ok(copied(&src, "A.orders", op, permission)),
                "{permission:?} {op:?}"
            );
        }
    }

    #[test]
    fn allow_read_is_renamed_to_the_remote_topic() {
        let f = flow("");
        let src = allow("orders", AclOperation::Read);
        assert_eq!(
            remote_acl(&f, &src),
            Ok(copied(
                &src,
                "A.orders",
                AclOperation::Read,
                AclPermission::Allow
            ))
        );
        // Principal and host travel unchanged.
        let mut any_host = src.clone();
        any_host.principal = "User:*".into();
        any_host.host = "*".into();
        let out = remote_acl(&f, &any_host).unwrap();
        assert_eq!((out.principal.as_str(), out.host.as_str()), ("User:*", "*"));
    }

    #[test]
    fn allow_write_is_dropped_and_allow_all_becomes_read() {
        let f = flow("");
        assert_eq!(
            remote_acl(&f, &allow("orders", AclOperation::Write)),
            Err(AclSkip::AllowsWrite)
        );
        let all = allow("orders", AclOperation::All);
        assert_eq!(
            remote_acl(&f, &all),
            Ok(copied(
                &all,
                "A.orders",
                AclOperation::Read,
                AclPermission::Allow
            ))
        );
    }

    #[test]
    fn other_allowed_operations_are_kept() {
        assert_copied_as_is(
            &[
                AclOperation::Read,
                AclOperation::Create,
                AclOperation::Delete,
                AclOperation::Alter,
                AclOperation::Describe,
                AclOperation::DescribeConfigs,
                AclOperation::AlterConfigs,
            ],
            AclPermission::Allow,
        );
    }

    #[test]
    fn deny_acls_are_copied_unchanged_as_mm2_does() {
        assert_copied_as_is(
            &[
                AclOperation::Read,
                AclOperation::Write,
                AclOperation::All,
                AclOperation::Describe,
            ],
            AclPermission::Deny,
        );
    }

    #[test]
    fn only_literal_topic_acls_are_copied() {
        let f = flow("");
        let prefixed = acl(
            "orders",
            AclPatternType::Prefixed,
            AclOperation::Read,
            AclPermission::Allow,
        );
        assert_eq!(remote_acl(&f, &prefixed), Err(AclSkip::NotLiteral));
        for pattern in [
            AclPatternType::Any,
            AclPatternType::Match,
            AclPatternType::Other(9),
        ] {
            let src = acl("orders", pattern, AclOperation::Read, AclPermission::Allow);
            assert_eq!(
                remote_acl(&f, &src),
                Err(AclSkip::NotLiteral),
                "{pattern:?}"
            );
        }
        for resource in [
            AclResourceType::Group,
            AclResourceType::Cluster,
            AclResourceType::TransactionalId,
            AclResourceType::Other(0),
        ] {
            let mut src = allow("orders", AclOperation::Read);
            src.resource_type = resource;
            assert_eq!(remote_acl(&f, &src), Err(AclSkip::NotTopic), "{resource:?}");
        }
    }

    #[test]
    fn only_mirrored_topics_are_copied() {
        let f = flow("topics = orders, pay.*\ntopics.exclude = pay-secret");
        assert!(remote_acl(&f, &allow("orders", AclOperation::Read)).is_ok());
        assert!(remote_acl(&f, &allow("payments", AclOperation::Read)).is_ok());
        for topic in [
            // Outside `topics`, or excluded.
            "customers",
            "pay-secret",
            // Internal: Kafka's, Connect's, MM2's.
            "__consumer_offsets",
            "mm2-offset-syncs.B.internal",
            "A.checkpoints.internal",
            // Came from the target: a cycle.
            "B.orders",
        ] {
            assert_eq!(
                remote_acl(&f, &allow(topic, AclOperation::Read)),
                Err(AclSkip::TopicNotMirrored),
                "{topic}"
            );
        }
        // Heartbeats topics are mirrored whatever `topics` says, so their ACLs follow.
        assert_eq!(
            remote_name(&f, "heartbeats", AclOperation::Read),
            "A.heartbeats"
        );
        assert_eq!(
            remote_name(&f, "C.heartbeats", AclOperation::Read),
            "A.C.heartbeats"
        );
        let no_hb = flow("topics = orders\nheartbeats.replication.enabled = false");
        assert_eq!(
            remote_acl(&no_hb, &allow("heartbeats", AclOperation::Read)),
            Err(AclSkip::TopicNotMirrored)
        );
    }

    #[test]
    fn the_wildcard_topic_is_not_copied() {
        let f = flow("");
        assert_eq!(
            remote_acl(&f, &allow("*", AclOperation::Read)),
            Err(AclSkip::Wildcard)
        );
        assert_eq!(
            remote_acl(&f, &deny("*", AclOperation::Read)),
            Err(AclSkip::Wildcard)
        );
    }

    #[test]
    fn invalid_operations_and_permissions_are_not_copied() {
        let f = flow("");
        for op in [
            AclOperation::Any,
            AclOperation::ClusterAction,
            AclOperation::IdempotentWrite,
            AclOperation::Other(0),
            AclOperation::Other(42),
        ] {
            assert_eq!(
                remote_acl(&f, &allow("orders", op)),
                Err(AclSkip::Unsupported),
                "{op:?}"
            );
        }
        for permission in [
            AclPermission::Any,
            AclPermission::Other(0),
            AclPermission::Other(7),
        ] {
            let src = acl(
                "orders",
                AclPatternType::Literal,
                AclOperation::Read,
                permission,
            );
            assert_eq!(
                remote_acl(&f, &src),
                Err(AclSkip::Unsupported),
                "{permission:?}"
            );
        }
    }

    #[test]
    fn the_identity_policy_keeps_topic_names() {
        let f = flow(
            "replication.policy.class = \
             org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        );
        assert_eq!(remote_name(&f, "orders", AclOperation::All), "orders");
        // Heartbeats are still prefixed.
        assert_eq!(
            remote_name(&f, "heartbeats", AclOperation::Read),
            "A.heartbeats"
        );
    }

    #[test]
    fn a_custom_separator_names_the_remote_topic() {
        let f = flow("replication.policy.separator = _");
        assert_eq!(remote_name(&f, "orders", AclOperation::Read), "A_orders");
    }
}
