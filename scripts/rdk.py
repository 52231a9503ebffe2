#!/usr/bin/env python3
"""An independent Kafka client for strait's tests: librdkafka through confluent-kafka.

Run it with the venv python that `scripts/test-broker venv` makes. Input and output are JSON;
keys, values and header values are base64 strings, and null stays null.

Commands:
  produce        --bootstrap B --topic T [--compression C] [--idempotent]
                 stdin: [{"partition", "key", "value", "headers": [[name, value]], "timestamp"}]
                 stdout: [{"partition", "offset"}] in input order
  consume        --bootstrap B --topic T --count N [--timeout S]
                 stdout: [{"partition", "offset", "key", "value", "headers",
                           "timestamp": [type, ms]}] sorted by partition, then offset
  group-member   --bootstrap B --group G --topic T
                 prints READY once assigned, stays in the group until stdin closes or SIGTERM
  commit         --bootstrap B --group G --topic T --offsets P:O,P:O
  committed      --bootstrap B --group G --topic T --partitions 0,1
                 stdout: {"partition": offset or null}
  create-topic   --bootstrap B --topic T --partitions N [--config K=V ...]
  produce-txn    --bootstrap B --topic T [--compression C] [--transactional-id ID]
                 stdin: [{"commit": true|false, "records": [record as for produce]}]
                 one transactional producer runs the transactions in order: begin, produce,
                 flush, then commit or abort
                 stdout: [[{"partition", "offset"}] per record] per transaction
  txn-steps      --bootstrap B --topic T
                 stdin: [{"producer": NAME, "op": "begin"|"produce"|"commit"|"abort",
                          "records": [record as for produce] (produce only)}]
                 one transactional producer per NAME (made at its first step), the steps in
                 order; a produce step flushes its records before the next step, so several
                 producers' transactions interleave in the log as the steps do
                 stdout: [[{"partition", "offset"}] per record] per step ([] for the others)

STRAIT_RDK_CONFIG, a JSON object of librdkafka settings, is added to every client (TLS, SASL).

`rdk.py serve` runs the commands above (all but group-member) one after another in one process,
so a test that makes many calls starts Python and librdkafka once: each line of stdin is a JSON
object {"args": [command and options], "stdin": text, "config": STRAIT_RDK_CONFIG or null}, and
each answer a line {"code": exit code, "stdout": text, "stderr": text}. It ends when stdin closes.

Every client sets allow.auto.create.topics=false: the test broker creates a topic for any
metadata request that allows it.
"""

import argparse
import base64
import io
import json
import os
import signal
import sys
import threading
import time
import traceback
import uuid

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

METADATA_TIMEOUT_S = 15


def b64(data):
    return None if data is None else base64.b64encode(data).decode("ascii")


def unb64(text):
    return None if text is None else base64.b64decode(text)


def fail(message):
    print(f"rdk: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def emit(value):
    json.dump(value, sys.stdout)
    sys.stdout.write("\n")
    sys.stdout.flush()


def base_config(args):
    config = {
        "bootstrap.servers": args.bootstrap,
        "allow.auto.create.topics": False,
        "client.id": "strait-rdk",
    }
    # Extra librdkafka settings for secured clusters, as a JSON object.
    config.update(json.loads(os.environ.get("STRAIT_RDK_CONFIG") or "{}"))
    return config


def consumer_config(args, group):
    config = base_config(args)
    config.update(
        {
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    if getattr(args, "protocol", "classic") == "consumer":
        # KIP-848: the broker runs the group; session and heartbeat timing are the broker's
        # (librdkafka refuses session.timeout.ms with this protocol).
        config["group.protocol"] = "consumer"
    else:
        config["session.timeout.ms"] = 6000
    return config


def partitions_of(client, topic):
    metadata = client.list_topics(topic, timeout=METADATA_TIMEOUT_S)
    info = metadata.topics.get(topic)
    if info is None or info.error is not None:
        fail(f"topic {topic}: {info.error if info else 'not in metadata'}")
    return sorted(info.partitions)


def parse_int_list(text):
    return [int(p) for p in text.split(",") if p.strip()]


def cmd_produce(args):
    records = json.load(sys.stdin)
    config = base_config(args)
    config.update(
        {
            "acks": "all",
            # One produce call is one batch per partition (up to batch.size), which tests rely
            # on: flush() sends at once, so a long linger costs nothing, while a short one splits
            # a call into several batches on a busy machine (1 s once split 5 records in CI).
            "linger.ms": 60000,
            "compression.type": args.compression,
            "enable.idempotence": args.idempotent,
        }
    )
    if not args.idempotent:
        # Without idempotence a retried request can overtake the next one; tests rely on order.
        config["max.in.flight.requests.per.connection"] = 1
    producer = Producer(config)
    results = [None] * len(records)
    errors = []
    produce_records(producer, args.topic, records, results, errors)
    remaining = producer.flush(30)
    if errors:
        fail("delivery failed: " + "; ".join(errors))
    if remaining:
        fail(f"{remaining} record(s) not delivered within 30 s")
    emit(results)


def produce_records(producer, topic, records, results, errors):
    """Produces RECORDS (dicts as produce reads them) in order; delivery reports fill RESULTS
    and ERRORS."""

    def on_delivery(index):
        def callback(err, msg):
            if err is not None:
                errors.append(f"record {index}: {err}")
            else:
                results[index] = {"partition": msg.partition(), "offset": msg.offset()}

        return callback

    for index, record in enumerate(records):
        kwargs = {
            "topic": topic,
            "partition": record.get("partition", -1),
            "key": unb64(record.get("key")),
            "value": unb64(record.get("value")),
            "on_delivery": on_delivery(index),
        }
        headers = record.get("headers") or []
        if headers:
            kwargs["headers"] = [(name, unb64(value)) for name, value in headers]
        if record.get("timestamp") is not None:
            kwargs["timestamp"] = record["timestamp"]
        while True:
            try:
                producer.produce(**kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)


def cmd_produce_txn(args):
    transactions = json.load(sys.stdin)
    config = base_config(args)
    config.update(
        {
            "linger.ms": 5,
            "compression.type": args.compression,
            "transactional.id": args.transactional_id or f"strait-rdk-{uuid.uuid4()}",
        }
    )
    producer = Producer(config)
    try:
        producer.init_transactions(30)
    except KafkaException as e:
        fail(f"produce-txn: init_transactions: {e}")
    output = []
    for number, txn in enumerate(transactions):
        records = txn.get("records") or []
        results = [None] * len(records)
        errors = []
        try:
            producer.begin_transaction()
            produce_records(producer, args.topic, records, results, errors)
            # Flushed before the outcome, so every record has its offset also when aborted.
            remaining = producer.flush(30)
            if remaining:
                fail(f"produce-txn: transaction {number}: {remaining} record(s) not delivered")
            if errors:
                fail(f"produce-txn: transaction {number}: " + "; ".join(errors))
            if txn.get("commit", True):
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
        except KafkaException as e:
            fail(f"produce-txn: transaction {number}: {e}")
        output.append(results)
    emit(output)


def cmd_txn_steps(args):
    steps = json.load(sys.stdin)
    producers = {}
    output = []
    for number, step in enumerate(steps):
        name = step["producer"]
        op = step["op"]
        producer = producers.get(name)
        if producer is None:
            config = base_config(args)
            config.update(
                {"linger.ms": 5, "transactional.id": f"strait-rdk-{name}-{uuid.uuid4()}"}
            )
            producer = Producer(config)
            try:
                producer.init_transactions(30)
            except KafkaException as e:
                fail(f"txn-steps: step {number}: {name}: init_transactions: {e}")
            producers[name] = producer
        records = step.get("records") or []
        results = [None] * len(records)
        try:
            if op == "begin":
                producer.begin_transaction()
            elif op == "produce":
                errors = []
                produce_records(producer, args.topic, records, results, errors)
                remaining = producer.flush(30)
                if remaining:
                    fail(f"txn-steps: step {number}: {remaining} record(s) not delivered")
                if errors:
                    fail(f"txn-steps: step {number}: " + "; ".join(errors))
            elif op == "commit":
                producer.commit_transaction(30)
            elif op == "abort":
                producer.abort_transaction(30)
            else:
                fail(f"txn-steps: step {number}: unknown op {op!r}")
        except KafkaException as e:
            fail(f"txn-steps: step {number} ({name} {op}): {e}")
        output.append(results)
    emit(output)


def record_of(msg):
    """A consumed message as the JSON record the Rust side reads."""
    ts_type, ts = msg.timestamp()
    return {
        "partition": msg.partition(),
        "offset": msg.offset(),
        "key": b64(msg.key()),
        "value": b64(msg.value()),
        "headers": [[name, b64(value)] for name, value in (msg.headers() or [])],
        "timestamp": [ts_type, ts],
    }


def cmd_consume(args):
    consumer = Consumer(consumer_config(args, f"strait-rdk-{uuid.uuid4()}"))
    partitions = partitions_of(consumer, args.topic)
    consumer.assign([TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in partitions])
    records = []
    deadline = time.monotonic() + args.timeout
    while len(records) < args.count:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        msg = consumer.poll(min(left, 0.5))
        if msg is None:
            continue
        if msg.error() is not None:
            err = msg.error()
            if err.code() == KafkaError._PARTITION_EOF:
                continue
            if err.fatal():
                fail(f"consume: {err}")
            print(f"rdk: consume: {err}", file=sys.stderr, flush=True)
            continue
        records.append(record_of(msg))
    consumer.close()
    if len(records) < args.count:
        fail(f"consume: got {len(records)} of {args.count} records within {args.timeout} s")
    records.sort(key=lambda r: (r["partition"], r["offset"]))
    emit(records)


def cmd_group_consume(args):
    """Joins --group on --topic, reads at most --max records (all there are when omitted) from
    the group's committed offsets (earliest where none), commits what it read, leaves."""
    config = consumer_config(args, args.group)
    config["enable.partition.eof"] = True
    consumer = Consumer(config)
    assigned = set()
    at_eof = set()

    def on_assign(consumer, partitions):
        assigned.update(p.partition for p in partitions)

    consumer.subscribe([args.topic], on_assign=on_assign)
    records = []
    deadline = time.monotonic() + args.timeout
    while args.max is None or len(records) < args.max:
        left = deadline - time.monotonic()
        if left <= 0:
            fail(f"group-consume: got {len(records)} records, not at the end within {args.timeout} s")
        msg = consumer.poll(min(left, 0.5))
        if msg is None:
            continue
        if msg.error() is not None:
            err = msg.error()
            if err.code() == KafkaError._PARTITION_EOF:
                at_eof.add(msg.partition())
                if assigned and at_eof >= assigned:
                    break
                continue
            if err.fatal():
                fail(f"group-consume: {err}")
            print(f"rdk: group-consume: {err}", file=sys.stderr, flush=True)
            continue
        at_eof.discard(msg.partition())
        records.append(record_of(msg))
    if records:
        try:
            consumer.commit(asynchronous=False)
        except KafkaException as e:
            fail(f"group-consume: commit: {e}")
    consumer.close()
    emit(records)


def cmd_group_member(args):
    stop = threading.Event()
    assigned = threading.Event()

    def on_assign(consumer, partitions):
        assigned.set()

    def wait_stdin():
        sys.stdin.read()
        stop.set()

    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    threading.Thread(target=wait_stdin, daemon=True).start()

    consumer = Consumer(consumer_config(args, args.group))
    consumer.subscribe([args.topic], on_assign=on_assign)
    ready = False
    while not stop.is_set():
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is not None:
            err = msg.error()
            if err.fatal():
                fail(f"group-member: {err}")
            print(f"rdk: group-member: {err}", file=sys.stderr, flush=True)
        if assigned.is_set() and not ready:
            print("READY", flush=True)
            ready = True
    # close() leaves the group, so it becomes empty at once instead of after the session timeout.
    consumer.close()


def cmd_commit(args):
    offsets = []
    for item in args.offsets.split(","):
        partition, offset = item.split(":")
        offsets.append(TopicPartition(args.topic, int(partition), int(offset)))
    consumer = Consumer(consumer_config(args, args.group))
    consumer.assign(offsets)
    # A coordinator that is still loading its offsets (a broker just started), moving, or not
    # found yet (librdkafka's own _WAIT_COORD, seen on a busy shared broker) is asked again, as
    # Kafka's clients do; any other refusal (an active group) is final.
    transient = {
        KafkaError._WAIT_COORD,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
        KafkaError._TIMED_OUT,
        KafkaError.REQUEST_TIMED_OUT,
    }
    deadline = time.monotonic() + 30
    while True:
        try:
            result = consumer.commit(offsets=offsets, asynchronous=False)
            break
        except KafkaException as e:
            if e.args[0].code() in transient and time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            fail(f"commit: {e}")
    bad = [f"partition {tp.partition}: {tp.error}" for tp in result if tp.error is not None]
    if bad:
        fail("commit: " + "; ".join(bad))
    consumer.close()
    emit({str(tp.partition): tp.offset for tp in result})


def cmd_committed(args):
    consumer = Consumer(consumer_config(args, args.group))
    partitions = [TopicPartition(args.topic, p) for p in parse_int_list(args.partitions)]
    try:
        result = consumer.committed(partitions, timeout=METADATA_TIMEOUT_S)
    except KafkaException as e:
        fail(f"committed: {e}")
    bad = [f"partition {tp.partition}: {tp.error}" for tp in result if tp.error is not None]
    if bad:
        fail("committed: " + "; ".join(bad))
    consumer.close()
    emit({str(tp.partition): (None if tp.offset == OFFSET_INVALID else tp.offset) for tp in result})


def cmd_create_topic(args):
    admin = AdminClient(base_config(args))
    configs = {}
    for item in args.config:
        name, sep, value = item.partition("=")
        if not sep:
            fail(f"create-topic: --config {item} is not NAME=VALUE")
        configs[name] = value
    topic = NewTopic(args.topic, num_partitions=args.partitions, replication_factor=1, config=configs)
    futures = admin.create_topics([topic], operation_timeout=METADATA_TIMEOUT_S)
    try:
        futures[args.topic].result(timeout=METADATA_TIMEOUT_S)
    except KafkaException as e:
        fail(f"create-topic {args.topic}: {e}")
    # Return once a metadata request sees every partition, so the next client finds them.
    deadline = time.monotonic() + METADATA_TIMEOUT_S
    while True:
        info = admin.list_topics(args.topic, timeout=METADATA_TIMEOUT_S).topics.get(args.topic)
        if info is not None and info.error is None and len(info.partitions) == args.partitions:
            break
        if time.monotonic() > deadline:
            fail(f"create-topic {args.topic}: metadata does not show {args.partitions} partitions")
        time.sleep(0.1)
    emit({"topic": args.topic, "partitions": args.partitions})


def serve():
    real_stdin, real_stdout, real_stderr = sys.stdin, sys.stdout, sys.stderr
    for line in real_stdin:
        request = json.loads(line)
        os.environ["STRAIT_RDK_CONFIG"] = request.get("config") or "{}"
        out, err = io.StringIO(), io.StringIO()
        sys.stdin, sys.stdout, sys.stderr = io.StringIO(request.get("stdin") or ""), out, err
        code = 0
        try:
            if request["args"][:1] == ["group-member"]:
                fail("serve: group-member runs in a process of its own")
            main(request["args"])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except Exception:
            traceback.print_exc()
            code = 1
        finally:
            sys.stdin, sys.stdout, sys.stderr = real_stdin, real_stdout, real_stderr
        answer = {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}
        real_stdout.write(json.dumps(answer) + "\n")
        real_stdout.flush()


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="rdk.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name, func, group=False):
        p = sub.add_parser(name)
        p.add_argument("--bootstrap", required=True)
        p.add_argument("--topic", required=True)
        if group:
            p.add_argument("--group", required=True)
        p.set_defaults(func=func)
        return p

    p = command("produce", cmd_produce)
    p.add_argument(
        "--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"]
    )
    p.add_argument("--idempotent", action="store_true")

    p = command("consume", cmd_consume)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--timeout", type=float, default=30.0)

    p = command("group-member", cmd_group_member, group=True)
    p.add_argument(
        "--protocol",
        default="classic",
        choices=["classic", "consumer"],
        help="group.protocol: classic (JoinGroup/SyncGroup) or consumer (KIP-848)",
    )

    p = command("group-consume", cmd_group_consume, group=True)
    p.add_argument("--max", type=int, default=None)
    p.add_argument("--timeout", type=float, default=60.0)

    p = command("commit", cmd_commit, group=True)
    p.add_argument("--offsets", required=True, help="P:O,P:O")

    p = command("committed", cmd_committed, group=True)
    p.add_argument("--partitions", required=True, help="0,1,...")

    p = command("create-topic", cmd_create_topic)
    p.add_argument("--partitions", type=int, required=True)
    p.add_argument("--config", action="append", default=[], help="NAME=VALUE, repeatable")

    p = command("produce-txn", cmd_produce_txn)
    p.add_argument(
        "--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"]
    )
    p.add_argument("--transactional-id", default=None)

    command("txn-steps", cmd_txn_steps)

    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    if sys.argv[1:] == ["serve"]:
        serve()
    else:
        main()
