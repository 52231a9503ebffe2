//! The last checkpoint per group and remote partition, and MM2's rule for when a new one is
//! written (`MirrorCheckpointTask.checkpointIsMoreRecent`, `docs/mm2-behaviour.md` §2.2 step 6). No
//! I/O.

use std::collections::BTreeMap;

use strait_kafka::TopicPartition;
use strait_wire::mm2::Checkpoint;

use crate::offsets::TranslatedOffset;

/// The checkpoint of `group` for one translated partition: the remote topic, the source
/// offset, the exact target offset and the commit metadata (empty if none). `None` when the
/// partition has no target position.
pub fn checkpoint_for(group: &str, offset: &TranslatedOffset) -> Option<Checkpoint> {
    Some(Checkpoint {
        group: group.to_owned(),
        topic: offset.remote_topic.clone(),
        partition: offset.partition,
        upstream_offset: offset.source_offset,
        downstream_offset: offset.target_offset()?,
        metadata: offset.metadata.clone().unwrap_or_default(),
    })
}

/// How a new checkpoint compares with the last one of its group and partition
/// (MM2's `MirrorCheckpointTask.checkpointIsMoreRecent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// No checkpoint yet for this group and partition: written.
    First,
    /// The source group was rewound (its offset is below the last checkpoint's upstream
    /// offset): written, even though the checkpoint moves backwards.
    Rewound,
    /// The downstream offset advanced: written.
    Advanced,
    /// The source group moved on while its downstream offset stayed (its position lies past
    /// what is mirrored): written, unlike MM2, so that the checkpoints carry every position
    /// the group had, and a failover made from them reads nothing again that the group had
    /// consumed (what lies past the mirror is counted as data at risk instead).
    Moved,
    /// The same checkpoint as the last one: not written again.
    Unchanged,
    /// The downstream offset is lower although the source group did not rewind: not written,
    /// so checkpoints never move backwards on their own.
    HeldBack,
}

impl Decision {
    /// Whether the checkpoint is written.
    pub fn emits(self) -> bool {
        matches!(
            self,
            Decision::First | Decision::Rewound | Decision::Advanced | Decision::Moved
        )
    }
}

/// The last checkpoint per group and remote partition: what was written, or read back from the
/// topic at start (MM2's `CheckpointStore`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckpointStore {
    groups: BTreeMap<String, BTreeMap<TopicPartition, Checkpoint>>,
}

impl CheckpointStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `checkpoint` is written, given the last one of its group and partition.
    pub fn decide(&self, checkpoint: &Checkpoint) -> Decision {
        let Some(last) = self.get(&checkpoint.group, &checkpoint.topic, checkpoint.partition)
        else {
            return Decision::First;
        };
        // MM2 tests the rewind first: a rewound group's checkpoint goes out even if its
        // downstream offset is also lower.
        if checkpoint.upstream_offset < last.upstream_offset {
            Decision::Rewound
        } else if checkpoint.downstream_offset > last.downstream_offset {
            Decision::Advanced
        } else if checkpoint.downstream_offset == last.downstream_offset {
            if checkpoint.upstream_offset > last.upstream_offset {
                Decision::Moved
            } else {
                Decision::Unchanged
            }
        } else {
            Decision::HeldBack
        }
    }

    /// Records `checkpoint` as the last of its group and partition.
    pub fn update(&mut self, checkpoint: Checkpoint) {
        let tp = TopicPartition::new(checkpoint.topic.clone(), checkpoint.partition);
        self.groups
            .entry(checkpoint.group.clone())
            .or_default()
            .insert(tp, checkpoint);
    }

    /// Forgets the checkpoint of `group` for remote `topic` / `partition` (a tombstone in the
    /// topic).
    pub fn remove(&mut self, group: &str, topic: &str, partition: i32) {
        if let Some(partitions) = self.groups.get_mut(group) {
            partitions.remove(&TopicPartition::new(topic, partition));
            if partitions.is_empty() {
                self.groups.remove(group);
            }
        }
    }

    /// The last checkpoint of `group` for remote `topic` / `partition`.
    pub fn get(&self, group: &str, topic: &str, partition: i32) -> Option<&Checkpoint> {
        self.groups
            .get(group)?
            .get(&TopicPartition::new(topic, partition))
    }

    /// The last checkpoints of `group`, by remote partition.
    pub fn group(&self, group: &str) -> Option<&BTreeMap<TopicPartition, Checkpoint>> {
        self.groups.get(group)
    }

    /// Every group with checkpoints, in order, with its checkpoints by remote partition.
    pub fn groups(&self) -> impl Iterator<Item = (&str, &BTreeMap<TopicPartition, Checkpoint>)> {
        self.groups.iter().map(|(g, ps)| (g.as_str(), ps))
    }

    /// Checkpoints held, over all groups.
    pub fn len(&self) -> usize {
        self.groups.values().map(BTreeMap::len).sum()
    }

    /// Whether no checkpoint is held.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::cp;
    use super::*;
    use strait_wire::offset_map::Translation;

    #[test]
    fn checkpoints_never_move_backwards_unless_the_group_rewinds() {
        let mut store = CheckpointStore::new();
        assert_eq!(store.decide(&cp("g", 0, 10, 15)), Decision::First);
        store.update(cp("g", 0, 10, 15));
        assert_eq!(store.decide(&cp("g", 0, 10, 15)), Decision::Unchanged);
        // The group moved on but the target position did not (past the mapped end): MM2
        // writes nothing, strait writes the position the group has (readiness counts it as
        // captured only once it is written).
        assert_eq!(store.decide(&cp("g", 0, 12, 15)), Decision::Moved);
        assert!(Decision::Moved.emits());
        assert_eq!(store.decide(&cp("g", 0, 12, 17)), Decision::Advanced);
        // Downstream lower without an upstream rewind: held back.
        assert_eq!(store.decide(&cp("g", 0, 11, 14)), Decision::HeldBack);
        assert!(!Decision::HeldBack.emits());
        // A rewind goes out, even though it moves backwards.
        assert_eq!(store.decide(&cp("g", 0, 3, 8)), Decision::Rewound);
        assert!(Decision::Rewound.emits());
        // Other partitions and groups are independent.
        assert_eq!(store.decide(&cp("g", 1, 0, 0)), Decision::First);
        assert_eq!(store.decide(&cp("h", 0, 0, 0)), Decision::First);
        store.update(cp("g", 0, 3, 8));
        assert_eq!(store.get("g", "A.orders", 0), Some(&cp("g", 0, 3, 8)));
        assert_eq!(store.len(), 1);
        store.remove("g", "A.orders", 0);
        assert!(store.is_empty());
    }

    #[test]
    fn a_checkpoint_keeps_the_remote_topic_and_the_metadata() {
        let mut t = TranslatedOffset {
            topic: "orders".into(),
            partition: 3,
            remote_topic: "A.orders".into(),
            source_offset: 1000,
            metadata: Some("app=billing;v=2".into()),
            translation: Translation::PastMappedEnd {
                target: 991,
                unreplicated: 4,
            },
        };
        let c = checkpoint_for("billing-app", &t).unwrap();
        assert_eq!(
            c,
            Checkpoint {
                group: "billing-app".into(),
                topic: "A.orders".into(),
                partition: 3,
                upstream_offset: 1000,
                downstream_offset: 991,
                metadata: "app=billing;v=2".into(),
            }
        );
        t.metadata = None;
        assert_eq!(checkpoint_for("g", &t).unwrap().metadata, "");
        t.translation = Translation::Unmapped;
        assert_eq!(checkpoint_for("g", &t), None);
    }
}
