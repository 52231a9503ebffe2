//! `eos-cost`: what writing in transactions costs a flow (`docs/scaling.md`, "The cost of
//! exactly-once"). Two Apache Kafka clusters are started (`strait-testkit`, the jars the tests
//! use), a source topic is loaded once with the benchmarks' workload (librdkafka, 1 KiB lz4
//! records), and the same flow mirrors it, in turn, into targets of their own:
//!
//! - at least once: the flow as `strait run` runs it without workers;
//! - exactly once: one unit of a flow run by workers (`tasks.max = 1`): a transactional
//!   producer, each round's data and map records in one transaction.
//!
//! Each mirror runs in this process from the flow's start to caught up; it prints MB/s of
//! record batches, rounds, and the CPU time of the process over the run (user + system, from
//! `getrusage`), per GB.
//!
//! ```sh
//! cargo run --release --manifest-path bench/Cargo.toml --bin eos-cost -- --records 200000
//! cargo run --release --manifest-path bench/Cargo.toml --bin eos-cost -- --records 200000 --budget-mib 3
//! ```
//!
//! The second makes rounds of about 1 MB, as a flow following a live topic has: there the
//! transaction's fixed cost per round (AddPartitionsToTxn, the map write, EndTxn) shows.

use std::time::{Duration, Instant};

use clap::Parser;
use strait_bench::rdk;
use strait_core::config::StraitConfig;
use strait_core::flow::{Flow, FlowOptions};
use strait_core::scale::UnitFilter;
use strait_kafka::produce::ProducerConfig;
use strait_kafka::{Client, ClientConfig};
use strait_testkit::Clusters;

#[derive(Debug, Parser)]
struct Args {
    /// Records in the source topic.
    #[arg(long, default_value_t = 200_000)]
    records: u64,
    /// Its partitions.
    #[arg(long, default_value_t = 16)]
    partitions: i32,
    /// Bytes per record value.
    #[arg(long, default_value_t = 1024)]
    value_bytes: usize,
    /// Runs of each mirror.
    #[arg(long, default_value_t = 2)]
    reps: usize,
    /// `strait.max.bytes.in.flight` of the flow, in MiB: a third of it is fetched per round,
    /// so a small budget makes many small rounds, as a flow that follows a live topic has.
    #[arg(long, default_value_t = 64)]
    budget_mib: u64,
}

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(usage.ru_utime) + t(usage.ru_stime)
}

async fn client(bootstrap: &str) -> Client {
    let mut config = ClientConfig::new([bootstrap]);
    config.operation_timeout = Duration::from_secs(60);
    Client::connect(config).await.expect("connect")
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let clusters = Clusters::start();
    let (src, dst) = (
        clusters.source.bootstrap.clone(),
        clusters.target.bootstrap.clone(),
    );
    let produced = rdk::load_topic(
        &src,
        "load",
        args.partitions,
        args.records,
        args.value_bytes,
    )?;
    println!(
        "source: {} records of {} B in {} partitions (lz4), loaded in {:.1} s",
        produced.records, args.value_bytes, args.partitions, produced.seconds
    );
    println!(
        "budget {} MiB: about {:.1} MB fetched per round",
        args.budget_mib,
        (args.budget_mib << 20) as f64 / 3.0 / 1e6
    );
    println!(
        "{:<14} {:>4} {:>9} {:>9} {:>8} {:>10} {:>8} {:>9}",
        "mirror", "rep", "seconds", "MB/s", "rounds", "core-s/GB", "MB", "ms/round"
    );
    let mut run = 0;
    for rep in 0..args.reps {
        for eos in [false, true] {
            run += 1;
            // Aliases of their own per run: new remote and internal topics.
            let (s, t) = (format!("src{run}"), format!("tgt{run}"));
            let text = format!(
                "clusters = {s}, {t}\n{s}.bootstrap.servers = {src}\n{t}.bootstrap.servers = {dst}\n\
                 {s}->{t}.enabled = true\nreplication.factor = 1\n\
                 checkpoints.topic.replication.factor = 1\noffset-syncs.topic.replication.factor = 1\n\
                 heartbeats.topic.replication.factor = 1\nemit.offset-syncs.enabled = false\n\
                 topics = load\nstrait.max.bytes.in.flight = {}\n",
                args.budget_mib << 20
            );
            let config = StraitConfig::parse(&text, "eos-cost.properties")?;
            let flow_config = config.flows.into_iter().next().expect("one flow");
            let mut options = FlowOptions {
                partition_bytes_from_budget: true,
                ..FlowOptions::default()
            };
            if eos {
                options.unit = Some(UnitFilter { index: 0, units: 1 });
                options.producer = ProducerConfig {
                    transactional_id: Some(format!("eos-cost-{run}")),
                    ..ProducerConfig::default()
                };
            }
            let began = Instant::now();
            let cpu = cpu_seconds();
            let mut flow =
                Flow::start(flow_config, options, client(&src).await, client(&dst).await).await?;
            let mut rounds = 0u64;
            loop {
                let stats = flow.round().await?;
                rounds += 1;
                if stats.caught_up && flow.stats().records >= produced.records {
                    break;
                }
            }
            let seconds = began.elapsed().as_secs_f64();
            let cpu = cpu_seconds() - cpu;
            let bytes = flow.stats().bytes as f64;
            println!(
                "{:<14} {:>4} {:>9.2} {:>9.1} {:>8} {:>10.2} {:>8.1} {:>9.1}",
                if eos { "exactly-once" } else { "at-least-once" },
                rep + 1,
                seconds,
                bytes / 1e6 / seconds,
                rounds,
                cpu / (bytes / 1e9),
                bytes / 1e6,
                seconds * 1000.0 / rounds as f64
            );
        }
    }
    Ok(())
}
