"""The Kafka sink: a foreachBatch writer that produces each batch's rows to Kafka from the
executors (mapInArrow), with an idempotent producer. At-least-once: a batch re-run after a
crash writes its rows again; Spark commits the batch only after every row was acknowledged."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterator

import pyarrow as pa

from kstool.config import ClientConfig
from kstool.kafka.client import KafkaClients

RESULT_SCHEMA = "topic string, records long"


@dataclass(frozen=True)
class SinkTarget:
    """Write column `value_column` (binary) with the row's `key` and `timestamp` to `topic`."""

    topic: str
    value_column: str


@dataclass
class BatchReport:
    batch_id: int
    written: dict[str, int]
    seconds: float


def producer_task(config: ClientConfig, targets: list[SinkTarget]) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function: runs on executors, returns the count written per topic."""

    def produce(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        producer = KafkaClients(config).producer(**{"enable.idempotence": True})
        failures: list[str] = []

        def on_delivery(err, _msg):
            if err is not None:
                failures.append(err.str())

        counts = {t.topic: 0 for t in targets}
        for batch in batches:
            keys = batch.column("key").to_pylist()
            stamps = batch.column("timestamp").cast(pa.int64()).to_pylist()
            for target in targets:
                values = batch.column(target.value_column).to_pylist()
                for key, value, ts in zip(keys, values, stamps):
                    _produce(producer, target.topic, key, value, ts // 1000 if ts else 0, on_delivery)
                counts[target.topic] += len(keys)
        remaining = producer.flush(max(config.timeout_s, 60))
        if remaining or failures:
            raise RuntimeError(f"kstool-sink: {len(failures) + remaining} record(s) not delivered: "
                               f"{failures[0] if failures else 'flush timed out'}")
        yield pa.RecordBatch.from_pydict({"topic": list(counts), "records": list(counts.values())})
    return produce


def _produce(producer, topic, key, value, ts, on_delivery) -> None:
    while True:
        try:
            producer.produce(topic, value=value, key=key, timestamp=ts, on_delivery=on_delivery)
            return
        except BufferError:
            producer.poll(0.05)


def batch_writer(config: ClientConfig, targets: list[SinkTarget], encode, on_batch: Callable[[BatchReport], None]):
    """The foreachBatch function (runs in the driver for each micro-batch)."""
    task = producer_task(config, targets)

    def write(batch_df, batch_id: int) -> None:
        started = time.monotonic()
        rows = encode(batch_df).mapInArrow(task, RESULT_SCHEMA).collect()
        written: dict[str, int] = {}
        for row in rows:
            written[row.topic] = written.get(row.topic, 0) + row.records
        on_batch(BatchReport(batch_id, written, time.monotonic() - started))
    return write
