//! The offset map's home: a compacted internal topic on the target cluster
//! (`strait-offset-map.<source alias>.internal`, one partition), so the map survives restarts
//! (`docs/design.md` §4). Records are strait's own format (`strait_wire::offset_map::persist`).
//!
//! Only what changed since the last flush is written: each change to the map returns the entry
//! it made or grew, the flow notes it here, and a flush writes the newest entry per key.
//! Compaction keeps the newest record per key, so the topic holds one record per segment.

use indexmap::IndexMap;
use strait_kafka::produce::RawProducer;
use strait_kafka::{Client, TopicPartition};
use strait_wire::offset_map::{MapEntry, MapKey, MapLoader, MapRecord, OffsetMap, SourcePartition};

use super::FlowError;

/// Generation written with every record. One writer per flow for now; scale-out will give each
/// owner of a partition a higher generation (`docs/design.md` §7).
const GENERATION: i32 = 0;

/// Reads and writes one flow's map topic.
#[derive(Debug)]
pub struct MapStore {
    topic: String,
    pending: IndexMap<MapKey, MapRecord>,
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
    ) -> Result<(Self, OffsetMap), FlowError> {
        let topic = Self::topic_name(source_alias);
        super::topics::ensure_compacted_topic(target, &topic, replication_factor).await?;
        let map = Self::load(target, &topic).await?;
        let store = Self {
            topic,
            pending: IndexMap::new(),
        };
        Ok((store, map))
    }

    /// Reads the map of flows from `source_alias` as persisted on `target`, without creating
    /// anything. A missing topic is an empty map.
    pub async fn read(target: &Client, source_alias: &str) -> Result<OffsetMap, FlowError> {
        let topic = Self::topic_name(source_alias);
        if !target.metadata().await?.topics.contains_key(&topic) {
            return Ok(OffsetMap::new());
        }
        Self::load(target, &topic).await
    }

    async fn load(target: &Client, topic: &str) -> Result<OffsetMap, FlowError> {
        let mut loader = MapLoader::new();
        super::topics::read_whole_topic(target, topic, |_, key, value| {
            loader
                .apply(&key.unwrap_or_default(), value.as_deref())
                .map_err(|e| e.to_string())
        })
        .await?;
        loader
            .finish()
            .map_err(|e| FlowError::Map(format!("{topic}: {e}")))
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
        self.pending.insert(record.key(), record);
    }

    /// Entries noted and not yet written.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Writes every noted entry, in as many batches as they need (in order, all in flight
    /// together). Returns the number of records written. On failure every entry stays noted:
    /// writing one again is harmless (the newest value per key is what counts).
    pub async fn flush(&mut self, producer: &RawProducer) -> Result<usize, FlowError> {
        if self.pending.is_empty() {
            return Ok(0);
        }
        let mut kvs = Vec::with_capacity(self.pending.len());
        for r in self.pending.values() {
            let key = r
                .encode_key()
                .map_err(|e| FlowError::Map(format!("cannot encode map key: {e}")))?;
            kvs.push((key, r.encode_value()));
        }
        let tp = TopicPartition::new(&self.topic, 0);
        let batches = super::batch::key_value_batches("offset-map records", kvs)?
            .into_iter()
            .map(|batch| (tp.clone(), batch))
            .collect();
        for ack in producer.send_all(batches).await {
            ack?;
        }
        let written = self.pending.len();
        self.pending.clear();
        Ok(written)
    }
}
