#!/usr/bin/env python3
"""The chaos run behind `bench/chaos`: a steady producer with unique ids on the source, strait
mirroring, and at random intervals strait killed with SIGKILL and restarted, the target broker
restarted, the source broker restarted. At the end every acknowledged id must be on the target
(lost = 0), and every duplicate is counted and attributed to the event that caused it.

Both clusters are nisshi brokers with SQLite storage (`scripts/test-broker start --storage
sqlite`), so their data survives a restart. The producer writes without transactions: nisshi has
none, and the broker that has them (tansu, `scripts/txn-broker`) keeps data only in memory, so it
cannot be restarted, and its read_committed fetch returns aborted records without the aborted
list Kafka sends, so aborts would be mirrored from it by any client. Aborted-transaction
filtering is shown against a scripted Kafka source in crates/strait-core/tests/flow_fake_source.rs.
"""

import argparse
import datetime
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parent.parent
TEST_BROKER = ROOT / "scripts" / "test-broker"
TOPIC = "ledger"
REMOTE = "source.ledger"
PARTITIONS = 6
VALUE_LEN = 120
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def now():
    return time.monotonic()


class Log:
    def __init__(self):
        self.t0 = now()

    def __call__(self, msg):
        print(f"chaos [{now() - self.t0:7.1f}s] {msg}", flush=True)


log = Log()


def run(cmd):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p.stdout


class Clusters:
    def __init__(self, workdir):
        self.dir = Path(workdir)
        run([TEST_BROKER, "start", "--dir", self.dir, "--storage", "sqlite", "--parent", os.getpid()])
        env = self.env()
        self.source, self.target = env["SOURCE_BOOTSTRAP"], env["TARGET_BOOTSTRAP"]

    def env(self):
        out = {}
        for line in (self.dir / "clusters.env").read_text().splitlines():
            if "=" in line:
                k, v = line.split("=", 1)
                out[k] = v
        return out

    def restart(self, which, grace, down):
        run([TEST_BROKER, "restart", "--dir", self.dir, "--which", which, "--grace", grace,
             "--down-seconds", f"{down:.1f}"])

    def stop(self):
        subprocess.run([str(TEST_BROKER), "stop", "--dir", str(self.dir)], capture_output=True)


class SteadyProducer(threading.Thread):
    """Writes ids 0, 1, 2, ... at `rate` records/s (idempotent, acks=all) and notes which the
    source acknowledged. A fatal producer error (possible when a broker restart loses the
    producer's state) replaces the producer; records it had in flight count as not acknowledged."""

    def __init__(self, bootstrap, rate):
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.rate = rate
        self.stop_flag = threading.Event()
        self.acked = set()
        self.failed = set()
        self.sent = 0
        self.errors = Counter()
        self.producers_made = 0
        self.lock = threading.Lock()

    def make(self):
        self.producers_made += 1
        return Producer({
            "bootstrap.servers": self.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "compression.codec": "lz4",
            "message.timeout.ms": 120000,
            "allow.auto.create.topics": False,
            "error_cb": self.on_error,
            # Broker restarts are expected: their errors are counted through error_cb, not logged.
            "log_level": 2,
        })

    def on_error(self, err):
        with self.lock:
            self.errors[err.name()] += 1
            if err.fatal():
                self.fatal = True

    def on_delivery(self, err, msg):
        i = int(msg.value()[3:15])
        with self.lock:
            if err is None:
                self.acked.add(i)
            else:
                self.failed.add(i)
                self.errors[f"delivery:{err.name()}"] += 1

    def run(self):
        self.fatal = False
        producer = self.make()
        pad = b"x" * VALUE_LEN
        t_start = now()
        while not self.stop_flag.is_set():
            if self.fatal:
                producer.flush(5)
                producer = self.make()
                self.fatal = False
            due = int((now() - t_start) * self.rate)
            while self.sent < due:
                i = self.sent
                value = (f"id={i:012d};".encode() + pad)[:VALUE_LEN]
                try:
                    producer.produce(TOPIC, key=f"k{i}".encode(), value=value, on_delivery=self.on_delivery)
                except BufferError:
                    break
                self.sent += 1
            producer.poll(0.01)
        producer.flush(180)
        self.producer = producer


def create_topic(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
        f.result(30)


def end_offsets(bootstrap, topic):
    """{partition: high watermark}, or {} if the topic is not there or the broker is down."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-probe", "enable.auto.commit": False,
                  "allow.auto.create.topics": False, "socket.timeout.ms": 3000})
    try:
        md = c.list_topics(topic, timeout=3)
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            return {}
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=3)[1] for p in t.partitions}
    except Exception:
        return {}
    finally:
        c.close()


def read_all(bootstrap, topic):
    """Every record of `topic`: list of (partition, offset, id)."""
    ends = end_offsets(bootstrap, topic)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-verify", "enable.auto.commit": False,
                  "allow.auto.create.topics": False, "session.timeout.ms": 6000,
                  "fetch.message.max.bytes": 4194304})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
    out = []
    left = {p: e for p, e in ends.items() if e > 0}
    deadline = now() + 600
    while left and now() < deadline:
        for m in c.consume(10000, 1.0):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise RuntimeError(f"reading {topic}: {m.error()}")
            out.append((m.partition(), m.offset(), int(m.value()[3:15])))
            if m.offset() + 1 >= left.get(m.partition(), 0):
                left.pop(m.partition(), None)
    c.close()
    if left:
        raise RuntimeError(f"could not read {topic} to its end: {left}")
    return out


class Strait:
    """One `strait run` incarnation after another, each with its own log."""

    def __init__(self, binary, config, logdir):
        self.binary, self.config, self.logdir = binary, config, logdir
        self.incarnation = 0
        self.proc = None
        self.logs = []

    def start(self, until_caught_up=False):
        self.incarnation += 1
        path = self.logdir / f"strait-{self.incarnation:02d}.log"
        self.logs.append(path)
        cmd = [self.binary, "run", "--config", self.config, "--listen", "off"]
        if until_caught_up:
            cmd.append("--until-caught-up")
        env = dict(os.environ, RUST_LOG="info", NO_COLOR="1")
        self.proc = subprocess.Popen([str(c) for c in cmd], stdout=open(path, "w"), stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env)
        return self.incarnation

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        return self.proc.returncode

    def alive(self):
        return self.proc is not None and self.proc.poll() is None


def parse_log(path):
    """What one strait incarnation's log says."""
    text = ANSI.sub("", path.read_text(errors="replace"))
    r = {"recovered": 0, "duplicates": 0, "tail_lines": 0, "stalls": 0, "lost_lines": 0, "stopped": None,
         "duplicate_sequence": 0, "other_topics": []}
    for line in text.splitlines():
        if "target held records beyond the offset map" in line:
            m1, m2 = re.search(r" recovered=(\d+)", line), re.search(r" duplicates=(\d+)", line)
            recovered = int(m1.group(1)) if m1 else 0
            duplicates = int(m2.group(1)) if m2 else 0
            part = re.search(r" partition=(\S+)", line)
            part = part.group(1) if part else "?"
            if not part.startswith(f"{TOPIC}-"):
                # The other topics strait mirrors beside the ledger (MM2's heartbeats, written
                # once a second to a compacted topic): reported apart, with strait's reason.
                why = re.search(r' stopped_by="((?:[^"\\]|\\.)*)"', line)
                r["other_topics"].append({"partition": part, "recovered": recovered,
                                          "duplicates": duplicates,
                                          "stopped_by": why.group(1) if why else "-"})
                continue
            r["tail_lines"] += 1
            r["recovered"] += recovered
            r["duplicates"] += duplicates
        if "flow stalled" in line:
            r["stalls"] += 1
        if "batch failed" in line and "duplicate sequence" in line:
            r["duplicate_sequence"] += 1
        if "deleted on the source before they were mirrored" in line:
            r["lost_lines"] += 1
        if "flow stopped" in line:
            m = re.search(r"duplicate_records: (\d+)", line)
            r["stopped"] = int(m.group(1)) if m else None
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=600, help="seconds of chaos (default 600)")
    ap.add_argument("--quick", action="store_true", help="120 seconds")
    ap.add_argument("--rate", type=int, default=1000, help="records/s produced (default 1000)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--strait", required=True)
    ap.add_argument("--out", required=True, help="results JSON")
    ap.add_argument("--report", required=True, help="markdown summary (docs/reliability.md)")
    ap.add_argument("--command", default="bench/chaos")
    args = ap.parse_args()
    duration = 120 if args.quick else args.duration
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    gap = (4, 12) if duration <= 180 else (8, 30)

    work = Path(tempfile.mkdtemp(prefix="strait-chaos-"))
    log(f"work dir {work}, duration {duration:.0f} s, seed {seed}, {args.rate} records/s")
    clusters = Clusters(work / "clusters")
    create_topic(clusters.source)
    config = work / "chaos.properties"
    config.write_text("\n".join([
        "clusters = source, target",
        f"source.bootstrap.servers = {clusters.source}",
        f"target.bootstrap.servers = {clusters.target}",
        "source->target.enabled = true",
        f"source->target.topics = {TOPIC}",
        "replication.factor = 1",
        "checkpoints.topic.replication.factor = 1",
        "heartbeats.topic.replication.factor = 1",
        "offset-syncs.topic.replication.factor = 1",
        # A broker restart must not fail a batch for good.
        "target.producer.delivery.timeout.ms = 600000",
        "",
    ]))
    strait = Strait(args.strait, config, work)
    producer = SteadyProducer(clusters.source, args.rate)
    events = []
    try:
        producer.start()
        strait.start()
        log(f"strait incarnation 1 (pid {strait.proc.pid}), producer running")
        actions = []
        t_end = now() + duration
        while True:
            wait = rng.uniform(*gap)
            if now() + wait > t_end:
                time.sleep(max(0.0, t_end - now()))
                break
            time.sleep(wait)
            if not actions:
                actions = ["kill-strait", "restart-target", "restart-source"]
                rng.shuffle(actions)
            action = actions.pop()
            before = end_offsets(clusters.target, REMOTE)
            ev = {"t": round(now() - log.t0, 1), "action": action, "target_end_before": before,
                  "incarnation": strait.incarnation}
            if not strait.alive():
                ev["strait_had_exited"] = strait.proc.returncode
            if action == "kill-strait":
                strait.kill9()
                down = rng.uniform(0, 2)
                time.sleep(down)
                ev["detail"] = f"SIGKILL to incarnation {strait.incarnation}, restarted after {down:.1f} s"
                strait.start()
                ev["new_incarnation"] = strait.incarnation
            else:
                which = action.split("-")[1]
                grace = rng.choice(["0", "5"])
                down = rng.uniform(0.5, 4)
                clusters.restart(which, grace, down)
                ev["detail"] = (f"{which} broker {'killed (SIGKILL)' if grace == '0' else 'stopped (SIGTERM)'}, "
                                f"down {down:.1f} s")
                if not strait.alive():
                    # Counted, and strait restarted: a mirror that exits is a finding.
                    ev["strait_exited"] = strait.proc.returncode
                    strait.start()
            events.append(ev)
            log(f"{action}: {ev['detail']}")
        log("chaos over: stopping the producer")
        producer.stop_flag.set()
        producer.join(240)
        log(f"producer: {producer.sent} sent, {len(producer.acked)} acknowledged, {len(producer.failed)} failed")
        # The running incarnation is stopped cleanly, then one --until-caught-up run finishes.
        if strait.alive():
            strait.proc.send_signal(signal.SIGTERM)
            try:
                strait.proc.wait(120)
            except subprocess.TimeoutExpired:
                strait.kill9()
        final_exit_before = strait.proc.returncode
        strait.start(until_caught_up=True)
        strait.proc.wait(900)
        log(f"final strait run --until-caught-up exited {strait.proc.returncode}")
        if strait.proc.returncode != 0:
            raise RuntimeError(f"final run failed: see {strait.logs[-1]}")

        log("reading both clusters back")
        src = read_all(clusters.source, TOPIC)
        tgt = read_all(clusters.target, REMOTE)
    finally:
        if strait.alive():
            strait.kill9()
        clusters.stop()

    src_copies = Counter(i for _, _, i in src)
    tgt_copies = Counter(i for _, _, i in tgt)
    acked = producer.acked
    lost = sorted(i for i in acked if i not in tgt_copies)
    lost_unacked = sorted(i for i in src_copies if i not in tgt_copies)
    foreign = sorted(i for i in tgt_copies if i not in src_copies)
    source_dups = sum(n - 1 for n in src_copies.values() if n > 1)
    extra = {i: tgt_copies[i] - src_copies.get(i, 0) for i in tgt_copies if tgt_copies[i] > src_copies.get(i, 0)}
    strait_dups = sum(extra.values())
    # Attribution: the later copies of an id on the target (beyond as many as the source holds)
    # were written after the last event whose target end (before it) is at or below them.
    by_id = defaultdict(list)
    for p, o, i in tgt:
        by_id[i].append((p, o))
    attributed = Counter()
    for i, n in extra.items():
        copies = sorted(by_id[i], key=lambda po: po[1])[-n:]
        for p, o in copies:
            cause = "before the first event"
            for k, ev in enumerate(events):
                if ev["target_end_before"].get(p, 0) <= o:
                    cause = k
            attributed[cause] += 1
    reports = [dict(parse_log(path), log=path.name) for path in strait.logs]
    reported_dups = sum(r["duplicates"] for r in reports)

    summary = {
        "command": args.command,
        "started": started,
        "finished": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "duration_s": duration,
        "seed": seed,
        "rate": args.rate,
        "partitions": PARTITIONS,
        "produced": producer.sent,
        "acknowledged": len(acked),
        "delivery_failed": len(producer.failed),
        "producer_errors": dict(producer.errors),
        "producers_made": producer.producers_made,
        "source_records": len(src),
        "source_duplicates": source_dups,
        "target_records": len(tgt),
        "lost": len(lost),
        "lost_ids": lost[:50],
        "unacknowledged_missing_on_target": len(lost_unacked),
        "foreign": len(foreign),
        "strait_duplicates": strait_dups,
        "strait_reported_duplicates": reported_dups,
        "attribution": {str(k): v for k, v in attributed.items()},
        "events": events,
        "incarnations": reports,
        "strait_exits": [e.get("strait_exited") for e in events if "strait_exited" in e],
    }
    Path(args.out).write_text(json.dumps(summary, indent=1) + "\n")
    write_report(summary, Path(args.report))
    ok = summary["lost"] == 0 and summary["foreign"] == 0 and lost_unacked == []
    log(f"produced {producer.sent}, acknowledged {len(acked)}, on the source {len(src)} "
        f"({source_dups} written twice by the producer), on the target {len(tgt)}; "
        f"lost {len(lost)}, duplicates by strait {strait_dups} (strait reported {reported_dups}); "
        f"{'OK' if ok else 'FAILED'}")
    sys.exit(0 if ok else 1)


def write_report(s, path):
    ev_rows = []
    for k, ev in enumerate(s["events"]):
        ev_rows.append(f"| {k} | {ev['t']:.0f} s | {ev['action']} | {ev['detail']} | "
                       f"{sum(ev['target_end_before'].values()) if ev['target_end_before'] else '-'} | "
                       f"{s['attribution'].get(str(k), 0)} |")
    inc_rows = [f"| {r['log']} | {r['recovered']} | {r['duplicates']} | {r['stalls']} | "
                f"{r['duplicate_sequence']} | {r['lost_lines']} |"
                for r in s["incarnations"]]
    kills = sum(1 for e in s["events"] if e["action"] == "kill-strait")
    tr = sum(1 for e in s["events"] if e["action"] == "restart-target")
    sr = sum(1 for e in s["events"] if e["action"] == "restart-source")
    explained = s["strait_duplicates"] == s["strait_reported_duplicates"]
    by_cause = Counter()
    for k, n in s["attribution"].items():
        by_cause[s["events"][int(k)]["action"] if k.isdigit() else k] += n
    cause_text = ", ".join(f"{n} after a {c}" if c in ("kill-strait", "restart-target", "restart-source")
                           else f"{n} {c}" for c, n in sorted(by_cause.items())) or "none"
    dup_seq = sum(r.get("duplicate_sequence", 0) for r in s["incarnations"])
    recovered = sum(r["recovered"] for r in s["incarnations"])
    after_target = by_cause.get("restart-target", 0)
    finding = ""
    if after_target and dup_seq and recovered == 0:
        finding = (
            f"\n\n**Finding (a defect to fix in strait).** {after_target} of the {s['strait_duplicates']} "
            f"duplicates followed a target broker restart. Each time, batches strait retried after the "
            f"restart were answered with DUPLICATE_SEQUENCE_NUMBER ({dup_seq} such answers in all: the "
            f"target had written them before it went down, and the answer was lost), strait resumed from "
            f"its offset map, found those records on the target beyond the map, and matched none of them "
            f"to the source (recovered = {recovered} in every run), so it wrote them all again. They are "
            f"copies of the same source records, written by strait itself moments before: the tail "
            f"matching should have kept them, as it is designed to after a crash. Nothing was lost.")
    others = [o for r in s["incarnations"] for o in r.get("other_topics", []) if o["duplicates"]]
    other_text = ""
    if others:
        other_text = ("\n\nBeside the ledger, strait mirrors the source's `heartbeats` topic (MM2's, "
                      "one record a second, compacted). There it could not match "
                      + "; ".join(f"{o['duplicates']} record(s) on {o['partition']} ({o['stopped_by']})"
                                  for o in others)
                      + ". Those are not ledger records and are not counted above. On a compacted "
                      "topic the source can compact away, within seconds on this broker, the record "
                      "a target copy was made of, so the copy cannot be matched (`docs/mirroring.md`, "
                      "Restarts).")
    if s["strait_duplicates"] == 0:
        dup_text = ("strait wrote no duplicates: after every kill and every broker restart it matched "
                    "the records written after its last map flush against the source and kept them.")
    elif explained:
        dup_text = (f"Every duplicate on the target is one strait reported: a `target held records beyond "
                    f"the offset map ... duplicates=N` line, logged when it resumes from its map and finds "
                    f"records on the target that it cannot match to the source, which it then writes again. "
                    f"By cause: {cause_text}.")
    else:
        dup_text = (f"The duplicates on the target ({s['strait_duplicates']}) and the ones strait reported "
                    f"({s['strait_reported_duplicates']}) differ. By cause: {cause_text}.")
    text = f"""# Reliability: the chaos run

Generated by `{s['command'].strip()}` (`bench/chaos.py`) — a real run started {s['started']}: {s['duration_s'] / 60:.0f}
minutes of chaos, seed {s['seed']}. Do not edit by hand: run `bench/chaos` again
(`bench/chaos --quick` takes about 3 minutes, `--duration SECONDS`, `--seed N` to repeat a run).

A steady producer writes records with unique ids (`id=NNNNNNNNNNNN;...`, {s['rate']} records/s,
idempotent, acks=all, lz4) to a {s['partitions']}-partition topic on the source cluster while
`strait run` mirrors it. At random intervals one of three things happens, in shuffled turns:
strait is killed with SIGKILL and restarted, the target broker is restarted, or the source broker
is restarted (each broker restart is a SIGKILL or a SIGTERM, at random, with the broker down
0.5-4 s). Both clusters are nisshi brokers with SQLite storage (`scripts/test-broker start
--storage sqlite`), so their data survives restarts. At the end the producer stops, strait is
stopped, one `strait run --until-caught-up` finishes the copy, and both clusters are read back
in full with librdkafka.

**No transactions in this run.** nisshi refuses transactional producers. The broker that has
them (tansu, `scripts/txn-broker`) keeps its data only in memory, so it cannot be restarted, and
its read_committed fetch returns aborted records without Kafka's aborted-transactions list, so
it cannot show abort filtering by any mirror. Aborted transactions are shown against a scripted
Kafka source in `crates/strait-core/tests/flow_fake_source.rs`, and transaction markers against
tansu in `crates/strait-core/tests/flow_txn.rs`.

## Result

| | |
|---|---|
| events | {len(s['events'])}: {kills} strait SIGKILLs, {tr} target broker restarts, {sr} source broker restarts |
| records produced | {s['produced']:,} |
| acknowledged by the source | {s['acknowledged']:,} (delivery failed for {s['delivery_failed']}) |
| on the source | {s['source_records']:,} ({s['source_duplicates']} ids written twice by the producer itself) |
| on the target | {s['target_records']:,} |
| **acknowledged ids missing on the target (lost)** | **{s['lost']}** |
| ids on the source missing on the target | {s['unacknowledged_missing_on_target']} |
| ids on the target never on the source | {s['foreign']} |
| **duplicates written by strait** (target copies beyond the source's) | **{s['strait_duplicates']}** |
| duplicates strait reported in its logs | {s['strait_reported_duplicates']} |
| strait exits by itself | {len(s['strait_exits'])} |

{dup_text}{finding}{other_text}

## Events

The target end before each event, and the duplicates whose extra copy lies after it (written
after that event and before the next one): the event that caused them.

| # | at | event | what | target records before | duplicates after it |
|---|---|---|---|---|---|
{chr(10).join(ev_rows)}

Duplicates before the first event: {s['attribution'].get('before the first event', 0)}.

## What each strait run reported

`recovered`: records found on the target beyond the offset map at start-up and matched to the
source (kept, not written again); `duplicates`: those it could not match (written again);
`stalls`: `flow stalled; retrying` lines (a broker away); `duplicate sequence`: batches the
target answered with DUPLICATE_SEQUENCE_NUMBER after it restarted ("batch already written,
offset unknown": strait then resumes from its map and matches the target's tail); `loss lines`:
records reported deleted on the source before mirroring.

| log | recovered | duplicates | stalls | duplicate sequence | loss lines |
|---|---|---|---|---|---|
{chr(10).join(inc_rows)}

Producer errors seen by librdkafka during broker restarts: {s['producer_errors'] or 'none'}
(producers made: {s['producers_made']}).
"""
    path.write_text(text)


if __name__ == "__main__":
    main()
