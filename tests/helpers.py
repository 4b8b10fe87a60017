"""Test-side Kafka helpers built on confluent-kafka directly, independent of kstool's code."""

from __future__ import annotations

import base64
import json
import sys
import time
from pathlib import Path
from typing import Callable

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

KSTOOL = [sys.executable, "-m", "kstool.commands.main"]  # kstool as a subprocess of the tests' Python

REPO = Path(__file__).resolve().parent.parent  # the checkout


def create_topic(kafka, topic: str, partitions: int = 1, config: dict | None = None) -> None:
    """Created, and seen in the broker's metadata: Apache Kafka's broker learns of a new topic a
    moment after CreateTopics answers, and a command run at once found no such topic."""
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(timeout=10)
    wait_until(lambda: _leaders_known(admin, topic, partitions), f"topic {topic} in the broker's metadata")


def _leaders_known(admin: AdminClient, topic: str, partitions: int) -> bool:
    found = admin.list_topics(timeout=10).topics.get(topic)
    return (found is not None and found.error is None and len(found.partitions) == partitions
            and all(p.leader >= 0 for p in found.partitions.values()))


class Deliveries:
    """Checks that every record was written: flush() counts a record the broker refused (a keyless
    one to a compacted topic on Apache Kafka) as done."""

    def __init__(self) -> None:
        self.errors: list = []

    def __call__(self, err, _msg) -> None:
        if err is not None:
            self.errors.append(err)

    def check(self, producer: Producer, timeout: float = 30) -> None:
        assert producer.flush(timeout) == 0
        assert not self.errors, f"the broker refused {len(self.errors)} record(s): {self.errors[0]}"


def produce_values(kafka, topic: str, values: list[bytes], partition: int | None = None,
                   timestamps: list[int] | None = None) -> None:
    producer, delivered = Producer(kafka.producer_conf()), Deliveries()
    for i, value in enumerate(values):
        kwargs = {"value": value, "on_delivery": delivered}
        if partition is not None:
            kwargs["partition"] = partition
        if timestamps is not None:
            kwargs["timestamp"] = timestamps[i]
        producer.produce(topic, **kwargs)
    delivered.check(producer)


def produce_batched(kafka, topic: str, records, linger_ms: int = 20) -> None:
    """records: (key, value), (key, value, partition) or (key, value, partition, timestamp ms);
    written as any application writes them: a default-batching producer, many records per
    batch (what the embedded broker's high watermark gets wrong)."""
    producer, delivered = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": linger_ms}), Deliveries()
    for i, record in enumerate(records):
        key, value, *placed = record
        kwargs = {"key": key, "value": value, "on_delivery": delivered}
        if placed:
            kwargs["partition"] = placed[0]
        if len(placed) > 1:
            kwargs["timestamp"] = placed[1]
        producer.produce(topic, **kwargs)
        if i % 10_000 == 0:
            producer.poll(0)
    delivered.check(producer)


def read_all(kafka, topic: str) -> list:
    """Every record of the topic, per partition in offset order (a list of Message), read up to
    the broker's end-of-partition signal as kcat -e reads: independent of ListOffsets."""
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    partitions = sorted(admin.list_topics(timeout=10).topics[topic].partitions)
    # Offset 0 (earliest when the log starts later) and short fetch waits: starting at
    # OFFSET_BEGINNING asks ListOffsets first, and with the default fetch wait a read of a
    # small topic took 1 s instead of 15 ms; the suite reads topics hundreds of times.
    consumer = Consumer({**kafka.consumer_conf(), "enable.partition.eof": True, "auto.offset.reset": "earliest",
                         "fetch.wait.max.ms": 10})
    out = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        pending, idle = set(partitions), 0
        while pending:
            msg = consumer.poll(1)
            if msg is None:
                idle += 1
                assert idle < 30, f"timed out reading {topic}: partitions {pending} never ended"
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())
                continue
            out.append(msg)
    finally:
        consumer.close()
    return sorted(out, key=lambda m: (m.partition(), m.offset()))


def tree_digest(root) -> str:
    """A digest of a folder's names and bytes: equal before and after means nothing changed."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(str(path.relative_to(root)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def end_in_process_runs() -> None:
    """End the runs made in this process as a process's exit would end them: the test session's
    JVM keeps a finished run's state stores loaded, and Spark's maintenance may upload a snapshot
    into the checkpoint later (kstool.engine.spark.state_stores). Seen twice in full runs: a
    refused reprocess "changed" the folder, and a reprocess in another process found its emptied
    checkpoint's state folder written again ("should be empty on batch 0")."""
    from kstool.engine.spark.state_stores import close_loaded_state_stores

    close_loaded_state_stores()


def app_digest(root) -> str:
    """tree_digest of an app's folder once the runs in this process are over."""
    end_in_process_runs()
    return tree_digest(root)


def latest_per_key(messages) -> dict:
    latest = {}
    for msg in messages:
        if msg.value() is None:
            latest.pop(msg.key(), None)
        else:
            latest[msg.key()] = msg.value()
    return latest


def as_long(data: bytes) -> int:
    assert len(data) == 8, data
    return int.from_bytes(data, "big", signed=True)


def counts_in(kafka, topic: str) -> dict[str, int]:
    """The latest count per key of a topic of string keys and long values (Kafka Streams'
    count()), {} while the topic does not exist yet (an app creates it when it first writes)."""
    try:
        return {k.decode(): as_long(v) for k, v in latest_per_key(read_all(kafka, topic)).items()}
    except KeyError:
        return {}


def end_offsets(kafka, topic: str) -> dict[int, int]:
    consumer = Consumer(kafka.consumer_conf())
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in admin.list_topics(timeout=10).topics[topic].partitions}
    finally:
        consumer.close()


# 2026-01-01T00:00:00Z: scripted inputs give times as seconds after it
T0 = 1_767_225_600_000


def produce_keyed(kafka, topic: str, records, partition: int = 0) -> None:
    """records: (key, value, seconds after T0[, headers]), produced in this order (value None =
    tombstone)."""
    producer, delivered = Producer(kafka.producer_conf()), Deliveries()
    for key, value, seconds, *headers in records:
        producer.produce(topic, key=key.encode() if isinstance(key, str) else key,
                         value=value.encode() if isinstance(value, str) else value,
                         partition=partition, timestamp=T0 + round(seconds * 1000), on_delivery=delivered,
                         headers=headers[0] if headers else None)
    delivered.check(producer)


def pipe(kafka, topic: str, records) -> None:
    """records: (key, value, timestamp ms) in order, one acknowledged send each to partition 0,
    as TopologyTestDriver#pipeInput takes them. kafka-python, since librdkafka cannot send
    timestamp 0."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap, acks="all", linger_ms=0, retries=0)
    try:
        for key, value, ts in records:
            producer.send(topic, key=None if key is None else str(key).encode(),
                          value=None if value is None else str(value).encode(), partition=0,
                          timestamp_ms=ts).get(timeout=30)
    finally:
        producer.close()
    assert [m.timestamp()[1] for m in read_all(kafka, topic)][-len(records):] == [r[2] for r in records]


def source_rows(keys, values, offsets=None, stamps_ms=None, headers=None):
    """Source rows as the engine's reader makes them (kstool.engine.io.range_reader.ARROW_SCHEMA);
    timestamps: `stamps_ms` (None: no timestamp), or a second per offset; headers: each one's
    ([{"key", "value"}] or None), or none."""
    import pyarrow as pa

    from kstool.engine.io.range_reader import ARROW_SCHEMA

    n = len(keys)
    offsets = list(range(n)) if offsets is None else offsets
    stamps_ms = [1000 * (o + 1) for o in offsets] if stamps_ms is None else stamps_ms
    return pa.RecordBatch.from_pydict(
        {"key": keys, "value": values, "topic": ["t"] * n, "partition": [0] * n, "offset": offsets,
         "timestamp": [None if t is None else 1000 * t for t in stamps_ms], "timestamp_type": [1] * n,
         "headers": [None] * n if headers is None else headers,
         "restored": [False] * n, "value_json": [None] * n, "partial": [None] * n}, schema=ARROW_SCHEMA)


def wait_until(condition: Callable[[], bool], what: str | Callable[[], str], limit_s: float = 180,
               poll_s: float = 0.2) -> None:
    """Polls condition until it holds. what: a text, or a function giving one (what was seen
    when it gave up). limit_s is a hang guard, not a timing check."""
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting: {what() if callable(what) else what}"
        time.sleep(poll_s)


def produce_records(kafka, topic: str, records: list[dict]) -> None:
    """Records as given: key, value, partition, timestamp and headers each."""
    producer, delivered = Producer(kafka.producer_conf()), Deliveries()
    for r in records:
        producer.produce(topic, key=r["key"], value=r["value"], partition=r["partition"],
                         timestamp=r["timestamp"], headers=r.get("headers") or None, on_delivery=delivered)
    delivered.check(producer, timeout=10)


def nonempty_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line]


def jsonl_rows(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def field_bytes(field):
    """The bytes of a JSON envelope's key or value (text, or {"base64": ...})."""
    if field is None:
        return None
    if isinstance(field, dict):
        return base64.b64decode(field["base64"])
    return field.encode("utf-8")


def send_json(handler, status: int, body, content_type: str = "application/json") -> None:
    """A test HTTP server's JSON answer (http.server's BaseHTTPRequestHandler `handler`)."""
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
