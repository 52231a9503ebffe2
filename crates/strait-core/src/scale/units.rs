//! Units of work: a flow's partitions cut into `tasks.max` units, as MM2 cuts them into Connect
//! tasks. A unit is what the group's leader hands to a worker, what moves between workers, and
//! what a transactional id fences (`docs/design.md` §7.2).
//!
//! MM2 deals its known partitions round-robin over its tasks, so adding one partition can move
//! every partition after it to another task. A unit here is a function of the partition alone:
//! partition `p` of topic `t` belongs to unit `(crc32c(t) + p) mod units`. A topic's partitions
//! are dealt over all units in turn (starting at a unit its name picks, so that many small
//! topics do not all start at unit 0), a new partition or topic never moves an existing one,
//! and every worker computes the same answer without asking anyone.

use std::fmt;
use std::str::FromStr;

/// One unit of one flow: the `index`-th of the flow's `tasks.max`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Unit {
    /// The flow's name, `A->B`.
    pub flow: String,
    /// Which of the flow's units, from 0.
    pub index: u32,
}

impl Unit {
    /// The `index`-th unit of `flow`.
    pub fn new(flow: impl Into<String>, index: u32) -> Self {
        Self {
            flow: flow.into(),
            index,
        }
    }

    /// Every unit of `flow` when it has `count` of them (at least one).
    pub fn all_of(flow: &str, count: u32) -> impl Iterator<Item = Unit> + '_ {
        (0..count.max(1)).map(move |index| Unit::new(flow, index))
    }
}

/// `A->B/0`: the flow's name, a slash, the index. A flow's name holds no slash (cluster
/// aliases cannot), so the last slash splits it.
impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.flow, self.index)
    }
}

/// Why a unit's name could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a unit's name (`<flow>/<index>`, such as `A->B/0`)")]
pub struct BadUnit(String);

impl FromStr for Unit {
    type Err = BadUnit;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadUnit(s.to_owned());
        let (flow, index) = s.rsplit_once('/').ok_or_else(bad)?;
        if flow.is_empty() {
            return Err(bad());
        }
        Ok(Unit::new(flow, index.parse().map_err(|_| bad())?))
    }
}

/// The index of the unit that partition `partition` of `topic` belongs to, among `units`
/// (`tasks.max`; 0 is taken as 1).
pub fn unit_index(topic: &str, partition: i32, units: u32) -> u32 {
    let units = u64::from(units.max(1));
    // A negative partition is not one Kafka gives; it is kept apart from the rest.
    let partition = u64::from(partition.unsigned_abs());
    ((u64::from(crc32c::crc32c(topic.as_bytes())) + partition) % units) as u32
}

/// The partitions of one unit of a flow: those [`unit_index`] puts at `index` of `units`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnitFilter {
    /// Which unit.
    pub index: u32,
    /// How many units the flow has (`tasks.max`).
    pub units: u32,
}

impl UnitFilter {
    /// Whether partition `partition` of `topic` is in this unit.
    pub fn contains(&self, topic: &str, partition: i32) -> bool {
        unit_index(topic, partition, self.units) == self.index
    }

    /// Whether this unit does the flow's work that belongs to no partition (topic configs,
    /// deleting remote topics): unit 0.
    pub fn leads(&self) -> bool {
        self.index == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_round_trip_and_bad_ones_are_refused() {
        let unit = Unit::new("A->B", 7);
        assert_eq!(unit.to_string(), "A->B/7");
        assert_eq!("A->B/7".parse::<Unit>(), Ok(unit));
        for bad in ["A->B", "/3", "A->B/x", "A->B/-1", ""] {
            assert!(bad.parse::<Unit>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_topic_is_dealt_over_every_unit_in_turn() {
        let first = unit_index("orders", 0, 4);
        let dealt: Vec<u32> = (0..8).map(|p| unit_index("orders", p, 4)).collect();
        let expected: Vec<u32> = (0..8).map(|p| (first + p) % 4).collect();
        assert_eq!(dealt, expected);
        assert_eq!(unit_index("orders", 5, 1), 0);
        assert_eq!(unit_index("orders", 5, 0), 0);
    }

    proptest! {
        /// Each unit of a topic with `n × units` partitions gets `n` of them.
        #[test]
        fn a_topic_is_spread_evenly(topic in "[a-z.]{1,20}", units in 1u32..40, n in 1i32..5) {
            let mut counts = vec![0; units as usize];
            for p in 0..n * units as i32 {
                let index = unit_index(&topic, p, units);
                prop_assert!(index < units);
                counts[index as usize] += 1;
            }
            prop_assert!(counts.iter().all(|c| *c == n));
        }
    }
}
