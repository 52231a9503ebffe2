//! `strait verify` against two real brokers (the shared pair), after `strait mirror --until
//! caught-up`: a clean mirror is identical (exit 0); a record produced straight into the remote
//! topic with librdkafka is extra, at the offset librdkafka was given (exit 3); records deleted
//! from the target with Kafka's own `kafka-delete-records` are missing, each with its source and
//! target offset (exit 3); a transactional source with aborted transactions is identical, the
//! aborted records passed over and counted; records written anew into a remote topic made again
//! differ in exactly the fields changed; a state file resumes a finished run without reading
//! again, and a half-way one from where it stopped; the rate limit holds a run to its budget.

mod running;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use running::{run_to_end, write_flow_config, Finished};
use serde_json::Value;
use strait_testkit::{kafka_tool, Clusters, Names, Rdk, TestRecord};

const PARTITIONS: i32 = 2;

struct Setup {
    clusters: Clusters,
    names: Names,
    rdk: Rdk,
    topic: String,
    config: PathBuf,
}

impl Setup {
    fn new(name: &str) -> Setup {
        let clusters = Clusters::shared();
        let names = Names::new();
        let (a, b) = (names.alias("source"), names.alias("target"));
        let flow = format!("{a}->{b}");
        let extra = format!(
            "{flow}.topics = {pattern}\n\
             {flow}.groups = {pattern}\n\
             heartbeats.replication.enabled = false\n\
             emit.checkpoints.enabled = false\n",
            pattern = names.pattern()
        );
        let config = write_flow_config(&clusters, (&a, &b), &format!("{name}.properties"), &extra);
        let topic = names.topic(name);
        Setup {
            clusters,
            names,
            rdk: Rdk::new(),
            topic,
            config,
        }
    }

    fn source(&self) -> &str {
        &self.clusters.source.bootstrap
    }

    fn target(&self) -> &str {
        &self.clusters.target.bootstrap
    }

    fn remote(&self) -> String {
        format!("{}.{}", self.names.alias("source"), self.topic)
    }

    fn strait(&self, args: &[&str]) -> Finished {
        let config = self.config.to_str().expect("utf-8 path");
        let mut all = vec![args[0], "--config", config];
        all.extend_from_slice(&args[1..]);
        run_to_end(self.clusters.dir(), &all, &[])
    }

    /// `strait mirror --until caught-up`, which must succeed.
    fn mirror(&self) {
        let run = self.strait(&["mirror", "--until", "caught-up"]);
        assert!(run.status.success(), "{}", run.both());
    }

    /// `strait verify --json` with `args`: its exit code and report.
    fn verify(&self, args: &[&str]) -> (i32, Value, Finished) {
        let mut all = vec!["verify", "--json"];
        all.extend_from_slice(args);
        let run = self.strait(&all);
        let report: Value = serde_json::from_str(&run.stdout)
            .unwrap_or_else(|e| panic!("verify --json: {e}\n{}", run.both()));
        (run.status.code().expect("an exit code"), report, run)
    }
}

/// Records `0..n`, record `i` to partition `i % PARTITIONS`, with a key, a header, and an
/// explicit create time.
fn records(first: usize, n: usize) -> Vec<TestRecord> {
    (first..first + n)
        .map(|i| {
            TestRecord::new(
                (i % PARTITIONS as usize) as i32,
                Some(format!("k{i}").as_bytes()),
                Some(format!("value {i} {}", "x".repeat(i % 50)).as_bytes()),
            )
            .with_header("n", Some(i.to_string().as_bytes()))
            .with_header("empty", None)
            .with_timestamp(1_700_000_000_000 + i as i64)
        })
        .collect()
}

fn partition(report: &Value, p: i64) -> &Value {
    report["partitions"]
        .as_array()
        .expect("partitions")
        .iter()
        .find(|row| row["partition"] == p)
        .unwrap_or_else(|| panic!("no partition {p} in {report:#}"))
}

/// The totals' `identical, missing, extra, differing`.
fn totals(report: &Value) -> [u64; 4] {
    let t = &report["totals"];
    ["identical", "missing", "extra", "differing"].map(|k| t[k].as_u64().expect(k))
}

fn offsets(examples: &Value, side: &str) -> Vec<Option<i64>> {
    examples
        .as_array()
        .expect("examples")
        .iter()
        .map(|e| e[side].as_i64())
        .collect()
}

#[test]
fn a_clean_mirror_is_identical_and_a_record_written_to_the_target_is_extra() {
    let s = Setup::new("clean");
    s.rdk.create_topic(s.source(), &s.topic, PARTITIONS);
    s.rdk.produce(s.source(), &s.topic, &records(0, 400), "lz4");
    s.mirror();
    // librdkafka reads every record on the target: what verify must find identical.
    let on_target = s
        .rdk
        .consume(s.target(), &s.remote(), 400, Duration::from_secs(60));
    assert_eq!(on_target.len(), 400);

    let (code, report, run) = s.verify(&[]);
    assert_eq!(code, 0, "{}", run.both());
    assert_eq!(report["result"], "identical", "{report:#}");
    assert_eq!(totals(&report), [400, 0, 0, 0], "{report:#}");
    for p in 0..PARTITIONS as i64 {
        let row = partition(&report, p);
        assert_eq!(row["identical"], 200, "{row:#}");
        assert_eq!(
            (row["source_from"].as_i64(), row["source_to"].as_i64()),
            (Some(0), Some(200))
        );
    }
    // The text report says the same.
    let text = s.strait(&["verify"]);
    assert_eq!(text.status.code(), Some(0), "{}", text.both());
    assert!(text.stdout.contains("Result: IDENTICAL"), "{}", text.stdout);

    // A record produced straight into the remote topic, then more mirrored after it: the map
    // goes around it, and verify finds it extra, at the offset librdkafka was given.
    let foreign = TestRecord::new(1, Some(b"intruder"), Some(b"not from the source"));
    let at = s.rdk.produce(s.target(), &s.remote(), &[foreign], "none");
    assert_eq!(at, [(1, 200)]);
    s.rdk
        .produce(s.source(), &s.topic, &records(400, 20), "none");
    s.mirror();
    let (code, report, run) = s.verify(&[]);
    assert_eq!(code, 3, "{}", run.both());
    assert_eq!(report["result"], "differences");
    assert_eq!(totals(&report), [420, 0, 1, 0], "{report:#}");
    let row = partition(&report, 1);
    assert_eq!(row["status"], "differences");
    assert_eq!(
        offsets(&row["extra_examples"], "target_offset"),
        [Some(200)]
    );
    assert_eq!(offsets(&row["extra_examples"], "source_offset"), [None]);
    assert_eq!(partition(&report, 0)["status"], "identical");
    // --topics that matches nothing of the test's compares nothing, and finds nothing.
    let (code, report, _) = s.verify(&["--topics", "no-such-topic"]);
    assert_eq!((code, totals(&report)), (0, [0, 0, 0, 0]), "{report:#}");
    assert_eq!(report["result"], "nothing_compared", "{report:#}");
    let text = s.strait(&["verify"]);
    // The report as an operator sees it (docs/migrating.md shows one): `--nocapture`.
    println!("{}", text.stdout);
    assert_eq!(text.status.code(), Some(3), "{}", text.both());
    assert!(
        text.stdout.contains("extra on the target (1): target 200"),
        "{}",
        text.stdout
    );
}

#[test]
fn records_deleted_from_the_target_are_missing_with_both_offsets() {
    let s = Setup::new("deleted");
    s.rdk.create_topic(s.source(), &s.topic, PARTITIONS);
    s.rdk
        .produce(s.source(), &s.topic, &records(0, 100), "zstd");
    s.mirror();
    // Kafka's own tool deletes the first 7 records of the remote partition 0 on the target,
    // and the first 5 of partition 1 on the source (mirrored before: gone there, not missing).
    let delete = |bootstrap: &str, topic: &str, partition: i32, offset: i64| {
        let json = s
            .clusters
            .dir()
            .join(format!("{}-delete-{partition}.json", s.names.id()));
        std::fs::write(
            &json,
            format!(
                r#"{{"version":1,"partitions":[{{"topic":"{topic}","partition":{partition},"offset":{offset}}}]}}"#
            ),
        )
        .expect("offsets file");
        kafka_tool(
            "org.apache.kafka.tools.DeleteRecordsCommand",
            &[
                "--bootstrap-server",
                bootstrap,
                "--offset-json-file",
                json.to_str().expect("utf-8 path"),
            ],
        )
    };
    let out = delete(s.target(), &s.remote(), 0, 7);
    assert!(out.contains("low_watermark: 7"), "{out}");
    let out = delete(s.source(), &s.topic, 1, 5);
    assert!(out.contains("low_watermark: 5"), "{out}");
    let (code, report, run) = s.verify(&[]);
    assert_eq!(code, 3, "{}", run.both());
    assert_eq!(totals(&report), [88, 7, 0, 0], "{report:#}");
    assert_eq!(report["totals"]["gone_on_source"], 5, "{report:#}");
    let text = s.strait(&["verify"]);
    println!("{}", text.stdout);
    assert_eq!(text.status.code(), Some(3), "{}", text.both());
    assert!(
        text.stdout
            .contains("missing on the target (7): source 0 -> target 0; source 1 -> target 1;"),
        "{}",
        text.stdout
    );
    let row = partition(&report, 0);
    let expected: Vec<Option<i64>> = (0..7).map(Some).collect();
    assert_eq!(offsets(&row["missing_examples"], "source_offset"), expected);
    assert_eq!(offsets(&row["missing_examples"], "target_offset"), expected);
    let p1 = partition(&report, 1);
    assert_eq!(p1["status"], "identical", "{p1:#}");
    assert_eq!(
        (p1["identical"].as_u64(), p1["gone_on_source"].as_u64()),
        (Some(45), Some(5))
    );
}

#[test]
fn aborted_transactions_on_the_source_are_passed_over() {
    let s = Setup::new("txn");
    s.rdk.create_topic(s.source(), &s.topic, PARTITIONS);
    let all = records(0, 60);
    let txns: Vec<(Vec<TestRecord>, bool)> = all
        .chunks(10)
        .enumerate()
        .map(|(i, chunk)| (chunk.to_vec(), i % 3 != 1))
        .collect();
    let written = s.rdk.produce_transactions(s.source(), &s.topic, &txns);
    let aborted: usize = txns
        .iter()
        .zip(&written)
        .filter(|((_, commit), _)| !commit)
        .map(|(_, offsets)| offsets.len())
        .sum();
    assert_eq!(aborted, 20);
    s.mirror();
    let on_target = s
        .rdk
        .consume(s.target(), &s.remote(), 40, Duration::from_secs(60));
    assert_eq!(on_target.len(), 40);
    let (code, report, run) = s.verify(&[]);
    assert_eq!(code, 0, "{}", run.both());
    assert_eq!(totals(&report), [40, 0, 0, 0], "{report:#}");
    assert_eq!(report["totals"]["aborted_on_source"], 20, "{report:#}");
    // The source holds markers and aborted records between the mirrored ones: its offsets run
    // further than the target's.
    let row = partition(&report, 0);
    assert!(
        row["source_to"].as_i64() > row["target_to"].as_i64(),
        "{row:#}"
    );
}

#[test]
fn records_changed_on_the_target_differ_in_the_fields_that_changed() {
    let s = Setup::new("changed");
    s.rdk.create_topic(s.source(), &s.topic, 1);
    let original: Vec<TestRecord> = records(0, 10)
        .into_iter()
        .map(|r| TestRecord { partition: 0, ..r })
        .collect();
    s.rdk.produce(s.source(), &s.topic, &original, "none");
    s.mirror();
    // The remote topic deleted and made again (the offset map stays), then the same records
    // written into it but three: 3 with another value, 6 with another header value, 8 with
    // another create time. Each lands at the offset its original had.
    let mut changed = original.clone();
    changed[3].value = Some(b"another value".to_vec());
    changed[6].headers[0].1 = Some(b"another".to_vec());
    changed[8].timestamp_ms = changed[8].timestamp_ms.map(|t| t + 1);
    remake_topic(s.target(), &s.remote());
    let at = s.rdk.produce(s.target(), &s.remote(), &changed, "lz4");
    assert_eq!(at.last(), Some(&(0, 9)));
    let (code, report, run) = s.verify(&[]);
    assert_eq!(code, 3, "{}", run.both());
    assert_eq!(totals(&report), [7, 0, 0, 3], "{report:#}");
    let examples = &partition(&report, 0)["differing_examples"];
    assert_eq!(
        offsets(examples, "source_offset"),
        [Some(3), Some(6), Some(8)]
    );
    assert_eq!(
        offsets(examples, "target_offset"),
        [Some(3), Some(6), Some(8)]
    );
    let fields: Vec<&Value> = examples
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["fields"])
        .collect();
    assert_eq!(
        fields,
        [
            &serde_json::json!(["value"]),
            &serde_json::json!(["headers"]),
            &serde_json::json!(["timestamp"])
        ]
    );
}

/// Deletes `topic` on `bootstrap` and creates it again with one partition, retrying while the
/// broker still finishes the deletion.
fn remake_topic(bootstrap: &str, topic: &str) {
    use strait_kafka::admin::NewTopic;
    use strait_kafka::{Client, ClientConfig};
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let client = Client::connect(ClientConfig::new([bootstrap]))
            .await
            .expect("connect");
        let deleted = client.delete_topics(&[topic]).await.expect("delete");
        assert!(deleted.iter().all(|(_, r)| r.is_ok()), "{deleted:?}");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match client.create_topic(NewTopic::new(topic, 1)).await {
                Ok(()) => return,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("create {topic} again: {e}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("cannot create {topic} again: {e}"),
            }
        }
    });
}

#[test]
fn a_state_file_resumes_and_the_rate_limit_holds() {
    let s = Setup::new("state");
    s.rdk.create_topic(s.source(), &s.topic, PARTITIONS);
    let big: Vec<TestRecord> = (0..2000)
        .map(|i| {
            TestRecord::new(
                i % PARTITIONS,
                Some(b"k"),
                Some(&[b'a' + (i % 26) as u8; 1000]),
            )
        })
        .collect();
    s.rdk.produce(s.source(), &s.topic, &big, "none");
    s.mirror();
    let state = s
        .clusters
        .dir()
        .join(format!("{}-state.json", s.names.id()));
    let state_arg = state.to_str().expect("utf-8 path");
    // About 2 MB on each side at 2 MB/s: at least a second and a half.
    let started = Instant::now();
    let (code, report, run) = s.verify(&[
        "--state",
        state_arg,
        "--max-mb-per-s",
        "2",
        "--progress-interval",
        "0.2",
    ]);
    let took = started.elapsed();
    assert_eq!(code, 0, "{}", run.both());
    // Progress lines on stderr while it runs.
    let flow = format!("{}->{}", s.names.alias("source"), s.names.alias("target"));
    let lines = run
        .stderr
        .lines()
        .filter(|l| l.starts_with(&format!("verify {flow}: ")) && l.contains(" source offsets ("))
        .count();
    assert!(lines >= 2, "{}", run.both());
    assert_eq!(totals(&report), [2000, 0, 0, 0]);
    let read = report["bytes_read"].as_u64().expect("bytes_read");
    assert!(read >= 4_000_000, "{report:#}");
    assert!(
        took >= Duration::from_secs_f64((read as f64 / 2e6) - 0.6),
        "{read} bytes in {took:?} at 2 MB/s"
    );
    let saved = saved_done(&state);
    assert_eq!(
        saved,
        [true, true],
        "{}",
        std::fs::read_to_string(&state).unwrap()
    );
    // Run again from the state: nothing read, the same counts.
    let (code, again, run) = s.verify(&["--state", state_arg]);
    assert_eq!(code, 0, "{}", run.both());
    assert_eq!(totals(&again), [2000, 0, 0, 0]);
    assert_eq!(again["bytes_read"], 0, "{again:#}");

    // A partition stopped half-way: partition 0 marked unfinished at offsets 600 on both
    // sides, with what was counted before them. The run reads on from there only.
    let mut saved: Value =
        serde_json::from_str(&std::fs::read_to_string(&state).expect("state")).expect("JSON");
    let key = format!("{flow} {}-0", s.topic);
    let p0 = &mut saved["partitions"][&key];
    assert_eq!(p0["tally"]["identical"], 1000, "{p0:#}");
    p0["done"] = Value::Bool(false);
    p0["tally"]["identical"] = 600.into();
    p0["tally"]["next_source"] = 600.into();
    p0["tally"]["next_target"] = 600.into();
    std::fs::write(&state, serde_json::to_vec(&saved).unwrap()).unwrap();
    let (code, resumed, run) = s.verify(&["--state", state_arg]);
    assert_eq!(code, 0, "{}", run.both());
    assert_eq!(totals(&resumed), [2000, 0, 0, 0], "{resumed:#}");
    // 600 counted before and the 400 read since: read again from the start, it would count
    // 1,600.
    assert_eq!(partition(&resumed, 0)["identical"], 1000, "{resumed:#}");
    assert_eq!(saved_done(&state), [true, true]);
}

fn saved_done(state: &Path) -> Vec<bool> {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(state).expect("state file"))
        .expect("state JSON");
    v["partitions"]
        .as_object()
        .expect("partitions")
        .values()
        .map(|p| p["done"].as_bool().expect("done"))
        .collect()
}
