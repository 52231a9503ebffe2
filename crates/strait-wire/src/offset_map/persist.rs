//! The offset map's persisted form: records of strait's compacted map topic on the target
//! (`docs/design.md` §4), and a loader that rebuilds an [`OffsetMap`] from them.
//!
//! The format is strait's own (not MM2's); big-endian, strings as Kafka `STRING`s:
//!
//! ```text
//! key    version:INT16=0 kind:INT8 topic:STRING partition:INT32 [offset:INT64]
//!        kind 0 segment     offset = the segment's src_start
//!        kind 1 lost range  offset = the range's src_from
//!        kind 2 extent      (no offset: one per partition)
//!        kind 3 floor       (no offset: one per partition; new with map compaction, see below)
//! value  version:INT16=0, then by kind, or null (a tombstone: the key is deleted)
//!        segment     dst_start:INT64 len:INT64 generation:INT32        (22 bytes)
//!        lost range  src_to:INT64 generation:INT32                     (14 bytes)
//!        extent      src_start:INT64 src_end:INT64 generation:INT32    (22 bytes)
//!        floor       src_end:INT64 dst_start:INT64 generation:INT32    (22 bytes)
//! ```
//!
//! A record's key names exactly what its value replaces, so compaction keeps the map's latest
//! state: extending the last segment rewrites its record under the same key.
//!
//! **Compaction of the map itself** (`docs/design.md` §4.5): when the flow drops the segments
//! and lost ranges below a bound ([`PartitionMap::compact_below`]), it writes the partition's
//! floor record first, and once that is acknowledged a tombstone for the key of each dropped
//! entry, so the topic's own compaction removes them. The loader leaves out any segment or lost
//! range that ends at or below the floor, so a tombstone that never made it (a crash between
//! the two writes), or a late write that landed after one, cannot bring a dropped entry back.
//! The format is otherwise unchanged, and a map written before floors existed loads as it
//! did. A map with a floor record does not load in a strait from before floors: it stops with
//! "unknown kind 3" rather than translate positions below the floor to the wrong side. `generation` is
//! the writer's generation (the owning worker's group generation once partitions move between
//! workers, `docs/design.md` §7); the loader prefers the highest one per key, so a late write from a
//! fenced-off worker cannot replace a newer one.
use std::collections::BTreeMap;

use super::{
    Compacted, Extent, Floor, LostRange, MapError, OffsetMap, PartitionMap, Segment,
    SourcePartition,
};
use crate::mm2::{put_string, CodecError, Reader};

/// The version of the map's key and value formats written by this crate.
pub const MAP_FORMAT_VERSION: i16 = 0;

const KIND_SEGMENT: i8 = 0;
const KIND_LOST: i8 = 1;
const KIND_EXTENT: i8 = 2;
const KIND_FLOOR: i8 = 3;

/// Why a map record could not be encoded or decoded.
///
/// None of these is retriable: the same bytes fail the same way every time.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum PersistError {
    /// A primitive field is short, malformed, of an unknown version, or followed by extra bytes
    /// (the same checks as MM2's records).
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// The key's kind byte is none of segment (0), lost range (1), extent (2) or floor (3).
    #[error("offset map key has unknown kind {kind}")]
    UnknownKind {
        /// The kind byte as read.
        kind: i8,
    },
}

impl PersistError {
    /// Whether trying again may succeed: never, see [`PersistError`].
    pub fn is_retriable(&self) -> bool {
        false
    }
}

/// The key of a map record: which entry of which partition's map it holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MapKey {
    /// The segment starting at source offset `src_start`.
    Segment {
        /// The source partition.
        partition: SourcePartition,
        /// The segment's first source offset.
        src_start: i64,
    },
    /// The lost range starting at source offset `src_from`.
    Lost {
        /// The source partition.
        partition: SourcePartition,
        /// The range's first source offset.
        src_from: i64,
    },
    /// The partition's extent.
    Extent {
        /// The source partition.
        partition: SourcePartition,
    },
    /// The partition's floor (what stands for the entries compacted away).
    Floor {
        /// The source partition.
        partition: SourcePartition,
    },
}

impl MapKey {
    /// The source partition whose map the record belongs to.
    pub fn partition(&self) -> &SourcePartition {
        match self {
            Self::Segment { partition, .. }
            | Self::Lost { partition, .. }
            | Self::Extent { partition }
            | Self::Floor { partition } => partition,
        }
    }

    /// Encodes the key; fails only for a topic name over 32767 bytes.
    pub fn encode(&self) -> Result<Vec<u8>, PersistError> {
        let partition = self.partition();
        let mut out = Vec::with_capacity(2 + 1 + 2 + partition.topic.len() + 4 + 8);
        out.extend_from_slice(&MAP_FORMAT_VERSION.to_be_bytes());
        let (kind, offset) = match self {
            Self::Segment { src_start, .. } => (KIND_SEGMENT, Some(*src_start)),
            Self::Lost { src_from, .. } => (KIND_LOST, Some(*src_from)),
            Self::Extent { .. } => (KIND_EXTENT, None),
            Self::Floor { .. } => (KIND_FLOOR, None),
        };
        out.extend_from_slice(&kind.to_be_bytes());
        put_string(&mut out, "topic", &partition.topic)?;
        out.extend_from_slice(&partition.partition.to_be_bytes());
        if let Some(offset) = offset {
            out.extend_from_slice(&offset.to_be_bytes());
        }
        Ok(out)
    }

    /// Decodes a key.
    pub fn decode(key: &[u8]) -> Result<Self, PersistError> {
        let mut r = Reader::new(key);
        let version = r.i16("version")?;
        if version != MAP_FORMAT_VERSION {
            return Err(CodecError::UnsupportedVersion {
                record: "offset map key",
                version,
            }
            .into());
        }
        let kind = r.i8("kind")?;
        if !matches!(kind, KIND_SEGMENT | KIND_LOST | KIND_EXTENT | KIND_FLOOR) {
            return Err(PersistError::UnknownKind { kind });
        }
        let partition = SourcePartition {
            topic: r.string("topic")?,
            partition: r.i32("partition")?,
        };
        let key = match kind {
            KIND_SEGMENT => Self::Segment {
                partition,
                src_start: r.i64("src_start")?,
            },
            KIND_LOST => Self::Lost {
                partition,
                src_from: r.i64("src_from")?,
            },
            KIND_EXTENT => Self::Extent { partition },
            _ => Self::Floor { partition },
        };
        r.finish("offset map key")?;
        Ok(key)
    }
}

/// What a map record holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MapEntry {
    /// A segment.
    Segment(Segment),
    /// A lost range.
    Lost(LostRange),
    /// The partition's extent.
    Extent(Extent),
    /// The partition's floor.
    Floor(Floor),
}

/// One record of the persisted map: an entry of one partition's map and the generation of its
/// writer. See the module docs for the bytes.
///
/// Decoding checks the bytes, not the offsets: a decoded record may still describe an invalid
/// segment, which loading ([`MapLoader::finish`]) reports with the offsets.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MapRecord {
    /// The source partition.
    pub partition: SourcePartition,
    /// The entry.
    pub entry: MapEntry,
    /// The writer's generation.
    pub generation: i32,
}

impl MapRecord {
    /// The record's key.
    pub fn key(&self) -> MapKey {
        let partition = self.partition.clone();
        match self.entry {
            MapEntry::Segment(s) => MapKey::Segment {
                partition,
                src_start: s.src_start,
            },
            MapEntry::Lost(r) => MapKey::Lost {
                partition,
                src_from: r.src_from,
            },
            MapEntry::Extent(_) => MapKey::Extent { partition },
            MapEntry::Floor(_) => MapKey::Floor { partition },
        }
    }

    /// Encodes the key; fails only for a topic name over 32767 bytes.
    pub fn encode_key(&self) -> Result<Vec<u8>, PersistError> {
        self.key().encode()
    }

    /// Encodes the value.
    pub fn encode_value(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(22);
        out.extend_from_slice(&MAP_FORMAT_VERSION.to_be_bytes());
        let (a, b) = match self.entry {
            MapEntry::Segment(s) => (s.dst_start, Some(s.len)),
            MapEntry::Lost(r) => (r.src_to, None),
            MapEntry::Extent(e) => (e.src_start, Some(e.src_end)),
            MapEntry::Floor(f) => (f.src_end, Some(f.dst_start)),
        };
        out.extend_from_slice(&a.to_be_bytes());
        if let Some(b) = b {
            out.extend_from_slice(&b.to_be_bytes());
        }
        out.extend_from_slice(&self.generation.to_be_bytes());
        out
    }

    /// Decodes a record from its key and (non-null) value.
    pub fn decode(key: &[u8], value: &[u8]) -> Result<Self, PersistError> {
        Self::decode_value(MapKey::decode(key)?, value)
    }

    /// Decodes a value under an already decoded key.
    pub fn decode_value(key: MapKey, value: &[u8]) -> Result<Self, PersistError> {
        let mut r = Reader::new(value);
        let version = r.i16("version")?;
        if version != MAP_FORMAT_VERSION {
            return Err(CodecError::UnsupportedVersion {
                record: "offset map value",
                version,
            }
            .into());
        }
        let (partition, entry) = match key {
            MapKey::Segment {
                partition,
                src_start,
            } => {
                let dst_start = r.i64("dst_start")?;
                let len = r.i64("len")?;
                let segment = Segment {
                    src_start,
                    dst_start,
                    len,
                };
                (partition, MapEntry::Segment(segment))
            }
            MapKey::Lost {
                partition,
                src_from,
            } => {
                let src_to = r.i64("src_to")?;
                (partition, MapEntry::Lost(LostRange { src_from, src_to }))
            }
            MapKey::Extent { partition } => {
                let src_start = r.i64("src_start")?;
                let src_end = r.i64("src_end")?;
                let extent = Extent { src_start, src_end };
                (partition, MapEntry::Extent(extent))
            }
            MapKey::Floor { partition } => {
                let src_end = r.i64("src_end")?;
                let dst_start = r.i64("dst_start")?;
                let floor = Floor { src_end, dst_start };
                (partition, MapEntry::Floor(floor))
            }
        };
        let generation = r.i32("generation")?;
        r.finish("offset map value")?;
        Ok(Self {
            partition,
            entry,
            generation,
        })
    }
}

impl PartitionMap {
    /// The records that persist this map in full, under `generation`.
    ///
    /// At run time a flow writes only what a change returns ([`record`](Self::record) the
    /// segment, [`record_lost`](Self::record_lost) the lost range,
    /// [`record_skipped`](Self::record_skipped) the extent); this is for snapshots and tests.
    pub fn to_records(&self, partition: &SourcePartition, generation: i32) -> Vec<MapRecord> {
        let record = |entry| MapRecord {
            partition: partition.clone(),
            entry,
            generation,
        };
        self.floor()
            .map(|f| record(MapEntry::Floor(f)))
            .into_iter()
            .chain(
                self.segments()
                    .iter()
                    .map(|s| record(MapEntry::Segment(*s))),
            )
            .chain(
                self.lost_ranges()
                    .iter()
                    .map(|r| record(MapEntry::Lost(*r))),
            )
            .chain(self.extent().map(|e| record(MapEntry::Extent(e))))
            .collect()
    }
}

impl Compacted {
    /// The record of the floor, to write (and have acknowledged) before the
    /// [`tombstones`](Self::tombstones).
    pub fn floor_record(&self, partition: &SourcePartition, generation: i32) -> MapRecord {
        MapRecord {
            partition: partition.clone(),
            entry: MapEntry::Floor(self.floor),
            generation,
        }
    }

    /// The keys of the dropped entries: a tombstone (null value) for each deletes it from the
    /// map topic.
    pub fn tombstones(&self, partition: &SourcePartition) -> Vec<MapKey> {
        self.segments
            .iter()
            .map(|s| MapKey::Segment {
                partition: partition.clone(),
                src_start: s.src_start,
            })
            .chain(self.lost.iter().map(|r| MapKey::Lost {
                partition: partition.clone(),
                src_from: r.src_from,
            }))
            .collect()
    }
}

/// The persisted map of a partition is invalid.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("persisted offset map of {partition} is invalid: {error}")]
pub struct LoadError {
    /// The partition whose map is invalid.
    pub partition: SourcePartition,
    /// What is wrong, with the offsets involved.
    pub error: MapError,
}

impl LoadError {
    /// Whether loading again may succeed: not from the same records.
    pub fn is_retriable(&self) -> bool {
        false
    }
}

/// Rebuilds an [`OffsetMap`] from the map topic, read from the beginning like any compacted
/// topic: later records replace earlier ones with the same key, and a tombstone (null value)
/// deletes the key. Of two records with the same key, the higher generation wins whatever the
/// order; a tombstone deletes regardless of generation.
///
/// ```
/// use strait_wire::offset_map::{MapLoader, PartitionMap, SourcePartition, Translation};
///
/// let orders = SourcePartition::new("orders", 0);
/// let mut map = PartitionMap::new();
/// map.record(0, 0, 10)?;
/// let mut loader = MapLoader::new();
/// for record in map.to_records(&orders, 1) {
///     loader.apply(&record.encode_key()?, Some(&record.encode_value()))?;
/// }
/// let loaded = loader.finish()?;
/// assert_eq!(loaded.translate(&orders, 4), Translation::Exact { target: 4 });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct MapLoader {
    entries: BTreeMap<MapKey, (MapEntry, i32)>,
}

impl MapLoader {
    /// An empty loader.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one record of the map topic, `value` `None` for a tombstone.
    ///
    /// A record that does not decode is an error and changes nothing; the caller decides
    /// whether to stop or to skip it and say so.
    pub fn apply(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), PersistError> {
        let key = MapKey::decode(key)?;
        match value {
            None => {
                self.entries.remove(&key);
            }
            Some(value) => self.apply_record(MapRecord::decode_value(key, value)?),
        }
        Ok(())
    }

    /// Applies one decoded record.
    ///
    /// A record of an older generation than the one held loses (a fenced-off writer). Within
    /// one generation an entry only ever grows (a segment is extended, a lost range widened, the
    /// extent moved on), so a record that would shrink it is a late write (a flush abandoned at
    /// its timeout that landed after a newer one) and the larger value is kept: taking it would
    /// open a false gap that translation calls exact.
    pub fn apply_record(&mut self, record: MapRecord) {
        let key = record.key();
        match self.entries.get(&key) {
            Some(&(_, generation)) if generation > record.generation => {}
            Some((held, generation))
                if *generation == record.generation && covers(held, &record.entry) => {}
            _ => {
                self.entries.insert(key, (record.entry, record.generation));
            }
        }
    }

    /// Builds the map, checking every partition's invariants
    /// ([`PartitionMap::from_parts_with_floor`]: entries at or below a partition's floor are
    /// left out).
    pub fn finish(self) -> Result<OffsetMap, LoadError> {
        self.map()
    }

    /// Builds the map of the records applied so far, as [`finish`](Self::finish) does, and
    /// keeps them: a reader that follows the map topic applies what was written since and
    /// builds again.
    pub fn map(&self) -> Result<OffsetMap, LoadError> {
        #[derive(Default)]
        struct Parts {
            segments: Vec<Segment>,
            lost: Vec<LostRange>,
            extent: Option<Extent>,
            floor: Option<Floor>,
        }
        let mut parts: BTreeMap<SourcePartition, Parts> = BTreeMap::new();
        for (key, (entry, _)) in &self.entries {
            let p = parts.entry(key.partition().clone()).or_default();
            match *entry {
                MapEntry::Segment(s) => p.segments.push(s),
                MapEntry::Lost(r) => p.lost.push(r),
                MapEntry::Extent(e) => p.extent = Some(e),
                MapEntry::Floor(f) => p.floor = Some(f),
            }
        }
        let mut map = OffsetMap::new();
        for (partition, p) in parts {
            match PartitionMap::from_parts_with_floor(p.segments, p.lost, p.extent, p.floor) {
                Ok(m) => {
                    map.insert(partition, m);
                }
                Err(error) => return Err(LoadError { partition, error }),
            }
        }
        Ok(map)
    }
}

/// Whether `held` already says everything `late` says, and more: the same entry grown. Entries
/// that say something else (a segment at other target offsets) do not cover each other.
fn covers(held: &MapEntry, late: &MapEntry) -> bool {
    match (held, late) {
        (MapEntry::Segment(h), MapEntry::Segment(l)) => {
            h.src_start == l.src_start && h.dst_start == l.dst_start && h.len >= l.len
        }
        (MapEntry::Lost(h), MapEntry::Lost(l)) => h.src_from == l.src_from && h.src_to >= l.src_to,
        (MapEntry::Extent(h), MapEntry::Extent(l)) => {
            h.src_start == l.src_start && h.src_end >= l.src_end
        }
        (MapEntry::Floor(h), MapEntry::Floor(l)) => {
            h.dst_start == l.dst_start && h.src_end >= l.src_end
        }
        _ => false,
    }
}
