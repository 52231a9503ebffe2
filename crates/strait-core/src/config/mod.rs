//! strait's configuration: an MM2 `.properties` file, read as MirrorMaker 2 reads it, into typed
//! clusters and flows (`docs/design.md` §6, `docs/mm2-behaviour.md` §1.6–§1.10).
//!
//! An existing MM2 file runs unchanged: keys resolve as MM2's `MirrorMakerConfig` resolves them
//! (`S->T.<key>` over top-level `<key>` over MM2's default; client settings per cluster and role,
//! see [`client`]). strait's own keys start with `strait.`. A value that is missing or malformed
//! stops start-up with a [`ConfigError`] naming the file, line and key; keys strait does not use
//! become [`ConfigWarning`]s for the caller to log once. `docs/configuration.md` lists every key.
//!
//! ```
//! let cfg = strait_core::config::StraitConfig::parse(
//!     "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n",
//!     "mm2.properties",
//! )
//! .unwrap();
//! assert_eq!(cfg.flows[0].remote_topic("orders"), "A.orders");
//! ```

pub mod catalogue;
pub mod client;
mod error;
mod flowkey;
pub mod jaas;
mod keys;
mod loops;
mod model;
mod pair;
pub mod properties;
mod providers;
mod resolve;
mod secret;
pub mod security;

pub use security::ClientRefusal;

use std::path::{Path, PathBuf};

pub use client::{ClientProps, ClientSettings, KeyOrigin, Role, SecurityProtocol, Side};
pub use error::{ConfigError, ConfigErrorReason, ConfigWarning, LoopFound, WarningKind};
pub use model::{
    ClusterAlias, ClusterConfig, FlowConfig, HeartbeatEmitter, OffsetSyncsLocation, StartPosition,
    UseDefaultsFrom, WorkersConfig,
};
pub use secret::{is_secret_key, ClientValue, Secret};

/// `strait.max.bytes.in.flight` default: 64 MiB per flow.
pub const MAX_BYTES_IN_FLIGHT_DEFAULT: u64 = 64 * 1024 * 1024;

/// A whole config: the clusters, the enabled flows, the heartbeat emitters, and what to warn
/// about.
#[derive(Debug, Clone)]
pub struct StraitConfig {
    /// The file it was read from, for messages.
    pub path: PathBuf,
    /// Every cluster of `clusters`, in the order listed.
    pub clusters: Vec<ClusterConfig>,
    /// Every enabled flow (`S->T.enabled = true`, or a top-level `enabled = true`), ordered by
    /// source then target as `clusters` lists them. Never empty.
    pub flows: Vec<FlowConfig>,
    /// Heartbeat writers, as MM2 runs them: one per ordered pair of clusters with
    /// `emit.heartbeats.enabled`, enabled flow or not (see [`HeartbeatEmitter`]).
    pub heartbeats: Vec<HeartbeatEmitter>,
    /// Keys worth a warning (unknown, unused, deprecated, duplicated), by line. Log each once.
    pub warnings: Vec<ConfigWarning>,
}

impl StraitConfig {
    /// Reads and resolves the file at `path`.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| ConfigError {
            path: path.to_owned(),
            line: None,
            key: None,
            reason: ConfigErrorReason::Io(e),
        })?;
        Self::parse(&properties::decode(&bytes), path)
    }

    /// Resolves the text of a config file; `path` is only for messages.
    pub fn parse(text: &str, path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let props = properties::parse(text).map_err(|e| ConfigError {
            path: path.to_owned(),
            line: Some(e.line),
            key: e.key,
            reason: ConfigErrorReason::Syntax(e.reason),
        })?;
        Self::from_properties(&props, path)
    }

    /// Resolves already-parsed properties; `path` is only for messages.
    pub fn from_properties(
        props: &properties::Properties,
        path: &Path,
    ) -> Result<Self, ConfigError> {
        // `${provider:path:key}` references first, as MM2 transforms its raw properties.
        let props = providers::resolve(props, path)?;
        resolve(&props, path)
    }

    /// The warning `key` earns in a file whose `clusters` are `aliases`, as
    /// [`StraitConfig::warnings`] gives it (duplicates aside): `None` for a key strait uses.
    /// `strait check` classifies every key of a file with it, even a file strait refuses.
    pub fn key_warning(key: &str, aliases: &[String]) -> Option<WarningKind> {
        keys::classify(key, aliases)
    }

    /// Why strait's client does not act on client key `key` of `role` (given without prefixes,
    /// e.g. `linger.ms` for `B.producer.linger.ms`), though MM2 would hand it to its Java
    /// client; `None` when strait acts on it.
    pub fn client_key_unused(role: Role, key: &str) -> Option<&'static str> {
        keys::client_key_unused(role, key)
    }

    /// The client and client key that `key` sets, in a file whose `clusters` are `aliases`:
    /// `(Producer, "linger.ms")` for `B.producer.linger.ms` or `A->B.producer.linger.ms`.
    pub fn client_key_of<'a>(key: &'a str, aliases: &[String]) -> Option<(Role, &'a str)> {
        keys::client_key_of(key, aliases)
    }

    /// The key catalogue's entry (`catalogue.rs`) for `key` as written in a file whose
    /// `clusters` are `aliases`; `None` for keys it does not hold.
    pub fn key_definition(key: &str, aliases: &[String]) -> Option<&'static catalogue::KeyDef> {
        keys::definition(key, aliases)
    }

    /// The cluster called `alias`.
    pub fn cluster(&self, alias: &str) -> Option<&ClusterConfig> {
        self.clusters.iter().find(|c| c.alias.as_str() == alias)
    }

    /// The settings of `flow`'s `role` client on `side`: the flow's overrides
    /// (`S->T.consumer.*`) under the cluster's settings, as MM2 merges them. Empty when the
    /// flow's clusters are not in this config.
    pub fn client_props(&self, flow: &FlowConfig, side: Side, role: Role) -> ClientProps {
        let alias = match side {
            Side::Source => &flow.source,
            Side::Target => &flow.target,
        };
        match self.cluster(alias.as_str()) {
            Some(cluster) => flow.client_overrides.overlaid_on(&cluster.client, role),
            None => ClientProps::default(),
        }
    }
}

/// Resolves `props`, read from `path`, into a config.
fn resolve(props: &properties::Properties, path: &Path) -> Result<StraitConfig, ConfigError> {
    let mut r = resolve::Resolver::new(props, path);
    r.read_clusters()?;
    r.check_unsupported()?;
    r.check_flow_keys()?;
    r.check_strait_keys()?;
    let clusters = r
        .aliases()
        .iter()
        .map(|alias| r.cluster(alias))
        .collect::<Result<Vec<_>, _>>()?;
    let mut flows = Vec::new();
    let mut heartbeats = Vec::new();
    for source in r.aliases() {
        for target in r.aliases().iter().filter(|t| *t != source) {
            let (flow, heartbeat) = pair::pair(&r, source, target)?;
            flows.extend(flow);
            heartbeats.extend(heartbeat);
        }
    }
    if flows.is_empty() {
        return Err(r.error(None, None, ConfigErrorReason::NoFlowEnabled));
    }
    r.check_workers_groups(&flows)?;
    loops::check(&flows, &clusters).map_err(|reason| r.error(None, None, reason))?;
    Ok(StraitConfig {
        path: path.to_owned(),
        clusters,
        flows,
        heartbeats,
        warnings: r.warnings(),
    })
}
