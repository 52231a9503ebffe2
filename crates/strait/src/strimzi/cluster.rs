//! One Kafka cluster of a `KafkaMirrorMaker2` resource (an entry of v1beta2's `spec.clusters`,
//! v1's `spec.target` or a mirror's `source`): its bootstrap servers, TLS, authentication and
//! client `config`, as `<alias>.*` keys.

use std::fmt::Write as _;

use yaml_rust2::Yaml;

use super::{jaas_escape, scalar, secret_ref, str_at, Converter, CONNECT_WORKER_KEYS};

impl Converter {
    pub(super) fn cluster(&mut self, alias: &str, cluster: &Yaml) -> Result<(), String> {
        self.lines.push(String::new());
        self.comment(&format!("cluster {alias}"));
        let bootstrap =
            str_at(cluster, "bootstrapServers").ok_or("no bootstrapServers".to_owned())?;
        self.set(&format!("{alias}.bootstrap.servers"), &bootstrap);
        let tls = match &cluster["tls"] {
            Yaml::BadValue | Yaml::Null => false,
            Yaml::Hash(_) => true,
            _ => return Err("tls: not a mapping".into()),
        };
        let auth = &cluster["authentication"];
        let auth_type = match auth {
            Yaml::BadValue | Yaml::Null => None,
            Yaml::Hash(_) => {
                Some(str_at(auth, "type").ok_or("authentication: no type".to_owned())?)
            }
            _ => return Err("authentication: not a mapping".into()),
        };
        let sasl = matches!(
            auth_type.as_deref(),
            Some("scram-sha-256" | "scram-sha-512" | "plain" | "oauth")
        );
        let protocol = match (tls, sasl) {
            (false, false) => "PLAINTEXT",
            (true, false) => "SSL",
            (false, true) => "SASL_PLAINTEXT",
            (true, true) => "SASL_SSL",
        };
        if protocol != "PLAINTEXT" {
            self.set(&format!("{alias}.security.protocol"), protocol);
        }
        if tls {
            self.trust(alias, &cluster["tls"]["trustedCertificates"])?;
        }
        match auth_type.as_deref() {
            None => {}
            Some("tls") => {
                if !tls {
                    return Err("authentication type tls needs `tls` (the listener's TLS)".into());
                }
                let cert = &auth["certificateAndKey"];
                let secret = str_at(cert, "secretName")
                    .ok_or("authentication.certificateAndKey: no secretName")?;
                let certificate = str_at(cert, "certificate")
                    .ok_or("authentication.certificateAndKey: no certificate")?;
                let key = str_at(cert, "key").ok_or("authentication.certificateAndKey: no key")?;
                self.set(&format!("{alias}.ssl.keystore.type"), "PEM");
                let chain = self.secret(&secret, &certificate);
                self.set(&format!("{alias}.ssl.keystore.certificate.chain"), &chain);
                let key = self.secret(&secret, &key);
                self.set(&format!("{alias}.ssl.keystore.key"), &key);
            }
            Some(kind @ ("scram-sha-256" | "scram-sha-512" | "plain")) => {
                let user = str_at(auth, "username").ok_or("authentication: no username")?;
                let password = &auth["passwordSecret"];
                let secret = str_at(password, "secretName")
                    .ok_or("authentication.passwordSecret: no secretName")?;
                let key = str_at(password, "password")
                    .ok_or("authentication.passwordSecret: no password (the key in the Secret)")?;
                let (mechanism, module) = match kind {
                    "plain" => (
                        "PLAIN",
                        "org.apache.kafka.common.security.plain.PlainLoginModule",
                    ),
                    "scram-sha-256" => (
                        "SCRAM-SHA-256",
                        "org.apache.kafka.common.security.scram.ScramLoginModule",
                    ),
                    _ => (
                        "SCRAM-SHA-512",
                        "org.apache.kafka.common.security.scram.ScramLoginModule",
                    ),
                };
                self.set(&format!("{alias}.sasl.mechanism"), mechanism);
                let password = self.secret(&secret, &key);
                self.set(
                    &format!("{alias}.sasl.jaas.config"),
                    &format!(
                        "{module} required username=\"{}\" password=\"{password}\";",
                        jaas_escape(&user)
                    ),
                );
            }
            Some("oauth") => self.oauth(alias, auth)?,
            Some("custom") => {
                return Err(
                    "authentication type custom configures Java classes strait cannot run; \
                     write the sasl.* keys for one of strait's mechanisms (docs/security.md)"
                        .into(),
                )
            }
            Some(other) => return Err(format!("authentication type `{other}` is not known")),
        }
        if let Yaml::Hash(config) = &cluster["config"] {
            for (key, value) in config {
                let key = key.as_str().unwrap_or_default();
                let value = scalar(value).ok_or(format!("config.{key}: not a single value"))?;
                if CONNECT_WORKER_KEYS.iter().any(|k| key.starts_with(k)) {
                    self.comment(&format!(
                        "Kafka Connect worker setting, not used by strait: {key} = {value}"
                    ));
                } else {
                    self.set(&format!("{alias}.{key}"), &value);
                }
            }
        }
        Ok(())
    }

    /// `tls.trustedCertificates` as the files the Secrets are mounted as. One file is
    /// `ssl.truststore.location`; several, or a `pattern`, are `ssl.truststore.certificates`
    /// made of `${directory:...}` references, a pattern's standing for every file of the
    /// Secret it matches, read when strait loads the file and again when it reloads it (as
    /// Strimzi takes every key of the Secret the pattern matches;
    /// `crates/strait-core/src/config/providers.rs`).
    fn trust(&mut self, alias: &str, certificates: &Yaml) -> Result<(), String> {
        let Yaml::Array(list) = certificates else {
            // No certificates: the system's CAs, as Strimzi's default.
            return Ok(());
        };
        let mut files = Vec::new();
        for (i, entry) in list.iter().enumerate() {
            let at = format!("tls.trustedCertificates[{i}]");
            let secret = str_at(entry, "secretName").ok_or(format!("{at}: no secretName"))?;
            match (str_at(entry, "certificate"), str_at(entry, "pattern")) {
                (Some(certificate), _) => files.push((secret, certificate, false)),
                (None, Some(pattern)) => {
                    check_pattern(&pattern).map_err(|e| format!("{at}: {e}"))?;
                    files.push((secret, pattern, true));
                }
                (None, None) => return Err(format!("{at}: neither certificate nor pattern")),
            }
        }
        match &files[..] {
            [] => {}
            [(secret, certificate, false)] => {
                self.set(&format!("{alias}.ssl.truststore.type"), "PEM");
                let path = self.secret_file(secret, certificate);
                self.set(&format!("{alias}.ssl.truststore.location"), &path);
            }
            several => {
                self.set(&format!("{alias}.ssl.truststore.type"), "PEM");
                let texts: Vec<String> =
                    several.iter().map(|(s, c, _)| self.secret(s, c)).collect();
                self.set(
                    &format!("{alias}.ssl.truststore.certificates"),
                    &texts.join("\n"),
                );
            }
        }
        Ok(())
    }

    fn oauth(&mut self, alias: &str, auth: &Yaml) -> Result<(), String> {
        for refused in ["refreshToken", "passwordSecret", "clientAssertion"] {
            if !matches!(auth[refused], Yaml::BadValue | Yaml::Null) {
                return Err(format!(
                    "authentication.{refused}: strait's OAUTHBEARER takes a token from the client \
                     credentials grant (tokenEndpointUri, clientId, clientSecret) or a static \
                     accessToken"
                ));
            }
        }
        self.set(&format!("{alias}.sasl.mechanism"), "OAUTHBEARER");
        let module = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";
        if let Some(token) = secret_ref(&auth["accessToken"], "key") {
            let token = self.secret(&token.0, &token.1);
            self.set(
                &format!("{alias}.sasl.jaas.config"),
                &format!("{module} required strait.token=\"{token}\";"),
            );
            return Ok(());
        }
        let url = str_at(auth, "tokenEndpointUri")
            .ok_or("authentication: oauth needs tokenEndpointUri (or accessToken)")?;
        let client = str_at(auth, "clientId").ok_or("authentication: oauth needs clientId")?;
        let (secret, key) = secret_ref(&auth["clientSecret"], "key")
            .ok_or("authentication: oauth needs clientSecret (secretName and key)")?;
        self.set(
            &format!("{alias}.sasl.login.callback.handler.class"),
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        );
        self.set(
            &format!("{alias}.sasl.oauthbearer.token.endpoint.url"),
            &url,
        );
        let client_secret = self.secret(&secret, &key);
        let mut jaas = format!(
            "{module} required clientId=\"{}\" clientSecret=\"{client_secret}\"",
            jaas_escape(&client)
        );
        if let Some(scope) = str_at(auth, "scope") {
            let _ = write!(jaas, " scope=\"{}\"", jaas_escape(&scope));
        }
        if let Yaml::Array(list) = &auth["tlsTrustedCertificates"] {
            match &list[..] {
                [] => {}
                [one] => {
                    let secret = str_at(one, "secretName")
                        .ok_or("authentication.tlsTrustedCertificates[0]: no secretName")?;
                    // A pattern's files would be PEM text with line ends, which a JAAS
                    // option cannot hold.
                    let certificate = str_at(one, "certificate").ok_or(
                        "authentication.tlsTrustedCertificates[0]: name the file with \
                         `certificate`; a `pattern` cannot be carried into the JAAS options",
                    )?;
                    let path = self.secret_file(&secret, &certificate);
                    let _ = write!(
                        jaas,
                        " ssl.truststore.location=\"{}\" ssl.truststore.type=\"PEM\"",
                        jaas_escape(&path)
                    );
                }
                _ => {
                    return Err(
                        "authentication.tlsTrustedCertificates: give the identity provider's CA \
                         as one certificate"
                            .into(),
                    )
                }
            }
        }
        if str_at(auth, "disableTlsHostnameVerification").as_deref() == Some("true") {
            jaas.push_str(" ssl.endpoint.identification.algorithm=\"\"");
        }
        jaas.push(';');
        self.set(&format!("{alias}.sasl.jaas.config"), &jaas);
        for (key, target) in [
            ("connectTimeoutSeconds", "sasl.login.connect.timeout.ms"),
            ("readTimeoutSeconds", "sasl.login.read.timeout.ms"),
        ] {
            if let Some(seconds) = str_at(auth, key) {
                let ms = seconds
                    .parse::<u64>()
                    .map_err(|_| format!("authentication.{key}: not a whole number"))?
                    * 1000;
                self.set(&format!("{alias}.{target}"), &ms.to_string());
            }
        }
        if let Yaml::Hash(map) = auth {
            for (key, _) in map {
                let key = key.as_str().unwrap_or_default();
                if ![
                    "type",
                    "tokenEndpointUri",
                    "clientId",
                    "clientSecret",
                    "scope",
                    "tlsTrustedCertificates",
                    "disableTlsHostnameVerification",
                    "connectTimeoutSeconds",
                    "readTimeoutSeconds",
                    "accessToken",
                ]
                .contains(&key)
                {
                    self.note(format!(
                        "cluster {alias}: authentication.{key} (Strimzi's OAuth client) has no \
                         counterpart in Kafka's client credentials grant; not carried over"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// A `pattern` as strait matches it against the Secret's file names: `*` (any characters) and
/// `?` (one), which is all Strimzi's examples use; Kubernetes keys are letters, digits, `-`,
/// `_` and `.`, so any other character would be glob syntax (`[...]`, `{a,b}`) strait does not
/// read, refused here rather than taken literally.
fn check_pattern(pattern: &str) -> Result<(), String> {
    let known = |c: char| c.is_ascii_alphanumeric() || "-_.*?".contains(c);
    if pattern.is_empty() || !pattern.chars().all(known) {
        return Err(format!(
            "pattern `{pattern}`: strait matches `*` and `?` in a Secret's file names (letters, \
             digits, `-`, `_`, `.`); name the files with `certificate` instead"
        ));
    }
    Ok(())
}
