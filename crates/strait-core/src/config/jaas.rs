//! `sasl.jaas.config`: a JAAS login module entry in the syntax Kafka's `JaasConfig` reads,
//!
//! ```text
//! <LoginModuleClass> <controlFlag> (<option>=<value>)* ;
//! ```
//!
//! tokenized as Java's `StreamTokenizer` with Kafka's settings:
//! - characters up to and including space are blanks; `;` and `=` are tokens of their own;
//! - a word is a run of any other characters (`username`, `alice`, `4096`, `a.b$c-d`);
//! - `"..."` and `'...'` are quoted strings with Java's escapes: `\n` `\t` `\r` `\b` `\f` `\a`
//!   `\v`, octal `\0`–`\377`, and `\x` for any other `x` (so `\"` and `\\`);
//! - `/` starts a comment: `//` and a lone `/` to the end of the line, `/* ... */` inline. So a
//!   value holding `/` (a path, a URL) must be quoted, as in Kafka.
//!
//! The control flag is one of `required`, `requisite`, `sufficient`, `optional` (any case);
//! an option set twice keeps its last value; the entry ends at `;`. Kafka's clients take exactly
//! one entry. Where Java would let a quoted string end silently at a line break, this parser
//! says the quote is not closed. Errors give the character position and never quote a value.

use std::collections::BTreeMap;
use std::fmt;

use super::secret::Secret;

/// A parsed `sasl.jaas.config`. `Debug` shows option names, never values.
#[derive(Clone, PartialEq, Eq)]
pub struct JaasConfig {
    /// The login module class, e.g. `org.apache.kafka.common.security.scram.ScramLoginModule`.
    pub login_module: String,
    /// The control flag.
    pub flag: ControlFlag,
    options: BTreeMap<String, Secret>,
}

/// A JAAS control flag (strait, like Kafka's clients with a single module, accepts any).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlFlag {
    /// `required`.
    Required,
    /// `requisite`.
    Requisite,
    /// `sufficient`.
    Sufficient,
    /// `optional`.
    Optional,
}

/// Why a `sasl.jaas.config` does not parse: where (1-based character position) and what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("sasl.jaas.config, at character {position}: {problem}")]
pub struct JaasError {
    /// The 1-based position in the value (characters, not bytes).
    pub position: usize,
    /// What is wrong.
    pub problem: &'static str,
}

impl fmt::Debug for JaasConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JaasConfig")
            .field("login_module", &self.login_module)
            .field("flag", &self.flag)
            .field("options", &self.options.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl JaasConfig {
    /// Parses a value that must hold exactly one entry, as Kafka's clients require.
    pub fn parse(text: &str) -> Result<JaasConfig, JaasError> {
        let mut entries = parse_entries(text)?;
        match entries.len() {
            1 => Ok(entries.remove(0)),
            0 => Err(JaasError {
                position: 1,
                problem:
                    "no login module: expected `<LoginModuleClass> required <option>=<value> ... ;`",
            }),
            _ => Err(JaasError {
                position: 1,
                problem: "more than one login module entry; a Kafka client takes exactly one",
            }),
        }
    }

    /// The value of option `name`.
    pub fn option(&self, name: &str) -> Option<&str> {
        self.options.get(name).map(Secret::expose)
    }

    /// Every option, sorted by name.
    pub fn options(&self) -> impl Iterator<Item = (&str, &str)> {
        self.options.iter().map(|(k, v)| (k.as_str(), v.expose()))
    }
}

/// Parses every entry of a JAAS config value.
pub fn parse_entries(text: &str) -> Result<Vec<JaasConfig>, JaasError> {
    let mut tokens = Tokenizer::new(text);
    let mut entries = Vec::new();
    while let Some(first) = tokens.next()? {
        let Token::Text(login_module) = first.token else {
            return Err(first.error("expected the login module class"));
        };
        let Some(flag_token) = tokens.next()? else {
            return Err(
                tokens.end_error("no control flag after the login module (e.g. `required`)")
            );
        };
        let flag =
            match &flag_token.token {
                Token::Text(word) => match word.to_ascii_lowercase().as_str() {
                    "required" => ControlFlag::Required,
                    "requisite" => ControlFlag::Requisite,
                    "sufficient" => ControlFlag::Sufficient,
                    "optional" => ControlFlag::Optional,
                    _ => return Err(flag_token.error(
                        "not a control flag: expected required, requisite, sufficient or optional",
                    )),
                },
                _ => {
                    return Err(flag_token
                        .error("no control flag after the login module (e.g. `required`)"))
                }
            };
        let mut options = BTreeMap::new();
        loop {
            let Some(next) = tokens.next()? else {
                return Err(tokens.end_error("the entry does not end with `;`"));
            };
            let key = match next.token {
                Token::Semicolon => break,
                Token::Text(key) => key,
                Token::Equals => return Err(next.error("`=` without an option name before it")),
            };
            match tokens.next()? {
                Some(Positioned {
                    token: Token::Equals,
                    ..
                }) => {}
                Some(other) => return Err(other.error("expected `=` after an option name")),
                None => return Err(tokens.end_error("expected `=` after an option name")),
            }
            match tokens.next()? {
                Some(Positioned {
                    token: Token::Text(value),
                    ..
                }) => {
                    options.insert(key, Secret::new(value));
                }
                Some(other) => return Err(other.error("no value after `=`")),
                None => return Err(tokens.end_error("no value after `=`")),
            }
        }
        entries.push(JaasConfig {
            login_module,
            flag,
            options,
        });
    }
    Ok(entries)
}

#[derive(Debug)]
enum Token {
    /// A word or a quoted string.
    Text(String),
    Equals,
    Semicolon,
}

#[derive(Debug)]
struct Positioned {
    token: Token,
    position: usize,
}

impl Positioned {
    fn error(&self, problem: &'static str) -> JaasError {
        JaasError {
            position: self.position,
            problem,
        }
    }
}

struct Tokenizer {
    chars: Vec<char>,
    at: usize,
}

impl Tokenizer {
    fn new(text: &str) -> Self {
        Self {
            chars: text.chars().collect(),
            at: 0,
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn end_error(&self, problem: &'static str) -> JaasError {
        JaasError {
            position: self.chars.len() + 1,
            problem,
        }
    }

    /// Whether `c` belongs to a word (Kafka: `wordChars(32, 128)`, `wordChars(160, 255)`, all
    /// of Unicode above, minus blanks, quotes, `;`, `=` and `/`).
    fn is_word_char(c: char) -> bool {
        let code = c as u32;
        let word = (33..=128).contains(&code) || code >= 160;
        word && !matches!(c, ';' | '=' | '/' | '"' | '\'')
    }

    fn next(&mut self) -> Result<Option<Positioned>, JaasError> {
        loop {
            let Some(c) = self.peek() else {
                return Ok(None);
            };
            let position = self.at + 1;
            if (c as u32) <= 32 {
                self.at += 1;
                continue;
            }
            if c == '/' {
                match self.chars.get(self.at + 1) {
                    Some('*') => {
                        let start = position;
                        self.at += 2;
                        loop {
                            match self.peek() {
                                None => {
                                    return Err(JaasError {
                                        position: start,
                                        problem: "a `/*` comment is not closed",
                                    })
                                }
                                Some('*') if self.chars.get(self.at + 1) == Some(&'/') => {
                                    self.at += 2;
                                    break;
                                }
                                Some(_) => self.at += 1,
                            }
                        }
                    }
                    // `//`, and a lone `/`: Kafka makes `/` a comment character.
                    _ => {
                        while let Some(c) = self.peek() {
                            if c == '\n' || c == '\r' {
                                break;
                            }
                            self.at += 1;
                        }
                    }
                }
                continue;
            }
            self.at += 1;
            let token = match c {
                ';' => Token::Semicolon,
                '=' => Token::Equals,
                '"' | '\'' => Token::Text(self.quoted(c, position)?),
                c if Self::is_word_char(c) => {
                    let mut word = String::from(c);
                    while let Some(c) = self.peek().filter(|c| Self::is_word_char(*c)) {
                        word.push(c);
                        self.at += 1;
                    }
                    Token::Text(word)
                }
                _ => {
                    return Err(JaasError {
                        position,
                        problem: "a character that cannot appear outside quotes",
                    })
                }
            };
            return Ok(Some(Positioned { token, position }));
        }
    }

    /// The rest of a quoted string opened by `quote` at `start`, escapes resolved.
    fn quoted(&mut self, quote: char, start: usize) -> Result<String, JaasError> {
        let unclosed = JaasError {
            position: start,
            problem: "this quote is not closed (before the end of the line)",
        };
        let mut out = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(unclosed);
            };
            self.at += 1;
            match c {
                c if c == quote => return Ok(out),
                '\n' | '\r' => return Err(unclosed),
                '\\' => {
                    let Some(e) = self.peek() else {
                        return Err(unclosed);
                    };
                    self.at += 1;
                    match e {
                        '0'..='7' => {
                            // Up to three octal digits, at most \377.
                            let mut value = e as u32 - '0' as u32;
                            let max_digits = if e <= '3' { 3 } else { 2 };
                            for _ in 1..max_digits {
                                match self.peek() {
                                    Some(d @ '0'..='7') => {
                                        value = value * 8 + (d as u32 - '0' as u32);
                                        self.at += 1;
                                    }
                                    _ => break,
                                }
                            }
                            out.push(char::from_u32(value).unwrap_or('\u{FFFD}'));
                        }
                        'a' => out.push('\u{7}'),
                        'b' => out.push('\u{8}'),
                        'f' => out.push('\u{C}'),
                        'n' => out.push('\n'),
                        'r' => out.push('\r'),
                        't' => out.push('\t'),
                        'v' => out.push('\u{B}'),
                        other => out.push(other),
                    }
                }
                c => out.push(c),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> JaasConfig {
        JaasConfig::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    fn fails(text: &str) -> JaasError {
        JaasConfig::parse(text).expect_err(text)
    }

    #[test]
    fn a_typical_scram_config() {
        let j = parse(
            r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";"#,
        );
        assert_eq!(
            j.login_module,
            "org.apache.kafka.common.security.scram.ScramLoginModule"
        );
        assert_eq!(j.flag, ControlFlag::Required);
        assert_eq!(j.option("username"), Some("alice"));
        assert_eq!(j.option("password"), Some("alice-secret"));
        assert_eq!(j.options().count(), 2);
    }

    #[test]
    fn quoting_and_escapes() {
        let j = parse(
            "M REQUIRED a=plain b=\"dq \\\"x\\\" \\\\ ;=\" c='sq \"y\" \\'' d=\"\\t\\n\\101\\7\\0\" \
             e=\"/etc/kafka/x\" f=\"\" g=caf\u{e9};",
        );
        assert_eq!(j.flag, ControlFlag::Required);
        assert_eq!(j.option("a"), Some("plain"));
        assert_eq!(j.option("b"), Some("dq \"x\" \\ ;="));
        assert_eq!(j.option("c"), Some("sq \"y\" '"));
        assert_eq!(j.option("d"), Some("\t\nA\u{7}\0"));
        assert_eq!(j.option("e"), Some("/etc/kafka/x"));
        assert_eq!(j.option("f"), Some(""));
        assert_eq!(j.option("g"), Some("caf\u{e9}"));
    }

    #[test]
    fn octal_escapes_stop_where_java_stops() {
        // \477 is \47 then 7 (three digits only when the first is 0-3).
        assert_eq!(parse(r#"M optional a="\477";"#).option("a"), Some("'7"));
        assert_eq!(
            parse(r#"M optional a="\3777";"#).option("a"),
            Some("\u{ff}7")
        );
    }

    #[test]
    fn blanks_line_breaks_comments_and_the_last_value_win() {
        let j = parse(
            "M\n  sufficient /* a comment */ user=a // to the end of the line\n\tuser = b\r\n pw=\"x\"\n;",
        );
        assert_eq!(j.flag, ControlFlag::Sufficient);
        assert_eq!(j.option("user"), Some("b"));
        assert_eq!(j.option("pw"), Some("x"));
        // A lone `/` is a comment too, as in Kafka: an unquoted path loses its value.
        let e = fails("M required path=/etc/x;");
        assert_eq!(e.problem, "no value after `=`");
    }

    #[test]
    fn errors_say_where() {
        let cases: &[(&str, usize, &str)] = &[
            ("", 1, "no login module"),
            ("   ", 1, "no login module"),
            ("M", 2, "no control flag"),
            ("M sometimes a=b;", 3, "not a control flag"),
            ("M required a=b", 15, "does not end with `;`"),
            ("M required a b;", 14, "expected `=`"),
            ("M required a=;", 14, "no value after `=`"),
            ("M required =b;", 12, "`=` without an option name"),
            ("M required a=\"open;", 14, "quote is not closed"),
            ("M required a=\"line\nbreak\";", 14, "quote is not closed"),
            ("M required /* open", 12, "comment is not closed"),
            (
                "M required a=b; N required c=d;",
                1,
                "more than one login module",
            ),
            ("; M required;", 1, "expected the login module class"),
        ];
        for (text, position, problem) in cases {
            let e = fails(text);
            assert_eq!(e.position, *position, "{text:?}: {e}");
            assert!(e.problem.contains(problem), "{text:?}: {e}");
        }
    }

    #[test]
    fn values_never_shown() {
        let j = parse(r#"M required username="alice" password="hunter2";"#);
        let debug = format!("{j:?}");
        assert!(!debug.contains("hunter2"), "{debug}");
        assert!(debug.contains("password"), "{debug}");
        let e = fails(r#"M required password="hunter2" oops;"#);
        assert!(!e.to_string().contains("hunter2"));
        assert!(!e.to_string().contains("oops"));
    }
}
