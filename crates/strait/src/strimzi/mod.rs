//! `strait config from-strimzi`: a Strimzi `KafkaMirrorMaker2` resource turned into the MM2
//! `.properties` file strait runs, for operators moving off Strimzi's operator-run MM2
//! (`docs/strimzi.md`).
//!
//! Two layouts of the resource are read:
//! - **`kafka.strimzi.io/v1`** (and `v1beta2` with `spec.target`): `spec.target` is the one
//!   cluster every mirror writes to (and Kafka Connect's: its `groupId` and storage topics are
//!   noted, not used), each `spec.mirrors[].source` a source cluster; the aliases are all
//!   different, as Strimzi requires. v1 has no heartbeat connector, so its flows emit no
//!   heartbeats; a v1beta2 mirror may still name a `spec.clusters` entry in `sourceCluster`.
//! - **`kafka.strimzi.io/v1beta2`** with `spec.clusters` and `connectCluster` (deprecated by
//!   Strimzi, gone in v1): the clusters by alias, each mirror's `sourceCluster` and
//!   `targetCluster` naming two of them.
//!
//! What maps to what (`cluster.rs` for one cluster):
//! - each cluster: `<alias>.bootstrap.servers`; `tls` (trusted certificates, by file name or
//!   `pattern`) and `authentication` (`tls`, `scram-sha-256`, `scram-sha-512`, `plain`,
//!   `oauth`) to `security.protocol`, `ssl.*` and `sasl.*`; `config` to `<alias>.<key>` (Kafka
//!   Connect's own worker keys are written commented out: strait has no Connect worker).
//! - each mirror: `<source>-><target>.enabled = true`, the topic and group patterns,
//!   `sourceConnector.tasksMax` as `tasks.max`, and the connectors' `config` as flow keys.
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

mod cluster;

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
    "plugin.",
];

/// v1's target cluster keys that name Kafka Connect's group and topics, with Connect's key.
const CONNECT_TARGET_FIELDS: [(&str, &str); 4] = [
    ("groupId", "group.id"),
    ("configStorageTopic", "config.storage.topic"),
    ("offsetStorageTopic", "offset.storage.topic"),
    ("statusStorageTopic", "status.storage.topic"),
];

/// The resource's API version: which layouts and connectors it can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    /// `kafka.strimzi.io/v1beta2`: `spec.clusters` or `spec.target`; a heartbeat connector.
    V1beta2,
    /// `kafka.strimzi.io/v1`: `spec.target` only, no heartbeat connector.
    V1,
}

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
        [] if docs
            .iter()
            .any(|d| str_at(d, "kind").as_deref() == Some("KafkaMirrorMaker")) =>
        {
            return Err(format!(
                "{origin}: a KafkaMirrorMaker resource is MirrorMaker 1, which strait does not \
                 run: strait reads MirrorMaker 2 settings only. Move the mirror to a \
                 KafkaMirrorMaker2 resource (its consumer's cluster a source, its producer's the \
                 target, its include pattern the mirror's topicsPattern), then convert that"
            ))
        }
        [] => return Err(format!("{origin}: no KafkaMirrorMaker2 resource in it")),
        _ => {
            return Err(format!(
                "{origin}: {} KafkaMirrorMaker2 resources; give one per file",
                resources.len()
            ))
        }
    };
    let name = str_at(&resource["metadata"], "name").unwrap_or_else(|| "(unnamed)".into());
    let api = match str_at(resource, "apiVersion").unwrap_or_default().as_str() {
        "kafka.strimzi.io/v1" => Api::V1,
        "kafka.strimzi.io/v1beta2" => Api::V1beta2,
        other => {
            return Err(format!(
                "{origin}: apiVersion `{other}`; this converter reads kafka.strimzi.io/v1 and \
                 kafka.strimzi.io/v1beta2"
            ))
        }
    };
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
    c.spec(spec, api)?;
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

    fn spec(&mut self, spec: &Yaml, api: Api) -> Result<(), String> {
        let Yaml::Array(mirrors) = &spec["mirrors"] else {
            return Err("spec.mirrors: missing or not a list".into());
        };
        let sources = if present(&spec["target"]) {
            self.target_layout(spec, mirrors, api)?
        } else if api == Api::V1 {
            return Err(
                "spec.target: missing; kafka.strimzi.io/v1 names the target cluster in \
                 spec.target and each mirror's source in spec.mirrors[].source (spec.clusters \
                 and connectCluster are v1beta2's)"
                    .into(),
            );
        } else {
            self.clusters_layout(spec, mirrors)?
        };
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
                } else if ![
                    "target",
                    "clusters",
                    "mirrors",
                    "connectCluster",
                    "replicas",
                    "rack",
                ]
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

    /// v1beta2's `spec.clusters` and `connectCluster`: clusters by alias, mirrors between
    /// any two of them. Returns the source aliases.
    fn clusters_layout(&mut self, spec: &Yaml, mirrors: &[Yaml]) -> Result<Vec<String>, String> {
        let Yaml::Array(clusters) = &spec["clusters"] else {
            return Err("spec.clusters: missing or not a list (or give spec.target)".into());
        };
        let aliases = aliases_of(clusters)?;
        self.set("clusters", &aliases.join(", "));
        for (i, cluster) in clusters.iter().enumerate() {
            self.cluster(&aliases[i], cluster)
                .map_err(|e| format!("spec.clusters[{i}] ({}): {e}", aliases[i]))?;
        }
        let mut sources = Vec::new();
        for (i, mirror) in mirrors.iter().enumerate() {
            let (source, target) =
                mirror_clusters(mirror, &aliases).map_err(|e| format!("spec.mirrors[{i}]: {e}"))?;
            self.mirror(mirror, &source, &target, Api::V1beta2)
                .map_err(|e| format!("spec.mirrors[{i}]: {e}"))?;
            if !sources.contains(&source) {
                sources.push(source);
            }
        }
        Ok(sources)
    }

    /// v1's `spec.target` and each mirror's `source` (in v1beta2, a mirror may instead name a
    /// `spec.clusters` entry in `sourceCluster`). Strimzi requires every alias to differ, so
    /// each mirror has its own source. Returns the source aliases.
    fn target_layout(
        &mut self,
        spec: &Yaml,
        mirrors: &[Yaml],
        api: Api,
    ) -> Result<Vec<String>, String> {
        let target_spec = &spec["target"];
        let target = str_at(target_spec, "alias").ok_or("spec.target: no alias")?;
        check_alias(&target).map_err(|e| format!("spec.target: {e}"))?;
        let listed = match (&spec["clusters"], api) {
            (Yaml::BadValue | Yaml::Null, _) => Vec::new(),
            (_, Api::V1) => {
                return Err(
                    "spec.clusters: not part of kafka.strimzi.io/v1; give each mirror's \
                     cluster in spec.mirrors[].source"
                        .into(),
                )
            }
            (Yaml::Array(clusters), Api::V1beta2) => {
                let aliases = aliases_of(clusters)?;
                aliases.into_iter().zip(clusters.iter()).collect()
            }
            _ => return Err("spec.clusters: not a list".into()),
        };
        let mut sources: Vec<(String, &Yaml, String)> = Vec::new();
        for (i, mirror) in mirrors.iter().enumerate() {
            let (alias, cluster, at) = mirror_source(mirror, &listed, &target)
                .map_err(|e| format!("spec.mirrors[{i}]: {e}"))?;
            if alias == target || sources.iter().any(|(a, _, _)| *a == alias) {
                return Err(format!(
                    "spec.mirrors[{i}]: alias `{alias}` is used twice; Strimzi requires the \
                     target's and each mirror's source alias to differ"
                ));
            }
            sources.push((alias, cluster, at));
        }
        let mut aliases: Vec<&str> = sources.iter().map(|(a, _, _)| a.as_str()).collect();
        aliases.push(&target);
        self.set("clusters", &aliases.join(", "));
        for (alias, cluster, at) in &sources {
            self.cluster(alias, cluster)
                .map_err(|e| format!("{at} ({alias}): {e}"))?;
        }
        self.cluster(&target, target_spec)
            .map_err(|e| format!("spec.target ({target}): {e}"))?;
        let mut connect = Vec::new();
        for (field, key) in CONNECT_TARGET_FIELDS {
            if let Some(value) = str_at(target_spec, field) {
                self.comment(&format!(
                    "Kafka Connect worker setting, not used by strait: {key} = {value}"
                ));
                connect.push(field);
            }
        }
        if !connect.is_empty() {
            self.note(format!(
                "spec.target.{}: Kafka Connect's group and topics; strait needs no Connect \
                 cluster, so none of them is used",
                connect.join(", ")
            ));
        }
        for (alias, _) in &listed {
            if !sources.iter().any(|(a, _, _)| a == alias) {
                self.note(format!(
                    "spec.clusters ({alias}): no mirror takes it as its source; not carried over"
                ));
            }
        }
        for (i, mirror) in mirrors.iter().enumerate() {
            self.mirror(mirror, &sources[i].0, &target, api)
                .map_err(|e| format!("spec.mirrors[{i}]: {e}"))?;
        }
        Ok(sources.into_iter().map(|(alias, _, _)| alias).collect())
    }

    /// One mirror from `source` to `target`: the flow's keys.
    fn mirror(
        &mut self,
        mirror: &Yaml,
        source: &str,
        target: &str,
        api: Api,
    ) -> Result<(), String> {
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
            if api == Api::V1 && name == "heartbeatConnector" {
                if present(connector) {
                    self.note(format!(
                        "{flow}: heartbeatConnector is not part of kafka.strimzi.io/v1 (Strimzi \
                         runs no heartbeat connector); not carried over"
                    ));
                }
                self.comment("kafka.strimzi.io/v1 has no heartbeat connector: Strimzi runs none");
                self.set(&format!("{flow}.emit.heartbeats.enabled"), "false");
                continue;
            }
            if !present(connector) {
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
        Ok(())
    }
}

/// Whether a field is given (`~` counts as not given, as in Kubernetes).
fn present(node: &Yaml) -> bool {
    !matches!(node, Yaml::BadValue | Yaml::Null)
}

/// The aliases of v1beta2's `spec.clusters`, each usable in keys and given once.
fn aliases_of(clusters: &[Yaml]) -> Result<Vec<String>, String> {
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
    Ok(aliases)
}

/// A v1beta2 mirror's `sourceCluster` and `targetCluster`, both in `aliases`.
fn mirror_clusters(mirror: &Yaml, aliases: &[String]) -> Result<(String, String), String> {
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
    Ok((source, target))
}

/// A mirror's source cluster in the target layout: its alias, its settings and where they
/// are in the resource. `source`, or v1beta2's `sourceCluster` naming an entry of `listed`
/// (`spec.clusters`); a `targetCluster`, if given, must be the target.
fn mirror_source<'a>(
    mirror: &'a Yaml,
    listed: &[(String, &'a Yaml)],
    target: &str,
) -> Result<(String, &'a Yaml, String), String> {
    if let Some(named) = str_at(mirror, "targetCluster").filter(|t| t != target) {
        return Err(format!(
            "targetCluster `{named}` is not the target cluster `{target}` (spec.target.alias)"
        ));
    }
    let source = &mirror["source"];
    if present(source) {
        if !matches!(source, Yaml::Hash(_)) {
            return Err("source: not a mapping".into());
        }
        let alias = str_at(source, "alias").ok_or("source: no alias")?;
        check_alias(&alias).map_err(|e| format!("source: {e}"))?;
        return Ok((alias, source, "source".into()));
    }
    match str_at(mirror, "sourceCluster") {
        Some(named) if !listed.is_empty() => listed
            .iter()
            .position(|(alias, _)| *alias == named)
            .map(|j| (named.clone(), listed[j].1, format!("spec.clusters[{j}]")))
            .ok_or(format!("sourceCluster `{named}` is not in spec.clusters")),
        _ => Err(
            "no source (the source cluster: alias, bootstrapServers, tls, authentication, \
             config)"
                .into(),
        ),
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
