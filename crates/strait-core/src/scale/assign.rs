//! The leader's assignor: every unit to exactly one member, balanced (counts differ by at most
//! one) and sticky (a member keeps what it owned up to its share, so a rebalance moves only
//! what must move). A pure function of what the members said when they joined.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::units::Unit;

/// What one member said about itself when it joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// Its member id.
    pub member: String,
    /// The units it owned.
    pub owned: BTreeSet<Unit>,
    /// The generation it owned them in (-1 for a member that owned nothing yet). When two
    /// members claim one unit (a worker that was removed while paused, and its successor), the
    /// later generation keeps it.
    pub generation: i32,
}

/// Each member's units: every unit of `units` to exactly one of `claims`' members, the counts
/// differing by at most one. A member keeps the units it claims up to its share; the members
/// that claim the most get the larger shares. The units left over go, one flow's units spread
/// as widely as possible, to the members furthest below their share. Units that no longer
/// exist are dropped. Same input, same answer, on whichever member leads.
pub fn assign(units: &BTreeSet<Unit>, claims: &[Claim]) -> BTreeMap<String, BTreeSet<Unit>> {
    let mut assignment: BTreeMap<String, BTreeSet<Unit>> = claims
        .iter()
        .map(|c| (c.member.clone(), BTreeSet::new()))
        .collect();
    if assignment.is_empty() {
        return assignment;
    }

    // Each existing unit to its one rightful claimant: the latest generation, then the lowest
    // member id.
    let mut holder: BTreeMap<&Unit, (i32, &str)> = BTreeMap::new();
    for claim in claims {
        for unit in claim.owned.iter().filter(|u| units.contains(*u)) {
            let candidate = (claim.generation, claim.member.as_str());
            holder
                .entry(unit)
                .and_modify(|held| {
                    if (candidate.0, std::cmp::Reverse(candidate.1))
                        > (held.0, std::cmp::Reverse(held.1))
                    {
                        *held = candidate;
                    }
                })
                .or_insert(candidate);
        }
    }
    let mut kept: BTreeMap<&str, Vec<&Unit>> = BTreeMap::new();
    for (unit, (_, member)) in &holder {
        kept.entry(member).or_default().push(unit);
    }

    // Shares: the members keeping the most get the larger ones.
    let members = assignment.len();
    let (base, larger) = (units.len() / members, units.len() % members);
    let mut order: Vec<&str> = assignment.keys().map(String::as_str).collect();
    order.sort_by_key(|m| std::cmp::Reverse(kept.get(m).map_or(0, Vec::len)));
    let share: BTreeMap<String, usize> = order
        .iter()
        .enumerate()
        .map(|(i, m)| ((*m).to_owned(), base + usize::from(i < larger)))
        .collect();

    // Keep up to the share, index-major (every flow's unit 0, then every flow's unit 1 ...)
    // so that a member keeping part of what it had keeps some of each flow; the rest is free.
    let mut free: Vec<&Unit> = units.iter().filter(|u| !holder.contains_key(u)).collect();
    for (member, mut units) in kept {
        units.sort_by(|a, b| index_major(a, b));
        let mine = assignment.get_mut(member).expect("claims name members");
        for unit in units {
            if mine.len() < share[member] {
                mine.insert(unit.clone());
            } else {
                free.push(unit);
            }
        }
    }

    // The free units, index-major (every flow's unit 0, then every flow's unit 1 ...), each to
    // the member furthest below its share that holds the fewest of that flow's units.
    free.sort_by(|a, b| index_major(a, b));
    // Per member: how many units it holds, and of each flow (kept up to date as units are
    // dealt, so a unit costs one pass over the members).
    let mut held: Vec<(&str, usize, usize, HashMap<&str, usize>)> = assignment
        .iter()
        .map(|(m, mine)| {
            let mut of_flow: HashMap<&str, usize> = HashMap::new();
            for u in mine {
                *of_flow.entry(u.flow.as_str()).or_default() += 1;
            }
            (m.as_str(), mine.len(), share[m], of_flow)
        })
        .collect();
    let mut dealt: Vec<(&str, &Unit)> = Vec::with_capacity(free.len());
    for unit in free {
        let chosen = held
            .iter_mut()
            .filter(|(_, count, share, _)| count < share)
            .min_by_key(|(m, count, share, of_flow)| {
                let of_flow = of_flow.get(unit.flow.as_str()).copied().unwrap_or(0);
                (of_flow, std::cmp::Reverse(*share - *count), *m)
            })
            .expect("the shares add up to the units");
        chosen.1 += 1;
        *chosen.3.entry(unit.flow.as_str()).or_default() += 1;
        dealt.push((chosen.0, unit));
    }
    let dealt: Vec<(String, Unit)> = dealt
        .into_iter()
        .map(|(m, u)| (m.to_owned(), u.clone()))
        .collect();
    drop(held);
    for (member, unit) in dealt {
        assignment
            .get_mut(&member)
            .expect("chosen among the members")
            .insert(unit);
    }
    assignment
}

/// The assignment that may take effect now: `assignment` without the units another member still
/// claims. A unit moves in two rebalances, as in Kafka's cooperative protocol (KIP-429): in the
/// first, its holder is not given it back, stops it and joins again; in the second, nobody claims
/// it and its new owner gets it. So two members never run one unit at once, whether or not the
/// unit's writes are fenced by a transactional id (a flow without exactly-once has no fencing but
/// this and the lease, `strait_kafka::lease`). A unit two members claim goes to neither until
/// both have let it go.
pub fn hand_over(
    mut assignment: BTreeMap<String, BTreeSet<Unit>>,
    claims: &[Claim],
) -> BTreeMap<String, BTreeSet<Unit>> {
    for (member, units) in &mut assignment {
        units.retain(|unit| {
            !claims
                .iter()
                .any(|c| &c.member != member && c.owned.contains(unit))
        });
    }
    assignment
}

/// What the members of `assignment` claim when they join again: each its units, as owned in
/// `generation`.
pub fn claims_of(assignment: &BTreeMap<String, BTreeSet<Unit>>, generation: i32) -> Vec<Claim> {
    assignment
        .iter()
        .map(|(member, owned)| Claim {
            member: member.clone(),
            owned: owned.clone(),
            generation,
        })
        .collect()
}

/// Every flow's unit 0, then every flow's unit 1, and so on.
fn index_major(a: &Unit, b: &Unit) -> std::cmp::Ordering {
    (a.index, &a.flow).cmp(&(b.index, &b.flow))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn units(flows: &[(&str, u32)]) -> BTreeSet<Unit> {
        flows
            .iter()
            .flat_map(|(flow, n)| Unit::all_of(flow, *n))
            .collect()
    }

    fn fresh(members: &[&str]) -> Vec<Claim> {
        members
            .iter()
            .map(|m| Claim {
                member: (*m).to_owned(),
                owned: BTreeSet::new(),
                generation: -1,
            })
            .collect()
    }

    /// Every unit exactly once, nothing else, counts within one of each other.
    fn check_complete_and_balanced(
        units: &BTreeSet<Unit>,
        assignment: &BTreeMap<String, BTreeSet<Unit>>,
    ) -> Result<(), TestCaseError> {
        let mut seen = BTreeSet::new();
        for owned in assignment.values() {
            for unit in owned {
                prop_assert!(seen.insert(unit.clone()), "{unit} assigned twice");
            }
        }
        prop_assert_eq!(&seen, units);
        let counts: Vec<usize> = assignment.values().map(BTreeSet::len).collect();
        let (min, max) = (counts.iter().min(), counts.iter().max());
        prop_assert!(max.unwrap_or(&0) - min.unwrap_or(&0) <= 1, "{counts:?}");
        Ok(())
    }

    #[test]
    fn a_flows_units_are_spread_over_the_members() {
        let all = units(&[("A->B", 4), ("B->A", 4)]);
        let assignment = assign(&all, &fresh(&["w1", "w2", "w3", "w4"]));
        for owned in assignment.values() {
            let flows: Vec<&str> = owned.iter().map(|u| u.flow.as_str()).collect();
            assert_eq!(flows, ["A->B", "B->A"], "{assignment:?}");
        }
    }

    #[test]
    fn a_member_giving_units_away_keeps_some_of_each_flow() {
        let all = units(&[("A->B", 4), ("B->A", 4)]);
        let alone = assign(&all, &fresh(&["w1"]));
        let mut claims = claims_of(&alone, 1);
        claims.extend(fresh(&["w2", "w3"]));
        let assignment = assign(&all, &claims);
        for owned in assignment.values() {
            let flows: BTreeSet<&str> = owned.iter().map(|u| u.flow.as_str()).collect();
            assert_eq!(flows.len(), 2, "{assignment:?}");
        }
    }

    #[test]
    fn a_stale_claim_loses_to_the_later_generation() {
        let all = units(&[("A->B", 2)]);
        let unit = Unit::new("A->B", 0);
        let claims = vec![
            Claim {
                member: "zombie".into(),
                owned: BTreeSet::from([unit.clone()]),
                generation: 3,
            },
            Claim {
                member: "successor".into(),
                owned: BTreeSet::from([unit.clone()]),
                generation: 5,
            },
        ];
        let assignment = assign(&all, &claims);
        assert!(assignment["successor"].contains(&unit), "{assignment:?}");
        assert_eq!(assignment["zombie"], BTreeSet::from([Unit::new("A->B", 1)]));
    }

    #[test]
    fn no_members_no_assignment_and_gone_units_are_dropped() {
        assert!(assign(&units(&[("A->B", 3)]), &[]).is_empty());
        let claims = vec![Claim {
            member: "w1".into(),
            owned: BTreeSet::from([Unit::new("gone->B", 0), Unit::new("A->B", 0)]),
            generation: 1,
        }];
        let assignment = assign(&units(&[("A->B", 1)]), &claims);
        assert_eq!(assignment["w1"], BTreeSet::from([Unit::new("A->B", 0)]));
    }

    fn setup() -> impl Strategy<Value = (BTreeSet<Unit>, Vec<String>)> {
        (
            prop::collection::vec(1u32..12, 1..4),
            prop::collection::btree_set("[a-f]{1,3}", 1..8),
        )
            .prop_map(|(flows, members)| {
                let names: Vec<String> = (0..flows.len()).map(|i| format!("F{i}->T")).collect();
                let units = names
                    .iter()
                    .zip(&flows)
                    .flat_map(|(flow, n)| Unit::all_of(flow, *n))
                    .collect();
                (units, members.into_iter().collect())
            })
    }

    proptest! {
        /// From nothing, and again with what the last round gave: complete, balanced, and the
        /// second time nothing moves.
        #[test]
        fn complete_balanced_and_stable((units, members) in setup()) {
            let names: Vec<&str> = members.iter().map(String::as_str).collect();
            let first = assign(&units, &fresh(&names));
            check_complete_and_balanced(&units, &first)?;
            let again = assign(&units, &claims_of(&first, 1));
            prop_assert_eq!(again, first);
        }

        /// A member joins: only units that go to it move, and it gets its share.
        #[test]
        fn a_new_member_takes_only_its_share((units, members) in setup()) {
            let names: Vec<&str> = members.iter().map(String::as_str).collect();
            let before = assign(&units, &fresh(&names));
            let mut claims = claims_of(&before, 1);
            claims.extend(fresh(&["zz-new"]));
            let after = assign(&units, &claims);
            check_complete_and_balanced(&units, &after)?;
            for (member, owned) in &before {
                prop_assert!(after[member].is_subset(owned), "{member} was given a unit");
            }
        }

        /// A member leaves (or is removed): only its units move.
        #[test]
        fn a_member_leaving_moves_only_its_units((units, members) in setup()) {
            prop_assume!(members.len() > 1);
            let names: Vec<&str> = members.iter().map(String::as_str).collect();
            let before = assign(&units, &fresh(&names));
            let gone = &members[0];
            let claims: Vec<Claim> = claims_of(&before, 1)
                .into_iter()
                .filter(|c| &c.member != gone)
                .collect();
            let after = assign(&units, &claims);
            check_complete_and_balanced(&units, &after)?;
            for (member, owned) in &after {
                prop_assert!(before[member].is_subset(owned), "{member} lost a unit");
            }
        }

        /// Handed over, no unit goes to a member while another still claims it, whatever the
        /// claims; the rest of the assignment stands; and once the holders have let go (joined
        /// again claiming what they were handed), the next rebalance is complete.
        #[test]
        fn a_unit_is_never_handed_to_one_member_while_another_holds_it(
            (units, members) in setup(),
            picks in prop::collection::vec((any::<prop::sample::Index>(), 0usize..8, -1i32..3), 0..40),
        ) {
            let all: Vec<&Unit> = units.iter().collect();
            let mut claims = fresh(&members.iter().map(String::as_str).collect::<Vec<_>>());
            for (unit, member, generation) in picks {
                let claim = &mut claims[member % members.len()];
                claim.owned.insert((*unit.get(&all)).clone());
                claim.generation = generation;
            }
            let full = assign(&units, &claims);
            let now = hand_over(full.clone(), &claims);
            for (member, owned) in &now {
                prop_assert!(owned.is_subset(&full[member]));
                for unit in owned {
                    for c in claims.iter().filter(|c| &c.member != member) {
                        prop_assert!(!c.owned.contains(unit), "{unit} to {member} while {} holds it", c.member);
                    }
                }
                for unit in full[member].difference(owned) {
                    prop_assert!(claims.iter().any(|c| &c.member != member && c.owned.contains(unit)));
                }
            }
            let next = claims_of(&now, 2);
            let settled = hand_over(assign(&units, &next), &next);
            check_complete_and_balanced(&units, &settled)?;
        }

        /// Whatever the members claim (overlapping, stale, of units that are gone): complete
        /// and balanced.
        #[test]
        fn any_claims_give_a_complete_balanced_assignment(
            (units, members) in setup(),
            picks in prop::collection::vec((any::<prop::sample::Index>(), 0usize..8, -1i32..3), 0..40),
        ) {
            let all: Vec<&Unit> = units.iter().collect();
            let mut claims = fresh(&members.iter().map(String::as_str).collect::<Vec<_>>());
            for (unit, member, generation) in picks {
                let claim = &mut claims[member % members.len()];
                claim.owned.insert((*unit.get(&all)).clone());
                claim.owned.insert(Unit::new("gone->T", 0));
                claim.generation = generation;
            }
            check_complete_and_balanced(&units, &assign(&units, &claims))?;
        }
    }
}
