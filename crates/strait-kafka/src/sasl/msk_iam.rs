//! Amazon MSK's IAM authentication, as Amazon's `aws-msk-iam-auth` library makes it, in its two
//! forms:
//!
//! - SASL mechanism `AWS_MSK_IAM`: one client message, a JSON object of the fields of a SigV4
//!   presigned `GET https://<broker host>/?Action=kafka-cluster:Connect` (service
//!   `kafka-cluster`, region from the broker host, valid 900 s) with `version` `2020_10_22`,
//!   `host` and `user-agent`; the broker answers `{"version":"2020_10_22","request-id":"…"}`.
//! - OAUTHBEARER with Amazon's `IAMOAuthBearerLoginCallbackHandler`: the token is the
//!   base64url (no padding) of the presigned URL
//!   `https://kafka.<region>.amazonaws.com?Action=kafka-cluster%3AConnect&…&User-Agent=…`,
//!   the region from the default region chain (`AWS_REGION`, the profile's `region`).
//!
//! Each authentication, re-authentications (KIP-368) included, signs anew with the credentials
//! the chain gives then ([`crate::aws::CredentialsProvider`]). Both outputs are compared byte for
//! byte with the library's own in `tests/msk_iam.rs`.

use std::sync::Arc;
use std::time::SystemTime;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

use crate::aws::sigv4::{self, uri_encode};
use crate::aws::{Credentials, CredentialsProvider};
use crate::secret::Secret;

/// The payload format's version.
pub const VERSION: &str = "2020_10_22";
/// The action signed.
pub const ACTION: &str = "kafka-cluster:Connect";
/// The signing name of MSK's IAM authentication.
pub const SIGNING_NAME: &str = "kafka-cluster";
/// How long a signature is valid (the library's 15 minutes).
pub const EXPIRES_SECS: u64 = 900;
/// The user agent strait sends (the library sends `aws-msk-iam-auth/<version>/<SDK's>`).
pub const USER_AGENT: &str = concat!("strait/", env!("CARGO_PKG_VERSION"));

/// Which of the two forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MskIamForm {
    /// SASL mechanism `AWS_MSK_IAM` (`IAMLoginModule`, `IAMClientCallbackHandler`).
    AwsMskIam,
    /// SASL mechanism `OAUTHBEARER` with `IAMOAuthBearerLoginCallbackHandler`.
    OAuthBearer,
}

/// MSK IAM authentication: the form and where credentials come from.
#[derive(Debug, Clone)]
pub struct MskIam {
    /// Which form.
    pub form: MskIamForm,
    /// The credential chain, shared by all connections of a client (it caches STS answers).
    pub credentials: Arc<CredentialsProvider>,
    /// `awsDebugCreds`: log, at info, which credentials each authentication uses (access key
    /// id and source; never the secret). The library logs STS `GetCallerIdentity` instead.
    pub debug_credentials: bool,
}

impl MskIam {
    /// The first (only) client message for a connection to `host`, and a description of the
    /// credentials used, for messages.
    pub(crate) async fn first_message(&self, host: &str) -> Result<(Vec<u8>, String), String> {
        let credentials = self.credentials.credentials().await?;
        let who = format!(
            "access key id {} from {}",
            credentials.access_key_id, credentials.source
        );
        if self.debug_credentials {
            tracing::info!(host, credentials = %who, "MSK IAM authentication");
        }
        let now = SystemTime::now();
        let message = match self.form {
            MskIamForm::AwsMskIam => {
                let region = match region_from_host(host) {
                    Some(r) => r,
                    None => self.credentials.env().default_region().ok_or_else(|| {
                        format!(
                            "cannot tell the AWS region: the broker host `{host}` names none, \
                             and neither AWS_REGION nor the profile's `region` is set"
                        )
                    })?,
                };
                payload(host, &region, &credentials, now, USER_AGENT)
            }
            MskIamForm::OAuthBearer => {
                let region = self.credentials.env().default_region().ok_or(
                    "cannot tell the AWS region for the MSK IAM token: set AWS_REGION (or \
                     `region` in the profile), as Amazon's IAMOAuthBearerLoginCallbackHandler \
                     needs",
                )?;
                let token = token(&region, &credentials, now, USER_AGENT);
                super::oauthbearer::initial_response(&token, &[])
            }
        };
        Ok((message, who))
    }
}

/// The region a broker host names, as the library finds it (a region id inside the host name,
/// e.g. `b-1.c.abc.c2.kafka.eu-west-1.amazonaws.com`): the first dot-separated label shaped
/// like a region id (`xx-[word-]*direction-N`). The library matches the region ids its SDK
/// knows; this matches new regions too.
pub fn region_from_host(host: &str) -> Option<String> {
    const DIRECTIONS: [&str; 9] = [
        "north",
        "south",
        "east",
        "west",
        "central",
        "northeast",
        "northwest",
        "southeast",
        "southwest",
    ];
    host.split('.')
        .find(|label| {
            let parts: Vec<&str> = label.split('-').collect();
            parts.len() >= 3
                && parts[0].len() == 2
                && parts[0].bytes().all(|b| b.is_ascii_lowercase())
                && parts[parts.len() - 1].len() <= 2
                && parts[parts.len() - 1].bytes().all(|b| b.is_ascii_digit())
                && parts[1..parts.len() - 1]
                    .iter()
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase()))
                && parts[1..parts.len() - 1]
                    .iter()
                    .any(|p| DIRECTIONS.contains(p))
        })
        .map(str::to_owned)
}

fn scope(region: &str, time: SystemTime) -> sigv4::Scope<'_> {
    sigv4::Scope {
        region,
        service: SIGNING_NAME,
        time,
    }
}

/// The `AWS_MSK_IAM` client message for `host` in `region` at `time`: the JSON object the
/// library sends, its keys in the order the library's `java.util.HashMap` gives them
/// ([`java_hash_map_order`]) so that the bytes are the library's.
pub fn payload(
    host: &str,
    region: &str,
    credentials: &Credentials,
    time: SystemTime,
    user_agent: &str,
) -> Vec<u8> {
    let query = sigv4::presign(
        host,
        &[("Action", ACTION)],
        credentials,
        &scope(region, time),
        EXPIRES_SECS,
    );
    // The library: the query parameters (keys in lower case), then `version` and `user-agent`,
    // then the signed request's headers (`host`).
    let mut fields: Vec<(String, String)> = query
        .into_iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect();
    fields.push(("version".into(), VERSION.into()));
    fields.push(("user-agent".into(), user_agent.into()));
    fields.push(("host".into(), host.into()));
    let fields = java_hash_map_order(fields);
    let mut json = String::from("{");
    for (i, (k, v)) in fields.iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        json.push_str(&json_string(k));
        json.push(':');
        json.push_str(&json_string(v));
    }
    json.push('}');
    json.into_bytes()
}

fn json_string(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// The order a `java.util.HashMap` holding `entries` (put in this order, keys distinct)
/// iterates them: by bucket (`h ^ (h >>> 16)` of `String.hashCode`, masked by the table
/// size, 16 doubled while more than 3/4 full), then in insertion order within a bucket.
pub fn java_hash_map_order(entries: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut capacity = 16usize;
    while entries.len() > capacity * 3 / 4 {
        capacity *= 2;
    }
    let bucket = |key: &str| {
        let h = key
            .encode_utf16()
            .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
        let h = h ^ ((h as u32) >> 16) as i32;
        (h as u32 as usize) & (capacity - 1)
    };
    let mut entries: Vec<(usize, (String, String))> =
        entries.into_iter().map(|e| (bucket(&e.0), e)).collect();
    entries.sort_by_key(|(b, _)| *b);
    entries.into_iter().map(|(_, e)| e).collect()
}

/// The OAUTHBEARER token for `region` at `time`: base64url (no padding) of the presigned URL,
/// `User-Agent` appended after the signature as the library does.
pub fn token(
    region: &str,
    credentials: &Credentials,
    time: SystemTime,
    user_agent: &str,
) -> Secret {
    let host = format!("kafka.{region}.amazonaws.com");
    let mut query = sigv4::presign(
        &host,
        &[("Action", ACTION)],
        credentials,
        &scope(region, time),
        EXPIRES_SECS,
    );
    query.push(("User-Agent".into(), user_agent.into()));
    let query: Vec<String> = query
        .iter()
        .map(|(k, v)| format!("{}={}", uri_encode(k, false), uri_encode(v, false)))
        .collect();
    let url = format!("https://{host}?{}", query.join("&"));
    Secret::new(URL_SAFE_NO_PAD.encode(url.as_bytes()))
}

/// Checks the broker's answer to the `AWS_MSK_IAM` message; returns its request id.
pub(crate) fn check_response(answer: &[u8]) -> Result<String, String> {
    if answer.is_empty() {
        return Err("the broker's answer to the AWS_MSK_IAM message is empty".into());
    }
    let shown = || String::from_utf8_lossy(&answer[..answer.len().min(200)]).into_owned();
    let value: serde_json::Value = serde_json::from_slice(answer)
        .map_err(|_| format!("the broker's answer is not JSON: `{}`", shown()))?;
    match value.get("version").and_then(|v| v.as_str()) {
        Some(VERSION) => {}
        _ => {
            return Err(format!(
                "the broker's answer is not of version {VERSION}: `{}`",
                shown()
            ))
        }
    }
    value
        .get("request-id")
        .and_then(|v| v.as_str())
        .map(str::to_owned)
        .ok_or_else(|| format!("the broker's answer has no request-id: `{}`", shown()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn credentials(token: bool) -> Credentials {
        Credentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: Secret::new("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
            session_token: token.then(|| Secret::new("session/token+=")),
            expires: None,
            source: "test".into(),
        }
    }

    #[test]
    fn regions_from_hosts() {
        for (host, region) in [
            (
                "b-1.c.abc123.c2.kafka.eu-west-1.amazonaws.com",
                Some("eu-west-1"),
            ),
            (
                "boot-x.c1.kafka-serverless.us-east-2.amazonaws.com",
                Some("us-east-2"),
            ),
            (
                "b-2.x.kafka.us-gov-west-1.amazonaws.com",
                Some("us-gov-west-1"),
            ),
            (
                "b-1.x.kafka.ap-southeast-4.amazonaws.com",
                Some("ap-southeast-4"),
            ),
            ("broker.internal", None),
            ("10.0.0.1", None),
            ("b-1.x.kafka.eu-west.example", None),
        ] {
            assert_eq!(region_from_host(host).as_deref(), region, "{host}");
        }
    }

    #[test]
    fn java_hash_map_order_of_the_payload_keys() {
        // The order the library (2.3.6) printed for a payload with a session token.
        let keys = [
            "action",
            "x-amz-security-token",
            "x-amz-algorithm",
            "x-amz-date",
            "x-amz-signedheaders",
            "x-amz-expires",
            "x-amz-credential",
            "x-amz-signature",
            "version",
            "user-agent",
            "host",
        ];
        let entries = keys
            .iter()
            .map(|k| (k.to_string(), String::new()))
            .collect();
        let ordered: Vec<String> = java_hash_map_order(entries)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(
            ordered,
            [
                "x-amz-date",
                "x-amz-signedheaders",
                "x-amz-signature",
                "host",
                "action",
                "x-amz-expires",
                "x-amz-security-token",
                "version",
                "x-amz-algorithm",
                "x-amz-credential",
                "user-agent"
            ]
        );
    }

    #[test]
    fn payload_fields() {
        let t = UNIX_EPOCH + Duration::from_secs(1_440_938_160);
        let p = payload(
            "b-1.x.kafka.us-east-1.amazonaws.com",
            "us-east-1",
            &credentials(false),
            t,
            "ua",
        );
        let v: serde_json::Value = serde_json::from_slice(&p).unwrap();
        assert_eq!(v["version"], "2020_10_22");
        assert_eq!(v["action"], "kafka-cluster:Connect");
        assert_eq!(v["x-amz-date"], "20150830T123600Z");
        assert_eq!(v["x-amz-expires"], "900");
        assert_eq!(
            v["x-amz-credential"],
            "AKIDEXAMPLE/20150830/us-east-1/kafka-cluster/aws4_request"
        );
        assert!(v.get("x-amz-security-token").is_none());
        let p = payload("h.us-east-1.x", "us-east-1", &credentials(true), t, "ua");
        let v: serde_json::Value = serde_json::from_slice(&p).unwrap();
        assert_eq!(v["x-amz-security-token"], "session/token+=");
    }

    #[test]
    fn token_is_a_presigned_url() {
        let t = UNIX_EPOCH + Duration::from_secs(1_440_938_160);
        let token = token("eu-west-1", &credentials(true), t, "strait/1 x");
        let url = String::from_utf8(URL_SAFE_NO_PAD.decode(token.expose()).unwrap()).unwrap();
        assert!(
            url.starts_with(
                "https://kafka.eu-west-1.amazonaws.com?Action=kafka-cluster%3AConnect&\
             X-Amz-Security-Token=session%2Ftoken%2B%3D&X-Amz-Algorithm=AWS4-HMAC-SHA256&\
             X-Amz-Date=20150830T123600Z&X-Amz-SignedHeaders=host&X-Amz-Expires=900&\
             X-Amz-Credential=AKIDEXAMPLE%2F20150830%2Feu-west-1%2Fkafka-cluster%2Faws4_request&\
             X-Amz-Signature="
            ),
            "{url}"
        );
        assert!(url.ends_with("&User-Agent=strait%2F1%20x"), "{url}");
    }

    #[test]
    fn broker_answers() {
        assert_eq!(
            check_response(br#"{"version":"2020_10_22","request-id":"abc"}"#).unwrap(),
            "abc"
        );
        assert!(check_response(b"").is_err());
        assert!(check_response(b"\xff\x00")
            .unwrap_err()
            .contains("not JSON"));
        assert!(check_response(br#"{"version":"2","request-id":"a"}"#).is_err());
        assert!(check_response(br#"{"version":"2020_10_22"}"#).is_err());
    }
}
