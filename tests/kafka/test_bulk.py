"""The bulk writer and Kafka's partitioner, against the real broker."""

from __future__ import annotations

from confluent_kafka import Producer

from kstool.config import build_client_config
from kstool.kafka.bulk import BulkWriter
from kstool.kafka.client import KafkaClients
from kstool.kafka.partitioner import partition_for
from tests.helpers import create_topic, end_offsets, read_all


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
    and one writer sends all tails last."""
    create_topic(kafka, topic_name, 2)
    clients = KafkaClients(build_client_config())
    held = []
    for task in range(3):
        writer = BulkWriter(clients, {topic_name: 2})
        for i in range(1000):
            writer.send(topic_name, f"t{task}-k{i % 31}".encode(), str(i).encode(), 1_000 + i)
        writer.flush(send_held=False)
        held += writer.take_held()
    assert len(held) == (6 if clients.config.single_record_tail else 0)  # one per task and partition
    last = BulkWriter(clients, {topic_name: 2})
    for topic, key, value, ts, partition in held:
        last.send(topic, key, value, ts, partition=partition)
    last.flush()
    assert len(read_all(kafka, topic_name)) == 3000
    assert sum(end_offsets(kafka, topic_name).values()) == 3000
