//! `map-size`: the offset map at a million segments (`docs/benchmarks.md`, "Offset map size").
//! No cluster: the map, its records and its loader, in memory. For each shape (1 partition of
//! 1,000,000 segments; 1,000 partitions of 1,000) it prints, as text:
//!
//! - memory: the process's resident set before and after building the map, per segment;
//! - start-up: encoding the map into map-topic records, and loading them back with
//!   `MapLoader` (what a flow does at start, less the reading from Kafka), with the peak RSS;
//! - publishing after one change, as a flow does after a flush: a deep copy of the whole map
//!   (what `self.map.clone()` cost before partitions were shared) against recording one batch
//!   and cloning the shared map (the changed partition is copied on write, the rest shared);
//! - compaction below the midpoint of every partition: time, segments left, records to write
//!   (floor and tombstones), and loading the compacted topic.
//!
//! ```sh
//! cargo run --release --manifest-path bench/Cargo.toml --bin map-size
//! ```
//!
//! Each shape runs in a process of its own (the binary re-executes itself), so that one's
//! memory does not blur the next one's figures.

use std::sync::Arc;
use std::time::{Duration, Instant};

use strait_wire::offset_map::{MapLoader, OffsetMap, SourcePartition};

/// Source offsets per transaction: ten records and a commit marker.
const TXN: i64 = 11;
const RECORDS: i64 = 10;

fn rss_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// A map of `partitions` partitions of `segments` segments each: a transactional source, one
/// segment per transaction.
fn build(partitions: i32, segments: i64) -> (OffsetMap, Vec<SourcePartition>) {
    let mut map = OffsetMap::new();
    let parts: Vec<SourcePartition> = (0..partitions)
        .map(|p| SourcePartition::new("orders", p))
        .collect();
    for sp in &parts {
        for i in 0..segments {
            map.record(sp, i * TXN, i * RECORDS, RECORDS).unwrap();
        }
    }
    (map, parts)
}

fn encode(map: &OffsetMap) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    map.iter()
        .flat_map(|(sp, pmap)| pmap.to_records(sp, 0))
        .map(|r| (r.encode_key().unwrap(), Some(r.encode_value())))
        .collect()
}

fn load(records: &[(Vec<u8>, Option<Vec<u8>>)]) -> OffsetMap {
    let mut loader = MapLoader::new();
    for (k, v) in records {
        loader.apply(k, v.as_deref()).unwrap();
    }
    loader.finish().unwrap()
}

fn shape(partitions: i32, segments: i64) {
    let total = partitions as i64 * segments;
    println!("## {partitions} partition(s) x {segments} segments = {total} segments");
    let rss0 = rss_kib("VmRSS:");
    let t = Instant::now();
    let (mut map, parts) = build(partitions, segments);
    let built = t.elapsed();
    let rss1 = rss_kib("VmRSS:");
    assert_eq!(map.segment_count() as i64, total);
    println!(
        "memory: RSS {:.1} MiB before, {:.1} MiB after building ({:.0} ms): {:.1} bytes/segment (a segment is 24 bytes)",
        mib(rss0),
        mib(rss1),
        ms(built),
        (rss1.saturating_sub(rss0) * 1024) as f64 / total as f64
    );

    let t = Instant::now();
    let records = encode(&map);
    let encoded = t.elapsed();
    let bytes: usize = records
        .iter()
        .map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len))
        .sum();
    let t = Instant::now();
    let loaded = load(&records);
    let loading = t.elapsed();
    assert_eq!(loaded, map);
    drop(loaded);
    println!(
        "start-up: {} records, {:.1} MiB of keys and values; encode {:.0} ms, load (MapLoader) {:.0} ms; peak RSS {:.1} MiB",
        records.len(),
        bytes as f64 / 1048576.0,
        ms(encoded),
        ms(loading),
        mib(rss_kib("VmHWM:"))
    );
    drop(records);

    // Publishing after one change: the old way, a deep copy of every partition's map.
    let reps = 9;
    let mut deep = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        let mut copy = OffsetMap::new();
        for (sp, pmap) in map.iter() {
            copy.insert(sp.clone(), pmap.clone());
        }
        let published = Arc::new(copy);
        deep.push(t.elapsed());
        drop(published);
    }
    // The new way: the flow records one batch into one partition (copied on write, since the
    // published map shares it), then clones the map (a pointer per partition) to publish it;
    // the previously published map is dropped, as `send_replace` does.
    let mut published = Arc::new(map.clone());
    let (mut change, mut clone) = (Vec::new(), Vec::new());
    for next in (segments..).take(reps as usize) {
        let t = Instant::now();
        map.record(&parts[0], next * TXN, next * RECORDS, RECORDS)
            .unwrap();
        change.push(t.elapsed());
        // Replacing the published map drops the one before (and the partition copy only it held).
        let t = Instant::now();
        published = Arc::new(map.clone());
        clone.push(t.elapsed());
    }
    drop(published);
    println!(
        "publish after one change (median of {reps}): deep copy of the whole map {:.3} ms; shared: record one batch {:.3} ms (copies the changed partition) + clone and replace the published one {:.3} ms",
        ms(median(deep)),
        ms(median(change)),
        ms(median(clone))
    );

    // Compaction below the midpoint of every partition.
    let mid = (segments / 2) * TXN;
    let t = Instant::now();
    let mut writes = 0usize;
    for sp in &parts {
        if let Some(c) = map.compact_below(sp, mid) {
            writes += 1 + c.segments.len() + c.lost.len();
        }
    }
    let compacting = t.elapsed();
    let records = encode(&map);
    let t = Instant::now();
    let loaded = load(&records);
    let reloading = t.elapsed();
    assert_eq!(loaded, map);
    println!(
        "compaction below the midpoint: {:.0} ms; {} segments left ({:.1} MiB of segments); {} records to write (floors and tombstones); the compacted map is {} records and loads in {:.0} ms",
        ms(compacting),
        map.segment_count(),
        (map.segment_count() * 24) as f64 / 1048576.0,
        writes,
        records.len(),
        ms(reloading),
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    match (args.next(), args.next()) {
        (Some(p), Some(s)) => shape(p.parse().unwrap(), s.parse().unwrap()),
        _ => {
            let me = std::env::current_exe().unwrap();
            for (p, s) in [("1", "1000000"), ("1000", "1000")] {
                let status = std::process::Command::new(&me)
                    .args([p, s])
                    .status()
                    .unwrap();
                assert!(status.success());
                println!();
            }
        }
    }
}
