//! Workers sharing units through a group on Apache Kafka's coordinator: three workers split
//! eight units evenly, a fourth joins and takes only its share, one killed (no LeaveGroup) is
//! removed after its session timeout and only its units move, one that stops leaves at once.
//! Every generation is checked: each unit owned by exactly one worker, counts within one.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use strait_core::scale::{Ownership, Unit, Worker, PROTOCOL_TYPE};
use strait_kafka::membership::MembershipConfig;
use strait_testkit::{Clusters, Names};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use common::client;

const SESSION: Duration = Duration::from_secs(6);

struct Running {
    ownership: watch::Receiver<Ownership>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

fn all_units() -> BTreeSet<Unit> {
    Unit::all_of("A->B", 4)
        .chain(Unit::all_of("B->A", 4))
        .collect()
}

async fn start(bootstrap: &str, group: &str) -> Running {
    start_as(bootstrap, group, None).await
}

/// A worker; with `instance`, a static member.
async fn start_as(bootstrap: &str, group: &str, instance: Option<&str>) -> Running {
    let config = MembershipConfig {
        session_timeout: SESSION,
        rebalance_timeout: Duration::from_secs(20),
        instance_id: instance.map(str::to_owned),
        ..MembershipConfig::new(group, PROTOCOL_TYPE)
    };
    let mut worker = Worker::new(client(bootstrap).await, config, all_units());
    let ownership = worker.ownership();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let ran = worker
            .run(async {
                let _ = stopped.await;
            })
            .await;
        if let Err(e) = ran {
            // A static member whose instance id another process took: the test checks it.
            eprintln!("worker ended: {e}");
        }
    });
    Running {
        ownership,
        stop: Some(stop),
        task,
    }
}

/// Waits until the workers' ownerships form one generation that covers every unit exactly once
/// with counts within one of each other, and returns each worker's units (by its position in
/// `workers`) and how long it took.
async fn settled(workers: &[&Running]) -> (Vec<BTreeSet<Unit>>, Duration) {
    let began = Instant::now();
    let deadline = began + Duration::from_secs(60);
    loop {
        let now: Vec<Ownership> = workers
            .iter()
            .map(|w| w.ownership.borrow().clone())
            .collect();
        let generations: BTreeSet<i32> = now.iter().map(|o| o.generation).collect();
        let mut owners: BTreeMap<&Unit, usize> = BTreeMap::new();
        for o in &now {
            for unit in &o.units {
                *owners.entry(unit).or_default() += 1;
            }
        }
        let counts: Vec<usize> = now.iter().map(|o| o.units.len()).collect();
        let complete = owners.len() == all_units().len() && owners.values().all(|n| *n == 1);
        let balanced = counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1;
        if generations.len() == 1 && !generations.contains(&-1) && complete && balanced {
            return (now.into_iter().map(|o| o.units).collect(), began.elapsed());
        }
        assert!(
            Instant::now() < deadline,
            "the workers did not settle: {now:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_share_units_evenly_and_only_what_must_move_moves() {
    let clusters = Clusters::shared();
    let bootstrap = clusters.target.bootstrap.as_str();
    let group = &Names::new().group("strait-workers-test");

    // Three workers: 3, 3 and 2 units.
    let w1 = start(bootstrap, group).await;
    let (alone, _) = settled(&[&w1]).await;
    assert_eq!(alone[0].len(), 8);
    let w2 = start(bootstrap, group).await;
    let w3 = start(bootstrap, group).await;
    let (three, took) = settled(&[&w1, &w2, &w3]).await;
    eprintln!("three workers settled in {took:?}: {three:?}");
    let mut sizes: Vec<usize> = three.iter().map(BTreeSet::len).collect();
    sizes.sort_unstable();
    assert_eq!(sizes, [2, 3, 3]);
    assert!(three[0].is_subset(&alone[0]));
    // Each worker runs units of both flows.
    for units in &three {
        let flows: BTreeSet<&str> = units.iter().map(|u| u.flow.as_str()).collect();
        assert_eq!(flows.len(), 2, "{units:?}");
    }

    // A fourth joins: two each, and the first three only gave units away.
    let w4 = start(bootstrap, group).await;
    let (four, took) = settled(&[&w1, &w2, &w3, &w4]).await;
    eprintln!("four workers settled in {took:?}: {four:?}");
    assert!(four.iter().all(|u| u.len() == 2), "{four:?}");
    for (before, after) in three.iter().zip(&four) {
        assert!(after.is_subset(before), "{before:?} -> {after:?}");
    }

    // w2 dies without leaving (a kill -9): the coordinator removes it after its session
    // timeout, and only its units move.
    w2.task.abort();
    let killed = Instant::now();
    let (after_kill, _) = settled(&[&w1, &w3, &w4]).await;
    let took = killed.elapsed();
    eprintln!("after w2 was killed, the others settled in {took:?}: {after_kill:?}");
    assert!(took >= SESSION - Duration::from_secs(1), "{took:?}");
    for (before, after) in [&four[0], &four[2], &four[3]].into_iter().zip(&after_kill) {
        assert!(before.is_subset(after), "{before:?} -> {after:?}");
    }
    let taken: BTreeSet<Unit> = after_kill.iter().flatten().cloned().collect();
    assert!(four[1].is_subset(&taken));

    // w4 stops: it leaves the group, so the others take its units well within a session
    // timeout, and it owns nothing.
    let mut w4 = w4;
    let stopping = Instant::now();
    w4.stop.take().unwrap().send(()).unwrap();
    (&mut w4.task).await.unwrap();
    assert!(w4.ownership.borrow().units.is_empty());
    let (after_leave, _) = settled(&[&w1, &w3]).await;
    let took = stopping.elapsed();
    eprintln!("after w4 left, the others settled in {took:?}: {after_leave:?}");
    assert!(took < SESSION, "{took:?}");
    assert!(after_kill[0].is_subset(&after_leave[0]));
    assert!(after_kill[1].is_subset(&after_leave[1]));
    assert_eq!(after_leave.iter().map(BTreeSet::len).sum::<usize>(), 8);

    for mut w in [w1, w3] {
        w.stop.take().unwrap().send(()).unwrap();
        (&mut w.task).await.unwrap();
    }
}

/// Static membership (`strait.workers.group.instance.id`): a process started with the
/// instance id of one still in the group takes its place at once, without waiting for a
/// session timeout; the one it replaced is refused and stops for good, rather than joining
/// again and pushing the new one out; a static member that stops does not leave, so its units
/// wait for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_worker_is_replaced_by_its_successor_at_once() {
    let clusters = Clusters::shared();
    let bootstrap = clusters.target.bootstrap.as_str();
    let group = &Names::new().group("strait-static-test");
    let a = start_as(bootstrap, group, Some("pod-a")).await;
    let b = start_as(bootstrap, group, Some("pod-b")).await;
    let (two, _) = settled(&[&a, &b]).await;
    eprintln!("two static workers: {two:?}");

    // pod-b "restarts" while the old process still runs (a zombie): the new one takes its
    // place well within a session timeout.
    let replacing = Instant::now();
    let b2 = start_as(bootstrap, group, Some("pod-b")).await;
    let (replaced, _) = settled(&[&a, &b2]).await;
    let took = replacing.elapsed();
    eprintln!("pod-b replaced in {took:?}: {replaced:?}");
    assert_eq!(replaced.iter().map(BTreeSet::len).sum::<usize>(), 8);
    // The old pod-b learns at its next heartbeat that it was replaced, owns nothing, and
    // stays out.
    let deadline = Instant::now() + SESSION * 2;
    while !b.task.is_finished() {
        assert!(Instant::now() < deadline, "the replaced worker still runs");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(b.ownership.borrow().units.is_empty());
    let (still, _) = settled(&[&a, &b2]).await;
    assert_eq!(still, replaced, "the new pod-b was pushed out");

    // A static member that stops keeps its place: nothing moves to pod-a before pod-b's
    // session ends.
    let mut b2 = b2;
    b2.stop.take().unwrap().send(()).unwrap();
    (&mut b2.task).await.unwrap();
    tokio::time::sleep(SESSION / 2).await;
    assert_eq!(
        a.ownership.borrow().units,
        still[0],
        "units moved before the session ended"
    );
    let (alone, _) = settled(&[&a]).await;
    assert_eq!(alone[0].len(), 8);

    let mut a = a;
    a.stop.take().unwrap().send(()).unwrap();
    (&mut a.task).await.unwrap();
}

/// A worker cut off from its group's coordinator (the target broker frozen with SIGSTOP: its
/// connections stay open and nothing answers, as in a network partition) gives its units up
/// within its session timeout: its lease lapses by the clock, so nothing it still runs can
/// write after the group may have handed its units to another worker. Before the lease, it kept
/// them until a heartbeat request timed out (30 s), and for as long as joins failed after that.
/// When the coordinator answers again, it joins again and owns the units under a new lease; the
/// old one stays revoked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_cut_off_from_its_coordinator_gives_its_units_up_within_its_session_timeout() {
    let clusters = Clusters::start();
    let bootstrap = clusters.target.bootstrap.as_str();
    let group = &Names::new().group("strait-workers-cut-off");
    let w = start(bootstrap, group).await;
    let (alone, _) = settled(&[&w]).await;
    assert_eq!(alone[0].len(), 8);
    let first = w.ownership.borrow().clone();
    assert!(first.lease.is_valid(), "{first:?}");

    let pid = clusters.target.pid.to_string();
    let signal = |which: &str| {
        let status = std::process::Command::new("kill")
            .args([which, &pid])
            .status()
            .unwrap();
        assert!(status.success());
    };
    signal("-STOP");
    let frozen = Instant::now();
    // The lease was last renewed by an answer to a request sent before the freeze: a session
    // timeout after it, it has lapsed whatever the machine's load.
    tokio::time::sleep(SESSION).await;
    assert!(
        !first.lease.is_valid(),
        "lease still valid {:?} after the freeze",
        frozen.elapsed()
    );
    // The worker noticed at the lease's end (a fifth of the session before it); two seconds
    // of slack for a loaded machine.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cut_off = w.ownership.borrow().clone();
    signal("-CONT");
    assert!(
        cut_off.units.is_empty(),
        "still owns {} units {:?} after the coordinator froze",
        cut_off.units.len(),
        frozen.elapsed()
    );
    assert!(first.lease.is_revoked());

    // Back: it joins again and owns every unit, under a new lease.
    let (back, took) = settled(&[&w]).await;
    eprintln!("owned every unit again {took:?} after the coordinator came back");
    assert_eq!(back[0].len(), 8);
    let now = w.ownership.borrow().clone();
    assert!(now.lease.is_valid());
    assert_ne!(now.lease, first.lease);
    assert!(!first.lease.is_valid(), "a revoked lease is never renewed");
    let mut w = w;
    w.stop.take().unwrap().send(()).unwrap();
    (&mut w.task).await.unwrap();
}
