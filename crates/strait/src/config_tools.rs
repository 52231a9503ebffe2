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
    /// listed on stderr (docs/strimzi.md).
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
    Ok(ExitCode::SUCCESS)
}
