#!/usr/bin/env python3
"""The benchmark driver behind `bench/run`: strait against the baseline record-level mirror
(librdkafka), on two local test clusters, then translation precision; writes the JSON results
and regenerates docs/benchmarks.md and its charts (bench/report.py).

Every run of a mirror starts from a freshly restarted (empty, in-memory) target cluster and
copies the same pre-produced source topic to the end. Per run: wall time from process start to
exit once everything is mirrored, the mirror's CPU (user+sys) and peak RSS from wait4(), the
source and target brokers' CPU from /proc/<pid>/stat, and the CPU everything else on the
machine used meanwhile (from /proc/stat), so contention shows. Repetitions are interleaved
(strait, baseline and the ceiling take turns first) and the median is reported.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
TOOLS = BENCH / "target" / "release"
TEST_BROKER = ROOT / "scripts" / "test-broker"
CLK_TCK = os.sysconf("SC_CLK_TCK")

CODECS = ["none", "lz4", "zstd"]


def workloads(quick):
    """The workload matrix: record size x codec x partitions, and one many-partition case."""
    out = []
    for size in (100, 1024):
        # About 270 MB of payload per workload in a full run, a tenth of it in a quick one.
        records = (2_000_000 if size == 100 else 250_000) // (10 if quick else 1)
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
    per_partition = 20 if quick else 100
    out.append(
        {
            "name": "1024B-lz4-p1024",
            "size": 1024,
            "codec": "lz4",
            "partitions": 1024,
            "records": 1024 * per_partition,
        }
    )
    return out


def log(msg):
    print(f"[{datetime.datetime.now().strftime('%H:%M:%S')}] {msg}", flush=True)


def run(cmd, **kw):
    """Runs a command, returns its stdout; fails loudly with its output."""
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError(f"{shlex.join(map(str, cmd))} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p.stdout


def json_line(text):
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"no JSON line in output:\n{text}")


def proc_cpu(pid):
    """utime + stime of a process, in seconds (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return 0.0


def machine_busy():
    """Non-idle CPU seconds of the whole machine since boot."""
    with open("/proc/stat") as f:
        parts = f.readline().split()[1:]
    values = [int(x) for x in parts]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / CLK_TCK


class Clusters:
    """The test-broker pair (in-memory storage), restarted empty between runs."""

    def __init__(self, workdir):
        self.dir = Path(workdir)
        run([TEST_BROKER, "start", "--dir", self.dir, "--parent", str(os.getpid())])
        self.reload()

    def reload(self):
        env = {}
        for line in (self.dir / "clusters.env").read_text().splitlines():
            if "=" in line:
                k, v = line.split("=", 1)
                env[k] = v
        self.source = env["SOURCE_BOOTSTRAP"]
        self.target = env["TARGET_BOOTSTRAP"]
        self.source_pid = int(env["SOURCE_PID"])
        self.target_pid = int(env["TARGET_PID"])

    def restart(self, which):
        """A fresh, empty broker (memory storage) on the same port."""
        run([TEST_BROKER, "restart", "--dir", self.dir, "--which", which, "--grace", "0"])
        self.reload()

    def stop(self):
        subprocess.run([TEST_BROKER, "stop", "--dir", self.dir], capture_output=True)


def measured(cmd, clusters, logfile, env=None):
    """Runs `cmd` to completion and measures it and the brokers."""
    src0, tgt0 = proc_cpu(clusters.source_pid), proc_cpu(clusters.target_pid)
    busy0 = machine_busy()
    load0 = os.getloadavg()[0]
    with open(logfile, "w") as err:
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env, text=True)
        out = p.stdout.read()
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    src1, tgt1 = proc_cpu(clusters.source_pid), proc_cpu(clusters.target_pid)
    busy1 = machine_busy()
    cpu = ru.ru_utime + ru.ru_stime
    brokers = (src1 - src0) + (tgt1 - tgt0)
    return {
        "exit_code": p.returncode,
        "stdout": out,
        "wall_s": wall,
        "cpu_s": cpu,
        "user_s": ru.ru_utime,
        "sys_s": ru.ru_stime,
        "peak_rss_mb": ru.ru_maxrss / 1024,
        "source_broker_cpu_s": src1 - src0,
        "target_broker_cpu_s": tgt1 - tgt0,
        "other_cpu_s": max(0.0, (busy1 - busy0) - cpu - brokers),
        "loadavg_1m_before": load0,
    }


def strait_config(path, clusters, topic):
    path.write_text(
        "\n".join(
            [
                "clusters = source, target",
                f"source.bootstrap.servers = {clusters.source}",
                f"target.bootstrap.servers = {clusters.target}",
                "source->target.enabled = true",
                f"source->target.topics = {topic}",
                "replication.factor = 1",
                "checkpoints.topic.replication.factor = 1",
                "heartbeats.topic.replication.factor = 1",
                "offset-syncs.topic.replication.factor = 1",
                "",
            ]
        )
    )


def figures(m, records, wire_bytes, seconds=None):
    """Throughput and cost figures of one measured run."""
    s = seconds if seconds is not None else m["wall_s"]
    gb = wire_bytes / 1e9
    return {
        "seconds": s,
        "records_per_s": records / s,
        "mb_per_s": wire_bytes / 1e6 / s,
        "cpu_s": m["cpu_s"],
        "cpu_s_per_gb": m["cpu_s"] / gb,
        "peak_rss_mb": m["peak_rss_mb"],
        "source_broker_cpu_s": m["source_broker_cpu_s"],
        "target_broker_cpu_s": m["target_broker_cpu_s"],
        "source_broker_cpu_per_gb": m["source_broker_cpu_s"] / gb,
        "target_broker_cpu_per_gb": m["target_broker_cpu_s"] / gb,
        "other_cpu_s": m["other_cpu_s"],
        "loadavg_1m_before": m["loadavg_1m_before"],
        "wall_s": m["wall_s"],
    }


def count(clusters, topic):
    return json_line(run([TOOLS / "bench-tool", "count", "--bootstrap", clusters.target, "--topic", topic]))["records"]


def run_strait(args, clusters, wl, topic, work, rep):
    cfg = work / f"strait-{wl['name']}-{rep}.properties"
    strait_config(cfg, clusters, topic)
    env = dict(os.environ, RUST_LOG="info", NO_COLOR="1")
    cmd = [args.strait, "run", "--config", str(cfg), "--until-caught-up", "--listen", "off"]
    m = measured(cmd, clusters, work / f"strait-{wl['name']}-{rep}.log", env)
    if m["exit_code"] != 0:
        raise RuntimeError(f"strait failed ({m['exit_code']}); log {work}/strait-{wl['name']}-{rep}.log")
    return m, count(clusters, f"source.{topic}")


def run_baseline(args, clusters, wl, topic, work, rep):
    cmd = [
        TOOLS / "baseline-mirror", "mirror",
        "--source", clusters.source, "--target", clusters.target,
        "--topic", topic, "--target-topic", f"source.{topic}", "--codec", wl["codec"],
    ]
    m = measured(cmd, clusters, work / f"baseline-{wl['name']}-{rep}.log")
    if m["exit_code"] != 0:
        raise RuntimeError(f"baseline failed; log {work}/baseline-{wl['name']}-{rep}.log")
    return m, count(clusters, f"source.{topic}")


def run_ceiling(args, clusters, wl, topic, work, rep):
    cmd = [
        TOOLS / "bench-tool", "ceiling",
        "--source", clusters.source, "--target", clusters.target,
        "--topic", topic, "--target-topic", f"ceiling.{topic}",
    ]
    m = measured(cmd, clusters, work / f"ceiling-{wl['name']}-{rep}.log")
    if m["exit_code"] != 0:
        raise RuntimeError(f"ceiling failed; log {work}/ceiling-{wl['name']}-{rep}.log")
    return m, count(clusters, f"ceiling.{topic}")


RUNNERS = {"strait": run_strait, "baseline": run_baseline, "ceiling": run_ceiling}


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
        timeout=600,
    )
    out["librdkafka_consume_records_per_s"] = perf_rate(perf)
    clusters.restart("target")
    r = json_line(
        run(
            [
                TOOLS / "baseline-mirror", "produce-only", "--target", clusters.target,
                "--topic", "produce-only", "--partitions", str(wl["partitions"]),
                "--codec", wl["codec"], "--size", str(wl["size"]), "--records", str(wl["records"]),
            ]
        )
    )
    out["baseline_produce_records_per_s"] = r["records"] / r["seconds"]
    perf = run(
        [
            args.rdkafka_performance, "-P", "-t", "produce-only", "-b", clusters.target,
            "-s", str(wl["size"]), "-c", str(wl["records"]), "-z", wl["codec"], "-a", "-1", "-q",
            "-X", "enable.idempotence=true", "-X", "linger.ms=100", "-X", "batch.size=1000000",
            "-X", "batch.num.messages=1000000", "-X", "queue.buffering.max.kbytes=1048576",
            "-X", "queue.buffering.max.messages=2000000",
        ],
        timeout=600,
    )
    out["librdkafka_produce_records_per_s"] = perf_rate(perf)
    return out


def machine():
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
        "cores": os.cpu_count(),
        "memory": mem,
        "kernel": platform.release(),
        "rustc": first(["rustc", "--version"]),
        "strait_commit": first(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]),
        "strait_tree_dirty": bool(first(["git", "-C", str(ROOT), "status", "--porcelain", "--", "crates"])),
        "broker": "nisshi 0.8.1, in-memory storage (scripts/test-broker)",
        "librdkafka": "2.12.1 (rdkafka 0.39 crate, bundled)",
    }


def median_figures(runs):
    keys = runs[0].keys()
    return {k: statistics.median(r[k] for r in runs) for k in keys if isinstance(runs[0][k], (int, float))}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a tenth of the data, one repetition (under 5 minutes)")
    ap.add_argument("--reps", type=int, help="repetitions per mirror and workload (default 3, quick 1)")
    ap.add_argument("--only", help="comma-separated workload names")
    ap.add_argument("--strait", required=True)
    ap.add_argument("--rdkafka-performance", required=True)
    ap.add_argument("--out", required=True, help="results JSON")
    ap.add_argument("--command", default="bench/run", help="the command line, for the report")
    args = ap.parse_args()
    reps = args.reps or (1 if args.quick else 3)
    wls = workloads(args.quick)
    if args.only:
        names = set(args.only.split(","))
        wls = [w for w in wls if w["name"] in names]

    started = time.time()
    results = {
        "mode": "quick" if args.quick else "full",
        "command": args.command,
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "loadavg_at_start": os.getloadavg(),
        "repetitions": reps,
        "workloads": [],
    }
    work = Path(tempfile.mkdtemp(prefix="strait-bench-"))
    log(f"work dir {work}")
    clusters = Clusters(work / "clusters")
    try:
        for wl in wls:
            topic = f"bench-{wl['name']}"
            log(f"{wl['name']}: loading {wl['records']} records into a fresh source")
            clusters.restart("source")
            load = json_line(
                run(
                    [
                        TOOLS / "bench-tool", "load", "--bootstrap", clusters.source, "--topic", topic,
                        "--partitions", str(wl["partitions"]), "--codec", wl["codec"],
                        "--size", str(wl["size"]), "--records", str(wl["records"]),
                    ]
                )
            )
            size = json_line(run([TOOLS / "bench-tool", "wire-size", "--bootstrap", clusters.source, "--topic", topic]))
            entry = dict(wl, payload_bytes=load["payload_bytes"], wire_bytes=size["wire_bytes"],
                         source_batches=size["batches"], runs={k: [] for k in RUNNERS})
            log(f"  {size['records']} records, {size['batches']} batches, {size['wire_bytes'] / 1e6:.1f} MB on the wire")
            order = list(RUNNERS)
            for rep in range(reps):
                turn = order[rep % 3:] + order[:rep % 3]
                for who in turn:
                    clusters.restart("target")
                    m, copied = RUNNERS[who](args, clusters, wl, topic, work, rep)
                    if copied != wl["records"]:
                        raise RuntimeError(f"{who} {wl['name']}: target holds {copied} of {wl['records']} records")
                    seconds = json.loads(m["stdout"])["seconds"] if who == "ceiling" else None
                    f = figures(m, wl["records"], size["wire_bytes"], seconds)
                    entry["runs"][who].append(f)
                    log(f"  {who:<8} rep {rep}: {f['seconds']:.2f} s, {f['mb_per_s']:.1f} MB/s, "
                        f"{f['records_per_s']:.0f} rec/s, cpu {f['cpu_s']:.2f} s ({f['cpu_s_per_gb']:.1f} s/GB), "
                        f"rss {f['peak_rss_mb']:.0f} MB, brokers src {f['source_broker_cpu_s']:.2f} s "
                        f"tgt {f['target_broker_cpu_s']:.2f} s, other {f['other_cpu_s']:.2f} s")
            entry["median"] = {who: median_figures(runs) for who, runs in entry["runs"].items()}
            if wl["partitions"] <= 64:
                entry["fairness"] = fairness(args, clusters, wl, topic, work)
                log(f"  fairness: {entry['fairness']}")
            results["workloads"].append(entry)
            # Written after every workload, so an interrupted run keeps what it measured.
            Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
        log("translation precision")
        results["precision"] = json_line(run([TOOLS / "bench-tool", "precision"]))
    finally:
        clusters.stop()
    results["loadavg_at_end"] = os.getloadavg()
    results["duration_s"] = time.time() - started
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    log(f"results in {args.out} ({results['duration_s']:.0f} s)")


if __name__ == "__main__":
    main()
