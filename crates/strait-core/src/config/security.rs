//! From a client's resolved settings to a ready [`ClientConfig`]: bootstrap servers, and TLS
//! and SASL as Kafka's `security.protocol`, `ssl.*` and `sasl.*` keys describe them (resolved
//! per cluster and role as MM2 does, see [`super::client`]).
//!
//! | `security.protocol` | TLS | SASL |
//! |---|---|---|
//! | `PLAINTEXT` (default) | | |
//! | `SSL` | yes | |
//! | `SASL_PLAINTEXT` | | yes |
//! | `SASL_SSL` | yes | yes |
//!
//! TLS keys: `ssl.truststore.location` / `.password` / `.type` (PEM, PKCS12, JKS, or JCEKS's
//! certificates; the file's first bytes decide, so Kafka's default type JKS fits any) or
//! `ssl.truststore.certificates` (PEM text); `ssl.keystore.location` / `.password` / `.type`
//! (PEM, PKCS12 or JKS with one private key; a JCEKS-protected key is refused with the
//! `keytool` command that converts the file) or `ssl.keystore.certificate.chain` and
//! `ssl.keystore.key` (PEM text), with `ssl.key.password` for an encrypted PEM key or a JKS
//! key (the store password when unset, as in Java); a store password, when set, must pass
//! the store's integrity check;
//! `ssl.endpoint.identification.algorithm` (`https` by default; empty turns hostname
//! verification off); `ssl.enabled.protocols` (TLSv1.2, TLSv1.3). Without a truststore, the
//! system's CAs are trusted.
//!
//! SASL keys: `sasl.mechanism` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, and GSSAPI,
//! Kafka's default) and `sasl.jaas.config` (see [`super::jaas`]). GSSAPI takes
//! `sasl.kerberos.service.name` and the JDK's `Krb5LoginModule` options `useKeyTab`, `keyTab`,
//! `principal`, `useTicketCache`, `ticketCache`, `serviceName` (see [`Reader::gssapi`]).
//! OAUTHBEARER takes its token from the JAAS option `strait.token` (strait's), from an identity
//! provider with the client credentials grant (`sasl.login.callback.handler.class` = Kafka's
//! `OAuthBearerLoginCallbackHandler` with `sasl.oauthbearer.token.endpoint.url = https://...`,
//! client id, secret and scope from the JAAS options `clientId`, `clientSecret`, `scope` or
//! Kafka 4.1's `sasl.oauthbearer.client.credentials.*` and `sasl.oauthbearer.scope`), from a
//! file (the same handler with `...url = file:/path`, read again at every authentication), or
//! makes Kafka's unsecured JWT from `unsecuredLogin*` options.
//!
//! Amazon MSK IAM (`security/msk_iam.rs`): `sasl.mechanism=AWS_MSK_IAM` with Amazon's `IAMLoginModule`
//! and `IAMClientCallbackHandler`, or OAUTHBEARER with Amazon's
//! `IAMOAuthBearerLoginCallbackHandler`; the `aws*` JAAS options of Amazon's library; AWS
//! credentials from the standard chain (environment, profile, web identity, assume role).
//!
//! Errors name the cluster, the client and the key, never a secret's value.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use strait_kafka::sasl::token_endpoint::check_url;
use strait_kafka::sasl::{
    check_extension, check_gssapi_library, Claim, ClientCredentials, GssapiConfig, RefreshWindow,
    SaslConfig, ScramHash, TokenEndpoint, TokenSource, UnsecuredToken,
};
use strait_kafka::tls::{
    read_keystore, read_pem_identity, read_truststore, ClientIdentity, StoreError, TlsConfig,
    TlsOptions, TlsVersion, Trust,
};
use strait_kafka::{ClientConfig, Security};

use super::client::{ClientProps, Role, SecurityProtocol, Side};
use super::error::{ConfigError, ConfigErrorReason};
use super::jaas::JaasConfig;
use super::model::{ClusterAlias, FlowConfig, HeartbeatEmitter};
use super::secret::Secret;
use super::StraitConfig;

mod msk_iam;

const PLAIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
const SCRAM_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";
const KRB5_MODULE: &str = "com.sun.security.auth.module.Krb5LoginModule";
const OAUTH_MODULE: &str = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";
/// Kafka's login callback handler that reads `sasl.oauthbearer.token.endpoint.url` (KIP-768),
/// under both of the packages it has lived in.
const OAUTH_HANDLERS: [&str; 2] = [
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
];

/// A client whose settings strait refuses (a JAAS line that does not parse, a login module
/// that does not fit `sasl.mechanism`, a store that cannot be read ...): found without
/// contacting any cluster, by [`StraitConfig::refused_clients`].
#[derive(Debug)]
pub struct ClientRefusal {
    /// The cluster the client talks to.
    pub cluster: ClusterAlias,
    /// Which of its clients.
    pub role: Role,
    /// What is wrong: the file's key that set it (or the key to set), the cluster and why.
    pub error: ConfigError,
}

impl StraitConfig {
    /// The two clients `strait run` makes for `flow` (`strait-runtime/src/flow.rs`): the
    /// source as the flow's consumer, the target as its producer, each from the cluster's
    /// settings under the flow's overrides ([`StraitConfig::client_config`]).
    pub fn flow_clients(
        &self,
        flow: &FlowConfig,
    ) -> Result<(ClientConfig, ClientConfig), ConfigError> {
        Ok((
            self.client_config(flow, Side::Source, Role::Consumer)?,
            self.client_config(flow, Side::Target, Role::Producer)?,
        ))
    }

    /// The producer a heartbeat writer writes into its target with
    /// (`strait-runtime/src/supervisor/heartbeats.rs`).
    pub fn heartbeat_client(
        &self,
        emitter: &HeartbeatEmitter,
    ) -> Result<ClientConfig, ConfigError> {
        self.cluster_client_config(emitter.target.as_str(), Role::Producer)
    }

    /// Every client strait makes from this file whose settings it refuses, found offline:
    /// each enabled flow's two clients ([`StraitConfig::flow_clients`]), each heartbeat
    /// writer's ([`StraitConfig::heartbeat_client`]), and every cluster's admin client (what
    /// `strait check --connect`, `failover` and `offsets` connect with). The settings are built
    /// as `strait run` builds them before it connects: the JAAS line parsed, the login module
    /// and its options checked against `sasl.mechanism`, the stores read and opened. At most
    /// one refusal per client (the first its settings meet), in that order.
    pub fn refused_clients(&self) -> Vec<ClientRefusal> {
        let mut refused = Vec::new();
        let mut note =
            |cluster: &ClusterAlias, role: Role, built: Result<ClientConfig, ConfigError>| {
                if let Err(error) = built {
                    refused.push(ClientRefusal {
                        cluster: cluster.clone(),
                        role,
                        error,
                    });
                }
            };
        for flow in &self.flows {
            note(
                &flow.source,
                Role::Consumer,
                self.client_config(flow, Side::Source, Role::Consumer),
            );
            note(
                &flow.target,
                Role::Producer,
                self.client_config(flow, Side::Target, Role::Producer),
            );
        }
        for emitter in &self.heartbeats {
            note(
                &emitter.target,
                Role::Producer,
                self.heartbeat_client(emitter),
            );
        }
        for cluster in &self.clusters {
            note(
                &cluster.alias,
                Role::Admin,
                self.cluster_client_config(cluster.alias.as_str(), Role::Admin),
            );
        }
        refused
    }

    /// Everything a client of `flow`'s `side` cluster in `role` needs: the cluster's bootstrap
    /// servers and its TLS and SASL settings, resolved as MM2 resolves them
    /// ([`StraitConfig::client_props`]). Errors name the cluster and the key.
    pub fn client_config(
        &self,
        flow: &FlowConfig,
        side: Side,
        role: Role,
    ) -> Result<ClientConfig, ConfigError> {
        let alias = match side {
            Side::Source => &flow.source,
            Side::Target => &flow.target,
        };
        let props = self.client_props(flow, side, role);
        self.client_config_from(alias.as_str(), role, &props)
    }

    /// [`StraitConfig::client_config`] for a cluster outside any flow's overrides (a heartbeat
    /// emitter's target, a command that talks to one cluster): the cluster's own settings for
    /// `role`.
    pub fn cluster_client_config(
        &self,
        alias: &str,
        role: Role,
    ) -> Result<ClientConfig, ConfigError> {
        let props = self
            .cluster(alias)
            .map(|c| c.client.role(role).clone())
            .unwrap_or_default();
        self.client_config_from(alias, role, &props)
    }

    fn client_config_from(
        &self,
        alias: &str,
        role: Role,
        props: &ClientProps,
    ) -> Result<ClientConfig, ConfigError> {
        let cluster = self.cluster(alias).ok_or_else(|| ConfigError {
            path: self.path.clone(),
            line: None,
            key: None,
            reason: ConfigErrorReason::Security(format!("cluster `{alias}` is not in `clusters`")),
        })?;
        let security = security(alias, role, props, &self.path)?;
        let mut config = ClientConfig::new(cluster.bootstrap_servers.iter().cloned())
            .with_security(security)
            .with_cluster_alias(alias);
        // `client.id` names the client in the brokers' logs, request metrics and quotas
        // (`<alias>.consumer.client.id`, `<alias>->B.producer.client.id`, ...); "strait" when
        // unset.
        if let Some(id) = props.get("client.id") {
            let id = id.expose().trim();
            if !id.is_empty() {
                config.connection.client_id = id.to_owned();
            }
        }
        // `client.rack` (KIP-392) is a consumer key: fetches carry it, so a broker with a replica
        // selector can send us to a replica in our rack (`<alias>.consumer.client.rack`,
        // `<source>-><target>.consumer.client.rack`).
        if role == Role::Consumer {
            if let Some(rack) = props.get("client.rack") {
                let rack = rack.expose().trim();
                if !rack.is_empty() {
                    config.client_rack = Some(rack.to_owned());
                }
            }
        }
        Ok(config)
    }
}

/// The TLS and SASL settings of cluster `alias`'s `role` client, from its resolved `props`.
/// `config_path` is the config file, for messages.
pub fn security(
    alias: &str,
    role: Role,
    props: &ClientProps,
    config_path: &Path,
) -> Result<Security, ConfigError> {
    let reader = Reader {
        alias,
        role,
        props,
        config_path,
    };
    let protocol = props.security_protocol();
    let tls = match protocol {
        SecurityProtocol::Ssl | SecurityProtocol::SaslSsl => Some(Arc::new(reader.tls()?)),
        SecurityProtocol::Plaintext | SecurityProtocol::SaslPlaintext => None,
    };
    let sasl = match protocol {
        SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl => {
            Some(Arc::new(reader.sasl()?))
        }
        SecurityProtocol::Plaintext | SecurityProtocol::Ssl => None,
    };
    Ok(Security { tls, sasl })
}

struct Reader<'a> {
    alias: &'a str,
    role: Role,
    props: &'a ClientProps,
    config_path: &'a Path,
}

impl Reader<'_> {
    /// An error about client key `key`, naming the key of the file that set it (with its
    /// line), or `key` itself when the file does not set it.
    fn fail(&self, key: &str, problem: impl std::fmt::Display) -> ConfigError {
        let role = self.role.prefix().trim_end_matches('.');
        let origin = self.props.origin(key);
        ConfigError {
            path: self.config_path.to_owned(),
            line: origin.map(|o| o.line),
            key: Some(origin.map_or(key, |o| o.key.as_str()).to_owned()),
            reason: ConfigErrorReason::Security(format!(
                "cluster `{}` ({role} client): {problem}",
                self.alias
            )),
        }
    }

    /// A value, `None` when unset or blank.
    fn get(&self, key: &str) -> Option<&str> {
        self.props
            .get(key)
            .map(|v| v.expose().trim())
            .filter(|v| !v.is_empty())
    }

    fn secret(&self, key: &str) -> Option<Secret> {
        self.props
            .get(key)
            .map(|v| v.expose())
            .filter(|v| !v.is_empty())
            .map(Secret::new)
    }

    fn read_file(&self, key: &str, path: &str) -> Result<Vec<u8>, ConfigError> {
        std::fs::read(path).map_err(|e| self.fail(key, format!("cannot read {path}: {e}")))
    }

    /// Checks `ssl.<store>.type`: PEM, PKCS12, JKS or JCEKS; the file's content decides which
    /// it is read as (a JKS file given type PKCS12 is read all the same, as Java's keystores
    /// do since Java 9; Kafka's default type is JKS).
    fn check_store_type(&self, key: &str) -> Result<(), ConfigError> {
        match self.get(key).map(str::to_ascii_uppercase).as_deref() {
            None | Some("PEM" | "PKCS12" | "JKS" | "JCEKS") => Ok(()),
            Some(_) => Err(self.fail(key, "strait reads PEM, PKCS12, JKS and JCEKS stores")),
        }
    }

    fn store_error(&self, key: &str, path: Option<&str>, e: StoreError) -> ConfigError {
        let what = match (path, e) {
            // Advice with a `keytool` command: the file's own path in it.
            (
                Some(path),
                e @ (StoreError::JavaKeyStore { .. } | StoreError::SeveralPrivateKeys { .. }),
            ) => {
                let shown = e
                    .to_string()
                    .replace("FILE.p12", &format!("{path}.p12"))
                    .replace("FILE", path);
                format!("{path}: {shown}")
            }
            // Which password: the store's (`ssl.truststore.password`, `ssl.keystore.password`).
            (Some(path), e @ StoreError::WrongPassword) => {
                let password_key = key.replace(".location", ".password");
                format!("{path}: {e} ({password_key})")
            }
            (Some(path), e) => format!("{path}: {e}"),
            (None, e) => e.to_string(),
        };
        self.fail(key, what)
    }

    fn tls(&self) -> Result<TlsConfig, ConfigError> {
        let verify_hostname = match self.props.get("ssl.endpoint.identification.algorithm") {
            None => true,
            Some(v) => match v.expose().trim().to_ascii_lowercase().as_str() {
                "" => false,
                "https" => true,
                _ => {
                    return Err(self.fail(
                        "ssl.endpoint.identification.algorithm",
                        "expected `https` (verify the broker's host name, the default) or empty (do not)",
                    ))
                }
            },
        };
        let versions = match self.get("ssl.enabled.protocols") {
            None => Vec::new(),
            Some(list) => {
                let mut versions = Vec::new();
                for v in list.split(',').map(str::trim).filter(|v| !v.is_empty()) {
                    versions.push(match v {
                        "TLSv1.2" => TlsVersion::Tls12,
                        "TLSv1.3" => TlsVersion::Tls13,
                        _ => {
                            return Err(self.fail(
                                "ssl.enabled.protocols",
                                format!("`{v}` is not offered; strait speaks TLSv1.2 and TLSv1.3"),
                            ))
                        }
                    });
                }
                versions
            }
        };
        if self.get("ssl.engine.factory.class").is_some() {
            return Err(self.fail(
                "ssl.engine.factory.class",
                "a custom SSL engine factory is Java code strait cannot run",
            ));
        }
        let (trust, trust_origin) = self.trust()?;
        let identity = self.identity()?;
        TlsConfig::new(TlsOptions {
            trust,
            trust_origin,
            identity,
            verify_hostname,
            versions,
        })
        .map_err(|e| {
            let key = match e {
                StoreError::NoSystemCertificates | StoreError::BadCaCertificate(_) => {
                    "ssl.truststore.location"
                }
                StoreError::BadClientCertificate(_)
                    if self.get("ssl.keystore.location").is_none() =>
                {
                    "ssl.keystore.key"
                }
                _ => "ssl.keystore.location",
            };
            self.store_error(key, None, e)
        })
    }

    fn trust(&self) -> Result<(Trust, String), ConfigError> {
        const LOCATION: &str = "ssl.truststore.location";
        const CERTIFICATES: &str = "ssl.truststore.certificates";
        self.check_store_type("ssl.truststore.type")?;
        match (self.get(LOCATION), self.props.get(CERTIFICATES)) {
            (Some(_), Some(_)) => Err(self.fail(
                CERTIFICATES,
                "set either ssl.truststore.location or ssl.truststore.certificates, not both",
            )),
            (Some(path), None) => {
                let bytes = self.read_file(LOCATION, path)?;
                let password = self.secret("ssl.truststore.password");
                let certs = read_truststore(&bytes, password.as_ref())
                    .map_err(|e| self.store_error(LOCATION, Some(path), e))?;
                Ok((Trust::Certificates(certs), format!("{LOCATION}={path}")))
            }
            (None, Some(pem)) => {
                let certs = read_truststore(pem.expose().as_bytes(), None)
                    .map_err(|e| self.store_error(CERTIFICATES, None, e))?;
                Ok((Trust::Certificates(certs), CERTIFICATES.to_owned()))
            }
            (None, None) => Ok((Trust::System, "the system's CA certificates".to_owned())),
        }
    }

    fn identity(&self) -> Result<Option<ClientIdentity>, ConfigError> {
        const LOCATION: &str = "ssl.keystore.location";
        const CHAIN: &str = "ssl.keystore.certificate.chain";
        const KEY: &str = "ssl.keystore.key";
        self.check_store_type("ssl.keystore.type")?;
        let key_password = self.secret("ssl.key.password");
        let chain = self
            .props
            .get(CHAIN)
            .filter(|v| !v.expose().trim().is_empty());
        let key = self
            .props
            .get(KEY)
            .filter(|v| !v.expose().trim().is_empty());
        match (self.get(LOCATION), chain, key) {
            (None, None, None) => Ok(None),
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => Err(self.fail(
                LOCATION,
                "set either ssl.keystore.location or ssl.keystore.certificate.chain and \
                 ssl.keystore.key, not both",
            )),
            (Some(path), None, None) => {
                let bytes = self.read_file(LOCATION, path)?;
                let password = self.secret("ssl.keystore.password");
                read_keystore(&bytes, password.as_ref(), key_password.as_ref())
                    .map(Some)
                    .map_err(|e| self.store_error(LOCATION, Some(path), e))
            }
            (None, Some(chain), Some(key)) => read_pem_identity(
                chain.expose().as_bytes(),
                key.expose().as_bytes(),
                key_password.as_ref(),
            )
            .map(Some)
            .map_err(|e| self.store_error(KEY, None, e)),
            (None, Some(_), None) => {
                Err(self.fail(KEY, "ssl.keystore.certificate.chain is set, its key is not"))
            }
            (None, None, Some(_)) => Err(self.fail(
                CHAIN,
                "ssl.keystore.key is set, its certificate chain is not",
            )),
        }
    }

    fn sasl(&self) -> Result<SaslConfig, ConfigError> {
        const MECHANISM: &str = "sasl.mechanism";
        const JAAS: &str = "sasl.jaas.config";
        if let Some(sasl) = self.msk_iam()? {
            return Ok(sasl);
        }
        if self.get("sasl.client.callback.handler.class").is_some() {
            return Err(self.fail(
                "sasl.client.callback.handler.class",
                "a custom SASL client callback handler is Java code strait cannot run",
            ));
        }
        // Kafka's default mechanism is GSSAPI.
        let explicit = self.get(MECHANISM).is_some();
        let mechanism = self.get(MECHANISM).unwrap_or("GSSAPI");
        let Some(jaas_text) = self
            .props
            .get(JAAS)
            .filter(|v| !v.expose().trim().is_empty())
        else {
            return Err(self.fail(
                JAAS,
                format!(
                    "SASL ({mechanism}) needs sasl.jaas.config; strait does not read a JAAS file \
                     (-Djava.security.auth.login.config)"
                ),
            ));
        };
        let jaas = JaasConfig::parse(jaas_text.expose()).map_err(|e| self.fail(JAAS, e))?;
        let required = |option: &str| {
            jaas.option(option).ok_or_else(|| {
                self.fail(
                    JAAS,
                    format!("{} needs the option `{option}`", jaas.login_module),
                )
            })
        };
        let hash = match mechanism {
            "PLAIN" => None,
            "SCRAM-SHA-256" => Some(ScramHash::Sha256),
            "SCRAM-SHA-512" => Some(ScramHash::Sha512),
            "OAUTHBEARER" => return self.oauthbearer(&jaas),
            "GSSAPI" => return self.gssapi(&jaas, explicit),
            other => {
                return Err(self.fail(
                    MECHANISM,
                    format!(
                        "`{other}` is not supported; strait speaks PLAIN, SCRAM-SHA-256, \
                         SCRAM-SHA-512, OAUTHBEARER, GSSAPI and AWS_MSK_IAM"
                    ),
                ))
            }
        };
        // Kafka's PLAIN and SCRAM clients read the user and password the login module leaves,
        // and both modules leave them: either module works with either mechanism.
        if jaas.login_module != PLAIN_MODULE && jaas.login_module != SCRAM_MODULE {
            return Err(self.fail(
                JAAS,
                format!(
                    "{mechanism} takes the user and password from {PLAIN_MODULE} or {SCRAM_MODULE}, \
                     not {}",
                    jaas.login_module
                ),
            ));
        }
        let username = required("username")?.to_owned();
        let password = Secret::new(required("password")?);
        Ok(match hash {
            None => SaslConfig::Plain { username, password },
            Some(hash) => SaslConfig::Scram {
                hash,
                username,
                password,
                token_auth: jaas
                    .option("tokenauth")
                    .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
            },
        })
    }

    /// GSSAPI (Kerberos) from the JDK's `Krb5LoginModule` options, checked as that module and
    /// Kafka's client check them:
    ///
    /// - the service name is `sasl.kerberos.service.name` or the JAAS option `serviceName`;
    ///   neither, or two that differ, is an error (Kafka's `KerberosLogin.getServiceName`);
    /// - `useKeyTab=true` with `keyTab` and `principal`: credentials from the keytab. strait
    ///   wants both named; Java would look for a default keytab or prompt for a name;
    /// - `useTicketCache=true` (with `ticketCache`, or the default cache; `principal`
    ///   optional): credentials from a ticket cache (`kinit`); with `useKeyTab=true` too, the
    ///   cache first, then the keytab;
    /// - neither: Java would prompt for a password, which neither Kafka nor strait can;
    /// - `keyTab` without `useKeyTab=true`, `ticketCache` or `renewTGT=true` without
    ///   `useTicketCache=true`: the JDK module's own configuration errors.
    ///
    /// MIT Kerberos's GSS-API library must load (it is looked for now, so a machine without it
    /// stops at start-up); `krb5.conf` comes from `KRB5_CONFIG` or `/etc/krb5.conf`, as Java's
    /// comes from `-Djava.security.krb5.conf`.
    fn gssapi(&self, jaas: &JaasConfig, explicit: bool) -> Result<SaslConfig, ConfigError> {
        const MECHANISM: &str = "sasl.mechanism";
        const JAAS: &str = "sasl.jaas.config";
        const SERVICE: &str = "sasl.kerberos.service.name";
        if jaas.login_module != KRB5_MODULE {
            return Err(if explicit {
                self.fail(
                    JAAS,
                    format!("GSSAPI needs {KRB5_MODULE}, not {}", jaas.login_module),
                )
            } else {
                self.fail(
                    MECHANISM,
                    format!(
                        "sasl.mechanism is not set, so it is Kafka's default GSSAPI (Kerberos), \
                         which needs {KRB5_MODULE}; sasl.jaas.config has {}: set sasl.mechanism",
                        jaas.login_module
                    ),
                )
            });
        }
        let text = |name: &str| jaas.option(name).map(str::trim).filter(|v| !v.is_empty());
        let flag = |name: &str| text(name).is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let service_name = match (text("serviceName"), self.get(SERVICE)) {
            (Some(jaas_name), Some(config_name)) if jaas_name != config_name => {
                return Err(self.fail(
                    SERVICE,
                    format!(
                        "conflicting Kerberos service names: `{jaas_name}` (serviceName in \
                         sasl.jaas.config) and `{config_name}` ({SERVICE}); Kafka refuses this too"
                    ),
                ))
            }
            (Some(name), _) | (None, Some(name)) => name.to_owned(),
            (None, None) => {
                return Err(self.fail(
                    SERVICE,
                    format!(
                        "GSSAPI needs the brokers' Kerberos service name (the first part of \
                         their principal kafka/host@REALM, usually `kafka`): set {SERVICE} \
                         (Kafka: \"No serviceName defined in either JAAS or Kafka config\")"
                    ),
                ))
            }
        };
        let use_keytab = flag("useKeyTab");
        let use_ticket_cache = flag("useTicketCache");
        let principal = text("principal").map(str::to_owned);
        if text("keyTab").is_some() && !use_keytab {
            return Err(self.fail(
                JAAS,
                "keyTab is set but useKeyTab is not true (Krb5LoginModule: \"useKeyTab should be \
                 set to true to use the keytab\")",
            ));
        }
        if text("ticketCache").is_some() && !use_ticket_cache {
            return Err(self.fail(
                JAAS,
                "ticketCache is set but useTicketCache is not true (Krb5LoginModule: \
                 \"useTicketCache should be set to true to use the ticket cache\")",
            ));
        }
        if flag("renewTGT") && !use_ticket_cache {
            return Err(self.fail(
                JAAS,
                "renewTGT=true needs useTicketCache=true (Krb5LoginModule's rule)",
            ));
        }
        let keytab = if use_keytab {
            let Some(keytab) = text("keyTab") else {
                return Err(self.fail(
                    JAAS,
                    "useKeyTab=true needs keyTab=\"/path/to/client.keytab\": strait does not \
                     look for a default keytab as Java's Krb5LoginModule does (krb5.conf's \
                     default_keytab_name), name it",
                ));
            };
            if principal.is_none() {
                return Err(self.fail(
                    JAAS,
                    "useKeyTab=true needs principal=\"name@REALM\" (the keytab's client \
                     principal); Java would prompt for it, which a Kafka client cannot",
                ));
            }
            Some(PathBuf::from(keytab))
        } else {
            None
        };
        if !use_keytab && !use_ticket_cache {
            return Err(self.fail(
                JAAS,
                format!(
                    "{KRB5_MODULE} with neither useKeyTab=true nor useTicketCache=true would \
                     prompt for a password, which neither Kafka nor strait can: set \
                     useKeyTab=true keyTab=\"...\" principal=\"...\", or useTicketCache=true"
                ),
            ));
        }
        let ticket_cache = use_ticket_cache.then(|| text("ticketCache").map(str::to_owned));
        check_gssapi_library().map_err(|e| self.fail(MECHANISM, e))?;
        Ok(SaslConfig::Gssapi(GssapiConfig {
            service_name,
            principal,
            keytab,
            ticket_cache,
        }))
    }

    fn oauthbearer(&self, jaas: &JaasConfig) -> Result<SaslConfig, ConfigError> {
        const JAAS: &str = "sasl.jaas.config";
        const HANDLER: &str = "sasl.login.callback.handler.class";
        const URL: &str = "sasl.oauthbearer.token.endpoint.url";
        const RETRIEVER: &str = "sasl.oauthbearer.jwt.retriever.class";
        if jaas.login_module != OAUTH_MODULE {
            return Err(self.fail(
                JAAS,
                format!(
                    "OAUTHBEARER needs {OAUTH_MODULE}, not {}",
                    jaas.login_module
                ),
            ));
        }
        let mut extensions = Vec::new();
        for (name, value) in jaas.options() {
            let ext = name
                .strip_prefix("extension_")
                .or_else(|| name.strip_prefix("unsecuredLoginExtension_"));
            if let Some(ext) = ext {
                check_extension(ext, value).map_err(|e| self.fail(JAAS, e))?;
                extensions.push((ext.to_owned(), value.to_owned()));
            }
        }
        let handler = self.get(HANDLER);
        let token =
            if let Some(token) = jaas.option("strait.token") {
                if token.trim().is_empty() {
                    return Err(self.fail(JAAS, "the option `strait.token` is empty"));
                }
                TokenSource::Static(Secret::new(token.trim()))
            } else if let Some(handler) = handler {
                if !OAUTH_HANDLERS.contains(&handler) {
                    return Err(self.fail(
                        HANDLER,
                        format!(
                        "`{handler}` is Java code strait cannot run; strait fetches tokens with \
                         {} and {URL} (https:// for the client credentials grant, file:/path \
                         for a token file)",
                        OAUTH_HANDLERS[0]
                    ),
                    ));
                }
                let Some(url) = self.get(URL) else {
                    return Err(self.fail(
                        URL,
                        format!(
                            "{HANDLER} needs {URL}: the identity provider's token endpoint \
                         (https://...) or a token file (file:/path)"
                        ),
                    ));
                };
                let retriever = self
                    .get(RETRIEVER)
                    .map(|c| c.rsplit('.').next().unwrap_or(c));
                match retriever {
                    None | Some("DefaultJwtRetriever") => {}
                    Some("FileJwtRetriever") if url.starts_with("file:") => {}
                    Some("ClientCredentialsJwtRetriever") if !url.starts_with("file:") => {}
                    Some("JwtBearerJwtRetriever") => return Err(self.fail(
                        RETRIEVER,
                        "the JWT bearer grant (KIP-1139, a signed assertion instead of a client \
                         secret) is not supported; use the client credentials grant or a token \
                         file",
                    )),
                    Some(_) => {
                        return Err(self.fail(
                            RETRIEVER,
                            format!(
                            "`{}` does not match {URL}={url}, or is Java code strait cannot run",
                            self.get(RETRIEVER).unwrap_or_default()
                        ),
                        ))
                    }
                }
                if url.starts_with("file:") {
                    TokenSource::File(file_url_path(url).ok_or_else(|| {
                        self.fail(URL, "a token file URL is file:/path (an absolute path)")
                    })?)
                } else {
                    TokenSource::Endpoint(Arc::new(TokenEndpoint::new(
                        self.client_credentials(jaas, url)?,
                    )))
                }
            } else {
                TokenSource::Unsecured(self.unsecured(jaas)?)
            };
        Ok(SaslConfig::OAuthBearer { token, extensions })
    }

    /// The client credentials grant (KIP-768; Kafka 4.1's keys beside the JAAS options of
    /// before): where to ask, as whom, and when to ask again.
    fn client_credentials(
        &self,
        jaas: &JaasConfig,
        url: &str,
    ) -> Result<ClientCredentials, ConfigError> {
        const JAAS: &str = "sasl.jaas.config";
        const URL: &str = "sasl.oauthbearer.token.endpoint.url";
        const ID: &str = "sasl.oauthbearer.client.credentials.client.id";
        const SECRET: &str = "sasl.oauthbearer.client.credentials.client.secret";
        check_url(url).map_err(|e| self.fail(URL, e))?;
        // A key of the client's config wins over the JAAS option, as in Kafka 4.1.
        let client_id = match self.get(ID) {
            Some(id) => id.to_owned(),
            None => jaas
                .option("clientId")
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .ok_or_else(|| {
                    self.fail(
                        JAAS,
                        format!("the client credentials grant needs a client id: {ID} or the JAAS option `clientId`"),
                    )
                })?
                .to_owned(),
        };
        let client_secret = match self.secret(SECRET) {
            Some(secret) => secret,
            None => jaas
                .option("clientSecret")
                .filter(|v| !v.trim().is_empty())
                .map(Secret::new)
                .ok_or_else(|| {
                    self.fail(
                        JAAS,
                        format!("the client credentials grant needs a client secret: {SECRET} or the JAAS option `clientSecret`"),
                    )
                })?,
        };
        let scope = self
            .get("sasl.oauthbearer.scope")
            .or_else(|| jaas.option("scope").map(str::trim))
            .filter(|v| !v.is_empty())
            .map(str::to_owned);
        let tls = if url.trim().starts_with("https:") {
            Some(Arc::new(self.token_endpoint_tls(jaas)?))
        } else {
            None
        };
        let window = RefreshWindow::default();
        Ok(ClientCredentials {
            url: url.to_owned(),
            client_id,
            client_secret,
            scope,
            urlencode_header: self.flag("sasl.oauthbearer.header.urlencode", false)?,
            tls,
            connect_timeout: self.millis("sasl.login.connect.timeout.ms", 10_000)?,
            read_timeout: self.millis("sasl.login.read.timeout.ms", 10_000)?,
            retry_backoff: self.millis("sasl.login.retry.backoff.ms", 100)?,
            retry_backoff_max: self.millis("sasl.login.retry.backoff.max.ms", 10_000)?,
            sub_claim: self
                .get("sasl.oauthbearer.sub.claim.name")
                .unwrap_or("sub")
                .to_owned(),
            refresh: RefreshWindow {
                factor: self.ranged("sasl.login.refresh.window.factor", window.factor, 0.5, 1.0)?,
                jitter: self.ranged(
                    "sasl.login.refresh.window.jitter",
                    window.jitter,
                    0.0,
                    0.25,
                )?,
                min_period: Duration::from_secs(self.ranged(
                    "sasl.login.refresh.min.period.seconds",
                    60.0,
                    0.0,
                    900.0,
                )? as u64),
                buffer: Duration::from_secs(self.ranged(
                    "sasl.login.refresh.buffer.seconds",
                    300.0,
                    0.0,
                    3600.0,
                )? as u64),
            },
        })
    }

    /// TLS to an `https` token endpoint: Kafka reads it from the JAAS line's `ssl.*` options
    /// (the client's own `ssl.*` keys are for the brokers); without a truststore there, the
    /// system's CAs.
    fn token_endpoint_tls(&self, jaas: &JaasConfig) -> Result<TlsConfig, ConfigError> {
        const JAAS: &str = "sasl.jaas.config";
        let option = |name: &str| jaas.option(name).map(str::trim).filter(|v| !v.is_empty());
        let (trust, trust_origin) =
            match (
                option("ssl.truststore.location"),
                option("ssl.truststore.certificates"),
            ) {
                (Some(_), Some(_)) => return Err(self.fail(
                    JAAS,
                    "set either ssl.truststore.location or ssl.truststore.certificates for the \
                     token endpoint, not both",
                )),
                (Some(path), None) => {
                    let bytes = std::fs::read(path).map_err(|e| {
                        self.fail(JAAS, format!("the token endpoint's truststore {path}: {e}"))
                    })?;
                    let password = jaas
                        .option("ssl.truststore.password")
                        .filter(|p| !p.is_empty())
                        .map(Secret::new);
                    let certs = read_truststore(&bytes, password.as_ref()).map_err(|e| {
                        self.fail(JAAS, format!("the token endpoint's truststore {path}: {e}"))
                    })?;
                    (
                        Trust::Certificates(certs),
                        format!("the JAAS option ssl.truststore.location={path}"),
                    )
                }
                (None, Some(pem)) => {
                    let certs = read_truststore(pem.as_bytes(), None).map_err(|e| {
                        self.fail(
                            JAAS,
                            format!("the token endpoint's ssl.truststore.certificates: {e}"),
                        )
                    })?;
                    (
                        Trust::Certificates(certs),
                        "the JAAS option ssl.truststore.certificates".to_owned(),
                    )
                }
                (None, None) => (Trust::System, "the system's CA certificates".to_owned()),
            };
        let verify_hostname =
            match jaas.option("ssl.endpoint.identification.algorithm") {
                None => true,
                Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                    "" => false,
                    "https" => true,
                    _ => return Err(self.fail(
                        JAAS,
                        "the JAAS option ssl.endpoint.identification.algorithm is `https` or empty",
                    )),
                },
            };
        TlsConfig::new(TlsOptions {
            trust,
            trust_origin,
            identity: None,
            verify_hostname,
            versions: Vec::new(),
        })
        .map_err(|e| self.fail(JAAS, format!("TLS to the token endpoint: {e}")))
    }

    /// A `true`/`false` key.
    fn flag(&self, key: &str, default: bool) -> Result<bool, ConfigError> {
        match self.get(key).map(str::to_ascii_lowercase).as_deref() {
            None => Ok(default),
            Some("true") => Ok(true),
            Some("false") => Ok(false),
            Some(_) => Err(self.fail(key, "expected true or false")),
        }
    }

    /// A duration in milliseconds.
    fn millis(&self, key: &str, default: u64) -> Result<Duration, ConfigError> {
        match self.get(key) {
            None => Ok(Duration::from_millis(default)),
            Some(v) => v
                .parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| self.fail(key, "expected a whole number of milliseconds")),
        }
    }

    /// A number within Kafka's bounds for the key.
    fn ranged(&self, key: &str, default: f64, min: f64, max: f64) -> Result<f64, ConfigError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .parse::<f64>()
                .ok()
                .filter(|n| (min..=max).contains(n))
                .ok_or_else(|| self.fail(key, format!("expected a number from {min} to {max}"))),
        }
    }

    /// Kafka's unsecured token from `unsecuredLogin*` options.
    fn unsecured(&self, jaas: &JaasConfig) -> Result<UnsecuredToken, ConfigError> {
        const JAAS: &str = "sasl.jaas.config";
        let principal_claim = jaas
            .option("unsecuredLoginPrincipalClaimName")
            .unwrap_or("sub")
            .to_owned();
        let lifetime = match jaas.option("unsecuredLoginLifetimeSeconds") {
            None => Duration::from_secs(3600),
            Some(v) => Duration::from_secs(v.trim().parse().map_err(|_| {
                self.fail(
                    JAAS,
                    "unsecuredLoginLifetimeSeconds is not a whole number of seconds",
                )
            })?),
        };
        let mut principal = None;
        let mut claims = Vec::new();
        for (name, value) in jaas.options() {
            let claim = if let Some(claim) = name.strip_prefix("unsecuredLoginStringClaim_") {
                (claim, Claim::String(value.to_owned()))
            } else if let Some(claim) = name.strip_prefix("unsecuredLoginNumberClaim_") {
                if !value.trim().parse::<f64>().is_ok_and(f64::is_finite) {
                    return Err(self.fail(JAAS, format!("{name} is not a number")));
                }
                (claim, Claim::Number(value.trim().to_owned()))
            } else if let Some(claim) = name.strip_prefix("unsecuredLoginListClaim_") {
                // Kafka: the first character is the separator.
                let mut chars = value.chars();
                let items = match chars.next() {
                    Some(sep) => chars
                        .as_str()
                        .split(sep)
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned)
                        .collect(),
                    None => Vec::new(),
                };
                (claim, Claim::List(items))
            } else {
                continue;
            };
            if claim.0 == principal_claim {
                if let Claim::String(p) = &claim.1 {
                    principal = Some(p.clone());
                }
                continue;
            }
            claims.push((claim.0.to_owned(), claim.1));
        }
        let Some(principal) = principal else {
            return Err(self.fail(
                JAAS,
                format!(
                    "OAUTHBEARER has no token: set the option `strait.token`, or \
                     sasl.login.callback.handler.class={} with \
                     sasl.oauthbearer.token.endpoint.url=file:/path, or (test clusters) \
                     unsecuredLoginStringClaim_{principal_claim}",
                    OAUTH_HANDLERS[0]
                ),
            ));
        };
        Ok(UnsecuredToken {
            principal_claim,
            principal,
            claims,
            lifetime,
        })
    }
}

/// The path of a `file:` URL (`file:/p`, `file:///p`, `file://localhost/p`).
fn file_url_path(url: &str) -> Option<PathBuf> {
    let rest = url.strip_prefix("file:")?;
    let path = if let Some(after) = rest.strip_prefix("//") {
        let slash = after.find('/')?;
        let host = &after[..slash];
        if !host.is_empty() && host != "localhost" {
            return None;
        }
        &after[slash..]
    } else {
        rest
    };
    path.starts_with('/')
        .then(|| PathBuf::from(percent_decode(path)))
}

/// `%20` and friends in a URL path.
fn percent_decode(s: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push(hi * 16 + lo);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_urls() {
        assert_eq!(
            file_url_path("file:/run/token"),
            Some(PathBuf::from("/run/token"))
        );
        assert_eq!(
            file_url_path("file:///run/token"),
            Some(PathBuf::from("/run/token"))
        );
        assert_eq!(
            file_url_path("file://localhost/run/my%20token"),
            Some(PathBuf::from("/run/my token"))
        );
        assert_eq!(file_url_path("file://host/run/token"), None);
        assert_eq!(file_url_path("https://idp/token"), None);
        assert_eq!(file_url_path("file:relative"), None);
    }
}
