//! Java `.properties` files, read exactly as `java.util.Properties.load` reads them, with the line
//! number of every key kept for error messages.
//!
//! The rules, from the JDK's `Properties.LineReader` and `loadConvert`:
//! - lines end at `\n`, `\r` or `\r\n`; a line whose first non-blank character is `#` or `!` is a
//!   comment, and blank lines are skipped;
//! - a line ending in an odd number of backslashes continues on the next one, whose leading
//!   blanks (space, tab, form feed) are dropped; a comment line never continues;
//! - the key ends at the first unescaped `=`, `:` or blank; blanks and at most one `=` or `:`
//!   after it are skipped, and the rest of the line is the value (trailing blanks kept);
//! - escapes: `\t` `\n` `\r` `\f`, `\uXXXX` (exactly four hex digits), and `\x` is `x` for any
//!   other `x` (so `\:` `\=` `\ ` `\\`);
//! - a key set twice keeps its last value;
//! - and the JDK's corner cases, kept: a line holding only `\` joins nothing and the next line
//!   starts afresh (it may be a comment), while a `\` (or `\` and `\n`) ending the input sets
//!   the empty key to the empty value.
//!
//! The state machine is a port of JDK 17's `LineReader.readLine` and is cross-checked against the
//! JDK by `tests/config_properties.rs`. Deliberate differences, all for files Java would
//! misread: bytes are decoded as UTF-8 when they are valid UTF-8 (Java's `load(InputStream)`
//! always uses ISO-8859-1, which turns UTF-8 text into mojibake; a file that is not UTF-8 is
//! still read as ISO-8859-1); a leading UTF-8 byte-order mark is dropped; and a `\u` escape that
//! leaves an unpaired UTF-16 surrogate is an error (a Rust string cannot hold one).

use indexmap::IndexMap;

/// One key's value and where it was set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Property {
    /// The value, escapes resolved.
    pub value: String,
    /// The 1-based line where the (last) assignment of the key starts.
    pub line: usize,
    /// The line of an earlier assignment that this one replaced, if any.
    pub replaced_line: Option<usize>,
}

/// The keys of a properties file, in the order they first appear.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Properties {
    entries: IndexMap<String, Property>,
}

impl Properties {
    /// The value and line of `key`.
    pub fn get(&self, key: &str) -> Option<&Property> {
        self.entries.get(key)
    }

    /// Every key with its value and line, in the order keys first appear.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Property)> {
        self.entries.iter().map(|(k, p)| (k.as_str(), p))
    }

    /// How many distinct keys.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Replaces the value of `key`, keeping its line (config providers resolve values in
    /// place). Does nothing when `key` is absent.
    pub(crate) fn set_value(&mut self, key: &str, value: String) {
        if let Some(p) = self.entries.get_mut(key) {
            p.value = value;
        }
    }

    /// Removes `key`, keeping the order of the others.
    pub fn remove(&mut self, key: &str) {
        self.entries.shift_remove(key);
    }

    /// Sets `key`, as a later line of the file would.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<String>, line: usize) {
        let key = key.into();
        let replaced_line = self.entries.get(&key).map(|p| p.line);
        self.entries.insert(
            key,
            Property {
                value: value.into(),
                line,
                replaced_line,
            },
        );
    }
}

/// A line Java itself would refuse (`IllegalArgumentException` from `Properties.load`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct SyntaxError {
    /// The 1-based line where the logical line starts.
    pub line: usize,
    /// The key, when the fault is in its value.
    pub key: Option<String>,
    /// What is wrong.
    pub reason: String,
}

/// Decodes a file's bytes: UTF-8 when valid (without a leading byte-order mark), else ISO-8859-1
/// as Java does.
pub fn decode(bytes: &[u8]) -> String {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_owned(),
        Err(_) => bytes.iter().map(|&b| char::from(b)).collect(),
    }
}

/// Parses the text of a properties file.
pub fn parse(text: &str) -> Result<Properties, SyntaxError> {
    let mut props = Properties::default();
    for logical in LogicalLines::new(text) {
        let (raw_key, raw_value) = split_key_value(&logical.chars);
        let key = unescape(raw_key).map_err(|reason| SyntaxError {
            line: logical.line,
            key: None,
            reason: format!("in a key: {reason}"),
        })?;
        let value = unescape(raw_value).map_err(|reason| SyntaxError {
            line: logical.line,
            key: Some(key.clone()),
            reason: format!("in the value: {reason}"),
        })?;
        props.insert(key, value, logical.line);
    }
    Ok(props)
}

/// A logical line: continuations joined, escapes still in place.
struct LogicalLine {
    chars: Vec<char>,
    line: usize,
}

struct LogicalLines<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    /// The 1-based number of the physical line being read.
    line: usize,
    /// Whether the last character read was `\r` (so a `\n` now ends no new line).
    after_cr: bool,
}

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{0C}')
}

impl<'a> LogicalLines<'a> {
    fn new(text: &'a str) -> Self {
        Self {
            chars: text.chars().peekable(),
            line: 1,
            after_cr: false,
        }
    }

    /// The next character, counting lines (`\r\n` is one line end).
    fn next_char(&mut self) -> Option<char> {
        let c = self.chars.next()?;
        match c {
            '\r' => self.line += 1,
            '\n' if !self.after_cr => self.line += 1,
            _ => {}
        }
        self.after_cr = c == '\r';
        Some(c)
    }
}

impl Iterator for LogicalLines<'_> {
    type Item = LogicalLine;

    /// A port of the JDK 17 `Properties.LineReader.readLine` state machine.
    fn next(&mut self) -> Option<LogicalLine> {
        let mut chars: Vec<char> = Vec::new();
        let mut line = self.line;
        let mut skip_blanks = true;
        let mut appended_line_begin = false;
        let mut preceding_backslash = false;
        loop {
            let Some(c) = self.next_char() else {
                // End of input.
                if chars.is_empty() {
                    return None;
                }
                if preceding_backslash {
                    chars.pop();
                }
                return Some(LogicalLine { chars, line });
            };
            if skip_blanks {
                if is_blank(c) {
                    continue;
                }
                if !appended_line_begin && (c == '\r' || c == '\n') {
                    continue;
                }
                skip_blanks = false;
                appended_line_begin = false;
            }
            if chars.is_empty() && (c == '#' || c == '!') {
                // A comment, to the end of the physical line; it never continues.
                loop {
                    match self.next_char() {
                        None => return None,
                        Some('\r' | '\n') => break,
                        Some(_) => {}
                    }
                }
                skip_blanks = true;
                continue;
            }
            if c != '\n' && c != '\r' {
                if chars.is_empty() {
                    line = self.line;
                }
                chars.push(c);
                preceding_backslash = c == '\\' && !preceding_backslash;
                continue;
            }
            // End of a physical line.
            if chars.is_empty() {
                // Nothing yet (a lone continuation backslash leaves nothing): start afresh.
                skip_blanks = true;
                continue;
            }
            if self.chars.peek().is_none() {
                if preceding_backslash {
                    chars.pop();
                }
                return Some(LogicalLine { chars, line });
            }
            if !preceding_backslash {
                return Some(LogicalLine { chars, line });
            }
            // The odd backslash continues the line on the next one, without its leading blanks.
            chars.pop();
            skip_blanks = true;
            appended_line_begin = true;
            preceding_backslash = false;
            if c == '\r' && self.chars.peek() == Some(&'\n') {
                self.next_char();
            }
        }
    }
}

/// Splits a logical line into its raw key and raw value (`Properties.load0`).
fn split_key_value(line: &[char]) -> (&[char], &[char]) {
    let mut key_len = 0;
    let mut value_start = line.len();
    let mut has_separator = false;
    let mut preceding_backslash = false;
    while key_len < line.len() {
        let c = line[key_len];
        if (c == '=' || c == ':') && !preceding_backslash {
            value_start = key_len + 1;
            has_separator = true;
            break;
        }
        if is_blank(c) && !preceding_backslash {
            value_start = key_len + 1;
            break;
        }
        preceding_backslash = c == '\\' && !preceding_backslash;
        key_len += 1;
    }
    while value_start < line.len() {
        let c = line[value_start];
        if !is_blank(c) {
            if !has_separator && (c == '=' || c == ':') {
                has_separator = true;
            } else {
                break;
            }
        }
        value_start += 1;
    }
    (&line[..key_len], &line[value_start..])
}

/// Resolves escapes (`Properties.loadConvert`).
fn unescape(raw: &[char]) -> Result<String, String> {
    let mut out = String::with_capacity(raw.len());
    let mut pending_high: Option<u16> = None;
    let mut i = 0;
    while i < raw.len() {
        let c = raw[i];
        i += 1;
        if c != '\\' {
            flush_high(&mut pending_high)?;
            out.push(c);
            continue;
        }
        let Some(&escaped) = raw.get(i) else {
            // A lone trailing backslash cannot reach here from a logical line; drop it.
            break;
        };
        i += 1;
        if escaped != 'u' {
            flush_high(&mut pending_high)?;
            out.push(match escaped {
                't' => '\t',
                'r' => '\r',
                'n' => '\n',
                'f' => '\u{0C}',
                other => other,
            });
            continue;
        }
        let hex = raw.get(i..i + 4).ok_or_else(malformed_u)?;
        i += 4;
        let mut unit: u16 = 0;
        for &h in hex {
            let digit = h.to_digit(16).ok_or_else(malformed_u)?;
            // Four hex digits fit a u16 exactly.
            unit = (unit << 4) | u16::try_from(digit).map_err(|_| malformed_u())?;
        }
        match (pending_high.take(), unit) {
            (Some(high), 0xDC00..=0xDFFF) => {
                let code =
                    0x10000 + ((u32::from(high) - 0xD800) << 10) + (u32::from(unit) - 0xDC00);
                out.push(char::from_u32(code).ok_or_else(lone_surrogate)?);
            }
            (Some(_), _) => return Err(lone_surrogate()),
            (None, 0xD800..=0xDBFF) => pending_high = Some(unit),
            (None, 0xDC00..=0xDFFF) => return Err(lone_surrogate()),
            (None, _) => out.push(char::from_u32(u32::from(unit)).ok_or_else(lone_surrogate)?),
        }
    }
    flush_high(&mut pending_high)?;
    Ok(out)
}

fn flush_high(pending: &mut Option<u16>) -> Result<(), String> {
    match pending.take() {
        Some(_) => Err(lone_surrogate()),
        None => Ok(()),
    }
}

fn malformed_u() -> String {
    "malformed \\uxxxx escape (Java requires exactly four hex digits)".to_owned()
}

fn lone_surrogate() -> String {
    "a \\u escape leaves an unpaired UTF-16 surrogate".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(text: &str) -> Vec<(String, String, usize)> {
        parse(text)
            .unwrap()
            .iter()
            .map(|(k, p)| (k.to_owned(), p.value.clone(), p.line))
            .collect()
    }

    fn one(text: &str) -> (String, String) {
        let v = kv(text);
        assert_eq!(v.len(), 1, "{text:?} gave {v:?}");
        (v[0].0.clone(), v[0].1.clone())
    }

    #[test]
    fn separators() {
        for text in [
            "a=b", "a = b", "a:b", "a : b", "a b", "a\tb", "a \t = b", "  a=b",
        ] {
            assert_eq!(one(text), ("a".into(), "b".into()), "{text:?}");
        }
        // Only one separator is skipped.
        assert_eq!(one("a==b"), ("a".into(), "=b".into()));
        assert_eq!(one("a =:b"), ("a".into(), ":b".into()));
        assert_eq!(one("a b=c"), ("a".into(), "b=c".into()));
        // Trailing blanks belong to the value.
        assert_eq!(one("a=b  "), ("a".into(), "b  ".into()));
        // No value.
        assert_eq!(one("a"), ("a".into(), "".into()));
        assert_eq!(one("a="), ("a".into(), "".into()));
        assert_eq!(one("=b"), ("".into(), "b".into()));
    }

    #[test]
    fn comments_and_blank_lines() {
        let v = kv("# c\n! c\n\n   \n  # indented\na=1\n#b=2\n");
        assert_eq!(v, vec![("a".into(), "1".into(), 6)]);
        // A comment does not continue.
        let v = kv("# c \\\na=1");
        assert_eq!(v, vec![("a".into(), "1".into(), 2)]);
        // `#` inside a value is data.
        assert_eq!(one("a=b # c"), ("a".into(), "b # c".into()));
    }

    #[test]
    fn continuations() {
        assert_eq!(one("a=b\\\n   c"), ("a".into(), "bc".into()));
        assert_eq!(one("a=b\\\r\n\tc"), ("a".into(), "bc".into()));
        assert_eq!(one("a=b\\\rc"), ("a".into(), "bc".into()));
        // An even number of backslashes does not continue.
        assert_eq!(kv("a=b\\\\\nc=d").len(), 2);
        // A continued line may start with `#`.
        assert_eq!(one("a=b\\\n#c"), ("a".into(), "b#c".into()));
        // A lone backslash line joins nothing; the next line starts afresh.
        assert_eq!(kv("\\\n# c\nx=1"), vec![("x".into(), "1".into(), 3)]);
        assert_eq!(
            kv("a=1\n\\"),
            vec![("a".into(), "1".into(), 1), ("".into(), "".into(), 2)]
        );
        // An empty continuation ends the line.
        let v = kv("a=b\\\n\nc=d");
        assert_eq!(
            v,
            vec![("a".into(), "b".into(), 1), ("c".into(), "d".into(), 3)]
        );
        // A backslash at the end of input is dropped.
        assert_eq!(one("a=b\\"), ("a".into(), "b".into()));
        // Keys continue too.
        assert_eq!(one("ke\\\n  y=v"), ("key".into(), "v".into()));
    }

    #[test]
    fn line_numbers() {
        let v = kv("a=1\r\nb=2\rc=3\n\n\nd=x\\\n y\\\n z\ne=5");
        let lines: Vec<(String, usize)> = v.into_iter().map(|(k, _, l)| (k, l)).collect();
        assert_eq!(
            lines,
            vec![
                ("a".into(), 1),
                ("b".into(), 2),
                ("c".into(), 3),
                ("d".into(), 6),
                ("e".into(), 9)
            ]
        );
    }

    #[test]
    fn escapes() {
        assert_eq!(one(r"a\=b=c"), ("a=b".into(), "c".into()));
        assert_eq!(one(r"a\:b:c"), ("a:b".into(), "c".into()));
        assert_eq!(one(r"a\ b c"), ("a b".into(), "c".into()));
        assert_eq!(one(r"a=\t\n\r\f"), ("a".into(), "\t\n\r\u{0C}".into()));
        assert_eq!(one(r"a=\u0041\u00e9"), ("a".into(), "Aé".into()));
        assert_eq!(one(r"a=\q\\"), ("a".into(), "q\\".into()));
        assert_eq!(one(r"a=\ud83d\ude00"), ("a".into(), "😀".into()));
        assert_eq!(one(r"a=\ b"), ("a".into(), " b".into()));
    }

    #[test]
    fn malformed_unicode_escapes() {
        for text in [
            r"a=\u12",
            r"a=\u12g4",
            "x=1\nb=\\uZZZZ",
            r"a=\ud83d",
            r"a=\ude00x",
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.reason.contains("\\u"), "{text:?}: {err}");
        }
        let err = parse("x=1\n\nb=\\u12").unwrap_err();
        assert_eq!(err.line, 3);
        assert_eq!(err.key.as_deref(), Some("b"));
        let err = parse(r"\u12=b").unwrap_err();
        assert_eq!(err.key, None);
    }

    #[test]
    fn last_value_wins() {
        let props = parse("a=1\nb=2\na=3").unwrap();
        let a = props.get("a").unwrap();
        assert_eq!(a.value, "3");
        assert_eq!(a.line, 3);
        assert_eq!(a.replaced_line, Some(1));
        assert_eq!(props.len(), 2);
    }

    #[test]
    fn decoding() {
        assert_eq!(decode(b"\xEF\xBB\xBFa=b"), "a=b");
        assert_eq!(decode("a=é".as_bytes()), "a=é");
        assert_eq!(decode(b"a=\xE9"), "a=é");
    }
}
