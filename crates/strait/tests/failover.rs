//! `strait failover|failback plan|apply` and `strait offsets export|import`, run as the binary
//! against two real brokers, with librdkafka committing and reading the groups' offsets.
//!
//! Every planned offset is checked against a translation worked out here from the records
//! themselves (librdkafka reads both topics; a record's target offset is where its payload
//! landed), and every applied offset is read back on the other cluster by librdkafka.

mod running;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use running::{run_to_end, run_until_caught_up, write_flow_config, Finished};
use strait_core::offsets::plan::{Direction, FailoverPlan, GroupPlan, PartitionPlan};
use strait_testkit::{Clusters, Names, Rdk, TestRecord, Which};

/// Records produced to each partition before mirroring.
const SIZES: [i64; 2] = [60, 40];

/// One test's clusters, client, files and names.
struct Setup {
    clusters: Clusters,
    rdk: Rdk,
    config: PathBuf,
    names: Names,
    /// The source cluster's alias (`source<id>`).
    source_alias: String,
    /// The target cluster's alias (`target<id>`).
    target_alias: String,
    /// `source_alias->target_alias`.
    flow: String,
    /// The source topic, `orders-<id>`.
    topic: String,
    /// Its remote topic on the target.
    remote: String,
}

impl Setup {
    /// `orders` (2 partitions) on the source of `clusters` with `SIZES` records, mirrored, with
    /// names of this test's own.
    fn mirrored(clusters: Clusters) -> Setup {
        let setup = Setup::new(clusters);
        for (partition, n) in SIZES.iter().enumerate() {
            setup.produce_source(partition as i32, 0, *n);
        }
        setup.mirror();
        setup
    }

    /// `orders` (2 partitions, empty) on the source of `clusters` and the flow's config, with
    /// names of this test's own; nothing mirrored yet.
    fn new(clusters: Clusters) -> Setup {
        let names = Names::new();
        let (source_alias, target_alias) = (names.alias("source"), names.alias("target"));
        let flow = format!("{source_alias}->{target_alias}");
        let topic = names.topic("orders");
        let remote = format!("{source_alias}.{topic}");
        let rdk = Rdk::new();
        rdk.create_topic(&clusters.source.bootstrap, &topic, 2);
        let config = write_flow_config(
            &clusters,
            (&source_alias, &target_alias),
            "mm2.properties",
            &format!(
                "{flow}.topics = {topic}\n\
                 {flow}.groups = {groups}\n\
                 emit.checkpoints.enabled = false\n\
                 sync.group.offsets.enabled = false",
                groups = names.pattern()
            ),
        );
        Setup {
            clusters,
            rdk,
            config,
            names,
            source_alias,
            target_alias,
            flow,
            topic,
            remote,
        }
    }

    fn source(&self) -> &str {
        &self.clusters.source.bootstrap
    }

    fn target(&self) -> &str {
        &self.clusters.target.bootstrap
    }

    fn dir(&self) -> &Path {
        self.clusters.dir()
    }

    fn config(&self) -> &str {
        self.config.to_str().expect("utf-8 path")
    }

    /// This test's name for consumer group `base`.
    fn group(&self, base: &str) -> String {
        self.names.group(base)
    }

    /// Partition `partition` of the source topic in `group`'s plan.
    fn partition<'a>(&self, group: &'a GroupPlan, partition: i32) -> &'a PartitionPlan {
        group
            .partitions
            .iter()
            .find(|p| p.topic == self.topic && p.partition == partition)
            .unwrap_or_else(|| panic!("{}-{partition} not in group {}", self.topic, group.group))
    }

    /// Produces records `first..first + n` of `partition` to the source topic.
    fn produce_source(&self, partition: i32, first: i64, n: i64) {
        let records: Vec<TestRecord> = (first..first + n)
            .map(|i| record(partition, &format!("a-{partition}-{i}")))
            .collect();
        let acks = self
            .rdk
            .produce(self.source(), &self.topic, &records, "lz4");
        assert_eq!(acks.len(), records.len());
    }

    /// `strait run --until-caught-up`.
    fn mirror(&self) {
        let out = self.strait(&run_until_caught_up(self.config()));
        assert!(out.ok(), "strait run failed:\n{}", out.stderr);
    }

    /// Runs the strait binary with `args` (killed after 2 minutes).
    fn strait(&self, args: &[&str]) -> Finished {
        run_to_end(self.dir(), args, &[("RUST_LOG", "warn")])
    }

    /// `strait <command..> --config CONFIG --flow FLOW <extra..>`, which must succeed.
    fn on_flow(&self, command: &[&str], extra: &[&str]) -> Finished {
        let mut args = command.to_vec();
        args.extend(["--config", self.config(), "--flow", &self.flow]);
        args.extend_from_slice(extra);
        let out = self.strait(&args);
        assert!(
            out.ok(),
            "strait {} failed:\n{}",
            args.join(" "),
            out.both()
        );
        out
    }

    /// `strait <command> plan --out NAME` (`failover` or `failback`): the plan file's path and
    /// the run.
    fn plan_to(&self, command: &str, name: &str) -> (String, Finished) {
        let path = self.dir().join(name);
        let file = path.to_str().expect("utf-8 path").to_owned();
        let out = self.on_flow(&[command, "plan"], &["--out", &file]);
        (file, out)
    }

    /// Commits `offsets` of `topic` for `group` on `bootstrap`.
    fn commit(&self, bootstrap: &str, group: &str, topic: &str, offsets: &[(i32, i64)]) {
        self.rdk.commit(bootstrap, group, topic, offsets);
    }

    /// `group`'s committed offsets of `topic` partitions 0 and 1 on `bootstrap`.
    fn committed(&self, bootstrap: &str, group: &str, topic: &str) -> BTreeMap<i32, i64> {
        self.rdk.committed(bootstrap, group, topic, &[0, 1])
    }

    /// The translation worked out from the records: librdkafka reads `source_total` records
    /// of the source topic and `target_total` of the remote topic.
    fn positions(&self, source_total: usize, target_total: usize) -> Positions {
        let timeout = Duration::from_secs(30);
        let source = self
            .rdk
            .consume(self.source(), &self.topic, source_total, timeout);
        let target = self
            .rdk
            .consume(self.target(), &self.remote, target_total, timeout);
        let mut positions = Positions::default();
        for r in &target {
            let offset = r.offset.expect("consumed records have offsets");
            let value = r.value.clone().expect("every test record has a value");
            positions.target_at.insert((r.partition, offset), value);
            let end = positions.target_end.entry(r.partition).or_default();
            *end = (*end).max(offset + 1);
        }
        for r in &source {
            let offset = r.offset.expect("consumed records have offsets");
            let value = r.value.clone().expect("every test record has a value");
            positions
                .source_at
                .insert((r.partition, offset), value.clone());
            positions.source_of.insert((r.partition, value), offset);
        }
        for ((p, t), v) in &positions.target_at {
            if let Some(o) = positions.source_of.get(&(*p, v.clone())) {
                positions.landed.insert((*p, *o), *t);
            }
        }
        positions
    }
}

/// A record with `value` as key and value.
fn record(partition: i32, value: &str) -> TestRecord {
    TestRecord::new(partition, Some(value.as_bytes()), Some(value.as_bytes()))
}

/// The translation worked out from the records, not from strait's map.
#[derive(Default)]
struct Positions {
    /// (partition, source offset) -> payload.
    source_at: BTreeMap<(i32, i64), Vec<u8>>,
    /// (partition, payload) -> source offset.
    source_of: HashMap<(i32, Vec<u8>), i64>,
    /// (partition, target offset) -> payload.
    target_at: BTreeMap<(i32, i64), Vec<u8>>,
    /// (partition, source offset) -> target offset its payload landed at.
    landed: BTreeMap<(i32, i64), i64>,
    /// Per partition, one past the last target offset.
    target_end: BTreeMap<i32, i64>,
}

impl Positions {
    /// Where a consumer at source position `p` continues on the target: the target offset of
    /// the first mirrored record at or after `p`, else the end of what was mirrored.
    fn target_position(&self, partition: i32, p: i64) -> i64 {
        self.landed
            .range((partition, p)..(partition, i64::MAX))
            .next()
            .map(|(_, t)| *t)
            .unwrap_or_else(|| {
                self.landed
                    .range((partition, 0)..(partition, i64::MAX))
                    .next_back()
                    .map_or(0, |(_, t)| t + 1)
            })
    }

    /// Where a consumer at target position `q` continues on the source: the source offset of
    /// the first record at or after `q` on the target that came from the source, else one past
    /// the last that did.
    fn source_position(&self, partition: i32, q: i64) -> i64 {
        let from_source =
            |(&(p, _), v): (&(i32, i64), &Vec<u8>)| self.source_of.get(&(p, v.clone())).copied();
        self.target_at
            .range((partition, q)..(partition, i64::MAX))
            .find_map(from_source)
            .unwrap_or_else(|| {
                self.target_at
                    .range((partition, 0)..(partition, q))
                    .rev()
                    .find_map(from_source)
                    .map_or(0, |o| o + 1)
            })
    }

    /// Records on the target at or after `q` that did not come from the source.
    fn foreign_from(&self, partition: i32, q: i64) -> i64 {
        self.target_at
            .range((partition, q)..(partition, i64::MAX))
            .filter(|((p, _), v)| !self.source_of.contains_key(&(*p, (*v).clone())))
            .count() as i64
    }
}

fn group<'a>(plan: &'a FailoverPlan, name: &str) -> &'a GroupPlan {
    plan.groups
        .iter()
        .find(|g| g.group == name)
        .unwrap_or_else(|| panic!("group {name} not in the plan: {:#?}", plan.groups))
}

fn read_plan(path: &str) -> FailoverPlan {
    let text = std::fs::read_to_string(path).expect("plan file");
    FailoverPlan::from_json(&text).expect("a valid plan")
}

/// The outcome of `group` in an apply report (`--json`), and the refusal's kind if refused.
fn outcome(report: &serde_json::Value, group: &str) -> (String, Option<String>) {
    let g = report["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .find(|g| g["group"] == group)
        .unwrap_or_else(|| panic!("group {group} not in the report: {report:#}"));
    (
        g["outcome"]["outcome"].as_str().unwrap_or("").to_owned(),
        g["outcome"]["reason"]["kind"].as_str().map(str::to_owned),
    )
}

fn json(out: &Finished) -> serde_json::Value {
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\nstderr:\n{}", out.stdout, out.stderr))
}

fn offsets(pairs: &[(i32, i64)]) -> BTreeMap<i32, i64> {
    pairs.iter().copied().collect()
}

#[test]
fn failover_plan_is_exact_and_apply_writes_it_once_refusing_unsafe_groups() {
    let s = Setup::mirrored(Clusters::shared());
    let (a, b) = (s.source().to_owned(), s.target().to_owned());
    let (topic, remote) = (s.topic.as_str(), s.remote.as_str());
    let [audit, billing, busy, late, moved, rewound] =
        ["audit", "billing", "busy", "late", "moved", "rewound"].map(|g| s.group(g));
    let groups: [(&str, &[(i32, i64)]); 6] = [
        (&audit, &[(0, 60)]),
        (&billing, &[(0, 25), (1, 40)]),
        (&busy, &[(0, 10)]),
        (&late, &[(0, 3), (1, 45)]),
        (&moved, &[(1, 5)]),
        (&rewound, &[(0, 30)]),
    ];
    // 5 more records on A that the flow has not mirrored yet; "late" has read them.
    s.produce_source(1, SIZES[1], 5);
    for (name, committed) in groups {
        s.commit(&a, name, topic, committed);
    }
    // "busy" has a running consumer on B.
    let member = s.rdk.group_member(&b, &busy, remote);

    let positions = s.positions(105, 100);
    for (p, n) in SIZES.iter().enumerate() {
        for offset in 0..*n {
            // No gaps: source offset N landed at target offset N.
            assert_eq!(positions.landed.get(&(p as i32, offset)), Some(&offset));
        }
    }

    let (plan_file, out) = s.plan_to("failover", "failover.json");
    let plan_file = plan_file.as_str();
    eprintln!("--- strait failover plan (table) ---\n{}", out.stdout);
    let plan = read_plan(plan_file);
    assert_eq!(plan.direction, Direction::Failover);
    assert_eq!(plan.flow, s.flow);
    assert_eq!(plan.source.alias, s.source_alias);
    assert_eq!(plan.target.bootstrap_servers, vec![b.clone()]);
    // The plan names its clusters by id, not only by address.
    let (source_id, target_id) = (
        plan.source.cluster_id.clone().expect("the source's id"),
        plan.target.cluster_id.clone().expect("the target's id"),
    );
    assert_ne!(source_id, target_id);
    let names: Vec<&str> = plan.groups.iter().map(|g| g.group.as_str()).collect();
    assert_eq!(names, groups.map(|(n, _)| n));
    for (name, committed) in groups {
        let g = group(&plan, name);
        assert_eq!(g.partitions.len(), committed.len(), "{name}: {g:#?}");
        for &(p, offset) in committed {
            let pp = s.partition(g, p);
            assert_eq!(pp.remote_topic, remote);
            assert_eq!(pp.source_offset, Some(offset), "{name} p{p}");
            assert_eq!(
                pp.target_offset,
                Some(positions.target_position(p, offset)),
                "{name} p{p}"
            );
            assert_eq!(pp.duplicates, 0, "{name} p{p}");
            assert_eq!(pp.missing_ahead, 0, "{name} p{p}");
            assert_eq!(pp.committed_at_plan, None, "{name} p{p}");
            assert_eq!(pp.blocker, None, "{name} p{p}");
            if (name, p) == (late.as_str(), 1) {
                // Read on A up to 45, mirrored up to 40: B continues at 40, 5 records short.
                assert_eq!(pp.target_offset, Some(40));
                assert!(!pp.exact);
                assert_eq!(pp.unreplicated, 5);
            } else {
                assert!(pp.exact, "{name} p{p}: {pp:#?}");
                assert_eq!(pp.unreplicated, 0, "{name} p{p}");
                assert_eq!(pp.target_offset, Some(offset), "{name} p{p}");
            }
        }
        let blocked = g.blocker.is_some();
        assert_eq!(blocked, name == busy, "{name}: {:?}", g.blocker);
    }
    assert_eq!(
        plan.map
            .iter()
            .map(|m| (m.partition, m.source_end, m.target_end))
            .collect::<Vec<_>>(),
        vec![(0, 60, 60), (1, 40, 40)]
    );
    assert!(out
        .stdout
        .contains("5 records consumed on the source are not mirrored yet"));
    assert!(out.stdout.contains("blocked: group is active on target"));

    // --groups narrows; --json prints the same numbers.
    let either = format!("{billing}|{audit}");
    let out = s.on_flow(&["failover", "plan"], &["--groups", &either, "--json"]);
    eprintln!(
        "--- strait failover plan --groups '{either}' --json ---\n{}",
        out.stdout
    );
    let narrowed = FailoverPlan::from_json(&out.stdout).expect("plan JSON");
    let names: Vec<&str> = narrowed.groups.iter().map(|g| g.group.as_str()).collect();
    assert_eq!(names, [audit.as_str(), billing.as_str()]);
    assert_eq!(
        group(&narrowed, &billing).partitions,
        group(&plan, &billing).partitions
    );
    // A flow the config does not have is named with the ones it has.
    let out = s.strait(&[
        "failover",
        "plan",
        "--config",
        s.config(),
        "--flow",
        &format!("{}->{}", s.target_alias, s.source_alias),
    ]);
    assert!(!out.ok());
    assert!(
        out.stderr.contains(&format!("its flows are: {}", s.flow)),
        "{}",
        out.stderr
    );

    // Between plan and apply: "moved" gets an offset on B, "rewound" reads on on A, and the
    // flow mirrors the 5 records "late" had read.
    s.commit(&b, &moved, remote, &[(1, 3)]);
    s.commit(&a, &rewound, topic, &[(0, 35)]);
    s.mirror();

    let out = s.strait(&["failover", "apply", plan_file, "--dry-run"]);
    assert_eq!(out.code(), Some(1), "{}\n{}", out.stdout, out.stderr);
    eprintln!("--- strait failover apply --dry-run ---\n{}", out.stdout);
    assert!(out
        .stdout
        .contains(&format!("group {billing}: would apply (dry run)")));
    assert!(
        s.committed(&b, &billing, remote).is_empty(),
        "a dry run writes nothing"
    );

    // Without --config: the plan's bootstrap servers.
    let out = s.strait(&["failover", "apply", plan_file, "--json"]);
    assert_eq!(out.code(), Some(1), "{}\n{}", out.stdout, out.stderr);
    let report = json(&out);
    let refused = |kind: &str| ("refused".to_owned(), Some(kind.to_owned()));
    assert_eq!(outcome(&report, &audit), ("applied".into(), None));
    assert_eq!(outcome(&report, &billing), ("applied".into(), None));
    assert_eq!(outcome(&report, &busy), refused("active_on_destination"));
    assert_eq!(outcome(&report, &late), refused("stale_plan"));
    assert_eq!(outcome(&report, &moved), refused("moved_since_plan"));
    assert_eq!(outcome(&report, &rewound), refused("origin_moved"));
    assert_eq!(s.committed(&b, &audit, remote), offsets(&[(0, 60)]));
    assert_eq!(
        s.committed(&b, &billing, remote),
        offsets(&[(0, 25), (1, 40)])
    );
    assert_eq!(s.committed(&b, &moved, remote), offsets(&[(1, 3)]));
    assert!(s.committed(&b, &late, remote).is_empty());
    assert!(s.committed(&b, &rewound, remote).is_empty());
    assert!(s.committed(&b, &busy, remote).is_empty());

    // Twice is once: applied groups are already applied and nothing moves.
    drop(member);
    let out = s.strait(&["failover", "apply", plan_file, "--config", s.config()]);
    eprintln!("--- strait failover apply (second run) ---\n{}", out.stdout);
    assert_eq!(out.code(), Some(1), "{}\n{}", out.stdout, out.stderr);
    for line in [
        format!("group {billing}: already applied"),
        format!("group {audit}: already applied"),
        format!("group {late}: refused: stale plan"),
    ] {
        assert!(out.stdout.contains(&line), "{line}:\n{}", out.stdout);
    }
    assert!(
        out.stderr.contains("3 of 6 groups refused"),
        "{}",
        out.stderr
    );
    assert_eq!(
        s.committed(&b, &billing, remote),
        offsets(&[(0, 25), (1, 40)])
    );
    assert_eq!(s.committed(&b, &audit, remote), offsets(&[(0, 60)]));
    // "busy" stopped on B, so it went this time, to its planned offsets.
    assert_eq!(s.committed(&b, &busy, remote), offsets(&[(0, 10)]));

    // The same plan, as if made for another target (a config pointing elsewhere, a cluster
    // rebuilt): refused, nothing written. Before, it said "already applied".
    let mut elsewhere = read_plan(plan_file);
    elsewhere.target.cluster_id = Some("not-this-cluster".into());
    let elsewhere_file = s.dir().join("failover-elsewhere.json");
    std::fs::write(&elsewhere_file, elsewhere.to_json()).expect("write plan");
    let out = s.strait(&[
        "failover",
        "apply",
        elsewhere_file.to_str().expect("utf-8 path"),
        "--config",
        s.config(),
    ]);
    assert_ne!(out.code(), Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("not-this-cluster") && out.stderr.contains(&target_id),
        "the refusal names both ids: {}",
        out.stderr
    );
    assert!(!out.stdout.contains("already applied"), "{}", out.stdout);

    // Planned again, "late" is exact now that its records are mirrored.
    let out = s.on_flow(&["failover", "plan"], &["--groups", &late, "--json"]);
    let again = FailoverPlan::from_json(&out.stdout).expect("plan JSON");
    let late = s.partition(group(&again, &late), 1);
    assert_eq!(
        (late.target_offset, late.exact, late.unreplicated),
        (Some(45), true, 0)
    );
}

/// A partition whose only records are an aborted transaction (and its marker) is read to its
/// end and mirrored with no record to copy: its map has an extent and no segment, which the
/// map alone translates as "not mirrored". A group at its end is planned at the remote
/// partition's end, exactly and unblocked, and apply writes it there (the stale-plan check
/// translates it the same way again).
#[test]
fn a_partition_of_aborted_records_alone_is_planned_and_applied_at_its_remote_end() {
    let s = Setup::new(Clusters::shared());
    let (a, b) = (s.source().to_owned(), s.target().to_owned());
    let (topic, remote) = (s.topic.as_str(), s.remote.as_str());
    let billing = s.group("billing");
    s.produce_source(0, 0, 3);
    // Partition 1: one aborted record at 0, its marker at 1; nothing a consumer reads.
    s.rdk
        .produce_transactions(&a, topic, &[(vec![record(1, "aborted")], false)]);
    s.mirror();
    s.commit(&a, &billing, topic, &[(0, 3), (1, 2)]);

    let (plan_file, out) = s.plan_to("failover", &format!("aborted-{}.json", s.source_alias));
    eprintln!("--- strait failover plan (table) ---\n{}", out.stdout);
    let plan = read_plan(&plan_file);
    let g = group(&plan, &billing);
    assert_eq!(g.blocker, None, "{g:#?}");
    let planned = |p: i32| {
        let pp = s.partition(g, p);
        (
            pp.target_offset,
            pp.exact,
            pp.blocker.clone(),
            pp.note.clone(),
        )
    };
    assert_eq!(planned(0), (Some(3), true, None, String::new()), "{g:#?}");
    assert_eq!(planned(1), (Some(0), true, None, String::new()), "{g:#?}");

    let out = s.strait(&[
        "failover",
        "apply",
        &plan_file,
        "--config",
        s.config(),
        "--json",
    ]);
    let report = json(&out);
    assert_eq!(
        outcome(&report, &billing),
        ("applied".to_owned(), None),
        "{report:#}"
    );
    assert_eq!(
        s.committed(&b, &billing, remote),
        offsets(&[(0, 3), (1, 0)])
    );
}

#[test]
fn failback_plan_reads_the_map_backwards_and_counts_what_the_source_lacks() {
    let s = Setup::mirrored(Clusters::shared());
    let (a, b) = (s.source().to_owned(), s.target().to_owned());
    let (topic, remote) = (s.topic.as_str(), s.remote.as_str());
    let app = s.group("app");
    // A takes 5 more records on partition 1 that it has no time to send: A is lost.
    s.produce_source(1, SIZES[1], 5);
    s.commit(&a, &app, topic, &[(0, 30), (1, 40)]);
    let (failover_file, _) = s.plan_to("failover", "failover.json");
    let out = s.strait(&["failover", "apply", &failover_file]);
    assert!(out.ok(), "{}\n{}", out.stdout, out.stderr);
    assert_eq!(s.committed(&b, &app, remote), offsets(&[(0, 30), (1, 40)]));

    // After the failover, producers write to B directly and the group reads on there.
    let written_on_b: Vec<TestRecord> = (0..3)
        .map(|i| record(0, &format!("b-0-{i}")))
        .chain((0..7).map(|i| record(1, &format!("b-1-{i}"))))
        .collect();
    s.rdk.produce(&b, remote, &written_on_b, "none");
    s.commit(&b, &app, remote, &[(0, 50), (1, 44)]);
    // A comes back and the flow sends its 5 late records, after B's own.
    s.mirror();
    let positions = s.positions(105, 115);
    assert_eq!(
        (40..45)
            .map(|o| positions.landed[&(1, o)])
            .collect::<Vec<_>>(),
        (47..52).collect::<Vec<_>>()
    );

    let (plan_file, out) = s.plan_to("failback", "failback.json");
    let plan_file = plan_file.as_str();
    eprintln!("--- strait failback plan (table) ---\n{}", out.stdout);
    let plan = read_plan(plan_file);
    assert_eq!(plan.direction, Direction::Failback);
    let app_plan = group(&plan, &app);
    assert_eq!(app_plan.blocker, None);
    let p0 = s.partition(app_plan, 0);
    assert_eq!(p0.target_offset, Some(50));
    assert_eq!(p0.source_offset, Some(positions.source_position(0, 50)));
    assert_eq!(p0.source_offset, Some(50));
    assert!(p0.exact);
    assert_eq!(p0.unreplicated, 0);
    // The 3 records written on B are ahead of the group, and A lacks them.
    assert_eq!(p0.missing_ahead, positions.foreign_from(0, 50));
    assert_eq!(p0.missing_ahead, 3);
    assert_eq!(p0.committed_at_plan, Some(30));
    let p1 = s.partition(app_plan, 1);
    assert_eq!(p1.target_offset, Some(44));
    // Everything from A up to 40 was read, and 4 of the 7 records written on B; A's 5 late
    // records, mirrored after B's, are next on A.
    assert_eq!(p1.source_offset, Some(positions.source_position(1, 44)));
    assert_eq!(p1.source_offset, Some(40));
    assert!(!p1.exact);
    assert_eq!(p1.unreplicated, 4);
    assert_eq!(p1.missing_ahead, positions.foreign_from(1, 44));
    assert_eq!(p1.missing_ahead, 3);
    assert_eq!(p1.committed_at_plan, Some(40));
    let needed = format!("a {}->{} flow is needed", s.target_alias, s.source_alias);
    assert!(p1.note.contains(&needed), "{}", p1.note);
    assert!(out.stdout.contains(&needed));

    let out = s.strait(&["failover", "apply", plan_file]);
    assert!(!out.ok());
    assert!(
        out.stderr.contains("strait failback apply"),
        "{}",
        out.stderr
    );

    let out = s.strait(&["failback", "apply", plan_file, "--config", s.config()]);
    eprintln!("--- strait failback apply ---\n{}", out.stdout);
    assert!(out.ok(), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(&format!("group {app}: applied")),
        "{}",
        out.stdout
    );
    assert_eq!(s.committed(&a, &app, topic), offsets(&[(0, 50), (1, 40)]));

    let out = s.strait(&["failback", "apply", plan_file, "--json"]);
    assert!(out.ok(), "{}\n{}", out.stdout, out.stderr);
    assert_eq!(outcome(&json(&out), &app), ("already_applied".into(), None));
    assert_eq!(s.committed(&a, &app, topic), offsets(&[(0, 50), (1, 40)]));
}

#[test]
fn failover_apply_goes_ahead_when_the_source_cluster_is_lost() {
    // It kills the source broker: a pair of its own, not the shared one.
    let mut s = Setup::mirrored(Clusters::start());
    let (a, b) = (s.source().to_owned(), s.target().to_owned());
    let app = s.group("app");
    s.commit(&a, &app, &s.topic, &[(0, 17), (1, 40)]);
    let (plan_file, _) = s.plan_to("failover", "failover.json");
    let plan_file = plan_file.as_str();

    s.clusters.kill_broker(Which::Source);
    let started = Instant::now();
    let out = s.strait(&["failover", "apply", plan_file]);
    assert!(out.ok(), "{}\n{}", out.stdout, out.stderr);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "a lost source must not hold the failover up: {:?}",
        started.elapsed()
    );
    assert!(
        out.stdout
            .contains(&format!("origin cluster {} did not answer", s.source_alias)),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!("group {app}: applied")),
        "{}",
        out.stdout
    );
    assert_eq!(
        s.committed(&b, &app, &s.remote),
        offsets(&[(0, 17), (1, 40)])
    );
}

/// `strait failover check` as a script uses it: exit 0 when everything on the source is on the
/// target (no groups to carry); 3 once the source holds records the flow has not mirrored (the
/// partition and its count named, in the table and in JSON); 4 when the source does not answer
/// (the config pointed at a port nothing listens on), saying it cannot tell.
#[test]
fn failover_check_exits_by_what_a_failover_now_would_leave_behind() {
    let s = Setup::mirrored(Clusters::shared());
    let out = s.strait(&[
        "failover",
        "check",
        "--config",
        s.config(),
        "--flow",
        &s.flow,
    ]);
    assert_eq!(out.code(), Some(0), "{}", out.both());
    assert!(
        out.stdout
            .contains("every record on the source is on the target"),
        "{}",
        out.both()
    );

    s.produce_source(1, SIZES[1], 5);
    let args = [
        "failover",
        "check",
        "--config",
        s.config(),
        "--flow",
        &s.flow,
    ];
    let out = s.strait(&[&args[..], &["--within", "0"]].concat());
    assert_eq!(out.code(), Some(3), "{}", out.both());
    assert!(out.stdout.contains("NOT READY"), "{}", out.both());
    assert!(
        out.stdout
            .contains("5 records on the source not yet on the target"),
        "{}",
        out.both()
    );
    let out = s.strait(&[&args[..], &["--within", "0", "--json"]].concat());
    assert_eq!(out.code(), Some(3), "{}", out.both());
    let answer: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(answer[0]["records_at_risk"], 5, "{answer}");
    assert_eq!(answer[0]["partitions"][0]["partition"], 1, "{answer}");
    assert_eq!(answer[0]["ready"], false, "{answer}");

    let text = std::fs::read_to_string(s.config()).unwrap();
    let silent = s.dir().join("silent-source.properties");
    std::fs::write(&silent, text.replace(s.source(), "127.0.0.1:1")).unwrap();
    let silent = silent.to_str().unwrap();
    let out = s.strait(&["failover", "check", "--config", silent, "--flow", &s.flow]);
    assert_eq!(out.code(), Some(4), "{}", out.both());
    assert!(out.stdout.contains("CANNOT TELL"), "{}", out.both());
}

#[test]
fn offsets_exported_to_csv_import_to_the_same_offsets() {
    let s = Setup::mirrored(Clusters::shared());
    let (a, b) = (s.source().to_owned(), s.target().to_owned());
    let (topic, remote) = (s.topic.as_str(), s.remote.as_str());
    let [g1, g2, g3] = ["g1", "g2", "g3"].map(|g| s.group(g));
    s.commit(&a, &g1, topic, &[(0, 12), (1, 7)]);
    s.commit(&a, &g2, topic, &[(0, 60)]);
    s.commit(&a, &g3, topic, &[(0, 20)]);
    // g3 is further on B already: importing would move it back.
    s.commit(&b, &g3, remote, &[(0, 55)]);
    let positions = s.positions(100, 100);

    let csv_path = s.dir().join("offsets.csv");
    let csv_file = csv_path.to_str().expect("utf-8 path");
    s.on_flow(
        &["offsets", "export"],
        &["--format", "csv", "--out", csv_file],
    );
    let text = std::fs::read_to_string(&csv_path).expect("csv");
    eprintln!("--- strait offsets export --format csv ---\n{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "header and 4 rows:\n{text}");
    assert!(lines[0].starts_with(
        "flow,direction,group,topic,partition,remote_topic,source_offset,target_offset,exact"
    ));
    let out = s.on_flow(&["offsets", "export"], &[]);
    let exported = FailoverPlan::from_json(&out.stdout).expect("JSON export is a plan");
    let json_path = s.dir().join("offsets.json");
    std::fs::write(&json_path, &out.stdout).expect("write json");

    let out = s.strait(&[
        "offsets",
        "import",
        csv_file,
        "--config",
        s.config(),
        "--json",
    ]);
    assert_eq!(out.code(), Some(1), "{}\n{}", out.stdout, out.stderr);
    let report = json(&out);
    assert_eq!(outcome(&report, &g1), ("applied".into(), None));
    assert_eq!(outcome(&report, &g2), ("applied".into(), None));
    assert_eq!(
        outcome(&report, &g3),
        ("refused".into(), Some("would_move_back".into()))
    );
    for (name, committed) in [(&g1, &[(0, 12), (1, 7)][..]), (&g2, &[(0, 60)])] {
        let expected: BTreeMap<i32, i64> = committed
            .iter()
            .map(|&(p, o)| (p, positions.target_position(p, o)))
            .collect();
        assert_eq!(s.committed(&b, name, remote), expected, "{name}");
        // The same offsets as the JSON export (a failover plan) has.
        let planned: BTreeMap<i32, i64> = group(&exported, name)
            .partitions
            .iter()
            .map(|p| (p.partition, p.target_offset.expect("planned")))
            .collect();
        assert_eq!(planned, expected, "{name}");
    }
    assert_eq!(s.committed(&b, &g3, remote), offsets(&[(0, 55)]));

    // Importing again, from either file, changes nothing.
    for file in [csv_file, json_path.to_str().expect("utf-8 path")] {
        let out = s.strait(&["offsets", "import", file, "--config", s.config(), "--json"]);
        let report = json(&out);
        assert_eq!(
            outcome(&report, &g1),
            ("already_applied".into(), None),
            "{file}"
        );
        assert_eq!(
            outcome(&report, &g2),
            ("already_applied".into(), None),
            "{file}"
        );
    }
    assert_eq!(s.committed(&b, &g1, remote), offsets(&[(0, 12), (1, 7)]));
}
