//! The offset map's home: a compacted internal topic on the target cluster
//! (`strait-offset-map.<source alias>.internal`, one partition), so the map survives restarts
//! (`docs/design.md` §4). Records are strait's own format (`strait_wire::offset_map::persist`).
//!
//! Only what changed since the last flush is written: each change to the map returns the entry
//! it made or grew, the flow notes it here, and a flush writes the newest entry per key.
//! Compaction keeps the newest record per key, so the topic holds one record per segment.
//!
//! The flow writes the map beside its data ([`MapStore::start_flush`]): the changes of a round
//! go to the topic while the next round's batches are written, through a producer of the
//! store's own (`writer.rs`), and the map they belong to is published to readers once they are
//! acknowledged. A crash meanwhile leaves records on the target beyond the persisted map, as a
//! crash between a round's produce and its map write always could: start-up matches them
//! against the source (`flow/recover/`).
//!
//! When the flow compacts the map below a bound (`OffsetMap::compact_below`), it notes the
//! partition's floor and the removal of every dropped entry ([`MapStore::note_compacted`]); a
//! flush writes the floor with the other entries first and, once they are acknowledged, a
//! tombstone (null value) per removed key, so the topic's compaction deletes them. The floor
//! goes first because it is what makes the loader leave out what lies below it: tombstones
//! without the floor (a crash between the writes) would load a map with a hole at its start.

use std::sync::Arc;

use foldhash::fast::RandomState as Fast;
use indexmap::{IndexMap, IndexSet};
use strait_kafka::produce::ProducerConfig;
use strait_kafka::Client;
use strait_wire::offset_map::{
    Compacted, MapEntry, MapKey, MapLoader, MapRecord, OffsetMap, PartitionMap, SourcePartition,
};
use strait_wire::RawBatch;

use super::error::InternalError;
use super::writer::{BackgroundWriter, Finished};

/// Map flushes between two compaction passes (`flow/compact.rs`).
pub(crate) const COMPACT_EVERY_FLUSHES: u32 = 1000;

/// Generation written with every record. One writer per flow for now; scale-out will give each
/// owner of a partition a higher generation (`docs/design.md` §7).
const GENERATION: i32 = 0;

/// Reads and writes one flow's map topic.
#[derive(Debug)]
pub struct MapStore {
    pending: IndexMap<MapKey, MapRecord, Fast>,
    /// Keys to delete (tombstones), written after `pending` is acknowledged.
    removed: IndexSet<MapKey, Fast>,
    /// Flushes until the next compaction pass is due ([`MapStore::compaction_due`]).
    until_compaction: u32,
    /// Writes beside the flow; `None` in unit tests, which never write.
    writer: Option<BackgroundWriter<MapWrite>>,
    /// The map topic's name.
    topic: String,
    /// Records written so far (tombstones included).
    written: u64,
}

/// The batches of one write, phase by phase (entries, then the tombstones they make safe).
type Phases = Vec<Vec<RawBatch>>;

/// A write of the map taken by a caller that writes it through its own producer
/// ([`MapStore::take_write`]).
#[derive(Debug)]
pub(crate) struct TakenWrite(MapWrite);

/// The notes of a store not yet written ([`MapStore::notes`]).
#[derive(Debug, Clone)]
pub(crate) struct Notes {
    pending: IndexMap<MapKey, MapRecord, Fast>,
    removed: IndexSet<MapKey, Fast>,
}

/// What one write of the map carries: the entries and removals it writes, and the map they
/// were taken from, published once they are on the topic.
#[derive(Debug)]
struct MapWrite {
    entries: Vec<(MapKey, MapRecord)>,
    removed: Vec<MapKey>,
    map: Arc<OffsetMap>,
}

/// A reader that follows a map topic: the records applied so far and where the next read
/// starts ([`MapStore::follow`]).
#[derive(Debug, Default)]
pub(crate) struct MapFollower {
    loader: MapLoader,
    /// The next offset to read; 0 before the first read.
    next: i64,
}

impl MapFollower {
    /// Applies what was written to `topic` since the last read: `Some(map)` when anything
    /// was (the whole map, built again), `None` when nothing was. Records were deleted or the
    /// topic made again since the last read: it is read again from the start.
    pub(crate) async fn read(
        &mut self,
        target: &Client,
        topic: &str,
    ) -> Result<Option<OffsetMap>, InternalError> {
        let mut applied = 0usize;
        loop {
            let loader = &mut self.loader;
            let read = super::read_topic_from(target, topic, self.next, |_, _, key, value| {
                applied += 1;
                loader
                    .apply(&key.unwrap_or_default(), value.as_deref())
                    .map_err(Into::into)
            })
            .await?;
            match read {
                // No unit has written yet.
                None => return Ok(None),
                Some(read) if read.gap && self.next > 0 => {
                    *self = Self::default();
                    applied = 0;
                }
                Some(read) => {
                    self.next = read.end;
                    break;
                }
            }
        }
        if applied == 0 {
            return Ok(None);
        }
        self.loader
            .map()
            .map(Some)
            .map_err(|source| InternalError::MapLoad {
                topic: topic.to_owned(),
                source,
            })
    }
}

impl MapStore {
    /// The map topic of flows from `source_alias`.
    pub fn topic_name(source_alias: &str) -> String {
        format!("strait-offset-map.{source_alias}.internal")
    }

    /// Creates the topic if missing (compacted, one partition), loads the map from it, and
    /// makes the store's producer (`producer`: the flow's target producer settings). With
    /// `None`, the store has no producer: the flow writes the map in its own transactions
    /// ([`MapStore::take_write`]).
    pub async fn open(
        target: &Client,
        source_alias: &str,
        replication_factor: i16,
        producer: Option<ProducerConfig>,
    ) -> Result<(Self, OffsetMap), InternalError> {
        let topic = Self::topic_name(source_alias);
        super::ensure_compacted_topic(target, &topic, replication_factor).await?;
        let map = Self::load(target, &topic).await?;
        let writer = match producer {
            Some(producer) => {
                let mut writer = BackgroundWriter::new(target.clone(), topic.clone(), producer);
                writer.connect().await?;
                Some(writer)
            }
            None => None,
        };
        let store = Self {
            writer,
            topic,
            ..Self::unconnected()
        };
        Ok((store, map))
    }

    /// A store that notes changes and writes nothing.
    fn unconnected() -> Self {
        Self {
            pending: IndexMap::default(),
            removed: IndexSet::default(),
            // The first pass comes with the first flush: a large map loaded at start-up.
            until_compaction: 0,
            writer: None,
            topic: String::new(),
            written: 0,
        }
    }

    /// Reads the map of flows from `source_alias` as persisted on `target`, without creating
    /// anything. A missing topic is an empty map.
    pub async fn read(target: &Client, source_alias: &str) -> Result<OffsetMap, InternalError> {
        let topic = Self::topic_name(source_alias);
        if !super::topic_exists(target, &topic).await? {
            return Ok(OffsetMap::new());
        }
        Self::load(target, &topic).await
    }

    async fn load(target: &Client, topic: &str) -> Result<OffsetMap, InternalError> {
        let mut loader = MapLoader::new();
        super::read_whole_topic(target, topic, |_, _, key, value| {
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

    /// The map of flows from `source_alias` as persisted on `target`, followed: read whole
    /// at once, then every `every` what was written to the topic since (only that is fetched,
    /// and the map is built again only when something came), starting from `initial` until
    /// the first read: for the readers of a flow that several units write (each unit's flow
    /// knows its own partitions' progress only), checkpoints and the HTTP API, which need the
    /// map as fresh as the positions they capture (`strait.checkpoints.capture.interval.ms`).
    /// A read that fails is logged and tried at the next tick, from the start; so is a topic
    /// whose records were deleted or that was made again. Reads stop once every receiver is
    /// gone.
    pub fn follow(
        target: Client,
        source_alias: String,
        initial: Arc<OffsetMap>,
        every: std::time::Duration,
    ) -> tokio::sync::watch::Receiver<Arc<OffsetMap>> {
        let (tx, rx) = tokio::sync::watch::channel(initial);
        tokio::spawn(async move {
            let topic = Self::topic_name(&source_alias);
            let mut follower = MapFollower::default();
            loop {
                match follower.read(&target, &topic).await {
                    Ok(Some(map)) => {
                        if tx.send(Arc::new(map)).is_err() {
                            return;
                        }
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(
                            topic = %topic,
                            error = %e,
                            "cannot read the offset map again; checkpoints use the last one read"
                        );
                        follower = MapFollower::default();
                    }
                }
                tokio::select! {
                    () = tokio::time::sleep(every) => {}
                    () = tx.closed() => return,
                }
            }
        });
        rx
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

    /// Notes that `partition` left the map entirely (its source topic was deleted and the flow
    /// forgets it; `map` is what the map held for it): the next flush writes a tombstone for
    /// each of its keys, and drops what was noted for it and not yet written. The floor goes
    /// first and the extent last, so that a write cut short leaves what loads: entries without
    /// a floor load, a floor without its entries would not.
    pub fn note_partition_removed(
        &mut self,
        partition: &SourcePartition,
        map: Option<&PartitionMap>,
    ) {
        let mut keys = vec![MapKey::Floor {
            partition: partition.clone(),
        }];
        if let Some(map) = map {
            keys.extend(map.segments().iter().map(|s| MapKey::Segment {
                partition: partition.clone(),
                src_start: s.src_start,
            }));
            keys.extend(map.lost_ranges().iter().map(|r| MapKey::Lost {
                partition: partition.clone(),
                src_from: r.src_from,
            }));
        }
        keys.extend(
            self.pending
                .keys()
                .filter(|k| {
                    k.partition() == partition
                        && !matches!(k, MapKey::Floor { .. } | MapKey::Extent { .. })
                })
                .cloned()
                .collect::<Vec<_>>(),
        );
        keys.push(MapKey::Extent {
            partition: partition.clone(),
        });
        for key in keys {
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

    /// Records written to the topic so far (tombstones included; a write in flight not
    /// counted).
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Starts writing what is noted, beside the caller, and returns without waiting: every
    /// noted entry, in as many batches as they need (in order, all in flight together), then,
    /// once those are acknowledged, a tombstone for every noted removal. `map` is the map the
    /// notes come from. One write at a time: while the last one is in flight this starts
    /// nothing, and the notes wait for the next call.
    ///
    /// Returns the map of the last write that finished, when it wrote anything, for readers
    /// that must see only what is on the topic. A write that failed is reported by the next
    /// call; what it carried is noted again, unless newer notes of the same keys replaced it.
    pub async fn start_flush(
        &mut self,
        map: &OffsetMap,
    ) -> Result<Option<Arc<OffsetMap>>, InternalError> {
        let Some(writer) = &mut self.writer else {
            return Ok(None);
        };
        if writer.busy() {
            return Ok(None);
        }
        let finished = writer.finished().await?;
        let published = self.settle(finished)?;
        self.begin(map)?;
        Ok(published)
    }

    /// Writes what is noted, after the write [`start_flush`](Self::start_flush) left in flight,
    /// and waits for both. Returns the map of the newest write that wrote anything, as
    /// `start_flush` does.
    pub async fn flush(
        &mut self,
        map: &OffsetMap,
    ) -> Result<Option<Arc<OffsetMap>>, InternalError> {
        let Some(writer) = &mut self.writer else {
            return Ok(None);
        };
        let earlier = writer.wait().await?;
        let mut published = self.settle(earlier)?;
        if self.begin(map)? {
            let writer = self.writer.as_mut().expect("begin wrote through it");
            let done = writer.wait().await?;
            published = self.settle(done)?.or(published);
        }
        Ok(published)
    }

    /// Takes every note and starts their write; `false` if there is none.
    fn begin(&mut self, map: &OffsetMap) -> Result<bool, InternalError> {
        if self.writer.is_none() {
            return Ok(false);
        }
        let Some((write, phases)) = self.take(map)? else {
            return Ok(false);
        };
        self.writer
            .as_mut()
            .expect("checked above")
            .start(write, phases);
        Ok(true)
    }

    /// Takes every note as the batches that write it: the entries, then the tombstones they
    /// make safe (a phase each); `None` if there is none.
    fn take(&mut self, map: &OffsetMap) -> Result<Option<(MapWrite, Phases)>, InternalError> {
        if self.pending.is_empty() && self.removed.is_empty() {
            return Ok(None);
        }
        let mut entries = Vec::with_capacity(self.pending.len());
        for r in self.pending.values() {
            entries.push((encode_key(&r.key())?, Some(r.encode_value())));
        }
        let tombstones = self
            .removed
            .iter()
            .map(|k| Ok((encode_key(k)?, None)))
            .collect::<Result<Vec<_>, InternalError>>()?;
        let mut phases = Vec::with_capacity(2);
        for kvs in [entries, tombstones] {
            if !kvs.is_empty() {
                phases.push(super::batch::key_value_batches_nullable(
                    "offset-map records",
                    kvs,
                )?);
            }
        }
        let write = MapWrite {
            entries: self.pending.drain(..).collect(),
            removed: self.removed.drain(..).collect(),
            // Cheap: the clone shares each partition's map (copy on write, `OffsetMap`), so it
            // costs a pointer per partition, not a copy of every segment.
            map: Arc::new(map.clone()),
        };
        Ok(Some((write, phases)))
    }

    /// For a flow that writes the map in its own transactions (`docs/design.md` §7.3): every
    /// note as the batches that write it, in order, to the map topic's partition 0 through
    /// the caller's producer; `None` if there is none. The caller hands the write back to
    /// [`MapStore::taken_written`] once its transaction is committed, or failed.
    pub(crate) fn take_write(
        &mut self,
        map: &OffsetMap,
    ) -> Result<Option<(TakenWrite, Vec<RawBatch>)>, InternalError> {
        Ok(self
            .take(map)?
            .map(|(write, phases)| (TakenWrite(write), phases.into_iter().flatten().collect())))
    }

    /// The end of a [`take_write`](Self::take_write): the map to publish once it is committed,
    /// or its notes back (unless newer ones replaced them) and the error.
    pub(crate) fn taken_written(
        &mut self,
        taken: TakenWrite,
        result: Result<(), InternalError>,
    ) -> Result<Option<Arc<OffsetMap>>, InternalError> {
        self.settle(Some(Finished {
            payload: taken.0,
            result,
        }))
    }

    /// The notes not yet written, to put back with [`MapStore::restore_notes`] if what they
    /// came from is taken back (a transaction that did not commit).
    pub(crate) fn notes(&self) -> Notes {
        Notes {
            pending: self.pending.clone(),
            removed: self.removed.clone(),
        }
    }

    /// Puts back the notes [`MapStore::notes`] returned, dropping every note since.
    pub(crate) fn restore_notes(&mut self, notes: Notes) {
        self.pending = notes.pending;
        self.removed = notes.removed;
    }

    /// The topic the map is written to: where a caller writing it in its own transactions
    /// sends [`take_write`](Self::take_write)'s batches.
    pub(crate) fn topic(&self) -> &str {
        &self.topic
    }

    /// Takes the end of a write: its map, to publish, or its notes back and the error.
    fn settle(
        &mut self,
        done: Option<Finished<MapWrite>>,
    ) -> Result<Option<Arc<OffsetMap>>, InternalError> {
        let Some(Finished { payload, result }) = done else {
            return Ok(None);
        };
        match result {
            Ok(()) => {
                self.written += (payload.entries.len() + payload.removed.len()) as u64;
                Ok(Some(payload.map))
            }
            Err(e) => {
                self.restore(payload);
                Err(e)
            }
        }
    }

    /// Notes again what a failed write carried, except keys noted since (their newer value or
    /// removal is what counts). Writing a record twice is harmless: the newest value per key
    /// is what the topic keeps.
    fn restore(&mut self, failed: MapWrite) {
        for (key, record) in failed.entries {
            if !self.removed.contains(&key) {
                self.pending.entry(key).or_insert(record);
            }
        }
        for key in failed.removed {
            if !self.pending.contains_key(&key) {
                self.removed.insert(key);
            }
        }
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
        MapStore::unconnected()
    }

    #[test]
    fn the_map_topic_is_never_mirrored() {
        for alias in ["A", "us-east", "dc_1"] {
            let topic = MapStore::topic_name(alias);
            assert!(crate::policy::is_strait_internal_topic(&topic), "{topic}");
            assert!(
                crate::policy::ReplicationPolicy::default().is_internal_topic(&topic),
                "{topic}"
            );
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
    fn a_partition_forgotten_is_tombstoned_floor_first_extent_last() {
        let gone = SourcePartition::new("gone", 0);
        let kept = SourcePartition::new("kept", 0);
        let mut map = PartitionMap::new();
        let mut store = store();
        for i in 0..4 {
            let segment = map.record(i * 11, i * 10, 10).unwrap();
            store.note(&gone, MapEntry::Segment(segment));
        }
        let lost = map.record_lost(44, 50).unwrap();
        store.note(&gone, MapEntry::Lost(lost));
        let compacted = map.compact_below(20).unwrap();
        store.note_compacted(&gone, &compacted);
        let mut other = PartitionMap::new();
        store.note(&kept, MapEntry::Segment(other.record(0, 0, 5).unwrap()));

        store.note_partition_removed(&gone, Some(&map));
        // Nothing of `gone` is written any more but tombstones; `kept` is untouched.
        assert!(store.pending.keys().all(|k| k.partition() == &kept));
        assert_eq!(store.pending.len(), 1);
        let removed: Vec<&MapKey> = store.removed.iter().collect();
        assert!(removed.iter().all(|k| k.partition() == &gone));
        // The two segments compacted away were tombstoned by the compaction already; the
        // floor comes before the entries that remain, the extent after them.
        let floor = removed
            .iter()
            .position(|k| matches!(k, MapKey::Floor { .. }))
            .unwrap();
        let extent = removed
            .iter()
            .position(|k| matches!(k, MapKey::Extent { .. }))
            .unwrap();
        assert_eq!(extent, removed.len() - 1);
        for key in [
            MapKey::Segment {
                partition: gone.clone(),
                src_start: 22,
            },
            MapKey::Segment {
                partition: gone.clone(),
                src_start: 33,
            },
            MapKey::Lost {
                partition: gone.clone(),
                src_from: 44,
            },
        ] {
            let at = removed.iter().position(|k| **k == key).unwrap();
            assert!(floor < at && at < extent, "{key:?}");
        }

        // What the topic holds once every record and tombstone is applied: `gone` loads as
        // nothing, and a write cut anywhere among the tombstones still loads.
        let mut records: Vec<(MapKey, Option<MapRecord>)> = Vec::new();
        for segment in map.segments() {
            records.push((
                MapKey::Segment {
                    partition: gone.clone(),
                    src_start: segment.src_start,
                },
                Some(MapRecord {
                    partition: gone.clone(),
                    entry: MapEntry::Segment(*segment),
                    generation: GENERATION,
                }),
            ));
        }
        for entry in [
            MapEntry::Lost(lost),
            MapEntry::Floor(compacted.floor),
            MapEntry::Extent(map.extent().unwrap()),
        ] {
            let record = MapRecord {
                partition: gone.clone(),
                entry,
                generation: GENERATION,
            };
            records.push((record.key(), Some(record)));
        }
        let tombstones: Vec<MapKey> = store.removed.iter().cloned().collect();
        for cut in 0..=tombstones.len() {
            let mut loader = MapLoader::new();
            for (key, record) in &records {
                let value = record.as_ref().map(MapRecord::encode_value);
                loader
                    .apply(&encode_key(key).unwrap(), value.as_deref())
                    .unwrap();
            }
            for key in &tombstones[..cut] {
                loader.apply(&encode_key(key).unwrap(), None).unwrap();
            }
            let loaded = loader.finish().unwrap_or_else(|e| panic!("cut {cut}: {e}"));
            if cut == tombstones.len() {
                assert!(loaded.partition(&gone).is_none());
            }
        }
    }

    /// A failed write's notes come back, except keys noted or removed while it was out.
    #[test]
    fn a_failed_write_is_noted_again_below_newer_notes() {
        let sp = SourcePartition::new("orders", 0);
        let mut map = PartitionMap::new();
        let mut store = store();
        let first = map.record(0, 0, 10).unwrap();
        let second = map.record(20, 10, 10).unwrap();
        store.note(&sp, MapEntry::Segment(first));
        store.note(&sp, MapEntry::Segment(second));
        store.note_removed(MapKey::Floor {
            partition: sp.clone(),
        });
        // What `begin` takes for a write.
        let write = MapWrite {
            entries: store.pending.drain(..).collect(),
            removed: store.removed.drain(..).collect(),
            map: Arc::new(OffsetMap::new()),
        };
        let keys: Vec<MapKey> = write.entries.iter().map(|(k, _)| k.clone()).collect();
        // While it is out, the second segment grows and the first is removed.
        let grown = map.record(30, 20, 5).unwrap();
        store.note(&sp, MapEntry::Segment(grown));
        store.note_removed(keys[0].clone());
        let failed = Finished {
            payload: write,
            result: Err(InternalError::Kafka(strait_kafka::Error::Closed)),
        };
        assert!(store.settle(Some(failed)).is_err());
        // The removal of the first stands; the second is noted (grown or not, one record);
        // the floor's removal comes back.
        assert!(store.removed.contains(&keys[0]));
        assert!(!store.pending.contains_key(&keys[0]));
        assert_eq!(store.pending[&keys[1]].entry, MapEntry::Segment(grown));
        assert!(store.removed.contains(&MapKey::Floor { partition: sp }));
        assert_eq!(store.written(), 0);
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
