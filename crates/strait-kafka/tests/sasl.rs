//! SASL authentication. Against a real broker (nisshi `--authentication`, which enables
//! SCRAM-SHA-256 and SCRAM-SHA-512): both SCRAM mechanisms with produce and fetch, over plain
//! TCP and over TLS, a wrong password, mechanisms the broker does not enable (PLAIN,
//! OAUTHBEARER: the broker's own answer), a broker without SASL, and re-authentication when the
//! broker's session (60 s) ends. Against the scripted fake broker: what nisshi cannot show
//! (PLAIN and OAUTHBEARER accepted, the bytes of each mechanism, the broker's refusal messages,
//! short sessions re-authenticated with traffic flowing, a refused re-authentication).

mod fake;
mod secure;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, MetadataRequest, SaslAuthenticateResponse, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use strait_kafka::connection::BrokerConnection;
use strait_kafka::sasl::{Claim, SaslConfig, ScramHash, TokenSource, UnsecuredToken};
use strait_kafka::{Client, Error, Secret, Security};
use strait_testkit::{Scram, SecureBroker, SecureBrokerOptions, TestCa};

use fake::{script, Action, Body, FakeCluster, Received};
use secure::{assert_names_broker, cause, config, failed_connect, produce_and_fetch, tls_trusting};

fn scram(hash: ScramHash, user: &str, password: &str) -> SaslConfig {
    SaslConfig::Scram {
        hash,
        username: user.into(),
        password: Secret::new(password),
        token_auth: false,
    }
}

fn sasl_only(sasl: SaslConfig) -> Security {
    Security {
        tls: None,
        sasl: Some(Arc::new(sasl)),
    }
}

/// Connects and expects a SASL error naming cluster A and the broker; returns its message.
async fn auth_failure(bootstrap: &str, security: Security, secret: &str) -> String {
    let (err, shown) = failed_connect(bootstrap, security, "an authentication failure").await;
    assert!(
        !shown.contains(secret),
        "the secret is in the message: {shown}"
    );
    assert!(
        !format!("{err:?}").contains(secret),
        "the secret is in Debug: {err:?}"
    );
    match cause(err) {
        Error::Authentication {
            cluster,
            broker,
            message,
            ..
        } => {
            assert_names_broker(cluster.as_deref(), &broker, bootstrap, &shown);
            message.into()
        }
        other => panic!("expected an authentication error, got: {other}"),
    }
}

fn users() -> Vec<(String, String, Scram)> {
    vec![
        ("alice".into(), "alice-secret-256".into(), Scram::Sha256),
        ("bob".into(), "bob-secret-512".into(), Scram::Sha512),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_sha_256_and_512_against_a_real_broker() {
    let broker = SecureBroker::start(SecureBrokerOptions {
        users: users(),
        ..SecureBrokerOptions::default()
    });
    let alice = Client::connect(config(
        &broker.bootstrap,
        sasl_only(scram(ScramHash::Sha256, "alice", "alice-secret-256")),
    ))
    .await
    .expect("SCRAM-SHA-256");
    produce_and_fetch(&alice, "scram-256").await;
    let bob = Client::connect(config(
        &broker.bootstrap,
        sasl_only(scram(ScramHash::Sha512, "bob", "bob-secret-512")),
    ))
    .await
    .expect("SCRAM-SHA-512");
    let metadata = bob.refresh_metadata().await.unwrap();
    assert!(metadata.topics.contains_key("scram-256"));
    produce_and_fetch(&bob, "scram-512").await;

    // A wrong password.
    let message = auth_failure(
        &broker.bootstrap,
        sasl_only(scram(ScramHash::Sha256, "alice", "not-her-password")),
        "not-her-password",
    )
    .await;
    assert!(message.contains("wrong user name or password"), "{message}");
    // A user the broker does not know (alice has no SCRAM-SHA-512 credential).
    let message = auth_failure(
        &broker.bootstrap,
        sasl_only(scram(ScramHash::Sha512, "alice", "alice-secret-256")),
        "alice-secret-256",
    )
    .await;
    assert!(message.contains("wrong user name or password"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_ssl_scram_512_against_a_real_broker() {
    let ca = TestCa::new("strait test CA");
    let broker = SecureBroker::start(SecureBrokerOptions {
        tls: Some(ca.server_cert(&["127.0.0.1"])),
        users: users(),
        ..SecureBrokerOptions::default()
    });
    let security = Security {
        tls: Some(tls_trusting(ca.der())),
        sasl: Some(Arc::new(scram(ScramHash::Sha512, "bob", "bob-secret-512"))),
    };
    assert_eq!(security.protocol(), "SASL_SSL");
    let client = Client::connect(config(&broker.bootstrap, security))
        .await
        .expect("SASL_SSL");
    produce_and_fetch(&client, "sasl-ssl").await;
    let wrong = Security {
        tls: Some(tls_trusting(ca.der())),
        sasl: Some(Arc::new(scram(ScramHash::Sha512, "bob", "bad-password"))),
    };
    let message = auth_failure(&broker.bootstrap, wrong, "bad-password").await;
    assert!(message.contains("wrong user name or password"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mechanisms_the_real_broker_does_not_enable_are_named() {
    let broker = SecureBroker::start(SecureBrokerOptions {
        users: users(),
        ..SecureBrokerOptions::default()
    });
    let plain = SaslConfig::Plain {
        username: "alice".into(),
        password: Secret::new("alice-secret-256"),
    };
    let message = auth_failure(&broker.bootstrap, sasl_only(plain), "alice-secret-256").await;
    assert!(
        message.contains(
            "PLAIN is not enabled on the broker; it enables SCRAM-SHA-512, SCRAM-SHA-256"
        ),
        "{message}"
    );
    let oauth = SaslConfig::OAuthBearer {
        token: TokenSource::Static(Secret::new("eyJ.token.")),
        extensions: vec![],
    };
    let message = auth_failure(&broker.bootstrap, sasl_only(oauth), "eyJ.token.").await;
    assert!(
        message.contains("OAUTHBEARER is not enabled on the broker"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_to_a_real_broker_without_sasl_says_so() {
    let broker = SecureBroker::start(SecureBrokerOptions::default());
    let message = auth_failure(
        &broker.bootstrap,
        sasl_only(scram(ScramHash::Sha256, "alice", "pw-1234")),
        "pw-1234",
    )
    .await;
    assert!(message.contains("does not use SASL"), "{message}");
    assert!(message.contains("PLAINTEXT or SSL"), "{message}");
}

/// nisshi limits sessions to 60 s; the connection authenticates again at 51 to 57 s and goes on
/// working, with no new connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reauthenticates_with_a_real_broker_before_its_session_ends() {
    let broker = SecureBroker::start(SecureBrokerOptions {
        users: users(),
        ..SecureBrokerOptions::default()
    });
    let client = Client::connect(config(
        &broker.bootstrap,
        sasl_only(scram(ScramHash::Sha512, "bob", "bob-secret-512")),
    ))
    .await
    .unwrap();
    let conn = client.any_connection().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(75);
    while conn.reauthentications() == 0 {
        assert!(
            Instant::now() < deadline,
            "no re-authentication within 75 s"
        );
        // Traffic meanwhile, as a mirror would have.
        conn.send(&MetadataRequest::default().with_topics(Some(vec![])))
            .await
            .expect("metadata while the session runs");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(!conn.is_poisoned());
    let same = client.any_connection().await.unwrap();
    assert!(Arc::ptr_eq(&conn, &same), "the connection was replaced");
    produce_and_fetch(&client, "after-reauth").await;
}

// ---- the scripted fake broker ----------------------------------------------------------------

/// Starts a fake broker that offers SASL: `on_auth(connection, auth bytes)` answers each
/// SaslAuthenticate; the handshake accepts `enabled`.
async fn sasl_fake(
    enabled: &'static [&'static str],
    on_auth: impl Fn(usize, &[u8]) -> SaslAuthenticateResponse + Send + Sync + 'static,
) -> FakeCluster {
    let fake = FakeCluster::start(
        &[1],
        script(move |_, req: &Received| match &req.body {
            Body::SaslHandshake(h) => {
                let mechanisms = enabled
                    .iter()
                    .map(|m| StrBytes::from_static_str(m))
                    .collect();
                let code = if enabled.contains(&h.mechanism.as_str()) {
                    0
                } else {
                    ResponseError::UnsupportedSaslMechanism.code()
                };
                req.reply(
                    &SaslHandshakeResponse::default()
                        .with_error_code(code)
                        .with_mechanisms(mechanisms),
                )
            }
            Body::SaslAuthenticate(a) => req.reply(&on_auth(req.conn, &a.auth_bytes)),
            _ => Action::Default,
        }),
    )
    .await;
    let mut spec = fake.spec();
    spec.api_versions.push((ApiKey::SaslHandshake, 0, 1));
    spec.api_versions.push((ApiKey::SaslAuthenticate, 0, 2));
    drop(spec);
    fake
}

fn ok(lifetime_ms: i64) -> SaslAuthenticateResponse {
    SaslAuthenticateResponse::default().with_session_lifetime_ms(lifetime_ms)
}

fn refused(message: &str) -> SaslAuthenticateResponse {
    SaslAuthenticateResponse::default()
        .with_error_code(ResponseError::SaslAuthenticationFailed.code())
        .with_error_message(Some(StrBytes::from_string(message.to_owned())))
}

/// The token in an OAUTHBEARER initial response.
fn bearer(bytes: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(bytes).ok()?;
    let rest = text.strip_prefix("n,,\x01auth=Bearer ")?;
    Some(rest.split('\x01').next()?.to_owned())
}

#[tokio::test]
async fn plain_is_sent_as_rfc_4616_says_and_refusals_quote_the_broker() {
    let fake = sasl_fake(&["PLAIN"], |_, bytes| {
        if bytes == b"\0alice\0open sesame" {
            ok(0)
        } else {
            refused("Authentication failed: Invalid username or password")
        }
    })
    .await;
    let plain = |password: &str| {
        sasl_only(SaslConfig::Plain {
            username: "alice".into(),
            password: Secret::new(password),
        })
    };
    let client = Client::connect(config(&fake.addr(1), plain("open sesame")))
        .await
        .expect("PLAIN accepted");
    client.refresh_metadata().await.unwrap();
    let apis: Vec<ApiKey> = fake.received().iter().map(|r| r.api).collect();
    assert_eq!(
        &apis[..4],
        &[
            ApiKey::ApiVersions,
            ApiKey::SaslHandshake,
            ApiKey::SaslAuthenticate,
            ApiKey::Metadata
        ]
    );

    let message = auth_failure(&fake.addr(1), plain("guess"), "guess").await;
    assert!(message.contains("user `alice`"), "{message}");
    assert!(message.contains("wrong user name or password"), "{message}");
    assert!(
        message.contains("broker says \"Authentication failed: Invalid username or password\""),
        "{message}"
    );

    // A mechanism the broker does not enable.
    let scram = sasl_only(scram(ScramHash::Sha256, "alice", "open sesame"));
    let message = auth_failure(&fake.addr(1), scram, "open sesame").await;
    assert!(
        message.contains("SCRAM-SHA-256 is not enabled on the broker; it enables PLAIN"),
        "{message}"
    );
}

#[tokio::test]
async fn oauthbearer_static_file_and_unsecured_tokens() {
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = Arc::clone(&seen);
    let fake = sasl_fake(&["OAUTHBEARER"], move |_, bytes| match bearer(bytes) {
        Some(token) => {
            log.lock().unwrap().push(token);
            ok(0)
        }
        None => refused("not an OAUTHBEARER initial response"),
    })
    .await;
    let connect = |token: TokenSource, extensions: Vec<(String, String)>| {
        Client::connect(config(
            &fake.addr(1),
            sasl_only(SaslConfig::OAuthBearer { token, extensions }),
        ))
    };

    connect(
        TokenSource::Static(Secret::new("static.jwt.value")),
        vec![("traceId".into(), "42".into())],
    )
    .await
    .expect("static token");
    let sent = fake.requests(ApiKey::SaslAuthenticate);
    let Body::SaslAuthenticate(first) = &sent[0].body else {
        unreachable!()
    };
    assert_eq!(
        first.auth_bytes,
        Bytes::from_static(b"n,,\x01auth=Bearer static.jwt.value\x01traceId=42\x01\x01")
    );

    // A token file, read again at every authentication.
    let dir = std::env::temp_dir().join(format!("strait-sasl-token-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("token.jwt");
    std::fs::write(&file, "file.token.one\n").unwrap();
    connect(TokenSource::File(file.clone()), vec![])
        .await
        .expect("file token");
    std::fs::write(&file, "file.token.two").unwrap();
    connect(TokenSource::File(file.clone()), vec![])
        .await
        .expect("refreshed file token");
    std::fs::remove_dir_all(&dir).unwrap();

    // Kafka's unsecured JWT.
    let unsecured = UnsecuredToken {
        principal_claim: "sub".into(),
        principal: "mirror".into(),
        claims: vec![("scope".into(), Claim::List(vec!["kafka".into()]))],
        lifetime: Duration::from_secs(3600),
    };
    connect(TokenSource::Unsecured(unsecured), vec![])
        .await
        .expect("unsecured token");

    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        &seen[..3],
        &["static.jwt.value", "file.token.one", "file.token.two"]
    );
    let parts: Vec<&str> = seen[3].split('.').collect();
    assert_eq!(parts.len(), 3, "{}", seen[3]);
    assert_eq!(parts[2], "", "an unsecured JWT has no signature");
    use base64::Engine as _;
    let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(parts[1])
        .unwrap();
    let claims = String::from_utf8(claims).unwrap();
    assert!(claims.contains(r#""sub":"mirror""#), "{claims}");
    assert!(claims.contains(r#""scope":["kafka"]"#), "{claims}");
}

#[tokio::test]
async fn a_refused_oauthbearer_token_shows_the_brokers_status() {
    // Kafka's broker answers a bad token with a JSON status and waits for `\x01` before it
    // fails the exchange (RFC 7628 §3.2.3).
    let fake = sasl_fake(&["OAUTHBEARER"], |_, bytes| {
        if bytes == [0x01] {
            refused("Authentication failed: invalid token")
        } else {
            SaslAuthenticateResponse::default()
                .with_auth_bytes(Bytes::from_static(br#"{"status":"invalid_token"}"#))
        }
    })
    .await;
    let oauth = SaslConfig::OAuthBearer {
        token: TokenSource::Static(Secret::new("expired.jwt.x")),
        extensions: vec![],
    };
    let message = auth_failure(&fake.addr(1), sasl_only(oauth), "expired.jwt.x").await;
    assert!(
        message.contains(r#"refused the token ({"status":"invalid_token"})"#),
        "{message}"
    );
    assert!(message.contains("invalid token"), "{message}");
    let last = fake.requests(ApiKey::SaslAuthenticate);
    let Body::SaslAuthenticate(ack) = &last[last.len() - 1].body else {
        unreachable!()
    };
    assert_eq!(ack.auth_bytes, Bytes::from_static(&[0x01]));
}

#[tokio::test]
async fn short_sessions_are_renewed_while_requests_flow() {
    let fake = sasl_fake(&["PLAIN"], |_, _| ok(600)).await;
    let sasl = SaslConfig::Plain {
        username: "alice".into(),
        password: Secret::new("pw"),
    };
    let mut cfg = config(&fake.addr(1), sasl_only(sasl));
    cfg.connection.request_timeout = Duration::from_secs(2);
    let conn = BrokerConnection::connect(&fake.addr(1), cfg.connection.clone())
        .await
        .unwrap();
    // Requests from several tasks for 2.5 s, through four or five sessions.
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let conn = Arc::clone(&conn);
        tasks.push(tokio::spawn(async move {
            let until = Instant::now() + Duration::from_millis(2500);
            let mut n = 0;
            while Instant::now() < until {
                conn.send(&MetadataRequest::default().with_topics(Some(vec![])))
                    .await
                    .expect("metadata during re-authentication");
                n += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            n
        }));
    }
    let mut requests = 0;
    for t in tasks {
        requests += t.await.unwrap();
    }
    assert!(requests > 100, "{requests}");
    assert!(
        conn.reauthentications() >= 3,
        "{}",
        conn.reauthentications()
    );
    assert!(!conn.is_poisoned());
    assert_eq!(fake.connections(1), 1, "one connection throughout");
    // Nothing else reached the broker in the middle of an exchange.
    let received = fake.received();
    for (i, r) in received.iter().enumerate() {
        if r.api == ApiKey::SaslHandshake {
            assert_eq!(
                received.get(i + 1).map(|n| n.api),
                Some(ApiKey::SaslAuthenticate),
                "request {i}: the handshake is followed by its exchange"
            );
        }
    }
    let handshakes = fake.requests(ApiKey::SaslHandshake).len() as u64;
    assert_eq!(handshakes, conn.reauthentications() + 1);
}

#[tokio::test]
async fn a_refused_reauthentication_closes_the_connection() {
    // The first authentication passes; the broker refuses the re-authentication (the user's
    // password was changed, say).
    let count = Arc::new(Mutex::new(0));
    let counter = Arc::clone(&count);
    let fake = sasl_fake(&["PLAIN"], move |_, _| {
        let mut n = counter.lock().unwrap();
        *n += 1;
        if *n == 1 {
            ok(300)
        } else {
            refused("credentials revoked")
        }
    })
    .await;
    let sasl = SaslConfig::Plain {
        username: "alice".into(),
        password: Secret::new("pw"),
    };
    let cfg = config(&fake.addr(1), sasl_only(sasl));
    let conn = BrokerConnection::connect(&fake.addr(1), cfg.connection.clone())
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    while !conn.is_poisoned() {
        assert!(
            Instant::now() < deadline,
            "still open after a refused re-authentication"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let err = conn
        .send(&MetadataRequest::default().with_topics(Some(vec![])))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Authentication { message, .. } if message.contains("credentials revoked")),
        "{err}"
    );
}
