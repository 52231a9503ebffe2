//! The two AWS STS calls of the credential chain: `AssumeRoleWithWebIdentity` (unsigned: the
//! web identity token is the proof) and `AssumeRole` (SigV4-signed with the caller's
//! credentials), over the query API (form-encoded `POST`, XML answer).

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::http::{self, Url};
use super::sigv4::{self, uri_encode};
use super::{AssumeRole, Credentials, Env};
use crate::secret::Secret;

/// How long one STS call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// The first retry's longest wait (the library's `BASE_DELAY`).
const BASE_DELAY: Duration = Duration::from_millis(500);

/// Where and how STS is called.
#[derive(Debug, Clone)]
pub struct Sts {
    /// For `AWS_ENDPOINT_URL_STS` / `AWS_ENDPOINT_URL`.
    pub env: Env,
    /// The regional endpoint to use; `None` or `aws-global` for the global one.
    pub region: Option<String>,
    /// Retries of a call that got no answer, or a 5xx one.
    pub max_retries: u32,
    /// The longest wait between two tries.
    pub max_backoff: Duration,
}

impl Sts {
    /// The same, at `region`'s endpoint when given.
    pub fn with_region(mut self, region: Option<String>) -> Sts {
        if region.is_some() {
            self.region = region;
        }
        self
    }

    fn regional(&self) -> Option<&str> {
        self.region.as_deref().filter(|r| *r != "aws-global")
    }

    /// The endpoint: the override, else STS's regional or global one.
    pub fn endpoint(&self) -> String {
        if let Some(url) = self
            .env
            .var("AWS_ENDPOINT_URL_STS")
            .or_else(|| self.env.var("AWS_ENDPOINT_URL"))
        {
            return url.to_owned();
        }
        match self.regional() {
            Some(r) if r.starts_with("cn-") => format!("https://sts.{r}.amazonaws.com.cn"),
            Some(r) => format!("https://sts.{r}.amazonaws.com"),
            None => "https://sts.amazonaws.com".to_owned(),
        }
    }

    /// The region requests are signed for (`us-east-1` for the global endpoint).
    fn signing_region(&self) -> &str {
        self.regional().unwrap_or("us-east-1")
    }

    /// `AssumeRoleWithWebIdentity` with the token read now from `token_file`.
    pub async fn assume_role_with_web_identity(
        &self,
        role_arn: &str,
        session_name: &str,
        token_file: &Path,
    ) -> Result<Credentials, String> {
        let token = std::fs::read_to_string(token_file)
            .map_err(|e| format!("cannot read the token file {}: {e}", token_file.display()))?;
        let token = token.trim();
        if token.is_empty() {
            return Err(format!("the token file {} is empty", token_file.display()));
        }
        let body = form(&[
            ("Action", "AssumeRoleWithWebIdentity"),
            ("Version", "2011-06-15"),
            ("RoleArn", role_arn),
            ("RoleSessionName", session_name),
            ("WebIdentityToken", token),
        ]);
        let source = format!("web identity, role {role_arn}");
        self.call("AssumeRoleWithWebIdentity", &body, None, source)
            .await
    }

    /// `AssumeRole` signed with `caller`.
    pub async fn assume_role(
        &self,
        role: &AssumeRole,
        caller: &Credentials,
    ) -> Result<Credentials, String> {
        let mut params = vec![
            ("Action", "AssumeRole"),
            ("Version", "2011-06-15"),
            ("RoleArn", role.role_arn.as_str()),
            ("RoleSessionName", role.session_name.as_str()),
        ];
        if let Some(id) = &role.external_id {
            params.push(("ExternalId", id));
        }
        let body = form(&params);
        let source = format!(
            "role {} assumed with the credentials from {}",
            role.role_arn, caller.source
        );
        self.call("AssumeRole", &body, Some(caller), source).await
    }

    async fn call(
        &self,
        action: &str,
        body: &str,
        signer: Option<&Credentials>,
        source: String,
    ) -> Result<Credentials, String> {
        let endpoint = self.endpoint();
        let url = Url::parse(&endpoint).map_err(|e| format!("STS endpoint: {e}"))?;
        let mut attempt = 0;
        loop {
            let mut headers = vec![(
                "Content-Type".to_owned(),
                "application/x-www-form-urlencoded; charset=utf-8".to_owned(),
            )];
            if let Some(credentials) = signer {
                let request = sigv4::Request {
                    method: "POST",
                    path: &url.path,
                    query: Vec::new(),
                    headers: vec![
                        ("host".into(), url.host_header()),
                        (headers[0].0.clone(), headers[0].1.clone()),
                    ],
                    body: body.as_bytes(),
                };
                let scope = sigv4::Scope {
                    region: self.signing_region(),
                    service: "sts",
                    time: SystemTime::now(),
                };
                headers.extend(sigv4::sign_headers(&request, credentials, &scope));
            }
            let retriable = match http::post(&url, &headers, body.as_bytes(), CALL_TIMEOUT).await {
                Ok(response) if response.status == 200 => {
                    return parse_credentials(&response.body, source)
                        .map_err(|e| format!("STS {action} at {endpoint}: {e}"));
                }
                Ok(response) => {
                    let error = describe_error(response.status, &response.body);
                    if response.status < 500 {
                        return Err(format!("STS {action} at {endpoint} refused: {error}"));
                    }
                    error
                }
                Err(e) => e,
            };
            if attempt >= self.max_retries {
                return Err(format!(
                    "STS {action} at {endpoint} failed after {} tries: {retriable}",
                    attempt + 1
                ));
            }
            tracing::warn!(action, endpoint, attempt, error = %retriable, "STS call failed; trying again");
            let cap = BASE_DELAY
                .saturating_mul(1 << attempt.min(16))
                .min(self.max_backoff);
            tokio::time::sleep(cap.mul_f64(rand::random::<f64>())).await;
            attempt += 1;
        }
    }
}

/// `application/x-www-form-urlencoded` of `params`.
fn form(params: &[(&str, &str)]) -> String {
    let pairs: Vec<String> = params
        .iter()
        .map(|(k, v)| format!("{}={}", uri_encode(k, false), uri_encode(v, false)))
        .collect();
    pairs.join("&")
}

/// The text of the first `<tag>` element, entities decoded.
pub(crate) fn xml_text(xml: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let start = xml.find(&open)? + open.len();
    let end = start + xml[start..].find(&format!("</{tag}>"))?;
    Some(
        xml[start..end]
            .trim()
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&#xD;", "\r")
            .replace("&#xA;", "\n")
            .replace("&amp;", "&"),
    )
}

fn describe_error(status: u16, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    match (xml_text(&text, "Code"), xml_text(&text, "Message")) {
        (Some(code), Some(message)) => format!("HTTP {status}, {code}: {message}"),
        (Some(code), None) => format!("HTTP {status}, {code}"),
        _ => format!("HTTP {status}"),
    }
}

fn parse_credentials(body: &[u8], source: String) -> Result<Credentials, String> {
    let text = std::str::from_utf8(body).map_err(|_| "the answer is not UTF-8".to_owned())?;
    let field = |tag: &str| {
        xml_text(text, tag)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("the answer has no <{tag}>"))
    };
    let expiration = field("Expiration")?;
    let expires = parse_time(&expiration)
        .ok_or_else(|| format!("the answer's <Expiration> `{expiration}` is not a time"))?;
    Ok(Credentials {
        access_key_id: field("AccessKeyId")?,
        secret_access_key: Secret::new(field("SecretAccessKey")?),
        session_token: Some(Secret::new(field("SessionToken")?)),
        expires: Some(expires),
        source,
    })
}

/// `YYYY-MM-DDTHH:MM:SS[.fff]Z` (UTC).
pub(crate) fn parse_time(s: &str) -> Option<SystemTime> {
    let s = s.trim().strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let time = time.split('.').next()?;
    let mut t = time.split(':').map(|p| p.parse::<i64>().ok());
    let (h, min, sec) = (t.next()??, t.next()??, t.next()??);
    if !(1970..=9999).contains(&y)
        || !(1..=12).contains(&m)
        || !(1..=31).contains(&day)
        || h > 23
        || min > 59
        || sec > 60
    {
        return None;
    }
    let days = crate::civil::days_from_civil(y, m as u32, day as u32);
    let secs = days * 86_400 + h * 3600 + min * 60 + sec;
    Some(UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers() {
        let xml = "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult>\
            <Credentials><SessionToken>tok&amp;en</SessionToken><SecretAccessKey>sk</SecretAccessKey>\
            <Expiration>2014-10-24T23:00:23.123Z</Expiration><AccessKeyId>ASIA1</AccessKeyId>\
            </Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>";
        let c = parse_credentials(xml.as_bytes(), "x".into()).unwrap();
        assert_eq!(c.access_key_id, "ASIA1");
        assert_eq!(c.session_token.unwrap().expose(), "tok&en");
        assert_eq!(sigv4::amz_date(c.expires.unwrap()), "20141024T230023Z");
        assert!(parse_credentials(b"<x/>", "x".into()).is_err());
        assert!(parse_time("99999999999999999-01-01T00:00:00Z").is_none());
        assert!(parse_time("2020-13-01T00:00:00Z").is_none());
        let err = "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code>\
            <Message>Not authorized</Message></Error></ErrorResponse>";
        assert_eq!(
            describe_error(403, err.as_bytes()),
            "HTTP 403, AccessDenied: Not authorized"
        );
    }

    #[test]
    fn endpoints() {
        let sts = |region: Option<&str>, vars: Vec<(&str, &str)>| Sts {
            env: Env::from_vars(vars),
            region: region.map(str::to_owned),
            max_retries: 0,
            max_backoff: Duration::ZERO,
        };
        assert_eq!(sts(None, vec![]).endpoint(), "https://sts.amazonaws.com");
        assert_eq!(
            sts(Some("aws-global"), vec![]).signing_region(),
            "us-east-1"
        );
        assert_eq!(
            sts(Some("eu-west-1"), vec![]).endpoint(),
            "https://sts.eu-west-1.amazonaws.com"
        );
        assert_eq!(
            sts(None, vec![("AWS_ENDPOINT_URL_STS", "http://127.0.0.1:1")]).endpoint(),
            "http://127.0.0.1:1"
        );
    }
}
