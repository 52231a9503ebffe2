//! How every command prints numbers for people, so `strait status`, `strait mirror` and the
//! plans print a size, a count or a duration the same way: counts with thousands separators,
//! sizes in binary units (`KiB`, `MiB`: the units of Kafka's byte settings), durations short.

use std::time::Duration;

/// `12`, `1,204`, `3,000,000`.
pub(crate) fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// [`count`] of a number that may be negative.
pub(crate) fn count_signed(n: i64) -> String {
    if n < 0 {
        format!("-{}", count(n.unsigned_abs()))
    } else {
        count(n.unsigned_abs())
    }
}

/// `n thing` or `n things`.
pub(crate) fn things(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

/// A rate per second: whole above 100 (`4,100`), one decimal below (`12.5`).
pub(crate) fn rate(per_second: f64) -> String {
    // A rate is never below 0; and an empty sum of `f64` is -0.0, printed `-0.0`.
    let per_second = if per_second > 0.0 { per_second } else { 0.0 };
    if per_second >= 100.0 {
        count(per_second.round() as u64)
    } else {
        format!("{per_second:.1}")
    }
}

/// `text` with its control characters escaped (`\u{1b}`, `\t`), line ends kept: for text that
/// echoes what a file or a cluster holds (a key name, a value) to a terminal, where an escape
/// sequence would otherwise move the cursor, recolour or clear the screen.
pub(crate) fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && c != '\n' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `512 B`, `1.5 KiB`, `3.0 MiB`.
pub(crate) fn bytes(n: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = if n > 0.0 { n } else { 0.0 };
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value:.0} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// `0s`, `42s`, `3m05s`, `2h03m`, `4d02h`.
pub(crate) fn duration(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86400, s % 86400 / 3600),
    }
}

/// [`duration`], with milliseconds below a second: `850ms`, `9s`, `2m05s`.
pub(crate) fn elapsed(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        duration(d.as_secs() as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_at_a_glance() {
        assert_eq!(count(0), "0");
        assert_eq!(count(1204), "1,204");
        assert_eq!(count(3_000_000), "3,000,000");
        assert_eq!(count_signed(-1204), "-1,204");
        assert_eq!(things(1, "group"), "1 group");
        assert_eq!(things(2, "group"), "2 groups");
        assert_eq!(rate(4100.4), "4,100");
        assert_eq!(rate(12.54), "12.5");
        // Never a negative zero (an empty sum of rates is -0.0), nor a negative rate.
        assert_eq!(rate(-0.0), "0.0");
        assert_eq!(rate(-0.04), "0.0");
        assert_eq!(bytes(-0.0), "0 B");
        assert_eq!(printable("a\u{1b}[2J\tb\nc"), "a\\u{1b}[2J\\tb\nc");
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(1536.0), "1.5 KiB");
        assert_eq!(bytes(3.0 * 1024.0 * 1024.0), "3.0 MiB");
        assert_eq!(duration(185.0), "3m05s");
        assert_eq!(duration(7380.0), "2h03m");
        assert_eq!(elapsed(Duration::from_millis(850)), "850ms");
        assert_eq!(elapsed(Duration::from_secs(125)), "2m05s");
    }
}
