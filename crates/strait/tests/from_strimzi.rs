//! `strait config from-strimzi`: Strimzi `KafkaMirrorMaker2` resources written after the
//! examples in Strimzi's documentation (`tests/strimzi/*.yaml`), in the v1beta2 layout
//! (`spec.clusters`) and the v1 layout (`spec.target`, a mirror's `source`), become MM2 files
//! that strait loads, with secrets read from the mounted Secrets at load time and never
//! copied; one of each layout runs against a real broker with TLS and SCRAM; what cannot be
//! carried over is refused or noted.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use strait_core::config::{Role, Side, StraitConfig};
use strait_kafka::sasl::{SaslConfig, TokenSource};
use strait_kafka::Client;
use strait_testkit::{Scram, SecureBroker, SecureBrokerOptions, TestCa};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/strimzi")
        .join(name)
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("strait-strimzi-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn from_strimzi(file: &Path, secrets: &Path, out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strait"))
        .args(["config", "from-strimzi"])
        .arg(file)
        .arg("--secrets-dir")
        .arg(secrets)
        .arg("--out")
        .arg(out)
        .output()
        .expect("run strait")
}

/// Converts `fixture` and returns the properties text and the notes (stderr).
fn convert(name: &str, secrets: &Path) -> (String, String) {
    let out = secrets.join(format!("{name}.properties"));
    let output = from_strimzi(&fixture(name), secrets, &out);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{name}: {stderr}");
    (std::fs::read_to_string(&out).unwrap(), stderr)
}

/// Writes the Secret files a pod would have mounted.
fn secret(dir: &Path, secret: &str, key: &str, value: &str) {
    let path = dir.join(secret);
    std::fs::create_dir_all(&path).unwrap();
    std::fs::write(path.join(key), value).unwrap();
}

/// A Strimzi cluster CA Secret as mounted: the current CA `ca.crt`, an older one still
/// trusted while the CA is renewed, and the PKCS #12 copy and its password, which a
/// `*.crt` pattern leaves out.
fn cluster_ca_secret(dir: &Path, secret_name: &str, current: &str, older: &str) {
    secret(dir, secret_name, "ca.crt", current);
    secret(dir, secret_name, "ca-2025-01-01.crt", older);
    secret(dir, secret_name, "ca.password", "p12-password");
    std::fs::write(
        dir.join(secret_name).join("ca.p12"),
        [0x30, 0x82, 0xff, 0x00],
    )
    .unwrap();
}

fn has(text: &str, line: &str) {
    assert!(
        text.lines().any(|l| l == line),
        "`{line}` is not in:\n{text}"
    );
}

#[test]
fn the_minimal_resource() {
    let dir = scratch("minimal");
    let (text, notes) = convert("minimal.yaml", &dir);
    has(&text, "clusters = my-cluster-source, my-cluster-target");
    has(
        &text,
        "my-cluster-source.bootstrap.servers = my-cluster-source-kafka-bootstrap:9092",
    );
    has(&text, "my-cluster-source->my-cluster-target.enabled = true");
    has(
        &text,
        "my-cluster-source->my-cluster-target.emit.checkpoints.enabled = false",
    );
    has(
        &text,
        "my-cluster-source->my-cluster-target.emit.heartbeats.enabled = false",
    );
    assert!(!text.contains("config.providers"), "{text}");
    assert!(notes.contains("spec.connectCluster"), "{notes}");
    assert!(notes.contains("spec.version"), "{notes}");
    let cfg = StraitConfig::load(dir.join("minimal.yaml.properties")).unwrap();
    assert_eq!(cfg.flows.len(), 1);
    let flow = &cfg.flows[0];
    assert_eq!(flow.source.as_str(), "my-cluster-source");
    assert_eq!(flow.target.as_str(), "my-cluster-target");
    assert_eq!(flow.emit_checkpoints, None);
}

#[test]
fn tls_scram_patterns_and_connector_settings() {
    let dir = scratch("tls-scram");
    let (text, notes) = convert("tls-scram.yaml", &dir);
    let d = dir.display();
    has(&text, "config.providers = directory");
    has(
        &text,
        "config.providers.directory.class = org.apache.kafka.common.config.provider.DirectoryConfigProvider",
    );
    has(&text, "dc1.security.protocol = SASL_SSL");
    has(&text, "dc1.ssl.truststore.type = PEM");
    has(
        &text,
        &format!("dc1.ssl.truststore.location = {d}/dc1-cluster-ca-cert/ca.crt"),
    );
    has(&text, "dc1.sasl.mechanism = SCRAM-SHA-512");
    has(
        &text,
        &format!(
            "dc1.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule \
             required username=\"mm2-user\" password=\"${{directory:{d}/mm2-user-dc1:password}}\";"
        ),
    );
    has(&text, "dc2.ssl.enabled.protocols = TLSv1.3");
    has(
        &text,
        "# Kafka Connect worker setting, not used by strait: config.storage.replication.factor = -1",
    );
    has(&text, "dc1->dc2.topics = orders.*|payments");
    has(&text, "dc1->dc2.topics.exclude = orders-tmp.*");
    has(&text, "dc1->dc2.groups.exclude = test-.*");
    has(&text, "dc1->dc2.tasks.max = 4");
    has(&text, "dc1->dc2.sync.group.offsets.enabled = true");
    has(&text, "dc1->dc2.emit.checkpoints.interval.seconds = 30");
    has(&text, "dc1->dc2.refresh.topics.interval.seconds = 60");
    assert_eq!(
        text.matches("dc1->dc2.replication.policy.separator")
            .count(),
        1,
        "one value per flow: {text}"
    );
    assert!(!text.contains("emit.checkpoints.enabled"), "{text}");
    assert!(notes.contains("spec.resources"), "{notes}");
    assert!(notes.contains("spec.logging"), "{notes}");

    // The pod's mounted Secrets: the file loads, the passwords come from them.
    secret(
        &dir,
        "dc1-cluster-ca-cert",
        "ca.crt",
        TestCa::new("dc1").pem(),
    );
    secret(
        &dir,
        "dc2-cluster-ca-cert",
        "ca.crt",
        TestCa::new("dc2").pem(),
    );
    secret(&dir, "mm2-user-dc1", "password", "dc1-pass");
    secret(&dir, "mm2-user-dc2", "password", "dc2-pass");
    let cfg = StraitConfig::load(dir.join("tls-scram.yaml.properties")).unwrap();
    let flow = &cfg.flows[0];
    assert!(flow.topics.should_replicate_topic("orders-eu"));
    assert!(flow.topics.should_replicate_topic("payments"));
    assert!(!flow.topics.should_replicate_topic("orders-tmp-1"));
    assert!(!flow.topics.should_replicate_topic("customers"));
    assert!(!flow.groups.should_replicate_group("test-app"));
    assert!(flow.sync_group_offsets.is_some());
    let source = cfg
        .client_config(flow, Side::Source, Role::Consumer)
        .unwrap();
    assert_eq!(source.security().protocol(), "SASL_SSL");
    assert!(!format!("{cfg:?}").contains("dc1-pass"));
}

#[test]
fn mutual_tls_several_cas_rack_and_notes() {
    let dir = scratch("mtls");
    let (text, notes) = convert("mtls-rack.yaml", &dir);
    let d = dir.display();
    has(&text, "config.providers = directory, env");
    has(&text, "source.security.protocol = SSL");
    has(&text, "source.ssl.keystore.type = PEM");
    has(
        &text,
        &format!(
            "source.ssl.keystore.certificate.chain = ${{directory:{d}/mm2-source-user:user.crt}}"
        ),
    );
    has(
        &text,
        &format!("source.ssl.keystore.key = ${{directory:{d}/mm2-source-user:user.key}}"),
    );
    has(
        &text,
        &format!(
            "source.ssl.truststore.certificates = ${{directory:{d}/source-cluster-ca-cert:ca.crt}}\\n${{directory:{d}/corporate-root:root.pem}}"
        ),
    );
    has(
        &text,
        "source.consumer.client.rack = ${env:STRAIT_CLIENT_RACK}",
    );
    has(&text, "source->target.topics.exclude = secret-.*");
    has(&text, "source->target.groups.exclude = admin-.*");
    has(&text, "source->target.emit.heartbeats.enabled = false");
    assert!(!text.contains("emit.checkpoints.enabled"), "{text}");
    for expected in [
        "spec.replicas (3)",
        "sourceConnector.state is `paused`",
        "spec.template",
        "spec.metricsConfig",
        "STRAIT_CLIENT_RACK",
    ] {
        assert!(notes.contains(expected), "{expected} not in {notes}");
    }

    let source_ca = TestCa::new("source");
    let user = source_ca.client_cert("mm2");
    secret(&dir, "source-cluster-ca-cert", "ca.crt", source_ca.pem());
    secret(
        &dir,
        "corporate-root",
        "root.pem",
        TestCa::new("root").pem(),
    );
    secret(&dir, "mm2-source-user", "user.crt", &user.chain_pem);
    secret(&dir, "mm2-source-user", "user.key", &user.key_pem);
    let target_ca = TestCa::new("target");
    let target_user = target_ca.client_cert("mm2");
    secret(&dir, "target-cluster-ca-cert", "ca.crt", target_ca.pem());
    secret(&dir, "mm2-target-user", "user.crt", &target_user.chain_pem);
    secret(&dir, "mm2-target-user", "user.key", &target_user.key_pem);
    std::env::set_var("STRAIT_CLIENT_RACK", "zone-b");
    let cfg = StraitConfig::load(dir.join("mtls-rack.yaml.properties")).unwrap();
    let flow = &cfg.flows[0];
    let consumer = cfg
        .client_config(flow, Side::Source, Role::Consumer)
        .unwrap();
    assert_eq!(consumer.security().protocol(), "SSL");
    assert_eq!(consumer.client_rack.as_deref(), Some("zone-b"));
    assert!(consumer
        .security()
        .tls
        .as_ref()
        .unwrap()
        .has_client_certificate());
}

#[test]
fn oauth_client_credentials_and_plain() {
    let dir = scratch("oauth");
    let (text, notes) = convert("oauth.yaml", &dir);
    let d = dir.display();
    has(&text, "onprem.sasl.mechanism = OAUTHBEARER");
    has(
        &text,
        "onprem.sasl.oauthbearer.token.endpoint.url = https://sso.example.com/realms/kafka/protocol/openid-connect/token",
    );
    has(
        &text,
        &format!(
            "onprem.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule \
             required clientId=\"mm2-client\" clientSecret=\"${{directory:{d}/mm2-oauth:clientSecret}}\" \
             scope=\"kafka\" ssl.truststore.location=\"{d}/sso-ca/ca.crt\" ssl.truststore.type=\"PEM\" \
             ssl.endpoint.identification.algorithm=\"\";"
        ),
    );
    has(&text, "onprem.sasl.login.connect.timeout.ms = 20000");
    has(&text, "cloud.security.protocol = SASL_SSL");
    has(&text, "cloud.sasl.mechanism = PLAIN");
    assert!(
        notes.contains("authentication.audience"),
        "the audience is not sent by Kafka's client: {notes}"
    );

    let ca = TestCa::new("onprem");
    secret(&dir, "onprem-cluster-ca-cert", "ca.crt", ca.pem());
    secret(&dir, "sso-ca", "ca.crt", TestCa::new("sso").pem());
    secret(&dir, "mm2-oauth", "clientSecret", "oauth-secret-value");
    secret(
        &dir,
        "cloud-credentials",
        "api-secret",
        "cloud-secret-value",
    );
    let cfg = StraitConfig::load(dir.join("oauth.yaml.properties")).unwrap();
    let flow = &cfg.flows[0];
    let source = cfg
        .client_config(flow, Side::Source, Role::Consumer)
        .unwrap();
    match source.security().sasl.as_deref() {
        Some(SaslConfig::OAuthBearer {
            token: TokenSource::Endpoint(endpoint),
            ..
        }) => {
            let c = endpoint.settings();
            assert_eq!(c.client_id, "mm2-client");
            assert_eq!(c.client_secret.expose(), "oauth-secret-value");
            assert_eq!(c.scope.as_deref(), Some("kafka"));
            assert!(c.tls.is_some());
        }
        other => panic!("{other:?}"),
    }
    let shown = format!("{cfg:?}");
    assert!(
        !shown.contains("oauth-secret-value") && !shown.contains("cloud-secret-value"),
        "a secret in Debug"
    );
}

#[test]
fn the_v1_layout_with_tls_patterns_and_scram() {
    let dir = scratch("v1-tls-scram");
    let (text, notes) = convert("v1-tls-scram.yaml", &dir);
    let d = dir.display();
    has(&text, "clusters = cluster-a, cluster-b");
    has(
        &text,
        "cluster-a.bootstrap.servers = cluster-a-kafka-bootstrap:9093",
    );
    has(&text, "cluster-a.security.protocol = SASL_SSL");
    has(&text, "cluster-a.ssl.truststore.type = PEM");
    has(
        &text,
        &format!(
            "cluster-a.ssl.truststore.certificates = ${{directory:{d}/cluster-a-cluster-ca-cert:*.crt}}"
        ),
    );
    has(&text, "cluster-a.sasl.mechanism = SCRAM-SHA-512");
    has(
        &text,
        &format!(
            "cluster-a.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule \
             required username=\"my-source-user\" password=\"${{directory:{d}/my-source-user:password}}\";"
        ),
    );
    has(&text, "cluster-b.security.protocol = SASL_SSL");
    has(
        &text,
        &format!(
            "cluster-b.ssl.truststore.certificates = ${{directory:{d}/cluster-b-cluster-ca-cert:*.crt}}"
        ),
    );
    has(&text, "cluster-b.ssl.enabled.protocols = TLSv1.3");
    has(
        &text,
        "# Kafka Connect worker setting, not used by strait: group.id = my-mirror-maker-2-group",
    );
    has(
        &text,
        "# Kafka Connect worker setting, not used by strait: config.storage.topic = my-mirror-maker-2-config",
    );
    has(&text, "cluster-a->cluster-b.enabled = true");
    has(&text, "cluster-a->cluster-b.topics = topic1|topic2|topic3");
    has(&text, "cluster-a->cluster-b.groups = group1|group2|group3");
    has(&text, "cluster-a->cluster-b.tasks.max = 2");
    has(
        &text,
        "cluster-a->cluster-b.sync.group.offsets.enabled = true",
    );
    has(
        &text,
        "cluster-a->cluster-b.emit.heartbeats.enabled = false",
    );
    assert!(!text.contains("emit.checkpoints.enabled"), "{text}");
    assert!(
        notes.contains(
            "spec.target.groupId, configStorageTopic, offsetStorageTopic, statusStorageTopic"
        ),
        "{notes}"
    );

    // Loads with every `*.crt` of the CA Secrets; a Secret without one is named.
    secret(&dir, "my-source-user", "password", "source-pass");
    secret(&dir, "my-target-user", "password", "target-pass");
    cluster_ca_secret(
        &dir,
        "cluster-a-cluster-ca-cert",
        TestCa::new("a").pem(),
        TestCa::new("a old").pem(),
    );
    std::fs::create_dir_all(dir.join("cluster-b-cluster-ca-cert")).unwrap();
    let properties = dir.join("v1-tls-scram.yaml.properties");
    let e = StraitConfig::load(&properties).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "no file in {d}/cluster-b-cluster-ca-cert matches `*.crt`"
        )),
        "{e}"
    );
    cluster_ca_secret(
        &dir,
        "cluster-b-cluster-ca-cert",
        TestCa::new("b").pem(),
        TestCa::new("b old").pem(),
    );
    let cfg = StraitConfig::load(&properties).unwrap();
    let flow = &cfg.flows[0];
    assert_eq!(flow.source.as_str(), "cluster-a");
    assert_eq!(flow.target.as_str(), "cluster-b");
    assert!(flow.topics.should_replicate_topic("topic2"));
    assert!(!flow.topics.should_replicate_topic("topic4"));
    for side in [Side::Source, Side::Target] {
        let client = cfg.client_config(flow, side, Role::Admin).unwrap();
        assert_eq!(client.security().protocol(), "SASL_SSL");
    }
    assert!(!format!("{cfg:?}").contains("source-pass"));

    // A reload reads the Secret again: a CA added since changes the cluster's settings, so
    // its flows restart with it (crates/strait/src/supervisor.rs compares them).
    secret(
        &dir,
        "cluster-a-cluster-ca-cert",
        "ca-2026-01-01.crt",
        TestCa::new("a next").pem(),
    );
    let reloaded = StraitConfig::load(&properties).unwrap();
    assert_ne!(reloaded.cluster("cluster-a"), cfg.cluster("cluster-a"));
    assert_eq!(reloaded.cluster("cluster-b"), cfg.cluster("cluster-b"));
}

#[test]
fn the_v1_layout_plain_two_sources_and_notes() {
    let dir = scratch("v1-plain");
    let (text, notes) = convert("v1-plain.yaml", &dir);
    has(&text, "clusters = cluster-a, cluster-c, cluster-b");
    has(
        &text,
        "# Kafka Connect worker setting, not used by strait: plugin.discovery = service_load",
    );
    has(
        &text,
        "cluster-a->cluster-b.offset-syncs.topic.location = target",
    );
    has(
        &text,
        "cluster-a->cluster-b.emit.heartbeats.enabled = false",
    );
    has(&text, "cluster-c->cluster-b.topics = audit.*");
    has(
        &text,
        "cluster-c->cluster-b.emit.checkpoints.enabled = false",
    );
    has(
        &text,
        "cluster-c->cluster-b.emit.heartbeats.enabled = false",
    );
    has(
        &text,
        "cluster-a.consumer.client.rack = ${env:STRAIT_CLIENT_RACK}",
    );
    has(
        &text,
        "cluster-c.consumer.client.rack = ${env:STRAIT_CLIENT_RACK}",
    );
    assert!(!text.contains("cluster-b.consumer.client.rack"), "{text}");
    assert!(!text.contains("config.providers = directory"), "{text}");
    for expected in [
        "spec.target.groupId",
        "spec.resources",
        "spec.template",
        "spec.version",
    ] {
        assert!(notes.contains(expected), "{expected} not in {notes}");
    }
    assert!(!notes.contains("not known to this converter"), "{notes}");
    std::env::set_var("STRAIT_CLIENT_RACK", "zone-a");
    let cfg = StraitConfig::load(dir.join("v1-plain.yaml.properties")).unwrap();
    let flows: Vec<String> = cfg
        .flows
        .iter()
        .map(|f| format!("{}->{}", f.source.as_str(), f.target.as_str()))
        .collect();
    assert_eq!(flows, ["cluster-a->cluster-b", "cluster-c->cluster-b"]);
}

#[test]
fn v1beta2_with_target_heartbeats_and_a_listed_source() {
    let dir = scratch("v1beta2-target");
    let (text, notes) = convert("v1beta2-target.yaml", &dir);
    let d = dir.display();
    has(
        &text,
        "clusters = my-source-cluster, my-legacy-source, my-cluster-target",
    );
    has(&text, "my-source-cluster.security.protocol = SSL");
    has(
        &text,
        &format!(
            "my-source-cluster.ssl.truststore.certificates = ${{directory:{d}/my-source-cluster-cluster-ca-cert:*.crt}}"
        ),
    );
    has(
        &text,
        &format!(
            "my-cluster-target.ssl.truststore.location = {d}/my-cluster-target-cluster-ca-cert/ca.crt"
        ),
    );
    has(
        &text,
        &format!("my-cluster-target.ssl.keystore.key = ${{directory:{d}/my-target-user:user.key}}"),
    );
    has(
        &text,
        "my-legacy-source.bootstrap.servers = my-legacy-source-kafka-bootstrap:9092",
    );
    // v1beta2 still has the heartbeat connector: present, heartbeats; absent, none.
    has(
        &text,
        "my-source-cluster->my-cluster-target.heartbeats.topic.replication.factor = 1",
    );
    assert!(
        !text.contains("my-source-cluster->my-cluster-target.emit.heartbeats.enabled"),
        "{text}"
    );
    has(
        &text,
        "my-legacy-source->my-cluster-target.emit.heartbeats.enabled = false",
    );
    has(
        &text,
        "my-legacy-source->my-cluster-target.topics = legacy.*",
    );
    assert!(notes.contains("spec.target.groupId"), "{notes}");

    let source_ca = TestCa::new("source");
    let target_ca = TestCa::new("target");
    let source_user = source_ca.client_cert("mm2");
    let target_user = target_ca.client_cert("mm2");
    cluster_ca_secret(
        &dir,
        "my-source-cluster-cluster-ca-cert",
        source_ca.pem(),
        TestCa::new("source old").pem(),
    );
    secret(
        &dir,
        "my-cluster-target-cluster-ca-cert",
        "ca.crt",
        target_ca.pem(),
    );
    secret(&dir, "my-source-user", "user.crt", &source_user.chain_pem);
    secret(&dir, "my-source-user", "user.key", &source_user.key_pem);
    secret(&dir, "my-target-user", "user.crt", &target_user.chain_pem);
    secret(&dir, "my-target-user", "user.key", &target_user.key_pem);
    let cfg = StraitConfig::load(dir.join("v1beta2-target.yaml.properties")).unwrap();
    assert_eq!(cfg.flows.len(), 2);
    let source = cfg
        .client_config(&cfg.flows[0], Side::Source, Role::Consumer)
        .unwrap();
    assert_eq!(source.security().protocol(), "SSL");
    assert!(source
        .security()
        .tls
        .as_ref()
        .unwrap()
        .has_client_certificate());
}

#[test]
fn a_pattern_in_the_older_layout_converts() {
    let dir = scratch("v1beta2-pattern");
    let file = dir.join("kmm2.yaml");
    std::fs::write(
        &file,
        "apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaMirrorMaker2\nmetadata:\n  name: p\n\
         spec:\n  connectCluster: b\n  clusters:\n  - alias: a\n    bootstrapServers: a:9093\n\
         \x20   tls:\n      trustedCertificates:\n      - secretName: a-cluster-ca-cert\n\
         \x20       pattern: \"*.crt\"\n      - secretName: corporate-root\n\
         \x20       certificate: root.pem\n  - alias: b\n    bootstrapServers: b:9092\n\
         \x20 mirrors:\n  - sourceCluster: a\n    targetCluster: b\n",
    )
    .unwrap();
    let out = dir.join("mm2.properties");
    let output = from_strimzi(&file, &dir, &out);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(&out).unwrap();
    let d = dir.display();
    has(
        &text,
        &format!(
            "a.ssl.truststore.certificates = ${{directory:{d}/a-cluster-ca-cert:*.crt}}\\n${{directory:{d}/corporate-root:root.pem}}"
        ),
    );
    cluster_ca_secret(
        &dir,
        "a-cluster-ca-cert",
        TestCa::new("a").pem(),
        TestCa::new("a old").pem(),
    );
    secret(
        &dir,
        "corporate-root",
        "root.pem",
        TestCa::new("root").pem(),
    );
    let cfg = StraitConfig::load(&out).unwrap();
    let client = cfg
        .client_config(&cfg.flows[0], Side::Source, Role::Consumer)
        .unwrap();
    assert_eq!(client.security().protocol(), "SSL");
}

#[test]
fn what_cannot_be_converted_is_refused_with_the_reason() {
    let dir = scratch("refused");
    let cases = [
        (
            "custom",
            "clusters:\n  - alias: a\n    bootstrapServers: a:9092\n    authentication:\n      type: custom\n  - alias: b\n    bootstrapServers: b:9092\nmirrors:\n- sourceCluster: a\n  targetCluster: b\n",
            "authentication type custom configures Java classes",
        ),
        (
            "pattern",
            "clusters:\n  - alias: a\n    bootstrapServers: a:9093\n    tls:\n      trustedCertificates:\n      - secretName: ca\n        pattern: \"{ca,root}.crt\"\n  - alias: b\n    bootstrapServers: b:9092\nmirrors:\n- sourceCluster: a\n  targetCluster: b\n",
            "strait matches `*` and `?` in a Secret's file names",
        ),
        (
            "unknown-cluster",
            "clusters:\n  - alias: a\n    bootstrapServers: a:9092\nmirrors:\n- sourceCluster: a\n  targetCluster: z\n",
            "spec.mirrors[0]: cluster `z` is not in spec.clusters",
        ),
        (
            "refresh-token",
            "clusters:\n  - alias: a\n    bootstrapServers: a:9092\n    authentication:\n      type: oauth\n      tokenEndpointUri: https://sso/token\n      clientId: c\n      refreshToken:\n        secretName: s\n        key: k\n  - alias: b\n    bootstrapServers: b:9092\nmirrors:\n- sourceCluster: a\n  targetCluster: b\n",
            "authentication.refreshToken",
        ),
    ];
    for (name, spec, expected) in cases {
        let file = dir.join(format!("{name}.yaml"));
        std::fs::write(
            &file,
            format!(
                "apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaMirrorMaker2\nmetadata:\n  name: {name}\nspec:\n  {}",
                spec.replace('\n', "\n  ")
            ),
        )
        .unwrap();
        let output = from_strimzi(&file, Path::new("/etc/strait/secrets"), &dir.join("out"));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{name}: converted");
        assert!(stderr.contains(expected), "{name}: {stderr}");
    }
    let target = "target:\n  alias: b\n  bootstrapServers: b:9092\n";
    let v1_cases = [
        (
            "v1-clusters",
            "kafka.strimzi.io/v1",
            "connectCluster: b\nclusters:\n- alias: a\n  bootstrapServers: a:9092\n- alias: b\n  bootstrapServers: b:9092\nmirrors:\n- sourceCluster: a\n  targetCluster: b\n".to_owned(),
            "spec.target: missing; kafka.strimzi.io/v1 names the target cluster in spec.target",
        ),
        (
            "v1-no-source",
            "kafka.strimzi.io/v1",
            format!("{target}mirrors:\n- sourceConnector: {{}}\n"),
            "spec.mirrors[0]: no source",
        ),
        (
            "v1-same-alias",
            "kafka.strimzi.io/v1",
            format!("{target}mirrors:\n- source:\n    alias: a\n    bootstrapServers: a:9092\n- source:\n    alias: a\n    bootstrapServers: a2:9092\n"),
            "spec.mirrors[1]: alias `a` is used twice",
        ),
        (
            "v1-source-is-target",
            "kafka.strimzi.io/v1",
            format!("{target}mirrors:\n- source:\n    alias: b\n    bootstrapServers: b:9092\n"),
            "spec.mirrors[0]: alias `b` is used twice",
        ),
        (
            "v1beta2-other-target",
            "kafka.strimzi.io/v1beta2",
            format!("{target}mirrors:\n- source:\n    alias: a\n    bootstrapServers: a:9092\n  targetCluster: z\n"),
            "targetCluster `z` is not the target cluster `b`",
        ),
        (
            "v1alpha1",
            "kafka.strimzi.io/v1alpha1",
            format!("{target}mirrors: []\n"),
            "this converter reads kafka.strimzi.io/v1 and kafka.strimzi.io/v1beta2",
        ),
    ];
    for (name, api, spec, expected) in v1_cases {
        let file = dir.join(format!("{name}.yaml"));
        std::fs::write(
            &file,
            format!(
                "apiVersion: {api}\nkind: KafkaMirrorMaker2\nmetadata:\n  name: {name}\nspec:\n  {}",
                spec.replace('\n', "\n  ")
            ),
        )
        .unwrap();
        let output = from_strimzi(&file, Path::new("/etc/strait/secrets"), &dir.join("out"));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{name}: converted");
        assert!(stderr.contains(expected), "{name}: {stderr}");
    }
    let file = dir.join("no-kmm2.yaml");
    std::fs::write(&file, "apiVersion: kafka.strimzi.io/v1beta2\nkind: Kafka\n").unwrap();
    let output = from_strimzi(&file, Path::new("/s"), &dir.join("out"));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no KafkaMirrorMaker2 resource"));
    std::fs::write(&file, "a: [unclosed\n").unwrap();
    let output = from_strimzi(&file, Path::new("/s"), &dir.join("out"));
    assert!(String::from_utf8_lossy(&output.stderr).contains("not YAML"));
}

/// A converted resource whose source is a real broker with TLS and SCRAM: the file loads with
/// the secrets from the "mounted" Secret directories, and its client connects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converted_resource_reaches_a_real_broker() {
    let ca = TestCa::new("strimzi source CA");
    let broker = SecureBroker::start(SecureBrokerOptions {
        tls: Some(ca.server_cert(&["127.0.0.1"])),
        users: vec![("mm2-user".into(), "s3cret".into(), Scram::Sha512)],
        ..SecureBrokerOptions::default()
    });
    let dir = scratch("live");
    let resource = std::fs::read_to_string(fixture("tls-scram.yaml"))
        .unwrap()
        .replace("dc1-kafka-bootstrap:9093", &broker.bootstrap);
    std::fs::write(dir.join("kmm2.yaml"), resource).unwrap();
    secret(&dir, "dc1-cluster-ca-cert", "ca.crt", ca.pem());
    secret(&dir, "mm2-user-dc1", "password", "s3cret");
    secret(
        &dir,
        "dc2-cluster-ca-cert",
        "ca.crt",
        TestCa::new("dc2").pem(),
    );
    secret(&dir, "mm2-user-dc2", "password", "unused");
    let out = dir.join("mm2.properties");
    let output = from_strimzi(&dir.join("kmm2.yaml"), &dir, &out);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let cfg = StraitConfig::load(&out).unwrap();
    let mut config = cfg
        .client_config(&cfg.flows[0], Side::Source, Role::Admin)
        .unwrap();
    config.operation_timeout = std::time::Duration::from_secs(20);
    let client = Client::connect(config)
        .await
        .expect("SCRAM over TLS from the converted file");
    client.refresh_metadata().await.unwrap();
}

/// Strimzi's v1 layout converted, its source a real broker with TLS and SCRAM whose CA is the
/// Secret's older `*.crt` file (a CA being renewed): every file the pattern matches is trusted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converted_v1_resource_reaches_a_real_broker() {
    let ca = TestCa::new("strimzi v1 source CA");
    let broker = SecureBroker::start(SecureBrokerOptions {
        tls: Some(ca.server_cert(&["127.0.0.1"])),
        users: vec![("my-source-user".into(), "s3cret".into(), Scram::Sha512)],
        ..SecureBrokerOptions::default()
    });
    let dir = scratch("live-v1");
    let resource = std::fs::read_to_string(fixture("v1-tls-scram.yaml"))
        .unwrap()
        .replace("cluster-a-kafka-bootstrap:9093", &broker.bootstrap);
    std::fs::write(dir.join("kmm2.yaml"), resource).unwrap();
    cluster_ca_secret(
        &dir,
        "cluster-a-cluster-ca-cert",
        TestCa::new("renewed CA").pem(),
        ca.pem(),
    );
    secret(&dir, "my-source-user", "password", "s3cret");
    cluster_ca_secret(
        &dir,
        "cluster-b-cluster-ca-cert",
        TestCa::new("b").pem(),
        TestCa::new("b old").pem(),
    );
    secret(&dir, "my-target-user", "password", "unused");
    let out = dir.join("mm2.properties");
    let output = from_strimzi(&dir.join("kmm2.yaml"), &dir, &out);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let cfg = StraitConfig::load(&out).unwrap();
    let mut config = cfg
        .client_config(&cfg.flows[0], Side::Source, Role::Admin)
        .unwrap();
    config.operation_timeout = std::time::Duration::from_secs(20);
    let client = Client::connect(config)
        .await
        .expect("SCRAM over TLS from the converted v1 file, the CA from the pattern's files");
    client.refresh_metadata().await.unwrap();
}

/// A resource that converts into a file `strait check` refuses (here an SMT in the connector's
/// config, which strait does not run) fails with the refusal, and with a secret that is not
/// mounted where the conversion runs nothing is refused: it is read at run time. The file is
/// still written, for the operator to read and correct.
#[test]
fn a_resource_whose_file_strait_refuses_fails() {
    let dir = scratch("check-refuses");
    let resource = dir.join("smt.yaml");
    std::fs::write(
        &resource,
        "apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaMirrorMaker2\nmetadata:\n  name: smt\n\
         spec:\n  connectCluster: b\n  clusters:\n  - alias: a\n    bootstrapServers: a:9093\n\
         \x20   tls:\n      trustedCertificates:\n      - secretName: a-ca\n        certificate: ca.crt\n\
         \x20 - alias: b\n    bootstrapServers: b:9092\n  mirrors:\n  - sourceCluster: a\n\
         \x20   targetCluster: b\n    sourceConnector:\n      config:\n\
         \x20       transforms: route\n        transforms.route.type: org.apache.kafka.connect.transforms.RegexRouter\n",
    )
    .unwrap();
    let out = dir.join("smt.properties");
    let output = from_strimzi(&resource, Path::new("/nonexistent/strait-secrets"), &out);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("a->b.transforms"), "{stderr}");
    assert!(stderr.contains("strait check"), "{stderr}");
    assert!(
        !stderr.contains("ssl.truststore"),
        "a secret not mounted here was refused: {stderr}"
    );
    assert!(out.exists(), "the file was not written");

    // The same resource without the SMT converts, its secret unread.
    let text = std::fs::read_to_string(&resource).unwrap();
    let plain = dir.join("plain.yaml");
    std::fs::write(&plain, text.split("    sourceConnector:").next().unwrap()).unwrap();
    let output = from_strimzi(&plain, Path::new("/nonexistent/strait-secrets"), &out);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A MirrorMaker 1 resource is named as such, with what to do, not "no KafkaMirrorMaker2".
#[test]
fn a_mirrormaker_1_resource_is_named() {
    let dir = scratch("mm1");
    let resource = dir.join("mm1.yaml");
    std::fs::write(
        &resource,
        "apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaMirrorMaker\nmetadata:\n  name: old\n\
         spec:\n  replicas: 1\n  consumer:\n    bootstrapServers: a:9092\n    groupId: g\n\
         \x20 producer:\n    bootstrapServers: b:9092\n  include: \".*\"\n",
    )
    .unwrap();
    let output = from_strimzi(&resource, &dir, &dir.join("out"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("MirrorMaker 1"), "{stderr}");
    assert!(stderr.contains("KafkaMirrorMaker2"), "{stderr}");
    assert!(!stderr.contains("no KafkaMirrorMaker2"), "{stderr}");
}
