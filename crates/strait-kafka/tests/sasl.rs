//! SASL authentication against Apache Kafka (`SecureBroker`: SCRAM-SHA-256, SCRAM-SHA-512 and
//! PLAIN on its client listener; a pair of clusters whose listener takes OAUTHBEARER with
//! Kafka's unsecured validator): each mechanism with produce and fetch, over plain TCP and over
//! TLS, wrong passwords and tokens with the broker's own refusal, a mechanism the broker does
//! not enable, a broker without SASL; and KIP-368 re-authentication with a short
//! `connections.max.reauth.ms`: strait's connection authenticates again before each session
//! ends and keeps working under traffic, where a client that does not is disconnected, and a
//! re-authentication the broker refuses (the password was changed) closes the connection.

mod secure;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    MetadataRequest, RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use strait_kafka::connection::BrokerConnection;
use strait_kafka::sasl::{
    Claim, ClientCredentials, RefreshWindow, SaslConfig, ScramHash, TokenEndpoint, TokenSource,
    UnsecuredToken,
};
use strait_kafka::{Client, Error, Secret, Security};
use strait_testkit::{kafka_tool, OidcServer, Scram, SecureBroker, SecureBrokerOptions, TestCa};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use secure::{
    assert_names_broker, cause, config, failed_connect, oauthbearer_clusters, oidc_clusters,
    produce_and_fetch, tls_trusting,
};

fn scram(hash: ScramHash, user: &str, password: &str) -> SaslConfig {
    SaslConfig::Scram {
        hash,
        username: user.into(),
        password: Secret::new(password),
        token_auth: false,
    }
}

fn plain(user: &str, password: &str) -> SaslConfig {
    SaslConfig::Plain {
        username: user.into(),
        password: Secret::new(password),
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

/// A SASL broker whose sessions last `ms` (`connections.max.reauth.ms`).
fn broker_with_sessions_of(ms: u64) -> SecureBroker {
    SecureBroker::start(SecureBrokerOptions {
        users: users(),
        reauth_ms: Some(ms),
        ..SecureBrokerOptions::default()
    })
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
async fn plain_against_a_real_broker_and_its_refusal_quoted() {
    let broker = SecureBroker::start(SecureBrokerOptions {
        users: users(),
        ..SecureBrokerOptions::default()
    });
    let alice = Client::connect(config(
        &broker.bootstrap,
        sasl_only(plain("alice", "alice-secret-256")),
    ))
    .await
    .expect("PLAIN");
    produce_and_fetch(&alice, "plain").await;

    // A wrong password, and a user the broker does not know: Kafka's own words are quoted.
    for (user, password) in [("alice", "guess-1234"), ("mallory", "alice-secret-256")] {
        let message = auth_failure(
            &broker.bootstrap,
            sasl_only(plain(user, password)),
            password,
        )
        .await;
        assert!(message.contains(&format!("user `{user}`")), "{message}");
        assert!(message.contains("wrong user name or password"), "{message}");
        assert!(
            message.contains("broker says \"Authentication failed: Invalid username or password\""),
            "{message}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mechanism_the_broker_does_not_enable_is_named_with_those_it_does() {
    let broker = SecureBroker::start(SecureBrokerOptions {
        users: users(),
        ..SecureBrokerOptions::default()
    });
    let oauth = SaslConfig::OAuthBearer {
        token: TokenSource::Static(Secret::new("eyJ.token.")),
        extensions: vec![],
    };
    let message = auth_failure(&broker.bootstrap, sasl_only(oauth), "eyJ.token.").await;
    // Kafka lists its enabled mechanisms in no fixed order.
    let enabled = message
        .strip_prefix("OAUTHBEARER is not enabled on the broker; it enables ")
        .and_then(|rest| rest.strip_suffix(" (sasl.mechanism)"))
        .unwrap_or_else(|| panic!("{message}"));
    let mut enabled: Vec<&str> = enabled.split(", ").collect();
    enabled.sort_unstable();
    assert_eq!(
        enabled,
        ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
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

// ---- KIP-368 re-authentication --------------------------------------------------------------

/// Sessions of 3 s: strait's connections (SCRAM and PLAIN) authenticate again before each one
/// ends, while three tasks keep sending on each, and go on working on the same connection; a
/// client that authenticated once and never again is disconnected by the broker at its first
/// request after the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_reauthenticate_before_the_brokers_session_ends() {
    const SESSION_MS: u64 = 3000;
    let broker = broker_with_sessions_of(SESSION_MS);

    // Without re-authentication: the broker says how long the session lasts, answers within
    // it, and closes the connection at the first request after it.
    let (mut once, lifetime) =
        NoReauthClient::plain(&broker.bootstrap, "alice", "alice-secret-256")
            .await
            .expect("PLAIN with the raw client");
    assert_eq!(lifetime, SESSION_MS as i64, "session_lifetime_ms");
    once.metadata().await.expect("metadata within the session");
    tokio::time::sleep(Duration::from_millis(SESSION_MS + 500)).await;
    let err = once
        .metadata()
        .await
        .expect_err("the broker must close a connection whose session ended");
    assert!(
        matches!(
            err.kind(),
            std::io::ErrorKind::UnexpectedEof
                | std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::BrokenPipe
        ),
        "{err}"
    );

    // strait, with traffic from several tasks through at least two re-authentications on one
    // connection each (a request that met a closed connection or a broker refusing requests
    // in the middle of a SASL exchange would fail here: BrokerConnection does not reconnect).
    let mut runs = Vec::new();
    for (user, sasl) in [
        ("bob", scram(ScramHash::Sha512, "bob", "bob-secret-512")),
        ("alice", plain("alice", "alice-secret-256")),
    ] {
        let cfg = config(&broker.bootstrap, sasl_only(sasl));
        let conn = BrokerConnection::connect(&broker.bootstrap, cfg.connection.clone())
            .await
            .unwrap_or_else(|e| panic!("{user}: {e}"));
        runs.push(tokio::spawn(traffic_until_reauthenticated(
            user, conn, 2, SESSION_MS,
        )));
    }
    for run in runs {
        run.await.unwrap();
    }

    // And a client keeps its connection through two sessions, producing and fetching after.
    let client = Client::connect(config(
        &broker.bootstrap,
        sasl_only(scram(ScramHash::Sha512, "bob", "bob-secret-512")),
    ))
    .await
    .unwrap();
    let conn = client.any_connection().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while conn.reauthentications() < 2 {
        assert!(
            Instant::now() < deadline,
            "not two re-authentications in 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let same = client.any_connection().await.unwrap();
    assert!(Arc::ptr_eq(&conn, &same), "the connection was replaced");
    produce_and_fetch(&client, "after-reauth").await;
    assert!(Arc::ptr_eq(&conn, &client.any_connection().await.unwrap()));
}

/// Metadata requests from three tasks on `conn` until it has re-authenticated `times` times
/// (within 20 sessions); every one must succeed.
async fn traffic_until_reauthenticated(
    user: &'static str,
    conn: Arc<BrokerConnection>,
    times: u64,
    session_ms: u64,
) {
    let deadline = Instant::now() + Duration::from_millis(20 * session_ms);
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let conn = Arc::clone(&conn);
        tasks.push(tokio::spawn(async move {
            let mut sent = 0u64;
            while conn.reauthentications() < times {
                assert!(
                    Instant::now() < deadline,
                    "{user}: {} re-authentications after {sent} requests",
                    conn.reauthentications()
                );
                conn.send(&MetadataRequest::default().with_topics(Some(vec![])))
                    .await
                    .unwrap_or_else(|e| panic!("{user}: request {sent}: {e}"));
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
    assert!(sent > 50, "{user}: only {sent} requests");
    assert!(!conn.is_poisoned(), "{user}");
}

/// The user's SCRAM password is changed on the broker (Kafka's `kafka-configs`): the
/// connection's next re-authentication is refused, which closes it with the broker's refusal;
/// a new connection needs the new password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_reauthentication_closes_the_connection() {
    const SESSION_MS: u64 = 3000;
    let broker = broker_with_sessions_of(SESSION_MS);
    let bob = sasl_only(scram(ScramHash::Sha512, "bob", "bob-secret-512"));
    let cfg = config(&broker.bootstrap, bob.clone());
    let conn = BrokerConnection::connect(&broker.bootstrap, cfg.connection.clone())
        .await
        .unwrap();

    // Alice changes bob's password (no authorizer: any authenticated user may).
    let admin = broker.dir().join("alice.properties");
    std::fs::write(
        &admin,
        "security.protocol=SASL_PLAINTEXT\n\
         sasl.mechanism=SCRAM-SHA-256\n\
         sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
         username=\"alice\" password=\"alice-secret-256\";\n",
    )
    .unwrap();
    let bootstrap = broker.bootstrap.clone();
    tokio::task::spawn_blocking(move || {
        kafka_tool(
            "org.apache.kafka.tools.ConfigCommand",
            &[
                "--bootstrap-server",
                &bootstrap,
                "--command-config",
                admin.to_str().unwrap(),
                "--alter",
                "--entity-type",
                "users",
                "--entity-name",
                "bob",
                "--add-config",
                "SCRAM-SHA-512=[iterations=4096,password=bob-new-secret]",
            ],
        )
    })
    .await
    .unwrap();

    let deadline = Instant::now() + Duration::from_millis(10 * SESSION_MS);
    while !conn.is_poisoned() {
        assert!(
            Instant::now() < deadline,
            "still open 10 sessions after the password changed ({} re-authentications)",
            conn.reauthentications()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let err = conn
        .send(&MetadataRequest::default().with_topics(Some(vec![])))
        .await
        .unwrap_err();
    match &err {
        Error::Authentication {
            mechanism, message, ..
        } => {
            assert_eq!(*mechanism, "SCRAM-SHA-512");
            assert!(message.contains("user `bob`"), "{message}");
            assert!(message.contains("wrong user name or password"), "{message}");
            assert!(
                message.contains("broker says \"Authentication failed during re-authentication"),
                "{message}"
            );
        }
        other => panic!("expected an authentication error, got {other}"),
    }
    assert!(!err.is_retriable());

    // New connections: the old password is refused, the new one works.
    auth_failure(&broker.bootstrap, bob, "bob-secret-512").await;
    let client = Client::connect(config(
        &broker.bootstrap,
        sasl_only(scram(ScramHash::Sha512, "bob", "bob-new-secret")),
    ))
    .await
    .expect("the new password");
    produce_and_fetch(&client, "new-password").await;
}

/// A client that authenticates once (PLAIN) and never again, as clients before Kafka 2.2
/// (KIP-368) do: raw frames over TCP, SaslHandshake v1, SaslAuthenticate v2, Metadata v12.
struct NoReauthClient {
    stream: TcpStream,
    next_correlation: i32,
}

impl NoReauthClient {
    /// Connects and authenticates; also returns the session lifetime the broker set (ms).
    async fn plain(addr: &str, user: &str, password: &str) -> std::io::Result<(Self, i64)> {
        let mut client = NoReauthClient {
            stream: TcpStream::connect(addr).await?,
            next_correlation: 1,
        };
        let handshake = client
            .send(
                1,
                &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
            )
            .await?;
        assert_eq!(handshake.error_code, 0, "{handshake:?}");
        let auth = client
            .send(
                2,
                &SaslAuthenticateRequest::default()
                    .with_auth_bytes(Bytes::from(format!("\0{user}\0{password}"))),
            )
            .await?;
        assert_eq!(auth.error_code, 0, "{auth:?}");
        Ok((client, auth.session_lifetime_ms))
    }

    async fn metadata(&mut self) -> std::io::Result<()> {
        let answer = self
            .send(12, &MetadataRequest::default().with_topics(Some(vec![])))
            .await?;
        assert!(!answer.brokers.is_empty(), "{answer:?}");
        Ok(())
    }

    async fn send<R: Request + Sync>(
        &mut self,
        version: i16,
        request: &R,
    ) -> std::io::Result<R::Response> {
        let correlation_id = self.next_correlation;
        self.next_correlation += 1;
        let mut frame = BytesMut::new();
        frame.put_i32(0);
        RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("no-reauth")))
            .encode(&mut frame, R::header_version(version))
            .map_err(std::io::Error::other)?;
        request
            .encode(&mut frame, version)
            .map_err(std::io::Error::other)?;
        let size = (frame.len() - 4) as i32;
        frame[..4].copy_from_slice(&size.to_be_bytes());
        self.stream.write_all(&frame).await?;
        let size = self.stream.read_i32().await?;
        let mut answer = vec![0; size as usize];
        self.stream.read_exact(&mut answer).await?;
        let mut answer = Bytes::from(answer);
        let header = ResponseHeader::decode(&mut answer, R::Response::header_version(version))
            .map_err(std::io::Error::other)?;
        assert_eq!(header.correlation_id, correlation_id);
        let response = R::Response::decode(&mut answer, version).map_err(std::io::Error::other)?;
        assert!(!answer.has_remaining(), "bytes left after the answer");
        Ok(response)
    }
}

// ---- OAUTHBEARER ---------------------------------------------------------------------------

/// An unsigned JWT for `sub`, issued now and expiring `expires_in` seconds from now (in the
/// past when negative).
fn unsigned_jwt(sub: &str, expires_in: i64) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let b64 = |json: String| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json);
    format!(
        "{}.{}.",
        b64(r#"{"alg":"none"}"#.to_owned()),
        b64(format!(
            r#"{{"sub":"{sub}","iat":{},"exp":{}}}"#,
            now.min(now + expires_in - 60),
            now + expires_in
        ))
    )
}

fn oauth(token: TokenSource, extensions: Vec<(String, String)>) -> Security {
    sasl_only(SaslConfig::OAuthBearer { token, extensions })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauthbearer_static_file_and_unsecured_tokens_against_a_real_broker() {
    let clusters = oauthbearer_clusters();
    let bootstrap = &clusters.source.bootstrap;

    // A token in the config, with a SASL extension.
    let client = Client::connect(config(
        bootstrap,
        oauth(
            TokenSource::Static(Secret::new(unsigned_jwt("mirror", 3600))),
            vec![("traceId".into(), "42".into())],
        ),
    ))
    .await
    .expect("static token");
    produce_and_fetch(&client, "oauth-static").await;

    // A token file, read again at every authentication: a fresh token is accepted, the same
    // file holding an expired one then refused.
    let file = clusters.dir().join("token.jwt");
    std::fs::write(&file, format!("{}\n", unsigned_jwt("mirror", 3600))).unwrap();
    let client = Client::connect(config(
        bootstrap,
        oauth(TokenSource::File(file.clone()), vec![]),
    ))
    .await
    .expect("file token");
    assert!(client
        .refresh_metadata()
        .await
        .unwrap()
        .topics
        .contains_key("oauth-static"));
    let expired = unsigned_jwt("mirror", -600);
    std::fs::write(&file, &expired).unwrap();
    let message = auth_failure(
        bootstrap,
        oauth(TokenSource::File(file.clone()), vec![]),
        &expired,
    )
    .await;
    assert!(message.contains("refused the token"), "{message}");

    // Kafka's unsecured JWT, made by strait (`unsecuredLogin*` JAAS options).
    let unsecured = UnsecuredToken {
        principal_claim: "sub".into(),
        principal: "mirror".into(),
        claims: vec![("scope".into(), Claim::List(vec!["kafka".into()]))],
        lifetime: Duration::from_secs(3600),
    };
    let client = Client::connect(config(
        bootstrap,
        oauth(TokenSource::Unsecured(unsecured), vec![]),
    ))
    .await
    .expect("unsecured token");
    produce_and_fetch(&client, "oauth-unsecured").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_oauthbearer_token_shows_the_brokers_status() {
    // Kafka answers a bad token with a JSON status and waits for `\x01` before it fails the
    // exchange (RFC 7628 §3.2.3).
    let clusters = oauthbearer_clusters();
    let bootstrap = &clusters.source.bootstrap;
    for token in [unsigned_jwt("mirror", -600), "not.a.jwt".to_owned()] {
        let message = auth_failure(
            bootstrap,
            oauth(TokenSource::Static(Secret::new(token.clone())), vec![]),
            &token,
        )
        .await;
        assert!(
            message.contains(r#"refused the token ({"status":"invalid_token"})"#),
            "{message}"
        );
    }
}

// ---- OAUTHBEARER with the client credentials grant ----------------------------------------

/// Client credentials for `url` as an MM2 file gives them (the server accepts any secret).
fn client_credentials(url: &str) -> ClientCredentials {
    ClientCredentials {
        url: url.to_owned(),
        client_id: "mirror-client".into(),
        client_secret: Secret::new("mirror-secret"),
        scope: Some("kafka".into()),
        urlencode_header: false,
        tls: None,
        connect_timeout: Duration::from_secs(5),
        read_timeout: Duration::from_secs(5),
        retry_backoff: Duration::from_millis(100),
        retry_backoff_max: Duration::from_secs(2),
        sub_claim: "sub".into(),
        refresh: RefreshWindow::default(),
    }
}

/// A real identity provider (mock-oauth2-server) signs short-lived tokens (12 s); the broker
/// checks them with Kafka's own JWT validator against the provider's keys. strait fetches a
/// token, keeps it, and fetches a new one before it expires: traffic on one connection
/// through several token lifetimes (each re-authentication with a fresh token, or the broker
/// would refuse it or close the connection), and a new connection after the first token has
/// expired, all succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauthbearer_client_credentials_against_a_real_identity_provider() {
    let dir = tempdir("strait-oidc");
    let oidc = OidcServer::start(&dir);
    let clusters = oidc_clusters(&oidc, OidcServer::SHORT);
    let bootstrap = &clusters.source.bootstrap;
    let endpoint = Arc::new(TokenEndpoint::new(client_credentials(
        &oidc.token_url(OidcServer::SHORT),
    )));
    let security = oauth(TokenSource::Endpoint(Arc::clone(&endpoint)), vec![]);

    let client = Client::connect(config(bootstrap, security.clone()))
        .await
        .expect("a token from the identity provider");
    produce_and_fetch(&client, "oauth-client-credentials").await;
    assert_eq!(
        endpoint.tokens_fetched(),
        1,
        "one token for every connection"
    );

    // Three token lifetimes of traffic on one connection.
    let conn = client.any_connection().await.unwrap();
    traffic_until_reauthenticated(
        "mirror-client",
        Arc::clone(&conn),
        3,
        OidcServer::SHORT_LIFETIME_S * 1000,
    )
    .await;
    assert!(
        endpoint.tokens_fetched() >= 3,
        "{} tokens fetched in three lifetimes",
        endpoint.tokens_fetched()
    );
    assert!(Arc::ptr_eq(&conn, &client.any_connection().await.unwrap()));
    produce_and_fetch(&client, "oauth-after-refresh").await;

    // A new client long after the first token expired.
    let fresh = Client::connect(config(bootstrap, security))
        .await
        .expect("a new connection with a refreshed token");
    produce_and_fetch(&fresh, "oauth-fresh-client").await;
}

/// What goes wrong on the way to a token says so: a token the broker does not accept (another
/// issuer's, for another audience), an endpoint that answers 405 (not retried), one that is not there
/// (retried until `sasl.login.retry.backoff.max.ms`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauthbearer_client_credentials_failures_say_why() {
    let dir = tempdir("strait-oidc-refused");
    let oidc = OidcServer::start(&dir);
    let clusters = oidc_clusters(&oidc, OidcServer::SHORT);
    let bootstrap = &clusters.source.bootstrap;
    let fail = |url: String| async move {
        let mut credentials = client_credentials(&url);
        credentials.scope = Some("other".into());
        let endpoint = TokenEndpoint::new(credentials);
        let security = oauth(TokenSource::Endpoint(Arc::new(endpoint)), vec![]);
        failed_connect(bootstrap, security, &url).await.1
    };

    // The broker checks signatures: Kafka's unsigned test token is refused.
    let unsigned = unsigned_jwt("mirror-client", 3600);
    let (_, shown) = failed_connect(
        bootstrap,
        oauth(TokenSource::Static(Secret::new(unsigned)), vec![]),
        "unsigned token",
    )
    .await;
    assert!(shown.contains("refused the token"), "{shown}");

    let refused = fail(oidc.token_url("default")).await;
    assert!(
        refused.contains(r#"refused the token ({"status":"invalid_token"})"#),
        "{refused}"
    );

    let missing = fail(format!("{}/short/nowhere", oidc.base)).await;
    assert!(
        missing.contains("gave no token (1 attempt)") && missing.contains("HTTP 405"),
        "{missing}"
    );

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let unreachable = fail(format!("http://127.0.0.1:{port}/token")).await;
    assert!(
        unreachable.contains("cannot connect to 127.0.0.1") && unreachable.contains(" attempts)"),
        "{unreachable}"
    );
}

fn tempdir(prefix: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "{prefix}-{}-{}",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
