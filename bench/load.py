"""Fast loading of benchmark data into a topic."""

from __future__ import annotations

import random
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kstool.kafka.client import produce
from kstool.kafka.partitioner import partition_for

# Quix Streams reads these configs back; the embedded broker returns only what was given
TOPIC_CONFIGS = {"retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": "delete"}


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # the broker's default replication factor: 1 on one node, 3 on a cluster (bench.replication)
    admin.create_topics([NewTopic(topic, partitions, -1, config=TOPIC_CONFIGS)])[topic].result(timeout=30)


def load(bootstrap: str, topic: str, records, partitions: int, by_key: bool = False) -> float:
    """Produce (key, value) pairs in large batches, then one single-record batch per partition:
    the embedded broker's high watermark only covers a batch's first record, so the last batch
    of each partition must hold exactly one. Partitions in turn, or with `by_key` where Kafka's
    partitioner puts each key (a join needs co-partitioned inputs). Returns the seconds taken."""
    started = time.perf_counter()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 100,
                         "batch.num.messages": 10_000, "batch.size": 4_000_000,
                         "queue.buffering.max.messages": 1_000_000, "compression.type": "none"})
    held: dict[int, tuple] = {}  # the last record of each partition, sent alone at the end
    for i, (key, value) in enumerate(records):
        partition = partition_for(key, partitions) if by_key else i % partitions
        if partition in held:
            _send(producer, topic, held[partition])
        held[partition] = (key, value, partition)
    producer.flush(120)
    for record in held.values():
        _send(producer, topic, record)
        producer.flush(30)
    return time.perf_counter() - started


def load_as_apps_do(bootstrap: str, topic: str, records) -> float:
    """Produce keyed records with a producer's defaults (linger 5 ms, Kafka's default
    partitioner), as an application would: small record batches (~1k records here) spread by
    key. Returns the seconds taken."""
    started = time.perf_counter()
    producer = Producer({"bootstrap.servers": bootstrap})
    for key, value in records:
        produce(producer, topic, key=key, value=value)
    producer.flush(120)
    return time.perf_counter() - started


def _send(producer, topic, record) -> None:
    key, value, partition = record
    produce(producer, topic, key=key, value=value, partition=partition)


def text_lines(n: int, words_per_line: int = 8, vocabulary: int = 10_000, seed: int = 1):
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(vocabulary)]
    for _ in range(n):
        yield None, " ".join(rng.choices(vocab, k=words_per_line)).encode()


def keyed_records(n: int, keys: int = 10_000, seed: int = 2):
    """Keyed records; the value repeats the key, so wordcount over them counts per key too."""
    rng = random.Random(seed)
    for _ in range(n):
        key = f"k{rng.randrange(keys)}".encode()
        yield key, key
