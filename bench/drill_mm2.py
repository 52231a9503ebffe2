#!/usr/bin/env python3
"""The failover drill with MirrorMaker 2's real checkpoints: where a consumer group continues on
the target after a failover, by strait's checkpoints and by those of Kafka's own MM2 (dedicated
mode, same Kafka release as the brokers), against the true position read from the clusters.

One source topic, `trace`, two partitions written by librdkafka:
- partition 0, plain: batches of 1-500 records;
- partition 1, transactional: transactions of 1-200 records, each closed by a marker that takes
  one offset, one in ten aborted.
Every record's value carries its id, so each record can be found on both targets.

Groups `drill-lag-<L>` commit, on both partitions, the source's end minus L (L = 0, 1, 100,
10,000, 100,000). Then strait (`strait run --until-caught-up`, aliases `s` and `st`) and MM2
(aliases `m` and `tgt`) each mirror the topic to the target under an alias of their own, both reading
read_committed (MM2's consumer is told so: its default, read_uncommitted, would copy aborted
records as if committed), both emitting checkpoints every second in MM2's format
(`<alias>.checkpoints.internal`). MM2 runs until its copy is complete and its checkpoints for
every group and partition have not changed for CHECKPOINT_SETTLE_S; then it gets SIGTERM.

The true position of a group at source offset p on a target is the target offset of the first
record at or after p (by source offset) that this target holds, found by id; or the target's
end if there is none. A checkpoint before it re-delivers records (duplicates); after it, skips
records (lost). Prints a JSON line (also written to --out) and a Markdown table.
"""

import argparse
import json
import os
import random
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parent.parent
TOPIC = "trace"
LAGS = [0, 1, 100, 10_000, 100_000]
KINDS = {0: "plain", 1: "transactional"}
CHECKPOINT_SETTLE_S = 10
MM2_TIMEOUT_S = 600


def log(msg):
    print(f"drill-mm2: {msg}", file=sys.stderr, flush=True)


def value_of(i):
    return f"id={i:09d};".encode() + b"x" * 90


def id_of(value):
    return int(value[3:12])


def produce_trace(bootstrap, records, seed):
    """Writes the trace; returns (ids written per partition, ids of aborted records)."""
    rng = random.Random(seed)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result()
    time.sleep(1)
    next_id = 0
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    written = 0
    while written < records:
        n = min(rng.randint(1, 500), records - written)
        for _ in range(n):
            plain.produce(TOPIC, value=value_of(next_id), key=str(next_id).encode(), partition=0)
            next_id += 1
            plain.poll(0)
        written += n
        plain.flush()
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "drill-trace", "linger.ms": 5})
    txn.init_transactions(30)
    written, aborted = 0, set()
    while written < records:
        n = min(rng.randint(1, 200), records - written)
        commit = rng.random() >= 0.1
        txn.begin_transaction()
        ids = list(range(next_id, next_id + n))
        next_id += n
        for i in ids:
            txn.produce(TOPIC, value=value_of(i), key=str(i).encode(), partition=1)
            txn.poll(0)
        # In the log before the transaction ends, aborted ones too, so that an abort marker
        # follows data on the broker.
        if txn.flush(30):
            raise SystemExit("the transactional producer did not deliver within 30 s")
        if commit:
            txn.commit_transaction(30)
        else:
            txn.abort_transaction(30)
            aborted.update(ids)
        written += n
    return next_id, aborted


def read_all(bootstrap, topic, partitions):
    """{partition: [(offset, id)]} read_committed from the beginning to the end."""
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "drill-reader",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
    })
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    out = {p: [] for p in partitions}
    done = set()
    deadline = time.time() + 300
    while len(done) < len(partitions):
        if time.time() > deadline:
            raise SystemExit(f"reading {topic} did not reach its end in 300 s")
        for m in c.consume(10_000, 1.0):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    done.add(m.partition())
                    continue
                raise SystemExit(f"reading {topic}: {m.error()}")
            out[m.partition()].append((m.offset(), id_of(m.value())))
    c.close()
    return out


def end_offsets(bootstrap, topic, partitions):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "drill-ends"})
    out = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in partitions}
    c.close()
    return out


def commit_groups(bootstrap, ends):
    """Commits drill-lag-<L> at end - L on every partition; returns {(group, partition): p}."""
    positions = {}
    for lag in LAGS:
        group = f"drill-lag-{lag}"
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        tps = [TopicPartition(TOPIC, p, max(0, end - lag)) for p, end in ends.items()]
        c.commit(offsets=tps, asynchronous=False)
        c.close()
        for tp in tps:
            positions[(group, tp.partition)] = tp.offset
    return positions


def read_string(buf, at):
    (n,) = struct.unpack_from(">h", buf, at)
    at += 2
    return buf[at:at + n].decode(), at + n


def read_checkpoints(bootstrap, alias, prefix="drill-lag-"):
    """The newest checkpoint per (group, partition) in `<alias>.checkpoints.internal` for the
    groups named `prefix...`, decoded from MM2's format: key (group STRING, topic STRING,
    partition INT32), value (version INT16, upstream INT64, downstream INT64, metadata STRING)."""
    topic = f"{alias}.checkpoints.internal"
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "drill-checkpoints",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
    })
    md = c.list_topics(topic, timeout=10)
    if topic not in md.topics or md.topics[topic].error is not None:
        c.close()
        return {}
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    out = {}
    deadline = time.time() + 30
    while time.time() < deadline:
        msgs = c.consume(1000, 1.0)
        eof = False
        for m in msgs:
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof = True
                    continue
                raise SystemExit(f"reading {topic}: {m.error()}")
            key, value = m.key(), m.value()
            group, at = read_string(key, 0)
            remote, at = read_string(key, at)
            (partition,) = struct.unpack_from(">i", key, at)
            _version, upstream, downstream = struct.unpack_from(">hqq", value, 0)
            if group.startswith(prefix):
                out[(group, partition)] = {"topic": remote, "upstream": upstream, "downstream": downstream}
        if eof:
            break
    c.close()
    return out


def count_records(bootstrap, topic):
    """Records in a single-partition topic (MM2's offset syncs)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "drill-count"})
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return hi - lo
    except Exception:  # noqa: BLE001 - no such topic
        return None
    finally:
        c.close()


def truth(source, target, positions):
    """{(group, partition): true target position} on a target read as {partition: [(offset, id)]}."""
    at = {p: {i: o for o, i in recs} for p, recs in target.items()}
    ends = {p: (recs[-1][0] + 1 if recs else 0) for p, recs in target.items()}
    out = {}
    for (group, p), pos in positions.items():
        found = None
        for off, i in source[p]:
            if off >= pos and i in at[p]:
                found = at[p][i]
                break
        out[(group, p)] = ends[p] if found is None else found
    return out


def score(checkpoints, true_positions, positions):
    rows = {}
    for key, want in true_positions.items():
        cp = checkpoints.get(key)
        if cp is None:
            rows[key] = {"checkpoint": None, "true": want, "duplicates": None, "lost": None}
            continue
        got = cp["downstream"]
        rows[key] = {
            "checkpoint": got,
            "upstream": cp["upstream"],
            "upstream_matches": cp["upstream"] == positions[key],
            "true": want,
            "duplicates": max(0, want - got),
            "lost": max(0, got - want),
        }
    return rows


def write_config(path, lines):
    path.write_text("\n".join(lines) + "\n")


def common_lines(src, tgt, source, target):
    return [
        f"clusters = {src}, {tgt}",
        f"{src}.bootstrap.servers = {source}",
        f"{tgt}.bootstrap.servers = {target}",
        f"{src}->{tgt}.enabled = true",
        f"{src}->{tgt}.topics = {TOPIC}",
        f"{src}->{tgt}.groups = drill-lag-.*",
        "emit.checkpoints.interval.seconds = 1",
        "refresh.groups.interval.seconds = 1",
        "sync.group.offsets.enabled = false",
        "replication.factor = 1",
        "checkpoints.topic.replication.factor = 1",
        "heartbeats.topic.replication.factor = 1",
        "offset-syncs.topic.replication.factor = 1",
    ]


def run_strait(args, work, source, target):
    cfg = work / "strait.properties"
    # A target alias of its own: MM2's offset syncs topic on the source is named after the
    # target alias (`mm2-offset-syncs.<target>.internal`), and strait writes one too; sharing it
    # would feed strait's syncs to MM2's checkpoints.
    write_config(cfg, common_lines("s", "st", source, target))
    log("strait mirrors (run --until-caught-up)")
    with open(work / "strait.log", "w") as out:
        subprocess.run([args.strait, "run", "--config", str(cfg), "--until-caught-up", "--listen", "off"],
                       stdout=out, stderr=subprocess.STDOUT, check=True, timeout=600,
                       env=dict(os.environ, RUST_LOG="info", NO_COLOR="1"))


def run_mm2(args, work, source, target, want_records, keys):
    cfg = work / "mm2.properties"
    write_config(cfg, common_lines("m", "tgt", source, target) + [
        "tgt->m.enabled = false",
        "tgt->m.emit.heartbeats.enabled = false",
        "m.consumer.isolation.level = read_committed",
        "offset.storage.replication.factor = 1",
        "status.storage.replication.factor = 1",
        "config.storage.replication.factor = 1",
        "sync.topic.acls.enabled = false",
    ])
    log("MM2 mirrors (dedicated mode)")
    out = open(work / "mm2.log", "w")
    proc = subprocess.Popen(
        [args.java, "-Xms256M", "-Xmx1G", f"-Dlog4j2.configurationFile={ROOT / 'scripts/kafka/log4j2.properties'}",
         "-cp", args.mm2_classpath, "org.apache.kafka.connect.mirror.MirrorMaker", str(cfg), "--clusters", "tgt"],
        stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + MM2_TIMEOUT_S
        last, stable_since = None, None
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"MM2 exited with {proc.returncode}: see {work / 'mm2.log'}")
            if time.time() > deadline:
                raise SystemExit(f"MM2 did not finish in {MM2_TIMEOUT_S} s: see {work / 'mm2.log'}")
            time.sleep(2)
            try:
                ends = end_offsets(target, f"m.{TOPIC}", [0, 1])
            except Exception:  # noqa: BLE001 - the remote topic is not there yet
                continue
            if sum(ends.values()) < want_records:
                continue
            cps = read_checkpoints(target, "m")
            now = {k: cps.get(k) for k in keys}
            if now != last:
                last, stable_since = now, time.time()
            elif time.time() - stable_since >= CHECKPOINT_SETTLE_S:
                log(f"MM2: copy complete, checkpoints unchanged for {CHECKPOINT_SETTLE_S} s "
                    f"({sum(v is not None for v in now.values())} of {len(keys)} present)")
                return cps
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        out.close()


def table(result):
    lines = [
        "| partition | lag | group's source position | true target position | strait checkpoint | strait duplicates / lost | MM2 checkpoint | MM2 duplicates / lost |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        s, m = row["strait"], row["mm2"]

        def cell(x):
            if x["checkpoint"] is None:
                return "none", "no checkpoint"
            return f"{x['checkpoint']:,}", f"{x['duplicates']:,} / {x['lost']:,}"

        sc, sd = cell(s)
        mc, md = cell(m)
        lines.append(
            f"| {row['partition']} ({row['kind']}) | {row['lag']:,} | {row['position']:,} | {s['true']:,} "
            f"| {sc} | {sd} | {mc} | {md} |"
        )
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--strait", required=True)
    ap.add_argument("--mm2-classpath", required=True)
    ap.add_argument("--java", default="java")
    ap.add_argument("--source", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--records", type=int, default=150_000, help="per partition (default 150,000)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", help="also write the JSON here")
    args = ap.parse_args()
    work = Path(args.work)
    started = time.time()

    log(f"writing the trace: {args.records:,} records per partition")
    _, aborted = produce_trace(args.source, args.records, args.seed)
    ends = end_offsets(args.source, TOPIC, [0, 1])
    positions = commit_groups(args.source, ends)
    source = read_all(args.source, TOPIC, [0, 1])
    committed = sum(len(v) for v in source.values())
    log(f"source: ends {ends}, {committed:,} committed records, {len(aborted):,} aborted")

    run_strait(args, work, args.source, args.target)
    strait_cps = read_checkpoints(args.target, "s")
    strait_target = read_all(args.target, f"s.{TOPIC}", [0, 1])

    mm2_cps = run_mm2(args, work, args.source, args.target, committed, list(positions))
    mm2_target = read_all(args.target, f"m.{TOPIC}", [0, 1])
    mm2_syncs = count_records(args.source, "mm2-offset-syncs.tgt.internal")

    for name, tgt in (("strait", strait_target), ("MM2", mm2_target)):
        got = sorted(i for recs in tgt.values() for _, i in recs)
        want = sorted(i for recs in source.values() for _, i in recs)
        if got != want:
            raise SystemExit(f"{name}'s copy differs from the source's committed records "
                             f"({len(got):,} vs {len(want):,}): the drill needs complete copies")

    strait_rows = score(strait_cps, truth(source, strait_target, positions), positions)
    mm2_rows = score(mm2_cps, truth(source, mm2_target, positions), positions)
    rows = []
    for (group, p), pos in sorted(positions.items(), key=lambda kv: (kv[0][1], int(kv[0][0].rsplit("-", 1)[1]))):
        rows.append({
            "group": group,
            "partition": p,
            "kind": KINDS[p],
            "lag": int(group.rsplit("-", 1)[1]),
            "position": pos,
            "strait": strait_rows[(group, p)],
            "mm2": mm2_rows[(group, p)],
        })
    result = {
        "records_per_partition": args.records,
        "source_ends": ends,
        "committed_records": committed,
        "aborted_records": len(aborted),
        "mm2_offset_syncs": mm2_syncs,
        "rows": rows,
        "duration_s": round(time.time() - started, 1),
    }
    line = json.dumps(result)
    if args.out:
        Path(args.out).write_text(line + "\n")
    print(line)
    print(table(result), file=sys.stderr)


if __name__ == "__main__":
    main()
