//! Reading `source->target.key` keys against the declared cluster aliases, which may themselves
//! hold dots and dashes (`us-west->eu.central.topics`).

/// A key holding `->`, read against the declared aliases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FlowKey<'a> {
    /// `source->target.rest` with both clusters declared.
    Valid {
        source: &'a str,
        target: &'a str,
        rest: &'a str,
    },
    /// The text before `->` is not a declared alias.
    UndeclaredSource(&'a str),
    /// The text after `->` starts with no declared alias followed by `.`; the first dotted
    /// piece, or the whole tail.
    UndeclaredTarget(&'a str),
    /// `source->target` with no `.key`.
    NoKey,
}

/// Reads `key` as a flow key; `None` if it has no `->`. The target is the longest declared alias
/// that, followed by a dot, starts the text after `->`.
pub(crate) fn parse_flow_key<'a>(key: &'a str, aliases: &[String]) -> Option<FlowKey<'a>> {
    let arrow = key.find("->")?;
    let source = &key[..arrow];
    let after = &key[arrow + 2..];
    if !aliases.iter().any(|a| a == source) {
        return Some(FlowKey::UndeclaredSource(source));
    }
    let target = aliases
        .iter()
        .filter(|a| {
            after
                .strip_prefix(a.as_str())
                .is_some_and(|r| r.starts_with('.'))
        })
        .max_by_key(|a| a.len());
    match target {
        Some(target) => {
            let target = &after[..target.len()];
            let rest = &after[target.len() + 1..];
            Some(FlowKey::Valid {
                source,
                target,
                rest,
            })
        }
        None if aliases.iter().any(|a| a == after) => Some(FlowKey::NoKey),
        None => Some(FlowKey::UndeclaredTarget(
            after.split('.').next().unwrap_or(after),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_flow_keys() {
        let aliases: Vec<String> = ["A", "us-west", "eu", "eu.central"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(parse_flow_key("topics", &aliases), None);
        assert_eq!(
            parse_flow_key("A->us-west.topics.exclude", &aliases),
            Some(FlowKey::Valid {
                source: "A",
                target: "us-west",
                rest: "topics.exclude"
            })
        );
        assert_eq!(
            parse_flow_key("A->eu.central.enabled", &aliases),
            Some(FlowKey::Valid {
                source: "A",
                target: "eu.central",
                rest: "enabled"
            })
        );
        assert_eq!(
            parse_flow_key("X->A.enabled", &aliases),
            Some(FlowKey::UndeclaredSource("X"))
        );
        assert_eq!(
            parse_flow_key("A->C.enabled", &aliases),
            Some(FlowKey::UndeclaredTarget("C"))
        );
        assert_eq!(parse_flow_key("A->eu", &aliases), Some(FlowKey::NoKey));
        assert_eq!(
            parse_flow_key("->A.enabled", &aliases),
            Some(FlowKey::UndeclaredSource(""))
        );
    }
}
