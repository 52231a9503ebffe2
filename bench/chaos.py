#!/usr/bin/env python3
"""The chaos run behind `bench/chaos`: two Apache Kafka 4.4.0 clusters (single-node KRaft, data
on disk: `scripts/test-broker`), `strait run` mirroring a topic that two producers write to at a
steady rate: plain records (idempotent, acks=all) and transactions, of which some commit and
some abort. At random intervals, in shuffled rounds, one of five things happens: strait is
killed with SIGKILL and restarted; the source or the target broker is killed with SIGKILL
(`scripts/test-broker restart --grace 0`: a crash) or stopped with SIGTERM (a controlled
shutdown), and started again after a pause. At the end strait catches up, both clusters are
read back in full, and every record is accounted for: lost (committed or acknowledged on the
source, missing on the target), duplicated (more copies on the target than on the source), and
aborted records visible on the target (in the source's log, but only inside aborted
transactions).
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


def kafka_version():
    """The Kafka release scripts/test-broker runs (its KAFKA_VERSION): what the run measures."""
    text = (Path(__file__).resolve().parent.parent / "scripts" / "test-broker").read_text()
    return re.search(r"^KAFKA_VERSION=(\S+)$", text, re.M).group(1)

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parent.parent
TEST_BROKER = ROOT / "scripts" / "test-broker"
TOPIC = "ledger"
REMOTE = "source.ledger"
PARTITIONS = 6
VALUE_LEN = 120
# Ids of transactional records start here (plain records count from 0): `id=NNNNNNNNNNNN;`.
TXN_BASE = 500_000_000_000
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
ACTIONS = ["kill-strait", "kill-source", "term-source", "kill-target", "term-target"]
# A SIGTERM'd broker gets this long for its controlled shutdown before SIGKILL.
TERM_GRACE_S = 20


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
    return p


def record_id(value):
    return int(value[3:15])


def value_of(i):
    return (f"id={i:012d};".encode() + b"x" * VALUE_LEN)[:VALUE_LEN]


class Clusters:
    def __init__(self, workdir):
        self.dir = Path(workdir)
        run([TEST_BROKER, "start", "--dir", self.dir, "--parent", os.getpid()])
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
        """Stops broker `which` (SIGKILL at once with grace 0, else SIGTERM and SIGKILL after
        `grace` s), waits `down` s, starts it again; returns the seconds it took and whether a
        SIGTERM had to be followed by SIGKILL."""
        t = now()
        p = run([TEST_BROKER, "restart", "--dir", self.dir, "--which", which, "--grace", str(grace),
                 "--down-seconds", f"{down:.1f}"])
        return now() - t, "sending SIGKILL" in p.stderr

    def stop(self):
        subprocess.run([str(TEST_BROKER), "stop", "--dir", str(self.dir)], capture_output=True)


class PlainProducer(threading.Thread):
    """Writes ids 0, 1, 2, ... at `rate` records/s (idempotent, acks=all, lz4) and notes which
    the source acknowledged. A fatal producer error replaces the producer; records it had in
    flight count as not acknowledged."""

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
        self.fatal = False

    def make(self):
        self.producers_made += 1
        return Producer({
            "bootstrap.servers": self.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "compression.codec": "lz4",
            "message.timeout.ms": 300000,
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
        i = record_id(msg.value())
        with self.lock:
            if err is None:
                self.acked.add(i)
            else:
                self.failed.add(i)
                self.errors[f"delivery:{err.name()}"] += 1

    def run(self):
        producer = self.make()
        t_start = now()
        while not self.stop_flag.is_set():
            if self.fatal:
                producer.flush(5)
                producer = self.make()
                self.fatal = False
            due = int((now() - t_start) * self.rate)
            while self.sent < due:
                i = self.sent
                try:
                    producer.produce(TOPIC, key=f"k{i}".encode(), value=value_of(i), on_delivery=self.on_delivery)
                except BufferError:
                    break
                self.sent += 1
            producer.poll(0.01)
        producer.flush(300)


class TxnProducer(threading.Thread):
    """Transactions of 1-100 records (ids from TXN_BASE, spread over the partitions) at about
    `rate` records/s; each commits, or aborts with probability `abort_ratio`. A transaction
    whose end is refused is aborted when the client allows it; one whose outcome the client
    cannot tell (its producer failed for good mid-commit) is 'in doubt' and settled by reading
    the source with read_committed. The producer is then replaced (same transactional.id: the
    new one fences the old and Kafka ends any transaction left open)."""

    def __init__(self, bootstrap, rate, abort_ratio, seed):
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.rate = rate
        self.abort_ratio = abort_ratio
        self.rng = random.Random(seed)
        self.stop_flag = threading.Event()
        self.committed = set()
        self.aborted = set()
        self.in_doubt = set()
        self.sent = 0
        self.txns = Counter()
        self.errors = Counter()
        self.producers_made = 0
        self.lock = threading.Lock()

    def on_error(self, err):
        with self.lock:
            self.errors[err.name()] += 1

    def make(self):
        while not self.stop_flag.is_set() or self.producers_made == 0:
            self.producers_made += 1
            p = Producer({
                "bootstrap.servers": self.bootstrap,
                "transactional.id": "chaos-txn",
                "acks": "all",
                "linger.ms": 5,
                "compression.codec": "lz4",
                "transaction.timeout.ms": 60000,
                "message.timeout.ms": 60000,
                "allow.auto.create.topics": False,
                "error_cb": self.on_error,
                "log_level": 2,
            })
            try:
                p.init_transactions(90)
                return p
            except KafkaException as e:
                self.errors[f"init:{e.args[0].name()}"] += 1
                time.sleep(1)
        return None

    def end(self, producer, commit, ids):
        """Commits or aborts; returns the outcome: 'committed', 'aborted' or 'in-doubt', and
        whether the producer must be replaced."""
        for attempt in range(10):
            try:
                if commit:
                    producer.commit_transaction(60)
                    return "committed", False
                producer.abort_transaction(60)
                return "aborted", False
            except KafkaException as e:
                err = e.args[0]
                self.errors[f"{'commit' if commit else 'abort'}:{err.name()}"] += 1
                if err.fatal():
                    return ("in-doubt" if commit else "aborted-fatal"), True
                if commit and err.txn_requires_abort():
                    commit = False
                    continue
                if err.retriable():
                    time.sleep(0.5)
                    continue
                return "in-doubt", True
        return "in-doubt", True

    def run(self):
        producer = self.make()
        next_id = TXN_BASE
        t_start = now()
        while not self.stop_flag.is_set():
            n = self.rng.randint(1, 100)
            due = t_start + (self.sent + n) / self.rate
            if due > now():
                time.sleep(min(due - now(), 0.5))
                continue
            abort = self.rng.random() < self.abort_ratio
            ids = list(range(next_id, next_id + n))
            next_id += n
            self.sent += n
            replace = False
            try:
                producer.begin_transaction()
                for i in ids:
                    while True:
                        try:
                            producer.produce(TOPIC, key=f"t{i}".encode(), value=value_of(i),
                                             partition=self.rng.randrange(PARTITIONS))
                            break
                        except BufferError:
                            producer.poll(0.05)
                # Delivered before the transaction ends, so an aborted transaction's records are
                # in the source's log (abort_transaction would drop what is still queued).
                producer.flush(30)
                outcome, replace = self.end(producer, not abort, ids)
            except KafkaException as e:
                self.errors[f"begin:{e.args[0].name()}"] += 1
                outcome, replace = "in-doubt", True
            with self.lock:
                if outcome == "committed":
                    self.committed.update(ids)
                    self.txns["committed"] += 1
                elif outcome in ("aborted", "aborted-fatal"):
                    # An abort asked for (or forced by a refused commit) never commits: when the
                    # producer failed meanwhile, its successor's init_transactions aborts it.
                    self.aborted.update(ids)
                    self.txns["aborted as planned" if abort else "aborted after a refused commit"] += 1
                else:
                    self.in_doubt.update(ids)
                    self.txns["in doubt"] += 1
            if replace:
                producer = self.make()
                if producer is None:
                    return


def create_topic(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
        f.result(60)


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


def read_all(bootstrap, topic, isolation):
    """Every record of `topic` visible with `isolation` (read_committed or read_uncommitted):
    list of (partition, offset, id). Each partition is read until the consumer reports its end
    (a read_committed read ends at the last stable offset, and control records take offsets)."""
    ends = end_offsets(bootstrap, topic)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"chaos-verify-{isolation}",
                  "enable.auto.commit": False, "allow.auto.create.topics": False,
                  "isolation.level": isolation, "enable.partition.eof": True,
                  "fetch.message.max.bytes": 4194304})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
    out = []
    left = {p for p, e in ends.items() if e > 0}
    deadline = now() + 600
    while left and now() < deadline:
        for m in c.consume(10000, 1.0):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    left.discard(m.partition())
                    continue
                raise RuntimeError(f"reading {topic}: {m.error()}")
            out.append((m.partition(), m.offset(), record_id(m.value())))
    c.close()
    if left:
        raise RuntimeError(f"could not read {topic} to its end: partitions {sorted(left)}")
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
    r = {"recovered": 0, "duplicates": 0, "tail_lines": 0, "stalls": 0, "reconnects": 0, "lost_lines": 0,
         "stopped": None, "duplicate_sequence": 0, "other_topics": []}
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
        if "connection lost; connecting again" in line:
            r["reconnects"] += 1
        if "batch failed" in line and "duplicate sequence" in line:
            r["duplicate_sequence"] += 1
        if "deleted on the source before they were mirrored" in line:
            r["lost_lines"] += 1
        if "flow stopped" in line:
            m = re.search(r"duplicate_records(?:: |=)(\d+)", line)
            r["stopped"] = int(m.group(1)) if m else None
    return r


def chaos_event(action, rng, clusters, strait, ev):
    """Carries out one event; fills in ev's detail."""
    if action == "kill-strait":
        strait.kill9()
        down = rng.uniform(0, 2)
        time.sleep(down)
        ev["detail"] = f"SIGKILL to incarnation {strait.incarnation}, restarted after {down:.1f} s"
        strait.start()
        ev["new_incarnation"] = strait.incarnation
        return
    kind, which = action.split("-")
    grace = 0 if kind == "kill" else TERM_GRACE_S
    down = rng.uniform(0.5, 4)
    took, escalated = clusters.restart(which, grace, down)
    how = "killed (SIGKILL)" if kind == "kill" else (
        "stopped (SIGTERM; still there after 20 s, then SIGKILL)" if escalated else "stopped (SIGTERM)")
    ev["detail"] = f"{which} broker {how}, down {down:.1f} s, back after {took:.1f} s in all"
    ev["term_escalated"] = escalated
    if not strait.alive():
        # Counted, and strait restarted: a mirror that exits is a finding.
        ev["strait_exited"] = strait.proc.returncode
        strait.start()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=600, help="seconds of chaos (default 600)")
    ap.add_argument("--quick", action="store_true",
                    help="one round: each of the five events once, 3-8 s apart (a few minutes)")
    ap.add_argument("--rate", type=int, default=1000, help="plain records/s produced (default 1000)")
    ap.add_argument("--txn-rate", type=int, default=500, help="transactional records/s produced (default 500)")
    ap.add_argument("--abort-ratio", type=float, default=0.2, help="share of transactions aborted (default 0.2)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--strait", required=True)
    ap.add_argument("--out", required=True, help="results JSON")
    ap.add_argument("--report", required=True, help="markdown summary (docs/reliability.md)")
    ap.add_argument("--command", default="bench/chaos")
    args = ap.parse_args()
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    # A broker restart takes 10-60 s on its own (a JVM start), so a quick run is counted in
    # events (one round of the five) rather than in seconds.
    gap = (3, 8) if args.quick else (8, 30)
    rounds = 1 if args.quick else None

    work = Path(tempfile.mkdtemp(prefix="strait-chaos-"))
    log(f"work dir {work}, {'one round of events' if args.quick else f'{args.duration:.0f} s of chaos'}, "
        f"seed {seed}, {args.rate} plain + {args.txn_rate} transactional records/s, "
        f"{args.abort_ratio:.0%} of transactions aborted")
    clusters = Clusters(work / "clusters")
    log(f"clusters up: source {clusters.source}, target {clusters.target}")
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
    plain = PlainProducer(clusters.source, args.rate)
    txn = TxnProducer(clusters.source, args.txn_rate, args.abort_ratio, seed + 1)
    events = []
    chaos_started = now()
    try:
        plain.start()
        txn.start()
        strait.start()
        log(f"strait incarnation 1 (pid {strait.proc.pid}), producers running")
        actions = []
        done_rounds = 0
        t_end = now() + args.duration
        while True:
            wait = rng.uniform(*gap)
            if rounds is None and now() + wait > t_end:
                time.sleep(max(0.0, t_end - now()))
                break
            time.sleep(wait)
            if not actions:
                if rounds is not None and done_rounds == rounds:
                    break
                actions = list(ACTIONS)
                rng.shuffle(actions)
                done_rounds += 1
            action = actions.pop()
            before = end_offsets(clusters.target, REMOTE)
            ev = {"t": round(now() - log.t0, 1), "action": action, "target_end_before": before,
                  "incarnation": strait.incarnation}
            if not strait.alive():
                ev["strait_had_exited"] = strait.proc.returncode
            chaos_event(action, rng, clusters, strait, ev)
            events.append(ev)
            log(f"{action}: {ev['detail']}")
        chaos_seconds = now() - chaos_started
        log("chaos over: stopping the producers")
        plain.stop_flag.set()
        txn.stop_flag.set()
        plain.join(400)
        txn.join(400)
        log(f"plain producer: {plain.sent} sent, {len(plain.acked)} acknowledged, {len(plain.failed)} failed")
        log(f"transactional producer: {txn.sent} records in transactions: {len(txn.committed)} committed, "
            f"{len(txn.aborted)} aborted, {len(txn.in_doubt)} in doubt; {dict(txn.txns)}")
        # The running incarnation is stopped cleanly, then one --until-caught-up run finishes.
        if strait.alive():
            strait.proc.send_signal(signal.SIGTERM)
            try:
                strait.proc.wait(120)
            except subprocess.TimeoutExpired:
                strait.kill9()
        strait.start(until_caught_up=True)
        strait.proc.wait(900)
        log(f"final strait run --until-caught-up exited {strait.proc.returncode}")
        if strait.proc.returncode != 0:
            raise RuntimeError(f"final run failed: see {strait.logs[-1]}")

        log("reading both clusters back")
        src_committed = read_all(clusters.source, TOPIC, "read_committed")
        src_all = read_all(clusters.source, TOPIC, "read_uncommitted")
        tgt = read_all(clusters.target, REMOTE, "read_uncommitted")
    finally:
        if strait.alive():
            strait.kill9()
        clusters.stop()

    summary = account(args, seed, started, chaos_seconds, plain, txn, events, strait,
                      src_committed, src_all, tgt)
    Path(args.out).write_text(json.dumps(summary, indent=1) + "\n")
    write_report(summary, Path(args.report))
    ok = summary["lost"] == 0 and summary["foreign"] == 0 and summary["aborted_on_target"] == 0
    log(f"on the source {summary['source_committed_records']} committed/plain records "
        f"({summary['source_aborted_records']} more in aborted transactions), on the target "
        f"{summary['target_records']}; lost {summary['lost']}, duplicates {summary['strait_duplicates']} "
        f"(strait reported {summary['strait_reported_duplicates']}), aborted records on the target "
        f"{summary['aborted_on_target']}; {'OK' if ok else 'FAILED'}")
    sys.exit(0 if ok else 1)


def account(args, seed, started, chaos_seconds, plain, txn, events, strait, src_committed, src_all, tgt):
    """Every id accounted for, from what both clusters hold and what the producers were told."""
    committed_copies = Counter(i for _, _, i in src_committed)
    all_copies = Counter(i for _, _, i in src_all)
    tgt_copies = Counter(i for _, _, i in tgt)
    # Records physically on the source but visible only to read_uncommitted: aborted ones.
    aborted_on_source = {i for i in all_copies if i not in committed_copies}
    # What the target must hold: exactly what read_committed sees on the source.
    lost = sorted(i for i in committed_copies if i not in tgt_copies)
    # Acknowledged plain records and committed transactions the source does not hold (Kafka
    # lost them: not strait's doing, but it would hide a loss).
    acked_missing_on_source = sorted(i for i in plain.acked if i not in committed_copies)
    committed_missing_on_source = sorted(i for i in txn.committed if i not in committed_copies)
    aborted_visible_on_source = sorted(i for i in txn.aborted if i in committed_copies)
    aborted_on_target = sorted(i for i in tgt_copies if i in aborted_on_source)
    foreign = sorted(i for i in tgt_copies if i not in all_copies)
    in_doubt_committed = sum(1 for i in txn.in_doubt if i in committed_copies)
    extra = {i: tgt_copies[i] - committed_copies.get(i, 0) for i in tgt_copies
             if i in committed_copies and tgt_copies[i] > committed_copies[i]}
    strait_dups = sum(extra.values())
    source_dups = sum(n - 1 for n in committed_copies.values() if n > 1)
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
    return {
        "command": args.command,
        "started": started,
        "finished": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "quick": args.quick,
        "duration_s": round(chaos_seconds, 1),
        "seed": seed,
        "rate": args.rate,
        "txn_rate": args.txn_rate,
        "abort_ratio": args.abort_ratio,
        "partitions": PARTITIONS,
        "broker": f"Apache Kafka {kafka_version()}, single-node KRaft, data on disk (scripts/test-broker)",
        "plain_produced": plain.sent,
        "plain_acknowledged": len(plain.acked),
        "plain_delivery_failed": len(plain.failed),
        "plain_producer_errors": dict(plain.errors),
        "plain_producers_made": plain.producers_made,
        "txn_records": txn.sent,
        "txn_committed_records": len(txn.committed),
        "txn_aborted_records": len(txn.aborted),
        "txn_in_doubt_records": len(txn.in_doubt),
        "txn_in_doubt_committed": in_doubt_committed,
        "txn_outcomes": dict(txn.txns),
        "txn_producer_errors": dict(txn.errors),
        "txn_producers_made": txn.producers_made,
        "source_committed_records": len(src_committed),
        "source_all_records": len(src_all),
        "source_aborted_records": len(src_all) - len(src_committed),
        "source_duplicates": source_dups,
        "acked_missing_on_source": len(acked_missing_on_source),
        "committed_missing_on_source": len(committed_missing_on_source),
        "aborted_visible_on_source": len(aborted_visible_on_source),
        "target_records": len(tgt),
        "lost": len(lost),
        "lost_ids": lost[:50],
        "aborted_on_target": len(aborted_on_target),
        "aborted_on_target_ids": aborted_on_target[:50],
        "foreign": len(foreign),
        "strait_duplicates": strait_dups,
        "strait_reported_duplicates": sum(r["duplicates"] for r in reports),
        "attribution": {str(k): v for k, v in attributed.items()},
        "events": events,
        "incarnations": reports,
        "strait_exits": [e.get("strait_exited") for e in events if "strait_exited" in e],
    }


def write_report(s, path):
    ev_rows = []
    for k, ev in enumerate(s["events"]):
        ev_rows.append(f"| {k} | {ev['t']:.0f} s | {ev['action']} | {ev['detail']} | "
                       f"{sum(ev['target_end_before'].values()) if ev['target_end_before'] else '-'} | "
                       f"{s['attribution'].get(str(k), 0)} |")
    inc_rows = [f"| {r['log']} | {r['recovered']} | {r['duplicates']} | {r.get('reconnects', 0)} | {r['stalls']} | "
                f"{r['duplicate_sequence']} | {r['lost_lines']} |"
                for r in s["incarnations"]]
    count = Counter(e["action"] for e in s["events"])
    explained = s["strait_duplicates"] == s["strait_reported_duplicates"]
    by_cause = Counter()
    for k, n in s["attribution"].items():
        by_cause[s["events"][int(k)]["action"] if k.isdigit() else k] += n
    cause_text = ", ".join(f"{n} after a {c}" if c in ACTIONS else f"{n} {c}"
                           for c, n in sorted(by_cause.items())) or "none"
    dup_seq = sum(r.get("duplicate_sequence", 0) for r in s["incarnations"])
    recovered = sum(r["recovered"] for r in s["incarnations"])
    after_target = by_cause.get("kill-target", 0) + by_cause.get("term-target", 0)
    finding = ""
    if after_target and dup_seq and recovered == 0:
        finding = (
            f"\n\n**Finding (a defect to fix in strait).** {after_target} of the {s['strait_duplicates']} "
            f"duplicates followed a target broker restart. Each time, batches strait retried after the "
            f"restart were answered with DUPLICATE_SEQUENCE_NUMBER ({dup_seq} such answers in all: the "
            f"target had written them before it went down, and the answer was lost), strait resumed from "
            f"its offset map, found those records on the target beyond the map, and matched none of them "
            f"to the source (recovered = {recovered} in every run), so it wrote them all again. Nothing "
            f"was lost.")
    others = [o for r in s["incarnations"] for o in r.get("other_topics", []) if o["duplicates"]]
    other_text = ""
    if others:
        other_text = ("\n\nBeside the ledger, strait mirrors the source's `heartbeats` topic (MM2's, "
                      "one record a second, compacted). There it could not match "
                      + "; ".join(f"{o['duplicates']} record(s) on {o['partition']} ({o['stopped_by']})"
                                  for o in others)
                      + ". Those are not ledger records and are not counted above. On a compacted "
                      "topic the source can compact away the record a target copy was made of, so "
                      "the copy cannot be matched (`docs/mirroring.md`, Restarts).")
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
    if s["aborted_on_target"] == 0:
        abort_text = (f"No aborted record reached the target: the source holds "
                      f"{s['source_aborted_records']:,} records of aborted transactions in its log "
                      f"(visible to read_uncommitted only), and strait, reading read_committed with "
                      f"Kafka's aborted-transactions list, left every one of them out, through every "
                      f"kill and restart.")
    else:
        abort_text = (f"**{s['aborted_on_target']} records of aborted transactions are on the target** "
                      f"(first ids: {s['aborted_on_target_ids'][:10]}): a defect to fix in strait.")
    kafka_text = ""
    if s["acked_missing_on_source"] or s["committed_missing_on_source"] or s["aborted_visible_on_source"]:
        kafka_text = (f"\n\nOn the source itself: {s['acked_missing_on_source']} acknowledged plain records "
                      f"and {s['committed_missing_on_source']} records of committed transactions are "
                      f"missing, and {s['aborted_visible_on_source']} records of aborted transactions are "
                      f"visible to read_committed. That is the source broker's doing (a single broker, "
                      f"killed), not the mirror's; the target is checked against what the source holds.")
    when = ("one round of the five events" if s.get("quick") else f"{s['duration_s'] / 60:.0f} minutes of chaos")
    text = f"""# Reliability: the chaos run

Generated by `{s['command'].strip()}` (`bench/chaos.py`) — a real run started {s['started']}: {when}
({s['duration_s']:.0f} s), seed {s['seed']}. Do not edit by hand: run `bench/chaos` again
(`bench/chaos --quick` runs one round of the five events in a few minutes; `--duration SECONDS`,
`--seed N` to repeat a run).

Two producers write records with unique ids (`id=NNNNNNNNNNNN;...`) to a
{s['partitions']}-partition topic on the source cluster while `strait run` mirrors it: one plain
(idempotent, acks=all, lz4, {s['rate']} records/s) and one transactional ({s['txn_rate']} records/s
in transactions of 1-100 records spread over the partitions, {s['abort_ratio']:.0%} of them aborted
on purpose). At random intervals one of five events happens, in shuffled rounds: strait is killed
with SIGKILL and restarted; the source or the target broker is killed with SIGKILL (a crash:
`scripts/test-broker restart --grace 0`) or stopped with SIGTERM (a controlled shutdown, SIGKILL
only if it takes more than {TERM_GRACE_S} s), and started again after 0.5-4 s (a broker's JVM
takes its own time to come back: the event column says how long). Both clusters are
{s['broker']}, so their data survives restarts, and the source is its own transaction
coordinator. At the end the producers stop, strait is stopped, one `strait run
--until-caught-up` finishes the copy, and both clusters are read back in full with librdkafka:
the source with read_committed (what the target must hold) and read_uncommitted (which adds the
records of aborted transactions), the target with read_uncommitted (everything on it).

## Result

| | |
|---|---|
| events | {len(s['events'])}: strait SIGKILL x{count['kill-strait']}, source broker SIGKILL x{count['kill-source']}, source broker SIGTERM x{count['term-source']}, target broker SIGKILL x{count['kill-target']}, target broker SIGTERM x{count['term-target']} |
| plain records produced | {s['plain_produced']:,} (acknowledged {s['plain_acknowledged']:,}, delivery failed {s['plain_delivery_failed']}) |
| records in transactions | {s['txn_records']:,}: {s['txn_committed_records']:,} committed, {s['txn_aborted_records']:,} aborted, {s['txn_in_doubt_records']:,} in doubt (their producer failed mid-commit; {s['txn_in_doubt_committed']:,} of them turned out committed) |
| transactions | {', '.join(f'{n} {k}' for k, n in sorted(s['txn_outcomes'].items())) or 'none'} |
| on the source, read_committed | {s['source_committed_records']:,} ({s['source_duplicates']} ids written twice by a producer itself) |
| on the source, aborted (read_uncommitted only) | {s['source_aborted_records']:,} |
| on the target | {s['target_records']:,} |
| **committed or acknowledged records missing on the target (lost)** | **{s['lost']}** |
| **records of aborted transactions visible on the target** | **{s['aborted_on_target']}** |
| ids on the target never on the source | {s['foreign']} |
| **duplicates written by strait** (target copies beyond the source's) | **{s['strait_duplicates']}** |
| duplicates strait reported in its logs | {s['strait_reported_duplicates']} |
| strait exits by itself | {len(s['strait_exits'])} |

{abort_text}

{dup_text}{finding}{other_text}{kafka_text}

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
`reconnects`: `connection lost; connecting again` lines (a broker went away: its client
reconnects and retries); `stalls`: `flow stalled; retrying` lines (a round failed and the flow
resumes from its map); `duplicate sequence`: batches the
target answered with DUPLICATE_SEQUENCE_NUMBER after it restarted ("batch already written,
offset unknown": strait then resumes from its map and matches the target's tail); `loss lines`:
records reported deleted on the source before mirroring.

| log | recovered | duplicates | reconnects | stalls | duplicate sequence | loss lines |
|---|---|---|---|---|---|---|
{chr(10).join(inc_rows)}

Errors the producers' librdkafka reported during broker restarts: plain
{s['plain_producer_errors'] or 'none'} (producers made: {s['plain_producers_made']});
transactional {s['txn_producer_errors'] or 'none'} (producers made: {s['txn_producers_made']}).
"""
    path.write_text(text)


if __name__ == "__main__":
    main()
