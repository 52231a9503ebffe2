//! AWS Signature Version 4: the canonical request, the string to sign, the signing key and the
//! signature, for a request signed in its headers (strait's calls to STS) or presigned in its
//! query string (the MSK IAM authentication).
//!
//! Checked against AWS's published SigV4 test suite (`tests/sigv4_vectors/`) and, for the
//! presigned form, byte for byte against Amazon's `aws-msk-iam-auth` library
//! (`tests/msk_iam.rs`).

use std::time::{SystemTime, UNIX_EPOCH};

use ring::{digest, hmac};

use super::Credentials;
use crate::civil::civil_from_days;

/// The algorithm's name, as requests and strings to sign spell it.
pub const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// A request to sign: method, path, query parameters (not encoded) and headers.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// `GET`, `POST`…
    pub method: &'a str,
    /// The path, not encoded (`/` when empty).
    pub path: &'a str,
    /// The query parameters, not encoded, in the order they are sent.
    pub query: Vec<(String, String)>,
    /// The headers to sign, with their values as sent (`host` among them).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: &'a [u8],
}

/// Where and when a signature applies.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    /// The region, e.g. `us-east-1`.
    pub region: &'a str,
    /// The signing name of the service, e.g. `kafka-cluster` or `sts`.
    pub service: &'a str,
    /// The signing time.
    pub time: SystemTime,
}

impl Scope<'_> {
    /// `YYYYMMDD'T'HHMMSS'Z'`.
    pub fn amz_date(&self) -> String {
        amz_date(self.time)
    }

    /// `<date>/<region>/<service>/aws4_request`.
    pub fn credential_scope(&self) -> String {
        format!(
            "{}/{}/{}/aws4_request",
            &self.amz_date()[..8],
            self.region,
            self.service
        )
    }
}

/// `YYYYMMDD'T'HHMMSS'Z'` of `time` (UTC).
pub fn amz_date(time: SystemTime) -> String {
    let secs = time
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        s / 3600,
        (s / 60) % 60,
        s % 60
    )
}

/// Percent-encodes as SigV4 wants (RFC 3986: all but `A-Z a-z 0-9 - _ . ~`), keeping `/` when
/// `keep_slash` (paths).
pub fn uri_encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b'/' if keep_slash => out.push('/'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Lower-case hex of SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, data).as_ref())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> hmac::Tag {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data)
}

impl Request<'_> {
    /// The canonical request, with the body's hash given (the hex SHA-256 of the body).
    pub fn canonical(&self, payload_hash: &str) -> String {
        let path = if self.path.is_empty() {
            "/".to_owned()
        } else {
            uri_encode(self.path, true)
        };
        let mut query: Vec<(String, String)> = self
            .query
            .iter()
            .map(|(k, v)| (uri_encode(k, false), uri_encode(v, false)))
            .collect();
        query.sort();
        let query: Vec<String> = query.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let headers = self.canonical_headers();
        let mut canonical_headers = String::new();
        for (name, value) in &headers {
            canonical_headers.push_str(name);
            canonical_headers.push(':');
            canonical_headers.push_str(value);
            canonical_headers.push('\n');
        }
        format!(
            "{}\n{path}\n{}\n{canonical_headers}\n{}\n{payload_hash}",
            self.method,
            query.join("&"),
            self.signed_headers()
        )
    }

    /// Header names in lower case, values trimmed with inner runs of spaces made one, sorted by
    /// name; values of a repeated header joined with `,`.
    fn canonical_headers(&self) -> Vec<(String, String)> {
        let mut headers: Vec<(String, String)> = Vec::new();
        for (name, value) in &self.headers {
            let name = name.to_ascii_lowercase();
            let value = value.split_whitespace().collect::<Vec<_>>().join(" ");
            match headers.iter_mut().find(|(n, _)| *n == name) {
                Some((_, v)) => {
                    v.push(',');
                    v.push_str(&value);
                }
                None => headers.push((name, value)),
            }
        }
        headers.sort_by(|a, b| a.0.cmp(&b.0));
        headers
    }

    /// `host;x-amz-date…`: the signed header names.
    pub fn signed_headers(&self) -> String {
        let names: Vec<String> = self
            .canonical_headers()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        names.join(";")
    }
}

/// The string to sign for a canonical request.
pub fn string_to_sign(scope: &Scope<'_>, canonical_request: &str) -> String {
    format!(
        "{ALGORITHM}\n{}\n{}\n{}",
        scope.amz_date(),
        scope.credential_scope(),
        sha256_hex(canonical_request.as_bytes())
    )
}

/// The hex signature of `string_to_sign`.
pub fn signature(secret_access_key: &str, scope: &Scope<'_>, string_to_sign: &str) -> String {
    let date = &scope.amz_date()[..8];
    let k = hmac_sha256(
        format!("AWS4{secret_access_key}").as_bytes(),
        date.as_bytes(),
    );
    let k = hmac_sha256(k.as_ref(), scope.region.as_bytes());
    let k = hmac_sha256(k.as_ref(), scope.service.as_bytes());
    let k = hmac_sha256(k.as_ref(), b"aws4_request");
    hex(hmac_sha256(k.as_ref(), string_to_sign.as_bytes()).as_ref())
}

/// Signs `request` in its headers: returns the headers to add (`x-amz-date`,
/// `x-amz-security-token` with session credentials, `authorization`). `request.headers` must
/// hold `host` and whatever else is to be signed, and no `x-amz-date`.
pub fn sign_headers(
    request: &Request<'_>,
    credentials: &Credentials,
    scope: &Scope<'_>,
) -> Vec<(String, String)> {
    let mut request = request.clone();
    let mut added = vec![("x-amz-date".to_owned(), scope.amz_date())];
    if let Some(token) = &credentials.session_token {
        added.push(("x-amz-security-token".to_owned(), token.expose().to_owned()));
    }
    request.headers.extend(added.iter().cloned());
    let canonical = request.canonical(&sha256_hex(request.body));
    let to_sign = string_to_sign(scope, &canonical);
    let signature = signature(credentials.secret_access_key.expose(), scope, &to_sign);
    added.push((
        "authorization".to_owned(),
        format!(
            "{ALGORITHM} Credential={}/{}, SignedHeaders={}, Signature={signature}",
            credentials.access_key_id,
            scope.credential_scope(),
            request.signed_headers()
        ),
    ));
    added
}

/// Presigns a `GET` of `https://<host>/` with `query` (not encoded), valid for `expires_secs`,
/// the way the AWS SDK for Java's `Aws4Signer.presign` does: the query parameters in the order
/// it sends them, `X-Amz-Security-Token` (session credentials only), `X-Amz-Algorithm`,
/// `X-Amz-Date`, `X-Amz-SignedHeaders`, `X-Amz-Expires`, `X-Amz-Credential`, then
/// `X-Amz-Signature`. Only `host` is signed; the payload hash is that of an empty body.
pub fn presign(
    host: &str,
    query: &[(&str, &str)],
    credentials: &Credentials,
    scope: &Scope<'_>,
    expires_secs: u64,
) -> Vec<(String, String)> {
    let mut params: Vec<(String, String)> = query
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    if let Some(token) = &credentials.session_token {
        params.push(("X-Amz-Security-Token".into(), token.expose().to_owned()));
    }
    params.push(("X-Amz-Algorithm".into(), ALGORITHM.into()));
    params.push(("X-Amz-Date".into(), scope.amz_date()));
    params.push(("X-Amz-SignedHeaders".into(), "host".into()));
    params.push(("X-Amz-Expires".into(), expires_secs.to_string()));
    params.push((
        "X-Amz-Credential".into(),
        format!("{}/{}", credentials.access_key_id, scope.credential_scope()),
    ));
    let request = Request {
        method: "GET",
        path: "/",
        query: params.clone(),
        headers: vec![("host".into(), host.into())],
        body: b"",
    };
    let canonical = request.canonical(&sha256_hex(b""));
    let to_sign = string_to_sign(scope, &canonical);
    params.push((
        "X-Amz-Signature".into(),
        signature(credentials.secret_access_key.expose(), scope, &to_sign),
    ));
    params
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amz_dates() {
        let t = UNIX_EPOCH + std::time::Duration::from_secs(1_440_938_160);
        assert_eq!(amz_date(t), "20150830T123600Z");
    }

    #[test]
    fn encoding_keeps_unreserved_only() {
        assert_eq!(
            uri_encode("a-b_c.d~e f/g:h+", false),
            "a-b_c.d~e%20f%2Fg%3Ah%2B"
        );
        assert_eq!(uri_encode("/a b/", true), "/a%20b/");
    }
}
