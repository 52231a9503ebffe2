//! Where a partition that was never mirrored starts: MM2's source consumer honours
//! `consumer.auto.offset.reset` (`earliest` unless the file says otherwise), and so does strait.

mod common;

use std::time::Duration;

use strait_kafka::admin::NewTopic;
use strait_testkit::{Clusters, Names, Rdk, TestRecord};
use strait_wire::offset_map::SourcePartition;

fn records(n: usize, tag: &str) -> Vec<TestRecord> {
    (0..n)
        .map(|i| {
            TestRecord::new(
                (i % 2) as i32,
                Some(format!("k{i}").as_bytes()),
                Some(format!("{tag}-{i}").as_bytes()),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latest_starts_at_the_source_end_and_earliest_at_its_start() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let (a, b) = (names.alias("source"), names.alias("target"));
    let (old, new) = (names.topic("old"), names.topic("new"));
    // Only this test's groups; heartbeats topics (mirrored whatever `topics` says) are other
    // tests'.
    let own = format!(
        "groups = {}\nheartbeats.replication.enabled = false",
        names.pattern()
    );
    let rdk = Rdk::new();
    let (source, target) = (&clusters.source.bootstrap, &clusters.target.bootstrap);
    let src = common::client(source).await;
    for topic in [&old, &new] {
        src.create_topic(NewTopic::new(topic, 2)).await.unwrap();
    }
    let before = records(20, "before");
    rdk.produce(source, &old, &before, "none");
    rdk.produce(source, &new, &before, "none");

    // `new` starts at the end (the flow's own override); `old` at the start (the default).
    let latest_new = format!(
        "{a}->{b}.consumer.auto.offset.reset = latest\n\
         {a}->{b}.topics = {new}\n\
         {own}"
    );
    let mut flow = common::start_flow_between((&a, &b), source, target, &latest_new).await;
    flow.run_until_caught_up().await.unwrap();
    assert_eq!(flow.stats().records, 0, "{:?}", flow.stats());
    let after = records(6, "after");
    rdk.produce(source, &new, &after, "lz4");
    flow.run_until_caught_up().await.unwrap();
    let stats = flow.stats();
    assert_eq!(stats.records, 6, "{stats:?}");
    assert_eq!(stats.lost_records, 0, "nothing was deleted: {stats:?}");
    let got = rdk.consume(target, &format!("{a}.{new}"), 6, Duration::from_secs(30));
    assert_eq!(got.len(), 6);
    let mut want: Vec<&TestRecord> = after.iter().collect();
    want.sort_by_key(|r| r.partition);
    for (g, w) in got.iter().zip(want) {
        assert!(g.same_payload(w), "{g:?} vs {w:?}");
    }
    // The map starts where mirroring started: source offset 10 of each partition is target 0.
    for p in 0..2 {
        let sp = SourcePartition::new(&new, p);
        assert_eq!(
            flow.map().translate(&sp, 10).target(),
            Some(0),
            "partition {p}"
        );
    }
    drop(flow);

    // Once a partition has a map, the reset no longer applies: a restart resumes from the map.
    rdk.produce(source, &new, &records(4, "later"), "none");
    let mut flow = common::start_flow_between((&a, &b), source, target, &latest_new).await;
    flow.run_until_caught_up().await.unwrap();
    assert_eq!(flow.stats().records, 4, "{:?}", flow.stats());
    drop(flow);

    let mut flow = common::start_flow_between(
        (&a, &b),
        source,
        target,
        &format!("{a}->{b}.topics = {old}\n{own}"),
    )
    .await;
    flow.run_until_caught_up().await.unwrap();
    assert_eq!(flow.stats().records, 20, "{:?}", flow.stats());
}
