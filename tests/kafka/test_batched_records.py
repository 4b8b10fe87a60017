"""Every read counts every record of a batching producer: data comes from a default-batching
confluent-kafka producer, as any application writes it, never only from kstool."""

from __future__ import annotations

import json
import os
import threading

import pytest
from confluent_kafka import Producer

from kstool.config import build_client_config
from kstool.kafka.client import KafkaClients
from tests.conftest import cli
from tests.helpers import create_topic, nonempty_lines, produce_batched, read_all

# the embedded broker's workarounds and a command group's end-to-end runs: on both brokers
pytestmark = pytest.mark.embedded_tier


@pytest.fixture(scope="module")
def batched_topics() -> dict[str, str]:
    return {}  # per broker


@pytest.fixture
def batched(kafka, batched_topics):
    """20,000 records in two partitions, many per batch; keys k0..k99, values v<i>: made once
    per module and broker."""
    if kafka.bootstrap not in batched_topics:
        topic = f"batched-{os.getpid()}"
        create_topic(kafka, topic, 2)
        records = [(f"k{i % 100}".encode(), f"v{i}".encode(), i % 2) for i in range(20_000)]
        produce_batched(kafka, topic, records)
        assert len(read_all(kafka, topic)) == 20_000  # the independent reader sees them all
        batched_topics[kafka.bootstrap] = topic
    return batched_topics[kafka.bootstrap]


def test_consume_to_the_end_reads_every_record_of_a_batching_producer(kafka, batched):
    result = cli("consume", batched, "-e")
    assert result.exit_code == 0, result.stderr
    assert sorted(nonempty_lines(result.stdout)) == sorted(f"v{i}" for i in range(20_000))
    last = cli("consume", batched, "--from", "-3", "-e", "-f", "%p:%o %s\\n")
    assert sorted(nonempty_lines(last.stdout)) == ["0:9997 v19994", "0:9998 v19996", "0:9999 v19998",
                                           "1:9997 v19995", "1:9998 v19997", "1:9999 v19999"]


def test_topics_describe_and_time_bounds_count_every_batched_record(kafka, batched):
    doc = json.loads(cli("topics", "describe", batched, "-o", "json").stdout)
    assert doc["total_records"] == 20_000
    assert [p["high_offset"] for p in doc["partitions"]] == [10_000, 10_000]
    bounded = cli("consume", batched, "--to-time", "now", "-o", "jsonl")
    assert bounded.exit_code == 0 and len(nonempty_lines(bounded.stdout)) == 20_000


def test_changelog_and_state_reads_see_the_tail_of_a_batch(kafka, topic_name):
    changelog = f"{topic_name}-store-changelog"
    create_topic(kafka, changelog, 1, {"cleanup.policy": "compact"})
    produce_batched(kafka, changelog, [(f"key{i}".encode(), (i).to_bytes(8, "big")) for i in range(500)])
    last = cli("state", "get", "--changelog-topic", changelog, "--key-format", "string",
               "--value-format", "long", "key499", "-o", "json")
    assert last.exit_code == 0, last.stderr
    assert json.loads(last.stdout)[0]["value"] == 499
    described = json.loads(cli("changelog", "describe", changelog, "--key-format", "string",
                               "--value-format", "long", "-o", "json").stdout)
    assert described["total"]["records"] == 500 and described["total"]["distinct_keys"] == 500


def test_replay_and_reset_plans_cover_batched_records(kafka, batched, topic_name):
    create_topic(kafka, topic_name, 2)
    copied = cli("replay", "--from-topic", batched, "--to-topic", topic_name, "-o", "json")
    assert copied.exit_code == 0, copied.stderr
    assert json.loads(copied.stdout)["records"] == 20_000
    assert len(read_all(kafka, topic_name)) == 20_000
    plan = json.loads(cli("reset", "--app-id", topic_name + "-app", "--input-topics", batched,
                          "--to-latest", "--dry-run", "-o", "json").stdout)
    assert sorted(o["target"] for o in plan["offsets"]) == [10_000, 10_000]


def test_run_once_counts_every_record_of_a_batching_producer(kafka, spark, topic_name):
    source, sink = topic_name, topic_name + "-out"
    create_topic(kafka, source, 2)
    produce_batched(kafka, source, [(None, f"w{i % 50} shared".encode(), i % 2) for i in range(3000)])
    result = cli("run", "wordcount", "--input", source, "--output", sink, "--app-id", topic_name,
                 "--once", "--report", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["input_records"] == 3000
    counts = {}
    for msg in read_all(kafka, sink):
        counts[msg.key().decode()] = int.from_bytes(msg.value(), "big")
    assert counts["shared"] == 3000 and counts["w0"] == 60


def test_the_end_of_a_partition_written_without_a_pause_is_a_true_end(kafka, topic_name):
    """While a batching producer keeps writing, the end found (kstool.kafka.ends: the first
    fetch's high watermark, not an end-of-partition event the reader would chase) covers every
    record written before the call, and every offset below it holds a record."""
    create_topic(kafka, topic_name, 1)
    producer = Producer({**kafka.producer_conf(), "linger.ms": 5})
    written, stop = [0], threading.Event()

    def write():
        while not stop.is_set():
            for _ in range(200):
                producer.produce(topic_name, value=b"v")
            producer.flush(10)
            written[0] += 200

    writer = threading.Thread(target=write)
    writer.start()
    try:
        while written[0] < 2000:
            stop.wait(0.01)
        before = written[0]
        end = KafkaClients(build_client_config()).watermarks([(topic_name, 0)])[(topic_name, 0)][1]
    finally:
        stop.set()
        writer.join(30)
    assert end >= before
    assert len(read_all(kafka, topic_name)) >= end  # no offset below the end is missing
