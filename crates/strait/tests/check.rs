//! `strait check`: MM2 files written after real-world ones (`tests/check/*.properties`, each
//! commented on top with what it represents) get the verdict, exit code and key lists strait's
//! config module gives them; and `--connect` against real brokers lists exactly the topics and
//! groups the flow's own selection code takes.

mod running;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use strait_testkit::{Clusters, Names, Rdk};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/check")
        .join(name)
}

/// `strait check` on `file` with `extra` arguments, run from the fixtures' directory: exit
/// code, stdout, stderr.
fn check_file(file: &Path, extra: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_strait"))
        .current_dir(fixture(""))
        .args(["check", "--config"])
        .arg(file)
        .args(extra)
        .output()
        .expect("run strait");
    (
        output.status.code().expect("an exit code"),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The text report of fixture `name`, which must exit with `code`.
fn human(name: &str, code: i32) -> String {
    let (got, out, err) = check_file(&fixture(name), &[]);
    assert_eq!(got, code, "{name}: exit {got}\n{out}\n{err}");
    out
}

/// The JSON report of fixture `name`, which must exit with `code`.
fn json(name: &str, code: i32) -> Value {
    let (got, out, err) = check_file(&fixture(name), &["--format", "json"]);
    assert_eq!(got, code, "{name}: exit {got}\n{out}\n{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{name}: {e}: {out}"))
}

/// The keys of one list (`used`, `ignored`, `refused`).
fn keys(report: &Value, list: &str) -> Vec<String> {
    report["keys"][list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} list: {report}"))
        .iter()
        .map(|k| k["key"].as_str().unwrap().to_owned())
        .collect()
}

/// The row of `key` in list `list`.
fn row<'a>(report: &'a Value, list: &str, key: &str) -> &'a Value {
    report["keys"][list]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["key"] == key)
        .unwrap_or_else(|| panic!("`{key}` is not in {list}: {report:#}"))
}

fn assert_in(report: &Value, list: &str, expected: &[&str]) {
    let got = keys(report, list);
    for key in expected {
        assert!(
            got.iter().any(|k| k == key),
            "`{key}` not in {list}: {got:?}"
        );
    }
}

fn flow<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["flow"] == name)
        .unwrap_or_else(|| panic!("no flow {name}: {report:#}"))
}

fn notes(report: &Value) -> Vec<(String, String)> {
    report["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["kind"].as_str().unwrap().to_owned(),
                n["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn has_note(report: &Value, kind: &str, words: &str) {
    let notes = notes(report);
    assert!(
        notes.iter().any(|(k, t)| k == kind && t.contains(words)),
        "no `{kind}` note with `{words}`: {notes:#?}"
    );
}

fn has_line(text: &str, line: &str) {
    assert!(
        text.lines().any(|l| l.trim_end() == line),
        "`{line}` is not in:\n{text}"
    );
}

#[test]
fn mm2_sample_file() {
    let r = json("mm2-sample.properties", 0);
    assert_eq!(r["verdict"], "runs");
    let ab = flow(&r, "A->B");
    assert_eq!(ab["enabled"], true);
    assert_eq!(ab["settings"]["topics"], ".*");
    assert_eq!(ab["settings"]["replication_factor"], 1);
    assert_eq!(ab["settings"]["example_remote_topic"], "A.orders");
    assert_eq!(ab["settings"]["emit_checkpoints_secs"], 60);
    assert_eq!(ab["settings"]["sync_group_offsets_secs"], Value::Null);
    assert_eq!(flow(&r, "B->A")["enabled"], false);
    assert_in(
        &r,
        "used",
        &[
            "clusters",
            "A.bootstrap.servers",
            "A->B.enabled",
            "B->A.enabled",
            "B->A.topics",
            "replication.factor",
            "checkpoints.topic.replication.factor",
            "heartbeats.topic.replication.factor",
            "offset-syncs.topic.replication.factor",
        ],
    );
    assert_in(
        &r,
        "ignored",
        &[
            "offset.storage.replication.factor",
            "status.storage.replication.factor",
            "config.storage.replication.factor",
        ],
    );
    assert!(
        row(&r, "ignored", "offset.storage.replication.factor")["reason"]
            .as_str()
            .unwrap()
            .contains("Connect's internal topics")
    );
    assert!(keys(&r, "refused").is_empty());
    has_note(&r, "gains", "exact offset map");
    has_note(&r, "gains", "no recompression");
    has_note(&r, "gains", "3 Connect key(s)");
    // Heartbeats for both pairs, as MM2 runs them whether a flow is enabled or not.
    assert_eq!(r["heartbeats"].as_array().unwrap().len(), 2);

    let text = human("mm2-sample.properties", 0);
    has_line(
        &text,
        &format!(
            "{}: strait runs this file (exit 0)",
            fixture("mm2-sample.properties").display()
        ),
    );
    has_line(&text, "  A->B  enabled");
    has_line(&text, "  B->A  disabled");
    has_line(&text, "    replication     factor 1");
    has_line(&text, "Keys refused (0)");
    // --strict: the ignored Connect keys make it exit 3.
    let (code, _, _) = check_file(&fixture("mm2-sample.properties"), &["--strict"]);
    assert_eq!(code, 3);
}

#[test]
fn strimzi_generated_file() {
    // The truststores are in Strimzi's pod, not here: refused, as `strait run` would refuse
    // them here; everything else resolves.
    let r = json("strimzi-generated.properties", 1);
    for cluster in ["my-cluster-source", "my-cluster-target"] {
        let key = format!("{cluster}.ssl.truststore.location");
        let reason = row(&r, "refused", &key)["reason"].as_str().unwrap();
        assert!(
            reason.contains(&format!(
                "cannot read /opt/kafka/cluster-ca-certs/{cluster}/ca.crt"
            )),
            "{reason}"
        );
    }
    assert_eq!(keys(&r, "refused").len(), 2, "{r:#}");
    let f = flow(&r, "my-cluster-source->my-cluster-target");
    assert_eq!(f["settings"]["topics"], "orders.*|payments");
    assert_eq!(f["settings"]["sync_group_offsets_secs"], 60);
    assert_eq!(f["settings"]["emit_checkpoints_secs"], 30);
    assert_eq!(f["settings"]["sync_topic_acls_secs"], Value::Null);
    assert_eq!(f["settings"]["replication_factor"], 3);
    assert_eq!(
        flow(&r, "my-cluster-target->my-cluster-source")["enabled"],
        false
    );
    assert_in(
        &r,
        "used",
        &[
            "my-cluster-source.security.protocol",
            "my-cluster-source.ssl.truststore.type",
            "my-cluster-source->my-cluster-target.sync.group.offsets.enabled",
        ],
    );
    assert_in(
        &r,
        "used",
        &["my-cluster-source->my-cluster-target.tasks.max"],
    );
    assert_in(
        &r,
        "ignored",
        &[
            "my-cluster-source->my-cluster-target.key.converter",
            "my-cluster-source->my-cluster-target.value.converter",
        ],
    );
    // Workers run the flow by default, so its `tasks.max` is the count of its units.
    assert!(!notes(&r)
        .iter()
        .any(|(_, t)| t.contains("counts only when workers run the flow")));
}

#[test]
fn tuning_keys_used_and_ignored() {
    let r = json("tuning.properties", 0);
    assert_in(
        &r,
        "used",
        &[
            "A.consumer.fetch.max.bytes",
            "A.consumer.max.partition.fetch.bytes",
            "A.consumer.client.rack",
            "B.producer.delivery.timeout.ms",
            "A->B.producer.max.request.size",
            "A->B.consumer.fetch.max.wait.ms",
            "strait.max.bytes.in.flight",
        ],
    );
    // MM2 hands these to its Java producer; strait forwards the source's batches as they are.
    assert_eq!(
        keys(&r, "ignored"),
        [
            "B.producer.linger.ms",
            "B.producer.batch.size",
            "B.producer.compression.type"
        ]
    );
    assert!(row(&r, "ignored", "B.producer.compression.type")["reason"]
        .as_str()
        .unwrap()
        .contains("does not recompress"));
    // A key set to its default says so; one set otherwise says nothing.
    assert_eq!(
        row(&r, "used", "A.consumer.fetch.max.bytes")["reason"],
        "set to its default, `52428800`"
    );
    assert!(row(&r, "used", "A->B.consumer.fetch.max.wait.ms")["reason"].is_null());
    assert_eq!(
        flow(&r, "A->B")["settings"]["max_bytes_in_flight"],
        268_435_456
    );
    assert_eq!(flow(&r, "A->B")["settings"]["topics"], "events\\..*");
    has_note(&r, "gains", "strait-only key");
    has_note(&r, "differs", "reads committed records only");
    has_note(&r, "differs", "`compression.type` is not applied");
    let (code, _, _) = check_file(&fixture("tuning.properties"), &["--strict"]);
    assert_eq!(code, 3);
}

#[test]
fn smts_are_refused() {
    let r = json("smt.properties", 1);
    assert_eq!(r["verdict"], "refused");
    assert_in(&r, "refused", &["transforms", "predicates"]);
    assert!(row(&r, "refused", "transforms")["reason"]
        .as_str()
        .unwrap()
        .contains("Single Message Transforms"));
    assert_in(
        &r,
        "ignored",
        &[
            "transforms.route.type",
            "transforms.route.regex",
            "predicates.isOrders.pattern",
        ],
    );
    assert!(r["flows"].as_array().unwrap().is_empty());
    has_note(&r, "loses", "Single Message Transforms");
    let text = human("smt.properties", 1);
    assert!(text.contains("strait refuses this file (exit 1)"), "{text}");
    has_line(&text, "Keys refused (2)");
}

#[test]
fn connect_worker_keys_are_ignored() {
    let r = json("connect-worker.properties", 0);
    let expected = [
        "group.id",
        "key.converter",
        "value.converter",
        "header.converter",
        "offset.storage.topic",
        "config.storage.topic",
        "status.storage.topic",
        "listeners",
        "dedicated.mode.enable.internal.rest",
        "plugin.path",
        "errors.tolerance",
        "metric.reporters",
        "offset.flush.interval.ms",
    ];
    assert_in(&r, "ignored", &expected);
    assert_eq!(keys(&r, "ignored").len(), expected.len());
    assert!(row(&r, "ignored", "listeners")["reason"]
        .as_str()
        .unwrap()
        .contains("REST"));
    has_note(&r, "gains", "no Kafka Connect to run");
}

#[test]
fn flows_that_would_loop_are_refused() {
    // Before strait refused it, `strait run` on this file turned 8 records into about 85,000 on
    // each cluster in 20 s.
    let r = json("identity-loop.properties", 1);
    assert_eq!(r["verdict"], "refused");
    let error = r["errors"][0].as_str().unwrap();
    assert!(
        error.contains("flows A->B, B->A would mirror records back")
            && error.contains("topic `loop` written on A comes back to A as `loop`"),
        "{r:#}"
    );
    let text = human("identity-loop.properties", 1);
    assert!(text.contains("strait refuses this file (exit 1)"), "{text}");

    // `strait run` refuses it before it connects to anything (the clusters do not exist).
    let mut run = Command::new(env!("CARGO_BIN_EXE_strait"))
        .args(["run", "--config"])
        .arg(fixture("identity-loop.properties"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run strait");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = run.try_wait().expect("wait for strait") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = run.kill();
            panic!("strait run did not refuse the file within 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(run.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "{err}");
    assert!(
        err.contains("flows A->B, B->A would mirror records back"),
        "{err}"
    );
}

#[test]
fn typos_get_did_you_mean() {
    // `A->B.enable` leaves no flow enabled: refused, with the hint on the typo.
    let r = json("typos.properties", 1);
    assert_eq!(row(&r, "ignored", "A->B.enable")["did_you_mean"], "enabled");
    assert_eq!(row(&r, "ignored", "topic")["did_you_mean"], "topics");
    assert_eq!(
        row(&r, "ignored", "A->B.groups.exlude")["did_you_mean"],
        "groups.exclude"
    );
    assert!(
        r["errors"][0]
            .as_str()
            .unwrap()
            .contains("no flow is enabled"),
        "{r:#}"
    );
    let text = human("typos.properties", 1);
    assert!(
        text.contains("A->B.enable: unknown to MM2 and to strait (did you mean `enabled`?)"),
        "{text}"
    );
    assert!(text.contains("error: no flow is enabled"), "{text}");
}

#[test]
fn typos_beside_a_flow_run_and_fail_strict() {
    let r = json("typo-runs.properties", 0);
    assert_eq!(
        row(&r, "ignored", "replication.factr")["did_you_mean"],
        "replication.factor"
    );
    assert_eq!(
        row(&r, "ignored", "emit.checkpoint.interval.seconds")["did_you_mean"],
        "emit.checkpoints.interval.seconds"
    );
    // The typo means the default is in effect.
    assert_eq!(flow(&r, "A->B")["settings"]["replication_factor"], 2);
    assert_eq!(flow(&r, "A->B")["settings"]["emit_checkpoints_secs"], 60);
    has_note(&r, "differs", "did you mean `replication.factor`?");
    let (code, out, _) = check_file(
        &fixture("typo-runs.properties"),
        &["--strict", "--format", "json"],
    );
    assert_eq!(code, 3, "{out}");
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["exit_code"], 3);
}

#[test]
fn deprecated_blacklists_still_work() {
    let r = json("blacklist.properties", 0);
    for (key, replacement) in [
        ("topics.blacklist", "topics.exclude"),
        ("groups.blacklist", "groups.exclude"),
        ("config.properties.blacklist", "config.properties.exclude"),
    ] {
        let reason = row(&r, "used", key)["reason"].as_str().unwrap().to_owned();
        assert!(reason.contains(replacement), "{key}: {reason}");
    }
    let s = &flow(&r, "dc1->dc2")["settings"];
    // Java's properties escapes: `\-` and `\.` are `-` and `.`, as MM2 reads them.
    assert_eq!(
        s["topics_exclude"],
        ".*[-.]internal|.*.replica|__consumer_offsets"
    );
    assert_eq!(s["groups_exclude"], "console-consumer-.*|connect-.*|__.*");
    has_note(&r, "differs", "rename it `topics.exclude`");
    let (code, _, _) = check_file(&fixture("blacklist.properties"), &["--strict"]);
    assert_eq!(code, 3);
}

#[test]
fn identity_replication_policy() {
    let r = json("identity.properties", 0);
    let s = &flow(&r, "primary->dr")["settings"];
    assert_eq!(s["replication_policy"], "IdentityReplicationPolicy");
    assert_eq!(s["example_remote_topic"], "orders");
    assert_eq!(s["sync_group_offsets_secs"], 10);
    assert_eq!(s["emit_checkpoints_secs"], 10);
    assert_eq!(s["refresh_topics_secs"], 30);
    assert_in(
        &r,
        "used",
        &[
            "replication.policy.class",
            "sync.group.offsets.enabled",
            "sync.group.offsets.interval.seconds",
        ],
    );
    let text = human("identity.properties", 0);
    has_line(
        &text,
        "    policy          IdentityReplicationPolicy, separator `.`: orders -> orders",
    );
    has_line(&text, "    group offsets   every 10 s");
}

#[test]
fn sasl_ssl_with_file_provider() {
    let r = json("sasl-ssl-providers.properties", 0);
    assert_in(
        &r,
        "used",
        &[
            "config.providers",
            "config.providers.file.class",
            "onprem.sasl.jaas.config",
            "onprem.security.protocol",
            "cloud.sasl.mechanism",
        ],
    );
    assert!(keys(&r, "ignored").is_empty(), "{r:#}");
    assert_eq!(
        flow(&r, "onprem->cloud")["settings"]["topics"],
        "sales.*|inventory.*"
    );
    // The resolved secrets never reach the report.
    let (_, text, _) = check_file(&fixture("sasl-ssl-providers.properties"), &[]);
    assert!(!text.contains("s3cret"), "{text}");
}

#[test]
fn missing_secret_file_is_refused() {
    let r = json("missing-secret.properties", 1);
    let reason = row(&r, "refused", "A.sasl.jaas.config")["reason"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(reason.contains("/nonexistent/strait-check"), "{reason}");
    assert_in(&r, "used", &["A.security.protocol", "A->B.enabled"]);
}

/// What `strait run` refuses when it builds the clusters' clients, `check` refuses offline,
/// every problem under the key of the file that set it, with the cluster named (each was
/// approved with exit 0 before).
#[test]
fn security_settings_run_refuses_are_refused_offline() {
    let r = json("refused-security.properties", 1);
    assert_eq!(r["verdict"], "refused");
    let reason = |key| {
        row(&r, "refused", key)["reason"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    for (key, cluster, words) in [
        (
            "onprem.sasl.jaas.config",
            "onprem",
            "this quote is not closed",
        ),
        (
            "cloud.sasl.jaas.config",
            "cloud",
            "needs the option `password`",
        ),
        (
            "cloud.producer.sasl.jaas.config",
            "cloud",
            "not com.example.NoSuchLoginModule",
        ),
        (
            "dr.ssl.truststore.type",
            "dr",
            "strait reads PEM, PKCS12, JKS and JCEKS stores",
        ),
        (
            "dr.ssl.keystore.location",
            "dr",
            "cannot read /nonexistent/strait-check/dr.keystore.p12",
        ),
        (
            "onprem->cloud.consumer.ssl.truststore.location",
            "onprem",
            "cannot read /nonexistent/strait-check/onprem.truststore.p12",
        ),
    ] {
        let reason = reason(key);
        assert!(
            reason.contains(&format!("cluster `{cluster}`")),
            "{key}: {reason}"
        );
        assert!(reason.contains(words), "{key}: {reason}");
    }
    assert_eq!(keys(&r, "refused").len(), 6, "{r:#}");
    assert!(r["errors"].as_array().unwrap().is_empty(), "{r:#}");
    // The file's flows resolve: they are shown, with what their clusters refuse above.
    assert_eq!(flow(&r, "onprem->dr")["enabled"], true);
    assert_in(
        &r,
        "used",
        &["onprem.security.protocol", "dr.ssl.keystore.password"],
    );
    // No secret reaches the report.
    let (code, text, _) = check_file(&fixture("refused-security.properties"), &[]);
    assert_eq!(code, 1);
    assert!(!text.contains("s3cret"), "{text}");
    has_line(
        &text,
        "  line 17   dr.ssl.truststore.type: cluster `dr` (producer client): strait reads PEM, \
         PKCS12, JKS and JCEKS stores",
    );
}

/// SASL with no `sasl.jaas.config` anywhere: the key to set is not in the file, so the
/// refusal is an error naming the cluster and the key.
#[test]
fn sasl_without_a_jaas_line_is_refused_offline() {
    let r = json("refused-sasl-without-jaas.properties", 1);
    let errors: Vec<&str> = r["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert!(
        errors
            .iter()
            .any(|e| e.contains("cluster `A`") && e.contains("needs sasl.jaas.config")),
        "{r:#}"
    );
}

#[test]
fn two_way_flows() {
    let r = json("two-way.properties", 0);
    for name in ["east->west", "west->east"] {
        assert_eq!(flow(&r, name)["enabled"], true, "{name}");
        assert_eq!(flow(&r, name)["settings"]["groups"], ".*");
    }
    assert_eq!(
        flow(&r, "east->west")["settings"]["example_remote_topic"],
        "east.orders"
    );
    assert_eq!(
        flow(&r, "west->east")["settings"]["emit_checkpoints_secs"],
        Value::Null
    );
    let heartbeats = r["heartbeats"].as_array().unwrap();
    assert_eq!(heartbeats.len(), 2);
    assert!(heartbeats.iter().all(|h| h["interval_secs"] == 5));
    let text = human("two-way.properties", 0);
    has_line(&text, "  into west every 5 s (pair east->west)");
    has_line(&text, "    checkpoints     off");
}

#[test]
fn tasks_max_counts_as_the_workers_units() {
    let r = json("tasks-max.properties", 0);
    assert_in(&r, "used", &["tasks.max", "A->B.tasks.max"]);
    assert_in(
        &r,
        "ignored",
        &["tasks.max.enforce", "A->B.consumer.poll.timeout.ms"],
    );
    assert!(row(&r, "ignored", "tasks.max.enforce")["reason"]
        .as_str()
        .unwrap()
        .contains("no Connect tasks"));
    // Workers are on by default: `tasks.max` is the flow's units, as MM2's tasks.
    assert!(!notes(&r)
        .iter()
        .any(|(_, t)| t.contains("counts only when workers run the flow")));
}

#[test]
fn exactly_once_runs_the_flow_by_workers() {
    let r = json("exactly-once.properties", 0);
    assert_in(&r, "used", &["exactly.once.source.support"]);
    assert_in(&r, "used", &["A.consumer.isolation.level"]);
    // The cluster-level form, MM2's Connect worker setting for flows into B, is read too.
    assert_in(&r, "used", &["B.exactly.once.source.support"]);
    has_note(
        &r,
        "differs",
        "exactly-once source (`enabled`): each unit of the flow, run by the workers",
    );
    // The consumer's isolation level is set: no note about committed reads.
    assert!(!notes(&r)
        .iter()
        .any(|(_, t)| t.contains("reads committed records only")));
}

#[test]
fn every_bad_value_is_refused() {
    let r = json("bad-values.properties", 1);
    assert_in(
        &r,
        "refused",
        &[
            "A->C.enabled",
            "A->B.topics",
            "emit.checkpoints.interval.seconds",
            "replication.policy.class",
        ],
    );
    assert_eq!(keys(&r, "refused").len(), 4);
    let reason = |key| {
        row(&r, "refused", key)["reason"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(reason("A->C.enabled").contains("not in `clusters`"));
    assert!(reason("A->B.topics").contains("invalid regex"));
    assert!(reason("emit.checkpoints.interval.seconds").contains("negative"));
    assert!(reason("replication.policy.class").contains("unsupported class"));
    assert_in(&r, "used", &["clusters", "A->B.enabled"]);
}

#[test]
fn missing_bootstrap_is_an_error_without_a_key() {
    let r = json("no-bootstrap.properties", 1);
    assert!(keys(&r, "refused").is_empty());
    let error = r["errors"][0].as_str().unwrap();
    assert!(
        error.contains("cluster `B` has no bootstrap servers"),
        "{error}"
    );
}

#[test]
fn connector_mode_leftovers() {
    let r = json("legacy-connector.properties", 0);
    assert_in(
        &r,
        "ignored",
        &[
            "name",
            "connector.class",
            "src->dst.security.protocol",
            "src.max.poll.records",
            "consumer.max.poll.records",
            "src.consumer.bootstrap.servers",
        ],
    );
    assert!(row(&r, "ignored", "src->dst.security.protocol")["reason"]
        .as_str()
        .unwrap()
        .contains("not from the flow"));
    assert!(row(&r, "ignored", "consumer.max.poll.records")["reason"]
        .as_str()
        .unwrap()
        .contains("never at top level"));
}

#[test]
fn strait_keys_and_duplicates() {
    let r = json("strait-keys.properties", 0);
    let s = &flow(&r, "A->B")["settings"];
    assert_eq!(s["isolation_level"], "read_uncommitted");
    assert_eq!(s["max_bytes_in_flight"], 16_777_216);
    assert_eq!(s["topics"], "second.*");
    assert_eq!(s["offset_syncs_topic"], "mm2-offset-syncs.A.internal on B");
    assert!(r["heartbeats"].as_array().unwrap().is_empty());
    let topics = row(&r, "used", "A->B.topics");
    assert_eq!(topics["line"], 12);
    assert!(topics["reason"].as_str().unwrap().contains("line 11"));
    has_note(&r, "gains", "strait-only key");
    assert!(!notes(&r)
        .iter()
        .any(|(_, t)| t.contains("reads committed records only")));
    let (code, _, _) = check_file(&fixture("strait-keys.properties"), &["--strict"]);
    assert_eq!(code, 3);
}

#[test]
fn syntax_error_is_refused() {
    let r = json("syntax-error.properties", 1);
    assert_eq!(r["verdict"], "refused");
    let refused = keys(&r, "refused");
    let errors = r["errors"].as_array().unwrap();
    assert!(
        refused.iter().any(|k| k == "A->B.topics") || !errors.is_empty(),
        "{r:#}"
    );
}

#[test]
fn an_unreadable_file_exits_1() {
    let (code, _, err) = check_file(Path::new("/nonexistent/strait-check.properties"), &[]);
    assert_eq!(code, 1);
    assert!(err.contains("cannot read"), "{err}");
}

#[test]
fn help_documents_exit_codes() {
    let output = Command::new(env!("CARGO_BIN_EXE_strait"))
        .args(["check", "--help"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    for line in [
        "  0  strait runs this file (warnings allowed unless --strict)",
        "  1  strait refuses this file: a syntax or config error (listed under refused keys / errors)",
        "  3  --strict, and some key is ignored, unknown, deprecated or set twice",
        "  4  --connect, and a cluster did not answer or refused the connection",
    ] {
        has_line(&text, line);
    }
}

/// The fixtures: at least 15 MM2 files, each commented on top.
#[test]
fn fixtures_are_commented() {
    let mut count = 0;
    for entry in std::fs::read_dir(fixture("")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("# "), "{} has no comment", path.display());
        if text.contains("clusters") {
            count += 1;
        }
    }
    assert!(count >= 15, "{count} MM2 files");
}

#[test]
fn connect_lists_what_the_flow_takes() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let id = names.id();
    let (src, dst) = (names.alias("src"), names.alias("dst"));
    let flow_name = format!("{src}->{dst}");
    let rdk = Rdk::new();
    let source = &clusters.source.bootstrap;
    for (topic, partitions) in [
        ("orders", 3),
        ("orders-eu", 1),
        ("payments", 2),
        ("orders.tmp", 1),
        ("logs", 1),
    ] {
        rdk.create_topic(source, &names.topic(topic), partitions);
    }
    for group in ["billing", "orders-app", "console-consumer-1234", "test-app"] {
        rdk.commit(
            source,
            &names.group(group),
            &names.topic("orders"),
            &[(0, 1)],
        );
    }
    // Heartbeats are mirrored whatever the topic filter, and the shared source's `heartbeats`
    // topic holds other tests' heartbeats: this flow is to take its own topics alone.
    let config = running::write_flow_config(
        &clusters,
        (&src, &dst),
        "check-connect",
        &format!(
            "{flow_name}.topics = orders.*-{id}, payments-{id}\n\
             {flow_name}.topics.exclude = .*\\.tmp-{id}\n\
             {flow_name}.groups = {pattern}\n\
             {flow_name}.groups.exclude = console-consumer-.*, test-.*\n\
             heartbeats.replication.enabled = false\n",
            pattern = names.pattern()
        ),
    );
    let (code, out, err) = check_file(&config, &["--connect", "--format", "json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    let clusters_seen = r["clusters"].as_array().unwrap();
    assert_eq!(clusters_seen.len(), 2);
    assert!(
        clusters_seen.iter().all(|c| c["reachable"] == true),
        "{r:#}"
    );
    let now = &flow(&r, &flow_name)["now"];
    let topics: Vec<(String, String, i64)> = now["topics"]
        .as_array()
        .unwrap_or_else(|| panic!("{r:#}"))
        .iter()
        .map(|t| {
            (
                t["topic"].as_str().unwrap().to_owned(),
                t["remote"].as_str().unwrap().to_owned(),
                t["partitions"].as_i64().unwrap(),
            )
        })
        .collect();
    // In name order.
    let mut expected: Vec<(String, String, i64)> =
        [("orders", 3), ("orders-eu", 1), ("payments", 2)]
            .into_iter()
            .map(|(topic, partitions)| {
                let topic = names.topic(topic);
                let remote = format!("{src}.{topic}");
                (topic, remote, partitions)
            })
            .collect();
    expected.sort();
    assert_eq!(topics, expected);
    let groups: Vec<&str> = now["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g.as_str().unwrap())
        .collect();
    let (billing, orders_app) = (names.group("billing"), names.group("orders-app"));
    assert_eq!(groups, [billing.as_str(), orders_app.as_str()]);
    // The reverse pair is not enabled: nothing listed for it.
    assert!(flow(&r, &format!("{dst}->{src}")).get("now").is_none());

    let (code, text, _) = check_file(&config, &["--connect"]);
    assert_eq!(code, 0);
    let listed: Vec<String> = expected
        .iter()
        .map(|(topic, remote, partitions)| format!("{topic} -> {remote} ({partitions}p)"))
        .collect();
    has_line(
        &text,
        &format!("    topics now      3: {}", listed.join(", ")),
    );
    has_line(
        &text,
        &format!("    groups now      2: {billing}, {orders_app}"),
    );
    println!("{text}");

    // A cluster that does not answer: reported, exit 4.
    let dead = running::flow_properties(
        (&src, source),
        (&dst, "127.0.0.1:1"),
        &format!(
            "{flow_name}.topics = {}\nheartbeats.replication.enabled = false",
            names.pattern()
        ),
    );
    let dead_path = clusters.dir().join("check-dead.properties");
    std::fs::write(&dead_path, dead).unwrap();
    let (code, out, err) = check_file(
        &dead_path,
        &["--connect", "--timeout-secs", "3", "--format", "json"],
    );
    assert_eq!(code, 4, "{out}\n{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    let dst_seen = r["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cluster"] == dst.as_str())
        .unwrap();
    assert_eq!(dst_seen["reachable"], false);
    assert!(dst_seen["error"].is_string());
    // The source still answers: its topics (this test's five) are listed.
    assert_eq!(
        flow(&r, &flow_name)["now"]["topics"]
            .as_array()
            .unwrap()
            .len(),
        5
    );
}

/// A port on this host where nothing listens.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn cluster_row<'a>(report: &'a Value, alias: &str) -> &'a Value {
    report["clusters"]
        .as_array()
        .unwrap_or_else(|| panic!("no clusters: {report:#}"))
        .iter()
        .find(|c| c["cluster"] == alias)
        .unwrap_or_else(|| panic!("no cluster {alias}: {report:#}"))
}

/// `--connect` with a cluster whose settings are refused: reported as refused, with the
/// reason, and not contacted (its bootstrap address is a listener that sees no connection);
/// the other cluster, at a closed port, says the connection was refused, within the timeout
/// (before: "DID NOT ANSWER" for both, and only "no answer within 3s" for B).
#[test]
fn connect_reports_refused_settings_without_contacting_the_cluster() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let dir = std::env::temp_dir().join(format!("strait-check-refused-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("refused.properties");
    std::fs::write(
        &file,
        format!(
            "clusters = A, B\n\
             A.bootstrap.servers = {}\n\
             A.security.protocol = SSL\n\
             A.ssl.truststore.type = JKSS\n\
             B.bootstrap.servers = 127.0.0.1:{}\n\
             A->B.enabled = true\n",
            listener.local_addr().unwrap(),
            closed_port()
        ),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let (code, out, err) = check_file(
        &file,
        &["--connect", "--timeout-secs", "3", "--format", "json"],
    );
    let took = started.elapsed();
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(took < std::time::Duration::from_secs(4), "took {took:?}");
    let r: Value = serde_json::from_str(&out).unwrap();
    let a = cluster_row(&r, "A");
    assert_eq!(a["status"], "refused", "{r:#}");
    assert!(
        a["error"].as_str().unwrap().contains("ssl.truststore.type"),
        "{r:#}"
    );
    let b = cluster_row(&r, "B");
    assert_eq!(b["status"], "failed", "{r:#}");
    assert!(
        b["error"].as_str().unwrap().contains("Connection refused"),
        "{r:#}"
    );
    // The flow's source is refused: it is not asked what the flow would take.
    let now = flow(&r, "A->B")["now"]["error"].as_str().unwrap();
    assert!(now.contains("not contacted"), "{now}");
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("cluster A was contacted: {other:?}"),
    }
    let (_, text, _) = check_file(&file, &["--connect", "--timeout-secs", "3"]);
    assert!(
        text.lines()
            .any(|l| l.starts_with("  A (") && l.contains("REFUSED, not contacted: ")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("  B (") && l.contains("FAILED: ")),
        "{text}"
    );
}

/// `--connect` to clusters that cannot be reached at all (a closed port, a host name that does
/// not resolve) ends within `--timeout-secs` and says why for each (before: one timeout per
/// cluster and one more per flow, 3 s each here, 9 s in all, and "no answer within 3s" for
/// all).
#[test]
fn connect_says_why_each_cluster_failed_within_the_timeout() {
    let dir = std::env::temp_dir().join(format!("strait-check-dead-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("dead.properties");
    std::fs::write(
        &file,
        format!(
            "clusters = A, B\n\
             A.bootstrap.servers = 127.0.0.1:{}\n\
             B.bootstrap.servers = no-such-host.invalid:9092\n\
             A->B.enabled = true\n",
            closed_port()
        ),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let (code, out, err) = check_file(
        &file,
        &["--connect", "--timeout-secs", "3", "--format", "json"],
    );
    let took = started.elapsed();
    assert_eq!(code, 4, "{out}\n{err}");
    assert!(took < std::time::Duration::from_secs(4), "took {took:?}");
    let r: Value = serde_json::from_str(&out).unwrap();
    let a = cluster_row(&r, "A");
    assert_eq!(
        (&a["status"], &a["reachable"]),
        (&"failed".into(), &false.into())
    );
    assert!(
        a["error"].as_str().unwrap().contains("Connection refused"),
        "{r:#}"
    );
    let b = cluster_row(&r, "B");
    assert!(
        b["error"]
            .as_str()
            .unwrap()
            .contains("no-such-host.invalid"),
        "{r:#}"
    );
    let now = flow(&r, "A->B")["now"]["error"].as_str().unwrap();
    assert!(now.contains("did not answer"), "{now}");
}

/// A user's error (a file that does not exist, a value that does not parse) is one plain line
/// on stderr and exit status 1, with `RUST_BACKTRACE=1` as on many build machines: no
/// `Stack backtrace:` (there were 15-20 lines of it before).
#[test]
fn a_user_error_is_plain_whatever_rust_backtrace_says() {
    let dir = std::env::temp_dir().join(format!("strait-user-error-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let bad = dir.join("bad.properties");
    std::fs::write(&bad, "clusters = A, B\nA->B.enabled = maybe\n").expect("write");
    let missing = dir.join("missing.properties");
    for args in [
        vec!["check", "--config", missing.to_str().unwrap()],
        vec!["failover", "check", "--config", missing.to_str().unwrap()],
        vec!["map", "--config", bad.to_str().unwrap()],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_strait"))
            .args(&args)
            .env("RUST_BACKTRACE", "1")
            .env("RUST_LIB_BACKTRACE", "1")
            .output()
            .expect("run strait");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_ne!(output.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("backtrace"), "{args:?}: {stderr}");
        let lines = stderr.lines().filter(|l| !l.trim().is_empty()).count();
        assert!(
            (1..=3).contains(&lines),
            "{args:?}: {lines} lines:\n{stderr}"
        );
    }
}

/// An incident command whose cluster does not answer says what it waits for within seconds,
/// and gives up at `--timeout` (before: silent for a minute, then a failure; no `--timeout`).
#[test]
fn an_incident_command_says_what_it_waits_for_and_takes_a_timeout() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let dir = std::env::temp_dir().join(format!("strait-timeout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let config = dir.join("down.properties");
    std::fs::write(
        &config,
        format!(
            "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:{port}\n\
             B.bootstrap.servers = 127.0.0.1:{port}\nA->B.enabled = true\n"
        ),
    )
    .expect("write");
    for command in [&["map"][..], &["failover", "plan", "--flow", "A->B"][..]] {
        let started = std::time::Instant::now();
        let output = Command::new(env!("CARGO_BIN_EXE_strait"))
            .args(command)
            .args(["--config", config.to_str().unwrap(), "--timeout", "3"])
            .output()
            .expect("run strait");
        let took = started.elapsed();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{command:?}: {stderr}");
        assert!(
            stderr.contains(&format!("waiting for 127.0.0.1:{port} to answer")),
            "{command:?} says what it waits for: {stderr}"
        );
        assert!(
            took < std::time::Duration::from_secs(30),
            "{command:?} gave up at its --timeout, not a minute later: {took:?}"
        );
    }
    let bad = Command::new(env!("CARGO_BIN_EXE_strait"))
        .args([
            "map",
            "--config",
            config.to_str().unwrap(),
            "--timeout",
            "inf",
        ])
        .output()
        .expect("run strait");
    assert_eq!(bad.status.code(), Some(2));
}

/// Every command's `--help` fits 100 columns (there were lines of up to 552) and ends with
/// `Examples:`, at least one `strait ...` command line in it, found by walking the commands
/// each help lists. The man page is these helps (`scripts/manpage.py`), examples included.
#[test]
fn every_help_fits_100_columns_and_has_examples() {
    fn help(path: &[String]) -> String {
        let output = Command::new(env!("CARGO_BIN_EXE_strait"))
            .args(path)
            .arg("--help")
            .env("COLUMNS", "300")
            .output()
            .expect("run strait");
        assert!(output.status.success(), "{path:?} --help");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
    let mut todo = vec![Vec::<String>::new()];
    let mut seen = 0;
    while let Some(path) = todo.pop() {
        let text = help(&path);
        seen += 1;
        for line in text.lines() {
            assert!(
                line.chars().count() <= 100,
                "strait {} --help: {} columns: {line}",
                path.join(" "),
                line.chars().count()
            );
        }
        let examples: Vec<&str> = text
            .split("\nExamples:\n")
            .nth(1)
            .unwrap_or_default()
            .lines()
            .take_while(|l| l.starts_with("  "))
            .collect();
        assert!(
            examples.iter().any(|l| l.starts_with("  strait ")),
            "strait {} --help has no Examples: section with a command:\n{text}",
            path.join(" ")
        );
        // The man page keeps example lines as they are (a command cannot be re-wrapped) and
        // indents them 7 more: at most 72 columns here fits a terminal of 80 there.
        for line in &examples {
            assert!(
                line.chars().count() <= 72,
                "strait {} --help: an example line past 72 columns: {line}",
                path.join(" ")
            );
        }
        let commands = text
            .split("Commands:")
            .nth(1)
            .map(|rest| rest.split("\n\n").next().unwrap_or_default().to_owned())
            .unwrap_or_default();
        for line in commands.lines() {
            // A command's name starts a line indented by two spaces; wrapped text goes deeper.
            let Some(name) = line.strip_prefix("  ").filter(|l| !l.starts_with(' ')) else {
                continue;
            };
            let name = name.split_whitespace().next().unwrap_or_default();
            if !name.is_empty() && name != "help" {
                let mut next = path.clone();
                next.push(name.to_owned());
                todo.push(next);
            }
        }
    }
    assert!(seen > 10, "walked {seen} commands' help");
}

/// What `check` echoes from the file (key names, values, the errors that quote them) reaches a
/// terminal with its control characters escaped: a key name holding `ESC [2J` would otherwise
/// clear the operator's screen, or hide the lines above it.
#[test]
fn control_characters_from_the_file_are_escaped() {
    let dir = std::env::temp_dir().join(format!("strait-check-escape-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("escape.properties");
    std::fs::write(
        &file,
        "clusters = A, B\n\
         A.bootstrap.servers = a:9092\n\
         B.bootstrap.servers = b:9092\n\
         A->B.enabled = true\n\
         A->B.topics = orders\u{1b}[2J\n\
         replication.fact\u{1b}[31mor = 3\n",
    )
    .expect("write");
    let (_, out, err) = check_file(&file, &[]);
    assert!(
        !out.contains('\u{1b}') && !err.contains('\u{1b}'),
        "raw escape:\n{out:?}\n{err:?}"
    );
    assert!(out.contains("replication.fact\\u{1b}[31mor"), "{out}");
    assert!(out.contains("orders\\u{1b}[2J"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
