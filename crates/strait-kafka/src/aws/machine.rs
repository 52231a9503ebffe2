//! Credentials the machine hands out, the last two sources of the AWS SDK's default chain:
//!
//! - the ECS container endpoint: `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` (on
//!   `http://169.254.170.2`) or `AWS_CONTAINER_CREDENTIALS_FULL_URI` (https, or http to a
//!   loopback address or the ECS/EKS Pod Identity agent), with `AWS_CONTAINER_AUTHORIZATION_TOKEN`
//!   or `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE` as the `Authorization` header;
//! - EC2 instance metadata, IMDSv2: a session token from `PUT /latest/api/token`, then the role
//!   from `/latest/meta-data/iam/security-credentials/` and its credentials; at
//!   `AWS_EC2_METADATA_SERVICE_ENDPOINT` or `http://169.254.169.254`; off with
//!   `AWS_EC2_METADATA_DISABLED=true`. (IMDSv1, without the token, is not used.)
//!
//! Both answer a JSON object with `AccessKeyId`, `SecretAccessKey`, `Token` and `Expiration`.

use std::time::Duration;

use super::http::{self, Url};
use super::{sts, Credentials, Env};
use crate::secret::Secret;

/// How long one call to a local endpoint may take (the SDK's one second, and some slack).
const TIMEOUT: Duration = Duration::from_secs(2);

/// The ECS container endpoint's credentials; `Err` says why there are none.
pub(super) async fn container(env: &Env) -> Result<Credentials, String> {
    let url = match (
        env.var("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"),
        env.var("AWS_CONTAINER_CREDENTIALS_FULL_URI"),
    ) {
        (Some(relative), _) => format!("http://169.254.170.2{relative}"),
        (None, Some(full)) => full.to_owned(),
        (None, None) => {
            return Err("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI and _FULL_URI are not set".into())
        }
    };
    let parsed = Url::parse(&url)?;
    if !parsed.https && !local_container_host(&parsed.host) {
        return Err(format!(
            "{url}: over http the container endpoint must be a loopback address or the ECS or \
             EKS agent (169.254.170.2, 169.254.170.23, fd00:ec2::23)"
        ));
    }
    let mut headers = Vec::new();
    let token = match env.var("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE") {
        Some(file) => Some(
            std::fs::read_to_string(file)
                .map_err(|e| {
                    format!("cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE {file}: {e}")
                })?
                .trim()
                .to_owned(),
        ),
        None => env
            .var("AWS_CONTAINER_AUTHORIZATION_TOKEN")
            .map(str::to_owned),
    };
    if let Some(token) = token {
        headers.push(("Authorization".to_owned(), token));
    }
    let response = http::send("GET", &parsed, &headers, b"", TIMEOUT).await?;
    if response.status != 200 {
        return Err(format!("{url} answered HTTP {}", response.status));
    }
    parse(&response.body, format!("the container endpoint {url}"))
}

fn local_container_host(host: &str) -> bool {
    matches!(
        host,
        "localhost" | "169.254.170.2" | "169.254.170.23" | "fd00:ec2::23"
    ) || host
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

/// The EC2 instance profile's credentials (IMDSv2); `Err` says why there are none.
pub(super) async fn instance(env: &Env) -> Result<Credentials, String> {
    if env
        .var("AWS_EC2_METADATA_DISABLED")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    {
        return Err("disabled (AWS_EC2_METADATA_DISABLED)".into());
    }
    let base = env
        .var("AWS_EC2_METADATA_SERVICE_ENDPOINT")
        .unwrap_or("http://169.254.169.254")
        .trim_end_matches('/')
        .to_owned();
    let at = |path: &str| Url::parse(&format!("{base}{path}"));
    let token = http::send(
        "PUT",
        &at("/latest/api/token")?,
        &[(
            "X-aws-ec2-metadata-token-ttl-seconds".to_owned(),
            "21600".to_owned(),
        )],
        b"",
        TIMEOUT,
    )
    .await
    .map_err(|e| format!("no instance metadata at {base}: {e}"))?;
    if token.status != 200 {
        return Err(format!(
            "{base} answered HTTP {} for an IMDSv2 token",
            token.status
        ));
    }
    let token = String::from_utf8_lossy(&token.body).trim().to_owned();
    let headers = [("X-aws-ec2-metadata-token".to_owned(), token)];
    let path = "/latest/meta-data/iam/security-credentials/";
    let roles = http::send("GET", &at(path)?, &headers, b"", TIMEOUT).await?;
    if roles.status != 200 {
        return Err(format!(
            "{base}{path} answered HTTP {} (no instance profile?)",
            roles.status
        ));
    }
    let roles = String::from_utf8_lossy(&roles.body).into_owned();
    let Some(role) = roles.lines().map(str::trim).find(|l| !l.is_empty()) else {
        return Err(format!("{base}{path} names no role (no instance profile?)"));
    };
    if !role
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"+=,.@_-".contains(&b))
    {
        return Err(format!("{base}{path} answered an odd role name"));
    }
    let response = http::send(
        "GET",
        &at(&format!("{path}{role}"))?,
        &headers,
        b"",
        TIMEOUT,
    )
    .await?;
    if response.status != 200 {
        return Err(format!(
            "{base}{path}{role} answered HTTP {}",
            response.status
        ));
    }
    parse(
        &response.body,
        format!("the EC2 instance profile (role {role})"),
    )
}

/// The endpoints' JSON answer.
fn parse(body: &[u8], source: String) -> Result<Credentials, String> {
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|_| format!("{source} answered something that is not JSON"))?;
    if let Some(code) = value.get("Code").and_then(|c| c.as_str()) {
        if code != "Success" {
            return Err(format!("{source} answered Code {code}"));
        }
    }
    let field = |name: &str| {
        value
            .get(name)
            .and_then(|v| v.as_str())
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| format!("{source} answered no {name}"))
    };
    let expires = match value.get("Expiration").and_then(|v| v.as_str()) {
        Some(text) => Some(
            sts::parse_time(text)
                .ok_or_else(|| format!("{source} answered Expiration `{text}`, not a time"))?,
        ),
        None => None,
    };
    Ok(Credentials {
        access_key_id: field("AccessKeyId")?,
        secret_access_key: Secret::new(field("SecretAccessKey")?),
        session_token: field("Token").ok().map(Secret::new),
        expires,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers() {
        let c = parse(
            br#"{"Code":"Success","AccessKeyId":"ASIA1","SecretAccessKey":"s","Token":"t","Expiration":"2030-01-01T00:00:00Z"}"#,
            "x".into(),
        )
        .unwrap();
        assert_eq!(c.access_key_id, "ASIA1");
        assert!(c.expires.is_some());
        assert!(parse(br#"{"Code":"Failure"}"#, "x".into()).is_err());
        assert!(parse(b"<html>", "x".into()).is_err());
        assert!(local_container_host("127.0.0.1"));
        assert!(local_container_host("169.254.170.23"));
        assert!(!local_container_host("example.com"));
    }
}
