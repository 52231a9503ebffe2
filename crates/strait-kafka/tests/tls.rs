//! TLS against Apache Kafka (`SecureBroker`, an SSL listener with a PEM key store made by rcgen
//! at test time): a working connection that carries produce and fetch, and each way it can
//! fail, with the message the operator reads; mutual TLS against a listener that requires
//! client certificates (`ssl.client.auth=required`), with PEM, PKCS#12, encrypted keys and
//! JKS key and trust stores made by `keytool`, and refused without a certificate or with one
//! from a CA the broker does not trust.

mod secure;

use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use strait_kafka::tls::{
    read_keystore, read_pem_identity, read_truststore, ClientIdentity, StoreError, TlsConfig,
    TlsOptions, Trust,
};
use strait_kafka::{Client, Error, Secret, Security};
use strait_testkit::{
    java_keystore, java_truststore, SecureBroker, SecureBrokerOptions, TestCa, TestCert,
};

use secure::{assert_names_broker, cause, config, failed_connect, produce_and_fetch, tls_trusting};

fn tls_broker(cert: TestCert) -> SecureBroker {
    SecureBroker::start(SecureBrokerOptions {
        tls: Some(cert),
        ..SecureBrokerOptions::default()
    })
}

fn tls_only(tls: Arc<TlsConfig>) -> Security {
    Security {
        tls: Some(tls),
        sasl: None,
    }
}

/// Connects and expects a TLS error naming cluster A and the broker; returns its message. It
/// must come at once: a TLS refusal is not retried for `default.api.timeout.ms`.
async fn tls_failure(bootstrap: &str, tls: Arc<TlsConfig>) -> String {
    let (err, shown) = failed_connect(bootstrap, tls_only(tls), "a TLS failure").await;
    match cause(err) {
        Error::Tls {
            cluster,
            broker,
            message,
        } => {
            assert_names_broker(cluster.as_deref(), &broker, bootstrap, &shown);
            message.into()
        }
        other => panic!("expected a TLS error, got: {other}"),
    }
}

fn pkcs12(password: &str, entries: Vec<(&str, p12_keystore::KeyStoreEntry)>) -> Vec<u8> {
    let mut store = p12_keystore::KeyStore::new();
    for (alias, entry) in entries {
        store.add_entry(alias, entry);
    }
    store.writer(password).write().expect("write PKCS#12")
}

fn certificate_entry(der: &[u8]) -> p12_keystore::KeyStoreEntry {
    p12_keystore::KeyStoreEntry::Certificate(
        p12_keystore::Certificate::from_der(der).expect("certificate"),
    )
}

fn key_entry(cert: &TestCert) -> p12_keystore::KeyStoreEntry {
    let key = p12_keystore::PrivateKey::from_der(&cert.key_der).expect("key");
    let chain = [
        p12_keystore::Certificate::from_der(&cert.cert_der).expect("certificate"),
        p12_keystore::Certificate::from_der(&cert.ca_der).expect("CA certificate"),
    ];
    p12_keystore::KeyStoreEntry::PrivateKeyChain(p12_keystore::PrivateKeyChain::new(
        vec![1, 2, 3, 4],
        key,
        chain,
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_connection_carries_metadata_produce_and_fetch() {
    let ca = TestCa::new("strait test CA");
    let broker = tls_broker(ca.server_cert(&["127.0.0.1", "localhost"]));

    // The CA from a PEM truststore.
    let trusted = read_truststore(ca.pem().as_bytes(), None).unwrap();
    assert_eq!(trusted.len(), 1);
    let client = Client::connect(config(&broker.bootstrap, tls_only(tls_trusting(ca.der()))))
        .await
        .expect("TLS connect");
    let conn = client.any_connection().await.unwrap();
    assert!(conn
        .versions()
        .offers(kafka_protocol::messages::ApiKey::Produce));
    assert!(format!("{conn:?}").contains("SSL"), "{conn:?}");
    let metadata = client.refresh_metadata().await.unwrap();
    assert_eq!(metadata.brokers.len(), 1);
    // The cluster id the broker's storage was formatted with (its `meta.properties`).
    let meta = std::fs::read_to_string(broker.dir().join("secure/data/meta.properties"))
        .expect("the broker's meta.properties");
    let cluster_id = meta
        .lines()
        .find_map(|l| l.strip_prefix("cluster.id="))
        .expect("cluster.id in meta.properties");
    assert_eq!(metadata.cluster_id.as_deref(), Some(cluster_id));
    produce_and_fetch(&client, "tls-orders").await;

    // By DNS name too (the certificate names localhost), and with the CA in a PKCS#12
    // truststore with a password.
    let p12 = pkcs12("changeit", vec![("ca", certificate_entry(ca.der()))]);
    let roots = read_truststore(&p12, Some(&Secret::new("changeit"))).unwrap();
    assert_eq!(roots, vec![CertificateDer::from(ca.der().to_vec())]);
    let tls = TlsConfig::new(TlsOptions {
        trust: Trust::Certificates(roots),
        trust_origin: "ssl.truststore.location=truststore.p12".into(),
        ..TlsOptions::default()
    })
    .unwrap();
    let port = broker.bootstrap.rsplit_once(':').unwrap().1;
    let by_name = Client::connect(config(
        &format!("localhost:{port}"),
        tls_only(Arc::new(tls)),
    ))
    .await
    .expect("TLS connect by name");
    let metadata = by_name.refresh_metadata().await.unwrap();
    assert!(metadata.topics.contains_key("tls-orders"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_certificate_from_another_ca_is_refused() {
    let ca = TestCa::new("broker CA");
    let other = TestCa::new("some other CA");
    let broker = tls_broker(ca.server_cert(&["127.0.0.1"]));
    let message = tls_failure(&broker.bootstrap, tls_trusting(other.der())).await;
    assert!(message.contains("not signed by a trusted CA"), "{message}");
    assert!(message.contains("the test CA"), "{message}");
    assert!(message.contains("ssl.truststore.location"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_for_another_name_is_refused_unless_hostname_verification_is_off() {
    let ca = TestCa::new("strait test CA");
    let broker = tls_broker(ca.server_cert(&["kafka.other.example"]));
    let message = tls_failure(&broker.bootstrap, tls_trusting(ca.der())).await;
    assert!(message.contains("not valid for `127.0.0.1`"), "{message}");
    assert!(message.contains("kafka.other.example"), "{message}");
    assert!(
        message.contains("ssl.endpoint.identification.algorithm"),
        "{message}"
    );

    // ssl.endpoint.identification.algorithm= (empty): the chain is still checked, the name not.
    let lenient = TlsConfig::new(TlsOptions {
        trust: Trust::Certificates(vec![ca.der().to_vec().into()]),
        verify_hostname: false,
        ..TlsOptions::default()
    })
    .unwrap();
    let client = Client::connect(config(&broker.bootstrap, tls_only(Arc::new(lenient))))
        .await
        .expect("connect without hostname verification");
    produce_and_fetch(&client, "no-hostname-check").await;
    let other = TestCa::new("some other CA");
    let lenient_wrong_ca = TlsConfig::new(TlsOptions {
        trust: Trust::Certificates(vec![other.der().to_vec().into()]),
        trust_origin: "the other CA".into(),
        verify_hostname: false,
        ..TlsOptions::default()
    })
    .unwrap();
    let message = tls_failure(&broker.bootstrap, Arc::new(lenient_wrong_ca)).await;
    assert!(message.contains("not signed by a trusted CA"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_broker_certificate_is_refused() {
    let ca = TestCa::new("strait test CA");
    let broker = tls_broker(ca.expired_server_cert(&["127.0.0.1"]));
    let message = tls_failure(&broker.bootstrap, tls_trusting(ca.der())).await;
    assert!(
        message.contains("expired at 2001-01-01 00:00:00 UTC"),
        "{message}"
    );
    assert!(message.contains("renewed certificate"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_to_a_plain_listener_says_the_listener_is_not_tls() {
    let ca = TestCa::new("strait test CA");
    let plain = SecureBroker::start(SecureBrokerOptions::default());
    let message = tls_failure(&plain.bootstrap, tls_trusting(ca.der())).await;
    assert!(message.contains("is this listener TLS?"), "{message}");
}

fn with_identity(ca: &TestCa, identity: Option<ClientIdentity>) -> Arc<TlsConfig> {
    Arc::new(
        TlsConfig::new(TlsOptions {
            trust: Trust::Certificates(vec![ca.der().to_vec().into()]),
            trust_origin: "the test CA".into(),
            identity,
            ..TlsOptions::default()
        })
        .unwrap(),
    )
}

/// An encrypted PKCS#8 PEM key (PBES2, PBKDF2-SHA256, AES-256-CBC), as
/// `openssl pkcs8 -topk8 -v2 aes-256-cbc` writes it.
fn encrypted_key_pem(key_der: &[u8], password: &str) -> String {
    use pkcs8::der::EncodePem;
    let info = pkcs8::PrivateKeyInfo::try_from(key_der).unwrap();
    let params =
        pkcs8::pkcs5::pbes2::Parameters::pbkdf2_sha256_aes256cbc(2048, &[7; 16], &[9; 16]).unwrap();
    let encrypted = info.encrypt_with_params(params, password).unwrap();
    let info = pkcs8::EncryptedPrivateKeyInfo::try_from(encrypted.as_bytes()).unwrap();
    info.to_pem(pkcs8::LineEnding::LF).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_with_pem_pkcs12_and_encrypted_keys() {
    let ca = TestCa::new("strait test CA");
    // The broker requires a client certificate signed by the test CA.
    let broker = SecureBroker::start(SecureBrokerOptions {
        tls: Some(ca.server_cert(&["127.0.0.1"])),
        client_ca_pem: Some(ca.pem().to_owned()),
        ..SecureBrokerOptions::default()
    });
    let bootstrap = broker.bootstrap.clone();
    let client_cert = ca.client_cert("strait-mirror");

    // PEM keystore: key and chain in one file (ssl.keystore.type=PEM).
    let pem_store = format!("{}{}", client_cert.key_pem, client_cert.chain_pem);
    let identity = read_keystore(pem_store.as_bytes(), None, None).unwrap();
    assert_eq!(identity.chain.len(), 2);
    assert!(!format!("{identity:?}").contains(&client_cert.key_pem[30..60]));
    let client = Client::connect(config(
        &bootstrap,
        tls_only(with_identity(&ca, Some(identity))),
    ))
    .await
    .expect("mutual TLS with a PEM keystore");
    produce_and_fetch(&client, "mtls-pem").await;

    // PKCS#12 keystore with a password.
    let p12 = pkcs12("s3cret", vec![("client", key_entry(&client_cert))]);
    let wrong = read_keystore(&p12, Some(&Secret::new("nope")), None).unwrap_err();
    assert_eq!(wrong, StoreError::WrongPassword);
    let none = read_keystore(&p12, None, None).unwrap_err();
    assert_eq!(none, StoreError::PasswordNeeded);
    let identity = read_keystore(&p12, Some(&Secret::new("s3cret")), None).unwrap();
    let client = Client::connect(config(
        &bootstrap,
        tls_only(with_identity(&ca, Some(identity))),
    ))
    .await
    .expect("mutual TLS with a PKCS#12 keystore");
    produce_and_fetch(&client, "mtls-p12").await;

    // PEM in config (ssl.keystore.certificate.chain, ssl.keystore.key) with an encrypted key
    // (ssl.key.password).
    let encrypted = encrypted_key_pem(&client_cert.key_der, "k3y");
    assert!(encrypted.contains("BEGIN ENCRYPTED PRIVATE KEY"));
    let chain = client_cert.chain_pem.as_bytes();
    assert_eq!(
        read_pem_identity(chain, encrypted.as_bytes(), None).unwrap_err(),
        StoreError::KeyPasswordNeeded
    );
    assert_eq!(
        read_pem_identity(chain, encrypted.as_bytes(), Some(&Secret::new("wrong"))).unwrap_err(),
        StoreError::WrongKeyPassword
    );
    let identity =
        read_pem_identity(chain, encrypted.as_bytes(), Some(&Secret::new("k3y"))).unwrap();
    let client = Client::connect(config(
        &bootstrap,
        tls_only(with_identity(&ca, Some(identity))),
    ))
    .await
    .expect("mutual TLS with an encrypted key");
    produce_and_fetch(&client, "mtls-encrypted").await;

    // No client certificate: the broker's refusal (Java's TLS answers an empty certificate
    // with a bad_certificate alert) says so, and what to set.
    let message = tls_failure(&bootstrap, with_identity(&ca, None)).await;
    assert!(
        message.starts_with(
            "the broker requires a client certificate (mutual TLS) and none is set: set \
             ssl.keystore.location"
        ),
        "{message}"
    );

    // A client certificate from a CA the broker does not trust.
    let stranger = TestCa::new("stranger CA").client_cert("intruder");
    let identity = read_pem_identity(
        stranger.chain_pem.as_bytes(),
        stranger.key_pem.as_bytes(),
        None,
    )
    .unwrap();
    let message = tls_failure(&bootstrap, with_identity(&ca, Some(identity))).await;
    assert!(
        message.contains("refused this client's certificate"),
        "{message}"
    );

    // A key that is not the certificate's.
    let other_key = ca.client_cert("other").key_pem;
    let mismatched =
        read_pem_identity(client_cert.chain_pem.as_bytes(), other_key.as_bytes(), None).unwrap();
    let err = TlsConfig::new(TlsOptions {
        identity: Some(mismatched),
        trust: Trust::Certificates(vec![ca.der().to_vec().into()]),
        ..TlsOptions::default()
    })
    .unwrap_err();
    assert!(err.to_string().contains("cannot be used together"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_with_jks_key_and_trust_stores() {
    let ca = TestCa::new("strait test CA");
    let other = TestCa::new("another CA");
    let broker = SecureBroker::start(SecureBrokerOptions {
        tls: Some(ca.server_cert(&["127.0.0.1"])),
        client_ca_pem: Some(ca.pem().to_owned()),
        ..SecureBrokerOptions::default()
    });
    let client_cert = ca.client_cert("strait-mirror");
    // Made by keytool as operators make them: the key store from a PKCS#12 file with
    // `keytool -importkeystore`, its key password not the store's; the trust store with
    // `keytool -importcert`, two CAs.
    let dir = std::env::temp_dir().join(format!("strait-tls-jks-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let keystore = java_keystore(
        &dir,
        "client.keystore.jks",
        "JKS",
        &client_cert,
        "strait",
        "store-secret",
        "key-secret",
    );
    let truststore = java_truststore(
        &dir,
        "client.truststore.jks",
        "JKS",
        &[("other", other.der()), ("ca", ca.der())],
        "trust-secret",
    );
    let keystore = std::fs::read(keystore).unwrap();
    let truststore = std::fs::read(truststore).unwrap();
    assert_eq!(&keystore[..4], &[0xFE, 0xED, 0xFE, 0xED]);

    let roots = read_truststore(&truststore, Some(&Secret::new("trust-secret"))).unwrap();
    assert_eq!(roots.len(), 2);
    let identity = read_keystore(
        &keystore,
        Some(&Secret::new("store-secret")),
        Some(&Secret::new("key-secret")),
    )
    .unwrap();
    assert_eq!(identity.chain.len(), 2);
    let tls = TlsConfig::new(TlsOptions {
        trust: Trust::Certificates(roots),
        trust_origin: "ssl.truststore.location=client.truststore.jks".into(),
        identity: Some(identity),
        ..TlsOptions::default()
    })
    .unwrap();
    let client = Client::connect(config(&broker.bootstrap, tls_only(Arc::new(tls))))
        .await
        .expect("mutual TLS with JKS stores");
    produce_and_fetch(&client, "mtls-jks").await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn stores_that_cannot_be_read_say_why() {
    let jks = [0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2, 0, 0, 0, 1];
    let err = read_truststore(&jks, Some(&Secret::new("changeit"))).unwrap_err();
    let shown = err.to_string();
    assert!(
        shown.contains("JKS file is damaged or truncated"),
        "{shown}"
    );
    let err = read_keystore(&[0xCE, 0xCE, 0xCE, 0xCE, 0, 0], None, None).unwrap_err();
    assert!(matches!(err, StoreError::Malformed(_)), "{err}");
    assert_eq!(
        read_truststore(b"", None).unwrap_err().to_string(),
        "the file is empty"
    );
    assert!(matches!(
        read_truststore(b"hello", None),
        Err(StoreError::Malformed(_))
    ));
    // PEM without certificates.
    let ca = TestCa::new("x");
    let key_only = ca.client_cert("c").key_pem;
    assert_eq!(
        read_truststore(key_only.as_bytes(), None).unwrap_err(),
        StoreError::NoCertificate
    );
    // A keystore without a key.
    assert_eq!(
        read_keystore(ca.pem().as_bytes(), None, None).unwrap_err(),
        StoreError::NoPrivateKey
    );
}
