//! `strait failover check`: is it safe to fail over now? What a failover of each flow at this
//! moment would leave behind if its source were lost (`strait_core::offsets::readiness`),
//! printed per flow, partition and group, with an exit code a script can use.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use clap::Args;
use strait_core::config::{FlowConfig, StraitConfig};
use strait_core::internal::map_store::MapStore;
use strait_core::offsets::readiness::{self, AgeFrom, FlowReadiness};

use crate::clusters::{client_config, connect, find_flow};
use crate::format;

/// The exit code when a flow is not ready within `--within`.
pub(crate) const AT_RISK: u8 = 3;
/// The exit code when a flow's source did not answer (the check cannot tell what it holds).
pub(crate) const SOURCE_SILENT: u8 = 4;

/// Arguments of `failover check`.
#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// The MM2 properties file.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Only this flow, as `A->B`; by default every enabled flow.
    #[arg(long, value_name = "A->B")]
    flow: Option<String>,
    /// Ready means: no source record has waited longer than this to be mirrored, and every
    /// group's captured position is at most this old.
    #[arg(long, value_name = "SECONDS", default_value = "5", value_parser = parse_within)]
    within: Duration,
    /// Print the answer as JSON.
    #[arg(long)]
    json: bool,
}

/// Checks the flows and exits with 0 (ready), 3 (at risk) or 4 (a source did not answer).
pub(crate) async fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let config = StraitConfig::load(&args.config)?;
    let flows: Vec<&FlowConfig> = match &args.flow {
        Some(name) => vec![find_flow(&config, name)?],
        None => config.flows.iter().collect(),
    };
    let within = args.within;
    let mut answers = Vec::new();
    for flow in flows {
        answers.push(assess(&config, flow).await?);
    }
    if args.json {
        let ready: Vec<bool> = answers.iter().map(|a| a.ready_within(within)).collect();
        let out: Vec<serde_json::Value> = answers
            .iter()
            .zip(ready)
            .map(|(a, ready)| {
                let mut v = serde_json::to_value(a).unwrap_or_default();
                v["ready"] = ready.into();
                v
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for a in &answers {
            print_flow(a, within);
        }
    }
    Ok(ExitCode::from(exit_code(&answers, within)))
}

/// `--within`: seconds, 0 or more, finite.
fn parse_within(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    readiness::within(seconds)
}

/// 4 when a source did not answer, else 3 when a flow is not ready within `within`, else 0.
fn exit_code(answers: &[FlowReadiness], within: Duration) -> u8 {
    if answers.iter().any(|a| a.source_error.is_some()) {
        SOURCE_SILENT
    } else if answers.iter().any(|a| !a.ready_within(within)) {
        AT_RISK
    } else {
        0
    }
}

async fn assess(config: &StraitConfig, flow: &FlowConfig) -> anyhow::Result<FlowReadiness> {
    let target = connect(client_config(config, flow.target.as_str())?, None)
        .await
        .with_context(|| format!("cannot reach target {}", flow.target))?;
    let map = MapStore::read(&target, flow.source_alias.as_str())
        .await
        .with_context(|| format!("cannot read the offset map of {}", flow.name()))?;
    let source = connect(
        client_config(config, flow.source.as_str())?,
        Some(readiness::SOURCE_PATIENCE),
    )
    .await
    .map_err(|e| format!("{} does not answer: {e:#}", flow.source));
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    Ok(readiness::assess(
        source.as_ref().map_err(Clone::clone),
        &target,
        flow,
        &map,
        now_ms,
    )
    .await?)
}

fn print_flow(a: &FlowReadiness, within: Duration) {
    let verdict = if let Some(e) = &a.source_error {
        format!("CANNOT TELL: {e}; positions below are the checkpoints' alone")
    } else if a.exact {
        "ready: a failover now loses no record, and every group resumes exactly".to_owned()
    } else if a.ready_within(within) {
        format!("ready within {}", format::duration(within.as_secs_f64()))
    } else {
        format!(
            "NOT READY within {}",
            format::duration(within.as_secs_f64())
        )
    };
    println!("{}  {verdict}", a.flow);
    match (a.records_at_risk, a.seconds_at_risk) {
        (Some(0), _) => println!("  data: every record on the source is on the target"),
        (Some(n), Some(s)) => println!(
            "  data: {} on the source not yet on the target, the oldest waiting {}",
            format::things(usize::try_from(n).unwrap_or(usize::MAX), "record"),
            format::duration(s)
        ),
        _ => println!("  data: unknown (the source did not answer)"),
    }
    if !a.partitions.is_empty() {
        println!("  {:<40} {:>12} {:>10}", "PARTITION", "RECORDS", "WAITING");
        for p in &a.partitions {
            // A wait measured from the producer's own time is marked: an application's
            // event time may say anything (`docs/http-api.md`, `age_from`).
            let waiting = match (p.seconds, p.age_from) {
                (Some(s), Some(AgeFrom::CreateTime)) => format!("{}*", format::duration(s)),
                (Some(s), _) => format::duration(s),
                (None, _) => "?".to_owned(),
            };
            let name = format!("{}-{}", p.topic, p.partition);
            println!("  {name:<40} {:>12} {waiting:>10}", p.records);
        }
    }
    if a.partitions
        .iter()
        .any(|p| p.seconds.is_some() && p.age_from == Some(AgeFrom::CreateTime))
    {
        println!("  * from the records' create times, which their producers set");
    }
    if a.groups.is_empty() {
        println!("  groups: none with a position on the source or a checkpoint");
        return;
    }
    println!(
        "  {:<40} {:>12} {:>11} {:>16} {:>6}",
        "GROUP", "POSITION AGE", "READ AGAIN", "LAST CHECKPOINT", "EXACT"
    );
    for g in &a.groups {
        let age = match (g.position_age_seconds, g.partitions_without_checkpoint) {
            (_, n) if n > 0 => format!("{n} uncaught"),
            (Some(s), _) => format::duration(s),
            (None, _) => "?".to_owned(),
        };
        let again = g
            .records_since_checkpoint
            .map_or("?".to_owned(), |n| n.to_string());
        let last = g.last_checkpoint_seconds.map_or("never".to_owned(), |s| {
            format!("{} ago", format::duration(s))
        });
        let exact = match (g.exact(), g.records_since_checkpoint) {
            (true, _) => "yes",
            (false, None) => "?",
            (false, Some(_)) => "no",
        };
        println!(
            "  {:<40} {age:>12} {again:>11} {last:>16} {exact:>6}",
            g.group
        );
    }
    for g in &a.groups {
        if let Some(n) = g.records_skipped.filter(|n| *n > 0) {
            println!(
                "  {}: rewound on the source below its last checkpoint; a failover made from \
                 the checkpoints now would skip {} it has not read",
                g.group,
                format::things(usize::try_from(n).unwrap_or(usize::MAX), "record")
            );
        }
    }
}
