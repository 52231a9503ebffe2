//! `strait status` against a running `strait run --listen` between two real clusters: `--json`
//! shows the flow, its topic and partitions, and zero lag once everything is mirrored; the
//! table names the same; `--watch` redraws in place; and with nothing listening it says so and
//! exits non-zero.

mod running;

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use running::{free_port, write_flow_config, Strait};
use serde_json::Value;
use strait_testkit::{Clusters, Names, Rdk, TestRecord};

fn strait_status(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strait"))
        .arg("status")
        .args(args)
        .output()
        .expect("run strait status")
}

#[test]
fn status_shows_each_flow_topic_and_partition_and_zero_lag_at_the_end() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let (src, dst) = (names.alias("A"), names.alias("B"));
    let flow_name = format!("{src}->{dst}");
    let orders = names.topic("orders");
    let remote = format!("{src}.{orders}");
    let rdk = Rdk::new();
    let a = &clusters.source.bootstrap;
    rdk.create_topic(a, &orders, 3);
    let records: Vec<TestRecord> = (0..300)
        .map(|i| TestRecord::new(i % 3, None, Some(format!("r{i}").as_bytes())))
        .collect();
    rdk.produce(a, &orders, &records, "zstd");
    rdk.commit(a, &names.group("billing"), &orders, &[(0, 40), (2, 100)]);
    let config = write_flow_config(
        &clusters,
        (&src, &dst),
        "status.properties",
        // No heartbeats: B->A's into A would be mirrored too (MM2 mirrors heartbeats whatever
        // the topic filter), and so would other tests' in the shared source's `heartbeats`
        // topic; this flow is to hold orders alone.
        &format!(
            "{flow_name}.topics = {orders}\n\
             {flow_name}.groups = {}\n\
             emit.heartbeats.enabled = false\nheartbeats.replication.enabled = false\n\
             emit.checkpoints.interval.seconds = 1\n\
             sync.group.offsets.enabled = true\nsync.group.offsets.interval.seconds = 1",
            names.pattern()
        ),
    );
    let strait = Strait::run(&config, clusters.dir().join("strait-status.log"));
    let url = strait.url();

    // Until everything is mirrored and both group passes have run.
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        let out = strait_status(&["--json", "--url", &url]);
        let parsed: Option<Value> = out
            .status
            .success()
            .then(|| serde_json::from_slice(&out.stdout).ok())
            .flatten();
        if let Some(s) = parsed {
            let flow = &s["flows"][0];
            if flow["records"] == 300
                && flow["lag_records"] == 0
                && flow["groups"]["checkpointed"] == 1
                && flow["groups"]["synced"] == 1
            {
                break s;
            }
        }
        assert!(
            Instant::now() < deadline,
            "strait status --json never showed 300 records, lag 0 and billing synced; last: \
             {}\n{}\nlog:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            strait.log_text()
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    let flows = status["flows"].as_array().expect("flows");
    assert_eq!(flows.len(), 1, "{status}");
    let flow = &flows[0];
    assert_eq!(flow["flow"], flow_name);
    assert_eq!(
        (&flow["source"], &flow["target"]),
        (&src.as_str().into(), &dst.as_str().into())
    );
    assert_eq!(flow["state"], "running");
    assert_eq!(flow["lag_seconds"], 0.0);
    assert_eq!(flow["lost_records"], 0);
    assert_eq!(flow["duplicate_records"], 0);
    assert!(flow["bytes"].as_u64().unwrap_or(0) > 0, "{flow}");
    assert_eq!(flow["groups"]["checkpoints_enabled"], true);
    assert_eq!(flow["groups"]["sync_enabled"], true);
    assert_eq!(flow["groups"]["sync_skipped"], 0);
    let topics = flow["topics"].as_array().expect("topics");
    assert_eq!(topics.len(), 1, "{flow}");
    let topic = &topics[0];
    assert_eq!(topic["topic"], orders);
    assert_eq!(topic["remote_topic"], remote);
    assert_eq!(topic["lag_records"], 0);
    let partitions = topic["partitions"].as_array().expect("partitions");
    assert_eq!(partitions.len(), 3);
    for (i, p) in partitions.iter().enumerate() {
        assert_eq!(p["partition"], i);
        assert_eq!(p["records"], 100, "{p}");
        assert_eq!(p["source_end"], 100, "{p}");
        assert_eq!(p["position"], 100, "{p}");
        assert_eq!(p["lag_records"], 0, "{p}");
        assert_eq!(p["lag_seconds"], 0.0, "{p}");
        assert_eq!(p["lost_records"], 0, "{p}");
        assert_eq!(p["last_error"], Value::Null, "{p}");
    }

    // The table says the same.
    let out = strait_status(&["--url", &url]);
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{screen}");
    eprintln!("strait status:\n{screen}");
    assert!(
        screen.contains(&format!("strait at {url}: 1 flow")),
        "{screen}"
    );
    let running = format!("{flow_name}  RUNNING");
    assert!(screen.contains(&running), "{screen}");
    assert!(screen.contains("1 checkpointed"), "{screen}");
    assert!(screen.contains("1 synced, 0 skipped"), "{screen}");
    assert!(screen.contains("last error  none"), "{screen}");
    let row = screen
        .lines()
        .find(|l| l.trim_start().starts_with(orders.as_str()))
        .unwrap_or_else(|| panic!("no row for {orders}:\n{screen}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    // TOPIC REMOTE PARTS LAG LAG-TIME REC/S BYTES/S(2 words) RECORDS LOST LAST-ERROR
    assert_eq!(
        &cells[..5],
        [orders.as_str(), remote.as_str(), "3", "0", "0s"],
        "{row}"
    );
    assert_eq!(&cells[cells.len() - 3..], ["300", "0", "-"], "{row}");

    // --watch redraws in place every 2 s until stopped.
    let mut watch = Command::new(env!("CARGO_BIN_EXE_strait"))
        .args(["status", "--watch", "--url", &url])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn strait status --watch");
    std::thread::sleep(Duration::from_millis(4_500));
    let _ = watch.kill();
    let _ = watch.wait();
    let mut shown = String::new();
    watch
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut shown)
        .expect("read --watch output");
    let redraws = shown.matches("\x1b[H\x1b[2J").count();
    assert!((2..=4).contains(&redraws), "{redraws} redraws:\n{shown}");
    assert_eq!(shown.matches(running.as_str()).count(), redraws, "{shown}");
}

#[test]
fn status_with_nothing_listening_says_so_and_fails() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    for json in [false, true] {
        let mut args = vec!["--url", url.as_str()];
        if json {
            args.push("--json");
        }
        let out = strait_status(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "exit 0 with nothing listening: {stderr}"
        );
        assert!(
            out.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(
            stderr.contains(&format!("no strait instance is running at {url}")),
            "{stderr}"
        );
        assert!(stderr.contains("strait run"), "{stderr}");
    }
}
