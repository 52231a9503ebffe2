//! SASL/GSSAPI (Kerberos) against Apache Kafka and an MIT KDC, both started here
//! (`strait_testkit::Kdc`, `SecureBroker` with a GSSAPI listener whose service principal is
//! `kafka/localhost@STRAIT.TEST`), strait using MIT's `libgssapi_krb5.so.2`:
//! a client with a keytab and principal produces and fetches; a wrong service name, a principal
//! the keytab has no key for, a principal the KDC does not know, a key the KDC has replaced and
//! a missing keytab each fail at once with an error that says so; and connections
//! re-authenticate (KIP-368) under traffic, getting new tickets from the keytab when theirs
//! expired.
//!
//! One test: MIT's library reads `KRB5_CONFIG` from the process's environment, so this binary
//! has one KDC.

mod secure;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::MetadataRequest;
use strait_kafka::connection::BrokerConnection;
use strait_kafka::sasl::{GssapiConfig, SaslConfig};
use strait_kafka::{Client, Error, Security};
use strait_testkit::{GssapiListener, Kdc, SecureBroker, SecureBrokerOptions};

use secure::{assert_names_broker, cause, config, failed_connect, produce_and_fetch};

const SESSION_MS: u64 = 4000;

fn gssapi(service: &str, principal: &str, keytab: &Path) -> Security {
    Security {
        tls: None,
        sasl: Some(Arc::new(SaslConfig::Gssapi(GssapiConfig {
            service_name: service.into(),
            principal: Some(principal.into()),
            keytab: Some(keytab.to_owned()),
            ticket_cache: None,
        }))),
    }
}

/// Connects and expects a GSSAPI error naming cluster A and the broker; returns its message.
async fn auth_failure(bootstrap: &str, security: Security) -> String {
    let (err, shown) = failed_connect(bootstrap, security, "a Kerberos failure").await;
    match cause(err) {
        Error::Authentication {
            cluster,
            broker,
            message,
            mechanism,
        } => {
            assert_eq!(mechanism, "GSSAPI");
            assert_names_broker(cluster.as_deref(), &broker, bootstrap, &shown);
            message.into()
        }
        other => panic!("expected an authentication error, got: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gssapi_with_a_keytab_against_a_real_broker_and_kdc() {
    let kdc = Kdc::start();
    // For MIT's library in this process (Java gets -Djava.security.krb5.conf).
    std::env::set_var("KRB5_CONFIG", &kdc.krb5_conf);
    for name in ["kafka/localhost", "mm2", "other", "ghost", "stale", "brief"] {
        kdc.add_principal(name);
    }
    // Tickets of `brief` last 3 s: each re-authentication needs new ones from the keytab.
    kdc.max_ticket_life("brief", 3);
    let broker_keytab = kdc.keytab("kafka.keytab", &["kafka/localhost"]);
    let mm2_keytab = kdc.keytab("mm2.keytab", &["mm2"]);
    let other_keytab = kdc.keytab("other.keytab", &["other"]);
    let ghost_keytab = kdc.keytab("ghost.keytab", &["ghost"]);
    let stale_keytab = kdc.keytab("stale.keytab", &["stale"]);
    let brief_keytab = kdc.keytab("brief.keytab", &["brief"]);
    let broker = SecureBroker::start(SecureBrokerOptions {
        gssapi: Some(GssapiListener {
            service_name: "kafka".into(),
            principal: kdc.principal("kafka/localhost"),
            keytab: broker_keytab,
            krb5_conf: kdc.krb5_conf.clone(),
        }),
        reauth_ms: Some(SESSION_MS),
        ..SecureBrokerOptions::default()
    });
    let bootstrap = &broker.bootstrap;
    assert!(bootstrap.starts_with("localhost:"), "{bootstrap}");
    let mm2 = kdc.principal("mm2");

    // Keytab and principal: produce and fetch, bytes equal.
    let client = Client::connect(config(bootstrap, gssapi("kafka", &mm2, &mm2_keytab)))
        .await
        .unwrap_or_else(|e| {
            panic!(
                "GSSAPI: {e}\nbroker log:\n{}\nKDC log:\n{}",
                broker.log_tail(40),
                kdc.log_tail(20)
            )
        });
    produce_and_fetch(&client, "gssapi").await;

    // The broker authenticated the client as its principal, which is also the authorization
    // id strait sent (as Java's client does): Kafka's SaslServerCallbackHandler logs both.
    let log = std::fs::read_to_string(&broker.log).unwrap_or_default();
    assert!(
        log.contains(&format!("authenticationID={mm2}; authorizationID={mm2}")),
        "the broker's log does not show {mm2} authenticated:\n{}",
        broker.log_tail(30)
    );

    // A wrong service name: the KDC has no `kafkax/localhost`.
    let message = auth_failure(bootstrap, gssapi("kafkax", &mm2, &mm2_keytab)).await;
    assert!(message.contains("kafkax/localhost"), "{message}");
    assert!(message.contains("sasl.kerberos.service.name"), "{message}");
    assert!(
        message
            .to_lowercase()
            .contains("not found in kerberos database"),
        "{message}"
    );

    // A keytab without the principal's key.
    let message = auth_failure(bootstrap, gssapi("kafka", &mm2, &other_keytab)).await;
    assert!(message.contains(&mm2), "{message}");
    assert!(
        message.contains(&other_keytab.display().to_string()),
        "{message}"
    );
    assert!(
        message.contains("the keytab has no key for this principal"),
        "{message}"
    );
    assert!(message.contains(&kdc.principal("other")), "{message}");

    // A principal the KDC does not know (its keytab is from before it was deleted).
    kdc.delete_principal("ghost");
    let ghost = kdc.principal("ghost");
    let message = auth_failure(bootstrap, gssapi("kafka", &ghost, &ghost_keytab)).await;
    assert!(message.contains(&ghost), "{message}");
    assert!(
        message
            .to_lowercase()
            .contains("not found in kerberos database"),
        "{message}"
    );

    // A key the KDC replaced.
    kdc.change_key("stale");
    let stale = kdc.principal("stale");
    let message = auth_failure(bootstrap, gssapi("kafka", &stale, &stale_keytab)).await;
    assert!(message.contains(&stale), "{message}");
    assert!(message.contains("export the keytab again"), "{message}");

    // A keytab that is not there.
    let missing = kdc.dir.join("missing.keytab");
    let message = auth_failure(bootstrap, gssapi("kafka", &mm2, &missing)).await;
    assert!(message.contains("cannot read the keytab"), "{message}");
    assert!(
        message.contains(&missing.display().to_string()),
        "{message}"
    );

    // KIP-368: connections authenticate again before each session ends, under traffic from
    // three tasks, and go on working on the same connection; this one's tickets expire between
    // re-authentications (3 s tickets, 4 s sessions), so each gets new ones from the keytab.
    let brief = kdc.principal("brief");
    let cfg = config(bootstrap, gssapi("kafka", &brief, &brief_keytab));
    let conn = BrokerConnection::connect(bootstrap, cfg.connection.clone())
        .await
        .expect("GSSAPI connection");
    let deadline = Instant::now() + Duration::from_millis(20 * SESSION_MS);
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let conn = Arc::clone(&conn);
        tasks.push(tokio::spawn(async move {
            let mut sent = 0u64;
            while conn.reauthentications() < 2 {
                assert!(
                    Instant::now() < deadline,
                    "{} re-authentications after {sent} requests",
                    conn.reauthentications()
                );
                conn.send(&MetadataRequest::default().with_topics(Some(vec![])))
                    .await
                    .unwrap_or_else(|e| panic!("request {sent}: {e}"));
                sent += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            sent
        }));
    }
    let mut sent = 0;
    for task in tasks {
        sent += task.await.unwrap();
    }
    assert!(sent > 50, "only {sent} requests");
    assert!(!conn.is_poisoned());
    // The KDC issued `brief` new tickets: its first, and again after they expired.
    let log = std::fs::read_to_string(&kdc.log).unwrap_or_default();
    let issued = |request: &str| {
        log.lines()
            .filter(|l| l.contains(request) && l.contains("ISSUE") && l.contains(&brief))
            .count()
    };
    eprintln!(
        "brief: {} AS_REQ, {} TGS_REQ issued",
        issued("AS_REQ"),
        issued("TGS_REQ")
    );
    assert!(
        issued("AS_REQ") >= 2,
        "tickets were not renewed:\n{}",
        kdc.log_tail(20)
    );
    // The client's connection too, producing and fetching after.
    let first = client.any_connection().await.unwrap();
    while first.reauthentications() < 1 {
        assert!(
            Instant::now() < deadline,
            "the client's connection did not re-authenticate"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    produce_and_fetch(&client, "gssapi-after-reauth").await;
    assert!(Arc::ptr_eq(&first, &client.any_connection().await.unwrap()));
}
