//! MM2 files resolve as MirrorMaker 2 resolves them: the samples in `examples/`, defaults,
//! flow-over-top-level keys, client settings per cluster and role, heartbeats, warnings.

use std::path::PathBuf;
use std::time::Duration;

use strait_core::config::{
    OffsetSyncsLocation, Role, SecurityProtocol, Side, StartPosition, StraitConfig,
    UseDefaultsFrom, WarningKind, MAX_BYTES_IN_FLIGHT_DEFAULT,
};
use strait_core::policy::ReplicationPolicy;
use strait_kafka::admin::IsolationLevel;

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

fn parse(text: &str) -> StraitConfig {
    match StraitConfig::parse(text, "mm2.properties") {
        Ok(cfg) => cfg,
        Err(e) => panic!("{e}"),
    }
}

const TWO: &str = "\
clusters = A, B
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
A->B.enabled = true
";

fn with(extra: &str) -> StraitConfig {
    parse(&format!("{TWO}{extra}"))
}

#[test]
fn mm2_sample_runs_unchanged() {
    let cfg = StraitConfig::load(example("mm2-sample.properties")).unwrap();
    let aliases: Vec<&str> = cfg.clusters.iter().map(|c| c.alias.as_str()).collect();
    assert_eq!(aliases, ["A", "B"]);
    assert_eq!(
        cfg.cluster("A").unwrap().bootstrap_servers,
        ["A_host1:9092", "A_host2:9092", "A_host3:9092"]
    );
    let names: Vec<String> = cfg.flows.iter().map(|f| f.name()).collect();
    assert_eq!(names, ["A->B", "B->A"]);
    for flow in &cfg.flows {
        assert_eq!(flow.replication_factor, 1);
        assert_eq!(flow.offset_syncs_topic_replication_factor, 1);
        assert_eq!(flow.checkpoints_topic_replication_factor, 1);
        assert_eq!(flow.policy, ReplicationPolicy::default());
    }
    assert_eq!(cfg.heartbeats.len(), 2);
    assert!(cfg
        .heartbeats
        .iter()
        .all(|h| h.topic_replication_factor == 1));

    // Only the Connect keys earn a warning, each once, as unused.
    let warned: Vec<(&str, usize)> = cfg
        .warnings
        .iter()
        .map(|w| (w.key.as_str(), w.line))
        .collect();
    assert_eq!(
        warned,
        [
            ("offset.storage.replication.factor", 33),
            ("status.storage.replication.factor", 34),
            ("config.storage.replication.factor", 35),
        ]
    );
    assert!(cfg
        .warnings
        .iter()
        .all(|w| matches!(w.kind, WarningKind::Unused { .. })));
    assert!(cfg.warnings[0]
        .to_string()
        .starts_with("line 33: key `offset.storage.replication.factor` is accepted but not used"));

    // The two flows do not loop.
    let ab = &cfg.flows[0];
    assert!(ab.should_replicate_topic("orders"));
    assert!(!ab.should_replicate_topic("B.orders"));
    assert_eq!(ab.remote_topic("orders"), "A.orders");
    let ba = &cfg.flows[1];
    assert!(!ba.should_replicate_topic("A.orders"));
    assert!(ba.should_replicate_topic("orders"));
}

#[test]
fn quickstart_config() {
    let cfg = StraitConfig::load(example("quickstart.properties")).unwrap();
    assert_eq!(cfg.flows.len(), 1);
    let flow = &cfg.flows[0];
    assert_eq!(flow.name(), "source->target");
    assert_eq!(flow.remote_topic("orders"), "source.orders");
    assert_eq!(flow.sync_group_offsets, Some(Duration::from_secs(5)));
    assert_eq!(flow.emit_checkpoints, Some(Duration::from_secs(5)));
    assert_eq!(flow.refresh_topics, Some(Duration::from_secs(10)));
    assert_eq!(flow.max_bytes_in_flight, MAX_BYTES_IN_FLIGHT_DEFAULT);
    assert_eq!(flow.isolation_level, IsolationLevel::ReadCommitted);
    assert_eq!(flow.checkpoints_topic(), "source.checkpoints.internal");
    assert_eq!(
        flow.offset_syncs_topic(),
        ("mm2-offset-syncs.target.internal".to_owned(), Side::Source)
    );
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    // Heartbeats both ways, as MM2: target->source writes the `heartbeats` that source->target
    // mirrors.
    let pairs: Vec<(&str, &str)> = cfg
        .heartbeats
        .iter()
        .map(|h| (h.source_alias.as_str(), h.target.as_str()))
        .collect();
    assert_eq!(pairs, [("source", "target"), ("target", "source")]);
}

#[test]
fn mm2_defaults() {
    let cfg = parse(TWO);
    let f = &cfg.flows[0];
    assert_eq!(f.source.as_str(), "A");
    assert_eq!(f.target_alias.as_str(), "B");
    assert_eq!(f.replication_factor, 2);
    assert_eq!(f.offset_syncs_topic_replication_factor, 3);
    assert_eq!(f.checkpoints_topic_replication_factor, 3);
    assert_eq!(f.offset_syncs_location, OffsetSyncsLocation::Source);
    assert!(f.emit_offset_syncs);
    assert_eq!(f.offset_lag_max, 100);
    assert_eq!(f.refresh_topics, Some(Duration::from_secs(600)));
    assert_eq!(f.refresh_groups, Some(Duration::from_secs(600)));
    assert_eq!(f.sync_topic_configs, Some(Duration::from_secs(600)));
    assert_eq!(f.sync_topic_acls, Some(Duration::from_secs(600)));
    assert_eq!(f.emit_checkpoints, Some(Duration::from_secs(60)));
    assert_eq!(f.sync_group_offsets, None);
    assert!(f.heartbeats_replication);
    assert_eq!(f.use_defaults_from, UseDefaultsFrom::Target);
    assert_eq!(f.admin_timeout, Duration::from_secs(60));
    assert_eq!(f.max_bytes_in_flight, 64 * 1024 * 1024);
    assert_eq!(f.isolation_level, IsolationLevel::ReadCommitted);
    assert_eq!(f.topics.include().as_str(), ".*");
    assert_eq!(
        f.topics.exclude().as_str(),
        r"mm2.*\.internal|.*\.replica|__.*"
    );
    assert_eq!(
        f.groups.exclude().as_str(),
        "console-consumer-.*|connect-.*|__.*"
    );
    assert!(!f.should_replicate_config_property("min.insync.replicas"));
    assert!(f.should_replicate_config_property("retention.ms"));
    assert!(f.should_replicate_group("billing"));
    assert!(!f.should_replicate_group("console-consumer-1"));
    let hb = &cfg.heartbeats[0];
    assert_eq!(hb.interval, Duration::from_secs(1));
    assert_eq!(hb.topic_replication_factor, 3);
}

#[test]
fn flow_keys_override_top_level_keys() {
    let cfg = parse(
        "clusters = A, B, C
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
C.bootstrap.servers = c:9092
A->B.enabled = true
A->C.enabled = true
topics = orders.*
A->C.topics = payments
replication.factor = 3
A->B.replication.factor = -1
emit.checkpoints.enabled = false
A->C.emit.checkpoints.enabled = true
A->C.emit.checkpoints.interval.seconds = 7
",
    );
    let ab = &cfg.flows[0];
    let ac = &cfg.flows[1];
    assert!(ab.should_replicate_topic("orders-eu"));
    assert!(!ab.should_replicate_topic("payments"));
    assert!(ac.should_replicate_topic("payments"));
    assert!(!ac.should_replicate_topic("orders-eu"));
    assert_eq!(ab.replication_factor, -1);
    assert_eq!(ac.replication_factor, 3);
    assert_eq!(ab.emit_checkpoints, None);
    assert_eq!(ac.emit_checkpoints, Some(Duration::from_secs(7)));
    // Heartbeats still run between every ordered pair.
    assert_eq!(cfg.heartbeats.len(), 6);
}

#[test]
fn top_level_enabled_enables_every_pair() {
    let cfg = parse(
        "clusters = A, B, C
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
C.bootstrap.servers = c:9092
enabled = true
C->A.enabled = false
",
    );
    let names: Vec<String> = cfg.flows.iter().map(|f| f.name()).collect();
    assert_eq!(names, ["A->B", "A->C", "B->A", "B->C", "C->B"]);
}

#[test]
fn heartbeats_follow_emit_heartbeats_enabled_per_pair() {
    let cfg = with("B->A.emit.heartbeats.enabled = false\nemit.heartbeats.interval.seconds = 5\n");
    assert_eq!(cfg.heartbeats.len(), 1);
    assert_eq!(cfg.heartbeats[0].target.as_str(), "B");
    assert_eq!(cfg.heartbeats[0].interval, Duration::from_secs(5));
    let cfg = with("emit.heartbeats.enabled = FALSE\n");
    assert!(cfg.heartbeats.is_empty());
}

#[test]
fn identity_policy_and_separators() {
    let cfg = with(
        "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy \n\
         replication.policy.separator = _\n\
         offset-syncs.topic.location = target\n",
    );
    let f = &cfg.flows[0];
    assert_eq!(f.remote_topic("orders"), "orders");
    assert_eq!(f.remote_topic("heartbeats"), "A_heartbeats");
    assert_eq!(f.policy.topic_source("orders"), Some("A"));
    assert_eq!(
        f.offset_syncs_topic(),
        ("mm2-offset-syncs_A_internal".to_owned(), Side::Target)
    );
    assert_eq!(f.checkpoints_topic(), "A_checkpoints_internal");

    let cfg = with(
        "replication.policy.separator = __\n\
         replication.policy.internal.topic.separator.enabled = false\n",
    );
    let f = &cfg.flows[0];
    assert_eq!(f.remote_topic("orders"), "A__orders");
    assert_eq!(f.checkpoints_topic(), "A.checkpoints.internal");
    assert!(!f.should_replicate_topic("B__orders"));
}

#[test]
fn alias_overrides_rename_remote_topics() {
    let cfg = with("A->B.source.cluster.alias = us-west\nA->B.target.cluster.alias = us-east\n");
    let f = &cfg.flows[0];
    assert_eq!(f.source.as_str(), "A");
    assert_eq!(f.remote_topic("orders"), "us-west.orders");
    assert!(!f.should_replicate_topic("us-east.orders"));
    assert!(f.should_replicate_topic("B.orders"));
    assert_eq!(cfg.heartbeats[0].source_alias.as_str(), "us-west");
}

#[test]
fn client_settings_resolve_as_in_mm2() {
    let cfg = with(
        "security.protocol = SASL_SSL
sasl.mechanism = PLAIN
sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"hunter2\";
A.security.protocol = SSL
A.ssl.truststore.password = changeit
A.consumer.security.protocol = PLAINTEXT
A.consumer.max.poll.records = 5
A.producer.compression.type = zstd
A->B.consumer.max.poll.records = 7
A->B.consumer.fetch.min.bytes = 1
A->B.producer.linger.ms = 20
A->B.admin.timeout.ms = 1000
",
    );
    let a = cfg.cluster("A").unwrap();
    assert_eq!(
        a.client.consumer.security_protocol(),
        SecurityProtocol::Plaintext
    );
    assert_eq!(a.client.producer.security_protocol(), SecurityProtocol::Ssl);
    assert_eq!(a.client.admin.security_protocol(), SecurityProtocol::Ssl);
    assert_eq!(
        a.client
            .admin
            .get("ssl.truststore.password")
            .unwrap()
            .expose(),
        "changeit"
    );
    assert_eq!(
        a.client.admin.get("sasl.mechanism").unwrap().expose(),
        "PLAIN"
    );
    let b = cfg.cluster("B").unwrap();
    assert_eq!(
        b.client.consumer.security_protocol(),
        SecurityProtocol::SaslSsl
    );
    assert!(b.client.consumer.get("ssl.truststore.password").is_none());
    assert!(b.client.producer.get("compression.type").is_none());

    let flow = &cfg.flows[0];
    let source_consumer = cfg.client_props(flow, Side::Source, Role::Consumer);
    // The cluster's role setting wins over the flow's, as in MM2.
    assert_eq!(
        source_consumer.get("max.poll.records").unwrap().expose(),
        "5"
    );
    assert_eq!(
        source_consumer.get("fetch.min.bytes").unwrap().expose(),
        "1"
    );
    let target_producer = cfg.client_props(flow, Side::Target, Role::Producer);
    assert_eq!(target_producer.get("linger.ms").unwrap().expose(), "20");
    assert_eq!(
        target_producer.security_protocol(),
        SecurityProtocol::SaslSsl
    );
    // `admin.timeout.ms` is MM2's connector key, not an admin client override.
    assert_eq!(flow.admin_timeout, Duration::from_secs(1));
    assert!(flow.client_overrides.admin.is_empty());

    // Secrets never print.
    let printed = format!("{cfg:?} {source_consumer} {target_producer}");
    assert!(!printed.contains("hunter2"), "{printed}");
    assert!(!printed.contains("changeit"), "{printed}");
    assert!(printed.contains("[redacted]"));
}

#[test]
fn top_level_bootstrap_servers_serve_every_cluster_without_its_own() {
    let cfg = parse(
        "clusters = A, B\nbootstrap.servers = shared:9092\nA.bootstrap.servers = PLAINTEXT://a:9092\nA->B.enabled = true\n",
    );
    assert_eq!(cfg.cluster("A").unwrap().bootstrap_servers, ["a:9092"]);
    assert_eq!(cfg.cluster("B").unwrap().bootstrap_servers, ["shared:9092"]);
}

#[test]
fn isolation_level() {
    assert_eq!(
        with("A.consumer.isolation.level = read_uncommitted\n").flows[0].isolation_level,
        IsolationLevel::ReadUncommitted
    );
    assert_eq!(
        with("A.consumer.isolation.level = read_uncommitted\nstrait.isolation.level = READ_COMMITTED\n")
            .flows[0]
            .isolation_level,
        IsolationLevel::ReadCommitted
    );
    assert_eq!(
        with("A->B.strait.isolation.level = read_uncommitted\n").flows[0].isolation_level,
        IsolationLevel::ReadUncommitted
    );
}

#[test]
fn start_position_is_the_source_consumers_auto_offset_reset() {
    // MM2 sets `earliest` when nothing is given.
    assert_eq!(with("").flows[0].auto_offset_reset, StartPosition::Earliest);
    assert_eq!(
        with("A.consumer.auto.offset.reset = latest\n").flows[0].auto_offset_reset,
        StartPosition::Latest
    );
    // The flow's own consumer override is stronger than the cluster's.
    assert_eq!(
        with("A.consumer.auto.offset.reset = latest\nA->B.consumer.auto.offset.reset = Earliest\n")
            .flows[0]
            .auto_offset_reset,
        StartPosition::Earliest
    );
    // The target's consumer does not read the source.
    assert_eq!(
        with("B.consumer.auto.offset.reset = latest\n").flows[0].auto_offset_reset,
        StartPosition::Earliest
    );
    let err = StraitConfig::parse(
        &format!("{TWO}A.consumer.auto.offset.reset = none\n"),
        "mm2.properties",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("A.consumer.auto.offset.reset"), "{err}");
    assert!(err.contains("`earliest` or `latest`"), "{err}");
}

#[test]
fn strait_keys() {
    let f = with("strait.max.bytes.in.flight = 1048576\nA->B.strait.max.bytes.in.flight = 2048\n");
    assert_eq!(f.flows[0].max_bytes_in_flight, 2048);
}

#[test]
fn workers_run_every_flow_by_default_and_exactly_once_adds_transactions() {
    // Any number of `strait run` on one unchanged MM2 file share the flow, as MM2's dedicated
    // mode shares it in one Connect group: workers are the default, without transactions.
    let plain = with("");
    let workers = plain.flows[0].workers.as_ref().expect("workers by default");
    assert_eq!(workers.group_id, "strait-A-B");
    assert!(!workers.exactly_once);
    let eos = |extra: &str| {
        with(extra).flows[0]
            .workers
            .as_ref()
            .is_some_and(|w| w.exactly_once)
    };
    assert!(eos("exactly.once.source.support = enabled\n"));
    assert!(eos("exactly.once.source.support = Enabled\n"));
    // MM2's per-cluster form, as Kafka's documentation gives it for a dedicated MM2: a setting
    // of the Connect workers of flows into B.
    assert!(eos("B.exactly.once.source.support = enabled\n"));
    assert!(!eos("A.exactly.once.source.support = enabled\n"));
    // The flow's own key over the cluster's, the cluster's over the top level.
    assert!(!eos(
        "B.exactly.once.source.support = enabled\nA->B.exactly.once.source.support = disabled\n"
    ));
    assert!(eos(
        "exactly.once.source.support = disabled\nB.exactly.once.source.support = enabled\n"
    ));
    // MM2's upgrade step and the default write without transactions.
    assert!(!eos("exactly.once.source.support = preparing\n"));
    assert!(!eos("exactly.once.source.support = disabled\n"));
    // Said not to, no workers.
    assert!(
        with("exactly.once.source.support = enabled\nstrait.workers.enabled = false\n").flows[0]
            .workers
            .is_none()
    );
    assert!(with("strait.workers.enabled = false\n").flows[0]
        .workers
        .is_none());
    for bad in [
        "exactly.once.source.support = sometimes\n",
        "B.exactly.once.source.support = sometimes\n",
    ] {
        let err = StraitConfig::parse(&format!("{TWO}{bad}"), "mm2.properties")
            .unwrap_err()
            .to_string();
        assert!(err.contains("exactly.once.source.support"), "{err}");
    }
    // The cluster-level key is used, not ignored.
    assert!(with("B.exactly.once.source.support = enabled\n")
        .warnings
        .is_empty());
}

#[test]
fn two_flows_into_one_target_cannot_share_a_workers_group() {
    let three = "clusters = A, B, C\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n\
                 C.bootstrap.servers = c:9092\nA->B.enabled = true\nC->B.enabled = true\n";
    let err = StraitConfig::parse(
        &format!("{three}strait.workers.group.id = mirror\n"),
        "mm2.properties",
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("mm2.properties"), "{text}");
    assert!(text.contains("mm2.properties:7:"), "{text}");
    assert!(text.contains("A->B and C->B"), "{text}");
    assert!(text.contains("mirror"), "{text}");
    // Each its own group, or flows into different targets: accepted.
    let own = StraitConfig::parse(
        &format!("{three}A->B.strait.workers.group.id = ab\nC->B.strait.workers.group.id = cb\n"),
        "mm2.properties",
    )
    .unwrap();
    assert_eq!(own.flows.len(), 2);
    StraitConfig::parse(
        &format!(
            "{}A->C.enabled = true\nstrait.workers.group.id = mirror\n",
            three.replace("C->B.enabled = true\n", "")
        ),
        "mm2.properties",
    )
    .unwrap();
    // The default names each flow's group after its clusters.
    StraitConfig::parse(three, "mm2.properties").unwrap();
}

#[test]
fn topic_deletions_are_synced_only_when_asked() {
    // Off by default: MM2 never deletes a remote topic.
    assert!(!with("").flows[0].sync_topic_deletions);
    assert!(with("strait.sync.topic.deletions.enabled = true\n").flows[0].sync_topic_deletions);
    assert!(
        with("A->B.strait.sync.topic.deletions.enabled = TRUE\n").flows[0].sync_topic_deletions
    );
    // The flow's own key wins over the top level, both ways.
    assert!(!with(
        "strait.sync.topic.deletions.enabled = true\nA->B.strait.sync.topic.deletions.enabled = false\n"
    )
    .flows[0]
    .sync_topic_deletions);
    assert!(with(
        "strait.sync.topic.deletions.enabled = false\nA->B.strait.sync.topic.deletions.enabled = true\n"
    )
    .flows[0]
    .sync_topic_deletions);
}

#[test]
fn legacy_blacklist_keys() {
    let cfg = with("topics.blacklist = secret.*\ngroups.blacklist = tmp-.*\n");
    let f = &cfg.flows[0];
    assert!(!f.should_replicate_topic("secret-stuff"));
    assert!(!f.should_replicate_topic("__consumer_offsets.x"));
    assert!(!f.should_replicate_group("tmp-1"));
    assert!(f.should_replicate_group("console-consumer-1"));
    let kinds: Vec<&WarningKind> = cfg.warnings.iter().map(|w| &w.kind).collect();
    assert_eq!(
        kinds,
        [
            &WarningKind::Deprecated {
                replacement: "topics.exclude"
            },
            &WarningKind::Deprecated {
                replacement: "groups.exclude"
            }
        ]
    );
    // The new key wins over the old one from any level, as in MM2.
    let cfg = with("topics.exclude = a\nA->B.topics.blacklist = b\n");
    assert!(!cfg.flows[0].should_replicate_topic("a"));
    assert!(cfg.flows[0].should_replicate_topic("b"));
}

#[test]
fn empty_lists_match_nothing() {
    let cfg = with("A->B.topics =\nA->B.groups.exclude =\n");
    let f = &cfg.flows[0];
    assert!(!f.should_replicate_topic("orders"));
    // Heartbeats still replicate.
    assert!(f.should_replicate_topic("heartbeats"));
    assert!(f.should_replicate_group("console-consumer-1"));
    let cfg = with("heartbeats.replication.enabled = false\nA->B.topics =\n");
    assert!(!cfg.flows[0].should_replicate_topic("heartbeats"));
}

#[test]
fn intervals_of_disabled_tasks() {
    let cfg = with("sync.topic.acls.enabled = false\nrefresh.groups.interval.seconds = 30\n");
    let f = &cfg.flows[0];
    assert_eq!(f.sync_topic_acls, None);
    assert_eq!(f.refresh_groups, Some(Duration::from_secs(30)));
}

#[test]
fn warnings_name_key_and_line() {
    let cfg = with(
        "tasks.max.enforce = false
consumer.max.poll.records = 10
A.max.poll.records = 10
A->B.topic = x
replication.factr = 2
A->B.enabled = true
A->B.security.protocol = SSL
A.consumer.bootstrap.servers = elsewhere:9092
something.else = 1
",
    );
    let got: Vec<String> = cfg.warnings.iter().map(|w| w.to_string()).collect();
    let expect_start = [
        "line 5: key `tasks.max.enforce` is accepted but not used: strait spreads",
        "line 6: key `consumer.max.poll.records` is accepted but not used: MM2 applies client settings per cluster",
        "line 7: key `A.max.poll.records` is accepted but not used: MM2 passes cluster-level keys",
        "line 8: key `A->B.topic` is unknown and ignored (did you mean `topics`?)",
        "line 9: key `replication.factr` is unknown and ignored (did you mean `replication.factor`?)",
        "line 10: key `A->B.enabled` is also set on line 4; the value on line 10 wins",
        "line 11: key `A->B.security.protocol` is accepted but not used: MM2 takes connection settings from the cluster",
        "line 12: key `A.consumer.bootstrap.servers` is accepted but not used: strait connects every client",
        "line 13: key `something.else` is unknown and ignored",
    ];
    assert_eq!(got.len(), expect_start.len(), "{got:#?}");
    for (g, e) in got.iter().zip(expect_start) {
        assert!(g.starts_with(e), "{g:?} should start with {e:?}");
    }
    // `A.consumer.bootstrap.servers` does not reach the client.
    assert!(cfg
        .cluster("A")
        .unwrap()
        .client
        .consumer
        .get("bootstrap.servers")
        .is_none());
}

#[test]
fn aliases_with_dots_and_dashes() {
    let cfg = parse(
        "clusters = us-west, eu.central
us-west.bootstrap.servers = w:9092
eu.central.bootstrap.servers = e:9092
us-west->eu.central.enabled = true
us-west->eu.central.topics = orders
",
    );
    let f = &cfg.flows[0];
    assert_eq!(f.name(), "us-west->eu.central");
    assert!(f.should_replicate_topic("orders"));
    assert!(!f.should_replicate_topic("payments"));
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
}

/// KAFKA-9914: with two aliases for one cluster (`clusters = kafka, backup`, both at the same
/// brokers), `kafka->backup` writes `kafka.orders` into the very cluster it reads; MM2 4.3.1
/// mirrored that again as `kafka.kafka.orders`, and so on. A topic some hop of which names the
/// flow's own source is a cycle; the identity policy keeps MM2's one test (the target).
#[test]
fn a_topic_named_after_the_flows_own_source_is_not_mirrored_again() {
    let cfg = parse(
        "clusters = kafka, backup
kafka.bootstrap.servers = k:9092
backup.bootstrap.servers = k:9092
kafka->backup.enabled = true
",
    );
    let flow = &cfg.flows[0];
    assert!(flow.should_replicate_topic("orders"));
    assert_eq!(flow.remote_topic("orders"), "kafka.orders");
    assert!(!flow.should_replicate_topic("kafka.orders"));
    assert!(!flow.should_replicate_topic("kafka.kafka.orders"));
    assert!(!flow.should_replicate_topic("other.kafka.orders"));
    assert!(flow.should_replicate_topic("other.orders"));

    let identity = parse(
        "clusters = kafka, backup
kafka.bootstrap.servers = k:9092
backup.bootstrap.servers = b:9092
kafka->backup.enabled = true
replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy
",
    );
    let flow = &identity.flows[0];
    assert!(flow.should_replicate_topic("orders"));
    assert!(flow.should_replicate_topic("kafka.orders"));
    assert!(!flow.should_replicate_topic("backup.heartbeats"));
}

/// Every key that MirrorMaker 2's own configuration definitions declare, read from the
/// `connect-mirror` jar the tests run (`scripts/kafka/Mm2ConfigKeys.java` on
/// `scripts/mm2/pom.xml`'s class path), is known to strait's key catalogue: acted on, deprecated,
/// or accepted and not used with the reason. A key a new MM2 release adds fails here by name.
/// (jvm tier: it runs java.)
#[test]
fn every_key_of_mm2s_own_config_definitions_is_known() {
    use std::collections::BTreeMap;
    use strait_core::config::catalogue;

    let program = strait_testkit::kafka_conf_dir().join("Mm2ConfigKeys.java");
    let output = strait_testkit::mm2_java_command()
        .arg(&program)
        .output()
        .expect("run java");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "Mm2ConfigKeys failed ({}):\n{stdout}{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    // key -> the definitions that declare it.
    let mut keys: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for line in stdout.lines() {
        let (definition, key) = line
            .split_once('\t')
            .unwrap_or_else(|| panic!("not `<definition>\\t<key>`: {line:?}"));
        keys.entry(key).or_default().push(definition);
    }
    // The jar is the one meant: 4.3's key and each definition are there.
    assert!(
        keys.contains_key("metric.names.formats"),
        "no metric.names.formats (KIP-1280): not MM2 {}?\n{stdout}",
        strait_testkit::MM2_VERSION
    );
    for definition in [
        "MirrorMakerConfig",
        "MirrorConnectorConfig",
        "MirrorSourceConfig",
        "MirrorCheckpointConfig",
        "MirrorHeartbeatConfig",
        "MirrorClientConfig",
        "MirrorClientConfig.client",
    ] {
        assert!(
            keys.values().flatten().any(|d| *d == definition),
            "no key of {definition}:\n{stdout}"
        );
    }
    let unknown: Vec<String> = keys
        .iter()
        .filter(|(key, _)| {
            catalogue::flow_key(key).is_none() && catalogue::connection_key(key).is_none()
        })
        .map(|(key, definitions)| format!("{key} ({})", definitions.join(", ")))
        .collect();
    assert!(
        unknown.is_empty(),
        "{} of MM2 {}'s {} keys are not in strait's key catalogue \
         (crates/strait-core/src/config/catalogue.rs):\n  {}",
        unknown.len(),
        strait_testkit::MM2_VERSION,
        keys.len(),
        unknown.join("\n  ")
    );
    eprintln!(
        "all {} keys of MM2 {}'s config definitions are in the catalogue",
        keys.len(),
        strait_testkit::MM2_VERSION
    );
}
