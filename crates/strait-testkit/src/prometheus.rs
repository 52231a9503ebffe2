//! A Prometheus text page (`/metrics`) parsed into samples, for the tests that read strait's
//! metrics.

use std::collections::BTreeMap;

/// Samples of a Prometheus text page.
#[derive(Debug, Default)]
pub struct Metrics {
    /// The page as it was read.
    pub text: String,
    samples: Vec<(String, BTreeMap<String, String>, f64)>,
}

impl Metrics {
    /// The samples of `text`; lines that are not samples are skipped.
    pub fn parse(text: &str) -> Metrics {
        let mut samples = Vec::new();
        for line in text.lines() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels = labels
                .split(',')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.trim_matches('"').to_owned()))
                .collect();
            samples.push((name.to_owned(), labels, value));
        }
        Metrics {
            text: text.to_owned(),
            samples,
        }
    }

    /// Values of `name` whose labels include `labels`.
    pub fn values(&self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        self.samples
            .iter()
            .filter(|(n, l, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|(_, _, v)| *v)
            .collect()
    }

    /// The one value of `name` with `labels`, if there is exactly one.
    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        match self.values(name, labels).as_slice() {
            [v] => Some(*v),
            _ => None,
        }
    }

    /// The sum over every series of `name` with `labels`.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.values(name, labels).iter().sum()
    }
}
