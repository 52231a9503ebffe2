#!/usr/bin/env python3
"""How long a consumer group's commit takes to reach the target's checkpoints, at the head of a
live partition, for strait with several `tasks.max` (with its workers and without) and for
Kafka's MirrorMaker 2 at a 1 s checkpoint interval, each alone in the same run.

A steady producer writes `cap` (P partitions) on the source. G consumer groups commit about
every second (0.5 to 1.5 s apart, at a random phase to the mirror's own cycle), each at every
partition's end as the producer's acknowledgements give it (the head of a
live partition: the record before it was written a moment ago). A reader follows the mirror's
checkpoints topic on the target (`<source alias>.checkpoints.internal`, MM2's format) from its
end and notes when each checkpoint arrives. A commit (group, partition, offset o at time t) is
captured when the first checkpoint of that group and partition with an upstream offset of o or
more arrives: its latency is that arrival time minus t. Commits still not captured when the
window ends count as not captured (reported apart, never as a latency). Each mirror runs alone,
with aliases of its own, for a warm-up then a measured window; latencies are of commits made in
the window. Prints a Markdown table; asserts nothing.
"""

import argparse
import json
import random
import struct
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import (Consumer, ConsumerGroupTopicPartitions, KafkaError, Producer,
                             TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from drill_mm2 import read_string  # noqa: E402
from failover_rpo import start_mirror, stop  # noqa: E402

TOPIC = "cap"
GROUP_PREFIX = "cap-"


def log(msg):
    print(f"capture-latency: {msg}", file=sys.stderr, flush=True)


class Load(threading.Thread):
    """Writes `rate` records a second, round robin over the partitions; knows each partition's
    acknowledged end."""

    def __init__(self, bootstrap, partitions, rate):
        super().__init__(daemon=True)
        self.bootstrap, self.partitions, self.rate = bootstrap, partitions, rate
        self.lock = threading.Lock()
        self.ends = {p: 0 for p in range(partitions)}
        self.stopped = threading.Event()

    def delivered(self, err, msg):
        if err is None:
            with self.lock:
                self.ends[msg.partition()] = max(self.ends[msg.partition()], msg.offset() + 1)

    def snapshot(self):
        with self.lock:
            return dict(self.ends)

    def run(self):
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "acks": "all",
                             "enable.idempotence": True})
        started, n = time.time(), 0
        while not self.stopped.is_set():
            due = int((time.time() - started) * self.rate)
            while n < due:
                producer.produce(TOPIC, value=b"v%d" % n, partition=n % self.partitions,
                                 on_delivery=self.delivered)
                n += 1
            producer.poll(0.01)
        producer.flush(10)


class Groups(threading.Thread):
    """Every second, each group commits every partition's acknowledged end; keeps
    (group, partition, offset, time) of each commit."""

    def __init__(self, bootstrap, names, partitions, load):
        super().__init__(daemon=True)
        self.admins = [AdminClient({"bootstrap.servers": bootstrap}) for _ in range(4)]
        self.names, self.partitions, self.load = names, partitions, load
        self.lock = threading.Lock()
        self.commits = []
        self.stopped = threading.Event()
        self.rng = random.Random(7)

    def take(self):
        with self.lock:
            out, self.commits = self.commits, []
        return out

    def run(self):
        while not self.stopped.is_set():
            started = time.time()
            ends = self.load.snapshot()
            pending = []
            for i, g in enumerate(self.names):
                tps = [TopicPartition(TOPIC, p, ends[p]) for p in range(self.partitions) if ends[p] > 0]
                if not tps:
                    continue
                futures = self.admins[i % len(self.admins)].alter_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(g, tps)])
                pending.append((g, tps, futures[g]))
            for g, tps, future in pending:
                try:
                    future.result(30)
                except Exception as e:  # a refused commit is no sample
                    log(f"commit of {g} failed: {e}")
                    continue
                at = time.time()
                with self.lock:
                    self.commits.extend((g, tp.partition, tp.offset, at) for tp in tps)
            # About a second apart, at a random phase: commits in step with the mirror's pass
            # (every second too) would all see the same part of its cycle.
            self.stopped.wait(max(0.0, self.rng.uniform(0.5, 1.5) - (time.time() - started)))


class Checkpoints(threading.Thread):
    """Follows `<alias>.checkpoints.internal` on the target from its end; keeps, per
    (group, partition), the arrivals (time, upstream offset) of this bench's groups."""

    def __init__(self, bootstrap, alias):
        super().__init__(daemon=True)
        self.topic = f"{alias}.checkpoints.internal"
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"cap-reader-{alias}",
                                  "enable.auto.commit": False, "fetch.wait.max.ms": 50,
                                  "topic.metadata.refresh.interval.ms": 1000})
        self.lock = threading.Lock()
        self.arrivals = {}
        self.stopped = threading.Event()

    def run(self):
        assigned = False
        while not self.stopped.is_set():
            if not assigned:
                md = self.consumer.list_topics(self.topic, timeout=5)
                t = md.topics.get(self.topic)
                if t is None or t.error is not None:
                    time.sleep(0.5)
                    continue
                self.consumer.assign([TopicPartition(self.topic, p, 0) for p in t.partitions])
                assigned = True
            for m in self.consumer.consume(1000, 0.2):
                if m.error():
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        log(f"reading {self.topic}: {m.error()}")
                    continue
                at = time.time()
                key, value = m.key(), m.value()
                group, i = read_string(key, 0)
                _remote, i = read_string(key, i)
                (partition,) = struct.unpack_from(">i", key, i)
                _version, upstream, _downstream = struct.unpack_from(">hqq", value, 0)
                if group.startswith(GROUP_PREFIX):
                    with self.lock:
                        self.arrivals.setdefault((group, partition), []).append((at, upstream))
        self.consumer.close()

    def snapshot(self):
        with self.lock:
            return {k: list(v) for k, v in self.arrivals.items()}


def latencies(commits, arrivals):
    """Per commit, seconds until the first checkpoint at or past it arrived after it; and how
    many never were captured."""
    out, missed = [], 0
    for g, p, offset, at in commits:
        seen = [t for t, upstream in arrivals.get((g, p), []) if upstream >= offset and t >= at]
        if seen:
            out.append(min(seen) - at)
        else:
            missed += 1
    return out, missed


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))] if values else None


def measure(args, work, name, src, tgt, extra, load, names):
    log(f"{name}: starting ({src}->{tgt})")
    reader = Checkpoints(args.target, src)
    reader.start()
    proc, _ = start_mirror(args, work, name, src, tgt, extra, topic=TOPIC, groups=GROUP_PREFIX)
    groups = Groups(args.source, names, args.partitions, load)
    groups.start()
    time.sleep(args.warmup)
    groups.take()
    time.sleep(args.window)
    commits = groups.take()
    groups.stopped.set()
    groups.join()
    # Commits at the window's end get the same chance to be captured as the others.
    time.sleep(args.grace)
    arrivals = reader.snapshot()
    reader.stopped.set()
    reader.join()
    alive = proc.poll() is None
    stop(proc)
    got, missed = latencies(commits, arrivals)
    row = {"mirror": name, "commits": len(commits), "captured": len(got), "not_captured": missed,
           "p50": pct(got, 0.5), "p90": pct(got, 0.9), "p99": pct(got, 0.99),
           "max": max(got) if got else None, "mirror_alive_at_end": alive}
    log(f"{name}: {json.dumps(row)}")
    return row


def table(result):
    def s(v):
        return "-" if v is None else f"{v:.2f}"

    lines = [
        f"{result['groups']} groups committing every partition's end about every second, "
        f"{result['rate']} records/s over {result['partitions']} partitions; each mirror alone, "
        f"{result['warmup_s']} s warm-up, {result['window_s']} s measured, "
        f"{result['grace_s']} s more for the last commits:",
        "",
        "| mirror | commits | captured | not captured | p50 (s) | p90 (s) | p99 (s) | max (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["mirrors"]:
        lines.append(f"| {r['mirror']} | {r['commits']:,} | {r['captured']:,} | {r['not_captured']:,} | "
                     f"{s(r['p50'])} | {s(r['p90'])} | {s(r['p99'])} | {s(r['max'])} |")
    return "\n".join(lines)


# (name, source alias, target alias, extra lines)
MIRRORS = {
    "strait-1": ("strait, tasks.max = 1 (workers, the default)", "sa", "ta", []),
    "strait-2": ("strait, tasks.max = 2", "sb", "tb", ["tasks.max = 2"]),
    "strait-4": ("strait, tasks.max = 4", "sc", "tc", ["tasks.max = 4"]),
    "strait-noworkers": ("strait, strait.workers.enabled = false", "sd", "td",
                         ["strait.workers.enabled = false"]),
    "mm2-1s": ("MM2, emit.checkpoints.interval.seconds = 1, tasks.max = 2", "me", "te",
               ["emit.checkpoints.interval.seconds = 1", "refresh.groups.interval.seconds = 1",
                "tasks.max = 2"]),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--strait", required=True)
    ap.add_argument("--mm2-classpath", required=True)
    ap.add_argument("--java", default="java")
    ap.add_argument("--source", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--groups", type=int, default=20)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--rate", type=int, default=400, help="records a second, all partitions")
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--window", type=int, default=60)
    ap.add_argument("--grace", type=int, default=10)
    ap.add_argument("--runs", default="strait-1,strait-2,strait-4,strait-noworkers,mm2-1s")
    ap.add_argument("--out")
    args = ap.parse_args()
    work = Path(args.work)
    runs = [r for r in args.runs.split(",") if r]
    for r in runs:
        if r not in MIRRORS:
            raise SystemExit(f"unknown run {r}: one of {', '.join(MIRRORS)}")

    admin = AdminClient({"bootstrap.servers": args.source})
    admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])[TOPIC].result(30)
    load = Load(args.source, args.partitions, args.rate)
    load.start()
    names = [f"{GROUP_PREFIX}{i:03d}" for i in range(args.groups)]
    rows = []
    for r in runs:
        name, src, tgt, extra = MIRRORS[r]
        rows.append(measure(args, work, name, src, tgt, extra, load, names))
    load.stopped.set()
    load.join()
    result = {"groups": args.groups, "partitions": args.partitions, "rate": args.rate,
              "warmup_s": args.warmup, "window_s": args.window, "grace_s": args.grace, "mirrors": rows}
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))


if __name__ == "__main__":
    main()
