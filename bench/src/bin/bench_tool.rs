//! Helpers of `bench/run` and `bench/chaos` (each subcommand prints one JSON line):
//!
//! - `load`: writes a workload's records to a new source topic with librdkafka, in the
//!   batches a Kafka producer with default settings makes (16 KiB);
//! - `wire-size`: a topic's batches, records and bytes as stored (what a mirror moves);
//! - `count`: a topic's records, from its end offsets;
//! - `ceiling`: the broker-bound ceiling: a topic's batches read into memory first, then
//!   written to a new target topic by a raw producer that does nothing else; the time is the
//!   target's ingest time for exactly those batches;
//! - `precision`: offset translation at failover, strait against the MM2 model;
//! - `watch`: polls a target topic's end offsets until it holds a number of records, with the
//!   CPU of the processes named at every poll (a JSON line per poll, to `--out`): the measured
//!   window of every mirror run;
//! - `clean`: deletes every non-internal topic of a cluster but the ones kept.

use std::time::Instant;

use clap::{Parser, Subcommand};
use strait_bench::workload::Pool;
use strait_bench::{precision, raw, rdk, watch};

#[derive(Debug, Parser)]
#[command(name = "bench-tool")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create `--topic` with `--partitions` and write `--records` records of `--size` bytes.
    Load {
        #[arg(long)]
        bootstrap: String,
        #[arg(long)]
        topic: String,
        #[arg(long)]
        partitions: i32,
        #[arg(long)]
        codec: String,
        #[arg(long)]
        size: usize,
        #[arg(long)]
        records: u64,
        /// The producer's batch.size: 16 KiB, a Kafka producer's default.
        #[arg(long, default_value_t = 16384)]
        batch_bytes: usize,
        #[arg(long, default_value_t = 50)]
        linger_ms: u64,
    },
    /// Batches, records and bytes of `--topic` as stored.
    WireSize {
        #[arg(long)]
        bootstrap: String,
        #[arg(long)]
        topic: String,
    },
    /// Records of `--topic` (the sum of its partitions' end offsets); 0 if it does not exist.
    Count {
        #[arg(long)]
        bootstrap: String,
        #[arg(long)]
        topic: String,
    },
    /// Read `--topic` from `--source` into memory, then write the same batches to
    /// `--target-topic` on `--target`, timed.
    Ceiling {
        #[arg(long)]
        source: String,
        #[arg(long)]
        target: String,
        #[arg(long)]
        topic: String,
        #[arg(long)]
        target_topic: String,
    },
    /// Poll `--topic` (repeat the option for several: their records add up) on `--bootstrap`
    /// until it holds `--records` records; one JSON line per poll (when the count changed) to
    /// `--out`, with the CPU seconds of each `--pid`.
    Watch {
        #[arg(long)]
        bootstrap: String,
        #[arg(long = "topic", required = true)]
        topics: Vec<String>,
        #[arg(long)]
        records: i64,
        /// Processes whose CPU is sampled (repeat the option).
        #[arg(long = "pid")]
        pids: Vec<u32>,
        /// Fail once this process has exited and the topic stays short for 30 s.
        #[arg(long)]
        exit_pid: Option<u32>,
        #[arg(long, default_value_t = 100)]
        interval_ms: u64,
        #[arg(long, default_value_t = 3600)]
        timeout_s: u64,
        #[arg(long)]
        out: std::path::PathBuf,
    },
    /// Delete every topic of `--bootstrap` except internal ones and each `--keep`.
    Clean {
        #[arg(long)]
        bootstrap: String,
        #[arg(long)]
        keep: Vec<String>,
    },
    /// Offset translation at failover for groups at lags 0 to `--max-lag`.
    Precision {
        #[arg(long, default_value_t = 1_000_000)]
        max_lag: i64,
        /// Random lags per decade, besides the powers of ten.
        #[arg(long, default_value_t = 40)]
        per_decade: usize,
    },
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let out = match Cli::parse().command {
        Command::Load {
            bootstrap,
            topic,
            partitions,
            codec,
            size,
            records,
            batch_bytes,
            linger_ms,
        } => {
            rdk::create_topic(&bootstrap, &topic, partitions, false)?;
            let pool = Pool::new(size as u64, size, Pool::count_for(size));
            let base = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_millis() as i64
                - records as i64;
            let p = rdk::produce_workload(
                &bootstrap,
                &topic,
                partitions,
                &codec,
                &pool,
                records,
                batch_bytes,
                linger_ms,
                base,
            )?;
            serde_json::json!({
                "records": p.records,
                "payload_bytes": p.payload_bytes,
                "seconds": p.seconds,
            })
        }
        Command::WireSize { bootstrap, topic } => runtime.block_on(async {
            let client = raw::connect(&bootstrap).await?;
            let started = Instant::now();
            let b = raw::read_topic(&client, &topic).await?;
            anyhow::Ok(serde_json::json!({
                "partitions": b.partitions.len(),
                "batches": b.batches(),
                "records": b.records(),
                "wire_bytes": b.wire_bytes(),
                "read_seconds": strait_bench::secs(started),
            }))
        })?,
        Command::Count { bootstrap, topic } => runtime.block_on(async {
            let client = raw::connect(&bootstrap).await?;
            let (partitions, records) = raw::count(&client, &topic).await?;
            anyhow::Ok(serde_json::json!({ "partitions": partitions, "records": records }))
        })?,
        Command::Ceiling {
            source,
            target,
            topic,
            target_topic,
        } => runtime.block_on(async {
            let source = raw::connect(&source).await?;
            let batches = raw::read_topic(&source, &topic).await?;
            let target = raw::connect(&target).await?;
            let r = raw::replay(&target, &target_topic, &batches).await?;
            anyhow::Ok(serde_json::json!({
                "batches": r.batches,
                "records": r.records,
                "wire_bytes": r.wire_bytes,
                "seconds": r.seconds,
            }))
        })?,
        Command::Watch {
            bootstrap,
            topics,
            records,
            pids,
            exit_pid,
            interval_ms,
            timeout_s,
            out,
        } => runtime.block_on(async {
            let client = raw::connect(&bootstrap).await?;
            let spec = watch::WatchSpec {
                topics,
                records,
                pids,
                interval: std::time::Duration::from_millis(interval_ms),
                timeout: std::time::Duration::from_secs(timeout_s),
                exit_pid,
                grace: std::time::Duration::from_secs(30),
            };
            let mut file = std::io::BufWriter::new(std::fs::File::create(&out)?);
            watch::watch(&client, &spec, &mut file).await?;
            anyhow::Ok(serde_json::json!({ "done": true }))
        })?,
        Command::Clean { bootstrap, keep } => runtime.block_on(async {
            let client = raw::connect(&bootstrap).await?;
            let deleted = watch::clean(&client, &keep).await?;
            anyhow::Ok(serde_json::json!({ "deleted": deleted }))
        })?,
        Command::Precision {
            max_lag,
            per_decade,
        } => {
            let lags = precision::lags(max_lag, per_decade, 0x1a95);
            let mut points = Vec::new();
            let mut partitions = Vec::new();
            for (i, kind) in precision::Kind::ALL.into_iter().enumerate() {
                let s = precision::build(kind, max_lag + max_lag / 20 + 1000, 0xbe9c + i as u64)?;
                partitions.push(serde_json::json!({
                    "kind": kind,
                    "source_offsets": s.src_end,
                    "mirrored_records": s.mirrored,
                    "segments": s.map.segments().len(),
                    "mm2_syncs_sent": precision::mm2_of(&s.map).syncs_sent(),
                }));
                points.extend(precision::measure(kind, &s, &lags)?);
            }
            serde_json::json!({ "partitions": partitions, "points": points })
        }
    };
    println!("{out}");
    Ok(())
}
