#!/usr/bin/env python3
"""Regenerates docs/benchmarks.md and its charts from a results JSON written by bench/bench.py;
with --distance, only its "Across a distance" section, from the JSON files bench/distance wrote
(bench/results/distance.json, bench/results/distance-partitions.json); with --partitions-10k,
only its "Ten thousand partitions" section (bench/results/partitions-10k.json).

    report.py RESULTS.json [--docs DIR]
    report.py --distance DISTANCE.json... [--docs DIR]
    report.py --partitions-10k PARTITIONS-10K.json [--docs DIR]
"""

import argparse
import json
import math
import os
import re
import statistics
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIRRORS = ("strait", "mm2", "baseline")
LABEL = {
    "strait": "strait",
    "mm2": "MirrorMaker 2",
    "baseline": "baseline (librdkafka record mirror)",
    "ceiling": "ceiling (raw replay of the source's batches)",
}
SHORT = {"strait": "strait", "mm2": "MM2", "baseline": "baseline", "ceiling": "ceiling"}


# Sections of docs/benchmarks.md that other commands write, kept as they are.
KEPT_SECTIONS = [
    "Across a distance",
    "Across a distance: against the goals",
    "Across a distance: strait before and after the survey and the fetch ahead",
    "Across a distance: the pipelined producer, fetch sessions, and a far target",
    "Ten thousand partitions",
    "CPU per GB against the machine's floor",
    "Offset map size",
    "Failover drill with MM2's checkpoints",
    "The day the source dies",
    "Verifying a mirror",
]
DISTANCE_TITLE = "Across a distance"
# The 10,000-partition run with MM2 in it, kept for MM2's row when a later run leaves MM2 out.
EARLIER_10K = ROOT / "bench" / "results" / "partitions-10k-e0af65e.json"
P10K_TITLE = "Ten thousand partitions"


def kafka_of(results):
    """The broker release a results file was measured on ("Apache Kafka 4.4.0"), from its
    machine's `broker` line (every results file names it)."""
    found = re.search(r"Apache Kafka [0-9][0-9.]*[0-9]", results.get("machine", {}).get("broker", ""))
    return found.group(0) if found else "Apache Kafka"


def mm2_of(results):
    """The MirrorMaker 2 release a results file was measured with, from its `mm2` line."""
    found = re.search(r"Apache Kafka ([0-9][0-9.]*[0-9]) MirrorMaker 2", results.get("machine", {}).get("mm2", ""))
    return f"Kafka {found.group(1)}'s" if found else "Kafka's"


def fmt(x, digits=1):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def krec(x):
    return "-" if x is None or math.isnan(x) else f"{x / 1000:,.0f}k"


def pct(x):
    return "-" if x is None or math.isnan(x) else f"{x:.0f}%"


def ratio(a, b, digits=2):
    if not a or not b or math.isnan(a) or math.isnan(b):
        return "-"
    return f"{a / b:.{digits}f}x"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def gmean(xs):
    xs = [x for x in xs if x and not math.isnan(x) and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def med(w, who, key):
    return w["median"].get(who, {}).get(key, float("nan"))


def charts(results, docs, runners):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    wls = results["workloads"]
    names = [w["name"] for w in wls]
    x = range(len(names))
    shown = [r for r in ("strait", "mm2", "baseline", "ceiling") if r in runners]
    width = 0.8 / max(len(shown), 1)
    fig, ax = plt.subplots(figsize=(12, 5))
    for i, who in enumerate(shown):
        ax.bar([j + (i - (len(shown) - 1) / 2) * width for j in x], [med(w, who, "mb_per_s") for w in wls], width,
               label=LABEL[who])
    ax.set_xticks(list(x))
    ax.set_xticklabels(names, rotation=35, ha="right")
    ax.set_ylabel("MB/s of source wire bytes (measured window)")
    ax.set_title(f"Throughput by workload on {kafka_of(results)} (median of {results['repetitions']}, "
                 f"{results['mode']} run)")
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(docs / "bench-throughput.png", dpi=90)
    plt.close(fig)

    mirrors = [m for m in MIRRORS if m in runners]
    width = 0.8 / max(len(mirrors), 1)
    fig, ax = plt.subplots(figsize=(12, 5))
    for i, who in enumerate(mirrors):
        ax.bar([j + (i - (len(mirrors) - 1) / 2) * width for j in x], [med(w, who, "cpu_s_per_gb") for w in wls],
               width, label=LABEL[who])
    ax.set_xticks(list(x))
    ax.set_xticklabels(names, rotation=35, ha="right")
    ax.set_ylabel("mirror process CPU seconds per GB (wire)")
    ax.set_yscale("log")
    ax.set_title("CPU cost of the mirror process by workload (lower is better; log scale)")
    ax.legend()
    ax.grid(axis="y", alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(docs / "bench-cpu-per-gb.png", dpi=90)
    plt.close(fig)

    points = results.get("precision", {}).get("points", [])
    if points:
        fig, ax = plt.subplots(figsize=(9, 5.5))
        for kind, marker in (("plain", "o"), ("transactional", "s"), ("compacted", "^")):
            ps = [p for p in points if p["kind"] == kind and p["lag"] > 0 and not p["mm2_no_checkpoint"]]
            ax.scatter([p["lag"] for p in ps], [max(p["mm2_duplicates"], 0.8) for p in ps], marker=marker, s=14,
                       label=f"MM2 model, {kind}")
        strait_max = max(p["strait_duplicates"] + p["strait_lost"] for p in points)
        lags = sorted({p["lag"] for p in points if p["lag"] > 0})
        ax.plot(lags, [max(strait_max, 0.8)] * len(lags), color="black", lw=2,
                label=f"strait, every kind (duplicates + losses = {strait_max})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("consumer group lag at failover (source offsets behind the end)")
        ax.set_ylabel("records re-delivered after failover (0 drawn at 0.8)")
        ax.set_title("Duplicates at failover vs lag: strait's exact map vs MM2's offset syncs")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(docs / "bench-precision.png", dpi=90)
        plt.close(fig)


def precision_section(results):
    prec = results.get("precision")
    if not prec:
        return ""
    buckets = [(0, 0), (1, 9), (10, 99), (100, 999), (1000, 9999), (10_000, 99_999), (100_000, 1_000_000)]
    rows = []
    for kind in ("plain", "transactional", "compacted"):
        for lo, hi in buckets:
            ps = [p for p in prec["points"] if p["kind"] == kind and lo <= p["lag"] <= hi]
            if not ps:
                continue
            translated = [p for p in ps if not p["mm2_no_checkpoint"]]
            dups = [p["mm2_duplicates"] for p in translated]
            rows.append([
                kind,
                f"{lo:,}" if lo == hi else f"{lo:,}-{hi:,}",
                len(ps),
                sum(p["strait_duplicates"] for p in ps),
                sum(p["strait_lost"] for p in ps),
                fmt(statistics.mean(dups), 0) if dups else "-",
                fmt(max(dups), 0) if dups else "-",
                sum(p["mm2_lost"] for p in ps),
                len(ps) - len(translated),
            ])
    parts = table(
        ["topic", "lag (offsets)", "groups", "strait duplicates", "strait lost", "MM2 duplicates, mean",
         "MM2 duplicates, max", "MM2 lost", "MM2: no checkpoint"],
        rows,
    )
    meta = table(
        ["topic", "source offsets", "records mirrored", "map segments (strait)", "offset syncs sent (MM2 model)"],
        [[p["kind"], f"{p['source_offsets']:,}", f"{p['mirrored_records']:,}", f"{p['segments']:,}",
          f"{p['mm2_syncs_sent']:,}"] for p in prec["partitions"]],
    )
    strait_bad = sum(p["strait_duplicates"] + p["strait_lost"] for p in prec["points"])
    none = sum(1 for p in prec["points"] if p["mm2_no_checkpoint"])
    mm2_lost = sum(p["mm2_lost"] for p in prec["points"])
    verdict = (
        "strait re-delivers and skips nothing at any lag, on every kind of topic."
        if strait_bad == 0
        else f"strait's translation is off by {strait_bad} records in all: a defect to report."
    )
    verdict += (
        " MM2's duplicates grow with the lag, because the syncs it keeps thin out exponentially"
        " with distance from the newest one: near the end of the log they are bounded by"
        " `offset.lag.max` (100); further back they run to thousands and hundreds of thousands of"
        " records. Its translation never skips records"
        + (" (MM2 lost: 0)." if mm2_lost == 0 else f" except for {mm2_lost} records: check the model.")
    )
    verdict += (
        f" MM2 gave no checkpoint at all for {none} of the positions (older than every sync it keeps)."
        if none
        else " MM2 always had a sync at or before the position here, so no group was left without a checkpoint."
    )
    return f"""## Translation precision at failover

Where a consumer group continues on the target after a failover, for groups at lags from 0 to
10^6 source offsets behind the end of a partition, on three synthetic source partitions built
with `PartitionMap::record` (no brokers; `bench-tool precision`, `bench/src/precision.rs`):

- **plain**: producer batches of 1-500 records, mirrored densely;
- **transactional**: transactions of 1-200 records, each closed by a marker that takes one
  source offset, one in ten aborted (its records are not mirrored);
- **compacted**: compaction left three in ten offsets, in runs of 1-5 between holes of 1-13.

{meta}

The true position of a group at source offset `p` is the target offset of the first mirrored
record at or after `p`, computed from how the partition was built, independently of both
translations. A translation before it re-delivers records (duplicates); one after it skips
records (lost). strait translates through its exact offset map; MirrorMaker 2 through its
offset syncs, modelled by `strait_wire::offset_map::mm2_model` (`offset.lag.max` = 100, 64 syncs
kept per partition, the "+1 rule"), fed with the same records at the same target offsets as
`crates/strait/tests/drill.rs` does, every sync delivered at once: MM2's best case. (That the
model matches {mm2_of(results)} own MM2 client is checked in `crates/strait/tests/mm2_client.rs`.)
Per lag bucket ({len(prec['points']) // 3} groups per topic, at the powers of ten and at random
log-spaced lags):

{parts}

![duplicates vs lag](bench-precision.png)

{verdict}
"""


def machine_share(f):
    """Cores busy during a run's window: the mirror, both brokers, everything else."""
    parts = [f.get(k, float("nan")) for k in ("cpu_pct", "source_broker_pct", "target_broker_pct", "other_pct")]
    return sum(p for p in parts if not math.isnan(p)) / 100


def findings_section(results, wls, runners):
    cores = results["machine"]["cores"]
    lines = ["### What the figures say", ""]
    have = lambda who: who in runners
    if have("strait") and have("mm2"):
        thr = [(med(w, "strait", "mb_per_s") / med(w, "mm2", "mb_per_s"), w["name"]) for w in wls]
        cpu = [(med(w, "mm2", "cpu_s_per_gb") / med(w, "strait", "cpu_s_per_gb"), w["name"]) for w in wls]
        thr.sort()
        cpu.sort()
        faster = [n for r, n in thr if r > 1]
        lines.append(
            f"- **strait against MM2.** strait moves the data faster in {len(faster)} of {len(wls)} workloads "
            f"(strait/MM2 throughput {thr[0][0]:.2f}x at the least, {thr[0][1]}, to {thr[-1][0]:.2f}x at the most, "
            f"{thr[-1][1]}). MM2's JVM spends {cpu[0][0]:.1f}x ({cpu[0][1]}) to {cpu[-1][0]:.1f}x "
            f"({cpu[-1][1]}) strait's CPU per GB: it decompresses every batch, deserialises and copies every "
            "record through Connect's source task loop, and compresses again; strait forwards the batches "
            "unopened.")
    if have("strait") and have("baseline"):
        thr = sorted((med(w, "strait", "mb_per_s") / med(w, "baseline", "mb_per_s"), w["name"]) for w in wls)
        cpu = sorted((med(w, "baseline", "cpu_s_per_gb") / med(w, "strait", "cpu_s_per_gb"), w["name"]) for w in wls)
        faster = [n for r, n in thr if r > 1]
        lines.append(
            f"- **strait against the baseline.** strait is faster in {len(faster)} of {len(wls)} workloads "
            f"({thr[0][0]:.2f}x to {thr[-1][0]:.2f}x); the baseline spends {cpu[0][0]:.1f}x to {cpu[-1][0]:.1f}x "
            "strait's CPU per GB (it pays per record and for the codecs, strait per batch).")
    if have("mm2") and have("baseline"):
        thr = sorted((med(w, "baseline", "mb_per_s") / med(w, "mm2", "mb_per_s"), w["name"]) for w in wls)
        cpu = sorted((med(w, "mm2", "cpu_s_per_gb") / med(w, "baseline", "cpu_s_per_gb"), w["name"]) for w in wls)
        lines.append(
            f"- **The two record-level mirrors.** The librdkafka baseline moves {thr[0][0]:.2f}x to "
            f"{thr[-1][0]:.2f}x MM2's throughput, and MM2 spends {cpu[0][0]:.1f}x to {cpu[-1][0]:.1f}x the "
            "baseline's CPU per GB: the same architecture, on the JVM and through Connect.")
    if have("strait") and have("ceiling"):
        share = sorted((med(w, "strait", "mb_per_s") / med(w, "ceiling", "mb_per_s"), w["name"]) for w in wls)
        lines.append(
            f"- **The ceiling.** strait reaches {share[0][0]:.0%} ({share[0][1]}) to {share[-1][0]:.0%} "
            f"({share[-1][1]}) of the target's ingest rate for the same batches replayed by a producer that does "
            "nothing else. Above 100% is within the noise of the shared machine, or the ceiling's own "
            "wave-by-wave producer: read the ceiling as the target's ingest time for these batches, not a "
            "strict bound.")
    saturated = []
    for w in wls:
        for who in runners:
            if who in w["median"] and machine_share(w["median"][who]) >= 0.9 * cores:
                saturated.append(f"{SHORT[who]} {w['name']}")
    if saturated:
        lines.append(
            f"- **Two cores for three JVMs and a mirror.** Both brokers and the mirror share {cores} cores. In "
            f"{len(saturated)} of the runs the machine was at least 90% busy over the window "
            f"({', '.join(saturated[:8])}{', ...' if len(saturated) > 8 else ''}): there, throughput is bounded "
            "by the CPU left to the brokers, and a mirror that uses less of it leaves more to them.")
    tgt_busy = [(med(w, who, "target_broker_pct"), SHORT[who], w["name"]) for w in wls for who in MIRRORS
                if have(who)]
    if tgt_busy:
        top = max(tgt_busy)
        per_gb = {who: [med(w, who, "target_broker_cpu_per_gb") for w in wls] for who in MIRRORS if have(who)}
        spread = "; ".join(f"{SHORT[who]} {min(v):.1f}-{max(v):.1f}" for who, v in per_gb.items())
        line = (f"- **The target broker** used up to {top[0]:.0f}% of a core during a mirror's window "
                f"({top[1]}, {top[2]}). Its CPU per GB written, by mirror: {spread} s/GB.")
        if have("strait") and have("baseline"):
            more = [w["name"] for w in wls
                    if med(w, "strait", "target_broker_cpu_per_gb") > med(w, "baseline", "target_broker_cpu_per_gb")]
            line += (f" It spent more per GB on strait's writes than on the baseline's in {len(more)} of "
                     f"{len(wls)} workloads: strait forwards the source's batches as they came (16 KiB, a "
                     "default Kafka producer's `batch.size`; a produce request carries one batch per "
                     "partition), the record-level mirrors re-batch into batches of up to 1 MB, and the "
                     "broker's cost is partly per batch.")
        lines.append(line)
    other = [med(w, who, "other_pct") for w in wls for who in runners if who in w["median"]]
    other = [o for o in other if not math.isnan(o)]
    if other:
        lines.append(
            f"- **Contention.** The rest of the machine (other engineers' builds and tests) used "
            f"{min(other):.0f}%-{max(other):.0f}% of a core during the measured windows, of the {cores} cores "
            "there are"
            + (": every run shared the CPU with them, so compare mirrors within a workload and read "
               "each repetition below." if max(other) >= 10 else ": the machine was otherwise quiet."))
    if have("strait") and have("ceiling"):
        behind = []
        for w in wls:
            st = med(w, "strait", "mb_per_s")
            ahead = [(who, med(w, who, "mb_per_s")) for who in ("mm2", "baseline")
                     if have(who) and med(w, who, "mb_per_s") > st]
            if not ahead:
                continue
            ceiling = med(w, "ceiling", "mb_per_s")
            who, best = max(ahead, key=lambda x: x[1])
            if ceiling < best:
                why = (f"the target takes the source's own batches at {fmt(ceiling)} MB/s at most (the ceiling), "
                       f"and strait moved {fmt(st)} ({pct(100 * st / ceiling)} of it); {SHORT[who]} re-batches into "
                       f"larger batches and so is not bound by that ({fmt(best)} MB/s)")
            else:
                busy = med(w, "strait", "target_broker_pct")
                limit = (f"the target broker was busy {pct(busy)} of a core in strait's window, so it was the "
                         f"limit, on the batches as strait forwards them" if busy >= 90 else
                         "here strait's own rounds are the limit (fetch, then produce, then the map, one "
                         "after another)")
                why = (f"strait moved {fmt(st)} MB/s, {pct(100 * st / ceiling)} of the {fmt(ceiling)} MB/s the target "
                       f"takes these batches at, and {SHORT[who]} {fmt(best)}: {limit}")
            behind.append(f"{w['name']}: {why}")
        if behind:
            lines.append("- **Where strait is behind.** " + "; ".join(behind) + ".")
    incomplete = [(w["name"], r) for w in wls for r in w.get("incomplete", [])]
    if incomplete:
        parts = []
        for name, r in incomplete:
            why = r.get("last_log_error")
            cause = (f": its log's last error was {why['error']}, {why['times']} times in a row"
                     if why else "")
            parts.append(f"{name}, {SHORT[r['mirror']]} repetition {r['rep']} did not copy everything "
                         f"within the run's time limit and was stopped{cause}")
        text = ("- **Incomplete runs.** " + "; ".join(parts) + ". Such a run has no figures: its "
                "workload's medians are those of the repetitions that finished.")
        if any((r.get("last_log_error") or {}).get("error") == "OUT_OF_ORDER_SEQUENCE_NUMBER"
               for _, r in incomplete):
            text += (
                " OUT_OF_ORDER_SEQUENCE_NUMBER without end is the Java idempotent producer's known"
                " retry loop on a new partition (KAFKA-14359, KAFKA-15591): its first batch to a"
                " partition whose leader was not ready yet fails with NOT_LEADER_OR_FOLLOWER, a later"
                " batch in flight lands first (a broker without producer state for the partition"
                " takes any sequence), and every retry of the first is then out of order. Kafka"
                " Connect sets `delivery.timeout.ms` to its maximum for source tasks, so MM2 retries"
                " for good and that partition never completes; with a finite timeout the batch"
                " would be dropped instead. It takes more than one request in flight per"
                " connection: the tuning below sets 5 (the producer's own default, which"
                " idempotence allows); Connect's default of 1 cannot reorder batches, and is"
                " slower. strait sends one batch at a time to a partition until"
                " one is acknowledged in its producer epoch (`strait-kafka/src/produce.rs`), so its"
                " first batches cannot overtake each other."
            )
        lines.append(text)
    return "\n".join(lines)


def warmup_section(results, wls, runners):
    rows = []
    for w in wls:
        for who in MIRRORS:
            if who not in runners:
                continue
            runs = w["runs"].get(who, [])
            if not runs:
                continue
            f = w["median"][who]
            rows.append([
                w["name"] if who == runners[0] or who == "strait" else "",
                SHORT[who],
                fmt(f["startup_s"], 1),
                fmt(f["warmup_s"], 1),
                krec(f["warmup_records_per_s"]),
                fmt(f["seconds"], 1),
                krec(f["records_per_s"]),
                ratio(f["records_per_s"], f["warmup_records_per_s"]),
                fmt(f["spawn_to_done_s"], 1),
                pct(100 * f["seconds"] / f["moving_s"]) if f.get("moving_s") else "-",
            ])
    return table(
        ["workload", "mirror", "start-up s (spawn to first record)", "warm-up s (excluded)", "warm-up rec/s",
         "window s", "window rec/s", "window / warm-up rate", "spawn to done s",
         "window share of the data-moving time"],
        rows,
    )


def tuning_section(results, wls):
    if not results.get("mm2_tuned", True):
        return ("MM2 ran **untuned** in this run (`--mm2-untuned`): its defaults, with only what a "
                "single-broker cluster needs (replication factors 1, no ACL sync, no reverse herder).")
    rows = []
    keys = []
    for w in wls:
        for k, v, why in w.get("mm2_tuning", []):
            if k not in keys:
                keys.append(k)
    per = {w["name"]: {k: v for k, v, _ in w.get("mm2_tuning", [])} for w in wls}
    why = {k: y for w in wls for k, _, y in w.get("mm2_tuning", [])}
    for k in keys:
        values = sorted({str(per[n].get(k, "-")) for n in per}, key=lambda s: (len(s), s))
        where = ", ".join(values) if len(values) > 1 else values[0]
        name = k.replace("S.", "SOURCE.", 1) if k.startswith("S.") else k.replace("T.", "TARGET.", 1)
        rows.append([f"`{name}`", where, why[k]])
    varying = table(
        ["workload", "tasks.max", "batch.size", "compression.type"],
        [[w["name"], per[w["name"]].get("tasks.max", "-"), f"{per[w['name']].get('T.producer.batch.size', 0):,}",
          per[w["name"]].get("T.producer.compression.type", "-")] for w in wls],
    )
    return f"""MM2 runs as Kafka ships it for dedicated mode: `java {results['machine']['mm2'].split('), ', 1)[-1]}
org.apache.kafka.connect.mirror.MirrorMaker mm2.properties --clusters TARGET` (the heap and
JVM options of `bin/connect-mirror-maker.sh` and `kafka-run-class.sh`), with one flow
`SOURCE->TARGET` limited to the workload's topic, the reverse herder and its heartbeats off,
replication factor 1 for every topic it creates and no ACL sync (single-broker clusters without
an authorizer), everything else at MM2's defaults (offset syncs, checkpoints, heartbeats, topic
config sync all on). On top of that, the throughput settings that Kafka's producer and consumer
documentation and MM2 tuning guides (for example Red Hat's "Handling high volumes of messages")
name, sized like the baseline's librdkafka settings. `TARGET.producer.*` reaches the Connect
worker's producer that the replication tasks write with; `SOURCE.consumer.*` reaches the
tasks' source consumer (checked in MM2's logged client configs):

{table(["setting", "value", "why"], rows)}

Per workload:

{varying}

`tasks.max` is the number of partitions up to the {results['machine']['cores']} cores; the batch size
shrinks where a task's partitions times `batch.size` would not fit twice in `buffer.memory` (the
Java producer allocates a whole batch per partition it batches for). `bench/run --mm2-untuned`
runs MM2 with its defaults instead, to see what the tuning is worth."""


def rel_to_root(path):
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def distance_section(files):
    """The "Across a distance" section: one table per results file of bench/distance (the
    100 MB workloads; the partition sweep), rows workload x round trip."""
    parts = [f"""## {DISTANCE_TITLE}

What MirrorMaker 2's documentation recommends for geo-replication: the mirror runs near the
target and reads from a source far away. Here the mirrors (strait, MM2, the baseline) reach the
source broker through a toxiproxy 2.5.0 link (`bench/toxiproxy` installs it from the Go module
proxy) whose latency toxics delay each direction by half the round trip: **20 ms RTT is 10 ms
each way**. The source broker advertises the proxy's address on a listener of its own (FAR) to
the clients that come through the proxy (`scripts/test-broker start --props-for`), while the
loader and the watcher reach both brokers directly. The ceiling (a replay of batches read next to
the source) does not apply and is not run.

Two throughputs per run, in MB/s of the source's wire bytes: **whole**, from the mirror's start
to the last record on the target, start-up included (what a user waits for at a distance), and
**window**, the measured window of the main tables (from 10% of the records on the target to
all of them). Start-up is the mirror's start to the first record on the target. CPU s/GB is the
mirror process's over the window; peak RSS from `wait4`. One run per cell, on a machine that may be
shared (the load average at start and end is under each table): compare the mirrors within a row.

What toxiproxy models and what not: it delays each chunk it reads by the latency, without
holding back the chunks behind it, so it adds a round trip to every request and response but
no TCP window: the sockets on both sides of it are on loopback, so socket buffer sizes and TCP
slow start play no part (on a real WAN a 64 KiB receive buffer caps a connection at 64 KiB per
round trip), and opening a connection costs no round trip. Record batches and the proxy's own
CPU (reported in the JSON as `proxy_cpu_s`) share the 2 cores with everything else.
"""]
    for path in files:
        res = json.loads(Path(path).read_text())
        d = res.get("distance", {})
        runners = [w for w in MIRRORS if w in res.get("runners", MIRRORS)]
        m = res.get("machine", {})
        sweep = res.get("mode") == "distance-partitions"
        title = ("Start-up against the partition count" if sweep else "Throughput, CPU and memory at 0, 20, 80 ms")
        rows = []
        for w in res["workloads"]:
            rtt = w.get("rtt_ms")
            bw = w.get("bandwidth_kbps")
            row = [w["name"], w["partitions"], fmt(w["wire_bytes"] / 1e6), f"{rtt} ms" + (f", {bw} KB/s" if bw else "")]
            bad = {i["mirror"] for i in w.get("incomplete", [])}

            def cell(who, key, digits=1):
                if who in bad and who not in w["median"]:
                    return "incomplete"
                return fmt(med(w, who, key), digits)

            row += ["incomplete" if who in bad and who not in w["median"]
                    else f"{cell(who, 'whole_mb_per_s')} / {cell(who, 'mb_per_s')}" for who in runners]
            row += [cell(who, "startup_s") for who in runners]
            if sweep:
                row += [cell(who, "whole_s") for who in runners]
            row += [cell(who, "cpu_s_per_gb") for who in runners]
            row += [cell(who, "peak_rss_mb", 0) for who in runners]
            rows.append(row)
        header = ["workload", "partitions", "wire MB", "source RTT"]
        header += [f"{SHORT[w]} MB/s whole / window" for w in runners]
        header += [f"{SHORT[w]} start-up s" for w in runners]
        if sweep:
            header += [f"{SHORT[w]} whole copy s" for w in runners]
        header += [f"{SHORT[w]} CPU s/GB" for w in runners]
        header += [f"{SHORT[w]} peak RSS MB" for w in runners]
        parts.append(f"### {title}\n\n{table(header, rows)}\n")
        notes = []
        for w in res["workloads"]:
            for i in w.get("incomplete", []):
                err = (i.get("last_log_error") or {}).get("error", "")
                again = any(r.get("attempt", 0) > i.get("attempt", 0) for r in w["runs"].get(i["mirror"], []))
                notes.append(f"- {w['name']} at {w.get('rtt_ms')} ms: {SHORT[i['mirror']]} did not copy everything "
                             f"within {res['mirror_timeout_s']} s" if "mirror_timeout_s" in res else "in time"
                             + " and was stopped"
                             + (f" (its log's last error: `{err[:160]}`, {i['last_log_error']['times']} times in a row)"
                                if err else "")
                             + ("; the figures above are of the run made again" if again else ""))
        if notes:
            parts.append("\n".join(notes) + "\n")
        tuning = d.get("mm2_wan_tuning") or []
        if tuning and "mm2" in runners:
            parts.append("MM2's source consumer across a distance, besides the throughput settings of "
                         "\"MirrorMaker 2's configuration\" (these replace its two fetch sizes):\n\n"
                         + table(["setting (source consumer)", "value", "why"],
                                 [[f"`{k.removeprefix('S.')}`", f"`{v}`", why] for k, v, why in tuning]) + "\n")
        parts.append(
            f"Reproduce: `{res.get('command', 'bench/distance')}` ({rel_to_root(path)}; strait's crates/ at "
            f"commit {m.get('strait_crates_commit') or m.get('strait_commit', '?')}{' with uncommitted changes in crates/' if m.get('strait_tree_dirty') else ''}, "
            f"load average {res.get('loadavg_at_start', [0])[0]:.1f} at start, "
            f"{(res.get('loadavg_at_end') or [float('nan')])[0]:.1f} at end).\n")
    return "\n".join(parts)


def p10k_section(path):
    """The "Ten thousand partitions" section, from bench/run --partitions-10k's results: one row
    per mirror, start-up beside the measured window."""
    res = json.loads(Path(path).read_text())
    (w,) = res["workloads"]
    runners = [r for r in res.get("runners", MIRRORS) if r in w["runs"]]
    m = res.get("machine", {})
    topics = w.get("topics", 1)
    per_topic = w["partitions"] // topics
    bad = {}
    for i in w.get("incomplete", []):
        bad.setdefault(i["mirror"], i)
    rows = []
    for who in runners:
        runs = w["runs"].get(who) or []
        if not runs:
            i = bad.get(who, {})
            err = (i.get("last_log_error") or {}).get("error", "")
            cause = i.get("cause")
            rows.append([LABEL[who], "did not finish"] + ["-"] * 8
                        + [f"stopped after {res.get('mirror_timeout_s', '?')} s"
                           + (f": {cause}" if cause else f"; last error `{err[:80]}`" if err else "")])
            continue

        def c(key, digits=1):
            return fmt(med(w, who, key), digits)

        rows.append([LABEL[who], c("startup_s"), c("all_partitions_written_s"), c("whole_s"),
                     c("mb_per_s"), c("whole_mb_per_s"), c("cpu_s_per_gb"), c("whole_cpu_s_per_gb"),
                     c("peak_rss_mb", 0), c("target_broker_cpu_per_gb"), ""])
    if "mm2" not in runners and Path(path).resolve() != EARLIER_10K.resolve() and EARLIER_10K.exists():
        # MM2 left out of this run (`--mirrors strait`): what it did in the run it was part of.
        earlier = json.loads(EARLIER_10K.read_text())
        i = next((i for i in earlier["workloads"][0].get("incomplete", []) if i["mirror"] == "mm2"), None)
        if i:
            em = earlier.get("machine", {})
            rows.append([f"{LABEL['mm2']} (earlier run)", "did not finish"] + ["-"] * 8
                        + [f"not run this time; in the run of commit "
                           f"{em.get('strait_commit', '?')} (`bench/results/{EARLIER_10K.name}`) it was stopped after "
                           f"{earlier.get('mirror_timeout_s', '?')} s: {i.get('cause', '')}"])
    header = ["mirror", "start-up s (first record)", "every partition written s", "whole copy s",
              "window MB/s", "whole MB/s", "window CPU s/GB", "whole CPU s/GB", "peak RSS MB",
              "target broker CPU s/GB (window)", "note"]
    brokers = w.get("brokers_after_load") or {}
    after = {}
    for who in runners:
        for r in w["runs"].get(who) or []:
            after[who] = r.get("brokers_after") or {}
    batches_per_partition = w["source_batches"] / w["partitions"]
    records_per_batch = w["records"] / w["source_batches"]
    files = []
    if brokers.get("source"):
        files.append(f"the source broker held {brokers['source']['fds']:,} open files and "
                     f"{brokers['source']['maps']:,} memory maps after the load")
    for who, b in after.items():
        if b.get("target"):
            files.append(f"the target broker {b['target']['fds']:,} files and {b['target']['maps']:,} maps "
                         f"after {SHORT[who]}'s copy")
    phases = ""
    built = m.get("strait_crates_commit") or m.get("strait_commit", "?")
    for r in w["runs"].get("strait") or []:
        lg = r.get("strait_log") or {}
        if lg:
            phases = (f"strait's own log (seconds from its first line, a fraction of a second after spawn): "
                      f"both remote topics created at {fmt(lg.get('remote_topics_created_s'))} s (one CreateTopics "
                      f"each); the flow started, every partition placed, at {fmt(lg.get('flow_started_s'))} s: placing "
                      f"waits until the target answers ListOffsets for all {w['partitions']:,} partitions, that is "
                      f"until the target broker has created every partition's log. A partition whose log is not there "
                      f"yet fails in the batched ListOffsets with a retriable error"
                      + (f". In the build measured (commit {built}), such partitions are asked again together, "
                         f"one request per leader after one metadata refresh and a backoff (since commit 570abde)"
                         if built_after(built, "570abde") else
                         f". In the build measured (commit {built}), such a partition was asked again alone "
                         f"(one request per partition, in turn, each retry refreshing the whole metadata first: the "
                         f"start-up CPU above); since commit 570abde they are asked again together, one request per "
                         f"leader after one metadata refresh, which this table has not measured yet")
                      + (f"; a fetch timed out at {fmt(lg['first_fetch_timeout_s'])} s" if "first_fetch_timeout_s" in lg else "")
                      + ".\n")
    says = ""
    st = w["median"].get("strait")
    if st:
        says = (f"What it says: strait's peak RSS was {fmt(st['peak_rss_mb'], 0)} MB, "
                f"{'within' if st['peak_rss_mb'] <= 256 * 1.048576 else 'above'} the goal of 256 MiB. Its CPU was "
                f"{fmt(st['cpu_s_per_gb'])} s/GB over the window, but {fmt(st['process_cpu_s'])} s over its whole "
                f"life ({fmt(st['whole_cpu_s_per_gb'])} s/GB), {fmt(st.get('startup_cpu_s'))} s of it before "
                f"the first record"
                + (": start-up (topics, the offset map, placing every partition, the first fetch)."
                   if built_after(built, "570abde") else
                   ": start-up, spent mostly in the placing loop below (a perf profile of it: "
                   "malloc and free, and decoding Metadata responses, again and again).")
                + f" The window's rate is the target broker's: it "
                f"used {pct(st['target_broker_pct'])} of a core, {fmt(st['target_broker_cpu_per_gb'], 0)} s/GB, "
                f"appending {records_per_batch:.0f}-record batches to partitions written for the first time. "
                f"Every partition got its first record only near the end "
                f"({fmt(st['all_partitions_written_s'])} s of {fmt(st['whole_s'])} s): each partition's "
                f"{w['wire_bytes'] / w['partitions'] / 1024:.0f} KiB fits in one fetch, and a fetch of 50 MiB "
                f"carries about {50 * 1048576 // max(1, w['wire_bytes'] // w['partitions']):,} partitions, so the "
                f"copy goes through the partitions a fetch at a time.\n")
    heap = ""
    hp = res.get("heap_profile")
    if hp:
        heap = (f"Where strait's memory goes, from heaptrack on a separate strait run over the same source "
                f"topics and brokers (`{hp['command']}`; heaptrack slows it, so its times are not figures): "
                f"peak heap {fmt(hp['peak_heap_mb'])} MB (peak RSS {fmt(hp['peak_rss_mb'])} MB with "
                f"heaptrack's own); the largest allocation sites, each at its own peak:\n\n"
                + table(["allocated in", "MB at its peak", "allocations", "what"],
                        [[f"`{a}`", fmt(b), f"{c:,}", d] for a, b, c, d in hp["top"]]) + "\n")
        if any("rewrite_for_forward" in a for a, *_ in hp["top"]) and not built_after(built, "d31f83f"):
            heap += ("\nThe two copies of every forwarded batch in that profile (`rewrite_for_forward` and the "
                     "ProduceRequest's encoding) are gone since commit d31f83f: the header is rewritten apart "
                     "and the records go to the socket from the fetched buffer (`docs/design.md` §3.2); this "
                     "table has not been measured again since.\n")
    la0, la1 = res.get("loadavg_at_start", [float("nan")])[0], res.get("loadavg_at_end", [float("nan")])[0]
    return f"""## {P10K_TITLE}

One flow of {w['partitions']:,} partitions ({topics} source topics of {per_topic:,} partitions; see
below why not one topic): {w['records']:,} records of {w['size']:,} bytes, {w['codec']}, {w['records'] // w['partitions']}
per partition, {fmt(w['wire_bytes'] / 1e6)} MB on the wire. The loader (librdkafka, `batch.size`
16 KiB, `linger.ms` 50, records spread round-robin) wrote them in {w['source_batches']:,} batches:
{records_per_batch:.1f} records ({fmt(w['wire_bytes'] / w['source_batches'] / 1024)} KiB on the
wire) per batch, {batches_per_partition:.1f} batches per partition. A producer spread over 10,000
partitions fills no batch before its linger ends: small batches are what a mirror of such a flow
forwards, and strait forwards them as they are.

Each mirror runs once, from its start on a new target (its remote topics, offset map and
internal topics made by itself). **Start-up** is spawn to the first record on the target;
**every partition written** is spawn to the first poll where all {w['partitions']:,} target
partitions hold a record (topic creation, the offset map, the first fetch and the first write to
each partition all done); **whole copy** is spawn to the last record. The window (MB/s, CPU s/GB)
runs from {w.get('warmup_share', res.get('warmup_share', 0.1)):.0%} of the records on the target to all
of them, as in the main tables. Peak RSS is the mirror's, from `wait4`. The watch polls every
{res.get('poll_ms', 100)} ms.

{table(header, rows)}

{says}
{phases}
{heap}
Brokers: {kafka_of(res)} ({m.get('broker', '')}). What 10,000
partitions needed of them: open files (`ulimit -n`; the run's limit was {res.get('nofile_limit', '?'):,}):
a broker keeps each log segment's file open, one per partition here; {'; '.join(files) or 'not recorded'}.
And a longer broker session: {', '.join(f'`{x}`' for x in res.get('broker_props', [])) or 'none'} (after
`scripts/kafka/broker.properties`, whose 6 s session suits quick restarts in tests). With 6 s, a
first attempt on this machine (load average 60 to 70 from other work on its 2 cores) saw both
combined nodes miss heartbeats to their own controllers while creating and serving 10,000
partitions; the target's controller fenced its broker (one event of 20 s: every partition loses
its leader, then regains it), the source took over 30 s to answer strait's first fetch, twice,
and the target answered nothing for minutes: that attempt was stopped. Nothing else was
changed: the default `num.io.threads` (8), `log.segment.bytes` (1 GiB, one segment per partition
here) and index sizes (10 MiB each, sparse files, mapped once used: two maps per partition,
against a vm.max_map_count of 65,530). Load average {fmt(la0)} at start, {fmt(la1)} at end.

Why two topics: Kafka's KRaft controller refuses any single operation of more than 10,000
metadata records (`QuorumController.MAX_RECORDS_PER_USER_OP`, not configurable). A CreateTopics
of one 10,000-partition topic is a TopicRecord and 10,000 PartitionRecords: refused with
POLICY_VIOLATION, "Unable to perform excessively large batch operation" (as
`kafka-topics.sh --create --partitions 10000` shows on these brokers), and so is one
CreateTopics naming topics whose partitions add up to 10,000 or more: MM2 names all its new
remote topics in one request, which is how it fails above. strait creates each remote topic in a
request of its own (`flow/topics.rs`): two topics of 5,000 work. A topic of 10,000 partitions or
more can only be created 9,999 partitions at a time and grown with CreatePartitions, at most 9,999
more per request, which is what strait does (by code and a unit test of the steps; no
topic of 10,000 partitions was mirrored here).

Reproduce: `{res.get('command', 'bench/run --partitions-10k')}` (about {fmt(res.get('duration_s', float('nan')) / 60, 0)} minutes);
results in [`bench/results/{Path(path).name}`](../bench/results/{Path(path).name}).
"""


def built_after(commit, change):
    """Whether the build at `commit` includes `change` (git: `change` is its ancestor); None when
    git cannot tell (an unknown commit, no repository)."""
    if not commit or commit == "?":
        return None
    r = subprocess.run(["git", "-C", str(ROOT), "merge-base", "--is-ancestor", change, commit],
                       capture_output=True)
    return {0: True, 1: False}.get(r.returncode)


def replace_section(path, title, text):
    """Puts `text` (a "## title" section) in place of that section of the file at `path`, or
    before the first kept section after it in KEPT_SECTIONS' order, or at the end."""
    old = path.read_text() if path.exists() else ""
    start = old.find(f"\n## {title}\n")
    if start >= 0:
        end = old.find("\n## ", start + 1)
        end = end if end >= 0 else len(old)
    else:
        later = [old.find(f"\n## {t}") for t in KEPT_SECTIONS[KEPT_SECTIONS.index(title) + 1:]]
        later = [i for i in later if i >= 0]
        start = end = min(later) if later else len(old.rstrip("\n"))
    new = old[:start].rstrip("\n") + "\n\n" + text.strip("\n") + "\n" + old[end:]
    path.write_text(new)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="?")
    ap.add_argument("--distance", nargs="+", metavar="DISTANCE.json",
                    help="update only the \"Across a distance\" section of DIR/benchmarks.md from these files")
    ap.add_argument("--partitions-10k", metavar="PARTITIONS-10K.json",
                    help="update only the \"Ten thousand partitions\" section of DIR/benchmarks.md from this file")
    ap.add_argument("--docs", default=str(ROOT / "docs"))
    args = ap.parse_args()
    if args.partitions_10k:
        out = Path(args.docs) / "benchmarks.md"
        out.parent.mkdir(parents=True, exist_ok=True)
        replace_section(out, P10K_TITLE, p10k_section(args.partitions_10k))
        print(f"wrote {out} (section \"{P10K_TITLE}\")")
        return
    if args.distance:
        out = Path(args.docs) / "benchmarks.md"
        out.parent.mkdir(parents=True, exist_ok=True)
        replace_section(out, DISTANCE_TITLE, distance_section(args.distance))
        print(f"wrote {out} (section \"{DISTANCE_TITLE}\")")
        return
    if not args.results:
        ap.error("RESULTS.json or --distance FILE... is needed")
    results = json.loads(Path(args.results).read_text())
    docs = Path(args.docs)
    runners = results.get("runners", ["strait", "mm2", "baseline", "ceiling"])
    charts(results, docs, runners)
    rel = Path(args.results).resolve().relative_to(ROOT)
    link = os.path.relpath(Path(args.results).resolve(), docs.resolve())
    m = results["machine"]
    wls = results["workloads"]
    mirrors = [w for w in MIRRORS if w in runners]

    head_rows = []
    for w in wls:
        row = [w["name"], fmt(w["wire_bytes"] / 1e6)]
        row += [fmt(med(w, who, "mb_per_s")) for who in mirrors]
        if "ceiling" in runners:
            row.append(fmt(med(w, "ceiling", "mb_per_s")))
        if "strait" in runners and "mm2" in runners:
            row.append(f"**{ratio(med(w, 'strait', 'mb_per_s'), med(w, 'mm2', 'mb_per_s'))}**")
        row += [fmt(med(w, who, "cpu_s_per_gb")) for who in mirrors]
        row += [fmt(med(w, who, "peak_rss_mb"), 0) for who in mirrors]
        head_rows.append(row)
    header = ["workload", "wire MB"] + [f"{SHORT[w]} MB/s" for w in mirrors]
    if "ceiling" in runners:
        header.append("ceiling MB/s")
    if "strait" in runners and "mm2" in runners:
        header.append("strait / MM2 throughput")
    header += [f"{SHORT[w]} CPU s/GB" for w in mirrors] + [f"{SHORT[w]} peak RSS MB" for w in mirrors]
    headline = table(header, head_rows)

    detail_rows = []
    for w in wls:
        first = True
        for who in runners:
            if who not in w["median"]:
                continue
            f = w["median"][who]
            detail_rows.append([
                w["name"] if first else "",
                SHORT[who],
                fmt(f["seconds"], 2),
                krec(f["records_per_s"]),
                fmt(f["mb_per_s"]),
                fmt(f["cpu_s"], 2),
                pct(f["cpu_pct"]),
                fmt(f["cpu_s_per_gb"]),
                fmt(f["peak_rss_mb"], 0),
                pct(f["source_broker_pct"]),
                pct(f["target_broker_pct"]),
                fmt(f["target_broker_cpu_per_gb"]),
                pct(f["other_pct"]),
                f"{machine_share(f):.2f}",
                " / ".join(f"{r['seconds']:.1f}" for r in w["runs"][who]),
            ])
            first = False
    details = table(
        ["workload", "run", "window s", "records/s", "MB/s", "mirror CPU s", "mirror CPU", "mirror CPU s/GB",
         "peak RSS MB", "source broker CPU", "target broker CPU", "target broker CPU s/GB", "rest of machine",
         "cores busy", "each repetition, window s"],
        detail_rows,
    )

    fair_rows = []
    for w in wls:
        f = w.get("fairness")
        if not f:
            continue
        fair_rows.append([
            w["name"],
            krec(f["baseline_consume_records_per_s"]),
            krec(f["librdkafka_consume_records_per_s"]),
            f"{f['baseline_consume_records_per_s'] / f['librdkafka_consume_records_per_s']:.0%}",
            krec(f["baseline_produce_records_per_s"]),
            krec(f["librdkafka_produce_records_per_s"]),
            f"{f['baseline_produce_records_per_s'] / f['librdkafka_produce_records_per_s']:.0%}",
        ])
    fairness = table(
        ["workload", "baseline consume-only rec/s", "rdkafka_performance -C rec/s", "ratio",
         "baseline produce-only rec/s", "rdkafka_performance -P rec/s", "ratio"],
        fair_rows,
    ) if fair_rows else "(not measured in this run)"

    summary = []
    if "strait" in runners and "mm2" in runners:
        summary.append(
            f"strait mirrors at **{gmean([med(w, 'strait', 'mb_per_s') / med(w, 'mm2', 'mb_per_s') for w in wls]):.2f}x** "
            f"MirrorMaker 2's throughput and its process uses **"
            f"{gmean([med(w, 'mm2', 'cpu_s_per_gb') / med(w, 'strait', 'cpu_s_per_gb') for w in wls]):.1f}x less CPU "
            "per GB** than MM2's JVM")
    if "strait" in runners and "baseline" in runners:
        summary.append(
            f"against the librdkafka baseline, **{gmean([med(w, 'strait', 'mb_per_s') / med(w, 'baseline', 'mb_per_s') for w in wls]):.2f}x** "
            f"the throughput and **{gmean([med(w, 'baseline', 'cpu_s_per_gb') / med(w, 'strait', 'cpu_s_per_gb') for w in wls]):.1f}x less CPU per GB**")
    rss = ", ".join(f"{SHORT[who]} at most {max(med(w, who, 'peak_rss_mb') for w in wls):.0f} MB" for who in mirrors)
    findings = findings_section(results, wls, runners)
    la0, la1 = results["loadavg_at_start"][0], results.get("loadavg_at_end", [float("nan")])[0]
    workload_list = ", ".join(w["name"] for w in wls)
    share = results.get("warmup_share", 0.1)
    quick_note = (
        "\n**This is a quick run** (a few workloads, little data, one repetition): a check that the "
        "benchmark works, not figures to quote. The full run is `bench/run`.\n" if results["mode"] == "quick" else "")
    text = f"""# Benchmarks

Generated by `{results['command'].strip()}` from [`{rel}`]({link}) — a real **{results['mode']}** run
started {results['started']} ({results['duration_s'] / 60:.0f} minutes). Do not edit by hand: run
`bench/run` again (`bench/run --quick` takes a few minutes).
{quick_note}
Three mirrors copy the same topic between two {kafka_of(results)} clusters on this machine, one
after another: **strait**; **MirrorMaker 2**, Kafka's own, in dedicated mode, tuned for
throughput (below); and **the baseline**, a record-level mirror on librdkafka
(`bench/src/bin/baseline_mirror.rs`: MM2's architecture on the fastest Kafka client; it keeps
partition, key, value, headers and timestamp, produces with the source's codec, acks=all,
idempotence on, 1 MB batches lingering up to 100 ms, 50 MB fetches with 4 MiB per partition).
The **ceiling** is the broker-bound reference: the source's batches, read into memory first,
written to an empty target topic by a raw idempotent producer that does nothing else
(`bench-tool ceiling`). strait and the baseline exit once everything the source held is on the
target (`strait run --until-caught-up`); MM2 never exits, so it is stopped once the target's end
offsets add up to the source's record count.

## Summary

Over the {len(wls)} workloads (geometric means): {'; '.join(summary) or 'see the table'}. Peak RSS:
{rss}. strait does its whole job in these runs (the offset map, MM2's offset syncs, topic
configs, a final checkpoint pass); MM2 does its own (offset syncs, heartbeats, topic configs,
checkpoints); the baseline only copies records.

{headline}

MB/s are the source topic's wire bytes (its record batches as stored, compressed) moved during
the measured window, median of {results['repetitions']} repetition(s). CPU s/GB is the mirror
process's user+sys CPU over the window (every thread; for MM2 the whole JVM: its JIT, GC and
Connect's threads) per GB of wire bytes moved in it. Peak RSS is the process's high-water mark
over its whole life, start-up included.

{findings}

![throughput by workload](bench-throughput.png)

![CPU per GB by workload](bench-cpu-per-gb.png)

## How the window excludes start-up and warm-up

Each run is watched from outside, the same way for every mirror: `bench-tool watch` polls the
target topic's end offsets every {results.get('poll_ms', 100)} ms (one ListOffsets request) and, at
each poll, reads the CPU time of the mirror process and of both brokers from `/proc/<pid>/stat`.
The measured window opens at the first poll where {share:.0%} of the records are on the target
and closes at the poll where all of them are. So it leaves out a mirror's start-up (MM2: the
JVM, plugin scanning, Connect's herder joining its group, the connectors creating the remote
topic and starting their tasks; strait: reading its map, creating topics) and its first
{share:.0%} of the data, in which the JVM compiles its hot paths. For the 1,024-partition workload
the window opens at 25% instead: Kafka's first append to each new partition is costly (about 5 s
of target broker CPU for a new 1,024-partition topic on this machine, against 0.7 s for the same
batches into partitions already written), every mirror's first round writes to every partition,
and a mirror in service writes to partitions created long before. Each workload carries enough
data that the window is most of the data-moving time. What was left out, per mirror (medians):

{warmup_section(results, wls, runners)}

A window / warm-up rate above 1 means the mirror ran faster once warm (MM2's JIT); the window
figures are the warm ones.

## Where the CPU went (medians, over the window)

CPU of each process during the window, as a share of one core (the machine has {m['cores']}
cores, so {m['cores']}00% is everything; "cores busy" adds them up): the mirror, the source broker
(serving fetches), the target broker (appending), and everything else on the machine meanwhile
(other engineers' builds and tests: see the conditions below). For the ceiling the mirror
columns are the replaying tool's.

{details}

## MirrorMaker 2's configuration

{tuning_section(results, wls)}

## Is the baseline tuned fairly?

Each half of the baseline alone, against librdkafka's own benchmark tool `rdkafka_performance`
(C, built by `bench/run` from the same bundled librdkafka 2.12.1 source), with the same client
settings: consume-only reads the whole source topic; produce-only writes the same number of
records of the same size and codec to an empty target topic (`rdkafka_performance` sends its own
constant payload, which compresses far better than the workload's values, so its produce rate
with lz4 and zstd is an upper bound; and it sends no key and no header, which the baseline
must carry).

{fairness}

## Workloads

{workload_list}. Source data is written once per workload by `bench-tool load` (librdkafka,
16 KiB batches lingering up to 50 ms, as a Kafka producer with its default `batch.size` writes),
each record with a key (`user-NNNNNNN`), one header, a create timestamp, and a value of the
stated size made of `field=value;` pairs (words, numbers and random hex ids; lz4 compresses it
about 2x, zstd about 3x). 64-partition topics get records round robin. The many-partition case is
1,024 partitions with little data each. Each run copies the topic to a target topic of its own,
checked afterwards: it holds as many records as the source.

{precision_section(results)}

## How it was measured

- Clusters: two {kafka_of(results)} single-node KRaft clusters (`scripts/test-broker`, combined
  broker and controller, data on disk, heap from `STRAIT_KAFKA_HEAP`, 1g here as
  `kafka-server-start.sh` sets), on loopback, started once per run of `bench/run`. Before the
  first workload both brokers are warmed up untimed (a topic loaded, mirrored and replayed).
- Every run gets cluster aliases of its own (`srcN`, `tgtN`), hence a remote topic and internal
  topics of its own; after each run every topic it made on either cluster is deleted
  (`bench-tool clean`; `file.delete.delay.ms=0`, so the files go at once).
- strait: `cargo build --release -p strait`, then `strait run --config F --until-caught-up
  --listen off` with the default settings of an MM2 config naming the topic.
- Order: in repetition *r* the runs (strait, MM2, baseline, ceiling) start at position *r* of
  that list, so drift of the machine hits each in turn.
- Per run: the window figures from `bench-tool watch` (above); the process's peak RSS and total
  CPU from `wait4`; the rest of the machine's CPU from `/proc/stat` minus the mirror, the brokers
  and the watcher.

Reproduce:

```sh
bench/run            # full: 13 workloads, 3 repetitions, about 0.7 GB of payload per workload
bench/run --quick    # four workloads (every codec, both sizes, 1/64/1,024 partitions), a tenth of the data, once
bench/run --only 100B-lz4-p64,1024B-zstd-p1   # some workloads
bench/run --mirrors strait,mm2 --mm2-untuned  # some mirrors; MM2 with its defaults
```

`bench/run` builds what it needs: the test broker (`scripts/test-broker install`: Kafka's jars
from Maven Central), strait in release, `bench/` (its own cargo project, outside the workspace:
librdkafka is compiled from the `rdkafka` crate's bundled source with `./configure` and `make`,
no cmake; it installs `gcc`, `make` and `perl` with apt-get when they are missing),
`rdkafka_performance`, and a virtualenv with matplotlib under `~/.cache/strait/bench-venv`.

## Machine and conditions

| | |
|---|---|
| CPU | {m['cpu']}, {m['cores']} cores |
| memory | {m['memory']} |
| kernel | {m['kernel']} |
| toolchain | {m['rustc']}; {m.get('java', '')} |
| strait | commit {m['strait_commit']}{' (with uncommitted changes in crates/)' if m['strait_tree_dirty'] else ''} |
| broker | {m['broker']} |
| MirrorMaker 2 | {m.get('mm2', '-')} |
| librdkafka | {m['librdkafka']} |
| load average | {la0:.1f} at start, {la1:.1f} at end |

The machine may be shared: the "rest of machine" column above shows how much CPU others took
during each window. Figures are medians of interleaved repetitions for that reason; compare the
mirrors within a workload rather than across runs of this page.
"""
    out = docs / "benchmarks.md"
    # Sections written by hand or by other commands from runs of their own, not part of this
    # one: "Across a distance" (`bench/distance`), "Offset map size" (`map-size`, no cluster)
    # and "Failover drill with MM2's checkpoints" (`bench/drill-mm2`): keep them.
    if out.exists():
        old = out.read_text()
        for title in KEPT_SECTIONS:
            start = old.find(f"\n## {title}")
            if start >= 0:
                end = old.find("\n## ", start + 1)
                text = text.rstrip("\n") + "\n" + old[start : end if end >= 0 else len(old)]
    out.write_text(text)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
