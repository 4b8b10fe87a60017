"""The Kafka sink: a foreachBatch writer. Each batch's encoded rows come to the driver as
Arrow (toArrow, no Python worker start-up) and are produced by one long-lived idempotent
producer. At-least-once: Spark commits a batch only after every row was acknowledged, and a
batch re-run after a crash writes its rows again."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import pyarrow as pa

from kstool.engine.exceptions import QueryFailedError
from kstool.kafka.client import KafkaClients


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


class KafkaSink:
    def __init__(self, clients: KafkaClients, targets: list[SinkTarget]):
        self.clients = clients
        self.targets = targets
        self._producer = None
        self._failures: list[str] = []

    def _on_delivery(self, err, _msg) -> None:
        if err is not None:
            self._failures.append(err.str())

    def producer(self):
        if self._producer is None:
            self._producer = self.clients.producer(**{"enable.idempotence": True})
        return self._producer

    def write(self, table: pa.Table) -> dict[str, int]:
        producer = self.producer()
        keys = table.column("key").to_pylist()
        stamps = table.column("timestamp").cast(pa.int64()).to_pylist()
        stamps = [ts // 1000 if ts else 0 for ts in stamps]  # us -> ms; 0 = now
        written = {}
        for target in self.targets:
            values = table.column(target.value_column).to_pylist()
            for key, value, ts in zip(keys, values, stamps):
                self._produce(producer, target.topic, key, value, ts)
            written[target.topic] = len(keys)
        remaining = producer.flush(max(self.clients.timeout, 60))
        if remaining or self._failures:
            reason = self._failures[0] if self._failures else "flush timed out"
            self._failures.clear()
            raise QueryFailedError(f"{remaining or 'some'} output record(s) not delivered: {reason}")
        return written

    def _produce(self, producer, topic, key, value, ts) -> None:
        while True:
            try:
                producer.produce(topic, value=value, key=key, timestamp=ts, on_delivery=self._on_delivery)
                return
            except BufferError:
                producer.poll(0.05)

    def batch_writer(self, encode: Callable, on_batch: Callable[[BatchReport], None]):
        """The foreachBatch function (runs in the driver for each micro-batch)."""

        def write(batch_df, batch_id: int) -> None:
            started = time.monotonic()
            written = self.write(encode(batch_df).toArrow())
            on_batch(BatchReport(batch_id, written, time.monotonic() - started))
        return write
