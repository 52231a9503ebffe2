//! `assign-scale`: the workers' group at scale, without a cluster (`docs/scaling.md`). For a
//! number of workers and units it runs the leader's assignor (`strait_core::scale::assign`)
//! as a rebalance would, and prints, as text:
//!
//! - the bytes the coordinator carries: every member's join metadata (JoinGroup's answer to
//!   the leader holds all of them) and every assignment (the leader's SyncGroup request);
//! - the leader's time to assign: from nothing, after a worker joins, after one leaves;
//! - how many units each of those rebalances moves, against the fewest that balance allows;
//! - the largest and smallest share.
//!
//! ```sh
//! cargo run --release --manifest-path bench/Cargo.toml --bin assign-scale
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use strait_core::scale::{assign, claims_of, Claim, Unit};

/// (flows, units per flow, workers): up to 100,000 partitions on 100 workers at 10 units each
/// (1,000 units, 100 partitions per unit) and at one unit per 10 partitions (10,000 units).
const SHAPES: &[(usize, u32, usize)] = &[
    (2, 8, 4),
    (10, 100, 100),
    (10, 1_000, 100),
    (100, 100, 100),
    (10, 10_000, 100),
];

/// A member id as Kafka makes them: the client id, a dash, a UUID.
fn member(i: usize) -> String {
    format!("strait-{i:08x}-0000-4000-8000-{i:012x}")
}

/// The JSON a member sends when joining, and the JSON the leader hands it (`worker.rs`).
fn metadata_bytes(owned: &BTreeSet<Unit>, generation: i32) -> usize {
    let names: Vec<String> = owned.iter().map(Unit::to_string).collect();
    serde_json::to_vec(&serde_json::json!({
        "version": 1, "generation": generation, "owned": names,
    }))
    .unwrap()
    .len()
}

fn assignment_bytes(owned: &BTreeSet<Unit>, generation: i32, leader: &str) -> usize {
    let names: Vec<String> = owned.iter().map(Unit::to_string).collect();
    serde_json::to_vec(&serde_json::json!({
        "version": 1, "generation": generation, "leader": leader, "units": names,
    }))
    .unwrap()
    .len()
}

/// Units that changed owner between two assignments.
fn moved(
    before: &BTreeMap<String, BTreeSet<Unit>>,
    after: &BTreeMap<String, BTreeSet<Unit>>,
) -> usize {
    let owner = |a: &BTreeMap<String, BTreeSet<Unit>>| -> BTreeMap<Unit, String> {
        a.iter()
            .flat_map(|(m, us)| us.iter().map(move |u| (u.clone(), m.clone())))
            .collect()
    };
    let (b, a) = (owner(before), owner(after));
    a.iter().filter(|(u, m)| b.get(*u) != Some(*m)).count()
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let began = Instant::now();
    let out = f();
    (out, began.elapsed().as_secs_f64() * 1000.0)
}

fn main() {
    println!(
        "{:>6} {:>7} {:>7} | {:>10} {:>10} | {:>8} {:>8} {:>8} | {:>6} {:>6} {:>6} {:>6} | {:>5} {:>5}",
        "flows", "units", "workers", "join KiB", "sync KiB", "fresh ms", "join ms", "leave ms",
        "joinMv", "least", "leaveMv", "least", "max", "min"
    );
    for &(flows, per_flow, workers) in SHAPES {
        let units: BTreeSet<Unit> = (0..flows)
            .flat_map(|f| Unit::all_of(&format!("dc{f}->dr"), per_flow).collect::<Vec<_>>())
            .collect();
        let members: Vec<Claim> = (0..workers)
            .map(|i| Claim {
                member: member(i),
                owned: BTreeSet::new(),
                generation: -1,
            })
            .collect();
        let (first, fresh_ms) = timed(|| assign(&units, &members));
        // A worker joins: its share moves to it, nothing else.
        let mut joining = claims_of(&first, 1);
        joining.push(Claim {
            member: member(workers),
            owned: BTreeSet::new(),
            generation: -1,
        });
        let (joined, join_ms) = timed(|| assign(&units, &joining));
        let join_least = units.len() / (workers + 1);
        // A worker leaves: its units move, nothing else.
        let leaving: Vec<Claim> = claims_of(&joined, 2)
            .into_iter()
            .filter(|c| c.member != member(0))
            .collect();
        let (left, leave_ms) = timed(|| assign(&units, &leaving));
        let leave_least = joined[&member(0)].len();
        let leader = member(0);
        let join_bytes: usize = joined
            .values()
            .map(|owned| metadata_bytes(owned, 2) + member(0).len())
            .sum();
        let sync_bytes: usize = joined
            .values()
            .map(|owned| assignment_bytes(owned, 3, &leader) + member(0).len())
            .sum();
        let shares: Vec<usize> = left.values().map(BTreeSet::len).collect();
        println!(
            "{:>6} {:>7} {:>7} | {:>10.1} {:>10.1} | {:>8.2} {:>8.2} {:>8.2} | {:>6} {:>6} {:>6} {:>6} | {:>5} {:>5}",
            flows,
            units.len(),
            workers,
            join_bytes as f64 / 1024.0,
            sync_bytes as f64 / 1024.0,
            fresh_ms,
            join_ms,
            leave_ms,
            moved(&first, &joined),
            join_least,
            moved(&joined, &left),
            leave_least,
            shares.iter().max().unwrap(),
            shares.iter().min().unwrap(),
        );
    }
}
