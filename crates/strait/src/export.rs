//! `strait offsets export|import`: group offsets and their translations to a file (JSON, the
//! plan format; or CSV, one row per group partition) and back, for teams that keep offsets in
//! an external store. Import applies with the same checks as `failover apply`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use clap::{Args, ValueEnum};
use strait_core::config::StraitConfig;
use strait_core::offsets::plan::{self, ClusterRef, FailoverPlan, OffsetRow};

use crate::clusters::{bootstrap, client_config, connect_both, find_flow, narrowing};
use crate::failover::{apply_with, count, finish};

/// The columns of the CSV form, in order: the fields of [`OffsetRow`].
const CSV_HEADER: [&str; 16] = [
    "flow",
    "direction",
    "group",
    "topic",
    "partition",
    "remote_topic",
    "source_offset",
    "target_offset",
    "exact",
    "duplicates",
    "unreplicated",
    "missing_ahead",
    "committed_at_plan",
    "metadata",
    "blocked",
    "note",
];

/// A file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// The failover plan format.
    Json,
    /// One row per group partition, with a header line.
    Csv,
}

/// Arguments of `offsets export`.
#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    /// The MM2 properties file.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// The flow, as `A->B`.
    #[arg(long, value_name = "A->B")]
    flow: String,
    /// Only groups whose whole name matches (a comma-separated list of regexes, as `groups`).
    #[arg(long, value_name = "REGEX")]
    groups: Option<String>,
    /// `json` (the failover plan format) or `csv`.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    format: Format,
    /// Write to this file instead of standard output.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// Arguments of `offsets import`.
#[derive(Debug, Args)]
pub(crate) struct ImportArgs {
    /// The file `offsets export` wrote (or one in its format).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// The MM2 properties file: where the clusters are.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// `json` or `csv`; default from the file's extension (`.csv` is CSV, anything else JSON).
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// Check everything, write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) async fn export(args: ExportArgs) -> anyhow::Result<()> {
    let config = StraitConfig::load(&args.config)?;
    let flow = find_flow(&config, &args.flow)?;
    let narrow = narrowing(args.groups.as_deref())?;
    let (source, target) = connect_both(&config, flow).await?;
    let plan = plan::plan_failover(&source, &target, flow, narrow.as_ref()).await?;
    let text = match args.format {
        Format::Json => format!("{}\n", plan.to_json()),
        Format::Csv => to_csv(&plan.rows())?,
    };
    match &args.out {
        Some(path) => {
            std::fs::write(path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            let (partitions, _) = plan.counts();
            eprintln!(
                "{}, {} written to {}",
                count(plan.groups.len(), "group"),
                count(partitions, "partition"),
                path.display()
            );
        }
        None => print!("{text}"),
    }
    Ok(())
}

pub(crate) async fn import(args: ImportArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let format = args.format.unwrap_or_else(|| format_of(&args.file));
    let config = StraitConfig::load(&args.config)?;
    let plan = match format {
        Format::Json => {
            FailoverPlan::from_json(&text).with_context(|| args.file.display().to_string())?
        }
        Format::Csv => {
            let rows = from_csv(&text).with_context(|| args.file.display().to_string())?;
            let Some(first) = rows.first() else {
                bail!("{} has no rows", args.file.display());
            };
            let flow = find_flow(&config, &first.flow)?;
            let cluster = |alias: &str| -> anyhow::Result<ClusterRef> {
                Ok(ClusterRef {
                    alias: alias.to_owned(),
                    bootstrap_servers: bootstrap(&config, alias)?,
                })
            };
            FailoverPlan::from_rows(
                rows,
                flow,
                cluster(flow.source.as_str())?,
                cluster(flow.target.as_str())?,
            )
            .with_context(|| args.file.display().to_string())?
        }
    };
    let flow = find_flow(&config, &plan.flow)?;
    let report = apply_with(
        &plan,
        client_config(&config, flow.source.as_str())?,
        client_config(&config, flow.target.as_str())?,
        args.dry_run,
        // An offsets file may come from elsewhere and not know the destination's offsets when
        // it was made: only a group ahead of the file is refused.
        false,
    )
    .await?;
    finish(&report, args.json)
}

fn format_of(path: &Path) -> Format {
    match path.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("csv") => Format::Csv,
        _ => Format::Json,
    }
}

/// Rows as CSV (RFC 4180 quoting), with the header even when there are none.
fn to_csv(rows: &[OffsetRow]) -> anyhow::Result<String> {
    let mut writer = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    writer.write_record(CSV_HEADER)?;
    for row in rows {
        writer.serialize(row)?;
    }
    let bytes = writer.into_inner().context("writing CSV")?;
    Ok(String::from_utf8(bytes)?)
}

/// Rows from CSV with a header line; columns are found by name, in any order.
fn from_csv(text: &str) -> anyhow::Result<Vec<OffsetRow>> {
    let mut reader = csv::ReaderBuilder::new().from_reader(text.as_bytes());
    let mut rows = Vec::new();
    for row in reader.deserialize::<OffsetRow>() {
        rows.push(row.map_err(|e| {
            let line = e.position().map(|p| p.line()).unwrap_or_default();
            anyhow::anyhow!("line {line}: {e}")
        })?);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use strait_core::offsets::plan::Direction;

    fn row(metadata: Option<&str>, note: &str) -> OffsetRow {
        OffsetRow {
            flow: "A->B".into(),
            direction: Direction::Failover,
            group: "billing, \"eu\"".into(),
            topic: "orders".into(),
            partition: 3,
            remote_topic: "A.orders".into(),
            source_offset: Some(1000),
            target_offset: None,
            exact: false,
            duplicates: 0,
            unreplicated: 4,
            missing_ahead: 0,
            committed_at_plan: Some(7),
            metadata: metadata.map(str::to_owned),
            blocked: String::new(),
            note: note.into(),
        }
    }

    #[test]
    fn csv_round_trips_quotes_commas_newlines_and_empty_cells() {
        let rows = vec![
            row(Some("app=billing,v=\"2\"\nline two"), "a, b"),
            row(None, ""),
        ];
        let text = to_csv(&rows).unwrap();
        assert!(text.starts_with(&CSV_HEADER.join(",")), "{text}");
        assert_eq!(from_csv(&text).unwrap(), rows);
    }

    #[test]
    fn the_header_names_every_field_in_order() {
        let mut writer = csv::Writer::from_writer(Vec::new());
        writer.serialize(row(None, "")).unwrap();
        let text = String::from_utf8(writer.into_inner().unwrap()).unwrap();
        assert_eq!(text.lines().next().unwrap(), CSV_HEADER.join(","));
    }

    #[test]
    fn a_bad_cell_names_its_line() {
        let text = format!(
            "{}\nA->B,failover,g,orders,x,A.orders,1,1,true,0,0,0,,,,\n",
            CSV_HEADER.join(",")
        );
        let err = from_csv(&text).unwrap_err().to_string();
        assert!(err.starts_with("line 2:"), "{err}");
    }
}
