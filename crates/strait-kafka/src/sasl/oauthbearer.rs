//! OAUTHBEARER (RFC 7628) as Kafka's client sends it (KIP-255): one initial response carrying
//! the token and any SASL extensions,
//!
//! ```text
//! n,,\x01auth=Bearer <token>\x01[<key>=<value>\x01]*\x01
//! ```
//!
//! The token comes from the config (strait's `strait.token` JAAS option), from a file read at
//! every authentication (Kafka's `sasl.oauthbearer.token.endpoint.url=file:...`, KIP-768), or
//! is Kafka's unsecured JWT (`unsecuredLogin*` JAAS options, for brokers with the unsecured
//! validator), or is fetched from an identity provider with the client credentials grant
//! ([`super::token_endpoint`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

use super::token_endpoint::TokenEndpoint;
use crate::secret::Secret;

/// Where an OAUTHBEARER token comes from.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum TokenSource {
    /// A token given in the config.
    Static(Secret),
    /// A file holding the token, read again at every authentication and re-authentication so
    /// that whatever refreshes it is picked up.
    File(PathBuf),
    /// Kafka's unsecured JWT (`alg: none`), made at every authentication.
    Unsecured(UnsecuredToken),
    /// An OAuth token endpoint (client credentials), the token kept until its refresh time.
    Endpoint(Arc<TokenEndpoint>),
}

/// Kafka's unsecured token (`OAuthBearerUnsecuredLoginCallbackHandler`): a JWT with no
/// signature, accepted only by brokers that use the unsecured validator (test clusters).
#[derive(Debug, Clone, PartialEq)]
pub struct UnsecuredToken {
    /// `unsecuredLoginPrincipalClaimName` (default `sub`).
    pub principal_claim: String,
    /// The principal: `unsecuredLoginStringClaim_<principal claim>`.
    pub principal: String,
    /// The other `unsecuredLogin{String,Number,List}Claim_<name>` options.
    pub claims: Vec<(String, Claim)>,
    /// `unsecuredLoginLifetimeSeconds` (default 3600 s).
    pub lifetime: Duration,
}

/// A claim of an unsecured token.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// A JSON string.
    String(String),
    /// A JSON number, as written (checked to be a finite number).
    Number(String),
    /// A JSON array of strings.
    List(Vec<String>),
}

impl TokenSource {
    /// The token to send now.
    pub(crate) async fn token(&self) -> Result<Secret, String> {
        match self {
            TokenSource::Static(token) => Ok(token.clone()),
            TokenSource::File(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read the token file {}: {e}", path.display()))?;
                let token = text.trim();
                if token.is_empty() {
                    return Err(format!("the token file {} is empty", path.display()));
                }
                if token.chars().any(char::is_whitespace) {
                    return Err(format!(
                        "the token file {} holds more than one word; it must hold the token only",
                        path.display()
                    ));
                }
                Ok(Secret::new(token))
            }
            TokenSource::Unsecured(t) => Ok(t.jwt(SystemTime::now())),
            TokenSource::Endpoint(endpoint) => endpoint.token().await,
        }
    }
}

impl UnsecuredToken {
    /// The JWT `base64url({"alg":"none"}).base64url(claims).` at time `now`.
    fn jwt(&self, now: SystemTime) -> Secret {
        let iat = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        let exp = iat.saturating_add(self.lifetime.as_secs());
        let mut claims = format!(
            "{{\"iat\":{iat},\"exp\":{exp},{}:{}",
            json_string(&self.principal_claim),
            json_string(&self.principal)
        );
        for (name, value) in &self.claims {
            if *name == self.principal_claim || name == "iat" || name == "exp" {
                continue;
            }
            claims.push(',');
            claims.push_str(&json_string(name));
            claims.push(':');
            match value {
                Claim::String(s) => claims.push_str(&json_string(s)),
                Claim::Number(n) => claims.push_str(n),
                Claim::List(items) => {
                    let items: Vec<String> = items.iter().map(|i| json_string(i)).collect();
                    claims.push_str(&format!("[{}]", items.join(",")));
                }
            }
        }
        claims.push('}');
        Secret::new(format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
            URL_SAFE_NO_PAD.encode(claims.as_bytes())
        ))
    }
}

/// Checks a SASL extension as Kafka does (`OAuthBearerClientInitialResponse`): the key is
/// letters only and not `auth`, the value printable ASCII, space, tab or line breaks.
pub fn check_extension(key: &str, value: &str) -> Result<(), String> {
    if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphabetic()) {
        return Err(format!("SASL extension name `{key}` must be letters only"));
    }
    if key == "auth" {
        return Err("SASL extension name `auth` is reserved".into());
    }
    if value.is_empty()
        || !value
            .chars()
            .all(|c| matches!(c, '\x21'..='\x7E' | ' ' | '\t' | '\r' | '\n'))
    {
        return Err(format!(
            "the value of SASL extension `{key}` must be printable ASCII, and not empty"
        ));
    }
    Ok(())
}

/// The client's initial response.
pub(crate) fn initial_response(token: &Secret, extensions: &[(String, String)]) -> Vec<u8> {
    let mut message = format!("n,,\x01auth=Bearer {}", token.expose());
    for (k, v) in extensions {
        message.push('\x01');
        message.push_str(k);
        message.push('=');
        message.push_str(v);
    }
    message.push_str("\x01\x01");
    message.into_bytes()
}

/// A JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initial_response_as_kafka_writes_it() {
        let token = Secret::new("eyJ.abc.");
        assert_eq!(
            initial_response(&token, &[]),
            b"n,,\x01auth=Bearer eyJ.abc.\x01\x01".to_vec()
        );
        let ext = vec![
            ("traceId".to_owned(), "123".to_owned()),
            ("x".to_owned(), "y z".to_owned()),
        ];
        assert_eq!(
            initial_response(&token, &ext),
            b"n,,\x01auth=Bearer eyJ.abc.\x01traceId=123\x01x=y z\x01\x01".to_vec()
        );
    }

    #[test]
    fn unsecured_token_is_a_jwt_without_signature() {
        let t = UnsecuredToken {
            principal_claim: "sub".into(),
            principal: "alice".into(),
            claims: vec![
                (
                    "scope".into(),
                    Claim::List(vec!["read".into(), "write".into()]),
                ),
                ("n".into(), Claim::Number("1.5".into())),
                ("q".into(), Claim::String("a\"b".into())),
            ],
            lifetime: Duration::from_secs(60),
        };
        let jwt = t.jwt(UNIX_EPOCH + Duration::from_secs(1000));
        let parts: Vec<&str> = jwt.expose().split('.').collect();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[2], "");
        assert_eq!(
            URL_SAFE_NO_PAD.decode(parts[0]).unwrap(),
            br#"{"alg":"none"}"#
        );
        let claims = String::from_utf8(URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(
            claims,
            r#"{"iat":1000,"exp":1060,"sub":"alice","scope":["read","write"],"n":1.5,"q":"a\"b"}"#
        );
    }

    #[test]
    fn extensions_are_checked() {
        assert!(check_extension("traceId", "abc 1").is_ok());
        assert!(check_extension("auth", "x").is_err());
        assert!(check_extension("trace_id", "x").is_err());
        assert!(check_extension("t", "é").is_err());
        assert!(check_extension("t", "").is_err());
    }

    #[test]
    fn token_file_is_read_each_time() {
        let dir = std::env::temp_dir().join(format!("strait-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        let source = TokenSource::File(path.clone());
        let token = || futures::executor::block_on(source.token());
        assert!(token().unwrap_err().contains("cannot read the token file"));
        std::fs::write(&path, "first\n").unwrap();
        assert_eq!(token().unwrap().expose(), "first");
        std::fs::write(&path, "second").unwrap();
        assert_eq!(token().unwrap().expose(), "second");
        std::fs::write(&path, "  \n").unwrap();
        assert!(token().unwrap_err().contains("is empty"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
