//! Amazon MSK's IAM authentication from the keys an MM2 file for MSK has, in both forms of
//! Amazon's `aws-msk-iam-auth` library:
//!
//! ```properties
//! security.protocol = SASL_SSL
//! sasl.mechanism = AWS_MSK_IAM
//! sasl.jaas.config = software.amazon.msk.auth.iam.IAMLoginModule required;
//! sasl.client.callback.handler.class = software.amazon.msk.auth.iam.IAMClientCallbackHandler
//! ```
//!
//! ```properties
//! security.protocol = SASL_SSL
//! sasl.mechanism = OAUTHBEARER
//! sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;
//! sasl.login.callback.handler.class = software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler
//! sasl.client.callback.handler.class = software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler
//! ```
//!
//! The JAAS options are the library's (`awsProfileName`, `awsRoleArn`, `awsRoleSessionName`,
//! `awsRoleExternalId`, `awsRoleAccessKeyId`, `awsRoleSecretAccessKey`, `awsRoleSessionToken`,
//! `awsStsRegion`, `awsAddDefaultProviders`, `awsDebugCreds`, `awsMaxRetries`,
//! `awsMaxBackOffTimeMs`, `awsShouldUseFips=false`); any other option, `awsMskRegionProvider`
//! (a Java class) and any other callback handler class are refused. Credentials then come from
//! the chain of [`strait_kafka::aws`], read from the process's environment.

use std::sync::Arc;
use std::time::Duration;

use strait_kafka::aws::{AssumeRole, ChainConfig, CredentialsProvider, Env};
use strait_kafka::sasl::{MskIam, MskIamForm, SaslConfig};

use super::{ConfigError, JaasConfig, Reader, Secret, OAUTH_MODULE};

const IAM_MODULE: &str = "software.amazon.msk.auth.iam.IAMLoginModule";
const IAM_CLIENT_HANDLER: &str = "software.amazon.msk.auth.iam.IAMClientCallbackHandler";
const IAM_OAUTH_HANDLER: &str = "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler";

const MECHANISM: &str = "sasl.mechanism";
const JAAS: &str = "sasl.jaas.config";
const CLIENT_HANDLER: &str = "sasl.client.callback.handler.class";
const LOGIN_HANDLER: &str = "sasl.login.callback.handler.class";

/// The library's JAAS options that strait follows.
const OPTIONS: [&str; 13] = [
    "awsProfileName",
    "awsRoleArn",
    "awsRoleSessionName",
    "awsRoleExternalId",
    "awsRoleAccessKeyId",
    "awsRoleSecretAccessKey",
    "awsRoleSessionToken",
    "awsStsRegion",
    "awsAddDefaultProviders",
    "awsDebugCreds",
    "awsMaxRetries",
    "awsMaxBackOffTimeMs",
    "awsShouldUseFips",
];

impl Reader<'_> {
    /// MSK IAM when the keys ask for it (`sasl.mechanism=AWS_MSK_IAM`, or OAUTHBEARER with
    /// Amazon's login callback handler); `None` for any other SASL setting.
    pub(super) fn msk_iam(&self) -> Result<Option<SaslConfig>, ConfigError> {
        let mechanism = self.get(MECHANISM).unwrap_or("GSSAPI");
        let client_handler = self.get(CLIENT_HANDLER);
        let login_handler = self.get(LOGIN_HANDLER);
        let form = match mechanism {
            "AWS_MSK_IAM" => MskIamForm::AwsMskIam,
            "OAUTHBEARER" if login_handler == Some(IAM_OAUTH_HANDLER) => MskIamForm::OAuthBearer,
            _ => {
                for (key, class) in [
                    (CLIENT_HANDLER, client_handler),
                    (LOGIN_HANDLER, login_handler),
                ] {
                    if let Some(class) =
                        class.filter(|c| *c == IAM_CLIENT_HANDLER || *c == IAM_OAUTH_HANDLER)
                    {
                        return Err(self.fail(
                            key,
                            format!(
                                "`{class}` is Amazon MSK's IAM handler: it goes with \
                                 sasl.mechanism=AWS_MSK_IAM ({IAM_CLIENT_HANDLER}) or with \
                                 sasl.mechanism=OAUTHBEARER and \
                                 {LOGIN_HANDLER}={IAM_OAUTH_HANDLER}, not with {mechanism}"
                            ),
                        ));
                    }
                }
                return Ok(None);
            }
        };
        let (module, handler) = match form {
            MskIamForm::AwsMskIam => {
                if let Some(class) = login_handler {
                    return Err(self.fail(
                        LOGIN_HANDLER,
                        format!(
                            "`{class}` is Java code strait cannot run; AWS_MSK_IAM needs no \
                             login callback handler"
                        ),
                    ));
                }
                (IAM_MODULE, IAM_CLIENT_HANDLER)
            }
            MskIamForm::OAuthBearer => (OAUTH_MODULE, IAM_OAUTH_HANDLER),
        };
        if let Some(class) = client_handler.filter(|c| *c != handler) {
            return Err(self.fail(
                CLIENT_HANDLER,
                format!(
                    "`{class}` is Java code strait cannot run; with sasl.mechanism={mechanism} \
                     for Amazon MSK IAM strait takes {handler} (or no {CLIENT_HANDLER})"
                ),
            ));
        }
        let Some(text) = self
            .props
            .get(JAAS)
            .filter(|v| !v.expose().trim().is_empty())
        else {
            return Err(self.fail(
                JAAS,
                format!("Amazon MSK IAM ({mechanism}) needs sasl.jaas.config = {module} required;"),
            ));
        };
        let jaas = JaasConfig::parse(text.expose()).map_err(|e| self.fail(JAAS, e))?;
        if jaas.login_module != module {
            return Err(self.fail(
                JAAS,
                format!(
                    "Amazon MSK IAM with sasl.mechanism={mechanism} needs {module}, not {}",
                    jaas.login_module
                ),
            ));
        }
        let chain = self.msk_iam_chain(&jaas)?;
        let debug_credentials = self.jaas_bool(&jaas, "awsDebugCreds", false)?;
        Ok(Some(SaslConfig::AwsMskIam(MskIam {
            form,
            credentials: Arc::new(CredentialsProvider::new(chain, Env::from_process())),
            debug_credentials,
        })))
    }

    fn msk_iam_chain(&self, jaas: &JaasConfig) -> Result<ChainConfig, ConfigError> {
        for (name, _) in jaas.options() {
            if name == "awsMskRegionProvider" {
                return Err(self.fail(
                    JAAS,
                    "the option `awsMskRegionProvider` names a Java class strait cannot run; \
                     strait takes the region from the broker host, else from AWS_REGION or the \
                     profile's `region`",
                ));
            }
            if !OPTIONS.contains(&name) {
                return Err(self.fail(
                    JAAS,
                    format!(
                        "`{name}` is not an option of Amazon's MSK IAM login module that strait \
                         knows; it knows {}",
                        OPTIONS.join(", ")
                    ),
                ));
            }
        }
        if self.jaas_bool(jaas, "awsShouldUseFips", false)? {
            return Err(self.fail(
                JAAS,
                "awsShouldUseFips=true: strait does not use STS's FIPS endpoints; set \
                 AWS_ENDPOINT_URL_STS to the FIPS endpoint instead",
            ));
        }
        let text = |name: &str| {
            jaas.option(name)
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        let assume_role = match text("awsRoleArn") {
            Some(role_arn) => {
                let access_key_id = text("awsRoleAccessKeyId");
                let secret_access_key = text("awsRoleSecretAccessKey").map(Secret::new);
                if access_key_id.is_some() != secret_access_key.is_some() {
                    return Err(self.fail(
                        JAAS,
                        "set both awsRoleAccessKeyId and awsRoleSecretAccessKey, or neither",
                    ));
                }
                Some(AssumeRole {
                    role_arn,
                    session_name: text("awsRoleSessionName")
                        .unwrap_or_else(|| "aws-msk-iam-auth".to_owned()),
                    external_id: text("awsRoleExternalId"),
                    access_key_id,
                    secret_access_key,
                    session_token: text("awsRoleSessionToken").map(Secret::new),
                })
            }
            None => {
                for name in [
                    "awsRoleSessionName",
                    "awsRoleExternalId",
                    "awsRoleAccessKeyId",
                    "awsRoleSecretAccessKey",
                    "awsRoleSessionToken",
                ] {
                    if text(name).is_some() {
                        return Err(self.fail(JAAS, format!("`{name}` needs awsRoleArn")));
                    }
                }
                None
            }
        };
        let defaults = ChainConfig::default();
        Ok(ChainConfig {
            profile: text("awsProfileName"),
            assume_role,
            sts_region: text("awsStsRegion"),
            add_default_providers: self.jaas_bool(jaas, "awsAddDefaultProviders", true)?,
            max_retries: self
                .jaas_number(jaas, "awsMaxRetries")?
                .unwrap_or(defaults.max_retries),
            max_backoff: self
                .jaas_number(jaas, "awsMaxBackOffTimeMs")?
                .map_or(defaults.max_backoff, |ms| {
                    Duration::from_millis(u64::from(ms))
                }),
        })
    }

    fn jaas_bool(&self, jaas: &JaasConfig, name: &str, default: bool) -> Result<bool, ConfigError> {
        match jaas.option(name).map(|v| v.trim().to_ascii_lowercase()) {
            None => Ok(default),
            Some(v) if v == "true" => Ok(true),
            Some(v) if v == "false" => Ok(false),
            Some(_) => Err(self.fail(JAAS, format!("the option `{name}` must be true or false"))),
        }
    }

    fn jaas_number(&self, jaas: &JaasConfig, name: &str) -> Result<Option<u32>, ConfigError> {
        jaas.option(name)
            .map(|v| {
                v.trim().parse::<u32>().map_err(|_| {
                    self.fail(
                        JAAS,
                        format!(
                            "the option `{name}` must be a whole number, not `{}`",
                            v.trim()
                        ),
                    )
                })
            })
            .transpose()
    }
}
