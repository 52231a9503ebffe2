//! Flows that would carry a record back to a cluster it came from (issue: two flows with
//! `IdentityReplicationPolicy` made 85,000 records of 8 in 20 s). MM2 stops such loops only by
//! the source alias in a remote topic's name (`ReplicationPolicy::is_cycle`); the identity
//! policy has none, and aliases set differently per flow (`source.cluster.alias`) or an empty
//! separator defeat it too. strait refuses a file whose flows would loop, naming the flows and a
//! topic that would, before it mirrors anything (`docs/mirroring.md`, "Flows that loop").
//!
//! A loop is a cycle of enabled flows (A->B, B->A; or A->B, B->C, C->A) and a topic name on its
//! first cluster that every flow of the cycle in turn would mirror
//! ([`FlowConfig::should_replicate_topic`]), each reading the name the one before it wrote. The
//! topic filters are regexes, so the question "is there such a name?" is
//! answered by walking all the filters' automata together over the characters Kafka allows in
//! topic names (each flow's automata first fed the prefix its policy put before the name, e.g.
//! `A.` for the default policy), breadth first, so the shortest names come first. Each name
//! found is then sent round the cycle for real, through the flows' own filters and cycle checks;
//! the first one that comes back is the loop reported. Heartbeats, mirrored whatever `topics`
//! says, are sent round as `heartbeats`.
//!
//! When the walk cannot be made (a filter only the backtracking engine takes, or automata too
//! large to walk), strait says it cannot tell and refuses: an operator can narrow the filters.

use std::collections::{HashMap, VecDeque};

use regex_automata::dfa::{dense, Automaton};
use regex_automata::util::primitives::StateID;
use regex_automata::util::{start, syntax};
use regex_automata::{Anchored, MatchKind};

use super::{ClusterConfig, ConfigErrorReason, FlowConfig, LoopFound};
use crate::filter::Pattern;

/// The characters of a topic name (Kafka's `Topic.validate`).
const TOPIC_CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.";
/// Kafka's longest topic name.
const MAX_TOPIC_LEN: usize = 249;
/// Product states walked per cycle before strait gives up and says it cannot tell.
const MAX_STATES: usize = 200_000;
/// Names found by the walk and sent round a cycle before strait takes the cycle checks to
/// stop every one.
const MAX_CANDIDATES: usize = 64;
/// Bytes of one filter's automaton.
const MAX_DFA_BYTES: usize = 4 << 20;

/// Refuses flows that would carry a record back to a cluster it came from.
pub(super) fn check(
    flows: &[FlowConfig],
    clusters: &[ClusterConfig],
) -> Result<(), ConfigErrorReason> {
    let node = nodes(clusters);
    let node_of = |alias: &str| node.get(alias).copied().unwrap_or(usize::MAX);
    let edges: Vec<(usize, usize)> = flows
        .iter()
        .map(|f| (node_of(f.source.as_str()), node_of(f.target.as_str())))
        .collect();
    for cycle in cycles(&edges) {
        for start in 0..cycle.len() {
            let hops: Vec<&FlowConfig> = (0..cycle.len())
                .map(|i| &flows[cycle[(start + i) % cycle.len()]])
                .collect();
            check_cycle(&hops)?;
        }
    }
    Ok(())
}

/// One node per cluster alias. Two aliases of one cluster (the same bootstrap servers) are two
/// nodes: tests and demos point placeholder clusters at one address, and telling them apart
/// from one real cluster by its id needs a connection, which this check does not make.
fn nodes(clusters: &[ClusterConfig]) -> HashMap<String, usize> {
    clusters
        .iter()
        .enumerate()
        .map(|(i, cluster)| (cluster.alias.as_str().to_owned(), i))
        .collect()
}

/// The simple cycles of a graph given as edges (indices into `edges`), each once, starting at
/// its lowest node. A self-loop is a cycle of one edge.
fn cycles(edges: &[(usize, usize)]) -> Vec<Vec<usize>> {
    fn walk(
        edges: &[(usize, usize)],
        start: usize,
        at: usize,
        path: &mut Vec<usize>,
        on_path: &mut Vec<usize>,
        out: &mut Vec<Vec<usize>>,
    ) {
        for (i, &(from, to)) in edges.iter().enumerate() {
            if from != at {
                continue;
            }
            if to == start {
                let mut cycle = path.clone();
                cycle.push(i);
                out.push(cycle);
            } else if to > start && !on_path.contains(&to) {
                path.push(i);
                on_path.push(to);
                walk(edges, start, to, path, on_path, out);
                path.pop();
                on_path.pop();
            }
        }
    }
    let mut out = Vec::new();
    let mut starts: Vec<usize> = edges.iter().map(|&(from, _)| from).collect();
    starts.sort_unstable();
    starts.dedup();
    for start in starts {
        walk(
            edges,
            start,
            start,
            &mut Vec::new(),
            &mut vec![start],
            &mut out,
        );
    }
    out
}

/// Why a name did not make it round a cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stopped {
    /// A flow's `topics` or `topics.exclude` left it out.
    Filter,
    /// An internal topic, or a cycle the policy saw.
    Policy,
}

/// Sends `topic` round `hops`: the name it comes back as, or why it stops.
fn travel(hops: &[&FlowConfig], topic: &str) -> Result<String, Stopped> {
    let mut name = topic.to_owned();
    for flow in hops {
        if !flow.should_replicate_topic(&name) {
            let filtered = !(flow.topics.should_replicate_topic(&name)
                || (flow.heartbeats_replication && flow.policy.is_heartbeats_topic(&name)));
            return Err(if filtered {
                Stopped::Filter
            } else {
                Stopped::Policy
            });
        }
        name = flow.remote_topic(&name);
    }
    Ok(name)
}

fn check_cycle(hops: &[&FlowConfig]) -> Result<(), ConfigErrorReason> {
    let flows = hops.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ");
    let found = |topic: String, returns_as: String| {
        ConfigErrorReason::Loop(Box::new(LoopFound {
            endless: travel(hops, &returns_as).is_ok(),
            flows: flows.clone(),
            cluster: hops[0].source.as_str().to_owned(),
            topic,
            returns_as,
        }))
    };
    if let Ok(back) = travel(hops, "heartbeats") {
        return Err(found("heartbeats".to_owned(), back));
    }
    match search(hops) {
        Search::Loop(topic, back) => Err(found(topic, back)),
        Search::None => Ok(()),
        Search::Unknown(why) => Err(ConfigErrorReason::MaybeLoop { flows, why }),
    }
}

enum Search {
    Loop(String, String),
    None,
    Unknown(String),
}

/// One automaton the walk carries: the names it must match, or must not.
struct Constraint {
    dfa: dense::DFA<Vec<u32>>,
    must_match: bool,
    /// Its state after the prefix the hop's policy puts before the name.
    start: StateID,
}

fn search(hops: &[&FlowConfig]) -> Search {
    let mut constraints = Vec::new();
    let mut approximate = None;
    // A name ending in `heartbeats` is a heartbeats topic for the identity policy (sent round
    // on its own above); the walk looks at the others.
    match Constraint::new(".*heartbeats", "", false) {
        Ok(c) => constraints.push(c),
        Err(why) => return Search::Unknown(why),
    }
    let mut prefix = String::new();
    for flow in hops {
        let lists = [
            (flow.topics.include().pattern(), true),
            (flow.topics.exclude().pattern(), false),
            (Pattern::Regex(flow.policy.internal_topics_pattern()), false),
        ];
        for (pattern, must_match) in lists {
            match pattern {
                Pattern::Nothing if must_match => return Search::None,
                Pattern::Nothing => {}
                Pattern::Backtracking => {
                    approximate = Some(format!(
                        "flow {}'s topic filters use look-around or back-references",
                        flow.name()
                    ));
                }
                Pattern::Regex(re) => match Constraint::new(&re, &prefix, must_match) {
                    Ok(c) => constraints.push(c),
                    Err(why) => return Search::Unknown(why),
                },
            }
        }
        prefix = format!(
            "{}{prefix}",
            flow.policy.remote_topic_prefix(flow.source_alias.as_str())
        );
    }
    walk(hops, &constraints, approximate)
}

impl Constraint {
    fn new(pattern: &str, prefix: &str, must_match: bool) -> Result<Self, String> {
        let dfa = dense::Builder::new()
            .configure(
                dense::DFA::config()
                    .match_kind(MatchKind::All)
                    .start_kind(regex_automata::dfa::StartKind::Anchored)
                    .dfa_size_limit(Some(MAX_DFA_BYTES))
                    .determinize_size_limit(Some(MAX_DFA_BYTES)),
            )
            .syntax(syntax::Config::new().unicode(false).utf8(false))
            .build(pattern)
            .map_err(|e| format!("the topic filter `{pattern}` cannot be walked: {e}"))?;
        let mut at = dfa
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .map_err(|e| format!("the topic filter `{pattern}` cannot be walked: {e}"))?;
        for &b in prefix.as_bytes() {
            at = dfa.next_state(at, b);
        }
        Ok(Self {
            dfa,
            must_match,
            start: at,
        })
    }

    fn hopeless(&self, at: StateID) -> bool {
        self.must_match && self.dfa.is_dead_state(at)
    }

    fn satisfied(&self, at: StateID) -> bool {
        let end = self.dfa.next_eoi_state(at);
        self.dfa.is_match_state(end) == self.must_match
    }
}

/// Breadth-first over the product of `constraints`' automata, on topic-name characters (the
/// separators last, so names without them come first).
fn walk(hops: &[&FlowConfig], constraints: &[Constraint], approximate: Option<String>) -> Search {
    let separators: Vec<u8> = hops
        .iter()
        .flat_map(|f| f.policy.separator().bytes())
        .collect();
    let mut alphabet: Vec<u8> = TOPIC_CHARS
        .iter()
        .copied()
        .filter(|b| !separators.contains(b))
        .collect();
    alphabet.extend(TOPIC_CHARS.iter().filter(|b| separators.contains(b)));

    let first: Vec<StateID> = constraints.iter().map(|c| c.start).collect();
    // Each node: its states, its parent's index and the byte that led here.
    let mut nodes: Vec<(Vec<StateID>, usize, u8, usize)> = vec![(first.clone(), 0, 0, 0)];
    let mut seen: HashMap<Vec<StateID>, ()> = HashMap::from([(first, ())]);
    let mut queue = VecDeque::from([0usize]);
    let (mut candidates, mut stopped_by_filter, mut stopped_by_policy) = (0, 0, 0);
    while let Some(index) = queue.pop_front() {
        let depth = nodes[index].3;
        if depth > 0
            && constraints
                .iter()
                .zip(&nodes[index].0)
                .all(|(c, &at)| c.satisfied(at))
        {
            let topic = spell(&nodes, index);
            match travel(hops, &topic) {
                Ok(back) => return Search::Loop(topic, back),
                Err(Stopped::Filter) => stopped_by_filter += 1,
                Err(Stopped::Policy) => stopped_by_policy += 1,
            }
            candidates += 1;
            if candidates >= MAX_CANDIDATES {
                break;
            }
        }
        if depth >= MAX_TOPIC_LEN {
            continue;
        }
        for &b in &alphabet {
            let next: Vec<StateID> = constraints
                .iter()
                .zip(&nodes[index].0)
                .map(|(c, &at)| c.dfa.next_state(at, b))
                .collect();
            if constraints.iter().zip(&next).any(|(c, &at)| c.hopeless(at))
                || seen.contains_key(&next)
            {
                continue;
            }
            if nodes.len() >= MAX_STATES {
                return if candidates > 0 && stopped_by_policy > 0 {
                    Search::None
                } else {
                    Search::Unknown(format!(
                        "its topic filters are too large to compare (over {MAX_STATES} states)"
                    ))
                };
            }
            seen.insert(next.clone(), ());
            nodes.push((next, index, b, depth + 1));
            queue.push_back(nodes.len() - 1);
        }
    }
    match approximate {
        // The walk took a backtracking filter to match every name: a name it found that the
        // real filter refused says nothing about the names it did not find.
        Some(why) if stopped_by_filter > 0 && stopped_by_policy == 0 => Search::Unknown(why),
        _ => Search::None,
    }
}

fn spell(nodes: &[(Vec<StateID>, usize, u8, usize)], mut index: usize) -> String {
    let mut bytes = Vec::new();
    while index != 0 {
        bytes.push(nodes[index].2);
        index = nodes[index].1;
    }
    bytes.reverse();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ConfigError, StraitConfig};

    const IDENTITY: &str =
        "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n";

    fn parse(extra: &str) -> Result<StraitConfig, ConfigError> {
        StraitConfig::parse(
            &format!(
                "clusters = A, B, C\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n\
                 C.bootstrap.servers = c:9092\n{extra}"
            ),
            "mm2.properties",
        )
    }

    /// The loop found: (flows, cluster, topic, comes back as, endless).
    fn looped(extra: &str) -> (String, String, String, String, bool) {
        match parse(extra).map(|_| ()).map_err(|e| e.reason) {
            Err(ConfigErrorReason::Loop(found)) => {
                let LoopFound {
                    flows,
                    cluster,
                    topic,
                    returns_as,
                    endless,
                } = *found;
                (flows, cluster, topic, returns_as, endless)
            }
            other => panic!("expected a loop, got {other:?}"),
        }
    }

    fn runs(extra: &str) {
        if let Err(e) = parse(extra) {
            panic!("refused: {e}");
        }
    }

    #[test]
    fn identity_both_ways_loops_without_end() {
        let (flows, cluster, topic, back, endless) = looped(&format!(
            "{IDENTITY}A->B.enabled = true\nB->A.enabled = true\ntopics = loop\n"
        ));
        assert_eq!(flows, "A->B, B->A");
        assert_eq!(cluster, "A");
        assert_eq!(
            (topic.as_str(), back.as_str(), endless),
            ("loop", "loop", true)
        );
        let message = parse(&format!(
            "{IDENTITY}A->B.enabled = true\nB->A.enabled = true\ntopics = loop\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            message.contains("flows A->B, B->A would mirror records back")
                && message.contains("round again without end"),
            "{message}"
        );
    }

    #[test]
    fn identity_one_way_or_with_disjoint_filters_runs() {
        runs(&format!(
            "{IDENTITY}A->B.enabled = true\nB->C.enabled = true\n"
        ));
        runs(&format!(
            "{IDENTITY}A->B.enabled = true\nB->A.enabled = true\n\
             A->B.topics = a-.*\nB->A.topics = b-.*\n"
        ));
        // Disjoint through an exclude: B->A mirrors only what A->B leaves out.
        runs(&format!(
            "{IDENTITY}A->B.enabled = true\nB->A.enabled = true\n\
             A->B.topics.exclude = from-b\\..*, __.*\nB->A.topics = from-b\\..*\n"
        ));
        // A filter that matches nothing.
        runs(&format!(
            "{IDENTITY}A->B.enabled = true\nB->A.enabled = true\nB->A.topics =\n"
        ));
    }

    #[test]
    fn overlapping_filters_find_the_shared_topic() {
        let (flows, cluster, topic, _, endless) = looped(&format!(
            "{IDENTITY}A->B.enabled = true\nB->A.enabled = true\n\
             A->B.topics = .*\nB->A.topics = orders|pay(ments)?\n"
        ));
        assert_eq!((flows.as_str(), cluster.as_str()), ("A->B, B->A", "A"));
        assert!(
            topic == "orders" || topic == "pay" || topic == "payments",
            "{topic}"
        );
        assert!(endless);
        // Patterns that share only long names are found too.
        let (_, _, topic, _, _) = looped(&format!(
            "{IDENTITY}A->B.enabled = true\nB->A.enabled = true\n\
             A->B.topics = [a-c]+-x{{3}}\nB->A.topics = c.*x\n"
        ));
        assert!(topic.starts_with('c') && topic.ends_with("-xxx"), "{topic}");
    }

    #[test]
    fn three_flows_in_a_ring_loop() {
        let (flows, _, topic, back, _) = looped(&format!(
            "{IDENTITY}A->B.enabled = true\nB->C.enabled = true\nC->A.enabled = true\n\
             topics = t.*\n"
        ));
        assert_eq!(flows, "A->B, B->C, C->A");
        assert_eq!(topic, back);
    }

    #[test]
    fn the_default_policy_stops_its_cycles() {
        runs("A->B.enabled = true\nB->A.enabled = true\n");
        runs("A->B.enabled = true\nB->C.enabled = true\nC->A.enabled = true\n");
        runs("A->B.enabled = true\nB->A.enabled = true\nreplication.policy.separator = _\n");
    }

    #[test]
    fn aliases_that_disagree_let_records_come_back() {
        // A->B names A `east`, but B->A calls its target `A`: B->A cannot see that `east.x`
        // came from A, and sends it back once (KAFKA-9914's case).
        let (flows, cluster, topic, back, endless) =
            looped("A->B.enabled = true\nB->A.enabled = true\nA->B.source.cluster.alias = east\n");
        assert_eq!((flows.as_str(), cluster.as_str()), ("A->B, B->A", "A"));
        assert_eq!(back, format!("B.east.{topic}"));
        assert!(!endless);
    }

    #[test]
    fn heartbeats_are_sent_round_on_their_own() {
        // `topics` leaves every topic out, but heartbeats are mirrored anyway, and aliases that
        // disagree keep the default policy from seeing where they came from.
        let (_, _, topic, back, endless) = looped(
            "A->B.enabled = true\nB->A.enabled = true\nA->B.source.cluster.alias = east\n\
             topics =\n",
        );
        assert_eq!(
            (topic.as_str(), back.as_str(), endless),
            ("heartbeats", "B.east.heartbeats", false)
        );
    }

    #[test]
    fn a_backtracking_filter_is_checked_by_the_names_it_passes() {
        let (_, _, topic, _, _) = looped(&format!(
            "{IDENTITY}A->B.enabled = true\nB->A.enabled = true\ntopics = (?!tmp).*\n"
        ));
        assert!(!topic.starts_with("tmp"), "{topic}");
        // The walk cannot see what the look-ahead leaves out, and the names it finds are all
        // refused: strait cannot tell, and says so.
        match parse(&format!(
            "{IDENTITY}A->B.enabled = true\nB->A.enabled = true\n\
             A->B.topics = (?=[a-z]{{60}}).*\nB->A.topics = .*\n"
        ))
        .map(|_| ())
        .map_err(|e| e.reason)
        {
            Err(ConfigErrorReason::MaybeLoop { flows, why }) => {
                assert_eq!(flows, "A->B, B->A");
                assert!(why.contains("look-around"), "{why}");
            }
            other => panic!("expected strait to say it cannot tell, got {other:?}"),
        }
    }

    #[test]
    fn cycles_are_each_found_once() {
        let edges = [(0, 1), (1, 0), (1, 2), (2, 0), (2, 2)];
        let mut found = cycles(&edges);
        found.sort();
        assert_eq!(found, vec![vec![0, 1], vec![0, 2, 3], vec![4]]);
    }
}
