"""What reading the source groups' committed offsets costs the source broker, strait beside
MirrorMaker 2 (`bench/capture-cost` runs this).

GROUPS consumer groups (default 1,000), each with a fixed set of 10 partitions of a source topic
set of PARTITIONS partitions (default 10,000: two topics of 5,000, as Kafka's KRaft controller
refuses one CreateTopics of 10,000 partitions), commit on COMMIT_PARTITIONS (default 3) of their
partitions every second, spread evenly over the second (AlterConsumerGroupOffsets from 16
librdkafka admin clients: the groups are empty). Then, one after another, each mirror runs alone
on an MM2 file of its own (its own cluster aliases, so its own remote topics), and once it has
copied the source's few records per partition, a window of WINDOW seconds is measured:

- the mirror reaches the source only through a counting proxy (this file, `proxy`): the source
  broker advertises the proxy's address on a listener of its own (FAR), as `bench/distance`
  does. The proxy reads each Kafka frame's header (api key, version, correlation id) both ways,
  counts requests and their bytes by api key, both directions, and parses every OffsetFetch
  answer (v1 to v10) to count the partition entries it carries;
- the source broker's CPU: utime + stime from /proc/<pid>/stat over the window, less the same
  over windows with no mirror at all (the commit load alone), the first run and another later;
- the mirror's own CPU, for reference.

The figures are printed, never asserted. Writes --out (JSON) and prints a Markdown table.
"""

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")
TOPIC_PREFIX = "cap"
GROUP_PREFIX = "cap-app-"
API_NAMES = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit",
             9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
             14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups", 18: "ApiVersions",
             19: "CreateTopics", 22: "InitProducerId", 32: "DescribeConfigs", 36: "SaslHandshake",
             37: "CreatePartitions", 42: "DeleteGroups", 60: "DescribeCluster",
             68: "ConsumerGroupHeartbeat", 69: "ConsumerGroupDescribe", 71: "GetTelemetrySubscriptions"}
OFFSET_FETCH = 9


def log(msg):
    print(f"capture-cost: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# The counting proxy.


class Reader:
    def __init__(self, buf, pos=0):
        self.b, self.p = buf, pos

    def take(self, n):
        if self.p + n > len(self.b):
            raise ValueError("short frame")
        v = self.b[self.p:self.p + n]
        self.p += n
        return v

    def i16(self):
        return int.from_bytes(self.take(2), "big", signed=True)

    def i32(self):
        return int.from_bytes(self.take(4), "big", signed=True)

    def uvarint(self):
        shift = value = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def string(self, flexible):
        n = self.uvarint() - 1 if flexible else self.i16()
        if n > 0:
            self.take(n)

    def array_len(self, flexible):
        return self.uvarint() - 1 if flexible else self.i32()

    def tags(self, flexible):
        if flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self.take(self.uvarint())


def offset_fetch_entries(version, payload):
    """(groups, partition entries) in one OffsetFetch response (v1 to v10), header included."""
    flexible = version >= 6
    r = Reader(payload)
    r.i32()  # correlation id
    r.tags(flexible)  # response header v1
    if version >= 3:
        r.i32()  # throttle

    def topics():
        entries = 0
        for _ in range(max(0, r.array_len(flexible))):
            if version >= 10:
                r.take(16)  # topic id
            else:
                r.string(flexible)
            for _ in range(max(0, r.array_len(flexible))):
                r.take(4 + 8)  # partition, committed offset
                if version >= 5:
                    r.take(4)  # leader epoch
                r.string(flexible)  # metadata
                r.take(2)  # error
                r.tags(flexible)
                entries += 1
            r.tags(flexible)
        return entries

    if version >= 8:
        groups = entries = 0
        for _ in range(max(0, r.array_len(flexible))):
            r.string(flexible)
            entries += topics()
            r.take(2)
            r.tags(flexible)
            groups += 1
        return groups, entries
    return 1, topics()


class Counts:
    def __init__(self):
        self.by_api = {}  # key -> [requests, request bytes, answers, answer bytes]
        self.versions = {}  # "key:version" -> requests
        self.of_groups = self.of_entries = self.parse_errors = 0
        self.connections = 0

    def snapshot(self):
        return {"time": time.time(), "by_api": {str(k): v for k, v in self.by_api.items()},
                "versions": self.versions, "offset_fetch_groups": self.of_groups,
                "offset_fetch_entries": self.of_entries, "parse_errors": self.parse_errors,
                "connections": self.connections}


async def pump_requests(reader, writer, inflight, counts):
    while True:
        head = await reader.readexactly(4)
        payload = await reader.readexactly(int.from_bytes(head, "big"))
        key = int.from_bytes(payload[0:2], "big")
        version = int.from_bytes(payload[2:4], "big")
        corr = int.from_bytes(payload[4:8], "big")
        inflight[corr] = (key, version)
        c = counts.by_api.setdefault(key, [0, 0, 0, 0])
        c[0] += 1
        c[1] += 4 + len(payload)
        v = f"{key}:{version}"
        counts.versions[v] = counts.versions.get(v, 0) + 1
        writer.write(head + payload)
        await writer.drain()


async def pump_answers(reader, writer, inflight, counts):
    while True:
        head = await reader.readexactly(4)
        payload = await reader.readexactly(int.from_bytes(head, "big"))
        corr = int.from_bytes(payload[0:4], "big")
        key, version = inflight.pop(corr, (None, None))
        if key is not None:
            c = counts.by_api.setdefault(key, [0, 0, 0, 0])
            c[2] += 1
            c[3] += 4 + len(payload)
            if key == OFFSET_FETCH:
                try:
                    g, e = offset_fetch_entries(version, payload)
                    counts.of_groups += g
                    counts.of_entries += e
                except (ValueError, IndexError):
                    counts.parse_errors += 1
        writer.write(head + payload)
        await writer.drain()


async def proxy_main(listen, upstream, stats):
    counts = Counts()

    async def serve(creader, cwriter):
        counts.connections += 1
        try:
            ureader, uwriter = await asyncio.open_connection("127.0.0.1", upstream)
        except OSError:
            cwriter.close()
            return
        inflight = {}
        tasks = [asyncio.ensure_future(pump_requests(creader, uwriter, inflight, counts)),
                 asyncio.ensure_future(pump_answers(ureader, cwriter, inflight, counts))]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for t in tasks:
            t.cancel()
        for w in (cwriter, uwriter):
            w.close()

    server = await asyncio.start_server(serve, "127.0.0.1", listen)
    tmp = Path(str(stats) + ".tmp")
    async with server:
        while True:
            tmp.write_text(json.dumps(counts.snapshot()))
            tmp.replace(stats)
            await asyncio.sleep(0.25)


# ---------------------------------------------------------------------------------------------
# The source: topics, records, groups and their commits.


def topic_names(partitions):
    return [f"{TOPIC_PREFIX}-0", f"{TOPIC_PREFIX}-1"], partitions // 2


def make_source(bootstrap, partitions, records):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics, per_topic = topic_names(partitions)
    for t in topics:
        started = time.time()
        admin.create_topics([NewTopic(t, per_topic, 1)], operation_timeout=300,
                            request_timeout=330)[t].result()
        log(f"created {t} ({per_topic} partitions) in {time.time() - started:.1f} s")
    # Every partition has its leader before anything is written (a loaded combined node takes a
    # while to apply 10,000 partitions).
    for _ in range(300):
        md = admin.list_topics(timeout=30).topics
        if all(t in md and len(md[t].partitions) == per_topic
               and all(pm.leader >= 0 for pm in md[t].partitions.values()) for t in topics):
            break
        time.sleep(1)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "compression.type": "lz4", "log_level": 3,
                  "queue.buffering.max.messages": 1_000_000})
    for t in topics:
        for q in range(per_topic):
            for i in range(records):
                while True:
                    try:
                        p.produce(t, value=b"x" * 100, partition=q)
                        break
                    except BufferError:
                        p.poll(0.1)
    left = p.flush(300)
    if left:
        raise RuntimeError(f"{left} records not delivered")
    log(f"{records} records of 100 B in each of {partitions} partitions")


class Committer(threading.Thread):
    """GROUPS empty groups, each committing COMMIT partitions of its fixed OWN partitions every
    second, group g at g/GROUPS of each second."""

    CLIENTS = 16

    def __init__(self, bootstrap, groups, partitions, own, commit, records):
        super().__init__(daemon=True)
        from confluent_kafka.admin import AdminClient

        self.admins = [AdminClient({"bootstrap.servers": bootstrap}) for _ in range(self.CLIENTS)]
        topics, per_topic = topic_names(partitions)
        self.names = [f"{GROUP_PREFIX}{g:05d}" for g in range(groups)]
        # Group g owns partitions g*OWN .. g*OWN+OWN-1 of the whole set (wrapping when the groups
        # need more than there are).
        self.owned = [[(topics[(p % partitions) // per_topic], (p % partitions) % per_topic)
                       for p in range(g * own, g * own + own)] for g in range(groups)]
        self.commit, self.records = commit, records
        self.lock = threading.Lock()
        self.issued = self.done = self.errors = self.skipped = self.entries = 0
        self.inflight = 0
        self.stopped = threading.Event()

    def request(self, g, tps, timeout=60):
        from confluent_kafka import ConsumerGroupTopicPartitions

        return self.admins[g % len(self.admins)].alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(self.names[g], tps)], request_timeout=timeout)[self.names[g]]

    def prime(self):
        """Every group commits on all its partitions once (so each answer holds OWN entries)."""
        from confluent_kafka import TopicPartition

        started = time.time()
        left = list(range(len(self.names)))
        for attempt in range(5):
            failed = []
            for first in range(0, len(left), 200):
                batch = left[first:first + 200]
                futures = [self.request(g, [TopicPartition(t, q, 1) for t, q in self.owned[g]], 180)
                           for g in batch]
                for g, f in zip(batch, futures):
                    try:
                        f.result(200)
                    except Exception as e:  # noqa: BLE001 - a loaded broker: asked again
                        failed.append(g)
                        error = e
            if not failed:
                break
            log(f"{len(failed)} groups not committed yet ({error}); again")
            left = failed
        else:
            raise RuntimeError(f"{len(left)} groups could not commit")
        log(f"{len(self.names)} groups committed on their {len(self.owned[0])} partitions each "
            f"in {time.time() - started:.1f} s")

    def finished(self, future):
        with self.lock:
            self.inflight -= 1
            if future.exception() is not None:
                self.errors += 1
            else:
                self.done += 1

    def snapshot(self):
        with self.lock:
            return {"issued": self.issued, "done": self.done, "errors": self.errors,
                    "skipped": self.skipped, "entries": self.entries}

    def run(self):
        from confluent_kafka import TopicPartition

        n = len(self.names)
        own = len(self.owned[0])
        start = time.monotonic()
        tick = 0
        while not self.stopped.is_set():
            rnd, g = divmod(tick, n)
            due = start + rnd + g / n
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(min(wait, 0.5))
                continue
            tick += 1
            # Offsets move forward through the few records and start again.
            offset = 1 + rnd % self.records
            tps = [TopicPartition(*self.owned[g][(rnd * self.commit + j) % own], offset)
                   for j in range(self.commit)]
            with self.lock:
                if self.inflight > n:  # the broker is a second behind: do not pile up
                    self.skipped += 1
                    continue
                self.inflight += 1
                self.issued += 1
                self.entries += len(tps)
            self.request(g, tps).add_done_callback(self.finished)


# ---------------------------------------------------------------------------------------------
# The mirrors.


def write_config(path, lines):
    path.write_text("\n".join(lines) + "\n")


def mirror_config(work, run, src, tgt, proxy, target, topics):
    lines = [
        f"clusters = {src}, {tgt}",
        f"{src}.bootstrap.servers = {proxy}",
        f"{tgt}.bootstrap.servers = {target}",
        f"{src}->{tgt}.enabled = true",
        f"{src}->{tgt}.topics = {'|'.join(topics)}",
        f"{src}->{tgt}.groups = {GROUP_PREFIX}.*",
        "replication.factor = 1",
        "checkpoints.topic.replication.factor = 1",
        "heartbeats.topic.replication.factor = 1",
        "offset-syncs.topic.replication.factor = 1",
    ] + run["extra"](src, tgt)
    if run["kind"] == "mm2":
        lines += [
            f"{tgt}->{src}.enabled = false",
            f"{tgt}->{src}.emit.heartbeats.enabled = false",
            "offset.storage.replication.factor = 1",
            "status.storage.replication.factor = 1",
            "config.storage.replication.factor = 1",
            "sync.topic.acls.enabled = false",
        ]
    path = work / f"{src}-{tgt}.properties"
    write_config(path, lines)
    return path


RUNS = {
    "none": {"kind": "none", "label": "no mirror (the commit load alone)", "extra": lambda s, t: []},
    "strait": {"kind": "strait", "label": "strait (capture every 1 s, the default)",
               "extra": lambda s, t: []},
    "strait-nockpt": {"kind": "strait", "label": "strait, checkpoints off (its data path alone)",
                      "extra": lambda s, t: [f"{s}->{t}.emit.checkpoints.enabled = false"]},
    "mm2": {"kind": "mm2", "label": "MM2 (emit.checkpoints.interval.seconds = 60, the default)",
            "extra": lambda s, t: []},
    "mm2-1s": {"kind": "mm2", "label": "MM2 (emit.checkpoints.interval.seconds = 1)",
               "extra": lambda s, t: [f"{s}->{t}.emit.checkpoints.interval.seconds = 1"]},
}


def start_mirror(args, work, run, cfg, name):
    out = open(work / f"{name}.log", "w")
    if run["kind"] == "strait":
        cmd = [args.strait, "run", "--config", str(cfg), "--listen", "off"]
        env = dict(os.environ, RUST_LOG="info", NO_COLOR="1")
    else:
        root = Path(__file__).resolve().parent.parent
        cmd = [args.java, "-Xms256M", "-Xmx2G", "-XX:+UseG1GC",
               f"-Dlog4j2.configurationFile={root / 'scripts/kafka/log4j2.properties'}",
               "-cp", args.mm2_classpath, "org.apache.kafka.connect.mirror.MirrorMaker", str(cfg),
               "--clusters", cfg.stem.split("-")[1]]
        env = dict(os.environ)
    return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)


def stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


def copied(target_admin, remote_topics, per_topic):
    """Records on the target's remote topics, or None while any is missing."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    md = target_admin.list_topics(timeout=30).topics
    if any(t not in md or len(md[t].partitions) < per_topic for t in remote_topics):
        return None
    req = {TopicPartition(t, q): OffsetSpec.latest() for t in remote_topics for q in range(per_topic)}
    total = 0
    for f in target_admin.list_offsets(req, request_timeout=60).values():
        total += f.result().offset
    return total


def clean_target(target_admin):
    topics = [t for t in target_admin.list_topics(timeout=30).topics if not t.startswith("_")]
    if topics:
        for f in target_admin.delete_topics(topics, operation_timeout=120, request_timeout=150).values():
            try:
                f.result()
            except Exception as e:  # noqa: BLE001 - a topic already gone
                log(f"delete: {e}")
    for _ in range(120):
        if not [t for t in target_admin.list_topics(timeout=30).topics if not t.startswith("_")]:
            return
        time.sleep(1)


def cpu_ticks(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return int(rest[11]) + int(rest[12])
    except (OSError, IndexError):
        return None


def read_stats(path):
    for _ in range(20):
        try:
            return json.loads(Path(path).read_text())
        except (OSError, ValueError):
            time.sleep(0.1)
    raise RuntimeError(f"no proxy stats in {path}")


def measure(args, stats, committer, mirror_pid, window):
    def snap():
        return {"proxy": read_stats(stats), "broker": cpu_ticks(args.source_pid),
                "mirror": cpu_ticks(mirror_pid) if mirror_pid else None,
                "commits": committer.snapshot(), "time": time.time()}

    a = snap()
    time.sleep(window)
    b = snap()
    secs = b["proxy"]["time"] - a["proxy"]["time"]
    wall = b["time"] - a["time"]
    apis = {}
    for k, v in b["proxy"]["by_api"].items():
        v0 = a["proxy"]["by_api"].get(k, [0, 0, 0, 0])
        d = [x - y for x, y in zip(v, v0)]
        if any(d):
            apis[API_NAMES.get(int(k), k)] = {"requests_per_s": d[0] / secs,
                                               "request_bytes_per_s": d[1] / secs,
                                               "answer_bytes_per_s": d[3] / secs}
    commits = {k: (b["commits"][k] - a["commits"][k]) / wall for k in a["commits"]}
    return {
        "window_s": round(wall, 1),
        "apis": apis,
        "offset_fetch_groups_per_s": (b["proxy"]["offset_fetch_groups"] - a["proxy"]["offset_fetch_groups"]) / secs,
        "offset_fetch_entries_per_s": (b["proxy"]["offset_fetch_entries"] - a["proxy"]["offset_fetch_entries"]) / secs,
        "parse_errors": b["proxy"]["parse_errors"] - a["proxy"]["parse_errors"],
        "versions": b["proxy"]["versions"],
        "broker_cpu_pct": 100 * (b["broker"] - a["broker"]) / CLK_TCK / wall,
        "mirror_cpu_pct": (100 * (b["mirror"] - a["mirror"]) / CLK_TCK / wall
                           if a["mirror"] is not None and b["mirror"] is not None else None),
        "commits_per_s": commits,
    }


def table(result):
    base = [r["broker_cpu_pct"] for r in result["runs"] if r["run"] == "none"]
    baseline = sum(base) / len(base) if base else None
    rows = ["| mirror | OffsetFetch requests/s | groups/s in answers | partition entries/s in answers "
            "| OffsetFetch bytes/s (requests + answers) | other group reads/s (ListGroups, FindCoordinator, "
            "DescribeGroups) | source broker CPU, % of a core (over no mirror) | mirror CPU, % of a core |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in result["runs"]:
        of = r["apis"].get("OffsetFetch", {"requests_per_s": 0, "request_bytes_per_s": 0, "answer_bytes_per_s": 0})
        other = sum(r["apis"].get(a, {}).get("requests_per_s", 0)
                    for a in ("ListGroups", "FindCoordinator", "DescribeGroups"))
        over = "" if baseline is None or r["run"] == "none" else f" ({r['broker_cpu_pct'] - baseline:+.1f})"
        mirror = "" if r["mirror_cpu_pct"] is None else f"{r['mirror_cpu_pct']:.1f}"
        rows.append(
            f"| {r['label']} | {of['requests_per_s']:.1f} | {r['offset_fetch_groups_per_s']:,.0f} "
            f"| {r['offset_fetch_entries_per_s']:,.0f} "
            f"| {of['request_bytes_per_s'] + of['answer_bytes_per_s']:,.0f} "
            f"({of['request_bytes_per_s']:,.0f} + {of['answer_bytes_per_s']:,.0f}) | {other:.1f} "
            f"| {r['broker_cpu_pct']:.1f}{over} | {mirror} |")
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("proxy_or_bench", nargs="?", default="bench", choices=["bench", "proxy"])
    ap.add_argument("--listen", type=int)
    ap.add_argument("--upstream", type=int)
    ap.add_argument("--stats")
    ap.add_argument("--strait")
    ap.add_argument("--mm2-classpath")
    ap.add_argument("--java", default="java")
    ap.add_argument("--source")
    ap.add_argument("--source-pid", type=int)
    ap.add_argument("--target")
    ap.add_argument("--far-port", type=int)
    ap.add_argument("--proxy-port", type=int)
    ap.add_argument("--work")
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=10000)
    ap.add_argument("--own", type=int, default=10, help="partitions each group commits on")
    ap.add_argument("--commit", type=int, default=3, help="of those, committed every second")
    ap.add_argument("--records", type=int, default=10, help="records per partition")
    ap.add_argument("--window", type=int, default=120, help="seconds measured per run")
    ap.add_argument("--settle", type=int, default=15,
                    help="seconds between a mirror's copy of the records and its window")
    ap.add_argument("--copy-timeout", type=int, default=900)
    ap.add_argument("--runs", default="none,strait,mm2,none,mm2-1s,strait-nockpt")
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.proxy_or_bench == "proxy":
        asyncio.run(proxy_main(args.listen, args.upstream, args.stats))
        return

    from confluent_kafka.admin import AdminClient

    runs = args.runs.split(",")
    for r in runs:
        if r not in RUNS:
            ap.error(f"unknown run {r} (known: {', '.join(RUNS)})")
    if args.partitions % 2:
        ap.error("--partitions: an even number (two topics)")
    work = Path(args.work)
    stats = work / "proxy-stats.json"
    proxy = subprocess.Popen([sys.executable, __file__, "proxy", "--listen", str(args.proxy_port),
                              "--upstream", str(args.far_port), "--stats", str(stats)],
                             start_new_session=True)
    procs = [proxy]
    try:
        make_source(args.source, args.partitions, args.records)
        committer = Committer(args.source, args.groups, args.partitions, args.own, args.commit, args.records)
        committer.prime()
        committer.start()
        log(f"{args.groups} groups commit on {args.commit} of their {args.own} partitions every second")
        time.sleep(10)
        topics, per_topic = topic_names(args.partitions)
        target_admin = AdminClient({"bootstrap.servers": args.target})
        proxy_addr = f"127.0.0.1:{args.proxy_port}"
        result = {"groups": args.groups, "partitions": args.partitions, "own": args.own,
                  "commit": args.commit, "records_per_partition": args.records,
                  "window_s": args.window, "runs": []}
        for i, name in enumerate(runs):
            run = RUNS[name]
            mirror = None
            if run["kind"] != "none":
                src, tgt = f"src{i}", f"tgt{i}"
                cfg = mirror_config(work, run, src, tgt, proxy_addr, args.target, topics)
                if run["kind"] == "mm2":
                    # MM2 creates all its remote topics in one CreateTopics, which Kafka's KRaft
                    # controller refuses at 10,000 partitions in all ("Excessively large number
                    # of partitions per request"), and its producer then auto-creates them with
                    # one partition each: they are made here first, one at a time, as an
                    # operator would. strait creates its remote topics one at a time itself.
                    from confluent_kafka.admin import NewTopic

                    for t in topics:
                        target_admin.create_topics([NewTopic(f"{src}.{t}", per_topic, 1)], operation_timeout=300,
                                                   request_timeout=330)[f"{src}.{t}"].result()
                mirror = start_mirror(args, work, run, cfg, name)
                procs.append(mirror)
                started = time.time()
                remote = [f"{src}.{t}" for t in topics]
                want = args.partitions * args.records
                have = None
                while time.time() - started < args.copy_timeout:
                    time.sleep(5)
                    if mirror.poll() is not None:
                        break
                    try:
                        have = copied(target_admin, remote, per_topic)
                    except Exception as e:  # noqa: BLE001 - topics being made
                        log(f"{name}: target not readable yet ({e})")
                        have = None
                    if have is not None and have >= want:
                        break
                log(f"{name}: {have} of {want} records on the target after {time.time() - started:.0f} s")
                if mirror.poll() is not None:
                    log(f"{name} exited {mirror.returncode} before its window: see {work / name}.log")
                    clean_target(target_admin)
                    continue
                time.sleep(args.settle)
            log(f"{name}: measuring {args.window} s")
            m = measure(args, stats, committer, mirror.pid if mirror else None, args.window)
            m.update(run=name, label=run["label"])
            if mirror and mirror.poll() is not None:
                m["label"] += f" (exited {mirror.returncode} in its window)"
            if mirror:
                m["copy_s"] = round(time.time() - started - args.window - args.settle, 1)
                stop(mirror)
                clean_target(target_admin)
            result["runs"].append(m)
            of = m["apis"].get("OffsetFetch", {}).get("requests_per_s", 0)
            log(f"{name}: OffsetFetch {of:.1f}/s, entries {m['offset_fetch_entries_per_s']:.0f}/s, "
                f"broker CPU {m['broker_cpu_pct']:.1f}%, commits {m['commits_per_s']['done']:.0f}/s")
            if args.out:
                Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
        committer.stopped.set()
        print(table(result))
        print()
        print(json.dumps({r["run"]: {"commits_per_s": r["commits_per_s"], "apis": r["apis"],
                                     "parse_errors": r["parse_errors"]} for r in result["runs"]}, indent=1))
    finally:
        for p in procs:
            stop(p)


if __name__ == "__main__":
    main()
