//! The OAuth token request on the wire, against a scripted endpoint on loopback (plain HTTP and
//! TLS with a test CA): the exact request Kafka's client sends (method, path, headers, body),
//! retries on answers that may pass and none on those that cannot, the TLS trust the JAAS line
//! gives, a refresh that falls back to the kept token while the endpoint is down. The whole
//! grant against a real identity provider and broker is in `sasl.rs`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use strait_kafka::sasl::{ClientCredentials, RefreshWindow, TokenEndpoint};
use strait_kafka::tls::{TlsConfig, TlsOptions, Trust};
use strait_kafka::Secret;
use strait_testkit::TestCa;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

/// A JWT for `sub` expiring `life` seconds from now (the signature is not checked here).
fn jwt(sub: &str, life: u64) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    format!(
        "{}.{}.c2lnbmF0dXJl",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"RS256","kid":"k"}"#),
        URL_SAFE_NO_PAD.encode(format!(
            r#"{{"sub":"{sub}","iat":{now},"exp":{}}}"#,
            now + life
        ))
    )
}

/// What the endpoint saw: each request's head and body.
type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// Serves `answers` in turn (status, body), one connection each, recording the requests.
async fn endpoint(
    tls: Option<tokio_rustls::TlsAcceptor>,
    answers: Vec<(u16, String)>,
) -> (u16, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Seen = Arc::default();
    let record = Arc::clone(&seen);
    tokio::spawn(async move {
        for (status, body) in answers {
            let (tcp, _) = listener.accept().await.unwrap();
            let record = Arc::clone(&record);
            match &tls {
                Some(acceptor) => {
                    let Ok(stream) = acceptor.accept(tcp).await else {
                        continue;
                    };
                    serve(stream, status, body, record).await;
                }
                None => serve(tcp, status, body, record).await,
            }
        }
    });
    (port, seen)
}

async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    status: u16,
    body: String,
    seen: Seen,
) {
    let mut request = Vec::new();
    let mut buf = [0u8; 4096];
    let (head, mut rest) = loop {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "the client closed before its request ended");
        request.extend_from_slice(&buf[..n]);
        if let Some(at) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8(request[..at].to_vec()).unwrap();
            break (head, request[at + 4..].to_vec());
        }
    };
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .expect("content-length")
        .parse()
        .unwrap();
    while rest.len() < length {
        let n = stream.read(&mut buf).await.unwrap();
        rest.extend_from_slice(&buf[..n]);
    }
    seen.lock()
        .unwrap()
        .push((head, String::from_utf8(rest).unwrap()));
    let answer = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(answer.as_bytes()).await.unwrap();
    let _ = stream.shutdown().await;
}

fn credentials(url: String) -> ClientCredentials {
    ClientCredentials {
        url,
        client_id: "mirror client".into(),
        client_secret: Secret::new("s3cr=t"),
        scope: Some("api://kafka/.default".into()),
        urlencode_header: false,
        tls: None,
        connect_timeout: Duration::from_secs(5),
        read_timeout: Duration::from_secs(5),
        retry_backoff: Duration::from_millis(50),
        retry_backoff_max: Duration::from_secs(2),
        sub_claim: "sub".into(),
        refresh: RefreshWindow::default(),
    }
}

fn answer(token: &str) -> String {
    format!(r#"{{"access_token":"{token}","token_type":"Bearer","expires_in":3600}}"#)
}

#[tokio::test]
async fn the_request_is_the_one_kafkas_client_sends() {
    let token = jwt("mirror", 3600);
    let (port, seen) = endpoint(None, vec![(200, answer(&token))]).await;
    let endpoint = TokenEndpoint::new(credentials(format!(
        "http://127.0.0.1:{port}/oauth2/v2.0/token?tenant=t1"
    )));
    assert_eq!(endpoint.token().await.unwrap().expose(), token);
    let seen = seen.lock().unwrap();
    let (head, body) = &seen[0];
    let mut lines = head.lines();
    assert_eq!(
        lines.next(),
        Some("POST /oauth2/v2.0/token?tenant=t1 HTTP/1.1")
    );
    let headers: Vec<&str> = lines.collect();
    for expected in [
        format!("host: 127.0.0.1:{port}"),
        "accept: application/json".to_owned(),
        format!(
            "authorization: Basic {}",
            STANDARD.encode("mirror client:s3cr=t")
        ),
        "cache-control: no-cache".to_owned(),
        "content-type: application/x-www-form-urlencoded".to_owned(),
        format!("content-length: {}", body.len()),
    ] {
        assert!(
            headers.contains(&expected.as_str()),
            "{expected} not in {headers:?}"
        );
    }
    assert_eq!(
        body,
        "grant_type=client_credentials&scope=api%3A%2F%2Fkafka%2F.default"
    );
}

#[tokio::test]
async fn retried_while_it_may_pass_and_not_when_it_cannot() {
    let token = jwt("mirror", 3600);
    let (port, seen) = endpoint(
        None,
        vec![
            (503, String::new()),
            (500, r#"{"error":"temporarily_unavailable"}"#.into()),
            (200, answer(&token)),
        ],
    )
    .await;
    let endpoint = TokenEndpoint::new(credentials(format!("http://127.0.0.1:{port}/token")));
    assert_eq!(endpoint.token().await.unwrap().expose(), token);
    assert_eq!(seen.lock().unwrap().len(), 3);

    let (port, seen) = endpoint_of(
        401,
        r#"{"error":"invalid_client","error_description":"bad secret"}"#,
    )
    .await;
    let err = TokenEndpoint::new(credentials(format!("http://127.0.0.1:{port}/token")))
        .token()
        .await
        .unwrap_err();
    assert!(
        err.contains(
            "gave no token (1 attempt): HTTP 401 Unauthorized (invalid_client: bad secret)"
        ),
        "{err}"
    );
    assert!(!err.contains("s3cr=t"), "{err}");
    assert_eq!(seen.lock().unwrap().len(), 1);

    let (port, _) = endpoint_of(200, r#"{"token_type":"Bearer"}"#).await;
    let err = TokenEndpoint::new(credentials(format!("http://127.0.0.1:{port}/token")))
        .token()
        .await
        .unwrap_err();
    assert!(err.contains("the answer has no access_token"), "{err}");
}

async fn endpoint_of(status: u16, body: &str) -> (u16, Seen) {
    endpoint(None, vec![(status, body.to_owned())]).await
}

/// The endpoint over TLS: trusted through the CA the JAAS line names, refused with the
/// system's CAs (which do not know the test CA).
#[tokio::test]
async fn https_with_the_trust_the_config_gives() {
    let ca = TestCa::new("strait test IdP CA");
    let cert = ca.server_cert(&["127.0.0.1"]);
    let server = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.cert_der.clone().into(), cert.ca_der.clone().into()],
        rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_der.clone().into()),
    )
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
    let token = jwt("mirror", 3600);
    let (port, seen) = endpoint(
        Some(acceptor),
        vec![(200, answer(&token)), (200, answer(&token))],
    )
    .await;
    let url = format!("https://127.0.0.1:{port}/token");

    let trusting = TlsConfig::new(TlsOptions {
        trust: Trust::Certificates(vec![ca.der().to_vec().into()]),
        trust_origin: "the test CA".into(),
        ..TlsOptions::default()
    })
    .unwrap();
    let mut settings = credentials(url.clone());
    settings.tls = Some(Arc::new(trusting));
    assert_eq!(
        TokenEndpoint::new(settings).token().await.unwrap().expose(),
        token
    );
    assert_eq!(seen.lock().unwrap().len(), 1);

    let system = TlsConfig::new(TlsOptions::default()).expect("the system's CA certificates");
    let mut settings = credentials(url);
    settings.tls = Some(Arc::new(system));
    settings.retry_backoff_max = Duration::ZERO;
    let err = TokenEndpoint::new(settings).token().await.unwrap_err();
    assert!(err.contains("TLS with 127.0.0.1"), "{err}");
    assert!(err.to_lowercase().contains("certificate"), "{err}");
}

/// A token past its refresh time is replaced; while the endpoint is down, the kept token is
/// used until it expires.
#[tokio::test]
async fn a_refresh_that_fails_keeps_the_current_token() {
    let first = jwt("mirror", 10);
    let second = jwt("mirror", 3600);
    let (port, seen) = endpoint(
        None,
        vec![
            (200, answer(&first)),
            (503, String::new()),
            (200, answer(&second)),
        ],
    )
    .await;
    let mut settings = credentials(format!("http://127.0.0.1:{port}/token"));
    settings.retry_backoff_max = Duration::ZERO;
    let endpoint = TokenEndpoint::new(settings);
    assert_eq!(endpoint.token().await.unwrap().expose(), first);
    // A token that short is refreshed at 80-85% of what remains (its `exp` is whole seconds,
    // so 9-10 s): by 8.6 s, and it has not expired yet.
    tokio::time::sleep(Duration::from_millis(8600)).await;
    assert_eq!(
        endpoint.token().await.unwrap().expose(),
        first,
        "kept while the endpoint fails"
    );
    assert_eq!(endpoint.token().await.unwrap().expose(), second);
    assert_eq!(seen.lock().unwrap().len(), 3);
    assert_eq!(endpoint.tokens_fetched(), 2);
}
