//! `strait config from-strimzi`: a Strimzi `KafkaMirrorMaker2` resource (`kafka.strimzi.io/v1beta2`)
//! turned into the MM2 `.properties` file strait runs, for operators moving off Strimzi's
//! operator-run MM2 (`docs/strimzi.md`).
//!
//! What maps to what:
//! - `spec.clusters[]`: `<alias>.bootstrap.servers`; `tls` (trusted certificates) and
//!   `authentication` (`tls`, `scram-sha-256`, `scram-sha-512`, `plain`, `oauth`) to
//!   `security.protocol`, `ssl.*` and `sasl.*`; `config` to `<alias>.<key>` (Kafka Connect's
//!   own worker keys are written commented out: strait has no Connect worker).
//! - `spec.mirrors[]`: `<source>-><target>.enabled = true`, the topic and group patterns,
//!   `sourceConnector.tasksMax` as `tasks.max`, and the three connectors' `config` as flow keys.
//!   A mirror without a `checkpointConnector` or `heartbeatConnector` runs none in Strimzi, so
//!   its flow gets `emit.checkpoints.enabled = false` or `emit.heartbeats.enabled = false`.
//! - `spec.rack`: the source consumers' `client.rack` from the environment variable
//!   `STRAIT_CLIENT_RACK`, which the deployment sets from the node's zone.
//! - Secrets (passwords, keys, client secrets) are never copied: they are read at run time
//!   from the Kubernetes Secret mounted as a directory, `${directory:<dir>/<secret>:<key>}`
//!   (Kafka's `DirectoryConfigProvider`), under `--secrets-dir` (default `/etc/strait/secrets`);
//!   certificates likewise as files in that directory.
//!
//! Everything of the resource that is not carried over (Kubernetes settings such as
//! `resources` or `template`, OAuth options strait does not use, ...) is said in a note.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use yaml_rust2::{Yaml, YamlLoader};

/// The converted file and what the reader should know about it.
#[derive(Debug)]
pub(crate) struct Conversion {
    /// The MM2 properties.
    pub(crate) properties: String,
    /// What was not carried over, or carried over with a change, one line each.
    pub(crate) notes: Vec<String>,
}

/// Kafka Connect worker keys a Strimzi cluster's `config` may hold; strait has no Connect
/// worker, so they are written commented out.
const CONNECT_WORKER_KEYS: [&str; 10] = [
    "config.storage.",
    "offset.storage.",
    "status.storage.",
    "key.converter",
    "value.converter",
    "header.converter",
    "group.id",
    "offset.flush.",
    "connector.client.config.override.policy",
    "plugin.path",
];

/// `spec` keys that only shape the Kubernetes deployment; said in a note.
const DEPLOYMENT_KEYS: [&str; 13] = [
    "version",
    "image",
    "resources",
    "livenessProbe",
    "readinessProbe",
    "jvmOptions",
    "jmxOptions",
    "logging",
    "metricsConfig",
    "tracing",
    "template",
    "externalConfiguration",
    "clientRackInitImage",
];

/// Converts `text` (one YAML file, possibly several documents) with secrets mounted under
/// `secrets_dir`.
pub(crate) fn convert(text: &str, origin: &str, secrets_dir: &str) -> Result<Conversion, String> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| format!("{origin}: not YAML: {e}"))?;
    let resources: Vec<&Yaml> = docs
        .iter()
        .filter(|d| str_at(d, "kind").as_deref() == Some("KafkaMirrorMaker2"))
        .collect();
    let resource = match resources[..] {
        [one] => one,
        [] => return Err(format!("{origin}: no KafkaMirrorMaker2 resource in it")),
        _ => {
            return Err(format!(
                "{origin}: {} KafkaMirrorMaker2 resources; give one per file",
                resources.len()
            ))
        }
    };
    let name = str_at(&resource["metadata"], "name").unwrap_or_else(|| "(unnamed)".into());
    let api = str_at(resource, "apiVersion").unwrap_or_default();
    if api != "kafka.strimzi.io/v1beta2" {
        return Err(format!(
            "{origin}: apiVersion `{api}`; this converter reads kafka.strimzi.io/v1beta2"
        ));
    }
    let spec = &resource["spec"];
    if !matches!(spec, Yaml::Hash(_)) {
        return Err(format!("{origin}: KafkaMirrorMaker2 {name} has no spec"));
    }
    let mut c = Converter {
        secrets_dir: secrets_dir.trim_end_matches('/').to_owned(),
        lines: Vec::new(),
        notes: Vec::new(),
        providers: BTreeMap::new(),
    };
    c.spec(spec)?;
    let mut properties = String::new();
    let _ = writeln!(
        properties,
        "# MirrorMaker 2 configuration for strait, made by `strait config from-strimzi` from\n\
         # KafkaMirrorMaker2 `{name}` ({origin}). Secrets are read at run time from\n\
         # {}/<secret name>/<key> (each Kubernetes Secret mounted as a directory).\n",
        c.secrets_dir
    );
    if !c.providers.is_empty() {
        let names: Vec<&str> = c.providers.keys().map(String::as_str).collect();
        let _ = writeln!(properties, "config.providers = {}", names.join(", "));
        for (provider, class) in &c.providers {
            let _ = writeln!(properties, "config.providers.{provider}.class = {class}");
        }
        properties.push('\n');
    }
    for line in &c.lines {
        properties.push_str(line);
        properties.push('\n');
    }
    Ok(Conversion {
        properties,
        notes: c.notes,
    })
}

struct Converter {
    secrets_dir: String,
    lines: Vec<String>,
    notes: Vec<String>,
    /// Config providers used: name -> class.
    providers: BTreeMap<String, String>,
}

impl Converter {
    fn set(&mut self, key: &str, value: &str) {
        self.lines.push(format!("{key} = {}", escape(value)));
    }

    fn comment(&mut self, text: &str) {
        self.lines.push(format!("# {text}"));
    }

    fn note(&mut self, text: impl Into<String>) {
        self.notes.push(text.into());
    }

    /// `${directory:<dir>/<secret>:<key>}`: a key of a mounted Secret, read at run time.
    fn secret(&mut self, secret: &str, key: &str) -> String {
        self.providers.insert(
            "directory".into(),
            "org.apache.kafka.common.config.provider.DirectoryConfigProvider".into(),
        );
        format!("${{directory:{}/{secret}:{key}}}", self.secrets_dir)
    }

    /// The path of a mounted Secret's key.
    fn secret_file(&self, secret: &str, key: &str) -> String {
        format!("{}/{secret}/{key}", self.secrets_dir)
    }

    fn spec(&mut self, spec: &Yaml) -> Result<(), String> {
        if !matches!(spec["target"], Yaml::BadValue) {
            return Err(
                "spec.target: this converter reads the `clusters` and `connectCluster` form of \
                 KafkaMirrorMaker2"
                    .into(),
            );
        }
        let Yaml::Array(clusters) = &spec["clusters"] else {
            return Err("spec.clusters: missing or not a list".into());
        };
        let Yaml::Array(mirrors) = &spec["mirrors"] else {
            return Err("spec.mirrors: missing or not a list".into());
        };
        let mut aliases = Vec::new();
        for (i, cluster) in clusters.iter().enumerate() {
            let alias =
                str_at(cluster, "alias").ok_or_else(|| format!("spec.clusters[{i}]: no alias"))?;
            check_alias(&alias).map_err(|e| format!("spec.clusters[{i}]: {e}"))?;
            if aliases.contains(&alias) {
                return Err(format!("spec.clusters[{i}]: alias `{alias}` appears twice"));
            }
            aliases.push(alias);
        }
        self.set("clusters", &aliases.join(", "));
        for (i, cluster) in clusters.iter().enumerate() {
            self.cluster(&aliases[i], cluster)
                .map_err(|e| format!("spec.clusters[{i}] ({}): {e}", aliases[i]))?;
        }
        let mut sources = Vec::new();
        for (i, mirror) in mirrors.iter().enumerate() {
            let source = self
                .mirror(mirror, &aliases)
                .map_err(|e| format!("spec.mirrors[{i}]: {e}"))?;
            if !sources.contains(&source) {
                sources.push(source);
            }
        }
        if let Some(key) = str_at(&spec["rack"], "topologyKey") {
            self.providers.insert(
                "env".into(),
                "org.apache.kafka.common.config.provider.EnvVarConfigProvider".into(),
            );
            self.lines.push(String::new());
            self.comment(&format!(
                "spec.rack (topologyKey {key}): fetch from the nearest replica (KIP-392); set \
                 STRAIT_CLIENT_RACK to the node's {key}"
            ));
            for source in &sources {
                self.set(
                    &format!("{source}.consumer.client.rack"),
                    "${env:STRAIT_CLIENT_RACK}",
                );
            }
            self.note(format!(
                "spec.rack: the source consumers' client.rack comes from the environment \
                 variable STRAIT_CLIENT_RACK; set it to the node's `{key}` label in the pod"
            ));
        }
        if let Some(target) = str_at(spec, "connectCluster") {
            self.note(format!(
                "spec.connectCluster ({target}): strait needs no Kafka Connect cluster; nothing \
                 of MM2's Connect topics (mm2-configs, -offsets, -status) is used"
            ));
        }
        if let Some(replicas) = str_at(spec, "replicas").filter(|r| r != "1") {
            self.note(format!(
                "spec.replicas ({replicas}): run one strait process per configuration; two \
                 would each mirror every flow"
            ));
        }
        if let Yaml::Hash(map) = spec {
            for (key, _) in map {
                let key = key.as_str().unwrap_or_default();
                if DEPLOYMENT_KEYS.contains(&key) {
                    self.note(format!(
                        "spec.{key}: a Kubernetes deployment setting, not part of the \
                         configuration; set it on strait's own Deployment"
                    ));
                } else if !["clusters", "mirrors", "connectCluster", "replicas", "rack"]
                    .contains(&key)
                {
                    self.note(format!(
                        "spec.{key}: not known to this converter; not carried over"
                    ));
                }
            }
        }
        Ok(())
    }

    fn cluster(&mut self, alias: &str, cluster: &Yaml) -> Result<(), String> {
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
            self.trust(alias, &cluster["tls"]["trustedCertificates"], "tls")?;
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

    /// `trustedCertificates` (of `tls`, or of OAuth's `tlsTrustedCertificates`) as the files
    /// they are mounted as: the keys of `prefix`.
    fn trust(&mut self, alias: &str, certificates: &Yaml, what: &str) -> Result<(), String> {
        let Yaml::Array(list) = certificates else {
            // No certificates: the system's CAs, as Strimzi's default.
            return Ok(());
        };
        let mut files = Vec::new();
        for (i, entry) in list.iter().enumerate() {
            let secret = str_at(entry, "secretName")
                .ok_or(format!("{what}.trustedCertificates[{i}]: no secretName"))?;
            let Some(certificate) = str_at(entry, "certificate") else {
                return Err(format!(
                    "{what}.trustedCertificates[{i}]: a `pattern` cannot be turned into file \
                     names; name the file with `certificate` (for example ca.crt)"
                ));
            };
            files.push((secret, certificate));
        }
        match &files[..] {
            [] => {}
            [(secret, certificate)] => {
                self.set(&format!("{alias}.ssl.truststore.type"), "PEM");
                let path = self.secret_file(secret, certificate);
                self.set(&format!("{alias}.ssl.truststore.location"), &path);
            }
            several => {
                self.set(&format!("{alias}.ssl.truststore.type"), "PEM");
                let texts: Vec<String> = several.iter().map(|(s, c)| self.secret(s, c)).collect();
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
                    let certificate = str_at(one, "certificate").ok_or(
                        "authentication.tlsTrustedCertificates[0]: name the file with `certificate`",
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

    /// One mirror; returns its source alias.
    fn mirror(&mut self, mirror: &Yaml, aliases: &[String]) -> Result<String, String> {
        let source = str_at(mirror, "sourceCluster").ok_or("no sourceCluster")?;
        let target = str_at(mirror, "targetCluster").ok_or("no targetCluster")?;
        for alias in [&source, &target] {
            if !aliases.contains(alias) {
                return Err(format!("cluster `{alias}` is not in spec.clusters"));
            }
        }
        if source == target {
            return Err(format!(
                "sourceCluster and targetCluster are both `{source}`"
            ));
        }
        let flow = format!("{source}->{target}");
        self.lines.push(String::new());
        self.comment(&format!("mirror {flow}"));
        self.set(&format!("{flow}.enabled"), "true");
        for (field, deprecated, key) in [
            ("topicsPattern", None, "topics"),
            (
                "topicsExcludePattern",
                Some("topicsBlacklistPattern"),
                "topics.exclude",
            ),
            ("groupsPattern", None, "groups"),
            (
                "groupsExcludePattern",
                Some("groupsBlacklistPattern"),
                "groups.exclude",
            ),
        ] {
            let value =
                str_at(mirror, field).or_else(|| deprecated.and_then(|d| str_at(mirror, d)));
            if let Some(value) = value {
                self.set(&format!("{flow}.{key}"), &value);
            }
        }
        let connector = &mirror["sourceConnector"];
        if let Some(tasks) = str_at(connector, "tasksMax") {
            self.set(&format!("{flow}.tasks.max"), &tasks);
        }
        let mut written: BTreeMap<String, String> = BTreeMap::new();
        for (name, present_or) in [
            ("sourceConnector", None),
            ("checkpointConnector", Some("emit.checkpoints.enabled")),
            ("heartbeatConnector", Some("emit.heartbeats.enabled")),
        ] {
            let connector = &mirror[name];
            if matches!(connector, Yaml::BadValue | Yaml::Null) {
                if let Some(key) = present_or {
                    self.comment(&format!("no {name} in the resource: Strimzi runs none"));
                    self.set(&format!("{flow}.{key}"), "false");
                }
                continue;
            }
            if let Some(state) = str_at(connector, "state").filter(|s| s != "running") {
                self.note(format!(
                    "{flow}: {name}.state is `{state}`; strait runs the flow (set \
                     {flow}.enabled = false to keep it off)"
                ));
            }
            if let Yaml::Hash(config) = &connector["config"] {
                for (key, value) in config {
                    let key = key.as_str().unwrap_or_default().to_owned();
                    let value =
                        scalar(value).ok_or(format!("{name}.config.{key}: not a single value"))?;
                    match written.get(&key) {
                        Some(earlier) if *earlier == value => {}
                        Some(earlier) => self.note(format!(
                            "{flow}: {name}.config.{key} = {value} differs from an earlier \
                             connector's {earlier}; strait has one value per flow and keeps \
                             {earlier}"
                        )),
                        None => {
                            self.set(&format!("{flow}.{key}"), &value);
                            written.insert(key, value);
                        }
                    }
                }
            }
        }
        Ok(source)
    }
}

/// A key's value as text: strings, numbers and booleans.
fn str_at(node: &Yaml, key: &str) -> Option<String> {
    scalar(&node[key])
}

fn scalar(node: &Yaml) -> Option<String> {
    match node {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// `{secretName, <key field>}`.
fn secret_ref(node: &Yaml, key_field: &str) -> Option<(String, String)> {
    Some((str_at(node, "secretName")?, str_at(node, key_field)?))
}

/// Aliases become parts of keys (`A.bootstrap.servers`, `A->B.enabled`).
fn check_alias(alias: &str) -> Result<(), String> {
    if alias.is_empty()
        || alias.contains(['=', ':', ' ', '>', '\\', '#', '!'])
        || alias.contains("->")
    {
        return Err(format!(
            "alias `{alias}` cannot be used as a cluster alias in a properties file"
        ));
    }
    Ok(())
}

/// A value as a properties file needs it: backslashes and line ends escaped, a leading blank
/// kept.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for (i, ch) in value.chars().enumerate() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            ' ' if i == 0 => out.push_str("\\ "),
            c => out.push(c),
        }
    }
    out
}

/// A JAAS option value inside double quotes.
fn jaas_escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"")
}
