//! The `.properties` reader against Java's rules: hand-picked cases, a property test that writes
//! random maps the way `Properties.store` does (with random separators, comments, continuations
//! and line endings) and reads them back with their line numbers, a no-panic property on
//! arbitrary text, and a cross-check against the JDK itself (`javac` and `java`, which the
//! Kafka tests need anyway).

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use strait_core::config::properties::{decode, parse, Properties};

fn pairs(props: &Properties) -> Vec<(String, String)> {
    props
        .iter()
        .map(|(k, p)| (k.to_owned(), p.value.clone()))
        .collect()
}

#[test]
fn mm2_style_file() {
    let text = "\
# MM2 sample
clusters = A, B
A.bootstrap.servers = A_host1:9092, A_host2:9092
A->B.enabled = true
A->B.topics = .*
A.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required \\
    username=\"u\" \\
    password=\"p\";
replication.policy.separator = _
";
    let props = parse(text).unwrap();
    assert_eq!(props.get("clusters").unwrap().value, "A, B");
    assert_eq!(props.get("A->B.enabled").unwrap().line, 4);
    let jaas = props.get("A.sasl.jaas.config").unwrap();
    assert_eq!(
        jaas.value,
        "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"p\";"
    );
    assert_eq!(jaas.line, 6);
    assert_eq!(props.get("replication.policy.separator").unwrap().line, 9);
}

#[test]
fn windows_line_endings_and_trailing_blanks() {
    let props = parse("a = 1 \r\nb:2\r\n\r\nc\r\n").unwrap();
    assert_eq!(
        pairs(&props),
        vec![
            ("a".into(), "1 ".into()),
            ("b".into(), "2".into()),
            ("c".into(), "".into())
        ]
    );
    assert_eq!(props.get("c").unwrap().line, 4);
}

#[test]
fn latin1_files_are_read_as_java_reads_them() {
    let props = parse(&decode(b"name=caf\xE9\n")).unwrap();
    assert_eq!(props.get("name").unwrap().value, "café");
}

/// Java's `saveConvert`: escapes for a key (every space) or a value (a leading space).
fn escape(text: &str, is_key: bool, unicode_escapes: bool) -> Vec<String> {
    let mut units = Vec::new();
    for (i, c) in text.chars().enumerate() {
        let unit = match c {
            ' ' if is_key || i == 0 => "\\ ".to_owned(),
            '\\' => "\\\\".to_owned(),
            '\t' => "\\t".to_owned(),
            '\n' => "\\n".to_owned(),
            '\r' => "\\r".to_owned(),
            '\u{0C}' => "\\f".to_owned(),
            '=' | ':' | '#' | '!' => format!("\\{c}"),
            c if unicode_escapes && (u32::from(c) < 0x20 || u32::from(c) > 0x7E) => {
                let mut buf = [0u16; 2];
                c.encode_utf16(&mut buf)
                    .iter()
                    .map(|u| format!("\\u{u:04X}"))
                    .collect()
            }
            c => c.to_string(),
        };
        units.push(unit);
    }
    units
}

#[derive(Debug, Clone)]
struct Style {
    separator: &'static str,
    newline: &'static str,
    unicode_escapes: bool,
    comment_before: bool,
    /// Where to break lines, as fractions of the escaped units.
    breaks: Vec<u8>,
    indent: &'static str,
}

fn style() -> impl Strategy<Value = Style> {
    (
        prop::sample::select(vec!["=", " = ", ":", " : ", " ", "\t", "=  "]),
        prop::sample::select(vec!["\n", "\r\n", "\r"]),
        any::<bool>(),
        any::<bool>(),
        prop::collection::vec(any::<u8>(), 0..3),
        prop::sample::select(vec!["", "  ", "\t", " \u{0C} "]),
    )
        .prop_map(
            |(separator, newline, unicode_escapes, comment_before, breaks, indent)| Style {
                separator,
                newline,
                unicode_escapes,
                comment_before,
                breaks,
                indent,
            },
        )
}

/// Writes `entries` and returns the text and the line each key starts on.
fn write(entries: &[(String, String, Style)]) -> (String, Vec<usize>) {
    let mut out = String::new();
    let mut line = 1;
    let mut lines = Vec::new();
    for (key, value, style) in entries {
        if style.comment_before {
            out.push_str("# a comment \\");
            out.push_str(style.newline);
            out.push_str(style.newline);
            line += 2;
        }
        lines.push(line);
        let mut units = escape(key, true, style.unicode_escapes);
        // An empty key needs a visible separator, as `Properties.store` writes.
        units.push(if key.is_empty() { "=" } else { style.separator }.to_owned());
        units.extend(escape(value, false, style.unicode_escapes));
        // A break may go before any unit that does not start with a blank (the continuation
        // drops leading blanks) and not at the very end.
        let candidates: Vec<usize> = (1..units.len())
            .filter(|&i| !units[i].starts_with([' ', '\t', '\u{0C}']))
            .collect();
        let mut at: Vec<usize> = style
            .breaks
            .iter()
            .filter_map(|b| candidates.get(usize::from(*b) % candidates.len().max(1)))
            .copied()
            .collect();
        at.sort_unstable();
        at.dedup();
        for (i, unit) in units.iter().enumerate() {
            if at.contains(&i) {
                out.push('\\');
                out.push_str(style.newline);
                out.push_str(style.indent);
                line += 1;
            }
            out.push_str(unit);
        }
        out.push_str(style.newline);
        line += 1;
    }
    (out, lines)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn written_maps_read_back(
        entries in prop::collection::btree_map(
            "[a-zA-Z0-9 .=:#!\\\\\t\n\r\u{0C}é😀_-]{0,12}",
            ("[a-zA-Z0-9 .=:#!\\\\\t\n\r\u{0C}é😀_-]{0,16}", style()),
            0..8,
        )
    ) {
        let entries: Vec<(String, String, Style)> =
            entries.into_iter().map(|(k, (v, s))| (k, v, s)).collect();
        let (text, lines) = write(&entries);
        let props = parse(&text).unwrap();
        prop_assert_eq!(props.len(), entries.len(), "{:?}", text);
        for ((key, value, _), line) in entries.iter().zip(lines) {
            let got = props.get(key);
            prop_assert!(got.is_some(), "missing {:?} in {:?}", key, text);
            let got = got.unwrap();
            prop_assert_eq!(&got.value, value, "{:?}", text);
            prop_assert_eq!(got.line, line, "{:?}", text);
        }
    }

    #[test]
    fn never_panics(text in "[a-z=:#! \t\r\n\u{0C}\\\\u0-9A-Fé]{0,64}") {
        let _ = parse(&text);
    }

    #[test]
    fn never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..128)) {
        let _ = parse(&decode(&bytes));
    }
}

const JAVA_CHECKER: &str = r#"
import java.io.*;
import java.nio.file.*;
import java.util.*;

public class PropsCheck {
    static String hex(String s) {
        StringBuilder b = new StringBuilder();
        for (char c : s.toCharArray()) b.append(String.format("%04x", (int) c));
        return b.toString();
    }
    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[1]);
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < n; i++) {
            out.append("CASE ").append(i).append('\n');
            Properties p = new Properties();
            try (InputStream in = Files.newInputStream(Paths.get(args[0], i + ".properties"))) {
                p.load(in);
            } catch (IllegalArgumentException e) {
                out.append("ERR\n");
                continue;
            }
            TreeMap<String, String> sorted = new TreeMap<>();
            for (String k : p.stringPropertyNames()) sorted.put(k, p.getProperty(k));
            for (Map.Entry<String, String> e : sorted.entrySet())
                out.append(hex(e.getKey())).append(' ').append(hex(e.getValue())).append('\n');
        }
        System.out.print(out);
    }
}
"#;

fn hex(s: &str) -> String {
    s.encode_utf16().map(|u| format!("{u:04x}")).collect()
}

/// Compares with `java.util.Properties.load` on random ASCII text rich in the characters that
/// matter.
#[test]
fn same_as_java() {
    use std::process::Command;
    let dir = std::env::temp_dir().join(format!("strait-props-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("PropsCheck.java"), JAVA_CHECKER).unwrap();
    let javac = Command::new("javac")
        .arg("PropsCheck.java")
        .current_dir(&dir)
        .status()
        .expect("javac on PATH");
    assert!(javac.success());

    let alphabet: Vec<char> = "ab=:  \t\u{0C}\\\\\\\n\r#!u0aF9\u{0B}".chars().collect();
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = prop::collection::vec(prop::sample::select(alphabet), 0..40);
    let cases = 5000;
    let mut texts = Vec::new();
    for i in 0..cases {
        let chars = strategy.new_tree(&mut runner).unwrap().current();
        let text: String = chars.into_iter().collect();
        std::fs::write(dir.join(format!("{i}.properties")), text.as_bytes()).unwrap();
        texts.push(text);
    }
    let output = Command::new("java")
        .args(["-cp", ".", "PropsCheck", ".", &cases.to_string()])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(output.status.success());
    let java = String::from_utf8(output.stdout).unwrap();
    let mut java_cases = java.split("CASE ").skip(1);
    let mut compared = 0;
    for (i, text) in texts.iter().enumerate() {
        let java_case = java_cases.next().unwrap();
        let java_body: Vec<&str> = java_case.lines().skip(1).collect();
        let ours = match parse(text) {
            Err(e) if e.reason.contains("surrogate") => continue,
            Err(_) => vec!["ERR".to_owned()],
            Ok(props) => {
                let mut v: Vec<(Vec<u16>, String)> = props
                    .iter()
                    .map(|(k, p)| {
                        (
                            k.encode_utf16().collect(),
                            format!("{} {}", hex(k), hex(&p.value)),
                        )
                    })
                    .collect();
                v.sort();
                v.into_iter().map(|(_, line)| line).collect()
            }
        };
        assert_eq!(ours, java_body, "case {i}: {text:?}");
        compared += 1;
    }
    assert!(compared > cases * 9 / 10);
    let _ = std::fs::remove_dir_all(&dir);
}
