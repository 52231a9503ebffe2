//! `strait config`: configuration tools (`from-strimzi`: a Strimzi `KafkaMirrorMaker2` resource
//! into the MM2 file strait runs, converted by `strimzi/`).

use std::process::ExitCode;

use anyhow::Context as _;

use crate::strimzi;

/// `strait config` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct ConfigArgs {
    #[command(subcommand)]
    command: ConfigCommand,
}

/// `strait config` subcommands.
#[derive(Debug, clap::Subcommand)]
enum ConfigCommand {
    /// Turn a Strimzi KafkaMirrorMaker2 resource (YAML, kafka.strimzi.io/v1 with spec.target
    /// and each mirror's source, or v1beta2 in either layout) into the MM2 properties file
    /// strait runs: clusters, TLS (trusted certificates by file or pattern) and
    /// authentication, mirrors with their topic and group patterns, tasksMax, the connectors'
    /// settings and rack awareness. Secrets are never copied: the file reads them at run time
    /// from the Kubernetes Secrets mounted under --secrets-dir. What is not carried over is
    /// listed on stderr (docs/strimzi.md). Exits 1 when the resource cannot be converted, or
    /// when strait would refuse the file it converts to (the file is written, the refused keys
    /// listed), as `strait check` would.
    #[command(after_help = "\
Examples:
  # The MM2 file strait runs, reading Secrets where the pod mounts
  # them (/etc/strait/secrets/<secret>/<key>):
  strait config from-strimzi kmm2.yaml --out mm2.properties
  # Then what strait makes of it:
  strait check --config mm2.properties")]
    FromStrimzi(FromStrimziArgs),
}

/// Arguments of `config from-strimzi`.
#[derive(Debug, clap::Args)]
struct FromStrimziArgs {
    /// The resource (a YAML file holding one KafkaMirrorMaker2).
    #[arg(value_name = "FILE")]
    file: std::path::PathBuf,
    /// Where the pod mounts each Secret as a directory (`<dir>/<secret name>/<key>`).
    #[arg(long, value_name = "DIR", default_value = "/etc/strait/secrets")]
    secrets_dir: String,
    /// Write the properties here instead of to stdout.
    #[arg(long, value_name = "FILE")]
    out: Option<std::path::PathBuf>,
}

/// Runs `strait config`.
pub(crate) async fn run(args: ConfigArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        ConfigCommand::FromStrimzi(args) => from_strimzi(&args),
    }
}

/// `strait config from-strimzi`: the resource converted, what is not carried over noted on
/// stderr.
fn from_strimzi(args: &FromStrimziArgs) -> anyhow::Result<ExitCode> {
    let (file, secrets_dir) = (&args.file, &args.secrets_dir);
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let conversion = strimzi::convert(&text, &file.display().to_string(), secrets_dir)
        .map_err(anyhow::Error::msg)?;
    match &args.out {
        Some(path) => std::fs::write(path, &conversion.properties)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => print!("{}", conversion.properties),
    }
    for note in &conversion.notes {
        eprintln!("note: {note}");
    }
    let refused = refusals(&conversion.properties, file);
    if refused.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    for refusal in &refused {
        eprintln!("error: {refusal}");
    }
    eprintln!(
        "error: strait would refuse this file ({} {}, as `strait check` says): change the \
         resource and convert it again, or correct the file",
        refused.len(),
        if refused.len() == 1 { "key" } else { "keys" }
    );
    Ok(ExitCode::FAILURE)
}

/// What strait would refuse in the converted `properties` (`strait check`'s verdict, from the
/// same `StraitConfig::from_properties`), each `key: reason`. A secret is read at run time
/// from the pod's mounted Secrets, which the machine converting seldom has: every
/// `${provider:...}` reference is taken as a placeholder, and a key whose value held one is
/// not judged (its refusal could be the placeholder's).
fn refusals(properties: &str, origin: &std::path::Path) -> Vec<String> {
    let props = match strait_core::config::properties::parse(properties) {
        Ok(props) => props,
        Err(e) => return vec![e.to_string()],
    };
    let mut remaining = strait_core::config::properties::Properties::default();
    for (key, p) in props.iter() {
        remaining.insert(key, without_references(&p.value), p.line);
    }
    let secret = |key: &str| props.get(key).is_some_and(|p| p.value.contains("${"));
    let mut refused = Vec::new();
    // Each pass takes away the key refused, as `strait check` does, to find the next.
    for _ in 0..=props.len() {
        let e = match strait_core::config::StraitConfig::from_properties(&remaining, origin) {
            Ok(_) => break,
            Err(e) => e,
        };
        match e.key.clone().filter(|k| remaining.get(k).is_some()) {
            Some(key) => {
                remaining.remove(&key);
                if !secret(&key) {
                    refused.push(format!("{key}: {}", e.reason));
                }
            }
            None => {
                refused.push(e.reason.to_string());
                break;
            }
        }
    }
    refused
}

/// `value` with each `${...}` config-provider reference replaced by a placeholder.
fn without_references(value: &str) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start..].find('}') else {
            break;
        };
        out.push_str(&rest[..start]);
        out.push_str("placeholder");
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    out
}
