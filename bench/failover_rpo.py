#!/usr/bin/env python3
"""The day the source dies: how much of each consumer group's consumption a failover made from
the target alone has it read twice, or never, with strait and with MirrorMaker 2.

A steady producer writes `rpo` (P partitions) on the source; every record's value carries its
id, and the producer keeps each acknowledged record's (partition, offset, id), because the
source is gone when the scoring starts. N consumer groups commit, every second, a position a
little behind each partition's end (a random lag of up to half a second of data per group), as
consumers committing every second do. Three mirrors copy the topic to the target, each under
aliases of its own: strait (`strait run`, its defaults: positions read every second), and Kafka's
MM2 in dedicated mode twice, with its default `emit.checkpoints.interval.seconds` (60) and with
1 s. After a warm-up the group commits stop and, at once, the source broker is killed with
SIGKILL.

Then, from the target alone, each group's position is what a failover would use: strait's
`failover plan` (made from its checkpoints, the source not answering) and MM2's last checkpoint
(what `RemoteClusterUtils.translateOffsets` and MM2's group sync give). The true position of a
group whose last commit on the source was at p is the target offset of the first record at or
after p (by id) that the target holds, or the target's end if it holds none (drill_mm2.truth).
A position before it has the group read records twice; after it, never read records. Records
acknowledged on the source that the target never got are counted apart (the mirror's lag at the
kill). Seconds are records divided by the partition's produce rate.
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from drill_mm2 import id_of, read_all, read_checkpoints, truth, value_of, write_config  # noqa: E402

TOPIC = "rpo"
GROUP_PREFIX = "rpo-"
# (name, source alias, target alias, extra lines); strait first.
MIRRORS = [
    ("strait", "s", "st", []),
    ("MM2 (60 s)", "m", "tm", []),
    ("MM2 (1 s)", "n", "tn", ["emit.checkpoints.interval.seconds = 1"]),
]


def log(msg):
    print(f"failover-rpo: {msg}", file=sys.stderr, flush=True)


class Load(threading.Thread):
    """Writes `rate` records a second, round robin over the partitions, until stopped."""

    def __init__(self, bootstrap, partitions, rate):
        super().__init__(daemon=True)
        self.bootstrap, self.partitions, self.rate = bootstrap, partitions, rate
        self.lock = threading.Lock()
        self.acked = {p: [] for p in range(partitions)}
        self.ends = {p: 0 for p in range(partitions)}
        self.stopped = threading.Event()

    def delivered(self, err, msg):
        if err is None:
            with self.lock:
                self.acked[msg.partition()].append((msg.offset(), id_of(msg.value())))
                self.ends[msg.partition()] = max(self.ends[msg.partition()], msg.offset() + 1)

    def snapshot(self):
        with self.lock:
            return dict(self.ends)

    def run(self):
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "acks": "all",
                             "enable.idempotence": True, "message.timeout.ms": 5000})
        started, next_id = time.time(), 0
        while not self.stopped.is_set():
            due = int((time.time() - started) * self.rate)
            while next_id < due:
                producer.produce(TOPIC, value=value_of(next_id), partition=next_id % self.partitions,
                                 on_delivery=self.delivered)
                next_id += 1
            producer.poll(0.01)
        producer.flush(6)


class Groups(threading.Thread):
    """Commits, every second, each group's position: each partition's end minus its lag."""

    # Admin clients committing side by side: one client's requests go one after another, and
    # a thousand groups a second need several.
    CLIENTS = 16

    def __init__(self, bootstrap, n, partitions, load, max_lag):
        super().__init__(daemon=True)
        rng = random.Random(11)
        self.admins = [AdminClient({"bootstrap.servers": bootstrap}) for _ in range(self.CLIENTS)]
        self.names = [f"{GROUP_PREFIX}{i:04d}" for i in range(n)]
        self.lags = {g: rng.randint(0, max_lag) for g in self.names}
        self.partitions, self.load = partitions, load
        self.committed = {}
        self.rounds = 0
        self.stopped = threading.Event()

    def commit_round(self):
        ends = self.load.snapshot()
        pending = []
        for i, g in enumerate(self.names):
            tps = [TopicPartition(TOPIC, p, max(0, ends[p] - self.lags[g])) for p in range(self.partitions)]
            admin = self.admins[i % len(self.admins)]
            futures = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(g, tps)])
            pending.append((g, tps, futures[g]))
        for g, tps, future in pending:
            future.result(30)
            for tp in tps:
                self.committed[(g, tp.partition)] = tp.offset
        self.rounds += 1

    def run(self):
        while not self.stopped.is_set():
            started = time.time()
            self.commit_round()
            self.stopped.wait(max(0.0, 1.0 - (time.time() - started)))


def mirror_config(work, name, src, tgt, source, target, extra, topic=TOPIC, groups=GROUP_PREFIX):
    """An MM2 file of one flow `src->tgt` of `topic` and the groups named `groups...`; MM2's
    dedicated-mode keys too unless `name` is strait's."""
    path = work / f"{src}-{tgt}.properties"
    lines = [
        f"clusters = {src}, {tgt}",
        f"{src}.bootstrap.servers = {source}",
        f"{tgt}.bootstrap.servers = {target}",
        f"{src}->{tgt}.enabled = true",
        f"{src}->{tgt}.topics = {topic}",
        f"{src}->{tgt}.groups = {groups}.*",
        "sync.group.offsets.enabled = false",
        "replication.factor = 1",
        "checkpoints.topic.replication.factor = 1",
        "heartbeats.topic.replication.factor = 1",
        "offset-syncs.topic.replication.factor = 1",
    ] + extra
    if not name.startswith("strait"):
        lines += [
            f"{tgt}->{src}.enabled = false",
            f"{tgt}->{src}.emit.heartbeats.enabled = false",
            "offset.storage.replication.factor = 1",
            "status.storage.replication.factor = 1",
            "config.storage.replication.factor = 1",
            "sync.topic.acls.enabled = false",
        ]
    write_config(path, lines)
    return path


def start_mirror(args, work, name, src, tgt, extra, **names):
    """Starts `name` (strait, else MM2 in dedicated mode) on its own file; `names`: the
    topic and groups of `mirror_config`."""
    cfg = mirror_config(work, name, src, tgt, args.source, args.target, extra, **names)
    out = open(work / f"{src}-{tgt}.log", "w")
    if name.startswith("strait"):
        cmd = [args.strait, "run", "--config", str(cfg), "--listen", "off"]
        env = dict(os.environ, RUST_LOG="info", NO_COLOR="1")
    else:
        cmd = [args.java, "-Xms256M", "-Xmx1G",
               f"-Dlog4j2.configurationFile={Path(__file__).resolve().parent.parent / 'scripts/kafka/log4j2.properties'}",
               "-cp", args.mm2_classpath, "org.apache.kafka.connect.mirror.MirrorMaker", str(cfg),
               "--clusters", tgt]
        env = dict(os.environ)
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    return proc, cfg


def stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


def strait_plan(args, cfg):
    """{(group, partition): target offset} of `strait failover plan`, the source not answering."""
    done = subprocess.run([args.strait, "failover", "plan", "--config", str(cfg), "--flow", "s->st", "--json"],
                          capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise SystemExit(f"strait failover plan failed:\n{done.stderr}")
    plan = json.loads(done.stdout)
    out = {}
    for g in plan["groups"]:
        for p in g["partitions"]:
            if p.get("target_offset") is not None:
                out[(g["group"], p["partition"])] = {"downstream": p["target_offset"]}
    return out


def score(name, positions, planned, true_positions, per_second, never_mirrored):
    """Per group: records (and seconds) read twice and never read, summed over partitions."""
    groups = {}
    missing = 0
    for (group, p), pos in positions.items():
        row = groups.setdefault(group, {"twice": 0, "never": 0, "twice_s": 0.0, "never_s": 0.0})
        got = planned.get((group, p))
        want = true_positions[(group, p)]
        if got is None:
            # No checkpoint: the group starts where auto.offset.reset says (earliest): it reads
            # the whole partition again.
            missing += 1
            got = {"downstream": 0}
        twice = max(0, want - got["downstream"])
        never = max(0, got["downstream"] - want)
        row["twice"] += twice
        row["never"] += never
        row["twice_s"] = max(row["twice_s"], twice / per_second)
        row["never_s"] = max(row["never_s"], never / per_second)

    def pct(values, q):
        values = sorted(values)
        return values[min(len(values) - 1, int(round(q * (len(values) - 1))))] if values else 0

    twice = [g["twice"] for g in groups.values()]
    twice_s = [g["twice_s"] for g in groups.values()]
    never = [g["never"] for g in groups.values()]
    return {
        "mirror": name,
        "groups": len(groups),
        "missing_checkpoints": missing,
        "groups_reading_twice": sum(1 for t in twice if t > 0),
        "read_twice_records": {"p50": pct(twice, 0.5), "p99": pct(twice, 0.99), "max": max(twice, default=0),
                               "total": sum(twice)},
        "read_twice_seconds": {"p50": round(pct(twice_s, 0.5), 2), "p99": round(pct(twice_s, 0.99), 2),
                               "max": round(max(twice_s, default=0), 2)},
        "never_read_records": {"total": sum(never), "max": max(never, default=0)},
        "never_mirrored_records": never_mirrored,
    }


def table(result):
    lines = [
        f"{result['groups']} groups committing every second, {result['rate']} records/s over "
        f"{result['partitions']} partitions, source killed (SIGKILL) after {result['warmup_s']} s "
        f"({result['commit_rounds']} commit rounds):",
        "",
        "| mirror | groups reading twice | read twice per group, p50 / p99 / max (records) | "
        "p50 / p99 / max (seconds) | never read | never mirrored | groups without a checkpoint |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["mirrors"]:
        t, s = r["read_twice_records"], r["read_twice_seconds"]
        lines.append(
            f"| {r['mirror']} | {r['groups_reading_twice']} of {r['groups']} | {t['p50']:,} / {t['p99']:,} / "
            f"{t['max']:,} | {s['p50']} / {s['p99']} / {s['max']} | {r['never_read_records']['total']:,} "
            f"| {r['never_mirrored_records']:,} | {r['missing_checkpoints']} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--strait", required=True)
    ap.add_argument("--mm2-classpath", required=True)
    ap.add_argument("--java", default="java")
    ap.add_argument("--source", required=True)
    ap.add_argument("--source-pid", type=int, required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rate", type=int, default=400, help="records a second, all partitions")
    ap.add_argument("--warmup", type=int, default=90, help="seconds the mirrors run before the kill")
    ap.add_argument("--out", help="also write the JSON here")
    args = ap.parse_args()
    work = Path(args.work)
    per_second = args.rate / args.partitions

    admin = AdminClient({"bootstrap.servers": args.source})
    admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])[TOPIC].result()
    load = Load(args.source, args.partitions, args.rate)
    load.start()
    time.sleep(2)
    groups = Groups(args.source, args.groups, args.partitions, load, max_lag=int(per_second / 2))
    # The groups exist before the mirrors start: MM2 looks for groups every 10 minutes.
    groups.commit_round()
    groups.start()
    procs = []
    for name, src, tgt, extra in MIRRORS:
        procs.append((name, src, tgt) + start_mirror(args, work, name, src, tgt, extra))
    log(f"{args.groups} groups commit every second; {len(procs)} mirrors run; the source dies in {args.warmup} s")
    time.sleep(args.warmup)

    groups.stopped.set()
    groups.join(30)
    os.kill(args.source_pid, signal.SIGKILL)
    killed = time.time()
    load.stopped.set()
    positions = dict(groups.committed)
    log(f"source killed after {groups.rounds} commit rounds")
    time.sleep(5)
    for _name, _src, _tgt, proc, _cfg in procs:
        stop(proc)
    load.join(10)
    acked = {p: sorted(v) for p, v in load.acked.items()}

    results = []
    for name, src, tgt, _proc, cfg in procs:
        target = read_all(args.target, f"{src}.{TOPIC}", list(range(args.partitions)))
        on_target = {i for recs in target.values() for _, i in recs}
        never_mirrored = sum(1 for recs in acked.values() for _, i in recs if i not in on_target)
        planned = strait_plan(args, cfg) if name == "strait" else read_checkpoints(args.target, src, GROUP_PREFIX)
        true_positions = truth(acked, target, positions)
        results.append(score(name, positions, planned, true_positions, per_second, never_mirrored))
        log(f"{name}: scored")
    result = {
        "groups": args.groups,
        "partitions": args.partitions,
        "rate": args.rate,
        "warmup_s": args.warmup,
        "commit_rounds": groups.rounds,
        "scored_s_after_kill": round(time.time() - killed, 1),
        "mirrors": results,
    }
    line = json.dumps(result)
    if args.out:
        Path(args.out).write_text(line + "\n")
    print(line)
    print(table(result), file=sys.stderr)


if __name__ == "__main__":
    main()
