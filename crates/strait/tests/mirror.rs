//! `strait mirror --until caught-up` against two real brokers, the binary run as an operator
//! runs it (stderr not a terminal): it exits 0 with every record on the target (read back with
//! librdkafka), its progress lines appear, grow and end at 100% / caught up; records deleted on
//! the source before they were mirrored make it exit non-zero with a summary that counts them;
//! `--log-format json` writes one JSON object per line; and a password in the config never
//! reaches stdout or stderr, even at `RUST_LOG=debug`.

mod running;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use running::{run_to_end, write_flow_config};
use serde_json::Value;
use strait_kafka::{Client, ClientConfig, TopicPartition};
use strait_testkit::{Clusters, Names, Rdk, TestRecord};

/// Bytes of each record value: letters lz4 and the broker cannot shrink much.
const VALUE_LEN: usize = 100;

/// The source cluster's alias in this test's flow.
fn source_alias(names: &Names) -> String {
    names.alias("source")
}

/// The target cluster's alias in this test's flow.
fn target_alias(names: &Names) -> String {
    names.alias("target")
}

/// This test's flow, `source<id>->target<id>`.
fn flow_name(names: &Names) -> String {
    format!("{}->{}", source_alias(names), target_alias(names))
}

/// The remote topic of this test's source topic `topic`.
fn remote(names: &Names, topic: &str) -> String {
    format!("{}.{topic}", source_alias(names))
}

/// `source->target` over the test clusters, taking every topic and group of this test's, plus
/// `extra` lines; returns the file. Not heartbeats: the shared source's `heartbeats` topic holds
/// other tests' heartbeats, which a flow mirrors whatever the topic filter.
fn write_config(clusters: &Clusters, names: &Names, name: &str, extra: &str) -> PathBuf {
    let flow = flow_name(names);
    let extra = format!(
        "{flow}.topics = {pattern}\n\
         {flow}.groups = {pattern}\n\
         heartbeats.replication.enabled = false\n{extra}",
        pattern = names.pattern()
    );
    write_flow_config(
        clusters,
        (&source_alias(names), &target_alias(names)),
        name,
        &extra,
    )
}

/// Records `first..first + n`, record `i` to partition `i % partitions`, with values that do
/// not compress away.
fn records(first: u64, n: u64, partitions: i32) -> Vec<TestRecord> {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64 ^ first;
    (first..first + n)
        .map(|i| {
            let mut value = format!("id={i:08};").into_bytes();
            while value.len() < VALUE_LEN {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                value.push(b'a' + (state % 26) as u8);
            }
            TestRecord::new(
                (i % partitions as u64) as i32,
                Some(format!("k{i}").as_bytes()),
                Some(&value),
            )
        })
        .collect()
}

/// A record's key and value.
type Payload = (Option<Vec<u8>>, Option<Vec<u8>>);

/// Per partition, the (key, value) pairs in offset order.
fn by_partition(records: &[TestRecord]) -> BTreeMap<i32, Vec<Payload>> {
    let mut out: BTreeMap<i32, Vec<_>> = BTreeMap::new();
    for r in records {
        out.entry(r.partition)
            .or_default()
            .push((r.key.clone(), r.value.clone()));
    }
    out
}

/// One progress line of the flow: `done/total records (percent%)`, and whether it is the final
/// `caught up` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Progress {
    done: u64,
    total: u64,
    percent: u64,
    caught_up: bool,
}

/// The human progress lines of the flow `flow`, in order.
fn progress_lines(stderr: &str, flow: &str) -> Vec<Progress> {
    let prefix = format!("mirror {flow}: ");
    stderr
        .lines()
        .filter_map(|line| {
            let rest = &line[line.find(&prefix)? + prefix.len()..];
            let caught_up = rest.starts_with("caught up, ");
            let rest = rest.strip_prefix("caught up, ").unwrap_or(rest);
            let (counts, rest) = rest.split_once(" records (")?;
            let (done, total) = counts.split_once('/')?;
            let (percent, _) = rest.split_once("%)")?;
            // Counts are printed with thousands separators (`12,000`).
            Some(Progress {
                done: done.replace(',', "").parse().ok()?,
                total: total.replace(',', "").parse().ok()?,
                percent: percent.parse().ok()?,
                caught_up,
            })
        })
        .collect()
}

/// Checks the progress lines of a copy of `total` source offsets: at least one line while it
/// runs, numbers that never go back and grow, the same total throughout, and one final line
/// that says caught up at 100%.
fn assert_progress(lines: &[Progress], total: u64, output: &str) {
    let (last, running) = lines
        .split_last()
        .unwrap_or_else(|| panic!("no progress lines:\n{output}"));
    assert!(
        last.caught_up && last.done == total && last.total == total && last.percent == 100,
        "final line {last:?}, expected caught up at {total}/{total} (100%):\n{output}"
    );
    assert!(
        !running.is_empty() && running.iter().all(|p| !p.caught_up),
        "expected progress lines before the final one:\n{output}"
    );
    assert!(
        running.iter().all(|p| p.total == total && p.done <= total),
        "{running:?}"
    );
    assert!(
        lines.windows(2).all(|w| w[0].done <= w[1].done),
        "progress went back: {lines:?}"
    );
    assert!(
        running.iter().any(|p| p.done < total),
        "every progress line already at the end, none shows the copy under way: {lines:?}"
    );
    let expected = |p: &Progress| (p.done * 100 / p.total.max(1)).min(100);
    assert!(
        running.iter().all(|p| p.percent == expected(p)),
        "{running:?}"
    );
}

/// The summary row of the flow `flow`: its whitespace-separated columns.
fn summary_row(stdout: &str, flow: &str) -> Vec<String> {
    stdout
        .lines()
        .find(|l| l.starts_with(flow))
        .unwrap_or_else(|| panic!("no summary row for {flow}:\n{stdout}"))
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

async fn client(bootstrap: &str) -> Client {
    let mut config = ClientConfig::new([bootstrap]);
    config.operation_timeout = Duration::from_secs(20);
    Client::connect(config).await.expect("connect")
}

#[test]
fn mirror_copies_until_caught_up_with_progress_lines_and_json_logs() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let flow = flow_name(&names);
    let orders = names.topic("orders");
    let rdk = Rdk::new();
    let dir = clusters.dir().to_path_buf();
    const PARTITIONS: i32 = 3;
    const FIRST: u64 = 45_000;
    const MORE: u64 = 30_000;
    rdk.create_topic(&clusters.source.bootstrap, &orders, PARTITIONS);
    let first = records(0, FIRST, PARTITIONS);
    for chunk in first.chunks(15_000) {
        rdk.produce(&clusters.source.bootstrap, &orders, chunk, "lz4");
    }
    // A small budget per round, so the copy takes many rounds, and progress every 5 ms, so the
    // lines show it under way: on a warm shared broker the second copy below took 32 ms.
    let config = write_config(
        &clusters,
        &names,
        "mirror.properties",
        "strait.max.bytes.in.flight = 32768",
    );
    let config = config.to_str().expect("utf-8 path");

    let run = run_to_end(
        &dir,
        &[
            "mirror",
            "--config",
            config,
            "--until",
            "caught-up",
            "--progress-interval",
            "0.005",
        ],
        &[],
    );
    let output = run.both();
    assert!(run.status.success(), "{output}");
    assert_progress(&progress_lines(&run.stderr, &flow), FIRST, &output);
    // Every record on the target, per partition in the source's order (librdkafka reads both).
    let source = rdk.consume(
        &clusters.source.bootstrap,
        &orders,
        FIRST as usize,
        Duration::from_secs(60),
    );
    let target = rdk.consume(
        &clusters.target.bootstrap,
        &remote(&names, &orders),
        FIRST as usize,
        Duration::from_secs(60),
    );
    assert_eq!(target.len(), FIRST as usize);
    assert!(
        by_partition(&source) == by_partition(&target),
        "target differs from the source"
    );
    // The summary: records and nothing lost or duplicated.
    let row = summary_row(&run.stdout, &flow);
    assert_eq!(row[1..3], ["caught", "up"], "{output}");
    assert_eq!(
        row[3].replace(',', ""),
        FIRST.to_string(),
        "records column (thousands separated):\n{output}"
    );
    assert_eq!(row[6..8], ["0", "0"], "lost and duplicates:\n{output}");

    // More records, then a second copy with JSON logs: it resumes where the map ends and copies
    // only the new ones; every stderr line is one JSON object.
    let more = records(FIRST, MORE, PARTITIONS);
    for chunk in more.chunks(15_000) {
        rdk.produce(&clusters.source.bootstrap, &orders, chunk, "lz4");
    }
    let run = run_to_end(
        &dir,
        &[
            "mirror",
            "--config",
            config,
            "--log-format",
            "json",
            "--progress-interval",
            "0.005",
            "--json",
        ],
        &[],
    );
    let output = run.both();
    assert!(run.status.success(), "{output}");
    let events: Vec<Value> = run
        .stderr
        .lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}\n{output}"))
        })
        .collect();
    assert!(
        events.iter().all(|e| e["timestamp"].is_string()
            && e["level"].is_string()
            && e["message"].is_string()),
        "{output}"
    );
    let progress: Vec<Progress> = events
        .iter()
        .filter(|e| e["target"] == "strait::progress" && e["flow"] == flow.as_str())
        .map(|e| Progress {
            done: e["done"].as_u64().expect("done"),
            total: e["total"].as_u64().expect("total"),
            percent: e["percent"].as_u64().expect("percent"),
            caught_up: e["caught_up"].as_bool().unwrap_or(false),
        })
        .collect();
    assert_progress(&progress, MORE, &output);
    // The flow's start and stop lines carry their fields as JSON fields.
    assert!(
        events
            .iter()
            .any(|e| e["message"] == "flow started" && e["flow"] == flow.as_str()),
        "{output}"
    );
    let summary: Value = serde_json::from_str(&run.stdout).expect("JSON summary");
    assert_eq!(summary["ok"], true, "{output}");
    let flow_summary = &summary["flows"][0];
    assert_eq!(flow_summary["flow"], flow.as_str());
    assert_eq!(flow_summary["result"], "caught up");
    assert_eq!(flow_summary["records"], MORE, "{output}");
    assert_eq!(flow_summary["lost_records"], 0);
    assert_eq!(flow_summary["source_offsets_total"], MORE);
    let target = rdk.consume(
        &clusters.target.bootstrap,
        &remote(&names, &orders),
        (FIRST + MORE) as usize,
        Duration::from_secs(60),
    );
    let all: Vec<TestRecord> = first.into_iter().chain(more).collect();
    let expected: BTreeMap<i32, Vec<_>> = by_partition(&all);
    assert!(
        by_partition(&target) == expected,
        "target differs after the second copy"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_lost_on_the_source_make_mirror_exit_non_zero_with_a_summary() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let flow = flow_name(&names);
    let events = names.topic("events");
    let rdk = Rdk::new();
    let dir = clusters.dir().to_path_buf();
    let src = client(&clusters.source.bootstrap).await;
    rdk.create_topic(&clusters.source.bootstrap, &events, 1);
    let batch = records(0, 30, 1);
    for chunk in batch.chunks(10) {
        rdk.produce(&clusters.source.bootstrap, &events, chunk, "none");
    }
    let config = write_config(&clusters, &names, "lost.properties", "");
    let config = config.to_str().expect("utf-8 path");
    let mirror = |extra: &[&str]| {
        let mut args = vec!["mirror", "--config", config, "--until", "caught-up"];
        args.extend_from_slice(extra);
        run_to_end(&dir, &args, &[])
    };
    let run = mirror(&[]);
    assert!(run.status.success(), "{}", run.both());

    // 30 more, of which the first 20 are deleted before strait sees them.
    let more = records(30, 30, 1);
    for chunk in more.chunks(10) {
        rdk.produce(&clusters.source.bootstrap, &events, chunk, "none");
    }
    let tp = TopicPartition::new(&events, 0);
    assert_eq!(src.delete_records(&tp, 50).await.unwrap(), 50);

    let run = mirror(&[]);
    let output = run.both();
    assert!(
        !run.status.success(),
        "a loss must fail the copy:\n{output}"
    );
    let row = summary_row(&run.stdout, &flow);
    assert_eq!(row[1..3], ["caught", "up"], "{output}");
    assert_eq!(row[3], "10", "records written:\n{output}");
    assert_eq!(row[6], "20", "lost column:\n{output}");
    assert!(
        run.stdout
            .contains(&format!("{flow}: 20 records were deleted on the source")),
        "{output}"
    );
    assert!(
        run.stderr.contains(&format!("flow {flow} lost 20 records")),
        "the error names the flow and the count:\n{output}"
    );
    // One log line for the lost range, with flow, topic, partition, from, to and count.
    let lost: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("records were deleted on the source before they were mirrored"))
        .collect();
    assert_eq!(lost.len(), 1, "{output}");
    for field in [
        "ERROR".to_owned(),
        format!("flow={flow}"),
        format!("topic={events}"),
        "partition=0".to_owned(),
        "from=30".to_owned(),
        "to=50".to_owned(),
        "lost=20".to_owned(),
    ] {
        assert!(
            lost[0].contains(&field),
            "{field} missing from: {}",
            lost[0]
        );
    }
    // The records that were there are on the target: 30 first, then 50..60.
    let target = rdk.consume(
        &clusters.target.bootstrap,
        &remote(&names, &events),
        40,
        Duration::from_secs(30),
    );
    let expected: Vec<TestRecord> = batch.into_iter().chain(more.into_iter().skip(20)).collect();
    assert!(
        by_partition(&target) == by_partition(&expected),
        "target records"
    );

    // Nothing left to copy, nothing lost in this run: exit 0 again.
    let run = mirror(&["--json"]);
    assert!(run.status.success(), "{}", run.both());
    let summary: Value = serde_json::from_str(&run.stdout).expect("JSON summary");
    assert_eq!(summary["flows"][0]["lost_records"], 0);
    assert_eq!(summary["flows"][0]["source_offsets_total"], 0);
}

#[test]
fn secrets_in_the_config_never_reach_the_output() {
    const SECRET: &str = "hunter2-secret";
    let clusters = Clusters::shared();
    let names = Names::new();
    let (source, target) = (source_alias(&names), target_alias(&names));
    let payments = names.topic("payments");
    let rdk = Rdk::new();
    let dir = clusters.dir().to_path_buf();
    rdk.create_topic(&clusters.source.bootstrap, &payments, 2);
    rdk.produce(
        &clusters.source.bootstrap,
        &payments,
        &records(0, 200, 2),
        "none",
    );
    let jaas = format!(
        "org.apache.kafka.common.security.plain.PlainLoginModule required \
         username=\"mirror\" password=\"{SECRET}\";"
    );
    let config = write_config(
        &clusters,
        &names,
        "secret.properties",
        &format!(
            "security.protocol = PLAINTEXT\n\
             sasl.mechanism = PLAIN\n\
             sasl.jaas.config = {jaas}\n\
             {source}.sasl.jaas.config = {jaas}\n\
             {target}.producer.sasl.jaas.config = {jaas}\n\
             ssl.truststore.password = {SECRET}\n"
        ),
    );
    let config = config.to_str().expect("utf-8 path");
    for format in ["human", "json"] {
        let run = run_to_end(
            &dir,
            &["mirror", "--config", config, "--log-format", format],
            &[("RUST_LOG", "debug")],
        );
        let output = run.both();
        assert!(
            !output.contains(SECRET),
            "the secret is in the output:\n{output}"
        );
        assert!(run.status.success(), "{output}");
        let debug = if format == "json" {
            "\"level\":\"DEBUG\""
        } else {
            " DEBUG "
        };
        assert!(
            run.stderr.contains(debug),
            "debug logging was on, expected debug lines:\n{output}"
        );
    }
    let target = rdk.consume(
        &clusters.target.bootstrap,
        &remote(&names, &payments),
        200,
        Duration::from_secs(30),
    );
    assert_eq!(target.len(), 200);
}

/// A partition that held only an aborted transaction (and its marker) is read to its end and
/// mirrored, with no record to copy: `offsets translate` puts a group at its end at the remote
/// partition's end, exactly, not "partition not mirrored yet" as the map alone said.
#[test]
fn a_partition_of_aborted_records_alone_translates_to_its_remote_end() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let topic = names.topic("aborted");
    let group = names.group("billing");
    let rdk = Rdk::new();
    let dir = clusters.dir().to_path_buf();
    rdk.create_topic(&clusters.source.bootstrap, &topic, 2);
    rdk.produce(
        &clusters.source.bootstrap,
        &topic,
        &[TestRecord::new(0, None, Some(b"kept"))],
        "none",
    );
    // Partition 1: one aborted record at 0, its marker at 1; nothing a consumer reads.
    rdk.produce_transactions(
        &clusters.source.bootstrap,
        &topic,
        &[(vec![TestRecord::new(1, None, Some(b"aborted"))], false)],
    );
    rdk.commit(
        &clusters.source.bootstrap,
        &group,
        &topic,
        &[(0, 1), (1, 2)],
    );
    let config = write_config(&clusters, &names, "aborted.properties", "");
    let config = config.to_str().expect("utf-8 path");
    let copy = run_to_end(
        &dir,
        &["mirror", "--config", config, "--until", "caught-up"],
        &[],
    );
    assert!(copy.status.success(), "{}", copy.both());
    let translate = run_to_end(
        &dir,
        &[
            "offsets",
            "translate",
            "--config",
            config,
            "--group",
            &group,
            "--json",
        ],
        &[],
    );
    assert!(translate.status.success(), "{}", translate.both());
    let rows: Value = serde_json::from_str(&translate.stdout).expect("JSON rows");
    let row = |p: i64| {
        rows.as_array()
            .expect("rows")
            .iter()
            .find(|r| r["partition"] == p)
            .unwrap_or_else(|| panic!("no row for partition {p}: {rows}"))
            .clone()
    };
    assert_eq!(
        (row(0)["target_offset"].clone(), row(0)["exact"].clone()),
        (Value::from(1), Value::from(true)),
        "{rows}"
    );
    assert_eq!(
        (row(1)["target_offset"].clone(), row(1)["exact"].clone()),
        (Value::from(0), Value::from(true)),
        "{rows}"
    );
}
