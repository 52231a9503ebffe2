//! Malformed configs: each stops start-up with its own message naming the file, the line and the
//! key, and saying what is wrong.

use strait_core::config::{ConfigError, ConfigErrorReason, StraitConfig};

const BASE: &str = "\
clusters = A, B
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
A->B.enabled = true
";

fn err(text: &str) -> ConfigError {
    match StraitConfig::parse(text, "mm2.properties") {
        Ok(cfg) => panic!("accepted: {text:?} -> {cfg:?}"),
        Err(e) => e,
    }
}

/// The base config plus `extra` from line 5 on.
fn err_with(extra: &str) -> ConfigError {
    err(&format!("{BASE}{extra}"))
}

/// Asserts the message names `line` and `key` and holds every fragment of `says`.
fn assert_names(e: &ConfigError, line: usize, key: &str, says: &[&str]) {
    let msg = e.to_string();
    let place = format!("mm2.properties:{line}: key `{key}`: ");
    assert!(
        msg.starts_with(&place),
        "{msg:?} does not start with {place:?}"
    );
    assert_eq!(e.line, Some(line), "{msg}");
    assert_eq!(e.key.as_deref(), Some(key), "{msg}");
    for s in says {
        assert!(msg.contains(s), "{msg:?} does not say {s:?}");
    }
    assert!(!e.is_retriable());
}

#[test]
fn empty_cluster_alias() {
    let e = err("# aliases\nclusters = A,,B\n");
    assert_names(&e, 2, "clusters", &["cluster alias ``", "is empty"]);
}

#[test]
fn alias_with_illegal_characters() {
    let e = err("clusters = A, us west\n");
    assert_names(&e, 1, "clusters", &["`us west`", "letters, digits"]);
}

#[test]
fn cluster_without_bootstrap_servers() {
    let e = err("\n\nclusters = A, B\nA.bootstrap.servers = a:9092\nA->B.enabled = true\n");
    assert_names(
        &e,
        3,
        "B.bootstrap.servers",
        &["cluster `B` has no bootstrap servers"],
    );
}

#[test]
fn bootstrap_server_without_port() {
    let e =
        err("clusters = A, B\nA.bootstrap.servers = a:9092, a2\nB.bootstrap.servers = b:9092\n");
    assert_names(&e, 2, "A.bootstrap.servers", &["`a2` is not `host:port`"]);
}

#[test]
fn flow_naming_an_undeclared_cluster() {
    let e = err_with("A->C.enabled = true\n");
    assert_names(
        &e,
        5,
        "A->C.enabled",
        &["cluster `C`", "not in `clusters` (A, B)"],
    );
    let e = err_with("\nX->B.topics = .*\n");
    assert_names(&e, 6, "X->B.topics", &["cluster `X`"]);
}

#[test]
fn flow_from_a_cluster_to_itself() {
    let e = err_with("A->A.enabled = true\n");
    assert_names(&e, 5, "A->A.enabled", &["from `A` to itself"]);
}

#[test]
fn malformed_boolean() {
    let e = err("clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = yes\n");
    assert_names(
        &e,
        4,
        "A->B.enabled",
        &["expected `true` or `false`, found `yes`"],
    );
    let e = err_with("sync.group.offsets.enabled = 1\n");
    assert_names(&e, 5, "sync.group.offsets.enabled", &["found `1`"]);
}

#[test]
fn malformed_integer() {
    let e = err_with("replication.factor = two\n");
    assert_names(
        &e,
        5,
        "replication.factor",
        &["found `two`", "-1 for the broker's default"],
    );
}

#[test]
fn replication_factor_out_of_range() {
    let e = err_with("A->B.offset-syncs.topic.replication.factor = 0\n");
    assert_names(
        &e,
        5,
        "A->B.offset-syncs.topic.replication.factor",
        &["from 1 to 32767", "found `0`"],
    );
    let e = err_with("checkpoints.topic.replication.factor = 40000\n");
    assert_names(
        &e,
        5,
        "checkpoints.topic.replication.factor",
        &["found `40000`"],
    );
}

#[test]
fn negative_interval() {
    let e = err_with("emit.checkpoints.interval.seconds = -1\n");
    assert_names(
        &e,
        5,
        "emit.checkpoints.interval.seconds",
        &["`-1` is negative", "`*.enabled = false`"],
    );
}

#[test]
fn zero_and_malformed_intervals() {
    let e = err_with("A->B.refresh.topics.interval.seconds = 0\n");
    assert_names(
        &e,
        5,
        "A->B.refresh.topics.interval.seconds",
        &["at least 1 second"],
    );
    let e = err_with("sync.topic.configs.interval.seconds = 10m\n");
    assert_names(
        &e,
        5,
        "sync.topic.configs.interval.seconds",
        &["a whole number of seconds", "`10m`"],
    );
}

#[test]
fn bad_topic_regex() {
    let e = err_with("A->B.topics = orders, pay(ments\n");
    assert_names(
        &e,
        5,
        "A->B.topics",
        &["invalid regex `orders|pay(ments`", "unclosed group"],
    );
}

#[test]
fn bad_group_exclude_regex() {
    let e = err_with("groups.exclude = [z-a]\n");
    assert_names(&e, 5, "groups.exclude", &["invalid regex `[z-a]`"]);
}

#[test]
fn unknown_replication_policy_class() {
    let e = err_with("replication.policy.class = com.example.MyPolicy\n");
    assert_names(
        &e,
        5,
        "replication.policy.class",
        &[
            "unsupported class `com.example.MyPolicy`",
            "DefaultReplicationPolicy",
            "IdentityReplicationPolicy",
        ],
    );
}

#[test]
fn custom_filter_class() {
    let e = err_with("A->B.topic.filter.class = com.example.MyFilter\n");
    assert_names(
        &e,
        5,
        "A->B.topic.filter.class",
        &["com.example.MyFilter", "DefaultTopicFilter"],
    );
}

#[test]
fn bad_offset_syncs_location() {
    // MM2's validator is case-sensitive.
    let e = err_with("offset-syncs.topic.location = Source\n");
    assert_names(
        &e,
        5,
        "offset-syncs.topic.location",
        &["expected one of `source` or `target`, found `Source`"],
    );
}

#[test]
fn empty_separator() {
    let e = err_with("replication.policy.separator =\n");
    assert_names(
        &e,
        5,
        "replication.policy.separator",
        &["separator is empty"],
    );
}

#[test]
fn separator_with_illegal_characters() {
    let e = err_with("A->B.replication.policy.separator = _ \n");
    assert_names(
        &e,
        5,
        "A->B.replication.policy.separator",
        &["separator `_ `", "topic names"],
    );
}

#[test]
fn malformed_unicode_escape() {
    let e = err_with("A.sasl.jaas.config = secret\\u12zz-password\n");
    assert_names(&e, 5, "A.sasl.jaas.config", &["malformed \\uxxxx escape"]);
    assert!(!e.to_string().contains("secret"), "{e}");
    assert!(matches!(e.reason, ConfigErrorReason::Syntax(_)));
}

#[test]
fn bad_security_protocol() {
    let e = err_with("A.consumer.security.protocol = TLS\n");
    assert_names(
        &e,
        5,
        "A.consumer.security.protocol",
        &["PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", "found `TLS`"],
    );
}

#[test]
fn unknown_strait_key() {
    let e = err_with("A->B.strait.max.bytes.inflight = 1000\n");
    assert_names(
        &e,
        5,
        "A->B.strait.max.bytes.inflight",
        &["unknown strait key", "strait.max.bytes.in.flight"],
    );
}

#[test]
fn bad_strait_values() {
    let e = err_with("strait.max.bytes.in.flight = 0\n");
    assert_names(&e, 5, "strait.max.bytes.in.flight", &["1 or more"]);
    let e = err_with("strait.isolation.level = committed\n");
    assert_names(
        &e,
        5,
        "strait.isolation.level",
        &["`read_committed` or `read_uncommitted`"],
    );
    let e = err_with("A.consumer.isolation.level = none\n");
    assert_names(&e, 5, "A.consumer.isolation.level", &["found `none`"]);
    let e = err_with("A->B.strait.sync.topic.deletions.enabled = yes\n");
    assert_names(
        &e,
        5,
        "A->B.strait.sync.topic.deletions.enabled",
        &["`yes`"],
    );
    let e = err_with("strait.sync.topic.deletions.enabled = 1\n");
    assert_names(&e, 5, "strait.sync.topic.deletions.enabled", &["`1`"]);
    let e = err_with("A->B.strait.sync.topic.deletion.enabled = true\n");
    assert_names(
        &e,
        5,
        "A->B.strait.sync.topic.deletion.enabled",
        &["unknown strait key", "strait.sync.topic.deletions.enabled"],
    );
}

#[test]
fn negative_offset_lag_max() {
    let e = err_with("offset.lag.max = -5\n");
    assert_names(&e, 5, "offset.lag.max", &["0 or more", "`-5`"]);
}

#[test]
fn transforms_are_refused() {
    let e = err_with("A->B.transforms = drop\n");
    assert_names(&e, 5, "A->B.transforms", &["Single Message Transforms"]);
    // An empty list is no transform.
    assert!(StraitConfig::parse(&format!("{BASE}transforms =\n"), "mm2.properties").is_ok());
}

#[test]
fn config_providers_need_their_class() {
    let e = err_with("config.providers = file\n");
    assert_names(
        &e,
        5,
        "config.providers",
        &["`config.providers.file.class` is not set"],
    );
}

#[test]
fn bad_alias_override() {
    let e = err_with("A->B.source.cluster.alias = us west\n");
    assert_names(&e, 5, "A->B.source.cluster.alias", &["`us west`"]);
}

#[test]
fn errors_without_a_line() {
    let e = err("A.bootstrap.servers = a:9092\n");
    assert_eq!(e.key.as_deref(), Some("clusters"));
    assert_eq!(e.line, None);
    assert_eq!(
        e.to_string(),
        "mm2.properties: key `clusters`: no clusters declared: list the cluster aliases, e.g. `clusters = A, B`"
    );

    let e = err("clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = false\n");
    assert!(matches!(e.reason, ConfigErrorReason::NoFlowEnabled));
    assert!(
        e.to_string()
            .starts_with("mm2.properties: no flow is enabled"),
        "{e}"
    );

    let e = StraitConfig::load("/nonexistent/strait/mm2.properties").unwrap_err();
    assert!(e.is_retriable());
    assert!(
        e.to_string()
            .starts_with("/nonexistent/strait/mm2.properties: cannot read the file"),
        "{e}"
    );
}

#[test]
fn first_fault_is_reported_at_its_line() {
    // Two faults: the flow key check runs before value checks, and reports the lower line.
    let e = err_with("replication.factor = x\nA->C.enabled = true\nA->D.enabled = true\n");
    assert_names(&e, 6, "A->C.enabled", &["cluster `C`"]);
}

mod never_panics {
    use proptest::prelude::*;
    use strait_core::config::StraitConfig;

    fn key() -> impl Strategy<Value = String> {
        let prefix = prop::sample::select(vec![
            "",
            "",
            "A.",
            "B.",
            "A->B.",
            "B->A.",
            "A->A.",
            "C->A.",
            "A.consumer.",
            "A->B.producer.",
        ]);
        let name = prop::sample::select(vec![
            "clusters",
            "bootstrap.servers",
            "enabled",
            "topics",
            "topics.exclude",
            "groups.blacklist",
            "replication.policy.class",
            "replication.policy.separator",
            "replication.factor",
            "emit.heartbeats.interval.seconds",
            "offset-syncs.topic.location",
            "security.protocol",
            "sasl.jaas.config",
            "isolation.level",
            "strait.max.bytes.in.flight",
            "strait.isolation.level",
            "strait.sync.topic.deletions.enabled",
            "source.cluster.alias",
            "transforms",
            "tasks.max",
            "x",
        ]);
        (prefix, name).prop_map(|(p, n)| format!("{p}{n}"))
    }

    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(vec![
                "A, B",
                "a:9092",
                "true",
                "false",
                "-1",
                "0",
                "2",
                "99999999999999999999",
                ".*",
                "(",
                "(?!x).*",
                "_",
                "",
                "source",
                "target",
                "SSL",
                "read_uncommitted",
                "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
            ])
            .prop_map(str::to_owned),
            "[ -~]{0,12}",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn on_any_combination(lines in prop::collection::vec((key(), value()), 0..14)) {
            let text: String = lines.iter().map(|(k, v)| format!("{k} = {v}\n")).collect();
            match StraitConfig::parse(&text, "p") {
                Ok(cfg) => {
                    prop_assert!(!cfg.flows.is_empty());
                    for w in &cfg.warnings {
                        prop_assert!(w.line >= 1 && w.line <= lines.len());
                        let _ = w.to_string();
                    }
                }
                Err(e) => {
                    if let Some(line) = e.line {
                        prop_assert!(line >= 1 && line <= lines.len(), "{e}");
                    }
                    prop_assert!(!e.to_string().is_empty());
                }
            }
        }
    }
}
