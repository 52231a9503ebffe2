//! Helpers shared by the TLS and SASL tests (here and in strait-core's `config_security`): a
//! client for a secured cluster, Kafka clusters that take OAUTHBEARER, and a produce-then-fetch
//! round trip that proves the connection carries real traffic.
#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use strait_kafka::admin::{IsolationLevel, NewTopic};
use strait_kafka::fetch::{FetchOptions, FetchPosition};
use strait_kafka::produce::{ProducerConfig, RawProducer};
use strait_kafka::tls::{TlsConfig, TlsOptions, Trust};
use strait_kafka::{Client, ClientConfig, Error, Security, TopicPartition};
use strait_testkit::{ClusterOptions, Clusters, OidcServer};
use strait_wire::{BatchScanner, RawBatch};

/// The alias every test cluster is given, so errors can be checked to name it.
pub const ALIAS: &str = "A";

/// Client settings with short timeouts, errors naming cluster [`ALIAS`].
pub fn config(bootstrap: &str, security: Security) -> ClientConfig {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let mut config = ClientConfig::new([bootstrap])
        .with_security(security)
        .with_cluster_alias(ALIAS);
    config.operation_timeout = Duration::from_secs(20);
    config.connection.request_timeout = Duration::from_secs(10);
    config.connection.connect_timeout = Duration::from_secs(5);
    config
}

/// Two Kafka clusters whose client listener takes OAUTHBEARER only (SASL_PLAINTEXT), checked by
/// Kafka's unsecured validator (`OAuthBearerUnsecuredValidatorCallbackHandler`, the broker's
/// default for OAUTHBEARER): it accepts an unsigned JWT (`alg: none`) with a `sub` and a
/// current `exp`, and any SASL extensions. `SecureBroker` enables SCRAM and PLAIN only, so this
/// is `Clusters` (which takes any broker property); the tests use the source broker.
pub fn oauthbearer_clusters() -> Clusters {
    Clusters::start_with(
        ClusterOptions::default()
            .property(
                "listeners",
                "CLIENT://127.0.0.1:@PORT@,CONTROLLER://127.0.0.1:@CONTROLLER_PORT@,\
                 INTERNAL://127.0.0.1:@INTERNAL_PORT@",
            )
            .property(
                "advertised.listeners",
                "CLIENT://127.0.0.1:@PORT@,INTERNAL://127.0.0.1:@INTERNAL_PORT@",
            )
            .property(
                "listener.security.protocol.map",
                "CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,CLIENT:SASL_PLAINTEXT",
            )
            .property(
                "listener.name.client.sasl.enabled.mechanisms",
                "OAUTHBEARER",
            )
            // Kafka wants a JAAS login for each mechanism a listener enables; the broker's own
            // token is never sent (brokers talk to each other over INTERNAL).
            .property(
                "listener.name.client.oauthbearer.sasl.jaas.config",
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
                 unsecuredLoginStringClaim_sub=\"broker\";",
            ),
    )
}

/// Two Kafka clusters whose client listener takes OAUTHBEARER tokens signed by `oidc`'s issuer
/// `issuer`, checked by Kafka's own JWT validator (`OAuthBearerValidatorCallbackHandler`: the
/// signature against the issuer's JWKS, `iss`, `aud` = "kafka", `exp`), with sessions of at most
/// 5 minutes, shorter when the token expires sooner (KIP-368), so a client must re-authenticate
/// with a fresh token before its token expires.
pub fn oidc_clusters(oidc: &OidcServer, issuer: &str) -> Clusters {
    let jwks = oidc.jwks_url(issuer);
    Clusters::start_with(
        ClusterOptions::default()
            .property(
                "listeners",
                "CLIENT://127.0.0.1:@PORT@,CONTROLLER://127.0.0.1:@CONTROLLER_PORT@,\
                 INTERNAL://127.0.0.1:@INTERNAL_PORT@",
            )
            .property(
                "advertised.listeners",
                "CLIENT://127.0.0.1:@PORT@,INTERNAL://127.0.0.1:@INTERNAL_PORT@",
            )
            .property(
                "listener.security.protocol.map",
                "CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,CLIENT:SASL_PLAINTEXT",
            )
            .property(
                "listener.name.client.sasl.enabled.mechanisms",
                "OAUTHBEARER",
            )
            .property(
                "listener.name.client.oauthbearer.sasl.jaas.config",
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
                 unsecuredLoginStringClaim_sub=\"broker\";",
            )
            .property(
                "listener.name.client.oauthbearer.sasl.server.callback.handler.class",
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
            )
            // Named, not left to the default: Kafka 4.1.1's default validator class
            // (`DefaultJwtValidator`), made by the callback handler without a key resolver,
            // checks a token as a client does (structure, `exp`, `sub`), not its signature.
            .property(
                "sasl.oauthbearer.jwt.validator.class",
                "org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator",
            )
            .property("sasl.oauthbearer.jwks.endpoint.url", &jwks)
            .property("sasl.oauthbearer.expected.audience", "kafka")
            .property("sasl.oauthbearer.expected.issuer", &oidc.issuer(issuer))
            .property("connections.max.reauth.ms", "300000")
            // Kafka 4 fetches keys only from the URLs this system property lists.
            .jvm_option(&format!(
                "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={jwks}"
            )),
    )
}

/// TLS trusting the CA certificate `ca_der` only.
pub fn tls_trusting(ca_der: &[u8]) -> Arc<TlsConfig> {
    Arc::new(
        TlsConfig::new(TlsOptions {
            trust: Trust::Certificates(vec![ca_der.to_vec().into()]),
            trust_origin: "the test CA".into(),
            ..TlsOptions::default()
        })
        .expect("TLS config"),
    )
}

/// The error a connect fails with: the cause, when every bootstrap broker failed.
pub fn cause(e: Error) -> Error {
    match e {
        Error::NoBootstrap { last, .. } => *last,
        other => other,
    }
}

/// Connects to `bootstrap` with `security` and expects it to fail at once (`what` fails: a
/// refusal is not retried for `default.api.timeout.ms`): the error and its message as shown.
pub async fn failed_connect(bootstrap: &str, security: Security, what: &str) -> (Error, String) {
    let started = Instant::now();
    let err = Client::connect(config(bootstrap, security))
        .await
        .expect_err("connect must fail");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{what} took {:?}: was it retried?",
        started.elapsed()
    );
    let shown = err.to_string();
    eprintln!("{shown}");
    (err, shown)
}

/// An error's `cluster` and `broker`, and its message `shown`, name cluster [`ALIAS`] and the
/// broker `bootstrap`.
pub fn assert_names_broker(cluster: Option<&str>, broker: &str, bootstrap: &str, shown: &str) {
    assert_eq!(cluster, Some(ALIAS));
    assert_eq!(broker, bootstrap);
    assert!(shown.contains(&format!("cluster `{ALIAS}`")), "{shown}");
    assert!(shown.contains(bootstrap), "{shown}");
}

/// One uncompressed batch of `n` records `key-i` / `tag-i`.
pub fn batch(tag: &str, n: usize) -> RawBatch {
    let now = 1_700_000_000_000;
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: i as i32,
            timestamp: now + i as i64,
            key: Some(Bytes::from(format!("key-{i}"))),
            value: Some(Bytes::from(format!("{tag}-{i}"))),
            headers: Default::default(),
            delete_horizon: false,
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, records.iter(), &options).expect("encode batch");
    BatchScanner::new(buf.freeze())
        .next()
        .expect("one batch")
        .expect("well-formed batch")
}

/// (offset, key, value) of every record of `batches`.
fn records_of(batches: &[RawBatch]) -> Vec<(i64, Option<Bytes>, Option<Bytes>)> {
    batches
        .iter()
        .flat_map(|b| {
            let base = b.header.base_offset;
            strait_wire::records::batch_records(b)
                .expect("records decode")
                .into_iter()
                .map(move |r| (base + i64::from(r.offset_delta), r.key, r.value))
        })
        .collect()
}

/// Creates a topic, produces two batches through the raw idempotent producer, fetches them
/// back, and checks offsets and record bytes: the secured connection carries real traffic.
pub async fn produce_and_fetch(client: &Client, topic: &str) {
    client
        .create_topic(NewTopic::new(topic, 1))
        .await
        .expect("create topic");
    let tp = TopicPartition::new(topic, 0);
    let producer = RawProducer::new(client.clone(), ProducerConfig::default())
        .await
        .expect("idempotent producer");
    let sent = [batch("first", 3), batch("second", 5)];
    let mut next = 0;
    let mut expected = Vec::new();
    for b in &sent {
        let ack = producer.send(&tp, b).await.expect("produce");
        assert_eq!(ack.base_offset, next);
        assert_eq!(ack.record_count, b.header.record_count);
        next += i64::from(ack.record_count);
        for (delta, key, value) in records_of(std::slice::from_ref(b)) {
            expected.push((ack.base_offset + delta, key, value));
        }
    }
    let options = FetchOptions {
        max_wait: Duration::from_millis(100),
        isolation: IsolationLevel::ReadUncommitted,
        ..FetchOptions::default()
    };
    // A fetch may stop before the high watermark: read on until it.
    let mut fetched: Vec<RawBatch> = Vec::new();
    let mut offset = 0;
    for _ in 0..20 {
        let mut results = client
            .fetch(&[FetchPosition::new(tp.clone(), offset)], &options)
            .await;
        let data = results
            .remove(&tp)
            .expect("an entry for the partition")
            .expect("fetch");
        assert_eq!(data.high_watermark, 8);
        for b in BatchScanner::new(data.records.clone()) {
            let b = b.expect("well-formed batch");
            if b.header.next_offset() > offset {
                offset = b.header.next_offset();
                fetched.push(b);
            }
        }
        if offset >= 8 {
            break;
        }
    }
    // The two batches as sent, and every record back at its offset with its key and value.
    let counts: Vec<i32> = fetched.iter().map(|b| b.header.record_count).collect();
    assert_eq!(counts, [3, 5], "batch boundaries");
    assert_eq!(records_of(&fetched), expected);
    assert_eq!(expected.len(), 8);
}
