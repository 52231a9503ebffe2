//! SASL authentication of a broker connection: PLAIN (RFC 4616), SCRAM-SHA-256/512 (RFC 5802,
//! RFC 7677), OAUTHBEARER (RFC 7628) and GSSAPI (Kerberos, RFC 4752), the way Kafka's clients
//! do it; and Amazon MSK's IAM authentication ([`msk_iam`]: `AWS_MSK_IAM`, or OAUTHBEARER with
//! an IAM-signed token).
//!
//! After ApiVersions, the client sends `SaslHandshake` v1 naming the mechanism (KIP-43), then
//! the mechanism's messages inside `SaslAuthenticate` requests (KIP-152) until the broker is
//! satisfied or says why not. When the broker's last answer sets `session_lifetime_ms`
//! (KIP-368, `connections.max.reauth.ms`), the connection authenticates again before the
//! session ends, at a random point between 85% and 95% of it as Kafka's client does; meanwhile
//! no other request is written, since a broker refuses them in the middle of an exchange.

pub mod gssapi;
pub mod msk_iam;
pub mod oauthbearer;
pub mod scram;
pub mod token_endpoint;

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

pub use gssapi::{check_library as check_gssapi_library, GssapiConfig};
pub use msk_iam::{MskIam, MskIamForm};
pub use oauthbearer::{check_extension, Claim, TokenSource, UnsecuredToken};
pub use scram::{ScramError, ScramHash};
pub use token_endpoint::{ClientCredentials, RefreshWindow, TokenEndpoint};

use crate::error::Error;
use crate::error::Result;
use crate::secret::Secret;

/// A SASL mechanism and its credentials: Kafka's `sasl.mechanism` and what `sasl.jaas.config`
/// gives it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum SaslConfig {
    /// PLAIN: user name and password in the clear (use it over TLS only).
    Plain {
        /// The user.
        username: String,
        /// The password.
        password: Secret,
    },
    /// SCRAM-SHA-256 or SCRAM-SHA-512: the password never crosses the wire.
    Scram {
        /// Which hash.
        hash: ScramHash,
        /// The user (or, with `token_auth`, the delegation token id).
        username: String,
        /// The password (or the delegation token's HMAC).
        password: Secret,
        /// Kafka's `tokenauth=true`: authenticate with a delegation token.
        token_auth: bool,
    },
    /// OAUTHBEARER: a bearer token.
    OAuthBearer {
        /// Where the token comes from.
        token: TokenSource,
        /// SASL extensions sent with it (`key=value`), checked by [`check_extension`].
        extensions: Vec<(String, String)>,
    },
    /// GSSAPI: Kerberos, through MIT's GSS-API library loaded at run time.
    Gssapi(GssapiConfig),
    /// Amazon MSK's IAM authentication (`AWS_MSK_IAM`, or OAUTHBEARER with Amazon's
    /// `IAMOAuthBearerLoginCallbackHandler`), signed with AWS credentials.
    AwsMskIam(MskIam),
}

impl SaslConfig {
    /// The mechanism's name, as `sasl.mechanism` spells it.
    pub fn mechanism(&self) -> &'static str {
        match self {
            SaslConfig::Plain { .. } => "PLAIN",
            SaslConfig::Scram { hash, .. } => hash.mechanism(),
            SaslConfig::OAuthBearer { .. } => "OAUTHBEARER",
            SaslConfig::Gssapi(_) => "GSSAPI",
            SaslConfig::AwsMskIam(iam) => match iam.form {
                MskIamForm::AwsMskIam => "AWS_MSK_IAM",
                MskIamForm::OAuthBearer => "OAUTHBEARER",
            },
        }
    }

    /// The user name, for messages, when the mechanism has one.
    pub fn username(&self) -> Option<&str> {
        match self {
            SaslConfig::Plain { username, .. } | SaslConfig::Scram { username, .. } => {
                Some(username)
            }
            SaslConfig::OAuthBearer { .. } | SaslConfig::AwsMskIam(_) => None,
            SaslConfig::Gssapi(config) => config.principal.as_deref(),
        }
    }
}

/// Where one exchange is.
enum Exchange {
    /// PLAIN: one message, then an empty answer.
    Plain,
    /// SCRAM: waiting for server-first, then for server-final.
    ScramFirst(scram::ScramClient),
    ScramFinal(scram::ScramClient),
    /// OAUTHBEARER: one message; a non-empty answer is the broker's error (a JSON status),
    /// which Kafka's protocol wants acknowledged with `\x01` before it fails the exchange.
    OAuth,
    OAuthFailed(String),
    /// GSSAPI: context tokens, then the security layer (see [`gssapi`]).
    Gssapi(gssapi::GssapiClient),
    /// AWS_MSK_IAM: one message; the broker answers a JSON object with its request id.
    MskIam,
}

enum Step {
    Send(Vec<u8>),
    Done,
}

impl Exchange {
    /// The first client message. `addr` is the broker's `host:port` as dialled (GSSAPI's
    /// service principal names its host).
    async fn start(
        sasl: &SaslConfig,
        addr: &str,
    ) -> std::result::Result<(Exchange, Vec<u8>), String> {
        match sasl {
            SaslConfig::Plain { username, password } => {
                let mut message = Vec::with_capacity(username.len() + password.expose().len() + 2);
                message.push(0);
                message.extend_from_slice(username.as_bytes());
                message.push(0);
                message.extend_from_slice(password.expose().as_bytes());
                Ok((Exchange::Plain, message))
            }
            SaslConfig::Scram {
                hash,
                username,
                password,
                token_auth,
            } => {
                let client = scram::ScramClient::new(
                    *hash,
                    username,
                    password,
                    scram::random_nonce(),
                    *token_auth,
                );
                let first = client.client_first();
                Ok((Exchange::ScramFirst(client), first))
            }
            SaslConfig::OAuthBearer { token, extensions } => {
                let token = token.token().await?;
                Ok((
                    Exchange::OAuth,
                    oauthbearer::initial_response(&token, extensions),
                ))
            }
            SaslConfig::Gssapi(config) => {
                let (client, first) = gssapi::GssapiClient::start(config, addr).await?;
                Ok((Exchange::Gssapi(client), first))
            }
            // Needs the broker's host and, maybe, STS: made by `MskIam::first_message`.
            SaslConfig::AwsMskIam(_) => Err("MSK IAM starts in msk_iam".into()),
        }
    }

    /// [`Exchange::step`], for any mechanism.
    async fn advance(self, answer: &[u8]) -> std::result::Result<(Exchange, Step), String> {
        match self {
            Exchange::Gssapi(client) => match client.step(answer.to_vec()).await? {
                (client, Some(next)) => Ok((Exchange::Gssapi(client), Step::Send(next))),
                (client, None) => Ok((Exchange::Gssapi(client), Step::Done)),
            },
            other => other.step(answer),
        }
    }

    /// Reads the broker's answer (it had no error code): the next message, or done.
    fn step(self, answer: &[u8]) -> std::result::Result<(Exchange, Step), String> {
        match self {
            Exchange::Plain => Ok((Exchange::Plain, Step::Done)),
            Exchange::ScramFirst(mut client) => {
                let last = client.client_final(answer).map_err(|e| e.to_string())?;
                Ok((Exchange::ScramFinal(client), Step::Send(last)))
            }
            Exchange::ScramFinal(client) => {
                client
                    .verify_server_final(answer)
                    .map_err(|e| e.to_string())?;
                Ok((Exchange::ScramFinal(client), Step::Done))
            }
            Exchange::OAuth if answer.is_empty() => Ok((Exchange::OAuth, Step::Done)),
            Exchange::OAuth => {
                let status = String::from_utf8_lossy(answer).into_owned();
                Ok((Exchange::OAuthFailed(status), Step::Send(vec![0x01])))
            }
            Exchange::OAuthFailed(status) => Err(format!("the broker refused the token: {status}")),
            Exchange::Gssapi(_) => Err("GSSAPI steps in Exchange::advance".into()),
            Exchange::MskIam => {
                let request_id = msk_iam::check_response(answer)?;
                tracing::debug!(request_id, "MSK IAM authentication accepted");
                Ok((Exchange::MskIam, Step::Done))
            }
        }
    }

    /// What to add to the broker's refusal.
    fn refusal(&self, sasl: &SaslConfig) -> String {
        match (self, sasl) {
            (Exchange::OAuthFailed(status), _) => {
                format!("the broker refused the token ({status})")
            }
            (_, SaslConfig::OAuthBearer { .. }) => "the broker refused the token".to_owned(),
            (Exchange::Gssapi(client), _) => client.refusal(),
            (_, SaslConfig::Gssapi(config)) => format!(
                "the broker refused the Kerberos authentication of `{}`",
                config
                    .principal
                    .as_deref()
                    .unwrap_or("the ticket cache's principal")
            ),
            (_, SaslConfig::AwsMskIam(_)) => "the broker refused the IAM authentication (does \
                 the identity's IAM policy allow kafka-cluster:Connect on this cluster? are the \
                 credentials current?)"
                .to_owned(),
            (_, sasl) => format!(
                "the broker refused the credentials of user `{}` (wrong user name or password?)",
                sasl.username().unwrap_or_default()
            ),
        }
    }
}

/// The most SaslAuthenticate messages one authentication may take.
const MAX_MESSAGES: usize = 8;

/// What an authentication needs of a broker connection (`connection.rs` gives it): a trait
/// here, so that this module needs nothing of the connection's.
pub(crate) trait SaslChannel: Sync {
    /// The broker's `host:port` as dialled.
    fn addr(&self) -> &str;
    /// An authentication error of this connection: `message` about `mechanism`.
    fn authentication_error(&self, mechanism: &'static str, message: String) -> Error;
    /// The SaslHandshake and SaslAuthenticate versions the broker and strait agree on, where
    /// the broker offers them.
    fn sasl_versions(&self) -> (Option<i16>, Option<i16>);
    /// Sends a SaslHandshake at `version` and waits for its answer.
    fn handshake(
        &self,
        request: &SaslHandshakeRequest,
        version: i16,
    ) -> impl std::future::Future<Output = Result<SaslHandshakeResponse>> + Send;
    /// Sends a SaslAuthenticate at `version` and waits for its answer.
    fn exchange(
        &self,
        request: &SaslAuthenticateRequest,
        version: i16,
    ) -> impl std::future::Future<Output = Result<SaslAuthenticateResponse>> + Send;
}

/// Authenticates `conn` (ApiVersions done, nothing else sent since). Returns how long the
/// session lasts when the broker limits it.
pub(crate) async fn authenticate(
    conn: &impl SaslChannel,
    sasl: &SaslConfig,
) -> Result<Option<Duration>> {
    let mechanism = sasl.mechanism();
    let fail = |message: String| conn.authentication_error(mechanism, message);
    let (handshake_version, auth_version) = conn.sasl_versions();
    let handshake_version = handshake_version.ok_or_else(|| {
        fail(
            "the broker does not offer SASL (no SaslHandshake in its ApiVersions): is this a SASL \
             listener? (security.protocol SASL_PLAINTEXT and SASL_SSL need one)"
                .into(),
        )
    })?;
    if handshake_version < 1 {
        return Err(fail(
            "the broker speaks only SaslHandshake v0 (Kafka 0.10.0), which strait does not".into(),
        ));
    }
    let request =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism));
    let response = conn.handshake(&request, handshake_version).await?;
    match ResponseError::try_from_code(response.error_code) {
        None => {}
        Some(ResponseError::UnsupportedSaslMechanism) => {
            let enabled: Vec<String> = response.mechanisms.iter().map(|m| m.to_string()).collect();
            return Err(fail(format!(
                "{mechanism} is not enabled on the broker; it enables {} (sasl.mechanism)",
                if enabled.is_empty() {
                    "none".to_owned()
                } else {
                    enabled.join(", ")
                }
            )));
        }
        Some(ResponseError::IllegalSaslState) => {
            return Err(fail(
                "the broker's listener does not use SASL (ILLEGAL_SASL_STATE): use \
                 security.protocol PLAINTEXT or SSL for it"
                    .into(),
            ));
        }
        Some(code) => {
            return Err(fail(format!(
                "the broker answered the SaslHandshake with {code}"
            )));
        }
    }
    let auth_version =
        auth_version.ok_or_else(|| fail("the broker does not offer SaslAuthenticate".into()))?;
    // Whose AWS credentials, for a refusal's message.
    let mut who = None;
    let (mut exchange, mut message) = match sasl {
        SaslConfig::AwsMskIam(iam) => {
            let (message, used) = iam
                .first_message(host_of(conn.addr()))
                .await
                .map_err(&fail)?;
            who = Some(used);
            let exchange = match iam.form {
                MskIamForm::AwsMskIam => Exchange::MskIam,
                MskIamForm::OAuthBearer => Exchange::OAuth,
            };
            (exchange, message)
        }
        _ => Exchange::start(sasl, conn.addr()).await.map_err(&fail)?,
    };
    // SCRAM takes two round trips, GSSAPI with Kerberos three, the others one; a broker that
    // wants many more is not speaking the mechanism.
    for _ in 0..MAX_MESSAGES {
        let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(message));
        let response = conn.exchange(&request, auth_version).await?;
        if let Some(code) = ResponseError::try_from_code(response.error_code) {
            let said = response
                .error_message
                .as_ref()
                .map(|m| m.to_string())
                .filter(|m| !m.is_empty());
            let said = said
                .map(|m| format!(": broker says \"{m}\""))
                .unwrap_or_default();
            return Err(fail(match code {
                ResponseError::SaslAuthenticationFailed => match &who {
                    Some(who) => format!("{} ({who}){said}", exchange.refusal(sasl)),
                    None => format!("{}{said}", exchange.refusal(sasl)),
                },
                code => format!("the broker answered {code}{said}"),
            }));
        }
        let (next, step) = exchange
            .advance(&response.auth_bytes)
            .await
            .map_err(&fail)?;
        exchange = next;
        match step {
            Step::Send(next) => message = next,
            Step::Done => {
                let lifetime = response.session_lifetime_ms;
                return Ok((lifetime > 0).then(|| Duration::from_millis(lifetime as u64)));
            }
        }
    }
    Err(fail(format!(
        "the exchange did not end after {MAX_MESSAGES} messages"
    )))
}

/// The host of `host:port` (`[v6]:port` too): the name an MSK IAM signature is for, as the
/// library signs for the host the connection goes to.
fn host_of(addr: &str) -> &str {
    if let Some(v6) = addr.strip_prefix('[') {
        return v6.split(']').next().unwrap_or(v6);
    }
    match addr.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            host
        }
        _ => addr,
    }
}

/// When to authenticate again in a session of `lifetime`: at a random point between 85% and
/// 95% of it (Kafka's client), so many connections do not all do it at once.
pub(crate) fn reauthentication_delay(lifetime: Duration) -> Duration {
    let share = 0.85 + rand::random::<f64>() * 0.10;
    lifetime.mul_f64(share)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_message_is_authzid_user_password() {
        let sasl = SaslConfig::Plain {
            username: "alice".into(),
            password: Secret::new("pw"),
        };
        let (_, first) = futures::executor::block_on(Exchange::start(&sasl, "k1:9092")).unwrap();
        assert_eq!(first, b"\0alice\0pw".to_vec());
        assert!(!format!("{sasl:?}").contains("pw\""));
        assert!(format!("{sasl:?}").contains("[redacted]"));
    }

    #[test]
    fn hosts_of_addresses() {
        assert_eq!(
            host_of("b-1.x.kafka.us-east-1.amazonaws.com:9098"),
            "b-1.x.kafka.us-east-1.amazonaws.com"
        );
        assert_eq!(host_of("[::1]:9092"), "::1");
        assert_eq!(host_of("localhost"), "localhost");
    }

    #[test]
    fn reauthentication_between_85_and_95_percent() {
        for _ in 0..100 {
            let d = reauthentication_delay(Duration::from_secs(100));
            assert!(
                d >= Duration::from_secs(85) && d <= Duration::from_secs(95),
                "{d:?}"
            );
        }
    }
}
