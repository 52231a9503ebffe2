//! AWS credentials for Amazon MSK's IAM authentication ([`crate::sasl::msk_iam`]): the
//! standard credential chain as the AWS SDK for Java that Amazon's `aws-msk-iam-auth` uses
//! walks it, SigV4 signing ([`sigv4`]) and the two STS calls the chain needs.
//!
//! What [`CredentialsProvider`] tries, in order (the library's `MSKCredentialProvider`):
//!
//! 1. the profile named by the JAAS option `awsProfileName`, when set;
//! 2. the role named by `awsRoleArn` (STS `AssumeRole`, signed with `awsRoleAccessKeyId` /
//!    `awsRoleSecretAccessKey` / `awsRoleSessionToken` when given, otherwise with the
//!    credentials of the default chain below), when set;
//! 3. unless `awsAddDefaultProviders=false`, the SDK's default chain:
//!    - the environment: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`;
//!    - web identity: `AWS_WEB_IDENTITY_TOKEN_FILE` and `AWS_ROLE_ARN` (EKS with IRSA), STS
//!      `AssumeRoleWithWebIdentity`, the token file read again at every call;
//!    - the profile `AWS_PROFILE` (or `default`) of `~/.aws/credentials` and `~/.aws/config`
//!      (`AWS_SHARED_CREDENTIALS_FILE`, `AWS_CONFIG_FILE`): static keys, or `role_arn` with
//!      `source_profile` or `web_identity_token_file`;
//!    - the ECS container endpoint, then EC2 instance metadata (IMDSv2) (`machine.rs`).
//!
//! Not done (the error says so): `credential_process`, SSO profiles, IMDSv1.
//!
//! STS is reached at `https://sts.amazonaws.com` (or `https://sts.<region>.amazonaws.com` for
//! `awsStsRegion` / web identity with `AWS_REGION`), or at `AWS_ENDPOINT_URL_STS` /
//! `AWS_ENDPOINT_URL` when set (the SDKs' endpoint override, also how the tests point it at a
//! local fake). Credentials STS hands out are kept until five minutes before they expire;
//! the others are read again at every authentication, so a rotated file or token is used at the
//! next (re-)authentication.

pub mod http;
mod machine;
pub mod profile;
pub mod sigv4;
pub mod sts;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use crate::secret::Secret;

/// A set of AWS credentials. `Debug` never shows the secret key or the session token.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// The access key id (not a secret: it names the key).
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: Secret,
    /// The session token of temporary credentials.
    pub session_token: Option<Secret>,
    /// When temporary credentials expire.
    pub expires: Option<SystemTime>,
    /// Where they came from, for messages (`the environment`, `profile `x``…).
    pub source: String,
}

/// The environment the chain reads: variables and the home directory. Captured from the process
/// by [`Env::from_process`]; tests give their own. `Debug` shows the names of the `AWS_*`
/// variables set, never a value.
#[derive(Clone, Default)]
pub struct Env {
    vars: BTreeMap<String, String>,
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self
            .vars
            .keys()
            .map(String::as_str)
            .filter(|k| k.starts_with("AWS_"))
            .collect();
        f.debug_struct("Env")
            .field("aws_variables", &names)
            .finish()
    }
}

impl Env {
    /// The process's environment.
    pub fn from_process() -> Self {
        Self {
            vars: std::env::vars().collect(),
        }
    }

    /// Given variables (`HOME` among them for the profile files).
    pub fn from_vars<K: Into<String>, V: Into<String>>(
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Self {
            vars: vars
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    /// A variable, `None` when unset or empty.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }

    fn home(&self) -> Option<PathBuf> {
        self.var("HOME").map(PathBuf::from)
    }

    /// The region of the default region chain as the AWS SDK for Java has it (less instance
    /// metadata): `AWS_REGION`, then the `region` of profile `AWS_PROFILE` (or `default`) in
    /// the config file.
    pub fn default_region(&self) -> Option<String> {
        if let Some(region) = self.var("AWS_REGION") {
            return Some(region.to_owned());
        }
        let name = self.var("AWS_PROFILE").unwrap_or("default");
        profile::Profiles::load(self)
            .ok()?
            .get(name)?
            .get("region")
            .cloned()
    }
}

/// STS `AssumeRole` of the JAAS option `awsRoleArn`.
#[derive(Debug, Clone, PartialEq)]
pub struct AssumeRole {
    /// `awsRoleArn`.
    pub role_arn: String,
    /// `awsRoleSessionName` (default `aws-msk-iam-auth`).
    pub session_name: String,
    /// `awsRoleExternalId`.
    pub external_id: Option<String>,
    /// `awsRoleAccessKeyId` with `awsRoleSecretAccessKey` (and `awsRoleSessionToken`): the
    /// credentials to call STS with, instead of the default chain's.
    pub access_key_id: Option<String>,
    /// `awsRoleSecretAccessKey`.
    pub secret_access_key: Option<Secret>,
    /// `awsRoleSessionToken`.
    pub session_token: Option<Secret>,
}

/// The JAAS options of Amazon's login module that choose credentials.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainConfig {
    /// `awsProfileName`.
    pub profile: Option<String>,
    /// `awsRoleArn` and its companions.
    pub assume_role: Option<AssumeRole>,
    /// `awsStsRegion` (default: STS's global endpoint).
    pub sts_region: Option<String>,
    /// `awsAddDefaultProviders` (default true).
    pub add_default_providers: bool,
    /// `awsMaxRetries` (default 3): retries of an STS call that failed to get an answer.
    pub max_retries: u32,
    /// `awsMaxBackOffTimeMs` (default 5 s): the longest wait between two tries.
    pub max_backoff: Duration,
}

impl Default for ChainConfig {
    fn default() -> Self {
        Self {
            profile: None,
            assume_role: None,
            sts_region: None,
            add_default_providers: true,
            max_retries: 3,
            max_backoff: Duration::from_millis(5000),
        }
    }
}

/// How long before their expiry credentials from STS are fetched again.
const REFRESH_BEFORE: Duration = Duration::from_secs(300);

/// Finds credentials by [`ChainConfig`] in an [`Env`]; see the module doc.
#[derive(Debug)]
pub struct CredentialsProvider {
    config: ChainConfig,
    env: Env,
    /// The last credentials with an expiry. Held while the chain is walked, so that connections
    /// authenticating at once make one STS call, not one each.
    cached: tokio::sync::Mutex<Option<Credentials>>,
}

impl CredentialsProvider {
    /// A provider for `config` reading `env`.
    pub fn new(config: ChainConfig, env: Env) -> Self {
        Self {
            config,
            env,
            cached: tokio::sync::Mutex::new(None),
        }
    }

    /// The JAAS options it follows.
    pub fn config(&self) -> &ChainConfig {
        &self.config
    }

    /// The environment it reads.
    pub fn env(&self) -> &Env {
        &self.env
    }

    /// Credentials valid now: cached ones from STS while more than five minutes remain,
    /// otherwise the first the chain finds. The error says what each source said.
    pub async fn credentials(&self) -> Result<Credentials, String> {
        let mut cached = self.cached.lock().await;
        if let Some(c) = cached.as_ref() {
            if c.expires
                .is_some_and(|e| e > SystemTime::now() + REFRESH_BEFORE)
            {
                return Ok(c.clone());
            }
        }
        let credentials = self.resolve().await?;
        if let Some(expires) = credentials.expires {
            if expires <= SystemTime::now() {
                return Err(format!(
                    "the credentials from {} expired at {} (access key id {})",
                    credentials.source,
                    sigv4::amz_date(expires),
                    credentials.access_key_id
                ));
            }
            *cached = Some(credentials.clone());
        }
        Ok(credentials)
    }

    async fn resolve(&self) -> Result<Credentials, String> {
        let mut tried = Vec::new();
        if let Some(name) = &self.config.profile {
            match profile::credentials(&self.env, name, &self.sts()).await {
                Ok(c) => return Ok(c),
                Err(e) => tried.push(format!("awsProfileName: {e}")),
            }
        }
        if let Some(role) = &self.config.assume_role {
            match self.assume_role(role).await {
                Ok(c) => return Ok(c),
                Err(e) => tried.push(format!("awsRoleArn: {e}")),
            }
        }
        if self.config.add_default_providers {
            match self.default_chain().await {
                Ok(c) => return Ok(c),
                Err(e) => tried.push(e),
            }
        } else {
            tried.push("the default chain: not tried (awsAddDefaultProviders=false)".into());
        }
        Err(format!("no AWS credentials found; {}", tried.join("; ")))
    }

    fn sts(&self) -> sts::Sts {
        sts::Sts {
            env: self.env.clone(),
            region: self.config.sts_region.clone(),
            max_retries: self.config.max_retries,
            max_backoff: self.config.max_backoff,
        }
    }

    async fn assume_role(&self, role: &AssumeRole) -> Result<Credentials, String> {
        let base = match (&role.access_key_id, &role.secret_access_key) {
            (Some(id), Some(secret)) => Credentials {
                access_key_id: id.clone(),
                secret_access_key: secret.clone(),
                session_token: role.session_token.clone(),
                expires: None,
                source: "awsRoleAccessKeyId".into(),
            },
            _ => self
                .default_chain()
                .await
                .map_err(|e| format!("no credentials to call STS AssumeRole with: {e}"))?,
        };
        self.sts().assume_role(role, &base).await
    }

    /// The SDK's default chain: environment, web identity, profile, container, instance.
    async fn default_chain(&self) -> Result<Credentials, String> {
        let mut tried = Vec::new();
        match from_env(&self.env) {
            Ok(c) => return Ok(c),
            Err(e) => tried.push(format!("environment: {e}")),
        }
        match self.env.var("AWS_WEB_IDENTITY_TOKEN_FILE") {
            Some(file) => {
                let Some(role_arn) = self.env.var("AWS_ROLE_ARN") else {
                    return Err("AWS_WEB_IDENTITY_TOKEN_FILE is set but AWS_ROLE_ARN is not".into());
                };
                let session = self
                    .env
                    .var("AWS_ROLE_SESSION_NAME")
                    .map(str::to_owned)
                    .unwrap_or_else(default_session_name);
                // As the SDK: a web identity that fails is an error, not a reason to go on.
                return self
                    .sts()
                    .with_region(self.env.var("AWS_REGION").map(str::to_owned))
                    .assume_role_with_web_identity(role_arn, &session, file.as_ref())
                    .await
                    .map_err(|e| format!("web identity (AWS_WEB_IDENTITY_TOKEN_FILE): {e}"));
            }
            None => tried.push("web identity: AWS_WEB_IDENTITY_TOKEN_FILE is not set".into()),
        }
        let name = self.env.var("AWS_PROFILE").unwrap_or("default");
        match profile::credentials(&self.env, name, &self.sts()).await {
            Ok(c) => return Ok(c),
            Err(e) => tried.push(format!("profile: {e}")),
        }
        match machine::container(&self.env).await {
            Ok(c) => return Ok(c),
            Err(e) => tried.push(format!("container: {e}")),
        }
        match machine::instance(&self.env).await {
            Ok(c) => return Ok(c),
            Err(e) => tried.push(format!("instance metadata: {e}")),
        }
        Err(tried.join("; "))
    }
}

/// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN`.
fn from_env(env: &Env) -> Result<Credentials, String> {
    match (
        env.var("AWS_ACCESS_KEY_ID"),
        env.var("AWS_SECRET_ACCESS_KEY"),
    ) {
        (Some(id), Some(secret)) => Ok(Credentials {
            access_key_id: id.to_owned(),
            secret_access_key: Secret::new(secret),
            session_token: env.var("AWS_SESSION_TOKEN").map(Secret::new),
            expires: None,
            source: "the environment (AWS_ACCESS_KEY_ID)".into(),
        }),
        (Some(_), None) => Err("AWS_ACCESS_KEY_ID is set, AWS_SECRET_ACCESS_KEY is not".into()),
        (None, Some(_)) => Err("AWS_SECRET_ACCESS_KEY is set, AWS_ACCESS_KEY_ID is not".into()),
        (None, None) => Err("AWS_ACCESS_KEY_ID is not set".into()),
    }
}

/// The SDK's session name when none is given: `aws-sdk-java-<milliseconds>`, here `strait-…`.
fn default_session_name() -> String {
    let ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    format!("strait-{ms}")
}
