#!/usr/bin/env python3
"""The benchmark driver behind `bench/run`: three mirrors side by side on two local Apache Kafka
4.4.0 clusters (single-node KRaft, `scripts/test-broker`): strait, Kafka's own MirrorMaker 2
(dedicated mode, tuned for throughput) and the baseline record-level mirror on librdkafka; plus
the broker-bound ceiling (the source's batches replayed into the target by a raw producer), then
translation precision. Writes the JSON results; bench/report.py turns them into
docs/benchmarks.md and its charts.

Every run copies the same pre-loaded source topic to a target topic of its own (unique cluster
aliases per run, so no run sees another's topics; every topic a run made is deleted after it).
Each run is watched from outside the same way for every mirror (`bench-tool watch`): the target
topic's end offsets are polled every 100 ms, with the CPU time (utime + stime, every thread:
the MM2 JVM's included) of the mirror and of both brokers read from /proc/<pid>/stat at each
poll. The measured window runs from the poll where WARMUP_SHARE of the records are on the
target to the poll where all of them are: the mirror's start-up (a JVM, Connect's herders,
topic creation) and its first seconds of data (JIT compilation) stay out of the window; they
are reported beside it. Peak RSS is the mirror process's, from wait4(). Repetitions are
interleaved (the mirrors take turns going first) and the median is reported.

Across a distance (`--source-rtt-ms`, run by `bench/distance`): the mirrors run near the target
and reach the source through a toxiproxy link (`Link`) whose latency toxics add half the round
trip in each direction (20 ms RTT = 10 ms each way), optionally with a bandwidth toxic; the
source broker advertises the proxy's address to clients that come through it (a listener of its
own, FAR). The loader and the watcher talk to both brokers directly. Each run records the whole
copy (mirror start to all records on the target, start-up included) beside the window. Results
go to a JSON of their own (bench/results/distance.json); bench/report.py --distance renders
them into the "Across a distance" section of docs/benchmarks.md.
"""

import argparse
import ctypes
import datetime
import json
import os
import platform
import re
import shlex
import signal
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_broker_pin(name):
    """A version scripts/test-broker pins (KAFKA_VERSION, MM2_VERSION): what the run measures."""
    text = (ROOT / "scripts" / "test-broker").read_text()
    return re.search(rf"^{name}=(\S+)$", text, re.M).group(1)


KAFKA_VERSION = test_broker_pin("KAFKA_VERSION")
MM2_VERSION = test_broker_pin("MM2_VERSION")
BENCH = ROOT / "bench"
TOOLS = BENCH / "target" / "release"
TEST_BROKER = ROOT / "scripts" / "test-broker"
KAFKA_CONF = ROOT / "scripts" / "kafka"
CORES = os.cpu_count() or 1

CODECS = ["none", "lz4", "zstd"]
# The mirrors measured, and the broker-bound reference.
MIRRORS = ["strait", "mm2", "baseline"]
RUNNERS = MIRRORS + ["ceiling"]
# The share of the records that must be on the target before the measured window opens.
WARMUP_SHARE = 0.10
# ... for the many-partition workload: Kafka's first append to each new partition is costly
# (measured here: about 5 s of target broker CPU for a new 1,024-partition topic, against 0.7 s
# for the same batches into partitions already written), and every mirror's first round writes
# to every partition, so its window opens later.
WARMUP_SHARE_MANY_PARTITIONS = 0.25
POLL_MS = 100
# How long a mirror may take to copy a workload before its run is recorded as incomplete and
# the benchmark goes on: the slowest complete run takes well under a minute. (MM2's Java
# producer was seen retrying OUT_OF_ORDER_SEQUENCE_NUMBER on one new partition for good, with
# Connect's unbounded delivery timeout: that run never ends by itself.)
MIRROR_TIMEOUT_S = 300
# The workloads of a quick run: every codec, both record sizes, 1, 64 and 1,024 partitions.
QUICK = ["100B-lz4-p64", "100B-zstd-p1", "1024B-none-p64", "1024B-lz4-p1024"]
# Broker heap for the benchmark clusters: kafka-server-start.sh's default.
BROKER_HEAP = "1g"
# MM2's JVM as bin/connect-mirror-maker.sh starts it (its heap) through kafka-run-class.sh
# (KAFKA_JVM_PERFORMANCE_OPTS).
MM2_JVM = [
    "-Xms256M", "-Xmx2G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
]


def matrix(quick):
    """The workload matrix: record size x codec x partitions, and one many-partition case.

    A full run moves about 0.7 GB of payload per workload (keys and headers included), so that
    MM2's measured window lasts tens of seconds and strait's several; a quick run a tenth of
    it. The many-partition case has 400 records per partition (30 batches), so that the
    broker's cost of a first write to each new partition falls in the part left out
    (WARMUP_SHARE_MANY_PARTITIONS)."""
    out = []
    for size in (100, 1024):
        records = (5_000_000 if size == 100 else 650_000) // (10 if quick else 1)
        for codec in CODECS:
            for partitions in (1, 64):
                out.append(
                    {
                        "name": f"{size}B-{codec}-p{partitions}",
                        "size": size,
                        "codec": codec,
                        "partitions": partitions,
                        "records": records,
                    }
                )
    per_partition = 160 if quick else 400
    out.append(
        {
            "name": "1024B-lz4-p1024",
            "size": 1024,
            "codec": "lz4",
            "partitions": 1024,
            "records": 1024 * per_partition,
            "warmup_share": WARMUP_SHARE_MANY_PARTITIONS,
        }
    )
    return out


# Ten thousand partitions (`--partitions-10k`, run by `bench/run --partitions-10k`): 1 KiB lz4
# records, 64 per partition (about 0.65 GB of payload, as much as a full run's workloads), over
# two source topics of 5,000 partitions each. Two topics because Kafka's KRaft controller refuses
# any single operation of more than 10,000 metadata records (QuorumController's
# MAX_RECORDS_PER_USER_OP, not configurable): a CreateTopics of one 10,000-partition topic is a
# TopicRecord and 10,000 PartitionRecords, refused with POLICY_VIOLATION "Unable to perform
# excessively large batch operation"; the same holds for one CreateTopics naming topics whose
# partitions add up to 10,000. The window opens at WARMUP_SHARE_MANY_PARTITIONS, as for 1,024
# partitions; the start-up figures (spawn to the first record, and to every partition written)
# are what this mode is for. The watch polls every 250 ms (two ListOffsets of 5,000 partitions
# per poll), and a mirror may take 10 minutes.
P10K_TOPICS = 2
P10K_PER_PARTITION = 64
P10K_POLL_MS = 250
P10K_TIMEOUT_S = 600
# The mirrors measured at 10,000 partitions: the baseline and the ceiling copy one topic each.
P10K_RUNNERS = ["strait", "mm2"]
# The brokers' settings for 10,000 partitions, after scripts/kafka/broker.properties: that file's
# 6 s broker session (for quick restarts in tests) is too short for a combined node that must
# apply 10,000 partition changes: on the loaded 2 cores here its heartbeats to its own
# controller came late, the controller fenced it (an event of 20 s: every partition loses its
# leader, then gets it back), and the mirrors stalled meanwhile. Kafka's defaults (9 s session,
# 2 s heartbeat) are not enough either on a shared machine; 60 s leaves room.
P10K_BROKER_PROPS = "broker.session.timeout.ms=60000\nbroker.heartbeat.interval.ms=2000\n"


def partitions_10k_workload():
    partitions = 10_000
    return {"name": "1024B-lz4-p10000", "size": 1024, "codec": "lz4", "partitions": partitions,
            "topics": P10K_TOPICS, "records": partitions * P10K_PER_PARTITION,
            "warmup_share": WARMUP_SHARE_MANY_PARTITIONS}


def source_topics(wl):
    """The source topics of a workload: one, or `topics` of them sharing its partitions and
    records evenly."""
    n = wl.get("topics", 1)
    return [f"bench-{wl['name']}"] if n == 1 else [f"bench-{wl['name']}-{i}" for i in range(n)]


def broker_files(pid):
    """Open file descriptors and memory maps of a broker (what 10,000 partitions cost it in
    `ulimit -n` and vm.max_map_count); None once it is gone."""
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        with open(f"/proc/{pid}/maps") as f:
            maps = sum(1 for _ in f)
    except OSError:
        return None
    return {"fds": fds, "maps": maps}


# Across a distance: 1 KiB records, about 100 MB of payload per workload, 1 and 64 partitions,
# uncompressed and lz4. The partition sweep (--partition-sweep): 20 MB each over 8, 64 and 128
# partitions, to show how start-up grows with the partition count at a distance.
DISTANCE_RECORDS = 100_000
SWEEP_RECORDS = 20_000
# The slowest complete run across a distance takes well under a minute; an MM2 run caught in the
# OUT_OF_ORDER_SEQUENCE_NUMBER loop (see MIRROR_TIMEOUT_S) never ends, and is made again once.
DISTANCE_TIMEOUT_S = 180


def distance_matrix(sweep=False):
    if sweep:
        return [{"name": f"1024B-lz4-p{p}-20MB", "size": 1024, "codec": "lz4", "partitions": p,
                 "records": SWEEP_RECORDS} for p in (8, 64, 128)]
    return [{"name": f"1024B-{codec}-p{p}", "size": 1024, "codec": codec, "partitions": p,
             "records": DISTANCE_RECORDS} for codec in ("none", "lz4") for p in (1, 64)]


def workloads(quick):
    """A full run's workloads: the whole matrix; a quick run's: QUICK, with less data."""
    return [w for w in matrix(quick) if not quick or w["name"] in QUICK]


def log(msg):
    print(f"[{datetime.datetime.now().strftime('%H:%M:%S')}] {msg}", flush=True)


def run(cmd, **kw):
    """Runs a command, returns its stdout; fails loudly with its output."""
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError(f"{shlex.join(map(str, cmd))} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p.stdout


def json_line(text):
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"no JSON line in output:\n{text}")


class Clusters:
    """The test-broker pair, started once: Apache Kafka (KAFKA_VERSION), data on disk."""

    def __init__(self, workdir, far=None, extra_props=""):
        """With `far` ({side: (FAR_PORT, PROXY_PORT)}): each far side's broker (source or
        target) also listens on FAR_PORT (listener FAR) and advertises PROXY_PORT there, so a
        client that bootstraps at the proxy is sent back to the proxy by the metadata (a Link
        forwards PROXY_PORT to FAR_PORT)."""
        self.dir = Path(workdir)
        props = self.dir.parent / "bench-broker.properties"
        # Deleted topics leave the disk at once instead of a minute later, so one run's
        # clean-up does not land in the next run's window.
        props.write_text("file.delete.delay.ms=0\n" + extra_props)
        env = dict(os.environ)
        env.setdefault("STRAIT_KAFKA_HEAP", BROKER_HEAP)
        self.heap = env["STRAIT_KAFKA_HEAP"]
        extra = []
        for far_side, (far_port, proxy_port) in (far or {}).items():
            far_props = self.dir.parent / f"{far_side}-far.properties"
            # test-broker fills in the other listeners' ports; the keys replace broker.properties'.
            far_props.write_text(
                f"listeners=PLAINTEXT://127.0.0.1:@PORT@,CONTROLLER://127.0.0.1:@CONTROLLER_PORT@,"
                f"INTERNAL://127.0.0.1:@INTERNAL_PORT@,FAR://127.0.0.1:{far_port}\n"
                f"advertised.listeners=PLAINTEXT://127.0.0.1:@PORT@,INTERNAL://127.0.0.1:@INTERNAL_PORT@,"
                f"FAR://127.0.0.1:{proxy_port}\n"
                "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,"
                "FAR:PLAINTEXT\n")
            extra += ["--props-for", f"{far_side}={far_props}"]
        run([TEST_BROKER, "start", "--dir", self.dir, "--parent", str(os.getpid()), "--props", props, *extra],
            env=env)
        env = {}
        for line in (self.dir / "clusters.env").read_text().splitlines():
            if "=" in line:
                k, v = line.split("=", 1)
                env[k] = v
        self.source = env["SOURCE_BOOTSTRAP"]
        self.target = env["TARGET_BOOTSTRAP"]
        self.source_pid = int(env["SOURCE_PID"])
        self.target_pid = int(env["TARGET_PID"])
        # Where the mirrors reach the source and the target (a Link's address on the far side
        # across a distance), and other processes whose CPU each run's watch samples (the
        # toxiproxy server).
        self.mirror_source = self.source
        self.mirror_target = self.target
        self.extra_pids = []

    def clean(self, keep_source=()):
        """Deletes every topic a run made, on both clusters (the workload's source topic stays)."""
        run([TOOLS / "bench-tool", "clean", "--bootstrap", self.target])
        keep = [a for t in keep_source for a in ("--keep", t)]
        run([TOOLS / "bench-tool", "clean", "--bootstrap", self.source, *keep])

    def stop(self):
        subprocess.run([str(TEST_BROKER), "stop", "--dir", str(self.dir)], capture_output=True)


def free_ports(n):
    """N distinct free loopback ports (all bound at once, so the kernel picks different ones)."""
    import socket

    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Link:
    """The far link: a toxiproxy server (bench/toxiproxy installs it) and one proxy, `address`,
    forwarding to the source broker's FAR listener. `set` puts the round trip and bandwidth:
    a latency toxic of half the RTT on each direction (upstream: mirror to source, downstream:
    source to mirror), and a bandwidth toxic (KB/s) on each when asked. toxiproxy delays each
    chunk it reads by the latency without holding back the ones behind it (up to 1,024 chunks
    of 32 KiB in flight per direction), so the link adds delay, not a window: TCP's own window
    and socket buffer sizes play no part here (the sockets are on loopback), and connection
    set-up costs no round trip."""

    def __init__(self, server, workdir, far_port, proxy_port, name="toxiproxy"):
        api_port = free_ports(1)[0]
        self.api = f"http://127.0.0.1:{api_port}"
        self.address = f"127.0.0.1:{proxy_port}"
        self.log = Path(workdir) / f"{name}.log"
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(
                [str(server), "-host", "127.0.0.1", "-port", str(api_port)], stdout=out, stderr=out,
                stdin=subprocess.DEVNULL, env=dict(os.environ, LOG_LEVEL="warn"), preexec_fn=die_with_parent)
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(self.api + "/version", timeout=2):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"toxiproxy did not start; log {self.log}")
                time.sleep(0.1)
        self._call("POST", "/proxies", {"name": "source", "listen": self.address,
                                        "upstream": f"127.0.0.1:{far_port}", "enabled": True})

    def _call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.api + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            text = r.read()
        return json.loads(text) if text.strip() else None

    def set(self, rtt_ms, bandwidth_kbps=None):
        for toxic in self._call("GET", "/proxies/source/toxics") or []:
            self._call("DELETE", f"/proxies/source/toxics/{toxic['name']}")
        for stream, latency in (("upstream", rtt_ms // 2), ("downstream", rtt_ms - rtt_ms // 2)):
            if latency:
                self._call("POST", "/proxies/source/toxics",
                           {"name": f"latency_{stream}", "type": "latency", "stream": stream, "toxicity": 1.0,
                            "attributes": {"latency": latency, "jitter": 0}})
            if bandwidth_kbps:
                self._call("POST", "/proxies/source/toxics",
                           {"name": f"bandwidth_{stream}", "type": "bandwidth", "stream": stream, "toxicity": 1.0,
                            "attributes": {"rate": bandwidth_kbps}})
        return self._call("GET", "/proxies/source/toxics")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def die_with_parent():
    """In a child before exec: SIGKILL when this driver dies (prctl PR_SET_PDEATHSIG), so a
    mirror (an MM2 JVM, which never exits by itself) cannot outlive an interrupted run."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except OSError:
        pass


def read_trace(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def window_figures(trace, records, wire_bytes, warmup_share=WARMUP_SHARE):
    """The measured window of one watched run (see the module's doc), and what lies outside it.

    Trace columns: cpu[0] the mirror, cpu[1] the source broker, cpu[2] the target broker."""
    first = next(s for s in trace if s["records"] > 0)
    done = trace[-1]
    warm = next(s for s in trace if s["records"] >= warmup_share * records)
    if warm is done:
        # Everything after the warm-up share landed between two polls: from the first record.
        warm = first
    start = warm
    moved = done["records"] - start["records"]
    seconds = max(done["t"] - start["t"], POLL_MS / 1000)
    share = moved / records
    gb = wire_bytes * share / 1e9

    def delta(i):
        a, b = start["cpu"][i], done["cpu"][i]
        return (b - a) if a is not None and b is not None else float("nan")

    mirror, src, tgt = delta(0), delta(1), delta(2)
    # Further columns: the toxiproxy server, across a distance.
    extra = sum(delta(i) for i in range(3, len(done["cpu"])))
    watcher = (done["self_cpu"] or 0) - (start["self_cpu"] or 0)
    busy = (done["busy"] or 0) - (start["busy"] or 0)
    out = {
        "seconds": seconds,
        "window_records": moved,
        "window_from_share": start["records"] / records,
        "records_per_s": moved / seconds,
        "mb_per_s": wire_bytes * share / 1e6 / seconds,
        "cpu_s": mirror,
        "cpu_s_per_gb": mirror / gb,
        "cpu_pct": 100 * mirror / seconds,
        "source_broker_cpu_s": src,
        "target_broker_cpu_s": tgt,
        "source_broker_pct": 100 * src / seconds,
        "target_broker_pct": 100 * tgt / seconds,
        "source_broker_cpu_per_gb": src / gb,
        "target_broker_cpu_per_gb": tgt / gb,
        "proxy_cpu_s": extra,
        "other_cpu_s": max(0.0, busy - mirror - src - tgt - extra - watcher),
        "other_pct": 100 * max(0.0, busy - mirror - src - tgt - extra - watcher) / seconds,
        # Outside the window: start-up (spawn to the first record on the target) and the
        # warm-up phase (first record to the window's start), with the rate over that phase.
        "startup_s": first["t"],
        "warmup_s": start["t"] - first["t"],
        "warmup_records_per_s": (start["records"] - first["records"]) / (start["t"] - first["t"])
        if start["t"] > first["t"] else float("nan"),
        "spawn_to_done_s": done["t"],
        "moving_s": done["t"] - first["t"],
        "mirror_cpu_before_window_s": start["cpu"][0] if start["cpu"][0] is not None else float("nan"),
        "startup_cpu_s": first["cpu"][0] if first["cpu"][0] is not None else float("nan"),
    }
    return out


def watched(name, cmd, clusters, topics, records, logfile, env=None, stop_when_done=False, timeout=None):
    """Runs a mirror command while `bench-tool watch` polls `topics` on the target until they hold
    `records`. A mirror that exits by itself (strait --until-caught-up, the baseline, the ceiling)
    is waited for; one that does not (MM2) is killed once the target is complete."""
    timeout = timeout or MIRROR_TIMEOUT_S
    trace_path = Path(str(logfile) + ".trace.jsonl")
    out_path = Path(str(logfile) + ".out")
    load = os.getloadavg()[0]
    with open(logfile, "w") as err, open(out_path, "w") as stdout:
        p = subprocess.Popen([str(c) for c in cmd], stdout=stdout, stderr=err, stdin=subprocess.DEVNULL, env=env,
                             preexec_fn=die_with_parent)
        w = subprocess.Popen(
            [str(TOOLS / "bench-tool"), "watch", "--bootstrap", clusters.target,
             *[a for t in topics for a in ("--topic", t)], "--records", str(records), "--pid", str(p.pid), "--pid", str(clusters.source_pid),
             "--pid", str(clusters.target_pid), *[a for pid in clusters.extra_pids for a in ("--pid", str(pid))],
             "--exit-pid", str(p.pid), "--interval-ms", str(POLL_MS),
             "--timeout-s", str(timeout), "--out", str(trace_path)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=die_with_parent,
        )
        try:
            wout, werr = w.communicate(timeout=timeout + 60)
            if w.returncode != 0:
                raise RuntimeError(f"{name}: the watch failed: {werr.strip()[-2000:]}; log {logfile}")
        finally:
            if w.poll() is None:
                w.kill()
                w.wait()
            if stop_when_done or w.returncode != 0:
                if p.poll() is None:
                    p.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 300
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                p.send_signal(signal.SIGKILL)
                pid, status, ru = os.wait4(p.pid, 0)
                break
            time.sleep(0.05)
    p.returncode = os.waitstatus_to_exitcode(status)
    if not stop_when_done and p.returncode != 0:
        raise RuntimeError(f"{name} exited {p.returncode}; log {logfile}")
    return {
        "exit_code": p.returncode,
        "stdout": out_path.read_text(),
        "trace": read_trace(trace_path),
        "process_cpu_s": ru.ru_utime + ru.ru_stime,
        "peak_rss_mb": ru.ru_maxrss / 1024,
        "loadavg_1m_before": load,
    }


def strait_phases(logfile):
    """strait's start-up as its log tells it, in seconds from its first log line (its producer
    ready, a fraction of a second after spawn): the last remote topic created, the flow started
    (every partition placed: the target answered ListOffsets for all of them), the first fetch
    that timed out, if one did."""
    first, out = None, {}
    marks = {"remote_topics_created_s": "created remote topic", "flow_started_s": "flow started",
             "first_fetch_timeout_s": "Fetch request to"}
    for line in Path(logfile).read_text(errors="replace").splitlines():
        m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z", line)
        if not m:
            continue
        t = datetime.datetime.fromisoformat(m.group(1)).timestamp()
        first = first if first is not None else t
        for key, text in marks.items():
            if text in line and (key == "remote_topics_created_s" or key not in out):
                out[key] = t - first
    return out


def run_label(wl):
    """A run's name in its log files: the workload's, with the round trip across a distance."""
    return wl["name"] + (f"-rtt{wl['rtt_ms']}" if wl.get("rtt_ms") is not None else "")


def last_log_error(work, who, wl, rep):
    """The last line of a mirror run's logs that reports an error, and how often it came."""
    found, count = "", 0
    for suffix in (".log", ".log.out"):
        path = work / f"{who}-{run_label(wl)}-{rep}{suffix}"
        if not path.exists():
            continue
        for line in path.read_text(errors="replace").splitlines():
            if re.search(r"Error: [A-Z_]+|ERROR", line):
                m = re.search(r"Error: ([A-Z_]+)", line)
                key = m.group(1) if m else line.strip()[:200]
                if key == found:
                    count += 1
                else:
                    found, count = key, 1
    return {"error": found, "times": count} if found else None


def strait_config(path, clusters, topics, src, tgt, extra=()):
    """strait's MM2 file for one run, plus `extra` lines (`--strait-prop`)."""
    path.write_text(
        "\n".join(
            [
                f"clusters = {src}, {tgt}",
                f"{src}.bootstrap.servers = {clusters.mirror_source}",
                f"{tgt}.bootstrap.servers = {clusters.mirror_target}",
                f"{src}->{tgt}.enabled = true",
                f"{src}->{tgt}.topics = {', '.join(topics)}",
                "replication.factor = 1",
                "checkpoints.topic.replication.factor = 1",
                "heartbeats.topic.replication.factor = 1",
                "offset-syncs.topic.replication.factor = 1",
                *extra,
                "",
            ]
        )
    )


def mm2_tuning(wl, wan=False):
    """MM2's throughput settings for a workload: what Kafka's producer and consumer docs and the
    MM2 tuning guides name (batch size, linger, compression, fetch sizes, records per poll,
    tasks), sized like the baseline's librdkafka settings. Returned as (key suffix, value, why)
    triples; `S.` keys go to the source cluster's clients, `T.` keys to the target's."""
    tasks = min(wl["partitions"], CORES)
    per_task = -(-wl["partitions"] // tasks)
    buffer_memory = 256 << 20
    # The Java producer allocates a whole batch.size buffer per partition it batches for: a
    # task's partitions times batch.size must fit in its buffer.memory, with room to spare.
    batch = 1_000_000
    while batch > 16384 and per_task * batch * 2 > buffer_memory:
        batch //= 2
    out = [
        ("tasks.max", tasks, "one task per partition, up to the cores"),
        ("T.producer.batch.size", batch,
         "1 MB batches like the baseline's (smaller where many partitions share a task's buffer)"),
        ("T.producer.linger.ms", 100, "fill batches, as the baseline's librdkafka producer does"),
        ("T.producer.compression.type", wl["codec"], "the source's codec, as the baseline writes"),
        ("T.producer.buffer.memory", buffer_memory, "room for a batch per partition of a task"),
        ("T.producer.max.request.size", 8 << 20, "several full batches per produce request"),
        ("T.producer.enable.idempotence", "true", "as strait and the baseline produce"),
        ("T.producer.max.in.flight.requests.per.connection", 5,
         "Connect's default is 1; idempotence keeps order with up to 5"),
        ("S.consumer.fetch.max.bytes", 52428800, "50 MiB per fetch, as the baseline"),
        ("S.consumer.max.partition.fetch.bytes", 4194304, "4 MiB per partition, as the baseline"),
        ("S.consumer.max.poll.records", 10000, "fewer, larger polls (default 500)"),
    ]
    if wan:
        wan_keys = {k for k, _, _ in WAN_TUNING}
        out = [t for t in out if t[0] not in wan_keys] + WAN_TUNING
    return out


# MM2's source consumer across a distance, as Kafka's docs advise for high-latency links: larger
# fetches (a fetch per round trip must carry more) and socket buffers left to the OS's
# autotuning (-1) instead of the consumer's 64 KiB receive and 128 KiB send buffers, which would
# cap a real WAN's TCP window. These replace the two fetch sizes above.
WAN_TUNING = [
    ("S.consumer.fetch.max.bytes", 104857600, "100 MiB per fetch, across a distance (the broker caps a "
                                              "response at its own fetch.max.bytes, 55 MiB by default)"),
    ("S.consumer.max.partition.fetch.bytes", 16777216, "16 MiB per partition per fetch, across a distance"),
    ("S.consumer.receive.buffer.bytes", -1, "the OS's TCP autotuning, across a distance"),
    ("S.consumer.send.buffer.bytes", -1, "the OS's TCP autotuning, across a distance"),
]


def mm2_config(path, clusters, wl, topics, src, tgt, tuned=True, wan=False):
    lines = [
        f"clusters = {src}, {tgt}",
        f"{src}.bootstrap.servers = {clusters.mirror_source}",
        f"{tgt}.bootstrap.servers = {clusters.mirror_target}",
        f"{src}->{tgt}.enabled = true",
        f"{src}->{tgt}.topics = {', '.join(topics)}",
        f"{tgt}->{src}.enabled = false",
        f"{tgt}->{src}.emit.heartbeats.enabled = false",
        # Single-broker clusters: replication factor 1 everywhere, no ACL sync (no authorizer).
        "replication.factor = 1",
        "checkpoints.topic.replication.factor = 1",
        "heartbeats.topic.replication.factor = 1",
        "offset-syncs.topic.replication.factor = 1",
        "offset.storage.replication.factor = 1",
        "status.storage.replication.factor = 1",
        "config.storage.replication.factor = 1",
        "sync.topic.acls.enabled = false",
    ]
    if tuned:
        for key, value, _ in mm2_tuning(wl, wan):
            key = key.replace("S.", f"{src}.", 1) if key.startswith("S.") else key
            key = key.replace("T.", f"{tgt}.", 1) if key.startswith("T.") else key
            lines.append(f"{key} = {value}")
    path.write_text("\n".join(lines) + "\n")


class Runs:
    """Numbers the runs: each has its own cluster aliases, hence its own topics."""

    def __init__(self):
        self.n = 0

    def next(self):
        self.n += 1
        return self.n


RUN_IDS = Runs()


def run_strait(args, clusters, wl, topics, work, rep):
    n = RUN_IDS.next()
    src, tgt = f"src{n}", f"tgt{n}"
    cfg = work / f"strait-{run_label(wl)}-{rep}.properties"
    strait_config(cfg, clusters, topics, src, tgt, args.strait_prop)
    env = dict(os.environ, RUST_LOG="info", NO_COLOR="1")
    cmd = [args.strait, "run", "--config", str(cfg), "--until-caught-up", "--listen", "off"]
    return watched("strait", cmd, clusters, [f"{src}.{t}" for t in topics], wl["records"],
                   work / f"strait-{run_label(wl)}-{rep}.log", env)


def run_mm2(args, clusters, wl, topics, work, rep):
    n = RUN_IDS.next()
    src, tgt = f"src{n}", f"tgt{n}"
    cfg = work / f"mm2-{run_label(wl)}-{rep}.properties"
    mm2_config(cfg, clusters, wl, topics, src, tgt, tuned=not args.mm2_untuned, wan=args.distance)
    cmd = [java(), *MM2_JVM, f"-Dlog4j2.configurationFile={KAFKA_CONF / 'log4j2.properties'}",
           "-cp", args.mm2_classpath, "org.apache.kafka.connect.mirror.MirrorMaker", str(cfg),
           "--clusters", tgt]
    return watched("mm2", cmd, clusters, [f"{src}.{t}" for t in topics], wl["records"],
                   work / f"mm2-{run_label(wl)}-{rep}.log", stop_when_done=True)


def run_baseline(args, clusters, wl, topics, work, rep):
    (topic,) = topics
    n = RUN_IDS.next()
    remote = f"src{n}.{topic}"
    cmd = [
        TOOLS / "baseline-mirror", "mirror",
        "--source", clusters.mirror_source, "--target", clusters.mirror_target,
        "--topic", topic, "--target-topic", remote, "--codec", wl["codec"],
    ]
    return watched("baseline", cmd, clusters, [remote], wl["records"], work / f"baseline-{run_label(wl)}-{rep}.log")


def run_ceiling(args, clusters, wl, topics, work, rep):
    (topic,) = topics
    n = RUN_IDS.next()
    remote = f"ceiling{n}.{topic}"
    cmd = [
        TOOLS / "bench-tool", "ceiling",
        "--source", clusters.source, "--target", clusters.target,
        "--topic", topic, "--target-topic", remote,
    ]
    return watched("ceiling", cmd, clusters, [remote], wl["records"], work / f"ceiling-{run_label(wl)}-{rep}.log")


RUN = {"strait": run_strait, "mm2": run_mm2, "baseline": run_baseline, "ceiling": run_ceiling}


def perf_rate(text):
    """msgs/s from rdkafka_performance's summary line ("... in Xms: R msgs/s ...")."""
    for line in text.splitlines():
        m = re.search(r" in \d+ms: (\d+) msgs/s", line)
        if m:
            return float(m.group(1))
    raise RuntimeError(f"no rate in rdkafka_performance output:\n{text}")


def fairness(args, clusters, wl, topic, work):
    """The baseline's client alone against librdkafka's own benchmark tool (rdkafka_performance,
    C, the same librdkafka 2.12.1), consume-only on the source topic, produce-only to the target."""
    out = {}
    r = json_line(run([TOOLS / "baseline-mirror", "consume-only", "--source", clusters.source, "--topic", topic]))
    out["baseline_consume_records_per_s"] = r["records"] / r["seconds"]
    parts = []
    for p in range(wl["partitions"]):
        parts += ["-p", str(p)]
    perf = run(
        [
            args.rdkafka_performance, "-C", "-t", topic, *parts, "-b", clusters.source,
            "-o", "beginning", "-c", str(wl["records"]), "-q",
            "-X", "fetch.message.max.bytes=4194304", "-X", "queued.max.messages.kbytes=524288",
            "-X", "fetch.wait.max.ms=100",
        ],
        timeout=1800,
    )
    out["librdkafka_consume_records_per_s"] = perf_rate(perf)
    target_topic = f"produce-only-{RUN_IDS.next()}"
    r = json_line(
        run(
            [
                TOOLS / "baseline-mirror", "produce-only", "--target", clusters.target,
                "--topic", target_topic, "--partitions", str(wl["partitions"]),
                "--codec", wl["codec"], "--size", str(wl["size"]), "--records", str(wl["records"]),
            ]
        )
    )
    out["baseline_produce_records_per_s"] = r["records"] / r["seconds"]
    perf = run(
        [
            args.rdkafka_performance, "-P", "-t", target_topic, "-b", clusters.target,
            "-s", str(wl["size"]), "-c", str(wl["records"]), "-z", wl["codec"], "-a", "-1", "-q",
            "-X", "enable.idempotence=true", "-X", "linger.ms=100", "-X", "batch.size=1000000",
            "-X", "batch.num.messages=1000000", "-X", "queue.buffering.max.kbytes=1048576",
            "-X", "queue.buffering.max.messages=2000000",
        ],
        timeout=1800,
    )
    out["librdkafka_produce_records_per_s"] = perf_rate(perf)
    clusters.clean(keep_source=[topic])
    return out


def measure(args, clusters, wl, topics, size, entry, runners, reps, work, save=None):
    """Runs each mirror of `runners` `reps` times on the loaded `topics` (interleaved, the mirrors
    taking turns going first) and records each run's figures in entry["runs"], the medians in
    entry["median"], failed runs in entry["incomplete"]."""
    order = []
    for rep in range(reps):
        k = rep % len(runners)
        order += [(who, rep, 0) for who in runners[k:] + runners[:k]]
    while order:
        who, rep, attempt = order.pop(0)
        # A retry's logs go beside the first attempt's.
        tag = rep if attempt == 0 else f"{rep}-retry{attempt}"
        # Each run starts on a quiet machine: what the last one left is gone.
        time.sleep(2)
        try:
            m = RUN[who](args, clusters, entry, topics, work, tag)
        except RuntimeError as e:
            # Recorded and reported; the other runs go on. With --retry-incomplete the run is
            # made again (once per retry) after the others: the report names both.
            log(f"  {who:<8} rep {rep}: INCOMPLETE: {str(e).splitlines()[0][:300]}")
            entry.setdefault("incomplete", []).append(
                {"mirror": who, "rep": rep, "attempt": attempt, "error": str(e)[-1500:],
                 "last_log_error": last_log_error(work, who, entry, tag)})
            clusters.clean(keep_source=topics)
            if attempt < args.retry_incomplete:
                order.append((who, rep, attempt + 1))
            continue
        f = window_figures(m["trace"], wl["records"], size["wire_bytes"],
                           wl.get("warmup_share", WARMUP_SHARE))
        f.update(process_cpu_s=m["process_cpu_s"], peak_rss_mb=m["peak_rss_mb"],
                 loadavg_1m_before=m["loadavg_1m_before"])
        # Spawn to the poll where every target partition holds a record: the mirror's first
        # write to each partition (topic creation and the first fetch before it) is done.
        f["all_partitions_written_s"] = next(
            (s["t"] for s in m["trace"] if s.get("written", 0) >= wl["partitions"]), float("nan"))
        if wl.get("topics", 1) > 1:
            f["brokers_after"] = {"source": broker_files(clusters.source_pid),
                                  "target": broker_files(clusters.target_pid)}
            if who == "strait":
                f["strait_log"] = strait_phases(work / f"strait-{run_label(wl)}-{tag}.log")
        # The whole copy, as a user feels it: from the mirror's start to the last record on
        # the target, start-up included; its CPU is the process's whole life.
        f.update(whole_s=f["spawn_to_done_s"],
                 whole_mb_per_s=size["wire_bytes"] / 1e6 / max(f["spawn_to_done_s"], POLL_MS / 1000),
                 whole_cpu_s_per_gb=m["process_cpu_s"] / (size["wire_bytes"] / 1e9))
        f["attempt"] = attempt
        if who == "ceiling":
            f["replay_seconds"] = json_line(m["stdout"])["seconds"]
        entry["runs"][who].append(f)
        if save:
            # A long run's figures are kept even if a later one is interrupted.
            entry["median"] = {k: median_figures(v) for k, v in entry["runs"].items() if v}
            save()
        log(f"  {who:<8} rep {rep}: {f['seconds']:.2f} s window ({f['window_from_share']:.0%}-100%), "
            f"{f['mb_per_s']:.1f} MB/s, {f['records_per_s']:.0f} rec/s, "
            f"whole copy {f['whole_s']:.1f} s at {f['whole_mb_per_s']:.1f} MB/s, "
            f"cpu {f['cpu_s']:.2f} s ({f['cpu_pct']:.0f}%, {f['cpu_s_per_gb']:.1f} s/GB), "
            f"rss {f['peak_rss_mb']:.0f} MB, brokers src {f['source_broker_pct']:.0f}% "
            f"tgt {f['target_broker_pct']:.0f}%, other {f['other_pct']:.0f}%; "
            f"start-up {f['startup_s']:.1f} s, warm-up {f['warmup_s']:.1f} s "
            f"at {f['warmup_records_per_s']:.0f} rec/s, every partition written at "
            f"{f['all_partitions_written_s']:.1f} s")
        clusters.clean(keep_source=topics)
    entry["median"] = {who: median_figures(runs) for who, runs in entry["runs"].items() if runs}


def warm_up_brokers(clusters, work, quick):
    """Both brokers' JVMs compile their produce and fetch paths before the first measured run:
    a topic is loaded, copied by the baseline and replayed by the ceiling, untimed."""
    topic = "warmup"
    records = 100_000 if quick else 1_000_000
    run([TOOLS / "bench-tool", "load", "--bootstrap", clusters.source, "--topic", topic, "--partitions", "8",
         "--codec", "lz4", "--size", "200", "--records", str(records)])
    run([TOOLS / "baseline-mirror", "mirror", "--source", clusters.source, "--target", clusters.target,
         "--topic", topic, "--target-topic", "warmup.baseline", "--codec", "lz4"])
    run([TOOLS / "bench-tool", "ceiling", "--source", clusters.source, "--target", clusters.target,
         "--topic", topic, "--target-topic", "warmup.ceiling"])
    clusters.clean()


def java():
    """java from $JAVA_HOME when set, as scripts/test-broker picks it."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    return "java"


def java_version():
    try:
        p = subprocess.run([java(), "-version"], capture_output=True, text=True)
        return (p.stderr or p.stdout).splitlines()[0].strip()
    except (OSError, IndexError):
        return ""


def machine(clusters):
    def first(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
        except OSError:
            return ""

    model = ""
    for line in first(["lscpu"]).splitlines():
        if line.startswith("Model name:"):
            model = line.split(":", 1)[1].strip()
    mem = ""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    return {
        "cpu": model,
        "cores": CORES,
        "memory": mem,
        "kernel": platform.release(),
        "rustc": first(["rustc", "--version"]),
        "java": java_version(),
        # STRAIT_COMMIT: the commit a STRAIT_BIN given from elsewhere was built at.
        "strait_commit": os.environ.get("STRAIT_COMMIT") or first(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]),
        # The last commit that changed crates/ (the mirror measured), when HEAD only changed bench/.
        "strait_crates_commit": os.environ.get("STRAIT_COMMIT") or first(["git", "-C", str(ROOT), "log", "-1", "--format=%h", "--", "crates"]),
        "strait_tree_dirty": bool(first(["git", "-C", str(ROOT), "status", "--porcelain", "--", "crates"])),
        "broker": f"Apache Kafka {KAFKA_VERSION}, single-node KRaft (combined broker and controller), data on disk, "
                  f"heap {clusters.heap} (scripts/test-broker)",
        "mm2": f"Apache Kafka {MM2_VERSION} MirrorMaker 2, dedicated mode (org.apache.kafka.connect.mirror.MirrorMaker), "
               + " ".join(MM2_JVM),
        "librdkafka": "2.12.1 (rdkafka 0.39 crate, bundled)",
    }


def median_figures(runs):
    keys = [k for k, v in runs[0].items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    out = {}
    for k in keys:
        values = [r[k] for r in runs if isinstance(r.get(k), (int, float)) and r[k] == r[k]]
        out[k] = statistics.median(values) if values else float("nan")
    return out


def main():
    global MIRROR_TIMEOUT_S, POLL_MS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help=f"{len(QUICK)} workloads, a tenth of the data, one repetition (a few minutes)")
    ap.add_argument("--reps", type=int, help="repetitions per mirror and workload (default 3, quick 1)")
    ap.add_argument("--only", help="comma-separated workload names")
    ap.add_argument("--mirrors", help="comma-separated: strait,mm2,baseline,ceiling (default all; with "
                                      f"--partitions-10k {','.join(P10K_RUNNERS)})")
    ap.add_argument("--partitions-10k", action="store_true",
                    help="the 10,000-partition flow alone (two source topics of 5,000 partitions, 64 records per partition), "
                         "once, with its own results")
    ap.add_argument("--mm2-untuned", action="store_true", help="MM2 with its defaults (no throughput tuning)")
    ap.add_argument("--no-fairness", action="store_true", help="skip the baseline's fairness check")
    ap.add_argument("--source-rtt-ms", metavar="MS,...",
                    help="across a distance: run the distance workloads at each of these round trips between "
                         "the mirrors and the source (a toxiproxy link; half the RTT each way), e.g. 0,20,80")
    ap.add_argument("--source-bandwidth-kbps", type=int, metavar="KBPS",
                    help="across a distance: also limit the link to this many KB/s each way (toxiproxy bandwidth)")
    ap.add_argument("--far-side", choices=["source", "target", "both"], default="source",
                    help="across a distance: which cluster is behind the link (default source, the topology "
                         "MM2's docs advise; target puts the link between the mirrors and the target, where "
                         "the producer's requests in flight matter; both puts a link of the round trip on "
                         "each side)")
    ap.add_argument("--strait-prop", action="append", default=[], metavar="KEY=VALUE",
                    help="a line added to strait's config file for every run (e.g. strait.batch.merge=always)")
    ap.add_argument("--partition-sweep", action="store_true",
                    help="across a distance: 20 MB over 8, 64 and 128 partitions instead of the 100 MB workloads")
    ap.add_argument("--toxiproxy", help="across a distance: the toxiproxy-server binary (bench/toxiproxy installs it)")
    ap.add_argument("--mirror-timeout-s", type=int,
                    help=f"a run not done by then is recorded as incomplete (default {MIRROR_TIMEOUT_S}; "
                         f"across a distance {DISTANCE_TIMEOUT_S})")
    ap.add_argument("--retry-incomplete", type=int, metavar="N",
                    help="make an incomplete run again, up to N times (default 0; across a distance 1)")
    ap.add_argument("--strait", required=True)
    ap.add_argument("--rdkafka-performance", required=True)
    ap.add_argument("--mm2-classpath", required=True, help="MirrorMaker 2's jars ('<lib>/*', scripts/test-broker mm2-classpath)")
    ap.add_argument("--out", required=True, help="results JSON")
    ap.add_argument("--command", default="bench/run", help="the command line, for the report")
    args = ap.parse_args()
    args.distance = args.source_rtt_ms is not None
    MIRROR_TIMEOUT_S = args.mirror_timeout_s or (DISTANCE_TIMEOUT_S if args.distance else MIRROR_TIMEOUT_S)
    if args.retry_incomplete is None:
        args.retry_incomplete = 1 if args.distance else 0
    if args.partitions_10k and (args.distance or args.quick):
        ap.error("--partitions-10k goes alone (not with --quick or --source-rtt-ms)")
    if args.partitions_10k:
        POLL_MS = P10K_POLL_MS
        MIRROR_TIMEOUT_S = args.mirror_timeout_s or P10K_TIMEOUT_S
    if not args.distance and (args.source_bandwidth_kbps or args.partition_sweep or args.far_side != "source"):
        ap.error("--source-bandwidth-kbps, --partition-sweep and --far-side go with --source-rtt-ms")
    if args.distance:
        if not args.toxiproxy:
            ap.error("--source-rtt-ms needs --toxiproxy (bench/distance passes it)")
        try:
            rtts = [int(x) for x in args.source_rtt_ms.split(",")]
        except ValueError:
            ap.error("--source-rtt-ms: comma-separated whole milliseconds, e.g. 0,20,80")
        all_wls = distance_matrix(args.partition_sweep)
    elif args.partitions_10k:
        rtts = []
        all_wls = [partitions_10k_workload()]
    else:
        rtts = []
        all_wls = matrix(args.quick)
    reps = args.reps or (1 if args.quick or args.distance or args.partitions_10k else 3)
    if args.only:
        names = args.only.split(",")
        wls = [w for w in all_wls if w["name"] in names]
        if len(wls) != len(names):
            ap.error(f"--only: unknown workload among {names}; known: {[w['name'] for w in all_wls]}")
    else:
        wls = all_wls if args.distance or args.partitions_10k else workloads(args.quick)
    mirrors = args.mirrors or ",".join(P10K_RUNNERS if args.partitions_10k else RUNNERS)
    runners = [r for r in RUNNERS if r in mirrors.split(",")]
    if any(w.get("topics", 1) > 1 for w in wls) and set(runners) - set(P10K_RUNNERS):
        # baseline-mirror and bench-tool ceiling copy one topic.
        log(f"several source topics: {sorted(set(runners) - set(P10K_RUNNERS))} skipped (they copy one topic)")
        runners = [r for r in runners if r in P10K_RUNNERS]
    if args.distance and "ceiling" in runners:
        # The ceiling replays the source's batches read next to it: no distance to cross.
        log("across a distance: the ceiling does not apply; skipped")
        runners.remove("ceiling")

    nofile = None
    if args.partitions_10k:
        # A broker keeps a file open per log segment: 10,000 partitions need 10,000 descriptors
        # on each broker, more than the usual soft limit of 1,024. The brokers inherit ours.
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        need = wls[0]["partitions"] + 4096
        if soft < need <= hard or hard == resource.RLIM_INFINITY:
            resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 1 << 20)), hard))
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < need:
            ap.error(f"--partitions-10k: open files limited to {soft} (ulimit -n), the brokers need {need}")
        nofile = soft
    started = time.time()
    work = Path(tempfile.mkdtemp(prefix="strait-bench-"))
    log(f"work dir {work}")
    links = {}
    if args.distance:
        sides = ["source", "target"] if args.far_side == "both" else [args.far_side]
        ports = free_ports(2 * len(sides))
        far = {side: (ports[2 * i], ports[2 * i + 1]) for i, side in enumerate(sides)}
        clusters = Clusters(work / "clusters", far=far)
        for side, (far_port, proxy_port) in far.items():
            links[side] = Link(args.toxiproxy, work, far_port, proxy_port, name=f"toxiproxy-{side}")
            setattr(clusters, f"mirror_{side}", links[side].address)
            log(f"{side} {getattr(clusters, side)} (loader, watcher); mirrors reach it at "
                f"{links[side].address} (toxiproxy, to its FAR listener on {far_port})")
        clusters.extra_pids = [link.proc.pid for link in links.values()]
    else:
        clusters = Clusters(work / "clusters", extra_props=P10K_BROKER_PROPS if args.partitions_10k else "")
    results = {
        "mode": ("distance-partitions" if args.partition_sweep else "distance") if args.distance
        else "partitions-10k" if args.partitions_10k else "quick" if args.quick else "full",
        "command": args.command,
        "strait_props": args.strait_prop,
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(clusters),
        "loadavg_at_start": os.getloadavg(),
        "repetitions": reps,
        "warmup_share": WARMUP_SHARE,
        "poll_ms": POLL_MS,
        "mirror_timeout_s": MIRROR_TIMEOUT_S,
        "mm2_tuned": not args.mm2_untuned,
        "runners": runners,
        **({"nofile_limit": nofile} if nofile else {}),
        **({"broker_props": P10K_BROKER_PROPS.splitlines()} if args.partitions_10k else {}),
        "workloads": [],
    }
    if args.distance:
        results["distance"] = {
            "rtt_ms": rtts,
            "bandwidth_kbps": args.source_bandwidth_kbps,
            "far_side": args.far_side,
            "link": f"toxiproxy 2.5.0 between the mirrors and the {args.far_side} broker (its FAR listener, advertised "
                    "as the proxy's address); latency toxics of half the RTT on each direction"
                    + (f", bandwidth toxics of {args.source_bandwidth_kbps} KB/s on each" if args.source_bandwidth_kbps
                       else ""),
            "mm2_wan_tuning": [[k, v, why] for k, v, why in WAN_TUNING] if not args.mm2_untuned else [],
        }
    try:
        log("warming up both brokers (untimed)")
        warm_up_brokers(clusters, work, args.quick or args.partitions_10k)
        for wl in wls:
            topics = source_topics(wl)
            log(f"{wl['name']}: loading {wl['records']} records into the source"
                + (f" ({len(topics)} topics)" if len(topics) > 1 else ""))
            load = {"payload_bytes": 0, "seconds": 0.0}
            size = {"records": 0, "batches": 0, "wire_bytes": 0}
            for topic in topics:
                one = json_line(
                    run(
                        [
                            TOOLS / "bench-tool", "load", "--bootstrap", clusters.source, "--topic", topic,
                            "--partitions", str(wl["partitions"] // len(topics)), "--codec", wl["codec"],
                            "--size", str(wl["size"]), "--records", str(wl["records"] // len(topics)),
                        ]
                    )
                )
                load = {k: load[k] + one[k] for k in load}
                one = json_line(run([TOOLS / "bench-tool", "wire-size", "--bootstrap", clusters.source,
                                     "--topic", topic]))
                size = {k: size[k] + one[k] for k in size}
            log(f"  {size['records']} records, {size['batches']} batches, {size['wire_bytes'] / 1e6:.1f} MB on the wire"
                + (f", loaded in {load['seconds']:.0f} s" if len(topics) > 1 else ""))
            for rtt in rtts or [None]:
                entry = dict(wl, payload_bytes=load["payload_bytes"], wire_bytes=size["wire_bytes"],
                             source_batches=size["batches"], runs={k: [] for k in runners},
                             mm2_tuning=[[k, v, why] for k, v, why in mm2_tuning(wl, args.distance)]
                             if not args.mm2_untuned else [])
                if links:
                    entry.update(rtt_ms=rtt, bandwidth_kbps=args.source_bandwidth_kbps,
                                 toxics={side: link.set(rtt, args.source_bandwidth_kbps)
                                         for side, link in links.items()})
                    log(f"  {args.far_side} round trip {rtt} ms"
                        + (f", {args.source_bandwidth_kbps} KB/s" if args.source_bandwidth_kbps else ""))
                if len(topics) > 1:
                    entry.update(source_topics=topics, load_seconds=load["seconds"],
                                 brokers_after_load={"source": broker_files(clusters.source_pid),
                                                     "target": broker_files(clusters.target_pid)})
                results["workloads"].append(entry)

                def save():
                    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")

                measure(args, clusters, wl, topics, size, entry, runners, reps, work, save)
                save()
            entry = results["workloads"][-1]
            if wl["partitions"] <= 64 and "baseline" in runners and not args.no_fairness and not args.distance:
                entry["fairness"] = fairness(args, clusters, wl, topics[0], work)
                log(f"  fairness: {entry['fairness']}")
            clusters.clean()
            # Written after every workload, so an interrupted run keeps what it measured.
            Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
        if not args.distance and not args.partitions_10k:
            log("translation precision")
            results["precision"] = json_line(run([TOOLS / "bench-tool", "precision"]))
    finally:
        for link in links.values():
            link.stop()
        clusters.stop()
    results["loadavg_at_end"] = os.getloadavg()
    results["duration_s"] = time.time() - started
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    log(f"results in {args.out} ({results['duration_s']:.0f} s)")


if __name__ == "__main__":
    main()
