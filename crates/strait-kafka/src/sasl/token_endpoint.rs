//! OAUTHBEARER tokens from an identity provider: the OAuth 2 client credentials grant
//! (RFC 6749 §4.4) as Kafka's client sends it (KIP-768, `sasl.oauthbearer.token.endpoint.url`
//! with `https://` or `http://`).
//!
//! The request is a form POST to the token endpoint,
//!
//! ```text
//! POST /token HTTP/1.1
//! Authorization: Basic base64(<client id>:<client secret>)
//! Content-Type: application/x-www-form-urlencoded
//!
//! grant_type=client_credentials&scope=<scope>
//! ```
//!
//! (the id and secret URL-encoded first when `sasl.oauthbearer.header.urlencode=true`), and the
//! answer a JSON object whose `access_token` is the token. Before it is used, the token is read
//! as a JWT to learn its expiry (`exp`) and principal (`sub`, or the claim
//! `sasl.oauthbearer.sub.claim.name` names); its signature is the broker's to check.
//!
//! One [`TokenEndpoint`] serves every connection of a client: the token is kept and fetched
//! again when a connection authenticates after its refresh time, which is placed in the
//! token's life as Kafka places it (`sasl.login.refresh.window.factor` and `.jitter`, no sooner
//! than `sasl.login.refresh.min.period.seconds` from now, no later than
//! `sasl.login.refresh.buffer.seconds` before expiry). When the provider cannot be reached at
//! refresh time, the kept token is used while it is still valid. Failed requests are retried
//! with backoff (`sasl.login.retry.backoff.ms` doubling up to `sasl.login.retry.backoff.max.ms`,
//! for at most that long in all), except for the answers that say retrying cannot help (400,
//! 401, 403, 404, ...), as Kafka's client does.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::Mutex;

use crate::secret::Secret;
use crate::tls::TlsConfig;
use crate::transport::Stream;

/// The most of a token endpoint's answer that is read.
const MAX_ANSWER_BYTES: usize = 1 << 20;

/// How a client asks for tokens: Kafka's `sasl.oauthbearer.*` and `sasl.login.*` keys.
#[derive(Clone)]
pub struct ClientCredentials {
    /// `sasl.oauthbearer.token.endpoint.url` (`https://` or `http://`; see [`check_url`]).
    pub url: String,
    /// The client id (`sasl.oauthbearer.client.credentials.client.id` or JAAS `clientId`).
    pub client_id: String,
    /// The client secret (`…client.secret` or JAAS `clientSecret`).
    pub client_secret: Secret,
    /// The scope asked for (`sasl.oauthbearer.scope` or JAAS `scope`), if any.
    pub scope: Option<String>,
    /// `sasl.oauthbearer.header.urlencode`: URL-encode id and secret before the Basic header.
    pub urlencode_header: bool,
    /// TLS for an `https` endpoint (trust from the JAAS line's `ssl.truststore.*`, else the
    /// system's CAs).
    pub tls: Option<Arc<TlsConfig>>,
    /// `sasl.login.connect.timeout.ms`.
    pub connect_timeout: Duration,
    /// `sasl.login.read.timeout.ms`.
    pub read_timeout: Duration,
    /// `sasl.login.retry.backoff.ms`: the first wait before a retry.
    pub retry_backoff: Duration,
    /// `sasl.login.retry.backoff.max.ms`: the longest wait, and how long retries go on.
    pub retry_backoff_max: Duration,
    /// `sasl.oauthbearer.sub.claim.name`: the claim that names the principal.
    pub sub_claim: String,
    /// When to fetch a new token.
    pub refresh: RefreshWindow,
}

impl fmt::Debug for ClientCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCredentials")
            .field("url", &self.url)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret)
            .field("scope", &self.scope)
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

/// Where in a token's life it is replaced (Kafka's `sasl.login.refresh.*`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RefreshWindow {
    /// `sasl.login.refresh.window.factor` (0.8).
    pub factor: f64,
    /// `sasl.login.refresh.window.jitter` (0.05).
    pub jitter: f64,
    /// `sasl.login.refresh.min.period.seconds` (60).
    pub min_period: Duration,
    /// `sasl.login.refresh.buffer.seconds` (300).
    pub buffer: Duration,
}

impl Default for RefreshWindow {
    fn default() -> Self {
        Self {
            factor: 0.8,
            jitter: 0.05,
            min_period: Duration::from_secs(60),
            buffer: Duration::from_secs(300),
        }
    }
}

impl RefreshWindow {
    /// When to replace a token valid from `start` to `expiry`, received at `now`; `share` is
    /// a random number in [0, 1) for the jitter. Kafka's rule: at `factor` (+ jitter) of the
    /// token's life, but not inside the buffer before expiry and not sooner than the minimum
    /// period from now; when the remaining life cannot hold both, at `factor` of what remains.
    pub fn refresh_at(
        &self,
        start: SystemTime,
        expiry: SystemTime,
        now: SystemTime,
        share: f64,
    ) -> SystemTime {
        let pct = self.factor + self.jitter * share;
        let remaining = expiry.duration_since(now).unwrap_or_default();
        if remaining < self.min_period + self.buffer {
            return now + remaining.mul_f64(pct.min(1.0));
        }
        let start = start.min(now);
        let life = expiry.duration_since(start).unwrap_or_default();
        let proposed = start + life.mul_f64(pct.min(1.0));
        let buffer_begins = expiry - self.buffer;
        if proposed > buffer_begins {
            return buffer_begins;
        }
        proposed.max(now + self.min_period)
    }
}

/// A token from the endpoint, as far as the client reads it.
#[derive(Clone)]
pub struct FetchedToken {
    /// The token itself.
    pub token: Secret,
    /// The principal it names.
    pub principal: String,
    /// `exp`.
    pub expiry: SystemTime,
    /// `iat`, when the token has it.
    pub issued: Option<SystemTime>,
}

impl fmt::Debug for FetchedToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FetchedToken")
            .field("principal", &self.principal)
            .field("expiry", &self.expiry)
            .finish_non_exhaustive()
    }
}

struct Kept {
    token: FetchedToken,
    refresh_at: SystemTime,
}

/// A token endpoint and the token last fetched from it, shared by a client's connections.
pub struct TokenEndpoint {
    settings: ClientCredentials,
    kept: Mutex<Option<Kept>>,
    fetched: AtomicU64,
}

impl fmt::Debug for TokenEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenEndpoint")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// Why one request failed, and whether another might do better.
struct Failure {
    message: String,
    retry: bool,
}

impl Failure {
    fn retry(message: impl Into<String>) -> Self {
        Failure {
            message: message.into(),
            retry: true,
        }
    }

    fn fatal(message: impl Into<String>) -> Self {
        Failure {
            message: message.into(),
            retry: false,
        }
    }
}

impl TokenEndpoint {
    /// An endpoint with no token yet.
    pub fn new(settings: ClientCredentials) -> Self {
        Self {
            settings,
            kept: Mutex::new(None),
            fetched: AtomicU64::new(0),
        }
    }

    /// How many tokens [`TokenEndpoint::token`] has fetched so far.
    pub fn tokens_fetched(&self) -> u64 {
        self.fetched.load(Ordering::Relaxed)
    }

    /// What it was made from.
    pub fn settings(&self) -> &ClientCredentials {
        &self.settings
    }

    /// The token to send now: the kept one until its refresh time, then a new one (or the
    /// kept one, with a warning, while it is valid and the endpoint fails).
    pub async fn token(&self) -> Result<Secret, String> {
        let mut kept = self.kept.lock().await;
        let now = SystemTime::now();
        if let Some(k) = kept.as_ref() {
            if now < k.refresh_at {
                return Ok(k.token.token.clone());
            }
        }
        match self.fetch().await {
            Ok(token) => {
                self.fetched.fetch_add(1, Ordering::Relaxed);
                let now = SystemTime::now();
                let refresh_at = self.settings.refresh.refresh_at(
                    token.issued.unwrap_or(now),
                    token.expiry,
                    now,
                    rand::random::<f64>(),
                );
                tracing::info!(
                    url = %self.settings.url,
                    principal = %token.principal,
                    expires_in_s = token.expiry.duration_since(now).unwrap_or_default().as_secs(),
                    refresh_in_s = refresh_at.duration_since(now).unwrap_or_default().as_secs(),
                    "fetched an OAUTHBEARER token"
                );
                let secret = token.token.clone();
                *kept = Some(Kept { token, refresh_at });
                Ok(secret)
            }
            Err(e) => match kept.as_ref() {
                Some(k) if SystemTime::now() < k.token.expiry => {
                    tracing::warn!(
                        url = %self.settings.url,
                        error = %e,
                        "could not refresh the OAUTHBEARER token; using the current one until it \
                         expires"
                    );
                    Ok(k.token.token.clone())
                }
                _ => Err(e),
            },
        }
    }

    /// Asks the endpoint for a token, retrying as Kafka's client does.
    pub async fn fetch(&self) -> Result<FetchedToken, String> {
        let s = &self.settings;
        let deadline = tokio::time::Instant::now() + s.retry_backoff_max;
        let mut wait = s.retry_backoff;
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let failure = match self.request().await {
                Ok(answer) => match read_answer(&answer, &s.sub_claim) {
                    Ok(token) => return Ok(token),
                    Err(e) => Failure::fatal(e),
                },
                Err(failure) => failure,
            };
            let now = tokio::time::Instant::now();
            if !failure.retry || now >= deadline {
                return Err(format!(
                    "the token endpoint {} gave no token ({} attempt{}): {}",
                    s.url,
                    attempts,
                    if attempts == 1 { "" } else { "s" },
                    failure.message
                ));
            }
            tokio::time::sleep(wait.min(deadline - now)).await;
            wait = (wait * 2).min(s.retry_backoff_max);
        }
    }

    /// One POST; the answer's body when the status is 200 or 201.
    async fn request(&self) -> Result<Vec<u8>, Failure> {
        let s = &self.settings;
        let url = parse_url(&s.url).map_err(Failure::fatal)?;
        let https = url.scheme_str() == Some("https");
        let host = url.host().unwrap_or_default();
        let port = url.port_u16().unwrap_or(if https { 443 } else { 80 });
        let addr = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let tcp = tokio::time::timeout(s.connect_timeout, TcpStream::connect(&addr))
            .await
            .map_err(|_| {
                Failure::retry(format!(
                    "no connection to {addr} within {} ms (sasl.login.connect.timeout.ms)",
                    s.connect_timeout.as_millis()
                ))
            })?
            .map_err(|e| Failure::retry(format!("cannot connect to {addr}: {e}")))?;
        let _ = tcp.set_nodelay(true);
        let mut stream: Box<dyn Stream> = Box::new(tcp);
        if https {
            let tls = s
                .tls
                .as_ref()
                .ok_or_else(|| Failure::fatal("an https endpoint needs TLS settings"))?;
            stream = tokio::time::timeout(s.connect_timeout, tls.handshake(&addr, stream))
                .await
                .map_err(|_| Failure::retry(format!("the TLS handshake with {addr} timed out")))?
                .map_err(|e| {
                    let why =
                        crate::tls::describe(&e, tls, host, true).unwrap_or_else(|| e.to_string());
                    Failure::retry(format!("TLS with {addr} failed: {why}"))
                })?;
        }
        let request = self.build_request(&url, host, port)?;
        let exchange = async {
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream))
                    .await
                    .map_err(|e| Failure::retry(format!("HTTP with {addr} failed: {e}")))?;
            let driver = tokio::spawn(connection);
            let answer = sender
                .send_request(request)
                .await
                .map_err(|e| Failure::retry(format!("the request to {addr} failed: {e}")));
            let result = match answer {
                Ok(answer) => {
                    let status = answer.status();
                    let body = Limited::new(answer.into_body(), MAX_ANSWER_BYTES)
                        .collect()
                        .await
                        .map(|b| b.to_bytes().to_vec())
                        .map_err(|e| Failure::retry(format!("reading the answer failed: {e}")));
                    body.and_then(|body| judge(status, body))
                }
                Err(e) => Err(e),
            };
            drop(sender);
            driver.abort();
            result
        };
        tokio::time::timeout(s.read_timeout, exchange)
            .await
            .map_err(|_| {
                Failure::retry(format!(
                    "no answer from {addr} within {} ms (sasl.login.read.timeout.ms)",
                    s.read_timeout.as_millis()
                ))
            })?
    }

    fn build_request(
        &self,
        url: &Uri,
        host: &str,
        port: u16,
    ) -> Result<Request<Full<Bytes>>, Failure> {
        let s = &self.settings;
        let body = request_body(s.scope.as_deref());
        let path = url.path_and_query().map_or("/", |p| p.as_str()).to_owned();
        let default_port = matches!(
            (url.scheme_str(), port),
            (Some("https"), 443) | (Some("http"), 80)
        );
        let host_header = if default_port {
            host.to_owned()
        } else {
            format!("{host}:{port}")
        };
        Request::builder()
            .method(Method::POST)
            .uri(path)
            .header("Host", host_header)
            .header("Accept", "application/json")
            .header(
                "Authorization",
                authorization_header(&s.client_id, &s.client_secret, s.urlencode_header),
            )
            .header("Cache-Control", "no-cache")
            .header("Content-Type", "application/x-www-form-urlencoded")
            .header("Content-Length", body.len())
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| Failure::fatal(format!("cannot make the request: {e}")))
    }
}

/// Checks a token endpoint URL: `https://` or `http://`, with a host.
pub fn check_url(url: &str) -> Result<(), String> {
    parse_url(url).map(|_| ())
}

fn parse_url(url: &str) -> Result<Uri, String> {
    let uri: Uri = url
        .trim()
        .parse()
        .map_err(|e| format!("`{url}` is not a URL ({e})"))?;
    if !matches!(uri.scheme_str(), Some("https" | "http")) {
        return Err(format!("`{url}` is neither https:// nor http://"));
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(format!("`{url}` has no host"));
    }
    Ok(uri)
}

/// The answer's status, as Kafka's client reads it: 200 and 201 carry the token; the statuses
/// that say the request itself is wrong are not retried; any other is.
fn judge(status: StatusCode, body: Vec<u8>) -> Result<Vec<u8>, Failure> {
    if status == StatusCode::OK || status == StatusCode::CREATED {
        if body.is_empty() {
            return Err(Failure::retry(format!("HTTP {status} with an empty body")));
        }
        return Ok(body);
    }
    let message = format!("HTTP {status} {}", error_summary(&body));
    const FINAL: [u16; 17] = [
        400, 401, 402, 403, 404, 405, 406, 407, 409, 410, 411, 412, 413, 414, 415, 501, 505,
    ];
    if FINAL.contains(&status.as_u16()) {
        Err(Failure::fatal(message))
    } else {
        Err(Failure::retry(message))
    }
}

/// What an error answer says (RFC 6749 §5.2: `error` and `error_description`), short; such an
/// answer carries no secret.
fn error_summary(body: &[u8]) -> String {
    if let Ok(serde_json::Value::Object(o)) = serde_json::from_slice::<serde_json::Value>(body) {
        let field = |name: &str| o.get(name).and_then(|v| v.as_str()).map(str::to_owned);
        if let Some(error) = field("error").or_else(|| field("errorCode")) {
            let description = field("error_description").or_else(|| field("errorSummary"));
            return match description {
                Some(d) => format!("({error}: {})", clip(&d)),
                None => format!("({error})"),
            };
        }
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        String::new()
    } else {
        format!("({})", clip(text))
    }
}

fn clip(s: &str) -> String {
    const MAX: usize = 200;
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// `Basic base64(id:secret)`, the id and secret URL-encoded first when asked (RFC 6749 §2.3.1
/// wants it; Kafka's client does it only with `sasl.oauthbearer.header.urlencode=true`).
pub fn authorization_header(client_id: &str, secret: &Secret, urlencode: bool) -> String {
    let pair = if urlencode {
        format!(
            "{}:{}",
            form_encode(client_id.trim()),
            form_encode(secret.expose().trim())
        )
    } else {
        format!("{}:{}", client_id.trim(), secret.expose().trim())
    };
    format!("Basic {}", STANDARD.encode(pair))
}

/// `grant_type=client_credentials`, and `&scope=…` when there is one.
pub fn request_body(scope: Option<&str>) -> String {
    let mut body = "grant_type=client_credentials".to_owned();
    if let Some(scope) = scope.map(str::trim).filter(|s| !s.is_empty()) {
        body.push_str("&scope=");
        body.push_str(&form_encode(scope));
    }
    body
}

/// `application/x-www-form-urlencoded` encoding: letters, digits and `.-*_` stay, a space
/// becomes `+`, every other byte `%XX`.
fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' | b'*' | b'_' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The token in an endpoint's JSON answer, read as a JWT for its expiry and principal.
pub fn read_answer(answer: &[u8], sub_claim: &str) -> Result<FetchedToken, String> {
    let json: serde_json::Value =
        serde_json::from_slice(answer).map_err(|e| format!("the answer is not JSON ({e})"))?;
    let token = json
        .get("access_token")
        .and_then(|t| t.as_str())
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or("the answer has no access_token")?;
    read_jwt(token, sub_claim)
}

/// Reads a JWT's claims (not its signature, which is the broker's to check): `exp` must be
/// there, the principal claim must be a non-empty string, `iat` is optional.
pub fn read_jwt(token: &str, sub_claim: &str) -> Result<FetchedToken, String> {
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("the access token holds white space".into());
    }
    let parts: Vec<&str> = token.split('.').collect();
    if parts.len() != 3 {
        return Err(format!(
            "the access token is not a JWT (it has {} parts separated by '.', not 3)",
            parts.len()
        ));
    }
    let payload = URL_SAFE_NO_PAD
        .decode(parts[1].trim_end_matches('='))
        .map_err(|_| "the access token's payload is not base64url".to_owned())?;
    let claims: serde_json::Value = serde_json::from_slice(&payload)
        .map_err(|_| "the access token's payload is not JSON".to_owned())?;
    let claims = claims
        .as_object()
        .ok_or("the access token's payload is not a JSON object")?;
    let time = |name: &str| -> Result<Option<SystemTime>, String> {
        match claims.get(name) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(v) => {
                let seconds = v
                    .as_f64()
                    .filter(|s| s.is_finite() && *s >= 0.0 && *s < 1e11)
                    .ok_or_else(|| {
                        format!("the access token's `{name}` claim is not a time in seconds")
                    })?;
                Ok(Some(UNIX_EPOCH + Duration::from_secs_f64(seconds)))
            }
        }
    };
    let expiry = time("exp")?.ok_or("the access token has no `exp` claim")?;
    let issued = time("iat")?;
    let principal = claims
        .get(sub_claim)
        .and_then(|v| v.as_str())
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .ok_or_else(|| {
            format!(
                "the access token has no `{sub_claim}` claim naming the principal \
                 (sasl.oauthbearer.sub.claim.name)"
            )
        })?
        .to_owned();
    Ok(FetchedToken {
        token: Secret::new(token),
        principal,
        expiry,
        issued,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(claims: &str) -> String {
        format!(
            "{}.{}.c2ln",
            URL_SAFE_NO_PAD.encode(r#"{"alg":"RS256"}"#),
            URL_SAFE_NO_PAD.encode(claims)
        )
    }

    #[test]
    fn urls_are_checked() {
        assert!(check_url("https://idp.example.com/oauth2/token").is_ok());
        assert!(check_url("http://127.0.0.1:8080/default/token").is_ok());
        assert!(check_url("ftp://idp/token")
            .unwrap_err()
            .contains("https://"));
        assert!(check_url("idp/token").is_err());
        assert!(check_url("https://").is_err());
    }

    #[test]
    fn authorization_header_as_kafka_makes_it() {
        // base64("my client:s3cr=t") and base64("my+client:s3cr%3Dt")
        let secret = Secret::new("s3cr=t");
        assert_eq!(
            authorization_header("my client", &secret, false),
            format!("Basic {}", STANDARD.encode("my client:s3cr=t"))
        );
        assert_eq!(
            authorization_header("my client", &secret, true),
            format!("Basic {}", STANDARD.encode("my+client:s3cr%3Dt"))
        );
    }

    #[test]
    fn request_body_with_and_without_scope() {
        assert_eq!(request_body(None), "grant_type=client_credentials");
        assert_eq!(request_body(Some("  ")), "grant_type=client_credentials");
        assert_eq!(
            request_body(Some(" kafka api://x/.default ")),
            "grant_type=client_credentials&scope=kafka+api%3A%2F%2Fx%2F.default"
        );
    }

    #[test]
    fn a_token_is_read_for_expiry_and_principal() {
        let t = jwt(r#"{"sub":"mirror","exp":2000000000,"iat":1999996400}"#);
        let answer = format!(r#"{{"access_token":"{t}","token_type":"Bearer"}}"#);
        let read = read_answer(answer.as_bytes(), "sub").unwrap();
        assert_eq!(read.principal, "mirror");
        assert_eq!(read.expiry, UNIX_EPOCH + Duration::from_secs(2_000_000_000));
        assert_eq!(
            read.issued,
            Some(UNIX_EPOCH + Duration::from_secs(1_999_996_400))
        );
        assert_eq!(read.token.expose(), t);
        assert!(!format!("{read:?}").contains(&t));
    }

    #[test]
    fn bad_tokens_say_what_is_wrong() {
        let no_exp = jwt(r#"{"sub":"mirror"}"#);
        assert!(read_jwt(&no_exp, "sub").unwrap_err().contains("`exp`"));
        let no_sub = jwt(r#"{"exp":2000000000}"#);
        assert!(read_jwt(&no_sub, "sub").unwrap_err().contains("`sub`"));
        let other_claim = jwt(r#"{"client_id":"m","exp":2000000000}"#);
        assert_eq!(read_jwt(&other_claim, "client_id").unwrap().principal, "m");
        let bad_exp = jwt(r#"{"sub":"m","exp":"soon"}"#);
        assert!(read_jwt(&bad_exp, "sub").unwrap_err().contains("`exp`"));
        assert!(read_jwt("opaque-token", "sub")
            .unwrap_err()
            .contains("not a JWT"));
        assert!(read_jwt("a.!!!.c", "sub")
            .unwrap_err()
            .contains("base64url"));
        assert!(read_answer(b"{}", "sub")
            .unwrap_err()
            .contains("access_token"));
        assert!(read_answer(b"<html>", "sub")
            .unwrap_err()
            .contains("not JSON"));
    }

    #[test]
    fn arbitrary_answers_never_panic() {
        let samples: [&[u8]; 6] = [
            b"",
            b"\xff\xfe",
            br#"{"access_token":5}"#,
            br#"{"access_token":"a.eyJleHAiOjF9.c"}"#,
            br#"{"access_token":"a.eyJleHAiOjFlMzA4LCJzdWIiOiJ4In0.c"}"#,
            br#"[1,2,3]"#,
        ];
        for s in samples {
            let _ = read_answer(s, "sub");
        }
    }

    #[test]
    fn error_answers_are_summarised() {
        assert_eq!(
            error_summary(br#"{"error":"invalid_client","error_description":"bad secret"}"#),
            "(invalid_client: bad secret)"
        );
        assert_eq!(error_summary(b""), "");
        assert_eq!(error_summary(b"nope"), "(nope)");
        let f = judge(StatusCode::UNAUTHORIZED, b"{}".to_vec()).unwrap_err();
        assert!(!f.retry);
        let f = judge(StatusCode::SERVICE_UNAVAILABLE, Vec::new()).unwrap_err();
        assert!(f.retry);
    }

    #[test]
    fn refresh_time_as_kafka_places_it() {
        let w = RefreshWindow::default();
        let t0 = UNIX_EPOCH + Duration::from_secs(1_000_000);
        // An hour-long token: 80% of its life (no jitter drawn).
        let at = w.refresh_at(t0, t0 + Duration::from_secs(3600), t0, 0.0);
        assert_eq!(at, t0 + Duration::from_secs(2880));
        // With the whole jitter: 85%.
        let at = w.refresh_at(t0, t0 + Duration::from_secs(3600), t0, 1.0);
        assert_eq!(at, t0 + Duration::from_secs(3060));
        // Twenty minutes: 80% would fall inside the 5-minute buffer, so the buffer's start.
        let at = w.refresh_at(t0, t0 + Duration::from_secs(1200), t0, 0.0);
        assert_eq!(at, t0 + Duration::from_secs(900));
        // Too short for both buffers: 80% of what remains.
        let at = w.refresh_at(t0, t0 + Duration::from_secs(10), t0, 0.0);
        assert_eq!(at, t0 + Duration::from_secs(8));
        // Issued long ago: not sooner than the minimum period from now.
        let issued = t0 - Duration::from_secs(100_000);
        let at = w.refresh_at(issued, t0 + Duration::from_secs(1000), t0, 0.0);
        assert_eq!(at, t0 + Duration::from_secs(60));
    }
}
