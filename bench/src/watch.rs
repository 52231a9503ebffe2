//! Watching a mirror from the outside, the same way for every mirror: the target topic's end
//! offsets (one ListOffsets request for all its partitions) polled at a fixed interval, and at
//! each poll the CPU time (utime + stime, all threads) of the processes named, from
//! `/proc/<pid>/stat`, and the machine's busy CPU time from `/proc/stat`. `bench/bench.py` takes
//! its measured window from this trace (from the poll where a share of the records is on the
//! target to the poll where all of them are), so a mirror's start-up and warm-up stay out of its
//! figures whatever the mirror logs or prints. Also the clean-up between runs: deleting topics.

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId as WireBrokerId, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use strait_kafka::Client;

/// Clock ticks per second of `/proc/<pid>/stat` (USER_HZ; 100 on every Linux this runs on).
const CLK_TCK: f64 = 100.0;

/// utime + stime of process `pid` in seconds, every thread included; `None` once it is gone.
pub fn proc_cpu(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / CLK_TCK)
}

/// Peak resident set (VmHWM) of `pid` in MiB, while it runs.
pub fn proc_peak_rss_mb(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Non-idle CPU seconds of the whole machine since boot (all cores).
pub fn machine_busy() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?;
    let values: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .filter_map(|v| v.parse().ok())
        .collect();
    if values.len() < 5 {
        return None;
    }
    let idle = values[3] + values[4];
    Some((values.iter().sum::<f64>() - idle) / CLK_TCK)
}

/// Per partition of `topic`: (partition, error code, end offset), asked in one ListOffsets
/// request of the one broker; `None` while the topic is not in the metadata.
pub async fn list_end_offsets(
    client: &Client,
    topic: &str,
) -> anyhow::Result<Option<Vec<(i32, i16, i64)>>> {
    let mut metadata = client.metadata().await?;
    if !metadata.topics.contains_key(topic) {
        metadata = client.refresh_metadata().await?;
    }
    let Some(info) = metadata.topics.get(topic) else {
        return Ok(None);
    };
    let partitions: Vec<ListOffsetsPartition> = info
        .partitions
        .keys()
        .map(|p| {
            ListOffsetsPartition::default()
                .with_partition_index(*p)
                .with_current_leader_epoch(-1)
                .with_timestamp(-1)
        })
        .collect();
    let request = ListOffsetsRequest::default()
        .with_replica_id(WireBrokerId(-1))
        .with_isolation_level(0)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partitions(partitions)]);
    let response = client.send_any(&request).await?;
    Ok(Some(
        response
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .map(|p| (p.partition_index, p.error_code, p.offset))
            .collect(),
    ))
}

/// The sum of the end offsets (high watermarks) of every partition of `topic`; `None` while
/// the topic is not in the metadata. Partitions that answer with an error (a leader not
/// elected yet) count as 0.
pub async fn end_offsets_sum(client: &Client, topic: &str) -> anyhow::Result<Option<i64>> {
    Ok(list_end_offsets(client, topic).await?.map(|ps| {
        ps.iter()
            .filter(|(_, error, _)| *error == 0)
            .map(|(_, _, offset)| (*offset).max(0))
            .sum()
    }))
}

/// Waits until every one of the `partitions` partitions of `topic` answers ListOffsets
/// without an error: a topic just created on Kafka is not led at once, and an idempotent
/// producer's first batch refused there while later ones get in would be out of sequence.
pub async fn wait_partitions_ready(
    client: &Client,
    topic: &str,
    partitions: usize,
) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        if let Some(ps) = list_end_offsets(client, topic).await? {
            if ps.len() == partitions && ps.iter().all(|(_, error, _)| *error == 0) {
                return Ok(());
            }
        }
        if started.elapsed() > Duration::from_secs(60) {
            bail!("{topic}: partitions not all ready 60 s after it was created");
        }
        client.refresh_metadata().await?;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What [`watch`] polls and until when.
#[derive(Debug, Clone)]
pub struct WatchSpec {
    /// The target topics (one ListOffsets request each per poll; usually one).
    pub topics: Vec<String>,
    /// The records they must hold together when the mirror is done.
    pub records: i64,
    /// Processes whose CPU is sampled at every poll (the mirror, the brokers).
    pub pids: Vec<u32>,
    /// Time between polls.
    pub interval: Duration,
    /// Give up after this long.
    pub timeout: Duration,
    /// Stop with an error when this process exits (the mirror) and the target stays short
    /// for `grace` after that.
    pub exit_pid: Option<u32>,
    /// See `exit_pid`.
    pub grace: Duration,
}

/// Polls until the target topics hold `records` records, writing one JSON line per poll to
/// `out`: `t` (seconds since the watch began), `records` (the sum of end offsets, 0 before the
/// topic exists), `written` (the partitions whose end offset is above 0: the mirror's first
/// write to each partition), `cpu` (per pid, seconds; null when gone), `self_cpu` (this
/// process) and `busy` (the machine's busy CPU seconds), and, on the last line, `rss` (per pid,
/// peak MiB). A poll is written only when the count changed, plus the first and the last, so a
/// trace stays small; every line is exact at its own time.
pub async fn watch(client: &Client, spec: &WatchSpec, out: &mut impl Write) -> anyhow::Result<()> {
    let started = Instant::now();
    let me = std::process::id();
    let mut last_written: Option<i64> = None;
    let topics = spec.topics.join(",");
    let mut exited_at: Option<Instant> = None;
    let mut next = started;
    loop {
        let (mut records, mut written) = (0i64, 0usize);
        for topic in &spec.topics {
            for (_, error, offset) in list_end_offsets(client, topic).await?.unwrap_or_default() {
                if error == 0 && offset > 0 {
                    records += offset;
                    written += 1;
                }
            }
        }
        let t = started.elapsed().as_secs_f64();
        let done = records >= spec.records;
        if last_written != Some(records) || done {
            let cpu: Vec<Option<f64>> = spec.pids.iter().map(|p| proc_cpu(*p)).collect();
            let mut line = serde_json::json!({
                "t": t,
                "records": records,
                "written": written,
                "cpu": cpu,
                "self_cpu": proc_cpu(me),
                "busy": machine_busy(),
            });
            if done {
                let rss: Vec<Option<f64>> =
                    spec.pids.iter().map(|p| proc_peak_rss_mb(*p)).collect();
                line["rss"] = serde_json::json!(rss);
            }
            writeln!(out, "{line}")?;
            out.flush()?;
            last_written = Some(records);
        }
        if done {
            if records > spec.records {
                bail!(
                    "{topics} holds {records} records, more than the {} expected",
                    spec.records
                );
            }
            return Ok(());
        }
        if started.elapsed() > spec.timeout {
            bail!(
                "{topics} holds {records} of {} records after {:?}",
                spec.records,
                spec.timeout
            );
        }
        if let Some(pid) = spec.exit_pid {
            if proc_cpu(pid).is_none() || is_zombie(pid) {
                let at = *exited_at.get_or_insert_with(Instant::now);
                if at.elapsed() > spec.grace {
                    bail!(
                        "process {pid} exited with {topics} holding {records} of {} records",
                        spec.records
                    );
                }
            }
        }
        next += spec.interval;
        let now = Instant::now();
        if next > now {
            tokio::time::sleep(next - now).await;
        } else {
            next = now;
        }
    }
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rfind(')')
                .and_then(|i| s[i + 1..].split_whitespace().next().map(str::to_owned))
        })
        .is_some_and(|state| state == "Z" || state == "X")
}

/// Deletes every topic of the cluster except internal ones (`__*`) and `keep`, and waits
/// until the metadata no longer lists them. Returns the topics deleted.
pub async fn clean(client: &Client, keep: &[String]) -> anyhow::Result<Vec<String>> {
    let metadata = client.refresh_metadata().await?;
    let doomed: Vec<String> = metadata
        .topics
        .values()
        .filter(|t| !t.is_internal && !t.name.starts_with("__") && !keep.contains(&t.name))
        .map(|t| t.name.clone())
        .collect();
    if doomed.is_empty() {
        return Ok(doomed);
    }
    let names: Vec<&str> = doomed.iter().map(String::as_str).collect();
    for (topic, result) in client.delete_topics(&names).await? {
        match result {
            Ok(()) => {}
            Err(e) if e.to_string().contains("UNKNOWN_TOPIC") => {}
            Err(e) => return Err(e).with_context(|| format!("delete {topic}")),
        }
    }
    let started = Instant::now();
    loop {
        let m = client.refresh_metadata().await?;
        if !doomed.iter().any(|t| m.topics.contains_key(t)) {
            return Ok(doomed);
        }
        if started.elapsed() > Duration::from_secs(60) {
            bail!("topics still listed 60 s after their deletion");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
