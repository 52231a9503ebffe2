//! MM2's topic, group and config-property filters: `DefaultTopicFilter`, `DefaultGroupFilter` and
//! the exclude list of `DefaultConfigPropertyFilter` (`docs/mm2-behaviour.md` §1.8, §1.10).
//!
//! A filter value is a Kafka `LIST`: trimmed, then split at commas with the whitespace around
//! them. MM2 joins the pieces with `|` into one Java regex and tests names with
//! `Pattern.matcher(name).matches()`, which must match the whole name: `orders` does not match
//! `orders-v2`. An empty value matches nothing (MM2's `compilePatternList` returns null), so
//! `topics =` mirrors no topic and `topics.exclude =` excludes none.
//!
//! Regexes run on the `regex` crate, anchored with `\A(?:…)\z`. Java syntax that crate lacks is
//! handled so that an MM2 file keeps its meaning:
//! - `\Q…\E` quoting is rewritten to escaped literals;
//! - look-around and back-references fall back to `fancy-regex`, a backtracking engine. If one
//!   of those runs past its backtracking limit on a name, the name counts as *not included* and
//!   *excluded*: strait then does not replicate it rather than guess.
//!
//! Anything neither engine accepts is an error naming the pattern. `\w`, `\d`, `\s` and `\b` are
//! Unicode-aware in Rust and ASCII-only in Java: the same for every topic name (Kafka allows
//! only `[a-zA-Z0-9._-]`) and for ASCII group ids.

use std::fmt;

/// MM2's default `topics`: every topic.
pub const TOPICS_DEFAULT: &str = ".*";
/// MM2's default `topics.exclude` (Kafka 4, KIP-1074: only MM2's own `mm2*.internal` topics,
/// where Kafka 3's MM2 excluded every `*.internal` and `*-internal` topic).
pub const TOPICS_EXCLUDE_DEFAULT: &str = r"mm2.*\.internal, .*\.replica, __.*";
/// MM2's default `groups`: every group.
pub const GROUPS_DEFAULT: &str = ".*";
/// MM2's default `groups.exclude`.
pub const GROUPS_EXCLUDE_DEFAULT: &str = "console-consumer-.*, connect-.*, __.*";
/// MM2's default `config.properties.exclude`: topic configs never copied to remote topics.
pub const CONFIG_PROPERTIES_EXCLUDE_DEFAULT: &str = r"follower\.replication\.throttled\.replicas, leader\.replication\.throttled\.replicas, message\.timestamp\.difference\.max\.ms, message\.timestamp\.type, unclean\.leader\.election\.enable, min\.insync\.replicas";

/// A regex that cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid regex `{pattern}`: {message}")]
pub struct FilterError {
    /// The pattern as MM2 would compile it (the list joined with `|`).
    pub pattern: String,
    /// What the regex engine said, on one line.
    pub message: String,
}

/// What [`PatternList::pattern`] gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pattern {
    /// The empty list: matches no name.
    Nothing,
    /// A regex in the `regex` crate's syntax, to match whole names.
    Regex(String),
    /// Look-around or back-references: no finite automaton holds it.
    Backtracking,
}

#[derive(Clone)]
enum Matcher {
    Plain(regex::Regex),
    Fancy(Box<fancy_regex::Regex>),
}

/// A comma-separated list of Java regexes, matched against whole names as MM2 matches them.
#[derive(Clone)]
pub struct PatternList {
    /// The pieces joined with `|`; empty when the list is.
    joined: String,
    /// `None` for an empty list, which matches nothing.
    matcher: Option<Matcher>,
}

impl PatternList {
    /// Parses a list value as MM2 does (Kafka `LIST`, joined with `|`, Java regex syntax).
    pub fn parse(list: &str) -> Result<Self, FilterError> {
        let pieces = split_list(list);
        if pieces.is_empty() {
            return Ok(Self::nothing());
        }
        let joined = pieces.join("|");
        let translated = translate_java_quotes(&joined);
        let anchored = format!(r"\A(?:{translated})\z");
        let matcher = match regex::Regex::new(&anchored) {
            Ok(re) => Matcher::Plain(re),
            Err(plain_err) => match fancy_regex::Regex::new(&anchored) {
                Ok(re) => Matcher::Fancy(Box::new(re)),
                Err(_) => {
                    // Report against the user's own text, not the anchored one.
                    let message = match regex::Regex::new(&translated) {
                        Err(e) => one_line(&e.to_string()),
                        Ok(_) => one_line(&plain_err.to_string()),
                    };
                    let message = match fancy_regex::Regex::new(&translated) {
                        Err(fancy_err) if mentions_fancy_feature(&message) => {
                            one_line(&fancy_err.to_string())
                        }
                        _ => message,
                    };
                    return Err(FilterError {
                        pattern: joined,
                        message,
                    });
                }
            },
        };
        Ok(Self {
            joined,
            matcher: Some(matcher),
        })
    }

    /// The empty list: matches nothing.
    pub fn nothing() -> Self {
        Self {
            joined: String::new(),
            matcher: None,
        }
    }

    /// Whether the whole of `name` matches one of the patterns. A backtracking-limit failure of
    /// the fallback engine counts as no match.
    pub fn matches(&self, name: &str) -> bool {
        self.matches_or(name, false)
    }

    /// As [`PatternList::matches`], answering `on_error` when the fallback engine gives up.
    fn matches_or(&self, name: &str, on_error: bool) -> bool {
        match &self.matcher {
            None => false,
            Some(Matcher::Plain(re)) => re.is_match(name),
            Some(Matcher::Fancy(re)) => re.is_match(name).unwrap_or(on_error),
        }
    }

    /// The pattern MM2 would compile: the list's pieces joined with `|`.
    pub fn as_str(&self) -> &str {
        &self.joined
    }

    /// Whether the list is empty, and so matches nothing.
    pub fn is_empty(&self) -> bool {
        self.matcher.is_none()
    }

    /// Whether the list needed the backtracking engine (look-around or back-references).
    pub fn uses_backtracking(&self) -> bool {
        matches!(self.matcher, Some(Matcher::Fancy(_)))
    }

    /// The list as one regex for the `regex` crate's syntax (Java quoting rewritten, not
    /// anchored), for code that must reason about every name the list matches (the loop check,
    /// `config/loops.rs`): [`Pattern::Nothing`] for an empty list, [`Pattern::Backtracking`] when
    /// only the backtracking engine takes it.
    pub(crate) fn pattern(&self) -> Pattern {
        match &self.matcher {
            None => Pattern::Nothing,
            Some(Matcher::Plain(_)) => Pattern::Regex(translate_java_quotes(&self.joined)),
            Some(Matcher::Fancy(_)) => Pattern::Backtracking,
        }
    }
}

impl fmt::Debug for PatternList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PatternList").field(&self.joined).finish()
    }
}

impl PartialEq for PatternList {
    fn eq(&self, other: &Self) -> bool {
        self.joined == other.joined && self.is_empty() == other.is_empty()
    }
}

/// Which topics a flow mirrors: `topics` minus `topics.exclude` (`DefaultTopicFilter`).
#[derive(Debug, Clone, PartialEq)]
pub struct TopicFilter {
    include: PatternList,
    exclude: PatternList,
}

impl TopicFilter {
    /// A filter from the values of `topics` and `topics.exclude`.
    pub fn new(include: &str, exclude: &str) -> Result<Self, FilterError> {
        Ok(Self {
            include: PatternList::parse(include)?,
            exclude: PatternList::parse(exclude)?,
        })
    }

    /// A filter from compiled lists.
    pub fn from_lists(include: PatternList, exclude: PatternList) -> Self {
        Self { include, exclude }
    }

    /// Whether `topic` passes: included, and not excluded. Internal topics, cycles and
    /// heartbeats are the policy's business (see [`crate::config::FlowConfig`]).
    pub fn should_replicate_topic(&self, topic: &str) -> bool {
        self.include.matches_or(topic, false) && !self.exclude.matches_or(topic, true)
    }

    /// The `topics` list.
    pub fn include(&self) -> &PatternList {
        &self.include
    }

    /// The `topics.exclude` list.
    pub fn exclude(&self) -> &PatternList {
        &self.exclude
    }
}

impl Default for TopicFilter {
    /// MM2's defaults: every topic except `mm2*.internal`, `*.replica` and `__*`.
    fn default() -> Self {
        Self {
            include: PatternList::parse(TOPICS_DEFAULT).unwrap_or_else(|_| PatternList::nothing()),
            exclude: PatternList::parse(TOPICS_EXCLUDE_DEFAULT)
                .unwrap_or_else(|_| PatternList::nothing()),
        }
    }
}

/// Which consumer groups a flow checkpoints: `groups` minus `groups.exclude`
/// (`DefaultGroupFilter`).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupFilter {
    include: PatternList,
    exclude: PatternList,
}

impl GroupFilter {
    /// A filter from the values of `groups` and `groups.exclude`.
    pub fn new(include: &str, exclude: &str) -> Result<Self, FilterError> {
        Ok(Self {
            include: PatternList::parse(include)?,
            exclude: PatternList::parse(exclude)?,
        })
    }

    /// A filter from compiled lists.
    pub fn from_lists(include: PatternList, exclude: PatternList) -> Self {
        Self { include, exclude }
    }

    /// Whether `group` passes: included, and not excluded.
    pub fn should_replicate_group(&self, group: &str) -> bool {
        self.include.matches_or(group, false) && !self.exclude.matches_or(group, true)
    }

    /// The `groups` list.
    pub fn include(&self) -> &PatternList {
        &self.include
    }

    /// The `groups.exclude` list.
    pub fn exclude(&self) -> &PatternList {
        &self.exclude
    }
}

impl Default for GroupFilter {
    /// MM2's defaults: every group except `console-consumer-*`, `connect-*` and `__*`.
    fn default() -> Self {
        Self {
            include: PatternList::parse(GROUPS_DEFAULT).unwrap_or_else(|_| PatternList::nothing()),
            exclude: PatternList::parse(GROUPS_EXCLUDE_DEFAULT)
                .unwrap_or_else(|_| PatternList::nothing()),
        }
    }
}

/// Splits a Kafka `LIST` value: Java `trim()`, then split at `\s*,\s*` keeping empty pieces
/// (`ConfigDef.parseType`); a blank value is the empty list.
pub(crate) fn split_list(value: &str) -> Vec<&str> {
    let trimmed = java_trim(value);
    if trimmed.is_empty() {
        return Vec::new();
    }
    let pieces: Vec<&str> = trimmed.split(',').collect();
    let last = pieces.len() - 1;
    pieces
        .iter()
        .enumerate()
        .map(|(i, piece)| {
            let mut piece = *piece;
            if i > 0 {
                piece = piece.trim_start_matches(is_java_space);
            }
            if i < last {
                piece = piece.trim_end_matches(is_java_space);
            }
            piece
        })
        .collect()
}

/// Java's `String.trim()`: strips every char up to U+0020 at both ends.
pub(crate) fn java_trim(value: &str) -> &str {
    value.trim_matches(|c: char| c <= ' ')
}

/// Java regex `\s`: `[ \t\n\x0B\f\r]`.
fn is_java_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r')
}

/// Rewrites Java's `\Q…\E` quoting (absent from the `regex` crate) into escaped literals. An
/// unterminated `\Q` quotes to the end, as in Java.
fn translate_java_quotes(pattern: &str) -> String {
    if !pattern.contains(r"\Q") {
        return pattern.to_owned();
    }
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut rest = pattern;
    while let Some(pos) = rest.find('\\') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        match after.chars().next() {
            Some('Q') => {
                let quoted = &after[1..];
                let (literal, next) = match quoted.find(r"\E") {
                    Some(end) => (&quoted[..end], &quoted[end + 2..]),
                    None => (quoted, ""),
                };
                out.push_str(&regex::escape(literal));
                rest = next;
            }
            Some(c) => {
                out.push('\\');
                out.push(c);
                rest = &after[c.len_utf8()..];
            }
            None => {
                out.push('\\');
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

fn mentions_fancy_feature(message: &str) -> bool {
    message.contains("look-around") || message.contains("backreference")
}

fn one_line(message: &str) -> String {
    // The regex crate's errors quote the pattern with a caret under the fault; keep the gist.
    let lines: Vec<&str> = message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    match lines.iter().rev().find(|l| l.starts_with("error:")) {
        Some(last) => last.trim_start_matches("error:").trim().to_owned(),
        None => lines.join(" "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_splits_like_kafka() {
        assert_eq!(split_list(" a , b,c "), vec!["a", "b", "c"]);
        assert_eq!(split_list("a,"), vec!["a", ""]);
        assert_eq!(split_list("a , , b"), vec!["a", "", "b"]);
        assert!(split_list("").is_empty());
        assert!(split_list("  \t").is_empty());
        assert_eq!(split_list("a{1,3}"), vec!["a{1", "3}"]);
    }

    #[test]
    fn patterns_match_whole_names() {
        let p = PatternList::parse("orders, pay.*").unwrap();
        assert!(p.matches("orders"));
        assert!(!p.matches("orders-v2"));
        assert!(!p.matches("my-orders"));
        assert!(p.matches("payments"));
        assert!(!p.matches("xpayments"));
        assert_eq!(p.as_str(), "orders|pay.*");
    }

    #[test]
    fn alternation_inside_a_piece_stays_anchored() {
        let p = PatternList::parse("a|b").unwrap();
        assert!(p.matches("a"));
        assert!(p.matches("b"));
        assert!(!p.matches("ab"));
    }

    #[test]
    fn empty_list_matches_nothing() {
        let p = PatternList::parse("").unwrap();
        assert!(p.is_empty());
        assert!(!p.matches(""));
        assert!(!p.matches("orders"));
        let f = TopicFilter::new("", "").unwrap();
        assert!(!f.should_replicate_topic("orders"));
        let f = TopicFilter::new(".*", "").unwrap();
        assert!(f.should_replicate_topic("__consumer_offsets"));
    }

    #[test]
    fn default_topic_filter() {
        let f = TopicFilter::default();
        for t in [
            "orders",
            "A.orders",
            "heartbeats",
            "internal",
            "my_internal",
            // KIP-1074 (Kafka 4): users' `*.internal` topics pass the default filter.
            "audit.internal",
            "connect-offsets-internal",
        ] {
            assert!(f.should_replicate_topic(t), "{t}");
        }
        for t in [
            "__consumer_offsets",
            "mm2-offset-syncs.B.internal",
            "mm2-configs.B.internal",
            "orders.replica",
        ] {
            assert!(!f.should_replicate_topic(t), "{t}");
        }
    }

    #[test]
    fn default_group_filter() {
        let f = GroupFilter::default();
        assert!(f.should_replicate_group("billing-app"));
        assert!(f.should_replicate_group(""));
        assert!(!f.should_replicate_group("console-consumer-1234"));
        assert!(!f.should_replicate_group("connect-mm2"));
        assert!(!f.should_replicate_group("__strait"));
    }

    #[test]
    fn exclude_wins_over_include() {
        let f = TopicFilter::new("orders.*", "orders-test.*").unwrap();
        assert!(f.should_replicate_topic("orders"));
        assert!(f.should_replicate_topic("orders-eu"));
        assert!(!f.should_replicate_topic("orders-test-1"));
        assert!(!f.should_replicate_topic("payments"));
    }

    #[test]
    fn java_quoting() {
        let p = PatternList::parse(r"\Qa.b\E.*").unwrap();
        assert!(p.matches("a.bc"));
        assert!(!p.matches("axbc"));
        let p = PatternList::parse(r"\Qa+b").unwrap();
        assert!(p.matches("a+b"));
        let p = PatternList::parse(r"x\\Qy").unwrap();
        assert!(p.matches(r"x\Qy"));
        assert_eq!(translate_java_quotes(r"a\.b"), r"a\.b");
    }

    #[test]
    fn look_around_falls_back_to_backtracking() {
        let p = PatternList::parse("(?!test-).*").unwrap();
        assert!(p.uses_backtracking());
        assert!(p.matches("orders"));
        assert!(!p.matches("test-orders"));
        let p = PatternList::parse(r"(a)\1").unwrap();
        assert!(p.matches("aa"));
        assert!(!p.matches("ab"));
        assert!(!PatternList::parse(".*").unwrap().uses_backtracking());
    }

    #[test]
    fn bad_regex_names_the_pattern() {
        let err = PatternList::parse("orders, (unclosed").unwrap_err();
        assert_eq!(err.pattern, "orders|(unclosed");
        assert!(err.message.contains("unclosed group"), "{}", err.message);
        assert!(!err.message.contains('\n'));
        let err = TopicFilter::new(".*", "[z-a]").unwrap_err();
        assert_eq!(err.pattern, "[z-a]");
    }

    #[test]
    fn pieces_are_joined_before_compiling_as_in_mm2() {
        // MM2 joins before compiling, so a group may span a comma.
        let p = PatternList::parse("(a, b)").unwrap();
        assert!(p.matches("a"));
        assert!(p.matches("b"));
    }

    #[test]
    fn config_properties_exclude_default() {
        let p = PatternList::parse(CONFIG_PROPERTIES_EXCLUDE_DEFAULT).unwrap();
        assert!(p.matches("min.insync.replicas"));
        assert!(p.matches("message.timestamp.type"));
        assert!(!p.matches("retention.ms"));
        assert!(!p.matches("minxinsync.replicas"));
    }
}
