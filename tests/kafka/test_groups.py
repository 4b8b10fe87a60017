"""kstool groups describe: lag in records and in time."""

from __future__ import annotations

import json
import re
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from kstool.kafka import groups
from tests.conftest import cli
from tests.helpers import create_topic, produce_records

# the embedded broker's workarounds and a command group's end-to-end runs: on both brokers
pytestmark = pytest.mark.embedded_tier


def test_groups_describe_shows_lag_of_committed_offsets(kafka, topic_name):
    create_topic(kafka, topic_name, 2)
    produce_records(kafka, topic_name, [{"key": None, "value": b"x", "partition": i % 2,
                                      "timestamp": 1_000 + i} for i in range(10)])
    group = topic_name + "-g"
    consumer = Consumer({**kafka.consumer_conf(), "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic_name, 0, 2), TopicPartition(topic_name, 1, 5)],
                    asynchronous=False)
    consumer.close()
    result = cli("groups", "describe", group, "-o", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    parts = {p["partition"]: p for p in doc["partitions"]}
    assert (parts[0]["committed"], parts[0]["end_offset"], parts[0]["lag"]) == (2, 5, 3)
    assert (parts[1]["committed"], parts[1]["end_offset"], parts[1]["lag"]) == (5, 5, 0)
    assert doc["total_lag"] == 3
    listed = json.loads(cli("groups", "list", "-o", "json").stdout)
    assert group in [g["group"] for g in listed]
    typo = cli("groups", "describe", group + "x")  # #84: named the nearest group nowhere
    assert typo.exit_code == 1
    assert typo.stderr.strip() == f"kstool: error: consumer group {group + 'x'!r} does not exist; did you mean {group!r}?"


def test_groups_describe_time_lag_is_the_age_of_the_oldest_unprocessed_record(kafka, topic_name):
    create_topic(kafka, topic_name, 2)
    base = int(time.time() * 1000) - 3_600_000  # an hour ago
    produce_records(kafka, topic_name, [{"key": None, "value": b"x", "partition": 0, "timestamp": base + i * 60_000}
                                     for i in range(3)]  # p0: records 60 and 59 min old, and 58
                 + [{"key": None, "value": b"y", "partition": 1, "timestamp": base}])
    group = topic_name + "-g"
    consumer = Consumer({**kafka.consumer_conf(), "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic_name, 0, 1), TopicPartition(topic_name, 1, 1)],
                    asynchronous=False)
    consumer.close()
    before = int(time.time() * 1000)
    result = cli("groups", "describe", group, "--time-lag", "-o", "json")
    after = int(time.time() * 1000)
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    parts = {p["partition"]: p for p in doc["partitions"]}
    oldest = base + 60_000  # p0 committed 1: offset 1 waits; p1 is caught up
    assert before - oldest <= parts[0]["time_lag_ms"] <= after - oldest
    assert parts[1]["time_lag_ms"] == 0 and doc["max_time_lag_ms"] == parts[0]["time_lag_ms"]
    plain = json.loads(cli("groups", "describe", group, "-o", "json").stdout)
    assert "max_time_lag_ms" not in plain and "time_lag_ms" not in plain["partitions"][0]
    table = cli("groups", "describe", group, "--time-lag").stdout  # for people: minutes and seconds
    assert "TIME LAG" in table and re.search(r"max time lag 59m\d\ds", table) and re.search(r" 59m\d\ds\n", table)


def test_a_coordinator_catching_up_on_a_group_does_not_make_it_missing(kafka, topic_name, monkeypatch):
    """A coordinator that has just taken a group over from a lost node (seen on three Apache
    Kafka nodes, tests/kafka/test_cluster.py) answers, until its high watermark passes the
    group's records: stable offsets that do not settle within groups.SETTLE_S, and nothing
    committed to a read_uncommitted reader. The group is described once they settle."""
    create_topic(kafka, topic_name, 1)
    group = topic_name + "-g"
    consumer = Consumer({**kafka.consumer_conf(), "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic_name, 0, 3)], asynchronous=False)
    consumer.close()
    read_from_the_broker = groups._committed
    catching_up = iter(["unsettled", "nothing"])

    def coordinator(clients, group, partitions, isolation, timeout):
        answer = next(catching_up, "caught up")
        if answer == "unsettled":
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        if answer == "nothing":
            return [TopicPartition(tp.topic, tp.partition, -1001) for tp in partitions]  # OFFSET_INVALID
        return read_from_the_broker(clients, group, partitions, isolation, timeout)

    monkeypatch.setattr(groups, "_committed", coordinator)
    result = cli("groups", "describe", group, "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert [(p["partition"], p["committed"]) for p in json.loads(result.stdout)["partitions"]] == [(0, 3)]
