"""The bulk writer and Kafka's partitioner, against the real broker."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
from confluent_kafka import Producer
from hypothesis import given, strategies as st

from kstool.config import build_client_config
from kstool.kafka.bulk import MAX_SHARED_WRITERS, BulkWriter, shared_writer
from kstool.kafka.client import KafkaClients
from kstool.kafka.exceptions import KafkaOperationError
from kstool.kafka.partitioner import partition_for, partitions_for
from tests.helpers import create_topic, end_offsets, read_all

# the embedded broker's workarounds and a command group's end-to-end runs: on both brokers
pytestmark = pytest.mark.embedded_tier


def test_murmur2_matches_librdkafka_partitioner(kafka, topic_name):
    create_topic(kafka, topic_name, 7)
    producer = Producer({**kafka.producer_conf(), "partitioner": "murmur2_random"})
    delivered = {}
    keys = [f"key-{i}".encode() for i in range(200)] + [b"", b"a", b"ab", b"abc", "ü日".encode()]
    for key in keys:
        producer.produce(topic_name, key=key, value=b"v",
                         on_delivery=lambda err, msg: delivered.__setitem__(msg.key(), msg.partition()))
    producer.flush(10)
    assert {k: partition_for(k, 7) for k in keys} == delivered
    assert dict(zip(keys, partitions_for(keys, 7).tolist())) == delivered


@given(st.lists(st.binary(max_size=13), max_size=60), st.integers(1, 40))
def test_keys_partitioned_at_once_land_where_one_by_one_they_would(keys, partitions):
    assert partitions_for(keys, partitions).tolist() == [partition_for(k, partitions) for k in keys]


def test_bulk_writer_end_offsets_cover_every_record(kafka, topic_name):
    create_topic(kafka, topic_name, 3)
    writer = BulkWriter(KafkaClients(build_client_config()), {topic_name: 3})
    for i in range(5000):
        writer.send(topic_name, f"k{i % 97}".encode(), str(i).encode(), 1_000 + i)
    assert writer.flush() == 5000
    records = read_all(kafka, topic_name)
    assert len(records) == 5000
    assert sum(end_offsets(kafka, topic_name).values()) == 5000  # the watermark covers all
    for msg in records:  # keyed records land where Kafka's partitioner puts them
        assert msg.partition() == partition_for(msg.key(), 3)


def test_writers_that_hand_their_tail_to_a_last_one_still_end_every_partition_right(kafka, topic_name):
    """The executor sink's shape: several writers share partitions, each keeps back its tail,
    and one writer sends all tails last, headers and all."""
    create_topic(kafka, topic_name, 2)
    clients = KafkaClients(build_client_config())
    held = []
    for task in range(3):
        writer = BulkWriter(clients, {topic_name: 2})
        for i in range(1000):
            writer.send(topic_name, f"t{task}-k{i % 31}".encode(), str(i).encode(), 1_000 + i,
                        [("n", f"{task}-{i}".encode())])
        writer.flush(send_held=False)
        held += writer.take_held()
    assert len(held) == (6 if clients.config.single_record_tail else 0)  # one per task and partition
    last = BulkWriter(clients, {topic_name: 2})
    for topic, key, value, ts, partition, headers in held:
        last.send(topic, key, value, ts, headers, partition=partition)
    last.flush()
    written = read_all(kafka, topic_name)
    assert sorted(m.headers()[0][1] for m in written) == sorted(f"{t}-{i}".encode() for t in range(3) for i in range(1000))
    assert sum(end_offsets(kafka, topic_name).values()) == 3000


def test_rows_sent_at_once_land_as_one_by_one_sends_would(kafka, topic_name):
    """send_rows (the sinks' columns) against send(): the same partitions, the same order in
    each, every partition's watermark at its end; given partitions are kept."""
    create_topic(kafka, topic_name, 3)
    clients = KafkaClients(build_client_config())
    keys = [f"k{i % 53}".encode() for i in range(3000)]
    values = [str(i).encode() for i in range(3000)]
    stamps = [1_000 + i for i in range(3000)]
    writer = BulkWriter(clients, {topic_name: 3}, errors_only=True)
    writer.send_rows(topic_name, keys[:1000], values[:1000], stamps[:1000])
    writer.send_rows(topic_name, keys[1000:2000], values[1000:2000], stamps[1000:2000],
                     [i % 3 for i in range(1000, 2000)])
    writer.send_rows(topic_name, [None] * 6, [b"n"] * 6, [5] * 6)
    writer.send_rows(topic_name, keys[2000:], values[2000:], stamps[2000:])
    assert writer.flush() == 3006
    written = read_all(kafka, topic_name)
    assert sum(end_offsets(kafka, topic_name).values()) == len(written) == 3006
    by_partition: dict[int, list[bytes]] = {}
    for msg in written:
        if msg.key() is not None:  # null keys: random partitions (librdkafka) or in turn (the tail profile)
            by_partition.setdefault(msg.partition(), []).append(msg.value())
            assert msg.timestamp()[1] == 1_000 + int(msg.value())
    expected: dict[int, list[bytes]] = {}
    for i, (key, value) in enumerate(zip(keys, values)):
        expected.setdefault(i % 3 if 1000 <= i < 2000 else partition_for(key, 3), []).append(value)
    assert by_partition == expected


def test_a_writer_that_reports_errors_only_still_counts_what_was_not_written(kafka, topic_name):
    create_topic(kafka, topic_name, 1)
    writer = BulkWriter(KafkaClients(build_client_config()), {topic_name: 1}, errors_only=True,
                        **{"message.max.bytes": 10_000})
    writer.send_rows(topic_name, [b"a", b"b", b"c"], [b"1", b"x" * 20_000, b"3"], [1, 2, 3])
    with pytest.raises(KafkaOperationError, match=r"^2 record\(s\) written, 1 not delivered .*over the size limit"):
        writer.flush()
    assert [m.value() for m in read_all(kafka, topic_name)] == [b"1", b"3"]


def _librdkafka_clients() -> int:
    """This process's librdkafka clients: each has one main thread."""
    names = []
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(FileNotFoundError):  # a thread that ended meanwhile
            names.append(Path(f"/proc/self/task/{task}/comm").read_text().strip())
    return names.count("rdk:main")


def test_a_process_that_writes_for_many_apps_keeps_a_bounded_number_of_producers(kafka, topic_name):
    """The warm engine (or a test worker) writes for app after app: the writers of the apps it no
    longer runs go, the least recently used first, and their producers' threads with them."""
    clients = KafkaClients(build_client_config())
    before = _librdkafka_clients()
    first = shared_writer(clients, {f"{topic_name}-0": 1})
    for i in range(1, MAX_SHARED_WRITERS + 10):
        shared_writer(clients, {f"{topic_name}-{i}": 1})
        assert shared_writer(clients, {f"{topic_name}-0": 1}) is first  # used again: kept
    assert _librdkafka_clients() - before <= MAX_SHARED_WRITERS + 1  # + the clients' admin, if made
    last = shared_writer(clients, {f"{topic_name}-{MAX_SHARED_WRITERS + 9}": 1})
    for i in range(MAX_SHARED_WRITERS + 10, 2 * MAX_SHARED_WRITERS + 10):
        shared_writer(clients, {f"{topic_name}-{i}": 1})
    assert shared_writer(clients, {f"{topic_name}-0": 1}) is not first  # not used since: gone
    assert shared_writer(clients, {f"{topic_name}-{MAX_SHARED_WRITERS + 9}": 1}) is not last
