//! Group membership under strait's own protocol type against Apache Kafka's group coordinator:
//! a generation forms, the leader alone sees every member and hands out the assignments, a
//! second member makes the first rebalance, a member silent past its session timeout is
//! removed and then fenced, and a member that leaves empties the group at once. The group is
//! also read back with DescribeGroups, as `kafka-consumer-groups --describe` reads it.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use strait_kafka::membership::{Beat, Joined, Member, MembershipConfig};
use strait_testkit::{Clusters, Names};

use common::client;

fn config(group: &str) -> MembershipConfig {
    MembershipConfig {
        // The broker's smallest session timeout (group.min.session.timeout.ms).
        session_timeout: Duration::from_secs(6),
        rebalance_timeout: Duration::from_secs(20),
        ..MembershipConfig::new(group, "strait")
    }
}

/// Heartbeats until the coordinator asks for a rebalance.
async fn until_rebalance(member: &Member) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match member.heartbeat().await.unwrap() {
            Beat::Rebalance => return,
            Beat::Member => {}
            Beat::Fenced(e) => panic!("fenced while waiting for a rebalance: {e}"),
        }
        assert!(Instant::now() < deadline, "no rebalance");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn metadata_of(joined: &Joined) -> Vec<(String, Bytes)> {
    let mut all: Vec<_> = joined
        .members
        .iter()
        .map(|m| (m.member_id.clone(), m.metadata.clone()))
        .collect();
    all.sort();
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_join_sync_rebalance_are_fenced_and_leave() {
    let clusters = Clusters::shared();
    let names = Names::new();
    let bootstrap = &clusters.target.bootstrap;
    let group = &names.group("strait-workers");
    let admin = client(bootstrap).await;

    // 1. One member: its own leader, with its metadata, and the assignment it gives itself.
    let mut a = Member::new(client(bootstrap).await, config(group));
    let first = a.join(Bytes::from_static(b"worker a")).await.unwrap();
    assert!(first.is_leader(), "{first:?}");
    assert!(!first.member_id.is_empty());
    assert_eq!(
        metadata_of(&first),
        [(first.member_id.clone(), Bytes::from_static(b"worker a"))]
    );
    let mine = a
        .sync(
            &first,
            &[(first.member_id.clone(), Bytes::from_static(b"all"))],
        )
        .await
        .unwrap();
    assert_eq!(mine, Bytes::from_static(b"all"));
    assert!(matches!(a.heartbeat().await.unwrap(), Beat::Member));
    let described = admin.describe_group(group).await.unwrap();
    assert_eq!(described.protocol_type, "strait", "{described:?}");
    assert_eq!(described.members.len(), 1, "{described:?}");

    // 2. A second member: the first learns of the rebalance from its heartbeat and joins
    // again; both are in the next generation, and only the leader sees both.
    let b_client = client(bootstrap).await;
    let b_config = config(group);
    let b_join = tokio::spawn(async move {
        let mut b = Member::new(b_client, b_config);
        let joined = b.join(Bytes::from_static(b"worker b")).await.unwrap();
        (b, joined)
    });
    until_rebalance(&a).await;
    let a_joined = a.join(Bytes::from_static(b"worker a")).await.unwrap();
    let (mut b, b_joined) = b_join.await.unwrap();
    assert_eq!(a_joined.generation, first.generation + 1);
    assert_eq!(b_joined.generation, a_joined.generation);
    assert_eq!(a_joined.leader, b_joined.leader);
    assert_eq!(a_joined.member_id, first.member_id, "a keeps its member id");
    let (leader, follower) = if a_joined.is_leader() {
        (&a_joined, &b_joined)
    } else {
        (&b_joined, &a_joined)
    };
    assert!(follower.members.is_empty(), "{follower:?}");
    let mut expected = vec![
        (a_joined.member_id.clone(), Bytes::from_static(b"worker a")),
        (b_joined.member_id.clone(), Bytes::from_static(b"worker b")),
    ];
    expected.sort();
    assert_eq!(metadata_of(leader), expected);

    // The leader hands out both assignments; the follower's sync waits for them.
    let plan = vec![
        (a_joined.member_id.clone(), Bytes::from_static(b"p0-p31")),
        (b_joined.member_id.clone(), Bytes::from_static(b"p32-p63")),
    ];
    let (a_plan, b_plan) = if a_joined.is_leader() {
        (plan.clone(), Vec::new())
    } else {
        (Vec::new(), plan.clone())
    };
    let (a_got, b_got) = tokio::join!(a.sync(&a_joined, &a_plan), b.sync(&b_joined, &b_plan));
    assert_eq!(a_got.unwrap(), Bytes::from_static(b"p0-p31"));
    assert_eq!(b_got.unwrap(), Bytes::from_static(b"p32-p63"));

    // 3. `a` stops heartbeating (a paused or cut-off worker): past its session timeout the
    // coordinator removes it, `b` rebalances alone, and `a` is then fenced.
    let silent_since = Instant::now();
    until_rebalance(&b).await;
    let alone = b.join(Bytes::from_static(b"worker b")).await.unwrap();
    assert!(alone.is_leader());
    assert_eq!(alone.generation, a_joined.generation + 1);
    assert_eq!(
        metadata_of(&alone),
        [(b_joined.member_id.clone(), Bytes::from_static(b"worker b"))]
    );
    b.sync(
        &alone,
        &[(alone.member_id.clone(), Bytes::from_static(b"p0-p63"))],
    )
    .await
    .unwrap();
    eprintln!(
        "measured: the silent member was removed {:.1} s after its last heartbeat",
        silent_since.elapsed().as_secs_f64()
    );
    match a.heartbeat().await.unwrap() {
        Beat::Fenced(e) => eprintln!("measured: the removed member's heartbeat was refused: {e}"),
        other => panic!("the removed member is still in the group: {other:?}"),
    }
    let stale = a.sync(&a_joined, &[]).await;
    assert!(stale.is_err(), "a sync of the old generation: {stale:?}");

    // 4. Leaving empties the group at once, without waiting for a session timeout.
    b.leave().await.unwrap();
    let described = admin.describe_group(group).await.unwrap();
    assert!(described.members.is_empty(), "{described:?}");
    assert_eq!(described.state, "Empty", "{described:?}");

    // 5. Static membership (KIP-345): a second process with the same `group.instance.id` (a
    // restarted pod, or a stale one still running) takes the place, and the first is fenced.
    let static_config = MembershipConfig {
        instance_id: Some("worker-1".to_owned()),
        ..config(group)
    };
    let mut old = Member::new(client(bootstrap).await, static_config.clone());
    let joined = old.join(Bytes::from_static(b"old")).await.unwrap();
    old.sync(
        &joined,
        &[(joined.member_id.clone(), Bytes::from_static(b"all"))],
    )
    .await
    .unwrap();
    let mut new = Member::new(client(bootstrap).await, static_config);
    let taken = new.join(Bytes::from_static(b"new")).await.unwrap();
    assert_ne!(taken.member_id, joined.member_id);
    match old.heartbeat().await.unwrap() {
        Beat::Fenced(e) => {
            assert_eq!(
                e.code(),
                Some(kafka_protocol::error::ResponseError::FencedInstanceId),
                "{e}"
            );
            eprintln!("measured: the replaced static member's heartbeat was refused: {e}");
        }
        other => panic!("the replaced static member is still in the group: {other:?}"),
    }
}
