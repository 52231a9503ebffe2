//! A set of Apache Kafka brokers started by `scripts/test-broker start`, each a single-node KRaft
//! cluster on loopback with its data on disk; stopped on drop. [`crate::Clusters`] and
//! [`crate::SecureBroker`] are two shapes of it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::clusters::{Broker, ClusterOptions};
use crate::env;

#[derive(Debug)]
pub(crate) struct BrokerSet {
    pub(crate) brokers: Vec<Broker>,
    pub(crate) dir: PathBuf,
}

impl BrokerSet {
    /// Formats and starts one cluster per name with `options`, and waits until each is up.
    pub(crate) fn start(prefix: &str, names: &[&str], options: &ClusterOptions) -> BrokerSet {
        env::require_kafka();
        let dir = env::unique_dir(prefix);
        let script = env::scripts_dir().join("test-broker");
        let mut command = Command::new("bash");
        command
            .arg(&script)
            .arg("start")
            .arg("--dir")
            .arg(&dir)
            .arg("--parent")
            .arg(std::process::id().to_string());
        for name in names {
            command.arg("--name").arg(name);
        }
        if !options.properties.is_empty() {
            let props = dir.join("extra.properties");
            let text: String = options
                .properties
                .iter()
                .map(|(k, v)| format!("{k}={}\n", escape_property(v)))
                .collect();
            std::fs::write(&props, text)
                .unwrap_or_else(|e| panic!("cannot write {}: {e}", props.display()));
            command.arg("--props").arg(props);
        }
        for arg in &options.format_args {
            command.arg("--format-arg").arg(arg);
        }
        for option in &options.jvm_options {
            command.arg("--jvm-opt").arg(option);
        }
        let output = command
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        if !output.status.success() {
            panic!(
                "{} start failed ({}):\n{}{}",
                script.display(),
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let brokers = read_brokers(&dir, names);
        BrokerSet { brokers, dir }
    }

    /// `scripts/test-broker COMMAND --dir DIR --which NAME EXTRA...`, then the broker's pid
    /// read again.
    pub(crate) fn run_one(&mut self, command: &str, name: &str, extra: &[&str]) {
        let script = env::scripts_dir().join("test-broker");
        let output = Command::new("bash")
            .arg(&script)
            .arg(command)
            .arg("--dir")
            .arg(&self.dir)
            .arg("--which")
            .arg(name)
            .args(extra)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        if !output.status.success() {
            panic!(
                "{} {command} --which {name} failed ({}):\n{}{}",
                script.display(),
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let env_file = self.dir.join("clusters.env");
        let text = read_env_file(&env_file);
        let key = format!("{}_PID", name.to_uppercase());
        if let Some(pid) = parse_env(&text)
            .get(key.as_str())
            .and_then(|v| v.parse().ok())
        {
            for broker in &mut self.brokers {
                if broker.name == name {
                    broker.pid = pid;
                }
            }
        }
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for BrokerSet {
    fn drop(&mut self) {
        // Killed, not shut down: the data is thrown away, and a controlled shutdown costs
        // seconds per broker.
        env::stop_with_script("test-broker", &self.dir, &["--grace", "0"]);
        if std::thread::panicking() {
            for broker in &self.brokers {
                eprintln!(
                    "strait-testkit: last warnings and errors in {} ({}):\n{}",
                    broker.log.display(),
                    broker.name,
                    broker.log_problems(15)
                );
            }
            eprintln!("strait-testkit: kept {}", self.dir.display());
        } else if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            eprintln!("strait-testkit: cannot remove {}: {e}", self.dir.display());
        }
    }
}

/// A value for a Java properties file: backslashes and line breaks escaped, so a PEM block or a
/// JAAS line stays one property.
fn escape_property(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\r', "\\r")
}

/// The brokers `names` recorded in `DIR/clusters.env` by `scripts/test-broker start`.
pub(crate) fn read_brokers(dir: &Path, names: &[&str]) -> Vec<Broker> {
    let env_file = dir.join("clusters.env");
    let text = read_env_file(&env_file);
    let vars = parse_env(&text);
    names
        .iter()
        .map(|name| {
            let prefix = name.to_uppercase();
            let get = |key: &str| {
                vars.get(format!("{prefix}_{key}").as_str())
                    .copied()
                    .unwrap_or_else(|| panic!("{} has no {prefix}_{key}", env_file.display()))
            };
            Broker {
                name: (*name).to_owned(),
                bootstrap: get("BOOTSTRAP").to_owned(),
                pid: get("PID")
                    .parse()
                    .unwrap_or_else(|e| panic!("{prefix}_PID in {}: {e}", env_file.display())),
                log: dir.join(format!("{name}.log")),
            }
        })
        .collect()
}

fn read_env_file(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// `KEY=VALUE` lines; a later line wins.
fn parse_env(text: &str) -> HashMap<&str, &str> {
    text.lines()
        .filter_map(|line| line.split_once('='))
        .collect()
}
