"""State-size scaling: the same small batch through a table-table join whose tables hold 10
keys, and whose tables hold many. Per-batch work must follow the batch, not the state (#20)."""

from __future__ import annotations

from confluent_kafka import Producer

from bench.load import create_topic
from kstool.kafka.client import produce
from kstool.kafka.partitioner import partition_for

PARTITIONS = 2
SMALL_BATCH = 10


def load_keyed(bootstrap: str, topic: str, records) -> None:
    """Keyed records where Kafka's partitioner puts them (a join needs co-partitioned inputs),
    each partition's last one in a batch of its own (the embedded broker's high watermark)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 100, "batch.num.messages": 10_000,
                         "queue.buffering.max.messages": 1_000_000})
    held: dict[int, tuple] = {}
    for key, value in records:
        partition = partition_for(key, PARTITIONS)
        if partition in held:
            produce(producer, topic, key=held[partition][0], value=held[partition][1], partition=partition)
        held[partition] = (key, value)
    producer.flush(120)
    for partition, (key, value) in held.items():
        produce(producer, topic, key=key, value=value, partition=partition)
        producer.flush(30)


def small_batch_against(run_once, env, bootstrap: str, master: str, keys: int) -> dict:
    """First run over `keys` keys per table, then a --once over SMALL_BATCH updates of them."""
    topic = f"bench-scaling-{keys}"
    for side in ("", "-right"):
        create_topic(bootstrap, topic + side, PARTITIONS)
        load_keyed(bootstrap, topic + side, ((f"k{i}".encode(), f"v{i}".encode()) for i in range(keys)))
    args = ("--kind", "table-table", "--how", "outer")
    first = run_once(env, topic, f"{topic}-app", master, "join", args)
    for side in ("", "-right"):
        load_keyed(bootstrap, topic + side, ((f"k{i}".encode(), b"changed") for i in range(SMALL_BATCH // 2)))
    second = run_once(env, topic, f"{topic}-app", master, "join", args)
    return {"keys_per_table": keys, "first_run": first, "small_batch": second}


def state_scaling(run_once, env, bootstrap: str, master: str, keys: int) -> dict:
    small = small_batch_against(run_once, env, bootstrap, master, 10)
    large = small_batch_against(run_once, env, bootstrap, master, keys)
    ratio = large["small_batch"]["processing_s"] / small["small_batch"]["processing_s"]
    return {"small_state": small, "large_state": large, "processing_ratio": round(ratio, 2)}
