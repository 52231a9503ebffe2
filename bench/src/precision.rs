//! Consumer-offset translation at failover, on synthetic partitions: where a consumer group
//! at a given lag continues on the target, by strait's exact offset map and by MirrorMaker 2's
//! sampled offset syncs (the model `strait_wire::offset_map::mm2_model`), against the true
//! position computed independently from how the partition was built.
//!
//! Three kinds of source partition, about 1.05 million source offsets each:
//! - plain: producer batches of 1-500 records, mirrored densely;
//! - transactional: transactions of 1-200 records, each closed by a commit or abort marker that
//!   takes one offset; one in ten aborted, its records not mirrored (read_committed);
//! - compacted: three in ten offsets survive compaction, in runs; the holes are not mirrored.
//!
//! The model is fed with the map's segments exactly as the failover drill
//! (`crates/strait/tests/drill.rs`) does: MM2 mirrors the same records to the same target
//! offsets, emits its syncs by its rules (`offset.lag.max` = 100) and keeps 64 per partition,
//! all of them delivered at once (MM2's best case).

use serde::Serialize;
use strait_wire::offset_map::mm2_model::{
    compare, Mm2Model, Mm2Translation, DEFAULT_OFFSET_LAG_MAX,
};
use strait_wire::offset_map::PartitionMap;

use crate::workload::Rng;

/// The kind of source partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Plain data.
    Plain,
    /// Transactions with markers and aborts.
    Transactional,
    /// A compacted topic with holes.
    Compacted,
}

impl Kind {
    /// All kinds.
    pub const ALL: [Kind; 3] = [Kind::Plain, Kind::Transactional, Kind::Compacted];
}

/// A synthetic partition: strait's map of it, and for every source offset `o` in
/// `0..=src_end` the true target position of a consumer at `o` (the target offset of the first
/// mirrored record at or after `o`, or the target end).
#[derive(Debug)]
pub struct Synthetic {
    /// strait's offset map, built with `PartitionMap::record` / `record_skipped`.
    pub map: PartitionMap,
    /// The true target position for each source position.
    pub truth: Vec<i64>,
    /// Source offsets in the partition.
    pub src_end: i64,
    /// Records mirrored.
    pub mirrored: i64,
}

/// Builds a partition of `kind` with at least `min_offsets` source offsets.
pub fn build(kind: Kind, min_offsets: i64, seed: u64) -> anyhow::Result<Synthetic> {
    let mut rng = Rng::new(seed);
    let mut map = PartitionMap::new();
    // mirrored[o]: whether source offset o is on the target.
    let mut mirrored: Vec<bool> = Vec::with_capacity(min_offsets as usize + 1024);
    let mut src = 0i64;
    let mut dst = 0i64;
    while src < min_offsets {
        match kind {
            Kind::Plain => {
                let n = 1 + rng.below(500) as i64;
                map.record(src, dst, n)?;
                mirrored.extend(std::iter::repeat_n(true, n as usize));
                src += n;
                dst += n;
            }
            Kind::Transactional => {
                let n = 1 + rng.below(200) as i64;
                let aborted = rng.below(10) == 0;
                if aborted {
                    map.record_skipped(src, src + n + 1)?;
                    mirrored.extend(std::iter::repeat_n(false, n as usize + 1));
                } else {
                    map.record(src, dst, n)?;
                    map.record_skipped(src + n, src + n + 1)?;
                    mirrored.extend(std::iter::repeat_n(true, n as usize));
                    mirrored.push(false);
                    dst += n;
                }
                src += n + 1;
            }
            Kind::Compacted => {
                // Alternating runs: survivors (mean 3) and holes (mean 7).
                let keep = 1 + rng.below(5) as i64;
                let hole = 1 + rng.below(13) as i64;
                map.record(src, dst, keep)?;
                map.record_skipped(src + keep, src + keep + hole)?;
                mirrored.extend(std::iter::repeat_n(true, keep as usize));
                mirrored.extend(std::iter::repeat_n(false, hole as usize));
                src += keep + hole;
                dst += keep;
            }
        }
    }
    // Independent of the map: walk back from the end.
    let mut truth = vec![0i64; src as usize + 1];
    let mut next = dst;
    truth[src as usize] = dst;
    let mut d = dst;
    for o in (0..src as usize).rev() {
        if mirrored[o] {
            d -= 1;
            next = d;
        }
        truth[o] = next;
    }
    Ok(Synthetic {
        map,
        truth,
        src_end: src,
        mirrored: dst,
    })
}

/// The MM2 model fed with a map's segments, then one commit (the held-back sync sent).
pub fn mm2_of(map: &PartitionMap) -> Mm2Model {
    let mut mm2 = Mm2Model::new(DEFAULT_OFFSET_LAG_MAX);
    for s in map.segments() {
        mm2.record_batch(s.src_start, s.dst_start, s.len);
    }
    mm2.commit();
    mm2
}

/// One consumer position and what each translation does to it at failover.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// Topic kind.
    pub kind: Kind,
    /// Source offsets between the group's position and the partition's end.
    pub lag: i64,
    /// Records a consumer failing over with strait's translation reads twice.
    pub strait_duplicates: i64,
    /// Records it never reads.
    pub strait_lost: i64,
    /// Records read twice with MM2's checkpoint.
    pub mm2_duplicates: i64,
    /// Records never read with MM2's checkpoint.
    pub mm2_lost: i64,
    /// MM2 gives no checkpoint for this position (too far behind its retained syncs).
    pub mm2_no_checkpoint: bool,
}

/// Lags `0, 1, 2, ...` up to `max`: `per_decade` log-spaced random lags in each decade.
pub fn lags(max: i64, per_decade: usize, seed: u64) -> Vec<i64> {
    let mut rng = Rng::new(seed);
    let mut out = vec![0, 1, 10, 100, 1_000, 10_000, 100_000, 1_000_000];
    out.retain(|l| *l <= max);
    let decades = (max as f64).log10().ceil() as i32;
    for k in 0..decades {
        for _ in 0..per_decade {
            let u = (rng.below(1_000_000) as f64) / 1_000_000.0;
            let lag = 10f64.powf(k as f64 + u).floor() as i64;
            if lag <= max {
                out.push(lag);
            }
        }
    }
    out.sort_unstable();
    out
}

/// Translates a group at each lag with strait's map and the MM2 model; checks the comparison
/// against `mm2_model::compare` as it goes.
pub fn measure(kind: Kind, s: &Synthetic, lags: &[i64]) -> anyhow::Result<Vec<Point>> {
    let mm2 = mm2_of(&s.map);
    let mut points = Vec::with_capacity(lags.len());
    for &lag in lags {
        let position = s.src_end - lag;
        if position < 0 {
            continue;
        }
        let truth = s.truth[position as usize];
        let strait = s
            .map
            .translate(position)
            .target()
            .ok_or_else(|| anyhow::anyhow!("{kind:?}: strait has no target for {position}"))?;
        let (mm2_duplicates, mm2_lost, mm2_no_checkpoint) = match mm2.translate(position) {
            Mm2Translation::Translated(t) => ((truth - t).max(0), (t - truth).max(0), false),
            // No checkpoint: the group is not moved at all; counted apart, not as duplicates.
            _ => (0, 0, true),
        };
        let cmp = compare(&s.map, &mm2, [position]);
        if !mm2_no_checkpoint && strait == truth && cmp.redelivered != mm2_duplicates {
            anyhow::bail!(
                "{kind:?} at {position}: compare() says {} re-read, the truth {}",
                cmp.redelivered,
                mm2_duplicates
            );
        }
        points.push(Point {
            kind,
            lag,
            strait_duplicates: (truth - strait).max(0),
            strait_lost: (strait - truth).max(0),
            mm2_duplicates,
            mm2_lost,
            mm2_no_checkpoint,
        });
    }
    Ok(points)
}
