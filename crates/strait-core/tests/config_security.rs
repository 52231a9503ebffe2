//! Secured clusters from MM2 properties: `StraitConfig::client_config` builds each client's
//! TLS and SASL from `security.protocol`, `ssl.*`, `sasl.*` as MM2 resolves them per cluster and
//! role, with secrets from config providers, and the clients connect to Apache Kafka
//! (`SecureBroker`: TLS, SCRAM and PLAIN; a listener taking OAUTHBEARER with Kafka's unsecured
//! validator). Broken settings stop start-up with a message naming the cluster and key; no
//! secret ever shows in a message or in `Debug`.

#![allow(unreachable_pub, dead_code, missing_docs)]

#[path = "../../strait-kafka/tests/secure/mod.rs"]
mod secure;

use std::path::{Path, PathBuf};
use std::time::Duration;

use strait_core::config::{ConfigError, Role, Side, StraitConfig};
use strait_kafka::admin::NewTopic;
use strait_kafka::sasl::{GssapiConfig, SaslConfig, ScramHash, TokenSource};
use strait_kafka::{Client, ClientConfig, Error};
use strait_testkit::{
    java_keystore, java_truststore, GssapiListener, Kdc, Scram, SecureBroker, SecureBrokerOptions,
    TestCa,
};

const ALICE: &str = "alice-secret-256";
const BOB: &str = "bob-secret-512";

fn dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "strait-config-security-{name}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn parse(text: &str) -> StraitConfig {
    StraitConfig::parse(text, "mm2.properties").unwrap_or_else(|e| panic!("{e}"))
}

/// A config with clusters A (secured by `a_lines`) and B (plain) and the flow A->B.
fn config(a: &str, b: &str, a_lines: &str) -> StraitConfig {
    parse(&format!(
        "clusters = A, B\n\
         A.bootstrap.servers = {a}\n\
         B.bootstrap.servers = {b}\n\
         A->B.enabled = true\n\
         {a_lines}\n"
    ))
}

fn client_config(cfg: &StraitConfig, role: Role) -> Result<ClientConfig, ConfigError> {
    cfg.client_config(&cfg.flows[0], Side::Source, role)
}

fn short(mut c: ClientConfig) -> ClientConfig {
    c.operation_timeout = Duration::from_secs(10);
    c.connection.connect_timeout = Duration::from_secs(5);
    c
}

/// The message of a config that `client_config` refuses; checks it names cluster A and `key`
/// (as the file sets it, `A.<key>`, or `key` when the file does not).
fn refused(cfg: &StraitConfig, key: &str) -> String {
    let e = client_config(cfg, Role::Admin).expect_err("settings must be refused");
    let shown = e.to_string();
    let named = e.key.as_deref().map(|k| k.strip_prefix("A.").unwrap_or(k));
    assert_eq!(named, Some(key), "{shown}");
    assert!(shown.contains("cluster `A` (admin client)"), "{shown}");
    shown
}

fn users() -> Vec<(String, String, Scram)> {
    vec![
        ("alice".into(), ALICE.into(), Scram::Sha256),
        ("bob".into(), BOB.into(), Scram::Sha512),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_ssl_per_role_with_secrets_from_providers_against_a_real_broker() {
    let ca = TestCa::new("strait test CA");
    let a = SecureBroker::start(SecureBrokerOptions {
        tls: Some(ca.server_cert(&["127.0.0.1"])),
        users: users(),
        ..SecureBrokerOptions::default()
    });
    let b = SecureBroker::start(SecureBrokerOptions::default());
    let d = dir("providers");
    std::fs::write(d.join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(
        d.join("secrets.properties"),
        format!("bob.password = {BOB}\n"),
    )
    .unwrap();
    std::env::set_var("STRAIT_TEST_ALICE_PASSWORD", ALICE);
    let d = d.display();
    // The cluster's SASL settings for every client, the consumer's own above them (MM2's
    // `A.consumer.*`); the passwords come from a file and from the environment.
    let cfg = config(
        &a.bootstrap,
        &b.bootstrap,
        &format!(
            "A.security.protocol = SASL_SSL\n\
             A.ssl.truststore.location = {d}/ca.pem\n\
             A.sasl.mechanism = SCRAM-SHA-512\n\
             A.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required \\\n\
             \x20   username=\"bob\" \\\n\
             \x20   password=\"${{file:{d}/secrets.properties:bob.password}}\";\n\
             A.consumer.sasl.mechanism = SCRAM-SHA-256\n\
             A.consumer.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule \
             required username='alice' password=\"${{env:STRAIT_TEST_ALICE_PASSWORD}}\" ;\n"
        ),
    );
    for shown in [format!("{cfg:?}"), format!("{:?}", cfg.clusters)] {
        assert!(
            !shown.contains(BOB) && !shown.contains(ALICE),
            "a secret in Debug"
        );
    }

    let admin = client_config(&cfg, Role::Admin).unwrap();
    let consumer = client_config(&cfg, Role::Consumer).unwrap();
    assert_eq!(admin.bootstrap, vec![a.bootstrap.clone()]);
    assert_eq!(admin.security().protocol(), "SASL_SSL");
    let sasl = |c: &ClientConfig| c.security().sasl.clone().expect("SASL");
    assert_eq!(sasl(&admin).mechanism(), "SCRAM-SHA-512");
    assert_eq!(sasl(&admin).username(), Some("bob"));
    assert_eq!(sasl(&consumer).mechanism(), "SCRAM-SHA-256");
    assert_eq!(sasl(&consumer).username(), Some("alice"));
    for shown in [format!("{admin:?}"), format!("{consumer:?}")] {
        assert!(
            !shown.contains(BOB) && !shown.contains(ALICE),
            "a secret in Debug: {shown}"
        );
    }

    // Both clients really authenticate, each as its own user.
    let admin = Client::connect(short(admin))
        .await
        .expect("admin client (bob)");
    admin
        .create_topic(NewTopic::new("secured-orders", 1))
        .await
        .unwrap();
    let consumer = Client::connect(short(consumer))
        .await
        .expect("consumer client (alice)");
    let metadata = consumer.refresh_metadata().await.unwrap();
    assert!(metadata.topics.contains_key("secured-orders"));
    // B is plain.
    let target = cfg
        .client_config(&cfg.flows[0], Side::Target, Role::Producer)
        .unwrap();
    assert_eq!(target.security().protocol(), "PLAINTEXT");
    Client::connect(short(target)).await.expect("plain target");
    std::fs::remove_dir_all(d.to_string()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_from_a_real_broker_name_the_cluster_from_the_config() {
    let a = SecureBroker::start(SecureBrokerOptions {
        users: users(),
        ..SecureBrokerOptions::default()
    });
    let wrong = config(
        &a.bootstrap,
        "b:9092",
        "A.security.protocol = SASL_PLAINTEXT\n\
         A.sasl.mechanism = SCRAM-SHA-256\n\
         A.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required \
         username=alice password=not-the-password;\n",
    );
    let err = Client::connect(short(client_config(&wrong, Role::Admin).unwrap()))
        .await
        .unwrap_err();
    let shown = err.to_string();
    assert!(matches!(err, Error::Authentication { .. }), "{shown}");
    assert!(
        shown.starts_with(&format!(
            "cluster `A`: SASL SCRAM-SHA-256 authentication with broker {}",
            a.bootstrap
        )),
        "{shown}"
    );
    assert!(shown.contains("wrong user name or password"), "{shown}");
    assert!(!shown.contains("not-the-password"), "{shown}");

    // PLAIN: the right password connects, a wrong one is refused in Kafka's words.
    let plain = |password: &str| {
        config(
            &a.bootstrap,
            "b:9092",
            &format!(
                "A.security.protocol = SASL_PLAINTEXT\n\
                 A.sasl.mechanism = PLAIN\n\
                 A.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule \
                 required username=alice password=\"{password}\";\n"
            ),
        )
    };
    let client = Client::connect(short(
        client_config(&plain("alice-secret-256"), Role::Admin).unwrap(),
    ))
    .await
    .expect("PLAIN");
    client.refresh_metadata().await.unwrap();
    let err = Client::connect(short(
        client_config(&plain("hunter2-guess"), Role::Admin).unwrap(),
    ))
    .await
    .unwrap_err();
    let shown = err.to_string();
    assert!(
        shown.starts_with(&format!(
            "cluster `A`: SASL PLAIN authentication with broker {}",
            a.bootstrap
        )),
        "{shown}"
    );
    assert!(
        shown.contains("broker says \"Authentication failed: Invalid username or password\""),
        "{shown}"
    );
    assert!(!shown.contains("hunter2-guess"), "{shown}");

    // A mechanism the broker does not enable.
    let oauth = config(
        &a.bootstrap,
        "b:9092",
        "A.security.protocol = SASL_PLAINTEXT\n\
         A.sasl.mechanism = OAUTHBEARER\n\
         A.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule \
         required unsecuredLoginStringClaim_sub=\"mirror\";\n",
    );
    let err = Client::connect(short(client_config(&oauth, Role::Admin).unwrap()))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("OAUTHBEARER is not enabled on the broker; it enables "),
        "{err}"
    );
}

fn pkcs12_truststore(ca: &TestCa, password: &str) -> Vec<u8> {
    let mut store = p12_keystore::KeyStore::new();
    store.add_entry(
        "ca",
        p12_keystore::KeyStoreEntry::Certificate(
            p12_keystore::Certificate::from_der(ca.der()).unwrap(),
        ),
    );
    store.writer(password).write().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssl_with_a_pkcs12_truststore_and_hostname_verification() {
    let ca = TestCa::new("strait test CA");
    // The broker's certificate names another host than the one connected to.
    let a = SecureBroker::start(SecureBrokerOptions {
        tls: Some(ca.server_cert(&["kafka.internal.example"])),
        ..SecureBrokerOptions::default()
    });
    let d = dir("pkcs12");
    std::fs::write(d.join("truststore.p12"), pkcs12_truststore(&ca, "changeit")).unwrap();
    std::fs::write(d.join("store.password"), "changeit").unwrap();
    let lines = format!(
        "A.security.protocol = SSL\n\
         A.ssl.truststore.type = PKCS12\n\
         A.ssl.truststore.location = {0}/truststore.p12\n\
         A.ssl.truststore.password = ${{directory:{0}:store.password}}\n",
        d.display()
    );
    let strict = config(&a.bootstrap, "b:9092", &lines);
    let err = Client::connect(short(client_config(&strict, Role::Admin).unwrap()))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Tls { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("not valid for `127.0.0.1` (it is for: kafka.internal.example)"),
        "{err}"
    );

    let lenient = config(
        &a.bootstrap,
        "b:9092",
        &format!("{lines}A.ssl.endpoint.identification.algorithm =\n"),
    );
    let c = client_config(&lenient, Role::Admin).unwrap();
    assert!(!c.security().tls.as_ref().unwrap().verifies_hostname());
    let client = Client::connect(short(c))
        .await
        .expect("SSL without hostname verification");
    client
        .create_topic(NewTopic::new("over-tls", 1))
        .await
        .unwrap();

    // The wrong truststore password.
    std::fs::write(d.join("store.password"), "wrong").unwrap();
    let cfg = config(&a.bootstrap, "b:9092", &lines);
    let shown = refused(&cfg, "ssl.truststore.location");
    assert!(shown.contains("truststore.p12: wrong password"), "{shown}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// Mutual TLS from JKS stores made by `keytool`, keys exactly as an MM2 file has them, the
/// passwords from a `${file:...}` config provider, against a broker that requires client
/// certificates; then each way those settings go wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jks_stores_with_passwords_from_a_config_provider_make_a_mutual_tls_client() {
    const STORE: &str = "keystore-secret";
    const KEY: &str = "key-secret";
    const TRUST: &str = "truststore-secret";
    let ca = TestCa::new("strait test CA");
    let a = SecureBroker::start(SecureBrokerOptions {
        tls: Some(ca.server_cert(&["127.0.0.1"])),
        client_ca_pem: Some(ca.pem().to_owned()),
        ..SecureBrokerOptions::default()
    });
    let d = dir("jks");
    let cert = ca.client_cert("strait-mirror");
    java_keystore(
        &d,
        "client.keystore.jks",
        "JKS",
        &cert,
        "strait",
        STORE,
        KEY,
    );
    java_truststore(
        &d,
        "client.truststore.jks",
        "JKS",
        &[("ca", ca.der())],
        TRUST,
    );
    let secrets = d.join("secrets.properties");
    let write_secrets = |key_password: &str| {
        std::fs::write(
            &secrets,
            format!(
                "keystore.password = {STORE}\nkey.password = {key_password}\n\
                 truststore.password = {TRUST}\n"
            ),
        )
        .unwrap();
    };
    write_secrets(KEY);
    let secret = |name: &str| format!("${{file:{}:{name}}}", secrets.display());
    let stores = |keystore_type: &str| {
        format!(
            "config.providers = file\n\
             config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider\n\
             A.security.protocol = SSL\n\
             {keystore_type}\
             A.ssl.keystore.location = {0}/client.keystore.jks\n\
             A.ssl.keystore.password = {1}\n\
             A.ssl.key.password = {2}\n\
             A.ssl.truststore.type = JKS\n\
             A.ssl.truststore.location = {0}/client.truststore.jks\n\
             A.ssl.truststore.password = {3}\n",
            d.display(),
            secret("keystore.password"),
            secret("key.password"),
            secret("truststore.password"),
        )
    };

    // With ssl.keystore.type = JKS, and with no type (Kafka's default, JKS): the file decides.
    for keystore_type in ["A.ssl.keystore.type = JKS\n", ""] {
        let cfg = config(&a.bootstrap, "b:9092", &stores(keystore_type));
        for shown in [format!("{cfg:?}"), format!("{:?}", cfg.clusters)] {
            assert!(
                !shown.contains(STORE) && !shown.contains(KEY) && !shown.contains(TRUST),
                "a secret in Debug"
            );
        }
        let c = client_config(&cfg, Role::Admin).unwrap();
        assert!(c.security().tls.as_ref().unwrap().has_client_certificate());
        let client = Client::connect(short(c))
            .await
            .expect("mutual TLS with JKS stores");
        let topic = format!("over-jks{}", keystore_type.len());
        client.create_topic(NewTopic::new(&topic, 1)).await.unwrap();
    }

    // A wrong key password: the key, the file and the alias named, the password not.
    write_secrets("not-the-key-secret");
    let shown = refused(
        &config(&a.bootstrap, "b:9092", &stores("")),
        "ssl.keystore.location",
    );
    assert!(
        shown.contains(&format!(
            "{}/client.keystore.jks: cannot recover the private key `strait`: wrong password \
             (ssl.key.password)",
            d.display()
        )),
        "{shown}"
    );
    assert!(!shown.contains("not-the-key-secret"), "{shown}");
    write_secrets(KEY);
    // A wrong store password: the integrity check.
    let lines = stores("").replace(&secret("truststore.password"), "wrong-trust-secret");
    let shown = refused(
        &config(&a.bootstrap, "b:9092", &lines),
        "ssl.truststore.location",
    );
    assert!(
        shown
            .contains("client.truststore.jks: wrong password (the store's integrity check failed)"),
        "{shown}"
    );
    assert!(shown.contains("(ssl.truststore.password)"), "{shown}");
    assert!(!shown.contains("wrong-trust-secret"), "{shown}");

    // A JCEKS key store: refused, with the keytool command for this very file.
    let jceks = java_keystore(&d, "client.jceks", "JCEKS", &cert, "strait", STORE, STORE);
    let lines = stores("A.ssl.keystore.type = JCEKS\n")
        .replace("client.keystore.jks", "client.jceks")
        .replace(
            &format!("A.ssl.key.password = {}\n", secret("key.password")),
            "",
        );
    let shown = refused(
        &config(&a.bootstrap, "b:9092", &lines),
        "ssl.keystore.location",
    );
    assert!(
        shown.contains(&format!(
            "keytool -importkeystore -srckeystore {0} -srcstoretype JCEKS -destkeystore {0}.p12",
            jceks.display()
        )),
        "{shown}"
    );
    assert!(!shown.contains(STORE), "{shown}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// Mutual TLS from PEM in the config, against a broker that requires client certificates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pem_in_config_and_encrypted_keys_make_a_mutual_tls_client() {
    let ca = TestCa::new("strait test CA");
    let a = SecureBroker::start(SecureBrokerOptions {
        tls: Some(ca.server_cert(&["127.0.0.1"])),
        client_ca_pem: Some(ca.pem().to_owned()),
        ..SecureBrokerOptions::default()
    });
    let client = ca.client_cert("mirror");
    // PEM in the properties file, folded as people write it: continuation lines, so the value
    // holds spaces where the line breaks were.
    let fold = |pem: &str| pem.trim().lines().collect::<Vec<_>>().join(" \\\n    ");
    let lines = format!(
        "A.security.protocol = SSL\n\
         A.ssl.truststore.certificates = {}\n\
         A.ssl.keystore.certificate.chain = {}\n\
         A.ssl.keystore.key = {}\n",
        fold(ca.pem()),
        fold(&client.chain_pem),
        fold(&client.key_pem),
    );
    let cfg = config(&a.bootstrap, "b:9092", &lines);
    let c = client_config(&cfg, Role::Producer).unwrap();
    let tls = c.security().tls.clone().unwrap();
    assert!(tls.has_client_certificate());
    assert!(tls.verifies_hostname());
    assert!(
        !format!("{cfg:?}{c:?}").contains(&client.key_pem[40..80]),
        "a key in Debug"
    );
    let producer = Client::connect(short(c))
        .await
        .expect("mutual TLS with PEM from the config");
    producer
        .create_topic(NewTopic::new("mtls-orders", 1))
        .await
        .unwrap();

    // Without the key pair, the broker's refusal says what is missing.
    let no_identity = config(
        &a.bootstrap,
        "b:9092",
        &format!(
            "A.security.protocol = SSL\nA.ssl.truststore.certificates = {}\n",
            fold(ca.pem())
        ),
    );
    let err = Client::connect(short(client_config(&no_identity, Role::Admin).unwrap()))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Tls { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("requires a client certificate (mutual TLS) and none is set"),
        "{err}"
    );

    // The key encrypted (PKCS#8, as `openssl pkcs8 -topk8 -v2 aes-256-cbc` writes it), opened
    // with ssl.key.password.
    let encrypted = {
        use pkcs8::der::EncodePem;
        let info = pkcs8::PrivateKeyInfo::try_from(client.key_der.as_slice()).unwrap();
        let params =
            pkcs8::pkcs5::pbes2::Parameters::pbkdf2_sha256_aes256cbc(2048, &[1; 16], &[2; 16])
                .unwrap();
        let doc = info.encrypt_with_params(params, "k3y-pass").unwrap();
        pkcs8::EncryptedPrivateKeyInfo::try_from(doc.as_bytes())
            .unwrap()
            .to_pem(pkcs8::LineEnding::LF)
            .unwrap()
    };
    let with_password = |password: &str| {
        config(
            &a.bootstrap,
            "b:9092",
            &format!(
                "A.security.protocol = SSL\n\
                 A.ssl.truststore.certificates = {}\n\
                 A.ssl.keystore.certificate.chain = {}\n\
                 A.ssl.keystore.key = {}\n\
                 A.ssl.key.password = {password}\n",
                fold(ca.pem()),
                fold(&client.chain_pem),
                fold(&encrypted),
            ),
        )
    };
    let c = client_config(&with_password("k3y-pass"), Role::Consumer).unwrap();
    assert!(c.security().tls.as_ref().unwrap().has_client_certificate());
    let consumer = Client::connect(short(c))
        .await
        .expect("mutual TLS with an encrypted key");
    let metadata = consumer.refresh_metadata().await.unwrap();
    assert!(metadata.topics.contains_key("mtls-orders"));
    let shown = refused(&with_password("not-it"), "ssl.keystore.key");
    assert!(
        shown.contains("wrong key password (ssl.key.password)"),
        "{shown}"
    );
    assert!(!shown.contains("not-it"), "{shown}");

    // Only one half of the pair.
    let half = config(
        "a:9093",
        "b:9092",
        &format!(
            "A.security.protocol = SSL\nA.ssl.truststore.certificates = {}\n\
             A.ssl.keystore.key = {}\n",
            fold(ca.pem()),
            fold(&client.key_pem)
        ),
    );
    let shown = refused(&half, "ssl.keystore.certificate.chain");
    assert!(shown.contains("its certificate chain is not"), "{shown}");
}

#[test]
fn stores_and_settings_that_cannot_be_used_are_named() {
    let d = dir("refusals");
    std::fs::write(
        d.join("truststore.jks"),
        [0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2],
    )
    .unwrap();
    let jks = d.join("truststore.jks");
    let shown = refused(
        &config("a:9093", "b:9092", &format!(
            "A.security.protocol = SSL\nA.ssl.truststore.location = {}\nA.ssl.truststore.password = changeit\n",
            jks.display()
        )),
        "ssl.truststore.location",
    );
    assert!(
        shown.contains(&format!(
            "{}: the JKS file is damaged or truncated",
            jks.display()
        )),
        "{shown}"
    );
    assert!(!shown.contains("changeit"), "{shown}");

    let shown = refused(
        &config(
            "a:9093",
            "b:9092",
            "A.security.protocol = SSL\nA.ssl.truststore.location = /nonexistent/ca.pem\n",
        ),
        "ssl.truststore.location",
    );
    assert!(shown.contains("cannot read /nonexistent/ca.pem"), "{shown}");

    let shown = refused(
        &config(
            "a:9093",
            "b:9092",
            "A.security.protocol = SSL\nA.ssl.endpoint.identification.algorithm = dns\n",
        ),
        "ssl.endpoint.identification.algorithm",
    );
    assert!(shown.contains("expected `https`"), "{shown}");

    let shown = refused(
        &config(
            "a:9093",
            "b:9092",
            "A.security.protocol = SSL\nA.ssl.enabled.protocols = TLSv1.1\n",
        ),
        "ssl.enabled.protocols",
    );
    assert!(shown.contains("TLSv1.2 and TLSv1.3"), "{shown}");

    let sasl = |extra: &str| {
        config(
            "a:9092",
            "b:9092",
            &format!("A.security.protocol = SASL_PLAINTEXT\n{extra}"),
        )
    };
    let shown = refused(&sasl(""), "sasl.jaas.config");
    assert!(shown.contains("needs sasl.jaas.config"), "{shown}");
    let jaas = "A.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username=u password=\"hunter2\";\n";
    // No sasl.mechanism: Kafka's default GSSAPI, which this PLAIN line cannot be for.
    let shown = refused(&sasl(jaas), "sasl.mechanism");
    assert!(
        shown.contains("sasl.mechanism is not set, so it is Kafka's default GSSAPI"),
        "{shown}"
    );
    assert!(!shown.contains("hunter2"), "{shown}");
    // AWS_MSK_IAM is supported (msk_iam_settings), with Amazon's login module only.
    let shown = refused(
        &sasl(&format!("A.sasl.mechanism = AWS_MSK_IAM\n{jaas}")),
        "sasl.jaas.config",
    );
    assert!(
        shown.contains("needs software.amazon.msk.auth.iam.IAMLoginModule"),
        "{shown}"
    );
    assert!(!shown.contains("hunter2"), "{shown}");
    let shown = refused(
        &sasl(&format!("A.sasl.mechanism = DIGEST-MD5\n{jaas}")),
        "sasl.mechanism",
    );
    assert!(shown.contains("`DIGEST-MD5` is not supported"), "{shown}");
    let shown = refused(
        &sasl("A.sasl.mechanism = PLAIN\nA.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username=u password=\"hunter2\" oops;\n"),
        "sasl.jaas.config",
    );
    assert!(
        shown.contains("sasl.jaas.config, at character 100: expected `=` after an option name"),
        "{shown}"
    );
    assert!(!shown.contains("hunter2"), "{shown}");
    let shown = refused(
        &sasl("A.sasl.mechanism = SCRAM-SHA-256\nA.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required username=u;\n"),
        "sasl.jaas.config",
    );
    assert!(shown.contains("needs the option `password`"), "{shown}");
    // The client credentials grant: what it needs, and what strait does not do.
    let handler = "A.sasl.login.callback.handler.class = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n";
    let module = "A.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required";
    let shown = refused(
        &sasl(&format!(
            "A.sasl.mechanism = OAUTHBEARER\n{handler}\
             A.sasl.oauthbearer.token.endpoint.url = https://idp.example/token\n\
             {module} clientId=x;\n"
        )),
        "sasl.jaas.config",
    );
    assert!(
        shown.contains("needs a client secret: sasl.oauthbearer.client.credentials.client.secret or the JAAS option `clientSecret`"),
        "{shown}"
    );
    let shown = refused(
        &sasl(&format!(
            "A.sasl.mechanism = OAUTHBEARER\n{handler}\
             A.sasl.oauthbearer.token.endpoint.url = ldap://idp.example/token\n\
             {module} clientId=x clientSecret=\"hunter2\";\n"
        )),
        "sasl.oauthbearer.token.endpoint.url",
    );
    assert!(shown.contains("neither https:// nor http://"), "{shown}");
    assert!(!shown.contains("hunter2"), "{shown}");
    let shown = refused(
        &sasl(&format!(
            "A.sasl.mechanism = OAUTHBEARER\n{handler}\
             A.sasl.oauthbearer.token.endpoint.url = https://idp.example/token\n\
             A.sasl.oauthbearer.jwt.retriever.class = org.apache.kafka.common.security.oauthbearer.JwtBearerJwtRetriever\n\
             {module};\n"
        )),
        "sasl.oauthbearer.jwt.retriever.class",
    );
    assert!(shown.contains("JWT bearer grant"), "{shown}");
    let shown = refused(
        &sasl(&format!(
            "A.sasl.mechanism = OAUTHBEARER\n{handler}\
             A.sasl.oauthbearer.token.endpoint.url = https://idp.example/token\n\
             A.sasl.login.refresh.window.factor = 0.2\n\
             {module} clientId=x clientSecret=y;\n"
        )),
        "sasl.login.refresh.window.factor",
    );
    assert!(shown.contains("expected a number from 0.5 to 1"), "{shown}");
    let shown = refused(
        &sasl(&format!(
            "A.sasl.mechanism = OAUTHBEARER\n{handler}\
             A.sasl.oauthbearer.token.endpoint.url = https://idp.example/token\n\
             {module} clientId=x clientSecret=y ssl.truststore.location=\"/nonexistent/ca.pem\";\n"
        )),
        "sasl.jaas.config",
    );
    assert!(
        shown.contains("the token endpoint's truststore /nonexistent/ca.pem"),
        "{shown}"
    );
    let shown = refused(
        &sasl("A.sasl.mechanism = OAUTHBEARER\n\
               A.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;\n"),
        "sasl.jaas.config",
    );
    assert!(shown.contains("OAUTHBEARER has no token"), "{shown}");
    // SASL settings on a PLAINTEXT cluster are ignored, as Kafka ignores them.
    let plain = config("a:9092", "b:9092", "A.sasl.mechanism = GSSAPI\n");
    assert!(client_config(&plain, Role::Admin)
        .unwrap()
        .security()
        .sasl
        .is_none());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn plain_scram_and_oauthbearer_settings() {
    let sasl_of = |lines: &str| -> SaslConfig {
        let cfg = config(
            "a:9092",
            "b:9092",
            &format!("A.security.protocol = SASL_PLAINTEXT\n{lines}"),
        );
        let c = client_config(&cfg, Role::Consumer).unwrap();
        let sasl = c.security().sasl.clone().unwrap();
        (*sasl).clone()
    };
    match sasl_of(
        "A.sasl.mechanism = PLAIN\n\
         A.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required \
         username=\"ali ce\" password='p;a=s\\\\'s';\n",
    ) {
        SaslConfig::Plain { username, password } => {
            assert_eq!(username, "ali ce");
            assert_eq!(password.expose(), "p;a=s's");
        }
        other => panic!("{other:?}"),
    }
    match sasl_of(
        "A.sasl.mechanism = SCRAM-SHA-512\n\
         A.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required \
         username=tok1 password=hmac tokenauth=true;\n",
    ) {
        SaslConfig::Scram {
            hash, token_auth, ..
        } => {
            assert_eq!(hash, ScramHash::Sha512);
            assert!(token_auth);
        }
        other => panic!("{other:?}"),
    }
    std::env::set_var("STRAIT_TEST_OAUTH_TOKEN", "eyJ.from-env.");
    match sasl_of(
        "A.sasl.mechanism = OAUTHBEARER\n\
         A.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule \
         required strait.token=\"${env:STRAIT_TEST_OAUTH_TOKEN}\" extension_traceId=abc;\n",
    ) {
        SaslConfig::OAuthBearer {
            token: TokenSource::Static(token),
            extensions,
        } => {
            assert_eq!(token.expose(), "eyJ.from-env.");
            assert_eq!(extensions, vec![("traceId".to_owned(), "abc".to_owned())]);
        }
        other => panic!("{other:?}"),
    }
    match sasl_of(
        "A.sasl.mechanism = OAUTHBEARER\n\
         A.sasl.login.callback.handler.class = org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler\n\
         A.sasl.oauthbearer.token.endpoint.url = file:///run/secrets/kafka-token\n\
         A.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;\n",
    ) {
        SaslConfig::OAuthBearer {
            token: TokenSource::File(path),
            ..
        } => assert_eq!(path, Path::new("/run/secrets/kafka-token")),
        other => panic!("{other:?}"),
    }
    // The client credentials grant as KIP-768 configures it (JAAS options) ...
    std::env::set_var("STRAIT_TEST_OAUTH_SECRET", "s3cr=t");
    match sasl_of(
        "A.sasl.mechanism = OAUTHBEARER\n\
         A.sasl.login.callback.handler.class = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n\
         A.sasl.oauthbearer.token.endpoint.url = https://login.example.com/oauth2/v2.0/token\n\
         A.sasl.login.connect.timeout.ms = 3000\n\
         A.sasl.login.refresh.buffer.seconds = 120\n\
         A.sasl.oauthbearer.sub.claim.name = azp\n\
         A.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
         clientId=\"mirror\" clientSecret=\"${env:STRAIT_TEST_OAUTH_SECRET}\" scope=\"api://kafka/.default\";\n",
    ) {
        SaslConfig::OAuthBearer {
            token: TokenSource::Endpoint(endpoint),
            ..
        } => {
            let c = endpoint.settings();
            assert_eq!(c.url, "https://login.example.com/oauth2/v2.0/token");
            assert_eq!(c.client_id, "mirror");
            assert_eq!(c.client_secret.expose(), "s3cr=t");
            assert_eq!(c.scope.as_deref(), Some("api://kafka/.default"));
            assert!(!c.urlencode_header);
            assert!(c.tls.is_some(), "https: TLS with the system's CAs");
            assert_eq!(c.connect_timeout, Duration::from_secs(3));
            assert_eq!(c.read_timeout, Duration::from_secs(10));
            assert_eq!(c.retry_backoff, Duration::from_millis(100));
            assert_eq!(c.retry_backoff_max, Duration::from_secs(10));
            assert_eq!(c.sub_claim, "azp");
            assert_eq!(c.refresh.factor, 0.8);
            assert_eq!(c.refresh.buffer, Duration::from_secs(120));
            assert_eq!(c.refresh.min_period, Duration::from_secs(60));
            let shown = format!("{endpoint:?}");
            assert!(!shown.contains("s3cr=t"), "{shown}");
        }
        other => panic!("{other:?}"),
    }
    // ... and as Kafka 4.1 does (client keys win over the JAAS options).
    match sasl_of(
        "A.sasl.mechanism = OAUTHBEARER\n\
         A.sasl.login.callback.handler.class = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n\
         A.sasl.oauthbearer.token.endpoint.url = http://127.0.0.1:8080/default/token\n\
         A.sasl.oauthbearer.jwt.retriever.class = org.apache.kafka.common.security.oauthbearer.ClientCredentialsJwtRetriever\n\
         A.sasl.oauthbearer.client.credentials.client.id = mirror-41\n\
         A.sasl.oauthbearer.client.credentials.client.secret = ${env:STRAIT_TEST_OAUTH_SECRET}\n\
         A.sasl.oauthbearer.scope = kafka\n\
         A.sasl.oauthbearer.header.urlencode = true\n\
         A.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
         clientId=\"ignored\";\n",
    ) {
        SaslConfig::OAuthBearer {
            token: TokenSource::Endpoint(endpoint),
            ..
        } => {
            let c = endpoint.settings();
            assert_eq!(c.client_id, "mirror-41");
            assert_eq!(c.client_secret.expose(), "s3cr=t");
            assert_eq!(c.scope.as_deref(), Some("kafka"));
            assert!(c.urlencode_header);
            assert!(c.tls.is_none(), "http: no TLS");
        }
        other => panic!("{other:?}"),
    }
    match sasl_of(
        "A.sasl.mechanism = OAUTHBEARER\n\
         A.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
         unsecuredLoginStringClaim_sub=\"mirror\" unsecuredLoginListClaim_scope=\",read,write\" \
         unsecuredLoginLifetimeSeconds=60;\n",
    ) {
        SaslConfig::OAuthBearer {
            token: TokenSource::Unsecured(t),
            ..
        } => {
            assert_eq!(t.principal, "mirror");
            assert_eq!(t.lifetime, Duration::from_secs(60));
            assert_eq!(t.claims.len(), 1);
        }
        other => panic!("{other:?}"),
    }
}

/// An unsigned JWT (`{"alg":"none"}` / `{"sub":"mirror","iat":1700000000,"exp":4102444800}`),
/// valid until 2100.
const JWT: &str = "eyJhbGciOiJub25lIn0.\
                   eyJzdWIiOiJtaXJyb3IiLCJpYXQiOjE3MDAwMDAwMDAsImV4cCI6NDEwMjQ0NDgwMH0.";

/// The same, expired in 2001 (`"iat":900000000,"exp":1000000000`).
const EXPIRED_JWT: &str = "eyJhbGciOiJub25lIn0.\
                           eyJzdWIiOiJtaXJyb3IiLCJpYXQiOjkwMDAwMDAwMCwiZXhwIjoxMDAwMDAwMDAwfQ.";

/// OAUTHBEARER from the config, end to end, against Kafka's unsecured validator: the token
/// file named by `sasl.oauthbearer.token.endpoint.url` (a current token accepted, an expired
/// one refused), and Kafka's unsecured JWT made from `unsecuredLogin*` JAAS options.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauthbearer_tokens_from_the_config_reach_the_broker() {
    let clusters = secure::oauthbearer_clusters();
    let a = &clusters.source.bootstrap;
    let d = dir("oauth");
    let token_file = |token: &str| {
        std::fs::write(d.join("token"), format!("{token}\n")).unwrap();
        config(
            a,
            "b:9092",
            &format!(
                "A.security.protocol = SASL_PLAINTEXT\n\
                 A.sasl.mechanism = OAUTHBEARER\n\
                 A.sasl.login.callback.handler.class = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n\
                 A.sasl.oauthbearer.token.endpoint.url = file:{}/token\n\
                 A.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;\n",
                d.display()
            ),
        )
    };
    let client = Client::connect(short(client_config(&token_file(JWT), Role::Admin).unwrap()))
        .await
        .expect("OAUTHBEARER with a token file");
    client
        .create_topic(NewTopic::new("oauth-orders", 1))
        .await
        .unwrap();
    let err = Client::connect(short(
        client_config(&token_file(EXPIRED_JWT), Role::Admin).unwrap(),
    ))
    .await
    .unwrap_err();
    let shown = err.to_string();
    assert!(matches!(err, Error::Authentication { .. }), "{shown}");
    assert!(shown.contains("refused the token"), "{shown}");
    assert!(!shown.contains(EXPIRED_JWT), "{shown}");

    let unsecured = config(
        a,
        "b:9092",
        "A.security.protocol = SASL_PLAINTEXT\n\
         A.sasl.mechanism = OAUTHBEARER\n\
         A.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule \
         required unsecuredLoginStringClaim_sub=\"mirror\" unsecuredLoginListClaim_scope=\",kafka\";\n",
    );
    let client = Client::connect(short(client_config(&unsecured, Role::Consumer).unwrap()))
        .await
        .expect("OAUTHBEARER with Kafka's unsecured token");
    let metadata = client.refresh_metadata().await.unwrap();
    assert!(metadata.topics.contains_key("oauth-orders"));
    std::fs::remove_dir_all(&d).unwrap();
}

/// The client credentials grant from an MM2 file, end to end: a real identity provider
/// (mock-oauth2-server) issues signed tokens, the broker checks them with Kafka's own JWT
/// validator against the provider's keys; the secret comes through a config provider.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauthbearer_client_credentials_from_the_config_reach_the_broker() {
    let d = dir("oidc");
    let oidc = strait_testkit::OidcServer::start(&d);
    let clusters = secure::oidc_clusters(&oidc, strait_testkit::OidcServer::SHORT);
    std::fs::write(d.join("oauth.properties"), "secret=mirror-secret\n").unwrap();
    let cfg = config(
        &clusters.source.bootstrap,
        "b:9092",
        &format!(
            "config.providers = file\n\
             config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider\n\
             A.security.protocol = SASL_PLAINTEXT\n\
             A.sasl.mechanism = OAUTHBEARER\n\
             A.sasl.login.callback.handler.class = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n\
             A.sasl.oauthbearer.token.endpoint.url = {}\n\
             A.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
             clientId=\"mirror-client\" clientSecret=\"${{file:{}/oauth.properties:secret}}\" scope=\"kafka\";\n",
            oidc.token_url(strait_testkit::OidcServer::SHORT),
            d.display()
        ),
    );
    let client = Client::connect(short(client_config(&cfg, Role::Admin).unwrap()))
        .await
        .expect("OAUTHBEARER with a token from the identity provider");
    client
        .create_topic(NewTopic::new("oidc-orders", 1))
        .await
        .unwrap();
    let metadata = client.refresh_metadata().await.unwrap();
    assert!(metadata.topics.contains_key("oidc-orders"));
    drop(client);
    drop(clusters);
    drop(oidc);
    std::fs::remove_dir_all(&d).unwrap();
}

/// `client.id` from the client's resolved keys (its role's, the flow's), as the name every
/// request carries (broker logs, request metrics, quotas); "strait" when unset.
#[test]
fn client_id_comes_from_the_resolved_client_keys() {
    let plain = config("a:9092", "b:9092", "");
    assert_eq!(
        client_config(&plain, Role::Consumer)
            .unwrap()
            .connection
            .client_id,
        "strait"
    );
    let named = config(
        "a:9092",
        "b:9092",
        "A.consumer.client.id = mirror-eu-fetch\nA->B.admin.client.id = mirror-eu-admin",
    );
    assert_eq!(
        client_config(&named, Role::Consumer)
            .unwrap()
            .connection
            .client_id,
        "mirror-eu-fetch"
    );
    assert_eq!(
        client_config(&named, Role::Admin)
            .unwrap()
            .connection
            .client_id,
        "mirror-eu-admin"
    );
    assert_eq!(
        client_config(&named, Role::Producer)
            .unwrap()
            .connection
            .client_id,
        "strait"
    );
}

/// `client.rack` (KIP-392) from the consumer's resolved keys, for the fetch requests' `rack_id`;
/// other roles do not fetch records, and an unset or blank value sends none.
#[test]
fn client_rack_comes_from_the_consumer_keys() {
    let plain = config("a:9092", "b:9092", "");
    assert_eq!(
        client_config(&plain, Role::Consumer).unwrap().client_rack,
        None
    );
    let racked = config(
        "a:9092",
        "b:9092",
        "A->B.consumer.client.rack = eu-west-1a\nA.admin.client.rack = eu-west-1b",
    );
    assert_eq!(
        client_config(&racked, Role::Consumer)
            .unwrap()
            .client_rack
            .as_deref(),
        Some("eu-west-1a")
    );
    assert_eq!(
        client_config(&racked, Role::Admin).unwrap().client_rack,
        None
    );
    let blank = config("a:9092", "b:9092", "A.consumer.client.rack = ");
    assert_eq!(
        client_config(&blank, Role::Consumer).unwrap().client_rack,
        None
    );
}

const KRB5: &str = "com.sun.security.auth.module.Krb5LoginModule";

/// The GSSAPI settings of cluster A's consumer from MM2 `lines`, or the refusal's message
/// (checked to name cluster A and `key`).
fn gssapi_of(lines: &str) -> Result<GssapiConfig, String> {
    let cfg = config(
        "a:9092",
        "b:9092",
        &format!("A.security.protocol = SASL_PLAINTEXT\n{lines}"),
    );
    match client_config(&cfg, Role::Consumer) {
        Ok(c) => match c.security().sasl.as_deref() {
            Some(SaslConfig::Gssapi(g)) => Ok(g.clone()),
            other => panic!("not GSSAPI: {other:?}"),
        },
        Err(e) => {
            let shown = e.to_string();
            assert!(shown.contains("cluster `A` (consumer client)"), "{shown}");
            let key = e.key.unwrap_or_default();
            Err(format!(
                "{}: {shown}",
                key.strip_prefix("A.").unwrap_or(&key)
            ))
        }
    }
}

#[test]
fn gssapi_settings_from_mm2_lines() {
    // The MM2 lines, as documented for Kafka: a keytab and a principal.
    let g = gssapi_of(&format!(
        "A.sasl.mechanism = GSSAPI\n\
         A.sasl.kerberos.service.name = kafka\n\
         A.sasl.jaas.config = {KRB5} required useKeyTab=true storeKey=true \
         keyTab=\"/etc/security/keytabs/mm2.keytab\" principal=\"mm2@EXAMPLE.COM\";\n"
    ))
    .unwrap();
    assert_eq!(
        g,
        GssapiConfig {
            service_name: "kafka".into(),
            principal: Some("mm2@EXAMPLE.COM".into()),
            keytab: Some("/etc/security/keytabs/mm2.keytab".into()),
            ticket_cache: None,
        }
    );
    // GSSAPI is Kafka's default mechanism; the service name may be the JAAS option.
    let g = gssapi_of(&format!(
        "A.sasl.jaas.config = {KRB5} required useKeyTab=true keyTab=\"/k.keytab\" \
         principal=\"mm2@EXAMPLE.COM\" serviceName=kafka;\n"
    ))
    .unwrap();
    assert_eq!(g.service_name, "kafka");
    // A ticket cache (kinit): the default one, or a named one; the principal is optional.
    let g = gssapi_of(&format!(
        "A.sasl.kerberos.service.name = kafka\n\
         A.sasl.jaas.config = {KRB5} required useTicketCache=true;\n"
    ))
    .unwrap();
    assert_eq!(g.ticket_cache, Some(None));
    assert_eq!((g.principal, g.keytab), (None, None));
    let g = gssapi_of(&format!(
        "A.sasl.kerberos.service.name = kafka\n\
         A.sasl.jaas.config = {KRB5} required useTicketCache=true ticketCache=\"/tmp/krb5cc_mm2\" \
         principal=\"mm2@EXAMPLE.COM\" useKeyTab=true keyTab=\"/k.keytab\";\n"
    ))
    .unwrap();
    assert_eq!(g.ticket_cache, Some(Some("/tmp/krb5cc_mm2".into())));
    assert_eq!(g.keytab.as_deref(), Some(Path::new("/k.keytab")));

    // No service name: Kafka's client refuses this too.
    let shown = gssapi_of(&format!(
        "A.sasl.mechanism = GSSAPI\n\
         A.sasl.jaas.config = {KRB5} required useKeyTab=true keyTab=\"/k.keytab\" \
         principal=\"mm2@EXAMPLE.COM\";\n"
    ))
    .unwrap_err();
    assert!(shown.starts_with("sasl.kerberos.service.name: "), "{shown}");
    assert!(
        shown.contains("No serviceName defined in either JAAS or Kafka config"),
        "{shown}"
    );
    // Two that differ.
    let shown = gssapi_of(&format!(
        "A.sasl.kerberos.service.name = kafka\n\
         A.sasl.jaas.config = {KRB5} required useTicketCache=true serviceName=other;\n"
    ))
    .unwrap_err();
    assert!(
        shown.contains("conflicting Kerberos service names"),
        "{shown}"
    );
    // useKeyTab=true without keyTab, or without principal.
    let shown = gssapi_of(&format!(
        "A.sasl.kerberos.service.name = kafka\n\
         A.sasl.jaas.config = {KRB5} required useKeyTab=true principal=\"mm2@EXAMPLE.COM\";\n"
    ))
    .unwrap_err();
    assert!(shown.starts_with("sasl.jaas.config: "), "{shown}");
    assert!(shown.contains("useKeyTab=true needs keyTab="), "{shown}");
    let shown = gssapi_of(&format!(
        "A.sasl.kerberos.service.name = kafka\n\
         A.sasl.jaas.config = {KRB5} required useKeyTab=true keyTab=\"/k.keytab\";\n"
    ))
    .unwrap_err();
    assert!(shown.contains("useKeyTab=true needs principal="), "{shown}");
    // keyTab or ticketCache without the flag that uses it (the JDK module's errors).
    let shown = gssapi_of(&format!(
        "A.sasl.kerberos.service.name = kafka\n\
         A.sasl.jaas.config = {KRB5} required keyTab=\"/k.keytab\" principal=p useTicketCache=true;\n"
    ))
    .unwrap_err();
    assert!(shown.contains("useKeyTab is not true"), "{shown}");
    let shown = gssapi_of(&format!(
        "A.sasl.kerberos.service.name = kafka\n\
         A.sasl.jaas.config = {KRB5} required ticketCache=\"/tmp/cc\" useKeyTab=true \
         keyTab=\"/k.keytab\" principal=p;\n"
    ))
    .unwrap_err();
    assert!(shown.contains("useTicketCache is not true"), "{shown}");
    // Neither a keytab nor a ticket cache: Java would prompt for a password.
    let shown = gssapi_of(&format!(
        "A.sasl.kerberos.service.name = kafka\n\
         A.sasl.jaas.config = {KRB5} required principal=\"mm2@EXAMPLE.COM\";\n"
    ))
    .unwrap_err();
    assert!(shown.contains("would prompt for a password"), "{shown}");
    // GSSAPI with another login module.
    let shown = gssapi_of(
        "A.sasl.mechanism = GSSAPI\n\
         A.sasl.kerberos.service.name = kafka\n\
         A.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required \
         username=u password=\"hunter2\";\n",
    )
    .unwrap_err();
    assert!(shown.starts_with("sasl.jaas.config: "), "{shown}");
    assert!(shown.contains(&format!("GSSAPI needs {KRB5}")), "{shown}");
    assert!(!shown.contains("hunter2"), "{shown}");
}

/// Kerberos from MM2's own lines against Apache Kafka with a SASL_SSL listener taking GSSAPI
/// and an MIT KDC (both started here): a keytab and principal, then a ticket cache left by
/// `kinit`; each client produces, and reads what the other wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gssapi_from_mm2_lines_against_a_real_broker_and_kdc() {
    let kdc = Kdc::start();
    // For MIT's library in this process (the broker's JVM gets -Djava.security.krb5.conf).
    // No other test here uses Kerberos.
    std::env::set_var("KRB5_CONFIG", &kdc.krb5_conf);
    kdc.add_principal("kafka/localhost");
    kdc.add_principal("mm2");
    let broker_keytab = kdc.keytab("kafka.keytab", &["kafka/localhost"]);
    let mm2_keytab = kdc.keytab("mm2.keytab", &["mm2"]);
    let ca = TestCa::new("strait test CA");
    let ca_pem = kdc.dir.join("ca.pem");
    std::fs::write(&ca_pem, ca.pem()).unwrap();
    let broker = SecureBroker::start(SecureBrokerOptions {
        tls: Some(ca.server_cert(&["localhost"])),
        gssapi: Some(GssapiListener {
            service_name: "kafka".into(),
            principal: kdc.principal("kafka/localhost"),
            keytab: broker_keytab,
            krb5_conf: kdc.krb5_conf.clone(),
        }),
        ..SecureBrokerOptions::default()
    });
    let mm2 = kdc.principal("mm2");
    let tls = format!(
        "A.security.protocol = SASL_SSL\nA.ssl.truststore.type = PEM\n\
         A.ssl.truststore.location = {}\n",
        ca_pem.display()
    );
    let cfg = config(
        &broker.bootstrap,
        "b:9092",
        &format!(
            "{tls}\
             A.sasl.mechanism = GSSAPI\n\
             A.sasl.kerberos.service.name = kafka\n\
             A.sasl.jaas.config = {KRB5} required useKeyTab=true storeKey=true \
             keyTab=\"{}\" principal=\"{mm2}\";\n",
            mm2_keytab.display()
        ),
    );
    let producer = client_config(&cfg, Role::Producer).expect("GSSAPI settings");
    assert_eq!(producer.security().protocol(), "SASL_SSL");
    let client = Client::connect(short(producer))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", broker.log_tail(30)));
    secure::produce_and_fetch(&client, "mm2-gssapi").await;

    // A ticket cache, as `kinit` leaves it; no keytab.
    let cache = kdc.dir.join("mm2.ccache");
    kdc.kinit(&mm2, &mm2_keytab, &cache);
    let cfg = config(
        &broker.bootstrap,
        "b:9092",
        &format!(
            "{tls}\
             A.sasl.kerberos.service.name = kafka\n\
             A.sasl.jaas.config = {KRB5} required useTicketCache=true \
             ticketCache=\"{}\";\n",
            cache.display()
        ),
    );
    let consumer = client_config(&cfg, Role::Consumer).expect("GSSAPI settings");
    match consumer.security().sasl.as_deref() {
        Some(SaslConfig::Gssapi(g)) => {
            assert_eq!(g.ticket_cache, Some(Some(cache.display().to_string())))
        }
        other => panic!("not GSSAPI: {other:?}"),
    }
    let reader = Client::connect(short(consumer))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", broker.log_tail(30)));
    let metadata = reader.refresh_metadata().await.expect("metadata");
    assert!(metadata.topics.contains_key("mm2-gssapi"));
    secure::produce_and_fetch(&reader, "mm2-gssapi-cache").await;
}

/// Amazon MSK IAM from an MM2 file for MSK, in both of the forms of Amazon's library: the
/// mechanism, the `aws*` JAAS options, the callback handler classes (Amazon's accepted, any
/// other refused), and no secret (JAAS keys, the environment's) in `Debug` or in a message.
#[test]
fn msk_iam_settings() {
    use strait_kafka::sasl::MskIamForm;

    std::env::set_var("AWS_SECRET_ACCESS_KEY", "env-secret-value-7");
    let with = |lines: &str| {
        config(
            "b-1.c.abc.c2.kafka.eu-west-1.amazonaws.com:9098",
            "b:9092",
            &format!("A.security.protocol = SASL_SSL\n{lines}"),
        )
    };
    let iam = |lines: &str| -> (strait_kafka::sasl::MskIam, String) {
        let c = client_config(&with(lines), Role::Consumer).unwrap_or_else(|e| panic!("{e}"));
        let shown = format!("{c:?}");
        match (*c.security().sasl.clone().unwrap()).clone() {
            SaslConfig::AwsMskIam(iam) => (iam, shown),
            other => panic!("{other:?}"),
        }
    };

    // AWS_MSK_IAM, with a role assumed with keys given in the JAAS config.
    let (msk, shown) = iam(
        "A.sasl.mechanism = AWS_MSK_IAM\n\
         A.sasl.jaas.config = software.amazon.msk.auth.iam.IAMLoginModule required \
         awsRoleArn=\"arn:aws:iam::123456789012:role/msk_client_role\" awsRoleSessionName=\"producer\" \
         awsStsRegion=\"us-west-2\" awsRoleAccessKeyId=\"AKIAJAAS\" \
         awsRoleSecretAccessKey=\"jaas-secret-key-1\" awsRoleSessionToken=\"jaas-session-token-2\" \
         awsDebugCreds=true awsMaxRetries=\"7\" awsMaxBackOffTimeMs=\"500\";\n\
         A.sasl.client.callback.handler.class = software.amazon.msk.auth.iam.IAMClientCallbackHandler\n",
    );
    assert_eq!(msk.form, MskIamForm::AwsMskIam);
    assert!(msk.debug_credentials);
    let chain = msk.credentials.config();
    let role = chain.assume_role.as_ref().unwrap();
    assert_eq!(
        role.role_arn,
        "arn:aws:iam::123456789012:role/msk_client_role"
    );
    assert_eq!(role.session_name, "producer");
    assert_eq!(role.access_key_id.as_deref(), Some("AKIAJAAS"));
    assert_eq!(
        role.secret_access_key.as_ref().unwrap().expose(),
        "jaas-secret-key-1"
    );
    assert_eq!(chain.sts_region.as_deref(), Some("us-west-2"));
    assert_eq!(chain.max_retries, 7);
    assert_eq!(chain.max_backoff, Duration::from_millis(500));
    assert!(chain.add_default_providers);
    for secret in [
        "jaas-secret-key-1",
        "jaas-session-token-2",
        "env-secret-value-7",
    ] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    assert!(shown.contains("AWS_SECRET_ACCESS_KEY"), "{shown}");

    // The minimal file of Amazon's README, without the client callback handler too.
    let (msk, _) = iam("A.sasl.mechanism = AWS_MSK_IAM\n\
         A.sasl.jaas.config = software.amazon.msk.auth.iam.IAMLoginModule required;\n");
    assert_eq!(
        msk.credentials.config(),
        &strait_kafka::aws::ChainConfig::default()
    );

    // OAUTHBEARER with Amazon's login callback handler.
    let (msk, _) = iam(
        "A.sasl.mechanism = OAUTHBEARER\n\
         A.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule \
         required awsProfileName=\"msk_client\";\n\
         A.sasl.login.callback.handler.class = software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler\n\
         A.sasl.client.callback.handler.class = software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler\n",
    );
    assert_eq!(msk.form, MskIamForm::OAuthBearer);
    assert_eq!(
        msk.credentials.config().profile.as_deref(),
        Some("msk_client")
    );
    assert!(msk.credentials.config().assume_role.is_none());

    // Refusals name the cluster and the key, and never a secret.
    let iam_jaas = "A.sasl.jaas.config = software.amazon.msk.auth.iam.IAMLoginModule required";
    for (lines, key, says) in [
        (
            format!("A.sasl.mechanism = AWS_MSK_IAM\n{iam_jaas} awsFooBar=1;\n"),
            "sasl.jaas.config",
            "`awsFooBar` is not an option of Amazon's MSK IAM login module",
        ),
        (
            format!(
                "A.sasl.mechanism = AWS_MSK_IAM\n{iam_jaas} awsMskRegionProvider=\"com.x.R\";\n"
            ),
            "sasl.jaas.config",
            "names a Java class strait cannot run",
        ),
        (
            format!(
                "A.sasl.mechanism = AWS_MSK_IAM\n{iam_jaas} awsRoleArn=\"arn:r\" \
                 awsRoleSecretAccessKey=\"lonely-secret-3\";\n"
            ),
            "sasl.jaas.config",
            "set both awsRoleAccessKeyId and awsRoleSecretAccessKey",
        ),
        (
            format!("A.sasl.mechanism = AWS_MSK_IAM\n{iam_jaas} awsMaxRetries=many;\n"),
            "sasl.jaas.config",
            "`awsMaxRetries` must be a whole number",
        ),
        (
            format!(
                "A.sasl.mechanism = AWS_MSK_IAM\n{iam_jaas};\n\
                 A.sasl.client.callback.handler.class = com.example.MyHandler\n"
            ),
            "sasl.client.callback.handler.class",
            "`com.example.MyHandler` is Java code strait cannot run",
        ),
        (
            "A.sasl.mechanism = AWS_MSK_IAM\n\
             A.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required \
             username=u password=\"plain-secret-4\";\n"
                .to_owned(),
            "sasl.jaas.config",
            "needs software.amazon.msk.auth.iam.IAMLoginModule",
        ),
        (
            "A.sasl.mechanism = OAUTHBEARER\n\
             A.sasl.login.callback.handler.class = software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler\n\
             A.sasl.client.callback.handler.class = software.amazon.msk.auth.iam.IAMClientCallbackHandler\n\
             A.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;\n"
                .to_owned(),
            "sasl.client.callback.handler.class",
            "strait takes software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler",
        ),
        (
            "A.sasl.mechanism = SCRAM-SHA-512\n\
             A.sasl.client.callback.handler.class = software.amazon.msk.auth.iam.IAMClientCallbackHandler\n\
             A.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required \
             username=u password=\"scram-secret-5\";\n"
                .to_owned(),
            "sasl.client.callback.handler.class",
            "is Amazon MSK's IAM handler: it goes with sasl.mechanism=AWS_MSK_IAM",
        ),
        (
            "A.sasl.mechanism = PLAIN\n\
             A.sasl.client.callback.handler.class = com.example.MyHandler\n\
             A.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required \
             username=u password=\"plain-secret-6\";\n"
                .to_owned(),
            "sasl.client.callback.handler.class",
            "a custom SASL client callback handler is Java code strait cannot run",
        ),
    ] {
        let shown = refused(&with(&lines), key);
        assert!(shown.contains(says), "{says:?} not in: {shown}");
        for secret in [
            "lonely-secret-3",
            "plain-secret-4",
            "scram-secret-5",
            "plain-secret-6",
            "env-secret-value-7",
        ] {
            assert!(!shown.contains(secret), "{secret} in: {shown}");
        }
    }
}

/// A refused setting names the key of the file that set it, with its line (a flow's consumer
/// override, a cluster's key), and `refused_clients` finds every client `strait run` would
/// refuse, without a broker: `strait check` reports them as `run` would (`docs/check.md`).
#[test]
fn refused_settings_name_the_key_and_line_that_set_them() {
    let cfg = parse(
        "clusters = A, B\n\
         A.bootstrap.servers = a:9093\n\
         A.security.protocol = SSL\n\
         B.bootstrap.servers = b:9093\n\
         B.security.protocol = SSL\n\
         B.ssl.truststore.type = JKSS\n\
         A->B.enabled = true\n\
         A->B.consumer.ssl.truststore.location = /nonexistent/strait/trust.p12\n",
    );
    let refused = cfg.refused_clients();
    let found: Vec<(&str, Role, Option<&str>, Option<usize>)> = refused
        .iter()
        .map(|r| {
            (
                r.cluster.as_str(),
                r.role,
                r.error.key.as_deref(),
                r.error.line,
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (
                "A",
                Role::Consumer,
                Some("A->B.consumer.ssl.truststore.location"),
                Some(8)
            ),
            ("B", Role::Producer, Some("B.ssl.truststore.type"), Some(6)),
            // The heartbeat writer into B, then each cluster's admin client.
            ("B", Role::Producer, Some("B.ssl.truststore.type"), Some(6)),
            ("B", Role::Admin, Some("B.ssl.truststore.type"), Some(6)),
        ]
    );
    let shown = refused[0].error.to_string();
    assert!(
        shown.contains("mm2.properties:8: key `A->B.consumer.ssl.truststore.location`")
            && shown.contains(
                "cluster `A` (consumer client): cannot read /nonexistent/strait/trust.p12"
            ),
        "{shown}"
    );
    // The flow's own clients, as `strait run` makes them: the same refusal.
    let e = cfg.flow_clients(&cfg.flows[0]).expect_err("refused");
    assert_eq!(
        e.key.as_deref(),
        Some("A->B.consumer.ssl.truststore.location")
    );
}
