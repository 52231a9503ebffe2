//! `strait run` killed with SIGKILL at several points while it mirrors, restarted each time,
//! more data produced between some restarts, then `--until-caught-up` to the end: nothing is
//! lost, every partition keeps the source order, and every record the target holds twice is one
//! strait reported as a duplicate; with the crash-tail matching, that number is zero. Once as
//! the source's batches are forwarded, once with small source batches merged into larger ones
//! (`strait.batch.merge = always`), killed mid-merge.

mod running;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use running::write_flow_config;
use strait_kafka::admin::{IsolationLevel, OffsetSpec};
use strait_kafka::{Client, ClientConfig, TopicPartition};
use strait_testkit::{Clusters, Names, Rdk, TestRecord};

const PARTITIONS: i32 = 3;
/// Bytes of each record value: `id=NNNNNNNN;` and pseudo-random letters lz4 cannot shrink much.
const VALUE_LEN: usize = 100;
/// Records written before the first run, in this many produce calls.
const INITIAL: u64 = 60_000;
const INITIAL_CALLS: u64 = 3;
/// Records written after some kills, while strait is down.
const MORE: u64 = 8_000;
/// How many runs are killed.
const KILLS: usize = 5;
/// Kills after which `MORE` records are produced before the next run.
const PRODUCE_AFTER_KILL: [usize; 3] = [1, 2, 3];
/// The run killed 10-40 ms after it was spawned: in its start-up (connecting, loading the map,
/// matching the tail the previous kill left) or its first rounds, whichever the machine allows.
const DIES_EARLY: usize = 2;
const SEED: u64 = 0x5eed_0009;

/// When a run is killed.
#[derive(Debug, Clone, Copy)]
enum When {
    /// This long after it was spawned.
    After(Duration),
    /// Once the remote topic holds this many records in all.
    Holds(i64),
}

/// `eprintln!` with the time since `$start`, for the note on this test.
macro_rules! note {
    ($start:expr, $($arg:tt)*) => {
        eprintln!("kill9 [{:>5.1}s] {}", $start.elapsed().as_secs_f64(), format!($($arg)*))
    };
}

/// xorshift64*: deterministic payloads and kill points.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Records with ids `first..first + n`, id `i` to partition `i % PARTITIONS`.
fn records(rng: &mut Rng, first: u64, n: u64) -> Vec<TestRecord> {
    const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    (first..first + n)
        .map(|id| {
            let mut value = format!("id={id:08};").into_bytes();
            while value.len() < VALUE_LEN {
                value.push(LETTERS[rng.below(LETTERS.len() as u64) as usize]);
            }
            let key = format!("k{id}");
            TestRecord::new(
                (id % PARTITIONS as u64) as i32,
                Some(key.as_bytes()),
                Some(&value),
            )
        })
        .collect()
}

fn id_of(record: &TestRecord) -> u64 {
    let value = record.value.as_deref().expect("every record has a value");
    std::str::from_utf8(&value[3..11])
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a test value: {:?}", String::from_utf8_lossy(value)))
}

/// Produces `batch` to `topic` and notes each id at its source offset.
fn produce(
    rdk: &Rdk,
    bootstrap: &str,
    topic: &str,
    batch: &[TestRecord],
    source: &mut BTreeMap<i32, BTreeMap<i64, u64>>,
) {
    let acks = rdk.produce(bootstrap, topic, batch, "lz4");
    assert_eq!(acks.len(), batch.len());
    for (record, (partition, offset)) in batch.iter().zip(acks) {
        assert_eq!(partition, record.partition);
        let before = source
            .entry(partition)
            .or_default()
            .insert(offset, id_of(record));
        assert!(
            before.is_none(),
            "{topic}-{partition} offset {offset} twice"
        );
    }
}

/// A `strait run` process, killed if the test ends while it still runs.
struct Strait(Child);

impl Drop for Strait {
    fn drop(&mut self) {
        // A no-op for a process already waited for.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_strait(config: &Path, log: &Path, until_caught_up: bool) -> Strait {
    let out = File::create(log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    let err = out.try_clone().expect("log file handle");
    let mut command = Command::new(env!("CARGO_BIN_EXE_strait"));
    command
        .arg("run")
        .arg("--config")
        .arg(config)
        .args(["--listen", "off"]);
    if until_caught_up {
        command.arg("--until-caught-up");
    }
    let child = command
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("spawn strait");
    Strait(child)
}

/// The exit status, or `None` (and the process killed) after `timeout`.
fn wait_with_timeout(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Removes ANSI escape sequences (`ESC [ ... letter`).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The number right after `prefix` in `line`.
fn number_after(line: &str, prefix: &str) -> Option<u64> {
    let rest = &line[line.find(prefix)? + prefix.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// What one run's log says.
#[derive(Debug, Default, Clone, Copy)]
struct Reported {
    /// Sum of `recovered=` of the "target held records beyond the offset map" lines.
    recovered: u64,
    /// Sum of `duplicates=` of those lines.
    duplicates: u64,
    /// How many such lines.
    tail_lines: usize,
    /// Lines about records lost on the source.
    lost_lines: usize,
    /// "flow stalled" and "produce failed" lines: retried failures.
    stalls: usize,
    /// Whether a flow had started when the log ends.
    started: bool,
    /// `(records, recovered_records, duplicate_records, lost_records)` of "flow stopped".
    stopped: Option<(u64, u64, u64, u64)>,
}

fn read_log(path: &Path) -> Reported {
    let text = strip_ansi(&std::fs::read_to_string(path).unwrap_or_default());
    let mut r = Reported::default();
    for line in text.lines() {
        if line.contains("target held records beyond the offset map") {
            r.tail_lines += 1;
            r.recovered += number_after(line, " recovered=")
                .unwrap_or_else(|| panic!("{}: no recovered= in {line}", path.display()));
            r.duplicates += number_after(line, " duplicates=")
                .unwrap_or_else(|| panic!("{}: no duplicates= in {line}", path.display()));
        }
        if line.contains("deleted on the source before they were mirrored") {
            r.lost_lines += 1;
        }
        if line.contains("flow stalled") || line.contains("produce failed") {
            r.stalls += 1;
        }
        if line.contains("flow started") {
            r.started = true;
        }
        if line.contains("flow stopped") {
            let field = |name: &str| {
                number_after(line, name)
                    .unwrap_or_else(|| panic!("{}: no {name} in {line}", path.display()))
            };
            r.stopped = Some((
                field(" record_count="),
                field(" recovered_records="),
                field(" duplicate_records="),
                field(" lost_records="),
            ));
        }
    }
    r
}

async fn connect(bootstrap: &str) -> Client {
    let mut config = ClientConfig::new([bootstrap]);
    config.operation_timeout = Duration::from_secs(20);
    Client::connect(config).await.expect("connect")
}

/// End offset of each partition of `topic`, or `None` while the topic does not exist.
async fn end_offsets(client: &Client, topic: &str) -> Option<BTreeMap<i32, i64>> {
    // Asked first: the client retries ListOffsets of an unknown topic until its timeout.
    let metadata = client.refresh_metadata().await.ok()?;
    if !metadata.topics.contains_key(topic) {
        return None;
    }
    known_end_offsets(client, topic).await
}

/// End offset of each partition of `topic`, which exists, asked all at once.
async fn known_end_offsets(client: &Client, topic: &str) -> Option<BTreeMap<i32, i64>> {
    let asks = (0..PARTITIONS).map(|p| async move {
        let tp = TopicPartition::new(topic, p);
        let end = client
            .list_offset(&tp, OffsetSpec::Latest, IsolationLevel::ReadUncommitted)
            .await
            .ok()?
            .offset;
        Some((p, end))
    });
    futures::future::join_all(asks).await.into_iter().collect()
}

#[test]
fn kill_minus_nine_at_several_points_loses_nothing() {
    kill_minus_nine_at_several_points(false);
}

#[test]
fn kill_minus_nine_while_merging_batches_loses_nothing() {
    kill_minus_nine_at_several_points(true);
}

/// The scenario; with `merge`, the source is written in batches of 50 records and strait
/// merges them (`strait.batch.merge = always`) within a 256 KiB round budget, so each round
/// sends merged batches of several source batches.
fn kill_minus_nine_at_several_points(merge: bool) {
    let started = Instant::now();
    let clusters = Clusters::shared();
    note!(started, "clusters up in {:?}", started.elapsed());
    let names = Names::new();
    let (source_alias, target_alias) = (names.alias("source"), names.alias("target"));
    let topic = names.topic("ledger");
    let remote = format!("{source_alias}.{topic}");
    let rdk = if merge {
        Rdk::new().with_client_config(&[("batch.num.messages", "50")])
    } else {
        Rdk::new()
    };
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let target = runtime.block_on(connect(&clusters.target.bootstrap));
    let source_client = runtime.block_on(connect(&clusters.source.bootstrap));
    let mut rng = Rng(SEED);
    let mut kill_rng = Rng(SEED ^ 0x9);

    rdk.create_topic(&clusters.source.bootstrap, &topic, PARTITIONS);
    let mut source: BTreeMap<i32, BTreeMap<i64, u64>> = BTreeMap::new();
    let mut next_id = 0u64;
    for _ in 0..INITIAL_CALLS {
        let n = INITIAL / INITIAL_CALLS;
        let batch = records(&mut rng, next_id, n);
        produce(
            &rdk,
            &clusters.source.bootstrap,
            &topic,
            &batch,
            &mut source,
        );
        next_id += n;
    }
    note!(
        started,
        "{next_id} records produced in {:?}",
        started.elapsed()
    );

    let dir: PathBuf = clusters.dir().to_path_buf();
    // As scripts/quickstart writes it for the harness' ports. A 32 KiB round budget instead of
    // 64 MiB makes some two hundred rounds of the initial data (a few hundred ms): more rounds,
    // each a produce then a map write, to be killed in the middle of. Only this test's groups,
    // and not heartbeats: the shared source's `heartbeats` topic holds other tests' heartbeats.
    // Merging, a round of 256 KiB carries some dozens of source batches of 50 records.
    let flow = format!("{source_alias}->{target_alias}");
    let budget = if merge {
        "strait.max.bytes.in.flight = 262144\nstrait.batch.merge = always"
    } else {
        "strait.max.bytes.in.flight = 32768"
    };
    let config = write_flow_config(
        &clusters,
        (&source_alias, &target_alias),
        "mm2.properties",
        &format!(
            "{flow}.topics = {topic}\n\
             {flow}.groups = {groups}\n\
             heartbeats.replication.enabled = false\n\
             {budget}",
            groups = names.pattern()
        ),
    );

    let mut logs = Vec::new();
    let mut mid_mirror_kills = 0;
    for kill in 0..KILLS {
        let log = dir.join(format!("strait-run-{kill}.log"));
        let produced: i64 = source.values().map(|m| m.len() as i64).sum();
        let base: i64 = runtime
            .block_on(end_offsets(&target, &remote))
            .map_or(0, |e| e.values().sum());
        // Most runs die once the target has a seeded share of what is left to mirror, at any
        // point of a round; one dies early (and any run with nothing left to mirror).
        let when = if kill == DIES_EARLY || base >= produced {
            When::After(Duration::from_millis(10 + kill_rng.below(30)))
        } else {
            let permille = 150 + kill_rng.below(700) as i64;
            When::Holds(base + (produced - base) * permille / 1000)
        };
        let spawned = Instant::now();
        let mut strait = spawn_strait(&config, &log, false);
        match when {
            When::After(delay) => std::thread::sleep(delay),
            When::Holds(records) => {
                // Polled back to back, so the kill tends to come right after a produce, before
                // the round writes its map entries; a run that never gets there dies anyway.
                let mut exists = base > 0;
                while spawned.elapsed() < Duration::from_secs(10) {
                    if !exists {
                        exists = runtime.block_on(end_offsets(&target, &remote)).is_some();
                        std::thread::sleep(Duration::from_millis(1));
                        continue;
                    }
                    let holds: i64 = runtime
                        .block_on(known_end_offsets(&target, &remote))
                        .map_or(0, |e| e.values().sum());
                    if holds >= records {
                        break;
                    }
                }
            }
        }
        let early_exit = strait.0.try_wait().expect("try_wait");
        strait.0.kill().expect("SIGKILL");
        let status = strait.0.wait().expect("wait");
        let alive = spawned.elapsed();
        assert!(
            early_exit.is_none(),
            "run {kill} exited by itself ({early_exit:?}):\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        let holds: i64 = runtime
            .block_on(end_offsets(&target, &remote))
            .map_or(0, |e| e.values().sum());
        if holds < produced {
            mid_mirror_kills += 1;
        }
        let reported = read_log(&log);
        note!(
            started,
            "run {kill} ({when:?}) killed after {alive:?} ({status}); flow started: {}; \
             target holds {base} -> {holds} of {produced}; at start-up it found {} unrecorded \
             tail(s): recovered {}, duplicates {}",
            reported.started,
            reported.tail_lines,
            reported.recovered,
            reported.duplicates
        );
        logs.push((log, reported));
        if PRODUCE_AFTER_KILL.contains(&kill) {
            let batch = records(&mut rng, next_id, MORE);
            produce(
                &rdk,
                &clusters.source.bootstrap,
                &topic,
                &batch,
                &mut source,
            );
            next_id += MORE;
            note!(started, "{MORE} more records produced, {next_id} in all");
        }
    }

    let log = dir.join("strait-run-final.log");
    let final_started = Instant::now();
    let mut strait = spawn_strait(&config, &log, true);
    let status = wait_with_timeout(&mut strait.0, Duration::from_secs(40));
    assert!(
        status.is_some_and(|s| s.success()),
        "strait run --until-caught-up: {status:?}:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let final_report = read_log(&log);
    note!(
        started,
        "final run caught up in {:?}: {final_report:?}",
        final_started.elapsed()
    );
    logs.push((log.clone(), final_report));

    // What the target holds, read with librdkafka.
    let source_ends = runtime
        .block_on(end_offsets(&source_client, &topic))
        .expect("source topic");
    let target_ends = runtime
        .block_on(end_offsets(&target, &remote))
        .expect("remote topic exists");
    let target_total: i64 = target_ends.values().sum();
    let consuming = Instant::now();
    let got = rdk.consume(
        &clusters.target.bootstrap,
        &remote,
        target_total as usize,
        Duration::from_secs(45),
    );
    assert_eq!(got.len() as i64, target_total);
    note!(
        started,
        "{target_total} records read back in {:?}",
        consuming.elapsed()
    );

    let mut copies: HashMap<u64, u64> = HashMap::new();
    for record in &got {
        *copies.entry(id_of(record)).or_default() += 1;
    }
    let produced = next_id;
    let missing: Vec<u64> = (0..produced)
        .filter(|id| !copies.contains_key(id))
        .collect();
    let foreign: Vec<u64> = copies
        .keys()
        .copied()
        .filter(|id| *id >= produced)
        .collect();
    let duplicates: u64 = copies.values().map(|n| n - 1).sum();
    let ids_twice = copies.values().filter(|n| **n > 1).count();
    let reported_duplicates: u64 = logs.iter().map(|(_, r)| r.duplicates).sum();
    let reported_recovered: u64 = logs.iter().map(|(_, r)| r.recovered).sum();
    let lost_lines: usize = logs.iter().map(|(_, r)| r.lost_lines).sum();
    let stalls: usize = logs.iter().map(|(_, r)| r.stalls).sum();
    note!(
        started,
        "produced {produced}, target holds {target_total} ({} distinct); kills {KILLS} \
         ({mid_mirror_kills} with records left to mirror); duplicates {duplicates} ({ids_twice} ids more than \
         once), reported {reported_duplicates}; recovered (matched tail) {reported_recovered}; \
         stalls {stalls}; source ends {source_ends:?}, target ends {target_ends:?}; total {:?}",
        copies.len(),
        started.elapsed()
    );

    assert!(
        missing.is_empty(),
        "{} ids lost, first {:?}",
        missing.len(),
        &missing[..missing.len().min(20)]
    );
    assert!(foreign.is_empty(), "ids never produced: {foreign:?}");
    assert_eq!(lost_lines, 0, "strait reported source loss");

    // Strait counts a duplicate when start-up finds target records beyond the map that do not
    // match the source (they are written again). Each such line of every run is summed here.
    assert_eq!(
        duplicates, reported_duplicates,
        "records on the target twice vs duplicates strait reported"
    );
    // Every unrecorded tail a kill leaves is a copy of the source records after the map's end,
    // so all of it is matched: nothing is written twice.
    assert_eq!(
        duplicates, 0,
        "records written twice (recovered by matching: {reported_recovered})"
    );

    // Each partition exactly the source partition, in the source order.
    let mut by_partition: BTreeMap<i32, Vec<u64>> = BTreeMap::new();
    for record in &got {
        by_partition
            .entry(record.partition)
            .or_default()
            .push(id_of(record));
    }
    for p in 0..PARTITIONS {
        let want: Vec<u64> = source
            .get(&p)
            .map(|m| m.values().copied().collect())
            .unwrap_or_default();
        let have = by_partition.get(&p).cloned().unwrap_or_default();
        let mut seen = HashSet::new();
        let first_copies: Vec<u64> = have.iter().copied().filter(|id| seen.insert(*id)).collect();
        assert_eq!(first_copies.len(), want.len(), "{remote}-{p}: distinct ids");
        if let Some(i) = (0..want.len()).find(|&i| first_copies[i] != want[i]) {
            panic!(
                "{remote}-{p}: out of source order at {i}: id {} where the source has {}",
                first_copies[i], want[i]
            );
        }
        assert_eq!(have, want, "{remote}-{p}");
    }

    let (records_written, recovered, final_duplicates, lost) = final_report
        .stopped
        .expect("the final run logs \"flow stopped\"");
    assert_eq!(lost, 0);
    assert_eq!(
        (recovered, final_duplicates),
        (final_report.recovered, final_report.duplicates),
        "the final run's stats vs its start-up lines"
    );
    note!(started, "the final run wrote {records_written} records");
    assert_eq!(
        target_ends, source_ends,
        "target end offsets vs the source's"
    );
    if merge {
        let (source_batches, target_batches) = (
            runtime.block_on(batch_count(&source_client, &topic)),
            runtime.block_on(batch_count(&target, &remote)),
        );
        note!(
            started,
            "{source_batches} source batches, {target_batches} target batches"
        );
        assert!(
            target_batches * 2 < source_batches,
            "merged: {target_batches} target batches for {source_batches} source batches"
        );
    }
}

/// The batches `topic` holds, over its partitions.
async fn batch_count(client: &Client, topic: &str) -> usize {
    let options = strait_kafka::fetch::FetchOptions {
        max_wait: Duration::from_millis(10),
        isolation: IsolationLevel::ReadUncommitted,
        ..strait_kafka::fetch::FetchOptions::default()
    };
    let ends = known_end_offsets(client, topic).await.expect("end offsets");
    let mut count = 0;
    for (p, end) in ends {
        let tp = TopicPartition::new(topic, p);
        let mut position = 0;
        while position < end {
            let data = client
                .fetch(
                    &[strait_kafka::fetch::FetchPosition::new(
                        tp.clone(),
                        position,
                    )],
                    &options,
                )
                .await
                .remove(&tp)
                .expect("fetched")
                .expect("fetched");
            for batch in strait_wire::BatchScanner::new(data.records) {
                let batch = batch.expect("a whole batch");
                if batch.header.base_offset >= position {
                    position = batch.header.next_offset();
                    count += 1;
                }
            }
        }
    }
    count
}
