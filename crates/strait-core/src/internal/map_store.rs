//! The offset map's home: a compacted internal topic on the target cluster
//! (`strait-offset-map.<source alias>.internal`, one partition), so the map survives restarts
//! (`docs/design.md` §4). Records are strait's own format (`strait_wire::offset_map::persist`).
//!
//! Only what changed since the last flush is written: each change to the map returns the entry
//! it made or grew, the flow notes it here, and a flush writes the newest entry per key.
//! Compaction keeps the newest record per key, so the topic holds one record per segment.
//!
//! When the flow compacts the map below a bound (`OffsetMap::compact_below`), it notes the
//! partition's floor and the removal of every dropped entry ([`MapStore::note_compacted`]); a
//! flush writes the floor with the other entries first and, once they are acknowledged, a
//! tombstone (null value) per removed key, so the topic's compaction deletes them. The floor
//! goes first because it is what makes the loader leave out what lies below it: tombstones
//! without the floor (a crash between the writes) would load a map with a hole at its start.

use indexmap::{IndexMap, IndexSet};
use strait_kafka::produce::RawProducer;
use strait_kafka::{Client, TopicPartition};
use strait_wire::offset_map::{
    Compacted, MapEntry, MapKey, MapLoader, MapRecord, OffsetMap, SourcePartition,
};

use super::error::InternalError;

/// Map flushes between two compaction passes (`flow/compact.rs`).
pub(crate) const COMPACT_EVERY_FLUSHES: u32 = 1000;

/// Generation written with every record. One writer per flow for now; scale-out will give each
/// owner of a partition a higher generation (`docs/design.md` §7).
const GENERATION: i32 = 0;

/// Reads and writes one flow's map topic.
#[derive(Debug)]
pub struct MapStore {
    topic: String,
    pending: IndexMap<MapKey, MapRecord>,
    /// Keys to delete (tombstones), written after `pending` is acknowledged.
    removed: IndexSet<MapKey>,
    /// Flushes until the next compaction pass is due ([`MapStore::compaction_due`]).
    until_compaction: u32,
}

impl MapStore {
    /// The map topic of flows from `source_alias`.
    pub fn topic_name(source_alias: &str) -> String {
        format!("strait-offset-map.{source_alias}.internal")
    }

    /// Creates the topic if missing (compacted, one partition) and loads the map from it.
    pub async fn open(
        target: &Client,
        source_alias: &str,
        replication_factor: i16,
    ) -> Result<(Self, OffsetMap), InternalError> {
        let topic = Self::topic_name(source_alias);
        super::ensure_compacted_topic(target, &topic, replication_factor).await?;
        let map = Self::load(target, &topic).await?;
        let store = Self {
            topic,
            pending: IndexMap::new(),
            removed: IndexSet::new(),
            // The first pass comes with the first flush: a large map loaded at start-up.
            until_compaction: 0,
        };
        Ok((store, map))
    }

    /// Reads the map of flows from `source_alias` as persisted on `target`, without creating
    /// anything. A missing topic is an empty map.
    pub async fn read(target: &Client, source_alias: &str) -> Result<OffsetMap, InternalError> {
        let topic = Self::topic_name(source_alias);
        if !target.metadata().await?.topics.contains_key(&topic) {
            return Ok(OffsetMap::new());
        }
        Self::load(target, &topic).await
    }

    async fn load(target: &Client, topic: &str) -> Result<OffsetMap, InternalError> {
        let mut loader = MapLoader::new();
        super::read_whole_topic(target, topic, |_, key, value| {
            loader
                .apply(&key.unwrap_or_default(), value.as_deref())
                .map_err(Into::into)
        })
        .await?;
        loader.finish().map_err(|source| InternalError::MapLoad {
            topic: topic.to_owned(),
            source,
        })
    }

    /// Notes a changed entry of `partition`'s map, to be written by the next flush.
    pub fn note(&mut self, partition: &SourcePartition, entry: MapEntry) {
        let record = MapRecord {
            partition: partition.clone(),
            entry,
            generation: GENERATION,
        };
        // Re-inserting moves nothing: order between keys does not matter, only the newest
        // value per key.
        let key = record.key();
        self.removed.shift_remove(&key);
        self.pending.insert(key, record);
    }

    /// Notes that `key` is no longer in the map: the next flush writes a tombstone for it,
    /// after every entry noted with [`note`](Self::note).
    pub fn note_removed(&mut self, key: MapKey) {
        self.pending.shift_remove(&key);
        self.removed.insert(key);
    }

    /// Notes what compacting `partition`'s map changed: its floor, then the removal of every
    /// entry it dropped.
    pub fn note_compacted(&mut self, partition: &SourcePartition, compacted: &Compacted) {
        self.note(partition, MapEntry::Floor(compacted.floor));
        for key in compacted.tombstones(partition) {
            self.note_removed(key);
        }
    }

    /// Whether a compaction pass is due (`flow/compact.rs`): asked before every flush, true
    /// once every [`COMPACT_EVERY_FLUSHES`] times.
    pub(crate) fn compaction_due(&mut self) -> bool {
        match self.until_compaction.checked_sub(1) {
            Some(left) => {
                self.until_compaction = left;
                false
            }
            None => {
                self.until_compaction = COMPACT_EVERY_FLUSHES - 1;
                true
            }
        }
    }

    /// Entries and removals noted and not yet written.
    pub fn pending(&self) -> usize {
        self.pending.len() + self.removed.len()
    }

    /// Writes every noted entry, in as many batches as they need (in order, all in flight
    /// together), then, once those are acknowledged, a tombstone for every noted removal.
    /// Returns the number of records written. On failure what was not acknowledged stays
    /// noted: writing a record again is harmless (the newest value per key is what counts).
    pub async fn flush(&mut self, producer: &RawProducer) -> Result<usize, InternalError> {
        let mut written = 0;
        if !self.pending.is_empty() {
            let mut kvs = Vec::with_capacity(self.pending.len());
            for r in self.pending.values() {
                kvs.push((encode_key(&r.key())?, Some(r.encode_value())));
            }
            self.send(producer, kvs).await?;
            written += self.pending.len();
            self.pending.clear();
        }
        if !self.removed.is_empty() {
            let kvs = self
                .removed
                .iter()
                .map(|k| Ok((encode_key(k)?, None)))
                .collect::<Result<Vec<_>, InternalError>>()?;
            self.send(producer, kvs).await?;
            written += self.removed.len();
            self.removed.clear();
        }
        Ok(written)
    }

    async fn send(
        &self,
        producer: &RawProducer,
        kvs: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    ) -> Result<(), InternalError> {
        let tp = TopicPartition::new(&self.topic, 0);
        let batches = super::batch::key_value_batches_nullable("offset-map records", kvs)?
            .into_iter()
            .map(|batch| (tp.clone(), batch))
            .collect();
        for ack in producer.send_all(batches).await {
            ack?;
        }
        Ok(())
    }
}

fn encode_key(key: &MapKey) -> Result<Vec<u8>, InternalError> {
    key.encode().map_err(InternalError::MapKey)
}

#[cfg(test)]
mod tests {
    use strait_wire::offset_map::PartitionMap;

    use super::*;

    fn store() -> MapStore {
        MapStore {
            topic: MapStore::topic_name("a"),
            pending: IndexMap::new(),
            removed: IndexSet::new(),
            until_compaction: 0,
        }
    }

    #[test]
    fn a_compaction_notes_the_floor_and_a_removal_per_dropped_entry() {
        let sp = SourcePartition::new("orders", 0);
        let mut map = PartitionMap::new();
        let mut store = store();
        for i in 0..10 {
            let segment = map.record(i * 11, i * 10, 10).unwrap();
            store.note(&sp, MapEntry::Segment(segment));
        }
        let compacted = map.compact_below(50).unwrap();
        store.note_compacted(&sp, &compacted);
        // Four segments dropped: their records are not written, tombstones are.
        assert_eq!(store.removed.len(), 4);
        assert_eq!(store.pending.len(), 10 - 4 + 1);
        assert!(store.pending.contains_key(&MapKey::Floor {
            partition: sp.clone()
        }));
        assert_eq!(store.pending(), 11);
        // Noting a removed key again (never the case for a dropped entry) cancels the removal.
        store.note(&sp, MapEntry::Segment(compacted.segments[0]));
        assert_eq!(store.removed.len(), 3);
    }

    #[test]
    fn a_compaction_pass_is_due_with_the_first_flush_and_then_every_so_many() {
        let mut store = store();
        assert!(store.compaction_due());
        let between = (0..COMPACT_EVERY_FLUSHES * 2)
            .filter(|_| store.compaction_due())
            .count();
        assert_eq!(between, 2);
    }
}
