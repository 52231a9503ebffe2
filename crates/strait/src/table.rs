//! Text tables for the plans and apply reports (`plan.rs`, `apply.rs`): columns as wide as
//! their widest cell, numbers right-aligned, the last column free text.

/// An optional offset for a table.
pub(crate) fn cell(offset: Option<i64>) -> String {
    offset.map_or_else(|| "-".to_owned(), |o| o.to_string())
}

/// A text table: columns as wide as their widest cell; numbers right-aligned; the last
/// column free text.
pub(crate) struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    pub(crate) fn row(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    pub(crate) fn print(&self) {
        self.print_indented("");
    }

    pub(crate) fn print_indented(&self, indent: &str) {
        let columns = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        let mut numeric = vec![true; columns];
        for row in &self.rows {
            for (i, c) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(c.chars().count());
                numeric[i] &= c == "-" || c.parse::<i64>().is_ok();
            }
        }
        let line = |cells: &[String]| {
            let mut text = String::from(indent);
            for (i, c) in cells.iter().enumerate().take(columns) {
                let last = i + 1 == columns;
                if last {
                    text.push_str(c);
                } else if numeric[i] {
                    text.push_str(&format!("{c:>w$}  ", w = widths[i]));
                } else {
                    text.push_str(&format!("{c:<w$}  ", w = widths[i]));
                }
            }
            text.trim_end().to_owned()
        };
        println!("{}", line(&self.header));
        for row in &self.rows {
            println!("{}", line(row));
        }
    }
}
