"""Kafka's own tools as the second opinion: kafka-topics, kafka-consumer-groups and
kafka-console-consumer, run from Apache Kafka's jars on the same topics and groups, give the
answers kstool's topics describe, groups describe, consume and reset --to-datetime give."""

from __future__ import annotations

import json
import re

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.apache_kafka import kafka_tool
from tests.conftest import cli
from tests.helpers import T0, create_topic

TOPICS = "org.apache.kafka.tools.TopicCommand"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"


def _tool(kafka, main: str, *args: str) -> str:
    ran = kafka_tool(main, "--bootstrap-server", kafka.bootstrap, *args)
    assert ran.returncode == 0, ran.stderr[-2000:]
    return ran.stdout


def _produce(kafka, topic: str, records: list[tuple[int, bytes | None, bytes, int, list]]) -> None:
    """(partition, key, value, timestamp, headers), batched as a normal producer batches."""
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 50})
    for partition, key, value, timestamp, headers in records:
        producer.produce(topic, value=value, key=key, partition=partition, timestamp=timestamp, headers=headers)
    assert producer.flush(30) == 0


def _commit(kafka, group: str, offsets: dict[tuple[str, int], int]) -> None:
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def test_topics_describe_agrees_with_kafka_topics(on_apache_kafka, topic_name):
    kafka = on_apache_kafka
    create_topic(kafka, topic_name, 3, {"retention.ms": "123456789", "cleanup.policy": "compact,delete"})
    theirs = _tool(kafka, TOPICS, "--describe", "--topic", topic_name)
    ours = json.loads(cli("topics", "describe", topic_name, "-o", "json").stdout)
    header, *rows = [line.strip() for line in theirs.strip().splitlines()]
    assert f"PartitionCount: {len(ours['partitions'])}" in header
    # key=value pairs joined by commas, and a value may hold commas of its own
    configs = dict(re.findall(r"([\w.]+)=(.*?)(?=,[\w.]+=|$)", re.search(r"Configs: (\S+)", header).group(1)))
    assert configs["retention.ms"] == "123456789" and configs["cleanup.policy"] == "compact,delete"
    assert {k: ours["configs"][k] for k in configs} == configs
    for row, partition in zip(rows, ours["partitions"], strict=True):
        fields = dict(re.findall(r"(\w+): ([\d,]*)", row))
        assert (int(fields["Partition"]), int(fields["Leader"])) == (partition["partition"], partition["leader"])
        assert [int(r) for r in fields["Replicas"].split(",")] == partition["replicas"]
        assert [int(r) for r in fields["Isr"].split(",")] == partition["isr"]


def test_groups_describe_agrees_with_kafka_consumer_groups(on_apache_kafka, topic_name):
    kafka, group = on_apache_kafka, topic_name + "-group"
    create_topic(kafka, topic_name, 3)
    _produce(kafka, topic_name, [(i % 3, None, b"v%d" % i, T0 + i, []) for i in range(20)])
    _commit(kafka, group, {(topic_name, 0): 3, (topic_name, 1): 7})  # partition 2: nothing committed
    theirs = _tool(kafka, GROUPS, "--describe", "--group", group)
    rows = [line.split() for line in theirs.splitlines() if line.startswith(group + " ")]
    their_rows = {int(r[2]): (int(r[3]), int(r[4]), int(r[5])) for r in rows if r[3] != "-"}
    ours = json.loads(cli("groups", "describe", group, "-o", "json").stdout)
    assert {p["partition"]: (p["committed"], p["end_offset"], p["lag"]) for p in ours["partitions"]} \
        == their_rows == {0: (3, 7, 4), 1: (7, 7, 0)}
    assert ours["total_lag"] == 4


def test_consume_agrees_with_kafka_console_consumer(on_apache_kafka, topic_name):
    kafka = on_apache_kafka
    create_topic(kafka, topic_name, 2)
    records = [(i % 2, None if i % 5 == 0 else b"k%d" % i, b"value %d" % i, T0 + 1000 * i,
                [("h", b"x%d" % i), ("n", b"%d" % (i % 3))] if i % 4 else []) for i in range(12)]
    _produce(kafka, topic_name, records)
    theirs = _tool(kafka, CONSOLE_CONSUMER, "--topic", topic_name, "--from-beginning", "--max-messages", "12",
                   "--timeout-ms", "60000", *[arg for prop in ("print.key", "print.timestamp", "print.headers",
                                                                "print.partition", "print.offset")
                                              for arg in ("--formatter-property", f"{prop}=true")])
    their_records = set()
    for line in theirs.splitlines():
        stamp, partition, offset, headers, key, value = line.split("\t")
        their_records.add((int(partition.removeprefix("Partition:")), int(offset.removeprefix("Offset:")),
                           int(stamp.removeprefix("CreateTime:")), None if key == "null" else key, value,
                           () if headers == "NO_HEADERS" else tuple(tuple(h.split(":", 1)) for h in headers.split(","))))
    consumed = cli("consume", topic_name, "--exit", "-o", "jsonl")
    assert consumed.exit_code == 0, consumed.stderr
    our_records = {(r["partition"], r["offset"], r["timestamp"], r["key"], r["value"], tuple(map(tuple, r["headers"])))
                   for r in map(json.loads, consumed.stdout.splitlines())}
    assert our_records == their_records and len(our_records) == 12


def test_reset_to_datetime_agrees_with_kafka_consumer_groups_dry_run(on_apache_kafka, topic_name):
    """Apache Kafka answers ListOffsets by time from its time index: kstool's plan and
    `kafka-consumer-groups --reset-offsets --to-datetime --dry-run` name the same offsets, and
    `consume --from-time` starts at them."""
    kafka, group = on_apache_kafka, topic_name + "-app"
    create_topic(kafka, topic_name, 2)
    # partition 0: a second apart; partition 1: out of order, the earliest at or after the time wins
    _produce(kafka, topic_name, [(0, None, b"a%d" % i, T0 + 1000 * i, []) for i in range(10)]
             + [(1, None, b"b%d" % i, T0 + 1000 * t, []) for i, t in enumerate([9, 1, 7, 2, 8, 3])])
    _commit(kafka, group, {(topic_name, 0): 10, (topic_name, 1): 6})
    when = "2026-01-01T00:00:06.500"
    theirs = _tool(kafka, GROUPS, "--reset-offsets", "--group", group, "--topic", topic_name,
                   "--to-datetime", when + "Z", "--dry-run")
    rows = [line.split() for line in theirs.splitlines() if line.startswith(group + " ")]
    their_offsets = {int(r[2]): int(r[3]) for r in rows}
    plan = cli("reset", "--app-id", group, "--input-topics", topic_name, "--to-datetime", when + "Z",
               "--dry-run", "-o", "json")
    assert plan.exit_code == 0, plan.stderr
    ours = {o["partition"]: o["target"] for o in json.loads(plan.stdout)["offsets"]}
    assert ours == their_offsets == {0: 7, 1: 0}
    consumed = cli("consume", topic_name, "--from-time", when + "Z", "--exit", "-o", "jsonl")
    first = {}
    for record in map(json.loads, consumed.stdout.splitlines()):
        first.setdefault(record["partition"], record["offset"])
    assert first == their_offsets
