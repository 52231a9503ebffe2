//! The CSV form of an offsets file (`strait offsets export --format csv`, and `import`): one row
//! per group partition, the fields of [`OffsetRow`], with a header line; and which form a file
//! is in.

use std::path::Path;

use anyhow::Context as _;
use clap::ValueEnum;
use strait_core::offsets::plan::OffsetRow;

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

impl Format {
    /// The form of `path` by its extension: `.csv` is CSV, anything else JSON.
    pub(crate) fn of(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("csv") => Format::Csv,
            _ => Format::Json,
        }
    }
}

/// Rows as CSV (RFC 4180 quoting), with the header even when there are none.
pub(crate) fn to_csv(rows: &[OffsetRow]) -> anyhow::Result<String> {
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
pub(crate) fn from_csv(text: &str) -> anyhow::Result<Vec<OffsetRow>> {
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
