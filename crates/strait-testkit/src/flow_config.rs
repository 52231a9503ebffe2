//! MM2 config files for a flow between the test clusters, as the tests that run strait on
//! them write them.

use std::path::{Path, PathBuf};

use crate::Clusters;

/// An MM2 config with the flow `A->B` between the test clusters, plus `extra` lines.
pub fn write_config(clusters: &Clusters, name: &str, extra: &str) -> PathBuf {
    write_flow_config(clusters, ("A", "B"), name, extra)
}

/// An MM2 config with the flow `a->b` from the source test cluster (alias `a`) to the target
/// one (alias `b`), plus `extra` lines.
pub fn write_flow_config(
    clusters: &Clusters,
    (a, b): (&str, &str),
    name: &str,
    extra: &str,
) -> PathBuf {
    let text = flow_properties(
        (a, &clusters.source.bootstrap),
        (b, &clusters.target.bootstrap),
        extra,
    );
    write_properties(clusters.dir(), name, &text)
}

/// The MM2 properties of one flow `a->b` between two clusters, each given as (alias, bootstrap
/// servers), with every topic strait creates at replication factor 1, then `extra` lines.
pub fn flow_properties(
    (a, a_servers): (&str, &str),
    (b, b_servers): (&str, &str),
    extra: &str,
) -> String {
    format!(
        "clusters = {a}, {b}\n\
         {a}.bootstrap.servers = {a_servers}\n\
         {b}.bootstrap.servers = {b_servers}\n\
         {a}->{b}.enabled = true\n\
         replication.factor = 1\n\
         checkpoints.topic.replication.factor = 1\n\
         offset-syncs.topic.replication.factor = 1\n\
         heartbeats.topic.replication.factor = 1\n\
         {extra}\n"
    )
}

/// Writes `text` to the file `name` in `dir`; its path.
pub fn write_properties(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write config");
    path
}
