//! Amazon MSK IAM authentication without MSK:
//!
//! - strait's `AWS_MSK_IAM` payload and OAUTHBEARER token compared byte for byte with what
//!   Amazon's own `aws-msk-iam-auth` library (Maven Central, the version `scripts/msk-iam/pom.xml`
//!   pins, installed by `scripts/test-broker install`) makes with the same credentials, host
//!   and user agent, through its own callback handlers (`tests/msk_iam/MskIamReference.java`).
//!   The library signs at the current time and offers no way to fix its clock, so strait signs
//!   for the `X-Amz-Date` the library's output carries; everything else, the signature
//!   included, must then be the same bytes.
//! - the credential chain: environment, a profile file in a temporary HOME, web identity and
//!   `awsRoleArn` against a local fake STS (`AWS_ENDPOINT_URL_STS`), its refusals and expired
//!   credentials.
//! - the SASL exchange against the scripted fake broker (`fake/`): the payload signed for the
//!   host the connection goes to, the broker's JSON answer, its refusal with its message and
//!   whose credentials they were, and KIP-368 re-authentication signing anew with the
//!   credentials the profile file holds by then; the OAUTHBEARER form's initial response.

mod fake;

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use strait_kafka::aws::{AssumeRole, ChainConfig, Credentials, CredentialsProvider, Env};
use strait_kafka::connection::{BrokerConnection, ConnectionConfig};
use strait_kafka::sasl::msk_iam;
use strait_kafka::sasl::{MskIam, MskIamForm, SaslConfig};
use strait_kafka::{Secret, Security};

use fake::{script, Action, Body, FakeCluster};
use kafka_protocol::messages::{ApiKey, SaslAuthenticateResponse, SaslHandshakeResponse};

const ACCESS_KEY_ID: &str = "AKIDEXAMPLE";
const SECRET_KEY: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
const SESSION_TOKEN: &str = "IQoJb3JpZ2luX2VjEBEa/session+token=";

fn temp_dir(name: &str) -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let dir = std::env::temp_dir().join(format!(
        "strait-msk-iam-{name}-{}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the library through `MskIamReference.java` with only the given AWS variables (and an
/// empty HOME, no instance metadata).
fn library(args: &[&str], session_token: Option<&str>, region: Option<&str>) -> Vec<u8> {
    let home = temp_dir("java-home");
    let java = std::env::var_os("JAVA_HOME")
        .map(|h| PathBuf::from(h).join("bin").join("java"))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("java"));
    let program =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/msk_iam/MskIamReference.java");
    let mut command = Command::new(java);
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        .arg("-Xmx128m")
        .arg("-cp")
        .arg(strait_testkit::msk_iam_classpath())
        .arg(&program)
        .args(args);
    if let Some(token) = session_token {
        command.env("AWS_SESSION_TOKEN", token);
    }
    if let Some(region) = region {
        command.env("AWS_REGION", region);
    }
    let output = command.output().expect("cannot run java");
    let _ = std::fs::remove_dir_all(&home);
    assert!(
        output.status.success(),
        "MskIamReference {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

fn credentials(session_token: Option<&str>) -> Credentials {
    Credentials {
        access_key_id: ACCESS_KEY_ID.into(),
        secret_access_key: Secret::new(SECRET_KEY),
        session_token: session_token.map(Secret::new),
        expires: None,
        source: "test".into(),
    }
}

/// `YYYYMMDD'T'HHMMSS'Z'` back to a time.
fn parse_amz_date(s: &str) -> SystemTime {
    let iso = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &s[0..4],
        &s[4..6],
        &s[6..8],
        &s[9..11],
        &s[11..13],
        &s[13..15]
    );
    let t = parse_iso(&iso);
    assert_eq!(strait_kafka::aws::sigv4::amz_date(t), s);
    t
}

fn parse_iso(iso: &str) -> SystemTime {
    // Days from civil, for the test's own parsing (1970..2100 is plenty).
    let y: i64 = iso[0..4].parse().unwrap();
    let m: i64 = iso[5..7].parse().unwrap();
    let d: i64 = iso[8..10].parse().unwrap();
    let (h, min, sec): (u64, u64, u64) = (
        iso[11..13].parse().unwrap(),
        iso[14..16].parse().unwrap(),
        iso[17..19].parse().unwrap(),
    );
    let mut days = 0i64;
    for year in 1970..y {
        days += if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 {
            366
        } else {
            365
        };
    }
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    days += month_days[..(m - 1) as usize].iter().sum::<i64>() + d - 1;
    UNIX_EPOCH + Duration::from_secs(days as u64 * 86_400 + h * 3600 + min * 60 + sec)
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() + 1 {
            out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

#[test]
fn aws_msk_iam_payload_is_the_librarys_byte_for_byte() {
    for (host, token) in [
        (
            "b-1.mycluster.abc123.c2.kafka.eu-west-1.amazonaws.com",
            Some(SESSION_TOKEN),
        ),
        ("b-3.other.xyz789.c11.kafka.us-east-1.amazonaws.com", None),
        (
            "boot-abc.c1.kafka-serverless.ap-southeast-2.amazonaws.com",
            Some("short"),
        ),
    ] {
        // The library computes X-Amz-Expires from two readings of the clock; in the rare run
        // where a second ticks between them it says 899: ask again.
        let (java, fields) = (0..3)
            .map(|_| {
                let java = library(&["iam", host], token, None);
                let fields: serde_json::Value = serde_json::from_slice(&java).unwrap();
                (java, fields)
            })
            .find(|(_, f)| f["x-amz-expires"] == "900")
            .expect("the library never said X-Amz-Expires 900");
        let time = parse_amz_date(fields["x-amz-date"].as_str().unwrap());
        let user_agent = fields["user-agent"].as_str().unwrap();
        assert!(user_agent.starts_with(&format!(
            "aws-msk-iam-auth/{}/",
            strait_testkit::MSK_IAM_AUTH_VERSION
        )));
        let region = msk_iam::region_from_host(host).unwrap();
        let ours = msk_iam::payload(host, &region, &credentials(token), time, user_agent);
        assert_eq!(
            String::from_utf8(ours).unwrap(),
            String::from_utf8(java).unwrap(),
            "host {host}"
        );
    }
}

#[test]
fn oauthbearer_token_is_the_librarys_byte_for_byte() {
    for (region, token) in [("eu-central-1", Some(SESSION_TOKEN)), ("us-west-2", None)] {
        let (java, url) = (0..3)
            .map(|_| {
                let java = String::from_utf8(library(&["oauth"], token, Some(region))).unwrap();
                let url = String::from_utf8(URL_SAFE_NO_PAD.decode(&java).unwrap()).unwrap();
                (java, url)
            })
            .find(|(_, url)| url.contains("&X-Amz-Expires=900&"))
            .expect("the library never said X-Amz-Expires 900");
        let param = |name: &str| {
            let start = url.find(&format!("{name}=")).unwrap() + name.len() + 1;
            let end = url[start..].find('&').map_or(url.len(), |e| start + e);
            percent_decode(&url[start..end])
        };
        let time = parse_amz_date(&param("X-Amz-Date"));
        let user_agent = param("User-Agent");
        let ours = msk_iam::token(region, &credentials(token), time, &user_agent);
        assert_eq!(ours.expose(), java, "region {region}: {url}");
    }
}

fn chain(config: ChainConfig, vars: Vec<(&str, String)>) -> CredentialsProvider {
    CredentialsProvider::new(config, Env::from_vars(vars))
}

#[tokio::test]
async fn credentials_from_the_environment() {
    let provider = chain(
        ChainConfig::default(),
        vec![
            ("AWS_ACCESS_KEY_ID", "AKIAENV".into()),
            ("AWS_SECRET_ACCESS_KEY", "secret-env".into()),
            ("AWS_SESSION_TOKEN", "token-env".into()),
        ],
    );
    let c = provider.credentials().await.unwrap();
    assert_eq!(c.access_key_id, "AKIAENV");
    assert_eq!(c.secret_access_key.expose(), "secret-env");
    assert_eq!(c.session_token.as_ref().unwrap().expose(), "token-env");
    let shown = format!("{c:?}");
    assert!(
        !shown.contains("secret-env") && !shown.contains("token-env"),
        "{shown}"
    );
}

#[tokio::test]
async fn no_credentials_says_what_was_tried() {
    let home = temp_dir("empty-home");
    let provider = chain(
        ChainConfig::default(),
        vec![
            ("HOME", home.display().to_string()),
            ("AWS_EC2_METADATA_DISABLED", "true".into()),
        ],
    );
    let e = provider.credentials().await.unwrap_err();
    for part in [
        "no AWS credentials found",
        "environment: AWS_ACCESS_KEY_ID is not set",
        "web identity: AWS_WEB_IDENTITY_TOKEN_FILE is not set",
        "profile: no profile `default`",
        "container: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI and _FULL_URI are not set",
        "instance metadata: disabled (AWS_EC2_METADATA_DISABLED)",
    ] {
        assert!(e.contains(part), "{part:?} not in: {e}");
    }
    let provider = chain(
        ChainConfig {
            profile: Some("nope".into()),
            add_default_providers: false,
            ..ChainConfig::default()
        },
        vec![("HOME", home.display().to_string())],
    );
    let e = provider.credentials().await.unwrap_err();
    assert!(e.contains("awsProfileName: no profile `nope`"), "{e}");
    assert!(e.contains("awsAddDefaultProviders=false"), "{e}");
}

#[tokio::test]
async fn credentials_from_a_profile_in_home() {
    let home = temp_dir("profile-home");
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    std::fs::write(
        home.join(".aws/credentials"),
        "[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key = sk-default\n\n\
         [msk]\naws_access_key_id=AKIAMSK\naws_secret_access_key=sk-msk\naws_session_token=tok-msk\n",
    )
    .unwrap();
    std::fs::write(
        home.join(".aws/config"),
        "[default]\nregion = eu-west-3\n[profile msk]\nregion = us-east-2\n",
    )
    .unwrap();
    let home_var = ("HOME", home.display().to_string());
    // The default profile.
    let provider = chain(ChainConfig::default(), vec![home_var.clone()]);
    assert_eq!(
        provider.credentials().await.unwrap().access_key_id,
        "AKIADEFAULT"
    );
    assert_eq!(
        provider.env().default_region().as_deref(),
        Some("eu-west-3")
    );
    // AWS_PROFILE.
    let provider = chain(
        ChainConfig::default(),
        vec![home_var.clone(), ("AWS_PROFILE", "msk".into())],
    );
    let c = provider.credentials().await.unwrap();
    assert_eq!(
        (c.access_key_id.as_str(), c.source.as_str()),
        ("AKIAMSK", "profile `msk`")
    );
    assert_eq!(
        provider.env().default_region().as_deref(),
        Some("us-east-2")
    );
    // awsProfileName comes before the environment's keys.
    let provider = chain(
        ChainConfig {
            profile: Some("msk".into()),
            ..ChainConfig::default()
        },
        vec![
            home_var.clone(),
            ("AWS_ACCESS_KEY_ID", "AKIAENV".into()),
            ("AWS_SECRET_ACCESS_KEY", "x".into()),
        ],
    );
    let c = provider.credentials().await.unwrap();
    assert_eq!(c.access_key_id, "AKIAMSK");
    assert_eq!(c.session_token.unwrap().expose(), "tok-msk");
    // AWS_REGION wins over the profile's region.
    let provider = chain(
        ChainConfig::default(),
        vec![home_var, ("AWS_REGION", "ap-south-1".into())],
    );
    assert_eq!(
        provider.env().default_region().as_deref(),
        Some("ap-south-1")
    );
}

/// A fake STS: answers each request with the next of `answers` (status, body) and keeps the
/// requests it got.
struct FakeSts {
    url: String,
    requests: Arc<Mutex<Vec<String>>>,
}

async fn fake_sts(answers: Vec<(u16, String)>) -> FakeSts {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&requests);
    tokio::spawn(async move {
        for (status, body) in answers {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut raw = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                let n = stream.read(&mut buf).await.unwrap();
                raw.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&raw).into_owned();
                if let Some(end) = text.find("\r\n\r\n") {
                    let length: usize = text[..end]
                        .lines()
                        .find_map(|l| l.strip_prefix("Content-Length: "))
                        .map_or(0, |v| v.trim().parse().unwrap());
                    if raw.len() >= end + 4 + length || n == 0 {
                        break;
                    }
                }
                if n == 0 {
                    break;
                }
            }
            seen.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&raw).into_owned());
            let answer = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: text/xml\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(answer.as_bytes()).await.unwrap();
            stream.shutdown().await.ok();
        }
    });
    FakeSts { url, requests }
}

fn sts_answer(action: &str, key_id: &str, secret: &str, token: &str, expiration: &str) -> String {
    format!(
        "<{action}Response xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><{action}Result>\
         <Credentials><AccessKeyId>{key_id}</AccessKeyId><SecretAccessKey>{secret}</SecretAccessKey>\
         <SessionToken>{token}</SessionToken><Expiration>{expiration}</Expiration></Credentials>\
         </{action}Result><ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata>\
         </{action}Response>"
    )
}

fn in_an_hour() -> String {
    let t = SystemTime::now() + Duration::from_secs(3600);
    let d = strait_kafka::aws::sigv4::amz_date(t);
    format!(
        "{}-{}-{}T{}:{}:{}Z",
        &d[0..4],
        &d[4..6],
        &d[6..8],
        &d[9..11],
        &d[11..13],
        &d[13..15]
    )
}

#[tokio::test]
async fn web_identity_against_a_fake_sts() {
    let dir = temp_dir("web-identity");
    let token_file = dir.join("token");
    std::fs::write(&token_file, "eyJ.web-identity.token\n").unwrap();
    let sts = fake_sts(vec![(
        200,
        sts_answer(
            "AssumeRoleWithWebIdentity",
            "ASIAWEBID",
            "sk-from-sts",
            "token-from-sts",
            &in_an_hour(),
        ),
    )])
    .await;
    let provider = chain(
        ChainConfig::default(),
        vec![
            ("HOME", dir.display().to_string()),
            (
                "AWS_WEB_IDENTITY_TOKEN_FILE",
                token_file.display().to_string(),
            ),
            (
                "AWS_ROLE_ARN",
                "arn:aws:iam::123456789012:role/msk-mirror".into(),
            ),
            ("AWS_ROLE_SESSION_NAME", "strait-test".into()),
            ("AWS_ENDPOINT_URL_STS", sts.url.clone()),
        ],
    );
    let c = provider.credentials().await.unwrap();
    assert_eq!(c.access_key_id, "ASIAWEBID");
    assert_eq!(c.secret_access_key.expose(), "sk-from-sts");
    assert!(c.source.contains("web identity"), "{}", c.source);
    let request = sts.requests.lock().unwrap()[0].clone();
    assert!(request.starts_with("POST / HTTP/1.1\r\n"), "{request}");
    let body = request.split("\r\n\r\n").nth(1).unwrap();
    for part in [
        "Action=AssumeRoleWithWebIdentity",
        "Version=2011-06-15",
        "RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fmsk-mirror",
        "RoleSessionName=strait-test",
        "WebIdentityToken=eyJ.web-identity.token",
    ] {
        assert!(body.split('&').any(|p| p == part), "{part} not in {body}");
    }
    assert!(
        !request.contains("Authorization"),
        "web identity is unsigned: {request}"
    );
    // The credentials STS gave sign the payload.
    let p = msk_iam::payload(
        "b-1.x.kafka.us-east-1.amazonaws.com",
        "us-east-1",
        &c,
        SystemTime::now(),
        "ua",
    );
    let fields: serde_json::Value = serde_json::from_slice(&p).unwrap();
    assert_eq!(fields["x-amz-security-token"], "token-from-sts");
    assert!(fields["x-amz-credential"]
        .as_str()
        .unwrap()
        .starts_with("ASIAWEBID/"));
    // Cached until five minutes before they expire: the fake answers once only.
    let again = provider.credentials().await.unwrap();
    assert_eq!(again.access_key_id, "ASIAWEBID");
    assert_eq!(sts.requests.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn assume_role_against_a_fake_sts() {
    let dir = temp_dir("assume-role");
    let sts = fake_sts(vec![(
        200,
        sts_answer(
            "AssumeRole",
            "ASIAROLE",
            "sk-role",
            "token-role",
            &in_an_hour(),
        ),
    )])
    .await;
    let provider = chain(
        ChainConfig {
            assume_role: Some(AssumeRole {
                role_arn: "arn:aws:iam::123456789012:role/msk_client_role".into(),
                session_name: "producer".into(),
                external_id: Some("ext-1".into()),
                access_key_id: Some("AKIABASE".into()),
                secret_access_key: Some(Secret::new("sk-base")),
                session_token: None,
            }),
            sts_region: Some("us-west-2".into()),
            ..ChainConfig::default()
        },
        vec![
            ("HOME", dir.display().to_string()),
            ("AWS_ENDPOINT_URL_STS", sts.url.clone()),
        ],
    );
    let c = provider.credentials().await.unwrap();
    assert_eq!(c.access_key_id, "ASIAROLE");
    let request = sts.requests.lock().unwrap()[0].clone();
    let body = request.split("\r\n\r\n").nth(1).unwrap();
    for part in [
        "Action=AssumeRole",
        "RoleSessionName=producer",
        "ExternalId=ext-1",
        "RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fmsk_client_role",
    ] {
        assert!(body.split('&').any(|p| p == part), "{part} not in {body}");
    }
    // Signed with the base credentials, for the STS region.
    let auth = request
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("authorization:"))
        .expect("AssumeRole must be signed");
    assert!(auth.contains("Credential=AKIABASE/"), "{auth}");
    assert!(auth.contains("/us-west-2/sts/aws4_request"), "{auth}");
    assert!(
        !request.contains("sk-base"),
        "the secret key crossed the wire"
    );
}

#[tokio::test]
async fn sts_refusals_and_expired_credentials() {
    let dir = temp_dir("refusal");
    let token_file = dir.join("token");
    std::fs::write(&token_file, "tok").unwrap();
    let refusal = "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code>\
        <Message>Not authorized to perform sts:AssumeRoleWithWebIdentity</Message></Error>\
        </ErrorResponse>"
        .to_owned();
    let expired = sts_answer(
        "AssumeRoleWithWebIdentity",
        "ASIAOLD",
        "sk-old",
        "token-old",
        "2020-01-01T00:00:00Z",
    );
    let sts = fake_sts(vec![(403, refusal), (200, expired)]).await;
    let vars = vec![
        ("HOME", dir.display().to_string()),
        (
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            token_file.display().to_string(),
        ),
        ("AWS_ROLE_ARN", "arn:aws:iam::1:role/r".into()),
        ("AWS_ENDPOINT_URL_STS", sts.url.clone()),
    ];
    let provider = chain(ChainConfig::default(), vars.clone());
    let e = provider.credentials().await.unwrap_err();
    assert!(
        e.contains("refused: HTTP 403, AccessDenied: Not authorized"),
        "{e}"
    );
    let e = provider.credentials().await.unwrap_err();
    assert!(e.contains("expired at 20200101T000000Z"), "{e}");
    assert!(!e.contains("sk-old") && !e.contains("token-old"), "{e}");
}

/// A fake broker taking SASL: SaslHandshake accepts any mechanism; SaslAuthenticate answers
/// `answer(auth_bytes)`: (error code, error message, auth bytes, session lifetime ms).
async fn sasl_broker(
    answer: impl Fn(&[u8]) -> (i16, Option<&'static str>, Vec<u8>, i64) + Send + Sync + 'static,
) -> FakeCluster {
    let fake = FakeCluster::start(
        &[1],
        script(move |_, req| match &req.body {
            Body::SaslHandshake(_) => req.reply(&SaslHandshakeResponse::default()),
            Body::SaslAuthenticate(a) => {
                let (code, message, bytes, lifetime) = answer(&a.auth_bytes);
                req.reply(
                    &SaslAuthenticateResponse::default()
                        .with_error_code(code)
                        .with_error_message(
                            message.map(kafka_protocol::protocol::StrBytes::from_static_str),
                        )
                        .with_auth_bytes(bytes.into())
                        .with_session_lifetime_ms(lifetime),
                )
            }
            _ => Action::Default,
        }),
    )
    .await;
    fake.spec().api_versions.extend([
        (ApiKey::SaslHandshake, 0, 1),
        (ApiKey::SaslAuthenticate, 0, 2),
    ]);
    fake
}

fn msk_security(form: MskIamForm, vars: Vec<(&str, String)>) -> ConnectionConfig {
    ConnectionConfig {
        connect_timeout: Duration::from_secs(10),
        request_timeout: Duration::from_secs(10),
        security: Security {
            tls: None,
            sasl: Some(Arc::new(SaslConfig::AwsMskIam(MskIam {
                form,
                credentials: Arc::new(CredentialsProvider::new(
                    ChainConfig::default(),
                    Env::from_vars(vars),
                )),
                debug_credentials: true,
            }))),
        },
        ..ConnectionConfig::default()
    }
}

fn authentications(fake: &FakeCluster) -> Vec<serde_json::Value> {
    fake.requests(ApiKey::SaslAuthenticate)
        .iter()
        .filter_map(|r| match &r.body {
            Body::SaslAuthenticate(a) => serde_json::from_slice(&a.auth_bytes).ok(),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn aws_msk_iam_exchange_and_reauthentication_with_fresh_credentials() {
    let home = temp_dir("reauth-home");
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    let write_keys = |id: &str| {
        std::fs::write(
            home.join(".aws/credentials"),
            format!("[default]\naws_access_key_id = {id}\naws_secret_access_key = sk-{id}\n"),
        )
        .unwrap();
    };
    write_keys("AKIAFIRST");
    // A session of 1.5 s: strait authenticates again at 85-95% of it.
    let fake = sasl_broker(|bytes| {
        let ok = serde_json::from_slice::<serde_json::Value>(bytes)
            .is_ok_and(|v| v["action"] == "kafka-cluster:Connect");
        let answer = br#"{"version":"2020_10_22","request-id":"fake-request-1"}"#.to_vec();
        (if ok { 0 } else { 58 }, None, answer, 1500)
    })
    .await;
    let config = msk_security(
        MskIamForm::AwsMskIam,
        vec![
            ("HOME", home.display().to_string()),
            ("AWS_REGION", "eu-west-1".into()),
        ],
    );
    let conn = BrokerConnection::connect(&fake.addr(1), config)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let first = authentications(&fake);
    assert_eq!(first.len(), 1);
    // Signed for the host the connection goes to; the region from AWS_REGION since
    // 127.0.0.1 names none.
    assert_eq!(first[0]["host"], "127.0.0.1");
    assert!(first[0]["x-amz-credential"]
        .as_str()
        .unwrap()
        .starts_with("AKIAFIRST/"));
    assert!(first[0]["x-amz-credential"]
        .as_str()
        .unwrap()
        .ends_with("/eu-west-1/kafka-cluster/aws4_request"));
    // The keys are rotated in the file; the re-authentication signs with the new ones.
    write_keys("AKIASECOND");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while conn.reauthentications() < 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "no re-authentication in 20 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let all = authentications(&fake);
    assert!(all.len() >= 2, "{all:?}");
    assert!(all[1]["x-amz-credential"]
        .as_str()
        .unwrap()
        .starts_with("AKIASECOND/"));
    assert_ne!(all[0]["x-amz-signature"], all[1]["x-amz-signature"]);
}

#[tokio::test]
async fn aws_msk_iam_refusals_say_whose_credentials_and_what_the_broker_said() {
    let vars = || {
        vec![
            ("AWS_ACCESS_KEY_ID", "AKIAREFUSED".to_owned()),
            ("AWS_SECRET_ACCESS_KEY", "sk-never-shown".to_owned()),
            ("AWS_REGION", "us-east-1".to_owned()),
        ]
    };
    let fake = sasl_broker(|_| (58, Some("[abc] Access denied"), Vec::new(), 0)).await;
    let e = BrokerConnection::connect(&fake.addr(1), msk_security(MskIamForm::AwsMskIam, vars()))
        .await
        .expect_err("the broker refuses");
    let shown = e.to_string();
    for part in [
        "AWS_MSK_IAM",
        "refused the IAM authentication",
        "access key id AKIAREFUSED from the environment",
        "Access denied",
    ] {
        assert!(shown.contains(part), "{part:?} not in: {shown}");
    }
    assert!(!shown.contains("sk-never-shown"), "{shown}");

    // An answer that is not the library's JSON.
    let fake = sasl_broker(|_| (0, None, b"not json".to_vec(), 0)).await;
    let e = BrokerConnection::connect(&fake.addr(1), msk_security(MskIamForm::AwsMskIam, vars()))
        .await
        .expect_err("a garbled answer fails");
    assert!(e.to_string().contains("not JSON"), "{e}");

    // No credentials at all: the sources tried, before anything is sent.
    let fake = sasl_broker(|_| (0, None, Vec::new(), 0)).await;
    let e = BrokerConnection::connect(
        &fake.addr(1),
        msk_security(
            MskIamForm::AwsMskIam,
            vec![
                ("HOME", "/nonexistent".into()),
                ("AWS_EC2_METADATA_DISABLED", "true".into()),
            ],
        ),
    )
    .await
    .expect_err("no credentials");
    assert!(e.to_string().contains("no AWS credentials found"), "{e}");
    assert!(authentications(&fake).is_empty());
}

#[tokio::test]
async fn oauthbearer_form_sends_the_signed_url_as_a_bearer_token() {
    let fake = sasl_broker(|_| (0, None, Vec::new(), 0)).await;
    let config = msk_security(
        MskIamForm::OAuthBearer,
        vec![
            ("AWS_ACCESS_KEY_ID", "AKIAOAUTH".into()),
            ("AWS_SECRET_ACCESS_KEY", "sk".into()),
            ("AWS_REGION", "ca-central-1".into()),
        ],
    );
    BrokerConnection::connect(&fake.addr(1), config)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let handshake = fake.requests(ApiKey::SaslHandshake);
    match &handshake[0].body {
        Body::SaslHandshake(h) => assert_eq!(h.mechanism.as_str(), "OAUTHBEARER"),
        other => panic!("{other:?}"),
    }
    let auth = fake.requests(ApiKey::SaslAuthenticate);
    let Body::SaslAuthenticate(a) = &auth[0].body else {
        panic!("{auth:?}");
    };
    let message = String::from_utf8(a.auth_bytes.to_vec()).unwrap();
    let token = message
        .strip_prefix("n,,\u{1}auth=Bearer ")
        .and_then(|t| t.strip_suffix("\u{1}\u{1}"))
        .unwrap_or_else(|| panic!("{message:?}"));
    let url = String::from_utf8(URL_SAFE_NO_PAD.decode(token).unwrap()).unwrap();
    assert!(
        url.starts_with("https://kafka.ca-central-1.amazonaws.com?Action=kafka-cluster%3AConnect&"),
        "{url}"
    );
    assert!(url.contains("X-Amz-Credential=AKIAOAUTH%2F"), "{url}");
    assert!(url.contains("&User-Agent=strait%2F"), "{url}");
}

#[tokio::test]
async fn instance_metadata_and_container_endpoint_against_fakes() {
    let dir = temp_dir("machine");
    let json = |id: &str| {
        format!(
            "{{\"Code\":\"Success\",\"Type\":\"AWS-HMAC\",\"AccessKeyId\":\"{id}\",\
             \"SecretAccessKey\":\"sk-{id}\",\"Token\":\"token-{id}\",\"Expiration\":\"{}\"}}",
            in_an_hour()
        )
    };
    // EC2 instance metadata, IMDSv2.
    let imds = fake_sts(vec![
        (200, "imds-session-token".into()),
        (200, "msk-instance-role\n".into()),
        (200, json("ASIAIMDS")),
    ])
    .await;
    let provider = chain(
        ChainConfig::default(),
        vec![
            ("HOME", dir.display().to_string()),
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.url.clone()),
        ],
    );
    let c = provider
        .credentials()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.access_key_id, "ASIAIMDS");
    assert_eq!(c.session_token.unwrap().expose(), "token-ASIAIMDS");
    assert!(c.source.contains("msk-instance-role"), "{}", c.source);
    let requests = imds.requests.lock().unwrap().clone();
    assert!(
        requests[0].starts_with("PUT /latest/api/token HTTP/1.1\r\n"),
        "{}",
        requests[0]
    );
    assert!(requests[0].contains("X-aws-ec2-metadata-token-ttl-seconds: 21600"));
    assert!(requests[1].starts_with("GET /latest/meta-data/iam/security-credentials/ HTTP/1.1"));
    assert!(requests[1].contains("X-aws-ec2-metadata-token: imds-session-token"));
    assert!(requests[2]
        .starts_with("GET /latest/meta-data/iam/security-credentials/msk-instance-role HTTP/1.1"));

    // The ECS container endpoint (before instance metadata), with its authorization token.
    let ecs = fake_sts(vec![(200, json("ASIAECS"))]).await;
    let provider = chain(
        ChainConfig::default(),
        vec![
            ("HOME", dir.display().to_string()),
            (
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                format!("{}/v2/credentials/abc", ecs.url),
            ),
            ("AWS_CONTAINER_AUTHORIZATION_TOKEN", "ecs-auth".into()),
            ("AWS_EC2_METADATA_DISABLED", "true".into()),
        ],
    );
    let c = provider
        .credentials()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.access_key_id, "ASIAECS");
    let request = ecs.requests.lock().unwrap()[0].clone();
    assert!(
        request.starts_with("GET /v2/credentials/abc HTTP/1.1"),
        "{request}"
    );
    assert!(request.contains("Authorization: ecs-auth"), "{request}");

    // Over http, only a loopback or agent address.
    let provider = chain(
        ChainConfig::default(),
        vec![
            ("HOME", dir.display().to_string()),
            (
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                "http://example.com/creds".into(),
            ),
            ("AWS_EC2_METADATA_DISABLED", "true".into()),
        ],
    );
    let e = provider.credentials().await.unwrap_err();
    assert!(e.contains("must be a loopback address"), "{e}");
}
