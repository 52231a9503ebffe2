//! The harness itself: real brokers start, answer Kafka requests, carry records between an
//! independent producer and consumer, and are gone after drop.

use std::time::Duration;

use strait_testkit::{kafka_tool, Clusters, Names, Rdk, TestRecord, Which};

/// Whether `pid` is a live process (a zombie counts as gone: nothing may reap a reparented
/// broker).
fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
            !matches!(state.and_then(|s| s.chars().next()), Some('Z' | 'X') | None)
        }
        Err(_) => false,
    }
}

#[test]
fn clusters_carry_records_and_stop_on_drop() {
    let clusters = Clusters::start();
    let rdk = Rdk::new();
    assert_ne!(clusters.source.bootstrap, clusters.target.bootstrap);
    for broker in [&clusters.source, &clusters.target] {
        broker
            .check_api_versions()
            .unwrap_or_else(|e| panic!("{} ({}): {e}", broker.name, broker.bootstrap));
        assert!(
            running(broker.pid),
            "{} pid {} not running",
            broker.name,
            broker.pid
        );
    }

    let topic = "harness";
    rdk.create_topic(&clusters.source.bootstrap, topic, 2);
    let records = vec![
        TestRecord::new(0, Some(b"k0"), Some(b"v0")).with_header("h", Some(b"x")),
        TestRecord::new(1, None, Some(b"v1")).with_timestamp(1_700_000_000_000),
        TestRecord::new(0, Some(b"k2"), None).with_header("null", None),
    ];
    let delivered = rdk.produce(&clusters.source.bootstrap, topic, &records, "zstd");
    assert_eq!(delivered, vec![(0, 0), (1, 0), (0, 1)]);

    let consumed = rdk.consume(
        &clusters.source.bootstrap,
        topic,
        3,
        Duration::from_secs(30),
    );
    // consume() sorts by partition, then offset.
    let expected = [&records[0], &records[2], &records[1]];
    assert_eq!(consumed.len(), 3);
    for (got, want) in consumed.iter().zip(expected) {
        assert_eq!(got.partition, want.partition);
        assert!(got.same_payload(want), "got {got:?}, want {want:?}");
        assert!(got.timestamp_ms.is_some());
    }
    assert_eq!(consumed[2].timestamp_ms, Some(1_700_000_000_000));
    assert_eq!(
        consumed.iter().map(|r| r.offset).collect::<Vec<_>>(),
        vec![Some(0), Some(1), Some(0)]
    );

    // Kafka's own tool sees what librdkafka wrote: the end offsets of both partitions.
    let ends = kafka_tool(
        "org.apache.kafka.tools.GetOffsetShell",
        &[
            "--bootstrap-server",
            &clusters.source.bootstrap,
            "--topic",
            topic,
            "--time",
            "-1",
        ],
    );
    let mut ends: Vec<&str> = ends.lines().collect();
    ends.sort_unstable();
    assert_eq!(ends, vec!["harness:0:2", "harness:1:1"]);

    // The clusters are independent: the same topic can be created on the target.
    rdk.create_topic(&clusters.target.bootstrap, topic, 1);

    let pids = [clusters.source.pid, clusters.target.pid];
    let dir = clusters.dir().to_owned();
    drop(clusters);
    for pid in pids {
        assert!(!running(pid), "broker pid {pid} still running after drop");
    }
    assert!(!dir.exists(), "{} not removed", dir.display());
}

#[test]
fn group_offsets_commit_only_while_group_is_empty() {
    // Never stops a broker: runs on the shared pair, with names of its own.
    let clusters = Clusters::shared();
    let names = Names::new();
    let rdk = Rdk::new();
    let bootstrap = &clusters.source.bootstrap;
    let orders = names.topic("orders");
    let (g1, g2, g_none) = (names.group("g1"), names.group("g2"), names.group("g-none"));
    rdk.create_topic(bootstrap, &orders, 2);

    rdk.commit(bootstrap, &g1, &orders, &[(0, 5), (1, 7)]);
    let committed = rdk.committed(bootstrap, &g1, &orders, &[0, 1]);
    assert_eq!(
        committed.into_iter().collect::<Vec<_>>(),
        vec![(0, 5), (1, 7)]
    );
    assert!(rdk.committed(bootstrap, &g_none, &orders, &[0]).is_empty());

    let member = rdk.group_member(bootstrap, &g2, &orders);
    assert_eq!(member.group(), g2);
    let refused = std::panic::catch_unwind(|| rdk.commit(bootstrap, &g2, &orders, &[(0, 1)]));
    assert!(refused.is_err(), "commit to an active group must fail");
    drop(member);
    rdk.commit(bootstrap, &g2, &orders, &[(0, 1)]);
    assert_eq!(
        rdk.committed(bootstrap, &g2, &orders, &[0]).get(&0),
        Some(&1)
    );
}

#[test]
fn a_broker_restarts_on_its_port_with_its_data() {
    let mut clusters = Clusters::start();
    let rdk = Rdk::new();
    let bootstrap = clusters.target.bootstrap.clone();
    rdk.create_topic(&bootstrap, "kept", 1);
    let records: Vec<TestRecord> = (0..5)
        .map(|i| TestRecord::new(0, None, Some(format!("v{i}").as_bytes())))
        .collect();
    rdk.produce(&bootstrap, "kept", &records, "none");

    let old_pid = clusters.target.pid;
    clusters.stop_broker(Which::Target);
    assert!(!running(old_pid), "target pid {old_pid} still running");
    assert!(
        clusters.target.check_api_versions().is_err(),
        "a stopped broker must not answer"
    );
    // The other broker is untouched.
    clusters.source.check_api_versions().unwrap();

    clusters.start_broker(Which::Target);
    assert_ne!(clusters.target.pid, old_pid);
    assert!(running(clusters.target.pid));
    assert_eq!(clusters.target.bootstrap, bootstrap, "same port");
    clusters.target.check_api_versions().unwrap();
    let got = rdk.consume(&bootstrap, "kept", 5, Duration::from_secs(30));
    assert_eq!(got.len(), 5);
    for (g, w) in got.iter().zip(&records) {
        assert!(g.same_payload(w), "{g:?} vs {w:?}");
    }

    let before = clusters.source.pid;
    clusters.restart_broker(Which::Source, Duration::from_millis(200));
    assert!(!running(before));
    clusters.source.check_api_versions().unwrap();

    // A crash (SIGKILL) keeps what the broker acknowledged.
    let before = clusters.target.pid;
    clusters.kill_broker(Which::Target);
    assert!(!running(before));
    clusters.start_broker(Which::Target);
    assert_eq!(
        rdk.consume(&bootstrap, "kept", 5, Duration::from_secs(30))
            .len(),
        5
    );

    let pids = [clusters.source.pid, clusters.target.pid];
    drop(clusters);
    for pid in pids {
        assert!(
            !running(pid),
            "restarted broker pid {pid} still running after drop"
        );
    }
}
