//! `strait config`: configuration tools (`from-strimzi`: a Strimzi `KafkaMirrorMaker2` resource
//! into the MM2 file strait runs, converted by `strimzi/`).

use anyhow::Context as _;

use crate::strimzi;

/// `strait config` subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum ConfigCommand {
    /// Turn a Strimzi KafkaMirrorMaker2 resource (YAML, kafka.strimzi.io/v1 with spec.target
    /// and each mirror's source, or v1beta2 in either layout) into the MM2 properties file
    /// strait runs: clusters, TLS (trusted certificates by file or pattern) and
    /// authentication, mirrors with their topic and group patterns, tasksMax, the connectors'
    /// settings and rack awareness. Secrets are never copied: the file reads them at run time
    /// from the Kubernetes Secrets mounted under --secrets-dir. What is not carried over is
    /// listed on stderr (docs/strimzi.md).
    FromStrimzi {
        /// The resource (a YAML file holding one KafkaMirrorMaker2).
        #[arg(value_name = "FILE")]
        file: std::path::PathBuf,
        /// Where the pod mounts each Secret as a directory (`<dir>/<secret name>/<key>`).
        #[arg(long, value_name = "DIR", default_value = "/etc/strait/secrets")]
        secrets_dir: String,
        /// Write the properties here instead of to stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<std::path::PathBuf>,
    },
}

/// Runs `strait config`.
pub(crate) fn run(command: ConfigCommand) -> anyhow::Result<()> {
    match command {
        ConfigCommand::FromStrimzi {
            file,
            secrets_dir,
            out,
        } => from_strimzi(&file, &secrets_dir, out.as_deref()),
    }
}

fn from_strimzi(
    file: &std::path::Path,
    secrets_dir: &str,
    out: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let conversion = strimzi::convert(&text, &file.display().to_string(), secrets_dir)
        .map_err(anyhow::Error::msg)?;
    match out {
        Some(path) => std::fs::write(path, &conversion.properties)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => print!("{}", conversion.properties),
    }
    for note in &conversion.notes {
        eprintln!("note: {note}");
    }
    Ok(())
}
